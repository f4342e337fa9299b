//! Running a workload's work on one target, written once for every workload: the options of a run, the modes
//! a run is in, device plans (bands of kernel jobs) timed with device events, host code timed with the host
//! clock, and what a run measured. This is the layer under the workloads: they and the driver
//! (`crate::bench`) both use it, and it knows no workload.

use crate::backend::{
    Accelerator, BufferSpec, DeviceInfo, HostVec, KernelJob, Precision, Program, Resources, Step,
    StepReport, Target,
};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A numeric mode of a workload: plain float32 or float64 ([`Precision`]), or a scheme of the workload's
/// own (the lens's mixed precision). Its name is the `precision` field of result rows.
pub trait Mode: Copy + PartialEq + Send + Sync + std::fmt::Debug + 'static {
    fn name(self) -> &'static str;
    /// The arithmetic that does the bulk of the work: the pipe the device-limit floor counts.
    fn precision(self) -> Precision;
    /// Whether the device must support float64 to run this mode.
    fn needs_fp64(self) -> bool {
        self.precision() == Precision::F64
    }
}

impl Mode for Precision {
    fn name(self) -> &'static str {
        Precision::name(self)
    }
    fn precision(self) -> Precision {
        self
    }
}

/// How a run is timed.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Untimed runs before the timed ones.
    pub warmup: u32,
    /// Timed runs; the median is reported.
    pub repeats: u32,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            warmup: 1,
            repeats: 3,
        }
    }
}

impl RunOptions {
    /// One untimed-warm-up-free run, for commands and library calls that want the values, not a benchmark.
    pub fn once() -> Self {
        RunOptions {
            warmup: 0,
            repeats: 1,
        }
    }

    /// Each job run exactly once (its verification run is its timed run): a stage inside a larger computation
    /// timed by the caller's clock, such as a process of a distributed transform.
    pub fn single_shot() -> Self {
        RunOptions {
            warmup: 0,
            repeats: 0,
        }
    }

    /// These options, single-shot when they ask for one timed run and no warm-up: a device job then runs
    /// once (its verification run timed) instead of a timed run followed by a verification run. For
    /// commands that want values, such as `subtract`, where a second run of each pass would sit on the
    /// critical path.
    pub fn single_shot_if_once(self) -> Self {
        if self.warmup == 0 && self.repeats == 1 {
            Self::single_shot()
        } else {
            self
        }
    }

    /// A job of `program` timed as these options say.
    pub fn job<'a>(
        &self,
        program: &'a Program,
        defines: Vec<(String, String)>,
        buffers: Vec<BufferSpec<'a>>,
        steps: Vec<Step>,
    ) -> KernelJob<'a> {
        KernelJob {
            program,
            defines,
            buffers,
            steps,
            warmup: self.warmup,
            repeats: self.repeats,
        }
    }
}

/// What a plan may use of a device: the largest single buffer and all buffers together, bytes; and
/// whether it is a GPU (a kernel's work per item can differ: more registers pay on CPUs, occupancy on GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBudget {
    pub max_alloc: u64,
    pub mem: u64,
    pub gpu: bool,
}

impl DeviceBudget {
    /// What the device offers (a device that reports no memory size is taken as unbounded).
    pub fn of(info: &DeviceInfo) -> Self {
        DeviceBudget {
            max_alloc: info.max_alloc_bytes,
            mem: if info.global_mem_bytes == 0 {
                u64::MAX
            } else {
                info.global_mem_bytes
            },
            gpu: info.is_gpu,
        }
    }

    /// At most `cap` bytes in all, when a cap is given.
    pub fn capped(self, cap: Option<u64>) -> Self {
        DeviceBudget {
            mem: cap.map_or(self.mem, |c| c.min(self.mem)),
            ..self
        }
    }
}

/// Time statistics over the timed repeats (warm-up excluded), seconds. For a tiled problem each statistic is
/// the sum over bands.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimeStats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub repeats: u32,
    pub warmup: u32,
    /// "device events" for kernel plans, "host clock" for the `cpu` model, "wall clock" for host-driven
    /// iterative runs (kernels plus the host's decisions and transfers).
    pub timer: String,
}

impl TimeStats {
    pub fn from_samples(samples: &[f64], warmup: u32, timer: &str) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        Some(TimeStats {
            median: crate::backend::median(samples),
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            repeats: samples.len() as u32,
            warmup,
            timer: timer.into(),
        })
    }
}

/// Launch geometry of a plan: work-items of the largest launch summed over bands, the work-group size used,
/// and the number of bands.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LaunchSummary {
    pub global: u64,
    pub local: u64,
    pub bands: u32,
}

/// What one run on one target produced, before verification.
#[derive(Debug, Clone)]
pub struct Measured<T> {
    pub output: T,
    pub times: TimeStats,
    /// Program build / JIT time (device models).
    pub build_s: Option<f64>,
    /// Registers and occupancy of the main kernel, or why there are none.
    pub resources: Option<Resources>,
    pub launch: Option<LaunchSummary>,
    /// Per-step (or per-kernel) device time and resources.
    pub steps: Vec<StepReport>,
    pub build_options: String,
}

impl<T> Measured<T> {
    /// What host code measured: no build, no launch, the host's resources and build options.
    /// The same measurement with its output transformed (e.g. flattened for comparison).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Measured<U> {
        Measured {
            output: f(self.output),
            times: self.times,
            build_s: self.build_s,
            resources: self.resources,
            launch: self.launch,
            steps: self.steps,
            build_options: self.build_options,
        }
    }

    pub fn host(output: T, times: TimeStats) -> Self {
        Measured {
            output,
            times,
            build_s: None,
            resources: Some(host_resources()),
            launch: None,
            steps: Vec::new(),
            build_options: host_build_options(),
        }
    }
}

/// Why a run produced no result: the device cannot do it (a `no_device` row), or it failed.
#[derive(Debug, Clone, PartialEq)]
pub enum RunError {
    /// The device cannot run this mode (no float64): the row is `no_device`.
    Unsupported(String),
    /// This model has no kernels for this workload yet: the row is `not_built`, with the reason.
    NotBuilt(String),
    Failed(String),
}

impl From<String> for RunError {
    fn from(s: String) -> Self {
        RunError::Failed(s)
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Unsupported(why) | RunError::NotBuilt(why) | RunError::Failed(why) => {
                f.write_str(why)
            }
        }
    }
}

/// Whether ASTROPORT_TRACE_JOBS is set: each native job prints its phases, and [`trace_event`] its events.
pub fn tracing_jobs() -> bool {
    static SET: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SET.get_or_init(|| std::env::var_os("ASTROPORT_TRACE_JOBS").is_some())
}

/// With ASTROPORT_TRACE_JOBS set, prints `what` with the seconds since the first event of the process, so
/// the steps of a pipeline and the threads beside them (the planes' writers) can be put on one timeline.
pub fn trace_event(what: impl FnOnce() -> String) {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    if tracing_jobs() {
        let origin = ORIGIN.get_or_init(std::time::Instant::now);
        eprintln!("trace +{:.3} s {}", origin.elapsed().as_secs_f64(), what());
    }
}

/// Whether a probe for A/B timing (an environment variable, not a setting) is set.
pub fn probe_on(name: &str) -> bool {
    std::env::var_os(name).is_some()
}

/// A count a probe for A/B timing sets through the environment (not a setting), else `default`.
pub fn probe_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(default)
}

/// A thread joined when it is dropped, so that an early return (an error) never leaves it running with what
/// it holds (`subtract`'s PSF thread: 900 MB of planes at 10k) or leaves the process while it is inside a
/// runtime (a device's context being made).
pub struct JoinOnDrop<T>(Option<std::thread::JoinHandle<T>>);

impl<T: Send + 'static> JoinOnDrop<T> {
    pub fn spawn(work: impl FnOnce() -> T + Send + 'static) -> Self {
        JoinOnDrop(Some(std::thread::spawn(work)))
    }
    pub fn join(mut self) -> T {
        let handle = self.0.take().expect("joined once");
        handle
            .join()
            .expect("a thread joined by JoinOnDrop panicked")
    }
}

impl<T> Drop for JoinOnDrop<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            let _ = handle.join();
        }
    }
}

/// Lowers the calling thread's scheduling priority by 10 nice steps (on Linux nice is per thread), for work
/// beside a pipeline's critical path that should leave the cores to it when both want them. Best effort.
pub fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: nice(3) changes only the calling thread's nice value (clamped at 19).
    unsafe {
        let _ = libc::nice(10);
    }
}

/// A rayon pool as large as the global one whose threads run at lowered priority
/// ([`lower_this_threads_priority`]): for parallel work beside a pipeline's critical path, which then takes
/// the cores the critical path leaves idle (`subtract`'s PSF model beside the fit and the difference).
pub fn background_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("background-{i}"))
            .start_handler(|_| lower_this_threads_priority())
            .build()
            .expect("a thread pool")
    })
}

/// The resources of host code, which has no registers to report.
pub fn host_resources() -> Resources {
    Resources {
        regs_per_thread: None,
        occupancy: None,
        source: "n/a: Rust on the host (rayon)".into(),
    }
}

/// Build options of the `cpu` model's code, for provenance.
pub fn host_build_options() -> String {
    format!(
        "rustc -C opt-level=3, target-cpu {}",
        env!("ASTROPORT_TARGET_CPU")
    )
}

/// Runs host code `warmup + repeats` times and times each timed run with the host clock (`timer`); the
/// output is the last run's.
pub fn time_host<T>(
    opts: &RunOptions,
    timer: &str,
    mut run: impl FnMut() -> Result<T, String>,
) -> Result<(T, TimeStats), RunError> {
    time_host_prepared(opts, timer, &mut (), |_| {}, |_| run())
}

/// [`time_host`] with a state the runs share and an untimed `prepare` before each (a reused output
/// poisoned, so a run that skips part of it cannot pass on the previous run's values).
pub fn time_host_prepared<S, T>(
    opts: &RunOptions,
    timer: &str,
    state: &mut S,
    mut prepare: impl FnMut(&mut S),
    mut run: impl FnMut(&mut S) -> Result<T, String>,
) -> Result<(T, TimeStats), RunError> {
    let mut samples = Vec::new();
    let mut output = None;
    for i in 0..(opts.warmup + opts.repeats.max(1)) {
        prepare(state);
        let start = Instant::now();
        let value = run(state)?;
        if i >= opts.warmup {
            samples.push(start.elapsed().as_secs_f64());
        }
        output = Some(value);
    }
    let times = TimeStats::from_samples(&samples, opts.warmup, timer)
        .ok_or_else(|| RunError::Failed("no timed run".into()))?;
    Ok((output.expect("at least one run"), times))
}

/// A result widened to f64 and flattened per component (for example the deflection's x and y).
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub components: Vec<Vec<f64>>,
    /// Named figures a run reports beside its values (for example the fraction of pixels a mixed-precision
    /// run recomputed in float64).
    pub stats: Vec<(String, f64)>,
}

impl Field {
    pub fn new(components: Vec<Vec<f64>>) -> Self {
        Field {
            components,
            stats: Vec::new(),
        }
    }
    /// The named figure, if the run reported it.
    pub fn stat(&self, name: &str) -> Option<f64> {
        self.stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// Makes this field `count` components of `len` values, keeping the allocations it has (values are
    /// left as they were where the sizes match), and drops its stats: an output to write in place.
    pub fn reshape(&mut self, count: usize, len: usize) {
        self.components.resize_with(count, Vec::new);
        for c in &mut self.components {
            c.resize(len, 0.0);
        }
        self.stats.clear();
    }

    /// Fills every value with NaN (a reused output, so that a value a run does not write fails checks).
    pub fn poison(&mut self) {
        for c in &mut self.components {
            c.fill(f64::NAN);
        }
    }
}

/// A workload computed in one pass: the `cpu` model's Rust code, or one plan of device jobs (bands of a
/// tiled problem) whose outputs are assembled. [`single_pass`] runs it on any target.
pub trait SinglePass: Sync {
    type Mode: Mode;
    /// The `cpu` model's own implementation in this mode.
    fn run_cpu(&self, mode: Self::Mode) -> Field;
    /// The same into `out`, which holds the previous run's output (poisoned) or nothing: a model that
    /// writes in place reuses its memory, as device buffers are, instead of faulting in fresh pages.
    fn run_cpu_into(&self, mode: Self::Mode, out: &mut Field) {
        *out = self.run_cpu(mode);
    }
    /// Device jobs in this mode, tiled so every job fits the budget; each job is timed with `opts`.
    fn plan(&self, mode: Self::Mode, budget: DeviceBudget, opts: &RunOptions)
        -> Vec<KernelJob<'_>>;
    /// The outputs of the plan's jobs (in job order) as one field; `mode` is the plan's.
    fn assemble(&self, mode: Self::Mode, outputs: Vec<Vec<HostVec>>) -> Field;
}

/// Runs a single-pass workload in one mode on one target: warm-up, timed repeats (device events on
/// accelerators, the host clock on `cpu`), and the result of the final run.
pub fn single_pass<S: SinglePass>(
    work: &S,
    target: &Target,
    mode: S::Mode,
    opts: &RunOptions,
) -> Result<Measured<Field>, RunError> {
    match target {
        Target::Cpu(_) => {
            let mut field = Field::new(vec![]);
            let ((), times) =
                time_host_prepared(opts, "host clock", &mut field, Field::poison, |out| {
                    work.run_cpu_into(mode, out);
                    Ok(())
                })?;
            Ok(Measured::host(field, times))
        }
        Target::Device(dev) => {
            let info = dev.info();
            if mode.needs_fp64() && !info.fp64 {
                return Err(RunError::Unsupported("device has no fp64 support".into()));
            }
            let jobs = work.plan(mode, DeviceBudget::of(info), opts);
            let mut run = run_plan(dev.as_ref(), &jobs, opts.warmup)?;
            let outputs = std::mem::take(&mut run.outputs);
            Ok(run.measured(work.assemble(mode, outputs)))
        }
    }
}

/// What the bands of one plan gave: outputs in band order, and times summed over bands.
pub struct PlanRun {
    pub outputs: Vec<Vec<HostVec>>,
    pub times: TimeStats,
    pub build_s: f64,
    /// Resources of the first band's main launch.
    pub resources: Option<Resources>,
    pub launch: LaunchSummary,
    pub build_options: String,
    /// Per-step medians summed over bands.
    pub steps: Vec<StepReport>,
}

impl PlanRun {
    /// What the plan measured, with the output made from its outputs.
    pub fn measured<T>(self, output: T) -> Measured<T> {
        Measured {
            output,
            times: self.times,
            build_s: Some(self.build_s),
            resources: self.resources,
            launch: Some(self.launch),
            steps: self.steps,
            build_options: self.build_options,
        }
    }
}

/// Runs the jobs of a plan (one per band of a tiled problem) on a device, each warmed up and timed as the
/// job says; statistics are summed over bands.
pub fn run_plan(dev: &dyn Accelerator, jobs: &[KernelJob], warmup: u32) -> Result<PlanRun, String> {
    let mut outputs = Vec::with_capacity(jobs.len());
    let (mut median, mut min, mut max, mut build, mut repeats) = (0.0, 0.0, 0.0, 0.0, 0);
    let mut resources = None;
    let mut build_options = String::new();
    let mut steps: Vec<StepReport> = Vec::new();
    let (mut global, mut local) = (0u64, 0u64);
    for job in jobs {
        let out = dev.run(job).map_err(|e| e.to_string())?;
        let t = TimeStats::from_samples(&out.times_s, warmup, "device events")
            .ok_or("no timed repeat")?;
        median += t.median;
        min += t.min;
        max += t.max;
        repeats = t.repeats;
        build += out.build_s;
        global += job
            .steps
            .iter()
            .map(|s| match s {
                Step::Launch(l) => l.global as u64,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        local = out.local_used as u64;
        resources.get_or_insert(out.resources);
        if steps.is_empty() {
            steps = out.steps;
        } else {
            for (acc, s) in steps.iter_mut().zip(out.steps) {
                acc.median_s += s.median_s;
            }
        }
        if build_options.is_empty() {
            build_options = out.build_options;
        }
        outputs.push(out.outputs);
    }
    Ok(PlanRun {
        outputs,
        times: TimeStats {
            median,
            min,
            max,
            repeats,
            warmup,
            timer: "device events".into(),
        },
        build_s: build,
        resources,
        launch: LaunchSummary {
            global,
            local,
            bands: jobs.len() as u32,
        },
        build_options,
        steps,
    })
}
