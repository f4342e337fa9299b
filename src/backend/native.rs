//! Types shared by the two C++-hosted models (CUDA and SYCL).
//!
//! A [`KernelJob`](super::KernelJob) is flattened into a [`ffi::NativeJob`], lists of [`ffi::NativeBuffer`],
//! [`ffi::NativeStep`] and [`ffi::NativeArg`], so that each model's C++ host plumbing is written once and knows
//! nothing about workloads. Host memory is named by address: inputs are uploaded from the caller's slices and
//! outputs copied into freshly allocated vectors, with no copy in between (a 10k image pair is 1.6 GB). The
//! C++ side fills a [`ffi::NativeOutcome`].

#[cxx::bridge(namespace = "astroport")]
pub mod ffi {
    /// One device buffer of the job.
    #[derive(Debug, Clone)]
    pub struct NativeBuffer {
        /// 0 = input (uploaded from `host`), 1 = output (poisoned, copied to `host`), 2 = scratch
        /// (poisoned), 3 = resident (kept on the device under `resident_id` across jobs; `init_count`
        /// elements uploaded from `host` first, or with `read_back` copied to `host` after the job).
        pub role: u8,
        /// Element type: 0 = i32, 1 = u32, 2 = f32, 3 = f64, 4 = u64.
        pub dtype: u8,
        /// Number of elements.
        pub count: u64,
        /// Inputs and resident initial data: address of the host data; outputs and resident buffers read
        /// back: address of the host memory the last run's data are copied to; 0 otherwise.
        pub host: u64,
        /// Resident buffers: the id, and how many elements to upload (0: keep the contents).
        pub resident_id: u64,
        pub init_count: u64,
        /// Resident buffers: copied to `host` after the job, as an output is (never with `init_count`).
        pub read_back: bool,
        /// With `read_back`: the copy may land after the job returns, by the time the device's next job
        /// or settle call returns (`ReadBack::IntoLater`).
        pub read_back_later: bool,
    }

    /// One launch argument: a job buffer or a scalar.
    #[derive(Debug, Clone)]
    pub struct NativeArg {
        pub is_buffer: bool,
        /// Buffers: index into the job's buffers.
        pub buffer: u32,
        /// Scalars: element type (as NativeBuffer::dtype) and value bits, little-endian, zero-extended.
        pub dtype: u8,
        pub scalar_bits: u64,
    }

    /// One step: a launch (`kernel` non-empty) or a fill of one buffer.
    #[derive(Debug, Clone)]
    pub struct NativeStep {
        /// Kernel symbol, for example `lens_sie_grad_f32`; empty for a fill.
        pub kernel: String,
        /// Fills: the buffer index and the byte every byte is set to.
        pub fill_buffer: u32,
        pub fill_byte: u8,
        /// 1-D launch: total work-items (rounded up to `local` by the host) and work-group size (0 = choose).
        pub global: u64,
        pub local: u64,
        /// This launch's arguments: `args[first_arg .. first_arg + arg_count]`.
        pub first_arg: u64,
        pub arg_count: u64,
    }

    #[derive(Debug, Clone)]
    pub struct NativeJob {
        /// Program name, used with `defines` as the build-cache key.
        pub program: String,
        /// SYCL: kernel source text compiled at run time. CUDA: unused (kernels are compiled by nvcc).
        pub source: String,
        /// Preprocessor definitions "NAME=VALUE" (SYCL build options; CUDA ignores them).
        pub defines: Vec<String>,
        /// Headers handed to the run-time compiler: names and texts, same length.
        pub header_names: Vec<String>,
        pub header_texts: Vec<String>,
        pub warmup: u32,
        pub repeats: u32,
    }

    /// Resources of one step (fills report -1 and an empty source).
    #[derive(Debug, Clone, Default)]
    pub struct NativeStepOutcome {
        /// Registers per thread, or -1 when the runtime does not expose it.
        pub regs_per_thread: i32,
        /// Theoretical occupancy in [0, 1] for the launch's block size, or -1 when unknown.
        pub occupancy: f64,
        /// Where the resource figures come from, or why they are absent.
        pub resources_source: String,
        /// Work-group size actually used.
        pub local_used: u64,
    }

    #[derive(Debug, Clone, Default)]
    pub struct NativeOutcome {
        /// Device-timer times of the timed repeats (whole sequence), seconds.
        pub times_s: Vec<f64>,
        /// Per-step device times, repeat-major: `step_times_s[r * steps + s]`.
        pub step_times_s: Vec<f64>,
        pub steps: Vec<NativeStepOutcome>,
        /// Program build (or module load) time, seconds; 0 when it came from the cache.
        pub build_s: f64,
        /// Build options / flags that produced the kernels.
        pub build_options: String,
    }

    #[derive(Debug, Clone, Default)]
    pub struct NativeDevice {
        pub index: i32,
        pub name: String,
        pub vendor: String,
        pub driver: String,
        pub is_gpu: bool,
        pub global_mem_bytes: u64,
        pub max_alloc_bytes: u64,
        pub fp64: bool,
        pub compute_units: u32,
    }

    // Vec<NativeDevice> crosses the CUDA and SYCL bridges: its C++ instantiation lives here, once.
    impl Vec<NativeDevice> {}
}

use super::{
    median, Accelerator, BackendError, BufferSpec, DType, DeviceInfo, HostSlice, HostVec,
    JobOutput, KernelJob, Model, ReadBack, Resources, Step, StepArg, StepReport,
};

/// Signature of a model's C++ `run_job` entry point (through cxx, C++ exceptions become `Err`). The
/// verification run's outputs are copied straight into the host memory the output buffers name.
///
/// # Safety
/// Every buffer's `host` address must be valid for its bytes until the call returns ([`BridgeJob`] holds
/// the borrows that make it so).
pub type RunJobFn = unsafe fn(
    i32,
    &ffi::NativeJob,
    &[ffi::NativeBuffer],
    &[ffi::NativeStep],
    &[ffi::NativeArg],
) -> Result<ffi::NativeOutcome, cxx::Exception>;

/// Free memory of one device, bytes.
pub type FreeMemoryFn = fn(i32) -> Result<u64, cxx::Exception>;

/// Frees resident buffers of one device (`Accelerator::release`).
pub type ReleaseFn = fn(i32, &[u64]) -> Result<(), cxx::Exception>;

/// Creates one device's context and queue ahead of timed work (`Accelerator::prepare`); seconds taken.
pub type PrepareFn = fn(i32) -> Result<f64, cxx::Exception>;

/// Whether one device's downloads now write the host's pages from several threads (CUDA's staged copies).
pub type ParallelDownloadsFn = fn(i32) -> bool;

/// Waits for one device's read-backs still landing (`Accelerator::settle`).
pub type SettleFn = fn(i32) -> Result<(), cxx::Exception>;

/// The entry points a C++-hosted model's bridge provides; the optional ones are `None` where the runtime has
/// no such call.
#[derive(Clone, Copy)]
pub struct NativeFns {
    pub run_job: RunJobFn,
    pub release: ReleaseFn,
    pub free_memory: Option<FreeMemoryFn>,
    pub prepare: Option<PrepareFn>,
    /// `Some` where a download may land in pages not yet mapped (see [`HostVec::room`]) when it says so.
    pub parallel_downloads: Option<ParallelDownloadsFn>,
    /// `Some` where `ReadBack::IntoLater` copies land after their job returns.
    pub settle: Option<SettleFn>,
}

/// A device of a C++-hosted model (CUDA or SYCL). The Rust half of the host plumbing, written once.
pub struct NativeAccelerator {
    pub model: Model,
    pub index: i32,
    pub info: DeviceInfo,
    pub toolchain: String,
    pub fns: NativeFns,
}

impl NativeAccelerator {
    pub fn from_native(
        model: Model,
        d: &ffi::NativeDevice,
        platform: &str,
        toolchain: String,
        fns: NativeFns,
    ) -> Self {
        NativeAccelerator {
            model,
            index: d.index,
            info: DeviceInfo {
                name: d.name.clone(),
                vendor: d.vendor.clone(),
                platform: platform.into(),
                driver: d.driver.clone(),
                is_gpu: d.is_gpu,
                compute_units: d.compute_units,
                global_mem_bytes: d.global_mem_bytes,
                max_alloc_bytes: d.max_alloc_bytes,
                fp64: d.fp64,
            },
            toolchain,
            fns,
        }
    }
}

/// A job in the bridge's types: the job, its buffers, steps and launch arguments. The buffers name host
/// memory by address: the job's input slices (borrowed for `'a`) and `outputs`, one vector per output
/// buffer in order, which the run fills. Private, so that nothing moves the vectors the addresses name.
pub struct BridgeJob<'a> {
    job: ffi::NativeJob,
    buffers: Vec<ffi::NativeBuffer>,
    steps: Vec<ffi::NativeStep>,
    args: Vec<ffi::NativeArg>,
    outputs: Vec<HostVec>,
    /// The outputs' lengths while they are rooms ([`HostVec::room`]), until a run fills them.
    rooms: Option<Vec<usize>>,
    inputs: std::marker::PhantomData<&'a [u8]>,
}

impl BridgeJob<'_> {
    /// Runs the job through a model's entry point; the outputs land in `self.outputs`.
    pub fn run(
        &mut self,
        device: i32,
        run_job: RunJobFn,
    ) -> Result<ffi::NativeOutcome, cxx::Exception> {
        // SAFETY: every input address is a slice of the job borrowed for the BridgeJob's life, and every
        // output address is a vector of `self.outputs` with room for the buffer's size, not touched until
        // this returns.
        let outcome =
            unsafe { run_job(device, &self.job, &self.buffers, &self.steps, &self.args) }?;
        if let Some(lens) = self.rooms.take() {
            for (v, len) in self.outputs.iter_mut().zip(lens) {
                // SAFETY: a job that returns has copied every byte of each output into its room
                // (cpp/native_job.h); one that fails returns above and its rooms stay empty.
                unsafe { v.filled(len) };
            }
        }
        Ok(outcome)
    }

    /// The output vectors, in buffer order (filled once `run` has succeeded).
    pub fn into_outputs(self) -> Vec<HostVec> {
        self.outputs
    }
}

/// Flattens a job into the bridge's types, with a vector allocated for each output: zeroed (its pages
/// mapped by all cores), or with `rooms` only room for it ([`HostVec::room`]) where the model's downloads
/// map the pages themselves from several threads.
pub fn flatten<'a>(job: &'a KernelJob, source: &str, rooms: bool) -> BridgeJob<'a> {
    let sizes: Vec<(DType, usize)> = job
        .buffers
        .iter()
        .filter_map(|b| match b {
            // The buffers the mapping below gives an output address (a resident one with initial data is
            // never read back: `KernelJob::validate` refuses both).
            BufferSpec::Output { dtype, len }
            | BufferSpec::Resident {
                dtype,
                len,
                init: None,
                read_back: ReadBack::Returned,
                ..
            } => Some((*dtype, *len)),
            _ => None,
        })
        .collect();
    let mut outputs: Vec<HostVec> = sizes
        .iter()
        .map(|&(dtype, len)| match rooms {
            true => HostVec::room(dtype, len),
            false => HostVec::zeroed(dtype, len),
        })
        .collect();
    let mut output_addresses = outputs.iter_mut().map(|v| v.write_address() as u64);
    let buffers = job
        .buffers
        .iter()
        .map(|b| {
            let address = |s: &HostSlice| s.bytes().as_ptr() as u64;
            let mut output = || output_addresses.next().expect("one vector per output");
            let (role, host, resident_id, init_count, read_back) = match b {
                BufferSpec::Input(s) => (0u8, address(s), 0, 0, false),
                BufferSpec::Output { .. } => (1, output(), 0, 0, false),
                BufferSpec::Scratch { .. } => (2, 0, 0, 0, false),
                BufferSpec::Resident {
                    id,
                    init,
                    read_back,
                    ..
                } => match (init, read_back) {
                    (Some(s), _) => (3, address(s), *id, s.len() as u64, false),
                    (None, ReadBack::Returned) => (3, output(), *id, 0, true),
                    (None, ReadBack::No) => (3, 0, *id, 0, false),
                    (None, into) => {
                        let address = into.destination().map_or(0, |d| d.address());
                        (3, address, *id, 0, true)
                    }
                },
            };
            let read_back_later = matches!(
                b,
                BufferSpec::Resident {
                    init: None,
                    read_back: ReadBack::IntoLater(_),
                    ..
                }
            );
            ffi::NativeBuffer {
                role,
                dtype: b.dtype() as u8,
                count: b.len() as u64,
                host,
                resident_id,
                init_count,
                read_back,
                read_back_later,
            }
        })
        .collect();
    assert!(
        output_addresses.next().is_none(),
        "one output vector per buffer read back"
    );
    let mut args = Vec::new();
    let mut steps = Vec::with_capacity(job.steps.len());
    for step in &job.steps {
        steps.push(match step {
            Step::Fill { buffer, byte } => ffi::NativeStep {
                kernel: String::new(),
                fill_buffer: *buffer as u32,
                fill_byte: *byte,
                global: 0,
                local: 0,
                first_arg: args.len() as u64,
                arg_count: 0,
            },
            Step::Launch(l) => {
                let first = args.len() as u64;
                for a in &l.args {
                    let scalar = |dtype: DType, bits: u64| ffi::NativeArg {
                        is_buffer: false,
                        buffer: 0,
                        dtype: dtype as u8,
                        scalar_bits: bits,
                    };
                    args.push(match *a {
                        StepArg::Buffer(b) => ffi::NativeArg {
                            is_buffer: true,
                            buffer: b as u32,
                            dtype: job.buffers[b].dtype() as u8,
                            scalar_bits: 0,
                        },
                        StepArg::I32(v) => scalar(DType::I32, v as u32 as u64),
                        StepArg::U32(v) => scalar(DType::U32, v as u64),
                        StepArg::U64(v) => scalar(DType::U64, v),
                        StepArg::F32(v) => scalar(DType::F32, v.to_bits() as u64),
                        StepArg::F64(v) => scalar(DType::F64, v.to_bits()),
                    });
                }
                ffi::NativeStep {
                    kernel: l.kernel.clone(),
                    fill_buffer: 0,
                    fill_byte: 0,
                    global: l.global as u64,
                    local: l.local.on(true).unwrap_or(0) as u64,
                    first_arg: first,
                    arg_count: l.args.len() as u64,
                }
            }
        });
    }
    let native = ffi::NativeJob {
        program: job.program.name.into(),
        source: source.into(),
        defines: job
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        header_names: job
            .program
            .headers
            .iter()
            .map(|(n, _)| n.to_string())
            .collect(),
        header_texts: job
            .program
            .headers
            .iter()
            .map(|(_, t)| t.to_string())
            .collect(),
        warmup: job.warmup,
        repeats: job.repeats,
    };
    BridgeJob {
        job: native,
        buffers,
        steps,
        args,
        outputs,
        rooms: rooms.then(|| sizes.iter().map(|&(_, len)| len).collect()),
        inputs: std::marker::PhantomData,
    }
}

/// Turns the outcome and the filled output vectors into a [`JobOutput`].
pub fn unflatten(job: &KernelJob, outputs: Vec<HostVec>, outcome: ffi::NativeOutcome) -> JobOutput {
    let n_steps = job.steps.len();
    let steps = job
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let samples: Vec<f64> = outcome
                .step_times_s
                .iter()
                .skip(i)
                .step_by(n_steps.max(1))
                .copied()
                .collect();
            let o = outcome.steps.get(i).cloned().unwrap_or_default();
            StepReport {
                name: step.name(),
                median_s: median(&samples),
                resources: matches!(step, Step::Launch(_)).then(|| Resources {
                    regs_per_thread: u32::try_from(o.regs_per_thread).ok(),
                    occupancy: (o.occupancy >= 0.0).then_some(o.occupancy),
                    source: o.resources_source.clone(),
                }),
                local_used: o.local_used as usize,
            }
        })
        .collect();
    JobOutput::from_steps(
        outputs,
        outcome.times_s,
        steps,
        outcome.build_s,
        outcome.build_options,
    )
}

impl Accelerator for NativeAccelerator {
    fn model(&self) -> Model {
        self.model
    }
    fn id(&self) -> String {
        format!("{}:{}", self.model.name(), self.index)
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn toolchain(&self) -> String {
        self.toolchain.clone()
    }
    fn free_memory(&self) -> Option<u64> {
        self.fns.free_memory.and_then(|f| f(self.index).ok())
    }
    fn prepare(&self) -> Result<f64, BackendError> {
        match self.fns.prepare {
            Some(f) => f(self.index).map_err(|e| BackendError::Runtime(e.what().to_string())),
            None => Ok(0.0),
        }
    }
    fn release(&self, ids: &[u64]) {
        // Only fails when the runtime is already broken; the buffers go with the process then.
        let _ = (self.fns.release)(self.index, ids);
    }
    fn read_backs_land_later(&self) -> bool {
        self.fns.settle.is_some()
    }
    fn settle(&self) -> Result<(), BackendError> {
        match self.fns.settle {
            Some(f) => f(self.index).map_err(|e| BackendError::Runtime(e.what().to_string())),
            None => Ok(()),
        }
    }
    fn run(&self, job: &KernelJob) -> Result<JobOutput, BackendError> {
        if let Err(e) = job.validate() {
            // A job that returns has let the job before's later read-backs land (ReadBack::IntoLater).
            let _ = self.settle();
            return Err(e);
        }
        let source = match self.model {
            Model::Sycl => job.program.sycl,
            _ => "",
        };
        crate::exec::trace_event(|| format!("{} job {}: begins", self.model, job.program.name));
        let start = std::time::Instant::now();
        // Outputs the model's own threads map as they write need no zeroing first (800 MB at 10k).
        let rooms = self.fns.parallel_downloads.is_some_and(|f| f(self.index));
        let mut flat = flatten(job, source, rooms);
        let flattened = start.elapsed();
        let outcome = flat.run(self.index, self.fns.run_job).map_err(|e| {
            let msg = e.what().to_string();
            if msg.contains("build") || msg.contains("compil") {
                BackendError::Build {
                    program: job.program.name.into(),
                    device: self.id(),
                    log: msg,
                }
            } else {
                BackendError::Runtime(msg)
            }
        })?;
        let ran = start.elapsed();
        let output = unflatten(job, flat.into_outputs(), outcome);
        // With ASTROPORT_TRACE_JOBS set, the host side of each job (the C++ side prints its phases).
        crate::exec::trace_event(|| format!("{} job {}: ends", self.model, job.program.name));
        if crate::exec::tracing_jobs() {
            eprintln!(
                "{} job {}: ms: flatten (outputs allocated) {:.2} run {:.2} unflatten {:.2}",
                self.model,
                job.program.name,
                flattened.as_secs_f64() * 1e3,
                (ran - flattened).as_secs_f64() * 1e3,
                (start.elapsed() - ran).as_secs_f64() * 1e3
            );
        }
        Ok(output)
    }
}

/// Discovery for a C++-hosted model, written once: lists the devices, classifies a failure as
/// `no_device` or `no_runtime`, and wraps each device in a [`NativeAccelerator`].
pub fn discover_native(
    model: Model,
    devices: Result<Vec<ffi::NativeDevice>, cxx::Exception>,
    toolchain: String,
    fns: NativeFns,
) -> Result<Vec<Box<dyn Accelerator>>, super::Absent> {
    let absent = |why, reason: String| super::Absent {
        model,
        id: model.name().into(),
        why,
        reason,
    };
    let devices = devices.map_err(|e| {
        let msg = e.what().to_string();
        let why =
            if msg.to_lowercase().contains("no device") || msg.contains("no CUDA-capable device") {
                super::Unavailable::NoDevice
            } else {
                super::Unavailable::NoRuntime
            };
        absent(why, msg)
    })?;
    if devices.is_empty() {
        return Err(absent(
            super::Unavailable::NoDevice,
            format!("the {model} runtime reports no device"),
        ));
    }
    let platform = model.name().to_uppercase();
    Ok(devices
        .iter()
        .map(|d| {
            Box::new(NativeAccelerator::from_native(
                model,
                d,
                &platform,
                toolchain.clone(),
                fns,
            )) as Box<dyn Accelerator>
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Launch, Program};

    static PROGRAM: Program = Program {
        name: "fake",
        opencl: "",
        sycl: "",
        headers: &[],
        opencl_options: "",
    };

    /// A model's entry point that copies every input's elements, each plus 1, into the outputs in order
    /// (f32 only), as a device's download would: through the host addresses alone.
    unsafe fn fake_run(
        _device: i32,
        _job: &ffi::NativeJob,
        buffers: &[ffi::NativeBuffer],
        _steps: &[ffi::NativeStep],
        _args: &[ffi::NativeArg],
    ) -> Result<ffi::NativeOutcome, cxx::Exception> {
        let input = buffers.iter().find(|b| b.role == 0).expect("an input");
        // SAFETY: the input's address is a live f32 slice of `count` elements (flatten).
        let values =
            unsafe { std::slice::from_raw_parts(input.host as *const f32, input.count as usize) };
        for b in buffers.iter().filter(|b| b.role == 1 || b.read_back) {
            for k in 0..b.count as usize {
                // SAFETY: an output's address has room for `count` f32 elements (flatten).
                unsafe {
                    (b.host as *mut f32)
                        .add(k)
                        .write(values[k % values.len()] + 1.0)
                };
            }
        }
        Ok(ffi::NativeOutcome::default())
    }

    #[test]
    fn outputs_given_as_rooms_come_back_filled_like_zeroed_ones() {
        let input = [1.0f32, 2.0, 3.0];
        let job = KernelJob {
            program: &PROGRAM,
            defines: Vec::new(),
            buffers: vec![
                BufferSpec::Input(HostSlice::F32(&input)),
                BufferSpec::Output {
                    dtype: DType::F32,
                    len: 5,
                },
                BufferSpec::Resident {
                    id: 7,
                    dtype: DType::F32,
                    len: 4,
                    init: None,
                    read_back: ReadBack::Returned,
                },
            ],
            steps: vec![Step::Launch(Launch {
                kernel: "fake".into(),
                args: Vec::new(),
                global: 1,
                local: crate::backend::Local::Auto,
            })],
            warmup: 0,
            repeats: 0,
        };
        let mut results = Vec::new();
        for rooms in [true, false] {
            let mut flat = flatten(&job, "", rooms);
            let lens: Vec<usize> = flat.outputs.iter().map(|v| v.to_f64().len()).collect();
            assert_eq!(
                lens,
                if rooms { vec![0, 0] } else { vec![5, 4] },
                "rooms {rooms}"
            );
            flat.run(0, fake_run).expect("the fake run succeeds");
            results.push(flat.outputs.iter().map(HostVec::to_f64).collect::<Vec<_>>());
        }
        let expected = vec![vec![2.0, 3.0, 4.0, 2.0, 3.0], vec![2.0, 3.0, 4.0, 2.0]];
        assert_eq!(results[0], expected, "outputs given as rooms");
        assert_eq!(results[1], expected, "zeroed outputs");
    }
}
