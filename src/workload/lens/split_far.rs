//! The `cpu` model's coarse lattice in two levels (issue 17; docs/lens.md, "The near/far split").
//!
//! The split's coarse lattice (step H) needs every galaxy at every node: nodes × galaxies interactions, the
//! largest single part of a `cpu` evaluation. Most of those galaxies are far from most nodes, where their
//! summed field is smooth on the scale of several H. So the lattice's nodes are taken in blocks of
//! [`BLOCK`] × [`BLOCK`]; the galaxies within D of one of a block's nodes ("close") are summed exactly at its nodes, and the
//! others come from a second lattice of step 2H holding every galaxy, interpolated to the nodes by
//! six-node Lagrange weights, with the close galaxies' own values on that lattice taken out first (the same
//! construction as the pixels' far field from the lattice, one level up). Every node of the first lattice
//! sits at 0 or ½ of a second-lattice cell per axis, where the weights are fixed.
//!
//! The price is an error per node: Σ over the galaxies farther than D of b·f₆(r/2H), f₆ the measured worst
//! error of six-node interpolation of a unit isothermal deflection, which falls as r⁻⁶ so the sum is held
//! to a small share of the far-field target with D of about 10 H. The pixels' cubic interpolation carries
//! it (times its Lebesgue constant) into every pixel cell's bound, and the second lattice's float32
//! rounding into the plan's rounding estimate.

use super::cpu::add_halo_along_row;
use super::model::HaloEval;
use super::split::{least_distance, GroupedAxis, NearRun, SplitReal};
use super::tables::KernelTables;
use super::LensProblem;
use rayon::prelude::*;

/// First-lattice nodes per block side: a block's nodes share one list of close galaxies.
pub(super) const BLOCK: usize = 8;

/// Second-lattice nodes per side of a block's union stencil: its BLOCK / 2 cells and the six-node reach.
const UNION: usize = BLOCK / 2 + 5;

/// The six Lagrange weights of nodes −2 … 3 at half a cell.
pub(super) const HALF: [f64; 6] = [
    3.0 / 256.0,
    -25.0 / 256.0,
    150.0 / 256.0,
    150.0 / 256.0,
    -25.0 / 256.0,
    3.0 / 256.0,
];

/// Largest Σ|w| of the 6 × 6 weights at the nodes' offsets (0 or ½ per axis): (356/256)².
pub(super) const LEBESGUE6: f64 = (356.0 / 256.0) * (356.0 / 256.0);

/// The second level of the `cpu` model's coarse lattice (see the module's comment).
#[derive(Debug, Clone)]
pub(super) struct FarLevel {
    /// D, arcsec: galaxies within D of one of a block's nodes are summed exactly there.
    pub(super) radius: f64,
    /// Blocks per side of the first lattice.
    blocks: usize,
    /// Second-lattice nodes per side: node (A, C) is first-lattice node (2A − 4, 2C − 4).
    pub(super) nodes2: usize,
    /// Per block row: the galaxies close to its blocks `first..=last`.
    close: Vec<Vec<NearRun>>,
    /// Per block, row-major: the bound of its nodes' error from the second lattice.
    pub(super) error: Vec<f64>,
    /// Largest share of the galaxies' float32 estimate that one block sums exactly.
    pub(super) close_share: f64,
    /// The galaxies alone on the second lattice (shifted so its node (A, C) is the problem's pixel).
    pub(super) problem: Option<Box<LensProblem>>,
}

impl FarLevel {
    /// The geometry and error bounds of the second level for a lattice of `nodes` (a multiple of BLOCK)
    /// from `origin` in steps of `cell`, close radius `radius`: `f6` is the six-node error table's
    /// function (distance in second-lattice cells), `estimates` each galaxy's float32 error estimate.
    pub(super) fn new(
        galaxies: &[HaloEval],
        estimates: &[f64],
        (origin, cell, nodes): (f64, f64, usize),
        radius: f64,
        f6: &(dyn Fn(f64) -> f64 + Sync),
    ) -> FarLevel {
        let axis = GroupedAxis {
            coord: |i: usize| origin + i as f64 * cell,
            spacing: cell,
            count: nodes,
            group: BLOCK,
        };
        let blocks = axis.groups();
        let nodes2 = nodes / 2 + UNION - BLOCK / 2;
        let close = axis.runs_within(galaxies, radius);
        let total: f64 = estimates.iter().sum();
        let (error, share): (Vec<f64>, Vec<f64>) = (0..blocks * blocks)
            .into_par_iter()
            .map(|q| {
                let (bi, bj) = (q / blocks, q % blocks);
                let mut is_close = vec![false; galaxies.len()];
                for run in &close[bi] {
                    if (run.first..=run.last).contains(&bj) {
                        is_close[run.galaxy] = true;
                    }
                }
                let (xs, ys) = (axis.span(bj), axis.span(bi));
                let far: f64 = (galaxies.iter().zip(&is_close))
                    .filter(|(_, &c)| !c)
                    .map(|(g, _)| g.strength() * f6(least_distance(g, xs, ys) / (2.0 * cell)))
                    .sum();
                let close: f64 = (estimates.iter().zip(&is_close))
                    .filter(|(_, &c)| c)
                    .map(|(e, _)| e)
                    .sum();
                (far, if total > 0.0 { close / total } else { 0.0 })
            })
            .unzip();
        FarLevel {
            radius,
            blocks,
            nodes2,
            close,
            error,
            close_share: share.into_iter().fold(0.0, f64::max),
            problem: None,
        }
    }

    /// The coordinate shift that makes the second lattice's node (A, C) its problem's pixel (A, C), for a
    /// first lattice from `origin` in steps of `cell`.
    pub(super) fn shift(&self, origin: f64, cell: f64) -> f64 {
        origin - 4.0 * cell + (self.nodes2 - 1) as f64 * cell
    }

    /// Mean number of close galaxies per block.
    pub(super) fn mean_close(&self) -> f64 {
        let pairs: usize = (self.close.iter().flatten())
            .map(|r| r.last - r.first + 1)
            .sum();
        pairs as f64 / (self.blocks * self.blocks) as f64
    }

    /// The bound of the error the second level leaves at first-lattice node (a, c).
    pub(super) fn node_error(&self, a: usize, c: usize) -> f64 {
        self.error[(c / BLOCK) * self.blocks + a / BLOCK]
    }

    /// The worst error of the nodes a pixel cell's 4 × 4 stencil reads (nodes a … a + 3, c … c + 3).
    pub(super) fn stencil_error(&self, a: usize, c: usize) -> f64 {
        let mut worst = 0.0f64;
        for dc in [0, 3] {
            for da in [0, 3] {
                worst = worst.max(self.node_error(a + da, c + dc));
            }
        }
        worst
    }

    /// The galaxies' summed field at every node of the first lattice (`nodes` per side, step `cell`), in
    /// precision T, x and y planes: `coarse` are the first lattice's tables (galaxy k is row k).
    pub(super) fn lattice<T: SplitReal>(
        &self,
        nodes: usize,
        cell: f64,
        coarse: &KernelTables<T>,
    ) -> [Vec<f64>; 2] {
        let n2 = self.nodes2;
        let far_tables = T::tables(&self.problem);
        let [l2x, l2y] = match &self.problem {
            Some(q) => {
                let mut field = q.cpu_grid(far_tables);
                let y = field.components.pop().expect("two components");
                [field.components.pop().expect("two components"), y]
            }
            None => [0, 1].map(|_| vec![0.0; n2 * n2]),
        };
        let cell2 = T::from_f64(2.0 * cell);
        let mut out = [0, 1].map(|_| vec![0.0; nodes * nodes]);
        let [ox, oy] = &mut out;
        let cell = T::from_f64(cell);
        let second = [&l2x, &l2y];
        (ox.par_chunks_mut(BLOCK * nodes))
            .zip(oy.par_chunks_mut(BLOCK * nodes))
            .zip(&self.close)
            .enumerate()
            .for_each(|(bi, ((band_x, band_y), runs))| {
                // Each block's union stencil of the second lattice, u[bj][comp][r·UNION + col], less its
                // close galaxies.
                let mut u = vec![[[0.0f64; UNION * UNION]; 2]; self.blocks];
                for (bj, stencil) in u.iter_mut().enumerate() {
                    for (comp, plane) in stencil.iter_mut().enumerate() {
                        for (r, row) in plane.chunks_exact_mut(UNION).enumerate() {
                            let at = (BLOCK / 2 * bi + r) * n2 + BLOCK / 2 * bj;
                            row.copy_from_slice(&second[comp][at..at + UNION]);
                        }
                    }
                }
                // A close galaxy's values on the union stencils of its blocks: a strip of UNION rows from
                // second-lattice column 4·first, made here rather than kept per galaxy (tables of every
                // galaxy cost more to write and read than to evaluate), in whole vectors of eight lanes.
                let mut strip = [0, 1].map(|_| vec![T::ZERO; UNION * n2.next_multiple_of(8)]);
                for run in runs {
                    let a0 = BLOCK / 2 * run.first;
                    let width = (BLOCK / 2 * (run.last - run.first) + UNION).next_multiple_of(8);
                    let [sx, sy] = &mut strip;
                    for r in 0..UNION {
                        let (x, y) = (&mut sx[r * width..][..width], &mut sy[r * width..][..width]);
                        let j = (BLOCK / 2 * bi + r) as i32;
                        add_halo_along_row::<false, T>(
                            far_tables, run.galaxy, cell2, j, a0 as i32, x, y,
                        );
                    }
                    for (b, stencil) in u[run.first..=run.last].iter_mut().enumerate() {
                        for (plane, values) in stencil.iter_mut().zip(&strip) {
                            for r in 0..UNION {
                                let row: &mut [f64; UNION] = (&mut plane[r * UNION..][..UNION])
                                    .try_into()
                                    .expect("a union row");
                                let from: &[T; UNION] = (&values[r * width + BLOCK / 2 * b..]
                                    [..UNION])
                                    .try_into()
                                    .expect("a union row");
                                for (v, t) in row.iter_mut().zip(from) {
                                    *v -= t.to_f64();
                                }
                            }
                        }
                    }
                }
                // The far part at each node: node offset l of a block sits at ½·(l mod 2) of the second
                // lattice's cell l / 2, whose six nodes are union nodes l / 2 … l / 2 + 5.
                let interpolate = |values: &[f64], l: usize, stride: usize| -> f64 {
                    let first = l / 2;
                    if l.is_multiple_of(2) {
                        values[(first + 2) * stride]
                    } else {
                        (0..6).map(|d| HALF[d] * values[(first + d) * stride]).sum()
                    }
                };
                for (bj, stencil) in u.iter().enumerate() {
                    for (comp, plane) in stencil.iter().enumerate() {
                        let band = if comp == 0 {
                            &mut *band_x
                        } else {
                            &mut *band_y
                        };
                        for lc in 0..BLOCK {
                            let line: [f64; UNION] =
                                std::array::from_fn(|col| interpolate(&plane[col..], lc, UNION));
                            let row = &mut band[lc * nodes + BLOCK * bj..][..BLOCK];
                            for (la, v) in row.iter_mut().enumerate() {
                                *v = interpolate(&line, la, 1);
                            }
                        }
                    }
                }
                // The close galaxies' exact values, along each row over the blocks they are close to.
                let (mut ax, mut ay) = (vec![T::ZERO; nodes], vec![T::ZERO; nodes]);
                for lc in 0..BLOCK {
                    ax.fill(T::ZERO);
                    ay.fill(T::ZERO);
                    let j = (BLOCK * bi + lc) as i32;
                    for run in runs {
                        let (i0, i1) = (BLOCK * run.first, BLOCK * (run.last + 1));
                        let (sx, sy) = (&mut ax[i0..i1], &mut ay[i0..i1]);
                        add_halo_along_row::<true, T>(
                            coarse, run.galaxy, cell, j, i0 as i32, sx, sy,
                        );
                    }
                    let rows = band_x[lc * nodes..][..nodes]
                        .iter_mut()
                        .zip(&mut band_y[lc * nodes..][..nodes]);
                    for ((x, y), (gx, gy)) in rows.zip(ax.iter().zip(&ay)) {
                        *x += gx.to_f64();
                        *y += gy.to_f64();
                    }
                }
            });
        out
    }
}
