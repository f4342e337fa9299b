//! Bad and hostile inputs, each refused before any work with exit code 2 and a message naming the file,
//! line, column or flag and the value; no half-written output left behind. One test per input bug found.

use std::path::Path;
use std::process::Command;

fn astroport(args: &[&str], dir: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("binary runs");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    (o.status.code().unwrap_or(-1), err)
}

/// Exit 2 and every needle in the message.
fn refused(args: &[&str], dir: &Path, needles: &[&str]) {
    let (code, err) = astroport(args, dir);
    assert_eq!(code, 2, "{args:?} should exit 2:\n{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: message lacks '{n}':\n{err}");
    }
}

fn periodogram(input: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "periodogram",
        "--input",
        input,
        "--backend",
        "cpu",
        "--out",
        "res",
    ];
    args.extend(extra);
    args.into_iter().map(String::from).collect()
}

fn run(args: Vec<String>, dir: &Path, needles: &[&str]) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, dir, needles);
}

#[test]
fn constant_and_too_short_light_curves_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("flat.csv"),
        "time,flux\n1,1962.5\n2,1962.5\n3,1962.5\n4,1962.5\n",
    )
    .unwrap();
    run(
        periodogram("flat.csv", &[]),
        d,
        &["flat.csv", "object 'flat'", "constant"],
    );
    // One constant object in a multi-object table refuses the file.
    std::fs::write(
        d.join("multi.csv"),
        "id,time,flux\nA,1,1\nA,2,3\nA,3,2\nA,4,5\nC,1,7\nC,2,7\nC,3,7\nC,4,7\n",
    )
    .unwrap();
    run(
        periodogram("multi.csv", &[]),
        d,
        &["multi.csv", "object 'C'", "constant"],
    );
    // Three points fit the three parameters exactly (standard power above 1, no FAP).
    std::fs::write(d.join("three.csv"), "time,flux\n1,1\n2,3\n3,2\n").unwrap();
    run(
        periodogram("three.csv", &[]),
        d,
        &["three.csv", "3 points left", "at least 4"],
    );
    assert!(
        !d.join("res").exists(),
        "no output folder for refused inputs"
    );
}

#[test]
fn frequency_grids_must_increase_and_flags_be_finite() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let curve: String = (0..50)
        .map(|i| format!("{},{}\n", i as f64 * 0.37, (i as f64 * 1.3).sin()))
        .collect();
    std::fs::write(d.join("lc.csv"), format!("time,flux\n{curve}")).unwrap();
    std::fs::write(d.join("unsorted.txt"), "# grid\n0.1\n0.3\n0.2\n").unwrap();
    run(
        periodogram("lc.csv", &["--frequencies", "unsorted.txt"]),
        d,
        &["unsorted.txt line 4", "does not increase from 0.3"],
    );
    std::fs::write(d.join("repeat.txt"), "0.1\n0.2\n0.2\n").unwrap();
    run(
        periodogram("lc.csv", &["--frequencies", "repeat.txt"]),
        d,
        &["repeat.txt line 3", "does not increase"],
    );
    run(
        periodogram("lc.csv", &["--f-high", "inf"]),
        d,
        &["--f-high: inf"],
    );
    run(periodogram("lc.csv", &["--top-k", "9"]), d, &["--top-k"]);
    run(
        periodogram("lc.csv", &["--bootstrap", "0"]),
        d,
        &["--bootstrap"],
    );
    assert!(!d.join("res").exists());
}

/// Both output files or neither: when peaks.csv cannot be written, periodogram.csv is removed.
#[test]
fn no_periodogram_without_its_peaks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let curve: String = (0..50)
        .map(|i| format!("{},{}\n", i as f64 * 0.37, (i as f64 * 1.3).sin()))
        .collect();
    std::fs::write(d.join("lc.csv"), format!("time,flux\n{curve}")).unwrap();
    // A folder where peaks.csv should go makes its rename fail.
    std::fs::create_dir_all(d.join("res/peaks.csv")).unwrap();
    run(periodogram("lc.csv", &[]), d, &["peaks.csv"]);
    assert!(!d.join("res/periodogram.csv").exists());
}

#[test]
fn an_output_path_that_is_a_file_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("taken"), "a file").unwrap();
    let start = std::time::Instant::now();
    refused(
        &[
            "run",
            "lens",
            "--preset",
            "ci",
            "--backend",
            "cpu",
            "--out",
            "taken",
        ],
        d,
        &["--out taken"],
    );
    // The ci reference alone takes seconds on 2 cores: the refusal comes first.
    assert!(start.elapsed().as_secs_f64() < 2.0, "{:?}", start.elapsed());
    assert_eq!(std::fs::read_to_string(d.join("taken")).unwrap(), "a file");
    refused(
        &[
            "maps",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--prefix",
            "nowhere/m",
        ],
        d,
        &["--prefix nowhere/m", "does not exist"],
    );
}

#[test]
fn lens_flags_and_files_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run_lens = |extra: &[&str], needles: &[&str]| {
        let mut args = vec!["run", "lens", "--preset", "tiny", "--backend", "cpu"];
        args.extend(extra);
        refused(&args, d, needles);
    };
    run_lens(&["--galaxy-sigma", "15,10"], &["--galaxy-sigma", "15,10"]);
    run_lens(
        &["--galaxy-sigma", "1,1e300"],
        &["--galaxy-sigma", "c = 299792.458"],
    );
    run_lens(&["--size", "46001"], &["--size", "46001"]);
    run_lens(
        &["--device-mem-mib", "1152921504606846976"],
        &["--device-mem-mib", "1152921504606846976"],
    );
    std::fs::write(
        d.join("halos.csv"),
        "id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg\nA,sie,0,0,900,0.1,0\n\
         B,sie,1,1,1e300,0.1,0\n",
    )
    .unwrap();
    run_lens(
        &["--halos", "halos.csv"],
        &["halos.csv line 3", "sigma_kms", "1e300", "speed of light"],
    );
    std::fs::write(
        d.join("far.csv"),
        "id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg\nA,sie,5e9,0,900,0.1,0\n",
    )
    .unwrap();
    run_lens(
        &["--halos", "far.csv"],
        &["far.csv line 2", "x_arcsec", "5e9"],
    );
    // χ² systems in front of the lens (z_lens 0.3) are refused with the file and line.
    std::fs::write(
        d.join("images.csv"),
        "system,z_source,x_arcsec,y_arcsec,sigma_arcsec\nS1,2.0,1,1,0.5\nS1,2.0,-1,-1,0.5\n\
         S2,0.2,3,3,0.5\nS2,0.2,-3,-3,0.5\n",
    )
    .unwrap();
    refused(
        &[
            "run",
            "lens-chi2",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--images",
            "images.csv",
        ],
        d,
        &["images.csv line 4", "z_source", "behind the lens"],
    );
}

#[test]
fn cubature_budgets_must_be_positive_numbers() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value) in [
        ("--max-seconds", "-1"),
        ("--max-seconds", "nan"),
        ("--epsabs", "-1"),
        ("--epsabs", "nan"),
        ("--max-iterations", "0"),
    ] {
        // `--flag=-1`: a separate "-1" would be read as a flag.
        let arg = format!("{flag}={value}");
        refused(
            &[
                "run",
                "cubature",
                "--integrand",
                "f3",
                "--backend",
                "cpu",
                &arg,
            ],
            dir.path(),
            &[flag],
        );
    }
}

/// A host that cannot hold a verified grid is told so before the run (the message, for any machine).
#[test]
fn lens_grid_too_large_for_the_host_is_refused_up_front() {
    use astroport::workload::lens::{LensOptions, LensProblem, Preset};
    let p = LensProblem::preset(
        Preset::Tiny,
        &LensOptions {
            n: Some(30_000),
            ..Default::default()
        },
    )
    .unwrap();
    let problem = p
        .host_memory_problem(23 << 30)
        .expect("36 GB do not fit in 23");
    assert!(
        problem.contains("30000² grid needs about 33.5 GiB"),
        "{problem}"
    );
    assert!(p.host_memory_problem(64 << 30).is_none());
}
