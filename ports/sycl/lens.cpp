// Lens deflection gradient, SYCL 2020 free-function kernel, compiled at run time by DPC++
// (sycl_ext_oneapi_kernel_compiler) with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
// Same arithmetic as cl/lens.cl through the shared header; one work-item per pixel of a band of rows.
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
    if (gid >= (size_t)nx * (size_t)rows) return;
    const int i = (int)(gid % (size_t)nx);
    const int j = row0 + (int)(gid / (size_t)nx);
    ASTRO_REAL gx = 0, gy = 0;
    for (int k = 0; k < n_halos; ++k) {
        const ASTRO_REAL dx = lens_exact_offset(i, ix[k], h, fx[k]);
        const ASTRO_REAL dy = lens_exact_offset(j, iy[k], h, fy[k]);
        lens_sie_accumulate(dx, dy, n11[k], n12[k], n22[k], &gx, &gy);
    }
    gx_out[gid] = gx;
    gy_out[gid] = gy;
}
