/* Image subtraction: the difference of a science image I and a reference R convolved with a spatially
 * varying kernel, D = I - R (x) K, and its variance VD = VI + VR (x) K^2 (Alard & Lupton 1998; the seed,
 * GAISP, convolves the same way, one work-item per output pixel).
 *
 * The kernel is IMG_SIDE x IMG_SIDE taps (half width IMG_HALF) and varies as a polynomial of degree 2 over
 * the field: K_xy(u, v) = sum_m p_m(x^, y^) Kbar_m(u, v) over the six monomials 1, x^, y^, x^2, x^y, y^2 of
 * x^ = 2x/(nx - 1) - 1 and y^ = 2y/(ny - 1) - 1. Kbar is tap-major: kbar[tap * 6 + m], tap = (v + H) * SIDE +
 * (u + H). Written by Horner in x^ for a fixed row:
 *   K = (k0 + y^ (k2 + y^ k5)) + x^ ((k1 + y^ k4) + x^ k3),
 * which the cpu model evaluates for a whole row at once (src/workload/imgsub/difference.rs).
 *
 * C(x, y) = sum_{u,v} K_xy(u, v) R(x - u, y - v), summed kernel row by kernel row (each row's 21 taps, then
 * the row sums); R and VR are 0 outside the image. A band of output rows [row0, row0 + rows) reads the
 * reference rows [ref_row0, ref_row0 + ref_rows), which must hold every row within IMG_HALF of the band that
 * lies in the image.
 */
#ifndef IMGSUB_H
#define IMGSUB_H

#define IMG_HALF 10
#define IMG_SIDE 21
#define IMG_TERMS 6

#define IMGSUB_DIFFERENCE(T, S, VECTOR_SUM)                                                                        \
    ASTRO_FN void imgsub_difference_item_##S(size_t gid, ASTRO_GLOBAL const T *ASTRO_RESTRICT kbar,              \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT ref,                           \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT ref_var, int ref_row0,         \
                                             int ref_rows, ASTRO_GLOBAL const T *ASTRO_RESTRICT sci,             \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT sci_var, int nx, int ny,       \
                                             int row0, int rows, ASTRO_GLOBAL T *ASTRO_RESTRICT diff,            \
                                             ASTRO_GLOBAL T *ASTRO_RESTRICT diff_var)                            \
    {                                                                                                            \
        if (gid >= (size_t)rows * (size_t)nx) return;                                                            \
        const int x = (int)(gid % (size_t)nx);                                                                   \
        const int y = row0 + (int)(gid / (size_t)nx);                                                            \
        const T xh = (T)2 * (T)x / (T)(nx > 1 ? nx - 1 : 1) - (T)1;                                              \
        const T yh = (T)2 * (T)y / (T)(ny > 1 ? ny - 1 : 1) - (T)1;                                              \
        T c = 0, w = 0;                                                                                          \
        for (int v = -IMG_HALF; v <= IMG_HALF; ++v) {                                                            \
            const int yy = y - v;                                                                                \
            if (yy < 0 || yy >= ny) continue;                                                                    \
            ASTRO_GLOBAL const T *r_row = ref + (size_t)(yy - ref_row0) * (size_t)nx;                            \
            ASTRO_GLOBAL const T *vr_row = ref_var + (size_t)(yy - ref_row0) * (size_t)nx;                       \
            ASTRO_GLOBAL const T *k_row = kbar + (size_t)((v + IMG_HALF) * IMG_SIDE) * IMG_TERMS;                 \
            T c_row = 0, w_row = 0;                                                                              \
            VECTOR_SUM                                                                                           \
            for (int u = -IMG_HALF; u <= IMG_HALF; ++u) {                                                        \
                const int xx = x - u;                                                                            \
                if (xx < 0 || xx >= nx) continue;                                                                \
                ASTRO_GLOBAL const T *k = k_row + (size_t)(u + IMG_HALF) * IMG_TERMS;                            \
                const T kv = (k[0] + yh * (k[2] + yh * k[5])) + xh * ((k[1] + yh * k[4]) + xh * k[3]);           \
                c_row += kv * r_row[xx];                                                                         \
                w_row += kv * kv * vr_row[xx];                                                                   \
            }                                                                                                    \
            c += c_row;                                                                                          \
            w += w_row;                                                                                          \
        }                                                                                                        \
        const size_t at = (size_t)(y - row0) * (size_t)nx + (size_t)x;                                           \
        diff[at] = sci[at] - c;                                                                                  \
        diff_var[at] = sci_var[at] + w;                                                                          \
        (void)ref_rows;                                                                                          \
    }

IMGSUB_DIFFERENCE(float, f32, ASTRO_VECTOR_SUM_F32)
#if ASTRO_HAS_FP64
IMGSUB_DIFFERENCE(double, f64, )
#endif

#endif
