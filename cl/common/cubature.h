/* Adaptive cubature, per-element work shared by the three kernel dialects (cl/cubature.cl,
 * ports/cuda/cubature.cu, ports/sycl/cubature.cpp): the integrands, the Philox4x32-10 counter-based
 * generator, one PAGANI region evaluation (one work-group of CUB_GROUP items per region) and one m-Cubes
 * work-item (a chunk of sub-cubes). Everything is float64. research/cubature.md §1-3.
 *
 * The dimension d and the integrand id reach these functions as arguments that are compile-time constants
 * at every call site (OpenCL/SYCL: -D CUB_DIM/CUB_INTEGRAND; CUDA: template parameters), so the loops over
 * axes unroll and the point array stays in registers.
 *
 * Adding an integrand (docs/cubature.md): write `ASTRO_FN double cub_<name>(const double *x, int d,
 * ASTRO_GLOBAL const double *params)` below, give it the next id in cub_integrand(), and add the same id,
 * its Rust twin and (if known) its true value to src/workload/cubature/integrands.rs.
 */
#ifndef CUBATURE_H
#define CUBATURE_H

#define CUB_GROUP 64   /* work-items per region in Evaluate; also the m-Cubes work-group */
#define CUB_MAX_DIM 15 /* the fourth differences read points 0..4d, which must sit in the first 64 */
#define CUB_SETS 9
#define CUB_RULES 5
#define CUB_BINS 500 /* m-Cubes importance-grid bins per axis */

/* ---- integrands (research §1; params: c_i then t_i, filled by the host for f3 and f6) ---- */

ASTRO_FN double cub_sum(const double *x, int d)
{
    double s = 0.0;
    for (int i = 0; i < d; ++i) s += x[i];
    return s;
}

ASTRO_FN double cub_f1(const double *x, int d)
{
    double s = 0.0;
    for (int i = 0; i < d; ++i) s = ASTRO_FMA((double)(i + 1), x[i], s);
    return ASTRO_COS(s);
}

ASTRO_FN double cub_f2(const double *x, int d)
{
    double p = 1.0;
    for (int i = 0; i < d; ++i) {
        const double t = x[i] - 0.5;
        p /= ASTRO_FMA(t, t, 1.0 / 2500.0);
    }
    return p;
}

ASTRO_FN double cub_f3(const double *x, int d, ASTRO_GLOBAL const double *params)
{
    double s = 1.0;
    for (int i = 0; i < d; ++i) s = ASTRO_FMA(params[i], x[i], s);
    return ASTRO_POW(s, -(double)(d + 1));
}

ASTRO_FN double cub_f4(const double *x, int d)
{
    double s = 0.0;
    for (int i = 0; i < d; ++i) {
        const double t = x[i] - 0.5;
        s = ASTRO_FMA(t, t, s);
    }
    return ASTRO_EXP(-625.0 * s);
}

ASTRO_FN double cub_f5(const double *x, int d)
{
    double s = 0.0;
    for (int i = 0; i < d; ++i) s += ASTRO_FABS(x[i] - 0.5);
    return ASTRO_EXP(-10.0 * s);
}

ASTRO_FN double cub_f6(const double *x, int d, ASTRO_GLOBAL const double *params)
{
    double s = 0.0;
    int inside = 1;
    for (int i = 0; i < d; ++i) {
        s = ASTRO_FMA(params[i], x[i], s);
        inside &= x[i] <= params[d + i];
    }
    return inside ? ASTRO_EXP(s) : 0.0;
}

/* Ids as in src/workload/cubature/integrands.rs: 0 = Σx_i (the seed's control), 1..6 = f1..f6. */
ASTRO_FN double cub_integrand(int id, const double *x, int d, ASTRO_GLOBAL const double *params)
{
    switch (id) {
    case 1: return cub_f1(x, d);
    case 2: return cub_f2(x, d);
    case 3: return cub_f3(x, d, params);
    case 4: return cub_f4(x, d);
    case 5: return cub_f5(x, d);
    case 6: return cub_f6(x, d, params);
    default: return cub_sum(x, d);
    }
}

/* ---- PAGANI Evaluate: one region per work-group (research §2.2-2.3, §2.6) ----
 * bounds:  per region lo[d] then width[d]
 * points:  point-major rule coordinates in [-1/2, 1/2]; sets 0-2 (4d + 1 points) first
 * set_of:  set of each point
 * rule:    weights[9][5], sigma[9][3], nu[9][3] (src/workload/cubature/rule.rs)
 * out:     per region estimate, error; axis: per region split axis
 * Local memory: box[2 * CUB_MAX_DIM], f_axis[CUB_GROUP], red[CUB_RULES * CUB_GROUP].
 * Sums are taken lane by lane (point p on lane p mod CUB_GROUP) and then over a fixed tree, the order the
 * Rust reference uses, so every model adds the same numbers in the same order. */
ASTRO_FN void cub_evaluate_item(int id, int d, int n_points, unsigned int region, int lane,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT bounds,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT points,
                                ASTRO_GLOBAL const int *ASTRO_RESTRICT set_of,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT rule,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT params, ASTRO_LOCAL double *box,
                                ASTRO_LOCAL double *f_axis, ASTRO_LOCAL double *red,
                                ASTRO_GLOBAL double *ASTRO_RESTRICT out, ASTRO_GLOBAL int *ASTRO_RESTRICT axis)
{
    if (lane < 2 * d) box[lane] = bounds[(ASTRO_U64)region * (ASTRO_U64)(2 * d) + (ASTRO_U64)lane];
    ASTRO_BARRIER();
    double s[CUB_RULES] = {0.0, 0.0, 0.0, 0.0, 0.0};
    for (int p = lane; p < n_points; p += CUB_GROUP) {
        double x[CUB_MAX_DIM];
        for (int j = 0; j < d; ++j) x[j] = ASTRO_FMA(0.5 + points[p * d + j], box[d + j], box[j]);
        const double f = cub_integrand(id, x, d, params);
        const int set = set_of[p];
        for (int r = 0; r < CUB_RULES; ++r) s[r] = ASTRO_FMA(rule[set * CUB_RULES + r], f, s[r]);
        if (p <= 4 * d) f_axis[p] = f;
    }
    for (int r = 0; r < CUB_RULES; ++r) red[r * CUB_GROUP + lane] = s[r];
    ASTRO_BARRIER();
    for (int stride = CUB_GROUP / 2; stride > 0; stride >>= 1) {
        if (lane < stride)
            for (int r = 0; r < CUB_RULES; ++r) red[r * CUB_GROUP + lane] += red[r * CUB_GROUP + lane + stride];
        ASTRO_BARRIER();
    }
    if (lane != 0) return;
    /* Null-rule error (research §2.2). */
    ASTRO_GLOBAL const double *sigma = rule + CUB_SETS * CUB_RULES;
    ASTRO_GLOBAL const double *nu = sigma + CUB_SETS * 3;
    double e[3] = {0.0, 0.0, 0.0};
    for (int r = 0; r < 3; ++r)
        for (int set = 0; set < CUB_SETS; ++set) {
            const double v =
                ASTRO_FABS(ASTRO_FMA(sigma[set * 3 + r], red[(r + 1) * CUB_GROUP], red[(r + 2) * CUB_GROUP])) *
                nu[set * 3 + r];
            e[r] = e[r] > v ? e[r] : v;
        }
    double err;
    if (5.0 * e[0] <= e[1] && 5.0 * e[1] <= e[2]) {
        err = e[0];
    } else {
        err = e[0] > e[1] ? e[0] : e[1];
        err = 5.0 * (err > e[2] ? err : e[2]);
    }
    /* Split axis: largest fourth difference, first on ties; the widest axis when all vanish. Every a·b + c is
     * an explicit fma, so no compiler's contraction choice changes the result. */
    const double rho = (0.2030285873691198678 / 0.4779536579022695062) * (0.2030285873691198678 / 0.4779536579022695062);
    int best = 0;
    double best_diff = 0.0;
    for (int k = 0; k < d; ++k) {
        const double a1 = f_axis[1 + 2 * k] + f_axis[2 + 2 * k];
        const double a2 = f_axis[1 + 2 * d + 2 * k] + f_axis[2 + 2 * d + 2 * k];
        const double diff = ASTRO_FABS(ASTRO_FMA(2.0 * (1.0 - rho), f_axis[0], ASTRO_FMA(rho, a1, -a2)));
        if (diff > best_diff) {
            best = k;
            best_diff = diff;
        }
    }
    double volume = 1.0;
    int widest = 0;
    for (int k = 0; k < d; ++k) {
        volume *= box[d + k];
        if (box[d + k] > box[d + widest]) widest = k;
    }
    out[2 * (ASTRO_U64)region] = volume * red[0];
    out[2 * (ASTRO_U64)region + 1] = volume * err;
    axis[region] = best_diff > 0.0 ? best : widest;
}

/* ---- Philox4x32-10 (Salmon et al., SC'11), checked against Random123's known answers ---- */

ASTRO_FN void cub_philox(unsigned int c[4], unsigned int k0, unsigned int k1)
{
    for (int round = 0; round < 10; ++round) {
        const unsigned int hi0 = ASTRO_MULHI32(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        const unsigned int hi1 = ASTRO_MULHI32(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        const unsigned int n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/* ---- m-Cubes: one work-item samples `chunk` consecutive sub-cubes (research §3) ----
 * grid:   per axis CUB_BINS + 1 edges in [0, 1]
 * box:    lo[d] then width[d] of the integration box
 * Returns the item's Σ over its cubes of the cube estimate (in *sum) and of the cube variance numerator
 * npg·Σf² − (Σf)² (in *var). With `adapt`, adds f² of every sample to bins[axis * CUB_BINS + bin].
 * The uniform for (cube, sample, axis) is word (axis mod 4) of Philox(counter = (cube low, cube high,
 * iteration, sample·4 + axis/4), key = seed), so every model draws the same numbers. */
ASTRO_FN void cub_mcubes_item(int id, int d, ASTRO_U64 item, ASTRO_U64 chunk, ASTRO_U64 n_cubes, int g, int npg,
                              unsigned int iteration, unsigned int seed_lo, unsigned int seed_hi, double scale,
                              ASTRO_GLOBAL const double *ASTRO_RESTRICT grid,
                              ASTRO_GLOBAL const double *ASTRO_RESTRICT box,
                              ASTRO_GLOBAL const double *ASTRO_RESTRICT params, int adapt,
                              ASTRO_GLOBAL double *bins, double *sum, double *var)
{
    *sum = 0.0;
    *var = 0.0;
    const ASTRO_U64 first = item * chunk;
    if (first >= n_cubes) return;
    const ASTRO_U64 last = first + chunk < n_cubes ? first + chunk : n_cubes;
    int k[CUB_MAX_DIM];
    ASTRO_U64 rest = first;
    for (int j = 0; j < d; ++j) {
        k[j] = (int)(rest % (ASTRO_U64)g);
        rest /= (ASTRO_U64)g;
    }
    const double bins_per_stratum = (double)CUB_BINS / (double)g;
    for (ASTRO_U64 cube = first; cube < last; ++cube) {
        double fsum = 0.0, f2sum = 0.0;
        for (int sample = 0; sample < npg; ++sample) {
            double x[CUB_MAX_DIM];
            int bin[CUB_MAX_DIM];
            double jac = scale;
            unsigned int words[4] = {0u, 0u, 0u, 0u};
            for (int j = 0; j < d; ++j) {
                if ((j & 3) == 0) {
                    words[0] = (unsigned int)cube;
                    words[1] = (unsigned int)(cube >> 32);
                    words[2] = iteration;
                    words[3] = ((unsigned int)sample << 2) | (unsigned int)(j >> 2);
                    cub_philox(words, seed_lo, seed_hi);
                }
                const double u = ((double)words[j & 3] + 0.5) * (1.0 / 4294967296.0);
                const double y = ((double)k[j] + u) * bins_per_stratum;
                int b = (int)y;
                b = b < CUB_BINS - 1 ? b : CUB_BINS - 1;
                const double left = grid[j * (CUB_BINS + 1) + b];
                const double width = grid[j * (CUB_BINS + 1) + b + 1] - left;
                x[j] = ASTRO_FMA(ASTRO_FMA(y - (double)b, width, left), box[d + j], box[j]);
                jac *= (double)CUB_BINS * width;
                bin[j] = b;
            }
            const double f = jac * cub_integrand(id, x, d, params);
            const double f2 = f * f;
            fsum += f;
            f2sum += f2;
#if ASTRO_HAS_ATOMIC_F64
            if (adapt)
                for (int j = 0; j < d; ++j) astro_atomic_add_f64(&bins[j * CUB_BINS + bin[j]], f2);
#endif
        }
        *sum += fsum;
        const double v = ASTRO_FMA((double)npg, f2sum, -(fsum * fsum));
        *var += v > 0.0 ? v : 0.0;
        for (int j = 0; j < d; ++j) { /* odometer */
            if (++k[j] < g) break;
            k[j] = 0;
        }
    }
}

/* Fixed-tree sum of two values over a CUB_GROUP work-group; lane 0 writes them to out[group * 2 + 0/1]. */
ASTRO_FN void cub_group_sum2(int lane, unsigned int group, double a, double b, ASTRO_LOCAL double *red,
                             ASTRO_GLOBAL double *out)
{
    red[lane] = a;
    red[CUB_GROUP + lane] = b;
    ASTRO_BARRIER();
    for (int stride = CUB_GROUP / 2; stride > 0; stride >>= 1) {
        if (lane < stride) {
            red[lane] += red[lane + stride];
            red[CUB_GROUP + lane] += red[CUB_GROUP + lane + stride];
        }
        ASTRO_BARRIER();
    }
    if (lane == 0) {
        out[2 * group] = red[0];
        out[2 * group + 1] = red[CUB_GROUP];
    }
}

#endif /* CUBATURE_H */
