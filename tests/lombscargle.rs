//! Lomb-Scargle: the f64 reference against astropy's exact float64 periodograms
//! (tests/data/lombscargle/ls_reference_vectors.json), the float32 CPU path against the reference,
//! top-k against a brute-force scan, and the generated CoRoT-like series against its injected period.

mod common;

use astroport::backend::Precision;
use astroport::exec::{Field, SinglePass};
use astroport::workload::lombscargle::{
    generate, top_k, FrequencyGrid, LightCurve, LombScargleProblem, LsMode, Output, SignalModel,
    TOL_F32, TOL_F64,
};
use astroport::workload::{Accuracy, Workload};
use serde_json::Value;

/// The accuracy of a result under the problem's own verification.
fn check(
    problem: &LombScargleProblem,
    result: &Field,
    reference: &Field,
    p: Precision,
) -> Accuracy {
    problem.verify(result, reference, p.into()).accuracy
}

fn oracle_problem(model: SignalModel, output: Output) -> (LombScargleProblem, Value) {
    let (o, curve, grid) = common::ls_oracle();
    (
        LombScargleProblem::new("oracle", vec![curve], vec![grid], model, output).unwrap(),
        o,
    )
}

#[test]
fn f64_reference_matches_astropy_to_1e_9() {
    for (model, key) in [
        (SignalModel::FloatingMean, "power_standard_floating"),
        (SignalModel::FixedMean, "power_standard_classic"),
    ] {
        let (problem, o) = oracle_problem(model, Output::Full);
        let want = common::floats(&o[key]);
        let got = problem.run_cpu(Precision::F64.into()).components[0].clone();
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst <= TOL_F64, "{key}: max |Δp| {worst:e} > {TOL_F64:e}");
        // The reference field used for verification is the same computation.
        let reference = problem.reference();
        let acc = check(
            &problem,
            &Field::new(vec![got.clone()]),
            &reference,
            Precision::F64,
        );
        assert!(acc.pass, "{key}: {acc:?}");
        // The peak is where astropy says.
        let k = o["peak"]["index"].as_u64().unwrap() as usize;
        if model == SignalModel::FloatingMean {
            assert_eq!(top_k(&got, 1)[0].0, k);
        }
    }
}

#[test]
fn f32_cpu_is_within_tolerance_and_a_wrong_answer_fails() {
    for model in [SignalModel::FloatingMean, SignalModel::FixedMean] {
        let (problem, _) = oracle_problem(model, Output::Full);
        let reference = problem.reference();
        let result = problem.run_cpu(Precision::F32.into());
        let acc = check(&problem, &result, &reference, Precision::F32);
        assert!(acc.pass && acc.max_abs <= TOL_F32, "{model:?}: {acc:?}");
        // A check that cannot fail is no check: perturb one bin and a poisoned (NaN) output.
        let mut bad = result.clone();
        bad.components[0][100] += 1e-4;
        assert!(!check(&problem, &bad, &reference, Precision::F32).pass);
        let mut poisoned = result.clone();
        poisoned.components[0][7] = f64::NAN;
        assert!(!check(&problem, &poisoned, &reference, Precision::F32).pass);
    }
}

#[test]
fn top_k_finds_local_maxima_in_order() {
    let p = [0.1, 0.5, 0.2, 0.9, 0.9, 0.3, 0.7, 0.8];
    // 0.9 at 3 (>= left, not > right) is no peak; 4 is (>= 3's 0.9 and > 0.3); ends count with one neighbour.
    assert_eq!(top_k(&p, 3), vec![(4, 0.9), (7, 0.8), (1, 0.5)]);
    assert_eq!(top_k(&p, 8).len(), 3);
}

#[test]
fn top_k_output_matches_full_periodogram_on_cpu() {
    let (full, _) = oracle_problem(SignalModel::FloatingMean, Output::Full);
    let (topk, _) = oracle_problem(SignalModel::FloatingMean, Output::TopK(5));
    let power = full.run_cpu(Precision::F64.into()).components[0].clone();
    let want = top_k(&power, 5);
    let got = topk.run_cpu(Precision::F64.into());
    for (r, (i, p)) in want.iter().enumerate() {
        assert_eq!(got.components[0][r], *i as f64);
        assert_eq!(got.components[1][r], *p);
    }
    let acc = check(&topk, &got, &topk.reference(), Precision::F64);
    assert!(acc.pass, "{acc:?}");
}

#[test]
fn given_grid_equals_uniform_grid() {
    let (uniform, o) = oracle_problem(SignalModel::FloatingMean, Output::Full);
    let grid = &uniform.grids[0];
    let given = FrequencyGrid::Given((0..grid.len()).map(|k| grid.frequency(k)).collect());
    let curve = uniform.curves[0].clone();
    let p = LombScargleProblem::new(
        "given",
        vec![curve],
        vec![given],
        SignalModel::FloatingMean,
        Output::Full,
    )
    .unwrap();
    let want = common::floats(&o["power_standard_floating"]);
    for precision in [Precision::F64, Precision::F32] {
        let got = p.run_cpu(precision.into()).components[0].clone();
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let tol = if precision == Precision::F64 {
            TOL_F64
        } else {
            TOL_F32
        };
        assert!(worst <= tol, "{precision:?}: {worst:e}");
    }
}

#[test]
fn ci_preset_finds_the_injected_period() {
    let problem = LombScargleProblem::preset("ci", SignalModel::FloatingMean).unwrap();
    let got = problem.run_cpu(Precision::F32.into()).components[0].clone();
    let (k, p) = top_k(&got, 1)[0];
    let f = problem.grids[0].frequency(k);
    let df = match problem.grids[0] {
        FrequencyGrid::Uniform { df, .. } => df,
        _ => unreachable!(),
    };
    assert!(
        (f - 1.0 / generate::COROT_PERIOD).abs() <= df,
        "peak at {f} /d, power {p}"
    );
}

#[test]
fn bad_inputs_are_refused_with_the_curve_named() {
    let c = LightCurve {
        name: "flat".into(),
        t: vec![0.0, 1.0, 2.0, 3.0],
        y: vec![1.0; 4],
        dy: None,
    };
    let g = FrequencyGrid::Uniform {
        f0: 0.1,
        df: 0.1,
        n: 10,
    };
    let e = LombScargleProblem::new(
        "x",
        vec![c.clone()],
        vec![g.clone()],
        SignalModel::FloatingMean,
        Output::Full,
    )
    .err()
    .unwrap();
    assert!(e.contains("flat") && e.contains("constant"), "{e}");
    // Three points fit the three parameters exactly: refused, as two.
    for n in [2, 3] {
        let mut few = c.clone();
        few.t.truncate(n);
        few.y = (0..n).map(|i| i as f64).collect();
        let e = LombScargleProblem::new(
            "x",
            vec![few],
            vec![g.clone()],
            SignalModel::FloatingMean,
            Output::Full,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!("{n} points")) && e.contains("at least 4"),
            "{e}"
        );
    }
    let mut ok = c;
    ok.y = vec![1.0, 2.0, 0.5, 1.5];
    let bad = FrequencyGrid::Given(vec![1.0, f64::NAN]);
    let e = LombScargleProblem::new(
        "x",
        vec![ok.clone()],
        vec![bad],
        SignalModel::FloatingMean,
        Output::Full,
    )
    .err()
    .unwrap();
    assert!(e.contains("index 1"), "{e}");
    // A given grid must increase: peaks are found between neighbours, so an unsorted grid would report
    // side lobes as peaks, and a repeated frequency the same peak twice.
    for (grid, index) in [(vec![0.1, 0.3, 0.2], 2), (vec![0.1, 0.2, 0.2], 2)] {
        let e = LombScargleProblem::new(
            "x",
            vec![ok.clone()],
            vec![FrequencyGrid::Given(grid)],
            SignalModel::FloatingMean,
            Output::Full,
        )
        .err()
        .unwrap();
        assert!(
            e.contains(&format!("index {index}")) && e.contains("increase"),
            "{e}"
        );
    }
    assert!(LombScargleProblem::new(
        "x",
        vec![ok],
        vec![g],
        SignalModel::FloatingMean,
        Output::TopK(9)
    )
    .is_err());
}

/// Every backend found, f32 and f64, on the oracle-size problem (full periodogram, both models) and on a
/// batch of curves with their own times, lengths and grids (one uniform grid with a partial last block, one
/// given grid), full and top-k. The bench driver verifies each row against the f64 reference.
#[test]
fn every_backend_agrees_on_single_and_batched_problems() {
    use astroport::backend::{discover, Choice};
    use astroport::bench;
    use astroport::exec::RunOptions;
    use astroport::results::Status;
    let (curves, _) = generate::survey(5, 7);
    let mut grids: Vec<FrequencyGrid> = curves
        .iter()
        .enumerate()
        .map(|(i, _)| FrequencyGrid::Uniform {
            f0: 0.01,
            df: 0.004,
            n: 2000 + 37 * i,
        })
        .collect();
    grids[2] = FrequencyGrid::Given(
        (0..700)
            .map(|k| 0.05 + 0.011 * k as f64 + 1e-4 * (k % 7) as f64)
            .collect(),
    );
    let mut problems: Vec<LombScargleProblem> = Vec::new();
    for model in [SignalModel::FloatingMean, SignalModel::FixedMean] {
        problems.push(oracle_problem(model, Output::Full).0);
    }
    for output in [Output::Full, Output::TopK(4)] {
        problems.push(
            LombScargleProblem::new(
                "batch",
                curves.clone(),
                grids.clone(),
                SignalModel::FloatingMean,
                output,
            )
            .unwrap(),
        );
    }
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    for problem in &problems {
        let rows = bench::run(
            problem,
            &Precision::ALL.map(LsMode::from),
            &choices,
            &RunOptions::once(),
            &mut |_| {},
        );
        assert_eq!(rows.len(), 2 * d.targets.len());
        for r in &rows {
            assert_eq!(
                r.status,
                Status::Ok,
                "{} {} {}: {}",
                problem.describe(),
                r.backend,
                r.precision,
                r.reason
            );
            let a = r.accuracy.as_ref().unwrap();
            let tol = if r.precision == "f64" {
                TOL_F64
            } else {
                TOL_F32
            };
            assert!(
                a.pass && a.max_abs <= tol && a.non_finite == 0,
                "{} {}: {a:?}",
                r.backend,
                r.precision
            );
        }
        let names = astroport::backend::Precision::ALL.map(|p| p.name());
        common::assert_ran_in_each_mode(&common::devices(&d), &rows, &names);
        eprintln!("{}", astroport::report::terminal(&rows));
    }
}

/// Small bands split curves into pieces on the device; the host merges their top-k. Every backend, with
/// 40 curves over bands of 1,024 frequencies: the split curves are among the checked ones, and every band's
/// first curve too.
#[test]
fn curves_split_across_bands_are_merged_and_checked() {
    use astroport::backend::{discover, Choice};
    use astroport::bench;
    use astroport::exec::RunOptions;
    let (curves, _) = generate::survey(40, 11);
    let grids: Vec<FrequencyGrid> = (0..curves.len())
        .map(|i| FrequencyGrid::Uniform {
            f0: 0.01,
            df: 0.003,
            n: 1500 + 97 * i,
        })
        .collect();
    let problem = LombScargleProblem::new(
        "split",
        curves,
        grids,
        SignalModel::FloatingMean,
        Output::TopK(3),
    )
    .unwrap()
    .with_band_limit(1024);
    assert!(problem.band_count() > 40, "{} bands", problem.band_count());
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    let rows = bench::run(
        &problem,
        &[Precision::F32, Precision::F64].map(LsMode::from),
        &choices,
        &RunOptions::once(),
        &mut |_| {},
    );
    for r in &rows {
        assert_eq!(
            r.status,
            astroport::results::Status::Ok,
            "{} {}: {}",
            r.backend,
            r.precision,
            r.reason
        );
        let details = r.details.as_ref().unwrap();
        // Every curve is split here (each grid is longer than a band), so every one is checked.
        assert_eq!(details["checked_curves"], 40, "{details}");
        assert_eq!(details["peak_index_mismatches"], 0);
    }
    common::assert_ran(&common::devices(&d), &common::ran_ok(&rows));
}

/// An unwritten top-k rank comes back as the poison (index −1, power NaN), which fails verification; the
/// legal "fewer peaks than k" is (−1, −1).
#[test]
fn an_unwritten_peak_rank_fails_verification() {
    use astroport::backend::HostVec;
    use astroport::workload::Workload;
    let (problem, _) = oracle_problem(SignalModel::FloatingMean, Output::TopK(2));
    let reference = problem.reference();
    let (ri, rp) = (&reference.components[0], &reference.components[1]);
    let legal = problem.assemble(
        Precision::F32.into(),
        vec![vec![
            HostVec::I32(vec![ri[0] as i32, ri[1] as i32]),
            HostVec::F32(vec![rp[0] as f32, rp[1] as f32]),
        ]],
    );
    assert!(
        problem
            .verify(&legal, &reference, Precision::F32.into())
            .accuracy
            .pass
    );
    let poisoned = problem.assemble(
        Precision::F32.into(),
        vec![vec![
            HostVec::I32(vec![ri[0] as i32, -1]),
            HostVec::F32(vec![rp[0] as f32, f32::NAN]),
        ]],
    );
    let v = problem.verify(&poisoned, &reference, Precision::F32.into());
    assert!(
        !v.accuracy.pass && v.accuracy.non_finite > 0,
        "{:?}",
        v.accuracy
    );
}
