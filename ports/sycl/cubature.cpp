// Adaptive cubature kernels, SYCL 2020 free-function kernels compiled at run time by DPC++: PAGANI's Evaluate
// and m-Cubes' sampling for the integrand and dimension given by -D CUB_INTEGRAND/-D CUB_DIM. Same work per
// item as cl/cubature.cl through cl/common/cubature.h.
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "cubature.h"

namespace syclexp = sycl::ext::oneapi::experimental;
#define CUB_KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void
#define CUB_NAME_(base, f, d) base##_##f##_##d
#define CUB_NAME_EXPANDED(base, f, d) CUB_NAME_(base, f, d) /* expands f and d before pasting */
#define CUB_NAME(base) CUB_NAME_EXPANDED(base, CUB_INTEGRAND, CUB_DIM)
static inline sycl::nd_item<1> item() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>(); }

CUB_KERNEL CUB_NAME(cub_evaluate)(const double *bounds, const double *points, const int *set_of, const double *rule,
                                  const double *params, int n_points, uint64_t first, double *out, int *axis)
{
    static syclexp::work_group_static<double[2 * CUB_MAX_DIM]> box;
    static syclexp::work_group_static<double[CUB_GROUP]> f_axis;
    static syclexp::work_group_static<double[CUB_RULES * CUB_GROUP]> red;
    const sycl::nd_item<1> it = item();
    cub_evaluate_item(CUB_INTEGRAND, CUB_DIM, n_points, first + (uint64_t)it.get_group(0), (int)it.get_local_id(0),
                      bounds, points, set_of, rule, params, &box[0], &f_axis[0], &red[0], out, axis);
}

// PAGANI's region list (cubature.h): one work-group of CUB_LANES items per chunk of CUB_CHUNK regions.
CUB_KERNEL cub_refine_classify(const double *est_err, const int *axis, const double *parents, uint64_t n,
                               int has_parents, double epsrel, double *est, double *err, int *active, double *sums,
                               unsigned int *counts)
{
    static syclexp::work_group_static<double[CUB_LANES]> red;
    static syclexp::work_group_static<unsigned int[CUB_LANES]> count;
    const sycl::nd_item<1> it = item();
    cub_refine_classify_item((int)it.get_local_id(0), (unsigned int)it.get_group(0), n, has_parents, epsrel, est_err,
                             axis, parents, est, err, active, &red[0], &count[0], sums, counts);
}

CUB_KERNEL cub_reclassify(const double *est, const double *err, int *active, uint64_t n, int mode, double tau,
                          double *sums, unsigned int *counts)
{
    static syclexp::work_group_static<double[CUB_LANES]> red;
    static syclexp::work_group_static<unsigned int[CUB_LANES]> count;
    const sycl::nd_item<1> it = item();
    cub_reclassify_item((int)it.get_local_id(0), (unsigned int)it.get_group(0), n, mode, tau, est, err, active, &red[0],
                        &count[0], sums, counts);
}

CUB_KERNEL cub_probe(const double *err, const int *active, uint64_t n, double tau, double *sums, unsigned int *kept)
{
    static syclexp::work_group_static<double[CUB_LANES]> red;
    static syclexp::work_group_static<unsigned int[CUB_LANES]> count;
    const sycl::nd_item<1> it = item();
    cub_probe_item((int)it.get_local_id(0), (unsigned int)it.get_group(0), n, tau, err, active, &red[0], &count[0], sums,
                   kept);
}

CUB_KERNEL cub_split(const double *bounds, const int *axis, const double *est, const int *active,
                     const unsigned int *offsets, uint64_t n, uint64_t m, int d, double *next, double *parents)
{
    static syclexp::work_group_static<unsigned int[CUB_LANES]> count;
    const sycl::nd_item<1> it = item();
    cub_split_item((int)it.get_local_id(0), (unsigned int)it.get_group(0), n, m, d, bounds, axis, est, active, offsets,
                   next, parents, &count[0]);
}

#define CUB_MCUBES_KERNEL(NAME, ADAPT)                                                                          \
    CUB_KERNEL CUB_NAME(NAME)(const double *grid, const double *box, const double *params, uint64_t chunk,        \
                              uint64_t n_cubes, int g, int npg, unsigned int iteration, unsigned int seed_lo,    \
                              unsigned int seed_hi, double scale, double *bins, double *partial)                 \
    {                                                                                                           \
        static syclexp::work_group_static<double[2 * CUB_GROUP]> red;                                           \
        const sycl::nd_item<1> it = item();                                                                     \
        double sum, var;                                                                                        \
        cub_mcubes_item(CUB_INTEGRAND, CUB_DIM, (uint64_t)it.get_global_id(0), chunk, n_cubes, g, npg, iteration, \
                        seed_lo, seed_hi, scale, grid, box, params, ADAPT, bins, &sum, &var);                   \
        cub_group_sum2((int)it.get_local_id(0), (unsigned int)it.get_group(0), sum, var, &red[0], partial);     \
    }
CUB_MCUBES_KERNEL(cub_mcubes_adapt, 1)
CUB_MCUBES_KERNEL(cub_mcubes_frozen, 0)
