//! The registered pair a subtraction starts from: the reference and science images with their variance and
//! masks, from FITS files (`astroport subtract`) or from a generated field. Inputs are checked here, so the
//! pipeline sees only usable numbers: pixels that are not numbers (or whose variance is not) are set to 0 and
//! masked, pixels at or above the header's SATURATE are masked, and a missing variance image is modelled
//! from GAIN and RDNOISE.

use super::field::{Field, MASK_BAD_COLUMN, MASK_SATURATED};
use crate::fits_image::{read_samples, Card, ImageIn, Samples};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Mask bit of a pixel that was not a number in the image or its variance.
pub const MASK_NOT_A_NUMBER: u8 = 4;

/// One image of the pair, in its own units (electrons for the generated field).
#[derive(Debug, Clone)]
pub struct Plane {
    pub data: Vec<f32>,
    pub variance: Vec<f32>,
    /// Non-zero: unusable (bits: 1 saturated, 2 bad, 4 not a number).
    pub mask: Vec<u8>,
}

/// A registered reference and science image of the same size.
#[derive(Debug, Clone)]
pub struct Pair {
    pub nx: usize,
    pub ny: usize,
    pub reference: Plane,
    pub science: Plane,
    /// The science image's WCS cards, carried to every output.
    pub wcs: Vec<Card>,
    /// Where the images came from, for the outputs' HISTORY.
    pub sources: Vec<String>,
}

/// The files of a pair; variance and masks are optional.
#[derive(Debug, Clone, Default)]
pub struct PairFiles {
    pub reference: PathBuf,
    pub science: PathBuf,
    pub reference_variance: Option<PathBuf>,
    pub science_variance: Option<PathBuf>,
    pub reference_mask: Option<PathBuf>,
    pub science_mask: Option<PathBuf>,
}

/// Header keys of a WCS (FITS paper II and the SIP convention), copied from the science image.
fn is_wcs_key(key: &str) -> bool {
    const PREFIXES: [&str; 14] = [
        "CTYPE", "CRPIX", "CRVAL", "CDELT", "CUNIT", "CD1_", "CD2_", "PC1_", "PC2_", "A_", "B_",
        "AP_", "BP_", "CROTA",
    ];
    const KEYS: [&str; 6] = [
        "RADESYS", "EQUINOX", "LONPOLE", "LATPOLE", "WCSAXES", "MJD-OBS",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p)) || KEYS.contains(&key)
}

fn wcs_cards(image: &ImageIn) -> Vec<Card> {
    image
        .cards
        .iter()
        .filter(|(k, _)| is_wcs_key(k))
        .map(|(k, v)| match v.trim().parse::<f64>() {
            Ok(x) => Card::real(k, x, ""),
            Err(_) => Card::text(k, v, ""),
        })
        .collect()
}

/// A flag's file as an image of the expected size.
fn read_sized(
    flag: &str,
    path: &Path,
    shape: Option<(usize, usize)>,
) -> Result<ImageIn<Samples>, String> {
    let image = read_samples(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    check_shape(flag, path, &image, shape)?;
    Ok(image)
}

fn check_shape<Data>(
    flag: &str,
    path: &Path,
    image: &ImageIn<Data>,
    shape: Option<(usize, usize)>,
) -> Result<(), String> {
    match shape {
        Some((nx, ny)) if (image.nx, image.ny) != (nx, ny) => Err(format!(
            "{flag} {}: the image is {}×{} pixels, but --ref is {nx}×{ny}: the pair must be \
             registered to the same pixel grid",
            path.display(),
            image.nx,
            image.ny
        )),
        _ => Ok(()),
    }
}

impl Pair {
    /// Reads and checks the files of a pair.
    pub fn read(files: &PairFiles) -> Result<Pair, String> {
        // The files are read at once (cfitsio is built reentrant): a 10k pair is six files of up to 400 MB.
        let flags: [(&str, Option<&PathBuf>); 6] = [
            ("--ref", Some(&files.reference)),
            ("--sci", Some(&files.science)),
            ("--ref-var", files.reference_variance.as_ref()),
            ("--sci-var", files.science_variance.as_ref()),
            ("--ref-mask", files.reference_mask.as_ref()),
            ("--sci-mask", files.science_mask.as_ref()),
        ];
        let read: Vec<Option<Result<ImageIn<Samples>, String>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = flags
                .iter()
                .map(|&(flag, path)| scope.spawn(move || path.map(|p| read_sized(flag, p, None))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a reader thread panicked"))
                .collect()
        });
        let mut read = read.into_iter();
        let mut next = || read.next().flatten().transpose();
        let reference = next()?.expect("--ref is required").floats();
        let shape = Some((reference.nx, reference.ny));
        let mut sized =
            |flag: &str, path: Option<&PathBuf>| -> Result<Option<ImageIn<Samples>>, String> {
                let image = next()?;
                if let (Some(image), Some(path)) = (&image, path) {
                    check_shape(flag, path, image, shape)?;
                }
                Ok(image)
            };
        let science = sized("--sci", Some(&files.science))?
            .expect("--sci is required")
            .floats();
        let ref_var = sized("--ref-var", files.reference_variance.as_ref())?.map(ImageIn::floats);
        let sci_var = sized("--sci-var", files.science_variance.as_ref())?.map(ImageIn::floats);
        let ref_mask = sized("--ref-mask", files.reference_mask.as_ref())?;
        let sci_mask = sized("--sci-mask", files.science_mask.as_ref())?;
        let mut sources = vec![
            format!("ref {}", files.reference.display()),
            format!("sci {}", files.science.display()),
        ];
        for (tag, path) in [
            ("ref-var", &files.reference_variance),
            ("sci-var", &files.science_variance),
            ("ref-mask", &files.reference_mask),
            ("sci-mask", &files.science_mask),
        ] {
            if let Some(p) = path {
                sources.push(format!("{tag} {}", p.display()));
            }
        }
        let wcs = wcs_cards(&science);
        let (nx, ny) = (reference.nx, reference.ny);
        Ok(Pair {
            nx,
            ny,
            reference: plane("--ref", &files.reference, reference, ref_var, ref_mask)?,
            science: plane("--sci", &files.science, science, sci_var, sci_mask)?,
            wcs,
            sources,
        })
    }

    /// Another image on the pair's pixel grid (`flag`'s file), as float32.
    pub fn read_matching(&self, flag: &str, path: &Path) -> Result<Vec<f32>, String> {
        Ok(read_sized(flag, path, Some((self.nx, self.ny)))?
            .floats()
            .data)
    }

    /// The pair of a generated field (its variance and masks as written by `astroport field`).
    pub fn from_field(field: Field) -> Pair {
        let n = field.spec.size;
        let clean = |r: super::field::Rendered| Plane {
            data: r.data,
            variance: r.variance,
            mask: r.mask,
        };
        Pair {
            nx: n,
            ny: n,
            reference: clean(field.reference),
            science: clean(field.science),
            wcs: Vec::new(),
            sources: vec![format!("generated field {n}x{n}, seed {}", field.spec.seed)],
        }
    }
}

/// A mask file's values as mask bits: 0 stays 0, a whole number 1–255 keeps its bits, anything else is a bad
/// pixel.
fn mask_bits(mask: Option<ImageIn<Samples>>, n: usize) -> Vec<u8> {
    match mask.map(|m| m.data) {
        Some(Samples::U8(bytes)) => bytes,
        Some(Samples::F32(values)) => values
            .par_iter()
            .map(|&v| {
                if v == 0.0 {
                    0
                } else if (1.0..=255.0).contains(&v) && v.fract() == 0.0 {
                    v as u8
                } else {
                    MASK_BAD_COLUMN
                }
            })
            .collect(),
        None => vec![0; n],
    }
}

/// One image, its variance (read or modelled) and mask, checked, all three in place.
fn plane(
    flag: &str,
    path: &Path,
    image: ImageIn,
    variance: Option<ImageIn>,
    mask: Option<ImageIn<Samples>>,
) -> Result<Plane, String> {
    let n = image.data.len();
    let gain = image.real("GAIN").unwrap_or(1.0);
    let read_noise = image.real("RDNOISE").unwrap_or(0.0);
    if !(gain > 0.0 && gain.is_finite()) {
        return Err(format!(
            "{flag} {}: header card GAIN = {gain} is not a positive number",
            path.display()
        ));
    }
    let saturate = image.real("SATURATE");
    let mut mask = mask_bits(mask, n);
    let mut data = image.data;
    let mut variance = match variance {
        Some(v) => v.data,
        None => {
            // Poisson noise of the counts (in electrons: counts × GAIN) and the read noise, in counts².
            let rn2 = (read_noise / gain).powi(2);
            data.par_iter()
                .map(|&d| ((d.max(0.0) as f64) / gain + rn2) as f32)
                .collect()
        }
    };
    data.par_iter_mut()
        .zip(variance.par_iter_mut())
        .zip(mask.par_iter_mut())
        .for_each(|((d, v), m)| {
            if !(d.is_finite() && v.is_finite() && *v >= 0.0) {
                *d = 0.0;
                *v = 0.0;
                *m |= MASK_NOT_A_NUMBER;
            } else if saturate.is_some_and(|s| *d as f64 >= s) {
                *m |= MASK_SATURATED;
            }
        });
    Ok(Plane {
        data,
        variance,
        mask,
    })
}
