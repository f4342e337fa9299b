//! The cubature kernels as jobs of the common backend interface, so every model runs the same host
//! plumbing: single-shot jobs, each timed with device events. PAGANI's regions stay on the device between
//! jobs (resident buffers); m-Cubes runs one job per batch of iterations.

use super::mcubes::{IterationSpec, IterationSums, Sampler, BINS};
use super::pagani::{
    initial_regions, ChunkProbe, ChunkSums, Classified, Evaluated, Probe, Reclassify, RegionStore,
    CHUNK, CHUNK_SUMS, LANES,
};
use super::rule::Rule;
use super::{Integrand, PROGRAM};
use crate::backend::{
    resident_id, Accelerator, BufferSpec, DType, HostSlice, HostVec, JobOutput, KernelJob, Launch,
    Local, ReadBack, Resources, Step, StepArg,
};

/// Work-group width of Evaluate and of the m-Cubes kernels (`CUB_GROUP`).
pub const GROUP: usize = 64;

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

/// Most regions one Evaluate launch takes (a job launches tiles of this many with an offset).
pub const MAX_REGIONS_PER_LAUNCH: usize = 1 << 22;

/// PAGANI's region list on an accelerator: every per-region array stays on the device
/// ([`BufferSpec::Resident`]), and each iteration is two jobs (Evaluate + refine + relative classification;
/// split) plus, when the host asks for them, re-classifications and threshold probes. Only the chunk sums
/// ([`ChunkSums`], a few bytes per 4,096 regions) come back to the host.
pub struct DeviceRegions<'a> {
    device: &'a dyn Accelerator,
    integrand: Integrand,
    rule: &'a Rule,
    /// The rule's points axis-major (`points[j * n_points + p]`: coalesced reads in Evaluate).
    points: Vec<f64>,
    set_of: Vec<i32>,
    table: Vec<f64>,
    params: Vec<f64>,
    /// Initial grid, uploaded by the first Evaluate.
    initial: Option<Vec<f64>>,
    /// Resident buffer ids.
    bounds: [u64; 2],
    rule_ids: [u64; 4],
    est_err: u64,
    axis: u64,
    parents: u64,
    est: u64,
    err: u64,
    active: u64,
    /// Which of `bounds` holds the current list, how many regions it has, and whether they have parents.
    current: usize,
    n: usize,
    has_parents: bool,
    rule_uploaded: bool,
    device_s: f64,
    pub stats: KernelStats,
}

impl<'a> DeviceRegions<'a> {
    /// The initial uniform grid of [lo, hi] for `integrand` on `device`.
    pub fn new(
        device: &'a dyn Accelerator,
        integrand: Integrand,
        rule: &'a Rule,
        lo: &[f64],
        hi: &[f64],
    ) -> Self {
        let mut table: Vec<f64> = rule.weights.iter().flatten().copied().collect();
        table.extend(rule.sigma.iter().flatten());
        table.extend(rule.nu.iter().flatten());
        let initial = initial_regions(lo, hi);
        let id = resident_id;
        let (d, n_points) = (rule.dim, rule.len());
        let points = (0..d * n_points)
            .map(|k| rule.points[(k % n_points) * d + k / n_points])
            .collect();
        DeviceRegions {
            device,
            integrand,
            rule,
            points,
            set_of: rule.set_of.iter().map(|&s| s as i32).collect(),
            table,
            params: integrand.params(rule.dim),
            n: initial.len() / (2 * rule.dim),
            initial: Some(initial),
            bounds: [id(), id()],
            rule_ids: [id(), id(), id(), id()],
            est_err: id(),
            axis: id(),
            parents: id(),
            est: id(),
            err: id(),
            active: id(),
            current: 0,
            has_parents: false,
            rule_uploaded: false,
            device_s: 0.0,
            stats: KernelStats::default(),
        }
    }

    fn resident<'b>(
        id: u64,
        dtype: DType,
        len: usize,
        init: Option<HostSlice<'b>>,
    ) -> BufferSpec<'b> {
        BufferSpec::Resident {
            id,
            dtype,
            len: len.max(1),
            init,
            read_back: ReadBack::No,
        }
    }

    /// A rule table that stays on the device: uploaded by the first job only.
    fn table(id: u64, data: HostSlice<'_>, upload: bool) -> BufferSpec<'_> {
        Self::resident(id, data.dtype(), data.len(), upload.then_some(data))
    }

    fn chunks(&self) -> usize {
        self.n.div_ceil(CHUNK)
    }

    fn chunk_launch(kernel: &str, args: Vec<StepArg>, chunks: usize) -> Step {
        Step::Launch(Launch {
            kernel: kernel.into(),
            args,
            global: chunks * LANES,
            local: Local::Exact(LANES),
        })
    }

    /// Runs a single-shot job.
    fn run(&self, buffers: Vec<BufferSpec>, steps: Vec<Step>) -> Result<JobOutput, String> {
        let job = KernelJob {
            program: &PROGRAM,
            defines: defines(self.integrand, self.rule.dim),
            buffers,
            steps,
            warmup: 0,
            repeats: 0,
        };
        self.device.run(&job).map_err(|e| {
            let resident: usize = job
                .buffers
                .iter()
                .filter(|b| matches!(b, BufferSpec::Resident { .. }))
                .map(|b| b.bytes())
                .sum();
            format!(
                "{e} (PAGANI job on {} regions, {} MiB of resident buffers in this job)",
                self.n,
                resident >> 20
            )
        })
    }

    /// Records a job's kernels and device time and returns its outputs.
    fn record(&mut self, out: JobOutput) -> Vec<HostVec> {
        self.device_s += self.stats.record(&out);
        out.outputs
    }

    /// The `sums`/`counts` outputs of the classification kernels.
    fn chunk_outputs(chunks: usize) -> [BufferSpec<'static>; 2] {
        [
            BufferSpec::Output {
                dtype: DType::F64,
                len: CHUNK_SUMS * chunks,
            },
            BufferSpec::Output {
                dtype: DType::U32,
                len: 2 * chunks,
            },
        ]
    }

    /// Decodes the `sums`/`counts` outputs of the classification kernels (CHUNK_SUMS f64 and 2 u32 per chunk).
    fn chunk_sums(outputs: Vec<HostVec>) -> Result<Vec<ChunkSums>, String> {
        let mut it = outputs.into_iter();
        let sums = take_f64(it.next().ok_or("classification returned no sums")?)?;
        let Some(HostVec::U32(counts)) = it.next() else {
            return Err("classification returned no counts".into());
        };
        Ok(sums
            .chunks(CHUNK_SUMS)
            .zip(counts.chunks(2))
            .map(|(s, c)| ChunkSums {
                est: s[0],
                err: s[1],
                finished_est: s[2],
                finished_err: s[3],
                abs_est: s[4],
                finished_abs_est: s[5],
                active: c[0],
                bad: c[1],
            })
            .collect())
    }
}

impl Drop for DeviceRegions<'_> {
    fn drop(&mut self) {
        let mut ids = vec![
            self.est_err,
            self.axis,
            self.parents,
            self.est,
            self.err,
            self.active,
        ];
        ids.extend(self.bounds);
        ids.extend(self.rule_ids);
        self.device.release(&ids);
    }
}

impl RegionStore for DeviceRegions<'_> {
    fn regions(&self) -> usize {
        self.n
    }

    fn evaluate(&mut self, epsrel: f64) -> Result<Evaluated, String> {
        let (d, n, chunks) = (self.rule.dim, self.n, self.chunks());
        let initial = self.initial.take();
        let upload = !self.rule_uploaded;
        let rule = self.rule;
        let [points_id, set_id, table_id, params_id] = self.rule_ids;
        let mut buffers = vec![
            Self::resident(
                self.bounds[self.current],
                DType::F64,
                n * 2 * d,
                initial.as_deref().map(HostSlice::F64),
            ),
            Self::table(points_id, HostSlice::F64(&self.points), upload),
            Self::table(set_id, HostSlice::I32(&self.set_of), upload),
            Self::table(table_id, HostSlice::F64(&self.table), upload),
            Self::table(params_id, HostSlice::F64(&self.params), upload),
            Self::resident(self.est_err, DType::F64, 2 * n, None),
            Self::resident(self.axis, DType::I32, n, None),
            Self::resident(self.parents, DType::F64, n / 2, None),
            Self::resident(self.est, DType::F64, n, None),
            Self::resident(self.err, DType::F64, n, None),
            Self::resident(self.active, DType::I32, n, None),
        ];
        buffers.extend(Self::chunk_outputs(chunks));
        // Poison what Evaluate writes (NaN estimates, axis −1): a region it skips is counted as bad.
        let mut steps = vec![
            Step::Fill {
                buffer: 5,
                byte: 0xFF,
            },
            Step::Fill {
                buffer: 6,
                byte: 0xFF,
            },
        ];
        for first in (0..n).step_by(MAX_REGIONS_PER_LAUNCH) {
            let tile = MAX_REGIONS_PER_LAUNCH.min(n - first);
            steps.push(Step::Launch(Launch {
                kernel: format!("cub_evaluate_{}_{d}", self.integrand.id()),
                args: vec![
                    StepArg::Buffer(0),
                    StepArg::Buffer(1),
                    StepArg::Buffer(2),
                    StepArg::Buffer(3),
                    StepArg::Buffer(4),
                    StepArg::I32(rule.len() as i32),
                    StepArg::U64(first as u64),
                    StepArg::Buffer(5),
                    StepArg::Buffer(6),
                ],
                global: tile * GROUP,
                local: Local::Exact(GROUP),
            }));
        }
        steps.push(Self::chunk_launch(
            "cub_refine_classify",
            vec![
                StepArg::Buffer(5),
                StepArg::Buffer(6),
                StepArg::Buffer(7),
                StepArg::U64(n as u64),
                StepArg::I32(self.has_parents as i32),
                StepArg::F64(epsrel),
                StepArg::Buffer(8),
                StepArg::Buffer(9),
                StepArg::Buffer(10),
                StepArg::Buffer(11),
                StepArg::Buffer(12),
            ],
            chunks,
        ));
        let out = self.run(buffers, steps)?;
        let outputs = self.record(out);
        self.rule_uploaded = true;
        Ok(Evaluated::from_chunks(&Self::chunk_sums(outputs)?))
    }

    fn reclassify(&mut self, rule: Reclassify) -> Result<Classified, String> {
        let (n, chunks) = (self.n, self.chunks());
        let (mode, tau) = match rule {
            Reclassify::All => (1, 0.0),
            Reclassify::Threshold(tau) => (2, tau),
        };
        let mut buffers = vec![
            Self::resident(self.est, DType::F64, n, None),
            Self::resident(self.err, DType::F64, n, None),
            Self::resident(self.active, DType::I32, n, None),
        ];
        buffers.extend(Self::chunk_outputs(chunks));
        let args = vec![
            StepArg::Buffer(0),
            StepArg::Buffer(1),
            StepArg::Buffer(2),
            StepArg::U64(n as u64),
            StepArg::I32(mode),
            StepArg::F64(tau),
            StepArg::Buffer(3),
            StepArg::Buffer(4),
        ];
        let out = self.run(
            buffers,
            vec![Self::chunk_launch("cub_reclassify", args, chunks)],
        )?;
        let outputs = self.record(out);
        Ok(Classified::from_chunks(&Self::chunk_sums(outputs)?))
    }

    fn probe(&mut self, tau: f64) -> Result<Probe, String> {
        let (n, chunks) = (self.n, self.chunks());
        let buffers = vec![
            Self::resident(self.err, DType::F64, n, None),
            Self::resident(self.active, DType::I32, n, None),
            BufferSpec::Output {
                dtype: DType::F64,
                len: 3 * chunks,
            },
            BufferSpec::Output {
                dtype: DType::U32,
                len: chunks,
            },
        ];
        let args = vec![
            StepArg::Buffer(0),
            StepArg::Buffer(1),
            StepArg::U64(n as u64),
            StepArg::F64(tau),
            StepArg::Buffer(2),
            StepArg::Buffer(3),
        ];
        let out = self.run(buffers, vec![Self::chunk_launch("cub_probe", args, chunks)])?;
        let mut outputs = self.record(out).into_iter();
        let sums = take_f64(outputs.next().ok_or("probe returned no sums")?)?;
        let Some(HostVec::U32(kept)) = outputs.next() else {
            return Err("probe returned no counts".into());
        };
        let chunks: Vec<ChunkProbe> = sums
            .chunks(3)
            .zip(kept)
            .map(|(s, kept)| ChunkProbe {
                finished_err: s[0],
                min: s[1],
                max: s[2],
                kept,
            })
            .collect();
        Ok(Probe::from_chunks(&chunks))
    }

    fn split(&mut self, classified: &Classified) -> Result<(), String> {
        let (d, n, chunks) = (self.rule.dim, self.n, self.chunks());
        let m = classified.n_active as usize;
        if 2 * m > u32::MAX as usize {
            return Err(format!(
                "{} regions after the split exceed the kernels' 32-bit offsets",
                2 * m
            ));
        }
        let mut offsets = Vec::with_capacity(chunks);
        let mut run = 0u32;
        for &c in &classified.chunk_active {
            offsets.push(run);
            run += c;
        }
        let next = 1 - self.current;
        let buffers = vec![
            Self::resident(self.bounds[self.current], DType::F64, n * 2 * d, None),
            Self::resident(self.axis, DType::I32, n, None),
            Self::resident(self.est, DType::F64, n, None),
            Self::resident(self.active, DType::I32, n, None),
            BufferSpec::Input(HostSlice::U32(&offsets)),
            Self::resident(self.bounds[next], DType::F64, 2 * m * 2 * d, None),
            Self::resident(self.parents, DType::F64, m, None),
        ];
        let args = vec![
            StepArg::Buffer(0),
            StepArg::Buffer(1),
            StepArg::Buffer(2),
            StepArg::Buffer(3),
            StepArg::Buffer(4),
            StepArg::U64(n as u64),
            StepArg::U64(m as u64),
            StepArg::I32(d as i32),
            StepArg::Buffer(5),
            StepArg::Buffer(6),
        ];
        // Poison what the split writes: a region it skips must not pass as a stale finite one from an
        // earlier iteration (Evaluate counts non-finite bounds as bad; NaN parents make the sums NaN).
        let steps = vec![
            Step::Fill {
                buffer: 5,
                byte: 0xFF,
            },
            Step::Fill {
                buffer: 6,
                byte: 0xFF,
            },
            Self::chunk_launch("cub_split", args, chunks),
        ];
        let out = self.run(buffers, steps)?;
        self.record(out);
        self.current = next;
        self.n = 2 * m;
        self.has_parents = true;
        Ok(())
    }

    fn device_seconds(&self) -> f64 {
        self.device_s
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
