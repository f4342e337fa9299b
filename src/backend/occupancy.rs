//! Register reports and theoretical occupancy for NVIDIA devices reached through OpenCL, where no
//! occupancy API exists. CUDA uses the runtime's own occupancy API instead (ports/cuda/cuda_host.cu).

/// Registers per thread of `kernel` from a ptxas report, as NVIDIA OpenCL prints it with `-cl-nv-verbose`:
/// `ptxas info : Compiling entry function 'k' for 'sm_90'` ... `ptxas info : Used 32 registers, ...`.
pub fn parse_ptxas_registers(log: &str, kernel: &str) -> Option<u32> {
    let mut in_kernel = false;
    let mut any_kernel_named = false;
    let mut first_used = None;
    for line in log.lines() {
        if line.contains("Compiling entry function") || line.contains("Function properties for") {
            any_kernel_named = true;
            in_kernel =
                line.contains(&format!("'{kernel}'")) || line.contains(&format!(" {kernel}"));
        }
        if let Some(pos) = line.find("Used ") {
            let regs = line[pos + 5..]
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(r) = regs {
                if line[pos..].contains("registers") {
                    if in_kernel {
                        return Some(r);
                    }
                    first_used.get_or_insert(r);
                }
            }
        }
    }
    // A log with a single unnamed report belongs to the only kernel.
    if any_kernel_named {
        None
    } else {
        first_used
    }
}

/// Theoretical occupancy (active warps / maximum warps per SM) for a kernel with `regs` registers per
/// thread in blocks of `block` threads and no shared memory, from the published per-compute-capability
/// limits (CUDA C++ Programming Guide, "Compute Capabilities" table).
pub fn theoretical(cc: (u32, u32), regs: u32, block: usize) -> Option<f64> {
    let (max_warps, max_blocks): (u32, u32) = match cc {
        (7, 0) | (7, 2) | (8, 0) | (9, 0) => (64, 32),
        (7, 5) => (32, 16),
        (8, 6) | (8, 7) => (48, 16),
        (8, 9) => (48, 24),
        (10, _) | (12, _) => (64, 32),
        _ => return None,
    };
    let regs_per_sm: u32 = 65536;
    let warps_per_block = (block as u32).div_ceil(32).max(1);
    // Registers are allocated per warp in units of 256.
    let regs_per_warp = (regs.max(1) * 32).div_ceil(256) * 256;
    let warps_by_regs = regs_per_sm / regs_per_warp;
    let blocks_by_regs = warps_by_regs / warps_per_block;
    let blocks_by_warps = max_warps / warps_per_block;
    let blocks = blocks_by_regs.min(blocks_by_warps).min(max_blocks);
    Some((blocks * warps_per_block) as f64 / max_warps as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_named_kernel_report() {
        let log = "ptxas info    : 0 bytes gmem\n\
                   ptxas info    : Compiling entry function 'other' for 'sm_90'\n\
                   ptxas info    : Used 40 registers, 380 bytes cmem[0]\n\
                   ptxas info    : Compiling entry function 'lens_sie_grad_f32' for 'sm_90'\n\
                   ptxas info    : Used 26 registers, 412 bytes cmem[0]\n";
        assert_eq!(parse_ptxas_registers(log, "lens_sie_grad_f32"), Some(26));
        assert_eq!(parse_ptxas_registers(log, "other"), Some(40));
        assert_eq!(parse_ptxas_registers(log, "missing"), None);
        assert_eq!(parse_ptxas_registers("", "x"), None);
    }

    #[test]
    fn occupancy_matches_the_calculator() {
        // sm_90, 256 threads: 32 regs -> 8 blocks = 64 warps (100 %); 64 regs -> 4 blocks (50 %);
        // 40 regs -> 1280 regs/warp -> 51 warps -> 6 blocks = 48 warps (75 %).
        assert_eq!(theoretical((9, 0), 32, 256), Some(1.0));
        assert_eq!(theoretical((9, 0), 64, 256), Some(0.5));
        assert_eq!(theoretical((9, 0), 40, 256), Some(0.75));
        assert_eq!(theoretical((1, 0), 40, 256), None);
    }
}
