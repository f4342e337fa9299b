//! Workloads. Each one is a module that implements [`Workload`]; the driver (`crate::bench`) never changes
//! when one is added.

pub mod cubature;
pub mod lens;
pub mod lombscargle;

use crate::backend::{HostVec, KernelJob, Precision};
use serde::Serialize;

/// A workload's result, widened to f64 and flattened per component (for example gx and gy).
#[derive(Debug, Clone)]
pub struct Field {
    pub components: Vec<Vec<f64>>,
    /// Named figures a run reports beside its values (for example the fraction of pixels recomputed in
    /// float64 by a mixed-precision run); copied into the row's accuracy.
    pub stats: Vec<(String, f64)>,
}

impl Field {
    pub fn new(components: Vec<Vec<f64>>) -> Self {
        Field {
            components,
            stats: Vec::new(),
        }
    }
}

/// Accuracy against the f64 reference, with the tolerance that decides pass/fail.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Accuracy {
    pub max_abs: f64,
    pub max_rel: f64,
    pub rms_abs: f64,
    /// Elements that were NaN or infinite (a poisoned output that was never written shows up here).
    pub non_finite: u64,
    pub tolerance_abs: f64,
    pub tolerance_rel: f64,
    pub unit: &'static str,
    pub pass: bool,
    /// Workload-specific figures (name, value), for example the error budget of a mixed-precision run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<(String, f64)>,
}

/// How much work one run does, for throughput and the fraction of the device limit.
#[derive(Debug, Clone, Serialize)]
pub struct WorkCount {
    /// Natural work units (for the lens: halo-pixel interactions).
    pub units: f64,
    pub unit_name: &'static str,
    /// Floating-point operations per run (counted, not measured).
    pub flops: f64,
    /// Fewest bytes that must move through device memory per run.
    pub bytes: f64,
}

/// Device work for one run: one or more jobs (bands of a tiled problem) whose outputs are assembled.
pub struct DevicePlan<'a> {
    pub jobs: Vec<KernelJob<'a>>,
}

pub trait Workload: Sync {
    fn name(&self) -> &'static str;
    fn preset(&self) -> &str;
    /// The numeric modes this workload offers (`bench` runs all of them).
    fn precisions(&self) -> Vec<Precision> {
        Precision::ALL.to_vec()
    }
    /// One line describing the problem size, for tables.
    fn describe(&self) -> String;
    fn work(&self) -> WorkCount;
    /// Arithmetic-pipe instructions per work unit in this precision (for the device-limit floor).
    fn pipe_instructions(&self, _precision: Precision) -> Option<f64> {
        None
    }
    /// The f64 reference on the `cpu` model.
    fn reference(&self) -> Field;
    /// The `cpu` model's own implementation in the given precision.
    fn run_cpu(&self, precision: Precision) -> Field;
    /// Kernel jobs for an accelerator with `max_alloc` bytes per buffer and `mem` bytes in all,
    /// tiled so every job fits.
    fn plan(
        &self,
        precision: Precision,
        max_alloc: u64,
        mem: u64,
        warmup: u32,
        repeats: u32,
    ) -> DevicePlan<'_>;
    /// Assembles the outputs of the plan's jobs (in job order) into one field.
    fn assemble(&self, outputs: Vec<Vec<HostVec>>) -> Field;
    /// Compares with the reference under this precision's stated tolerance.
    fn compare(&self, result: &Field, reference: &Field, precision: Precision) -> Accuracy;
}

/// Vector-norm error statistics for fields whose components form a vector per element.
pub fn vector_errors(result: &Field, reference: &Field) -> (f64, f64, f64, u64) {
    let n = reference.components[0].len();
    let (mut max_abs, mut max_rel, mut sum2, mut non_finite) = (0.0f64, 0.0f64, 0.0f64, 0u64);
    for i in 0..n {
        let mut d2 = 0.0;
        let mut r2 = 0.0;
        let mut finite = true;
        for (c, r) in result.components.iter().zip(&reference.components) {
            let (a, b) = (c.get(i).copied().unwrap_or(f64::NAN), r[i]);
            finite &= a.is_finite();
            d2 += (a - b) * (a - b);
            r2 += b * b;
        }
        if !finite {
            non_finite += 1;
            continue;
        }
        let d = d2.sqrt();
        max_abs = max_abs.max(d);
        max_rel = max_rel.max(d / r2.sqrt().max(1e-30));
        sum2 += d2;
    }
    (
        max_abs,
        max_rel,
        (sum2 / n.max(1) as f64).sqrt(),
        non_finite,
    )
}

/// The device-limit floor of a run, if the device's peak is known: (seconds, basis).
pub fn floor_for(
    workload: &dyn Workload,
    info: &crate::backend::DeviceInfo,
    precision: Precision,
) -> Option<(f64, String)> {
    let w = workload.work();
    let instr = workload.pipe_instructions(precision)?;
    crate::limits::pipe_floor(info, precision, w.units, instr)
}
