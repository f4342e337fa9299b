//! The kernel fit's stamp sums on any backend: for each sub-stamp, the weighted Gram matrix of its columns
//! (basis images, background terms, target) and the noise lags of the convolved image's variance
//! (cl/common/imgsub.h, `imgsub_gram_item` and `imgsub_lag_item`). fit.rs makes the columns; this module sums
//! them on the `cpu` model or on a device, in float64.

use super::difference::{program_defines, HALF, PROGRAM, SIDE};
use crate::backend::{BufferSpec, DType, HostSlice, HostVec, Local, Step, StepArg, Target};
use crate::exec::{self, DeviceBudget, RunOptions};
use nalgebra::{DMatrix, DMatrixView};
use rayon::prelude::*;

const TAPS: usize = SIDE * SIDE;

/// Sub-stamps to sum, in the device layout.
#[derive(Debug, Clone)]
pub struct StampBatch {
    pub stamps: usize,
    /// Columns per stamp (M): the last is the target image.
    pub columns: usize,
    /// A stamp is side × side pixels.
    pub side: usize,
    /// [stamp][column][pixel].
    pub data: Vec<f64>,
    /// [stamp][pixel]: 1 / (VI + Σ K² VR).
    pub weight: Vec<f64>,
    /// [stamp][(side + 2 HALF)²]: the convolved image's variance around the stamp.
    pub window: Vec<f64>,
}

/// What a batch sums to: per stamp, the M × M symmetric matrix G_ab = Σ_p w_p col_a col_b (row-major, full)
/// and the lags S(u) = Σ_p w_p VR(p − u) over the 21 × 21 taps.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSums {
    pub gram: Vec<f64>,
    pub lag: Vec<f64>,
}

impl StampBatch {
    pub fn pixels(&self) -> usize {
        self.side * self.side
    }

    fn span(&self) -> usize {
        self.side + 2 * HALF
    }

    /// The upper triangle's (a, b), a ≤ b, in the order of the device's output.
    fn pairs(&self) -> Vec<(usize, usize)> {
        let m = self.columns;
        (0..m).flat_map(|a| (a..m).map(move |b| (a, b))).collect()
    }

    /// Checks the layout (a mismatch is a bug in the caller, not bad input).
    fn check(&self) {
        let (n, m, p) = (self.stamps, self.columns, self.pixels());
        assert_eq!(
            self.data.len(),
            n * m * p,
            "{n} stamps of {m} columns of {p} pixels"
        );
        assert_eq!(self.weight.len(), n * p, "{n} stamps of {p} weights");
        assert_eq!(
            self.window.len(),
            n * self.span() * self.span(),
            "{n} variance windows"
        );
    }

    /// The sums on the host (rayon over stamps): the Gram matrix as one product (W C)ᵀ C per stamp, the lags
    /// by 8-lane partial sums. The order of the additions differs from the devices' (tests/imgsub_subtract.rs
    /// bounds the difference).
    pub fn sums_cpu(&self) -> BatchSums {
        self.check();
        let (m, p, span, side) = (self.columns, self.pixels(), self.span(), self.side);
        let per_stamp: Vec<(Vec<f64>, Vec<f64>)> = (0..self.stamps)
            .into_par_iter()
            .map(|s| {
                let w = &self.weight[s * p..][..p];
                // Column-major p × m: each column a stamp column, as stored (a view: no copy).
                let cols = DMatrixView::from_slice(&self.data[s * m * p..][..m * p], p, m);
                // Wᵀ-scaled columns, stored transposed (m × p) so the product is one matrix multiply.
                let mut weighted_t = DMatrix::<f64>::zeros(m, p);
                for (j, column) in cols.column_iter().enumerate() {
                    for (i, (&c, &wp)) in column.iter().zip(w).enumerate() {
                        weighted_t[(j, i)] = c * wp;
                    }
                }
                let gram = weighted_t * cols; // symmetric m × m
                let var = &self.window[s * span * span..][..span * span];
                let lag = (0..TAPS)
                    .map(|t| {
                        let (u, v) = (t % SIDE, t / SIDE); // u + HALF, v + HALF
                        (0..side)
                            .map(|j| {
                                let row = &var[(j + 2 * HALF - v) * span + 2 * HALF - u..][..side];
                                dot(&w[j * side..][..side], row)
                            })
                            .sum()
                    })
                    .collect();
                (gram.as_slice().to_vec(), lag)
            })
            .collect();
        let (gram, lag) = per_stamp.into_iter().unzip::<_, _, Vec<_>, Vec<_>>();
        BatchSums {
            gram: gram.concat(),
            lag: lag.concat(),
        }
    }

    /// The sums on `target`: the `cpu` model runs [`Self::sums_cpu`]; a device runs the two kernels once
    /// (a stage of the fit), on groups of stamps small enough for its memory (or for `mem_cap` bytes).
    /// Returns the seconds taken: device events, or the host clock on `cpu`.
    pub fn sums_on(
        &self,
        target: &Target,
        mem_cap: Option<u64>,
    ) -> Result<(BatchSums, f64), String> {
        let dev = match target {
            Target::Cpu(_) => {
                let start = std::time::Instant::now();
                let sums = self.sums_cpu();
                return Ok((sums, start.elapsed().as_secs_f64()));
            }
            Target::Device(dev) => dev,
        };
        self.check();
        let (m, p, span) = (self.columns, self.pixels(), self.span());
        let pairs = self.pairs();
        let flat_pairs: Vec<i32> = pairs
            .iter()
            .flat_map(|&(a, b)| [a as i32, b as i32])
            .collect();
        let entries = pairs.len();
        // Bytes per stamp on the device: columns, weights, window, and the two outputs.
        let per_stamp = 8 * (m * p + p + span * span + entries + TAPS) as u64;
        let budget = DeviceBudget::of(dev.info()).capped(mem_cap);
        let fit = (budget.max_alloc / (8 * (m * p) as u64)).min(budget.mem / 2 / per_stamp);
        let group = (fit as usize).clamp(1, self.stamps.max(1));
        let mut jobs = Vec::new();
        let mut first = 0;
        while first < self.stamps {
            let n = group.min(self.stamps - first);
            let buffers = vec![
                BufferSpec::Input(HostSlice::F64(&self.data[first * m * p..][..n * m * p])),
                BufferSpec::Input(HostSlice::F64(&self.weight[first * p..][..n * p])),
                BufferSpec::Input(HostSlice::I32(&flat_pairs)),
                BufferSpec::Input(HostSlice::F64(
                    &self.window[first * span * span..][..n * span * span],
                )),
                BufferSpec::Output {
                    dtype: DType::F64,
                    len: n * entries,
                },
                BufferSpec::Output {
                    dtype: DType::F64,
                    len: n * TAPS,
                },
            ];
            let gram = crate::backend::Launch {
                kernel: "imgsub_gram_f64".into(),
                args: vec![
                    StepArg::Buffer(0),
                    StepArg::Buffer(1),
                    StepArg::Buffer(2),
                    StepArg::I32(n as i32),
                    StepArg::I32(m as i32),
                    StepArg::I32(entries as i32),
                    StepArg::I32(p as i32),
                    StepArg::Buffer(4),
                ],
                global: n * entries,
                local: Local::Prefer(128),
            };
            let lag = crate::backend::Launch {
                kernel: "imgsub_lag_f64".into(),
                args: vec![
                    StepArg::Buffer(3),
                    StepArg::Buffer(1),
                    StepArg::I32(n as i32),
                    StepArg::I32(self.side as i32),
                    StepArg::Buffer(5),
                ],
                global: n * TAPS,
                local: Local::Prefer(128),
            };
            let steps = vec![Step::Launch(gram), Step::Launch(lag)];
            jobs.push(RunOptions::single_shot().job(
                &PROGRAM,
                program_defines(dev.info().is_gpu),
                buffers,
                steps,
            ));
            first += n;
        }
        let run = exec::run_plan(dev.as_ref(), &jobs, 0)?;
        let mut sums = BatchSums {
            gram: Vec::with_capacity(self.stamps * m * m),
            lag: Vec::with_capacity(self.stamps * TAPS),
        };
        for outputs in run.outputs {
            let [HostVec::F64(upper), HostVec::F64(lag)] = &outputs[..] else {
                return Err("the stamp sums came back in an unexpected form".into());
            };
            for stamp in upper.chunks_exact(entries) {
                let mut gram = vec![0.0; m * m];
                for (&(a, b), &g) in pairs.iter().zip(stamp) {
                    gram[a * m + b] = g;
                    gram[b * m + a] = g;
                }
                sums.gram.extend(gram);
            }
            sums.lag.extend_from_slice(lag);
        }
        Ok((sums, run.times.median))
    }
}

/// Σ a_i b_i in 8 independent partial sums, so the loop vectorises.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0.0; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for k in 0..8 {
            lanes[k] += x[k] * y[k];
        }
    }
    lanes.iter().sum::<f64>() + tail
}
