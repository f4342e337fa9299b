//! Light-curve readers (CSV, FITS tables) and periodogram writers (CSV).
//!
//! Readers accept the tables astronomers already have, so they look columns up by name (case-insensitive)
//! and ignore the columns they do not use. Every error names the file; row-level errors also name the
//! 1-based line (for FITS: the 1-based table row), the column as written in the file and the value.
//! Writers build the whole file in memory, write it to a temporary file beside the target and rename it,
//! so a failed write never leaves a half-written file under the target's name.
//!
//! # Columns
//!
//! * time: `t`, `time`, `mjd`, `bjd`, `jd` (Kepler/TESS `TIME`).
//! * flux: `y`, `flux`, `mag`; without those `pdcsap_flux`, then `sap_flux` (Kepler/TESS). A generic
//!   column wins because tools such as lightkurve write the flux they chose as `flux` beside the others.
//! * error (optional), always of the flux read: `dy`, `flux_err`, `err`, `mag_err`, `error` for a
//!   generic flux, `pdcsap_flux_err` for `pdcsap_flux`, `sap_flux_err` for `sap_flux`.
//! * object (optional): `object`, `id`, `object_id`, `name`. It splits one table into one curve per id,
//!   in order of first appearance, named by the id; without it the table is one curve named after the
//!   file (`lc.csv`, `lc.fits.gz` → `lc`).
//!
//! Two columns that would fill one role (e.g. `mjd` and `bjd`, or `flux` twice) are refused rather than
//! one picked silently.
//!
//! CSV: header row required, lines starting with `#` and blank lines ignored, fields trimmed. An empty
//! flux or error field is a masked value (astropy writes masked cells that way) and counts as non-finite.
//! FITS: the table HDU named `LIGHTCURVE` if there is one, else the first table HDU; columns are read as
//! f64 through cfitsio, which turns NaN and `TNULL` cells into NaN; `.gz` files are decompressed in memory.
//!
//! # Cleaning policy ([`clean`], applied by every reader to every curve)
//!
//! * A non-finite time is refused: it cannot be placed, and masking it would hide a broken file.
//! * A row whose flux or error is non-finite (or empty in CSV) is dropped and counted
//!   (`dropped_non_finite`), as astropy and lightkurve users drop NaN-masked fluxes.
//! * A finite error ≤ 0 is refused: weights 1/σ² would be infinite or negative.
//! * Unsorted times are sorted stably (`was_unsorted`), carrying flux and error along.
//! * Duplicate times are kept (the periodogram sums are well defined with them) and counted
//!   (`duplicate_times`: points whose time equals the previous one after sorting).
//! * Fewer than 4 points left (three parameters are fitted at every frequency), all times equal (zero
//!   span, no frequency grid), or constant values: the curve is refused, naming the file and the object.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::fs;
use std::path::Path;

use fitsio::sys;

use super::{values_problem, weights, LightCurve, Peak, MIN_POINTS};
pub use crate::inputs::InputError;
use crate::inputs::{
    csv_rows, csv_writer, finish_csv, fits_column_f64, fits_column_type, fits_hdu_problem,
    fits_length_problem, float, io_error, open_fits_in_memory, realloc, write_atomic, CBuffer,
};

// ---------------------------------------------------------------------------------------------------
// Column roles
// ---------------------------------------------------------------------------------------------------

const TIME_ALIASES: &[&str] = &["t", "time", "mjd", "bjd", "jd"];
const OBJECT_ALIASES: &[&str] = &["object", "id", "object_id", "name"];
/// Flux columns in order of preference, each with the error columns that belong to it.
const FLUX_FAMILIES: [(&[&str], &[&str]); 3] = [
    (
        &["y", "flux", "mag"],
        &["dy", "flux_err", "err", "mag_err", "error"],
    ),
    (&["pdcsap_flux"], &["pdcsap_flux_err"]),
    (&["sap_flux"], &["sap_flux_err"]),
];

/// A column chosen for a role: its position in the table and its name as written.
#[derive(Debug, Clone)]
struct Column {
    index: usize,
    name: String,
}

#[derive(Debug, Clone)]
struct Columns {
    time: Column,
    flux: Column,
    error: Option<Column>,
    object: Option<Column>,
}

/// Why a header cannot be used: a role without a column (its aliases), or a role with several.
enum HeaderProblem {
    Missing(String),
    Ambiguous(String),
}

/// The one column among `names` matching `aliases`, if any; several are ambiguous.
fn find_one(
    names: &[String],
    aliases: &[&str],
    role: &str,
) -> Result<Option<Column>, HeaderProblem> {
    let found: Vec<usize> = names
        .iter()
        .enumerate()
        .filter(|(_, n)| aliases.iter().any(|a| n.eq_ignore_ascii_case(a)))
        .map(|(i, _)| i)
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [i] => Ok(Some(Column {
            index: *i,
            name: names[*i].clone(),
        })),
        many => {
            let list: Vec<String> = many.iter().map(|&i| format!("'{}'", names[i])).collect();
            Err(HeaderProblem::Ambiguous(format!(
                "{} columns give the {role} ({}); keep one",
                many.len(),
                list.join(", ")
            )))
        }
    }
}

fn choose_columns(names: &[String]) -> Result<Columns, HeaderProblem> {
    let time = find_one(names, TIME_ALIASES, "time")?
        .ok_or_else(|| HeaderProblem::Missing(TIME_ALIASES.join("/")))?;
    let object = find_one(names, OBJECT_ALIASES, "object id")?;
    for (fluxes, errors) in FLUX_FAMILIES {
        if let Some(flux) = find_one(names, fluxes, "flux")? {
            let error = find_one(names, errors, "flux error")?;
            return Ok(Columns {
                time,
                flux,
                error,
                object,
            });
        }
    }
    let all: Vec<&str> = FLUX_FAMILIES
        .iter()
        .flat_map(|(f, _)| f.iter().copied())
        .collect();
    Err(HeaderProblem::Missing(all.join("/")))
}

// ---------------------------------------------------------------------------------------------------
// Cleaning
// ---------------------------------------------------------------------------------------------------

/// What [`clean`] did to one curve; prints as one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanReport {
    /// Rows read for this curve.
    pub rows: usize,
    /// Points left after cleaning.
    pub kept: usize,
    /// Rows dropped for a non-finite (or, in CSV, empty) flux or error.
    pub dropped_non_finite: usize,
    /// The times were not in order and have been sorted.
    pub was_unsorted: bool,
    /// Points whose time equals the previous point's, after sorting (kept).
    pub duplicate_times: usize,
}

impl fmt::Display for CleanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rows, {} kept, {} dropped (non-finite flux or error), {}, {} duplicate times",
            self.rows,
            self.kept,
            self.dropped_non_finite,
            if self.was_unsorted {
                "sorted by time"
            } else {
                "already in time order"
            },
            self.duplicate_times
        )
    }
}

/// The fields a refusal can point at (a bad flux drops its row instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Time,
    Error,
}

/// A curve the policy refuses: one value (index before cleaning), or the curve as a whole.
enum Refusal {
    Value {
        point: usize,
        field: Field,
        value: f64,
        problem: &'static str,
    },
    Curve(String),
}

/// The policy of the module docs on a curve whose vectors have equal lengths.
fn clean_points(curve: LightCurve) -> Result<(LightCurve, CleanReport), Refusal> {
    let LightCurve { name, t, y, dy } = curve;
    let mut kept = Vec::with_capacity(t.len());
    let mut dropped = 0;
    for i in 0..t.len() {
        if !t[i].is_finite() {
            return Err(Refusal::Value {
                point: i,
                field: Field::Time,
                value: t[i],
                problem: "is not finite (every row needs a time)",
            });
        }
        let e = dy.as_ref().map(|d| d[i]);
        if !y[i].is_finite() || e.is_some_and(|e| !e.is_finite()) {
            dropped += 1;
            continue;
        }
        if let Some(e) = e.filter(|&e| e <= 0.0) {
            return Err(Refusal::Value {
                point: i,
                field: Field::Error,
                value: e,
                problem: "must be > 0",
            });
        }
        kept.push(i);
    }
    let was_unsorted = kept.windows(2).any(|w| t[w[0]] > t[w[1]]);
    if was_unsorted {
        // Stable: equal times keep their file order.
        kept.sort_by(|&a, &b| t[a].total_cmp(&t[b]));
    }
    let duplicate_times = kept.windows(2).filter(|w| t[w[0]] == t[w[1]]).count();
    if kept.len() < MIN_POINTS {
        let after = if dropped > 0 {
            format!(" after dropping {dropped} with a non-finite flux or error")
        } else {
            String::new()
        };
        return Err(Refusal::Curve(format!(
            "{} point{} left{after}; a periodogram needs at least {MIN_POINTS}",
            kept.len(),
            if kept.len() == 1 { "" } else { "s" }
        )));
    }
    let (first, last) = (t[kept[0]], t[kept[kept.len() - 1]]);
    if first == last {
        return Err(Refusal::Curve(format!(
            "all {} times equal {first:?}; the time span is zero",
            kept.len()
        )));
    }
    let curve = LightCurve {
        name,
        t: kept.iter().map(|&i| t[i]).collect(),
        y: kept.iter().map(|&i| y[i]).collect(),
        dy: dy.map(|d| kept.iter().map(|&i| d[i]).collect()),
    };
    if let Some(problem) = values_problem(&curve.y, &weights(&curve)) {
        return Err(Refusal::Curve(problem));
    }
    let report = CleanReport {
        rows: t.len(),
        kept: kept.len(),
        dropped_non_finite: dropped,
        was_unsorted,
        duplicate_times,
    };
    Ok((curve, report))
}

/// Applies the module's cleaning policy to one curve. `source` names the file in errors, and
/// `rows[i]` the 1-based line or row of point `i` (empty: the point's 1-based position). Errors name
/// the columns by the curve's fields (`t`, `y`, `dy`); the readers name them as in the file.
pub fn clean(
    curve: LightCurve,
    source: &str,
    rows: &[u64],
) -> Result<(LightCurve, CleanReport), InputError> {
    let n = curve.t.len();
    let content = |problem: String| InputError::Content {
        file: source.to_string(),
        problem: format!("object '{}': {problem}", curve.name),
    };
    if curve.y.len() != n || curve.dy.as_ref().is_some_and(|d| d.len() != n) {
        return Err(content(format!(
            "{n} times but {} values and {} errors",
            curve.y.len(),
            curve.dy.as_ref().map_or(0, Vec::len)
        )));
    }
    if !rows.is_empty() && rows.len() != n {
        return Err(content(format!(
            "{} row numbers for {n} points",
            rows.len()
        )));
    }
    let name = curve.name.clone();
    clean_points(curve).map_err(|r| {
        refusal_error(r, source, &name, |point, field, value| {
            let column = match field {
                Field::Time => "t",
                Field::Error => "dy",
            };
            let line = rows.get(point).copied().unwrap_or(point as u64 + 1);
            (line, column.to_string(), format!("{value:?}"))
        })
    })
}

/// Turns a refusal into an error; `locate` gives the line, column name and value text of a point.
fn refusal_error(
    refusal: Refusal,
    file: &str,
    object: &str,
    locate: impl Fn(usize, Field, f64) -> (u64, String, String),
) -> InputError {
    match refusal {
        Refusal::Value {
            point,
            field,
            value,
            problem,
        } => {
            let (line, column, value) = locate(point, field, value);
            InputError::Value {
                file: file.to_string(),
                line,
                column,
                value,
                problem: problem.to_string(),
            }
        }
        Refusal::Curve(problem) => InputError::Content {
            file: file.to_string(),
            problem: format!("object '{object}': {problem}"),
        },
    }
}

/// Points of one object while a table is read, each with the index of its table row.
struct Group {
    name: String,
    t: Vec<f64>,
    y: Vec<f64>,
    dy: Option<Vec<f64>>,
    rows: Vec<usize>,
}

/// Splits rows by object id, keeping the order in which ids first appear.
struct Groups {
    list: Vec<Group>,
    by_name: HashMap<String, usize>,
    has_error: bool,
}

impl Groups {
    fn new(has_error: bool) -> Self {
        Groups {
            list: Vec::new(),
            by_name: HashMap::new(),
            has_error,
        }
    }

    fn push(&mut self, name: &str, row: usize, t: f64, y: f64, dy: f64) {
        let k = match self.by_name.get(name) {
            Some(&k) => k,
            None => {
                self.by_name.insert(name.to_string(), self.list.len());
                self.list.push(Group {
                    name: name.to_string(),
                    t: Vec::new(),
                    y: Vec::new(),
                    dy: self.has_error.then(Vec::new),
                    rows: Vec::new(),
                });
                self.list.len() - 1
            }
        };
        let g = &mut self.list[k];
        g.t.push(t);
        g.y.push(y);
        if let Some(d) = g.dy.as_mut() {
            d.push(dy);
        }
        g.rows.push(row);
    }

    /// Cleans every group; `locate(row, field, value)` describes a refused value of table row `row`.
    fn clean(
        self,
        file: &str,
        locate: impl Fn(usize, Field, f64) -> (u64, String, String),
    ) -> Result<Vec<(LightCurve, CleanReport)>, InputError> {
        self.list
            .into_iter()
            .map(|g| {
                let curve = LightCurve {
                    name: g.name.clone(),
                    t: g.t,
                    y: g.y,
                    dy: g.dy,
                };
                clean_points(curve).map_err(|r| {
                    refusal_error(r, file, &g.name, |point, field, value| {
                        locate(g.rows[point], field, value)
                    })
                })
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------------------------------

const FITS_SUFFIXES: [&str; 6] = [".fits.gz", ".fit.gz", ".fts.gz", ".fits", ".fit", ".fts"];

/// Reads light curves from a FITS file (`.fits`, `.fit`, `.fts`, optionally `.gz`) or else a CSV file.
pub fn read_light_curves(path: &Path) -> Result<Vec<(LightCurve, CleanReport)>, InputError> {
    if fits_suffix(path).is_some() {
        read_light_curves_fits(path)
    } else {
        read_light_curves_csv(path)
    }
}

fn fits_suffix(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    FITS_SUFFIXES.into_iter().find(|s| name.ends_with(s))
}

/// The curve name of a table without an object column: the file name without its extension(s).
fn default_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match fits_suffix(path) {
        Some(s) => file[..file.len() - s.len()].to_string(),
        None => path
            .file_stem()
            .map_or(file, |s| s.to_string_lossy().into_owned()),
    }
}

/// Reads a CSV light-curve table (module docs), cleaned curve by curve.
pub fn read_light_curves_csv(path: &Path) -> Result<Vec<(LightCurve, CleanReport)>, InputError> {
    let text = fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    parse_light_curves_csv(&text, &path.display().to_string())
}

/// Parses a CSV light-curve table; `source` names the file in errors and, without an object column,
/// the curve.
pub fn parse_light_curves_csv(
    text: &str,
    source: &str,
) -> Result<Vec<(LightCurve, CleanReport)>, InputError> {
    let file = source;
    let ((header_line, header), rows) = csv_rows(text, file, |line, h| Ok((line, h.clone())))?;
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    let columns = choose_columns(&names).map_err(|p| match p {
        HeaderProblem::Missing(column) => InputError::MissingColumn {
            file: file.to_string(),
            column,
        },
        HeaderProblem::Ambiguous(problem) => InputError::Line {
            file: file.to_string(),
            line: header_line,
            problem,
        },
    })?;
    if rows.is_empty() {
        return Err(InputError::Content {
            file: file.to_string(),
            problem: "the table has a header but no data rows".to_string(),
        });
    }
    let fallback = default_name(Path::new(source));
    let mut groups = Groups::new(columns.error.is_some());
    for (k, (line, record)) in rows.iter().enumerate() {
        let text_of = |c: &Column| record.get(c.index).unwrap_or("");
        let missing = |c: &Column, problem: &str| InputError::Missing {
            file: file.to_string(),
            line: *line,
            column: c.name.clone(),
            problem: problem.to_string(),
        };
        // Some(NaN) for an empty field; a field that is not a number is refused here.
        let number = |c: &Column| -> Result<Option<f64>, InputError> {
            match text_of(c) {
                "" => Ok(None),
                s => s.parse().map(Some).map_err(|_| InputError::Value {
                    file: file.to_string(),
                    line: *line,
                    column: c.name.clone(),
                    value: s.to_string(),
                    problem: "is not a number".to_string(),
                }),
            }
        };
        let name = match &columns.object {
            Some(c) if text_of(c).is_empty() => return Err(missing(c, "no object id")),
            Some(c) => text_of(c),
            None => fallback.as_str(),
        };
        let t = number(&columns.time)?.ok_or_else(|| missing(&columns.time, "no time"))?;
        let y = number(&columns.flux)?.unwrap_or(f64::NAN);
        let dy = match &columns.error {
            Some(c) => number(c)?.unwrap_or(f64::NAN),
            None => f64::NAN,
        };
        groups.push(name, k, t, y, dy);
    }
    groups.clean(file, |row, field, _| {
        let (line, record) = &rows[row];
        let column = match field {
            Field::Time => &columns.time,
            // Only a curve with an error column can have an error refused.
            Field::Error => columns.error.as_ref().unwrap_or(&columns.flux),
        };
        let value = record.get(column.index).unwrap_or("").to_string();
        (*line, column.name.clone(), value)
    })
}

/// Reads a FITS light-curve table (module docs), cleaned curve by curve. Row errors give the 1-based
/// table row as the line.
pub fn read_light_curves_fits(path: &Path) -> Result<Vec<(LightCurve, CleanReport)>, InputError> {
    let file = path.display().to_string();
    let mut bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        bytes = gunzip(&bytes).map_err(|e| InputError::Fits {
            file: file.clone(),
            message: format!("cannot decompress gzip: {e}"),
        })?;
    }
    if let Some(problem) = fits_length_problem(bytes.len()) {
        return Err(InputError::Content { file, problem });
    }
    let table = decode_table(&mut bytes).map_err(|e| match e {
        FitsProblem::Fits(e) => InputError::Fits {
            file: file.clone(),
            message: e.to_string(),
        },
        FitsProblem::Content(problem) => InputError::Content {
            file: file.clone(),
            problem,
        },
        FitsProblem::MissingColumn(column) => InputError::MissingColumn {
            file: file.clone(),
            column,
        },
    })?;
    let fallback = default_name(path);
    let (time_name, t) = table.time;
    let (_, y) = table.flux;
    let mut groups = Groups::new(table.error.is_some());
    for row in 0..t.len() {
        let name = match &table.object {
            Some((column, ids)) if ids[row].is_empty() => {
                return Err(InputError::Missing {
                    file,
                    line: row as u64 + 1,
                    column: column.clone(),
                    problem: "no object id".to_string(),
                })
            }
            Some((_, ids)) => ids[row].as_str(),
            None => fallback.as_str(),
        };
        let dy = table.error.as_ref().map_or(f64::NAN, |(_, d)| d[row]);
        groups.push(name, row, t[row], y[row], dy);
    }
    let error_name = table.error.map(|(n, _)| n).unwrap_or_default();
    groups.clean(&file, |row, field, value| {
        let column = match field {
            Field::Time => &time_name,
            Field::Error => &error_name,
        };
        (row as u64 + 1, column.clone(), format!("{value:?}"))
    })
}

/// The columns read from a FITS table: (name as written, values) for each role.
struct FitsTable {
    time: (String, Vec<f64>),
    flux: (String, Vec<f64>),
    error: Option<(String, Vec<f64>)>,
    object: Option<(String, Vec<String>)>,
}

enum FitsProblem {
    Fits(fitsio::errors::Error),
    Content(String),
    MissingColumn(String),
}

impl From<fitsio::errors::Error> for FitsProblem {
    fn from(e: fitsio::errors::Error) -> Self {
        FitsProblem::Fits(e)
    }
}

fn check(status: c_int) -> Result<(), FitsProblem> {
    Ok(fitsio::errors::check_status(status)?)
}

/// An open cfitsio file, closed on drop.
struct OpenFits(*mut sys::fitsfile);

impl Drop for OpenFits {
    fn drop(&mut self) {
        let mut status = 0;
        // SAFETY: the pointer came from a successful ffomem and is closed once, here.
        unsafe { sys::ffclos(self.0, &mut status) };
    }
}

impl OpenFits {
    /// A string keyword of the current HDU, None when absent.
    fn string_key(&self, key: &str) -> Result<Option<String>, FitsProblem> {
        const KEY_NO_EXIST: c_int = 202;
        let key = CString::new(key).map_err(fitsio::errors::Error::from)?;
        let mut value = [0 as c_char; 71];
        let mut comment = [0 as c_char; 73];
        let mut status = 0;
        // SAFETY: the file is open; the buffers have cfitsio's FLEN_VALUE and FLEN_COMMENT sizes.
        unsafe {
            sys::ffgkys(
                self.0,
                key.as_ptr(),
                value.as_mut_ptr(),
                comment.as_mut_ptr(),
                &mut status,
            )
        };
        if status == KEY_NO_EXIST {
            // SAFETY: clears cfitsio's message stack of the expected miss.
            unsafe { sys::ffcmsg() };
            return Ok(None);
        }
        check(status)?;
        // SAFETY: cfitsio NUL-terminates the value.
        let text = unsafe { CStr::from_ptr(value.as_ptr()) };
        Ok(Some(text.to_string_lossy().trim().to_string()))
    }

    /// Type code (cfitsio's, after scaling) and repeat count of a 0-based column of the current HDU.
    fn column_type(&self, index: usize) -> Result<(c_int, i64, i64), FitsProblem> {
        // SAFETY: the file is open at a table HDU.
        Ok(unsafe { fits_column_type(self.0, index) }?)
    }

    fn read_f64(&self, index: usize, rows: usize) -> Result<Vec<f64>, FitsProblem> {
        // SAFETY: the file is open at a table HDU with `rows` rows.
        Ok(unsafe { fits_column_f64(self.0, index, rows) }?)
    }

    fn read_i64(&self, index: usize, rows: usize) -> Result<Vec<i64>, FitsProblem> {
        let mut out = vec![0i64; rows];
        let (mut any_null, mut status) = (0, 0);
        // SAFETY: out holds `rows` values.
        unsafe {
            sys::ffgcvjj(
                self.0,
                index as c_int + 1,
                1,
                1,
                rows as i64,
                0,
                out.as_mut_ptr(),
                &mut any_null,
                &mut status,
            )
        };
        check(status)?;
        Ok(out)
    }

    fn read_strings(
        &self,
        index: usize,
        rows: usize,
        chars: usize,
    ) -> Result<Vec<String>, FitsProblem> {
        let mut buffers = vec![vec![0 as c_char; chars + 1]; rows];
        let mut pointers: Vec<*mut c_char> = buffers.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let mut null = [0 as c_char; 1];
        let (mut any_null, mut status) = (0, 0);
        // SAFETY: one buffer of chars + 1 bytes per row, as cfitsio writes at most the column width
        // and a NUL.
        unsafe {
            sys::ffgcvs(
                self.0,
                index as c_int + 1,
                1,
                1,
                rows as i64,
                null.as_mut_ptr(),
                pointers.as_mut_ptr(),
                &mut any_null,
                &mut status,
            )
        };
        check(status)?;
        Ok(buffers
            .iter()
            // SAFETY: each buffer is NUL-terminated (its last byte is never written).
            .map(|b| {
                unsafe { CStr::from_ptr(b.as_ptr()) }
                    .to_string_lossy()
                    .trim()
                    .to_string()
            })
            .collect())
    }
}

const ASCII_TBL: c_int = 1;
const BINARY_TBL: c_int = 2;
const TSTRING: c_int = 16;
const INTEGER_TYPES: [c_int; 10] = [11, 12, 20, 21, 30, 31, 40, 41, 80, 81];
const REAL_TYPES: [c_int; 2] = [42, 82];

fn decode_table(bytes: &mut [u8]) -> Result<FitsTable, FitsProblem> {
    let len = bytes.len();
    let (fptr, _slot) = open_fits_in_memory(bytes, c"lightcurve.fits")?;
    let mut status = 0;
    let f = OpenFits(fptr);

    let mut count = 0;
    // SAFETY: f is open.
    unsafe { sys::ffthdu(f.0, &mut count, &mut status) };
    check(status)?;
    let mut first: Option<(c_int, String)> = None;
    let mut named: Option<(c_int, String)> = None;
    for number in 1..=count {
        let mut kind = 0;
        // SAFETY: f is open; number is within 1..=count.
        unsafe { sys::ffmahd(f.0, number, &mut kind, &mut status) };
        check(status)?;
        if kind != ASCII_TBL && kind != BINARY_TBL {
            continue;
        }
        let extname = f.string_key("EXTNAME")?.unwrap_or_default();
        if named.is_none() && extname.eq_ignore_ascii_case("LIGHTCURVE") {
            named = Some((number, extname.clone()));
        }
        if first.is_none() {
            first = Some((number, extname));
        }
    }
    let (number, extname) = named.or(first).ok_or_else(|| {
        FitsProblem::Content(
            "no table HDU (a light curve is a table of times and fluxes)".to_string(),
        )
    })?;
    // Numbered from 0 (the primary HDU), as astropy and fitsio do.
    let hdu = if extname.is_empty() {
        format!("HDU {}", number - 1)
    } else {
        format!("HDU {} ({extname})", number - 1)
    };
    let mut kind = 0;
    // SAFETY: f is open; number is a valid HDU.
    unsafe { sys::ffmahd(f.0, number, &mut kind, &mut status) };
    check(status)?;
    // SAFETY: f is open, at the table HDU.
    if let Some(problem) = unsafe { fits_hdu_problem(f.0, len) } {
        return Err(FitsProblem::Content(format!("{hdu}: {problem}")));
    }

    let (mut ncols, mut nrows) = (0, 0);
    // SAFETY: f is open at a table HDU.
    unsafe {
        sys::ffgncl(f.0, &mut ncols, &mut status);
        sys::ffgnrwll(f.0, &mut nrows, &mut status);
    }
    check(status)?;
    let mut names = Vec::with_capacity(ncols as usize);
    for i in 1..=ncols {
        names.push(f.string_key(&format!("TTYPE{i}"))?.unwrap_or_default());
    }
    let columns = choose_columns(&names).map_err(|p| match p {
        HeaderProblem::Missing(column) => FitsProblem::MissingColumn(column),
        HeaderProblem::Ambiguous(problem) => FitsProblem::Content(format!("{hdu}: {problem}")),
    })?;
    if nrows == 0 {
        return Err(FitsProblem::Content(format!(
            "{hdu}: the table has no rows"
        )));
    }
    let rows = nrows as usize;

    let numeric = |c: &Column| -> Result<(String, Vec<f64>), FitsProblem> {
        let (code, repeat, _) = f.column_type(c.index)?;
        if !INTEGER_TYPES.contains(&code) && !REAL_TYPES.contains(&code) {
            return Err(FitsProblem::Content(format!(
                "{hdu} column '{}' is not numeric (cfitsio type code {code})",
                c.name
            )));
        }
        if repeat != 1 {
            return Err(FitsProblem::Content(format!(
                "{hdu} column '{}' holds {repeat} values per row; a light curve needs one",
                c.name
            )));
        }
        Ok((c.name.clone(), f.read_f64(c.index, rows)?))
    };
    let time = numeric(&columns.time)?;
    let flux = numeric(&columns.flux)?;
    let error = columns.error.as_ref().map(numeric).transpose()?;
    let object = match &columns.object {
        None => None,
        Some(c) => {
            let (code, repeat, width) = f.column_type(c.index)?;
            let ids = if INTEGER_TYPES.contains(&code) && repeat == 1 {
                f.read_i64(c.index, rows)?
                    .into_iter()
                    .map(|v| v.to_string())
                    .collect()
            } else if code == TSTRING && (repeat <= width || kind == ASCII_TBL) {
                f.read_strings(c.index, rows, repeat.max(width).max(1) as usize)?
            } else {
                return Err(FitsProblem::Content(format!(
                    "{hdu} column '{}' must hold one integer or string per row to name objects",
                    c.name
                )));
            };
            Some((c.name.clone(), ids))
        }
    };
    drop(f);
    Ok(FitsTable {
        time,
        flux,
        error,
        object,
    })
}

extern "C" {
    /// cfitsio's in-memory gunzip (zlib/zcompress.c, linked with the bundled cfitsio).
    fn uncompress2mem_from_mem(
        inmemptr: *mut c_char,
        inmemsize: usize,
        buffptr: *mut *mut c_char,
        buffsize: *mut usize,
        mem_realloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
        filesize: *mut usize,
        status: *mut c_int,
    ) -> c_int;
}

/// Decompresses a gzip file in memory with cfitsio's own zlib (no extra dependency).
fn gunzip(data: &[u8]) -> Result<Vec<u8>, fitsio::errors::Error> {
    let start = data.len().saturating_mul(4).max(1 << 16);
    // SAFETY: realloc(NULL, n) allocates n bytes.
    let mut out = CBuffer {
        ptr: unsafe { realloc(std::ptr::null_mut(), start) },
        len: start,
    };
    if out.ptr.is_null() {
        return Err(fitsio::errors::Error::Message("out of memory".to_string()));
    }
    let (mut size, mut status) = (0usize, 0);
    // SAFETY: zlib only reads the input; out is a realloc'd buffer of out.len bytes that cfitsio may
    // grow with realloc, updating out.ptr and out.len.
    unsafe {
        uncompress2mem_from_mem(
            data.as_ptr() as *mut c_char,
            data.len(),
            (&mut out.ptr as *mut *mut c_void).cast(),
            &mut out.len,
            Some(realloc),
            &mut size,
            &mut status,
        )
    };
    fitsio::errors::check_status(status)?;
    if out.ptr.is_null() || size > out.len {
        return Err(fitsio::errors::Error::Message(format!(
            "{size} bytes reported in a buffer of {}",
            out.len
        )));
    }
    // SAFETY: cfitsio wrote `size` bytes at out.ptr.
    Ok(unsafe { std::slice::from_raw_parts(out.ptr as *const u8, size) }.to_vec())
}

// ---------------------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------------------

/// Writes periodograms as `object,frequency,power`, one row per frequency, after a
/// `# normalization: NAME` comment line. Floats are written in full precision (read back exactly).
/// Each curve is (object, frequencies, powers); the two slices must have equal lengths.
pub fn write_periodogram_csv(
    path: &Path,
    curves: &[(&str, &[f64], &[f64])],
    normalization_name: &str,
) -> Result<(), InputError> {
    let file = path.display().to_string();
    if normalization_name.contains(['\n', '\r']) {
        return Err(InputError::Content {
            file,
            problem: format!("normalization name {normalization_name:?} has a line break"),
        });
    }
    for (k, (name, f, p)) in curves.iter().enumerate() {
        if f.len() != p.len() {
            return Err(InputError::Content {
                file,
                problem: format!(
                    "curve {} ({name:?}) has {} frequencies but {} powers",
                    k + 1,
                    f.len(),
                    p.len()
                ),
            });
        }
    }
    let mut w = csv_writer();
    let result = (|| {
        w.write_record(["object", "frequency", "power"])?;
        for (name, f, p) in curves {
            for (f, p) in f.iter().zip(p.iter()) {
                w.write_record([name, float(*f).as_str(), float(*p).as_str()])?;
            }
        }
        Ok::<(), csv::Error>(())
    })();
    let body = finish_csv(w, result, &file)?;
    let mut bytes = format!("# normalization: {normalization_name}\n").into_bytes();
    bytes.extend_from_slice(&body);
    write_atomic(path, &bytes)
}

/// Writes peaks as `object,rank,index,frequency,period,power,fap`: rank is 1-based in the order
/// given, period = 1/frequency, fap empty when not computed.
pub fn write_peaks_csv(path: &Path, peaks: &[(&str, &[Peak])]) -> Result<(), InputError> {
    let file = path.display().to_string();
    let mut w = csv_writer();
    let result = (|| {
        w.write_record([
            "object",
            "rank",
            "index",
            "frequency",
            "period",
            "power",
            "fap",
        ])?;
        for (name, list) in peaks {
            for (rank, p) in list.iter().enumerate() {
                w.write_record([
                    name.to_string(),
                    (rank + 1).to_string(),
                    p.index.to_string(),
                    float(p.frequency),
                    float(1.0 / p.frequency),
                    float(p.power),
                    p.fap.map(float).unwrap_or_default(),
                ])?;
            }
        }
        Ok::<(), csv::Error>(())
    })();
    let bytes = finish_csv(w, result, &file)?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fitsio::images::{ImageDescription, ImageType};
    use fitsio::tables::{ColumnDataType, ColumnDescription};
    use fitsio::FitsFile;

    fn parse(text: &str) -> Vec<(LightCurve, CleanReport)> {
        parse_light_curves_csv(text, "dir/lc.csv").unwrap()
    }

    fn error(text: &str) -> String {
        parse_light_curves_csv(text, "dir/lc.csv")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn aliases_case_and_extra_columns() {
        let cases = [
            ("t,y,dy", Some("dy")),
            ("TIME,FLUX,FLUX_ERR", Some("flux_err")),
            ("Mjd, Mag, Mag_Err", Some("mag_err")),
            ("bjd,flux,error", Some("error")),
            ("jd,y,err", Some("err")),
            ("time,flux", None),
        ];
        for (header, error_column) in cases {
            let text =
                format!("# c\n{header},quality\n1,10,0.5,0\n2,11,0.5,0\n3,12,0.5,0\n4,13,0.5,0\n");
            let text = if error_column.is_none() {
                format!("{header},quality\n1,10,0\n2,11,0\n3,12,0\n4,13,0\n")
            } else {
                text
            };
            let curves = parse(&text);
            assert_eq!(curves.len(), 1, "{header}");
            let (c, report) = &curves[0];
            assert_eq!(c.name, "lc");
            assert_eq!(c.t, [1.0, 2.0, 3.0, 4.0]);
            assert_eq!(c.y, [10.0, 11.0, 12.0, 13.0]);
            assert_eq!(c.dy.is_some(), error_column.is_some(), "{header}");
            assert_eq!(report.kept, 4);
        }
    }

    #[test]
    fn kepler_flux_families() {
        // PDCSAP wins over SAP, and the error is the PDCSAP one.
        let text = "TIME,SAP_FLUX,SAP_FLUX_ERR,PDCSAP_FLUX,PDCSAP_FLUX_ERR\n\
                    1,1,0.1,10,1\n2,2,0.2,20,2\n3,3,0.3,30,3\n4,4,0.4,40,4\n";
        let (c, _) = &parse(text)[0];
        assert_eq!(c.y, [10.0, 20.0, 30.0, 40.0]);
        assert_eq!(c.dy, Some(vec![1.0, 2.0, 3.0, 4.0]));
        // A generic flux (lightkurve's chosen one) wins over both; its error is the generic one.
        let text = "time,flux,pdcsap_flux,pdcsap_flux_err,sap_flux\n\
                    1,5,10,1,1\n2,6,20,2,2\n3,7,30,3,3\n4,8,40,4,4\n";
        let (c, _) = &parse(text)[0];
        assert_eq!(c.y, [5.0, 6.0, 7.0, 8.0]);
        assert_eq!(c.dy, None);
        // SAP alone, with an error of another family present: that error is not taken.
        let text = "time,sap_flux,pdcsap_flux_err\n1,1,9\n2,2,9\n3,3,9\n4,4,9\n";
        let (c, _) = &parse(text)[0];
        assert_eq!(c.y, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(c.dy, None);
    }

    #[test]
    fn header_refusals() {
        assert_eq!(
            error("flux,err\n1,2\n"),
            "dir/lc.csv: missing required column 't/time/mjd/bjd/jd'"
        );
        assert_eq!(
            error("time,err\n1,2\n"),
            "dir/lc.csv: missing required column 'y/flux/mag/pdcsap_flux/sap_flux'"
        );
        assert_eq!(
            error("# c\nmjd,bjd,flux\n1,2,3\n"),
            "dir/lc.csv line 2: 2 columns give the time ('mjd', 'bjd'); keep one"
        );
        assert_eq!(
            error("t,flux,FLUX\n1,2,3\n"),
            "dir/lc.csv line 1: 2 columns give the flux ('flux', 'FLUX'); keep one"
        );
        assert_eq!(
            error("t,flux,id,name\n1,2,a,b\n"),
            "dir/lc.csv line 1: 2 columns give the object id ('id', 'name'); keep one"
        );
        assert_eq!(
            error("t,flux\n# nothing\n"),
            "dir/lc.csv: the table has a header but no data rows"
        );
        assert_eq!(
            error("# only\n\n"),
            "dir/lc.csv: no header row (the file is empty or only comments)"
        );
        assert_eq!(
            error("t,flux\n1,2\n2,3,4\n"),
            "dir/lc.csv line 3: 3 fields, but the header (line 1) has 2"
        );
    }

    #[test]
    fn multi_object_split_in_first_appearance_order() {
        let text = "\
object_id,mjd,mag,mag_err,band
B,3,13,0.1,g
A,1,11,0.1,g
B,1,11,0.1,g

A,2,12,0.1,r
B,2,12,0.1,r
# a comment
A,3,13,0.1,r
A,4,14,0.1,r
B,4,14,0.1,r
";
        let curves = parse(text);
        let names: Vec<&str> = curves.iter().map(|(c, _)| c.name.as_str()).collect();
        assert_eq!(names, ["B", "A"]);
        assert_eq!(curves[0].0.t, [1.0, 2.0, 3.0, 4.0]);
        assert!(curves[0].1.was_unsorted);
        assert_eq!(curves[1].0.t, [1.0, 2.0, 3.0, 4.0]);
        assert!(!curves[1].1.was_unsorted);
        assert_eq!(
            error("name,t,y\nA,1,1\n,2,2\n"),
            "dir/lc.csv line 3, column 'name': no object id"
        );
    }

    #[test]
    fn value_refusals_name_file_line_column_and_value() {
        let header = "# header next\nmjd,flux,flux_err\n";
        let cases = [
            (
                "1,1,1\n\n2,1,1\nnan,1,1\n",
                "dir/lc.csv line 6, column 'mjd': value nan is not finite (every row needs a time)",
            ),
            (
                "1,1,1\n-inf,1,1\n",
                "dir/lc.csv line 4, column 'mjd': value -inf is not finite (every row needs a time)",
            ),
            (
                "1,1,1\n2,1,0\n",
                "dir/lc.csv line 4, column 'flux_err': value 0 must be > 0",
            ),
            (
                "1,1,1\n# c\n2,1,-0.25\n",
                "dir/lc.csv line 5, column 'flux_err': value -0.25 must be > 0",
            ),
            (
                "1,1,1\n2,x1,1\n",
                "dir/lc.csv line 4, column 'flux': value x1 is not a number",
            ),
            (
                "1,1,1\n,1,1\n",
                "dir/lc.csv line 4, column 'mjd': no time",
            ),
        ];
        for (rows, expected) in cases {
            assert_eq!(error(&format!("{header}{rows}")), expected, "{rows:?}");
        }
        // CRLF line ends and comments count as lines.
        assert_eq!(
            error("# a\r\n\r\nt,y,dy\r\n1,1,1\r\n# b\r\n2,1,-1\r\n"),
            "dir/lc.csv line 6, column 'dy': value -1 must be > 0"
        );
    }

    #[test]
    fn non_finite_and_empty_flux_or_error_rows_are_dropped() {
        let text = "t,y,dy\n1,1,0.1\n2,NaN,0.1\n3,3,inf\n4,,0.1\n5,5,\n6,6,0.1\n7,7,0.1\n8,8,0.1\n";
        let (c, report) = &parse(text)[0];
        assert_eq!(c.t, [1.0, 6.0, 7.0, 8.0]);
        assert_eq!(c.dy, Some(vec![0.1; 4]));
        assert_eq!(report.rows, 8);
        assert_eq!(report.dropped_non_finite, 4);
        assert_eq!(report.kept, 4);
        // A negative error on a dropped row is not looked at.
        let (_, report) = &parse("t,y,dy\n1,nan,-1\n2,2,1\n3,3,1\n4,4,1\n5,5,1\n")[0];
        assert_eq!(report.dropped_non_finite, 1);
    }

    #[test]
    fn unsorted_times_are_sorted_stably_and_duplicates_kept() {
        let text = "t,y,dy\n3,30,3\n1,10,1\n2,20,2\n1,11,1.5\n2,21,2.5\n";
        let (c, report) = &parse(text)[0];
        assert_eq!(c.t, [1.0, 1.0, 2.0, 2.0, 3.0]);
        assert_eq!(c.y, [10.0, 11.0, 20.0, 21.0, 30.0]);
        assert_eq!(c.dy, Some(vec![1.0, 1.5, 2.0, 2.5, 3.0]));
        assert!(report.was_unsorted);
        assert_eq!(report.duplicate_times, 2);
        assert_eq!(
            report.to_string(),
            "5 rows, 5 kept, 0 dropped (non-finite flux or error), sorted by time, 2 duplicate times"
        );
        let (_, report) = &parse("t,y\n1,1\n2,2\n2,2\n3,3\n")[0];
        assert!(!report.was_unsorted);
        assert_eq!(report.duplicate_times, 1);
    }

    #[test]
    fn too_few_points_and_zero_span_are_refused() {
        assert_eq!(
            error("t,y\n1,1\n2,2\n"),
            "dir/lc.csv: object 'lc': 2 points left; a periodogram needs at least 4"
        );
        // Three points: the three parameters fit them exactly (power 1, no degree of freedom for a FAP).
        assert_eq!(
            error("t,y\n1,1\n2,2\n3,0\n"),
            "dir/lc.csv: object 'lc': 3 points left; a periodogram needs at least 4"
        );
        assert_eq!(
            error("id,t,y\nA,1,1\nA,2,2\nA,3,3\nA,4,1\nS7,1,1\nS7,2,nan\nS7,3,3\nS7,4,1\n"),
            "dir/lc.csv: object 'S7': 3 points left after dropping 1 with a non-finite flux or \
             error; a periodogram needs at least 4"
        );
        assert_eq!(
            error("object,t,y\nX,5,1\nX,5,2\nX,5,3\nX,5,4\n"),
            "dir/lc.csv: object 'X': all 4 times equal 5.0; the time span is zero"
        );
        // Constant values (rounding leaves a tiny variance; the check is relative to their size), also when
        // the errors differ; one constant object refuses the file.
        for text in [
            "t,y\n1,1962.5\n2,1962.5\n3,1962.5\n4,1962.5\n",
            "t,y,dy\n1,0.1,1\n2,0.1,2\n3,0.1,3\n4,0.1,4\n",
            "id,t,y\nA,1,1\nA,2,2\nA,3,3\nA,4,1\nC,1,7\nC,2,7\nC,3,7\nC,4,7\n",
        ] {
            let e = error(text);
            assert!(e.contains("the values are constant"), "{e}");
        }
    }

    #[test]
    fn clean_names_rows_and_checks_lengths() {
        let curve = |t: Vec<f64>, dy: Option<Vec<f64>>| LightCurve {
            name: "c".to_string(),
            y: (0..t.len()).map(|i| i as f64).collect(),
            t,
            dy,
        };
        let e = clean(curve(vec![1.0, f64::NAN, 3.0], None), "mem", &[10, 20, 30])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "mem line 20, column 't': value NaN is not finite (every row needs a time)"
        );
        let e = clean(
            curve(vec![1.0, 2.0, 3.0], Some(vec![1.0, 1.0, -2.0])),
            "mem",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "mem line 3, column 'dy': value -2.0 must be > 0");
        let e = clean(curve(vec![1.0, 2.0, 3.0], Some(vec![1.0])), "mem", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("3 times but 3 values and 1 errors"), "{e}");
        let e = clean(curve(vec![2.0, 1.0, 3.0], None), "mem", &[1, 2])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "mem: object 'c': 2 row numbers for 3 points");
        let (c, report) = clean(curve(vec![2.0, 1.0, 3.0, 4.0], None), "mem", &[]).unwrap();
        assert_eq!(c.t, [1.0, 2.0, 3.0, 4.0]);
        assert!(report.was_unsorted);
    }

    #[test]
    fn read_dispatches_on_extension_and_names_after_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("star.csv");
        fs::write(&path, "t,y\n1,1\n2,2\n3,3\n4,1\n").unwrap();
        let curves = read_light_curves(&path).unwrap();
        assert_eq!(curves[0].0.name, "star");
        let e = read_light_curves(&dir.path().join("absent.csv")).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }), "{e}");
        // A .fits name goes to the FITS reader, which refuses a text file cleanly.
        let fake = dir.path().join("text.fits");
        fs::write(&fake, "t,y\n1,1\n").unwrap();
        let e = read_light_curves(&fake).unwrap_err().to_string();
        assert!(
            e.contains("text.fits") && e.contains("2880-byte FITS records"),
            "{e}"
        );
        assert_eq!(default_name(Path::new("a/kplr01.fits.gz")), "kplr01");
        assert_eq!(default_name(Path::new("a/b.FTS")), "b");
        assert_eq!(default_name(Path::new("a/b.c.csv")), "b.c");
    }

    /// Writes a table HDU after an empty primary and an image, so "first table" is not the first HDU.
    fn write_fits(path: &Path, extname: &str, with_object: bool, times: &[f64]) {
        let mut f = FitsFile::create(path).open().unwrap();
        let image = ImageDescription {
            data_type: ImageType::Float,
            dimensions: &[2, 2],
        };
        f.create_image("APERTURE", &image).unwrap();
        let mut columns = vec![
            ColumnDescription::new("TIME")
                .with_type(ColumnDataType::Double)
                .create()
                .unwrap(),
            ColumnDescription::new("SAP_FLUX")
                .with_type(ColumnDataType::Float)
                .create()
                .unwrap(),
            ColumnDescription::new("PDCSAP_FLUX")
                .with_type(ColumnDataType::Double)
                .create()
                .unwrap(),
            ColumnDescription::new("PDCSAP_FLUX_ERR")
                .with_type(ColumnDataType::Float)
                .create()
                .unwrap(),
            ColumnDescription::new("QUALITY")
                .with_type(ColumnDataType::Int)
                .create()
                .unwrap(),
        ];
        if with_object {
            columns.push(
                ColumnDescription::new("Object")
                    .with_type(ColumnDataType::String)
                    .that_repeats(8)
                    .create()
                    .unwrap(),
            );
        }
        let hdu = f.create_table(extname, &columns).unwrap();
        let n = times.len();
        hdu.write_col(&mut f, "TIME", times).unwrap();
        hdu.write_col(&mut f, "SAP_FLUX", &vec![1.0f32; n]).unwrap();
        let flux: Vec<f64> = (0..n)
            .map(|i| {
                if i == 2 {
                    f64::NAN
                } else {
                    100.0 + i as f64 / 3.0
                }
            })
            .collect();
        hdu.write_col(&mut f, "PDCSAP_FLUX", &flux).unwrap();
        hdu.write_col(&mut f, "PDCSAP_FLUX_ERR", &vec![0.5f32; n])
            .unwrap();
        hdu.write_col(&mut f, "QUALITY", &vec![0i32; n]).unwrap();
        if with_object {
            let ids: Vec<String> = (0..n)
                .map(|i| if i % 2 == 0 { "TIC 42" } else { "tic7" }.to_string())
                .collect();
            hdu.write_col(&mut f, "Object", &ids).unwrap();
        }
    }

    #[test]
    fn fits_round_trip_with_object_column() {
        let dir = tempfile::tempdir().unwrap();
        // cfitsio cannot create this name, but the reader goes through memory and can read it.
        let plain = dir.path().join("sector.fits");
        let path = dir.path().join("sector[1].fits");
        // Rows 0,2,4,6,8 are "TIC 42" (row 2 has a NaN flux), 1,3,5,7,9 "tic7" (unsorted).
        let times = [0.5, 9.0, 1.5, 7.0, 2.5, 5.0, 3.5, 3.0, 4.5, 1.0 / 3.0];
        write_fits(&plain, "LIGHTCURVE", true, &times);
        fs::rename(&plain, &path).unwrap();
        let curves = read_light_curves(&path).unwrap();
        assert_eq!(curves.len(), 2);
        let (a, ra) = &curves[0];
        assert_eq!(a.name, "TIC 42");
        assert_eq!(a.t, [0.5, 2.5, 3.5, 4.5]);
        assert_eq!(a.y[1], 100.0 + 4.0 / 3.0);
        assert_eq!(a.dy, Some(vec![0.5; 4]));
        assert_eq!(ra.dropped_non_finite, 1);
        let (b, rb) = &curves[1];
        assert_eq!(b.name, "tic7");
        assert_eq!(b.t, [1.0 / 3.0, 3.0, 5.0, 7.0, 9.0]);
        assert!(rb.was_unsorted);
        assert_eq!(b.y[0], 100.0 + 9.0 / 3.0);
    }

    #[test]
    fn fits_first_table_integer_ids_gzip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        // No LIGHTCURVE HDU: the first table; no object column: named after the file.
        let path = dir.path().join("kplr.fits");
        write_fits(&path, "OTHER", false, &[1.0, 2.0, 3.0, 4.0, 5.0]);
        let curves = read_light_curves_fits(&path).unwrap();
        assert_eq!(curves.len(), 1);
        assert_eq!(curves[0].0.name, "kplr");
        assert_eq!(curves[0].0.t, [1.0, 2.0, 4.0, 5.0]);

        // Gzip: cfitsio compresses a file whose name ends in .gz when it closes it.
        let gz = dir.path().join("kplr2.fits.gz");
        write_fits(&gz, "LIGHTCURVE", false, &[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(&fs::read(&gz).unwrap()[..2], &[0x1f, 0x8b]);
        let curves = read_light_curves(&gz).unwrap();
        assert_eq!(curves[0].0.name, "kplr2");
        assert_eq!(curves[0].0.t, [1.0, 2.0, 4.0, 5.0]);

        // A NaN time is refused, naming the 1-based table row.
        let bad = dir.path().join("bad.fits");
        write_fits(&bad, "LIGHTCURVE", false, &[1.0, 2.0, 3.0, f64::NAN, 5.0]);
        let e = read_light_curves(&bad).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "bad.fits line 4, column 'TIME': value NaN is not finite (every row needs a time)"
            ),
            "{e}"
        );

        // Integer object ids.
        let ids = dir.path().join("ids.fits");
        {
            let mut f = FitsFile::create(&ids).open().unwrap();
            let col = |name: &str, t| ColumnDescription::new(name).with_type(t).create().unwrap();
            let hdu = f
                .create_table(
                    "LC",
                    &[
                        col("ID", ColumnDataType::Long),
                        col("mjd", ColumnDataType::Double),
                        col("MAG", ColumnDataType::Double),
                    ],
                )
                .unwrap();
            hdu.write_col(&mut f, "ID", &[7i32, 7, 7, 7, 12, 12, 12, 12])
                .unwrap();
            hdu.write_col(&mut f, "mjd", &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0])
                .unwrap();
            hdu.write_col(&mut f, "MAG", &[1.0, 2.0, 3.0, 1.5, 4.0, 5.0, 6.0, 4.5])
                .unwrap();
        }
        let curves = read_light_curves(&ids).unwrap();
        let names: Vec<&str> = curves.iter().map(|(c, _)| c.name.as_str()).collect();
        assert_eq!(names, ["7", "12"]);
        assert_eq!(curves[1].0.y, [4.0, 5.0, 6.0, 4.5]);
        assert_eq!(curves[1].0.dy, None);
    }

    /// A table cut short is refused before cfitsio reads it (it reads whole 2880-byte records, and read past
    /// the end of a cut file): cut inside a record, or on a record boundary before the data the header
    /// promises.
    #[test]
    fn truncated_fits_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.fits");
        let times: Vec<f64> = (0..3000).map(f64::from).collect();
        write_fits(&path, "LIGHTCURVE", false, &times);
        let whole = fs::read(&path).unwrap();
        assert!(whole.len() > 4 * 2880 && whole.len().is_multiple_of(2880));
        for (cut, want) in [
            (
                whole.len() - 1000,
                "not a whole number of 2880-byte FITS records",
            ),
            (
                whole.len() - 2 * 2880,
                "truncated: the header promises data up to byte",
            ),
        ] {
            let short = dir.path().join(format!("cut{cut}.fits"));
            fs::write(&short, &whole[..cut]).unwrap();
            let e = read_light_curves(&short).unwrap_err().to_string();
            assert!(
                e.contains(&format!("cut{cut}.fits")) && e.contains(want),
                "{e}"
            );
        }
        assert_eq!(read_light_curves(&path).unwrap()[0].0.t.len(), 2999);
    }

    #[test]
    fn periodogram_csv_reads_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pg.csv");
        let f1 = [0.1, 0.2 + 1e-17, 1.0 / 3.0];
        let p1 = [0.5, 1e-300, 0.999_999_999_999];
        let f2 = [2.0];
        let p2 = [f64::MIN_POSITIVE];
        let curves: [(&str, &[f64], &[f64]); 2] = [("#1, \"A\"", &f1, &p1), ("B", &f2, &p2)];
        write_periodogram_csv(&path, &curves, "standard").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# normalization: standard\nobject,frequency,power\n"));
        let mut reader = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        assert_eq!(
            reader.headers().unwrap(),
            vec!["object", "frequency", "power"]
        );
        let rows: Vec<(String, f64, f64)> = reader
            .records()
            .map(|r| {
                let r = r.unwrap();
                (
                    r[0].to_string(),
                    r[1].parse().unwrap(),
                    r[2].parse().unwrap(),
                )
            })
            .collect();
        let mut expected = Vec::new();
        for (name, f, p) in curves {
            for (f, p) in f.iter().zip(p) {
                expected.push((name.to_string(), *f, *p));
            }
        }
        assert_eq!(rows, expected);
        // Nothing is written (and nothing left behind) when a curve is inconsistent.
        let bad: [(&str, &[f64], &[f64]); 1] = [("X", &f1, &p2)];
        let other = dir.path().join("bad.csv");
        assert!(write_periodogram_csv(&other, &bad, "psd").is_err());
        assert!(write_periodogram_csv(&other, &curves, "a\nb").is_err());
        assert!(!other.exists());
        let nested = dir.path().join("missing").join("pg.csv");
        assert!(matches!(
            write_periodogram_csv(&nested, &curves, "model"),
            Err(InputError::Io { .. })
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn peaks_csv_columns_and_empty_fap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peaks.csv");
        let a = [
            Peak {
                index: 41,
                frequency: 4.0,
                power: 0.75,
                fap: Some(1e-12),
            },
            Peak {
                index: 7,
                frequency: 0.1,
                power: 0.5,
                fap: None,
            },
        ];
        write_peaks_csv(&path, &[("star A", &a), ("B", &[])]).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "object,rank,index,frequency,period,power,fap\n\
             star A,1,41,4.0,0.25,0.75,1e-12\n\
             star A,2,7,0.1,10.0,0.5,\n"
        );
    }
}
