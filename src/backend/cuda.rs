//! The `cuda` model: kernels in `ports/cuda/*.cu` compiled by nvcc at build time; host plumbing in
//! `ports/cuda/cuda_host.cu`, reached through the g++ bridge `cpp/cuda_bridge.cpp`.

use super::native::{ffi::NativeDevice, NativeAccelerator};
use super::{Absent, Accelerator, Model, Unavailable};

#[cxx::bridge(namespace = "astroport")]
mod ffi {
    unsafe extern "C++" {
        include!("astroport/cpp/cuda_bridge.h");
        type NativeJob = crate::backend::native::ffi::NativeJob;
        type NativeArg = crate::backend::native::ffi::NativeArg;
        type NativeOutcome = crate::backend::native::ffi::NativeOutcome;
        type NativeDevice = crate::backend::native::ffi::NativeDevice;
        fn cuda_devices() -> Result<Vec<NativeDevice>>;
        fn cuda_runtime_version() -> Result<String>;
        fn cuda_run_job(
            device: i32,
            job: &NativeJob,
            args: &[NativeArg],
            inputs: &[u8],
        ) -> Result<NativeOutcome>;
    }
}

pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    let absent = |why, reason: String| Absent {
        model: Model::Cuda,
        id: "cuda".into(),
        why,
        reason,
    };
    let devices: Vec<NativeDevice> = ffi::cuda_devices().map_err(|e| {
        let msg = e.what().to_string();
        let why = if msg.contains("no CUDA-capable device") || msg.contains("no device") {
            Unavailable::NoDevice
        } else {
            Unavailable::NoRuntime
        };
        absent(why, msg)
    })?;
    if devices.is_empty() {
        return Err(absent(
            Unavailable::NoDevice,
            "the CUDA runtime reports no device".into(),
        ));
    }
    let version = ffi::cuda_runtime_version().unwrap_or_default();
    let toolchain = format!(
        "nvcc {}; {version}; flags {}",
        env!("ASTROPORT_NVCC_VERSION"),
        env!("ASTROPORT_NVCC_FLAGS")
    );
    Ok(devices
        .iter()
        .map(|d| {
            Box::new(NativeAccelerator::from_native(
                Model::Cuda,
                d,
                "CUDA",
                toolchain.clone(),
                ffi::cuda_run_job,
            )) as Box<dyn Accelerator>
        })
        .collect())
}
