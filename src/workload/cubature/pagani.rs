//! PAGANI's host algorithm (research/cubature.md §2.4–2.5): evaluate every active region, refine errors
//! with the parent/child rule, classify by relative error under the error-budget guard, classify by an
//! error threshold when memory runs short, filter and bisect. Evaluate (where > 90 % of the time goes)
//! runs on any backend through [`RegionEvaluator`]; the rest runs here, on the host, where the regions live.

use super::rule::{self, Rule, RULES};
use super::{Integrand, Outcome, Status};
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
    /// Wall-time budget, seconds: the run stops with `TimeLimit` after the iteration that passes it.
    pub time_limit_s: Option<f64>,
}

impl Default for PaganiOptions {
    fn default() -> Self {
        PaganiOptions {
            epsrel: 1e-3,
            epsabs: 1e-40,
            max_iterations: 700,
            memory_limit: None,
            time_limit_s: None,
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

/// Bytes one region costs in PAGANI's memory model, 80·(d + 1) (research §2.5: bounds, estimates,
/// errors, flags, scan and the split's copies); ours needs less on the host, so the model is conservative.
pub fn region_bytes(d: usize) -> u64 {
    80 * (d as u64 + 1)
}

/// The host's available memory (`MemAvailable` of /proc/meminfo), bytes; `None` where unknown.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The `cpu` model's Evaluate: the kernel's arithmetic and summation order, regions in parallel.
pub struct CpuEvaluator<'a> {
    pub rule: &'a Rule,
    pub integrand: Integrand,
    pub params: Vec<f64>,
}

/// Lanes of the device work-group whose summation order the reference copies.
const LANES: usize = 64;

impl CpuEvaluator<'_> {
    fn region(&self, bounds: &[f64], est_err: &mut [f64], axis: &mut i32) {
        let rule = self.rule;
        let d = rule.dim;
        let (lo, width) = bounds.split_at(d);
        let mut lanes = [[0.0f64; RULES]; LANES];
        let mut f_axis = vec![0.0; 4 * d + 1];
        let mut x = vec![0.0; d];
        for p in 0..rule.len() {
            let u = &rule.points[p * d..(p + 1) * d];
            for j in 0..d {
                x[j] = (0.5 + u[j]).mul_add(width[j], lo[j]);
            }
            let f = self.integrand.eval(&x, &self.params);
            let w = &rule.weights[rule.set_of[p] as usize];
            let lane = &mut lanes[p % LANES];
            for (acc, wr) in lane.iter_mut().zip(w) {
                *acc = wr.mul_add(f, *acc);
            }
            if p <= 4 * d {
                f_axis[p] = f;
            }
        }
        let mut stride = LANES / 2;
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

/// The initial uniform grid: 4 splits per axis below 5D, 2 up to 10D, 1 above (research §2.5 step 0).
fn initial_regions(lo: &[f64], hi: &[f64]) -> Vec<f64> {
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

/// Memory-driven classification (research §2.5 step 5): an error threshold τ such that the regions with
/// error > τ stay active, at most `active_frac` of them, while the error of those finished stays within
/// `budget_frac` of the remaining budget. τ starts at the mean and moves half-way toward the bound that
/// fails; both fractions relax in 10 % steps (active 50 → 70 %, budget 25 → 45 %). Returns the new
/// active flags, or `None` when no threshold satisfies both.
fn threshold_classify(err: &[f64], active: &[bool], remaining_budget: f64) -> Option<Vec<bool>> {
    let mut sorted: Vec<f64> = err
        .par_iter()
        .zip(active.par_iter())
        .filter(|(_, &a)| a)
        .map(|(&e, _)| e)
        .collect();
    let n = sorted.len();
    if n == 0 || remaining_budget <= 0.0 {
        return None;
    }
    sorted.par_sort_unstable_by(f64::total_cmp);
    // prefix[k]: error of the k smallest, the regions a threshold between sorted[k-1] and sorted[k] finishes.
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for &e in &sorted {
        prefix.push(prefix[prefix.len() - 1] + e);
    }
    let mean = prefix[n] / n as f64;
    let (min, max) = (sorted[0], sorted[n - 1]);
    for relax in 0..3 {
        let active_frac = 0.5 + 0.1 * relax as f64;
        let budget_frac = 0.25 + 0.1 * relax as f64;
        let (mut lower, mut upper, mut tau) = (min, max, mean);
        for _ in 0..40 {
            let finished = sorted.partition_point(|&e| e <= tau);
            let (kept, finished_err) = (n - finished, prefix[finished]);
            if kept as f64 > active_frac * n as f64 {
                lower = tau;
                tau = 0.5 * (tau + upper);
            } else if finished_err > budget_frac * remaining_budget {
                upper = tau;
                tau = 0.5 * (lower + tau);
            } else {
                return Some(
                    err.par_iter()
                        .zip(active.par_iter())
                        .map(|(&e, &a)| a && e > tau)
                        .collect(),
                );
            }
        }
    }
    None
}

/// Sum in a fixed order whatever the thread count: fixed chunks summed in parallel, then in sequence.
fn ordered_sum(v: &[f64]) -> f64 {
    v.par_chunks(1 << 14)
        .map(|c| c.iter().sum::<f64>())
        .collect::<Vec<f64>>()
        .iter()
        .sum()
}

/// Sum of `values` over the finished regions (`active` false), in the fixed order of [`ordered_sum`].
fn finished_sum(values: &[f64], active: &[bool]) -> f64 {
    values
        .par_chunks(1 << 14)
        .zip(active.par_chunks(1 << 14))
        .map(|(v, a)| {
            v.iter()
                .zip(a)
                .filter(|(_, &a)| !a)
                .map(|(x, _)| x)
                .sum::<f64>()
        })
        .collect::<Vec<f64>>()
        .iter()
        .sum()
}

/// Regions above which a settled estimate triggers the threshold classification even with memory to
/// spare (our addition, docs/cubature.md): relative classification never finishes the far tails of a peak
/// (tiny estimate, comparable error), so without it they double every iteration for nothing.
pub const FOCUS_REGIONS: u64 = 1 << 21;

/// Integrates `integrand` over the box [lo, hi] with PAGANI, evaluating regions through `evaluator`.
pub fn integrate(
    integrand: Integrand,
    rule: &Rule,
    lo: &[f64],
    hi: &[f64],
    options: &PaganiOptions,
    evaluator: &mut dyn RegionEvaluator,
) -> Result<Outcome, String> {
    let d = rule.dim;
    let start = Instant::now();
    let memory = options
        .memory_limit
        .or_else(|| available_memory().map(|m| m / 10 * 8))
        .unwrap_or(8 << 30);
    let mut bounds = initial_regions(lo, hi);
    let mut parents: Vec<f64> = Vec::new();
    let (mut finished_est, mut finished_err) = (0.0f64, 0.0f64);
    let mut history = Vec::new();
    let mut outcome = Outcome::new(integrand, d);
    let mut device_s = 0.0;
    for iteration in 0..options.max_iterations {
        let n = bounds.len() / (2 * d);
        let mut est_err = vec![f64::NAN; 2 * n];
        let mut axis = vec![-1i32; n];
        device_s += evaluator.evaluate(&bounds, &mut est_err, &mut axis)?;
        outcome.evaluations += (n * rule.len()) as u64;
        outcome.regions += n as u64;
        outcome.peak_regions = outcome.peak_regions.max(n as u64);
        outcome.iterations = iteration + 1;
        if let Some(bad) = (0..n).find(|&i| {
            !est_err[2 * i].is_finite() || !est_err[2 * i + 1].is_finite() || axis[i] < 0
        }) {
            return Err(format!(
                "Evaluate returned a non-finite estimate or no split axis for region {bad} of {n} in iteration {}",
                iteration + 1
            ));
        }
        let est: Vec<f64> = est_err.par_chunks(2).map(|p| p[0]).collect();
        let raw: Vec<f64> = est_err.par_chunks(2).map(|p| p[1]).collect();
        let err: Vec<f64> = if parents.is_empty() {
            raw
        } else {
            // Two-level refinement: children are [all left halves | all right halves].
            let half = n / 2;
            (0..n)
                .into_par_iter()
                .map(|i| {
                    let sib = if i < half { i + half } else { i - half };
                    let delta = (est[i] + est[sib] - parents[i % half]).abs() / 4.0;
                    let e = raw[i] + raw[sib];
                    let scaled = if e > 0.0 {
                        raw[i] * (1.0 + 2.0 * delta / e)
                    } else {
                        raw[i]
                    };
                    scaled + delta
                })
                .collect()
        };
        let active_est = ordered_sum(&est);
        let active_err = ordered_sum(&err);
        let total_est = finished_est + active_est;
        let total_err = finished_err + active_err;
        history.push(total_est);
        outcome.estimate = total_est;
        outcome.error = total_err;
        if total_err <= options.epsrel * total_est.abs() || total_err <= options.epsabs {
            outcome.status = Status::Converged;
            break;
        }
        // Relative-error classification under the error-budget guard: a region stays active while its error
        // exceeds epsrel of its own estimate (a region with zero estimate and zero error is finished).
        let mut active: Vec<bool> = est
            .par_iter()
            .zip(err.par_iter())
            .map(|(&v, &e)| e > options.epsrel * v.abs())
            .collect();
        if finished_err + finished_sum(&err, &active) > options.epsrel * total_est.abs() {
            active.par_iter_mut().for_each(|a| *a = true);
        }
        // Threshold classification when a full split would not fit in memory, or would fill > 10 % of it
        // once the estimate has settled (research §2.5), or would pass FOCUS_REGIONS once settled.
        let n_active = active.par_iter().filter(|&&a| a).count() as u64;
        let split_bytes = 2 * n_active * region_bytes(d);
        let settled = estimate_settled(&history, options.epsrel);
        if split_bytes > memory
            || (settled && (split_bytes > memory / 10 || 2 * n_active > FOCUS_REGIONS))
        {
            let remaining =
                options.epsrel * total_est.abs() - finished_err - finished_sum(&err, &active);
            match threshold_classify(&err, &active, remaining) {
                Some(flags)
                    if 2 * flags.par_iter().filter(|&&a| a).count() as u64 * region_bytes(d)
                        <= memory =>
                {
                    active = flags
                }
                _ if split_bytes > memory => {
                    outcome.status = Status::MemoryLimit;
                    break;
                }
                _ => {}
            }
        }
        finished_est += finished_sum(&est, &active);
        finished_err += finished_sum(&err, &active);
        let survivors: Vec<usize> = (0..n).into_par_iter().filter(|&i| active[i]).collect();
        if survivors.is_empty() {
            // Everything finished without meeting the global test (only when epsabs or rounding intervene).
            outcome.estimate = finished_est;
            outcome.error = finished_err;
            outcome.status = Status::NoActiveRegions;
            break;
        }
        if iteration + 1 == options.max_iterations {
            outcome.status = Status::IterationLimit;
            break;
        }
        if options
            .time_limit_s
            .is_some_and(|t| start.elapsed().as_secs_f64() > t)
        {
            outcome.status = Status::TimeLimit;
            break;
        }
        // Filter and bisect: left halves first, then right halves.
        let m = survivors.len();
        let mut next = vec![0.0; 2 * m * 2 * d];
        let (left, right) = next.split_at_mut(m * 2 * d);
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
        parents = survivors.iter().map(|&i| est[i]).collect();
        bounds = next;
    }
    outcome.device_s = device_s;
    outcome.total_s = start.elapsed().as_secs_f64();
    Ok(outcome)
}
