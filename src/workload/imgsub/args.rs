//! `astroport run imgsub` (the difference image on every backend) and `astroport field` (the synthetic
//! field as files).

use super::difference::{DifferenceProblem, PRESETS};
use super::field::{generate, FieldSpec, Kind};
use super::io::write_field;
use crate::backend::Precision;
use crate::workload::{Tool, ToolArgs, WorkloadArgs};
use std::path::PathBuf;

/// `astroport run imgsub`: the difference image and its variance of a generated field, verified against
/// the float64 `cpu` reference.
#[derive(clap::Args, Debug, Clone)]
pub struct DifferenceArgs {
    /// Problem: tiny (256²), ci (1024²) or ast3 (10240², the seed's camera).
    #[arg(long, default_value = "ci", value_parser = clap::builder::PossibleValuesParser::new(PRESETS))]
    pub preset: String,
    /// Precisions, comma-separated or repeated: f32, f64.
    #[arg(long = "precision", value_delimiter = ',', default_value = "f32")]
    pub precisions: Vec<Precision>,
    /// Seed of the generated field.
    #[arg(long, default_value_t = 20_110_101)]
    pub seed: u64,
    /// Cap on device memory in MiB, below what the device reports (forces tiling into bands of rows).
    #[arg(long)]
    pub device_mem_mib: Option<u64>,
}

impl WorkloadArgs for DifferenceArgs {
    const NAME: &'static str = "imgsub";
    const ABOUT: &'static str =
        "Image subtraction (GAISP): the difference image and its variance with a \
        spatially varying 21x21 kernel, on a generated field";
    const PRESETS: &'static [&'static str] = &PRESETS;
    const TOOLS: &'static [Tool] = &[Tool::of::<FieldArgs>()];
    type Workload = DifferenceProblem;
    fn build(&self) -> Result<Vec<DifferenceProblem>, String> {
        let cap = crate::workload::mib_flag("--device-mem-mib", self.device_mem_mib)?;
        let mut problem = DifferenceProblem::preset(&self.preset, self.seed)?;
        problem.device_mem_cap = cap;
        Ok(vec![problem])
    }
    fn modes(&self) -> Vec<Precision> {
        let mut modes = self.precisions.clone();
        modes.dedup();
        modes
    }
}

/// Flags of `astroport field`.
#[derive(clap::Args, Debug, Clone)]
pub struct FieldArgs {
    /// Side of both images, pixels (64 to 16384).
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Generator seed (the anchor field of research/imgsub.md used 20110101).
    #[arg(long, default_value_t = 20_110_101)]
    pub seed: u64,
    /// Cosmic rays per megapixel in the science image.
    #[arg(long, default_value_t = 0.0)]
    pub cosmic_rays: f64,
    /// A hot, masked column in the science image.
    #[arg(long)]
    pub bad_column: bool,
    /// Existing folder for ref.fits, sci.fits, their variance and masks, and truth.csv.
    #[arg(long)]
    pub out: PathBuf,
}

impl ToolArgs for FieldArgs {
    const NAME: &'static str = "field";
    const ABOUT: &'static str =
        "A synthetic reference and science image pair with a truth table (stars, \
        galaxies, variables, transients), for scoring image subtraction";
    fn run(self) -> Result<i32, String> {
        let mut spec = FieldSpec::new(self.size, self.seed)?;
        if !(self.cosmic_rays >= 0.0 && self.cosmic_rays <= 1e4) {
            return Err(format!(
                "--cosmic-rays {}: give 0 to 10000 per megapixel",
                self.cosmic_rays
            ));
        }
        if !self.out.is_dir() {
            return Err(format!("--out {}: no such folder", self.out.display()));
        }
        spec.cosmic_rays_per_mpx = self.cosmic_rays;
        spec.bad_column = self.bad_column;
        let start = std::time::Instant::now();
        let field = generate(&spec);
        let generated = start.elapsed().as_secs_f64();
        let written = write_field(&field, &self.out).map_err(|e| e.to_string())?;
        let count = |k: Kind| field.sources.iter().filter(|s| s.kind == k).count();
        println!(
            "field {}² px, seed {}: {} stars, {} galaxies, {} variables, {} transients, {} cosmic rays; \
             generated in {generated:.2} s",
            spec.size,
            spec.seed,
            count(Kind::Star),
            count(Kind::Galaxy),
            count(Kind::Variable),
            count(Kind::Transient),
            count(Kind::CosmicRay)
        );
        for path in written {
            println!("  wrote {}", path.display());
        }
        Ok(0)
    }
}
