//! The difference image and its variance: the `cpu` reference against a direct evaluation of the formula at
//! chosen pixels (edges and corners included); every backend found against the reference in float32 (1e-6
//! relative to D's operands, the image subtracted from and R ⊗ K: the tolerance) and float64, on one
//! band and cut into several bands by a small memory cap; the verdict failing a D off by more.

mod common;

use astroport::backend::{discover, Choice, Precision};
use astroport::bench;
use astroport::exec::RunOptions;
use astroport::results::Status;
use astroport::workload::imgsub::difference::{
    difference_error_scale, DifferenceProblem, VaryingKernel, HALF,
};
use astroport::workload::imgsub::field::{generate, FieldSpec};
use astroport::workload::Workload;

/// A problem on a non-square crop of a generated field, with a background plane and (tile > 0) the kernel
/// held constant over tiles.
fn cropped(nx: usize, ny: usize, tile: usize) -> (DifferenceProblem, [Vec<f32>; 4]) {
    let spec = FieldSpec::new(256, 5).unwrap();
    let field = generate(&spec);
    let crop = |v: &[f32]| -> Vec<f32> {
        (0..ny)
            .flat_map(|y| v[y * 256..y * 256 + nx].to_vec())
            .collect()
    };
    let images = [
        crop(&field.reference.data),
        crop(&field.reference.variance),
        crop(&field.science.data),
        crop(&field.science.variance),
    ];
    let mut kernel = VaryingKernel::gaussian_match(&spec);
    kernel.background = [300.0, 12.0, -7.0];
    let problem = DifferenceProblem::from_images("crop", nx, ny, images.clone(), kernel, tile);
    (problem, images)
}

/// The reference at 40 pixels against the plain sum Σ_uv K(u, v) R(x − u, y − v) + B, with the kernel formed
/// term by term (Σ_m p_m Kbar_m, not the Horner form the backends use) at the pixel or at its tile's centre,
/// and R = 0 outside the image: on a square field, a non-square crop, and with tiles of 21 and 16 pixels.
#[test]
fn the_reference_is_the_convolution_it_says() {
    for (nx, ny, tile) in [(256, 256, 0), (200, 150, 0), (200, 150, 21), (131, 97, 16)] {
        let (problem, [r, vr, sci, vsci]) = cropped(nx, ny, tile);
        let reference = problem.reference();
        let place = |x: usize, n: usize| {
            x.checked_div(tile)
                .map_or(x, |t| (t * tile + tile / 2).min(n - 1))
        };
        let mut pixels = vec![
            (0, 0),
            (nx - 1, ny - 1),
            (0, ny - 1),
            (nx - 1, 0),
            (5, ny / 2),
            (nx / 2, ny - 3),
        ];
        for k in 0..34 {
            pixels.push(((k * 37 + 11) % nx, (k * 53 + 7) % ny));
        }
        for (x, y) in pixels {
            let (xh, yh) = (
                2.0 * place(x, nx) as f64 / (nx - 1) as f64 - 1.0,
                2.0 * place(y, ny) as f64 / (ny - 1) as f64 - 1.0,
            );
            let p = [1.0, xh, yh, xh * xh, xh * yh, yh * yh];
            let (mut c, mut w) = (0.0, 0.0);
            for v in -(HALF as i64)..=HALF as i64 {
                for u in -(HALF as i64)..=HALF as i64 {
                    let (xx, yy) = (x as i64 - u, y as i64 - v);
                    if xx < 0 || yy < 0 || xx >= nx as i64 || yy >= ny as i64 {
                        continue;
                    }
                    let t = ((v + HALF as i64) * 21 + (u + HALF as i64)) as usize;
                    let k: f64 = (0..6).map(|m| p[m] * problem.kernel.kbar[t * 6 + m]).sum();
                    let at = yy as usize * nx + xx as usize;
                    c += k * r[at] as f64;
                    w += k * k * vr[at] as f64;
                }
            }
            let bg = problem.kernel.background;
            let b = bg[0] + bg[1] * xh + bg[2] * yh;
            let at = y * nx + x;
            let (d, var) = (sci[at] as f64 - c - b, vsci[at] as f64 + w);
            let got = (reference.components[0][at], reference.components[1][at]);
            assert!(
                (got.0 - d).abs() <= 1e-12 * (c + b).abs(),
                "{nx}x{ny} tile {tile}: D at ({x}, {y}): {} against {d}",
                got.0
            );
            assert!(
                (got.1 - var).abs() <= 1e-12 * var,
                "{nx}x{ny} tile {tile}: VD at ({x}, {y})"
            );
        }
    }
}

#[test]
fn every_backend_matches_the_reference_on_one_band_and_on_many() {
    let mut banded = DifferenceProblem::preset("tiny", 20_110_101).unwrap();
    // A 1 MiB cap leaves bands of about 100 rows (float32) or 40 (float64) of the 256.
    banded.device_mem_cap = Some(1 << 20);
    banded.preset = "banded".into();
    // A non-square crop with a background and tiles of 21 px, cut into bands as well.
    let mut tiled = cropped(200, 150, 21).0;
    tiled.device_mem_cap = Some(1 << 19);
    tiled.preset = "tiled".into();
    let problems = [
        DifferenceProblem::preset("tiny", 20_110_101).unwrap(),
        banded,
        tiled,
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
            if problem.preset != "tiny" && r.model != "cpu" {
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

/// The verdict judges D relative to its two operands (`difference_error_scale`: the image subtracted from and
/// R ⊗ K): a copy of the float64 reference with one pixel's D moved by 2e-6 of that scale fails float32's
/// 1e-6, by 0.5e-6 passes; a pixel where D is many times R ⊗ K shows the unjudged error over R ⊗ K alone
/// larger than the judged one.
#[test]
fn the_verdict_judges_the_difference_against_its_operands() {
    let (problem, [_, _, sci, _]) = cropped(200, 150, 0);
    let reference = problem.reference();
    let d = &reference.components[0];
    // The pixel where D is largest against R ⊗ K (a source of the science image alone, or the brightest).
    let k = (0..d.len())
        .max_by(|&a, &b| {
            let ratio = |p: usize| d[p].abs() / (sci[p] as f64 - d[p]).abs().max(1.0);
            ratio(a).total_cmp(&ratio(b))
        })
        .unwrap();
    let convolved = sci[k] as f64 - d[k];
    assert!(
        d[k].abs() > 2.0 * convolved.abs(),
        "D {} against R ⊗ K {convolved} at the chosen pixel",
        d[k]
    );
    let scale = difference_error_scale(sci[k] as f64, convolved);
    for (moved, passes) in [(2e-6, false), (0.5e-6, true)] {
        let mut result = reference.clone();
        result.components[0][k] += moved * scale;
        let verdict = problem.verify(&result, &reference, Precision::F32);
        assert_eq!(
            verdict.accuracy.pass, passes,
            "D moved by {moved} of its operands"
        );
        let details = &verdict.details;
        assert!((details.max_rel_difference - moved).abs() < 1e-3 * moved);
        assert!(details.max_rel_difference_of_convolved > details.max_rel_difference);
    }
}
