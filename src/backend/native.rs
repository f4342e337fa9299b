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
        /// Output buffers of the final (re-poisoned) verification run, concatenated in argument order.
        pub outputs: Vec<u8>,
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
}
