//! PAGANI (Sakiotis et al. 2021, SC'21; code: github.com/marcpaterno/gpuintegration): evaluate every
//! active region, refine errors with the parent/child rule, classify by relative error under the
//! error-budget guard, classify by an error threshold when memory runs short, filter and bisect.
//!
//! [`integrate`] is the host's decision loop, written once. The region list and every per-region step live in
//! a [`RegionStore`]: on a device ([`super::device::DeviceRegions`]) the regions stay in device memory and the
//! host reads back only per-chunk sums; on the `cpu` model ([`CpuRegions`]) they are Rust vectors. Both make
//! the same additions in the same order (chunks of [`CHUNK`] regions, the kernels' lane layout and fixed
//! tree), so every model finishes the same regions and builds the same region tree.

use super::rule::{self, Rule, RULES};
use super::{Integrand, Outcome, Stop};
use rayon::prelude::*;
use std::time::Instant;

/// What a PAGANI run may use.
#[derive(Debug, Clone)]
pub struct PaganiOptions {
    pub epsrel: f64,
    pub epsabs: f64,
    /// Upstream's cap.
    pub max_iterations: usize,
    /// Bytes the region list may use. The runner passes the smaller of the device's memory and the host's
    /// available memory; `None` here means 80 % of the host's available memory.
    pub memory_limit: Option<u64>,
    /// Split size (regions) above which the threshold classification is tried before the estimate has
    /// settled ([`WORKING_REGIONS`] by default).
    pub working_regions: u64,
    /// Wall-time budget, seconds: the run stops with `TimeLimit` after the iteration that passes it.
    pub time_limit_s: Option<f64>,
    /// Let regions finish in the first iteration on their raw null-rule errors, as the seed's code does
    /// (fewer evaluations; but those errors can be 50 times too small: f3 7D at 1e-4 claimed 2.3e-5 with a
    /// true error of 2.45e-4). Off by default: a region finishes only once the two-level refinement has
    /// compared it with its parent.
    pub finish_unrefined: bool,
}

impl Default for PaganiOptions {
    fn default() -> Self {
        PaganiOptions {
            epsrel: 1e-3,
            epsabs: 1e-40,
            max_iterations: 700,
            memory_limit: None,
            working_regions: WORKING_REGIONS,
            time_limit_s: None,
            finish_unrefined: false,
        }
    }
}

/// Evaluates a batch of regions: for each region (bounds: lo[d] then width[d]) its estimate and error
/// (`est_err[2i]`, `est_err[2i + 1]`) and split axis. Returns the device time spent, seconds.
pub trait RegionEvaluator {
    fn evaluate(
        &mut self,
        bounds: &[f64],
        est_err: &mut [f64],
        axis: &mut [i32],
    ) -> Result<f64, String>;
}

/// Bytes one region costs in PAGANI's memory model, 80·(d + 1) (as in gpuintegration: bounds,
/// estimates, errors, flags, scan and the split's copies); ours needs less on the host, so the model is
/// conservative.
pub fn region_bytes(d: usize) -> u64 {
    80 * (d as u64 + 1)
}

/// The `cpu` model's Evaluate: the kernel's arithmetic and summation order, regions in parallel.
pub struct CpuEvaluator<'a> {
    pub rule: &'a Rule,
    pub integrand: Integrand,
    pub params: Vec<f64>,
}

/// Lanes of Evaluate's work-group (`CUB_GROUP`), whose summation order the reference copies.
const EVAL_LANES: usize = 64;

impl CpuEvaluator<'_> {
    fn region(&self, bounds: &[f64], est_err: &mut [f64], axis: &mut i32) {
        let rule = self.rule;
        let d = rule.dim;
        let (lo, width) = bounds.split_at(d);
        let mut lanes = [[0.0f64; RULES]; EVAL_LANES];
        let mut f_axis = vec![0.0; 4 * d + 1];
        let mut x = vec![0.0; d];
        for p in 0..rule.len() {
            let u = &rule.points[p * d..(p + 1) * d];
            for j in 0..d {
                x[j] = (0.5 + u[j]).mul_add(width[j], lo[j]);
            }
            let f = self.integrand.eval(&x, &self.params);
            let w = &rule.weights[rule.set_of[p] as usize];
            let lane = &mut lanes[p % EVAL_LANES];
            for (acc, wr) in lane.iter_mut().zip(w) {
                *acc = wr.mul_add(f, *acc);
            }
            if p <= 4 * d {
                f_axis[p] = f;
            }
        }
        let mut stride = EVAL_LANES / 2;
        while stride > 0 {
            let (low, high) = lanes.split_at_mut(stride);
            for (a, b) in low.iter_mut().zip(high.iter()) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
            }
            stride /= 2;
        }
        let (s0, err) = rule.estimate_and_error(&lanes[0]);
        let volume: f64 = width.iter().product();
        est_err[0] = volume * s0;
        est_err[1] = volume * err;
        *axis = rule::split_axis(&f_axis, width) as i32;
    }
}

impl RegionEvaluator for CpuEvaluator<'_> {
    fn evaluate(
        &mut self,
        bounds: &[f64],
        est_err: &mut [f64],
        axis: &mut [i32],
    ) -> Result<f64, String> {
        let d = self.rule.dim;
        let t = Instant::now();
        bounds
            .par_chunks(2 * d)
            .zip(est_err.par_chunks_mut(2))
            .zip(axis.par_iter_mut())
            .for_each(|((b, e), a)| self.region(b, e, a));
        Ok(t.elapsed().as_secs_f64())
    }
}

/// The initial uniform grid: 4 splits per axis below 5D, 2 up to 10D, 1 above (as in PAGANI).
pub fn initial_regions(lo: &[f64], hi: &[f64]) -> Vec<f64> {
    let d = lo.len();
    let splits: usize = match d {
        0..=4 => 4,
        5..=10 => 2,
        _ => 1,
    };
    let n = splits.pow(d as u32);
    let mut bounds = Vec::with_capacity(n * 2 * d);
    for cell in 0..n {
        let mut rest = cell;
        let mut widths = Vec::with_capacity(d);
        for j in 0..d {
            let w = (hi[j] - lo[j]) / splits as f64;
            bounds.push(lo[j] + (rest % splits) as f64 * w);
            widths.push(w);
            rest /= splits;
        }
        bounds.extend(widths);
    }
    bounds
}

/// Whether the last three total estimates agree to ⌈log10(1/epsrel)⌉ significant digits.
fn estimate_settled(history: &[f64], epsrel: f64) -> bool {
    if history.len() < 3 {
        return false;
    }
    let digits = (1.0 / epsrel).log10().ceil();
    let tol = 10f64.powf(-digits);
    let last = history[history.len() - 1];
    history[history.len() - 3..history.len() - 1]
        .iter()
        .all(|&h| (h - last).abs() <= tol * last.abs())
}

/// Work-items of the region-list kernels, the regions each owns, and the regions of one chunk
/// (`CUB_LANES`, `CUB_PER_LANE`, `CUB_CHUNK` in cl/common/cubature.h).
pub const LANES: usize = 256;
pub const PER_LANE: usize = 16;
pub const CHUNK: usize = LANES * PER_LANE;

/// What one chunk of regions adds up to (a work-group's partial sums in the kernels).
#[derive(Debug, Clone, Copy, Default)]
pub struct ChunkSums {
    pub est: f64,
    pub err: f64,
    pub finished_est: f64,
    pub finished_err: f64,
    /// Σ |estimate| of all regions and of the finished ones: the scale of the rounding floor.
    pub abs_est: f64,
    pub finished_abs_est: f64,
    pub active: u32,
    pub bad: u32,
}

/// Partial sums per chunk (`CUB_SUMS` in cl/common/cubature.h).
pub const CHUNK_SUMS: usize = 6;

/// Floor of the reported error, in units of f64::EPSILON × Σ|region estimate|: PAGANI's null rules estimate
/// the truncation error only, and the float64 sums over the rule's points and the region tree carry their
/// own rounding (a linear integrand, whose rule error is pure rounding, showed 11 ulps in 8D).
pub const ROUNDING_FLOOR_ULPS: f64 = 64.0;

/// The outcome of a classification: how many regions stay active (per chunk, for the split's offsets) and
/// the estimate and error of those that finished.
#[derive(Debug, Clone, Default)]
pub struct Classified {
    pub n_active: u64,
    pub finished_est: f64,
    pub finished_err: f64,
    pub finished_abs_est: f64,
    pub chunk_active: Vec<u32>,
}

/// One evaluated iteration: the active regions' total estimate and (refined) error, how many regions came
/// back without a finite answer or a split axis, and their relative classification.
#[derive(Debug, Clone, Default)]
pub struct Evaluated {
    pub est: f64,
    pub err: f64,
    pub abs_est: f64,
    pub bad: u64,
    pub relative: Classified,
}

impl Evaluated {
    /// Adds the chunks in order (the one order every model uses).
    pub fn from_chunks(chunks: &[ChunkSums]) -> Self {
        let mut e = Evaluated::default();
        for c in chunks {
            e.est += c.est;
            e.err += c.err;
            e.abs_est += c.abs_est;
            e.bad += c.bad as u64;
        }
        e.relative = Classified::from_chunks(chunks);
        e
    }
}

impl Classified {
    pub fn from_chunks(chunks: &[ChunkSums]) -> Self {
        let mut c = Classified {
            chunk_active: Vec::with_capacity(chunks.len()),
            ..Default::default()
        };
        for k in chunks {
            c.n_active += k.active as u64;
            c.finished_est += k.finished_est;
            c.finished_err += k.finished_err;
            c.finished_abs_est += k.finished_abs_est;
            c.chunk_active.push(k.active);
        }
        c
    }
}

/// One step of the threshold search: over the active regions, how many have error > τ, the summed error of
/// the others (they would finish), and the smallest and largest error.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub kept: u64,
    pub finished_err: f64,
    pub min: f64,
    pub max: f64,
}

/// Per chunk: (finished error, min, max, kept), as the `cub_probe` kernel writes them.
#[derive(Debug, Clone, Copy)]
pub struct ChunkProbe {
    pub finished_err: f64,
    pub min: f64,
    pub max: f64,
    pub kept: u32,
}

impl Probe {
    pub fn from_chunks(chunks: &[ChunkProbe]) -> Self {
        let mut p = Probe {
            kept: 0,
            finished_err: 0.0,
            min: f64::MAX,
            max: -1.0,
        };
        for c in chunks {
            p.kept += c.kept as u64;
            p.finished_err += c.finished_err;
            p.min = p.min.min(c.min);
            p.max = p.max.max(c.max);
        }
        p
    }
}

/// How to re-classify after the relative classification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reclassify {
    /// Every region stays active (the error-budget guard).
    All,
    /// A region stays active if it was and its error exceeds τ (memory-driven classification).
    Threshold(f64),
}

/// The region list and its per-region steps, on some backend.
pub trait RegionStore {
    /// Regions in the list now.
    fn regions(&self) -> usize;
    /// Evaluates every region (estimate, error, split axis), refines the errors against the parents,
    /// classifies by relative error and returns the chunk sums, added in order.
    fn evaluate(&mut self, epsrel: f64) -> Result<Evaluated, String>;
    fn reclassify(&mut self, rule: Reclassify) -> Result<Classified, String>;
    fn probe(&mut self, tau: f64) -> Result<Probe, String>;
    /// Replaces the list by the two halves of every active region: `[left halves | right halves]`, in order.
    fn split(&mut self, classified: &Classified) -> Result<(), String>;
    /// Device time so far (the `cpu` model: host time of the parallel evaluation), seconds.
    fn device_seconds(&self) -> f64;
}

/// The kernels' tree over the lanes of a work-group (`cub_tree`).
fn tree(mut v: [f64; LANES], op: fn(f64, f64) -> f64) -> f64 {
    let mut stride = LANES / 2;
    while stride > 0 {
        for l in 0..stride {
            v[l] = op(v[l], v[l + stride]);
        }
        stride /= 2;
    }
    v[0]
}

fn add(a: f64, b: f64) -> f64 {
    a + b
}

/// Sums per lane of one chunk, in the kernels' order (`cub_lane_add`, `cub_chunk_partials`).
struct LaneSums {
    acc: [[f64; LANES]; CHUNK_SUMS],
    active: u32,
}

impl LaneSums {
    fn new() -> Self {
        LaneSums {
            acc: [[0.0; LANES]; CHUNK_SUMS],
            active: 0,
        }
    }
    fn add(&mut self, lane: usize, est: f64, err: f64, active: bool) {
        self.acc[0][lane] += est;
        self.acc[1][lane] += err;
        self.acc[4][lane] += est.abs();
        if active {
            self.active += 1;
        } else {
            self.acc[2][lane] += est;
            self.acc[3][lane] += err;
            self.acc[5][lane] += est.abs();
        }
    }
    fn finish(self) -> ChunkSums {
        let t = self.acc.map(|a| tree(a, add));
        ChunkSums {
            est: t[0],
            err: t[1],
            finished_est: t[2],
            finished_err: t[3],
            abs_est: t[4],
            finished_abs_est: t[5],
            active: self.active,
            bad: 0,
        }
    }
}

/// Two-level error refinement of region i (Cuhre's parent/child correction, as in PAGANI; the kernels'
/// `cub_refine_classify_item`): its sibling is i ± n/2 and its parent's estimate `parent`.
fn refined_error(raw: f64, est: f64, sibling_est: f64, sibling_raw: f64, parent: f64) -> f64 {
    let delta = (est + sibling_est - parent).abs() / 4.0;
    let pair = raw + sibling_raw;
    if pair > 0.0 {
        raw.mul_add(1.0 + 2.0 * delta / pair, delta)
    } else {
        raw + delta
    }
}

/// The `cpu` model's region list: Rust vectors, Evaluate through a [`RegionEvaluator`].
pub struct CpuRegions<'a> {
    pub dim: usize,
    evaluator: &'a mut dyn RegionEvaluator,
    bounds: Vec<f64>,
    est_err: Vec<f64>,
    axis: Vec<i32>,
    parents: Vec<f64>,
    est: Vec<f64>,
    err: Vec<f64>,
    active: Vec<bool>,
    seconds: f64,
}

impl<'a> CpuRegions<'a> {
    /// The initial uniform grid of [lo, hi].
    pub fn new(lo: &[f64], hi: &[f64], evaluator: &'a mut dyn RegionEvaluator) -> Self {
        CpuRegions {
            dim: lo.len(),
            evaluator,
            bounds: initial_regions(lo, hi),
            est_err: Vec::new(),
            axis: Vec::new(),
            parents: Vec::new(),
            est: Vec::new(),
            err: Vec::new(),
            active: Vec::new(),
            seconds: 0.0,
        }
    }

    fn chunk_sums(&self) -> Vec<ChunkSums> {
        self.est
            .par_chunks(CHUNK)
            .zip(self.err.par_chunks(CHUNK))
            .zip(self.active.par_chunks(CHUNK))
            .map(|((est, err), active)| {
                let mut s = LaneSums::new();
                for (k, ((&v, &e), &a)) in est.iter().zip(err).zip(active).enumerate() {
                    s.add(k / PER_LANE, v, e, a);
                }
                s.finish()
            })
            .collect()
    }
}

impl RegionStore for CpuRegions<'_> {
    fn regions(&self) -> usize {
        self.bounds.len() / (2 * self.dim)
    }

    fn evaluate(&mut self, epsrel: f64) -> Result<Evaluated, String> {
        let n = self.regions();
        // Poison: a region the evaluator leaves alone stays NaN / axis −1 and is counted as bad.
        self.est_err = vec![f64::NAN; 2 * n];
        self.axis = vec![-1; n];
        self.seconds += self
            .evaluator
            .evaluate(&self.bounds, &mut self.est_err, &mut self.axis)?;
        // One pass per chunk, as `cub_refine_classify`: refine, classify, and add up in the kernel's order.
        let (est_err, axis, parents) = (&self.est_err, &self.axis, &self.parents);
        let half = n / 2;
        let (mut est, mut err, mut active) = (vec![0.0; n], vec![0.0; n], vec![false; n]);
        let chunks: Vec<ChunkSums> = est
            .par_chunks_mut(CHUNK)
            .zip(err.par_chunks_mut(CHUNK))
            .zip(active.par_chunks_mut(CHUNK))
            .enumerate()
            .map(|(c, ((est, err), active))| {
                let mut sums = LaneSums::new();
                let mut bad = 0;
                for k in 0..est.len() {
                    let i = c * CHUNK + k;
                    let (v, raw) = (est_err[2 * i], est_err[2 * i + 1]);
                    let e = if parents.is_empty() {
                        raw
                    } else {
                        let sib = if i < half { i + half } else { i - half };
                        refined_error(
                            raw,
                            v,
                            est_err[2 * sib],
                            est_err[2 * sib + 1],
                            parents[i % half],
                        )
                    };
                    bad += u32::from(!(v.is_finite() && e.is_finite() && axis[i] >= 0));
                    (est[k], err[k], active[k]) = (v, e, e > epsrel * v.abs());
                    sums.add(k / PER_LANE, v, e, active[k]);
                }
                ChunkSums {
                    bad,
                    ..sums.finish()
                }
            })
            .collect();
        (self.est, self.err, self.active) = (est, err, active);
        Ok(Evaluated::from_chunks(&chunks))
    }

    fn reclassify(&mut self, rule: Reclassify) -> Result<Classified, String> {
        let err = &self.err;
        self.active.par_iter_mut().enumerate().for_each(|(i, a)| {
            *a = match rule {
                Reclassify::All => true,
                Reclassify::Threshold(tau) => *a && err[i] > tau,
            }
        });
        Ok(Classified::from_chunks(&self.chunk_sums()))
    }

    fn probe(&mut self, tau: f64) -> Result<Probe, String> {
        let chunks: Vec<ChunkProbe> = self
            .err
            .par_chunks(CHUNK)
            .zip(self.active.par_chunks(CHUNK))
            .map(|(err, active)| {
                let mut finished = [0.0; LANES];
                let (mut min, mut max, mut kept) = (f64::MAX, -1.0f64, 0u32);
                for (k, (&e, _)) in err.iter().zip(active).enumerate().filter(|(_, (_, &a))| a) {
                    if e > tau {
                        kept += 1;
                    } else {
                        finished[k / PER_LANE] += e;
                    }
                    min = min.min(e);
                    max = max.max(e);
                }
                ChunkProbe {
                    finished_err: tree(finished, add),
                    min,
                    max,
                    kept,
                }
            })
            .collect();
        Ok(Probe::from_chunks(&chunks))
    }

    fn split(&mut self, _: &Classified) -> Result<(), String> {
        let d = self.dim;
        let survivors: Vec<usize> = (0..self.regions())
            .into_par_iter()
            .filter(|&i| self.active[i])
            .collect();
        let m = survivors.len();
        let mut next = vec![0.0; 2 * m * 2 * d];
        let (left, right) = next.split_at_mut(m * 2 * d);
        let (bounds, axis) = (&self.bounds, &self.axis);
        left.par_chunks_mut(2 * d)
            .zip(right.par_chunks_mut(2 * d))
            .zip(survivors.par_iter())
            .for_each(|((l, r), &i)| {
                let b = &bounds[i * 2 * d..(i + 1) * 2 * d];
                l.copy_from_slice(b);
                r.copy_from_slice(b);
                let k = axis[i] as usize;
                let w = 0.5 * b[d + k];
                l[d + k] = w;
                r[d + k] = w;
                r[k] = b[k] + w;
            });
        self.parents = survivors.iter().map(|&i| self.est[i]).collect();
        self.bounds = next;
        Ok(())
    }

    fn device_seconds(&self) -> f64 {
        self.seconds
    }
}

/// Memory-driven classification (as in PAGANI): an error threshold τ such that the active regions
/// with error > τ stay active, at most `active_frac` of the iteration's regions (as the seed's code counts
/// them), while the error of those finished stays within `budget_frac` of the remaining budget. τ starts at
/// the active regions' mean error and moves half-way toward the bound that fails; both fractions relax in
/// 10 % steps (active 50 → 70 %, budget 25 → 45 %). Every step is a [`RegionStore::probe`]. Returns τ and how
/// many regions it keeps, or `None` when no threshold satisfies both.
fn threshold_search(
    store: &mut dyn RegionStore,
    n_active: u64,
    remaining_budget: f64,
) -> Result<Option<(f64, u64)>, String> {
    if n_active == 0 || remaining_budget <= 0.0 {
        return Ok(None);
    }
    let all = store.probe(f64::INFINITY)?;
    let mean = all.finished_err / n_active as f64;
    let n = store.regions() as f64;
    for relax in 0..3 {
        let active_frac = 0.5 + 0.1 * relax as f64;
        let budget_frac = 0.25 + 0.1 * relax as f64;
        let (mut lower, mut upper, mut tau) = (all.min, all.max, mean);
        for _ in 0..40 {
            let p = store.probe(tau)?;
            if p.kept as f64 > active_frac * n {
                lower = tau;
                tau = 0.5 * (tau + upper);
            } else if p.finished_err > budget_frac * remaining_budget {
                upper = tau;
                tau = 0.5 * (lower + tau);
            } else {
                return Ok(Some((tau, p.kept)));
            }
        }
    }
    Ok(None)
}

/// The factor on the summed region errors in every claim (the reported error and the convergence test).
/// The null-rule and two-level errors are estimates, not bounds: on the `cpu` sweep of f1–f6 in 2–7D at
/// 1e-3..1e-5 they fell short of the true error by up to 13 % (f5 6D at 1e-3, once every region had been
/// refined). Twice the estimate covered every claim of that sweep and of the H200 sweep
/// (reports/nvidia-h200/cubature-coverage.md).
pub const ERROR_SAFETY: f64 = 2.0;

/// Regions above which a settled estimate triggers the threshold classification even with memory to
/// spare (our addition, docs/cubature.md): relative classification never finishes the far tails of a peak
/// (tiny estimate, comparable error), so without it they double every iteration for nothing.
pub const FOCUS_REGIONS: u64 = 1 << 21;

/// Regions above which a split tries the threshold classification even before the estimate has settled
/// (docs/cubature.md). The seed's code does this at its modelled 16 GB (9–15 M regions in 5–8D); on a device
/// with more memory PAGANI would otherwise keep splitting every tail region for as long as memory lasts. The
/// error budget still bounds what may finish; when no threshold passes, the split goes on as long as the
/// device's real free memory allows.
pub const WORKING_REGIONS: u64 = 1 << 23;

/// Integrates `integrand` with PAGANI over the regions `store` starts with (the initial grid).
pub fn integrate(
    integrand: Integrand,
    rule: &Rule,
    options: &PaganiOptions,
    store: &mut dyn RegionStore,
) -> Result<Outcome, String> {
    let d = rule.dim;
    // The seed's classification trusts raw and refined errors as they stand.
    let safety = if options.finish_unrefined {
        1.0
    } else {
        ERROR_SAFETY
    };
    let start = Instant::now();
    let memory = options
        .memory_limit
        .or_else(|| crate::backend::cpu::available_memory().map(|m| m / 10 * 8))
        .unwrap_or(8 << 30);
    let (mut finished_est, mut finished_err, mut finished_abs) = (0.0f64, 0.0f64, 0.0f64);
    let mut history = Vec::new();
    let mut outcome = Outcome::new(integrand, d);
    for iteration in 0..options.max_iterations {
        let n = store.regions();
        // A region finishes when its own claim, safety × error, is within epsrel of its estimate.
        let ev = store.evaluate(options.epsrel / safety)?;
        outcome.evaluations += (n * rule.len()) as u64;
        outcome.regions += n as u64;
        outcome.peak_regions = outcome.peak_regions.max(n as u64);
        outcome.iterations = iteration + 1;
        if ev.bad > 0 {
            return Err(format!(
                "Evaluate returned a non-finite estimate or no split axis for {} of {n} regions in iteration {}",
                ev.bad,
                iteration + 1
            ));
        }
        let total_est = finished_est + ev.est;
        let rounding = ROUNDING_FLOOR_ULPS * f64::EPSILON * (finished_abs + ev.abs_est);
        let total_err = safety * (finished_err + ev.err) + rounding;
        if !(total_est.is_finite() && total_err.is_finite()) {
            return Err(format!(
                "the sums of iteration {} are not finite (estimate {total_est:?}, error {total_err:?}): \
                 a kernel left regions or their parents unwritten",
                iteration + 1
            ));
        }
        history.push(total_est);
        outcome.estimate = total_est;
        outcome.error = total_err;
        // No claim before the errors were refined once (the first iteration's are raw null-rule errors:
        // f3 2D claimed 1.9e-9 there for a true error of 2.2e-9).
        let refined = iteration > 0 || options.finish_unrefined;
        if refined && (total_err <= options.epsrel * total_est.abs() || total_err <= options.epsabs)
        {
            outcome.stop = Stop::Converged;
            break;
        }
        // Relative-error classification under the error-budget guard. A region's null-rule error is trusted
        // only once the two-level refinement has compared its estimate with its parent's, i.e. from the
        // second iteration: nothing finishes in the first (unless `finish_unrefined`, as the seed's code).
        let mut class = ev.relative;
        if !refined
            || safety * (finished_err + class.finished_err) > options.epsrel * total_est.abs()
        {
            class = store.reclassify(Reclassify::All)?;
        }
        // Threshold classification when a full split would not fit in memory, or would fill > 10 % of it
        // once the estimate has settled (as in PAGANI), or would pass FOCUS_REGIONS once settled, or
        // WORKING_REGIONS at all.
        let split_bytes = 2 * class.n_active * region_bytes(d);
        let split_regions = 2 * class.n_active;
        let settled = estimate_settled(&history, options.epsrel);
        if split_bytes > memory
            || split_regions > options.working_regions
            || (settled && (split_bytes > memory / 10 || split_regions > FOCUS_REGIONS))
        {
            let remaining =
                options.epsrel * total_est.abs() / safety - finished_err - class.finished_err;
            match threshold_search(store, class.n_active, remaining)? {
                Some((tau, kept)) if 2 * kept * region_bytes(d) <= memory => {
                    class = store.reclassify(Reclassify::Threshold(tau))?;
                }
                _ if split_bytes > memory => {
                    outcome.stop = Stop::MemoryLimit;
                    break;
                }
                _ => {}
            }
        }
        finished_est += class.finished_est;
        finished_err += class.finished_err;
        finished_abs += class.finished_abs_est;
        if class.n_active == 0 {
            // Everything finished without meeting the global test (only when epsabs or rounding intervene).
            outcome.estimate = finished_est;
            outcome.error =
                safety * finished_err + ROUNDING_FLOOR_ULPS * f64::EPSILON * finished_abs;
            outcome.stop = Stop::NoActiveRegions;
            break;
        }
        if iteration + 1 == options.max_iterations {
            outcome.stop = Stop::IterationLimit;
            break;
        }
        if options
            .time_limit_s
            .is_some_and(|t| start.elapsed().as_secs_f64() > t)
        {
            outcome.stop = Stop::TimeLimit;
            break;
        }
        store.split(&class)?;
    }
    outcome.device_s = store.device_seconds();
    outcome.total_s = start.elapsed().as_secs_f64();
    Ok(outcome)
}
