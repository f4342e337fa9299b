/* Image-subtraction kernels, OpenCL C 1.2. Each kernel only computes its work-item index: the work of one item
 * is a function of cl/common/imgsub.h, identical in the three dialects. */
#include "astro_dialect.h"
#include "imgsub.h"

#define IMGSUB_KERNEL(T, S)                                                                                      \
    __kernel void imgsub_difference_##S(__global const T *restrict kbar, __global const T *restrict ref,         \
                                        __global const T *restrict ref_var, const int ref_row0,                   \
                                        __global const T *restrict sci,                                          \
                                        __global const T *restrict sci_var, const int sci_row0, const int nx,    \
                                        const int ny, const int row0, const int rows, const int tile,            \
                                        __global T *restrict diff, __global T *restrict diff_var)                \
    {                                                                                                            \
        imgsub_difference_item_##S(get_global_id(0), kbar, ref, ref_var, ref_row0, sci, sci_var, sci_row0, nx,   \
                                   ny, row0, rows, tile, diff, diff_var);                                        \
    }
#define IMGSUB_FILTER_KERNEL(T, S)                                                                               \
    __kernel void imgsub_filter_##S(__global const T *restrict kbar, __global const T *restrict ref,             \
                                    __global const T *restrict ref_var, const int ref_row0, const int nx,        \
                                    const int ny, const int row0, const int rows, __global T *restrict snr)      \
    {                                                                                                            \
        imgsub_filter_item_##S(get_global_id(0), kbar, ref, ref_var, ref_row0, nx, ny, row0, rows, snr);        \
    }
IMGSUB_KERNEL(float, f32)
IMGSUB_FILTER_KERNEL(float, f32)
__kernel void imgsub_filter_inputs_f32(__global const float *restrict diff, __global const float *restrict diff_var,
                                       __global const float *unconv_var,
                                       __global const unsigned int *restrict mask_words, const float sign,
                                       const float corr, const int first, const int n,
                                       __global float *fd, __global float *fv)
{
    imgsub_filter_inputs_item(get_global_id(0), diff, diff_var, unconv_var, mask_words, sign, corr, first, n, fd,
                              fv);
}
#if ASTRO_HAS_FP64
IMGSUB_KERNEL(double, f64)
IMGSUB_FILTER_KERNEL(double, f64)
__kernel void imgsub_gram_f64(__global const double *restrict columns, __global const double *restrict weight,
                              __global const int *restrict pairs, const int stamps, const int m,
                              const int entries, const int pixels, __global double *restrict gram)
{
    imgsub_gram_item(get_global_id(0), columns, weight, pairs, stamps, m, entries, pixels, gram);
}
__kernel void imgsub_lag_f64(__global const double *restrict window, __global const double *restrict weight,
                             const int stamps, const int side, __global double *restrict lag)
{
    imgsub_lag_item(get_global_id(0), window, weight, stamps, side, lag);
}
__kernel void imgsub_sky_f64(__global const double *restrict kbar, __global const float *restrict ref,
                             __global const float *restrict sci, const int nx, const int ny, const int stride,
                             const int across, const int samples, __global double *restrict sky)
{
    imgsub_sky_item(get_global_id(0), kbar, ref, sci, nx, ny, stride, across, samples, sky);
}
#endif
