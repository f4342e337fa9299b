//! Published peak rates of devices we can name, for the "fraction of the device limit" column. A device
//! not in the table gets no fraction (shown as n/a with the reason), never a guessed one.

use crate::backend::{DeviceInfo, Precision};

/// Per-SM (compute unit) arithmetic lanes and the boost clock.
#[derive(Debug, Clone, Copy)]
pub struct Peak {
    pub name: &'static str,
    pub fp32_lanes_per_cu: f64,
    pub fp64_lanes_per_cu: f64,
    pub clock_hz: f64,
}

/// NVIDIA data-centre GPUs (CUDA C++ Programming Guide arithmetic-throughput table; datasheet clocks).
const PEAKS: &[(&str, Peak)] = &[
    (
        "H200",
        Peak {
            name: "H200 SXM",
            fp32_lanes_per_cu: 128.0,
            fp64_lanes_per_cu: 64.0,
            clock_hz: 1.98e9,
        },
    ),
    (
        "H100",
        Peak {
            name: "H100",
            fp32_lanes_per_cu: 128.0,
            fp64_lanes_per_cu: 64.0,
            clock_hz: 1.98e9,
        },
    ),
    (
        "A100",
        Peak {
            name: "A100",
            fp32_lanes_per_cu: 64.0,
            fp64_lanes_per_cu: 32.0,
            clock_hz: 1.41e9,
        },
    ),
    (
        "V100",
        Peak {
            name: "V100",
            fp32_lanes_per_cu: 64.0,
            fp64_lanes_per_cu: 32.0,
            clock_hz: 1.53e9,
        },
    ),
];

pub fn peak(info: &DeviceInfo) -> Option<Peak> {
    if !info.is_gpu || info.compute_units == 0 {
        return None;
    }
    PEAKS
        .iter()
        .find(|(key, _)| info.name.contains(key))
        .map(|(_, p)| *p)
}

/// Time floor for `units` of work needing `instr` pipe instructions each, on `info`'s FP32 or FP64 pipe.
pub fn pipe_floor(
    info: &DeviceInfo,
    precision: Precision,
    units: f64,
    instr: f64,
) -> Option<(f64, String)> {
    let p = peak(info)?;
    let lanes = match precision {
        Precision::F64 => p.fp64_lanes_per_cu,
        _ => p.fp32_lanes_per_cu,
    };
    let rate = info.compute_units as f64 * lanes * p.clock_hz / instr;
    Some((
        units / rate,
        format!(
            "{} {} pipe: {} SMs x {} lanes x {:.2} GHz / {} instr per unit",
            p.name,
            precision.name().to_uppercase(),
            info.compute_units,
            lanes,
            p.clock_hz / 1e9,
            (instr * 10.0).round() / 10.0
        ),
    ))
}
