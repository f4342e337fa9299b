//! The lens as device jobs of the common backend interface: the halo tables as input buffers, the grid
//! kernels of cl/common/lens_model.h, the mixed-precision pipeline of cl/common/lens_mixed.h (flags,
//! patches, compaction, float64 recompute) and the χ² delensing, in bands of rows that fit the device.

use super::mixed::{LensMode, MixedScheme};
use super::split::{tables32, tables64};
use super::tables::KernelTables;
use super::LensProblem;
use crate::backend::{
    BufferSpec, DType, HostSlice, KernelJob, Launch, Local, Precision, Program, Step, StepArg,
};
use crate::exec::{DeviceBudget, Mode, RunOptions};

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
        (
            "lens_split.h",
            include_str!("../../../cl/common/lens_split.h"),
        ),
        ("lens_all.h", include_str!("../../../cl/common/lens_all.h")),
    ],
    // Lets NVIDIA's rsqrt be the bare MUFU (no denormal fix-up); the lens clamps its arguments to normal
    // numbers, so results do not change (cl/common/astro_dialect.h, ASTRO_RSQRT).
    opencl_options: "-cl-denorms-are-zero",
};

/// Work-group size used on GPUs (a multiple of 32 and of 64).
const GPU_GROUP: usize = 256;

/// Pixels along x and rows per grid work-item, float32 and float64; must equal
/// LENS_PIXELS_PER_ITEM_f32/_f64 and LENS_ROWS_PER_ITEM_f32/_f64 in cl/common/lens_model.h (tested).
pub const PIXELS_PER_ITEM: [usize; 2] = [16, 8];
pub const ROWS_PER_ITEM: [usize; 2] = [1, 1];

/// Work-items of a grid pass over `rows` rows of `n` pixels in this precision.
pub fn grid_items(precision: Precision, n: usize, rows: usize) -> usize {
    let k = usize::from(precision == Precision::F64);
    n.div_ceil(PIXELS_PER_ITEM[k]) * rows.div_ceil(ROWS_PER_ITEM[k])
}

/// Work-items of the grid-stride float64 recompute kernel, one listed pixel at a time (enough to fill a
/// large GPU).
const RECOMPUTE_ITEMS: usize = 1 << 18;

/// The slot (buffer index) of each buffer of a lens job, in the order they are declared.
mod slot {
    pub const SIE32: usize = 0;
    pub const DPIE32: usize = 1;
    pub const SIE64: usize = 2;
    pub const DPIE64: usize = 3;
    pub const GX: usize = 4;
    pub const GY: usize = 5;
    // Mixed precision only:
    pub const MASK: usize = 6;
    /// The flagged pixels (band-relative indices) and their count.
    pub const LIST: usize = 7;
    pub const COUNTER: usize = 8;
    pub const GX64: usize = 9;
    pub const GY64: usize = 10;
    pub const CLUSTERS: usize = 11;
    pub const GALAXIES: usize = 12;
}

impl LensProblem {
    /// The four halo tables as the first buffers of a job (indices slot::SIE32 .. slot::DPIE64).
    fn table_buffers<'a>(&'a self, t32: &'a KernelTables<f32>) -> Vec<BufferSpec<'a>> {
        vec![
            BufferSpec::Input(HostSlice::F32(&t32.sie)),
            BufferSpec::Input(HostSlice::F32(&t32.dpie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.sie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.dpie)),
        ]
    }

    /// The grid launch of one band in this mode (its precision; the paper's scheme on naive tables),
    /// writing slots GX/GY.
    fn grid_launch(&self, mode: LensMode, row0: usize, rows: usize) -> Step {
        let out = [slot::GX, slot::GY];
        match mode.precision() {
            Precision::F64 => grid_step(
                &self.tables64,
                [slot::SIE64, slot::DPIE64],
                out,
                self.n,
                (row0, rows),
                self.pixel,
            ),
            Precision::F32 => grid_step(
                self.f32_tables(mode),
                [slot::SIE32, slot::DPIE32],
                out,
                self.n,
                (row0, rows),
                self.pixel,
            ),
        }
    }

    /// Rows computed for a band that needs its next row too (flags, delensing): one extra unless last.
    fn extended_rows(&self, row0: usize, rows: usize) -> usize {
        (rows + 1).min(self.n - row0)
    }

    /// Bands of rows (row0, rows) for a job whose largest buffer holds `largest_elem` bytes per pixel and
    /// whose buffers hold `bytes_per_pixel` in all: each buffer fits the budget's largest allocation and all
    /// of them fit 80 % of its memory, so grids larger than the device are tiled, not refused.
    fn bands(
        &self,
        largest_elem: usize,
        bytes_per_pixel: usize,
        budget: DeviceBudget,
    ) -> Vec<(usize, usize)> {
        let budget = budget.capped(self.device_mem_cap);
        let n = self.n as u64;
        let by_alloc = budget.max_alloc.max(n * largest_elem as u64) / (n * largest_elem as u64);
        let by_mem = ((budget.mem as f64 * 0.8) as u64 / (n * bytes_per_pixel as u64)).max(1);
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

    /// The device jobs of one mode: one per band of rows.
    pub(super) fn device_plan(
        &self,
        mode: LensMode,
        budget: DeviceBudget,
        opts: &RunOptions,
    ) -> Vec<KernelJob<'_>> {
        if matches!(mode, LensMode::Mixed(_) | LensMode::Split) {
            // Per pixel: two f32 scratch, mask, list, two f64 outputs.
            return self
                .bands(8, 32, budget)
                .into_iter()
                .map(|(row0, rows)| {
                    let pipeline = self.field_pipeline(mode, row0, rows, true);
                    opts.job(&PROGRAM, vec![], pipeline.buffers, pipeline.steps)
                })
                .collect();
        }
        let dtype = match mode.precision() {
            Precision::F64 => DType::F64,
            Precision::F32 => DType::F32,
        };
        self.bands(dtype.bytes(), 2 * dtype.bytes(), budget)
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
                opts.job(
                    &PROGRAM,
                    vec![],
                    buffers,
                    vec![self.grid_launch(mode, row0, rows)],
                )
            })
            .collect()
    }

    /// Slots and steps of one band's mixed-precision grid: the float32 grid over the
    /// band plus its next row, the scheme's flags, patches, and the float64 recompute into GX64/GY64.
    /// `outputs`: the counter and the float64 grid of the band's rows come back (a gradient job);
    /// otherwise they are device scratch covering the extended rows too (the χ² delensing needs row
    /// r + 1; that row's flags use a backward difference when it is the band's last).
    fn mixed_pipeline(
        &self,
        scheme: MixedScheme,
        row0: usize,
        rows: usize,
        outputs: bool,
    ) -> FieldPipeline<'_> {
        let mode = LensMode::Mixed(scheme);
        let t32 = self.f32_tables(mode);
        let n = self.n;
        let ext = self.extended_rows(row0, rows);
        let flag_rows = if outputs { rows } else { ext };
        let band = flag_rows * n;
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
                len: band,
            },
            kept(DType::U32, 1),
            kept(DType::F64, band),
            kept(DType::F64, band),
            BufferSpec::Input(HostSlice::I32(&patches[0].1)),
            BufferSpec::Input(HostSlice::I32(&patches[1].1)),
        ]);
        let (axis, cross, eig) = self.flag_limits(scheme);
        let mut steps = vec![
            self.grid_launch(mode, row0, ext),
            Step::Fill {
                buffer: slot::COUNTER,
                byte: 0,
            },
            Step::Launch(Launch {
                kernel: "lens_flag".into(),
                args: vec![
                    StepArg::Buffer(slot::GX),
                    StepArg::Buffer(slot::GY),
                    StepArg::I32(n as i32),
                    StepArg::I32(flag_rows as i32),
                    StepArg::I32(ext as i32),
                    StepArg::F32(self.pixel as f32),
                    StepArg::F32(axis),
                    StepArg::F32(cross),
                    StepArg::F32(eig),
                    StepArg::Buffer(slot::GX64),
                    StepArg::Buffer(slot::GY64),
                    StepArg::Buffer(slot::MASK),
                    StepArg::Buffer(slot::LIST),
                    StepArg::Buffer(slot::COUNTER),
                ],
                global: band,
                local: Local::Prefer(GPU_GROUP),
            }),
        ];
        if scheme.uses_patches() {
            for (k, (size, centres)) in patches.iter().enumerate() {
                let count = centres.len() / 2;
                if count == 0 {
                    continue;
                }
                steps.push(Step::Launch(Launch {
                    kernel: "lens_patch".into(),
                    args: vec![
                        StepArg::Buffer(if k == 0 {
                            slot::CLUSTERS
                        } else {
                            slot::GALAXIES
                        }),
                        StepArg::I32(count as i32),
                        StepArg::I32(*size),
                        StepArg::I32(n as i32),
                        StepArg::I32(row0 as i32),
                        StepArg::I32(flag_rows as i32),
                        StepArg::Buffer(slot::MASK),
                        StepArg::Buffer(slot::LIST),
                        StepArg::Buffer(slot::COUNTER),
                    ],
                    global: (*size as usize).pow(2) * count,
                    local: Local::Prefer(GPU_GROUP),
                }));
            }
        }
        steps.push(self.recompute_launch(
            Recompute {
                list: slot::LIST,
                counter: slot::COUNTER,
                sie64: slot::SIE64,
                dpie64: slot::DPIE64,
                field: [slot::GX64, slot::GY64],
            },
            row0,
            band,
        ));
        FieldPipeline {
            buffers,
            steps,
            field: [slot::GX64, slot::GY64],
        }
    }

    /// The float64 recompute of the pixels a band's flags listed (band of `pixels` pixels from row0): every
    /// halo at each listed pixel, without the dPIE code when the catalogue has none.
    fn recompute_launch(&self, at: Recompute, row0: usize, pixels: usize) -> Step {
        let t = &self.tables64;
        Step::Launch(Launch {
            kernel: if t.n_dpie == 0 {
                "lens_recompute_sie"
            } else {
                "lens_recompute"
            }
            .into(),
            args: vec![
                StepArg::Buffer(at.list),
                StepArg::Buffer(at.counter),
                StepArg::Buffer(at.sie64),
                StepArg::I32(t.n_sie as i32),
                StepArg::Buffer(at.dpie64),
                StepArg::I32(t.n_dpie as i32),
                StepArg::I32(self.n as i32),
                StepArg::I32(row0 as i32),
                StepArg::F64(self.pixel),
                StepArg::Buffer(at.field[0]),
                StepArg::Buffer(at.field[1]),
            ],
            global: RECOMPUTE_ITEMS.min(pixels.max(1)),
            local: Local::Prefer(GPU_GROUP),
        })
    }

    /// Slots and steps of one band's float64 field in a mode that recomputes flagged pixels (mixed or the
    /// split); `outputs` as in [`Self::mixed_pipeline`].
    fn field_pipeline(
        &self,
        mode: LensMode,
        row0: usize,
        rows: usize,
        outputs: bool,
    ) -> FieldPipeline<'_> {
        match mode {
            LensMode::Mixed(scheme) => self.mixed_pipeline(scheme, row0, rows, outputs),
            LensMode::Split => self.split_pipeline(row0, rows, outputs),
            _ => unreachable!("{} has no recompute pipeline", mode.name()),
        }
    }

    /// Slots and steps of one band of the near/far split (cl/common/lens_split.h): the coarse galaxy field
    /// on the node rows the band needs (its grid in the plan's precision) and its y-pass per pixel row, the galaxies' node
    /// tables, the pixels of the band plus its next row (clusters, the x-pass and near terms, all float64), the flags against each cell's bound (listing the flagged pixels) and their float64
    /// recompute. Returned like [`Self::mixed_pipeline`]: [counter, gx, gy]
    /// come back from a gradient job; the χ² keeps the field, its next row included, on the device.
    fn split_pipeline(&self, row0: usize, rows: usize, outputs: bool) -> FieldPipeline<'_> {
        let split = self.split(super::SplitModel::Device);
        let lists = split.lists(self);
        let (nodes, cell) = split.lattice();
        let step = split.plan.step;
        let n = self.n;
        let ext = self.extended_rows(row0, rows);
        let main_rows = if outputs { rows } else { ext };
        // Node rows c - 1 .. c + 2 around every pixel row j of the band (c = j / step + 1).
        let c_first = row0 / step;
        let c_rows = (row0 + ext - 1) / step + 4 - c_first;
        use split_slot as s;
        let (out, rows_c) = ([s::COARSE_GX, s::COARSE_GY], (c_first, c_rows));
        let coarse_lattice = if split.plan.coarse_f64 {
            Lattice::of(tables64(&split.coarse_problem), out, nodes, rows_c, cell)
        } else {
            Lattice::of(tables32(&split.coarse_problem), out, nodes, rows_c, cell)
        };
        let clusters = tables64(&split.cluster_problem);
        let galaxies = tables64(&split.galaxy_problem);
        let n_galaxies = galaxies.n_sie + galaxies.n_dpie;
        let side = split.side();
        let kept = |dtype, len| {
            if outputs {
                BufferSpec::Output { dtype, len }
            } else {
                BufferSpec::Scratch { dtype, len }
            }
        };
        let scratch = |dtype, len| BufferSpec::Scratch { dtype, len };
        let [co_sie, co_dpie] = coarse_lattice.tables;
        let buffers = vec![
            BufferSpec::Input(HostSlice::F64(&clusters.sie)),
            BufferSpec::Input(HostSlice::F64(&clusters.dpie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.sie)),
            BufferSpec::Input(HostSlice::F64(&self.tables64.dpie)),
            BufferSpec::Input(co_sie),
            BufferSpec::Input(co_dpie),
            BufferSpec::Input(HostSlice::F64(&galaxies.sie)),
            BufferSpec::Input(HostSlice::F64(&galaxies.dpie)),
            BufferSpec::Input(HostSlice::F64(&lists.info)),
            BufferSpec::Input(HostSlice::I32(&lists.cell_start)),
            BufferSpec::Input(HostSlice::I32(&lists.cell_galaxies)),
            BufferSpec::Input(HostSlice::F64(&lists.limit)),
            BufferSpec::Input(HostSlice::F64(&lists.weights)),
            scratch(coarse_lattice.dtype, c_rows * nodes),
            scratch(coarse_lattice.dtype, c_rows * nodes),
            scratch(DType::F64, 2 * ext * nodes),
            scratch(DType::F64, 2 * n_galaxies * side * side),
            scratch(DType::F64, n),
            scratch(DType::F64, n),
            scratch(DType::U32, main_rows * n),
            kept(DType::U32, 1),
            kept(DType::F64, main_rows * n),
            kept(DType::F64, main_rows * n),
        ];
        let mut steps = vec![
            coarse_lattice.step,
            Step::Launch(Launch {
                kernel: if split.plan.coarse_f64 {
                    "lens_split_lines_f64"
                } else {
                    "lens_split_lines"
                }
                .into(),
                args: vec![
                    StepArg::I32(nodes as i32),
                    StepArg::I32(ext as i32),
                    StepArg::I32(row0 as i32),
                    StepArg::I32(step as i32),
                    StepArg::I32(c_first as i32),
                    StepArg::Buffer(s::COARSE_GX),
                    StepArg::Buffer(s::COARSE_GY),
                    StepArg::Buffer(s::WEIGHTS),
                    StepArg::Buffer(s::LINES),
                ],
                global: ext * nodes,
                local: Local::Prefer(GPU_GROUP),
            }),
        ];
        // Without dPIE halos the pixel kernel drops the dPIE code and its registers.
        let pixel_kernel = if clusters.n_dpie + galaxies.n_dpie == 0 {
            "lens_split_pixel_sie"
        } else {
            "lens_split_pixel"
        };
        if n_galaxies > 0 {
            steps.push(Step::Launch(Launch {
                kernel: "lens_split_nodes".into(),
                args: vec![
                    StepArg::I32(n_galaxies as i32),
                    StepArg::I32(side as i32),
                    StepArg::I32(step as i32),
                    StepArg::Buffer(s::INFO),
                    StepArg::Buffer(s::GAL_SIE64),
                    StepArg::I32(galaxies.n_sie as i32),
                    StepArg::Buffer(s::GAL_DPIE64),
                    StepArg::F64(self.pixel),
                    StepArg::Buffer(s::TABLE),
                ],
                global: n_galaxies * side * side,
                local: Local::Prefer(GPU_GROUP),
            }));
        }
        steps.extend([
            Step::Launch(Launch {
                kernel: pixel_kernel.into(),
                args: vec![
                    StepArg::I32(n as i32),
                    StepArg::I32(ext as i32),
                    StepArg::I32(row0 as i32),
                    StepArg::I32(step as i32),
                    StepArg::I32(nodes as i32),
                    StepArg::Buffer(s::LINES),
                    StepArg::Buffer(s::CL_SIE64),
                    StepArg::I32(clusters.n_sie as i32),
                    StepArg::Buffer(s::CL_DPIE64),
                    StepArg::I32(clusters.n_dpie as i32),
                    StepArg::Buffer(s::WEIGHTS),
                    StepArg::I32(lists.cells_x as i32),
                    StepArg::Buffer(s::CELL_START),
                    StepArg::Buffer(s::CELL_GALAXIES),
                    StepArg::Buffer(s::INFO),
                    StepArg::Buffer(s::TABLE),
                    StepArg::I32(side as i32),
                    StepArg::Buffer(s::GAL_SIE64),
                    StepArg::I32(galaxies.n_sie as i32),
                    StepArg::Buffer(s::GAL_DPIE64),
                    StepArg::F64(split.plan.radius),
                    StepArg::F64(self.coord(0)),
                    StepArg::F64(self.pixel),
                    StepArg::I32(main_rows as i32),
                    StepArg::Buffer(s::GX64),
                    StepArg::Buffer(s::GY64),
                    StepArg::Buffer(s::NEXT_GX),
                    StepArg::Buffer(s::NEXT_GY),
                ],
                global: ext * n,
                local: Local::Prefer(GPU_GROUP),
            }),
            Step::Fill {
                buffer: s::COUNTER,
                byte: 0,
            },
            Step::Launch(Launch {
                kernel: "lens_split_flag".into(),
                args: vec![
                    StepArg::Buffer(s::GX64),
                    StepArg::Buffer(s::GY64),
                    StepArg::Buffer(s::NEXT_GX),
                    StepArg::Buffer(s::NEXT_GY),
                    StepArg::I32(n as i32),
                    StepArg::I32(main_rows as i32),
                    StepArg::I32(main_rows as i32),
                    StepArg::I32(ext as i32),
                    StepArg::I32(row0 as i32),
                    StepArg::I32(step as i32),
                    StepArg::I32(lists.cells_x as i32),
                    StepArg::Buffer(s::LIMIT),
                    StepArg::F64(self.pixel),
                    StepArg::Buffer(s::LIST),
                    StepArg::Buffer(s::COUNTER),
                ],
                global: main_rows * n,
                local: Local::Prefer(GPU_GROUP),
            }),
            self.recompute_launch(
                Recompute {
                    list: s::LIST,
                    counter: s::COUNTER,
                    sie64: s::SIE64,
                    dpie64: s::DPIE64,
                    field: [s::GX64, s::GY64],
                },
                row0,
                main_rows * n,
            ),
        ]);
        FieldPipeline {
            buffers,
            steps,
            field: [s::GX64, s::GY64],
        }
    }
}

/// A `lens_grid_<precision>` launch over rows [row0, row0 + rows) of a grid `nx` pixels wide of pixel `h`,
/// from the tables `t` in slots [sie, dpie] into slots [gx, gy].
fn grid_step<T: crate::real::Real>(
    t: &KernelTables<T>,
    [sie, dpie]: [usize; 2],
    [gx, gy]: [usize; 2],
    nx: usize,
    (row0, rows): (usize, usize),
    h: f64,
) -> Step {
    let p = T::PRECISION;
    Step::Launch(Launch {
        kernel: format!("lens_grid_{}", p.name()),
        args: vec![
            StepArg::Buffer(sie),
            StepArg::I32(t.n_sie as i32),
            StepArg::Buffer(dpie),
            StepArg::I32(t.n_dpie as i32),
            StepArg::I32(nx as i32),
            StepArg::I32(row0 as i32),
            StepArg::I32(rows as i32),
            StepArg::real(p, h),
            StepArg::I32(i32::from(t.exact_offsets)),
            StepArg::Buffer(gx),
            StepArg::Buffer(gy),
        ],
        global: grid_items(p, nx, rows),
        local: Local::Prefer(GPU_GROUP),
    })
}

/// The split's coarse lattice in its tables' precision: the tables to upload (slots CO_SIE, CO_DPIE), the
/// dtype of the field it writes, and its grid step.
struct Lattice<'a> {
    tables: [HostSlice<'a>; 2],
    dtype: DType,
    step: Step,
}

impl<'a> Lattice<'a> {
    fn of<T: crate::real::Real>(
        t: &'a KernelTables<T>,
        out: [usize; 2],
        nodes: usize,
        rows: (usize, usize),
        cell: f64,
    ) -> Self
    where
        &'a [T]: Into<HostSlice<'a>>,
    {
        use split_slot as s;
        Lattice {
            tables: [t.sie.as_slice().into(), t.dpie.as_slice().into()],
            dtype: match T::PRECISION {
                Precision::F32 => DType::F32,
                Precision::F64 => DType::F64,
            },
            step: grid_step(t, [s::CO_SIE, s::CO_DPIE], out, nodes, rows, cell),
        }
    }
}

/// A band's buffers and steps that leave a float64 field on the device, and the field's slots.
struct FieldPipeline<'a> {
    buffers: Vec<BufferSpec<'a>>,
    steps: Vec<Step>,
    field: [usize; 2],
}

/// The slots one float64 recompute reads and writes.
struct Recompute {
    list: usize,
    counter: usize,
    sie64: usize,
    dpie64: usize,
    field: [usize; 2],
}

/// The slots of a split band's buffers, in the order split_pipeline declares them.
mod split_slot {
    /// Tables: the clusters and the whole catalogue (float64: pixels, recompute), the galaxies shifted to
    /// the coarse lattice (its grid, in the plan's precision) and on the problem's grid (float64 near terms
    /// and node tables).
    pub const CL_SIE64: usize = 0;
    pub const CL_DPIE64: usize = 1;
    pub const SIE64: usize = 2;
    pub const DPIE64: usize = 3;
    pub const CO_SIE: usize = 4;
    pub const CO_DPIE: usize = 5;
    pub const GAL_SIE64: usize = 6;
    pub const GAL_DPIE64: usize = 7;
    /// SplitLists: galaxy info, the per-cell galaxy lists, the per-cell flag limits, the weights.
    pub const INFO: usize = 8;
    pub const CELL_START: usize = 9;
    pub const CELL_GALAXIES: usize = 10;
    pub const LIMIT: usize = 11;
    pub const WEIGHTS: usize = 12;
    /// The coarse field (the plan's precision), its y-pass per band row (float64 pairs), the galaxies' node tables, the
    /// next row apart.
    pub const COARSE_GX: usize = 13;
    pub const COARSE_GY: usize = 14;
    pub const LINES: usize = 15;
    pub const TABLE: usize = 16;
    pub const NEXT_GX: usize = 17;
    pub const NEXT_GY: usize = 18;
    /// The flagged pixels, their count, the float64 field.
    pub const LIST: usize = 19;
    pub const COUNTER: usize = 20;
    pub const GX64: usize = 21;
    pub const GY64: usize = 22;
}

/// Hits one delensing band can hold; a band that finds more is an error (never silently truncated).
pub const MAX_HITS_PER_BAND: usize = 1 << 16;

impl LensProblem {
    /// Device jobs of one image-plane χ² evaluation (triangle delensing, as LENSTOOL), one per band of rows: the
    /// error-budget mixed grid (float32, float64 where the magnification needs it) stays on the device,
    /// the float64 delensing kernel tests every cell's two triangles against every system's source, and
    /// only the hits come back. `sources` holds (β̄x, β̄y, scale) per system. (A float32 grid and
    /// delensing put or drop images at folds of the critical lines, where a source-plane triangle is
    /// smaller than the float32 error: at `hff`, one image 31″ away from any of the reference's.)
    pub fn chi2_jobs<'a>(
        &'a self,
        mode: LensMode,
        sources: &'a [f64],
        budget: DeviceBudget,
        opts: &RunOptions,
    ) -> Vec<(usize, KernelJob<'a>)> {
        // (first row, job) per band: the hits' row indices are band-relative.
        let n = self.n;
        // Per pixel of a band: two float32 and two float64 grids, the mask and the list.
        self.bands(8, 32, budget)
            .into_iter()
            .map(|(row0, rows)| {
                let ext = self.extended_rows(row0, rows);
                let FieldPipeline {
                    mut buffers,
                    mut steps,
                    field: [gx, gy],
                } = self.field_pipeline(mode, row0, rows, false);
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
                            StepArg::Buffer(gx),
                            StepArg::Buffer(gy),
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
                (row0, opts.job(&PROGRAM, vec![], buffers, steps))
            })
            .collect()
    }
}
