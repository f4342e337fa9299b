//! Spherical harmonic transforms (seed 002: S2HAT and its GPU port; research/sht.md; docs/sht.md):
//! `alm2map` (synthesis) and `map2alm` (analysis, with healpy's Jacobi iterations) on iso-latitude ring
//! grids, in healpy and ducc0's conventions (orthonormal Y_lm with the Condon-Shortley phase, m-major a_lm,
//! HEALPix RING order; tests/data/sht/CONVENTIONS.md).
//!
//! The library: [`RingGrid`] (HEALPix, Gauss-Legendre, any ring list), [`Alm`], and [`alm2map`] /
//! [`map2alm`] on the `cpu` model. The workload: [`ShtProblem`], one transform of a preset, run and checked
//! by the driver like every other.

pub mod alm;
pub mod args;
pub mod cpu;
pub mod device;
pub mod distributed;
pub mod grid;
pub mod io;
pub mod legendre;
pub mod spin;

pub use alm::Alm;
pub use cpu::{adjoint, alm2map, map2alm};
pub use grid::{Ring, RingGrid};
pub use spin::{adjoint_spin2, alm2map_spin2, map2alm_spin2};

use crate::backend::{Precision, Target};
use crate::exec::{time_host, Measured, RunError, RunOptions};
use crate::workload::{Accuracy, Verdict, Work, Workload};
use serde::Serialize;

/// Which transform a problem times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Alm2Map,
    /// Analysis with `iter` Jacobi refinements (0: the adjoint alone, one transform).
    Map2Alm {
        iter: usize,
    },
}

impl Transform {
    pub fn name(self) -> String {
        match self {
            Transform::Alm2Map => "alm2map".into(),
            Transform::Map2Alm { iter: 0 } => "map2alm".into(),
            Transform::Map2Alm { iter } => format!("map2alm iter {iter}"),
        }
    }
}

/// The presets: (name, grid, lmax). `tiny` is the oracle's size; `planck` the seed's; `highl` the stability
/// case (Gauss-Legendre to l = 8192).
pub const PRESETS: [&str; 4] = ["tiny", "ci", "planck", "highl"];

/// One transform of one preset's input, with the input prepared (the map of map2alm is the preset's
/// coefficients synthesised on the `cpu` model).
pub struct ShtProblem {
    pub preset: String,
    pub grid: RingGrid,
    pub lmax: usize,
    pub mmax: usize,
    pub transform: Transform,
    /// The coefficients synthesised (alm2map's input; the map2alm input's origin).
    pub alm_in: Alm,
    /// map2alm's input.
    pub map_in: Vec<f64>,
    /// Device memory to use at most, bytes, below what the device reports (`--device-mem-mib`: forces the
    /// tiling into bands of m).
    pub device_mem_cap: Option<u64>,
    /// A spin-2 problem's inputs (`--spin 2`); the scalar inputs above are then not used.
    pub pol_in: Option<PolInput>,
}

/// A spin-2 problem's inputs: E and B (seeds 2 and 3, nothing below l = 2), and for analysis their Q and U.
pub struct PolInput {
    pub e: Alm,
    pub b: Alm,
    pub q: Vec<f64>,
    pub u: Vec<f64>,
}

impl ShtProblem {
    pub fn preset(name: &str, transform: Transform) -> Result<ShtProblem, String> {
        let (grid, lmax) = match name {
            "tiny" => (RingGrid::healpix(32)?, 64),
            "ci" => (RingGrid::healpix(256)?, 512),
            "planck" => (RingGrid::healpix(2048)?, 4096),
            "highl" => (RingGrid::gauss_legendre(8193, 16386)?, 8192),
            other => {
                return Err(format!(
                    "unknown sht preset '{other}' (expected one of {})",
                    PRESETS.join(", ")
                ))
            }
        };
        ShtProblem::new(name, grid, lmax, transform)
    }

    pub fn new(
        preset: &str,
        grid: RingGrid,
        lmax: usize,
        transform: Transform,
    ) -> Result<ShtProblem, String> {
        let alm_in = Alm::random(lmax, lmax, 1);
        let map_in = match transform {
            Transform::Alm2Map => Vec::new(),
            Transform::Map2Alm { .. } => alm2map(&grid, &alm_in)?,
        };
        Ok(ShtProblem {
            preset: preset.into(),
            grid,
            lmax,
            mmax: lmax,
            transform,
            alm_in,
            map_in,
            device_mem_cap: None,
            pol_in: None,
        })
    }

    /// The same preset as a spin-2 transform (E, B <-> Q, U).
    pub fn spin2(mut self) -> Result<ShtProblem, String> {
        let polar = |seed| {
            let mut a = Alm::random(self.lmax, self.mmax, seed);
            for (l, m) in [(0, 0), (1, 0), (1, 1)] {
                if l <= self.lmax && m <= self.mmax {
                    let i = a.index(l, m);
                    a.coeffs[i] = realfft::num_complex::Complex64::new(0.0, 0.0);
                }
            }
            a
        };
        let (e, b) = (polar(2), polar(3));
        let (q, u) = match self.transform {
            Transform::Alm2Map => (Vec::new(), Vec::new()),
            Transform::Map2Alm { .. } => alm2map_spin2(&self.grid, &e, &b)?,
        };
        self.alm_in = Alm::zeros(0, 0);
        self.map_in = Vec::new();
        self.pol_in = Some(PolInput { e, b, q, u });
        Ok(self)
    }

    /// (ring pair, l, m) triples of one Legendre stage: its work.
    pub fn triples(&self) -> f64 {
        let lm = (self.mmax + 1) * (2 * self.lmax + 2 - self.mmax) / 2;
        lm as f64 * self.grid.pairs.len() as f64
    }

    /// The transform on the `cpu` model, flattened: the map, or the coefficients as (re, im); spin 2 gives
    /// Q then U, or E then B.
    fn cpu_output(&self) -> Result<Vec<f64>, String> {
        if let Some(p) = &self.pol_in {
            return Ok(match self.transform {
                Transform::Alm2Map => {
                    let (q, u) = alm2map_spin2(&self.grid, &p.e, &p.b)?;
                    [q, u].concat()
                }
                Transform::Map2Alm { iter } => {
                    let (e, b) = map2alm_spin2(&self.grid, &p.q, &p.u, self.lmax, self.mmax, iter)?;
                    [e.to_flat(), b.to_flat()].concat()
                }
            });
        }
        match self.transform {
            Transform::Alm2Map => alm2map(&self.grid, &self.alm_in),
            Transform::Map2Alm { iter } => {
                Ok(map2alm(&self.grid, &self.map_in, self.lmax, self.mmax, iter)?.to_flat())
            }
        }
    }
}

/// A row's own figures.
#[derive(Debug, Clone, Serialize)]
pub struct ShtDetails {
    pub transform: String,
    pub lmax: usize,
    pub grid: String,
    /// map2alm only: relative L2 distance of the result from the coefficients the input map was made from
    /// (the quadrature's own error: exact on Gauss-Legendre, about 1e-3 at iter 0 on HEALPix).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_recovery_rel_l2: Option<f64>,
}

/// Relative tolerance against the float64 reference (maximum error over the largest reference value).
pub const TOL_F64_REL: f64 = 1e-12;

impl Workload for ShtProblem {
    type Mode = Precision;
    type Output = Vec<f64>;
    type Reference = Vec<f64>;
    type Details = ShtDetails;

    fn name(&self) -> &'static str {
        "sht"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        format!(
            "{}, lmax {}, {}{}",
            self.grid.describe(),
            self.lmax,
            self.transform.name(),
            if self.pol_in.is_some() {
                ", spin 2"
            } else {
                ""
            }
        )
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F64]
    }
    fn work(&self, _output: &Vec<f64>) -> Option<Work> {
        let passes = match self.transform {
            Transform::Alm2Map => 1.0,
            Transform::Map2Alm { iter } => 1.0 + 2.0 * iter as f64,
        };
        Some(Work {
            units: passes * self.triples(),
            unit_name: "(ring pair, l, m) terms",
        })
    }
    fn pipe_instructions(&self, _mode: Precision) -> Option<f64> {
        // Scalar: 3 FMA per term, one for the recurrence and two for the complex accumulation (research/sht.md
        // §4). Spin 2: about 20, counted from the kernel's source (W and X, then 8 accumulations), not measured.
        Some(if self.pol_in.is_some() { 20.0 } else { 3.0 })
    }
    fn reference(&self) -> Vec<f64> {
        // The presets' inputs are checked when the problem is built; an error here is a bug. An empty
        // reference fails every row's comparison rather than passing it.
        self.cpu_output().unwrap_or_default()
    }
    fn execute(
        &self,
        target: &Target,
        mode: Precision,
        opts: &RunOptions,
    ) -> Result<Measured<Vec<f64>>, RunError> {
        if mode != Precision::F64 {
            return Err(RunError::NotBuilt("sht runs in float64 only so far".into()));
        }
        if let Some(p) = &self.pol_in {
            let cap = self.device_mem_cap;
            return match self.transform {
                Transform::Alm2Map => {
                    Ok(
                        alm2map_spin2_on(target, &self.grid, (&p.e, &p.b), opts, cap)?
                            .map(|(q, u)| [q, u].concat()),
                    )
                }
                Transform::Map2Alm { iter } => Ok(map2alm_spin2_on(
                    target,
                    &self.grid,
                    (&p.q, &p.u),
                    (self.lmax, self.mmax, iter),
                    opts,
                    cap,
                )?
                .map(|(e, b)| [e.to_flat(), b.to_flat()].concat())),
            };
        }
        match self.transform {
            Transform::Alm2Map => {
                alm2map_on(target, &self.grid, &self.alm_in, opts, self.device_mem_cap)
            }
            Transform::Map2Alm { iter } => {
                let m = map2alm_on(
                    target,
                    &self.grid,
                    &self.map_in,
                    (self.lmax, self.mmax, iter),
                    opts,
                    self.device_mem_cap,
                )?;
                Ok(m.map(|alm| alm.to_flat()))
            }
        }
    }
    fn verify(
        &self,
        output: &Vec<f64>,
        reference: &Vec<f64>,
        _mode: Precision,
    ) -> Verdict<ShtDetails> {
        let accuracy = relative_errors(output, reference, TOL_F64_REL);
        let input_recovery_rel_l2 = match (self.transform, &self.pol_in) {
            (Transform::Alm2Map, _) => None,
            (Transform::Map2Alm { .. }, None) => Some(rel_l2(output, &self.alm_in.to_flat())),
            (Transform::Map2Alm { .. }, Some(p)) => {
                Some(rel_l2(output, &[p.e.to_flat(), p.b.to_flat()].concat()))
            }
        };
        Verdict {
            accuracy,
            unconverged: None,
            failure: None,
            details: ShtDetails {
                transform: self.transform.name(),
                lmax: self.lmax,
                grid: self.grid.describe(),
                input_recovery_rel_l2,
            },
        }
    }
}

/// Runs one transform on any target: on `cpu`, `on_cpu` timed with the host clock; on a device, `on_device`
/// through a [`device::DeviceSht`] (the Legendre stage by device events, the ring FFTs by the host clock).
/// `memory_cap` limits the device memory used.
fn on_target<T>(
    target: &Target,
    grid: &RingGrid,
    opts: &RunOptions,
    memory_cap: Option<u64>,
    on_cpu: impl FnMut() -> Result<T, String>,
    on_device: impl FnOnce(&mut device::DeviceSht) -> Result<T, RunError>,
) -> Result<Measured<T>, RunError> {
    match target {
        Target::Cpu(_) => {
            let (out, times) = time_host(opts, "host clock", on_cpu)?;
            Ok(Measured::host(out, times))
        }
        Target::Device(d) => {
            let mut sht =
                device::DeviceSht::new(d.as_ref(), grid, opts)?.with_memory_cap(memory_cap);
            let out = on_device(&mut sht)?;
            Ok(sht.measured(out))
        }
    }
}

/// Synthesis on any target (see [`on_target`]).
pub fn alm2map_on(
    target: &Target,
    grid: &RingGrid,
    alm: &Alm,
    opts: &RunOptions,
    memory_cap: Option<u64>,
) -> Result<Measured<Vec<f64>>, RunError> {
    on_target(
        target,
        grid,
        opts,
        memory_cap,
        || alm2map(grid, alm),
        |sht| sht.alm2map(alm),
    )
}

/// Analysis with `iter` Jacobi refinements on any target; `(lmax, mmax, iter)`.
pub fn map2alm_on(
    target: &Target,
    grid: &RingGrid,
    map: &[f64],
    (lmax, mmax, iter): (usize, usize, usize),
    opts: &RunOptions,
    memory_cap: Option<u64>,
) -> Result<Measured<Alm>, RunError> {
    on_target(
        target,
        grid,
        opts,
        memory_cap,
        || map2alm(grid, map, lmax, mmax, iter),
        |sht| sht.map2alm(map, lmax, mmax, iter),
    )
}

/// The Q and U maps of a spin-2 synthesis.
pub type QuMaps = (Vec<f64>, Vec<f64>);

/// Spin-2 synthesis on any target: (Q, U) of (E, B).
pub fn alm2map_spin2_on(
    target: &Target,
    grid: &RingGrid,
    (e, b): (&Alm, &Alm),
    opts: &RunOptions,
    memory_cap: Option<u64>,
) -> Result<Measured<QuMaps>, RunError> {
    on_target(
        target,
        grid,
        opts,
        memory_cap,
        || alm2map_spin2(grid, e, b),
        |sht| sht.alm2map_spin2(e, b),
    )
}

/// Spin-2 analysis on any target: (E, B) of (Q, U); `(lmax, mmax, iter)`.
pub fn map2alm_spin2_on(
    target: &Target,
    grid: &RingGrid,
    (q, u): (&[f64], &[f64]),
    (lmax, mmax, iter): (usize, usize, usize),
    opts: &RunOptions,
    memory_cap: Option<u64>,
) -> Result<Measured<(Alm, Alm)>, RunError> {
    on_target(
        target,
        grid,
        opts,
        memory_cap,
        || map2alm_spin2(grid, q, u, lmax, mmax, iter),
        |sht| sht.map2alm_spin2(q, u, lmax, mmax, iter),
    )
}

/// Errors of a flattened output against its reference, relative to the reference's largest magnitude.
pub fn relative_errors(output: &[f64], reference: &[f64], tol_rel: f64) -> Accuracy {
    let scale = reference
        .iter()
        .fold(0.0f64, |a, v| a.max(v.abs()))
        .max(1e-300);
    let (mut max_abs, mut sum2, mut non_finite) = (0.0f64, 0.0f64, 0u64);
    for (i, r) in reference.iter().enumerate() {
        let v = output.get(i).copied().unwrap_or(f64::NAN);
        if !v.is_finite() {
            non_finite += 1;
            continue;
        }
        max_abs = max_abs.max((v - r).abs());
        sum2 += (v - r) * (v - r);
    }
    let max_rel = max_abs / scale;
    Accuracy {
        max_abs,
        max_rel,
        rms_abs: (sum2 / reference.len().max(1) as f64).sqrt(),
        non_finite,
        tolerance_abs: f64::INFINITY,
        tolerance_rel: tol_rel,
        unit: "relative to max |reference|".into(),
        pass: non_finite == 0 && output.len() == reference.len() && max_rel <= tol_rel,
    }
}

/// ‖a − b‖₂ / ‖b‖₂.
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-300)).sqrt()
}
