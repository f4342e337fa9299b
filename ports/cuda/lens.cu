// Lens kernels, CUDA C++. Same arithmetic as cl/lens.cl through the shared headers in cl/common/ (both
// precisions in one translation unit, functions suffixed _f32/_f64). Each kernel only computes its index.
#include "cuda_host.h"
#include "astro_dialect.h"
#include "lens_all.h"

static __device__ __forceinline__ size_t global_id() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }

#define LENS_GRID_KERNEL(T, S)                                                                                    \
    __global__ void lens_grid_##S(const T *__restrict__ sie, int n_sie, const T *__restrict__ dpie, int n_dpie,  \
                                  int nx, int row0, int rows, T h, int exact_offsets, T *__restrict__ gx_out, T *__restrict__ gy_out) \
    {                                                                                                            \
        lens_grid_item_##S(global_id(), sie, n_sie, dpie, n_dpie, nx, row0, rows, h, exact_offsets, gx_out, gy_out);            \
    }                                                                                                            \
    __global__ void lens_delens_##S(const T *__restrict__ gx, const T *__restrict__ gy, int nx, int rows,         \
                                    int rows_ext, T x_first, T y_first, T h, const T *__restrict__ sources,       \
                                    int n_sys, int *__restrict__ hits, unsigned int *counter,                    \
                                    unsigned int max_hits)                                                       \
    {                                                                                                            \
        lens_delens_item_##S(global_id(), gx, gy, nx, rows, rows_ext, x_first, y_first, h, sources, n_sys, hits, \
                             counter, max_hits);                                                                 \
    }
LENS_GRID_KERNEL(float, f32)
LENS_GRID_KERNEL(double, f64)

__global__ void lens_flag(const float *__restrict__ gx, const float *__restrict__ gy, int nx, int rows, int rows_ext,
                          float h, float axis_limit, float cross_limit, float eig_limit, double *__restrict__ gx_out,
                          double *__restrict__ gy_out, unsigned int *__restrict__ mask, unsigned int *__restrict__ list,
                          unsigned int *counter)
{
    lens_flag_item(global_id(), gx, gy, nx, rows, rows_ext, h, axis_limit, cross_limit, eig_limit, gx_out, gy_out, mask,
                   list, counter);
}

__global__ void lens_patch(const int *__restrict__ centres, int n_centres, int size, int nx, int row0, int rows,
                           unsigned int *__restrict__ mask, unsigned int *__restrict__ list, unsigned int *counter)
{
    lens_patch_item(global_id(), centres, n_centres, size, nx, row0, rows, mask, list, counter);
}

static __device__ __forceinline__ size_t global_size() { return (size_t)gridDim.x * blockDim.x; }
__global__ void lens_recompute(LENS_RECOMPUTE_PARAMS) { lens_recompute_item(global_id(), global_size(), LENS_RECOMPUTE_ARGS); }
__global__ void lens_recompute_sie(LENS_RECOMPUTE_PARAMS)
{
    lens_recompute_sie_item(global_id(), global_size(), LENS_RECOMPUTE_ARGS);
}

__global__ void lens_split_nodes(int n_galaxies, int side, int step, const double *__restrict__ info,
                                 const double *__restrict__ sie, int n_sie, const double *__restrict__ dpie, double h,
                                 double *__restrict__ table)
{
    lens_split_nodes_item(global_id(), n_galaxies, side, step, info, sie, n_sie, dpie, h, table);
}

__global__ void lens_split_lines(int nodes, int rows, int row0, int step, int c_first, const float *__restrict__ coarse_gx,
                                 const float *__restrict__ coarse_gy, const double *__restrict__ weights,
                                 double *__restrict__ lines)
{
    lens_split_lines_item(global_id(), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

__global__ void lens_split_lines_f64(int nodes, int rows, int row0, int step, int c_first,
                                     const double *__restrict__ coarse_gx, const double *__restrict__ coarse_gy,
                                     const double *__restrict__ weights, double *__restrict__ lines)
{
    lens_split_lines_f64_item(global_id(), nodes, rows, row0, step, c_first, coarse_gx, coarse_gy, weights, lines);
}

__global__ void lens_split_pixel(LENS_SPLIT_PIXEL_PARAMS) { lens_split_pixel_item(global_id(), LENS_SPLIT_PIXEL_ARGS); }
__global__ void lens_split_pixel_sie(LENS_SPLIT_PIXEL_PARAMS) { lens_split_pixel_sie_item(global_id(), LENS_SPLIT_PIXEL_ARGS); }

__global__ void lens_split_flag(const double *__restrict__ gx, const double *__restrict__ gy,
                                const double *__restrict__ next_gx, const double *__restrict__ next_gy, int nx, int rows,
                                int rows_main, int rows_ext, int row0, int step, int cells_x, const double *__restrict__ limit,
                                double h, unsigned int *__restrict__ list, unsigned int *counter)
{
    lens_split_flag_item(global_id(), gx, gy, next_gx, next_gy, nx, rows, rows_main, rows_ext, row0, step, cells_x, limit,
                         h, list, counter);
}

namespace astroport_cuda {
#define LENS_ENTRY(k) {#k, reinterpret_cast<const void *>(&k)}
extern const KernelEntry lens_kernels[] = {
    LENS_ENTRY(lens_grid_f32),        LENS_ENTRY(lens_grid_f64),     LENS_ENTRY(lens_delens_f32),
    LENS_ENTRY(lens_delens_f64),      LENS_ENTRY(lens_flag),         LENS_ENTRY(lens_patch),
    LENS_ENTRY(lens_recompute),       LENS_ENTRY(lens_recompute_sie), LENS_ENTRY(lens_split_nodes),
    LENS_ENTRY(lens_split_lines),     LENS_ENTRY(lens_split_lines_f64), LENS_ENTRY(lens_split_pixel),  LENS_ENTRY(lens_split_pixel_sie),
    LENS_ENTRY(lens_split_flag),
};
#undef LENS_ENTRY
extern const int lens_kernel_count = sizeof(lens_kernels) / sizeof(lens_kernels[0]);
}  // namespace astroport_cuda
