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
//! Horner in x̂, then one for the image and two for the variance), 2 for a constant one.

use super::difference::{HALF, SIDE, TERMS};
pub use crate::real::Real;
use rayon::prelude::*;

/// Output pixels a row's inner loop keeps in registers: two AVX-512 vectors of float32 per sum.
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
}

/// C = image ⊗ K and W = variance ⊗ K² over an nx × ny image (zero outside it), in parallel over pairs of
/// output rows: `finish(y, c, w, c_out, w_out)` receives output row y's sums (nx each) and that row of the
/// two outputs.
pub fn convolve<T: Real, O: Send, F>(
    nx: usize,
    ny: usize,
    image: &[T],
    variance: &[T],
    kernel: Kernel<'_, T>,
    outputs: [&mut [O]; 2],
    finish: F,
) where
    F: Fn(usize, &[T], &[T], &mut [O], &mut [O]) + Sync,
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
    return std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// `convolve`, with the AVX-512 copy allowed or not (the tests run both).
#[allow(clippy::too_many_arguments)]
fn convolve_on<T: Real, O: Send, F>(
    nx: usize,
    ny: usize,
    image: &[T],
    variance: &[T],
    kernel: Kernel<'_, T>,
    outputs: [&mut [O]; 2],
    finish: F,
    avx512: bool,
) where
    F: Fn(usize, &[T], &[T], &mut [O], &mut [O]) + Sync,
{
    let rows = Rows {
        nx,
        ny,
        image,
        variance,
        kernel,
    };
    let [out_c, out_w] = outputs;
    out_c
        .par_chunks_mut(ROWS * nx)
        .zip(out_w.par_chunks_mut(ROWS * nx))
        .enumerate()
        .for_each_init(
            || Scratch::new(&rows),
            |s, (pair, (c_out, w_out))| {
                let y0 = pair * ROWS;
                #[cfg(target_arch = "x86_64")]
                if avx512 {
                    // SAFETY: `convolve` allows this copy only where it detected the features it is
                    // compiled with.
                    unsafe { rows.sums_avx512(s, y0) };
                } else {
                    rows.sums(s, y0);
                }
                #[cfg(not(target_arch = "x86_64"))]
                {
                    let _ = avx512;
                    rows.sums(s, y0);
                }
                let width = s.xh.len();
                let outs = c_out.chunks_mut(nx).zip(w_out.chunks_mut(nx));
                for (r, (c_row, w_row)) in outs.enumerate() {
                    let (c, w) = (&s.c[r * width..][..nx], &s.w[r * width..][..nx]);
                    finish(y0 + r, c, w, c_row, w_row);
                }
            },
        );
}

/// Output rows computed together: each image row read serves both, so a tap's loads feed twice the
/// arithmetic (one row alone is bound by its unaligned loads).
const ROWS: usize = 2;

/// What every row's sums read.
struct Rows<'a, T> {
    nx: usize,
    ny: usize,
    image: &'a [T],
    variance: &'a [T],
    kernel: Kernel<'a, T>,
}

/// One thread's scratch: the zero-padded image and variance row (only the edge blocks' parts are filled), the kernel's row terms and the sums of each of
/// the ROWS output rows, x̂. Every block is full: the sums run to a multiple of BLOCK, and the padded rows
/// HALF beyond that on each side.
struct Scratch<T> {
    line: Vec<T>,
    var_line: Vec<T>,
    coef: Vec<[T; 3]>,
    c: Vec<T>,
    w: Vec<T>,
    xh: Vec<T>,
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
            coef: vec![[T::ZERO; 3]; ROWS * TAPS],
            c: vec![T::ZERO; ROWS * width],
            w: vec![T::ZERO; ROWS * width],
            xh,
        }
    }
}

impl<T: Real> Rows<'_, T> {
    /// `sums`, compiled with AVX-512.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
    unsafe fn sums_avx512(&self, s: &mut Scratch<T>, y0: usize) {
        self.sums(s, y0)
    }

    /// The sums of output rows y0 .. y0 + ROWS (those below ny) into `s.c` and `s.w`.
    #[inline(always)]
    fn sums(&self, s: &mut Scratch<T>, y0: usize) {
        let (nx, ny) = (self.nx, self.ny);
        let count = ROWS.min(ny - y0);
        // The kernel's row terms at each row's ŷ: the tap is a + x̂(b + x̂ k3). A constant kernel keeps (k, k²).
        for r in 0..count {
            let coef = &mut s.coef[r * TAPS..][..TAPS];
            match self.kernel {
                Kernel::Varying { kbar, yh, .. } => {
                    let yh = yh[y0 + r];
                    for (t, cf) in coef.iter_mut().enumerate() {
                        let k = &kbar[t * TERMS..][..TERMS];
                        *cf = [k[0] + yh * (k[2] + yh * k[5]), k[1] + yh * k[4], k[3]];
                    }
                }
                Kernel::Constant { taps } => {
                    for (cf, &k) in coef.iter_mut().zip(taps) {
                        *cf = [k, k * k, T::ZERO];
                    }
                }
            }
        }
        let varying = matches!(self.kernel, Kernel::Varying { .. });
        s.c.fill(T::ZERO);
        s.w.fill(T::ZERO);
        // Output row y reads image row y − v through kernel row v; each row takes v in increasing order.
        let last = (y0 + count - 1 + HALF).min(ny - 1);
        for yy in (y0.saturating_sub(HALF)..=last).rev() {
            let lines = (
                &self.image[yy * nx..][..nx],
                &self.variance[yy * nx..][..nx],
            );
            // The kernel row of output row y0 + r, if it reaches this image row.
            let kernel_row = |r: usize| {
                let v = (y0 + r) as i64 - yy as i64;
                (r < count && v.abs() <= HALF as i64)
                    .then(|| r * TAPS + (v + HALF as i64) as usize * SIDE)
            };
            let reach: [Option<usize>; ROWS] = std::array::from_fn(kernel_row);
            if reach.iter().all(Option::is_some) {
                let ks = reach.map(Option::unwrap);
                apply::<T, ROWS>(s, lines, varying, ks, std::array::from_fn(|r| r));
            } else {
                // Near the image's top or bottom: the rows one at a time.
                for (r, k) in reach.iter().enumerate() {
                    if let Some(k) = *k {
                        apply::<T, 1>(s, lines, varying, [k], [r]);
                    }
                }
            }
        }
    }
}

/// Adds an image row and its variance row through the kernel rows starting at `s.coef[kernel_rows[r]]` to
/// the sums of output rows `outs[r]`. Blocks whose taps stay inside the row read it in place; the others
/// read a zero-padded copy of the part they need.
#[inline(always)]
fn apply<T: Real, const N: usize>(
    s: &mut Scratch<T>,
    (row, var_row): (&[T], &[T]),
    varying: bool,
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
        let coefs: [&[[T; 3]]; N] = kernel_rows.map(|k| &s.coef[k..][..SIDE]);
        let sums = if varying {
            block_varying::<T, N>(line, var_line, base, coefs, &s.xh, x0)
        } else {
            block_constant::<T, N>(line, var_line, base, coefs)
        };
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

/// The same for a constant kernel: coef[tap] = (k, k², 0).
// `tap` indexes the kernel rows and places the loads: a range reads clearer than zipped iterators.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn block_constant<T: Real, const N: usize>(
    line: &[T],
    var_line: &[T],
    base: usize,
    coefs: [&[[T; 3]]; N],
) -> [([T; BLOCK], [T; BLOCK]); N] {
    let mut sums = [([T::ZERO; BLOCK], [T::ZERO; BLOCK]); N];
    for tap in 0..SIDE {
        let start = base + 2 * HALF - tap;
        let r: &[T; BLOCK] = line[start..][..BLOCK].try_into().unwrap();
        let vr: &[T; BLOCK] = var_line[start..][..BLOCK].try_into().unwrap();
        for (row, (c, w)) in sums.iter_mut().enumerate() {
            let [k, k2, _] = coefs[row][tap];
            for i in 0..BLOCK {
                c[i] = k.mul_add(r[i], c[i]);
                w[i] = k2.mul_add(vr[i], w[i]);
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
            let constant = |t: usize, _: usize, _: usize| taps[t];
            let kernels = [
                (
                    Kernel::Varying {
                        kbar: &kbar,
                        xh: &xh,
                        yh: &yh,
                    },
                    &varying as &dyn Fn(usize, usize, usize) -> f64,
                ),
                (Kernel::Constant { taps: &taps }, &constant),
            ];
            for (kernel, k) in kernels {
                let (c_ref, w_ref) = direct(nx, ny, &img, &var, k);
                let mut runs = Vec::new();
                for avx512 in [false, avx512_here()] {
                    // Poisoned: a row the convolution leaves alone fails.
                    let (mut c, mut w) = (vec![f64::NAN; nx * ny], vec![f64::NAN; nx * ny]);
                    let copy =
                        |_: usize, cs: &[f64], ws: &[f64], co: &mut [f64], wo: &mut [f64]| {
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
}
