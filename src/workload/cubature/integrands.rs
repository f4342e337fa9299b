//! The benchmark integrands f1..f6 of PAGANI and m-Cubes (fixed-parameter Genz families) and the seed's
//! Σx_i control, in Rust (the f64 reference) with ids matching `cub_integrand()` in
//! cl/common/cubature.h, and their true values in closed form.

use std::fmt;

/// One integrand of the suite. The id is the kernel's `CUB_INTEGRAND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Integrand {
    /// Σ x_i: the seed's simple addition control (trivial integrand, all cost is overhead).
    Sum,
    F1,
    F2,
    F3,
    F4,
    F5,
    F6,
}

impl Integrand {
    pub const ALL: [Integrand; 7] = [
        Integrand::Sum,
        Integrand::F1,
        Integrand::F2,
        Integrand::F3,
        Integrand::F4,
        Integrand::F5,
        Integrand::F6,
    ];
    pub const GENZ: [Integrand; 6] = [
        Integrand::F1,
        Integrand::F2,
        Integrand::F3,
        Integrand::F4,
        Integrand::F5,
        Integrand::F6,
    ];

    pub fn id(self) -> i32 {
        self as i32
    }

    pub fn name(self) -> &'static str {
        match self {
            Integrand::Sum => "sum",
            Integrand::F1 => "f1",
            Integrand::F2 => "f2",
            Integrand::F3 => "f3",
            Integrand::F4 => "f4",
            Integrand::F5 => "f5",
            Integrand::F6 => "f6",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Integrand::Sum => "Σ x_i (control)",
            Integrand::F1 => "oscillatory cos(Σ i·x_i)",
            Integrand::F2 => "product peak Π 1/(50⁻² + (x_i − ½)²)",
            Integrand::F3 => "corner peak (1 + Σ i·x_i)^−(d+1)",
            Integrand::F4 => "Gaussian exp(−625 Σ (x_i − ½)²)",
            Integrand::F5 => "C⁰ exp(−10 Σ |x_i − ½|)",
            Integrand::F6 => "discontinuous exp(Σ c_i x_i) for x_i ≤ t_i",
        }
    }

    /// Per-dimension constants handed to the kernels: c_1..c_d then t_1..t_d (f3: c_i = i; f6: the
    /// seed's (c, t) pairs for d = 5..8, otherwise c_i = 3 + (i − 1) mod 8 and t_i = (c_i − 1)/10).
    pub fn params(self, d: usize) -> Vec<f64> {
        let mut p = vec![0.0; 2 * d];
        match self {
            Integrand::F3 => {
                for (i, c) in p.iter_mut().take(d).enumerate() {
                    *c = (i + 1) as f64;
                }
            }
            Integrand::F6 => {
                let c: Vec<f64> = match d {
                    5 => vec![9.0, 8.0, 7.0, 6.0, 5.0],
                    6 => vec![10.0, 9.0, 8.0, 7.0, 6.0, 5.0],
                    7 => vec![10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0],
                    8 => (3..=10).map(f64::from).collect(),
                    _ => (0..d).map(|i| (3 + i % 8) as f64).collect(),
                };
                for i in 0..d {
                    p[i] = c[i];
                    p[d + i] = (c[i] - 1.0) / 10.0;
                }
            }
            _ => {}
        }
        p
    }

    /// f(x) in float64, with the same operation order (and fused multiply-adds) as the kernels.
    pub fn eval(self, x: &[f64], params: &[f64]) -> f64 {
        let d = x.len();
        match self {
            Integrand::Sum => x.iter().sum(),
            Integrand::F1 => x
                .iter()
                .enumerate()
                .fold(0.0, |s, (i, &xi)| ((i + 1) as f64).mul_add(xi, s))
                .cos(),
            Integrand::F2 => x.iter().fold(1.0, |p, &xi| {
                let t = xi - 0.5;
                p / t.mul_add(t, 1.0 / 2500.0)
            }),
            Integrand::F3 => {
                let s = x
                    .iter()
                    .zip(params)
                    .fold(1.0, |s, (&xi, &c)| c.mul_add(xi, s));
                s.powf(-((d + 1) as f64))
            }
            Integrand::F4 => {
                let s = x.iter().fold(0.0, |s, &xi| {
                    let t = xi - 0.5;
                    t.mul_add(t, s)
                });
                (-625.0 * s).exp()
            }
            Integrand::F5 => (-10.0 * x.iter().map(|&xi| (xi - 0.5).abs()).sum::<f64>()).exp(),
            Integrand::F6 => {
                let mut s = 0.0;
                let mut inside = true;
                for i in 0..d {
                    s = params[i].mul_add(x[i], s);
                    inside &= x[i] <= params[d + i];
                }
                if inside {
                    s.exp()
                } else {
                    0.0
                }
            }
        }
    }

    /// The exact integral over [0, 1]^d, in closed form.
    pub fn true_value(self, d: usize) -> f64 {
        let p = self.params(d);
        match self {
            Integrand::Sum => d as f64 / 2.0,
            Integrand::F1 => {
                // Re Π_k (e^{ik} − 1)/(ik) as a running complex product.
                let (mut re, mut im) = (1.0f64, 0.0f64);
                for k in 1..=d {
                    let kf = k as f64;
                    // (e^{ik} − 1)/(ik) = (sin k)/k + i (1 − cos k)/k
                    let (a, b) = (kf.sin() / kf, (1.0 - kf.cos()) / kf);
                    (re, im) = (re * a - im * b, re * b + im * a);
                }
                re
            }
            Integrand::F2 => (100.0 * 25f64.atan()).powi(d as i32),
            Integrand::F3 => {
                // (1/(d! Π c)) Σ_{S ⊆ {1..d}} (−1)^{|S|} / (1 + Σ_{k∈S} c_k)
                let c = &p[..d];
                let mut sum = 0.0;
                for mask in 0u32..1 << d {
                    let s: f64 = (0..d).filter(|k| mask >> k & 1 == 1).map(|k| c[k]).sum();
                    let sign = if mask.count_ones() % 2 == 0 {
                        1.0
                    } else {
                        -1.0
                    };
                    sum += sign / (1.0 + s);
                }
                let fact: f64 = (1..=d).map(|k| k as f64).product();
                sum / (fact * c.iter().product::<f64>())
            }
            // [√π/a · erf(a/2)]^d with a = 25; erf(12.5) = 1 − 1.5e-70, which is 1 in float64.
            Integrand::F4 => (std::f64::consts::PI.sqrt() / 25.0).powi(d as i32),
            Integrand::F5 => (0.2 * (1.0 - (-5f64).exp())).powi(d as i32),
            Integrand::F6 => (0..d)
                .map(|i| ((p[i] * p[d + i]).exp() - 1.0) / p[i])
                .product(),
        }
    }
}

impl fmt::Display for Integrand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Integrand {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Integrand::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| {
                format!("unknown integrand '{s}' (expected sum, f1, f2, f3, f4, f5 or f6)")
            })
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    /// The true values computed with mpmath at 40 digits, d = 5..8.
    const MPMATH: [[f64; 6]; 4] = [
        [
            0.020242422119901896863,
            8.4065401179140645533e10,
            2.6025382796216129169e-5,
            1.7913260367487859555e-6,
            3.0936358898267925219e-4,
            191029.46875697125343,
        ],
        [
            -0.0013062949651908022873,
            1.2868879901109877544e13,
            7.1790160638199853885e-7,
            1.2700170928250806344e-7,
            6.1455822703333419731e-5,
            154773678.85091211066,
        ],
        [
            -3.7645625795087789597e-5,
            1.9699908355434400613e15,
            1.4594291858492893726e-8,
            9.0041867475745695179e-9,
            1.2208347325434633159e-5,
            89773257.874048211218,
        ],
        [
            3.4395579521832515852e-5,
            3.0156967210413049999e17,
            2.2751965817917756321e-10,
            6.3838021900043837267e-10,
            2.4252176256418855569e-6,
            24601427.6901867783,
        ],
    ];

    #[test]
    fn closed_forms_match_the_mpmath_values() {
        for (row, d) in MPMATH.iter().zip(5..=8) {
            for (f, &want) in Integrand::GENZ.iter().zip(row) {
                let got = f.true_value(d);
                assert!(
                    ((got - want) / want).abs() < 1e-12,
                    "{f} {d}D: {got:e} vs {want:e}"
                );
            }
        }
    }

    #[test]
    fn integrands_take_known_values() {
        let d = 5;
        let half = vec![0.5; d];
        assert_eq!(Integrand::F4.eval(&half, &Integrand::F4.params(d)), 1.0);
        assert_eq!(Integrand::F5.eval(&half, &Integrand::F5.params(d)), 1.0);
        assert!((Integrand::F2.eval(&half, &[]) - 2500f64.powi(5)).abs() < 1e-3);
        // f6 is zero once any coordinate passes its threshold.
        let p = Integrand::F6.params(d);
        assert!(Integrand::F6.eval(&[0.1; 5], &p) > 0.0);
        assert_eq!(Integrand::F6.eval(&[0.1, 0.1, 0.1, 0.1, 0.45], &p), 0.0);
        assert_eq!("f3".parse::<Integrand>().unwrap(), Integrand::F3);
        assert!("f9".parse::<Integrand>().is_err());
    }
}
