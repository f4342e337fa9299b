//! Runs of the cubature integrators on any target, their result rows (JSON Lines), and the tables of the
//! porting study: per (integrand, dimension, epsrel) the answer, its honesty (coverage) and what the kernels
//! cost on each backend.

use super::device::{DeviceRegions, DeviceSampler, KernelStats};
use super::mcubes::{self, CpuSampler, McubesOptions};
use super::pagani::{self, CpuEvaluator, CpuRegions, PaganiOptions};
use super::rule::Rule;
use super::{Integrand, Method, Outcome, Status};
use crate::backend::{Absent, Target};
use crate::report::fmt_time;
use crate::results::Provenance;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

pub const SCHEMA: &str = "astroport.cubature/1";

/// One integration to do.
#[derive(Debug, Clone)]
pub struct Spec {
    pub method: Method,
    pub integrand: Integrand,
    pub dim: usize,
    pub pagani: PaganiOptions,
    pub mcubes: McubesOptions,
}

impl Spec {
    pub fn epsrel(&self) -> f64 {
        match self.method {
            Method::Pagani => self.pagani.epsrel,
            Method::Mcubes => self.mcubes.epsrel,
        }
    }
}

/// Device time, registers and occupancy of one kernel over a run.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    pub kernel: String,
    pub device_s: f64,
    pub regs_per_thread: Option<u32>,
    pub occupancy: Option<f64>,
    pub source: String,
}

/// One result row.
#[derive(Debug, Clone, Serialize)]
pub struct CubatureRow {
    pub schema: &'static str,
    pub method: Method,
    pub integrand: Integrand,
    pub dim: usize,
    pub epsrel: f64,
    pub backend: String,
    pub model: String,
    pub device: String,
    /// "ok" or why the backend could not run ("not_built", "no_device", "failed: ...").
    pub run: String,
    pub outcome: Option<Outcome>,
    pub true_value: f64,
    pub true_rel_err: Option<f64>,
    /// Claims convergence and |estimate − truth| ≤ reported error.
    pub covered: Option<bool>,
    pub kernels: Vec<KernelRow>,
    pub jobs: u64,
    pub provenance: Provenance,
}

fn kernel_rows(stats: &KernelStats) -> Vec<KernelRow> {
    stats
        .kernels
        .iter()
        .map(|(name, s, r)| KernelRow {
            kernel: name.clone(),
            device_s: *s,
            regs_per_thread: r.regs_per_thread,
            occupancy: r.occupancy,
            source: r.source.clone(),
        })
        .collect()
}

/// Runs one spec on one target over the unit cube.
pub fn run(target: &Target, spec: &Spec) -> Result<(Outcome, KernelStats), String> {
    let d = spec.dim;
    let (lo, hi) = (vec![0.0; d], vec![1.0; d]);
    let params = spec.integrand.params(d);
    match (spec.method, target) {
        (Method::Pagani, Target::Cpu(_)) => {
            let rule = Rule::new(d)?;
            let mut ev = CpuEvaluator {
                rule: &rule,
                integrand: spec.integrand,
                params,
            };
            let mut regions = CpuRegions::new(&lo, &hi, &mut ev);
            let o = pagani::integrate(spec.integrand, &rule, &spec.pagani, &mut regions)?;
            Ok((o, KernelStats::default()))
        }
        (Method::Pagani, Target::Device(dev)) => {
            let rule = Rule::new(d)?;
            // The regions live on the device: the memory classification sees its free memory (CUDA asks the
            // driver; OpenCL and SYCL report only their total), and the split's bounds must fit one allocation.
            let mut options = spec.pagani.clone();
            let free = dev.free_memory().unwrap_or(dev.info().global_mem_bytes);
            let per_alloc = dev.info().max_alloc_bytes / (16 * d as u64) * pagani::region_bytes(d);
            options.memory_limit = Some(
                options
                    .memory_limit
                    .unwrap_or(u64::MAX)
                    .min(free)
                    .min(per_alloc),
            );
            let mut regions = DeviceRegions::new(dev.as_ref(), spec.integrand, &rule, &lo, &hi);
            let mut o = pagani::integrate(spec.integrand, &rule, &options, &mut regions)?;
            o.build_s = regions.stats.build_s;
            Ok((o, std::mem::take(&mut regions.stats)))
        }
        (Method::Mcubes, Target::Cpu(_)) => {
            let mut s = CpuSampler {
                integrand: spec.integrand,
                params,
                lo: lo.clone(),
                width: vec![1.0; d],
            };
            let o = mcubes::integrate(spec.integrand, &lo, &hi, &spec.mcubes, &mut s)?;
            Ok((o, KernelStats::default()))
        }
        (Method::Mcubes, Target::Device(dev)) => {
            let mut s = DeviceSampler::new(dev.as_ref(), spec.integrand, &lo, &hi);
            let mut o = mcubes::integrate(spec.integrand, &lo, &hi, &spec.mcubes, &mut s)?;
            o.build_s = s.stats.build_s;
            Ok((o, s.stats))
        }
    }
}

/// The row of one run (or of its failure).
pub fn row(
    target: &Target,
    spec: &Spec,
    result: Result<(Outcome, KernelStats), String>,
) -> CubatureRow {
    let info = target.info();
    let mut r = CubatureRow {
        backend: target.id(),
        model: target.model().name().into(),
        device: info.name.clone(),
        provenance: Provenance::new(target.toolchain(), info.driver.clone(), String::new()),
        ..empty_row(spec)
    };
    match result {
        Ok((o, stats)) => {
            r.true_rel_err = Some(o.true_rel_error());
            r.covered = (o.status == Status::Converged).then(|| o.covered());
            r.kernels = kernel_rows(&stats);
            r.jobs = stats.jobs;
            r.outcome = Some(o);
        }
        Err(e) => r.run = format!("failed: {e}"),
    }
    r
}

/// The row of a backend that cannot run.
pub fn absent_row(a: &Absent, spec: &Spec) -> CubatureRow {
    CubatureRow {
        backend: a.id.clone(),
        model: a.model.name().into(),
        device: "-".into(),
        run: format!("{}: {}", a.why.status(), a.reason),
        provenance: Provenance::new(String::new(), String::new(), String::new()),
        ..empty_row(spec)
    }
}

/// A row of this spec with no backend and no outcome yet.
fn empty_row(spec: &Spec) -> CubatureRow {
    CubatureRow {
        schema: SCHEMA,
        method: spec.method,
        integrand: spec.integrand,
        dim: spec.dim,
        epsrel: spec.epsrel(),
        backend: String::new(),
        model: String::new(),
        device: String::new(),
        run: "ok".into(),
        outcome: None,
        true_value: spec.integrand.true_value(spec.dim),
        true_rel_err: None,
        covered: None,
        kernels: Vec::new(),
        jobs: 0,
        provenance: Provenance::new(String::new(), String::new(), String::new()),
    }
}

fn sci(x: f64) -> String {
    format!("{x:.2e}")
}

/// The kernel that took the most device time in a row.
fn main_kernel(r: &CubatureRow) -> Option<&KernelRow> {
    r.kernels
        .iter()
        .max_by(|a, b| a.device_s.total_cmp(&b.device_s))
}

/// One line per row: the answer, its honesty and its cost.
pub fn terminal(rows: &[CubatureRow]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "method",
        "f",
        "d",
        "epsrel",
        "backend",
        "status",
        "estimate",
        "reported rel",
        "true rel",
        "covered",
        "evals",
        "iters",
        "total",
        "kernel",
        "regs",
    ]);
    for r in rows {
        let mut cells = vec![
            r.method.name().to_string(),
            r.integrand.name().into(),
            r.dim.to_string(),
            sci(r.epsrel),
            r.backend.clone(),
        ];
        let Some(o) = &r.outcome else {
            cells.push(r.run.clone());
            t.add_row(cells);
            continue;
        };
        let k = main_kernel(r);
        cells.extend([
            o.status.name().into(),
            format!("{:.10e}", o.estimate),
            sci(o.error / o.estimate.abs()),
            sci(r.true_rel_err.unwrap_or(f64::NAN)),
            match r.covered {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
            format!("{:.3e}", o.evaluations as f64),
            o.iterations.to_string(),
            fmt_time(o.total_s),
            fmt_time(o.device_s),
            k.and_then(|k| k.regs_per_thread)
                .map_or("-".into(), |r| r.to_string()),
        ]);
        t.add_row(cells);
    }
    format!("{t}\n")
}

/// Coverage over the rows that ran: (claimed convergence, of which covered).
pub fn coverage(rows: &[CubatureRow]) -> (usize, usize) {
    let claimed = rows.iter().filter(|r| r.covered.is_some()).count();
    let covered = rows.iter().filter(|r| r.covered == Some(true)).count();
    (claimed, covered)
}
