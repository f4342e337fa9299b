/* Spherical harmonic transforms: the Legendre stage on devices, written once for the three dialects
 * (src/workload/sht/device.rs builds the buffers; docs/sht.md explains the layout).
 *
 * Synthesis: a work-group is one m and one block of SHT_GROUP * SHT_LANES ring pairs. Analysis: a work-group is
 * one m and walks the blocks in turn (it owns its m's coefficients, so it sums them without atomics and in a
 * fixed order). A work-item walks l = m..lmax for SHT_LANES ring pairs (pair q = block * SHT_PAIRS_PER_BLOCK + lane * SHT_GROUP + lid, so loads coalesce).
 * The recurrence coefficients a_l, b_l of the group's m are computed SHT_CHUNK degrees at a time into local
 * memory (two square roots per degree per group, nothing per ring pair), with the chunk's a_lm in synthesis.
 *
 * The recurrence is src/workload/sht/legendre.rs's, term for term: λ_mm = (−1)^m c_m sin^m θ carried as
 * v·2^(−600k); λ_l = fma(a_l cos θ, λ_{l−1}, −b_l λ_{l−2}); while k > 0 a value above 2^300 is scaled by
 * 2^−600 and the lane contributes 0. Only terms with k = 0 (true value above 2^−300) enter the sums.
 *
 * Layouts (complex values as (re, im) doubles):
 *   pair_cs[2q], pair_cs[2q+1]          cos θ, sin θ of pair q (the northern ring)
 *   pair_rings[2q], pair_rings[2q+1]    its northern ring and its southern mirror (−1 if none)
 *   cmm[m − m0]                         c_m of the band's m
 *   alm                                 the band's a_lm, m-major from m0 (l = m..lmax for each m)
 *   delta[(m − m0) nrings + ring]       Σ_l a_lm λ_lm(θ_ring) (synthesis's output)
 *   g[(m − m0) nrings + ring]           the ring phases G_m (analysis's input, weights applied)
 *   alm (analysis's output)             the band's a_lm, as synthesis reads them
 */
#ifndef SHT_H
#define SHT_H

#include "ring_fft.h"

#define SHT_GROUP 64
#define SHT_LANES 4
#define SHT_CHUNK 32
/* Work-items per ring in the ring stage. */
#define SHT_RING_GROUP 128
#define SHT_PAIRS_PER_BLOCK (SHT_GROUP * SHT_LANES)
/* Stride of one degree's row of per-item contributions in local memory: one more than the group, so the
 * reduction's reads fall in different banks. */
#define SHT_CONTRIB_STRIDE (SHT_GROUP + 1)

#if SHT_GROUP % SHT_CHUNK != 0
#  error "the analysis reduction gives each degree of a chunk the same number of work-items"
#endif

#if ASTRO_HAS_FP64

/* 2^e for e in the normal range. */
ASTRO_FN double sht_two_pow(int e) { return ASTRO_U64_AS_F64((ASTRO_U64)(1023 + e) << 52); }

/* x > 0 as a mantissa in [0.5, 1) and an exponent. */
ASTRO_FN double sht_frexp(double x, int *e)
{
    int extra = 0;
    if (((ASTRO_F64_AS_U64(x) >> 52) & 0x7ff) == 0) { /* subnormal */
        x *= sht_two_pow(64);
        extra = -64;
    }
    const ASTRO_U64 bits = ASTRO_F64_AS_U64(x);
    *e = (int)((bits >> 52) & 0x7ff) - 1022 + extra;
    return ASTRO_U64_AS_F64((bits & ~((ASTRO_U64)0x7ff << 52)) | ((ASTRO_U64)1022 << 52));
}

/* x^n for 0 < x <= 1 as a mantissa in [0.5, 1) and an exponent, by squaring with the exponent kept apart. */
ASTRO_FN double sht_pow_scaled(double x, int n, int *exponent)
{
    int base_e, e;
    double base = sht_frexp(x, &base_e);
    double acc = 0.5;
    int acc_e = 1;
    while (n > 0) {
        if (n & 1) {
            acc = sht_frexp(acc * base, &e);
            acc_e += base_e + e;
        }
        n >>= 1;
        if (n > 0) {
            base = sht_frexp(base * base, &e);
            base_e = 2 * base_e + e;
        }
    }
    *exponent = acc_e;
    return acc;
}

/* λ_mm at sin θ as v·2^(−600k): returns v, sets k. */
ASTRO_FN double sht_start(double sin_theta, int m, double c_m, int *k)
{
    int e;
    const double mant = sht_pow_scaled(sin_theta, m, &e);
    const double v = ((m & 1) ? -c_m : c_m) * mant;
    if (e >= -300) {
        *k = 0;
        return v * sht_two_pow(e);
    }
    const int steps = (-300 - e + 599) / 600;
    *k = steps;
    return v * sht_two_pow(e + 600 * steps);
}

/* a_l of the recurrence, l > m. */
ASTRO_FN double sht_a(int l, int m)
{
    const double lf = (double)l, mf = (double)m;
    return ASTRO_SQRT((4.0 * lf * lf - 1.0) / ((lf - mf) * (lf + mf)));
}

/* Index of a_mm in an m-major coefficient array that starts at m = 0. */
ASTRO_FN ASTRO_I64 sht_alm_offset(int m, int lmax) { return (ASTRO_I64)m * (2 * lmax + 3 - m) / 2; }

/* One work-item's walk: SHT_LANES ring pairs with their recurrence state. */
typedef struct {
    double cs[SHT_LANES], p[SHT_LANES], pp[SHT_LANES];
    int k[SHT_LANES];
    int scaled; /* some lane still carries k > 0 */
} ShtWalk;

/* Sets up the lanes of work-item `lid` of `block` for m; lanes past the last pair sit on the equator (their
 * results are dropped; in analysis their phases are 0). Returns the pair of each lane in q (−1: none). */
ASTRO_FN void sht_walk_start(ShtWalk *w, int q[SHT_LANES], int block, int lid, int npairs, int m, double c_m,
                             ASTRO_GLOBAL const double *ASTRO_RESTRICT pair_cs)
{
    w->scaled = 0;
    for (int lane = 0; lane < SHT_LANES; ++lane) {
        const int pair = block * SHT_PAIRS_PER_BLOCK + lane * SHT_GROUP + lid;
        const int valid = pair < npairs;
        q[lane] = valid ? pair : -1;
        w->cs[lane] = valid ? pair_cs[2 * pair] : 0.0;
        const double sin_theta = valid ? pair_cs[2 * pair + 1] : 1.0;
        w->p[lane] = sht_start(sin_theta, m, c_m, &w->k[lane]);
        w->pp[lane] = 0.0;
        w->scaled |= w->k[lane] > 0;
    }
}

/* λ_mm of every lane (0 where still out of double range). */
ASTRO_FN void sht_walk_first(const ShtWalk *w, double lambda[SHT_LANES])
{
    for (int lane = 0; lane < SHT_LANES; ++lane)
        lambda[lane] = w->k[lane] == 0 ? w->p[lane] : 0.0;
}

/* One degree up: λ of every lane at the next l. */
ASTRO_FN void sht_walk_step(ShtWalk *w, double a, double b, double lambda[SHT_LANES])
{
    if (w->scaled) {
        int any = 0;
        for (int lane = 0; lane < SHT_LANES; ++lane) {
            double next = ASTRO_FMA(a * w->cs[lane], w->p[lane], -b * w->pp[lane]);
            double p = w->p[lane];
            if (w->k[lane] > 0 && ASTRO_FABS(next) > 0x1p300) {
                next *= 0x1p-600;
                p *= 0x1p-600;
                w->k[lane] -= 1;
            }
            w->pp[lane] = p;
            w->p[lane] = next;
            lambda[lane] = w->k[lane] == 0 ? next : 0.0;
            any |= w->k[lane] > 0;
        }
        w->scaled = any;
    } else {
        for (int lane = 0; lane < SHT_LANES; ++lane) {
            const double next = ASTRO_FMA(a * w->cs[lane], w->p[lane], -b * w->pp[lane]);
            w->pp[lane] = w->p[lane];
            w->p[lane] = next;
            lambda[lane] = next;
        }
    }
}

/* Stages (a_l, b_l) for l = lbase + j, j < SHT_CHUNK, into ab (0 where l = m or l > lmax; b_{m+1} = 0). */
ASTRO_FN void sht_stage_ab(int lid, int m, int lbase, int lmax, ASTRO_LOCAL double *ab)
{
    if (lid < SHT_CHUNK) {
        const int l = lbase + lid;
        double a = 0.0, b = 0.0;
        if (l > m && l <= lmax) {
            a = sht_a(l, m);
            b = l == m + 1 ? 0.0 : a / sht_a(l - 1, m);
        }
        ab[2 * lid] = a;
        ab[2 * lid + 1] = b;
    }
}

/* Synthesis: Δ_m of the item's ring pairs, both rings of each pair (λ(π − θ) = (−1)^(l+m) λ(θ)).
 * Every work-item reaches every barrier. Local: ab and coef, 2 SHT_CHUNK doubles each. */
ASTRO_FN_INLINED void sht_synthesis_item(unsigned int group, int lid,
                                         ASTRO_GLOBAL const double *ASTRO_RESTRICT pair_cs,
                                         ASTRO_GLOBAL const int *ASTRO_RESTRICT pair_rings, int npairs, int nrings,
                                         int lmax, int m0, int nblocks, ASTRO_GLOBAL const double *ASTRO_RESTRICT cmm,
                                         ASTRO_GLOBAL const double *ASTRO_RESTRICT alm,
                                         ASTRO_GLOBAL double *ASTRO_RESTRICT delta, ASTRO_LOCAL double *ab,
                                         ASTRO_LOCAL double *coef)
{
    const int m = m0 + (int)(group / (unsigned int)nblocks), block = (int)(group % (unsigned int)nblocks);
    const ASTRO_I64 first = sht_alm_offset(m, lmax) - sht_alm_offset(m0, lmax);
    ShtWalk w;
    int q[SHT_LANES];
    sht_walk_start(&w, q, block, lid, npairs, m, cmm[m - m0], pair_cs);
    double even_re[SHT_LANES], even_im[SHT_LANES], odd_re[SHT_LANES], odd_im[SHT_LANES];
    for (int lane = 0; lane < SHT_LANES; ++lane)
        even_re[lane] = even_im[lane] = odd_re[lane] = odd_im[lane] = 0.0;
    double lambda[SHT_LANES];
    for (int lbase = m; lbase <= lmax; lbase += SHT_CHUNK) {
        const int n = lmax - lbase + 1 < SHT_CHUNK ? lmax - lbase + 1 : SHT_CHUNK;
        ASTRO_BARRIER();
        sht_stage_ab(lid, m, lbase, lmax, ab);
        if (lid >= SHT_CHUNK && lid - SHT_CHUNK < n) {
            const int j = lid - SHT_CHUNK;
            const ASTRO_I64 at = 2 * (first + (lbase - m) + j);
            coef[2 * j] = alm[at];
            coef[2 * j + 1] = alm[at + 1];
        }
        ASTRO_BARRIER();
        for (int j = 0; j < n; ++j) {
            if (lbase + j == m)
                sht_walk_first(&w, lambda);
            else
                sht_walk_step(&w, ab[2 * j], ab[2 * j + 1], lambda);
            const double re = coef[2 * j], im = coef[2 * j + 1];
            if (j & 1) {
                for (int lane = 0; lane < SHT_LANES; ++lane) {
                    odd_re[lane] = ASTRO_FMA(re, lambda[lane], odd_re[lane]);
                    odd_im[lane] = ASTRO_FMA(im, lambda[lane], odd_im[lane]);
                }
            } else {
                for (int lane = 0; lane < SHT_LANES; ++lane) {
                    even_re[lane] = ASTRO_FMA(re, lambda[lane], even_re[lane]);
                    even_im[lane] = ASTRO_FMA(im, lambda[lane], even_im[lane]);
                }
            }
        }
    }
    const ASTRO_I64 row = (ASTRO_I64)(m - m0) * nrings;
    for (int lane = 0; lane < SHT_LANES; ++lane) {
        if (q[lane] < 0)
            continue;
        const ASTRO_I64 north = 2 * (row + pair_rings[2 * q[lane]]);
        delta[north] = even_re[lane] + odd_re[lane];
        delta[north + 1] = even_im[lane] + odd_im[lane];
        const int south = pair_rings[2 * q[lane] + 1];
        if (south >= 0) {
            const ASTRO_I64 s = 2 * (row + south);
            delta[s] = even_re[lane] - odd_re[lane];
            delta[s + 1] = even_im[lane] - odd_im[lane];
        }
    }
}

/* The phases of one lane's ring pair at m (north re, im, south re, im; zeros for a missing ring or lane), from
 * an m-major array whose row for m starts at `row`. */
ASTRO_FN void sht_pair_phases(int pair, ASTRO_I64 row, ASTRO_GLOBAL const int *ASTRO_RESTRICT pair_rings,
                              ASTRO_GLOBAL const double *ASTRO_RESTRICT g, double v[4])
{
    v[0] = v[1] = v[2] = v[3] = 0.0;
    if (pair < 0)
        return;
    const ASTRO_I64 north = 2 * (row + pair_rings[2 * pair]);
    v[0] = g[north];
    v[1] = g[north + 1];
    const int south = pair_rings[2 * pair + 1];
    if (south >= 0) {
        const ASTRO_I64 s = 2 * (row + south);
        v[2] = g[s];
        v[3] = g[s + 1];
    }
}

/* Sums the group's items for each of the chunk's n degrees, in a fixed order. `contrib` holds `values` doubles
 * per (degree, item) at stride SHT_CONTRIB_STRIDE items; `share` items sum each degree, a fixed run each, into
 * `parts`; after a barrier, item j < n adds its degree's parts into sum[0..values). Every item must call it. */
ASTRO_FN void sht_sum_items(int lid, int n, int values, int share, ASTRO_LOCAL const double *contrib,
                            ASTRO_LOCAL double *parts, double sum[4])
{
    const int j = lid / share, part = lid % share, run = SHT_GROUP / share;
    if (j < n) {
        double v[4] = {0.0, 0.0, 0.0, 0.0};
        for (int i = 0; i < run; ++i) {
            const int at = values * (j * SHT_CONTRIB_STRIDE + part * run + i);
            for (int k = 0; k < values; ++k)
                v[k] += contrib[at + k];
        }
        for (int k = 0; k < values; ++k)
            parts[values * lid + k] = v[k];
    }
    ASTRO_BARRIER();
    sum[0] = sum[1] = sum[2] = sum[3] = 0.0;
    if (lid < n)
        for (int p = 0; p < share; ++p)
            for (int k = 0; k < values; ++k)
                sum[k] += parts[values * (lid * share + p) + k];
}

/* Analysis: a_lm = Σ_pairs λ_lm (G_north ± G_south) for one m (the group's own: no other group writes its
 * coefficients), the blocks of ring pairs walked one after the other. Per degree, each work-item sums its
 * lanes and leaves the sum in `contrib`; the group then sums the items in a fixed order, two work-items per
 * degree, and adds the block's share to `alm` (deterministic: the same item adds the same degree, blocks in
 * order). Local: ab (2 SHT_CHUNK), contrib (2 SHT_CHUNK SHT_CONTRIB_STRIDE) and halves (4 SHT_CHUNK) doubles. */
ASTRO_FN_INLINED void sht_analysis_item(unsigned int group, int lid,
                                        ASTRO_GLOBAL const double *ASTRO_RESTRICT pair_cs,
                                        ASTRO_GLOBAL const int *ASTRO_RESTRICT pair_rings, int npairs, int nrings,
                                        int lmax, int m0, int nblocks, ASTRO_GLOBAL const double *ASTRO_RESTRICT cmm,
                                        ASTRO_GLOBAL const double *ASTRO_RESTRICT g,
                                        ASTRO_GLOBAL double *ASTRO_RESTRICT alm, ASTRO_LOCAL double *ab,
                                        ASTRO_LOCAL double *contrib, ASTRO_LOCAL double *halves)
{
    const int m = m0 + (int)group;
    const ASTRO_I64 first = sht_alm_offset(m, lmax) - sht_alm_offset(m0, lmax);
    const ASTRO_I64 row = (ASTRO_I64)(m - m0) * nrings;
    for (int block = 0; block < nblocks; ++block) {
        ShtWalk w;
        int q[SHT_LANES];
        sht_walk_start(&w, q, block, lid, npairs, m, cmm[m - m0], pair_cs);
        double even_re[SHT_LANES], even_im[SHT_LANES], odd_re[SHT_LANES], odd_im[SHT_LANES];
        for (int lane = 0; lane < SHT_LANES; ++lane) {
            double v[4];
            sht_pair_phases(q[lane], row, pair_rings, g, v);
            even_re[lane] = v[0] + v[2];
            even_im[lane] = v[1] + v[3];
            odd_re[lane] = v[0] - v[2];
            odd_im[lane] = v[1] - v[3];
        }
        double lambda[SHT_LANES];
        for (int lbase = m; lbase <= lmax; lbase += SHT_CHUNK) {
            const int n = lmax - lbase + 1 < SHT_CHUNK ? lmax - lbase + 1 : SHT_CHUNK;
            ASTRO_BARRIER();
            sht_stage_ab(lid, m, lbase, lmax, ab);
            ASTRO_BARRIER();
            for (int j = 0; j < n; ++j) {
                if (lbase + j == m)
                    sht_walk_first(&w, lambda);
                else
                    sht_walk_step(&w, ab[2 * j], ab[2 * j + 1], lambda);
                double re = 0.0, im = 0.0;
                if (j & 1) {
                    for (int lane = 0; lane < SHT_LANES; ++lane) {
                        re = ASTRO_FMA(lambda[lane], odd_re[lane], re);
                        im = ASTRO_FMA(lambda[lane], odd_im[lane], im);
                    }
                } else {
                    for (int lane = 0; lane < SHT_LANES; ++lane) {
                        re = ASTRO_FMA(lambda[lane], even_re[lane], re);
                        im = ASTRO_FMA(lambda[lane], even_im[lane], im);
                    }
                }
                contrib[2 * (j * SHT_CONTRIB_STRIDE + lid)] = re;
                contrib[2 * (j * SHT_CONTRIB_STRIDE + lid) + 1] = im;
            }
            ASTRO_BARRIER();
            double sum[4];
            sht_sum_items(lid, n, 2, SHT_GROUP / SHT_CHUNK, contrib, halves, sum);
            if (lid < n) {
                const ASTRO_I64 at = 2 * (first + (lbase - m) + lid);
                alm[at] = block == 0 ? sum[0] : alm[at] + sum[0];
                alm[at + 1] = block == 0 ? sum[1] : alm[at + 1] + sum[1];
            }
        }
    }
}


/* ---- Spin 2 (polarisation), healpy's convention (src/workload/sht/spin.rs has the derivation) ----
 * W = −N [(2(l − m²)/sin²θ + l(l−1)) λ_l − 2 D cos θ/sin²θ λ_{l−1}], X = 2 m N [D λ_{l−1} − (l−1) cos θ λ_l]/sin²θ,
 * N = 1/sqrt((l−1) l (l+1) (l+2)) (0 below l = 2), D = sqrt((2l+1)/(2l−1) (l² − m²)).
 * Synthesis: Q_m = −Σ (E W + i B X), U_m = Σ (i E X − B W); analysis: E = −Σ (W Q + i X U), B = Σ (i X Q − W U).
 * Under θ → π − θ, W takes (−1)^(l+m) and X the opposite. Chunks are SHT_SPIN_CHUNK degrees: the analysis
 * keeps four values per item and degree in local memory. */
#define SHT_SPIN_CHUNK 16
#define SHT_SPIN_SHARE (SHT_GROUP / SHT_SPIN_CHUNK) /* items that sum one degree */

/* Stages (a_l, b_l, N_l, D_lm) for l = lbase + j, j < SHT_SPIN_CHUNK, into ab (zeros past lmax). */
ASTRO_FN void sht_stage_spin(int lid, int m, int lbase, int lmax, ASTRO_LOCAL double *ab)
{
    if (lid < SHT_SPIN_CHUNK) {
        const int l = lbase + lid;
        double a = 0.0, b = 0.0, n = 0.0, d = 0.0;
        if (l <= lmax) {
            const double lf = (double)l, mf = (double)m;
            if (l > m) {
                a = sht_a(l, m);
                b = l == m + 1 ? 0.0 : a / sht_a(l - 1, m);
            }
            if (l >= 2)
                n = 1.0 / ASTRO_SQRT((lf - 1.0) * lf * (lf + 1.0) * (lf + 2.0));
            if (l >= 1)
                d = ASTRO_SQRT((2.0 * lf + 1.0) / (2.0 * lf - 1.0) * (lf - mf) * (lf + mf));
        }
        ab[4 * lid] = a;
        ab[4 * lid + 1] = b;
        ab[4 * lid + 2] = n;
        ab[4 * lid + 3] = d;
    }
}

/* W and X of one lane at degree l from λ_l and λ_{l−1}. */
ASTRO_FN void sht_spin_wx(int l, int m, double n, double d, double c, double inv_s2, double lam, double prev,
                          double *w, double *x)
{
    const double lf = (double)l, mf = (double)m;
    *w = -n * ((2.0 * (lf - mf * mf) * inv_s2 + lf * (lf - 1.0)) * lam - 2.0 * d * c * inv_s2 * prev);
    *x = 2.0 * mf * n * (d * prev - (lf - 1.0) * c * lam) * inv_s2;
}

/* The next λ of every lane, into `lambda`, keeping the previous degree's in `prev`. */
ASTRO_FN void sht_spin_advance(ShtWalk *w, int l, int m, ASTRO_LOCAL const double *abj, double lambda[SHT_LANES],
                               double prev[SHT_LANES])
{
    for (int lane = 0; lane < SHT_LANES; ++lane)
        prev[lane] = lambda[lane];
    if (l == m)
        sht_walk_first(w, lambda);
    else
        sht_walk_step(w, abj[0], abj[1], lambda);
}

/* Spin-2 synthesis: Q_m and U_m of the item's ring pairs, both rings of each pair. Local: ab (4 per degree)
 * and coef (E and B, 4 per degree). */
ASTRO_FN_INLINED void sht_spin_synthesis_item(unsigned int group, int lid,
                                              ASTRO_GLOBAL const double *ASTRO_RESTRICT pair_cs,
                                              ASTRO_GLOBAL const int *ASTRO_RESTRICT pair_rings, int npairs,
                                              int nrings, int lmax, int m0, int nblocks,
                                              ASTRO_GLOBAL const double *ASTRO_RESTRICT cmm,
                                              ASTRO_GLOBAL const double *ASTRO_RESTRICT alm_e,
                                              ASTRO_GLOBAL const double *ASTRO_RESTRICT alm_b,
                                              ASTRO_GLOBAL double *ASTRO_RESTRICT delta_q,
                                              ASTRO_GLOBAL double *ASTRO_RESTRICT delta_u, ASTRO_LOCAL double *ab,
                                              ASTRO_LOCAL double *coef)
{
    const int m = m0 + (int)(group / (unsigned int)nblocks), block = (int)(group % (unsigned int)nblocks);
    const ASTRO_I64 first = sht_alm_offset(m, lmax) - sht_alm_offset(m0, lmax);
    ShtWalk w;
    int q[SHT_LANES];
    sht_walk_start(&w, q, block, lid, npairs, m, cmm[m - m0], pair_cs);
    double inv_s2[SHT_LANES], lambda[SHT_LANES], prev[SHT_LANES];
    /* (re, im) of Q and U on the northern and southern ring of each lane. */
    double qn[2 * SHT_LANES], qs[2 * SHT_LANES], un[2 * SHT_LANES], us[2 * SHT_LANES];
    for (int lane = 0; lane < SHT_LANES; ++lane) {
        const double s = q[lane] >= 0 ? pair_cs[2 * q[lane] + 1] : 1.0;
        inv_s2[lane] = 1.0 / (s * s);
        lambda[lane] = 0.0;
        for (int k = 0; k < 2; ++k)
            qn[2 * lane + k] = qs[2 * lane + k] = un[2 * lane + k] = us[2 * lane + k] = 0.0;
    }
    for (int lbase = m; lbase <= lmax; lbase += SHT_SPIN_CHUNK) {
        const int n = lmax - lbase + 1 < SHT_SPIN_CHUNK ? lmax - lbase + 1 : SHT_SPIN_CHUNK;
        ASTRO_BARRIER();
        sht_stage_spin(lid, m, lbase, lmax, ab);
        if (lid >= SHT_SPIN_CHUNK && lid < 2 * SHT_SPIN_CHUNK && lid - SHT_SPIN_CHUNK < n) {
            const int j = lid - SHT_SPIN_CHUNK;
            const ASTRO_I64 at = 2 * (first + (lbase - m) + j);
            coef[4 * j] = alm_e[at];
            coef[4 * j + 1] = alm_e[at + 1];
            coef[4 * j + 2] = alm_b[at];
            coef[4 * j + 3] = alm_b[at + 1];
        }
        ASTRO_BARRIER();
        for (int j = 0; j < n; ++j) {
            const int l = lbase + j;
            sht_spin_advance(&w, l, m, ab + 4 * j, lambda, prev);
            const double er = coef[4 * j], ei = coef[4 * j + 1], br = coef[4 * j + 2], bi = coef[4 * j + 3];
            const double sign = (j & 1) ? -1.0 : 1.0; /* (−1)^(l−m): chunks start at l − m even */
            for (int lane = 0; lane < SHT_LANES; ++lane) {
                double wv, xv;
                sht_spin_wx(l, m, ab[4 * j + 2], ab[4 * j + 3], w.cs[lane], inv_s2[lane], lambda[lane], prev[lane],
                            &wv, &xv);
                /* qW = −E w, qX = −i B x, uW = −B w, uX = i E x. */
                const double qwr = -er * wv, qwi = -ei * wv, qxr = bi * xv, qxi = -br * xv;
                const double uwr = -br * wv, uwi = -bi * wv, uxr = -ei * xv, uxi = er * xv;
                qn[2 * lane] += qwr + qxr;
                qn[2 * lane + 1] += qwi + qxi;
                un[2 * lane] += uwr + uxr;
                un[2 * lane + 1] += uwi + uxi;
                qs[2 * lane] += sign * (qwr - qxr);
                qs[2 * lane + 1] += sign * (qwi - qxi);
                us[2 * lane] += sign * (uwr - uxr);
                us[2 * lane + 1] += sign * (uwi - uxi);
            }
        }
    }
    const ASTRO_I64 row = (ASTRO_I64)(m - m0) * nrings;
    for (int lane = 0; lane < SHT_LANES; ++lane) {
        if (q[lane] < 0)
            continue;
        const ASTRO_I64 north = 2 * (row + pair_rings[2 * q[lane]]);
        delta_q[north] = qn[2 * lane];
        delta_q[north + 1] = qn[2 * lane + 1];
        delta_u[north] = un[2 * lane];
        delta_u[north + 1] = un[2 * lane + 1];
        const int south = pair_rings[2 * q[lane] + 1];
        if (south >= 0) {
            const ASTRO_I64 s = 2 * (row + south);
            delta_q[s] = qs[2 * lane];
            delta_q[s + 1] = qs[2 * lane + 1];
            delta_u[s] = us[2 * lane];
            delta_u[s + 1] = us[2 * lane + 1];
        }
    }
}

/* Spin-2 analysis: E and B of one m (the group's own), the blocks of ring pairs in turn, reduced as the scalar
 * analysis is but with SHT_SPIN_SHARE items per degree and four values. Local: ab (4 SHT_SPIN_CHUNK), contrib
 * (4 SHT_SPIN_CHUNK SHT_CONTRIB_STRIDE) and parts (4 SHT_GROUP) doubles. */
ASTRO_FN_INLINED void sht_spin_analysis_item(unsigned int group, int lid,
                                             ASTRO_GLOBAL const double *ASTRO_RESTRICT pair_cs,
                                             ASTRO_GLOBAL const int *ASTRO_RESTRICT pair_rings, int npairs,
                                             int nrings, int lmax, int m0, int nblocks,
                                             ASTRO_GLOBAL const double *ASTRO_RESTRICT cmm,
                                             ASTRO_GLOBAL const double *ASTRO_RESTRICT gq,
                                             ASTRO_GLOBAL const double *ASTRO_RESTRICT gu,
                                             ASTRO_GLOBAL double *ASTRO_RESTRICT alm_e,
                                             ASTRO_GLOBAL double *ASTRO_RESTRICT alm_b, ASTRO_LOCAL double *ab,
                                             ASTRO_LOCAL double *contrib, ASTRO_LOCAL double *parts)
{
    const int m = m0 + (int)group;
    const ASTRO_I64 first = sht_alm_offset(m, lmax) - sht_alm_offset(m0, lmax);
    const ASTRO_I64 row = (ASTRO_I64)(m - m0) * nrings;
    for (int block = 0; block < nblocks; ++block) {
        ShtWalk w;
        int q[SHT_LANES];
        sht_walk_start(&w, q, block, lid, npairs, m, cmm[m - m0], pair_cs);
        double inv_s2[SHT_LANES], lambda[SHT_LANES], prev[SHT_LANES];
        /* [0]: north + south, [1]: north − south, (re, im), of Q and U. */
        double qp[4 * SHT_LANES], up[4 * SHT_LANES];
        for (int lane = 0; lane < SHT_LANES; ++lane) {
            double v[8]; /* Qn, Qs, Un, Us as (re, im) */
            sht_pair_phases(q[lane], row, pair_rings, gq, v);
            sht_pair_phases(q[lane], row, pair_rings, gu, v + 4);
            const double s = q[lane] >= 0 ? pair_cs[2 * q[lane] + 1] : 1.0;
            inv_s2[lane] = 1.0 / (s * s);
            lambda[lane] = 0.0;
            for (int k = 0; k < 2; ++k) {
                qp[4 * lane + k] = v[k] + v[2 + k];
                qp[4 * lane + 2 + k] = v[k] - v[2 + k];
                up[4 * lane + k] = v[4 + k] + v[6 + k];
                up[4 * lane + 2 + k] = v[4 + k] - v[6 + k];
            }
        }
        for (int lbase = m; lbase <= lmax; lbase += SHT_SPIN_CHUNK) {
            const int n = lmax - lbase + 1 < SHT_SPIN_CHUNK ? lmax - lbase + 1 : SHT_SPIN_CHUNK;
            ASTRO_BARRIER();
            sht_stage_spin(lid, m, lbase, lmax, ab);
            ASTRO_BARRIER();
            for (int j = 0; j < n; ++j) {
                const int l = lbase + j;
                sht_spin_advance(&w, l, m, ab + 4 * j, lambda, prev);
                /* W meets north + south when l − m is even and X north − south; the other way when odd. */
                const int ws = (j & 1) ? 2 : 0, xs = 2 - ws;
                double er = 0.0, ei = 0.0, br = 0.0, bi = 0.0;
                for (int lane = 0; lane < SHT_LANES; ++lane) {
                    double wv, xv;
                    sht_spin_wx(l, m, ab[4 * j + 2], ab[4 * j + 3], w.cs[lane], inv_s2[lane], lambda[lane],
                                prev[lane], &wv, &xv);
                    const double wqr = wv * qp[4 * lane + ws], wqi = wv * qp[4 * lane + ws + 1];
                    const double wur = wv * up[4 * lane + ws], wui = wv * up[4 * lane + ws + 1];
                    const double xqr = xv * qp[4 * lane + xs], xqi = xv * qp[4 * lane + xs + 1];
                    const double xur = xv * up[4 * lane + xs], xui = xv * up[4 * lane + xs + 1];
                    /* E −= W Q + i X U; B += i X Q − W U. */
                    er -= wqr - xui;
                    ei -= wqi + xur;
                    br += -xqi - wur;
                    bi += xqr - wui;
                }
                const int at = 4 * (j * SHT_CONTRIB_STRIDE + lid);
                contrib[at] = er;
                contrib[at + 1] = ei;
                contrib[at + 2] = br;
                contrib[at + 3] = bi;
            }
            ASTRO_BARRIER();
            double v[4];
            sht_sum_items(lid, n, 4, SHT_SPIN_SHARE, contrib, parts, v);
            if (lid < n) {
                const ASTRO_I64 at = 2 * (first + (lbase - m) + lid);
                alm_e[at] = block == 0 ? v[0] : alm_e[at] + v[0];
                alm_e[at + 1] = block == 0 ? v[1] : alm_e[at + 1] + v[1];
                alm_b[at] = block == 0 ? v[2] : alm_b[at] + v[2];
                alm_b[at + 1] = block == 0 ? v[3] : alm_b[at + 1] + v[3];
            }
        }
    }
}

/* ---- The ring stage: one work-group per ring, the FFTs of ring_fft.h ----
 *   ring_table[4r .. 4r+3]   ring r's first pixel, nφ, work offset (complex values from its batch's start,
 *                            4 W per ring), W; a launch takes one batch of rings, from ring0
 *   ring_phi0[r]             azimuth of its first pixel
 *   ring_weight[r]           its quadrature weight (analysis)
 *   work                     every ring's work area (fft_any's four regions)
 * delta and g are the Legendre stage's m-major layouts (band from m = 0). */

/* d · e^{i m φ0} (conjugated after the turn when conj). */
ASTRO_FN void sht_turn(ASTRO_GLOBAL const double *d, int m, double phi0, int conj, double *re, double *im)
{
    double s, c, r = d[0], i = d[1];
    ASTRO_SINCOS((double)m * phi0, &s, &c);
    fft_mul(c, s, &r, &i);
    *re += r;
    *im += conj ? -i : i;
}

/* Synthesis of ring r: Σ_{|m| <= mmax} Δ_m e^{imφ} folded onto the ring's nφ frequencies (Δ_{−m} = conj Δ_m;
 * m beyond nφ aliases, as it must on short polar rings), one inverse DFT, the real part into the map. */
ASTRO_FN void sht_ring_synthesis_item(int r, int lid, int lsize, ASTRO_GLOBAL const int *ring_table,
                                      ASTRO_GLOBAL const double *ring_phi0, int nrings, int mmax,
                                      ASTRO_GLOBAL const double *delta, ASTRO_GLOBAL double *map,
                                      ASTRO_GLOBAL double *work)
{
    const ASTRO_I64 first = ring_table[4 * r];
    const int n = ring_table[4 * r + 1], w = ring_table[4 * r + 3];
    ASTRO_GLOBAL double *area = work + 2 * (ASTRO_I64)ring_table[4 * r + 2];
    const double phi0 = ring_phi0[r];
    for (int k = lid; k < n; k += lsize) {
        double re = 0.0, im = 0.0;
        for (int m = k; m <= mmax; m += n)
            sht_turn(delta + 2 * ((ASTRO_I64)m * nrings + r), m, phi0, 0, &re, &im);
        for (int m = k == 0 ? n : n - k; m <= mmax; m += n)
            sht_turn(delta + 2 * ((ASTRO_I64)m * nrings + r), m, phi0, 1, &re, &im);
        area[2 * k] = re;
        area[2 * k + 1] = im;
    }
    ASTRO_BARRIER_GLOBAL();
    ASTRO_GLOBAL const double *f = area + 2 * (ASTRO_I64)w * fft_any(area, n, w, 1, lid, lsize);
    for (int j = lid; j < n; j += lsize)
        map[first + j] = f[2 * j];
}

/* Analysis of ring r: the weighted pixels' DFT, then G_m = X_{m mod nφ} e^{−imφ0} for m <= mmax into g. */
ASTRO_FN void sht_ring_analysis_item(int r, int lid, int lsize, ASTRO_GLOBAL const int *ring_table,
                                     ASTRO_GLOBAL const double *ring_phi0, ASTRO_GLOBAL const double *ring_weight,
                                     int nrings, int mmax, ASTRO_GLOBAL const double *map, ASTRO_GLOBAL double *g,
                                     ASTRO_GLOBAL double *work)
{
    const ASTRO_I64 first = ring_table[4 * r];
    const int n = ring_table[4 * r + 1], w = ring_table[4 * r + 3];
    ASTRO_GLOBAL double *area = work + 2 * (ASTRO_I64)ring_table[4 * r + 2];
    const double phi0 = ring_phi0[r], weight = ring_weight[r];
    for (int j = lid; j < n; j += lsize) {
        area[2 * j] = weight * map[first + j];
        area[2 * j + 1] = 0.0;
    }
    ASTRO_BARRIER_GLOBAL();
    ASTRO_GLOBAL const double *x = area + 2 * (ASTRO_I64)w * fft_any(area, n, w, -1, lid, lsize);
    for (int m = lid; m <= mmax; m += lsize) {
        double re = 0.0, im = 0.0;
        sht_turn(x + 2 * (m % n), -m, phi0, 0, &re, &im);
        const ASTRO_I64 at = 2 * ((ASTRO_I64)m * nrings + r);
        g[at] = re;
        g[at + 1] = im;
    }
}

#endif /* ASTRO_HAS_FP64 */
#endif /* SHT_H */
