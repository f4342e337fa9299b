//! Reports rendered from rows: the terminal table and Markdown. The ratio to the native model is computed
//! here: CUDA on the same NVIDIA GPU, the Rust `cpu` model on CPUs.

use crate::results::{Row, Status};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

/// Median time of the native model's row for the same workload, preset, precision and device.
pub fn native_ratio(row: &Row, rows: &[Row]) -> Option<(f64, &'static str)> {
    let t = row.time_s.as_ref()?.median;
    let same = |r: &&Row| {
        r.status == Status::Ok
            && r.workload == row.workload
            && r.preset == row.preset
            && r.precision == row.precision
    };
    let (native, label) = if row.device_type == "gpu" {
        (
            rows.iter()
                .filter(same)
                .find(|r| r.model == "cuda" && r.device == row.device),
            "cuda",
        )
    } else {
        (rows.iter().filter(same).find(|r| r.model == "cpu"), "cpu")
    };
    Some((t / native?.time_s.as_ref()?.median, label))
}

/// Seconds with a unit that suits them (s, ms, µs).
pub fn fmt_time(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 || s == 0.0 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn cells(row: &Row, rows: &[Row]) -> Vec<String> {
    let dash = || "-".to_string();
    let time = row
        .time_s
        .as_ref()
        .map(|t| fmt_time(t.median))
        .unwrap_or_else(dash);
    let spread = row
        .time_s
        .as_ref()
        .map(|t| format!("{}–{} ×{}", fmt_time(t.min), fmt_time(t.max), t.repeats))
        .unwrap_or_else(dash);
    let thr = row
        .throughput
        .as_ref()
        .map(|t| format!("{:.3e} {}", t.value, t.unit))
        .unwrap_or_else(dash);
    let limit = match (&row.limit, &row.time_s) {
        (Some(l), _) => format!("{:.0} %", l.fraction * 100.0),
        (None, Some(_)) => "n/a".into(),
        _ => dash(),
    };
    let ratio = native_ratio(row, rows)
        .map(|(r, m)| format!("{r:.2} vs {m}"))
        .unwrap_or_else(dash);
    let regs = match &row.resources {
        Some(r) => r
            .regs_per_thread
            .map(|v| v.to_string())
            .unwrap_or_else(|| "n/a".into()),
        None => dash(),
    };
    let occ = match &row.resources {
        Some(r) => r
            .occupancy
            .map(|v| format!("{:.0} %", v * 100.0))
            .unwrap_or_else(|| "n/a".into()),
        None => dash(),
    };
    let (abs, rel) = match &row.accuracy {
        Some(a) => (format!("{:.2e}", a.max_abs), format!("{:.2e}", a.max_rel)),
        None => (dash(), dash()),
    };
    vec![
        row.workload.clone(),
        row.backend.clone(),
        row.device.clone(),
        row.precision.clone(),
        row.status.name().to_string(),
        time,
        spread,
        thr,
        limit,
        ratio,
        regs,
        occ,
        abs,
        rel,
    ]
}

const HEADERS: [&str; 14] = [
    "workload",
    "backend",
    "device",
    "prec",
    "status",
    "median",
    "min–max ×n",
    "throughput",
    "of limit",
    "ratio",
    "regs",
    "occupancy",
    "max abs",
    "max rel",
];

/// The terminal table, followed by the reasons of rows that are not `ok`.
pub fn terminal(rows: &[Row]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_header(HEADERS.to_vec());
    for r in rows {
        t.add_row(cells(r, rows));
    }
    let mut out = t.to_string();
    out.push('\n');
    out.push_str(&reasons(rows));
    out
}

/// One line per row that is not ok: its first reason line and, for a multi-line reason such as a build log,
/// the first three lines that name an error (the whole reason is in the JSON Lines row).
fn reasons(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| r.status != Status::Ok) {
        let mut lines = r.reason.lines();
        let first = lines.next().unwrap_or_default();
        out.push_str(&format!(
            "  {} {} {}: {} — {}\n",
            r.backend,
            r.precision,
            r.workload,
            r.status.name(),
            first
        ));
        let errors: Vec<&str> = lines
            .filter(|l| l.to_ascii_lowercase().contains("error"))
            .take(3)
            .collect();
        for e in &errors {
            out.push_str(&format!("      {}\n", e.trim()));
        }
        if !errors.is_empty() {
            out.push_str("      (the whole reason is in the row's `reason` field)\n");
        }
    }
    out
}

/// A Markdown report of the rows, with the resource sources and accuracy tolerances spelled out.
pub fn markdown(title: &str, rows: &[Row]) -> String {
    let mut md = format!("# {title}\n\n");
    if let Some(r) = rows.first() {
        md.push_str(&format!(
            "Problem: {} `{}` preset, {}. astroport {} (commit {}{}), features: {}.\n\n",
            r.workload,
            r.preset,
            r.size,
            r.provenance.astroport_version,
            r.provenance.git_commit,
            if r.provenance.git_dirty {
                ", dirty"
            } else {
                ""
            },
            r.provenance.features
        ));
    }
    md.push_str(&format!("| {} |\n", HEADERS.join(" | ")));
    md.push_str(&format!("|{}\n", "---|".repeat(HEADERS.len())));
    for r in rows {
        md.push_str(&format!(
            "| {} |\n",
            cells(r, rows).join(" | ").replace('\n', " ")
        ));
    }
    md.push_str("\nRatio: this row's median time over the native model's on the same device (CUDA on NVIDIA GPUs, the Rust `cpu` model on CPUs); above 1 is slower.\n\n");
    md.push_str("## Details\n\n");
    for r in rows {
        md.push_str(&format!(
            "- `{}` {} ({}): **{}**",
            r.backend,
            r.precision,
            r.device,
            r.status.name()
        ));
        if !r.reason.is_empty() {
            md.push_str(&format!(
                " — {}",
                r.reason.lines().next().unwrap_or_default()
            ));
        }
        if let Some(a) = &r.accuracy {
            md.push_str(&format!(
                "; accuracy vs f64 cpu: max abs {:.3e} {}, rms {:.3e}, max rel {:.3e} (tolerance abs {:e}, rel {:e})",
                a.max_abs, a.unit, a.rms_abs, a.max_rel, a.tolerance_abs, a.tolerance_rel
            ));
        }
        if let Some(res) = &r.resources {
            md.push_str(&format!("; resources: {}", res.source));
        }
        if let Some(l) = &r.limit {
            md.push_str(&format!("; floor {} ({})", fmt_time(l.floor_s), l.basis));
        }
        if let Some(b) = r.build_s {
            md.push_str(&format!("; build/JIT {:.3} s", b));
        }
        if !r.provenance.build_options.is_empty() {
            md.push_str(&format!("; options `{}`", r.provenance.build_options));
        }
        if !r.provenance.driver.is_empty() {
            md.push_str(&format!("; driver {}", r.provenance.driver));
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Provenance;

    fn failed_row(reason: &str) -> Row {
        let problem = crate::workload::lens::LensProblem::preset(
            crate::workload::lens::Preset::Tiny,
            &Default::default(),
        )
        .unwrap();
        let mut row = crate::bench::base_row(
            &problem,
            "opencl:0:0".into(),
            crate::backend::Model::Opencl,
            "cpu".into(),
            crate::backend::Precision::F32,
            Provenance::new(String::new(), String::new(), String::new()),
        );
        row.status = Status::Failed;
        row.reason = reason.into();
        row
    }

    /// A build failure's screen line shows the compiler's error lines, not only the reason's first line.
    #[test]
    fn build_failure_reason_shows_error_lines() {
        let row = failed_row(
            "program build failed for lens on opencl:0:0 (cpu):\nCL_BUILD_PROGRAM_FAILURE\n\
             1:643:46: error: expected identifier or '('\n  643 | const float half = 0;",
        );
        let text = reasons(&[row]);
        assert!(text.contains("program build failed"), "{text}");
        assert!(text.contains("error: expected identifier"), "{text}");
        assert!(!text.contains("643 |"), "{text}");
        let plain = reasons(&[failed_row("no device")]);
        assert_eq!(plain.lines().count(), 1, "{plain}");
    }
}
