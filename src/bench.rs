//! The driver: runs one workload on every selected target and precision, verifies each result against
//! the f64 `cpu` reference, and turns each run (or absence) into a [`Row`]. It knows no workload and no
//! model: both come through their interfaces.

use crate::backend::{Absent, Discovery, Model, Precision, Selector, Target, Unavailable};
use crate::results::{Launch, Limit, Provenance, Row, Status, Throughput, TimeStats, SCHEMA};
use crate::workload::{floor_for, Field, Workload};
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub precisions: Vec<Precision>,
    /// Empty: every target found, plus a row for every absent model.
    pub selectors: Vec<Selector>,
    pub warmup: u32,
    pub repeats: u32,
}

/// One target chosen by the selection, or a reason it cannot run.
pub enum Choice<'a> {
    Run(&'a Target),
    Absent(Absent),
}

/// Resolves `--backend` selectors against what was discovered. A selector that matches nothing becomes an
/// absent row with the reason (the model's own reason if the whole model is absent).
pub fn select<'a>(discovery: &'a Discovery, selectors: &[Selector]) -> Vec<Choice<'a>> {
    if selectors.is_empty() {
        let mut out: Vec<Choice> = discovery.targets.iter().map(Choice::Run).collect();
        out.extend(discovery.absent.iter().cloned().map(Choice::Absent));
        return out;
    }
    let mut out = Vec::new();
    for sel in selectors {
        let matched: Vec<&Target> = discovery
            .targets
            .iter()
            .filter(|t| sel.matches(&t.id()))
            .collect();
        if !matched.is_empty() {
            out.extend(matched.into_iter().map(Choice::Run));
            continue;
        }
        let absent = match discovery.absent.iter().find(|a| a.model == sel.model) {
            Some(a) => Absent {
                id: sel.to_string(),
                ..a.clone()
            },
            None => Absent {
                model: sel.model,
                id: sel.to_string(),
                why: Unavailable::NoDevice,
                reason: format!("no device '{sel}' (see `astroport devices`)"),
            },
        };
        out.push(Choice::Absent(absent));
    }
    out
}

/// What one run produced before verification.
struct Measured {
    field: Field,
    times: TimeStats,
    build_s: Option<f64>,
    resources: Option<crate::backend::Resources>,
    launch: Option<Launch>,
    build_options: String,
    steps: Vec<crate::backend::StepReport>,
}

/// Why a run produced no result: the device cannot do it (a `no_device` row), or it failed.
enum RunError {
    Unsupported(String),
    Failed(String),
}

impl From<&str> for RunError {
    fn from(s: &str) -> Self {
        RunError::Failed(s.into())
    }
}

fn execute(
    workload: &dyn Workload,
    target: &Target,
    p: Precision,
    opts: &RunOptions,
) -> Result<Measured, RunError> {
    match target {
        Target::Cpu(_) => {
            let mut samples = Vec::new();
            let mut field = None;
            for i in 0..(opts.warmup + opts.repeats) {
                let t = Instant::now();
                let f = workload.run_cpu(p);
                if i >= opts.warmup {
                    samples.push(t.elapsed().as_secs_f64());
                }
                field = Some(f);
            }
            Ok(Measured {
                field: field.ok_or("no run")?,
                times: TimeStats::from_samples(&samples, opts.warmup, "host clock")
                    .ok_or("no timed run")?,
                build_s: None,
                resources: Some(crate::backend::Resources {
                    regs_per_thread: None,
                    occupancy: None,
                    source: "n/a: Rust on the host (rayon)".into(),
                }),
                launch: None,
                steps: Vec::new(),
                build_options: format!(
                    "rustc -C opt-level=3, target-cpu {}",
                    env!("ASTROPORT_TARGET_CPU")
                ),
            })
        }
        Target::Device(dev) => {
            let info = dev.info();
            if p.needs_fp64() && !info.fp64 {
                return Err(RunError::Unsupported("device has no fp64 support".into()));
            }
            let plan = workload.plan(
                p,
                info.max_alloc_bytes,
                info.global_mem_bytes,
                opts.warmup,
                opts.repeats,
            );
            let run = run_bands(dev.as_ref(), &plan.jobs, opts.warmup).map_err(RunError::Failed)?;
            Ok(Measured {
                field: workload.assemble(run.outputs),
                times: run.times,
                build_s: Some(run.build_s),
                resources: run.resources,
                launch: Some(run.launch),
                build_options: run.build_options,
                steps: run.steps,
            })
        }
    }
}

/// Runs the workload once on one target (after warm-up, median of repeats) and returns its assembled result
/// and the median time: for commands that need the values (periodograms, maps), not a row.
pub fn compute(
    workload: &dyn Workload,
    target: &Target,
    p: Precision,
    warmup: u32,
    repeats: u32,
) -> Result<(Field, f64), String> {
    let opts = RunOptions {
        precisions: vec![p],
        selectors: Vec::new(),
        warmup,
        repeats,
    };
    match execute(workload, target, p, &opts) {
        Ok(m) => Ok((m.field, m.times.median)),
        Err(RunError::Unsupported(why)) | Err(RunError::Failed(why)) => Err(why),
    }
}

/// What the bands of one plan gave: outputs in band order, and times summed over bands.
pub struct BandsRun {
    pub outputs: Vec<Vec<crate::backend::HostVec>>,
    pub times: TimeStats,
    pub build_s: f64,
    /// Resources of the first band's main launch.
    pub resources: Option<crate::backend::Resources>,
    pub launch: Launch,
    pub build_options: String,
    /// Per-step medians summed over bands.
    pub steps: Vec<crate::backend::StepReport>,
}

/// Runs the jobs of a tiled plan (one per band) on a device, written once for every caller (the bench
/// driver and workload-specific drivers such as the lens χ²).
pub fn run_bands(
    dev: &dyn crate::backend::Accelerator,
    jobs: &[crate::backend::KernelJob],
    warmup: u32,
) -> Result<BandsRun, String> {
    let mut outputs = Vec::with_capacity(jobs.len());
    let (mut median, mut min, mut max, mut build, mut repeats) = (0.0, 0.0, 0.0, 0.0, 0);
    let mut resources = None;
    let mut build_options = String::new();
    let mut steps: Vec<crate::backend::StepReport> = Vec::new();
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
                crate::backend::Step::Launch(l) => l.global as u64,
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
    Ok(BandsRun {
        outputs,
        times: TimeStats {
            median,
            min,
            max,
            repeats,
            warmup,
            timer: "device events",
        },
        build_s: build,
        resources,
        launch: Launch {
            global,
            local,
            bands: jobs.len() as u32,
        },
        build_options,
        steps,
    })
}

pub(crate) fn base_row(
    workload: &dyn Workload,
    backend: String,
    model: Model,
    device: String,
    p: Precision,
    prov: Provenance,
) -> Row {
    Row {
        schema: SCHEMA,
        workload: workload.name().into(),
        preset: workload.preset().into(),
        size: workload.describe(),
        backend,
        model: model.name().into(),
        device,
        device_type: "-".into(),
        precision: p.name().into(),
        status: Status::Ok,
        reason: String::new(),
        time_s: None,
        build_s: None,
        throughput: None,
        limit: None,
        accuracy: None,
        resources: None,
        launch: None,
        steps: Vec::new(),
        provenance: prov,
    }
}

/// Runs the workload on the chosen targets. `on_row` sees each row as soon as it exists (progress).
pub fn run(
    workload: &dyn Workload,
    choices: &[Choice],
    opts: &RunOptions,
    mut on_row: impl FnMut(&Row),
) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut reference: Option<Field> = None;
    for choice in choices {
        for &p in &opts.precisions {
            let row = match choice {
                Choice::Absent(a) => {
                    let mut r = base_row(
                        workload,
                        a.id.clone(),
                        a.model,
                        "-".into(),
                        p,
                        Provenance::new(String::new(), String::new(), String::new()),
                    );
                    r.status = match a.why {
                        Unavailable::NotBuilt => Status::NotBuilt,
                        Unavailable::NoRuntime => Status::NoRuntime,
                        Unavailable::NoDevice => Status::NoDevice,
                    };
                    r.reason = a.reason.clone();
                    r
                }
                Choice::Run(target) => {
                    let info = target.info();
                    eprintln!(
                        "  running {} {} {} on {} ({}) ...",
                        workload.name(),
                        workload.preset(),
                        p,
                        target.id(),
                        info.name
                    );
                    let reference = reference.get_or_insert_with(|| {
                        let t = Instant::now();
                        let r = workload.reference();
                        eprintln!(
                            "  f64 cpu reference computed in {:.2} s",
                            t.elapsed().as_secs_f64()
                        );
                        r
                    });
                    let mut r = base_row(
                        workload,
                        target.id(),
                        target.model(),
                        info.name.clone(),
                        p,
                        Provenance::new(target.toolchain(), info.driver.clone(), String::new()),
                    );
                    r.device_type = if info.is_gpu { "gpu" } else { "cpu" }.into();
                    match execute(workload, target, p, opts) {
                        Err(RunError::Unsupported(e)) => {
                            r.status = Status::NoDevice;
                            r.reason = e;
                        }
                        Err(RunError::Failed(e)) => {
                            r.status = Status::Failed;
                            r.reason = e;
                        }
                        Ok(m) => {
                            let mut acc = workload.compare(&m.field, reference, p);
                            acc.extra.splice(0..0, m.field.stats.iter().cloned());
                            let w = workload.work();
                            r.throughput = Some(Throughput {
                                value: w.units / m.times.median,
                                unit: format!("{}/s", w.unit_name),
                            });
                            r.limit = floor_for(workload, info, p).map(|(floor_s, basis)| Limit {
                                floor_s,
                                fraction: floor_s / m.times.median,
                                basis,
                            });
                            if !acc.pass {
                                r.status = Status::Failed;
                                r.reason = if acc.non_finite > 0 {
                                    format!("{} elements not finite (unwritten output stays NaN-poisoned)", acc.non_finite)
                                } else {
                                    format!(
                                        "accuracy outside tolerance: max_abs {:.3e} (tol {:.1e}), max_rel {:.3e} (tol {:.1e})",
                                        acc.max_abs, acc.tolerance_abs, acc.max_rel, acc.tolerance_rel
                                    )
                                };
                            }
                            r.accuracy = Some(acc);
                            r.time_s = Some(m.times);
                            r.build_s = m.build_s;
                            r.resources = m.resources;
                            r.launch = m.launch;
                            r.steps = m.steps;
                            r.provenance.build_options = m.build_options;
                        }
                    }
                    r
                }
            };
            on_row(&row);
            rows.push(row);
        }
    }
    rows
}
