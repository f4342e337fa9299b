//! The normalised associated Legendre functions λ_lm(cos θ) (orthonormal, Condon-Shortley phase; healpy and
//! ducc0's convention, tests/data/sht/CONVENTIONS.md), by the three-term recurrence in l:
//!
//! λ_mm = (−1)^m c_m sin^m θ, c_m = sqrt((2m+1)/4π · Π_{k≤m} (2k−1)/2k),
//! λ_lm = a_l cos θ λ_{l−1,m} − b_l λ_{l−2,m}, a_l = sqrt((4l²−1)/(l²−m²)), b_l = a_l / a_{l−1}.
//!
//! λ_mm underflows a double for large m near the poles (1e-496 at m = 2000, θ = 0.6) while λ_lm at high l is
//! O(1): the recurrence starts on a value carried with an extended exponent, v·2^(−600k), and rescales by
//! 2^600 whenever |v| passes 2^300, until k = 0 (research/sht.md §5, as ducc0 and libsharp do). Only terms
//! with k = 0 enter the sums; the ones dropped are below 2^−300 ≈ 5e-91 in true value.

use std::f64::consts::PI;

/// Bits of one step of the extended exponent.
pub const SCALE_BITS: i32 = 600;
/// |v| above this while k > 0: rescale.
const RESCALE_ABOVE: f64 = f64::from_bits(((1023 + 300) as u64) << 52);
/// 2^−600.
const SCALE_DOWN: f64 = f64::from_bits(((1023 - SCALE_BITS) as u64) << 52);

/// The recurrence of one m up to lmax: a_l and b_l for l = m+1..=lmax (index l − m − 1), and c_m.
#[derive(Debug, Clone)]
pub struct MRecurrence {
    pub m: usize,
    pub lmax: usize,
    pub c_mm: f64,
    /// (a_l, b_l) for l = m+1..=lmax; b_{m+1} = 0.
    pub ab: Vec<(f64, f64)>,
}

impl MRecurrence {
    pub fn new(m: usize, lmax: usize, c_mm: f64) -> MRecurrence {
        let mf = m as f64;
        let mut ab = Vec::with_capacity(lmax.saturating_sub(m));
        let mut a_prev = 0.0f64;
        for l in m + 1..=lmax {
            let lf = l as f64;
            let a = ((4.0 * lf * lf - 1.0) / ((lf - mf) * (lf + mf))).sqrt();
            let b = if l == m + 1 { 0.0 } else { a / a_prev };
            ab.push((a, b));
            a_prev = a;
        }
        MRecurrence { m, lmax, c_mm, ab }
    }

    /// λ_mm at sin θ as (v, k): λ_mm = v·2^(−600k), |v| ≥ 2^−300 whenever k > 0.
    pub fn start(&self, sin: f64) -> (f64, i32) {
        let (mant, e) = pow_scaled(sin, self.m);
        let sign = if self.m % 2 == 1 { -1.0 } else { 1.0 };
        let v = sign * self.c_mm * mant; // |v| in [c_m/2, c_m)
        if e >= -300 {
            (v * two_pow(e as i32), 0)
        } else {
            let step = SCALE_BITS as i64;
            let k = (-300 - e + step - 1) / step; // e < −300: a positive ceiling division
            (v * two_pow((e + SCALE_BITS as i64 * k) as i32), k as i32)
        }
    }
}

/// Ring pairs walked together: the plain phase of the recurrence runs on arrays of this width, which the
/// compiler keeps in vector registers (two AVX2 vectors of float64, one AVX-512 vector).
pub const LANES: usize = 8;

/// What a walk over LANES ring pairs does with each λ_lm: `all` receives every lane's λ at one l, told
/// whether l − m is odd (lanes still out of double range pass 0).
pub trait LaneVisitor {
    fn all<const ODD: bool>(&mut self, l: usize, lambda: &[f64; LANES]);
}

/// One lane-wide step of the recurrence to degree l; with SCALED, lanes whose value passes 2^300 are
/// rescaled by 2^−600 (only lanes still out of range can get there: in range |λ| ≤ sqrt((2l+1)/4π)) and
/// the returned λ is 0 on lanes still out of range.
#[inline(always)]
fn advance<const SCALED: bool>(
    (a, b): (f64, f64),
    cos: &[f64; LANES],
    p: &mut [f64; LANES],
    p_prev: &mut [f64; LANES],
    k: &mut [f64; LANES],
) -> [f64; LANES] {
    let mut next = [0.0f64; LANES];
    for lane in 0..LANES {
        next[lane] = (a * cos[lane]).mul_add(p[lane], -b * p_prev[lane]);
    }
    if SCALED {
        for lane in 0..LANES {
            let big = next[lane].abs() > RESCALE_ABOVE;
            let s = if big { SCALE_DOWN } else { 1.0 };
            next[lane] *= s;
            p[lane] *= s;
            k[lane] -= if big { 1.0 } else { 0.0 };
        }
    }
    *p_prev = *p;
    *p = next;
    if SCALED {
        let mut out = [0.0f64; LANES];
        for lane in 0..LANES {
            out[lane] = if k[lane] == 0.0 { next[lane] } else { 0.0 };
        }
        out
    } else {
        next
    }
}

impl MRecurrence {
    /// Walks l = m..=lmax for LANES ring pairs at once, every step lane-wide: a scaled phase (each lane
    /// carries its own extended exponent and passes 0 until in range) while any lane is out of range, then
    /// an unchecked phase, two degrees per turn so that each call knows its parity at compile time. Terms
    /// still out of range are below 2^−300 and dropped, as ducc0 and libsharp drop them.
    #[inline(always)]
    pub fn walk_lanes(&self, cos: &[f64; LANES], sin: &[f64; LANES], visit: &mut impl LaneVisitor) {
        let m = self.m;
        let mut p = [0.0f64; LANES];
        let mut p_prev = [0.0f64; LANES];
        let mut k = [0.0f64; LANES];
        for lane in 0..LANES {
            let (v, scale) = self.start(sin[lane]);
            p[lane] = v;
            k[lane] = scale as f64;
        }
        let mut first = [0.0f64; LANES];
        for lane in 0..LANES {
            first[lane] = if k[lane] == 0.0 { p[lane] } else { 0.0 };
        }
        visit.all::<false>(m, &first);
        let mut l = m + 1;
        while l <= self.lmax && k.iter().any(|&x| x > 0.0) {
            let lambda = advance::<true>(self.ab[l - m - 1], cos, &mut p, &mut p_prev, &mut k);
            if (l - m) % 2 == 1 {
                visit.all::<true>(l, &lambda);
            } else {
                visit.all::<false>(l, &lambda);
            }
            l += 1;
        }
        if l <= self.lmax && (l - m) % 2 == 1 {
            let lambda = advance::<false>(self.ab[l - m - 1], cos, &mut p, &mut p_prev, &mut k);
            visit.all::<true>(l, &lambda);
            l += 1;
        }
        while l < self.lmax {
            let lambda = advance::<false>(self.ab[l - m - 1], cos, &mut p, &mut p_prev, &mut k);
            visit.all::<false>(l, &lambda);
            let lambda = advance::<false>(self.ab[l - m], cos, &mut p, &mut p_prev, &mut k);
            visit.all::<true>(l + 1, &lambda);
            l += 2;
        }
        if l == self.lmax {
            let lambda = advance::<false>(self.ab[l - m - 1], cos, &mut p, &mut p_prev, &mut k);
            visit.all::<false>(l, &lambda);
        }
    }
}

/// c_m = sqrt((2m+1)/4π · Π_{k=1..m} (2k−1)/2k) for m = 0..=mmax (no underflow: the product is about
/// 1/sqrt(πm)).
pub fn start_factors(mmax: usize) -> Vec<f64> {
    let mut prod = 1.0f64;
    (0..=mmax)
        .map(|m| {
            if m > 0 {
                prod *= (2 * m - 1) as f64 / (2 * m) as f64;
            }
            ((2 * m + 1) as f64 / (4.0 * PI) * prod).sqrt()
        })
        .collect()
}

/// λ_lm(θ) alone, with its extended exponent kept to the end: (mantissa, log2 scale) so that
/// λ = v·2^(−600k) even where it underflows (the spot checks against the mpmath oracle use it).
pub fn lambda_lm(l: usize, m: usize, theta: f64) -> (f64, i32) {
    assert!(m <= l);
    let c = start_factors(m)[m];
    let rec = MRecurrence::new(m, l, c);
    let (cos, sin) = (theta.cos(), theta.sin());
    let (mut p, mut k) = rec.start(sin);
    let mut p_prev = 0.0;
    for &(a, b) in &rec.ab {
        let mut next = a * cos * p - b * p_prev;
        if k > 0 && next.abs() > RESCALE_ABOVE {
            next *= SCALE_DOWN;
            p *= SCALE_DOWN;
            k -= 1;
        }
        p_prev = p;
        p = next;
    }
    (p, k)
}

/// 2^e for e in the normal range.
fn two_pow(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e));
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// x > 0 as (mantissa in [0.5, 1), exponent).
#[inline(always)]
fn frexp(x: f64) -> (f64, i64) {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    if biased == 0 {
        let (m, e) = frexp(x * two_pow(64));
        return (m, e - 64);
    }
    let mant = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (mant, biased - 1022)
}

/// x^n for 0 < x ≤ 1 as (mantissa in [0.5, 1), exponent), by squaring with the exponent kept apart: no
/// underflow for any n, about log2(n) roundings.
#[inline]
fn pow_scaled(x: f64, n: usize) -> (f64, i64) {
    let (mut base, mut base_e) = frexp(x);
    let (mut acc, mut acc_e) = (0.5f64, 1i64); // 1.0
    let mut n = n;
    while n > 0 {
        if n & 1 == 1 {
            let (m, e) = frexp(acc * base);
            acc = m;
            acc_e += base_e + e;
        }
        n >>= 1;
        if n > 0 {
            let (m, e) = frexp(base * base);
            base = m;
            base_e = 2 * base_e + e;
        }
    }
    (acc, acc_e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_degrees_match_closed_forms() {
        let theta: f64 = 0.7;
        let value = |l, m| {
            let (v, k) = lambda_lm(l, m, theta);
            assert_eq!(k, 0);
            v
        };
        let (c, s) = (theta.cos(), theta.sin());
        assert!((value(0, 0) - 1.0 / (4.0 * PI).sqrt()).abs() < 1e-16);
        assert!((value(1, 0) - (3.0 / (4.0 * PI)).sqrt() * c).abs() < 1e-15);
        assert!((value(1, 1) + (3.0 / (8.0 * PI)).sqrt() * s).abs() < 1e-15);
        // λ_20 = sqrt(5/4π) (3c² − 1)/2.
        let l20 = (5.0 / (4.0 * PI)).sqrt() * (3.0 * c * c - 1.0) / 2.0;
        assert!((value(2, 0) - l20).abs() < 1e-15);
    }

    #[test]
    fn pow_scaled_reaches_far_below_double_range() {
        let (m, e) = pow_scaled(0.5, 3000);
        assert_eq!((m, e), (0.5, -2999));
        let (m, e) = pow_scaled(0.3, 7);
        let want = 0.3f64.powi(7);
        assert!((m * 2f64.powi(e as i32) - want).abs() <= 1e-15 * want);
    }

    #[test]
    fn lanes_agree_with_one_at_a_time() {
        let (lmax, m) = (700usize, 300usize);
        let rec = MRecurrence::new(m, lmax, start_factors(m)[m]);
        // Lanes from far below double range (θ = 0.01: never in range) to the equator.
        let thetas = [
            0.01f64,
            0.3,
            0.45,
            0.6,
            0.9,
            1.2,
            1.4,
            std::f64::consts::FRAC_PI_2,
        ];
        let cos = thetas.map(f64::cos);
        let sin = thetas.map(f64::sin);
        struct Record(Vec<[f64; LANES]>);
        impl LaneVisitor for Record {
            fn all<const ODD: bool>(&mut self, l: usize, v: &[f64; LANES]) {
                assert_eq!(ODD, (l - 300) % 2 == 1);
                self.0[l] = *v;
            }
        }
        let mut record = Record(vec![[0.0f64; LANES]; lmax + 1]);
        rec.walk_lanes(&cos, &sin, &mut record);
        let got = record.0;
        for lane in 0..LANES {
            // One lane alone, with the exponent kept to the end: 0 where λ is still out of range, as the
            // lanes pass it.
            let want: Vec<f64> = (0..=lmax)
                .map(|l| match l {
                    l if l < m => 0.0,
                    l => match lambda_lm(l, m, thetas[lane]) {
                        (v, 0) => v,
                        _ => 0.0,
                    },
                })
                .collect();
            // The lane-wide step fuses a multiply-add and lambda_lm does not: a few roundings apart, relative
            // to the lane's amplitude (near a zero of λ the relative difference of the two is meaningless).
            let amplitude = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            for l in m..=lmax {
                let tol = 1e-13 * amplitude;
                assert!(
                    (got[l][lane] - want[l]).abs() <= tol,
                    "lane {lane} l {l}: {} {}",
                    got[l][lane],
                    want[l]
                );
            }
        }
    }
}
