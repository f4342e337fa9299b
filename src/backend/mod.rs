//! One interface for every compute model.
//!
//! A workload describes device work as a [`KernelJob`]: a program (the OpenCL C / SYCL source plus the
//! shared headers, or CUDA kernels already compiled by nvcc), device buffers, and a sequence of steps
//! (1-D kernel launches and fills) that keep their data on the device between them. Each model implements
//! [`Accelerator::run`] once, for every workload: upload, poison outputs and scratch, warm up, time repeats
//! with device events, re-poison, run once more and return that run's outputs. The
//! `cpu` model is the exception: it runs the workload's own Rust code (the f64 reference) through rayon.

pub mod cpu;
pub mod native;
pub mod occupancy;
pub mod opencl;

#[cfg(has_cuda)]
pub mod cuda;
#[cfg(has_sycl)]
pub mod sycl;

use serde::{Deserialize, Serialize};
use std::fmt;

/// The four programming models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Cpu,
    Opencl,
    Cuda,
    Sycl,
}

impl Model {
    pub const ALL: [Model; 4] = [Model::Cpu, Model::Opencl, Model::Cuda, Model::Sycl];

    pub fn name(self) -> &'static str {
        match self {
            Model::Cpu => "cpu",
            Model::Opencl => "opencl",
            Model::Cuda => "cuda",
            Model::Sycl => "sycl",
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The floating-point type of a device computation. Workloads with schemes of their own (the lens's mixed
/// precision) define them as their own modes on top of these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    F64,
}

impl Precision {
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown precision '{s}' (expected f32 or f64)"))
    }
}

/// Why a backend cannot run, from the availability checks at build time (feature, compiler) and run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// The cargo feature is off or its compiler was not found at build time.
    NotBuilt,
    /// The runtime library (ICD loader, CUDA driver, SYCL runtime) is missing or failed to start.
    NoRuntime,
    /// The runtime works but offers no device (or not the one asked for).
    NoDevice,
}

impl Unavailable {
    pub fn status(self) -> &'static str {
        match self {
            Unavailable::NotBuilt => "not_built",
            Unavailable::NoRuntime => "no_runtime",
            Unavailable::NoDevice => "no_device",
        }
    }
}

/// A backend that could not be offered, with the reason shown to the user.
#[derive(Debug, Clone)]
pub struct Absent {
    pub model: Model,
    /// The id the user would have used (for example `cuda` or `opencl:1:0`).
    pub id: String,
    pub why: Unavailable,
    pub reason: String,
}

/// What a device is, for tables and provenance.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct DeviceInfo {
    pub name: String,
    pub vendor: String,
    pub platform: String,
    pub driver: String,
    pub is_gpu: bool,
    pub compute_units: u32,
    pub global_mem_bytes: u64,
    pub max_alloc_bytes: u64,
    pub fp64: bool,
}

/// Element type of a buffer or scalar argument (matches `native::ffi::NativeArg::dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    I32 = 0,
    U32 = 1,
    F32 = 2,
    F64 = 3,
    U64 = 4,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F64 | DType::U64 => 8,
            _ => 4,
        }
    }
}

/// Host data handed to a kernel as an input buffer.
#[derive(Debug, Clone, Copy)]
pub enum HostSlice<'a> {
    I32(&'a [i32]),
    U32(&'a [u32]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl HostSlice<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            HostSlice::I32(_) => DType::I32,
            HostSlice::U32(_) => DType::U32,
            HostSlice::F32(_) => DType::F32,
            HostSlice::F64(_) => DType::F64,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            HostSlice::I32(s) => s.len(),
            HostSlice::U32(s) => s.len(),
            HostSlice::F32(s) => s.len(),
            HostSlice::F64(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn bytes(&self) -> &[u8] {
        match self {
            HostSlice::I32(s) => bytemuck::cast_slice(s),
            HostSlice::U32(s) => bytemuck::cast_slice(s),
            HostSlice::F32(s) => bytemuck::cast_slice(s),
            HostSlice::F64(s) => bytemuck::cast_slice(s),
        }
    }
}

impl<'a> From<&'a [i32]> for HostSlice<'a> {
    fn from(v: &'a [i32]) -> Self {
        HostSlice::I32(v)
    }
}
impl<'a> From<&'a [f32]> for HostSlice<'a> {
    fn from(v: &'a [f32]) -> Self {
        HostSlice::F32(v)
    }
}
impl<'a> From<&'a [f64]> for HostSlice<'a> {
    fn from(v: &'a [f64]) -> Self {
        HostSlice::F64(v)
    }
}

/// An output buffer returned by a job.
#[derive(Debug, Clone, PartialEq)]
pub enum HostVec {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl HostVec {
    /// `len` zeros of `dtype`, for a device's output to land in. A large buffer is zeroed, and its pages
    /// mapped, by all cores at once: fresh pages are otherwise mapped one at a time by the single thread of
    /// the runtime's copy out of its staging buffer (at 10k, 400 MB per plane).
    pub fn zeroed(dtype: DType, len: usize) -> HostVec {
        fn touched<T: Copy + Default + Send + Sync>(len: usize) -> Vec<T> {
            use rayon::prelude::*;
            if len < 1 << 20 {
                return vec![T::default(); len];
            }
            // Zeroed by all cores: `vec![0; n]` of memory the allocator reuses (a job's freed inputs) is
            // zeroed by one thread, 0.22-0.28 s for the matched filter's 800 MB of outputs at 10k.
            let mut v: Vec<T> = Vec::with_capacity(len);
            v.spare_capacity_mut()[..len]
                .par_chunks_mut(1 << 18)
                .for_each(|part| part.iter_mut().for_each(|x| _ = x.write(T::default())));
            // SAFETY: the loop above initialised all `len` elements.
            unsafe { v.set_len(len) };
            v
        }
        match dtype {
            DType::F32 => HostVec::F32(touched(len)),
            DType::F64 => HostVec::F64(touched(len)),
            DType::I32 => HostVec::I32(touched(len)),
            DType::U32 => HostVec::U32(touched(len)),
            DType::U64 => HostVec::U64(touched(len)),
        }
    }
    /// Room for `len` elements of `dtype` that a device's copy fills: capacity only, length 0, its pages
    /// mapped by whatever writes them first (a model's copy threads, all at once). [`HostVec::filled`]
    /// gives it its length once every element is written.
    pub fn room(dtype: DType, len: usize) -> HostVec {
        match dtype {
            DType::F32 => HostVec::F32(Vec::with_capacity(len)),
            DType::F64 => HostVec::F64(Vec::with_capacity(len)),
            DType::I32 => HostVec::I32(Vec::with_capacity(len)),
            DType::U32 => HostVec::U32(Vec::with_capacity(len)),
            DType::U64 => HostVec::U64(Vec::with_capacity(len)),
        }
    }
    /// Where a device writes this vector's elements (or its room's).
    pub fn write_address(&mut self) -> *mut u8 {
        match self {
            HostVec::F32(v) => v.as_mut_ptr().cast(),
            HostVec::F64(v) => v.as_mut_ptr().cast(),
            HostVec::I32(v) => v.as_mut_ptr().cast(),
            HostVec::U32(v) => v.as_mut_ptr().cast(),
            HostVec::U64(v) => v.as_mut_ptr().cast(),
        }
    }
    /// Makes a [`HostVec::room`] `len` elements long.
    ///
    /// # Safety
    /// `len` is at most the room's capacity, and its first `len` elements have all been written since.
    pub unsafe fn filled(&mut self, len: usize) {
        // SAFETY: as the caller promises; every bit pattern is a valid element of these types.
        unsafe {
            match self {
                HostVec::F32(v) => v.set_len(len),
                HostVec::F64(v) => v.set_len(len),
                HostVec::I32(v) => v.set_len(len),
                HostVec::U32(v) => v.set_len(len),
                HostVec::U64(v) => v.set_len(len),
            }
        }
    }
    /// The elements' bytes, for a device to copy into.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            HostVec::F32(v) => bytemuck::cast_slice_mut(v),
            HostVec::F64(v) => bytemuck::cast_slice_mut(v),
            HostVec::I32(v) => bytemuck::cast_slice_mut(v),
            HostVec::U32(v) => bytemuck::cast_slice_mut(v),
            HostVec::U64(v) => bytemuck::cast_slice_mut(v),
        }
    }
    /// Values widened to f64 (for verification).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostVec::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostVec::F64(v) => v.clone(),
            HostVec::I32(v) => v.iter().map(|&x| x as f64).collect(),
            HostVec::U32(v) => v.iter().map(|&x| x as f64).collect(),
            HostVec::U64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }
}

/// One kernel argument of a single-launch job ([`KernelJob::single`]), in the kernel's signature order.
#[derive(Debug, Clone, Copy)]
pub enum KernelArg<'a> {
    Input(HostSlice<'a>),
    Output { dtype: DType, len: usize },
    I32(i32),
    F32(f32),
    F64(f64),
}

/// A device buffer of a job. Buffers live on the device for the whole job, across all its steps.
#[derive(Debug, Clone, Copy)]
pub enum BufferSpec<'a> {
    /// Uploaded once from host data.
    Input(HostSlice<'a>),
    /// Poisoned (0xFF bytes: NaN) before the verification run and returned after it.
    Output { dtype: DType, len: usize },
    /// Device-only working memory, poisoned like outputs and never copied back; a step that needs it
    /// initialised says so with [`Step::Fill`].
    Scratch { dtype: DType, len: usize },
    /// A buffer that outlives the job: it stays on the device, under `id` (from [`resident_id`]), until
    /// [`Accelerator::release`], so an iterative algorithm keeps its data on the device between jobs.
    /// The job sees its first `len` elements. A buffer smaller than `len` (or not yet there) is
    /// (re)allocated, losing its contents; with `init` the data are uploaded first. Never poisoned: the
    /// workload poisons what it reads back with [`Step::Fill`]. Jobs with resident buffers are
    /// single-shot (`warmup: 0, repeats: 0`), since a repeat would apply their in-place updates twice.
    /// [`ReadBack`] says whether its `len` elements come home after the job (never with `init`): a pass
    /// whose result both comes home and feeds the next job on the device.
    Resident {
        id: u64,
        dtype: DType,
        len: usize,
        init: Option<HostSlice<'a>>,
        read_back: ReadBack<'a>,
    },
}

/// What becomes of a resident buffer's contents after a job ([`BufferSpec::Resident`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadBack<'a> {
    /// They stay on the device only.
    No,
    /// Returned among the job's outputs, in buffer order.
    Returned,
    /// Copied into the caller's memory, not returned: rows of a plane the caller already holds, so that no
    /// vector is made and copied again per job (at 10k a band's three outputs are 200 MB of fresh pages).
    Into(HostDestination<'a>),
    /// As `Into`, but the copy need only have landed by the time the device's next job returns, or
    /// [`Accelerator::settle`] does: where [`Accelerator::read_backs_land_later`] says so, it runs beside
    /// the next job's kernels (a pipeline over bands downloads band k while band k + 1 is computed); a
    /// job that uses the same resident buffer waits for the copy first. Elsewhere it is `Into`.
    IntoLater(LaterDestination<'a>),
}

impl<'a> ReadBack<'a> {
    /// The caller's memory the contents are copied into (`Into` and `IntoLater`).
    pub fn destination(&self) -> Option<HostDestination<'a>> {
        match self {
            ReadBack::Into(into) => Some(*into),
            ReadBack::IntoLater(later) => Some(later.0),
            ReadBack::No | ReadBack::Returned => None,
        }
    }
}

/// A [`HostDestination`] whose copy may land after its job returns ([`ReadBack::IntoLater`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaterDestination<'a>(HostDestination<'a>);

impl<'a> LaterDestination<'a> {
    /// # Safety
    /// Nothing may read, write or free the memory until the device's next job, or
    /// [`Accelerator::settle`], has returned: the borrow that lent it may end sooner.
    pub unsafe fn new(into: HostDestination<'a>) -> Self {
        LaterDestination(into)
    }
}

/// Caller memory a job's read-back lands in, lent to the job for `'a` ([`ReadBack::Into`]). Only an
/// address and a length, so that jobs stay `Copy`: a backend writes through it once, after the job's runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostDestination<'a> {
    address: *mut u8,
    bytes: usize,
    lent: std::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: made from an exclusive borrow (`f32`) that lasts for `'a`; whichever thread runs the job writes
// through it, and nothing else reads or writes the memory meanwhile.
unsafe impl Send for HostDestination<'_> {}
unsafe impl Sync for HostDestination<'_> {}

impl<'a> HostDestination<'a> {
    pub fn f32(values: &'a mut [f32]) -> Self {
        HostDestination {
            address: values.as_mut_ptr().cast(),
            bytes: std::mem::size_of_val(values),
            lent: std::marker::PhantomData,
        }
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// The address a native model's download writes to.
    pub fn address(&self) -> u64 {
        self.address as u64
    }
    /// The memory, for a backend's read.
    ///
    /// # Safety
    /// At most one of these slices may be alive at a time (the backend's one read of the job).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: the address and length come from a live exclusive borrow of `'a` (`f32`).
        unsafe { std::slice::from_raw_parts_mut(self.address, self.bytes) }
    }
}

/// A fresh id for a [`BufferSpec::Resident`] buffer, unique in this process.
pub fn resident_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl BufferSpec<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            BufferSpec::Input(s) => s.dtype(),
            BufferSpec::Output { dtype, .. }
            | BufferSpec::Scratch { dtype, .. }
            | BufferSpec::Resident { dtype, .. } => *dtype,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            BufferSpec::Input(s) => s.len(),
            BufferSpec::Output { len, .. }
            | BufferSpec::Scratch { len, .. }
            | BufferSpec::Resident { len, .. } => *len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype().bytes()
    }
}

/// One argument of a launch: a job buffer (by index) or a scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepArg {
    Buffer(usize),
    I32(i32),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl StepArg {
    /// A floating scalar in the given precision.
    pub fn real(p: Precision, v: f64) -> Self {
        match p {
            Precision::F64 => StepArg::F64(v),
            Precision::F32 => StepArg::F32(v as f32),
        }
    }
}

/// The work-group size a launch asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// The backend chooses.
    Auto,
    /// This size on GPUs; CPU OpenCL drivers choose their own (they vectorise across the group).
    Prefer(usize),
    /// Exactly this size on every device: the kernel's indexing depends on it.
    Exact(usize),
}

impl Local {
    /// The size to set on a device, or `None` to let the driver choose.
    pub fn on(self, is_gpu: bool) -> Option<usize> {
        match self {
            Local::Auto => None,
            Local::Prefer(n) => is_gpu.then_some(n),
            Local::Exact(n) => Some(n),
        }
    }
}

/// One kernel launch of a job.
#[derive(Debug, Clone)]
pub struct Launch {
    pub kernel: String,
    pub args: Vec<StepArg>,
    /// Total work-items (1-D); the backend rounds up to a multiple of the work-group size.
    pub global: usize,
    /// Work-group size.
    pub local: Local,
}

/// One step of a job, run in order on one in-order queue/stream.
#[derive(Debug, Clone)]
pub enum Step {
    Launch(Launch),
    /// Sets every byte of a buffer (counters, accumulators) before the steps that follow.
    Fill {
        buffer: usize,
        byte: u8,
    },
}

impl Step {
    /// The name shown in per-step timings.
    pub fn name(&self) -> String {
        match self {
            Step::Launch(l) => l.kernel.clone(),
            Step::Fill { buffer, byte } => format!("fill(buffer {buffer}, 0x{byte:02x})"),
        }
    }
}

/// Kernel source of one workload in every dialect. Headers are shared by all three dialects.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    pub name: &'static str,
    pub opencl: &'static str,
    pub sycl: &'static str,
    /// (file name, text) of the headers the sources include, from `cl/common/`.
    pub headers: &'static [(&'static str, &'static str)],
    /// OpenCL build options of this program beyond the common ones (e.g. `-cl-denorms-are-zero`).
    pub opencl_options: &'static str,
}

impl Program {
    /// The source with this program's own `#include "name"` lines replaced by the header text, so the
    /// binary needs no kernel files at run time (OpenCL builds take no in-memory headers).
    pub fn inline_headers(&self, source: &str) -> String {
        let mut out = String::with_capacity(source.len() + 4096);
        for line in source.lines() {
            let included = line
                .trim()
                .strip_prefix("#include")
                .map(|rest| rest.trim().trim_matches('"'))
                .and_then(|name| self.headers.iter().find(|(n, _)| *n == name));
            match included {
                Some((_, text)) => out.push_str(&self.inline_headers(text)),
                None => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }
}

/// One unit of device work: buffers that stay on the device and a sequence of steps (kernel launches and
/// fills) on one in-order queue. The whole sequence is what is warmed up, timed and verified: every model
/// uploads the inputs once, poisons outputs and scratch, runs `warmup` untimed sequences, times `repeats`
/// sequences with device events (the total and each step), re-poisons, runs once more and returns the
/// outputs of that last run. With `warmup: 0, repeats: 0` the job is single-shot (one iteration of an
/// adaptive algorithm): only the verification run happens, and it is the timed one.
#[derive(Debug, Clone)]
pub struct KernelJob<'a> {
    pub program: &'a Program,
    /// Preprocessor definitions for OpenCL and SYCL builds (CUDA instantiates templates instead).
    pub defines: Vec<(String, String)>,
    pub buffers: Vec<BufferSpec<'a>>,
    pub steps: Vec<Step>,
    pub warmup: u32,
    pub repeats: u32,
}

impl<'a> KernelJob<'a> {
    /// A job of one launch whose buffers are given inline, in the kernel's signature order.
    #[allow(clippy::too_many_arguments)]
    pub fn single(
        program: &'a Program,
        defines: Vec<(String, String)>,
        kernel: impl Into<String>,
        args: Vec<KernelArg<'a>>,
        global: usize,
        local: Local,
        warmup: u32,
        repeats: u32,
    ) -> Self {
        let mut buffers = Vec::new();
        let mut step_args = Vec::with_capacity(args.len());
        for a in args {
            step_args.push(match a {
                KernelArg::Input(s) => {
                    buffers.push(BufferSpec::Input(s));
                    StepArg::Buffer(buffers.len() - 1)
                }
                KernelArg::Output { dtype, len } => {
                    buffers.push(BufferSpec::Output { dtype, len });
                    StepArg::Buffer(buffers.len() - 1)
                }
                KernelArg::I32(v) => StepArg::I32(v),
                KernelArg::F32(v) => StepArg::F32(v),
                KernelArg::F64(v) => StepArg::F64(v),
            });
        }
        KernelJob {
            program,
            defines,
            buffers,
            steps: vec![Step::Launch(Launch {
                kernel: kernel.into(),
                args: step_args,
                global,
                local,
            })],
            warmup,
            repeats,
        }
    }

    /// Checks buffer indices and sizes before any device work, so a bad plan is an error, not a fault.
    pub fn validate(&self) -> Result<(), BackendError> {
        if self.steps.is_empty() {
            return Err(BackendError::Runtime(format!(
                "job of program {} has no steps",
                self.program.name
            )));
        }
        for (i, b) in self.buffers.iter().enumerate() {
            if let BufferSpec::Resident {
                dtype,
                len,
                init,
                read_back,
                ..
            } = b
            {
                if *read_back != ReadBack::No && init.is_some() {
                    return Err(BackendError::Runtime(format!(
                        "job of program {}: resident buffer {i} has both initial data and read_back",
                        self.program.name
                    )));
                }
                if self.warmup + self.repeats > 0 {
                    return Err(BackendError::Runtime(format!(
                        "job of program {} has resident buffer {i} but warmup {} and repeats {}: jobs on \
                         resident buffers are single-shot",
                        self.program.name, self.warmup, self.repeats
                    )));
                }
                if let Some(into) = read_back.destination() {
                    if into.bytes() != b.bytes() {
                        return Err(BackendError::Runtime(format!(
                            "job of program {}: resident buffer {i} of {} bytes read back into {} bytes",
                            self.program.name,
                            b.bytes(),
                            into.bytes()
                        )));
                    }
                }
                if let Some(data) = init {
                    if data.dtype() != *dtype || data.len() > *len {
                        return Err(BackendError::Runtime(format!(
                            "resident buffer {i}: {} initial {:?} elements for a {len}-element {dtype:?} buffer",
                            data.len(),
                            data.dtype()
                        )));
                    }
                }
            }
        }
        for (i, step) in self.steps.iter().enumerate() {
            let check = |b: usize| {
                if b >= self.buffers.len() {
                    Err(BackendError::Runtime(format!(
                        "step {i} ({}) names buffer {b}, the job has {}",
                        step.name(),
                        self.buffers.len()
                    )))
                } else {
                    Ok(())
                }
            };
            match step {
                Step::Launch(l) => {
                    if l.global == 0 {
                        return Err(BackendError::Runtime(format!(
                            "step {i} ({}) has a global size of 0",
                            l.kernel
                        )));
                    }
                    for a in &l.args {
                        if let StepArg::Buffer(b) = a {
                            check(*b)?;
                        }
                    }
                }
                Step::Fill { buffer, .. } => check(*buffer)?,
            }
        }
        Ok(())
    }
}

/// Median of the samples (0 for none).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

/// Per-step timing and resources of a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepReport {
    pub name: String,
    /// Median over the timed repeats, seconds (device timer).
    pub median_s: f64,
    /// Registers and occupancy of a launch; `None` for fills.
    pub resources: Option<Resources>,
    /// Work-group size used by a launch (0 for fills or when the runtime chose).
    pub local_used: usize,
}

/// Registers and occupancy, with where they came from (or why absent).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Resources {
    pub regs_per_thread: Option<u32>,
    pub occupancy: Option<f64>,
    pub source: String,
}

/// What a job returns.
#[derive(Debug, Clone)]
pub struct JobOutput {
    /// Outputs of the final verification run, in buffer order (read-back resident buffers among them).
    pub outputs: Vec<HostVec>,
    /// Device-timer times of the timed repeats (the whole step sequence), seconds.
    pub times_s: Vec<f64>,
    /// Each step's median time and resources, in step order.
    pub steps: Vec<StepReport>,
    /// Program build / JIT time, seconds (0 when the program came from the per-process cache).
    pub build_s: f64,
    /// Resources of the launch that takes the most time (the one a register/occupancy column describes).
    pub resources: Resources,
    pub build_options: String,
    /// Work-group size of that launch.
    pub local_used: usize,
}

impl JobOutput {
    /// Builds the summary fields from per-step reports: `resources` and `local_used` come from the slowest
    /// launch.
    pub fn from_steps(
        outputs: Vec<HostVec>,
        times_s: Vec<f64>,
        steps: Vec<StepReport>,
        build_s: f64,
        build_options: String,
    ) -> Self {
        let main = steps
            .iter()
            .filter(|s| s.resources.is_some())
            .max_by(|a, b| a.median_s.total_cmp(&b.median_s));
        let (resources, local_used) = match main {
            Some(s) => (s.resources.clone().unwrap_or_default(), s.local_used),
            None => (Resources::default(), 0),
        };
        JobOutput {
            outputs,
            times_s,
            steps,
            build_s,
            resources,
            build_options,
            local_used,
        }
    }
}

/// Errors from a backend, with the stage that failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("program build failed for {program} on {device}:\n{log}")]
    Build {
        program: String,
        device: String,
        log: String,
    },
    #[error("{0}")]
    Runtime(String),
}

/// A device of a non-`cpu` model.
pub trait Accelerator: Send + Sync {
    fn model(&self) -> Model;
    /// Stable id, as accepted by `--backend` (for example `opencl:0:1`).
    fn id(&self) -> String;
    fn info(&self) -> &DeviceInfo;
    /// Toolchain text for provenance (compiler/runtime versions).
    fn toolchain(&self) -> String;
    fn run(&self, job: &KernelJob) -> Result<JobOutput, BackendError>;
    /// Frees the resident buffers ([`BufferSpec::Resident`]) with these ids; unknown ids are ignored.
    fn release(&self, ids: &[u64]);
    /// Free device memory now, bytes, where the runtime can say (CUDA); `None` elsewhere (OpenCL has no
    /// standard query).
    fn free_memory(&self) -> Option<u64> {
        None
    }
    /// Creates the device's context and queue now, so that timed work does not pay for them; returns the
    /// seconds that took, or 0 where nothing was left to create (OpenCL's discovery already made them; a
    /// device prepared before in this process).
    fn prepare(&self) -> Result<f64, BackendError> {
        Ok(0.0)
    }
    /// Whether [`ReadBack::IntoLater`] copies land after their job returns here (CUDA); elsewhere they
    /// land with their job, as [`ReadBack::Into`] does.
    fn read_backs_land_later(&self) -> bool {
        false
    }
    /// Waits until the last job's [`ReadBack::IntoLater`] copies have landed; their error, if one failed.
    fn settle(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

/// A runnable target: the Rust `cpu` model or a device of another model.
pub enum Target {
    Cpu(cpu::CpuTarget),
    Device(Box<dyn Accelerator>),
}

impl Target {
    pub fn id(&self) -> String {
        match self {
            Target::Cpu(_) => "cpu".into(),
            Target::Device(d) => d.id(),
        }
    }
    pub fn model(&self) -> Model {
        match self {
            Target::Cpu(_) => Model::Cpu,
            Target::Device(d) => d.model(),
        }
    }
    pub fn info(&self) -> &DeviceInfo {
        match self {
            Target::Cpu(c) => &c.info,
            Target::Device(d) => d.info(),
        }
    }
    pub fn toolchain(&self) -> String {
        match self {
            Target::Cpu(c) => c.toolchain(),
            Target::Device(d) => d.toolchain(),
        }
    }
}

/// Everything found on this machine: runnable targets, and what is absent with the reason.
pub struct Discovery {
    pub targets: Vec<Target>,
    pub absent: Vec<Absent>,
}

/// Probes all four models. Never fails: an unavailable model becomes an [`Absent`] entry.
pub fn discover() -> Discovery {
    discover_among(&Model::ALL, None)
}

/// [`discover`] limited to `models` (the `cpu` target is always there), opening only the OpenCL platforms
/// listed (`None`: all): a command given one backend does not pay for starting the other runtimes (1.5 s on
/// the H200 machine, for PoCL, NVIDIA OpenCL and CUDA).
fn discover_among(models: &[Model], opencl_platforms: Option<&[usize]>) -> Discovery {
    let mut targets = vec![Target::Cpu(cpu::CpuTarget::new())];
    let mut absent = Vec::new();
    let mut add = |found: Result<Vec<Box<dyn Accelerator>>, Absent>| match found {
        Ok(list) => targets.extend(list.into_iter().map(Target::Device)),
        Err(a) => absent.push(a),
    };
    if models.contains(&Model::Opencl) {
        add(opencl::discover_platforms(opencl_platforms));
    }
    if models.contains(&Model::Cuda) {
        add(discover_cuda());
    }
    if models.contains(&Model::Sycl) {
        add(discover_sycl());
    }
    Discovery { targets, absent }
}

/// [`discover`] limited to the models `selectors` name; every model when there are none.
pub fn discover_for(selectors: &[Selector]) -> Discovery {
    if selectors.is_empty() {
        return discover();
    }
    let models: Vec<Model> = selectors.iter().map(|s| s.model).collect();
    // OpenCL selectors that all name a platform (`opencl:1`, `opencl:1:0`) open only those platforms.
    let opencl: Vec<&Selector> = selectors
        .iter()
        .filter(|s| s.model == Model::Opencl)
        .collect();
    let platforms: Option<Vec<usize>> = opencl.iter().map(|s| s.path.first().copied()).collect();
    discover_among(&models, platforms.as_deref())
}

/// One target chosen by a selection, or why it cannot run.
pub enum Choice<'a> {
    Run(&'a Target),
    Absent(Absent),
}

impl Discovery {
    /// Resolves `--backend` selectors against what was discovered; no selector means every target found plus
    /// every absent model. A selector that matches nothing becomes an absent choice with the reason (the
    /// model's own reason when the whole model is absent).
    pub fn select(&self, selectors: &[Selector]) -> Vec<Choice<'_>> {
        if selectors.is_empty() {
            let mut out: Vec<Choice> = self.targets.iter().map(Choice::Run).collect();
            out.extend(self.absent.iter().cloned().map(Choice::Absent));
            return out;
        }
        let mut out = Vec::new();
        for sel in selectors {
            let matched: Vec<&Target> = self
                .targets
                .iter()
                .filter(|t| sel.matches(&t.id()))
                .collect();
            if !matched.is_empty() {
                out.extend(matched.into_iter().map(Choice::Run));
                continue;
            }
            let absent = match self.absent.iter().find(|a| a.model == sel.model) {
                Some(a) => Absent {
                    id: sel.to_string(),
                    ..a.clone()
                },
                None => Absent {
                    model: sel.model,
                    id: sel.to_string(),
                    why: Unavailable::NoDevice,
                    reason: format!("no device '{sel}' (see `astroport devices`)"),
                },
            };
            out.push(Choice::Absent(absent));
        }
        out
    }

    /// The one target of a single-backend command: the first selected one that exists (each absent one
    /// before it is printed with its reason), or with no selector the first GPU found, else `cpu`.
    pub fn single(&self, selectors: &[Selector]) -> Result<&Target, String> {
        if selectors.is_empty() {
            return self
                .targets
                .iter()
                .find(|t| t.info().is_gpu)
                .or_else(|| self.targets.iter().find(|t| t.model() == Model::Cpu))
                .ok_or_else(|| "no backend available (see `astroport devices`)".to_string());
        }
        for choice in self.select(selectors) {
            match choice {
                Choice::Run(t) => return Ok(t),
                Choice::Absent(a) => crate::say!("{}: {}: {}", a.id, a.why.status(), a.reason),
            }
        }
        Err("none of the selected backends is available (see `astroport devices`)".into())
    }
}

/// Opens one backend by id (`cpu`, `opencl`, `opencl:0:1`, `cuda:0`, `sycl`): the first device that matches,
/// or why none can run. The entry point for library users: `astroport::backend::open("cpu")?`.
pub fn open(id: &str) -> Result<Target, String> {
    let selector: Selector = id.parse()?;
    let mut discovery = discover_for(std::slice::from_ref(&selector));
    match discovery
        .targets
        .iter()
        .position(|t| selector.matches(&t.id()))
    {
        Some(k) => Ok(discovery.targets.swap_remove(k)),
        None => match discovery.select(&[selector]).into_iter().next() {
            Some(Choice::Absent(a)) => Err(format!("{}: {}: {}", a.id, a.why.status(), a.reason)),
            _ => Err(format!("no backend '{id}' (see `astroport devices`)")),
        },
    }
}

fn discover_cuda() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    #[cfg(has_cuda)]
    {
        cuda::discover()
    }
    #[cfg(not(has_cuda))]
    {
        Err(Absent {
            model: Model::Cuda,
            id: "cuda".into(),
            why: Unavailable::NotBuilt,
            reason: env!("ASTROPORT_CUDA_STATUS").into(),
        })
    }
}

fn discover_sycl() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    #[cfg(has_sycl)]
    {
        sycl::discover()
    }
    #[cfg(not(has_sycl))]
    {
        Err(Absent {
            model: Model::Sycl,
            id: "sycl".into(),
            why: Unavailable::NotBuilt,
            reason: env!("ASTROPORT_SYCL_STATUS").into(),
        })
    }
}

/// A `--backend` selector: a whole model (`opencl`) or one device (`opencl:0:1`, `cuda:0`, `sycl:0`, `cpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub model: Model,
    /// Index path after the model name, empty for "every device of the model".
    pub path: Vec<usize>,
}

impl std::str::FromStr for Selector {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let head = parts.next().unwrap_or_default();
        let model = Model::ALL.into_iter().find(|m| m.name() == head).ok_or_else(|| {
            format!("unknown backend '{s}': expected cpu, opencl[:P:D], cuda[:N] or sycl[:N] (see `astroport devices`)")
        })?;
        let path = parts
            .map(|p| {
                p.parse::<usize>()
                    .map_err(|_| format!("unknown backend '{s}': '{p}' is not a device index"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max = match model {
            Model::Cpu => 0,
            Model::Opencl => 2,
            Model::Cuda | Model::Sycl => 1,
        };
        if path.len() > max {
            return Err(format!(
                "unknown backend '{s}': {model} takes at most {max} indices"
            ));
        }
        Ok(Selector { model, path })
    }
}

impl Selector {
    /// Does the device id (for example `opencl:0:1`) fall under this selector?
    pub fn matches(&self, id: &str) -> bool {
        let mut want = self.model.name().to_string();
        for p in &self.path {
            want.push_str(&format!(":{p}"));
        }
        id == want || id.starts_with(&format!("{want}:"))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.model.name())?;
        for p in &self.path {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}
