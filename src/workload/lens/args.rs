//! The lens's command-line flags: `run lens` (deflection grids), `run lens-chi2` (the image-plane χ²), and
//! the `maps` command (α, κ, γ and μ as FITS). Only these commands take them.

use super::chi2::Chi2Problem;
use super::io::{self as lens_io, ImageSystem};
use super::mock::{mock_systems, MockOptions};
use super::{maps, LensMode, LensModel, LensOptions, LensProblem, Preset};
use crate::exec::Mode;
use crate::workload::{OneBackendArgs, Tool, ToolArgs, Workload, WorkloadArgs};
use std::path::PathBuf;

/// The flags that describe a lens problem: a preset's grid and halos, or a catalogue on the preset's grid.
#[derive(clap::Args, Debug, Clone)]
pub struct ProblemArgs {
    /// Problem size: tiny (tests), ci (seconds on 2 cores), hff (the paper's 6730² px at 0.03″).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(Preset::NAMES))]
    pub preset: String,
    /// Grid side in pixels (the field stays ±101″).
    #[arg(long)]
    pub size: Option<usize>,
    /// Galaxy velocity-dispersion range in km/s, "LO,HI" (the paper's 10,15; 110,130 is realistic).
    #[arg(long, default_value = "10,15")]
    pub galaxy_sigma: String,
    /// Profile of the preset's halos: sie (the paper's test) or dpie (as Lenstool-HPC models clusters;
    /// docs/lens.md gives the radii). Default sie.
    #[arg(long, value_enum)]
    pub profile: Option<lens_io::HaloProfile>,
    /// Halo catalogue (CSV, docs/lens-inputs.md) instead of the preset's halos; the preset still sets the
    /// grid.
    #[arg(long)]
    pub halos: Option<PathBuf>,
    /// Cap on device memory in MiB, below what the device reports (forces tiling into bands of rows).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
}

fn parse_sigma(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("--galaxy-sigma: expected LO,HI in km/s, got '{s}'");
    let (lo, hi) = s.split_once(',').ok_or_else(bad)?;
    let lo = lo.trim().parse::<f64>().map_err(|_| bad())?;
    let hi = hi.trim().parse::<f64>().map_err(|_| bad())?;
    if !(lo > 0.0 && hi >= lo && hi < super::C_KMS) {
        return Err(format!(
            "--galaxy-sigma: expected 0 < LO <= HI < c = {} km/s, got {lo},{hi}",
            super::C_KMS
        ));
    }
    Ok((lo, hi))
}

impl ProblemArgs {
    /// The problem these flags describe; errors name the flag or the file.
    pub fn problem(&self) -> Result<LensProblem, String> {
        let preset: Preset = self.preset.parse()?;
        let opts = LensOptions {
            n: self.size,
            galaxy_sigma: parse_sigma(&self.galaxy_sigma)?,
            profile: self.profile.unwrap_or(lens_io::HaloProfile::Sie),
            ..Default::default()
        };
        let mut problem = LensProblem::preset(preset, &opts).map_err(|e| format!("--size: {e}"))?;
        if let Some(path) = &self.halos {
            if self.profile.is_some() {
                return Err(format!(
                    "--profile sets the preset's halos; {} gives each halo its own profile (drop one of the two)",
                    path.display()
                ));
            }
            let records = lens_io::read_halos(path).map_err(|e| e.to_string())?;
            let model = LensModel::from_catalogue(&records, problem.cosmology)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default();
            problem = LensProblem::new(
                &format!("{}:{name}", problem.preset),
                problem.n,
                problem.pixel,
                model.cosmology,
                model.halos,
            )
            .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        problem.device_mem_cap =
            crate::workload::mib_flag("--device-mem-mib", self.device_mem_mib)?;
        // Refused before any work: a run the host cannot hold would be killed half-way.
        if let Some(problem) = crate::backend::cpu::available_memory()
            .and_then(|available| problem.host_memory_problem(available))
        {
            return Err(format!("--size: {problem}"));
        }
        Ok(problem)
    }
}

/// `astroport run lens`: deflection grids.
#[derive(clap::Args, Debug, Clone)]
pub struct LensArgs {
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Modes of the direct grid, comma-separated or repeated: f32, f64, or a mixed-precision scheme
    /// (mixed, mixed-patches, mixed-paper, mixed-budget); docs/lens.md. `split` here is `--method split`.
    #[arg(long = "precision", value_delimiter = ',', default_value = "f32")]
    pub modes: Vec<LensMode>,
    /// Grid methods, comma-separated or repeated: direct (every `--precision` mode) and/or split (the
    /// near/far split within the paper's budget, its own precision).
    #[arg(long = "method", value_delimiter = ',', default_value = "direct")]
    pub methods: Vec<Method>,
}

/// The modes a `--method` list and a `--precision` list ask for: the precisions for `direct`, then the
/// split (once) for `split`.
fn grid_modes(methods: &[Method], precisions: &[LensMode]) -> Vec<LensMode> {
    let mut modes: Vec<LensMode> = Vec::new();
    for m in methods {
        let add: &[LensMode] = match m {
            Method::Direct => precisions,
            Method::Split => &[LensMode::Split],
        };
        for &mode in add {
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
    }
    modes
}

impl WorkloadArgs for LensArgs {
    const NAME: &'static str = "lens";
    const ABOUT: &'static str =
        "Lens deflection gradients (Rexroth et al. 2020): SIE and dPIE halos on a pixel grid";
    const PRESETS: &'static [&'static str] = &Preset::NAMES;
    const TOOLS: &'static [Tool] = &[Tool::of::<MapsArgs>()];
    type Workload = LensProblem;
    fn build(&self) -> Result<Vec<LensProblem>, String> {
        Ok(vec![self.problem.problem()?])
    }
    fn modes(&self) -> Vec<LensMode> {
        grid_modes(&self.methods, &self.modes)
    }
}

/// `astroport run lens-chi2`: the image-plane χ² of multiple-image systems.
#[derive(clap::Args, Debug, Clone)]
pub struct Chi2Args {
    #[command(flatten)]
    pub problem: ProblemArgs,
    /// Observed systems (CSV, docs/lens-inputs.md); default: mock systems drawn from the model itself.
    #[arg(long)]
    pub images: Option<PathBuf>,
    /// Write the systems used to this CSV file.
    #[arg(long)]
    pub write_images: Option<PathBuf>,
    /// Grid methods, comma-separated or repeated: direct (the mixed-budget grid) or split (the near/far
    /// split within the same budget).
    #[arg(long = "method", value_delimiter = ',', default_value = "direct")]
    pub methods: Vec<Method>,
}

/// How the χ²'s deflection grid is formed.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Direct,
    Split,
}

impl Chi2Args {
    fn systems(&self, problem: &LensProblem) -> Result<Vec<ImageSystem>, String> {
        let systems = match &self.images {
            Some(path) => lens_io::read_image_systems(path, problem.cosmology.z_lens)
                .map_err(|e| e.to_string())?,
            None => mock_systems(problem, &MockOptions::default())?,
        };
        if let Some(path) = &self.write_images {
            lens_io::write_image_systems(path, &systems).map_err(|e| e.to_string())?;
        }
        Ok(systems)
    }
}

impl WorkloadArgs for Chi2Args {
    const NAME: &'static str = "lens-chi2";
    const ABOUT: &'static str =
        "Lens image-plane χ² of multiple-image systems: mixed-budget grid and float64 delensing";
    const PRESETS: &'static [&'static str] = &Preset::NAMES;
    type Workload = Chi2Problem;
    fn build(&self) -> Result<Vec<Chi2Problem>, String> {
        let problem = self.problem.problem()?;
        let systems = self.systems(&problem)?;
        Ok(vec![Chi2Problem::new(problem, systems)?])
    }
    fn modes(&self) -> Vec<LensMode> {
        grid_modes(&self.methods, &[LensMode::BUDGET])
    }
}

/// `astroport maps`: the deflection grid on one backend, then κ, γ and μ, as FITS images.
#[derive(clap::Args, Debug, Clone)]
pub struct MapsArgs {
    #[command(flatten)]
    pub problem: ProblemArgs,
    #[command(flatten)]
    pub backend: OneBackendArgs,
    /// Mode of the direct deflection grid (f32, f64 or a mixed scheme).
    #[arg(long = "precision", default_value = "f64")]
    pub mode: LensMode,
    /// Grid method: direct (in `--precision`) or split (the near/far split within the paper's budget, its
    /// own precision).
    #[arg(long = "method", default_value = "direct")]
    pub method: Method,
    /// Output prefix: writes PREFIX_alpha_x.fits, _alpha_y, _kappa, _gamma1, _gamma2, _mu.
    #[arg(long)]
    pub prefix: PathBuf,
}

impl ToolArgs for MapsArgs {
    const NAME: &'static str = "maps";
    const ABOUT: &'static str =
        "Lens maps: deflection, convergence, shear and magnification as FITS images, on one backend";
    fn run(self) -> Result<i32, String> {
        let problem = self.problem.problem()?;
        // Before any work: the maps' folder must exist.
        let folder = crate::inputs::folder_of(&self.prefix);
        if !folder.is_dir() {
            return Err(format!(
                "--prefix {}: the folder {} does not exist",
                self.prefix.display(),
                folder.display()
            ));
        }
        let mode = grid_modes(&[self.method], &[self.mode])[0];
        let discovery = self.backend.discovery()?;
        let target = self.backend.target(&discovery)?;
        let alpha = problem.deflection(target, mode, &self.backend.options())?;
        let derived = maps::derived_maps(&alpha.alpha_x, &alpha.alpha_y, problem.n, problem.pixel);
        let written = maps::write_maps(
            &self.prefix,
            &alpha.alpha_x,
            &alpha.alpha_y,
            &derived,
            problem.n,
            problem.pixel,
            (0.0, 0.0),
        )
        .map_err(|e| e.to_string())?;
        println!(
            "lens maps, preset {} ({}), {} {}: grid {:.3} ms",
            problem.preset,
            problem.describe(),
            target.id(),
            mode.name(),
            alpha.seconds * 1e3
        );
        for path in written {
            println!("  wrote {}", path.display());
        }
        Ok(0)
    }
}
