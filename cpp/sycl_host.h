// SYCL host plumbing, plain C++17 (no cxx types): testable with g++ alone against DPC++'s runtime
// (sycl_ext_oneapi_kernel_compiler builds the kernels at run time; see docs/toolchain.md).
// cpp/sycl_bridge.cpp adapts it to the cxx bridge declared in cpp/sycl_bridge.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "astroport/cpp/native_job.h"

namespace astroport_sycl {

// The SYCL devices the runtime sees that this host plumbing can drive (USM device allocations; see
// sycl_host.cpp for why PoCL's OpenCL device is left out). Device::index is the index run_job takes.
// Throws std::runtime_error when the runtime cannot start or no usable device is found.
std::vector<astroport_native::Device> devices();

// Runtime provenance: SYCL library version, platform and driver versions of the usable devices.
std::string runtime_version();

// Frees the resident buffers of `device` with these ids; unknown ids are ignored.
void release(int device, const std::vector<uint64_t> &ids);

// Builds job.source (cached per device, program and defines for the life of the process) and runs the job
// (semantics: cpp/native_job.h), copying the last run's outputs into the caller's host memory the output
// buffers name. Throws std::runtime_error (with the build log on a failed build).
astroport_native::Outcome run_job(int device, const astroport_native::Job &job);

}  // namespace astroport_sycl
