//! Workloads. Each is a folder that implements [`Workload`] (what the driver runs and verifies) and
//! [`WorkloadArgs`] (its own command-line flags); `crate::registry` lists them, and nothing else does.
//! docs/architecture.md has the checklist for adding one.

pub mod cubature;
pub mod imgsub;
pub mod lens;
pub mod lombscargle;
pub mod sht;

use crate::backend::{Discovery, Selector, Target};
use crate::exec::{Measured, Mode, RunError, RunOptions};
use serde::{Deserialize, Serialize};

/// JSON has no infinity or NaN: serde_json writes them as null. Reading rows back (`astroport report`), a
/// null tolerance is "none" (infinity) and a null error is not a number.
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Accuracy against the reference, with the tolerance that decides pass/fail.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Accuracy {
    #[serde(deserialize_with = "null_as_nan")]
    pub max_abs: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub max_rel: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub rms_abs: f64,
    /// Elements that were NaN or infinite (a poisoned output that was never written shows up here).
    pub non_finite: u64,
    /// No tolerance is infinity, which JSON writes as null.
    #[serde(deserialize_with = "null_as_infinity")]
    pub tolerance_abs: f64,
    #[serde(deserialize_with = "null_as_infinity")]
    pub tolerance_rel: f64,
    pub unit: String,
    pub pass: bool,
}

/// How much work one run did, for its throughput: natural units (halo-pixel interactions, time-frequency
/// pairs, integrand evaluations).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    pub units: f64,
    pub unit_name: &'static str,
}

/// The judgement of one run against the reference.
#[derive(Debug, Clone)]
pub struct Verdict<D> {
    pub accuracy: Accuracy,
    /// An iterative method that stopped before its target, honestly (no claim made): why. The row's status is
    /// then `unconverged` rather than `ok`.
    pub unconverged: Option<String>,
    /// When verification fails, the workload's own explanation (otherwise the row says which tolerance
    /// was exceeded).
    pub failure: Option<String>,
    /// Workload-specific figures: the row's `details` object.
    pub details: D,
}

/// One workload problem as the driver sees it: run it on a target in one of its modes, and verify the result
/// against a reference computed once. Iterative workloads (cubature) implement [`Workload::execute`] with
/// their own host loop; single-pass ones hand it to [`crate::exec::single_pass`].
pub trait Workload: Sync {
    type Mode: Mode;
    /// What one run computes.
    type Output;
    /// What runs are verified against: the float64 `cpu` reference, or a known true value.
    type Reference: Sync;
    /// The workload's own figures in a row (`details`).
    type Details: Serialize;

    fn name(&self) -> &'static str;
    fn preset(&self) -> &str;
    /// One line describing the problem, for tables.
    fn describe(&self) -> String;
    /// Every mode this workload offers (`bench` runs all of them).
    fn modes(&self) -> Vec<Self::Mode>;
    /// The work one run did, for throughput.
    fn work(&self, output: &Self::Output) -> Option<Work>;
    /// Arithmetic-pipe instructions per work unit in this mode, for the device-limit floor.
    fn pipe_instructions(&self, _mode: Self::Mode) -> Option<f64> {
        None
    }
    fn reference(&self) -> Self::Reference;
    /// Runs in one mode on one target, timed as `opts` says; the output is the last run's.
    fn execute(
        &self,
        target: &Target,
        mode: Self::Mode,
        opts: &RunOptions,
    ) -> Result<Measured<Self::Output>, RunError>;
    /// Compares a run's output with the reference under this mode's stated tolerance.
    fn verify(
        &self,
        output: &Self::Output,
        reference: &Self::Reference,
        mode: Self::Mode,
    ) -> Verdict<Self::Details>;
    /// A second check of a device's output against the `cpu` model's output of the same run, for workloads
    /// whose reference cannot see everything (cubature: the truth checks the claim, the `cpu` run the
    /// arithmetic). `Err(why)` fails the row. The driver calls it when the `cpu` model ran too.
    /// Whether [`Workload::agrees_with_cpu`] looks at the `cpu` output: only then does the driver keep it
    /// (a lens grid at `hff` is 0.7 GB per mode).
    const CHECKS_AGAINST_CPU: bool = false;
    fn agrees_with_cpu(&self, _output: &Self::Output, _cpu: &Self::Output) -> Result<(), String> {
        Ok(())
    }
}

/// A workload's own flags for `astroport run NAME`, and how they become problems. `crate::registry` turns one
/// implementation into one registry line.
pub trait WorkloadArgs: clap::Args + clap::FromArgMatches {
    /// The subcommand name and the rows' `workload`.
    const NAME: &'static str;
    /// One line for `astroport run --help`.
    const ABOUT: &'static str;
    /// The presets `--preset` takes; `bench --preset P` runs every workload that has P.
    const PRESETS: &'static [&'static str];
    type Workload: Workload;
    /// The problems these flags describe (cubature: one per method, integrand, dimension and tolerance).
    fn build(&self) -> Result<Vec<Self::Workload>, String>;
    /// The modes these flags ask `run` for (`bench` runs every mode instead).
    fn modes(&self) -> Vec<<Self::Workload as Workload>::Mode>;
    /// The workload's own top-level commands (the lens's `maps`, Lomb-Scargle's `periodogram`).
    const TOOLS: &'static [Tool] = &[];
}

/// A command of a workload's own that computes on one backend and writes files (not rows): `astroport NAME`.
pub trait ToolArgs: clap::Args + clap::FromArgMatches {
    const NAME: &'static str;
    const ABOUT: &'static str;
    /// Runs the command; returns the exit code (errors are bad input: exit 2).
    fn run(self) -> Result<i32, String>;
}

/// A [`ToolArgs`] with its types erased, as the registry lists it.
#[derive(Clone, Copy)]
pub struct Tool {
    pub name: &'static str,
    pub about: &'static str,
    command: fn() -> clap::Command,
    run: fn(&clap::ArgMatches) -> Result<i32, String>,
}

impl Tool {
    pub const fn of<A: ToolArgs>() -> Tool {
        Tool {
            name: A::NAME,
            about: A::ABOUT,
            command: tool_command::<A>,
            run: tool_run::<A>,
        }
    }
    /// The command with its flags.
    pub fn command(&self) -> clap::Command {
        (self.command)()
    }
    /// Runs it on the command's parsed flags.
    pub fn run(&self, matches: &clap::ArgMatches) -> Result<i32, String> {
        (self.run)(matches)
    }
}

fn tool_command<A: ToolArgs>() -> clap::Command {
    A::augment_args(clap::Command::new(A::NAME)).about(A::ABOUT)
}

fn tool_run<A: ToolArgs>(matches: &clap::ArgMatches) -> Result<i32, String> {
    A::from_arg_matches(matches)
        .map_err(|e| e.to_string())?
        .run()
}

/// A flag given in MiB as bytes (`--device-mem-mib`), refused when the bytes overflow 64 bits.
pub fn mib_flag(flag: &str, mib: Option<u64>) -> Result<Option<u64>, String> {
    mib.map(|m| {
        m.checked_mul(1 << 20)
            .ok_or_else(|| format!("{flag}: {m} MiB is more bytes than 64 bits hold"))
    })
    .transpose()
}

/// A numeric flag that must be positive and finite: `Err("--flag: VALUE is not a positive number")`.
pub fn require_positive(flag: &str, value: f64) -> Result<(), String> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(format!("{flag}: {value:?} is not a positive number"))
    }
}

/// The flags of a tool that computes on one backend (`maps`, `periodogram`).
#[derive(clap::Args, Debug, Clone)]
pub struct OneBackendArgs {
    /// Backend id (see `astroport devices`); repeat to give fallbacks. Default: the first GPU found, else
    /// cpu.
    #[arg(long = "backend")]
    pub backends: Vec<String>,
    /// Untimed runs before the timed ones.
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,
    /// Timed runs (the median is printed).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
}

impl OneBackendArgs {
    /// The target to run on, from what `discovery` found.
    fn selectors(&self) -> Result<Vec<Selector>, String> {
        self.backends
            .iter()
            .map(|b| b.parse::<Selector>())
            .collect()
    }
    /// The backends of the models `--backend` names (all without it).
    pub fn discovery(&self) -> Result<Discovery, String> {
        Ok(crate::backend::discover_for(&self.selectors()?))
    }
    pub fn target<'a>(&self, discovery: &'a Discovery) -> Result<&'a Target, String> {
        discovery.single(&self.selectors()?)
    }
    pub fn options(&self) -> RunOptions {
        RunOptions {
            warmup: self.warmup,
            repeats: self.repeats,
        }
    }
}

/// Vector-norm error statistics for fields whose components form a vector per element:
/// (max abs, max rel, rms abs, non-finite elements).
pub fn vector_errors(
    result: &crate::exec::Field,
    reference: &crate::exec::Field,
) -> (f64, f64, f64, u64) {
    let n = reference.components[0].len();
    let (mut max_abs, mut max_rel, mut sum2, mut non_finite) = (0.0f64, 0.0f64, 0.0f64, 0u64);
    for i in 0..n {
        let mut d2 = 0.0;
        let mut r2 = 0.0;
        let mut finite = true;
        for (c, r) in result.components.iter().zip(&reference.components) {
            let (a, b) = (c.get(i).copied().unwrap_or(f64::NAN), r[i]);
            finite &= a.is_finite();
            d2 += (a - b) * (a - b);
            r2 += b * b;
        }
        if !finite {
            non_finite += 1;
            continue;
        }
        let d = d2.sqrt();
        max_abs = max_abs.max(d);
        max_rel = max_rel.max(d / r2.sqrt().max(1e-30));
        sum2 += d2;
    }
    (
        max_abs,
        max_rel,
        (sum2 / n.max(1) as f64).sqrt(),
        non_finite,
    )
}
