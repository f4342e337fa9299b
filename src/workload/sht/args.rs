//! Spherical harmonics' command-line flags: `run sht`, one problem per transform of a preset.

use super::cpu::HEALPIX_UNSEEN;
use super::io::{read_alm_fits, read_healpix_map, write_alm_fits, write_healpix_map};
use super::{alm2map_on, map2alm_on, RingGrid, ShtProblem, Transform, PRESETS};
use crate::backend::{discover, Precision};
use crate::workload::{OneBackendArgs, Tool, ToolArgs, WorkloadArgs};
use std::path::PathBuf;

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
    const TOOLS: &'static [Tool] = &[Tool::of::<ShtToolArgs>()];
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

/// `astroport sht alm2map|map2alm`: one transform of a healpy FITS file on one backend.
#[derive(clap::Args, Debug, Clone)]
pub struct ShtToolArgs {
    /// alm2map: a_lm file (healpy's write_alm) to a HEALPix map; map2alm: map (healpy's write_map, RING or
    /// NESTED) to a_lm.
    #[arg(value_enum)]
    pub direction: TransformArg,
    /// Input FITS file.
    #[arg(long = "in")]
    pub input: PathBuf,
    /// Output FITS file (written only when everything succeeded; replaced atomically).
    #[arg(long = "out")]
    pub output: PathBuf,
    /// Largest degree. alm2map: must equal the file's.
    #[arg(long)]
    pub lmax: usize,
    /// Largest order (map2alm; default lmax).
    #[arg(long)]
    pub mmax: Option<usize>,
    /// HEALPix resolution of the map to make (alm2map).
    #[arg(long)]
    pub nside: Option<usize>,
    /// Jacobi refinements of map2alm (healpy's iter, whose default is 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub iter: u32,
    /// Polarisation (T,E,B <-> T,Q,U): not implemented yet, refused.
    #[arg(long)]
    pub pol: bool,
    #[command(flatten)]
    pub backend: OneBackendArgs,
}

impl ToolArgs for ShtToolArgs {
    const NAME: &'static str = "sht";
    const ABOUT: &'static str =
        "Spherical harmonic transforms of healpy FITS files: alm2map (a_lm -> map) and map2alm (map -> a_lm)";
    fn run(self) -> Result<i32, String> {
        if self.pol {
            return Err(
                "--pol: spin-2 transforms (T,E,B <-> T,Q,U) are not implemented yet (issue 14); run without \
                 --pol for the temperature field"
                    .into(),
            );
        }
        let input = self.input.display().to_string();
        // Inputs are read and checked before any backend is looked for.
        match self.direction {
            TransformArg::Alm2map => {
                let nside = self
                    .nside
                    .ok_or("--nside: alm2map needs the resolution of the map to make")?;
                let alm = read_alm_fits(&self.input).map_err(|e| e.to_string())?;
                if alm.lmax != self.lmax {
                    return Err(format!(
                        "{input}: the a_lm go to l = {} (INDEX, MAX-LPOL), --lmax is {}",
                        alm.lmax, self.lmax
                    ));
                }
                warn_lmax(self.lmax, nside);
                let grid = RingGrid::healpix(nside).map_err(|e| format!("--nside: {e}"))?;
                let discovery = discover();
                let target = self.backend.target(&discovery)?;
                let m = alm2map_on(target, &grid, &alm, &self.backend.options(), None)
                    .map_err(|e| format!("alm2map on {}: {e}", target.id()))?;
                report("alm2map", &grid, self.lmax, target.id(), m.times.median);
                write_healpix_map(&self.output, nside, false, &[("TEMPERATURE", &m.output)])
                    .map_err(|e| e.to_string())?;
            }
            TransformArg::Map2alm => {
                let map = read_healpix_map(&self.input, 1).map_err(|e| e.to_string())?;
                let mmax = self.mmax.unwrap_or(self.lmax);
                if mmax > self.lmax {
                    return Err(format!("--mmax {mmax} is above --lmax {}", self.lmax));
                }
                warn_lmax(self.lmax, map.nside);
                let grid = RingGrid::healpix(map.nside)?;
                let (name, pixels) = &map.fields[0];
                if let Some(p) = pixels
                    .iter()
                    .position(|v| !v.is_finite() || *v == HEALPIX_UNSEEN)
                {
                    return Err(format!(
                        "{input}, column '{name}': pixel {p} is {} (NaN, infinite or healpy's UNSEEN): \
                         masked analysis is not supported yet",
                        pixels[p]
                    ));
                }
                let discovery = discover();
                let target = self.backend.target(&discovery)?;
                let m = map2alm_on(
                    target,
                    &grid,
                    pixels,
                    (self.lmax, mmax, self.iter as usize),
                    &self.backend.options(),
                    None,
                )
                .map_err(|e| format!("{input}, column '{name}': {e}"))?;
                report("map2alm", &grid, self.lmax, target.id(), m.times.median);
                write_alm_fits(&self.output, &m.output).map_err(|e| e.to_string())?;
            }
        }
        eprintln!("wrote {}", self.output.display());
        Ok(0)
    }
}

/// healpy's limit of a useful lmax: above 3 nside − 1 the map cannot hold the degrees (aliasing).
fn warn_lmax(lmax: usize, nside: usize) {
    if lmax > 3 * nside - 1 {
        eprintln!(
            "warning: --lmax {lmax} is above 3 nside - 1 = {} for nside {nside}: degrees above it alias",
            3 * nside - 1
        );
    }
}

fn report(what: &str, grid: &RingGrid, lmax: usize, target: String, seconds: f64) {
    eprintln!(
        "sht {what}: {}, lmax {lmax} on {target}: {:.3} ms",
        grid.describe(),
        seconds * 1e3
    );
}
