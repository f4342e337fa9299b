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
