//! The `cpu` model's lens grid: the same arithmetic as cl/common/lens_model.h in Rust, written so the SIE
//! loop vectorises, generic over f32 and f64; and the mixed-precision schemes (flags and float64 recompute)
//! as cl/common/lens_mixed.h does them.

use super::mixed::{LensMode, MixedScheme};
use super::model::{dpie_deflection, Real};
use super::tables::{KernelTables, DPIE_STRIDE, SIE_STRIDE};
use super::LensProblem;
use crate::exec::Field;
use rayon::prelude::*;

impl LensProblem {
    /// The `cpu` model's grid in one mode.
    pub(super) fn cpu_run(&self, mode: LensMode) -> Field {
        match mode {
            LensMode::F32 => self.cpu_grid(&self.tables32),
            LensMode::F64 => self.cpu_grid(&self.tables64),
            LensMode::Mixed(scheme) => self.cpu_mixed(scheme),
            LensMode::Split => self.cpu_split(),
        }
    }

    /// The grid on the CPU in precision T, from tables of that precision: the same arithmetic as
    /// cl/common/lens_model.h, with the SIE loop written so it vectorises.
    pub(super) fn cpu_grid<T: Real>(&self, t: &KernelTables<T>) -> Field {
        let n = self.n;
        let pixel = T::from_f64(self.pixel);
        let mut gx = vec![0.0f64; n * n];
        let mut gy = vec![0.0f64; n * n];
        gx.par_chunks_mut(n)
            .zip(gy.par_chunks_mut(n))
            .enumerate()
            .for_each(|(j, (gx_row, gy_row))| {
                // Whole vectors of eight lanes: a remainder loop costs as much as several vectors
                // (the split's second lattice is 73 nodes wide).
                let mut ax = vec![T::ZERO; n.next_multiple_of(8)];
                let mut ay = vec![T::ZERO; n.next_multiple_of(8)];
                for p in t.sie.chunks_exact(SIE_STRIDE) {
                    add_sie_along_row::<true, T>(p, t.exact_offsets, j as i32, 0, &mut ax, &mut ay);
                }
                for p in t.dpie.chunks_exact(DPIE_STRIDE) {
                    add_dpie_along_row::<true, T>(p, pixel, j as i32, 0, &mut ax, &mut ay);
                }
                for i in 0..n {
                    gx_row[i] = ax[i].to_f64();
                    gy_row[i] = ay[i].to_f64();
                }
            });
        Field::new(vec![gx, gy])
    }

    /// Float64 deflection at several pixels (flat indices) from the float64 tables (the recompute of
    /// flagged pixels): each pixel sums the halos in table order; the arithmetic vectorises over pixels.
    fn points64(&self, pixels: &[usize]) -> [Vec<f64>; 2] {
        let (t, n, h) = (&self.tables64, self.n, self.pixel);
        let fi: Vec<f64> = pixels.iter().map(|&p| (p % n) as f64).collect();
        let fj: Vec<f64> = pixels.iter().map(|&p| (p / n) as f64).collect();
        let (mut ax, mut ay) = (vec![0.0; pixels.len()], vec![0.0; pixels.len()]);
        for p in t.sie.chunks_exact(SIE_STRIDE) {
            for (q, (sx, sy)) in ax.iter_mut().zip(ay.iter_mut()).enumerate() {
                let (dx, dy) = ((fi[q] - p[5]) + p[3], (fj[q] - p[6]) + p[4]);
                let (gx, gy) = SieRow::deflection_at_point(p[0], p[1], p[2], dx, dy);
                *sx += gx;
                *sy += gy;
            }
        }
        for p in t.dpie.chunks_exact(DPIE_STRIDE) {
            for (q, (sx, sy)) in ax.iter_mut().zip(ay.iter_mut()).enumerate() {
                let (a, b) =
                    dpie_from_table((fi[q] - p[11]) * h + p[9], (fj[q] - p[12]) * h + p[10], p);
                *sx += a;
                *sy += b;
            }
        }
        [ax, ay]
    }

    /// Mixed precision on the CPU: the float32 grid, the δ flags (in float32 arithmetic, as the kernels),
    /// optional patches, and a float64 recompute of every flagged pixel.
    fn cpu_mixed(&self, scheme: MixedScheme) -> Field {
        let t32 = self.f32_tables(LensMode::Mixed(scheme));
        let mut field = self.cpu_grid(t32);
        let mask = self.flags(&field, scheme);
        self.recompute(&mut field, &mask);
        field
    }

    /// Recomputes the pixels of `mask` in float64 and records their fraction (`recomputed_fraction`).
    pub(super) fn recompute(&self, field: &mut Field, mask: &[bool]) {
        let listed: Vec<usize> = (0..mask.len()).filter(|&p| mask[p]).collect();
        self.recompute_listed(field, &listed);
    }

    /// Recomputes the listed pixels (flat indices) in float64 and records their fraction
    /// (`recomputed_fraction`).
    pub(super) fn recompute_listed(&self, field: &mut Field, listed: &[usize]) {
        let n = self.n;
        // 64 pixels at a time (points64).
        let values: Vec<[Vec<f64>; 2]> = listed
            .par_chunks(64)
            .map(|chunk| self.points64(chunk))
            .collect();
        for (chunk, [ax, ay]) in listed.chunks(64).zip(values) {
            for (k, &p) in chunk.iter().enumerate() {
                field.components[0][p] = ax[k];
                field.components[1][p] = ay[k];
            }
        }
        field.stats.push((
            "recomputed_fraction".into(),
            listed.len() as f64 / (n * n) as f64,
        ));
    }

    /// Pixels to recompute in float64: the scheme's criteria on the float32 grid (as lens_flag_item in
    /// cl/common/lens_mixed.h), plus the fixed patches.
    fn flags(&self, g32: &Field, scheme: MixedScheme) -> Vec<bool> {
        let n = self.n;
        let h = self.pixel as f32;
        let (axis, cross, eig) = self.flag_limits(scheme);
        let (gx, gy) = (&g32.components[0], &g32.components[1]);
        let at = |c: &Vec<f64>, p: usize| c[p] as f32;
        let mut mask: Vec<bool> = (0..n * n)
            .into_par_iter()
            .map(|p| {
                let (i, j) = (p % n, p / n);
                let mut flagged = false;
                if n > 1 {
                    let ((px, sx), (py, sy)) = difference_neighbours(i, j, n);
                    let (sx, sy) = (sx as f32, sy as f32);
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
        if scheme.uses_patches() {
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
}

/// For the grid's finite differences at pixel (i, j) of an n × n grid (n ≥ 2): the neighbour along x and
/// along y (forward, or backward on the last column or row) as a flat index, with the sign that makes the
/// difference a forward one.
pub(super) fn difference_neighbours(i: usize, j: usize, n: usize) -> ((usize, f64), (usize, f64)) {
    let p = j * n + i;
    let x = if i + 1 < n {
        (p + 1, 1.0)
    } else {
        (p - 1, -1.0)
    };
    let y = if j + 1 < n {
        (p + n, 1.0)
    } else {
        (p - n, -1.0)
    };
    (x, y)
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
    fn deflection_at(&self, x: T) -> (T, T) {
        let mx = self.n11 * x + self.mx0;
        let my = self.n12 * x + self.my0;
        let q = (self.n11 * x + self.b1) * x + self.q0;
        Self::scaled(mx, my, q)
    }

    /// The deflection at offset (dx, dy) alone (each point its own row): algebraically `new(…, 0, dy)`
    /// then `deflection_at(dx)` (q = dx·mx + dy·my, rounded differently by a few ulp), without the row
    /// terms' multiplies by zero, about a third of the arithmetic per point and halo.
    #[inline(always)]
    fn deflection_at_point(n11: T, n12: T, n22: T, dx: T, dy: T) -> (T, T) {
        let (mx, my) = (n11 * dx + n12 * dy, n12 * dx + n22 * dy);
        Self::scaled(mx, my, dx * mx + dy * my)
    }

    /// (mx, my)/√q, q kept off zero.
    #[inline(always)]
    fn scaled(mx: T, my: T, q: T) -> (T, T) {
        let r = T::ONE / q.max(T::from_f64(1e-37)).sqrt();
        (mx * r, my * r)
    }
}

/// Adds one SIE halo (its kernel-table row `p`) at pixels i0 .. i0 + ax.len() of row j (either may lie
/// outside the grid): the grid's loop, which vectorises. With ADD false its values replace what `ax` and
/// `ay` held (a strip made for one halo needs no zeroing first).
#[inline(always)]
pub(super) fn add_sie_along_row<const ADD: bool, T: Real>(
    p: &[T],
    exact_offsets: bool,
    j: i32,
    i0: i32,
    ax: &mut [T],
    ay: &mut [T],
) {
    debug_assert_eq!(ax.len(), ay.len(), "x and y rows of one length");
    let (dy, first) = sie_row_origin(p, j, i0);
    let pixels = ax.iter_mut().zip(ay.iter_mut()).enumerate();
    // Where fx goes: into the row terms (exact tables) or into x (naive tables).
    if exact_offsets {
        let row = sie_exact_row(p, dy);
        for (k, (sx, sy)) in pixels {
            let (gx, gy) = row.deflection_at(first + T::from_i32(k as i32));
            (*sx, *sy) = accumulated::<ADD, T>((*sx, *sy), (gx, gy));
        }
    } else {
        let (n11, n12, n22, fx) = (p[0], p[1], p[2], p[3]);
        let row = SieRow::new(n11, n12, n22, T::ZERO, dy);
        for (k, (sx, sy)) in pixels {
            let (gx, gy) = row.deflection_at((first + T::from_i32(k as i32)) + fx);
            (*sx, *sy) = accumulated::<ADD, T>((*sx, *sy), (gx, gy));
        }
    }
}

/// Row j of an SIE's kernel-table row `p` from pixel i0: its y offset and pixel i0's x offset, both before
/// the fractional x offset fx (exact tables put it in the row terms, naive ones into x). The row loop and
/// the point loop ([`halos_at_points`]) both start here, so their values agree to the bit.
#[inline(always)]
fn sie_row_origin<T: Real>(p: &[T], j: i32, i0: i32) -> (T, T) {
    ((T::from_i32(j) - p[6]) + p[4], T::from_i32(i0) - p[5])
}

/// The row terms of an exact-offset SIE table row `p` at y offset dy.
#[inline(always)]
fn sie_exact_row<T: Real>(p: &[T], dy: T) -> SieRow<T> {
    SieRow::new(p[0], p[1], p[2], p[3], dy)
}

/// Row j of a dPIE's kernel-table row `p` from pixel i0: its y offset (arcsec) and pixel i0's x offset
/// (pixels); pixel i0 + k of the row is at [`dpie_at_offset`] of `first + k`.
#[inline(always)]
fn dpie_row_origin<T: Real>(p: &[T], pixel: T, j: i32, i0: i32) -> (T, T) {
    (
        (T::from_i32(j) - p[12]) * pixel + p[10],
        T::from_i32(i0) - p[11],
    )
}

/// A dPIE's deflection at x offset `x` (pixels) on a row of y offset dy.
#[inline(always)]
fn dpie_at_offset<T: Real>(p: &[T], pixel: T, dy: T, x: T) -> (T, T) {
    dpie_from_table(x * pixel + p[9], dy, p)
}

/// Sets pixels 0 .. ax.len() of row j to the sum of every halo of tables `t` (exact offsets; SIE rows, then
/// dPIE rows, in that order), starting from the first halo's values rather than from zero, so the rows
/// need no zeroing first (with no halos they are left as they are): the split's clusters along a row, as
/// its grid pass sums them.
#[inline(always)]
pub(super) fn halos_along_row<T: Real>(
    t: &KernelTables<T>,
    pixel: T,
    j: i32,
    ax: &mut [T],
    ay: &mut [T],
) {
    for k in 0..t.n_sie + t.n_dpie {
        if k == 0 {
            add_halo_along_row::<false, T>(t, k, pixel, j, 0, ax, ay);
        } else {
            add_halo_along_row::<true, T>(t, k, pixel, j, 0, ax, ay);
        }
    }
}

/// Every halo of tables `t` (exact offsets; SIE rows, then dPIE rows, summed in that order from zero) at
/// the pixels (i[q], j[q]): each pixel the row loops' arithmetic for a row of one pixel from the same
/// helpers (`sie_row_origin`, `dpie_row_origin`, with i0 = i: the whole rows' values to the bit, since
/// integer offsets are exact), as a loop over the points that vectorises.
pub(super) fn halos_at_points<T: Real>(
    t: &KernelTables<T>,
    pixel: T,
    i: &[i32],
    j: &[i32],
) -> [Vec<T>; 2] {
    assert_eq!(i.len(), j.len(), "one row per column index");
    assert!(t.exact_offsets, "points need exact-offset tables");
    let (mut ax, mut ay) = (vec![T::ZERO; i.len()], vec![T::ZERO; i.len()]);
    // Zipped, so the loops carry no bounds checks and vectorise.
    let points = || i.iter().zip(j);
    for p in t.sie.chunks_exact(SIE_STRIDE) {
        for ((&i, &j), (sx, sy)) in points().zip(ax.iter_mut().zip(ay.iter_mut())) {
            let (dy, first) = sie_row_origin(p, j, i);
            let (gx, gy) = sie_exact_row(p, dy).deflection_at(first + T::from_i32(0));
            (*sx, *sy) = (*sx + gx, *sy + gy);
        }
    }
    for p in t.dpie.chunks_exact(DPIE_STRIDE) {
        for ((&i, &j), (sx, sy)) in points().zip(ax.iter_mut().zip(ay.iter_mut())) {
            let (dy, first) = dpie_row_origin(p, pixel, j, i);
            let (gx, gy) = dpie_at_offset(p, pixel, dy, first + T::from_i32(0));
            (*sx, *sy) = (*sx + gx, *sy + gy);
        }
    }
    [ax, ay]
}

/// `sum + term` (ADD) or `term`.
#[inline(always)]
fn accumulated<const ADD: bool, T: Real>(sum: (T, T), term: (T, T)) -> (T, T) {
    if ADD {
        (sum.0 + term.0, sum.1 + term.1)
    } else {
        term
    }
}

/// Adds halo k of a pair of tables with exact offsets (SIE rows first, then dPIE rows; pixel `pixel`) at
/// pixels i0 .. i0 + ax.len() of row j; with ADD false its values replace theirs.
#[inline(always)]
pub(super) fn add_halo_along_row<const ADD: bool, T: Real>(
    t: &KernelTables<T>,
    k: usize,
    pixel: T,
    j: i32,
    i0: i32,
    ax: &mut [T],
    ay: &mut [T],
) {
    match k.checked_sub(t.n_sie) {
        None => {
            add_sie_along_row::<ADD, T>(&t.sie[k * SIE_STRIDE..][..SIE_STRIDE], true, j, i0, ax, ay)
        }
        Some(d) => add_dpie_along_row::<ADD, T>(
            &t.dpie[d * DPIE_STRIDE..][..DPIE_STRIDE],
            pixel,
            j,
            i0,
            ax,
            ay,
        ),
    }
}

/// Adds one dPIE halo (its kernel-table row `p`) at pixels i0 .. i0 + ax.len() of row j; with ADD false
/// its values replace theirs.
#[inline(always)]
pub(super) fn add_dpie_along_row<const ADD: bool, T: Real>(
    p: &[T],
    pixel: T,
    j: i32,
    i0: i32,
    ax: &mut [T],
    ay: &mut [T],
) {
    debug_assert_eq!(ax.len(), ay.len(), "x and y rows of one length");
    let (dy, first) = dpie_row_origin(p, pixel, j, i0);
    for (k, (sx, sy)) in ax.iter_mut().zip(ay.iter_mut()).enumerate() {
        let term = dpie_at_offset(p, pixel, dy, first + T::from_i32(k as i32));
        (*sx, *sy) = accumulated::<ADD, T>((*sx, *sy), term);
    }
}

/// One dPIE halo from its table row (see cl/common/lens_model.h for the fields).
fn dpie_from_table<T: Real>(dx: T, dy: T, p: &[T]) -> (T, T) {
    dpie_deflection(dx, dy, p[0], p[1], p[2], p[8], p[6], p[7])
}
