//! `astroport sht alm2map|map2alm` on healpy-layout FITS files: results equal the library's, NESTED maps are
//! read in RING order, and bad files are refused with exit code 2, the file and the field named, and no
//! output file left behind.

mod common;

use astroport::workload::sht::io::{
    read_alm_fits, read_healpix_map, write_alm_fits, write_healpix_map,
};
use astroport::workload::sht::{alm2map, map2alm, Alm, RingGrid};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("astroport-sht-files-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sht(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_astroport"))
        .arg("sht")
        .args(args)
        .args(["--backend", "cpu"])
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Replaces the value of header card `key` (an 80-byte card) by `value`, written as cfitsio writes it.
fn patch_card(path: &Path, key: &str, value: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let prefix = format!("{key:<8}= ");
    let at = (0..bytes.len() / 80)
        .map(|c| c * 80)
        .find(|&c| bytes[c..c + 80].starts_with(prefix.as_bytes()))
        .unwrap_or_else(|| panic!("no card {key}"));
    let card = format!("{prefix}{value:>20}");
    let card = format!("{card:<80}");
    bytes[at..at + 80].copy_from_slice(card.as_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn files_round_trip_through_the_command() {
    let d = dir("round");
    let (nside, lmax) = (16usize, 40usize);
    let alm = Alm::random(lmax, lmax, 5);
    let alm_path = d.join("alm.fits");
    write_alm_fits(&alm_path, &[&alm]).unwrap();
    assert_eq!(read_alm_fits(&alm_path).unwrap(), vec![alm.clone()]);

    let map_path = d.join("map.fits");
    let o = sht(&[
        "alm2map",
        "--in",
        alm_path.to_str().unwrap(),
        "--out",
        map_path.to_str().unwrap(),
        "--lmax",
        "40",
        "--nside",
        "16",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let grid = RingGrid::healpix(nside).unwrap();
    let want = alm2map(&grid, &alm).unwrap();
    let got = read_healpix_map(&map_path, 1).unwrap();
    assert_eq!(got.nside, nside);
    assert_eq!(got.fields[0].0, "TEMPERATURE");
    assert!(common::max_rel(&got.fields[0].1, &want) <= 1e-15);

    // The same map written NESTED reads back in RING order, and analyses to the same coefficients.
    let nested_path = d.join("map-nested.fits");
    write_healpix_map(&nested_path, nside, true, &[("TEMPERATURE", &want)]).unwrap();
    let header = String::from_utf8_lossy(&std::fs::read(&nested_path).unwrap()[..5760]).to_string();
    assert!(header.contains("'NESTED  '"), "{header}");
    assert_eq!(read_healpix_map(&nested_path, 1).unwrap().fields[0].1, want);
    let want_alm = map2alm(&grid, &want, lmax, lmax, 3).unwrap();
    for (input, name) in [(&map_path, "ring"), (&nested_path, "nested")] {
        let out = d.join(format!("alm-{name}.fits"));
        let o = sht(&[
            "map2alm",
            "--in",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--lmax",
            "40",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let back = read_alm_fits(&out).unwrap().remove(0);
        assert!(
            common::max_rel(&back.to_flat(), &want_alm.to_flat()) <= 1e-14,
            "{name}"
        );
    }
}

#[test]
fn bad_files_exit_2_and_leave_no_output() {
    let d = dir("bad");
    let grid = RingGrid::healpix(8).unwrap();
    let map = alm2map(&grid, &Alm::random(16, 16, 2)).unwrap();
    let out = d.join("out.fits");
    let run = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "map2alm",
            "--in",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = sht(&args);
        assert!(!out.exists(), "an output was left after a failure");
        o
    };
    let expect = |o: Output, needles: &[&str]| {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let msg = text(&o);
        for n in needles {
            assert!(msg.contains(n), "'{n}' not in: {msg}");
        }
    };

    // NSIDE not a power of two with NESTED ordering.
    let p = d.join("nside6-nested.fits");
    write_healpix_map(
        &p,
        6,
        false,
        &[(
            "T",
            &alm2map(&RingGrid::healpix(6).unwrap(), &Alm::random(8, 8, 1)).unwrap(),
        )],
    )
    .unwrap();
    patch_card(&p, "ORDERING", "'NESTED  '");
    expect(
        run(&p, &["--lmax", "8"]),
        &["nside6-nested.fits", "NSIDE", "6", "power of two"],
    );

    // A pixel count that is not 12 nside².
    let p = d.join("short.fits");
    write_healpix_map(&p, 8, false, &[("T", &map)]).unwrap();
    patch_card(&p, "NSIDE", "16");
    expect(
        run(&p, &["--lmax", "16"]),
        &["short.fits", "768 pixels", "NSIDE 16 needs 3072"],
    );

    // NaN and UNSEEN pixels are refused (no masked analysis), naming the pixel.
    for (name, value) in [("nan", f64::NAN), ("unseen", -1.6375e30)] {
        let mut bad = map.clone();
        bad[77] = value;
        let p = d.join(format!("{name}.fits"));
        write_healpix_map(&p, 8, false, &[("T", &bad)]).unwrap();
        expect(
            run(&p, &["--lmax", "16"]),
            &[&format!("{name}.fits"), "pixel 77"],
        );
    }

    // Not a HEALPix table.
    let p = d.join("pixtype.fits");
    write_healpix_map(&p, 8, false, &[("T", &map)]).unwrap();
    patch_card(&p, "PIXTYPE", "'CAR     '");
    expect(
        run(&p, &["--lmax", "16"]),
        &["pixtype.fits", "PIXTYPE", "CAR"],
    );

    // A truncated file.
    let p = d.join("truncated.fits");
    write_healpix_map(&p, 8, false, &[("T", &map)]).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 100]).unwrap();
    expect(run(&p, &["--lmax", "16"]), &["truncated.fits", "2880"]);

    // lmax above 3 nside − 1 warns and still runs.
    let p = d.join("ok.fits");
    write_healpix_map(&p, 8, false, &[("T", &map)]).unwrap();
    let o = sht(&[
        "map2alm",
        "--in",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--lmax",
        "30",
        "--iter",
        "0",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("warning: --lmax 30 is above 3 nside - 1 = 23"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&out).unwrap();

    // An a_lm file whose lmax is not --lmax.
    let a = d.join("alm16.fits");
    write_alm_fits(&a, &[&Alm::random(16, 16, 3)]).unwrap();
    let o = sht(&[
        "alm2map",
        "--in",
        a.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--lmax",
        "20",
        "--nside",
        "8",
    ]);
    expect(o, &["alm16.fits", "l = 16", "--lmax is 20"]);
    assert!(!out.exists());

    // --pol needs three columns (T, Q, U) and three a_lm HDUs (T, E, B).
    expect(
        run(&p, &["--lmax", "16", "--pol"]),
        &["ok.fits", "1 column(s)", "3 field(s)"],
    );
    let o = sht(&[
        "alm2map",
        "--pol",
        "--in",
        a.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--lmax",
        "16",
        "--nside",
        "8",
    ]);
    expect(o, &["alm16.fits", "1 a_lm HDU(s)", "needs 3"]);
    assert!(!out.exists());
}

/// `--pol`: T, E, B files to T, Q, U maps and back, equal to the library's scalar and spin-2 transforms.
#[test]
fn polarised_files_match_the_library() {
    use astroport::workload::sht::{alm2map_spin2, map2alm_spin2};
    let d = dir("pol");
    let (nside, lmax) = (8usize, 16usize);
    let grid = RingGrid::healpix(nside).unwrap();
    let teb = [
        Alm::random(lmax, lmax, 1),
        Alm::random(lmax, lmax, 2),
        Alm::random(lmax, lmax, 3),
    ];
    let alm_path = d.join("teb.fits");
    write_alm_fits(&alm_path, &[&teb[0], &teb[1], &teb[2]]).unwrap();
    let map_path = d.join("tqu.fits");
    let o = sht(&[
        "alm2map",
        "--pol",
        "--in",
        alm_path.to_str().unwrap(),
        "--out",
        map_path.to_str().unwrap(),
        "--lmax",
        "16",
        "--nside",
        "8",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let maps = read_healpix_map(&map_path, 3).unwrap();
    let names: Vec<&str> = maps.fields.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(names, ["TEMPERATURE", "Q_POLARISATION", "U_POLARISATION"]);
    let (q, u) = alm2map_spin2(&grid, &teb[1], &teb[2]).unwrap();
    assert!(common::max_rel(&maps.fields[0].1, &alm2map(&grid, &teb[0]).unwrap()) <= 1e-15);
    assert!(common::max_rel(&maps.fields[1].1, &q) <= 1e-15);
    assert!(common::max_rel(&maps.fields[2].1, &u) <= 1e-15);

    let back_path = d.join("teb-back.fits");
    let o = sht(&[
        "map2alm",
        "--pol",
        "--in",
        map_path.to_str().unwrap(),
        "--out",
        back_path.to_str().unwrap(),
        "--lmax",
        "16",
        "--iter",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let back = read_alm_fits(&back_path).unwrap();
    assert_eq!(back.len(), 3);
    let t = map2alm(&grid, &maps.fields[0].1, lmax, lmax, 2).unwrap();
    let (e, b) = map2alm_spin2(&grid, &maps.fields[1].1, &maps.fields[2].1, lmax, lmax, 2).unwrap();
    for (got, want) in back.iter().zip([&t, &e, &b]) {
        assert!(common::max_rel(&got.to_flat(), &want.to_flat()) <= 1e-15);
    }

    // The same on the first OpenCL device (PoCL in CI): the spin-2 kernels, within the device tolerance.
    let dev_path = d.join("tqu-opencl.fits");
    let o = Command::new(env!("CARGO_BIN_EXE_astroport"))
        .args([
            "sht",
            "alm2map",
            "--pol",
            "--backend",
            "opencl",
            "--lmax",
            "16",
            "--nside",
            "8",
        ])
        .args([
            "--in",
            alm_path.to_str().unwrap(),
            "--out",
            dev_path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let on_device = read_healpix_map(&dev_path, 3).unwrap();
    for (got, want) in on_device.fields.iter().zip(&maps.fields) {
        assert!(common::max_rel(&got.1, &want.1) <= 1e-12, "{}", got.0);
    }
}
