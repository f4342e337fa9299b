//! The kernel fit (Alard & Lupton 1998, with HOTPANTS' defaults): K(x, y) = Σ_n a_n(x, y) K_n, the K_n
//! Gaussians times polynomials, each a_n a polynomial of degree 2 over the field, plus a background
//! polynomial of degree 1, fitted in float64 by least squares on sub-stamps around bright, isolated,
//! unmasked stars, with the worst stamps clipped and replaced.
//!
//! - **Basis** ([`Basis`]): for each Gaussian σ_g with degree d_g, the kernels exp(−(u² + v²)/2σ_g²) u^p v^q
//!   with p + q ≤ d_g: HOTPANTS' σ 0.7, 1.5, 3.0 px with degrees 6, 4, 2 make 28 + 15 + 6 = 49. The first is
//!   normalised to sum 1; every other has its sum removed (by subtracting the first when p and q are both
//!   even; the others sum to 0 already) and is scaled to unit norm, so a_0(x, y) alone is the kernel sum, the
//!   photometric scale.
//! - **Stamps** ([`select_stamps`]): the field is cut into regions (10 × 10 for fields of 640 px and more);
//!   in each, the local maxima of the image to convolve that stand `threshold` σ above the region's sky
//!   (20 σ, halved while fewer than a tenth of the regions have a stamp, down to 5 σ), are the brightest pixel
//!   of their own sub-stamp (isolated), and have no masked pixel in the sub-stamp of either image or in the
//!   kernel's reach of it, ranked by brightness. The first `substamps` (3) of a region that do not overlap
//!   are fitted; the others wait as replacements.
//! - **Normal equations:** each sub-stamp's basis images C_n = R ⊗ K_n (separable, so 2 × 21 taps per pixel
//!   rather than 441) and background terms give a small Gram matrix and right-hand side ([`StampSums`]),
//!   weighted by the pixels' variance (the target's, then plus the convolved image's times Σ K² once a first
//!   kernel is known); the global system multiplies them by the spatial terms at the stamp's centre and is
//!   solved by Cholesky. Its condition number (after scaling the diagonal to 1) is reported; a singular
//!   system is an error.
//! - **Clipping:** each sub-stamp's χ² per pixel comes from its sums; stamps above the median by more than
//!   `clip_sigma` (2) robust deviations are dropped and replaced by the next candidate of their region, until
//!   none is dropped.

use super::difference::{spatial_terms, VaryingKernel, HALF, SIDE, TERMS};
use super::median;
use super::stamp_sums::{BatchSums, StampBatch};
use crate::backend::cpu::CpuTarget;
use crate::backend::Target;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use serde::Serialize;

const TAPS: usize = SIDE * SIDE;
/// Background terms: 1, x̂, ŷ (degree 1).
pub const BACKGROUND_TERMS: usize = 3;

/// The pair as the fit sees it: the image to convolve (R) and the one it is matched to (I).
pub struct FitImages<'a> {
    pub nx: usize,
    pub ny: usize,
    pub conv: &'a [f32],
    pub conv_var: &'a [f32],
    pub target: &'a [f32],
    pub target_var: &'a [f32],
    /// Non-zero where a pixel cannot be used (saturated, bad, not a number).
    pub conv_bad: &'a [u8],
    pub target_bad: &'a [u8],
}

/// The fit's settings; [`FitConfig::default`] is HOTPANTS'.
#[derive(Debug, Clone, Serialize)]
pub struct FitConfig {
    /// Gaussian widths (px) and the degree of the polynomial each is multiplied by.
    pub gaussians: Vec<(f64, usize)>,
    /// Regions per axis; `None`: 10, or fewer so that a region is at least 64 px wide.
    pub regions: Option<(usize, usize)>,
    /// Sub-stamps fitted per region.
    pub substamps: usize,
    /// Sub-stamp half width (15: 31 × 31 pixels).
    pub substamp_half: usize,
    /// A stamp's peak must stand this many sky σ above the region's sky.
    pub threshold_sigma: f64,
    /// A sub-stamp whose χ² per pixel exceeds the median by this many robust deviations is replaced.
    pub clip_sigma: f64,
    /// Fewer usable sub-stamps than this is an error.
    pub min_stamps: usize,
    /// The kernel's sum (the photometric scale) is one number over the field, only its shape varies (as
    /// SFFT's ConstPhotRatio): a scale that varied would follow the stamps' noise, not the sky.
    pub constant_scale: bool,
    pub max_iterations: usize,
}

impl Default for FitConfig {
    fn default() -> Self {
        FitConfig {
            gaussians: vec![(0.7, 6), (1.5, 4), (3.0, 2)],
            regions: None,
            substamps: 3,
            substamp_half: 15,
            threshold_sigma: 20.0,
            clip_sigma: 2.0,
            min_stamps: 12,
            max_iterations: 12,
            constant_scale: true,
        }
    }
}

/// A pixel coordinate mapped to [−1, 1] over an axis of `n` pixels, as the devices do.
pub fn normalised(x: f64, n: usize) -> f64 {
    2.0 * x / (n.max(2) - 1) as f64 - 1.0
}

/// One basis kernel K_n = α_n S_n − β_n K_0, S_n the separable exp(−(u² + v²)/2σ²) u^p v^q.
#[derive(Debug, Clone)]
struct BasisKernel {
    gaussian: usize,
    p: usize,
    q: usize,
    alpha: f64,
    beta: f64,
}

/// The Alard-Lupton basis.
#[derive(Debug, Clone)]
pub struct Basis {
    sigmas: Vec<f64>,
    kernels: Vec<BasisKernel>,
    /// Each kernel's taps (tap = (v + H)·SIDE + (u + H)).
    taps: Vec<Vec<f64>>,
}

fn raw_tap(sigma: f64, p: usize, q: usize, u: i64, v: i64) -> f64 {
    let (uf, vf) = (u as f64, v as f64);
    (-(uf * uf + vf * vf) / (2.0 * sigma * sigma)).exp() * uf.powi(p as i32) * vf.powi(q as i32)
}

impl Basis {
    pub fn new(gaussians: &[(f64, usize)]) -> Basis {
        let h = HALF as i64;
        let raw = |g: usize, p: usize, q: usize| -> Vec<f64> {
            let sigma = gaussians[g].0;
            (0..TAPS)
                .map(|t| {
                    raw_tap(
                        sigma,
                        p,
                        q,
                        t as i64 % SIDE as i64 - h,
                        t as i64 / SIDE as i64 - h,
                    )
                })
                .collect()
        };
        let mut kernels = Vec::new();
        let mut taps: Vec<Vec<f64>> = Vec::new();
        for (g, &(_, degree)) in gaussians.iter().enumerate() {
            for p in 0..=degree {
                for q in 0..=degree - p {
                    let s = raw(g, p, q);
                    let sum: f64 = s.iter().sum();
                    let (alpha, beta, k) = if taps.is_empty() {
                        (
                            1.0 / sum,
                            0.0,
                            s.iter().map(|v| v / sum).collect::<Vec<_>>(),
                        )
                    } else {
                        let first = &taps[0];
                        let even = p % 2 == 0 && q % 2 == 0;
                        let (a, b) = if even { (1.0 / sum, 1.0) } else { (1.0, 0.0) };
                        let k: Vec<f64> = s.iter().zip(first).map(|(v, f)| a * v - b * f).collect();
                        let norm = k.iter().map(|v| v * v).sum::<f64>().sqrt();
                        (a / norm, b / norm, k.iter().map(|v| v / norm).collect())
                    };
                    kernels.push(BasisKernel {
                        gaussian: g,
                        p,
                        q,
                        alpha,
                        beta,
                    });
                    taps.push(k);
                }
            }
        }
        Basis {
            sigmas: gaussians.iter().map(|g| g.0).collect(),
            kernels,
            taps,
        }
    }

    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// The basis images C_n = R ⊗ K_n over the sub-stamp of half width `half` centred on (x, y), row-major,
    /// one after another. The caller makes sure the sub-stamp and the kernel's reach lie in the image.
    fn convolve(&self, image: &[f32], nx: usize, x: usize, y: usize, half: usize) -> Vec<f64> {
        let w = 2 * half + 1;
        let wh = w + 2 * HALF;
        let (x0, y0) = (x - half - HALF, y - half - HALF);
        let filter = |sigma: f64, p: usize| -> Vec<f64> {
            (-(HALF as i64)..=HALF as i64)
                .map(|u| raw_tap(sigma, p, 0, u, 0))
                .collect()
        };
        // The image window the sub-stamp's kernel reaches, in float64 once.
        let window: Vec<f64> = (0..wh)
            .flat_map(|row| {
                image[(y0 + row) * nx + x0..][..wh]
                    .iter()
                    .map(|&v| v as f64)
            })
            .collect();
        // Horizontal passes, one per (Gaussian, p): H(i, row) = Σ_u f(u) R(x − half + i − u, row).
        let mut horizontal: Vec<((usize, usize), Vec<f64>)> = Vec::new();
        for k in &self.kernels {
            if horizontal.iter().any(|(key, _)| *key == (k.gaussian, k.p)) {
                continue;
            }
            let f = filter(self.sigmas[k.gaussian], k.p);
            let mut h = vec![0.0; wh * w];
            for (row, out) in h.chunks_exact_mut(w).enumerate() {
                let line = &window[row * wh..][..wh];
                // Local column of x − half + i − u is i + HALF − u: tap j (u = j − H) reads the line from
                // 2H − j on. Taps outermost, so the pixels' loop runs over contiguous values.
                for (j, &fu) in f.iter().enumerate() {
                    for (o, &r) in out.iter_mut().zip(&line[2 * HALF - j..][..w]) {
                        *o += fu * r;
                    }
                }
            }
            horizontal.push(((k.gaussian, k.p), h));
        }
        let pixels = w * w;
        let mut out = vec![0.0; self.len() * pixels];
        for (n, k) in self.kernels.iter().enumerate() {
            let h = &horizontal
                .iter()
                .find(|(key, _)| *key == (k.gaussian, k.p))
                .expect("every (Gaussian, p) has its pass")
                .1;
            let f = filter(self.sigmas[k.gaussian], k.q);
            let c = &mut out[n * pixels..][..pixels];
            for (j, row) in c.chunks_exact_mut(w).enumerate() {
                // As above, down the columns: tap jv reads the horizontal pass's row j + 2H − jv.
                for (jv, &fv) in f.iter().enumerate() {
                    let fa = k.alpha * fv;
                    for (o, &v) in row.iter_mut().zip(&h[(j + 2 * HALF - jv) * w..][..w]) {
                        *o += fa * v;
                    }
                }
            }
        }
        // K_n = α_n S_n − β_n K_0: subtract β_n C_0 (C_0 is final already: β_0 = 0).
        let (first, rest) = out.split_at_mut(pixels);
        for (n, k) in self.kernels.iter().enumerate().skip(1) {
            if k.beta != 0.0 {
                for (c, c0) in rest[(n - 1) * pixels..][..pixels].iter_mut().zip(&*first) {
                    *c -= k.beta * c0;
                }
            }
        }
        out
    }
}

/// A candidate sub-stamp and what the fit made of it.
#[derive(Debug, Clone, Serialize)]
pub struct Stamp {
    pub x: usize,
    pub y: usize,
    /// Region (column, row).
    pub region: (usize, usize),
    /// Peak above the region's sky in the convolved image, in its sky σ.
    pub peak_sigma: f64,
    pub status: StampStatus,
    /// χ² per pixel under the final kernel (fitted stamps and clipped ones).
    pub chi2_per_pixel: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StampStatus {
    Fitted,
    Clipped,
    Spare,
}

/// About this many pixels of a region at most are sampled for its sky level and σ: the level's standard error
/// is then 0.005 σ and σ's about 0.5 %, fine for thresholds that halve from 20 σ to 5 σ. At 10k the stamps'
/// 100 regions of a megapixel each sampled every other pixel and took two medians of 262,144 values.
const SKY_SAMPLES: usize = 1 << 16;

/// Sky level and σ of a region (median and 1.4826 × median absolute deviation of its unmasked pixels,
/// sampled every other pixel, or more sparsely so that at most [`SKY_SAMPLES`] are).
pub(crate) fn sky_stats(
    image: &[f32],
    bad: &[u8],
    nx: usize,
    xs: (usize, usize),
    ys: (usize, usize),
) -> (f64, f64) {
    let (w, h) = (xs.1 - xs.0, ys.1 - ys.0);
    let step = ((w * h).div_ceil(SKY_SAMPLES) as f64)
        .sqrt()
        .ceil()
        .max(2.0) as usize;
    let mut v: Vec<f32> = Vec::with_capacity(w.div_ceil(step) * h.div_ceil(step));
    for y in (ys.0..ys.1).step_by(step) {
        for x in (xs.0..xs.1).step_by(step) {
            let at = y * nx + x;
            if bad[at] == 0 && image[at].is_finite() {
                v.push(image[at]);
            }
        }
    }
    if v.is_empty() {
        return (0.0, f64::INFINITY);
    }
    let m = median(&mut v);
    let mut dev: Vec<f32> = v.iter().map(|&x| (x as f64 - m).abs() as f32).collect();
    (m, 1.4826 * median(&mut dev).max(1e-12))
}

/// The regions per axis for a field of `n` pixels: 10, fewer so a region is at least 64 px.
fn regions_along(n: usize) -> usize {
    (n / 64).clamp(1, 10)
}

/// Why no fit could be made.
#[derive(Debug, Clone, PartialEq)]
pub enum FitError {
    TooFewStamps {
        found: usize,
        need: usize,
        empty_regions: Vec<String>,
        masked_fraction: f64,
    },
    Singular {
        condition: f64,
        stamps: usize,
    },
    /// The backend that sums the stamps failed.
    Backend(String),
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitError::TooFewStamps {
                found,
                need,
                empty_regions,
                masked_fraction,
            } => {
                write!(
                    f,
                    "kernel fit: found {found} usable stamps, need at least {need}"
                )?;
                if !empty_regions.is_empty() {
                    let shown: Vec<&str> = empty_regions.iter().take(6).map(|s| s.as_str()).collect();
                    write!(
                        f,
                        "; {} of the regions have none ({}{})",
                        empty_regions.len(),
                        shown.join("; "),
                        if empty_regions.len() > shown.len() { "; …" } else { "" }
                    )?;
                }
                if *masked_fraction > 0.2 {
                    write!(
                        f,
                        "; {:.0} % of the pixels are masked (saturated, bad or not a number)",
                        masked_fraction * 100.0
                    )?;
                }
                Ok(())
            }
            FitError::Singular { condition, stamps } => write!(
                f,
                "kernel fit: the least-squares system of {stamps} stamps is singular (condition number \
                 {condition:.2e}): the stamps do not constrain the kernel's spatial variation"
            ),
            FitError::Backend(e) => write!(f, "kernel fit: stamp sums: {e}"),
        }
    }
}

/// Candidate sub-stamps per region, brightest first: every one usable.
pub fn select_stamps(img: &FitImages, cfg: &FitConfig) -> Result<Vec<Vec<Stamp>>, FitError> {
    let (rx, ry) = cfg
        .regions
        .unwrap_or((regions_along(img.nx), regions_along(img.ny)));
    let half = cfg.substamp_half;
    let bounds = |r: usize, count: usize, n: usize| (r * n / count, (r + 1) * n / count);
    let regions: Vec<(usize, usize)> = (0..ry).flat_map(|j| (0..rx).map(move |i| (i, j))).collect();
    let stats: Vec<(f64, f64)> = regions
        .par_iter()
        .map(|&(i, j)| {
            sky_stats(
                img.conv,
                img.conv_bad,
                img.nx,
                bounds(i, rx, img.nx),
                bounds(j, ry, img.ny),
            )
        })
        .collect();
    // The brightest local maxima that could be stamps, per region, at the lowest threshold tried (5 σ):
    // as many as a region keeps.
    let lowest = cfg.threshold_sigma.min(5.0);
    let keep = 8 * cfg.substamps.max(1);
    let candidates: Vec<Vec<Stamp>> = regions
        .par_iter()
        .zip(&stats)
        .map(|(&(i, j), &sky)| {
            let area = (bounds(i, rx, img.nx), bounds(j, ry, img.ny));
            region_stamps(img, area, sky, lowest, half, keep)
                .into_iter()
                .map(|(x, y, level)| Stamp {
                    x,
                    y,
                    region: (i, j),
                    peak_sigma: level,
                    status: StampStatus::Spare,
                    chi2_per_pixel: None,
                })
                .collect()
        })
        .collect();
    // The threshold: 20 σ, halved while fewer than a tenth of the regions have a stamp (HOTPANTS' -sft).
    let mut threshold = cfg.threshold_sigma;
    loop {
        let filled = candidates
            .iter()
            .filter(|c| c.first().is_some_and(|s| s.peak_sigma >= threshold))
            .count();
        if filled * 10 >= regions.len() || threshold <= lowest {
            break;
        }
        threshold = (threshold * 0.5).max(lowest);
    }
    let kept: Vec<Vec<Stamp>> = candidates
        .into_iter()
        .map(|c| {
            let mut c: Vec<Stamp> = c
                .into_iter()
                .filter(|s| s.peak_sigma >= threshold)
                .collect();
            // The first `substamps` that do not overlap one another are fitted.
            let mut fitted: Vec<(usize, usize)> = Vec::new();
            for s in c.iter_mut() {
                let apart = fitted
                    .iter()
                    .all(|&(x, y)| x.abs_diff(s.x) > 2 * half || y.abs_diff(s.y) > 2 * half);
                if apart && fitted.len() < cfg.substamps {
                    s.status = StampStatus::Fitted;
                    fitted.push((s.x, s.y));
                }
            }
            c
        })
        .collect();
    let found = kept
        .iter()
        .flatten()
        .filter(|s| s.status == StampStatus::Fitted)
        .count();
    if found < cfg.min_stamps {
        let empty_regions = regions
            .iter()
            .zip(&kept)
            .filter(|(_, c)| c.is_empty())
            .map(|(&(i, j), _)| {
                let (xa, xb) = bounds(i, rx, img.nx);
                let (ya, yb) = bounds(j, ry, img.ny);
                format!("x {xa}..{xb}, y {ya}..{yb}")
            })
            .collect();
        let masked = img
            .conv_bad
            .iter()
            .zip(img.target_bad)
            .filter(|(a, b)| **a != 0 || **b != 0)
            .count();
        return Err(FitError::TooFewStamps {
            found,
            need: cfg.min_stamps,
            empty_regions,
            masked_fraction: masked as f64 / img.conv_bad.len().max(1) as f64,
        });
    }
    Ok(kept)
}

/// The `keep` brightest candidate stamps of the region `xs` × `ys` whose sky level and σ are `sky`: pixels
/// at least `lowest` σ over the sky that are the maximum of their sub-stamp (half width `half`), with no
/// masked pixel within the kernel's reach of it in the convolved image nor in the sub-stamp of the target;
/// as (x, y, level in σ), brightest first, ties in row order.
fn region_stamps(
    img: &FitImages,
    (xs, ys): ((usize, usize), (usize, usize)),
    (sky, sigma): (f64, f64),
    lowest: f64,
    half: usize,
    keep: usize,
) -> Vec<(usize, usize, f64)> {
    let reach = half + HALF;
    // Pixels over the threshold that top their 8 neighbours, brightest first (a stable sort). The
    // sub-stamp's own tests (a 31 × 31 maximum, the convolved image's mask over 51 × 51 and the target's
    // over 31 × 31) then run down that list until `keep` pass: at 10k a region holds ~2,000 stars, and
    // testing every one took most of the stamps' choice.
    let mut tops = Vec::new();
    for y in ys.0.max(reach)..ys.1.min(img.ny.saturating_sub(reach)) {
        for x in xs.0.max(reach)..xs.1.min(img.nx.saturating_sub(reach)) {
            let v = img.conv[y * img.nx + x];
            let level = (v as f64 - sky) / sigma;
            if level.is_nan() || level < lowest || !tops_neighbours(img.conv, img.nx, x, y, half, v)
            {
                continue;
            }
            tops.push((x, y, level));
        }
    }
    tops.sort_by(|a, b| b.2.total_cmp(&a.2));
    tops.into_iter()
        .filter(|&(x, y, _)| {
            is_brightest(img.conv, img.nx, x, y, half, img.conv[y * img.nx + x])
                && !any_bad(img.conv_bad, img.nx, x, y, reach)
                && !any_bad(img.target_bad, img.nx, x, y, half)
        })
        .take(keep)
        .collect()
}

/// Whether `w` at (xx, yy) beats `v` at (x, y) to be a sub-stamp's maximum: larger, or equal and first in
/// row order.
fn beats(w: f32, (xx, yy): (usize, usize), v: f32, (x, y): (usize, usize)) -> bool {
    w > v || (w == v && (yy, xx) < (y, x))
}

/// Whether (x, y), holding `v`, beats its 8 neighbours (those within the sub-stamp of half width `half`):
/// most pixels above the threshold lie on a star's slope and fail here.
fn tops_neighbours(image: &[f32], nx: usize, x: usize, y: usize, half: usize, v: f32) -> bool {
    let near = half.min(1);
    (y - near..=y + near).all(|yy| {
        (x - near..=x + near)
            .all(|xx| (xx, yy) == (x, y) || !beats(image[yy * nx + xx], (xx, yy), v, (x, y)))
    })
}

/// Whether (x, y) holds the largest value of its sub-stamp (ties go to the first in row order). Its 8
/// neighbours are in the window, but callers test them first ([`tops_neighbours`]): most candidates fail
/// there.
fn is_brightest(image: &[f32], nx: usize, x: usize, y: usize, half: usize, v: f32) -> bool {
    for yy in y - half..=y + half {
        let line = &image[yy * nx + x - half..][..2 * half + 1];
        for (i, &w) in line.iter().enumerate() {
            if beats(w, (x - half + i, yy), v, (x, y)) {
                return false;
            }
        }
    }
    true
}

fn any_bad(bad: &[u8], nx: usize, x: usize, y: usize, half: usize) -> bool {
    (y - half..=y + half).any(|yy| {
        bad[yy * nx + x - half..][..2 * half + 1]
            .iter()
            .any(|&b| b != 0)
    })
}

/// One sub-stamp's share of the normal equations, over its basis images and background terms.
#[derive(Debug, Clone)]
struct StampSums {
    /// (nbasis + 3)² Gram matrix, row-major.
    gram: Vec<f64>,
    /// S(u) = Σ_p w_p VR(p − u) for every tap u: the convolved image's noise term (see [`rescale`]).
    lag: Vec<f64>,
    rhs: Vec<f64>,
    /// Σ w I².
    target2: f64,
    pixels: usize,
}

/// The fitted kernel and background with the fit's diagnostics.
#[derive(Debug, Clone)]
pub struct KernelFit {
    pub kernel: VaryingKernel,
    /// Background b0 + b1 x̂ + b2 ŷ, in the target image's units.
    pub background: [f64; BACKGROUND_TERMS],
    /// Every candidate, by region.
    pub stamps: Vec<Stamp>,
    /// Condition number of the normal matrix with its diagonal scaled to 1.
    pub condition: f64,
    pub iterations: usize,
    /// Mean χ² per pixel over the fitted stamps.
    pub mean_chi2_per_pixel: f64,
    pub basis_size: usize,
    /// The factor the kernel was scaled by for the convolved image's noise ([`rescale`]).
    pub noise_rescale: f64,
    /// Where the stamp sums ran, how many stamp sums were made, and their time (device events, or the host
    /// clock on `cpu`), summed over the iterations.
    pub sums_backend: String,
    pub stamp_sums: usize,
    pub sums_seconds: f64,
    /// Wall clock of the stamps' basis images (host), of their sums with the batches' packing and
    /// transfers, and of the backend's jobs alone (transfers, launches, a first kernel's load), summed over
    /// the iterations.
    pub basis_images_seconds: f64,
    pub sums_wall_seconds: f64,
    pub sums_job_seconds: f64,
}

/// Fits the kernel, background and stamps of `img` (module docs).
pub fn fit(img: &FitImages, cfg: &FitConfig) -> Result<KernelFit, FitError> {
    let host = Target::Cpu(CpuTarget::new());
    fit_stamps(img, cfg, select_stamps(img, cfg)?, &host, None, || {})
}

/// [`fit`] on stamps already selected (by [`select_stamps`] on the same images and settings), with the
/// stamp sums on `target` (in groups that fit `mem_cap` bytes, when given). `sums_done` is called each time
/// stamp sums are back and unpacked: the device is then free for other work until the fit's next job, which comes after
/// the host has formed and solved the normal equations (3-15 ms at 10k).
pub fn fit_stamps(
    img: &FitImages,
    cfg: &FitConfig,
    mut regions: Vec<Vec<Stamp>>,
    target: &Target,
    mem_cap: Option<u64>,
    mut sums_done: impl FnMut(),
) -> Result<KernelFit, FitError> {
    let basis = Basis::new(&cfg.gaussians);
    let nb = basis.len();
    let cols = nb + BACKGROUND_TERMS;
    let unknowns = nb * TERMS + BACKGROUND_TERMS;
    let half = cfg.substamp_half;
    // Basis images of a stamp, kept while it may be fitted (weights change, the images do not).
    let mut images: std::collections::HashMap<(usize, usize), std::sync::Arc<Vec<f64>>> =
        std::collections::HashMap::new();
    let mut sum_k2 = 0.0; // Σ K² at the field's centre: 0 until a first kernel exists.
                          // A stamp's sums depend on its pixels and sum_k2 alone, which is set once: kept until it changes.
    let mut summed: std::collections::HashMap<(usize, usize), std::sync::Arc<StampSums>> =
        std::collections::HashMap::new();
    let (mut stamp_sums_made, mut sums_seconds) = (0, 0.0);
    let (mut basis_images_seconds, mut sums_wall_seconds, mut sums_job_seconds) = (0.0, 0.0, 0.0);
    let mut last_batch: Option<(Vec<(usize, usize)>, StampBatch)> = None;
    let mut iterations = 0;
    let mut conditions = Conditions::default();
    loop {
        iterations += 1;
        crate::exec::trace_event(|| format!("fit: iteration {iterations} begins"));
        let fitted: Vec<(usize, usize)> = regions
            .iter()
            .enumerate()
            .flat_map(|(r, c)| {
                c.iter()
                    .enumerate()
                    .filter(|(_, s)| s.status == StampStatus::Fitted)
                    .map(move |(k, _)| (r, k))
            })
            .collect();
        if fitted.len() < cfg.min_stamps {
            conditions.finish()?;
            return Err(FitError::TooFewStamps {
                found: fitted.len(),
                need: cfg.min_stamps,
                empty_regions: Vec::new(),
                masked_fraction: 0.0,
            });
        }
        let missing: Vec<(usize, usize)> = fitted
            .iter()
            .map(|&(r, k)| (regions[r][k].x, regions[r][k].y))
            .filter(|p| !images.contains_key(p))
            .collect();
        let basis_start = std::time::Instant::now();
        let made: Vec<((usize, usize), Vec<f64>)> = missing
            .par_iter()
            .map(|&(x, y)| ((x, y), basis.convolve(img.conv, img.nx, x, y, half)))
            .collect();
        for (p, c) in made {
            images.insert(p, std::sync::Arc::new(c));
        }
        basis_images_seconds += basis_start.elapsed().as_secs_f64();
        crate::exec::trace_event(|| format!("fit: basis images of {} stamps made", missing.len()));
        let places_xy: Vec<(usize, usize)> = fitted
            .iter()
            .map(|&(r, k)| (regions[r][k].x, regions[r][k].y))
            .collect();
        let unsummed: Vec<(usize, usize)> = places_xy
            .iter()
            .copied()
            .filter(|p| !summed.contains_key(p))
            .collect();
        if !unsummed.is_empty() {
            let sums_start = std::time::Instant::now();
            // Once Σ K² is known every stamp is summed again with new weights and the same columns.
            let batch = match last_batch.take() {
                Some((places, mut batch)) if places == unsummed => {
                    batch.weight = stamp_weights(img, &unsummed, half, sum_k2);
                    batch
                }
                _ => stamp_batch(img, &images, &unsummed, nb, half, sum_k2),
            };
            let job_start = std::time::Instant::now();
            let (batch_sums, seconds) =
                batch.sums_on(target, mem_cap).map_err(FitError::Backend)?;
            crate::exec::trace_event(|| "fit: stamp sums back".into());
            sums_job_seconds += job_start.elapsed().as_secs_f64();
            sums_seconds += seconds;
            stamp_sums_made += unsummed.len();
            let unpacked: Vec<StampSums> = (0..unsummed.len())
                .into_par_iter()
                .map(|i| unpack(&batch, &batch_sums, i, nb))
                .collect();
            for (p, stamp) in unsummed.iter().zip(unpacked) {
                summed.insert(*p, std::sync::Arc::new(stamp));
            }
            // After the unpacking (1 ms), whose fresh pages faulted slowly beside work this signal starts.
            sums_done();
            sums_wall_seconds += sums_start.elapsed().as_secs_f64();
            last_batch = Some((unsummed.clone(), batch));
        }
        let sums: Vec<std::sync::Arc<StampSums>> =
            places_xy.iter().map(|p| summed[p].clone()).collect();
        crate::exec::trace_event(|| "fit: stamp sums unpacked".into());
        // The global normal equations.
        let places: Vec<[f64; TERMS]> = fitted
            .iter()
            .map(|&(r, k)| {
                let s = &regions[r][k];
                spatial_terms(
                    normalised(s.x as f64, img.nx),
                    normalised(s.y as f64, img.ny),
                )
            })
            .collect();
        let (mut a, mut b) = normal_equations(&sums, &places, nb);
        crate::exec::trace_event(|| "fit: normal equations formed".into());
        if cfg.constant_scale {
            // The kernel sum is a_0 alone: hold it constant by fixing a_0's spatial terms at 0.
            for m in 1..TERMS {
                for k in 0..unknowns {
                    a[(m, k)] = 0.0;
                    a[(k, m)] = 0.0;
                }
                a[(m, m)] = 1.0;
                b[m] = 0.0;
            }
        }
        // The condition number (a symmetric eigenvalue problem of the ~300 unknowns, ~4 ms on one core) is
        // found on a thread of its own while the fit goes on; the fit returns nothing before it has seen
        // every iteration's, and fails with the first one over the limit.
        conditions.start(&a, fitted.len());
        let Some(x) = a.clone().cholesky().map(|c| c.solve(&b)) else {
            return Err(FitError::Singular {
                condition: conditions.finish()?,
                stamps: fitted.len(),
            });
        };
        // Each fitted stamp's χ² per pixel from its sums: t2 − 2 c·r + cᵀ G c with c its local coefficients.
        let local = |p: &[f64; TERMS]| -> Vec<f64> {
            let mut c = vec![0.0; cols];
            for (n, cn) in c.iter_mut().enumerate().take(nb) {
                *cn = (0..TERMS).map(|m| x[n * TERMS + m] * p[m]).sum();
            }
            for k in 0..BACKGROUND_TERMS {
                c[nb + k] = x[nb * TERMS + k];
            }
            c
        };
        let chi2: Vec<f64> = sums
            .iter()
            .zip(&places)
            .map(|(s, p)| {
                let c = local(p);
                let mut q = s.target2;
                for i in 0..cols {
                    q -= 2.0 * c[i] * s.rhs[i];
                    for j in 0..cols {
                        q += c[i] * s.gram[i * cols + j] * c[j];
                    }
                }
                q.max(0.0) / s.pixels as f64
            })
            .collect();
        for (&(r, k), &c) in fitted.iter().zip(&chi2) {
            regions[r][k].chi2_per_pixel = Some(c);
        }
        crate::exec::trace_event(|| "fit: solved, each stamp's χ² found".into());
        let kernel = kernel_of(&basis, x.as_slice());
        let background = [x[nb * TERMS], x[nb * TERMS + 1], x[nb * TERMS + 2]];
        // The first solve weighted by the target's variance alone: weight again with the convolved image's.
        let new_k2 = kernel_sum_squares(&kernel, 0.0, 0.0);
        if sum_k2 == 0.0 {
            sum_k2 = new_k2.max(f64::MIN_POSITIVE);
            summed.clear();
            continue;
        }
        let mut sorted = chi2.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        let mut deviations: Vec<f64> = sorted.iter().map(|c| (c - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let spread = 1.4826 * deviations[deviations.len() / 2];
        let limit = median + cfg.clip_sigma * spread;
        let mut clipped = 0;
        if iterations < cfg.max_iterations {
            for (&(r, k), &c) in fitted.iter().zip(&chi2) {
                if c > limit {
                    regions[r][k].status = StampStatus::Clipped;
                    clipped += 1;
                    promote_spare(&mut regions[r], half);
                }
            }
        }
        if clipped == 0 {
            let condition = conditions.finish()?;
            let (kernel, background, scale) = rescale(&kernel, x.as_slice(), &sums, &places, nb)
                .unwrap_or((kernel, background, 1.0));
            return Ok(KernelFit {
                kernel,
                background,
                noise_rescale: scale,
                stamps: regions.into_iter().flatten().collect(),
                condition,
                iterations,
                mean_chi2_per_pixel: chi2.iter().sum::<f64>() / chi2.len() as f64,
                basis_size: nb,
                sums_backend: target.id(),
                stamp_sums: stamp_sums_made,
                sums_seconds,
                basis_images_seconds,
                sums_wall_seconds,
                sums_job_seconds,
            });
        }
    }
}

/// Columns of t_α t_β per matrix product in [`normal_equations`] (28 pairs: 7 products).
const PAIRS_PER_PRODUCT: usize = 4;

/// The global normal equations from the stamps' sums: each stamp's Gram matrix G (basis and background
/// columns) spread over the spatial terms p of its place, A[(i, μ), (j, ν)] += p_μ p_ν G_ij and b[(i, μ)] +=
/// p_μ r_i (a basis column carries the six terms, a background column one). With t = (p, 1), every block
/// Σ_s t_α t_β G_s is one column of a matrix product, [G_1 … G_S] · [t_α t_β]_s, formed by nalgebra's GEMM,
/// then scattered into A.
fn normal_equations(
    sums: &[std::sync::Arc<StampSums>],
    places: &[[f64; TERMS]],
    nb: usize,
) -> (DMatrix<f64>, DVector<f64>) {
    let cols = nb + BACKGROUND_TERMS;
    let unknowns = nb * TERMS + BACKGROUND_TERMS;
    // A column's terms: the six spatial ones for a basis column, the constant (term TERMS of t) for a
    // background column; and where (column, term) sits among the unknowns.
    let terms = |c: usize| if c < nb { 0..TERMS } else { TERMS..TERMS + 1 };
    let index = |c: usize, m: usize| {
        if c < nb {
            c * TERMS + m
        } else {
            nb * TERMS + (c - nb)
        }
    };
    const T: usize = TERMS + 1;
    let t = |s: usize, m: usize| if m < TERMS { places[s][m] } else { 1.0 };
    let stamps = sums.len();
    // G is symmetric, and so is A: the products take G's upper triangle (i ≤ j) alone, half the work.
    let upper = |i: usize, j: usize| i * cols - i * (i + 1) / 2 + j;
    // Each stamp's column: its rows' upper parts, each a contiguous slice of G.
    let triangle = cols * (cols + 1) / 2;
    let mut gathered = Vec::with_capacity(triangle * stamps);
    for s in sums {
        for i in 0..cols {
            gathered.extend_from_slice(&s.gram[i * cols + i..(i + 1) * cols]);
        }
    }
    let grams = DMatrix::from_vec(triangle, stamps, gathered);
    let rhs = DMatrix::from_iterator(
        cols,
        stamps,
        sums.iter().flat_map(|s| s.rhs.iter().copied()),
    );
    // t_α t_β is symmetric: one column per pair α ≤ β, in fixed groups of columns, each group's product
    // on a thread of its own (the same sums in the same order on any thread count).
    let pair_list: Vec<(usize, usize)> = (0..T)
        .flat_map(|alpha| (alpha..T).map(move |beta| (alpha, beta)))
        .collect();
    let column = |mu: usize, nu: usize| {
        let (lo, hi) = (mu.min(nu), mu.max(nu));
        lo * T - lo * (lo + 1) / 2 + hi
    };
    let groups: Vec<DMatrix<f64>> = pair_list
        .par_chunks(PAIRS_PER_PRODUCT)
        .map(|group| {
            let pairs = DMatrix::from_fn(stamps, group.len(), |s, q| {
                t(s, group[q].0) * t(s, group[q].1)
            });
            &grams * pairs
        })
        .collect();
    let block = |i: usize, j: usize, mu: usize, nu: usize| {
        let q = column(mu, nu);
        groups[q / PAIRS_PER_PRODUCT][(upper(i.min(j), i.max(j)), q % PAIRS_PER_PRODUCT)]
    };
    let singles = DMatrix::from_fn(stamps, T, t);
    let rhs_terms = rhs * singles;
    let mut a = DMatrix::zeros(unknowns, unknowns);
    let mut b = DVector::zeros(unknowns);
    for i in 0..cols {
        for mu in terms(i) {
            b[index(i, mu)] = rhs_terms[(i, mu)];
            for j in 0..cols {
                for nu in terms(j) {
                    a[(index(i, mu), index(j, nu))] = block(i, j, mu, nu);
                }
            }
        }
    }
    (a, b)
}

/// The convolved image is noisy, so the stamps' Σ w C_n C_m hold, besides the signal, the expectation of
/// its noise, Σ_p w_p Σ_u K_n(u) K_m(u) VR(p − u), which pulls the fitted kernel towards 0 (regression
/// dilution: the kernel sum came out 0.5-1.3 % low on the generated fields; HOTPANTS' was 1 % low on the
/// anchor field). Taking it out of the whole system leaves it indefinite (the high-order basis images are
/// mostly noise), so it is taken out of a smaller one: the fitted kernel's scale β and the background,
/// fitted again with the kernel's shape held, T ≈ β (R ⊗ K_s) + B, where R ⊗ K_s is a strong signal.
/// Returns the kernel times β, the new background and β; `None` when that system is not positive.
fn rescale(
    kernel: &VaryingKernel,
    x: &[f64],
    sums: &[std::sync::Arc<StampSums>],
    places: &[[f64; TERMS]],
    nb: usize,
) -> Option<(VaryingKernel, [f64; BACKGROUND_TERMS], f64)> {
    let cols = nb + BACKGROUND_TERMS;
    let n = 1 + BACKGROUND_TERMS;
    let h = HALF as i64;
    let mut a = DMatrix::<f64>::zeros(n, n);
    let mut b = DVector::<f64>::zeros(n);
    for (s, p) in sums.iter().zip(places) {
        // The stamp's kernel in the basis, c_n = Σ_m x[n, m] p_m: R ⊗ K_s = Σ_n c_n C_n.
        let c: Vec<f64> = (0..nb)
            .map(|k| (0..TERMS).map(|m| x[k * TERMS + m] * p[m]).sum())
            .collect();
        let (xh, yh) = (p[1], p[2]);
        let mut noise = 0.0;
        for v in -h..=h {
            for u in -h..=h {
                let t = ((v + h) * SIDE as i64 + u + h) as usize;
                noise += kernel.at(u, v, xh, yh).powi(2) * s.lag[t];
            }
        }
        let mut zz = 0.0;
        for i in 0..nb {
            for j in 0..nb {
                zz += c[i] * s.gram[i * cols + j] * c[j];
            }
        }
        a[(0, 0)] += zz - noise;
        b[0] += (0..nb).map(|i| c[i] * s.rhs[i]).sum::<f64>();
        for k in 0..BACKGROUND_TERMS {
            let zb: f64 = (0..nb).map(|i| c[i] * s.gram[i * cols + nb + k]).sum();
            a[(0, 1 + k)] += zb;
            a[(1 + k, 0)] += zb;
            b[1 + k] += s.rhs[nb + k];
            for l in 0..BACKGROUND_TERMS {
                a[(1 + k, 1 + l)] += s.gram[(nb + k) * cols + nb + l];
            }
        }
    }
    let solved = a.cholesky()?.solve(&b);
    let scale = solved[0];
    if !(scale > 0.5 && scale < 2.0) {
        return None;
    }
    let mut scaled = VaryingKernel::from_kbar(kernel.kbar.iter().map(|k| k * scale).collect());
    scaled.background = kernel.background;
    Some((scaled, [solved[1], solved[2], solved[3]], scale))
}

/// After a stamp of a region is clipped, the next spare that overlaps no fitted stamp is fitted.
fn promote_spare(region: &mut [Stamp], half: usize) {
    let fitted: Vec<(usize, usize)> = region
        .iter()
        .filter(|s| s.status == StampStatus::Fitted)
        .map(|s| (s.x, s.y))
        .collect();
    if let Some(s) = region.iter_mut().find(|s| {
        s.status == StampStatus::Spare
            && fitted
                .iter()
                .all(|&(x, y)| x.abs_diff(s.x) > 2 * half || y.abs_diff(s.y) > 2 * half)
    }) {
        s.status = StampStatus::Fitted;
    }
}

/// The stamps at `places` as a batch for the backends: per stamp, its basis images, the background terms
/// 1, x̂, ŷ and the target as columns, each pixel weighted by 1 / (VI + Σ K² VR), and the convolved image's
/// variance around it. Written in place, stamp by stamp on all threads: per-stamp buffers gathered afterwards
/// cost more in page faults than the packing itself on a virtual machine.
fn stamp_batch(
    img: &FitImages,
    images: &std::collections::HashMap<(usize, usize), std::sync::Arc<Vec<f64>>>,
    places: &[(usize, usize)],
    nb: usize,
    half: usize,
    sum_k2: f64,
) -> StampBatch {
    let side = 2 * half + 1;
    let pixels = side * side;
    let span = side + 2 * HALF;
    let columns = nb + BACKGROUND_TERMS + 1;
    let mut batch = StampBatch {
        stamps: places.len(),
        columns,
        side,
        data: vec![0.0; places.len() * columns * pixels],
        weight: Vec::new(),
        window: vec![0.0; places.len() * span * span],
    };
    batch
        .data
        .par_chunks_mut(columns * pixels)
        .zip(batch.window.par_chunks_mut(span * span))
        .zip(places)
        .for_each(|((data, window), &(x, y))| {
            let (basis, rest) = data.split_at_mut(nb * pixels);
            basis.copy_from_slice(&images[&(x, y)][..nb * pixels]);
            let (x0, y0) = (x - half, y - half);
            let mut columns = rest.chunks_exact_mut(pixels);
            let mut next = || columns.next().expect("four columns after the basis");
            next().fill(1.0);
            let (xs, ys, target) = (next(), next(), next());
            for j in 0..side {
                let row = (y0 + j) * img.nx + x0;
                for i in 0..side {
                    let p = j * side + i;
                    xs[p] = normalised((x0 + i) as f64, img.nx);
                    ys[p] = normalised((y0 + j) as f64, img.ny);
                    target[p] = img.target[row + i] as f64;
                }
            }
            let (wx, wy) = (x0 - HALF, y0 - HALF);
            for (q, row) in window.chunks_exact_mut(span).enumerate() {
                let line = &img.conv_var[(wy + q) * img.nx + wx..][..span];
                row.iter_mut().zip(line).for_each(|(w, &v)| *w = v as f64);
            }
        });
    batch.weight = stamp_weights(img, places, half, sum_k2);
    batch
}

/// Per pixel of the stamps at `places`, 1 / (VI + Σ K² VR): the only part of a batch that changes when
/// Σ K² does.
fn stamp_weights(img: &FitImages, places: &[(usize, usize)], half: usize, sum_k2: f64) -> Vec<f64> {
    let side = 2 * half + 1;
    let mut weight = vec![0.0; places.len() * side * side];
    weight
        .par_chunks_mut(side * side)
        .zip(places)
        .for_each(|(w, &(x, y))| {
            let (x0, y0) = (x - half, y - half);
            for (j, out) in w.chunks_exact_mut(side).enumerate() {
                let at = (y0 + j) * img.nx + x0;
                for (i, o) in out.iter_mut().enumerate() {
                    let var = img.target_var[at + i] as f64 + sum_k2 * img.conv_var[at + i] as f64;
                    *o = 1.0 / var.max(1e-30);
                }
            }
        });
    weight
}

/// Stamp `i`'s share of the normal equations from its batch sums: the Gram matrix of the basis and
/// background columns, the right-hand side (their products with the target, the last column) and Σ w I².
fn unpack(batch: &StampBatch, sums: &BatchSums, i: usize, nb: usize) -> StampSums {
    let m = batch.columns;
    let cols = nb + BACKGROUND_TERMS;
    let g = &sums.gram[i * m * m..][..m * m];
    StampSums {
        gram: (0..cols * cols)
            .map(|e| g[(e / cols) * m + e % cols])
            .collect(),
        lag: sums.lag[i * TAPS..][..TAPS].to_vec(),
        rhs: (0..cols).map(|a| g[a * m + cols]).collect(),
        target2: g[cols * m + cols],
        pixels: batch.pixels(),
    }
}

/// Largest condition number of the scaled normal equations that the fit accepts.
const CONDITION_LIMIT: f64 = 1e15;

/// Each iteration's condition number ([`scaled_condition`]), found on a thread of its own, with the
/// iteration's stamp count.
#[derive(Default)]
struct Conditions(Vec<(std::thread::JoinHandle<f64>, usize)>);

impl Conditions {
    fn start(&mut self, a: &DMatrix<f64>, stamps: usize) {
        let a = a.clone();
        self.0
            .push((std::thread::spawn(move || scaled_condition(&a)), stamps));
    }

    /// Waits for every iteration's, in order: the first over the limit as the fit's error, else the last
    /// one's (NaN before any).
    fn finish(&mut self) -> Result<f64, FitError> {
        let mut last = f64::NAN;
        for (job, stamps) in self.0.drain(..) {
            last = job.join().expect("the condition number's thread panicked");
            if !(last.is_finite() && last < CONDITION_LIMIT) {
                return Err(FitError::Singular {
                    condition: last,
                    stamps,
                });
            }
        }
        Ok(last)
    }
}

/// The condition number of `a` with its diagonal scaled to 1 (∞ when a diagonal term is not positive).
fn scaled_condition(a: &DMatrix<f64>) -> f64 {
    let n = a.nrows();
    let d: Vec<f64> = (0..n).map(|i| a[(i, i)]).collect();
    if d.iter().any(|&v| v.is_nan() || v <= 0.0) {
        return f64::INFINITY;
    }
    let scaled = DMatrix::from_fn(n, n, |i, j| a[(i, j)] / (d[i] * d[j]).sqrt());
    let eigen = scaled.symmetric_eigenvalues();
    let (lo, hi) = eigen.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    if lo > 0.0 {
        hi / lo
    } else {
        f64::INFINITY
    }
}

/// The fitted coefficients as the devices' kernel: Kbar_m(tap) = Σ_n x[n, m] K_n(tap).
fn kernel_of(basis: &Basis, x: &[f64]) -> VaryingKernel {
    let mut kbar = vec![0.0; TAPS * TERMS];
    for (n, taps) in basis.taps.iter().enumerate() {
        for m in 0..TERMS {
            let coefficient = x[n * TERMS + m];
            for (t, &k) in taps.iter().enumerate() {
                kbar[t * TERMS + m] += coefficient * k;
            }
        }
    }
    VaryingKernel::from_kbar(kbar)
}

/// Σ K² of the kernel at normalised place (xh, yh).
pub fn kernel_sum_squares(kernel: &VaryingKernel, xh: f64, yh: f64) -> f64 {
    let h = HALF as i64;
    let mut s = 0.0;
    for v in -h..=h {
        for u in -h..=h {
            s += kernel.at(u, v, xh, yh).powi(2);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_basis_has_49_kernels_and_only_the_first_carries_flux() {
        let basis = Basis::new(&FitConfig::default().gaussians);
        assert_eq!(basis.len(), 49);
        let sum0: f64 = basis.taps[0].iter().sum();
        assert!((sum0 - 1.0).abs() < 1e-12, "{sum0}");
        for (n, taps) in basis.taps.iter().enumerate().skip(1) {
            let s: f64 = taps.iter().sum();
            let norm: f64 = taps.iter().map(|v| v * v).sum();
            assert!(s.abs() < 1e-12, "kernel {n} sums to {s}");
            assert!((norm - 1.0).abs() < 1e-12, "kernel {n} has norm² {norm}");
        }
    }

    /// A region's stamps, searched brightest first until `keep` pass, are the first `keep` of every pixel
    /// tested and then sorted: on a field with saturated stars (masked) and a bad column, for regions of
    /// several sizes, at a threshold where more stars than `keep` qualify.
    #[test]
    fn region_stamps_are_the_first_of_every_pixel_tested() {
        let mut spec = super::super::field::FieldSpec::new(640, 11).unwrap();
        spec.bad_column = true;
        spec.stars_per_mpx *= 4.0;
        let field = super::super::field::generate(&spec);
        let (r, t) = (&field.reference, &field.science);
        let img = FitImages {
            nx: 640,
            ny: 640,
            conv: &r.data,
            conv_var: &r.variance,
            target: &t.data,
            target_var: &t.variance,
            conv_bad: &r.mask,
            target_bad: &t.mask,
        };
        assert!(r.mask.iter().any(|&m| m != 0) && t.mask.iter().any(|&m| m != 0));
        let (half, lowest) = (15, 5.0);
        let reach = half + HALF;
        let mut compared = 0;
        for (xs, ys) in [
            ((0, 640), (0, 640)),
            ((64, 320), (300, 620)),
            ((200, 290), (0, 97)),
        ] {
            let sky = sky_stats(img.conv, img.conv_bad, 640, xs, ys);
            let mut every: Vec<(usize, usize, f64)> = Vec::new();
            for y in ys.0.max(reach)..ys.1.min(640 - reach) {
                for x in xs.0.max(reach)..xs.1.min(640 - reach) {
                    let v = img.conv[y * 640 + x];
                    let level = (v as f64 - sky.0) / sky.1;
                    if level >= lowest
                        && is_brightest(img.conv, 640, x, y, half, v)
                        && !any_bad(img.conv_bad, 640, x, y, reach)
                        && !any_bad(img.target_bad, 640, x, y, half)
                    {
                        every.push((x, y, level));
                    }
                }
            }
            every.sort_by(|a, b| b.2.total_cmp(&a.2));
            for keep in [1, 8, 24] {
                let got = region_stamps(&img, (xs, ys), sky, lowest, half, keep);
                assert_eq!(
                    got,
                    every[..keep.min(every.len())],
                    "{xs:?} {ys:?} keep {keep}"
                );
                compared += usize::from(every.len() > keep);
            }
        }
        assert!(
            compared >= 6,
            "too few regions with more stars than kept: {compared}"
        );
    }

    /// The separable basis images equal a direct 441-tap convolution with each final kernel.
    #[test]
    fn separable_basis_images_equal_direct_convolution() {
        let basis = Basis::new(&FitConfig::default().gaussians);
        let n = 80;
        let image: Vec<f32> = (0..n * n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.01 + (i % 13) as f32)
            .collect();
        let (x, y, half) = (40, 38, 6);
        let images = basis.convolve(&image, n, x, y, half);
        let w = 2 * half + 1;
        let h = HALF as i64;
        for (k, taps) in basis.taps.iter().enumerate() {
            for (j, i) in [(0, 0), (3, 7), (w - 1, w - 1)] {
                let (px, py) = ((x - half + i) as i64, (y - half + j) as i64);
                let mut direct = 0.0;
                for v in -h..=h {
                    for u in -h..=h {
                        let t = ((v + h) * SIDE as i64 + u + h) as usize;
                        direct += taps[t] * image[((py - v) * n as i64 + px - u) as usize] as f64;
                    }
                }
                let got = images[k * w * w + j * w + i];
                assert!(
                    (got - direct).abs() <= 1e-9 * direct.abs().max(1.0),
                    "kernel {k} pixel ({i},{j}): {got} vs {direct}"
                );
            }
        }
    }
}
