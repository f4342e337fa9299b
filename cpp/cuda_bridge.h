// CUDA bridge: a g++ translation unit that includes rust/cxx.h and forwards to the plain C++ API of
// ports/cuda/cuda_host.h (compiled by nvcc), so that no .cu file sees cxx headers.
#pragma once
#include "astroport/src/backend/native.rs.h"
#include "rust/cxx.h"

namespace astroport {
rust::Vec<NativeDevice> cuda_devices();          // throws std::runtime_error("no CUDA driver ...") etc.
rust::String cuda_runtime_version();             // "runtime 13.0, driver 13.0"
uint64_t cuda_free_memory(int32_t device);       // cudaMemGetInfo's free bytes
double cuda_prepare(int32_t device);             // context, stream and pool created; seconds taken
bool cuda_staged_copies(int32_t device);         // large copies staged through page-locked lanes now
void cuda_release(int32_t device, rust::Slice<const uint64_t> ids);  // frees resident buffers
void cuda_settle(int32_t device);                // the last job's later read-backs landed
NativeOutcome cuda_run_job(int32_t device, const NativeJob &job, rust::Slice<const NativeBuffer> buffers,
                           rust::Slice<const NativeStep> steps, rust::Slice<const NativeArg> args);
}  // namespace astroport
