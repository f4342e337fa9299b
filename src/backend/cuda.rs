//! The `cuda` model: kernels in `ports/cuda/*.cu` compiled by nvcc at build time; host plumbing in
//! `ports/cuda/cuda_host.cu`, reached through the g++ bridge `cpp/cuda_bridge.cpp`.

use super::native::{discover_native, NativeFns};
use super::{Absent, Accelerator, Model};

#[cxx::bridge(namespace = "astroport")]
mod ffi {
    unsafe extern "C++" {
        include!("astroport/cpp/cuda_bridge.h");
        type NativeJob = crate::backend::native::ffi::NativeJob;
        type NativeBuffer = crate::backend::native::ffi::NativeBuffer;
        type NativeStep = crate::backend::native::ffi::NativeStep;
        type NativeArg = crate::backend::native::ffi::NativeArg;
        type NativeOutcome = crate::backend::native::ffi::NativeOutcome;
        type NativeDevice = crate::backend::native::ffi::NativeDevice;
        fn cuda_devices() -> Result<Vec<NativeDevice>>;
        fn cuda_runtime_version() -> Result<String>;
        fn cuda_free_memory(device: i32) -> Result<u64>;
        fn cuda_prepare(device: i32) -> Result<f64>;
        fn cuda_staged_copies(device: i32) -> bool;
        fn cuda_release(device: i32, ids: &[u64]) -> Result<()>;
        fn cuda_settle(device: i32) -> Result<()>;
        /// # Safety
        /// Every buffer's `host` address must be valid for its bytes (read for inputs and resident
        /// initial data, written for outputs) until the call returns.
        unsafe fn cuda_run_job(
            device: i32,
            job: &NativeJob,
            buffers: &[NativeBuffer],
            steps: &[NativeStep],
            args: &[NativeArg],
        ) -> Result<NativeOutcome>;
    }
}

pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    let version = ffi::cuda_runtime_version().unwrap_or_default();
    crate::exec::trace_event(|| "cuda: runtime and driver versions read".into());
    let toolchain = format!(
        "nvcc {}; {version}; flags {}",
        env!("ASTROPORT_NVCC_VERSION"),
        env!("ASTROPORT_NVCC_FLAGS")
    );
    let devices = ffi::cuda_devices();
    crate::exec::trace_event(|| "cuda: devices listed".into());
    discover_native(
        Model::Cuda,
        devices,
        toolchain,
        NativeFns {
            run_job: ffi::cuda_run_job,
            release: ffi::cuda_release,
            free_memory: Some(ffi::cuda_free_memory),
            prepare: Some(ffi::cuda_prepare),
            parallel_downloads: Some(ffi::cuda_staged_copies),
            settle: Some(ffi::cuda_settle),
        },
    )
}
