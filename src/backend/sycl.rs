//! The `sycl` model: SYCL 2020 free-function kernels in `ports/sycl/`, compiled at run time by the DPC++
//! runtime; host plumbing in `cpp/sycl_host.cpp`, reached through `cpp/sycl_bridge.cpp`.

use super::native::{discover_native, NativeFns};
use super::{Absent, Accelerator, Model};

#[cxx::bridge(namespace = "astroport")]
mod ffi {
    unsafe extern "C++" {
        include!("astroport/cpp/sycl_bridge.h");
        type NativeJob = crate::backend::native::ffi::NativeJob;
        type NativeBuffer = crate::backend::native::ffi::NativeBuffer;
        type NativeStep = crate::backend::native::ffi::NativeStep;
        type NativeArg = crate::backend::native::ffi::NativeArg;
        type NativeOutcome = crate::backend::native::ffi::NativeOutcome;
        type NativeDevice = crate::backend::native::ffi::NativeDevice;
        fn sycl_devices() -> Result<Vec<NativeDevice>>;
        fn sycl_runtime_version() -> Result<String>;
        fn sycl_release(device: i32, ids: &[u64]) -> Result<()>;
        /// # Safety
        /// Every buffer's `host` address must be valid for its bytes (read for inputs and resident
        /// initial data, written for outputs) until the call returns.
        unsafe fn sycl_run_job(
            device: i32,
            job: &NativeJob,
            buffers: &[NativeBuffer],
            steps: &[NativeStep],
            args: &[NativeArg],
        ) -> Result<NativeOutcome>;
    }
}

pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    let version = ffi::sycl_runtime_version().unwrap_or_default();
    let toolchain = format!("DPC++ runtime {version}; run-time compilation (kernel_compiler)");
    discover_native(
        Model::Sycl,
        ffi::sycl_devices(),
        toolchain,
        NativeFns {
            run_job: ffi::sycl_run_job,
            release: ffi::sycl_release,
            free_memory: None,
            prepare: None,
            parallel_downloads: None,
            settle: None,
        },
    )
}
