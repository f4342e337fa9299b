//! The lens model itself: flat-ΛCDM distances, the halos (pseudo-elliptical SIS, LENSTOOL type 5, and
//! dPIE, type 81) with their strengths, and the float64 deflection at any point. Independent of grids,
//! precisions and devices.

use super::io::{self, HaloProfile};

pub const C_KMS: f64 = 299_792.458;
pub const ARCSEC_PER_RAD: f64 = 180.0 * 3600.0 / std::f64::consts::PI;

/// Below this ε the dPIE uses its circular closed form (Lenstool-HPC's threshold; K = (1−ε²)/2√ε diverges).
pub const DPIE_CIRCULAR_EPS: f64 = 2e-4;

/// Flat ΛCDM with no radiation (as LENSTOOL).
#[derive(Debug, Clone, Copy)]
pub struct Cosmology {
    pub omega_m: f64,
    pub z_lens: f64,
    pub z_source: f64,
}

impl Default for Cosmology {
    fn default() -> Self {
        Cosmology {
            omega_m: 0.3,
            z_lens: 0.3,
            z_source: 2.0,
        }
    }
}

impl Cosmology {
    /// Comoving distance in Hubble units, ∫₀ᶻ dz'/E(z').
    fn comoving(&self, z: f64) -> f64 {
        let om = self.omega_m;
        let e_inv = |z: f64| 1.0 / (om * (1.0 + z).powi(3) + (1.0 - om)).sqrt();
        adaptive_simpson(&e_inv, 0.0, z, 1e-15, 50)
    }
    /// D_LS / D_S for a flat universe: (χ_s − χ_l) / χ_s.
    pub fn dls_over_ds(&self) -> f64 {
        let (cl, cs) = (self.comoving(self.z_lens), self.comoving(self.z_source));
        (cs - cl) / cs
    }
}

fn adaptive_simpson(f: &dyn Fn(f64) -> f64, a: f64, b: f64, tol: f64, depth: u32) -> f64 {
    fn simpson(f: &dyn Fn(f64) -> f64, a: f64, fa: f64, b: f64, fb: f64) -> (f64, f64, f64) {
        let m = 0.5 * (a + b);
        let fm = f(m);
        (m, fm, (b - a) / 6.0 * (fa + 4.0 * fm + fb))
    }
    #[allow(clippy::too_many_arguments)]
    fn rec(
        f: &dyn Fn(f64) -> f64,
        a: f64,
        fa: f64,
        b: f64,
        fb: f64,
        whole: f64,
        m: f64,
        fm: f64,
        tol: f64,
        depth: u32,
    ) -> f64 {
        let (lm, flm, left) = simpson(f, a, fa, m, fm);
        let (rm, frm, right) = simpson(f, m, fm, b, fb);
        let delta = left + right - whole;
        if depth == 0 || delta.abs() <= 15.0 * tol {
            return left + right + delta / 15.0;
        }
        rec(f, a, fa, m, fm, left, lm, flm, tol / 2.0, depth - 1)
            + rec(f, m, fm, b, fb, right, rm, frm, tol / 2.0, depth - 1)
    }
    let (fa, fb) = (f(a), f(b));
    let (m, fm, whole) = simpson(f, a, fa, b, fb);
    rec(f, a, fa, b, fb, whole, m, fm, tol, depth)
}

/// LENSTOOL strength of a pseudo-elliptical SIS without the distance ratio: b₀ = 4π(σ/c)² in arcsec.
pub fn b0_arcsec(sigma_v_kms: f64) -> f64 {
    4.0 * std::f64::consts::PI * (sigma_v_kms / C_KMS).powi(2) * ARCSEC_PER_RAD
}

/// LENSTOOL dPIE strength without the distance ratio: b₀ = 6π(σ_LT/c)² in arcsec (Elíasdóttir et al. 2007).
pub fn b0_dpie_arcsec(sigma_lt_kms: f64) -> f64 {
    1.5 * b0_arcsec(sigma_lt_kms)
}

/// The dPIE formula's ε = (a−b)/(a+b) from LENSTOOL's mass ellipticity e = (a²−b²)/(a²+b²).
pub fn dpie_eps_from_mass(e: f64) -> f64 {
    if e <= 0.0 {
        0.0
    } else {
        (1.0 - (1.0 - e * e).sqrt()) / e
    }
}

/// Halos as structure of arrays. `b` already includes D_LS/D_S; `e` is the SIE potential ellipticity or
/// the dPIE ε; `theta` the position angle in radians, counter-clockwise from +x; `r_core`/`r_cut` in arcsec
/// (dPIE only, 0 for SIE).
#[derive(Debug, Clone, Default)]
pub struct Halos {
    pub x0: Vec<f64>,
    pub y0: Vec<f64>,
    pub b: Vec<f64>,
    pub e: Vec<f64>,
    pub theta: Vec<f64>,
    pub profile: Vec<HaloProfile>,
    pub r_core: Vec<f64>,
    pub r_cut: Vec<f64>,
}

impl Halos {
    pub fn len(&self) -> usize {
        self.x0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.x0.is_empty()
    }
    /// Adds a pseudo-elliptical SIS (LENSTOOL type 5).
    pub fn push(&mut self, x0: f64, y0: f64, b: f64, e: f64, theta: f64) {
        self.push_any(HaloProfile::Sie, x0, y0, b, e, theta, 0.0, 0.0);
    }
    /// Adds a dPIE (LENSTOOL type 81) with the formula's ε and radii in arcsec.
    #[allow(clippy::too_many_arguments)]
    pub fn push_dpie(
        &mut self,
        x0: f64,
        y0: f64,
        b: f64,
        eps: f64,
        theta: f64,
        r_core: f64,
        r_cut: f64,
    ) {
        self.push_any(HaloProfile::Dpie, x0, y0, b, eps, theta, r_core, r_cut);
    }
    #[allow(clippy::too_many_arguments)]
    fn push_any(
        &mut self,
        p: HaloProfile,
        x0: f64,
        y0: f64,
        b: f64,
        e: f64,
        theta: f64,
        rc: f64,
        rcut: f64,
    ) {
        self.x0.push(x0);
        self.y0.push(y0);
        self.b.push(b);
        self.e.push(e);
        self.theta.push(theta);
        self.profile.push(p);
        self.r_core.push(rc);
        self.r_cut.push(rcut);
    }
    pub(super) fn copy_from(&mut self, other: &Halos, k: usize) {
        self.push_any(
            other.profile[k],
            other.x0[k],
            other.y0[k],
            other.b[k],
            other.e[k],
            other.theta[k],
            other.r_core[k],
            other.r_cut[k],
        );
    }
    /// Halos from a catalogue (io::read_halos), for sources at the given D_LS/D_S. SIE: ε_pot = e_mass/3
    /// (LENSTOOL and Lenstool-HPC type 5); dPIE: ε = (1 − √(1−e²))/e, b = 6π(σ_LT/c)².
    pub fn from_records(records: &[io::HaloRecord], dls_ds: f64) -> Halos {
        let mut h = Halos::default();
        for r in records {
            let theta = r.angle_deg.to_radians();
            match r.profile {
                HaloProfile::Sie => h.push(
                    r.x,
                    r.y,
                    b0_arcsec(r.sigma_kms) * dls_ds,
                    r.ellipticity / 3.0,
                    theta,
                ),
                HaloProfile::Dpie => h.push_dpie(
                    r.x,
                    r.y,
                    b0_dpie_arcsec(r.sigma_kms) * dls_ds,
                    dpie_eps_from_mass(r.ellipticity),
                    theta,
                    r.r_core,
                    r.r_cut,
                ),
            }
        }
        h
    }
    /// N = b·Rᵀ diag(1−e, 1+e) R·b, so that g = N d / sqrt(dᵀ N d) (SIE).
    pub fn quad_form(&self, k: usize) -> (f64, f64, f64) {
        let (c, s) = (self.theta[k].cos(), self.theta[k].sin());
        let (e, b2) = (self.e[k], self.b[k] * self.b[k]);
        let m11 = (1.0 - e) * c * c + (1.0 + e) * s * s;
        let m12 = -2.0 * e * c * s;
        let m22 = (1.0 - e) * s * s + (1.0 + e) * c * c;
        (b2 * m11, b2 * m12, b2 * m22)
    }
    /// Checks every halo's parameters; the error names the halo and the field.
    pub fn validate(&self) -> Result<(), LensError> {
        for k in 0..self.len() {
            let bad = |field: &'static str, value: f64| LensError::BadHalo {
                index: k,
                field,
                value,
            };
            for (field, v) in [
                ("x", self.x0[k]),
                ("y", self.y0[k]),
                ("theta", self.theta[k]),
            ] {
                if !v.is_finite() {
                    return Err(bad(field, v));
                }
            }
            if !(self.b[k] > 0.0 && self.b[k].is_finite()) {
                return Err(bad("b (from sigma_v)", self.b[k]));
            }
            if !(self.e[k] >= 0.0 && self.e[k] < 1.0) {
                return Err(bad("ellipticity", self.e[k]));
            }
            if self.profile[k] == HaloProfile::Dpie
                && !(self.r_core[k] >= 0.0
                    && self.r_cut[k] > self.r_core[k]
                    && self.r_cut[k].is_finite())
            {
                return Err(bad("r_cut (must exceed r_core >= 0)", self.r_cut[k]));
            }
        }
        Ok(())
    }
}

/// Below this ε the dPIE deflection is formed from w − 1 per radius (see [`dpie_deflection`]); mirrors
/// LENS_DPIE_SMALL_EPS in cl/common/lens_model.h.
pub const DPIE_SMALL_EPS: f64 = 0.1;

/// dPIE deflection of one halo at offset (dx, dy) from its centre, generic over the float type (the CPU
/// paths); the same arithmetic as `lens_dpie_add` in cl/common/lens_model.h, whose comment derives the
/// cancellation-free form (Kassiola & Kovner 1993; Elíasdóttir et al. 2007, appendix A). `scale` is
/// b·r_cut/(r_cut − r_core), as stored in the halo tables.
#[allow(clippy::too_many_arguments)]
pub fn dpie_deflection<T: Real>(
    dx: T,
    dy: T,
    c: T,
    s: T,
    eps: T,
    scale: T,
    rc: T,
    rcut: T,
) -> (T, T) {
    let one = T::ONE;
    let two = one + one;
    let u = c * dx + s * dy;
    let v = T::ZERO - s * dx + c * dy;
    let (gu, gv) = if eps.to_f64() < DPIE_CIRCULAR_EPS {
        let s2 = u * u + v * v;
        if s2.to_f64() > 0.0 {
            let inv = |r: T| one / ((s2 + r * r).sqrt() + r);
            let t = scale * (inv(rc) - inv(rcut));
            (t * u, t * v)
        } else {
            (T::ZERO, T::ZERO)
        }
    } else {
        let sqe = eps.sqrt();
        let (ip, im) = (one / (one + eps), one / (one - eps));
        let cx1 = (one - eps) / (one + eps);
        let k = (one - eps * eps) / (two * sqe);
        let uu = u * u * ip * ip;
        let rho2 = uu + v * v * im * im;
        let v_cx1 = v * (one + eps) * im;
        let upper = v.to_f64() >= 0.0;
        // Per radius: (num, den) with w = num/den, both scaled by nd; e's numerator; S + r.
        let parts = |r: T| {
            let f = two * r * sqe;
            let dv = v - f;
            let big_s = (r * r + rho2).sqrt();
            let sr = big_s + r;
            let (nd, nn, h) = if upper {
                (
                    two * sqe * big_s + v_cx1,
                    two * two * eps * uu - dv * (dv + two * f),
                    two * sqe * uu * sr + dv * (rho2 + sqe * im * v * sr),
                )
            } else {
                (one, two * sqe * big_s - v_cx1, rho2 - sqe * im * v * sr)
            };
            let num = (cx1 * u * nd, nn);
            let den = (u * nd, T::ZERO - dv * nd);
            let e = (T::ZERO - two * eps * ip * u * nd * sr, two * sqe * h);
            (num, den, e, sr)
        };
        let ((num0, den0, e0, sr0), (num1, den1, e1, sr1)) = (parts(rc), parts(rcut));
        let (arg_q, ln_q) = if eps.to_f64() >= DPIE_SMALL_EPS {
            let (ar, ai) = (
                num0.0 * den1.0 - num0.1 * den1.1,
                num0.0 * den1.1 + num0.1 * den1.0,
            );
            let (br, bi) = (
                den0.0 * num1.0 - den0.1 * num1.1,
                den0.0 * num1.1 + den0.1 * num1.0,
            );
            (
                (ai * br - ar * bi).atan2(ar * br + ai * bi),
                T::from_f64(0.5) * ((ar * ar + ai * ai) / (br * br + bi * bi)).ln(),
            )
        } else {
            let log_w = |e: (T, T), den: (T, T), sr: T| {
                let kk = one / ((den.0 * den.0 + den.1 * den.1) * sr);
                let er = (e.0 * den.0 + e.1 * den.1) * kk;
                let ei = (e.1 * den.0 - e.0 * den.1) * kk;
                (
                    ei.atan2(one + er),
                    T::from_f64(0.5) * (er * (two + er) + ei * ei).ln_1p(),
                )
            };
            let ((a0, l0), (a1, l1)) = (log_w(e0, den0, sr0), log_w(e1, den1, sr1));
            (a0 - a1, l0 - l1)
        };
        (k * scale * arg_q, T::ZERO - k * scale * ln_q)
    };
    (c * gu - s * gv, s * gu + c * gv)
}

/// One halo's float64 deflection with its trigonometry done once: the SIE in the textbook form (rotate,
/// divide, rotate back), the dPIE by [`dpie_deflection`]. [`gradient_at`] and the near/far split use it.
#[derive(Debug, Clone)]
pub struct HaloEval {
    pub x0: f64,
    pub y0: f64,
    c: f64,
    s: f64,
    pub e: f64,
    pub b: f64,
    dpie: Option<(f64, f64, f64)>, // scale, r_core, r_cut
}

impl HaloEval {
    pub fn of(h: &Halos, k: usize) -> HaloEval {
        HaloEval {
            x0: h.x0[k],
            y0: h.y0[k],
            c: h.theta[k].cos(),
            s: h.theta[k].sin(),
            e: h.e[k],
            b: h.b[k],
            dpie: (h.profile[k] == HaloProfile::Dpie).then(|| {
                (
                    dpie_scale(h.b[k], h.r_core[k], h.r_cut[k]),
                    h.r_core[k],
                    h.r_cut[k],
                )
            }),
        }
    }

    /// An SIE of strength b, ellipticity e and position angle theta at (x0, y0).
    pub fn sie(x0: f64, y0: f64, b: f64, e: f64, theta: f64) -> HaloEval {
        HaloEval {
            x0,
            y0,
            c: theta.cos(),
            s: theta.sin(),
            e,
            b,
            dpie: None,
        }
    }

    /// The deflection at (x, y) arcsec.
    #[inline]
    pub fn at(&self, x: f64, y: f64) -> (f64, f64) {
        let (dx, dy) = (x - self.x0, y - self.y0);
        if let Some((scale, rc, rcut)) = self.dpie {
            return dpie_deflection(dx, dy, self.c, self.s, self.e, scale, rc, rcut);
        }
        self.sie_at(dx, dy)
    }

    /// The SIE deflection at offset (dx, dy), without branches so that row loops vectorise: q is clamped
    /// away from 0, where both numerators vanish, so the centre gives 0.
    #[inline(always)]
    fn sie_at(&self, dx: f64, dy: f64) -> (f64, f64) {
        let (c, s, e) = (self.c, self.s, self.e);
        let u = c * dx + s * dy;
        let v = -s * dx + c * dy;
        let r = ((1.0 - e) * u * u + (1.0 + e) * v * v)
            .max(f64::MIN_POSITIVE)
            .sqrt();
        let gu = self.b * (1.0 - e) * u / r;
        let gv = self.b * (1.0 + e) * v / r;
        (c * gu - s * gv, s * gu + c * gv)
    }

    /// Adds the deflection at (x0 + k·pixel, y) to (gx[k], gy[k]) for every k (an SIE's loop vectorises).
    pub fn add_along_row(&self, x0: f64, pixel: f64, y: f64, gx: &mut [f64], gy: &mut [f64]) {
        if self.dpie.is_some() {
            for (k, (sx, sy)) in gx.iter_mut().zip(gy.iter_mut()).enumerate() {
                let (ax, ay) = self.at(x0 + k as f64 * pixel, y);
                *sx += ax;
                *sy += ay;
            }
            return;
        }
        let dy = y - self.y0;
        for (k, (sx, sy)) in gx.iter_mut().zip(gy.iter_mut()).enumerate() {
            let (ax, ay) = self.sie_at((x0 + k as f64 * pixel) - self.x0, dy);
            *sx += ax;
            *sy += ay;
        }
    }

    /// The scale of its deflection (arcsec), in whose units the split's interpolation error tables are
    /// measured: an SIE's largest deflection, a dPIE's b (whose deflection can exceed it a little, see
    /// [`Self::largest_deflection`]).
    pub fn strength(&self) -> f64 {
        match self.dpie {
            Some(_) => self.b,
            None => self.b * (1.0 + self.e).sqrt(),
        }
    }

    /// An upper bound of its deflection's magnitude anywhere (arcsec). SIE: b·√(1+e) exactly (the
    /// largest of b·√(((1−e)²u² + (1+e)²v²)/((1−e)u² + (1+e)v²))). dPIE: a round one stays below b; an
    /// elliptical one without a core reaches b·(1−ε²)/(2√ε)·ln((1+√ε)/(1−√ε)) at its centre along the
    /// minor axis, at most 1.033·b (ε ≈ 0.19); a core lowers that more than the table scale
    /// b·r_cut/(r_cut − r_core) ≥ b raises it, so 1.04 × that scale
    /// (`the_largest_deflection_bounds_every_deflection`).
    pub fn largest_deflection(&self) -> f64 {
        match self.dpie {
            Some((scale, _, _)) => 1.04 * scale,
            None => self.b * (1.0 + self.e).sqrt(),
        }
    }
}

/// The f64 gradient at an arbitrary point, summed over the halos with [`HaloEval`]: independent of the grid
/// code and its tables; checked against the mpmath oracle in tests.
pub fn gradient_at(halos: &Halos, x: f64, y: f64) -> (f64, f64) {
    (0..halos.len()).fold((0.0, 0.0), |(gx, gy), k| {
        let (ax, ay) = HaloEval::of(halos, k).at(x, y);
        (gx + ax, gy + ay)
    })
}

/// Errors in a lens configuration, named by field and value.
#[derive(Debug, thiserror::Error)]
pub enum LensError {
    #[error("lens grid size must be at least 1 pixel, got {0}")]
    ZeroSize(usize),
    #[error("lens grid size {0} exceeds the supported maximum of {1} pixels per side")]
    TooLarge(usize, usize),
    #[error("pixel scale must be positive and finite, got {0:?}")]
    BadPixel(f64),
    #[error("galaxy sigma range must satisfy 0 < lo <= hi, got {0:?}..{1:?} km/s")]
    BadSigma(f64, f64),
    #[error("halo {} (counting from 1): field '{field}' has the invalid value {value:?}", index + 1)]
    BadHalo {
        index: usize,
        field: &'static str,
        value: f64,
    },
    #[error("no halos: a lens model needs at least one")]
    NoHalos,
}

/// The dPIE amplitude b·r_cut/(r_cut − r_core) (Elíasdóttir et al. 2007, appendix A).
pub fn dpie_scale(b: f64, r_core: f64, r_cut: f64) -> f64 {
    b * r_cut / (r_cut - r_core)
}

pub use crate::real::Real;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every deflection, sampled densely near the centre (where a dPIE's peaks) and out to its cut, stays
    /// within `largest_deflection`; an elliptical dPIE without a core exceeds its b (so the bound's factor
    /// is needed and the check is not vacuous).
    #[test]
    fn the_largest_deflection_bounds_every_deflection() {
        let mut above_b = 0.0f64;
        for &eps in &[
            0.0, 0.02, 0.05, 0.1, 0.15, 0.19, 0.2, 0.25, 0.3, 0.4, 0.6, 0.8, 0.95,
        ] {
            for &(rc, rcut) in &[
                (0.0, 5.0),
                (0.05, 5.0),
                (1.0, 5.0),
                (10.0, 300.0),
                (0.0, 300.0),
            ] {
                let mut h = Halos::default();
                h.push_dpie(0.0, 0.0, 1.3, eps, 0.4, rc, rcut);
                h.push(0.0, 0.0, 1.3, eps.min(0.9), 0.4);
                for k in 0..2 {
                    let g = HaloEval::of(&h, k);
                    let bound = g.largest_deflection();
                    for i in 0..400 {
                        let r = 1e-6 * 10f64.powf(i as f64 / 400.0 * 9.0);
                        for a in 0..64 {
                            let phi = a as f64 * std::f64::consts::TAU / 64.0;
                            let (x, y) = g.at(r * phi.cos(), r * phi.sin());
                            let m = (x * x + y * y).sqrt();
                            // The bound is exact arithmetic's; float64's few ulp allowed.
                            assert!(
                                m <= bound * (1.0 + 1e-12),
                                "halo {k}, ε {eps}, r_core {rc}: |α| {m} over {bound} at r {r}"
                            );
                            if k == 0 && rc == 0.0 {
                                above_b = above_b.max(m / g.b);
                            }
                        }
                    }
                }
            }
        }
        assert!(
            above_b > 1.02,
            "an elliptical dPIE without a core peaks at {above_b} b"
        );
    }
}
