//! Reports rendered from rows: the terminal table and Markdown. The ratio to the native model is computed
//! here: CUDA on the same NVIDIA GPU, the Rust `cpu` model on CPUs. Reports read rows only, never a
//! workload: what a workload wants shown is in its rows (`details`).

use crate::results::{Row, Status};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

/// A CPU's name without the thread count the `cpu` model adds ("AMD EPYC (2 threads)" is "AMD EPYC").
fn cpu_name(device: &str) -> &str {
    match device.rfind(" (") {
        Some(i) if device.ends_with(" threads)") => &device[..i],
        _ => device,
    }
}

/// Threads of a `cpu` model row, from its device name.
fn cpu_threads(device: &str) -> u32 {
    device[cpu_name(device).len()..]
        .trim_start_matches(" (")
        .trim_end_matches(" threads)")
        .parse()
        .unwrap_or(0)
}

/// The native model's row for the same workload, preset, size and precision, with the model's name: CUDA
/// on the same NVIDIA GPU; on a CPU, the Rust `cpu` model of the same run (same input file) on the same
/// processor (its name inside this device's name: PoCL calls it "pthread-haswell-AMD EPYC"), with the most
/// threads.
pub fn native_row<'a>(
    row: &Row,
    rows: impl IntoIterator<Item = &'a Row>,
) -> Option<(&'a Row, &'static str)> {
    let same = |r: &&Row| {
        r.status == Status::Ok
            && r.workload == row.workload
            && r.preset == row.preset
            && r.size == row.size
            && r.precision == row.precision
    };
    let mut rows = rows.into_iter().filter(same);
    if row.device_type == "gpu" {
        rows.find(|r| r.model == "cuda" && r.device == row.device)
            .map(|r| (r, "cuda"))
    } else {
        rows.filter(|r| {
            r.model == "cpu" && r.source == row.source && row.device.contains(cpu_name(&r.device))
        })
        .max_by_key(|r| cpu_threads(&r.device))
        .map(|r| (r, "cpu"))
    }
}

/// This row's median time over its native model's ([`native_row`]), with the model's name.
pub fn native_ratio(row: &Row, rows: &[Row]) -> Option<(f64, &'static str)> {
    let t = row.time_s.as_ref()?.median;
    let (native, label) = native_row(row, rows)?;
    Some((t / native.time_s.as_ref()?.median, label))
}

/// The rows of one workload and preset, in their order: a section of the terminal table, of report.md's
/// figures and of the study. A suite (several problems under one preset, such as
/// a cubature sweep) is drawn as one set of figures whose bars name their problem, sorted by problem.
pub struct Section<'a> {
    pub key: String,
    pub rows: Vec<&'a Row>,
    pub suite: bool,
    /// In a suite, each problem's size line and the words that tell it from the others.
    pub names: Vec<(String, String)>,
}

/// The part of each size line that differs from the others: the words they all share at the start and at
/// the end dropped ("…, fixed mean, full periodogram" and "…, floating mean, …" become "fixed mean," and
/// "floating mean,"), at most 48 characters.
pub fn distinct_names(sizes: &[&str]) -> Vec<(String, String)> {
    let words: Vec<Vec<&str>> = sizes
        .iter()
        .map(|s| s.split_whitespace().collect())
        .collect();
    let shortest = words.iter().map(Vec::len).min().unwrap_or(0);
    let shared = |at: &dyn Fn(&Vec<&str>, usize) -> String| {
        (0..shortest)
            .take_while(|&i| words.iter().all(|w| at(w, i) == at(&words[0], i)))
            .count()
    };
    let head = shared(&|w, i| w[i].to_string());
    let tail = shared(&|w, i| w[w.len() - 1 - i].to_string()).min(shortest - head.min(shortest));
    sizes
        .iter()
        .zip(&words)
        .map(|(size, w)| {
            let middle = w[head.min(w.len())..w.len() - tail].join(" ");
            let name = if middle.is_empty() {
                size.to_string()
            } else {
                middle
            };
            let name = if name.chars().count() > 48 {
                format!("{}…", name.chars().take(47).collect::<String>())
            } else {
                name
            };
            (size.to_string(), name)
        })
        .collect()
}

pub fn sections(rows: &[Row]) -> Vec<Section<'_>> {
    let mut out: Vec<Section> = Vec::new();
    for r in rows {
        match out
            .iter_mut()
            .find(|g| g.rows[0].workload == r.workload && g.rows[0].preset == r.preset)
        {
            Some(g) => g.rows.push(r),
            None => out.push(Section {
                key: String::new(),
                rows: vec![r],
                suite: false,
                names: Vec::new(),
            }),
        }
    }
    for g in &mut out {
        let first = g.rows[0];
        g.suite = g.rows.iter().any(|r| r.size != first.size);
        g.key = if g.suite {
            g.rows.sort_by(|a, b| a.size.cmp(&b.size));
            let mut sizes: Vec<&str> = g.rows.iter().map(|r| r.size.as_str()).collect();
            sizes.dedup();
            g.names = distinct_names(&sizes);
            format!(
                "{} {} ({} problems)",
                first.workload,
                first.preset,
                sizes.len()
            )
        } else {
            format!("{} {} ({})", first.workload, first.preset, first.size)
        };
    }
    out
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

/// The first cell: the workload, and the problem too when the rows hold several of that workload (a
/// cubature suite).
fn problem_cell(row: &Row, rows: &[Row]) -> String {
    let several = rows
        .iter()
        .any(|r| r.workload == row.workload && r.size != row.size);
    if several {
        format!("{}: {}", row.workload, row.size)
    } else {
        row.workload.clone()
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
    let ratio = match native_row(row, rows) {
        Some((n, _)) if std::ptr::eq(n, row) => "native".to_string(),
        _ => native_ratio(row, rows)
            .map(|(r, m)| format!("{r:.2} vs {m}"))
            .unwrap_or_else(dash),
    };
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
        problem_cell(row, rows),
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
    "mode",
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

/// Width of everything the terminal report prints.
pub const TERMINAL_WIDTH: usize = 120;

/// The columns of [`HEADERS`] the terminal shows, after the problem in a suite: the workload is the
/// section's heading; the device, the spread of times, the throughput and the relative error stay in the
/// JSON row and in report.md.
const TERMINAL_COLUMNS: [usize; 9] = [1, 3, 4, 5, 8, 9, 10, 11, 12];

/// The terminal report: one table per workload and preset under a heading that names the problem (a suite's
/// table names each row's problem in its first column), each at most [`TERMINAL_WIDTH`] columns; then the
/// reasons of rows that are not `ok` and the claims of convergence, wrapped to the same width.
pub fn terminal(rows: &[Row]) -> String {
    let mut out = String::new();
    for section in sections(rows) {
        let heading = if section.suite {
            section.key.clone()
        } else {
            let r = section.rows[0];
            format!("{} {}: {}", r.workload, r.preset, r.size)
        };
        out.push_str(&wrap(&heading, TERMINAL_WIDTH));
        out.push('\n');
        let mut header: Vec<&str> = TERMINAL_COLUMNS.iter().map(|&c| HEADERS[c]).collect();
        if section.suite {
            header.insert(0, "problem");
        }
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_width(TERMINAL_WIDTH as u16)
            .set_header(header);
        for r in &section.rows {
            let all = cells(r, rows);
            let mut line: Vec<String> = TERMINAL_COLUMNS.iter().map(|&c| all[c].clone()).collect();
            if let Some((_, name)) = section.names.iter().find(|(size, _)| *size == r.size) {
                line.insert(0, name.clone());
            }
            t.add_row(line);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out.push_str(&wrap(&reasons(rows), TERMINAL_WIDTH));
    for line in claims(rows) {
        out.push_str(&wrap(&line, TERMINAL_WIDTH));
        out.push('\n');
    }
    out
}

/// Each line of `text` broken at spaces to at most `width` characters; continuation lines keep the line's
/// indentation plus four spaces. A single word longer than the width stays whole.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let indent: String = body.chars().take_while(|c| *c == ' ').collect();
        let mut current = indent.clone();
        let mut empty = true;
        for word in body.trim_start().split(' ') {
            if !empty && current.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&current);
                out.push('\n');
                current = format!("{indent}    {word}");
            } else {
                if !empty {
                    current.push(' ');
                }
                current.push_str(word);
            }
            empty = false;
        }
        out.push_str(&current);
        out.push_str(newline);
    }
    out
}

/// Per workload and method, how many claims of convergence cover the truth: rows whose `details` carry
/// `covered` (true or false when the run claimed convergence), `method` and what the claim is (`claim`).
pub fn claims(rows: &[Row]) -> Vec<String> {
    let mut groups: Vec<(String, String, usize, usize)> = Vec::new();
    for r in rows {
        let Some(d) = &r.details else { continue };
        let Some(covered) = d.get("covered").and_then(|c| c.as_bool()) else {
            continue;
        };
        let method = d.get("method").and_then(|m| m.as_str()).unwrap_or_default();
        let claim = d.get("claim").and_then(|m| m.as_str()).unwrap_or("error");
        let key = format!("{} {method}", r.workload).trim().to_string();
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => {
                g.2 += 1;
                g.3 += usize::from(covered);
            }
            None => groups.push((key, claim.to_string(), 1, usize::from(covered))),
        }
    }
    groups
        .into_iter()
        .map(|(key, claim, claimed, covered)| {
            format!(
                "{key}: {covered} of {claimed} runs that claim convergence have |true error| <= reported error ({claim})"
            )
        })
        .collect()
}

/// Why rows are not ok. An unavailable backend is one line, printed once with the number of rows it stands
/// for. Any other row gets its own line: its first reason line and, for a multi-line reason such as a build
/// log, the first three lines that name an error (the whole reason is in the JSON Lines row).
fn reasons(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut unavailable: Vec<(&str, Status, &str, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.status.is_unavailable()) {
        let first = r.reason.lines().next().unwrap_or_default();
        match unavailable
            .iter_mut()
            .find(|(b, s, why, _)| *b == r.backend && *s == r.status && *why == first)
        {
            Some(entry) => entry.3 += 1,
            None => unavailable.push((&r.backend, r.status, first, 1)),
        }
    }
    for (backend, status, why, count) in unavailable {
        let rows = if count == 1 { "row" } else { "rows" };
        out.push_str(&format!(
            "  {backend}: {} — {why} ({count} {rows})\n",
            status.name()
        ));
    }
    for r in rows
        .iter()
        .filter(|r| r.status != Status::Ok && !r.status.is_unavailable())
    {
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
    let mut problems: Vec<String> = Vec::new();
    for r in rows {
        let p = format!("{} `{}` ({})", r.workload, r.preset, r.size);
        if !problems.contains(&p) {
            problems.push(p);
        }
    }
    if let Some(r) = rows.first() {
        md.push_str(&format!(
            "Problems: {}.\n\nastroport {} (commit {}{}), features: {}.\n\n",
            problems.join("; "),
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
    let claims = claims(rows);
    if !claims.is_empty() {
        md.push_str("## Claims of convergence\n\n");
        for c in claims {
            md.push_str(&format!("- {c}\n"));
        }
        md.push('\n');
    }
    md.push_str("## Details\n\n");
    for r in rows {
        md.push_str(&format!(
            "- {} `{}` {} ({}): **{}**",
            problem_cell(r, rows),
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
                "; accuracy vs the reference: max abs {:.3e} {}, rms {:.3e}, max rel {:.3e} (tolerance abs {:e}, rel {:e})",
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
        if let Some(serde_json::Value::Object(d)) = &r.details {
            let figures: Vec<String> = d
                .iter()
                .map(|(k, v)| match v {
                    serde_json::Value::Number(n) => match n.as_f64() {
                        Some(x) if x.fract() != 0.0 => format!("{k} {x:.4e}"),
                        _ => format!("{k} {n}"),
                    },
                    other => format!("{k} {other}"),
                })
                .collect();
            md.push_str(&format!("; details: {}", figures.join(", ")));
        }
        md.push('\n');
    }
    md
}

/// Writes `report.md` and its SVG figures into `dir` (atomically each): the Markdown of [`markdown`] with a
/// Figures section that embeds every figure of [`crate::figures::write_figures`]. `run`, `bench` and
/// `report` all write reports through here.
pub fn write(
    dir: &std::path::Path,
    title: &str,
    rows: &[Row],
) -> Result<std::path::PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let figures = crate::figures::write_figures(dir, rows)?;
    let mut md = markdown(title, rows);
    if !figures.list.is_empty() {
        md.push_str("\n## Figures\n\n");
        for note in &figures.notes {
            md.push_str(&format!("- {note}\n"));
        }
        if !figures.notes.is_empty() {
            md.push('\n');
        }
        let mut problem = String::new();
        for f in &figures.list {
            if f.problem != problem {
                md.push_str(&format!("### {}\n\n", f.problem));
                problem = f.problem.clone();
            }
            md.push_str(&format!("![{}]({})\n\n", f.title, f.file));
        }
    }
    let path = dir.join("report.md");
    crate::inputs::write_atomic(&path, md.as_bytes()).map_err(|e| e.to_string())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Provenance;

    #[test]
    fn wrapped_lines_fit_and_keep_every_word() {
        let long = format!(
            "  cuda: no_runtime — {} (1 row)\nshort\n",
            "word ".repeat(60).trim_end()
        );
        let w = wrap(&long, 50);
        assert!(w.lines().all(|l| l.chars().count() <= 50), "{w}");
        let words = |t: &str| t.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(&w), words(&long));
        assert!(w.lines().nth(1).unwrap().starts_with("      word"), "{w}");
        assert!(w.ends_with("short\n"));
    }

    fn failed_row(reason: &str) -> Row {
        Row {
            workload: "lens".into(),
            preset: "tiny".into(),
            size: "128² px".into(),
            backend: "opencl:0:0".into(),
            model: "opencl".into(),
            device: "cpu".into(),
            device_type: "cpu".into(),
            precision: "f32".into(),
            status: Status::Failed,
            reason: reason.into(),
            ..Row::blank(Provenance::new(String::new(), String::new(), String::new()))
        }
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

    #[test]
    fn distinct_names_keep_the_words_that_differ() {
        let names = distinct_names(&[
            "382003 points, fixed mean, full periodogram",
            "382003 points, floating mean, full periodogram",
        ]);
        assert_eq!(names[0].1, "fixed");
        assert_eq!(names[1].1, "floating");
        // Nothing shared: the whole line.
        let names = distinct_names(&["pagani f1 3D epsrel 1e-4", "mcubes f4 8D epsrel 1e-3"]);
        assert_eq!(names[0].1, "pagani f1 3D epsrel 1e-4");
        // One line inside another: the longer one keeps its extra words, the shorter its whole line.
        let names = distinct_names(&["a b", "a b c"]);
        assert_eq!(names[0].1, "a b");
        assert_eq!(names[1].1, "c");
    }

    /// On a CPU the native row is the `cpu` model of the same run on the same processor, the one with the
    /// most threads; rows of another machine (another input file) never stand in.
    #[test]
    fn cpu_rows_compare_with_the_cpu_model_of_their_own_run() {
        let row = |model: &str, device: &str, source: &str, t: f64| {
            let mut r = failed_row("");
            r.status = Status::Ok;
            r.model = model.into();
            r.device = device.into();
            r.source = source.into();
            r.time_s = crate::exec::TimeStats::from_samples(&[t], 0, "host clock");
            r
        };
        let rows = vec![
            row("cpu", "AMD EPYC (1 threads)", "vm-a", 8.0),
            row("cpu", "AMD EPYC (2 threads)", "vm-a", 4.0),
            row("cpu", "Intel(R) Xeon(R) Processor (2 threads)", "vm-b", 1.0),
            row("opencl", "pthread-haswell-AMD EPYC", "vm-a", 2.0),
            row("opencl", "pthread-haswell-AMD EPYC", "vm-b", 2.0),
        ];
        let (ratio, model) = native_ratio(&rows[3], &rows).unwrap();
        assert_eq!((ratio, model), (0.5, "cpu"));
        assert!(native_ratio(&rows[4], &rows).is_none());
        assert_eq!(native_ratio(&rows[0], &rows).unwrap().0, 2.0);
    }
}
