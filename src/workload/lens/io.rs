//! Lens inputs and outputs: halo catalogues and multiple-image systems (CSV), maps (FITS).
//!
//! Self-contained on purpose: these are plain records, and turning them into the kernel's halos is the
//! caller's job. Readers name the file, the 1-based line, the column and the offending value in every
//! error. Writers check records against the same rules as the readers (so whatever is written reads
//! back equal), and write a temporary file beside the target and rename it, so a failed write never
//! leaves a half-written file under the target's name.
//!
//! CSV: header row required, column order free, lines starting with `#` and blank lines ignored,
//! fields trimmed, unknown columns rejected. FITS: cfitsio (crate `fitsio`, built from its bundled
//! source and linked statically) encodes the file in memory; std writes the bytes.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use crate::fits_image::{read_image, write_image, Card, ImageOut, Pixels};

pub use crate::inputs::InputError;
use crate::inputs::{
    csv_rows, csv_writer, finish_csv, float, header_columns, io_error, write_atomic,
};

// ---------------------------------------------------------------------------------------------------
// Halo catalogue
// ---------------------------------------------------------------------------------------------------

/// Halo mass profile, with LENSTOOL's potential type numbers (`--profile sie|dpie` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum HaloProfile {
    /// LENSTOOL type 5: pseudo-elliptical singular isothermal sphere; no core or cut radius.
    Sie,
    /// LENSTOOL type 81: dual pseudo-isothermal elliptical mass distribution (core and cut radii).
    Dpie,
}

impl HaloProfile {
    /// The name written to CSV.
    pub fn name(self) -> &'static str {
        match self {
            HaloProfile::Sie => "sie",
            HaloProfile::Dpie => "dpie",
        }
    }

    pub fn lenstool_type(self) -> u32 {
        match self {
            HaloProfile::Sie => 5,
            HaloProfile::Dpie => 81,
        }
    }

    /// Accepts `sie`/`dpie` in any case, or LENSTOOL's numbers `5`/`81`.
    pub fn parse(text: &str) -> Option<HaloProfile> {
        match text.to_ascii_lowercase().as_str() {
            "sie" | "5" => Some(HaloProfile::Sie),
            "dpie" | "81" => Some(HaloProfile::Dpie),
            _ => None,
        }
    }
}

/// One halo of a catalogue. Lengths in arcsec, relative to the map centre, +x West as in LENSTOOL.
#[derive(Debug, Clone, PartialEq)]
pub struct HaloRecord {
    pub id: String,
    pub profile: HaloProfile,
    pub x: f64,
    pub y: f64,
    /// Velocity dispersion in km/s; for dpie, LENSTOOL's fiducial σ_LT.
    pub sigma_kms: f64,
    /// LENSTOOL mass ellipticity e = (a² − b²)/(a² + b²), 0 ≤ e < 1.
    pub ellipticity: f64,
    /// Position angle in degrees, counter-clockwise from +x.
    pub angle_deg: f64,
    /// Core radius (dpie only; 0 for sie).
    pub r_core: f64,
    /// Cut radius (dpie only, > r_core; 0 for sie).
    pub r_cut: f64,
}

const H_ID: &str = "id";
const H_PROFILE: &str = "profile";
const H_X: &str = "x_arcsec";
const H_Y: &str = "y_arcsec";
const H_SIGMA: &str = "sigma_kms";
const H_E: &str = "ellipticity";
const H_ANGLE: &str = "angle_deg";
const H_RCORE: &str = "r_core_arcsec";
const H_RCUT: &str = "r_cut_arcsec";

/// Column order used by the writer; any order is read.
const HALO_COLUMNS: [&str; 9] = [
    H_ID, H_PROFILE, H_X, H_Y, H_SIGMA, H_E, H_ANGLE, H_RCORE, H_RCUT,
];
/// The radii may be left out of a catalogue with no dpie halo.
const HALO_REQUIRED: [&str; 7] = [H_ID, H_PROFILE, H_X, H_Y, H_SIGMA, H_E, H_ANGLE];

/// Reads a halo catalogue CSV (columns in the module docs and `HALO_COLUMNS`).
pub fn read_halos(path: &Path) -> Result<Vec<HaloRecord>, InputError> {
    let text = read_text(path)?;
    parse_halos(&text, &path.display().to_string())
}

/// Parses a halo catalogue; `source` names the file in error messages.
pub fn parse_halos(text: &str, source: &str) -> Result<Vec<HaloRecord>, InputError> {
    let table = Table::parse(text, source, &HALO_COLUMNS, &HALO_REQUIRED)?;
    let mut halos = Vec::with_capacity(table.rows.len());
    for (line, record) in &table.rows {
        let row = Row {
            table: &table,
            line: *line,
            record,
        };
        halos.push(halo_from_row(&row)?);
    }
    if halos.is_empty() {
        return Err(InputError::Content {
            file: source.to_string(),
            problem: "the catalogue has a header but no halos".to_string(),
        });
    }
    Ok(halos)
}

fn halo_from_row(row: &Row) -> Result<HaloRecord, InputError> {
    let id = row.string(H_ID)?;
    let profile_text = row.text(H_PROFILE);
    if profile_text.is_empty() {
        return Err(row.missing(H_PROFILE, "no value"));
    }
    let profile = HaloProfile::parse(profile_text)
        .ok_or_else(|| row.bad(H_PROFILE, "is not a known profile (sie, dpie, 5 or 81)"))?;
    let (r_core, r_cut) = match profile {
        HaloProfile::Sie => {
            // A radius given for an sie halo would be silently ignored by the kernel: refuse it.
            for column in [H_RCORE, H_RCUT] {
                if !row.text(column).is_empty() {
                    return Err(row.bad(
                        column,
                        "must be empty for an sie halo (LENSTOOL type 5 has no core or cut radius)",
                    ));
                }
            }
            (0.0, 0.0)
        }
        HaloProfile::Dpie => {
            let need = |column| {
                row.optional_number(column)?
                    .ok_or_else(|| row.missing(column, "a dpie halo needs a value"))
            };
            (need(H_RCORE)?, need(H_RCUT)?)
        }
    };
    let halo = HaloRecord {
        id,
        profile,
        x: row.number(H_X)?,
        y: row.number(H_Y)?,
        sigma_kms: row.number(H_SIGMA)?,
        ellipticity: row.number(H_E)?,
        angle_deg: row.number(H_ANGLE)?,
        r_core,
        r_cut,
    };
    check_halo(&halo).map_err(|v| row.bad(v.column, &v.problem))?;
    Ok(halo)
}

/// A broken rule: the column, the value as the writer would print it, and what is wrong.
struct Violation {
    column: &'static str,
    value: String,
    problem: String,
}

fn violation(column: &'static str, value: impl std::fmt::Debug, problem: &str) -> Violation {
    Violation {
        column,
        value: format!("{value:?}"),
        problem: problem.to_string(),
    }
}

/// Largest |x| or |y| of a halo centre: a degree, far beyond any lens field.
pub const MAX_COORDINATE_ARCSEC: f64 = 3600.0;

/// The value rules shared by reader and writer (the reader has already refused unparsable and
/// non-finite numbers; the writer relies on this for them too).
fn check_halo(h: &HaloRecord) -> Result<(), Violation> {
    check_id(H_ID, &h.id)?;
    for (column, v) in [
        (H_X, h.x),
        (H_Y, h.y),
        (H_SIGMA, h.sigma_kms),
        (H_E, h.ellipticity),
        (H_ANGLE, h.angle_deg),
        (H_RCORE, h.r_core),
        (H_RCUT, h.r_cut),
    ] {
        if !v.is_finite() {
            return Err(violation(column, v, "is not finite"));
        }
    }
    if h.sigma_kms <= 0.0 {
        return Err(violation(H_SIGMA, h.sigma_kms, "must be > 0"));
    }
    // A velocity dispersion at or above the speed of light is no halo (and its strength overflows).
    if h.sigma_kms >= super::C_KMS {
        let problem = format!("must be below the speed of light, {} km/s", super::C_KMS);
        return Err(violation(H_SIGMA, h.sigma_kms, &problem));
    }
    // Coordinates far outside any field would make the kernels' 32-bit pixel offsets overflow.
    for (column, v) in [(H_X, h.x), (H_Y, h.y)] {
        if v.abs() > MAX_COORDINATE_ARCSEC {
            let problem = format!("is beyond ±{MAX_COORDINATE_ARCSEC}″ (a degree)");
            return Err(violation(column, v, &problem));
        }
    }
    if !(0.0..1.0).contains(&h.ellipticity) {
        return Err(violation(H_E, h.ellipticity, "is outside [0, 1)"));
    }
    match h.profile {
        HaloProfile::Sie => {
            for (column, v) in [(H_RCORE, h.r_core), (H_RCUT, h.r_cut)] {
                if v != 0.0 {
                    return Err(violation(
                        column,
                        v,
                        "must be 0 for an sie halo (it is written as an empty field)",
                    ));
                }
            }
        }
        HaloProfile::Dpie => {
            if h.r_core < 0.0 {
                return Err(violation(H_RCORE, h.r_core, "must be >= 0"));
            }
            if h.r_cut <= h.r_core {
                let problem = format!("must be greater than {H_RCORE} ({:?})", h.r_core);
                return Err(violation(H_RCUT, h.r_cut, &problem));
            }
        }
    }
    Ok(())
}

/// Ids are trimmed on reading, so one with outer whitespace could not read back equal.
fn check_id(column: &'static str, id: &str) -> Result<(), Violation> {
    if id.is_empty() {
        return Err(violation(column, id, "must not be empty"));
    }
    if id.trim() != id {
        return Err(violation(
            column,
            id,
            "has leading or trailing whitespace, which the reader would trim",
        ));
    }
    Ok(())
}

/// Writes a halo catalogue atomically, after checking every record; floats round-trip exactly.
pub fn write_halos(path: &Path, halos: &[HaloRecord]) -> Result<(), InputError> {
    let file = path.display().to_string();
    for (i, h) in halos.iter().enumerate() {
        check_halo(h).map_err(|v| InputError::Record {
            file: file.clone(),
            record: format!("halo {} (id {:?})", i + 1, h.id),
            column: v.column.to_string(),
            value: v.value,
            problem: v.problem,
        })?;
    }
    if halos.is_empty() {
        // The reader refuses an empty catalogue, so writing one would only defer the error.
        return Err(InputError::Content {
            file,
            problem: "no halos to write".to_string(),
        });
    }
    let mut w = csv_writer();
    let result = (|| {
        w.write_record(HALO_COLUMNS)?;
        for h in halos {
            let radius = |v: f64| match h.profile {
                HaloProfile::Sie => String::new(),
                HaloProfile::Dpie => float(v),
            };
            w.write_record([
                h.id.clone(),
                h.profile.name().to_string(),
                float(h.x),
                float(h.y),
                float(h.sigma_kms),
                float(h.ellipticity),
                float(h.angle_deg),
                radius(h.r_core),
                radius(h.r_cut),
            ])?;
        }
        Ok::<(), csv::Error>(())
    })();
    let bytes = finish_csv(w, result, &file)?;
    write_atomic(path, &bytes)
}

// ---------------------------------------------------------------------------------------------------
// Image systems
// ---------------------------------------------------------------------------------------------------

/// One observed image of a multiple-image system, in arcsec relative to the map centre.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObservedImage {
    pub x: f64,
    pub y: f64,
    /// Positional error (1σ), > 0.
    pub sigma: f64,
}

/// A multiply imaged source: at least two images, one source redshift.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSystem {
    pub id: String,
    pub z_source: f64,
    pub images: Vec<ObservedImage>,
}

const S_SYSTEM: &str = "system";
const S_Z: &str = "z_source";
const S_X: &str = "x_arcsec";
const S_Y: &str = "y_arcsec";
const S_SIGMA: &str = "sigma_arcsec";
const SYSTEM_COLUMNS: [&str; 5] = [S_SYSTEM, S_Z, S_X, S_Y, S_SIGMA];

/// Reads image systems whose sources must lie behind a lens at redshift `z_lens` (give 0 for no lens).
pub fn read_image_systems(path: &Path, z_lens: f64) -> Result<Vec<ImageSystem>, InputError> {
    let text = read_text(path)?;
    parse_image_systems(&text, &path.display().to_string(), z_lens)
}

/// Parses image systems (one row per observed image), keeping the order in which systems first
/// appear; rows of a system need not be adjacent. `source` names the file in error messages; every source
/// must lie behind the lens at `z_lens` (0 where no lens is known).
pub fn parse_image_systems(
    text: &str,
    source: &str,
    z_lens: f64,
) -> Result<Vec<ImageSystem>, InputError> {
    let table = Table::parse(text, source, &SYSTEM_COLUMNS, &SYSTEM_COLUMNS)?;
    let mut systems: Vec<ImageSystem> = Vec::new();
    // System id → (index in `systems`, line of its first row).
    let mut seen: HashMap<String, (usize, u64)> = HashMap::new();
    for (line, record) in &table.rows {
        let row = Row {
            table: &table,
            line: *line,
            record,
        };
        let id = row.string(S_SYSTEM)?;
        let z_source = row.number(S_Z)?;
        let image = ObservedImage {
            x: row.number(S_X)?,
            y: row.number(S_Y)?,
            sigma: row.number(S_SIGMA)?,
        };
        check_system_z(z_source, z_lens).map_err(|v| row.bad(v.column, &v.problem))?;
        check_image(&image).map_err(|v| row.bad(v.column, &v.problem))?;
        match seen.get(&id) {
            Some(&(index, first_line)) => {
                let system = &mut systems[index];
                if system.z_source != z_source {
                    let problem = format!(
                        "differs from {S_Z} {:?} given for system '{id}' on line {first_line}",
                        system.z_source
                    );
                    return Err(row.bad(S_Z, &problem));
                }
                system.images.push(image);
            }
            None => {
                seen.insert(id.clone(), (systems.len(), *line));
                systems.push(ImageSystem {
                    id,
                    z_source,
                    images: vec![image],
                });
            }
        }
    }
    if systems.is_empty() {
        return Err(InputError::Content {
            file: source.to_string(),
            problem: "the file has a header but no images".to_string(),
        });
    }
    for s in &systems {
        if s.images.len() < 2 {
            return Err(InputError::Line {
                file: source.to_string(),
                line: seen[&s.id].1,
                problem: format!(
                    "system '{}' has only {} image; a system needs at least 2",
                    s.id,
                    s.images.len()
                ),
            });
        }
    }
    Ok(systems)
}

/// A source redshift: finite, positive, and behind the lens at `z_lens` (0 where no lens is known).
fn check_system_z(z: f64, z_lens: f64) -> Result<(), Violation> {
    if !z.is_finite() {
        return Err(violation(S_Z, z, "is not finite"));
    }
    if z <= 0.0 {
        return Err(violation(S_Z, z, "must be > 0"));
    }
    if z <= z_lens {
        let problem = format!("must be behind the lens, at z > {z_lens}");
        return Err(violation(S_Z, z, &problem));
    }
    Ok(())
}

fn check_image(im: &ObservedImage) -> Result<(), Violation> {
    for (column, v) in [(S_X, im.x), (S_Y, im.y), (S_SIGMA, im.sigma)] {
        if !v.is_finite() {
            return Err(violation(column, v, "is not finite"));
        }
    }
    if im.sigma <= 0.0 {
        return Err(violation(S_SIGMA, im.sigma, "must be > 0"));
    }
    Ok(())
}

/// Writes image systems atomically, one row per image, after checking them against the reader's rules.
pub fn write_image_systems(path: &Path, systems: &[ImageSystem]) -> Result<(), InputError> {
    let file = path.display().to_string();
    let record_error = |record: String, v: Violation| InputError::Record {
        file: file.clone(),
        record,
        column: v.column.to_string(),
        value: v.value,
        problem: v.problem,
    };
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (i, s) in systems.iter().enumerate() {
        let name = format!("system {} (id {:?})", i + 1, s.id);
        check_id(S_SYSTEM, &s.id).map_err(|v| record_error(name.clone(), v))?;
        // Two entries with one id would merge into one system on reading.
        if let Some(first) = ids.insert(&s.id, i + 1) {
            let problem = format!("is also the id of system {first}");
            return Err(record_error(name, violation(S_SYSTEM, &s.id, &problem)));
        }
        check_system_z(s.z_source, 0.0).map_err(|v| record_error(name.clone(), v))?;
        if s.images.len() < 2 {
            return Err(InputError::Content {
                file: file.clone(),
                problem: format!(
                    "{name} has {} image(s); a system needs at least 2",
                    s.images.len()
                ),
            });
        }
        for (k, im) in s.images.iter().enumerate() {
            check_image(im).map_err(|v| record_error(format!("{name} image {}", k + 1), v))?;
        }
    }
    if systems.is_empty() {
        return Err(InputError::Content {
            file: file.clone(),
            problem: "no image systems to write".to_string(),
        });
    }
    let mut w = csv_writer();
    let result = (|| {
        w.write_record(SYSTEM_COLUMNS)?;
        for s in systems {
            for im in &s.images {
                w.write_record([
                    s.id.clone(),
                    float(s.z_source),
                    float(im.x),
                    float(im.y),
                    float(im.sigma),
                ])?;
            }
        }
        Ok::<(), csv::Error>(())
    })();
    let bytes = finish_csv(w, result, &file)?;
    write_atomic(path, &bytes)
}

// ---------------------------------------------------------------------------------------------------
// CSV plumbing
// ---------------------------------------------------------------------------------------------------

/// A CSV file after header checks: canonical column name → field index, and the data rows with
/// their 1-based line numbers.
struct Table {
    file: String,
    columns: HashMap<&'static str, usize>,
    rows: Vec<(u64, csv::StringRecord)>,
}

impl Table {
    fn parse(
        text: &str,
        file: &str,
        known: &[&'static str],
        required: &[&'static str],
    ) -> Result<Table, InputError> {
        let (columns, rows) = csv_rows(text, file, |line, header| {
            header_columns(file, line, header, known, required)
        })?;
        Ok(Table {
            file: file.to_string(),
            columns,
            rows,
        })
    }
}

/// One data row, read by column name.
struct Row<'a> {
    table: &'a Table,
    line: u64,
    record: &'a csv::StringRecord,
}

impl Row<'_> {
    /// The trimmed field, or "" where the column is absent.
    fn text(&self, column: &str) -> &str {
        self.table
            .columns
            .get(column)
            .and_then(|&i| self.record.get(i))
            .unwrap_or("")
    }

    fn bad(&self, column: &str, problem: &str) -> InputError {
        InputError::Value {
            file: self.table.file.clone(),
            line: self.line,
            column: column.to_string(),
            value: self.text(column).to_string(),
            problem: problem.to_string(),
        }
    }

    fn missing(&self, column: &str, problem: &str) -> InputError {
        let problem = if self.table.columns.contains_key(column) {
            problem.to_string()
        } else {
            format!("{problem} (the column is absent)")
        };
        InputError::Missing {
            file: self.table.file.clone(),
            line: self.line,
            column: column.to_string(),
            problem,
        }
    }

    fn string(&self, column: &str) -> Result<String, InputError> {
        match self.text(column) {
            "" => Err(self.missing(column, "no value")),
            s => Ok(s.to_string()),
        }
    }

    /// A finite number, or None for an empty field or absent column.
    fn optional_number(&self, column: &str) -> Result<Option<f64>, InputError> {
        let text = self.text(column);
        if text.is_empty() {
            return Ok(None);
        }
        let v: f64 = text
            .parse()
            .map_err(|_| self.bad(column, "is not a number"))?;
        if !v.is_finite() {
            return Err(self.bad(column, "is not finite"));
        }
        Ok(Some(v))
    }

    fn number(&self, column: &str) -> Result<f64, InputError> {
        self.optional_number(column)?
            .ok_or_else(|| self.missing(column, "no value"))
    }
}

fn read_text(path: &Path) -> Result<String, InputError> {
    fs::read_to_string(path).map_err(|e| io_error(path, e))
}

// ---------------------------------------------------------------------------------------------------
// FITS maps
// ---------------------------------------------------------------------------------------------------

/// A map to write: row-major float32, x (FITS axis 1) fastest, on a grid centred on the centre.
#[derive(Debug, Clone, Copy)]
pub struct MapImage<'a> {
    pub data: &'a [f32],
    pub nx: usize,
    pub ny: usize,
    pub pixel_arcsec: f64,
    pub centre_x_arcsec: f64,
    pub centre_y_arcsec: f64,
    /// Written as EXTNAME (e.g. "alpha_x"); printable ASCII, not empty.
    pub name: &'a str,
    /// Written as BUNIT (e.g. "arcsec"); "" writes no BUNIT.
    pub unit: &'a str,
    /// One HISTORY card each; cfitsio continues a line longer than 72 characters on further cards.
    pub history: &'a [String],
}

/// A map read back, with the header values a round trip needs. Absent string keys read as "".
#[derive(Debug, Clone, PartialEq)]
pub struct MapFits {
    pub data: Vec<f32>,
    pub nx: usize,
    pub ny: usize,
    pub bitpix: i64,
    pub ctype: [String; 2],
    pub cunit: [String; 2],
    pub crpix: [f64; 2],
    pub crval: [f64; 2],
    pub cdelt: [f64; 2],
    pub name: String,
    pub unit: String,
    pub origin: String,
    pub history: Vec<String>,
}

/// Writes a 2-D float32 primary image with a linear offset WCS (arcsec from the lens centre):
/// pixel (i, j), 1-based, sits at CRVAL + (p − CRPIX)·CDELT with CRPIX = (n + 1)/2, matching a grid
/// whose pixel k (0-based) is at centre + (k − (n − 1)/2)·pixel. Written atomically through
/// [`crate::fits_image`].
pub fn write_map_fits(path: &Path, map: &MapImage) -> Result<(), InputError> {
    let file = path.display().to_string();
    check_map(map).map_err(|problem| InputError::Map {
        file: file.clone(),
        problem,
    })?;
    let crpix = [(map.nx as f64 + 1.0) / 2.0, (map.ny as f64 + 1.0) / 2.0];
    let crval = [map.centre_x_arcsec, map.centre_y_arcsec];
    let mut cards = Vec::new();
    for (i, (x, direction)) in [("X", "West"), ("Y", "North")].into_iter().enumerate() {
        let axis = i + 1;
        cards.extend([
            Card::text(
                &format!("CTYPE{axis}"),
                &format!("OFFSET-{x}"),
                &format!("linear offset from the lens centre, +{x} {direction}"),
            ),
            Card::text(&format!("CUNIT{axis}"), "arcsec", ""),
            Card::real(
                &format!("CRPIX{axis}"),
                crpix[i],
                "reference pixel (1-based)",
            ),
            Card::real(
                &format!("CRVAL{axis}"),
                crval[i],
                "offset at CRPIX [arcsec]",
            ),
            Card::real(
                &format!("CDELT{axis}"),
                map.pixel_arcsec,
                "pixel scale [arcsec]",
            ),
        ]);
    }
    if !map.unit.is_empty() {
        cards.push(Card::text("BUNIT", map.unit, "unit of the pixel values"));
    }
    write_image(
        path,
        &ImageOut {
            nx: map.nx,
            ny: map.ny,
            pixels: Pixels::F32(map.data),
            name: map.name,
            cards: &cards,
            history: map.history,
        },
    )
}

/// What [`write_map_fits`] checks beyond what any FITS image needs (shape, printable text: checked by
/// [`crate::fits_image::write_image`]): a map's scale and centre.
fn check_map(map: &MapImage) -> Result<(), String> {
    if !(map.pixel_arcsec > 0.0 && map.pixel_arcsec.is_finite()) {
        return Err(format!(
            "pixel scale {:?} arcsec must be positive and finite",
            map.pixel_arcsec
        ));
    }
    if !(map.centre_x_arcsec.is_finite() && map.centre_y_arcsec.is_finite()) {
        return Err(format!(
            "map centre ({:?}, {:?}) arcsec is not finite",
            map.centre_x_arcsec, map.centre_y_arcsec
        ));
    }
    Ok(())
}

/// Reads a map written by `write_map_fits` (any 2-D primary image, converted to f32).
pub fn read_map_fits(path: &Path) -> Result<MapFits, InputError> {
    let image = read_image(path)?;
    let file = path.display().to_string();
    let text = |key: &str| image.card(key).unwrap_or_default().to_string();
    let real = |key: &str| {
        image.real(key).ok_or_else(|| InputError::Fits {
            file: file.clone(),
            message: format!("keyword {key} missing or not a number"),
        })
    };
    Ok(MapFits {
        nx: image.nx,
        ny: image.ny,
        bitpix: real("BITPIX")? as i64,
        ctype: [text("CTYPE1"), text("CTYPE2")],
        cunit: [text("CUNIT1"), text("CUNIT2")],
        crpix: [real("CRPIX1")?, real("CRPIX2")?],
        crval: [real("CRVAL1")?, real("CRVAL2")?],
        cdelt: [real("CDELT1")?, real("CDELT2")?],
        name: text("EXTNAME"),
        unit: text("BUNIT"),
        origin: text("ORIGIN"),
        history: image.history.clone(),
        data: image.data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::FITS_BLOCK;

    const HALOS_OK: &str = "\
# a catalogue with comments and blank lines
id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg,r_core_arcsec,r_cut_arcsec

bcg, dpie , 0.5, -1.25, 800, 0.3, 45, 0.1, 300
# a galaxy
g1,sie,10,20,120,0,-30,,
g2,5,-3.5,7,110.5,0.2,90,,
g3,81,1,2,150,0.1,0,0,12.5
";

    fn sample_halos() -> Vec<HaloRecord> {
        vec![
            HaloRecord {
                id: "bcg, \"main\" #1".to_string(),
                profile: HaloProfile::Dpie,
                x: 0.1 + 0.2,
                y: -1.0 / 3.0,
                sigma_kms: 812.345678901234,
                ellipticity: 0.299999,
                angle_deg: -12.5,
                r_core: 1e-7,
                r_cut: 1e20,
            },
            HaloRecord {
                id: "#g1".to_string(),
                profile: HaloProfile::Sie,
                x: -0.0,
                y: 101.0,
                sigma_kms: 120.0,
                ellipticity: 0.0,
                angle_deg: 359.999,
                r_core: 0.0,
                r_cut: 0.0,
            },
        ]
    }

    fn sample_systems() -> Vec<ImageSystem> {
        let im = |x, y, sigma| ObservedImage { x, y, sigma };
        vec![
            ImageSystem {
                id: "1".to_string(),
                z_source: 1.0 / 3.0 + 1.0,
                images: vec![im(1.0, 2.0, 0.5), im(-3.25, 4.0, 0.1 + 0.2)],
            },
            ImageSystem {
                id: "arc A".to_string(),
                z_source: 3.5,
                images: vec![im(0.0, 0.0, 1e-3), im(10.0, -10.0, 0.5), im(5.0, 5.0, 0.5)],
            },
        ]
    }

    fn halo_error(text: &str) -> String {
        parse_halos(text, "halos.csv").unwrap_err().to_string()
    }

    fn system_error(text: &str) -> String {
        parse_image_systems(text, "images.csv", 0.0)
            .unwrap_err()
            .to_string()
    }

    const HEADER: &str =
        "id,profile,x_arcsec,y_arcsec,sigma_kms,ellipticity,angle_deg,r_core_arcsec,r_cut_arcsec\n";

    /// The header, then a comment (line 2), then `row` on line 3.
    fn halo_row(row: &str) -> String {
        format!("{HEADER}# comment\n{row}\n")
    }

    #[test]
    fn parses_halos_with_comments_blank_lines_and_profile_numbers() {
        let halos = parse_halos(HALOS_OK, "halos.csv").unwrap();
        assert_eq!(halos.len(), 4);
        assert_eq!(halos[0].id, "bcg");
        assert_eq!(halos[0].profile, HaloProfile::Dpie);
        assert_eq!((halos[0].x, halos[0].y), (0.5, -1.25));
        assert_eq!((halos[0].r_core, halos[0].r_cut), (0.1, 300.0));
        assert_eq!(halos[1].profile, HaloProfile::Sie);
        assert_eq!((halos[1].r_core, halos[1].r_cut), (0.0, 0.0));
        assert_eq!(halos[2].profile, HaloProfile::Sie);
        assert_eq!(halos[2].sigma_kms, 110.5);
        assert_eq!(halos[3].profile, HaloProfile::Dpie);
        assert_eq!(halos[3].r_core, 0.0);
        assert_eq!(HaloProfile::Dpie.lenstool_type(), 81);
    }

    #[test]
    fn halo_columns_in_any_order_and_radii_optional_without_dpie() {
        let text = "angle_deg,ellipticity,sigma_kms,y_arcsec,x_arcsec,profile,id\n\
                    10,0.1,200,2,1,SIE,a\n";
        let halos = parse_halos(text, "h.csv").unwrap();
        assert_eq!(
            halos,
            vec![HaloRecord {
                id: "a".to_string(),
                profile: HaloProfile::Sie,
                x: 1.0,
                y: 2.0,
                sigma_kms: 200.0,
                ellipticity: 0.1,
                angle_deg: 10.0,
                r_core: 0.0,
                r_cut: 0.0,
            }]
        );
        // Without the radius columns a dpie row cannot be read.
        let e = parse_halos(&text.replace("SIE", "dpie"), "h.csv")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "h.csv line 2, column 'r_core_arcsec': a dpie halo needs a value (the column is absent)"
        );
    }

    #[test]
    fn halos_round_trip_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("halos.csv");
        let halos = sample_halos();
        write_halos(&path, &halos).unwrap();
        let back = read_halos(&path).unwrap();
        assert_eq!(back, halos);
        assert!(back[1].x.is_sign_negative(), "-0.0 keeps its sign");
        // Overwriting an existing file works too.
        write_halos(&path, &halos[1..]).unwrap();
        assert_eq!(read_halos(&path).unwrap(), halos[1..]);
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn halo_value_errors_name_line_column_and_value() {
        let cases = [
            (
                "h,sie,abc,0,100,0,0,,",
                "halos.csv line 3, column 'x_arcsec': value abc is not a number",
            ),
            (
                "h,sie,0,inf,100,0,0,,",
                "halos.csv line 3, column 'y_arcsec': value inf is not finite",
            ),
            (
                "h,sie,0,0,NaN,0,0,,",
                "halos.csv line 3, column 'sigma_kms': value NaN is not finite",
            ),
            (
                "h,sie,0,0,0,0,0,,",
                "halos.csv line 3, column 'sigma_kms': value 0 must be > 0",
            ),
            (
                "h,sie,0,0,-5,0,0,,",
                "halos.csv line 3, column 'sigma_kms': value -5 must be > 0",
            ),
            (
                "h,sie,0,0,100,1.2,0,,",
                "halos.csv line 3, column 'ellipticity': value 1.2 is outside [0, 1)",
            ),
            (
                "h,sie,0,0,100,1,0,,",
                "halos.csv line 3, column 'ellipticity': value 1 is outside [0, 1)",
            ),
            (
                "h,sie,0,0,100,-0.1,0,,",
                "halos.csv line 3, column 'ellipticity': value -0.1 is outside [0, 1)",
            ),
            (
                "h,nfw,0,0,100,0,0,,",
                "halos.csv line 3, column 'profile': value nfw is not a known profile \
                 (sie, dpie, 5 or 81)",
            ),
            (
                "h,,0,0,100,0,0,,",
                "halos.csv line 3, column 'profile': no value",
            ),
            (
                ",sie,0,0,100,0,0,,",
                "halos.csv line 3, column 'id': no value",
            ),
            (
                "h,sie,0,,100,0,0,,",
                "halos.csv line 3, column 'y_arcsec': no value",
            ),
            (
                "h,dpie,0,0,100,0,0,,10",
                "halos.csv line 3, column 'r_core_arcsec': a dpie halo needs a value",
            ),
            (
                "h,dpie,0,0,100,0,0,1,",
                "halos.csv line 3, column 'r_cut_arcsec': a dpie halo needs a value",
            ),
            (
                "h,dpie,0,0,100,0,0,-1,10",
                "halos.csv line 3, column 'r_core_arcsec': value -1 must be >= 0",
            ),
            (
                "h,dpie,0,0,100,0,0,2,2",
                "halos.csv line 3, column 'r_cut_arcsec': value 2 must be greater than \
                 r_core_arcsec (2.0)",
            ),
            (
                "h,dpie,0,0,100,0,0,2,1.5",
                "halos.csv line 3, column 'r_cut_arcsec': value 1.5 must be greater than \
                 r_core_arcsec (2.0)",
            ),
            (
                "h,sie,0,0,100,0,0,0.5,",
                "halos.csv line 3, column 'r_core_arcsec': value 0.5 must be empty for an sie \
                 halo (LENSTOOL type 5 has no core or cut radius)",
            ),
            (
                "h,sie,0,0,100,0,0",
                "halos.csv line 3: 7 fields, but the header (line 1) has 9",
            ),
            (
                "h,sie,0,0,100,0,0,,,",
                "halos.csv line 3: 10 fields, but the header (line 1) has 9",
            ),
        ];
        for (row, expected) in cases {
            assert_eq!(halo_error(&halo_row(row)), expected, "row {row:?}");
        }
    }

    #[test]
    fn halo_header_errors() {
        let row = "h,sie,0,0,100,0,0,,\n";
        assert_eq!(
            halo_error(&format!(
                "# c\n{}{row}",
                HEADER.replace("y_arcsec", "x_arcsec")
            )),
            "halos.csv line 2: duplicate column 'x_arcsec'"
        );
        assert_eq!(
            halo_error(&format!(
                "{}{row}",
                HEADER.replace("angle_deg", "angle_deg,foo,z_lens")
            )),
            "halos.csv line 1: unknown columns 'foo', 'z_lens' (known columns: id, profile, \
             x_arcsec, y_arcsec, sigma_kms, ellipticity, angle_deg, r_core_arcsec, r_cut_arcsec)"
        );
        assert_eq!(
            halo_error("id,profile,x_arcsec,y_arcsec,ellipticity,angle_deg\nh,sie,0,0,0,0\n"),
            "halos.csv: missing required column 'sigma_kms'"
        );
        assert_eq!(
            halo_error(&format!("# only a header\n{HEADER}\n# and comments\n")),
            "halos.csv: the catalogue has a header but no halos"
        );
        assert_eq!(
            halo_error("# nothing\n\n   \n"),
            "halos.csv: no header row (the file is empty or only comments)"
        );
        assert_eq!(
            halo_error(""),
            "halos.csv: no header row (the file is empty or only comments)"
        );
    }

    #[test]
    fn line_numbers_count_comments_blank_lines_and_crlf() {
        let text = "# c1\r\n\r\n# c2\r\nsystem,z_source,x_arcsec,y_arcsec,sigma_arcsec\r\n\
                    A,2,0,0,0.1\r\n   \r\n# c3\r\n\r\nA,2,1,1,-1\r\n";
        assert_eq!(
            system_error(text),
            "images.csv line 9, column 'sigma_arcsec': value -1 must be > 0"
        );
        let text = text
            .replace("\r\n", "\n")
            .replace("# c1", "# c1 #, with commas");
        assert_eq!(
            system_error(&text),
            "images.csv line 9, column 'sigma_arcsec': value -1 must be > 0"
        );
    }

    #[test]
    fn unterminated_quote_shows_as_a_short_row() {
        // csv reads an unterminated quote to the end of the input as one field.
        assert_eq!(
            halo_error(&halo_row("\"h,sie,0,0,100,0,0,,")),
            "halos.csv line 3: 1 field, but the header (line 1) has 9"
        );
    }

    #[test]
    fn read_names_the_path_of_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.csv");
        let e = read_halos(&path).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }));
        assert!(e.to_string().contains("absent.csv"), "{e}");
    }

    #[test]
    fn invalid_halo_is_refused_by_the_writer_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("halos.csv");
        let mut halos = sample_halos();
        halos[1].ellipticity = 1.5;
        let e = write_halos(&path, &halos).unwrap_err().to_string();
        assert!(e.ends_with(
            "halos.csv: halo 2 (id \"#g1\"), field 'ellipticity': value 1.5 is outside [0, 1)"
        ));
        assert!(!path.exists());

        // A failed write leaves an existing file as it was.
        write_halos(&path, &sample_halos()).unwrap();
        let before = fs::read(&path).unwrap();
        let mut bad = sample_halos();
        bad[0].r_cut = bad[0].r_core;
        bad[1].id = " padded".to_string();
        assert!(write_halos(&path, &bad).is_err());
        assert!(write_halos(&path, &[]).is_err());
        assert_eq!(fs::read(&path).unwrap(), before);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);

        let mut sie_with_core = sample_halos();
        sie_with_core[1].r_core = 0.5;
        let e = write_halos(&path, &sie_with_core).unwrap_err().to_string();
        assert!(
            e.contains("field 'r_core_arcsec': value 0.5 must be 0 for an sie halo"),
            "{e}"
        );
    }

    #[test]
    fn failed_write_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        // The target's directory does not exist.
        let path = dir.path().join("missing").join("halos.csv");
        let e = write_halos(&path, &sample_halos()).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }), "{e}");
        assert!(!path.exists());
        // The rename fails (the target is a non-empty directory): the temporary file is removed.
        let target = dir.path().join("taken");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "x").unwrap();
        assert!(write_image_systems(&target, &sample_systems()).is_err());
        assert!(target.is_dir());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("taken")]);
    }

    #[test]
    fn image_systems_round_trip_and_keep_first_appearance_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("images.csv");
        let systems = sample_systems();
        write_image_systems(&path, &systems).unwrap();
        assert_eq!(read_image_systems(&path, 0.0).unwrap(), systems);

        // Columns in any order; rows of one system need not be adjacent.
        let text = "\
# systems
sigma_arcsec, x_arcsec, y_arcsec, z_source, system
0.5, 1, 1, 2.0, B

0.5, 2, 2, 1.5, A
0.4, 3, 3, 2, B
0.3, 4, 4, 1.5, A
0.2, 5, 5, 1.5, A
";
        let parsed = parse_image_systems(text, "images.csv", 0.0).unwrap();
        let ids: Vec<_> = parsed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["B", "A"]);
        assert_eq!(parsed[0].images.len(), 2);
        assert_eq!(
            parsed[0].images[1],
            ObservedImage {
                x: 3.0,
                y: 3.0,
                sigma: 0.4
            }
        );
        assert_eq!(parsed[1].z_source, 1.5);
        assert_eq!(parsed[1].images.len(), 3);
    }

    #[test]
    fn image_system_errors_name_line_column_and_value() {
        let header = "system,z_source,x_arcsec,y_arcsec,sigma_arcsec\n";
        let with = |rows: &str| format!("{header}A,2,0,0,0.1\n{rows}");
        let cases = [
            (
                with("A,2.5,1,1,0.1\n"),
                "images.csv line 3, column 'z_source': value 2.5 differs from z_source 2.0 \
                 given for system 'A' on line 2",
            ),
            (
                with("A,2,1,1,0\n"),
                "images.csv line 3, column 'sigma_arcsec': value 0 must be > 0",
            ),
            (
                with("A,2,1,1,-0.2\n"),
                "images.csv line 3, column 'sigma_arcsec': value -0.2 must be > 0",
            ),
            (
                with("B,0,1,1,0.1\n"),
                "images.csv line 3, column 'z_source': value 0 must be > 0",
            ),
            (
                with("B,-inf,1,1,0.1\n"),
                "images.csv line 3, column 'z_source': value -inf is not finite",
            ),
            (
                with("B,2,x,1,0.1\n"),
                "images.csv line 3, column 'x_arcsec': value x is not a number",
            ),
            (
                with("A,2,1,1,0.1\n# c\nB,3,1,1,0.1\n"),
                "images.csv line 5: system 'B' has only 1 image; a system needs at least 2",
            ),
            (
                with("A,2,1,1\n"),
                "images.csv line 3: 4 fields, but the header (line 1) has 5",
            ),
            (
                "system,z_source,x_arcsec,y_arcsec\nA,2,0,0\n".to_string(),
                "images.csv: missing required column 'sigma_arcsec'",
            ),
            (
                format!("{}A,2,0,0,0.1,1\n", header.replace('\n', ",z_lens\n")),
                "images.csv line 1: unknown column 'z_lens' (known columns: system, z_source, \
                 x_arcsec, y_arcsec, sigma_arcsec)",
            ),
            (
                header.to_string(),
                "images.csv: the file has a header but no images",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(system_error(&text), expected, "text {text:?}");
        }
    }

    #[test]
    fn invalid_systems_are_refused_by_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("images.csv");
        let mut one_image = sample_systems();
        one_image[1].images.truncate(1);
        let e = write_image_systems(&path, &one_image)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("system 2 (id \"arc A\") has 1 image(s); a system needs at least 2"),
            "{e}"
        );
        let mut twice = sample_systems();
        twice[1].id = "1".to_string();
        let e = write_image_systems(&path, &twice).unwrap_err().to_string();
        assert!(
            e.contains("field 'system': value \"1\" is also the id of system 1"),
            "{e}"
        );
        let mut bad_sigma = sample_systems();
        bad_sigma[0].images[1].sigma = f64::NAN;
        let e = write_image_systems(&path, &bad_sigma)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "system 1 (id \"1\") image 2, field 'sigma_arcsec': value NaN is not finite"
            ),
            "{e}"
        );
        assert!(!path.exists());
    }

    fn sample_map(data: &[f32]) -> MapImage<'_> {
        MapImage {
            data,
            nx: 7,
            ny: 5,
            pixel_arcsec: 0.197_167_968_75,
            centre_x_arcsec: 1.0 / 3.0,
            centre_y_arcsec: -2.5,
            name: "alpha_x",
            unit: "arcsec",
            history: &[],
        }
    }

    #[test]
    fn fits_map_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alpha_x.fits");
        // Distinct values, so a transposed or flipped read would show.
        let data: Vec<f32> = (0..35).map(|k| k as f32 * 1.5 - 7.25).collect();
        let history = vec![
            "astroport lens --preset tiny".to_string(),
            "commit 0123abc".to_string(),
        ];
        let map = MapImage {
            history: &history,
            ..sample_map(&data)
        };
        write_map_fits(&path, &map).unwrap();

        let bytes = fs::read(&path).unwrap();
        assert_eq!(bytes.len() % FITS_BLOCK, 0);
        let header = String::from_utf8_lossy(&bytes[..FITS_BLOCK]);
        assert!(header.starts_with("SIMPLE  =                    T"));
        assert!(header.contains("BITPIX  =                  -32"));
        assert!(header.contains("NAXIS1  =                    7"));
        assert!(header.contains("NAXIS2  =                    5"));

        let back = read_map_fits(&path).unwrap();
        assert_eq!((back.nx, back.ny), (7, 5));
        assert_eq!(back.data, data);
        assert_eq!(back.bitpix, -32);
        assert_eq!(back.crpix, [4.0, 3.0]);
        assert_eq!(back.crval, [1.0 / 3.0, -2.5]);
        assert_eq!(back.cdelt, [0.197_167_968_75, 0.197_167_968_75]);
        assert_eq!(back.ctype, ["OFFSET-X".to_string(), "OFFSET-Y".to_string()]);
        assert_eq!(back.cunit, ["arcsec".to_string(), "arcsec".to_string()]);
        assert_eq!(back.name, "alpha_x");
        assert_eq!(back.unit, "arcsec");
        assert_eq!(back.origin, "astroport");
        assert_eq!(back.history, history);
        // Pixel (i, j) 0-based is at centre + (i − (nx − 1)/2)·pixel, as the lens grid puts it.
        let x_of = |i: usize| back.crval[0] + ((i + 1) as f64 - back.crpix[0]) * back.cdelt[0];
        assert_eq!(x_of(3), 1.0 / 3.0);
    }

    #[test]
    fn fits_even_size_and_empty_unit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kappa.fits");
        let data = vec![0.5f32; 8 * 6];
        let map = MapImage {
            nx: 8,
            ny: 6,
            name: "kappa",
            unit: "",
            ..sample_map(&data)
        };
        write_map_fits(&path, &map).unwrap();
        let back = read_map_fits(&path).unwrap();
        assert_eq!(back.crpix, [4.5, 3.5]);
        assert_eq!(back.unit, "");
        assert!(back.history.is_empty());
        assert_eq!(back.data, data);
    }

    #[test]
    fn failed_fits_write_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("map.fits");
        let data = vec![1.0f32; 35];
        let short = &data[..34];
        let e = write_map_fits(&path, &sample_map(short))
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("map.fits: image size 7×5 does not match its 34 values"),
            "{e}"
        );
        let history = vec!["température".to_string()];
        let bad_history = MapImage {
            history: &history,
            ..sample_map(&data)
        };
        let e = write_map_fits(&path, &bad_history).unwrap_err().to_string();
        assert!(e.contains("history line 1"), "{e}");
        let no_scale = MapImage {
            pixel_arcsec: 0.0,
            ..sample_map(&data)
        };
        assert!(write_map_fits(&path, &no_scale).is_err());
        assert!(!path.exists());

        let nested = dir.path().join("no-such-dir").join("map.fits");
        assert!(write_map_fits(&nested, &sample_map(&data)).is_err());
        assert!(!nested.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn fits_path_with_cfitsio_special_characters() {
        // cfitsio would read '[1]' and a leading '!' as file-name syntax; the bytes go through std.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("!map[1].fits");
        let data: Vec<f32> = (0..35).map(|k| k as f32).collect();
        write_map_fits(&path, &sample_map(&data)).unwrap();
        assert_eq!(read_map_fits(&path).unwrap().data, data);
    }

    #[test]
    fn reading_a_non_fits_file_fails_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not.fits");
        fs::write(&path, "hello").unwrap();
        let e = read_map_fits(&path).unwrap_err().to_string();
        assert!(
            e.contains("not.fits") && e.contains("2880-byte FITS records"),
            "{e}"
        );
        // A whole number of records that is not FITS: no END card, refused before cfitsio sees it.
        fs::write(&path, vec![b'x'; 2880]).unwrap();
        let e = read_map_fits(&path).unwrap_err().to_string();
        assert!(
            e.contains("not.fits") && e.contains("not a FITS file"),
            "{e}"
        );
    }

    /// A map cut short (on a record boundary, before the data the header promises) is refused before
    /// cfitsio reads past the end.
    #[test]
    fn truncated_map_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.fits");
        let data: Vec<f32> = (0..5000).map(|k| k as f32).collect();
        let map = MapImage {
            nx: 100,
            ny: 50,
            ..sample_map(&data)
        };
        write_map_fits(&path, &map).unwrap();
        let whole = fs::read(&path).unwrap();
        fs::write(&path, &whole[..whole.len() - 2880]).unwrap();
        let e = read_map_fits(&path).unwrap_err().to_string();
        assert!(e.contains("big.fits") && e.contains("truncated"), "{e}");
    }
}
