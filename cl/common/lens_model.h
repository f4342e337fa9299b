/* Pseudo-elliptical SIS (LENSTOOL potential type 5) deflection gradient: the per-halo-pixel physics shared
 * by cl/lens.cl, ports/cuda/lens.cu and ports/sycl/lens.cpp. Include astro_dialect.h and define ASTRO_REAL
 * first. No include guard on purpose: C++ ports include it once per ASTRO_REAL, each time inside its own
 * namespace (ports/cuda/lens.cu); OpenCL and SYCL build one program per precision and include it once.
 *
 * Per halo k the host precomputes the symmetric matrix N = b * R^T diag(1-e, 1+e) R * b (b = strength in
 * arcsec incl. D_LS/D_S, e = potential ellipticity, R = rotation by the position angle). Then
 *     g = N d / sqrt(d^T N d)                      (research/lens.md 2.1; equals the rotate/divide/rotate form)
 * which costs 15 flops and one rsqrt per halo-pixel.
 *
 * The offset d = x - x0 is formed exactly (research/lens.md 3): the halo centre is stored as an integer
 * pixel index i_k plus a small remainder delta_k = x(i_k) - x0 computed in float64 on the host, so
 * d = (i - i_k) * h + delta_k has no catastrophic cancellation near the centre, even in float32.
 */
/* Adds halo k's deflection at offset (dx, dy) to (*gx, *gy). The exact centre (d = 0) contributes 0: the
 * gradient has no limit there, and 0 is the symmetric convention the f64 reference uses too. */
ASTRO_FN void lens_sie_accumulate(ASTRO_REAL dx, ASTRO_REAL dy, ASTRO_REAL n11, ASTRO_REAL n12,
                                  ASTRO_REAL n22, ASTRO_REAL *gx, ASTRO_REAL *gy)
{
    ASTRO_REAL mx = n11 * dx + n12 * dy;
    ASTRO_REAL my = n12 * dx + n22 * dy;
    ASTRO_REAL q = dx * mx + dy * my;
    ASTRO_REAL r = q > (ASTRO_REAL)0 ? ASTRO_RSQRT(q) : (ASTRO_REAL)0;
    *gx += mx * r;
    *gy += my * r;
}

/* Pixels along x computed by one work-item: the halo's parameters are loaded once for all of them, and the
 * y offset is shared. (Launch geometry: the host launches ceil(nx / LENS_PIXELS_PER_ITEM) items per row;
 * src/workload/lens.rs mirrors this constant and a test checks they agree.) */
#define LENS_PIXELS_PER_ITEM 4

/* Exact offset of a pixel from a halo stored as (integer pixel index ik, remainder delta): di is the
 * integer i - ik held in ASTRO_REAL (exact below 2^24), so di * h + delta has no cancellation. Adding a
 * small integer p to di stays exact, which lets a work-item step through its pixels without int-to-float
 * conversions. */
ASTRO_FN ASTRO_REAL lens_exact_offset(ASTRO_REAL di, ASTRO_REAL h, ASTRO_REAL delta)
{
    return di * h + delta;
}

/* The work of one work-item `gid` of a band of rows [row0, row0 + rows): LENS_PIXELS_PER_ITEM pixels along
 * x. Halo k's parameters are loaded once for all of them, dy is shared, and dx steps as (di + p) * h + delta
 * (exact, no int-to-float conversion per pixel). Halos are summed in the order given (the host sorts them
 * weakest first). Outputs are indexed within the band. Each dialect's kernel only computes gid. */
ASTRO_FN void lens_sie_item(size_t gid, ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT n11,
                            ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT n12,
                            ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT n22,
                            ASTRO_GLOBAL const int *ASTRO_RESTRICT ix, ASTRO_GLOBAL const int *ASTRO_RESTRICT iy,
                            ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT fx,
                            ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT fy, int n_halos, int nx, int row0,
                            int rows, ASTRO_REAL h, ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gx_out,
                            ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gy_out)
{
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
