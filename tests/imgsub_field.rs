//! The synthetic image-subtraction field: the same seed gives the same images on any thread count; an
//! isolated star holds its truth-table flux; the noise matches the variance image; the changers, saturation,
//! cosmic rays and bad column are where the truth table says; `astroport field` writes the seven files with
//! their WCS and refuses bad flags without writing anything.

mod common;

use astroport::fits_image::read_image;
use astroport::workload::imgsub::field::{
    generate, FieldSpec, Image, Kind, MASK_BAD_COLUMN, MASK_SATURATED,
};

#[test]
fn the_same_seed_gives_the_same_field_on_any_thread_count() {
    let spec = FieldSpec::new(192, 7).unwrap();
    let a = generate(&spec);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let b = one.install(|| generate(&spec));
    assert_eq!(a.sources, b.sources);
    assert_eq!(a.science.data, b.science.data);
    assert_eq!(a.reference.data, b.reference.data);
    assert_eq!(a.science.mask, b.science.mask);
    let c = generate(&FieldSpec::new(192, 8).unwrap());
    assert_ne!(a.science.data, c.science.data);
}

#[test]
fn the_truth_table_has_the_changers_of_the_model() {
    let field = generate(&FieldSpec::new(512, 20_110_101).unwrap());
    let count = |k: Kind| field.sources.iter().filter(|s| s.kind == k).count();
    assert_eq!(count(Kind::Variable), 30);
    assert_eq!(count(Kind::Transient), 20);
    // 2000 stars and 40 galaxies per megapixel (variables are stars).
    assert_eq!(count(Kind::Star) + count(Kind::Variable), 524);
    assert_eq!(count(Kind::Galaxy), 10);
    for s in &field.sources {
        match s.kind {
            Kind::Transient => {
                assert_eq!(s.reference_flux, 0.0);
                assert!(field.change_snr(s) > 0.0);
            }
            Kind::Variable => {
                let c = s.science_flux / (0.5 * s.reference_flux) - 1.0;
                assert!((-0.8..1.5).contains(&c), "{c}");
            }
            Kind::Star | Kind::Galaxy => assert_eq!(s.science_flux, 0.5 * s.reference_flux),
            Kind::CosmicRay => unreachable!("none asked for"),
        }
    }
    let hosted = field.sources.iter().filter(|s| s.host.is_some()).count();
    assert_eq!(hosted, 7);
    // Saturation: clipped at 60,000 e- and masked, nothing above.
    let sat = field.spec.saturation as f32;
    assert!(field.reference.data.iter().all(|&v| v <= sat));
    let masked = field
        .reference
        .mask
        .iter()
        .filter(|&&m| m & MASK_SATURATED != 0)
        .count();
    let at_level = field.reference.data.iter().filter(|&&v| v == sat).count();
    assert!(masked > 0 && masked == at_level, "{masked} {at_level}");
}

/// Stars and a galaxy placed by hand: the sky-subtracted light in an aperture around each star is its flux
/// times the PSF's sampled density there, within 5 sigma of the variance image, in both images; the galaxy
/// holds its flux in a wide aperture; and away from them the normalised residual of the sky has mean 0 and
/// standard deviation 1.
#[test]
fn light_and_noise_match_the_truth_and_the_variance() {
    use astroport::workload::imgsub::field::{render, Disk, Source};
    let mut spec = FieldSpec::new(320, 11).unwrap();
    spec.saturation = 1e9;
    let star = |id: usize, x: f64, y: f64, flux: f64| Source {
        id,
        kind: Kind::Star,
        x,
        y,
        reference_flux: flux,
        science_flux: 0.5 * flux,
        disk: None,
        host: None,
    };
    let mut sources = vec![
        star(0, 60.3, 70.8, 4e4),
        star(1, 250.6, 60.1, 2e5),
        star(2, 70.0, 250.5, 3e3),
    ];
    sources.push(Source {
        disk: Some(Disk {
            half_light_radius: 3.0,
            axis_ratio: 0.5,
            angle: 0.7,
        }),
        kind: Kind::Galaxy,
        ..star(3, 240.4, 230.2, 1e5)
    });
    let field = render(&spec, sources.clone());
    let n = spec.size;
    for image in [Image::Reference, Image::Science] {
        let rendered = match image {
            Image::Reference => &field.reference,
            Image::Science => &field.science,
        };
        let aperture = |s: &Source, radius: f64| {
            let psf = spec.psf_at(image, s.x, s.y);
            let (mut light, mut var, mut density) = (0.0, 0.0, 0.0);
            let (cx, cy) = (s.x.round() as i64, s.y.round() as i64);
            let r = radius as i64 + 1;
            for j in cy - r..=cy + r {
                for i in cx - r..=cx + r {
                    if ((i - cx) as f64).hypot((j - cy) as f64) > radius {
                        continue;
                    }
                    let at = j as usize * n + i as usize;
                    light += rendered.data[at] as f64 - spec.sky_at(image, i as f64, j as f64);
                    var += rendered.variance[at] as f64;
                    density += psf.density(i as f64 - s.x, j as f64 - s.y);
                }
            }
            (light, var.sqrt(), density)
        };
        for s in &sources {
            let flux = match image {
                Image::Reference => s.reference_flux,
                Image::Science => s.science_flux,
            };
            let (light, sigma, density) = aperture(s, 15.0);
            let expected = if s.disk.is_some() {
                // A galaxy: nearly all its light within 30 px.
                let (wide, wide_sigma, _) = aperture(s, 30.0);
                assert!(
                    (wide - 0.99 * flux).abs() < 5.0 * wide_sigma + 0.01 * flux,
                    "{image:?} galaxy: {wide} of {flux}"
                );
                continue;
            } else {
                flux * density
            };
            assert!(
                (light - expected).abs() < 5.0 * sigma + 1e-3 * expected,
                "{image:?} star {}: {light} against {expected} (sigma {sigma})",
                s.id
            );
        }
        // The sky 40 px or more from every source.
        let (mut sum, mut sum2, mut count) = (0.0, 0.0, 0usize);
        for j in 0..n {
            for i in 0..n {
                let (x, y) = (i as f64, j as f64);
                if sources.iter().any(|o| (o.x - x).hypot(o.y - y) < 40.0) {
                    continue;
                }
                let at = j * n + i;
                let z = (rendered.data[at] as f64 - spec.sky_at(image, x, y))
                    / (rendered.variance[at] as f64).sqrt();
                sum += z;
                sum2 += z * z;
                count += 1;
            }
        }
        let mean = sum / count as f64;
        let sd = (sum2 / count as f64 - mean * mean).sqrt();
        assert!(count > 50_000, "{count}");
        assert!(
            mean.abs() < 5.0 / (count as f64).sqrt(),
            "{image:?} mean {mean} over {count}"
        );
        assert!((sd - 1.0).abs() < 0.01, "{image:?} sd {sd}");
    }
}

#[test]
fn field_writes_seven_files_with_their_wcs_and_the_same_bytes_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    for out in [&a, &b] {
        let (code, stdout, err) = common::astroport(&[
            "field",
            "--size",
            "128",
            "--seed",
            "3",
            "--cosmic-rays",
            "100",
            "--bad-column",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(stdout.contains("20 transients"), "{stdout}");
    }
    for name in astroport::workload::imgsub::io::FILES {
        let (x, y) = (
            std::fs::read(a.join(name)).unwrap(),
            std::fs::read(b.join(name)).unwrap(),
        );
        assert!(x == y, "{name} differs between two runs");
    }
    let sci = read_image(&a.join("sci.fits")).unwrap();
    assert_eq!((sci.nx, sci.ny), (128, 128));
    assert_eq!(sci.card("CTYPE1"), Some("RA---TAN"));
    assert_eq!(sci.card("BUNIT"), Some("electron"));
    assert_eq!(sci.real("SATURATE"), Some(60000.0));
    assert!(
        sci.history.iter().any(|h| h.contains("--seed 3")),
        "{:?}",
        sci.history
    );
    let mask = read_image(&a.join("sci.mask.fits")).unwrap();
    let column = 128 / 3;
    assert!((0..128).all(|j| mask.data[j * 128 + column] as u8 & MASK_BAD_COLUMN != 0));
    let truth = std::fs::read_to_string(a.join("truth.csv")).unwrap();
    let rows = truth.lines().count() - 1;
    assert_eq!(Some(rows as f64), sci.real("NSOURCE"));
    assert!(truth
        .lines()
        .next()
        .unwrap()
        .starts_with("id,kind,x,y,reference_flux"));
    assert!(truth.lines().any(|l| l.contains(",cosmic_ray,")));
    // No staging folder is left behind.
    assert_eq!(std::fs::read_dir(&a).unwrap().count(), 7);
}

#[test]
fn bad_flags_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let (code, _, err) = common::astroport(&["field", "--size", "10", "--out", out]);
    assert_eq!(code, 2);
    assert!(err.contains("--size 10"), "{err}");
    let (code, _, err) =
        common::astroport(&["field", "--size", "64", "--cosmic-rays=-1", "--out", out]);
    assert_eq!(code, 2);
    assert!(err.contains("--cosmic-rays"), "{err}");
    let missing = dir.path().join("nowhere");
    let (code, _, err) = common::astroport(&["field", "--out", missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("--out") && err.contains("nowhere"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
