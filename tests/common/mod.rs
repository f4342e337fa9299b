//! What the device tests share: which backends they must cover, and the check that those actually ran.
//! A device test that ran no device, or skipped one it found, proves nothing, so it fails.
//!
//! Backends that must be present are named in ASTROPORT_REQUIRE (comma-separated: `opencl-pocl`,
//! `opencl-intel`, `sycl`, `cuda`); scripts/test.sh sets it from what scripts/setup.sh installed.

#![allow(dead_code)] // each test binary uses a part

use astroport::backend::{Discovery, Model, Target};
use astroport::results::{Row, Status};

/// The required backend kinds.
pub fn required() -> Vec<String> {
    std::env::var("ASTROPORT_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A target's kind as ASTROPORT_REQUIRE names it.
pub fn kind(t: &Target) -> Option<&'static str> {
    let info = t.info();
    match t.model() {
        Model::Opencl if info.platform.contains("Portable Computing Language") => {
            Some("opencl-pocl")
        }
        Model::Opencl if info.platform.contains("Intel") => Some("opencl-intel"),
        Model::Opencl => Some("opencl"),
        Model::Sycl => Some("sycl"),
        Model::Cuda => Some("cuda"),
        Model::Cpu => None,
    }
}

/// The device targets (every model but `cpu`) found. Fails when there is none, or when a required kind is
/// missing: the test would otherwise pass without running any device.
pub fn devices(d: &Discovery) -> Vec<&Target> {
    let found: Vec<&Target> = d
        .targets
        .iter()
        .filter(|t| t.model() != Model::Cpu)
        .collect();
    let absent: Vec<String> = d
        .absent
        .iter()
        .map(|a| format!("{}: {} ({})", a.id, a.why.status(), a.reason))
        .collect();
    assert!(
        !found.is_empty(),
        "no device backend found, so this device test would check nothing (run scripts/setup.sh and \
         scripts/test.sh); absent: {absent:?}"
    );
    let kinds: Vec<&str> = found.iter().filter_map(|t| kind(t)).collect();
    for want in required() {
        assert!(
            kinds.contains(&want.as_str()),
            "required backend {want} not found; found {kinds:?}; absent {absent:?}"
        );
    }
    found
}

/// Fails unless every device target in `devices` is among `ran` (ids of targets whose results were
/// checked).
pub fn assert_ran(devices: &[&Target], ran: &[String]) {
    for t in devices {
        assert!(
            ran.iter().any(|r| *r == t.id()),
            "{} was found but not checked (ran: {ran:?})",
            t.id()
        );
    }
}

/// Fails unless every device target in `devices` ran and passed in every mode (row precision) of `modes`.
pub fn assert_ran_in_each_mode(devices: &[&Target], rows: &[Row], modes: &[&str]) {
    for mode in modes {
        let ran: Vec<String> = rows
            .iter()
            .filter(|r| r.precision == *mode && r.status == Status::Ok)
            .map(|r| r.backend.clone())
            .collect();
        assert_ran(devices, &ran);
    }
}

/// The ids of the rows that ran and passed verification.
pub fn ran_ok(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.status == Status::Ok)
        .map(|r| r.backend.clone())
        .collect()
}

/// max |a − b| / max |b|; infinite when a has a value that is not finite (f64::max would skip a NaN).
pub fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    if a.iter().any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// A JSON array of numbers.
pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

/// The Lomb-Scargle oracle (tests/data/lombscargle/ls_reference_vectors.json, astropy 8.0.2 exact), its
/// light curve and its culsp grid.
pub fn ls_oracle() -> (
    serde_json::Value,
    astroport::workload::lombscargle::LightCurve,
    astroport::workload::lombscargle::FrequencyGrid,
) {
    let o = astroport::oracle::vectors("lombscargle/ls_reference_vectors.json");
    let curve = astroport::workload::lombscargle::LightCurve {
        name: "oracle".into(),
        t: floats(&o["t"]),
        y: floats(&o["y"]),
        dy: None,
    };
    let g = &o["grid"];
    let grid = astroport::workload::lombscargle::generate::culsp_grid(
        &curve.t,
        g["F_over"].as_f64().unwrap(),
        g["F_high"].as_f64().unwrap(),
    );
    assert_eq!(grid.len() as u64, g["nf"].as_u64().unwrap());
    (o, curve, grid)
}

/// Runs the `astroport` binary: (exit code, stdout, stderr).
pub fn astroport(args: &[&str]) -> (i32, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}
