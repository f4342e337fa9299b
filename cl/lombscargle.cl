/* Lomb-Scargle kernels, OpenCL C 1.2. Each kernel declares its local memory and computes its indices; the work
 * of one item is in cl/common/lombscargle.h, identical in the three dialects. Work-groups are LS_GROUP wide
 * (the host launches with exactly that size). */
#include "astro_dialect.h"
#include "lombscargle.h"

#define LS_KERNELS(T, S, STAGE)                                                                                  \
    __kernel void ls_power_##S(__global const unsigned int *restrict curves, const int n_curves,               \
                               __global const unsigned int *restrict times, __global const T *restrict weights, \
                               __global const unsigned int *restrict given_freqs, const int floating,          \
                               __global T *restrict power)                                                    \
    {                                                                                                           \
        __local STAGE stage[LS_GROUP];                                                                          \
        ls_power_item_##S((unsigned int)get_group_id(0), (int)get_local_id(0), curves, n_curves, times, weights, \
                          given_freqs, floating, stage, power);                                                 \
    }                                                                                                           \
    __kernel void ls_topk_##S(__global const unsigned int *restrict curves, __global const T *restrict power,   \
                              const int k, __global int *restrict out_index, __global T *restrict out_power)    \
    {                                                                                                           \
        __local int idx[LS_GROUP * LS_TOPK_MAX];                                                                \
        __local T val[LS_GROUP * LS_TOPK_MAX];                                                                  \
        ls_topk_item_##S((unsigned int)get_group_id(0), (int)get_local_id(0), curves, power, k, idx, val,       \
                         out_index, out_power);                                                                 \
    }
LS_KERNELS(float, f32, LsStage32)
#if ASTRO_HAS_FP64 /* without cl_khr_fp64 the program still offers the float32 kernels */
LS_KERNELS(double, f64, LsStage64)
#endif

/* NUFFT kernels (float64 only): one item per point, cell, butterfly or frequency; the direct fix-up one work-group
 * per doubtful bin (cl/common/ls_nufft.h). */
#if ASTRO_HAS_FP64
#include "ring_fft.h"
#include "ls_nufft.h"
__kernel void ls_nufft_strengths(const int n_points, __global const unsigned int *restrict times,
                                 __global const double *restrict weights, const ulong centre,
                                 __global double *restrict strengths, __global unsigned int *restrict doubtful)
{
    ls_nufft_strengths_item((int)get_global_id(0), n_points, times, weights, centre, strengths, doubtful);
}
__kernel void ls_nufft_spread(const int n, const int width, const double beta, __global const unsigned int *restrict order,
                              __global const unsigned int *restrict start, __global const double *restrict offset,
                              __global const double *restrict strengths, const int first, const int grids,
                              const int out_grid, __global double *restrict out)
{
    ls_nufft_spread_item((int)get_global_id(0), n, width, beta, order, start, offset, strengths, first, grids,
                         out_grid, out);
}
__kernel void ls_nufft_fft(const int n, const int ns, const int p, const int batch,
                           __global const double *restrict src, __global double *restrict dst)
{
    ls_nufft_fft_item((int)get_global_id(0), n, ns, p, batch, src, dst);
}
__kernel void ls_nufft_power(const int modes, const int n, __global const double *restrict grids,
                             __global const double *restrict nodes, const int n_nodes, const double a,
                             const double scale, const int floating, const double e_y, const double e_w,
                             const double tolerance, __global double *restrict power,
                             __global unsigned int *restrict doubtful)
{
    ls_nufft_power_item((int)get_global_id(0), modes, n, grids, nodes, n_nodes, a, scale, floating, e_y, e_w,
                        tolerance, power, doubtful);
}
__kernel void ls_nufft_direct(const int n_points, __global const unsigned int *restrict times,
                              __global const double *restrict weights, const double f0, const double df,
                              const double unit, const int floating, __global const unsigned int *restrict doubtful,
                              __global double *restrict power)
{
    __local double part[6 * LS_NUFFT_DIRECT_GROUP];
    ls_nufft_direct_item((int)get_group_id(0), (int)get_num_groups(0), (int)get_local_id(0), n_points, times, weights,
                         f0, df, unit, floating, doubtful, part, power);
}
#endif
