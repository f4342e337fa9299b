//! The `opencl` model: OpenCL C kernels from `cl/`, driven by `opencl3` on any platform and device.
//!
//! Host plumbing written once for every workload: device discovery, one context and profiling queue per
//! device, a per-process program cache keyed by (program, defines), build logs surfaced on failure, output
//! poisoning, device-event timing, and on NVIDIA the `-cl-nv-verbose` register report.

use super::{
    occupancy, Absent, Accelerator, BackendError, DType, DeviceInfo, HostVec, JobOutput, KernelArg,
    KernelJob, Model, Resources, Unavailable,
};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_event, CL_BLOCKING};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Math-flag policy, the same on every model: IEEE arithmetic, no fast-relaxed math (TOOLCHAIN.md notes
/// that `-cl-fast-relaxed-math` changes register counts; we keep results comparable instead).
pub const BASE_BUILD_OPTIONS: &str = "-cl-std=CL1.2";

pub struct OpenClDevice {
    id: String,
    info: DeviceInfo,
    nvidia: bool,
    compute_capability: Option<(u32, u32)>,
    context: Context,
    queue: CommandQueue,
    programs: Mutex<HashMap<String, BuiltProgram>>,
}

struct BuiltProgram {
    program: ClProgram,
    options: String,
    log: String,
}

/// Lists every OpenCL platform and device. No ICD loader, or no platform, becomes an [`Absent`].
pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    let absent = |why, reason: String| Absent {
        model: Model::Opencl,
        id: "opencl".into(),
        why,
        reason,
    };
    let platforms = get_platforms().map_err(|e| {
        absent(
            Unavailable::NoRuntime,
            format!("no OpenCL runtime (ICD loader or platform): {e}"),
        )
    })?;
    if platforms.is_empty() {
        return Err(absent(
            Unavailable::NoDevice,
            "the OpenCL loader found no platform".into(),
        ));
    }
    let mut found: Vec<Box<dyn Accelerator>> = Vec::new();
    let mut errors = Vec::new();
    for (p, platform) in platforms.iter().enumerate() {
        let devices = match platform.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(d) => d,
            Err(e) => {
                errors.push(format!("platform {p}: {e}"));
                continue;
            }
        };
        for (d, raw) in devices.into_iter().enumerate() {
            match OpenClDevice::new(p, d, platform.name().unwrap_or_default(), Device::new(raw)) {
                Ok(dev) => found.push(Box::new(dev)),
                Err(e) => errors.push(format!("opencl:{p}:{d}: {e}")),
            }
        }
    }
    if found.is_empty() {
        return Err(absent(
            Unavailable::NoDevice,
            format!("no usable OpenCL device ({})", errors.join("; ")),
        ));
    }
    Ok(found)
}

impl OpenClDevice {
    fn new(p: usize, d: usize, platform: String, device: Device) -> Result<Self, String> {
        let name = device.name().map_err(|e| e.to_string())?.trim().to_string();
        let vendor = device.vendor().unwrap_or_default().trim().to_string();
        let nvidia =
            vendor.to_uppercase().contains("NVIDIA") || platform.to_uppercase().contains("NVIDIA");
        let compute_capability = if nvidia {
            match (
                device.compute_capability_major_nv(),
                device.compute_capability_minor_nv(),
            ) {
                (Ok(a), Ok(b)) => Some((a, b)),
                _ => None,
            }
        } else {
            None
        };
        let info = DeviceInfo {
            name,
            vendor,
            platform: platform.trim().to_string(),
            driver: format!(
                "{}; {}",
                device.version().unwrap_or_default().trim(),
                device.driver_version().unwrap_or_default().trim()
            ),
            is_gpu: device
                .dev_type()
                .map(|t| t & CL_DEVICE_TYPE_GPU != 0)
                .unwrap_or(false),
            compute_units: device.max_compute_units().unwrap_or(0),
            global_mem_bytes: device.global_mem_size().unwrap_or(0),
            max_alloc_bytes: device.max_mem_alloc_size().unwrap_or(0),
            fp64: device.double_fp_config().map(|c| c != 0).unwrap_or(false),
        };
        let context = Context::from_device(&device).map_err(|e| format!("context: {e}"))?;
        let queue =
            CommandQueue::create_default_with_properties(&context, CL_QUEUE_PROFILING_ENABLE, 0)
                .map_err(|e| format!("queue: {e}"))?;
        Ok(OpenClDevice {
            id: format!("opencl:{p}:{d}"),
            info,
            nvidia,
            compute_capability,
            context,
            queue,
            programs: Mutex::new(HashMap::new()),
        })
    }

    /// Builds the program for these defines once per process (cached by program name and options) and
    /// creates the kernel. Returns the kernel, the build time (0 when cached), the options and the build log.
    fn kernel(&self, job: &KernelJob) -> Result<(Kernel, f64, String, String), BackendError> {
        let mut options = String::from(BASE_BUILD_OPTIONS);
        for (k, v) in &job.defines {
            options.push_str(&format!(" -D{k}={v}"));
        }
        if self.nvidia {
            options.push_str(" -cl-nv-verbose");
        }
        let key = format!("{}|{options}", job.program.name);
        let mut cache = self.programs.lock().expect("program cache poisoned");
        let mut build_s = 0.0;
        if !cache.contains_key(&key) {
            let source = job.program.inline_headers(job.program.opencl);
            let start = Instant::now();
            let mut program = ClProgram::create_from_source(&self.context, &source)
                .map_err(|e| BackendError::Runtime(format!("clCreateProgramWithSource: {e}")))?;
            let built = program.build(self.context.devices(), &options);
            let log = program
                .get_build_log(self.context.default_device())
                .unwrap_or_default();
            if let Err(e) = built {
                return Err(BackendError::Build {
                    program: job.program.name.into(),
                    device: format!("{} ({})", self.id, self.info.name),
                    log: format!("{e}; options: {options}\n{log}"),
                });
            }
            build_s = start.elapsed().as_secs_f64();
            cache.insert(
                key.clone(),
                BuiltProgram {
                    program,
                    options: options.clone(),
                    log,
                },
            );
        }
        let built = &cache[&key];
        let kernel = Kernel::create(&built.program, &job.kernel).map_err(|e| {
            BackendError::Runtime(format!(
                "kernel '{}' not found in {}: {e}",
                job.kernel, job.program.name
            ))
        })?;
        Ok((kernel, build_s, built.options.clone(), built.log.clone()))
    }

    fn resources(&self, kernel: &str, log: &str, local: usize) -> Resources {
        if !self.nvidia {
            return Resources {
                regs_per_thread: None,
                occupancy: None,
                source: format!(
                    "n/a: {} exposes no register count through OpenCL",
                    self.info.platform
                ),
            };
        }
        match occupancy::parse_ptxas_registers(log, kernel) {
            Some(regs) => {
                let occ = self
                    .compute_capability
                    .and_then(|cc| occupancy::theoretical(cc, regs, local));
                Resources {
                    regs_per_thread: Some(regs),
                    occupancy: occ,
                    source: match self.compute_capability {
                        Some((a, b)) => format!(
                            "-cl-nv-verbose build log; occupancy from the sm_{a}{b} limits for {local}-thread groups"
                        ),
                        None => "-cl-nv-verbose build log; occupancy n/a (no compute capability)".into(),
                    },
                }
            }
            None => Resources {
                regs_per_thread: None,
                occupancy: None,
                source: "n/a: -cl-nv-verbose log had no ptxas report (set CUDA_CACHE_DISABLE=1)"
                    .into(),
            },
        }
    }
}

fn cl_err(what: &str) -> impl Fn(opencl3::error_codes::ClError) -> BackendError + '_ {
    move |e| BackendError::Runtime(format!("{what}: {e}"))
}

/// A device buffer of raw bytes with its argument slot.
enum Slot {
    Buffer(Buffer<u8>, Option<DType>),
    I32(i32),
    F32(f32),
    F64(f64),
}

impl Accelerator for OpenClDevice {
    fn model(&self) -> Model {
        Model::Opencl
    }
    fn id(&self) -> String {
        self.id.clone()
    }
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn toolchain(&self) -> String {
        format!(
            "opencl3 0.12 via ICD loader; platform {}; options {BASE_BUILD_OPTIONS}",
            self.info.platform
        )
    }

    fn run(&self, job: &KernelJob) -> Result<JobOutput, BackendError> {
        let (kernel, build_s, options, log) = self.kernel(job)?;
        self.execute(job, &kernel, build_s, options, &log)
    }
}

impl OpenClDevice {
    fn execute(
        &self,
        job: &KernelJob,
        kernel: &Kernel,
        build_s: f64,
        options: String,
        log: &str,
    ) -> Result<JobOutput, BackendError> {
        let q = &self.queue;
        // Upload inputs and allocate outputs once per job.
        let mut slots = Vec::with_capacity(job.args.len());
        for arg in &job.args {
            slots.push(match *arg {
                KernelArg::Input(data) => {
                    let bytes = data.bytes();
                    let mut buf = unsafe {
                        Buffer::<u8>::create(
                            &self.context,
                            CL_MEM_READ_WRITE,
                            bytes.len().max(1),
                            std::ptr::null_mut(),
                        )
                    }
                    .map_err(cl_err("clCreateBuffer (input)"))?;
                    if !bytes.is_empty() {
                        unsafe { q.enqueue_write_buffer(&mut buf, CL_BLOCKING, 0, bytes, &[]) }
                            .map_err(cl_err("clEnqueueWriteBuffer"))?;
                    }
                    Slot::Buffer(buf, None)
                }
                KernelArg::Output { dtype, len } => {
                    let buf = unsafe {
                        Buffer::<u8>::create(
                            &self.context,
                            CL_MEM_READ_WRITE,
                            (len * dtype.bytes()).max(1),
                            std::ptr::null_mut(),
                        )
                    }
                    .map_err(cl_err("clCreateBuffer (output)"))?;
                    Slot::Buffer(buf, Some(dtype))
                }
                KernelArg::I32(v) => Slot::I32(v),
                KernelArg::F32(v) => Slot::F32(v),
                KernelArg::F64(v) => Slot::F64(v),
            });
        }
        let local = if self.info.is_gpu {
            Some(job.local.unwrap_or(256))
        } else {
            None
        };
        let global = match local {
            Some(l) => job.global.div_ceil(l) * l,
            None => job.global,
        };
        let poison = |slots: &mut Vec<Slot>| -> Result<(), BackendError> {
            for s in slots.iter_mut() {
                if let Slot::Buffer(buf, Some(_)) = s {
                    let size = buf.size().map_err(cl_err("clGetMemObjectInfo"))?;
                    // 0xFF bytes are NaN in f32 and f64, so a kernel that writes nothing cannot pass.
                    unsafe { q.enqueue_fill_buffer(buf, &[0xFFu8], 0, size, &[]) }
                        .map_err(cl_err("clEnqueueFillBuffer"))?;
                }
            }
            Ok(())
        };
        let launch = |slots: &Vec<Slot>| -> Result<f64, BackendError> {
            let mut exec = ExecuteKernel::new(kernel);
            for s in slots {
                unsafe {
                    match s {
                        Slot::Buffer(b, _) => exec.set_arg(b),
                        Slot::I32(v) => exec.set_arg(v),
                        Slot::F32(v) => exec.set_arg(v),
                        Slot::F64(v) => exec.set_arg(v),
                    };
                }
            }
            exec.set_global_work_size(global);
            if let Some(l) = local {
                exec.set_local_work_size(l);
            }
            let event =
                unsafe { exec.enqueue_nd_range(q) }.map_err(cl_err("clEnqueueNDRangeKernel"))?;
            event.wait().map_err(cl_err("kernel execution"))?;
            let start = event
                .profiling_command_start()
                .map_err(cl_err("profiling start"))?;
            let end = event
                .profiling_command_end()
                .map_err(cl_err("profiling end"))?;
            Ok(end.saturating_sub(start) as f64 * 1e-9)
        };
        poison(&mut slots)?;
        for _ in 0..job.warmup {
            launch(&slots)?;
        }
        let mut times = Vec::with_capacity(job.repeats as usize);
        for _ in 0..job.repeats {
            times.push(launch(&slots)?);
        }
        poison(&mut slots)?;
        launch(&slots)?;
        let mut outputs = Vec::new();
        for s in &slots {
            if let Slot::Buffer(buf, Some(dtype)) = s {
                let size = buf.size().map_err(cl_err("clGetMemObjectInfo"))?;
                let mut host = vec![0u8; size];
                let ev: &[cl_event] = &[];
                unsafe { q.enqueue_read_buffer(buf, CL_BLOCKING, 0, &mut host, ev) }
                    .map_err(cl_err("clEnqueueReadBuffer"))?;
                outputs.push(HostVec::from_bytes(*dtype, &host));
            }
        }
        let local_used = local.unwrap_or(0);
        Ok(JobOutput {
            outputs,
            times_s: times,
            build_s,
            resources: self.resources(&job.kernel, log, local_used.max(1)),
            build_options: options,
            local_used,
        })
    }
}
