//! Adaptive cubature of a Genz test integrand with both integrators, on the first backend given (default
//! `cpu`), against its closed-form value.
//!
//!     cargo run --release --example cubature [BACKEND]

use astroport::backend;
use astroport::workload::cubature::{
    Integrand, Integrator, MCubes, McubesOptions, Pagani, PaganiOptions,
};

fn main() -> Result<(), String> {
    let id = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let target = backend::open(&id)?;
    let (f, dim) = (Integrand::F5, 5);
    let truth = f.true_value(dim);
    let pagani = Pagani::new(PaganiOptions {
        epsrel: 1e-5,
        ..Default::default()
    });
    let mcubes = MCubes::new(McubesOptions {
        epsrel: 1e-3,
        ..Default::default()
    });
    for (name, out) in [
        ("PAGANI", pagani.integrate(f, dim, &target)?),
        ("m-Cubes", mcubes.integrate(f, dim, &target)?),
    ] {
        println!(
            "{name} on {id}: ∫ {f} over [0,1]^{dim} = {:.10e} ± {:.2e} ({}), true error {:.2e}, {} evaluations",
            out.estimate,
            out.error,
            out.stop.name(),
            (out.estimate - truth).abs(),
            out.evaluations
        );
    }
    Ok(())
}
