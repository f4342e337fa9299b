//! Every example in examples/ runs to completion on the `cpu` model and prints what it promises. `cargo test`
//! builds the examples before the tests run; a missing binary means the examples were not built (for
//! example a test filter that skipped them), which fails here rather than passing silently.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test binary path");
    let dir = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target profile folder");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} not built: run the tests with `scripts/test.sh` (cargo test builds examples)",
        path.display()
    );
    path
}

fn run(name: &str) -> String {
    let out = Command::new(example(name))
        .arg("cpu")
        .output()
        .expect("example starts");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn lens_example_runs() {
    let out = run("lens");
    assert!(
        out.contains("f32 on cpu") && out.contains("mixed-budget on cpu"),
        "{out}"
    );
    assert!(out.contains("χ² of"), "{out}");
}

#[test]
fn lombscargle_example_finds_the_period() {
    let out = run("lombscargle");
    assert!(out.contains("best period 0.180"), "{out}");
}

#[test]
fn cubature_example_converges() {
    let out = run("cubature");
    assert_eq!(out.matches("(converged)").count(), 2, "{out}");
}

/// HEALPix analysis improves with iterations (this example's coefficients: 1.74e-3 at iter 0, 2.88e-6 at
/// iter 3; research/sht.md measured 1.15e-3 and 8.8e-7 on another draw), and Gauss-Legendre is exact.
#[test]
fn sht_example_round_trips() {
    let out = run("sht");
    let error = |prefix: &str| -> f64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{out}"));
        let start = line.find("error ").unwrap() + 6;
        line[start..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (iter0, iter3) = (
        error("HEALPix map2alm iter 0"),
        error("HEALPix map2alm iter 3"),
    );
    assert!(
        iter0 < 3e-3 && iter3 < 1e-5 && iter3 < iter0 / 100.0,
        "{out}"
    );
    assert!(error("Gauss-Legendre round trip") < 1e-13, "{out}");
}

#[test]
fn imgsub_example_measures_its_transients() {
    let out = run("imgsub");
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("transient")).collect();
    assert!(lines.len() >= 5, "{out}");
    let mut ratios = Vec::new();
    for line in &lines {
        assert!(line.ends_with("detected true"), "{line}");
        ratios.push(
            line.split("(ratio ").nth(1).unwrap()[..5]
                .parse::<f64>()
                .unwrap(),
        );
    }
    // The median flux is right to 3 %; single ones are off by up to 16 % (a transient 14 px from the edge,
    // where the PSF model extrapolates, or on a galaxy whose residual adds to it).
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    assert!((median - 1.0).abs() < 0.03, "median ratio {median}: {out}");
    assert!(ratios.iter().all(|r| (r - 1.0).abs() < 0.25), "{out}");
    assert!(out.starts_with("kernel sum 0.49"), "{out}");
}
