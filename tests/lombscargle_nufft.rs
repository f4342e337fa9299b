//! Lomb-Scargle by NUFFT (`--method nufft`): against astropy's exact periodograms
//! (tests/data/lombscargle/ls_reference_vectors.json) and against the direct float64 sums on grids and
//! series the presets do not have (offset f0, odd lengths, grids wider than 1/T per step, unsorted times,
//! grids shorter than the kernel), at tolerances from 1e-4 to 1e-12; batches with top-k peaks; the
//! tolerance is the row's contract; a given grid is refused with the reason.

mod common;

use astroport::backend::Precision;
use astroport::exec::{Field, SinglePass};
use astroport::workload::lombscargle::{
    generate, FrequencyGrid, LightCurve, LombScargleProblem, LsMode, Output, SignalModel,
};
use astroport::workload::Workload;
use rand::{Rng, SeedableRng};

/// Largest |nufft − direct f64| over every frequency of every curve.
fn worst_against_direct(problem: &LombScargleProblem) -> f64 {
    let got = problem.run_cpu(LsMode::NUFFT).components[0].clone();
    let want = problem.run_cpu(Precision::F64.into()).components[0].clone();
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(&want)
        .map(|(a, b)| {
            if a.is_finite() {
                (a - b).abs()
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}

#[test]
fn nufft_matches_astropy_exact_to_1e_9() {
    let (o, curve, grid) = common::ls_oracle();
    for (model, key) in [
        (SignalModel::FloatingMean, "power_standard_floating"),
        (SignalModel::FixedMean, "power_standard_classic"),
    ] {
        let problem = LombScargleProblem::new(
            "oracle",
            vec![curve.clone()],
            vec![grid.clone()],
            model,
            Output::Full,
        )
        .unwrap();
        let want = common::floats(&o[key]);
        let got = problem.run_cpu(LsMode::NUFFT).components[0].clone();
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst <= 1e-9, "{key}: max |Δp| {worst:e}");
        let verdict = problem.verify(&Field::new(vec![got]), &problem.reference(), LsMode::NUFFT);
        assert!(verdict.accuracy.pass, "{key}: {:?}", verdict.accuracy);
        assert_eq!(verdict.accuracy.tolerance_abs, 1e-9);
    }
}

/// Series and grids unlike the presets': random times (unsorted for one curve), errors, f0 off the df
/// lattice, odd and tiny grid lengths, and steps df larger than 1/T (the positions wrap the fine grid).
fn awkward_problem(model: SignalModel, seed: u64) -> LombScargleProblem {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let mut curves = Vec::new();
    let mut grids = Vec::new();
    for (c, (points, span, f0, df, n)) in [
        (250, 40.0, 0.013, 0.0071, 1001),
        (90, 3.0, 0.5, 0.61, 333), // df T ≈ 1.8
        (700, 900.0, 1e-4, 2.7e-4, 4096),
        (33, 10.0, 0.2, 0.05, 5), // fewer modes than kernel cells
        (400, 12.5, 7.0, 0.003, 2000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut t: Vec<f64> = (0..points).map(|_| rng.random::<f64>() * span).collect();
        if c != 4 {
            t.sort_by(f64::total_cmp);
        }
        let y = t
            .iter()
            .map(|&t| (t * 2.3).sin() + 0.3 * rng.random::<f64>())
            .collect();
        let dy = (c % 2 == 0).then(|| (0..points).map(|_| 0.1 + rng.random::<f64>()).collect());
        curves.push(LightCurve {
            name: format!("awkward{c}"),
            t,
            y,
            dy,
        });
        grids.push(FrequencyGrid::Uniform { f0, df, n });
    }
    LombScargleProblem::new("awkward", curves, grids, model, Output::Full).unwrap()
}

#[test]
fn nufft_meets_each_tolerance_on_awkward_grids() {
    for model in [SignalModel::FloatingMean, SignalModel::FixedMean] {
        for (seed, tolerance) in [(1, 1e-4), (2, 1e-7), (3, 1e-9), (4, 1e-10), (5, 1e-12)] {
            let problem = awkward_problem(model, seed)
                .with_tolerance(tolerance)
                .unwrap();
            let worst = worst_against_direct(&problem);
            assert!(
                worst <= tolerance,
                "{model:?} tolerance {tolerance:e}: max |Δp| {worst:e}"
            );
        }
    }
}

/// The tolerance is a contract, not decoration: a loose one is measurably looser, and the row is judged
/// by it.
#[test]
fn tolerance_sets_the_accuracy_and_the_verdict() {
    let loose = awkward_problem(SignalModel::FloatingMean, 9)
        .with_tolerance(1e-3)
        .unwrap();
    let tight = awkward_problem(SignalModel::FloatingMean, 9);
    let (e_loose, e_tight) = (worst_against_direct(&loose), worst_against_direct(&tight));
    assert!(e_loose > 100.0 * e_tight, "{e_loose:e} vs {e_tight:e}");
    let result = loose.run_cpu(LsMode::NUFFT);
    let reference = loose.reference();
    let verdict = loose.verify(&result, &reference, LsMode::NUFFT);
    assert!(verdict.accuracy.pass && verdict.accuracy.tolerance_abs == 1e-3);
    // The same output judged under 1e-9 fails; a poisoned bin fails under any tolerance.
    let strict = tight.verify(&result, &reference, LsMode::NUFFT);
    assert!(!strict.accuracy.pass, "{:?}", strict.accuracy);
    let mut poisoned = result.clone();
    poisoned.components[0][17] = f64::NAN;
    assert!(
        !loose
            .verify(&poisoned, &reference, LsMode::NUFFT)
            .accuracy
            .pass
    );
    for bad in [0.0, -1e-9, 1.0, f64::NAN] {
        let e = awkward_problem(SignalModel::FloatingMean, 9)
            .with_tolerance(bad)
            .err()
            .unwrap_or_else(|| panic!("tolerance {bad} accepted"));
        assert!(e.contains("--tolerance"), "{e}");
    }
}

/// A survey batch (many short curves, one long grid, top-5 peaks): the peaks by NUFFT are the direct f64
/// peaks, checked by the workload's own verification (peak frequencies and powers).
#[test]
fn survey_batch_peaks_match_the_direct_sums() {
    let problem = LombScargleProblem::preset("survey-small", SignalModel::FloatingMean).unwrap();
    assert!(problem.all_modes().contains(&LsMode::NUFFT));
    let result = problem.run_cpu(LsMode::NUFFT);
    let verdict = problem.verify(&result, &problem.reference(), LsMode::NUFFT);
    assert!(verdict.accuracy.pass, "{:?}", verdict.accuracy);
    assert_eq!(verdict.details.peak_index_mismatches, Some(0));
    assert!(verdict.failure.is_none());
}

/// A given (non-uniform) grid has no NUFFT: the mode is not offered, a run says why, and `auto` picks the
/// direct sums with that reason.
#[test]
fn a_given_grid_is_refused_with_the_reason() {
    let t: Vec<f64> = (0..200).map(|i| i as f64 * 0.37).collect();
    let y: Vec<f64> = t.iter().map(|t| (t * 1.7).sin()).collect();
    let curve = LightCurve {
        name: "given".into(),
        t,
        y,
        dy: None,
    };
    let grid = FrequencyGrid::Given(vec![0.1, 0.2, 0.35, 0.5]);
    let problem = LombScargleProblem::new(
        "given",
        vec![curve],
        vec![grid],
        SignalModel::FloatingMean,
        Output::Full,
    )
    .unwrap();
    assert!(!problem.all_modes().contains(&LsMode::NUFFT));
    let cpu = astroport::backend::open("cpu").unwrap();
    let e = problem
        .execute(&cpu, LsMode::NUFFT, &astroport::exec::RunOptions::once())
        .map(|_| ())
        .expect_err("a given grid cannot run by NUFFT");
    assert!(e.to_string().contains("non-uniform"), "{e}");
    let (mode, why) = problem.auto_mode(Precision::F64, false);
    assert_eq!(mode, LsMode::direct(Precision::F64));
    assert!(why.contains("non-uniform"), "{why}");
}

/// `auto` follows the cost model: the NUFFT for a long series on a long grid, the direct sums for a handful
/// of frequencies.
#[test]
fn auto_picks_by_predicted_cost() {
    let long = LombScargleProblem::preset("ci", SignalModel::FloatingMean).unwrap();
    assert_eq!(long.auto_mode(Precision::F32, false).0, LsMode::NUFFT);
    let curve = generate::corot_like(300, 5);
    let short = LombScargleProblem::new(
        "short",
        vec![curve],
        vec![FrequencyGrid::Uniform {
            f0: 5.0,
            df: 0.001,
            n: 8,
        }],
        SignalModel::FloatingMean,
        Output::Full,
    )
    .unwrap();
    let (mode, why) = short.auto_mode(Precision::F32, false);
    assert_eq!(mode, LsMode::direct(Precision::F32), "{why}");
    // On a device (H200 constants): many short curves stay direct, one long series goes to the NUFFT.
    let survey = LombScargleProblem::preset("survey-small", SignalModel::FloatingMean).unwrap();
    let (mode, why) = survey.auto_mode(Precision::F32, true);
    assert_eq!(mode, LsMode::direct(Precision::F32), "{why}");
    assert!(why.contains("on a device"), "{why}");
    assert_eq!(long.auto_mode(Precision::F32, true).0, LsMode::NUFFT);
}

/// The device NUFFT (cl/common/ls_nufft.h) on every backend found, against the direct float64 reference:
/// both models on the awkward grids (wrapping positions, tiny and odd grids, unsorted times), a tolerance
/// of 1e-6, and a top-k batch. Every row must be ok; required backends must have run.
#[test]
fn device_nufft_matches_the_reference_on_every_backend() {
    use astroport::backend::{discover, Choice};
    use astroport::bench;
    use astroport::exec::RunOptions;
    use astroport::results::Status;
    let mut problems = vec![
        awkward_problem(SignalModel::FloatingMean, 21),
        awkward_problem(SignalModel::FixedMean, 22),
        awkward_problem(SignalModel::FloatingMean, 23)
            .with_tolerance(1e-6)
            .unwrap(),
    ];
    let (curves, grid) = generate::survey(6, 8);
    let grids = vec![grid; curves.len()];
    problems.push(
        LombScargleProblem::new(
            "batch",
            curves,
            grids,
            SignalModel::FloatingMean,
            Output::TopK(3),
        )
        .unwrap(),
    );
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    for problem in &problems {
        let rows = bench::run(
            problem,
            &[LsMode::NUFFT],
            &choices,
            &RunOptions::once(),
            &mut |_| {},
        );
        assert_eq!(rows.len(), d.targets.len());
        for r in &rows {
            assert_eq!(
                r.status,
                Status::Ok,
                "{} {}: {}",
                problem.describe(),
                r.backend,
                r.reason
            );
            let a = r.accuracy.as_ref().unwrap();
            assert!(
                a.pass && a.max_abs <= problem.tolerance,
                "{}: {a:?}",
                r.backend
            );
            // Every model says how many bins it summed directly (the device returns its count).
            let details = r.details.as_ref().expect("details");
            assert!(
                details["nufft_direct_bins"].as_u64().is_some(),
                "{}: {details}",
                r.backend
            );
        }
        common::assert_ran(&common::devices(&d), &common::ran_ok(&rows));
    }
}

/// The library object: `LombScargle::power` by NUFFT agrees with the direct sums, in every normalisation's
/// input (standard power), on the `cpu` backend; a bad tolerance is refused by `power`.
#[test]
fn the_library_object_takes_the_method() {
    use astroport::workload::lombscargle::args::MethodArg;
    use astroport::workload::lombscargle::LombScargle;
    let curve = generate::corot_like(3000, 9);
    let ls = LombScargle::from_curve(curve).unwrap();
    let grid = ls.autofrequency(8.0, 1.0).unwrap();
    let cpu = astroport::backend::open("cpu").unwrap();
    let direct = ls
        .clone()
        .method(MethodArg::Direct)
        .power(&grid, &cpu, Precision::F64)
        .unwrap();
    let nufft = ls
        .clone()
        .method(MethodArg::Nufft)
        .power(&grid, &cpu, Precision::F64)
        .unwrap();
    let worst = direct
        .iter()
        .zip(&nufft)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(worst <= 1e-9, "max |Δp| {worst:e}");
    let e = ls
        .method(MethodArg::Nufft)
        .tolerance(0.0)
        .power(&grid, &cpu, Precision::F64)
        .unwrap_err();
    assert!(e.contains("--tolerance"), "{e}");
}
