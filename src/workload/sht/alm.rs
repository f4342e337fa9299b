//! Spherical harmonic coefficients in healpy's layout.

use rand::{Rng, SeedableRng};
use realfft::num_complex::Complex64;

/// Spherical harmonic coefficients a_lm for 0 ≤ m ≤ mmax, m ≤ l ≤ lmax, m-major as healpy's
/// `Alm.getidx`: index(l, m) = m (2 lmax + 1 − m) / 2 + l. Real maps: a_{l,−m} = (−1)^m conj(a_lm).
#[derive(Debug, Clone, PartialEq)]
pub struct Alm {
    pub lmax: usize,
    pub mmax: usize,
    pub coeffs: Vec<Complex64>,
}

impl Alm {
    pub fn zeros(lmax: usize, mmax: usize) -> Alm {
        assert!(mmax <= lmax);
        Alm {
            lmax,
            mmax,
            coeffs: vec![Complex64::new(0.0, 0.0); Alm::len_for(lmax, mmax)],
        }
    }

    /// Whether the coefficients fit their (lmax, mmax): mmax ≤ lmax and the length healpy's layout needs.
    pub fn check(&self) -> Result<(), String> {
        if self.mmax > self.lmax {
            return Err(format!(
                "a_lm: mmax {} is above lmax {}",
                self.mmax, self.lmax
            ));
        }
        let want = Alm::len_for(self.lmax, self.mmax);
        if self.coeffs.len() != want {
            return Err(format!(
                "a_lm: {} coefficients where lmax {} and mmax {} need {want}",
                self.coeffs.len(),
                self.lmax,
                self.mmax
            ));
        }
        if let Some(k) = self
            .coeffs
            .iter()
            .position(|c| !(c.re.is_finite() && c.im.is_finite()))
        {
            return Err(format!(
                "a_lm: coefficient {k} is {} (not finite)",
                self.coeffs[k]
            ));
        }
        Ok(())
    }

    /// Number of coefficients for (lmax, mmax).
    pub fn len_for(lmax: usize, mmax: usize) -> usize {
        (mmax + 1) * (2 * lmax + 2 - mmax) / 2
    }

    pub fn index(&self, l: usize, m: usize) -> usize {
        m * (2 * self.lmax + 1 - m) / 2 + l
    }

    /// a_lm for l = m..=lmax.
    pub fn m_slice(&self, m: usize) -> &[Complex64] {
        let start = self.index(m, m);
        &self.coeffs[start..start + self.lmax + 1 - m]
    }

    /// White coefficients of unit variance (a_l0 real), from a fixed seed: the presets' input.
    pub fn random(lmax: usize, mmax: usize, seed: u64) -> Alm {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let mut gauss = move || {
            // Box-Muller: two uniforms to one standard normal.
            let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let v: f64 = rng.random();
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let mut alm = Alm::zeros(lmax, mmax);
        for m in 0..=mmax {
            for l in m..=lmax {
                let k = alm.index(l, m);
                alm.coeffs[k] = if m == 0 {
                    Complex64::new(gauss(), 0.0)
                } else {
                    Complex64::new(gauss(), gauss()) / std::f64::consts::SQRT_2
                };
            }
        }
        alm
    }

    /// (re, im) pairs, flattened.
    pub fn to_flat(&self) -> Vec<f64> {
        self.coeffs.iter().flat_map(|c| [c.re, c.im]).collect()
    }
}
