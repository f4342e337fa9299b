//! Gravitational-lens deflection gradient (seed 000, Rexroth et al. 2020; research/lens.md §2-3).
//!
//! The gradient of many pseudo-elliptical SIS halos (LENSTOOL type 5) summed at every pixel of a square
//! grid. Halos are SoA; each halo's strength b comes from its velocity dispersion and D_LS/D_S of flat
//! ΛCDM; the float32 path forms centre offsets exactly (integer pixel + float64 remainder) so it has no
//! cancellation near halo centres.

pub mod io;

use super::{vector_errors, Accuracy, DevicePlan, Field, WorkCount, Workload};
use crate::backend::{DType, HostSlice, HostVec, KernelArg, KernelJob, Precision, Program};
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
        ("lens_sie.h", include_str!("../../../cl/common/lens_sie.h")),
    ],
};

pub const C_KMS: f64 = 299_792.458;
pub const ARCSEC_PER_RAD: f64 = 180.0 * 3600.0 / std::f64::consts::PI;
/// Seed of the halo catalogue (the paper's article number, A&C 30, 100340).
pub const DEFAULT_SEED: u64 = 100_340;

/// Work-group size used on GPUs (a multiple of 32 and of 64).
const GPU_GROUP: usize = 256;

/// Pixels per work-item along x; must equal LENS_PIXELS_PER_ITEM in cl/common/lens_sie.h (tested).
pub const PIXELS_PER_ITEM: usize = 4;

/// Float32 tolerance on |Δg| in arcsec: 1/300 of an HFF pixel. Float64: relative.
pub const TOL_F32_ABS: f64 = 1e-4;
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

/// Halos as structure of arrays. `b` already includes D_LS/D_S; `e` is the potential ellipticity;
/// `theta` the position angle in radians, counter-clockwise from +x.
#[derive(Debug, Clone, Default)]
pub struct Halos {
    pub x0: Vec<f64>,
    pub y0: Vec<f64>,
    pub b: Vec<f64>,
    pub e: Vec<f64>,
    pub theta: Vec<f64>,
}

impl Halos {
    pub fn len(&self) -> usize {
        self.x0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.x0.is_empty()
    }
    pub fn push(&mut self, x0: f64, y0: f64, b: f64, e: f64, theta: f64) {
        self.x0.push(x0);
        self.y0.push(y0);
        self.b.push(b);
        self.e.push(e);
        self.theta.push(theta);
    }
    /// N = b·Rᵀ diag(1−e, 1+e) R·b, so that g = N d / sqrt(dᵀ N d).
    pub fn quad_form(&self, k: usize) -> (f64, f64, f64) {
        let (c, s) = (self.theta[k].cos(), self.theta[k].sin());
        let (e, b2) = (self.e[k], self.b[k] * self.b[k]);
        let m11 = (1.0 - e) * c * c + (1.0 + e) * s * s;
        let m12 = -2.0 * e * c * s;
        let m22 = (1.0 - e) * s * s + (1.0 + e) * c * c;
        (b2 * m11, b2 * m12, b2 * m22)
    }
}

/// The f64 gradient at an arbitrary point, in the textbook form of research/lens.md §2.1 (rotate, divide,
/// rotate back). Independent of the grid code; checked against the mpmath oracle in tests.
pub fn gradient_at(halos: &Halos, x: f64, y: f64) -> (f64, f64) {
    let (mut gx, mut gy) = (0.0, 0.0);
    for k in 0..halos.len() {
        let (c, s) = (halos.theta[k].cos(), halos.theta[k].sin());
        let (dx, dy) = (x - halos.x0[k], y - halos.y0[k]);
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

/// Halo parameters laid out for the kernels of one precision (SoA, exact offsets).
#[derive(Debug, Clone, Default)]
pub struct KernelHalos<T> {
    pub n11: Vec<T>,
    pub n12: Vec<T>,
    pub n22: Vec<T>,
    pub ix: Vec<i32>,
    pub iy: Vec<i32>,
    pub fx: Vec<T>,
    pub fy: Vec<T>,
}

impl<T> KernelHalos<T>
where
    for<'a> HostSlice<'a>: From<&'a [T]>,
{
    /// The halo arguments of the lens kernels, in signature order: n11, n12, n22, ix, iy, fx, fy.
    fn args(&self) -> [KernelArg<'_>; 7] {
        fn input<'a, T>(v: &'a [T]) -> KernelArg<'a>
        where
            HostSlice<'a>: From<&'a [T]>,
        {
            KernelArg::Input(HostSlice::from(v))
        }
        [
            input(&self.n11),
            input(&self.n12),
            input(&self.n22),
            KernelArg::Input(HostSlice::I32(&self.ix)),
            KernelArg::Input(HostSlice::I32(&self.iy)),
            input(&self.fx),
            input(&self.fy),
        ]
    }
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
}

/// A fully specified lens-gradient problem.
#[derive(Debug, Clone)]
pub struct LensProblem {
    pub preset: String,
    pub n: usize,
    pub pixel: f64,
    pub cosmology: Cosmology,
    pub dls_ds: f64,
    /// Halos in kernel order: ascending strength, so float32 sums the small galaxy terms before adding
    /// the two large cluster terms (less rounding in the accumulator).
    pub halos: Halos,
    f32_halos: KernelHalos<f32>,
    f64_halos: KernelHalos<f64>,
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
        let mut order: Vec<usize> = (0..halos.len()).collect();
        order.sort_by(|&a, &b| halos.b[a].total_cmp(&halos.b[b]));
        let mut sorted = Halos::default();
        for &k in &order {
            sorted.push(
                halos.x0[k],
                halos.y0[k],
                halos.b[k],
                halos.e[k],
                halos.theta[k],
            );
        }
        let mut p = LensProblem {
            preset: preset.to_string(),
            n,
            pixel,
            cosmology,
            dls_ds: cosmology.dls_over_ds(),
            halos: sorted,
            f32_halos: KernelHalos::default(),
            f64_halos: KernelHalos::default(),
            device_mem_limit: None,
        };
        p.f32_halos = p.kernel_halos(|v| v as f32);
        p.f64_halos = p.kernel_halos(|v| v);
        Ok(p)
    }

    /// Pixel centre coordinate of index i (same for x and y): the grid is centred on 0.
    pub fn coord(&self, i: usize) -> f64 {
        (i as f64 - (self.n as f64 - 1.0) / 2.0) * self.pixel
    }

    /// Splits a halo centre into the nearest pixel index and the float64 remainder x(i_k) − x0.
    fn exact_offset(&self, x0: f64) -> (i32, f64) {
        let centre = (self.n as f64 - 1.0) / 2.0;
        let ik = (x0 / self.pixel + centre).round();
        (ik as i32, (ik - centre) * self.pixel - x0)
    }

    fn kernel_halos<T>(&self, cast: impl Fn(f64) -> T) -> KernelHalos<T> {
        let mut out = KernelHalos {
            n11: vec![],
            n12: vec![],
            n22: vec![],
            ix: vec![],
            iy: vec![],
            fx: vec![],
            fy: vec![],
        };
        for k in 0..self.halos.len() {
            let (a, b, c) = self.halos.quad_form(k);
            let (ix, fx) = self.exact_offset(self.halos.x0[k]);
            let (iy, fy) = self.exact_offset(self.halos.y0[k]);
            out.n11.push(cast(a));
            out.n12.push(cast(b));
            out.n22.push(cast(c));
            out.ix.push(ix);
            out.iy.push(iy);
            out.fx.push(cast(fx));
            out.fy.push(cast(fy));
        }
        out
    }

    /// Rows of one device band so that each output buffer fits `max_alloc` and both fit 80 % of `mem`
    /// (or of `device_mem_limit` when lower): grids larger than the device are tiled, not refused.
    pub fn band_rows(&self, elem: usize, max_alloc: u64, mem: u64) -> usize {
        let mut mem = if mem == 0 { u64::MAX } else { mem };
        if let Some(limit) = self.device_mem_limit {
            mem = mem.min(limit);
        }
        let row_bytes = (self.n * elem) as u64;
        let by_alloc = max_alloc.max(row_bytes) / row_bytes;
        let by_mem = ((mem as f64 * 0.8) as u64 / (2 * row_bytes)).max(1);
        (by_alloc.min(by_mem) as usize).clamp(1, self.n)
    }

    fn cpu_grid<T: Real>(&self, h: &KernelHalos<T>) -> Field {
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
                for k in 0..h.n11.len() {
                    let dy = T::from_i32(j as i32 - h.iy[k]) * pixel + h.fy[k];
                    let (n11, n12, n22, ik, fx) = (h.n11[k], h.n12[k], h.n22[k], h.ix[k], h.fx[k]);
                    // Same arithmetic as cl/common/lens_sie.h, written so this loop vectorises.
                    for (i, (sx, sy)) in ax.iter_mut().zip(ay.iter_mut()).enumerate() {
                        let dx = T::from_i32(i as i32 - ik) * pixel + fx;
                        let mx = n11 * dx + n12 * dy;
                        let my = n12 * dx + n22 * dy;
                        let q = dx * mx + dy * my;
                        let r = if q > T::ZERO {
                            T::ONE / q.sqrt()
                        } else {
                            T::ZERO
                        };
                        *sx = *sx + mx * r;
                        *sy = *sy + my * r;
                    }
                }
                for i in 0..n {
                    gx_row[i] = ax[i].to_f64();
                    gy_row[i] = ay[i].to_f64();
                }
            });
        Field {
            components: vec![gx, gy],
        }
    }
}

/// The two floating types of the CPU path.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn from_i32(v: i32) -> Self;
    fn to_f64(self) -> f64;
    fn sqrt(self) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_i32(v: i32) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_i32(v: i32) -> Self {
        v as f64
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
}

impl Workload for LensProblem {
    fn name(&self) -> &'static str {
        "lens"
    }
    fn preset(&self) -> &str {
        &self.preset
    }
    fn describe(&self) -> String {
        format!(
            "{}² px at {:.4}″, {} halos",
            self.n,
            self.pixel,
            self.halos.len()
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
        // FP64 has no hardware rsqrt, about 18 DFMA-pipe instructions with the Newton steps.
        Some(match precision {
            Precision::F32 => 10.0,
            Precision::F64 => 18.0,
        })
    }
    fn reference(&self) -> Field {
        self.cpu_grid(&self.f64_halos)
    }
    fn run_cpu(&self, precision: Precision) -> Field {
        match precision {
            Precision::F32 => self.cpu_grid(&self.f32_halos),
            Precision::F64 => self.cpu_grid(&self.f64_halos),
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
        let (dtype, halo_args) = match precision {
            Precision::F32 => (DType::F32, self.f32_halos.args()),
            Precision::F64 => (DType::F64, self.f64_halos.args()),
        };
        let band = self.band_rows(dtype.bytes(), max_alloc, mem);
        let mut jobs = Vec::new();
        let mut row0 = 0;
        while row0 < self.n {
            let rows = band.min(self.n - row0);
            let len = rows * self.n;
            let mut args = halo_args.to_vec();
            args.extend([
                KernelArg::I32(self.halos.len() as i32),
                KernelArg::I32(self.n as i32),
                KernelArg::I32(row0 as i32),
                KernelArg::I32(rows as i32),
                KernelArg::real(precision, self.pixel),
                KernelArg::Output { dtype, len },
                KernelArg::Output { dtype, len },
            ]);
            jobs.push(KernelJob::single(
                &PROGRAM,
                vec![
                    ("ASTRO_REAL".into(), precision.c_type().into()),
                    ("ASTRO_SUFFIX".into(), precision.name().into()),
                ],
                format!("lens_sie_grad_{}", precision.name()),
                args,
                rows * self.n.div_ceil(PIXELS_PER_ITEM),
                Some(GPU_GROUP),
                warmup,
                repeats,
            ));
            row0 += rows;
        }
        DevicePlan { jobs }
    }
    fn assemble(&self, outputs: Vec<Vec<HostVec>>) -> Field {
        let mut gx = Vec::with_capacity(self.n * self.n);
        let mut gy = Vec::with_capacity(self.n * self.n);
        for band in outputs {
            gx.extend(band[0].to_f64());
            gy.extend(band[1].to_f64());
        }
        Field {
            components: vec![gx, gy],
        }
    }
    fn compare(&self, result: &Field, reference: &Field, precision: Precision) -> Accuracy {
        let (max_abs, max_rel, rms_abs, non_finite) = vector_errors(result, reference);
        let complete = result.components.iter().all(|c| c.len() == self.n * self.n);
        let (tolerance_abs, tolerance_rel) = match precision {
            Precision::F32 => (TOL_F32_ABS, f64::INFINITY),
            Precision::F64 => (f64::INFINITY, TOL_F64_REL),
        };
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
                && max_rel <= tolerance_rel,
        }
    }
}
