//! Derived lens maps (convergence, shear, magnification) from a deflection grid, and the FITS set a
//! LENSTOOL user expects: `<prefix>_alpha_x.fits`, `_alpha_y`, `_kappa`, `_gamma1`, `_gamma2`, `_mu`.
//!
//! Grid convention (the same as [`super::LensProblem::coord`] and [`super::io::write_map_fits`]): values
//! are row-major with x fastest, index `j·n + i`; pixel (i, j) sits at x = x_first + i·h,
//! y = y_first + j·h with x_first = centre_x − (n − 1)/2·h (likewise y). In the FITS files x is axis 1,
//! CRPIX = (n + 1)/2, CRVAL = the centre, CDELT = h, all in arcsec.
//!
//! The maps need only the deflection, so they work for any backend's output; the Jacobian is taken by
//! finite differences rather than analytically per halo profile.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::io::{write_map_fits, InputError, MapImage};

/// Largest |μ| stored. Critical curves make the Jacobian determinant pass through zero, where 1/det is
/// infinite (or, next to it, huge and meaningless at finite resolution); a finite cap keeps every
/// map value finite and plottable, and 1e6 is far above any magnification a lens model resolves.
pub const MU_CLAMP: f64 = 1e6;

/// Convergence, shear and signed magnification on the deflection's grid (same layout and length).
#[derive(Debug, Clone, PartialEq)]
pub struct DerivedMaps {
    /// κ = ½(∂x αx + ∂y αy).
    pub kappa: Vec<f64>,
    /// γ1 = ½(∂x αx − ∂y αy).
    pub gamma1: Vec<f64>,
    /// γ2 = ½(∂y αx + ∂x αy): the two cross derivatives averaged, since a gradient field's Jacobian is
    /// symmetric and their difference is only discretisation noise.
    pub gamma2: Vec<f64>,
    /// μ = 1/((1 − κ)² − γ1² − γ2²), signed (negative for saddle images), |μ| capped at [`MU_CLAMP`].
    pub mu: Vec<f64>,
}

/// Derivative along one grid line of `n` samples spaced `h`, at sample `k`; `f(m)` reads sample m.
///
/// Truncation order: O(h⁴) five-point central difference where two neighbours exist on each side
/// (2 ≤ k ≤ n − 3); O(h²) three-point central difference one sample in from an edge; O(h²) three-point
/// one-sided difference on the edge itself; O(h) for a line of two samples; 0 for a single sample
/// (no information). Stencils are written as differences of samples, so a constant field gives
/// exactly 0 and a linear one its slope up to one rounding.
fn derivative(f: impl Fn(usize) -> f64, k: usize, n: usize, h: f64) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => (f(1) - f(0)) / h,
        _ if k >= 2 && k + 2 < n => {
            (8.0 * (f(k + 1) - f(k - 1)) - (f(k + 2) - f(k - 2))) / (12.0 * h)
        }
        _ if k == 0 => (4.0 * (f(1) - f(0)) - (f(2) - f(0))) / (2.0 * h),
        _ if k == n - 1 => (4.0 * (f(n - 1) - f(n - 2)) - (f(n - 1) - f(n - 3))) / (2.0 * h),
        _ => (f(k + 1) - f(k - 1)) / (2.0 * h),
    }
}

/// Signed magnification from the Jacobian determinant, |μ| capped at [`MU_CLAMP`]. det = +0 gives
/// +MU_CLAMP and −0 gives −MU_CLAMP; a NaN determinant (from a NaN deflection) stays NaN.
fn magnification(kappa: f64, gamma1: f64, gamma2: f64) -> f64 {
    let det = (1.0 - kappa) * (1.0 - kappa) - gamma1 * gamma1 - gamma2 * gamma2;
    (1.0 / det).clamp(-MU_CLAMP, MU_CLAMP)
}

/// κ, γ1, γ2 and μ from the deflection (gx, gy in arcsec, `n × n`, pixel size `h` arcsec; layout in
/// the module docs). Rows are computed in parallel. Non-finite deflections give non-finite values
/// nearby (the stencils spread them two pixels); finite input gives finite maps.
///
/// # Panics
/// If `gx` or `gy` does not hold `n·n` values, or `h` is not positive and finite.
pub fn derived_maps(gx: &[f64], gy: &[f64], n: usize, h: f64) -> DerivedMaps {
    let len = n.checked_mul(n).expect("grid side n overflows n·n");
    assert_eq!(
        gx.len(),
        len,
        "gx holds {} values, not n·n = {len}",
        gx.len()
    );
    assert_eq!(
        gy.len(),
        len,
        "gy holds {} values, not n·n = {len}",
        gy.len()
    );
    assert!(
        h > 0.0 && h.is_finite(),
        "pixel size {h} must be positive and finite"
    );
    let mut maps = DerivedMaps {
        kappa: vec![0.0; len],
        gamma1: vec![0.0; len],
        gamma2: vec![0.0; len],
        mu: vec![0.0; len],
    };
    if n == 0 {
        return maps;
    }
    maps.kappa
        .par_chunks_mut(n)
        .zip(maps.gamma1.par_chunks_mut(n))
        .zip(maps.gamma2.par_chunks_mut(n))
        .zip(maps.mu.par_chunks_mut(n))
        .enumerate()
        .for_each(|(j, (((kappa, gamma1), gamma2), mu))| {
            for i in 0..n {
                let dx = |g: &[f64]| derivative(|m| g[j * n + m], i, n, h);
                let dy = |g: &[f64]| derivative(|m| g[m * n + i], j, n, h);
                let (axx, axy) = (dx(gx), dy(gx));
                let (ayx, ayy) = (dx(gy), dy(gy));
                let k = 0.5 * (axx + ayy);
                let g1 = 0.5 * (axx - ayy);
                let g2 = 0.5 * (axy + ayx);
                kappa[i] = k;
                gamma1[i] = g1;
                gamma2[i] = g2;
                mu[i] = magnification(k, g1, g2);
            }
        });
    maps
}

/// Path `<prefix><suffix>`: appended to the prefix's last component, so `out/a1689` gives
/// `out/a1689_kappa.fits`.
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Writes the six maps as float32 FITS images `<prefix>_alpha_x.fits`, `_alpha_y`, `_kappa`,
/// `_gamma1`, `_gamma2`, `_mu` (EXTNAME = the suffix, BUNIT "arcsec" for α, none for the
/// dimensionless maps), each atomically via [`write_map_fits`], on the grid of the module docs
/// centred at `centre` (arcsec). Returns the paths in that order.
///
/// All or nothing as far as this call goes: if one write fails, the files this call already wrote are
/// removed and the error (naming the failing file) is returned, so no partial set looks complete.
/// Files that the failed call overwrote from an earlier run are not restored.
pub fn write_maps(
    prefix: &Path,
    gx: &[f64],
    gy: &[f64],
    maps: &DerivedMaps,
    n: usize,
    h: f64,
    centre: (f64, f64),
) -> Result<Vec<PathBuf>, InputError> {
    let history = [format!(
        "kappa, gamma, mu: finite differences of alpha, O(h^4) interior, O(h^2) at edges; |mu| <= {MU_CLAMP:e}"
    )];
    let sets: [(&str, &str, &[f64], &[String]); 6] = [
        ("alpha_x", "arcsec", gx, &[]),
        ("alpha_y", "arcsec", gy, &[]),
        ("kappa", "", &maps.kappa, &history),
        ("gamma1", "", &maps.gamma1, &history),
        ("gamma2", "", &maps.gamma2, &history),
        ("mu", "", &maps.mu, &history),
    ];
    let mut written = Vec::with_capacity(sets.len());
    for (name, unit, values, history) in sets {
        let path = with_suffix(prefix, &format!("_{name}.fits"));
        let data: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        let image = MapImage {
            data: &data,
            nx: n,
            ny: n,
            pixel_arcsec: h,
            centre_x_arcsec: centre.0,
            centre_y_arcsec: centre.1,
            name,
            unit,
            history,
        };
        if let Err(e) = write_map_fits(&path, &image) {
            for done in &written {
                let _ = fs::remove_file(done);
            }
            return Err(e);
        }
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::lens::io::read_map_fits;

    /// Coordinate of pixel k on a grid of side n centred on `c` (the LensProblem::coord convention).
    fn coord(k: usize, n: usize, h: f64, c: f64) -> f64 {
        c + (k as f64 - (n as f64 - 1.0) / 2.0) * h
    }

    #[test]
    fn singular_isothermal_sphere() {
        // SIS of Einstein radius b centred off the grid centre and off pixel centres. The O(h⁴)
        // stencil's leading error on an SIS, at distance r, is at most 1.5·(h/r)⁴ relative in κ (worst
        // along the axes through the centre, from the x⁵ term of x/√(x² + y²)) and 2.1·(h/r)⁴ in |γ|
        // (worst off the axes): 1.5e-4 and 2.1e-4 at 10 px, so 1e-4 holds from 12 px (κ) and 13 px
        // (|γ|) out, not at 10 px. Asserted: those bounds with a small margin at every pixel ≥ 10 px
        // out, which imply 1e-4 for κ from 12 px and for |γ| from 13 px.
        let (n, h, b) = (96, 0.05, 1.3);
        let (x0, y0) = (0.337, -0.211);
        let (mut gx, mut gy) = (vec![0.0; n * n], vec![0.0; n * n]);
        for j in 0..n {
            for i in 0..n {
                let (dx, dy) = (coord(i, n, h, 0.0) - x0, coord(j, n, h, 0.0) - y0);
                let r = dx.hypot(dy);
                gx[j * n + i] = b * dx / r;
                gy[j * n + i] = b * dy / r;
            }
        }
        let m = derived_maps(&gx, &gy, n, h);
        let mut checked = 0;
        // Worst relative errors of κ and |γ|, each also scaled by (r/h)⁴ (the bound's coefficient).
        let (mut worst_k, mut worst_g, mut coef_k, mut coef_g) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for j in 2..n - 2 {
            for i in 2..n - 2 {
                let (dx, dy) = (coord(i, n, h, 0.0) - x0, coord(j, n, h, 0.0) - y0);
                let r = dx.hypot(dy);
                if r < 10.0 * h {
                    continue;
                }
                let p = j * n + i;
                let kappa = b / (2.0 * r);
                let gamma = m.gamma1[p].hypot(m.gamma2[p]);
                let rel_k = (m.kappa[p] - kappa).abs() / kappa;
                let rel_g = (gamma - kappa).abs() / kappa;
                let scale = (h / r).powi(4);
                let (tol_k, tol_g) = (1.6 * scale, 2.2 * scale);
                assert!(
                    rel_k <= tol_k,
                    "kappa at ({i}, {j}): {} vs {kappa}",
                    m.kappa[p]
                );
                assert!(rel_g <= tol_g, "|gamma| at ({i}, {j}): {gamma} vs {kappa}");
                if r >= 12.0 * h {
                    assert!(rel_k < 1e-4);
                }
                if r >= 13.0 * h {
                    assert!(rel_g < 1e-4);
                }
                // μ = 1/(1 − 2κ) diverges on the critical curve (r = b), so compare its inverse, the
                // determinant, within what the tolerances on κ and |γ| allow to first order.
                let det = 1.0 / m.mu[p];
                let det_tol = 2.0 * kappa * (tol_k * (1.0 - kappa).abs() + tol_g * kappa);
                assert!(
                    (det - (1.0 - 2.0 * kappa)).abs() <= det_tol,
                    "1/mu at ({i}, {j}): {det} vs {}",
                    1.0 - 2.0 * kappa
                );
                worst_k = worst_k.max(rel_k);
                worst_g = worst_g.max(rel_g);
                coef_k = coef_k.max(rel_k / scale);
                coef_g = coef_g.max(rel_g / scale);
                checked += 1;
            }
        }
        assert!(checked > 7000, "{checked}");
        eprintln!(
            "SIS: {checked} pixels >= 10 px out; worst relative error kappa {worst_k:.2e} \
             (= {coef_k:.2}·(h/r)^4), |gamma| {worst_g:.2e} (= {coef_g:.2}·(h/r)^4)"
        );
        // No NaN anywhere, even next to the singular centre; |μ| within the cap.
        for v in [&m.kappa, &m.gamma1, &m.gamma2] {
            assert!(v.iter().all(|x| x.is_finite()));
        }
        assert!(m.mu.iter().all(|x| x.abs() <= MU_CLAMP));
    }

    #[test]
    fn constant_deflection_is_exactly_empty() {
        for n in [1, 2, 3, 4, 5, 9] {
            let gx = vec![0.123_456_789_1; n * n];
            let gy = vec![-7.654_321_3; n * n];
            let m = derived_maps(&gx, &gy, n, 0.07);
            for p in 0..n * n {
                assert_eq!(m.kappa[p], 0.0);
                assert_eq!(m.gamma1[p], 0.0);
                assert_eq!(m.gamma2[p], 0.0);
                assert_eq!(m.mu[p], 1.0);
            }
        }
    }

    #[test]
    fn linear_deflection_is_exact_on_edges_too() {
        // α = A·x with symmetric A: every stencil, edges included, is exact for a linear field.
        let (n, h) = (7, 0.25);
        let (axx, axy, ayy) = (0.3, -0.1, 0.2);
        let (mut gx, mut gy) = (vec![0.0; n * n], vec![0.0; n * n]);
        for j in 0..n {
            for i in 0..n {
                let (x, y) = (coord(i, n, h, 1.5), coord(j, n, h, -2.0));
                gx[j * n + i] = axx * x + axy * y + 4.0;
                gy[j * n + i] = axy * x + ayy * y - 1.0;
            }
        }
        let m = derived_maps(&gx, &gy, n, h);
        let (k, g1, g2) = (0.5 * (axx + ayy), 0.5 * (axx - ayy), axy);
        let mu = 1.0 / ((1.0 - k) * (1.0 - k) - g1 * g1 - g2 * g2);
        for p in 0..n * n {
            assert!((m.kappa[p] - k).abs() < 1e-12, "{p}: {}", m.kappa[p]);
            assert!((m.gamma1[p] - g1).abs() < 1e-12, "{p}: {}", m.gamma1[p]);
            assert!((m.gamma2[p] - g2).abs() < 1e-12, "{p}: {}", m.gamma2[p]);
            assert!((m.mu[p] - mu).abs() < 1e-10, "{p}: {}", m.mu[p]);
        }
    }

    #[test]
    fn magnification_is_capped_not_infinite() {
        assert_eq!(magnification(0.5, 0.5, 0.0), MU_CLAMP);
        assert_eq!(magnification(1.0, 0.0, 0.0), MU_CLAMP);
        assert_eq!(magnification(0.5, 0.5 + 1e-12, 0.0), -MU_CLAMP);
        assert_eq!(magnification(0.0, 0.0, 0.0), 1.0);
    }

    fn sample(n: usize) -> (Vec<f64>, Vec<f64>) {
        let gx = (0..n * n).map(|p| (p as f64 * 0.37).sin()).collect();
        let gy = (0..n * n).map(|p| (p as f64 * 0.11).cos() * 2.0).collect();
        (gx, gy)
    }

    const NAMES: [&str; 6] = ["alpha_x", "alpha_y", "kappa", "gamma1", "gamma2", "mu"];

    #[test]
    fn maps_round_trip_through_fits() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("a1689");
        let (n, h, centre) = (6, 0.197_167_968_75, (1.0 / 3.0, -2.5));
        let (gx, gy) = sample(n);
        let m = derived_maps(&gx, &gy, n, h);
        let paths = write_maps(&prefix, &gx, &gy, &m, n, h, centre).unwrap();
        assert_eq!(paths.len(), 6);
        let values: [&[f64]; 6] = [&gx, &gy, &m.kappa, &m.gamma1, &m.gamma2, &m.mu];
        for ((path, name), v) in paths.iter().zip(NAMES).zip(values) {
            assert_eq!(path, &dir.path().join(format!("a1689_{name}.fits")));
            let back = read_map_fits(path).unwrap();
            assert_eq!((back.nx, back.ny), (n, n));
            let expect: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            assert_eq!(back.data, expect, "{name}");
            assert_eq!(back.name, name);
            assert_eq!(
                back.unit,
                if name.starts_with("alpha") {
                    "arcsec"
                } else {
                    ""
                }
            );
            assert_eq!(back.crpix, [3.5, 3.5]);
            assert_eq!(back.crval, [centre.0, centre.1]);
            assert_eq!(back.cdelt, [h, h]);
            assert_eq!(back.cunit, ["arcsec", "arcsec"]);
            // Pixel 0 (1-based 1) lands on x_first = centre − (n − 1)/2·h.
            let x_first = back.crval[0] + (1.0 - back.crpix[0]) * back.cdelt[0];
            assert!((x_first - coord(0, n, h, centre.0)).abs() < 1e-15);
        }
        let mut listed: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        listed.sort_by_key(|e| e.as_ref().unwrap().file_name());
        assert_eq!(listed.len(), 6, "no temporary files left: {listed:?}");
    }

    #[test]
    fn missing_directory_fails_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("absent").join("run");
        let (gx, gy) = sample(4);
        let m = derived_maps(&gx, &gy, 4, 0.1);
        let e = write_maps(&prefix, &gx, &gy, &m, 4, 0.1, (0.0, 0.0)).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }), "{e}");
        assert!(e.to_string().contains("run_alpha_x.fits"), "{e}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn failure_midway_removes_the_maps_already_written() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("run");
        // A directory where the kappa file should go: alpha_x and alpha_y are written first, then the
        // rename onto the directory fails.
        let blocker = dir.path().join("run_kappa.fits");
        fs::create_dir(&blocker).unwrap();
        let (gx, gy) = sample(4);
        let m = derived_maps(&gx, &gy, 4, 0.1);
        let e = write_maps(&prefix, &gx, &gy, &m, 4, 0.1, (0.0, 0.0)).unwrap_err();
        assert!(e.to_string().contains("run_kappa.fits"), "{e}");
        let left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(left, vec![blocker]);
    }

    #[test]
    fn bad_grid_size_is_an_error_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("run");
        let (gx, gy) = sample(4);
        let m = derived_maps(&gx, &gy, 4, 0.1);
        let e = write_maps(&prefix, &gx, &gy, &m, 5, 0.1, (0.0, 0.0)).unwrap_err();
        assert!(matches!(e, InputError::Map { .. }), "{e}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
