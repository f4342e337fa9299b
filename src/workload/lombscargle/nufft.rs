//! The periodogram's trigonometric sums as type-1 non-uniform FFTs, O(N + N_f log N_f) (the method of
//! nifty-ls, Garrison et al. 2024, over FINUFFT's "exponential of semicircle" kernel, Barnett et al. 2019).
//!
//! On a uniform grid f_k = f0 + k df every sum the power needs is Σ_j c_j e^{2πi f_k t_j}:
//! - S_y(f) = Σ wy_j e^{2πi f t_j} gives YC and YS;
//! - S_w(f) = Σ w_j e^{2πi f t_j} gives C and S (floating mean only);
//! - S_w(2f) gives CC = (1 + Re S_w(2f))/2 and CS = Im S_w(2f)/2 (the weights sum to 1).
//!
//! With the mid-grid frequency f_c = f0 + ⌊M/2⌋ df, S(f_k) = Σ_j (c_j e^{2πi f_c t_j}) e^{2πi k' u_j / n}
//! for k' = k − ⌊M/2⌋ and u_j = n frac(df t_j): a type-1 NUFFT of M modes on a fine grid of n ≥ 2M cells.
//! Each point is spread onto `width` cells by the kernel φ(z) = exp(β(√(1−z²) − 1)); the fine grid is
//! transformed by one FFT; mode k' is the FFT's bin divided by the kernel's Fourier transform at k'.
//! S_w(2f) is the same transform of the points 2u_j with the strengths w_j e^{2πi 2f_c t_j}.
//!
//! The CPU path here is the `cpu` model's nufft mode: rayon over chunks of points (each into a private window
//! of the fine grid, added in chunk order, so results do not depend on the thread count) and rustfft.

use super::cpu::{power_error_bound, power_f64, standard_power};
use super::{FrequencyGrid, Prepared, SignalModel};
use rayon::prelude::*;
use rustfft::num_complex::Complex64;
use std::f64::consts::TAU;

/// Widest kernel (cells per point): 16 reaches the float64 rounding floor.
pub const MAX_WIDTH: usize = 16;
/// Largest degree of the kernel's per-tap polynomials.
const MAX_DEGREE: usize = 24;
/// Points per spreading chunk: enough to amortise a window, small enough to balance threads.
const CHUNK: usize = 4096;

/// The spreading kernel for a tolerance: its width, shape and a Chebyshev fit of each tap as a function of
/// the point's offset within its first cell, so spreading evaluates polynomials rather than exp and sqrt.
#[derive(Debug, Clone)]
pub struct SpreadKernel {
    pub width: usize,
    pub beta: f64,
    /// Chebyshev coefficients, `coeffs[d][i]` for degree d and tap i, in v = 2s − 1 (s the offset in [0, 1)).
    pub coeffs: Vec<[f64; MAX_WIDTH]>,
}

impl SpreadKernel {
    /// FINUFFT's rule for an upsampling factor of 2: width ⌈log10(1/ε)⌉ + 1 cells, β = 2.30 per cell. A
    /// transform's error is then below 10^-(width-1) of the sum of its strengths' magnitudes
    /// ([`Plan::sum_error`]; measured 5–50 times below that, tests/type1_matches_the_direct_sum).
    pub fn for_tolerance(tolerance: f64) -> Result<SpreadKernel, String> {
        if !(tolerance > 0.0 && tolerance < 1.0) {
            return Err(format!(
                "tolerance {tolerance:?} must be in (0, 1) (e.g. 1e-9)"
            ));
        }
        let width = ((1.0 / tolerance).log10().ceil() as usize + 1).clamp(2, MAX_WIDTH);
        let beta = 2.30 * width as f64;
        // The fit's own error stays a decade under the tolerance (φ's edges have an infinite slope where
        // φ = e^{-β}, so no polynomial fits them much closer than that).
        let target = fit_target(tolerance, beta);
        let mut kernel = SpreadKernel {
            width,
            beta,
            coeffs: Vec::new(),
        };
        for degree in width..=MAX_DEGREE {
            kernel.coeffs = chebyshev_fit(width, beta, degree);
            if kernel.fit_error() <= target || degree == MAX_DEGREE {
                break;
            }
        }
        Ok(kernel)
    }

    /// The kernel at z in [−1, 1] (0 outside).
    pub fn phi(&self, z: f64) -> f64 {
        exp_semicircle(z, self.beta)
    }

    /// The weights of taps 0..W (W = width) for a point whose first cell is s ∈ [0, 1) cells to its right.
    #[inline(always)]
    pub fn taps<const W: usize>(&self, s: f64) -> [f64; W] {
        let v = 2.0 * s - 1.0;
        let (mut b1, mut b2) = ([0.0; W], [0.0; W]);
        // Clenshaw's recurrence, the taps side by side so the loop vectorises.
        for c in self.coeffs[1..].iter().rev() {
            let mut b0 = [0.0; W];
            for i in 0..W {
                b0[i] = c[i] + 2.0 * v * b1[i] - b2[i];
            }
            b2 = b1;
            b1 = b0;
        }
        std::array::from_fn(|i| self.coeffs[0][i] + v * b1[i] - b2[i])
    }

    /// Largest difference between the fitted taps and the kernel, over a dense set of offsets.
    fn fit_error(&self) -> f64 {
        let half = self.width as f64 / 2.0;
        (0..=512)
            .map(|q| {
                let s = q as f64 / 512.0 * (1.0 - 1e-12);
                let taps = self.taps::<MAX_WIDTH>(s);
                (0..self.width)
                    .map(|i| (taps[i] - self.phi((i as f64 + s - half) / half)).abs())
                    .fold(0.0, f64::max)
            })
            .fold(0.0, f64::max)
    }
}

/// Gauss-Legendre nodes z > 0 and weights times φ(z), for ∫_{−1}^{1} φ(z) cos(a z) dz = Σ w φ(z) cos(a z)
/// (φ is even, so the weights are doubled). 2·width + 16 nodes: exact for the polynomial part to degree
/// 4 width + 31, far past φ's smoothness at these widths.
pub fn quadrature(kernel: &SpreadKernel) -> Vec<(f64, f64)> {
    let order = 2 * kernel.width + 16;
    crate::workload::sht::grid::gauss_legendre_nodes(order)
        .into_iter()
        .map(|g| (g.theta.cos(), g.weight))
        .filter(|&(z, _)| z > 0.0)
        .map(|(z, w)| (z, 2.0 * w * kernel.phi(z)))
        .collect()
}

/// The fine grid and kernel of a transform of `modes` modes to `tolerance`: n ≥ 2·modes cells, 2, 3 and 5
/// its only factors. Both models' plans start here.
pub fn geometry(modes: usize, tolerance: f64) -> Result<(usize, SpreadKernel), String> {
    let kernel = SpreadKernel::for_tolerance(tolerance)?;
    let fine = smooth_length((2 * modes).max(2 * kernel.width));
    Ok((fine, kernel))
}

/// The bound a kernel of this width puts on each transformed sum, relative to Σ|c_j|: 10^-(width-1).
pub fn sum_error(width: usize) -> f64 {
    10f64.powi(1 - width as i32)
}

/// Points of the correction table computed from one exact seed; the phasors are rotated in between (the
/// rounding of 1024 rotations stays near 1e-13).
const SEED_EVERY: usize = 1024;

/// 2/(w ∫_{−1}^{1} φ(z) cos(k a z) dz) for k = 0..count: the factor that turns FFT bin k' of the fine grid into
/// mode k'. Gauss-Legendre on z > 0 (φ is even) with φ(z_q) taken once per node, and e^{i k a z_q} by rotation.
fn corrections(kernel: &SpreadKernel, count: usize, a: f64) -> Vec<f64> {
    let nodes = quadrature(kernel);
    let scale = 2.0 / kernel.width as f64;
    let blocks: Vec<usize> = (0..count).step_by(SEED_EVERY).collect();
    blocks
        .par_iter()
        .flat_map_iter(|&k0| {
            let k1 = (k0 + SEED_EVERY).min(count);
            let mut phasor: Vec<Complex64> = nodes
                .iter()
                .map(|&(z, _)| Complex64::from_polar(1.0, k0 as f64 * a * z))
                .collect();
            let step: Vec<Complex64> = nodes
                .iter()
                .map(|&(z, _)| Complex64::from_polar(1.0, a * z))
                .collect();
            let nodes = &nodes;
            (k0..k1).map(move |_| {
                let mut sum = 0.0;
                for ((p, s), &(_, w)) in phasor.iter_mut().zip(&step).zip(nodes) {
                    sum += w * p.re;
                    *p *= s;
                }
                scale / sum
            })
        })
        .collect()
}

/// What the per-tap polynomials must reach: a decade under the tolerance, but not below the kink of φ's
/// edges (2e^{-β}) nor the rounding level.
fn fit_target(tolerance: f64, beta: f64) -> f64 {
    (tolerance * 0.1).max(2.0 * (-beta).exp()).max(1e-15)
}

/// φ(z) = exp(β(√(1 − z²) − 1)) on |z| < 1, else 0 (`ls_nufft_phi` in cl/common/ls_nufft.h).
fn exp_semicircle(z: f64, beta: f64) -> f64 {
    if z.abs() >= 1.0 {
        0.0
    } else {
        (beta * ((1.0 - z * z).sqrt() - 1.0)).exp()
    }
}

/// Chebyshev interpolation of each tap's weight φ((i + s − w/2)/(w/2)) on s ∈ [0, 1] at `degree` + 1 nodes.
fn chebyshev_fit(width: usize, beta: f64, degree: usize) -> Vec<[f64; MAX_WIDTH]> {
    let n = degree + 1;
    let half = width as f64 / 2.0;
    let phi = |z: f64| exp_semicircle(z, beta);
    let nodes: Vec<f64> = (0..n)
        .map(|q| (std::f64::consts::PI * (q as f64 + 0.5) / n as f64).cos())
        .collect();
    let mut coeffs = vec![[0.0; MAX_WIDTH]; n];
    for (d, row) in coeffs.iter_mut().enumerate() {
        for (i, c) in row.iter_mut().enumerate().take(width) {
            let sum: f64 = nodes
                .iter()
                .enumerate()
                .map(|(q, &v)| {
                    let s = (v + 1.0) / 2.0;
                    phi((i as f64 + s - half) / half)
                        * (std::f64::consts::PI * d as f64 * (q as f64 + 0.5) / n as f64).cos()
                })
                .sum();
            *c = sum * if d == 0 { 1.0 } else { 2.0 } / n as f64;
        }
    }
    coeffs
}

/// The cells of a point at u ∈ [0, n) under a kernel `width` cells wide: its first cell l0 (may be negative:
/// cells wrap) and the offset s = l0 − (u − width/2) ∈ [0, 1).
#[inline(always)]
pub fn first_cell(u: f64, width: usize) -> (i64, f64) {
    let left = u - width as f64 / 2.0;
    let l0 = left.ceil();
    (l0 as i64, l0 - left)
}

/// The position in cells of a point at time t on a fine grid of n cells for the sums at f (u = n frac(df t))
/// and at 2f (2u mod n).
#[inline(always)]
pub fn positions(t: f64, df: f64, fine: usize) -> (f64, f64) {
    let x = turns(df, t);
    let fine = fine as f64;
    (x * fine, (2.0 * x - (2.0 * x).floor()) * fine)
}

/// The smallest n ≥ `at_least` whose only prime factors are 2, 3 and 5 (the FFTs' fast lengths).
pub fn smooth_length(at_least: usize) -> usize {
    let mut n = at_least.max(2);
    loop {
        let mut m = n;
        for p in [2, 3, 5] {
            while m.is_multiple_of(p) {
                m /= p;
            }
        }
        if m == 1 {
            return n;
        }
        n += 1;
    }
}

/// A type-1 NUFFT of `modes` modes, made once and used for every curve of that many frequencies (as a
/// FINUFFT plan): the fine grid's size, the kernel, the deconvolution factors, the FFT (rustfft's plan holds
/// its twiddles) and a pool of fine grids, so repeated transforms neither re-plan nor fault in fresh memory.
pub struct Plan {
    pub modes: usize,
    pub fine: usize,
    pub kernel: SpreadKernel,
    /// 1/(φ̂(k') / h) for |k'| = 0..=modes/2: what turns an FFT bin into a mode.
    pub correction: Vec<f64>,
    fft: std::sync::Arc<dyn rustfft::Fft<f64>>,
    pool: std::sync::Mutex<Vec<Vec<Complex64>>>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("modes", &self.modes)
            .field("fine", &self.fine)
            .field("width", &self.kernel.width)
            .finish()
    }
}

impl Plan {
    pub fn new(modes: usize, tolerance: f64) -> Result<Plan, String> {
        let (fine, kernel) = geometry(modes, tolerance)?;
        // φ̂(k') = (w h / 2) ∫ φ(z) e^{i k' (w h/2) z} dz with h = 2π/n, so h/φ̂ = 2/(w ∫...).
        let a = std::f64::consts::PI * kernel.width as f64 / fine as f64;
        let (correction, fft) = rayon::join(
            || corrections(&kernel, modes / 2 + 1, a),
            || rustfft::FftPlanner::<f64>::new().plan_fft_inverse(fine),
        );
        Ok(Plan {
            modes,
            fine,
            kernel,
            correction,
            fft,
            pool: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The bound this plan's kernel puts on each transformed sum, relative to Σ|c_j|: 10^-(width-1).
    pub fn sum_error(&self) -> f64 {
        sum_error(self.kernel.width)
    }

    /// A fine grid or FFT scratch of `len` values (zeroed if `zero`), from the pool if one is there.
    fn take(&self, len: usize, zero: bool) -> Vec<Complex64> {
        let reused = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.iter()
                .position(|g| g.len() == len)
                .map(|i| pool.swap_remove(i))
        };
        match reused {
            Some(grid) if !zero => grid,
            Some(mut grid) => {
                grid.par_chunks_mut(1 << 16)
                    .for_each(|c| c.fill(Complex64::new(0.0, 0.0)));
                grid
            }
            // Fresh memory: its pages fault in on first write, once per plan thanks to the pool.
            None => vec![Complex64::new(0.0, 0.0); len],
        }
    }

    fn give_back(&self, grids: impl IntoIterator<Item = Vec<Complex64>>) {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(grids);
    }

    /// Transforms fine grids in place (the inverse DFT: bin k is Σ_l g_l e^{+2πi k l / n}).
    pub fn transform(&self, grids: &mut [Vec<Complex64>]) {
        // One scratch per concurrent transform, not per grid: a fresh one costs page faults.
        let scratch_len = self.fft.get_inplace_scratch_len();
        let lanes = rayon::current_num_threads().clamp(1, grids.len().max(1));
        let mut scratch: Vec<Vec<Complex64>> =
            (0..lanes).map(|_| self.take(scratch_len, false)).collect();
        grids
            .par_chunks_mut(grids.len().div_ceil(lanes).max(1))
            .zip(scratch.par_iter_mut())
            .for_each(|(gs, s)| {
                for g in gs {
                    self.fft.process_with_scratch(g, s);
                }
            });
        self.give_back(scratch);
    }

    /// Spreads `S` strengths per point at positions `u` (cells) onto S fine grids.
    pub fn spread<const S: usize>(
        &self,
        u: &[f64],
        strengths: &[[Complex64; S]],
    ) -> Vec<Vec<Complex64>> {
        // One compiled loop per width, so the taps are a fixed-size array the compiler vectorises.
        macro_rules! widths {
            ($($w:literal)*) => {
                match self.kernel.width {
                    $($w => self.spread_width::<$w, S>(u, strengths),)*
                    w => unreachable!("kernel width {w} outside 2..=MAX_WIDTH"),
                }
            };
        }
        widths!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    }

    fn spread_width<const W: usize, const S: usize>(
        &self,
        u: &[f64],
        strengths: &[[Complex64; S]],
    ) -> Vec<Vec<Complex64>> {
        let n = self.fine as i64;
        let width = W;
        // Each chunk spreads into a private window [lo, lo + len) of cells (taken mod n), then the windows are
        // added in chunk order: the sum does not depend on how rayon schedules the chunks.
        let windows: Vec<(i64, Vec<[Complex64; S]>)> = u
            .par_chunks(CHUNK)
            .zip(strengths.par_chunks(CHUNK))
            .map(|(u, c)| {
                let cells: Vec<(i64, f64)> = u.iter().map(|&u| first_cell(u, W)).collect();
                let lo = cells.iter().map(|c| c.0).min().unwrap_or(0);
                let hi = cells.iter().map(|c| c.0).max().unwrap_or(0) + width as i64;
                let len = (hi - lo) as usize;
                let mut window = vec![[Complex64::new(0.0, 0.0); S]; len];
                for (&(l0, s), c) in cells.iter().zip(c) {
                    let taps = self.kernel.taps::<W>(s);
                    let cells = &mut window[(l0 - lo) as usize..(l0 - lo) as usize + width];
                    for (cell, &tap) in cells.iter_mut().zip(&taps) {
                        for q in 0..S {
                            cell[q] += c[q] * tap;
                        }
                    }
                }
                (lo, window)
            })
            .collect();
        let mut grids: Vec<Vec<Complex64>> = (0..S).map(|_| self.take(self.fine, true)).collect();
        for (lo, window) in windows {
            for (i, v) in window.iter().enumerate() {
                let cell = (lo + i as i64).rem_euclid(n) as usize;
                for q in 0..S {
                    grids[q][cell] += v[q];
                }
            }
        }
        grids
    }

    /// Mode k (0..modes, frequency index; k' = k − ⌊modes/2⌋) from a transformed fine grid.
    #[inline(always)]
    pub fn mode(&self, transformed: &[Complex64], k: usize) -> Complex64 {
        let centred = k as i64 - (self.modes / 2) as i64;
        let bin = centred.rem_euclid(self.fine as i64) as usize;
        transformed[bin] * self.correction[centred.unsigned_abs() as usize]
    }
}

/// frac(f t) in [0, 1), exact to the rounding of the result: the product's rounding error is recovered by a
/// fused multiply-add and added after the integer part is removed.
#[inline(always)]
pub fn turns(f: f64, t: f64) -> f64 {
    let x = f * t;
    let err = f.mul_add(t, -x);
    let r = (x - x.floor()) + err;
    r - r.floor()
}

/// The standard powers of one curve on a uniform grid by NUFFT, in float64, each within `tolerance` of the
/// direct sums: the plan's sum error bound is propagated to every power ([`power_error_bound`]), and the
/// bins whose bound exceeds the tolerance are summed directly.
pub fn powers(
    curve: &Prepared,
    grid: &FrequencyGrid,
    model: SignalModel,
    plan: &Plan,
    tolerance: f64,
) -> Result<NufftPowers, String> {
    let FrequencyGrid::Uniform { f0, df, n: modes } = *grid else {
        return Err("the nufft method needs a uniform frequency grid".into());
    };
    debug_assert_eq!(modes, plan.modes);
    let centre = f0 + (modes / 2) as f64 * df;
    let floating = model == SignalModel::FloatingMean;
    // Positions in cells and strengths, for the sums at f (u) and at 2f (2u).
    // Position in cells of each point for the sums at f (u) and at 2f (2u mod n), and e^{2πi f_c t}.
    let points = curve.t.len();
    let (mut u, mut u2) = (vec![0.0; points], vec![0.0; points]);
    let mut phasor = vec![Complex64::new(0.0, 0.0); points];
    u.par_chunks_mut(CHUNK)
        .zip(u2.par_chunks_mut(CHUNK))
        .zip(phasor.par_chunks_mut(CHUNK))
        .zip(curve.t.par_chunks(CHUNK))
        .for_each(|(((u, u2), phasor), t)| {
            for j in 0..t.len() {
                (u[j], u2[j]) = positions(t[j], df, plan.fine);
                phasor[j] = Complex64::from_polar(1.0, TAU * turns(centre, t[j]));
            }
        });
    // e^{2πi 2 f_c t} is the square of e^{2πi f_c t} (to the rounding of one product).
    let at_2f: Vec<[Complex64; 1]> = phasor
        .iter()
        .zip(&curve.w)
        .map(|(p, &w)| [p * p * w])
        .collect();
    let (mut sums_f, mut sums_2f): (Vec<Vec<Complex64>>, Vec<Vec<Complex64>>) = if floating {
        let c: Vec<[Complex64; 2]> = phasor
            .iter()
            .zip(&curve.wy)
            .zip(&curve.w)
            .map(|((p, &wy), &w)| [p * wy, p * w])
            .collect();
        rayon::join(|| plan.spread(&u, &c), || plan.spread(&u2, &at_2f))
    } else {
        let c: Vec<[Complex64; 1]> = phasor
            .iter()
            .zip(&curve.wy)
            .map(|(p, &wy)| [p * wy])
            .collect();
        rayon::join(|| plan.spread(&u, &c), || plan.spread(&u2, &at_2f))
    };
    sums_f.append(&mut sums_2f);
    let mut sums = sums_f;
    plan.transform(&mut sums);
    let at_2f_grid = sums.len() - 1;
    // Each sum is off by at most sum_error times the sum of its strengths' magnitudes (Σ w = 1).
    let e_y = plan.sum_error() * curve.wy.iter().map(|v| v.abs()).sum::<f64>();
    let e_w = plan.sum_error();
    let mut powers: Vec<f64> = vec![0.0; modes];
    let doubtful: Vec<usize> = powers
        .par_iter_mut()
        .enumerate()
        .with_min_len(4096)
        .filter_map(|(k, power)| {
            let sy = plan.mode(&sums[0], k);
            let (c, s) = if floating {
                let sw = plan.mode(&sums[1], k);
                (sw.re, sw.im)
            } else {
                (0.0, 0.0)
            };
            let s2 = plan.mode(&sums[at_2f_grid], k);
            let sums = [sy.re, sy.im, c, s, 0.5 * (1.0 + s2.re), 0.5 * s2.im];
            *power = standard_power(sums, model);
            (power_error_bound(sums, model, e_y, e_w, 0.5 * e_w) > tolerance).then_some(k)
        })
        .collect();
    plan.give_back(sums);
    // Where the fit is so ill-conditioned that the NUFFT's sum errors could exceed the tolerance in power,
    // the bin is summed directly in float64.
    let fixed: Vec<(usize, f64)> = doubtful
        .par_iter()
        .map(|&k| (k, power_f64(curve, grid.frequency(k), model)))
        .collect();
    for &(k, p) in &fixed {
        powers[k] = p;
    }
    Ok(NufftPowers {
        powers,
        direct_bins: fixed.len(),
    })
}

/// One curve's powers by NUFFT, and how many bins were summed directly instead.
pub struct NufftPowers {
    pub powers: Vec<f64>,
    pub direct_bins: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smooth_lengths_have_only_small_factors() {
        assert_eq!(smooth_length(7), 8);
        assert_eq!(smooth_length(3_056_129), 3_072_000);
        assert_eq!(smooth_length(1), 2);
    }

    #[test]
    fn kernel_fit_meets_its_target() {
        for tol in [1e-3, 1e-6, 1e-9, 1e-12] {
            let k = SpreadKernel::for_tolerance(tol).unwrap();
            assert!(
                k.fit_error() <= fit_target(tol, k.beta),
                "{tol}: {}",
                k.fit_error()
            );
        }
        assert!(SpreadKernel::for_tolerance(0.0).is_err());
        assert!(SpreadKernel::for_tolerance(2.0).is_err());
    }

    /// A type-1 transform against the direct sum, for random points and strengths, at every mode.
    #[test]
    fn type1_matches_the_direct_sum() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let points = 300;
        let modes = 101;
        let x: Vec<f64> = (0..points).map(|_| rng.random::<f64>()).collect();
        let c: Vec<[Complex64; 1]> = (0..points)
            .map(|_| {
                [Complex64::new(
                    rng.random::<f64>() - 0.5,
                    rng.random::<f64>() - 0.5,
                )]
            })
            .collect();
        let norm: f64 = c.iter().map(|c| c[0].norm()).sum();
        for tol in [1e-2, 1e-4, 1e-6, 1e-8, 1e-9, 1e-10, 1e-12, 1e-14] {
            let plan = Plan::new(modes, tol).unwrap();
            let u: Vec<f64> = x.iter().map(|x| x * plan.fine as f64).collect();
            let mut grid = plan.spread(&u, &c).remove(0);
            rustfft::FftPlanner::<f64>::new()
                .plan_fft_inverse(plan.fine)
                .process(&mut grid);
            let mut worst = 0.0f64;
            for k in 0..modes {
                let kc = k as f64 - (modes / 2) as f64;
                let direct: Complex64 = x
                    .iter()
                    .zip(&c)
                    .map(|(&x, c)| c[0] * Complex64::from_polar(1.0, TAU * kc * x))
                    .sum();
                worst = worst.max((plan.mode(&grid, k) - direct).norm() / norm);
            }
            assert!(
                worst < tol && worst <= plan.sum_error(),
                "tolerance {tol}: relative error {worst}"
            );
        }
    }

    #[test]
    fn turns_are_exact_fractions() {
        assert_eq!(turns(0.5, 3.0), 0.5);
        assert_eq!(turns(1.0, 3.0), 0.0);
        let x = turns(1234.567, 149.9);
        let want = 185_061.593_3 - 185_061.0;
        assert!((x - want).abs() < 1e-10, "{x} vs {want}");
    }
}
