//! Cubature's command-line flags: `run cubature`, a suite of integrations (every combination of the listed
//! methods, integrands, dimensions and tolerances), from a preset or given lists.

use super::mcubes::McubesOptions;
use super::pagani::{PaganiOptions, WORKING_REGIONS};
use super::rule::{MAX_DIM, MIN_DIM};
use super::{CubatureProblem, Integrand, Method};

/// `--method`: an integrator, or `auto`, which picks one from the dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MethodChoice {
    Given(Method),
    Auto,
}

impl std::str::FromStr for MethodChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(MethodChoice::Auto),
            other => other
                .parse()
                .map(MethodChoice::Given)
                .map_err(|_| format!("unknown method '{s}' (expected auto, pagani or mcubes)")),
        }
    }
}

/// From this dimension `auto` picks m-Cubes: PAGANI's region list explodes there (on an H200, 6 of 36
/// PAGANI runs of f1-f6 in 9D and 10D at 1e-4..1e-6 converged, none in 12D or 15D at 1e-3; m-Cubes
/// converged f2-f6 in 9-15D at 1e-3 and 1e-4 in 8 ms to 4 s; reports/nvidia-h200/cubature-coverage.md).
pub const AUTO_MCUBES_DIM: usize = 9;
use crate::backend::Precision;
use crate::workload::{require_positive, WorkloadArgs};

/// The suites `--preset` names: both methods on the control and cheap Genz integrands at epsrel 1e-3,
/// `tiny` in 3D, `ci` in 5D (the dimension of the seed's smaller tables).
pub const PRESETS: [&str; 2] = ["tiny", "ci"];

/// Calls-per-iteration cap and wall-time budget of the preset suites (bounded for CPUs); a custom suite
/// uses the integrators' own (1e9 calls, no time limit) unless `--max-ncall` / `--max-seconds` say.
const PRESET_MAX_NCALL: u64 = 10_000_000;
const PRESET_MAX_SECONDS: f64 = 60.0;

/// `astroport run cubature`.
#[derive(clap::Args, Debug, Clone)]
pub struct CubatureArgs {
    /// The suite: tiny (Σx and f3 in 3D) or ci (Σx, f1, f3, f5, f6 in 5D), both methods, epsrel 1e-3. Giving
    /// any of --method, --integrand, --dim, --epsrel makes a custom suite instead.
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS),
          conflicts_with_all = ["method", "integrand", "dim", "epsrel"])]
    pub preset: String,
    /// Integrators, comma-separated: auto (PAGANI below 9 dimensions, m-Cubes from 9), pagani, mcubes
    /// (custom suite default: auto).
    #[arg(long)]
    pub method: Option<String>,
    /// Integrands, comma-separated: sum (the control), f1..f6 (custom suite default: f4).
    #[arg(long)]
    pub integrand: Option<String>,
    /// Dimensions, comma-separated, 2-15 (custom suite default: 5).
    #[arg(long)]
    pub dim: Option<String>,
    /// Relative error targets, comma-separated, in (0, 1) (custom suite default: 1e-3).
    #[arg(long)]
    pub epsrel: Option<String>,
    /// Absolute error target (default: pure relative stopping, as the seed).
    #[arg(long, default_value_t = 1e-40)]
    pub epsabs: f64,
    /// m-Cubes: calls per iteration of the first attempt (×10 per failed attempt), at least 1000.
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(super::mcubes::MIN_NCALL..))]
    pub ncall: u64,
    /// m-Cubes: largest calls per iteration (preset suites: 1e7; custom: 1e9).
    #[arg(long)]
    pub max_ncall: Option<u64>,
    /// m-Cubes: seed of the counter-based generator.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// PAGANI: memory the region list may use, MiB (default: the device's free memory; cpu: 80 % of the
    /// host's available memory).
    #[arg(long)]
    pub memory_mib: Option<u64>,
    /// PAGANI: split size (regions) above which the threshold classification is tried before the estimate
    /// has settled (docs/cubature.md).
    #[arg(long, default_value_t = WORKING_REGIONS)]
    pub working_regions: u64,
    /// PAGANI: let regions finish in the first iteration on their raw null-rule errors, as the seed's code
    /// does (for comparisons with it; the reported error can then be too small, docs/cubature.md).
    #[arg(long)]
    pub finish_unrefined: bool,
    /// PAGANI: iteration cap.
    #[arg(long, default_value_t = 700, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: u64,
    /// Wall-time budget per integration, seconds (the run then stops with time_limit; preset suites: 60).
    #[arg(long)]
    pub max_seconds: Option<f64>,
}

/// A comma-separated option value, each item parsed; a bad item names the flag, the item and why.
fn parse_list<T>(flag: &str, text: &str) -> Result<Vec<T>, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.split(',')
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|e| format!("--{flag}: '{}' is not valid ({e})", v.trim()))
        })
        .collect()
}

impl CubatureArgs {
    fn custom(&self) -> bool {
        self.method.is_some()
            || self.integrand.is_some()
            || self.dim.is_some()
            || self.epsrel.is_some()
    }

    /// The lists of the suite: (methods, integrands, dimensions, tolerances) as text.
    fn lists(&self) -> [String; 4] {
        let given = |v: &Option<String>, default: &str| v.clone().unwrap_or_else(|| default.into());
        if self.custom() {
            return [
                given(&self.method, "auto"),
                given(&self.integrand, "f4"),
                given(&self.dim, "5"),
                given(&self.epsrel, "1e-3"),
            ];
        }
        let (integrands, dim) = match self.preset.as_str() {
            "tiny" => ("sum,f3", "3"),
            _ => ("sum,f1,f3,f5,f6", "5"),
        };
        [
            "pagani,mcubes".into(),
            integrands.into(),
            dim.into(),
            "1e-3".into(),
        ]
    }
}

impl WorkloadArgs for CubatureArgs {
    const NAME: &'static str = "cubature";
    const ABOUT: &'static str =
        "Adaptive cubature (Sakiotis et al.): PAGANI and m-Cubes on the Genz integrands in 2-15 dimensions";
    const PRESETS: &'static [&'static str] = &PRESETS;
    type Workload = CubatureProblem;
    fn build(&self) -> Result<Vec<CubatureProblem>, String> {
        let [methods, integrands, dims, epsrels] = self.lists();
        let methods: Vec<MethodChoice> = parse_list("method", &methods)?;
        let integrands: Vec<Integrand> = parse_list("integrand", &integrands)?;
        let dims: Vec<usize> = parse_list("dim", &dims)?;
        if let Some(&d) = dims.iter().find(|&&d| !(MIN_DIM..=MAX_DIM).contains(&d)) {
            return Err(format!("--dim: {d} is outside {MIN_DIM}..={MAX_DIM}"));
        }
        let epsrels: Vec<f64> = parse_list("epsrel", &epsrels)?;
        if let Some(e) = epsrels.iter().find(|&&e| !(e > 0.0 && e < 1.0)) {
            return Err(format!("--epsrel: {e} is not in (0, 1)"));
        }
        require_positive("--epsabs", self.epsabs)?;
        if let Some(t) = self.max_seconds {
            require_positive("--max-seconds", t)?;
        }
        let custom = self.custom();
        let preset = if custom { "custom" } else { &self.preset };
        let max_seconds = self.max_seconds.or((!custom).then_some(PRESET_MAX_SECONDS));
        let max_ncall = self.max_ncall.unwrap_or(if custom {
            McubesOptions::default().max_ncall
        } else {
            PRESET_MAX_NCALL
        });
        let mut problems = Vec::new();
        for &choice in &methods {
            for &integrand in &integrands {
                for &dim in &dims {
                    let method = match choice {
                        MethodChoice::Given(m) => m,
                        MethodChoice::Auto if dim >= AUTO_MCUBES_DIM => Method::Mcubes,
                        MethodChoice::Auto => Method::Pagani,
                    };
                    for &epsrel in &epsrels {
                        problems.push(CubatureProblem {
                            preset: preset.into(),
                            method,
                            chosen_automatically: choice == MethodChoice::Auto,
                            integrand,
                            dim,
                            pagani: PaganiOptions {
                                epsrel,
                                epsabs: self.epsabs,
                                max_iterations: self.max_iterations as usize,
                                memory_limit: self.memory_mib.map(|m| m << 20),
                                working_regions: self.working_regions,
                                time_limit_s: max_seconds,
                                finish_unrefined: self.finish_unrefined,
                            },
                            mcubes: McubesOptions {
                                epsrel,
                                epsabs: self.epsabs,
                                ncall: self.ncall,
                                max_ncall,
                                seed: self.seed,
                                time_limit_s: max_seconds,
                                ..McubesOptions::default()
                            },
                        });
                    }
                }
            }
        }
        Ok(problems)
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F64]
    }
}
