//! The `cpu` model: the workloads' own Rust code on rayon's thread pool. It is the f64 reference and a
//! serious contender in f32, so workloads write it SoA-first so the inner loops vectorise.

use super::DeviceInfo;

pub struct CpuTarget {
    pub info: DeviceInfo,
}

impl CpuTarget {
    pub fn new() -> Self {
        let threads = rayon::current_num_threads();
        let name = cpu_model_name().unwrap_or_else(|| std::env::consts::ARCH.to_string());
        CpuTarget {
            info: DeviceInfo {
                name: format!("{name} ({threads} threads)"),
                vendor: String::new(),
                platform: "rayon".into(),
                driver: String::new(),
                is_gpu: false,
                compute_units: threads as u32,
                global_mem_bytes: 0,
                max_alloc_bytes: u64::MAX,
                fp64: true,
            },
        }
    }

    pub fn toolchain(&self) -> String {
        format!(
            "{}; target-cpu {}",
            env!("ASTROPORT_RUSTC_VERSION"),
            env!("ASTROPORT_TARGET_CPU")
        )
    }
}

impl Default for CpuTarget {
    fn default() -> Self {
        Self::new()
    }
}

/// The host's available memory (`MemAvailable` of /proc/meminfo), bytes; `None` where unknown.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn cpu_model_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
}
