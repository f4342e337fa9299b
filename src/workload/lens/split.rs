//! The near/far split of the lens grid (issue 17; docs/lens.md, "The near/far split"): its plan and bounds,
//! the `cpu` model's grid, and the lists the device kernels read (cl/common/lens_split.h, device.rs).
//!
//! Cluster halos are summed directly at every pixel. The galaxies' summed field G is evaluated on a coarse
//! grid of step H (s pixels) and interpolated to the pixels by tensor-product cubic Lagrange interpolation
//! (4 × 4 nodes). Within R of a galaxy that interpolant is wrong (the field turns on the scale of the
//! distance), so for every pixel within R of galaxy g the interpolant of g's own field is taken out and g's
//! exact deflection put in: α(p) = I[G](p) + Σ_{|p − g| ≤ R} (α_g(p) − I[α_g](p)) + Σ_clusters α_c(p), with
//! I[α_g] read from a table of g's values at the nodes around it. What is left is the interpolation error of
//! the galaxies farther than R, bounded per coarse cell by Σ_g b_g·f(r_g/H), f the measured worst error of a
//! unit isothermal deflection at distance r (in cells). Pixels whose magnification needs more accuracy than
//! that bound leaves are recomputed directly, as `mixed-budget` does. The coarse field and the clusters come
//! from the direct `cpu` grid in float32 (their estimated error joins the bound); the near terms, the
//! interpolation and the recompute are float64.

use super::cpu::difference_neighbours;
use super::mixed::{BUDGET_SAFETY, CLUSTER_B_ARCSEC};
use super::model::{HaloEval, Halos};
use super::LensProblem;
use crate::exec::Field;
use rayon::prelude::*;

/// Cost of one near correction (an exact evaluation and the interpolant of one galaxy, scalar float64)
/// against one interaction of the vectorised direct grid, measured at `ci`.
const NEAR_COST: f64 = 20.0;

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

/// One galaxy's values at the nodes around it: first node column and row, side, values row by row.
type NodeTable = (i64, i64, usize, Vec<(f64, f64)>);

/// Four rows of node values combined with the weights `w`: the y-pass of the separable interpolation.
fn fold_rows(rows: [&[(f64, f64)]; 4], w: &[f64; 4]) -> Vec<(f64, f64)> {
    (0..rows[0].len())
        .map(|a| {
            let (mut sx, mut sy) = (0.0, 0.0);
            for (r, &wr) in rows.iter().zip(w) {
                sx += wr * r[a].0;
                sy += wr * r[a].1;
            }
            (sx, sy)
        })
        .collect()
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
    /// Estimated float32 error of the direct parts (clusters, and the coarse galaxy field through the
    /// interpolation, whose weights' absolute sum is at most LEBESGUE), added to every pixel's bound.
    pub rounding_error: f64,
    /// Halos in the near/far treatment (b below CLUSTER_B_ARCSEC) and summed directly.
    pub galaxies: usize,
    pub direct: usize,
}

/// Everything one split evaluation needs, made once per problem (the plan, the coarse lattice, the error
/// bound per cell).
#[derive(Debug, Clone)]
pub struct Split {
    pub plan: SplitPlan,
    galaxies: Vec<HaloEval>,
    /// The galaxies alone on the coarse lattice (shifted so the lattice is a grid centred on 0), and the
    /// clusters alone on the problem's grid: both evaluated by the direct `cpu` grid in float32 (exact
    /// offsets), whose estimated error enters every pixel's bound.
    pub(super) coarse_problem: Option<Box<LensProblem>>,
    pub(super) cluster_problem: Option<Box<LensProblem>>,
    /// Coarse lattice: `nodes` × `nodes`, node (a, c) at (origin + a·H, origin + c·H).
    nodes: usize,
    origin: f64,
    cell: f64,
    /// Per coarse cell (lower-left node a, c: `bound[c * nodes + a]`), the far field's error bound.
    bound: Vec<f64>,
    /// Each galaxy's node table covers `side` × `side` nodes from `reach` nodes before its own cell.
    reach: i64,
    /// The galaxies alone on the problem's grid: their float64 tables give the device kernels' near terms
    /// and node tables (galaxy k of `galaxies` is row k of those tables: SIE rows, then dPIE rows).
    pub(super) galaxy_problem: Option<Box<LensProblem>>,
    /// The device kernels' lists, made when a device first runs the split.
    lists: std::sync::OnceLock<SplitLists>,
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

/// Worst interpolation error of a unit isothermal deflection (b = 1, ellipticity up to `e`) at distance q
/// cells from its centre, for q on the table's steps, made non-increasing in q: measured by placing the
/// centre at 7 offsets within a cell and the point at 32 angles.
fn error_table(e: f64) -> Vec<f64> {
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
                    let (wx, wy) = (lagrange(px - ci), lagrange(py - cj));
                    let (mut ix, mut iy) = (0.0, 0.0);
                    for (dj, &wyj) in wy.iter().enumerate() {
                        for (di, &wxi) in wx.iter().enumerate() {
                            let nx = ci + di as f64 - 1.0 + ox;
                            let ny = cj + dj as f64 - 1.0 + oy;
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

impl Split {
    /// Builds the split of `p`: which halos are galaxies, the cell step and near radius (the cheapest pair,
    /// by a cost model, whose far-field bound stays within the target everywhere, or the most accurate one
    /// tried), the lattice and the per-cell bound.
    pub fn new(p: &LensProblem) -> Split {
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
        let table = error_table(e_max);
        let f = |q: f64| {
            let k = (q / F_TABLE_STEP).floor() as usize;
            // Beyond the table the error falls as q⁻⁴ from its last value.
            table
                .get(k)
                .copied()
                .unwrap_or_else(|| table[table.len() - 1] * (F_TABLE_CELLS / q).powi(4))
        };
        let target = p.f32_error_estimate();
        let n = p.n as f64;
        let mut best: Option<Split> = None;
        for k in [2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0] {
            // Cost per evaluation: coarse nodes × galaxies (the vectorised direct grid), plus near pixels
            // (π R²/h² each, weighed NEAR_COST) per galaxy: s⁴ = n²/(NEAR_COST π k²).
            let s = (n * n / (NEAR_COST * std::f64::consts::PI * k * k))
                .powf(0.25)
                .round()
                .max(1.0) as usize;
            let split = Split::with(p, &galaxies, s, k * s as f64 * p.pixel, &f, target);
            let done = split.plan.worst_bound <= target;
            best = Some(split);
            if done || galaxies.is_empty() {
                break;
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
        let rounding =
            |q: &Option<Box<LensProblem>>| q.as_ref().map_or(0.0, |q| q.f32_error_estimate());
        split.plan.rounding_error =
            rounding(&split.cluster_problem) + LEBESGUE * rounding(&split.coarse_problem);
        split
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        p: &LensProblem,
        galaxies: &[HaloEval],
        step: usize,
        radius: f64,
        f: &(dyn Fn(f64) -> f64 + Sync),
        target: f64,
    ) -> Split {
        let cell = step as f64 * p.pixel;
        // Nodes from one cell before the first pixel to two after the last.
        let origin = p.coord(0) - cell;
        let nodes = (p.n - 1) / step + 4;
        let diagonal = std::f64::consts::SQRT_2 * cell;
        let bound: Vec<f64> = (0..nodes * nodes)
            .into_par_iter()
            .map(|q| {
                let (x, y) = (
                    origin + (q % nodes) as f64 * cell,
                    origin + (q / nodes) as f64 * cell,
                );
                galaxies
                    .iter()
                    .filter_map(|g| {
                        let r = (x - g.x0).hypot(y - g.y0);
                        // A pixel of this cell is within the diagonal of node (a, c).
                        (r + diagonal > radius)
                            .then(|| g.strength() * f((r - diagonal).max(radius) / cell))
                    })
                    .sum()
            })
            .collect();
        // Only cells that hold pixels count for the worst bound.
        let cells = (p.n - 1) / step + 1;
        let worst_bound = (0..cells * cells)
            .map(|q| bound[(q / cells + 1) * nodes + q % cells + 1])
            .fold(0.0, f64::max);
        Split {
            plan: SplitPlan {
                step,
                radius,
                target_error: target,
                worst_bound,
                galaxies: galaxies.len(),
                direct: 0,
                rounding_error: 0.0,
            },
            galaxies: galaxies.to_vec(),
            coarse_problem: None,
            cluster_problem: None,
            nodes,
            origin,
            cell,
            bound,
            reach: (radius / cell).ceil() as i64 + 3,
            galaxy_problem: None,
            lists: std::sync::OnceLock::new(),
        }
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

    /// Flag limit of the pixels of pixel cell (a, c): their error bound E (the cell's far-field bound plus
    /// the float32 estimate of the direct parts) serves magnifications below h / (6·E·BUDGET_SAFETY), the
    /// reasoning of `budget_magnification`.
    fn flag_limit(&self, a: usize, c: usize, h: f64) -> f64 {
        let far = self.bound[(c + 1) * self.nodes + a + 1];
        6.0 * (far + self.plan.rounding_error + f64::EPSILON * h) * BUDGET_SAFETY
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
        let step = self.plan.step;
        let cells_x = (p.n - 1) / step + 1;
        let radius = self.plan.radius;
        // Per galaxy, the range of pixel cells its near disc touches, along one axis.
        let cells = |centre: f64| {
            let lo = ((centre - radius - p.coord(0)) / p.pixel).ceil().max(0.0);
            let hi = ((centre + radius - p.coord(0)) / p.pixel).floor();
            (hi >= 0.0 && lo < p.n as f64)
                .then(|| (lo as usize / step, (hi as usize).min(p.n - 1) / step))
        };
        let mut count = vec![0i32; cells_x * cells_x + 1];
        let boxes: Vec<_> = self
            .galaxies
            .iter()
            .map(|g| cells(g.x0).zip(cells(g.y0)))
            .collect();
        for &((a0, a1), (c0, c1)) in boxes.iter().flatten() {
            for c in c0..=c1 {
                for a in a0..=a1 {
                    count[c * cells_x + a + 1] += 1;
                }
            }
        }
        for q in 1..count.len() {
            count[q] += count[q - 1];
        }
        let mut cell_galaxies = vec![0i32; count[cells_x * cells_x] as usize];
        let mut fill = count.clone();
        for (g, b) in boxes.iter().enumerate() {
            let Some(((a0, a1), (c0, c1))) = *b else {
                continue;
            };
            for c in c0..=c1 {
                for a in a0..=a1 {
                    let at = &mut fill[c * cells_x + a];
                    cell_galaxies[*at as usize] = g as i32;
                    *at += 1;
                }
            }
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

    /// The galaxies' summed field at every node (zero without galaxies).
    fn coarse(&self) -> Vec<(f64, f64)> {
        match &self.coarse_problem {
            Some(c) => {
                let field = c.cpu_grid(&c.tables32);
                let [gx, gy] = [&field.components[0], &field.components[1]];
                gx.iter().zip(gy).map(|(&x, &y)| (x, y)).collect()
            }
            None => vec![(0.0, 0.0); self.nodes * self.nodes],
        }
    }

    /// The deflection at every pixel of `p`.
    pub fn grid(&self, p: &LensProblem) -> Field {
        let n = p.n;
        let step = self.plan.step;
        let nodes = self.nodes;
        let coarse = self.coarse();
        // Per galaxy, the nodes around it: a box of nodes covering every cell a near pixel can be in,
        // with the 4 × 4 stencil's reach, and g's values there.
        let tables: Vec<NodeTable> = self
            .galaxies
            .par_iter()
            .map(|g| {
                let (a0, c0) = self.table_origin(g);
                let side = self.side();
                let values = (0..side * side)
                    .map(|q| {
                        let x = self.origin + (a0 + (q % side) as i64) as f64 * self.cell;
                        let y = self.origin + (c0 + (q / side) as i64) as f64 * self.cell;
                        g.at(x, y)
                    })
                    .collect();
                (a0, c0, side, values)
            })
            .collect();
        let radius = self.plan.radius;
        let weights = self.weights();
        // The clusters, directly at every pixel; the galaxies' terms are added to them.
        let (mut gx, mut gy) = match &self.cluster_problem {
            Some(c) => {
                let mut field = c.cpu_grid(&c.tables32);
                let gy = field.components.pop().expect("two components");
                (field.components.pop().expect("two components"), gy)
            }
            None => (vec![0.0; n * n], vec![0.0; n * n]),
        };
        gx.par_chunks_mut(n)
            .zip(gy.par_chunks_mut(n))
            .enumerate()
            .for_each(|(j, (gx_row, gy_row))| {
                let y = p.coord(j);
                // Pixel j lies in node row c = j / step + 1 at fraction (j % step) / step; pixel i in node
                // column i / step + 1. The interpolation is separable: first along y for every node column
                // (4 rows into one), then along x per pixel.
                let c = j / step + 1;
                let wy = weights[j % step];
                let along_x = |line: &[(f64, f64)], a: usize, wx: &[f64; 4]| {
                    let (mut sx, mut sy) = (0.0, 0.0);
                    for (v, &w) in line[a - 1..a + 3].iter().zip(wx) {
                        sx += w * v.0;
                        sy += w * v.1;
                    }
                    (sx, sy)
                };
                let line = fold_rows(
                    std::array::from_fn(|d| &coarse[(c + d - 1) * nodes..][..nodes]),
                    &wy,
                );
                for i in 0..n {
                    let (ax, ay) = along_x(&line, i / step + 1, &weights[i % step]);
                    gx_row[i] += ax;
                    gy_row[i] += ay;
                }
                // The near galaxies: on the pixels of this row within R, g's exact deflection replaces its
                // interpolant.
                for (g, (a0, c0, side, values)) in self.galaxies.iter().zip(&tables) {
                    let dy = y - g.y0;
                    if dy.abs() > radius {
                        continue;
                    }
                    let half = (radius * radius - dy * dy).sqrt();
                    let first = ((g.x0 - half - p.coord(0)) / p.pixel).ceil().max(0.0) as usize;
                    let last = ((g.x0 + half - p.coord(0)) / p.pixel).floor();
                    if last < 0.0 || first >= n {
                        continue;
                    }
                    let last = (last as usize).min(n - 1);
                    let row0 = (c as i64 - 1 - c0) as usize;
                    let own = fold_rows(
                        std::array::from_fn(|d| &values[(row0 + d) * side..][..*side]),
                        &wy,
                    );
                    // The exact term over the segment (one loop the compiler vectorises for an SIE), then
                    // the interpolant taken out cell by cell (pixel i is in node column i / step + 1).
                    let (sx, sy) = (&mut gx_row[first..=last], &mut gy_row[first..=last]);
                    g.add_along_row(p.coord(first), p.pixel, y, sx, sy);
                    for i in first..=last {
                        let a = (i / step + 1) as i64 - a0;
                        let (ix, iy) = along_x(&own, a as usize, &weights[i % step]);
                        gx_row[i] -= ix;
                        gy_row[i] -= iy;
                    }
                }
            });
        Field::new(vec![gx, gy])
    }
}

impl LensProblem {
    /// The split's geometry and error bounds for this problem (made once; not part of an evaluation).
    pub fn split(&self) -> &Split {
        self.split.get_or_init(|| Split::new(self))
    }

    /// The split grid on the `cpu` model, with the pixels whose magnification its error bound cannot serve
    /// recomputed directly in float64: a pixel with bound E (its cell's far-field bound plus the float32
    /// estimate of the direct parts) is fine while its axis and directional magnifications stay below
    /// h / (6·E·BUDGET_SAFETY) (the reasoning of `budget_magnification`).
    pub(super) fn cpu_split(&self) -> Field {
        let split = self.split();
        let mut field = split.grid(self);
        let n = self.n;
        let h = self.pixel;
        let mask: Vec<bool> = (0..n * n)
            .into_par_iter()
            .map(|q| {
                if n < 2 {
                    return false;
                }
                let step = split.plan.step;
                let limit = split.flag_limit(q % n / step, q / n / step, h);
                let ((qx, sx), (qy, sy)) = difference_neighbours(q % n, q / n, n);
                let (gx, gy) = (&field.components[0], &field.components[1]);
                let d1 = sx * (gx[qx] - gx[q]);
                let d4 = sx * (gy[qx] - gy[q]);
                let d2 = sy * (gy[qy] - gy[q]);
                let d3 = sy * (gx[qy] - gx[q]);
                let (a, b, c) = (h - d1, -0.5 * (d3 + d4), h - d2);
                let (mean, half) = (0.5 * (a + c), 0.5 * (a - c));
                let radius = (half * half + b * b).sqrt();
                let eig = (mean - radius).abs().min((mean + radius).abs());
                a.abs() < limit || c.abs() < limit || eig < limit
            })
            .collect();
        self.recompute(&mut field, &mask);
        field
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measured error table falls as the fourth power of the distance (cubic interpolation of a field
    /// whose fourth derivative goes as r⁻⁵ · r: b/r⁴ per cell⁴), and bounds the error at points it was not
    /// measured on.
    #[test]
    fn the_error_table_falls_as_the_fourth_power_and_bounds_other_points() {
        let table = error_table(0.15);
        let at = |q: f64| table[(q / F_TABLE_STEP) as usize];
        for q in [8.0, 16.0, 32.0] {
            let ratio = at(q) / at(2.0 * q);
            assert!(
                (8.0..=32.0).contains(&ratio),
                "f({q})/f({}) = {ratio}",
                2.0 * q
            );
        }
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
}
