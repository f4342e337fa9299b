//! The cubature kernels as jobs of the common backend interface: one single-shot job per iteration (or per
//! tile of regions), so every model runs the same host plumbing. Each job is timed with device events.

use super::mcubes::{IterationSpec, IterationSums, Sampler, BINS};
use super::pagani::RegionEvaluator;
use super::rule::Rule;
use super::{Integrand, PROGRAM};
use crate::backend::{
    Accelerator, BufferSpec, DType, HostSlice, HostVec, JobOutput, KernelJob, Launch, Local,
    Resources, Step, StepArg,
};

/// Work-group width of both kernels (`CUB_GROUP`).
pub const GROUP: usize = 64;
/// Most regions one Evaluate job takes (the host tiles larger iterations).
pub const MAX_REGIONS_PER_JOB: usize = 1 << 22;

/// What the kernels of a run cost: build time of the first job, resources and time of each kernel.
#[derive(Debug, Clone, Default)]
pub struct KernelStats {
    pub build_s: f64,
    pub jobs: u64,
    /// (kernel name, summed device time, resources)
    pub kernels: Vec<(String, f64, Resources)>,
}

impl KernelStats {
    fn record(&mut self, out: &JobOutput) -> f64 {
        if self.jobs == 0 {
            self.build_s = out.build_s;
        }
        self.jobs += 1;
        for step in &out.steps {
            let Some(res) = &step.resources else { continue };
            match self.kernels.iter_mut().find(|k| k.0 == step.name) {
                Some(k) => k.1 += step.median_s,
                None => self
                    .kernels
                    .push((step.name.clone(), step.median_s, res.clone())),
            }
        }
        out.times_s.first().copied().unwrap_or(0.0)
    }
}

fn defines(integrand: Integrand, d: usize) -> Vec<(String, String)> {
    vec![
        ("CUB_INTEGRAND".into(), integrand.id().to_string()),
        ("CUB_DIM".into(), d.to_string()),
    ]
}

fn take_f64(v: HostVec) -> Result<Vec<f64>, String> {
    match v {
        HostVec::F64(x) => Ok(x),
        other => Err(format!("expected a float64 output, got {other:?}")),
    }
}

/// PAGANI's Evaluate on an accelerator.
pub struct DeviceEvaluator<'a> {
    pub device: &'a dyn Accelerator,
    pub integrand: Integrand,
    pub rule: &'a Rule,
    set_of: Vec<i32>,
    table: Vec<f64>,
    params: Vec<f64>,
    max_regions: usize,
    pub stats: KernelStats,
}

impl<'a> DeviceEvaluator<'a> {
    pub fn new(device: &'a dyn Accelerator, integrand: Integrand, rule: &'a Rule) -> Self {
        let mut table: Vec<f64> = rule.weights.iter().flatten().copied().collect();
        table.extend(rule.sigma.iter().flatten());
        table.extend(rule.nu.iter().flatten());
        let d = rule.dim;
        // Tile so the bounds buffer fits the device's largest allocation.
        let per_alloc = (device.info().max_alloc_bytes / (16 * d as u64)).max(1) as usize;
        DeviceEvaluator {
            device,
            integrand,
            rule,
            set_of: rule.set_of.iter().map(|&s| s as i32).collect(),
            table,
            params: integrand.params(d),
            max_regions: MAX_REGIONS_PER_JOB.min(per_alloc),
            stats: KernelStats::default(),
        }
    }
}

impl RegionEvaluator for DeviceEvaluator<'_> {
    fn evaluate(
        &mut self,
        bounds: &[f64],
        est_err: &mut [f64],
        axis: &mut [i32],
    ) -> Result<f64, String> {
        let d = self.rule.dim;
        let mut seconds = 0.0;
        for ((tile, est_tile), axis_tile) in bounds
            .chunks(self.max_regions * 2 * d)
            .zip(est_err.chunks_mut(self.max_regions * 2))
            .zip(axis.chunks_mut(self.max_regions))
        {
            let n = axis_tile.len();
            let job = KernelJob {
                program: &PROGRAM,
                defines: defines(self.integrand, d),
                buffers: vec![
                    BufferSpec::Input(HostSlice::F64(tile)),
                    BufferSpec::Input(HostSlice::F64(&self.rule.points)),
                    BufferSpec::Input(HostSlice::I32(&self.set_of)),
                    BufferSpec::Input(HostSlice::F64(&self.table)),
                    BufferSpec::Input(HostSlice::F64(&self.params)),
                    BufferSpec::Output {
                        dtype: DType::F64,
                        len: 2 * n,
                    },
                    BufferSpec::Output {
                        dtype: DType::I32,
                        len: n,
                    },
                ],
                steps: vec![Step::Launch(Launch {
                    kernel: format!("cub_evaluate_{}_{d}", self.integrand.id()),
                    args: vec![
                        StepArg::Buffer(0),
                        StepArg::Buffer(1),
                        StepArg::Buffer(2),
                        StepArg::Buffer(3),
                        StepArg::Buffer(4),
                        StepArg::I32(self.rule.len() as i32),
                        StepArg::Buffer(5),
                        StepArg::Buffer(6),
                    ],
                    global: n * GROUP,
                    local: Local::Exact(GROUP),
                })],
                warmup: 0,
                repeats: 0,
            };
            let out = self.device.run(&job).map_err(|e| e.to_string())?;
            seconds += self.stats.record(&out);
            let mut outputs = out.outputs.into_iter();
            let values = take_f64(outputs.next().ok_or("Evaluate returned no outputs")?)?;
            est_tile.copy_from_slice(&values);
            match outputs.next() {
                Some(HostVec::I32(a)) => axis_tile.copy_from_slice(&a),
                other => return Err(format!("Evaluate returned no split axes ({other:?})")),
            }
        }
        Ok(seconds)
    }
}

/// m-Cubes' sampling kernel on an accelerator.
pub struct DeviceSampler<'a> {
    pub device: &'a dyn Accelerator,
    pub integrand: Integrand,
    params: Vec<f64>,
    /// lo[d] then width[d].
    domain: Vec<f64>,
    pub stats: KernelStats,
}

impl<'a> DeviceSampler<'a> {
    pub fn new(device: &'a dyn Accelerator, integrand: Integrand, lo: &[f64], hi: &[f64]) -> Self {
        let mut domain = lo.to_vec();
        domain.extend(lo.iter().zip(hi).map(|(a, b)| b - a));
        DeviceSampler {
            device,
            integrand,
            params: integrand.params(lo.len()),
            domain,
            stats: KernelStats::default(),
        }
    }
}

impl DeviceSampler<'_> {
    /// One job: for adapting iterations one launch that fills the bins; for frozen ones one launch per
    /// iteration, each with its own partial sums.
    fn job_run(
        &mut self,
        specs: &[IterationSpec],
        grid: &[f64],
    ) -> Result<Vec<IterationSums>, String> {
        let d = self.domain.len() / 2;
        let l = &specs[0].layout;
        let groups = (l.items() as usize).div_ceil(GROUP);
        let adapt = specs[0].adapt;
        let kind = if adapt { "adapt" } else { "frozen" };
        let mut buffers = vec![
            BufferSpec::Input(HostSlice::F64(grid)),
            BufferSpec::Input(HostSlice::F64(&self.domain)),
            BufferSpec::Input(HostSlice::F64(&self.params)),
            if adapt {
                BufferSpec::Output {
                    dtype: DType::F64,
                    len: d * BINS,
                }
            } else {
                BufferSpec::Scratch {
                    dtype: DType::F64,
                    len: 1,
                }
            },
        ];
        let mut steps = Vec::new();
        if adapt {
            steps.push(Step::Fill { buffer: 3, byte: 0 });
        }
        for spec in specs {
            buffers.push(BufferSpec::Output {
                dtype: DType::F64,
                len: 2 * groups,
            });
            steps.push(Step::Launch(Launch {
                kernel: format!("cub_mcubes_{kind}_{}_{d}", self.integrand.id()),
                args: vec![
                    StepArg::Buffer(0),
                    StepArg::Buffer(1),
                    StepArg::Buffer(2),
                    StepArg::U64(l.chunk),
                    StepArg::U64(l.cubes),
                    StepArg::I32(l.g as i32),
                    StepArg::I32(l.npg as i32),
                    StepArg::U32(spec.iteration),
                    StepArg::U32(spec.seed as u32),
                    StepArg::U32((spec.seed >> 32) as u32),
                    StepArg::F64(spec.scale),
                    StepArg::Buffer(3),
                    StepArg::Buffer(buffers.len() - 1),
                ],
                global: groups * GROUP,
                local: Local::Exact(GROUP),
            }));
        }
        let job = KernelJob {
            program: &PROGRAM,
            defines: defines(self.integrand, d),
            buffers,
            steps,
            warmup: 0,
            repeats: 0,
        };
        let out = self.device.run(&job).map_err(|e| e.to_string())?;
        let per_launch: Vec<f64> = out
            .steps
            .iter()
            .filter(|s| s.resources.is_some())
            .map(|s| s.median_s)
            .collect();
        self.stats.record(&out);
        let mut outputs = out.outputs.into_iter();
        let bins = if adapt {
            take_f64(outputs.next().ok_or("sampling returned no bins")?)?
        } else {
            Vec::new()
        };
        outputs
            .zip(per_launch)
            .map(|(partial, device_s)| {
                let partial = take_f64(partial)?;
                let (mut sum, mut var) = (0.0, 0.0);
                for pair in partial.chunks(2) {
                    sum += pair[0];
                    var += pair[1];
                }
                Ok(IterationSums {
                    sum,
                    var,
                    bins: bins.clone(),
                    device_s,
                })
            })
            .collect()
    }
}

impl Sampler for DeviceSampler<'_> {
    fn sample(&mut self, spec: &IterationSpec, grid: &[f64]) -> Result<IterationSums, String> {
        self.job_run(std::slice::from_ref(spec), grid)?
            .pop()
            .ok_or_else(|| "sampling returned no sums".to_string())
    }

    fn sample_frozen(
        &mut self,
        specs: &[IterationSpec],
        grid: &[f64],
    ) -> Result<Vec<IterationSums>, String> {
        self.job_run(specs, grid)
    }
}
