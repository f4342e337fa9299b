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
 * the row sums); R and VR are 0 outside the image. The fitted background B = b0 + b1 x^ + b2 y^ follows the
 * kernel in the same buffer (kbar[IMG_SIDE^2 * 6 + 0..2]): D = I - C - B.
 *
 * tile = 0: the kernel varies from pixel to pixel (exact). tile = T > 0: it is held constant over T x T tiles,
 * evaluated at each tile's centre (GAISP's and HOTPANTS' approximation, which the fit does not make).
 *
 * A band of output rows [row0, row0 + rows) reads the reference rows from ref_row0 on, which must hold every
 * row within IMG_HALF of the band that lies in the image, and the image subtracted from from row sci_row0 on
 * (row0 when it is uploaded for the band, 0 when the whole image is on the device); D and VD hold the band.
 */
#ifndef IMGSUB_H
#define IMGSUB_H

#define IMG_HALF 10
#define IMG_SIDE 21
#define IMG_TERMS 6

/* One work-item computes P consecutive pixels of a row (P = IMG_PIXELS_F32 or IMG_PIXELS_F64): per kernel
 * row it loads the P + 2H reference values it needs into registers once, and each tap's two row terms
 * a = k0 + y^(k2 + y^ k5), b = k1 + y^ k4 once for its P pixels, so a tap costs 5 FMA-pipe instructions per
 * pixel plus 4/P, and L1 traffic falls from 8 loads per pixel-tap to about (6 + 2)/P + 2(P + 2H)/(21 P).
 * The sums keep the one-pixel order: each kernel row's taps in u order, then the row sums. */
/* Float32 pixels per item: 4 on GPUs (123 registers, 25 % occupancy on the H200: 26.5 ms at ast3, against
 * 31.1 ms with 8), 8 on CPUs (PoCL 55 ms at ci against 127 ms with 4); the host passes IMG_PIXELS_F32 to
 * OpenCL and SYCL builds, CUDA builds take the GPU value. */
#ifndef IMG_PIXELS_F32
#define IMG_PIXELS_F32 4
#endif
#define IMG_PIXELS_F64 4

/* Tap k's kernel value at (x^, y^) from its row terms, by Horner (the module comment): a and b are the row's,
 * found once per tap and row, K = a + x^ (b + x^ k3) per pixel. Every kernel that forms K uses these. */
#define IMGSUB_ROW_A(k, yh) ((k)[0] + (yh) * ((k)[2] + (yh) * (k)[5]))
#define IMGSUB_ROW_B(k, yh) ((k)[1] + (yh) * (k)[4])
#define IMGSUB_TAP(a, b, k3, xh) ((a) + (xh) * ((b) + (xh) * (k3)))

/* Place i of n normalised to [-1, 1] (fit.rs `normalised`), in type T. */
#define IMGSUB_NORMALISED(T, i, n) ((T)2 * (T)(i) / (T)((n) > 1 ? (n) - 1 : 1) - (T)1)
/* The fitted background B = b0 + b1 x^ + b2 y^ (the host's `background_at`, summed in this order). */
#define IMGSUB_BACKGROUND(bg, xh, yh) ((bg)[0] + ((bg)[1] * (xh) + (bg)[2] * (yh)))

/* Where the kernel of pixel x is evaluated: x itself, or the centre of its tile (the last pixel at most). */
ASTRO_FN int imgsub_place(int x, int tile, int n)
{
    if (tile <= 0) return x;
    const int centre = (x / tile) * tile + tile / 2;
    return centre < n ? centre : n - 1;
}

/* The sums of one work-item: c[p] = sum K R and w[p] = sum K^2 VR for its P pixels from x0 in row y. VARYING 1:
 * K by Horner in x^ from the row terms; VARYING 0: a constant kernel, K = Kbar_0 (the matched filter). */
#define IMGSUB_SUMS(T, P, VARYING)                                                                               \
    T xh[P], c[P], w[P];                                                                                         \
    for (int p = 0; p < P; ++p) {                                                                                \
        xh[p] = IMGSUB_NORMALISED(T, imgsub_place(x0 + p, tile, nx), nx);                                        \
        c[p] = 0;                                                                                                \
        w[p] = 0;                                                                                                \
    }                                                                                                            \
    for (int v = -IMG_HALF; v <= IMG_HALF; ++v) {                                                                \
        const int yy = y - v;                                                                                    \
        if (yy < 0 || yy >= ny) continue;                                                                        \
        ASTRO_GLOBAL const T *r_row = ref + (size_t)(yy - ref_row0) * (size_t)nx;                                \
        ASTRO_GLOBAL const T *vr_row = ref_var + (size_t)(yy - ref_row0) * (size_t)nx;                           \
        ASTRO_GLOBAL const T *k_row = kbar + (size_t)((v + IMG_HALF) * IMG_SIDE) * IMG_TERMS;                     \
        /* The reference values of x0 + p - u for p in [0, P), u in [-H, H]: index p - u + H. */                \
        T r_win[P + 2 * IMG_HALF], vr_win[P + 2 * IMG_HALF];                                                     \
        ASTRO_UNROLL                                                                                             \
        for (int q = 0; q < P + 2 * IMG_HALF; ++q) {                                                             \
            const int xx = x0 - IMG_HALF + q;                                                                    \
            const int inside = xx >= 0 && xx < nx;                                                               \
            r_win[q] = inside ? r_row[xx] : (T)0;                                                                \
            vr_win[q] = inside ? vr_row[xx] : (T)0;                                                              \
        }                                                                                                        \
        T c_row[P], w_row[P];                                                                                    \
        for (int p = 0; p < P; ++p) {                                                                            \
            c_row[p] = 0;                                                                                        \
            w_row[p] = 0;                                                                                        \
        }                                                                                                        \
        ASTRO_UNROLL                                                                                             \
        for (int u = -IMG_HALF; u <= IMG_HALF; ++u) {                                                            \
            ASTRO_GLOBAL const T *k = k_row + (size_t)(u + IMG_HALF) * IMG_TERMS;                                \
            const T a = VARYING ? IMGSUB_ROW_A(k, yh) : k[0];                                                    \
            const T b = VARYING ? IMGSUB_ROW_B(k, yh) : (T)0;                                                    \
            const T k3 = VARYING ? k[3] : (T)0;                                                                  \
            ASTRO_UNROLL                                                                                         \
            for (int p = 0; p < P; ++p) {                                                                        \
                const T kv = VARYING ? IMGSUB_TAP(a, b, k3, xh[p]) : a;                                          \
                c_row[p] += kv * r_win[p - u + IMG_HALF];                                                        \
                w_row[p] += kv * kv * vr_win[p - u + IMG_HALF];                                                  \
            }                                                                                                    \
        }                                                                                                        \
        for (int p = 0; p < P; ++p) {                                                                            \
            c[p] += c_row[p];                                                                                    \
            w[p] += w_row[p];                                                                                    \
        }                                                                                                        \
    }

/* The work-item's place: P pixels of row y from x0; returns from the item when it lies beyond the band. */
#define IMGSUB_PLACE(T, P)                                                                                       \
    const size_t per_row = (size_t)((nx + P - 1) / P);                                                           \
    if (gid >= (size_t)rows * per_row) return;                                                                   \
    const int x0 = (int)(gid % per_row) * P;                                                                     \
    const int y = row0 + (int)(gid / per_row);                                                                   \
    const T yh = IMGSUB_NORMALISED(T, imgsub_place(y, tile, ny), ny);

#define IMGSUB_DIFFERENCE(T, S, P)                                                                               \
    ASTRO_FN void imgsub_difference_item_##S(size_t gid, ASTRO_GLOBAL const T *ASTRO_RESTRICT kbar,              \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT ref,                           \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT ref_var, int ref_row0,         \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT sci,                           \
                                             ASTRO_GLOBAL const T *ASTRO_RESTRICT sci_var, int sci_row0,         \
                                             int nx, int ny, int row0, int rows, int tile,                       \
                                             ASTRO_GLOBAL T *ASTRO_RESTRICT diff,                                \
                                             ASTRO_GLOBAL T *ASTRO_RESTRICT diff_var)                            \
    {                                                                                                            \
        IMGSUB_PLACE(T, P)                                                                                       \
        IMGSUB_SUMS(T, P, 1)                                                                                     \
        ASTRO_GLOBAL const T *bg = kbar + IMG_SIDE * IMG_SIDE * IMG_TERMS;                                       \
        for (int p = 0; p < P; ++p) {                                                                            \
            if (x0 + p >= nx) break;                                                                             \
            const size_t at = (size_t)(y - row0) * (size_t)nx + (size_t)(x0 + p);                                \
            const size_t in = (size_t)(y - sci_row0) * (size_t)nx + (size_t)(x0 + p);                            \
            const T background = IMGSUB_BACKGROUND(bg, xh[p], yh);                                               \
            diff[at] = sci[in] - c[p] - background;                                                              \
            diff_var[at] = sci_var[in] + w[p];                                                                   \
        }                                                                                                        \
    }

/* Detection's matched filter and its significance: with a constant kernel P (Kbar_0) over the difference D
 * and its variance VD (passed as ref and ref_var), no image subtracted, snr = sum P D / sqrt(sum P^2 VD), and 0
 * where sum P^2 VD is not positive (every pixel the filter reaches masked). One plane leaves the device
 * instead of the two sums. */
#define IMGSUB_FILTER(T, S, P)                                                                                   \
    ASTRO_FN void imgsub_filter_item_##S(size_t gid, ASTRO_GLOBAL const T *ASTRO_RESTRICT kbar,                  \
                                         ASTRO_GLOBAL const T *ASTRO_RESTRICT ref,                               \
                                         ASTRO_GLOBAL const T *ASTRO_RESTRICT ref_var, int ref_row0, int nx,     \
                                         int ny, int row0, int rows, ASTRO_GLOBAL T *ASTRO_RESTRICT snr)         \
    {                                                                                                            \
        const int tile = 0;                                                                                      \
        IMGSUB_PLACE(T, P)                                                                                       \
        IMGSUB_SUMS(T, P, 0)                                                                                     \
        (void)yh;                                                                                                \
        for (int p = 0; p < P; ++p) {                                                                            \
            if (x0 + p >= nx) break;                                                                             \
            const size_t at = (size_t)(y - row0) * (size_t)nx + (size_t)(x0 + p);                                \
            snr[at] = w[p] > (T)0 ? c[p] / ASTRO_SQRT(w[p]) : (T)0;                                              \
        }                                                                                                        \
    }

/* The matched filter's inputs from a band of the difference on the device (`subtract` on an accelerator): the
 * band's n pixels of D and VD begin at pixel `first` of the whole planes VI, fd, fv and the mask (pixel p's byte
 * is byte p & 3 of word p >> 2, little-endian: uploaded once for every band). fd = sign D and
 * fv = VD + corr max(VD - VI, 0) where the mask is 0, both 0 where it is not. VI is the unconvolved image's variance: VD - VI is the convolved image's share, scaled
 * for its correlated noise (subtract.rs forms the same on the host for the cpu model). fv may be VI itself (each
 * item reads its pixel of VI before it writes it there): not restrict-qualified. */
ASTRO_FN void imgsub_filter_inputs_item(size_t gid, ASTRO_GLOBAL const float *ASTRO_RESTRICT diff,
                                        ASTRO_GLOBAL const float *ASTRO_RESTRICT diff_var,
                                        ASTRO_GLOBAL const float *unconv_var,
                                        ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT mask_words, float sign,
                                        float corr, int first, int n, ASTRO_GLOBAL float *fd,
                                        ASTRO_GLOBAL float *fv)
{
    if (gid >= (size_t)n) return;
    const size_t at = (size_t)first + gid;
    const unsigned int m = (mask_words[at >> 2] >> (8u * (unsigned int)(at & 3u))) & 0xFFu;
    const float vd = diff_var[gid];
    const float excess = vd - unconv_var[at];
    fd[at] = m == 0u ? sign * diff[gid] : 0.0f;
    fv[at] = m == 0u ? vd + corr * (excess > 0.0f ? excess : 0.0f) : 0.0f;
}

#if ASTRO_HAS_FP64
/* The kernel fit's stamp sums (src/workload/imgsub/fit.rs and stamp_sums.rs), float64 only. A stamp holds M
 * columns of `pixels` values (its basis images R (x) K_n, the three background terms 1, x^, y^, and the target
 * image last) and a weight per pixel, w = 1 / (VI + sum K^2 VR). Entry e of the upper triangle, (a, b) =
 * (pairs[2e], pairs[2e + 1]) with a <= b, is G_ab = sum_p w_p col_a(p) col_b(p): the Gram matrix, the
 * right-hand side (b = M - 1) and sum w I^2 (a = b = M - 1) at once. One work-item per (stamp, entry), the
 * pixels summed in order. */
ASTRO_FN void imgsub_gram_item(size_t gid, ASTRO_GLOBAL const double *ASTRO_RESTRICT columns,
                               ASTRO_GLOBAL const double *ASTRO_RESTRICT weight,
                               ASTRO_GLOBAL const int *ASTRO_RESTRICT pairs, int stamps, int m, int entries,
                               int pixels, ASTRO_GLOBAL double *ASTRO_RESTRICT gram)
{
    if (gid >= (size_t)stamps * (size_t)entries) return;
    const size_t s = gid / (size_t)entries;
    const int e = (int)(gid % (size_t)entries);
    ASTRO_GLOBAL const double *ca = columns + (s * (size_t)m + (size_t)pairs[2 * e]) * (size_t)pixels;
    ASTRO_GLOBAL const double *cb = columns + (s * (size_t)m + (size_t)pairs[2 * e + 1]) * (size_t)pixels;
    ASTRO_GLOBAL const double *w = weight + s * (size_t)pixels;
    double sum = 0.0;
    for (int p = 0; p < pixels; ++p) sum += (w[p] * ca[p]) * cb[p];
    gram[gid] = sum;
}

/* The same stamps' noise lags S(u, v) = sum_p w_p VR(p - (u, v)) for the IMG_SIDE^2 taps: VR is the stamp's
 * window of the convolved image's variance, (side + 2H)^2 values from (x - half - H, y - half - H), and the
 * stamp is side x side pixels. One work-item per (stamp, tap). */
ASTRO_FN void imgsub_lag_item(size_t gid, ASTRO_GLOBAL const double *ASTRO_RESTRICT window,
                              ASTRO_GLOBAL const double *ASTRO_RESTRICT weight, int stamps, int side,
                              ASTRO_GLOBAL double *ASTRO_RESTRICT lag)
{
    const int taps = IMG_SIDE * IMG_SIDE;
    if (gid >= (size_t)stamps * (size_t)taps) return;
    const size_t s = gid / (size_t)taps;
    const int t = (int)(gid % (size_t)taps);
    const int u = t % IMG_SIDE - IMG_HALF, v = t / IMG_SIDE - IMG_HALF;
    const int span = side + 2 * IMG_HALF;
    ASTRO_GLOBAL const double *var = window + s * (size_t)span * (size_t)span;
    ASTRO_GLOBAL const double *w = weight + s * (size_t)side * (size_t)side;
    double sum = 0.0;
    for (int j = 0; j < side; ++j) {
        ASTRO_GLOBAL const double *row = var + (size_t)(j + IMG_HALF - v) * (size_t)span + (IMG_HALF - u);
        for (int i = 0; i < side; ++i) sum += w[j * side + i] * row[i];
    }
    lag[gid] = sum;
}

/* The sky left in D by the fitted background (src/workload/imgsub/subtract.rs, `residual_background`): D = I -
 * R (x) K - B in float64 at every `stride`-th pixel of every `stride`-th row, from the float32 images on the
 * device and the float64 kernel and background (kbar as above, B after it). Sample i is pixel ((i % across)
 * stride, (i / across) stride); each kernel row's taps in u order, then the row sums. One work-item per
 * sample; masked samples are computed too and left out by the host. */
ASTRO_FN void imgsub_sky_item(size_t gid, ASTRO_GLOBAL const double *ASTRO_RESTRICT kbar,
                              ASTRO_GLOBAL const float *ASTRO_RESTRICT ref,
                              ASTRO_GLOBAL const float *ASTRO_RESTRICT sci, int nx, int ny, int stride,
                              int across, int samples, ASTRO_GLOBAL double *ASTRO_RESTRICT sky)
{
    if (gid >= (size_t)samples) return;
    const int x = (int)(gid % (size_t)across) * stride, y = (int)(gid / (size_t)across) * stride;
    const double xh = IMGSUB_NORMALISED(double, x, nx), yh = IMGSUB_NORMALISED(double, y, ny);
    double c = 0.0;
    for (int v = -IMG_HALF; v <= IMG_HALF; ++v) {
        const int yy = y - v;
        if (yy < 0 || yy >= ny) continue;
        ASTRO_GLOBAL const float *r_row = ref + (size_t)yy * (size_t)nx;
        ASTRO_GLOBAL const double *k_row = kbar + (size_t)((v + IMG_HALF) * IMG_SIDE) * IMG_TERMS;
        double c_row = 0.0;
        for (int u = -IMG_HALF; u <= IMG_HALF; ++u) {
            const int xx = x - u;
            if (xx < 0 || xx >= nx) continue;
            ASTRO_GLOBAL const double *k = k_row + (size_t)(u + IMG_HALF) * IMG_TERMS;
            c_row += IMGSUB_TAP(IMGSUB_ROW_A(k, yh), IMGSUB_ROW_B(k, yh), k[3], xh) * (double)r_row[xx];
        }
        c += c_row;
    }
    ASTRO_GLOBAL const double *bg = kbar + IMG_SIDE * IMG_SIDE * IMG_TERMS;
    sky[gid] = (double)sci[(size_t)y * (size_t)nx + (size_t)x] - c - IMGSUB_BACKGROUND(bg, xh, yh);
}
#endif

IMGSUB_DIFFERENCE(float, f32, IMG_PIXELS_F32)
IMGSUB_FILTER(float, f32, IMG_PIXELS_F32)
#if ASTRO_HAS_FP64
IMGSUB_DIFFERENCE(double, f64, IMG_PIXELS_F64)
IMGSUB_FILTER(double, f64, IMG_PIXELS_F64)
#endif

#endif
