//! FITS images in and out, for any workload: a 2-D primary image (float32, or bytes for masks) with the
//! header cards the caller gives (WCS, units, instrument keys) and HISTORY lines, the header encoded by
//! cfitsio and the data converted and written by all threads, atomically; and the reverse, any 2-D primary
//! image read as float32 (or a mask's bytes) with every header card kept as text.

use crate::inputs::{
    encode_fits_in_memory, fits_hdu_problem, fits_length_problem, io_error, open_fits_in_memory,
    wrap_raw_fits, write_atomic_over, InputError, WrittenAhead, FITS_BLOCK,
};
use fitsio::hdu::HduInfo;
use fitsio::images::{ImageDescription, ImageType};
use fitsio::{sys, FileOpenMode};
use rayon::prelude::*;
use std::ffi::{c_char, c_int, CString};
use std::os::unix::fs::FileExt;
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

/// Bands of float32 rows as they are computed: each call hands the next band's first row and its values
/// (whole rows, in order) to the sink and gives back what the sink returned, `None` once there are no
/// more. The band is only lent for the sink's call, so the values may live anywhere (rows of a plane
/// still being filled further down).
pub type RowBands<'a> = &'a (dyn Fn(BandSink) -> Option<std::io::Result<()>> + Sync);

/// What takes a band of [`RowBands`]: its first row and its values.
pub type BandSink<'s> = &'s mut dyn FnMut(usize, &[f32]) -> std::io::Result<()>;

/// The pixels of an image, row by row (x fastest; NAXIS1 = nx).
#[derive(Clone, Copy)]
pub enum Pixels<'a> {
    F32(&'a [f32]),
    /// Float32 written band by band as the bands come: the file holds the image once every row has come,
    /// in order (else nothing is kept).
    F32Rows(RowBands<'a>),
    /// Masks: BITPIX 8.
    U8(&'a [u8]),
}

impl std::fmt::Debug for Pixels<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pixels::F32(p) => write!(f, "F32({} values)", p.len()),
            Pixels::F32Rows(_) => write!(f, "F32Rows"),
            Pixels::U8(p) => write!(f, "U8({} values)", p.len()),
        }
    }
}

impl Pixels<'_> {
    /// The values given now (`None` for bands still to come).
    fn len(&self) -> Option<usize> {
        match self {
            Pixels::F32(p) => Some(p.len()),
            Pixels::F32Rows(_) => None,
            Pixels::U8(p) => Some(p.len()),
        }
    }
    fn sample_bytes(&self) -> usize {
        match self {
            Pixels::F32(_) | Pixels::F32Rows(_) => 4,
            Pixels::U8(_) => 1,
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
pub struct ImageIn<Data = Vec<f32>> {
    pub nx: usize,
    pub ny: usize,
    pub data: Data,
    pub cards: Vec<(String, String)>,
    pub history: Vec<String>,
}

impl<Data> ImageIn<Data> {
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
    if let Some(values) = image.pixels.len() {
        if image.nx.checked_mul(image.ny) != Some(values) {
            return Some(format!(
                "image size {}×{} does not match its {values} values",
                image.nx, image.ny,
            ));
        }
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

/// Pixels per part of the data unit that one thread reads at its offset and converts.
const PART: usize = 1 << 18;

/// Pixels per part of the data unit written at once.
const WRITE_PART: usize = 1 << 20;

/// Writes `image` as a FITS file at `path`, atomically: either the whole file is there or nothing is.
/// cfitsio writes the header; the data unit (big-endian samples, zero-padded to whole records) is written
/// part by part from the calling thread while one helper converts the next parts. One writer per file is
/// what the page cache takes: ext4 and XFS hold the file's lock through a buffered write, so more threads
/// on one file only wait (on the H200 machine 400 MB took 0.14 s from 1 thread and from 16), and a caller
/// writing several planes gets them written at once by writing each from its own thread.
pub fn write_image(path: &Path, image: &ImageOut) -> Result<(), InputError> {
    write_image_over(path, image, None)
}

/// The length of the FITS file [`write_image`] makes of an nx × ny image of `sample_bytes` per pixel, taking
/// its header to be `header_blocks` 2880-byte records: what to write ahead ([`WrittenAhead`]).
pub fn image_file_len(nx: usize, ny: usize, sample_bytes: usize, header_blocks: usize) -> u64 {
    let block = FITS_BLOCK as u64;
    (header_blocks as u64 + ((nx * ny * sample_bytes) as u64).div_ceil(block)) * block
}

/// [`write_image`] over a file written ahead for `path` (`None`: a new one).
pub fn write_image_over(
    path: &Path,
    image: &ImageOut,
    ahead: Option<WrittenAhead>,
) -> Result<(), InputError> {
    let file = path.display().to_string();
    if let Some(problem) = problem(image) {
        return Err(InputError::Map { file, problem });
    }
    let header = encode_header(image).map_err(|e| InputError::Fits {
        file,
        message: e.to_string(),
    })?;
    let width = image.pixels.sample_bytes();
    let total = image_file_len(image.nx, image.ny, width, header.len() / FITS_BLOCK);
    crate::exec::trace_event(|| format!("write {}: begins", path.display()));
    let written = write_atomic_over(path, ahead, |f| {
        // The padding after the data is zeros: the length is set first, the parts fill the rest (a file
        // written ahead is zeros already, and longer or shorter only by a few header records).
        f.set_len(total)?;
        f.write_all_at(&header, 0)?;
        let start = header.len() as u64;
        match image.pixels {
            Pixels::U8(p) => f.write_all_at(p, start),
            Pixels::F32(p) => write_big_endian(f, start, p),
            Pixels::F32Rows(next) => write_bands(f, start, image.nx, image.ny, next),
        }
    });
    crate::exec::trace_event(|| format!("write {}: ends", path.display()));
    written
}

/// Writes the bands `next` gives, big-endian, each at its rows' place after `offset` of `f`, as they come; an
/// error unless they are whole rows, in order, and every row of the ny came.
fn write_bands(
    f: &std::fs::File,
    offset: u64,
    nx: usize,
    ny: usize,
    next: RowBands,
) -> std::io::Result<()> {
    let mut rows_written = 0;
    while let Some(written) = next(&mut |row0, band| {
        let rows = band.len() / nx;
        if row0 != rows_written || rows * nx != band.len() || row0 + rows > ny {
            return Err(std::io::Error::other(format!(
                "a band of {} values from row {row0} after {rows_written} rows of {ny} written \
                 ({nx} values a row)",
                band.len()
            )));
        }
        write_big_endian(f, offset + (4 * row0 * nx) as u64, band)?;
        rows_written += rows;
        Ok(())
    }) {
        written?;
    }
    if rows_written != ny {
        return Err(std::io::Error::other(format!(
            "only {rows_written} of the image's {ny} rows came"
        )));
    }
    Ok(())
}

/// Writes `samples` big-endian at `offset` of `f`: a helper thread converts part after part (two ahead at
/// most), the calling thread writes them in order and hands the spent buffers back.
fn write_big_endian(f: &std::fs::File, offset: u64, samples: &[f32]) -> std::io::Result<()> {
    std::thread::scope(|scope| {
        let (to_writer, converted) = std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(2);
        let (to_converter, spent) = std::sync::mpsc::channel::<Vec<u8>>();
        scope.spawn(move || {
            for (part, chunk) in samples.chunks(WRITE_PART).enumerate() {
                let mut bytes = spent.try_recv().unwrap_or_default();
                bytes.resize(4 * chunk.len(), 0);
                // Whole 4-byte chunks, so the swap vectorises.
                for (b, v) in bytes.chunks_exact_mut(4).zip(chunk) {
                    b.copy_from_slice(&v.to_be_bytes());
                }
                // The writer stopped (an I/O error): nothing more to convert.
                if to_writer.send((part * WRITE_PART, bytes)).is_err() {
                    break;
                }
            }
        });
        for (first, bytes) in converted {
            f.write_all_at(&bytes, offset + 4 * first as u64)?;
            // The converter may have finished and gone: then the buffer is simply dropped.
            let _ = to_converter.send(bytes);
        }
        Ok(())
    })
}

/// The header cfitsio writes for `image`, through the END card and its padding. cfitsio is given a
/// one-row image (writing a full one would make it fill the whole data unit in memory), and the NAXIS2 card
/// then gets the real row count in the standard's fixed format (an integer right-justified in columns
/// 11-30).
fn encode_header(image: &ImageOut) -> Result<Vec<u8>, fitsio::errors::Error> {
    let one_row = encode_fits_in_memory(8 * FITS_BLOCK, |f| {
        let description = ImageDescription {
            data_type: match image.pixels {
                Pixels::F32(_) | Pixels::F32Rows(_) => ImageType::Float,
                Pixels::U8(_) => ImageType::UnsignedByte,
            },
            // fitsio takes C order (slowest first), so NAXIS1 = nx.
            dimensions: &[1, image.nx],
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
        Ok(())
    })?;
    let mut header = one_row[..header_length(&one_row).ok_or_else(|| {
        fitsio::errors::Error::Message("cfitsio wrote a header without an END card".into())
    })?]
        .to_vec();
    let naxis2 = header
        .chunks_exact_mut(CARD)
        .find(|card| card.starts_with(b"NAXIS2  = "))
        .ok_or_else(|| fitsio::errors::Error::Message("cfitsio wrote no NAXIS2 card".into()))?;
    naxis2[10..30].copy_from_slice(format!("{:>20}", image.ny).as_bytes());
    Ok(header)
}

/// Bytes of one header card.
const CARD: usize = 80;

/// The header's length (whole records through the one holding the END card), if `bytes` hold all of it.
fn header_length(bytes: &[u8]) -> Option<usize> {
    bytes
        .chunks_exact(CARD)
        .position(|card| card.starts_with(b"END") && card[3..].iter().all(|&b| b == b' '))
        .map(|k| ((k * CARD) / FITS_BLOCK + 1) * FITS_BLOCK)
}

/// Longest header read: 10,000 records (360,000 cards).
const MAX_HEADER_RECORDS: usize = 10_000;

/// A primary image's samples as stored: masks (BITPIX 8, unscaled) keep their bytes; everything else is
/// scaled to float32.
#[derive(Debug, Clone, PartialEq)]
pub enum Samples {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

/// Reads the primary image of a FITS file (any BITPIX, scaled by BSCALE and BZERO, as float32; integer
/// pixels equal to BLANK become NaN) with its header.
pub fn read_image(path: &Path) -> Result<ImageIn, InputError> {
    read_samples(path).map(ImageIn::floats)
}

impl ImageIn<Samples> {
    /// The samples as float32 (a BITPIX 8 image's bytes widened).
    pub fn floats(self) -> ImageIn {
        let data = match self.data {
            Samples::F32(v) => v,
            Samples::U8(v) => v.par_iter().map(|&b| b as f32).collect(),
        };
        ImageIn {
            nx: self.nx,
            ny: self.ny,
            data,
            cards: self.cards,
            history: self.history,
        }
    }
}

/// [`read_image`] keeping a BITPIX 8 image's bytes. cfitsio reads and checks the header; the data unit is
/// read in parts by all threads, each at its offset, and converted from big-endian where it lands.
pub fn read_samples(path: &Path) -> Result<ImageIn<Samples>, InputError> {
    let file = path.display().to_string();
    let map = |problem: String| InputError::Map {
        file: file.clone(),
        problem,
    };
    let fits = |e: fitsio::errors::Error| InputError::Fits {
        file: file.clone(),
        message: e.to_string(),
    };
    let f = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
    let len = f.metadata().map_err(|e| io_error(path, e))?.len() as usize;
    if let Some(problem) = fits_length_problem(len) {
        return Err(map(problem));
    }
    // The header: records up to the one with the END card.
    let mut header = Vec::new();
    loop {
        if header.len() >= len || header.len() >= MAX_HEADER_RECORDS * FITS_BLOCK {
            return Err(map(format!(
                "no END card in the first {} header records: not a FITS file",
                header.len() / FITS_BLOCK
            )));
        }
        let at = header.len();
        header.resize(at + FITS_BLOCK, 0);
        f.read_exact_at(&mut header[at..], at as u64)
            .map_err(|e| io_error(path, e))?;
        if header_length(&header).is_some() {
            break;
        }
    }
    let (fptr, _slot) = open_fits_in_memory(&mut header, c"image.fits").map_err(fits)?;
    // SAFETY: fptr was just opened without error and is owned here.
    let mut fits_file = unsafe { wrap_raw_fits(fptr, FileOpenMode::READONLY) }.map_err(fits)?;
    // SAFETY: fits_file is open, at the primary HDU; `len` is the whole file's length.
    if let Some(problem) = unsafe { fits_hdu_problem(fits_file.as_raw(), len) } {
        return Err(map(problem));
    }
    let hdu = fits_file.primary_hdu().map_err(fits)?;
    let (ny, nx) = match &hdu.info {
        HduInfo::ImageInfo { shape, .. } if shape.len() == 2 => (shape[0], shape[1]),
        other => {
            return Err(map(format!(
                "the primary HDU is not a 2-D image ({other:?})"
            )))
        }
    };
    let (cards, history) = header_cards(&mut fits_file).map_err(fits)?;
    let (mut data_start, mut status) = (0i64, 0);
    let (mut head, mut data_end) = (0i64, 0i64);
    // SAFETY: fits_file is open.
    unsafe {
        sys::ffghadll(
            fits_file.as_raw(),
            &mut head,
            &mut data_start,
            &mut data_end,
            &mut status,
        )
    };
    fitsio::errors::check_status(status).map_err(fits)?;
    drop(fits_file);
    let card = |key: &str| {
        cards
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let number = |key: &str, default: f64| -> Result<f64, InputError> {
        match card(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| map(format!("header card {key} = {v:?} is not a number"))),
        }
    };
    let bitpix = number("BITPIX", 0.0)? as i32;
    let (scale, zero) = (number("BSCALE", 1.0)?, number("BZERO", 0.0)?);
    let blank = card("BLANK").and_then(|v| v.trim().parse::<i64>().ok());
    let layout = DataUnit {
        start: data_start as u64,
        count: nx * ny,
        bitpix,
        scale,
        zero,
        blank,
    };
    let data = layout.read(&f).map_err(|e| match e {
        ReadProblem::Io(e) => io_error(path, e),
        ReadProblem::Bitpix => map(format!("BITPIX = {bitpix} is not a FITS sample type")),
    })?;
    Ok(ImageIn {
        nx,
        ny,
        data,
        cards,
        history,
    })
}

/// A header's cards as (key, value text).
type HeaderCards = Vec<(String, String)>;

/// Every card of the current HDU as (key, value text) without string quotes, and the HISTORY lines.
fn header_cards(
    f: &mut fitsio::FitsFile,
) -> Result<(HeaderCards, Vec<String>), fitsio::errors::Error> {
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
    fitsio::errors::check_status(status)?;
    Ok((cards, history))
}

/// Where a primary image's samples lie in its file and how they become values.
struct DataUnit {
    start: u64,
    count: usize,
    bitpix: i32,
    scale: f64,
    zero: f64,
    blank: Option<i64>,
}

enum ReadProblem {
    Io(std::io::Error),
    Bitpix,
}

impl DataUnit {
    fn read(&self, f: &std::fs::File) -> Result<Samples, ReadProblem> {
        let width = match self.bitpix {
            8 => 1,
            16 => 2,
            32 | -32 => 4,
            64 | -64 => 8,
            _ => return Err(ReadProblem::Bitpix),
        };
        let unscaled = self.scale == 1.0 && self.zero == 0.0;
        if self.bitpix == 8 && unscaled && self.blank.is_none() {
            let mut out = vec![0u8; self.count];
            self.fill(f, &mut out, 1, |raw, out| out.copy_from_slice(raw))?;
            return Ok(Samples::U8(out));
        }
        let (scale, zero, blank) = (self.scale, self.zero, self.blank);
        // Integers: BLANK marks a missing pixel; the rest are scaled in float64, as cfitsio does.
        let integer = move |v: i64| match blank {
            Some(b) if v == b => f32::NAN,
            _ => (v as f64 * scale + zero) as f32,
        };
        let mut out = vec![0f32; self.count];
        let read = |convert: fn(&[u8]) -> f64| {
            move |raw: &[u8], out: &mut [f32]| {
                for (o, r) in out.iter_mut().zip(raw.chunks_exact(width)) {
                    *o = (convert(r) * scale + zero) as f32;
                }
            }
        };
        match self.bitpix {
            -32 if unscaled => self.fill(f, &mut out, 4, |raw, out| {
                for (o, r) in out.iter_mut().zip(raw.chunks_exact(4)) {
                    *o = f32::from_be_bytes([r[0], r[1], r[2], r[3]]);
                }
            }),
            -32 => self.fill(
                f,
                &mut out,
                4,
                read(|r| be::<4, _>(r, f32::from_be_bytes) as f64),
            ),
            -64 => self.fill(f, &mut out, 8, read(|r| be::<8, _>(r, f64::from_be_bytes))),
            _ => self.fill(f, &mut out, width, |raw, out| {
                for (o, r) in out.iter_mut().zip(raw.chunks_exact(width)) {
                    *o = integer(match width {
                        1 => r[0] as i64,
                        2 => be::<2, _>(r, i16::from_be_bytes) as i64,
                        4 => be::<4, _>(r, i32::from_be_bytes) as i64,
                        _ => be::<8, _>(r, i64::from_be_bytes),
                    });
                }
            }),
        }?;
        Ok(Samples::F32(out))
    }

    /// Reads the samples into `out` in parts, all threads at once, each part converted by `convert` from its
    /// raw bytes (`width` per sample).
    fn fill<T: Send>(
        &self,
        f: &std::fs::File,
        out: &mut [T],
        width: usize,
        convert: impl Fn(&[u8], &mut [T]) + Sync,
    ) -> Result<(), ReadProblem> {
        out.par_chunks_mut(PART)
            .enumerate()
            .try_for_each_init(
                || vec![0u8; PART * width],
                |raw, (part, out)| {
                    let raw = &mut raw[..out.len() * width];
                    f.read_exact_at(raw, self.start + (part * PART * width) as u64)?;
                    convert(raw, out);
                    Ok(())
                },
            )
            .map_err(ReadProblem::Io)
    }
}

/// A big-endian number from the first N bytes of `raw`.
fn be<const N: usize, T>(raw: &[u8], from: fn([u8; N]) -> T) -> T {
    from(raw[..N].try_into().expect("a whole sample"))
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

    /// A FITS file built by hand: the mandatory cards, `extra` cards (key, value), END, and the data.
    fn raw_fits(bitpix: i32, nx: usize, ny: usize, extra: &[(&str, &str)], data: &[u8]) -> Vec<u8> {
        let mut cards = vec![
            ("SIMPLE".to_string(), "T".to_string()),
            ("BITPIX".into(), bitpix.to_string()),
            ("NAXIS".into(), "2".into()),
            ("NAXIS1".into(), nx.to_string()),
            ("NAXIS2".into(), ny.to_string()),
        ];
        cards.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut bytes: Vec<u8> = cards
            .iter()
            .flat_map(|(k, v)| format!("{k:<8}= {v:>20}{:50}", "").into_bytes())
            .collect();
        bytes.extend(format!("{:<80}", "END").into_bytes());
        bytes.resize(bytes.len().div_ceil(FITS_BLOCK) * FITS_BLOCK, b' ');
        bytes.extend_from_slice(data);
        bytes.resize(bytes.len().div_ceil(FITS_BLOCK) * FITS_BLOCK, 0);
        bytes
    }

    /// cfitsio's own reading of a primary image, scaled, as float32.
    fn cfitsio_values(path: &Path) -> Vec<f32> {
        let mut f = fitsio::FitsFile::open(path).unwrap();
        let hdu = f.primary_hdu().unwrap();
        hdu.read_image(&mut f).unwrap()
    }

    #[test]
    fn every_bitpix_reads_as_cfitsio_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        // 700 × 400 pixels: more than one part of the parallel reader.
        let (nx, ny) = (700, 400);
        let n = nx * ny;
        let wave = |i: usize| ((i * 7919) % 1000) as f64 - 500.0;
        type Case = (i32, Vec<(&'static str, &'static str)>, Vec<u8>);
        let cases: Vec<Case> = vec![
            (8, vec![], (0..n).map(|i| (i % 251) as u8).collect()),
            (
                8,
                vec![("BZERO", "-128")],
                (0..n).map(|i| (i % 256) as u8).collect(),
            ),
            (
                16,
                vec![("BZERO", "32768"), ("BSCALE", "1")],
                (0..n)
                    .flat_map(|i| ((wave(i) * 60.0) as i16).to_be_bytes())
                    .collect(),
            ),
            (
                32,
                vec![("BSCALE", "0.5"), ("BZERO", "-3")],
                (0..n)
                    .flat_map(|i| ((wave(i) * 1e5) as i32).to_be_bytes())
                    .collect(),
            ),
            (
                64,
                vec![],
                (0..n)
                    .flat_map(|i| ((wave(i) * 1e9) as i64).to_be_bytes())
                    .collect(),
            ),
            (
                -32,
                vec![],
                (0..n)
                    .flat_map(|i| ((wave(i) * 1.37) as f32).to_be_bytes())
                    .collect(),
            ),
            (
                -32,
                vec![("BSCALE", "2.5")],
                (0..n)
                    .flat_map(|i| (wave(i) as f32).to_be_bytes())
                    .collect(),
            ),
            (
                -64,
                vec![],
                (0..n)
                    .flat_map(|i| (wave(i) * 1.1e-3).to_be_bytes())
                    .collect(),
            ),
        ];
        for (k, (bitpix, extra, data)) in cases.into_iter().enumerate() {
            let path = dir.path().join(format!("{k}.fits"));
            std::fs::write(&path, raw_fits(bitpix, nx, ny, &extra, &data)).unwrap();
            let ours = read_samples(&path).unwrap();
            assert_eq!((ours.nx, ours.ny), (nx, ny));
            let expected = cfitsio_values(&path);
            let values = match ours.data {
                Samples::U8(bytes) => {
                    assert!(
                        bitpix == 8 && extra.is_empty(),
                        "case {k}: bytes kept only when unscaled"
                    );
                    bytes.iter().map(|&b| b as f32).collect()
                }
                Samples::F32(v) => {
                    assert!(
                        !(bitpix == 8 && extra.is_empty()),
                        "case {k}: a mask keeps its bytes"
                    );
                    v
                }
            };
            assert_eq!(values.len(), expected.len());
            let bad = values
                .iter()
                .zip(&expected)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            assert_eq!(
                bad, None,
                "case {k} (BITPIX {bitpix} {extra:?}): first pixel that differs"
            );
            assert_eq!(
                read_image(&path).unwrap().data,
                expected,
                "case {k} as float32"
            );
        }
    }

    #[test]
    fn blank_integer_pixels_read_as_not_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blank.fits");
        let raw: Vec<i16> = vec![5, -32768, 7, -32768, 9, 11];
        let data: Vec<u8> = raw.iter().flat_map(|v| v.to_be_bytes()).collect();
        std::fs::write(
            &path,
            raw_fits(16, 3, 2, &[("BLANK", "-32768"), ("BZERO", "10")], &data),
        )
        .unwrap();
        let values = read_image(&path).unwrap().data;
        assert_eq!(values[0], 15.0);
        assert!(values[1].is_nan() && values[3].is_nan());
        assert_eq!((values[2], values[4], values[5]), (17.0, 19.0, 21.0));
    }

    #[test]
    fn large_images_round_trip_through_cfitsio() {
        let dir = tempfile::tempdir().unwrap();
        // Over WRITE_PART pixels, so the float32 data goes out in two parts, the second a short one.
        let (nx, ny) = (1031, 1019);
        assert!(nx * ny > WRITE_PART && nx * ny < 2 * WRITE_PART);
        let data: Vec<f32> = (0..nx * ny).map(|i| (i as f32).sin() * 1e4).collect();
        let mask: Vec<u8> = (0..nx * ny).map(|i| (i % 7) as u8).collect();
        for (name, pixels) in [
            ("f.fits", Pixels::F32(&data)),
            ("m.fits", Pixels::U8(&mask)),
        ] {
            let path = dir.path().join(name);
            let cards = [Card::real("GAIN", 1.5, "e/ADU")];
            let history = vec!["round trip".to_string()];
            let image = ImageOut {
                nx,
                ny,
                pixels,
                name: "IMG",
                cards: &cards,
                history: &history,
            };
            write_image(&path, &image).unwrap();
            // cfitsio reads back the shape (NAXIS2 patched into its header), the values and the cards.
            let mut f = fitsio::FitsFile::open(&path).unwrap();
            let hdu = f.primary_hdu().unwrap();
            match &hdu.info {
                HduInfo::ImageInfo { shape, .. } => assert_eq!(shape, &vec![ny, nx]),
                other => panic!("{other:?}"),
            }
            let gain: f64 = hdu.read_key(&mut f, "GAIN").unwrap();
            assert_eq!(gain, 1.5);
            let expected: Vec<f32> = match pixels {
                Pixels::F32(p) => p.to_vec(),
                Pixels::U8(p) => p.iter().map(|&b| b as f32).collect(),
                Pixels::F32Rows(_) => unreachable!("whole images only here"),
            };
            assert_eq!(cfitsio_values(&path), expected);
            let len = std::fs::metadata(&path).unwrap().len() as usize;
            assert_eq!(len % FITS_BLOCK, 0);
            let back = read_samples(&path).unwrap();
            assert_eq!(back.history, history);
            match (back.data, pixels) {
                (Samples::F32(v), Pixels::F32(p)) => assert_eq!(v, p),
                (Samples::U8(v), Pixels::U8(p)) => assert_eq!(v, p),
                _ => panic!("{name}: sample type changed"),
            }
        }
    }

    #[test]
    fn images_written_over_a_file_written_ahead_are_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (nx, ny) = (1031, 1019);
        let data: Vec<f32> = (0..nx * ny).map(|i| (i as f32).cos() * 3e3 - 7.0).collect();
        let mask: Vec<u8> = (0..nx * ny).map(|i| (i % 5) as u8).collect();
        let cards = [Card::real("GAIN", 1.5, "e/ADU")];
        let history = vec!["written ahead".to_string()];
        for (name, pixels, bytes) in [
            ("f.fits", Pixels::F32(&data), 4),
            ("m.fits", Pixels::U8(&mask), 1),
        ] {
            let image = ImageOut {
                nx,
                ny,
                pixels,
                name: "IMG",
                cards: &cards,
                history: &history,
            };
            let plain = dir.path().join(format!("plain-{name}"));
            write_image(&plain, &image).unwrap();
            let expected = std::fs::read(&plain).unwrap();
            // Written ahead with more header records than the header takes, with fewer, and with none
            // (the data then reaches past the zeros): the same file each time, and no temporary left.
            for header_blocks in [6, 1, 0] {
                let path = dir.path().join(format!("{header_blocks}-{name}"));
                let len = image_file_len(nx, ny, bytes, header_blocks);
                let ahead = WrittenAhead::new(&path, len).unwrap();
                write_image_over(&path, &image, Some(ahead)).unwrap();
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    expected,
                    "{header_blocks} {name}"
                );
            }
        }
        // A file written ahead and never used is removed.
        drop(WrittenAhead::new(&dir.path().join("unused.fits"), 10_000).unwrap());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "0-f.fits",
                "0-m.fits",
                "1-f.fits",
                "1-m.fits",
                "6-f.fits",
                "6-m.fits",
                "plain-f.fits",
                "plain-m.fits"
            ]
        );
    }

    /// Bands of rows as they come (uneven, the last short; over a file written ahead or new) make the file
    /// the whole image makes; bands out of order, not whole rows, or too few leave no file.
    #[test]
    fn images_written_in_bands_of_rows_are_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (nx, ny) = (1031, 1019);
        let data: Vec<f32> = (0..nx * ny).map(|i| (i as f32).sin() * 2e3 + 5.0).collect();
        let cards = [Card::real("GAIN", 1.5, "e/ADU")];
        let history = vec!["in bands".to_string()];
        fn image<'a>(
            nx: usize,
            ny: usize,
            pixels: Pixels<'a>,
            cards: &'a [Card],
            history: &'a [String],
        ) -> ImageOut<'a> {
            ImageOut {
                nx,
                ny,
                pixels,
                name: "SNR",
                cards,
                history,
            }
        }
        let plain = dir.path().join("plain.fits");
        write_image(&plain, &image(nx, ny, Pixels::F32(&data), &cards, &history)).unwrap();
        let expected = std::fs::read(&plain).unwrap();
        // Bands of the given first rows (each to the next, the last to `end`).
        let banded = |starts: &[usize], end: usize| {
            let bands: Vec<(usize, &[f32])> = starts
                .iter()
                .zip(starts.iter().skip(1).chain([&end]))
                .map(|(&a, &b)| (a, &data[a * nx..b * nx]))
                .collect();
            std::sync::Mutex::new(bands.into_iter())
        };
        for (k, ahead) in [false, true].into_iter().enumerate() {
            let path = dir.path().join(format!("bands-{k}.fits"));
            let ahead =
                ahead.then(|| WrittenAhead::new(&path, image_file_len(nx, ny, 4, 4)).unwrap());
            let bands = banded(&[0, 1, 300, 301, 1000], ny);
            let next = |sink: BandSink| {
                let band = bands.lock().unwrap().next();
                band.map(|(row0, values)| sink(row0, values))
            };
            let pixels = Pixels::F32Rows(&next);
            write_image_over(&path, &image(nx, ny, pixels, &cards, &history), ahead).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), expected, "ahead: {}", k == 1);
        }
        let refused = |bands: std::sync::Mutex<std::vec::IntoIter<(usize, &[f32])>>, why: &str| {
            let path = dir.path().join("refused.fits");
            let next = |sink: BandSink| {
                let band = bands.lock().unwrap().next();
                band.map(|(row0, values)| sink(row0, values))
            };
            let pixels = Pixels::F32Rows(&next);
            let err = write_image_over(&path, &image(nx, ny, pixels, &cards, &history), None)
                .unwrap_err();
            assert!(!path.exists(), "{why}: a file was left");
            err.to_string()
        };
        let band = |a: usize, b: usize| (a, &data[a * nx..b * nx]);
        let overlapping = std::sync::Mutex::new(vec![band(0, 300), band(200, 400)].into_iter());
        let err = refused(overlapping, "out of order");
        assert!(err.contains("from row 200 after 300 rows"), "{err}");
        let err = refused(banded(&[0, 300], 500), "too few");
        assert!(
            err.contains("only 500 of the image's 1019 rows came"),
            "{err}"
        );
        let short = std::sync::Mutex::new(vec![(0, &data[..nx + 3])].into_iter());
        let err = refused(short, "not whole rows");
        assert!(
            err.contains(&format!("a band of {} values", nx + 3)),
            "{err}"
        );
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, 3, "plain, bands-0 and bands-1 alone");
    }

    #[test]
    fn truncated_and_headerless_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..1200u32)
            .flat_map(|v| (v as f32).to_be_bytes())
            .collect();
        let whole = raw_fits(-32, 30, 40, &[], &data);
        assert_eq!(whole.len(), 3 * FITS_BLOCK);
        let cut = dir.path().join("cut.fits");
        std::fs::write(&cut, &whole[..2 * FITS_BLOCK]).unwrap();
        let e = read_image(&cut).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let text = dir.path().join("text.fits");
        std::fs::write(&text, vec![b'x'; FITS_BLOCK]).unwrap();
        let e = read_image(&text).unwrap_err().to_string();
        assert!(e.contains("not a FITS file"), "{e}");
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
