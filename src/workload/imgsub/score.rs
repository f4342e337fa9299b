//! A subtraction scored against a generated field's truth table (`astroport subtract --truth truth.csv`),
//! with the measures of research/imgsub.md §4, so our figures sit beside HOTPANTS' and SFFT's:
//!
//! - **sky-noise ratio:** the standard deviation of D/√VD (clipped at 5σ) over unmasked pixels away from
//!   every source (5 px plus 2.5 px per decade of reference flux above 10³ e-, 40 px around saturated
//!   stars, 5 px plus 5 half-light radii around galaxies): 1 when VD is the true noise;
//! - **static NRMS:** √(mean D²/VD) within 1.5 FWHM (of the science PSF) of bright static stars (reference
//!   flux ≥ 10⁴ e-, not saturated, no changer or galaxy within 15 px, no masked pixel in the aperture):
//!   1 when the subtraction leaves only noise;
//! - **recall:** changers (variables and transients) with a detection within 2.5 px, of all and of those
//!   with S/N ≥ 7;
//! - **false positives:** detections with no changer within 2.5 px, counted apart when a saturated pixel of
//!   either input lies within 25 px (cosmic rays are counted apart too: they are real in the science image);
//! - **PSF photometry:** (F − change)/|change| at the true places of changers with S/N ≥ 7 that are not
//!   saturated: its median (bias) and median absolute deviation.

use super::field::saturated_within;
use super::median;
use super::psf::psf_flux;
use super::subtract::Subtraction;
use crate::inputs::{csv_rows, io_error, InputError};
use rayon::prelude::*;
use serde::Serialize;
use std::path::Path;

/// One row of `truth.csv` as the scoring needs it.
#[derive(Debug, Clone)]
pub struct TruthRow {
    pub kind: String,
    pub x: f64,
    pub y: f64,
    pub reference_flux: f64,
    pub change: f64,
    pub change_snr: f64,
    pub saturated: bool,
    pub half_light_radius: Option<f64>,
}

impl TruthRow {
    fn is_changer(&self) -> bool {
        self.kind == "variable" || self.kind == "transient"
    }
}

/// Reads `truth.csv` as `astroport field` writes it.
pub fn read_truth(path: &Path) -> Result<Vec<TruthRow>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let file = path.display().to_string();
    const COLUMNS: [&str; 8] = [
        "kind",
        "x",
        "y",
        "reference_flux",
        "change",
        "change_snr",
        "saturated",
        "half_light_radius",
    ];
    let (index, rows) = csv_rows(&text, &file, |line, header| {
        COLUMNS
            .iter()
            .map(|c| {
                header.iter().position(|h| h == *c).ok_or_else(|| InputError::Csv {
                    file: file.clone(),
                    message: format!("line {line}: no column '{c}' (is this a truth.csv of astroport field?)"),
                })
            })
            .collect::<Result<Vec<usize>, InputError>>()
    })?;
    rows.iter()
        .map(|(line, r)| {
            let number = |k: usize| -> Result<f64, InputError> {
                let text = &r[index[k]];
                text.parse::<f64>().map_err(|_| InputError::Csv {
                    file: file.clone(),
                    message: format!(
                        "line {line}: column {} = '{text}' is not a number",
                        COLUMNS[k]
                    ),
                })
            };
            Ok(TruthRow {
                kind: r[index[0]].to_string(),
                x: number(1)?,
                y: number(2)?,
                reference_flux: number(3)?,
                change: number(4)?,
                change_snr: number(5)?,
                saturated: number(6)? != 0.0,
                half_light_radius: number(7).ok(),
            })
        })
        .collect()
}

/// The scores (module docs).
#[derive(Debug, Clone, Serialize)]
pub struct Quality {
    pub sky_noise_ratio: f64,
    pub sky_pixels: usize,
    pub static_nrms: f64,
    pub static_stars: usize,
    pub changers: usize,
    pub recovered: usize,
    pub changers_snr7: usize,
    pub recovered_snr7: usize,
    /// The S/N ≥ 7 changers missed: (x, y, change, S/N).
    pub missed_snr7: Vec<(f64, f64, f64, f64)>,
    pub false_positives: usize,
    pub false_positives_saturated: usize,
    pub cosmic_rays_detected: usize,
    pub photometry_stars: usize,
    pub photometry_bias: f64,
    pub photometry_mad: f64,
}

/// Two samples' (count, mean, sum of squared deviations) as one (Chan, Golub & LeVeque 1979).
fn merge_moments(a: (f64, f64, f64), b: (f64, f64, f64)) -> (f64, f64, f64) {
    let n = a.0 + b.0;
    if n == 0.0 {
        return a;
    }
    let delta = b.1 - a.1;
    (
        n,
        a.1 + delta * b.0 / n,
        a.2 + b.2 + delta * delta * a.0 * b.0 / n,
    )
}

/// Scores `sub` against `truth`; `input_mask` is the union of the two input masks (before growing).
pub fn score(sub: &Subtraction, truth: &[TruthRow], input_mask: &[u8]) -> Quality {
    let (nx, ny) = (sub.nx, sub.ny);
    let near =
        |a: (f64, f64), b: (f64, f64), r: f64| (a.0 - b.0).powi(2) + (a.1 - b.1).powi(2) <= r * r;
    // Pixels away from every source: each source's disc marked over the rows it covers, rows in parallel
    // (sources sorted by their first row, so a row looks only at those that can reach it).
    let reach = |s: &TruthRow| {
        if s.kind == "galaxy" {
            5.0 + 5.0 * s.half_light_radius.unwrap_or(3.0)
        } else if s.saturated || s.reference_flux > 3e5 {
            40.0
        } else {
            5.0 + 2.5 * (s.reference_flux / 1e3).max(1.0).log10()
        }
    };
    let mut discs: Vec<(f64, f64, f64)> = truth.iter().map(|s| (s.x, s.y, reach(s))).collect();
    discs.sort_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2)));
    let widest = discs.iter().map(|d| d.2).fold(0.0, f64::max);
    // Per row: its free pixels (a row-long scratch per thread, not a plane: at 10k the pixels are 10⁸), then
    // the count, mean and squared deviations of their clipped D/√VD, merged in row order below
    // (deterministic, and stable: Chan et al.'s pairwise update).
    let rows: Vec<(f64, f64, f64)> = (0..ny)
        .into_par_iter()
        .map_init(
            || vec![false; nx],
            |busy, y| {
                busy.fill(false);
                let yf = y as f64;
                // Discs whose top edge is above this row and whose centre is within the widest reach of it.
                let first = discs.partition_point(|d| d.1 - d.2 < yf - 2.0 * widest - 1.0);
                for &(sx, sy, r) in discs[first..].iter().take_while(|d| d.1 - d.2 <= yf) {
                    let dy2 = (yf - sy).powi(2);
                    if dy2 > r * r {
                        continue;
                    }
                    let (x0, x1) = (
                        (sx - r).floor().max(0.0) as usize,
                        ((sx + r).ceil().max(0.0) as usize).min(nx - 1),
                    );
                    for (x, b) in busy.iter_mut().enumerate().take(x1 + 1).skip(x0) {
                        if (x as f64 - sx).powi(2) + dy2 <= r * r {
                            *b = true;
                        }
                    }
                }
                let at = y * nx;
                let chi = (0..nx)
                    .filter(|&x| !busy[x] && sub.mask[at + x] == 0 && sub.variance[at + x] > 0.0)
                    .map(|x| sub.diff[at + x] as f64 / (sub.variance[at + x] as f64).sqrt())
                    .filter(|c| c.abs() <= 5.0);
                let (n, sum) = chi.clone().fold((0.0, 0.0), |(n, s), c| (n + 1.0, s + c));
                let mean = if n > 0.0 { sum / n } else { 0.0 };
                (n, mean, chi.map(|c| (c - mean).powi(2)).sum())
            },
        )
        .collect();
    let (sky_pixels, _, squares) = rows.into_iter().fold((0.0, 0.0, 0.0), merge_moments);
    let sky_noise_ratio = (squares / sky_pixels.max(2.0)).sqrt();
    // Static NRMS.
    let aperture = 1.5 * sub.psf.summary().fwhm_centre;
    let mut chi2 = Vec::new();
    let mut static_stars = 0;
    // Changers and galaxies, by row, for the crowding test (the truth has 2·10⁵ stars at 10k).
    let mut crowders: Vec<(f64, f64)> = truth
        .iter()
        .filter(|o| o.is_changer() || o.kind == "galaxy")
        .map(|o| (o.x, o.y))
        .collect();
    crowders.sort_by(|a, b| a.1.total_cmp(&b.1));
    for s in truth
        .iter()
        .filter(|s| s.kind == "star" && !s.saturated && s.reference_flux >= 1e4)
    {
        let first = crowders.partition_point(|o| o.1 < s.y - 15.0);
        let crowded = crowders[first..]
            .iter()
            .take_while(|o| o.1 <= s.y + 15.0)
            .any(|&o| near(o, (s.x, s.y), 15.0));
        if crowded {
            continue;
        }
        let mut values = Vec::new();
        let mut clean = true;
        let r = aperture.ceil() as i64;
        for j in -r..=r {
            for i in -r..=r {
                let (x, y) = (s.x.round() as i64 + i, s.y.round() as i64 + j);
                if !near((x as f64, y as f64), (s.x, s.y), aperture) {
                    continue;
                }
                if x < 0 || y < 0 || x >= nx as i64 || y >= ny as i64 {
                    clean = false;
                    continue;
                }
                let at = y as usize * nx + x as usize;
                if sub.mask[at] != 0 || sub.variance[at].is_nan() || sub.variance[at] <= 0.0 {
                    clean = false;
                    continue;
                }
                values.push((sub.diff[at] as f64).powi(2) / sub.variance[at] as f64);
            }
        }
        if clean {
            static_stars += 1;
            chi2.extend(values);
        }
    }
    let static_nrms = (chi2.iter().sum::<f64>() / chi2.len().max(1) as f64).sqrt();
    // Recall and false positives.
    let changers: Vec<&TruthRow> = truth.iter().filter(|s| s.is_changer()).collect();
    let found = |s: &TruthRow| {
        sub.detections
            .iter()
            .any(|d| near((d.x, d.y), (s.x, s.y), 2.5))
    };
    let recovered = changers.iter().filter(|s| found(s)).count();
    let bright: Vec<&&TruthRow> = changers.iter().filter(|s| s.change_snr >= 7.0).collect();
    let missed_snr7: Vec<(f64, f64, f64, f64)> = bright
        .iter()
        .filter(|s| !found(s))
        .map(|s| (s.x, s.y, s.change, s.change_snr))
        .collect();
    let saturated_near = |x: f64, y: f64| {
        saturated_within(input_mask, nx, ny, x.round() as i64, y.round() as i64, 25.0)
    };
    let (mut fp, mut fp_sat, mut cosmic) = (0, 0, 0);
    for d in &sub.detections {
        if changers.iter().any(|s| near((d.x, d.y), (s.x, s.y), 2.5)) {
            continue;
        }
        if truth
            .iter()
            .any(|s| s.kind == "cosmic_ray" && near((d.x, d.y), (s.x, s.y), 2.5))
        {
            cosmic += 1;
        } else if saturated_near(d.x, d.y) {
            fp_sat += 1;
        } else {
            fp += 1;
        }
    }
    // PSF photometry at the true places.
    let mut rel: Vec<f64> = bright
        .iter()
        .filter(|s| !s.saturated)
        .filter_map(|s| {
            psf_flux(&sub.psf, &sub.planes(), s.x, s.y)
                .map(|f| (f.flux - s.change) / s.change.abs())
        })
        .collect();
    let photometry_stars = rel.len();
    let bias = median(&mut rel);
    let mut dev: Vec<f64> = rel.iter().map(|r| (r - bias).abs()).collect();
    Quality {
        sky_noise_ratio,
        sky_pixels: sky_pixels as usize,
        static_nrms,
        static_stars,
        changers: changers.len(),
        recovered,
        changers_snr7: bright.len(),
        recovered_snr7: bright.len() - missed_snr7.len(),
        missed_snr7,
        false_positives: fp,
        false_positives_saturated: fp_sat,
        cosmic_rays_detected: cosmic,
        photometry_stars,
        photometry_bias: bias,
        photometry_mad: median(&mut dev),
    }
}

#[cfg(test)]
mod tests {
    use super::merge_moments;

    /// Moments merged part by part (empty parts included) equal the two-pass mean and squared deviations
    /// of the whole sample.
    #[test]
    fn merged_moments_equal_the_whole_samples() {
        let values: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 613) as f64 * 0.01 - 3.0)
            .collect();
        let moments = |part: &[f64]| {
            let n = part.len() as f64;
            let mean = if n > 0.0 {
                part.iter().sum::<f64>() / n
            } else {
                0.0
            };
            (
                n,
                mean,
                part.iter().map(|v| (v - mean).powi(2)).sum::<f64>(),
            )
        };
        let whole = moments(&values);
        let merged = [0, 0, 17, 300, 301, 640, 1000]
            .windows(2)
            .map(|w| moments(&values[w[0]..w[1]]))
            .fold((0.0, 0.0, 0.0), merge_moments);
        assert_eq!(merged.0, whole.0);
        assert!((merged.1 - whole.1).abs() < 1e-12, "{merged:?} {whole:?}");
        assert!(
            (merged.2 - whole.2).abs() < 1e-9 * whole.2,
            "{merged:?} {whole:?}"
        );
    }
}
