//! Image-subtraction photometry (workload 5 of the seeds: GAISP, Yang, Yu et al. 2011; HOTPANTS, Alard &
//! Lupton 1998). What exists so far: the deterministic synthetic field that every later step is scored on
//! (`field`: a registered reference and science pair with a truth table) and `astroport field`, which
//! writes it as FITS images and CSV (`io`); and the difference image with its variance under a spatially
//! varying kernel on every backend (`difference`, `astroport run imgsub`). docs/imgsub.md says what the
//! model is and what is next.

pub mod args;
pub mod difference;
pub mod field;
pub mod io;

pub use difference::{DifferenceProblem, VaryingKernel};
pub use field::{generate, render, Field, FieldSpec, Image, Kind, Source};
