//! Detection on the difference image: the matched-filter significance S/N = Σ P D / √(Σ P² VD) (P the
//! PSF; the device computes both sums with the difference kernel, P as a constant kernel), its positive and
//! negative peaks above a threshold, each measured by PSF photometry at its sub-pixel place.
//!
//! Around saturated stars the threshold is raised (`SaturationHalo`): the 21 × 21 kernel cannot carry a
//! saturated star's wings beyond its half width, so every tool (HOTPANTS and SFFT too) leaves a ring of
//! +0.2–0.6 σ per pixel 11–16 px from the saturated core, and the matched filter turns it into 5–8 σ peaks
//! (docs/imgsub.md, "Why, near saturation"). Masking the halo instead would lose real changers there (a
//! 23 σ transient 14 px from a saturated star in the 1k field).

use super::difference::HALF;
use super::field::saturated_within;
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
    /// Within a saturated star's halo, where the threshold is raised by `SaturationHalo::extra_snr`.
    pub in_saturation_halo: bool,
}

/// The halo beyond the kernel's half width, in FWHM of the difference image's PSF.
const HALO_FWHM: f64 = 1.5;
/// The ring's bias per pixel the raised threshold allows for, in σ (the stacked ring of the 10k field
/// peaks at +0.3 σ, +0.6 σ around the brightest third of the saturated stars).
const HALO_RING_SIGMA: f64 = 0.5;

/// Where detections need more significance: within `radius` of a saturated pixel of either input image.
pub struct SaturationHalo<'a> {
    /// The two input masks together (bit `MASK_SATURATED`).
    pub input_mask: &'a [u8],
    pub radius: f64,
    pub extra_snr: f64,
}

impl<'a> SaturationHalo<'a> {
    /// The halo for a difference image whose PSF has this FWHM: `HALF` + 1.5 FWHM (16 px for FWHM 3.9),
    /// and the threshold raised by the matched filter's response to a uniform bias of `HALO_RING_SIGMA`:
    /// that bias × √N, N = 4π σ² the PSF's effective pixels (3.0 for FWHM 3.9).
    pub fn new(input_mask: &'a [u8], fwhm: f64) -> Self {
        let fwhm = if fwhm.is_finite() && fwhm > 0.0 {
            fwhm
        } else {
            0.0
        };
        let sigma = fwhm / (8.0 * std::f64::consts::LN_2).sqrt();
        SaturationHalo {
            input_mask,
            radius: HALF as f64 + HALO_FWHM * fwhm,
            extra_snr: HALO_RING_SIGMA * (4.0 * std::f64::consts::PI * sigma * sigma).sqrt(),
        }
    }

    /// The peaks (x, y, S/N) that pass: all outside the halo, those above `threshold` + the extra inside it
    /// (flagged).
    fn keep(
        &self,
        peaks: Vec<(usize, usize, f32)>,
        nx: usize,
        ny: usize,
        threshold: f64,
    ) -> Vec<(usize, usize, f32, bool)> {
        peaks
            .into_par_iter()
            .map(|(x, y, s)| (x, y, s, self.contains(nx, ny, x, y)))
            .filter(|&(_, _, s, inside)| !inside || s.abs() as f64 >= threshold + self.extra_snr)
            .collect()
    }

    fn contains(&self, nx: usize, ny: usize, x: usize, y: usize) -> bool {
        saturated_within(self.input_mask, nx, ny, x as i64, y as i64, self.radius)
    }
}

/// Peaks of |S/N| ≥ `threshold` (plus the halo's extra within a saturated star's halo) on unmasked pixels
/// that top their 5 × 5 window (same sign), brightest first.
pub fn find(
    snr: &[f32],
    planes: &Planes,
    threshold: f64,
    halo: &SaturationHalo,
    psf: &PsfModel,
) -> Vec<Detection> {
    let (nx, ny) = (planes.nx, planes.ny);
    let rows: Vec<&[f32]> = snr.chunks(nx.max(1)).collect();
    let peaks = peaks_in_rows(&rows, planes.mask, nx, ny, 0..ny, threshold);
    measure(peaks, snr, planes, threshold, halo, psf)
}

/// The significance at (x, y), 0 off the image.
fn significance_at(snr: &[f32], nx: usize, ny: usize, x: i64, y: i64) -> f32 {
    if x < 0 || y < 0 || x >= nx as i64 || y >= ny as i64 {
        0.0
    } else {
        snr[y as usize * nx + x as usize]
    }
}

/// The rows a peak search can cover once the significance's first `rows` rows of `ny` are known: a peak
/// tops its window, which reaches [`PEAK_HALF`] rows further.
pub fn rows_searchable(rows: usize, ny: usize) -> usize {
    if rows >= ny {
        ny
    } else {
        rows.saturating_sub(PEAK_HALF as usize)
    }
}

/// The candidate peaks (x, y, S/N) of rows `rows` of an nx × ny significance, in row order: |S/N| ≥
/// `threshold` on an unmasked pixel that tops its 5 × 5 window (same sign). `snr` holds the plane's first
/// rows (nx values each, wherever they lie: bands as they come home), up to [`rows_searchable`]'s reach
/// at least; the search runs on all cores.
pub fn peaks_in_rows(
    snr: &[&[f32]],
    mask: &[u8],
    nx: usize,
    ny: usize,
    rows: std::ops::Range<usize>,
    threshold: f64,
) -> Vec<(usize, usize, f32)> {
    assert!(
        rows.is_empty() || snr.len() >= (rows.end + PEAK_HALF as usize).min(ny),
        "the rows a peak's window reaches"
    );
    let value = |x: i64, y: i64| {
        if x < 0 || y < 0 || x >= nx as i64 || y >= ny as i64 {
            0.0
        } else {
            snr[y as usize][x as usize]
        }
    };
    rows.into_par_iter()
        .flat_map_iter(|y| {
            let mut row = Vec::new();
            for (x, &s) in snr[y][..nx].iter().enumerate() {
                let at = y * nx + x;
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
        .collect()
}

/// The detections of the candidate `peaks` (from [`peaks_in_rows`] over every row, in any order): those the
/// saturation halo keeps, brightest first, each placed to a sub-pixel and measured by PSF photometry.
pub fn measure(
    peaks: Vec<(usize, usize, f32)>,
    snr: &[f32],
    planes: &Planes,
    threshold: f64,
    halo: &SaturationHalo,
    psf: &PsfModel,
) -> Vec<Detection> {
    let (nx, ny, mask) = (planes.nx, planes.ny, planes.mask);
    let value = |x: i64, y: i64| significance_at(snr, nx, ny, x, y);
    let mut peaks = halo.keep(peaks, nx, ny, threshold);
    peaks.sort_by(|a, b| {
        b.2.abs()
            .total_cmp(&a.2.abs())
            .then((a.1, a.0).cmp(&(b.1, b.0)))
    });
    peaks
        .par_iter()
        .enumerate()
        .map(|(id, &(x, y, s, in_saturation_halo))| {
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
                in_saturation_halo,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::imgsub::field::MASK_SATURATED;

    /// One saturated pixel at (40, 40) of an 80 × 80 image, D's FWHM 3.9 px: the halo reaches 15.85 px
    /// (a circle, not the square of the grown mask), and inside it a peak needs 5 + 2.9 σ of either sign.
    #[test]
    fn the_halo_raises_the_threshold_around_saturated_pixels_only() {
        let (nx, ny) = (80, 80);
        let mut input_mask = vec![0u8; nx * ny];
        input_mask[40 * nx + 40] = MASK_SATURATED;
        input_mask[5 * nx + 70] = 2; // a bad pixel: no halo
        let halo = SaturationHalo::new(&input_mask, 3.9);
        assert!((halo.radius - 15.85).abs() < 1e-9, "{}", halo.radius);
        assert!((halo.extra_snr - 2.94).abs() < 0.01, "{}", halo.extra_snr);
        let peaks = vec![
            (55, 40, 6.0),  // 15 px: inside, below 7.94
            (51, 51, -7.0), // 15.6 px: inside, faded, below
            (52, 52, 9.0),  // 17.0 px: outside
            (40, 54, 8.5),  // 14 px: inside, above: kept and flagged
            (40, 56, 5.5),  // 16 px: outside
            (70, 8, 5.1),   // beside the bad pixel
            (2, 2, 5.0),    // a corner, the box clipped
        ];
        let kept = halo.keep(peaks, nx, ny, 5.0);
        assert_eq!(
            kept,
            vec![
                (52, 52, 9.0, false),
                (40, 54, 8.5, true),
                (40, 56, 5.5, false),
                (70, 8, 5.1, false),
                (2, 2, 5.0, false),
            ]
        );
        // Without a usable FWHM the halo is the kernel's half width, and the threshold is not raised.
        let bare = SaturationHalo::new(&input_mask, f64::NAN);
        assert_eq!((bare.radius, bare.extra_snr), (HALF as f64, 0.0));
    }

    /// The peaks searched band by band as the significance's rows come (each search up to
    /// `rows_searchable`) are the whole plane's, whatever the bands: a peak's window straddles their edges.
    #[test]
    fn peaks_searched_in_bands_are_the_whole_planes() {
        use rand::{Rng, SeedableRng};
        let (nx, ny) = (61, 97);
        let mut rng = rand_pcg::Pcg64::seed_from_u64(15);
        // Noise of σ 1.6 and a few masked pixels: hundreds of peaks above 3, many on the bands' edges.
        let snr: Vec<f32> = (0..nx * ny)
            .map(|_| rng.random_range(-4.0f32..4.0))
            .collect();
        let mask: Vec<u8> = (0..nx * ny).map(|i| (i % 53 == 0) as u8).collect();
        let all_rows: Vec<&[f32]> = snr.chunks(nx).collect();
        let whole = peaks_in_rows(&all_rows, &mask, nx, ny, 0..ny, 3.0);
        assert!(whole.len() > 100, "{}", whole.len());
        for band in [1, 2, 3, 10, 37, 96, 97] {
            let (mut peaks, mut searched, mut known) = (Vec::new(), 0, 0);
            while known < ny {
                known = (known + band).min(ny);
                let reach = rows_searchable(known, ny);
                let rows: Vec<&[f32]> = snr[..known * nx].chunks(nx).collect();
                peaks.extend(peaks_in_rows(&rows, &mask, nx, ny, searched..reach, 3.0));
                searched = searched.max(reach);
            }
            assert_eq!(peaks, whole, "bands of {band} rows");
        }
    }
}
