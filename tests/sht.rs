//! The spherical-harmonic reference (the `cpu` model, float64) against independent oracles:
//! healpy 1.20.1 / ducc0 0.42 maps and coefficients and mpmath's 40-digit λ_lm (tests/data/sht/, made by
//! make_vectors.py and converted by npz_to_json.py), and exact round trips on Gauss-Legendre grids.

mod common;

use astroport::oracle;
use astroport::workload::sht::legendre::lambda_lm;
use astroport::workload::sht::{alm2map, map2alm, rel_l2, Alm, RingGrid};
use realfft::num_complex::Complex64;
use serde_json::Value;

fn data() -> Value {
    oracle::vectors("sht/sht_vectors.json")
}

fn floats(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(floats).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("expected numbers, got {other}"),
    }
}

fn alm_from(v: &Value, lmax: usize) -> Alm {
    let flat = floats(v);
    let mut alm = Alm::zeros(lmax, lmax);
    assert_eq!(flat.len(), 2 * alm.coeffs.len());
    for (c, pair) in alm.coeffs.iter_mut().zip(flat.chunks(2)) {
        *c = Complex64::new(pair[0], pair[1]);
    }
    alm
}

#[test]
fn healpix_geometry_matches_healpy() {
    let d = data();
    let g = RingGrid::healpix(32).unwrap();
    let theta = floats(&d["hp32_ring_theta"]);
    let nphi = floats(&d["hp32_ring_nphi"]);
    let phi0 = floats(&d["hp32_ring_phi0"]);
    let start = floats(&d["hp32_ring_start"]);
    assert_eq!(g.rings.len(), theta.len());
    for (i, r) in g.rings.iter().enumerate() {
        assert!(
            (r.theta - theta[i]).abs() < 1e-14,
            "ring {i}: {} {}",
            r.theta,
            theta[i]
        );
        assert_eq!(r.nphi as f64, nphi[i], "ring {i}");
        assert!(
            (r.phi0 - phi0[i]).abs() < 1e-15,
            "ring {i}: {} {}",
            r.phi0,
            phi0[i]
        );
        assert_eq!(r.offset as f64, start[i], "ring {i}");
    }
}

#[test]
fn healpix_synthesis_and_analysis_match_healpy() {
    let d = data();
    let lmax = 64;
    let g = RingGrid::healpix(32).unwrap();
    let alm = alm_from(&d["hp32_alm_in"], lmax);
    let map = alm2map(&g, &alm).unwrap();
    let want_map = floats(&d["hp32_map"]);
    let err = common::max_rel(&map, &want_map);
    eprintln!("HEALPix nside 32 alm2map against healpy: {err:.2e}");
    assert!(err <= 1e-12, "alm2map: {err:.2e}");
    // Analysis of the oracle's own map, so that each check sees one transform's error only.
    for (iter, key) in [(0, "hp32_alm_iter0"), (3, "hp32_alm_iter3")] {
        let got = map2alm(&g, &want_map, lmax, lmax, iter).unwrap().to_flat();
        let want = alm_from(&d[key], lmax).to_flat();
        let err = common::max_rel(&got, &want);
        eprintln!("HEALPix nside 32 map2alm iter {iter} against healpy: {err:.2e}");
        assert!(err <= 1e-12, "map2alm iter {iter}: {err:.2e}");
    }
}

#[test]
fn gauss_legendre_matches_ducc0_and_is_exact() {
    let d = data();
    let lmax = 31;
    let g = RingGrid::gauss_legendre(32, 64).unwrap();
    let theta = floats(&d["gl_theta"]);
    let weight = floats(&d["gl_weight_ring"]);
    for (i, r) in g.rings.iter().enumerate() {
        assert!((r.theta - theta[i]).abs() < 1e-14, "ring {i}");
        let ring_weight = r.weight * r.nphi as f64;
        assert!(
            (ring_weight - weight[i]).abs() < 1e-14 * weight[i],
            "ring {i}: {ring_weight} {}",
            weight[i]
        );
    }
    let alm = alm_from(&d["gl_alm_in"], lmax);
    let map = alm2map(&g, &alm).unwrap();
    let err = common::max_rel(&map, &floats(&d["gl_map"]));
    eprintln!("GL lmax 31 alm2map against ducc0: {err:.2e}");
    assert!(err <= 1e-12, "alm2map: {err:.2e}");
    let back = map2alm(&g, &map, lmax, lmax, 0).unwrap().to_flat();
    let err = common::max_rel(&back, &alm_from(&d["gl_alm_analysis"], lmax).to_flat());
    assert!(err <= 1e-12, "map2alm against ducc0: {err:.2e}");
    let round_trip = rel_l2(&back, &alm.to_flat());
    eprintln!("GL lmax 31 map2alm against ducc0: {err:.2e}; round trip {round_trip:.2e}");
    assert!(round_trip <= 1e-13, "round trip {round_trip:.2e}");
}

/// 22 values of λ_lm up to l = 8192 against mpmath, 8 of them starting from a λ_mm below 1e-308: every one
/// to 1e-10 relative, including those below double range (the extended exponent is kept to the end).
#[test]
fn legendre_spot_values_match_mpmath_to_l_8192() {
    let d = data();
    let (ls, ms, thetas) = (
        floats(&d["ylm_l"]),
        floats(&d["ylm_m"]),
        floats(&d["ylm_theta"]),
    );
    let (log10abs, signs) = (floats(&d["ylm_log10abs"]), floats(&d["ylm_sign"]));
    let underflowing_starts = floats(&d["ylm_log10abs_lambda_mm"])
        .iter()
        .filter(|v| **v < -308.0)
        .count();
    assert_eq!(underflowing_starts, 8);
    for i in 0..ls.len() {
        let (l, m) = (ls[i] as usize, ms[i] as usize);
        let (v, k) = lambda_lm(l, m, thetas[i]);
        assert!(v != 0.0, "case {i}: l {l} m {m} gave 0");
        let log10 = v.abs().log10() - 600.0 * k as f64 * std::f64::consts::LOG10_2;
        // |Δ log10| ≤ 1e-10 / ln 10 is a relative error ≤ 1e-10.
        let rel = (log10 - log10abs[i]).abs() * std::f64::consts::LN_10;
        eprintln!(
            "lambda l {l} m {m} theta {}: relative error {rel:.2e}",
            thetas[i]
        );
        assert!(
            rel <= 1e-10,
            "case {i}: l {l} m {m}: relative error {rel:.2e}"
        );
        assert_eq!(v.signum(), signs[i], "case {i}: sign");
    }
}

/// Beyond the oracle's sizes: a Gauss-Legendre round trip at lmax 511 (exact quadrature), and HEALPix
/// maps of another nside agreeing with a Gauss-Legendre synthesis of the same coefficients ring by ring.
#[test]
fn round_trips_beyond_the_oracle() {
    let lmax = 511;
    let g = RingGrid::gauss_legendre(lmax + 1, 2 * lmax + 2).unwrap();
    let alm = Alm::random(lmax, lmax, 7);
    let map = alm2map(&g, &alm).unwrap();
    let back = map2alm(&g, &map, lmax, lmax, 0).unwrap();
    let err = rel_l2(&back.to_flat(), &alm.to_flat());
    eprintln!("GL lmax {lmax} round trip: {err:.2e}");
    assert!(err <= 1e-12, "GL lmax {lmax} round trip {err:.2e}");

    // A band-limited map evaluated on any ring depends only on (θ, φ): the HEALPix equator ring of nside 16
    // equals the same ring given as a one-ring grid.
    let lmax = 40;
    let alm = Alm::random(lmax, lmax, 3);
    let hp = RingGrid::healpix(16).unwrap();
    let full = alm2map(&hp, &alm).unwrap();
    let eq = hp.rings[2 * 16 - 1].clone();
    let one = RingGrid::from_rings(vec![astroport::workload::sht::Ring {
        offset: 0,
        ..eq.clone()
    }])
    .unwrap();
    let ring = alm2map(&one, &alm).unwrap();
    let err = common::max_rel(&ring, &full[eq.offset..eq.offset + eq.nphi]);
    assert!(err <= 1e-13, "equator ring: {err:.2e}");
}

/// Inputs the transforms cannot use are refused with what is wrong, not a panic.
#[test]
fn bad_inputs_are_refused_by_name() {
    let g = RingGrid::healpix(4).unwrap();
    let alm = Alm::random(8, 8, 1);
    let short = vec![0.0; g.npix - 1];
    let err = map2alm(&g, &short, 8, 8, 0).unwrap_err();
    assert!(err.contains("191 pixels") && err.contains("192"), "{err}");
    let mut map = alm2map(&g, &alm).unwrap();
    map[17] = f64::NAN;
    let err = map2alm(&g, &map, 8, 8, 3).unwrap_err();
    assert!(err.contains("pixel 17"), "{err}");
    map[17] = astroport::workload::sht::cpu::HEALPIX_UNSEEN;
    assert!(map2alm(&g, &map, 8, 8, 0).unwrap_err().contains("UNSEEN"));
    let err = map2alm(&g, &vec![0.0; g.npix], 8, 9, 0).unwrap_err();
    assert!(err.contains("mmax 9 is above lmax 8"), "{err}");
    let mut bad = alm.clone();
    bad.coeffs.pop();
    let err = alm2map(&g, &bad).unwrap_err();
    assert!(
        err.contains("44 coefficients") && err.contains("need 45"),
        "{err}"
    );
    let err = RingGrid::healpix(0).unwrap_err();
    assert!(err.contains("nside 0"), "{err}");
}

/// Every device against the `cpu` reference (1e-12 relative; outputs poisoned, so a kernel that writes
/// nothing fails): the oracle's size in both directions and with healpy's iterations, scalar and spin 2, a Gauss-Legendre grid
/// (odd ring count: an equator ring without a mirror), and a run cut into bands of m by a small memory cap.
#[test]
fn every_backend_matches_the_cpu_reference() {
    use astroport::backend::{discover, Choice, Precision};
    use astroport::bench;
    use astroport::exec::RunOptions;
    use astroport::results::Status;
    use astroport::workload::sht::{ShtProblem, Transform};
    use astroport::workload::Workload;
    let mut problems = vec![
        ShtProblem::preset("tiny", Transform::Alm2Map).unwrap(),
        ShtProblem::preset("tiny", Transform::Map2Alm { iter: 2 }).unwrap(),
        ShtProblem::preset("tiny", Transform::Alm2Map)
            .unwrap()
            .spin2()
            .unwrap(),
        ShtProblem::preset("tiny", Transform::Map2Alm { iter: 1 })
            .unwrap()
            .spin2()
            .unwrap(),
    ];
    let gl = RingGrid::gauss_legendre(97, 194).unwrap();
    for transform in [Transform::Alm2Map, Transform::Map2Alm { iter: 0 }] {
        problems.push(ShtProblem::new("gl96", gl.clone(), 96, transform).unwrap());
    }
    for transform in [Transform::Alm2Map, Transform::Map2Alm { iter: 0 }] {
        let mut p =
            ShtProblem::new("banded", RingGrid::healpix(24).unwrap(), 70, transform).unwrap();
        p.device_mem_cap = Some(64 << 10);
        problems.push(p);
    }
    let d = discover();
    let choices: Vec<Choice> = d.targets.iter().map(Choice::Run).collect();
    for problem in &problems {
        let rows = bench::run(
            problem,
            &[Precision::F64],
            &choices,
            &RunOptions::once(),
            &mut |_| {},
        );
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
            assert!(a.pass && a.max_rel <= 1e-12, "{}: {a:?}", r.backend);
            if problem.preset == "banded" && r.model != "cpu" {
                let bands = r.launch.as_ref().unwrap().bands;
                assert!(
                    bands > 2,
                    "{}: {bands} band(s) under a 64 KiB cap",
                    r.backend
                );
            }
            // Where the whole transform fits in one job the ring FFTs run on the device; cut into bands, on
            // the host. The row's steps say which.
            if r.model != "cpu" {
                let names: Vec<&str> = r.steps.iter().map(|s| s.name.as_str()).collect();
                let on_device = names.iter().any(|n| n.starts_with("sht_ring_"));
                let on_host = names.iter().any(|n| n.contains("(host, realfft)"));
                assert_eq!(
                    (on_device, on_host),
                    (problem.preset != "banded", problem.preset == "banded"),
                    "{} {}: steps {names:?}",
                    problem.describe(),
                    r.backend
                );
            }
        }
        common::assert_ran_in_each_mode(&common::devices(&d), &rows, &["f64"]);
        eprintln!("{}", astroport::report::terminal(&rows));
    }
}

/// The device ring stage on ring lengths beyond HEALPix's: odd, prime (Bluestein's chirp-z where the direct
/// DFT would cost more), one pixel, and a ring shorter than mmax (aliasing); synthesis and analysis against
/// the `cpu` model (realfft) on a ring list.
#[test]
fn device_ring_stage_takes_any_ring_length() {
    use astroport::backend::{discover, Target};
    use astroport::exec::RunOptions;
    use astroport::workload::sht::device::{fft_work_length, DeviceSht};
    use astroport::workload::sht::Ring;
    let lengths = [1usize, 2, 3, 5, 7, 9, 15, 61, 97, 194, 243, 251, 508, 1000];
    assert!(
        lengths.iter().any(|&n| fft_work_length(n) > n),
        "no Bluestein length"
    );
    let mut offset = 0;
    let rings: Vec<Ring> = lengths
        .iter()
        .enumerate()
        .map(|(k, &nphi)| {
            let theta = 0.05 + 3.0 * k as f64 / lengths.len() as f64;
            let ring = Ring {
                theta,
                cos: 0.0,
                sin: 0.0,
                nphi,
                phi0: 0.3 * k as f64,
                offset,
                weight: 1.0 / nphi as f64,
            };
            offset += nphi;
            ring
        })
        .collect();
    let grid = RingGrid::from_rings(rings).unwrap();
    let (lmax, mmax) = (60, 60);
    let alm = Alm::random(lmax, mmax, 41);
    let want_map = alm2map(&grid, &alm).unwrap();
    let want_adjoint = map2alm(&grid, &want_map, lmax, mmax, 0).unwrap();
    let d = discover();
    let mut ran = Vec::new();
    for t in &d.targets {
        let Target::Device(dev) = t else { continue };
        // Uncapped, all rings go in one launch; a 512 KiB cap cuts them into batches of 64 KiB of work area.
        for cap in [None, Some(512 << 10)] {
            let mut sht = DeviceSht::new(dev.as_ref(), &grid, &RunOptions::once())
                .unwrap()
                .with_memory_cap(cap);
            let batches = sht.ring_batches().unwrap();
            assert_eq!(batches > 2, cap.is_some(), "{}: {batches} batches", t.id());
            let map = sht.alm2map(&alm).unwrap();
            let adjoint = sht.adjoint(&want_map, lmax, mmax).unwrap();
            let steps: Vec<String> = sht.measured(()).steps.into_iter().map(|s| s.name).collect();
            assert!(
                steps.iter().any(|s| s == "sht_ring_synthesis_f64")
                    && steps.iter().any(|s| s == "sht_ring_analysis_f64"),
                "{}: {steps:?}",
                t.id()
            );
            let errs = [
                common::max_rel(&map, &want_map),
                common::max_rel(&adjoint.to_flat(), &want_adjoint.to_flat()),
            ];
            eprintln!(
                "{} ring list, {batches} batch(es) (map, adjoint): {errs:?}",
                t.id()
            );
            assert!(errs.iter().all(|&e| e <= 1e-12), "{}: {errs:?}", t.id());
        }
        ran.push(t.id());
    }
    common::assert_ran(&common::devices(&d), &ran);
}

/// The device transforms as a library, with mmax below lmax (the coefficient layout's other shape).
#[test]
fn device_transforms_take_mmax_below_lmax() {
    use astroport::backend::{discover, Target};
    use astroport::exec::RunOptions;
    use astroport::workload::sht::device::DeviceSht;
    let grid = RingGrid::healpix(16).unwrap();
    let (lmax, mmax) = (40, 25);
    let alm = Alm::random(lmax, mmax, 11);
    let want_map = alm2map(&grid, &alm).unwrap();
    let want_alm = map2alm(&grid, &want_map, lmax, mmax, 1).unwrap();
    let d = discover();
    let mut ran = Vec::new();
    for t in &d.targets {
        let Target::Device(dev) = t else { continue };
        let mut sht = DeviceSht::new(dev.as_ref(), &grid, &RunOptions::once()).unwrap();
        let map = sht.alm2map(&alm).unwrap();
        assert!(common::max_rel(&map, &want_map) <= 1e-12, "{}: map", t.id());
        let back = sht.map2alm(&want_map, lmax, mmax, 1).unwrap();
        assert!(
            common::max_rel(&back.to_flat(), &want_alm.to_flat()) <= 1e-12,
            "{}: a_lm",
            t.id()
        );
        ran.push(t.id());
    }
    common::assert_ran(&common::devices(&d), &ran);
}

/// Spin-2 (polarisation) against healpy: E, B → Q, U synthesis and iter 0 / 3 analysis of healpy's own maps,
/// at nside 8, lmax 16 (the oracle's T/E/B case; T goes through the scalar transform).
#[test]
fn spin2_matches_healpy() {
    use astroport::workload::sht::{alm2map_spin2, map2alm_spin2};
    let d = data();
    let lmax = 16;
    let g = RingGrid::healpix(8).unwrap();
    let teb = d["hp8p_alm_teb_in"].as_array().unwrap();
    let (t, e, b) = (
        alm_from(&teb[0], lmax),
        alm_from(&teb[1], lmax),
        alm_from(&teb[2], lmax),
    );
    let maps = d["hp8p_map_tqu"].as_array().unwrap();
    let (want_t, want_q, want_u) = (floats(&maps[0]), floats(&maps[1]), floats(&maps[2]));
    let (q, u) = alm2map_spin2(&g, &e, &b).unwrap();
    let err_t = common::max_rel(&alm2map(&g, &t).unwrap(), &want_t);
    let (err_q, err_u) = (common::max_rel(&q, &want_q), common::max_rel(&u, &want_u));
    eprintln!("spin-2 alm2map against healpy: T {err_t:.2e}, Q {err_q:.2e}, U {err_u:.2e}");
    assert!(err_t <= 1e-12 && err_q <= 1e-12 && err_u <= 1e-12);
    for (iter, key) in [(0, "hp8p_alm_teb_iter0"), (3, "hp8p_alm_teb_iter3")] {
        let want = d[key].as_array().unwrap();
        let (ge, gb) = map2alm_spin2(&g, &want_q, &want_u, lmax, lmax, iter).unwrap();
        let gt = map2alm(&g, &want_t, lmax, lmax, iter).unwrap();
        for (name, got, w) in [
            ("T", &gt, &want[0]),
            ("E", &ge, &want[1]),
            ("B", &gb, &want[2]),
        ] {
            let err = common::max_rel(&got.to_flat(), &alm_from(w, lmax).to_flat());
            eprintln!("spin-2 map2alm iter {iter} {name} against healpy: {err:.2e}");
            assert!(err <= 1e-12, "iter {iter} {name}: {err:.2e}");
        }
    }
}

/// Spin-2 beyond the oracle: an exact Gauss-Legendre round trip E, B → Q, U → E, B at lmax 60 (the
/// quadrature is exact for band-limited spin-2 fields too), E and B without l < 2 as spin-2 fields have.
#[test]
fn spin2_round_trips_on_gauss_legendre() {
    use astroport::workload::sht::{alm2map_spin2, map2alm_spin2};
    let lmax = 60;
    let g = RingGrid::gauss_legendre(lmax + 1, 2 * lmax + 2).unwrap();
    let mut fields = [Alm::random(lmax, lmax, 21), Alm::random(lmax, lmax, 22)];
    for a in &mut fields {
        for (l, m) in [(0, 0), (1, 0), (1, 1)] {
            let i = a.index(l, m);
            a.coeffs[i] = Complex64::new(0.0, 0.0);
        }
    }
    let (q, u) = alm2map_spin2(&g, &fields[0], &fields[1]).unwrap();
    let (e, b) = map2alm_spin2(&g, &q, &u, lmax, lmax, 0).unwrap();
    let err_e = rel_l2(&e.to_flat(), &fields[0].to_flat());
    let err_b = rel_l2(&b.to_flat(), &fields[1].to_flat());
    eprintln!("spin-2 GL lmax {lmax} round trip: E {err_e:.2e}, B {err_b:.2e}");
    assert!(
        err_e <= 1e-12 && err_b <= 1e-12,
        "E {err_e:.2e}, B {err_b:.2e}"
    );
}

/// Spin-2 on every device against the `cpu` model's spin-2 (itself checked against healpy above): synthesis,
/// analysis with two iterations, on HEALPix and on a Gauss-Legendre grid with an unpaired equator ring, and
/// once cut into bands of m by a small memory cap.
#[test]
fn spin2_on_every_device_matches_the_cpu() {
    use astroport::backend::{discover, Target};
    use astroport::exec::RunOptions;
    use astroport::workload::sht::device::DeviceSht;
    use astroport::workload::sht::{alm2map_spin2, map2alm_spin2};
    let d = discover();
    let mut ran = Vec::new();
    for t in &d.targets {
        let Target::Device(dev) = t else { continue };
        for (grid, lmax, mmax, cap) in [
            (RingGrid::healpix(16).unwrap(), 40, 40, None),
            (RingGrid::gauss_legendre(41, 84).unwrap(), 40, 33, None),
            (RingGrid::healpix(8).unwrap(), 20, 20, Some(16 << 10)),
        ] {
            let (e, b) = (Alm::random(lmax, mmax, 31), Alm::random(lmax, mmax, 32));
            let (want_q, want_u) = alm2map_spin2(&grid, &e, &b).unwrap();
            let (want_e, want_b) = map2alm_spin2(&grid, &want_q, &want_u, lmax, mmax, 2).unwrap();
            let mut sht = DeviceSht::new(dev.as_ref(), &grid, &RunOptions::once())
                .unwrap()
                .with_memory_cap(cap);
            let (q, u) = sht.alm2map_spin2(&e, &b).unwrap();
            let (ge, gb) = sht.map2alm_spin2(&want_q, &want_u, lmax, mmax, 2).unwrap();
            let errs = [
                common::max_rel(&q, &want_q),
                common::max_rel(&u, &want_u),
                common::max_rel(&ge.to_flat(), &want_e.to_flat()),
                common::max_rel(&gb.to_flat(), &want_b.to_flat()),
            ];
            eprintln!(
                "{} {} spin-2 (Q, U, E, B): {errs:?}",
                t.id(),
                grid.describe()
            );
            assert!(errs.iter().all(|&e| e <= 1e-12), "{}: {errs:?}", t.id());
        }
        ran.push(t.id());
    }
    common::assert_ran(&common::devices(&d), &ran);
}
