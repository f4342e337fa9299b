//! The `cpu` model: the f64 reference and a float32 contender, from the same prepared series as the kernels.
//!
//! Both produce astropy's 'standard' power from the six weighted sums of cl/common/lombscargle.h. The f64
//! path reduces f t in f64 (|f t| < 2^30 cycles leaves ~1e-7 of a cycle's 2^-53 relative rounding: far below
//! the 1e-9 contract) and uses std's sin_cos. The float32 path uses the kernels' exact 64-bit fixed-point
//! phase and a polynomial sincos over 8 frequency lanes, so it vectorises.

use super::device::{phase_fixed, FixedPoint};
use super::{FrequencyGrid, Prepared, SignalModel};

/// Points summed plainly before a compensated add into the totals (mirrors LS_GROUP).
const CHUNK: usize = 256;
/// Frequencies per float32 inner loop (one AVX2 register of f32).
const LANES: usize = 8;

/// astropy 'standard' power from the six sums (weights sum to 1, sum w y^2 = 1), in the sums' precision
/// (float32 mirrors the kernels' finish, LS_POWER in the header).
macro_rules! standard_power {
    ($name:ident, $t:ty) => {
        pub fn $name(sums: [$t; 6], model: SignalModel) -> $t {
            let [yc, ys, mut c, mut s, cc, cs] = sums;
            if model == SignalModel::FixedMean {
                c = 0.0;
                s = 0.0;
            }
            let ccp = cc - c * c;
            let ssp = 1.0 - cc - s * s;
            let csp = cs - c * s;
            let d = ccp * ssp - csp * csp;
            if d > 0.0 {
                (ssp * yc * yc + ccp * ys * ys - 2.0 * csp * yc * ys) / d
            } else {
                0.0
            }
        }
    };
}
standard_power!(standard_power, f64);
standard_power!(standard_power_f32, f32);

/// A first-order bound on the error of the standard power when each sum is off by at most: `yc`, `ys` by
/// `e_y`; `c`, `s` by `e_w` (floating mean only); `cc`, `cs` by `e_2`. Small where the fit is well
/// conditioned (about the errors themselves); large where the determinant of the fit is small (near f = 0,
/// aliases of the sampling), which is where a NUFFT bin must be recomputed directly.
pub fn power_error_bound(sums: [f64; 6], model: SignalModel, e_y: f64, e_w: f64, e_2: f64) -> f64 {
    let [yc, ys, mut c, mut s, cc, cs] = sums;
    let floating = model == SignalModel::FloatingMean;
    if !floating {
        c = 0.0;
        s = 0.0;
    }
    let ccp = cc - c * c;
    let ssp = 1.0 - cc - s * s;
    let csp = cs - c * s;
    let d = ccp * ssp - csp * csp;
    if d.is_nan() || d <= 0.0 {
        return f64::INFINITY;
    }
    let p = (ssp * yc * yc + ccp * ys * ys - 2.0 * csp * yc * ys) / d;
    // dP = (dN − P dd)/d, through ccp, ssp and csp.
    let g_ccp = (ys * ys - p * ssp) / d;
    let g_ssp = (yc * yc - p * ccp) / d;
    let g_csp = 2.0 * (p * csp - yc * ys) / d;
    let d_yc = 2.0 * (ssp * yc - csp * ys) / d;
    let d_ys = 2.0 * (ccp * ys - csp * yc) / d;
    let d_cc = g_ccp - g_ssp;
    let d_cs = g_csp;
    let mut bound = e_y * (d_yc.abs() + d_ys.abs()) + e_2 * (d_cc.abs() + d_cs.abs());
    if floating {
        let d_c = -2.0 * c * g_ccp - s * g_csp;
        let d_s = -2.0 * s * g_ssp - c * g_csp;
        bound += e_w * (d_c.abs() + d_s.abs());
    }
    bound
}

/// f64 power of one prepared curve at frequency `f`.
pub fn power_f64(curve: &Prepared, f: f64, model: SignalModel) -> f64 {
    let mut total = [0.0f64; 6];
    for chunk in (0..curve.t.len()).step_by(CHUNK) {
        let mut part = [0.0f64; 6];
        for j in chunk..(chunk + CHUNK).min(curve.t.len()) {
            let x = f * curve.t[j];
            let (s, c) = (std::f64::consts::TAU * (x - x.round())).sin_cos();
            let (wy, w) = (curve.wy[j], curve.w[j]);
            part[0] += wy * c;
            part[1] += wy * s;
            part[2] += w * c;
            part[3] += w * s;
            part[4] += w * c * c;
            part[5] += w * c * s;
        }
        for (t, p) in total.iter_mut().zip(part) {
            *t += p;
        }
    }
    standard_power(total, model)
}

/// sin and cos of 2 pi u for u in [-0.5, 0.5) turns: fold to [-1/4, 1/4], Taylor to degree 11 (error below
/// 6e-8 at pi/2, the float32 rounding level). Branch-free so the lane loop vectorises.
#[inline(always)]
fn sincos_turns(u: f32) -> (f32, f32) {
    #[inline(always)]
    fn sin_quarter(u: f32) -> f32 {
        // fold [-1/2, 1/2) onto [-1/4, 1/4] with sin(2 pi u) = sin(2 pi (+-1/2 - u))
        let a = if u > 0.25 {
            0.5 - u
        } else if u < -0.25 {
            -0.5 - u
        } else {
            u
        };
        let x = a * std::f32::consts::TAU;
        let x2 = x * x;
        let p = -1.0 / 39_916_800.0f32;
        let p = p * x2 + 1.0 / 362_880.0;
        let p = p * x2 - 1.0 / 5_040.0;
        let p = p * x2 + 1.0 / 120.0;
        let p = p * x2 - 1.0 / 6.0;
        x + x * x2 * p
    }
    let v = u + 0.25;
    let v = if v >= 0.5 { v - 1.0 } else { v };
    (sin_quarter(u), sin_quarter(v))
}

/// Turns in [-0.5, 0.5) from a phase in units of 2^-32 cycles (signed reinterpretation: exact below 2^24
/// steps of 2^-32... rounded to float32's 24 bits, 6e-8 cycles).
#[inline(always)]
fn turns(phase: u32) -> f32 {
    (phase as i32) as f32 * (1.0 / 4_294_967_296.0)
}

/// A prepared curve as the float32 path reads it: fixed-point times and float32 weights, built once per
/// curve and run, not per block of frequencies.
pub struct Series32 {
    times: Vec<u64>,
    wy: Vec<f32>,
    w: Vec<f32>,
}

impl Series32 {
    pub fn new(curve: &Prepared, fixed: FixedPoint) -> Series32 {
        Series32 {
            times: curve.t.iter().map(|&t| fixed.time(t)).collect(),
            wy: curve.wy.iter().map(|&x| x as f32).collect(),
            w: curve.w.iter().map(|&x| x as f32).collect(),
        }
    }
}

/// Float32 powers of one curve over `grid[k0..k1]`: exact fixed-point phases (as the kernels), f32 sincos
/// and sums, compensated chunk adds.
pub fn powers_f32(
    series: &Series32,
    grid: &FrequencyGrid,
    k0: usize,
    k1: usize,
    fixed: FixedPoint,
    model: SignalModel,
) -> Vec<f32> {
    let Series32 { times, wy, w } = series;
    let mut out = Vec::with_capacity(k1 - k0);
    let mut k = k0;
    while k < k1 {
        let lanes = LANES.min(k1 - k);
        // Phase of lane l at point j: uniform grids step by the per-point phase of df; given grids multiply.
        let freqs: [u64; LANES] =
            std::array::from_fn(|l| fixed.frequency(grid.frequency(k + l.min(lanes - 1))));
        let uniform = matches!(grid, FrequencyGrid::Uniform { .. });
        let df = match grid {
            FrequencyGrid::Uniform { df, .. } => fixed.frequency(*df),
            FrequencyGrid::Given(_) => 0,
        };
        let mut total = [[0.0f32; LANES]; 6];
        let mut comp = [[0.0f32; LANES]; 6];
        for chunk in (0..times.len()).step_by(CHUNK) {
            let mut part = [[0.0f32; LANES]; 6];
            for j in chunk..(chunk + CHUNK).min(times.len()) {
                let t = times[j];
                let phases: [u32; LANES] = if uniform {
                    let p0 = phase_fixed(t, freqs[0]);
                    let step = phase_fixed(t, df);
                    std::array::from_fn(|l| p0.wrapping_add(step.wrapping_mul(l as u32)))
                } else {
                    std::array::from_fn(|l| phase_fixed(t, freqs[l]))
                };
                let (wyj, wj) = (wy[j], w[j]);
                for l in 0..LANES {
                    let (s, c) = sincos_turns(turns(phases[l]));
                    let wc = wj * c;
                    part[0][l] += wyj * c;
                    part[1][l] += wyj * s;
                    part[2][l] += wc;
                    part[3][l] += wj * s;
                    part[4][l] += wc * c;
                    part[5][l] += wc * s;
                }
            }
            for q in 0..6 {
                for l in 0..LANES {
                    let y = part[q][l] - comp[q][l];
                    let s = total[q][l] + y;
                    comp[q][l] = (s - total[q][l]) - y;
                    total[q][l] = s;
                }
            }
        }
        #[allow(clippy::needless_range_loop)] // l indexes the inner arrays of `total`
        for l in 0..lanes {
            out.push(standard_power_f32(
                std::array::from_fn(|q| total[q][l]),
                model,
            ));
        }
        k += lanes;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_sincos_is_float32_accurate() {
        let mut worst = 0.0f64;
        for i in 0..100_000 {
            let u = -0.5 + i as f64 / 100_000.0;
            let (s, c) = sincos_turns(u as f32);
            let (es, ec) = (std::f64::consts::TAU * u).sin_cos();
            worst = worst.max((s as f64 - es).abs()).max((c as f64 - ec).abs());
        }
        assert!(worst < 3e-7, "worst sincos error {worst}");
    }
}
