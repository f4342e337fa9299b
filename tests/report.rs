//! `astroport report`: a report rendered from a fixture of real rows (tests/data/report/, H200 rows) has
//! every expected figure, each parses as SVG and names the device and commit; report.md embeds them and
//! keeps the table; a line that is not a row is refused naming the file and line, with nothing written.

use astroport::cli::read_rows;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/report/h200-nufft-results.jsonl")
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
    let figures: Vec<String> = md
        .lines()
        .filter_map(|l| l.strip_prefix("![").and_then(|l| l.split("](").nth(1)))
        .map(|l| l.trim_end_matches(')').to_string())
        .collect();
    // Four problems (ci, corot floating and fixed, survey-small): time, accuracy, registers and kernels each;
    // the floor where rows have one (the direct rows of survey-small).
    assert!(figures.len() >= 16, "{figures:?}");
    for kind in ["time", "accuracy", "registers", "kernels", "floor"] {
        assert!(
            figures.iter().any(|f| f.ends_with(&format!("-{kind}.svg"))),
            "no {kind} figure in {figures:?}"
        );
    }
    for f in &figures {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg", "{f}");
        let words: String = doc
            .descendants()
            .filter(|n| n.is_text())
            .filter_map(|n| n.text())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            words.contains("NVIDIA H200"),
            "{f} does not name the device"
        );
        assert!(words.contains("648924d"), "{f} does not name the commit");
    }
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
