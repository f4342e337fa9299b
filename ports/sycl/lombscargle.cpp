// Lomb-Scargle kernels, SYCL 2020 free-function kernels compiled at run time by DPC++. Same work per item as
// cl/lombscargle.cl through cl/common/lombscargle.h. Local memory is a function-scope work_group_static
// variable (group_local_memory_for_overwrite crashed Intel's CPU back end).
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "lombscargle.h"
#include "ring_fft.h"
#include "ls_nufft.h"

namespace syclexp = sycl::ext::oneapi::experimental;
#define LS_KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void
static inline sycl::nd_item<1> item() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>(); }

#define LS_KERNELS(T, S, STAGE)                                                                                  \
    LS_KERNEL ls_power_##S(const unsigned int *curves, int n_curves, const unsigned int *times, const T *weights, \
                           const unsigned int *given_freqs, int floating, T *power)                  \
    {                                                                                                           \
        static syclexp::work_group_static<STAGE[LS_GROUP]> stage;                                               \
        const sycl::nd_item<1> it = item();                                                                     \
        ls_power_item_##S((unsigned int)it.get_group(0), (int)it.get_local_id(0), curves, n_curves, times,      \
                          weights, given_freqs, floating, &stage[0], power);                             \
    }                                                                                                           \
    LS_KERNEL ls_topk_##S(const unsigned int *curves, const T *power, int k, int *out_index, T *out_power)      \
    {                                                                                                           \
        static syclexp::work_group_static<int[LS_GROUP * LS_TOPK_MAX]> idx;                                     \
        static syclexp::work_group_static<T[LS_GROUP * LS_TOPK_MAX]> val;                                       \
        const sycl::nd_item<1> it = item();                                                                     \
        ls_topk_item_##S((unsigned int)it.get_group(0), (int)it.get_local_id(0), curves, power, k, &idx[0],     \
                         &val[0], out_index, out_power);                                                        \
    }
LS_KERNELS(float, f32, LsStage32)
LS_KERNELS(double, f64, LsStage64)

// NUFFT kernels (cl/common/ls_nufft.h): one item per point, cell, butterfly or frequency; the direct fix-up one
// work-group per doubtful bin.
static inline int global_id() { return (int)item().get_global_id(0); }
LS_KERNEL ls_nufft_strengths(int n_points, const unsigned int *times, const double *weights, uint64_t centre,
                             double *strengths, unsigned int *doubtful)
{
    ls_nufft_strengths_item(global_id(), n_points, times, weights, centre, strengths, doubtful);
}
LS_KERNEL ls_nufft_spread(int n, int width, double beta, const unsigned int *order, const unsigned int *start,
                          const double *offset, const double *strengths, int first, int grids, int out_grid,
                          double *out)
{
    ls_nufft_spread_item(global_id(), n, width, beta, order, start, offset, strengths, first, grids, out_grid, out);
}
LS_KERNEL ls_nufft_fft(int n, int ns, int p, int batch, const double *src, double *dst)
{
    ls_nufft_fft_item(global_id(), n, ns, p, batch, src, dst);
}
LS_KERNEL ls_nufft_power(int modes, int n, const double *grids, const double *nodes, int n_nodes, double a,
                         double scale, int floating, double e_y, double e_w, double tolerance, double *power,
                         unsigned int *doubtful)
{
    ls_nufft_power_item(global_id(), modes, n, grids, nodes, n_nodes, a, scale, floating, e_y, e_w, tolerance, power,
                        doubtful);
}
LS_KERNEL ls_nufft_direct(int n_points, const unsigned int *times, const double *weights, double f0, double df,
                          double unit, int floating, const unsigned int *doubtful, double *power)
{
    static syclexp::work_group_static<double[6 * LS_NUFFT_DIRECT_GROUP]> part;
    const sycl::nd_item<1> it = item();
    ls_nufft_direct_item((int)it.get_group(0), (int)it.get_group_range(0), (int)it.get_local_id(0), n_points, times,
                         weights, f0, df, unit, floating, doubtful, &part[0], power);
}
