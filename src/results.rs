//! Result rows: one JSON object per (workload, preset, backend, precision), versioned, appended to
//! `results.jsonl`. Reports (terminal, Markdown) are rendered from rows; ratios between models are
//! computed at report time.

use crate::backend::{Resources, StepReport};
use crate::workload::Accuracy;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Bump when a field changes meaning or is removed; adding fields keeps the version.
pub const SCHEMA: &str = "astroport.row/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    NotBuilt,
    NoRuntime,
    NoDevice,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::NotBuilt => "not_built",
            Status::NoRuntime => "no_runtime",
            Status::NoDevice => "no_device",
        }
    }
}

/// Kernel time statistics over the timed repeats (warm-up excluded), seconds. For a tiled problem each
/// statistic is the sum over bands.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimeStats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub repeats: u32,
    pub warmup: u32,
    /// "device events" for accelerators, "host clock" for the cpu model.
    pub timer: &'static str,
}

impl TimeStats {
    pub fn from_samples(samples: &[f64], warmup: u32, timer: &'static str) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(TimeStats {
            median: crate::backend::median(samples),
            min,
            max,
            repeats: samples.len() as u32,
            warmup,
            timer,
        })
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Throughput {
    pub value: f64,
    pub unit: String,
}

/// The device limit ("floor") the run is compared with.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Limit {
    pub floor_s: f64,
    pub fraction: f64,
    pub basis: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Launch {
    pub global: u64,
    pub local: u64,
    pub bands: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Provenance {
    pub git_commit: &'static str,
    pub git_dirty: bool,
    pub astroport_version: &'static str,
    pub features: &'static str,
    pub toolchain: String,
    pub driver: String,
    pub build_options: String,
    pub host: String,
    pub unix_time: u64,
}

impl Provenance {
    pub fn new(toolchain: String, driver: String, build_options: String) -> Self {
        Provenance {
            git_commit: env!("ASTROPORT_GIT_COMMIT"),
            git_dirty: env!("ASTROPORT_GIT_DIRTY") == "true",
            astroport_version: env!("CARGO_PKG_VERSION"),
            features: env!("ASTROPORT_FEATURES"),
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

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    pub schema: &'static str,
    pub workload: String,
    pub preset: String,
    pub size: String,
    pub backend: String,
    pub model: String,
    pub device: String,
    /// "gpu", "cpu" or "-" (absent): decides the native model a row is compared with.
    pub device_type: String,
    pub precision: String,
    pub status: Status,
    pub reason: String,
    pub time_s: Option<TimeStats>,
    pub build_s: Option<f64>,
    pub throughput: Option<Throughput>,
    pub limit: Option<Limit>,
    pub accuracy: Option<Accuracy>,
    pub resources: Option<Resources>,
    pub launch: Option<Launch>,
    /// Per-step medians and resources of a multi-step job (summed over bands), in step order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    pub provenance: Provenance,
}

/// Appends records to `dir/file` (JSON Lines), one complete line per record (a crash leaves whole lines
/// only).
pub fn append_jsonl<T: Serialize>(
    dir: &Path,
    file: &str,
    rows: &[T],
) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(file);
    let mut text = String::new();
    for r in rows {
        text.push_str(&serde_json::to_string(r).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(path)
}

/// Writes a file atomically (temporary file, then rename), so no half-written report looks complete.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
