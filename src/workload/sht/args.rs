//! Spherical harmonics' command-line flags: `run sht`, one problem per transform of a preset.

use super::cpu::check_analysis;
use super::io::{read_alm_fits, read_healpix_map, write_alm_fits, write_healpix_map};
use super::{
    alm2map_on, alm2map_spin2_on, map2alm_on, map2alm_spin2_on, RingGrid, ShtProblem, Transform,
    PRESETS,
};
use crate::backend::Precision;
use crate::workload::{OneBackendArgs, Tool, ToolArgs, WorkloadArgs};
use std::path::PathBuf;

/// `--transform`: synthesis or analysis.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransformArg {
    Alm2map,
    Map2alm,
}

/// `astroport run sht`: the presets' transforms, verified against the float64 `cpu` reference.
#[derive(clap::Args, Debug, Clone)]
pub struct ShtArgs {
    /// Problem: tiny (HEALPix nside 32, lmax 64: the oracle's size), ci (nside 256, lmax 512), planck (nside
    /// 2048, lmax 4096), highl (Gauss-Legendre, lmax 8192).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    /// Transforms, comma-separated or repeated.
    #[arg(long = "transform", value_delimiter = ',', default_values = ["alm2map", "map2alm"])]
    pub transforms: Vec<TransformArg>,
    /// Jacobi refinements of map2alm (healpy's iter; 0 times one transform, the bench's case).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub iter: u32,
    /// Cap on device memory in MiB, below what the device reports (forces tiling into bands of m).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
    /// Spin of the fields: 0 (temperature) or 2 (polarisation: E, B <-> Q, U).
    #[arg(long, default_value = "0", value_parser = ["0", "2"])]
    pub spin: String,
}

impl WorkloadArgs for ShtArgs {
    const NAME: &'static str = "sht";
    const ABOUT: &'static str =
        "Spherical harmonic transforms (S2HAT): alm2map and map2alm on HEALPix and Gauss-Legendre rings";
    const PRESETS: &'static [&'static str] = &PRESETS;
    const TOOLS: &'static [Tool] = &[Tool::of::<ShtToolArgs>(), Tool::of::<ShtMpiArgs>()];
    type Workload = ShtProblem;
    fn build(&self) -> Result<Vec<ShtProblem>, String> {
        let cap = crate::workload::mib_flag("--device-mem-mib", self.device_mem_mib)?;
        self.transforms
            .iter()
            .map(|t| {
                let transform = match t {
                    TransformArg::Alm2map => Transform::Alm2Map,
                    TransformArg::Map2alm => Transform::Map2Alm {
                        iter: self.iter as usize,
                    },
                };
                let mut problem = ShtProblem::preset(&self.preset, transform)?;
                if self.spin == "2" {
                    problem = problem.spin2()?;
                }
                problem.device_mem_cap = cap;
                Ok(problem)
            })
            .collect()
    }
    fn modes(&self) -> Vec<Precision> {
        vec![Precision::F64]
    }
}

/// `astroport sht alm2map|map2alm`: one transform of a healpy FITS file on one backend.
#[derive(clap::Args, Debug, Clone)]
pub struct ShtToolArgs {
    /// alm2map: a_lm file (healpy's write_alm) to a HEALPix map; map2alm: map (healpy's write_map, RING or
    /// NESTED) to a_lm.
    #[arg(value_enum)]
    pub direction: TransformArg,
    /// Input FITS file.
    #[arg(long = "in")]
    pub input: PathBuf,
    /// Output FITS file (written only when everything succeeded; replaced atomically).
    #[arg(long = "out")]
    pub output: PathBuf,
    /// Largest degree. alm2map: must equal the file's.
    #[arg(long)]
    pub lmax: usize,
    /// Largest order (map2alm; default lmax).
    #[arg(long)]
    pub mmax: Option<usize>,
    /// HEALPix resolution of the map to make (alm2map).
    #[arg(long)]
    pub nside: Option<usize>,
    /// Jacobi refinements of map2alm (healpy's iter, whose default is 3).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub iter: u32,
    /// Polarisation: T, E, B (three a_lm HDUs) <-> T, Q, U (three map columns), healpy's convention.
    #[arg(long)]
    pub pol: bool,
    #[command(flatten)]
    pub backend: OneBackendArgs,
}

impl ToolArgs for ShtToolArgs {
    const NAME: &'static str = "sht";
    const ABOUT: &'static str =
        "Spherical harmonic transforms of healpy FITS files: alm2map (a_lm -> map) and map2alm (map -> a_lm)";
    fn run(self) -> Result<i32, String> {
        let input = self.input.display().to_string();
        let fields = if self.pol { 3 } else { 1 };
        // Inputs are read and checked before any backend is looked for.
        match self.direction {
            TransformArg::Alm2map => {
                let nside = self
                    .nside
                    .ok_or("--nside: alm2map needs the resolution of the map to make")?;
                let sets = read_alm_fits(&self.input).map_err(|e| e.to_string())?;
                if sets.len() < fields {
                    return Err(format!(
                        "{input}: {} a_lm HDU(s), --pol needs 3 (T, E, B)",
                        sets.len()
                    ));
                }
                for (k, alm) in sets.iter().take(fields).enumerate() {
                    if alm.lmax != self.lmax {
                        return Err(format!(
                            "{input}: HDU {}: the a_lm go to l = {} (INDEX, MAX-LPOL), --lmax is {}",
                            k + 1,
                            alm.lmax,
                            self.lmax
                        ));
                    }
                }
                warn_lmax(self.lmax, nside);
                let grid = RingGrid::healpix(nside).map_err(|e| format!("--nside: {e}"))?;
                let discovery = self.backend.discovery()?;
                let target = self.backend.target(&discovery)?;
                let m = alm2map_on(target, &grid, &sets[0], &self.backend.options(), None)
                    .map_err(|e| format!("alm2map on {}: {e}", target.id()))?;
                report("alm2map", &grid, self.lmax, target.id(), m.times.median);
                let mut maps = vec![("TEMPERATURE", m.output)];
                if self.pol {
                    let pol = alm2map_spin2_on(
                        target,
                        &grid,
                        (&sets[1], &sets[2]),
                        &self.backend.options(),
                        None,
                    )
                    .map_err(|e| format!("{input}: E/B on {}: {e}", target.id()))?;
                    report(
                        "alm2map spin-2",
                        &grid,
                        self.lmax,
                        target.id(),
                        pol.times.median,
                    );
                    let (q, u) = pol.output;
                    maps.push(("Q_POLARISATION", q));
                    maps.push(("U_POLARISATION", u));
                }
                let columns: Vec<(&str, &[f64])> =
                    maps.iter().map(|(n, v)| (*n, v.as_slice())).collect();
                write_healpix_map(&self.output, nside, false, &columns)
                    .map_err(|e| e.to_string())?;
            }
            TransformArg::Map2alm => {
                let map = read_healpix_map(&self.input, fields).map_err(|e| e.to_string())?;
                let mmax = self.mmax.unwrap_or(self.lmax);
                if mmax > self.lmax {
                    return Err(format!("--mmax {mmax} is above --lmax {}", self.lmax));
                }
                warn_lmax(self.lmax, map.nside);
                let grid = RingGrid::healpix(map.nside)?;
                // The transforms' own check, run before any backend is looked for.
                for (name, pixels) in &map.fields {
                    check_analysis(&grid, pixels, self.lmax, mmax)
                        .map_err(|e| format!("{input}, column '{name}': {e}"))?;
                }
                let discovery = self.backend.discovery()?;
                let target = self.backend.target(&discovery)?;
                let iter = self.iter as usize;
                let m = map2alm_on(
                    target,
                    &grid,
                    &map.fields[0].1,
                    (self.lmax, mmax, iter),
                    &self.backend.options(),
                    None,
                )
                .map_err(|e| format!("{input}, column '{}': {e}", map.fields[0].0))?;
                report("map2alm", &grid, self.lmax, target.id(), m.times.median);
                let mut sets = vec![m.output];
                if self.pol {
                    let pol = map2alm_spin2_on(
                        target,
                        &grid,
                        (&map.fields[1].1, &map.fields[2].1),
                        (self.lmax, mmax, iter),
                        &self.backend.options(),
                        None,
                    )
                    .map_err(|e| format!("{input}, Q/U on {}: {e}", target.id()))?;
                    report(
                        "map2alm spin-2",
                        &grid,
                        self.lmax,
                        target.id(),
                        pol.times.median,
                    );
                    let (e, b) = pol.output;
                    sets.push(e);
                    sets.push(b);
                }
                let refs: Vec<&super::Alm> = sets.iter().collect();
                write_alm_fits(&self.output, &refs).map_err(|e| e.to_string())?;
            }
        }
        crate::say!("wrote {}", self.output.display());
        Ok(0)
    }
}

/// healpy's limit of a useful lmax: above 3 nside − 1 the map cannot hold the degrees (aliasing).
fn warn_lmax(lmax: usize, nside: usize) {
    if lmax > 3 * nside - 1 {
        eprintln!(
            "warning: --lmax {lmax} is above 3 nside - 1 = {} for nside {nside}: degrees above it alias",
            3 * nside - 1
        );
    }
}

fn report(what: &str, grid: &RingGrid, lmax: usize, target: String, seconds: f64) {
    crate::say!(
        "sht {what}: {}, lmax {lmax} on {target}: {:.3} ms",
        grid.describe(),
        seconds * 1e3
    );
}

/// `astroport sht-mpi`: a preset's transform distributed over the processes of `mpirun` as S2HAT distributes
/// it (docs/sht.md, "Distributed"), checked on rank 0 against the single-process transform.
#[derive(clap::Args, Debug, Clone)]
pub struct ShtMpiArgs {
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    #[arg(long, value_enum, default_value = "alm2map")]
    pub transform: TransformArg,
    /// Jacobi refinements of map2alm.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub iter: u32,
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Threads per process (default: the node's cores shared among the processes on it).
    #[arg(long)]
    pub threads: Option<usize>,
    /// What every process runs its stages on: `cpu`, a device model (`cuda`, `opencl`, `sycl`: the process
    /// with node-local rank r takes that model's device r mod count, one GPU per rank), or one device id.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// JSON Lines file rank 0 appends its record to.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Relative tolerance of a distributed result against the single-process one (issue 14: 1e-13).
pub const TOL_DISTRIBUTED_REL: f64 = 1e-13;

impl ToolArgs for ShtMpiArgs {
    const NAME: &'static str = "sht-mpi";
    const ABOUT: &'static str =
        "Spherical harmonic transforms distributed over MPI processes (run under mpirun; needs the mpi feature)";
    fn run(self) -> Result<i32, String> {
        #[cfg(feature = "mpi")]
        {
            mpi_run::run(&self)
        }
        #[cfg(not(feature = "mpi"))]
        {
            Err(format!(
                "sht-mpi ({} {}): this binary was built without the `mpi` cargo feature; build with \
                 `cargo build --release --features mpi` (OpenMPI: scripts/setup.sh) and run under mpirun",
                self.preset,
                match self.transform {
                    TransformArg::Alm2map => "alm2map",
                    TransformArg::Map2alm => "map2alm",
                }
            ))
        }
    }
}

#[cfg(feature = "mpi")]
mod mpi_run {
    use super::super::distributed::{Process, StageTimes};
    use super::super::{rel_l2, relative_errors};
    use super::{ShtMpiArgs, ShtProblem, Transform, TransformArg, TOL_DISTRIBUTED_REL};
    use crate::backend::{
        discover, median, Accelerator, Choice, Discovery, Model, Selector, Target,
    };
    use crate::workload::Workload;
    use mpi::traits::*;

    /// The device of the process with node-local rank `local_rank` for `--backend` (None: the cpu model).
    fn rank_device<'d>(
        d: &'d Discovery,
        backend: &str,
        local_rank: usize,
    ) -> Result<Option<&'d dyn Accelerator>, String> {
        let sel: Selector = backend.parse()?;
        if sel.model == Model::Cpu {
            return Ok(None);
        }
        let mut found = Vec::new();
        for choice in d.select(&[sel]) {
            match choice {
                Choice::Run(Target::Device(dev)) => found.push(dev.as_ref()),
                Choice::Run(Target::Cpu(_)) => {}
                Choice::Absent(a) => {
                    return Err(format!("{}: {}: {}", a.id, a.why.status(), a.reason))
                }
            }
        }
        if found.is_empty() {
            return Err(format!(
                "no device for --backend {backend} (see `astroport devices`)"
            ));
        }
        Ok(Some(found[local_rank % found.len()]))
    }

    /// Prints why and ends every process of the job (exit status 2).
    fn abort(world: &mpi::topology::SimpleCommunicator, why: &str) -> ! {
        eprintln!("sht-mpi: {why}");
        world.abort(2)
    }

    pub fn run(args: &ShtMpiArgs) -> Result<i32, String> {
        let universe = mpi::initialize().ok_or("MPI is already initialised in this process")?;
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size() as usize);
        let local = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(size);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = args.threads.unwrap_or((cores / local.max(1)).max(1));
        // The global pool (the transforms use it): nothing in this process has started it yet.
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .map_err(|e| format!("rayon: {e}"))?;
        {
            let transform = match args.transform {
                TransformArg::Alm2map => Transform::Alm2Map,
                TransformArg::Map2alm => Transform::Map2Alm {
                    iter: args.iter as usize,
                },
            };
            // Every process builds the same preset (fixed seed): no input needs sending.
            let problem = ShtProblem::preset(&args.preset, transform)?;
            let discovery = discover();
            let local_rank = std::env::var("OMPI_COMM_WORLD_LOCAL_RANK")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(rank as usize);
            let device = match rank_device(&discovery, &args.backend, local_rank) {
                Ok(d) => d,
                Err(e) => abort(&world, &format!("rank {rank}: {e}")),
            };
            let device_id = device.map_or("cpu".to_string(), |d| d.id());
            let mut p = Process::new(&world, &problem.grid, problem.lmax, problem.mmax);
            if let Some(dev) = device {
                p = p.on_device(dev);
            }
            let own_alm = p.own_alm(&problem.alm_in);
            // alm2map problems carry no input map.
            let own_pixels = match transform {
                Transform::Alm2Map => Vec::new(),
                Transform::Map2Alm { .. } => p.own_pixels(&problem.map_in),
            };
            let mut samples: Vec<StageTimes> = Vec::new();
            let mut result: Vec<f64> = Vec::new();
            for i in 0..args.warmup + args.repeats {
                world.barrier();
                let mut t = StageTimes::default();
                // A process that fails cannot leave the others waiting in a collective: it aborts them all.
                let flat = match transform {
                    Transform::Alm2Map => {
                        let pixels = p
                            .alm2map(&own_alm, &mut t)
                            .unwrap_or_else(|e| abort(&world, &format!("rank {rank}: {e}")));
                        p.gather_map(&pixels)
                    }
                    Transform::Map2Alm { iter } => {
                        let coeffs = p
                            .map2alm(&own_pixels, iter, &mut t)
                            .unwrap_or_else(|e| abort(&world, &format!("rank {rank}: {e}")));
                        p.gather_alm(&coeffs).map(|a| a.to_flat())
                    }
                };
                let slowest = p.slowest(&t);
                if i >= args.warmup {
                    samples.push(slowest);
                }
                if let Some(flat) = flat {
                    result = flat;
                }
            }
            if rank != 0 {
                return Ok(0);
            }
            let single = problem.reference();
            let accuracy = relative_errors(&result, &single, TOL_DISTRIBUTED_REL);
            let pick =
                |f: fn(&StageTimes) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
            let total = pick(|t| t.total_s);
            let record = serde_json::json!({
                "schema": "astroport.sht-mpi/1",
                "preset": problem.preset,
                "transform": transform.name(),
                "grid": problem.grid.describe(),
                "lmax": problem.lmax,
                "ranks": size,
                "backend": args.backend,
                "rank0_device": device_id,
                "threads_per_rank": threads,
                "repeats": args.repeats,
                "warmup": args.warmup,
                "median_total_s": total,
                "median_legendre_s": pick(|t| t.legendre_s),
                "median_all_to_all_s": pick(|t| t.all_to_all_s),
                "median_rings_s": pick(|t| t.rings_s),
                "all_to_all_share": pick(|t| t.all_to_all_s) / total,
                "max_rel_vs_single_process": accuracy.max_rel,
                "rel_l2_vs_single_process": rel_l2(&result, &single),
                "tolerance_rel": TOL_DISTRIBUTED_REL,
                "pass": accuracy.pass,
                "provenance": crate::results::Provenance::new(
                    // The library's own string, which MPI pads with NULs.
                    mpi::environment::library_version()
                        .unwrap_or_default()
                        .trim_end_matches(['\0', '\n', ' '])
                        .to_string(),
                    String::new(),
                    crate::exec::host_build_options(),
                ),
            });
            println!("{record}");
            if let Some(path) = &args.out {
                crate::inputs::append_lines(path, &format!("{record}\n"))
                    .map_err(|e| e.to_string())?;
            }
            if accuracy.pass {
                Ok(0)
            } else {
                eprintln!(
                    "sht-mpi: {} ranks differ from the single process by {:.3e} relative (tolerance {TOL_DISTRIBUTED_REL:.0e})",
                    size, accuracy.max_rel
                );
                Ok(1)
            }
        }
    }
}
