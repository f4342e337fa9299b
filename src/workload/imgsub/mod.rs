//! Image-subtraction photometry (workload 5 of the seeds: GAISP, Yang, Yu et al. 2011; HOTPANTS, Alard &
//! Lupton 1998): the deterministic synthetic field every step is scored on (`field`, written by `io`);
//! the registered pair read and checked (`pair`); the kernel fit (`fit`); the difference and its variance on
//! every backend (`difference`, `astroport run imgsub`); the PSF of the difference and photometry (`psf`);
//! detection (`detect`); the whole subtraction (`subtract`, `astroport subtract`) and its scores against a
//! field's truth (`score`). docs/imgsub.md says what each step does and what it measured.

pub mod args;
pub mod convolve;
pub mod detect;
pub mod difference;
pub mod field;
pub mod fit;
pub mod io;
pub mod pair;
pub mod psf;
pub mod score;
pub mod stamp_sums;
pub mod subtract;

pub use difference::{DifferenceProblem, VaryingKernel};

/// The upper median of `v` (its element len/2 in order; NaN when empty), reordering `v`.
pub(crate) fn median<T: Copy + PartialOrd + Into<f64>>(v: &mut [T]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mid = v.len() / 2;
    let by = |a: &T, b: &T| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
    (*v.select_nth_unstable_by(mid, by).1).into()
}

/// FWHM (px) of a profile from the area above half its peak, 2√(A/π): `values` above their background.
pub(crate) fn half_maximum_fwhm(values: &[f64]) -> f64 {
    let peak = values.iter().cloned().fold(f64::MIN, f64::max);
    let area = values.iter().filter(|&&v| v >= 0.5 * peak).count() as f64;
    2.0 * (area / std::f64::consts::PI).sqrt()
}
pub use field::{generate, render, Field, FieldSpec, Image, Kind, Source};
