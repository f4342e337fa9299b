//! The f64 reference against independent oracles: mpmath 50-digit SIE gradients and the distance ratio
//! from tests/data/lens/sie_vectors.json, plus analytic limits.

use astroport::workload::lens::{b0_arcsec, gradient_at, Cosmology, Halos, LensProblem};
use astroport::workload::Workload;
use serde_json::Value;

fn oracle() -> Value {
    astroport::oracle::vectors("lens/sie_vectors.json")
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse().unwrap_or_else(|_| panic!("not a number: {s}")),
        Value::Number(n) => n.as_f64().unwrap(),
        other => panic!("not a number: {other}"),
    }
}

fn oracle_halos(o: &Value) -> Halos {
    let mut h = Halos::default();
    for halo in o["sie"]["halos"].as_array().unwrap() {
        h.push(
            num(&halo["x0"]),
            num(&halo["y0"]),
            num(&halo["b_arcsec"]),
            num(&halo["e_pot"]),
            num(&halo["theta_rad"]),
        );
    }
    h
}

#[test]
fn distance_ratio_matches_mpmath() {
    let o = oracle();
    let want = num(&o["cosmology"]["Dls_over_Ds"]);
    let got = Cosmology::default().dls_over_ds();
    assert!(
        ((got - want) / want).abs() < 1e-12,
        "D_LS/D_S {got} vs oracle {want}"
    );
}

#[test]
fn strength_from_sigma_matches_mpmath() {
    let o = oracle();
    for halo in o["sie"]["halos"].as_array().unwrap() {
        let want = num(&halo["b0_no_ratio_arcsec_exact"]);
        let got = b0_arcsec(num(&halo["sigma_v_kms"]));
        assert!(((got - want) / want).abs() < 1e-14, "b0 {got} vs {want}");
    }
}

#[test]
fn reference_gradient_matches_oracle_to_1e_12() {
    let o = oracle();
    let halos = oracle_halos(&o);
    let points = o["sie"]["points"].as_array().unwrap();
    assert!(points.len() > 500, "oracle has {} points", points.len());
    let mut worst = 0.0f64;
    for p in points {
        let p = p.as_array().unwrap();
        let (x, y, gx, gy) = (num(&p[0]), num(&p[1]), num(&p[2]), num(&p[3]));
        let (ax, ay) = gradient_at(&halos, x, y);
        let rel = ((ax - gx).hypot(ay - gy)) / gx.hypot(gy);
        worst = worst.max(rel);
        assert!(
            rel <= 1e-12,
            "point ({x}, {y}) [{}]: got ({ax}, {ay}) want ({gx}, {gy}), rel {rel:e}",
            p[4]
        );
    }
    eprintln!("worst relative error of the f64 reference against mpmath: {worst:e}");
}

#[test]
fn per_halo_contributions_match_oracle() {
    let o = oracle();
    let halos = oracle_halos(&o);
    let points = o["sie"]["points"].as_array().unwrap();
    for (i, per) in o["sie"]["per_halo_first40"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let p = points[i].as_array().unwrap();
        let (x, y) = (num(&p[0]), num(&p[1]));
        for (k, g) in per.as_array().unwrap().iter().enumerate() {
            let mut one = Halos::default();
            one.push(
                halos.x0[k],
                halos.y0[k],
                halos.b[k],
                halos.e[k],
                halos.theta[k],
            );
            let (ax, ay) = gradient_at(&one, x, y);
            let (gx, gy) = (num(&g[0]), num(&g[1]));
            assert!(
                (ax - gx).hypot(ay - gy) <= 1e-12 * gx.hypot(gy),
                "point {i} halo {k}"
            );
        }
    }
}

/// The grid code (quadratic form, exact offsets, the form every kernel uses) against the textbook form
/// that the oracle validates, with the oracle's halos (rotated, elliptical, near-centre pixels included).
#[test]
fn grid_code_matches_textbook_form() {
    let o = oracle();
    let halos = oracle_halos(&o);
    let problem = LensProblem::new("oracle", 97, 2.1, Cosmology::default(), halos.clone()).unwrap();
    let grid = problem.reference();
    let mut worst = 0.0f64;
    for j in (0..problem.n).step_by(3) {
        for i in 0..problem.n {
            let (ax, ay) = gradient_at(&problem.halos, problem.coord(i), problem.coord(j));
            let (gx, gy) = (
                grid.components[0][j * problem.n + i],
                grid.components[1][j * problem.n + i],
            );
            let rel = (ax - gx).hypot(ay - gy) / ax.hypot(ay);
            worst = worst.max(rel);
        }
    }
    assert!(worst <= 1e-12, "grid vs textbook worst rel {worst:e}");
}

/// Analytic check: a circular SIS has |∇ψ| = b everywhere, pointing away from the centre.
#[test]
fn circular_sis_has_constant_deflection() {
    let mut h = Halos::default();
    h.push(0.3, -0.7, 1.7, 0.0, 0.4);
    for (x, y) in [(5.0, 1.0), (-3.0, 2.5), (0.30001, -0.7), (100.0, -90.0)] {
        let (gx, gy) = gradient_at(&h, x, y);
        assert!((gx.hypot(gy) - 1.7).abs() < 1e-13);
        let (dx, dy) = (x - 0.3, y + 0.7);
        assert!(
            (gx * dy - gy * dx).abs() < 1e-12 * dx.hypot(dy) * 1.7,
            "radial"
        );
    }
}

/// The host's launch geometry and table layout agree with the kernels' shared header.
#[test]
fn host_constants_match_the_kernel_header() {
    use astroport::workload::lens::{DPIE_STRIDE, PIXELS_PER_ITEM, ROWS_PER_ITEM, SIE_STRIDE};
    let header = include_str!("../cl/common/lens_model.h");
    for want in [
        format!("#define LENS_PIXELS_PER_ITEM_f32 {}", PIXELS_PER_ITEM[0]),
        format!("#define LENS_PIXELS_PER_ITEM_f64 {}", PIXELS_PER_ITEM[1]),
        format!("#define LENS_ROWS_PER_ITEM_f32 {}", ROWS_PER_ITEM[0]),
        format!("#define LENS_ROWS_PER_ITEM_f64 {}", ROWS_PER_ITEM[1]),
        format!("#define LENS_SIE_STRIDE {SIE_STRIDE}"),
        format!("#define LENS_DPIE_STRIDE {DPIE_STRIDE}"),
    ] {
        assert!(
            header.contains(&want),
            "cl/common/lens_model.h must contain '{want}'"
        );
    }
}

fn dpie_oracle_halos(o: &Value) -> Halos {
    let mut h = Halos::default();
    for halo in o["dpie"]["halos"].as_array().unwrap() {
        h.push_dpie(
            num(&halo["x0"]),
            num(&halo["y0"]),
            num(&halo["b_arcsec"]),
            num(&halo["e_pot"]),
            num(&halo["theta_rad"]),
            num(&halo["rcore_arcsec"]),
            num(&halo["rcut_arcsec"]),
        );
    }
    h
}

/// dPIE (LENSTOOL type 81): the f64 reference matches the mpmath oracle, and the strength and ε
/// conversions reproduce the oracle's inputs from σ_LT and the mass ellipticity.
#[test]
fn dpie_reference_matches_mpmath() {
    use astroport::workload::lens::{b0_dpie_arcsec, dpie_eps_from_mass};
    let o = oracle();
    let halos = dpie_oracle_halos(&o);
    let ratio = Cosmology::default().dls_over_ds();
    for halo in o["dpie"]["halos"].as_array().unwrap() {
        let b = b0_dpie_arcsec(num(&halo["sigma_LT_kms"])) * ratio;
        let want = num(&halo["b_arcsec"]);
        assert!(((b - want) / want).abs() < 1e-13, "b {b} vs {want}");
        let eps = dpie_eps_from_mass(num(&halo["e_mass"]));
        assert!((eps - num(&halo["e_pot"])).abs() < 1e-15, "eps {eps}");
    }
    let mut worst = 0.0f64;
    for p in o["dpie"]["points"].as_array().unwrap() {
        let (x, y, gx, gy) = (num(&p[0]), num(&p[1]), num(&p[2]), num(&p[3]));
        let (ax, ay) = gradient_at(&halos, x, y);
        let rel = ((ax - gx).hypot(ay - gy)) / gx.hypot(gy);
        worst = worst.max(rel);
    }
    assert!(worst < 1e-12, "dPIE worst relative error {worst:e}");
}

/// dPIE where float arithmetic cancels (tests/data/lens/dpie_focus_vectors.json, mpmath at 50 digits): near
/// both foci of both radii down to 1e-6″, far along ±v, and over the field, for ε on both sides of the
/// small-ε switch. Float64 within 1e-12 relative; float32 within the error estimate that the mixed-precision
/// budget uses (`F32_ERROR_ULPS_DPIE` unit roundoffs of the scale b·r_cut/(r_cut − r_core)). The textbook
/// form the kernels used before failed both: 1e-6″ in float64 and up to 4e-4″ in float32 on a pixel grid.
#[test]
fn dpie_near_foci_matches_mpmath() {
    use astroport::workload::lens::{dpie_deflection, F32_ERROR_ULPS_DPIE};
    let o = astroport::oracle::vectors("lens/dpie_focus_vectors.json");
    let unit = f64::from(f32::EPSILON) / 2.0;
    let (mut worst64, mut worst32_ulps, mut points) = (0.0f64, 0.0f64, 0);
    for halo in o["halos"].as_array().unwrap() {
        let (eps, rc, rcut, scale) = (
            num(&halo["eps"]),
            num(&halo["r_core"]),
            num(&halo["r_cut"]),
            num(&halo["scale"]),
        );
        for p in halo["points"].as_array().unwrap() {
            let (u, v, gu, gv) = (num(&p[0]), num(&p[1]), num(&p[2]), num(&p[3]));
            let g64: (f64, f64) = dpie_deflection(u, v, 1.0, 0.0, eps, scale, rc, rcut);
            worst64 = worst64.max((g64.0 - gu).hypot(g64.1 - gv) / gu.hypot(gv));
            let f = |x: f64| x as f32;
            let g32: (f32, f32) =
                dpie_deflection(f(u), f(v), 1.0, 0.0, f(eps), f(scale), f(rc), f(rcut));
            let err32 = (f64::from(g32.0) - gu).hypot(f64::from(g32.1) - gv);
            worst32_ulps = worst32_ulps.max(err32 / (unit * scale));
            points += 1;
        }
    }
    eprintln!(
        "dpie focus: {points} points, f64 worst rel {worst64:e}, f32 worst {worst32_ulps:.2} ulps"
    );
    assert!(points > 500, "only {points} points read");
    assert!(
        worst64 < 1e-12,
        "dPIE float64 worst relative error {worst64:e}"
    );
    assert!(
        worst32_ulps <= F32_ERROR_ULPS_DPIE,
        "dPIE float32 worst error {worst32_ulps:.1} unit roundoffs of the scale (estimate {F32_ERROR_ULPS_DPIE})"
    );
}

/// The circular dPIE limit (used below ε = 2e-4) meets the elliptical formula continuously.
#[test]
fn dpie_circular_limit_is_continuous() {
    use astroport::workload::lens::dpie_deflection;
    for (u, v) in [(3.0f64, 4.0f64), (0.2, -0.1), (40.0, 70.0)] {
        let circ: (f64, f64) = dpie_deflection(u, v, 1.0, 0.0, 1e-4, 10.0, 0.5, 50.0);
        let ell: (f64, f64) = dpie_deflection(u, v, 1.0, 0.0, 3e-4, 10.0, 0.5, 50.0);
        let rel = (circ.0 - ell.0).hypot(circ.1 - ell.1) / circ.0.hypot(circ.1);
        assert!(
            rel < 1e-3,
            "({u},{v}): circular vs ε=3e-4 differ by {rel:e}"
        );
    }
}
