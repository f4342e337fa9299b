/* Lens models: the per-halo-pixel physics shared by cl/lens.cl, ports/cuda/lens.cu and ports/sycl/lens.cpp.
 * Include astro_dialect.h first, then this header once per precision with ASTRO_REAL (float|double) and
 * ASTRO_SUFFIX (f32|f64) defined: every function is named <name>_<suffix>, so one program holds both
 * precisions (the mixed-precision and chi-square pipelines need both). No include guard on purpose.
 *
 * Offsets are exact (docs/lens.md): a halo centre is an integer pixel index i_k plus a float64
 * remainder delta_k = x(i_k) - x0 computed on the host, so d = (i - i_k) * h + delta_k has no cancellation
 * near the centre, even in float32. Integer pixel indices are carried as ASTRO_REAL (exact below 2^24), so
 * the inner loops need no int-to-float conversion.
 *
 * Halo tables (built by src/workload/lens/mod.rs, which mirrors the strides and tests them):
 *  SIE (LENSTOOL type 5), LENS_SIE_STRIDE reals per halo: n11 n12 n22 fx fy i_k j_k 0, where
 *    N = b^2 R^T diag(1-e, 1+e) R, so that g = N d / sqrt(d^T N d). That g does not
 *    change when d is scaled, so SIE offsets are in pixels: d = (i - i_k + fx, j - j_k + fy), fx = delta_x / h.
 *  dPIE (LENSTOOL type 81), LENS_DPIE_STRIDE reals per halo: cos sin eps K sqrt(eps) cx1 r_core r_cut scale
 *    delta_x delta_y i_k j_k circular 1/(1+eps) 1/(1-eps), with K = (1 - eps^2) / (2 sqrt(eps)),
 *    cx1 = (1 - eps)/(1 + eps),
 *    scale = b r_cut / (r_cut - r_core) (Eliasdottir et al. 2007, App. A), circular = 1 when eps < 2e-4
 *    (arcsec offsets).
 */
#define LENS_SIE_STRIDE 8
#define LENS_DPIE_STRIDE 16
/* Pixels along x and rows computed by one work-item of the grid kernels, per precision: each halo's
 * parameters are loaded once for all of them, the x offsets are shared by the rows and the y terms by a
 * row's pixels. float64 keeps 8 x 1 (its accumulators and Newton steps already need 74 registers).
 * src/workload/lens/mod.rs mirrors these constants (tested). */
#define LENS_PIXELS_PER_ITEM_f32 16
#define LENS_PIXELS_PER_ITEM_f64 8
#define LENS_ROWS_PER_ITEM_f32 1
#define LENS_ROWS_PER_ITEM_f64 1
#define LENS_PPI ASTRO_CAT(LENS_PIXELS_PER_ITEM, ASTRO_SUFFIX)
#define LENS_RPI ASTRO_CAT(LENS_ROWS_PER_ITEM, ASTRO_SUFFIX)

#define LENS_FN(name) ASTRO_CAT(name, ASTRO_SUFFIX)

/* SIE along a row: the offset is d = d0 + (x, 0), and the row terms hold N d0 = (mx0, my0) and
 * q0 = d0^T N d0 (lens_sie_row_terms). Then N d = (n11 x + mx0, n12 x + my0) and
 * d^T N d = (n11 x + 2 mx0) x + q0: four FMAs.
 * - Exact tables: d0 = (fx, dy) and x = i - i_k, an exact integer. The polynomial is well conditioned since
 *   |fx| <= 1/2 (its terms are at most a few times d^T N d), and dx = x + fx is never formed.
 * - Naive tables (the paper's scheme, fx as large as the coordinates): d0 = (0, dy) and x = (i - i_k) + fx,
 *   rounded at the coordinate's size as the paper's float32 is.
 * q is clamped at 1e-37 instead of tested: at the exact centre (d = 0) mx = my = 0, so the halo adds 0 (the
 * gradient has no limit there; the f64 reference uses the same convention), and the clamp costs one
 * instruction where a compare-and-select costs two. The clamp also keeps rsqrt's argument normal. */
ASTRO_FN void LENS_FN(lens_sie_row_terms)(ASTRO_REAL n11, ASTRO_REAL n12, ASTRO_REAL n22, ASTRO_REAL d0x,
                                         ASTRO_REAL dy, ASTRO_REAL *mx0, ASTRO_REAL *my0, ASTRO_REAL *b1,
                                         ASTRO_REAL *q0)
{
    *mx0 = n11 * d0x + n12 * dy;
    *my0 = n12 * d0x + n22 * dy;
    *b1 = *mx0 + *mx0;
    *q0 = d0x * *mx0 + dy * *my0;
}

ASTRO_FN void LENS_FN(lens_sie_add)(ASTRO_REAL x, ASTRO_REAL n11, ASTRO_REAL n12, ASTRO_REAL mx0, ASTRO_REAL my0,
                                   ASTRO_REAL b1, ASTRO_REAL q0, ASTRO_REAL *gx, ASTRO_REAL *gy)
{
    const ASTRO_REAL mx = n11 * x + mx0;
    const ASTRO_REAL my = n12 * x + my0;
    const ASTRO_REAL q = (n11 * x + b1) * x + q0;
    const ASTRO_REAL r = ASTRO_RSQRT(ASTRO_FMAX(q, (ASTRO_REAL)1e-37));
    *gx += mx * r;
    *gy += my * r;
}

/* dPIE (Kassiola & Kovner 1993; Elíasdóttir et al. 2007, App. A). In the halo frame (u, v) the deflection
 * is K scale (arg q, -ln|q|) with q = w(r_core) / w(r_cut) and, for each radius r,
 *   w = num / den,  num = cx1 u + i (2 sqrt(eps) S - v / cx1),  den = u - i (v - f),
 *   S = sqrt(r^2 + rho^2),  f = 2 r sqrt(eps).
 * Evaluated as written, float32 lost up to 4e-4" (docs/lens.md, "dPIE in float32"): num and den both vanish
 * at the focus (0, f), and far along +v the two terms of Im num nearly cancel. Instead:
 *  - dv = v - f is formed once and used everywhere, so a rounding of v only moves the point;
 *  - for v >= 0, Im num = nn / nd with nn = 4 eps u^2/(1+eps)^2 - dv (dv + 2 f) and nd = 2 sqrt(eps) S + v/cx1
 *    (the product with the conjugate; 4 eps r^2 - v^2 factors exactly); for v < 0 both terms already add;
 *  - eps >= LENS_DPIE_SMALL_EPS: q as one complex ratio, one atan2 and one log (w ~ 0 far along +v when eps
 *    is large, so w itself must be accurate);
 *  - eps < LENS_DPIE_SMALL_EPS: w = 1 + O(sqrt eps) while K ~ 1/(2 sqrt eps) magnifies any error in w, so the
 *    small part e = w - 1 is formed without cancellation (below) and each radius gives atan2(Im e, 1 + Re e)
 *    and log1p. With S - r = rho^2 / (S + r) and (cx1 - 1) = -2 eps/(1 + eps), times nd (S + r):
 *      e = 2 sqrt(eps) (-sqrt(eps) u nd (S + r)/(1 + eps) + i h) / (den nd (S + r)),
 *      h = 2 sqrt(eps) uu (S + r) + dv (rho^2 + sqrt(eps) v (S + r)/(1 - eps))   for v >= 0,
 *      h = rho^2 - sqrt(eps) v (S + r)/(1 - eps)                                 for v < 0 (sum of positives).
 * Worst float32 error over 2-400" and near both foci: 17 unit roundoffs of b (old form: 1e8). */
#define LENS_DPIE_SMALL_EPS 0.1

/* dPIE: adds one halo's deflection at exact offset (dx, dy). */
ASTRO_FN void LENS_FN(lens_dpie_add)(ASTRO_REAL dx, ASTRO_REAL dy, ASTRO_GLOBAL const ASTRO_REAL *p,
                                    ASTRO_REAL *gx, ASTRO_REAL *gy)
{
    const ASTRO_REAL c = p[0], s = p[1], rc = p[6], rcut = p[7], scale = p[8];
    const ASTRO_REAL u = c * dx + s * dy, v = -s * dx + c * dy;
    ASTRO_REAL gu, gv;
    if (p[13] != 0) {
        /* Circular limit (Lenstool-HPC uses it below eps = 2e-4, where K diverges), with
         * sqrt(s2 + r^2) - r = s2 / (sqrt(s2 + r^2) + r): no cancellation near the centre. */
        const ASTRO_REAL s2 = u * u + v * v;
        const ASTRO_REAL t = s2 > 0 ? scale * (1 / (ASTRO_SQRT(s2 + rc * rc) + rc) - 1 / (ASTRO_SQRT(s2 + rcut * rcut) + rcut))
                                    : (ASTRO_REAL)0;
        gu = t * u;
        gv = t * v;
    } else {
        const ASTRO_REAL eps = p[2], sqe = p[4], cx1 = p[5], ip = p[14], im = p[15];
        const ASTRO_REAL uu = u * u * ip * ip, rho2 = uu + v * v * im * im, v_cx1 = v * (1 + eps) * im;
        /* Per radius (0: core, 1: cut): num and den scaled by nd, e's numerator, and S + r. */
        ASTRO_REAL num_re[2], num_im[2], den_re[2], den_im[2], e_re[2], e_im[2], sr[2];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const ASTRO_REAL r = t ? rcut : rc, f = 2 * r * sqe, dv = v - f;
            const ASTRO_REAL S = ASTRO_SQRT(r * r + rho2);
            sr[t] = S + r;
            const ASTRO_REAL nd = v >= 0 ? 2 * sqe * S + v_cx1 : (ASTRO_REAL)1;
            const ASTRO_REAL nn = v >= 0 ? 4 * eps * uu - dv * (dv + 2 * f) : 2 * sqe * S - v_cx1;
            const ASTRO_REAL h = v >= 0 ? 2 * sqe * uu * sr[t] + dv * (rho2 + sqe * im * v * sr[t])
                                        : rho2 - sqe * im * v * sr[t];
            num_re[t] = cx1 * u * nd;
            num_im[t] = nn;
            den_re[t] = u * nd;
            den_im[t] = -dv * nd;
            e_re[t] = -2 * eps * ip * u * nd * sr[t];
            e_im[t] = 2 * sqe * h;
        }
        ASTRO_REAL arg_q, ln_q;
        if (eps >= (ASTRO_REAL)LENS_DPIE_SMALL_EPS) {
            /* q = (num_0 den_1) / (den_0 num_1) = a / b; arg q = arg(a conj b). */
            const ASTRO_REAL ar = num_re[0] * den_re[1] - num_im[0] * den_im[1];
            const ASTRO_REAL ai = num_re[0] * den_im[1] + num_im[0] * den_re[1];
            const ASTRO_REAL br = den_re[0] * num_re[1] - den_im[0] * num_im[1];
            const ASTRO_REAL bi = den_re[0] * num_im[1] + den_im[0] * num_re[1];
            arg_q = ASTRO_ATAN2(ai * br - ar * bi, ar * br + ai * bi);
            ln_q = (ASTRO_REAL)0.5 * ASTRO_LOG((ar * ar + ai * ai) / (br * br + bi * bi));
        } else {
            ASTRO_REAL arg_w[2], ln_w[2];
#pragma unroll
            for (int t = 0; t < 2; ++t) {
                const ASTRO_REAL k = 1 / ((den_re[t] * den_re[t] + den_im[t] * den_im[t]) * sr[t]);
                const ASTRO_REAL er = (e_re[t] * den_re[t] + e_im[t] * den_im[t]) * k;
                const ASTRO_REAL ei = (e_im[t] * den_re[t] - e_re[t] * den_im[t]) * k;
                arg_w[t] = ASTRO_ATAN2(ei, 1 + er);
                ln_w[t] = (ASTRO_REAL)0.5 * ASTRO_LOG1P(er * (2 + er) + ei * ei);
            }
            arg_q = arg_w[0] - arg_w[1];
            ln_q = ln_w[0] - ln_w[1];
        }
        const ASTRO_REAL k = p[3] * scale;
        gu = k * arg_q;
        gv = -k * ln_q;
    }
    *gx += c * gu - s * gv;
    *gy += s * gu + c * gv;
}

/* The smaller |eigenvalue| of the symmetric matrix (a, b; b, c): the flags' directional magnification test
 * (lens_mixed.h, lens_split.h). */
ASTRO_FN ASTRO_REAL LENS_FN(lens_smaller_eigenvalue)(ASTRO_REAL a, ASTRO_REAL b, ASTRO_REAL c)
{
    const ASTRO_REAL mean = (ASTRO_REAL)0.5 * (a + c), half_gap = (ASTRO_REAL)0.5 * (a - c);
    const ASTRO_REAL radius = ASTRO_SQRT(half_gap * half_gap + b * b);
    return ASTRO_FMIN(ASTRO_FABS(mean - radius), ASTRO_FABS(mean + radius));
}

/* Adds halo g of a pair of tables (SIE rows first, then dPIE rows) at pixel (fi, fj) of the grid: integer
 * indices carried as ASTRO_REAL, possibly outside the grid; exact offsets, the arithmetic of one pixel of
 * lens_item. (The near/far split evaluates single halos at single pixels: lens_split.h.) with_dpie = 0, a
 * constant after inlining, drops the dPIE code (and its registers) from a kernel that has no dPIE. */
ASTRO_FN void LENS_FN(lens_halo_add)(int g, ASTRO_REAL fi, ASTRO_REAL fj,
                                    ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT sie, int n_sie,
                                    ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT dpie, ASTRO_REAL h,
                                    ASTRO_REAL *gx, ASTRO_REAL *gy, const int with_dpie)
{
    if (!with_dpie || g < n_sie) {
        ASTRO_GLOBAL const ASTRO_REAL *p = sie + (size_t)g * LENS_SIE_STRIDE;
        ASTRO_REAL mx0, my0, b1, q0;
        LENS_FN(lens_sie_row_terms)(p[0], p[1], p[2], p[3], (fj - p[6]) + p[4], &mx0, &my0, &b1, &q0);
        LENS_FN(lens_sie_add)(fi - p[5], p[0], p[1], mx0, my0, b1, q0, gx, gy);
    } else {
        ASTRO_GLOBAL const ASTRO_REAL *p = dpie + (size_t)(g - n_sie) * LENS_DPIE_STRIDE;
        LENS_FN(lens_dpie_add)((fi - p[11]) * h + p[9], (fj - p[12]) * h + p[10], p, gx, gy);
    }
}

/* Grid work-items: one computes LENS_PPI pixels along x in each of LENS_RPI rows (the halo's loads and the
 * x offsets are shared by all of them, the row terms by a row's pixels). Item gid of a band of `rows` rows
 * starts at column *i0 and band row *r0; returns 0 past the last item. */
ASTRO_FN int LENS_FN(lens_item_origin)(size_t gid, int nx, int rows, int *i0, int *r0)
{
    const int chunks = (nx + LENS_PPI - 1) / LENS_PPI;
    const int row_groups = (rows + LENS_RPI - 1) / LENS_RPI;
    if (gid >= (size_t)chunks * (size_t)row_groups) return 0;
    *i0 = (int)(gid % (size_t)chunks) * LENS_PPI;
    *r0 = (int)(gid / (size_t)chunks) * LENS_RPI;
    return 1;
}

/* One item of a band of `rows` rows starting at grid row row0: the deflections of the item at column i0 and
 * band row r0, stored within the band. The accumulators stay local to this function, so every compiler
 * keeps them in registers. exact_offsets is 1 for tables of exact offsets (every SIE remainder
 * |fx| <= 1/2) and 0 for the naive tables of the paper's scheme (lens_sie_add says where fx goes). */
ASTRO_FN_INLINED void LENS_FN(lens_item)(int i0, int r0, int row0, int rows, int nx,
                                ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT sie, int n_sie,
                                ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT dpie, int n_dpie, ASTRO_REAL h,
                                int exact_offsets, ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gx_out,
                                ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gy_out)
{
    const ASTRO_REAL fi0 = (ASTRO_REAL)i0, fj0 = (ASTRO_REAL)(row0 + r0);
    ASTRO_REAL gx[LENS_RPI * LENS_PPI], gy[LENS_RPI * LENS_PPI];
#pragma unroll
    for (int q = 0; q < LENS_RPI * LENS_PPI; ++q) gx[q] = gy[q] = 0;
    /* di + q is an exact integer pixel offset in both loops; they differ only in where fx goes. */
    for (int k = 0; exact_offsets && k < n_sie; ++k) {
        ASTRO_GLOBAL const ASTRO_REAL *p = sie + (size_t)k * LENS_SIE_STRIDE;
        const ASTRO_REAL n11 = p[0], n12 = p[1], fx = p[3], di = fi0 - p[5];
        ASTRO_REAL mx0[LENS_RPI], my0[LENS_RPI], b1[LENS_RPI], q0[LENS_RPI];
#pragma unroll
        for (int s = 0; s < LENS_RPI; ++s)
            LENS_FN(lens_sie_row_terms)(n11, n12, p[2], fx, ((fj0 + (ASTRO_REAL)s) - p[6]) + p[4], &mx0[s],
                                        &my0[s], &b1[s], &q0[s]);
#pragma unroll
        for (int q = 0; q < LENS_PPI; ++q)
#pragma unroll
            for (int s = 0; s < LENS_RPI; ++s)
                LENS_FN(lens_sie_add)(di + (ASTRO_REAL)q, n11, n12, mx0[s], my0[s], b1[s], q0[s],
                                      &gx[s * LENS_PPI + q], &gy[s * LENS_PPI + q]);
    }
    for (int k = 0; !exact_offsets && k < n_sie; ++k) {
        ASTRO_GLOBAL const ASTRO_REAL *p = sie + (size_t)k * LENS_SIE_STRIDE;
        const ASTRO_REAL n11 = p[0], n12 = p[1], fx = p[3], di = fi0 - p[5];
        ASTRO_REAL mx0[LENS_RPI], my0[LENS_RPI], b1[LENS_RPI], q0[LENS_RPI];
#pragma unroll
        for (int s = 0; s < LENS_RPI; ++s)
            LENS_FN(lens_sie_row_terms)(n11, n12, p[2], (ASTRO_REAL)0, ((fj0 + (ASTRO_REAL)s) - p[6]) + p[4],
                                        &mx0[s], &my0[s], &b1[s], &q0[s]);
#pragma unroll
        for (int q = 0; q < LENS_PPI; ++q)
#pragma unroll
            for (int s = 0; s < LENS_RPI; ++s)
                LENS_FN(lens_sie_add)((di + (ASTRO_REAL)q) + fx, n11, n12, mx0[s], my0[s], b1[s], q0[s],
                                      &gx[s * LENS_PPI + q], &gy[s * LENS_PPI + q]);
    }
    for (int k = 0; k < n_dpie; ++k) {
        ASTRO_GLOBAL const ASTRO_REAL *p = dpie + (size_t)k * LENS_DPIE_STRIDE;
        const ASTRO_REAL di = fi0 - p[11];
        for (int s = 0; s < LENS_RPI; ++s) {
            const ASTRO_REAL dy = ((fj0 + (ASTRO_REAL)s) - p[12]) * h + p[10];
            for (int q = 0; q < LENS_PPI; ++q)
                LENS_FN(lens_dpie_add)((di + (ASTRO_REAL)q) * h + p[9], dy, p, &gx[s * LENS_PPI + q],
                                       &gy[s * LENS_PPI + q]);
        }
    }
#pragma unroll
    for (int s = 0; s < LENS_RPI; ++s) {
        const size_t row_base = (size_t)(r0 + s) * (size_t)nx;
#pragma unroll
        for (int q = 0; q < LENS_PPI; ++q) {
            if (r0 + s < rows && i0 + q < nx) {
                gx_out[row_base + i0 + q] = gx[s * LENS_PPI + q];
                gy_out[row_base + i0 + q] = gy[s * LENS_PPI + q];
            }
        }
    }
}

/* The work of grid work-item `gid` over a band of rows [row0, row0 + rows). Each dialect's kernel only
 * computes gid. */
ASTRO_FN void LENS_FN(lens_grid_item)(size_t gid, ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT sie, int n_sie,
                                     ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT dpie, int n_dpie, int nx,
                                     int row0, int rows, ASTRO_REAL h, int exact_offsets,
                                     ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gx_out,
                                     ASTRO_GLOBAL ASTRO_REAL *ASTRO_RESTRICT gy_out)
{
    int i0, r0;
    if (!LENS_FN(lens_item_origin)(gid, nx, rows, &i0, &r0)) return;
    LENS_FN(lens_item)(i0, r0, row0, rows, nx, sie, n_sie, dpie, n_dpie, h, exact_offsets, gx_out, gy_out);
}

/* Triangle delensing as in Lenstool-HPC (Schaefer et al. 2020) of grid cell (i, r) of a band whose
 * gradient rows are [0, rows_ext): the cell spans pixels i..i+1 and rows r..r+1. For every system s the
 * cell's two triangles are mapped to the source plane with beta = theta - scale_s * alpha, and a triangle
 * containing the system's source barycentre appends a hit (s, i, r, triangle) at hits[4 * counter++] (up to
 * max_hits). The containment test multiplies by the orientation, so parity flips inside critical curves are
 * handled. */
ASTRO_FN void LENS_FN(lens_delens_item)(size_t gid, ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT gx,
                                       ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT gy, int nx, int rows,
                                       int rows_ext, ASTRO_REAL x_first, ASTRO_REAL y_first, ASTRO_REAL h,
                                       ASTRO_GLOBAL const ASTRO_REAL *ASTRO_RESTRICT sources, int n_sys,
                                       ASTRO_GLOBAL int *ASTRO_RESTRICT hits, ASTRO_GLOBAL unsigned int *counter,
                                       unsigned int max_hits)
{
    const int cells_x = nx - 1;
    if (cells_x <= 0 || gid >= (size_t)cells_x * (size_t)rows) return;
    const int i = (int)(gid % (size_t)cells_x), r = (int)(gid / (size_t)cells_x);
    if (r + 1 >= rows_ext) return;
    const size_t p00 = (size_t)r * nx + i, p01 = p00 + nx;
    const ASTRO_REAL x0 = x_first + (ASTRO_REAL)i * h, y0 = y_first + (ASTRO_REAL)r * h;
    /* Vertices: a = (i, r), b = (i, r+1), c = (i+1, r), d = (i+1, r+1). */
    const ASTRO_REAL ax = gx[p00], ay = gy[p00], bx = gx[p01], by = gy[p01];
    const ASTRO_REAL cx = gx[p00 + 1], cy = gy[p00 + 1], dx = gx[p01 + 1], dy = gy[p01 + 1];
    for (int s = 0; s < n_sys; ++s) {
        const ASTRO_REAL sx = sources[3 * s], sy = sources[3 * s + 1], k = sources[3 * s + 2];
        /* Source-plane vertices relative to the source: beta - beta_s. */
        const ASTRO_REAL Ax = x0 - k * ax - sx, Ay = y0 - k * ay - sy;
        const ASTRO_REAL Bx = x0 - k * bx - sx, By = y0 + h - k * by - sy;
        const ASTRO_REAL Cx = x0 + h - k * cx - sx, Cy = y0 - k * cy - sy;
        const ASTRO_REAL Dx = x0 + h - k * dx - sx, Dy = y0 + h - k * dy - sy;
        /* Twice the signed areas of (P, V1, V2) with P at the origin: V1 x V2. */
        const ASTRO_REAL ab = Ax * By - Ay * Bx, bc = Bx * Cy - By * Cx, ca = Cx * Ay - Cy * Ax;
        const ASTRO_REAL dc = Dx * Cy - Dy * Cx, cb = -bc, bd = Bx * Dy - By * Dx;
        /* Upper triangle (a, b, c): inside iff the three sub-areas share the orientation's sign. */
        const ASTRO_REAL o1 = ab + bc + ca;
        if (ab * o1 >= 0 && bc * o1 >= 0 && ca * o1 >= 0 && o1 != 0) {
            const unsigned int at = ASTRO_ATOMIC_INC(counter);
            if (at < max_hits) {
                hits[4 * (size_t)at] = s;
                hits[4 * (size_t)at + 1] = i;
                hits[4 * (size_t)at + 2] = r;
                hits[4 * (size_t)at + 3] = 0;
            }
        }
        /* Lower triangle (d, c, b). */
        const ASTRO_REAL o2 = dc + cb + bd;
        if (dc * o2 >= 0 && cb * o2 >= 0 && bd * o2 >= 0 && o2 != 0) {
            const unsigned int at = ASTRO_ATOMIC_INC(counter);
            if (at < max_hits) {
                hits[4 * (size_t)at] = s;
                hits[4 * (size_t)at + 1] = i;
                hits[4 * (size_t)at + 2] = r;
                hits[4 * (size_t)at + 3] = 1;
            }
        }
    }
}
