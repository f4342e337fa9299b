// CUDA host plumbing: a plain C++ API (no cxx and no CUDA types) implemented by ports/cuda/cuda_host.cu
// (nvcc) and called from the g++ bridge cpp/cuda_bridge.cpp. Written once for every workload: kernels are
// found by name in the per-workload tables that each ports/cuda/<workload>.cu defines.
//
// Include form: "../../cpp/native_job.h" is resolved relative to this file, so it needs no include dir from
// nvcc (ports/cuda/*.cu) nor from cxx_build (cpp/cuda_bridge.cpp reaches this file as
// "astroport/ports/cuda/cuda_host.h" through cxx_build's crate include dir). No CUDA or cxx header here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../../cpp/native_job.h"

namespace astroport_cuda {

// One __global__ function: its symbol name (what NativeJob::kernel names) and its host stub address, as
// taken by `reinterpret_cast<const void *>(&kernel<T>)` in the defining .cu file.
struct KernelEntry {
    const char *name;
    const void *func;
};

// Every workload with CUDA kernels, one X(...) per line. Adding a workload = one line here plus its .cu file
// defining `extern const KernelEntry <w>_kernels[] = {...}; extern const int <w>_kernel_count = N;` inside
// namespace astroport_cuda (see ports/cuda/lens.cu).
#define ASTROPORT_CUDA_WORKLOADS(X) \
    X(lens)                      \
    X(lombscargle)               \
    X(cubature)                  \
    X(sht)                       \
    X(imgsub)                    \
    X(selftest)

#define ASTROPORT_CUDA_DECLARE_TABLE(w)       \
    extern const KernelEntry w##_kernels[]; \
    extern const int w##_kernel_count;
ASTROPORT_CUDA_WORKLOADS(ASTROPORT_CUDA_DECLARE_TABLE)
#undef ASTROPORT_CUDA_DECLARE_TABLE

// All CUDA devices. Throws std::runtime_error("no CUDA device: ...") carrying the CUDA error string when
// there is no driver or no device.
std::vector<astroport_native::Device> devices();

// "runtime 13.0, driver 13.0" ("driver none" when no driver is installed). Does not throw for a missing
// driver.
std::string runtime_version();

// Free memory of `device` now (cudaMemGetInfo), bytes. Throws std::runtime_error on a CUDA error.
uint64_t free_memory(int device);

// Creates `device`'s primary context, its job stream and memory pool, and its staging lanes for large copies,
// ahead of any timed work; returns the seconds that took (about 0.1 s on an H200), or 0 when this process
// had already prepared the device.
double prepare(int device);

// Whether `device`'s large copies go through its staging lanes now (made by prepare()): its downloads then
// write the host's pages from several threads, so they need not be mapped beforehand.
bool staged_copies(int device);

// Waits until every read-back of `device`'s last job has landed (astroport_native::Buffer::read_back_later);
// throws its error.
void settle(int device);

// Frees the resident buffers (astroport_native::kResident) of `device` with these ids; unknown ids are ignored.
// A read-back still landing is waited for first.
void release(int device, const std::vector<uint64_t> &ids);

// Runs one job on `device` (semantics: cpp/native_job.h): inputs are uploaded from, and outputs copied
// straight into, the caller's host memory the buffers name.
// Throws std::runtime_error (CUDA call, file:line, error string) on any failure; frees everything.
astroport_native::Outcome run_job(int device, const astroport_native::Job &job);

}  // namespace astroport_cuda
