//! Lens modes beyond the plain gradient, on every backend found: dPIE halos, the mixed-precision schemes
//! (with the paper's error budget), the image-plane χ² (same images as the f64 reference), and input
//! validation of halo catalogues.

mod common;

use astroport::backend::{discover, Choice};
use astroport::bench;
use astroport::exec::RunOptions;
use astroport::results::{Row, Status};
use astroport::workload::lens::mock::{mock_systems, MockOptions};
use astroport::workload::lens::{
    chi2, HaloProfile, Halos, LensMode, LensOptions, LensProblem, Preset, TOL_F32_ABS,
};
use astroport::workload::Workload;

/// Every mode on every backend found; fails unless every device ran and passed in every mode.
fn run_all(problem: &LensProblem, modes: Vec<LensMode>) -> Vec<Row> {
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    let rows = bench::run(problem, &modes, &choices, &RunOptions::once(), &mut |_| {});
    let names: Vec<&str> = modes
        .iter()
        .map(|m| astroport::exec::Mode::name(*m))
        .collect();
    common::assert_ran_in_each_mode(&common::devices(&d), &rows, &names);
    rows
}

/// A number of a row's `details`.
fn detail(r: &Row, key: &str) -> Option<f64> {
    r.details.as_ref()?.get(key)?.as_f64()
}

fn assert_all_ok(rows: &[Row]) {
    for r in rows {
        assert_eq!(
            r.status,
            Status::Ok,
            "{} {}: {}",
            r.backend,
            r.precision,
            r.reason
        );
    }
}

/// A catalogue mixing SIE and dPIE halos gives the same grid on every backend as the f64 reference.
#[test]
fn mixed_catalogue_with_dpie_agrees_everywhere() {
    let base = LensProblem::preset(Preset::Tiny, &LensOptions::default()).unwrap();
    let mut halos: Halos = base.halos.clone();
    halos.push_dpie(10.0, -5.0, 15.0, 0.2, 0.7, 1.5, 150.0);
    halos.push_dpie(-30.0, 20.0, 1.0, 1e-5, 0.0, 0.1, 20.0); // circular limit
    let p = LensProblem::new("tiny+dpie", base.n, base.pixel, base.cosmology, halos).unwrap();
    assert!(p.describe().contains("2 dPIE"));
    let rows = run_all(&p, vec![LensMode::F32, LensMode::F64]);
    assert_all_ok(&rows);
    for r in &rows {
        let a = r.accuracy.as_ref().unwrap();
        let bound = if r.precision == "f32" { 1e-4 } else { 1e-10 };
        assert!(
            a.max_rel < bound,
            "{} {} dPIE max_rel {:e}",
            r.backend,
            r.precision,
            a.max_rel
        );
    }
}

/// The dPIE preset (`--profile dpie`), plus two halos whose foci fall 1e-4″ from a pixel centre (where the
/// textbook form cancels to 0/0 and float32 used to lose 4e-4″), on every backend: float32 within the SIE
/// tolerance of 1e-4″, float64 within 1e-10 relative, and the error-budget scheme within its budget.
#[test]
fn dpie_preset_and_focus_pixels_on_every_backend() {
    let opts = LensOptions {
        profile: HaloProfile::Dpie,
        ..Default::default()
    };
    let base = LensProblem::preset(Preset::Tiny, &opts).unwrap();
    let mut halos: Halos = base.halos.clone();
    let (i, j) = (70, 120);
    for (eps, r_cut, pick) in [(0.2, 150.0, 1.0), (0.04, 60.0, -1.0)] {
        // theta = 0: the cut radius's focus is at (x0, y0 + 2 r_cut sqrt(eps)).
        let focus = 2.0 * r_cut * f64::sqrt(eps);
        let x0 = base.coord(i) + pick * 1e-4;
        let y0 = base.coord(j) - focus + 1e-4;
        halos.push_dpie(x0, y0, 15.0, eps, 0.0, 1.5, r_cut);
    }
    let p = LensProblem::new("tiny dpie+foci", base.n, base.pixel, base.cosmology, halos).unwrap();
    assert!(p.describe().contains("34 dPIE"), "{}", p.describe());
    let rows = run_all(&p, vec![LensMode::F32, LensMode::F64, LensMode::BUDGET]);
    assert_all_ok(&rows);
    for r in rows.iter().filter(|r| r.precision == "f32") {
        let a = r.accuracy.as_ref().unwrap();
        assert_eq!(a.tolerance_abs, TOL_F32_ABS, "{}", r.backend);
    }
}

/// The hardware floor counts each halo at its own profile's cost: 10 FP32-pipe instructions per SIE
/// interaction (18 in float64), 80 per dPIE one, averaged over the catalogue.
#[test]
fn floor_counts_each_profile() {
    let sie = LensProblem::preset(Preset::Tiny, &LensOptions::default()).unwrap();
    assert_eq!(sie.pipe_instructions(LensMode::F32), Some(10.0));
    assert_eq!(sie.pipe_instructions(LensMode::F64), Some(18.0));
    let dpie_opts = LensOptions {
        profile: HaloProfile::Dpie,
        ..Default::default()
    };
    let dpie = LensProblem::preset(Preset::Tiny, &dpie_opts).unwrap();
    assert_eq!(dpie.pipe_instructions(LensMode::F32), Some(80.0));
    assert_eq!(dpie.pipe_instructions(LensMode::BUDGET), Some(80.0));
    let mut halos: Halos = sie.halos.clone();
    let n = halos.len() as f64 + 2.0;
    halos.push_dpie(1.0, 2.0, 15.0, 0.2, 0.0, 1.5, 150.0);
    halos.push_dpie(-1.0, 2.0, 15.0, 0.04, 0.0, 1.5, 60.0);
    let mixed =
        LensProblem::new("tiny sie+2 dpie", sie.n, sie.pixel, sie.cosmology, halos).unwrap();
    let want = (10.0 * (n - 2.0) + 80.0 * 2.0) / n;
    let got = mixed.pipe_instructions(LensMode::F32).unwrap();
    assert!((got - want).abs() < 1e-12, "{got} != {want}");
}

/// Every mixed scheme passes on every backend: f32 tolerance, no pixel over the paper's budget, and a
/// recomputed fraction reported; the device flags the same pixels as the cpu (same fraction).
#[test]
fn mixed_precision_on_every_backend() {
    let p = LensProblem::preset(Preset::Tiny, &LensOptions::default()).unwrap();
    let rows = run_all(&p, LensMode::MIXED.to_vec());
    assert_all_ok(&rows);
    for mode in ["mixed", "mixed-patches", "mixed-paper"] {
        let fractions: Vec<f64> = rows
            .iter()
            .filter(|r| r.precision == mode)
            .map(|r| {
                let get = |k: &str| detail(r, k);
                assert_eq!(get("pixels_over_budget"), Some(0.0), "{} {mode}", r.backend);
                get("recomputed_fraction").expect("fraction reported")
            })
            .collect();
        assert!(
            fractions.iter().all(|f| *f > 0.0 && *f < 1.0),
            "{mode}: {fractions:?}"
        );
        let spread = fractions.iter().cloned().fold(0.0, f64::max)
            - fractions.iter().cloned().fold(1.0, f64::min);
        assert!(
            spread < 0.01,
            "{mode}: backends flag different amounts {fractions:?}"
        );
    }
}

/// The error-budget scheme at `ci` on every backend: plain float32 is over the paper's budget at some
/// pixels near the critical lines (so the check can fail), the budget scheme recomputes under 1 % of
/// the pixels and leaves none over budget, and every backend flags the same amount as the cpu.
#[test]
fn budget_scheme_recomputes_only_what_the_budget_needs() {
    let p = LensProblem::preset(Preset::Ci, &LensOptions::default()).unwrap();
    let m = p.budget_magnification();
    assert!(m > 100.0 && m.is_finite(), "flag magnification {m}");
    let rows = run_all(&p, vec![LensMode::F32, LensMode::BUDGET]);
    assert_all_ok(&rows);
    let get = detail;
    let mut fractions = vec![];
    for r in &rows {
        let over = get(r, "pixels_over_budget").expect("budget checked");
        if r.precision == "f32" {
            assert!(
                over > 0.0,
                "{}: plain f32 within budget everywhere",
                r.backend
            );
        } else {
            assert_eq!(over, 0.0, "{} mixed-budget", r.backend);
            let f = get(r, "recomputed_fraction").expect("fraction reported");
            assert!(f > 0.0 && f < 0.01, "{}: fraction {f}", r.backend);
            fractions.push(f);
        }
    }
    let (lo, hi) = fractions
        .iter()
        .fold((1.0f64, 0.0f64), |(lo, hi), f| (lo.min(*f), hi.max(*f)));
    assert!(
        hi - lo < 1e-4,
        "backends flag different amounts {fractions:?}"
    );
}

/// χ² on every device backend finds the same images as the f64 cpu delensing, and χ² at the true model
/// is at the pixel level (every image matched within 1.5 px).
#[test]
fn chi2_same_images_on_every_backend() {
    let p = LensProblem::preset(Preset::Ci, &LensOptions::default()).unwrap();
    let systems = mock_systems(&p, &MockOptions::default()).unwrap();
    assert!(systems.len() >= 20);
    let reference = p.reference();
    let (c_ref, pred_ref) = chi2::chi2_of_grid(
        &p,
        &reference.components[0],
        &reference.components[1],
        &systems,
    );
    assert_eq!(c_ref.n_missing, 0);
    let pixel_level = systems
        .iter()
        .map(|s| {
            s.images
                .iter()
                .map(|i| (1.5 * p.pixel / i.sigma).powi(2))
                .sum::<f64>()
        })
        .sum::<f64>();
    assert!(
        c_ref.chi2 <= pixel_level,
        "χ² {} above the pixel level {pixel_level}",
        c_ref.chi2
    );
    let d = discover();
    let mut ran = Vec::new();
    for t in &d.targets {
        let r = chi2::evaluate(&p, &systems, t, LensMode::BUDGET, &RunOptions::once())
            .unwrap_or_else(|e| panic!("{}: {e}", t.id()))
            .output;
        let shift = chi2::worst_shift(&pred_ref, &r.predicted);
        assert!(
            shift <= 1.5 * p.pixel,
            "{}: images shifted by {shift}″",
            t.id()
        );
        assert_eq!(r.chi2.n_missing, 0, "{}", t.id());
        ran.push(t.id());
    }
    common::assert_ran(&common::devices(&d), &ran);
}

/// The χ² check can fail: images predicted two pixels away from the reference's fail verification, the
/// reference itself passes.
#[test]
fn chi2_verification_fails_shifted_images() {
    let p = LensProblem::preset(Preset::Tiny, &LensOptions::default()).unwrap();
    let systems = mock_systems(&p, &MockOptions::default()).unwrap();
    let pixel = p.pixel;
    let problem = chi2::Chi2Problem::new(p, systems).unwrap();
    let reference = problem.reference();
    assert!(
        reference.predicted.iter().any(|s| !s.is_empty()),
        "no predicted image"
    );
    let same = problem.verify(&reference, &reference, LensMode::BUDGET);
    assert!(same.accuracy.pass && same.accuracy.max_abs == 0.0);
    let mut shifted = reference.clone();
    for images in &mut shifted.predicted {
        for image in images.iter_mut() {
            image.0 += 2.0 * pixel;
        }
    }
    let moved = problem.verify(&shifted, &reference, LensMode::BUDGET);
    assert!(!moved.accuracy.pass, "{:?}", moved.accuracy);
    assert!(moved.failure.unwrap().contains("worst shift"));
}

/// A malformed catalogue is refused with a message naming file, line, column and value (exit 2).
#[test]
fn bad_halo_catalogue_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halos.csv");
    std::fs::write(
        &path,
        "id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg\nA,sie,0,0,900,1.2,0\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args([
            "run",
            "lens",
            "--preset",
            "tiny",
            "--backend",
            "cpu",
            "--halos",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("halos.csv")
            && err.contains("line 2")
            && err.contains("ellipticity")
            && err.contains("1.2"),
        "{err}"
    );
}
