//! Image-plane χ² by triangle delensing (as LENSTOOL and Lenstool-HPC's `delense_CPU.cpp` do it).
//!
//! 1. Every multiple-image system's observed images are sent to the source plane with the system's own
//!    distance ratio, β = θ − s·α(θ), and averaged: the source barycentre ([`source_barycentres`]).
//! 2. Every grid cell is split into two triangles whose vertices are mapped to the source plane with the
//!    grid gradient; a triangle containing a system's source is a hit ([`delens_cpu`], the float64
//!    reference of `lens_delens_item` in cl/common/lens_model.h, with the same conventions).
//! 3. A hit's predicted image is the image-plane barycentre of its triangle ([`hit_position`]); hits closer
//!    than 1.5 pixels are one image (a source on a shared edge or vertex hits several triangles)
//!    ([`predicted_images`]).
//! 4. Observed and predicted images are matched closest-first and χ² = Σ |Δ|²/σ² ([`chi2`]).
//!
//! [`Chi2Problem`] runs it on every backend through the driver; `super::mock` draws image systems from the
//! model itself.
//!
//! Conventions: positions in arcsec; grid pixel (i, j) at (coord(i), coord(j)), gradient grids row-major
//! with i (x) fastest; the halos' b holds the problem's D_LS/D_S (reference source redshift), and a system
//! at redshift z uses β = θ − s·α with s = (D_LS/D_S)(z) / problem.dls_ds ([`system_scale`]).

use super::io::{ImageSystem, ObservedImage};
use super::{gradient_at, Cosmology, LensMode, LensProblem, MAX_HITS_PER_BAND};
use crate::backend::{HostVec, Target};
use crate::exec::{run_plan, time_host, DeviceBudget, Measured, RunError, RunOptions};
use crate::workload::{Accuracy, Verdict, Work, Workload};
use rayon::prelude::*;
use serde::Serialize;

/// Penalty of an observed image with no predicted image left, as a distance: it adds
/// (MISSING_PENALTY_ARCSEC)² / σ² to χ², i.e. (10″)²/σ² = 400 at σ = 0.5″. LENSTOOL-like: a model that
/// loses an image is heavily penalised, far above any matched image of a reasonable model.
pub const MISSING_PENALTY_ARCSEC: f64 = 10.0;
/// Hits of one system closer than this many pixels are one predicted image.
pub const MERGE_PIXELS: f64 = 1.5;

/// s = (D_LS/D_S at `z_source`) / problem.dls_ds, the factor on the problem's gradient for a source at
/// `z_source`; 0 for a source in front of (or at) the lens.
pub fn system_scale(problem: &LensProblem, z_source: f64) -> f64 {
    let c = Cosmology {
        z_source,
        ..problem.cosmology
    };
    if z_source.partial_cmp(&c.z_lens) != Some(std::cmp::Ordering::Greater) {
        return 0.0;
    }
    c.dls_over_ds() / problem.dls_ds
}

/// β = θ − s·α(θ) in float64 with [`gradient_at`].
pub(super) fn beta_at(problem: &LensProblem, s: f64, x: f64, y: f64) -> (f64, f64) {
    let (ax, ay) = gradient_at(&problem.halos, x, y);
    (x - s * ax, y - s * ay)
}

/// Per system [β̄x, β̄y, s]: the mean source-plane position of its observed images (float64,
/// [`gradient_at`]) and its scale s. A system without images gets NaN coordinates (it never hits).
pub fn source_barycentres(problem: &LensProblem, systems: &[ImageSystem]) -> Vec<[f64; 3]> {
    systems
        .iter()
        .map(|sys| {
            let s = system_scale(problem, sys.z_source);
            let (mut bx, mut by) = (0.0, 0.0);
            for im in &sys.images {
                let (x, y) = beta_at(problem, s, im.x, im.y);
                bx += x;
                by += y;
            }
            let m = sys.images.len() as f64;
            [bx / m, by / m, s]
        })
        .collect()
}

/// One triangle of the grid whose source-plane image contains a system's source. `i` is the cell's x
/// index, `j` its y index (row); `triangle` 0 is (a, b, c), 1 is (d, c, b), with a = (i, j), b = (i, j+1),
/// c = (i+1, j), d = (i+1, j+1). The same four integers as the device kernel's hit records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub system: u32,
    pub i: u32,
    pub j: u32,
    pub triangle: u8,
}

/// Triangle delensing of a square grid of side `n` whose pixel (i, j) is at (first + i·h, first + j·h):
/// the arithmetic of `lens_delens_item` in float64, rows in parallel, hits sorted.
pub(super) fn delens_grid(
    n: usize,
    first: f64,
    h: f64,
    gx: &[f64],
    gy: &[f64],
    sources: &[[f64; 3]],
) -> Vec<Hit> {
    assert_eq!(gx.len(), n * n, "gx must hold the n×n grid");
    assert_eq!(gy.len(), n * n, "gy must hold the n×n grid");
    if n < 2 || sources.is_empty() {
        return Vec::new();
    }
    let mut hits: Vec<Hit> = (0..n - 1)
        .into_par_iter()
        .flat_map_iter(|r| {
            let mut out = Vec::new();
            let y0 = first + r as f64 * h;
            for i in 0..n - 1 {
                let p00 = r * n + i;
                let p01 = p00 + n;
                let x0 = first + i as f64 * h;
                // Vertices: a = (i, r), b = (i, r+1), c = (i+1, r), d = (i+1, r+1).
                let (ax, ay, bx, by) = (gx[p00], gy[p00], gx[p01], gy[p01]);
                let (cx, cy, dx, dy) = (gx[p00 + 1], gy[p00 + 1], gx[p01 + 1], gy[p01 + 1]);
                for (s, src) in sources.iter().enumerate() {
                    let (sx, sy, k) = (src[0], src[1], src[2]);
                    // Source-plane vertices relative to the source: β − β_s.
                    let (a_x, a_y) = (x0 - k * ax - sx, y0 - k * ay - sy);
                    let (b_x, b_y) = (x0 - k * bx - sx, y0 + h - k * by - sy);
                    let (c_x, c_y) = (x0 + h - k * cx - sx, y0 - k * cy - sy);
                    let (d_x, d_y) = (x0 + h - k * dx - sx, y0 + h - k * dy - sy);
                    // Twice the signed areas of (P, V1, V2) with P at the origin: V1 × V2.
                    let ab = a_x * b_y - a_y * b_x;
                    let bc = b_x * c_y - b_y * c_x;
                    let ca = c_x * a_y - c_y * a_x;
                    let dc = d_x * c_y - d_y * c_x;
                    let cb = -bc;
                    let bd = b_x * d_y - b_y * d_x;
                    // Inside iff the three sub-areas share the sign of their sum (the orientation).
                    let o1 = ab + bc + ca;
                    if ab * o1 >= 0.0 && bc * o1 >= 0.0 && ca * o1 >= 0.0 && o1 != 0.0 {
                        out.push(Hit {
                            system: s as u32,
                            i: i as u32,
                            j: r as u32,
                            triangle: 0,
                        });
                    }
                    let o2 = dc + cb + bd;
                    if dc * o2 >= 0.0 && cb * o2 >= 0.0 && bd * o2 >= 0.0 && o2 != 0.0 {
                        out.push(Hit {
                            system: s as u32,
                            i: i as u32,
                            j: r as u32,
                            triangle: 1,
                        });
                    }
                }
            }
            out
        })
        .collect();
    hits.sort_unstable();
    hits
}

/// Float64 reference of the device delensing kernel (`lens_delens_item`, cl/common/lens_model.h): every
/// cell (i, j), i, j < n−1, of the problem's grid, both triangles, every source [βx, βy, s] (as from
/// [`source_barycentres`]). `gx`, `gy`: the full n×n gradient grid, row-major, i fastest (panics
/// otherwise). Vertex
/// coordinates are formed as the kernel does, x = coord(0) + i·pixel (the host passes x_first = y_first =
/// coord(0)). Returns the hits sorted (system, i, j, triangle).
pub fn delens_cpu(problem: &LensProblem, gx: &[f64], gy: &[f64], sources: &[[f64; 3]]) -> Vec<Hit> {
    delens_grid(problem.n, problem.coord(0), problem.pixel, gx, gy, sources)
}

pub(super) fn triangle_centroid(x0: f64, y0: f64, h: f64, triangle: u8) -> (f64, f64) {
    if triangle == 0 {
        // (a, b, c) = (x0, y0), (x0, y0+h), (x0+h, y0).
        (x0 + h / 3.0, y0 + h / 3.0)
    } else {
        // (d, c, b) = (x0+h, y0+h), (x0+h, y0), (x0, y0+h).
        (x0 + 2.0 * h / 3.0, y0 + 2.0 * h / 3.0)
    }
}

/// Image-plane barycentre of the hit triangle in arcsec (Lenstool-HPC's predicted position).
pub fn hit_position(problem: &LensProblem, hit: &Hit) -> (f64, f64) {
    triangle_centroid(
        problem.coord(hit.i as usize),
        problem.coord(hit.j as usize),
        problem.pixel,
        hit.triangle,
    )
}

/// Single-linkage clusters of points closer than `radius`, each replaced by its mean; clusters ordered by
/// their first point (deterministic for a given input order).
pub(super) fn merge_points(points: &[(f64, f64)], radius: f64) -> Vec<(f64, f64)> {
    let m = points.len();
    let mut parent: Vec<usize> = (0..m).collect();
    fn find(parent: &mut [usize], mut a: usize) -> usize {
        while parent[a] != a {
            parent[a] = parent[parent[a]];
            a = parent[a];
        }
        a
    }
    // Sweep in x order; only pairs within `radius` in x can be linked.
    let mut by_x: Vec<usize> = (0..m).collect();
    by_x.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0).then(a.cmp(&b)));
    let r2 = radius * radius;
    for (u, &a) in by_x.iter().enumerate() {
        for &b in &by_x[u + 1..] {
            let dx = points[b].0 - points[a].0;
            if dx >= radius {
                break;
            }
            let dy = points[b].1 - points[a].1;
            if dx * dx + dy * dy < r2 {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                if ra != rb {
                    let (lo, hi) = (ra.min(rb), ra.max(rb));
                    parent[hi] = lo; // the root is the cluster's first point
                }
            }
        }
    }
    let mut sums: Vec<(f64, f64, usize)> = vec![(0.0, 0.0, 0); m];
    let mut roots = Vec::new();
    for (a, &(x, y)) in points.iter().enumerate() {
        let r = find(&mut parent, a);
        if sums[r].2 == 0 {
            roots.push(r);
        }
        sums[r].0 += x;
        sums[r].1 += y;
        sums[r].2 += 1;
    }
    roots
        .into_iter()
        .map(|r| (sums[r].0 / sums[r].2 as f64, sums[r].1 / sums[r].2 as f64))
        .collect()
}

/// Predicted images per system: hit positions ([`hit_position`]) merged by single linkage when closer
/// than [`MERGE_PIXELS`] pixels, each cluster replaced by its mean; clusters in order of their first hit
/// (hits as sorted by [`delens_cpu`]). Hits of systems ≥ `n_systems` are ignored.
pub fn predicted_images(
    problem: &LensProblem,
    hits: &[Hit],
    n_systems: usize,
) -> Vec<Vec<(f64, f64)>> {
    let mut per: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n_systems];
    for hit in hits {
        if let Some(v) = per.get_mut(hit.system as usize) {
            v.push(hit_position(problem, hit));
        }
    }
    per.iter()
        .map(|pts| merge_points(pts, MERGE_PIXELS * problem.pixel))
        .collect()
}

/// Image-plane χ² of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Chi2 {
    /// Σ over observed images of |Δ|²/σ², missing images counted at (MISSING_PENALTY_ARCSEC)²/σ².
    pub chi2: f64,
    /// Observed images in all (matched + missing).
    pub n_images: usize,
    /// Observed images with no predicted image left.
    pub n_missing: usize,
    /// Predicted images matched to no observed image (not penalised).
    pub n_extra: usize,
    /// χ² of each system, in the order of the systems.
    pub per_system: Vec<f64>,
}

/// For each observed image, the index of its predicted image (or None when none is left): pairs taken
/// closest first, so an observed image whose closest predicted image went to a closer observed image takes
/// its next closest. Ties break by observed then predicted index.
pub fn match_images(observed: &[ObservedImage], predicted: &[(f64, f64)]) -> Vec<Option<usize>> {
    let mut pairs: Vec<(f64, usize, usize)> = Vec::with_capacity(observed.len() * predicted.len());
    for (o, im) in observed.iter().enumerate() {
        for (p, &(x, y)) in predicted.iter().enumerate() {
            let (dx, dy) = (x - im.x, y - im.y);
            pairs.push((dx * dx + dy * dy, o, p));
        }
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut matched = vec![None; observed.len()];
    let mut taken = vec![false; predicted.len()];
    for (_, o, p) in pairs {
        if matched[o].is_none() && !taken[p] {
            matched[o] = Some(p);
            taken[p] = true;
        }
    }
    matched
}

/// Image-plane χ²: observed images matched to their system's predicted images by [`match_images`],
/// χ² += |Δ|²/σ². An observed image with no predicted image left is missing and adds
/// (MISSING_PENALTY_ARCSEC)²/σ² (LENSTOOL-like: losing an image is heavily penalised). Predicted images left
/// over are counted in `n_extra` and not penalised, as LENSTOOL's image-plane χ² without its extra-image
/// term. `predicted[k]` belongs to `systems[k]`; a system with no entry has no predicted images.
pub fn chi2(systems: &[ImageSystem], predicted: &[Vec<(f64, f64)>]) -> Chi2 {
    let mut out = Chi2 {
        chi2: 0.0,
        n_images: 0,
        n_missing: 0,
        n_extra: 0,
        per_system: Vec::with_capacity(systems.len()),
    };
    for (k, sys) in systems.iter().enumerate() {
        let pred: &[(f64, f64)] = predicted.get(k).map(|v| v.as_slice()).unwrap_or(&[]);
        let matched = match_images(&sys.images, pred);
        let mut c = 0.0;
        let mut n_matched = 0;
        for (im, m) in sys.images.iter().zip(&matched) {
            let s2 = im.sigma * im.sigma;
            match m {
                Some(p) => {
                    let (dx, dy) = (pred[*p].0 - im.x, pred[*p].1 - im.y);
                    c += (dx * dx + dy * dy) / s2;
                    n_matched += 1;
                }
                None => {
                    c += MISSING_PENALTY_ARCSEC * MISSING_PENALTY_ARCSEC / s2;
                    out.n_missing += 1;
                }
            }
        }
        out.n_images += sys.images.len();
        out.n_extra += pred.len() - n_matched;
        out.chi2 += c;
        out.per_system.push(c);
    }
    out
}

/// The whole χ² of a model from its gradient grid: barycentres, [`delens_cpu`], [`predicted_images`],
/// [`chi2`]. Returns the predicted images too.
pub fn chi2_of_grid(
    problem: &LensProblem,
    gx: &[f64],
    gy: &[f64],
    systems: &[ImageSystem],
) -> (Chi2, Vec<Vec<(f64, f64)>>) {
    let fit = Chi2Fit::from_grid(problem, gx, gy, systems);
    (fit.chi2, fit.predicted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::lens::mock::{
        det, jacobian, mock_systems, mock_with_sources, newton_image, MockOptions,
    };
    use crate::workload::lens::{Halos, LensOptions, Preset};
    use std::sync::OnceLock;
    use std::time::Instant;

    struct Fixture {
        problem: LensProblem,
        gx: Vec<f64>,
        gy: Vec<f64>,
        systems: Vec<ImageSystem>,
        sources: Vec<[f64; 3]>,
    }

    /// The ci preset with galaxies of 110–130 km/s (the public Lenstool-HPC benchmark configuration,
    /// `MarkusBenchmark.par`) or of the preset default 10–15 km/s.
    fn ci_problem(realistic: bool) -> LensProblem {
        let galaxy_sigma = if realistic {
            (110.0, 130.0)
        } else {
            (10.0, 15.0)
        };
        LensProblem::preset(
            Preset::Ci,
            &LensOptions {
                galaxy_sigma,
                ..Default::default()
            },
        )
        .unwrap()
    }

    fn build(realistic: bool) -> Fixture {
        let problem = ci_problem(realistic);
        let t = Instant::now();
        let (systems, sources) = mock_with_sources(&problem, &MockOptions::default()).unwrap();
        eprintln!(
            "mock_systems (ci, realistic galaxies {realistic}): {:.3} s, {} systems, images {:?}",
            t.elapsed().as_secs_f64(),
            systems.len(),
            systems.iter().map(|s| s.images.len()).collect::<Vec<_>>()
        );
        let t = Instant::now();
        let mut field = problem.reference();
        eprintln!("reference grid (ci): {:.3} s", t.elapsed().as_secs_f64());
        let gy = field.components.pop().unwrap();
        let gx = field.components.pop().unwrap();
        Fixture {
            problem,
            gx,
            gy,
            systems,
            sources,
        }
    }

    fn fixture(realistic: bool) -> &'static Fixture {
        static REALISTIC: OnceLock<Fixture> = OnceLock::new();
        static PRESET: OnceLock<Fixture> = OnceLock::new();
        if realistic {
            REALISTIC.get_or_init(|| build(true))
        } else {
            PRESET.get_or_init(|| build(false))
        }
    }

    #[test]
    fn mock_systems_are_valid_and_exact() {
        for realistic in [true, false] {
            let f = fixture(realistic);
            assert!(f.systems.len() >= 20, "only {} systems", f.systems.len());
            let mut zs: Vec<f64> = f.systems.iter().map(|s| s.z_source).collect();
            zs.sort_by(f64::total_cmp);
            zs.dedup();
            assert!(zs.len() >= 2, "redshifts {zs:?}");
            for (k, (sys, src)) in f.systems.iter().zip(&f.sources).enumerate() {
                assert_eq!(sys.id, format!("S{:02}", k + 1));
                assert!(
                    (2..=5).contains(&sys.images.len()),
                    "{}: {} images",
                    sys.id,
                    sys.images.len()
                );
                let s = system_scale(&f.problem, sys.z_source);
                assert_eq!(s, src[2]);
                for im in &sys.images {
                    assert_eq!(im.sigma, 0.5);
                    let (bx, by) = beta_at(&f.problem, s, im.x, im.y);
                    let d = ((bx - src[0]).powi(2) + (by - src[1]).powi(2)).sqrt();
                    assert!(d < 1e-8, "{}: image maps {d}″ from its source", sys.id);
                }
            }
            // Deterministic.
            let again = mock_systems(&f.problem, &MockOptions::default()).unwrap();
            assert_eq!(again, f.systems);
        }
    }

    #[test]
    fn delensing_the_true_model_recovers_the_images() {
        for realistic in [true, false] {
            let f = fixture(realistic);
            let p = &f.problem;
            let t = Instant::now();
            let sources = source_barycentres(p, &f.systems);
            let hits = delens_cpu(p, &f.gx, &f.gy, &sources);
            eprintln!(
                "delens_cpu (ci, {} systems): {:.3} s, {} hits",
                f.systems.len(),
                t.elapsed().as_secs_f64(),
                hits.len()
            );
            // The barycentre of exact images is the true source.
            for (b, s) in sources.iter().zip(&f.sources) {
                assert!((b[0] - s[0]).abs() < 1e-8 && (b[1] - s[1]).abs() < 1e-8 && b[2] == s[2]);
            }
            let predicted = predicted_images(p, &hits, f.systems.len());
            let c = chi2(&f.systems, &predicted);
            let limit = p.pixel * 2f64.sqrt();
            let mut worst = 0.0f64;
            let mut extras_off_centre = 0;
            for (sys, pred) in f.systems.iter().zip(&predicted) {
                let matched = match_images(&sys.images, pred);
                for (im, m) in sys.images.iter().zip(&matched) {
                    let q = pred[m.unwrap_or_else(|| panic!("{}: an image is missing", sys.id))];
                    let d = ((q.0 - im.x).powi(2) + (q.1 - im.y).powi(2)).sqrt();
                    worst = worst.max(d);
                    assert!(d <= limit, "{}: |Δ| = {d}″ > {limit}″", sys.id);
                }
                // Extra predictions come from the singular (0/0) SIE cells at halo centres.
                for (k, q) in pred.iter().enumerate() {
                    if !matched.contains(&Some(k)) {
                        let h = &p.halos;
                        let near = (0..h.len())
                            .any(|m| (q.0 - h.x0[m]).hypot(q.1 - h.y0[m]) < 2.0 * p.pixel);
                        extras_off_centre += usize::from(!near);
                    }
                }
            }
            assert_eq!(c.n_missing, 0);
            assert_eq!(
                c.n_images,
                f.systems.iter().map(|s| s.images.len()).sum::<usize>()
            );
            assert!((c.per_system.iter().sum::<f64>() - c.chi2).abs() < 1e-9 * c.chi2.max(1.0));
            eprintln!(
                "true model: chi2 = {:.3} over {} images, worst |Δ| = {:.3}″ ({:.2} px), {} extra ({} not at a \
                 halo centre)",
                c.chi2,
                c.n_images,
                worst,
                worst / p.pixel,
                c.n_extra,
                extras_off_centre
            );
            let (c2, _) = chi2_of_grid(p, &f.gx, &f.gy, &f.systems);
            assert_eq!(c2, c);
        }
    }

    /// χ² with the strongest halo's b (the preset's first cluster halo, 1000 km/s) scaled.
    fn chi2_with_cluster_scaled(f: &Fixture, scale: f64) -> Chi2 {
        let p = &f.problem;
        if scale == 1.0 {
            return chi2_of_grid(p, &f.gx, &f.gy, &f.systems).0;
        }
        let k = (0..p.halos.len())
            .max_by(|&a, &b| p.halos.b[a].total_cmp(&p.halos.b[b]))
            .unwrap();
        let mut halos: Halos = p.halos.clone();
        halos.b[k] *= scale;
        let q = LensProblem::new(&p.preset, p.n, p.pixel, p.cosmology, halos).unwrap();
        let field = q.reference();
        chi2_of_grid(&q, &field.components[0], &field.components[1], &f.systems).0
    }

    #[test]
    fn chi2_grows_with_the_cluster_strength_error() {
        // Preset galaxies (10–15 km/s): the two cluster halos make the multiple images, which straddle
        // them, so 1 % of b moves the images by ~0.2″ and χ² rises at every step.
        let f = fixture(false);
        let mut last = -1.0;
        for scale in [1.00, 1.01, 1.02, 1.04, 1.08] {
            let c = chi2_with_cluster_scaled(f, scale);
            eprintln!(
                "preset galaxies, b × {scale}: chi2 = {:.3}, missing {}, extra {}",
                c.chi2, c.n_missing, c.n_extra
            );
            assert!(
                c.chi2 > last,
                "chi2 {} at b × {scale} not above {last}",
                c.chi2
            );
            last = c.chi2;
        }
        // 110–130 km/s untruncated SIS galaxies: 700 of them within ±60″ give a mean convergence near 3,
        // so the galaxies dominate; a system's images lie on one side of the cluster halo, whose change of
        // deflection is then nearly uniform over them and absorbed by the source barycentre. 1–2 % of b
        // moves the images by less than the pixel discretisation, so only the larger steps are tested.
        let f = fixture(true);
        let mut last = -1.0;
        for scale in [1.00, 1.01, 1.02, 1.04, 1.08] {
            let c = chi2_with_cluster_scaled(f, scale);
            eprintln!(
                "realistic galaxies, b × {scale}: chi2 = {:.3}, missing {}, extra {}",
                c.chi2, c.n_missing, c.n_extra
            );
            if scale == 1.0 || scale >= 1.04 {
                assert!(
                    c.chi2 > last,
                    "chi2 {} at b × {scale} not above {last}",
                    c.chi2
                );
                last = c.chi2;
            }
        }
    }

    #[test]
    fn single_sis_images_and_containment_conventions() {
        // SIS at the origin, b = 10″ at the reference redshift (s = 1 for z = 2). On the x axis the lens
        // equation is β = θ − b·sign(θ): for 0 < β < b the images are θ₊ = β + b and θ₋ = β − b.
        let b = 10.0;
        let mut halos = Halos::default();
        halos.push(0.0, 0.0, b, 0.0, 0.0);
        let p = LensProblem::new("sis", 256, 0.125, Cosmology::default(), halos).unwrap();
        let s = system_scale(&p, 2.0);
        assert!((s - 1.0).abs() < 1e-12);
        let beta = 3.0;
        let plus = newton_image(&p, s, (beta, 0.0), (beta + b + 0.3, 0.2)).unwrap();
        let minus = newton_image(&p, s, (beta, 0.0), (beta - b - 0.2, -0.3)).unwrap();
        assert!(
            (plus.0 - (beta + b)).abs() < 1e-9 && plus.1.abs() < 1e-9,
            "{plus:?}"
        );
        assert!(
            (minus.0 - (beta - b)).abs() < 1e-9 && minus.1.abs() < 1e-9,
            "{minus:?}"
        );
        // det A = 1 − b/|θ| for a SIS (radial eigenvalue 1, tangential 1 − b/|θ|).
        let dp = det(&jacobian(&p, s, plus.0, plus.1));
        let dm = det(&jacobian(&p, s, minus.0, minus.1));
        assert!((dp - (1.0 - b / (beta + b))).abs() < 1e-6, "{dp}");
        assert!((dm - (1.0 - b / (b - beta))).abs() < 1e-6, "{dm}");

        // Delensing on the problem's grid finds both images within a pixel (plus perhaps a spurious hit in
        // the singular centre cell, which is an extra image).
        let field = p.reference();
        let src = [[beta, 0.0, s]];
        let hits = delens_cpu(&p, &field.components[0], &field.components[1], &src);
        let pred = &predicted_images(&p, &hits, 1)[0];
        for want in [beta + b, beta - b] {
            let d = pred
                .iter()
                .map(|q| ((q.0 - want).powi(2) + q.1.powi(2)).sqrt())
                .fold(f64::INFINITY, f64::min);
            assert!(
                d <= p.pixel * 2f64.sqrt(),
                "image at {want}: nearest prediction {d}″ away ({pred:?})"
            );
        }

        // Mock systems of the SIS: two images, collinear with the centre on opposite sides, with
        // |θ₊| + |θ₋| = 2b and |θ₊| − |θ₋| = 2|β|.
        let opts = MockOptions {
            n_systems: 6,
            z_sources: vec![2.0],
            ..Default::default()
        };
        let (systems, sources) = mock_with_sources(&p, &opts).unwrap();
        assert_eq!(systems.len(), 6);
        for (sys, src) in systems.iter().zip(&sources) {
            assert_eq!(sys.images.len(), 2, "{sys:?}");
            let r: Vec<f64> = sys.images.iter().map(|im| im.x.hypot(im.y)).collect();
            let bs = src[0].hypot(src[1]);
            assert!((r[0] + r[1] - 2.0 * b).abs() < 1e-8, "{r:?}");
            assert!(
                ((r[0] - r[1]).abs() - 2.0 * bs).abs() < 1e-8,
                "{r:?} β = {bs}"
            );
            let (a, c) = (&sys.images[0], &sys.images[1]);
            assert!((a.x * c.y - a.y * c.x).abs() < 1e-7 * r[0] * r[1]);
            assert!(a.x * c.x + a.y * c.y < 0.0);
        }

        // Containment conventions on a 3×3 grid with no deflection (β = θ): cell (0, 0) spans
        // [x0, x0+h]²; triangle 0 is the lower-left half (a, b, c), triangle 1 the upper-right (d, c, b).
        let flat = LensProblem::new("flat", 3, 1.0, Cosmology::default(), {
            let mut h = Halos::default();
            h.push(100.0, 100.0, 1.0, 0.0, 0.0);
            h
        })
        .unwrap();
        let zero = vec![0.0; 9];
        let x0 = flat.coord(0);
        let hits_at = |gx: &[f64], gy: &[f64], x: f64, y: f64, k: f64| {
            delens_cpu(&flat, gx, gy, &[[x, y, k]])
        };
        let h = |i: u32, j: u32, t: u8| Hit {
            system: 0,
            i,
            j,
            triangle: t,
        };
        assert_eq!(
            hits_at(&zero, &zero, x0 + 0.2, x0 + 0.3, 1.0),
            vec![h(0, 0, 0)]
        );
        assert_eq!(
            hits_at(&zero, &zero, x0 + 0.8, x0 + 0.7, 1.0),
            vec![h(0, 0, 1)]
        );
        // On the shared diagonal: both triangles (the test is inclusive); on a vertex shared by four
        // cells: all six triangles that touch it.
        assert_eq!(
            hits_at(&zero, &zero, x0 + 0.5, x0 + 0.5, 1.0),
            vec![h(0, 0, 0), h(0, 0, 1)]
        );
        assert_eq!(
            hits_at(&zero, &zero, x0 + 1.0, x0 + 1.0, 1.0),
            vec![
                h(0, 0, 1),
                h(0, 1, 0),
                h(0, 1, 1),
                h(1, 0, 0),
                h(1, 0, 1),
                h(1, 1, 0)
            ]
        );
        let pos = hit_position(&flat, &h(0, 0, 0));
        assert_eq!(pos, (x0 + 1.0 / 3.0, x0 + 1.0 / 3.0));
        assert_eq!(
            hit_position(&flat, &h(1, 0, 1)),
            (x0 + 1.0 + 2.0 / 3.0, x0 + 2.0 / 3.0)
        );
        // Parity flip: α = 2θ with s = 1 maps θ to −θ (orientation reversed); the same cells are still hit.
        let gx: Vec<f64> = (0..9).map(|p| 2.0 * flat.coord(p % 3)).collect();
        let gy: Vec<f64> = (0..9).map(|p| 2.0 * flat.coord(p / 3)).collect();
        assert_eq!(
            hits_at(&gx, &gy, -(x0 + 0.2), -(x0 + 0.3), 1.0),
            vec![h(0, 0, 0)]
        );
        // A source outside the mapped grid: no hit; merged predictions of the vertex case: one image.
        assert!(hits_at(&zero, &zero, 5.0, 5.0, 1.0).is_empty());
        let vertex = hits_at(&zero, &zero, x0 + 1.0, x0 + 1.0, 1.0);
        let merged = predicted_images(&flat, &vertex, 1);
        assert_eq!(merged[0].len(), 1);
        assert!(
            (merged[0][0].0 - (x0 + 1.0)).abs() < 1e-12
                && (merged[0][0].1 - (x0 + 1.0)).abs() < 1e-12
        );
    }

    #[test]
    fn matching_takes_closest_pairs_first_and_penalises_missing_images() {
        let im = |x: f64, y: f64| ObservedImage { x, y, sigma: 0.5 };
        let sys = ImageSystem {
            id: "A".into(),
            z_source: 2.0,
            images: vec![im(0.0, 0.0), im(1.0, 0.0), im(10.0, 0.0)],
        };
        // Both the first two observed images are closest to prediction 0 (at 0.9): the closer (x = 1)
        // wins, the other takes its next closest (−0.5); the third has nothing left.
        let pred = vec![(0.9, 0.0), (-0.5, 0.0)];
        assert_eq!(
            match_images(&sys.images, &pred),
            vec![Some(1), Some(0), None]
        );
        let c = chi2(std::slice::from_ref(&sys), &[pred]);
        let want = (0.25 + 0.01) / 0.25 + MISSING_PENALTY_ARCSEC.powi(2) / 0.25;
        assert!((c.chi2 - want).abs() < 1e-12, "{c:?}");
        assert_eq!((c.n_images, c.n_missing, c.n_extra), (3, 1, 0));
        // An extra prediction is counted, not penalised.
        let c = chi2(
            std::slice::from_ref(&sys),
            &[vec![(0.0, 0.0), (1.0, 0.0), (10.0, 0.0), (50.0, 0.0)]],
        );
        assert_eq!((c.chi2, c.n_missing, c.n_extra), (0.0, 0, 1));
    }
}

/// One χ² evaluation: its result, the predicted images and the triangle hits.
#[derive(Debug, Clone)]
pub struct Chi2Fit {
    pub chi2: Chi2,
    pub predicted: Vec<Vec<(f64, f64)>>,
    pub hits: Vec<Hit>,
}

impl Chi2Fit {
    fn from_hits(problem: &LensProblem, systems: &[ImageSystem], mut hits: Vec<Hit>) -> Chi2Fit {
        hits.sort();
        let predicted = predicted_images(problem, &hits, systems.len());
        Chi2Fit {
            chi2: chi2(systems, &predicted),
            predicted,
            hits,
        }
    }

    /// The χ² from a gradient grid on the host ([`delens_cpu`]).
    pub fn from_grid(
        problem: &LensProblem,
        gx: &[f64],
        gy: &[f64],
        systems: &[ImageSystem],
    ) -> Chi2Fit {
        let sources = source_barycentres(problem, systems);
        Chi2Fit::from_hits(problem, systems, delens_cpu(problem, gx, gy, &sources))
    }
}

/// Evaluates the image-plane χ² of `systems` for the problem's model on one target, timed as `opts` says,
/// with the grid of `mode` (`mixed-budget`, or the near/far `split`).
/// Devices keep the mode's grid and the float64 delensing on the device
/// ([`LensProblem::chi2_jobs`]); only the few hits come back and are matched here. The `cpu` model runs the
/// mode's grid and [`delens_cpu`].
pub fn evaluate(
    problem: &LensProblem,
    systems: &[ImageSystem],
    target: &Target,
    mode: LensMode,
    opts: &RunOptions,
) -> Result<Measured<Chi2Fit>, RunError> {
    let dev = match target {
        Target::Cpu(_) => {
            if mode == LensMode::Split {
                problem.split(super::SplitModel::Cpu); // made once per model, outside the timed runs
            }
            // Timed as on devices: the grid and the delensing; the matching of hits into images is not.
            let sources = source_barycentres(problem, systems);
            let (hits, times) = time_host(opts, "host clock", || {
                let grid = problem.cpu_run(mode);
                Ok(delens_cpu(
                    problem,
                    &grid.components[0],
                    &grid.components[1],
                    &sources,
                ))
            })?;
            return Ok(Measured::host(
                Chi2Fit::from_hits(problem, systems, hits),
                times,
            ));
        }
        Target::Device(dev) => dev,
    };
    if !dev.info().fp64 {
        return Err(RunError::Unsupported("device has no fp64 support".into()));
    }
    let sources: Vec<f64> = source_barycentres(problem, systems)
        .iter()
        .flat_map(|s| *s)
        .collect();
    let (row0s, jobs): (Vec<usize>, Vec<_>) = problem
        .chi2_jobs(mode, &sources, DeviceBudget::of(dev.info()), opts)
        .into_iter()
        .unzip();
    let run = run_plan(dev.as_ref(), &jobs, opts.warmup)?;
    let mut hits = Vec::new();
    for (row0, out) in row0s.iter().zip(&run.outputs) {
        let count = out[1].to_f64()[0] as usize;
        if count > MAX_HITS_PER_BAND {
            return Err(RunError::Failed(format!(
                "delensing found {count} triangle hits in the band at row {row0}, more than the \
                 {MAX_HITS_PER_BAND} it holds"
            )));
        }
        let HostVec::I32(raw) = &out[0] else {
            return Err(RunError::Failed(
                "delensing returned hits of the wrong type".into(),
            ));
        };
        for h in raw.chunks_exact(4).take(count) {
            hits.push(Hit {
                system: h[0] as u32,
                i: h[1] as u32,
                j: (*row0 as i32 + h[2]) as u32,
                triangle: h[3] as u8,
            });
        }
    }
    Ok(run.measured(Chi2Fit::from_hits(problem, systems, hits)))
}

/// The χ² of image systems as a workload the driver runs on every backend: each backend's predicted images
/// must be the float64 reference's (the `cpu` f64 grid and delensing), every image within
/// [`MERGE_PIXELS`] pixels.
pub struct Chi2Problem {
    pub problem: LensProblem,
    pub systems: Vec<ImageSystem>,
}

/// The χ² workload's own figures in a row.
#[derive(Debug, Clone, Serialize)]
pub struct Chi2Details {
    pub chi2: f64,
    pub missing: usize,
    pub extra: usize,
    pub reference_chi2: f64,
    pub reference_missing: usize,
    pub reference_extra: usize,
    pub systems: usize,
    pub images: usize,
    /// Largest distance between an image predicted here and the nearest of the reference's (both ways).
    pub worst_shift_arcsec: f64,
    pub hits: usize,
}

impl Chi2Problem {
    /// The systems checked against the problem: each source behind the lens.
    pub fn new(problem: LensProblem, systems: Vec<ImageSystem>) -> Result<Self, String> {
        if systems.is_empty() {
            return Err("no image systems: the χ² needs at least one".into());
        }
        for s in &systems {
            if s.z_source <= problem.cosmology.z_lens {
                return Err(format!(
                    "image system '{}': z_source {} is not behind the lens (z_lens {})",
                    s.id, s.z_source, problem.cosmology.z_lens
                ));
            }
        }
        Ok(Chi2Problem { problem, systems })
    }

    fn images(&self) -> usize {
        self.systems.iter().map(|s| s.images.len()).sum()
    }
}

impl Workload for Chi2Problem {
    type Mode = LensMode;
    type Output = Chi2Fit;
    type Reference = Chi2Fit;
    type Details = Chi2Details;

    fn name(&self) -> &'static str {
        "lens-chi2"
    }
    fn preset(&self) -> &str {
        &self.problem.preset
    }
    fn describe(&self) -> String {
        format!(
            "{}; {} systems, {} images",
            self.problem.describe(),
            self.systems.len(),
            self.images()
        )
    }
    /// The χ² runs the error-budget grid or the near/far split, with float64 delensing.
    fn modes(&self) -> Vec<LensMode> {
        vec![LensMode::BUDGET, LensMode::Split]
    }
    fn work(&self, _output: &Chi2Fit) -> Option<Work> {
        Some(Work {
            units: (self.problem.n * self.problem.n) as f64 * self.problem.halos.len() as f64,
            unit_name: "interactions",
        })
    }
    fn pipe_instructions(&self, mode: LensMode) -> Option<f64> {
        self.problem.pipe_instructions(mode)
    }
    fn reference(&self) -> Chi2Fit {
        let grid = self.problem.reference();
        Chi2Fit::from_grid(
            &self.problem,
            &grid.components[0],
            &grid.components[1],
            &self.systems,
        )
    }
    fn execute(
        &self,
        target: &Target,
        mode: LensMode,
        opts: &RunOptions,
    ) -> Result<Measured<Chi2Fit>, RunError> {
        evaluate(&self.problem, &self.systems, target, mode, opts)
    }
    fn verify(&self, fit: &Chi2Fit, reference: &Chi2Fit, _mode: LensMode) -> Verdict<Chi2Details> {
        let shift = worst_shift(&reference.predicted, &fit.predicted);
        let tolerance = MERGE_PIXELS * self.problem.pixel;
        let pass = shift <= tolerance;
        let rel =
            (fit.chi2.chi2 - reference.chi2.chi2).abs() / reference.chi2.chi2.abs().max(1e-300);
        Verdict {
            accuracy: Accuracy {
                max_abs: shift,
                max_rel: rel,
                rms_abs: shift,
                non_finite: u64::from(!fit.chi2.chi2.is_finite()),
                tolerance_abs: tolerance,
                tolerance_rel: f64::INFINITY,
                unit: "arcsec (image positions)".into(),
                pass: pass && fit.chi2.chi2.is_finite(),
            },
            unconverged: None,
            failure: (!pass).then(|| {
                format!(
                    "predicted images differ from the reference's: worst shift {shift:.3}″ (tolerance {tolerance:.3}″)"
                )
            }),
            details: Chi2Details {
                chi2: fit.chi2.chi2,
                missing: fit.chi2.n_missing,
                extra: fit.chi2.n_extra,
                reference_chi2: reference.chi2.chi2,
                reference_missing: reference.chi2.n_missing,
                reference_extra: reference.chi2.n_extra,
                systems: self.systems.len(),
                images: self.images(),
                worst_shift_arcsec: shift,
                hits: fit.hits.len(),
            },
        }
    }
}

/// Largest distance between a reference predicted image and the nearest image predicted by another run,
/// over every system and image in both directions (arcsec; infinite when one side has an image the other
/// lacks entirely).
pub fn worst_shift(a: &[Vec<(f64, f64)>], b: &[Vec<(f64, f64)>]) -> f64 {
    let one_way = |x: &[Vec<(f64, f64)>], y: &[Vec<(f64, f64)>]| {
        x.iter()
            .zip(y)
            .flat_map(|(xs, ys)| {
                xs.iter().map(move |p| {
                    ys.iter()
                        .map(|q| ((p.0 - q.0).powi(2) + (p.1 - q.1).powi(2)).sqrt())
                        .fold(f64::INFINITY, f64::min)
                })
            })
            .fold(0.0f64, f64::max)
    };
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    one_way(a, b).max(one_way(b, a))
}
