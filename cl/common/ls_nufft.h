/* Lomb-Scargle by non-uniform FFT on devices (src/workload/lombscargle/nufft.rs has the method and the `cpu`
 * model's version): the per-item work of the five kernels, written once for the three dialects.
 *
 *   strengths  point j: c = e^{2πi f_c t_j} times wy_j and w_j, and c² w_j (the sums at 2f)
 *   spread     fine-grid cell l: Σ over the points whose kernel covers l of φ(z) c_j, gathered (not scattered)
 *              through the host's cell sort, so every cell is written once and sums in a fixed order
 *   fft        one butterfly of one Stockham pass of one grid (cl/common/ring_fft.h)
 *   power      frequency k: the three modes from their FFT bins and the kernel's Fourier transform, the power,
 *              and a first-order bound on its error; a bin whose bound passes the tolerance is listed
 *   direct     the listed bins summed directly in float64, one work-group per bin (fixed tree reduction)
 *
 * Grids are complex (re, im) doubles, n cells each, in one buffer: grid 0 holds Σ wy c, grid 1 Σ w c (both at
 * the positions u), grid 2 Σ w c² (at 2u). */
#ifndef LS_NUFFT_H
#define LS_NUFFT_H

#if ASTRO_HAS_FP64

/* Work-items per group of the direct kernel (its local arrays). */
#define LS_NUFFT_DIRECT_GROUP 256

/* Point j's strengths: six doubles (wy c, w c, w c²) as (re, im) pairs, c = e^{2πi f_c t_j} from the exact
 * fixed-point phase. Item 0 also clears the count of doubtful bins. */
ASTRO_FN void ls_nufft_strengths_item(int j, int n_points, ASTRO_GLOBAL const unsigned int *times,
                                      ASTRO_GLOBAL const double *weights, ASTRO_U64 centre,
                                      ASTRO_GLOBAL double *strengths, ASTRO_GLOBAL unsigned int *doubtful)
{
    if (j == 0) doubtful[0] = 0u;
    if (j >= n_points) return;
    const double turns = (double)(ASTRO_I64)ls_phase64(ls_u64(times + 2 * j), centre) *
                         (1.0 / 18446744073709551616.0);
    double s, c;
    ASTRO_SINCOSPI(2.0 * turns, &s, &c);
    const double wy = weights[2 * j], w = weights[2 * j + 1];
    ASTRO_GLOBAL double *out = strengths + 6 * (ASTRO_I64)j;
    out[0] = wy * c;
    out[1] = wy * s;
    out[2] = w * c;
    out[3] = w * s;
    out[4] = w * (c * c - s * s);
    out[5] = w * (2.0 * c * s);
}

/* The spreading kernel φ(z) = exp(β(√(1 − z²) − 1)) on |z| < 1. */
ASTRO_FN double ls_nufft_phi(double z, double beta)
{
    return z * z < 1.0 ? ASTRO_EXP(beta * (ASTRO_SQRT(1.0 - z * z) - 1.0)) : 0.0;
}

/* Cell l of grids out_grid..out_grid+grids-1 (grids is 1 or 2) from the strengths pairs first..first+grids-1
 * of the points whose first cell is l − i (mod n), i < width: points sorted by first cell (`order`), `start[c]`
 * the first of cell c's, `offset[j]` the distance in cells from point j's kernel edge to its first cell. */
ASTRO_FN void ls_nufft_spread_item(int l, int n, int width, double beta, ASTRO_GLOBAL const unsigned int *order,
                                   ASTRO_GLOBAL const unsigned int *start, ASTRO_GLOBAL const double *offset,
                                   ASTRO_GLOBAL const double *strengths, int first, int grids, int out_grid,
                                   ASTRO_GLOBAL double *out)
{
    if (l >= n) return;
    out += 2 * (ASTRO_I64)n * out_grid;
    const double radius = 0.5 * width;
    double a0 = 0.0, a1 = 0.0, b0 = 0.0, b1 = 0.0;
    for (int i = 0; i < width; i++) {
        const int cell = l - i < 0 ? l - i + n : l - i;
        for (unsigned int q = start[cell]; q < start[cell + 1]; q++) {
            const unsigned int j = order[q];
            const double phi = ls_nufft_phi((i + offset[j] - radius) / radius, beta);
            ASTRO_GLOBAL const double *c = strengths + 6 * (ASTRO_I64)j + 2 * first;
            a0 += phi * c[0];
            a1 += phi * c[1];
            if (grids == 2) {
                b0 += phi * c[2];
                b1 += phi * c[3];
            }
        }
    }
    out[2 * (ASTRO_I64)l] = a0;
    out[2 * (ASTRO_I64)l + 1] = a1;
    if (grids == 2) {
        out[2 * ((ASTRO_I64)n + l)] = b0;
        out[2 * ((ASTRO_I64)n + l) + 1] = b1;
    }
}

/* Item g of one inverse (sign +1) Stockham pass of radix p with span ns over `batch` grids of n cells. The host
 * orders the radices (a radix 2 first: the first pass writes with a stride of p values, so the smallest p
 * keeps its stores densest). */
ASTRO_FN void ls_nufft_fft_item(int g, int n, int ns, int p, int batch, ASTRO_GLOBAL const double *src,
                                ASTRO_GLOBAL double *dst)
{
    const int per_grid = n / p;
    if (g >= per_grid * batch) return;
    const int b = g / per_grid;
    const ASTRO_I64 shift = 2 * (ASTRO_I64)n * b;
    fft_butterfly(src + shift, dst + shift, src, 0, n, ns, p, 1, g - b * per_grid);
}

/* First-order bound on the error of the standard power when yc, ys are off by e_y, c, s by e_w (floating mean
 * only) and cc, cs by e_2: the same as `power_error_bound` in src/workload/lombscargle/cpu.rs. */
ASTRO_FN double ls_power_error_bound(double yc, double ys, double c, double s, double cc, double cs, int floating,
                                     double e_y, double e_w, double e_2)
{
    if (!floating) {
        c = 0.0;
        s = 0.0;
    }
    const double ccp = cc - c * c, ssp = 1.0 - cc - s * s, csp = cs - c * s;
    const double d = ccp * ssp - csp * csp;
    if (!(d > 0.0)) return 1e300;
    const double p = (ssp * yc * yc + ccp * ys * ys - 2.0 * csp * yc * ys) / d;
    const double g_ccp = (ys * ys - p * ssp) / d, g_ssp = (yc * yc - p * ccp) / d;
    const double g_csp = 2.0 * (p * csp - yc * ys) / d;
    const double d_yc = 2.0 * (ssp * yc - csp * ys) / d, d_ys = 2.0 * (ccp * ys - csp * yc) / d;
    double bound = e_y * (ASTRO_FABS(d_yc) + ASTRO_FABS(d_ys)) + e_2 * (ASTRO_FABS(g_ccp - g_ssp) + ASTRO_FABS(g_csp));
    if (floating)
        bound += e_w * (ASTRO_FABS(-2.0 * c * g_ccp - s * g_csp) + ASTRO_FABS(-2.0 * s * g_ssp - c * g_csp));
    return bound;
}

/* Frequency k of `modes` (mode k − ⌊modes/2⌋): the correction 2/(w ∫φ(z) cos(|k'| a z) dz) by the host's
 * Gauss-Legendre nodes (z, weight·φ(z)) on z > 0, the sums, the power; k is appended to the doubtful list
 * when its error bound passes the tolerance. */
ASTRO_FN void ls_nufft_power_item(int k, int modes, int n, ASTRO_GLOBAL const double *grids,
                                  ASTRO_GLOBAL const double *nodes, int n_nodes, double a, double scale,
                                  int floating, double e_y, double e_w, double tolerance,
                                  ASTRO_GLOBAL double *power, ASTRO_GLOBAL unsigned int *doubtful)
{
    if (k >= modes) return;
    const int centred = k - modes / 2;
    const int bin = centred < 0 ? centred + n : centred;
    const double ak = (double)(centred < 0 ? -centred : centred) * a;
    double integral = 0.0;
    for (int q = 0; q < n_nodes; q++) integral += nodes[2 * q + 1] * ASTRO_COS(ak * nodes[2 * q]);
    const double corr = scale / integral;
    const ASTRO_I64 n2 = 2 * (ASTRO_I64)n;
    const double yc = grids[2 * bin] * corr, ys = grids[2 * bin + 1] * corr;
    const double c = floating ? grids[n2 + 2 * bin] * corr : 0.0;
    const double s = floating ? grids[n2 + 2 * bin + 1] * corr : 0.0;
    const double cc = 0.5 * (1.0 + grids[2 * n2 + 2 * bin] * corr), cs = 0.5 * grids[2 * n2 + 2 * bin + 1] * corr;
    double p;
    LS_POWER(double, yc, ys, c, s, cc, cs, p);
    power[k] = p;
    if (ls_power_error_bound(yc, ys, c, s, cc, cs, floating, e_y, e_w, 0.5 * e_w) > tolerance) {
        const unsigned int slot = ASTRO_ATOMIC_INC(doubtful);
        doubtful[1 + slot] = (unsigned int)k;
    }
}

/* Work-group `group` of `groups`: the doubtful bins group, group + groups, ... summed directly in float64 over
 * every point (item lid takes points lid, lid + LS_NUFFT_DIRECT_GROUP, ...; then a fixed tree in `part`, six
 * arrays of LS_NUFFT_DIRECT_GROUP doubles). Frequency k is f0 + k df in float64, then fixed point (`unit` =
 * 2^freq_bits): accumulating a fixed-point df over k would shift it by k times df's rounding. */
ASTRO_FN void ls_nufft_direct_item(int group, int groups, int lid, int n_points, ASTRO_GLOBAL const unsigned int *times,
                                   ASTRO_GLOBAL const double *weights, double f0, double df, double unit, int floating,
                                   ASTRO_GLOBAL const unsigned int *doubtful, ASTRO_LOCAL double *part,
                                   ASTRO_GLOBAL double *power)
{
    const unsigned int count = doubtful[0];
    for (unsigned int e = (unsigned int)group; e < count; e += (unsigned int)groups) {
        const unsigned int k = doubtful[1 + e];
        const ASTRO_U64 f = (ASTRO_U64)((f0 + (double)k * df) * unit + 0.5);
        double yc = 0, ys = 0, c = 0, s = 0, cc = 0, cs = 0;
        for (int j = lid; j < n_points; j += LS_NUFFT_DIRECT_GROUP) {
            const double wy = weights[2 * j], w = weights[2 * j + 1];
            LS_ACCUMULATE(double, ASTRO_SINCOS, ls_angle64(ls_phase64(ls_u64(times + 2 * j), f)), wy, w, 1, yc, ys,
                          c, s, cc, cs);
        }
        part[lid] = yc;
        part[LS_NUFFT_DIRECT_GROUP + lid] = ys;
        part[2 * LS_NUFFT_DIRECT_GROUP + lid] = c;
        part[3 * LS_NUFFT_DIRECT_GROUP + lid] = s;
        part[4 * LS_NUFFT_DIRECT_GROUP + lid] = cc;
        part[5 * LS_NUFFT_DIRECT_GROUP + lid] = cs;
        for (int span = LS_NUFFT_DIRECT_GROUP / 2; span > 0; span /= 2) {
            ASTRO_BARRIER();
            if (lid < span)
                for (int q = 0; q < 6; q++) part[q * LS_NUFFT_DIRECT_GROUP + lid] += part[q * LS_NUFFT_DIRECT_GROUP + lid + span];
        }
        ASTRO_BARRIER();
        if (lid == 0) {
            const double sc = floating ? part[2 * LS_NUFFT_DIRECT_GROUP] : 0.0;
            const double ss = floating ? part[3 * LS_NUFFT_DIRECT_GROUP] : 0.0;
            double p;
            LS_POWER(double, part[0], part[LS_NUFFT_DIRECT_GROUP], sc, ss, part[4 * LS_NUFFT_DIRECT_GROUP],
                     part[5 * LS_NUFFT_DIRECT_GROUP], p);
            power[k] = p;
        }
        ASTRO_BARRIER();
    }
}

#endif /* ASTRO_HAS_FP64 */
#endif /* LS_NUFFT_H */
