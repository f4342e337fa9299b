// Adaptive cubature kernels, CUDA C++: PAGANI's Evaluate and m-Cubes' sampling, one instantiation per
// (integrand id F, dimension D), named like the OpenCL/SYCL kernels built with -D CUB_INTEGRAND=F -D CUB_DIM=D
// (cub_evaluate_F_D). Same work per item as cl/cubature.cl through cl/common/cubature.h.
#include "cuda_host.h"
#include "astro_dialect.h"
#include "cubature.h"

template <int F, int D>
__global__ void __launch_bounds__(CUB_GROUP)
    cub_evaluate(const double *__restrict__ bounds, const double *__restrict__ points, const int *__restrict__ set_of,
                 const double *__restrict__ rule, const double *__restrict__ params, int n_points,
                 unsigned long long first, double *__restrict__ out, int *__restrict__ axis)
{
    __shared__ double box[2 * CUB_MAX_DIM];
    __shared__ double f_axis[CUB_GROUP];
    __shared__ double red[CUB_RULES * CUB_GROUP];
    cub_evaluate_item(F, D, n_points, first + blockIdx.x, (int)threadIdx.x, bounds, points, set_of, rule, params, box,
                      f_axis, red, out, axis);
}

// PAGANI's region list (cubature.h): one block of CUB_LANES threads per chunk of CUB_CHUNK regions.
__global__ void __launch_bounds__(CUB_LANES)
    cub_refine_classify(const double *__restrict__ est_err, const int *__restrict__ axis,
                        const double *__restrict__ parents, unsigned long long n, int has_parents, double epsrel,
                        double *__restrict__ est, double *__restrict__ err, int *__restrict__ active,
                        double *__restrict__ sums, unsigned int *__restrict__ counts)
{
    __shared__ double red[CUB_LANES];
    __shared__ unsigned int count[CUB_LANES];
    cub_refine_classify_item((int)threadIdx.x, blockIdx.x, n, has_parents, epsrel, est_err, axis, parents, est, err,
                             active, red, count, sums, counts);
}

__global__ void __launch_bounds__(CUB_LANES)
    cub_reclassify(const double *__restrict__ est, const double *__restrict__ err, int *__restrict__ active,
                   unsigned long long n, int mode, double tau, double *__restrict__ sums,
                   unsigned int *__restrict__ counts)
{
    __shared__ double red[CUB_LANES];
    __shared__ unsigned int count[CUB_LANES];
    cub_reclassify_item((int)threadIdx.x, blockIdx.x, n, mode, tau, est, err, active, red, count, sums, counts);
}

__global__ void __launch_bounds__(CUB_LANES)
    cub_probe(const double *__restrict__ err, const int *__restrict__ active, unsigned long long n, double tau,
              double *__restrict__ sums, unsigned int *__restrict__ kept)
{
    __shared__ double red[CUB_LANES];
    __shared__ unsigned int count[CUB_LANES];
    cub_probe_item((int)threadIdx.x, blockIdx.x, n, tau, err, active, red, count, sums, kept);
}

__global__ void __launch_bounds__(CUB_LANES)
    cub_split(const double *__restrict__ bounds, const int *__restrict__ axis, const double *__restrict__ est,
              const int *__restrict__ active, const unsigned int *__restrict__ offsets, unsigned long long n,
              unsigned long long m, int d, double *__restrict__ next, double *__restrict__ parents)
{
    __shared__ unsigned int count[CUB_LANES];
    cub_split_item((int)threadIdx.x, blockIdx.x, n, m, d, bounds, axis, est, active, offsets, next, parents, count);
}

template <int F, int D, int ADAPT>
__global__ void __launch_bounds__(CUB_GROUP)
    cub_mcubes(const double *__restrict__ grid, const double *__restrict__ box, const double *__restrict__ params,
               unsigned long long chunk, unsigned long long n_cubes, int g, int npg, unsigned int iteration,
               unsigned int seed_lo, unsigned int seed_hi, double scale, double *bins, double *__restrict__ partial)
{
    __shared__ double red[2 * CUB_GROUP];
    double sum, var;
    const unsigned long long item = (unsigned long long)blockIdx.x * CUB_GROUP + threadIdx.x;
    cub_mcubes_item(F, D, item, chunk, n_cubes, g, npg, iteration, seed_lo, seed_hi, scale, grid, box, params, ADAPT,
                    bins, &sum, &var);
    cub_group_sum2((int)threadIdx.x, blockIdx.x, sum, var, red, partial);
}

namespace astroport_cuda {
#define CUB_ENTRIES(F, D)                                                                 \
    {"cub_evaluate_" #F "_" #D, reinterpret_cast<const void *>(&cub_evaluate<F, D>)},     \
        {"cub_mcubes_adapt_" #F "_" #D, reinterpret_cast<const void *>(&cub_mcubes<F, D, 1>)}, \
        {"cub_mcubes_frozen_" #F "_" #D, reinterpret_cast<const void *>(&cub_mcubes<F, D, 0>)},
#define CUB_DIMS(F)                                                                                              \
    CUB_ENTRIES(F, 2) CUB_ENTRIES(F, 3) CUB_ENTRIES(F, 4) CUB_ENTRIES(F, 5) CUB_ENTRIES(F, 6) CUB_ENTRIES(F, 7)    \
        CUB_ENTRIES(F, 8) CUB_ENTRIES(F, 9) CUB_ENTRIES(F, 10) CUB_ENTRIES(F, 11) CUB_ENTRIES(F, 12)              \
            CUB_ENTRIES(F, 13) CUB_ENTRIES(F, 14) CUB_ENTRIES(F, 15)
extern const KernelEntry cubature_kernels[] = {
    {"cub_refine_classify", reinterpret_cast<const void *>(&cub_refine_classify)},
    {"cub_reclassify", reinterpret_cast<const void *>(&cub_reclassify)},
    {"cub_probe", reinterpret_cast<const void *>(&cub_probe)},
    {"cub_split", reinterpret_cast<const void *>(&cub_split)},
    CUB_DIMS(0) CUB_DIMS(1) CUB_DIMS(2) CUB_DIMS(3) CUB_DIMS(4) CUB_DIMS(5) CUB_DIMS(6)
};
#undef CUB_DIMS
#undef CUB_ENTRIES
extern const int cubature_kernel_count = sizeof(cubature_kernels) / sizeof(cubature_kernels[0]);
}  // namespace astroport_cuda
