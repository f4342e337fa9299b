//! Iso-latitude ring grids: HEALPix RING, Gauss-Legendre, or any list of rings (θ, nφ, φ0, offset). A
//! transform needs only each ring's colatitude, its pixel count, the azimuth of its first pixel, where its
//! pixels sit in the map, and (for analysis) its quadrature weight per pixel.

use std::f64::consts::PI;

/// One ring of pixels at constant colatitude.
#[derive(Debug, Clone, PartialEq)]
pub struct Ring {
    /// Colatitude θ, radians.
    pub theta: f64,
    /// cos θ and sin θ, computed where they are exact (HEALPix's z = 1 − i²/3n² near the poles).
    pub cos: f64,
    pub sin: f64,
    /// Pixels on the ring, equally spaced in azimuth.
    pub nphi: usize,
    /// Azimuth of the first pixel, radians; pixel j is at φ0 + 2πj/nφ.
    pub phi0: f64,
    /// Index of the ring's first pixel in the map.
    pub offset: usize,
    /// Quadrature weight of each pixel of the ring (analysis): 4π/npix on HEALPix, w_GL/nφ on Gauss-Legendre.
    pub weight: f64,
}

/// Two rings mirrored about the equator (θ and π − θ), or one ring on the equator or without a mirror.
/// Legendre sums are shared by a pair: λ_lm(π − θ) = (−1)^(l+m) λ_lm(θ).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingPair {
    /// The ring with θ ≤ π/2 (index into the grid's rings).
    pub north: usize,
    /// Its mirror, when there is one.
    pub south: Option<usize>,
    pub cos: f64,
    pub sin: f64,
}

/// What kind of grid, for descriptions and checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridKind {
    Healpix { nside: usize },
    GaussLegendre { ntheta: usize, nphi: usize },
    Rings,
}

/// A map's rings, ordered by `offset`, with the pairs the transforms walk.
#[derive(Debug, Clone)]
pub struct RingGrid {
    pub kind: GridKind,
    pub rings: Vec<Ring>,
    pub npix: usize,
    pub pairs: Vec<RingPair>,
}

impl RingGrid {
    /// The HEALPix RING grid of `nside` (any nside ≥ 1; only NESTED ordering needs a power of two):
    /// 4 nside − 1 rings, 12 nside² pixels, each of area 4π/npix.
    pub fn healpix(nside: usize) -> Result<RingGrid, String> {
        if nside == 0 || nside > 1 << 20 {
            return Err(format!("nside {nside} is outside 1..=2^20"));
        }
        let n = nside as f64;
        let npix = 12 * nside * nside;
        let weight = 4.0 * PI / npix as f64;
        let mut rings = Vec::with_capacity(4 * nside - 1);
        for i in 1..4 * nside {
            // Ring i from the north pole; the south half mirrors the north.
            let north_i = i.min(4 * nside - i);
            let (cos_abs, sin, nphi, phi0) = if north_i < nside {
                let fi = north_i as f64;
                // 1 − z = i²/3n² exactly, so sin θ = sqrt((1 − z)(1 + z)) keeps its digits near the pole.
                let one_minus_z = fi * fi / (3.0 * n * n);
                let z = 1.0 - one_minus_z;
                let sin = (one_minus_z * (1.0 + z)).sqrt();
                (z, sin, 4 * north_i, PI / (4.0 * fi))
            } else {
                let z = (4.0 / 3.0) - 2.0 * north_i as f64 / (3.0 * n);
                let sin = ((1.0 - z) * (1.0 + z)).sqrt();
                // Rings with i + nside even are shifted by half a pixel.
                let phi0 = if (i + nside).is_multiple_of(2) {
                    PI / (4.0 * n)
                } else {
                    0.0
                };
                (z, sin, 4 * nside, phi0)
            };
            let cos = if i <= 2 * nside { cos_abs } else { -cos_abs };
            let offset = healpix_ring_start(nside, i);
            rings.push(Ring {
                theta: f64::atan2(sin, cos),
                cos,
                sin,
                nphi,
                phi0,
                offset,
                weight,
            });
        }
        RingGrid::assemble(GridKind::Healpix { nside }, rings)
    }

    /// The Gauss-Legendre grid: `ntheta` rings at the roots of P_ntheta (exact quadrature up to
    /// lmax = ntheta − 1), `nphi` pixels each from φ = 0, ordered from the north pole.
    pub fn gauss_legendre(ntheta: usize, nphi: usize) -> Result<RingGrid, String> {
        if ntheta == 0 || nphi == 0 {
            return Err(format!(
                "a Gauss-Legendre grid needs ntheta ≥ 1 and nphi ≥ 1 (got {ntheta}, {nphi})"
            ));
        }
        let nodes = gauss_legendre_nodes(ntheta);
        let rings = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| Ring {
                theta: node.theta,
                cos: node.theta.cos(),
                sin: node.theta.sin(),
                nphi,
                phi0: 0.0,
                offset: i * nphi,
                weight: 2.0 * PI * node.weight / nphi as f64,
            })
            .collect();
        RingGrid::assemble(GridKind::GaussLegendre { ntheta, nphi }, rings)
    }

    /// Any ring list, as a user gives it: each ring's θ, nφ, φ0, offset and weight. Rings may not overlap
    /// in the map; they are reordered by offset.
    pub fn from_rings(mut rings: Vec<Ring>) -> Result<RingGrid, String> {
        for (k, r) in rings.iter_mut().enumerate() {
            if !(r.theta.is_finite() && (0.0..=PI).contains(&r.theta)) {
                return Err(format!("ring {k}: theta {} is outside [0, pi]", r.theta));
            }
            if r.nphi == 0 {
                return Err(format!("ring {k}: nphi is 0"));
            }
            if !r.phi0.is_finite() || !r.weight.is_finite() {
                return Err(format!(
                    "ring {k}: phi0 {} or weight {} is not finite",
                    r.phi0, r.weight
                ));
            }
            r.cos = r.theta.cos();
            r.sin = r.theta.sin();
        }
        RingGrid::assemble(GridKind::Rings, rings)
    }

    fn assemble(kind: GridKind, mut rings: Vec<Ring>) -> Result<RingGrid, String> {
        rings.sort_by_key(|r| r.offset);
        let mut end = 0;
        for (k, r) in rings.iter().enumerate() {
            if r.offset < end {
                return Err(format!(
                    "ring {k} (offset {}) overlaps the ring before it (which ends at {end})",
                    r.offset
                ));
            }
            end = r.offset + r.nphi;
        }
        let pairs = pair_rings(&rings);
        Ok(RingGrid {
            kind,
            npix: end,
            rings,
            pairs,
        })
    }

    /// The grid of some of these rings (indices into `rings`), with their angles kept exactly and their pixels
    /// renumbered from 0 in ring order: a process's share of the map in a distributed transform.
    pub fn subset(&self, ring_indices: &[usize]) -> RingGrid {
        let mut chosen: Vec<usize> = ring_indices.to_vec();
        chosen.sort_unstable();
        let mut offset = 0;
        let rings: Vec<Ring> = chosen
            .iter()
            .map(|&k| {
                let r = Ring {
                    offset,
                    ..self.rings[k].clone()
                };
                offset += r.nphi;
                r
            })
            .collect();
        let pairs = pair_rings(&rings);
        RingGrid {
            kind: GridKind::Rings,
            npix: offset,
            rings,
            pairs,
        }
    }

    pub fn describe(&self) -> String {
        match self.kind {
            GridKind::Healpix { nside } => format!("HEALPix nside {nside}"),
            GridKind::GaussLegendre { ntheta, nphi } => {
                format!("Gauss-Legendre {ntheta}×{nphi}")
            }
            GridKind::Rings => format!("{} rings, {} px", self.rings.len(), self.npix),
        }
    }
}

/// Index of the first pixel of HEALPix ring i (1-based) in RING order.
fn healpix_ring_start(nside: usize, i: usize) -> usize {
    let npix = 12 * nside * nside;
    if i < nside {
        2 * i * (i - 1)
    } else if i <= 3 * nside {
        2 * nside * (nside - 1) + (i - nside) * 4 * nside
    } else {
        let j = 4 * nside - i; // rings from the south pole, 1-based
        npix - 2 * j * (j + 1)
    }
}

/// Pairs each ring θ ≤ π/2 with a ring at π − θ (to 1e-12 rad); the rest stay single.
fn pair_rings(rings: &[Ring]) -> Vec<RingPair> {
    let mut order: Vec<usize> = (0..rings.len()).collect();
    order.sort_by(|&a, &b| rings[a].theta.total_cmp(&rings[b].theta));
    let single = |k: usize| RingPair {
        north: k,
        south: None,
        cos: rings[k].cos,
        sin: rings[k].sin,
    };
    let mut pairs = Vec::new();
    // Walk in from both ends of the θ order: the most northern ring left meets the most southern one.
    let (mut lo, mut hi) = (0usize, order.len());
    while lo < hi {
        let (a, b) = (order[lo], order[hi - 1]);
        if lo + 1 == hi {
            pairs.push(single(a));
            break;
        }
        let excess = rings[a].theta + rings[b].theta - PI;
        if excess.abs() < 1e-12 {
            pairs.push(RingPair {
                south: Some(b),
                ..single(a)
            });
            lo += 1;
            hi -= 1;
        } else if excess > 0.0 {
            pairs.push(single(b)); // b has no northern mirror
            hi -= 1;
        } else {
            pairs.push(single(a));
            lo += 1;
        }
    }
    pairs
}

/// One Gauss-Legendre node as a colatitude, with its weight (the weights sum to 2).
#[derive(Debug, Clone, Copy)]
pub struct GlNode {
    pub theta: f64,
    pub weight: f64,
}

/// The roots of P_n as colatitudes, north to south, with their weights. Newton's iteration runs in θ (not
/// in x = cos θ), so nodes near the poles keep full relative accuracy in sin θ; w = 2 / (dP_n/dθ)².
pub fn gauss_legendre_nodes(n: usize) -> Vec<GlNode> {
    let mut nodes = vec![
        GlNode {
            theta: 0.0,
            weight: 0.0
        };
        n
    ];
    let nf = n as f64;
    for i in 0..n.div_ceil(2) {
        // Tricomi's estimate of the i-th root, then Newton in θ.
        let mut theta = PI * (i as f64 + 0.75) / (nf + 0.5);
        let mut dp = 0.0;
        for _ in 0..100 {
            let (p, d) = legendre_and_dtheta(n, theta);
            dp = d;
            let step = p / d;
            theta -= step;
            if step.abs() < 1e-16 * theta.max(1e-300) {
                break;
            }
        }
        let (_, d) = legendre_and_dtheta(n, theta);
        if d != 0.0 {
            dp = d;
        }
        let weight = 2.0 / (dp * dp);
        nodes[i] = GlNode { theta, weight };
        nodes[n - 1 - i] = GlNode {
            theta: PI - theta,
            weight,
        };
    }
    if n % 2 == 1 {
        nodes[n / 2].theta = PI / 2.0;
    }
    nodes
}

/// P_n(cos θ) and dP_n/dθ = −n (P_{n−1} − x P_n) / sin θ, for θ ≤ π/2. Near the pole P_n(x) is
/// ill-conditioned in x (dP/P ≈ n² dx): the recurrence runs on u = 1 − x = 2 sin²(θ/2) and the differences
/// d_k = P_k − P_{k−1} (Reinsch's form), k d_k = (k−1) d_{k−1} − (2k−1) u P_{k−1}, so no digit of θ is lost.
fn legendre_and_dtheta(n: usize, theta: f64) -> (f64, f64) {
    if n == 0 {
        return (1.0, 0.0);
    }
    let half = (theta / 2.0).sin();
    let u = 2.0 * half * half;
    let (mut p, mut d) = (1.0 - u, -u); // P_1 = x, d_1 = P_1 − P_0
    for k in 2..=n {
        let kf = k as f64;
        d = ((kf - 1.0) * d - (2.0 * kf - 1.0) * u * p) / kf;
        p += d;
    }
    // P_{n−1} − x P_n = (P_n − d_n) − (1 − u) P_n = u P_n − d_n.
    (p, -(n as f64) * (u * p - d) / theta.sin())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healpix_rings_tile_the_map_and_pair_up() {
        for nside in [1, 2, 3, 8, 32] {
            let g = RingGrid::healpix(nside).unwrap();
            assert_eq!(g.npix, 12 * nside * nside);
            assert_eq!(g.rings.len(), 4 * nside - 1);
            let area: f64 = g.rings.iter().map(|r| r.weight * r.nphi as f64).sum();
            assert!((area - 4.0 * PI).abs() < 1e-12, "{area}");
            // 2 nside − 1 mirrored pairs and the equator alone.
            assert_eq!(g.pairs.len(), 2 * nside);
            assert_eq!(g.pairs.iter().filter(|p| p.south.is_none()).count(), 1);
            for r in &g.rings {
                assert!((r.cos * r.cos + r.sin * r.sin - 1.0).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn gauss_legendre_integrates_polynomials_exactly() {
        for n in [1, 2, 5, 32, 257] {
            let nodes = gauss_legendre_nodes(n);
            let sum: f64 = nodes.iter().map(|g| g.weight).sum();
            assert!((sum - 2.0).abs() < 1e-13, "n {n}: {sum}");
            // ∫ x^(2n−2) dx over [−1, 1] = 2 / (2n − 1).
            let k = 2 * n as i32 - 2;
            let q: f64 = nodes.iter().map(|g| g.weight * g.theta.cos().powi(k)).sum();
            assert!((q - 2.0 / (k as f64 + 1.0)).abs() < 1e-13, "n {n}: {q}");
            assert!(nodes.windows(2).all(|w| w[0].theta < w[1].theta));
        }
    }

    #[test]
    fn overlapping_rings_are_refused() {
        let ring = |offset| Ring {
            theta: 1.0,
            cos: 0.0,
            sin: 0.0,
            nphi: 4,
            phi0: 0.0,
            offset,
            weight: 1.0,
        };
        let err = RingGrid::from_rings(vec![ring(0), ring(2)]).unwrap_err();
        assert!(err.contains("overlaps"), "{err}");
    }
}
