//! Gravitational-lens deflection gradient (seed 000, Rexroth et al. 2020; research/lens.md §2-3).
//!
//! The gradient of many halos (pseudo-elliptical SIS, LENSTOOL type 5, and dPIE, type 81) summed at every
//! pixel of a square grid, in float32, float64 and the paper's mixed-precision schemes. Halos are SoA; each
//! halo's strength b comes from its velocity dispersion and D_LS/D_S of flat ΛCDM; the float32 path forms
//! centre offsets exactly (integer pixel + float64 remainder) so it has no cancellation near halo centres.
//! `chi2` adds the image-plane χ² (triangle delensing), `io` the CSV and FITS files.

pub mod chi2;
pub mod io;
pub mod maps;

use super::{vector_errors, Accuracy, DevicePlan, Field, WorkCount, Workload};
use crate::backend::{
    BufferSpec, DType, HostSlice, HostVec, KernelJob, Launch, Local, Precision, Program, Step,
    StepArg,
};
pub use io::HaloProfile;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// Kernel sources in the three dialects and the headers they share.
pub static PROGRAM: Program = Program {
    name: "lens",
    opencl: include_str!("../../../cl/lens.cl"),
    sycl: include_str!("../../../ports/sycl/lens.cpp"),
    headers: &[
        (
            "astro_dialect.h",
            include_str!("../../../cl/common/astro_dialect.h"),
        ),
        (
            "lens_model.h",
            include_str!("../../../cl/common/lens_model.h"),
        ),
        (
            "lens_mixed.h",
            include_str!("../../../cl/common/lens_mixed.h"),
        ),
        ("lens_all.h", include_str!("../../../cl/common/lens_all.h")),
    ],
    // Lets NVIDIA's rsqrt be the bare MUFU (no denormal fix-up); the lens clamps its arguments to normal
    // numbers, so results do not change (cl/common/astro_dialect.h, ASTRO_RSQRT).
    opencl_options: "-cl-denorms-are-zero",
};

pub const C_KMS: f64 = 299_792.458;
pub const ARCSEC_PER_RAD: f64 = 180.0 * 3600.0 / std::f64::consts::PI;
/// Seed of the halo catalogue (the paper's article number, A&C 30, 100340).
pub const DEFAULT_SEED: u64 = 100_340;

/// Work-group size used on GPUs (a multiple of 32 and of 64).
const GPU_GROUP: usize = 256;

/// Pixels along x and rows per grid work-item, float32 and float64; must equal
/// LENS_PIXELS_PER_ITEM_f32/_f64 and LENS_ROWS_PER_ITEM_f32/_f64 in cl/common/lens_model.h (tested).
pub const PIXELS_PER_ITEM: [usize; 2] = [16, 8];
pub const ROWS_PER_ITEM: [usize; 2] = [1, 1];

/// Work-items of a grid pass over `rows` rows of `n` pixels in this precision.
pub fn grid_items(precision: Precision, n: usize, rows: usize) -> usize {
    let k = usize::from(precision.base() == Precision::F64);
    n.div_ceil(PIXELS_PER_ITEM[k]) * rows.div_ceil(ROWS_PER_ITEM[k])
}
/// Reals per halo in the kernel tables; must equal LENS_SIE_STRIDE / LENS_DPIE_STRIDE (tested).
pub const SIE_STRIDE: usize = 8;
pub const DPIE_STRIDE: usize = 16;
/// Below this ε the dPIE uses its circular closed form (Lenstool-HPC's threshold; K = (1−ε²)/2√ε diverges).
pub const DPIE_CIRCULAR_EPS: f64 = 2e-4;
/// Work-items of the grid-stride float64 recompute kernel, each computing float64 grid items (enough to
/// fill a large GPU).
const RECOMPUTE_ITEMS: usize = 1 << 18;
/// The paper's fixed float64 patches (seed 000 appendix A): 400 × 400 px around cluster halos and
/// 20 × 20 px around galaxies at 0.03″/px, i.e. 12″ and 0.6″ squares, kept in arcsec at other pixel
/// scales. A halo is a "cluster" halo when its strength b ≥ 2″ (σ ≳ 300 km/s).
pub const PATCH_CLUSTER_ARCSEC: f64 = 12.0;
pub const PATCH_GALAXY_ARCSEC: f64 = 0.6;
pub const CLUSTER_B_ARCSEC: f64 = 2.0;
/// δ criteria of seed 000 §3.3 at 0.03″/px, scaled with the pixel size: axis |h − δ| < 0.0092″ (the
/// source-plane pixel shrank by more than 3.26×), cross |δ| > 0.0104″.
pub const AXIS_LIMIT_PER_PIXEL: f64 = 0.0092 / 0.03;
pub const CROSS_LIMIT_PER_PIXEL: f64 = 0.0104 / 0.03;
/// The paper's error budget: a quarter pixel (7.5e-3″ at 0.03″/px) divided by the axis magnification.
pub const BUDGET_PER_PIXEL: f64 = 0.25;
/// Estimated float32 error of the exact-offset grid per arcsec of the halos' largest deflections, in units
/// of the float32 unit roundoff 2^-24: SIE 8 (rsqrt's 2 ulp, the roundings of N·d and of the quadratic
/// form, and the accumulation; measured worst errors are at most half of this at `ci` and `hff`), dPIE 400
/// (the difference of two complex logarithms loses ~2e-5 relative). An estimate, not a bound: every run
/// checks the budget at every pixel against float64.
pub const F32_ERROR_ULPS_SIE: f64 = 8.0;
pub const F32_ERROR_ULPS_DPIE: f64 = 400.0;
/// Safety factor of the error-budget scheme on top of the estimate and of the flags' own float32 error.
pub const BUDGET_SAFETY: f64 = 2.0;

/// Float32 tolerance on |Δg| in arcsec: 1/300 of an HFF pixel. Float64: relative.
pub const TOL_F32_ABS: f64 = 1e-4;
/// Float32 tolerance when the catalogue has dPIE halos: the difference of two complex logarithms loses
/// about 2e-5 relative in float32 (measured 9.7e-4″ on a 15″ halo); still a quarter of the paper's
/// quarter-pixel budget of 7.5e-3″. Weaker than for SIE; the mixed modes recompute flagged pixels in f64.
pub const TOL_F32_ABS_DPIE: f64 = 2e-3;
pub const TOL_F64_REL: f64 = 1e-10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Tiny,
    Ci,
    Hff,
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tiny" => Ok(Preset::Tiny),
            "ci" => Ok(Preset::Ci),
            "hff" => Ok(Preset::Hff),
            _ => Err(format!(
                "unknown preset '{s}' for lens (expected tiny, ci or hff)"
            )),
        }
    }
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Ci => "ci",
            Preset::Hff => "hff",
        }
    }
}

/// Flat ΛCDM with no radiation (as LENSTOOL).
#[derive(Debug, Clone, Copy)]
pub struct Cosmology {
    pub omega_m: f64,
    pub z_lens: f64,
    pub z_source: f64,
}

impl Default for Cosmology {
    fn default() -> Self {
        Cosmology {
            omega_m: 0.3,
            z_lens: 0.3,
            z_source: 2.0,
        }
    }
}

impl Cosmology {
    /// Comoving distance in Hubble units, ∫₀ᶻ dz'/E(z').
    fn comoving(&self, z: f64) -> f64 {
        let om = self.omega_m;
        let e_inv = |z: f64| 1.0 / (om * (1.0 + z).powi(3) + (1.0 - om)).sqrt();
        adaptive_simpson(&e_inv, 0.0, z, 1e-15, 50)
    }
    /// D_LS / D_S for a flat universe: (χ_s − χ_l) / χ_s.
    pub fn dls_over_ds(&self) -> f64 {
        let (cl, cs) = (self.comoving(self.z_lens), self.comoving(self.z_source));
        (cs - cl) / cs
    }
}

fn adaptive_simpson(f: &dyn Fn(f64) -> f64, a: f64, b: f64, tol: f64, depth: u32) -> f64 {
    fn simpson(f: &dyn Fn(f64) -> f64, a: f64, fa: f64, b: f64, fb: f64) -> (f64, f64, f64) {
        let m = 0.5 * (a + b);
        let fm = f(m);
        (m, fm, (b - a) / 6.0 * (fa + 4.0 * fm + fb))
    }
    #[allow(clippy::too_many_arguments)]
    fn rec(
        f: &dyn Fn(f64) -> f64,
        a: f64,
        fa: f64,
        b: f64,
        fb: f64,
        whole: f64,
        m: f64,
        fm: f64,
        tol: f64,
        depth: u32,
    ) -> f64 {
        let (lm, flm, left) = simpson(f, a, fa, m, fm);
        let (rm, frm, right) = simpson(f, m, fm, b, fb);
        let delta = left + right - whole;
        if depth == 0 || delta.abs() <= 15.0 * tol {
            return left + right + delta / 15.0;
        }
        rec(f, a, fa, m, fm, left, lm, flm, tol / 2.0, depth - 1)
            + rec(f, m, fm, b, fb, right, rm, frm, tol / 2.0, depth - 1)
    }
    let (fa, fb) = (f(a), f(b));
    let (m, fm, whole) = simpson(f, a, fa, b, fb);
    rec(f, a, fa, b, fb, whole, m, fm, tol, depth)
}

/// LENSTOOL strength of a pseudo-elliptical SIS without the distance ratio: b₀ = 4π(σ/c)² in arcsec.
pub fn b0_arcsec(sigma_v_kms: f64) -> f64 {
    4.0 * std::f64::consts::PI * (sigma_v_kms / C_KMS).powi(2) * ARCSEC_PER_RAD
}

/// LENSTOOL dPIE strength without the distance ratio: b₀ = 6π(σ_LT/c)² in arcsec (research/lens.md §2.4).
pub fn b0_dpie_arcsec(sigma_lt_kms: f64) -> f64 {
    1.5 * b0_arcsec(sigma_lt_kms)
}

/// The dPIE formula's ε = (a−b)/(a+b) from LENSTOOL's mass ellipticity e = (a²−b²)/(a²+b²).
pub fn dpie_eps_from_mass(e: f64) -> f64 {
    if e <= 0.0 {
        0.0
    } else {
        (1.0 - (1.0 - e * e).sqrt()) / e
    }
}

/// Halos as structure of arrays. `b` already includes D_LS/D_S; `e` is the SIE potential ellipticity or
/// the dPIE ε; `theta` the position angle in radians, counter-clockwise from +x; `r_core`/`r_cut` in arcsec
/// (dPIE only, 0 for SIE).
#[derive(Debug, Clone, Default)]
pub struct Halos {
    pub x0: Vec<f64>,
    pub y0: Vec<f64>,
    pub b: Vec<f64>,
    pub e: Vec<f64>,
    pub theta: Vec<f64>,
    pub profile: Vec<HaloProfile>,
    pub r_core: Vec<f64>,
    pub r_cut: Vec<f64>,
}

impl Halos {
    pub fn len(&self) -> usize {
        self.x0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.x0.is_empty()
    }
    /// Adds a pseudo-elliptical SIS (LENSTOOL type 5).
    pub fn push(&mut self, x0: f64, y0: f64, b: f64, e: f64, theta: f64) {
        self.push_any(HaloProfile::Sie, x0, y0, b, e, theta, 0.0, 0.0);
    }
    /// Adds a dPIE (LENSTOOL type 81) with the formula's ε and radii in arcsec.
    #[allow(clippy::too_many_arguments)]
    pub fn push_dpie(
        &mut self,
        x0: f64,
        y0: f64,
        b: f64,
        eps: f64,
        theta: f64,
        r_core: f64,
        r_cut: f64,
    ) {
        self.push_any(HaloProfile::Dpie, x0, y0, b, eps, theta, r_core, r_cut);
    }
    #[allow(clippy::too_many_arguments)]
    fn push_any(
        &mut self,
        p: HaloProfile,
        x0: f64,
        y0: f64,
        b: f64,
        e: f64,
        theta: f64,
        rc: f64,
        rcut: f64,
    ) {
        self.x0.push(x0);
        self.y0.push(y0);
        self.b.push(b);
        self.e.push(e);
        self.theta.push(theta);
        self.profile.push(p);
        self.r_core.push(rc);
        self.r_cut.push(rcut);
    }
    fn copy_from(&mut self, other: &Halos, k: usize) {
        self.push_any(
            other.profile[k],
            other.x0[k],
            other.y0[k],
            other.b[k],
            other.e[k],
            other.theta[k],
            other.r_core[k],
            other.r_cut[k],
        );
    }
    /// Halos from a catalogue (io::read_halos), for sources at the given D_LS/D_S. SIE: ε_pot = e_mass/3
    /// (LENSTOOL and Lenstool-HPC type 5); dPIE: ε = (1 − √(1−e²))/e, b = 6π(σ_LT/c)².
    pub fn from_records(records: &[io::HaloRecord], dls_ds: f64) -> Halos {
        let mut h = Halos::default();
        for r in records {
            let theta = r.angle_deg.to_radians();
            match r.profile {
                HaloProfile::Sie => h.push(
                    r.x,
                    r.y,
                    b0_arcsec(r.sigma_kms) * dls_ds,
                    r.ellipticity / 3.0,
                    theta,
                ),
                HaloProfile::Dpie => h.push_dpie(
                    r.x,
                    r.y,
                    b0_dpie_arcsec(r.sigma_kms) * dls_ds,
                    dpie_eps_from_mass(r.ellipticity),
                    theta,
                    r.r_core,
                    r.r_cut,
                ),
            }
        }
        h
    }
    /// N = b·Rᵀ diag(1−e, 1+e) R·b, so that g = N d / sqrt(dᵀ N d) (SIE).
    pub fn quad_form(&self, k: usize) -> (f64, f64, f64) {
        let (c, s) = (self.theta[k].cos(), self.theta[k].sin());
        let (e, b2) = (self.e[k], self.b[k] * self.b[k]);
        let m11 = (1.0 - e) * c * c + (1.0 + e) * s * s;
        let m12 = -2.0 * e * c * s;
        let m22 = (1.0 - e) * s * s + (1.0 + e) * c * c;
        (b2 * m11, b2 * m12, b2 * m22)
    }
    /// Checks every halo's parameters; the error names the halo and the field.
    pub fn validate(&self) -> Result<(), LensError> {
        for k in 0..self.len() {
            let bad = |field: &'static str, value: f64| LensError::BadHalo {
                index: k,
                field,
                value,
            };
            for (field, v) in [
                ("x", self.x0[k]),
                ("y", self.y0[k]),
                ("theta", self.theta[k]),
            ] {
                if !v.is_finite() {
                    return Err(bad(field, v));
                }
            }
            if !(self.b[k] > 0.0 && self.b[k].is_finite()) {
                return Err(bad("b (from sigma_v)", self.b[k]));
            }
            if !(self.e[k] >= 0.0 && self.e[k] < 1.0) {
                return Err(bad("ellipticity", self.e[k]));
            }
            if self.profile[k] == HaloProfile::Dpie
                && !(self.r_core[k] >= 0.0
                    && self.r_cut[k] > self.r_core[k]
                    && self.r_cut[k].is_finite())
            {
                return Err(bad("r_cut (must exceed r_core >= 0)", self.r_cut[k]));
            }
        }
        Ok(())
    }
}

/// dPIE deflection of one halo at offset (dx, dy) from its centre, generic over the float type (the CPU
/// paths); the same formula as `lens_dpie_add` in cl/common/lens_model.h (research/lens.md §2.4). `scale`
/// is b·r_cut/(r_cut − r_core), as stored in the halo tables.
#[allow(clippy::too_many_arguments)]
pub fn dpie_deflection<T: Real>(
    dx: T,
    dy: T,
    c: T,
    s: T,
    eps: T,
    scale: T,
    rc: T,
    rcut: T,
) -> (T, T) {
    let one = T::ONE;
    let two = one + one;
    let u = c * dx + s * dy;
    let v = T::ZERO - s * dx + c * dy;
    let (gu, gv) = if eps.to_f64() < DPIE_CIRCULAR_EPS {
        let s2 = u * u + v * v;
        if s2.to_f64() > 0.0 {
            let t = scale * ((s2 + rc * rc).sqrt() - rc - (s2 + rcut * rcut).sqrt() + rcut) / s2;
            (t * u, t * v)
        } else {
            (T::ZERO, T::ZERO)
        }
    } else {
        let sqe = eps.sqrt();
        let cx1 = (one - eps) / (one + eps);
        let k = (one - eps * eps) / (two * sqe);
        let rho2 = u * u / ((one + eps) * (one + eps)) + v * v / ((one - eps) * (one - eps));
        let term = |r: T| -> (T, T) {
            let (nr, ni) = (cx1 * u, two * sqe * (r * r + rho2).sqrt() - v / cx1);
            let (dr, di) = (u, two * r * sqe - v);
            let d2 = dr * dr + di * di;
            let (wr, wi) = ((nr * dr + ni * di) / d2, (ni * dr - nr * di) / d2);
            (wi.atan2(wr), T::from_f64(0.5) * (wr * wr + wi * wi).ln())
        };
        let ((a1, l1), (a2, l2)) = (term(rc), term(rcut));
        (k * scale * (a1 - a2), T::ZERO - k * scale * (l1 - l2))
    };
    (c * gu - s * gv, s * gu + c * gv)
}

/// The f64 gradient at an arbitrary point: SIE in the textbook form of research/lens.md §2.1 (rotate,
/// divide, rotate back), independent of the grid code; dPIE by [`dpie_deflection`]. Both are checked
/// against the mpmath oracle in tests.
pub fn gradient_at(halos: &Halos, x: f64, y: f64) -> (f64, f64) {
    let (mut gx, mut gy) = (0.0, 0.0);
    for k in 0..halos.len() {
        let (c, s) = (halos.theta[k].cos(), halos.theta[k].sin());
        let (dx, dy) = (x - halos.x0[k], y - halos.y0[k]);
        if halos.profile[k] == HaloProfile::Dpie {
            let (ax, ay) = dpie_deflection(
                dx,
                dy,
                c,
                s,
                halos.e[k],
                dpie_scale(halos.b[k], halos.r_core[k], halos.r_cut[k]),
                halos.r_core[k],
                halos.r_cut[k],
            );
            gx += ax;
            gy += ay;
            continue;
        }
        let u = c * dx + s * dy;
        let v = -s * dx + c * dy;
        let e = halos.e[k];
        let r = ((1.0 - e) * u * u + (1.0 + e) * v * v).sqrt();
        if r == 0.0 {
            continue;
        }
        let gu = halos.b[k] * (1.0 - e) * u / r;
        let gv = halos.b[k] * (1.0 + e) * v / r;
        gx += c * gu - s * gv;
        gy += s * gu + c * gv;
    }
    (gx, gy)
}

/// Halo tables of one precision in the kernels' layout (strides SIE_STRIDE and DPIE_STRIDE; the fields
/// are documented in cl/common/lens_model.h). Offsets are exact: integer pixel index + remainder.
#[derive(Debug, Clone, Default)]
pub struct KernelTables<T> {
    pub sie: Vec<T>,
    pub dpie: Vec<T>,
    pub n_sie: usize,
    pub n_dpie: usize,
    /// Offsets split exactly (nearest pixel + remainder ≤ ½ px), so the grid may use the offset
    /// polynomial; false for the naive tables of the paper's scheme.
    pub exact_offsets: bool,
}

/// Errors in a lens configuration, named by field and value.
#[derive(Debug, thiserror::Error)]
pub enum LensError {
    #[error("lens grid size must be at least 1 pixel, got {0}")]
    ZeroSize(usize),
    #[error("lens grid size {0} exceeds the supported maximum of {1} pixels per side")]
    TooLarge(usize, usize),
    #[error("pixel scale must be positive and finite, got {0}")]
    BadPixel(f64),
    #[error("galaxy sigma range must satisfy 0 < lo <= hi, got {0}..{1} km/s")]
    BadSigma(f64, f64),
    #[error("halo {index}: field '{field}' has the invalid value {value}")]
    BadHalo {
        index: usize,
        field: &'static str,
        value: f64,
    },
    #[error("no halos: a lens model needs at least one")]
    NoHalos,
}

/// A fully specified lens-gradient problem.
#[derive(Debug, Clone)]
pub struct LensProblem {
    pub preset: String,
    pub n: usize,
    pub pixel: f64,
    pub cosmology: Cosmology,
    pub dls_ds: f64,
    /// Halos in kernel order: SIE then dPIE, each by ascending strength, so float32 sums the small galaxy
    /// terms before adding the large cluster terms (less rounding in the accumulator).
    pub halos: Halos,
    tables32: KernelTables<f32>,
    tables64: KernelTables<f64>,
    /// Float32 tables with naive offsets (x − x0 rounded at the coordinate's magnitude), for the paper's
    /// mixed scheme as published.
    naive32: KernelTables<f32>,
    /// The fixed float64 patches: (side in pixels, centres as integer pixel index pairs), clusters then
    /// galaxies.
    patches: [(i32, Vec<i32>); 2],
    /// See [`LensOptions::device_mem_limit`].
    pub device_mem_limit: Option<u64>,
}

/// Options beyond the preset.
#[derive(Debug, Clone)]
pub struct LensOptions {
    pub n: Option<usize>,
    pub galaxy_sigma: (f64, f64),
    pub seed: u64,
    /// Caps the device memory a band may use (bytes), below what the device reports: forces tiling.
    pub device_mem_limit: Option<u64>,
}

impl Default for LensOptions {
    fn default() -> Self {
        LensOptions {
            n: None,
            galaxy_sigma: (10.0, 15.0),
            seed: DEFAULT_SEED,
            device_mem_limit: None,
        }
    }
}

/// Largest grid side accepted (index arithmetic is 32-bit in the kernels; tiling covers memory).
pub const MAX_N: usize = 46_000;

impl LensProblem {
    /// Builds a preset: `tiny` (128², 2 + 30 halos), `ci` (1024², 2 + 700), `hff` (6730², 2 + 700). All
    /// cover the same ±101″ field as the paper's 6730 px at 0.03″/px.
    pub fn preset(preset: Preset, opts: &LensOptions) -> Result<Self, LensError> {
        let (n_default, galaxies) = match preset {
            Preset::Tiny => (128, 30),
            Preset::Ci => (1024, 700),
            Preset::Hff => (6730, 700),
        };
        // n is validated by new(); a zero n only makes this pixel scale infinite until then.
        let n = opts.n.unwrap_or(n_default);
        let (lo, hi) = opts.galaxy_sigma;
        if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
            return Err(LensError::BadSigma(lo, hi));
        }
        let pixel = 0.03 * 6730.0 / n as f64;
        let cosmology = Cosmology::default();
        let dls_ds = cosmology.dls_over_ds();
        let mut rng = rand_pcg::Pcg64::seed_from_u64(opts.seed);
        let mut halos = Halos::default();
        // Two cluster halos (DESIGN.md §4.1). The brief gives no position angles; we use 0.3 and 1.1 rad
        // so rotation is exercised (the paper's public config has none).
        halos.push(20.0, 25.0, b0_arcsec(1000.0) * dls_ds, 0.05, 0.3);
        halos.push(-12.0, -27.0, b0_arcsec(700.0) * dls_ds, 0.04, 1.1);
        for _ in 0..galaxies {
            let x = rng.random_range(-60.0..60.0);
            let y = rng.random_range(-60.0..60.0);
            let sigma = if hi > lo {
                rng.random_range(lo..hi)
            } else {
                lo
            };
            let e = rng.random_range(0.0..0.15);
            let t = rng.random_range(0.0..std::f64::consts::PI);
            halos.push(x, y, b0_arcsec(sigma) * dls_ds, e, t);
        }
        let mut p = Self::new(preset.name(), n, pixel, cosmology, halos)?;
        p.device_mem_limit = opts.device_mem_limit;
        Ok(p)
    }

    pub fn new(
        preset: &str,
        n: usize,
        pixel: f64,
        cosmology: Cosmology,
        halos: Halos,
    ) -> Result<Self, LensError> {
        if n == 0 {
            return Err(LensError::ZeroSize(n));
        }
        if n > MAX_N {
            return Err(LensError::TooLarge(n, MAX_N));
        }
        if !(pixel > 0.0 && pixel.is_finite()) {
            return Err(LensError::BadPixel(pixel));
        }
        if halos.is_empty() {
            return Err(LensError::NoHalos);
        }
        halos.validate()?;
        let mut order: Vec<usize> = (0..halos.len()).collect();
        order.sort_by(|&a, &b| {
            (halos.profile[a] == HaloProfile::Dpie)
                .cmp(&(halos.profile[b] == HaloProfile::Dpie))
                .then(halos.b[a].total_cmp(&halos.b[b]))
        });
        let mut sorted = Halos::default();
        for &k in &order {
            sorted.copy_from(&halos, k);
        }
        let mut p = LensProblem {
            preset: preset.to_string(),
            n,
            pixel,
            cosmology,
            dls_ds: cosmology.dls_over_ds(),
            halos: sorted,
            tables32: KernelTables::default(),
            tables64: KernelTables::default(),
            naive32: KernelTables::default(),
            patches: [(0, vec![]), (0, vec![])],
            device_mem_limit: None,
        };
        p.patches = p.patch_centres();
        p.tables32 = p.tables(|v| v as f32, false);
        p.tables64 = p.tables(|v| v, false);
        p.naive32 = p.tables(|v| v as f32, true);
        Ok(p)
    }

    /// Pixel centre coordinate of index i (same for x and y): the grid is centred on 0.
    pub fn coord(&self, i: usize) -> f64 {
        (i as f64 - (self.n as f64 - 1.0) / 2.0) * self.pixel
    }

    /// Splits a halo centre into the nearest pixel index and the float64 remainder x(i_k) − x0. The naive
    /// split (index 0, remainder x(0) − x0) reproduces float32 arithmetic on plain coordinates.
    fn offset(&self, x0: f64, naive: bool) -> (f64, f64) {
        let centre = (self.n as f64 - 1.0) / 2.0;
        let ik = if naive {
            0.0
        } else {
            (x0 / self.pixel + centre).round()
        };
        (ik, (ik - centre) * self.pixel - x0)
    }

    fn tables<T: Copy>(&self, cast: impl Fn(f64) -> T, naive: bool) -> KernelTables<T> {
        let mut t = KernelTables {
            sie: vec![],
            dpie: vec![],
            n_sie: 0,
            n_dpie: 0,
            exact_offsets: !naive,
        };
        let h = &self.halos;
        for k in 0..h.len() {
            let (ix, fx) = self.offset(h.x0[k], naive);
            let (iy, fy) = self.offset(h.y0[k], naive);
            match h.profile[k] {
                HaloProfile::Sie => {
                    // SIE offsets in pixels (the deflection is invariant under scaling d).
                    let (a, b, c) = h.quad_form(k);
                    let (fx, fy) = (fx / self.pixel, fy / self.pixel);
                    t.sie.extend([a, b, c, fx, fy, ix, iy, 0.0].map(&cast));
                    t.n_sie += 1;
                }
                HaloProfile::Dpie => {
                    let eps = h.e[k];
                    let sqe = eps.sqrt();
                    let kk = if eps > 0.0 {
                        (1.0 - eps * eps) / (2.0 * sqe)
                    } else {
                        0.0
                    };
                    let (rc, rcut) = (h.r_core[k], h.r_cut[k]);
                    let circular = if eps < DPIE_CIRCULAR_EPS { 1.0 } else { 0.0 };
                    t.dpie.extend(
                        [
                            h.theta[k].cos(),
                            h.theta[k].sin(),
                            eps,
                            kk,
                            sqe,
                            (1.0 - eps) / (1.0 + eps),
                            rc,
                            rcut,
                            dpie_scale(h.b[k], rc, rcut),
                            fx,
                            fy,
                            ix,
                            iy,
                            circular,
                            0.0,
                            0.0,
                        ]
                        .map(&cast),
                    );
                    t.n_dpie += 1;
                }
            }
        }
        t
    }

    /// The float32 tables of a mode: naive offsets for the paper's scheme as published, exact otherwise.
    fn f32_tables(&self, precision: Precision) -> &KernelTables<f32> {
        if precision == Precision::MixedPaper {
            &self.naive32
        } else {
            &self.tables32
        }
    }

    /// The grid on the CPU in precision T, from tables of that precision: the same arithmetic as
    /// cl/common/lens_model.h, with the SIE loop written so it vectorises.
    fn cpu_grid<T: Real>(&self, t: &KernelTables<T>) -> Field {
        let n = self.n;
        let pixel = T::from_f64(self.pixel);
        let mut gx = vec![0.0f64; n * n];
        let mut gy = vec![0.0f64; n * n];
        gx.par_chunks_mut(n)
            .zip(gy.par_chunks_mut(n))
            .enumerate()
            .for_each(|(j, (gx_row, gy_row))| {
                let mut ax = vec![T::ZERO; n];
                let mut ay = vec![T::ZERO; n];
                let fj = T::from_i32(j as i32);
                for p in t.sie.chunks_exact(SIE_STRIDE) {
                    let (n11, n12, n22, fx, fy, ik, jk) =
                        (p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
                    let dy = (fj - jk) + fy;
                    let pixels = ax.iter_mut().zip(ay.iter_mut()).enumerate();
                    // Where fx goes: into the row terms (exact tables) or into x (naive tables).
                    if t.exact_offsets {
                        let row = SieRow::new(n11, n12, n22, fx, dy);
                        for (i, (sx, sy)) in pixels {
                            let (gx, gy) = row.add(T::from_i32(i as i32) - ik);
                            *sx = *sx + gx;
                            *sy = *sy + gy;
                        }
                    } else {
                        let row = SieRow::new(n11, n12, n22, T::ZERO, dy);
                        for (i, (sx, sy)) in pixels {
                            let (gx, gy) = row.add((T::from_i32(i as i32) - ik) + fx);
                            *sx = *sx + gx;
                            *sy = *sy + gy;
                        }
                    }
                }
                for p in t.dpie.chunks_exact(DPIE_STRIDE) {
                    let dy = (fj - p[12]) * pixel + p[10];
                    for (i, (sx, sy)) in ax.iter_mut().zip(ay.iter_mut()).enumerate() {
                        let dx = (T::from_i32(i as i32) - p[11]) * pixel + p[9];
                        let (a, b) = dpie_from_table(dx, dy, p);
                        *sx = *sx + a;
                        *sy = *sy + b;
                    }
                }
                for i in 0..n {
                    gx_row[i] = ax[i].to_f64();
                    gy_row[i] = ay[i].to_f64();
                }
            });
        Field::new(vec![gx, gy])
    }

    /// Float64 deflection at pixel (i, j) from the float64 tables (the recompute of a flagged pixel).
    fn point64(&self, i: usize, j: usize) -> (f64, f64) {
        let t = &self.tables64;
        let (fi, fj, h) = (i as f64, j as f64, self.pixel);
        let (mut ax, mut ay) = (0.0, 0.0);
        for p in t.sie.chunks_exact(SIE_STRIDE) {
            let (dx, dy) = ((fi - p[5]) + p[3], (fj - p[6]) + p[4]);
            let (gx, gy) = SieRow::new(p[0], p[1], p[2], 0.0, dy).add(dx);
            ax += gx;
            ay += gy;
        }
        for p in t.dpie.chunks_exact(DPIE_STRIDE) {
            let (a, b) = dpie_from_table((fi - p[11]) * h + p[9], (fj - p[12]) * h + p[10], p);
            ax += a;
            ay += b;
        }
        (ax, ay)
    }

    /// Mixed precision on the CPU: the float32 grid, the δ flags (in float32 arithmetic, as the kernels),
    /// optional patches, and a float64 recompute of every flagged pixel.
    fn cpu_mixed(&self, precision: Precision) -> Field {
        let t32 = self.f32_tables(precision);
        let mut field = self.cpu_grid(t32);
        let mask = self.flags(&field, precision);
        let listed: Vec<usize> = (0..mask.len()).filter(|&p| mask[p]).collect();
        let n = self.n;
        let values: Vec<(f64, f64)> = listed
            .par_iter()
            .map(|&p| self.point64(p % n, p / n))
            .collect();
        for (&p, (a, b)) in listed.iter().zip(values) {
            field.components[0][p] = a;
            field.components[1][p] = b;
        }
        field.stats.push((
            "recomputed_fraction".into(),
            listed.len() as f64 / (n * n) as f64,
        ));
        field
    }

    /// Pixels to recompute in float64: the scheme's criteria on the float32 grid (as lens_flag_item in
    /// cl/common/lens_mixed.h), plus the fixed patches.
    fn flags(&self, g32: &Field, precision: Precision) -> Vec<bool> {
        let n = self.n;
        let h = self.pixel as f32;
        let (axis, cross, eig) = self.flag_limits(precision);
        let (gx, gy) = (&g32.components[0], &g32.components[1]);
        let at = |c: &Vec<f64>, p: usize| c[p] as f32;
        let mut mask: Vec<bool> = (0..n * n)
            .into_par_iter()
            .map(|p| {
                let (i, j) = (p % n, p / n);
                let mut flagged = false;
                if n > 1 {
                    let (px, sx) = if i + 1 < n {
                        (p + 1, 1.0f32)
                    } else {
                        (p - 1, -1.0)
                    };
                    let (py, sy) = if j + 1 < n {
                        (p + n, 1.0f32)
                    } else {
                        (p - n, -1.0)
                    };
                    let d1 = sx * (at(gx, px) - at(gx, p));
                    let d4 = sx * (at(gy, px) - at(gy, p));
                    let d2 = sy * (at(gy, py) - at(gy, p));
                    let d3 = sy * (at(gx, py) - at(gx, p));
                    flagged = (h - d1).abs() < axis
                        || d4.abs() > cross
                        || (h - d2).abs() < axis
                        || d3.abs() > cross
                        || smaller_eigenvalue(h - d1, -0.5 * (d3 + d4), h - d2) < eig;
                }
                flagged
            })
            .collect();
        if uses_patches(precision) {
            for (size, centres) in self.patches() {
                for c in centres.chunks_exact(2) {
                    for a in 0..size * size {
                        let i = c[0] - size / 2 + a % size;
                        let j = c[1] - size / 2 + a / size;
                        if (0..n as i32).contains(&i) && (0..n as i32).contains(&j) {
                            mask[j as usize * n + i as usize] = true;
                        }
                    }
                }
            }
        }
        mask
    }

    /// The flag limits of a mixed scheme at this pixel scale, (axis, cross, eigenvalue) in arcsec and in
    /// float32 as the kernels use them (cl/common/lens_mixed.h). The paper's schemes: its δ limits, no
    /// eigenvalue test. The error-budget scheme: axis and eigenvalue limits h/M for the magnification M
    /// of [`Self::budget_magnification`], no cross-term test.
    fn flag_limits(&self, precision: Precision) -> (f32, f32, f32) {
        let h = self.pixel;
        if precision == Precision::MixedBudget {
            let limit = (h / self.budget_magnification()) as f32;
            (limit, f32::MAX, limit)
        } else {
            (
                (AXIS_LIMIT_PER_PIXEL * h) as f32,
                (CROSS_LIMIT_PER_PIXEL * h) as f32,
                0.0,
            )
        }
    }

    /// Estimated worst float32 error of the exact-offset grid in arcsec: the halos' largest deflections
    /// (SIE b·√(1+e), dPIE b) weighted by [`F32_ERROR_ULPS_SIE`] / [`F32_ERROR_ULPS_DPIE`] unit roundoffs.
    pub fn f32_error_estimate(&self) -> f64 {
        let unit = f64::from(f32::EPSILON) / 2.0;
        let h = &self.halos;
        (0..h.len())
            .map(|k| match h.profile[k] {
                HaloProfile::Sie => F32_ERROR_ULPS_SIE * h.b[k] * (1.0 + h.e[k]).sqrt(),
                HaloProfile::Dpie => F32_ERROR_ULPS_DPIE * h.b[k],
            })
            .sum::<f64>()
            * unit
    }

    /// The magnification above which the error-budget scheme recomputes a pixel in float64. A pixel of
    /// true magnification M may err by (h/4)/M; its float32 error is E (the estimate) and the flags'
    /// differences err by up to 2E, so an unflagged pixel is within budget when h/M_flag ≥ 4E + 2E. With
    /// the safety factor: M_flag = h / (6·E·BUDGET_SAFETY), at least 1.
    pub fn budget_magnification(&self) -> f64 {
        let e = self.f32_error_estimate();
        (self.pixel / (6.0 * e * BUDGET_SAFETY)).max(1.0)
    }

    /// The fixed patches: (side in pixels, centres as integer pixel index pairs), clusters then galaxies.
    pub fn patches(&self) -> &[(i32, Vec<i32>); 2] {
        &self.patches
    }

    fn patch_centres(&self) -> [(i32, Vec<i32>); 2] {
        let side = |arcsec: f64| ((arcsec / self.pixel).round() as i32).max(1);
        let (mut cluster, mut galaxy) = (Vec::new(), Vec::new());
        let centre = (self.n as f64 - 1.0) / 2.0;
        for k in 0..self.halos.len() {
            let i = (self.halos.x0[k] / self.pixel + centre).round() as i32;
            let j = (self.halos.y0[k] / self.pixel + centre).round() as i32;
            if self.halos.b[k] >= CLUSTER_B_ARCSEC {
                cluster.extend([i, j]);
            } else {
                galaxy.extend([i, j]);
            }
        }
        [
            (side(PATCH_CLUSTER_ARCSEC), cluster),
            (side(PATCH_GALAXY_ARCSEC), galaxy),
        ]
    }

    /// The paper's error budget per pixel: E_i ≤ (h/4)/M_i with M_i = h/|h − δ_i| the axis magnification
    /// from the float64 reference. Returns (worst E_i·M_i/(h/4), pixels over budget).
    pub fn budget(&self, result: &Field, reference: &Field) -> (f64, u64) {
        let n = self.n;
        let h = self.pixel;
        let limit = BUDGET_PER_PIXEL * h;
        (0..n * n)
            .into_par_iter()
            .map(|p| {
                let (i, j) = (p % n, p / n);
                let mut worst = 0.0f64;
                for (axis, c) in [(0usize, 1usize), (1, n)] {
                    let comp = &reference.components[axis];
                    let forward = if axis == 0 { i + 1 < n } else { j + 1 < n };
                    if n < 2 {
                        continue;
                    }
                    let delta = if forward {
                        comp[p + c] - comp[p]
                    } else {
                        comp[p] - comp[p - c]
                    };
                    let shrink = (h - delta).abs() / h; // 1/M_i
                    let err = (result.components[axis][p] - comp[p]).abs();
                    let ratio = if shrink > 0.0 {
                        err / (limit * shrink)
                    } else if err > 0.0 {
                        f64::INFINITY
                    } else {
                        0.0
                    };
                    worst = worst.max(ratio);
                }
                let w = if worst.is_nan() { f64::INFINITY } else { worst };
                (w, u64::from(w > 1.0))
            })
            .reduce(|| (0.0, 0), |a, b| (a.0.max(b.0), a.1 + b.1))
    }
}

/// A job of the lens program (no defines: both precisions live in one program).
fn lens_job(
    buffers: Vec<BufferSpec<'_>>,
    steps: Vec<Step>,
    warmup: u32,
    repeats: u32,
) -> KernelJob<'_> {
    KernelJob {
        program: &PROGRAM,
        defines: vec![],
        buffers,
        steps,
        warmup,
        repeats,
    }
}

/// Whether a mixed scheme adds the paper's fixed float64 patches around halo centres.
fn uses_patches(precision: Precision) -> bool {
    matches!(precision, Precision::MixedPatches | Precision::MixedPaper)
}

/// The smaller |eigenvalue| of the symmetric matrix (a, b; b, c), as lens_smaller_eigenvalue.
fn smaller_eigenvalue(a: f32, b: f32, c: f32) -> f32 {
    let (mean, half) = (0.5 * (a + c), 0.5 * (a - c));
    let radius = (half * half + b * b).sqrt();
    (mean - radius).abs().min((mean + radius).abs())
}

/// One SIE halo along a row, as lens_sie_row_terms and lens_sie_add in cl/common/lens_model.h: the offset
/// is d = d0 + (x, 0) with d0 = (d0x, dy); the row terms are N·d0 and d0ᵀN·d0.
struct SieRow<T> {
    n11: T,
    n12: T,
    mx0: T,
    my0: T,
    b1: T,
    q0: T,
}

impl<T: Real> SieRow<T> {
    #[inline(always)]
    fn new(n11: T, n12: T, n22: T, d0x: T, dy: T) -> Self {
        let mx0 = n11 * d0x + n12 * dy;
        let my0 = n12 * d0x + n22 * dy;
        SieRow {
            n11,
            n12,
            mx0,
            my0,
            b1: mx0 + mx0,
            q0: d0x * mx0 + dy * my0,
        }
    }

    /// The deflection at x along the row.
    #[inline(always)]
    fn add(&self, x: T) -> (T, T) {
        let mx = self.n11 * x + self.mx0;
        let my = self.n12 * x + self.my0;
        let q = (self.n11 * x + self.b1) * x + self.q0;
        let r = T::ONE / q.max(T::from_f64(1e-37)).sqrt();
        (mx * r, my * r)
    }
}

/// One dPIE halo from its table row (see cl/common/lens_model.h for the fields).
fn dpie_from_table<T: Real>(dx: T, dy: T, p: &[T]) -> (T, T) {
    dpie_deflection(dx, dy, p[0], p[1], p[2], p[8], p[6], p[7])
}

/// The dPIE amplitude b·r_cut/(r_cut − r_core) of research/lens.md §2.4.
pub fn dpie_scale(b: f64, r_core: f64, r_cut: f64) -> f64 {
    b * r_cut / (r_cut - r_core)
}

/// The two floating types of the CPU path.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    /// From a small integer (pixel indices): i32 conversions vectorise where usize → float do not.
    fn from_i32(v: i32) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(self) -> Self;
    fn ln(self) -> Self;
    fn atan2(self, x: Self) -> Self;
    fn max(self, other: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i32(v: i32) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn atan2(self, x: Self) -> Self {
                <$t>::atan2(self, x)
            }
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// Index of each buffer of a lens job, in the order they are declared.
mod buf {
    pub const SIE32: usize = 0;
    pub const DPIE32: usize = 1;
    pub const SIE64: usize = 2;
    pub const DPIE64: usize = 3;
    pub const GX: usize = 4;
    pub const GY: usize = 5;
    // Mixed precision only:
    pub const MASK: usize = 6;
    /// The float64 grid items holding a flagged pixel, and their count.
    pub const ITEMS: usize = 7;
    pub const COUNTER: usize = 8;
    pub const GX64: usize = 9;
    pub const GY64: usize = 10;
    pub const CLUSTERS: usize = 11;
    pub const GALAXIES: usize = 12;
    pub const ITEM_COUNTER: usize = 13;
}

impl LensProblem {
    /// The four halo tables as the first buffers of a job (indices buf::SIE32 .. buf::DPIE64).
    fn table_buffers<'a>(&'a self, t32: &'a KernelTables<f32>) -> Vec<BufferSpec<'a>> {
        vec![
            BufferSpec::Input(HostSlice::F32(&t32.sie)),
            BufferSpec::Input(HostSlice::F32(&t32.dpie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.sie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.dpie)),
        ]
    }

    /// The grid launch of one band in mode p (its base precision; the paper's scheme on naive tables),
    /// writing buffers GX/GY.
    pub(crate) fn grid_launch(&self, p: Precision, row0: usize, rows: usize) -> Step {
        let (sie, dpie, t_sie, t_dpie, exact_offsets) = match p.base() {
            Precision::F64 => (
                buf::SIE64,
                buf::DPIE64,
                self.tables64.n_sie,
                self.tables64.n_dpie,
                self.tables64.exact_offsets,
            ),
            _ => {
                let t = self.f32_tables(p);
                (buf::SIE32, buf::DPIE32, t.n_sie, t.n_dpie, t.exact_offsets)
            }
        };
        Step::Launch(Launch {
            kernel: format!("lens_grid_{}", p.base().name()),
            args: vec![
                StepArg::Buffer(sie),
                StepArg::I32(t_sie as i32),
                StepArg::Buffer(dpie),
                StepArg::I32(t_dpie as i32),
                StepArg::I32(self.n as i32),
                StepArg::I32(row0 as i32),
                StepArg::I32(rows as i32),
                StepArg::real(p, self.pixel),
                StepArg::I32(i32::from(exact_offsets)),
                StepArg::Buffer(buf::GX),
                StepArg::Buffer(buf::GY),
            ],
            global: grid_items(p, self.n, rows),
            local: Local::Prefer(GPU_GROUP),
        })
    }

    /// Rows computed for a band that needs its next row too (flags, delensing): one extra unless last.
    pub(crate) fn extended_rows(&self, row0: usize, rows: usize) -> usize {
        (rows + 1).min(self.n - row0)
    }

    /// Bands of rows (row0, rows) for a job whose largest buffer holds `largest_elem` bytes per pixel and
    /// whose buffers hold `bytes_per_pixel` in all: each buffer fits `max_alloc` and all of them fit 80 % of
    /// `mem` (or of `device_mem_limit` when lower), so grids larger than the device are tiled, not refused.
    pub(crate) fn bands(
        &self,
        largest_elem: usize,
        bytes_per_pixel: usize,
        max_alloc: u64,
        mem: u64,
    ) -> Vec<(usize, usize)> {
        let mut mem = if mem == 0 { u64::MAX } else { mem };
        if let Some(limit) = self.device_mem_limit {
            mem = mem.min(limit);
        }
        let n = self.n as u64;
        let by_alloc = max_alloc.max(n * largest_elem as u64) / (n * largest_elem as u64);
        let by_mem = ((mem as f64 * 0.8) as u64 / (n * bytes_per_pixel as u64)).max(1);
        // At least two rows, so the y differences of the flags and the delensing cells stay in the band.
        let band = (by_alloc.min(by_mem) as usize).clamp(2.min(self.n), self.n);
        let mut out = Vec::new();
        let mut row0 = 0;
        while row0 < self.n {
            let rows = band.min(self.n - row0);
            out.push((row0, rows));
            row0 += rows;
        }
        out
    }

    fn mixed_job<'a>(
        &'a self,
        p: Precision,
        row0: usize,
        rows: usize,
        warmup: u32,
        repeats: u32,
    ) -> KernelJob<'a> {
        let (buffers, steps) = self.mixed_pipeline(p, row0, rows, true);
        lens_job(buffers, steps, warmup, repeats)
    }

    /// Buffers (indices of `buf`) and steps of one band's mixed-precision grid: the float32 grid over the
    /// band plus its next row, the scheme's flags, patches, and the float64 recompute into GX64/GY64.
    /// `outputs`: the counter and the float64 grid of the band's rows come back (a gradient job);
    /// otherwise they are device scratch covering the extended rows too (the χ² delensing needs row
    /// r + 1; that row's flags use a backward difference when it is the band's last).
    fn mixed_pipeline<'a>(
        &'a self,
        p: Precision,
        row0: usize,
        rows: usize,
        outputs: bool,
    ) -> (Vec<BufferSpec<'a>>, Vec<Step>) {
        let t32 = self.f32_tables(p);
        let n = self.n;
        let ext = self.extended_rows(row0, rows);
        let flag_rows = if outputs { rows } else { ext };
        let band = flag_rows * n;
        // The float64 grid items of the flagged rows: the recompute's unit of work.
        let items = grid_items(Precision::F64, n, flag_rows);
        let kept = |dtype, len| {
            if outputs {
                BufferSpec::Output { dtype, len }
            } else {
                BufferSpec::Scratch { dtype, len }
            }
        };
        let mut buffers = self.table_buffers(t32);
        let patches = self.patches();
        buffers.extend([
            BufferSpec::Scratch {
                dtype: DType::F32,
                len: ext * n,
            },
            BufferSpec::Scratch {
                dtype: DType::F32,
                len: ext * n,
            },
            BufferSpec::Scratch {
                dtype: DType::U32,
                len: band,
            },
            BufferSpec::Scratch {
                dtype: DType::U32,
                len: items,
            },
            kept(DType::U32, 1),
            kept(DType::F64, band),
            kept(DType::F64, band),
            BufferSpec::Input(HostSlice::I32(&patches[0].1)),
            BufferSpec::Input(HostSlice::I32(&patches[1].1)),
            BufferSpec::Scratch {
                dtype: DType::U32,
                len: 1,
            },
        ]);
        let (axis, cross, eig) = self.flag_limits(p);
        let mut steps = vec![
            self.grid_launch(p, row0, ext),
            Step::Fill {
                buffer: buf::COUNTER,
                byte: 0,
            },
            Step::Launch(Launch {
                kernel: "lens_flag".into(),
                args: vec![
                    StepArg::Buffer(buf::GX),
                    StepArg::Buffer(buf::GY),
                    StepArg::I32(n as i32),
                    StepArg::I32(flag_rows as i32),
                    StepArg::I32(ext as i32),
                    StepArg::F32(self.pixel as f32),
                    StepArg::F32(axis),
                    StepArg::F32(cross),
                    StepArg::F32(eig),
                    StepArg::Buffer(buf::GX64),
                    StepArg::Buffer(buf::GY64),
                    StepArg::Buffer(buf::MASK),
                    StepArg::Buffer(buf::COUNTER),
                ],
                global: band,
                local: Local::Prefer(GPU_GROUP),
            }),
        ];
        if uses_patches(p) {
            for (k, (size, centres)) in patches.iter().enumerate() {
                let count = centres.len() / 2;
                if count == 0 {
                    continue;
                }
                steps.push(Step::Launch(Launch {
                    kernel: "lens_patch".into(),
                    args: vec![
                        StepArg::Buffer(if k == 0 { buf::CLUSTERS } else { buf::GALAXIES }),
                        StepArg::I32(count as i32),
                        StepArg::I32(*size),
                        StepArg::I32(n as i32),
                        StepArg::I32(row0 as i32),
                        StepArg::I32(flag_rows as i32),
                        StepArg::Buffer(buf::MASK),
                        StepArg::Buffer(buf::COUNTER),
                    ],
                    global: (*size as usize).pow(2) * count,
                    local: Local::Prefer(GPU_GROUP),
                }));
            }
        }
        steps.extend([
            Step::Fill {
                buffer: buf::ITEM_COUNTER,
                byte: 0,
            },
            Step::Launch(Launch {
                kernel: "lens_chunk".into(),
                args: vec![
                    StepArg::Buffer(buf::MASK),
                    StepArg::I32(n as i32),
                    StepArg::I32(flag_rows as i32),
                    StepArg::Buffer(buf::ITEMS),
                    StepArg::Buffer(buf::ITEM_COUNTER),
                ],
                global: items,
                local: Local::Prefer(GPU_GROUP),
            }),
            Step::Launch(Launch {
                kernel: "lens_recompute".into(),
                args: vec![
                    StepArg::Buffer(buf::ITEMS),
                    StepArg::Buffer(buf::ITEM_COUNTER),
                    StepArg::Buffer(buf::MASK),
                    StepArg::Buffer(buf::SIE64),
                    StepArg::I32(self.tables64.n_sie as i32),
                    StepArg::Buffer(buf::DPIE64),
                    StepArg::I32(self.tables64.n_dpie as i32),
                    StepArg::I32(n as i32),
                    StepArg::I32(row0 as i32),
                    StepArg::I32(flag_rows as i32),
                    StepArg::F64(self.pixel),
                    StepArg::Buffer(buf::GX64),
                    StepArg::Buffer(buf::GY64),
                ],
                global: RECOMPUTE_ITEMS.min(items),
                local: Local::Prefer(GPU_GROUP),
            }),
        ]);
        (buffers, steps)
    }
}

/// Hits one delensing band can hold; a band that finds more is an error (never silently truncated).
pub const MAX_HITS_PER_BAND: usize = 1 << 16;

impl LensProblem {
    /// Device jobs of one image-plane χ² evaluation (research/lens.md §2.5), one per band of rows: the
    /// error-budget mixed grid (float32, float64 where the magnification needs it) stays on the device,
    /// the float64 delensing kernel tests every cell's two triangles against every system's source, and
    /// only the hits come back. `sources` holds (β̄x, β̄y, scale) per system. (A float32 grid and
    /// delensing put or drop images at folds of the critical lines, where a source-plane triangle is
    /// smaller than the float32 error: at `hff`, one image 31″ away from any of the reference's.)
    pub fn chi2_jobs<'a>(
        &'a self,
        sources: &'a [f64],
        max_alloc: u64,
        mem: u64,
        warmup: u32,
        repeats: u32,
    ) -> Vec<(usize, KernelJob<'a>)> {
        // (first row, job) per band: the hits' row indices are band-relative.
        let n = self.n;
        // Per pixel of a band: two float32 and two float64 grids, the mask and the list.
        self.bands(8, 32, max_alloc, mem)
            .into_iter()
            .map(|(row0, rows)| {
                let ext = self.extended_rows(row0, rows);
                let (mut buffers, mut steps) =
                    self.mixed_pipeline(Precision::MixedBudget, row0, rows, false);
                let first = buffers.len();
                buffers.extend([
                    BufferSpec::Input(HostSlice::F64(sources)),
                    BufferSpec::Output {
                        dtype: DType::I32,
                        len: 4 * MAX_HITS_PER_BAND,
                    },
                    BufferSpec::Output {
                        dtype: DType::U32,
                        len: 1,
                    },
                ]);
                let (srcs, hits, count) = (first, first + 1, first + 2);
                steps.extend([
                    Step::Fill {
                        buffer: count,
                        byte: 0,
                    },
                    Step::Launch(Launch {
                        kernel: "lens_delens_f64".into(),
                        args: vec![
                            StepArg::Buffer(buf::GX64),
                            StepArg::Buffer(buf::GY64),
                            StepArg::I32(n as i32),
                            StepArg::I32(rows as i32),
                            StepArg::I32(ext as i32),
                            StepArg::F64(self.coord(0)),
                            StepArg::F64(self.coord(row0)),
                            StepArg::F64(self.pixel),
                            StepArg::Buffer(srcs),
                            StepArg::I32((sources.len() / 3) as i32),
                            StepArg::Buffer(hits),
                            StepArg::Buffer(count),
                            StepArg::U32(MAX_HITS_PER_BAND as u32),
                        ],
                        global: (n.max(2) - 1) * rows,
                        local: Local::Prefer(GPU_GROUP),
                    }),
                ]);
                (row0, lens_job(buffers, steps, warmup, repeats))
            })
            .collect()
    }
}

impl Workload for LensProblem {
    fn name(&self) -> &'static str {
        "lens"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn precisions(&self) -> Vec<Precision> {
        Precision::ALL.into_iter().chain(Precision::MIXED).collect()
    }
    fn describe(&self) -> String {
        format!(
            "{}² px at {:.4}″, {} halos ({} dPIE)",
            self.n,
            self.pixel,
            self.halos.len(),
            self.tables64.n_dpie
        )
    }
    fn work(&self) -> WorkCount {
        let units = (self.n * self.n) as f64 * self.halos.len() as f64;
        WorkCount {
            units,
            unit_name: "interactions",
            // research/lens.md §2.1: 15 flops + 1 rsqrt per halo-pixel in the quadratic form.
            flops: 16.0 * units,
            bytes: (self.n * self.n * 2) as f64 * 4.0,
        }
    }
    fn pipe_instructions(&self, precision: Precision) -> Option<f64> {
        // research/lens.md §5: 10 FP32-pipe instructions per interaction (+1 MUFU rsqrt, on its own pipe);
        // FP64 has no hardware rsqrt, about 18 DFMA-pipe instructions with the Newton steps. Mixed modes
        // are bounded by their float32 pass. (dPIE halos cost about 10× more; the floor assumes SIE.)
        Some(match precision.base() {
            Precision::F64 => 18.0,
            _ => 10.0,
        })
    }
    fn reference(&self) -> Field {
        self.cpu_grid(&self.tables64)
    }
    fn run_cpu(&self, precision: Precision) -> Field {
        match precision {
            Precision::F32 => self.cpu_grid(&self.tables32),
            Precision::F64 => self.cpu_grid(&self.tables64),
            _ => self.cpu_mixed(precision),
        }
    }
    fn plan(
        &self,
        precision: Precision,
        max_alloc: u64,
        mem: u64,
        warmup: u32,
        repeats: u32,
    ) -> DevicePlan<'_> {
        let jobs = if precision.is_mixed() {
            // Per pixel: two f32 scratch, mask, list, two f64 outputs.
            self.bands(8, 32, max_alloc, mem)
                .into_iter()
                .map(|(row0, rows)| self.mixed_job(precision, row0, rows, warmup, repeats))
                .collect()
        } else {
            let dtype = if precision == Precision::F64 {
                DType::F64
            } else {
                DType::F32
            };
            self.bands(dtype.bytes(), 2 * dtype.bytes(), max_alloc, mem)
                .into_iter()
                .map(|(row0, rows)| {
                    let mut buffers = self.table_buffers(&self.tables32);
                    buffers.extend([
                        BufferSpec::Output {
                            dtype,
                            len: rows * self.n,
                        },
                        BufferSpec::Output {
                            dtype,
                            len: rows * self.n,
                        },
                    ]);
                    lens_job(
                        buffers,
                        vec![self.grid_launch(precision, row0, rows)],
                        warmup,
                        repeats,
                    )
                })
                .collect()
        };
        DevicePlan { jobs }
    }
    fn assemble(&self, outputs: Vec<Vec<HostVec>>) -> Field {
        let mut gx = Vec::with_capacity(self.n * self.n);
        let mut gy = Vec::with_capacity(self.n * self.n);
        let mut recomputed = None;
        for band in outputs {
            // Mixed jobs return [counter, gx, gy]; plain jobs [gx, gy].
            let at = band.len() - 2;
            if at == 1 {
                *recomputed.get_or_insert(0.0) += band[0].to_f64()[0];
            }
            gx.extend(band[at].to_f64());
            gy.extend(band[at + 1].to_f64());
        }
        let mut field = Field::new(vec![gx, gy]);
        if let Some(count) = recomputed {
            field.stats.push((
                "recomputed_fraction".into(),
                count / (self.n * self.n) as f64,
            ));
        }
        field
    }
    fn compare(&self, result: &Field, reference: &Field, precision: Precision) -> Accuracy {
        let (max_abs, max_rel, rms_abs, non_finite) = vector_errors(result, reference);
        let complete = result.components.iter().all(|c| c.len() == self.n * self.n);
        let tol_f32 = if self.tables64.n_dpie > 0 {
            TOL_F32_ABS_DPIE
        } else {
            TOL_F32_ABS
        };
        let (tolerance_abs, tolerance_rel) = match precision {
            Precision::F64 => (f64::INFINITY, TOL_F64_REL),
            _ => (tol_f32, f64::INFINITY),
        };
        let (budget_worst, over_budget) = if complete {
            self.budget(result, reference)
        } else {
            (f64::NAN, 0)
        };
        // Mixed modes promise the paper's budget everywhere; plain float32 only reports it.
        let budget_ok = !precision.is_mixed() || over_budget == 0;
        Accuracy {
            max_abs,
            max_rel,
            rms_abs,
            non_finite,
            tolerance_abs,
            tolerance_rel,
            unit: "arcsec",
            pass: complete
                && non_finite == 0
                && max_abs <= tolerance_abs
                && max_rel <= tolerance_rel
                && budget_ok,
            extra: {
                let mut extra = vec![
                    ("budget_worst_ratio".into(), budget_worst),
                    ("pixels_over_budget".into(), over_budget as f64),
                ];
                if precision == Precision::MixedBudget {
                    extra.push(("flag_magnification".into(), self.budget_magnification()));
                    extra.push(("f32_error_estimate".into(), self.f32_error_estimate()));
                }
                extra
            },
        }
    }
}
