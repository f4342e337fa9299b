//! Spherical harmonics' command-line flags: `run sht`, one problem per transform of a preset.

use super::{ShtProblem, Transform, PRESETS};
use crate::backend::Precision;
use crate::workload::WorkloadArgs;

/// `--transform`: synthesis or analysis.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransformArg {
    Alm2map,
    Map2alm,
}

/// `astroport run sht`: the presets' transforms, verified against the float64 `cpu` reference.
#[derive(clap::Args, Debug, Clone)]
pub struct ShtArgs {
    /// Problem: tiny (HEALPix nside 32, lmax 64: the oracle's size), ci (nside 256, lmax 512), planck (nside
    /// 2048, lmax 4096), highl (Gauss-Legendre, lmax 8192).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    /// Transforms, comma-separated or repeated.
    #[arg(long = "transform", value_delimiter = ',', default_values = ["alm2map", "map2alm"])]
    pub transforms: Vec<TransformArg>,
    /// Jacobi refinements of map2alm (healpy's iter; 0 times one transform, the bench's case).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub iter: u32,
    /// Cap on device memory in MiB, below what the device reports (forces tiling into bands of m).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
}

impl WorkloadArgs for ShtArgs {
    const NAME: &'static str = "sht";
    const ABOUT: &'static str =
        "Spherical harmonic transforms (S2HAT): alm2map and map2alm on HEALPix and Gauss-Legendre rings";
    const PRESETS: &'static [&'static str] = &PRESETS;
    type Workload = ShtProblem;
    fn build(&self) -> Result<Vec<ShtProblem>, String> {
        let cap = self
            .device_mem_mib
            .map(|m| {
                m.checked_mul(1 << 20).ok_or_else(|| {
                    format!("--device-mem-mib: {m} MiB is more bytes than 64 bits hold")
                })
            })
            .transpose()?;
        self.transforms
            .iter()
            .map(|t| {
                let transform = match t {
                    TransformArg::Alm2map => Transform::Alm2Map,
                    TransformArg::Map2alm => Transform::Map2Alm {
                        iter: self.iter as usize,
                    },
                };
                let mut problem = ShtProblem::preset(&self.preset, transform)?;
                problem.device_mem_cap = cap;
                Ok(problem)
            })
            .collect()
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F64]
    }
}
