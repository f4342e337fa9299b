//! Criterion micro-benchmark of the `cpu` model's lens gradient (tiny preset). The portability report
//! itself comes from `astroport bench`; this guards the CPU path against regressions.

use astroport::backend::Precision;
use astroport::workload::lens::{LensOptions, LensProblem, Preset};
use astroport::workload::Workload;
use criterion::{criterion_group, criterion_main, Criterion};

fn lens_cpu(c: &mut Criterion) {
    let problem = LensProblem::preset(Preset::Tiny, &LensOptions::default()).expect("tiny preset");
    for p in Precision::ALL {
        c.bench_function(&format!("lens tiny cpu {p}"), |b| {
            b.iter(|| problem.run_cpu(p))
        });
    }
}

criterion_group!(benches, lens_cpu);
criterion_main!(benches);
