//! The near/far split of the lens grid (issue 17; docs/lens.md, "The near/far split"): its plan and bounds,
//! the `cpu` model's grid, and the lists the device kernels read (cl/common/lens_split.h, device.rs).
//!
//! Cluster halos are summed directly at every pixel. The galaxies' summed field G is evaluated on a coarse
//! grid of step H (s pixels) and interpolated to the pixels by tensor-product cubic Lagrange interpolation
//! (4 × 4 nodes). Within R of a galaxy that interpolant is wrong (the field turns on the scale of the
//! distance), so for every pixel within R of galaxy g the interpolant of g's own field is taken out and g's
//! exact deflection put in: α(p) = I[G](p) + Σ_{|p − g| ≤ R} (α_g(p) − I[α_g](p)) + Σ_clusters α_c(p), with
//! I[α_g] from g's values at the nodes around it (a table per galaxy on the devices; made per cell row on
//! the `cpu` model). What is left is the interpolation error of
//! the galaxies farther than R, bounded per coarse cell by Σ_g b_g·f(r_g/H), f the measured worst error of a
//! unit isothermal deflection at distance r (in cells). Pixels whose magnification needs more accuracy than
//! that bound leaves are recomputed directly, as `mixed-budget` does. The interpolation and the recompute are
//! float64 (on the `cpu` model each row's sum is then rounded to its direct parts' precision, a rounding the
//! estimate includes). The `cpu` model runs the coarse field, the clusters and the near terms in float32, or in float64
//! where float32's rounding would outweigh the far field (`SplitPlan::direct_f64`); the devices
//! run the clusters and the near terms in float64, the coarse field in float64 where the plan says so
//! (`SplitPlan::coarse_f64`). The float32 parts' estimated error joins the bound; each kind of machine has a
//! plan of its own ([`SplitModel`]).

use super::cpu::{add_halo_along_row, difference_neighbours, halos_along_row, halos_at_points};
use super::mixed::{BUDGET_SAFETY, CLUSTER_B_ARCSEC};
use super::model::{HaloEval, Halos};
use super::split_far::{FarLevel, BLOCK, LEBESGUE6};
use super::tables::KernelTables;
use super::LensProblem;
use crate::exec::Field;
use crate::real::Real;
use rayon::prelude::*;

/// Which machine a plan is made for: the weight of one near pixel against one coarse interaction differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitModel {
    /// The `cpu` model: near terms along row segments at the direct grid's vector speed (float32, or float64
    /// where the plan says so), the interpolant taken out once per cell (`Split::grid_into`).
    Cpu,
    /// The device kernels (cl/common/lens_split.h): the clusters in float64, the coarse lattice in float64
    /// when its float32 rounding would outweigh the far-field bound (`SplitPlan::coarse_f64`), per pixel a
    /// float64 exact term and its 16-node interpolant for each near galaxy.
    Device,
}

impl SplitModel {
    /// Cost of one near pixel of one galaxy against one interaction of the vectorised direct grid.
    /// Device: measured at `ci` on the first `cpu` version (scalar float64 near terms), and kept: the H200
    /// is within 3 % of its best there (docs/perf-notes.md). Cpu: measured at `ci`, the near terms along
    /// their cell-rounded row segments against the coarse lattice's 131-node rows (docs/perf-notes.md).
    fn near_cost(self) -> f64 {
        match self {
            SplitModel::Cpu => NEAR_COST_CPU,
            SplitModel::Device => 20.0,
        }
    }

    /// The far field's error target in units of the problem's float32 estimate. A larger target allows a
    /// coarser lattice and smaller near discs, and flags more pixels for the float64 recompute. Devices:
    /// 0.5, which keeps the plans of the H200 figures: the per-cell bound (since 2026-12-04) is about half
    /// the corner-node one they were chosen with at 1, and at 1 the `hff` dPIE plan moved to R = 4H, close
    /// to its target, and recomputed more (12.8 → 14.0 ms). Cpu: 3, measured at `ci` (1: 14.6 ms, 2: 11.6,
    /// 3: 11.2, 4: 11.8, 6: 11.2; rescanned with the per-cell bound: flat; docs/perf-notes.md).
    fn target_factor(self) -> f64 {
        match self {
            SplitModel::Cpu => 3.0,
            SplitModel::Device => 0.5,
        }
    }

    /// The near radii R/H the plan search tries, smallest first. The `cpu` model's list is finer: its
    /// near terms cost twice a coarse interaction, so k = 5 (between 4 and 6) is its best at `ci`.
    fn near_radii(self) -> &'static [f64] {
        match self {
            SplitModel::Cpu => &[
                2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0,
            ],
            SplitModel::Device => &[2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0],
        }
    }
}

/// The stat of the `cpu` split's field: the fraction of all pixels that were flagged but settled with
/// float64 clusters instead of recomputed ([`Split::settle_flagged`]); absent where that step does not run.
pub(super) const SETTLED_STAT: &str = "settled_fraction";

/// The `cpu` model's near cost (see [`SplitModel::near_cost`]).
const NEAR_COST_CPU: f64 = 2.0;

/// The share of the far-field target the `cpu` model's lattice leaves to its second level (split_far.rs).
const FAR_LEVEL_SHARE: f64 = 0.3;

/// The close radii D/H the `cpu` model's second level tries, smallest first (split_far.rs).
const FAR_LEVEL_RADII: [f64; 9] = [6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0, 24.0, 32.0];

/// Largest Σ|w| of the 4 × 4 cubic Lagrange weights (1.25 per axis, on the middle interval): how much the
/// interpolation can amplify an error of the node values.
const LEBESGUE: f64 = 1.5625;

/// Distances of the error table f, in cells: 0.25 apart up to this.
const F_TABLE_CELLS: f64 = 200.0;
const F_TABLE_STEP: f64 = 0.25;

/// The 4 Lagrange weights of nodes −1, 0, 1, 2 at fraction t of a cell.
#[inline]
fn lagrange(t: f64) -> [f64; 4] {
    [
        -t * (t - 1.0) * (t - 2.0) / 6.0,
        (t + 1.0) * (t - 1.0) * (t - 2.0) / 2.0,
        -(t + 1.0) * t * (t - 2.0) / 2.0,
        (t + 1.0) * t * (t - 1.0) / 6.0,
    ]
}

/// Tables without halos: a split's clusters or galaxies when a catalogue has none (grids write zeros).
static NO_HALOS32: KernelTables<f32> = KernelTables {
    sie: Vec::new(),
    dpie: Vec::new(),
    n_sie: 0,
    n_dpie: 0,
    exact_offsets: true,
};
static NO_HALOS64: KernelTables<f64> = KernelTables {
    sie: Vec::new(),
    dpie: Vec::new(),
    n_sie: 0,
    n_dpie: 0,
    exact_offsets: true,
};

/// The float32 tables of one of a split's sub-problems (clusters, galaxies, the coarse lattice), empty
/// tables when it has no halos.
pub(super) fn tables32(q: &Option<Box<LensProblem>>) -> &KernelTables<f32> {
    q.as_deref().map_or(&NO_HALOS32, |q| &q.tables32)
}

/// The precision the `cpu` model's split runs its direct parts in, and where its tables are.
pub(super) trait SplitReal: Real {
    fn tables(q: &Option<Box<LensProblem>>) -> &KernelTables<Self>;

    /// Copies `from` widened to float64 into `to` (the same length), past the caches where the target
    /// can ([`stream_into`], with this precision's load of four values).
    ///
    /// # Safety
    /// As [`stream_into`]: this thread must run [`stream_fence`] before any other access to `to`.
    unsafe fn stream_widened(to: &mut [f64], from: &[Self]);

    /// The split's per-cell flag limits in this precision ([`Split::make_cell_limits`]).
    fn cell_limits(split: &Split) -> &[[Self; 2]];
}

impl SplitReal for f32 {
    fn tables(q: &Option<Box<LensProblem>>) -> &KernelTables<f32> {
        tables32(q)
    }

    fn cell_limits(split: &Split) -> &[[f32; 2]] {
        &split.cell_limits32
    }

    unsafe fn stream_widened(to: &mut [f64], from: &[f32]) {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
        // SAFETY: the caller's; `stream_into` hands the load pointers to four values within `from`.
        unsafe {
            use std::arch::x86_64::{_mm256_cvtps_pd, _mm_loadu_ps};
            stream_into(to, from, |p| _mm256_cvtps_pd(_mm_loadu_ps(p)))
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
        widen(to, from);
    }
}

impl SplitReal for f64 {
    fn tables(q: &Option<Box<LensProblem>>) -> &KernelTables<f64> {
        tables64(q)
    }

    fn cell_limits(split: &Split) -> &[[f64; 2]] {
        &split.cell_limits
    }

    unsafe fn stream_widened(to: &mut [f64], from: &[f64]) {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
        // SAFETY: the caller's; `stream_into` hands the load pointers to four values within `from`.
        unsafe {
            stream_into(to, from, |p| std::arch::x86_64::_mm256_loadu_pd(p))
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
        widen(to, from);
    }
}

/// [`tables32`] in float64.
pub(super) fn tables64(q: &Option<Box<LensProblem>>) -> &KernelTables<f64> {
    q.as_deref().map_or(&NO_HALOS64, |q| &q.tables64)
}

/// Galaxy `galaxy` is near the pixel cells `first..=last` of a cell row (or close to the lattice blocks
/// `first..=last` of a block row, split_far.rs).
#[derive(Debug, Clone, Copy)]
pub(super) struct NearRun {
    pub(super) galaxy: usize,
    pub(super) first: usize,
    pub(super) last: usize,
}

/// The least distance from galaxy `g` to the rectangle [x_lo, x_hi] × [y_lo, y_hi] (a square root of the
/// squares, not `hypot`: the plan search takes it for every cell, galaxy and candidate, far from overflow).
pub(super) fn least_distance(
    g: &HaloEval,
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
) -> f64 {
    let (dx, dy) = (
        (x_lo - g.x0).max(g.x0 - x_hi).max(0.0),
        (y_lo - g.y0).max(g.y0 - y_hi).max(0.0),
    );
    (dx * dx + dy * dy).sqrt()
}

/// `count` points of a regular axis (`coord(i)`, `spacing` apart) taken in groups of `group`, the last maybe
/// short: the pixels in cells, or the coarse lattice's nodes in blocks (split_far.rs). It serves x and y.
pub(super) struct GroupedAxis<C> {
    pub(super) coord: C,
    pub(super) spacing: f64,
    pub(super) count: usize,
    pub(super) group: usize,
}

impl<C: Fn(usize) -> f64> GroupedAxis<C> {
    pub(super) fn groups(&self) -> usize {
        self.count.div_ceil(self.group)
    }

    /// The coordinates of group g's first and last points.
    pub(super) fn span(&self, g: usize) -> (f64, f64) {
        let last = ((g + 1) * self.group).min(self.count) - 1;
        ((self.coord)(g * self.group), (self.coord)(last))
    }

    /// Per row of groups, each galaxy within `radius` of some point of a group, as runs of the groups of
    /// the row it is within `radius` of (galaxies in their order).
    pub(super) fn runs_within(&self, galaxies: &[HaloEval], radius: f64) -> Vec<Vec<NearRun>> {
        let (origin, rows) = ((self.coord)(0), self.groups());
        let mut runs = vec![Vec::new(); rows];
        for (galaxy, g) in galaxies.iter().enumerate() {
            // The rows within `radius` of the galaxy (one more each side against rounding).
            let row_of = |y: f64| ((y - origin) / (self.spacing * self.group as f64)).floor();
            let c_lo = row_of(g.y0 - radius).max(1.0) as usize - 1;
            let c_hi = (row_of(g.y0 + radius) + 1.0).clamp(0.0, rows as f64) as usize;
            for (c, list) in runs.iter_mut().enumerate().take(c_hi).skip(c_lo) {
                let (y_lo, y_hi) = self.span(c);
                let dy = (y_lo - g.y0).max(g.y0 - y_hi).max(0.0);
                if dy > radius {
                    continue;
                }
                let half = (radius * radius - dy * dy).sqrt();
                let first = ((g.x0 - half - origin) / self.spacing).ceil().max(0.0);
                let last = ((g.x0 + half - origin) / self.spacing)
                    .floor()
                    .min((self.count - 1) as f64);
                if last >= first {
                    list.push(NearRun {
                        galaxy,
                        first: first as usize / self.group,
                        last: last as usize / self.group,
                    });
                }
            }
        }
        runs
    }
}

/// The pixels of `p` in cells of `step` × `step`.
fn pixel_cells(p: &LensProblem, step: usize) -> GroupedAxis<impl Fn(usize) -> f64 + Sync + '_> {
    GroupedAxis {
        coord: move |i| p.coord(i),
        spacing: p.pixel,
        count: p.n,
        group: step,
    }
}

/// The split's geometry, chosen for a problem from its galaxies and its error budget.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SplitPlan {
    /// Pixels per coarse cell (H = step · pixel).
    pub step: usize,
    /// Near radius R, arcsec.
    pub radius: f64,
    /// Far-field error allowed, arcsec: the mixed-budget float32 grid's error estimate, so the split
    /// recomputes about as many pixels as `mixed-budget`.
    pub target_error: f64,
    /// Worst per-cell bound of the far field's interpolation error over the grid (arcsec).
    pub worst_bound: f64,
    /// Estimated rounding error of the direct parts (clusters, and the coarse galaxy field through the
    /// interpolation, whose weights' absolute sum is at most LEBESGUE; on the `cpu` model also each row's
    /// values rounded to that precision), float32's or float64's as the plan runs them, added to every
    /// pixel's bound.
    pub rounding_error: f64,
    /// Halos in the near/far treatment (b below CLUSTER_B_ARCSEC) and summed directly.
    pub galaxies: usize,
    pub direct: usize,
    /// The devices evaluate the coarse lattice in float64 (the `cpu` model's choice is `direct_f64`).
    pub coarse_f64: bool,
    /// The `cpu` model evaluates its direct parts (coarse lattice, the near galaxies' node values, clusters, near terms) in
    /// float64 (the devices never do: their clusters and near terms are always float64).
    pub direct_f64: bool,
    /// The `cpu` model's lattice in two levels: galaxies within this distance (arcsec) of a block of
    /// nodes summed exactly there, the others interpolated from the second level (split_far.rs).
    pub far_level_radius: Option<f64>,
}

impl SplitPlan {
    /// The stat a grid's field carries when the `cpu` model's plan made it (the verdict reports that plan).
    pub(super) const CPU_STAT: &'static str = "split_plan_cpu";
}

/// Everything one split evaluation needs, made once per problem (the plan, the coarse lattice, the error
/// bound per cell).
#[derive(Debug, Clone)]
pub struct Split {
    pub plan: SplitPlan,
    /// The near galaxies per cell row (geometry, made with the plan): the `cpu` model's grid and the device
    /// kernels' cell lists.
    runs: Vec<Vec<NearRun>>,
    galaxies: Vec<HaloEval>,
    /// The galaxies alone on the coarse lattice (shifted so the lattice is a grid centred on 0), and the
    /// clusters alone on the problem's grid: both evaluated by the direct `cpu` grid (exact offsets) in
    /// float32, or float64 where the plan says `direct_f64`; their estimated error enters every pixel's bound.
    pub(super) coarse_problem: Option<Box<LensProblem>>,
    pub(super) cluster_problem: Option<Box<LensProblem>>,
    /// Coarse lattice: `nodes` × `nodes`, node (a, c) at (origin + a·H, origin + c·H).
    nodes: usize,
    origin: f64,
    cell: f64,
    /// Per pixel cell (a, c), `bound[c * cells + a]`: the far field's error bound.
    bound: Vec<f64>,
    /// Pixel cells per side.
    cells: usize,
    /// Each galaxy's node table covers `side` × `side` nodes from `reach` nodes before its own cell.
    reach: i64,
    /// The galaxies alone on the problem's grid: their float64 tables give the device kernels' near terms
    /// and node tables, their float32 (or float64) tables the `cpu` model's (galaxy k of `galaxies` is row k
    /// of those tables: SIE rows, then dPIE rows).
    pub(super) galaxy_problem: Option<Box<LensProblem>>,
    /// The device kernels' lists, made when a device first runs the split.
    lists: std::sync::OnceLock<SplitLists>,
    /// The `cpu` model's coarse lattice from a second, coarser one for the galaxies far from each block
    /// of nodes (split_far.rs); `None` when it would not pay.
    far: Option<FarLevel>,
    /// The `cpu` model's float32 plans with clusters: the direct parts' rounding at a pixel whose clusters
    /// are taken in float64 (`SplitPlan::rounding_error` less the clusters' float32 estimate, plus their
    /// float64 one). Flagged pixels are first tried that way ([`Split::settle_flagged`]).
    clusters_f64_rounding: Option<f64>,
    /// Per pixel cell, its flag limits ([`Split::make_cell_limits`]), and in float32 (rounded up,
    /// [`limit_in`]) for float32 rows.
    cell_limits: Vec<[f64; 2]>,
    cell_limits32: Vec<[f32; 2]>,
}

/// What the split's device kernels read besides the halo tables (cl/common/lens_split.h), per problem.
#[derive(Debug, Clone)]
pub(super) struct SplitLists {
    /// Per galaxy: x0, y0 (arcsec) and the first node column and row of its table.
    pub info: Vec<f64>,
    /// Pixel cells (step × step pixels) per row.
    pub cells_x: usize,
    /// Per pixel cell, row-major: the galaxies within R of any of its pixels, as CSR (start, indices).
    pub cell_start: Vec<i32>,
    pub cell_galaxies: Vec<i32>,
    /// Per pixel cell: the flag limit (h / the magnification its error bound can serve).
    pub limit: Vec<f64>,
    /// The 4 interpolation weights of each pixel offset 0..step within a cell.
    pub weights: Vec<f64>,
}

/// The `order` Lagrange weights of nodes 1 − order/2 … order/2 at fraction t of a cell (4: [`lagrange`]).
fn lagrange_weights(t: f64, order: usize) -> Vec<f64> {
    let node = |i: usize| i as f64 + 1.0 - (order / 2) as f64;
    (0..order)
        .map(|i| {
            (0..order)
                .filter(|&j| j != i)
                .map(|j| (t - node(j)) / (node(i) - node(j)))
                .product()
        })
        .collect()
}

/// Worst interpolation error of a unit isothermal deflection (b = 1, ellipticity up to `e`) at distance q
/// cells from its centre, tensor Lagrange interpolation on `order` × `order` nodes (4 or 6), for q on the
/// table's steps, made non-increasing in q: measured by placing the centre at 7 offsets within a cell and
/// the point at 32 angles.
fn error_table(e: f64, order: usize) -> Vec<f64> {
    let halo = |theta: f64| HaloEval::sie(0.0, 0.0, 1.0, e, theta);
    let steps = (F_TABLE_CELLS / F_TABLE_STEP) as usize + 1;
    let offsets = [
        (0.0, 0.0),
        (0.5, 0.5),
        (0.25, 0.75),
        (0.9, 0.1),
        (0.5, 0.0),
        (0.37, 0.61),
        (0.05, 0.95),
    ];
    let mut table: Vec<f64> = (0..steps)
        .into_par_iter()
        .map(|k| {
            let q = k as f64 * F_TABLE_STEP;
            let mut worst = 0.0f64;
            for (oi, &(ox, oy)) in offsets.iter().enumerate() {
                let g = halo(0.3 + oi as f64);
                for a in 0..32 {
                    let phi = a as f64 * std::f64::consts::TAU / 32.0 + 0.1 * oi as f64;
                    // The point, in cells, relative to a lattice with a node at (ox, oy) from the centre.
                    let (px, py) = (q * phi.cos() - ox, q * phi.sin() - oy);
                    let (ci, cj) = (px.floor(), py.floor());
                    // Cubic weights from `lagrange`, the ones the grid uses, to the last bit.
                    let weights = |t: f64| match order {
                        4 => lagrange(t).to_vec(),
                        _ => lagrange_weights(t, order),
                    };
                    let (wx, wy) = (weights(px - ci), weights(py - cj));
                    let first = 1.0 - (order / 2) as f64;
                    let (mut ix, mut iy) = (0.0, 0.0);
                    for (dj, &wyj) in wy.iter().enumerate() {
                        for (di, &wxi) in wx.iter().enumerate() {
                            let nx = ci + di as f64 + first + ox;
                            let ny = cj + dj as f64 + first + oy;
                            let (gx, gy) = g.at(nx, ny);
                            ix += wxi * wyj * gx;
                            iy += wxi * wyj * gy;
                        }
                    }
                    let (gx, gy) = g.at(px + ox, py + oy);
                    worst = worst.max((ix - gx).abs()).max((iy - gy).abs());
                }
            }
            worst
        })
        .collect();
    for k in (0..table.len() - 1).rev() {
        table[k] = table[k].max(table[k + 1]);
    }
    table
}

/// The error table of an `order`-node interpolation at q cells; beyond the table the error falls as q^−order
/// from its last value.
fn table_error(table: &[f64], order: i32, q: f64) -> f64 {
    let k = (q / F_TABLE_STEP).floor() as usize;
    table
        .get(k)
        .copied()
        .unwrap_or_else(|| table[table.len() - 1] * (F_TABLE_CELLS / q).powi(order))
}

impl Split {
    /// Builds the split of `p`: which halos are galaxies, the cell step and near radius (the cheapest pair,
    /// by a cost model, whose far-field bound stays within the target everywhere, or the most accurate one
    /// tried), the lattice and the per-cell bound.
    pub fn new(p: &LensProblem, model: SplitModel) -> Split {
        let (galaxy_index, cluster_index): (Vec<usize>, Vec<usize>) =
            (0..p.halos.len()).partition(|&k| p.halos.b[k] < CLUSTER_B_ARCSEC);
        let galaxies: Vec<HaloEval> = galaxy_index
            .iter()
            .map(|&k| HaloEval::of(&p.halos, k))
            .collect();
        let subset = |index: &[usize], shift: f64| {
            let mut h = Halos::default();
            for &k in index {
                h.copy_from(&p.halos, k);
            }
            for v in h.x0.iter_mut().chain(h.y0.iter_mut()) {
                *v -= shift;
            }
            h
        };
        let e_max = galaxies.iter().map(|g| g.e).fold(0.0, f64::max);
        let table = error_table(e_max, 4);
        let f = |q: f64| table_error(&table, 4, q);
        let target = p.f32_error_estimate() * model.target_factor();
        let n = p.n as f64;
        let mut best: Option<Split> = None;
        'search: for &k in model.near_radii() {
            // Cost per evaluation: coarse nodes × galaxies (the vectorised direct grid), plus near pixels
            // (π R²/h² each, weighed by the model's near cost) per galaxy: s⁴ = n²/(near cost · π k²).
            let s_cost = (n * n / (model.near_cost() * std::f64::consts::PI * k * k))
                .powf(0.25)
                .round()
                .max(1.0) as usize;
            // The bound grows with the cell (more galaxies per cell at the same k), so the `cpu` model
            // tries cells down to 0.7 of the cost model's before a larger k, whose near discs cost more.
            let s_least = match model {
                SplitModel::Cpu => ((0.7 * s_cost as f64).ceil() as usize).max(1),
                SplitModel::Device => s_cost,
            };
            for s in (s_least..=s_cost).rev() {
                let radius = k * s as f64 * p.pixel;
                let split = Split::with(p, &galaxies, s, radius, &f, target, model);
                let done = split.plan.worst_bound <= target;
                best = Some(split);
                if done || galaxies.is_empty() {
                    break 'search;
                }
            }
        }
        let mut split = best.expect("at least one step was tried");
        let problem = |halos: Halos, n: usize, pixel: f64| {
            (!halos.is_empty()).then(|| {
                let made = LensProblem::new("split", n, pixel, p.cosmology, halos);
                Box::new(made.expect("a subset of a valid problem's halos is valid"))
            })
        };
        let shift = split.origin + (split.nodes - 1) as f64 / 2.0 * split.cell;
        split.coarse_problem = problem(subset(&galaxy_index, shift), split.nodes, split.cell);
        split.cluster_problem = problem(subset(&cluster_index, 0.0), p.n, p.pixel);
        split.galaxy_problem = problem(subset(&galaxy_index, 0.0), p.n, p.pixel);
        split.plan.direct = cluster_index.len();
        if model == SplitModel::Cpu {
            split.far = split.far_level(p, &galaxy_index, e_max, target);
            if let Some(far) = &mut split.far {
                let shift = far.shift(split.origin, split.cell);
                far.problem = problem(subset(&galaxy_index, shift), far.nodes2, 2.0 * split.cell);
                for q in 0..split.bound.len() {
                    let (a, c) = (q % split.cells, q / split.cells);
                    split.bound[q] += LEBESGUE * far.stencil_error(a, c);
                }
                split.plan.worst_bound = split.bound.iter().copied().fold(0.0, f64::max);
                split.plan.far_level_radius = Some(far.radius);
            }
        }
        let rounding =
            |q: &Option<Box<LensProblem>>| q.as_ref().map_or(0.0, |q| q.f32_error_estimate());
        split.runs = split.near_runs(p);
        // Float64 rounding: float32's scaled by the units' ratio, taken 16 times over for the float64
        // routines' own few-ulp errors (~1e-13″, far below any far-field bound).
        let f64_scale = 16.0 * f64::EPSILON / f64::from(f32::EPSILON);
        split.plan.rounding_error = match model {
            // The coarse field through the interpolation, and the float32 near terms: at most every
            // galaxy's estimate once more.
            // Float64 direct parts where float32's rounding would be more than half the worst far bound:
            // it then flags far more pixels than the far field does (realistic galaxy masses: 3.8 % of
            // the pixels against 0.3 %), and the float64 recompute of those costs more than the float64
            // lattice and near terms (about 1.6× the float32 ones). Measured at `ci` (docs/perf-notes.md):
            // rounding/bound 0.38 (the paper's galaxies) 8.4 ms in float32, 13.4 in float64; 0.72
            // (40–90 km/s at 2048²) 255 → 86 ms; 0.82 (110–130 km/s) 36.6 → 30.5 ms.
            // With the lattice's second level (split_far.rs), a node holds the second lattice's rounding
            // through the six-node weights, the close galaxies' exact sum and their values on the second
            // lattice taken out through the same weights.
            SplitModel::Cpu => {
                let lattice = match &split.far {
                    None => 1.0,
                    Some(far) => LEBESGUE6 + (LEBESGUE6 + 1.0) * far.close_share,
                };
                let f32_parts = rounding(&split.cluster_problem)
                    + (LEBESGUE * lattice + 1.0) * rounding(&split.coarse_problem);
                split.plan.direct_f64 = f32_parts > 0.5 * split.plan.worst_bound;
                // The rows are made in the direct parts' precision (`grid_into`): each value rounded
                // once more, by at most a unit roundoff of the largest deflection all halos can give
                // together (Σ `largest_deflection`). Not
                // part of the choice above, whose threshold was measured without it (at `ci` it adds 10 %
                // to the float32 parts).
                let rows = f64::from(f32::EPSILON) / 2.0
                    * (0..p.halos.len())
                        .map(|k| HaloEval::of(&p.halos, k).largest_deflection())
                        .sum::<f64>();
                if split.plan.direct_f64 {
                    f64_scale * (f32_parts + rows)
                } else {
                    let clusters = rounding(&split.cluster_problem);
                    split.clusters_f64_rounding = (clusters > 0.0)
                        .then_some(f32_parts + rows - clusters + f64_scale * clusters);
                    f32_parts + rows
                }
            }
            SplitModel::Device => {
                // The clusters are float64 on the devices; the coarse lattice too where its float32
                // rounding would be the larger part of a pixel's bound (realistic galaxy masses, dPIE
                // galaxies): the float64 lattice costs about twice the float32 one on the H200, and the
                // recompute it saves is then most of the time (docs/perf-notes.md).
                let coarse32 = LEBESGUE * rounding(&split.coarse_problem);
                split.plan.coarse_f64 = coarse32 > split.plan.worst_bound;
                let coarse = if split.plan.coarse_f64 { 0.0 } else { coarse32 };
                coarse
                    + f64_scale
                        * (rounding(&split.cluster_problem)
                            + LEBESGUE * rounding(&split.coarse_problem))
            }
        };
        split.cell_limits = split.make_cell_limits(p);
        split.cell_limits32 = (split.cell_limits.iter())
            .map(|limits| limits.map(limit_in))
            .collect();
        split
    }

    /// Per pixel cell (as `bound`): the flag limit of its pixels, and of its last pixel of a row, whose x
    /// neighbour lies in another cell (the larger of the two cells' far bounds: the flags' differences err
    /// by both pixels' errors). That neighbour is the next cell's first pixel, or for the grid's last
    /// pixel, when it starts a cell of its own, the one before.
    fn make_cell_limits(&self, p: &LensProblem) -> Vec<[f64; 2]> {
        let (n, h, step, cells) = (p.n, p.pixel, self.plan.step, self.cells);
        (0..cells * cells)
            .map(|q| {
                let (a, c) = (q % cells, q / cells);
                let own = self.bound[q];
                let last = ((a + 1) * step).min(n) - 1;
                let ((x_neighbour, _), _) = difference_neighbours(last, 0, n.max(2));
                let other = self.bound[c * cells + (x_neighbour / step).min(cells - 1)];
                [own, own.max(other)].map(|far| self.flag_limit_of(far, h))
            })
            .collect()
    }

    fn with(
        p: &LensProblem,
        galaxies: &[HaloEval],
        step: usize,
        radius: f64,
        f: &(dyn Fn(f64) -> f64 + Sync),
        target: f64,
        model: SplitModel,
    ) -> Split {
        let cell = step as f64 * p.pixel;
        // Nodes from one cell before the first pixel to two after the last.
        let origin = p.coord(0) - cell;
        // The `cpu` model's lattice is whole blocks of its second level (split_far.rs), which also keeps its
        // rows whole vectors.
        let nodes = match model {
            SplitModel::Cpu => ((p.n - 1) / step + 4).next_multiple_of(BLOCK),
            SplitModel::Device => (p.n - 1) / step + 4,
        };
        let axis = pixel_cells(p, step);
        let cells = axis.groups();
        // Per pixel cell, the galaxies whose interpolant some of its pixels keep, each at the least distance
        // of those pixels (f is non-increasing). The `cpu` model sums a galaxy exactly over the whole of every
        // cell it is within R of (`near_runs`), so only galaxies farther than R from all of a cell's pixels
        // remain, a hair inside R kept against rounding. The device kernels test R per pixel, so a galaxy
        // beyond R from any pixel of the cell remains, at no less than R.
        let length = |x: f64, y: f64| (x * x + y * y).sqrt();
        let far_term = |g: &HaloEval, xs: (f64, f64), ys: (f64, f64)| {
            let least = least_distance(g, xs, ys);
            let remains = match model {
                SplitModel::Cpu => least > radius * (1.0 - 1e-9),
                SplitModel::Device => {
                    let ((x_lo, x_hi), (y_lo, y_hi)) = (xs, ys);
                    let most = length(
                        (x_lo - g.x0).abs().max((x_hi - g.x0).abs()),
                        (y_lo - g.y0).abs().max((y_hi - g.y0).abs()),
                    );
                    most > radius
                }
            };
            remains.then(|| g.strength() * f(least.max(radius) / cell))
        };
        let bound: Vec<f64> = (0..cells * cells)
            .into_par_iter()
            .map(|q| {
                let (xs, ys) = (axis.span(q % cells), axis.span(q / cells));
                galaxies.iter().filter_map(|g| far_term(g, xs, ys)).sum()
            })
            .collect();
        let worst_bound = bound.iter().copied().fold(0.0, f64::max);
        Split {
            plan: SplitPlan {
                step,
                radius,
                target_error: target,
                worst_bound,
                galaxies: galaxies.len(),
                direct: 0,
                rounding_error: 0.0,
                coarse_f64: false,
                direct_f64: false,
                far_level_radius: None,
            },
            runs: vec![],
            galaxies: galaxies.to_vec(),
            coarse_problem: None,
            cluster_problem: None,
            nodes,
            origin,
            cell,
            bound,
            cells,
            reach: (radius / cell).ceil() as i64 + 3,
            galaxy_problem: None,
            lists: std::sync::OnceLock::new(),
            far: None,
            clusters_f64_rounding: None,
            cell_limits: Vec::new(),
            cell_limits32: Vec::new(),
        }
    }

    /// The `cpu` model's second lattice level (split_far.rs) with the smallest close radius whose error,
    /// through the pixels' interpolation, stays within its share of the target; `None` when none does or
    /// when its blocks would sum more than half the galaxies exactly on average anyway.
    fn far_level(
        &self,
        p: &LensProblem,
        galaxy_index: &[usize],
        e_max: f64,
        target: f64,
    ) -> Option<FarLevel> {
        if self.galaxies.is_empty() || self.nodes < 4 * BLOCK {
            return None;
        }
        let table = error_table(e_max, 6);
        let f6 = |q: f64| table_error(&table, 6, q);
        let estimates: Vec<f64> = galaxy_index.iter().map(|&k| p.f32_error_of(k)).collect();
        let lattice = (self.origin, self.cell, self.nodes);
        FAR_LEVEL_RADII
            .iter()
            .map(|&d| FarLevel::new(&self.galaxies, &estimates, lattice, d * self.cell, &f6))
            .take_while(|far| far.mean_close() < 0.5 * self.galaxies.len() as f64)
            .find(|far| {
                let worst = far.error.iter().copied().fold(0.0, f64::max);
                LEBESGUE * worst <= FAR_LEVEL_SHARE * target
            })
    }

    /// The interpolation weights of each pixel offset 0..step within a cell.
    fn weights(&self) -> Vec<[f64; 4]> {
        let step = self.plan.step;
        (0..step)
            .map(|t| lagrange(t as f64 / step as f64))
            .collect()
    }

    /// Nodes per side of a galaxy's table: every cell a near pixel can be in, with the 4 × 4 stencil's reach.
    pub(super) fn side(&self) -> usize {
        2 * self.reach as usize + 2
    }

    /// First node column and row of a galaxy's table.
    fn table_origin(&self, g: &HaloEval) -> (i64, i64) {
        let first = |v: f64| ((v - self.origin) / self.cell).floor() as i64 - self.reach;
        (first(g.x0), first(g.y0))
    }

    /// Flag limit of the pixels of pixel cell (a, c) on the devices: an error bound E (a far-field bound plus
    /// the estimated rounding of the direct parts) serves magnifications below h / (6·E·BUDGET_SAFETY), the
    /// reasoning of `budget_magnification`. The far bound is the largest of the cell's and of the cells
    /// its pixels' difference neighbours can lie in (the next cell along x and along y, the one before at
    /// the grid's last column or row), since the flags' differences err by both pixels' errors.
    fn flag_limit(&self, a: usize, c: usize, h: f64) -> f64 {
        let cells = self.cells;
        let far = |a: usize, c: usize| self.bound[c * cells + a];
        let neighbours = |a: usize| [a.saturating_sub(1), (a + 1).min(cells - 1)];
        let [left, right] = neighbours(a);
        let [up, down] = neighbours(c);
        let mut worst = far(a, c).max(far(right, c)).max(far(a, down));
        if a + 1 == cells {
            worst = worst.max(far(left, c));
        }
        if c + 1 == cells {
            worst = worst.max(far(a, up));
        }
        self.flag_limit_of(worst, h)
    }

    /// The flag limit of a cell whose far-field bound is `far`.
    fn flag_limit_of(&self, far: f64, h: f64) -> f64 {
        limit_for_error(far + self.plan.rounding_error + f64::EPSILON * h)
    }

    /// Nodes per side of the lattice and its step in arcsec (device kernels).
    pub(super) fn lattice(&self) -> (usize, f64) {
        (self.nodes, self.cell)
    }

    /// The galaxies in each pixel cell's reach, their table origins and the cells' flag limits, for the
    /// device kernels.
    pub(super) fn lists(&self, p: &LensProblem) -> &SplitLists {
        self.lists.get_or_init(|| self.make_lists(p))
    }

    fn make_lists(&self, p: &LensProblem) -> SplitLists {
        let cells_x = self.cells;
        // The cells each galaxy is near (`runs`: within R of one of their pixels) as CSR lists, each
        // cell's galaxies in catalogue order (the runs of a cell row are).
        let pairs: Vec<(usize, usize)> = (self.runs.iter().enumerate())
            .flat_map(|(c, runs)| {
                runs.iter().flat_map(move |run| {
                    (run.first..=run.last).map(move |a| (c * cells_x + a, run.galaxy))
                })
            })
            .collect();
        let mut count = vec![0i32; cells_x * cells_x + 1];
        for &(cell, _) in &pairs {
            count[cell + 1] += 1;
        }
        for q in 1..count.len() {
            count[q] += count[q - 1];
        }
        let mut cell_galaxies = vec![0i32; pairs.len()];
        let mut fill = count.clone();
        for &(cell, g) in &pairs {
            cell_galaxies[fill[cell] as usize] = g as i32;
            fill[cell] += 1;
        }
        let info = self
            .galaxies
            .iter()
            .flat_map(|g| {
                let (a0, c0) = self.table_origin(g);
                [g.x0, g.y0, a0 as f64, c0 as f64]
            })
            .collect();
        let limit = (0..cells_x * cells_x)
            .map(|q| self.flag_limit(q % cells_x, q / cells_x, p.pixel))
            .collect();
        SplitLists {
            info,
            cells_x,
            cell_start: count,
            cell_galaxies,
            limit,
            weights: self.weights().into_iter().flatten().collect(),
        }
    }

    /// The galaxies' summed field at every node in precision T, x and y planes (zero without galaxies).
    fn coarse<T: SplitReal>(&self) -> [Vec<f64>; 2] {
        if let Some(far) = &self.far {
            return far.lattice(self.nodes, self.cell, T::tables(&self.coarse_problem));
        }
        match &self.coarse_problem {
            Some(c) => {
                let mut field = c.cpu_grid(T::tables(&self.coarse_problem));
                let y = field.components.pop().expect("two components");
                [field.components.pop().expect("two components"), y]
            }
            None => [0, 1].map(|_| vec![0.0; self.nodes * self.nodes]),
        }
    }

    /// Per cell row (`step` pixel rows), the galaxies near its cells: a galaxy within R of any pixel of a
    /// cell is near that cell, so one that is not is farther than R from all of its pixels (the per-cell
    /// bound's premise).
    fn near_runs(&self, p: &LensProblem) -> Vec<Vec<NearRun>> {
        pixel_cells(p, self.plan.step).runs_within(&self.galaxies, self.plan.radius)
    }

    /// The deflection at every pixel of `p` on the `cpu` model, into `out` (its memory reused). Per cell
    /// row: each cell's 4 × 4 node stencil of the coarse field, with the node values of the galaxies near
    /// that cell taken out (what stays is the far field, whose interpolant the bound covers). Per pixel row:
    /// that interpolant in float64, plus the clusters and the near galaxies' exact terms along row segments
    /// (the direct grid's vectorised loops), in float32 or, where the plan says `direct_f64`, float64, the
    /// row's sum rounded to that precision (and widened into the field). Returns the pixels (ascending,
    /// with the values their flag rule read) whose magnification the bound cannot serve (see
    /// [`LensProblem::cpu_split`]), flagged as soon as a row and the next are made, while they are in cache.
    pub(super) fn grid_into(&self, p: &LensProblem, out: &mut Field) -> Vec<Flagged> {
        if self.plan.direct_f64 {
            self.grid_into_in::<f64>(p, out)
        } else {
            self.grid_into_in::<f32>(p, out)
        }
    }

    /// [`Self::grid_into`] with the direct parts in precision T.
    fn grid_into_in<T: SplitReal>(&self, p: &LensProblem, out: &mut Field) -> Vec<Flagged> {
        let (n, step, nodes) = (p.n, self.plan.step, self.nodes);
        let cells = self.cells;
        let [coarse_x, coarse_y] = self.coarse::<T>();
        let weights = self.weights();
        // The x-pass weights four pixel offsets at a time: x_weights[q][d][l] weighs node d for offset 4q + l.
        let x_weights: Vec<[[f64; 4]; 4]> = (0..step.div_ceil(4))
            .map(|q| {
                std::array::from_fn(|d| {
                    std::array::from_fn(|l| weights.get(4 * q + l).map_or(0.0, |w| w[d]))
                })
            })
            .collect();
        let (clusters, exact) = (
            T::tables(&self.cluster_problem),
            T::tables(&self.galaxy_problem),
        );
        let pixel = T::from_f64(p.pixel);
        out.reshape(2, n * n);
        let [gx, gy] = &mut out.components[..] else {
            unreachable!("reshaped to two components")
        };
        let band = Band {
            n,
            step,
            nodes,
            pixel,
            coarse: [&coarse_x, &coarse_y],
            lattice: T::tables(&self.coarse_problem),
            cell: T::from_f64(self.cell),
            clusters,
            exact,
            weights: &weights,
            x_weights: &x_weights,
        };
        // Each band makes its rows in two cache-resident rows (this one and the one before, x then y),
        // flags each but its last (whose next row belongs to the next band) from them, and streams them
        // to the field past the caches. A worker's buffers serve all its bands (made once per rayon job:
        // fresh ones per band were 14 MB of allocation and zeroing per evaluation at `ci`).
        let bands: Vec<Vec<Flagged>> = gx
            .par_chunks_mut(n * step)
            .zip(gy.par_chunks_mut(n * step))
            .zip(&self.runs)
            .enumerate()
            .map_init(
                || BandScratch::<T>::new(n, cells, step, p.pixel),
                |scratch, (c, ((band_x, band_y), runs))| {
                    // Fences the rows streamed below before this task ends, a panic included.
                    let _fence = StreamFence;
                    let BandScratch {
                        rows,
                        far,
                        node_rows,
                        made,
                        flags,
                    } = scratch;
                    band.far_stencils(c, runs, far, node_rows);
                    self.reset_flags(flags, c, p);
                    for r in 0..band_x.len() / n {
                        band.direct_row(c * step + r, runs, &mut rows.direct);
                        let [even, odd] = &mut *made;
                        let (row, before) = if r % 2 == 0 { (even, odd) } else { (odd, even) };
                        let (row_x, row_y) = row.split_at_mut(n);
                        band.interpolate_row(r, far, rows, row_x, row_y);
                        // SAFETY: `_fence` fences this thread's streamed stores before the task ends, and
                        // nothing reads the band before then.
                        unsafe {
                            T::stream_widened(&mut band_x[r * n..][..n], row_x);
                            T::stream_widened(&mut band_y[r * n..][..n], row_y);
                        }
                        if r > 0 {
                            let (x, y) = before.split_at(n);
                            flags.list(c * step + r - 1, 1.0, [x, y, row_x, row_y]);
                        }
                    }
                    std::mem::take(&mut flags.listed)
                },
            )
            .collect();
        // Then each band's last row, from the finished field.
        let (gx, gy) = (&*gx, &*gy);
        let last_rows: Vec<Vec<Flagged>> = (0..bands.len())
            .into_par_iter()
            .map_init(
                || (RowFlags::<T>::new(n, p.pixel), vec![T::ZERO; 4 * n]),
                |(flags, narrowed), c| {
                    let j = ((c + 1) * step).min(n) - 1;
                    if n > 1 {
                        let (next, sy) = next_row(j, n);
                        self.reset_flags(flags, c, p);
                        self.raise_for_row_below(&mut flags.limits, c, next / step);
                        // The field holds the rows widened from T: narrowed back, exactly.
                        let rows = [(gx, j), (gy, j), (gx, next), (gy, next)];
                        for (to, (g, q)) in narrowed.chunks_exact_mut(n).zip(rows) {
                            for (t, v) in to.iter_mut().zip(&g[q * n..][..n]) {
                                *t = T::from_f64(*v);
                            }
                        }
                        let [x0, y0, x1, y1] = [0, 1, 2, 3].map(|k| &narrowed[k * n..][..n]);
                        flags.list(j, sy, [x0, y0, x1, y1]);
                    }
                    std::mem::take(&mut flags.listed)
                },
            )
            .collect();
        // In pixel order: each band's rows, then its last row.
        bands
            .into_iter()
            .zip(last_rows)
            .flat_map(|(rows, last)| rows.into_iter().chain(last))
            .collect()
    }

    /// The clusters' float64 deflection less their float32 one at `pixels` (flat indices) of `p`, the
    /// float32 sum the grid pass's to the bit ([`halos_at_points`]).
    fn clusters_f64_shift(&self, p: &LensProblem, pixels: &[usize]) -> Vec<[f64; 2]> {
        let n = p.n;
        let i: Vec<i32> = pixels.iter().map(|&q| (q % n) as i32).collect();
        let j: Vec<i32> = pixels.iter().map(|&q| (q / n) as i32).collect();
        let [x32, y32] = halos_at_points(tables32(&self.cluster_problem), p.pixel as f32, &i, &j);
        let [x64, y64] = halos_at_points(tables64(&self.cluster_problem), p.pixel, &i, &j);
        (0..pixels.len())
            .map(|q| [x64[q] - f64::from(x32[q]), y64[q] - f64::from(y32[q])])
            .collect()
    }

    /// The grid pass's flagged pixels (ascending) that still need the float64 recompute once their
    /// clusters are taken in float64; the others get their float64 clusters here. Most of a float32 plan's
    /// rounding estimate is the clusters' (at `ci` 1.6e-5″ of 2.2e-5″), so with them in float64 at a
    /// flagged pixel and its two difference neighbours, the flag rule is asked again with the limit of
    /// that smaller error: the largest of the three pixels' cells' bounds plus the rounding without the
    /// clusters' float32 share (`clusters_f64_rounding`). A pixel it clears keeps the grid's value plus
    /// its clusters' float64 − float32 shift: each cluster evaluated in float32 and in float64 at the pixel
    /// and its neighbours, instead of every halo in float64. Returns the pixels still flagged and how many
    /// were settled.
    fn settle_flagged(
        &self,
        p: &LensProblem,
        field: &mut Field,
        flagged: Vec<Flagged>,
    ) -> (Vec<usize>, usize) {
        let (n, h) = (p.n, p.pixel);
        let Some(rounding) = self.clusters_f64_rounding.filter(|_| n > 1) else {
            return (flagged.iter().map(|f| f.q).collect(), 0);
        };
        let error = |q: usize| self.bound[self.cell_of(q, n)] + rounding + f64::EPSILON * h;
        // Per flagged pixel, the pixel and its two neighbours (the order of `Flagged::values`) and their
        // clusters' shifts.
        let neighbours = |q: usize| difference_neighbours(q % n, q / n, n);
        let points: Vec<usize> = (flagged.iter())
            .flat_map(|f| {
                let ((px, _), (py, _)) = neighbours(f.q);
                [f.q, px, py]
            })
            .collect();
        let shifts: Vec<[f64; 2]> = (points.par_chunks(3 * 128))
            .flat_map_iter(|chunk| self.clusters_f64_shift(p, chunk))
            .collect();
        // Per flagged pixel: settled with its shifted value, or not.
        let settled: Vec<Option<[f64; 2]>> = (flagged.par_iter())
            .zip(shifts.par_chunks_exact(3))
            .map(|(f, shift)| {
                let ((px, sx), (py, sy)) = neighbours(f.q);
                let [[x0, y0], [x1, y1], [x2, y2]]: [[f64; 2]; 3] =
                    std::array::from_fn(|k| [0, 1].map(|c| f.values[k][c] + shift[k][c]));
                let limit = limit_for_error(error(f.q).max(error(px)).max(error(py)));
                let d = [x1 - x0, y1 - y0, x2 - x0, y2 - y0];
                (!mapping_flagged(h, d, sx, sy, limit)).then_some([x0, y0])
            })
            .collect();
        let mut still = Vec::new();
        let [gx, gy] = &mut field.components[..] else {
            unreachable!("the split's field has two components")
        };
        for (&Flagged { q, .. }, value) in flagged.iter().zip(&settled) {
            match value {
                Some([x, y]) => (gx[q], gy[q]) = (*x, *y),
                None => still.push(q),
            }
        }
        let count = flagged.len() - still.len();
        (still, count)
    }

    /// Readies `flags` for pixel cell row c's rows but its last (whose y neighbours are in the cell row
    /// below): each pixel's flag limit ([`Split::row_limits`]), nothing listed.
    fn reset_flags<T: SplitReal>(&self, flags: &mut RowFlags<T>, c: usize, p: &LensProblem) {
        self.row_limits(&mut flags.limits, c, p);
        flags.listed.clear();
    }

    /// The flagging state of any pixel row j: the plain pass the tests compare the grid's bands with.
    #[cfg(test)]
    fn flags_for_row<T: SplitReal>(&self, j: usize, p: &LensProblem) -> RowFlags<T> {
        let (c, (next, _)) = (j / self.plan.step, next_row(j, p.n));
        let mut flags = RowFlags::new(p.n, p.pixel);
        self.reset_flags(&mut flags, c, p);
        self.raise_for_row_below(&mut flags.limits, c, next / self.plan.step);
        flags
    }

    /// Each pixel's flag limit on a row of cell row c whose y neighbours are in the same cell row: from the
    /// larger far bound of the pixel's cell and its x neighbour's, since the flags' differences err by both
    /// pixels' errors (the x neighbour is in the next cell for a cell's last pixel, in the one before for
    /// the grid's last pixel when it starts a cell). A band's last row also takes the cell row below
    /// ([`Split::raise_for_row_below`]).
    fn row_limits<T: SplitReal>(&self, limits: &mut [T], c: usize, p: &LensProblem) {
        let row = &T::cell_limits(self)[c * self.cells..][..self.cells];
        for (pixels, &[own, last]) in limits.chunks_mut(self.plan.step).zip(row) {
            pixels.fill(own);
            if p.n > 1 {
                *pixels.last_mut().expect("a cell has pixels") = last;
            }
        }
    }

    /// Raises the limits of a row of cell row c ([`Split::row_limits`]) whose y neighbours lie in cell row
    /// `below` to those neighbours' cells' bounds (the limit grows with the bound, so the larger of the two
    /// limits is the limit of the larger bound).
    fn raise_for_row_below<T: SplitReal>(&self, limits: &mut [T], c: usize, below: usize) {
        if below == c {
            return;
        }
        let next = &T::cell_limits(self)[below * self.cells..][..self.cells];
        for (pixels, &[raised, _]) in limits.chunks_mut(self.plan.step).zip(next) {
            pixels.iter_mut().for_each(|l| *l = l.max(raised));
        }
    }

    /// Pixel cell of pixel q (flat index) of an n × n grid, as an index of `bound`.
    fn cell_of(&self, q: usize, n: usize) -> usize {
        let step = self.plan.step;
        (q / n / step) * self.cells + (q % n) / step
    }
}

/// The row that row j of an n-row grid (n ≥ 2) is differenced with, and the sign that makes the difference
/// a forward one: the next row, or the one before on the last (as `difference_neighbours`).
fn next_row(j: usize, n: usize) -> (usize, f64) {
    let (_, (below, sy)) = difference_neighbours(0, j, n);
    (below / n, sy)
}

/// One cell row's flagged pixels so far, and what flagging its rows (in precision T) needs.
struct RowFlags<T> {
    h: T,
    limits: Vec<T>,
    /// Per pixel of the row being flagged, 1 or 0: bytes, so whole words of them are skipped at once.
    flags: Vec<u8>,
    listed: Vec<Flagged>,
}

/// A pixel the grid pass flagged (flat index q), with the deflections its flag rule read (x, y at the
/// pixel, at its x neighbour, at its y neighbour): kept from the rows in cache, so the settle
/// ([`Split::settle_flagged`]) does not fetch them from a field streamed past the caches.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flagged {
    pub(super) q: usize,
    values: [[f64; 2]; 3],
}

impl<T: Real> RowFlags<T> {
    /// Flagging state for rows of n pixels of size h; its limits are set per cell row
    /// ([`Split::reset_flags`]).
    fn new(n: usize, h: f64) -> RowFlags<T> {
        RowFlags {
            h: T::from_f64(h),
            limits: vec![T::ZERO; n],
            flags: vec![0; n],
            listed: Vec::new(),
        }
    }

    /// Lists the flagged pixels of row j (`rows` and `sy` as for [`flag_row`]); a single-column grid
    /// has no differences and nothing flagged.
    fn list(&mut self, j: usize, sy: f64, rows: [&[T]; 4]) {
        let n = self.flags.len();
        if n < 2 {
            return;
        }
        flag_row(self.h, T::from_f64(sy), &self.limits, rows, &mut self.flags);
        let [x0, y0, x1, y1] = rows;
        let pixel = |i: usize| {
            let x_neighbour = if i + 1 < n { i + 1 } else { i - 1 };
            let at = |x: &[T], y: &[T], i: usize| [x[i].to_f64(), y[i].to_f64()];
            Flagged {
                q: j * n + i,
                values: [at(x0, y0, i), at(x0, y0, x_neighbour), at(x1, y1, i)],
            }
        };
        // Few pixels are flagged: eight at a time, looked at one by one only where a word is not zero.
        let words = self.flags.chunks_exact(8);
        let rest = words.remainder().iter().any(|&f| f != 0);
        for (w, eight) in words.enumerate() {
            let word = u64::from_ne_bytes(eight.try_into().expect("eight flags"));
            if word != 0 {
                let flagged = (0..8).filter(|&l| eight[l] != 0);
                self.listed.extend(flagged.map(|l| pixel(8 * w + l)));
            }
        }
        if rest {
            let flagged = (n / 8 * 8..n).filter(|&i| self.flags[i] != 0);
            self.listed.extend(flagged.map(pixel));
        }
    }
}

/// The flags of one pixel row (the rule of [`LensProblem::cpu_split`]) from its deflection and the next
/// row's (`rows`: x, y, next x, next y; `sy` −1 when the next row is the one before).
#[inline(never)]
fn flag_row<T: Real>(h: T, sy: T, limits: &[T], rows: [&[T]; 4], flags: &mut [u8]) {
    let [x0, y0, x1, y1] = rows;
    let n = flags.len();
    let flag = |dx1: T, dy1: T, dx2: T, dy2: T, sx: T, limit: T| {
        u8::from(mapping_flagged(h, [dx1, dy1, dx2, dy2], sx, sy, limit))
    };
    // One loop over the pixels with a right neighbour (it vectorises), then the last column.
    for i in 0..n - 1 {
        flags[i] = flag(
            x0[i + 1] - x0[i],
            y0[i + 1] - y0[i],
            x1[i] - x0[i],
            y1[i] - y0[i],
            T::ONE,
            limits[i],
        );
    }
    let i = n - 1;
    flags[i] = flag(
        x0[i - 1] - x0[i],
        y0[i - 1] - y0[i],
        x1[i] - x0[i],
        y1[i] - y0[i],
        T::ZERO - T::ONE,
        limits[i],
    );
}

/// The flag limit of a pixel whose deflection and its two difference neighbours' err by at most `error`
/// (arcsec): the smallest |eigenvalue| of its lens mapping at which that error stays within the budget,
/// the reasoning of `budget_magnification`.
fn limit_for_error(error: f64) -> f64 {
    6.0 * error * BUDGET_SAFETY
}

/// A flag limit in the rows' precision T, the least T value not below the float64 one (a limit rounded
/// down would flag less): float64's unchanged, float32's rounded up.
fn limit_in<T: Real>(limit: f64) -> T {
    let narrowed = T::from_f64(limit);
    if narrowed.to_f64() < limit {
        narrowed.next_up()
    } else {
        narrowed
    }
}

/// The flag rule at one pixel: its lens mapping from the deflection's differences to the x neighbour (dx1,
/// dy1) and the y neighbour (dx2, dy2), made forward by the signs sx and sy, has a diagonal entry or an
/// eigenvalue of magnitude below `limit` ([`below_limit`]).
#[inline(always)]
fn mapping_flagged<T: Real>(h: T, [dx1, dy1, dx2, dy2]: [T; 4], sx: T, sy: T, limit: T) -> bool {
    let (d1, d4) = (sx * dx1, sx * dy1);
    let (d2, d3) = (sy * dy2, sy * dx2);
    let (a, b, c) = (h - d1, T::from_f64(-0.5) * (d3 + d4), h - d2);
    below_limit(a, b, c, limit + rule_rounding(h, a, b, c))
}

/// How far the flag rule's own arithmetic in precision T can move the eigenvalue it compares (h rounded,
/// the differences and the entries rounded, det = ac − b² rounded, whose error over |mean| + radius ≥ the
/// entries' largest magnitude is a few units of them): 8 unit roundoffs of h + |a| + |b| + |c|. Added to
/// the limit, so a float32 rule flags at least what exact arithmetic on the same rows would (about 1e-3
/// of the limit at `ci`; float64's is 1e-12 of it).
#[inline(always)]
fn rule_rounding<T: Real>(h: T, a: T, b: T, c: T) -> T {
    T::from_f64(4.0) * T::EPSILON * (h + a.abs() + b.abs() + c.abs())
}

/// Copies `from` widened to float64 into `to` (the same length) with non-temporal stores: a field written
/// once and not read back soon then costs no reads of its lines into the caches (at `ci`, 16.8 MB of
/// deflections: 0.62 ms streamed against 1.0–1.9 ms stored on this project's 2-core VM). `four` loads the
/// four values at a pointer as float64 (`SplitReal::stream_widened` gives each precision's); the unaligned
/// head and tail are widened one by one. Targets without AVX copy with [`widen`] instead.
///
/// # Safety
/// `four` must read only the four values at its pointer. Non-temporal stores are not ordered with this
/// thread's later stores: before any other access to `to` (another thread's, or this thread's after it
/// signals one), this thread must run [`stream_fence`] (a [`StreamFence`] guard does, on every way out of
/// its scope).
#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
#[inline(always)]
unsafe fn stream_into<V: Copy + Into<f64>>(
    to: &mut [f64],
    from: &[V],
    four: impl Fn(*const V) -> std::arch::x86_64::__m256d,
) {
    assert_eq!(to.len(), from.len(), "rows of one length");
    let head = to.as_ptr().align_offset(32).min(to.len());
    let body = head + (to.len() - head) / 4 * 4;
    widen(&mut to[..head], &from[..head]);
    for k in (head..body).step_by(4) {
        // SAFETY: k + 4 ≤ body ≤ the length of both slices, and to[k] is 32-byte aligned (to[head] is, and
        // k − head is a multiple of four f64); AVX is enabled for this target.
        unsafe {
            std::arch::x86_64::_mm256_stream_pd(to.as_mut_ptr().add(k), four(from.as_ptr().add(k)))
        };
    }
    widen(&mut to[body..], &from[body..]);
}

/// `to` = `from` widened to float64 (the same length), with ordinary stores.
fn widen<V: Copy + Into<f64>>(to: &mut [f64], from: &[V]) {
    assert_eq!(to.len(), from.len(), "rows of one length");
    for (t, f) in to.iter_mut().zip(from) {
        *t = (*f).into();
    }
}

/// The y-pass of a pixel row at weights `wy`: line[a][4·comp + dx] = Σ_dy wy[dy]·far[a][16·comp + 4·dy + dx],
/// each sum fused multiply-adds from zero in dy order. Per cell, four dx at once: with AVX and FMA
/// explicitly, since LLVM otherwise vectorised across cells with gathers of every fourth value (a third
/// of the interpolation's time); the same bits either way ([`y_pass_portable`]).
#[inline(always)]
fn y_pass(wy: &[f64; 4], far: &[[f64; 32]], line: &mut [[f64; 8]]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma"))]
    {
        use std::arch::x86_64::{
            _mm256_fmadd_pd, _mm256_loadu_pd, _mm256_set1_pd, _mm256_setzero_pd, _mm256_storeu_pd,
        };
        // SAFETY: AVX and FMA are enabled for this target; every load reads 4 of a stencil's 32 values
        // (16·comp + 4·dy + 4 ≤ 32) and every store writes 4 of a line's 8 (4·comp + 4 ≤ 8).
        unsafe {
            let w = wy.map(|w| _mm256_set1_pd(w));
            for (out, stencil) in line.iter_mut().zip(far) {
                for comp in 0..2 {
                    let mut sum = _mm256_setzero_pd();
                    for (dy, &w) in w.iter().enumerate() {
                        let row = _mm256_loadu_pd(stencil.as_ptr().add(16 * comp + 4 * dy));
                        sum = _mm256_fmadd_pd(w, row, sum);
                    }
                    _mm256_storeu_pd(out.as_mut_ptr().add(4 * comp), sum);
                }
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma")))]
    y_pass_portable(wy, far, line);
}

/// [`y_pass`] without intrinsics.
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "avx", target_feature = "fma"),
    allow(dead_code)
)]
fn y_pass_portable(wy: &[f64; 4], far: &[[f64; 32]], line: &mut [[f64; 8]]) {
    for (out, stencil) in line.iter_mut().zip(far) {
        for comp in 0..2 {
            let mut sum = [0.0; 4];
            for (dy, w) in wy.iter().enumerate() {
                let row = &stencil[16 * comp + 4 * dy..][..4];
                for dx in 0..4 {
                    sum[dx] = w.mul_add(row[dx], sum[dx]);
                }
            }
            out[4 * comp..][..4].copy_from_slice(&sum);
        }
    }
}

/// Fences this thread's non-temporal stores ([`stream_into`]) when dropped.
struct StreamFence;

impl Drop for StreamFence {
    fn drop(&mut self) {
        stream_fence();
    }
}

/// Orders this thread's non-temporal stores ([`stream_into`]) before its later stores (rayon's signal
/// that a task is done among them).
fn stream_fence() {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
    // SAFETY: sfence has no preconditions; SSE is part of every x86_64 target.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Whether the symmetric matrix [[a, b], [b, c]] (a pixel's lens mapping, h − the deflection's
/// differences) has a diagonal entry or an eigenvalue of magnitude below `limit`. Its eigenvalues are
/// mean ± radius (mean = (a + c)/2, radius = √(((a − c)/2)² + b²)), so the smaller magnitude is
/// |det| / (|mean| + radius), below the limit iff |det| − limit·|mean| < limit·radius: compared squared,
/// with no square root (which had been the flags' cost). A zero matrix fails that, but its diagonal is
/// below any positive limit.
#[inline(always)]
fn below_limit<T: Real>(a: T, b: T, c: T, limit: T) -> bool {
    let half_of = T::from_f64(0.5);
    let (mean, half) = (half_of * (a + c), half_of * (a - c));
    let over = (a * c - b * b).abs() - limit * mean.abs();
    let eigenvalue = (over < T::ZERO) | (over * over < limit * limit * (half * half + b * b));
    (a.abs() < limit) | (c.abs() < limit) | eigenvalue
}

/// One worker's rows for a pixel row of the `cpu` model's split grid.
struct RowScratch<T> {
    /// The direct parts: clusters x, y, near terms x, y. The clusters' rows are set whole by `direct_row`;
    /// the near terms' are zero between rows: made zero, summed into by `direct_row`, and zeroed again by
    /// `interpolate_row` as it reads them (a separate fill per row cost 1.5 % of the split).
    direct: [Vec<T>; 4],
    /// The y-pass per cell: line[a][4·comp + dx].
    line: Vec<[f64; 8]>,
    /// The interpolant along the row, x then y, each cells × step pixels with room for the last cell's
    /// rounding up to 4.
    spread: Vec<f64>,
}

/// One worker's buffers for the cell rows of the `cpu` model's split grid, reused from row to row.
struct BandScratch<T> {
    rows: RowScratch<T>,
    /// The cell row's far stencils ([`Band::far_stencils`]).
    far: Vec<[f64; 32]>,
    node_rows: NodeRows<T>,
    /// The band's last two rows, x then y, alternating, in the direct parts' precision T.
    made: [Vec<T>; 2],
    flags: RowFlags<T>,
}

impl<T: Real> BandScratch<T> {
    fn new(n: usize, cells: usize, step: usize, h: f64) -> Self {
        BandScratch {
            rows: RowScratch {
                direct: [0, 1, 2, 3].map(|_| vec![T::ZERO; n]),
                line: vec![[0.0; 8]; cells],
                spread: vec![0.0; 2 * (cells * step + 4)],
            },
            far: vec![[0.0; 32]; cells],
            node_rows: NodeRows {
                strip: [0, 1].map(|_| vec![T::ZERO; (cells + 3).next_multiple_of(8)]),
                values: [0, 1].map(|_| vec![0.0; 4 * (cells + 3)]),
            },
            made: [0, 1].map(|_| vec![T::ZERO; 2 * n]),
            flags: RowFlags::new(n, h),
        }
    }
}

/// A near galaxy's values at the four node rows a cell row's stencils read: one row in precision T
/// (`strip`, x and y, whole vectors of eight), then all four widened (`values`, x and y, row-major).
struct NodeRows<T> {
    strip: [Vec<T>; 2],
    values: [Vec<f64>; 2],
}

/// What one cell row of the `cpu` model's split grid reads ([`Split::grid_into`]).
struct Band<'a, T> {
    n: usize,
    step: usize,
    /// Nodes per lattice row.
    nodes: usize,
    pixel: T,
    coarse: [&'a [f64]; 2],
    /// The galaxies' tables on the coarse lattice (node (a, c) is its pixel (a, c); row k: galaxy k) and
    /// its step, for the near galaxies' node values.
    lattice: &'a KernelTables<T>,
    cell: T,
    clusters: &'a KernelTables<T>,
    /// The galaxies' own tables in precision T (row k: galaxy k), for their exact near terms.
    exact: &'a KernelTables<T>,
    weights: &'a [[f64; 4]],
    /// x_weights[q][d][l] weighs node d for pixel offset 4q + l within a cell (0 past the step).
    x_weights: &'a [[[f64; 4]; 4]],
}

impl<T: Real> Band<'_, T> {
    /// far[a][16·comp + 4·dy + dx]: node (a + dx, c + dy) of the coarse field, less the node values of the
    /// galaxies near cell a. Pixel cell (a, c) interpolates from those 4 × 4. Cell-major, so a near galaxy's
    /// four nodes of a stencil row are one contiguous run of its table and of the stencil.
    #[inline(never)]
    fn far_stencils(
        &self,
        c: usize,
        runs: &[NearRun],
        far: &mut [[f64; 32]],
        node_rows: &mut NodeRows<T>,
    ) {
        for comp in 0..2 {
            for dy in 0..4 {
                let row = &self.coarse[comp][(c + dy) * self.nodes..];
                for (a, stencil) in far.iter_mut().enumerate() {
                    let four: &[f64; 4] = row[a..a + 4].try_into().expect("four nodes");
                    stencil[16 * comp + 4 * dy..][..4].copy_from_slice(four);
                }
            }
        }
        // A near galaxy's values at the nodes its cells' stencils read: made here, four rows from node
        // column `first` (tables of every galaxy cost more to write and read than to evaluate), each in
        // whole vectors of eight lanes (a remainder loop would cost as much as the vectors).
        let NodeRows { strip, values } = node_rows;
        for run in runs {
            let width = run.last - run.first + 4;
            let whole = width.next_multiple_of(8);
            for dy in 0..4 {
                let [sx, sy] = &mut *strip;
                let (sx, sy) = (&mut sx[..whole], &mut sy[..whole]);
                let (j, i0) = ((c + dy) as i32, run.first as i32);
                add_halo_along_row::<false, T>(self.lattice, run.galaxy, self.cell, j, i0, sx, sy);
                for (to, from) in values.iter_mut().zip(&*strip) {
                    for (v, t) in to[dy * width..][..width].iter_mut().zip(from) {
                        *v = t.to_f64();
                    }
                }
            }
            let cells = &mut far[run.first..=run.last];
            for (comp, values) in values.iter().enumerate() {
                for dy in 0..4 {
                    let nodes = &values[dy * width..][..width];
                    let at = 16 * comp + 4 * dy;
                    for (stencil, four) in cells.iter_mut().zip(nodes.windows(4)) {
                        let four: &[f64; 4] = four.try_into().expect("four nodes");
                        let s: &mut [f64; 4] =
                            (&mut stencil[at..at + 4]).try_into().expect("four nodes");
                        *s = [
                            s[0] - four[0],
                            s[1] - four[1],
                            s[2] - four[2],
                            s[3] - four[3],
                        ];
                    }
                }
            }
        }
    }

    /// The direct parts of pixel row j: the clusters (direct[0], [1]) and the near galaxies' exact terms
    /// (direct[2], [3]), in separate rows so the near terms' rounding stays at their own small scale.
    /// `direct` arrives with its near rows zero (see [`RowScratch::direct`]).
    #[inline(never)]
    fn direct_row(&self, j: usize, runs: &[NearRun], direct: &mut [Vec<T>; 4]) {
        let [cl_x, cl_y, near_x, near_y] = direct;
        let j = j as i32;
        halos_along_row(self.clusters, self.pixel, j, cl_x, cl_y);
        for run in runs {
            let (i0, i1) = (
                run.first * self.step,
                ((run.last + 1) * self.step).min(self.n),
            );
            let (sx, sy) = (&mut near_x[i0..i1], &mut near_y[i0..i1]);
            add_halo_along_row::<true, T>(self.exact, run.galaxy, self.pixel, j, i0 as i32, sx, sy);
        }
    }

    /// Pixel row r of the band: the far field's interpolant (the y-pass for every cell at once into
    /// `line`, then the x-pass four pixels at a time) plus the direct parts.
    #[inline(never)]
    fn interpolate_row(
        &self,
        r: usize,
        far: &[[f64; 32]],
        scratch: &mut RowScratch<T>,
        row_x: &mut [T],
        row_y: &mut [T],
    ) {
        let RowScratch {
            direct,
            line,
            spread,
        } = scratch;
        let (step, n) = (self.step, self.n);
        let wy = &self.weights[r];
        y_pass(wy, far, line);
        // Four pixels at a time into `spread` (step rounded up to 4 per cell: a cell's extra pixels are
        // overwritten by the next cell's), then the direct parts added along the row.
        let half = spread.len() / 2;
        let (spread_x, spread_y) = spread.split_at_mut(half);
        for (a, nodes) in line.iter().enumerate() {
            let lx: [f64; 4] = std::array::from_fn(|d| nodes[d]);
            let ly: [f64; 4] = std::array::from_fn(|d| nodes[4 + d]);
            for (q, w) in self.x_weights.iter().enumerate() {
                let (mut ox, mut oy) = ([0.0; 4], [0.0; 4]);
                for d in 0..4 {
                    for l in 0..4 {
                        ox[l] = w[d][l].mul_add(lx[d], ox[l]);
                        oy[l] = w[d][l].mul_add(ly[d], oy[l]);
                    }
                }
                let at = a * step + 4 * q;
                spread_x[at..at + 4].copy_from_slice(&ox);
                spread_y[at..at + 4].copy_from_slice(&oy);
            }
        }
        let [cl_x, cl_y, near_x, near_y] = direct;
        // Read once; the near terms left zero for the next row's direct_row (the clusters' rows are set
        // whole there).
        for i in 0..n {
            row_x[i] = T::from_f64(spread_x[i] + cl_x[i].to_f64() + near_x[i].to_f64());
            row_y[i] = T::from_f64(spread_y[i] + cl_y[i].to_f64() + near_y[i].to_f64());
            (near_x[i], near_y[i]) = (T::ZERO, T::ZERO);
        }
    }
}

impl LensProblem {
    /// The split's geometry and error bounds for this problem and machine kind (made once; not part of an
    /// evaluation).
    pub fn split(&self, model: SplitModel) -> &Split {
        let cell = match model {
            SplitModel::Cpu => &self.split_cpu,
            SplitModel::Device => &self.split_device,
        };
        cell.get_or_init(|| Split::new(self, model))
    }

    /// The split grid on the `cpu` model, with the pixels whose magnification its error bound cannot serve
    /// recomputed directly in float64: a pixel with bound E (its cell's far-field bound plus the estimated
    /// rounding of the direct parts and of the rows, `SplitPlan::rounding_error`) is fine while its axis and directional magnifications stay below
    /// h / (6·E·BUDGET_SAFETY) (the reasoning of `budget_magnification`).
    pub(super) fn cpu_split(&self) -> Field {
        let mut field = Field::new(vec![]);
        self.cpu_split_into(&mut field);
        field
    }

    /// [`Self::cpu_split`] into `field`, reusing its memory.
    pub(super) fn cpu_split_into(&self, field: &mut Field) {
        let split = self.split(SplitModel::Cpu);
        let flagged = split.grid_into(self, field);
        let (listed, settled) = split.settle_flagged(self, field, flagged);
        self.recompute_listed(field, &listed);
        if split.clusters_f64_rounding.is_some() {
            let fraction = settled as f64 / (self.n * self.n) as f64;
            field.stats.push((SETTLED_STAT.into(), fraction));
        }
        field.stats.push((SplitPlan::CPU_STAT.into(), 1.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error table `table` of an `order`-node interpolation falls by 2^order (within a factor of 2 either
    /// way) from each q in `qs` to 2q.
    fn assert_falls_as_power(table: &[f64], order: i32, qs: &[f64]) {
        let at = |q: f64| table[(q / F_TABLE_STEP) as usize];
        let expected = 2f64.powi(order);
        for &q in qs {
            let ratio = at(q) / at(2.0 * q);
            assert!(
                (expected / 2.0..=expected * 2.0).contains(&ratio),
                "order {order}: f({q})/f({}) = {ratio}",
                2.0 * q
            );
        }
    }

    /// The measured error table falls as the fourth power of the distance (cubic interpolation of a field
    /// whose fourth derivative goes as r⁻⁵ · r: b/r⁴ per cell⁴), and bounds the error at points it was not
    /// measured on.
    #[test]
    fn the_error_table_falls_as_the_fourth_power_and_bounds_other_points() {
        let table = error_table(0.15, 4);
        let at = |q: f64| table[(q / F_TABLE_STEP) as usize];
        assert_falls_as_power(&table, 4, &[8.0, 16.0, 32.0]);
        // A galaxy of b = 0.3″ at an arbitrary place and angle, a lattice of 0.8″: the error at points 5-40
        // cells away stays below b·f(q).
        let g = HaloEval::sie(0.123, -0.456, 0.3, 0.1, 0.7);
        let cell = 0.8;
        let mut state = 42u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..2000 {
            let q = 5.0 + 35.0 * next();
            let phi = std::f64::consts::TAU * next();
            let (x, y) = (g.x0 + q * cell * phi.cos(), g.y0 + q * cell * phi.sin());
            let (ci, cj) = ((x / cell).floor(), (y / cell).floor());
            let (wx, wy) = (lagrange(x / cell - ci), lagrange(y / cell - cj));
            let (mut ix, mut iy) = (0.0, 0.0);
            for (dj, &b) in wy.iter().enumerate() {
                for (di, &a) in wx.iter().enumerate() {
                    let (gx, gy) =
                        g.at((ci + di as f64 - 1.0) * cell, (cj + dj as f64 - 1.0) * cell);
                    ix += a * b * gx;
                    iy += a * b * gy;
                }
            }
            let (gx, gy) = g.at(x, y);
            let err = (ix - gx).abs().max((iy - gy).abs());
            let bound = g.strength() * at(q);
            assert!(
                err <= bound,
                "q {q:.2}: error {err:.3e} over the bound {bound:.3e}"
            );
        }
    }

    /// The general Lagrange weights are the cubic ones at order 4, and at order 6 the second level's fixed
    /// weights (split_far.rs) at half a cell and the node itself at 0; the six-node error table falls as
    /// the sixth power of the distance.
    #[test]
    fn six_node_weights_and_their_error_table() {
        for t in [0.0, 0.125, 0.5, 0.9] {
            let (general, cubic) = (lagrange_weights(t, 4), lagrange(t));
            for d in 0..4 {
                assert!((general[d] - cubic[d]).abs() < 1e-15, "t {t}, node {d}");
            }
        }
        let (half, at_node) = (lagrange_weights(0.5, 6), lagrange_weights(0.0, 6));
        for d in 0..6 {
            assert!((half[d] - crate::workload::lens::split_far::HALF[d]).abs() < 1e-15);
            assert_eq!(at_node[d], if d == 2 { 1.0 } else { 0.0 });
        }
        assert_falls_as_power(&error_table(0.15, 6), 6, &[6.0, 12.0, 24.0]);
    }

    /// The `cpu` model's two-level lattice (split_far.rs) against the float64 direct sum at every node, with
    /// float64 arithmetic so only the second level's interpolation errs: within each node's bound, and not
    /// by a vacuous one. At `ci`'s size, with the paper's and with realistic galaxy masses.
    #[test]
    fn the_two_level_lattice_is_within_its_bound_at_every_node() {
        use crate::workload::lens::{LensOptions, Preset};
        for sigma in [(10.0, 15.0), (110.0, 130.0)] {
            let opts = LensOptions {
                galaxy_sigma: sigma,
                seed: 11,
                ..LensOptions::default()
            };
            let p = LensProblem::preset(Preset::Ci, &opts).expect("a valid preset");
            let split = p.split(SplitModel::Cpu);
            let far = split.far.as_ref().expect("a second level at ci's size");
            let coarse = split.coarse_problem.as_ref().expect("galaxies");
            let two_level = far.lattice(split.nodes, split.cell, &coarse.tables64);
            let direct = coarse.cpu_grid(&coarse.tables64);
            let mut tightest = 0.0f64;
            for c in 0..split.nodes {
                for a in 0..split.nodes {
                    let q = c * split.nodes + a;
                    let err = (0..2)
                        .map(|k| (two_level[k][q] - direct.components[k][q]).abs())
                        .fold(0.0, f64::max);
                    let bound = far.node_error(a, c) + 1e-12;
                    assert!(
                        err <= bound,
                        "{sigma:?}, node ({a}, {c}): {err:.3e} over {bound:.3e}"
                    );
                    tightest = tightest.max(err / bound);
                }
            }
            assert!(
                tightest > 0.01,
                "{sigma:?}: the bound is {:.0}× the worst error",
                1.0 / tightest
            );
        }
    }

    /// The `cpu` model's per-cell bound (the far field's interpolation error, galaxies near a cell summed
    /// exactly over all of it) plus the float32 estimate holds at every pixel of the grid before its flags
    /// and recompute: the premise of the flags. Checked on an untuned size with the paper's and with
    /// realistic galaxy masses (where the far field, not float32, is most of the error), and with three
    /// realistic galaxies alone, where the bound of a cell is one or two galaxies' worst error and so
    /// nearly tight: a galaxy left out of its cells' bounds, or summed exactly over too few of them, fails.
    /// Also at 1100² px, where the lattice has its second level (split_far.rs).
    #[test]
    fn the_cpu_bound_holds_at_every_pixel_before_the_recompute() {
        use crate::workload::lens::{LensOptions, Preset};
        let sized = |sigma, n| {
            let opts = LensOptions {
                n: Some(n),
                galaxy_sigma: sigma,
                seed: 5,
                ..LensOptions::default()
            };
            LensProblem::preset(Preset::Ci, &opts).expect("a valid preset")
        };
        let preset = |sigma| sized(sigma, 300);
        let realistic = preset((110.0, 130.0));
        let three = {
            let mut h = Halos::default();
            let galaxies =
                (0..realistic.halos.len()).filter(|&k| realistic.halos.b[k] < CLUSTER_B_ARCSEC);
            for k in galaxies.step_by(233) {
                h.copy_from(&realistic.halos, k);
            }
            LensProblem::new("three", 300, realistic.pixel, realistic.cosmology, h)
                .expect("valid halos")
        };
        for (name, p, tight) in [
            ("paper's galaxies", preset((10.0, 15.0)), 0.01),
            ("realistic galaxies", realistic, 0.1),
            ("three galaxies", three, 0.3),
            ("paper's galaxies at 1100²", sized((10.0, 15.0), 1100), 0.01),
        ] {
            let split = p.split(SplitModel::Cpu);
            assert!(split.far.is_some() || p.n < 1000, "{name}: no second level");
            let mut field = Field::new(vec![]);
            split.grid_into(&p, &mut field);
            let reference = p.cpu_grid(&p.tables64);
            let step = split.plan.step;
            let mut worst = 0.0f64;
            for j in 0..p.n {
                for i in 0..p.n {
                    let q = j * p.n + i;
                    let err = (0..2)
                        .map(|c| (field.components[c][q] - reference.components[c][q]).abs())
                        .fold(0.0, f64::max);
                    let cell = split.bound[(j / step) * split.cells + i / step];
                    let bound = cell + split.plan.rounding_error;
                    assert!(
                        err <= bound,
                        "{name}, pixel ({i}, {j}): error {err:.3e} over {bound:.3e}"
                    );
                    worst = worst.max(err / bound);
                }
            }
            eprintln!("{name}: worst error/bound {worst:.3}");
            // Not vacuous: somewhere the error comes near its bound.
            assert!(worst > tight, "{name}: worst error/bound {worst:.3e}");
        }
    }

    /// The clusters' float32 values at points ([`halos_at_points`], as `clusters_f64_shift` makes them) are
    /// the grid pass's rows' to the bit (the settled values take them out again), at every pixel of a few
    /// rows, taken in reverse so no point shares its lane with the row's.
    #[test]
    fn points_float32_clusters_are_the_grid_rows_to_the_bit() {
        use crate::workload::lens::{HaloProfile, LensOptions, Preset};
        for profile in [HaloProfile::Sie, HaloProfile::Dpie] {
            let opts = LensOptions {
                n: Some(301),
                seed: 9,
                profile,
                ..LensOptions::default()
            };
            let p = LensProblem::preset(Preset::Ci, &opts).expect("a valid preset");
            let split = p.split(SplitModel::Cpu);
            let t32 = tables32(&split.cluster_problem);
            assert!(t32.n_sie + t32.n_dpie > 0, "the preset has clusters");
            for j in [0, 1, 150, 300] {
                let (mut x, mut y) = (vec![f32::NAN; p.n], vec![f32::NAN; p.n]);
                halos_along_row(t32, p.pixel as f32, j, &mut x, &mut y);
                let columns: Vec<i32> = (0..p.n as i32).rev().collect();
                let [px, py] = halos_at_points(t32, p.pixel as f32, &columns, &vec![j; p.n]);
                for (q, &i) in columns.iter().enumerate() {
                    let i = i as usize;
                    assert_eq!(
                        (px[q].to_bits(), py[q].to_bits()),
                        (x[i].to_bits(), y[i].to_bits()),
                        "{profile:?} pixel ({i}, {j})"
                    );
                }
            }
        }
    }

    /// Flagged pixels settled with float64 clusters (`settle_flagged`) moved by exactly the clusters'
    /// float64 − float32 difference at them (the clusters alone on the grid), are within the bound they
    /// were settled with (their cell's far bound plus the rounding without the clusters' float32 share),
    /// and the settled field is within the budget everywhere; some are settled and some still recomputed.
    #[test]
    fn settled_pixels_are_within_their_float64_cluster_bound() {
        use crate::workload::lens::{LensOptions, Preset};
        for (n, seed) in [(1024, 5), (700, 11)] {
            let opts = LensOptions {
                n: Some(n),
                seed,
                ..LensOptions::default()
            };
            let p = LensProblem::preset(Preset::Ci, &opts).expect("a valid preset");
            let split = p.split(SplitModel::Cpu);
            let rounding = split
                .clusters_f64_rounding
                .expect("a float32 plan with clusters");
            let mut field = Field::new(vec![]);
            let flagged = split.grid_into(&p, &mut field);
            let before = field.clone();
            let values_listed = flagged.iter().all(|f| {
                let ((px, _), (py, _)) = difference_neighbours(f.q % n, f.q / n, n);
                let at = |q: usize| [0, 1].map(|c| before.components[c][q]);
                f.values == [at(f.q), at(px), at(py)]
            });
            assert!(values_listed, "n {n}: the listed values are the field's");
            let (still, settled) = split.settle_flagged(&p, &mut field, flagged.clone());
            assert!(
                settled > 0 && !still.is_empty(),
                "n {n}: settled {settled} of {}",
                flagged.len()
            );
            let reference = p.cpu_grid(&p.tables64);
            // The clusters alone on the grid, in float64 and in float32 (the grid pass's sums).
            let clusters = split.cluster_problem.as_deref().expect("clusters");
            let (c64, c32) = (
                clusters.cpu_grid(&clusters.tables64),
                clusters.cpu_grid(&clusters.tables32),
            );
            for q in flagged.iter().map(|f| f.q) {
                let changed = (0..2).any(|c| field.components[c][q] != before.components[c][q]);
                assert_eq!(changed, still.binary_search(&q).is_err(), "pixel {q}");
                if !changed {
                    continue;
                }
                for c in 0..2 {
                    let shift = field.components[c][q] - before.components[c][q];
                    let expected = c64.components[c][q] - c32.components[c][q];
                    assert!(
                        (shift - expected).abs() <= 1e-12,
                        "n {n}, pixel {q}: shifted by {shift:.6e}, clusters' float64 − float32 {expected:.6e}"
                    );
                }
                let bound = split.bound[split.cell_of(q, n)] + rounding + f64::EPSILON * p.pixel;
                let err = (0..2)
                    .map(|c| (field.components[c][q] - reference.components[c][q]).abs())
                    .fold(0.0, f64::max);
                assert!(
                    err <= bound,
                    "n {n}, pixel {q}: error {err:.3e} over {bound:.3e}"
                );
            }
            // With the rest recomputed, every pixel is within its budget.
            p.recompute_listed(&mut field, &still);
            let (worst, over) = p.budget(&field, &reference);
            assert_eq!(over, 0, "n {n}: worst {worst:.3} of the budget");
        }
    }

    /// The square-root-free rule gives what the eigenvalues themselves give, on random matrices from
    /// pixel-scale entries to tiny ones and near-singular ones (cases within 1e-9 of the limit, where
    /// rounding may decide either way, left out), and on the limiting cases.
    #[test]
    fn the_flag_rule_is_the_eigenvalues_rule() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(17);
        let (mut flagged, mut tried) = (0, 0);
        for _ in 0..200_000 {
            let scale = 10f64.powf(rng.random_range(-6.0..0.0));
            let [a, b, c] = [0; 3].map(|_| scale * rng.random_range(-1.0..1.0));
            let limit = scale * 10f64.powf(rng.random_range(-4.0..0.0));
            // Half of them near-singular: c chosen so det is a small multiple of the limit.
            let c = if rng.random_bool(0.5) && a.abs() > 0.0 {
                (b * b + rng.random_range(-3.0..3.0) * limit * a.abs()) / a
            } else {
                c
            };
            let (mean, half) = (0.5 * (a + c), 0.5 * (a - c));
            let radius = (half * half + b * b).sqrt();
            let least = (mean - radius).abs().min((mean + radius).abs());
            let margin = [least, a.abs(), c.abs()].map(|v| (v - limit).abs() / limit);
            if margin.iter().any(|&m| m < 1e-9) {
                continue;
            }
            let expected = least < limit || a.abs() < limit || c.abs() < limit;
            assert_eq!(
                below_limit(a, b, c, limit),
                expected,
                "a {a:e} b {b:e} c {c:e} limit {limit:e}"
            );
            tried += 1;
            flagged += usize::from(expected);
        }
        // Both outcomes were exercised, many times.
        assert!(
            flagged > 10_000 && tried - flagged > 10_000,
            "{flagged} of {tried}"
        );
        assert!(below_limit(0.0, 0.0, 0.0, 1e-9));
        assert!(!below_limit(0.2, 0.0, 0.2, 1e-4));
        assert!(below_limit(0.2, 0.2, 0.2, 1e-4), "a singular matrix");
    }

    /// The pixels the grid pass lists (flagged per band as its rows are made, the bands' last rows
    /// after) are exactly those a plain pass over the finished field flags, in order, and those a naive
    /// rule per pixel flags (the eigenvalues by their square root): on sizes whose last band is whole, one
    /// row, and a few rows, with realistic galaxies (float64 direct parts), and with a critical curve on
    /// the last row (differenced backwards).
    #[test]
    fn the_grid_pass_lists_the_flagged_pixels_of_a_plain_pass() {
        use crate::workload::lens::{LensOptions, Preset};
        let mut last_bands = Vec::new();
        let (mut band_last_rows, mut grid_last_rows) = (0, 0);
        let mut direct_f64 = Vec::new();
        let preset = |n, galaxy_sigma| {
            let opts = LensOptions {
                n: Some(n),
                galaxy_sigma,
                seed: 3,
                ..LensOptions::default()
            };
            LensProblem::preset(Preset::Ci, &opts).expect("a valid preset")
        };
        // A cluster moved so that its critical curve (radius about b) touches the last row: the presets'
        // flags never reach that row (it is differenced backwards).
        let on_last_row = {
            let p = preset(1025, (10.0, 15.0));
            let mut h = p.halos.clone();
            let k = (0..h.len())
                .find(|&k| h.b[k] >= CLUSTER_B_ARCSEC)
                .expect("a cluster");
            (h.x0[k], h.y0[k]) = (p.coord(400) + 0.3 * p.pixel, p.coord(1024) - h.b[k]);
            LensProblem::new("on the last row", 1025, p.pixel, p.cosmology, h).expect("valid halos")
        };
        for (p, name) in [
            (preset(256, (10.0, 15.0)), "paper's"),
            (preset(257, (10.0, 15.0)), "paper's"),
            (preset(259, (10.0, 15.0)), "paper's"),
            (preset(257, (110.0, 130.0)), "realistic"),
            (on_last_row, "paper's, a critical curve on the last row"),
        ] {
            let n = p.n;
            let split = p.split(SplitModel::Cpu);
            let mut field = Field::new(vec![]);
            let listed: Vec<usize> = (split.grid_into(&p, &mut field).iter())
                .map(|f| f.q)
                .collect();
            let plain = if split.plan.direct_f64 {
                plain_pass::<f64>(split, &p, &field)
            } else {
                plain_pass::<f32>(split, &p, &field)
            };
            assert!(
                !plain.is_empty(),
                "{n}, {name}: nothing flagged, nothing tested"
            );
            assert_eq!(listed, plain, "{n}, {name}");
            // Independently, pixel by pixel: the mixed schemes' neighbours, each cell's limit, and the
            // eigenvalues themselves (pixels at their limit, where rounding decides, left out:
            // `naive_flag`).
            let step = split.plan.step;
            let mut ties = 0;
            for (q, expected) in (0..n * n).map(|q| (q, naive_flag(split, &p, &field, q))) {
                match expected {
                    Some(flagged) => {
                        assert_eq!(
                            listed.binary_search(&q).is_ok(),
                            flagged,
                            "{name}, pixel {q}"
                        )
                    }
                    None => ties += 1,
                }
            }
            assert!(ties < 3, "{ties} pixels at their limit");
            // The rows the bands flag after the others: a band's last row, and the grid's last.
            let row_of = |q: &usize| q / n;
            band_last_rows += listed
                .iter()
                .filter(|q| row_of(q) % step == step - 1)
                .count();
            grid_last_rows += listed.iter().filter(|q| row_of(q) == n - 1).count();
            last_bands.push(n % split.plan.step);
            direct_f64.push(split.plan.direct_f64);
        }
        // The last band whole, one row, and more than one row but not whole.
        assert!(
            last_bands.contains(&0) && last_bands.contains(&1) && last_bands.iter().any(|&r| r > 1),
            "rows in the last band beyond whole ones: {last_bands:?}"
        );
        assert_eq!(
            direct_f64,
            [false, false, false, true, false],
            "the direct parts' precision"
        );
        assert!(
            band_last_rows > 0 && grid_last_rows > 0,
            "flagged on bands' last rows {band_last_rows}, on the grid's last row {grid_last_rows}"
        );
    }

    /// Whether pixel q needs the recompute, from the finished field: `difference_neighbours` (the mixed
    /// schemes'), the pixel's cell limit, and the mapping's eigenvalues by their square root. None within
    /// 1e-9 of the limit.
    fn naive_flag(split: &Split, p: &LensProblem, field: &Field, q: usize) -> Option<bool> {
        let (n, h) = (p.n, p.pixel);
        let (i, j) = (q % n, q / n);
        let ((px, sx), (py, sy)) = difference_neighbours(i, j, n);
        let (gx, gy) = (&field.components[0], &field.components[1]);
        let (d1, d4) = (sx * (gx[px] - gx[q]), sx * (gy[px] - gy[q]));
        let (d2, d3) = (sy * (gy[py] - gy[q]), sy * (gx[py] - gx[q]));
        let (a, b, c) = (h - d1, -0.5 * (d3 + d4), h - d2);
        let (mean, half) = (0.5 * (a + c), 0.5 * (a - c));
        let radius = (half * half + b * b).sqrt();
        let least = [
            a.abs(),
            c.abs(),
            (mean - radius).abs(),
            (mean + radius).abs(),
        ];
        let far = [q, px, py].map(|q| split.bound[split.cell_of(q, n)]);
        let limit = split.flag_limit_of(far.into_iter().fold(0.0, f64::max), h);
        // Ties: within 1e-9 of the limit, or above it by up to twice the rule's rounding margin in the
        // rows' precision (which flags those on purpose, `rule_rounding`).
        let margin = if split.plan.direct_f64 {
            0.0
        } else {
            2.0 * f64::from(rule_rounding(h as f32, a as f32, b as f32, c as f32))
        };
        if least
            .iter()
            .any(|&v| v > limit * (1.0 - 1e-9) && v < limit * (1.0 + 1e-9) + margin)
        {
            return None;
        }
        Some(least.iter().any(|&v| v < limit))
    }

    /// Limits in float32 are the least float32 values not below the float64 ones; float64's are unchanged.
    #[test]
    fn float32_limits_are_rounded_up() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let mut rounded_up = 0;
        for _ in 0..100_000 {
            let limit = 10f64.powf(rng.random_range(-9.0..1.0));
            let narrowed: f32 = limit_in(limit);
            assert!(f64::from(narrowed) >= limit, "{limit} -> {narrowed}");
            assert!(
                f64::from(narrowed.next_down()) < limit,
                "{limit} -> {narrowed}: not the least"
            );
            rounded_up += usize::from(f64::from(limit as f32) < limit);
            assert_eq!(limit_in::<f64>(limit), limit);
        }
        assert!(
            rounded_up > 10_000,
            "nearest rounding went down {rounded_up} times"
        );
    }

    /// The y-pass with intrinsics gives the portable loop's bits, on stencils of varied scale.
    #[test]
    fn the_y_pass_is_the_portable_loop_to_the_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        for cells in [1, 7, 128] {
            let far: Vec<[f64; 32]> = (0..cells)
                .map(|_| {
                    std::array::from_fn(|_| {
                        rng.random_range(-1.0..1.0) * 10f64.powi(rng.random_range(-6..2))
                    })
                })
                .collect();
            let wy = lagrange(rng.random_range(0.0..1.0));
            let (mut line, mut plain) = (vec![[f64::NAN; 8]; cells], vec![[f64::NAN; 8]; cells]);
            y_pass(&wy, &far, &mut line);
            y_pass_portable(&wy, &far, &mut plain);
            let bits = |l: &[[f64; 8]]| l.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&line), bits(&plain), "{cells} cells");
            assert!(
                line.iter().flatten().all(|v| v.is_finite()),
                "every value written"
            );
        }
    }

    /// The flagged pixels of a plain pass over the finished field, row by row in the rows' precision T
    /// (the field holds them widened).
    fn plain_pass<T: SplitReal>(split: &Split, p: &LensProblem, field: &Field) -> Vec<usize> {
        let n = p.n;
        let narrowed: [Vec<T>; 2] = [0, 1].map(|c| {
            field.components[c]
                .iter()
                .map(|&v| T::from_f64(v))
                .collect()
        });
        let mut plain = Vec::new();
        for j in 0..n {
            let mut flags = split.flags_for_row::<T>(j, p);
            let (next, sy) = next_row(j, n);
            let [gx, gy] = &narrowed;
            let rows = [(gx, j), (gy, j), (gx, next), (gy, next)].map(|(g, q)| &g[q * n..][..n]);
            flags.list(j, sy, rows);
            plain.extend(flags.listed.iter().map(|f| f.q));
        }
        plain
    }

    /// Streamed rows are plain copies (float32 ones widened), at any alignment and length.
    #[test]
    fn streamed_rows_are_copies() {
        let from: Vec<f64> = (0..100).map(|k| k as f64 * 0.25 - 3.0).collect();
        for start in 0..5 {
            for len in [0, 1, 3, 4, 5, 17, 64, 95] {
                let narrow: Vec<f32> = from.iter().map(|&v| v as f32 + 1e-3).collect();
                let widened: Vec<f64> = narrow.iter().map(|&v| f64::from(v)).collect();
                let (mut to, mut to32) = (vec![f64::NAN; 100], vec![f64::NAN; 100]);
                let span = start..start + len;
                // SAFETY: fenced before `to` and `to32` are read, on this thread.
                unsafe {
                    f64::stream_widened(&mut to[span.clone()], &from[span.clone()]);
                    f32::stream_widened(&mut to32[span.clone()], &narrow[span.clone()]);
                }
                stream_fence();
                for (to, from) in [(&to, &from), (&to32, &widened)] {
                    assert_eq!(&to[span.clone()], &from[span.clone()]);
                    assert!(to[..start]
                        .iter()
                        .chain(&to[start + len..])
                        .all(|v| v.is_nan()));
                }
            }
        }
    }
}
