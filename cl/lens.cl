/* Lens deflection gradient, OpenCL C 1.2. Built with -DASTRO_REAL=float|double -DASTRO_SUFFIX=f32|f64.
 * LENS_PIXELS_PER_ITEM pixels along x per work-item, for a band of rows [row0, row0 + rows); halo parameters are read uniformly by the
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
