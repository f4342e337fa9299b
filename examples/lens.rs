//! A lens model on a grid: deflection angles on the first backend given (default `cpu`), in float32 and in
//! the error-budget mixed precision, and the image-plane χ² of mock multiple-image systems.
//!
//!     cargo run --release --example lens [BACKEND]

use astroport::backend;
use astroport::workload::lens::mock::{mock_systems, MockOptions};
use astroport::workload::lens::{Grid, LensMode, LensModel, LensOptions, Preset};

fn main() -> Result<(), String> {
    let id = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let target = backend::open(&id)?;
    // Two cluster halos and 30 galaxies over ±101″, on a 256² grid of 0.79″ pixels.
    let model =
        LensModel::preset(Preset::Tiny, &LensOptions::default()).map_err(|e| e.to_string())?;
    let grid = Grid {
        n: 256,
        pixel: 202.0 / 256.0,
    };
    for mode in [LensMode::F32, LensMode::BUDGET] {
        let alpha = model.deflection(grid, &target, mode)?;
        let centre = 128 * grid.n + 128;
        println!(
            "{mode} on {id}: α at the centre = ({:.4}″, {:.4}″), {:.3} ms, recomputed in f64: {}",
            alpha.alpha_x[centre],
            alpha.alpha_y[centre],
            alpha.seconds * 1e3,
            alpha
                .recomputed_fraction
                .map_or("-".into(), |f| format!("{:.2} %", 100.0 * f))
        );
    }
    let problem = model.on_grid(grid).map_err(|e| e.to_string())?;
    let systems = mock_systems(&problem, &MockOptions::default())?;
    let fit = model.chi2(&systems, grid, &target)?;
    println!(
        "χ² of {} mock systems at the true model: {:.3} ({} images missing, {} extra)",
        systems.len(),
        fit.chi2.chi2,
        fit.chi2.n_missing,
        fit.chi2.n_extra
    );
    Ok(())
}
