/* Lens deflection gradient, OpenCL C 1.2. Built with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
 * The kernel only computes its work-item index: the work of one item (LENS_PIXELS_PER_ITEM pixels of a
 * band of rows) is lens_sie_item() in the shared header, identical in the three dialects. */
#include "astro_dialect.h"
#include "lens_sie.h"

__kernel void ASTRO_CAT(lens_sie_grad, ASTRO_SUFFIX)(
    __global const ASTRO_REAL *restrict n11, __global const ASTRO_REAL *restrict n12,
    __global const ASTRO_REAL *restrict n22, __global const int *restrict ix,
    __global const int *restrict iy, __global const ASTRO_REAL *restrict fx,
    __global const ASTRO_REAL *restrict fy, const int n_halos, const int nx, const int row0,
    const int rows, const ASTRO_REAL h, __global ASTRO_REAL *restrict gx_out,
    __global ASTRO_REAL *restrict gy_out)
{
    lens_sie_item(get_global_id(0), n11, n12, n22, ix, iy, fx, fy, n_halos, nx, row0, rows, h, gx_out,
                  gy_out);
}
