//! The registry: the one list of workloads. `run` gets a subcommand per entry, with that workload's own
//! flags; `bench` builds every entry that has the preset; each entry's tools are top-level commands. Adding a
//! workload adds one line to [`WORKLOADS`] (docs/architecture.md has the whole checklist).

use crate::bench::{Planned, Runnable};
use crate::workload::{cubature, imgsub, lens, lombscargle, sht, Tool, Workload, WorkloadArgs};

/// Every workload, in the order `bench` runs them.
pub static WORKLOADS: [Entry; 6] = [
    Entry::of::<lens::args::LensArgs>(),
    Entry::of::<lens::args::Chi2Args>(),
    Entry::of::<lombscargle::args::LombScargleArgs>(),
    Entry::of::<cubature::args::CubatureArgs>(),
    Entry::of::<sht::args::ShtArgs>(),
    Entry::of::<imgsub::args::DifferenceArgs>(),
];

/// Every top-level tool of the registered workloads.
pub fn tools() -> impl Iterator<Item = &'static Tool> {
    WORKLOADS.iter().flat_map(|e| e.tools)
}

/// One workload as the command line sees it.
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub presets: &'static [&'static str],
    /// The workload's own top-level commands.
    pub tools: &'static [Tool],
    command: fn() -> clap::Command,
    build: fn(&clap::ArgMatches, AllModes) -> Problems,
}

/// The problems a command line asks for, ready for the driver.
pub type Problems = Result<Vec<Box<dyn Runnable>>, String>;

/// Whether a build runs every mode of the workload (`bench`) or the ones its flags ask for (`run`).
#[derive(Clone, Copy, PartialEq, Eq)]
struct AllModes(bool);

impl Entry {
    pub const fn of<A: WorkloadArgs + 'static>() -> Entry
    where
        A::Workload: 'static,
    {
        Entry {
            name: A::NAME,
            about: A::ABOUT,
            presets: A::PRESETS,
            tools: A::TOOLS,
            command: command::<A>,
            build: build::<A>,
        }
    }

    /// `run NAME` with the workload's flags.
    pub fn command(&self) -> clap::Command {
        (self.command)()
    }

    /// The problems `run NAME` asks for, in the modes its flags name.
    pub fn build(&self, matches: &clap::ArgMatches) -> Problems {
        (self.build)(matches, AllModes(false))
    }

    /// The problems of a preset in every mode, as `bench` runs them: the same flags `run NAME --preset P`
    /// would parse. `None` when the workload has no such preset.
    pub fn bench(&self, preset: &str) -> Option<Problems> {
        if !self.presets.contains(&preset) {
            return None;
        }
        let matches = self
            .command()
            .try_get_matches_from([self.name, "--preset", preset])
            .map_err(|e| e.to_string());
        Some(matches.and_then(|m| (self.build)(&m, AllModes(true))))
    }
}

/// The entry named `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    WORKLOADS.iter().find(|e| e.name == name)
}

fn command<A: WorkloadArgs>() -> clap::Command {
    A::augment_args(clap::Command::new(A::NAME)).about(A::ABOUT)
}

fn build<A: WorkloadArgs + 'static>(matches: &clap::ArgMatches, all: AllModes) -> Problems
where
    A::Workload: 'static,
{
    let args = A::from_arg_matches(matches).map_err(|e| e.to_string())?;
    let modes = args.modes();
    Ok(args
        .build()?
        .into_iter()
        .map(|workload| {
            let modes = if all.0 {
                workload.modes()
            } else {
                modes.clone()
            };
            Box::new(Planned { workload, modes }) as Box<dyn Runnable>
        })
        .collect())
}
