//! Evaluation speed of whole trees, for every model of the catalog.
//!
//! `evaluate/<cpu>` is one full evaluation (every node, thresholds, bottleneck) with a cached
//! `CompiledModel`; `values/<cpu>` is the same through a prepared `Evaluator` without the
//! node texts (the per-interval path); `compile/<cpu>` parses and resolves every formula of the model once.
//! The ratio compile/evaluate shows what the per-model cache saves. Run:
//! `cargo bench -p tma-metrics --bench evaluate`.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tma_metrics::{evaluate, required_events, CompiledModel, Constants, Evaluator, Selection};

fn counts(model: &tma_catalog::Model) -> HashMap<String, f64> {
    // Deterministic, positive, distinct counts: enough to exercise every operator path.
    required_events(model, &Selection::all())
        .expect("catalog tables parse")
        .into_iter()
        .enumerate()
        .map(|(i, e)| (e, 1.0e6 + 7919.0 * i as f64))
        .collect()
}

fn bench(c: &mut Criterion) {
    let consts = Constants {
        tsc_freq_hz: Some(2.0e9),
        duration_s: Some(1.0),
        chas_per_socket: Some(8),
        ..Constants::default()
    };
    for m in tma_catalog::models() {
        let v = counts(m);
        let sel = Selection::all();
        c.bench_function(&format!("evaluate/{}", m.key), |b| {
            b.iter(|| evaluate(black_box(m), &sel, &v, &consts).expect("evaluates"))
        });
        let ev = Evaluator::new(m, &sel).expect("compiles");
        c.bench_function(&format!("values/{}", m.key), |b| {
            b.iter(|| ev.values(black_box(&v), &consts))
        });
        c.bench_function(&format!("compile/{}", m.key), |b| {
            b.iter(|| CompiledModel::new(black_box(m)).expect("compiles"))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
