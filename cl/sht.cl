/* Spherical harmonic transforms, the Legendre and ring stages, OpenCL C 1.2 (float64 only). Each kernel declares
 * its local memory and computes its indices; the work of one item is in cl/common/sht.h, identical in the three
 * dialects. Work-groups are SHT_GROUP wide (SHT_RING_GROUP for the ring stage); the host launches exactly that. */
#include "astro_dialect.h"
#include "sht.h"

#if ASTRO_HAS_FP64
__kernel void sht_synthesis_f64(__global const double *restrict pair_cs, __global const int *restrict pair_rings,
                                const int npairs, const int nrings, const int lmax, const int m0, const int nblocks,
                                __global const double *restrict cmm, __global const double *restrict alm,
                                __global double *restrict delta)
{
    __local double ab[2 * SHT_CHUNK];
    __local double coef[2 * SHT_CHUNK];
    sht_synthesis_item((unsigned int)get_group_id(0), (int)get_local_id(0), pair_cs, pair_rings, npairs, nrings,
                       lmax, m0, nblocks, cmm, alm, delta, ab, coef);
}

__kernel void sht_analysis_f64(__global const double *restrict pair_cs, __global const int *restrict pair_rings,
                               const int npairs, const int nrings, const int lmax, const int m0, const int nblocks,
                               __global const double *restrict cmm, __global const double *restrict g,
                               __global double *restrict alm)
{
    __local double ab[2 * SHT_CHUNK];
    __local double contrib[2 * SHT_CHUNK * SHT_CONTRIB_STRIDE];
    __local double halves[4 * SHT_CHUNK];
    sht_analysis_item((unsigned int)get_group_id(0), (int)get_local_id(0), pair_cs, pair_rings, npairs, nrings, lmax,
                      m0, nblocks, cmm, g, alm, ab, contrib, halves);
}

__kernel void sht_spin_synthesis_f64(__global const double *restrict pair_cs, __global const int *restrict pair_rings,
                                     const int npairs, const int nrings, const int lmax, const int m0,
                                     const int nblocks, __global const double *restrict cmm,
                                     __global const double *restrict alm_e, __global const double *restrict alm_b,
                                     __global double *restrict delta_q, __global double *restrict delta_u)
{
    __local double ab[4 * SHT_SPIN_CHUNK];
    __local double coef[4 * SHT_SPIN_CHUNK];
    sht_spin_synthesis_item((unsigned int)get_group_id(0), (int)get_local_id(0), pair_cs, pair_rings, npairs, nrings,
                            lmax, m0, nblocks, cmm, alm_e, alm_b, delta_q, delta_u, ab, coef);
}

__kernel void sht_spin_analysis_f64(__global const double *restrict pair_cs, __global const int *restrict pair_rings,
                                    const int npairs, const int nrings, const int lmax, const int m0, const int nblocks,
                                    __global const double *restrict cmm, __global const double *restrict gq,
                                    __global const double *restrict gu, __global double *restrict alm_e,
                                    __global double *restrict alm_b)
{
    __local double ab[4 * SHT_SPIN_CHUNK];
    __local double contrib[4 * SHT_SPIN_CHUNK * SHT_CONTRIB_STRIDE];
    __local double parts[4 * SHT_GROUP];
    sht_spin_analysis_item((unsigned int)get_group_id(0), (int)get_local_id(0), pair_cs, pair_rings, npairs, nrings,
                           lmax, m0, nblocks, cmm, gq, gu, alm_e, alm_b, ab, contrib, parts);
}

/* The ring stage: one work-group of SHT_RING_GROUP items per ring, rings ring0.. of one batch. */
__kernel void sht_ring_synthesis_f64(__global const int *restrict ring_table, __global const double *restrict ring_phi0,
                                     const int ring0, const int nrings, const int mmax,
                                     __global const double *restrict delta, __global double *restrict map,
                                     __global double *work)
{
    sht_ring_synthesis_item(ring0 + (int)get_group_id(0), (int)get_local_id(0), SHT_RING_GROUP, ring_table, ring_phi0,
                            nrings, mmax, delta, map, work);
}

__kernel void sht_ring_analysis_f64(__global const int *restrict ring_table, __global const double *restrict ring_phi0,
                                    __global const double *restrict ring_weight, const int ring0, const int nrings,
                                    const int mmax, __global const double *restrict map, __global double *restrict g,
                                    __global double *work)
{
    sht_ring_analysis_item(ring0 + (int)get_group_id(0), (int)get_local_id(0), SHT_RING_GROUP, ring_table, ring_phi0,
                           ring_weight, nrings, mmax, map, g, work);
}
#endif
