// Lomb-Scargle kernels, SYCL 2020 free-function kernels compiled at run time by DPC++. Same work per item as
// cl/lombscargle.cl through cl/common/lombscargle.h. Local memory is a function-scope work_group_static
// variable (group_local_memory_for_overwrite crashed Intel's CPU back end).
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "lombscargle.h"

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
