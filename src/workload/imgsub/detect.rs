//! Detection on the difference image: the matched-filter significance S/N = Σ P D / √(Σ P² VD) (P the
//! PSF; the device computes both sums with the difference kernel, P as a constant kernel), its positive and
//! negative peaks above a threshold, each measured by PSF photometry at its sub-pixel place.

use super::psf::{psf_flux, Planes, PsfFlux, PsfModel};
use rayon::prelude::*;
use serde::Serialize;

/// Half width of the window a peak must top.
const PEAK_HALF: i64 = 2;
/// Half width of the box searched for masked pixels (`near_mask`).
const NEAR_MASK_HALF: i64 = 5;

/// A source found on the difference image.
#[derive(Debug, Clone, Serialize)]
pub struct Detection {
    pub id: usize,
    /// Position, 0-based pixel centres (FITS pixel − 1), refined by a parabola through the peak.
    pub x: f64,
    pub y: f64,
    /// Matched-filter significance at the peak pixel (negative: the source faded).
    pub snr: f64,
    /// PSF photometry at (x, y), in the difference image's units; `None` when mostly masked.
    pub psf: Option<PsfFlux>,
    /// A masked pixel lies within 5 px (a saturated star, a bad column, the edge).
    pub near_mask: bool,
}

/// The significance image from the matched filter's two sums, Σ P D and Σ P² VD.
pub fn significance(mut sum_pd: Vec<f32>, sum_p2v: &[f32]) -> Vec<f32> {
    // In place: at 10k a fresh plane is 400 MB of pages to map.
    sum_pd
        .par_iter_mut()
        .zip(sum_p2v)
        .for_each(|(c, &w)| *c = if w > 0.0 { *c / w.sqrt() } else { 0.0 });
    sum_pd
}

/// Peaks of |S/N| ≥ `threshold` on unmasked pixels that top their 5 × 5 window (same sign), brightest first.
pub fn find(snr: &[f32], planes: &Planes, threshold: f64, psf: &PsfModel) -> Vec<Detection> {
    let (nx, ny, mask) = (planes.nx, planes.ny, planes.mask);
    let value = |x: i64, y: i64| -> f32 {
        if x < 0 || y < 0 || x >= nx as i64 || y >= ny as i64 {
            0.0
        } else {
            snr[y as usize * nx + x as usize]
        }
    };
    let mut peaks: Vec<(usize, usize, f32)> = (0..ny)
        .into_par_iter()
        .flat_map_iter(|y| {
            let mut row = Vec::new();
            for x in 0..nx {
                let at = y * nx + x;
                let s = snr[at];
                if s.is_nan() || (s.abs() as f64) < threshold || mask[at] != 0 {
                    continue;
                }
                let sign = s.signum();
                let (xi, yi) = (x as i64, y as i64);
                let mut top = true;
                'window: for j in -PEAK_HALF..=PEAK_HALF {
                    for i in -PEAK_HALF..=PEAK_HALF {
                        if i == 0 && j == 0 {
                            continue;
                        }
                        let o = sign * value(xi + i, yi + j);
                        // Ties go to the first pixel in row order.
                        if o > s.abs() || (o == s.abs() && (j, i) < (0, 0)) {
                            top = false;
                            break 'window;
                        }
                    }
                }
                if top {
                    row.push((x, y, s));
                }
            }
            row
        })
        .collect();
    peaks.sort_by(|a, b| {
        b.2.abs()
            .total_cmp(&a.2.abs())
            .then((a.1, a.0).cmp(&(b.1, b.0)))
    });
    peaks
        .par_iter()
        .enumerate()
        .map(|(id, &(x, y, s))| {
            let (xi, yi) = (x as i64, y as i64);
            let offset = |l: f32, c: f32, r: f32| {
                let curvature = l as f64 - 2.0 * c as f64 + r as f64;
                if curvature < 0.0 {
                    (0.5 * (l as f64 - r as f64) / curvature).clamp(-0.5, 0.5)
                } else {
                    0.0
                }
            };
            let a = |i: i64, j: i64| s.signum() * value(xi + i, yi + j);
            let fx = x as f64 + offset(a(-1, 0), a(0, 0), a(1, 0));
            let fy = y as f64 + offset(a(0, -1), a(0, 0), a(0, 1));
            let near_mask = (-NEAR_MASK_HALF..=NEAR_MASK_HALF).any(|j| {
                (-NEAR_MASK_HALF..=NEAR_MASK_HALF).any(|i| {
                    let (px, py) = (xi + i, yi + j);
                    px < 0
                        || py < 0
                        || px >= nx as i64
                        || py >= ny as i64
                        || mask[py as usize * nx + px as usize] != 0
                })
            });
            Detection {
                id: id + 1,
                x: fx,
                y: fy,
                snr: s as f64,
                psf: psf_flux(psf, planes, fx, fy),
                near_mask,
            }
        })
        .collect()
}
