//! Types shared by the two C++-hosted models (CUDA and SYCL).
//!
//! A [`KernelJob`](super::KernelJob) is flattened into a [`ffi::NativeJob`], a list of [`ffi::NativeArg`] and
//! one byte blob holding every input buffer, so that each model's C++ host plumbing is written once and knows
//! nothing about workloads. The C++ side fills a [`ffi::NativeOutcome`].

#[cxx::bridge(namespace = "astroport")]
pub mod ffi {
    /// One kernel argument, in kernel-signature order.
    #[derive(Debug, Clone)]
    pub struct NativeArg {
        /// 0 = input buffer (uploaded from the blob), 1 = output buffer (poisoned, returned), 2 = scalar.
        pub role: u8,
        /// Element type: 0 = i32, 1 = u32, 2 = f32, 3 = f64, 4 = u64.
        pub dtype: u8,
        /// Buffers: number of elements.
        pub count: u64,
        /// Input buffers: byte offset into the input blob.
        pub offset: u64,
        /// Scalars: the value's bits, little-endian, zero-extended to 64 bits.
        pub scalar_bits: u64,
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
        /// Kernel symbol, for example `lens_sie_grad_f32`.
        pub kernel: String,
        /// 1-D launch: total work-items (rounded up to `local` by the host) and work-group size (0 = choose).
        pub global: u64,
        pub local: u64,
        pub warmup: u32,
        pub repeats: u32,
    }

    #[derive(Debug, Clone, Default)]
    pub struct NativeOutcome {
        /// Device-timer kernel times of the timed repeats, seconds.
        pub times_s: Vec<f64>,
        /// Program build (or module load) time, seconds; 0 when it came from the cache.
        pub build_s: f64,
        /// Registers per thread, or -1 when the runtime does not expose it.
        pub regs_per_thread: i32,
        /// Theoretical occupancy in [0, 1] for the launch's block size, or -1 when unknown.
        pub occupancy: f64,
        /// Where the resource figures come from, or why they are absent.
        pub resources_source: String,
        /// Work-group size actually used.
        pub local_used: u64,
        /// Build options / flags that produced the kernel.
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
    Accelerator, BackendError, DType, DeviceInfo, HostVec, JobOutput, KernelArg, KernelJob, Model,
    Resources,
};

/// Signature of a model's C++ `run_job` entry point (through cxx, C++ exceptions become `Err`).
/// The last argument receives the verification run's outputs, concatenated in argument order: the host
/// copies device memory straight into this Rust-owned buffer.
pub type RunJobFn = fn(
    i32,
    &ffi::NativeJob,
    &[ffi::NativeArg],
    &[u8],
    &mut [u8],
) -> Result<ffi::NativeOutcome, cxx::Exception>;

/// A device of a C++-hosted model (CUDA or SYCL). The Rust half of the host plumbing, written once.
pub struct NativeAccelerator {
    pub model: Model,
    pub index: i32,
    pub info: DeviceInfo,
    pub toolchain: String,
    pub run_job: RunJobFn,
}

impl NativeAccelerator {
    pub fn from_native(
        model: Model,
        d: &ffi::NativeDevice,
        platform: &str,
        toolchain: String,
        run_job: RunJobFn,
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
            run_job,
        }
    }
}

/// Flattens a job into the bridge's types: the job, its arguments, and one blob with every input.
pub fn flatten(job: &KernelJob, source: &str) -> (ffi::NativeJob, Vec<ffi::NativeArg>, Vec<u8>) {
    let mut blob = Vec::new();
    let mut args = Vec::with_capacity(job.args.len());
    for a in &job.args {
        let (role, dtype, count, offset, bits) = match *a {
            KernelArg::Input(s) => {
                let off = blob.len() as u64;
                blob.extend_from_slice(s.bytes());
                (0u8, s.dtype(), s.len() as u64, off, 0u64)
            }
            KernelArg::Output { dtype, len } => (1, dtype, len as u64, 0, 0),
            KernelArg::I32(v) => (2, DType::I32, 1, 0, v as u32 as u64),
            KernelArg::F32(v) => (2, DType::F32, 1, 0, v.to_bits() as u64),
            KernelArg::F64(v) => (2, DType::F64, 1, 0, v.to_bits()),
        };
        args.push(ffi::NativeArg {
            role,
            dtype: dtype as u8,
            count,
            offset,
            scalar_bits: bits,
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
        kernel: job.kernel.clone(),
        global: job.global as u64,
        local: job.local.unwrap_or(0) as u64,
        warmup: job.warmup,
        repeats: job.repeats,
    };
    (native, args, blob)
}

/// Total bytes of a job's output buffers.
pub fn output_bytes(job: &KernelJob) -> usize {
    job.args
        .iter()
        .map(|a| match *a {
            KernelArg::Output { dtype, len } => len * dtype.bytes(),
            _ => 0,
        })
        .sum()
}

/// Splits the concatenated output bytes back into typed buffers, in argument order.
pub fn unflatten(job: &KernelJob, bytes: &[u8], outcome: ffi::NativeOutcome) -> JobOutput {
    let mut outputs = Vec::new();
    let mut at = 0usize;
    for a in &job.args {
        if let KernelArg::Output { dtype, len } = *a {
            let n = len * dtype.bytes();
            outputs.push(HostVec::from_bytes(dtype, &bytes[at..at + n]));
            at += n;
        }
    }
    JobOutput {
        outputs,
        times_s: outcome.times_s,
        build_s: outcome.build_s,
        resources: Resources {
            regs_per_thread: u32::try_from(outcome.regs_per_thread).ok(),
            occupancy: (outcome.occupancy >= 0.0).then_some(outcome.occupancy),
            source: outcome.resources_source,
        },
        build_options: outcome.build_options,
        local_used: outcome.local_used as usize,
    }
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
    fn run(&self, job: &KernelJob) -> Result<JobOutput, BackendError> {
        let source = match self.model {
            Model::Sycl => job.program.sycl,
            _ => "",
        };
        let (native, args, blob) = flatten(job, source);
        let mut out_bytes = vec![0u8; output_bytes(job)];
        let outcome =
            (self.run_job)(self.index, &native, &args, &blob, &mut out_bytes).map_err(|e| {
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
        Ok(unflatten(job, &out_bytes, outcome))
    }
}

/// Discovery for a C++-hosted model, written once: lists the devices, classifies a failure as
/// `no_device` or `no_runtime`, and wraps each device in a [`NativeAccelerator`].
pub fn discover_native(
    model: Model,
    devices: Result<Vec<ffi::NativeDevice>, cxx::Exception>,
    toolchain: String,
    run_job: RunJobFn,
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
                run_job,
            )) as Box<dyn Accelerator>
        })
        .collect())
}
