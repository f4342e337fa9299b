// Spherical harmonic transforms, the Legendre and ring stages, SYCL 2020 free-function kernels compiled at run
// time by DPC++ (float64). Same work per item as cl/sht.cl through cl/common/sht.h. Local memory is a function-scope
// work_group_static variable (group_local_memory_for_overwrite crashed Intel's CPU back end).
#include <sycl/sycl.hpp>
#include "astro_dialect.h"
#include "sht.h"

namespace syclexp = sycl::ext::oneapi::experimental;
#define SHT_KERNEL extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>)) void
static inline sycl::nd_item<1> item() { return sycl::ext::oneapi::this_work_item::get_nd_item<1>(); }

SHT_KERNEL sht_synthesis_f64(const double *pair_cs, const int *pair_rings, int npairs, int nrings, int lmax, int m0,
                             int nblocks, const double *cmm, const double *alm, double *delta)
{
    static syclexp::work_group_static<double[2 * SHT_CHUNK]> ab;
    static syclexp::work_group_static<double[2 * SHT_CHUNK]> coef;
    const sycl::nd_item<1> it = item();
    sht_synthesis_item((unsigned int)it.get_group(0), (int)it.get_local_id(0), pair_cs, pair_rings, npairs, nrings,
                       lmax, m0, nblocks, cmm, alm, delta, &ab[0], &coef[0]);
}

SHT_KERNEL sht_analysis_f64(const double *pair_cs, const int *pair_rings, int npairs, int nrings, int lmax, int m0,
                            int nblocks, const double *cmm, const double *g, double *alm)
{
    static syclexp::work_group_static<double[2 * SHT_CHUNK]> ab;
    static syclexp::work_group_static<double[2 * SHT_CHUNK * SHT_CONTRIB_STRIDE]> contrib;
    static syclexp::work_group_static<double[4 * SHT_CHUNK]> halves;
    const sycl::nd_item<1> it = item();
    sht_analysis_item((unsigned int)it.get_group(0), (int)it.get_local_id(0), pair_cs, pair_rings, npairs, nrings, lmax,
                      m0, nblocks, cmm, g, alm, &ab[0], &contrib[0], &halves[0]);
}

SHT_KERNEL sht_spin_synthesis_f64(const double *pair_cs, const int *pair_rings, int npairs, int nrings, int lmax,
                                  int m0, int nblocks, const double *cmm, const double *alm_e, const double *alm_b,
                                  double *delta_q, double *delta_u)
{
    static syclexp::work_group_static<double[4 * SHT_SPIN_CHUNK]> ab;
    static syclexp::work_group_static<double[4 * SHT_SPIN_CHUNK]> coef;
    const sycl::nd_item<1> it = item();
    sht_spin_synthesis_item((unsigned int)it.get_group(0), (int)it.get_local_id(0), pair_cs, pair_rings, npairs,
                            nrings, lmax, m0, nblocks, cmm, alm_e, alm_b, delta_q, delta_u, &ab[0], &coef[0]);
}

SHT_KERNEL sht_spin_analysis_f64(const double *pair_cs, const int *pair_rings, int npairs, int nrings, int lmax,
                                 int m0, int nblocks, const double *cmm, const double *gq, const double *gu,
                                 double *alm_e, double *alm_b)
{
    static syclexp::work_group_static<double[4 * SHT_SPIN_CHUNK]> ab;
    static syclexp::work_group_static<double[4 * SHT_SPIN_CHUNK * SHT_CONTRIB_STRIDE]> contrib;
    static syclexp::work_group_static<double[4 * SHT_GROUP]> parts;
    const sycl::nd_item<1> it = item();
    sht_spin_analysis_item((unsigned int)it.get_group(0), (int)it.get_local_id(0), pair_cs, pair_rings, npairs,
                           nrings, lmax, m0, nblocks, cmm, gq, gu, alm_e, alm_b, &ab[0], &contrib[0], &parts[0]);
}

// The ring stage: one work-group of SHT_RING_GROUP items per ring, rings ring0.. of one batch (global memory
// only).
SHT_KERNEL sht_ring_synthesis_f64(const int *ring_table, const double *ring_phi0, int ring0, int nrings, int mmax,
                                  const double *delta, double *map, double *work)
{
    const sycl::nd_item<1> it = item();
    sht_ring_synthesis_item(ring0 + (int)it.get_group(0), (int)it.get_local_id(0), SHT_RING_GROUP, ring_table,
                            ring_phi0, nrings, mmax, delta, map, work);
}

SHT_KERNEL sht_ring_analysis_f64(const int *ring_table, const double *ring_phi0, const double *ring_weight, int ring0,
                                 int nrings, int mmax, const double *map, double *g, double *work)
{
    const sycl::nd_item<1> it = item();
    sht_ring_analysis_item(ring0 + (int)it.get_group(0), (int)it.get_local_id(0), SHT_RING_GROUP, ring_table,
                           ring_phi0, ring_weight, nrings, mmax, map, g, work);
}
