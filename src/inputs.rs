//! Errors of input and output files, and the atomic writer, shared by every workload's readers and writers.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Writes `bytes` to a new temporary file in the target's directory, syncs it and renames it over
/// the target (atomic on one file system). On any failure the temporary file is removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), InputError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        io_error(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Hidden, unique per process and call, so concurrent writers never share a temporary file.
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_error(path, e)
    })
}
