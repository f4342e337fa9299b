//! Device data for the Lomb-Scargle kernels: 64-bit fixed-point times and frequencies, curve records, bands.
//!
//! Mirrors cl/common/lombscargle.h (record layout, LS_GROUP). A band is a run of curve pieces whose powers fit
//! one buffer; a curve longer than a band is split into pieces (top-k is then merged on the host).

use super::{FrequencyGrid, Prepared};

/// Work-items per work-group and frequencies per group (LS_GROUP in the header).
pub const GROUP: usize = 256;
/// u32 per curve record (LS_CURVE_STRIDE).
pub const CURVE_STRIDE: usize = 12;
/// Largest k of the top-k kernel (LS_TOPK_MAX).
pub const TOPK_MAX: usize = 8;
/// Frequencies per band: 256 MiB of f32 power (512 MiB f64), below every device's single-allocation limit.
pub const BAND_FREQUENCIES: usize = 1 << 26;

/// t = T 2^-time_bits and f = F 2^-freq_bits with time_bits + freq_bits = 96, so bits 64..95 of T F are
/// frac(f t) in units of 2^-32 cycles (bits 32..95 in units of 2^-64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedPoint {
    pub time_bits: u32,
    pub freq_bits: u32,
}

impl FixedPoint {
    /// The split for frequencies up to `f_max`, (shifted) times up to `t_max` and uniform grids of up to
    /// `n_f` steps. F takes as many bits as fit (F < 2^63), unless that leaves the time's quantisation
    /// (f_max 2^-(time_bits+1)) larger than the frequency's accumulated over a grid (t_max n_f 2^-(freq_bits+1)):
    /// then the split balances the two (a low f_max over a long span). Refuses spans whose phase would lose
    /// more than 2^-34 cycles to the quantisation of t and f.
    pub fn for_range(f_max: f64, t_max: f64, n_f: usize) -> Result<FixedPoint, String> {
        if !(f_max > 0.0 && f_max.is_finite()) {
            return Err(format!(
                "maximum frequency {f_max} is not positive and finite"
            ));
        }
        let t_max = t_max.max(f64::MIN_POSITIVE);
        let most = 63 - f_max.log2().ceil() as i64;
        let balanced = (48.0 + 0.5 * (t_max * (n_f as f64 + 1.0) / f_max).log2()).ceil() as i64;
        let freq_bits = most.min(balanced).clamp(1, 95) as u32;
        let time_bits = 96 - freq_bits;
        // Quantisation of t and f each moves the phase by at most t_max 2^-(freq_bits+1) + f_max 2^-(time_bits+1).
        let error =
            t_max * (-(freq_bits as f64) - 1.0).exp2() + f_max * (-(time_bits as f64) - 1.0).exp2();
        if t_max * (time_bits as f64).exp2() >= 2f64.powi(63) || error > 2f64.powi(-34) {
            return Err(format!(
                "time span {t_max} d with frequencies up to {f_max} /d ({:.3e} cycles) is beyond the 64-bit fixed-point phase",
                t_max * f_max
            ));
        }
        Ok(FixedPoint {
            time_bits,
            freq_bits,
        })
    }
    pub fn time(&self, t: f64) -> u64 {
        (t * (self.time_bits as f64).exp2()).round() as u64
    }
    pub fn frequency(&self, f: f64) -> u64 {
        (f * (self.freq_bits as f64).exp2()).round() as u64
    }
}

/// frac(f t) rounded to 2^-32 cycles, as `ls_phase32` in the header.
#[inline(always)]
pub fn phase_fixed(t: u64, f: u64) -> u32 {
    let p = (t as u128 * f as u128) >> 32;
    ((p as u64).wrapping_add(0x8000_0000) >> 32) as u32
}

/// Frequencies [k0, k1) of one curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub curve: usize,
    pub k0: usize,
    pub k1: usize,
}

/// One launch's worth of work, with everything the kernels read.
#[derive(Debug, Clone)]
pub struct Band {
    pub pieces: Vec<Piece>,
    pub records: Vec<u32>,
    /// Global point range of the band's curves (times and weights are sliced to it).
    pub points: std::ops::Range<usize>,
    /// Global offset of the band's first power in the problem's flattened output.
    pub power_start: usize,
    pub frequencies: usize,
    pub groups: usize,
    /// Given-grid frequencies (F lo, hi) per power of the band; two zeros for uniform grids.
    pub given: Vec<u32>,
}

/// Cuts the curves into bands of at most `limit` frequencies. `point_start[c]` is curve c's first point in
/// the concatenated arrays.
pub fn bands(
    prepared: &[Prepared],
    grids: &[&FrequencyGrid],
    fixed: FixedPoint,
    limit: usize,
) -> Vec<Band> {
    let limit = limit.max(GROUP) / GROUP * GROUP;
    let mut pieces_of_bands: Vec<Vec<Piece>> = vec![Vec::new()];
    let mut used = 0usize;
    for (c, grid) in grids.iter().enumerate() {
        let mut k0 = 0;
        while k0 < grid.len() {
            if used >= limit {
                pieces_of_bands.push(Vec::new());
                used = 0;
            }
            let k1 = grid.len().min(k0 + (limit - used));
            pieces_of_bands
                .last_mut()
                .expect("one band")
                .push(Piece { curve: c, k0, k1 });
            used += (k1 - k0).div_ceil(GROUP) * GROUP;
            k0 = k1;
        }
    }
    let mut starts = Vec::with_capacity(prepared.len() + 1);
    let mut acc = 0;
    for p in prepared {
        starts.push(acc);
        acc += p.t.len();
    }
    starts.push(acc);
    let mut power_start = 0;
    let mut out = Vec::new();
    for pieces in pieces_of_bands.into_iter().filter(|p| !p.is_empty()) {
        let first = starts[pieces[0].curve];
        let last = starts[pieces.last().expect("nonempty").curve + 1];
        let mut records = Vec::with_capacity(pieces.len() * CURVE_STRIDE);
        let (mut offset, mut groups) = (0usize, 0usize);
        let mut given = Vec::new();
        let any_given = pieces
            .iter()
            .any(|p| matches!(grids[p.curve], FrequencyGrid::Given(_)));
        for p in &pieces {
            let grid = grids[p.curve];
            let (f0, df) = match grid {
                FrequencyGrid::Uniform { df, .. } => {
                    (fixed.frequency(grid.frequency(p.k0)), fixed.frequency(*df))
                }
                FrequencyGrid::Given(_) => (0, 0),
            };
            let nf = p.k1 - p.k0;
            records.extend([
                (starts[p.curve] - first) as u32,
                prepared[p.curve].t.len() as u32,
                f0 as u32,
                (f0 >> 32) as u32,
                df as u32,
                (df >> 32) as u32,
                nf as u32,
                offset as u32,
                groups as u32,
                u32::from(matches!(grid, FrequencyGrid::Given(_))),
                0,
                0,
            ]);
            if any_given {
                for k in p.k0..p.k1 {
                    let f = match grid {
                        FrequencyGrid::Given(_) => fixed.frequency(grid.frequency(k)),
                        FrequencyGrid::Uniform { .. } => 0,
                    };
                    given.extend([f as u32, (f >> 32) as u32]);
                }
            }
            offset += nf;
            groups += nf.div_ceil(GROUP);
        }
        if given.is_empty() {
            given = vec![0, 0];
        }
        out.push(Band {
            pieces,
            records,
            points: first..last,
            power_start,
            frequencies: offset,
            groups,
            given,
        });
        power_start += offset;
    }
    out
}

/// The Stockham radices of the device NUFFT's fine grid: ring_fft.h's factors, a radix 2 or 4 moved to the
/// front (the first pass stores with a stride of its radix).
pub fn nufft_radices(fine: usize) -> Vec<usize> {
    let mut radices = crate::workload::sht::device::fft_radices(fine);
    if let Some(i) = radices.iter().position(|&p| p == 2 || p == 4) {
        let small = radices.remove(i);
        radices.insert(0, small);
    }
    radices
}

/// The host's part of one curve's NUFFT on a device (cl/common/ls_nufft.h): the fine grid and kernel, the
/// points sorted by first cell for both position sets (u for the sums at f, 2u for those at 2f), the
/// quadrature of the kernel's transform, and the fixed-point frequencies. O(N + n) host work per curve.
pub struct NufftTables {
    pub curve: usize,
    pub modes: usize,
    pub fine: usize,
    pub width: usize,
    pub beta: f64,
    /// Point indices by first cell, where each cell's points start (n + 1 entries), and each point's offset
    /// from its kernel's edge to its first cell; [0] for u, [1] for 2u.
    pub order: [Vec<u32>; 2],
    pub start: [Vec<u32>; 2],
    pub offset: [Vec<f64>; 2],
    /// (z, weight·φ(z)) pairs.
    pub nodes: Vec<f64>,
    /// Argument step π w / n of the kernel transform, and 2/w.
    pub a: f64,
    pub scale: f64,
    /// f_c = f0 + ⌊M/2⌋ df in fixed point; f0 and df (the direct fix-up forms f0 + k df in float64).
    pub centre: u64,
    pub f0: f64,
    pub df: f64,
    /// Bounds on the sums' errors: Σ|wy| and Σ w times the kernel's sum error.
    pub e_y: f64,
    pub e_w: f64,
    /// Stockham radices of the fine grid's FFT, in pass order.
    pub radices: Vec<usize>,
    /// A one-curve record for the top-k kernel (nf, offset 0).
    pub record: Vec<u32>,
}

impl NufftTables {
    pub fn new(
        curve: usize,
        prepared: &Prepared,
        grid: &FrequencyGrid,
        fixed: FixedPoint,
        sum_tolerance: f64,
    ) -> Result<NufftTables, String> {
        let FrequencyGrid::Uniform { f0, df, n: modes } = *grid else {
            return Err("the nufft method needs a uniform frequency grid".into());
        };
        let (fine, kernel) = super::nufft::geometry(modes, sum_tolerance)?;
        if fine >= (i32::MAX as usize) / 6 || prepared.t.len() >= u32::MAX as usize {
            return Err(format!(
                "{modes} frequencies need a fine grid of {fine} cells: beyond the device kernels' 32-bit indices"
            ));
        }
        let width = kernel.width;
        let points = prepared.t.len();
        let mut cells = [vec![0u32; points], vec![0u32; points]];
        let mut offset = [vec![0.0; points], vec![0.0; points]];
        for (j, &t) in prepared.t.iter().enumerate() {
            let (u, u2) = super::nufft::positions(t, df, fine);
            for (set, u) in [u, u2].into_iter().enumerate() {
                let (l0, s) = super::nufft::first_cell(u, width);
                cells[set][j] = l0.rem_euclid(fine as i64) as u32;
                offset[set][j] = s;
            }
        }
        // Counting sort by first cell: start[c] is where cell c's points begin in `order`.
        let sort = |cells: &[u32]| {
            let mut start = vec![0u32; fine + 1];
            for &c in cells {
                start[c as usize + 1] += 1;
            }
            for c in 0..fine {
                start[c + 1] += start[c];
            }
            let mut next = start.clone();
            let mut order = vec![0u32; cells.len()];
            for (j, &c) in cells.iter().enumerate() {
                order[next[c as usize] as usize] = j as u32;
                next[c as usize] += 1;
            }
            (order, start)
        };
        let (o0, s0) = sort(&cells[0]);
        let (o1, s1) = sort(&cells[1]);
        let sum_error = super::nufft::sum_error(width);
        let mut record = vec![0u32; CURVE_STRIDE];
        record[6] = modes as u32;
        Ok(NufftTables {
            curve,
            modes,
            fine,
            width,
            beta: kernel.beta,
            order: [o0, o1],
            start: [s0, s1],
            offset,
            nodes: super::nufft::quadrature(&kernel)
                .into_iter()
                .flat_map(|(z, w)| [z, w])
                .collect(),
            a: std::f64::consts::PI * width as f64 / fine as f64,
            scale: 2.0 / width as f64,
            centre: fixed.frequency(f0 + (modes / 2) as f64 * df),
            f0,
            df,
            e_y: sum_error * prepared.wy.iter().map(|v| v.abs()).sum::<f64>(),
            e_w: sum_error,
            radices: nufft_radices(fine),
            record,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_phase_is_exact_mod_one() {
        let fixed = FixedPoint::for_range(1300.0, 150.0, 1_528_064).unwrap();
        assert_eq!(fixed.freq_bits, 52);
        assert_eq!(fixed.freq_bits + fixed.time_bits, 96);
        for &(t, f) in &[(149.37, 1273.1), (0.5, 0.01), (77.7, 5.5555)] {
            let p = phase_fixed(fixed.time(t), fixed.frequency(f)) as f64 / 4_294_967_296.0;
            let x = t * f;
            let exact = x - x.floor();
            let d = (p - exact).abs().min(1.0 - (p - exact).abs());
            assert!(d < 1e-9, "t {t} f {f}: {p} vs {exact}");
        }
    }

    #[test]
    fn too_long_a_span_is_refused() {
        assert!(FixedPoint::for_range(1e4, 1e9, 1000).is_err());
        assert!(FixedPoint::for_range(0.0, 1.0, 10).is_err());
        // A low maximum frequency over a long span moves bits to the times instead of refusing.
        let low = FixedPoint::for_range(0.5, 73.63, 4).unwrap();
        assert!(low.time_bits > 40, "{low:?}");
    }
}
