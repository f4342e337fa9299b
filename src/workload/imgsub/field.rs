//! The synthetic field: a registered reference and science image of the same sky, with known stars,
//! galaxies, variables and transients, so a subtraction can be scored without any other tool. The model
//! follows the project's anchor field (research/imgsub.md §4): Moffat PSFs that widen towards the corners,
//! the science PSF broader and elliptical with a turning position angle; the reference twice as deep; a sky
//! gradient, Poisson and read noise, saturation; 2000 stars and 40 galaxies per megapixel; 30 variables and
//! 20 transients, a third of them on galaxies; optionally cosmic rays and a hot column in the science image.
//!
//! Everything comes from one seed and does not depend on the thread count: sources are drawn in one
//! sequence, each image is rendered in bands of rows that each add the same sources in the same order, and
//! the noise of each row comes from a generator seeded by (seed, image, row).

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Poisson};
use rand_pcg::Pcg64;
use rayon::prelude::*;
use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

/// Largest side accepted: generating a 16k field takes about 13 GB of memory (5.1 GB measured at 10k).
pub const MAX_SIZE: usize = 16_384;
/// Smallest side: a field must hold the 50 changers away from the edges.
pub const MIN_SIZE: usize = 64;

/// A Moffat PSF and how it changes across the field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsfModel {
    /// FWHM at the field centre, pixels.
    pub fwhm: f64,
    pub beta: f64,
    /// Minor over major axis (1: round).
    pub axis_ratio: f64,
    /// Position angle of the major axis at the left edge, degrees from +x towards +y.
    pub angle_deg: f64,
    /// How far the angle turns from the left edge to the right edge, degrees.
    pub angle_turn_deg: f64,
}

/// What the generator makes; [`FieldSpec::new`] gives the anchor field's values.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    pub size: usize,
    pub seed: u64,
    pub reference_psf: PsfModel,
    pub science_psf: PsfModel,
    /// Relative FWHM growth from the centre to a corner (both images): FWHM·(1 + w·ρ²), ρ = 1 at a corner.
    pub corner_widening: f64,
    /// Sky at the centre, electrons per pixel: reference, science.
    pub sky: (f64, f64),
    /// Relative sky change from one edge to the other (a plane, along x + y).
    pub sky_gradient: f64,
    pub read_noise: f64,
    /// Pixels at or above this many electrons are saturated: clipped and masked.
    pub saturation: f64,
    /// Science over reference flux of a static source (the reference is deeper).
    pub flux_ratio: f64,
    pub stars_per_mpx: f64,
    pub galaxies_per_mpx: f64,
    pub variables: usize,
    pub transients: usize,
    /// Cosmic rays per megapixel in the science image (0: none).
    pub cosmic_rays_per_mpx: f64,
    /// A hot column in the science image (masked).
    pub bad_column: bool,
}

impl FieldSpec {
    /// The anchor field of research/imgsub.md §4 at this size and seed, without cosmic rays or bad column.
    pub fn new(size: usize, seed: u64) -> Result<FieldSpec, String> {
        if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
            return Err(format!(
                "--size {size}: a field is {MIN_SIZE} to {MAX_SIZE} pixels on a side"
            ));
        }
        Ok(FieldSpec {
            size,
            seed,
            reference_psf: PsfModel {
                fwhm: 2.4,
                beta: 3.5,
                axis_ratio: 1.0,
                angle_deg: 0.0,
                angle_turn_deg: 0.0,
            },
            science_psf: PsfModel {
                fwhm: 3.6,
                beta: 3.0,
                axis_ratio: 0.85,
                angle_deg: 20.0,
                angle_turn_deg: 60.0,
            },
            corner_widening: 0.15,
            sky: (500.0, 800.0),
            sky_gradient: 0.08,
            read_noise: 5.0,
            saturation: 60_000.0,
            flux_ratio: 0.5,
            stars_per_mpx: 2000.0,
            galaxies_per_mpx: 40.0,
            variables: 30,
            transients: 20,
            cosmic_rays_per_mpx: 0.0,
            bad_column: false,
        })
    }

    /// The PSF of one image at pixel (x, y): FWHM, axis ratio and angle (radians).
    pub fn psf_at(&self, image: Image, x: f64, y: f64) -> LocalPsf {
        let m = match image {
            Image::Reference => self.reference_psf,
            Image::Science => self.science_psf,
        };
        let half = (self.size as f64 - 1.0) / 2.0;
        let rho2 = ((x - half).powi(2) + (y - half).powi(2)) / (2.0 * half * half);
        let fwhm = m.fwhm * (1.0 + self.corner_widening * rho2);
        let angle = (m.angle_deg + m.angle_turn_deg * x / (self.size as f64 - 1.0)).to_radians();
        LocalPsf::new(fwhm, m.beta, m.axis_ratio, angle)
    }

    /// The sky of one image at pixel (x, y), electrons.
    pub fn sky_at(&self, image: Image, x: f64, y: f64) -> f64 {
        let level = match image {
            Image::Reference => self.sky.0,
            Image::Science => self.sky.1,
        };
        let n = self.size as f64 - 1.0;
        level * (1.0 + self.sky_gradient * ((x + y) / (2.0 * n) - 0.5))
    }
}

/// Which image of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    Reference,
    Science,
}

/// An elliptical Moffat profile at one place, normalised to unit integral over the plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalPsf {
    pub fwhm: f64,
    pub beta: f64,
    /// Axis ratio: r² = q·u² + v²/q along the major (u) and minor (v) axes, so the widths are FWHM/√q and
    /// FWHM·√q (their geometric mean is the FWHM) and the integral stays 1.
    q: f64,
    cos: f64,
    sin: f64,
    alpha2: f64,
}

impl LocalPsf {
    pub fn new(fwhm: f64, beta: f64, axis_ratio: f64, angle: f64) -> LocalPsf {
        let alpha = fwhm / (2.0 * (2f64.powf(1.0 / beta) - 1.0).sqrt());
        LocalPsf {
            fwhm,
            beta,
            q: axis_ratio,
            cos: angle.cos(),
            sin: angle.sin(),
            alpha2: alpha * alpha,
        }
    }

    /// Surface density at offset (dx, dy) pixels (unit integral).
    pub fn density(&self, dx: f64, dy: f64) -> f64 {
        let u = dx * self.cos + dy * self.sin;
        let v = -dx * self.sin + dy * self.cos;
        let r2 = u * u * self.q + v * v / self.q;
        (self.beta - 1.0) / (std::f64::consts::PI * self.alpha2)
            * (1.0 + r2 / self.alpha2).powf(-self.beta)
    }

    /// Radius beyond which a source of `flux` electrons adds less than a tenth of an electron per pixel,
    /// between 5 FWHM (so at most 0.2 % of a faint star's light is left out) and 120 pixels.
    pub fn radius_for(&self, flux: f64) -> usize {
        let peak = (self.beta - 1.0) / (std::f64::consts::PI * self.alpha2);
        // (1 + r²/α²)^-β · peak · flux = 0.1 on the major axis (stretched by 1/√q).
        let ratio = (flux * peak / 0.1).max(1.0);
        let r = (self.alpha2 * (ratio.powf(1.0 / self.beta) - 1.0)).sqrt() / self.q.sqrt();
        (r.ceil() as usize).clamp((5.0 * self.fwhm).ceil() as usize, 120)
    }
}

/// What a truth-table entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Star,
    Galaxy,
    /// A star whose science flux differs from flux_ratio × its reference flux.
    Variable,
    /// A source in the science image only.
    Transient,
    /// A cosmic-ray hit in the science image (not a source; listed so false positives can be told apart).
    CosmicRay,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Star => "star",
            Kind::Galaxy => "galaxy",
            Kind::Variable => "variable",
            Kind::Transient => "transient",
            Kind::CosmicRay => "cosmic_ray",
        }
    }
}

/// An exponential disk: half-light radius (pixels), axis ratio and angle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Disk {
    pub half_light_radius: f64,
    pub axis_ratio: f64,
    pub angle: f64,
}

/// One entry of the truth table. Positions are 0-based pixel centres (FITS pixel = x + 1); fluxes are
/// total electrons in each image.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub id: usize,
    pub kind: Kind,
    pub x: f64,
    pub y: f64,
    pub reference_flux: f64,
    pub science_flux: f64,
    /// A galaxy's shape (None: a point source).
    pub disk: Option<Disk>,
    /// The galaxy a transient sits on.
    pub host: Option<usize>,
}

/// The generated pair and its truth.
#[derive(Debug, Clone)]
pub struct Field {
    pub spec: FieldSpec,
    pub sources: Vec<Source>,
    pub reference: Rendered,
    pub science: Rendered,
}

/// One image: electrons with noise (saturated pixels clipped), the expected variance of each pixel (sky,
/// sources and read noise, before clipping) and a mask.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub data: Vec<f32>,
    pub variance: Vec<f32>,
    pub mask: Vec<u8>,
}

/// Mask bits.
pub const MASK_SATURATED: u8 = 1;
pub const MASK_BAD_COLUMN: u8 = 2;

/// Whether a pixel of `mask` (nx × ny) within `radius` px of (x, y) has the `MASK_SATURATED` bit: the
/// scores' saturated zones and the detector's saturation halo.
pub fn saturated_within(mask: &[u8], nx: usize, ny: usize, x: i64, y: i64, radius: f64) -> bool {
    let r = radius.floor() as i64;
    (-r..=r).any(|j| {
        (-r..=r).any(|i| {
            let (px, py) = (x + i, y + j);
            (i * i + j * j) as f64 <= radius * radius
                && px >= 0
                && py >= 0
                && px < nx as i64
                && py < ny as i64
                && mask[py as usize * nx + px as usize] & MASK_SATURATED != 0
        })
    })
}

/// Draws the sources of a field (the truth) from its seed.
pub fn draw_sources(spec: &FieldSpec) -> Vec<Source> {
    let mut rng = Pcg64::seed_from_u64(spec.seed);
    let n = spec.size as f64;
    let mpx = n * n / 1e6;
    let margin = 4.0;
    let position = |rng: &mut Pcg64| {
        (
            rng.random_range(margin..n - 1.0 - margin),
            rng.random_range(margin..n - 1.0 - margin),
        )
    };
    let mut sources = Vec::new();
    // Stars: counts N(>F) ∝ F^-0.75 (dN/dm ∝ 10^(0.3 m), as at high galactic latitude) from 300 e- (below
    // detection) to 3e6 e- (far into saturation): about 8 saturated stars per megapixel in the reference.
    let stars = (spec.stars_per_mpx * mpx).round() as usize;
    let slope = 0.75;
    for _ in 0..stars {
        let (x, y) = position(&mut rng);
        let u: f64 = rng.random_range(0.0..1.0);
        let tail = 1.0 - u * (1.0 - (300.0f64 / 3e6).powf(slope));
        let flux = (300.0 * tail.powf(-1.0 / slope)).min(3e6);
        sources.push(Source {
            id: sources.len(),
            kind: Kind::Star,
            x,
            y,
            reference_flux: flux,
            science_flux: spec.flux_ratio * flux,
            disk: None,
            host: None,
        });
    }
    let galaxies = (spec.galaxies_per_mpx * mpx).round().max(7.0) as usize;
    for _ in 0..galaxies {
        let (x, y) = position(&mut rng);
        let flux = 10f64.powf(rng.random_range(3.5..5.5));
        let disk = Disk {
            half_light_radius: 10f64.powf(rng.random_range(0.2..0.7)),
            axis_ratio: rng.random_range(0.35..1.0),
            angle: rng.random_range(0.0..std::f64::consts::PI),
        };
        sources.push(Source {
            id: sources.len(),
            kind: Kind::Galaxy,
            x,
            y,
            reference_flux: flux,
            science_flux: spec.flux_ratio * flux,
            disk: Some(disk),
            host: None,
        });
    }
    // Variables: stars neither faint nor near saturation, changed by −80 % to +150 % (fewer than asked
    // only in fields too small to hold that many such stars).
    let candidates: Vec<usize> = (0..stars)
        .filter(|&i| (3e3..2e5).contains(&sources[i].reference_flux))
        .collect();
    let mut chosen: Vec<usize> = Vec::new();
    while chosen.len() < spec.variables.min(candidates.len()) {
        let k = candidates[rng.random_range(0..candidates.len())];
        if !chosen.contains(&k) {
            chosen.push(k);
        }
    }
    for k in chosen {
        let change = rng.random_range(-0.8..1.5);
        let s = &mut sources[k];
        s.kind = Kind::Variable;
        s.science_flux = spec.flux_ratio * s.reference_flux * (1.0 + change);
    }
    // Transients: a third on a galaxy (within its half-light radius), the rest anywhere.
    let first_galaxy = stars;
    for t in 0..spec.transients {
        let host = (t % 3 == 0).then(|| first_galaxy + rng.random_range(0..galaxies));
        let (x, y) = match host {
            Some(g) => {
                let (gx, gy, r) = (
                    sources[g].x,
                    sources[g].y,
                    sources[g].disk.map_or(1.0, |d| d.half_light_radius),
                );
                let (a, d) = (
                    rng.random_range(0.0..std::f64::consts::TAU),
                    r * rng.random_range(0.0..1.0f64).sqrt(),
                );
                (
                    (gx + d * a.cos()).clamp(margin, n - 1.0 - margin),
                    (gy + d * a.sin()).clamp(margin, n - 1.0 - margin),
                )
            }
            None => position(&mut rng),
        };
        let flux = spec.flux_ratio * 10f64.powf(rng.random_range(3.4..5.0));
        sources.push(Source {
            id: sources.len(),
            kind: Kind::Transient,
            x,
            y,
            reference_flux: 0.0,
            science_flux: flux,
            disk: None,
            host,
        });
    }
    let rays = (spec.cosmic_rays_per_mpx * mpx).round() as usize;
    for _ in 0..rays {
        let (x, y) = position(&mut rng);
        let energy = 10f64.powf(rng.random_range(3.5..4.7));
        sources.push(Source {
            id: sources.len(),
            kind: Kind::CosmicRay,
            x: x.round(),
            y: y.round(),
            reference_flux: 0.0,
            science_flux: energy,
            disk: None,
            host: None,
        });
    }
    sources
}

/// A source's light per unit flux on a square stamp of side 2·radius + 1 centred on pixel (cx, cy): the
/// PSF sampled at pixel centres, not renormalised, so the image holds the light the stamp reaches and the
/// faint wing beyond it (under 0.1 e- per pixel) is left out.
struct Stamp {
    cx: i64,
    cy: i64,
    radius: i64,
    values: Vec<f64>,
}

impl Stamp {
    fn point(psf: &LocalPsf, x: f64, y: f64, radius: usize) -> Stamp {
        let (cx, cy) = (x.round() as i64, y.round() as i64);
        let r = radius as i64;
        let side = 2 * r + 1;
        let mut values = Vec::with_capacity((side * side) as usize);
        for j in -r..=r {
            for i in -r..=r {
                values.push(psf.density((cx + i) as f64 - x, (cy + j) as f64 - y));
            }
        }
        Stamp {
            cx,
            cy,
            radius: r,
            values,
        }
    }

    /// An exponential disk (its sampled light normalised to 1) convolved with the sampled PSF by FFT on a
    /// padded square.
    fn galaxy(psf: &LocalPsf, x: f64, y: f64, disk: &Disk) -> Stamp {
        let reach = (5.0 * disk.half_light_radius / disk.axis_ratio.sqrt() + 4.0 * psf.fwhm).ceil();
        let r = reach as i64;
        let side = ((4 * r + 2) as usize).next_power_of_two();
        let (cx, cy) = (x.round() as i64, y.round() as i64);
        // Exponential profile exp(−1.678 r/r_e), sampled 3×3 within each pixel.
        let (c, s) = (disk.angle.cos(), disk.angle.sin());
        let scale = 1.678 / disk.half_light_radius;
        let mut galaxy = vec![Complex::new(0.0, 0.0); side * side];
        let mut kernel = vec![Complex::new(0.0, 0.0); side * side];
        let half = side as i64 / 2;
        for j in -r..=r {
            for i in -r..=r {
                let mut v = 0.0;
                for sj in [-1.0 / 3.0, 0.0, 1.0 / 3.0] {
                    for si in [-1.0 / 3.0, 0.0, 1.0 / 3.0] {
                        let dx = (cx + i) as f64 + si - x;
                        let dy = (cy + j) as f64 + sj - y;
                        let u = dx * c + dy * s;
                        let w = -dx * s + dy * c;
                        let rr = (u * u * disk.axis_ratio + w * w / disk.axis_ratio).sqrt();
                        v += (-scale * rr).exp();
                    }
                }
                galaxy[((j + half) as usize) * side + (i + half) as usize].re = v;
                // The PSF with its centre at index (0, 0), wrapped.
                let (wi, wj) = (i.rem_euclid(side as i64), j.rem_euclid(side as i64));
                kernel[wj as usize * side + wi as usize].re = psf.density(i as f64, j as f64);
            }
        }
        let total: f64 = galaxy.iter().map(|v| v.re).sum();
        galaxy.iter_mut().for_each(|v| v.re /= total);
        fft2(&mut galaxy, side, false);
        fft2(&mut kernel, side, false);
        for (g, k) in galaxy.iter_mut().zip(&kernel) {
            *g *= k;
        }
        fft2(&mut galaxy, side, true);
        let stamp_side = 2 * r + 1;
        let mut values = Vec::with_capacity((stamp_side * stamp_side) as usize);
        for j in -r..=r {
            for i in -r..=r {
                values.push(
                    galaxy[((j + half) as usize) * side + (i + half) as usize]
                        .re
                        .max(0.0),
                );
            }
        }
        Stamp {
            cx,
            cy,
            radius: r,
            values,
        }
    }

    /// Adds flux × stamp into rows [row0, row0 + rows) of an n-wide band.
    fn add_to(&self, flux: f64, band: &mut [f64], n: usize, row0: usize) {
        let rows = band.len() / n;
        let side = 2 * self.radius + 1;
        for j in -self.radius..=self.radius {
            let y = self.cy + j;
            if y < row0 as i64 || y >= (row0 + rows) as i64 {
                continue;
            }
            let line = &mut band[(y as usize - row0) * n..][..n];
            let stamp_row = &self.values[((j + self.radius) * side) as usize..][..side as usize];
            for (k, v) in stamp_row.iter().enumerate() {
                let x = self.cx - self.radius + k as i64;
                if (0..n as i64).contains(&x) {
                    line[x as usize] += flux * v;
                }
            }
        }
    }

    fn rows(&self) -> std::ops::RangeInclusive<i64> {
        self.cy - self.radius..=self.cy + self.radius
    }
}

/// In-place 2-D FFT of a side×side grid (unnormalised forward; the inverse divides by side²).
fn fft2(data: &mut [Complex<f64>], side: usize, inverse: bool) {
    let mut planner = FftPlanner::new();
    let fft = if inverse {
        planner.plan_fft_inverse(side)
    } else {
        planner.plan_fft_forward(side)
    };
    for row in data.chunks_exact_mut(side) {
        fft.process(row);
    }
    let mut column = vec![Complex::new(0.0, 0.0); side];
    for i in 0..side {
        for j in 0..side {
            column[j] = data[j * side + i];
        }
        fft.process(&mut column);
        for j in 0..side {
            data[j * side + i] = column[j];
        }
    }
    if inverse {
        let scale = 1.0 / (side * side) as f64;
        data.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Rows rendered together (the unit of parallel work).
const BAND_ROWS: usize = 32;

/// The noiseless light of one image (sources, no sky), electrons: every band adds the same stamps in the
/// same order.
fn light(spec: &FieldSpec, sources: &[Source], image: Image) -> Vec<f64> {
    let n = spec.size;
    let flux = |s: &Source| match image {
        Image::Reference => s.reference_flux,
        Image::Science => s.science_flux,
    };
    // Cosmic rays are not light through the optics: added with the noise.
    let stamps: Vec<(f64, Stamp)> = sources
        .par_iter()
        .filter(|s| s.kind != Kind::CosmicRay && flux(s) > 0.0)
        .map(|s| {
            let psf = spec.psf_at(image, s.x, s.y);
            let stamp = match &s.disk {
                Some(d) => Stamp::galaxy(&psf, s.x, s.y, d),
                None => Stamp::point(&psf, s.x, s.y, psf.radius_for(flux(s))),
            };
            (flux(s), stamp)
        })
        .collect();
    let mut out = vec![0.0f64; n * n];
    out.par_chunks_mut(BAND_ROWS * n)
        .enumerate()
        .for_each(|(b, band)| {
            let row0 = b * BAND_ROWS;
            let rows = (band.len() / n) as i64;
            for (f, stamp) in &stamps {
                let span = stamp.rows();
                if *span.end() >= row0 as i64 && *span.start() < row0 as i64 + rows {
                    stamp.add_to(*f, band, n, row0);
                }
            }
        });
    out
}

/// A row's noise generator: independent of the thread that renders the row.
fn row_rng(seed: u64, image: Image, row: usize) -> Pcg64 {
    let tag = match image {
        Image::Reference => 0x5245_4600u64,
        Image::Science => 0x5343_4900u64,
    };
    // SplitMix64 of the three, so neighbouring rows get unrelated streams.
    let mut z = seed ^ tag.rotate_left(40) ^ (row as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    Pcg64::seed_from_u64(z ^ (z >> 31))
}

/// Sky plus light, Poisson and read noise, cosmic rays and the hot column (science), saturation.
fn expose(spec: &FieldSpec, sources: &[Source], image: Image) -> Rendered {
    let n = spec.size;
    let light = light(spec, sources, image);
    let mut data = vec![0f32; n * n];
    let mut variance = vec![0f32; n * n];
    let mut mask = vec![0u8; n * n];
    let read = Normal::new(0.0, spec.read_noise).expect("read noise is finite");
    data.par_chunks_mut(n)
        .zip(variance.par_chunks_mut(n))
        .enumerate()
        .for_each(|(j, (row, var))| {
            let mut rng = row_rng(spec.seed, image, j);
            for i in 0..n {
                let expected = spec.sky_at(image, i as f64, j as f64) + light[j * n + i];
                let counts = match Poisson::new(expected) {
                    Ok(p) => p.sample(&mut rng),
                    Err(_) => expected,
                };
                row[i] = (counts + read.sample(&mut rng)) as f32;
                var[i] = (expected + spec.read_noise * spec.read_noise) as f32;
            }
        });
    if image == Image::Science {
        for s in sources.iter().filter(|s| s.kind == Kind::CosmicRay) {
            // A short track: the hit pixel and, for some, one neighbour.
            let (x, y) = (s.x as usize, s.y as usize);
            data[y * n + x] += s.science_flux as f32;
            if s.id % 2 == 1 && x + 1 < n {
                data[y * n + x + 1] += 0.4 * s.science_flux as f32;
            }
        }
        if spec.bad_column {
            let x = n / 3;
            for j in 0..n {
                data[j * n + x] = spec.saturation as f32;
                mask[j * n + x] |= MASK_BAD_COLUMN;
            }
        }
    }
    for (v, m) in data.iter_mut().zip(mask.iter_mut()) {
        if *v >= spec.saturation as f32 {
            *v = spec.saturation as f32;
            *m |= MASK_SATURATED;
        }
    }
    Rendered {
        data,
        variance,
        mask,
    }
}

/// Generates the whole field: sources, then both images.
pub fn generate(spec: &FieldSpec) -> Field {
    render(spec, draw_sources(spec))
}

/// Both images of the given sources (positions inside the field) under the spec's optics, sky and noise:
/// for injecting sources of one's own.
pub fn render(spec: &FieldSpec, sources: Vec<Source>) -> Field {
    let reference = expose(spec, &sources, Image::Reference);
    let science = expose(spec, &sources, Image::Science);
    Field {
        spec: spec.clone(),
        sources,
        reference,
        science,
    }
}

impl Field {
    /// The matched-filter signal-to-noise of a source's change (science − flux_ratio × reference) in a
    /// difference image, from the science PSF at its place and the noise of both images there (sky and read
    /// noise; the reference's noise scaled by flux_ratio², as a subtraction that matches the PSFs leaves it).
    pub fn change_snr(&self, s: &Source) -> f64 {
        let spec = &self.spec;
        let change = s.science_flux - spec.flux_ratio * s.reference_flux;
        if s.kind == Kind::CosmicRay || change == 0.0 {
            return 0.0;
        }
        let psf = spec.psf_at(Image::Science, s.x, s.y);
        let rn2 = spec.read_noise * spec.read_noise;
        let noise = spec.sky_at(Image::Science, s.x, s.y)
            + rn2
            + spec.flux_ratio.powi(2) * (spec.sky_at(Image::Reference, s.x, s.y) + rn2);
        let stamp = Stamp::point(&psf, s.x, s.y, psf.radius_for(1e4));
        let sum_p2: f64 = stamp.values.iter().map(|p| p * p).sum();
        change.abs() * (sum_p2 / noise).sqrt()
    }

    /// Whether the brightest pixel of a source would saturate in either image (sky included).
    pub fn saturates(&self, s: &Source) -> bool {
        let n = self.spec.size;
        let (x, y) = (s.x.round() as usize, s.y.round() as usize);
        let at = y.min(n - 1) * n + x.min(n - 1);
        (self.reference.mask[at] | self.science.mask[at]) & MASK_SATURATED != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psf_density_integrates_to_one_and_has_its_fwhm() {
        let psf = LocalPsf::new(3.6, 3.0, 0.85, 0.4);
        let mut sum = 0.0;
        let h = 0.05;
        for j in -800..=800 {
            for i in -800..=800 {
                sum += psf.density(i as f64 * h, j as f64 * h) * h * h;
            }
        }
        // The Moffat wings beyond 40 px hold about (α/r)^(2β−2) of the light.
        assert!((sum - 1.0).abs() < 2e-3, "{sum}");
        let round = LocalPsf::new(2.4, 3.5, 1.0, 0.0);
        let peak = round.density(0.0, 0.0);
        let half = round.density(1.2, 0.0);
        assert!((half / peak - 0.5).abs() < 1e-12, "{}", half / peak);
    }

    #[test]
    fn galaxy_stamps_hold_all_their_light_centred() {
        let psf = LocalPsf::new(3.0, 3.0, 1.0, 0.0);
        let disk = Disk {
            half_light_radius: 3.0,
            axis_ratio: 0.6,
            angle: 0.5,
        };
        let stamp = Stamp::galaxy(&psf, 50.3, 40.0, &disk);
        let sum: f64 = stamp.values.iter().sum();
        // The PSF's sampled light within the stamp: all but its far wing.
        assert!(sum < 1.0 && sum > 0.99, "{sum}");
        // The light's centroid sits at the galaxy's position.
        let side = 2 * stamp.radius + 1;
        let (mut mx, mut my) = (0.0, 0.0);
        for (k, v) in stamp.values.iter().enumerate() {
            let (i, j) = (k as i64 % side, k as i64 / side);
            mx += v * (stamp.cx - stamp.radius + i) as f64;
            my += v * (stamp.cy - stamp.radius + j) as f64;
        }
        let (mx, my) = (mx / sum, my / sum);
        assert!(
            (mx - 50.3).abs() < 0.02 && (my - 40.0).abs() < 0.02,
            "{mx} {my}"
        );
    }
}
