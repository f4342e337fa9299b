//! Halo tables in the kernels' layout: one row of reals per halo (fields documented in
//! cl/common/lens_model.h), with each centre split exactly into a pixel index and a remainder.

use super::io::HaloProfile;
use super::mixed::LensMode;
use super::model::{dpie_scale, DPIE_CIRCULAR_EPS};
use super::LensProblem;

/// Reals per halo in the kernel tables; must equal LENS_SIE_STRIDE / LENS_DPIE_STRIDE (tested).
pub const SIE_STRIDE: usize = 8;
pub const DPIE_STRIDE: usize = 16;

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

impl LensProblem {
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

    /// The halos as kernel tables of type T; `naive` splits offsets as the paper's scheme does.
    pub(super) fn tables<T: Copy>(&self, cast: impl Fn(f64) -> T, naive: bool) -> KernelTables<T> {
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
                            1.0 / (1.0 + eps),
                            1.0 / (1.0 - eps),
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
    pub(super) fn f32_tables(&self, mode: LensMode) -> &KernelTables<f32> {
        if mode.scheme().is_some_and(|s| s.naive_offsets()) {
            &self.naive32
        } else {
            &self.tables32
        }
    }
}
