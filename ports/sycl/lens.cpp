// Lens deflection gradient, SYCL 2020 free-function kernel, compiled at run time by DPC++
// (sycl_ext_oneapi_kernel_compiler) with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
// Same arithmetic as cl/lens.cl through the shared header; LENS_PIXELS_PER_ITEM pixels along x per work-item, for a band of rows.
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "lens_sie.h"

namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void ASTRO_CAT(lens_sie_grad, ASTRO_SUFFIX)(
    const ASTRO_REAL *n11, const ASTRO_REAL *n12, const ASTRO_REAL *n22, const int *ix, const int *iy,
    const ASTRO_REAL *fx, const ASTRO_REAL *fy, int n_halos, int nx, int row0, int rows, ASTRO_REAL h,
    ASTRO_REAL *gx_out, ASTRO_REAL *gy_out)
{
    const size_t gid = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    const int chunks = (nx + LENS_PIXELS_PER_ITEM - 1) / LENS_PIXELS_PER_ITEM;
    if (gid >= (size_t)chunks * (size_t)rows) return;
    const int i0 = (int)(gid % (size_t)chunks) * LENS_PIXELS_PER_ITEM;
    const int r = (int)(gid / (size_t)chunks);
    const int j = row0 + r;
    ASTRO_REAL gx[LENS_PIXELS_PER_ITEM], gy[LENS_PIXELS_PER_ITEM];
    #pragma unroll
    for (int p = 0; p < LENS_PIXELS_PER_ITEM; ++p) gx[p] = gy[p] = 0;
    for (int k = 0; k < n_halos; ++k) {
        const ASTRO_REAL n11k = n11[k], n12k = n12[k], n22k = n22[k], fxk = fx[k];
        const ASTRO_REAL dy = lens_exact_offset((ASTRO_REAL)(j - iy[k]), h, fy[k]);
        const ASTRO_REAL di = (ASTRO_REAL)(i0 - ix[k]);
        #pragma unroll
        for (int p = 0; p < LENS_PIXELS_PER_ITEM; ++p) {
            const ASTRO_REAL dx = lens_exact_offset(di + (ASTRO_REAL)p, h, fxk);
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
