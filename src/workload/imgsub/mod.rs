//! Image-subtraction photometry (workload 5 of the seeds: GAISP, Yang, Yu et al. 2011; HOTPANTS, Alard &
//! Lupton 1998): the deterministic synthetic field every step is scored on (`field`, written by `io`);
//! the registered pair read and checked (`pair`); the kernel fit (`fit`); the difference and its variance on
//! every backend (`difference`, `astroport run imgsub`); the PSF of the difference and photometry (`psf`);
//! detection (`detect`); the whole subtraction (`subtract`, `astroport subtract`) and its scores against a
//! field's truth (`score`). docs/imgsub.md says what each step does and what it measured.

pub mod args;
pub mod detect;
pub mod difference;
pub mod field;
pub mod fit;
pub mod io;
pub mod pair;
pub mod psf;
pub mod score;
pub mod subtract;

pub use difference::{DifferenceProblem, VaryingKernel};
pub use field::{generate, render, Field, FieldSpec, Image, Kind, Source};
