// Spherical harmonic transforms, the Legendre and ring stages, CUDA C++ (float64). Same work per item as
// cl/sht.cl through cl/common/sht.h; each kernel declares its shared memory and computes its indices. Blocks are
// SHT_GROUP threads (SHT_RING_GROUP in the ring stage).
#include "cuda_host.h"
#include "astro_dialect.h"
#include "sht.h"

__global__ void __launch_bounds__(SHT_GROUP)
    sht_synthesis_f64(const double *__restrict__ pair_cs, const int *__restrict__ pair_rings, int npairs,
                      int nrings, int lmax, int m0, int nblocks, const double *__restrict__ cmm,
                      const double *__restrict__ alm, double *__restrict__ delta)
{
    __shared__ double ab[2 * SHT_CHUNK];
    __shared__ double coef[2 * SHT_CHUNK];
    sht_synthesis_item(blockIdx.x, (int)threadIdx.x, pair_cs, pair_rings, npairs, nrings, lmax, m0, nblocks, cmm,
                       alm, delta, ab, coef);
}

__global__ void __launch_bounds__(SHT_GROUP)
    sht_analysis_f64(const double *__restrict__ pair_cs, const int *__restrict__ pair_rings, int npairs, int nrings,
                     int lmax, int m0, int nblocks, const double *__restrict__ cmm, const double *__restrict__ g,
                     double *__restrict__ alm)
{
    __shared__ double ab[2 * SHT_CHUNK];
    __shared__ double contrib[2 * SHT_CHUNK * SHT_CONTRIB_STRIDE];
    __shared__ double halves[4 * SHT_CHUNK];
    sht_analysis_item(blockIdx.x, (int)threadIdx.x, pair_cs, pair_rings, npairs, nrings, lmax, m0, nblocks, cmm,
                      g, alm, ab, contrib, halves);
}

__global__ void __launch_bounds__(SHT_GROUP)
    sht_spin_synthesis_f64(const double *__restrict__ pair_cs, const int *__restrict__ pair_rings, int npairs,
                           int nrings, int lmax, int m0, int nblocks, const double *__restrict__ cmm,
                           const double *__restrict__ alm_e, const double *__restrict__ alm_b,
                           double *__restrict__ delta_q, double *__restrict__ delta_u)
{
    __shared__ double ab[4 * SHT_SPIN_CHUNK];
    __shared__ double coef[4 * SHT_SPIN_CHUNK];
    sht_spin_synthesis_item(blockIdx.x, (int)threadIdx.x, pair_cs, pair_rings, npairs, nrings, lmax, m0, nblocks,
                            cmm, alm_e, alm_b, delta_q, delta_u, ab, coef);
}

__global__ void __launch_bounds__(SHT_GROUP)
    sht_spin_analysis_f64(const double *__restrict__ pair_cs, const int *__restrict__ pair_rings, int npairs,
                          int nrings, int lmax, int m0, int nblocks, const double *__restrict__ cmm,
                          const double *__restrict__ gq, const double *__restrict__ gu, double *__restrict__ alm_e,
                          double *__restrict__ alm_b)
{
    __shared__ double ab[4 * SHT_SPIN_CHUNK];
    __shared__ double contrib[4 * SHT_SPIN_CHUNK * SHT_CONTRIB_STRIDE];
    __shared__ double parts[4 * SHT_GROUP];
    sht_spin_analysis_item(blockIdx.x, (int)threadIdx.x, pair_cs, pair_rings, npairs, nrings, lmax, m0, nblocks, cmm,
                           gq, gu, alm_e, alm_b, ab, contrib, parts);
}

// The ring stage: one block of SHT_RING_GROUP threads per ring, rings ring0.. of one batch.
__global__ void __launch_bounds__(SHT_RING_GROUP)
    sht_ring_synthesis_f64(const int *__restrict__ ring_table, const double *__restrict__ ring_phi0, int ring0,
                           int nrings, int mmax, const double *__restrict__ delta, double *__restrict__ map,
                           double *work)
{
    sht_ring_synthesis_item(ring0 + (int)blockIdx.x, (int)threadIdx.x, SHT_RING_GROUP, ring_table, ring_phi0, nrings,
                            mmax, delta, map, work);
}

__global__ void __launch_bounds__(SHT_RING_GROUP)
    sht_ring_analysis_f64(const int *__restrict__ ring_table, const double *__restrict__ ring_phi0,
                          const double *__restrict__ ring_weight, int ring0, int nrings, int mmax,
                          const double *__restrict__ map, double *__restrict__ g, double *work)
{
    sht_ring_analysis_item(ring0 + (int)blockIdx.x, (int)threadIdx.x, SHT_RING_GROUP, ring_table, ring_phi0,
                           ring_weight, nrings, mmax, map, g, work);
}

namespace astroport_cuda {
#define SHT_ENTRY(k) {#k, reinterpret_cast<const void *>(&k)}
extern const KernelEntry sht_kernels[] = {
    SHT_ENTRY(sht_synthesis_f64),
    SHT_ENTRY(sht_analysis_f64),
    SHT_ENTRY(sht_spin_synthesis_f64),
    SHT_ENTRY(sht_spin_analysis_f64),
    SHT_ENTRY(sht_ring_synthesis_f64),
    SHT_ENTRY(sht_ring_analysis_f64),
};
#undef SHT_ENTRY
extern const int sht_kernel_count = sizeof(sht_kernels) / sizeof(sht_kernels[0]);
}  // namespace astroport_cuda
