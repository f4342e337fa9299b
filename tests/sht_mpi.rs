//! The distributed transforms under `mpirun -np 2` and `-np 3` (an uneven split of m and rings) equal the
//! single-process transform to ≤ 1e-13 relative (`astroport sht-mpi` checks on rank 0 and exits 1 otherwise).
//! Needs the `mpi` feature and OpenMPI's mpirun (scripts/setup.sh installs it); without them this file has no
//! tests, and scripts/test.sh builds with the feature.
#![cfg(feature = "mpi")]

use std::process::Command;

fn run(np: usize, preset: &str, transform: &str, iter: u32, backend: &str) -> serde_json::Value {
    let out = Command::new("mpirun")
        .args([
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
            &np.to_string(),
        ])
        .arg(env!("CARGO_BIN_EXE_astroport"))
        .args(["sht-mpi", "--preset", preset, "--transform", transform])
        .args([
            "--iter",
            &iter.to_string(),
            "--warmup",
            "0",
            "--repeats",
            "1",
            "--backend",
            backend,
        ])
        // CI runs as root; OpenMPI refuses that unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Containers often forbid the cross-memory attach that OpenMPI's shared-memory transport tries first.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .output()
        .expect("mpirun (OpenMPI) is needed: run scripts/setup.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "np {np} {preset} {transform} {backend}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no record from rank 0: {stdout}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn two_and_three_ranks_equal_one_process() {
    for np in [2usize, 3] {
        for (preset, transform, iter) in [
            ("tiny", "alm2map", 0),
            ("tiny", "map2alm", 3),
            ("ci", "alm2map", 0),
            ("ci", "map2alm", 0),
        ] {
            let r = run(np, preset, transform, iter, "cpu");
            assert_eq!(r["ranks"], np);
            assert_eq!(r["pass"], true, "{r}");
            let err = r["max_rel_vs_single_process"].as_f64().unwrap();
            assert!(err <= 1e-13, "np {np} {preset} {transform}: {err:e}");
            let share = r["all_to_all_share"].as_f64().unwrap();
            assert!((0.0..1.0).contains(&share), "{r}");
        }
    }
}

/// Each rank on a device of its own (`--backend MODEL`: node-local rank r takes that model's device r mod
/// count, so with two OpenCL platforms the ranks mix them): both stages there, the same result as one process.
#[test]
fn device_ranks_equal_one_process() {
    use astroport::backend::{discover, Target};
    let d = discover();
    let mut models: Vec<String> = d
        .targets
        .iter()
        .filter_map(|t| match t {
            Target::Device(dev) => Some(dev.model().name().to_string()),
            Target::Cpu(_) => None,
        })
        .collect();
    models.dedup();
    assert!(
        !models.is_empty(),
        "no device to run ranks on (see `astroport devices`)"
    );
    for model in &models {
        for np in [2usize, 3] {
            for (transform, iter) in [("alm2map", 0), ("map2alm", 2)] {
                let r = run(np, "tiny", transform, iter, model);
                assert_eq!(r["pass"], true, "{r}");
                assert!(
                    r["rank0_device"]
                        .as_str()
                        .unwrap()
                        .starts_with(model.as_str()),
                    "{r}"
                );
                let err = r["max_rel_vs_single_process"].as_f64().unwrap();
                eprintln!("np {np} {model} {transform}: {err:.2e}");
                assert!(err <= 1e-13, "np {np} {model} {transform}: {err:e}");
            }
        }
    }
}
