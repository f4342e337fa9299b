//! A Lomb-Scargle periodogram of one light curve, as astropy's `LombScargle` would give it: the best
//! period, its false-alarm probability and the fitted sinusoid.
//!
//!     cargo run --release --example lombscargle [BACKEND]

use astroport::backend::{self, Precision};
use astroport::workload::lombscargle::fap::FapMethod;
use astroport::workload::lombscargle::{generate, top_k, LombScargle};

fn main() -> Result<(), String> {
    let id = std::env::args().nth(1).unwrap_or_else(|| "cpu".into());
    let target = backend::open(&id)?;
    // 600 points over 150 days of a CoRoT-like star pulsating with a 0.18-day period.
    let curve = generate::corot_like(600, 3);
    let ls = LombScargle::new(curve.t.clone(), curve.y.clone(), None)?;
    let grid = ls.autofrequency(8.0, 4.0)?;
    let power = ls.power(&grid, &target, Precision::F32)?;
    let (best, p) = top_k(&power, 1)[0];
    let frequency = grid.frequency(best);
    let fap = ls.false_alarm_probability(p, FapMethod::Baluev, grid.max_frequency());
    println!(
        "{} frequencies on {id}: best period {:.5} d, power {p:.4}, false-alarm probability {fap:.2e}",
        grid.len(),
        1.0 / frequency
    );
    let fit = ls.model(&[0.0, 0.045, 0.09], frequency);
    println!("fitted sinusoid over half a period: {fit:.4?}");
    Ok(())
}
