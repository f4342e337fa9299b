//! The transforms on a device (OpenCL, CUDA, SYCL): the Legendre stage in the kernels of cl/common/sht.h,
//! the ring stage (one real FFT per ring) on the host with the `cpu` model's code.
//!
//! Mirrors the header's layouts: ring pairs in blocks of PAIRS_PER_BLOCK; synthesis has one work-group per
//! (m, block), analysis one per m (walking the blocks in turn); m ascending, so that the longest walks (small
//! m) start first. Work too large for the device is cut into
//! bands of consecutive m, one job each.

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

/// Consecutive bands [m0, m1) covering 0..=mmax whose buffers fit the budget: each buffer at most the largest
/// allocation, all of them together within half the device's memory. `sizes(m0, m1)` lists a band's buffers
/// in bytes. A single m that does not fit is still a band of its own (the run then fails with the device's
/// own allocation error, named).
fn m_bands(
    mmax: usize,
    budget: DeviceBudget,
    sizes: impl Fn(usize, usize) -> Vec<u64>,
) -> Vec<(usize, usize)> {
    let fits = |m0: usize, m1: usize| {
        let s = sizes(m0, m1);
        s.iter().all(|&b| b <= budget.max_alloc) && s.iter().sum::<u64>() <= budget.mem / 2
    };
    let mut bands = Vec::new();
    let mut m0 = 0;
    while m0 <= mmax {
        // The largest m1 that fits, by doubling then bisection (sizes grow with m1).
        let (mut lo, mut hi) = (m0 + 1, mmax + 1);
        if !fits(m0, hi) {
            let mut step = 1;
            while lo + step <= mmax + 1 && fits(m0, lo + step) {
                lo += step;
                step *= 2;
            }
            hi = (lo + step).min(mmax + 1);
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

    fn add_plan(&mut self, run: PlanRun) {
        self.add_times(&run.times);
        self.build_s += run.build_s;
        if self.resources.is_none() {
            self.resources = run.resources;
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
                timer: "device events (Legendre stage) + host clock (ring FFTs)".into(),
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
            opts: *opts,
            memory_cap: None,
            timing: Timing::default(),
        })
    }

    /// Uses at most `cap` bytes of device memory (tiles into more bands of m).
    pub fn with_memory_cap(mut self, cap: Option<u64>) -> Self {
        self.memory_cap = cap;
        self
    }

    fn budget(&self) -> DeviceBudget {
        DeviceBudget::of(self.dev.info()).capped(self.memory_cap)
    }

    /// Synthesis: the map of `alm` on the grid.
    pub fn alm2map(&mut self, alm: &Alm) -> Result<Vec<f64>, RunError> {
        alm.check()?;
        let delta = self.synthesis_delta(alm)?;
        let (map, t) = time_host(&self.opts, "host clock", || {
            Ok(rings_from_delta(self.grid, alm.mmax, &delta))
        })?;
        self.timing.add_host(RING_STAGE, t);
        Ok(map)
    }

    /// Adjoint synthesis (map2alm with no iteration).
    pub fn adjoint(&mut self, map: &[f64], lmax: usize, mmax: usize) -> Result<Alm, RunError> {
        super::cpu::check_analysis(self.grid, map, lmax, mmax)?;
        let (g, t) = time_host(&self.opts, "host clock", || {
            Ok(rings_to_phases(self.grid, map, mmax))
        })?;
        self.timing.add_host(RING_STAGE, t);
        self.analysis(&g, lmax, mmax)
    }

    /// Analysis with `iter` Jacobi refinements, as the `cpu` model's [`super::map2alm`].
    pub fn map2alm(
        &mut self,
        map: &[f64],
        lmax: usize,
        mmax: usize,
        iter: usize,
    ) -> Result<Alm, RunError> {
        let mut alm = self.adjoint(map, lmax, mmax)?;
        for _ in 0..iter {
            let model = self.alm2map(&alm)?;
            let residual: Vec<f64> = map.iter().zip(&model).map(|(f, g)| f - g).collect();
            let correction = self.adjoint(&residual, lmax, mmax)?;
            for (a, c) in alm.coeffs.iter_mut().zip(&correction.coeffs) {
                *a += c;
            }
        }
        Ok(alm)
    }

    /// What everything run so far measured, with `output`.
    pub fn measured<T>(self, output: T) -> Measured<T> {
        self.timing.measured(output)
    }

    /// Δ_m(ring) of every m and ring, m-major, from the device.
    fn synthesis_delta(&mut self, alm: &Alm) -> Result<Vec<Complex64>, RunError> {
        let (lmax, mmax, nrings) = (alm.lmax, alm.mmax, self.pairs.nrings);
        let flat = alm.to_flat();
        self.legendre_stage(Stage::Synthesis, lmax, mmax, |m0, m1| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            (&flat[2 * c0..2 * c1], (m1 - m0) * nrings)
        })
    }

    /// a_lm from the ring phases G (ring-major, m = 0..=mmax), on the device.
    fn analysis(&mut self, g: &[Complex64], lmax: usize, mmax: usize) -> Result<Alm, RunError> {
        let (nm, nrings) = (mmax + 1, self.pairs.nrings);
        // m-major for the device: each band's phases are one contiguous slice, and a group's reads coalesce.
        let g_mmajor: Vec<f64> = (0..nm)
            .into_par_iter()
            .flat_map_iter(|m| (0..nrings).flat_map(move |r| [g[r * nm + m].re, g[r * nm + m].im]))
            .collect();
        let coeffs = self.legendre_stage(Stage::Analysis, lmax, mmax, |m0, m1| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            (&g_mmajor[2 * m0 * nrings..2 * m1 * nrings], c1 - c0)
        })?;
        if coeffs.len() != Alm::len_for(lmax, mmax) {
            return Err(RunError::Failed(format!(
                "the device returned {} coefficients, lmax {lmax} mmax {mmax} has {}",
                coeffs.len(),
                Alm::len_for(lmax, mmax)
            )));
        }
        Ok(Alm { lmax, mmax, coeffs })
    }

    /// One Legendre stage over bands of m: `band(m0, m1)` gives the band's input (f64 pairs) and its output's
    /// length in complex values; the outputs are concatenated in band order.
    fn legendre_stage<'i>(
        &mut self,
        stage: Stage,
        lmax: usize,
        mmax: usize,
        band: impl Fn(usize, usize) -> (&'i [f64], usize),
    ) -> Result<Vec<Complex64>, RunError> {
        let cmm = start_factors(mmax);
        let bands = m_bands(mmax, self.budget(), |m0, m1| {
            let (input, out_len) = band(m0, m1);
            vec![8 * input.len() as u64, 16 * out_len as u64]
        });
        let pairs = &self.pairs;
        let jobs: Vec<KernelJob> = bands
            .iter()
            .map(|&(m0, m1)| {
                let (input, out_len) = band(m0, m1);
                let groups = match stage {
                    Stage::Synthesis => (m1 - m0) * pairs.nblocks,
                    Stage::Analysis => m1 - m0,
                };
                KernelJob {
                    program: &PROGRAM,
                    defines: Vec::new(),
                    buffers: vec![
                        BufferSpec::Input(HostSlice::F64(&pairs.cs)),
                        BufferSpec::Input(HostSlice::I32(&pairs.rings)),
                        BufferSpec::Input(HostSlice::F64(&cmm[m0..m1])),
                        BufferSpec::Input(HostSlice::F64(input)),
                        BufferSpec::Output {
                            dtype: DType::F64,
                            len: 2 * out_len,
                        },
                    ],
                    steps: vec![Step::Launch(Launch {
                        kernel: stage.kernel().into(),
                        args: vec![
                            StepArg::Buffer(0),
                            StepArg::Buffer(1),
                            StepArg::I32(pairs.npairs as i32),
                            StepArg::I32(pairs.nrings as i32),
                            StepArg::I32(lmax as i32),
                            StepArg::I32(m0 as i32),
                            StepArg::I32(pairs.nblocks as i32),
                            StepArg::Buffer(2),
                            StepArg::Buffer(3),
                            StepArg::Buffer(4),
                        ],
                        global: groups * GROUP,
                        local: Local::Exact(GROUP),
                    })],
                    warmup: self.opts.warmup,
                    repeats: self.opts.repeats,
                }
            })
            .collect();
        let mut run = run_plan(self.dev, &jobs, self.opts.warmup)?;
        let outputs = std::mem::take(&mut run.outputs);
        self.timing.add_plan(run);
        let mut out = Vec::new();
        for o in outputs {
            out.extend(complex_output(o)?);
        }
        Ok(out)
    }
}

/// The two kernels, which take the same arguments: synthesis's input is a_lm and its output Δ; analysis's
/// input is G and its output a_lm.
#[derive(Clone, Copy)]
enum Stage {
    Synthesis,
    Analysis,
}

impl Stage {
    fn kernel(self) -> &'static str {
        match self {
            Stage::Synthesis => "sht_synthesis_f64",
            Stage::Analysis => "sht_analysis_f64",
        }
    }
}

/// The coefficient range [c0, c1) of m in [m0, m1), in the m-major layout of [`Alm`].
fn band_coefficients(lmax: usize, m0: usize, m1: usize) -> (usize, usize) {
    let start = |m: usize| m * (2 * lmax + 3 - m) / 2;
    (start(m0), start(m1))
}

/// A job's single output as complex numbers.
fn complex_output(mut out: Vec<HostVec>) -> Result<Vec<Complex64>, RunError> {
    match out.pop() {
        Some(HostVec::F64(v)) => Ok(v
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
        };
        let sizes = |m0: usize, m1: usize| {
            let (c0, c1) = band_coefficients(lmax, m0, m1);
            vec![16 * ((m1 - m0) * nrings) as u64, 16 * (c1 - c0) as u64]
        };
        let bands = m_bands(mmax, budget, sizes);
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
            mmax,
            DeviceBudget {
                max_alloc: u64::MAX,
                mem: u64::MAX,
            },
            sizes,
        );
        assert_eq!(all, vec![(0, mmax + 1)]);
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
