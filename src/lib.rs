//! astroport: published GPU algorithms from astronomy and numerics on every compute model (Rust/rayon,
//! OpenCL, CUDA, SYCL) from one Rust host, each result verified against a float64 reference, with the
//! cost of portability measured. See README.md and docs/.

pub mod backend;
pub mod bench;
pub mod cli;
pub mod exec;
pub mod figures;
pub mod fits_image;
pub mod inputs;
pub mod limits;
pub mod oracle;
pub mod progress;
pub mod real;
pub mod registry;
pub mod report;
pub mod results;
pub mod workload;
