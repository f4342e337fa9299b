// Lens deflection gradient, SYCL 2020 free-function kernel, compiled at run time by DPC++
// (sycl_ext_oneapi_kernel_compiler) with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
// The kernel only computes its work-item index: the work of one item is lens_sie_item() in the shared header.
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
    lens_sie_item(gid, n11, n12, n22, ix, iy, fx, fy, n_halos, nx, row0, rows, h, gx_out, gy_out);
}
