//! The `opencl` model: OpenCL C kernels from `cl/`, driven by `opencl3` on any platform and device.
//!
//! Host plumbing written once for every workload: device discovery, one context and profiling queue per
//! device, a per-process program cache keyed by (program, defines), build logs surfaced on failure, output
//! poisoning, device-event timing, and on NVIDIA the `-cl-nv-verbose` register report.

use super::{
    median, occupancy, Absent, Accelerator, BackendError, BufferSpec, DeviceInfo, HostVec,
    JobOutput, KernelJob, Local, Model, ReadBack, Resources, Step, StepArg, StepReport,
    Unavailable,
};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_event, CL_BLOCKING};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Math-flag policy, the same on every model (docs/toolchain.md): IEEE arithmetic, no fast-relaxed math
/// (`-cl-fast-relaxed-math` changes register counts; we keep results comparable instead).
pub const BASE_BUILD_OPTIONS: &str = "-cl-std=CL1.2";

pub struct OpenClDevice {
    id: String,
    info: DeviceInfo,
    nvidia: bool,
    compute_capability: Option<(u32, u32)>,
    context: Context,
    queue: CommandQueue,
    programs: Mutex<HashMap<String, BuiltProgram>>,
    /// Buffers that outlive jobs (`BufferSpec::Resident`), by id.
    resident: Mutex<HashMap<u64, Buffer<u8>>>,
}

struct BuiltProgram {
    program: ClProgram,
    options: String,
    log: String,
}

/// Largest buffer NVIDIA's OpenCL is trusted with: one PAGANI Evaluate over a 23.4 GB buffer (183 M regions
/// in 8D) on an H200 died with CL_UNKNOWN_ERROR and lost the context, though the driver reports 35 GB as
/// allowed. Plans tile to stay under it.
pub const NVIDIA_OPENCL_MAX_ALLOC: u64 = 1 << 34;

/// The allocation size plans may use on this device.
fn max_alloc(reported: u64, nvidia: bool) -> u64 {
    if nvidia {
        reported.min(NVIDIA_OPENCL_MAX_ALLOC)
    } else {
        reported
    }
}

/// Lists every OpenCL platform and device. No ICD loader, or no platform, becomes an [`Absent`].
pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    discover_platforms(None)
}

/// [`discover`] opening only the devices of the platforms listed (`None`: all). Platform numbers stay
/// those of the whole list, so `opencl:1:0` names the same device either way. The ICD loader still loads
/// every platform's library to list them: on the H200 machine that listing, not the devices, is most of the
/// 1.8 s an OpenCL run spends finding its backend.
pub fn discover_platforms(only: Option<&[usize]>) -> Result<Vec<Box<dyn Accelerator>>, Absent> {
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
        if only.is_some_and(|list| !list.contains(&p)) {
            continue;
        }
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
    if found.is_empty() && errors.is_empty() {
        let names: Vec<String> = platforms
            .iter()
            .enumerate()
            .map(|(p, platform)| format!("{p}: {}", platform.name().unwrap_or_default()))
            .collect();
        return Err(absent(
            Unavailable::NoDevice,
            format!(
                "no OpenCL platform {:?}: the loader lists {} ({})",
                only.unwrap_or_default(),
                platforms.len(),
                names.join(", ")
            ),
        ));
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
            max_alloc_bytes: max_alloc(device.max_mem_alloc_size().unwrap_or(0), nvidia),
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
            resident: Mutex::new(HashMap::new()),
        })
    }

    /// Builds the program for these defines once per process (cached by program name and options) and
    /// creates one kernel per step (`None` for fills). Returns the kernels, the build time (0 when cached),
    /// the options and the build log.
    #[allow(clippy::type_complexity)]
    fn kernels(
        &self,
        job: &KernelJob,
    ) -> Result<(Vec<Option<Kernel>>, f64, String, String), BackendError> {
        let mut options = String::from(BASE_BUILD_OPTIONS);
        if !job.program.opencl_options.is_empty() {
            options.push(' ');
            options.push_str(job.program.opencl_options);
        }
        for (k, v) in &job.defines {
            options.push_str(&format!(" -D{k}={v}"));
        }
        if self.nvidia {
            options.push_str(" -cl-nv-verbose");
        }
        if !self.info.is_gpu {
            // Loop hints for CPU compilers (cl/common/astro_dialect.h, ASTRO_VECTOR_SUM_F32).
            options.push_str(" -DASTRO_CPU_DEVICE=1");
        }
        let key = format!("{}|{options}", job.program.name);
        let mut cache = self.programs.lock().expect("program cache poisoned");
        let mut build_s = 0.0;
        if !cache.contains_key(&key) {
            let source = job.program.inline_headers(job.program.opencl);
            let start = Instant::now();
            let disk_key = binary_cache::key(&self.info, &options, &source);
            let program = match self.load_cached_binary(&disk_key, &options) {
                Some(program) => program,
                None => {
                    let mut program = ClProgram::create_from_source(&self.context, &source)
                        .map_err(|e| {
                            BackendError::Runtime(format!("clCreateProgramWithSource: {e}"))
                        })?;
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
                    if let Ok([binary]) = program.get_binaries().as_deref() {
                        binary_cache::store(&disk_key, &log, binary);
                    }
                    BuiltProgram {
                        program,
                        options: options.clone(),
                        log,
                    }
                }
            };
            build_s = start.elapsed().as_secs_f64();
            cache.insert(key.clone(), program);
        }
        let built = &cache[&key];
        let mut kernels = Vec::with_capacity(job.steps.len());
        for step in &job.steps {
            kernels.push(match step {
                Step::Launch(l) => {
                    Some(Kernel::create(&built.program, &l.kernel).map_err(|e| {
                        BackendError::Runtime(format!(
                            "kernel '{}' not found in {}: {e}",
                            l.kernel, job.program.name
                        ))
                    })?)
                }
                Step::Fill { .. } => None,
            });
        }
        Ok((kernels, build_s, built.options.clone(), built.log.clone()))
    }

    /// The program built from the binary an earlier process stored under `key`, with that build's log (the
    /// registers NVIDIA reports are in it); `None` when there is none or the device refuses it.
    fn load_cached_binary(&self, key: &str, options: &str) -> Option<BuiltProgram> {
        let (log, binary) = binary_cache::load(key)?;
        // SAFETY: one device, one binary, as clCreateProgramWithBinary requires.
        let mut program = unsafe {
            ClProgram::create_from_binary(&self.context, self.context.devices(), &[&binary])
        }
        .ok()?;
        program.build(self.context.devices(), options).ok()?;
        Some(BuiltProgram {
            program,
            options: format!("{options} (binary cached by an earlier run)"),
            log,
        })
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
        job.validate()?;
        let (kernels, build_s, options, log) = self.kernels(job)?;
        let mut buffers = self.job_buffers(job)?;
        let result = self.execute(job, &mut buffers, &kernels, build_s, options, &log);
        // Resident buffers go back to the device's map, also when the job failed.
        let mut resident = self.resident.lock().expect("resident map poisoned");
        for (buf, spec) in buffers.into_iter().zip(&job.buffers) {
            if let BufferSpec::Resident { id, .. } = spec {
                resident.insert(*id, buf);
            }
        }
        result
    }

    fn release(&self, ids: &[u64]) {
        let mut resident = self.resident.lock().expect("resident map poisoned");
        for id in ids {
            resident.remove(id);
        }
    }
}

impl OpenClDevice {
    /// Device buffers for the whole job, in job order: new ones for inputs (uploaded once), outputs and
    /// scratch; resident ones taken out of the device's map (grown when too small), to be put back by `run`.
    fn job_buffers(&self, job: &KernelJob) -> Result<Vec<Buffer<u8>>, BackendError> {
        let q = &self.queue;
        let create = |bytes: usize| {
            unsafe {
                Buffer::<u8>::create(
                    &self.context,
                    CL_MEM_READ_WRITE,
                    bytes.max(1),
                    std::ptr::null_mut(),
                )
            }
            .map_err(cl_err("clCreateBuffer"))
        };
        let mut buffers = Vec::with_capacity(job.buffers.len());
        for spec in &job.buffers {
            let (mut buf, upload) = match spec {
                BufferSpec::Resident { id, init, .. } => {
                    let kept = self
                        .resident
                        .lock()
                        .expect("resident map poisoned")
                        .remove(id);
                    let buf = match kept {
                        Some(b)
                            if b.size().map_err(cl_err("clGetMemObjectInfo"))? >= spec.bytes() =>
                        {
                            b
                        }
                        _ => create(spec.bytes())?,
                    };
                    (buf, init.as_ref())
                }
                BufferSpec::Input(data) => (create(spec.bytes())?, Some(data)),
                _ => (create(spec.bytes())?, None),
            };
            if let Some(data) = upload.filter(|d| !d.is_empty()) {
                unsafe { q.enqueue_write_buffer(&mut buf, CL_BLOCKING, 0, data.bytes(), &[]) }
                    .map_err(cl_err("clEnqueueWriteBuffer"))?;
            }
            buffers.push(buf);
        }
        Ok(buffers)
    }

    fn execute(
        &self,
        job: &KernelJob,
        buffers: &mut Vec<Buffer<u8>>,
        kernels: &[Option<Kernel>],
        build_s: f64,
        options: String,
        log: &str,
    ) -> Result<JobOutput, BackendError> {
        let q = &self.queue;
        let locals: Vec<Option<usize>> = job
            .steps
            .iter()
            .map(|s| match s {
                Step::Launch(l) => match l.local {
                    Local::Auto if self.info.is_gpu => Some(256),
                    other => other.on(self.info.is_gpu),
                },
                _ => None,
            })
            .collect();
        let poison = |buffers: &mut Vec<Buffer<u8>>| -> Result<(), BackendError> {
            for (buf, spec) in buffers.iter_mut().zip(&job.buffers) {
                if matches!(spec, BufferSpec::Output { .. } | BufferSpec::Scratch { .. }) {
                    let size = buf.size().map_err(cl_err("clGetMemObjectInfo"))?;
                    // 0xFF bytes are NaN in f32 and f64, so a kernel that writes nothing cannot pass.
                    unsafe { q.enqueue_fill_buffer(buf, &[0xFFu8], 0, size, &[]) }
                        .map_err(cl_err("clEnqueueFillBuffer"))?;
                }
            }
            Ok(())
        };
        // Enqueues every step; returns (total, per-step) device times of this sequence.
        let sequence = |buffers: &mut Vec<Buffer<u8>>| -> Result<(f64, Vec<f64>), BackendError> {
            let mut events: Vec<Event> = Vec::with_capacity(job.steps.len());
            for (i, step) in job.steps.iter().enumerate() {
                let event = match step {
                    Step::Fill { buffer, byte } => {
                        // The job's view of the buffer (a resident one may be larger), as on every model.
                        let size = job.buffers[*buffer].bytes().max(1);
                        unsafe {
                            q.enqueue_fill_buffer(&mut buffers[*buffer], &[*byte], 0, size, &[])
                        }
                        .map_err(cl_err("clEnqueueFillBuffer"))?
                    }
                    Step::Launch(l) => {
                        let kernel = kernels[i].as_ref().expect("launch step has a kernel");
                        let mut exec = ExecuteKernel::new(kernel);
                        for a in &l.args {
                            unsafe {
                                match a {
                                    StepArg::Buffer(b) => exec.set_arg(&buffers[*b]),
                                    StepArg::I32(v) => exec.set_arg(v),
                                    StepArg::U32(v) => exec.set_arg(v),
                                    StepArg::U64(v) => exec.set_arg(v),
                                    StepArg::F32(v) => exec.set_arg(v),
                                    StepArg::F64(v) => exec.set_arg(v),
                                };
                            }
                        }
                        match locals[i] {
                            Some(local) => {
                                exec.set_global_work_size(l.global.div_ceil(local) * local);
                                exec.set_local_work_size(local);
                            }
                            None => {
                                exec.set_global_work_size(l.global);
                            }
                        }
                        unsafe { exec.enqueue_nd_range(q) }
                            .map_err(cl_err("clEnqueueNDRangeKernel"))?
                    }
                };
                events.push(event);
            }
            let last = events.last().expect("validated: at least one step");
            last.wait().map_err(cl_err("kernel execution"))?;
            let mut per_step = Vec::with_capacity(events.len());
            let mut first_start = u64::MAX;
            let mut last_end = 0u64;
            for e in &events {
                let start = e
                    .profiling_command_start()
                    .map_err(cl_err("profiling start"))?;
                let end = e.profiling_command_end().map_err(cl_err("profiling end"))?;
                first_start = first_start.min(start);
                last_end = last_end.max(end);
                per_step.push(end.saturating_sub(start) as f64 * 1e-9);
            }
            Ok((last_end.saturating_sub(first_start) as f64 * 1e-9, per_step))
        };
        poison(buffers)?;
        for _ in 0..job.warmup {
            sequence(buffers)?;
        }
        let mut times = Vec::with_capacity(job.repeats as usize);
        let mut step_times = vec![Vec::with_capacity(job.repeats as usize); job.steps.len()];
        for _ in 0..job.repeats {
            let (total, per_step) = sequence(buffers)?;
            times.push(total);
            for (acc, t) in step_times.iter_mut().zip(per_step) {
                acc.push(t);
            }
        }
        poison(buffers)?;
        let (total, per_step) = sequence(buffers)?;
        if job.repeats == 0 {
            // Single-shot job (an iteration of an adaptive algorithm): the verification run is the timed run.
            times.push(total);
            for (acc, t) in step_times.iter_mut().zip(per_step) {
                acc.push(t);
            }
        }
        let mut outputs = Vec::new();
        for (buf, spec) in buffers.iter().zip(&job.buffers) {
            // A later read-back lands with its job here (OpenCL reads on the job's queue).
            if let BufferSpec::Resident { read_back, .. } = spec {
                if let Some(into) = read_back.destination() {
                    let ev: &[cl_event] = &[];
                    if into.bytes() > 0 {
                        // SAFETY: the job lends this memory (validated to the buffer's size); read once here.
                        unsafe { q.enqueue_read_buffer(buf, CL_BLOCKING, 0, into.bytes_mut(), ev) }
                            .map_err(cl_err("clEnqueueReadBuffer"))?;
                    }
                }
            }
            if let BufferSpec::Output { dtype, len }
            | BufferSpec::Resident {
                dtype,
                len,
                read_back: ReadBack::Returned,
                ..
            } = spec
            {
                // Read straight into the output's vector (at 10k one plane is 400 MB).
                let mut host = HostVec::zeroed(*dtype, *len);
                let ev: &[cl_event] = &[];
                if *len > 0 {
                    unsafe { q.enqueue_read_buffer(buf, CL_BLOCKING, 0, host.bytes_mut(), ev) }
                        .map_err(cl_err("clEnqueueReadBuffer"))?;
                }
                outputs.push(host);
            }
        }
        let steps = job
            .steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let local_used = locals[i].unwrap_or(0);
                StepReport {
                    name: step.name(),
                    median_s: median(&step_times[i]),
                    resources: match step {
                        Step::Launch(l) => Some(self.resources(&l.kernel, log, local_used.max(1))),
                        Step::Fill { .. } => None,
                    },
                    local_used,
                }
            })
            .collect();
        Ok(JobOutput::from_steps(
            outputs, times, steps, build_s, options,
        ))
    }
}

/// Built programs kept on disk between processes: NVIDIA's OpenCL compiles a program in 0.7-3 s every time a
/// process first uses it (no cache of its own), which a pipeline calling `astroport subtract` once per image
/// pays on every call. Files live in `$ASTROPORT_CACHE_DIR` (`off` disables the cache), else
/// `$XDG_CACHE_HOME/astroport/opencl`, else `~/.cache/astroport/opencl`; each holds its full key (device,
/// driver, platform, options, source), checked on load, so a hash collision or a driver update is a miss,
/// and a file that cannot be read or built from is ignored. Nothing here can fail a run.
mod binary_cache {
    use super::DeviceInfo;
    use std::hash::{Hash, Hasher};
    use std::path::{Path, PathBuf};

    const MAGIC: &[u8] = b"astroport-opencl-binary/1\n";

    fn folder() -> Option<PathBuf> {
        match std::env::var_os("ASTROPORT_CACHE_DIR") {
            Some(dir) if dir == "off" => None,
            Some(dir) => Some(PathBuf::from(dir).join("opencl")),
            None => std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|d| d.join("astroport").join("opencl")),
        }
    }

    /// Everything the binary depends on.
    pub fn key(info: &DeviceInfo, options: &str, source: &str) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{options}\n{source}",
            info.platform, info.vendor, info.name, info.driver
        )
    }

    fn path(dir: &Path, key: &str) -> PathBuf {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        dir.join(format!("{:016x}.bin", h.finish()))
    }

    /// The file's three parts, each after its length as 8 little-endian bytes: key, build log, binary.
    fn parts(bytes: &[u8]) -> Option<[&[u8]; 3]> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut take = || {
            let (len, tail) = rest.split_at_checked(8)?;
            let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
            let (part, tail) = tail.split_at_checked(len)?;
            rest = tail;
            Some(part)
        };
        Some([take()?, take()?, take()?])
    }

    pub fn load(key: &str) -> Option<(String, Vec<u8>)> {
        load_in(&folder()?, key)
    }

    pub fn store(key: &str, log: &str, binary: &[u8]) {
        if let Some(dir) = folder() {
            store_in(&dir, key, log, binary);
        }
    }

    fn load_in(dir: &Path, key: &str) -> Option<(String, Vec<u8>)> {
        let bytes = std::fs::read(path(dir, key)).ok()?;
        let [stored, log, binary] = parts(&bytes)?;
        (stored == key.as_bytes() && !binary.is_empty())
            .then(|| (String::from_utf8_lossy(log).into_owned(), binary.to_vec()))
    }

    /// Written to a temporary name and renamed, so a reader never sees half a file.
    fn store_in(dir: &Path, key: &str, log: &str, binary: &[u8]) {
        let path = path(dir, key);
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let mut bytes = MAGIC.to_vec();
        for part in [key.as_bytes(), log.as_bytes(), binary] {
            bytes.extend((part.len() as u64).to_le_bytes());
            bytes.extend(part);
        }
        let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
        if std::fs::write(&temporary, &bytes).is_ok() && std::fs::rename(&temporary, &path).is_err()
        {
            let _ = std::fs::remove_file(&temporary);
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A stored entry comes back whole; a different key, or a truncated file, is a miss.
        #[test]
        fn entries_round_trip_and_damage_is_a_miss() {
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            let info = DeviceInfo {
                name: "dev".into(),
                vendor: "v".into(),
                platform: "p".into(),
                driver: "1".into(),
                is_gpu: true,
                compute_units: 1,
                global_mem_bytes: 1,
                max_alloc_bytes: 1,
                fp64: true,
            };
            let key = key(&info, "-cl-std=CL1.2", "kernel void k() {}");
            assert!(load_in(dir, &key).is_none());
            store_in(dir, &key, "log", b"binary");
            assert_eq!(
                load_in(dir, &key),
                Some(("log".to_string(), b"binary".to_vec()))
            );
            let other = key.replace("dev", "dev2");
            assert!(load_in(dir, &other).is_none());
            let file = path(dir, &key);
            let bytes = std::fs::read(&file).unwrap();
            std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
            assert!(load_in(dir, &key).is_none());
        }
    }
}
