//! The `sycl` model: SYCL 2020 free-function kernels in `ports/sycl/`, compiled at run time by the DPC++
//! runtime; host plumbing in `cpp/sycl_host.cpp`, reached through `cpp/sycl_bridge.cpp`.

use super::native::{ffi::NativeDevice, NativeAccelerator};
use super::{Absent, Accelerator, Model, Unavailable};

#[cxx::bridge(namespace = "astroport")]
mod ffi {
    unsafe extern "C++" {
        include!("astroport/cpp/sycl_bridge.h");
        type NativeJob = crate::backend::native::ffi::NativeJob;
        type NativeArg = crate::backend::native::ffi::NativeArg;
        type NativeOutcome = crate::backend::native::ffi::NativeOutcome;
        type NativeDevice = crate::backend::native::ffi::NativeDevice;
        fn sycl_devices() -> Result<Vec<NativeDevice>>;
        fn sycl_runtime_version() -> Result<String>;
        fn sycl_run_job(
            device: i32,
            job: &NativeJob,
            args: &[NativeArg],
            inputs: &[u8],
        ) -> Result<NativeOutcome>;
    }
}

pub fn discover() -> Result<Vec<Box<dyn Accelerator>>, Absent> {
    let absent = |why, reason: String| Absent {
        model: Model::Sycl,
        id: "sycl".into(),
        why,
        reason,
    };
    let devices: Vec<NativeDevice> = ffi::sycl_devices().map_err(|e| {
        let msg = e.what().to_string();
        let why = if msg.contains("no device") || msg.contains("No device") {
            Unavailable::NoDevice
        } else {
            Unavailable::NoRuntime
        };
        absent(why, format!("SYCL runtime: {msg}"))
    })?;
    if devices.is_empty() {
        return Err(absent(
            Unavailable::NoDevice,
            "the SYCL runtime reports no device".into(),
        ));
    }
    let version = ffi::sycl_runtime_version().unwrap_or_default();
    let toolchain = format!("DPC++ runtime {version}; run-time compilation (kernel_compiler)");
    Ok(devices
        .iter()
        .map(|d| {
            Box::new(NativeAccelerator::from_native(
                Model::Sycl,
                d,
                "SYCL",
                toolchain.clone(),
                ffi::sycl_run_job,
            )) as Box<dyn Accelerator>
        })
        .collect())
}
