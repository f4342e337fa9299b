//! The transforms on a device (OpenCL, CUDA, SYCL): the Legendre stage and the ring stage (one FFT per ring,
//! any length: cl/common/ring_fft.h) in the kernels of cl/common/sht.h, both in one job.
//!
//! Mirrors the header's layouts: ring pairs in blocks of PAIRS_PER_BLOCK; synthesis has one work-group per
//! (m, block), analysis one per m (walking the blocks in turn); m ascending, so that the longest walks (small
//! m) start first; the ring stage has one work-group per ring. Work too large for the device is cut into
//! bands of consecutive m, one job each; the ring stage then runs on the host with the `cpu` model's code
//! (it needs every m of a ring at once), and the row's steps say so.

use super::alm::Alm;
use super::cpu::{rings_from_delta, rings_to_phases};
use super::grid::RingGrid;
use super::legendre::start_factors;
use crate::backend::{
    Accelerator, BufferSpec, DType, HostSlice, HostVec, KernelJob, Launch, Local, Program, Step,
    StepArg, StepReport,
};
use crate::exec::{
    run_plan, time_host, DeviceBudget, LaunchSummary, Measured, PlanRun, RunError, RunOptions,
    TimeStats,
};
use rayon::prelude::*;
use realfft::num_complex::Complex64;

pub static PROGRAM: Program = Program {
    name: "sht",
    opencl: include_str!("../../../cl/sht.cl"),
    sycl: include_str!("../../../ports/sycl/sht.cpp"),
    headers: &[
        (
            "astro_dialect.h",
            include_str!("../../../cl/common/astro_dialect.h"),
        ),
        ("ring_fft.h", include_str!("../../../cl/common/ring_fft.h")),
        ("sht.h", include_str!("../../../cl/common/sht.h")),
    ],
    opencl_options: "",
};

/// Work-items per work-group (SHT_GROUP), ring pairs per work-item (SHT_LANES).
pub const GROUP: usize = 64;
pub const LANES: usize = 4;
pub const PAIRS_PER_BLOCK: usize = GROUP * LANES;

/// The grid's ring pairs as the kernels read them.
pub struct PairTables {
    /// cos θ, sin θ per pair.
    pub cs: Vec<f64>,
    /// Northern ring, southern ring (−1: none) per pair.
    pub rings: Vec<i32>,
    pub npairs: usize,
    pub nrings: usize,
    pub nblocks: usize,
}

impl PairTables {
    pub fn of(grid: &RingGrid) -> Result<PairTables, String> {
        if grid.rings.len() > i32::MAX as usize {
            return Err(format!(
                "{} rings: more than a device index holds",
                grid.rings.len()
            ));
        }
        let mut cs = Vec::with_capacity(2 * grid.pairs.len());
        let mut rings = Vec::with_capacity(2 * grid.pairs.len());
        for p in &grid.pairs {
            cs.extend([p.cos, p.sin]);
            rings.extend([p.north as i32, p.south.map_or(-1, |s| s as i32)]);
        }
        Ok(PairTables {
            cs,
            rings,
            npairs: grid.pairs.len(),
            nrings: grid.rings.len(),
            nblocks: grid.pairs.len().div_ceil(PAIRS_PER_BLOCK).max(1),
        })
    }
}

/// Work-items per ring in the ring stage (SHT_RING_GROUP).
pub const RING_GROUP: usize = 128;

/// The largest work area of one ring-stage launch. NVIDIA's OpenCL failed kernels on buffers above 2 GiB
/// (UNKNOWN_ERROR at planck with a 4 GiB area, and with a 2.15 GB scratch before), so the rings go in batches
/// whose areas fit this, one launch each, all reusing one buffer.
pub const RING_BATCH_BYTES: u64 = 1 << 30;

/// The grid's rings as the ring-stage kernels read them, with each ring's FFT work area.
pub struct RingTables {
    /// Per ring: first pixel, nφ, work offset (complex values from its batch's start; four regions of W
    /// each), W.
    pub table: Vec<i32>,
    pub phi0: Vec<f64>,
    pub weight: Vec<f64>,
    /// Consecutive ring ranges [r0, r1), one launch each.
    pub batches: Vec<(usize, usize)>,
    /// Doubles in the largest batch's work area (the buffer's length).
    pub work_len: usize,
}

impl RingTables {
    /// Batches of at most `batch_bytes` of work area (a ring larger than that is a batch of its own). None
    /// when an index does not fit the kernels' 32-bit ints (the host ring stage then runs).
    pub fn of(grid: &RingGrid, batch_bytes: u64) -> Option<RingTables> {
        let mut table = Vec::with_capacity(4 * grid.rings.len());
        let mut batches = Vec::new();
        let (mut start, mut offset, mut largest) = (0usize, 0usize, 0usize);
        for (r, ring) in grid.rings.iter().enumerate() {
            let w = fft_work_length(ring.nphi);
            if offset > 0 && 16 * (offset + 4 * w) as u64 > batch_bytes {
                batches.push((start, r));
                (start, offset) = (r, 0);
            }
            for v in [ring.offset, ring.nphi, offset, w] {
                table.push(i32::try_from(v).ok()?);
            }
            offset += 4 * w;
            largest = largest.max(offset);
        }
        if start < grid.rings.len() {
            batches.push((start, grid.rings.len()));
        }
        i32::try_from(largest).ok()?;
        Some(RingTables {
            table,
            phi0: grid.rings.iter().map(|r| r.phi0).collect(),
            weight: grid.rings.iter().map(|r| r.weight).collect(),
            batches,
            work_len: 2 * largest,
        })
    }
}

/// The radices of the Stockham passes cl/common/ring_fft.h takes for length n (fft_next_radix's order).
pub fn fft_radices(n: usize) -> Vec<usize> {
    let mut radices = Vec::new();
    let mut rest = n;
    while rest > 1 {
        let p = if rest.is_multiple_of(8) {
            8
        } else if rest.is_multiple_of(4) {
            4
        } else if rest.is_multiple_of(2) {
            2
        } else {
            (3..)
                .step_by(2)
                .take_while(|d| d * d <= rest)
                .find(|d| rest.is_multiple_of(*d))
                .unwrap_or(rest)
        };
        radices.push(p);
        rest /= p;
    }
    radices
}

/// The work length W of an FFT of length n in cl/common/ring_fft.h: n itself (mixed-radix Stockham) or
/// Bluestein's power of two ≥ 2n − 1, whichever costs fewer complex operations. A pass of radix p costs n p
/// (direct DFT), radix 8 3n, radix 4 2n and radix 2 n; Bluestein is three transforms of W and 4 W of chirps.
pub fn fft_work_length(n: usize) -> usize {
    let cost = |n: usize| -> usize {
        fft_radices(n)
            .iter()
            .map(|&p| {
                n * match p {
                    8 => 3,
                    4 => 2,
                    p => p.min(n),
                }
            })
            .sum()
    };
    let w = (2 * n).saturating_sub(1).next_power_of_two();
    if n <= 1 || cost(n) <= 3 * cost(w) + 4 * w {
        n
    } else {
        w
    }
}

/// Whether buffers of these sizes fit the budget: each within the largest allocation, all of them within
/// half the device's memory.
fn fits(budget: DeviceBudget, sizes: &[u64]) -> bool {
    sizes.iter().all(|&b| b <= budget.max_alloc) && sizes.iter().sum::<u64>() <= budget.mem / 2
}

/// Consecutive bands [m0, m1) covering [first, end) whose buffers fit the budget: each buffer at most the largest
/// allocation, all of them together within half the device's memory. `sizes(m0, m1)` lists a band's buffers
/// in bytes. A single m that does not fit is still a band of its own (the run then fails with the device's
/// own allocation error, named).
fn m_bands(
    (first, end): (usize, usize),
    budget: DeviceBudget,
    sizes: impl Fn(usize, usize) -> Vec<u64>,
) -> Vec<(usize, usize)> {
    let fits = |m0: usize, m1: usize| fits(budget, &sizes(m0, m1));
    let mut bands = Vec::new();
    let mut m0 = first;
    while m0 < end {
        // The largest m1 that fits, by doubling then bisection (sizes grow with m1).
        let (mut lo, mut hi) = (m0 + 1, end);
        if !fits(m0, hi) {
            let mut step = 1;
            while lo + step <= end && fits(m0, lo + step) {
                lo += step;
                step *= 2;
            }
            hi = (lo + step).min(end);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if fits(m0, mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            if fits(m0, hi) {
                lo = hi;
            }
        } else {
            lo = hi;
        }
        bands.push((m0, lo));
        m0 = lo;
    }
    bands
}

/// Times of one transform on a device: the Legendre stages' device events and the ring stages' host clock,
/// summed over the passes of the transform (map2alm with iterations runs several).
#[derive(Default)]
struct Timing {
    median: f64,
    min: f64,
    max: f64,
    repeats: u32,
    warmup: u32,
    build_s: f64,
    resources: Option<crate::backend::Resources>,
    launch: Option<LaunchSummary>,
    build_options: String,
    steps: Vec<StepReport>,
    /// Whether any ring stage ran on the host (the Legendre stage did not fit in one job).
    host_rings: bool,
}

impl Timing {
    fn add_step(&mut self, name: &str, median_s: f64, step: Option<StepReport>) {
        match self.steps.iter_mut().find(|s| s.name == name) {
            Some(s) => s.median_s += median_s,
            None => self.steps.push(step.unwrap_or(StepReport {
                name: name.into(),
                median_s,
                resources: None,
                local_used: 0,
            })),
        }
    }

    fn add_times(&mut self, t: &TimeStats) {
        self.median += t.median;
        self.min += t.min;
        self.max += t.max;
        self.repeats = t.repeats;
        self.warmup = t.warmup;
    }

    /// Adds a plan's times; the row's resources are those of `main_kernel` (the Legendre stage's).
    fn add_plan(&mut self, run: PlanRun, main_kernel: &str) {
        self.add_times(&run.times);
        self.build_s += run.build_s;
        if self.resources.is_none() {
            self.resources = run
                .steps
                .iter()
                .find(|s| s.name == main_kernel)
                .and_then(|s| s.resources.clone())
                .or(run.resources);
            self.build_options = run.build_options;
        }
        match &mut self.launch {
            Some(l) => {
                l.global = l.global.max(run.launch.global);
                l.bands += run.launch.bands;
            }
            None => self.launch = Some(run.launch),
        }
        for s in run.steps {
            let (name, median) = (s.name.clone(), s.median_s);
            self.add_step(&name, median, Some(s));
        }
    }

    fn add_host(&mut self, name: &str, t: TimeStats) {
        self.host_rings = true;
        self.add_times(&t);
        self.add_step(name, t.median, None);
    }

    fn measured<T>(self, output: T) -> Measured<T> {
        Measured {
            output,
            times: TimeStats {
                median: self.median,
                min: self.min,
                max: self.max,
                repeats: self.repeats,
                warmup: self.warmup,
                timer: if self.host_rings {
                    "device events (Legendre stage) + host clock (ring FFTs)".into()
                } else {
                    "device events".into()
                },
            },
            build_s: Some(self.build_s),
            resources: self.resources,
            launch: self.launch,
            steps: self.steps,
            build_options: self.build_options,
        }
    }
}

/// The name of the host ring stage in a row's steps.
const RING_STAGE: &str = "ring FFTs (host, realfft)";

/// Transforms on one device and grid; the times of everything run accumulate until [`Self::measured`].
pub struct DeviceSht<'a> {
    dev: &'a dyn Accelerator,
    grid: &'a RingGrid,
    pairs: PairTables,
    rings: Option<RingTables>,
    opts: RunOptions,
    memory_cap: Option<u64>,
    timing: Timing,
}

impl<'a> DeviceSht<'a> {
    pub fn new(
        dev: &'a dyn Accelerator,
        grid: &'a RingGrid,
        opts: &RunOptions,
    ) -> Result<DeviceSht<'a>, RunError> {
        if !dev.info().fp64 {
            return Err(RunError::Unsupported("device has no fp64 support".into()));
        }
        Ok(DeviceSht {
            dev,
            grid,
            pairs: PairTables::of(grid)?,
            rings: RingTables::of(grid, RING_BATCH_BYTES),
            opts: *opts,
            memory_cap: None,
            timing: Timing::default(),
        })
    }

    /// Uses at most `cap` bytes of device memory (tiles into more bands of m, and the ring stage into
    /// batches of rings whose work area is at most an eighth of it).
    pub fn with_memory_cap(mut self, cap: Option<u64>) -> Self {
        self.memory_cap = cap;
        if let Some(cap) = cap {
            self.rings = RingTables::of(self.grid, RING_BATCH_BYTES.min(cap / 8));
        }
        self
    }

    /// Launches of each ring-stage kernel per transform (batches of rings), when the ring stage runs here.
    pub fn ring_batches(&self) -> Option<usize> {
        self.rings.as_ref().map(|r| r.batches.len())
    }

    fn budget(&self) -> DeviceBudget {
        DeviceBudget::of(self.dev.info()).capped(self.memory_cap)
    }

    /// Synthesis: the map of `alm` on the grid.
    pub fn alm2map(&mut self, alm: &Alm) -> Result<Vec<f64>, RunError> {
        Ok(self.synthesis(&[alm])?.remove(0))
    }

    /// Spin-2 synthesis: the Q and U maps of E and B (healpy's convention, as [`super::alm2map_spin2`]).
    pub fn alm2map_spin2(&mut self, e: &Alm, b: &Alm) -> Result<(Vec<f64>, Vec<f64>), RunError> {
        let mut maps = self.synthesis(&[e, b])?;
        let u = maps.pop().expect("two maps");
        Ok((maps.pop().expect("two maps"), u))
    }

    /// Adjoint synthesis (map2alm with no iteration).
    pub fn adjoint(&mut self, map: &[f64], lmax: usize, mmax: usize) -> Result<Alm, RunError> {
        Ok(self.adjoint_fields(&[map], lmax, mmax)?.remove(0))
    }

    /// Analysis with `iter` Jacobi refinements, as the `cpu` model's [`super::map2alm`].
    pub fn map2alm(
        &mut self,
        map: &[f64],
        lmax: usize,
        mmax: usize,
        iter: usize,
    ) -> Result<Alm, RunError> {
        Ok(self.analysis_fields(&[map], lmax, mmax, iter)?.remove(0))
    }

    /// Spin-2 analysis with `iter` Jacobi refinements: E and B of Q and U (as [`super::map2alm_spin2`]).
    pub fn map2alm_spin2(
        &mut self,
        q: &[f64],
        u: &[f64],
        lmax: usize,
        mmax: usize,
        iter: usize,
    ) -> Result<(Alm, Alm), RunError> {
        let mut sets = self.analysis_fields(&[q, u], lmax, mmax, iter)?;
        let b = sets.pop().expect("two sets");
        Ok((sets.pop().expect("two sets"), b))
    }

    /// Synthesis of one field (scalar) or two (E, B: spin 2); each field's map comes from the host ring stage.
    fn synthesis(&mut self, fields: &[&Alm]) -> Result<Vec<Vec<f64>>, RunError> {
        for f in fields {
            f.check()?;
        }
        if let Some(maps) = self.synthesis_fused(fields)? {
            return Ok(maps);
        }
        let deltas = self.synthesis_delta(fields)?;
        let mmax = fields[0].mmax;
        let (maps, t) = time_host(&self.opts, "host clock", || {
            Ok(deltas
                .iter()
                .map(|d| rings_from_delta(self.grid, mmax, d))
                .collect::<Vec<_>>())
        })?;
        self.timing.add_host(RING_STAGE, t);
        Ok(maps)
    }

    /// The adjoint of [`Self::synthesis`].
    fn adjoint_fields(
        &mut self,
        maps: &[&[f64]],
        lmax: usize,
        mmax: usize,
    ) -> Result<Vec<Alm>, RunError> {
        for map in maps {
            super::cpu::check_analysis(self.grid, map, lmax, mmax)?;
        }
        if let Some(sets) = self.adjoint_fused(maps, lmax, mmax)? {
            return Ok(sets);
        }
        // The ring stage and the reordering of its phases m-major (the device's layout) are host work of the
        // transform: both are timed.
        let nrings = self.pairs.nrings;
        let (phases, t) = time_host(&self.opts, "host clock", || {
            Ok(maps
                .iter()
                .map(|m| m_major(&rings_to_phases(self.grid, m, mmax), nrings, mmax + 1))
                .collect::<Vec<_>>())
        })?;
        self.timing.add_host(RING_STAGE, t);
        self.analysis(&phases, lmax, mmax)
    }

    /// Analysis with healpy's Jacobi iterations, every field together: a ← a + adjoint(map − synthesis(a)).
    fn analysis_fields(
        &mut self,
        maps: &[&[f64]],
        lmax: usize,
        mmax: usize,
        iter: usize,
    ) -> Result<Vec<Alm>, RunError> {
        let mut sets = self.adjoint_fields(maps, lmax, mmax)?;
        for _ in 0..iter {
            let refs: Vec<&Alm> = sets.iter().collect();
            let models = self.synthesis(&refs)?;
            let residuals: Vec<Vec<f64>> = maps
                .iter()
                .zip(&models)
                .map(|(map, model)| map.iter().zip(model).map(|(f, g)| f - g).collect())
                .collect();
            let residual_refs: Vec<&[f64]> = residuals.iter().map(|r| r.as_slice()).collect();
            let corrections = self.adjoint_fields(&residual_refs, lmax, mmax)?;
            for (set, correction) in sets.iter_mut().zip(&corrections) {
                for (a, c) in set.coeffs.iter_mut().zip(&correction.coeffs) {
                    *a += c;
                }
            }
        }
        Ok(sets)
    }

    /// What everything run so far measured, with `output`.
    pub fn measured<T>(self, output: T) -> Measured<T> {
        self.timing.measured(output)
    }

    /// Synthesis with both stages on the device, in one job: the Legendre stage's Δ stay there for the ring
    /// stage. None when that job does not fit the budget (then the banded path runs).
    fn synthesis_fused(&mut self, fields: &[&Alm]) -> Result<Option<Vec<Vec<f64>>>, RunError> {
        let Some(rings) = &self.rings else {
            return Ok(None);
        };
        let (lmax, mmax, nrings) = (fields[0].lmax, fields[0].mmax, self.pairs.nrings);
        let stage = Stage::synthesis(fields.len());
        let flats: Vec<Vec<f64>> = fields.iter().map(|a| a.to_flat()).collect();
        let cmm = start_factors(mmax);
        let mut buffers = Vec::new();
        let mut legendre = self.pair_buffers(&mut buffers, &cmm);
        legendre.extend(flats.iter().map(|f| add(&mut buffers, input_f64(f))));
        let deltas: Vec<usize> = flats
            .iter()
            .map(|_| add(&mut buffers, scratch_f64(2 * (mmax + 1) * nrings)))
            .collect();
        legendre.extend(&deltas);
        let ring_buffers = RingBuffers::add(&mut buffers, rings);
        let maps: Vec<usize> = flats
            .iter()
            .map(|_| add(&mut buffers, output_f64(self.grid.npix)))
            .collect();
        let mut steps = vec![self.legendre_launch(stage, lmax, (0, mmax + 1), &legendre)];
        for (&delta, &map) in deltas.iter().zip(&maps) {
            steps.extend(ring_buffers.synthesis(rings, mmax, delta, map));
        }
        let Some(run) = self.run_single_job(buffers, steps)? else {
            return Ok(None);
        };
        let outputs = self.single_job_outputs(run, stage.fields(), stage.kernel())?;
        outputs
            .into_iter()
            .map(f64_output)
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The adjoint with both stages on the device, in one job (as [`Self::synthesis_fused`]).
    fn adjoint_fused(
        &mut self,
        maps: &[&[f64]],
        lmax: usize,
        mmax: usize,
    ) -> Result<Option<Vec<Alm>>, RunError> {
        let Some(rings) = &self.rings else {
            return Ok(None);
        };
        let nrings = self.pairs.nrings;
        let stage = Stage::analysis(maps.len());
        let cmm = start_factors(mmax);
        let mut buffers = Vec::new();
        let mut legendre = self.pair_buffers(&mut buffers, &cmm);
        let pixels: Vec<usize> = maps
            .iter()
            .map(|m| add(&mut buffers, input_f64(m)))
            .collect();
        let ring_buffers = RingBuffers::add(&mut buffers, rings);
        let phases: Vec<usize> = maps
            .iter()
            .map(|_| add(&mut buffers, scratch_f64(2 * (mmax + 1) * nrings)))
            .collect();
        legendre.extend(&phases);
        let ncoeffs = Alm::len_for(lmax, mmax);
        legendre.extend(
            maps.iter()
                .map(|_| add(&mut buffers, output_f64(2 * ncoeffs))),
        );
        let mut steps: Vec<Step> = pixels
            .iter()
            .zip(&phases)
            .flat_map(|(&map, &g)| ring_buffers.analysis(rings, mmax, map, g))
            .collect();
        steps.push(self.legendre_launch(stage, lmax, (0, mmax + 1), &legendre));
        let Some(run) = self.run_single_job(buffers, steps)? else {
            return Ok(None);
        };
        let outputs = self.single_job_outputs(run, stage.fields(), stage.kernel())?;
        outputs
            .into_iter()
            .map(|o| {
                Ok(Alm {
                    lmax,
                    mmax,
                    coeffs: complex_output(o)?,
                })
            })
            .collect::<Result<Vec<_>, RunError>>()
            .map(Some)
    }

    /// The ring pairs' tables and c_m as a job's first three buffers; their indices, in the Legendre
    /// kernels' order of arguments.
    fn pair_buffers<'b>(&'b self, buffers: &mut Vec<BufferSpec<'b>>, cmm: &'b [f64]) -> Vec<usize> {
        vec![
            add(buffers, input_f64(&self.pairs.cs)),
            add(
                buffers,
                BufferSpec::Input(HostSlice::I32(&self.pairs.rings)),
            ),
            add(buffers, input_f64(cmm)),
        ]
    }

    /// The Legendre stage over m in [m0, m1); `buffers`: pair tables, c_m, inputs, outputs (in that order).
    fn legendre_launch(
        &self,
        stage: Stage,
        lmax: usize,
        (m0, m1): (usize, usize),
        buffers: &[usize],
    ) -> Step {
        let pairs = &self.pairs;
        let groups = if stage.per_block() {
            (m1 - m0) * pairs.nblocks
        } else {
            m1 - m0
        };
        let mut args = vec![
            StepArg::Buffer(buffers[0]),
            StepArg::Buffer(buffers[1]),
            StepArg::I32(pairs.npairs as i32),
            StepArg::I32(pairs.nrings as i32),
            StepArg::I32(lmax as i32),
            StepArg::I32(m0 as i32),
            StepArg::I32(pairs.nblocks as i32),
        ];
        args.extend(buffers[2..].iter().map(|&b| StepArg::Buffer(b)));
        Step::Launch(Launch {
            kernel: stage.kernel().into(),
            args,
            global: groups * GROUP,
            local: Local::Exact(GROUP),
        })
    }

    /// Runs a job unbanded (both stages, or a ring stage alone) when its buffers fit the budget; the run, or
    /// None. Split from [`Self::single_job_outputs`] because the buffers borrow `self`.
    fn run_single_job(
        &self,
        buffers: Vec<BufferSpec>,
        steps: Vec<Step>,
    ) -> Result<Option<PlanRun>, RunError> {
        let sizes: Vec<u64> = buffers.iter().map(|b| b.bytes() as u64).collect();
        if !fits(self.budget(), &sizes) {
            return Ok(None);
        }
        let job = KernelJob {
            program: &PROGRAM,
            defines: Vec::new(),
            buffers,
            steps,
            warmup: self.opts.warmup,
            repeats: self.opts.repeats,
        };
        Ok(Some(run_plan(
            self.dev,
            std::slice::from_ref(&job),
            self.opts.warmup,
        )?))
    }

    /// A single job's outputs (`expected` of them); its times go to the row, with `main_kernel`'s resources.
    fn single_job_outputs(
        &mut self,
        mut run: PlanRun,
        expected: usize,
        main_kernel: &str,
    ) -> Result<Vec<HostVec>, RunError> {
        let outputs = run.outputs.pop().unwrap_or_default();
        self.timing.add_plan(run, main_kernel);
        if outputs.len() != expected {
            return Err(RunError::Failed(format!(
                "the sht job returned {} outputs, {expected} expected",
                outputs.len(),
            )));
        }
        Ok(outputs)
    }

    /// The ring stage alone, for a process of a distributed transform: each ring's pixels from Δ (m-major,
    /// every m ≤ mmax, as [`Self::synthesis_band`] gives them). On the host when the work area does not fit.
    pub fn rings_from_delta(
        &mut self,
        delta: &[Complex64],
        mmax: usize,
    ) -> Result<Vec<f64>, RunError> {
        let nrings = self.pairs.nrings;
        if delta.len() != (mmax + 1) * nrings {
            return Err(RunError::Failed(format!(
                "Δ has {} values, mmax {mmax} and {nrings} rings need {}",
                delta.len(),
                (mmax + 1) * nrings
            )));
        }
        let flat: Vec<f64> = delta.iter().flat_map(|c| [c.re, c.im]).collect();
        if let Some(rings) = &self.rings {
            let mut buffers = Vec::new();
            let input = add(&mut buffers, input_f64(&flat));
            let ring_buffers = RingBuffers::add(&mut buffers, rings);
            let map = add(&mut buffers, output_f64(self.grid.npix));
            let steps = ring_buffers.synthesis(rings, mmax, input, map);
            if let Some(run) = self.run_single_job(buffers, steps)? {
                let out = self.single_job_outputs(run, 1, "sht_ring_synthesis_f64")?;
                return f64_output(out.into_iter().next().expect("one output"));
            }
        }
        let (map, t) = time_host(&self.opts, "host clock", || {
            Ok(rings_from_delta(self.grid, mmax, delta))
        })?;
        self.timing.add_host(RING_STAGE, t);
        Ok(map)
    }

    /// The ring stage of analysis alone: G_m(ring) m-major (m ≤ mmax) from the pixels, weights applied.
    pub fn rings_to_phases(
        &mut self,
        map: &[f64],
        mmax: usize,
    ) -> Result<Vec<Complex64>, RunError> {
        if map.len() != self.grid.npix {
            return Err(RunError::Failed(format!(
                "{} pixels, the grid has {}",
                map.len(),
                self.grid.npix
            )));
        }
        let nrings = self.pairs.nrings;
        if let Some(rings) = &self.rings {
            let mut buffers = Vec::new();
            let pixels = add(&mut buffers, input_f64(map));
            let ring_buffers = RingBuffers::add(&mut buffers, rings);
            let g = add(&mut buffers, output_f64(2 * (mmax + 1) * nrings));
            let steps = ring_buffers.analysis(rings, mmax, pixels, g);
            if let Some(run) = self.run_single_job(buffers, steps)? {
                let out = self.single_job_outputs(run, 1, "sht_ring_analysis_f64")?;
                return complex_output(out.into_iter().next().expect("one output"));
            }
        }
        let (g, t) = time_host(&self.opts, "host clock", || {
            let ring_major = rings_to_phases(self.grid, map, mmax);
            Ok(m_major(&ring_major, nrings, mmax + 1))
        })?;
        self.timing.add_host(RING_STAGE, t);
        Ok(g.chunks_exact(2)
            .map(|c| Complex64::new(c[0], c[1]))
            .collect())
    }

    /// The Legendre synthesis of the m in [m0, m1) alone, for a process of a distributed transform: Δ_m(ring)
    /// m-major over every ring of the grid, from those m's coefficients (m-major, l = m..=lmax each).
    pub fn synthesis_band(
        &mut self,
        coeffs: &[Complex64],
        lmax: usize,
        (m0, m1): (usize, usize),
    ) -> Result<Vec<Complex64>, RunError> {
        let (c0, c1) = band_coefficients(lmax, m0, m1);
        if coeffs.len() != c1 - c0 || m1 > lmax + 1 {
            return Err(RunError::Failed(format!(
                "{} coefficients for m in [{m0}, {m1}) at lmax {lmax}, which has {}",
                coeffs.len(),
                c1 - c0
            )));
        }
        let flat: Vec<f64> = coeffs.iter().flat_map(|c| [c.re, c.im]).collect();
        let nrings = self.pairs.nrings;
        let mut out = self.legendre_stage(Stage::Synthesis, lmax, (m0, m1), |b0, b1| {
            let (d0, d1) = band_coefficients(lmax, b0, b1);
            (
                vec![&flat[2 * (d0 - c0)..2 * (d1 - c0)]],
                (b1 - b0) * nrings,
            )
        })?;
        Ok(out.remove(0))
    }

    /// The Legendre analysis of the m in [m0, m1) alone: their coefficients (m-major, l = m..=lmax each) from
    /// G of those m (m-major over every ring of the grid, weights applied).
    pub fn analysis_band(
        &mut self,
        g: &[Complex64],
        lmax: usize,
        (m0, m1): (usize, usize),
    ) -> Result<Vec<Complex64>, RunError> {
        let nrings = self.pairs.nrings;
        if g.len() != (m1 - m0) * nrings || m1 > lmax + 1 {
            return Err(RunError::Failed(format!(
                "G has {} values, m in [{m0}, {m1}) over {nrings} rings needs {}",
                g.len(),
                (m1 - m0) * nrings
            )));
        }
        let flat: Vec<f64> = g.iter().flat_map(|c| [c.re, c.im]).collect();
        let mut out = self.legendre_stage(Stage::Analysis, lmax, (m0, m1), |b0, b1| {
            let (d0, d1) = band_coefficients(lmax, b0, b1);
            let rows = &flat[2 * (b0 - m0) * nrings..2 * (b1 - m0) * nrings];
            (vec![rows], d1 - d0)
        })?;
        Ok(out.remove(0))
    }

    /// Δ_m(ring) of every m and ring, m-major, from the device: one per field (T; or E, B giving Q, U).
    fn synthesis_delta(&mut self, fields: &[&Alm]) -> Result<Vec<Vec<Complex64>>, RunError> {
        let (lmax, mmax, nrings) = (fields[0].lmax, fields[0].mmax, self.pairs.nrings);
        let flats: Vec<Vec<f64>> = fields.iter().map(|a| a.to_flat()).collect();
        let stage = Stage::synthesis(fields.len());
        self.legendre_stage(stage, lmax, (0, mmax + 1), |m0, m1| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            let inputs = flats.iter().map(|f| &f[2 * c0..2 * c1]).collect();
            (inputs, (m1 - m0) * nrings)
        })
    }

    /// a_lm from the ring phases G (m-major f64 pairs, [`m_major`]), on the device: one per field (T; or Q, U
    /// giving E, B).
    fn analysis(
        &mut self,
        mmajor: &[Vec<f64>],
        lmax: usize,
        mmax: usize,
    ) -> Result<Vec<Alm>, RunError> {
        let nrings = self.pairs.nrings;
        let stage = Stage::analysis(mmajor.len());
        let coeffs = self.legendre_stage(stage, lmax, (0, mmax + 1), |m0, m1| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            let inputs = mmajor
                .iter()
                .map(|g| &g[2 * m0 * nrings..2 * m1 * nrings])
                .collect();
            (inputs, c1 - c0)
        })?;
        coeffs
            .into_iter()
            .map(|coeffs| {
                if coeffs.len() != Alm::len_for(lmax, mmax) {
                    return Err(RunError::Failed(format!(
                        "the device returned {} coefficients, lmax {lmax} mmax {mmax} has {}",
                        coeffs.len(),
                        Alm::len_for(lmax, mmax)
                    )));
                }
                Ok(Alm { lmax, mmax, coeffs })
            })
            .collect()
    }

    /// One Legendre stage over bands of m: `band(m0, m1)` gives the band's inputs (f64 pairs, one per field)
    /// and the length of each output in complex values; each field's outputs are concatenated in band order.
    fn legendre_stage<'i>(
        &mut self,
        stage: Stage,
        lmax: usize,
        (lo, hi): (usize, usize),
        band: impl Fn(usize, usize) -> (Vec<&'i [f64]>, usize),
    ) -> Result<Vec<Vec<Complex64>>, RunError> {
        let cmm = start_factors(hi.max(1) - 1);
        let bands = m_bands((lo, hi), self.budget(), |m0, m1| {
            let (inputs, out_len) = band(m0, m1);
            let mut sizes: Vec<u64> = inputs.iter().map(|i| 8 * i.len() as u64).collect();
            sizes.extend(inputs.iter().map(|_| 16 * out_len as u64));
            sizes
        });
        let jobs: Vec<KernelJob> = bands
            .iter()
            .map(|&(m0, m1)| {
                let (inputs, out_len) = band(m0, m1);
                let fields = inputs.len();
                let mut buffers = Vec::new();
                let mut legendre = self.pair_buffers(&mut buffers, &cmm[m0..m1]);
                legendre.extend(inputs.iter().map(|i| add(&mut buffers, input_f64(i))));
                legendre.extend((0..fields).map(|_| {
                    add(
                        &mut buffers,
                        BufferSpec::Output {
                            dtype: DType::F64,
                            len: 2 * out_len,
                        },
                    )
                }));
                KernelJob {
                    program: &PROGRAM,
                    defines: Vec::new(),
                    steps: vec![self.legendre_launch(stage, lmax, (m0, m1), &legendre)],
                    buffers,
                    warmup: self.opts.warmup,
                    repeats: self.opts.repeats,
                }
            })
            .collect();
        let mut run = run_plan(self.dev, &jobs, self.opts.warmup)?;
        let outputs = std::mem::take(&mut run.outputs);
        self.timing.add_plan(run, stage.kernel());
        let mut out = vec![Vec::new(); stage.fields()];
        for band_outputs in outputs {
            if band_outputs.len() != out.len() {
                return Err(RunError::Failed(format!(
                    "the sht job returned {} outputs, {} expected",
                    band_outputs.len(),
                    out.len()
                )));
            }
            for (field, o) in out.iter_mut().zip(band_outputs) {
                field.extend(complex_output(o)?);
            }
        }
        Ok(out)
    }
}

/// The kernels, which take the same arguments but for the number of fields: synthesis's inputs are a_lm
/// and its outputs Δ; analysis's inputs are G and its outputs a_lm; spin-2 has two of each.
#[derive(Clone, Copy)]
enum Stage {
    Synthesis,
    Analysis,
    SpinSynthesis,
    SpinAnalysis,
}

impl Stage {
    fn synthesis(fields: usize) -> Stage {
        if fields == 2 {
            Stage::SpinSynthesis
        } else {
            Stage::Synthesis
        }
    }
    fn analysis(fields: usize) -> Stage {
        if fields == 2 {
            Stage::SpinAnalysis
        } else {
            Stage::Analysis
        }
    }
    fn kernel(self) -> &'static str {
        match self {
            Stage::Synthesis => "sht_synthesis_f64",
            Stage::Analysis => "sht_analysis_f64",
            Stage::SpinSynthesis => "sht_spin_synthesis_f64",
            Stage::SpinAnalysis => "sht_spin_analysis_f64",
        }
    }
    fn fields(self) -> usize {
        match self {
            Stage::Synthesis | Stage::Analysis => 1,
            Stage::SpinSynthesis | Stage::SpinAnalysis => 2,
        }
    }
    /// Synthesis has a group per (m, block of ring pairs); analysis a group per m.
    fn per_block(self) -> bool {
        matches!(self, Stage::Synthesis | Stage::SpinSynthesis)
    }
}

/// Adds a buffer to a job's list; its index.
fn add<'b>(buffers: &mut Vec<BufferSpec<'b>>, buffer: BufferSpec<'b>) -> usize {
    buffers.push(buffer);
    buffers.len() - 1
}

fn input_f64(data: &[f64]) -> BufferSpec<'_> {
    BufferSpec::Input(HostSlice::F64(data))
}

fn scratch_f64(len: usize) -> BufferSpec<'static> {
    BufferSpec::Scratch {
        dtype: DType::F64,
        len,
    }
}

/// The ring stage's buffers in a job: tables, φ0, weights, work area.
#[derive(Clone, Copy)]
struct RingBuffers {
    table: usize,
    phi0: usize,
    weight: usize,
    work: usize,
}

impl RingBuffers {
    fn add<'b>(buffers: &mut Vec<BufferSpec<'b>>, rings: &'b RingTables) -> RingBuffers {
        RingBuffers {
            table: add(buffers, BufferSpec::Input(HostSlice::I32(&rings.table))),
            phi0: add(buffers, input_f64(&rings.phi0)),
            weight: add(buffers, input_f64(&rings.weight)),
            work: add(buffers, scratch_f64(rings.work_len)),
        }
    }

    /// One field's ring synthesis, Δ (buffer `delta`, m-major) → pixels (buffer `map`): a launch per batch.
    fn synthesis(self, rings: &RingTables, mmax: usize, delta: usize, map: usize) -> Vec<Step> {
        self.launches(rings, mmax, "sht_ring_synthesis_f64", false, delta, map)
    }

    /// One field's ring analysis, pixels (buffer `map`) → G (buffer `g`, m-major): a launch per batch.
    fn analysis(self, rings: &RingTables, mmax: usize, map: usize, g: usize) -> Vec<Step> {
        self.launches(rings, mmax, "sht_ring_analysis_f64", true, map, g)
    }

    /// A ring-stage kernel over every batch, `input` → `output`; analysis also takes the weights.
    fn launches(
        self,
        rings: &RingTables,
        mmax: usize,
        kernel: &str,
        weighted: bool,
        input: usize,
        output: usize,
    ) -> Vec<Step> {
        let nrings = rings.phi0.len();
        rings
            .batches
            .iter()
            .map(|&batch| {
                let mut args = vec![StepArg::Buffer(self.table), StepArg::Buffer(self.phi0)];
                if weighted {
                    args.push(StepArg::Buffer(self.weight));
                }
                args.extend([
                    StepArg::I32(batch.0 as i32),
                    StepArg::I32(nrings as i32),
                    StepArg::I32(mmax as i32),
                    StepArg::Buffer(input),
                    StepArg::Buffer(output),
                    StepArg::Buffer(self.work),
                ]);
                ring_launch(kernel, batch, args)
            })
            .collect()
    }
}

/// One ring-stage kernel over the rings [r0, r1), a work-group each.
fn ring_launch(kernel: &str, (r0, r1): (usize, usize), args: Vec<StepArg>) -> Step {
    Step::Launch(Launch {
        kernel: kernel.into(),
        args,
        global: (r1 - r0) * RING_GROUP,
        local: Local::Exact(RING_GROUP),
    })
}

fn output_f64(len: usize) -> BufferSpec<'static> {
    BufferSpec::Output {
        dtype: DType::F64,
        len,
    }
}

/// A job's float64 output.
fn f64_output(out: HostVec) -> Result<Vec<f64>, RunError> {
    match out {
        HostVec::F64(v) => Ok(v),
        _ => Err(RunError::Failed(
            "the sht job returned no float64 output".into(),
        )),
    }
}

/// Ring-major phases (`nm` per ring) as m-major f64 pairs: each band of m is then one contiguous slice, and a
/// work-group's reads coalesce.
fn m_major(g: &[Complex64], nrings: usize, nm: usize) -> Vec<f64> {
    (0..nm)
        .into_par_iter()
        .flat_map_iter(|m| (0..nrings).flat_map(move |r| [g[r * nm + m].re, g[r * nm + m].im]))
        .collect()
}

/// The coefficient range [c0, c1) of m in [m0, m1), in the m-major layout of [`Alm`].
fn band_coefficients(lmax: usize, m0: usize, m1: usize) -> (usize, usize) {
    let start = |m: usize| m * (2 * lmax + 3 - m) / 2;
    (start(m0), start(m1))
}

/// One output of a job as complex numbers.
fn complex_output(out: HostVec) -> Result<Vec<Complex64>, RunError> {
    match out {
        HostVec::F64(v) => Ok(v
            .chunks_exact(2)
            .map(|c| Complex64::new(c[0], c[1]))
            .collect()),
        _ => Err(RunError::Failed(
            "the sht job returned no float64 output".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_cover_every_m_once_and_fit() {
        let (lmax, mmax, nrings) = (300usize, 300usize, 500usize);
        let budget = DeviceBudget {
            max_alloc: 1 << 20,
            mem: 1 << 22,
            gpu: true,
        };
        let sizes = |m0: usize, m1: usize| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            vec![16 * ((m1 - m0) * nrings) as u64, 16 * (c1 - c0) as u64]
        };
        let bands = m_bands((0, mmax + 1), budget, sizes);
        assert!(bands.len() > 1, "{bands:?}");
        let mut next = 0;
        for &(m0, m1) in &bands {
            assert_eq!(m0, next);
            assert!(m1 > m0);
            assert!(sizes(m0, m1).iter().all(|&b| b <= budget.max_alloc));
            next = m1;
        }
        assert_eq!(next, mmax + 1);
        // A budget that holds everything gives one band.
        let all = m_bands(
            (0, mmax + 1),
            DeviceBudget {
                max_alloc: u64::MAX,
                mem: u64::MAX,
                gpu: true,
            },
            sizes,
        );
        assert_eq!(all, vec![(0, mmax + 1)]);
    }

    #[test]
    fn fft_plans_cover_every_length() {
        for n in 1..3000 {
            let radices = fft_radices(n);
            assert_eq!(radices.iter().product::<usize>().max(1), n, "{radices:?}");
            let w = fft_work_length(n);
            assert!(
                w == n || (w.is_power_of_two() && w >= 2 * n - 1),
                "{n}: {w}"
            );
        }
        // HEALPix's equator ring at nside 2048 is a power of two; 4 × a large prime goes through Bluestein.
        assert_eq!(fft_work_length(8192), 8192);
        assert_eq!(fft_radices(8192), vec![8, 8, 8, 8, 2]);
        assert_eq!(fft_work_length(4 * 2039), 16384);
        assert_eq!(fft_work_length(4 * 3 * 5 * 7), 4 * 3 * 5 * 7);
    }

    #[test]
    fn ring_batches_cover_every_ring_within_the_cap() {
        let grid = RingGrid::healpix(64).unwrap();
        let cap = 1 << 20;
        let t = RingTables::of(&grid, cap).unwrap();
        assert!(t.batches.len() > 2, "{:?}", t.batches);
        let mut next = 0;
        for &(r0, r1) in &t.batches {
            assert_eq!(r0, next);
            // Offsets restart at each batch; each batch's area is within the cap and the buffer.
            assert_eq!(t.table[4 * r0 + 2], 0);
            let end = (4 * (r1 - 1)..).step_by(4).next().unwrap();
            let area = t.table[end + 2] as usize + 4 * t.table[end + 3] as usize;
            assert!(16 * area as u64 <= cap && 2 * area <= t.work_len);
            next = r1;
        }
        assert_eq!(next, grid.rings.len());
        assert_eq!(RingTables::of(&grid, u64::MAX).unwrap().batches.len(), 1);
    }

    #[test]
    fn band_coefficients_match_the_alm_layout() {
        let alm = Alm::zeros(40, 30);
        let (c0, c1) = band_coefficients(40, 7, 12);
        assert_eq!(c0, alm.index(7, 7));
        assert_eq!(c1, alm.index(12, 12));
        assert_eq!(band_coefficients(40, 0, 31).1, alm.coeffs.len());
    }
}
