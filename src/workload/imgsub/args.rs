//! `astroport run imgsub` (the difference image on every backend) and `astroport field` (the synthetic
//! field as files).

use super::difference::{DifferenceProblem, PRESETS};
use super::field::{generate, FieldSpec, Kind};
use super::io::{
    read_forced, subtraction_cards, subtraction_files, write_all_or_none, write_field,
    write_planes, write_tables, PlaneSet, PlanesAhead,
};
use super::pair::{Pair, PairFiles};
use super::score::{read_truth, score};
use super::subtract::{subtract_streaming, Direction, SubtractOptions};
use crate::backend::{Precision, Target};
use crate::workload::{OneBackendArgs, Tool, ToolArgs, WorkloadArgs};
use std::path::PathBuf;

/// `astroport run imgsub`: the difference image and its variance of a generated field, verified against
/// the float64 `cpu` reference.
#[derive(clap::Args, Debug, Clone)]
pub struct DifferenceArgs {
    /// Problem: tiny (256²), ci (1024²) or ast3 (10240², the seed's camera).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    /// Precisions, comma-separated or repeated: f32, f64.
    #[arg(long = "precision", value_delimiter = ',', default_value = "f32")]
    pub precisions: Vec<Precision>,
    /// Seed of the generated field.
    #[arg(long, default_value_t = 20_110_101)]
    pub seed: u64,
    /// Cap on device memory in MiB, below what the device reports (forces tiling into bands of rows).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
    /// Hold the kernel constant over TILE × TILE pixels (GAISP, HOTPANTS: 21); 0 = exact per pixel.
    #[arg(long, default_value_t = 0)]
    pub tile: usize,
}

impl WorkloadArgs for DifferenceArgs {
    const NAME: &'static str = "imgsub";
    const ABOUT: &'static str =
        "Image subtraction (GAISP): the difference image and its variance with a \
        spatially varying 21x21 kernel, on a generated field";
    const PRESETS: &'static [&'static str] = &PRESETS;
    const TOOLS: &'static [Tool] = &[Tool::of::<FieldArgs>(), Tool::of::<SubtractArgs>()];
    type Workload = DifferenceProblem;
    fn build(&self) -> Result<Vec<DifferenceProblem>, String> {
        let cap = crate::workload::mib_flag("--device-mem-mib", self.device_mem_mib)?;
        let mut problem = DifferenceProblem::preset(&self.preset, self.seed)?;
        problem.device_mem_cap = cap;
        problem.tile = self.tile;
        Ok(vec![problem])
    }
    fn modes(&self) -> Vec<Precision> {
        let mut modes = self.precisions.clone();
        modes.dedup();
        modes
    }
}

/// Flags of `astroport field`.
#[derive(clap::Args, Debug, Clone)]
pub struct FieldArgs {
    /// Side of both images, pixels (64 to 16384).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Generator seed (the anchor field of research/imgsub.md used 20110101).
    #[arg(long, default_value_t = 20_110_101)]
    pub seed: u64,
    /// Cosmic rays per megapixel in the science image.
    #[arg(long, default_value_t = 0.0)]
    pub cosmic_rays: f64,
    /// A hot, masked column in the science image.
    #[arg(long)]
    pub bad_column: bool,
    /// Existing folder for ref.fits, sci.fits, their variance and masks, and truth.csv.
    #[arg(long)]
    pub out: PathBuf,
}

impl ToolArgs for FieldArgs {
    const NAME: &'static str = "field";
    const ABOUT: &'static str =
        "A synthetic reference and science image pair with a truth table (stars, \
        galaxies, variables, transients), for scoring image subtraction";
    fn run(self) -> Result<i32, String> {
        let mut spec = FieldSpec::new(self.size, self.seed)?;
        if !(self.cosmic_rays >= 0.0 && self.cosmic_rays <= 1e4) {
            return Err(format!(
                "--cosmic-rays {}: give 0 to 10000 per megapixel",
                self.cosmic_rays
            ));
        }
        if !self.out.is_dir() {
            return Err(format!("--out {}: no such folder", self.out.display()));
        }
        spec.cosmic_rays_per_mpx = self.cosmic_rays;
        spec.bad_column = self.bad_column;
        let start = std::time::Instant::now();
        let field = generate(&spec);
        let generated = start.elapsed().as_secs_f64();
        let written = write_field(&field, &self.out).map_err(|e| e.to_string())?;
        let count = |k: Kind| field.sources.iter().filter(|s| s.kind == k).count();
        println!(
            "field {}² px, seed {}: {} stars, {} galaxies, {} variables, {} transients, {} cosmic rays; \
             generated in {generated:.2} s",
            spec.size,
            spec.seed,
            count(Kind::Star),
            count(Kind::Galaxy),
            count(Kind::Variable),
            count(Kind::Transient),
            count(Kind::CosmicRay)
        );
        for path in written {
            println!("  wrote {}", path.display());
        }
        Ok(0)
    }
}

/// Flags of `astroport subtract`.
#[derive(clap::Args, Debug, Clone)]
pub struct SubtractArgs {
    /// Reference image (FITS), registered to the science image's pixel grid.
    #[arg(
        long = "ref",
        required_unless_present_any = ["field", "pairs"],
        conflicts_with_all = ["field", "pairs"]
    )]
    pub reference: Option<PathBuf>,
    /// Science image (FITS).
    #[arg(
        long = "sci",
        required_unless_present_any = ["field", "pairs"],
        conflicts_with_all = ["field", "pairs"]
    )]
    pub science: Option<PathBuf>,
    /// Variance of the reference (FITS); default: from GAIN and RDNOISE in its header.
    #[arg(long = "ref-var", conflicts_with_all = ["field", "pairs"])]
    pub reference_variance: Option<PathBuf>,
    #[arg(long = "sci-var", conflicts_with_all = ["field", "pairs"])]
    pub science_variance: Option<PathBuf>,
    /// Bad-pixel mask of the reference (FITS, non-zero = bad).
    #[arg(long = "ref-mask", conflicts_with_all = ["field", "pairs"])]
    pub reference_mask: Option<PathBuf>,
    #[arg(long = "sci-mask", conflicts_with_all = ["field", "pairs"])]
    pub science_mask: Option<PathBuf>,
    /// A folder written by `astroport field`: its images, variances, masks and truth.csv (scored).
    #[arg(long, conflicts_with = "pairs")]
    pub field: Option<PathBuf>,
    /// Many pairs in one process, as a survey pipeline runs them: a CSV list with columns name, ref, sci
    /// and optionally ref_var, sci_var, ref_mask, sci_mask (paths relative to the list). Each pair's
    /// outputs go to the folder --out/NAME (made if missing), all or none. The backend starts once, and
    /// each pair is read while the one before it finishes (its matched filter, detection and writes). A pair
    /// that fails is reported and the others go on; the exit status is then 2, as for a bad list, and the
    /// last line names the pairs that failed.
    #[arg(long, conflicts_with_all = ["truth", "forced", "difference"])]
    pub pairs: Option<PathBuf>,
    /// Places for forced PSF photometry: CSV with columns x, y (0-based pixels) and optionally id.
    #[arg(long)]
    pub forced: Option<PathBuf>,
    /// A truth table of `astroport field`: score the subtraction against it (quality.json).
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Existing folder for the outputs.
    #[arg(long)]
    pub out: PathBuf,
    /// Another tool's difference image (FITS on the pair's grid: science minus the matched reference, in
    /// the science image's units; NaN = masked). It replaces astroport's before detection, so that it is
    /// detected and scored with astroport's variance, mask, PSF model and detector: only D differs.
    #[arg(long)]
    pub difference: Option<PathBuf>,
    /// Arithmetic of the convolution and matched filter.
    #[arg(long, default_value = "f32")]
    pub precision: Precision,
    /// Hold the kernel constant over TILE × TILE pixels (GAISP, HOTPANTS: 21); 0 = exact per pixel.
    #[arg(long, default_value_t = 0)]
    pub tile: usize,
    /// Which image to convolve; default: the sharper.
    #[arg(long, value_enum)]
    pub convolve: Option<Direction>,
    /// Detection threshold in matched-filter σ.
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Cap on device memory in MiB (forces tiling into bands of rows).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
    /// Rows per band of the difference and the significance pipelined on a device (default: about 16.8
    /// million pixels a band; at least 10). For tests and timing: the files must not depend on it.
    #[arg(long, hide = true, alias = "significance-band-rows")]
    pub band_rows: Option<usize>,
    /// Do not force the outputs to the disk (fsync) before moving them into place. They still appear
    /// whole or not at all, but a crash of the machine soon after may lose them. For scratch space, or a
    /// pipeline that copies its outputs on; at 10k it saves the disk's write of 1.3 GB.
    #[arg(long)]
    pub no_fsync: bool,
    #[command(flatten)]
    pub backend: OneBackendArgs,
}

impl ToolArgs for SubtractArgs {
    const NAME: &'static str = "subtract";
    const ABOUT: &'static str =
        "Image subtraction of a registered pair, or of a list of pairs: kernel fit \
        (Alard-Lupton, HOTPANTS' basis), difference and variance on a backend, detection, PSF photometry";
    fn run(self) -> Result<i32, String> {
        crate::workload::require_positive("--threshold", self.threshold)?;
        crate::inputs::set_durable(!self.no_fsync);
        // Made once, for the pair or for every pair of a list.
        let options = SubtractOptions {
            tile: self.tile,
            threshold: self.threshold,
            precision: self.precision,
            direction: self.convolve,
            run: self.backend.options().single_shot_if_once(),
            device_mem_cap: crate::workload::mib_flag("--device-mem-mib", self.device_mem_mib)?,
            band_rows: self.band_rows,
            ..SubtractOptions::default()
        };
        if let Some(list) = &self.pairs {
            return self.run_pairs(list, &options);
        }
        let files = match &self.field {
            Some(dir) => PairFiles {
                reference: dir.join("ref.fits"),
                science: dir.join("sci.fits"),
                reference_variance: Some(dir.join("ref.var.fits")),
                science_variance: Some(dir.join("sci.var.fits")),
                reference_mask: Some(dir.join("ref.mask.fits")),
                science_mask: Some(dir.join("sci.mask.fits")),
            },
            None => PairFiles {
                reference: self.reference.clone().expect("clap requires --ref"),
                science: self.science.clone().expect("clap requires --sci"),
                reference_variance: self.reference_variance.clone(),
                science_variance: self.science_variance.clone(),
                reference_mask: self.reference_mask.clone(),
                science_mask: self.science_mask.clone(),
            },
        };
        let truth_path = self
            .truth
            .clone()
            .or_else(|| self.field.as_ref().map(|d| d.join("truth.csv")));
        let started = self.start(&files)?;
        let (pair, read_s) = started.first;
        let pair = pair?;
        let discovery = started.discovery?;
        let target = self.backend.target(&discovery)?;
        let outputs = PairOutputs {
            out: &self.out,
            truth: truth_path.as_deref(),
            forced: self.forced.as_deref(),
            difference: self.difference.as_deref(),
            label: String::new(),
            on_difference: None,
        };
        let backend_s = Some(started.discovery_s);
        self.subtract_pair(
            pair,
            read_s,
            backend_s,
            target,
            &options,
            &outputs,
            started.command_start,
        )?;
        Ok(0)
    }
}

/// A pair read from its files, and the seconds the read took.
type ReadPair = (Result<Pair, String>, f64);

fn read_pair(files: &PairFiles) -> ReadPair {
    let started = std::time::Instant::now();
    (Pair::read(files), started.elapsed().as_secs_f64())
}

/// The start a single pair and a list share ([`SubtractArgs::start`]).
struct Started {
    command_start: std::time::Instant,
    /// Makes the device's context after discovery; joined on drop (`None` once joined).
    _preparing: Option<crate::exec::JoinOnDrop<()>>,
    /// The first pair, read while the backend starts.
    first: ReadPair,
    discovery: Result<std::sync::Arc<crate::backend::Discovery>, String>,
    discovery_s: f64,
}

/// Starts the backend `--backend` names on a thread of its own: its discovery (a GPU runtime: 0.2-2 s) comes
/// back on the receiver with its seconds, and a device's context is then made at once (CUDA: 0.10-0.15 s).
/// The files are read meanwhile: made after the read, the context held up the fit's first job once the
/// stamps took 40 ms. That job waits for it, and reports its failure. The handle joins on drop.
#[allow(clippy::type_complexity)]
fn start_backend(
    backend: &OneBackendArgs,
) -> (
    crate::exec::JoinOnDrop<()>,
    std::sync::mpsc::Receiver<(
        Result<std::sync::Arc<crate::backend::Discovery>, String>,
        f64,
    )>,
) {
    let (found, discovered) = std::sync::mpsc::channel();
    let backend = backend.clone();
    let preparing = crate::exec::JoinOnDrop::spawn(move || {
        let started = std::time::Instant::now();
        crate::exec::trace_event(|| "backend: discovery begins".into());
        let discovery = backend.discovery().map(std::sync::Arc::new);
        crate::exec::trace_event(|| "backend: discovered".into());
        let _ = found.send((discovery.clone(), started.elapsed().as_secs_f64()));
        if let Ok(Ok(Target::Device(dev))) = discovery.as_ref().map(|d| backend.target(d)) {
            let prepared = dev.prepare();
            crate::exec::trace_event(|| match prepared {
                Ok(_) => "backend: prepared".into(),
                Err(e) => format!("backend: not prepared: {e}"),
            });
        }
    });
    (preparing, discovered)
}

/// `bands` with the time spent waiting for each added to `waited`.
fn timed_bands<'a>(
    bands: crate::fits_image::RowBands<'a>,
    waited: &'a std::sync::Mutex<std::time::Duration>,
) -> impl Fn(crate::fits_image::BandSink) -> Option<std::io::Result<()>> + Sync + 'a {
    move |sink| {
        let asked = std::time::Instant::now();
        // The wait ends when the band is handed over (before its write), or when there is none.
        let mut handed = None;
        let written = bands(&mut |row0, band| {
            handed = Some(asked.elapsed());
            sink(row0, band)
        });
        *waited.lock().unwrap() += handed.unwrap_or_else(|| asked.elapsed());
        written
    }
}

/// Where one pair's outputs go, and what else it reads: the truth it is scored against, places for forced
/// photometry, another tool's difference. `label` prefixes its printed lines in a list of pairs;
/// `on_difference` is called when the difference is known and its planes go to the writers (a list of
/// pairs then starts reading the next pair).
struct PairOutputs<'a> {
    out: &'a std::path::Path,
    truth: Option<&'a std::path::Path>,
    forced: Option<&'a std::path::Path>,
    difference: Option<&'a std::path::Path>,
    label: String,
    on_difference: Option<&'a (dyn Fn() + Sync)>,
}

impl SubtractArgs {
    /// What a single pair and a list begin with: `--out` checked, the clock started, the backend started on
    /// a thread of its own ([`start_backend`]) while the first pair is read, and its discovery waited for.
    fn start(&self, first: &PairFiles) -> Result<Started, String> {
        if !self.out.is_dir() {
            return Err(format!("--out {}: no such folder", self.out.display()));
        }
        let command_start = std::time::Instant::now();
        crate::exec::trace_event(|| "command: starts".into());
        let (preparing, discovered) = start_backend(&self.backend);
        // A probe of the start's contention, not a setting: the read waits until the context is made.
        let preparing = if crate::exec::probe_on("ASTROPORT_PROBE_READ_AFTER_PREPARE") {
            preparing.join();
            None
        } else {
            Some(preparing)
        };
        let first = read_pair(first);
        crate::exec::trace_event(|| "command: first pair read".into());
        let (discovery, discovery_s) = discovered.recv().expect("backend discovery panicked");
        Ok(Started {
            command_start,
            _preparing: preparing,
            first,
            discovery,
            discovery_s,
        })
    }

    /// `--pairs`: every pair of the list into its own folder, the backend started once, each pair read
    /// while the one before it finishes. Each pair's "file to file" counts from the end of the one before:
    /// the time a pipeline spends per pair.
    fn run_pairs(&self, list: &std::path::Path, options: &SubtractOptions) -> Result<i32, String> {
        let pairs = super::io::read_pair_list(list).map_err(|e| e.to_string())?;
        let Started {
            command_start,
            _preparing,
            first,
            discovery,
            discovery_s,
        } = self.start(&pairs[0].files)?;
        let mut next = Some(first);
        let discovery = discovery?;
        let target = self.backend.target(&discovery)?;
        let mut failed = Vec::new();
        let (mut started, mut first_s) = (command_start, 0.0);
        for (k, listed) in pairs.iter().enumerate() {
            let (pair, read_s) = next.take().expect("each pair is read once");
            let done = std::thread::scope(|scope| {
                // The next pair is read once this one's difference is known, beside its matched filter,
                // detection and writes. Read from the start, beside the stamps and the fit, it slowed them
                // by as much as it took, even at low priority (docs/perf-notes.md).
                let (go, wait) = std::sync::mpsc::channel::<()>();
                let ahead = pairs.get(k + 1).map(|p| {
                    scope.spawn(move || {
                        // Also begun when this pair fails before its difference (the sender is gone).
                        let _ = wait.recv();
                        read_pair(&p.files)
                    })
                });
                let signal = move || {
                    let _ = go.send(());
                };
                let out = self.out.join(&listed.name);
                let outputs = PairOutputs {
                    out: &out,
                    truth: None,
                    forced: None,
                    difference: None,
                    label: format!("pair {}: ", listed.name),
                    on_difference: Some(&signal),
                };
                // The pair's folder is made by the all-or-none writer, which takes it away again on failure.
                let done = pair.and_then(|pair| {
                    let backend_s = (k == 0).then_some(discovery_s);
                    self.subtract_pair(pair, read_s, backend_s, target, options, &outputs, started)
                });
                // A wait for the next pair's read counts in the next pair's time.
                let finished = std::time::Instant::now();
                drop(signal);
                next = ahead.map(|h| h.join().expect("a pair's reader panicked"));
                (done, finished)
            });
            if let Err(e) = done.0 {
                eprintln!(
                    "error: pair {} (listed in {}): {e}",
                    listed.name,
                    list.display()
                );
                failed.push(listed.name.as_str());
            }
            if k == 0 {
                first_s = (done.1 - command_start).as_secs_f64();
            }
            started = done.1;
        }
        let total = command_start.elapsed().as_secs_f64();
        let later = match pairs.len() {
            1 => String::new(),
            n => format!(
                ", {:.3} s per pair after the first",
                (total - first_s) / (n - 1) as f64
            ),
        };
        println!(
            "{} of {} pairs subtracted in {total:.3} s ({:.3} s per pair{later}){}",
            pairs.len() - failed.len(),
            pairs.len(),
            total / pairs.len() as f64,
            if failed.is_empty() {
                String::new()
            } else {
                format!("; failed: {}", failed.join(", "))
            }
        );
        Ok(if failed.is_empty() { 0 } else { 2 })
    }

    /// Subtracts `pair` (read in `read_s`) on `target` with `options` into `outputs.out`, all files or none,
    /// and prints its timeline; `started` is where its file to file time counts from, `backend_s` the
    /// seconds the backend took to start, where this pair waited for it.
    #[allow(clippy::too_many_arguments)]
    fn subtract_pair(
        &self,
        pair: Pair,
        mut read_s: f64,
        backend_s: Option<f64>,
        target: &Target,
        options: &SubtractOptions,
        outputs: &PairOutputs,
        started: std::time::Instant,
    ) -> Result<(), String> {
        let (nx, ny) = (pair.nx, pair.ny);
        let truth_start = std::time::Instant::now();
        let external_difference = outputs
            .difference
            .map(|p| {
                pair.read_matching("--difference", p)
                    .map(std::sync::Arc::new)
            })
            .transpose()?;
        let forced = outputs
            .forced
            .map(|p| read_forced(p, nx, ny).map_err(|e| e.to_string()))
            .transpose()?;
        let truth = outputs
            .truth
            .map(|p| read_truth(p).map_err(|e| e.to_string()))
            .transpose()?;
        read_s += truth_start.elapsed().as_secs_f64();
        let wcs = pair.wcs.clone();
        let mut history = vec![format!(
            "astroport {} subtract (commit {})",
            env!("CARGO_PKG_VERSION"),
            env!("ASTROPORT_GIT_COMMIT")
        )];
        history.extend(pair.sources.iter().cloned());
        if let Some(p) = outputs.difference {
            history.push(format!(
                "difference image from {} (scored in place of astroport's)",
                p.display()
            ));
        }
        let options = SubtractOptions {
            external_difference,
            ..options.clone()
        };
        let synced_before = crate::inputs::seconds_syncing();
        let names = subtraction_files(forced.is_some(), truth.is_some());
        // All files or none: the difference, its variance and mask are written while the matched filter and
        // detection run, the significance as its bands come from a device and while detection runs (or,
        // scored, whole while the scores are computed).
        let ((sub, quality, score_s, planes_s, tail_s), written) =
            write_all_or_none(outputs.out, "subtract", &names, |staging| {
                // On an accelerator the planes' files are written ahead while the host waits for the
                // device; the `cpu` model's cores are busy with the subtraction itself then. Not when the
                // files are synced: the disk is then the bound (1.3 GB at 1.5-1.6 GB/s at 10k), and zeros
                // flushed before the planes replace them would be written twice.
                let ahead = match target {
                    // `ASTROPORT_PROBE_NO_WRITE_AHEAD`: a probe for A/B timing, not a setting.
                    Target::Device(_)
                        if self.no_fsync
                            && !crate::exec::probe_on("ASTROPORT_PROBE_NO_WRITE_AHEAD") =>
                    {
                        PlanesAhead::start(staging, nx, ny)
                    }
                    _ => PlanesAhead::none(),
                };
                let planes_s = std::sync::Mutex::new(0.0);
                // The cards are final with the difference: made once for the four planes.
                let cards = std::sync::OnceLock::new();
                let write = |sub: &super::subtract::Subtraction, set: PlaneSet| {
                    let started = std::time::Instant::now();
                    let cards = cards.get_or_init(|| subtraction_cards(sub, &wcs));
                    // A plane that comes in bands is timed without its waits for them (its writer waits
                    // for the device between bands); two such planes written at once, without the
                    // shorter of their waits.
                    let waits = [std::time::Duration::ZERO; 2].map(std::sync::Mutex::new);
                    let timed = |k: usize, bands| timed_bands(bands, &waits[k]);
                    let (written, waited) = match set {
                        PlaneSet::SignificanceRows(bands) => {
                            let snr = timed(0, bands);
                            let set = PlaneSet::SignificanceRows(&snr);
                            let written = write_planes(sub, set, cards, &history, staging, &ahead);
                            (written, *waits[0].lock().unwrap())
                        }
                        PlaneSet::Difference { diff, variance } => {
                            let (diff, variance) = (timed(0, diff), timed(1, variance));
                            let set = PlaneSet::Difference {
                                diff: &diff,
                                variance: &variance,
                            };
                            let written = write_planes(sub, set, cards, &history, staging, &ahead);
                            let waited = waits.each_ref().map(|w| *w.lock().unwrap());
                            (written, waited[0].min(waited[1]))
                        }
                        PlaneSet::Significance(_) => (
                            write_planes(sub, set, cards, &history, staging, &ahead),
                            std::time::Duration::ZERO,
                        ),
                    };
                    let writing = started.elapsed().saturating_sub(waited);
                    *planes_s.lock().unwrap() += writing.as_secs_f64();
                    written.map_err(|e| e.to_string())
                };
                // Scored, the significance is written beside the scores (which need the detections)
                // rather than beside detection, which is shorter than either.
                let sub = subtract_streaming(pair, &options, target, |sub, set| match set {
                    // Scored, the significance is written whole beside the scores: its bands are let go.
                    PlaneSet::SignificanceRows(_) if truth.is_some() => Ok(()),
                    PlaneSet::Difference { .. } => {
                        if let Some(signal) = outputs.on_difference {
                            signal();
                        }
                        write(sub, set)
                    }
                    _ => write(sub, set),
                })?;
                let tail = std::time::Instant::now();
                let (quality, score_s, snr_written) = std::thread::scope(|scope| {
                    let snr = truth
                        .is_some()
                        .then(|| scope.spawn(|| write(&sub, PlaneSet::Significance(&sub.snr))));
                    let started = std::time::Instant::now();
                    let quality = truth.as_ref().map(|t| score(&sub, t, &sub.input_mask));
                    let score_s = started.elapsed().as_secs_f64();
                    let written = snr.map_or(Ok(()), |h| h.join().expect("the writer panicked"));
                    (quality, score_s, written)
                });
                snr_written?;
                write_tables(&sub, forced.as_deref(), quality.as_ref(), staging)
                    .map_err(|e| e.to_string())?;
                let tail_s = tail.elapsed().as_secs_f64();
                let planes_s = *planes_s.lock().unwrap();
                Ok::<_, String>((sub, quality, score_s, planes_s, tail_s))
            })?;
        let sync_s = crate::inputs::seconds_syncing() - synced_before;
        let command_s = started.elapsed().as_secs_f64();
        let sync = if self.no_fsync {
            "no fsync: --no-fsync".to_string()
        } else {
            format!("fsync {sync_s:.3} s, summed over the files written at once")
        };
        let d = sub.diagnostics();
        let t = &sub.timings;
        let label = &outputs.label;
        let backend = match backend_s {
            Some(s) => format!("backends found in {s:.3} s (beside the read)"),
            None => "the backend started for an earlier pair".into(),
        };
        if let Some(p) = outputs.difference {
            println!(
                "{label}difference image: {} (in place of astroport's; variance, mask, PSF model and detector are \
                 astroport's)",
                p.display()
            );
        }
        println!(
            "{label}subtract {nx}×{ny} on {} {}: convolved the {} image (FWHM ref {:.2}, sci {:.2} px); \
             {} stamps fitted, {} clipped, χ²/px {:.3}, condition {:.2e}; kernel sum {:.4} ({:.4}…{:.4})",
            sub.backend,
            sub.precision.name(),
            match sub.direction {
                Direction::Reference => "reference",
                Direction::Science => "science",
            },
            sub.fwhm.0,
            sub.fwhm.1,
            d.stamps_fitted,
            d.stamps_clipped,
            d.mean_chi2_per_pixel,
            d.condition_number,
            d.kernel_sum_grid[12],
            d.kernel_sum_grid.iter().cloned().fold(f64::INFINITY, f64::min),
            d.kernel_sum_grid.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        );
        let passes = if sub.kept_on_device {
            format!(
                "difference {:.2} ms and filter {:.2} ms pipelined in {} jobs ({:.3} s wall; the filter's \
                 inputs formed on the device)",
                t.difference_s * 1e3,
                t.filter_s * 1e3,
                t.pipelined_jobs,
                t.difference_wall_s
            )
        } else {
            format!(
                "difference {:.2} ms ({:.3} s wall), filter {:.2} ms ({:.3} s wall)",
                t.difference_s * 1e3,
                t.difference_wall_s,
                t.filter_s * 1e3,
                t.filter_wall_s
            )
        };
        println!(
            "  {} detections at {}σ; time: read {read_s:.3} s, fit {:.3} s (basis images {:.3} s, stamp sums {:.3} s wall, jobs {:.3} \
             s, {:.2} ms on the backend), {}, host {:.3} s, subtraction {:.3} s; \
             {backend}; planes written in {planes_s:.3} s ({sync}; \
             beside the filter, detection and scoring), scored in \
             {score_s:.3} s, after detection {tail_s:.3} s; file to file {command_s:.3} s",
            sub.detections.len(),
            self.threshold,
            t.fit_s,
            t.basis_images_s,
            t.stamp_sums_wall_s,
            t.stamp_sums_job_s,
            t.stamp_sums_s * 1e3,
            passes,
            t.host_s,
            t.total_s
        );
        println!(
            "  steps: {}",
            t.steps
                .iter()
                .map(|(name, s)| format!("{name} {s:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(q) = &quality {
            println!(
                "  quality: sky noise ratio {:.3}, static NRMS {:.3} ({} stars), recall {}/{} (S/N ≥ 7: {}/{}), \
                 false positives {} (+{} near saturation), PSF photometry bias {:+.1} % MAD {:.1} % ({} changers)",
                q.sky_noise_ratio,
                q.static_nrms,
                q.static_stars,
                q.recovered,
                q.changers,
                q.recovered_snr7,
                q.changers_snr7,
                q.false_positives,
                q.false_positives_saturated,
                q.photometry_bias * 100.0,
                q.photometry_mad * 100.0,
                q.photometry_stars
            );
        }
        for path in written {
            crate::detail!("  wrote {}", path.display());
        }
        Ok(())
    }
}
