//! The field on disk: `ref.fits`, `sci.fits` (electrons, float32), their variance (`ref.var.fits`,
//! `sci.var.fits`) and masks (`ref.mask.fits`, `sci.mask.fits`, 8-bit: 1 saturated, 2 bad column), each
//! with a TAN WCS and the generator's parameters in its header; and `truth.csv`. Files are first written
//! into a hidden folder beside them and moved into place only when all exist, so a failure leaves none.

use super::field::{Field, Image, Kind};
use crate::fits_image::{write_image, Card, ImageOut, Pixels};
use crate::inputs::{csv_writer, finish_csv, float, io_error, write_atomic, InputError};
use std::path::{Path, PathBuf};

/// Arcseconds per pixel of the WCS (the AST3 camera's scale is about 1″).
pub const PIXEL_SCALE_ARCSEC: f64 = 1.0;
/// The field's centre on the sky, degrees (an arbitrary, high-latitude pointing).
pub const CENTRE_DEG: (f64, f64) = (150.1, 2.2);

/// The files [`write_field`] makes, in order.
pub const FILES: [&str; 7] = [
    "ref.fits",
    "sci.fits",
    "ref.var.fits",
    "sci.var.fits",
    "ref.mask.fits",
    "sci.mask.fits",
    "truth.csv",
];

/// Header cards shared by the images of one field: the WCS, the detector, the PSF at the centre.
fn cards(field: &Field, image: Image) -> Vec<Card> {
    let spec = &field.spec;
    let n = spec.size as f64;
    let degrees = PIXEL_SCALE_ARCSEC / 3600.0;
    let (psf, sky, exposure) = match image {
        Image::Reference => (spec.reference_psf, spec.sky.0, 120.0),
        Image::Science => (spec.science_psf, spec.sky.1, 60.0),
    };
    vec![
        Card::text("CTYPE1", "RA---TAN", "gnomonic projection"),
        Card::text("CTYPE2", "DEC--TAN", "gnomonic projection"),
        Card::real(
            "CRPIX1",
            (n + 1.0) / 2.0,
            "reference pixel (1-based): the field centre",
        ),
        Card::real(
            "CRPIX2",
            (n + 1.0) / 2.0,
            "reference pixel (1-based): the field centre",
        ),
        Card::real("CRVAL1", CENTRE_DEG.0, "RA at CRPIX [deg]"),
        Card::real("CRVAL2", CENTRE_DEG.1, "Dec at CRPIX [deg]"),
        Card::real("CD1_1", -degrees, "RA grows to the left [deg/px]"),
        Card::real("CD1_2", 0.0, ""),
        Card::real("CD2_1", 0.0, ""),
        Card::real("CD2_2", degrees, "[deg/px]"),
        Card::text("CUNIT1", "deg", ""),
        Card::text("CUNIT2", "deg", ""),
        Card::text("RADESYS", "ICRS", ""),
        Card::text("BUNIT", "electron", "pixel values"),
        Card::real("GAIN", 1.0, "electrons per count"),
        Card::real("RDNOISE", spec.read_noise, "read noise [electron]"),
        Card::real("SATURATE", spec.saturation, "saturation level [electron]"),
        Card::real("EXPTIME", exposure, "[s]; the reference is twice as deep"),
        Card::real("SKYLEVEL", sky, "sky at the field centre [electron]"),
        Card::real(
            "SKYGRAD",
            spec.sky_gradient,
            "relative sky change edge to edge",
        ),
        Card::real("FWHM", psf.fwhm, "PSF FWHM at the centre [px]"),
        Card::real("MOFFBETA", psf.beta, "Moffat beta"),
        Card::real("PSFQ", psf.axis_ratio, "PSF axis ratio"),
        Card::real(
            "PSFWIDEN",
            spec.corner_widening,
            "relative FWHM growth centre to corner",
        ),
        Card::real(
            "FLXRATIO",
            spec.flux_ratio,
            "science over reference flux of a static source",
        ),
        Card::int("SEED", spec.seed as i64, "generator seed"),
        Card::int("NSOURCE", field.sources.len() as i64, "rows of truth.csv"),
    ]
}

fn history(field: &Field) -> Vec<String> {
    let s = &field.spec;
    vec![
        format!(
            "astroport {} field --size {} --seed {} (commit {})",
            env!("CARGO_PKG_VERSION"),
            s.size,
            s.seed,
            env!("ASTROPORT_GIT_COMMIT")
        ),
        format!(
            "cosmic rays {} per Mpx, bad column {}",
            s.cosmic_rays_per_mpx, s.bad_column
        ),
        "model: Moffat PSFs widening to the corners, exponential-disk galaxies convolved with the PSF, \
         Poisson and read noise, saturation (docs/imgsub.md)"
            .into(),
    ]
}

/// The truth table as CSV text: one row per source, cosmic rays included (kind cosmic_ray).
pub fn truth_csv(field: &Field, file: &str) -> Result<Vec<u8>, InputError> {
    let mut w = csv_writer();
    let result = (|| {
        w.write_record([
            "id",
            "kind",
            "x",
            "y",
            "reference_flux",
            "science_flux",
            "change",
            "change_snr",
            "host",
            "saturated",
            "half_light_radius",
            "axis_ratio",
            "angle",
        ])?;
        for s in &field.sources {
            let change = if s.kind == Kind::CosmicRay {
                0.0
            } else {
                s.science_flux - field.spec.flux_ratio * s.reference_flux
            };
            let (r, q, a) = match s.disk {
                Some(d) => (
                    float(d.half_light_radius),
                    float(d.axis_ratio),
                    float(d.angle),
                ),
                None => (String::new(), String::new(), String::new()),
            };
            w.write_record([
                s.id.to_string(),
                s.kind.name().to_string(),
                float(s.x),
                float(s.y),
                float(s.reference_flux),
                float(s.science_flux),
                float(change),
                float(field.change_snr(s)),
                s.host.map(|h| h.to_string()).unwrap_or_default(),
                u8::from(field.saturates(s)).to_string(),
                r,
                q,
                a,
            ])?;
        }
        Ok(())
    })();
    finish_csv(w, result, file)
}

/// Writes the field's seven files into `dir` (which must exist): all of them, or none.
pub fn write_field(field: &Field, dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    if !dir.is_dir() {
        return Err(io_error(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "--out: no such folder"),
        ));
    }
    let staging = dir.join(format!(".field-{}.partial", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
    let result = write_into(field, &staging).and_then(|()| {
        FILES
            .iter()
            .map(|name| {
                let target = dir.join(name);
                std::fs::rename(staging.join(name), &target).map_err(|e| io_error(&target, e))?;
                Ok(target)
            })
            .collect::<Result<Vec<_>, _>>()
    });
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn write_into(field: &Field, dir: &Path) -> Result<(), InputError> {
    let n = field.spec.size;
    let history = history(field);
    for (image, tag, rendered) in [
        (Image::Reference, "ref", &field.reference),
        (Image::Science, "sci", &field.science),
    ] {
        let cards = cards(field, image);
        let upper = tag.to_uppercase();
        let planes = [
            (
                format!("{tag}.fits"),
                upper.clone(),
                Pixels::F32(&rendered.data),
            ),
            (
                format!("{tag}.var.fits"),
                format!("{upper}_VAR"),
                Pixels::F32(&rendered.variance),
            ),
            (
                format!("{tag}.mask.fits"),
                format!("{upper}_MASK"),
                Pixels::U8(&rendered.mask),
            ),
        ];
        for (file, name, pixels) in planes {
            write_image(
                &dir.join(&file),
                &ImageOut {
                    nx: n,
                    ny: n,
                    pixels,
                    name: &name,
                    cards: &cards,
                    history: &history,
                },
            )?;
        }
    }
    let path = dir.join("truth.csv");
    let bytes = truth_csv(field, &path.display().to_string())?;
    write_atomic(&path, &bytes)
}
