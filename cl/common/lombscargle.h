/* Lomb-Scargle periodograms (culsp, Townsend 2010, ApJS 191, 247): the per-work-item work shared by
 * cl/lombscargle.cl, ports/cuda/lombscargle.cu and ports/sycl/lombscargle.cpp. Include astro_dialect.h first.
 *
 * Layout (culsp): one work-group of LS_GROUP work-items computes LS_GROUP consecutive frequencies of one light
 * curve; the curve's points are staged through local memory LS_GROUP at a time. Many curves, each with its own
 * times, length and grid, share one launch: work-group g belongs to the last curve whose block_start <= g.
 *
 * Exact phase (rounding f*t in float32 is culsp's dominant error). The host gives times and
 * frequencies in unsigned 64-bit fixed point, t = T 2^-a and f = F 2^-b with a + b = 96, so bits 64..95 of the
 * 128-bit product T*F are frac(f t) in units of 2^-32 cycles, exactly, whatever the size of f t. On a uniform
 * grid the staging step computes, per point, the phase at the group's first frequency and the phase step per
 * frequency; each work-item then needs one integer multiply-add per point. A given grid costs three.
 *
 * Sums (weights w normalised to sum 1; y centred and scaled on the host so that sum w y^2 = 1):
 *   YC = sum wy cos, YS = sum wy sin, C = sum w cos, S = sum w sin, CC = sum w cos^2, CS = sum w cos sin.
 * Each chunk of LS_GROUP points is summed plainly and chunk sums are added with Kahan compensation, so float32
 * rounding grows with sqrt(LS_GROUP) rather than sqrt(N). The power is astropy's 'standard' normalisation:
 *   floating mean (Zechmeister & Kuerster): CC' = CC - C^2, SS' = 1 - CC - S^2, CS' = CS - C S, and
 *   p = (SS' YC^2 + CC' YS^2 - 2 CS' YC YS) / (CC' SS' - CS'^2); fixed mean (classic): the same with C = S = 0.
 *
 * Curve records (LS_CURVE_STRIDE unsigned ints, built by src/workload/lombscargle/device.rs, which mirrors
 * these offsets): point offset, point count, F0 (lo, hi), dF (lo, hi), frequency count, power offset,
 * first work-group, given-grid flag, 2 unused. Times: T (lo, hi) per point. Weights: (w y, w) per point in the kernel's precision.
 * A given grid: F (lo, hi) per frequency at the curve's power offset.
 */
#ifndef LOMBSCARGLE_H
#define LOMBSCARGLE_H

#define LS_GROUP 256
#define LS_CURVE_STRIDE 12
#define LS_TOPK_MAX 8

typedef struct {
    unsigned int a, b;
    float wy, w;
} LsStage32;

#if ASTRO_HAS_FP64
typedef struct {
    ASTRO_U64 a, b;
    double wy, w;
} LsStage64;
#endif

/* The curve that work-group `group` belongs to: the last record whose first work-group is <= group. */
ASTRO_FN int ls_curve_of(ASTRO_GLOBAL const unsigned int *curves, int n_curves, unsigned int group)
{
    int lo = 0, hi = n_curves - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (curves[(size_t)mid * LS_CURVE_STRIDE + 8] <= group) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

ASTRO_FN ASTRO_U64 ls_u64(ASTRO_GLOBAL const unsigned int *p) { return ((ASTRO_U64)p[1] << 32) | (ASTRO_U64)p[0]; }

/* What work-item `lid` of work-group `group` takes from its curve's record: the curve's points, its
 * frequency index k (k >= nf past the last frequency), where its power goes, and its frequencies in fixed
 * point (the group's first and the step on a uniform grid, its own on a given grid). */
typedef struct {
    unsigned int p0, np, nf, k;
    int given;
    size_t out;
    ASTRO_U64 f_first, df, f_own;
} LsItem;

ASTRO_FN LsItem ls_item(unsigned int group, int lid, ASTRO_GLOBAL const unsigned int *curves, int n_curves,
                        ASTRO_GLOBAL const unsigned int *given_freqs)
{
    ASTRO_GLOBAL const unsigned int *rec = curves + (size_t)ls_curve_of(curves, n_curves, group) * LS_CURVE_STRIDE;
    LsItem it;
    it.p0 = rec[0];
    it.np = rec[1];
    it.nf = rec[6];
    it.given = rec[9] != 0;
    it.k = (group - rec[8]) * LS_GROUP + (unsigned int)lid;
    it.out = (size_t)rec[7] + it.k;
    it.df = ls_u64(rec + 4);
    it.f_first = ls_u64(rec + 2) + (ASTRO_U64)(it.k - (unsigned int)lid) * it.df;
    it.f_own = it.given && it.k < it.nf ? ls_u64(given_freqs + 2 * it.out) : 0;
    return it;
}

/* frac(f t) in units of 2^-64 cycles: bits 32..95 of T*F. */
ASTRO_FN ASTRO_U64 ls_phase64(ASTRO_U64 t, ASTRO_U64 f)
{
    return (ASTRO_MULHI64(t, f) << 32) | ((t * f) >> 32);
}

/* frac(f t) rounded to 2^-32 cycles. */
ASTRO_FN unsigned int ls_phase32(ASTRO_U64 t, ASTRO_U64 f)
{
    return (unsigned int)((ls_phase64(t, f) + 0x80000000u) >> 32);
}

/* The angle 2 pi x in [-pi, pi) of a phase of x cycles given in units of 2^-32, without an int-to-float
 * conversion: the top 23 bits (plus half a cycle) become the mantissa of a float in [1, 2). The caller adds
 * 256 to the phase beforehand so the truncation rounds to nearest. */
ASTRO_FN float ls_angle32(unsigned int phase)
{
    const float x = ASTRO_UINT_AS_FLOAT((phase >> 9) ^ 0x3FC00000u);
    return (x - 1.5f) * 6.28318530717958647692f;
}

#if ASTRO_HAS_FP64
ASTRO_FN double ls_angle64(ASTRO_U64 phase)
{
    /* signed: [-0.5, 0.5) cycles */
    return (double)(ASTRO_I64)phase * (6.28318530717958647692 / 18446744073709551616.0);
}
#endif

/* Kahan-compensated t += x. */
#define LS_KAHAN(T, total, comp, x)          \
    do {                                      \
        const T y_ = (x) - (comp);            \
        const T s_ = (total) + y_;            \
        (comp) = (s_ - (total)) - y_;         \
        (total) = s_;                         \
    } while (0)

/* Standard power from the six sums. */
#define LS_POWER(T, yc, ys, c, s, cc, cs, out)                                                           \
    do {                                                                                                 \
        const T ccp = (cc) - (c) * (c), ssp = (T)1 - (cc) - (s) * (s), csp = (cs) - (c) * (s);           \
        const T d = ccp * ssp - csp * csp;                                                               \
        (out) = d > 0 ? (ssp * (yc) * (yc) + ccp * (ys) * (ys) - 2 * csp * (yc) * (ys)) / d : (T)0;     \
    } while (0)

/* One point's contribution at angle `ang`. FLOATING is a literal 0 or 1, so each loop is compiled for one
 * model (C and S are not needed for the fixed mean). */
#define LS_ACCUMULATE(T, SINCOS, ang, wy, w, FLOATING, yc, ys, c, s, cc, cs) \
    do {                                                                      \
        T sn_, cn_;                                                           \
        SINCOS(ang, &sn_, &cn_);                                              \
        const T wc_ = (w) * cn_;                                              \
        (yc) += (wy) * cn_;                                                   \
        (ys) += (wy) * sn_;                                                   \
        (cc) += wc_ * cn_;                                                    \
        (cs) += wc_ * sn_;                                                    \
        if (FLOATING) {                                                       \
            (c) += wc_;                                                       \
            (s) += (w) * sn_;                                                 \
        }                                                                     \
    } while (0)

/* The loop over one staged chunk of n points, for one model, float32. */
#define LS_CHUNK32(FLOATING, GIVEN)                                                                  \
    ASTRO_VECTOR_SUM_F32                                                                             \
    for (int i = 0; i < n; ++i) {                                                                   \
        const LsStage32 p = stage[i];                                                              \
        unsigned int ph;                                                                           \
        if (GIVEN) ph = p.a * fh + ASTRO_MULHI32(p.a, fl) + ASTRO_MULHI32(p.b, fh) + 256u;         \
        else ph = p.a + m * p.b;                                                                   \
        LS_ACCUMULATE(float, ASTRO_SINCOS_FAST, ls_angle32(ph), p.wy, p.w, FLOATING, yc, ys, c, s, cc, cs); \
    }

/* All chunks of one curve for one (model, grid kind): stage LS_GROUP points, sum them plainly, add the chunk
 * sums into the totals with Kahan compensation. */
#define LS_SWEEP32(FLOATING, GIVEN)                                                      \
    for (unsigned int base = 0; base < np; base += LS_GROUP) {                          \
        const int n = (int)(np - base < LS_GROUP ? np - base : LS_GROUP);               \
        ASTRO_BARRIER();                                                                \
        if (lid < n) {                                                                  \
            const size_t j = (size_t)p0 + base + (unsigned int)lid;                     \
            const ASTRO_U64 t = ls_u64(times + 2 * j);                                  \
            LsStage32 st;                                                               \
            st.a = GIVEN ? (unsigned int)(t >> 32) : ls_phase32(t, f_first) + 256u;     \
            st.b = GIVEN ? (unsigned int)t : ls_phase32(t, df);                         \
            st.wy = weights[2 * j];                                                     \
            st.w = weights[2 * j + 1];                                                  \
            stage[lid] = st;                                                            \
        }                                                                               \
        ASTRO_BARRIER();                                                                \
        float yc = 0, ys = 0, c = 0, s = 0, cc = 0, cs = 0;                             \
        LS_CHUNK32(FLOATING, GIVEN)                                                     \
        LS_KAHAN(float, tyc, kyc, yc);                                                  \
        LS_KAHAN(float, tys, kys, ys);                                                  \
        LS_KAHAN(float, tc, kc, c);                                                     \
        LS_KAHAN(float, ts, ks, s);                                                     \
        LS_KAHAN(float, tcc, kcc, cc);                                                  \
        LS_KAHAN(float, tcs, kcs, cs);                                                  \
    }

/* Work-item `lid` of work-group `group`: the float32 power of one frequency. `stage` is LS_GROUP records of
 * local memory. Every work-item reaches every barrier (those past the curve's last frequency too). */
ASTRO_FN void ls_power_item_f32(unsigned int group, int lid, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT curves,
                                int n_curves, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT times,
                                ASTRO_GLOBAL const float *ASTRO_RESTRICT weights,
                                ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT given_freqs, int floating,
                                ASTRO_LOCAL LsStage32 *stage, ASTRO_GLOBAL float *ASTRO_RESTRICT power)
{
    const LsItem it = ls_item(group, lid, curves, n_curves, given_freqs);
    const unsigned int p0 = it.p0, np = it.np;
    const int given = it.given;
    const ASTRO_U64 f_first = it.f_first, df = it.df, f_own = it.f_own;
    const unsigned int fh = (unsigned int)(f_own >> 32), fl = (unsigned int)f_own, m = (unsigned int)lid;
    float tyc = 0, tys = 0, tc = 0, ts = 0, tcc = 0, tcs = 0;
    float kyc = 0, kys = 0, kc = 0, ks = 0, kcc = 0, kcs = 0;
    /* One whole sweep per (model, grid kind): the flags are uniform over a work-group, and a sweep without
     * branches inside keeps registers low on every compiler. */
    if (given) {
        if (floating) { LS_SWEEP32(1, 1) } else { LS_SWEEP32(0, 1) }
    } else {
        if (floating) { LS_SWEEP32(1, 0) } else { LS_SWEEP32(0, 0) }
    }
    if (it.k < it.nf) {
        float p;
        LS_POWER(float, tyc, tys, tc, ts, tcc, tcs, p);
        power[it.out] = p;
    }
}

#if ASTRO_HAS_FP64
#define LS_CHUNK64(FLOATING, GIVEN)                                                                  \
    for (int i = 0; i < n; ++i) {                                                                   \
        const LsStage64 p = stage[i];                                                              \
        const ASTRO_U64 ph = GIVEN ? ls_phase64(p.a, f_own) : p.a + (ASTRO_U64)m * p.b;            \
        LS_ACCUMULATE(double, ASTRO_SINCOS, ls_angle64(ph), p.wy, p.w, FLOATING, yc, ys, c, s, cc, cs); \
    }

/* The float64 power: the same layout with 64-bit phases (2^-64 cycles) and double sums. */
ASTRO_FN void ls_power_item_f64(unsigned int group, int lid, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT curves,
                                int n_curves, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT times,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT weights,
                                ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT given_freqs, int floating,
                                ASTRO_LOCAL LsStage64 *stage, ASTRO_GLOBAL double *ASTRO_RESTRICT power)
{
    const LsItem it = ls_item(group, lid, curves, n_curves, given_freqs);
    const unsigned int p0 = it.p0, np = it.np;
    const int given = it.given;
    const ASTRO_U64 f_first = it.f_first, df = it.df, f_own = it.f_own;
    const unsigned int m = (unsigned int)lid;
    double tyc = 0, tys = 0, tc = 0, ts = 0, tcc = 0, tcs = 0;
    for (unsigned int base = 0; base < np; base += LS_GROUP) {
        const int n = (int)(np - base < LS_GROUP ? np - base : LS_GROUP);
        ASTRO_BARRIER();
        if (lid < n) {
            const size_t j = (size_t)p0 + base + (unsigned int)lid;
            const ASTRO_U64 t = ls_u64(times + 2 * j);
            LsStage64 st;
            st.a = given ? t : ls_phase64(t, f_first);
            st.b = given ? 0 : ls_phase64(t, df);
            st.wy = weights[2 * j];
            st.w = weights[2 * j + 1];
            stage[lid] = st;
        }
        ASTRO_BARRIER();
        double yc = 0, ys = 0, c = 0, s = 0, cc = 0, cs = 0;
        if (given) {
            if (floating) { LS_CHUNK64(1, 1) } else { LS_CHUNK64(0, 1) }
        } else {
            if (floating) { LS_CHUNK64(1, 0) } else { LS_CHUNK64(0, 0) }
        }
        tyc += yc;
        tys += ys;
        tc += c;
        ts += s;
        tcc += cc;
        tcs += cs;
    }
    if (it.k < it.nf) {
        double p;
        LS_POWER(double, tyc, tys, tc, ts, tcc, tcs, p);
        power[it.out] = p;
    }
}
#endif

/* Top-k peaks of one curve per work-group (LS_GROUP work-items): a peak is a local maximum (p[i] >= p[i-1]
 * and p[i] > p[i+1]; one neighbour at the ends), ranked by power, ties by lower index. Each work-item keeps
 * its best k in order, then a tree merge in local memory (k <= LS_TOPK_MAX). Curves with fewer than k peaks
 * get index -1 and power -1 in the remaining ranks. */
#define LS_TOPK_ITEM(T, S)                                                                                        \
    ASTRO_FN int ls_better_##S(T pa, int ia, T pb, int ib) { return ia >= 0 && (ib < 0 || pa > pb || (pa == pb && ia < ib)); } \
    ASTRO_FN void ls_topk_item_##S(unsigned int curve, int lid, ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT curves,  \
                                   ASTRO_GLOBAL const T *ASTRO_RESTRICT power, int k,                              \
                                   ASTRO_LOCAL int *idx, ASTRO_LOCAL T *val, ASTRO_GLOBAL int *ASTRO_RESTRICT out_index, \
                                   ASTRO_GLOBAL T *ASTRO_RESTRICT out_power)                                        \
    {                                                                                                             \
        ASTRO_GLOBAL const unsigned int *rec = curves + (size_t)curve * LS_CURVE_STRIDE;                          \
        const unsigned int nf = rec[6];                                                                           \
        ASTRO_GLOBAL const T *p = power + rec[7];                                                                 \
        int bi[LS_TOPK_MAX];                                                                                      \
        T bv[LS_TOPK_MAX];                                                                                        \
        for (int r = 0; r < LS_TOPK_MAX; ++r) { bi[r] = -1; bv[r] = (T)-1; }                                      \
        for (unsigned int i = (unsigned int)lid; i < nf; i += LS_GROUP) {                                        \
            const T v = p[i];                                                                                     \
            if ((i > 0 && v < p[i - 1]) || (i + 1 < nf && !(v > p[i + 1]))) continue;                             \
            if (!ls_better_##S(v, (int)i, bv[k - 1], bi[k - 1])) continue;                                        \
            int r = k - 1;                                                                                        \
            while (r > 0 && ls_better_##S(v, (int)i, bv[r - 1], bi[r - 1])) { bv[r] = bv[r - 1]; bi[r] = bi[r - 1]; --r; } \
            bv[r] = v;                                                                                            \
            bi[r] = (int)i;                                                                                       \
        }                                                                                                         \
        for (int r = 0; r < k; ++r) { idx[lid * LS_TOPK_MAX + r] = bi[r]; val[lid * LS_TOPK_MAX + r] = bv[r]; }   \
        for (int span = LS_GROUP / 2; span > 0; span /= 2) {                                                      \
            ASTRO_BARRIER();                                                                                      \
            if (lid < span) {                                                                                     \
                const int a = lid * LS_TOPK_MAX, b = (lid + span) * LS_TOPK_MAX;                                 \
                int ia = 0, ib = 0;                                                                               \
                for (int r = 0; r < k; ++r) {                                                                     \
                    if (ls_better_##S(val[b + ib], idx[b + ib], val[a + ia], idx[a + ia])) {                      \
                        bi[r] = idx[b + ib]; bv[r] = val[b + ib]; ++ib;                                           \
                    } else {                                                                                      \
                        bi[r] = idx[a + ia]; bv[r] = val[a + ia]; ++ia;                                           \
                    }                                                                                             \
                }                                                                                                 \
            }                                                                                                     \
            ASTRO_BARRIER();                                                                                      \
            if (lid < span)                                                                                       \
                for (int r = 0; r < k; ++r) { idx[lid * LS_TOPK_MAX + r] = bi[r]; val[lid * LS_TOPK_MAX + r] = bv[r]; } \
        }                                                                                                         \
        ASTRO_BARRIER();                                                                                          \
        if (lid < k) {                                                                                            \
            out_index[(size_t)curve * k + lid] = idx[lid];                                                        \
            out_power[(size_t)curve * k + lid] = val[lid];                                                        \
        }                                                                                                         \
    }

LS_TOPK_ITEM(float, f32)
#if ASTRO_HAS_FP64
LS_TOPK_ITEM(double, f64)
#endif

#endif /* LOMBSCARGLE_H */
