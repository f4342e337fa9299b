//! The command line: `devices`, `run`, `bench`.

use crate::backend::{discover, Precision, Selector, Target};
use crate::bench::{self, RunOptions};
use crate::report;
use crate::results::{append_jsonl, write_atomic, Row, Status};
use crate::workload::cubature;
use crate::workload::lens::{chi2, io as lens_io, maps, Halos, LensOptions, LensProblem, Preset};
use crate::workload::lombscargle::{
    self as ls, fap, io as ls_io, FrequencyGrid, LombScargleProblem, Normalization, Output, Peak,
    SignalModel,
};
use crate::workload::Workload;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "astroport",
    version,
    about = "Published GPU algorithms on every compute model, verified against float64, with the cost of portability measured."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every model's devices with the id to pass to --backend, and what is unavailable and why.
    Devices,
    /// Run one workload on one or more backends in one precision.
    Run {
        /// Workload to run.
        #[arg(value_parser = ["lens", "lombscargle", "cubature"])]
        workload: String,
        #[command(flatten)]
        common: Common,
        /// Precision: f32, f64, or a lens mixed scheme (mixed, mixed-patches, mixed-paper, mixed-budget; docs/lens.md). Cubature always runs in f64.
        #[arg(long, default_value = "f32")]
        precision: Precision,
        #[command(flatten)]
        cubature: CubatureArgs,
    },
    /// Image-plane χ² of multiple-image systems on each backend (lens): grid and delensing on the device.
    Chi2 {
        #[command(flatten)]
        common: Common,
        /// Observed systems (CSV, docs/lens-inputs.md); default: mock systems from the model itself.
        #[arg(long)]
        images: Option<PathBuf>,
        /// Write the mock systems used to this CSV file.
        #[arg(long)]
        write_images: Option<PathBuf>,
    },
    /// Lens maps: deflection, convergence, shear and magnification as FITS images, computed on one backend.
    Maps {
        #[command(flatten)]
        common: Common,
        /// Precision of the deflection grid.
        #[arg(long, default_value = "f64")]
        precision: Precision,
        /// Output prefix: writes PREFIX_alpha_x.fits, _alpha_y, _kappa, _gamma1, _gamma2, _mu.
        #[arg(long)]
        prefix: PathBuf,
    },
    /// Lomb-Scargle periodograms of light curves (CSV or FITS tables) on one backend, with peaks and FAPs.
    Periodogram {
        #[command(flatten)]
        common: Common,
        /// Light-curve files (repeatable); a table with an object column holds many curves.
        #[arg(long = "input", required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, default_value = "f32")]
        precision: Precision,
        #[command(flatten)]
        grid: GridArgs,
        /// Power normalisation of the outputs: standard, model, log, psd (as astropy).
        #[arg(long, default_value = "standard")]
        normalization: String,
        /// False-alarm probability of each peak: baluev, davies, naive, bootstrap, none.
        #[arg(long, default_value = "baluev")]
        fap: String,
        /// Resamples for --fap bootstrap (each one a periodogram, run as one batch).
        #[arg(long, default_value_t = 1000)]
        bootstrap: usize,
        /// Write only peaks.csv, not the whole periodogram (the device then returns only the peaks).
        #[arg(long)]
        peaks_only: bool,
    },
    /// The main job: every workload on every available backend and precision, verified and reported.
    Bench {
        #[command(flatten)]
        common: Common,
        /// Precisions to run (repeatable); default both.
        #[arg(long)]
        precision: Vec<Precision>,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Problem size: tiny (tests), ci (seconds on 2 cores), hff (the paper's size).
    #[arg(long, default_value = "ci")]
    pub preset: String,
    /// Backend id or model, repeatable: cpu, opencl, opencl:P:D, cuda, cuda:N, sycl, sycl:N.
    /// Default: every backend found (unavailable ones get a row saying why).
    #[arg(long = "backend")]
    pub backends: Vec<String>,
    /// Directory for results.jsonl and report.md.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Timed repeats per run (median reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// Untimed warm-up runs before the repeats.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Lens: override the grid side in pixels (the field stays ±101″).
    #[arg(long)]
    pub size: Option<usize>,
    /// Lens: galaxy velocity-dispersion range in km/s, "LO,HI" (default 10,15 as the brief;
    /// 110,130 is the realistic variant, research/lens.md §7).
    #[arg(long, default_value = "10,15")]
    pub galaxy_sigma: String,
    /// Cap on device memory per run in MiB, below what the device reports (forces tiling into bands).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
    /// Lens: halo catalogue (CSV, docs/lens-inputs.md) instead of the preset's halos; the preset still
    /// sets the grid.
    #[arg(long)]
    pub halos: Option<PathBuf>,
    /// Lomb-Scargle: signal model, floating (generalised, astropy's default) or fixed (classic, culsp).
    #[arg(long, default_value = "floating")]
    pub model: String,
    /// Lomb-Scargle: number of peaks per light curve (1-8).
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
}

/// Options of `run cubature`. Lists (comma-separated) run every combination.
#[derive(clap::Args, Debug, Clone)]
pub struct CubatureArgs {
    /// Cubature: integrator, pagani or mcubes (comma-separated for both).
    #[arg(long, default_value = "pagani")]
    pub method: String,
    /// Cubature: integrands, any of sum (the control), f1..f6.
    #[arg(long, default_value = "f4")]
    pub integrand: String,
    /// Cubature: dimensions (2-15).
    #[arg(long, default_value = "5")]
    pub dim: String,
    /// Cubature: relative error targets.
    #[arg(long, default_value = "1e-3")]
    pub epsrel: String,
    /// Cubature: absolute error target (default: pure relative stopping, as the seed).
    #[arg(long, default_value_t = 1e-40)]
    pub epsabs: f64,
    /// Cubature, m-Cubes: calls per iteration of the first attempt (×10 per failed attempt).
    #[arg(long, default_value_t = 100_000)]
    pub ncall: u64,
    /// Cubature, m-Cubes: largest calls per iteration.
    #[arg(long, default_value_t = 1_000_000_000)]
    pub max_ncall: u64,
    /// Cubature, m-Cubes: seed of the counter-based generator.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Cubature, PAGANI: memory the region list may use, MiB (default: the device's free memory; cpu: 80 %
    /// of the host's available memory).
    #[arg(long)]
    pub memory_mib: Option<u64>,
    /// Cubature, PAGANI: split size (regions) above which the threshold classification is tried before the
    /// estimate has settled (docs/cubature.md).
    #[arg(long, default_value_t = cubature::pagani::WORKING_REGIONS)]
    pub working_regions: u64,
    /// Cubature, PAGANI: iteration cap.
    #[arg(long, default_value_t = 700)]
    pub max_iterations: usize,
    /// Cubature: wall-time budget per run, seconds (the run then reports time_limit, not an answer).
    #[arg(long)]
    pub max_seconds: Option<f64>,
}

/// Frequency grid of `periodogram`: culsp's (F_over, F_high) by default, or explicit.
#[derive(clap::Args, Debug, Clone)]
pub struct GridArgs {
    /// Oversampling: df = 1 / (F_over T).
    #[arg(long, default_value_t = 8.0)]
    pub f_over: f64,
    /// Highest frequency in units of the mean Nyquist frequency N / (2 T).
    #[arg(long, default_value_t = 1.0)]
    pub f_high: f64,
    /// A given grid instead: one frequency per line (cycles per time unit), '#' comments allowed.
    #[arg(long)]
    pub frequencies: Option<PathBuf>,
}

fn parse_model(s: &str) -> Result<SignalModel, String> {
    match s {
        "floating" => Ok(SignalModel::FloatingMean),
        "fixed" => Ok(SignalModel::FixedMean),
        other => Err(format!(
            "--model: expected floating or fixed, got '{other}'"
        )),
    }
}

fn ls_problem(common: &Common) -> Result<LombScargleProblem, String> {
    LombScargleProblem::preset(&common.preset, parse_model(&common.model)?)
}

/// Runs the program; returns the process exit code (0 ok, 1 a run failed verification, 2 bad input).
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match execute(cli) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            2
        }
    }
}

fn parse_sigma(s: &str) -> Result<(f64, f64), String> {
    let parts: Vec<&str> = s.split(',').collect();
    let bad = || format!("--galaxy-sigma: expected LO,HI in km/s, got '{s}'");
    if parts.len() != 2 {
        return Err(bad());
    }
    let lo = parts[0].trim().parse::<f64>().map_err(|_| bad())?;
    let hi = parts[1].trim().parse::<f64>().map_err(|_| bad())?;
    Ok((lo, hi))
}

fn lens_problem(common: &Common) -> Result<LensProblem, String> {
    let preset: Preset = common.preset.parse()?;
    let opts = LensOptions {
        n: common.size,
        galaxy_sigma: parse_sigma(&common.galaxy_sigma)?,
        device_mem_limit: common.device_mem_mib.map(|m| m << 20),
        ..Default::default()
    };
    let problem = LensProblem::preset(preset, &opts)
        .map_err(|e| format!("--preset {} / --size: {e}", common.preset))?;
    let Some(path) = &common.halos else {
        return Ok(problem);
    };
    let records = lens_io::read_halos(path).map_err(|e| e.to_string())?;
    let halos = Halos::from_records(&records, problem.dls_ds);
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut custom = LensProblem::new(
        &format!("{}:{name}", problem.preset),
        problem.n,
        problem.pixel,
        problem.cosmology,
        halos,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    custom.device_mem_limit = problem.device_mem_limit;
    Ok(custom)
}

/// `astroport chi2`: the f64 CPU reference, then every selected device, each compared with it.
fn run_chi2(
    common: &Common,
    images: Option<&PathBuf>,
    write_images: Option<&PathBuf>,
) -> Result<i32, String> {
    let problem = lens_problem(common)?;
    let systems = match images {
        Some(path) => lens_io::read_image_systems(path).map_err(|e| e.to_string())?,
        None => chi2::mock_systems(&problem, &chi2::MockOptions::default()),
    };
    for s in &systems {
        if s.z_source <= problem.cosmology.z_lens {
            return Err(format!(
                "image system '{}': z_source {} is not behind the lens (z_lens {})",
                s.id, s.z_source, problem.cosmology.z_lens
            ));
        }
    }
    if let Some(path) = write_images {
        lens_io::write_image_systems(path, &systems).map_err(|e| e.to_string())?;
    }
    let n_images: usize = systems.iter().map(|s| s.images.len()).sum();
    println!(
        "lens χ², preset {} ({}): {} systems, {} images",
        problem.preset,
        problem.describe(),
        systems.len(),
        n_images
    );
    let start = std::time::Instant::now();
    let reference = problem.reference();
    let (ref_chi2, ref_pred) = chi2::chi2_of_grid(
        &problem,
        &reference.components[0],
        &reference.components[1],
        &systems,
    );
    println!(
        "  cpu f64 reference: χ² {:.4} (missing {}, extra {}), host {:.3} s",
        ref_chi2.chi2,
        ref_chi2.n_missing,
        ref_chi2.n_extra,
        start.elapsed().as_secs_f64()
    );
    let discovery = discover();
    let sels = selectors(common)?;
    let mut code = 0;
    let mut lines = Vec::new();
    for choice in bench::select(&discovery, &sels) {
        let dev = match choice {
            bench::Choice::Run(Target::Device(dev)) => dev,
            bench::Choice::Run(Target::Cpu(_)) => continue, // the reference above is the cpu row
            bench::Choice::Absent(a) => {
                println!("  {}: {}: {}", a.id, a.why.status(), a.reason);
                continue;
            }
        };
        match chi2::chi2_device(
            &problem,
            dev.as_ref(),
            &systems,
            common.warmup,
            common.repeats,
        ) {
            Err(e) => {
                println!("  {}: failed: {e}", dev.id());
                code = 1;
            }
            Ok(r) => {
                let worst = chi2::worst_shift(&ref_pred, &r.predicted);
                let same = worst <= 1.5 * problem.pixel;
                if !same {
                    code = 1;
                }
                println!(
                    "  {}: χ² {:.4} (missing {}, extra {}), device {:.3} ms; images vs reference: worst shift {:.3}″ -> {}",
                    dev.id(),
                    r.chi2.chi2,
                    r.chi2.n_missing,
                    r.chi2.n_extra,
                    r.time_s * 1e3,
                    worst,
                    if same { "same images" } else { "DIFFERENT" }
                );
                lines.push(serde_json::json!({
                    "schema": "astroport.chi2/1", "preset": problem.preset, "backend": dev.id(),
                    "device": dev.info().name, "systems": systems.len(), "images": n_images,
                    "chi2": r.chi2.chi2, "missing": r.chi2.n_missing, "extra": r.chi2.n_extra,
                    "reference_chi2": ref_chi2.chi2, "worst_shift_arcsec": worst, "same_images": same,
                    "time_s": r.time_s, "steps": r.steps,
                }));
            }
        }
    }
    if let Some(dir) = &common.out {
        append_jsonl(dir, "chi2.jsonl", &lines).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(code)
}

/// The one target a single-backend command runs on: the first selected, else the first GPU found, else cpu.
fn single_target<'a>(
    discovery: &'a crate::backend::Discovery,
    common: &Common,
) -> Result<&'a Target, String> {
    let sels = selectors(common)?;
    if sels.is_empty() {
        return discovery
            .targets
            .iter()
            .find(|t| t.info().is_gpu)
            .or_else(|| {
                discovery
                    .targets
                    .iter()
                    .find(|t| matches!(t, Target::Cpu(_)))
            })
            .ok_or_else(|| "no backend available (see `astroport devices`)".to_string());
    }
    for choice in bench::select(discovery, &sels) {
        match choice {
            bench::Choice::Run(t) => return Ok(t),
            bench::Choice::Absent(a) => eprintln!("{}: {}: {}", a.id, a.why.status(), a.reason),
        }
    }
    Err("none of the selected backends is available (see `astroport devices`)".into())
}

/// `astroport maps`: the deflection grid on one backend, then κ, γ and μ by finite differences, as FITS.
fn run_maps(
    common: &Common,
    precision: Precision,
    prefix: &std::path::Path,
) -> Result<i32, String> {
    let problem = lens_problem(common)?;
    let discovery = discover();
    let target = single_target(&discovery, common)?;
    let (field, seconds) =
        bench::compute(&problem, target, precision, common.warmup, common.repeats)?;
    let (gx, gy) = (&field.components[0], &field.components[1]);
    if gx.iter().chain(gy).any(|v| !v.is_finite()) {
        return Err(format!(
            "{}: the deflection grid has non-finite values; no maps written",
            target.id()
        ));
    }
    let derived = maps::derived_maps(gx, gy, problem.n, problem.pixel);
    let written = maps::write_maps(
        prefix,
        gx,
        gy,
        &derived,
        problem.n,
        problem.pixel,
        (0.0, 0.0),
    )
    .map_err(|e| e.to_string())?;
    println!(
        "lens maps, preset {} ({}), {} {}: grid {:.3} ms",
        problem.preset,
        problem.describe(),
        target.id(),
        precision.name(),
        seconds * 1e3
    );
    for path in written {
        println!("  wrote {}", path.display());
    }
    Ok(0)
}

fn parse_normalization(s: &str) -> Result<Normalization, String> {
    match s {
        "standard" => Ok(Normalization::Standard),
        "model" => Ok(Normalization::Model),
        "log" => Ok(Normalization::Log),
        "psd" => Ok(Normalization::Psd),
        other => Err(format!(
            "--normalization: expected standard, model, log or psd, got '{other}'"
        )),
    }
}

/// A given frequency grid: one positive frequency per line, '#' comments and blank lines ignored.
fn read_frequencies(path: &std::path::Path) -> Result<Vec<f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.parse::<f64>() {
            Ok(f) if f > 0.0 && f.is_finite() => out.push(f),
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

/// `astroport periodogram`: light curves from files, periodograms on one backend, peaks with FAPs.
#[allow(clippy::too_many_arguments)]
fn run_periodogram(
    common: &Common,
    inputs: &[PathBuf],
    precision: Precision,
    grid: &GridArgs,
    normalization: &str,
    fap_method: &str,
    n_bootstrap: usize,
    peaks_only: bool,
) -> Result<i32, String> {
    let model = parse_model(&common.model)?;
    let normalization = parse_normalization(normalization)?;
    let method = match fap_method {
        "baluev" => Some(fap::FapMethod::Baluev),
        "davies" => Some(fap::FapMethod::Davies),
        "naive" => Some(fap::FapMethod::Naive),
        "bootstrap" | "none" => None,
        other => {
            return Err(format!(
                "--fap: expected baluev, davies, naive, bootstrap or none, got '{other}'"
            ))
        }
    };
    if !(grid.f_over > 0.0 && grid.f_high > 0.0) {
        return Err(format!(
            "--f-over {} / --f-high {}: both must be positive",
            grid.f_over, grid.f_high
        ));
    }
    let mut curves = Vec::new();
    for path in inputs {
        for (curve, report) in ls_io::read_light_curves(path).map_err(|e| e.to_string())? {
            eprintln!("{} [{}]: {report}", path.display(), curve.name);
            curves.push(curve);
        }
    }
    let given = grid
        .frequencies
        .as_deref()
        .map(read_frequencies)
        .transpose()?;
    let grids: Vec<FrequencyGrid> = curves
        .iter()
        .map(|c| match &given {
            Some(f) => FrequencyGrid::Given(f.clone()),
            None => ls::generate::culsp_grid(&c.t, grid.f_over, grid.f_high),
        })
        .collect();
    let k = common.top_k;
    let output = if peaks_only {
        Output::TopK(k)
    } else {
        Output::Full
    };
    let problem = LombScargleProblem::new("input", curves, grids, model, output)?;
    let discovery = discover();
    let target = single_target(&discovery, common)?;
    let (field, seconds) =
        bench::compute(&problem, target, precision, common.warmup, common.repeats)?;
    eprintln!(
        "periodogram: {} on {} {}: {:.3} ms ({:.3e} pairs/s)",
        problem.describe(),
        target.id(),
        precision.name(),
        seconds * 1e3,
        problem.pairs() / seconds
    );
    // Peaks in standard power (FAPs are computed from it), per curve.
    let ranges = problem.curve_ranges();
    let stats: Vec<fap::SeriesStats> = problem
        .curves
        .iter()
        .map(|c| fap::SeriesStats::new(c, model))
        .collect();
    let standard_peaks: Vec<Vec<(usize, f64)>> = (0..problem.curves.len())
        .map(|c| match output {
            Output::Full => ls::top_k(&field.components[0][ranges[c].clone()], k),
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
        })
        .collect();
    let bootstrap_maxima: Vec<Vec<f64>> = if fap_method == "bootstrap" {
        let mut all = Vec::new();
        for (c, curve) in problem.curves.iter().enumerate() {
            let resamples = fap::bootstrap_resamples(curve, n_bootstrap, ls::SEED + c as u64);
            let grids = vec![problem.grids[c].clone(); resamples.len()];
            let batch =
                LombScargleProblem::new("bootstrap", resamples, grids, model, Output::TopK(1))?;
            let (f, s) = bench::compute(&batch, target, precision, 0, 1)?;
            eprintln!(
                "  bootstrap {}: {n_bootstrap} periodograms in {:.3} s",
                curve.name, s
            );
            all.push(f.components[1].clone());
        }
        all
    } else {
        Vec::new()
    };
    let mut peaks: Vec<Vec<Peak>> = Vec::new();
    for (c, stats) in stats.iter().enumerate() {
        let fmax = problem.grids[c].max_frequency();
        peaks.push(
            standard_peaks[c]
                .iter()
                .map(|&(index, z)| Peak {
                    index,
                    frequency: problem.grids[c].frequency(index),
                    power: fap::convert_power(z, normalization, stats),
                    fap: match method {
                        Some(m) => {
                            Some(stats.false_alarm_probability(z, m, fmax, Normalization::Standard))
                        }
                        None if fap_method == "bootstrap" => {
                            Some(fap::bootstrap_fap(z, &bootstrap_maxima[c]))
                        }
                        None => None,
                    },
                })
                .collect(),
        );
    }
    let dir = common.out.clone().unwrap_or_else(|| PathBuf::from("out"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let norm_name = format!("{normalization:?}").to_lowercase();
    if let Output::Full = output {
        let freqs: Vec<Vec<f64>> = problem
            .grids
            .iter()
            .map(|g| (0..g.len()).map(|k| g.frequency(k)).collect())
            .collect();
        let powers: Vec<Vec<f64>> = (0..problem.curves.len())
            .map(|c| {
                field.components[0][ranges[c].clone()]
                    .iter()
                    .map(|&z| fap::convert_power(z, normalization, &stats[c]))
                    .collect()
            })
            .collect();
        let table: Vec<(&str, &[f64], &[f64])> = (0..problem.curves.len())
            .map(|c| {
                (
                    problem.curves[c].name.as_str(),
                    freqs[c].as_slice(),
                    powers[c].as_slice(),
                )
            })
            .collect();
        let path = dir.join("periodogram.csv");
        ls_io::write_periodogram_csv(&path, &table, &norm_name).map_err(|e| e.to_string())?;
        eprintln!("wrote {}", path.display());
    }
    let table: Vec<(&str, &[Peak])> = problem
        .curves
        .iter()
        .zip(&peaks)
        .map(|(c, p)| (c.name.as_str(), p.as_slice()))
        .collect();
    let path = dir.join("peaks.csv");
    ls_io::write_peaks_csv(&path, &table).map_err(|e| e.to_string())?;
    for (curve, p) in problem.curves.iter().zip(&peaks) {
        if let Some(best) = p.first() {
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
    eprintln!("wrote {}", path.display());
    Ok(0)
}

fn selectors(common: &Common) -> Result<Vec<Selector>, String> {
    common
        .backends
        .iter()
        .map(|b| b.parse::<Selector>())
        .collect()
}

fn execute(cli: Cli) -> Result<i32, String> {
    match cli.command {
        Command::Devices => {
            print!("{}", devices_text());
            Ok(0)
        }
        Command::Run {
            workload,
            common,
            precision,
            cubature,
        } => {
            if workload == "cubature" {
                return run_cubature(&common, &cubature, true);
            }
            let problem: Box<dyn Workload> = match workload.as_str() {
                "lens" => Box::new(lens_problem(&common)?),
                _ => Box::new(ls_problem(&common)?),
            };
            let sels = selectors(&common)?;
            if sels.is_empty() {
                return Err("run needs --backend ID (see `astroport devices`)".into());
            }
            run_and_report(
                &[problem.as_ref()],
                &common,
                sels,
                vec![precision],
                "astroport run",
            )
        }
        Command::Maps {
            common,
            precision,
            prefix,
        } => run_maps(&common, precision, &prefix),
        Command::Periodogram {
            common,
            inputs,
            precision,
            grid,
            normalization,
            fap,
            bootstrap,
            peaks_only,
        } => run_periodogram(
            &common,
            &inputs,
            precision,
            &grid,
            &normalization,
            &fap,
            bootstrap,
            peaks_only,
        ),
        Command::Chi2 {
            common,
            images,
            write_images,
        } => run_chi2(&common, images.as_ref(), write_images.as_ref()),
        Command::Bench { common, precision } => {
            // Every workload that has this preset; one that has not says so on screen.
            let mut problems: Vec<Box<dyn Workload>> = Vec::new();
            match lens_problem(&common) {
                Ok(p) => problems.push(Box::new(p)),
                Err(e) => eprintln!("lens: skipped: {e}"),
            }
            match ls_problem(&common) {
                Ok(p) => problems.push(Box::new(p)),
                Err(e) => eprintln!("lombscargle: skipped: {e}"),
            }
            if problems.is_empty() {
                return Err(format!("no workload has a preset '{}'", common.preset));
            }
            let sels = selectors(&common)?;
            let mut common = common;
            common.out.get_or_insert_with(|| PathBuf::from("out"));
            let refs: Vec<&dyn Workload> = problems.iter().map(|p| p.as_ref()).collect();
            let code = run_and_report(&refs, &common, sels, precision, "astroport bench")?;
            // Cubature has no problem size to scale: bench runs the seed's cheap 5D cases on every backend.
            if matches!(common.preset.as_str(), "tiny" | "ci") {
                let suite = CubatureArgs {
                    method: "pagani,mcubes".into(),
                    integrand: "sum,f1,f3,f5,f6".into(),
                    dim: "5".into(),
                    epsrel: "1e-3".into(),
                    epsabs: 1e-40,
                    ncall: 100_000,
                    max_ncall: 10_000_000,
                    seed: 2026,
                    memory_mib: None,
                    working_regions: cubature::pagani::WORKING_REGIONS,
                    max_iterations: 700,
                    max_seconds: Some(60.0),
                };
                let cubature_code = run_cubature(&common, &suite, false)?;
                return Ok(code.max(cubature_code));
            }
            eprintln!("cubature: skipped: bench runs it at the tiny and ci presets");
            Ok(code)
        }
    }
}

/// Runs each workload on the selected backends in the given precisions (empty: each workload's own), prints
/// the table, appends rows to results.jsonl and writes report.md.
fn run_and_report(
    workloads: &[&dyn Workload],
    common: &Common,
    selectors: Vec<Selector>,
    precisions: Vec<Precision>,
    title: &str,
) -> Result<i32, String> {
    if common.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    let discovery = discover();
    let choices = bench::select(&discovery, &selectors);
    let mut rows = Vec::new();
    for workload in workloads {
        let opts = RunOptions {
            precisions: if precisions.is_empty() {
                workload.precisions()
            } else {
                precisions.clone()
            },
            selectors: selectors.clone(),
            warmup: common.warmup,
            repeats: common.repeats,
        };
        eprintln!(
            "{title}: {} {} ({})",
            workload.name(),
            workload.preset(),
            workload.describe()
        );
        rows.extend(bench::run(*workload, &choices, &opts, |r: &Row| {
            eprintln!(
                "  -> {} {} {}: {}",
                r.backend,
                r.precision,
                r.workload,
                r.status.name()
            );
        }));
    }
    println!("{}", report::terminal(&rows));
    if let Some(dir) = &common.out {
        let path = append_jsonl(dir, "results.jsonl", &rows)
            .map_err(|e| format!("writing {}/results.jsonl: {e}", dir.display()))?;
        let names: Vec<String> = workloads
            .iter()
            .map(|w| format!("{} ({})", w.name(), w.preset()))
            .collect();
        let md = report::markdown(&format!("{title}: {}", names.join(", ")), &rows);
        let md_path = dir.join("report.md");
        write_atomic(&md_path, &md).map_err(|e| format!("writing {}: {e}", md_path.display()))?;
        eprintln!(
            "rows appended to {}; report in {}",
            path.display(),
            md_path.display()
        );
    }
    let failed = rows.iter().filter(|r| r.status == Status::Failed).count();
    if failed > 0 {
        eprintln!("{failed} run(s) failed verification or execution");
        return Ok(1);
    }
    Ok(0)
}

/// The `devices` listing.
pub fn devices_text() -> String {
    let d = discover();
    let mut out = String::from("id            model   type  device\n");
    for t in &d.targets {
        let info = t.info();
        let extra = match t {
            Target::Cpu(_) => String::new(),
            Target::Device(_) => format!(
                "  [{}; {}; {} CUs; {:.1} GiB; fp64 {}]",
                info.platform,
                info.driver,
                info.compute_units,
                info.global_mem_bytes as f64 / (1u64 << 30) as f64,
                if info.fp64 { "yes" } else { "no" }
            ),
        };
        out.push_str(&format!(
            "{:<13} {:<7} {:<5} {}{}\n",
            t.id(),
            t.model().name(),
            if info.is_gpu { "gpu" } else { "cpu" },
            info.name,
            extra
        ));
    }
    for a in &d.absent {
        out.push_str(&format!(
            "{:<13} {:<7} -     {}: {}\n",
            a.id,
            a.model.name(),
            a.why.status(),
            a.reason
        ));
    }
    out
}

/// A comma-separated option value, each item parsed; a bad item names the flag, the item and why.
fn parse_list<T>(flag: &str, text: &str) -> Result<Vec<T>, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.split(',')
        .map(|v| {
            v.trim()
                .parse::<T>()
                .map_err(|e| format!("--{flag}: '{}' is not valid ({e})", v.trim()))
        })
        .collect()
}

/// `astroport run cubature`: every (method, integrand, dim, epsrel) on every selected backend, one row each.
fn run_cubature(common: &Common, args: &CubatureArgs, need_backend: bool) -> Result<i32, String> {
    use crate::workload::cubature::{mcubes::McubesOptions, pagani::PaganiOptions, rule, suite};
    let methods: Vec<cubature::Method> = parse_list("method", &args.method)?;
    let integrands: Vec<cubature::Integrand> = parse_list("integrand", &args.integrand)?;
    let dims: Vec<usize> = parse_list("dim", &args.dim)?;
    if let Some(&d) = dims
        .iter()
        .find(|&&d| !(rule::MIN_DIM..=rule::MAX_DIM).contains(&d))
    {
        return Err(format!(
            "--dim: {d} is outside {}..={}",
            rule::MIN_DIM,
            rule::MAX_DIM
        ));
    }
    let epsrels: Vec<f64> = parse_list("epsrel", &args.epsrel)?;
    if let Some(e) = epsrels.iter().find(|&&e| !(e > 0.0 && e < 1.0)) {
        return Err(format!("--epsrel: {e} is not in (0, 1)"));
    }
    let sels = selectors(common)?;
    if sels.is_empty() && need_backend {
        return Err("run needs --backend ID (see `astroport devices`)".into());
    }
    let discovery = discover();
    let mut rows = Vec::new();
    for &method in &methods {
        for &integrand in &integrands {
            for &dim in &dims {
                for &epsrel in &epsrels {
                    let spec = suite::Spec {
                        method,
                        integrand,
                        dim,
                        pagani: PaganiOptions {
                            epsrel,
                            epsabs: args.epsabs,
                            max_iterations: args.max_iterations,
                            memory_limit: args.memory_mib.map(|m| m << 20),
                            working_regions: args.working_regions,
                            time_limit_s: args.max_seconds,
                        },
                        mcubes: McubesOptions {
                            epsrel,
                            epsabs: args.epsabs,
                            ncall: args.ncall,
                            max_ncall: args.max_ncall,
                            seed: args.seed,
                            time_limit_s: args.max_seconds,
                            ..McubesOptions::default()
                        },
                    };
                    for choice in bench::select(&discovery, &sels) {
                        let row = match choice {
                            bench::Choice::Run(t) => suite::row(t, &spec, suite::run(t, &spec)),
                            bench::Choice::Absent(a) => suite::absent_row(&a, &spec),
                        };
                        if let Some(o) = &row.outcome {
                            eprintln!(
                                "cubature {} {} {}D {:e} on {}: {} ({})",
                                method.name(),
                                integrand,
                                dim,
                                epsrel,
                                row.backend,
                                o.status.name(),
                                report::fmt_time(o.total_s)
                            );
                        } else {
                            eprintln!("cubature on {}: {}", row.backend, row.run);
                        }
                        rows.push(row);
                    }
                }
            }
        }
    }
    print!("{}", suite::terminal(&rows));
    for method in methods {
        let of_method: Vec<suite::CubatureRow> = rows
            .iter()
            .filter(|r| r.method == method)
            .cloned()
            .collect();
        let (claimed, covered) = suite::coverage(&of_method);
        println!(
            "{} coverage: {covered} of {claimed} runs that claim convergence have |true error| <= reported error{}",
            method.name(),
            if method == cubature::Method::Mcubes { " (1 sigma: about 68 % expected)" } else { "" }
        );
    }
    if let Some(dir) = &common.out {
        let path = append_jsonl(dir, "cubature.jsonl", &rows)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        println!("rows appended to {}", path.display());
    }
    Ok(if rows.iter().any(|r| r.run.starts_with("failed")) {
        1
    } else {
        0
    })
}
