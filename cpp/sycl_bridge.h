// SYCL host plumbing (written once for every workload), reached from Rust through cxx (src/backend/sycl.rs).
// Kernels are SYCL free-function kernels compiled at run time by DPC++ (sycl_ext_oneapi_kernel_compiler).
#pragma once
#include "astroport/src/backend/native.rs.h"
#include "rust/cxx.h"

namespace astroport {
// All SYCL devices the runtime sees. Throws std::runtime_error when the runtime cannot start.
rust::Vec<NativeDevice> sycl_devices();
// Runtime version string, for provenance.
rust::String sycl_runtime_version();
// Build (cached per program+defines), poison outputs, warm up, time `repeats` launches with profiling
// events, re-poison, run once more and return that run's outputs. Throws std::runtime_error with the build
// log on a failed build.
// Frees resident buffers (BufferSpec::Resident) of one device.
void sycl_release(int32_t device, rust::Slice<const uint64_t> ids);
NativeOutcome sycl_run_job(int32_t device, const NativeJob &job, rust::Slice<const NativeBuffer> buffers,
                           rust::Slice<const NativeStep> steps, rust::Slice<const NativeArg> args);
}  // namespace astroport
