//! Criterion micro-benchmark of the `cpu` model's convolution (convolve.rs) of an image and its variance:
//! the exact varying kernel, the seed's 19 × 19 tiles and a constant kernel (the matched filter's). The size
//! is ASTROPORT_BENCH_SIZE (default 1024; 10240 is the field). The portability report itself comes
//! from `astroport run imgsub`; this times the arithmetic alone, without the float64 check.

use astroport::workload::imgsub::convolve::{convolve, Kernel};
use criterion::{criterion_group, criterion_main, Criterion};
use rand::{Rng, SeedableRng};

/// Deterministic values in [0, 1) from a fixed seed.
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    (0..n).map(|_| rng.random::<f32>()).collect()
}

fn imgsub_convolve(c: &mut Criterion) {
    let n: usize = std::env::var("ASTROPORT_BENCH_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let (image, variance) = (noise(n * n, 1), noise(n * n, 2));
    let kbar: Vec<f32> = noise(441 * 6, 3).iter().map(|v| v * 1e-3).collect();
    let taps: Vec<f32> = kbar.iter().step_by(6).copied().collect();
    let coordinate = |i: usize| i as f32 / (n - 1) as f32 * 2.0 - 1.0;
    let xh: Vec<f32> = (0..n).map(coordinate).collect();
    let tile = 19;
    let centre = |i: usize| coordinate(((i / tile) * tile + tile / 2).min(n - 1));
    let xt: Vec<f32> = (0..n).map(centre).collect();
    let (mut out_c, mut out_w) = (vec![0f32; n * n], vec![0f32; n * n]);
    let kernels = [
        (
            "varying",
            Kernel::Varying {
                kbar: &kbar,
                xh: &xh,
                yh: &xh,
            },
        ),
        (
            "tiled 19",
            Kernel::Tiled {
                kbar: &kbar,
                xh: &xt,
                yh: &xt,
                tile,
            },
        ),
        ("constant", Kernel::Constant { taps: &taps }),
    ];
    let mut group = c.benchmark_group(format!("imgsub convolve {n}² f32"));
    group.sample_size(10);
    for (name, kernel) in kernels {
        group.bench_function(name, |b| {
            b.iter(|| {
                convolve(
                    n,
                    n,
                    &image,
                    &variance,
                    kernel,
                    [&mut out_c, &mut out_w],
                    |_, c, w, [co, wo]: [&mut [f32]; 2]| {
                        co.copy_from_slice(c);
                        wo.copy_from_slice(w);
                    },
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, imgsub_convolve);
criterion_main!(benches);
