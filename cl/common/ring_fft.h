/* Complex FFTs of any length on devices, one work-group per sequence, in global memory; written once for the
 * three dialects. The SHT's ring stage uses them (cl/common/sht.h: every ring length HEALPix or a ring list
 * needs, not only powers of two).
 *
 * A sequence of n values owns a work area of four regions of W complex values each (W >= n, chosen by the host,
 * src/workload/sht/device.rs `fft_work_length`):
 *   W == n  mixed-radix Stockham (radix 8, 4, 2, then each odd prime factor as a direct DFT): regions 0 and 1
 *           are the ping-pong pair, region 3 the table e^{-2πik/n} (written only when n has an odd factor);
 *   W >  n  Bluestein's chirp-z: W is a power of two >= 2n − 1 and the DFT is a circular convolution of length W
 *           through three power-of-two Stockham transforms, for lengths whose prime factors make the direct DFTs
 *           costlier than that.
 * Complex values are (re, im) pairs of doubles. Each Stockham pass ends with a work-group barrier that orders
 * global memory, and the buffers are neither const nor restrict, so no read of a value written by another
 * item of the group goes through a non-coherent cache. Transforms are unnormalised: sign −1 is e^{−2πijk/n},
 * sign +1 its inverse times n. */
#ifndef RING_FFT_H
#define RING_FFT_H

#if ASTRO_HAS_FP64

/* The radix of the next pass for the remaining length: 8, 4 and 2 first (fewer passes over memory), then the
 * smallest odd factor. */
ASTRO_FN int fft_next_radix(int rest)
{
    if (rest % 8 == 0) return 8;
    if (rest % 4 == 0) return 4;
    if (rest % 2 == 0) return 2;
    for (int d = 3; d * d <= rest; d += 2)
        if (rest % d == 0) return d;
    return rest;
}

/* tw[k] = e^{−2πik/n} for k < n; sinpi and cospi keep the argument exact. */
ASTRO_FN void fft_twiddles(ASTRO_GLOBAL double *tw, int n, int lid, int lsize)
{
    for (int k = lid; k < n; k += lsize) {
        double s, c;
        ASTRO_SINCOSPI((double)(2 * k) / (double)n, &s, &c);
        tw[2 * k] = c;
        tw[2 * k + 1] = -s;
    }
}

/* (re, im) · (c + i s). */
ASTRO_FN void fft_mul(double c, double s, double *re, double *im)
{
    const double r = *re;
    *re = r * c - *im * s;
    *im = r * s + *im * c;
}

/* (re, im) · e^{sign 2πi e/N}, the table entry e · step of a table of length N · step. */
ASTRO_FN void fft_rotate(ASTRO_GLOBAL const double *tw, int index, int sign, double *re, double *im)
{
    fft_mul(tw[2 * index], sign < 0 ? tw[2 * index + 1] : -tw[2 * index + 1], re, im);
}

/* The number of Stockham passes for length n: the result of fft_stockham is in b when it is odd. */
ASTRO_FN int fft_passes(int n)
{
    int passes = 0;
    for (int rest = n; rest > 1; rest /= fft_next_radix(rest)) passes++;
    return passes;
}

/* e^{sign 2πi k/span}, by sinpi/cospi: radix-2 and radix-4 passes compute their twiddles instead of reading
 * the table, since the ring stage is bound by memory traffic and the table is a third of it. */
ASTRO_FN void fft_unit(int k, int span, int sign, double *c, double *s)
{
    double sn, cs;
    ASTRO_SINCOSPI((double)(2 * k) / (double)span, &sn, &cs);
    *c = cs;
    *s = sign * sn;
}


/* In-place 8-point DFT y_q = Σ_r v_r e^{sign 2πi rq/8}: two 4-point DFTs of the even and odd inputs, then
 * one radix-2 step with the twiddles e^{sign 2πi q/8}. */
ASTRO_FN void fft_dft8(double *re, double *im, int sign)
{
    const double h = 0.70710678118654752440; /* √½ */
    double er[4], ei[4], orr[4], oi[4];
    for (int part = 0; part < 2; part++) {
        double *xr = part ? orr : er, *xi = part ? oi : ei;
        const double a0r = re[part], a0i = im[part], a1r = re[part + 2], a1i = im[part + 2];
        const double a2r = re[part + 4], a2i = im[part + 4], a3r = re[part + 6], a3i = im[part + 6];
        const double t0r = a0r + a2r, t0i = a0i + a2i, t1r = a0r - a2r, t1i = a0i - a2i;
        const double t2r = a1r + a3r, t2i = a1i + a3i;
        const double t3r = -sign * (a1i - a3i), t3i = sign * (a1r - a3r);
        xr[0] = t0r + t2r;
        xi[0] = t0i + t2i;
        xr[1] = t1r + t3r;
        xi[1] = t1i + t3i;
        xr[2] = t0r - t2r;
        xi[2] = t0i - t2i;
        xr[3] = t1r - t3r;
        xi[3] = t1i - t3i;
    }
    /* Odd half turned by e^{sign 2πi q/8}, q = 0..3: 1, h(1 + sign i), sign i, h(−1 + sign i). */
    const double w1r = h, w1i = sign * h, w3r = -h, w3i = sign * h;
    double r1 = orr[1] * w1r - oi[1] * w1i, i1 = orr[1] * w1i + oi[1] * w1r;
    double r2 = -sign * oi[2], i2 = sign * orr[2];
    double r3 = orr[3] * w3r - oi[3] * w3i, i3 = orr[3] * w3i + oi[3] * w3r;
    orr[1] = r1;
    oi[1] = i1;
    orr[2] = r2;
    oi[2] = i2;
    orr[3] = r3;
    oi[3] = i3;
    for (int q = 0; q < 4; q++) {
        re[q] = er[q] + orr[q];
        im[q] = ei[q] + oi[q];
        re[q + 4] = er[q] - orr[q];
        im[q + 4] = ei[q] - oi[q];
    }
}

/* Butterfly j < n/p of the Stockham pass with span ns (the product of the radices done) and radix p (any
 * factor of n/ns: Stockham takes the factors in any order): reads src[j + r n/p], turns input r by w^{r k} (w = e^{sign 2πi/(ns p)},
 * k = j mod ns), takes the p-point DFT and writes output q to (j − k) p + k + q ns. Odd radices read their
 * turns from the table tw of e^{−2πik/n} when `table` is set, else compute them (a transform too long for
 * a table that its memory traffic could afford). */
ASTRO_FN void fft_butterfly(ASTRO_GLOBAL const double *src, ASTRO_GLOBAL double *dst, ASTRO_GLOBAL const double *tw,
                            int table, int n, int ns, int p, int sign, int j)
{
    const int m = n / p, span = ns * p, step = n / span;
    const int k = j % ns, out = (j - k) * p + k;
    if (p == 2) {
        double r0 = src[2 * j], i0 = src[2 * j + 1];
        double r1 = src[2 * (j + m)], i1 = src[2 * (j + m) + 1], c, sn;
        fft_unit(k, span, sign, &c, &sn);
        fft_mul(c, sn, &r1, &i1);
        dst[2 * out] = r0 + r1;
        dst[2 * out + 1] = i0 + i1;
        dst[2 * (out + ns)] = r0 - r1;
        dst[2 * (out + ns) + 1] = i0 - i1;
    } else if (p == 8) {
        double re[8], im[8];
        for (int r = 0; r < 8; r++) {
            re[r] = src[2 * (j + r * m)];
            im[r] = src[2 * (j + r * m) + 1];
            if (r > 0) {
                double c, sn;
                fft_unit(r * k, span, sign, &c, &sn);
                fft_mul(c, sn, &re[r], &im[r]);
            }
        }
        fft_dft8(re, im, sign);
        for (int q = 0; q < 8; q++) {
            dst[2 * (out + q * ns)] = re[q];
            dst[2 * (out + q * ns) + 1] = im[q];
        }
    } else if (p == 4) {
        double re[4], im[4], c1, s1;
        for (int r = 0; r < 4; r++) {
            re[r] = src[2 * (j + r * m)];
            im[r] = src[2 * (j + r * m) + 1];
        }
        /* w^k, w^2k = (w^k)², w^3k = w^2k · w^k. */
        fft_unit(k, span, sign, &c1, &s1);
        const double c2 = c1 * c1 - s1 * s1, s2 = 2.0 * c1 * s1;
        const double c3 = c2 * c1 - s2 * s1, s3 = c2 * s1 + s2 * c1;
        fft_mul(c1, s1, &re[1], &im[1]);
        fft_mul(c2, s2, &re[2], &im[2]);
        fft_mul(c3, s3, &re[3], &im[3]);
        /* 4-point DFT: ω = e^{sign 2πi/4} = sign·i. */
        const double t0r = re[0] + re[2], t0i = im[0] + im[2];
        const double t1r = re[0] - re[2], t1i = im[0] - im[2];
        const double t2r = re[1] + re[3], t2i = im[1] + im[3];
        const double t3r = -sign * (im[1] - im[3]), t3i = sign * (re[1] - re[3]);
        dst[2 * out] = t0r + t2r;
        dst[2 * out + 1] = t0i + t2i;
        dst[2 * (out + ns)] = t1r + t3r;
        dst[2 * (out + ns) + 1] = t1i + t3i;
        dst[2 * (out + 2 * ns)] = t0r - t2r;
        dst[2 * (out + 2 * ns) + 1] = t0i - t2i;
        dst[2 * (out + 3 * ns)] = t1r - t3r;
        dst[2 * (out + 3 * ns) + 1] = t1i - t3i;
    } else {
        /* Direct p-point DFT: input r of output q turns by e^{sign 2πi r (k + q ns)/span}: a table entry, or
         * without a table the r-th power of one computed turn per output (p ≤ 5 here, so the powers' rounding
         * stays at a few ulps). */
        for (int q = 0; q < p; q++) {
            const int inc = k + q * ns;
            double accr = 0.0, acci = 0.0, tc = 1.0, ts = 0.0, bc = 1.0, bs = 0.0;
            if (!table) fft_unit(inc, span, sign, &bc, &bs);
            int e = 0;
            for (int r = 0; r < p; r++) {
                double vr = src[2 * (j + r * m)], vi = src[2 * (j + r * m) + 1];
                if (table) {
                    fft_rotate(tw, e * step, sign, &vr, &vi);
                    e += inc;
                    if (e >= span) e -= span;
                } else {
                    fft_mul(tc, ts, &vr, &vi);
                    fft_mul(bc, bs, &tc, &ts);
                }
                accr += vr;
                acci += vi;
            }
            dst[2 * (out + q * ns)] = accr;
            dst[2 * (out + q * ns) + 1] = acci;
        }
    }
}

/* Stockham autosort over the n values at a, with b as partner and tw the table of n; the result is in b when
 * fft_passes(n) is odd, else in a. Each pass is fft_butterfly over j < n/p; every item of the group calls
 * it; src and dst are chosen by the pass's parity, not carried across the barrier. */
ASTRO_FN void fft_stockham(ASTRO_GLOBAL double *a, ASTRO_GLOBAL double *b, ASTRO_GLOBAL const double *tw, int n,
                           int sign, int lid, int lsize)
{
    int pass = 0;
    for (int ns = 1; ns < n; pass++) {
        ASTRO_GLOBAL const double *src = (pass & 1) ? b : a;
        ASTRO_GLOBAL double *dst = (pass & 1) ? a : b;
        const int p = fft_next_radix(n / ns);
        for (int j = lid; j < n / p; j += lsize) fft_butterfly(src, dst, tw, 1, n, ns, p, sign, j);
        ASTRO_BARRIER_GLOBAL();
        ns *= p;
    }
}

/* Bluestein's chirp e^{sign πi k²/n}, with k² reduced modulo 2n first so that the argument stays exact. */
ASTRO_FN void fft_chirp(int k, int n, int sign, double *re, double *im)
{
    const ASTRO_I64 kk = ((ASTRO_I64)k * (ASTRO_I64)k) % (2 * (ASTRO_I64)n);
    double s, c;
    ASTRO_SINCOSPI((double)kk / (double)n, &s, &c);
    *re = c;
    *im = sign * s;
}

/* The DFT (sign −1) or inverse DFT (+1) of the n values in region 0 of the work area (work: 4 W complex
 * values); returns the region (0..2) that holds the n results. The caller has written region 0 and passed a
 * barrier; every exit is after a barrier. */
ASTRO_FN int fft_any(ASTRO_GLOBAL double *work, int n, int W, int sign, int lid, int lsize)
{
    ASTRO_GLOBAL double *tw = work + 6 * (ASTRO_I64)W;
    /* Only the direct DFTs of odd factors read the table; radix 8, 4 and 2 compute their twiddles, so a
     * power-of-two length (every Bluestein W) writes none. */
    if ((W & (W - 1)) != 0) fft_twiddles(tw, W, lid, lsize);
    ASTRO_BARRIER_GLOBAL();
    if (W == n) {
        fft_stockham(work, work + 2 * (ASTRO_I64)W, tw, n, sign, lid, lsize);
        return fft_passes(n) & 1;
    }
    /* Bluestein. X_k = c_k Σ_j (x_j c_j) conj(c_{k−j}): region 0 holds a = x·c zero-padded to W, region 1
     * b = conj(c) wrapped around; A = DFT(a) ends in region fa (0 or 2), B = DFT(b) in fb (1 or the one of 0, 2
     * that A left), and the inverse of A·B in the region of the three left over or in fa. */
    for (int k = lid; k < W; k += lsize) {
        double cr, ci, xr = 0.0, xi = 0.0;
        if (k < n) {
            fft_chirp(k, n, sign, &cr, &ci);
            const double vr = work[2 * k], vi = work[2 * k + 1];
            xr = vr * cr - vi * ci;
            xi = vr * ci + vi * cr;
        }
        work[2 * k] = xr;
        work[2 * k + 1] = xi;
        const int t = k <= W - k ? k : W - k;
        double br = 0.0, bi = 0.0;
        if (t < n) {
            fft_chirp(t, n, sign, &cr, &ci);
            br = cr;
            bi = -ci;
        }
        work[2 * (W + k)] = br;
        work[2 * (W + k) + 1] = bi;
    }
    ASTRO_BARRIER_GLOBAL();
    const int odd = fft_passes(W) & 1;
    const int fa = odd ? 2 : 0, free_region = odd ? 0 : 2;
    const int fb = odd ? free_region : 1, spare = odd ? 1 : free_region;
    fft_stockham(work, work + 4 * (ASTRO_I64)W, tw, W, -1, lid, lsize);
    fft_stockham(work + 2 * (ASTRO_I64)W, work + 2 * (ASTRO_I64)free_region * W, tw, W, -1, lid, lsize);
    ASTRO_GLOBAL double *pa = work + 2 * (ASTRO_I64)fa * W;
    ASTRO_GLOBAL const double *pb = work + 2 * (ASTRO_I64)fb * W;
    for (int k = lid; k < W; k += lsize) {
        const double ar = pa[2 * k], ai = pa[2 * k + 1], br = pb[2 * k], bi = pb[2 * k + 1];
        pa[2 * k] = ar * br - ai * bi;
        pa[2 * k + 1] = ar * bi + ai * br;
    }
    ASTRO_BARRIER_GLOBAL();
    fft_stockham(pa, work + 2 * (ASTRO_I64)spare * W, tw, W, 1, lid, lsize);
    const int conv = odd ? spare : fa;
    ASTRO_GLOBAL double *pc = work + 2 * (ASTRO_I64)conv * W;
    const double scale = 1.0 / (double)W; /* W is a power of two: exact */
    for (int k = lid; k < n; k += lsize) {
        double cr, ci;
        fft_chirp(k, n, sign, &cr, &ci);
        const double vr = pc[2 * k] * scale, vi = pc[2 * k + 1] * scale;
        pc[2 * k] = vr * cr - vi * ci;
        pc[2 * k + 1] = vr * ci + vi * cr;
    }
    ASTRO_BARRIER_GLOBAL();
    return conv;
}

#endif /* ASTRO_HAS_FP64 */
#endif /* RING_FFT_H */
