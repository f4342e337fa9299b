//! Adaptive cubature: PAGANI (deterministic, every region in parallel) and m-Cubes (VEGAS with
//! stratification), as ported from CUDA to SYCL by Sakiotis, Arumugam, Paterno, Ranjan, Terzić and Zubair,
//! "Porting numerical integration codes from CUDA to oneAPI: a case study" (2023). Both are iterative: the
//! host drives the iterations and each backend runs the kernels (PAGANI's Evaluate, m-Cubes' sampling) one
//! iteration at a time through the common job interface. docs/cubature.md has the design, options and
//! recipes.
//!
//! For users: [`Pagani`] and [`MCubes`] with `integrate`. For the driver: [`CubatureProblem`].

pub mod args;
pub mod device;
pub mod integrands;
pub mod mcubes;
pub mod pagani;
pub mod problem;
pub mod rule;

pub use integrands::Integrand;
pub use mcubes::McubesOptions;
pub use pagani::PaganiOptions;
pub use problem::{CubatureProblem, Integration, Integrator, MCubes, Pagani};

use crate::backend::Program;
use serde::Serialize;

pub static PROGRAM: Program = Program {
    name: "cubature",
    opencl: include_str!("../../../cl/cubature.cl"),
    sycl: include_str!("../../../ports/sycl/cubature.cpp"),
    headers: &[
        (
            "astro_dialect.h",
            include_str!("../../../cl/common/astro_dialect.h"),
        ),
        ("cubature.h", include_str!("../../../cl/common/cubature.h")),
    ],
    opencl_options: "",
};

/// Which integrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Pagani,
    Mcubes,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Pagani => "pagani",
            Method::Mcubes => "mcubes",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pagani" => Ok(Method::Pagani),
            "mcubes" | "m-cubes" => Ok(Method::Mcubes),
            _ => Err(format!("unknown method '{s}' (expected pagani or mcubes)")),
        }
    }
}

/// Why a run stopped. Only `Converged` means the integrator's own error met the target; every other stop
/// still carries the last estimate and error, and says why it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    Converged,
    /// PAGANI: the iteration cap (700) was reached. m-Cubes: the iteration and call budgets ran out.
    IterationLimit,
    /// PAGANI: a full split would not fit in memory and no error threshold could free enough.
    MemoryLimit,
    /// PAGANI: every region finished without the global test being met.
    NoActiveRegions,
    /// m-Cubes: σ met the target but χ²/dof says the iterations disagree (the estimate is not trusted).
    Inconsistent,
    /// The run's wall-time budget (`--max-seconds`) ran out.
    TimeLimit,
    /// Not run yet.
    Running,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Converged => "converged",
            Stop::IterationLimit => "iteration_limit",
            Stop::MemoryLimit => "memory_limit",
            Stop::NoActiveRegions => "no_active_regions",
            Stop::Inconsistent => "inconsistent",
            Stop::TimeLimit => "time_limit",
            Stop::Running => "running",
        }
    }
}

/// The answer of one run, with everything needed to judge it.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub integrand: Integrand,
    pub dim: usize,
    pub estimate: f64,
    /// The integrator's own absolute error estimate (m-Cubes: one standard deviation).
    pub error: f64,
    pub stop: Stop,
    /// Integrand evaluations.
    pub evaluations: u64,
    pub iterations: usize,
    /// PAGANI: regions evaluated over all iterations, and the most in one iteration.
    pub regions: u64,
    pub peak_regions: u64,
    /// m-Cubes: χ²/dof of the iterations in the estimate, and calls per iteration at the end.
    pub chi2_dof: Option<f64>,
    pub calls_per_iteration: Option<u64>,
    /// Device-timer time of the kernels (cpu: host time of the parallel evaluation), seconds.
    pub device_s: f64,
    /// Wall time of the whole run, host work and transfers included, seconds.
    pub total_s: f64,
    /// Program build / JIT time of the first job, seconds.
    pub build_s: f64,
}

impl Outcome {
    pub fn new(integrand: Integrand, dim: usize) -> Self {
        Outcome {
            integrand,
            dim,
            estimate: f64::NAN,
            error: f64::NAN,
            stop: Stop::Running,
            evaluations: 0,
            iterations: 0,
            regions: 0,
            peak_regions: 0,
            chi2_dof: None,
            calls_per_iteration: None,
            device_s: 0.0,
            total_s: 0.0,
            build_s: 0.0,
        }
    }

    /// |estimate − truth| / |truth| on the unit cube, where the true value is known.
    pub fn true_rel_error(&self) -> f64 {
        let truth = self.integrand.true_value(self.dim);
        ((self.estimate - truth) / truth).abs()
    }

    /// Whether the run claims convergence and its true error is within its reported error ("coverage").
    pub fn covered(&self) -> bool {
        let truth = self.integrand.true_value(self.dim);
        self.stop == Stop::Converged && (self.estimate - truth).abs() <= self.error
    }
}
