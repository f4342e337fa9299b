//! The difference image and its variance: the `cpu` reference against a direct evaluation of the formula at
//! chosen pixels (edges and corners included); every backend found against the reference in float32 (1e-6
//! relative to R ⊗ K, the tolerance) and float64, on one band and cut into several bands by a small
//! memory cap.

mod common;

use astroport::backend::{discover, Choice, Precision};
use astroport::bench;
use astroport::exec::RunOptions;
use astroport::results::Status;
use astroport::workload::imgsub::difference::{DifferenceProblem, HALF};
use astroport::workload::imgsub::field::{generate, FieldSpec};
use astroport::workload::Workload;

/// The reference at 40 pixels against the plain sum Σ_uv K(u, v) R(x − u, y − v), with the kernel formed
/// term by term (Σ_m p_m Kbar_m, not the Horner form the backends use) and R = 0 outside the image.
#[test]
fn the_reference_is_the_convolution_it_says() {
    let spec = FieldSpec::new(128, 5).unwrap();
    let problem = DifferenceProblem::new("t", spec.clone());
    let field = generate(&spec);
    let reference = problem.reference();
    let n = spec.size;
    let (r, vr) = (&field.reference.data, &field.reference.variance);
    let (sci, vsci) = (&field.science.data, &field.science.variance);
    let mut pixels = vec![(0, 0), (127, 127), (0, 127), (127, 0), (5, 64), (64, 122)];
    for k in 0..34 {
        pixels.push(((k * 37 + 11) % n, (k * 53 + 7) % n));
    }
    for (x, y) in pixels {
        let (xh, yh) = (
            2.0 * x as f64 / (n - 1) as f64 - 1.0,
            2.0 * y as f64 / (n - 1) as f64 - 1.0,
        );
        let p = [1.0, xh, yh, xh * xh, xh * yh, yh * yh];
        let (mut c, mut w) = (0.0, 0.0);
        for v in -(HALF as i64)..=HALF as i64 {
            for u in -(HALF as i64)..=HALF as i64 {
                let (xx, yy) = (x as i64 - u, y as i64 - v);
                if xx < 0 || yy < 0 || xx >= n as i64 || yy >= n as i64 {
                    continue;
                }
                let t = ((v + HALF as i64) * 21 + (u + HALF as i64)) as usize;
                let k: f64 = (0..6).map(|m| p[m] * problem.kernel.kbar[t * 6 + m]).sum();
                let at = yy as usize * n + xx as usize;
                c += k * r[at] as f64;
                w += k * k * vr[at] as f64;
            }
        }
        let at = y * n + x;
        let (d, var) = (sci[at] as f64 - c, vsci[at] as f64 + w);
        let got = (reference.components[0][at], reference.components[1][at]);
        assert!(
            (got.0 - d).abs() <= 1e-12 * c.abs(),
            "D at ({x}, {y}): {} against {d}",
            got.0
        );
        assert!((got.1 - var).abs() <= 1e-12 * var, "VD at ({x}, {y})");
    }
}

#[test]
fn every_backend_matches_the_reference_on_one_band_and_on_many() {
    let mut banded = DifferenceProblem::preset("tiny", 20_110_101).unwrap();
    // A 1 MiB cap leaves bands of about 100 rows (float32) or 40 (float64) of the 256.
    banded.device_mem_cap = Some(1 << 20);
    banded.preset = "banded".into();
    let problems = [
        DifferenceProblem::preset("tiny", 20_110_101).unwrap(),
        banded,
    ];
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    for problem in &problems {
        let rows = bench::run(
            problem,
            &[Precision::F32, Precision::F64],
            &choices,
            &RunOptions::once(),
            &mut |_| {},
        );
        for r in &rows {
            assert_eq!(
                r.status,
                Status::Ok,
                "{} {}: {}",
                problem.preset,
                r.backend,
                r.reason
            );
            let a = r.accuracy.as_ref().unwrap();
            let tol = if r.precision == "f32" { 1e-6 } else { 1e-12 };
            assert!(
                a.pass && a.max_rel <= tol,
                "{} {}: {a:?}",
                r.backend,
                r.precision
            );
            if problem.preset == "banded" && r.model != "cpu" {
                let bands = r.launch.as_ref().unwrap().bands;
                assert!(
                    bands >= 3,
                    "{}: {bands} band(s) under a 1 MiB cap",
                    r.backend
                );
            }
        }
        common::assert_ran_in_each_mode(&common::devices(&d), &rows, &["f32", "f64"]);
        eprintln!("{}", astroport::report::terminal(&rows));
    }
}
