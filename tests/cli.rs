//! The command line as a user meets it: unavailable backends give rows with reasons, bad arguments give
//! clear errors and exit code 2, results are versioned JSON Lines.

use std::process::Command;

fn astroport(args: &[&str], out: &std::path::Path) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args(args)
        .current_dir(out)
        .output()
        .expect("binary runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

/// One field of every row of a results.jsonl, as JSON text.
fn row_values(path: &std::path::Path, key: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()[key].to_string())
        .collect()
}

#[test]
fn devices_lists_every_model() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = astroport(&["devices"], dir.path());
    assert_eq!(code, 0);
    for model in ["cpu", "opencl", "cuda", "sycl"] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(model)),
            "no {model} line in:\n{out}"
        );
    }
}

#[test]
fn unavailable_backend_gets_a_row_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    // cuda:7 exists nowhere: built or not, it must be a row that says why, not a crash.
    let (code, out, err) = astroport(
        &[
            "run",
            "lens",
            "--preset",
            "tiny",
            "--backend",
            "cuda:7",
            "--backend",
            "cpu",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let text = std::fs::read_to_string(dir.path().join("o/results.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let cuda = rows
        .iter()
        .find(|r| r["backend"] == "cuda:7")
        .expect("cuda row");
    assert!(["not_built", "no_runtime", "no_device"].contains(&cuda["status"].as_str().unwrap()));
    assert!(!cuda["reason"].as_str().unwrap().is_empty());
    let cpu = rows.iter().find(|r| r["backend"] == "cpu").unwrap();
    assert_eq!(cpu["status"], "ok");
    for key in [
        "schema",
        "workload",
        "preset",
        "backend",
        "device",
        "precision",
        "status",
        "reason",
        "time_s",
        "accuracy",
        "resources",
        "provenance",
    ] {
        assert!(cpu.get(key).is_some(), "row lacks {key}");
    }
    assert_eq!(cpu["schema"], "astroport.row/2");
    assert!(cpu["time_s"]["median"].as_f64().unwrap() > 0.0);
    assert!(cpu["provenance"]["git_commit"].as_str().is_some());
    assert!(
        out.contains("cuda:7"),
        "terminal table shows the unavailable row:\n{out}"
    );
    assert!(dir.path().join("o/report.md").exists());
}

#[test]
fn a_named_opencl_platform_is_the_only_one_opened_and_a_missing_one_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Platform 0 exists wherever the tests run (PoCL at least); platform 9 nowhere.
    let (code, out, err) = astroport(
        &[
            "run",
            "imgsub",
            "--preset",
            "tiny",
            "--backend",
            "opencl:0:0",
            "--backend",
            "opencl:9",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let status = row_values(&dir.path().join("o/results.jsonl"), "status");
    let backend = row_values(&dir.path().join("o/results.jsonl"), "backend");
    let reason = row_values(&dir.path().join("o/results.jsonl"), "reason");
    let at = |b: &str| {
        backend
            .iter()
            .position(|x| x == &format!("\"{b}\""))
            .expect(b)
    };
    assert_eq!(status[at("opencl:0:0")], "\"ok\"", "{out}");
    assert_eq!(status[at("opencl:9")], "\"no_device\"");
    assert!(reason[at("opencl:9")].contains("opencl:9"), "{reason:?}");
    // Alone, the missing platform is all that was asked for: the reason lists the platforms there are.
    let (code, out, err) = astroport(
        &[
            "run",
            "imgsub",
            "--preset",
            "tiny",
            "--backend",
            "opencl:9",
            "--out",
            "p",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let reason = row_values(&dir.path().join("p/results.jsonl"), "reason");
    assert!(
        reason[0].contains("no OpenCL platform [9]: the loader lists") && reason[0].contains("0: "),
        "{reason:?}"
    );
}

#[test]
fn bad_arguments_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "lens", "--backend", "metal"],
            "unknown backend 'metal'",
        ),
        (
            &["run", "lens", "--backend", "opencl:x"],
            "not a device index",
        ),
        (
            &["run", "lens", "--backend", "cpu", "--preset", "huge"],
            "invalid value 'huge' for '--preset",
        ),
        (
            &["run", "lens", "--backend", "cpu", "--size", "0"],
            "at least 1 pixel",
        ),
        (
            &["run", "lens", "--backend", "cpu", "--precision", "f16"],
            "f16",
        ),
        (
            &["run", "lens", "--backend", "cpu", "--galaxy-sigma", "15,10"],
            "--galaxy-sigma: expected 0 < LO <= HI",
        ),
        (&["run", "lens"], "--backend"),
        (&["run", "quasar", "--backend", "cpu"], "quasar"),
        (
            &["periodogram", "--input", "x.csv", "--top-k", "9"],
            "--top-k",
        ),
        (
            &["run", "lombscargle", "--backend", "cpu", "--tolerance", "0"],
            "--tolerance",
        ),
        (
            &["run", "lombscargle", "--backend", "cpu", "--method", "fast"],
            "--method",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = astroport(args, dir.path());
        assert_eq!(code, 2, "{args:?} should exit 2; stdout {out} stderr {err}");
        assert!(
            err.contains(want),
            "{args:?}: stderr lacks '{want}':\n{err}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    }
}

/// `periodogram` on a CSV light curve: the injected period comes back as the best peak with a tiny FAP, the
/// outputs are written; a file with a NaN time is refused naming the file, line and value, with exit 2 and
/// no outputs.
#[test]
fn periodogram_reads_a_light_curve_and_writes_peaks() {
    let dir = tempfile::tempdir().unwrap();
    let curve = astroport::workload::lombscargle::generate::corot_like(600, 3);
    let mut csv = String::from("time,mag\n");
    for (t, y) in curve.t.iter().zip(&curve.y) {
        csv.push_str(&format!("{t},{y}\n"));
    }
    std::fs::write(dir.path().join("lc.csv"), &csv).unwrap();
    let (code, out, err) = astroport(
        &[
            "periodogram",
            "--input",
            "lc.csv",
            "--backend",
            "cpu",
            "--f-high",
            "4",
            "--out",
            "res",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let peaks = std::fs::read_to_string(dir.path().join("res/peaks.csv")).unwrap();
    let first: Vec<&str> = peaks.lines().nth(1).unwrap().split(',').collect();
    let period: f64 = first[4].parse().unwrap();
    let fap: f64 = first[6].parse().unwrap();
    assert!((period - 0.18).abs() < 1e-3 && fap < 1e-10, "{peaks}");
    assert!(dir.path().join("res/periodogram.csv").exists());

    std::fs::write(
        dir.path().join("bad.csv"),
        "time,mag\n0,1\n1,2\nnan,3\n2,1\n",
    )
    .unwrap();
    let (code, _, err) = astroport(
        &[
            "periodogram",
            "--input",
            "bad.csv",
            "--backend",
            "cpu",
            "--out",
            "bad",
        ],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.csv") && err.contains("line 4") && err.contains("nan"),
        "{err}"
    );
    assert!(!dir.path().join("bad").exists());
}

/// `periodogram --method`: nufft and direct agree on the best period; auto says what it chose; a given
/// frequency grid makes nufft fall back to direct sums with a note; a bad --tolerance is refused before
/// anything is written.
#[test]
fn periodogram_methods_agree_and_say_their_choice() {
    let dir = tempfile::tempdir().unwrap();
    let curve = astroport::workload::lombscargle::generate::corot_like(2000, 5);
    let mut csv = String::from("time,mag\n");
    for (t, y) in curve.t.iter().zip(&curve.y) {
        csv.push_str(&format!("{t},{y}\n"));
    }
    std::fs::write(dir.path().join("lc.csv"), &csv).unwrap();
    let run = |extra: &[&str], out: &str| {
        let mut args = vec![
            "periodogram",
            "--input",
            "lc.csv",
            "--backend",
            "cpu",
            "--out",
            out,
        ];
        args.extend_from_slice(extra);
        astroport(&args, dir.path())
    };
    let best = |out: &str| -> f64 {
        let peaks = std::fs::read_to_string(dir.path().join(out).join("peaks.csv")).unwrap();
        peaks
            .lines()
            .nth(1)
            .unwrap()
            .split(',')
            .nth(4)
            .unwrap()
            .parse()
            .unwrap()
    };
    let (code, _, err) = run(&["--method", "nufft", "--precision", "f64"], "nufft");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("nufft-f64"), "{err}");
    let (code, _, err) = run(&["--method", "direct", "--precision", "f64"], "direct");
    assert_eq!(code, 0, "{err}");
    assert_eq!(best("nufft"), best("direct"));
    assert!((best("nufft") - 0.18).abs() < 1e-3);
    let (code, _, err) = run(&["--method", "auto"], "auto");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("method: auto chose nufft (predicted"), "{err}");
    std::fs::write(dir.path().join("f.txt"), "0.5\n1.0\n5.555\n6.0\n").unwrap();
    let (code, _, err) = run(&["--method", "nufft", "--frequencies", "f.txt"], "given");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("method: direct") && err.contains("non-uniform"),
        "{err}"
    );
    let (code, _, err) = run(&["--method", "nufft", "--tolerance", "2"], "badtol");
    assert_eq!(code, 2);
    assert!(err.contains("--tolerance") && err.contains('2'), "{err}");
    assert!(!dir.path().join("badtol/periodogram.csv").exists());
}

/// `maps` writes the six FITS maps of the lens model, and they read back with the grid's size.
#[test]
fn maps_writes_fits_maps() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = astroport(
        &[
            "maps",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--prefix",
            "tiny",
            "--repeats",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    for name in ["alpha_x", "alpha_y", "kappa", "gamma1", "gamma2", "mu"] {
        let path = dir.path().join(format!("tiny_{name}.fits"));
        let map = astroport::workload::lens::io::read_map_fits(&path).unwrap();
        assert_eq!(
            (map.nx, map.ny, map.data.len()),
            (128, 128, 128 * 128),
            "{name}"
        );
        assert!(map.data.iter().all(|v| v.is_finite()), "{name}");
        assert!(map.data.iter().any(|&v| v != 0.0), "{name} is all zero");
        assert!(out.contains(&format!("tiny_{name}.fits")), "{out}");
    }
}

/// `--method split` asks for the near/far split on `run lens` and `maps`, beside the direct grid's
/// `--precision` modes.
#[test]
fn lens_method_split_runs_beside_the_precisions() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = astroport(
        &[
            "run",
            "lens",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--method",
            "direct,split",
            "--precision",
            "f32",
            "--repeats",
            "1",
            "--out",
            "o",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let modes = row_values(&dir.path().join("o/results.jsonl"), "precision");
    assert_eq!(modes, ["\"f32\"", "\"split\""]);
    let (code, out, err) = astroport(
        &[
            "maps",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--method",
            "split",
            "--prefix",
            "s",
            "--repeats",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("cpu split: grid"), "{out}");
}

#[test]
fn cubature_runs_and_refuses_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows");
    let (code, stdout, err) = astroport(
        &[
            "run",
            "cubature",
            "--method",
            "pagani,mcubes",
            "--integrand",
            "f5",
            "--dim",
            "5",
            "--epsrel",
            "1e-3",
            "--backend",
            "cpu",
            "--backend",
            "cuda:7",
            "--repeats",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{err}");
    assert!(
        stdout.contains("cubature pagani: 1 of 1 runs that claim convergence"),
        "{stdout}"
    );
    // One row file for every workload, one schema.
    let rows = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // cpu and the absent cuda:7 for each method.
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r["schema"] == "astroport.row/2"));
    let absent = rows.iter().find(|r| r["backend"] == "cuda:7").unwrap();
    assert_ne!(absent["status"], "ok");
    assert!(!absent["reason"].as_str().unwrap().is_empty());
    let ok = rows
        .iter()
        .find(|r| r["backend"] == "cpu" && r["details"]["method"] == "pagani")
        .unwrap();
    assert_eq!(ok["status"], "ok");
    assert_eq!(ok["details"]["stop"], "converged");
    assert_eq!(ok["preset"], "custom");
    assert!(ok["details"]["true_rel_error"].as_f64().unwrap() < 1e-3);
    assert!(ok["time_s"]["median"].as_f64().unwrap() > 0.0);
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("pagani f5 5D"));

    for (args, needle) in [
        (vec!["--dim", "1"], "--dim: 1 is outside 2..=15"),
        (vec!["--dim", "16"], "--dim: 16 is outside 2..=15"),
        (vec!["--epsrel", "2"], "--epsrel: 2 is not in (0, 1)"),
        (vec!["--epsrel", "x"], "--epsrel: 'x' is not valid"),
        (vec!["--integrand", "f9"], "unknown integrand 'f9'"),
        (vec!["--method", "vegas"], "unknown method 'vegas'"),
    ] {
        let mut all = vec!["run", "cubature", "--backend", "cpu"];
        all.extend(args);
        let (code, _, err) = astroport(&all, dir.path());
        assert_eq!(code, 2, "{all:?}: {err}");
        assert!(err.contains(needle), "{all:?}: {err}");
    }
}

/// Each workload takes its own flags only: a flag of another workload, a preset it does not have, a mode
/// it does not offer, or a preset together with a custom suite is refused with exit 2, naming the flag.
#[test]
fn inapplicable_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "lombscargle", "--top-k", "9"],
            "unexpected argument '--top-k'",
        ),
        (
            &["run", "lombscargle", "--halos", "h.csv"],
            "unexpected argument '--halos'",
        ),
        (
            &["run", "lombscargle", "--precision", "mixed"],
            "unknown precision 'mixed'",
        ),
        (
            &["run", "lombscargle", "--device-mem-mib", "4"],
            "unexpected argument '--device-mem-mib'",
        ),
        (
            &["run", "cubature", "--preset", "foo"],
            "[possible values: tiny, ci]",
        ),
        (
            &["run", "cubature", "--galaxy-sigma", "1,2"],
            "unexpected argument '--galaxy-sigma'",
        ),
        (
            &["run", "cubature", "--precision", "f32"],
            "unexpected argument '--precision'",
        ),
        (
            &["run", "cubature", "--preset", "tiny", "--dim", "3"],
            "cannot be used with",
        ),
        (
            &["run", "cubature", "--max-iterations", "0"],
            "--max-iterations",
        ),
        (
            &["run", "lens", "--integrand", "f4"],
            "unexpected argument '--integrand'",
        ),
        (
            &["run", "lens", "--model", "fixed"],
            "unexpected argument '--model'",
        ),
        (
            &["run", "lens-chi2", "--precision", "f32"],
            "unexpected argument '--precision'",
        ),
        (
            &["run", "lens", "--preset", "corot"],
            "[possible values: tiny, ci, hff]",
        ),
        (
            &["maps", "--prefix", "m", "--fap", "none"],
            "unexpected argument '--fap'",
        ),
        (
            &["bench", "--halos", "h.csv"],
            "unexpected argument '--halos'",
        ),
        (
            &["bench", "--precision", "mixed-budgt"],
            "no workload at preset 'ci' has the mode 'mixed-budgt'",
        ),
    ];
    for (args, want) in cases {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--backend", "cpu"]);
        let (code, out, err) = astroport(&all, dir.path());
        assert_eq!(code, 2, "{all:?} should exit 2; stdout {out} stderr {err}");
        assert!(err.contains(want), "{all:?}: stderr lacks '{want}':\n{err}");
    }
}

/// Runs sharing one `--out` folder never fail and never mix their lines: every process exits 0, every line
/// of results.jsonl is one whole row, report.md is whole, and no temporary file is left behind.
#[test]
fn concurrent_runs_share_an_output_folder() {
    let dir = tempfile::tempdir().unwrap();
    let runs = 20;
    let children: Vec<std::process::Child> = (0..runs)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_astroport"))
                .args([
                    "run",
                    "lens",
                    "--preset",
                    "tiny",
                    "--backend",
                    "cpu",
                    "--repeats",
                    "1",
                    "--warmup",
                    "0",
                    "--out",
                    "shared",
                ])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("binary starts")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let shared = dir.path().join("shared");
    let text = std::fs::read_to_string(shared.join("results.jsonl")).unwrap();
    assert_eq!(text.lines().count(), runs, "{text}");
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).expect("a whole row per line");
        assert_eq!(row["status"], "ok");
    }
    let report = std::fs::read_to_string(shared.join("report.md")).unwrap();
    assert!(
        report.starts_with("# ") && report.contains("## Details"),
        "{report}"
    );
    let leftovers: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// `--method auto` (a custom suite's default) picks PAGANI below 9 dimensions and m-Cubes from 9, and says so.
#[test]
fn cubature_auto_method_picks_by_dimension() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = astroport(
        &[
            "run",
            "cubature",
            "--integrand",
            "f5",
            "--dim",
            "3,9",
            "--epsrel",
            "1e-3",
            "--backend",
            "cpu",
            "--repeats",
            "1",
            "--out",
            "rows",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let sizes = row_values(&dir.path().join("rows/results.jsonl"), "size");
    assert_eq!(
        sizes,
        [
            "\"pagani (auto) f5 3D epsrel 1e-3\"",
            "\"mcubes (auto) f5 9D epsrel 1e-3\""
        ]
    );
}

/// An unavailable backend is said once, with its reason and the rows it stands for, however many precisions
/// and problems it misses (issue 18, a calm terminal): no progress line per row, one reason line.
#[test]
fn an_unavailable_backend_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = astroport(
        &[
            "run",
            "lens",
            "--preset",
            "tiny",
            "--precision",
            "f32,f64",
            "--backend",
            "cuda:7",
            "--backend",
            "cpu",
            "--repeats",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let all = format!("{out}\n{err}");
    let mentions: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("cuda:7") && !l.contains('│'))
        .collect();
    assert_eq!(mentions.len(), 1, "{mentions:#?}");
    assert!(all.contains("(2 rows)"), "{all}");
    // A calm terminal: nothing printed is wider than 120 columns (the full row is in JSON).
    for line in all.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

/// Rows reach results.jsonl as each run finishes: a run stopped after its first row keeps that row, and every
/// line of the file is a whole JSON record (issue 18, item 6).
#[test]
fn an_interrupted_run_keeps_the_rows_it_finished() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    // cpu f32 (about 0.3 s on 2 cores), then cpu f64 at ci (about 4 s): stopped in between.
    let mut child = Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args(["run", "lombscargle", "--preset", "ci", "--backend", "cpu"])
        .args(["--precision", "f32,f64", "--warmup", "0", "--repeats", "1"])
        .args(["--out", "out"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("binary runs");
    let results = dir.path().join("out/results.jsonl");
    let start = Instant::now();
    let lines = loop {
        let text = std::fs::read_to_string(&results).unwrap_or_default();
        if text.ends_with('\n') {
            break text;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no row written within 120 s"
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the run ended ({status}) before any row was written");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let finished = child.try_wait().unwrap().is_some();
    child.kill().ok();
    child.wait().unwrap();
    assert!(
        !finished,
        "the f64 run ended within one poll of the f32 row"
    );
    let text = std::fs::read_to_string(&results).unwrap();
    assert_eq!(text, lines, "a row appeared after the kill");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole JSON record"))
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0]["precision"], "f32", "{}", rows[0]);
    assert_eq!(rows[0]["status"], "ok", "{}", rows[0]);
    // Stopped before the end: the rows are there, the report (written at the end) is not.
    assert!(!dir.path().join("out/report.md").exists());
}

/// `--quiet` leaves stderr empty on success (the table and files are still written); `--verbose` adds the
/// reference's time and each row's error, spread and kernels; the two together are refused.
#[test]
fn quiet_and_verbose_change_only_what_stderr_says() {
    let dir = tempfile::tempdir().unwrap();
    let args = |extra: &'static str| {
        let mut a = vec![
            "run",
            "lombscargle",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--repeats",
            "1",
            "--out",
            "o",
        ];
        if !extra.is_empty() {
            a.insert(0, extra);
        }
        a
    };
    let (code, out, err) = astroport(&args("--quiet"), dir.path());
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    assert!(out.contains("lombscargle"), "{out}");
    assert!(dir.path().join("o/report.md").exists());
    let (code, _, normal) = astroport(&args(""), dir.path());
    assert_eq!(code, 0);
    assert!(normal.contains("-> cpu f32 lombscargle: ok"), "{normal}");
    assert!(!normal.contains("reference computed"), "{normal}");
    let (code, _, verbose) = astroport(&args("--verbose"), dir.path());
    assert_eq!(code, 0);
    assert!(verbose.contains("reference computed in"), "{verbose}");
    assert!(verbose.contains("max abs"), "{verbose}");
    let (code, _, err) = astroport(&["-q", "-v", "devices"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("cannot be used with"), "{err}");
    // Three runs appended three rows, each valid JSON.
    let rows = std::fs::read_to_string(dir.path().join("o/results.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 3);
    for l in rows.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
}
