//! The difference image's PSF, measured from the data, and PSF photometry with it.
//!
//! The PSF of D is the PSF of the image that was not convolved (the science image when the reference is
//! convolved). It is measured on that image's own stars ([`candidates`]: local maxima 20 sky σ above their
//! block's sky, the 600 brightest), keeping those that are isolated (no other peak above 5 % of theirs within
//! 8 px, nor above half of theirs in the 31 × 31 box), unmasked and bright (core S/N ≥ 30). Each star's sky
//! (median of its box's border) is removed, its centre found by a Gaussian-windowed centroid (σ 1.5 px, as
//! SExtractor's XWIN), the star resampled around that centre by bicubic (Catmull-Rom) interpolation and
//! divided by its flux within 5 px (its core: in a field of 2000 stars per Mpx a 31 × 31 box holds two
//! other stars on average, which biased a box normalisation by 3 %).
//!
//! - **Stars, not galaxies:** a star's share of its core flux within 2 px must not fall 3 robust
//!   deviations below the median (galaxies and blends are less concentrated); then the stars the model fits
//!   worst (χ² per pixel within 6 px above 3 times the median) are dropped and the model fitted again.
//! - **Model:** every pixel is a polynomial of degree 2 over the field (degree 0 with fewer than 18 stars),
//!   fitted by weighted least squares over the stars, each weighted by its noise plus 3 % of the typical
//!   value there (else the brightest star's wings would outweigh all others), values more than 4 σ off
//!   clipped (neighbours). The field's PSF widens by 15 % to the corners and turns by 60°: one PSF for the
//!   field biased photometry by 7-14 % at the edges. Evaluated anywhere, the model is normalised to unit
//!   sum over its 25 × 25 pixels (light beyond, 0.6 % for the generated field's Moffat, is not counted).
//!
//! PSF photometry at (x, y): F = Σ P D / V / Σ P² / V with P the local PSF shifted to (x, y), its error
//! 1 / √(Σ P² / V), over unmasked pixels within 10 px.

use super::difference::spatial_terms;
use super::difference::{HALF, SIDE, TERMS};
use super::fit::normalised;
use super::{half_maximum_fwhm, median};
use nalgebra::DMatrix;
use rayon::prelude::*;
use serde::Serialize;

/// Half width of the PSF model (25 × 25 pixels).
pub const PSF_HALF: usize = 12;
const PSF_SIDE: usize = 2 * PSF_HALF + 1;
/// Half width of the box a star is measured in.
const BOX_HALF: usize = 15;
/// Pixels within this distance (Chebyshev) of the position enter PSF photometry.
const PHOT_HALF: i64 = 10;

/// A PSF varying over the field: per model pixel, the six spatial terms.
#[derive(Debug, Clone)]
pub struct PsfModel {
    nx: usize,
    ny: usize,
    /// terms[pixel * TERMS + m]; pixel = (v + PSF_HALF) * PSF_SIDE + (u + PSF_HALF).
    terms: Vec<f64>,
    pub stars_used: usize,
    pub stars_dropped: usize,
    /// Spatial degree fitted (2, or 0 with few stars).
    pub degree: usize,
    /// Fraction of (star, pixel) values left out of the fit.
    pub clipped_fraction: f64,
    /// Centres of the stars the model was made from.
    pub stars: Vec<(f64, f64)>,
}

/// Summary of the model for the outputs.
#[derive(Debug, Clone, Serialize)]
pub struct PsfSummary {
    pub stars_used: usize,
    pub stars_dropped: usize,
    pub degree: usize,
    pub clipped_fraction: f64,
    /// FWHM (px, from the area above half the peak) at the centre and at a corner.
    pub fwhm_centre: f64,
    pub fwhm_corner: f64,
    /// The model at the field's centre, 25 × 25, row by row (fraction of the flux per pixel).
    pub image_centre: Vec<f64>,
}

/// Catmull-Rom weights of the four samples around a fractional offset t in [0, 1).
fn cubic_weights(t: f64) -> [f64; 4] {
    let t2 = t * t;
    let t3 = t2 * t;
    [
        0.5 * (-t3 + 2.0 * t2 - t),
        0.5 * (3.0 * t3 - 5.0 * t2 + 2.0),
        0.5 * (-3.0 * t3 + 4.0 * t2 + t),
        0.5 * (t3 - t2),
    ]
}

/// Bicubic interpolation of `value(ix, iy)` at (x, y).
fn interpolate(x: f64, y: f64, value: impl Fn(i64, i64) -> f64) -> f64 {
    let (fx, fy) = (x.floor(), y.floor());
    let (wx, wy) = (cubic_weights(x - fx), cubic_weights(y - fy));
    let (ix, iy) = (fx as i64, fy as i64);
    let mut s = 0.0;
    for (j, wyj) in wy.iter().enumerate() {
        let mut row = 0.0;
        for (i, wxi) in wx.iter().enumerate() {
            row += wxi * value(ix - 1 + i as i64, iy - 1 + j as i64);
        }
        s += wyj * row;
    }
    s
}

/// A star resampled around its centre: its place, and per model pixel the value and variance, in units of
/// the star's flux within [`CORE_RADIUS`].
struct MeasuredStar {
    x: f64,
    y: f64,
    values: Vec<f64>,
    variances: Vec<f64>,
}

/// A PSF star's flux within CORE_RADIUS over its noise must be at least this.
const MIN_CORE_SNR: f64 = 30.0;

/// Radius of the aperture a star is normalised by: its core, where neighbours add least.
const CORE_RADIUS: f64 = 5.0;

fn measure_star(
    image: &[f32],
    variance: &[f32],
    bad: &[u8],
    nx: usize,
    ny: usize,
    x: usize,
    y: usize,
) -> Option<MeasuredStar> {
    if x < BOX_HALF || y < BOX_HALF || x + BOX_HALF >= nx || y + BOX_HALF >= ny {
        return None;
    }
    let at = |i: i64, j: i64| (j as usize) * nx + i as usize;
    let (x0, y0) = (x as i64 - BOX_HALF as i64, y as i64 - BOX_HALF as i64);
    let side = 2 * BOX_HALF as i64 + 1;
    let mut border = Vec::new();
    for j in 0..side {
        for i in 0..side {
            let p = at(x0 + i, y0 + j);
            if bad[p] != 0 {
                return None;
            }
            if i < 2 || j < 2 || i >= side - 2 || j >= side - 2 {
                border.push(image[p] as f64);
            }
        }
    }
    let sky = median(&mut border);
    let mut deviations: Vec<f64> = border.iter().map(|b| (b - sky).abs()).collect();
    let sky_sigma = 1.4826 * median(&mut deviations);
    let value = |i: i64, j: i64| image[at(i, j)] as f64 - sky;
    // Isolated: no other local maximum above 5 % of the star's peak (or 5 sky σ when that is more) within
    // 8 px, where it would change the core flux the star is normalised by, nor above half the peak in the
    // rest of the box (fainter neighbours there are clipped pixel by pixel).
    let peak = value(x as i64, y as i64);
    let near_limit = (0.05 * peak).max(5.0 * sky_sigma);
    for j in 1..side - 1 {
        for i in 1..side - 1 {
            let (px, py) = (x0 + i, y0 + j);
            if (px - x as i64).abs() <= 2 && (py - y as i64).abs() <= 2 {
                continue;
            }
            let v = value(px, py);
            let (dx, dy) = (px - x as i64, py - y as i64);
            let limit = if dx * dx + dy * dy <= 64 {
                near_limit
            } else {
                0.5 * peak
            };
            if v > limit
                && (-1..=1)
                    .all(|b| (-1..=1).all(|a| (a == 0 && b == 0) || value(px + a, py + b) <= v))
            {
                return None;
            }
        }
    }
    // Gaussian-windowed centroid, from the stamp's centre.
    let (mut cx, mut cy) = (x as f64, y as f64);
    for _ in 0..20 {
        let (mut sw, mut sx, mut sy) = (0.0, 0.0, 0.0);
        for j in -4..=4i64 {
            for i in -4..=4i64 {
                let (px, py) = (cx.round() as i64 + i, cy.round() as i64 + j);
                let (dx, dy) = (px as f64 - cx, py as f64 - cy);
                let w = (-(dx * dx + dy * dy) / (2.0 * 1.5 * 1.5)).exp() * value(px, py);
                sw += w;
                sx += w * dx;
                sy += w * dy;
            }
        }
        if sw.is_nan() || sw <= 0.0 {
            return None;
        }
        let (mx, my) = (2.0 * sx / sw, 2.0 * sy / sw);
        cx += mx.clamp(-1.0, 1.0);
        cy += my.clamp(-1.0, 1.0);
        if mx.abs() + my.abs() < 1e-4 {
            break;
        }
    }
    if (cx - x as f64).abs() > 1.0 || (cy - y as f64).abs() > 1.0 {
        return None;
    }
    let h = PSF_HALF as i64;
    let mut values = Vec::with_capacity(PSF_SIDE * PSF_SIDE);
    let mut variances = Vec::with_capacity(PSF_SIDE * PSF_SIDE);
    let (mut core, mut core_var) = (0.0, 0.0);
    for v in -h..=h {
        for u in -h..=h {
            let (px, py) = (cx + u as f64, cy + v as f64);
            let f = interpolate(px, py, value);
            if ((u * u + v * v) as f64) <= CORE_RADIUS * CORE_RADIUS {
                core += f;
                core_var += variance[at(px.round() as i64, py.round() as i64)] as f64;
            }
            values.push(f);
            variances.push(variance[at(px.round() as i64, py.round() as i64)] as f64);
        }
    }
    // Bright enough that its centre and profile are sharp: core S/N of 30 or more.
    if core.is_nan() || core <= MIN_CORE_SNR * core_var.sqrt() {
        return None;
    }
    values.iter_mut().for_each(|v| *v /= core);
    variances.iter_mut().for_each(|v| *v /= core * core);
    Some(MeasuredStar {
        x: cx,
        y: cy,
        values,
        variances,
    })
}

/// The most stars a model is made from (the brightest candidates).
const MAX_STARS: usize = 600;
/// Side of the blocks the sky level and noise of star selection are taken in.
const SKY_BLOCK: usize = 64;

/// Places of candidate PSF stars in `image`: pixels that top their 7 × 7 neighbourhood by 20 sky σ or more
/// (the sky of their 64 × 64 block), away from the border and masked pixels, brightest first, at most
/// MAX_STARS. [`PsfModel::measure`] decides which are isolated stars.
pub fn candidates(image: &[f32], bad: &[u8], nx: usize, ny: usize) -> Vec<(usize, usize)> {
    let blocks = (nx.div_ceil(SKY_BLOCK), ny.div_ceil(SKY_BLOCK));
    let sky: Vec<(f64, f64)> = (0..blocks.0 * blocks.1)
        .into_par_iter()
        .map(|b| {
            let (i, j) = (b % blocks.0, b / blocks.0);
            let xs = (i * SKY_BLOCK, ((i + 1) * SKY_BLOCK).min(nx));
            let ys = (j * SKY_BLOCK, ((j + 1) * SKY_BLOCK).min(ny));
            super::fit::sky_stats(image, bad, nx, xs, ys)
        })
        .collect();
    let margin = BOX_HALF + 1;
    let mut found: Vec<(f32, usize, usize)> = (margin..ny.saturating_sub(margin))
        .into_par_iter()
        .flat_map_iter(|y| {
            let mut row = Vec::new();
            for x in margin..nx - margin {
                let at = y * nx + x;
                let v = image[at];
                let (level, sigma) = sky[(y / SKY_BLOCK) * blocks.0 + x / SKY_BLOCK];
                if v.is_nan() || (v as f64 - level) < 20.0 * sigma || bad[at] != 0 {
                    continue;
                }
                let top = (y - 3..=y + 3).all(|yy| {
                    image[yy * nx + x - 3..=yy * nx + x + 3]
                        .iter()
                        .enumerate()
                        .all(|(i, &w)| w < v || (w == v && (yy, x - 3 + i) >= (y, x)))
                });
                if top {
                    row.push((v, x, y));
                }
            }
            row
        })
        .collect();
    found.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.2, a.1).cmp(&(b.2, b.1))));
    found.truncate(MAX_STARS);
    found.into_iter().map(|(_, x, y)| (x, y)).collect()
}

/// Relative error of a star's normalised profile beyond its noise (module docs).
const SYSTEMATIC: f64 = 0.03;

/// Model pixels further than this many σ from the fit are left out of it (a neighbour, a cosmic ray).
const CLIP_SIGMA: f64 = 4.0;

/// Each model pixel fitted on its own over the stars (module docs): the model's terms, its spatial degree
/// and the fraction of (star, pixel) values clipped. `None` with fewer than 3 stars.
fn fit_pixels(measured: &[MeasuredStar], nx: usize, ny: usize) -> Option<(Vec<f64>, usize, f64)> {
    if measured.len() < 3 {
        return None;
    }
    let degree = if measured.len() >= 18 { 2 } else { 0 };
    let terms = if degree == 2 { TERMS } else { 1 };
    let places: Vec<[f64; TERMS]> = measured
        .iter()
        .map(|s| spatial_terms(normalised(s.x, nx), normalised(s.y, ny)))
        .collect();
    let pixels = PSF_SIDE * PSF_SIDE;
    // Each model pixel on its own (so on a thread of its own: the same result on any thread count):
    // weighted least squares over the stars, then again without the stars whose value there lies more
    // than CLIP_SIGMA σ from the fit, twice. Its terms and the stars clipped there.
    let fitted: Vec<(Vec<f64>, usize)> = (0..pixels)
        .into_par_iter()
        .map(|p| {
            // Each star's noise there, plus SYSTEMATIC of the typical value: the profile's own change over
            // the field beyond degree 2 and the resampling's error, without which the brightest star's
            // wings (the smallest noise in flux units) would outweigh all the others.
            let mut typical: Vec<f64> = measured.iter().map(|s| s.values[p].abs()).collect();
            let floor = (SYSTEMATIC * median(&mut typical)).powi(2);
            let variance = |s: &MeasuredStar| s.variances[p] + floor;
            let mut keep = vec![true; measured.len()];
            let mut c = vec![0.0; terms];
            for round in 0..3 {
                let mut a = DMatrix::<f64>::zeros(terms, terms);
                let mut b = DMatrix::<f64>::zeros(terms, 1);
                for (s, star) in measured.iter().enumerate() {
                    if !keep[s] {
                        continue;
                    }
                    let w = 1.0 / variance(star).max(1e-300);
                    for i in 0..terms {
                        b[(i, 0)] += w * places[s][i] * star.values[p];
                        for j in 0..terms {
                            a[(i, j)] += w * places[s][i] * places[s][j];
                        }
                    }
                }
                let solved = a.cholesky()?.solve(&b);
                c = (0..terms).map(|i| solved[(i, 0)]).collect();
                if round == 2 {
                    break;
                }
                for (s, star) in measured.iter().enumerate() {
                    let fit: f64 = (0..terms).map(|i| c[i] * places[s][i]).sum();
                    keep[s] = (star.values[p] - fit).abs() <= CLIP_SIGMA * variance(star).sqrt();
                }
                if keep.iter().filter(|&&k| k).count() < terms + 2 {
                    keep.iter_mut().for_each(|k| *k = true);
                }
            }
            Some((c, keep.iter().filter(|&&k| !k).count()))
        })
        .collect::<Option<_>>()?;
    let mut model = vec![0.0; pixels * TERMS];
    let mut clipped_pixels = 0usize;
    for (p, (c, clipped)) in fitted.into_iter().enumerate() {
        model[p * TERMS..p * TERMS + terms].copy_from_slice(&c);
        clipped_pixels += clipped;
    }
    Some((
        model,
        degree,
        clipped_pixels as f64 / (pixels * measured.len()) as f64,
    ))
}

impl PsfModel {
    /// Measures the PSF of `image` on the stars at `stars` (module docs); `None` with fewer than 3 usable.
    pub fn measure(
        image: &[f32],
        variance: &[f32],
        bad: &[u8],
        nx: usize,
        ny: usize,
        stars: &[(usize, usize)],
    ) -> Option<PsfModel> {
        let mut measured: Vec<MeasuredStar> = stars
            .par_iter()
            .filter_map(|&(x, y)| measure_star(image, variance, bad, nx, ny, x, y))
            .collect();
        // The stellar locus: a galaxy (or a blend) is less concentrated than a star. The share of the core
        // flux within 2 px must not fall below the median by more than 3 robust deviations.
        let h = PSF_HALF as i64;
        let within = |r2: i64| -> Vec<usize> {
            (0..PSF_SIDE * PSF_SIDE)
                .filter(|&p| {
                    let (u, v) = ((p % PSF_SIDE) as i64 - h, (p / PSF_SIDE) as i64 - h);
                    u * u + v * v <= r2
                })
                .collect()
        };
        let inner = within(4);
        let concentration: Vec<f64> = measured
            .iter()
            .map(|s| inner.iter().map(|&p| s.values[p]).sum())
            .collect();
        let mut sorted = concentration.clone();
        let centre = median(&mut sorted);
        let mut deviations: Vec<f64> = concentration.iter().map(|c| (c - centre).abs()).collect();
        let spread = 1.4826 * median(&mut deviations);
        let mut keep = concentration.iter().map(|&c| c >= centre - 3.0 * spread);
        measured.retain(|_| keep.next().unwrap_or(false));
        // Fit, then drop the stars that the model fits worst (χ² per pixel within 6 px above 3 times the
        // median) and fit again, until none is dropped.
        let core = within(36);
        loop {
            let (model, degree, clipped_fraction) = fit_pixels(&measured, nx, ny)?;
            let residual: Vec<f64> = measured
                .iter()
                .map(|s| {
                    let t = spatial_terms(normalised(s.x, nx), normalised(s.y, ny));
                    core.iter()
                        .map(|&p| {
                            let m: f64 = (0..TERMS).map(|k| model[p * TERMS + k] * t[k]).sum();
                            let floor = (SYSTEMATIC * m).powi(2);
                            (s.values[p] - m).powi(2) / (s.variances[p] + floor)
                        })
                        .sum::<f64>()
                        / core.len() as f64
                })
                .collect();
            let mut sorted = residual.clone();
            let limit = 3.0 * median(&mut sorted).max(1.0);
            // The stars this model was fitted on, before any is dropped.
            let fitted_on: Vec<(f64, f64)> = measured.iter().map(|s| (s.x, s.y)).collect();
            let mut keep = residual.iter().map(|&r| r <= limit);
            measured.retain(|_| keep.next().unwrap_or(false));
            if measured.len() == fitted_on.len() || measured.len() < 3 {
                return Some(PsfModel {
                    nx,
                    ny,
                    terms: model,
                    stars_used: fitted_on.len(),
                    stars_dropped: stars.len() - fitted_on.len(),
                    degree,
                    clipped_fraction,
                    stars: fitted_on,
                });
            }
        }
    }

    /// The PSF image (PSF_SIDE², centred) at pixel (x, y), normalised to unit sum.
    pub fn at(&self, x: f64, y: f64) -> Vec<f64> {
        let t = spatial_terms(normalised(x, self.nx), normalised(y, self.ny));
        let image: Vec<f64> = (0..PSF_SIDE * PSF_SIDE)
            .map(|p| (0..TERMS).map(|m| self.terms[p * TERMS + m] * t[m]).sum())
            .collect();
        let sum: f64 = image.iter().sum();
        image.iter().map(|v| v / sum).collect()
    }

    /// The matched filter of detection: the PSF at the field's centre as a 21 × 21 convolution kernel
    /// (mirrored, so that convolving with it correlates with the PSF).
    pub fn matched_filter(&self) -> Vec<f64> {
        let psf = self.at((self.nx as f64 - 1.0) / 2.0, (self.ny as f64 - 1.0) / 2.0);
        let h = HALF as i64;
        let mut taps = Vec::with_capacity(SIDE * SIDE);
        for v in -h..=h {
            for u in -h..=h {
                let (pu, pv) = (PSF_HALF as i64 - u, PSF_HALF as i64 - v);
                taps.push(psf[(pv as usize) * PSF_SIDE + pu as usize]);
            }
        }
        taps
    }

    pub fn summary(&self) -> PsfSummary {
        let fwhm = |x: f64, y: f64| half_maximum_fwhm(&self.at(x, y));
        let (cx, cy) = ((self.nx as f64 - 1.0) / 2.0, (self.ny as f64 - 1.0) / 2.0);
        PsfSummary {
            stars_used: self.stars_used,
            stars_dropped: self.stars_dropped,
            degree: self.degree,
            clipped_fraction: self.clipped_fraction,
            fwhm_centre: fwhm(cx, cy),
            fwhm_corner: fwhm(0.0, 0.0),
            image_centre: self.at(cx, cy),
        }
    }
}

/// A PSF flux measured on the difference image.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PsfFlux {
    pub flux: f64,
    pub error: f64,
    /// Fraction of the PSF that fell on masked pixels (they are left out).
    pub masked_fraction: f64,
}

/// A difference image with its variance and mask, as photometry and detection read it.
#[derive(Debug, Clone, Copy)]
pub struct Planes<'a> {
    pub nx: usize,
    pub ny: usize,
    pub diff: &'a [f32],
    pub variance: &'a [f32],
    pub mask: &'a [u8],
}

/// PSF photometry of the difference at (x, y) (module docs). `None` when more than half the PSF is masked or
/// off the image.
pub fn psf_flux(psf: &PsfModel, planes: &Planes, x: f64, y: f64) -> Option<PsfFlux> {
    let (nx, ny) = (planes.nx as i64, planes.ny as i64);
    let (diff, variance, mask) = (planes.diff, planes.variance, planes.mask);
    let local = psf.at(x, y);
    let h = PSF_HALF as i64;
    let shape = |u: f64, v: f64| {
        interpolate(u + h as f64, v + h as f64, |i, j| {
            if i < 0 || j < 0 || i > 2 * h || j > 2 * h {
                0.0
            } else {
                local[(j * (2 * h + 1) + i) as usize]
            }
        })
    };
    let (ix, iy) = (x.round() as i64, y.round() as i64);
    let (mut num, mut den, mut used, mut lost) = (0.0, 0.0, 0.0, 0.0);
    for j in iy - PHOT_HALF..=iy + PHOT_HALF {
        for i in ix - PHOT_HALF..=ix + PHOT_HALF {
            let p = shape(i as f64 - x, j as f64 - y);
            let off = i < 0 || j < 0 || i >= nx || j >= ny;
            let at = if off { 0 } else { (j * nx + i) as usize };
            if off || mask[at] != 0 || variance[at].is_nan() || variance[at] <= 0.0 {
                lost += p.max(0.0);
                continue;
            }
            used += p.max(0.0);
            let w = 1.0 / variance[at] as f64;
            num += w * p * diff[at] as f64;
            den += w * p * p;
        }
    }
    if den.is_nan() || den <= 0.0 || lost > used {
        return None;
    }
    Some(PsfFlux {
        flux: num / den,
        error: 1.0 / den.sqrt(),
        masked_fraction: lost / (used + lost),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catmull_rom_reproduces_a_quadratic_and_its_samples() {
        let f = |i: i64, j: i64| (i * i) as f64 * 0.5 + 3.0 * j as f64 - 2.0;
        for (x, y) in [(3.0, 4.0), (3.25, 4.5), (5.9, 2.1)] {
            let got = interpolate(x, y, f);
            let want = x * x * 0.5 + 3.0 * y - 2.0;
            // Keys' cubic convolution with a = −1/2 (Catmull-Rom) reproduces polynomials of degree 2.
            assert!((got - want).abs() < 1e-12, "{got} {want}");
        }
        assert_eq!(interpolate(3.0, 4.0, f), f(3, 4));
    }

    /// Stars of a known Gaussian PSF, drawn at sub-pixel places: the measured model recovers its shape, and
    /// PSF photometry its flux.
    #[test]
    fn the_model_of_gaussian_stars_recovers_their_flux() {
        let (nx, ny) = (400usize, 400usize);
        let sigma = 1.6;
        let mut image = vec![100.0f32; nx * ny];
        let mut stars = Vec::new();
        for k in 0..36 {
            let (x, y) = (
                30.0 + (k % 6) as f64 * 64.0 + 0.37 * (k % 3) as f64,
                30.0 + (k / 6) as f64 * 64.0 + 0.23 * (k % 4) as f64,
            );
            stars.push((x, y));
            for j in -15..=15i64 {
                for i in -15..=15i64 {
                    let (px, py) = (x.round() as i64 + i, y.round() as i64 + j);
                    let (dx, dy) = (px as f64 - x, py as f64 - y);
                    let g = 1e4 * (-(dx * dx + dy * dy) / (2.0 * sigma * sigma)).exp()
                        / (2.0 * std::f64::consts::PI * sigma * sigma);
                    image[py as usize * nx + px as usize] += g as f32;
                }
            }
        }
        let bad = vec![0u8; nx * ny];
        let places: Vec<(usize, usize)> = stars
            .iter()
            .map(|&(x, y)| (x.round() as usize, y.round() as usize))
            .collect();
        let var = vec![100.0f32; nx * ny];
        let psf = PsfModel::measure(&image, &var, &bad, nx, ny, &places).expect("36 stars");
        assert_eq!(psf.stars_used, 36);
        let s = psf.summary();
        assert!((s.fwhm_centre - 2.3548 * sigma).abs() < 0.5, "{s:?}");
        let diff: Vec<f32> = image.iter().map(|v| v - 100.0).collect();
        for &(x, y) in &stars[..6] {
            let planes = Planes {
                nx,
                ny,
                diff: &diff,
                variance: &var,
                mask: &bad,
            };
            let f = psf_flux(&psf, &planes, x, y).unwrap();
            assert!(
                (f.flux / 1e4 - 1.0).abs() < 0.01,
                "flux {} at ({x}, {y})",
                f.flux
            );
        }
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;
    use crate::workload::imgsub::field::{generate, FieldSpec, Image, Kind};

    /// On a generated field, the model measured on bright isolated stars of the science image matches the
    /// Moffat PSF the generator drew them with: PSF photometry of that true PSF with the model is unbiased.
    #[test]
    fn the_model_of_a_field_matches_its_true_psf() {
        let spec = FieldSpec::new(768, 3).unwrap();
        let field = generate(&spec);
        let n = spec.size;
        let stars: Vec<(usize, usize)> = field
            .sources
            .iter()
            .filter(|s| s.kind == Kind::Star && s.reference_flux > 2e4 && s.reference_flux < 4e5)
            .filter(|s| {
                !field.sources.iter().any(|o| {
                    o.id != s.id
                        && (o.x - s.x).abs() < 16.0
                        && (o.y - s.y).abs() < 16.0
                        && o.reference_flux > 0.05 * s.reference_flux
                })
            })
            .map(|s| (s.x.round() as usize, s.y.round() as usize))
            .collect();
        let science = &field.science;
        let psf = PsfModel::measure(
            &science.data,
            &science.variance,
            &science.mask,
            n,
            n,
            &stars,
        )
        .unwrap();
        let c = (n as f64 - 1.0) / 2.0;
        let truth = spec.psf_at(Image::Science, c, c);
        let model = psf.at(c, c);
        let h = PSF_HALF as i64;
        let (mut pt, mut pp, mut sum, mut tsum) = (0.0, 0.0, 0.0, 0.0);
        for v in -h..=h {
            for u in -h..=h {
                let m = model[((v + h) * (2 * h + 1) + u + h) as usize];
                let t = truth.density(u as f64, v as f64);
                pt += m * t;
                pp += m * m;
                sum += m;
                tsum += t;
            }
        }
        eprintln!(
            "{} stars (dropped {}), model sum {sum:.4}, true {tsum:.4}, peak {:.4} vs {:.4}, photometry ratio {:.4}",
            psf.stars_used,
            psf.stars_dropped,
            model.iter().cloned().fold(0.0, f64::max),
            truth.density(0.0, 0.0),
            pt / pp
        );
        assert!(
            (pt / pp - 1.0).abs() < 0.01,
            "photometry with the model is off by {:.4}",
            pt / pp - 1.0
        );
    }
}
