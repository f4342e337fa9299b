//! Result rows: one JSON object per (workload problem, backend, mode), versioned, appended to
//! `results.jsonl`. Every workload writes the same row; its own figures go in `details`. Reports (terminal,
//! Markdown) are rendered from rows, and ratios between models are computed at report time.

use crate::backend::{Resources, StepReport};
use crate::exec::{LaunchSummary, TimeStats};
use crate::workload::Accuracy;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Bump when a field changes meaning or is removed; adding fields keeps the version.
/// Row 2 (from row 1): every workload writes it (cubature had `astroport.cubature/1`); `details` holds the
/// workload's own figures (row 1's `accuracy.extra`); status `unconverged`; `time_s.timer` may be
/// "wall clock".
pub const SCHEMA: &str = "astroport.row/2";

/// What happened to a run. Only `failed` is a failure (exit code 1): `unconverged` is an iterative method
/// that stopped short of its target and said so; the last three are backends that could not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Ran and passed verification.
    Ok,
    /// Failed verification or execution.
    Failed,
    /// Ran, verified, but did not reach the requested tolerance (the reason says why); no claim is made.
    Unconverged,
    NotBuilt,
    NoRuntime,
    NoDevice,
}

impl Status {
    /// The backend did not run at all (not built, no runtime, no device).
    pub fn is_unavailable(self) -> bool {
        matches!(
            self,
            Status::NotBuilt | Status::NoRuntime | Status::NoDevice
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Unconverged => "unconverged",
            Status::NotBuilt => "not_built",
            Status::NoRuntime => "no_runtime",
            Status::NoDevice => "no_device",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Throughput {
    pub value: f64,
    pub unit: String,
}

/// The device limit ("floor") the run is compared with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limit {
    pub floor_s: f64,
    pub fraction: f64,
    pub basis: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Provenance {
    pub git_commit: String,
    pub git_dirty: bool,
    pub astroport_version: String,
    pub features: String,
    pub toolchain: String,
    pub driver: String,
    pub build_options: String,
    pub host: String,
    pub unix_time: u64,
}

impl Provenance {
    pub fn new(toolchain: String, driver: String, build_options: String) -> Self {
        Provenance {
            git_commit: env!("ASTROPORT_GIT_COMMIT").into(),
            git_dirty: env!("ASTROPORT_GIT_DIRTY") == "true",
            astroport_version: env!("CARGO_PKG_VERSION").into(),
            features: env!("ASTROPORT_FEATURES").into(),
            toolchain,
            driver,
            build_options,
            host: std::fs::read_to_string("/etc/hostname")
                .unwrap_or_default()
                .trim()
                .to_string(),
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub schema: String,
    pub workload: String,
    pub preset: String,
    /// The problem in one line (grid and halos, points and frequencies, integrand and tolerance).
    pub size: String,
    pub backend: String,
    pub model: String,
    pub device: String,
    /// "gpu", "cpu" or "-" (absent): decides the native model a row is compared with.
    pub device_type: String,
    /// The mode: f32, f64, or a workload's own scheme (the lens's mixed-precision schemes).
    pub precision: String,
    pub status: Status,
    pub reason: String,
    pub time_s: Option<TimeStats>,
    pub build_s: Option<f64>,
    /// Seconds spent creating the device's context and queue before this row's timed work, where this row
    /// was the first on its device in the process (CUDA: ~0.1-0.2 s); never part of `time_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_s: Option<f64>,
    pub throughput: Option<Throughput>,
    pub limit: Option<Limit>,
    pub accuracy: Option<Accuracy>,
    pub resources: Option<Resources>,
    pub launch: Option<LaunchSummary>,
    /// Per-step (or per-kernel) medians and resources, summed over bands, in step order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// The workload's own figures (for example the lens's error budget, an integrator's estimate and
    /// reported error); their fields are documented with each workload's `Details` type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    pub provenance: Provenance,
    /// Where `astroport report` read the row (the file's stem, or its folder's name for a results.jsonl):
    /// tells apart rows that differ only by the binary that made them. Never written.
    #[serde(skip)]
    pub source: String,
}

impl Row {
    /// A row of the current schema with this provenance and nothing else yet: empty identity, status ok, no
    /// figures. Callers fill what they know with struct update (`Row { workload, .., ..Row::blank(p) }`).
    pub fn blank(provenance: Provenance) -> Row {
        Row {
            schema: SCHEMA.into(),
            workload: String::new(),
            preset: String::new(),
            size: String::new(),
            backend: String::new(),
            model: String::new(),
            device: String::new(),
            device_type: "-".into(),
            precision: String::new(),
            status: Status::Ok,
            reason: String::new(),
            time_s: None,
            build_s: None,
            context_s: None,
            throughput: None,
            limit: None,
            accuracy: None,
            resources: None,
            launch: None,
            steps: Vec::new(),
            details: None,
            provenance,
            source: String::new(),
        }
    }
}

/// Appends records to `dir/file` as JSON Lines through [`crate::inputs::append_lines`]: one locked write of
/// whole lines, so concurrent runs sharing a folder never interleave and a crash leaves whole lines only.
pub fn append_jsonl<T: Serialize>(
    dir: &Path,
    file: &str,
    rows: &[T],
) -> Result<std::path::PathBuf, crate::inputs::InputError> {
    let path = dir.join(file);
    std::fs::create_dir_all(dir).map_err(|e| crate::inputs::io_error(dir, e))?;
    let mut text = String::new();
    for r in rows {
        let line = serde_json::to_string(r)
            .map_err(|e| crate::inputs::io_error(&path, std::io::Error::other(e)))?;
        text.push_str(&line);
        text.push('\n');
    }
    crate::inputs::append_lines(&path, &text)?;
    Ok(path)
}

/// A row from one line of JSON: `astroport.row/1` and `/2` as they are; `astroport.cubature/1` (the
/// cubature rows before row 2, still in committed reports) converted to row 2. Other records that share
/// the folders (`astroport.chi2/1`, `astroport.sht-mpi/1`, benchmark timings) are refused by name.
pub fn parse_row(line: &str) -> Result<Row, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some("astroport.row/1") | Some(SCHEMA) => {
            serde_json::from_value(value).map_err(|e| e.to_string())
        }
        Some("astroport.cubature/1") => cubature_v1(&value),
        Some(other) => Err(format!(
            "schema '{other}' is not a result row (rows are '{SCHEMA}', '{}' or 'astroport.cubature/1')",
            "astroport.row/1"
        )),
        None => Err("no 'schema' name: not a result row".into()),
    }
}

/// An `astroport.cubature/1` row as row 2, the way the cubature workload writes row 2: the size line of
/// its `describe`, wall-clock time, the reported error as the tolerance, the outcome flattened into
/// `details` (its `status` named `stop`), the kernels as steps.
fn cubature_v1(v: &serde_json::Value) -> Result<Row, String> {
    use serde_json::{json, Value};
    let field = |k: &str| {
        v.get(k)
            .ok_or(format!("astroport.cubature/1 row without '{k}'"))
    };
    let text = |k: &str| -> Result<String, String> {
        field(k)?
            .as_str()
            .map(str::to_string)
            .ok_or(format!("astroport.cubature/1 row: '{k}' is not text"))
    };
    let number = |k: &str| field(k).map(|x| x.as_f64().unwrap_or(f64::NAN));
    let method = text("method")?;
    let device = text("device")?;
    let model = text("model")?;
    let run = text("run")?;
    let (epsrel, true_value) = (number("epsrel")?, number("true_value")?);
    let outcome = v.get("outcome").filter(|o| !o.is_null());
    let (status, reason) = match run.split_once(": ") {
        None if run == "ok" => match outcome.and_then(|o| o["status"].as_str()) {
            Some("converged") => (Status::Ok, String::new()),
            other => (
                Status::Unconverged,
                format!("stopped: {}", other.unwrap_or("unknown")),
            ),
        },
        Some((s, why)) => {
            let status = serde_json::from_value(Value::String(s.into())).unwrap_or(Status::Failed);
            (status, why.to_string())
        }
        None => (Status::Failed, run.clone()),
    };
    let kernels = v.get("kernels").and_then(|k| k.as_array()).cloned();
    let steps: Vec<StepReport> = kernels
        .unwrap_or_default()
        .iter()
        .map(|k| StepReport {
            name: k["kernel"].as_str().unwrap_or("?").into(),
            median_s: k["device_s"].as_f64().unwrap_or(f64::NAN),
            resources: Some(Resources {
                regs_per_thread: k["regs_per_thread"].as_u64().map(|r| r as u32),
                occupancy: k["occupancy"].as_f64(),
                source: k["source"].as_str().unwrap_or_default().into(),
            }),
            local_used: 0,
        })
        .collect();
    let provenance = serde_json::from_value(field("provenance")?.clone())
        .map_err(|e| format!("astroport.cubature/1 row: provenance: {e}"))?;
    let mut row = Row {
        workload: "cubature".into(),
        preset: "custom".into(),
        size: format!(
            "{method} {} {}D epsrel {epsrel:e}",
            text("integrand")?,
            number("dim")?
        ),
        backend: text("backend")?,
        device_type: if model == "cuda" || device.contains("NVIDIA") {
            "gpu"
        } else {
            "cpu"
        }
        .into(),
        model,
        device,
        precision: "f64".into(),
        status,
        reason,
        resources: steps.first().and_then(|s| s.resources.clone()),
        steps,
        ..Row::blank(provenance)
    };
    if let Some(o) = outcome {
        let total = o["total_s"].as_f64().unwrap_or(f64::NAN);
        row.time_s = Some(TimeStats {
            median: total,
            min: total,
            max: total,
            repeats: 1,
            warmup: 0,
            timer: "wall clock".into(),
        });
        row.build_s = o["build_s"].as_f64();
        if let Some(evaluations) = o["evaluations"].as_f64() {
            row.throughput = Some(Throughput {
                value: evaluations / total,
                unit: "evaluations/s".into(),
            });
        }
        // The verdict of row 2 (`cubature::problem`): a claim of convergence must cover the truth.
        let rel = number("true_rel_err")?;
        let abs = rel * true_value.abs();
        let error = o["error"].as_f64().unwrap_or(f64::NAN);
        let allowed = match method.as_str() {
            "mcubes" => crate::workload::cubature::problem::MCUBES_CHECK_SIGMAS * error,
            _ => error,
        };
        let converged = o["status"].as_str() == Some("converged");
        let finite = o["estimate"].as_f64().is_some_and(f64::is_finite) && error.is_finite();
        let honest = !converged || abs <= allowed;
        if row.status == Status::Ok && !(finite && honest) {
            row.status = Status::Failed;
            row.reason = format!(
                "claims convergence with error {error:.3e} but the true error is {abs:.3e}"
            );
        }
        row.accuracy = Some(Accuracy {
            max_abs: abs,
            max_rel: rel,
            rms_abs: abs,
            non_finite: u64::from(!finite),
            tolerance_abs: if converged { allowed } else { f64::INFINITY },
            tolerance_rel: f64::INFINITY,
            unit: "integral".into(),
            pass: finite && honest,
        });
        let mut details = o.as_object().cloned().unwrap_or_default();
        if let Some(stop) = details.remove("status") {
            details.insert("stop".into(), stop);
        }
        let claim = if method == "mcubes" {
            "1 sigma"
        } else {
            "error bound"
        };
        for (k, x) in [
            ("method", json!(method)),
            ("epsrel", json!(epsrel)),
            ("true_value", json!(true_value)),
            ("true_rel_error", json!(rel)),
            ("claim", json!(claim)),
            ("jobs", v.get("jobs").cloned().unwrap_or(Value::Null)),
        ] {
            details.insert(k.into(), x);
        }
        if let Some(c) = v.get("covered").and_then(|c| c.as_bool()) {
            details.insert("covered".into(), json!(c));
        }
        row.details = Some(Value::Object(details));
    }
    Ok(row)
}
