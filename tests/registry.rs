//! The registry is the one list of workloads: every entry runs its `tiny` preset on the `cpu` model through
//! the driver and verifies, and the command line built from it is consistent.

use astroport::backend::{discover, Choice, Model};
use astroport::exec::RunOptions;
use astroport::registry::WORKLOADS;
use astroport::results::Status;

#[test]
fn every_registered_workload_runs_its_tiny_preset_on_cpu() {
    let d = discover();
    let cpu: Vec<Choice> = d
        .targets
        .iter()
        .filter(|t| t.model() == Model::Cpu)
        .map(Choice::Run)
        .collect();
    assert_eq!(cpu.len(), 1);
    for entry in &WORKLOADS {
        assert!(
            entry.presets.contains(&"tiny"),
            "{} has no tiny preset",
            entry.name
        );
        let problems = entry
            .bench("tiny")
            .expect("tiny is listed")
            .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        assert!(!problems.is_empty(), "{}: no problem", entry.name);
        for problem in problems {
            let rows = problem.run(&cpu, &RunOptions::once(), &mut |_| {});
            assert!(!rows.is_empty(), "{}: no rows", problem.title());
            for r in rows {
                assert_eq!(r.workload, entry.name);
                assert_eq!(
                    r.status,
                    Status::Ok,
                    "{} {}: {}",
                    problem.title(),
                    r.precision,
                    r.reason
                );
                let acc = r.accuracy.expect("verified");
                assert!(
                    acc.pass && acc.non_finite == 0,
                    "{}: {acc:?}",
                    problem.title()
                );
                assert!(r.time_s.expect("timed").median > 0.0);
            }
        }
    }
}

#[test]
fn names_are_unique_and_the_command_line_is_consistent() {
    // Workloads are named under `run`; tools are top-level commands beside the fixed ones, so a tool may
    // carry its workload's name (`astroport sht` and `astroport run sht`) but no other command's.
    let workloads: Vec<&str> = WORKLOADS.iter().map(|e| e.name).collect();
    let mut top: Vec<&str> = vec!["devices", "run", "bench"];
    top.extend(
        WORKLOADS
            .iter()
            .flat_map(|e| e.tools.iter().map(|t| t.name)),
    );
    for names in [&workloads, &top] {
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate names in {names:?}");
    }
    // clap checks every flag definition of every subcommand (clashing names, defaults, conflicts).
    astroport::cli::command().debug_assert();
    for entry in &WORKLOADS {
        assert!(entry.bench("no-such-preset").is_none());
    }
}
