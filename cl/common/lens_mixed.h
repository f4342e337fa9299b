/* Mixed precision (Rexroth et al. 2020, sections 3.2-3.3): after a float32 grid pass, flag the pixels
 * where float32 may not be accurate enough and recompute them in float64. Shared by the three dialects;
 * include astro_dialect.h and lens_model.h for float (suffix f32) and double (suffix f64) first.
 *
 * Steps of one band (the host builds the sequence; src/workload/lens/mod.rs):
 *   1. lens_grid_f32 over the band plus one extra row (the y differences need row r + 1);
 *   2. lens_flag_item: the scheme's criteria; writes the float32 values widened to float64 and the flag
 *      mask, and appends the flagged pixels to the recompute list;
 *   3. lens_patch_item (optional, the paper's fixed patches): marks square patches around halo centres,
 *      appending the pixels not yet marked;
 *   4. lens_recompute_item: float64 for the listed pixels (the split's pipeline ends with it too).
 * The list's order depends on scheduling; each pixel's value does not.
 *
 * delta_i (pixel size h; forward differences, backward on the last column/row):
 *   delta_1 = alpha_1(i+1, j) - alpha_1(i, j)   delta_2 = alpha_2(i, j+1) - alpha_2(i, j)   (axes)
 *   delta_3 = alpha_1(i, j+1) - alpha_1(i, j)   delta_4 = alpha_2(i+1, j) - alpha_2(i, j)   (cross terms)
 * A pixel is flagged when |h - delta_i| < axis_limit (i = 1, 2: the source-plane pixel has shrunk by more than
 * 3.26x, the paper's 0.0092" at h = 0.03"), or |delta_i| > cross_limit (i = 3, 4: the paper's 0.0104"), or
 * when the smaller |eigenvalue| of h A = h I - (delta_1, delta_3; delta_4, delta_2), symmetrised, is below
 * eig_limit (h / magnification: the image-plane error is the source-plane one times the largest
 * magnification of any direction, which the axis terms alone miss when the shear is diagonal). The paper's
 * schemes pass eig_limit = 0 (never true); the error-budget scheme passes axis_limit = eig_limit = h / M and
 * a cross_limit no difference reaches. */

ASTRO_FN void lens_flag_item(size_t gid, ASTRO_GLOBAL const float *ASTRO_RESTRICT gx,
                             ASTRO_GLOBAL const float *ASTRO_RESTRICT gy, int nx, int rows, int rows_ext, float h,
                             float axis_limit, float cross_limit, float eig_limit,
                             ASTRO_GLOBAL double *ASTRO_RESTRICT gx_out,
                             ASTRO_GLOBAL double *ASTRO_RESTRICT gy_out, ASTRO_GLOBAL unsigned int *ASTRO_RESTRICT mask,
                             ASTRO_GLOBAL unsigned int *ASTRO_RESTRICT list, ASTRO_GLOBAL unsigned int *counter)
{
    if (gid >= (size_t)nx * (size_t)rows) return;
    const int i = (int)(gid % (size_t)nx), r = (int)(gid / (size_t)nx);
    const size_t p = gid;
    /* Neighbour along x and along y; a backward neighbour flips the sign of the difference. */
    const int fwd_x = i + 1 < nx, fwd_y = r + 1 < rows_ext;
    const size_t px = fwd_x ? p + 1 : p - 1, py = fwd_y ? p + (size_t)nx : p - (size_t)nx;
    const float sx = fwd_x ? 1.0f : -1.0f, sy = fwd_y ? 1.0f : -1.0f;
    const float a1 = gx[p], a2 = gy[p];
    gx_out[p] = (double)a1;
    gy_out[p] = (double)a2;
    int flagged = 0;
    float d1 = 0, d2 = 0, d3 = 0, d4 = 0;
    if (nx > 1) {
        d1 = sx * (gx[px] - a1);
        d4 = sx * (gy[px] - a2);
        flagged |= ASTRO_FABS(h - d1) < axis_limit || ASTRO_FABS(d4) > cross_limit;
    }
    if (rows_ext > 1) {
        d2 = sy * (gy[py] - a2);
        d3 = sy * (gx[py] - a1);
        flagged |= ASTRO_FABS(h - d2) < axis_limit || ASTRO_FABS(d3) > cross_limit;
    }
    if (nx > 1 && rows_ext > 1)
        flagged |= lens_smaller_eigenvalue_f32(h - d1, (float)-0.5 * (d3 + d4), h - d2) < eig_limit;
    mask[p] = (unsigned int)flagged;
    if (flagged) list[ASTRO_ATOMIC_INC(counter)] = (unsigned int)p;
}

/* One pixel of the fixed float64 patches: work-item gid covers pixel (gid % size^2) of the patch around
 * centre gid / size^2 (centres: pairs of integer pixel indices). Pixels outside the band are skipped;
 * a pixel already marked (by the flags or another patch) is not counted again. */
ASTRO_FN void lens_patch_item(size_t gid, ASTRO_GLOBAL const int *ASTRO_RESTRICT centres, int n_centres, int size,
                              int nx, int row0, int rows, ASTRO_GLOBAL unsigned int *ASTRO_RESTRICT mask,
                              ASTRO_GLOBAL unsigned int *ASTRO_RESTRICT list, ASTRO_GLOBAL unsigned int *counter)
{
    const size_t area = (size_t)size * (size_t)size;
    if (gid >= area * (size_t)n_centres) return;
    const int c = (int)(gid / area), a = (int)(gid % area);
    const int i = centres[2 * c] - size / 2 + a % size;
    const int r = centres[2 * c + 1] - size / 2 + a / size - row0;
    if (i < 0 || i >= nx || r < 0 || r >= rows) return;
    const size_t p = (size_t)r * nx + i;
    if (ASTRO_ATOMIC_XCHG(&mask[p], 1u) == 0u) list[ASTRO_ATOMIC_INC(counter)] = (unsigned int)p;
}

/* Float64 for the listed pixels of a band starting at grid row row0, grid-stride (the host does not know the
 * count in advance): one pixel per work-item, so no lane computes a pixel that is not flagged. with_dpie = 0
 * (a constant after inlining) drops the dPIE code when the catalogue has none. */
ASTRO_FN_INLINED void lens_recompute_body(size_t gid, size_t gsize, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT list,
                                          ASTRO_GLOBAL const unsigned int *counter,
                                          ASTRO_GLOBAL const double *ASTRO_RESTRICT sie, int n_sie,
                                          ASTRO_GLOBAL const double *ASTRO_RESTRICT dpie, int n_dpie, int nx,
                                          int row0, double h, ASTRO_GLOBAL double *ASTRO_RESTRICT gx_out,
                                          ASTRO_GLOBAL double *ASTRO_RESTRICT gy_out, const int with_dpie)
{
    const size_t count = counter[0];
    for (size_t t = gid; t < count; t += gsize) {
        const unsigned int p = list[t];
        const double fi = (double)(p % (unsigned int)nx), fj = (double)(row0 + (int)(p / (unsigned int)nx));
        double gx = 0, gy = 0;
        for (int k = 0; k < n_sie + n_dpie; ++k) lens_halo_add_f64(k, fi, fj, sie, n_sie, dpie, h, &gx, &gy, with_dpie);
        gx_out[p] = gx;
        gy_out[p] = gy;
    }
}

#define LENS_RECOMPUTE_PARAMS                                                                                   \
    ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT list, ASTRO_GLOBAL const unsigned int *counter,           \
        ASTRO_GLOBAL const double *ASTRO_RESTRICT sie, int n_sie, ASTRO_GLOBAL const double *ASTRO_RESTRICT dpie, \
        int n_dpie, int nx, int row0, double h, ASTRO_GLOBAL double *ASTRO_RESTRICT gx_out,                   \
        ASTRO_GLOBAL double *ASTRO_RESTRICT gy_out
#define LENS_RECOMPUTE_ARGS list, counter, sie, n_sie, dpie, n_dpie, nx, row0, h, gx_out, gy_out

/* The kernels' parameters are LENS_RECOMPUTE_PARAMS in every dialect (lens_recompute, lens_recompute_sie). */
ASTRO_FN void lens_recompute_item(size_t gid, size_t gsize, LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_body(gid, gsize, LENS_RECOMPUTE_ARGS, 1);
}
ASTRO_FN void lens_recompute_sie_item(size_t gid, size_t gsize, LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_body(gid, gsize, LENS_RECOMPUTE_ARGS, 0);
}
