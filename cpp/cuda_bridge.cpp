// CUDA bridge (g++ through cxx_build): converts the cxx types and forwards to the plain C++ API that
// ports/cuda/cuda_host.cu (nvcc) implements. No CUDA header is included here, and no cxx header reaches nvcc.
// Include dirs: only cxx_build's own (it exports the crate as "astroport/..."); nothing extra.
#include "astroport/cpp/cuda_bridge.h"

#include "astroport/cpp/native_convert.h"
#include "astroport/ports/cuda/cuda_host.h"

namespace astroport {

rust::Vec<NativeDevice> cuda_devices() { return from_plain(astroport_cuda::devices()); }

rust::String cuda_runtime_version() { return rust::String(astroport_cuda::runtime_version()); }

uint64_t cuda_free_memory(int32_t device) { return astroport_cuda::free_memory(static_cast<int>(device)); }

double cuda_prepare(int32_t device) { return astroport_cuda::prepare(static_cast<int>(device)); }

bool cuda_staged_copies(int32_t device) { return astroport_cuda::staged_copies(static_cast<int>(device)); }

void cuda_settle(int32_t device) { astroport_cuda::settle(static_cast<int>(device)); }

void cuda_release(int32_t device, rust::Slice<const uint64_t> ids) {
    astroport_cuda::release(static_cast<int>(device), std::vector<uint64_t>(ids.begin(), ids.end()));
}

NativeOutcome cuda_run_job(int32_t device, const NativeJob &job, rust::Slice<const NativeBuffer> buffers,
                           rust::Slice<const NativeStep> steps, rust::Slice<const NativeArg> args) {
    return from_plain(astroport_cuda::run_job(static_cast<int>(device), to_plain(job, buffers, steps, args)));
}

}  // namespace astroport
