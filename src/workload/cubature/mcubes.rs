//! m-Cubes (Sakiotis et al. 2022, ISC 2022): VEGAS importance sampling (Lepage 1978) with 500 bins per
//! axis, stratified into g^d sub-cubes with npg samples each, bin contributions accumulated during the
//! adapting iterations, the grid refined with damping α = 1.5, then frozen. Sampling runs on any backend
//! through [`Sampler`]; the grid update and the estimate run here.
//!
//! Reproducible: every uniform comes from Philox4x32-10 keyed by the seed, with the counter (sub-cube,
//! iteration, sample, axis block), so two runs, and two backends, draw the same points.
//!
//! Honest error bars (our choice, docs/cubature.md): the estimate uses only the frozen-grid iterations,
//! which are independent and identically distributed, averaged with equal weights (inverse-variance
//! weights favour iterations that under-sample a peak); σ is the larger of the within-iteration and
//! between-iteration estimates; convergence also needs χ²/dof consistent with 1.

use super::{Integrand, Outcome, Stop};
use rayon::prelude::*;
use std::time::Instant;

pub const BINS: usize = 500;
/// Grid damping exponent.
pub const ALPHA: f64 = 1.5;

/// Fewest calls per iteration: below this an iteration's variance comes from a handful of points (a run of
/// 2 calls once claimed convergence at 0 for an integral of 1), so it is refused.
pub const MIN_NCALL: u64 = 1000;

#[derive(Debug, Clone)]
pub struct McubesOptions {
    pub epsrel: f64,
    pub epsabs: f64,
    /// Calls per iteration of the first attempt; each failed attempt multiplies it by 10.
    pub ncall: u64,
    /// Largest calls per iteration an escalation may reach.
    pub max_ncall: u64,
    /// Iterations per attempt, of which the first `itmax` adapt the grid.
    pub titer: usize,
    pub itmax: usize,
    /// Frozen iterations needed before convergence may be claimed.
    pub min_frozen: usize,
    pub seed: u64,
    /// Wall-time budget, seconds: the run stops with `TimeLimit` after the iteration that passes it.
    pub time_limit_s: Option<f64>,
}

impl Default for McubesOptions {
    fn default() -> Self {
        McubesOptions {
            epsrel: 1e-3,
            epsabs: 1e-40,
            ncall: 100_000,
            max_ncall: 1_000_000_000,
            titer: 100,
            itmax: 20,
            min_frozen: 5,
            seed: 2026,
            time_limit_s: None,
        }
    }
}

/// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11): the same bijection as `cub_philox` in
/// cl/common/cubature.h.
pub fn philox(mut c: [u32; 4], mut k0: u32, mut k1: u32) -> [u32; 4] {
    for _ in 0..10 {
        let p0 = 0xD251_1F53u64 * c[0] as u64;
        let p1 = 0xCD9E_8D57u64 * c[2] as u64;
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0];
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    c
}

/// The stratification of one attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Intervals per axis, sub-cubes (g^d), samples per sub-cube, calls per iteration.
    pub g: u32,
    pub cubes: u64,
    pub npg: u32,
    pub calls: u64,
    /// Sub-cubes per work-item.
    pub chunk: u64,
}

impl Layout {
    pub fn new(ncall: u64, d: usize) -> Layout {
        let mut g = ((ncall as f64 / 2.0 + 0.25).powf(1.0 / d as f64))
            .floor()
            .max(1.0) as u64;
        // Guard the float root against rounding up past the exact integer root.
        while g > 1 && g.pow(d as u32) > ncall / 2 {
            g -= 1;
        }
        let cubes = g.pow(d as u32);
        let npg = (ncall / cubes).max(2);
        let chunk = match ncall {
            0..1_000_000 => 4,
            1_000_000..=10_000_000 => 32,
            10_000_001..=8_000_000_000 => 2048,
            _ => 4096,
        };
        Layout {
            g: g as u32,
            cubes,
            npg: npg as u32,
            calls: npg * cubes,
            chunk,
        }
    }

    /// Work-items of one iteration.
    pub fn items(&self) -> u64 {
        self.cubes.div_ceil(self.chunk)
    }
}

/// What one iteration needs besides the grid.
#[derive(Debug, Clone, Copy)]
pub struct IterationSpec {
    pub layout: Layout,
    pub iteration: u32,
    pub seed: u64,
    /// Box volume / calls: every sample's weight factor.
    pub scale: f64,
    pub adapt: bool,
}

/// One iteration's sums: Σ cube estimates, Σ cube variance numerators npg·Σf² − (Σf)², the bin
/// contributions (adapting iterations) and the device time.
#[derive(Debug, Clone)]
pub struct IterationSums {
    pub sum: f64,
    pub var: f64,
    pub bins: Vec<f64>,
    pub device_s: f64,
}

/// Runs sampling iterations on some backend.
pub trait Sampler {
    fn sample(&mut self, spec: &IterationSpec, grid: &[f64]) -> Result<IterationSums, String>;
    /// Several frozen-grid iterations on one grid (independent, so a device may run them in one job).
    fn sample_frozen(
        &mut self,
        specs: &[IterationSpec],
        grid: &[f64],
    ) -> Result<Vec<IterationSums>, String> {
        specs.iter().map(|s| self.sample(s, grid)).collect()
    }
}

/// Work-items per work-group, whose fixed-tree partial sums every model reproduces.
const GROUP: usize = 64;

/// The `cpu` model's sampler: the kernel's arithmetic, work-items in parallel, partial sums per group of
/// 64 items in the kernel's tree order, bins from per-thread histograms.
pub struct CpuSampler {
    pub integrand: Integrand,
    pub params: Vec<f64>,
    pub lo: Vec<f64>,
    pub width: Vec<f64>,
}

impl CpuSampler {
    fn item(
        &self,
        spec: &IterationSpec,
        grid: &[f64],
        item: u64,
        bins: Option<&mut [f64]>,
    ) -> (f64, f64) {
        let d = self.lo.len();
        let l = &spec.layout;
        let first = item * l.chunk;
        if first >= l.cubes {
            return (0.0, 0.0);
        }
        let last = (first + l.chunk).min(l.cubes);
        let mut k = vec![0u64; d];
        let mut rest = first;
        for kj in k.iter_mut() {
            *kj = rest % l.g as u64;
            rest /= l.g as u64;
        }
        let per_stratum = BINS as f64 / l.g as f64;
        let (seed_lo, seed_hi) = (spec.seed as u32, (spec.seed >> 32) as u32);
        let mut x = vec![0.0; d];
        let mut bin = vec![0usize; d];
        let (mut sum, mut var) = (0.0, 0.0);
        let mut bins = bins;
        for cube in first..last {
            let (mut fsum, mut f2sum) = (0.0f64, 0.0f64);
            for sample in 0..l.npg {
                let mut jac = spec.scale;
                let mut words = [0u32; 4];
                for j in 0..d {
                    if j % 4 == 0 {
                        words = philox(
                            [
                                cube as u32,
                                (cube >> 32) as u32,
                                spec.iteration,
                                (sample << 2) | (j as u32 >> 2),
                            ],
                            seed_lo,
                            seed_hi,
                        );
                    }
                    let u = (words[j % 4] as f64 + 0.5) * (1.0 / 4_294_967_296.0);
                    let y = (k[j] as f64 + u) * per_stratum;
                    let b = (y as usize).min(BINS - 1);
                    let left = grid[j * (BINS + 1) + b];
                    let w = grid[j * (BINS + 1) + b + 1] - left;
                    x[j] = (y - b as f64)
                        .mul_add(w, left)
                        .mul_add(self.width[j], self.lo[j]);
                    jac *= BINS as f64 * w;
                    bin[j] = b;
                }
                let f = jac * self.integrand.eval(&x, &self.params);
                let f2 = f * f;
                fsum += f;
                f2sum += f2;
                if let Some(bins) = bins.as_deref_mut() {
                    for j in 0..d {
                        bins[j * BINS + bin[j]] += f2;
                    }
                }
            }
            sum += fsum;
            let v = (l.npg as f64).mul_add(f2sum, -(fsum * fsum));
            var += if v > 0.0 { v } else { 0.0 };
            for kj in k.iter_mut() {
                *kj += 1;
                if *kj < l.g as u64 {
                    break;
                }
                *kj = 0;
            }
        }
        (sum, var)
    }
}

/// Fixed-tree sum over one group's lanes, as `cub_group_sum2`.
fn tree_sum(lanes: &mut [(f64, f64); GROUP]) -> (f64, f64) {
    let mut stride = GROUP / 2;
    while stride > 0 {
        for l in 0..stride {
            lanes[l].0 += lanes[l + stride].0;
            lanes[l].1 += lanes[l + stride].1;
        }
        stride /= 2;
    }
    lanes[0]
}

impl Sampler for CpuSampler {
    fn sample(&mut self, spec: &IterationSpec, grid: &[f64]) -> Result<IterationSums, String> {
        let t = Instant::now();
        let d = self.lo.len();
        let groups = spec.layout.items().div_ceil(GROUP as u64);
        let partials: Vec<((f64, f64), Vec<f64>)> = (0..groups)
            .into_par_iter()
            .map(|g| {
                let mut lanes = [(0.0, 0.0); GROUP];
                let mut bins = if spec.adapt {
                    vec![0.0; d * BINS]
                } else {
                    Vec::new()
                };
                for (lane, slot) in lanes.iter_mut().enumerate() {
                    let item = g * GROUP as u64 + lane as u64;
                    *slot = self.item(spec, grid, item, spec.adapt.then_some(&mut bins[..]));
                }
                (tree_sum(&mut lanes), bins)
            })
            .collect();
        let (mut sum, mut var) = (0.0, 0.0);
        let mut bins = vec![0.0; d * BINS];
        for ((s, v), b) in &partials {
            sum += s;
            var += v;
            for (acc, x) in bins.iter_mut().zip(b) {
                *acc += x;
            }
        }
        Ok(IterationSums {
            sum,
            var,
            bins,
            device_s: t.elapsed().as_secs_f64(),
        })
    }
}

/// Refines one axis's edges from its bin contributions as VEGAS does (Lepage 1978): smooth with the
/// 3-point average (2-point at the ends), damp r_b = ((1 − d_b/Σd) / ln(Σd/d_b))^α, then place the new
/// edges so each new bin holds an equal share of Σr, interpolating linearly inside the old bins.
pub fn refine_axis(edges: &mut [f64], contrib: &[f64]) {
    let n = contrib.len();
    let mut smooth = vec![0.0; n];
    for b in 0..n {
        smooth[b] = match b {
            0 => (contrib[0] + contrib[1]) / 2.0,
            _ if b == n - 1 => (contrib[n - 2] + contrib[n - 1]) / 2.0,
            _ => (contrib[b - 1] + contrib[b] + contrib[b + 1]) / 3.0,
        };
    }
    let total: f64 = smooth.iter().sum();
    if total.is_nan() || total <= 0.0 || !total.is_finite() {
        return; // nothing sampled anywhere (or an overflow): keep the grid
    }
    let r: Vec<f64> = smooth
        .iter()
        .map(|&s| {
            if s <= 0.0 {
                0.0
            } else if s >= total {
                1.0
            } else {
                ((1.0 - s / total) / (total / s).ln()).powf(ALPHA)
            }
        })
        .collect();
    let r_total: f64 = r.iter().sum();
    if r_total.is_nan() || r_total <= 0.0 {
        return;
    }
    let share = r_total / n as f64;
    let old = edges.to_vec();
    let mut b = 0usize;
    let mut acc = 0.0; // Σ r over bins before b
    for (k, edge) in edges.iter_mut().enumerate().take(n).skip(1) {
        let target = share * k as f64;
        while b < n - 1 && acc + r[b] < target {
            acc += r[b];
            b += 1;
        }
        let frac = if r[b] > 0.0 {
            ((target - acc) / r[b]).clamp(0.0, 1.0)
        } else {
            0.0
        };
        *edge = old[b] + frac * (old[b + 1] - old[b]);
    }
    edges[0] = 0.0;
    edges[n] = 1.0;
}

/// Rounds a bin contribution to 32 significant bits. Atomic additions land in any order, and each model's
/// math library differs in the last bit, so the raw sums differ near 1e-16 between runs and backends; the
/// grid is built from the rounded values, so runs and backends build the same grid (unless a sum sits
/// within 1e-16 of a rounding boundary) and a discontinuous integrand sees the same samples.
pub fn quantize(x: f64) -> f64 {
    const DROP: u32 = 52 - 31;
    let bits = x.to_bits();
    let half = 1u64 << (DROP - 1);
    f64::from_bits((bits + half) & !((1u64 << DROP) - 1))
}

/// A uniform grid of `d` axes.
pub fn uniform_grid(d: usize) -> Vec<f64> {
    (0..d)
        .flat_map(|_| (0..=BINS).map(|b| b as f64 / BINS as f64))
        .collect()
}

/// Running estimate over the frozen iterations.
#[derive(Debug, Default, Clone)]
struct Frozen {
    values: Vec<f64>,
    variances: Vec<f64>,
}

impl Frozen {
    /// (mean, σ, χ²/dof): equal weights; σ the larger of the within- and between-iteration estimates.
    fn estimate(&self) -> (f64, f64, f64) {
        let n = self.values.len() as f64;
        let mean = self.values.iter().sum::<f64>() / n;
        let within = (self.variances.iter().sum::<f64>()).sqrt() / n;
        let scatter =
            self.values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        let between = (scatter / n).sqrt();
        let chi2: f64 = self
            .values
            .iter()
            .zip(&self.variances)
            .map(|(v, s2)| (v - mean).powi(2) / s2)
            .sum();
        (mean, within.max(between), chi2 / (n - 1.0).max(1.0))
    }
}

fn check_finite(sums: &IterationSums, iteration: usize) -> Result<(), String> {
    if sums.sum.is_finite() && sums.var.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "sampling returned a non-finite sum in iteration {iteration}"
        ))
    }
}

/// Whether χ²/dof is within three standard deviations of its expectation 1 (dof = n − 1).
fn consistent(chi2_dof: f64, n: usize) -> bool {
    let dof = (n.max(2) - 1) as f64;
    chi2_dof <= 1.0 + 3.0 * (2.0 / dof).sqrt()
}

/// Integrates `integrand` over [lo, hi] with m-Cubes, sampling through `sampler`.
pub fn integrate(
    integrand: Integrand,
    lo: &[f64],
    hi: &[f64],
    options: &McubesOptions,
    sampler: &mut dyn Sampler,
) -> Result<Outcome, String> {
    let d = lo.len();
    if options.ncall < MIN_NCALL || options.max_ncall < options.ncall {
        return Err(format!(
            "m-Cubes needs at least {MIN_NCALL} calls per iteration, and a cap at least that: ncall {}, \
             max_ncall {}",
            options.ncall, options.max_ncall
        ));
    }
    let start = Instant::now();
    let over_time = || {
        options
            .time_limit_s
            .is_some_and(|t| start.elapsed().as_secs_f64() > t)
    };
    let volume: f64 = lo.iter().zip(hi).map(|(a, b)| b - a).product();
    let mut outcome = Outcome::new(integrand, d);
    let mut ncall = options.ncall;
    let mut device_s = 0.0;
    'attempts: loop {
        let attempt_start = Instant::now();
        let layout = Layout::new(ncall, d);
        let mut grid = uniform_grid(d);
        let mut frozen = Frozen::default();
        let mut inconsistent = false;
        let mut it = 0;
        while it < options.titer {
            let spec = |i: usize| IterationSpec {
                layout,
                iteration: (i + outcome.iterations) as u32,
                seed: options.seed,
                scale: volume / layout.calls as f64,
                adapt: i < options.itmax,
            };
            if over_time() {
                outcome.iterations += it;
                outcome.stop = Stop::TimeLimit;
                break 'attempts;
            }
            if it < options.itmax {
                let sums = sampler.sample(&spec(it), &grid)?;
                device_s += sums.device_s;
                outcome.evaluations += layout.calls;
                check_finite(&sums, outcome.iterations + it + 1)?;
                let bins: Vec<f64> = sums.bins.iter().map(|&b| quantize(b)).collect();
                for j in 0..d {
                    refine_axis(
                        &mut grid[j * (BINS + 1)..(j + 1) * (BINS + 1)],
                        &bins[j * BINS..(j + 1) * BINS],
                    );
                }
                it += 1;
                continue;
            }
            // Frozen iterations in growing batches (5, 5, 10, 20, ...): the answer is the one a
            // one-at-a-time loop gives, since each iteration is checked in order; the rest of a batch is
            // counted in the evaluations but not used.
            let mut batch = frozen
                .values
                .len()
                .max(options.min_frozen)
                .min(options.titer - it);
            // Within the wall-time budget: no more iterations than the time left allows at the pace so far
            // (this attempt's iterations cost about the same each).
            if let Some(limit) = options.time_limit_s {
                let pace = attempt_start.elapsed().as_secs_f64() / it.max(1) as f64;
                let left = (limit - start.elapsed().as_secs_f64()) / pace.max(1e-9);
                batch = batch.min(left.floor().max(1.0) as usize);
            }
            let specs: Vec<IterationSpec> = (it..it + batch).map(spec).collect();
            let results = sampler.sample_frozen(&specs, &grid)?;
            outcome.evaluations += layout.calls * batch as u64;
            for (k, sums) in results.iter().enumerate() {
                device_s += sums.device_s;
                check_finite(sums, outcome.iterations + it + k + 1)?;
                let var =
                    (sums.var / (layout.npg as f64 - 1.0)).max((f64::EPSILON * sums.sum).powi(2));
                frozen.values.push(sums.sum);
                frozen.variances.push(var.max(f64::MIN_POSITIVE));
                let (mean, sigma, chi2_dof) = frozen.estimate();
                outcome.estimate = mean;
                outcome.error = sigma;
                outcome.chi2_dof = Some(chi2_dof);
                outcome.calls_per_iteration = Some(layout.calls);
                // Iterations that all summed to exactly 0 saw nothing of the integrand: no claim from them.
                let informative = frozen.values.iter().any(|&v| v != 0.0);
                if frozen.values.len() >= options.min_frozen
                    && informative
                    && (sigma <= options.epsrel * mean.abs() || sigma <= options.epsabs)
                {
                    if consistent(chi2_dof, frozen.values.len()) {
                        outcome.iterations += it + k + 1;
                        outcome.stop = Stop::Converged;
                        break 'attempts;
                    }
                    inconsistent = true;
                }
            }
            it += batch;
            if over_time() {
                outcome.iterations += it;
                outcome.stop = Stop::TimeLimit;
                break 'attempts;
            }
        }
        outcome.iterations += options.titer;
        let next = ncall.saturating_mul(10);
        if next > options.max_ncall {
            outcome.stop = if inconsistent {
                Stop::Inconsistent
            } else {
                Stop::IterationLimit
            };
            break;
        }
        ncall = next;
    }
    outcome.device_s = device_s;
    outcome.total_s = start.elapsed().as_secs_f64();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_random123_known_answers() {
        assert_eq!(
            philox([0; 4], 0, 0),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox([u32::MAX; 4], u32::MAX, u32::MAX),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                0xa4093822,
                0x299f31d0
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn layout_follows_the_m_cubes_rules() {
        let l = Layout::new(100_000, 8);
        assert_eq!(
            (l.g, l.cubes, l.npg, l.calls, l.chunk),
            (3, 6561, 15, 98_415, 4)
        );
        let l = Layout::new(100_000, 6);
        assert_eq!((l.g, l.cubes, l.npg, l.calls), (6, 46_656, 2, 93_312));
    }

    #[test]
    fn refinement_moves_edges_toward_the_contributions_and_keeps_them_ordered() {
        let mut edges: Vec<f64> = (0..=BINS).map(|b| b as f64 / BINS as f64).collect();
        // All weight in the middle fifth.
        let contrib: Vec<f64> = (0..BINS)
            .map(|b| if (200..300).contains(&b) { 1.0 } else { 1e-6 })
            .collect();
        refine_axis(&mut edges, &contrib);
        assert_eq!((edges[0], edges[BINS]), (0.0, 1.0));
        assert!(edges.windows(2).all(|w| w[0] <= w[1]));
        let inside = edges.iter().filter(|&&e| (0.4..0.6).contains(&e)).count();
        assert!(inside > 150, "{inside} of 501 edges moved into [0.4, 0.6]");
    }
}
