//! The integrators as objects ([`Pagani`], [`MCubes`]: `integrate` an integrand on any backend) and one
//! integration as a workload the driver runs on every backend ([`CubatureProblem`]): its answer, whether
//! its claim holds against the closed-form truth, and what its kernels cost.

use super::device::{DeviceRegions, DeviceSampler, KernelStats};
use super::mcubes::{self, CpuSampler, McubesOptions};
use super::pagani::{self, CpuEvaluator, CpuRegions, PaganiOptions};
use super::rule::{Rule, MAX_DIM, MIN_DIM};
use super::{Integrand, Method, Outcome, Stop};
use crate::backend::{Precision, Resources, StepReport, Target};
use crate::exec::{time_host, Measured, RunError, RunOptions};
use crate::workload::{Accuracy, Verdict, Work, Workload};
use serde::Serialize;

/// A converged m-Cubes estimate is checked at this many of its standard deviations from the truth (an
/// honest 1σ claim fails this with probability 6e-5); PAGANI's error is an error bound and is checked as
/// it stands.
pub const MCUBES_CHECK_SIGMAS: f64 = 4.0;

/// PAGANI (Sakiotis et al. 2021, "PAGANI: a parallel adaptive GPU algorithm for numerical integration"):
/// deterministic, every region evaluated in parallel with the degree-9 rule and its null rules.
///
/// ```no_run
/// use astroport::workload::cubature::{Integrand, Integrator, Pagani, PaganiOptions};
/// let pagani = Pagani::new(PaganiOptions { epsrel: 1e-6, ..Default::default() });
/// let cpu = astroport::backend::open("cpu").unwrap();
/// let out = pagani.integrate(Integrand::F4, 5, &cpu).unwrap();
/// println!("{} ± {} ({})", out.estimate, out.error, out.stop.name());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Pagani {
    pub options: PaganiOptions,
}

/// An integrator of the Genz integrands over the unit cube, on any backend.
pub trait Integrator {
    /// ∫ of `integrand` over [0, 1]^dim on one backend, with what each kernel cost on a device.
    fn integrate_with_stats(
        &self,
        integrand: Integrand,
        dim: usize,
        backend: &Target,
    ) -> Result<(Outcome, KernelStats), String>;

    /// ∫ of `integrand` over [0, 1]^dim on one backend.
    fn integrate(
        &self,
        integrand: Integrand,
        dim: usize,
        backend: &Target,
    ) -> Result<Outcome, String> {
        self.integrate_with_stats(integrand, dim, backend)
            .map(|(o, _)| o)
    }
}

impl Pagani {
    pub fn new(options: PaganiOptions) -> Self {
        Pagani { options }
    }
}

impl Integrator for Pagani {
    fn integrate_with_stats(
        &self,
        integrand: Integrand,
        dim: usize,
        backend: &Target,
    ) -> Result<(Outcome, KernelStats), String> {
        let (lo, hi) = (vec![0.0; dim], vec![1.0; dim]);
        let rule = Rule::new(dim)?;
        match backend {
            Target::Cpu(_) => {
                let mut ev = CpuEvaluator {
                    rule: &rule,
                    integrand,
                    params: integrand.params(dim),
                };
                let mut regions = CpuRegions::new(&lo, &hi, &mut ev);
                let o = pagani::integrate(integrand, &rule, &self.options, &mut regions)?;
                Ok((o, KernelStats::default()))
            }
            Target::Device(dev) => {
                // The regions live on the device: the memory classification sees its free memory (CUDA asks
                // the driver; OpenCL and SYCL report only their total), and the split's bounds must fit one
                // allocation.
                let mut options = self.options.clone();
                let free = dev.free_memory().unwrap_or(dev.info().global_mem_bytes);
                let per_alloc =
                    dev.info().max_alloc_bytes / (16 * dim as u64) * pagani::region_bytes(dim);
                options.memory_limit = Some(
                    options
                        .memory_limit
                        .unwrap_or(u64::MAX)
                        .min(free)
                        .min(per_alloc),
                );
                let mut regions = DeviceRegions::new(dev.as_ref(), integrand, &rule, &lo, &hi);
                let mut o = pagani::integrate(integrand, &rule, &options, &mut regions)?;
                o.build_s = regions.stats.build_s;
                Ok((o, std::mem::take(&mut regions.stats)))
            }
        }
    }
}

/// m-Cubes (Sakiotis et al. 2022, "m-Cubes: an efficient and portable implementation of multi-dimensional
/// integration for GPUs"): VEGAS importance sampling with sub-cube stratification, counter-based random
/// numbers, so every backend draws the same points.
#[derive(Debug, Clone, Default)]
pub struct MCubes {
    pub options: McubesOptions,
}

impl MCubes {
    pub fn new(options: McubesOptions) -> Self {
        MCubes { options }
    }
}

/// The error m-Cubes reports is one standard deviation.
impl Integrator for MCubes {
    fn integrate_with_stats(
        &self,
        integrand: Integrand,
        dim: usize,
        backend: &Target,
    ) -> Result<(Outcome, KernelStats), String> {
        if !(MIN_DIM..=MAX_DIM).contains(&dim) {
            return Err(format!(
                "m-Cubes: dimension {dim} is outside {MIN_DIM}..={MAX_DIM}"
            ));
        }
        let (lo, hi) = (vec![0.0; dim], vec![1.0; dim]);
        match backend {
            Target::Cpu(_) => {
                let mut s = CpuSampler {
                    integrand,
                    params: integrand.params(dim),
                    lo: lo.clone(),
                    width: vec![1.0; dim],
                };
                let o = mcubes::integrate(integrand, &lo, &hi, &self.options, &mut s)?;
                Ok((o, KernelStats::default()))
            }
            Target::Device(dev) => {
                let mut s = DeviceSampler::new(dev.as_ref(), integrand, &lo, &hi);
                let mut o = mcubes::integrate(integrand, &lo, &hi, &self.options, &mut s)?;
                o.build_s = s.stats.build_s;
                Ok((o, s.stats))
            }
        }
    }
}

/// One integration: a method, an integrand over the unit cube of one dimension, and the options.
#[derive(Debug, Clone)]
pub struct CubatureProblem {
    pub preset: String,
    pub method: Method,
    /// The method was picked by `--method auto` (shown in the problem's description).
    pub chosen_automatically: bool,
    pub integrand: Integrand,
    pub dim: usize,
    pub pagani: PaganiOptions,
    pub mcubes: McubesOptions,
}

/// What one run gave: the answer and what its kernels cost.
#[derive(Debug, Clone)]
pub struct Integration {
    pub outcome: Outcome,
    pub kernels: KernelStats,
    /// The first integration's wall time over the timed median, when a warm-up ran first.
    pub cold_start_s: Option<f64>,
}

/// Cubature's own figures in a row: the answer, its claim and how it compares with the truth.
#[derive(Debug, Clone, Serialize)]
pub struct CubatureDetails {
    pub method: Method,
    pub epsrel: f64,
    pub epsabs: f64,
    pub true_value: f64,
    pub true_rel_error: f64,
    /// Claims convergence and |estimate − truth| ≤ reported error (m-Cubes: one standard deviation, so
    /// about 68 % of honest claims are covered); absent without a claim.
    pub covered: Option<bool>,
    /// What the reported error claims: "error bound" (PAGANI) or "1 sigma" (m-Cubes).
    pub claim: &'static str,
    /// Device jobs run (0 on `cpu`).
    pub jobs: u64,
    /// With a warm-up: the first integration's wall time over the timed median, seconds (the one-time cost a
    /// command-line user pays: program builds, module loading, first allocations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_start_s: Option<f64>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl CubatureProblem {
    pub fn epsrel(&self) -> f64 {
        match self.method {
            Method::Pagani => self.pagani.epsrel,
            Method::Mcubes => self.mcubes.epsrel,
        }
    }

    fn epsabs(&self) -> f64 {
        match self.method {
            Method::Pagani => self.pagani.epsabs,
            Method::Mcubes => self.mcubes.epsabs,
        }
    }

    /// One integration on one target.
    pub fn integrate(&self, target: &Target) -> Result<Integration, String> {
        let (outcome, kernels) = match self.method {
            Method::Pagani => Pagani::new(self.pagani.clone()).integrate_with_stats(
                self.integrand,
                self.dim,
                target,
            )?,
            Method::Mcubes => MCubes::new(self.mcubes.clone()).integrate_with_stats(
                self.integrand,
                self.dim,
                target,
            )?,
        };
        Ok(Integration {
            outcome,
            kernels,
            cold_start_s: None,
        })
    }
}

/// Each kernel's device time over a run, with its resources, as per-step reports.
fn kernel_steps(stats: &KernelStats) -> Vec<StepReport> {
    stats
        .kernels
        .iter()
        .map(|(name, seconds, resources)| StepReport {
            name: name.clone(),
            median_s: *seconds,
            resources: Some(resources.clone()),
            local_used: 0,
        })
        .collect()
}

impl Workload for CubatureProblem {
    /// Both integrators work in float64 only.
    type Mode = Precision;
    type Output = Integration;
    /// The closed-form value of the integral.
    type Reference = f64;
    type Details = CubatureDetails;

    fn name(&self) -> &'static str {
        "cubature"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        format!(
            "{}{} {} {}D epsrel {:e}",
            self.method.name(),
            if self.chosen_automatically {
                " (auto)"
            } else {
                ""
            },
            self.integrand,
            self.dim,
            self.epsrel()
        )
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F64]
    }
    fn work(&self, output: &Integration) -> Option<Work> {
        Some(Work {
            units: output.outcome.evaluations as f64,
            unit_name: "evaluations",
        })
    }
    fn reference(&self) -> f64 {
        self.integrand.true_value(self.dim)
    }
    /// Each run is a whole adaptive integration, timed by its own wall clock (kernels, the host's decisions
    /// and the transfers between them); the kernels' device times are the row's steps.
    fn execute(
        &self,
        target: &Target,
        _mode: Precision,
        opts: &RunOptions,
    ) -> Result<Measured<Integration>, RunError> {
        if !target.info().fp64 {
            return Err(RunError::Unsupported("device has no fp64 support".into()));
        }
        // The first integration builds the programs; later ones find them cached.
        let (mut build_s, mut first_s) = (None, None);
        let (mut run, times) = time_host(opts, "wall clock", || {
            let run = self.integrate(target)?;
            build_s.get_or_insert(run.outcome.build_s);
            first_s.get_or_insert(run.outcome.total_s);
            Ok(run)
        })?;
        if opts.warmup > 0 {
            run.cold_start_s = first_s.map(|f| (f - times.median).max(0.0));
        }
        let Target::Device(_) = target else {
            return Ok(Measured::host(run, times));
        };
        let steps = kernel_steps(&run.kernels);
        let main = steps
            .iter()
            .max_by(|a, b| a.median_s.total_cmp(&b.median_s))
            .and_then(|s| s.resources.clone())
            .unwrap_or_else(|| Resources {
                source: "no kernel ran".into(),
                ..Resources::default()
            });
        Ok(Measured {
            output: run,
            times,
            build_s,
            resources: Some(main),
            launch: None,
            steps,
            build_options: String::new(),
        })
    }
    /// Every model evaluates the same regions (PAGANI) or the same random points (m-Cubes) in the same
    /// order: where a device took the same path as the `cpu` run (same iterations, evaluations and stop), its
    /// estimate must equal the cpu's to 1e-12 and its error to 1e-9 (only the math library's last bits and,
    /// for m-Cubes on GPUs, the order of atomic additions differ). A different path is not compared.
    const CHECKS_AGAINST_CPU: bool = true;
    fn agrees_with_cpu(&self, run: &Integration, cpu: &Integration) -> Result<(), String> {
        let (o, c) = (&run.outcome, &cpu.outcome);
        if (o.iterations, o.evaluations, o.stop) != (c.iterations, c.evaluations, c.stop) {
            return Ok(());
        }
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        if !(rel(o.estimate, c.estimate) <= 1e-12 && rel(o.error, c.error) <= 1e-9) {
            return Err(format!(
                "same {} evaluations, but estimate {:.15e} ± {:.6e} against the cpu's {:.15e} ± {:.6e}",
                o.evaluations, o.estimate, o.error, c.estimate, c.error
            ));
        }
        Ok(())
    }
    fn verify(&self, run: &Integration, truth: &f64, _mode: Precision) -> Verdict<CubatureDetails> {
        let o = &run.outcome;
        let abs = (o.estimate - truth).abs();
        let converged = o.stop == Stop::Converged;
        let allowed = match self.method {
            Method::Pagani => o.error,
            Method::Mcubes => MCUBES_CHECK_SIGMAS * o.error,
        };
        let finite = o.estimate.is_finite() && o.error.is_finite();
        // Only a claim can be false: a run that did not converge says so and makes none.
        let honest = !converged || abs <= allowed;
        Verdict {
            accuracy: Accuracy {
                max_abs: abs,
                max_rel: abs / truth.abs(),
                rms_abs: abs,
                non_finite: u64::from(!finite),
                tolerance_abs: if converged { allowed } else { f64::INFINITY },
                tolerance_rel: f64::INFINITY,
                unit: "integral".into(),
                pass: finite && honest,
            },
            unconverged: (!converged).then(|| {
                format!(
                    "{}: estimate {:.10e} ± {:.3e} (relative {:.2e}; asked {:e}), no claim of convergence",
                    o.stop.name(),
                    o.estimate,
                    o.error,
                    o.error / o.estimate.abs(),
                    self.epsrel()
                )
            }),
            failure: (finite && !honest).then(|| {
                format!(
                    "claims convergence with error {:.3e} but the true error is {abs:.3e}",
                    o.error
                )
            }),
            details: CubatureDetails {
                method: self.method,
                epsrel: self.epsrel(),
                epsabs: self.epsabs(),
                true_value: *truth,
                true_rel_error: abs / truth.abs(),
                covered: converged.then(|| o.covered()),
                claim: match self.method {
                    Method::Pagani => "error bound",
                    Method::Mcubes => "1 sigma",
                },
                jobs: run.kernels.jobs,
                cold_start_s: run.cold_start_s,
                outcome: o.clone(),
            },
        }
    }
}
