//! The `cpu` model's transforms, float64: the seed's CPU structure. The Legendre stage runs m-outermost, each
//! rayon task taking the pair (m, mmax − m) so that tasks hold equal work; every ring pair shares one
//! recurrence (equatorial symmetry). The ring stage is one real FFT per ring (`realfft`), any length.
//!
//! Between the stages sits Δ_m(ring) = Σ_l a_lm λ_lm(θ_ring), the array S2HAT's all-to-all moves between
//! processes: m-major after synthesis's Legendre stage, ring-major after analysis's FFT stage, so that each
//! stage's tasks write only their own rows.

use super::alm::Alm;
use super::grid::RingGrid;
use super::grid::RingPair;
use super::legendre::{start_factors, LaneVisitor, MRecurrence, LANES};
use rayon::prelude::*;
use realfft::num_complex::Complex64;
use realfft::RealFftPlanner;
use std::collections::HashMap;
use std::sync::Arc;

const ZERO: Complex64 = Complex64 { re: 0.0, im: 0.0 };

/// Synthesis (alm2map): the map on `grid` of the band-limited function with coefficients `alm`.
pub fn alm2map(grid: &RingGrid, alm: &Alm) -> Result<Vec<f64>, String> {
    alm.check()?;
    let delta = legendre_synthesis(grid, alm);
    Ok(rings_from_delta(grid, alm.mmax, &delta))
}

/// Adjoint synthesis: a_lm = Σ_p w_p f_p Y*_lm(p), with the grid's quadrature weights w_p (map2alm with
/// iter = 0; exact on Gauss-Legendre for band-limited maps).
pub fn adjoint(grid: &RingGrid, map: &[f64], lmax: usize, mmax: usize) -> Result<Alm, String> {
    check_analysis(grid, map, lmax, mmax)?;
    let g = rings_to_phases(grid, map, mmax);
    Ok(legendre_analysis(grid, &g, lmax, mmax))
}

/// What analysis needs of its input: a value for every pixel of the grid, all finite (masked pixels,
/// healpy's UNSEEN included, are refused: there is no masked analysis yet), and mmax ≤ lmax.
pub(super) fn check_analysis(
    grid: &RingGrid,
    map: &[f64],
    lmax: usize,
    mmax: usize,
) -> Result<(), String> {
    if mmax > lmax {
        return Err(format!("mmax {mmax} is above lmax {lmax}"));
    }
    if map.len() != grid.npix {
        return Err(format!(
            "the map has {} pixels, the grid ({}) has {}",
            map.len(),
            grid.describe(),
            grid.npix
        ));
    }
    if let Some(p) = map
        .iter()
        .position(|v| !v.is_finite() || *v == HEALPIX_UNSEEN)
    {
        return Err(format!(
            "pixel {p} is {} (NaN, infinite or healpy's UNSEEN): masked analysis is not supported yet",
            map[p]
        ));
    }
    Ok(())
}

/// healpy's marker of a masked pixel.
pub const HEALPIX_UNSEEN: f64 = -1.6375e30;

/// Analysis (map2alm) with `iter` Jacobi refinements, as healpy's `map2alm(iter=N)`:
/// a ← a + adjoint(map − alm2map(a)).
pub fn map2alm(
    grid: &RingGrid,
    map: &[f64],
    lmax: usize,
    mmax: usize,
    iter: usize,
) -> Result<Alm, String> {
    let mut alm = adjoint(grid, map, lmax, mmax)?;
    for _ in 0..iter {
        let model = alm2map(grid, &alm)?;
        let residual: Vec<f64> = map.iter().zip(&model).map(|(f, g)| f - g).collect();
        let correction = adjoint(grid, &residual, lmax, mmax)?;
        for (a, c) in alm.coeffs.iter_mut().zip(&correction.coeffs) {
            *a += c;
        }
    }
    Ok(alm)
}

/// Rows (one per m, m ascending) handed out as the seed's min-max pairs (first with last, ...): every task
/// then holds about the same number of (l, m) terms. Each row comes with its index.
pub(super) fn min_max_pairs<T>(rows: Vec<T>) -> Vec<Vec<(usize, T)>> {
    if rows.is_empty() {
        return Vec::new();
    }
    let last = rows.len() - 1;
    let mut rows: Vec<Option<T>> = rows.into_iter().map(Some).collect();
    (0..=last / 2)
        .map(|k| {
            [k, last - k]
                .into_iter()
                .filter_map(|i| rows[i].take().map(|row| (i, row)))
                .collect()
        })
        .collect()
}

/// Δ_m(ring) for every m and ring, m-major.
fn legendre_synthesis(grid: &RingGrid, alm: &Alm) -> Vec<Complex64> {
    let rows: Vec<(usize, &[Complex64])> = (0..=alm.mmax).map(|m| (m, alm.m_slice(m))).collect();
    legendre_synthesis_rows(grid, alm.lmax, &rows)
}

/// Δ_m(ring) for the given m (each with its coefficients l = m..=lmax) and every ring: one row per m, in the
/// order given. Rows are handed to tasks as min-max pairs of the list (balanced when the m ascend).
pub(super) fn legendre_synthesis_rows(
    grid: &RingGrid,
    lmax: usize,
    rows: &[(usize, &[Complex64])],
) -> Vec<Complex64> {
    let nr = grid.rings.len();
    let mmax = rows.iter().map(|r| r.0).max().unwrap_or(0);
    let c = start_factors(mmax);
    let mut delta = vec![ZERO; rows.len() * nr];
    min_max_pairs(delta.chunks_mut(nr.max(1)).collect())
        .into_par_iter()
        .for_each(|task| {
            for (i, row) in task {
                let (m, coeffs) = rows[i];
                let rec = MRecurrence::new(m, lmax, c[m]);
                synthesis_row(grid, &rec, coeffs, row);
            }
        });
    delta
}

/// Δ_m of every ring for one m: the ring pairs in groups of LANES.
#[inline(always)]
fn synthesis_row(grid: &RingGrid, rec: &MRecurrence, coeffs: &[Complex64], row: &mut [Complex64]) {
    for chunk in grid.pairs.chunks(LANES) {
        let (cos, sin) = lane_angles(chunk);
        let mut sums = SynthesisSums {
            m: rec.m,
            coeffs,
            even: Default::default(),
            odd: Default::default(),
        };
        rec.walk_lanes(&cos, &sin, &mut sums);
        for (lane, pair) in chunk.iter().enumerate() {
            let even = Complex64::new(sums.even.re[lane], sums.even.im[lane]);
            let odd = Complex64::new(sums.odd.re[lane], sums.odd.im[lane]);
            // λ_lm(π − θ) = (−1)^(l+m) λ_lm(θ).
            row[pair.north] = even + odd;
            if let Some(s) = pair.south {
                row[s] = even - odd;
            }
        }
    }
}

/// a_lm of one m from the phases of every ring.
#[inline(always)]
fn analysis_row(
    grid: &RingGrid,
    rec: &MRecurrence,
    g: &[Complex64],
    (ncols, col): (usize, usize),
    out: &mut [Complex64],
) {
    let m = rec.m;
    let degrees = out.len();
    let mut sums = AnalysisSums {
        m,
        even: Default::default(),
        odd: Default::default(),
        acc: vec![LaneComplex::default(); degrees],
    };
    for chunk in grid.pairs.chunks(LANES) {
        let (cos, sin) = lane_angles(chunk);
        sums.even = Default::default();
        sums.odd = Default::default();
        for (lane, pair) in chunk.iter().enumerate() {
            let north = g[pair.north * ncols + col];
            let south = pair.south.map_or(ZERO, |s| g[s * ncols + col]);
            sums.even.set(lane, north + south);
            sums.odd.set(lane, north - south);
        }
        rec.walk_lanes(&cos, &sin, &mut sums);
    }
    // One horizontal sum per degree, after every chunk (not one per chunk and degree).
    for (o, a) in out.iter_mut().zip(&sums.acc) {
        *o = Complex64::new(lane_sum(&a.re), lane_sum(&a.im));
    }
}

/// a_lm = Σ_pairs λ_lm(θ) (G_north ± G_south), from the ring-major phases G_m(ring).
fn legendre_analysis(grid: &RingGrid, g: &[Complex64], lmax: usize, mmax: usize) -> Alm {
    let ms: Vec<usize> = (0..=mmax).collect();
    let coeffs = legendre_analysis_columns(grid, g, lmax, &ms);
    Alm { lmax, mmax, coeffs }
}

/// a_lm of the given m from ring-major phases whose columns are those m in that order (G[ring][i] is
/// G_{ms[i]}(ring)): the blocks l = m..=lmax of each m, concatenated in the order given.
pub(super) fn legendre_analysis_columns(
    grid: &RingGrid,
    g: &[Complex64],
    lmax: usize,
    ms: &[usize],
) -> Vec<Complex64> {
    let ncols = ms.len();
    let c = start_factors(ms.iter().copied().max().unwrap_or(0));
    let mut coeffs = vec![ZERO; ms.iter().map(|&m| lmax + 1 - m).sum()];
    let mut blocks = Vec::with_capacity(ncols);
    let mut rest: &mut [Complex64] = &mut coeffs;
    for &m in ms {
        let (block, tail) = rest.split_at_mut(lmax + 1 - m);
        blocks.push(block);
        rest = tail;
    }
    min_max_pairs(blocks).into_par_iter().for_each(|task| {
        for (col, out) in task {
            let m = ms[col];
            let rec = MRecurrence::new(m, lmax, c[m]);
            analysis_row(grid, &rec, g, (ncols, col), out);
        }
    });
    coeffs
}

/// LANES complex numbers as two arrays (what the vector phase reads and writes).
#[derive(Default, Clone, Copy)]
pub(super) struct LaneComplex {
    pub(super) re: [f64; LANES],
    pub(super) im: [f64; LANES],
}

impl LaneComplex {
    pub(super) fn set(&mut self, lane: usize, z: Complex64) {
        self.re[lane] = z.re;
        self.im[lane] = z.im;
    }
}

/// cos θ and sin θ of a chunk of ring pairs; missing lanes get the equator (their results are dropped, and
/// in analysis their phases are 0).
pub(super) fn lane_angles(chunk: &[RingPair]) -> ([f64; LANES], [f64; LANES]) {
    let (mut cos, mut sin) = ([0.0; LANES], [1.0; LANES]);
    for (lane, pair) in chunk.iter().enumerate() {
        cos[lane] = pair.cos;
        sin[lane] = pair.sin;
    }
    (cos, sin)
}

/// Synthesis: Σ_l a_lm λ_lm per lane, split by the parity of l − m (the southern ring's sign).
struct SynthesisSums<'a> {
    m: usize,
    coeffs: &'a [Complex64],
    even: LaneComplex,
    odd: LaneComplex,
}

impl LaneVisitor for SynthesisSums<'_> {
    #[inline(always)]
    fn all<const ODD: bool>(&mut self, l: usize, lambda: &[f64; LANES]) {
        let a = self.coeffs[l - self.m];
        let sums = if ODD { &mut self.odd } else { &mut self.even };
        for (lane, &lambda) in lambda.iter().enumerate() {
            sums.re[lane] = a.re.mul_add(lambda, sums.re[lane]);
            sums.im[lane] = a.im.mul_add(lambda, sums.im[lane]);
        }
    }
}

/// Analysis: per lane, acc[l − m] += λ_lm G (G = G_north ± G_south by the parity of l − m), chunk after
/// chunk; the lanes are summed once at the end as a fixed tree (deterministic).
struct AnalysisSums {
    m: usize,
    even: LaneComplex,
    odd: LaneComplex,
    acc: Vec<LaneComplex>,
}

impl LaneVisitor for AnalysisSums {
    #[inline(always)]
    fn all<const ODD: bool>(&mut self, l: usize, lambda: &[f64; LANES]) {
        let g = if ODD { &self.odd } else { &self.even };
        let acc = &mut self.acc[l - self.m];
        for (lane, &lam) in lambda.iter().enumerate() {
            acc.re[lane] = g.re[lane].mul_add(lam, acc.re[lane]);
            acc.im[lane] = g.im[lane].mul_add(lam, acc.im[lane]);
        }
    }
}

/// Σ of LANES values as a fixed pairwise tree (the compiler keeps it in vector registers).
#[inline(always)]
pub(super) fn lane_sum(v: &[f64; LANES]) -> f64 {
    let mut half = [0.0f64; LANES / 2];
    for i in 0..LANES / 2 {
        half[i] = v[i] + v[i + LANES / 2];
    }
    let mut quarter = [0.0f64; LANES / 4];
    for i in 0..LANES / 4 {
        quarter[i] = half[i] + half[i + LANES / 4];
    }
    quarter[0] + quarter[1]
}

/// The process's FFT planner: it keeps every plan it made, so repeated transforms (Jacobi iterations, timed
/// repeats, MPI steps) plan each ring length once. HEALPix at nside 2048 has 2,049 lengths, many with large
/// prime factors, whose plans cost as much as the FFTs themselves.
fn planner() -> std::sync::MutexGuard<'static, RealFftPlanner<f64>> {
    static PLANNER: std::sync::OnceLock<std::sync::Mutex<RealFftPlanner<f64>>> =
        std::sync::OnceLock::new();
    PLANNER
        .get_or_init(|| std::sync::Mutex::new(RealFftPlanner::new()))
        .lock()
        // A panic while planning leaves the planner usable: it only caches finished plans.
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One plan per ring length, made before the parallel loops.
fn plans<T>(grid: &RingGrid, mut make: impl FnMut(usize) -> Arc<T>) -> HashMap<usize, Arc<T>>
where
    T: ?Sized,
{
    let mut out = HashMap::new();
    for r in &grid.rings {
        out.entry(r.nphi).or_insert_with(|| make(r.nphi));
    }
    out
}

/// The map's rings as disjoint mutable slices, in ring order.
fn ring_slices<'a>(grid: &RingGrid, map: &'a mut [f64]) -> Vec<&'a mut [f64]> {
    let mut out = Vec::with_capacity(grid.rings.len());
    let mut rest = map;
    let mut pos = 0;
    for r in &grid.rings {
        let (_, tail) = rest.split_at_mut(r.offset - pos);
        let (ring, tail) = tail.split_at_mut(r.nphi);
        out.push(ring);
        rest = tail;
        pos = r.offset + r.nphi;
    }
    out
}

/// Rings handled together by the ring stage of synthesis: Δ is m-major, so each m's values of a block of
/// rings are contiguous (reading one ring's Δ_m alone strides by a whole row and misses the cache on every
/// m: 41 % of the ci transform's time before blocks).
const RING_BLOCK: usize = 16;

/// The ring stage of synthesis: each ring's pixels from its Δ_m, Σ_m Δ_m e^{imφ} folded onto the ring's
/// nφ frequencies (m ≥ nφ/2 aliases, as it must on short polar rings) and one inverse real FFT.
pub(super) fn rings_from_delta(grid: &RingGrid, mmax: usize, delta: &[Complex64]) -> Vec<f64> {
    let nr = grid.rings.len();
    let plans = {
        let mut planner = planner();
        plans(grid, |n| planner.plan_fft_inverse(n))
    };
    let mut map = vec![0.0; grid.npix];
    let mut slices = ring_slices(grid, &mut map);
    slices
        .par_chunks_mut(RING_BLOCK)
        .enumerate()
        .for_each(|(block, outs)| {
            let r0 = block * RING_BLOCK;
            let rings = &grid.rings[r0..r0 + outs.len()];
            let mut spectra: Vec<Vec<Complex64>> =
                rings.iter().map(|r| vec![ZERO; r.nphi / 2 + 1]).collect();
            let mut phases: Vec<Phase> = rings.iter().map(|r| Phase::new(r.phi0)).collect();
            for m in 0..=mmax {
                let row = &delta[m * nr + r0..m * nr + r0 + rings.len()];
                for (((ring, spectrum), phase), d) in
                    rings.iter().zip(&mut spectra).zip(&mut phases).zip(row)
                {
                    fold(spectrum, ring.nphi, m, *d * phase.next());
                }
            }
            for ((ring, spectrum), out) in rings.iter().zip(&mut spectra).zip(outs.iter_mut()) {
                let n = ring.nphi;
                // The folded spectrum is Hermitian by construction; C2R wants the exact zeros it implies.
                spectrum[0].im = 0.0;
                if n % 2 == 0 {
                    spectrum[n / 2].im = 0.0;
                }
                plans[&n]
                    .process(spectrum, out)
                    .expect("spectrum length and Hermitian ends are set above");
            }
        });
    map
}

/// e^{imφ0} for m = 0, 1, 2, ... by repeated rotation, recomputed exactly every PHASE_RESET steps so that
/// no more than that many roundings accumulate (a sincos per ring and m was a third of the ring stage).
struct Phase {
    phi0: f64,
    step: Complex64,
    current: Complex64,
    m: usize,
}

const PHASE_RESET: usize = 32;

impl Phase {
    fn new(phi0: f64) -> Phase {
        Phase {
            phi0,
            step: Complex64::from_polar(1.0, phi0),
            current: Complex64::new(1.0, 0.0),
            m: 0,
        }
    }
    /// e^{imφ0} for the next m.
    #[inline]
    fn next(&mut self) -> Complex64 {
        let z = if self.m.is_multiple_of(PHASE_RESET) {
            Complex64::from_polar(1.0, self.m as f64 * self.phi0)
        } else {
            self.current * self.step
        };
        self.current = z;
        self.m += 1;
        z
    }
}

/// Adds f = Δ_m e^{imφ0} and its conjugate (the m < 0 half of a real map) to a ring's half spectrum of n
/// frequencies, at m mod n and −m mod n.
#[inline]
fn fold(spectrum: &mut [Complex64], n: usize, m: usize, f: Complex64) {
    if m == 0 {
        spectrum[0].re += f.re;
        return;
    }
    let k = m % n;
    if k <= n / 2 {
        spectrum[k] += f;
    }
    let mirror = (n - k) % n;
    if mirror <= n / 2 {
        spectrum[mirror] += f.conj();
    }
}

/// The ring stage of analysis: G_m(ring) = w Σ_j f_j e^{−imφ_j} for m = 0..=mmax, ring-major, from one
/// forward real FFT per ring.
pub(super) fn rings_to_phases(grid: &RingGrid, map: &[f64], mmax: usize) -> Vec<Complex64> {
    let nm = mmax + 1;
    let plans = {
        let mut planner = planner();
        plans(grid, |n| planner.plan_fft_forward(n))
    };
    let mut g = vec![ZERO; grid.rings.len() * nm];
    g.par_chunks_mut(nm)
        .zip(grid.rings.par_iter())
        .for_each(|(row, ring)| {
            let n = ring.nphi;
            let mut pixels: Vec<f64> = map[ring.offset..ring.offset + n]
                .iter()
                .map(|f| f * ring.weight)
                .collect();
            let mut spectrum = vec![ZERO; n / 2 + 1];
            plans[&n]
                .process(&mut pixels, &mut spectrum)
                .expect("buffer lengths match the plan");
            let mut phase = Phase::new(-ring.phi0);
            for (m, out) in row.iter_mut().enumerate() {
                let k = m % n;
                let x = if k <= n / 2 {
                    spectrum[k]
                } else {
                    spectrum[n - k].conj()
                };
                *out = x * phase.next();
            }
        });
    g
}
