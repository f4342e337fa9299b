/* Lomb-Scargle kernels, OpenCL C 1.2. Each kernel declares its local memory and computes its indices; the work
 * of one item is in cl/common/lombscargle.h, identical in the three dialects. Work-groups are LS_GROUP wide
 * (the host launches with exactly that size). */
#include "astro_dialect.h"
#include "lombscargle.h"

__kernel void ls_power_f32(__global const unsigned int *restrict curves, const int n_curves,
                           __global const unsigned int *restrict times, __global const float *restrict weights,
                           __global const unsigned int *restrict given_freqs, const int floating,
                           __global float *restrict power)
{
    __local LsStage32 stage[LS_GROUP];
    ls_power_item_f32((unsigned int)get_group_id(0), (int)get_local_id(0), curves, n_curves, times, weights,
                      given_freqs, floating, stage, power);
}

__kernel void ls_topk_f32(__global const unsigned int *restrict curves, __global const float *restrict power,
                          const int k, __global int *restrict out_index, __global float *restrict out_power)
{
    __local int idx[LS_GROUP * LS_TOPK_MAX];
    __local float val[LS_GROUP * LS_TOPK_MAX];
    ls_topk_item_f32((unsigned int)get_group_id(0), (int)get_local_id(0), curves, power, k, idx, val, out_index,
                     out_power);
}

#if ASTRO_HAS_FP64
__kernel void ls_power_f64(__global const unsigned int *restrict curves, const int n_curves,
                           __global const unsigned int *restrict times, __global const double *restrict weights,
                           __global const unsigned int *restrict given_freqs, const int floating,
                           __global double *restrict power)
{
    __local LsStage64 stage[LS_GROUP];
    ls_power_item_f64((unsigned int)get_group_id(0), (int)get_local_id(0), curves, n_curves, times, weights,
                      given_freqs, floating, stage, power);
}

__kernel void ls_topk_f64(__global const unsigned int *restrict curves, __global const double *restrict power,
                          const int k, __global int *restrict out_index, __global double *restrict out_power)
{
    __local int idx[LS_GROUP * LS_TOPK_MAX];
    __local double val[LS_GROUP * LS_TOPK_MAX];
    ls_topk_item_f64((unsigned int)get_group_id(0), (int)get_local_id(0), curves, power, k, idx, val, out_index,
                     out_power);
}
#endif
