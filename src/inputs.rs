//! What every workload's readers and writers share: the error type, the atomic writer, the CSV writer and
//! float format, and cfitsio's in-memory files (FITS goes through memory so cfitsio's file-name syntax never
//! meets a real path, and std does the atomic write).

use std::ffi::{c_int, c_void, CStr};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Everything that can go wrong reading or writing a workload's input and output files. Every variant names
/// the file; row-level variants name the 1-based line, the column and the value as written.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The CSV layer itself failed (e.g. an unterminated quote).
    #[error("{file}: {message}")]
    Csv { file: String, message: String },
    /// A problem with a whole line: the header, or a row's field count.
    #[error("{file} line {line}: {problem}")]
    Line {
        file: String,
        line: u64,
        problem: String,
    },
    #[error("{file}: missing required column '{column}'")]
    MissingColumn { file: String, column: String },
    /// A field that must hold a value is empty, or its column is absent.
    #[error("{file} line {line}, column '{column}': {problem}")]
    Missing {
        file: String,
        line: u64,
        column: String,
        problem: String,
    },
    /// A field's value is unparsable or out of range; `value` is the text as written in the file.
    #[error("{file} line {line}, column '{column}': value {value} {problem}")]
    Value {
        file: String,
        line: u64,
        column: String,
        value: String,
        problem: String,
    },
    /// A problem with the file as a whole (no rows, a system with one image).
    #[error("{file}: {problem}")]
    Content { file: String, problem: String },
    /// A record handed to a writer breaks a rule the reader enforces; nothing was written.
    #[error("{file}: {record}, field '{column}': value {value} {problem}")]
    Record {
        file: String,
        record: String,
        column: String,
        value: String,
        problem: String,
    },
    /// A map that cannot be written, or a FITS file that cannot be read back.
    #[error("{file}: {problem}")]
    Map { file: String, problem: String },
    #[error("{file}: FITS: {message}")]
    Fits { file: String, message: String },
}

/// The `Io` variant for `path`.
pub fn io_error(path: &Path, source: std::io::Error) -> InputError {
    InputError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `bytes` to a new temporary file in the target's directory, syncs it, renames it over the target
/// (atomic on one file system) and syncs the directory, so a reader sees the old file or the whole new one,
/// never a part. The temporary name is unique per process and call: concurrent writers of the same target
/// never share one (the last rename wins). On any failure the temporary file is removed. The one atomic
/// writer of the project: every output file goes through it or through [`append_lines`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), InputError> {
    write_atomic_over(path, None, |f| {
        let mut f = f;
        f.write_all(bytes)
    })
}

/// Time the atomic writer has spent waiting for the disk (fsync), summed over the process.
static SYNC_NANOS: AtomicU64 = AtomicU64::new(0);

/// Seconds [`write_atomic`] and [`write_atomic_over`] have waited for files to reach the disk so far.
pub fn seconds_syncing() -> f64 {
    SYNC_NANOS.load(Ordering::Relaxed) as f64 * 1e-9
}

/// Whether the atomic writer forces each file to the disk (fsync) before renaming it into place: on unless
/// a command's `--no-fsync` turned it off for the process.
static DURABLE: AtomicBool = AtomicBool::new(true);

/// Turns the atomic writer's fsync on or off for the rest of the process. Off, a file still appears whole
/// or not at all to other processes (written under a temporary name, then renamed), but a crash of the
/// machine before the kernel writes it back may leave it short.
pub fn set_durable(durable: bool) {
    DURABLE.store(durable, Ordering::Relaxed);
}

/// [`write_atomic`] for a writer that fills the file itself (a large image writes its parts from several
/// threads at their offsets), into a file written ahead for `path` ([`WrittenAhead`]: `write` gets it with
/// the zeros still in it and sets its length itself) or, with `None`, a new empty one.
pub fn write_atomic_over(
    path: &Path,
    ahead: Option<WrittenAhead>,
    write: impl FnOnce(&fs::File) -> std::io::Result<()>,
) -> Result<(), InputError> {
    // A file written ahead for another path is not used (dropped, it is removed).
    let ahead = ahead.filter(|a| a.path == path);
    let (tmp, f) = match ahead.and_then(|mut a| Some((a.tmp.clone(), a.file.take()?))) {
        Some(made) => made,
        None => create_temporary(path)?,
    };
    let dir = folder_of(path);
    let result = (|| {
        write(&f)?;
        crate::exec::trace_event(|| format!("write {}: data written", path.display()));
        let durable = DURABLE.load(Ordering::Relaxed);
        if durable {
            let sync = std::time::Instant::now();
            f.sync_all()?;
            SYNC_NANOS.fetch_add(sync.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        drop(f);
        fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is synced (best effort: not every file system
        // lets a directory be opened for this).
        if durable {
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_error(path, e)
    })
}

/// The folder `path` is in ("." for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A hidden temporary name beside `path`, unique per process and call, so concurrent writers never share
/// a temporary file.
fn temporary_for(path: &Path) -> Result<std::path::PathBuf, InputError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        io_error(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        )
    })?;
    Ok(folder_of(path).join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )))
}

/// A new hidden temporary file beside `path` ([`temporary_for`]), open for writing.
fn create_temporary(path: &Path) -> Result<(std::path::PathBuf, fs::File), InputError> {
    let tmp = temporary_for(path)?;
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_error(path, e))?;
    Ok((tmp, file))
}

/// The temporary file of a later [`write_atomic_over`] to `path`, made now with `len` zero bytes, so that
/// the real write copies into pages the page cache already holds instead of making new ones. On ext4 a
/// buffered 400 MB write into a new file took 95 ms, over its cached pages 52 ms (2-core VM,
/// docs/perf-notes.md): a caller that knows a large file's size long before its data (`subtract`, whose
/// planes come at its end) pays the first half while it waits for other work. Dropped unused, the
/// temporary file is removed.
pub struct WrittenAhead {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<fs::File>,
}

impl WrittenAhead {
    pub fn new(path: &Path, len: u64) -> Result<WrittenAhead, InputError> {
        let (tmp, file) = create_temporary(path)?;
        // Made first, so that a failure below removes the temporary file (Drop).
        let ahead = WrittenAhead {
            path: path.to_path_buf(),
            tmp,
            file: Some(file),
        };
        let file = ahead.file.as_ref().expect("just made");
        // Zeros from a zeroed allocation: the buffer's own pages are the kernel's shared zero page.
        let zeros = vec![0u8; 4 << 20];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(zeros.len() as u64) as usize;
            std::os::unix::fs::FileExt::write_all_at(file, &zeros[..n], at)
                .map_err(|e| io_error(path, e))?;
            at += n as u64;
        }
        Ok(ahead)
    }
}

impl Drop for WrittenAhead {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Appends `text` (whole lines) to `path`, creating it, under an exclusive lock on the file, in one write,
/// then syncs it: lines of concurrent writers never interleave, and a crash leaves whole lines only.
pub fn append_lines(path: &Path, text: &str) -> Result<(), InputError> {
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.lock()?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        f.unlock()
    })();
    result.map_err(|e| io_error(path, e))
}

/// A CSV writer into memory. It quotes any field holding '#', so a name cannot turn its row into a comment.
pub fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new()
        .comment(Some(b'#'))
        .from_writer(Vec::new())
}

/// The bytes of a CSV writer after its rows were written with `result`, or the CSV error naming `file`.
pub fn finish_csv(
    w: csv::Writer<Vec<u8>>,
    result: Result<(), csv::Error>,
    file: &str,
) -> Result<Vec<u8>, InputError> {
    let csv_error = |message: String| InputError::Csv {
        file: file.to_string(),
        message,
    };
    result.map_err(|e| csv_error(e.to_string()))?;
    w.into_inner().map_err(|e| csv_error(e.to_string()))
}

/// Shortest text that reads back as the same f64; `{:?}` rather than `{}` so that tiny values such as a
/// FAP of 1e-300 keep an exponent instead of 300 zeros.
pub fn float(v: f64) -> String {
    format!("{v:?}")
}

/// C `realloc`, the growth function cfitsio's memory files and decompressor call.
pub use libc::realloc;

/// Memory that cfitsio grows with C `realloc`, so it is released with C `free`.
pub struct CBuffer {
    pub ptr: *mut c_void,
    pub len: usize,
}

impl Drop for CBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: ptr came from C realloc (directly or via cfitsio) and is freed once, here.
            unsafe { libc::free(self.ptr) };
        }
    }
}

/// Where cfitsio reads a memory file's address and size from while the file is open.
pub type MemorySlot = Box<(*mut c_void, usize)>;

/// Opens `bytes` as a read-only cfitsio memory file named `name`. Returns the file pointer (the caller
/// closes it) and the slot cfitsio keeps pointers into: hold the slot, and `bytes`, until the file is closed.
pub fn open_fits_in_memory(
    bytes: &mut [u8],
    name: &CStr,
) -> Result<(*mut fitsio::sys::fitsfile, MemorySlot), fitsio::errors::Error> {
    // Boxed for a stable address: cfitsio keeps the addresses of the buffer pointer and size; it only reads
    // (read-only mode, no realloc function).
    let mut slot: MemorySlot = Box::new((bytes.as_mut_ptr().cast(), bytes.len()));
    let mut fptr = std::ptr::null_mut();
    let mut status: c_int = 0;
    // SAFETY: slot and bytes outlive the memory file (the caller's obligation above).
    unsafe {
        fitsio::sys::ffomem(
            &mut fptr,
            name.as_ptr(),
            0,
            &mut slot.0,
            &mut slot.1,
            0,
            None,
            &mut status,
        );
    }
    fitsio::errors::check_status(status)?;
    Ok((fptr, slot))
}

/// Bytes of one FITS record.
pub const FITS_BLOCK: usize = 2880;

/// A FITS file built in memory by `write` and returned as bytes. Going through memory keeps cfitsio's
/// file-name syntax (brackets, '!', '-', URLs) away from real paths and lets std do the atomic write.
/// `size_hint` is about the file's size: the buffer grows in steps of it.
pub fn encode_fits_in_memory(
    size_hint: usize,
    write: impl FnOnce(&mut fitsio::FitsFile) -> Result<(), fitsio::errors::Error>,
) -> Result<Vec<u8>, fitsio::errors::Error> {
    // Boxed: cfitsio keeps the addresses of ptr and len until the file is closed.
    let mut buffer = Box::new(CBuffer {
        ptr: std::ptr::null_mut(),
        len: 0,
    });
    let step = size_hint.div_ceil(FITS_BLOCK).max(1) * FITS_BLOCK;
    let mut fptr = std::ptr::null_mut();
    let mut status: c_int = 0;
    // SAFETY: buffer outlives the memory file, which `f` (declared after it, so dropped first) closes.
    unsafe {
        fitsio::sys::ffimem(
            &mut fptr,
            &mut buffer.ptr,
            &mut buffer.len,
            step,
            Some(realloc),
            &mut status,
        );
    }
    fitsio::errors::check_status(status)?;
    // SAFETY: fptr was just opened without error and is owned here.
    let mut f = unsafe { wrap_raw_fits(fptr, fitsio::FileOpenMode::READWRITE) }?;
    write(&mut f)?;
    // Flush explicitly: closing (in Drop) discards its status, and the padding and END card are only final
    // once the HDU is flushed.
    let (mut head, mut data_start, mut data_end) = (0, 0, 0);
    // SAFETY: f is open.
    unsafe {
        fitsio::sys::ffflus(f.as_raw(), &mut status);
        fitsio::sys::ffghadll(
            f.as_raw(),
            &mut head,
            &mut data_start,
            &mut data_end,
            &mut status,
        );
    }
    fitsio::errors::check_status(status)?;
    drop(f);
    let size = usize::try_from(data_end).unwrap_or(usize::MAX);
    if buffer.ptr.is_null() || size > buffer.len || size % FITS_BLOCK != 0 {
        return Err(fitsio::errors::Error::Message(format!(
            "cfitsio left {} bytes for a file of {data_end} bytes",
            buffer.len
        )));
    }
    // SAFETY: the buffer holds at least `size` initialised bytes written by cfitsio.
    Ok(unsafe { std::slice::from_raw_parts(buffer.ptr as *const u8, size) }.to_vec())
}

/// Hands a freshly opened cfitsio file to fitsio, closing it if that fails.
///
/// # Safety
/// `fptr` must be a file cfitsio just opened without error, owned by nobody else: it is closed once, by the
/// returned `FitsFile` or here.
pub unsafe fn wrap_raw_fits(
    fptr: *mut fitsio::sys::fitsfile,
    mode: fitsio::FileOpenMode,
) -> Result<fitsio::FitsFile, fitsio::errors::Error> {
    // SAFETY: the caller's obligation above.
    unsafe {
        fitsio::FitsFile::from_raw(fptr, mode).inspect_err(|_| {
            let mut status = 0;
            fitsio::sys::ffclos(fptr, &mut status);
        })
    }
}

/// cfitsio's type code (after scaling), repeat count and width of a 0-based column of the current HDU.
///
/// # Safety
/// `fptr` must be an open cfitsio file positioned at a table HDU.
pub unsafe fn fits_column_type(
    fptr: *mut fitsio::sys::fitsfile,
    index: usize,
) -> Result<(c_int, i64, i64), fitsio::errors::Error> {
    let (mut code, mut repeat, mut width, mut status) = (0, 0, 0, 0);
    // SAFETY: the caller's obligation above.
    unsafe {
        fitsio::sys::ffeqtyll(
            fptr,
            index as c_int + 1,
            &mut code,
            &mut repeat,
            &mut width,
            &mut status,
        )
    };
    fitsio::errors::check_status(status)?;
    Ok((code, repeat, width))
}

/// The first `n` values of a 0-based numeric column of the current HDU as f64, row after row (a vector column
/// gives all of a row's values before the next row's). Null cells (NaN floats, TNULL integers) become NaN.
///
/// # Safety
/// `fptr` must be an open cfitsio file positioned at a table HDU holding at least `n` values in the column.
pub unsafe fn fits_column_f64(
    fptr: *mut fitsio::sys::fitsfile,
    index: usize,
    n: usize,
) -> Result<Vec<f64>, fitsio::errors::Error> {
    let mut out = vec![0.0; n];
    let (mut any_null, mut status) = (0, 0);
    // SAFETY: out holds n values; the rest is the caller's obligation. A NaN null value makes cfitsio check
    // for null cells and write NaN for them.
    unsafe {
        fitsio::sys::ffgcvd(
            fptr,
            index as c_int + 1,
            1,
            1,
            n as i64,
            f64::NAN,
            out.as_mut_ptr(),
            &mut any_null,
            &mut status,
        )
    };
    fitsio::errors::check_status(status)?;
    Ok(out)
}

/// FITS files are whole 2880-byte records, and cfitsio reads whole records: a file cut short inside one
/// would be read past the end of its buffer. `None` when the length is whole.
pub fn fits_length_problem(len: usize) -> Option<String> {
    (len == 0 || !len.is_multiple_of(2880)).then(|| {
        format!(
            "{len} bytes is not a whole number of 2880-byte FITS records: the file is truncated or not FITS"
        )
    })
}

/// Whether the current HDU's data lie inside a memory file of `len` bytes (a header may promise more
/// rows than the file holds). `None` when they do.
///
/// # Safety
/// `fptr` must be an open cfitsio file positioned at an HDU.
pub unsafe fn fits_hdu_problem(fptr: *mut fitsio::sys::fitsfile, len: usize) -> Option<String> {
    let (mut head, mut data, mut end) = (0i64, 0i64, 0i64);
    let mut status: c_int = 0;
    // SAFETY: the caller's obligation above.
    unsafe { fitsio::sys::ffghadll(fptr, &mut head, &mut data, &mut end, &mut status) };
    if status != 0 {
        return Some(format!(
            "cannot locate the HDU's data (cfitsio status {status})"
        ));
    }
    let records_end = (end as u64).div_ceil(2880) * 2880;
    (records_end > len as u64).then(|| {
        format!("truncated: the header promises data up to byte {end}, the file has {len} bytes")
    })
}

/// Data rows of a CSV table, each with its 1-based line.
pub type CsvRows = Vec<(u64, csv::StringRecord)>;

/// The columns of a CSV header row (on `line` of `file`) by name: each of `known` at most once, nothing
/// else, and every one of `required`; an error names the line and the column.
pub fn header_columns(
    file: &str,
    line: u64,
    record: &csv::StringRecord,
    known: &[&'static str],
    required: &[&'static str],
) -> Result<std::collections::HashMap<&'static str, usize>, InputError> {
    let line_error = |problem: String| InputError::Line {
        file: file.to_string(),
        line,
        problem,
    };
    let mut columns = std::collections::HashMap::new();
    let mut unknown = Vec::new();
    for (index, name) in record.iter().enumerate() {
        match known.iter().find(|k| **k == name) {
            Some(k) => {
                if columns.insert(*k, index).is_some() {
                    return Err(line_error(format!("duplicate column '{name}'")));
                }
            }
            None => unknown.push(format!("'{name}'")),
        }
    }
    if !unknown.is_empty() {
        return Err(line_error(format!(
            "unknown column{} {} (known columns: {})",
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join(", "),
            known.join(", ")
        )));
    }
    for r in required {
        if !columns.contains_key(r) {
            return Err(InputError::MissingColumn {
                file: file.to_string(),
                column: r.to_string(),
            });
        }
    }
    Ok(columns)
}

/// Blank lines and lines starting with '#' are skipped; fields are trimmed; a bad row names its line.
/// `header` checks the header row (given its line) as soon as it is read, so a bad header is reported before
/// any row; its result comes back with the rows, every one as wide as the header.
pub fn csv_rows<H>(
    text: &str,
    file: &str,
    header: impl FnOnce(u64, &csv::StringRecord) -> Result<H, InputError>,
) -> Result<(H, CsvRows), InputError> {
    let mut check_header = Some(header);
    let mut reader = csv::ReaderBuilder::new()
        // The header is read as a record so that its line is known.
        .has_headers(false)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        // Widths are checked below, with a message naming the line.
        .flexible(true)
        .from_reader(text.as_bytes());
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut header: Option<(u64, usize, H)> = None;
    let mut rows = Vec::new();
    for result in reader.records() {
        let record = result.map_err(|e| InputError::Csv {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let start = record.position().map_or(0, |p| p.byte() as usize);
        let line = line_of_record(text.as_bytes(), &line_starts, start);
        // A line of blanks trims to one empty field (csv skips truly empty lines itself).
        if record.len() == 1 && record[0].is_empty() {
            continue;
        }
        match &header {
            None => {
                let check = check_header.take().expect("the header is read once");
                header = Some((line, record.len(), check(line, &record)?));
            }
            Some((header_line, width, _)) => {
                if record.len() != *width {
                    return Err(InputError::Line {
                        file: file.to_string(),
                        line,
                        problem: format!(
                            "{} field{}, but the header (line {header_line}) has {}",
                            record.len(),
                            if record.len() == 1 { "" } else { "s" },
                            width
                        ),
                    });
                }
                rows.push((line, record));
            }
        }
    }
    let (_, _, checked) = header.ok_or_else(|| InputError::Content {
        file: file.to_string(),
        problem: "no header row (the file is empty or only comments)".to_string(),
    })?;
    Ok((checked, rows))
}

/// The 1-based line where a record starts. csv reports the byte where the previous record ended, so
/// the comment and empty lines it skipped after that are stepped over here.
fn line_of_record(text: &[u8], line_starts: &[usize], mut pos: usize) -> u64 {
    while pos < text.len() {
        let end = text[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |i| pos + i + 1);
        let first = text[pos..end].iter().find(|&&b| b != b'\r' && b != b'\n');
        if matches!(first, None | Some(b'#')) && end < text.len() {
            pos = end;
        } else {
            break;
        }
    }
    line_starts.partition_point(|&s| s <= pos) as u64
}

/// Commands report errors as text (exit 2 with the message).
impl From<InputError> for String {
    fn from(e: InputError) -> String {
        e.to_string()
    }
}
