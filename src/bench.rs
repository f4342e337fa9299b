//! The driver: runs a workload problem on every chosen target in each of its modes, verifies each result
//! against a reference computed once, and turns each run (or absence) into a [`Row`]. It knows no workload
//! and no model: both come through their interfaces (`Workload`, `Target`).

use crate::backend::{Absent, Choice, Model, Target, Unavailable};
use crate::exec::{Mode, RunError, RunOptions};
use crate::results::{Limit, Provenance, Row, Status, Throughput};
use crate::workload::Workload;
use std::time::Instant;

/// A problem with the modes to run it in: what `run` and `bench` hand to the driver.
pub struct Planned<W: Workload> {
    pub workload: W,
    pub modes: Vec<W::Mode>,
}

/// A planned problem with its types erased, so problems of every workload go in one list.
pub trait Runnable: Sync {
    fn workload(&self) -> &'static str;
    /// "name preset (problem)", for progress lines and report titles.
    fn title(&self) -> String;
    /// The names of the modes it will run.
    fn mode_names(&self) -> Vec<&'static str>;
    /// Keeps only the modes with these names; returns how many are left.
    fn retain_modes(&mut self, names: &[String]) -> usize;
    /// Runs on the choices; `on_row` sees each row as soon as it exists (progress).
    fn run(&self, choices: &[Choice], opts: &RunOptions, on_row: &mut dyn FnMut(&Row)) -> Vec<Row>;
}

impl<W: Workload> Runnable for Planned<W> {
    fn workload(&self) -> &'static str {
        self.workload.name()
    }
    fn title(&self) -> String {
        format!(
            "{} {} ({})",
            self.workload.name(),
            self.workload.preset(),
            self.workload.describe()
        )
    }
    fn mode_names(&self) -> Vec<&'static str> {
        self.modes.iter().map(|m| m.name()).collect()
    }
    fn retain_modes(&mut self, names: &[String]) -> usize {
        self.modes.retain(|m| names.iter().any(|n| n == m.name()));
        self.modes.len()
    }
    fn run(&self, choices: &[Choice], opts: &RunOptions, on_row: &mut dyn FnMut(&Row)) -> Vec<Row> {
        run(&self.workload, &self.modes, choices, opts, on_row)
    }
}

fn base_row<W: Workload>(
    workload: &W,
    backend: String,
    model: Model,
    device: String,
    mode: W::Mode,
    prov: Provenance,
) -> Row {
    Row {
        workload: workload.name().into(),
        preset: workload.preset().into(),
        size: workload.describe(),
        backend,
        model: model.name().into(),
        device,
        precision: mode.name().into(),
        ..Row::blank(prov)
    }
}

/// The row of a backend that cannot run.
fn absent_row<W: Workload>(workload: &W, a: &Absent, mode: W::Mode) -> Row {
    let mut r = base_row(
        workload,
        a.id.clone(),
        a.model,
        "-".into(),
        mode,
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

/// One run on one target, executed and verified (and checked against the `cpu` model's output, when given);
/// the output comes back with the row.
fn run_row<W: Workload>(
    workload: &W,
    target: &Target,
    mode: W::Mode,
    reference: &W::Reference,
    cpu: Option<&W::Output>,
    context: &Result<f64, String>,
    opts: &RunOptions,
) -> (Row, Option<W::Output>) {
    let info = target.info();
    let mut r = base_row(
        workload,
        target.id(),
        target.model(),
        info.name.clone(),
        mode,
        Provenance::new(target.toolchain(), info.driver.clone(), String::new()),
    );
    r.device_type = if info.is_gpu { "gpu" } else { "cpu" }.into();
    // A device's context is created before its first row (`run`), so that no timed run, a cold start in
    // particular, includes it; the row that paid for it says how long it took.
    match context {
        &Ok(s) if s > 0.0 => r.context_s = Some(s),
        Ok(_) => {}
        Err(e) => {
            r.status = Status::Failed;
            r.reason = format!("device context: {e}");
            return (r, None);
        }
    }
    let m = match workload.execute(target, mode, opts) {
        Ok(m) => m,
        Err(e) => {
            r.status = match e {
                RunError::Unsupported(_) => Status::NoDevice,
                RunError::NotBuilt(_) => Status::NotBuilt,
                RunError::Failed(_) => Status::Failed,
            };
            r.reason = e.to_string();
            return (r, None);
        }
    };
    let verdict = workload.verify(&m.output, reference, mode);
    let acc = verdict.accuracy;
    if let Some(work) = workload.work(&m.output) {
        r.throughput = Some(Throughput {
            value: work.units / m.times.median,
            unit: format!("{}/s", work.unit_name),
        });
        let floor = workload
            .pipe_instructions(mode)
            .and_then(|instr| crate::limits::pipe_floor(info, mode.precision(), work.units, instr));
        r.limit = floor.map(|(floor_s, basis)| Limit {
            floor_s,
            fraction: floor_s / m.times.median,
            basis,
        });
    }
    if !acc.pass {
        r.status = Status::Failed;
        r.reason = if let Some(why) = verdict.failure {
            why
        } else if acc.non_finite > 0 {
            format!(
                "{} elements not finite (unwritten output stays NaN-poisoned)",
                acc.non_finite
            )
        } else {
            format!(
                "accuracy outside tolerance: max_abs {:.3e} (tol {:.1e}), max_rel {:.3e} (tol {:.1e})",
                acc.max_abs, acc.tolerance_abs, acc.max_rel, acc.tolerance_rel
            )
        };
    } else if let Some(Err(why)) = cpu.map(|c| workload.agrees_with_cpu(&m.output, c)) {
        r.status = Status::Failed;
        r.reason = format!("differs from the cpu model's run: {why}");
    } else if let Some(why) = verdict.unconverged {
        r.status = Status::Unconverged;
        r.reason = why;
    }
    r.details = match serde_json::to_value(&verdict.details) {
        Ok(serde_json::Value::Null) => None,
        Ok(v) => Some(v),
        Err(e) => Some(serde_json::Value::String(format!(
            "details not serialisable: {e}"
        ))),
    };
    r.accuracy = Some(acc);
    r.time_s = Some(m.times);
    r.build_s = m.build_s;
    r.resources = m.resources;
    r.launch = m.launch;
    r.steps = m.steps;
    r.provenance.build_options = m.build_options;
    (r, Some(m.output))
}

/// Runs a workload problem on the chosen targets in the given modes; the reference is computed once, before
/// the first run. The `cpu` model, when chosen, runs first, so each device's output can also be checked
/// against its output of the same mode ([`Workload::agrees_with_cpu`]). `on_row` sees each row as soon as
/// it exists.
pub fn run<W: Workload>(
    workload: &W,
    modes: &[W::Mode],
    choices: &[Choice],
    opts: &RunOptions,
    on_row: &mut dyn FnMut(&Row),
) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut reference: Option<W::Reference> = None;
    let mut cpu_outputs: Vec<Option<W::Output>> = modes.iter().map(|_| None).collect();
    let is_cpu = |c: &&Choice| matches!(c, Choice::Run(Target::Cpu(_)));
    let ordered = choices
        .iter()
        .filter(is_cpu)
        .chain(choices.iter().filter(|c| !is_cpu(c)));
    for choice in ordered {
        // Seconds this target's context took to create, reported on its first row only.
        let mut context = match choice {
            Choice::Run(Target::Device(dev)) => dev.prepare().map_err(|e| e.to_string()),
            _ => Ok(0.0),
        };
        for (k, &mode) in modes.iter().enumerate() {
            let row = match choice {
                Choice::Absent(a) => absent_row(workload, a, mode),
                Choice::Run(target) => {
                    let reference = reference.get_or_insert_with(|| {
                        crate::progress::status(&format!(
                            "{} {}: the float64 reference",
                            workload.name(),
                            workload.preset()
                        ));
                        let t = Instant::now();
                        let r = workload.reference();
                        crate::detail!(
                            "  reference computed in {:.2} s",
                            t.elapsed().as_secs_f64()
                        );
                        r
                    });
                    crate::progress::status(&format!(
                        "{} {} {} on {} ({})",
                        workload.name(),
                        workload.preset(),
                        mode.name(),
                        target.id(),
                        target.info().name
                    ));
                    let (row, output) = run_row(
                        workload,
                        target,
                        mode,
                        reference,
                        cpu_outputs[k].as_ref(),
                        &context,
                        opts,
                    );
                    if let Ok(s) = &mut context {
                        *s = 0.0;
                    }
                    if W::CHECKS_AGAINST_CPU
                        && matches!(target, Target::Cpu(_))
                        && row.status != Status::Failed
                    {
                        cpu_outputs[k] = output;
                    }
                    row
                }
            };
            on_row(&row);
            rows.push(row);
        }
    }
    rows
}
