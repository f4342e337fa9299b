//! Deterministic light-curve generators and frequency grids for the presets (docs/lombscargle.md, Presets).
//!
//! * `ci`: [`ci_series`] (CoRoT-like, N_t = 1e4) on [`ci_grid`] (culsp grid, F_over 8, F_high 1 ⇒ 40,192).
//! * `corot`: [`corot_like`]`(`[`COROT_N_T`]`, seed)` on [`culsp_grid`]`(t, 8, 1)` ⇒ N_f = 1,528,064.
//! * `survey`: [`survey`] / [`survey_truth`], ZTF-like short curves on one shared grid of 365,000.
//!
//! Everything is a pure function of its arguments (PCG64 seeded from `seed`), so a preset
//! regenerates the same data on every machine without shipping files.

use super::{FrequencyGrid, LightCurve};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::f64::consts::TAU;

/// N_t of the CoRoT problem in culsp (Townsend 2010).
pub const COROT_N_T: usize = 382_003;
/// N_t of the `ci` preset.
pub const CI_N_T: usize = 10_000;
/// Span of the CoRoT-like series, days.
pub const COROT_SPAN: f64 = 150.0;
/// Pulsation period injected in the CoRoT-like series, days (as the Python oracle generator).
pub const COROT_PERIOD: f64 = 0.18;
/// culsp's oversampling and high-frequency factors for the `ci` and `corot` presets.
pub const CULSP_F_OVER: f64 = 8.0;
pub const CULSP_F_HIGH: f64 = 1.0;

/// Survey baseline (days) and the shared grid: f_k = (k+1)/(10·730), k < 365,000, i.e. 10× oversampled
/// over the baseline up to f_max = 50 c/d (0.02-d periods, 5× above the fastest injected 0.1-d signal);
/// 365K frequencies × ~150 points is the size of cuvarbase's ZTF benchmark.
pub const SURVEY_BASELINE: f64 = 730.0;
pub const SURVEY_N_F: usize = 365_000;

/// culsp's uniform grid (Townsend 2010; tests/data/lombscargle/make_vectors.py): T = max−min of `t`,
/// df = 1/(F_over·T), f_max = F_high·N_t/(2T), nf = floor(f_max/df)+1 rounded up to a multiple of 256
/// (culsp's block size, kept so our N_f match the published ones), f_k = (k+1)·df.
///
/// Same floating-point expression order as the Python generator, so the oracle grid is reproduced bit for bit.
/// Panics unless `t` has two distinct finite times and F_over, F_high are positive.
pub fn culsp_grid(t: &[f64], f_over: f64, f_high: f64) -> FrequencyGrid {
    let (lo, hi) = t
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let span = hi - lo;
    assert!(
        span.is_finite() && span > 0.0,
        "culsp_grid needs two distinct finite times"
    );
    assert!(
        f_over > 0.0 && f_high > 0.0,
        "F_over and F_high must be > 0"
    );
    let df = 1.0 / (f_over * span);
    let f_max = f_high * t.len() as f64 / (2.0 * span);
    let nf = ((f_max / df) as usize + 1).div_ceil(256) * 256;
    FrequencyGrid::Uniform { f0: df, df, n: nf }
}

/// Standard normal deviate by Box-Muller (rand_distr is not a dependency); one of the pair is enough here.
fn normal(rng: &mut Pcg64) -> f64 {
    let u1 = 1.0 - rng.random::<f64>(); // (0, 1]: ln is finite
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos()
}

/// Observed (gap-free) intervals of a CoRoT-like run inside [0, span]: every ~103-min orbit loses a
/// 10–14 % slice (mean duty 12 %, random phase), and 3 data gaps of 1.5–3 d, one in each third of the run.
fn corot_windows(rng: &mut Pcg64, span: f64) -> Vec<(f64, f64)> {
    let orbit = 103.0 / 1440.0;
    let mut gaps: Vec<(f64, f64)> = (0..3)
        .map(|k| {
            let third = span / 3.0;
            let c = third * (k as f64 + rng.random_range(0.3..0.7));
            let w = rng.random_range(1.5..3.0);
            (c - 0.5 * w, c + 0.5 * w)
        })
        .collect();
    let mut s = -orbit * rng.random::<f64>();
    while s < span {
        gaps.push((s, s + orbit * rng.random_range(0.10..0.14)));
        s += orbit;
    }
    gaps.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Complement of the union of gaps within [0, span].
    let mut windows = Vec::with_capacity(gaps.len() + 1);
    let mut cursor = 0.0f64;
    for (a, b) in gaps {
        let a = a.min(span);
        if a > cursor {
            windows.push((cursor, a));
        }
        cursor = cursor.max(b);
    }
    if cursor < span {
        windows.push((cursor, span));
    }
    windows
}

/// A CoRoT-like series of exactly `n_t` points over 150 d (the culsp benchmark of Townsend 2010).
///
/// Times: the points are spread uniformly, with ±20 %-of-cadence jitter, over the *observed* time only
/// (orbital gaps of ~103-min period and 12 % mean duty, plus 3 multi-day gaps; see `corot_windows`) and
/// mapped back to clock time, so exactly `n_t` points remain, none in a gap, strictly increasing, in
/// [0, 150]. The mean spacing over the run is ≈ 150 d/n_t (33.9 s for 382,003); inside the observed
/// windows the cadence is correspondingly denser (≈ 28.7 s).
/// Values (mag): 12.3 + 10 mmag·sin(2π t/0.18 d + φ1) + 3 mmag·sin(4π t/0.18 d + φ2) + 4 mmag N(0,1),
/// random phases; `dy = None` (unit weights, as culsp). Deterministic for `(n_t, seed)`; O(n_t).
pub fn corot_like(n_t: usize, seed: u64) -> LightCurve {
    let mut rng = Pcg64::seed_from_u64(seed);
    let windows = corot_windows(&mut rng, COROT_SPAN);
    let observed: f64 = windows.iter().map(|(a, b)| b - a).sum();
    let cadence = observed / n_t.max(1) as f64;
    let w_freq = TAU / COROT_PERIOD;
    let phi1 = TAU * rng.random::<f64>();
    let phi2 = TAU * rng.random::<f64>();

    let mut t = Vec::with_capacity(n_t);
    let mut y = Vec::with_capacity(n_t);
    let (mut j, mut start) = (0usize, 0.0f64); // current window and observed time before it
    for i in 0..n_t {
        // u: position in observed time, strictly increasing in i (jitter < half a cadence).
        let u = (i as f64 + 0.5 + rng.random_range(-0.2..0.2)) * cadence;
        while j + 1 < windows.len() && u >= start + (windows[j].1 - windows[j].0) {
            start += windows[j].1 - windows[j].0;
            j += 1;
        }
        let (a, b) = windows[j];
        let ti = (a + (u - start)).clamp(a, b);
        let x = w_freq * ti;
        t.push(ti);
        y.push(
            12.3 + 0.010 * (x + phi1).sin()
                + 0.003 * (2.0 * x + phi2).sin()
                + 0.004 * normal(&mut rng),
        );
    }
    LightCurve {
        name: "corot-like".to_string(),
        t,
        y,
        dy: None,
    }
}

/// The `ci` preset's series: `corot_like(1e4, seed)` (150 d), small enough for an f64 CPU reference.
pub fn ci_series(seed: u64) -> LightCurve {
    corot_like(CI_N_T, seed)
}

/// The `ci` (and `corot`) grid: culsp's F_over = 8, F_high = 1 ⇒ 40,192 frequencies for N_t = 1e4
/// (1,528,064 for N_t = 382,003), about 4·N_t.
pub fn ci_grid(t: &[f64]) -> FrequencyGrid {
    culsp_grid(t, CULSP_F_OVER, CULSP_F_HIGH)
}

/// One survey light curve with its injected signal, so tests can check the recovered period.
#[derive(Debug, Clone, PartialEq)]
pub struct SurveyCurve {
    pub curve: LightCurve,
    /// Injected period, days (log-uniform in [0.1, 10]).
    pub period: f64,
    /// Injected semi-amplitude, mag (uniform in [0.05, 0.5]).
    pub amplitude: f64,
}

/// The shared survey grid: f0 = df = 1/(10·730) c/d, n = 365,000 ⇒ f_max = 50 c/d (see [`SURVEY_N_F`]).
/// Not a multiple of 256: kernels must handle a ragged last block anyway (`FrequencyGrid::Given`).
pub fn survey_grid() -> FrequencyGrid {
    let df = 1.0 / (10.0 * SURVEY_BASELINE);
    FrequencyGrid::Uniform {
        f0: df,
        df,
        n: SURVEY_N_F,
    }
}

/// Per-curve seed: curve `i` depends only on `(seed, i)` (SplitMix64 finaliser), so a survey of n curves
/// is a prefix of a larger one and curves can be generated in any order.
fn curve_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One ZTF-like curve: 120–180 points on distinct nights of a 730-d baseline, skipping a 90–150-d
/// seasonal gap each year (object-dependent phase) and random other nights (weather, scheduling);
/// each at a night-time fraction 0.1–0.4 d, so times are distinct and sorted by construction.
/// Signal: mean 15–20 mag + A·sin(2π t/P + φ) + dy_i·N(0,1) with dy_i uniform in [0.01, 0.05].
fn survey_curve(seed: u64, i: usize) -> SurveyCurve {
    let mut rng = Pcg64::seed_from_u64(curve_seed(seed, i as u64));
    let n = rng.random_range(120..=180usize);
    let season_start = rng.random_range(0.0..365.0);
    let season_len = rng.random_range(90.0..150.0);
    let mut nights: Vec<u32> = (0..SURVEY_BASELINE as u32)
        .filter(|&d| {
            let phase = (d as f64 - season_start).rem_euclid(365.0);
            phase >= season_len
        })
        .collect();
    // Partial Fisher-Yates: the first n entries become a uniform random subset of the visible nights.
    for k in 0..n {
        let r = rng.random_range(k..nights.len());
        nights.swap(k, r);
    }
    nights.truncate(n);
    nights.sort_unstable();

    let period = 10f64.powf(rng.random_range(-1.0..1.0));
    let amplitude = rng.random_range(0.05..0.5);
    let mean = rng.random_range(15.0..20.0);
    let phi = TAU * rng.random::<f64>();
    let t: Vec<f64> = nights
        .iter()
        .map(|&d| d as f64 + rng.random_range(0.1..0.4))
        .collect();
    let dy: Vec<f64> = (0..n).map(|_| rng.random_range(0.01..0.05)).collect();
    let y = t
        .iter()
        .zip(&dy)
        .map(|(&ti, &e)| mean + amplitude * (TAU * ti / period + phi).sin() + e * normal(&mut rng))
        .collect();
    SurveyCurve {
        curve: LightCurve {
            name: format!("lc{:06}", i + 1),
            t,
            y,
            dy: Some(dy),
        },
        period,
        amplitude,
    }
}

/// The survey preset with its ground truth: `n_curves` ZTF-like curves ("lc000001", ...) and the shared grid.
pub fn survey_truth(n_curves: usize, seed: u64) -> (Vec<SurveyCurve>, FrequencyGrid) {
    let curves = (0..n_curves).map(|i| survey_curve(seed, i)).collect();
    (curves, survey_grid())
}

/// The survey preset: the curves of [`survey_truth`] without the injected parameters.
pub fn survey(n_curves: usize, seed: u64) -> (Vec<LightCurve>, FrequencyGrid) {
    let (curves, grid) = survey_truth(n_curves, seed);
    (curves.into_iter().map(|s| s.curve).collect(), grid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Least-squares semi-amplitude of a sinusoid at `f` with a floating mean (3×3 normal equations).
    fn ls_amplitude(t: &[f64], y: &[f64], f: f64) -> f64 {
        let mut m = [[0.0f64; 3]; 3];
        let mut r = [0.0f64; 3];
        for (&ti, &yi) in t.iter().zip(y) {
            let v = [1.0, (TAU * f * ti).cos(), (TAU * f * ti).sin()];
            for a in 0..3 {
                r[a] += v[a] * yi;
                for b in 0..3 {
                    m[a][b] += v[a] * v[b];
                }
            }
        }
        let det = |m: &[[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let d = det(&m);
        let coef = |c: usize| {
            let mut mc = m;
            for a in 0..3 {
                mc[a][c] = r[a];
            }
            det(&mc) / d
        };
        coef(1).hypot(coef(2))
    }

    fn strictly_increasing(t: &[f64]) -> bool {
        t.windows(2).all(|w| w[1] > w[0])
    }

    #[test]
    fn culsp_grid_reproduces_oracle() {
        let v = crate::oracle::vectors("lombscargle/ls_reference_vectors.json");
        let t: Vec<f64> = v["t"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(t.len(), 400);
        let g = &v["grid"];
        let (f_over, f_high) = (g["F_over"].as_f64().unwrap(), g["F_high"].as_f64().unwrap());
        let FrequencyGrid::Uniform { f0, df, n } = culsp_grid(&t, f_over, f_high) else {
            panic!("culsp grid is uniform")
        };
        let rel = |a: f64, b: f64| ((a - b) / b).abs();
        assert!(rel(f0, g["f0"].as_f64().unwrap()) <= 1e-15);
        assert!(rel(df, g["df"].as_f64().unwrap()) <= 1e-15);
        assert_eq!(n as u64, g["nf"].as_u64().unwrap());
    }

    #[test]
    fn corot_size_grid_is_culsp() {
        for seed in [0, 1, 2010] {
            let start = std::time::Instant::now();
            let lc = corot_like(COROT_N_T, seed);
            let dt = start.elapsed().as_secs_f64();
            eprintln!("corot_like({COROT_N_T}, {seed}): {dt:.3} s");
            assert!(dt < 5.0, "generator far too slow: {dt} s");
            assert_eq!(lc.t.len(), COROT_N_T);
            assert_eq!(culsp_grid(&lc.t, 8.0, 1.0).len(), 1_528_064);
        }
        assert_eq!(ci_grid(&ci_series(7).t).len(), 40_192);
    }

    #[test]
    fn corot_like_shape_and_gaps() {
        for n_t in [1, 2, 1000, CI_N_T, COROT_N_T] {
            let lc = corot_like(n_t, 42);
            assert_eq!(lc.name, "corot-like");
            assert_eq!((lc.t.len(), lc.y.len()), (n_t, n_t));
            assert!(lc.dy.is_none());
            assert!(strictly_increasing(&lc.t));
            assert!(lc.t.iter().all(|&x| (0.0..=COROT_SPAN).contains(&x)));
        }
        // Gap duty from the full-size series: orbital gaps span ~25 cadences, multi-day ones > 1 d.
        for seed in [3, 4] {
            let t = corot_like(COROT_N_T, seed).t;
            let mut d: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
            let span = t[t.len() - 1] - t[0];
            let big: Vec<f64> = d.iter().copied().filter(|&x| x > 1.0).collect();
            assert_eq!(big.len(), 3, "three multi-day gaps");
            d.sort_by(f64::total_cmp);
            let median = d[d.len() / 2];
            let orbital: f64 = d
                .iter()
                .filter(|&&x| x > 3.0 * median && x <= 1.0)
                .map(|x| x - median)
                .sum();
            let duty = orbital / (span - big.iter().sum::<f64>());
            eprintln!("seed {seed}: orbital gap duty {duty:.4}, median spacing {median:.3e} d");
            assert!((duty - 0.12).abs() < 0.02, "duty {duty}");
        }
    }

    #[test]
    fn corot_like_is_deterministic_per_seed() {
        assert_eq!(corot_like(5000, 9), corot_like(5000, 9));
        let (a, b) = (corot_like(5000, 9), corot_like(5000, 10));
        assert_ne!(a.t, b.t);
        assert_ne!(a.y, b.y);
    }

    #[test]
    fn corot_like_carries_the_pulsation() {
        for lc in [ci_series(5), corot_like(COROT_N_T, 5)] {
            let amp = ls_amplitude(&lc.t, &lc.y, 1.0 / COROT_PERIOD);
            assert!((amp - 0.010).abs() < 0.001, "amplitude {amp}");
            let off = ls_amplitude(&lc.t, &lc.y, 1.0 / 0.25);
            assert!(off < 0.001, "no signal at 4 c/d: {off}");
        }
    }

    #[test]
    fn survey_shape_and_truth() {
        let (curves, grid) = survey_truth(200, 11);
        assert_eq!(curves.len(), 200);
        for (i, s) in curves.iter().enumerate() {
            let lc = &s.curve;
            assert_eq!(lc.name, format!("lc{:06}", i + 1));
            assert!((120..=180).contains(&lc.t.len()));
            assert_eq!(lc.y.len(), lc.t.len());
            let dy = lc.dy.as_ref().expect("survey curves carry dy");
            assert_eq!(dy.len(), lc.t.len());
            assert!(dy.iter().all(|&e| (0.01..=0.05).contains(&e)));
            assert!(strictly_increasing(&lc.t));
            assert!(lc.t[0] >= 0.0 && lc.t[lc.t.len() - 1] <= SURVEY_BASELINE);
            assert!((0.1..=10.0).contains(&s.period));
            assert!((0.05..=0.5).contains(&s.amplitude));
            let amp = ls_amplitude(&lc.t, &lc.y, 1.0 / s.period);
            assert!(
                (amp - s.amplitude).abs() < 0.04,
                "{}: {amp} vs {}",
                lc.name,
                s.amplitude
            );
        }
        assert!(curves[..20]
            .iter()
            .any(|s| s.curve.t.len() != curves[0].curve.t.len()));
        let FrequencyGrid::Uniform { f0, df, n } = grid else {
            panic!("survey grid is uniform")
        };
        assert_eq!((f0, df, n), (1.0 / 7300.0, 1.0 / 7300.0, 365_000));
        assert!((grid.max_frequency() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn survey_is_deterministic_and_prefix_stable() {
        let (a, ga) = survey(30, 5);
        let (b, gb) = survey(30, 5);
        assert_eq!((&a, &ga), (&b, &gb));
        assert_eq!(survey(10, 5).0[..], a[..10]);
        let (c, _) = survey(30, 6);
        assert_ne!(a[0].t, c[0].t);
        assert_ne!(a[0].y, c[0].y);
    }
}
