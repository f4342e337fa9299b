//! Mock multiple-image systems drawn from a lens model itself, with exact image positions (Newton on the
//! lens equation in float64), so the χ² of the true model is at the pixel level: the χ² workload's default
//! input when no observed systems are given.

use super::chi2::{
    beta_at, delens_grid, merge_points, system_scale, triangle_centroid, MERGE_PIXELS,
};
use super::io::{ImageSystem, ObservedImage};
use super::mixed::CLUSTER_B_ARCSEC;
use super::LensProblem;
use crate::workload::Workload;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// Grid spacing of the mock generator's candidate search (arcsec), independent of the problem's pixel.
pub const MOCK_COARSE_ARCSEC: f64 = 0.25;
/// Mock acceptance: |det A| of every image at least this (not too close to a critical curve).
pub const MOCK_MIN_DET: f64 = 0.02;
/// Mock acceptance: images at least max(this, 3 pixels) apart.
pub const MOCK_MIN_SEPARATION_ARCSEC: f64 = 1.0;
/// Mock: Newton stops when |β(θ) − β_s| is below this (arcsec).
pub const NEWTON_TOL_ARCSEC: f64 = 1e-9;
/// Mock: central-difference step of the Jacobian (arcsec).
pub const JACOBIAN_STEP_ARCSEC: f64 = 1e-6;
/// Mock: refined images closer than this are the same image (arcsec).
pub const MOCK_DEDUP_ARCSEC: f64 = 0.05;
/// Mock: sources are drawn by picking an image-plane point within min(this, 2·s·b) of a cluster halo.
pub const MOCK_DRAW_RADIUS_ARCSEC: f64 = 40.0;
/// Mock: candidate sources drawn before giving up.
pub const MOCK_MAX_ATTEMPTS: usize = 20_000;
/// Mock: candidate sources delensed together in one pass over the coarse grid.
const MOCK_BATCH: usize = 16;
const NEWTON_MAX_ITER: usize = 60;
/// Largest Newton step (arcsec): keeps a start near a singular halo centre from jumping across the field.
const NEWTON_MAX_STEP: f64 = 2.0;

/// Options of the mock generator.
#[derive(Debug, Clone)]
pub struct MockOptions {
    pub n_systems: usize,
    /// Redshifts given to the candidate sources in turn (attempt k gets z_sources[k mod len]).
    pub z_sources: Vec<f64>,
    pub seed: u64,
    pub sigma_arcsec: f64,
}

impl Default for MockOptions {
    fn default() -> Self {
        MockOptions {
            n_systems: 24,
            z_sources: vec![1.5, 2.0, 3.0, 4.5],
            seed: 20_260,
            sigma_arcsec: 0.5,
        }
    }
}

/// A = ∂β/∂θ = I − s·∂α/∂θ by central differences of [`gradient_at`] (step [`JACOBIAN_STEP_ARCSEC`]).
pub(super) fn jacobian(problem: &LensProblem, s: f64, x: f64, y: f64) -> [[f64; 2]; 2] {
    let e = JACOBIAN_STEP_ARCSEC;
    let (xp, yp) = beta_at(problem, s, x + e, y);
    let (xm, ym) = beta_at(problem, s, x - e, y);
    let (xq, yq) = beta_at(problem, s, x, y + e);
    let (xr, yr) = beta_at(problem, s, x, y - e);
    [
        [(xp - xm) / (2.0 * e), (xq - xr) / (2.0 * e)],
        [(yp - ym) / (2.0 * e), (yq - yr) / (2.0 * e)],
    ]
}

pub(super) fn det(a: &[[f64; 2]; 2]) -> f64 {
    a[0][0] * a[1][1] - a[0][1] * a[1][0]
}

/// Newton on β(θ) = β_s from `start`, until |β(θ) − β_s| < [`NEWTON_TOL_ARCSEC`]; None when it does not
/// converge (steps capped at NEWTON_MAX_STEP″).
pub(super) fn newton_image(
    problem: &LensProblem,
    s: f64,
    source: (f64, f64),
    start: (f64, f64),
) -> Option<(f64, f64)> {
    let (mut x, mut y) = start;
    for _ in 0..NEWTON_MAX_ITER {
        let (bx, by) = beta_at(problem, s, x, y);
        let (rx, ry) = (bx - source.0, by - source.1);
        if !(rx.is_finite() && ry.is_finite()) {
            return None;
        }
        if (rx * rx + ry * ry).sqrt() < NEWTON_TOL_ARCSEC {
            return Some((x, y));
        }
        let a = jacobian(problem, s, x, y);
        let d = det(&a);
        if d == 0.0 || !d.is_finite() {
            return None;
        }
        let mut sx = (a[1][1] * rx - a[0][1] * ry) / d;
        let mut sy = (a[0][0] * ry - a[1][0] * rx) / d;
        let len = (sx * sx + sy * sy).sqrt();
        if len > NEWTON_MAX_STEP {
            sx *= NEWTON_MAX_STEP / len;
            sy *= NEWTON_MAX_STEP / len;
        }
        x -= sx;
        y -= sy;
    }
    None
}

/// The coarse α grid of the mock generator: the problem's model on a grid of spacing MOCK_COARSE_ARCSEC
/// covering the problem's field plus a margin (so images just outside are found and rejected).
struct CoarseGrid {
    n: usize,
    first: f64,
    h: f64,
    gx: Vec<f64>,
    gy: Vec<f64>,
}

/// The float64 deflection on the search grid, or why the field is too wide for one.
fn coarse_grid(problem: &LensProblem) -> Result<CoarseGrid, String> {
    let half = problem.coord(problem.n - 1).abs() + 1.0;
    let h = MOCK_COARSE_ARCSEC;
    let n = (2.0 * half / h).ceil() as usize + 1;
    let coarse = LensProblem::new(
        "mock-coarse",
        n,
        h,
        problem.cosmology,
        problem.halos.clone(),
    )
    .map_err(|e| {
        format!(
            "mock image systems: the {MOCK_COARSE_ARCSEC}″ search grid over this {:.0}″ field: {e}",
            2.0 * half
        )
    })?;
    let mut field = coarse.reference();
    let gy = field.components.pop().unwrap_or_default();
    let gx = field.components.pop().unwrap_or_default();
    Ok(CoarseGrid {
        n,
        first: coarse.coord(0),
        h,
        gx,
        gy,
    })
}

/// One candidate source: its redshift, scale, source-plane position and the image-plane point drawn.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    z: f64,
    s: f64,
    beta: (f64, f64),
    theta0: (f64, f64),
}

/// All images of one candidate if it passes the acceptance criteria (see [`mock_systems`]).
fn evaluate_candidate(
    problem: &LensProblem,
    grid: &CoarseGrid,
    cand: &Candidate,
    coarse_starts: &[(f64, f64)],
) -> Option<Vec<(f64, f64)>> {
    let halos = &problem.halos;
    let near_centre = |p: (f64, f64), r: f64| {
        (0..halos.len()).any(|k| {
            let (dx, dy) = (p.0 - halos.x0[k], p.1 - halos.y0[k]);
            dx * dx + dy * dy < r * r
        })
    };
    let mut images: Vec<(f64, f64)> = Vec::new();
    // The drawn point is an image by construction; then the coarse-grid candidates.
    for &start in std::iter::once(&cand.theta0).chain(coarse_starts) {
        match newton_image(problem, cand.s, cand.beta, start) {
            Some(t) => {
                let dup = images.iter().any(|q| {
                    let (dx, dy) = (q.0 - t.0, q.1 - t.1);
                    dx * dx + dy * dy < MOCK_DEDUP_ARCSEC * MOCK_DEDUP_ARCSEC
                });
                if !dup {
                    images.push(t);
                }
            }
            // A singular halo centre makes its cell's triangles huge in the source plane: a spurious
            // hit there has no image. Elsewhere a failed refinement means an image may be lost: reject.
            None if near_centre(start, 2.0 * grid.h) => {}
            None => return None,
        }
        if images.len() > 5 {
            return None;
        }
    }
    if !(2..=5).contains(&images.len()) {
        return None;
    }
    let limit = problem.coord(problem.n - 1).abs() - 2.0 * problem.pixel;
    let min_sep = MOCK_MIN_SEPARATION_ARCSEC.max(3.0 * problem.pixel);
    for (u, &p) in images.iter().enumerate() {
        if p.0.abs() > limit || p.1.abs() > limit {
            return None;
        }
        for q in &images[u + 1..] {
            let (dx, dy) = (q.0 - p.0, q.1 - p.1);
            if dx * dx + dy * dy < min_sep * min_sep {
                return None;
            }
        }
        if det(&jacobian(problem, cand.s, p.0, p.1)).abs() < MOCK_MIN_DET {
            return None;
        }
        // Not on top of a halo centre (the deflection is singular there): 3 pixels from every centre,
        // and 2 Einstein radii from a galaxy's.
        for k in 0..halos.len() {
            let mut r = 3.0 * problem.pixel;
            if halos.b[k] < CLUSTER_B_ARCSEC {
                r = r.max(2.0 * halos.b[k]);
            }
            let (dx, dy) = (p.0 - halos.x0[k], p.1 - halos.y0[k]);
            if dx * dx + dy * dy < r * r {
                return None;
            }
        }
    }
    Some(images)
}

/// Mock systems and their true sources [βx, βy, s].
pub(super) fn mock_with_sources(
    problem: &LensProblem,
    opts: &MockOptions,
) -> Result<(Vec<ImageSystem>, Vec<[f64; 3]>), String> {
    let (mut systems, mut sources) = (Vec::new(), Vec::new());
    if opts.n_systems == 0 || opts.z_sources.is_empty() || problem.halos.is_empty() || problem.n < 2
    {
        return Ok((systems, sources));
    }
    let halos = &problem.halos;
    let b_max = halos.b.iter().cloned().fold(0.0, f64::max);
    let clusters: Vec<usize> = (0..halos.len())
        .filter(|&k| halos.b[k] >= CLUSTER_B_ARCSEC.min(b_max))
        .collect();
    let scales: Vec<f64> = opts
        .z_sources
        .iter()
        .map(|&z| system_scale(problem, z))
        .collect();
    let grid = coarse_grid(problem)?;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(opts.seed);
    let mut attempt = 0;
    while attempt < MOCK_MAX_ATTEMPTS && systems.len() < opts.n_systems {
        let batch: Vec<Candidate> = (attempt..(attempt + MOCK_BATCH).min(MOCK_MAX_ATTEMPTS))
            .map(|a| {
                let zi = a % opts.z_sources.len();
                let s = scales[zi];
                let k = clusters[rng.random_range(0..clusters.len())];
                let radius = (2.0 * s * halos.b[k]).min(MOCK_DRAW_RADIUS_ARCSEC);
                let r = radius * rng.random::<f64>().sqrt();
                let phi = std::f64::consts::TAU * rng.random::<f64>();
                let theta0 = (halos.x0[k] + r * phi.cos(), halos.y0[k] + r * phi.sin());
                Candidate {
                    z: opts.z_sources[zi],
                    s,
                    beta: beta_at(problem, s, theta0.0, theta0.1),
                    theta0,
                }
            })
            .collect();
        attempt += batch.len();
        let srcs: Vec<[f64; 3]> = batch.iter().map(|c| [c.beta.0, c.beta.1, c.s]).collect();
        let hits = delens_grid(grid.n, grid.first, grid.h, &grid.gx, &grid.gy, &srcs);
        let mut starts: Vec<Vec<(f64, f64)>> = vec![Vec::new(); batch.len()];
        for hit in &hits {
            let x0 = grid.first + hit.i as f64 * grid.h;
            let y0 = grid.first + hit.j as f64 * grid.h;
            starts[hit.system as usize].push(triangle_centroid(x0, y0, grid.h, hit.triangle));
        }
        let results: Vec<Option<Vec<(f64, f64)>>> = batch
            .par_iter()
            .zip(starts.par_iter())
            .map(|(c, st)| {
                evaluate_candidate(problem, &grid, c, &merge_points(st, MERGE_PIXELS * grid.h))
            })
            .collect();
        for (c, res) in batch.iter().zip(results) {
            if systems.len() >= opts.n_systems {
                break;
            }
            if let Some(images) = res {
                systems.push(ImageSystem {
                    id: format!("S{:02}", systems.len() + 1),
                    z_source: c.z,
                    images: images
                        .into_iter()
                        .map(|(x, y)| ObservedImage {
                            x,
                            y,
                            sigma: opts.sigma_arcsec,
                        })
                        .collect(),
                });
                sources.push([c.beta.0, c.beta.1, c.s]);
            }
        }
    }
    Ok((systems, sources))
}

/// Mock multiple-image systems from the problem's own (true) model, deterministic for given options.
///
/// Each candidate source is drawn by picking an image-plane point θ₀ uniformly within
/// min(40″, 2·s·b) of a cluster halo (b ≥ CLUSTER_B_ARCSEC; the strongest halos when there is none) and
/// mapping it to the source plane with the system's s, so it has at least one image. Its images are found
/// by triangle delensing on a coarse float64 grid (spacing MOCK_COARSE_ARCSEC over the field plus 1″,
/// computed once for all candidates and scaled by s), each candidate then refined by Newton on the lens
/// equation ([`gradient_at`], central-difference Jacobian) to |β(θ) − β_s| < 1e-9″ and deduplicated
/// within 0.05″. A system is accepted when it has 2–5 images, all inside |x|, |y| ≤ coord(n−1) − 2·pixel,
/// pairwise ≥ max(1″, 3 pixels) apart, with |det A| ≥ 0.02, and each ≥ 3 pixels from every halo centre
/// (and ≥ 2 b from a galaxy's). Up to MOCK_MAX_ATTEMPTS candidates are drawn; fewer systems than asked
/// are returned when they run out. Ids are "S01", "S02", …; positions are the exact (Newton) ones with
/// σ = sigma_arcsec.
pub fn mock_systems(problem: &LensProblem, opts: &MockOptions) -> Result<Vec<ImageSystem>, String> {
    mock_with_sources(problem, opts).map(|m| m.0)
}
