//! Power normalisations and false-alarm probabilities (FAP) of Lomb-Scargle peaks.
//!
//! The conventions are astropy's (`LombScargle` with `center_data=True`, `nterms=1`), so that a power or a
//! FAP printed here can be compared with the published reference implementation number for number:
//!
//! * normalisations: `model = p/(1-p)`, `log = -ln(1-p)`, `psd = p chi2_ref/2` from the 'standard' power
//!   `p`, with `chi2_ref = sum_i w_i (y_i - ybar_w)^2`, `w_i = 1/dy_i^2` (1 without errors);
//! * FAPs (Baluev 2008, MNRAS 385, 1279, Table 1 and eqs. 5-6): the single-frequency probability, the
//!   "naive" independent-frequency estimate, the Davies upper bound and Baluev's alias-free approximation;
//! * bootstrap: resampling of the (y, dy) pairs with replacement at fixed times.
//!
//! The analytic FAPs are evaluated in log space (`ln_*` functions), so a highly significant peak gets its
//! true tiny probability (1e-99 for the test series, far less for long series) instead of 0 or a rounding
//! residue of 1 - (1 - p).

use super::{LightCurve, Normalization, SignalModel};
use rand::{Rng, SeedableRng};

/// What the normalisation conversions need from one series: kept apart from the series so that the many
/// powers of one periodogram are converted without re-reading the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesStats {
    /// Number of samples N.
    pub n: usize,
    /// The fitted model (both are centred first; see [`degrees_of_freedom`]).
    pub model: SignalModel,
    /// Weighted chi-square of the centred data about zero, sum_i w_i (y_i - ybar_w)^2, w_i = 1/dy_i^2
    /// (w_i = 1 without errors): astropy's `compute_chi2_ref`, the scale of the 'psd' normalisation.
    pub chi2_ref: f64,
    /// Weighted variance of the times, D_t = <t^2>_w - <t>_w^2 (Baluev's effective baseline is sqrt(4 pi D_t)).
    pub t_var: f64,
    /// Baseline T = max t - min t (the "naive" method counts f_max T independent frequencies).
    pub baseline: f64,
}

impl SeriesStats {
    /// Statistics of `curve` for the given signal model (data always centred, as in this crate).
    pub fn new(curve: &LightCurve, model: SignalModel) -> SeriesStats {
        assert_eq!(curve.t.len(), curve.y.len(), "t and y differ in length");
        let dy = curve.dy.as_deref();
        let (t_var, baseline) = time_stats(&curve.t, dy);
        SeriesStats {
            n: curve.y.len(),
            model,
            chi2_ref: chi2_ref(&curve.y, dy),
            t_var,
            baseline,
        }
    }

    /// Natural log of the FAP of a periodogram maximum `z` (in `normalization`) over (0, `fmax`].
    /// Use this where the probability itself would underflow. `fmax` is the periodogram's highest
    /// frequency, as passed to astropy's `maximum_frequency` (see [`astropy_max_frequency`]).
    pub fn ln_false_alarm_probability(
        &self,
        z: f64,
        method: FapMethod,
        fmax: f64,
        normalization: Normalization,
    ) -> f64 {
        let ln_fs = ln_fap_single(z, self.n, normalization, self.model);
        match method {
            FapMethod::Naive => {
                // 1 - (1 - fap_s)^N_eff, N_eff = fmax T, as 1 - exp(-u), u = -N_eff ln(1 - fap_s)
                let n_eff = astropy_max_frequency(fmax, self.baseline) * self.baseline;
                let ln_minus_ln1m = if ln_fs < LN_TINY {
                    ln_fs // -ln(1 - s) = s (1 + s/2 + ...), s < 1e-304
                } else {
                    (-(-ln_fs.exp()).ln_1p()).ln()
                };
                ln_one_minus_exp_neg(n_eff.ln() + ln_minus_ln1m)
            }
            FapMethod::Davies => {
                let ln_tau = self.ln_tau_davies(z, fmax, normalization);
                ln_add_exp(ln_fs, ln_tau)
            }
            FapMethod::Baluev => {
                // 1 - (1 - fap_s) e^{-tau} = (1 - e^{-tau}) + fap_s e^{-tau}
                let ln_tau = self.ln_tau_davies(z, fmax, normalization);
                let tau = ln_tau.exp();
                ln_add_exp(ln_one_minus_exp_neg(ln_tau), ln_fs - tau)
            }
        }
    }

    /// FAP of a periodogram maximum `z` (in `normalization`) over (0, `fmax`]; see [`FapMethod`].
    pub fn false_alarm_probability(
        &self,
        z: f64,
        method: FapMethod,
        fmax: f64,
        normalization: Normalization,
    ) -> f64 {
        self.ln_false_alarm_probability(z, method, fmax, normalization)
            .exp()
    }

    /// ln tau of the Davies bound (Baluev 2008 Table 1, astropy `tau_davies`), W = fmax sqrt(4 pi D_t).
    fn ln_tau_davies(&self, z: f64, fmax: f64, normalization: Normalization) -> f64 {
        let fmax = astropy_max_frequency(fmax, self.baseline);
        let (dh, dk) = degrees_of_freedom(self.model);
        let nh = self.n as f64 - dh as f64;
        let nk = self.n as f64 - dk as f64;
        let ln_w = fmax.ln() + 0.5 * (4.0 * std::f64::consts::PI * self.t_var).ln();
        match normalization {
            Normalization::Psd => ln_w - z + 0.5 * z.ln(),
            Normalization::Standard => {
                ln_gamma_factor(nh)
                    + ln_w
                    + 0.5 * (nk - 1.0) * (-z).ln_1p()
                    + 0.5 * (0.5 * nh * z).ln()
            }
            Normalization::Model => {
                ln_gamma_factor(nk) + ln_w - 0.5 * nk * z.ln_1p() + 0.5 * (0.5 * nk * z).ln()
            }
            Normalization::Log => {
                ln_gamma_factor(nk) + ln_w - 0.5 * z * (nk - 0.5)
                    + 0.5 * (nk * (0.5 * z).sinh()).ln()
            }
        }
    }
}

/// Converts an astropy 'standard' power (the fraction of chi2_ref removed by the sinusoid) to another
/// normalisation, exactly as astropy's direct methods do, so that reported powers compare with astropy's.
///
/// `log` is evaluated as `-ln(1 - p)` like astropy (not `-ln_1p(-p)`), to reproduce its rounding.
pub fn convert_power(p_standard: f64, to: Normalization, stats: &SeriesStats) -> f64 {
    let p = p_standard;
    match to {
        Normalization::Standard => p,
        Normalization::Model => p / (1.0 - p),
        Normalization::Log => -(1.0 - p).ln(),
        Normalization::Psd => p * (0.5 * stats.chi2_ref),
    }
}

/// The search bandwidth astropy's `LombScargle.false_alarm_probability(maximum_frequency=fmax)` really
/// uses: `fmax` snapped to its default grid f_min + k df, df = 1/(5 T), f_min = df/2, k rounded half to
/// even like numpy (`autofrequency(return_freq_limits=True)`). It moves fmax by at most 1/(10 T), but
/// that is 1e-4 of the FAP of the test series, so every FAP here takes the requested `fmax` through it.
pub fn astropy_max_frequency(fmax: f64, baseline: f64) -> f64 {
    const SAMPLES_PER_PEAK: f64 = 5.0;
    let df = 1.0 / baseline / SAMPLES_PER_PEAK;
    let fmin = 0.5 * df;
    let nf = 1.0 + ((fmax - fmin) / df).round_ties_even();
    fmin + df * (nf - 1.0)
}

/// The approximations to the FAP of the highest peak that astropy offers in closed form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FapMethod {
    /// 1 - (1 - fap_single)^(f_max T): the peaks counted as f_max T independent trials.
    Naive,
    /// Davies upper bound fap_single + tau (Baluev 2008 eq. 5); it can exceed 1 for low powers.
    Davies,
    /// Baluev's alias-free approximation 1 - (1 - fap_single) e^{-tau} (eq. 6); astropy's default.
    Baluev,
}

impl FapMethod {
    pub const ALL: [FapMethod; 3] = [FapMethod::Naive, FapMethod::Davies, FapMethod::Baluev];
}

/// The parameter counts (d_H, d_K) of the null and the periodic hypothesis, astropy's convention: the data
/// are centred (or the mean fitted), so d_H = 1 and d_K = d_H + 2 = 3 for both signal models, and
/// N_H = N - 1, N_K = N - 3. (astropy's `false_alarm_probability` never passes other values.)
pub fn degrees_of_freedom(model: SignalModel) -> (usize, usize) {
    match model {
        SignalModel::FloatingMean | SignalModel::FixedMean => (1, 3),
    }
}

/// ln of the single-frequency FAP (1 - CDF of the power under pure Gaussian noise), Baluev 2008 Table 1:
/// exp(-z) (psd), (1-z)^(N_K/2) (standard), (1+z)^(-N_K/2) (model), exp(-N_K z/2) (log).
pub fn ln_fap_single(z: f64, n: usize, normalization: Normalization, model: SignalModel) -> f64 {
    let (_, dk) = degrees_of_freedom(model);
    let nk = n as f64 - dk as f64;
    match normalization {
        Normalization::Psd => -z,
        Normalization::Standard => 0.5 * nk * (-z).ln_1p(),
        Normalization::Model => -0.5 * nk * z.ln_1p(),
        Normalization::Log => -0.5 * nk * z,
    }
}

/// Single-frequency FAP (astropy `fap_single`): the probability that noise exceeds `z` at one given
/// frequency. Not the FAP of the highest peak; see [`false_alarm_probability`].
pub fn fap_single(z: f64, n: usize, normalization: Normalization, model: SignalModel) -> f64 {
    ln_fap_single(z, n, normalization, model).exp()
}

/// `n` bootstrap copies of `curve` for an empirical FAP: the (y, dy) pairs are drawn with replacement and
/// the times kept, as astropy's bootstrap does, so the window function (aliases) is preserved while any
/// periodic signal is destroyed. Deterministic for a `seed` (PCG64; not astropy's numpy stream).
pub fn bootstrap_resamples(curve: &LightCurve, n: usize, seed: u64) -> Vec<LightCurve> {
    let len = curve.y.len();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|b| {
            // u64 range: the draws do not depend on the platform's usize
            let idx: Vec<usize> = (0..len)
                .map(|_| rng.random_range(0..len as u64) as usize)
                .collect();
            LightCurve {
                name: format!("{}#boot{b}", curve.name),
                t: curve.t.clone(),
                y: idx.iter().map(|&i| curve.y[i]).collect(),
                dy: curve
                    .dy
                    .as_ref()
                    .map(|dy| idx.iter().map(|&i| dy[i]).collect()),
            }
        })
        .collect()
}

/// Bootstrap FAP of a peak `z`: the fraction of bootstrap periodogram maxima `>= z` (astropy's
/// `1 - searchsorted(sorted maxima, z) / n`). Its resolution is 1/n: any FAP below 1/n (every maximum
/// below `z`) is reported as 0, so use the analytic methods for the significance of strong peaks.
/// NaN when `maxima` is empty.
pub fn bootstrap_fap(z: f64, maxima: &[f64]) -> f64 {
    if maxima.is_empty() {
        return f64::NAN;
    }
    maxima.iter().filter(|&&m| m >= z).count() as f64 / maxima.len() as f64
}

// ---------------------------------------------------------------------------------------------------------

/// Below this ln, exp underflows (f64 min normal is e^-708.4): first-order expansions are exact there.
const LN_TINY: f64 = -700.0;

fn weight(dy: Option<&[f64]>, i: usize) -> f64 {
    dy.map_or(1.0, |d| 1.0 / (d[i] * d[i]))
}

fn weighted_mean(x: &[f64], dy: Option<&[f64]>) -> f64 {
    let (mut sw, mut swx) = (0.0, 0.0);
    for (i, &xi) in x.iter().enumerate() {
        let w = weight(dy, i);
        sw += w;
        swx += w * xi;
    }
    swx / sw
}

/// sum_i w_i (y_i - ybar_w)^2 (astropy `compute_chi2_ref`, centred data).
fn chi2_ref(y: &[f64], dy: Option<&[f64]>) -> f64 {
    let mu = weighted_mean(y, dy);
    y.iter()
        .enumerate()
        .map(|(i, &yi)| weight(dy, i) * (yi - mu) * (yi - mu))
        .sum()
}

/// (weighted variance of t, max t - min t); two-pass variance, equal to astropy's <t^2> - <t>^2.
fn time_stats(t: &[f64], dy: Option<&[f64]>) -> (f64, f64) {
    if let Some(d) = dy {
        assert_eq!(d.len(), t.len(), "t and dy differ in length");
    }
    let mu = weighted_mean(t, dy);
    let (mut sw, mut swv) = (0.0, 0.0);
    for (i, &ti) in t.iter().enumerate() {
        let w = weight(dy, i);
        sw += w;
        swv += w * (ti - mu) * (ti - mu);
    }
    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (swv / sw, hi - lo)
}

/// ln(e^a + e^b), exact when either is -inf.
fn ln_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// ln(1 - e^{-u}) from ln u, accurate for tiny u (where it is ln u) and for huge u (where it is -e^{-u}).
fn ln_one_minus_exp_neg(ln_u: f64) -> f64 {
    if ln_u < LN_TINY {
        return ln_u;
    }
    (-(-ln_u.exp()).exp_m1()).ln()
}

/// ln of astropy's `_gamma(N) = sqrt(2/N) Gamma(N/2) / Gamma((N-1)/2)` (-> 1 - 0.75/N for large N).
fn ln_gamma_factor(n: f64) -> f64 {
    0.5 * (2.0 / n).ln() + ln_gamma(0.5 * n) - ln_gamma(0.5 * (n - 1.0))
}

/// ln Gamma(x) for x > 0: upward recurrence to x >= 15, then the Stirling series (error < 1e-16 there).
fn ln_gamma(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    let mut x = x;
    let mut shift = 0.0;
    while x < 15.0 {
        shift += x.ln();
        x += 1.0;
    }
    let r = 1.0 / x;
    let r2 = r * r;
    // Bernoulli terms B_2k / (2k (2k-1) x^(2k-1)), k = 1..5
    let series = r
        * (1.0 / 12.0
            + r2 * (-1.0 / 360.0
                + r2 * (1.0 / 1260.0 + r2 * (-1.0 / 1680.0 + r2 * (1.0 / 1188.0)))));
    (x - 0.5) * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI).ln() + series - shift
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn oracle() -> Value {
        crate::oracle::vectors("lombscargle/ls_reference_vectors.json")
    }

    fn floats(v: &Value) -> Vec<f64> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|x| x.as_f64().expect("number"))
            .collect()
    }

    fn curve(o: &Value) -> LightCurve {
        LightCurve {
            name: "oracle".into(),
            t: floats(&o["t"]),
            y: floats(&o["y"]),
            dy: None,
        }
    }

    fn fmax(o: &Value) -> f64 {
        let g = &o["grid"];
        let (f0, df, nf) = (
            g["f0"].as_f64().unwrap(),
            g["df"].as_f64().unwrap(),
            g["nf"].as_u64().unwrap() as usize,
        );
        let p = floats(&o["power_standard_floating"]);
        assert_eq!(p.len(), nf);
        f0 + df * (nf - 1) as f64
    }

    fn rel(got: f64, want: f64) -> f64 {
        ((got - want) / want).abs()
    }

    const METHOD_KEYS: [(FapMethod, &str); 3] = [
        (FapMethod::Baluev, "baluev"),
        (FapMethod::Davies, "davies"),
        (FapMethod::Naive, "naive"),
    ];

    #[test]
    fn conversions_match_astropy_samples() {
        let o = oracle();
        let stats = SeriesStats::new(&curve(&o), SignalModel::FloatingMean);
        let p = floats(&o["power_standard_floating"]);
        let s = &o["samples"];
        let idx: Vec<usize> = s["index"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let mut worst = 0.0f64;
        for (norm, key) in [
            (Normalization::Psd, "psd_floating"),
            (Normalization::Model, "model_floating"),
            (Normalization::Log, "log_floating"),
        ] {
            let want = floats(&s[key]);
            for (k, &i) in idx.iter().enumerate() {
                let got = convert_power(p[i], norm, &stats);
                let r = rel(got, want[k]);
                worst = worst.max(r);
                assert!(
                    r < 1e-12,
                    "{key}[{i}]: {got:e} vs {:e} (rel {r:e})",
                    want[k]
                );
            }
            assert_eq!(
                convert_power(p[idx[0]], Normalization::Standard, &stats),
                p[idx[0]]
            );
        }
        eprintln!("conversions: worst relative difference {worst:e}");
    }

    /// The FAPs' promise (docs/lombscargle.md): astropy's to 1e-13 relative (4.9e-14 measured, at the
    /// 1e-99 peak; the formulas go through ln Γ, ln and exp, whose last bits differ between math libraries).
    const FAP_TOL: f64 = 1e-13;

    #[test]
    fn peak_faps_match_astropy() {
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        let peak = &o["peak"];
        let k = peak["index"].as_u64().unwrap() as usize;
        let z = peak["power_standard_floating"].as_f64().unwrap();
        assert_eq!(z, floats(&o["power_standard_floating"])[k]);
        for (m, key) in METHOD_KEYS {
            let want = peak["false_alarm_probability"][key].as_f64().unwrap();
            let got = SeriesStats::new(&c, SignalModel::FloatingMean).false_alarm_probability(
                z,
                m,
                fm,
                Normalization::Standard,
            );
            let r = rel(got, want);
            eprintln!("peak {key}: {got:e} vs {want:e} (rel {r:e})");
            assert!(got > 0.0 && r < FAP_TOL, "peak {key}: {got:e} vs {want:e}");
        }
    }

    #[test]
    fn level_faps_match_astropy() {
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        let lv = &o["false_alarm_probability_at_levels"];
        let levels = floats(&lv["power_levels"]);
        let stats = SeriesStats::new(&c, SignalModel::FloatingMean);
        for (m, key) in METHOD_KEYS {
            let want = floats(&lv[key]);
            for (&z, &w) in levels.iter().zip(&want) {
                let got = stats.false_alarm_probability(z, m, fm, Normalization::Standard);
                let r = rel(got, w);
                eprintln!("level {z} {key}: {got:.16e} vs {w:.16e} (rel {r:e})");
                assert!(r < FAP_TOL, "level {z} {key}: {got:e} vs {w:e}");
            }
        }
        // astropy's Davies bound exceeds 1 at low power; it is reproduced, not clipped
        let d = stats.false_alarm_probability(0.02, FapMethod::Davies, fm, Normalization::Standard);
        assert!(d > 1.0);
    }

    #[test]
    fn fap_is_invariant_under_normalization_change() {
        // every FAP is a function of the fitted fraction of chi2, so converting z must not change it
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        let stats = SeriesStats::new(&c, SignalModel::FloatingMean);
        for z in [0.01, 0.03, 0.05, 0.2, 0.6955] {
            for norm in [Normalization::Model, Normalization::Log] {
                let zc = convert_power(z, norm, &stats);
                let a = fap_single(z, c.t.len(), Normalization::Standard, stats.model);
                let b = fap_single(zc, c.t.len(), norm, stats.model);
                assert!(rel(b, a) < 1e-10, "single {norm:?} z={z}: {b:e} vs {a:e}");
                let a =
                    stats.false_alarm_probability(z, FapMethod::Naive, fm, Normalization::Standard);
                let b = stats.false_alarm_probability(zc, FapMethod::Naive, fm, norm);
                assert!(rel(b, a) < 1e-10, "naive {norm:?} z={z}: {b:e} vs {a:e}");
            }
        }
    }

    #[test]
    fn max_frequency_snaps_like_astropy() {
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        let t = SeriesStats::new(&c, SignalModel::FloatingMean).baseline;
        // the oracle's fmax = 960/T lies half-way between grid points k = 4799 and 4800 of
        // f_min + k/(5T): numpy rounds half to even, to 4800
        let snapped = astropy_max_frequency(fm, t);
        assert!(
            rel(snapped, fm * (1.0 + 1.0 / 9600.0)) < 1e-12,
            "{snapped} vs {fm}"
        );
        for f in [0.3, 1.0, 2.5, 10.0, 123.4] {
            let s = astropy_max_frequency(f, t);
            assert!(
                (s - f).abs() <= 0.5 / (5.0 * t) * (1.0 + 1e-9),
                "{f} -> {s}"
            );
            assert_eq!(astropy_max_frequency(s, t), s);
        }
    }

    #[test]
    fn baluev_is_a_decreasing_probability() {
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        for model in [SignalModel::FloatingMean, SignalModel::FixedMean] {
            let stats = SeriesStats::new(&c, model);
            for (norm, zmax) in [
                (Normalization::Standard, 1.0),
                (Normalization::Model, 50.0),
                (Normalization::Log, 5.0),
                (Normalization::Psd, 800.0),
            ] {
                let mut prev = f64::INFINITY;
                for i in 0..=2000 {
                    let z = zmax * i as f64 / 2000.0;
                    let f = stats.false_alarm_probability(z, FapMethod::Baluev, fm, norm);
                    assert!((0.0..=1.0).contains(&f), "{norm:?} z={z}: {f}");
                    assert!(
                        f <= prev,
                        "{norm:?} not decreasing at z={z}: {f:e} > {prev:e}"
                    );
                    prev = f;
                }
                assert_eq!(
                    stats.false_alarm_probability(0.0, FapMethod::Baluev, fm, norm),
                    1.0
                );
            }
        }
    }

    #[test]
    fn log_space_survives_underflow() {
        let o = oracle();
        let c = curve(&o);
        let fm = fmax(&o);
        let stats = SeriesStats::new(&c, SignalModel::FloatingMean);
        // (1 - 0.99)^198.5 = 1e-397: below f64, but its log is finite and exact
        let nk = (c.t.len() - 3) as f64;
        let ln_s = ln_fap_single(0.99, c.t.len(), Normalization::Standard, stats.model);
        assert!(rel(ln_s, 0.5 * nk * (0.01f64).ln()) < 1e-14);
        assert_eq!(
            fap_single(0.99, c.t.len(), Normalization::Standard, stats.model),
            0.0
        );
        for m in FapMethod::ALL {
            let l = stats.ln_false_alarm_probability(0.99, m, fm, Normalization::Standard);
            assert!(l.is_finite() && l < -800.0, "{m:?}: {l}");
            // in the representable range, ln and plain agree
            let l = stats.ln_false_alarm_probability(0.6955, m, fm, Normalization::Standard);
            let p = stats.false_alarm_probability(0.6955, m, fm, Normalization::Standard);
            assert!(rel(l.exp(), p) < 1e-15);
        }
        // naive ~ N_eff * fap_single when tiny
        let l =
            stats.ln_false_alarm_probability(0.99, FapMethod::Naive, fm, Normalization::Standard);
        let n_eff = astropy_max_frequency(fm, stats.baseline) * stats.baseline;
        assert!((l - (ln_s + n_eff.ln())).abs() < 1e-12);
    }

    #[test]
    fn errors_weight_the_statistics() {
        let o = oracle();
        let mut c = curve(&o);
        let fm = fmax(&o);
        let plain = SeriesStats::new(&c, SignalModel::FloatingMean);
        // uniform errors: chi2_ref scales by 1/dy^2, the time statistics do not change
        c.dy = Some(vec![0.5; c.t.len()]);
        let s = SeriesStats::new(&c, SignalModel::FloatingMean);
        assert!(rel(s.chi2_ref, 4.0 * plain.chi2_ref) < 1e-13);
        assert!(rel(s.t_var, plain.t_var) < 1e-13);
        let a = plain.false_alarm_probability(0.05, FapMethod::Baluev, fm, Normalization::Standard);
        let b = s.false_alarm_probability(0.05, FapMethod::Baluev, fm, Normalization::Standard);
        assert!(rel(a, b) < 1e-12);
        // heavy weight on the first half shortens the effective baseline: a smaller tau, a smaller FAP
        let n = c.t.len();
        c.dy = Some((0..n).map(|i| if i < n / 2 { 0.1 } else { 10.0 }).collect());
        let w = SeriesStats::new(&c, SignalModel::FloatingMean);
        assert!(w.t_var < 0.5 * plain.t_var);
        let d = w.false_alarm_probability(0.05, FapMethod::Baluev, fm, Normalization::Standard);
        assert!(d < a);
        assert_eq!(w.baseline, plain.baseline);
    }

    #[test]
    fn ln_gamma_is_accurate() {
        // Gamma(1/2) = sqrt(pi), Gamma(n) = (n-1)!
        assert!((ln_gamma(0.5) - 0.5 * std::f64::consts::PI.ln()).abs() < 1e-14);
        let mut fact = 1.0f64;
        for n in 1..40 {
            let (got, want) = (ln_gamma(n as f64 + 1.0), fact.ln());
            assert!(
                (got - want).abs() < 1e-14 * want.max(1.0),
                "ln {n}! {got} vs {want}"
            );
            fact *= (n + 1) as f64;
        }
        // astropy: _gamma(N) ~ 1 - 0.75/N
        let g = ln_gamma_factor(399.0).exp();
        assert!((g - (1.0 - 0.75 / 399.0)).abs() < 1e-5);
    }

    #[test]
    fn bootstrap_is_deterministic_and_keeps_times() {
        let c = LightCurve {
            name: "toy".into(),
            t: (0..57)
                .map(|i| i as f64 * 0.37 + (i * i) as f64 * 1e-3)
                .collect(),
            y: (0..57).map(|i| (i as f64).sin()).collect(),
            dy: Some((0..57).map(|i| 0.1 + i as f64 * 0.01).collect()),
        };
        let a = bootstrap_resamples(&c, 20, 7);
        let b = bootstrap_resamples(&c, 20, 7);
        let other = bootstrap_resamples(&c, 20, 8);
        assert_eq!(a.len(), 20);
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_ne!(a[0].y, a[1].y);
        for r in &a {
            assert_eq!(r.t, c.t);
            let dy = r.dy.as_ref().unwrap();
            assert_eq!(r.y.len(), c.y.len());
            // every (y, dy) is an original pair
            for (y, e) in r.y.iter().zip(dy) {
                let j = c.y.iter().position(|v| v == y).unwrap();
                assert_eq!(c.dy.as_ref().unwrap()[j], *e);
            }
        }
        let no_err = LightCurve {
            dy: None,
            ..c.clone()
        };
        assert!(bootstrap_resamples(&no_err, 3, 1)
            .iter()
            .all(|r| r.dy.is_none()));
    }

    #[test]
    fn bootstrap_fap_counts_maxima() {
        let m = [0.4, 0.1, 0.3, 0.2];
        assert_eq!(bootstrap_fap(0.25, &m), 0.5);
        assert_eq!(bootstrap_fap(0.2, &m), 0.75); // ties count as exceeding
        assert_eq!(bootstrap_fap(0.05, &m), 1.0);
        assert_eq!(bootstrap_fap(0.5, &m), 0.0); // below the 1/n resolution
        assert!(bootstrap_fap(0.5, &[]).is_nan());
    }
}
