//! Distributed transforms, as S2HAT distributes them (seed 002; docs/sht.md, "Distributed"): each process
//! owns some m (dealt as the min-max pairs (k, mmax − k), so that processes hold equal Legendre work) and some
//! ring pairs (contiguous in θ, split by pixel count). The Legendre stage runs over the process's m and every
//! ring; one all-to-all moves Δ_m(ring) (synthesis) or G_m(ring) (analysis) between the two distributions;
//! the ring stage runs over the process's rings and every m.
//!
//! The layout and the packing are plain Rust; the exchange needs MPI (cargo feature `mpi`, the `mpi` crate
//! over OpenMPI) and runs under `mpirun`: `astroport sht-mpi`. Each process runs its two stages on its own
//! backend: the `cpu` model, or one device ([`super::device::DeviceSht`]), e.g. one GPU per rank.

use super::grid::RingGrid;

/// Who owns what, for `nranks` processes.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The m of each rank, ascending.
    pub ms: Vec<Vec<usize>>,
    /// The rings (indices into the grid's rings) of each rank, ascending: both rings of each of its pairs.
    pub rings: Vec<Vec<usize>>,
}

impl Layout {
    pub fn new(grid: &RingGrid, mmax: usize, nranks: usize) -> Layout {
        let nranks = nranks.max(1);
        let mut ms = vec![Vec::new(); nranks];
        // Pairs (k, mmax − k) hold equal Legendre work; each rank takes a contiguous block of them, so that its
        // m form at most two contiguous runs (one device launch each).
        let npairs = mmax / 2 + 1;
        for k in 0..npairs {
            let owner = &mut ms[k * nranks / npairs];
            owner.push(k);
            if mmax - k != k {
                owner.push(mmax - k);
            }
        }
        for list in &mut ms {
            list.sort_unstable();
        }
        // Ring pairs in θ order, cut where the running pixel count passes each rank's share.
        let pixels = |p: &super::grid::RingPair| {
            grid.rings[p.north].nphi + p.south.map_or(0, |s| grid.rings[s].nphi)
        };
        let total: usize = grid.pairs.iter().map(pixels).sum();
        let mut rings = vec![Vec::new(); nranks];
        let mut before = 0usize;
        for pair in &grid.pairs {
            let owner = ((before * nranks) / total.max(1)).min(nranks - 1);
            rings[owner].push(pair.north);
            rings[owner].extend(pair.south);
            before += pixels(pair);
        }
        for list in &mut rings {
            list.sort_unstable();
        }
        Layout { ms, rings }
    }

    pub fn ranks(&self) -> usize {
        self.ms.len()
    }

    /// A rank's m as contiguous runs [m0, m1), ascending.
    pub fn m_runs(&self, rank: usize) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &m in &self.ms[rank] {
            match runs.last_mut() {
                Some(last) if last.1 == m => last.1 = m + 1,
                _ => runs.push((m, m + 1)),
            }
        }
        runs
    }
}

/// Seconds spent in each stage by one process (or the slowest process, after a reduction).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct StageTimes {
    pub legendre_s: f64,
    pub all_to_all_s: f64,
    pub rings_s: f64,
    pub total_s: f64,
}

#[cfg(feature = "mpi")]
pub use with_mpi::*;

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::super::alm::Alm;
    use super::super::cpu::{
        legendre_analysis_columns, legendre_synthesis_rows, rings_from_delta, rings_to_phases,
    };
    use super::super::device::DeviceSht;
    use super::super::grid::RingGrid;
    use super::{Layout, StageTimes};
    use crate::backend::Accelerator;
    use crate::exec::RunOptions;
    use mpi::datatype::{Partition, PartitionMut};
    use mpi::traits::*;
    use mpi::Count;
    use realfft::num_complex::Complex64;
    use std::time::Instant;

    /// One process's view of a distributed transform: its rank, its layout, its share of the grid.
    pub struct Process<'a, C: Communicator> {
        pub comm: &'a C,
        pub grid: &'a RingGrid,
        pub layout: Layout,
        pub rank: usize,
        /// The process's rings as a grid of their own (pixels renumbered from 0).
        pub own: RingGrid,
        pub lmax: usize,
        pub mmax: usize,
        /// The device this process runs both stages on; None: the `cpu` model.
        pub device: Option<&'a dyn Accelerator>,
    }

    /// The process's coefficients: blocks l = m..=lmax of its m, in its m order.
    pub type OwnAlm = Vec<Complex64>;

    impl<'a, C: Communicator> Process<'a, C> {
        pub fn new(comm: &'a C, grid: &'a RingGrid, lmax: usize, mmax: usize) -> Self {
            let layout = Layout::new(grid, mmax, comm.size() as usize);
            let rank = comm.rank() as usize;
            let own = grid.subset(&layout.rings[rank]);
            Process {
                comm,
                grid,
                layout,
                rank,
                own,
                lmax,
                mmax,
                device: None,
            }
        }

        /// Runs both stages of this process on `device` (one GPU per rank, or any device).
        pub fn on_device(mut self, device: &'a dyn Accelerator) -> Self {
            self.device = Some(device);
            self
        }

        /// A transform object on this process's device for `grid` (the whole grid for the Legendre stage,
        /// its own rings for the ring stage).
        fn device_sht<'g>(&self, grid: &'g RingGrid) -> Result<Option<DeviceSht<'g>>, String>
        where
            'a: 'g,
        {
            self.device
                .map(|dev| {
                    DeviceSht::new(dev, grid, &RunOptions::single_shot()).map_err(|e| e.to_string())
                })
                .transpose()
        }

        /// This process's share of full coefficients.
        pub fn own_alm(&self, alm: &Alm) -> OwnAlm {
            self.layout.ms[self.rank]
                .iter()
                .flat_map(|&m| alm.m_slice(m).iter().copied())
                .collect()
        }

        /// This process's pixels of a full map.
        pub fn own_pixels(&self, map: &[f64]) -> Vec<f64> {
            self.layout.rings[self.rank]
                .iter()
                .flat_map(|&k| {
                    let r = &self.grid.rings[k];
                    map[r.offset..r.offset + r.nphi].iter().copied()
                })
                .collect()
        }

        /// Synthesis: the pixels of this process's rings from the coefficients of its m.
        pub fn alm2map(
            &self,
            own_alm: &[Complex64],
            times: &mut StageTimes,
        ) -> Result<Vec<f64>, String> {
            let start = Instant::now();
            let ms = &self.layout.ms[self.rank];
            // Δ of my m (row order) at every ring, m-major.
            let delta = match self.device_sht(self.grid)? {
                None => {
                    let mut rows = Vec::with_capacity(ms.len());
                    let mut at = 0;
                    for &m in ms {
                        rows.push((m, &own_alm[at..at + self.lmax + 1 - m]));
                        at += self.lmax + 1 - m;
                    }
                    legendre_synthesis_rows(self.grid, self.lmax, &rows)
                }
                Some(mut sht) => {
                    let mut delta = Vec::new();
                    let mut at = 0;
                    for (m0, m1) in self.layout.m_runs(self.rank) {
                        let n: usize = (m0..m1).map(|m| self.lmax + 1 - m).sum();
                        delta.extend(
                            sht.synthesis_band(&own_alm[at..at + n], self.lmax, (m0, m1))
                                .map_err(|e| e.to_string())?,
                        );
                        at += n;
                    }
                    delta
                }
            };
            let t1 = Instant::now();
            // To rank q: Δ of my m (row order) at q's rings (ring order).
            let nr = self.grid.rings.len();
            let send_counts: Vec<usize> = self
                .layout
                .rings
                .iter()
                .map(|r| 2 * ms.len() * r.len())
                .collect();
            let mut send = Vec::with_capacity(send_counts.iter().sum());
            for rings in &self.layout.rings {
                for row in 0..ms.len() {
                    for &k in rings {
                        let d = delta[row * nr + k];
                        send.extend([d.re, d.im]);
                    }
                }
            }
            let mine = self.layout.rings[self.rank].len();
            let recv_counts: Vec<usize> =
                self.layout.ms.iter().map(|m| 2 * m.len() * mine).collect();
            let recv = self.exchange(&send, &send_counts, &recv_counts);
            let t2 = Instant::now();
            // Δ for every m at my rings, m-major as the ring stage reads it.
            let mut local = vec![Complex64::new(0.0, 0.0); (self.mmax + 1) * mine];
            let mut at = 0;
            for their_ms in &self.layout.ms {
                for &m in their_ms {
                    for j in 0..mine {
                        local[m * mine + j] = Complex64::new(recv[at], recv[at + 1]);
                        at += 2;
                    }
                }
            }
            let pixels = match self.device_sht(&self.own)? {
                None => rings_from_delta(&self.own, self.mmax, &local),
                Some(mut sht) => sht
                    .rings_from_delta(&local, self.mmax)
                    .map_err(|e| e.to_string())?,
            };
            let t3 = Instant::now();
            times.legendre_s += (t1 - start).as_secs_f64();
            times.all_to_all_s += (t2 - t1).as_secs_f64();
            times.rings_s += (t3 - t2).as_secs_f64();
            times.total_s += (t3 - start).as_secs_f64();
            Ok(pixels)
        }

        /// Adjoint synthesis: the coefficients of this process's m from the pixels of its rings.
        pub fn adjoint(
            &self,
            own_pixels: &[f64],
            times: &mut StageTimes,
        ) -> Result<OwnAlm, String> {
            let start = Instant::now();
            let nm = self.mmax + 1;
            let mine = self.layout.rings[self.rank].len();
            // G of my rings for every m: ring-major from the cpu model, m-major from a device.
            let (g, m_major) = match self.device_sht(&self.own)? {
                None => (rings_to_phases(&self.own, own_pixels, self.mmax), false),
                Some(mut sht) => (
                    sht.rings_to_phases(own_pixels, self.mmax)
                        .map_err(|e| e.to_string())?,
                    true,
                ),
            };
            let phase = |j: usize, m: usize| {
                if m_major {
                    g[m * mine + j]
                } else {
                    g[j * nm + m]
                }
            };
            let t1 = Instant::now();
            // To rank q: G at my rings (ring order) for q's m (m order).
            let send_counts: Vec<usize> =
                self.layout.ms.iter().map(|m| 2 * m.len() * mine).collect();
            let mut send = Vec::with_capacity(send_counts.iter().sum());
            for their_ms in &self.layout.ms {
                for j in 0..mine {
                    for &m in their_ms {
                        let v = phase(j, m);
                        send.extend([v.re, v.im]);
                    }
                }
            }
            let ms = &self.layout.ms[self.rank];
            let recv_counts: Vec<usize> = self
                .layout
                .rings
                .iter()
                .map(|r| 2 * ms.len() * r.len())
                .collect();
            let recv = self.exchange(&send, &send_counts, &recv_counts);
            let t2 = Instant::now();
            // G for my m at every ring: ring-major with my m as columns for the cpu model, m-major (a row of
            // every ring per m, so each run of m is one slice) for a device.
            let nr = self.grid.rings.len();
            let device = self.device_sht(self.grid)?;
            let at_index = |k: usize, col: usize| {
                if device.is_some() {
                    col * nr + k
                } else {
                    k * ms.len() + col
                }
            };
            let mut full = vec![Complex64::new(0.0, 0.0); nr * ms.len()];
            let mut at = 0;
            for rings in &self.layout.rings {
                for &k in rings {
                    for col in 0..ms.len() {
                        full[at_index(k, col)] = Complex64::new(recv[at], recv[at + 1]);
                        at += 2;
                    }
                }
            }
            let coeffs = match device {
                None => legendre_analysis_columns(self.grid, &full, self.lmax, ms),
                Some(mut sht) => {
                    let mut coeffs = Vec::new();
                    let mut col = 0;
                    for (m0, m1) in self.layout.m_runs(self.rank) {
                        let rows = &full[col * nr..(col + m1 - m0) * nr];
                        coeffs.extend(
                            sht.analysis_band(rows, self.lmax, (m0, m1))
                                .map_err(|e| e.to_string())?,
                        );
                        col += m1 - m0;
                    }
                    coeffs
                }
            };
            let t3 = Instant::now();
            times.rings_s += (t1 - start).as_secs_f64();
            times.all_to_all_s += (t2 - t1).as_secs_f64();
            times.legendre_s += (t3 - t2).as_secs_f64();
            times.total_s += (t3 - start).as_secs_f64();
            Ok(coeffs)
        }

        /// Analysis with `iter` Jacobi refinements, every step distributed.
        pub fn map2alm(
            &self,
            own_pixels: &[f64],
            iter: usize,
            times: &mut StageTimes,
        ) -> Result<OwnAlm, String> {
            let mut alm = self.adjoint(own_pixels, times)?;
            for _ in 0..iter {
                let model = self.alm2map(&alm, times)?;
                let residual: Vec<f64> =
                    own_pixels.iter().zip(&model).map(|(f, g)| f - g).collect();
                let correction = self.adjoint(&residual, times)?;
                for (a, c) in alm.iter_mut().zip(&correction) {
                    *a += c;
                }
            }
            Ok(alm)
        }

        /// The full map on rank 0 (None elsewhere).
        pub fn gather_map(&self, own_pixels: &[f64]) -> Option<Vec<f64>> {
            let counts: Vec<usize> = self
                .layout
                .rings
                .iter()
                .map(|rings| rings.iter().map(|&k| self.grid.rings[k].nphi).sum())
                .collect();
            let flat = self.gather(own_pixels, &counts)?;
            let mut map = vec![0.0; self.grid.npix];
            let mut at = 0;
            for rings in &self.layout.rings {
                for &k in rings {
                    let r = &self.grid.rings[k];
                    map[r.offset..r.offset + r.nphi].copy_from_slice(&flat[at..at + r.nphi]);
                    at += r.nphi;
                }
            }
            Some(map)
        }

        /// The full coefficients on rank 0 (None elsewhere).
        pub fn gather_alm(&self, own: &[Complex64]) -> Option<Alm> {
            let counts: Vec<usize> = self
                .layout
                .ms
                .iter()
                .map(|ms| 2 * ms.iter().map(|&m| self.lmax + 1 - m).sum::<usize>())
                .collect();
            let send: Vec<f64> = own.iter().flat_map(|c| [c.re, c.im]).collect();
            let flat = self.gather(&send, &counts)?;
            let mut alm = Alm::zeros(self.lmax, self.mmax);
            let mut at = 0;
            for ms in &self.layout.ms {
                for &m in ms {
                    for l in m..=self.lmax {
                        let i = alm.index(l, m);
                        alm.coeffs[i] = Complex64::new(flat[at], flat[at + 1]);
                        at += 2;
                    }
                }
            }
            Some(alm)
        }

        /// The slowest process's times, on every process.
        pub fn slowest(&self, t: &StageTimes) -> StageTimes {
            let mine = [t.legendre_s, t.all_to_all_s, t.rings_s, t.total_s];
            let mut max = [0.0f64; 4];
            self.comm.all_reduce_into(
                &mine[..],
                &mut max[..],
                mpi::collective::SystemOperation::max(),
            );
            StageTimes {
                legendre_s: max[0],
                all_to_all_s: max[1],
                rings_s: max[2],
                total_s: max[3],
            }
        }

        fn exchange(&self, send: &[f64], send_counts: &[usize], recv_counts: &[usize]) -> Vec<f64> {
            let (sc, sd) = counts_and_displacements(send_counts);
            let (rc, rd) = counts_and_displacements(recv_counts);
            let mut recv = vec![0.0; recv_counts.iter().sum()];
            {
                let s = Partition::new(send, &sc[..], &sd[..]);
                let mut r = PartitionMut::new(&mut recv[..], &rc[..], &rd[..]);
                self.comm.all_to_all_varcount_into(&s, &mut r);
            }
            recv
        }

        fn gather(&self, send: &[f64], counts: &[usize]) -> Option<Vec<f64>> {
            let root = self.comm.process_at_rank(0);
            if self.rank == 0 {
                let (c, d) = counts_and_displacements(counts);
                let mut out = vec![0.0; counts.iter().sum()];
                {
                    let mut r = PartitionMut::new(&mut out[..], &c[..], &d[..]);
                    root.gather_varcount_into_root(send, &mut r);
                }
                Some(out)
            } else {
                root.gather_varcount_into(send);
                None
            }
        }
    }

    /// MPI's counts and displacements (32-bit: a message above 2^31 elements is out of MPI's range).
    fn counts_and_displacements(counts: &[usize]) -> (Vec<Count>, Vec<Count>) {
        let mut displs = Vec::with_capacity(counts.len());
        let mut at = 0usize;
        for &c in counts {
            displs.push(Count::try_from(at).expect("an MPI message above 2^31 elements"));
            at += c;
        }
        let counts = counts
            .iter()
            .map(|&c| Count::try_from(c).expect("an MPI message above 2^31 elements"))
            .collect();
        (counts, displs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_m_and_ring_has_one_owner_and_work_is_balanced() {
        let grid = RingGrid::healpix(64).unwrap();
        for nranks in [1usize, 2, 3, 5] {
            let l = Layout::new(&grid, 128, nranks);
            let mut ms: Vec<usize> = l.ms.iter().flatten().copied().collect();
            ms.sort_unstable();
            assert_eq!(ms, (0..=128).collect::<Vec<_>>());
            let mut rings: Vec<usize> = l.rings.iter().flatten().copied().collect();
            rings.sort_unstable();
            assert_eq!(rings, (0..grid.rings.len()).collect::<Vec<_>>());
            // Legendre work (number of (l, m)) and pixels within 10 % of the mean.
            let work: Vec<usize> =
                l.ms.iter()
                    .map(|ms| ms.iter().map(|&m| 129 - m).sum())
                    .collect();
            let pixels: Vec<usize> = l
                .rings
                .iter()
                .map(|r| r.iter().map(|&k| grid.rings[k].nphi).sum())
                .collect();
            for v in [work, pixels] {
                let mean = v.iter().sum::<usize>() as f64 / nranks as f64;
                assert!(
                    v.iter().all(|&x| (x as f64 - mean).abs() <= 0.1 * mean),
                    "{nranks} ranks: {v:?}"
                );
            }
        }
    }

    #[test]
    fn each_rank_has_at_most_two_runs_of_m() {
        let grid = RingGrid::healpix(8).unwrap();
        for (mmax, nranks) in [(128usize, 3usize), (127, 2), (20, 7), (8, 9)] {
            let l = Layout::new(&grid, mmax, nranks);
            for rank in 0..nranks {
                let runs = l.m_runs(rank);
                assert!(runs.len() <= 2, "mmax {mmax}, rank {rank}: {runs:?}");
                let from_runs: Vec<usize> = runs.iter().flat_map(|&(a, b)| a..b).collect();
                assert_eq!(from_runs, l.ms[rank]);
            }
        }
    }

    #[test]
    fn more_ranks_than_work_leaves_some_ranks_empty_but_covers_everything() {
        // 5 m pairs (mmax 8) and 2 ring pairs (nside 1: one mirrored pair and the equator) over 9 ranks.
        let grid = RingGrid::healpix(1).unwrap();
        let l = Layout::new(&grid, 8, 9);
        assert_eq!(l.ranks(), 9);
        let mut ms: Vec<usize> = l.ms.iter().flatten().copied().collect();
        ms.sort_unstable();
        assert_eq!(ms, (0..=8).collect::<Vec<_>>());
        let mut rings: Vec<usize> = l.rings.iter().flatten().copied().collect();
        rings.sort_unstable();
        assert_eq!(rings, vec![0, 1, 2]);
        assert!(l.ms.iter().any(|m| m.is_empty()) && l.rings.iter().any(|r| r.is_empty()));
    }
}
