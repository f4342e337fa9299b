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
