/* Lens kernels, OpenCL C 1.2 (with cl_khr_fp64). Each kernel only computes its work-item index: the work of
 * one item is a function of the shared headers, identical in the three dialects. Both precisions live in one
 * program: the mixed-precision pipeline uses both. */
#include "astro_dialect.h"
#include "lens_all.h"

#define LENS_GRID_KERNEL(T, S)                                                                              \
    __kernel void lens_grid_##S(__global const T *restrict sie, const int n_sie,                           \
                                __global const T *restrict dpie, const int n_dpie, const int nx,           \
                                const int row0, const int rows, const T h, const int exact_offsets, __global T *restrict gx_out,    \
                                __global T *restrict gy_out)                                               \
    {                                                                                                      \
        lens_grid_item_##S(get_global_id(0), sie, n_sie, dpie, n_dpie, nx, row0, rows, h, exact_offsets, gx_out, gy_out); \
    }                                                                                                      \
    __kernel void lens_delens_##S(__global const T *restrict gx, __global const T *restrict gy,            \
                                  const int nx, const int rows, const int rows_ext, const T x_first,       \
                                  const T y_first, const T h, __global const T *restrict sources,          \
                                  const int n_sys, __global int *restrict hits,                            \
                                  __global unsigned int *counter, const unsigned int max_hits)             \
    {                                                                                                      \
        lens_delens_item_##S(get_global_id(0), gx, gy, nx, rows, rows_ext, x_first, y_first, h, sources,   \
                             n_sys, hits, counter, max_hits);                                              \
    }
LENS_GRID_KERNEL(float, f32)
#if ASTRO_HAS_FP64 /* without cl_khr_fp64 the program still offers the float32 kernels */
LENS_GRID_KERNEL(double, f64)

__kernel void lens_flag(__global const float *restrict gx, __global const float *restrict gy, const int nx,
                        const int rows, const int rows_ext, const float h, const float axis_limit,
                        const float cross_limit, const float eig_limit, __global double *restrict gx_out,
                        __global double *restrict gy_out, __global unsigned int *restrict mask,
                        __global unsigned int *restrict list, __global unsigned int *counter)
{
    lens_flag_item(get_global_id(0), gx, gy, nx, rows, rows_ext, h, axis_limit, cross_limit, eig_limit, gx_out,
                   gy_out, mask, list, counter);
}

__kernel void lens_patch(__global const int *restrict centres, const int n_centres, const int size, const int nx,
                         const int row0, const int rows, __global unsigned int *restrict mask,
                         __global unsigned int *restrict list, __global unsigned int *counter)
{
    lens_patch_item(get_global_id(0), centres, n_centres, size, nx, row0, rows, mask, list, counter);
}

__kernel void lens_split_nodes(const int n_galaxies, const int side, const int step, __global const double *restrict info,
                               __global const double *restrict sie, const int n_sie,
                               __global const double *restrict dpie, const double h, __global double *restrict table)
{
    lens_split_nodes_item(get_global_id(0), n_galaxies, side, step, info, sie, n_sie, dpie, h, table);
}

__kernel void lens_recompute(LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_item(get_global_id(0), get_global_size(0), LENS_RECOMPUTE_ARGS);
}

__kernel void lens_recompute_sie(LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_sie_item(get_global_id(0), get_global_size(0), LENS_RECOMPUTE_ARGS);
}

__kernel void lens_split_lines(const int nodes, const int rows, const int row0, const int step, const int c_first,
                               __global const float *restrict coarse_gx, __global const float *restrict coarse_gy,
                               __global const double *restrict weights, __global double *restrict lines)
{
    lens_split_lines_item(get_global_id(0), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

__kernel void lens_split_lines_f64(const int nodes, const int rows, const int row0, const int step, const int c_first,
                                   __global const double *restrict coarse_gx, __global const double *restrict coarse_gy,
                                   __global const double *restrict weights, __global double *restrict lines)
{
    lens_split_lines_f64_item(get_global_id(0), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

__kernel void lens_split_pixel(LENS_SPLIT_PIXEL_PARAMS)
{
    lens_split_pixel_item(get_global_id(0), LENS_SPLIT_PIXEL_ARGS);
}

__kernel void lens_split_pixel_sie(LENS_SPLIT_PIXEL_PARAMS)
{
    lens_split_pixel_sie_item(get_global_id(0), LENS_SPLIT_PIXEL_ARGS);
}

__kernel void lens_split_flag(__global const double *restrict gx, __global const double *restrict gy,
                              __global const double *restrict next_gx, __global const double *restrict next_gy,
                              const int nx, const int rows, const int rows_main, const int rows_ext, const int row0, const int step, const int cells_x,
                              __global const double *restrict limit, const double h,
                              __global unsigned int *restrict list, __global unsigned int *counter)
{
    lens_split_flag_item(get_global_id(0), gx, gy, next_gx, next_gy, nx, rows, rows_main, rows_ext, row0, step, cells_x,
                         limit, h, list, counter);
}
#endif
