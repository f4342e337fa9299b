//! Lomb-Scargle periodograms after Townsend 2010, "Fast Calculation of the Lomb-Scargle Periodogram Using
//! Graphics Processing Units" (ApJS 191, 247; the culsp code), with astropy's models, normalisations and
//! false-alarm probabilities.
//!
//! Direct O(N_t N_f) sums, one work-item per frequency, the series staged through local memory in chunks.
//! The phase f t is reduced exactly in 64-bit fixed point before float32 sincos: the rounding of the float32
//! product f t, not sincos, dominates culsp's error (docs/lombscargle.md).
//!
//! For users: [`LombScargle`] (one light curve, astropy's vocabulary) and [`periodogram::analyse`] (many
//! curves: periodograms, peaks and false-alarm probabilities). For the driver: [`LombScargleProblem`].

pub mod args;
pub mod cpu;
pub mod device;
pub mod fap;
pub mod generate;
pub mod io;
pub mod nufft;
pub mod periodogram;

use crate::backend::{
    BufferSpec, DType, HostSlice, HostVec, KernelJob, Launch, Local, Precision, Program, Step,
    StepArg, Target,
};
use crate::exec::{self, DeviceBudget, Field, Measured, RunError, RunOptions, SinglePass};
use crate::workload::{Accuracy, Verdict, Work, Workload};
use device::{Band, FixedPoint, GROUP, TOPK_MAX};
pub use periodogram::LombScargle;
use rayon::prelude::*;
use serde::Serialize;

pub static PROGRAM: Program = Program {
    name: "lombscargle",
    opencl: include_str!("../../../cl/lombscargle.cl"),
    sycl: include_str!("../../../ports/sycl/lombscargle.cpp"),
    headers: &[
        (
            "astro_dialect.h",
            include_str!("../../../cl/common/astro_dialect.h"),
        ),
        (
            "lombscargle.h",
            include_str!("../../../cl/common/lombscargle.h"),
        ),
        ("ring_fft.h", include_str!("../../../cl/common/ring_fft.h")),
        ("ls_nufft.h", include_str!("../../../cl/common/ls_nufft.h")),
    ],
    opencl_options: "",
};

/// Tolerances on 'standard' power (the contract): float32 within 2e-6 absolute of f64; the f64
/// paths within 1e-9.
pub const TOL_F32: f64 = 2e-6;
pub const TOL_F64: f64 = 1e-9;
/// Bins either side of each checked curve's highest peak that `compare` evaluates in f64 on the fly: the
/// peak is where float32 errors are largest (they scale with the power).
const PEAK_WINDOW: usize = 16;

/// One light curve: times (days), values (flux or magnitude) and optional 1-sigma errors.
#[derive(Debug, Clone, PartialEq)]
pub struct LightCurve {
    /// Object name (file name, or the object id of a multi-object table).
    pub name: String,
    pub t: Vec<f64>,
    pub y: Vec<f64>,
    pub dy: Option<Vec<f64>>,
}

/// The frequencies of one periodogram, in cycles per time unit.
#[derive(Debug, Clone, PartialEq)]
pub enum FrequencyGrid {
    /// f_k = f0 + k df, k = 0..n (culsp's grid has f0 = df).
    Uniform { f0: f64, df: f64, n: usize },
    /// Any user-given frequencies, positive and finite.
    Given(Vec<f64>),
}

impl FrequencyGrid {
    pub fn len(&self) -> usize {
        match self {
            FrequencyGrid::Uniform { n, .. } => *n,
            FrequencyGrid::Given(f) => f.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn frequency(&self, k: usize) -> f64 {
        match self {
            FrequencyGrid::Uniform { f0, df, .. } => f0 + k as f64 * df,
            FrequencyGrid::Given(f) => f[k],
        }
    }
    pub fn max_frequency(&self) -> f64 {
        (0..self.len())
            .map(|k| self.frequency(k))
            .fold(0.0, f64::max)
    }
}

/// The signal model fitted at each frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalModel {
    /// Classic Lomb-Scargle (culsp): data centred once, no constant term in the fit (astropy `fit_mean=False`).
    FixedMean,
    /// Generalised Lomb-Scargle with a floating mean (Zechmeister & Kuerster 2009; astropy `fit_mean=True`).
    FloatingMean,
}

/// Power normalisations, as astropy's `LombScargle(normalization=...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalization {
    Standard,
    Model,
    Log,
    Psd,
}

/// A peak of a periodogram: a local maximum of the power.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// Index in the frequency grid.
    pub index: usize,
    pub frequency: f64,
    pub power: f64,
    /// False-alarm probability (Baluev) of this power, when computed.
    pub fap: Option<f64>,
}

/// A curve ready for the sums: times shifted to start at 0, weights normalised to sum 1, and values centred
/// (weighted mean) and scaled so that sum w y^2 = 1 (culsp normalises to unit variance likewise; the standard
/// power is invariant under both).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub t: Vec<f64>,
    pub wy: Vec<f64>,
    pub w: Vec<f64>,
}

/// Points a periodogram needs: three parameters (mean, sine, cosine) are fitted at every frequency, so a
/// false-alarm probability needs N − 3 ≥ 1 degrees of freedom, and three points fit exactly (power 1).
pub const MIN_POINTS: usize = 4;

/// A series whose values vary by no more than this fraction of their size is constant: a constant series
/// keeps about 1e-33 of variance from rounding the mean, so an exact test would pass it.
pub const CONSTANT_SPREAD: f64 = 1e-12;

/// Why these values cannot make a periodogram, if they cannot: too few of them, or constant (weighted
/// spread at most [`CONSTANT_SPREAD`] of their largest magnitude). `w`: the weights, 1/σ² or all 1.
pub fn values_problem(y: &[f64], w: &[f64]) -> Option<String> {
    if y.len() < MIN_POINTS {
        return Some(format!(
            "{} point{}; a periodogram needs at least {MIN_POINTS} (three parameters are fitted at \
             every frequency)",
            y.len(),
            if y.len() == 1 { "" } else { "s" }
        ));
    }
    let total: f64 = w.iter().sum();
    let mean = w.iter().zip(y).map(|(w, y)| w * y).sum::<f64>() / total;
    let var = w
        .iter()
        .zip(y)
        .map(|(w, y)| w * (y - mean) * (y - mean))
        .sum::<f64>()
        / total;
    let size = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    (!(var.is_finite() && var.sqrt() > CONSTANT_SPREAD * size)).then(|| {
        format!(
            "the values are constant (weighted spread {:.3e} against values up to {size:.6e}): no \
             periodogram",
            var.sqrt()
        )
    })
}

/// The weights 1/σ² of a curve, or all 1 without errors.
pub(super) fn weights(curve: &LightCurve) -> Vec<f64> {
    match &curve.dy {
        Some(dy) => dy.iter().map(|e| 1.0 / (e * e)).collect(),
        None => vec![1.0; curve.y.len()],
    }
}

impl Prepared {
    pub fn new(curve: &LightCurve) -> Result<Prepared, String> {
        let n = curve.t.len();
        if curve.y.len() != n || curve.dy.as_ref().is_some_and(|d| d.len() != n) {
            return Err(format!(
                "{}: {n} times but {} values{}",
                curve.name,
                curve.y.len(),
                curve
                    .dy
                    .as_ref()
                    .map(|d| format!(" and {} errors", d.len()))
                    .unwrap_or_default()
            ));
        }
        let mut w = weights(curve);
        if let Some(problem) = values_problem(&curve.y, &w) {
            return Err(format!("{}: {problem}", curve.name));
        }
        let total: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= total);
        let mean: f64 = w.iter().zip(&curve.y).map(|(w, y)| w * y).sum();
        let var: f64 = w
            .iter()
            .zip(&curve.y)
            .map(|(w, y)| w * (y - mean) * (y - mean))
            .sum();
        let scale = 1.0 / var.sqrt();
        let t0 = curve.t.iter().copied().fold(f64::INFINITY, f64::min);
        Ok(Prepared {
            t: curve.t.iter().map(|t| t - t0).collect(),
            wy: w
                .iter()
                .zip(&curve.y)
                .map(|(w, y)| w * (y - mean) * scale)
                .collect(),
            w,
        })
    }
    pub fn span(&self) -> f64 {
        self.t.iter().copied().fold(0.0, f64::max)
    }
}

/// What a run returns per curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The whole periodogram.
    Full,
    /// Only the k highest peaks (local maxima), k <= 8, reduced on the device.
    TopK(usize),
}

/// One Lomb-Scargle problem: a batch of light curves, each with its grid, one model, one output.
pub struct LombScargleProblem {
    pub preset: String,
    pub curves: Vec<LightCurve>,
    pub grids: Vec<FrequencyGrid>,
    pub model: SignalModel,
    pub output: Output,
    pub prepared: Vec<Prepared>,
    pub fixed: FixedPoint,
    bands: Vec<Band>,
    times: Vec<u32>,
    weights32: Vec<f32>,
    weights64: Vec<f64>,
    /// Curves verified against the f64 reference, and the stride of the frequencies checked in each.
    check_curves: Vec<usize>,
    check_stride: usize,
    /// Accuracy asked of the NUFFT method (the row's tolerance in that mode).
    pub tolerance: f64,
    /// NUFFT plans by grid length, made by the first nufft run and kept (as FINUFFT plans are).
    nufft_plans: std::sync::OnceLock<Result<std::collections::HashMap<usize, nufft::Plan>, String>>,
    /// The host's tables of every curve's device NUFFT, made by the first device plan in that mode.
    nufft_tables: std::sync::OnceLock<Result<Vec<device::NufftTables>, String>>,
}

/// How the periodogram's sums are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Direct O(N_t N_f) sums (culsp): any grid, float32 or float64.
    Direct,
    /// Type-1 non-uniform FFTs ([`nufft`]): uniform grids, float64, to a stated tolerance.
    Nufft,
}

/// A Lomb-Scargle run mode: the method and the arithmetic. Its name is the rows' `precision`: `f32` and
/// `f64` for the direct sums (as before the NUFFT existed), `nufft-f64` for the NUFFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LsMode {
    pub method: Method,
    pub precision: Precision,
}

impl LsMode {
    pub const NUFFT: LsMode = LsMode {
        method: Method::Nufft,
        precision: Precision::F64,
    };
    pub fn direct(precision: Precision) -> LsMode {
        LsMode {
            method: Method::Direct,
            precision,
        }
    }
}

impl From<Precision> for LsMode {
    fn from(precision: Precision) -> LsMode {
        LsMode::direct(precision)
    }
}

impl exec::Mode for LsMode {
    fn name(self) -> &'static str {
        match (self.method, self.precision) {
            (Method::Direct, p) => p.name(),
            (Method::Nufft, Precision::F64) => "nufft-f64",
            (Method::Nufft, Precision::F32) => "nufft-f32",
        }
    }
    fn precision(self) -> Precision {
        self.precision
    }
}

/// Default accuracy of the NUFFT (`--tolerance`): the f64 contract of the direct sums.
pub const NUFFT_TOLERANCE: f64 = 1e-9;
/// The share of the power tolerance given to each transformed sum: the kernel is chosen for
/// tolerance × this, so only bins whose fit amplifies sum errors more than tenfold are summed directly.
pub const NUFFT_SUM_SHARE: f64 = 0.1;

/// The cost model's constants: seconds per unit on one core of the 2-core CI machine (AMD EPYC), fitted to
/// `run lombscargle` rows (docs/lombscargle.md, "Choosing the method").
mod cost {
    /// One (time, frequency) pair of the direct sums.
    pub const DIRECT_F32_PAIR: f64 = 1.4e-9;
    pub const DIRECT_F64_PAIR: f64 = 19e-9;
    /// One kernel tap of one point into one fine grid.
    pub const SPREAD_TAP: f64 = 2e-9;
    /// One n·log2(n) unit of a complex float64 FFT.
    pub const FFT_POINT_LOG: f64 = 1e-9;
    /// One frequency's deconvolution and power.
    pub const POWER: f64 = 10e-9;
    /// On a device (H200, 2026-12-02, reports/nvidia-h200/lombscargle-nufft.md): a direct pair (ci and
    /// survey-small rows), a NUFFT job's fixed cost and its cost per fine-grid cell (corot and ci rows).
    pub const DEVICE_DIRECT_F32_PAIR: f64 = 1.2e-12;
    pub const DEVICE_DIRECT_F64_PAIR: f64 = 5e-12;
    pub const DEVICE_NUFFT_CURVE: f64 = 1.5e-4;
    pub const DEVICE_NUFFT_FINE_CELL: f64 = 5.4e-10;
}

/// Seed of every generated preset (the oracle's).
pub const SEED: u64 = 20100629;

/// The generated presets (see [`LombScargleProblem::preset`]).
pub const PRESETS: [&str; 5] = ["tiny", "ci", "corot", "survey", "survey-small"];

impl LombScargleProblem {
    pub fn new(
        preset: &str,
        curves: Vec<LightCurve>,
        grids: Vec<FrequencyGrid>,
        model: SignalModel,
        output: Output,
    ) -> Result<Self, String> {
        if curves.is_empty() || curves.len() != grids.len() {
            return Err(format!(
                "{} curves but {} frequency grids",
                curves.len(),
                grids.len()
            ));
        }
        if let Output::TopK(k) = output {
            if k == 0 || k > TOPK_MAX {
                return Err(format!("top-k: k = {k} is outside 1..={TOPK_MAX}"));
            }
        }
        let prepared = curves
            .iter()
            .map(Prepared::new)
            .collect::<Result<Vec<_>, _>>()?;
        let mut f_max = 0.0f64;
        for (c, g) in curves.iter().zip(&grids) {
            if g.is_empty() {
                return Err(format!("{}: empty frequency grid", c.name));
            }
            for k in [0, g.len() - 1] {
                if !(g.frequency(k) > 0.0 && g.frequency(k).is_finite()) {
                    return Err(format!(
                        "{}: frequency {:?} at index {k} is not positive and finite",
                        c.name,
                        g.frequency(k)
                    ));
                }
            }
            if let FrequencyGrid::Given(f) = g {
                if let Some((k, f)) = f
                    .iter()
                    .enumerate()
                    .find(|(_, f)| !(**f > 0.0 && f.is_finite()))
                {
                    return Err(format!(
                        "{}: frequency {f:?} at index {k} is not positive and finite",
                        c.name
                    ));
                }
                // Peaks are local maxima between neighbours: the grid must increase.
                if let Some(k) = (1..f.len()).find(|&k| f[k] <= f[k - 1]) {
                    return Err(format!(
                        "{}: frequency {:?} at index {k} does not increase from {:?} (give the grid sorted, \
                         without repeats)",
                        c.name,
                        f[k],
                        f[k - 1]
                    ));
                }
            }
            f_max = f_max.max(g.max_frequency());
        }
        let t_max = prepared.iter().map(Prepared::span).fold(0.0, f64::max);
        let n_f = grids.iter().map(FrequencyGrid::len).max().unwrap_or(1);
        let fixed = FixedPoint::for_range(f_max, t_max, n_f)?;
        let mut times = Vec::new();
        let (mut weights32, mut weights64) = (Vec::new(), Vec::new());
        for p in &prepared {
            for j in 0..p.t.len() {
                let t = fixed.time(p.t[j]);
                times.extend([t as u32, (t >> 32) as u32]);
                weights32.extend([p.wy[j] as f32, p.w[j] as f32]);
                weights64.extend([p.wy[j], p.w[j]]);
            }
        }
        let problem = LombScargleProblem {
            preset: preset.to_string(),
            curves,
            grids,
            model,
            output,
            prepared,
            fixed,
            bands: Vec::new(),
            times,
            weights32,
            weights64,
            check_curves: Vec::new(),
            check_stride: 1,
            tolerance: NUFFT_TOLERANCE,
            nufft_plans: std::sync::OnceLock::new(),
            nufft_tables: std::sync::OnceLock::new(),
        };
        Ok(problem.with_band_limit(device::BAND_FREQUENCIES))
    }

    /// Plans the device bands with at most `frequencies` per band (rounded to the work-group size): small
    /// bands split curves into pieces whose top-k the host merges (tests use this to exercise it).
    pub fn with_band_limit(mut self, frequencies: usize) -> Self {
        let grid_refs: Vec<&FrequencyGrid> = self.grids.iter().collect();
        self.bands = device::bands(&self.prepared, &grid_refs, self.fixed, frequencies);
        self.choose_checks();
        self
    }

    /// The NUFFT's accuracy (absolute, on standard power): `--tolerance`.
    pub fn with_tolerance(mut self, tolerance: f64) -> Result<Self, String> {
        nufft::SpreadKernel::for_tolerance(tolerance).map_err(|e| format!("--tolerance: {e}"))?;
        self.tolerance = tolerance;
        self.nufft_plans = std::sync::OnceLock::new();
        self.nufft_tables = std::sync::OnceLock::new();
        Ok(self)
    }

    /// Why the NUFFT cannot compute this problem, if it cannot: a curve with a non-uniform grid.
    pub fn nufft_unavailable(&self) -> Option<String> {
        self.grids
            .iter()
            .zip(&self.curves)
            .find(|(g, _)| matches!(g, FrequencyGrid::Given(_)))
            .map(|(_, c)| {
                format!(
                    "{}: a given (non-uniform) frequency grid; the nufft method needs f_k = f0 + k df",
                    c.name
                )
            })
    }

    /// The cost model behind `--method auto`: predicted seconds of each method, on one `cpu` core (constants
    /// measured on the 2-core CI machine) or on a device (constants measured on the H200; docs/lombscargle.md),
    /// and the faster one with both predictions.
    pub fn auto_mode(&self, precision: Precision, on_device: bool) -> (LsMode, String) {
        let direct = self.pairs()
            * match (on_device, precision) {
                (false, Precision::F32) => cost::DIRECT_F32_PAIR,
                (false, Precision::F64) => cost::DIRECT_F64_PAIR,
                (true, Precision::F32) => cost::DEVICE_DIRECT_F32_PAIR,
                (true, Precision::F64) => cost::DEVICE_DIRECT_F64_PAIR,
            };
        let direct_mode = LsMode::direct(precision);
        if let Some(why) = self.nufft_unavailable() {
            return (direct_mode, format!("direct ({why})"));
        }
        let (nufft, unit) = if on_device {
            (self.nufft_device_seconds(), "on a device")
        } else {
            (self.nufft_seconds(), "per core")
        };
        let figures = format!("predicted direct {direct:.3e} s, nufft {nufft:.3e} s {unit}");
        if nufft < direct {
            (LsMode::NUFFT, format!("nufft ({figures})"))
        } else {
            (direct_mode, format!("direct ({figures})"))
        }
    }

    /// Predicted seconds of the NUFFT on one core: spreading, the FFTs of the fine grids, and the powers.
    pub fn nufft_seconds(&self) -> f64 {
        let width = nufft::SpreadKernel::for_tolerance(self.tolerance * NUFFT_SUM_SHARE)
            .map(|k| k.width)
            .unwrap_or(nufft::MAX_WIDTH) as f64;
        let grids = match self.model {
            SignalModel::FloatingMean => 3.0,
            SignalModel::FixedMean => 2.0,
        };
        self.prepared
            .iter()
            .zip(&self.grids)
            .map(|(p, g)| {
                let fine = nufft::smooth_length(2 * g.len()) as f64;
                p.t.len() as f64 * width * grids * cost::SPREAD_TAP
                    + grids * fine * fine.log2() * cost::FFT_POINT_LOG
                    + g.len() as f64 * cost::POWER
            })
            .sum()
    }

    /// Predicted seconds of the device NUFFT: a fixed cost per curve (its job's launches) and one per cell of
    /// the fine grids (three grids through spreading, nine-odd FFT passes and the powers).
    pub fn nufft_device_seconds(&self) -> f64 {
        self.grids
            .iter()
            .map(|g| {
                cost::DEVICE_NUFFT_CURVE
                    + nufft::smooth_length(2 * g.len()) as f64 * cost::DEVICE_NUFFT_FINE_CELL
            })
            .sum()
    }

    /// The modes a run offers: direct float32 and float64, and the NUFFT where every grid is uniform.
    pub fn all_modes(&self) -> Vec<LsMode> {
        let mut modes: Vec<LsMode> = Precision::ALL.iter().map(|&p| LsMode::direct(p)).collect();
        if self.nufft_unavailable().is_none() {
            modes.push(LsMode::NUFFT);
        }
        modes
    }

    /// Bands of device work (each one job).
    pub fn band_count(&self) -> usize {
        self.bands.len()
    }

    /// The curves and frequencies verified against float64: every curve of a batch of at most 16; else 16
    /// spread over the batch, plus the first curve of every band and every curve split across bands, so
    /// every band's work is checked. Every frequency unless the checked pairs pass ~2e9 (then a stride).
    fn choose_checks(&mut self) {
        let n = self.curves.len();
        let mut curves: Vec<usize> = if n <= 16 {
            (0..n).collect()
        } else {
            (0..16).map(|k| k * (n - 1) / 15).collect()
        };
        for band in &self.bands {
            curves.push(band.pieces[0].curve);
            for piece in &band.pieces {
                if piece.k0 > 0 || piece.k1 < self.grids[piece.curve].len() {
                    curves.push(piece.curve);
                }
            }
        }
        curves.sort_unstable();
        curves.dedup();
        let pairs: f64 = curves
            .iter()
            .map(|&c| (self.prepared[c].t.len() * self.grids[c].len()) as f64)
            .sum();
        self.check_stride = match self.output {
            Output::Full => ((pairs / 2e9).ceil() as usize).max(1),
            Output::TopK(_) => 1,
        };
        self.check_curves = curves;
    }

    /// The generated presets: `tiny` (the oracle's size: 400 points, 3,840 frequencies), `ci` (1e4 points,
    /// 40,192 frequencies), `corot` (382,003 points, 1,528,064 frequencies), `survey` (10,000 curves of
    /// 120-180 points, 365,000 frequencies each, top-5 peaks; `survey-small`: its first 16 curves).
    pub fn preset(name: &str, model: SignalModel) -> Result<Self, String> {
        match name {
            "tiny" => {
                let c = generate::corot_like(400, SEED);
                let g = generate::culsp_grid(&c.t, 4.0, 4.5);
                Self::new(name, vec![c], vec![g], model, Output::Full)
            }
            "ci" => {
                let c = generate::ci_series(SEED);
                let g = generate::ci_grid(&c.t);
                Self::new(name, vec![c], vec![g], model, Output::Full)
            }
            "corot" => {
                let c = generate::corot_like(generate::COROT_N_T, SEED);
                let g = generate::culsp_grid(&c.t, generate::CULSP_F_OVER, generate::CULSP_F_HIGH);
                Self::new(name, vec![c], vec![g], model, Output::Full)
            }
            "survey" | "survey-small" => {
                let n = if name == "survey" { 10_000 } else { 16 };
                let (curves, grid) = generate::survey(n, SEED);
                let grids = vec![grid; curves.len()];
                Self::new(name, curves, grids, model, Output::TopK(5))
            }
            other => Err(format!(
                "unknown Lomb-Scargle preset '{other}' (tiny, ci, corot, survey, survey-small)"
            )),
        }
    }

    pub fn pairs(&self) -> f64 {
        self.prepared
            .iter()
            .zip(&self.grids)
            .map(|(p, g)| (p.t.len() * g.len()) as f64)
            .sum()
    }

    fn total_frequencies(&self) -> usize {
        self.grids.iter().map(FrequencyGrid::len).sum()
    }

    /// Where each curve's powers lie in the flattened full output.
    pub fn curve_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut start = 0;
        self.grids
            .iter()
            .map(|g| {
                start += g.len();
                start - g.len()..start
            })
            .collect()
    }

    /// The f64 power of curve `c` at grid index `k`.
    pub fn reference_power(&self, c: usize, k: usize) -> f64 {
        cpu::power_f64(&self.prepared[c], self.grids[c].frequency(k), self.model)
    }

    /// (curve, index) of the checked frequencies, in order.
    fn check_points(&self) -> Vec<(usize, usize)> {
        self.check_curves
            .iter()
            .flat_map(|&c| {
                (0..self.grids[c].len())
                    .step_by(self.check_stride)
                    .map(move |k| (c, k))
            })
            .collect()
    }

    /// Whole periodograms of every curve on the CPU in one precision (f64: the reference).
    fn cpu_powers(&self, curves: &[usize], precision: Precision) -> Vec<Vec<f64>> {
        curves
            .iter()
            .map(|&c| {
                let n = self.grids[c].len();
                let series = (precision != Precision::F64)
                    .then(|| cpu::Series32::new(&self.prepared[c], self.fixed));
                let blocks: Vec<usize> = (0..n).step_by(GROUP).collect();
                blocks
                    .par_iter()
                    .flat_map_iter(|&k0| {
                        let k1 = (k0 + GROUP).min(n);
                        match &series {
                            None => (k0..k1)
                                .map(|k| self.reference_power(c, k))
                                .collect::<Vec<_>>(),
                            Some(series) => cpu::powers_f32(
                                series,
                                &self.grids[c],
                                k0,
                                k1,
                                self.fixed,
                                self.model,
                            )
                            .into_iter()
                            .map(f64::from)
                            .collect(),
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

impl LombScargleProblem {
    /// Every curve by NUFFT in float64: whole periodograms, or each curve's top-k as soon as it is done (a
    /// survey's periodograms are never all in memory). One plan per distinct grid length, built in the run.
    fn nufft_field(&self) -> Result<Field, String> {
        if let Some(why) = self.nufft_unavailable() {
            return Err(why);
        }
        let plans = self
            .nufft_plans
            .get_or_init(|| {
                let mut lengths: Vec<usize> = self.grids.iter().map(FrequencyGrid::len).collect();
                lengths.sort_unstable();
                lengths.dedup();
                lengths
                    .par_iter()
                    .map(|&m| nufft::Plan::new(m, self.tolerance * NUFFT_SUM_SHARE).map(|p| (m, p)))
                    .collect()
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let one = |c: usize| {
            nufft::powers(
                &self.prepared[c],
                &self.grids[c],
                self.model,
                &plans[&self.grids[c].len()],
                self.tolerance,
            )
        };
        let curves = 0..self.curves.len();
        let (mut field, direct) = match self.output {
            Output::Full => {
                let results = curves.map(one).collect::<Result<Vec<_>, _>>()?;
                let direct: usize = results.iter().map(|r| r.direct_bins).sum();
                let powers: Vec<f64> = results.into_iter().flat_map(|r| r.powers).collect();
                (Field::new(vec![powers]), direct)
            }
            Output::TopK(k) => {
                let results = curves
                    .into_par_iter()
                    .map(|c| one(c).map(|r| (top_k(&r.powers, k), r.direct_bins)))
                    .collect::<Result<Vec<_>, _>>()?;
                let direct: usize = results.iter().map(|r| r.1).sum();
                let peaks: Vec<Vec<(usize, f64)>> = results.into_iter().map(|r| r.0).collect();
                (Self::peaks_field(&peaks, k), direct)
            }
        };
        field.stats.push((DIRECT_BINS.into(), direct as f64));
        Ok(field)
    }
}

/// The field stat of a nufft run: bins summed directly because their fit is too ill-conditioned.
const DIRECT_BINS: &str = "nufft_direct_bins";

/// The top-k kernel over `curves` curve records: buffers [records, powers, out index, out power].
fn top_k_launch(suffix: &str, buffers: [usize; 4], k: usize, curves: usize) -> Step {
    let [records, power, index_out, power_out] = buffers;
    Step::Launch(Launch {
        kernel: format!("ls_topk_{suffix}"),
        args: vec![
            StepArg::Buffer(records),
            StepArg::Buffer(power),
            StepArg::I32(k as i32),
            StepArg::Buffer(index_out),
            StepArg::Buffer(power_out),
        ],
        global: curves * GROUP,
        local: Local::Exact(GROUP),
    })
}

/// The k highest local maxima of a periodogram (p[i] >= p[i-1] and p[i] > p[i+1]; one neighbour at the
/// ends), by power, ties by lower index: the same rule as the device kernel.
pub fn top_k(power: &[f64], k: usize) -> Vec<(usize, f64)> {
    let n = power.len();
    let mut peaks: Vec<(usize, f64)> = (0..n)
        .filter(|&i| {
            (i == 0 || power[i] >= power[i - 1]) && (i + 1 == n || power[i] > power[i + 1])
        })
        .map(|i| (i, power[i]))
        .collect();
    peaks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    peaks.truncate(k);
    peaks
}

/// Lomb-Scargle's own figures in a row: what the check covered.
#[derive(Debug, Clone, Serialize)]
pub struct LombScargleDetails {
    /// Curves compared with the float64 reference (every curve of small batches, 16 of a survey).
    pub checked_curves: usize,
    /// Full periodograms: every k-th frequency is compared (1 unless that is over ~2e9 pairs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked_frequency_stride: Option<usize>,
    /// Full periodograms: the largest error within 16 bins of each checked curve's highest peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_window_max_abs: Option<f64>,
    /// Top-k peaks: ranks whose frequency differs from the reference's and is not a near-tie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_index_mismatches: Option<u64>,
    /// nufft: bins summed directly because their fit is too ill-conditioned for the NUFFT's sum error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nufft_direct_bins: Option<usize>,
}

impl SinglePass for LombScargleProblem {
    type Mode = LsMode;
    fn run_cpu(&self, mode: LsMode) -> Field {
        if mode.method == Method::Nufft {
            // `execute` refuses what the NUFFT cannot do; an error here leaves an empty field that fails.
            return self.nufft_field().unwrap_or_else(|_| Field::new(vec![]));
        }
        let precision = mode.precision;
        let all: Vec<usize> = (0..self.curves.len()).collect();
        let powers = self.cpu_powers(&all, precision);
        match self.output {
            Output::Full => Field::new(vec![powers.concat()]),
            Output::TopK(k) => self.top_k_field(&powers, k),
        }
    }
    fn plan(&self, mode: LsMode, _budget: DeviceBudget, opts: &RunOptions) -> Vec<KernelJob<'_>> {
        match mode.method {
            Method::Nufft => self.nufft_device_jobs(opts),
            Method::Direct => self.device_jobs(mode.precision, opts),
        }
    }
    fn assemble(&self, mode: LsMode, outputs: Vec<Vec<HostVec>>) -> Field {
        match mode.method {
            Method::Nufft => self.assemble_curves(outputs),
            Method::Direct => self.assemble_bands(outputs),
        }
    }
}

impl Workload for LombScargleProblem {
    type Mode = LsMode;
    type Output = Field;
    type Reference = Field;
    type Details = LombScargleDetails;

    fn name(&self) -> &'static str {
        "lombscargle"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        let points: usize = self.prepared.iter().map(|p| p.t.len()).sum();
        let model = match self.model {
            SignalModel::FixedMean => "fixed mean",
            SignalModel::FloatingMean => "floating mean",
        };
        let out = match self.output {
            Output::Full => "full periodogram".to_string(),
            Output::TopK(k) => format!("top-{k} peaks"),
        };
        format!(
            "{} curve(s), {} points, {} frequencies, {model}, {out}",
            self.curves.len(),
            points,
            self.total_frequencies()
        )
    }
    fn modes(&self) -> Vec<LsMode> {
        self.all_modes()
    }
    fn work(&self, _output: &Field) -> Option<Work> {
        Some(Work {
            units: self.pairs(),
            unit_name: "pairs",
        })
    }
    fn pipe_instructions(&self, mode: LsMode) -> Option<f64> {
        if mode.method == Method::Nufft {
            return None; // not a per-pair method: its floor is memory traffic (docs/lombscargle.md)
        }
        // The floor is the sin/cos unit: 2 MUFU per pair at 16/clk/SM, i.e. the issue slots of 16 FP32
        // lanes. float64 has no MUFU: ~34 DFMA-pipe operations for a software sincos plus the sums
        // (docs/lombscargle.md).
        Some(match mode.precision {
            Precision::F64 => 34.0,
            Precision::F32 => 16.0,
        })
    }
    fn reference(&self) -> Field {
        match self.output {
            Output::Full => {
                let pts = self.check_points();
                let p = pts
                    .par_iter()
                    .map(|&(c, k)| self.reference_power(c, k))
                    .collect();
                Field::new(vec![p])
            }
            Output::TopK(k) => {
                self.top_k_field(&self.cpu_powers(&self.check_curves, Precision::F64), k)
            }
        }
    }
    fn execute(
        &self,
        target: &Target,
        mode: LsMode,
        opts: &RunOptions,
    ) -> Result<Measured<Field>, RunError> {
        if mode.method == Method::Nufft {
            if let Some(why) = self.nufft_unavailable() {
                return Err(RunError::Unsupported(why));
            }
            if mode.precision != Precision::F64 {
                return Err(RunError::Unsupported(
                    "the nufft method runs in float64 only".into(),
                ));
            }
            if matches!(target, Target::Device(_)) {
                if let Err(why) = self.nufft_device_tables() {
                    return Err(RunError::Unsupported(why.clone()));
                }
            }
        }
        exec::single_pass(self, target, mode, opts)
    }
    fn verify(
        &self,
        result: &Field,
        reference: &Field,
        mode: LsMode,
    ) -> Verdict<LombScargleDetails> {
        let tolerance = match (mode.method, mode.precision) {
            (Method::Nufft, _) => self.tolerance,
            (Method::Direct, Precision::F64) => TOL_F64,
            (Method::Direct, Precision::F32) => TOL_F32,
        };
        let mut errors = Errors::default();
        let mut details = LombScargleDetails {
            checked_curves: self.check_curves.len(),
            checked_frequency_stride: None,
            peak_window_max_abs: None,
            peak_index_mismatches: None,
            nufft_direct_bins: result.stat(DIRECT_BINS).map(|n| n as usize),
        };
        let mut pass = true;
        match self.output {
            Output::Full => {
                let got = &result.components[0];
                let complete = got.len() == self.total_frequencies();
                let ranges = self.curve_ranges();
                if complete {
                    for (&(c, k), &want) in self.check_points().iter().zip(&reference.components[0])
                    {
                        errors.add(got[ranges[c].start + k], want);
                    }
                    // The highest peak of each checked curve, and its neighbours, in f64 on the fly.
                    let mut window_worst = 0.0f64;
                    for &c in &self.check_curves {
                        let n = self.grids[c].len();
                        let row = &got[ranges[c].clone()];
                        let peak = (0..n)
                            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                            .unwrap_or(0);
                        let first = peak.saturating_sub(PEAK_WINDOW);
                        let last = (peak + PEAK_WINDOW + 1).min(n);
                        for (k, &got) in row.iter().enumerate().take(last).skip(first) {
                            let want = self.reference_power(c, k);
                            window_worst = window_worst.max((got - want).abs());
                            errors.add(got, want);
                        }
                    }
                    details.peak_window_max_abs = Some(window_worst);
                } else {
                    errors.non_finite += got.len().abs_diff(self.total_frequencies()) as u64 + 1;
                }
                details.checked_frequency_stride = Some(self.check_stride);
            }
            Output::TopK(k) => {
                let (gi, gp) = (&result.components[0], &result.components[1]);
                let (ri, rp) = (&reference.components[0], &reference.components[1]);
                let mut mismatched = 0u64;
                for (n, &c) in self.check_curves.iter().enumerate() {
                    for r in 0..k {
                        let (g, w) = (c * k + r, n * k + r);
                        if g >= gi.len() {
                            errors.non_finite += 1;
                            continue;
                        }
                        errors.add(gp[g], rp[w]);
                        // A different index is only acceptable for a near-tie: the f64 power there must equal the
                        // reference's power at this rank within the tolerance.
                        if gi[g] != ri[w] {
                            let ok = gi[g] >= 0.0
                                && (gi[g] as usize) < self.grids[c].len()
                                && (self.reference_power(c, gi[g] as usize) - rp[w]).abs()
                                    <= tolerance;
                            if !ok {
                                mismatched += 1;
                            }
                        }
                    }
                }
                details.peak_index_mismatches = Some(mismatched);
                pass = mismatched == 0;
            }
        }
        let mut accuracy = errors.finish(tolerance);
        accuracy.pass &= pass;
        Verdict {
            failure: (!pass).then(|| {
                format!(
                    "{} peak(s) at another frequency than the reference's (not near-ties)",
                    details.peak_index_mismatches.unwrap_or(0)
                )
            }),
            accuracy,
            unconverged: None,
            details,
        }
    }
}

impl LombScargleProblem {
    /// One job per band of frequencies (`device::bands`): the power kernel, and the top-k kernel when only
    /// peaks are wanted. Bands bound each launch, not memory: a band's buffers are small.
    fn device_jobs(&self, precision: Precision, opts: &RunOptions) -> Vec<KernelJob<'_>> {
        let (dtype, suffix, weights) = match precision {
            Precision::F64 => (DType::F64, "f64", HostSlice::F64(&self.weights64)),
            Precision::F32 => (DType::F32, "f32", HostSlice::F32(&self.weights32)),
        };
        let floating = i32::from(self.model == SignalModel::FloatingMean);
        self.bands
            .iter()
            .map(|band| {
                let weights = match weights {
                    HostSlice::F64(w) => {
                        HostSlice::F64(&w[2 * band.points.start..2 * band.points.end])
                    }
                    HostSlice::F32(w) => {
                        HostSlice::F32(&w[2 * band.points.start..2 * band.points.end])
                    }
                    other => other,
                };
                let mut buffers = vec![
                    BufferSpec::Input(HostSlice::U32(&band.records)),
                    BufferSpec::Input(HostSlice::U32(
                        &self.times[2 * band.points.start..2 * band.points.end],
                    )),
                    BufferSpec::Input(weights),
                    BufferSpec::Input(HostSlice::U32(&band.given)),
                ];
                let n_curves = band.pieces.len();
                buffers.push(match self.output {
                    Output::Full => BufferSpec::Output {
                        dtype,
                        len: band.frequencies,
                    },
                    Output::TopK(_) => BufferSpec::Scratch {
                        dtype,
                        len: band.frequencies,
                    },
                });
                let mut steps = vec![Step::Launch(Launch {
                    kernel: format!("ls_power_{suffix}"),
                    args: vec![
                        StepArg::Buffer(0),
                        StepArg::I32(n_curves as i32),
                        StepArg::Buffer(1),
                        StepArg::Buffer(2),
                        StepArg::Buffer(3),
                        StepArg::I32(floating),
                        StepArg::Buffer(4),
                    ],
                    global: band.groups * GROUP,
                    local: Local::Exact(GROUP),
                })];
                if let Output::TopK(k) = self.output {
                    buffers.push(BufferSpec::Output {
                        dtype: DType::I32,
                        len: n_curves * k,
                    });
                    buffers.push(BufferSpec::Output {
                        dtype,
                        len: n_curves * k,
                    });
                    steps.push(top_k_launch(suffix, [0, 4, 5, 6], k, n_curves));
                }
                opts.job(&PROGRAM, vec![], buffers, steps)
            })
            .collect()
    }

    /// The host tables of every curve's device NUFFT (made once).
    fn nufft_device_tables(&self) -> Result<&Vec<device::NufftTables>, &String> {
        self.nufft_tables
            .get_or_init(|| {
                (0..self.curves.len())
                    .into_par_iter()
                    .map(|c| {
                        device::NufftTables::new(
                            c,
                            &self.prepared[c],
                            &self.grids[c],
                            self.fixed,
                            self.tolerance * NUFFT_SUM_SHARE,
                        )
                        .map_err(|e| format!("{}: {e}", self.curves[c].name))
                    })
                    .collect()
            })
            .as_ref()
    }

    /// One job per curve: strengths, the two gathers onto the fine grids, the Stockham passes of the three
    /// grids at once, the powers with their error bounds, the direct fix-up of doubtful bins, and the top-k
    /// kernel when only peaks are wanted (cl/common/ls_nufft.h).
    fn nufft_device_jobs(&self, opts: &RunOptions) -> Vec<KernelJob<'_>> {
        const ITEMS: usize = 256;
        /// Work-groups of the direct fix-up: a few per multiprocessor of a large GPU.
        const DIRECT_GROUPS: usize = 256;
        let Ok(tables) = self.nufft_device_tables() else {
            return Vec::new(); // `execute` has refused the run with the reason
        };
        let mut first_point = 0;
        let mut starts = Vec::with_capacity(self.prepared.len());
        for p in &self.prepared {
            starts.push(first_point);
            first_point += p.t.len();
        }
        let floating = i32::from(self.model == SignalModel::FloatingMean);
        let round_up = |n: usize| n.div_ceil(ITEMS) * ITEMS;
        tables
            .iter()
            .map(|tb| {
                let points = self.prepared[tb.curve].t.len();
                let range = 2 * starts[tb.curve]..2 * (starts[tb.curve] + points);
                let n = tb.fine;
                let mut buffers = vec![
                    BufferSpec::Input(HostSlice::U32(&self.times[range.clone()])),
                    BufferSpec::Input(HostSlice::F64(&self.weights64[range])),
                    BufferSpec::Input(HostSlice::U32(&tb.order[0])),
                    BufferSpec::Input(HostSlice::U32(&tb.start[0])),
                    BufferSpec::Input(HostSlice::F64(&tb.offset[0])),
                    BufferSpec::Input(HostSlice::U32(&tb.order[1])),
                    BufferSpec::Input(HostSlice::U32(&tb.start[1])),
                    BufferSpec::Input(HostSlice::F64(&tb.offset[1])),
                    BufferSpec::Scratch {
                        dtype: DType::F64,
                        len: 6 * points,
                    },
                    BufferSpec::Scratch {
                        dtype: DType::F64,
                        len: 6 * n,
                    },
                    BufferSpec::Scratch {
                        dtype: DType::F64,
                        len: 6 * n,
                    },
                    BufferSpec::Input(HostSlice::F64(&tb.nodes)),
                    // The doubtful bins: their count first (returned: the row's nufft_direct_bins), then
                    // the list.
                    BufferSpec::Output {
                        dtype: DType::U32,
                        len: 1 + tb.modes,
                    },
                    match self.output {
                        Output::Full => BufferSpec::Output {
                            dtype: DType::F64,
                            len: tb.modes,
                        },
                        Output::TopK(_) => BufferSpec::Scratch {
                            dtype: DType::F64,
                            len: tb.modes,
                        },
                    },
                ];
                let launch = |kernel: &str, args: Vec<StepArg>, global: usize| {
                    Step::Launch(Launch {
                        kernel: kernel.into(),
                        args,
                        global: round_up(global),
                        local: Local::Prefer(ITEMS),
                    })
                };
                let mut steps = vec![launch(
                    "ls_nufft_strengths",
                    vec![
                        StepArg::I32(points as i32),
                        StepArg::Buffer(0),
                        StepArg::Buffer(1),
                        StepArg::U64(tb.centre),
                        StepArg::Buffer(8),
                        StepArg::Buffer(12),
                    ],
                    points.max(1),
                )];
                for (set, (first, grids, out_grid)) in
                    [(0, 2, 0), (2, 1, 2)].into_iter().enumerate()
                {
                    steps.push(launch(
                        "ls_nufft_spread",
                        vec![
                            StepArg::I32(n as i32),
                            StepArg::I32(tb.width as i32),
                            StepArg::F64(tb.beta),
                            StepArg::Buffer(2 + 3 * set),
                            StepArg::Buffer(3 + 3 * set),
                            StepArg::Buffer(4 + 3 * set),
                            StepArg::Buffer(8),
                            StepArg::I32(first),
                            StepArg::I32(grids),
                            StepArg::I32(out_grid),
                            StepArg::Buffer(9),
                        ],
                        n,
                    ));
                }
                // Stockham passes ping-pong between buffers 9 and 10.
                let mut span = 1;
                let mut current = 9;
                for &p in &tb.radices {
                    let other = if current == 9 { 10 } else { 9 };
                    steps.push(launch(
                        "ls_nufft_fft",
                        vec![
                            StepArg::I32(n as i32),
                            StepArg::I32(span as i32),
                            StepArg::I32(p as i32),
                            StepArg::I32(3),
                            StepArg::Buffer(current),
                            StepArg::Buffer(other),
                        ],
                        3 * (n / p),
                    ));
                    span *= p;
                    current = other;
                }
                steps.push(launch(
                    "ls_nufft_power",
                    vec![
                        StepArg::I32(tb.modes as i32),
                        StepArg::I32(n as i32),
                        StepArg::Buffer(current),
                        StepArg::Buffer(11),
                        StepArg::I32((tb.nodes.len() / 2) as i32),
                        StepArg::F64(tb.a),
                        StepArg::F64(tb.scale),
                        StepArg::I32(floating),
                        StepArg::F64(tb.e_y),
                        StepArg::F64(tb.e_w),
                        StepArg::F64(self.tolerance),
                        StepArg::Buffer(13),
                        StepArg::Buffer(12),
                    ],
                    tb.modes,
                ));
                steps.push(Step::Launch(Launch {
                    kernel: "ls_nufft_direct".into(),
                    args: vec![
                        StepArg::I32(points as i32),
                        StepArg::Buffer(0),
                        StepArg::Buffer(1),
                        StepArg::F64(tb.f0),
                        StepArg::F64(tb.df),
                        StepArg::F64((self.fixed.freq_bits as f64).exp2()),
                        StepArg::I32(floating),
                        StepArg::Buffer(12),
                        StepArg::Buffer(13),
                    ],
                    global: DIRECT_GROUPS * GROUP,
                    local: Local::Exact(GROUP),
                }));
                if let Output::TopK(k) = self.output {
                    buffers.push(BufferSpec::Input(HostSlice::U32(&tb.record)));
                    buffers.push(BufferSpec::Output {
                        dtype: DType::I32,
                        len: k,
                    });
                    buffers.push(BufferSpec::Output {
                        dtype: DType::F64,
                        len: k,
                    });
                    steps.push(top_k_launch("f64", [14, 13, 15, 16], k, 1));
                }
                opts.job(&PROGRAM, vec![], buffers, steps)
            })
            .collect()
    }

    /// The per-curve jobs' outputs as one field: the concatenated powers, or each curve's top-k.
    /// Each job returns the doubtful bins (count first), then the powers or the (index, power) of its peaks.
    fn assemble_curves(&self, outputs: Vec<Vec<HostVec>>) -> Field {
        let direct: f64 = outputs
            .iter()
            .map(|curve| match &curve[0] {
                HostVec::U32(list) => list.first().map_or(f64::NAN, |&n| f64::from(n)),
                _ => f64::NAN,
            })
            .sum();
        let mut field = match self.output {
            Output::Full => Field::new(vec![outputs
                .iter()
                .flat_map(|curve| curve[1].to_f64())
                .collect()]),
            Output::TopK(_) => {
                let (mut index, mut power) = (Vec::new(), Vec::new());
                for curve in &outputs {
                    index.extend(curve[1].to_f64());
                    power.extend(curve[2].to_f64());
                }
                Field::new(vec![index, power])
            }
        };
        field.stats.push((DIRECT_BINS.into(), direct));
        field
    }

    /// The bands' outputs as one field: the concatenated powers, or per curve the top-k (index, power)
    /// pairs merged over the curve's pieces.
    fn assemble_bands(&self, outputs: Vec<Vec<HostVec>>) -> Field {
        match self.output {
            Output::Full => Field::new(vec![outputs
                .iter()
                .flat_map(|band| band[0].to_f64())
                .collect()]),
            Output::TopK(k) => {
                // Merge the pieces' candidates per curve (a curve split across bands has several pieces).
                let mut per_curve: Vec<Vec<(usize, f64)>> = vec![Vec::new(); self.curves.len()];
                for (band, out) in self.bands.iter().zip(&outputs) {
                    let idx = out[0].to_f64();
                    let pow = out[1].to_f64();
                    for (i, piece) in band.pieces.iter().enumerate() {
                        for r in 0..k {
                            let (ix, p) = (idx[i * k + r], pow[i * k + r]);
                            // (−1, −1): fewer peaks than k. The poison of an unwritten rank is (−1, NaN): the
                            // index alone cannot tell, the power can. Anything else out of range is broken.
                            if ix >= 0.0 && p.is_finite() {
                                per_curve[piece.curve].push((piece.k0 + ix as usize, p));
                            } else if !(ix == -1.0 && p == -1.0) {
                                per_curve[piece.curve].push((usize::MAX, f64::NAN));
                            }
                        }
                    }
                }
                let mut index = Vec::with_capacity(self.curves.len() * k);
                let mut power = Vec::with_capacity(self.curves.len() * k);
                for mut peaks in per_curve {
                    peaks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                    for r in 0..k {
                        let (i, p) = peaks.get(r).copied().unwrap_or((usize::MAX, -1.0));
                        index.push(if i == usize::MAX { -1.0 } else { i as f64 });
                        power.push(p);
                    }
                }
                Field::new(vec![index, power])
            }
        }
    }

    fn top_k_field(&self, powers: &[Vec<f64>], k: usize) -> Field {
        let peaks: Vec<Vec<(usize, f64)>> = powers.iter().map(|p| top_k(p, k)).collect();
        Self::peaks_field(&peaks, k)
    }

    /// Per curve k ranks of (index, power); (−1, −1) past a curve's last peak.
    fn peaks_field(peaks: &[Vec<(usize, f64)>], k: usize) -> Field {
        let (mut index, mut power) = (Vec::new(), Vec::new());
        for peaks in peaks {
            for r in 0..k {
                let (i, v) = peaks
                    .get(r)
                    .map(|&(i, v)| (i as f64, v))
                    .unwrap_or((-1.0, -1.0));
                index.push(i);
                power.push(v);
            }
        }
        Field::new(vec![index, power])
    }
}

/// Absolute errors of power values against the reference.
#[derive(Default)]
struct Errors {
    max_abs: f64,
    max_rel: f64,
    sum2: f64,
    count: u64,
    non_finite: u64,
}

impl Errors {
    fn add(&mut self, got: f64, want: f64) {
        if !got.is_finite() {
            self.non_finite += 1;
            return;
        }
        let d = (got - want).abs();
        self.max_abs = self.max_abs.max(d);
        self.max_rel = self.max_rel.max(d / want.abs().max(1e-30));
        self.sum2 += d * d;
        self.count += 1;
    }
    fn finish(self, tolerance: f64) -> Accuracy {
        Accuracy {
            max_abs: self.max_abs,
            max_rel: self.max_rel,
            rms_abs: (self.sum2 / self.count.max(1) as f64).sqrt(),
            non_finite: self.non_finite,
            tolerance_abs: tolerance,
            tolerance_rel: f64::INFINITY,
            unit: "power".into(),
            pass: self.non_finite == 0 && self.count > 0 && self.max_abs <= tolerance,
        }
    }
}
