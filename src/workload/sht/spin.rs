//! Spin-2 transforms (polarisation: E, B ↔ Q, U) in healpy's convention, on the `cpu` model.
//!
//! With W = (₂λ + ₋₂λ)/2 and X = (₂λ − ₋₂λ)/2 (real functions of θ for m ≥ 0), the ring Fourier coefficients
//! of the real maps Q and U are
//!   Q_m = −Σ_l (E_lm W_lm + i B_lm X_lm),  U_m = Σ_l (i E_lm X_lm − B_lm W_lm),
//! and analysis is their adjoint, E_lm = −Σ_rings (W Q_m + i X U_m), B_lm = Σ_rings (i X Q_m − W U_m).
//! W and X come from the scalar recurrence's λ_lm and λ_{l−1,m} (applying ð² and ð̄² to Y_lm and the
//! Legendre equation; the same combination HEALPix's Fortran code uses):
//!   W = −N [(2(l − m²)/sin²θ + l(l−1)) λ_l − 2 D cos θ/sin²θ λ_{l−1}],
//!   X = 2 m N [D λ_{l−1} − (l−1) cos θ λ_l] / sin²θ,
//! N = 1/sqrt((l−1) l (l+1) (l+2)), D = sqrt((2l+1)/(2l−1) (l² − m²)); W = X = 0 for l < 2. Under θ → π − θ,
//! W takes the sign (−1)^(l+m) and X the opposite, so ring pairs share the walk as in the scalar case.
//! The ring stage is the scalar one, applied to Q and to U.

use super::alm::Alm;
use super::cpu::{check_analysis, lane_angles, min_max_pairs, rings_from_delta, rings_to_phases};
use super::grid::RingGrid;
use super::legendre::{start_factors, LaneVisitor, MRecurrence, LANES};
use rayon::prelude::*;
use realfft::num_complex::Complex64;

const ZERO: Complex64 = Complex64 { re: 0.0, im: 0.0 };

/// i z.
#[inline(always)]
fn times_i(z: Complex64) -> Complex64 {
    Complex64::new(-z.im, z.re)
}

/// N_l and D_lm for l = m..=lmax (index l − m); N = 0 below l = 2.
fn spin_factors(m: usize, lmax: usize) -> Vec<(f64, f64)> {
    (m..=lmax)
        .map(|l| {
            let (lf, mf) = (l as f64, m as f64);
            let n = if l < 2 {
                0.0
            } else {
                1.0 / ((lf - 1.0) * lf * (lf + 1.0) * (lf + 2.0)).sqrt()
            };
            let d = ((2.0 * lf + 1.0) / (2.0 * lf - 1.0) * (lf - mf) * (lf + mf)).sqrt();
            (n, if l == 0 { 0.0 } else { d })
        })
        .collect()
}

/// Per-lane geometry and the previous degree's λ: what W and X need beyond λ_l.
struct SpinLanes {
    m: usize,
    cos: [f64; LANES],
    inv_sin2: [f64; LANES],
    prev: [f64; LANES],
}

impl SpinLanes {
    fn new(m: usize, cos: &[f64; LANES], sin: &[f64; LANES]) -> SpinLanes {
        SpinLanes {
            m,
            cos: *cos,
            inv_sin2: sin.map(|s| 1.0 / (s * s)),
            prev: [0.0; LANES],
        }
    }

    /// W and X of every lane at degree l, then λ_l becomes the previous degree.
    #[inline(always)]
    fn wx(&mut self, l: usize, (n, d): (f64, f64), lambda: &[f64; LANES]) -> [(f64, f64); LANES] {
        let (lf, mf) = (l as f64, self.m as f64);
        let mut out = [(0.0, 0.0); LANES];
        for lane in 0..LANES {
            let (c, is2, lam, prev) = (
                self.cos[lane],
                self.inv_sin2[lane],
                lambda[lane],
                self.prev[lane],
            );
            let w = -n
                * ((2.0 * (lf - mf * mf) * is2 + lf * (lf - 1.0)) * lam - 2.0 * d * c * is2 * prev);
            let x = 2.0 * mf * n * (d * prev - (lf - 1.0) * c * lam) * is2;
            out[lane] = (w, x);
        }
        self.prev = *lambda;
        out
    }
}

/// Synthesis sums per lane: [parity][W or X part] of Q and of U.
struct SynthesisSums<'a> {
    lanes: SpinLanes,
    factors: &'a [(f64, f64)],
    e: &'a [Complex64],
    b: &'a [Complex64],
    q: [[[Complex64; LANES]; 2]; 2],
    u: [[[Complex64; LANES]; 2]; 2],
}

impl LaneVisitor for SynthesisSums<'_> {
    #[inline(always)]
    fn all<const ODD: bool>(&mut self, l: usize, lambda: &[f64; LANES]) {
        let k = l - self.lanes.m;
        let wx = self.lanes.wx(l, self.factors[k], lambda);
        let (e, b) = (self.e[k], self.b[k]);
        let p = usize::from(ODD);
        for (lane, &(w, x)) in wx.iter().enumerate() {
            // Q_m += −E W − i B X; U_m += i E X − B W (W part in [0], X part in [1]).
            self.q[p][0][lane] -= e * w;
            self.q[p][1][lane] -= times_i(b) * x;
            self.u[p][0][lane] -= b * w;
            self.u[p][1][lane] += times_i(e) * x;
        }
    }
}

/// Q_m and U_m at every ring for every m (m-major, as the scalar Δ).
fn legendre_synthesis(grid: &RingGrid, e: &Alm, b: &Alm) -> (Vec<Complex64>, Vec<Complex64>) {
    let nr = grid.rings.len();
    let c = start_factors(e.mmax);
    let mut q = vec![ZERO; (e.mmax + 1) * nr];
    let mut u = vec![ZERO; (e.mmax + 1) * nr];
    let rows: Vec<(&mut [Complex64], &mut [Complex64])> =
        q.chunks_mut(nr).zip(u.chunks_mut(nr)).collect();
    min_max_pairs(rows).into_par_iter().for_each(|task| {
        for (m, (q_row, u_row)) in task {
            let rec = MRecurrence::new(m, e.lmax, c[m]);
            let factors = spin_factors(m, e.lmax);
            for chunk in grid.pairs.chunks(LANES) {
                let (cos, sin) = lane_angles(chunk);
                let mut sums = SynthesisSums {
                    lanes: SpinLanes::new(m, &cos, &sin),
                    factors: &factors,
                    e: e.m_slice(m),
                    b: b.m_slice(m),
                    q: [[[ZERO; LANES]; 2]; 2],
                    u: [[[ZERO; LANES]; 2]; 2],
                };
                rec.walk_lanes(&cos, &sin, &mut sums);
                for (lane, pair) in chunk.iter().enumerate() {
                    let (q, u) = (&sums.q, &sums.u);
                    // North: every part with +; south: W parts with (−1)^p, X parts with −(−1)^p.
                    q_row[pair.north] =
                        q[0][0][lane] + q[1][0][lane] + q[0][1][lane] + q[1][1][lane];
                    u_row[pair.north] =
                        u[0][0][lane] + u[1][0][lane] + u[0][1][lane] + u[1][1][lane];
                    if let Some(s) = pair.south {
                        q_row[s] = q[0][0][lane] - q[1][0][lane] - q[0][1][lane] + q[1][1][lane];
                        u_row[s] = u[0][0][lane] - u[1][0][lane] - u[0][1][lane] + u[1][1][lane];
                    }
                }
            }
        }
    });
    (q, u)
}

/// Spin-2 synthesis: the Q and U maps of the E and B coefficients (healpy's `alm2map(pol=True)` without T).
pub fn alm2map_spin2(grid: &RingGrid, e: &Alm, b: &Alm) -> Result<(Vec<f64>, Vec<f64>), String> {
    e.check()?;
    b.check()?;
    if (e.lmax, e.mmax) != (b.lmax, b.mmax) {
        return Err(format!(
            "E has lmax {} mmax {}, B has lmax {} mmax {}",
            e.lmax, e.mmax, b.lmax, b.mmax
        ));
    }
    let (q, u) = legendre_synthesis(grid, e, b);
    Ok((
        rings_from_delta(grid, e.mmax, &q),
        rings_from_delta(grid, e.mmax, &u),
    ))
}

/// Adjoint spin-2 synthesis (map2alm with no iteration): E and B from Q and U with the grid's weights.
pub fn adjoint_spin2(
    grid: &RingGrid,
    q: &[f64],
    u: &[f64],
    lmax: usize,
    mmax: usize,
) -> Result<(Alm, Alm), String> {
    check_analysis(grid, q, lmax, mmax).map_err(|e| format!("Q: {e}"))?;
    check_analysis(grid, u, lmax, mmax).map_err(|e| format!("U: {e}"))?;
    let gq = rings_to_phases(grid, q, mmax);
    let gu = rings_to_phases(grid, u, mmax);
    let nm = mmax + 1;
    let c = start_factors(mmax);
    let mut e = Alm::zeros(lmax, mmax);
    let mut b = Alm::zeros(lmax, mmax);
    let mut blocks = Vec::with_capacity(nm);
    let (mut rest_e, mut rest_b): (&mut [Complex64], &mut [Complex64]) =
        (&mut e.coeffs, &mut b.coeffs);
    for m in 0..=mmax {
        let (be, te) = rest_e.split_at_mut(lmax + 1 - m);
        let (bb, tb) = rest_b.split_at_mut(lmax + 1 - m);
        blocks.push((be, bb));
        rest_e = te;
        rest_b = tb;
    }
    min_max_pairs(blocks).into_par_iter().for_each(|task| {
        for (m, (out_e, out_b)) in task {
            let rec = MRecurrence::new(m, lmax, c[m]);
            let factors = spin_factors(m, lmax);
            // Per degree and lane, E and B over every chunk; the lanes are summed once at the end.
            let mut acc = vec![[[ZERO; LANES]; 2]; lmax + 1 - m];
            for chunk in grid.pairs.chunks(LANES) {
                let (cos, sin) = lane_angles(chunk);
                // (north + south, north − south) of Q and U per lane.
                let mut qs = [[ZERO; LANES]; 2];
                let mut us = [[ZERO; LANES]; 2];
                for (lane, pair) in chunk.iter().enumerate() {
                    let (qn, un) = (gq[pair.north * nm + m], gu[pair.north * nm + m]);
                    let (qs_, us_) = pair
                        .south
                        .map_or((ZERO, ZERO), |s| (gq[s * nm + m], gu[s * nm + m]));
                    qs[0][lane] = qn + qs_;
                    qs[1][lane] = qn - qs_;
                    us[0][lane] = un + us_;
                    us[1][lane] = un - us_;
                }
                let mut sums = AnalysisSums {
                    lanes: SpinLanes::new(m, &cos, &sin),
                    factors: &factors,
                    qs,
                    us,
                    acc: &mut acc,
                };
                rec.walk_lanes(&cos, &sin, &mut sums);
            }
            for (k, [e, b]) in acc.iter().enumerate() {
                out_e[k] = e.iter().sum();
                out_b[k] = b.iter().sum();
            }
        }
    });
    Ok((e, b))
}

/// Analysis sums: for parity p, W meets (north ± south) with sign (−1)^p and X the opposite.
struct AnalysisSums<'a> {
    lanes: SpinLanes,
    factors: &'a [(f64, f64)],
    /// [0]: north + south, [1]: north − south.
    qs: [[Complex64; LANES]; 2],
    us: [[Complex64; LANES]; 2],
    /// Per degree: [E, B] per lane.
    acc: &'a mut [[[Complex64; LANES]; 2]],
}

impl LaneVisitor for AnalysisSums<'_> {
    #[inline(always)]
    fn all<const ODD: bool>(&mut self, l: usize, lambda: &[f64; LANES]) {
        let k = l - self.lanes.m;
        let wx = self.lanes.wx(l, self.factors[k], lambda);
        // W pairs with north + south when l − m is even, X with north − south; the other way when odd.
        let (w_side, x_side) = if ODD { (1, 0) } else { (0, 1) };
        let [e, b] = &mut self.acc[k];
        for (lane, &(w, x)) in wx.iter().enumerate() {
            let (wq, wu) = (self.qs[w_side][lane] * w, self.us[w_side][lane] * w);
            let (xq, xu) = (self.qs[x_side][lane] * x, self.us[x_side][lane] * x);
            // E −= W Q + i X U; B += i X Q − W U.
            e[lane] -= wq + times_i(xu);
            b[lane] += times_i(xq) - wu;
        }
    }
}

/// Spin-2 analysis with `iter` Jacobi refinements (healpy's `map2alm(pol=True, iter=N)` for E and B).
pub fn map2alm_spin2(
    grid: &RingGrid,
    q: &[f64],
    u: &[f64],
    lmax: usize,
    mmax: usize,
    iter: usize,
) -> Result<(Alm, Alm), String> {
    let (mut e, mut b) = adjoint_spin2(grid, q, u, lmax, mmax)?;
    for _ in 0..iter {
        let (mq, mu) = alm2map_spin2(grid, &e, &b)?;
        let rq: Vec<f64> = q.iter().zip(&mq).map(|(x, y)| x - y).collect();
        let ru: Vec<f64> = u.iter().zip(&mu).map(|(x, y)| x - y).collect();
        let (ce, cb) = adjoint_spin2(grid, &rq, &ru, lmax, mmax)?;
        for (a, c) in e.coeffs.iter_mut().zip(&ce.coeffs) {
            *a += c;
        }
        for (a, c) in b.coeffs.iter_mut().zip(&cb.coeffs) {
            *a += c;
        }
    }
    Ok((e, b))
}
