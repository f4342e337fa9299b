//! Image subtraction through the library: a generated reference/science pair, the whole subtraction on the
//! backend named on the command line (default `cpu`), the fitted kernel's scale, the detections, and PSF
//! photometry of the injected transients against their true flux.
//!
//!     cargo run --release --example imgsub [BACKEND]

use astroport::backend::open;
use astroport::workload::imgsub::field::{generate, FieldSpec, Kind};
use astroport::workload::imgsub::pair::Pair;
use astroport::workload::imgsub::psf::psf_flux;
use astroport::workload::imgsub::subtract::{subtract, SubtractOptions};

fn main() -> Result<(), String> {
    let backend = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let spec = FieldSpec::new(768, 2026)?;
    let field = generate(&spec);
    let transients: Vec<_> = field
        .sources
        .iter()
        .filter(|s| s.kind == Kind::Transient && field.change_snr(s) >= 20.0)
        .map(|s| (s.x, s.y, s.science_flux))
        .collect();
    let target = open(&backend)?;
    let sub = subtract(
        Pair::from_field(field),
        &SubtractOptions::default(),
        &target,
    )?;
    let d = sub.diagnostics();
    println!(
        "kernel sum {:.4} (true flux ratio {}), {} stamps, condition {:.1e}, {} detections on {}",
        d.kernel_sum_grid[12],
        spec.flux_ratio,
        d.stamps_fitted,
        d.condition_number,
        sub.detections.len(),
        sub.backend
    );
    for (x, y, flux) in transients {
        let found = sub
            .detections
            .iter()
            .any(|t| (t.x - x).hypot(t.y - y) <= 2.5);
        let f = psf_flux(&sub.psf, &sub.planes(), x, y).ok_or("transient masked")?;
        println!(
            "transient at ({x:.1}, {y:.1}): true {flux:.0} e-, measured {:.0} ± {:.0} e- (ratio {:.3}), detected {found}",
            f.flux,
            f.error,
            f.flux / flux
        );
    }
    Ok(())
}
