//! FITS images in and out, for any workload: a 2-D primary image (float32, or bytes for masks) with the
//! header cards the caller gives (WCS, units, instrument keys) and HISTORY lines, encoded in memory through
//! cfitsio and written atomically; and the reverse, any 2-D primary image read as float32 with every header
//! card kept as text.

use crate::inputs::{
    encode_fits_in_memory, fits_hdu_problem, fits_length_problem, io_error, open_fits_in_memory,
    wrap_raw_fits, write_atomic, InputError, FITS_BLOCK,
};
use fitsio::hdu::HduInfo;
use fitsio::images::{ImageDescription, ImageType};
use fitsio::{sys, FileOpenMode};
use std::ffi::{c_char, c_int, CString};
use std::path::Path;

/// A header card's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Written with the fewest digits (15 to 17) that read back exactly.
    Real(f64),
    Int(i64),
    Text(String),
}

/// One header card: an 8-character key, its value and a comment.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub key: String,
    pub value: Value,
    pub comment: String,
}

impl Card {
    pub fn real(key: &str, value: f64, comment: &str) -> Card {
        Card {
            key: key.into(),
            value: Value::Real(value),
            comment: comment.into(),
        }
    }
    pub fn int(key: &str, value: i64, comment: &str) -> Card {
        Card {
            key: key.into(),
            value: Value::Int(value),
            comment: comment.into(),
        }
    }
    pub fn text(key: &str, value: &str, comment: &str) -> Card {
        Card {
            key: key.into(),
            value: Value::Text(value.into()),
            comment: comment.into(),
        }
    }
}

/// The pixels of an image, row by row (x fastest; NAXIS1 = nx).
#[derive(Debug, Clone, Copy)]
pub enum Pixels<'a> {
    F32(&'a [f32]),
    /// Masks: BITPIX 8.
    U8(&'a [u8]),
}

impl Pixels<'_> {
    fn len(&self) -> usize {
        match self {
            Pixels::F32(p) => p.len(),
            Pixels::U8(p) => p.len(),
        }
    }
}

/// An image to write.
#[derive(Debug, Clone, Copy)]
pub struct ImageOut<'a> {
    pub nx: usize,
    pub ny: usize,
    pub pixels: Pixels<'a>,
    /// EXTNAME; printable ASCII.
    pub name: &'a str,
    pub cards: &'a [Card],
    /// One HISTORY card each (cfitsio continues a long line on further cards).
    pub history: &'a [String],
}

/// An image read back: the pixels as float32 and every header card as (key, value text), string values
/// without their quotes.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageIn {
    pub nx: usize,
    pub ny: usize,
    pub data: Vec<f32>,
    pub cards: Vec<(String, String)>,
    pub history: Vec<String>,
}

impl ImageIn {
    /// The value text of a card, if present.
    pub fn card(&self, key: &str) -> Option<&str> {
        self.cards
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// A number card, if present and numeric.
    pub fn real(&self, key: &str) -> Option<f64> {
        self.card(key).and_then(|v| v.trim().parse().ok())
    }
}

fn printable(s: &str) -> bool {
    s.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// Why `image` cannot be written, if it cannot.
fn problem(image: &ImageOut) -> Option<String> {
    if image.nx == 0 || image.ny == 0 {
        return Some(format!(
            "image size {}×{} has no pixels",
            image.nx, image.ny
        ));
    }
    if image.nx.checked_mul(image.ny) != Some(image.pixels.len()) {
        return Some(format!(
            "image size {}×{} does not match its {} values",
            image.nx,
            image.ny,
            image.pixels.len()
        ));
    }
    if image.nx > i32::MAX as usize || image.ny > i32::MAX as usize {
        return Some(format!("image size {}×{} is too large", image.nx, image.ny));
    }
    if image.name.is_empty() || !printable(image.name) || image.name.len() > 68 {
        return Some(format!(
            "image name {:?} must be 1 to 68 printable ASCII characters",
            image.name
        ));
    }
    for c in image.cards {
        let key_ok = !c.key.is_empty()
            && c.key.len() <= 8
            && c.key
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !key_ok {
            return Some(format!("header key {:?} is not a FITS keyword", c.key));
        }
        let text_ok = match &c.value {
            Value::Text(t) => printable(t) && t.len() <= 68,
            Value::Real(x) => x.is_finite(),
            Value::Int(_) => true,
        };
        if !text_ok || !printable(&c.comment) {
            return Some(format!(
                "header card {} has a value or comment FITS cannot hold",
                c.key
            ));
        }
    }
    image
        .history
        .iter()
        .enumerate()
        .find(|(_, h)| !printable(h))
        .map(|(i, h)| {
            format!(
                "history line {} {h:?} has a character that is not printable ASCII",
                i + 1
            )
        })
}

/// Writes `image` as a FITS file at `path`, atomically: either the whole file is there or nothing is.
pub fn write_image(path: &Path, image: &ImageOut) -> Result<(), InputError> {
    let file = path.display().to_string();
    if let Some(problem) = problem(image) {
        return Err(InputError::Map { file, problem });
    }
    let bytes = encode(image).map_err(|e| InputError::Fits {
        file,
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

fn encode(image: &ImageOut) -> Result<Vec<u8>, fitsio::errors::Error> {
    let bytes_per_pixel = match image.pixels {
        Pixels::F32(_) => 4,
        Pixels::U8(_) => 1,
    };
    let size_hint = image.pixels.len() * bytes_per_pixel + 8 * FITS_BLOCK;
    encode_fits_in_memory(size_hint, |f| {
        let description = ImageDescription {
            data_type: match image.pixels {
                Pixels::F32(_) => ImageType::Float,
                Pixels::U8(_) => ImageType::UnsignedByte,
            },
            // fitsio takes C order (slowest first), so NAXIS1 = nx.
            dimensions: &[image.ny, image.nx],
        };
        let hdu = f.create_image(image.name, &description)?;
        let mut status: c_int = 0;
        for card in image.cards {
            let key = CString::new(card.key.as_str())?;
            let comment = CString::new(card.comment.as_str())?;
            match &card.value {
                Value::Real(v) => {
                    let digits = (15..17)
                        .find(|d| format!("{:.*e}", d - 1, v).parse::<f64>() == Ok(*v))
                        .unwrap_or(17);
                    // SAFETY: f is open; key and comment are valid C strings.
                    unsafe {
                        sys::ffpkyd(
                            f.as_raw(),
                            key.as_ptr(),
                            *v,
                            -(digits as c_int),
                            comment.as_ptr(),
                            &mut status,
                        )
                    };
                }
                Value::Int(v) => {
                    // SAFETY: as above.
                    unsafe {
                        sys::ffpkyj(f.as_raw(), key.as_ptr(), *v, comment.as_ptr(), &mut status)
                    };
                }
                Value::Text(t) => {
                    let text = CString::new(t.as_str())?;
                    // SAFETY: as above.
                    unsafe {
                        sys::ffpkys(
                            f.as_raw(),
                            key.as_ptr(),
                            text.as_ptr(),
                            comment.as_ptr(),
                            &mut status,
                        )
                    };
                }
            }
            fitsio::errors::check_status(status)?;
        }
        hdu.write_key(f, "ORIGIN", ("astroport", "written by"))?;
        for line in image.history {
            let text = CString::new(line.as_str())?;
            // SAFETY: f is open; text is a valid C string.
            unsafe { sys::ffphis(f.as_raw(), text.as_ptr(), &mut status) };
            fitsio::errors::check_status(status)?;
        }
        match image.pixels {
            Pixels::F32(p) => hdu.write_image(f, p)?,
            Pixels::U8(p) => hdu.write_image(f, p)?,
        }
        Ok(())
    })
}

/// Reads the primary image of a FITS file (any BITPIX, scaled, as float32) with its header.
pub fn read_image(path: &Path) -> Result<ImageIn, InputError> {
    let file = path.display().to_string();
    let mut bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    if let Some(problem) = fits_length_problem(bytes.len()) {
        return Err(InputError::Map { file, problem });
    }
    let fits = |e: fitsio::errors::Error| InputError::Fits {
        file: file.clone(),
        message: e.to_string(),
    };
    let len = bytes.len();
    let (fptr, _slot) = open_fits_in_memory(&mut bytes, c"image.fits").map_err(fits)?;
    // SAFETY: fptr was just opened without error and is owned here.
    let mut f = unsafe { wrap_raw_fits(fptr, FileOpenMode::READONLY) }.map_err(fits)?;
    // SAFETY: f is open, at the primary HDU.
    if let Some(problem) = unsafe { fits_hdu_problem(f.as_raw(), len) } {
        return Err(InputError::Map { file, problem });
    }
    let hdu = f.primary_hdu().map_err(fits)?;
    let (ny, nx) = match &hdu.info {
        HduInfo::ImageInfo { shape, .. } if shape.len() == 2 => (shape[0], shape[1]),
        other => {
            return Err(InputError::Map {
                file,
                problem: format!("the primary HDU is not a 2-D image ({other:?})"),
            })
        }
    };
    let data: Vec<f32> = hdu.read_image(&mut f).map_err(fits)?;
    let mut cards = Vec::new();
    let mut history = Vec::new();
    let mut status: c_int = 0;
    // SAFETY: f is open; each buffer has FLEN_CARD (81) bytes, enough for a key, value or comment.
    unsafe {
        let (mut count, mut room): (c_int, c_int) = (0, 0);
        sys::ffghsp(f.as_raw(), &mut count, &mut room, &mut status);
        for n in 1..=count {
            let mut key = [0 as c_char; 81];
            let mut value = [0 as c_char; 81];
            let mut comment = [0 as c_char; 81];
            sys::ffgkyn(
                f.as_raw(),
                n,
                key.as_mut_ptr(),
                value.as_mut_ptr(),
                comment.as_mut_ptr(),
                &mut status,
            );
            let text = |b: &[c_char]| {
                std::ffi::CStr::from_ptr(b.as_ptr())
                    .to_string_lossy()
                    .into_owned()
            };
            let (key, value) = (text(&key), text(&value));
            if key == "HISTORY" {
                history.push(text(&comment).trim().to_string());
            } else {
                let unquoted = value.trim().trim_matches('\'').trim_end().to_string();
                cards.push((key, unquoted));
            }
        }
    }
    fitsio::errors::check_status(status).map_err(fits)?;
    Ok(ImageIn {
        nx,
        ny,
        data,
        cards,
        history,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_round_trip_with_their_cards() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.fits");
        let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        let cards = [
            Card::real("CRVAL1", 150.123456789012, "RA at CRPIX"),
            Card::int("NCOMBINE", 3, "frames"),
            Card::text("CTYPE1", "RA---TAN", "projection"),
        ];
        let history = vec!["made by a test".to_string()];
        write_image(
            &path,
            &ImageOut {
                nx: 4,
                ny: 3,
                pixels: Pixels::F32(&data),
                name: "SCI",
                cards: &cards,
                history: &history,
            },
        )
        .unwrap();
        let back = read_image(&path).unwrap();
        assert_eq!((back.nx, back.ny), (4, 3));
        assert_eq!(back.data, data);
        assert_eq!(back.real("CRVAL1"), Some(150.123456789012));
        assert_eq!(back.real("NCOMBINE"), Some(3.0));
        assert_eq!(back.card("CTYPE1"), Some("RA---TAN"));
        assert_eq!(back.card("EXTNAME"), Some("SCI"));
        assert_eq!(back.history, history);

        let mask = [0u8, 1, 2, 255];
        let mpath = dir.path().join("m.fits");
        write_image(
            &mpath,
            &ImageOut {
                nx: 2,
                ny: 2,
                pixels: Pixels::U8(&mask),
                name: "MASK",
                cards: &[],
                history: &[],
            },
        )
        .unwrap();
        assert_eq!(read_image(&mpath).unwrap().data, vec![0.0, 1.0, 2.0, 255.0]);
    }

    #[test]
    fn bad_images_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.fits");
        let data = [0f32; 5];
        let e = write_image(
            &path,
            &ImageOut {
                nx: 2,
                ny: 2,
                pixels: Pixels::F32(&data),
                name: "X",
                cards: &[],
                history: &[],
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("does not match its 5 values"), "{e}");
        let e = write_image(
            &path,
            &ImageOut {
                nx: 5,
                ny: 1,
                pixels: Pixels::F32(&data),
                name: "X",
                cards: &[Card::real("bad key", 1.0, "")],
                history: &[],
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a FITS keyword"), "{e}");
        assert!(!path.exists());
    }
}
