//! Property-based mutation of valid inputs for every reader: light curves (CSV and FITS), halo catalogues,
//! image systems, FITS maps, and HEALPix maps and a_lm. Whatever the bytes, a reader answers or returns an error; it never panics,
//! and never crashes the process (a read past a buffer would). Deterministic: a fixed seed and a bounded
//! number of cases, so CI runs the same inputs every time.

use astroport::workload::lens::io as lens_io;
use astroport::workload::lombscargle::io as ls_io;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const CASES: u32 = 1000;

fn runner() -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

/// One edit of a text: replace, insert or delete a span at a position (fractions of the length), with text
/// drawn from what CSV readers must survive.
#[derive(Debug, Clone)]
enum Edit {
    Replace(f64, String),
    Insert(f64, String),
    Delete(f64, usize),
    Truncate(f64),
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(",".to_string()),
        Just("\n".to_string()),
        Just("\"".to_string()),
        Just("#".to_string()),
        Just("nan".to_string()),
        Just("-inf".to_string()),
        Just("1e308".to_string()),
        Just("-0".to_string()),
        Just("9".repeat(320)),
        Just("é€\u{0}".to_string()),
        "[0-9.eE+-]{1,12}",
        "[a-z_ ]{1,10}",
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0.0..1.0f64, fragment()).prop_map(|(p, s)| Edit::Replace(p, s)),
        (0.0..1.0f64, fragment()).prop_map(|(p, s)| Edit::Insert(p, s)),
        (0.0..1.0f64, 1usize..20).prop_map(|(p, n)| Edit::Delete(p, n)),
        (0.0..1.0f64).prop_map(Edit::Truncate),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let at = |p: f64, len: usize| ((p * len as f64) as usize).min(len);
        match e {
            Edit::Replace(p, s) => {
                let i = at(*p, chars.len());
                let end = (i + s.chars().count()).min(chars.len());
                chars.splice(i..end, s.chars());
            }
            Edit::Insert(p, s) => {
                let i = at(*p, chars.len());
                chars.splice(i..i, s.chars());
            }
            Edit::Delete(p, n) => {
                let i = at(*p, chars.len());
                let end = (i + n).min(chars.len());
                chars.drain(i..end);
            }
            Edit::Truncate(p) => chars.truncate(at(*p, chars.len())),
        }
    }
    chars.into_iter().collect()
}

/// Mutates `valid` with 1-4 edits and hands each result to `read`, which must return normally.
fn fuzz_text(valid: &str, read: impl Fn(&str)) {
    runner()
        .run(&prop::collection::vec(edit(), 1..5), |edits| {
            read(&apply(valid, &edits));
            Ok(())
        })
        .unwrap();
}

#[test]
fn light_curve_csv() {
    let mut valid = String::from("# a light curve\nobject,time,flux,flux_err\n");
    for i in 0..12 {
        valid.push_str(&format!(
            "S{},{},{},{}\n",
            i % 2,
            i as f64 * 0.7,
            (i as f64).sin(),
            0.1
        ));
    }
    fuzz_text(&valid, |t| {
        let _ = ls_io::parse_light_curves_csv(t, "lc.csv");
    });
}

#[test]
fn halo_catalogue() {
    let valid = "id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg,r_core_arcsec,r_cut_arcsec\n\
                 A,sie,0,0,900,0.1,20,,\nB,dpie,3,-2,300,0.2,45,0.5,40\nC,sie,-10,12,120,0.05,0,,\n";
    fuzz_text(valid, |t| {
        let _ = lens_io::parse_halos(t, "halos.csv");
    });
}

#[test]
fn image_systems() {
    let valid =
        "system,z_source,x_arcsec,y_arcsec,sigma_arcsec\nS1,2.0,1,1,0.5\nS1,2.0,-1,-1,0.5\n\
                 S2,1.5,3,3,0.4\nS2,1.5,-3,-2,0.4\nS2,1.5,0,4,0.4\n";
    fuzz_text(valid, |t| {
        let _ = lens_io::parse_image_systems(t, "images.csv", 0.3);
    });
}

/// One edit of a binary file: overwrite bytes, or cut it at a position.
#[derive(Debug, Clone)]
enum ByteEdit {
    Overwrite(f64, Vec<u8>),
    Truncate(f64),
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (0.0..1.0f64, prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| ByteEdit::Overwrite(p, b)),
        // Header cards are text: overwrite a card's value with digits, signs or blanks.
        (0.0..1.0f64, "[ 0-9+-]{1,20}").prop_map(|(p, s)| ByteEdit::Overwrite(p, s.into_bytes())),
        (0.0..1.0f64).prop_map(ByteEdit::Truncate),
    ]
}

fn fuzz_file(valid: &[u8], name: &str, read: impl Fn(&std::path::Path)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    runner()
        .run(&prop::collection::vec(byte_edit(), 1..4), |edits| {
            let mut bytes = valid.to_vec();
            for e in &edits {
                match e {
                    ByteEdit::Overwrite(p, b) => {
                        let i = ((p * bytes.len() as f64) as usize).min(bytes.len());
                        for (k, &v) in b.iter().enumerate() {
                            if let Some(x) = bytes.get_mut(i + k) {
                                *x = v;
                            }
                        }
                    }
                    ByteEdit::Truncate(p) => bytes.truncate((p * bytes.len() as f64) as usize),
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            read(&path);
            Ok(())
        })
        .unwrap();
}

#[test]
fn light_curve_fits() {
    use fitsio::tables::{ColumnDataType, ColumnDescription};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lc.fits");
    {
        let mut f = fitsio::FitsFile::create(&path).open().unwrap();
        let col = |n: &str, t| ColumnDescription::new(n).with_type(t).create().unwrap();
        let hdu = f
            .create_table(
                "LIGHTCURVE",
                &[
                    col("TIME", ColumnDataType::Double),
                    col("FLUX", ColumnDataType::Double),
                    col("FLUX_ERR", ColumnDataType::Float),
                ],
            )
            .unwrap();
        let t: Vec<f64> = (0..400).map(|i| i as f64 * 0.3).collect();
        let y: Vec<f64> = t.iter().map(|t| t.sin()).collect();
        hdu.write_col(&mut f, "TIME", &t).unwrap();
        hdu.write_col(&mut f, "FLUX", &y).unwrap();
        hdu.write_col(&mut f, "FLUX_ERR", &vec![0.1f32; 400])
            .unwrap();
    }
    let valid = std::fs::read(&path).unwrap();
    assert!(ls_io::read_light_curves_fits(&path).is_ok());
    fuzz_file(&valid, "mutated.fits", |p| {
        let _ = ls_io::read_light_curves_fits(p);
    });
}

#[test]
fn map_fits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("map.fits");
    let data: Vec<f32> = (0..64 * 40).map(|k| k as f32 * 0.25).collect();
    lens_io::write_map_fits(
        &path,
        &lens_io::MapImage {
            data: &data,
            nx: 64,
            ny: 40,
            pixel_arcsec: 0.2,
            centre_x_arcsec: 0.0,
            centre_y_arcsec: 0.0,
            name: "kappa",
            unit: "",
            history: &[],
        },
    )
    .unwrap();
    let valid = std::fs::read(&path).unwrap();
    assert!(lens_io::read_map_fits(&path).is_ok());
    fuzz_file(&valid, "mutated.fits", |p| {
        let _ = lens_io::read_map_fits(p);
    });
}

#[test]
fn healpix_map_and_alm_fits() {
    use astroport::workload::sht::io as sht_io;
    use astroport::workload::sht::Alm;
    let dir = tempfile::tempdir().unwrap();
    let map_path = dir.path().join("map.fits");
    let pixels: Vec<f64> = (0..12 * 4 * 4).map(|k| k as f64 * 0.5).collect();
    sht_io::write_healpix_map(&map_path, 4, true, &[("TEMPERATURE", &pixels)]).unwrap();
    let valid = std::fs::read(&map_path).unwrap();
    assert!(sht_io::read_healpix_map(&map_path, 1).is_ok());
    fuzz_file(&valid, "mutated-map.fits", |p| {
        let _ = sht_io::read_healpix_map(p, 1);
    });
    let alm_path = dir.path().join("alm.fits");
    sht_io::write_alm_fits(
        &alm_path,
        &[&Alm::random(12, 12, 4), &Alm::random(12, 12, 5)],
    )
    .unwrap();
    let valid = std::fs::read(&alm_path).unwrap();
    assert!(sht_io::read_alm_fits(&alm_path).is_ok());
    fuzz_file(&valid, "mutated-alm.fits", |p| {
        let _ = sht_io::read_alm_fits(p);
    });
}
