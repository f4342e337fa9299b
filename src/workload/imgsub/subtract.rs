//! The whole subtraction of a registered pair (`astroport subtract`): direction, kernel fit, difference and
//! variance, mask, detection and PSF photometry. The convolution and the matched filter run on the chosen
//! backend (the difference kernel of cl/common/imgsub.h, tiled into bands when the device is small); the fit
//! and the PSF model in float64 on the host.
//!
//! 1. **Direction:** the sharper image is convolved (HOTPANTS' `-c b`; deconvolving makes false positives).
//!    Each image's FWHM is the median, over the stamp stars, of 2√(A/π) with A the area above half the
//!    star's peak.
//! 2. **Fit** (`fit`): K and the background.
//! 3. **Difference:** D = I − R ⊗ K − B and VD = VI + VR ⊗ K² (or, convolving the science image,
//!    D = I ⊗ K + B − R, so D is always science minus reference).
//! 4. **Mask:** the unconvolved image's mask, the convolved image's grown by the kernel's half width, and
//!    the border where more than 0.1 % of the kernel's weight runs off the image (bits: 1 saturated, 2 bad,
//!    4 not a number, 8 edge).
//! 5. **Detection** (`detect`) with the PSF of D measured on the stamp stars (`psf`), its threshold raised within
//!    a saturated star's halo.

use super::detect::{self, Detection};
use super::difference::{
    background_at, tap_row_terms, DifferenceProblem, KeptPlanes, MatchedFilter, ReleaseOnDrop,
    VaryingKernel, HALF, SIDE, TERMS,
};
use super::fit::{
    fit_stamps, normalised, select_stamps, FitConfig, FitImages, KernelFit, StampStatus,
};
use super::io::PlaneSet;
use super::pair::{Pair, Plane, MASK_NOT_A_NUMBER};
use super::psf::{Planes, PsfModel, PsfSummary};
use super::{half_maximum_fwhm, median};
use crate::backend::{Precision, Target};
use crate::exec::RunOptions;
use crate::workload::Workload;
use rayon::prelude::*;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// Output mask bit: within the kernel's half width of the border.
pub const MASK_EDGE: u8 = 8;

/// Which image is convolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The reference is convolved to the science image's PSF (the usual case: a sharp, deep template).
    Reference,
    /// The science image is convolved to the reference's PSF.
    Science,
}

/// How to subtract.
#[derive(Debug, Clone)]
pub struct SubtractOptions {
    pub fit: FitConfig,
    /// 0: exact per-pixel kernel; T: constant over T × T tiles.
    pub tile: usize,
    /// Detection threshold, matched-filter σ.
    pub threshold: f64,
    pub precision: Precision,
    /// `None`: convolve the sharper image.
    pub direction: Option<Direction>,
    pub run: RunOptions,
    pub device_mem_cap: Option<u64>,
    /// Another tool's difference image (science minus the matched reference, in the science image's
    /// units; NaN = masked), put in place of astroport's before the matched filter, so that it is detected
    /// and scored with astroport's variance, mask, PSF model and detector: only D differs.
    pub external_difference: Option<std::sync::Arc<Vec<f32>>>,
    /// Rows per band when the difference and the matched filter are pipelined on a device (each band of
    /// D, VD and the significance computed, brought home and handed over while the next is computed; at
    /// least the kernel's half width); `None`: bands of about [`BAND_PIXELS`].
    pub band_rows: Option<usize>,
}

/// Pixels per band of the difference and the significance on a device: at 10k, 7 bands of 64 MB a plane, so
/// the writes of D, VD and the significance (about 5 GB/s each on the H200 machine, one file's buffered
/// writes being serialised) begin once the first band is home rather than after the last plane.
pub const BAND_PIXELS: usize = 1 << 24;

impl Default for SubtractOptions {
    fn default() -> Self {
        SubtractOptions {
            fit: FitConfig::default(),
            tile: 0,
            threshold: 5.0,
            precision: Precision::F32,
            direction: None,
            run: RunOptions::single_shot(),
            device_mem_cap: None,
            external_difference: None,
            band_rows: None,
        }
    }
}

/// Seconds spent in each step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Stamps, FWHMs and the kernel fit (float64), wall clock.
    pub fit_s: f64,
    /// Of which the stamp sums on the backend (device events, or the host clock on `cpu`), summed over
    /// the fit's iterations.
    pub stamp_sums_s: f64,
    /// The fit's basis images (host) and its stamp sums' wall clock (packing and transfers included).
    pub basis_images_s: f64,
    pub stamp_sums_wall_s: f64,
    /// Of which the backend's jobs (transfers, launches, a first kernel's load).
    pub stamp_sums_job_s: f64,
    /// The difference and its variance: device events (median of the repeats), or the host clock on `cpu`.
    pub difference_s: f64,
    /// The matched filter, timed the same way.
    pub filter_s: f64,
    /// Wall clock of each pass: uploads, runs (warm-ups and repeats included), downloads. Pipelined on a
    /// device (`Subtraction::kept_on_device`), the difference's holds both and the filter's is 0.
    pub difference_wall_s: f64,
    pub filter_wall_s: f64,
    /// The jobs the difference and the filter were pipelined in on a device (0 when they were not).
    pub pipelined_jobs: usize,
    /// PSF model, mask, peaks and photometry (host).
    pub host_s: f64,
    /// Wall clock of the whole subtraction, transfers and program builds included (files excluded).
    pub total_s: f64,
    /// Wall clock of each step in order (stamps, fwhm, fit, mask, background, difference,
    /// psf_beside_fit_and_difference, filter_inputs, filter, peaks_searched, waiting_for_caller, detection;
    /// pipelined on a device: background, psf_wait, psf_beside_fit, filter_inputs, difference_and_filter,
    /// peaks_searched, waiting_for_caller, detection), for a pipeline's profile. The PSF is measured on the
    /// host from the fit's start to the difference's end (pipelined: its start), so its time is inside
    /// theirs; peaks_searched is how long the peak search outlasted the passes, waiting_for_caller how long
    /// the caller's writes outlasted it, detection the candidates' places and photometry after both.
    pub steps: Vec<(&'static str, f64)>,
}

/// Wall clock of consecutive steps.
struct StepClock {
    last: Instant,
    steps: Vec<(&'static str, f64)>,
}

impl StepClock {
    fn new() -> Self {
        StepClock {
            last: Instant::now(),
            steps: Vec::new(),
        }
    }
    /// A step of `seconds` run beside the next one (its time is inside that step's too).
    fn beside(&mut self, name: &'static str, seconds: f64) {
        self.steps.push((name, seconds));
    }
    /// A step of `seconds` that ended at `last` + `seconds`.
    fn add(&mut self, name: &'static str, seconds: f64) {
        self.steps.push((name, seconds));
        self.last += std::time::Duration::from_secs_f64(seconds);
        crate::exec::trace_event(|| format!("subtract: {name} done ({seconds:.3} s)"));
    }
    /// Ends the step `name` now.
    fn done(&mut self, name: &'static str) {
        let now = Instant::now();
        let seconds = (now - self.last).as_secs_f64();
        self.steps.push((name, seconds));
        self.last = now;
        crate::exec::trace_event(|| format!("subtract: {name} done ({seconds:.3} s)"));
    }
}

/// A finished subtraction.
pub struct Subtraction {
    pub nx: usize,
    pub ny: usize,
    pub diff: Vec<f32>,
    pub variance: Vec<f32>,
    pub mask: Vec<u8>,
    /// The two input masks together, before growing (the scores' saturated zones).
    pub input_mask: Vec<u8>,
    pub snr: Vec<f32>,
    pub fit: KernelFit,
    pub direction: Direction,
    /// Median FWHM of the reference and science images over the stamp stars.
    pub fwhm: (f64, f64),
    pub psf: PsfModel,
    /// The factor on the convolved image's share of VD in the matched filter's variance.
    pub correlation: f64,
    /// The background subtracted: the fit's plus the correction measured on sky samples.
    pub background: [f64; 3],
    pub background_correction: [f64; 3],
    /// The correction's sky samples were computed on the device (the images there already, float64).
    pub sky_on_device: bool,
    pub detections: Vec<Detection>,
    pub timings: Timings,
    pub backend: String,
    pub precision: Precision,
    pub tile: usize,
    /// The difference and the matched filter were pipelined on the accelerator, the images kept there and
    /// the filter's inputs formed there ([`super::difference::KeptPlanes`]); false on `cpu`, on a device too
    /// small for the four images, in float64, with repeats or another tool's D.
    pub kept_on_device: bool,
}

/// The FWHM of a star at (x, y): 2√(A/π), A the pixels of its 15 × 15 box above half its peak over the
/// box border's median.
fn star_fwhm(image: &[f32], nx: usize, x: usize, y: usize) -> Option<f64> {
    let h = 7;
    if x < h || y < h {
        return None;
    }
    let mut border = Vec::new();
    let mut inner = Vec::new();
    for j in y - h..=y + h {
        for i in x - h..=x + h {
            let v = *image.get(j * nx + i)? as f64;
            if j == y - h || j == y + h || i == x - h || i == x + h {
                border.push(v);
            } else {
                inner.push(v);
            }
        }
    }
    let sky = median(&mut border);
    inner.iter_mut().for_each(|v| *v -= sky);
    let peak = inner.iter().cloned().fold(f64::MIN, f64::max);
    if peak.is_nan() || peak <= 0.0 {
        return None;
    }
    Some(half_maximum_fwhm(&inner))
}

fn median_fwhm(image: &[f32], nx: usize, places: &[(usize, usize)]) -> f64 {
    let mut v: Vec<f64> = places
        .iter()
        .filter_map(|&(x, y)| star_fwhm(image, nx, x, y))
        .collect();
    median(&mut v)
}

/// One image of the pair, shared with the thread that measures the PSF beside the fit and the difference
/// while the difference pass owns it.
struct SharedPlane {
    data: Arc<Vec<f32>>,
    variance: Arc<Vec<f32>>,
    mask: Arc<Vec<u8>>,
}

impl SharedPlane {
    fn new(plane: Plane) -> SharedPlane {
        SharedPlane {
            data: Arc::new(plane.data),
            variance: Arc::new(plane.variance),
            mask: Arc::new(plane.mask),
        }
    }
}

fn fit_images<'a>(
    conv: &'a SharedPlane,
    target: &'a SharedPlane,
    nx: usize,
    ny: usize,
) -> FitImages<'a> {
    FitImages {
        nx,
        ny,
        conv: &conv.data,
        conv_var: &conv.variance,
        target: &target.data,
        target_var: &target.variance,
        conv_bad: &conv.mask,
        target_bad: &target.mask,
    }
}

/// Grows a mask by `half` pixels in x and y (a square of side 2 half + 1), as a separable maximum (an OR of
/// bits). Masks are sparse: each set pixel spreads over its row's window, and only rows with a set pixel
/// take part in the columns' pass.
fn grow(mask: &[u8], nx: usize, ny: usize, half: usize) -> Vec<u8> {
    let mut rows = vec![0u8; nx * ny];
    let busy: Vec<bool> = rows
        .par_chunks_mut(nx)
        .enumerate()
        .map(|(y, out)| {
            let line = &mask[y * nx..][..nx];
            let mut any = false;
            for (x, &v) in line.iter().enumerate().filter(|(_, &v)| v != 0) {
                any = true;
                let (a, b) = (x.saturating_sub(half), (x + half).min(nx - 1));
                out[a..=b].iter_mut().for_each(|o| *o |= v);
            }
            any
        })
        .collect();
    let mut out = vec![0u8; nx * ny];
    out.par_chunks_mut(nx).enumerate().for_each(|(y, line)| {
        let (a, b) = (y.saturating_sub(half), (y + half).min(ny - 1));
        for yy in (a..=b).filter(|&yy| busy[yy]) {
            for (o, &v) in line.iter_mut().zip(&rows[yy * nx..][..nx]) {
                *o |= v;
            }
        }
    });
    out
}

/// A border pixel is masked when the part of the kernel that falls off the image (the convolution takes
/// the image as 0 there) times the convolved image's sky exceeds this share of the difference's noise: it
/// would miss that much of the sky behind it.
const EDGE_LOSS: f64 = 0.1;

/// Pixels within this distance of the border (0: none) lose more than EDGE_LOSS σ of sky (`sky`, with
/// `noise` the difference's typical σ), at the worst of 9 places over the field and the four directions.
/// The sum is signed: the fitted wings' noise cancels on a smooth sky.
fn edge_width(kernel: &VaryingKernel, sky: f64, noise: f64) -> usize {
    let h = HALF as i64;
    let mut width = 0;
    for (xh, yh) in [-1.0, 0.0, 1.0]
        .iter()
        .flat_map(|&x| [-1.0, 0.0, 1.0].map(|y| (x, y)))
    {
        let k = |u: i64, v: i64| kernel.at(u, v, xh, yh);
        // A pixel e from the border misses the taps that reach beyond it: |u| > e (or |v| > e) on one side.
        for e in 0..=h {
            let lost = [
                (-h..=h)
                    .flat_map(|v| (e + 1..=h).map(move |u| (u, v)))
                    .map(|(u, v)| k(u, v))
                    .sum::<f64>(),
                (-h..=h)
                    .flat_map(|v| (e + 1..=h).map(move |u| (-u, v)))
                    .map(|(u, v)| k(u, v))
                    .sum::<f64>(),
                (-h..=h)
                    .flat_map(|u| (e + 1..=h).map(move |v| (u, v)))
                    .map(|(u, v)| k(u, v))
                    .sum::<f64>(),
                (-h..=h)
                    .flat_map(|u| (e + 1..=h).map(move |v| (u, -v)))
                    .map(|(u, v)| k(u, v))
                    .sum::<f64>(),
            ]
            .into_iter()
            .fold(0.0f64, |m, l: f64| m.max(l.abs()));
            if lost * sky.abs() <= EDGE_LOSS * noise {
                width = width.max(e as usize);
                break;
            }
        }
    }
    width
}

/// Σ(P ⋆ K)² / (Σ P² Σ K²) for the filter taps P and the kernel K at the field's centre: how much more
/// noise the convolved image puts into the matched filter than its share of VD says.
fn correlated_noise_factor(filter: &[f64], kernel: &VaryingKernel) -> f64 {
    let h = HALF as i64;
    let side = 2 * HALF + 1;
    let k = |u: i64, v: i64| kernel.at(u, v, 0.0, 0.0);
    let p = |u: i64, v: i64| filter[((v + h) as usize) * side + (u + h) as usize];
    let (mut pc2, mut p2, mut k2) = (0.0, 0.0, 0.0);
    for v in -h..=h {
        for u in -h..=h {
            p2 += p(u, v).powi(2);
            k2 += k(u, v).powi(2);
        }
    }
    for w in -2 * h..=2 * h {
        for z in -2 * h..=2 * h {
            let mut c = 0.0;
            for v in (-h).max(z - h)..=h.min(z + h) {
                for u in (-h).max(w - h)..=h.min(w + h) {
                    c += p(u, v) * k(u - w, v - z);
                }
            }
            pc2 += c * c;
        }
    }
    if p2 > 0.0 && k2 > 0.0 {
        pc2 / (p2 * k2)
    } else {
        1.0
    }
}

/// Stride of the pixels D is sampled at for the background correction, and the side of the blocks (in
/// samples) whose medians the correction is fitted to.
const SKY_STRIDE: usize = 16;
const SKY_BLOCK: usize = 16;

/// The plane (b0 + b1 x̂ + b2 ŷ) left in D by the fitted background: the fit sees only the stamps, bright
/// stars whose far wings (beyond the 21 × 21 kernel) it takes for sky, so B came out 2.3 e- too high on the
/// 10k field (the whole significance image at −0.44 σ, and 120 negative false positives). D is sampled at
/// every 16th pixel of every 16th row ([`sky_samples`]), the median of the unmasked ones taken over blocks of
/// 16 × 16 samples (sources are few in D, so the median is the sky; SExtractor's mode estimate changed the
/// false positives by ±1 at 1k, 2k and 10k), and a plane fitted to the blocks' medians.
fn residual_background(samples: &[f64], mask: &[u8], nx: usize, ny: usize) -> [f64; 3] {
    let block = SKY_STRIDE * SKY_BLOCK;
    let (bx, by) = (nx.div_ceil(block), ny.div_ceil(block));
    let across = nx.div_ceil(SKY_STRIDE);
    let medians: Vec<Option<(f64, f64, f64)>> = (0..bx * by)
        .into_par_iter()
        .map(|b| {
            let (i, j) = (b % bx, b / bx);
            let mut unmasked = Vec::new();
            for y in (j * block..((j + 1) * block).min(ny)).step_by(SKY_STRIDE) {
                for x in (i * block..((i + 1) * block).min(nx)).step_by(SKY_STRIDE) {
                    if mask[y * nx + x] == 0 {
                        unmasked.push(samples[(y / SKY_STRIDE) * across + x / SKY_STRIDE]);
                    }
                }
            }
            if unmasked.len() < 16 {
                return None;
            }
            let sky = median(&mut unmasked);
            let centre = |k: usize, n: usize| {
                normalised(
                    ((k * block + ((k + 1) * block).min(n)) as f64 - 1.0) / 2.0,
                    n,
                )
            };
            Some((centre(i, nx), centre(j, ny), sky))
        })
        .collect();
    let points: Vec<(f64, f64, f64)> = medians.into_iter().flatten().collect();
    let terms = if points.len() >= 6 { 3 } else { 1 };
    if points.is_empty() {
        return [0.0; 3];
    }
    let design = nalgebra::DMatrix::from_fn(points.len(), terms, |r, c| {
        [1.0, points[r].0, points[r].1][c]
    });
    let values = nalgebra::DVector::from_iterator(points.len(), points.iter().map(|p| p.2));
    let normal = design.transpose() * &design;
    match normal.cholesky() {
        Some(ch) => {
            let solved = ch.solve(&(design.transpose() * values));
            let mut out = [0.0; 3];
            out[..terms].copy_from_slice(solved.as_slice());
            out
        }
        None => [0.0; 3],
    }
}

/// D = I − R ⊗ K − B in float64 at every [`SKY_STRIDE`]-th pixel of every [`SKY_STRIDE`]-th row, row by row
/// (NaN where masked: [`residual_background`] leaves those out): on the device when the images are there
/// already (400,000 samples at 10k in a 1 ms job on an H100, against 10-25 ms of the host's 16 cores on the
/// path to the pipeline), else here. Also says whether the device made them.
fn sky_samples(
    on_device: Option<(&dyn crate::backend::Accelerator, &KeptPlanes)>,
    conv: &[f32],
    unconv: &[f32],
    mask: &[u8],
    (nx, ny): (usize, usize),
    kernel: &VaryingKernel,
) -> Result<(Vec<f64>, bool), String> {
    if let Some((dev, kept)) = on_device {
        let found = kept
            .sky_samples(dev, &kernel.device_terms(), SKY_STRIDE)
            .map_err(|e| format!("the background's sky samples on {}: {e}", dev.id()))?;
        if let Some(samples) = found {
            return Ok((samples, true));
        }
    }
    let across = nx.div_ceil(SKY_STRIDE);
    let mut samples = vec![f64::NAN; across * ny.div_ceil(SKY_STRIDE)];
    samples
        .par_chunks_mut(across)
        .enumerate()
        .for_each(|(j, out)| {
            let y = j * SKY_STRIDE;
            let yh = normalised(y as f64, ny);
            let row = SampleRow::new(kernel, yh);
            let mut taps = vec![0.0; SIDE * SIDE];
            let bg = &kernel.background;
            for (i, sample) in out.iter_mut().enumerate() {
                let x = i * SKY_STRIDE;
                if mask[y * nx + x] != 0 {
                    continue;
                }
                let xh = normalised(x as f64, nx);
                let c = convolved_at(conv, nx, ny, x, y, &row, xh, &mut taps);
                *sample = unconv[y * nx + x] as f64 - c - background_at(bg, xh, yh);
            }
        });
    Ok((samples, false))
}

/// One pass on `target` in the options' precision: its planes as float32 (D and VD, or the matched filter's
/// significance) and the median time of its timed runs.
fn run_planes<const N: usize>(
    problem: &DifferenceProblem,
    target: &Target,
    opts: &SubtractOptions,
    what: &str,
) -> Result<([Vec<f32>; N], f64), String> {
    let failed = |e: crate::exec::RunError| format!("{what} on {}: {e}", target.id());
    let (planes, median) = if opts.precision == Precision::F32 {
        let (planes, times) = problem.run_f32(target, &opts.run).map_err(failed)?;
        (planes, times.median)
    } else {
        let measured = problem
            .execute(target, opts.precision, &opts.run)
            .map_err(failed)?;
        let narrow = |v: &[f64]| v.par_iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let planes = measured
            .output
            .components
            .iter()
            .map(|c| narrow(c))
            .collect();
        (planes, measured.times.median)
    };
    let count = planes.len();
    let planes = <[Vec<f32>; N]>::try_from(planes).map_err(|_| {
        format!(
            "{what} on {}: {count} planes came back, not {N}",
            target.id()
        )
    })?;
    Ok((planes, median))
}

/// Runs the subtraction (module docs) on `target`.
pub fn subtract(
    pair: Pair,
    opts: &SubtractOptions,
    target: &Target,
) -> Result<Subtraction, String> {
    subtract_streaming(pair, opts, target, |_, _| Ok(()))
}

/// Runs the subtraction and hands its planes to `on_planes` as soon as each set is known: the difference, its
/// variance and mask (`snr` and `detections` still empty) while the matched filter runs, then the
/// significance in bands of rows (`PlaneSet::SignificanceRows`, handed over before the first is computed),
/// each as soon as it is home: on a device band by band, elsewhere the whole plane as one band, written
/// while detection runs. A pipeline writes them there. Its errors are the
/// subtraction's.
pub fn subtract_streaming(
    pair: Pair,
    opts: &SubtractOptions,
    target: &Target,
    on_planes: impl Fn(&Subtraction, PlaneSet) -> Result<(), String> + Sync,
) -> Result<Subtraction, String> {
    let start = Instant::now();
    crate::exec::trace_event(|| "subtract: begins".into());
    let mut clock = StepClock::new();
    let (nx, ny) = (pair.nx, pair.ny);
    let (reference, science) = (
        SharedPlane::new(pair.reference),
        SharedPlane::new(pair.science),
    );
    // On an accelerator the difference and the matched filter are pipelined in bands, the images kept there
    // (KeptPlanes), unless another tool's difference is to replace D before the filter; released on every
    // way out of this function.
    let band_rows = opts.band_rows.unwrap_or(BAND_PIXELS.div_ceil(nx.max(1)));
    let kept = match target {
        Target::Device(dev)
            if opts.precision == Precision::F32 && opts.external_difference.is_none() =>
        {
            KeptPlanes::for_device(
                dev.as_ref(),
                nx,
                ny,
                band_rows,
                opts.device_mem_cap,
                &opts.run,
            )
        }
        _ => None,
    };
    let _release_kept = match (kept, target) {
        (Some(k), Target::Device(dev)) => Some(ReleaseOnDrop {
            dev: dev.as_ref(),
            ids: k.ids(),
        }),
        _ => None,
    };
    let (direction, fwhm, fitted, masks, psf_thread, uploaded, pipeline_planes) =
        std::thread::scope(|scope| {
            // 1. Direction, from the stars the fit would use with the reference convolved.
            let probe = select_stamps(&fit_images(&reference, &science, nx, ny), &opts.fit)
                .map_err(|e| e.to_string())?;
            clock.done("stamps");
            let places: Vec<(usize, usize)> = probe
                .iter()
                .flatten()
                .filter(|s| s.status == StampStatus::Fitted)
                .map(|s| (s.x, s.y))
                .collect();
            let fwhm = (
                median_fwhm(&reference.data, nx, &places),
                median_fwhm(&science.data, nx, &places),
            );
            clock.done("fwhm");
            let direction = opts.direction.unwrap_or(if fwhm.1 < fwhm.0 {
                Direction::Science
            } else {
                Direction::Reference
            });
            let (conv, unconv) = match direction {
                Direction::Reference => (&reference, &science),
                Direction::Science => (&science, &reference),
            };
            // The PSF of D, measured on the unconvolved image from here to the difference's end: it needs no
            // kernel, and beside the difference alone it outlasted the device pass (0.21-0.24 s against 0.20 s
            // at 10k on the H200). Its thread is joined after the difference.
            let psf_thread = {
                let on_device = matches!(target, Target::Device(_));
                let (data, variance, bad) = (
                    Arc::clone(&unconv.data),
                    Arc::clone(&unconv.variance),
                    Arc::clone(&unconv.mask),
                );
                let image = match direction {
                    Direction::Reference => "science",
                    Direction::Science => "reference",
                };
                crate::exec::JoinOnDrop::spawn(move || {
                    let started = Instant::now();
                    let measure = || {
                        // PSF stars: bright local maxima over the whole unconvolved image (measure() keeps the
                        // isolated ones).
                        let stars = super::psf::candidates(&data, &bad, nx, ny);
                        crate::exec::trace_event(|| {
                            format!("psf: {} candidate stars found", stars.len())
                        });
                        let psf = PsfModel::measure(&data, &variance, &bad, nx, ny, &stars);
                        crate::exec::trace_event(|| "psf: measured".into());
                        psf.ok_or_else(|| {
                        format!(
                            "PSF model: fewer than 3 of the {} candidate stars could be measured in the \
                             {image} image",
                            stars.len(),
                        )
                    })
                    };
                    // Beside an accelerator's jobs, at low priority: the fit's host work takes the cores first.
                    // On `cpu` the difference needs every core: the PSF takes its share as before.
                    let measured = if on_device {
                        crate::exec::background_pool().install(measure)
                    } else {
                        measure()
                    };
                    measured.map(|p| (p, started.elapsed().as_secs_f64()))
                })
            };
            // The difference's images go to the device beside the fit (1.6 GB, 37 ms at 10k on the H200), off
            // the difference's own time, from when the fit's second stamp sums are done: begun at once, they
            // took the device as its context was made and held up that first job by 36 ms. Not begun when the
            // fit fails before its first (`sums_done` gone unsent). `ASTROPORT_PROBE_UPLOAD_WITH_DIFFERENCE`
            // (a probe for A/B timing, not a setting) leaves them to the difference's job.
            let (sums_done, sums_back) = std::sync::mpsc::channel::<()>();
            // The pipeline's three output planes (D, VD and the significance, 1.2 GB at 10k), made on a thread
            // of their own and their pages mapped on the background pool (beside the PSF, at low priority)
            // once the fit's first stamp sums are back (the device's context is made by then: faulting pages
            // while it was being made slowed it). Mapped by the jobs instead, beside their kernels, they held
            // each job up by 5-14 ms on a slow host; mapped here they lengthen the fit by 8-36 ms
            // (docs/perf-notes.md). The thread is joined where the pipeline takes them.
            // `ASTROPORT_PROBE_PLANES_MAPPED_BY_THE_JOBS` (a probe for A/B timing, not a setting) leaves
            // them to the jobs.
            let (map_now, map_signal) = std::sync::mpsc::channel::<()>();
            let map_beside_fit = matches!((kept, target), (Some(_), Target::Device(_)))
                && !crate::exec::probe_on("ASTROPORT_PROBE_PLANES_MAPPED_BY_THE_JOBS");
            let pipeline_planes = map_beside_fit.then(|| {
                // `ASTROPORT_PROBE_MAP_FROM_SUMS=k` (a probe for A/B timing): mapped after the k-th sums.
                let from_sums = crate::exec::probe_count("ASTROPORT_PROBE_MAP_FROM_SUMS", 1);
                crate::exec::JoinOnDrop::spawn(move || {
                    let mut planes = [(); 3].map(|_| vec![0.0f32; nx * ny]);
                    let started = Instant::now();
                    if (0..from_sums.max(1)).all(|_| map_signal.recv().is_ok()) {
                        map_pages(&mut planes);
                        crate::exec::trace_event(|| {
                            "subtract: the pipeline's planes mapped".into()
                        });
                    }
                    (planes, started.elapsed().as_secs_f64())
                })
            });
            let uploading = match (kept, target) {
                (Some(k), Target::Device(dev))
                    if !crate::exec::probe_on("ASTROPORT_PROBE_UPLOAD_WITH_DIFFERENCE") =>
                {
                    let images = [&conv.data, &conv.variance, &unconv.data, &unconv.variance];
                    // One image after each of the fit's stamp-sums jobs from the second on: the host then
                    // forms and solves the normal equations (3-15 ms at 10k) while an image's job (10-29 ms)
                    // holds the device. Sent all at once, they held the fit's next two jobs up by about 10
                    // ms each; begun after the first sums, the first image (the slowest) still held up the
                    // second, which sums every stamp again (docs/perf-notes.md). Those left when the fit
                    // is done go at once. Probes for A/B timing, not settings:
                    // `ASTROPORT_PROBE_UPLOAD_AT_ONCE` sends them all at once, and
                    // `ASTROPORT_PROBE_UPLOAD_FROM_SUMS=k` sends the first after the k-th sums (default 2).
                    let at_once = crate::exec::probe_on("ASTROPORT_PROBE_UPLOAD_AT_ONCE");
                    let from_sums = crate::exec::probe_count("ASTROPORT_PROBE_UPLOAD_FROM_SUMS", 2);
                    Some(scope.spawn(move || {
                        if sums_back.recv().is_err() {
                            return Ok(None);
                        }
                        for _ in 1..from_sums {
                            let _ = sums_back.recv();
                        }
                        let turn = || {
                            if !at_once {
                                let _ = sums_back.recv();
                            }
                        };
                        let uploaded = k
                            .upload_images(dev.as_ref(), images.map(|v| v.as_slice()), turn)
                            .map_err(|e| format!("the difference's images on {}: {e}", dev.id()))?;
                        crate::exec::trace_event(|| {
                            "subtract: the difference's images uploaded".into()
                        });
                        Ok::<_, String>(Some(uploaded))
                    }))
                }
                _ => None,
            };
            // 2. The fit, on the probe's stamps when the reference is convolved (they were chosen on it).
            let images = fit_images(conv, unconv, nx, ny);
            // 4. The masks that do not depend on the kernel, made beside the fit (whose stamp sums wait on the
            // device): the inputs' OR, and the convolved image's mask grown by the kernel.
            let masks = scope.spawn(|| {
                let input_mask: Vec<u8> = conv
                    .mask
                    .par_iter()
                    .zip(unconv.mask.as_slice())
                    .map(|(&a, &b)| a | b)
                    .collect();
                let mut mask = grow(&conv.mask, nx, ny, HALF);
                mask.par_iter_mut()
                    .zip(unconv.mask.as_slice())
                    .for_each(|(m, &u)| *m |= u);
                let typical = |v: &[f32]| {
                    let mut sample: Vec<f32> = v.iter().step_by(97).copied().collect();
                    median(&mut sample)
                };
                let (sky, noise) = (typical(&conv.data), typical(&unconv.variance).sqrt());
                (input_mask, mask, sky, noise)
            });
            let fitted = (|| {
                let stamps = match direction {
                    Direction::Reference => probe,
                    Direction::Science => select_stamps(&images, &opts.fit)?,
                };
                let each_sums_done = move || {
                    let _ = sums_done.send(());
                    let _ = map_now.send(());
                };
                fit_stamps(
                    &images,
                    &opts.fit,
                    stamps,
                    target,
                    opts.device_mem_cap,
                    each_sums_done,
                )
            })()
            .map_err(|e| e.to_string());
            let masks = masks.join().expect("the masks' thread panicked");
            let uploaded = uploading
                .map(|u| u.join().expect("the images' upload panicked"))
                .transpose()?
                .flatten();
            Ok::<_, String>((
                direction,
                fwhm,
                fitted?,
                masks,
                psf_thread,
                uploaded,
                pipeline_planes,
            ))
        })?;
    // The same planes, with the images on the device when they went there beside the fit.
    let kept = uploaded.or(kept);
    let (conv, unconv) = match direction {
        Direction::Reference => (reference, science),
        Direction::Science => (science, reference),
    };
    let (input_mask, mut mask, sky, noise) = masks;
    let fit_s = start.elapsed().as_secs_f64();
    clock.done("fit");
    let sums_s = fitted.sums_seconds;
    let host = Instant::now();
    // The border where the kernel loses too much sky (rows and columns within `edge` of it).
    let edge = edge_width(&fitted.kernel, sky, noise);
    if edge > 0 {
        mask.par_chunks_mut(nx).enumerate().for_each(|(y, row)| {
            let bands = if y < edge || y + edge >= ny {
                [0..nx, 0..0]
            } else {
                [0..edge.min(nx), nx.saturating_sub(edge)..nx]
            };
            for band in bands {
                row[band].iter_mut().for_each(|m| *m |= MASK_EDGE);
            }
        });
    }
    let mut host_s = host.elapsed().as_secs_f64();
    clock.done("mask");
    // 3. The difference on the device, with the background the stamps left corrected on sky samples.
    let mut kernel = fitted.kernel.clone();
    kernel.background = fitted.background;
    // `ASTROPORT_PROBE_SKY_ON_HOST`: a probe for A/B timing, not a setting.
    let on_device = match (&kept, target) {
        (Some(k), Target::Device(dev)) if !crate::exec::probe_on("ASTROPORT_PROBE_SKY_ON_HOST") => {
            Some((dev.as_ref(), k))
        }
        _ => None,
    };
    let (samples, sky_on_device) = sky_samples(
        on_device,
        &conv.data,
        &unconv.data,
        &mask,
        (nx, ny),
        &kernel,
    )?;
    let correction = residual_background(&samples, &mask, nx, ny);
    for (b, c) in kernel.background.iter_mut().zip(correction) {
        *b += c;
    }
    let background = kernel.background;
    clock.done("background");
    let mut problem = DifferenceProblem::from_shared_images(
        "subtract",
        nx,
        ny,
        [conv.data, conv.variance, unconv.data, unconv.variance],
        kernel,
        opts.tile,
    );
    problem.device_mem_cap = opts.device_mem_cap;
    let sign = match direction {
        Direction::Reference => 1.0,
        Direction::Science => -1.0,
    };
    // Where D, VD and the significance are computed: pipelined on an accelerator that keeps the planes, or
    // the difference here and now, then the filter from the inputs the host forms (below).
    let route = match (kept, target) {
        (Some(kept), Target::Device(dev)) => Route::Pipelined {
            dev: dev.as_ref(),
            kept,
        },
        _ => {
            let started = Instant::now();
            let planes = run_planes(&problem, target, opts, "difference");
            let difference_wall_s = started.elapsed().as_secs_f64();
            let ([diff, variance], difference_s) = planes?;
            Route::DifferenceFirst {
                diff,
                variance,
                difference_s,
                difference_wall_s,
            }
        }
    };
    let (psf, psf_s) = psf_thread.join()?;
    host_s += psf_s;
    match route {
        Route::Pipelined { .. } => {
            clock.done("psf_wait");
            clock.beside("psf_beside_fit", psf_s);
        }
        Route::DifferenceFirst { .. } => {
            clock.done("difference");
            clock.beside("psf_beside_fit_and_difference", psf_s);
        }
    }
    let host = Instant::now();
    // The convolved image's noise in D is correlated over the kernel: the matched filter's variance from
    // it is VR Σ(P ⋆ K)², not the VR Σ K² Σ P² that filtering VD would give.
    let filter_taps = psf.matched_filter();
    let correlation = correlated_noise_factor(&filter_taps, &fitted.kernel);
    let corr = correlation as f32 - 1.0;
    // The difference computed first is made science minus reference, another tool's put in its place,
    // and the filter's inputs formed from it in the convolved image's planes, spent (at 10k every fresh
    // plane is 400 MB of pages to map).
    // D, VD and the significance end up in `planes`: read back into them band by band when pipelined
    // (made and mapped beside the fit, or here under the probe), else the difference's two and the
    // filter's plane made in the scope below.
    let n = nx * ny;
    let (mut planes, pass, first_times) = match route {
        Route::Pipelined { dev, kept } => {
            let planes = match pipeline_planes {
                Some(thread) => {
                    let (planes, mapping_s) = thread.join();
                    clock.done("planes_wait");
                    clock.beside("planes_mapped_beside_fit", mapping_s);
                    planes
                }
                None => [(); 3].map(|_| vec![0.0f32; n]),
            };
            (planes, Pass::Pipelined { dev, kept, problem }, (0.0, 0.0))
        }
        Route::DifferenceFirst {
            mut diff,
            variance,
            difference_s,
            difference_wall_s,
        } => {
            let [mut filter_diff, mut filter_variance, _, unconv_variance] = problem.into_images();
            if sign < 0.0 {
                diff.par_iter_mut().for_each(|d| *d = -*d);
            }
            if let Some(external) = &opts.external_difference {
                diff.par_iter_mut()
                    .zip(mask.par_iter_mut())
                    .zip(external.par_iter())
                    .for_each(|((d, m), &e)| {
                        if e.is_finite() {
                            *d = e;
                        } else {
                            (*d, *m) = (0.0, *m | MASK_NOT_A_NUMBER);
                        }
                    });
            }
            // 5. The matched filter: D and VD with masked pixels at 0, convolved with the PSF and its
            // square. The filter's variance is VD with the convolved image's share scaled for its
            // correlated noise.
            filter_diff
                .par_iter_mut()
                .zip(filter_variance.par_iter_mut())
                .zip(diff.par_iter().zip(&variance))
                .zip(unconv_variance.par_iter().zip(&mask))
                .for_each(|(((fd, fv), (&d, &vd)), (&vi, &m))| {
                    (*fd, *fv) = if m == 0 {
                        (d, vd + corr * (vd - vi).max(0.0))
                    } else {
                        (0.0, 0.0)
                    };
                });
            drop(unconv_variance);
            let mut filter = DifferenceProblem::matched_filter(
                nx,
                ny,
                filter_diff,
                filter_variance,
                &filter_taps,
            );
            filter.device_mem_cap = opts.device_mem_cap;
            (
                [diff, variance, Vec::new()],
                Pass::FilterAfter { filter },
                (difference_s, difference_wall_s),
            )
        }
    };
    host_s += host.elapsed().as_secs_f64();
    clock.done("filter_inputs");
    let pipelined_on_device = matches!(pass, Pass::Pipelined { .. });
    let mut sub = Subtraction {
        nx,
        ny,
        diff: Vec::new(),
        variance: Vec::new(),
        mask,
        input_mask,
        snr: Vec::new(),
        fit: fitted,
        direction,
        fwhm,
        psf,
        correlation,
        background,
        background_correction: correction,
        sky_on_device,
        detections: Vec::new(),
        timings: Timings::default(),
        backend: target.id(),
        precision: opts.precision,
        tile: opts.tile,
        kept_on_device: pipelined_on_device,
    };
    // The caller's writers take D and VD (with the mask) and the significance in bands of rows, each band
    // as soon as it is home: pipelined on a device, band by band while the next is computed (the jobs read
    // them back straight into the three planes); else each plane as one band. A thread beside searches the
    // significance's rows for peaks as they come (at 10k the search is 27 ms on the H200 machine's 16
    // cores: after the last band it would outlast the planes' writes).
    // The significance of the filter after the difference, made inside the scope and lent from here.
    let late_snr = std::sync::OnceLock::<Vec<f32>>::new();
    let late_snr_ref = &late_snr;
    let plane_refs = planes.each_mut().map(|p| p.as_mut_slice());
    let on_planes = &on_planes;
    let view = &sub;
    let (peaks, times, search_wait_s, written_wait_s) = std::thread::scope(|scope| {
        let (to_diff, diff_bands) = std::sync::mpsc::channel();
        let (to_variance, variance_bands) = std::sync::mpsc::channel();
        let (to_snr, snr_bands) = std::sync::mpsc::channel();
        let difference_written = scope.spawn(move || {
            let (diff, variance) = (BandQueue::new(diff_bands), BandQueue::new(variance_bands));
            let set = PlaneSet::Difference {
                diff: &|sink| diff.give(sink),
                variance: &|sink| variance.give(sink),
            };
            let result = on_planes(view, set);
            // A writer that stopped early (an error it reports) still lets the bands go.
            diff.drain();
            variance.drain();
            result
        });
        let significance_written = scope.spawn(move || {
            let snr = BandQueue::new(snr_bands);
            let result = on_planes(view, PlaneSet::SignificanceRows(&|sink| snr.give(sink)));
            snr.drain();
            result
        });
        let (to_search, searched_bands) = std::sync::mpsc::channel::<&[f32]>();
        let searched = scope.spawn(move || {
            let (mut rows, mut peaks, mut searched) = (Vec::with_capacity(ny), Vec::new(), 0);
            for band in searched_bands {
                rows.extend(band.chunks(nx.max(1)));
                let reach = detect::rows_searchable(rows.len(), ny);
                peaks.extend(detect::peaks_in_rows(
                    &rows,
                    &view.mask,
                    nx,
                    ny,
                    searched..reach,
                    opts.threshold,
                ));
                searched = searched.max(reach);
            }
            peaks
        });
        let senders = [to_diff, to_variance, to_snr];
        let hand_over = |plane: usize, row0: usize, band| {
            // A writer gone (its error is reported when it is joined) takes no more bands.
            let _ = senders[plane].send((row0, band));
            if plane == 2 {
                let _ = to_search.send(band);
            }
        };
        let started = Instant::now();
        let times = match pass {
            Pass::Pipelined { dev, kept, problem } => {
                let inputs = MatchedFilter {
                    mask: &view.mask,
                    sign: sign as f32,
                    corr,
                    taps: &filter_taps,
                };
                let pipelined = problem
                    .difference_and_filter(
                        dev,
                        &kept,
                        &inputs,
                        band_rows,
                        plane_refs,
                        |row0, diff, variance| {
                            if sign < 0.0 {
                                diff.par_iter_mut().for_each(|d| *d = -*d);
                            }
                            hand_over(0, row0, diff);
                            hand_over(1, row0, variance);
                        },
                        |row0, snr| hand_over(2, row0, snr),
                    )
                    .map_err(|e| format!("difference and matched filter on {}: {e}", dev.id()))?;
                let wall_s = started.elapsed().as_secs_f64();
                PassTimes {
                    difference_s: pipelined.difference_s,
                    difference_wall_s: wall_s,
                    filter_s: pipelined.filter_s,
                    filter_wall_s: 0.0,
                    pipelined_jobs: pipelined.jobs,
                }
            }
            Pass::FilterAfter { filter } => {
                let [diff, variance, _] = plane_refs;
                hand_over(0, 0, diff);
                hand_over(1, 0, variance);
                let ([snr], filter_s) = run_planes(&filter, target, opts, "matched filter")?;
                let snr = late_snr_ref.get_or_init(|| snr);
                hand_over(2, 0, snr);
                PassTimes {
                    difference_s: first_times.0,
                    difference_wall_s: first_times.1,
                    filter_s,
                    filter_wall_s: started.elapsed().as_secs_f64(),
                    pipelined_jobs: 0,
                }
            }
        };
        drop(senders);
        drop(to_search);
        let passes_s = started.elapsed().as_secs_f64();
        let peaks = searched.join().expect("the peak search panicked");
        let search_wait_s = started.elapsed().as_secs_f64() - passes_s;
        let joined = Instant::now();
        let written = [difference_written, significance_written]
            .map(|h| h.join().expect("the caller's plane writer panicked"));
        written.into_iter().collect::<Result<(), String>>()?;
        Ok::<_, String>((
            peaks,
            (times, passes_s),
            search_wait_s,
            joined.elapsed().as_secs_f64(),
        ))
    })?;
    if let Some(snr) = late_snr.into_inner() {
        planes[2] = snr;
    }
    let (times, passes_s) = times;
    let pass = if times.pipelined_jobs > 0 {
        "difference_and_filter"
    } else {
        "filter"
    };
    clock.add(pass, passes_s);
    clock.add("peaks_searched", search_wait_s);
    clock.add("waiting_for_caller", written_wait_s);
    // The candidates placed and measured once the planes are whole (70 at 10k: about a millisecond).
    let host_detect = Instant::now();
    let [diff, variance, snr] = planes;
    let halo = detect::SaturationHalo::new(&sub.input_mask, sub.fwhm.0.max(sub.fwhm.1));
    let detections = detect::measure(
        peaks,
        &snr,
        &Planes {
            nx,
            ny,
            diff: &diff,
            variance: &variance,
            mask: &sub.mask,
        },
        opts.threshold,
        &halo,
        &sub.psf,
    );
    let detect_s = host_detect.elapsed().as_secs_f64();
    clock.done("detection");
    host_s += detect_s;
    (sub.diff, sub.variance, sub.snr) = (diff, variance, snr);
    sub.detections = detections;
    sub.timings = Timings {
        fit_s,
        stamp_sums_s: sums_s,
        basis_images_s: sub.fit.basis_images_seconds,
        stamp_sums_wall_s: sub.fit.sums_wall_seconds,
        stamp_sums_job_s: sub.fit.sums_job_seconds,
        difference_s: times.difference_s,
        filter_s: times.filter_s,
        difference_wall_s: times.difference_wall_s,
        filter_wall_s: times.filter_wall_s,
        pipelined_jobs: times.pipelined_jobs,
        host_s,
        total_s: start.elapsed().as_secs_f64(),
        steps: clock.steps,
    };
    Ok(sub)
}

/// Where the difference runs (`subtract_streaming`).
enum Route<'a> {
    /// With the matched filter, in bands, on an accelerator that keeps the planes.
    Pipelined {
        dev: &'a dyn crate::backend::Accelerator,
        kept: KeptPlanes,
    },
    /// Before the filter, done: its planes (D unsigned) and times.
    DifferenceFirst {
        diff: Vec<f32>,
        variance: Vec<f32>,
        difference_s: f64,
        difference_wall_s: f64,
    },
}

/// What gives the planes to the writers and detection (`subtract_streaming`).
enum Pass<'a> {
    /// The difference and the filter in bands on an accelerator.
    Pipelined {
        dev: &'a dyn crate::backend::Accelerator,
        kept: KeptPlanes,
        problem: DifferenceProblem,
    },
    /// D (science minus reference) and VD known, in the planes; the filter to run on its inputs.
    FilterAfter { filter: DifferenceProblem },
}

/// The device time and wall clock of the difference and the filter.
struct PassTimes {
    difference_s: f64,
    difference_wall_s: f64,
    filter_s: f64,
    filter_wall_s: f64,
    pipelined_jobs: usize,
}

/// The bands of one plane as its writer takes them: the next band (first row, values) once it is home,
/// `None` after the last.
struct BandQueue<'a>(std::sync::Mutex<std::sync::mpsc::Receiver<(usize, &'a [f32])>>);

impl<'a> BandQueue<'a> {
    fn new(bands: std::sync::mpsc::Receiver<(usize, &'a [f32])>) -> Self {
        BandQueue(std::sync::Mutex::new(bands))
    }
    fn next(&self) -> Option<(usize, &'a [f32])> {
        self.0.lock().unwrap().recv().ok()
    }
    /// The next band to `sink` ([`crate::fits_image::RowBands`]'s way), what it returned; `None` after
    /// the last.
    fn give(&self, sink: crate::fits_image::BandSink) -> Option<std::io::Result<()>> {
        self.next().map(|(row0, band)| sink(row0, band))
    }
    /// Lets the bands the writer did not take go as they come, up to the last.
    fn drain(&self) {
        while self.next().is_some() {}
    }
}

/// The kernel along one row of samples (fixed ŷ): each tap's row terms (`tap_row_terms`) as three planes,
/// kernel rows with u reversed (index (v + H)·SIDE + H − u), so a row of K meets the image's pixels
/// x − H .. x + H in ascending order and a sample forms its taps in one vectorised pass.
struct SampleRow {
    a: Vec<f64>,
    b: Vec<f64>,
    k3: Vec<f64>,
}

impl SampleRow {
    fn new(kernel: &VaryingKernel, yh: f64) -> SampleRow {
        let terms: Vec<[f64; 3]> = (0..SIDE * SIDE)
            .map(|f| {
                let (row, w) = (f / SIDE, f % SIDE);
                let t = row * SIDE + (SIDE - 1 - w);
                tap_row_terms(&kernel.kbar[t * TERMS..][..TERMS], yh)
            })
            .collect();
        let plane = |i: usize| terms.iter().map(|t| t[i]).collect();
        SampleRow {
            a: plane(0),
            b: plane(1),
            k3: plane(2),
        }
    }
}

/// Maps every page of `planes` (first touch), on the background pool: fresh allocations are not mapped
/// until written, and a device job reading a band back into unmapped pages faults them in as it copies.
fn map_pages(planes: &mut [Vec<f32>; 3]) {
    const PAGE_VALUES: usize = 4096 / std::mem::size_of::<f32>();
    crate::exec::background_pool().install(|| {
        planes
            .par_iter_mut()
            .flat_map(|p| p.par_chunks_mut(PAGE_VALUES * 512))
            .for_each(|chunk| {
                for page in chunk.chunks_mut(PAGE_VALUES) {
                    // The zero the allocation holds already, written through black_box so that the store
                    // (the page's first touch) is not elided as redundant.
                    page[0] = std::hint::black_box(0.0);
                }
            });
    });
}

/// (R ⊗ K)(x, y) for one pixel of a sample row, R taken as 0 outside the image. K is formed at x̂ for all
/// taps first (independent across taps, so it vectorises), then summed with R in four partial sums: one
/// running sum over the 441 taps is bound by the adder's latency, and the background correction calls this
/// for 400,000 samples at 10k (docs/perf-notes.md). `taps` is scratch.
#[allow(clippy::too_many_arguments)]
fn convolved_at(
    image: &[f32],
    nx: usize,
    ny: usize,
    x: usize,
    y: usize,
    row: &SampleRow,
    xh: f64,
    taps: &mut [f64],
) -> f64 {
    for (k, ((a, b), k3)) in taps.iter_mut().zip(row.a.iter().zip(&row.b).zip(&row.k3)) {
        *k = a + xh * (b + xh * k3);
    }
    let (h, x, y) = (HALF as i64, x as i64, y as i64);
    // Kernel column w (u = H − w) meets pixel x − H + w: those inside the image.
    let (w_lo, w_hi) = ((h - x).max(0), (nx as i64 + h - x).min(SIDE as i64));
    let (v_lo, v_hi) = ((y - (ny as i64 - 1)).max(-h), y.min(h));
    let mut acc = [0.0f64; 4];
    for v in v_lo..=v_hi {
        let row = &image[(y - v) as usize * nx..][..nx];
        let pixels = &row[(x - h + w_lo) as usize..(x - h + w_hi) as usize];
        let k = &taps[(v + h) as usize * SIDE..][w_lo as usize..w_hi as usize];
        let (k4s, p4s) = (k.chunks_exact(4), pixels.chunks_exact(4));
        for (kr, pr) in k4s.remainder().iter().zip(p4s.remainder()) {
            acc[0] += kr * *pr as f64;
        }
        for (kq, pq) in k4s.zip(p4s) {
            for l in 0..4 {
                acc[l] += kq[l] * pq[l] as f64;
            }
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// The fit's diagnostics as written to `kernel.json`.
#[derive(Debug, Serialize)]
pub struct Diagnostics<'a> {
    pub schema: &'static str,
    pub backend: &'a str,
    pub precision: &'static str,
    pub direction: Direction,
    pub fwhm_reference: f64,
    pub fwhm_science: f64,
    pub tile: usize,
    pub basis_size: usize,
    pub condition_number: f64,
    pub iterations: usize,
    pub mean_chi2_per_pixel: f64,
    /// The factor the kernel was scaled by for the convolved image's noise (fit.rs, `rescale`).
    pub noise_rescale: f64,
    pub stamps_fitted: usize,
    pub stamps_clipped: usize,
    /// Kernel sum (photometric scale) on a 5 × 5 grid over the field, row by row from (0, 0).
    pub kernel_sum_grid: Vec<f64>,
    /// The background subtracted (b0 + b1 x̂ + b2 ŷ), and the part of it measured on sky samples of D
    /// after the fit.
    pub background: [f64; 3],
    pub background_correction: [f64; 3],
    /// The correction's sky samples were computed on the device.
    pub sky_samples_on_device: bool,
    pub psf: PsfSummary,
    /// Factor on the convolved image's share of VD in the matched filter's variance (correlated noise).
    pub filter_noise_correlation: f64,
    pub detections: usize,
    pub timings: &'a Timings,
    /// Kbar, tap-major: kbar[tap * 6 + m], tap = (v + 10) * 21 + (u + 10), over 1, x̂, ŷ, x̂², x̂ŷ, ŷ².
    pub kbar: &'a [f64],
    pub stamps: &'a [super::fit::Stamp],
}

impl Subtraction {
    /// The difference, its variance and mask, for photometry.
    pub fn planes(&self) -> Planes<'_> {
        Planes {
            nx: self.nx,
            ny: self.ny,
            diff: &self.diff,
            variance: &self.variance,
            mask: &self.mask,
        }
    }

    pub fn diagnostics(&self) -> Diagnostics<'_> {
        let count = |s: StampStatus| self.fit.stamps.iter().filter(|t| t.status == s).count();
        let mut grid = Vec::new();
        for j in 0..5 {
            for i in 0..5 {
                let (xh, yh) = (-1.0 + 0.5 * i as f64, -1.0 + 0.5 * j as f64);
                let h = HALF as i64;
                let mut s = 0.0;
                for v in -h..=h {
                    for u in -h..=h {
                        s += self.fit.kernel.at(u, v, xh, yh);
                    }
                }
                grid.push(s);
            }
        }
        Diagnostics {
            schema: "astroport.imgsub-kernel/1",
            backend: &self.backend,
            precision: self.precision.name(),
            direction: self.direction,
            fwhm_reference: self.fwhm.0,
            fwhm_science: self.fwhm.1,
            tile: self.tile,
            basis_size: self.fit.basis_size,
            condition_number: self.fit.condition,
            iterations: self.fit.iterations,
            mean_chi2_per_pixel: self.fit.mean_chi2_per_pixel,
            noise_rescale: self.fit.noise_rescale,
            stamps_fitted: count(StampStatus::Fitted),
            stamps_clipped: count(StampStatus::Clipped),
            kernel_sum_grid: grid,
            background: self.background,
            background_correction: self.background_correction,
            sky_samples_on_device: self.sky_on_device,
            psf: self.psf.summary(),
            filter_noise_correlation: self.correlation,
            detections: self.detections.len(),
            timings: &self.timings,
            kbar: &self.fit.kernel.kbar,
            stamps: &self.fit.stamps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{convolved_at, grow, normalised, SampleRow, VaryingKernel, HALF, SIDE, TERMS};

    /// The sample row's flipped, four-way summed convolution equals K formed tap by tap (`VaryingKernel::at`) and summed
    /// with R in one running sum, to rounding: at the corners, along the edges (taps off the image) and
    /// inside, on images narrower and wider than the kernel.
    #[test]
    fn convolved_at_matches_the_kernel_formed_tap_by_tap() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let mut uniform = move || rng.random_range(-0.5..0.5);
        let kernel =
            VaryingKernel::from_kbar((0..SIDE * SIDE * TERMS).map(|_| uniform()).collect());
        for (nx, ny) in [(57, 43), (15, 64), (9, 9)] {
            let image: Vec<f32> = (0..nx * ny).map(|_| 1000.0 * uniform() as f32).collect();
            let h = HALF as i64;
            for (x, y) in [
                (0, 0),
                (nx - 1, ny - 1),
                (nx / 2, 0),
                (0, ny / 2),
                (nx / 2, ny / 2),
                (3, ny - 2),
            ] {
                let (xh, yh) = (normalised(x as f64, nx), normalised(y as f64, ny));
                let (mut want, mut scale) = (0.0, 0.0);
                for v in -h..=h {
                    for u in -h..=h {
                        let (xx, yy) = (x as i64 - u, y as i64 - v);
                        if xx >= 0 && yy >= 0 && xx < nx as i64 && yy < ny as i64 {
                            let term = kernel.at(u, v, xh, yh)
                                * image[yy as usize * nx + xx as usize] as f64;
                            want += term;
                            scale += term.abs();
                        }
                    }
                }
                let mut taps = vec![0.0; SIDE * SIDE];
                let row = SampleRow::new(&kernel, yh);
                let got = convolved_at(&image, nx, ny, x, y, &row, xh, &mut taps);
                assert!(
                    (got - want).abs() <= 1e-13 * scale,
                    "{nx} x {ny} at ({x}, {y}): {got} against {want}"
                );
            }
        }
    }

    #[test]
    fn grown_masks_are_the_or_over_each_square() {
        let (nx, ny, half) = (37, 23, 3);
        let mut mask = vec![0u8; nx * ny];
        // Bits near edges and corners, overlapping squares, one bit set twice.
        for (x, y, bit) in [
            (0, 0, 1),
            (36, 22, 2),
            (10, 10, 4),
            (12, 11, 8),
            (12, 11, 1),
            (20, 0, 2),
        ] {
            mask[y * nx + x] |= bit;
        }
        let grown = grow(&mask, nx, ny, half);
        for y in 0..ny {
            for x in 0..nx {
                let mut want = 0u8;
                for yy in y.saturating_sub(half)..=(y + half).min(ny - 1) {
                    for xx in x.saturating_sub(half)..=(x + half).min(nx - 1) {
                        want |= mask[yy * nx + xx];
                    }
                }
                assert_eq!(grown[y * nx + x], want, "pixel ({x}, {y})");
            }
        }
    }
}
