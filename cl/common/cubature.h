/* Adaptive cubature, per-element work shared by the three kernel dialects (cl/cubature.cl,
 * ports/cuda/cubature.cu, ports/sycl/cubature.cpp): the integrands, the Philox4x32-10 counter-based
 * generator, one PAGANI region evaluation (one work-group of CUB_GROUP items per region) and one m-Cubes
 * work-item (a chunk of sub-cubes). Everything is float64. After Sakiotis et al. 2021 (PAGANI) and 2022
 * (m-Cubes).
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

/* ---- integrands (Genz 1984 families; params: c_i then t_i, filled by the host for f3 and f6) ---- */

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

/* ---- PAGANI Evaluate: one region per work-group (as in gpuintegration's CUDA kernel) ----
 * bounds:  per region lo[d] then width[d]
 * points:  axis-major rule coordinates in [-1/2, 1/2], points[j * n_points + p], so the lanes of a work-group
 *          read consecutive words; sets 0-2 (4d + 1 points) first
 * set_of:  set of each point
 * rule:    weights[9][5], sigma[9][3], nu[9][3] (src/workload/cubature/rule.rs)
 * out:     per region estimate, error; axis: per region split axis
 * Local memory: box[2 * CUB_MAX_DIM], f_axis[CUB_GROUP], red[CUB_RULES * CUB_GROUP].
 * Sums are taken lane by lane (point p on lane p mod CUB_GROUP) and then over a fixed tree, the order the
 * Rust reference uses, so every model adds the same numbers in the same order. */
ASTRO_FN void cub_evaluate_item(int id, int d, int n_points, ASTRO_U64 region, int lane,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT bounds,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT points,
                                ASTRO_GLOBAL const int *ASTRO_RESTRICT set_of,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT rule,
                                ASTRO_GLOBAL const double *ASTRO_RESTRICT params, ASTRO_LOCAL double *box,
                                ASTRO_LOCAL double *f_axis, ASTRO_LOCAL double *red,
                                ASTRO_GLOBAL double *ASTRO_RESTRICT out, ASTRO_GLOBAL int *ASTRO_RESTRICT axis)
{
    if (lane < 2 * d) box[lane] = bounds[region * (ASTRO_U64)(2 * d) + (ASTRO_U64)lane];
    ASTRO_BARRIER();
    double s[CUB_RULES] = {0.0, 0.0, 0.0, 0.0, 0.0};
    for (int p = lane; p < n_points; p += CUB_GROUP) {
        double x[CUB_MAX_DIM];
        for (int j = 0; j < d; ++j) x[j] = ASTRO_FMA(0.5 + points[j * n_points + p], box[d + j], box[j]);
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
    /* Null-rule error (DCUHRE's, as in Cuba's Cuhre). */
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
    out[2 * region] = volume * red[0];
    out[2 * region + 1] = volume * err;
    axis[region] = best_diff > 0.0 ? best : widest;
}

/* ---- PAGANI's region list on the device (Sakiotis et al. 2021) ----
 * Regions are processed in chunks of CUB_CHUNK: one work-group of CUB_LANES items per chunk, item `lane`
 * owning the CUB_PER_LANE consecutive regions from chunk·CUB_CHUNK + lane·CUB_PER_LANE. A chunk's sums are
 * each item's regions added in order, then the fixed tree of cub_tree(); the host adds the chunks in order.
 * pagani.rs (CpuRegions) makes the same additions, so every model finishes the same regions.
 * Per chunk each kernel writes `sums[CUB_SUMS chunk + 0..5]` = Σ estimate, Σ error, Σ estimate and Σ error of
 * the finished (inactive) regions, Σ |estimate| of all and of the finished regions (for the rounding floor of
 * the reported error), and `counts[2 chunk + 0..1]` = active regions, bad regions. */
#define CUB_SUMS 6
#define CUB_LANES 256
#define CUB_PER_LANE 16
#define CUB_CHUNK (CUB_LANES * CUB_PER_LANE)
#define CUB_TREE_SUM 0
#define CUB_TREE_MIN 1
#define CUB_TREE_MAX 2

/* Combines one value per item over the work-group in a fixed tree; every item gets the result. */
ASTRO_FN double cub_tree(int lane, double v, int op, ASTRO_LOCAL double *red)
{
    red[lane] = v;
    ASTRO_BARRIER();
    for (int stride = CUB_LANES / 2; stride > 0; stride >>= 1) {
        if (lane < stride) {
            const double a = red[lane], b = red[lane + stride];
            red[lane] = op == CUB_TREE_SUM ? a + b : op == CUB_TREE_MIN ? (b < a ? b : a) : (b > a ? b : a);
        }
        ASTRO_BARRIER();
    }
    const double r = red[0];
    ASTRO_BARRIER(); /* red is reused by the next call */
    return r;
}

ASTRO_FN unsigned int cub_tree_count(int lane, unsigned int v, ASTRO_LOCAL unsigned int *count)
{
    count[lane] = v;
    ASTRO_BARRIER();
    for (int stride = CUB_LANES / 2; stride > 0; stride >>= 1) {
        if (lane < stride) count[lane] += count[lane + stride];
        ASTRO_BARRIER();
    }
    const unsigned int r = count[0];
    ASTRO_BARRIER();
    return r;
}

/* One item's running sums over its regions, in the order of cub_chunk_partials(). */
ASTRO_FN void cub_lane_add(double *acc, double est, double err, int active)
{
    acc[0] += est;
    acc[1] += err;
    acc[4] += ASTRO_FABS(est);
    if (!active) {
        acc[2] += est;
        acc[3] += err;
        acc[5] += ASTRO_FABS(est);
    }
}

ASTRO_FN void cub_chunk_partials(int lane, unsigned int chunk, const double *acc, unsigned int n_active,
                                 unsigned int n_bad, ASTRO_LOCAL double *red, ASTRO_LOCAL unsigned int *count,
                                 ASTRO_GLOBAL double *sums, ASTRO_GLOBAL unsigned int *counts)
{
    for (int q = 0; q < CUB_SUMS; ++q) {
        const double t = cub_tree(lane, acc[q], CUB_TREE_SUM, red);
        if (lane == 0) sums[CUB_SUMS * (ASTRO_U64)chunk + q] = t;
    }
    const unsigned int k = cub_tree_count(lane, n_active, count);
    const unsigned int bad = cub_tree_count(lane, n_bad, count);
    if (lane == 0) {
        counts[2 * (ASTRO_U64)chunk] = k;
        counts[2 * (ASTRO_U64)chunk + 1] = bad;
    }
}

/* After Evaluate: two-level error refinement against the parents (children are [left halves | right
 * halves], as in PAGANI), then the relative classification (a region stays active while its error exceeds
 * epsrel·|estimate|). A region whose estimate or error is not finite, or whose axis is negative (Evaluate's
 * poison), counts as bad. */
ASTRO_FN void cub_refine_classify_item(int lane, unsigned int chunk, ASTRO_U64 n, int has_parents, double epsrel,
                                       ASTRO_GLOBAL const double *ASTRO_RESTRICT est_err,
                                       ASTRO_GLOBAL const int *ASTRO_RESTRICT axis,
                                       ASTRO_GLOBAL const double *ASTRO_RESTRICT parents,
                                       ASTRO_GLOBAL double *ASTRO_RESTRICT est, ASTRO_GLOBAL double *ASTRO_RESTRICT err,
                                       ASTRO_GLOBAL int *ASTRO_RESTRICT active, ASTRO_LOCAL double *red,
                                       ASTRO_LOCAL unsigned int *count, ASTRO_GLOBAL double *sums,
                                       ASTRO_GLOBAL unsigned int *counts)
{
    const ASTRO_U64 n_half = n / 2;
    const ASTRO_U64 first = (ASTRO_U64)chunk * CUB_CHUNK + (ASTRO_U64)lane * CUB_PER_LANE;
    double acc[CUB_SUMS] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    unsigned int n_active = 0, n_bad = 0;
    for (int k = 0; k < CUB_PER_LANE; ++k) {
        const ASTRO_U64 i = first + (ASTRO_U64)k;
        if (i >= n) break;
        const double v = est_err[2 * i], raw = est_err[2 * i + 1];
        double e = raw;
        if (has_parents) {
            const ASTRO_U64 sib = i < n_half ? i + n_half : i - n_half;
            const double delta = ASTRO_FABS(v + est_err[2 * sib] - parents[i < n_half ? i : i - n_half]) / 4.0;
            const double pair = raw + est_err[2 * sib + 1];
            e = pair > 0.0 ? ASTRO_FMA(raw, 1.0 + 2.0 * delta / pair, delta) : raw + delta;
        }
        const int ok = ASTRO_FABS(v) <= 1.7976931348623157e308 && ASTRO_FABS(e) <= 1.7976931348623157e308 &&
                       axis[i] >= 0;
        const int a = e > epsrel * ASTRO_FABS(v);
        est[i] = v;
        err[i] = e;
        active[i] = a;
        cub_lane_add(acc, v, e, a);
        n_active += (unsigned int)a;
        n_bad += (unsigned int)!ok;
    }
    cub_chunk_partials(lane, chunk, acc, n_active, n_bad, red, count, sums, counts);
}

/* Re-classification in place: mode 1 makes every region active (the error-budget guard), mode 2 keeps a
 * region active only if it was and its error exceeds tau (the memory-driven threshold). */
ASTRO_FN void cub_reclassify_item(int lane, unsigned int chunk, ASTRO_U64 n, int mode, double tau,
                                  ASTRO_GLOBAL const double *ASTRO_RESTRICT est,
                                  ASTRO_GLOBAL const double *ASTRO_RESTRICT err, ASTRO_GLOBAL int *ASTRO_RESTRICT active,
                                  ASTRO_LOCAL double *red, ASTRO_LOCAL unsigned int *count, ASTRO_GLOBAL double *sums,
                                  ASTRO_GLOBAL unsigned int *counts)
{
    const ASTRO_U64 first = (ASTRO_U64)chunk * CUB_CHUNK + (ASTRO_U64)lane * CUB_PER_LANE;
    double acc[CUB_SUMS] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    unsigned int n_active = 0;
    for (int k = 0; k < CUB_PER_LANE; ++k) {
        const ASTRO_U64 i = first + (ASTRO_U64)k;
        if (i >= n) break;
        const double v = est[i], e = err[i];
        const int a = mode == 1 ? 1 : (active[i] && e > tau);
        active[i] = a;
        cub_lane_add(acc, v, e, a);
        n_active += (unsigned int)a;
    }
    cub_chunk_partials(lane, chunk, acc, n_active, 0u, red, count, sums, counts);
}

/* One step of the threshold search over the active regions: per chunk Σ error of those with error <= tau
 * (they would finish), min and max error (`sums[3 chunk + 0..2]`), and how many have error > tau. */
ASTRO_FN void cub_probe_item(int lane, unsigned int chunk, ASTRO_U64 n, double tau,
                             ASTRO_GLOBAL const double *ASTRO_RESTRICT err, ASTRO_GLOBAL const int *ASTRO_RESTRICT active,
                             ASTRO_LOCAL double *red, ASTRO_LOCAL unsigned int *count, ASTRO_GLOBAL double *sums,
                             ASTRO_GLOBAL unsigned int *kept)
{
    const ASTRO_U64 first = (ASTRO_U64)chunk * CUB_CHUNK + (ASTRO_U64)lane * CUB_PER_LANE;
    double finished = 0.0, lo = 1.7976931348623157e308, hi = -1.0; /* errors are >= 0 */
    unsigned int n_kept = 0;
    for (int k = 0; k < CUB_PER_LANE; ++k) {
        const ASTRO_U64 i = first + (ASTRO_U64)k;
        if (i >= n) break;
        if (!active[i]) continue;
        const double e = err[i];
        if (e > tau)
            ++n_kept;
        else
            finished += e;
        lo = e < lo ? e : lo;
        hi = e > hi ? e : hi;
    }
    const double a = cub_tree(lane, finished, CUB_TREE_SUM, red);
    const double b = cub_tree(lane, lo, CUB_TREE_MIN, red);
    const double c = cub_tree(lane, hi, CUB_TREE_MAX, red);
    const unsigned int k = cub_tree_count(lane, n_kept, count);
    if (lane == 0) {
        sums[3 * (ASTRO_U64)chunk] = a;
        sums[3 * (ASTRO_U64)chunk + 1] = b;
        sums[3 * (ASTRO_U64)chunk + 2] = c;
        kept[chunk] = k;
    }
}

/* Filter and bisect: the active regions, in order, are compacted (chunk offsets from the host, item offsets by
 * a scan in local memory) and each is cut in half along its split axis into next[j] (left half) and
 * next[m + j] (right half), m the number of active regions; parents[j] keeps its estimate. */
ASTRO_FN void cub_split_item(int lane, unsigned int chunk, ASTRO_U64 n, ASTRO_U64 m, int d,
                             ASTRO_GLOBAL const double *ASTRO_RESTRICT bounds,
                             ASTRO_GLOBAL const int *ASTRO_RESTRICT axis, ASTRO_GLOBAL const double *ASTRO_RESTRICT est,
                             ASTRO_GLOBAL const int *ASTRO_RESTRICT active,
                             ASTRO_GLOBAL const unsigned int *ASTRO_RESTRICT offsets,
                             ASTRO_GLOBAL double *ASTRO_RESTRICT next, ASTRO_GLOBAL double *ASTRO_RESTRICT parents,
                             ASTRO_LOCAL unsigned int *count)
{
    const ASTRO_U64 first = (ASTRO_U64)chunk * CUB_CHUNK + (ASTRO_U64)lane * CUB_PER_LANE;
    unsigned int mine = 0;
    for (int k = 0; k < CUB_PER_LANE; ++k) {
        const ASTRO_U64 i = first + (ASTRO_U64)k;
        if (i < n && active[i]) ++mine;
    }
    count[lane] = mine;
    ASTRO_BARRIER();
    if (lane == 0) {
        unsigned int run = 0;
        for (int l = 0; l < CUB_LANES; ++l) {
            const unsigned int c = count[l];
            count[l] = run;
            run += c;
        }
    }
    ASTRO_BARRIER();
    ASTRO_U64 j = (ASTRO_U64)offsets[chunk] + (ASTRO_U64)count[lane];
    const ASTRO_U64 w2 = (ASTRO_U64)(2 * d);
    for (int k = 0; k < CUB_PER_LANE; ++k) {
        const ASTRO_U64 i = first + (ASTRO_U64)k;
        if (i >= n || !active[i]) continue;
        ASTRO_GLOBAL const double *b = bounds + i * w2;
        ASTRO_GLOBAL double *left = next + j * w2;
        ASTRO_GLOBAL double *right = next + (m + j) * w2;
        for (int q = 0; q < 2 * d; ++q) {
            left[q] = b[q];
            right[q] = b[q];
        }
        const int ax = axis[i];
        const double w = 0.5 * b[d + ax];
        left[d + ax] = w;
        right[d + ax] = w;
        right[ax] = b[ax] + w;
        parents[j] = est[i];
        ++j;
    }
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

/* Where the adapting kernel adds its bin contributions. OpenCL C 1.2 has no float64 atomic add, and its
 * compare-and-swap loop serialises when many work-items hit the same bins (17-44x CUDA's native add on the H200):
 * there the bins go to work-group local memory when d·CUB_BINS doubles fit in 32 KB, and each group adds every
 * touched bin to the global bins once (cub_bins_flush). CUDA and SYCL have native float64 atomics and add to
 * the global bins directly (CUDA with 32 KB of shared bins ran at 22 % occupancy and lost 30-100 %). */
#define CUB_LOCAL_BIN_DIMS 8
#if defined(ASTRO_DIALECT_OPENCL) && CUB_DIM <= CUB_LOCAL_BIN_DIMS
#  define CUB_LOCAL_BINS 1
#  define CUB_BINS_SPACE ASTRO_LOCAL
#  define CUB_BIN_ADD astro_atomic_add_f64_local
#else
#  define CUB_LOCAL_BINS 0
#  define CUB_BINS_SPACE ASTRO_GLOBAL
#  define CUB_BIN_ADD astro_atomic_add_f64
#endif

/* ---- m-Cubes: one work-item samples `chunk` consecutive sub-cubes (Sakiotis et al. 2022) ----
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
                              CUB_BINS_SPACE double *bins, double *sum, double *var)
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
                for (int j = 0; j < d; ++j) CUB_BIN_ADD(&bins[j * CUB_BINS + bin[j]], f2);
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

#if CUB_LOCAL_BINS
/* Zeroes a work-group's local bins (every item calls it before sampling). */
ASTRO_FN void cub_bins_clear(int lane, int d, CUB_BINS_SPACE double *local_bins)
{
    for (int i = lane; i < d * CUB_BINS; i += CUB_GROUP) local_bins[i] = 0.0;
    ASTRO_BARRIER();
}

#if ASTRO_HAS_ATOMIC_F64
/* Adds a work-group's touched local bins to the global ones (every item calls it after sampling). */
ASTRO_FN void cub_bins_flush(int lane, int d, CUB_BINS_SPACE double *local_bins, ASTRO_GLOBAL double *bins)
{
    ASTRO_BARRIER();
    for (int i = lane; i < d * CUB_BINS; i += CUB_GROUP) {
        const double v = local_bins[i];
        if (v != 0.0) astro_atomic_add_f64(&bins[i], v);
    }
}
#endif
#endif /* CUB_LOCAL_BINS */

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
