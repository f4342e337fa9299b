// Kernels that exist to test the host plumbing itself (tests/backends.rs): `writes_nothing` writes nothing,
// so a job's output must come back as the poison (NaN), never stale or zero data.
#include "cuda_host.h"

__global__ void writes_nothing(float *out, int n) {}

namespace astroport_cuda {
extern const KernelEntry selftest_kernels[] = {
    {"writes_nothing", reinterpret_cast<const void *>(&writes_nothing)},
};
extern const int selftest_kernel_count = sizeof(selftest_kernels) / sizeof(selftest_kernels[0]);
}  // namespace astroport_cuda
