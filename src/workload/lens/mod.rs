//! Gravitational-lens deflection gradients and the image-plane χ², after Rexroth et al. 2020, "High
//! Performance Computing for gravitational lens modeling: single vs double precision on GPUs and CPUs"
//! (Astronomy and Computing 30, 100340).
//!
//! The gradient of many halos (pseudo-elliptical SIS, LENSTOOL type 5, and dPIE, type 81) summed at every
//! pixel of a square grid, in float32, float64 and mixed-precision schemes ([`LensMode`]). Each halo's
//! strength b comes from its velocity dispersion and D_LS/D_S of flat ΛCDM; the float32 path forms centre
//! offsets exactly (integer pixel + float64 remainder), so it has no cancellation near halo centres.
//!
//! For users: [`LensModel`] with [`LensModel::deflection`] and [`LensModel::chi2`]. For the driver:
//! [`LensProblem`] (a model on a grid), which implements the workload interface. The files: `model`
//! (cosmology, halos, float64 physics), `tables` (the kernels' halo layout), `cpu` and `device` (the two
//! ways of computing a grid), `mixed` (modes and the error budget), `chi2` and `mock` (delensing, χ², mock
//! image systems), `maps` (κ, γ, μ), `io` (CSV and FITS), `args` (command-line flags).

pub mod args;
pub mod chi2;
mod cpu;
mod device;
pub mod io;
pub mod maps;
pub mod mixed;
pub mod mock;
pub mod model;
pub mod split;
mod split_far;
mod tables;

use crate::backend::{HostVec, KernelJob, Target};
use crate::exec::{self, DeviceBudget, Field, Measured, RunError, RunOptions, SinglePass};
use crate::workload::{vector_errors, Accuracy, Verdict, Work, Workload};
pub use device::{grid_items, MAX_HITS_PER_BAND, PIXELS_PER_ITEM, PROGRAM, ROWS_PER_ITEM};
pub use io::HaloProfile;
pub use mixed::{LensMode, MixedScheme, F32_ERROR_ULPS_DPIE, F32_ERROR_ULPS_SIE};
pub use model::*;
use rand::{Rng, SeedableRng};
use serde::Serialize;
pub use split::SplitModel;
pub use tables::{KernelTables, DPIE_STRIDE, SIE_STRIDE};

/// Seed of the halo catalogue (the paper's article number, A&C 30, 100340).
pub const DEFAULT_SEED: u64 = 100_340;

/// Float32 tolerance on |Δg| in arcsec, SIE and dPIE alike: 1/300 of an HFF pixel. Float64: relative.
pub const TOL_F32_ABS: f64 = 1e-4;
pub const TOL_F64_REL: f64 = 1e-10;

/// The generated problems: `tiny` (128², 2 + 30 halos), `ci` (1024², 2 + 700), `hff` (the paper's 6730²
/// at 0.03″/px, 2 + 700).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Tiny,
    Ci,
    Hff,
}

impl Preset {
    pub const NAMES: [&'static str; 3] = ["tiny", "ci", "hff"];
    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Ci => "ci",
            Preset::Hff => "hff",
        }
    }
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tiny" => Ok(Preset::Tiny),
            "ci" => Ok(Preset::Ci),
            "hff" => Ok(Preset::Hff),
            _ => Err(format!(
                "unknown preset '{s}' for lens (expected tiny, ci or hff)"
            )),
        }
    }
}

/// Options of a generated problem beyond its preset.
#[derive(Debug, Clone)]
pub struct LensOptions {
    /// Grid side in pixels (the field stays ±101″).
    pub n: Option<usize>,
    /// Galaxy velocity dispersions, km/s (the paper's 10–15; 110–130 is realistic).
    pub galaxy_sigma: (f64, f64),
    pub seed: u64,
    /// Profile of every halo: SIE (the paper's test) or dPIE (how Lenstool-HPC models clusters).
    pub profile: HaloProfile,
}

impl Default for LensOptions {
    fn default() -> Self {
        LensOptions {
            n: None,
            galaxy_sigma: (10.0, 15.0),
            seed: DEFAULT_SEED,
            profile: HaloProfile::Sie,
        }
    }
}

/// Largest grid side accepted (index arithmetic is 32-bit in the kernels; tiling covers memory).
pub const MAX_N: usize = 46_000;

/// FP32-pipe instructions of one dPIE interaction, counted by hand (see `pipe_instructions`).
const DPIE_PIPE_INSTRUCTIONS: f64 = 80.0;

/// A lens model on a square pixel grid: what one deflection run computes. Built from a [`Preset`] or from a
/// model and a grid; holds the halos in the kernels' order and their tables in every precision.
#[derive(Debug, Clone)]
pub struct LensProblem {
    pub preset: String,
    pub n: usize,
    pub pixel: f64,
    pub cosmology: Cosmology,
    pub dls_ds: f64,
    /// Halos in kernel order: SIE then dPIE, each by ascending strength, so float32 sums the small galaxy
    /// terms before adding the large cluster terms (less rounding in the accumulator).
    pub halos: Halos,
    tables32: KernelTables<f32>,
    tables64: KernelTables<f64>,
    /// Float32 tables with naive offsets (x − x0 rounded at the coordinate's magnitude), for the paper's
    /// mixed scheme as published.
    naive32: KernelTables<f32>,
    /// The fixed float64 patches: (side in pixels, centres as integer pixel index pairs), clusters then
    /// galaxies.
    patches: [(i32, Vec<i32>); 2],
    /// Caps the device memory a band of rows may use (bytes), below what the device reports: forces
    /// tiling (`--device-mem-mib`).
    pub device_mem_cap: Option<u64>,
    /// The near/far split's geometry and bounds per machine kind, made when a split run first needs them.
    split_cpu: std::sync::OnceLock<split::Split>,
    split_device: std::sync::OnceLock<split::Split>,
}

impl LensProblem {
    /// Builds a preset: `tiny` (128², 2 + 30 halos), `ci` (1024², 2 + 700), `hff` (6730², 2 + 700). All
    /// cover the same ±101″ field as the paper's 6730 px at 0.03″/px.
    pub fn preset(preset: Preset, opts: &LensOptions) -> Result<Self, LensError> {
        let (n_default, galaxies) = match preset {
            Preset::Tiny => (128, 30),
            Preset::Ci => (1024, 700),
            Preset::Hff => (6730, 700),
        };
        // n is validated by new(); a zero n only makes this pixel scale infinite until then.
        let n = opts.n.unwrap_or(n_default);
        let (lo, hi) = opts.galaxy_sigma;
        if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
            return Err(LensError::BadSigma(lo, hi));
        }
        let pixel = 0.03 * 6730.0 / n as f64;
        let cosmology = Cosmology::default();
        let dls_ds = cosmology.dls_over_ds();
        let mut rng = rand_pcg::Pcg64::seed_from_u64(opts.seed);
        let mut halos = Halos::default();
        // One halo of velocity dispersion sigma (km/s), SIE potential ellipticity e, angle theta; as a dPIE
        // (LENSTOOL sigma, so b is 1.5x the SIE's), the mass ellipticity is taken as 3e (an SIE's mass
        // ellipticity is about three times its potential's) and the radii are given.
        let mut add =
            |x: f64, y: f64, sigma: f64, e: f64, theta: f64, r_core: f64, r_cut: f64| match opts
                .profile
            {
                HaloProfile::Sie => halos.push(x, y, b0_arcsec(sigma) * dls_ds, e, theta),
                HaloProfile::Dpie => halos.push_dpie(
                    x,
                    y,
                    b0_dpie_arcsec(sigma) * dls_ds,
                    dpie_eps_from_mass(3.0 * e),
                    theta,
                    r_core,
                    r_cut,
                ),
            };
        // Two cluster halos of 1000 and 700 km/s and 700 galaxies of 10-15 km/s, as the paper's HFF test
        // (Rexroth et al. 2020 §4). It gives no position angles; we use 0.3 and 1.1 rad so rotation is
        // exercised. dPIE radii: cluster cores of 10″ and 8″ cut at 300″ and 250″ (about 50 kpc and 1.5 Mpc at
        // z = 0.3), galaxies 0.05″ and 5″.
        add(20.0, 25.0, 1000.0, 0.05, 0.3, 10.0, 300.0);
        add(-12.0, -27.0, 700.0, 0.04, 1.1, 8.0, 250.0);
        for _ in 0..galaxies {
            let x = rng.random_range(-60.0..60.0);
            let y = rng.random_range(-60.0..60.0);
            let sigma = if hi > lo {
                rng.random_range(lo..hi)
            } else {
                lo
            };
            let e = rng.random_range(0.0..0.15);
            let t = rng.random_range(0.0..std::f64::consts::PI);
            add(x, y, sigma, e, t, 0.05, 5.0);
        }
        Self::new(preset.name(), n, pixel, cosmology, halos)
    }

    pub fn new(
        preset: &str,
        n: usize,
        pixel: f64,
        cosmology: Cosmology,
        halos: Halos,
    ) -> Result<Self, LensError> {
        if n == 0 {
            return Err(LensError::ZeroSize(n));
        }
        if n > MAX_N {
            return Err(LensError::TooLarge(n, MAX_N));
        }
        if !(pixel > 0.0 && pixel.is_finite()) {
            return Err(LensError::BadPixel(pixel));
        }
        if halos.is_empty() {
            return Err(LensError::NoHalos);
        }
        halos.validate()?;
        let mut order: Vec<usize> = (0..halos.len()).collect();
        order.sort_by(|&a, &b| {
            (halos.profile[a] == HaloProfile::Dpie)
                .cmp(&(halos.profile[b] == HaloProfile::Dpie))
                .then(halos.b[a].total_cmp(&halos.b[b]))
        });
        let mut sorted = Halos::default();
        for &k in &order {
            sorted.copy_from(&halos, k);
        }
        let mut p = LensProblem {
            preset: preset.to_string(),
            n,
            pixel,
            cosmology,
            dls_ds: cosmology.dls_over_ds(),
            halos: sorted,
            tables32: KernelTables::default(),
            tables64: KernelTables::default(),
            naive32: KernelTables::default(),
            patches: [(0, vec![]), (0, vec![])],
            device_mem_cap: None,
            split_cpu: std::sync::OnceLock::new(),
            split_device: std::sync::OnceLock::new(),
        };
        p.patches = p.patch_centres();
        p.tables32 = p.tables(|v| v as f32, false);
        p.tables64 = p.tables(|v| v, false);
        p.naive32 = p.tables(|v| v as f32, true);
        Ok(p)
    }

    /// Pixel centre coordinate of index i (same for x and y): the grid is centred on 0.
    pub fn coord(&self, i: usize) -> f64 {
        (i as f64 - (self.n as f64 - 1.0) / 2.0) * self.pixel
    }

    /// The model this problem evaluates.
    pub fn model(&self) -> LensModel {
        LensModel {
            cosmology: self.cosmology,
            halos: self.halos.clone(),
        }
    }

    /// Host memory a verified run needs at the most, bytes: the float64 reference and a result (two f64
    /// grids each), and a device band's outputs while they are widened (one more).
    pub fn host_bytes(&self) -> u64 {
        5 * 8 * (self.n as u64) * (self.n as u64)
    }

    /// Why a verified run cannot fit in `available` bytes of host memory, if it cannot.
    pub fn host_memory_problem(&self, available: u64) -> Option<String> {
        let need = self.host_bytes();
        (need > available).then(|| {
            format!(
                "a verified {}² grid needs about {:.1} GiB of host memory (the float64 reference and the \
                 result), and {:.1} GiB is available",
                self.n,
                need as f64 / f64::from(1 << 30),
                available as f64 / f64::from(1 << 30)
            )
        })
    }

    /// The grid this problem evaluates on.
    pub fn grid(&self) -> Grid {
        Grid {
            n: self.n,
            pixel: self.pixel,
        }
    }
}

/// The lens's own figures in a row: the paper's error budget (every mode reports it; mixed modes must
/// meet it at every pixel), and what a mixed scheme recomputed.
#[derive(Debug, Clone, Serialize)]
pub struct LensDetails {
    /// Worst E_i·M_i/(h/4) over the pixels: above 1 means over the paper's budget somewhere.
    pub budget_worst_ratio: f64,
    pub pixels_over_budget: u64,
    /// Mixed modes: the fraction of pixels recomputed in float64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recomputed_fraction: Option<f64>,
    /// The `cpu` split: the fraction of pixels flagged by the grid pass but cleared once their clusters
    /// were taken in float64, so not recomputed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_fraction: Option<f64>,
    /// `mixed-budget`: the magnification above which a pixel is recomputed, and the float32 error
    /// estimate (arcsec) it comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flag_magnification: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub f32_error_estimate: Option<f64>,
    /// `split`: the cell step, near radius and far-field error bound it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<split::SplitPlan>,
}

impl SinglePass for LensProblem {
    type Mode = LensMode;
    fn run_cpu(&self, mode: LensMode) -> Field {
        self.cpu_run(mode)
    }
    fn run_cpu_into(&self, mode: LensMode, out: &mut Field) {
        match mode {
            LensMode::Split => self.cpu_split_into(out),
            _ => *out = self.cpu_run(mode),
        }
    }
    fn plan(&self, mode: LensMode, budget: DeviceBudget, opts: &RunOptions) -> Vec<KernelJob<'_>> {
        self.device_plan(mode, budget, opts)
    }
    fn assemble(&self, _mode: LensMode, outputs: Vec<Vec<HostVec>>) -> Field {
        let mut gx = Vec::with_capacity(self.n * self.n);
        let mut gy = Vec::with_capacity(self.n * self.n);
        let mut recomputed = None;
        for band in outputs {
            // Mixed jobs return [counter, gx, gy]; plain jobs [gx, gy].
            let at = band.len() - 2;
            if at == 1 {
                *recomputed.get_or_insert(0.0) += band[0].to_f64()[0];
            }
            gx.extend(band[at].to_f64());
            gy.extend(band[at + 1].to_f64());
        }
        let mut field = Field::new(vec![gx, gy]);
        if let Some(count) = recomputed {
            field.stats.push((
                "recomputed_fraction".into(),
                count / (self.n * self.n) as f64,
            ));
        }
        field
    }
}

impl Workload for LensProblem {
    type Mode = LensMode;
    type Output = Field;
    type Reference = Field;
    type Details = LensDetails;

    fn name(&self) -> &'static str {
        "lens"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        format!(
            "{}² px at {:.4}″, {} halos ({} dPIE)",
            self.n,
            self.pixel,
            self.halos.len(),
            self.tables64.n_dpie
        )
    }
    fn modes(&self) -> Vec<LensMode> {
        LensMode::ALL.to_vec()
    }
    fn work(&self, _output: &Field) -> Option<Work> {
        Some(Work {
            units: (self.n * self.n) as f64 * self.halos.len() as f64,
            unit_name: "interactions",
        })
    }
    fn pipe_instructions(&self, mode: LensMode) -> Option<f64> {
        // Per interaction, averaged over the catalogue's profiles. SIE: 10 FP32-pipe instructions (+1 MUFU
        // rsqrt, on its own pipe); FP64 has no hardware rsqrt, about 18 DFMA-pipe instructions with the Newton
        // steps (docs/lens.md). dPIE: about 80 FP32-pipe instructions, counted by hand on the eps >= 0.1 path
        // of lens_dpie_add (two square roots, one division, one atan2, one log; docs/perf-notes.md); float64
        // uses the same count, a floor it cannot beat. Mixed modes are bounded by their float32 pass.
        let sie = match mode {
            LensMode::F64 => 18.0,
            // The split skips most interactions, so the direct sum's floor does not bound it (its throughput
            // counts the direct interactions it stands for); its own floors are in docs/perf-notes.md.
            LensMode::Split => return None,
            _ => 10.0,
        };
        let (n_sie, n_dpie) = (self.tables64.n_sie as f64, self.tables64.n_dpie as f64);
        let n = (n_sie + n_dpie).max(1.0);
        Some((sie * n_sie + DPIE_PIPE_INSTRUCTIONS * n_dpie) / n)
    }
    fn reference(&self) -> Field {
        self.cpu_grid(&self.tables64)
    }
    fn execute(
        &self,
        target: &Target,
        mode: LensMode,
        opts: &RunOptions,
    ) -> Result<Measured<Field>, RunError> {
        if mode == LensMode::Split {
            // The geometry, bounds and device lists are made once per model, outside the timed runs.
            match target {
                Target::Cpu(_) => {
                    self.split(SplitModel::Cpu);
                }
                Target::Device(_) => {
                    self.split(SplitModel::Device).lists(self);
                }
            }
        }
        exec::single_pass(self, target, mode, opts)
    }
    fn verify(&self, result: &Field, reference: &Field, mode: LensMode) -> Verdict<LensDetails> {
        let (max_abs, max_rel, rms_abs, non_finite) = vector_errors(result, reference);
        let complete = result.components.iter().all(|c| c.len() == self.n * self.n);
        let (tolerance_abs, tolerance_rel) = match mode {
            LensMode::F64 => (f64::INFINITY, TOL_F64_REL),
            // The split's contract is the paper's per-pixel budget (issue 17), checked below; a quarter
            // pixel, the budget of a pixel without magnification, is the most any pixel may err.
            LensMode::Split => (mixed::BUDGET_PER_PIXEL * self.pixel, f64::INFINITY),
            _ => (TOL_F32_ABS, f64::INFINITY),
        };
        let (budget_worst, over_budget) = if complete {
            self.budget(result, reference)
        } else {
            (f64::NAN, 0)
        };
        // Mixed modes and the split promise the paper's budget everywhere; plain float32 only reports it.
        let promised = mode.scheme().is_some() || mode == LensMode::Split;
        let budget_ok = !promised || over_budget == 0;
        let budget_scheme = mode == LensMode::BUDGET;
        Verdict {
            accuracy: Accuracy {
                max_abs,
                max_rel,
                rms_abs,
                non_finite,
                tolerance_abs,
                tolerance_rel,
                unit: "arcsec".into(),
                pass: complete
                    && non_finite == 0
                    && max_abs <= tolerance_abs
                    && max_rel <= tolerance_rel
                    && budget_ok,
            },
            unconverged: None,
            failure: (!budget_ok).then(|| {
                format!(
                    "{over_budget} pixels over the paper's error budget (worst {budget_worst:.3} times it)"
                )
            }),
            details: LensDetails {
                budget_worst_ratio: budget_worst,
                pixels_over_budget: over_budget,
                recomputed_fraction: result.stat("recomputed_fraction"),
                settled_fraction: result.stat(split::SETTLED_STAT),
                flag_magnification: budget_scheme.then(|| self.budget_magnification()),
                f32_error_estimate: budget_scheme.then(|| self.f32_error_estimate()),
                split: (mode == LensMode::Split).then(|| {
                    let model = match result.stat(split::SplitPlan::CPU_STAT) {
                        Some(_) => SplitModel::Cpu,
                        None => SplitModel::Device,
                    };
                    self.split(model).plan.clone()
                }),
            },
        }
    }
}

/// A square pixel grid centred on the origin: `n` × `n` pixels of side `pixel` arcsec; pixel (i, j) is at
/// ((i − (n−1)/2)·pixel, (j − (n−1)/2)·pixel), rows (j) outermost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub n: usize,
    pub pixel: f64,
}

/// A deflection field on a grid, arcsec, row-major with x fastest.
#[derive(Debug, Clone)]
pub struct Deflection {
    pub grid: Grid,
    pub alpha_x: Vec<f64>,
    pub alpha_y: Vec<f64>,
    /// Mixed modes: the fraction of pixels recomputed in float64.
    pub recomputed_fraction: Option<f64>,
    /// Median time of the computation (device events, or the host clock on `cpu`), seconds.
    pub seconds: f64,
}

/// A lens model as an astronomer writes it down: halos whose strengths hold D_LS/D_S for sources at the
/// cosmology's source redshift. Evaluate it on a grid on any backend.
///
/// ```no_run
/// use astroport::workload::lens::{Grid, LensMode, LensModel, LensOptions, Preset};
/// let model = LensModel::preset(Preset::Ci, &LensOptions::default()).unwrap();
/// let cpu = astroport::backend::open("cpu").unwrap();
/// let alpha = model.deflection(Grid { n: 512, pixel: 0.4 }, &cpu, LensMode::F32).unwrap();
/// println!("α_x at the centre: {}″", alpha.alpha_x[256 * 512 + 256]);
/// ```
#[derive(Debug, Clone)]
pub struct LensModel {
    pub cosmology: Cosmology,
    pub halos: Halos,
}

impl LensModel {
    /// A model from halos (strengths already scaled by D_LS/D_S); every halo is checked.
    pub fn new(cosmology: Cosmology, halos: Halos) -> Result<Self, LensError> {
        if halos.is_empty() {
            return Err(LensError::NoHalos);
        }
        halos.validate()?;
        Ok(LensModel { cosmology, halos })
    }

    /// A model from a halo catalogue ([`io::read_halos`]), for sources at the cosmology's redshift.
    pub fn from_catalogue(
        records: &[io::HaloRecord],
        cosmology: Cosmology,
    ) -> Result<Self, LensError> {
        Self::new(
            cosmology,
            Halos::from_records(records, cosmology.dls_over_ds()),
        )
    }

    /// The halos of a generated preset.
    pub fn preset(preset: Preset, opts: &LensOptions) -> Result<Self, LensError> {
        Ok(LensProblem::preset(preset, opts)?.model())
    }

    /// This model on a grid, as the driver runs it.
    pub fn on_grid(&self, grid: Grid) -> Result<LensProblem, LensError> {
        LensProblem::new(
            "custom",
            grid.n,
            grid.pixel,
            self.cosmology,
            self.halos.clone(),
        )
    }

    /// The deflection α = ∇ψ at every pixel of `grid`, on one backend in one mode, computed once (the
    /// reported time never includes the program build).
    pub fn deflection(
        &self,
        grid: Grid,
        backend: &Target,
        mode: LensMode,
    ) -> Result<Deflection, String> {
        let problem = self.on_grid(grid).map_err(|e| e.to_string())?;
        problem.deflection(backend, mode, &RunOptions::once())
    }

    /// The image-plane χ² of observed multiple-image systems: the `mixed-budget` grid and float64 triangle
    /// delensing (on the device for device backends), images matched closest-first.
    pub fn chi2(
        &self,
        systems: &[io::ImageSystem],
        grid: Grid,
        backend: &Target,
    ) -> Result<chi2::Chi2Fit, String> {
        let problem = self.on_grid(grid).map_err(|e| e.to_string())?;
        let fit = chi2::Chi2Problem::new(problem, systems.to_vec())?;
        chi2::evaluate(
            &fit.problem,
            &fit.systems,
            backend,
            LensMode::BUDGET,
            &RunOptions::once(),
        )
        .map(|m| m.output)
        .map_err(|e| e.to_string())
    }
}

impl LensProblem {
    /// The deflection of this problem on one backend, timed as `opts` says; a result with unwritten
    /// (non-finite) pixels is an error.
    pub fn deflection(
        &self,
        backend: &Target,
        mode: LensMode,
        opts: &RunOptions,
    ) -> Result<Deflection, String> {
        let m = exec::single_pass(self, backend, mode, opts).map_err(|e| e.to_string())?;
        let recomputed_fraction = m.output.stat("recomputed_fraction");
        let mut components = m.output.components.into_iter();
        let (alpha_x, alpha_y) = (
            components.next().unwrap_or_default(),
            components.next().unwrap_or_default(),
        );
        if alpha_x.len() != self.n * self.n
            || alpha_x.iter().chain(&alpha_y).any(|v| !v.is_finite())
        {
            return Err(format!(
                "{}: the deflection grid has missing or non-finite values",
                backend.id()
            ));
        }
        Ok(Deflection {
            grid: self.grid(),
            alpha_x,
            alpha_y,
            recomputed_fraction,
            seconds: m.times.median,
        })
    }
}
