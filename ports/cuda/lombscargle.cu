// Lomb-Scargle kernels, CUDA C++. Same work per item as cl/lombscargle.cl through cl/common/lombscargle.h;
// each kernel declares its shared memory and computes its indices. Blocks are LS_GROUP threads.
#include "cuda_host.h"
#include "astro_dialect.h"
#include "lombscargle.h"

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

namespace astroport_cuda {
#define LS_ENTRY(k) {#k, reinterpret_cast<const void *>(&k)}
extern const KernelEntry lombscargle_kernels[] = {
    LS_ENTRY(ls_power_f32),
    LS_ENTRY(ls_topk_f32),
    LS_ENTRY(ls_power_f64),
    LS_ENTRY(ls_topk_f64),
};
#undef LS_ENTRY
extern const int lombscargle_kernel_count = sizeof(lombscargle_kernels) / sizeof(lombscargle_kernels[0]);
}  // namespace astroport_cuda
