//! `astroport report`: a report rendered from a fixture of real rows (tests/data/report/, H200 rows) has
//! every expected figure, each parses as SVG and names the device and commit; report.md embeds them and
//! keeps the table; older cubature rows (H100) are converted with the cubature verdict and drawn on the
//! coverage plot; merged folders get the whole-study figures; `--latest` keeps a re-run's rows; a line that
//! is not a row is refused naming the file and line, with nothing written.

use astroport::cli::read_rows;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/report/h200-nufft-results.jsonl")
}

fn cubature_v1() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/report/h100-cubature-v1.jsonl")
}

/// The figure files report.md embeds.
fn embedded(md: &str) -> Vec<String> {
    md.lines()
        .filter_map(|l| l.strip_prefix("![").and_then(|l| l.split("](").nth(1)))
        .map(|l| l.trim_end_matches(')').to_string())
        .collect()
}

/// The text of an SVG file (it must parse as SVG).
fn svg_words(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let doc =
        roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        doc.root_element().tag_name().name(),
        "svg",
        "{}",
        path.display()
    );
    doc.descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_report_has_its_figures_and_they_name_the_device() {
    let rows = read_rows(&[fixture()]).unwrap();
    assert_eq!(rows.len(), 13);
    let dir = tempfile::tempdir().unwrap();
    let md_path = astroport::report::write(dir.path(), "H200 fixture", &rows).unwrap();
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        md.contains("| workload") || md.contains("|workload"),
        "{md}"
    );
    let figures = embedded(&md);
    // Three sections (ci; corot, floating and fixed mean; survey-small): time, accuracy, registers and kernels
    // each, the floor where rows have one (the direct rows of survey-small), and the three study figures.
    assert!(figures.len() >= 16, "{figures:?}");
    for kind in ["time", "accuracy", "registers", "kernels", "floor"] {
        assert!(
            figures.iter().any(|f| f.ends_with(&format!("-{kind}.svg"))),
            "no {kind} figure in {figures:?}"
        );
    }
    for f in &figures {
        let words = svg_words(&dir.path().join(f));
        assert!(
            words.contains("NVIDIA H200"),
            "{f} does not name the device"
        );
        assert!(words.contains("648924d"), "{f} does not name the commit");
    }
    // Three sections (ci, corot, survey-small): the whole-study figures too.
    assert!(
        figures.iter().any(|f| f == "study-ratio.svg"),
        "{figures:?}"
    );
    // One section alone has none.
    let corot: Vec<_> = rows
        .iter()
        .filter(|r| r.preset == "corot")
        .cloned()
        .collect();
    let one = tempfile::tempdir().unwrap();
    let md =
        std::fs::read_to_string(astroport::report::write(one.path(), "corot", &corot).unwrap())
            .unwrap();
    assert!(
        !embedded(&md).iter().any(|f| f.starts_with("study-")),
        "{md}"
    );
}

/// astroport.cubature/1 rows become row 2 with the cubature verdict: a covered claim is ok, a run that
/// stopped short is unconverged, an m-Cubes claim beyond its 1 sigma but within 4 is ok and shown as not
/// covered; a failed run keeps its reason.
#[test]
fn older_cubature_rows_are_converted_and_drawn_on_the_coverage_plot() {
    let rows = read_rows(&[cubature_v1()]).unwrap();
    let status: Vec<&str> = rows.iter().map(|r| r.status.name()).collect();
    assert_eq!(status, ["ok", "unconverged", "ok", "ok"]);
    for r in &rows {
        assert_eq!(r.workload, "cubature");
        assert_eq!(r.device_type, "gpu");
        assert!(r.size.contains("D epsrel 1e-"), "{}", r.size);
        assert!(r.time_s.is_some() && !r.steps.is_empty());
    }
    let covered: Vec<Option<bool>> = rows
        .iter()
        .map(|r| {
            r.details
                .as_ref()
                .unwrap()
                .get("covered")
                .and_then(|c| c.as_bool())
        })
        .collect();
    assert_eq!(covered, [Some(true), None, Some(true), Some(false)]);
    assert!(rows[1].reason.contains("iteration_limit") || rows[1].reason.contains("time_limit"));
    // The first row's error and truth, as the H100 run wrote them.
    let a = rows[0].accuracy.as_ref().unwrap();
    assert!(a.max_abs > 0.0 && a.max_abs <= a.tolerance_abs, "{a:?}");

    let line = std::fs::read_to_string(cubature_v1()).unwrap();
    let first = line.lines().next().unwrap();
    let failed = first.replace(
        "\"run\":\"ok\"",
        "\"run\":\"failed: kernel execution: UNKNOWN_ERROR\"",
    );
    assert_ne!(failed, first);
    let row = astroport::results::parse_row(&failed).unwrap();
    assert_eq!(row.status.name(), "failed");
    assert_eq!(row.reason, "kernel execution: UNKNOWN_ERROR");

    let dir = tempfile::tempdir().unwrap();
    let md = std::fs::read_to_string(
        astroport::report::write(dir.path(), "H100 cubature", &rows).unwrap(),
    )
    .unwrap();
    let figures = embedded(&md);
    assert!(
        figures.contains(&"cubature-coverage.svg".to_string()),
        "{figures:?}"
    );
    let words = svg_words(&dir.path().join("cubature-coverage.svg"));
    assert!(words.contains("NVIDIA H100 80GB HBM3"), "{words}");
    assert!(words.contains("3 claims; 2 covered"), "{words}");
    assert!(words.contains("reported relative error"), "{words}");
}

/// Rows of two workloads and two machines: the whole-study figures exist, name both devices, and the ratio
/// chart has a bar for the OpenCL rows against CUDA.
#[test]
fn merged_rows_get_the_whole_study_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_astroport"))
        .arg("report")
        .arg(fixture())
        .arg(cubature_v1())
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    let figures = embedded(&md);
    for kind in ["ratio", "accuracy"] {
        let f = format!("study-{kind}.svg");
        assert!(figures.contains(&f), "{figures:?}");
        let words = svg_words(&dir.path().join(&f));
        assert!(
            words.contains("NVIDIA H200") && words.contains("H100"),
            "{f}: {words}"
        );
    }
    let ratio = svg_words(&dir.path().join("study-ratio.svg"));
    assert!(
        ratio.contains("lombscargle corot · opencl:1:0 nufft-f64 [H200]"),
        "{ratio}"
    );
    assert!(ratio.contains("× cuda"), "{ratio}");
}

/// `--latest`: a re-run's row replaces the one it repeats; without it both stay.
#[test]
fn latest_keeps_the_last_row_of_a_repeated_run() {
    let rows = read_rows(&[fixture(), fixture()]).unwrap();
    assert_eq!(rows.len(), 26);
    let latest = astroport::cli::latest_rows(rows);
    assert_eq!(latest.len(), 13);
}

#[test]
fn a_line_that_is_not_a_row_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("results.jsonl");
    let good = std::fs::read_to_string(fixture()).unwrap();
    let first = good.lines().next().unwrap();
    std::fs::write(&bad, format!("{first}\n{{\"schema\": 1}}\n")).unwrap();
    let e = read_rows(&[dir.path().to_path_buf()]).unwrap_err();
    assert!(e.contains("results.jsonl line 2"), "{e}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args(["report", bad.to_str().unwrap(), "--out"])
        .arg(dir.path().join("rep"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
    assert!(!dir.path().join("rep/report.md").exists());
}

/// The terminal report of a whole `bench` on the 2-core VM (no GPU): nothing wider than 120 columns, one
/// table per workload and preset, and CUDA's absence said in one line however many rows it stands for.
#[test]
fn the_terminal_report_of_a_bench_is_calm() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/report/cpu-2core-bench.jsonl");
    let rows = read_rows(&[fixture]).unwrap();
    assert_eq!(rows.len(), 110);
    let text = astroport::report::terminal(&rows);
    for line in text.lines() {
        assert!(
            line.chars().count() <= astroport::report::TERMINAL_WIDTH,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let cuda: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("cuda:"))
        .collect();
    assert_eq!(cuda.len(), 1, "{text}");
    assert!(cuda[0].contains("no_runtime"), "{}", cuda[0]);
    assert!(text.contains("(22 rows)"), "{text}");
    for heading in [
        "lens ci:",
        "lombscargle ci:",
        "cubature ci (10 problems)",
        "sht ci (2 problems)",
    ] {
        assert!(text.contains(heading), "no section {heading}:\n{text}");
    }
    // No cell is broken over two lines: every table row holds a backend.
    let body: Vec<&str> = text.lines().filter(|l| l.starts_with('│')).collect();
    assert!(
        body.iter().all(|l| l.contains("cpu")
            || l.contains("opencl")
            || l.contains("sycl")
            || l.contains("cuda")
            || l.contains("backend")),
        "{text}"
    );
}
