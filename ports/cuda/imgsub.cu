// Image-subtraction kernels, CUDA C++. Same arithmetic as cl/imgsub.cl through cl/common/imgsub.h (both
// precisions in one translation unit, functions suffixed _f32/_f64). Each kernel only computes its index.
#include "cuda_host.h"
#include "astro_dialect.h"
#include "imgsub.h"

static __device__ __forceinline__ size_t global_id() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }

#define IMGSUB_KERNEL(T, S)                                                                                      \
    __global__ void imgsub_difference_##S(const T *__restrict__ kbar, const T *__restrict__ ref,                 \
                                          const T *__restrict__ ref_var, int ref_row0,             \
                                          const T *__restrict__ sci, const T *__restrict__ sci_var,              \
                                          int sci_row0, int nx, int ny, int row0, int rows, int tile,            \
                                          T *__restrict__ diff, T *__restrict__ diff_var)                        \
    {                                                                                                            \
        imgsub_difference_item_##S(global_id(), kbar, ref, ref_var, ref_row0, sci, sci_var, sci_row0, nx, ny,    \
                                   row0, rows, tile, diff, diff_var);                                            \
    }
#define IMGSUB_FILTER_KERNEL(T, S)                                                                               \
    __global__ void imgsub_filter_##S(const T *__restrict__ kbar, const T *__restrict__ ref,                     \
                                      const T *__restrict__ ref_var, int ref_row0, int nx, int ny, int row0,     \
                                      int rows, T *__restrict__ snr)                                             \
    {                                                                                                            \
        imgsub_filter_item_##S(global_id(), kbar, ref, ref_var, ref_row0, nx, ny, row0, rows, snr);             \
    }
IMGSUB_KERNEL(float, f32)
IMGSUB_KERNEL(double, f64)
IMGSUB_FILTER_KERNEL(float, f32)
IMGSUB_FILTER_KERNEL(double, f64)
__global__ void imgsub_filter_inputs_f32(const float *__restrict__ diff, const float *__restrict__ diff_var,
                                         const float *unconv_var,
                                         const unsigned int *__restrict__ mask_words, float sign, float corr,
                                         int first, int n, float *fd, float *fv)
{
    imgsub_filter_inputs_item(global_id(), diff, diff_var, unconv_var, mask_words, sign, corr, first, n, fd, fv);
}
__global__ void imgsub_gram_f64(const double *__restrict__ columns, const double *__restrict__ weight,
                                const int *__restrict__ pairs, int stamps, int m, int entries, int pixels,
                                double *__restrict__ gram)
{
    imgsub_gram_item(global_id(), columns, weight, pairs, stamps, m, entries, pixels, gram);
}
__global__ void imgsub_lag_f64(const double *__restrict__ window, const double *__restrict__ weight, int stamps,
                               int side, double *__restrict__ lag)
{
    imgsub_lag_item(global_id(), window, weight, stamps, side, lag);
}
__global__ void imgsub_sky_f64(const double *__restrict__ kbar, const float *__restrict__ ref,
                               const float *__restrict__ sci, int nx, int ny, int stride, int across, int samples,
                               double *__restrict__ sky)
{
    imgsub_sky_item(global_id(), kbar, ref, sci, nx, ny, stride, across, samples, sky);
}

namespace astroport_cuda {
#define IMGSUB_ENTRY(k) {#k, reinterpret_cast<const void *>(&k)}
extern const KernelEntry imgsub_kernels[] = {IMGSUB_ENTRY(imgsub_difference_f32), IMGSUB_ENTRY(imgsub_difference_f64),
                                             IMGSUB_ENTRY(imgsub_filter_f32), IMGSUB_ENTRY(imgsub_filter_f64),
                                             IMGSUB_ENTRY(imgsub_filter_inputs_f32),
                                             IMGSUB_ENTRY(imgsub_gram_f64), IMGSUB_ENTRY(imgsub_lag_f64),
                                             IMGSUB_ENTRY(imgsub_sky_f64)};
#undef IMGSUB_ENTRY
extern const int imgsub_kernel_count = sizeof(imgsub_kernels) / sizeof(imgsub_kernels[0]);
}  // namespace astroport_cuda
