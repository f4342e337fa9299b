// Lens deflection gradient, CUDA C++. Same arithmetic as cl/lens.cl through cl/common/lens_sie.h (included
// once per precision, each in its own namespace). The kernel only computes its thread index: the work of
// one thread is lens_sie_item() in the shared header.
#include "cuda_host.h"
#include "astro_dialect.h"

namespace lens_f32 {
#define ASTRO_REAL float
#include "lens_sie.h"
#undef ASTRO_REAL
}  // namespace lens_f32
namespace lens_f64 {
#define ASTRO_REAL double
#include "lens_sie.h"
#undef ASTRO_REAL
}  // namespace lens_f64
using namespace lens_f32;
using namespace lens_f64;

template <typename T>
__global__ void lens_sie_grad(const T *__restrict__ n11, const T *__restrict__ n12, const T *__restrict__ n22,
                              const int *__restrict__ ix, const int *__restrict__ iy, const T *__restrict__ fx,
                              const T *__restrict__ fy, int n_halos, int nx, int row0, int rows, T h,
                              T *__restrict__ gx_out, T *__restrict__ gy_out)
{
    const size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    lens_sie_item(gid, n11, n12, n22, ix, iy, fx, fy, n_halos, nx, row0, rows, h, gx_out, gy_out);
}

namespace astroport_cuda {
extern const KernelEntry lens_kernels[] = {
    {"lens_sie_grad_f32", reinterpret_cast<const void *>(&lens_sie_grad<float>)},
    {"lens_sie_grad_f64", reinterpret_cast<const void *>(&lens_sie_grad<double>)},
};
extern const int lens_kernel_count = 2;
}  // namespace astroport_cuda
