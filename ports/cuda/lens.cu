// Lens deflection gradient, CUDA C++. Same arithmetic as cl/lens.cl through cl/common/lens_sie.h (included
// once per precision, each in its own namespace); LENS_PIXELS_PER_ITEM pixels per thread along x, for a band of rows; the halo
// parameters are read uniformly through the read-only cache.
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
    const int chunks = (nx + LENS_PIXELS_PER_ITEM - 1) / LENS_PIXELS_PER_ITEM;
    if (gid >= (size_t)chunks * (size_t)rows) return;
    const int i0 = (int)(gid % (size_t)chunks) * LENS_PIXELS_PER_ITEM;
    const int r = (int)(gid / (size_t)chunks);
    const int j = row0 + r;
    T gx[LENS_PIXELS_PER_ITEM], gy[LENS_PIXELS_PER_ITEM];
    #pragma unroll
    for (int p = 0; p < LENS_PIXELS_PER_ITEM; ++p) gx[p] = gy[p] = 0;
    for (int k = 0; k < n_halos; ++k) {
        const T n11k = n11[k], n12k = n12[k], n22k = n22[k], fxk = fx[k];
        const T dy = lens_exact_offset((T)(j - iy[k]), h, fy[k]);
        const T di = (T)(i0 - ix[k]);
        #pragma unroll
        for (int p = 0; p < LENS_PIXELS_PER_ITEM; ++p) {
            const T dx = lens_exact_offset(di + (T)p, h, fxk);
            lens_sie_accumulate(dx, dy, n11k, n12k, n22k, &gx[p], &gy[p]);
        }
    }
    const size_t row_base = (size_t)r * (size_t)nx;
    #pragma unroll
    for (int p = 0; p < LENS_PIXELS_PER_ITEM; ++p) {
        if (i0 + p < nx) {
            gx_out[row_base + i0 + p] = gx[p];
            gy_out[row_base + i0 + p] = gy[p];
        }
    }
}

namespace astroport_cuda {
extern const KernelEntry lens_kernels[] = {
    {"lens_sie_grad_f32", reinterpret_cast<const void *>(&lens_sie_grad<float>)},
    {"lens_sie_grad_f64", reinterpret_cast<const void *>(&lens_sie_grad<double>)},
};
extern const int lens_kernel_count = 2;
}  // namespace astroport_cuda
