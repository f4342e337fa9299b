//! The independent float64 oracles the tests check each reference against (mpmath, astropy), kept in the
//! repository under `tests/data/` with a note on which library and version produced each file
//! (`tests/data/README.md`).

use std::path::PathBuf;

/// The folder of the oracle files: `tests/data/` of this repository.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The JSON oracle at `tests/data/<relative>`. Panics, naming the file, when it is missing or malformed: a
/// test that needs an oracle must not pass without it.
pub fn vectors(relative: &str) -> serde_json::Value {
    let path = data_dir().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "oracle file {} is required for this test: {e}",
            path.display()
        )
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("oracle file {} is not JSON: {e}", path.display()))
}
