//! Criterion micro-benchmark of the `cpu` model's lens gradient (tiny preset). The portability report
//! itself comes from `astroport bench`; this guards the CPU path against regressions.

use astroport::exec::SinglePass;
use astroport::workload::lens::{LensMode, LensOptions, LensProblem, Preset};
use criterion::{criterion_group, criterion_main, Criterion};

fn lens_cpu(c: &mut Criterion) {
    let problem = LensProblem::preset(Preset::Tiny, &LensOptions::default()).expect("tiny preset");
    for p in [LensMode::F32, LensMode::F64] {
        c.bench_function(&format!("lens tiny cpu {p}"), |b| {
            b.iter(|| problem.run_cpu(p))
        });
    }
}

criterion_group!(benches, lens_cpu);
criterion_main!(benches);
