// Lens kernels, SYCL 2020 free-function kernels compiled at run time by DPC++ (sycl_ext_oneapi_kernel_compiler).
// Same arithmetic as cl/lens.cl through the shared headers (both precisions, functions suffixed _f32/_f64).
// Each kernel only computes its work-item index.
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "lens_all.h"

namespace syclexp = sycl::ext::oneapi::experimental;
#define LENS_KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void
static inline size_t global_id() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0); }

#define LENS_GRID_KERNEL(T, S)                                                                                  \
    LENS_KERNEL lens_grid_##S(const T *sie, int n_sie, const T *dpie, int n_dpie, int nx, int row0, int rows, T h, int exact_offsets, \
                              T *gx_out, T *gy_out)                                                            \
    {                                                                                                          \
        lens_grid_item_##S(global_id(), sie, n_sie, dpie, n_dpie, nx, row0, rows, h, exact_offsets, gx_out, gy_out);          \
    }                                                                                                          \
    LENS_KERNEL lens_delens_##S(const T *gx, const T *gy, int nx, int rows, int rows_ext, T x_first, T y_first, \
                                T h, const T *sources, int n_sys, int *hits, unsigned int *counter,            \
                                unsigned int max_hits)                                                         \
    {                                                                                                          \
        lens_delens_item_##S(global_id(), gx, gy, nx, rows, rows_ext, x_first, y_first, h, sources, n_sys,     \
                             hits, counter, max_hits);                                                         \
    }
LENS_GRID_KERNEL(float, f32)
LENS_GRID_KERNEL(double, f64)

LENS_KERNEL lens_flag(const float *gx, const float *gy, int nx, int rows, int rows_ext, float h, float axis_limit,
                      float cross_limit, float eig_limit, double *gx_out, double *gy_out, unsigned int *mask,
                      unsigned int *list, unsigned int *counter)
{
    lens_flag_item(global_id(), gx, gy, nx, rows, rows_ext, h, axis_limit, cross_limit, eig_limit, gx_out, gy_out, mask,
                   list, counter);
}

LENS_KERNEL lens_patch(const int *centres, int n_centres, int size, int nx, int row0, int rows, unsigned int *mask,
                       unsigned int *list, unsigned int *counter)
{
    lens_patch_item(global_id(), centres, n_centres, size, nx, row0, rows, mask, list, counter);
}

static inline size_t global_size()
{
    return sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_range(0);
}
LENS_KERNEL lens_recompute(LENS_RECOMPUTE_PARAMS) { lens_recompute_item(global_id(), global_size(), LENS_RECOMPUTE_ARGS); }
LENS_KERNEL lens_recompute_sie(LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_sie_item(global_id(), global_size(), LENS_RECOMPUTE_ARGS);
}

LENS_KERNEL lens_split_nodes(int n_galaxies, int side, int step, const double *info, const double *sie, int n_sie,
                             const double *dpie, double h, double *table)
{
    lens_split_nodes_item(global_id(), n_galaxies, side, step, info, sie, n_sie, dpie, h, table);
}

LENS_KERNEL lens_split_lines(int nodes, int rows, int row0, int step, int c_first, const float *coarse_gx,
                             const float *coarse_gy, const double *weights, double *lines)
{
    lens_split_lines_item(global_id(), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

LENS_KERNEL lens_split_lines_f64(int nodes, int rows, int row0, int step, int c_first, const double *coarse_gx,
                                 const double *coarse_gy, const double *weights, double *lines)
{
    lens_split_lines_f64_item(global_id(), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

LENS_KERNEL lens_split_pixel(LENS_SPLIT_PIXEL_PARAMS) { lens_split_pixel_item(global_id(), LENS_SPLIT_PIXEL_ARGS); }
LENS_KERNEL lens_split_pixel_sie(LENS_SPLIT_PIXEL_PARAMS) { lens_split_pixel_sie_item(global_id(), LENS_SPLIT_PIXEL_ARGS); }

LENS_KERNEL lens_split_flag(const double *gx, const double *gy, const double *next_gx, const double *next_gy, int nx,
                            int rows, int rows_main, int rows_ext, int row0, int step, int cells_x, const double *limit,
                            double h, unsigned int *list, unsigned int *counter)
{
    lens_split_flag_item(global_id(), gx, gy, next_gx, next_gy, nx, rows, rows_main, rows_ext, row0, step, cells_x, limit,
                         h, list, counter);
}
