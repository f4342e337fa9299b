//! The lens's numeric modes: plain float32 and float64, and the mixed-precision schemes (a float32 grid,
//! with float64 recomputed where a criterion flags the pixel), after Rexroth et al. 2020, "High Performance
//! Computing for gravitational lens modeling: single vs double precision on GPUs and CPUs" (Astronomy and
//! Computing 30, 100340; §3), plus the error-budget scheme of our own. Also the paper's per-pixel error budget
//! that every mixed run is checked against.

use super::io::HaloProfile;
use super::LensProblem;
use crate::backend::Precision;
use crate::exec::{Field, Mode};
use rayon::prelude::*;

/// A numeric mode of the lens grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LensMode {
    /// Float32 everywhere, offsets formed exactly (integer pixel plus remainder).
    F32,
    /// Float64 everywhere.
    F64,
    /// A float32 grid with float64 recomputed where the scheme flags a pixel.
    Mixed(MixedScheme),
    /// The near/far split (split.rs): galaxies through an interpolated coarse field with exact near
    /// terms, within the same error budget as `mixed-budget`; float64 arithmetic on the `cpu` model.
    Split,
}

/// The mixed-precision schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MixedScheme {
    /// Exact-offset float32 grid, float64 where the paper's δ1..δ4 criteria flag (no fixed patches):
    /// `mixed`.
    Delta,
    /// As `Delta` plus the paper's fixed float64 patches around halo centres: `mixed-patches`.
    DeltaPatches,
    /// The paper's scheme as published: naive float32 offsets (x − x0 in float32), δ criteria and
    /// patches: `mixed-paper`.
    Paper,
    /// Exact-offset float32 grid, float64 where the error budget needs it: where the axis or the largest
    /// directional magnification, estimated from the float32 grid, exceeds what the float32 error allows
    /// (ours; docs/lens.md): `mixed-budget`.
    Budget,
}

impl LensMode {
    pub const ALL: [LensMode; 7] = [
        LensMode::F32,
        LensMode::F64,
        LensMode::Mixed(MixedScheme::Delta),
        LensMode::Mixed(MixedScheme::DeltaPatches),
        LensMode::Mixed(MixedScheme::Paper),
        LensMode::Mixed(MixedScheme::Budget),
        LensMode::Split,
    ];
    pub const MIXED: [LensMode; 4] = [
        LensMode::Mixed(MixedScheme::Delta),
        LensMode::Mixed(MixedScheme::DeltaPatches),
        LensMode::Mixed(MixedScheme::Paper),
        LensMode::Mixed(MixedScheme::Budget),
    ];
    /// The error-budget scheme, the one the χ² uses.
    pub const BUDGET: LensMode = LensMode::Mixed(MixedScheme::Budget);

    /// The mixed scheme, if this mode is one.
    pub fn scheme(self) -> Option<MixedScheme> {
        match self {
            LensMode::Mixed(s) => Some(s),
            _ => None,
        }
    }
}

impl Mode for LensMode {
    fn name(self) -> &'static str {
        match self {
            LensMode::F32 => "f32",
            LensMode::F64 => "f64",
            LensMode::Mixed(MixedScheme::Delta) => "mixed",
            LensMode::Mixed(MixedScheme::DeltaPatches) => "mixed-patches",
            LensMode::Mixed(MixedScheme::Paper) => "mixed-paper",
            LensMode::Mixed(MixedScheme::Budget) => "mixed-budget",
            LensMode::Split => "split",
        }
    }
    /// Mixed schemes do nearly all their work in the float32 grid.
    fn precision(self) -> Precision {
        match self {
            LensMode::F64 | LensMode::Split => Precision::F64,
            _ => Precision::F32,
        }
    }
    /// Every mode but f32 needs float64 (the mixed ones for their recompute).
    fn needs_fp64(self) -> bool {
        self != LensMode::F32
    }
}

impl std::fmt::Display for LensMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LensMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        LensMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown lens mode '{s}' (expected f32, f64, mixed, mixed-patches, mixed-paper, mixed-budget or split)"
                )
            })
    }
}

impl MixedScheme {
    /// Whether the scheme adds the paper's fixed float64 patches around halo centres.
    pub fn uses_patches(self) -> bool {
        matches!(self, MixedScheme::DeltaPatches | MixedScheme::Paper)
    }
    /// Whether the float32 grid uses the paper's naive offsets instead of exact ones.
    pub fn naive_offsets(self) -> bool {
        self == MixedScheme::Paper
    }
}

/// The paper's fixed float64 patches (Rexroth et al. 2020, appendix A): 400 × 400 px around cluster halos and
/// 20 × 20 px around galaxies at 0.03″/px, i.e. 12″ and 0.6″ squares, kept in arcsec at other pixel
/// scales. A halo is a "cluster" halo when its strength b ≥ 2″ (σ ≳ 300 km/s).
pub const PATCH_CLUSTER_ARCSEC: f64 = 12.0;
pub const PATCH_GALAXY_ARCSEC: f64 = 0.6;
pub const CLUSTER_B_ARCSEC: f64 = 2.0;
/// δ criteria of Rexroth et al. 2020 §3.3 at 0.03″/px, scaled with the pixel size: axis |h − δ| < 0.0092″ (the
/// source-plane pixel shrank by more than 3.26×), cross |δ| > 0.0104″.
pub const AXIS_LIMIT_PER_PIXEL: f64 = 0.0092 / 0.03;
pub const CROSS_LIMIT_PER_PIXEL: f64 = 0.0104 / 0.03;
/// The paper's error budget: a quarter pixel (7.5e-3″ at 0.03″/px) divided by the axis magnification.
pub const BUDGET_PER_PIXEL: f64 = 0.25;
/// Estimated float32 error of the exact-offset grid per arcsec of the halos' largest deflections, in units
/// of the float32 unit roundoff 2^-24: SIE 8 (rsqrt's 2 ulp, the roundings of N·d and of the quadratic
/// form, and the accumulation; measured worst errors are at most half of this at `ci` and `hff`), dPIE 24
/// (the cancellation-free form of cl/common/lens_model.h: at most 17 in a sweep of ε from 2e-4 to 0.99,
/// 2–400″ and near both foci, plus the accumulation). An estimate, not a bound: every run checks the budget
/// at every pixel against float64.
pub const F32_ERROR_ULPS_SIE: f64 = 8.0;
pub const F32_ERROR_ULPS_DPIE: f64 = 24.0;
/// Safety factor of the error-budget scheme on top of the estimate and of the flags' own float32 error.
pub const BUDGET_SAFETY: f64 = 2.0;

impl LensProblem {
    /// The flag limits of a mixed scheme at this pixel scale, (axis, cross, eigenvalue) in arcsec and in
    /// float32 as the kernels use them (cl/common/lens_mixed.h). The paper's schemes: its δ limits, no
    /// eigenvalue test. The error-budget scheme: axis and eigenvalue limits h/M for the magnification M
    /// of [`Self::budget_magnification`], no cross-term test.
    pub(super) fn flag_limits(&self, scheme: MixedScheme) -> (f32, f32, f32) {
        let h = self.pixel;
        if scheme == MixedScheme::Budget {
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
        (0..self.halos.len()).map(|k| self.f32_error_of(k)).sum()
    }

    /// Halo k's share of [`Self::f32_error_estimate`], arcsec.
    pub fn f32_error_of(&self, k: usize) -> f64 {
        let unit = f64::from(f32::EPSILON) / 2.0;
        let h = &self.halos;
        unit * match h.profile[k] {
            HaloProfile::Sie => F32_ERROR_ULPS_SIE * h.b[k] * (1.0 + h.e[k]).sqrt(),
            HaloProfile::Dpie => F32_ERROR_ULPS_DPIE * h.b[k],
        }
    }

    /// The magnification above which the error-budget scheme recomputes a pixel in float64. A pixel of
    /// true magnification M may err by (h/4)/M; its float32 error is E (the estimate). Each entry of the
    /// mapping the flags measure is a difference of two values within E, so within 2E, and its eigenvalues
    /// are then within 4E of the true ones (Gershgorin): an unflagged pixel is within budget when
    /// h/M_flag ≥ 4E + 4E. M_flag = h / (6·E·BUDGET_SAFETY), at least 1, covers that 8E with the safety
    /// factor's margin of 1.5 (the 6 is the first reasoning's 4E + 2E, which counted the differences'
    /// error once; kept, since the factor of 2 covers it).
    pub fn budget_magnification(&self) -> f64 {
        let e = self.f32_error_estimate();
        (self.pixel / (6.0 * e * BUDGET_SAFETY)).max(1.0)
    }

    /// The fixed patches: (side in pixels, centres as integer pixel index pairs), clusters then galaxies.
    pub fn patches(&self) -> &[(i32, Vec<i32>); 2] {
        &self.patches
    }

    pub(super) fn patch_centres(&self) -> [(i32, Vec<i32>); 2] {
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
