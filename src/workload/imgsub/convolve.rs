//! The `cpu` model's convolution of an image and its variance with a 21 × 21 kernel, varying per pixel or
//! constant: the arithmetic of cl/common/imgsub.h, arranged for a CPU core.
//!
//! Output rows are spread over the cores. Within a row, BLOCK output pixels are accumulated in registers
//! over the 21 taps of one kernel row (the same order as the device kernels and the earlier row-at-a-time
//! code: per kernel row, the taps from zero, then added to the row's sum), with fused multiply-adds. The
//! kernel rows read come from a zero-padded copy of the image row, so no tap needs a bounds test. Where the
//! core has AVX-512 the same code is compiled a second time with it and chosen at run time (the build's
//! baseline is AVX2).
//!
//! Cost per pixel-tap: 5 FMA-unit operations for a varying kernel (the tap's value from its row terms by
//! Horner in x̂, then one for the image and two for the variance), 2 for a constant one or one constant per
//! tile. The varying kernel's block sums live in memory (it is bound by its FMA either way). A constant or
//! tiled kernel works one plane at a time on pieces of PIECE vectors (`Lanes`: 256-bit vectors written with
//! intrinsics) and passes of PASS rows (PASS_AVX512 with AVX-512), each image row's chains (its taps from
//! zero) and the rows' totals in registers where they fit; memory accumulators held it at half its FMA
//! rate, and the autovectoriser's own packing of the same loop at about 60 % (it paired image and variance
//! lanes in one AVX-512 register and paid a shuffle per tap).

use super::difference::{tap_row_terms, HALF, SIDE, TERMS};
pub use crate::real::Real;
use rayon::prelude::*;

/// Output pixels of the varying kernel's block (its sums live in memory: five AVX-512 vectors of float32).
const BLOCK: usize = 80;
const TAPS: usize = SIDE * SIDE;

/// The kernel a convolution applies.
#[derive(Clone, Copy)]
pub enum Kernel<'a, T> {
    /// Kbar tap-major (`kbar[tap * TERMS + m]`, cl/common/imgsub.h): at pixel (x̂, ŷ) the tap is
    /// (k0 + ŷ(k2 + ŷ k5)) + x̂((k1 + ŷ k4) + x̂ k3). `xh` and `yh` give each column's and row's x̂ and ŷ (a
    /// tile-constant kernel repeats the tile centre's).
    Varying {
        kbar: &'a [T],
        xh: &'a [T],
        yh: &'a [T],
    },
    /// The same taps everywhere (`taps[tap]`).
    Constant { taps: &'a [T] },
    /// Constant over `tile` × `tile` tiles (the seed's GAISP scheme): the `Varying` formula at `xh` and `yh`,
    /// which repeat each tile's centre, evaluated once per tile rather than per pixel.
    Tiled {
        kbar: &'a [T],
        xh: &'a [T],
        yh: &'a [T],
        tile: usize,
    },
}

/// C = image ⊗ K and W = variance ⊗ K² over an nx × ny image (zero outside it), in parallel over bands of
/// ROWS output rows: `finish(y, c, w, rows)` receives output row y's sums (nx each) and that row of each of the N
/// output planes (the difference writes D and VD from them, the matched filter its significance alone).
pub fn convolve<T: Real, O: Send, F, const N: usize>(
    nx: usize,
    ny: usize,
    image: &[T],
    variance: &[T],
    kernel: Kernel<'_, T>,
    outputs: [&mut [O]; N],
    finish: F,
) where
    F: Fn(usize, &[T], &[T], [&mut [O]; N]) + Sync,
{
    convolve_on(
        nx,
        ny,
        image,
        variance,
        kernel,
        outputs,
        finish,
        avx512_here(),
    )
}

/// Whether the running core has the AVX-512 the second copy is compiled with.
fn avx512_here() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// `convolve`, with the AVX-512 copy allowed or not (the tests run both).
#[allow(clippy::too_many_arguments)]
fn convolve_on<T: Real, O: Send, F, const N: usize>(
    nx: usize,
    ny: usize,
    image: &[T],
    variance: &[T],
    kernel: Kernel<'_, T>,
    outputs: [&mut [O]; N],
    finish: F,
    avx512: bool,
) where
    F: Fn(usize, &[T], &[T], [&mut [O]; N]) + Sync,
{
    let rows = Rows {
        nx,
        ny,
        image,
        variance,
        kernel,
    };
    // Each band of ROWS output rows with its part of every plane.
    let mut planes = outputs.map(|p| p.chunks_mut(ROWS * nx));
    let bands: Vec<[&mut [O]; N]> = (0..ny.div_ceil(ROWS))
        .map(|_| {
            planes
                .each_mut()
                .map(|p| p.next().expect("a part per band"))
        })
        .collect();
    bands.into_par_iter().enumerate().for_each_init(
        || Scratch::new(&rows),
        |s, (band_index, mut band)| {
            let y0 = band_index * ROWS;
            #[cfg(target_arch = "x86_64")]
            if avx512 {
                // SAFETY: `convolve` allows this copy only where it detected the features it is
                // compiled with.
                unsafe { rows.sums_avx512(s, y0) };
            } else {
                rows.sums::<PASS>(s, y0);
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = avx512;
                rows.sums::<PASS>(s, y0);
            }
            let width = s.xh.len();
            for r in 0..ROWS.min(ny - y0) {
                let (c, w) = (&s.c[r * width..][..nx], &s.w[r * width..][..nx]);
                finish(
                    y0 + r,
                    c,
                    w,
                    band.each_mut().map(|b| &mut b[r * nx..][..nx]),
                );
            }
        },
    );
}

/// Output rows a thread computes together (a band). The varying kernel takes them two at a time: each image
/// row read serves both, so a tap's loads feed twice the arithmetic (one row alone is bound by its
/// unaligned loads). A constant or tiled kernel takes them PASS at a time (PASS_AVX512 with AVX-512), so
/// each image load serves that many rows.
const ROWS: usize = 12;

/// Rows of a constant or tiled kernel's pass with AVX2's 16 registers: three rows' chains (9 vectors) hide
/// the FMA's latency, their totals spill (measured: two rows with totals in registers ran no faster than
/// the autovectorised code, three 11 % faster).
const PASS: usize = 3;

/// The same with AVX-512's 32 registers: four rows' chains and totals (24 vectors) all in registers.
const PASS_AVX512: usize = 4;

/// Tile tables a thread keeps: one per row of the longer pass.
const SLOTS: usize = if PASS > PASS_AVX512 {
    PASS
} else {
    PASS_AVX512
};

/// What every row's sums read.
struct Rows<'a, T> {
    nx: usize,
    ny: usize,
    image: &'a [T],
    variance: &'a [T],
    kernel: Kernel<'a, T>,
}

/// One thread's scratch: the zero-padded image and variance row (only the edge blocks' parts are filled),
/// the kernel's row terms and the sums of each of the ROWS output rows, x̂. Every block is full: the sums
/// run to a multiple of BLOCK, and the padded rows HALF beyond that on each side.
struct Scratch<T> {
    line: Vec<T>,
    var_line: Vec<T>,
    /// A piece's image and variance rows, zero-padded, where it reaches past the image's left or right edge.
    pad: Vec<T>,
    coef: Vec<[T; 3]>,
    c: Vec<T>,
    w: Vec<T>,
    xh: Vec<T>,
    /// A tiled kernel's (k, k²) per tile column and tap for the tile rows last asked for, keyed by tile row:
    /// one per row of a pass (a pass can straddle tile edges, and tiles may be one pixel high), so at most
    /// SLOTS tables of nx / tile × TAPS live per thread however small the tiles.
    tile_taps: [(usize, Vec<[T; 2]>); SLOTS],
}

impl<T: Real> Scratch<T> {
    fn new(rows: &Rows<'_, T>) -> Self {
        let width = rows.nx.div_ceil(BLOCK) * BLOCK;
        let mut xh = vec![T::ZERO; width];
        if let Kernel::Varying { xh: cols, .. } = rows.kernel {
            xh[..rows.nx].copy_from_slice(cols);
        }
        Scratch {
            line: vec![T::ZERO; width + 2 * HALF],
            var_line: vec![T::ZERO; width + 2 * HALF],
            pad: vec![T::ZERO; 2 * (ROWS + 2 * HALF) * PAD],
            coef: vec![[T::ZERO; 3]; ROWS * TAPS],
            c: vec![T::ZERO; ROWS * width],
            w: vec![T::ZERO; ROWS * width],
            xh,
            tile_taps: std::array::from_fn(|_| (usize::MAX, Vec::new())),
        }
    }
}

impl<T: Real> Rows<'_, T> {
    /// `sums`, compiled with AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn sums_avx512(&self, s: &mut Scratch<T>, y0: usize) {
        self.sums::<PASS_AVX512>(s, y0)
    }

    /// The sums of output rows y0 .. y0 + ROWS (those below ny) into `s.c` and `s.w`; a constant or tiled
    /// kernel's R rows at a time.
    #[inline(always)]
    fn sums<const R: usize>(&self, s: &mut Scratch<T>, y0: usize) {
        let (nx, ny) = (self.nx, self.ny);
        let count = ROWS.min(ny - y0);
        // A constant or tiled kernel: the tile width (a constant kernel is one tile as wide as the row).
        let mut tiles = None;
        match self.kernel {
            Kernel::Varying { kbar, yh, .. } => {
                // The kernel's row terms at each row's ŷ: the tap is a + x̂(b + x̂ k3).
                for r in 0..count {
                    let yh = yh[y0 + r];
                    let coef = &mut s.coef[r * TAPS..][..TAPS];
                    for (cf, k) in coef.iter_mut().zip(kbar.chunks_exact(TERMS)) {
                        *cf = tap_row_terms(k, yh);
                    }
                }
            }
            Kernel::Constant { taps } => {
                if s.tile_taps[0].0 != 0 {
                    s.tile_taps[0] = (0, taps.iter().map(|&k| [k, k * k]).collect());
                }
                tiles = Some(nx.max(1));
            }
            Kernel::Tiled { tile, .. } => tiles = Some(tile),
        }
        if let Some(tile) = tiles {
            for first in (0..count).step_by(R) {
                let rows = first..count.min(first + R);
                let slots = self.tile_slots(s, y0 + first, rows.len());
                self.sums_in_pieces::<R>(s, y0, rows, slots, tile);
            }
            return;
        }
        s.c.fill(T::ZERO);
        s.w.fill(T::ZERO);
        // Output row y reads image row y − v through kernel row v; each row takes v in increasing order.
        for first in (0..count).step_by(2) {
            let pair = count.min(first + 2) - first;
            let last = (y0 + first + pair - 1 + HALF).min(ny - 1);
            for yy in ((y0 + first).saturating_sub(HALF)..=last).rev() {
                let lines = (
                    &self.image[yy * nx..][..nx],
                    &self.variance[yy * nx..][..nx],
                );
                let reach = kernel_rows(y0 + first, pair, yy);
                if let [Some(k0), Some(k1)] = reach {
                    apply::<T, 2>(s, lines, [k0, k1], [first, first + 1]);
                } else {
                    // Near the image's top or bottom: the rows one at a time.
                    for (r, k) in reach.iter().enumerate() {
                        if let Some(k) = *k {
                            apply::<T, 1>(s, lines, [k], [first + r]);
                        }
                    }
                }
            }
        }
    }

    /// The (k, k²) table slot in `s.tile_taps` of each of the `count` rows from `top`, building the tables
    /// a tiled kernel lacks (a constant kernel's one table is slot 0).
    fn tile_slots(&self, s: &mut Scratch<T>, top: usize, count: usize) -> [usize; SLOTS] {
        let mut slots = [0; SLOTS];
        if let Kernel::Tiled { kbar, xh, yh, tile } = self.kernel {
            for r in 0..count {
                let tile_row = (top + r) / tile;
                slots[r] = match s.tile_taps.iter().position(|(j, _)| *j == tile_row) {
                    Some(slot) => slot,
                    None => {
                        // A slot the pass's earlier rows do not use.
                        let slot = (0..SLOTS)
                            .find(|j| !slots[..r].contains(j))
                            .expect("a slot per row of a pass");
                        let (key, table) = &mut s.tile_taps[slot];
                        *key = tile_row;
                        tile_row_taps(kbar, xh, yh[top + r], tile, table);
                        slot
                    }
                };
            }
        }
        slots
    }

    /// `sums` for a constant or tiled kernel (tiles `tile` wide; row r's (k, k²) table in
    /// `s.tile_taps[slots[r]]`) over the output rows y0 + `rows` (at most R), one plane at a time, piece by
    /// piece of at most PIECE vectors that never crosses a tile edge. For each image row the rows reach,
    /// each row's taps are summed from zero (the varying path's order) and added to the row's total; where
    /// an image row reaches all R rows (all but the first and last R − 1), those totals stay in registers.
    #[inline(always)]
    fn sums_in_pieces<const R: usize>(
        &self,
        s: &mut Scratch<T>,
        y0: usize,
        rows: std::ops::Range<usize>,
        slots: [usize; SLOTS],
        tile: usize,
    ) {
        let (nx, ny, width) = (self.nx, self.ny, s.xh.len());
        let wide = PIECE * T::LANES;
        // The padded rows and the store buffer below hold up to 8 lanes per vector.
        assert!(T::LANES <= 8 && R <= SLOTS);
        let (first, count) = (rows.start, rows.len());
        let top = y0 + first;
        // Image rows yy = top + j − HALF, j from j_low to j_high; row r reads j through kernel row
        // r + 2 HALF − j, and j reaches rows j − 2 HALF ..= j (those below count).
        let j_low = HALF - HALF.min(top);
        let j_high = (top + count - 1 + HALF).min(ny - 1) + HALF - top;
        let mut x0 = 0;
        while x0 < nx {
            let column = x0 / tile;
            let end = ((column + 1) * tile).min(nx).min(x0 + wide);
            let len = end - x0;
            let mut tables = [&s.tile_taps[slots[0]].1[column * TAPS..][..TAPS]; R];
            for (r, table) in tables.iter_mut().enumerate().take(count) {
                *table = &s.tile_taps[slots[r]].1[column * TAPS..][..TAPS];
            }
            // The piece reads image columns x0 − HALF .. x0 + wide + HALF: in place inside the image, from a
            // zero-padded copy of each row at its edges.
            let interior = x0 >= HALF && x0 + wide + HALF <= nx;
            let reach = wide + 2 * HALF;
            for (plane, (source, out)) in [(self.image, &mut s.c), (self.variance, &mut s.w)]
                .into_iter()
                .enumerate()
            {
                let pads = &mut s.pad[plane * (ROWS + 2 * HALF) * PAD..][..(ROWS + 2 * HALF) * PAD];
                if !interior {
                    let (from, to) = (x0.saturating_sub(HALF), (x0 + wide + HALF).min(nx));
                    for j in j_low..=j_high {
                        let row = &source[(top + j - HALF) * nx..][..nx];
                        let pad = &mut pads[j * PAD..][..reach];
                        pad.fill(T::ZERO);
                        pad[from + HALF - x0..to + HALF - x0].copy_from_slice(&row[from..to]);
                    }
                }
                let mut lines = [&source[..0]; ROWS + 2 * HALF];
                for (j, line) in lines.iter_mut().enumerate().take(j_high + 1).skip(j_low) {
                    *line = if interior {
                        &source[(top + j - HALF) * nx + x0 - HALF..][..reach]
                    } else {
                        &pads[j * PAD..][..reach]
                    };
                }
                let lines = &lines;
                let zero = T::splat(T::ZERO);
                let mut totals = [[zero; PIECE]; R];
                // From the bottom image row up, as the varying path. A pass whose rows all have their 2 HALF + R
                // image rows: the R − 1 at each end (each reaching fewer than R rows) in one loop per end, the
                // middle (each reaching all R) with the totals in registers; otherwise row by row.
                if count == R && j_low == 0 && j_high == 2 * HALF + R - 1 {
                    edge::<T, R, true>(lines, &tables, plane, &mut totals);
                    totals = middle::<T, R>(lines, &tables, plane, R - 1..=2 * HALF, totals);
                    edge::<T, R, false>(lines, &tables, plane, &mut totals);
                } else {
                    for j in (j_low..=j_high).rev() {
                        edge_row::<T, R>(lines[j], &tables, plane, j, count, &mut totals);
                    }
                }
                // Whole vectors where they stay in the row: lanes past the piece's end land where the next
                // piece writes later, or in the row's padding past nx, which nothing reads.
                let mut lanes = [T::ZERO; PIECE * 8];
                for (r, sums) in totals.iter().enumerate().take(count) {
                    let at = (first + r) * width + x0;
                    let direct = x0 + wide <= width;
                    let whole = if direct {
                        &mut out[at..][..wide]
                    } else {
                        &mut lanes[..]
                    };
                    for (v, &sum) in sums.iter().enumerate() {
                        T::store(sum, &mut whole[v * T::LANES..]);
                    }
                    if !direct {
                        out[at..at + len].copy_from_slice(&lanes[..len]);
                    }
                }
            }
            x0 = end;
        }
    }
}

/// Which kernel row (its offset, v·SIDE) of each of the output rows y0 .. y0 + count (a pair at most)
/// reaches image row yy.
#[inline(always)]
fn kernel_rows(y0: usize, count: usize, yy: usize) -> [Option<usize>; 2] {
    std::array::from_fn(|r| {
        let v = (y0 + r) as i64 - yy as i64;
        (r < count && v.abs() <= HALF as i64).then(|| (v + HALF as i64) as usize * SIDE)
    })
}

/// Image row j's chains (`piece`) for the rows it reaches (j − 2 HALF ..= j, those below `count`), each
/// added to its row's total: the path of a pass that is not full (at the image's top and bottom, and a last
/// pass of fewer than R rows).
#[inline(always)]
fn edge_row<T: Real, const R: usize>(
    line: &[T],
    tables: &[&[[T; 2]]; R],
    plane: usize,
    j: usize,
    count: usize,
    totals: &mut [[T::Vector; PIECE]; R],
) {
    let a = j.saturating_sub(2 * HALF);
    let b = (j + 1).min(count);
    // Row a + t's taps; entries past b − a repeat the last (unused).
    let taps: [_; R] = std::array::from_fn(|t| taps_from(tables, (a + t).min(b - 1), j));
    let totals = &mut totals[a..b];
    match b - a {
        4 => add_chains::<T, 4, R>(line, &taps, plane, totals),
        3 => add_chains::<T, 3, R>(line, &taps, plane, totals),
        2 => add_chains::<T, 2, R>(line, &taps, plane, totals),
        1 => add_chains::<T, 1, R>(line, &taps, plane, totals),
        _ => unreachable!("a pass has 1 to 4 rows"),
    }
}

/// `piece` for the first N of `taps`, added to `totals`.
#[inline(always)]
fn add_chains<T: Real, const N: usize, const R: usize>(
    line: &[T],
    taps: &[&[[T; 2]; SIDE]; R],
    plane: usize,
    totals: &mut [[T::Vector; PIECE]],
) {
    let chains = piece::<T, N>(line, std::array::from_fn(|t| taps[t]), plane);
    for (total, chain) in totals.iter_mut().zip(&chains) {
        add_vectors::<T>(total, chain);
    }
}

/// Row r's taps (k, k²) from image row j: kernel row r + 2 HALF − j of its table.
#[inline(always)]
fn taps_from<'a, T>(tables: &[&'a [[T; 2]]], r: usize, j: usize) -> &'a [[T; 2]; SIDE] {
    tables[r][(r + 2 * HALF - j) * SIDE..][..SIDE]
        .try_into()
        .unwrap()
}

/// total += chain, vector by vector.
#[inline(always)]
fn add_vectors<T: Real>(total: &mut [T::Vector; PIECE], chain: &[T::Vector; PIECE]) {
    for v in 0..PIECE {
        total[v] = T::add_lanes(total[v], chain[v]);
    }
}

/// The R − 1 image rows at one end of a full pass (the bottom: j = 2 HALF + 1 + e, reaching rows e + 1 ..
/// R; the top: j = e, reaching rows 0 ..= e; e < R − 1), their chains in one loop over the taps (one row's
/// few chains alone would wait on the FMA's latency), then added to `totals` from the highest j down.
// `tap` indexes every chain's taps and places the loads: a range reads clearer than zipped iterators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn edge<T: Real, const R: usize, const BOTTOM: bool>(
    lines: &[&[T]; ROWS + 2 * HALF],
    tables: &[&[[T; 2]]; R],
    plane: usize,
    totals: &mut [[T::Vector; PIECE]; R],
) {
    let row_of = |e: usize| if BOTTOM { 2 * HALF + 1 + e } else { e };
    let reaches = |e: usize, r: usize| if BOTTOM { r > e } else { r <= e };
    // Chain (e, r)'s taps; pairs where e does not reach r hold row 0's from j = 2 HALF (unused).
    let taps: [[_; R]; R] = std::array::from_fn(|e| {
        std::array::from_fn(|r| match reaches(e, r) {
            true => taps_from(tables, r, row_of(e)),
            false => taps_from(tables, 0, 2 * HALF),
        })
    });
    let mut images = [lines[row_of(0)]; R];
    for e in 0..R - 1 {
        images[e] = lines[row_of(e)];
        assert!(images[e].len() >= PIECE * T::LANES + 2 * HALF);
    }
    let mut chains = [[[T::splat(T::ZERO); PIECE]; R]; R];
    for tap in 0..SIDE {
        let start = 2 * HALF - tap;
        for e in 0..R - 1 {
            let pixels: [T::Vector; PIECE] =
                std::array::from_fn(|v| T::load(&images[e][start + v * T::LANES..]));
            for r in 0..R {
                if reaches(e, r) {
                    let k = T::splat(taps[e][r][tap][plane]);
                    for v in 0..PIECE {
                        chains[e][r][v] = T::fma(k, pixels[v], chains[e][r][v]);
                    }
                }
            }
        }
    }
    for e in (0..R - 1).rev() {
        for r in (0..R).filter(|&r| reaches(e, r)) {
            add_vectors::<T>(&mut totals[r], &chains[e][r]);
        }
    }
}

/// The image rows `js` (from the highest down), each reaching all R rows, added to `totals`, which a
/// local array keeps in registers between them.
#[inline(always)]
fn middle<T: Real, const R: usize>(
    lines: &[&[T]; ROWS + 2 * HALF],
    tables: &[&[[T; 2]]; R],
    plane: usize,
    js: std::ops::RangeInclusive<usize>,
    mut totals: [[T::Vector; PIECE]; R],
) -> [[T::Vector; PIECE]; R] {
    for j in js.rev() {
        let chains = piece::<T, R>(
            lines[j],
            std::array::from_fn(|r| taps_from(tables, r, j)),
            plane,
        );
        for (total, chain) in totals.iter_mut().zip(&chains) {
            add_vectors::<T>(total, chain);
        }
    }
    totals
}

/// A tiled kernel's (k, k²) for every tile column of one tile row at ŷ = `yh` (`[tile column][tap]`) into
/// `table` (its allocation reused: at 10k a table is 1.9 MB), by the varying kernel's own arithmetic at each
/// tile's x̂, so the two give the same bits.
fn tile_row_taps<T: Real>(kbar: &[T], xh: &[T], yh: T, tile: usize, table: &mut Vec<[T; 2]>) {
    // The row terms by component, so the loop over taps below vectorises.
    let (mut a, mut b, mut k3) = ([T::ZERO; TAPS], [T::ZERO; TAPS], [T::ZERO; TAPS]);
    for (t, k) in kbar.chunks_exact(TERMS).enumerate() {
        [a[t], b[t], k3[t]] = tap_row_terms(k, yh);
    }
    let columns = xh.len().div_ceil(tile);
    table.resize(columns * TAPS, [T::ZERO; 2]);
    for (taps, &x) in table.chunks_exact_mut(TAPS).zip(xh.iter().step_by(tile)) {
        let taps: &mut [[T; 2]; TAPS] = taps.try_into().unwrap();
        for t in 0..TAPS {
            let k = x.mul_add(x.mul_add(k3[t], b[t]), a[t]);
            taps[t] = [k, k * k];
        }
    }
}

/// Adds an image row and its variance row through a varying kernel's rows (output row `outs[r]`'s kernel
/// row at offset `kernel_rows[r]`) to the sums of output rows `outs[r]`. Blocks whose taps stay inside the row read it in place; the others
/// read a zero-padded copy of the part they need.
#[inline(always)]
fn apply<T: Real, const N: usize>(
    s: &mut Scratch<T>,
    (row, var_row): (&[T], &[T]),
    kernel_rows: [usize; N],
    outs: [usize; N],
) {
    let (nx, width) = (row.len(), s.xh.len());
    for x0 in (0..width).step_by(BLOCK) {
        // The block reads image columns x0 − HALF .. x0 + BLOCK + HALF (padded index p is column p − HALF).
        let (line, var_line, base) = if x0 >= HALF && x0 + BLOCK + HALF <= nx {
            (row, var_row, x0 - HALF)
        } else {
            let (from, to) = (x0.saturating_sub(HALF), (x0 + BLOCK + HALF).min(nx));
            if from < to {
                s.line[from + HALF..to + HALF].copy_from_slice(&row[from..to]);
                s.var_line[from + HALF..to + HALF].copy_from_slice(&var_row[from..to]);
            }
            (&s.line[..], &s.var_line[..], x0)
        };
        let coefs: [&[[T; 3]]; N] =
            std::array::from_fn(|r| &s.coef[outs[r] * TAPS + kernel_rows[r]..][..SIDE]);
        let sums = block_varying::<T, N>(line, var_line, base, coefs, &s.xh, x0);
        for (r, (cs, ws)) in sums.iter().enumerate() {
            let at = outs[r] * width + x0;
            let c_sum: &mut [T; BLOCK] = (&mut s.c[at..][..BLOCK]).try_into().unwrap();
            for i in 0..BLOCK {
                c_sum[i] = c_sum[i] + cs[i];
            }
            let w_sum: &mut [T; BLOCK] = (&mut s.w[at..][..BLOCK]).try_into().unwrap();
            for i in 0..BLOCK {
                w_sum[i] = w_sum[i] + ws[i];
            }
        }
    }
}

/// One image row's taps over BLOCK output pixels from x0, for N kernel rows (varying
/// kernel), read from `line` whose index `base` is padded index x0. Output x reads padded index x + HALF − u
/// for tap u, so the tap u = j − HALF starts at base + 2 HALF − j.
// `tap` indexes the kernel rows and places the loads: a range reads clearer than zipped iterators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn block_varying<T: Real, const N: usize>(
    line: &[T],
    var_line: &[T],
    base: usize,
    coefs: [&[[T; 3]]; N],
    xh: &[T],
    x0: usize,
) -> [([T; BLOCK], [T; BLOCK]); N] {
    let mut sums = [([T::ZERO; BLOCK], [T::ZERO; BLOCK]); N];
    let xs: &[T; BLOCK] = xh[x0..][..BLOCK].try_into().unwrap();
    for tap in 0..SIDE {
        let start = base + 2 * HALF - tap;
        let r: &[T; BLOCK] = line[start..][..BLOCK].try_into().unwrap();
        let vr: &[T; BLOCK] = var_line[start..][..BLOCK].try_into().unwrap();
        for (row, (c, w)) in sums.iter_mut().enumerate() {
            let [a, b, k3] = coefs[row][tap];
            for i in 0..BLOCK {
                let k = xs[i].mul_add(xs[i].mul_add(k3, b), a);
                c[i] = k.mul_add(r[i], c[i]);
                w[i] = (k * k).mul_add(vr[i], w[i]);
            }
        }
    }
    sums
}

/// Vectors (`Lanes`: 8 float32 or 4 float64) of output pixels in a constant or tiled kernel's piece: per
/// row, a chain and a total of PIECE vectors each (four rows: 24 of AVX-512's 32 registers).
const PIECE: usize = 3;

/// Stride of a piece's zero-padded image rows (`Scratch::pad`): its widest reach, float32's.
const PAD: usize = PIECE * 8 + 2 * HALF;

/// One image row's taps over a piece's PIECE vectors of output pixels for N kernel rows of one plane
/// (`plane` 0: the image through k; 1: the variance through k²), from `image` (from the piece's first
/// output pixel's padded index, PIECE vectors and 2 HALF wide): the sums stay in registers, the taps are
/// broadcast.
// `tap` indexes the kernel rows and places the loads: a range reads clearer than zipped iterators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn piece<T: Real, const N: usize>(
    image: &[T],
    taps: [&[[T; 2]; SIDE]; N],
    plane: usize,
) -> [[T::Vector; PIECE]; N] {
    let mut sums = [[T::splat(T::ZERO); PIECE]; N];
    // Checked once, so the loads below need no bounds test.
    assert!(image.len() >= PIECE * T::LANES + 2 * HALF);
    for tap in 0..SIDE {
        let start = 2 * HALF - tap;
        let pixels: [T::Vector; PIECE] =
            std::array::from_fn(|v| T::load(&image[start + v * T::LANES..]));
        for (row, sum) in sums.iter_mut().enumerate() {
            let k = T::splat(taps[row][tap][plane]);
            for v in 0..PIECE {
                sum[v] = T::fma(k, pixels[v], sum[v]);
            }
        }
    }
    sums
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [−1, 1) (a 64-bit LCG), so the test needs no generator.
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// The direct sum in float64, tap by tap, zero outside the image.
    fn direct(
        nx: usize,
        ny: usize,
        img: &[f64],
        var: &[f64],
        k: &dyn Fn(usize, usize, usize) -> f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let (mut c, mut w) = (vec![0.0; nx * ny], vec![0.0; nx * ny]);
        let h = HALF as i64;
        for y in 0..ny {
            for x in 0..nx {
                for t in 0..TAPS {
                    let (u, v) = ((t % SIDE) as i64 - h, (t / SIDE) as i64 - h);
                    let (xs, ys) = (x as i64 - u, y as i64 - v);
                    if xs < 0 || ys < 0 || xs >= nx as i64 || ys >= ny as i64 {
                        continue;
                    }
                    let at = ys as usize * nx + xs as usize;
                    let kv = k(t, x, y);
                    c[y * nx + x] += kv * img[at];
                    w[y * nx + x] += kv * kv * var[at];
                }
            }
        }
        (c, w)
    }

    /// Both copies (with AVX-512 where the core has it, and without) give the same bits, and match the direct
    /// sum, for widths that are not a multiple of BLOCK, an odd number of rows, and images narrower than the
    /// kernel.
    #[test]
    fn every_copy_matches_the_direct_sum_at_awkward_sizes() {
        let kbar = noise(TAPS * TERMS, 7);
        let taps = noise(TAPS, 8);
        for (nx, ny) in [(173, 37), (BLOCK, 3), (9, 11), (2 * BLOCK + 21, 22)] {
            let img = noise(nx * ny, nx as u64);
            let var: Vec<f64> = noise(nx * ny, 99).iter().map(|v| v.abs()).collect();
            let sx = 2.0 / (nx.max(2) - 1) as f64;
            let sy = 2.0 / (ny.max(2) - 1) as f64;
            let xh: Vec<f64> = (0..nx).map(|x| x as f64 * sx - 1.0).collect();
            let yh: Vec<f64> = (0..ny).map(|y| y as f64 * sy - 1.0).collect();
            let varying = |t: usize, x: usize, y: usize| {
                let k = &kbar[t * TERMS..][..TERMS];
                let (a, b) = (xh[x], yh[y]);
                k[0] + k[1] * a + k[2] * b + k[3] * a * a + k[4] * a * b + k[5] * b * b
            };
            // Tiles of one pixel, narrower than a piece, the seed's 19, and wider than a piece.
            let placed: Vec<(usize, Vec<f64>, Vec<f64>)> = [1, 7, 19, PIECE * 8 + 6]
                .iter()
                .map(|&tile| {
                    let (xt, yt) = tile_centres(&xh, &yh, tile);
                    (tile, xt, yt)
                })
                .collect();
            let constant = |t: usize, _: usize, _: usize| taps[t];
            let mut kernels = vec![
                (
                    Kernel::Varying {
                        kbar: &kbar,
                        xh: &xh,
                        yh: &yh,
                    },
                    Box::new(varying) as Box<dyn Fn(usize, usize, usize) -> f64>,
                ),
                (Kernel::Constant { taps: &taps }, Box::new(constant)),
            ];
            let kbar = &kbar;
            for (tile, xt, yt) in &placed {
                let tiled = move |t: usize, x: usize, y: usize| {
                    let k = &kbar[t * TERMS..][..TERMS];
                    let (a, b) = (xt[x], yt[y]);
                    k[0] + k[1] * a + k[2] * b + k[3] * a * a + k[4] * a * b + k[5] * b * b
                };
                let kernel = Kernel::Tiled {
                    kbar,
                    xh: xt,
                    yh: yt,
                    tile: *tile,
                };
                kernels.push((kernel, Box::new(tiled)));
            }
            for (kernel, k) in kernels {
                let (c_ref, w_ref) = direct(nx, ny, &img, &var, &k);
                let mut runs = Vec::new();
                for avx512 in [false, avx512_here()] {
                    // Poisoned: a row the convolution leaves alone fails.
                    let (mut c, mut w) = (vec![f64::NAN; nx * ny], vec![f64::NAN; nx * ny]);
                    let copy = |_: usize, cs: &[f64], ws: &[f64], [co, wo]: [&mut [f64]; 2]| {
                        co.copy_from_slice(cs);
                        wo.copy_from_slice(ws);
                    };
                    convolve_on(nx, ny, &img, &var, kernel, [&mut c, &mut w], copy, avx512);
                    for i in 0..nx * ny {
                        let scale = 1.0 + c_ref[i].abs();
                        assert!(
                            (c[i] - c_ref[i]).abs() <= 1e-12 * scale,
                            "{nx}x{ny} C at {i}: {} vs {}",
                            c[i],
                            c_ref[i]
                        );
                        assert!(
                            (w[i] - w_ref[i]).abs() <= 1e-12 * (1.0 + w_ref[i]),
                            "{nx}x{ny} W at {i}"
                        );
                    }
                    runs.push((c, w));
                }
                assert_eq!(runs[0], runs[1], "{nx}x{ny}: the two copies differ");
            }
        }
    }

    /// Each pixel's coordinate replaced by its tile centre's (as difference.rs places a tiled kernel).
    fn tile_centres<T: Copy>(xh: &[T], yh: &[T], tile: usize) -> (Vec<T>, Vec<T>) {
        let place = |v: &[T]| {
            (0..v.len())
                .map(|i| v[((i / tile) * tile + tile / 2).min(v.len() - 1)])
                .collect::<Vec<T>>()
        };
        (place(xh), place(yh))
    }

    /// The tiled path (a table of taps per tile, sums in registers) gives the same float32 bits as the
    /// varying path given the tile centres' coordinates, on a field whose edges cut tiles and whose middle
    /// rows make full passes.
    #[test]
    fn tiled_kernel_matches_the_varying_one_bit_for_bit() {
        let (nx, ny) = (3 * BLOCK + 13, 45);
        let kbar: Vec<f32> = noise(TAPS * TERMS, 3).iter().map(|&v| v as f32).collect();
        let img: Vec<f32> = noise(nx * ny, 4).iter().map(|&v| v as f32).collect();
        let var: Vec<f32> = noise(nx * ny, 5).iter().map(|&v| v.abs() as f32).collect();
        let xh: Vec<f32> = (0..nx).map(|x| x as f32 / nx as f32 * 2.0 - 1.0).collect();
        let yh: Vec<f32> = (0..ny).map(|y| y as f32 / ny as f32 * 2.0 - 1.0).collect();
        let copy = |_: usize, cs: &[f32], ws: &[f32], [co, wo]: [&mut [f32]; 2]| {
            co.copy_from_slice(cs);
            wo.copy_from_slice(ws);
        };
        for tile in [5, 19, 64] {
            let (xt, yt) = tile_centres(&xh, &yh, tile);
            let mut planes = Vec::new();
            let varying = Kernel::Varying {
                kbar: &kbar,
                xh: &xt,
                yh: &yt,
            };
            let tiled = Kernel::Tiled {
                kbar: &kbar,
                xh: &xt,
                yh: &yt,
                tile,
            };
            // The varying kernel, then the tiled one on both copies (their passes differ: PASS and
            // PASS_AVX512 rows).
            for (kernel, avx512) in [(varying, false), (tiled, false), (tiled, avx512_here())] {
                let (mut c, mut w) = (vec![f32::NAN; nx * ny], vec![f32::NAN; nx * ny]);
                convolve_on(nx, ny, &img, &var, kernel, [&mut c, &mut w], copy, avx512);
                assert!(c.iter().chain(&w).all(|v| v.is_finite()), "tile {tile}");
                planes.push((c, w));
            }
            assert_eq!(planes[0], planes[1], "tile {tile}");
            assert_eq!(planes[0], planes[2], "tile {tile}, AVX-512");
        }
    }
}
