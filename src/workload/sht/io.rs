//! HEALPix maps and a_lm in FITS, in the layouts healpy writes and reads (`write_map`/`read_map`,
//! `write_alm`/`read_alm`).
//!
//! - A map is a BINTABLE extension (HDU 1) with `PIXTYPE = 'HEALPIX'`, `ORDERING = 'RING'` or `'NESTED'`,
//!   `NSIDE`, and one column per field (TEMPERATURE, or I/Q/U), scalar or vector (healpy writes rows of 1024
//!   pixels). NESTED maps are converted to RING on reading (NESTED needs nside a power of two). Maps are
//!   written in RING, float64, one pixel per row, with healpy's keywords.
//! - a_lm are a BINTABLE with INDEX = l² + l + m + 1 (m ≥ 0), REAL and IMAG, and `MAX-LPOL`/`MAX-MPOL`.
//!
//! Files are read whole into memory and decoded there; they are written in memory and then atomically
//! (`inputs::write_atomic`), so a failed command leaves no partial file.

use super::alm::Alm;
use crate::inputs::{
    encode_fits_in_memory, fits_column_f64, fits_column_type, fits_hdu_problem,
    fits_length_problem, io_error, open_fits_in_memory, wrap_raw_fits, write_atomic, InputError,
};
use fitsio::hdu::HduInfo;
use fitsio::tables::{ColumnDataType, ColumnDescription};
use fitsio::{FileOpenMode, FitsFile};
use realfft::num_complex::Complex64;
use std::path::Path;

/// A full-sky HEALPix map in RING order: one or more fields of 12 nside² pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct HealpixMap {
    pub nside: usize,
    /// (column name, pixels in RING order).
    pub fields: Vec<(String, Vec<f64>)>,
}

/// What went wrong decoding a file, before the file's name is attached.
enum Problem {
    Fits(fitsio::errors::Error),
    Content(String),
}

impl From<fitsio::errors::Error> for Problem {
    fn from(e: fitsio::errors::Error) -> Self {
        Problem::Fits(e)
    }
}

fn named(path: &Path, p: Problem) -> InputError {
    let file = path.display().to_string();
    match p {
        Problem::Fits(e) => InputError::Fits {
            file,
            message: e.to_string(),
        },
        Problem::Content(problem) => InputError::Content { file, problem },
    }
}

/// The file's bytes, refused if they are not whole FITS records.
fn read_bytes(path: &Path) -> Result<Vec<u8>, InputError> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    if let Some(problem) = fits_length_problem(bytes.len()) {
        return Err(InputError::Content {
            file: path.display().to_string(),
            problem,
        });
    }
    Ok(bytes)
}

/// An open in-memory table, with the slot cfitsio reads the memory file's address from (it must outlive
/// the file: `file` is declared first, so it is dropped, and closed, first).
struct Table {
    file: FitsFile,
    _slot: crate::inputs::MemorySlot,
    /// The extension's 1-based index.
    index: usize,
    rows: usize,
    names: Vec<String>,
}

/// HDUs in an in-memory file (the primary one included).
fn hdu_count(bytes: &mut [u8]) -> Result<usize, Problem> {
    let (fptr, _slot) = open_fits_in_memory(bytes, c"healpix.fits")?;
    // SAFETY: fptr was just opened without error and is owned here.
    let mut f = unsafe { wrap_raw_fits(fptr, FileOpenMode::READONLY) }?;
    let (mut n, mut status) = (0, 0);
    // SAFETY: f is open.
    unsafe { fitsio::sys::ffthdu(f.as_raw(), &mut n, &mut status) };
    fitsio::errors::check_status(status)?;
    Ok(n.max(0) as usize)
}

/// Opens extension `index` (1-based, after the primary HDU) of an in-memory file as a binary table. `bytes`
/// must outlive the table.
fn open_table(bytes: &mut [u8], index: usize) -> Result<Table, Problem> {
    let len = bytes.len();
    let (fptr, slot) = open_fits_in_memory(bytes, c"healpix.fits")?;
    // SAFETY: fptr was just opened without error and is owned here.
    let mut f = unsafe { wrap_raw_fits(fptr, FileOpenMode::READONLY) }?;
    let hdu = f
        .hdu(index)
        .map_err(|_| Problem::Content(format!("no extension HDU {index} (a HEALPix BINTABLE)")))?;
    // SAFETY: f is open, at that HDU.
    if let Some(problem) = unsafe { fits_hdu_problem(f.as_raw(), len) } {
        return Err(Problem::Content(problem));
    }
    match &hdu.info {
        HduInfo::TableInfo {
            column_descriptions,
            num_rows,
        } => Ok(Table {
            index,
            rows: *num_rows,
            names: column_descriptions.iter().map(|c| c.name.clone()).collect(),
            file: f,
            _slot: slot,
        }),
        other => Err(Problem::Content(format!(
            "HDU {index} is not a table ({other:?})"
        ))),
    }
}

/// A keyword of the table's HDU as text (numbers as written), None when absent.
fn key_text(t: &mut Table, key: &str) -> Option<String> {
    let f = &mut t.file;
    let hdu = f.hdu(t.index).ok()?;
    hdu.read_key::<String>(f, key)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Elements per row of a 0-based column (its repeat count).
fn column_repeat(f: &mut FitsFile, column: usize) -> Result<usize, Problem> {
    // SAFETY: f is open at the table's HDU.
    let (_, repeat, _) = unsafe { fits_column_type(f.as_raw(), column) }?;
    Ok(repeat.max(0) as usize)
}

/// `n` values of a 0-based numeric column, row after row; null cells become NaN.
fn column_values(f: &mut FitsFile, column: usize, n: usize) -> Result<Vec<f64>, Problem> {
    // SAFETY: f is open at the table's HDU; callers ask for at most the column's rows × repeat values.
    Ok(unsafe { fits_column_f64(f.as_raw(), column, n) }?)
}

/// Reads the first `fields` columns of a healpy map file (1: temperature; 3: I, Q, U), in RING order.
pub fn read_healpix_map(path: &Path, fields: usize) -> Result<HealpixMap, InputError> {
    let mut bytes = read_bytes(path)?;
    decode_map(&mut bytes, fields).map_err(|p| named(path, p))
}

fn decode_map(bytes: &mut [u8], fields: usize) -> Result<HealpixMap, Problem> {
    let mut table = open_table(bytes, 1)?;
    let (rows, names) = (table.rows, std::mem::take(&mut table.names));
    let t = &mut table;
    let pixtype = key_text(t, "PIXTYPE").unwrap_or_default();
    if pixtype != "HEALPIX" {
        return Err(Problem::Content(format!(
            "keyword PIXTYPE is '{pixtype}', a HEALPix map has 'HEALPIX'"
        )));
    }
    if let Some(scheme) = key_text(t, "INDXSCHM") {
        if scheme != "IMPLICIT" {
            return Err(Problem::Content(format!(
                "keyword INDXSCHM is '{scheme}': only full-sky (IMPLICIT) maps are read"
            )));
        }
    }
    let ordering = key_text(t, "ORDERING").unwrap_or_default();
    let nested = match ordering.as_str() {
        "RING" => false,
        "NESTED" => true,
        other => {
            return Err(Problem::Content(format!(
                "keyword ORDERING is '{other}', expected 'RING' or 'NESTED'"
            )))
        }
    };
    let nside_text = key_text(t, "NSIDE").unwrap_or_default();
    let nside = match nside_text.parse::<i64>() {
        Ok(n) if (1..=1 << 20).contains(&n) => n as usize,
        _ => {
            return Err(Problem::Content(format!(
                "keyword NSIDE is '{nside_text}', expected an integer in 1..=2^20"
            )))
        }
    };
    if nested && !nside.is_power_of_two() {
        return Err(Problem::Content(format!(
            "keyword NSIDE is {nside} with ORDERING 'NESTED': NESTED numbering needs a power of two"
        )));
    }
    if names.len() < fields {
        return Err(Problem::Content(format!(
            "the table has {} column(s) ({}), {fields} field(s) were asked for",
            names.len(),
            names.join(", ")
        )));
    }
    let npix = 12 * nside * nside;
    let mut out = Vec::with_capacity(fields);
    for (c, name) in names.iter().enumerate().take(fields) {
        let repeat = column_repeat(&mut t.file, c)?;
        if rows * repeat != npix {
            return Err(Problem::Content(format!(
                "column '{name}' holds {} pixels ({rows} rows of {repeat}), NSIDE {nside} needs {npix}",
                rows * repeat
            )));
        }
        let values = column_values(&mut t.file, c, npix)?;
        let ring = if nested {
            let mut ring = vec![0.0; npix];
            for (p, v) in values.iter().enumerate() {
                ring[nest_to_ring(nside, p)] = *v;
            }
            ring
        } else {
            values
        };
        out.push((name.clone(), ring));
    }
    Ok(HealpixMap { nside, fields: out })
}

/// Writes a map given in RING order as float64 columns with healpy's keywords, in RING order or (`nested`,
/// nside a power of two) NESTED; `fields` are (column name, pixels).
pub fn write_healpix_map(
    path: &Path,
    nside: usize,
    nested: bool,
    fields: &[(&str, &[f64])],
) -> Result<(), InputError> {
    let npix = 12 * nside * nside;
    let file = path.display().to_string();
    if let Some((name, v)) = fields.iter().find(|(_, v)| v.len() != npix) {
        return Err(InputError::Map {
            file,
            problem: format!(
                "field '{name}' has {} pixels, nside {nside} has {npix}",
                v.len()
            ),
        });
    }
    if nested && !nside.is_power_of_two() {
        return Err(InputError::Map {
            file,
            problem: format!("nside {nside} is not a power of two: NESTED numbering needs one"),
        });
    }
    let reordered: Vec<Vec<f64>> = if nested {
        fields
            .iter()
            .map(|(_, ring)| (0..npix).map(|p| ring[nest_to_ring(nside, p)]).collect())
            .collect()
    } else {
        Vec::new()
    };
    let columns_data: Vec<&[f64]> = if nested {
        reordered.iter().map(|v| v.as_slice()).collect()
    } else {
        fields.iter().map(|(_, v)| *v).collect()
    };
    let bytes = encode_fits_in_memory(fields.len() * npix * 8 + 4 * 2880, |f| {
        let columns = fields
            .iter()
            .map(|(name, _)| {
                ColumnDescription::new(*name)
                    .with_type(ColumnDataType::Double)
                    .create()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hdu = f.create_table("xtension", &columns)?;
        for (key, value, comment) in [
            ("PIXTYPE", "HEALPIX", "HEALPIX pixelisation"),
            (
                "ORDERING",
                if nested { "NESTED" } else { "RING" },
                "Pixel ordering scheme, either RING or NESTED",
            ),
            ("INDXSCHM", "IMPLICIT", "Indexing: IMPLICIT or EXPLICIT"),
            (
                "OBJECT",
                "FULLSKY",
                "Sky coverage, either FULLSKY or PARTIAL",
            ),
            ("ORIGIN", "astroport", "written by"),
        ] {
            hdu.write_key(f, key, (value, comment))?;
        }
        hdu.write_key(
            f,
            "NSIDE",
            (nside as i64, "Resolution parameter of HEALPIX"),
        )?;
        hdu.write_key(f, "FIRSTPIX", (0i64, "First pixel # (0 based)"))?;
        hdu.write_key(f, "LASTPIX", (npix as i64 - 1, "Last pixel # (0 based)"))?;
        for ((name, _), values) in fields.iter().zip(&columns_data) {
            hdu.write_col(f, *name, values)?;
        }
        Ok(())
    })
    .map_err(|e| InputError::Fits {
        file: file.clone(),
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

/// Reads coefficients written by healpy's `write_alm` (or [`write_alm_fits`]): one set per extension HDU
/// (T, or T, E, B), each with INDEX = l² + l + m + 1, REAL, IMAG. lmax and mmax are the largest present (a
/// table with `MAX-LPOL` must agree with its indices).
pub fn read_alm_fits(path: &Path) -> Result<Vec<Alm>, InputError> {
    let mut bytes = read_bytes(path)?;
    let hdus = hdu_count(&mut bytes).map_err(|p| named(path, p))?;
    if hdus < 2 {
        return Err(named(
            path,
            Problem::Content("no extension HDU (healpy writes a_lm in BINTABLEs)".into()),
        ));
    }
    (1..hdus)
        .map(|index| {
            decode_alm(&mut bytes, index).map_err(|p| match p {
                Problem::Content(c) => named(path, Problem::Content(format!("HDU {index}: {c}"))),
                other => named(path, other),
            })
        })
        .collect()
}

fn decode_alm(bytes: &mut [u8], index: usize) -> Result<Alm, Problem> {
    let mut table = open_table(bytes, index)?;
    let (rows, names) = (table.rows, std::mem::take(&mut table.names));
    let t = &mut table;
    let wanted = ["INDEX", "REAL", "IMAG"];
    let mut columns = [0usize; 3];
    for (slot, want) in columns.iter_mut().zip(wanted) {
        *slot = names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(want))
            .ok_or_else(|| {
                Problem::Content(format!(
                    "no column '{want}' (columns: {}); healpy's a_lm tables have INDEX, REAL, IMAG",
                    names.join(", ")
                ))
            })?;
    }
    let index = column_values(&mut t.file, columns[0], rows)?;
    let re = column_values(&mut t.file, columns[1], rows)?;
    let im = column_values(&mut t.file, columns[2], rows)?;
    let mut lm = Vec::with_capacity(rows);
    for (row, &i) in index.iter().enumerate() {
        if !(i.is_finite() && i >= 1.0 && i.fract() == 0.0 && i < 2f64.powi(53)) {
            return Err(Problem::Content(format!(
                "row {}: INDEX {i} is not a positive integer",
                row + 1
            )));
        }
        let k = i as u64 - 1;
        let l = (k as f64).sqrt() as u64;
        let l = if (l + 1) * (l + 1) <= k { l + 1 } else { l };
        let m = k as i64 - (l * l + l) as i64;
        if m < 0 {
            return Err(Problem::Content(format!(
                "row {}: INDEX {i} is l = {l}, m = {m} (healpy's files hold m ≥ 0 only)",
                row + 1
            )));
        }
        lm.push((l as usize, m as usize));
    }
    let lmax = lm.iter().map(|p| p.0).max().unwrap_or(0);
    let mmax = lm.iter().map(|p| p.1).max().unwrap_or(0);
    if let Some(declared) = key_text(t, "MAX-LPOL").and_then(|s| s.parse::<usize>().ok()) {
        if declared != lmax {
            return Err(Problem::Content(format!(
                "keyword MAX-LPOL is {declared}, the largest l in INDEX is {lmax}"
            )));
        }
    }
    // A sparse table (a few rows reaching a huge l) would allocate the whole triangle: refused.
    if mmax > lmax || Alm::len_for(lmax, mmax) > 2 * rows + 1024 {
        return Err(Problem::Content(format!(
            "INDEX reaches l = {lmax}, m = {mmax} with only {rows} rows: sparse a_lm tables are not read"
        )));
    }
    let mut alm = Alm::zeros(lmax, mmax);
    for (row, (&(l, m), (r, i))) in lm.iter().zip(re.iter().zip(&im)).enumerate() {
        if !(r.is_finite() && i.is_finite()) {
            return Err(Problem::Content(format!(
                "row {} (l = {l}, m = {m}): value ({r}, {i}) is not finite",
                row + 1
            )));
        }
        let at = alm.index(l, m);
        alm.coeffs[at] = Complex64::new(*r, *i);
    }
    Ok(alm)
}

/// Writes coefficients as healpy's `write_alm` does, one extension HDU per set (T, or T, E, B): INDEX
/// (int32), REAL, IMAG (float64), MAX-LPOL and MAX-MPOL.
pub fn write_alm_fits(path: &Path, sets: &[&Alm]) -> Result<(), InputError> {
    let file = path.display().to_string();
    let mut tables = Vec::with_capacity(sets.len());
    for alm in sets {
        alm.check().map_err(|problem| InputError::Map {
            file: file.clone(),
            problem,
        })?;
        let mut index = Vec::with_capacity(alm.coeffs.len());
        let (mut re, mut im) = (Vec::new(), Vec::new());
        for m in 0..=alm.mmax {
            for l in m..=alm.lmax {
                index.push((l * l + l + m + 1) as i64);
                let c = alm.coeffs[alm.index(l, m)];
                re.push(c.re);
                im.push(c.im);
            }
        }
        tables.push((alm, index, re, im));
    }
    let size: usize = sets.iter().map(|a| a.coeffs.len() * 24 + 2 * 2880).sum();
    let bytes = encode_fits_in_memory(size, |f| {
        for (alm, index, re, im) in &tables {
            let columns = [
                ColumnDescription::new("INDEX")
                    .with_type(ColumnDataType::Long)
                    .create()?,
                ColumnDescription::new("REAL")
                    .with_type(ColumnDataType::Double)
                    .create()?,
                ColumnDescription::new("IMAG")
                    .with_type(ColumnDataType::Double)
                    .create()?,
            ];
            let hdu = f.create_table("xtension", &columns)?;
            hdu.write_key(
                f,
                "MAX-LPOL",
                (alm.lmax as i64, "Maximum L multipole order"),
            )?;
            hdu.write_key(
                f,
                "MAX-MPOL",
                (alm.mmax as i64, "Maximum M multipole order"),
            )?;
            hdu.write_key(f, "ORIGIN", ("astroport", "written by"))?;
            hdu.write_col(f, "INDEX", index)?;
            hdu.write_col(f, "REAL", re)?;
            hdu.write_col(f, "IMAG", im)?;
        }
        Ok(())
    })
    .map_err(|e| InputError::Fits {
        file,
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

/// Base ring index (in units of nside) and longitude index of the 12 base faces, HEALPix's standard
/// tables (Górski et al. 2005).
const FACE_RING: [usize; 12] = [2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4];
const FACE_PHI: [usize; 12] = [1, 3, 5, 7, 0, 2, 4, 6, 1, 3, 5, 7];

/// The RING index of NESTED pixel `nest` (nside a power of two).
pub fn nest_to_ring(nside: usize, nest: usize) -> usize {
    let per_face = nside * nside;
    let face = nest / per_face;
    let within = nest % per_face;
    // NESTED interleaves the bits of x (even) and y (odd) within the face.
    let (mut x, mut y) = (0usize, 0usize);
    for bit in 0..usize::BITS / 2 {
        x |= ((within >> (2 * bit)) & 1) << bit;
        y |= ((within >> (2 * bit + 1)) & 1) << bit;
    }
    // Ring number counted from the north pole (1-based).
    let ring = FACE_RING[face] * nside - x - y - 1;
    let npix = 12 * per_face;
    let (pixels_in_ring, first, shift) = if ring < nside {
        (4 * ring, 2 * ring * (ring - 1), 0)
    } else if ring > 3 * nside {
        let r = 4 * nside - ring;
        (4 * r, npix - 2 * r * (r + 1), 0)
    } else {
        let polar = 2 * nside * (nside - 1);
        (
            4 * nside,
            polar + (ring - nside) * 4 * nside,
            (ring - nside) & 1,
        )
    };
    let ring_nr = pixels_in_ring / 4;
    // 1-based position along the ring; x − y can be negative, so work in signed integers.
    let mut jp = (FACE_PHI[face] * ring_nr + x + 1 + shift) as i64 - y as i64;
    jp /= 2;
    let count = pixels_in_ring as i64;
    if jp > count {
        jp -= count;
    }
    if jp < 1 {
        jp += count;
    }
    first + (jp - 1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::sht::RingGrid;

    #[test]
    fn nest_to_ring_is_a_bijection_and_children_sit_in_their_parent() {
        assert_eq!(
            (0..12).map(|p| nest_to_ring(1, p)).collect::<Vec<_>>(),
            (0..12).collect::<Vec<_>>()
        );
        for nside in [2usize, 4, 8, 16] {
            let npix = 12 * nside * nside;
            let mut seen = vec![false; npix];
            for p in 0..npix {
                let r = nest_to_ring(nside, p);
                assert!(!seen[r], "nside {nside}: ring {r} twice");
                seen[r] = true;
            }
            // Pixel centres from the ring grid (independent of this numbering): NESTED pixel p at nside/2
            // contains pixels 4p..4p+3 at nside, so their centres lie within about a parent pixel.
            let centre = |nside: usize, ring_index: usize| {
                let g = RingGrid::healpix(nside).unwrap();
                let ring = g
                    .rings
                    .iter()
                    .find(|r| (r.offset..r.offset + r.nphi).contains(&ring_index))
                    .unwrap()
                    .clone();
                let phi = ring.phi0
                    + 2.0 * std::f64::consts::PI * (ring_index - ring.offset) as f64
                        / ring.nphi as f64;
                [ring.sin * phi.cos(), ring.sin * phi.sin(), ring.cos]
            };
            let parent_size = (4.0 * std::f64::consts::PI / (npix / 4) as f64).sqrt();
            for parent in 0..npix / 4 {
                let c = centre(nside / 2, nest_to_ring(nside / 2, parent));
                for child in 4 * parent..4 * parent + 4 {
                    let d = centre(nside, nest_to_ring(nside, child));
                    let dist =
                        ((c[0] - d[0]).powi(2) + (c[1] - d[1]).powi(2) + (c[2] - d[2]).powi(2))
                            .sqrt();
                    assert!(
                        dist < 0.8 * parent_size,
                        "nside {nside}: child {child} is {dist:.3} from parent {parent} (size {parent_size:.3})"
                    );
                }
            }
        }
    }
}
