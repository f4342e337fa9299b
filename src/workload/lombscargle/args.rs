//! Lomb-Scargle's command-line flags: `run lombscargle` (the generated presets, verified on every backend)
//! and the `periodogram` command (light curves from files, periodograms, peaks and false-alarm
//! probabilities on one backend).

use super::fap::FapMethod;
use super::io as ls_io;
use super::periodogram::{analyse, AnalysisOptions, FapChoice, GridChoice};
use super::{LombScargleProblem, LsMode, Normalization, Peak, SignalModel, PRESETS};
use crate::backend::Precision;
use crate::exec;
use crate::workload::{require_positive, OneBackendArgs, Tool, ToolArgs, WorkloadArgs};
use std::path::{Path, PathBuf};

impl std::str::FromStr for SignalModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "floating" => Ok(SignalModel::FloatingMean),
            "fixed" => Ok(SignalModel::FixedMean),
            other => Err(format!("expected floating or fixed, got '{other}'")),
        }
    }
}

impl std::str::FromStr for Normalization {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(Normalization::Standard),
            "model" => Ok(Normalization::Model),
            "log" => Ok(Normalization::Log),
            "psd" => Ok(Normalization::Psd),
            other => Err(format!(
                "expected standard, model, log or psd, got '{other}'"
            )),
        }
    }
}

/// `--fap`: one of astropy's closed forms, the bootstrap, or none.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FapArg {
    Baluev,
    Davies,
    Naive,
    Bootstrap,
    None,
}

/// `--method`: how the sums are computed.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodArg {
    /// Direct sums (culsp): any grid, float32 or float64.
    Direct,
    /// Non-uniform FFTs: uniform grids, float64, to --tolerance.
    Nufft,
    /// Whichever the cost model predicts is faster (it prints its choice).
    Auto,
}

/// The NUFFT is float64 only: what to say when float32 was asked for.
fn nufft_precision_note(precision: Precision) -> Option<String> {
    (precision != Precision::F64)
        .then(|| "method: nufft runs in float64 (asked for float32)".into())
}

impl MethodArg {
    /// The method for this problem and precision, and a line saying why when the choice was not asked for
    /// plainly (auto, or a nufft request the problem cannot take).
    pub fn resolve(
        self,
        problem: &LombScargleProblem,
        precision: Precision,
        on_device: bool,
    ) -> (LsMode, Option<String>) {
        match self {
            MethodArg::Direct => (LsMode::direct(precision), None),
            MethodArg::Nufft => match problem.nufft_unavailable() {
                Some(why) => (
                    LsMode::direct(precision),
                    Some(format!("method: direct ({why})")),
                ),
                None => (LsMode::NUFFT, nufft_precision_note(precision)),
            },
            MethodArg::Auto => {
                let (mode, why) = problem.auto_mode(precision, on_device);
                (mode, Some(format!("method: auto chose {why}")))
            }
        }
    }
}

/// `astroport run lombscargle`: the generated presets.
#[derive(clap::Args, Debug, Clone)]
pub struct LombScargleArgs {
    /// Problem: tiny (the oracle's size), ci (1e4 points), corot (382,003 points, 1.5 M frequencies),
    /// survey (10,000 short curves, top-5 peaks), survey-small (its first 16 curves).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    /// Signal model: floating (generalised, astropy's default) or fixed (classic, culsp).
    #[arg(long, default_value = "floating")]
    pub model: SignalModel,
    /// Precisions, comma-separated or repeated: f32, f64.
    #[arg(long = "precision", value_delimiter = ',', default_value = "f32")]
    pub precisions: Vec<Precision>,
    /// How the sums are computed: direct, nufft (uniform grids, float64) or auto (cost model, on `cpu`).
    #[arg(long, value_enum, default_value = "direct")]
    pub method: MethodArg,
    /// Accuracy of the nufft method: largest absolute error in standard power (0 < ε < 1).
    #[arg(long, default_value_t = super::NUFFT_TOLERANCE)]
    pub tolerance: f64,
}

impl WorkloadArgs for LombScargleArgs {
    const NAME: &'static str = "lombscargle";
    const ABOUT: &'static str =
        "Lomb-Scargle periodograms (Townsend 2010): direct sums, float32 with an exact phase, and float64";
    const PRESETS: &'static [&'static str] = &super::PRESETS;
    const TOOLS: &'static [Tool] = &[Tool::of::<PeriodogramArgs>()];
    type Workload = LombScargleProblem;
    fn build(&self) -> Result<Vec<LombScargleProblem>, String> {
        Ok(vec![
            LombScargleProblem::preset(&self.preset, self.model)?.with_tolerance(self.tolerance)?
        ])
    }
    fn modes(&self) -> Vec<LsMode> {
        // Only `auto` needs the problem (its predicted costs); every preset's grid is uniform, so `nufft`
        // needs nothing. The preset is then built once more here, cheap next to any run.
        let problem = (self.method == MethodArg::Auto)
            .then(|| LombScargleProblem::preset(&self.preset, self.model).ok())
            .flatten();
        let mut modes: Vec<LsMode> = Vec::new();
        for &precision in &self.precisions {
            let (mode, note) = match (&problem, self.method) {
                (Some(p), method) => method.resolve(p, precision, false),
                (None, MethodArg::Nufft) => (LsMode::NUFFT, nufft_precision_note(precision)),
                (None, _) => (LsMode::direct(precision), None),
            };
            if let Some(note) = note {
                crate::say!("lombscargle {} {}: {note}", self.preset, precision.name());
            }
            if !modes.contains(&mode) {
                modes.push(mode);
            }
        }
        modes
    }
}

/// `astroport periodogram`: light curves from files on one backend.
#[derive(clap::Args, Debug, Clone)]
pub struct PeriodogramArgs {
    /// Light-curve files, CSV or FITS tables (repeatable); a table with an object column holds many curves.
    #[arg(long = "input", required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub backend: OneBackendArgs,
    #[arg(long, default_value = "f32")]
    pub precision: Precision,
    /// How the sums are computed: direct, nufft (uniform grids, float64; a given grid falls back to direct)
    /// or auto (the cost model's choice, printed).
    #[arg(long, value_enum, default_value = "auto")]
    pub method: MethodArg,
    /// Accuracy of the nufft method: largest absolute error in standard power (0 < ε < 1).
    #[arg(long, default_value_t = super::NUFFT_TOLERANCE)]
    pub tolerance: f64,
    /// Signal model: floating (generalised, astropy's default) or fixed (classic, culsp).
    #[arg(long, default_value = "floating")]
    pub model: SignalModel,
    /// Oversampling of culsp's grid: df = 1 / (F_over T).
    #[arg(long, default_value_t = 8.0)]
    pub f_over: f64,
    /// Highest frequency of culsp's grid, in units of the mean Nyquist frequency N / (2 T).
    #[arg(long, default_value_t = 1.0)]
    pub f_high: f64,
    /// A given grid instead: one frequency per line (cycles per time unit), '#' comments allowed.
    #[arg(long)]
    pub frequencies: Option<PathBuf>,
    /// Power normalisation of the outputs: standard, model, log, psd (as astropy).
    #[arg(long, default_value = "standard")]
    pub normalization: Normalization,
    /// False-alarm probability of each peak (astropy's closed forms, the bootstrap, or none).
    #[arg(long, value_enum, default_value = "baluev")]
    pub fap: FapArg,
    /// Resamples for --fap bootstrap (each one a periodogram, run as one batch).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub bootstrap: u64,
    /// Peaks per light curve (1-8).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=8))]
    pub top_k: u64,
    /// Write only peaks.csv, not the whole periodogram (the device then returns only the peaks).
    #[arg(long)]
    pub peaks_only: bool,
    /// Directory for periodogram.csv and peaks.csv.
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
}

/// A given frequency grid: one positive frequency per line, increasing, '#' comments and blank lines
/// ignored.
fn read_frequencies(path: &Path) -> Result<Vec<f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.parse::<f64>() {
            Ok(f) if f > 0.0 && f.is_finite() => {
                if let Some(&last) = out.last() {
                    if f <= last {
                        return Err(format!(
                            "{} line {}: frequency {line} does not increase from {last} (give the grid \
                             sorted, without repeats)",
                            path.display(),
                            i + 1
                        ));
                    }
                }
                out.push(f)
            }
            _ => {
                return Err(format!(
                    "{} line {}: value {line} is not a positive frequency",
                    path.display(),
                    i + 1
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no frequencies", path.display()));
    }
    Ok(out)
}

impl ToolArgs for PeriodogramArgs {
    const NAME: &'static str = "periodogram";
    const ABOUT: &'static str =
        "Lomb-Scargle periodograms of light curves (CSV or FITS tables) on one backend, with peaks and FAPs";
    fn run(self) -> Result<i32, String> {
        require_positive("--f-over", self.f_over)?;
        require_positive("--f-high", self.f_high)?;
        let mut curves = Vec::new();
        for path in &self.inputs {
            for (curve, report) in ls_io::read_light_curves(path).map_err(|e| e.to_string())? {
                crate::say!("{} [{}]: {report}", path.display(), curve.name);
                curves.push(curve);
            }
        }
        let grid = match &self.frequencies {
            Some(path) => GridChoice::Given(read_frequencies(path)?),
            None => GridChoice::Auto {
                f_over: self.f_over,
                f_high: self.f_high,
            },
        };
        let fap = match self.fap {
            FapArg::Baluev => FapChoice::Analytic(FapMethod::Baluev),
            FapArg::Davies => FapChoice::Analytic(FapMethod::Davies),
            FapArg::Naive => FapChoice::Analytic(FapMethod::Naive),
            FapArg::Bootstrap => FapChoice::Bootstrap(self.bootstrap as usize),
            FapArg::None => FapChoice::None,
        };
        let options = AnalysisOptions {
            precision: self.precision,
            method: self.method,
            tolerance: self.tolerance,
            model: self.model,
            normalization: self.normalization,
            grid,
            fap,
            peaks: self.top_k as usize,
            peaks_only: self.peaks_only,
            run: self.backend.options(),
        };
        // Before any work: an --out that cannot be a folder is found now, not after the periodograms.
        std::fs::create_dir_all(&self.out)
            .map_err(|e| format!("--out {}: {e}", self.out.display()))?;
        let discovery = self.backend.discovery()?;
        let target = self.backend.target(&discovery)?;
        let analysis = analyse(curves, &options, target)?;
        if let Some(note) = &analysis.method_note {
            crate::say!("periodogram: {note}");
        }
        crate::say!(
            "periodogram: {} on {} {}: {:.3} ms ({:.3e} pairs/s)",
            analysis.description,
            target.id(),
            exec::Mode::name(analysis.mode),
            analysis.seconds * 1e3,
            analysis.pairs / analysis.seconds
        );
        for (curve, s) in analysis.curves.iter().zip(&analysis.bootstrap_seconds) {
            crate::say!(
                "  bootstrap {}: {} periodograms in {s:.3} s",
                curve.name,
                self.bootstrap
            );
        }
        let norm_name = format!("{:?}", self.normalization).to_lowercase();
        if !self.peaks_only {
            let table: Vec<(&str, &[f64], &[f64])> = analysis
                .curves
                .iter()
                .map(|c| {
                    (
                        c.name.as_str(),
                        c.frequencies.as_deref().unwrap_or_default(),
                        c.power.as_deref().unwrap_or_default(),
                    )
                })
                .collect();
            let path = self.out.join("periodogram.csv");
            ls_io::write_periodogram_csv(&path, &table, &norm_name).map_err(|e| e.to_string())?;
            crate::say!("wrote {}", path.display());
        }
        let table: Vec<(&str, &[Peak])> = analysis
            .curves
            .iter()
            .map(|c| (c.name.as_str(), c.peaks.as_slice()))
            .collect();
        let path = self.out.join("peaks.csv");
        if let Err(e) = ls_io::write_peaks_csv(&path, &table) {
            // Both files or neither: a periodogram without its peaks would look like a complete run.
            if !self.peaks_only {
                let _ = std::fs::remove_file(self.out.join("periodogram.csv"));
            }
            return Err(e.to_string());
        }
        for curve in &analysis.curves {
            if let Some(best) = curve.peaks.first() {
                println!(
                    "{}: best period {:.6} (frequency {:.6}), {norm_name} power {:.6}, FAP {}",
                    curve.name,
                    1.0 / best.frequency,
                    best.frequency,
                    best.power,
                    best.fap
                        .map(|f| format!("{f:.3e}"))
                        .unwrap_or_else(|| "-".into())
                );
            }
        }
        crate::say!("wrote {}", path.display());
        Ok(0)
    }
}
