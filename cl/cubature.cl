/* Adaptive cubature kernels, OpenCL C 1.2: PAGANI's Evaluate and m-Cubes' sampling, for the integrand and
 * dimension fixed at build time by -D CUB_INTEGRAND=<id> -D CUB_DIM=<d>; kernel names carry both
 * (cub_evaluate_<id>_<d>) so the three dialects name their kernels alike. The work of one item is in
 * cl/common/cubature.h. Work-groups are exactly CUB_GROUP wide. */
#include "astro_dialect.h"
#include "cubature.h"

#define CUB_NAME_(base, f, d) base##_##f##_##d
#define CUB_NAME_EXPANDED(base, f, d) CUB_NAME_(base, f, d) /* expands f and d before pasting */
#define CUB_NAME(base) CUB_NAME_EXPANDED(base, CUB_INTEGRAND, CUB_DIM)

#if ASTRO_HAS_FP64
__kernel void CUB_NAME(cub_evaluate)(__global const double *restrict bounds, __global const double *restrict points,
                                     __global const int *restrict set_of, __global const double *restrict rule,
                                     __global const double *restrict params, const int n_points, const ulong first,
                                     __global double *restrict out, __global int *restrict axis)
{
    __local double box[2 * CUB_MAX_DIM];
    __local double f_axis[CUB_GROUP];
    __local double red[CUB_RULES * CUB_GROUP];
    cub_evaluate_item(CUB_INTEGRAND, CUB_DIM, n_points, first + (ulong)get_group_id(0), (int)get_local_id(0), bounds,
                      points, set_of, rule, params, box, f_axis, red, out, axis);
}

/* PAGANI's region list (cubature.h): one work-group of CUB_LANES items per chunk of CUB_CHUNK regions. */
__kernel void cub_refine_classify(__global const double *restrict est_err, __global const int *restrict axis,
                                  __global const double *restrict parents, const ulong n, const int has_parents,
                                  const double epsrel, __global double *restrict est, __global double *restrict err,
                                  __global int *restrict active, __global double *restrict sums,
                                  __global uint *restrict counts)
{
    __local double red[CUB_LANES];
    __local uint count[CUB_LANES];
    cub_refine_classify_item((int)get_local_id(0), (uint)get_group_id(0), n, has_parents, epsrel, est_err, axis,
                             parents, est, err, active, red, count, sums, counts);
}

__kernel void cub_reclassify(__global const double *restrict est, __global const double *restrict err,
                             __global int *restrict active, const ulong n, const int mode, const double tau,
                             __global double *restrict sums, __global uint *restrict counts)
{
    __local double red[CUB_LANES];
    __local uint count[CUB_LANES];
    cub_reclassify_item((int)get_local_id(0), (uint)get_group_id(0), n, mode, tau, est, err, active, red, count, sums,
                        counts);
}

__kernel void cub_probe(__global const double *restrict err, __global const int *restrict active, const ulong n,
                        const double tau, __global double *restrict sums, __global uint *restrict kept)
{
    __local double red[CUB_LANES];
    __local uint count[CUB_LANES];
    cub_probe_item((int)get_local_id(0), (uint)get_group_id(0), n, tau, err, active, red, count, sums, kept);
}

__kernel void cub_split(__global const double *restrict bounds, __global const int *restrict axis,
                        __global const double *restrict est, __global const int *restrict active,
                        __global const uint *restrict offsets, const ulong n, const ulong m, const int d,
                        __global double *restrict next, __global double *restrict parents)
{
    __local uint count[CUB_LANES];
    cub_split_item((int)get_local_id(0), (uint)get_group_id(0), n, m, d, bounds, axis, est, active, offsets, next,
                   parents, count);
}

#define CUB_MCUBES_ARGS                                                                                         \
    __global const double *restrict grid, __global const double *restrict box, __global const double *restrict params, \
        const ulong chunk, const ulong n_cubes, const int g, const int npg, const uint iteration, const uint seed_lo,     \
        const uint seed_hi, const double scale, __global double *bins, __global double *restrict partial
#define CUB_MCUBES_ITEM(ADAPT, BINS)                                                                            \
    cub_mcubes_item(CUB_INTEGRAND, CUB_DIM, (ulong)get_global_id(0), chunk, n_cubes, g, npg, iteration, seed_lo,   \
                    seed_hi, scale, grid, box, params, ADAPT, BINS, &sum, &var)

/* Adapting iterations: bin contributions in local memory where they fit (cubature.h, CUB_BINS_SPACE). */
__kernel void CUB_NAME(cub_mcubes_adapt)(CUB_MCUBES_ARGS)
{
    __local double red[2 * CUB_GROUP];
    double sum, var;
#if CUB_LOCAL_BINS
    __local double local_bins[CUB_DIM * CUB_BINS];
    cub_bins_clear((int)get_local_id(0), CUB_DIM, local_bins);
    CUB_MCUBES_ITEM(1, local_bins);
    cub_bins_flush((int)get_local_id(0), CUB_DIM, local_bins, bins);
#else
    CUB_MCUBES_ITEM(1, bins);
#endif
    cub_group_sum2((int)get_local_id(0), (uint)get_group_id(0), sum, var, red, partial);
}

/* Frozen-grid iterations: no bins (the argument is a placeholder). */
__kernel void CUB_NAME(cub_mcubes_frozen)(CUB_MCUBES_ARGS)
{
    __local double red[2 * CUB_GROUP];
    double sum, var;
#if CUB_LOCAL_BINS
    __local double no_bins[1];
    CUB_MCUBES_ITEM(0, no_bins);
#else
    CUB_MCUBES_ITEM(0, bins);
#endif
    cub_group_sum2((int)get_local_id(0), (uint)get_group_id(0), sum, var, red, partial);
}
#endif
