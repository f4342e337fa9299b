/* Lens deflection gradient, OpenCL C 1.2. Built with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
 * One work-item per pixel of a band of rows [row0, row0 + rows); halo parameters are read uniformly by the
 * whole work-group (served from the constant/L1 cache). */
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
    const size_t gid = get_global_id(0);
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
