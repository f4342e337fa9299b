// Image-subtraction kernels, SYCL 2020 free-function kernels compiled at run time by DPC++
// (sycl_ext_oneapi_kernel_compiler). Same arithmetic as cl/imgsub.cl through cl/common/imgsub.h.
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "imgsub.h"

namespace syclexp = sycl::ext::oneapi::experimental;
#define IMGSUB_ENTRY extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void
static inline size_t global_id() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0); }

#define IMGSUB_KERNEL(T, S)                                                                                      \
    IMGSUB_ENTRY imgsub_difference_##S(const T *kbar, const T *ref, const T *ref_var, int ref_row0,             \
                                       const T *sci, const T *sci_var, int sci_row0, int nx, int ny, int row0,   \
                                       int rows, int tile, T *diff, T *diff_var)                                 \
    {                                                                                                            \
        imgsub_difference_item_##S(global_id(), kbar, ref, ref_var, ref_row0, sci, sci_var, sci_row0, nx, ny,    \
                                   row0, rows, tile, diff, diff_var);                                            \
    }
#define IMGSUB_FILTER_KERNEL(T, S)                                                                               \
    IMGSUB_ENTRY imgsub_filter_##S(const T *kbar, const T *ref, const T *ref_var, int ref_row0, int nx, int ny, \
                                   int row0, int rows, T *snr)                                                   \
    {                                                                                                            \
        imgsub_filter_item_##S(global_id(), kbar, ref, ref_var, ref_row0, nx, ny, row0, rows, snr);             \
    }
IMGSUB_KERNEL(float, f32)
IMGSUB_KERNEL(double, f64)
IMGSUB_FILTER_KERNEL(float, f32)
IMGSUB_FILTER_KERNEL(double, f64)
IMGSUB_ENTRY imgsub_filter_inputs_f32(const float *diff, const float *diff_var, const float *unconv_var,
                                      const unsigned int *mask_words, float sign, float corr, int first, int n,
                                      float *fd, float *fv)
{
    imgsub_filter_inputs_item(global_id(), diff, diff_var, unconv_var, mask_words, sign, corr, first, n, fd, fv);
}
IMGSUB_ENTRY imgsub_gram_f64(const double *columns, const double *weight, const int *pairs, int stamps, int m,
                             int entries, int pixels, double *gram)
{
    imgsub_gram_item(global_id(), columns, weight, pairs, stamps, m, entries, pixels, gram);
}
IMGSUB_ENTRY imgsub_lag_f64(const double *window, const double *weight, int stamps, int side, double *lag)
{
    imgsub_lag_item(global_id(), window, weight, stamps, side, lag);
}
IMGSUB_ENTRY imgsub_sky_f64(const double *kbar, const float *ref, const float *sci, int nx, int ny, int stride,
                            int across, int samples, double *sky)
{
    imgsub_sky_item(global_id(), kbar, ref, sci, nx, ny, stride, across, samples, sky);
}
