// Lomb-Scargle kernels, CUDA C++. Same work per item as cl/lombscargle.cl through cl/common/lombscargle.h;
// each kernel declares its shared memory and computes its indices. Blocks are LS_GROUP threads.
#include "cuda_host.h"
#include "astro_dialect.h"
#include "lombscargle.h"
#include "ring_fft.h"
#include "ls_nufft.h"

#define LS_KERNELS(T, S, STAGE)                                                                                   \
    __global__ void __launch_bounds__(LS_GROUP) ls_power_##S(                                                     \
        const unsigned int *__restrict__ curves, int n_curves, const unsigned int *__restrict__ times,           \
        const T *__restrict__ weights, const unsigned int *__restrict__ given_freqs, int floating,    \
        T *__restrict__ power)                                                                                   \
    {                                                                                                            \
        __shared__ STAGE stage[LS_GROUP];                                                                        \
        ls_power_item_##S(blockIdx.x, (int)threadIdx.x, curves, n_curves, times, weights, given_freqs,           \
                          floating, stage, power);                                                               \
    }                                                                                                            \
    __global__ void __launch_bounds__(LS_GROUP) ls_topk_##S(const unsigned int *__restrict__ curves,            \
                                                            const T *__restrict__ power, int k,                  \
                                                            int *__restrict__ out_index, T *__restrict__ out_power) \
    {                                                                                                            \
        __shared__ int idx[LS_GROUP * LS_TOPK_MAX];                                                              \
        __shared__ T val[LS_GROUP * LS_TOPK_MAX];                                                                \
        ls_topk_item_##S(blockIdx.x, (int)threadIdx.x, curves, power, k, idx, val, out_index, out_power);        \
    }
LS_KERNELS(float, f32, LsStage32)
LS_KERNELS(double, f64, LsStage64)

// NUFFT kernels (cl/common/ls_nufft.h): one thread per point, cell, butterfly or frequency; the direct fix-up one
// block per doubtful bin.
static __device__ __forceinline__ int global_id() { return (int)(blockIdx.x * blockDim.x + threadIdx.x); }
__global__ void ls_nufft_strengths(int n_points, const unsigned int *__restrict__ times, const double *__restrict__ weights,
                                   unsigned long long centre, double *__restrict__ strengths,
                                   unsigned int *__restrict__ doubtful)
{
    ls_nufft_strengths_item(global_id(), n_points, times, weights, centre, strengths, doubtful);
}
__global__ void ls_nufft_spread(int n, int width, double beta, const unsigned int *__restrict__ order,
                                const unsigned int *__restrict__ start, const double *__restrict__ offset,
                                const double *__restrict__ strengths, int first, int grids, int out_grid,
                                double *__restrict__ out)
{
    ls_nufft_spread_item(global_id(), n, width, beta, order, start, offset, strengths, first, grids, out_grid, out);
}
__global__ void ls_nufft_fft(int n, int ns, int p, int batch, const double *__restrict__ src,
                             double *__restrict__ dst)
{
    ls_nufft_fft_item(global_id(), n, ns, p, batch, src, dst);
}
__global__ void ls_nufft_power(int modes, int n, const double *__restrict__ grids, const double *__restrict__ nodes,
                               int n_nodes, double a, double scale, int floating, double e_y, double e_w,
                               double tolerance, double *__restrict__ power, unsigned int *__restrict__ doubtful)
{
    ls_nufft_power_item(global_id(), modes, n, grids, nodes, n_nodes, a, scale, floating, e_y, e_w, tolerance, power,
                        doubtful);
}
__global__ void __launch_bounds__(LS_NUFFT_DIRECT_GROUP) ls_nufft_direct(
    int n_points, const unsigned int *__restrict__ times, const double *__restrict__ weights, double f0,
    double df, double unit, int floating, const unsigned int *__restrict__ doubtful, double *__restrict__ power)
{
    __shared__ double part[6 * LS_NUFFT_DIRECT_GROUP];
    ls_nufft_direct_item((int)blockIdx.x, (int)gridDim.x, (int)threadIdx.x, n_points, times, weights, f0, df, unit, floating,
                         doubtful, part, power);
}

namespace astroport_cuda {
#define LS_ENTRY(k) {#k, reinterpret_cast<const void *>(&k)}
extern const KernelEntry lombscargle_kernels[] = {
    LS_ENTRY(ls_power_f32),
    LS_ENTRY(ls_topk_f32),
    LS_ENTRY(ls_power_f64),
    LS_ENTRY(ls_topk_f64),
    LS_ENTRY(ls_nufft_strengths),
    LS_ENTRY(ls_nufft_spread),
    LS_ENTRY(ls_nufft_fft),
    LS_ENTRY(ls_nufft_power),
    LS_ENTRY(ls_nufft_direct),
};
#undef LS_ENTRY
extern const int lombscargle_kernel_count = sizeof(lombscargle_kernels) / sizeof(lombscargle_kernels[0]);
}  // namespace astroport_cuda
