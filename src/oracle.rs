//! The independent float64 oracles in `../shared/vectors/` (mpmath, astropy, healpy/ducc0), read by the tests
//! that check each reference. `ASTROPORT_SHARED` overrides where `shared/` is.

use std::path::PathBuf;

/// The `shared/` folder beside the repository, or `$ASTROPORT_SHARED`.
pub fn shared_dir() -> PathBuf {
    std::env::var("ASTROPORT_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// The JSON oracle at `vectors/<relative>`. Panics, naming the file, when it is missing or malformed: a test
/// that needs an oracle must not pass without it.
pub fn vectors(relative: &str) -> serde_json::Value {
    let path = shared_dir().join("vectors").join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "oracle file {} is required for this test: {e}",
            path.display()
        )
    });
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("oracle file {} is not JSON: {e}", path.display()))
}
