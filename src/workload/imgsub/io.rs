//! The field on disk: `ref.fits`, `sci.fits` (electrons, float32), their variance (`ref.var.fits`,
//! `sci.var.fits`) and masks (`ref.mask.fits`, `sci.mask.fits`, 8-bit: 1 saturated, 2 bad column), each
//! with a TAN WCS and the generator's parameters in its header; and `truth.csv`. Files are first written
//! into a hidden folder beside them and moved into place only when all exist, so a failure leaves none.

use super::field::{Field, Image, Kind};
use crate::fits_image::{image_file_len, write_image, write_image_over, Card, ImageOut, Pixels};
use crate::inputs::{
    csv_writer, finish_csv, float, io_error, write_atomic, InputError, WrittenAhead,
};
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

/// Writes files named `names` into `dir` through `write`, which puts them in the folder it is given: a
/// hidden staging folder inside `dir`, whose files are moved into place only when all were written. A
/// failure leaves none of them. `dir` is made if it is missing (its parent must exist) and, on a failure,
/// taken away again.
/// `write` may compute as it writes (`subtract` writes the difference while detecting): its value comes
/// back with the files' places.
pub fn write_all_or_none<T, E: From<InputError>>(
    dir: &Path,
    tag: &str,
    names: &[&str],
    write: impl FnOnce(&Path) -> Result<T, E>,
) -> Result<(T, Vec<PathBuf>), E> {
    let made = !dir.is_dir();
    if made {
        std::fs::create_dir(dir).map_err(|e| io_error(dir, e))?;
    }
    let staging = dir.join(format!(".{tag}-{}.partial", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|e| io_error(&staging, e))?;
    let result = write(&staging).and_then(|value| {
        let places = names
            .iter()
            .map(|name| {
                let target = dir.join(name);
                std::fs::rename(staging.join(name), &target).map_err(|e| io_error(&target, e))?;
                Ok(target)
            })
            .collect::<Result<Vec<_>, InputError>>()?;
        Ok((value, places))
    });
    let _ = std::fs::remove_dir_all(&staging);
    if made && result.is_err() {
        let _ = std::fs::remove_dir(dir);
    }
    result
}

/// Writes the field's seven files into `dir` (which must exist): all of them, or none.
pub fn write_field(field: &Field, dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    write_all_or_none(dir, "field", &FILES, |staging| write_into(field, staging))
        .map(|((), places)| places)
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

/// The files `astroport subtract` always writes, in order (plus `forced.csv` and `quality.json` when asked).
pub const SUBTRACTION_FILES: [&str; 6] = [
    PLANES[0].0,
    PLANES[1].0,
    PLANES[2].0,
    PLANES[3].0,
    "catalogue.csv",
    "kernel.json",
];

/// A place for forced photometry (`--forced FILE`: a CSV with columns `x` and `y`, 0-based pixel
/// centres, and optionally `id`).
#[derive(Debug, Clone)]
pub struct ForcedPlace {
    pub id: String,
    pub x: f64,
    pub y: f64,
}

/// Reads the places of `--forced`; places off the image are an error naming the line.
pub fn read_forced(path: &Path, nx: usize, ny: usize) -> Result<Vec<ForcedPlace>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let file = path.display().to_string();
    let (index, rows) = crate::inputs::csv_rows(&text, &file, |line, header| {
        let find = |c: &str| header.iter().position(|h| h == c);
        match (find("x"), find("y")) {
            (Some(x), Some(y)) => Ok((x, y, find("id"))),
            _ => Err(InputError::Csv {
                file: file.clone(),
                message: format!(
                    "line {line}: the header needs columns 'x' and 'y' (0-based pixels)"
                ),
            }),
        }
    })?;
    rows.iter()
        .map(|(line, r)| {
            let number = |k: usize, name: &str| -> Result<f64, InputError> {
                let v = r[k].parse::<f64>().ok().filter(|v| v.is_finite());
                v.ok_or_else(|| InputError::Csv {
                    file: file.clone(),
                    message: format!("line {line}: {name} = '{}' is not a number", &r[k]),
                })
            };
            let (x, y) = (number(index.0, "x")?, number(index.1, "y")?);
            if !(x >= -0.5 && y >= -0.5 && x < nx as f64 - 0.5 && y < ny as f64 - 0.5) {
                return Err(InputError::Csv {
                    file: file.clone(),
                    message: format!("line {line}: ({x}, {y}) is off the {nx}×{ny} image"),
                });
            }
            Ok(ForcedPlace {
                id: index
                    .2
                    .map(|k| r[k].to_string())
                    .unwrap_or_else(|| line.to_string()),
                x,
                y,
            })
        })
        .collect()
}

/// One pair of a `subtract --pairs` list: the name of its output folder and its files.
#[derive(Debug, Clone)]
pub struct ListedPair {
    pub name: String,
    pub files: super::pair::PairFiles,
}

/// The columns of a pair list: `name`, `ref` and `sci` required, the others optional (an empty field: none).
const PAIR_COLUMNS: [&str; 7] = [
    "name", "ref", "sci", "ref_var", "sci_var", "ref_mask", "sci_mask",
];

/// Reads a `subtract --pairs` list: CSV with a header naming [`PAIR_COLUMNS`] (in any order), one pair a
/// row. Relative paths are taken from the list's folder. Names become output folders, so each must be
/// unique and a plain folder name.
pub fn read_pair_list(path: &Path) -> Result<Vec<ListedPair>, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let file = path.display().to_string();
    let base = path.parent().unwrap_or(Path::new("."));
    let (columns, rows) = crate::inputs::csv_rows(&text, &file, |line, header| {
        crate::inputs::header_columns(&file, line, header, &PAIR_COLUMNS, &PAIR_COLUMNS[..3])
    })?;
    let mut seen = std::collections::HashMap::new();
    let pairs = rows
        .iter()
        .map(|(line, r)| {
            let field = |c: &str| columns.get(c).map(|&k| &r[k]).filter(|v| !v.is_empty());
            let place = |c: &str| field(c).map(|v| base.join(v));
            let problem = |message: String| InputError::Csv {
                file: file.clone(),
                message: format!("line {line}: {message}"),
            };
            let name = field("name").ok_or_else(|| problem("name is empty".into()))?;
            let plain = Path::new(name).file_name().is_some_and(|f| f == name)
                && name != "."
                && name != ".."
                && !name.starts_with('.');
            if !plain {
                return Err(problem(format!(
                    "name = '{name}' is not a plain folder name (no '/', not starting with '.')"
                )));
            }
            if let Some(first) = seen.insert(name.to_string(), *line) {
                return Err(problem(format!(
                    "name = '{name}' is listed already on line {first}"
                )));
            }
            let required = |c: &str| place(c).ok_or_else(|| problem(format!("{c} is empty")));
            Ok(ListedPair {
                name: name.to_string(),
                files: super::pair::PairFiles {
                    reference: required("ref")?,
                    science: required("sci")?,
                    reference_variance: place("ref_var"),
                    science_variance: place("sci_var"),
                    reference_mask: place("ref_mask"),
                    science_mask: place("sci_mask"),
                },
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if pairs.is_empty() {
        return Err(InputError::Csv {
            file,
            message: "no pairs listed".into(),
        });
    }
    Ok(pairs)
}

/// The header cards of the four planes `subtract` writes: the science image's WCS, then the fit (direction,
/// kernel sum, background, stamps, χ², condition number, FWHMs, tile, backend, precision). All are known
/// once the difference is, so the planes can be written while detection runs.
pub fn subtraction_cards(sub: &super::subtract::Subtraction, wcs: &[Card]) -> Vec<Card> {
    let diagnostics = sub.diagnostics();
    let mut cards = wcs.to_vec();
    let centre = diagnostics.kernel_sum_grid[12];
    cards.extend([
        Card::text(
            "DIFFDIR",
            match sub.direction {
                super::subtract::Direction::Reference => "ref",
                super::subtract::Direction::Science => "sci",
            },
            "image convolved; D = science - reference",
        ),
        Card::real(
            "KSUM",
            centre,
            "kernel sum (photometric scale) at the centre",
        ),
        Card::real(
            "KSUMMIN",
            diagnostics
                .kernel_sum_grid
                .iter()
                .cloned()
                .fold(f64::INFINITY, f64::min),
            "smallest kernel sum on a 5x5 grid",
        ),
        Card::real(
            "KSUMMAX",
            diagnostics
                .kernel_sum_grid
                .iter()
                .cloned()
                .fold(f64::NEG_INFINITY, f64::max),
            "largest kernel sum on a 5x5 grid",
        ),
        Card::real(
            "BKG0",
            sub.background[0],
            "background b0 + b1 x + b2 y, x and y in [-1, 1]",
        ),
        Card::real("BKG1", sub.background[1], ""),
        Card::real("BKG2", sub.background[2], ""),
        Card::int(
            "NSTAMPS",
            diagnostics.stamps_fitted as i64,
            "sub-stamps fitted",
        ),
        Card::int(
            "NCLIPPED",
            diagnostics.stamps_clipped as i64,
            "sub-stamps clipped",
        ),
        Card::real(
            "KCHI2",
            diagnostics.mean_chi2_per_pixel,
            "mean chi2 per pixel of the fitted stamps",
        ),
        Card::real(
            "KCOND",
            diagnostics.condition_number,
            "condition number of the scaled normal matrix",
        ),
        Card::real(
            "FWHMREF",
            diagnostics.fwhm_reference,
            "reference FWHM, median of the stamp stars [px]",
        ),
        Card::real(
            "FWHMSCI",
            diagnostics.fwhm_science,
            "science FWHM, median of the stamp stars [px]",
        ),
        Card::int(
            "KTILE",
            sub.tile as i64,
            "0: kernel exact per pixel; T: constant on TxT tiles",
        ),
        Card::text("BACKEND", &sub.backend, "where the convolution ran"),
        Card::text("PRECISN", sub.precision.name(), "convolution arithmetic"),
    ]);
    cards
}

/// The files `subtract` writes into `dir`: [`SUBTRACTION_FILES`], then `forced.csv` and `quality.json` when
/// asked for.
pub fn subtraction_files(forced: bool, quality: bool) -> Vec<&'static str> {
    let mut names: Vec<&str> = SUBTRACTION_FILES.to_vec();
    if forced {
        names.push("forced.csv");
    }
    if quality {
        names.push("quality.json");
    }
    names
}

/// The planes a subtraction writes as FITS, handed over before the subtraction holds them: the difference's,
/// and the significance.
#[derive(Clone, Copy)]
pub enum PlaneSet<'a> {
    /// `diff.fits` and `diff.var.fits` in bands of rows (as `SignificanceRows`), and `diff.mask.fits`
    /// from the subtraction's mask, final when they are handed over.
    Difference {
        diff: crate::fits_image::RowBands<'a>,
        variance: crate::fits_image::RowBands<'a>,
    },
    /// `diff.snr.fits` whole (a scored run writes it beside the scores).
    Significance(&'a [f32]),
    /// `diff.snr.fits` in bands of rows, as `subtract_streaming` hands it over before the first is
    /// computed: each call gives the next as soon as it is home (`None` after the last), so that it is
    /// written while the next is computed.
    SignificanceRows(crate::fits_image::RowBands<'a>),
}

/// The FITS planes `subtract` writes: file, extension name, bytes per pixel.
const PLANES: [(&str, &str, usize); 4] = [
    ("diff.fits", "DIFF", 4),
    ("diff.var.fits", "DIFF_VAR", 4),
    ("diff.mask.fits", "DIFF_MASK", 1),
    ("diff.snr.fits", "DIFF_SNR", 4),
];

/// Header records a plane's file is written ahead with (its cards and history take two or three).
const HEADER_BLOCKS_AHEAD: usize = 4;

/// A plane's file in [`PlanesAhead`].
enum Ahead {
    /// Not written yet, and its plane has not come.
    Wanted,
    /// Written ahead, waiting for its plane.
    Ready(WrittenAhead),
    /// Its plane came (and took the file, or was written new: the thread then skips it or drops it).
    Gone,
}

/// What the writer thread and the planes' writes share.
struct AheadState {
    /// Per plane of [`PLANES`].
    slots: [Ahead; 4],
    /// Set when dropped: no more files are begun (an early error waits for one file at most).
    stop: bool,
}

/// The subtraction's FITS planes written ahead as zeros into the staging folder by two threads of low
/// priority while the subtraction runs ([`WrittenAhead`]), one the significance then the variance, the other
/// the difference then the mask: [`write_planes`] then writes over cached pages. On an accelerator the host
/// mostly waits for the device's jobs then. (One thread for all four had the variance's file ready too late
/// once the difference and the filter were pipelined: that plane, written new, ended the subtraction 20-30
/// ms after the others; four threads at once slowed the fit's basis images.) A file not ready when its
/// plane comes is written new; its thread then skips it, or removes it if it was being written. Dropping
/// this joins the threads.
pub struct PlanesAhead {
    state: std::sync::Arc<std::sync::Mutex<AheadState>>,
    /// Joined when dropped.
    _threads: Vec<crate::exec::JoinOnDrop<()>>,
}

impl PlanesAhead {
    fn with(slots: [Ahead; 4]) -> std::sync::Arc<std::sync::Mutex<AheadState>> {
        std::sync::Arc::new(std::sync::Mutex::new(AheadState { slots, stop: false }))
    }

    /// Nothing written ahead.
    pub fn none() -> PlanesAhead {
        PlanesAhead {
            state: Self::with([0, 1, 2, 3].map(|_| Ahead::Gone)),
            _threads: Vec::new(),
        }
    }

    /// Starts writing the planes of an nx × ny subtraction ahead into `dir`. A failure (a full disk) is
    /// left for the plane's own write to report.
    pub fn start(dir: &Path, nx: usize, ny: usize) -> PlanesAhead {
        let state = Self::with([0, 1, 2, 3].map(|_| Ahead::Wanted));
        let write_ahead = |order: [usize; 2]| {
            let (dir, shared) = (dir.to_path_buf(), std::sync::Arc::clone(&state));
            crate::exec::JoinOnDrop::spawn(move || {
                crate::exec::lower_this_threads_priority();
                write_ahead_in_order(&dir, nx, ny, &shared, order)
            })
        };
        let threads = vec![write_ahead([3, 1]), write_ahead([0, 2])];
        PlanesAhead {
            state,
            _threads: threads,
        }
    }

    /// The file written ahead for plane k of [`PLANES`], if it is ready; either way the thread will not
    /// write it now.
    fn take(&self, k: usize) -> Option<WrittenAhead> {
        match std::mem::replace(&mut self.state.lock().unwrap().slots[k], Ahead::Gone) {
            Ahead::Ready(ahead) => Some(ahead),
            _ => None,
        }
    }
}

/// Writes the files of `order`'s planes ahead, one after the other, each unless its plane came first.
fn write_ahead_in_order(
    dir: &Path,
    nx: usize,
    ny: usize,
    shared: &std::sync::Mutex<AheadState>,
    order: [usize; 2],
) {
    let wanted = |s: &AheadState, k: usize| !s.stop && matches!(s.slots[k], Ahead::Wanted);
    for k in order {
        if !wanted(&shared.lock().unwrap(), k) {
            continue;
        }
        let (file, _, bytes) = PLANES[k];
        let path = dir.join(file);
        let len = image_file_len(nx, ny, bytes, HEADER_BLOCKS_AHEAD);
        let Ok(ahead) = WrittenAhead::new(&path, len) else {
            return;
        };
        let mut s = shared.lock().unwrap();
        // A plane that came meanwhile was written new: this file is dropped (removed).
        if matches!(s.slots[k], Ahead::Wanted) {
            s.slots[k] = Ahead::Ready(ahead);
            crate::exec::trace_event(|| format!("write {}: written ahead", path.display()));
        }
    }
}

impl Drop for PlanesAhead {
    fn drop(&mut self) {
        // Before the threads are joined (declared last, so dropped after this).
        self.state.lock().unwrap().stop = true;
    }
}

/// Writes `set` into `dir` as FITS (float32, 8-bit mask) with `cards` and `history`, all at once, each file
/// from a thread of its own (cfitsio is built reentrant; at 10k each plane is 400 MB; `write_image` says why
/// one writer per file), apart from the rayon pool that the work beside them uses; over the files `ahead`
/// has ready.
pub fn write_planes(
    sub: &super::subtract::Subtraction,
    set: PlaneSet<'_>,
    cards: &[Card],
    history: &[String],
    dir: &Path,
    ahead: &PlanesAhead,
) -> Result<(), InputError> {
    let planes = match set {
        PlaneSet::Difference { diff, variance } => vec![
            (0, Pixels::F32Rows(diff)),
            (1, Pixels::F32Rows(variance)),
            (2, Pixels::U8(&sub.mask)),
        ],
        PlaneSet::Significance(snr) => vec![(3, Pixels::F32(snr))],
        PlaneSet::SignificanceRows(bands) => vec![(3, Pixels::F32Rows(bands))],
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = planes
            .into_iter()
            .map(|(k, pixels)| {
                let (file, name, _) = PLANES[k];
                let ahead = ahead.take(k);
                scope.spawn(move || {
                    write_image_over(
                        &dir.join(file),
                        &ImageOut {
                            nx: sub.nx,
                            ny: sub.ny,
                            pixels,
                            name,
                            cards,
                            history,
                        },
                        ahead,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("a writer thread panicked"))
    })
}

/// Writes a subtraction's tables into `dir`: the detections (`catalogue.csv`), the fit's diagnostics
/// (`kernel.json`) and, when given, forced photometry (`forced.csv`) and the scores (`quality.json`).
pub fn write_tables(
    sub: &super::subtract::Subtraction,
    forced: Option<&[ForcedPlace]>,
    quality: Option<&super::score::Quality>,
    staging: &Path,
) -> Result<(), InputError> {
    let diagnostics = sub.diagnostics();
    let path = staging.join("catalogue.csv");
    let mut w = csv_writer();
    let result = (|| {
        w.write_record([
            "id",
            "x",
            "y",
            "snr",
            "flux",
            "flux_err",
            "masked_fraction",
            "near_mask",
            "saturation_halo",
        ])?;
        for d in &sub.detections {
            let (f, e, m) = match d.psf {
                Some(p) => (float(p.flux), float(p.error), float(p.masked_fraction)),
                None => (String::new(), String::new(), String::new()),
            };
            w.write_record([
                d.id.to_string(),
                float(d.x),
                float(d.y),
                float(d.snr),
                f,
                e,
                m,
                u8::from(d.near_mask).to_string(),
                u8::from(d.in_saturation_halo).to_string(),
            ])?;
        }
        Ok(())
    })();
    write_atomic(&path, &finish_csv(w, result, "catalogue.csv")?)?;
    let json = serde_json::to_vec_pretty(&diagnostics).expect("diagnostics serialise");
    write_atomic(&staging.join("kernel.json"), &json)?;
    if let Some(places) = forced {
        let mut w = csv_writer();
        let result = (|| {
            w.write_record(["id", "x", "y", "flux", "flux_err", "snr", "masked_fraction"])?;
            for p in places {
                let f = super::psf::psf_flux(&sub.psf, &sub.planes(), p.x, p.y);
                let (flux, err, snr, m) = match f {
                    Some(f) => (
                        float(f.flux),
                        float(f.error),
                        float(f.flux / f.error),
                        float(f.masked_fraction),
                    ),
                    None => (String::new(), String::new(), String::new(), "1".into()),
                };
                w.write_record([p.id.clone(), float(p.x), float(p.y), flux, err, snr, m])?;
            }
            Ok(())
        })();
        write_atomic(
            &staging.join("forced.csv"),
            &finish_csv(w, result, "forced.csv")?,
        )?;
    }
    if let Some(q) = quality {
        let json = serde_json::to_vec_pretty(q).expect("scores serialise");
        write_atomic(&staging.join("quality.json"), &json)?;
    }
    Ok(())
}
