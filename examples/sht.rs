//! Spherical harmonic transforms on the `cpu` model, the library API: a band-limited map synthesised on a
//! HEALPix grid and analysed back with healpy's iterations, and the exact round trip on a Gauss-Legendre
//! grid.
//!
//!     cargo run --release --example sht

use astroport::workload::sht::{alm2map, map2alm, rel_l2, Alm, RingGrid};

fn main() -> Result<(), String> {
    let (nside, lmax) = (64, 128);
    let healpix = RingGrid::healpix(nside)?;
    let alm = Alm::random(lmax, lmax, 2026);
    let map = alm2map(&healpix, &alm)?;
    println!(
        "HEALPix nside {nside}: {} pixels from {} coefficients (lmax {lmax})",
        map.len(),
        alm.coeffs.len()
    );
    for iter in [0, 3] {
        let back = map2alm(&healpix, &map, lmax, lmax, iter)?;
        let err = rel_l2(&back.to_flat(), &alm.to_flat());
        println!("HEALPix map2alm iter {iter}: relative L2 error {err:.2e}");
    }
    let gl = RingGrid::gauss_legendre(lmax + 1, 2 * lmax + 2)?;
    let back = map2alm(&gl, &alm2map(&gl, &alm)?, lmax, lmax, 0)?;
    let err = rel_l2(&back.to_flat(), &alm.to_flat());
    println!("Gauss-Legendre round trip: relative L2 error {err:.2e} (exact quadrature)");
    Ok(())
}
