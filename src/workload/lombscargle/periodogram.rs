//! Lomb-Scargle as an astronomer calls it. [`LombScargle`] is one light curve with astropy's verbs
//! (`autofrequency`, `power`, `false_alarm_probability`, `model`); [`analyse`] takes many curves at once and
//! returns their periodograms, highest peaks and false-alarm probabilities, which `astroport periodogram`
//! writes out.

use super::args::MethodArg;
use super::fap::{self, FapMethod, SeriesStats};
use super::{
    generate, top_k, FrequencyGrid, LightCurve, LombScargleProblem, LsMode, Normalization, Output,
    Peak, Prepared, SignalModel, SEED,
};
use crate::backend::{Precision, Target};
use crate::exec::RunOptions;

/// One light curve and how its periodogram is normalised, as astropy's `LombScargle(t, y, dy)`.
///
/// ```no_run
/// use astroport::workload::lombscargle::LombScargle;
/// use astroport::backend::Precision;
/// let t: Vec<f64> = (0..300).map(|i| i as f64 * 0.37).collect();
/// let y: Vec<f64> = t.iter().map(|t| (2.0 * std::f64::consts::PI * t / 3.3).sin()).collect();
/// let ls = LombScargle::new(t, y, None).unwrap();
/// let grid = ls.autofrequency(5.0, 1.0).unwrap();
/// let power = ls.power(&grid, &astroport::backend::open("cpu").unwrap(), Precision::F64).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LombScargle {
    curve: LightCurve,
    model: SignalModel,
    normalization: Normalization,
    method: MethodArg,
    tolerance: f64,
}

impl LombScargle {
    /// A series of times, values and optional 1σ errors (at least MIN_POINTS = 4 points, all finite, errors positive,
    /// values not constant).
    pub fn new(t: Vec<f64>, y: Vec<f64>, dy: Option<Vec<f64>>) -> Result<Self, String> {
        Self::from_curve(LightCurve {
            name: "series".into(),
            t,
            y,
            dy,
        })
    }

    /// A light curve read from a file ([`super::io::read_light_curves`]) or built by hand.
    pub fn from_curve(curve: LightCurve) -> Result<Self, String> {
        let bad = |what: &str, k: usize, v: f64| format!("{}: {what}[{k}] = {v}", curve.name);
        for (what, values) in [("t", &curve.t), ("y", &curve.y)] {
            if let Some((k, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(bad(what, k, *v));
            }
        }
        if let Some(dy) = &curve.dy {
            if let Some((k, v)) = dy
                .iter()
                .enumerate()
                .find(|(_, v)| !(**v > 0.0 && v.is_finite()))
            {
                return Err(bad("dy", k, *v) + " (errors must be positive and finite)");
            }
        }
        Prepared::new(&curve)?;
        Ok(LombScargle {
            curve,
            model: SignalModel::FloatingMean,
            normalization: Normalization::Standard,
            method: MethodArg::Auto,
            tolerance: super::NUFFT_TOLERANCE,
        })
    }

    /// astropy's `fit_mean`: true (the default) fits a floating mean at every frequency (generalised
    /// Lomb-Scargle); false is the classic periodogram of the centred data (culsp).
    pub fn fit_mean(mut self, floating: bool) -> Self {
        self.model = if floating {
            SignalModel::FloatingMean
        } else {
            SignalModel::FixedMean
        };
        self
    }

    /// The normalisation of the powers this object returns (astropy's; default standard).
    pub fn normalization(mut self, normalization: Normalization) -> Self {
        self.normalization = normalization;
        self
    }

    /// How `power` computes the sums (astropy's `method`): direct, nufft (uniform grids, float64) or auto
    /// (the default: the cost model's choice for this curve, grid and backend).
    pub fn method(mut self, method: MethodArg) -> Self {
        self.method = method;
        self
    }

    /// The nufft method's accuracy: largest absolute error in standard power (default 1e-9).
    pub fn tolerance(mut self, tolerance: f64) -> Self {
        self.tolerance = tolerance;
        self
    }

    pub fn curve(&self) -> &LightCurve {
        &self.curve
    }

    /// A uniform grid as astropy's `autofrequency`: spacing 1/(samples_per_peak·T) up to nyquist_factor
    /// times the mean Nyquist frequency N/(2T), T the time span. Like culsp (not astropy) the grid starts
    /// at one spacing, and its length is rounded up to a multiple of 256.
    pub fn autofrequency(
        &self,
        samples_per_peak: f64,
        nyquist_factor: f64,
    ) -> Result<FrequencyGrid, String> {
        culsp_grid(&self.curve, samples_per_peak, nyquist_factor)
    }

    /// The periodogram on `grid`, on one backend, in this object's normalisation, by this object's method
    /// (`precision` is the direct sums'; the NUFFT is float64).
    pub fn power(
        &self,
        grid: &FrequencyGrid,
        backend: &Target,
        precision: Precision,
    ) -> Result<Vec<f64>, String> {
        let problem = LombScargleProblem::new(
            "api",
            vec![self.curve.clone()],
            vec![grid.clone()],
            self.model,
            Output::Full,
        )?
        .with_tolerance(self.tolerance)?;
        let on_device = matches!(backend, Target::Device(_));
        let (mode, _) = self.method.resolve(&problem, precision, on_device);
        let m = {
            use crate::workload::Workload;
            problem
                .execute(backend, mode, &RunOptions::once())
                .map_err(|e| e.to_string())?
        };
        let stats = self.stats();
        let power = m.output.components.into_iter().next().unwrap_or_default();
        if power.len() != grid.len() || power.iter().any(|p| !p.is_finite()) {
            return Err(format!(
                "{}: the periodogram has missing or non-finite values",
                backend.id()
            ));
        }
        Ok(power
            .into_iter()
            .map(|z| fap::convert_power(z, self.normalization, &stats))
            .collect())
    }

    /// The false-alarm probability of a periodogram maximum `power` (in this object's normalisation) over
    /// frequencies up to `max_frequency`, by one of astropy's closed forms.
    pub fn false_alarm_probability(
        &self,
        power: f64,
        method: FapMethod,
        max_frequency: f64,
    ) -> f64 {
        self.stats()
            .false_alarm_probability(power, method, max_frequency, self.normalization)
    }

    /// The best-fit sinusoid at `frequency`, evaluated at times `t` (astropy's `model`): a weighted least
    /// squares fit of the data (weights 1/dy²) by mean + a·sin(2πft) + b·cos(2πft), the mean fitted with the
    /// sinusoid (floating mean) or taken as the weighted mean (fixed mean).
    pub fn model(&self, t: &[f64], frequency: f64) -> Vec<f64> {
        let c = &self.curve;
        let w: Vec<f64> = match &c.dy {
            Some(dy) => dy.iter().map(|e| 1.0 / (e * e)).collect(),
            None => vec![1.0; c.t.len()],
        };
        let total: f64 = w.iter().sum();
        let mean = w.iter().zip(&c.y).map(|(w, y)| w * y).sum::<f64>() / total;
        let omega = 2.0 * std::f64::consts::PI * frequency;
        let floating = self.model == SignalModel::FloatingMean;
        let columns = |t: f64| {
            let (s, c) = (omega * t).sin_cos();
            [s, c, if floating { 1.0 } else { 0.0 }]
        };
        // Normal equations XᵀWX θ = XᵀW(y − mean); the constant column is absent for the fixed mean.
        let size = if floating { 3 } else { 2 };
        let mut a = [[0.0f64; 3]; 3];
        let mut b = [0.0f64; 3];
        for ((&ti, &yi), &wi) in c.t.iter().zip(&c.y).zip(&w) {
            let x = columns(ti);
            for r in 0..size {
                b[r] += wi * x[r] * (yi - mean);
                for s in 0..size {
                    a[r][s] += wi * x[r] * x[s];
                }
            }
        }
        let theta = solve(a, b, size);
        t.iter()
            .map(|&ti| {
                let x = columns(ti);
                mean + (0..size).map(|r| x[r] * theta[r]).sum::<f64>()
            })
            .collect()
    }

    fn stats(&self) -> SeriesStats {
        SeriesStats::new(&self.curve, self.model)
    }
}

/// Solves the normal equations a x = b (the leading `size`×`size` block; a is symmetric and positive
/// semi-definite) by symmetric elimination, pivoting on the largest remaining diagonal. Once that diagonal is
/// below 1e-12 of the largest one, the remaining columns are (numerically) combinations of those already
/// taken, as the sine at the Nyquist frequency of evenly sampled data: their coefficients are 0, and the
/// fit of the taken columns is the least-squares fit.
fn solve(mut a: [[f64; 3]; 3], mut b: [f64; 3], size: usize) -> [f64; 3] {
    let scale = (0..size).map(|r| a[r][r]).fold(0.0, f64::max);
    let mut order = [0usize, 1, 2];
    let mut rank = 0;
    while rank < size {
        let k = rank;
        let p = (k..size)
            .max_by(|&p, &q| a[p][p].total_cmp(&a[q][q]))
            .unwrap_or(k);
        // The same permutation on rows and columns keeps the matrix symmetric.
        a.swap(k, p);
        for row in a.iter_mut() {
            row.swap(k, p);
        }
        b.swap(k, p);
        order.swap(k, p);
        if a[k][k].is_nan() || a[k][k] <= 1e-12 * scale {
            break;
        }
        let pivot_row = a[k];
        for r in k + 1..size {
            let f = a[r][k] / pivot_row[k];
            for (x, p) in a[r][k..size].iter_mut().zip(&pivot_row[k..size]) {
                *x -= f * p;
            }
            b[r] -= f * b[k];
        }
        rank += 1;
    }
    let mut taken = [0.0; 3];
    for r in (0..rank).rev() {
        let rest: f64 = (r + 1..rank).map(|s| a[r][s] * taken[s]).sum();
        taken[r] = (b[r] - rest) / a[r][r];
    }
    let mut x = [0.0; 3];
    for (k, &column) in order.iter().enumerate().take(size) {
        x[column] = taken[k];
    }
    x
}

/// culsp's grid for a curve, or why the curve has none (fewer than two distinct times).
fn culsp_grid(curve: &LightCurve, f_over: f64, f_high: f64) -> Result<FrequencyGrid, String> {
    if !(f_over > 0.0 && f_over.is_finite() && f_high > 0.0 && f_high.is_finite()) {
        return Err(format!(
            "oversampling {f_over:?} and Nyquist factor {f_high:?} must both be positive and finite"
        ));
    }
    let (lo, hi) = curve
        .t
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if !(hi - lo > 0.0 && (hi - lo).is_finite()) {
        return Err(format!(
            "{}: all times are equal: no frequency grid",
            curve.name
        ));
    }
    Ok(generate::culsp_grid(&curve.t, f_over, f_high))
}

/// The frequencies of every curve in [`analyse`].
#[derive(Debug, Clone)]
pub enum GridChoice {
    /// culsp's grid per curve: spacing 1/(f_over·T) up to f_high times the mean Nyquist frequency.
    Auto { f_over: f64, f_high: f64 },
    /// The same given frequencies for every curve.
    Given(Vec<f64>),
}

/// How the significance of each peak is estimated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FapChoice {
    Analytic(FapMethod),
    /// This many bootstrap periodograms per curve, run as one batch on the same backend.
    Bootstrap(usize),
    None,
}

/// What [`analyse`] computes.
#[derive(Debug, Clone)]
pub struct AnalysisOptions {
    pub precision: Precision,
    /// Direct sums, NUFFT, or the cost model's choice.
    pub method: MethodArg,
    /// The NUFFT's accuracy on standard power.
    pub tolerance: f64,
    pub model: SignalModel,
    pub normalization: Normalization,
    pub grid: GridChoice,
    pub fap: FapChoice,
    /// Peaks per curve (1-8).
    pub peaks: usize,
    /// Only the peaks: the device reduces each periodogram to its peaks and returns those alone.
    pub peaks_only: bool,
    pub run: RunOptions,
}

/// One curve's result.
#[derive(Debug, Clone)]
pub struct CurveResult {
    pub name: String,
    /// The periodogram (frequency, power in the chosen normalisation), unless only peaks were asked for.
    pub frequencies: Option<Vec<f64>>,
    pub power: Option<Vec<f64>>,
    /// The highest peaks, best first, with their false-alarm probabilities.
    pub peaks: Vec<Peak>,
}

/// The result of [`analyse`].
#[derive(Debug, Clone)]
pub struct Analysis {
    pub curves: Vec<CurveResult>,
    /// The problem in one line (curves, points, frequencies).
    pub description: String,
    /// Median time of the periodograms, seconds, and the time-frequency pairs they summed.
    pub seconds: f64,
    pub pairs: f64,
    /// Seconds of each curve's bootstrap batch.
    pub bootstrap_seconds: Vec<f64>,
    /// The mode the periodograms ran in, and why when the method was chosen or changed.
    pub mode: LsMode,
    pub method_note: Option<String>,
}

/// Periodograms of many light curves on one backend, with their highest peaks and false-alarm
/// probabilities (computed from the standard power, reported in the chosen normalisation).
pub fn analyse(
    curves: Vec<LightCurve>,
    options: &AnalysisOptions,
    backend: &Target,
) -> Result<Analysis, String> {
    let k = options.peaks;
    let grids = curves
        .iter()
        .map(|c| match &options.grid {
            GridChoice::Given(f) => Ok(FrequencyGrid::Given(f.clone())),
            GridChoice::Auto { f_over, f_high } => culsp_grid(c, *f_over, *f_high),
        })
        .collect::<Result<Vec<_>, String>>()?;
    let output = if options.peaks_only {
        Output::TopK(k)
    } else {
        Output::Full
    };
    let problem = LombScargleProblem::new("input", curves, grids, options.model, output)?
        .with_tolerance(options.tolerance)?;
    let on_device = matches!(backend, Target::Device(_));
    let (mode, method_note) = options
        .method
        .resolve(&problem, options.precision, on_device);
    let run = |p: &LombScargleProblem, opts: &RunOptions| {
        use crate::workload::Workload;
        p.execute(backend, mode, opts).map_err(|e| e.to_string())
    };
    let measured = run(&problem, &options.run)?;
    let field = measured.output;
    let ranges = problem.curve_ranges();
    let mut bootstrap_seconds = Vec::new();
    let mut results = Vec::with_capacity(problem.curves.len());
    for (c, curve) in problem.curves.iter().enumerate() {
        let stats = SeriesStats::new(curve, options.model);
        // Peaks in standard power (FAPs are computed from it).
        let standard: Vec<(usize, f64)> = match output {
            Output::Full => top_k(&field.components[0][ranges[c].clone()], k),
            Output::TopK(_) => (0..k)
                .map(|r| {
                    (
                        field.components[0][c * k + r],
                        field.components[1][c * k + r],
                    )
                })
                .filter(|(i, _)| *i >= 0.0)
                .map(|(i, p)| (i as usize, p))
                .collect(),
        };
        let maxima = match options.fap {
            FapChoice::Bootstrap(n) => {
                let resamples = fap::bootstrap_resamples(curve, n, SEED + c as u64);
                let grids = vec![problem.grids[c].clone(); resamples.len()];
                let batch = LombScargleProblem::new(
                    "bootstrap",
                    resamples,
                    grids,
                    options.model,
                    Output::TopK(1),
                )?
                .with_tolerance(options.tolerance)?;
                let m = run(&batch, &RunOptions::once())?;
                bootstrap_seconds.push(m.times.median);
                m.output.components[1].clone()
            }
            _ => Vec::new(),
        };
        let fmax = problem.grids[c].max_frequency();
        let peaks = standard
            .iter()
            .map(|&(index, z)| Peak {
                index,
                frequency: problem.grids[c].frequency(index),
                power: fap::convert_power(z, options.normalization, &stats),
                fap: match options.fap {
                    FapChoice::Analytic(m) => {
                        Some(stats.false_alarm_probability(z, m, fmax, Normalization::Standard))
                    }
                    FapChoice::Bootstrap(_) => Some(fap::bootstrap_fap(z, &maxima)),
                    FapChoice::None => None,
                },
            })
            .collect();
        let (frequencies, power) = match output {
            Output::Full => {
                let g = &problem.grids[c];
                (
                    Some((0..g.len()).map(|k| g.frequency(k)).collect()),
                    Some(
                        field.components[0][ranges[c].clone()]
                            .iter()
                            .map(|&z| fap::convert_power(z, options.normalization, &stats))
                            .collect(),
                    ),
                )
            }
            Output::TopK(_) => (None, None),
        };
        results.push(CurveResult {
            name: curve.name.clone(),
            frequencies,
            power,
            peaks,
        });
    }
    use crate::workload::Workload;
    Ok(Analysis {
        curves: results,
        description: problem.describe(),
        seconds: measured.times.median,
        pairs: problem.pairs(),
        bootstrap_seconds,
        mode,
        method_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model of a noiseless sinusoid with an offset is the sinusoid itself, at the data's times and
    /// between them, for the floating mean; weights do not change an exact fit.
    #[test]
    fn model_reproduces_a_noiseless_sinusoid() {
        let f = 0.31;
        let truth = |t: f64| 2.5 + 0.7 * (2.0 * std::f64::consts::PI * f * t + 0.4).sin();
        let t: Vec<f64> = (0..97)
            .map(|i| i as f64 * 0.53 + 0.1 * (i % 5) as f64)
            .collect();
        let y: Vec<f64> = t.iter().map(|&t| truth(t)).collect();
        let dy: Vec<f64> = (0..t.len()).map(|i| 0.1 + 0.01 * (i % 3) as f64).collect();
        let ls = LombScargle::new(t.clone(), y, Some(dy)).unwrap();
        let at: Vec<f64> = vec![0.0, 3.3, 17.25, 51.0];
        for (got, &ti) in ls.model(&at, f).iter().zip(&at) {
            assert!(
                (got - truth(ti)).abs() < 1e-12,
                "{ti}: {got} vs {}",
                truth(ti)
            );
        }
    }

    /// The fixed-mean model is the weighted mean plus the sinusoid fitted to the centred data: on a
    /// sinusoid sampled over whole periods its mean term is the offset.
    #[test]
    fn fixed_mean_model_is_mean_plus_sinusoid() {
        let f = 0.25;
        let t: Vec<f64> = (0..400).map(|i| i as f64 * 0.1).collect(); // 10 whole periods
        let y: Vec<f64> = t
            .iter()
            .map(|&t| 1.0 + (2.0 * std::f64::consts::PI * f * t).cos())
            .collect();
        let ls = LombScargle::new(t, y, None).unwrap().fit_mean(false);
        let got = ls.model(&[0.0, 1.0, 2.0], f);
        for (g, want) in got.iter().zip([2.0, 1.0, 0.0]) {
            assert!((g - want).abs() < 1e-9, "{got:?}");
        }
    }

    /// Evenly sampled data at their Nyquist frequency: the sine column is zero at every sample, so only the
    /// cosine and the mean can be fitted; the model still reproduces a signal made of those two.
    #[test]
    fn model_at_the_nyquist_frequency_fits_what_the_samples_see() {
        let t: Vec<f64> = (0..11).map(f64::from).collect();
        let y: Vec<f64> = t
            .iter()
            .map(|&t| 3.0 + 0.7 * (std::f64::consts::PI * t).cos())
            .collect();
        // Floating mean: the cosine and the mean reproduce the samples exactly.
        let ls = LombScargle::new(t.clone(), y.clone(), None).unwrap();
        for (g, w) in ls.model(&t, 0.5).iter().zip(&y) {
            assert!((g - w).abs() < 1e-12, "floating mean: {g} vs {w}");
        }
        // Fixed mean: the sample mean plus the least-squares cosine of the centred data (a 1-column fit).
        let got = ls.clone().fit_mean(false).model(&t, 0.5);
        let mean = y.iter().sum::<f64>() / 11.0;
        let c: Vec<f64> = t
            .iter()
            .map(|&t| (std::f64::consts::PI * t).cos())
            .collect();
        let amp = c.iter().zip(&y).map(|(c, y)| c * (y - mean)).sum::<f64>()
            / c.iter().map(|c| c * c).sum::<f64>();
        for (g, c) in got.iter().zip(&c) {
            assert!((g - (mean + amp * c)).abs() < 1e-12, "fixed mean: {got:?}");
        }
    }

    #[test]
    fn bad_series_are_refused_with_the_value() {
        let e = LombScargle::new(vec![0.0, 1.0, f64::NAN], vec![1.0, 2.0, 3.0], None).unwrap_err();
        assert!(e.contains("t[2] = NaN"), "{e}");
        let e = LombScargle::new(
            vec![0.0, 1.0, 2.0],
            vec![1.0, 2.0, 3.0],
            Some(vec![1.0, 0.0, 1.0]),
        )
        .unwrap_err();
        assert!(e.contains("dy[1] = 0"), "{e}");
        let same = LombScargle::new(vec![1.0; 4], vec![1.0, 2.0, 3.0, 4.0], None).unwrap();
        let e = same.autofrequency(5.0, 1.0).unwrap_err();
        assert!(e.contains("all times are equal"), "{e}");
    }
}
