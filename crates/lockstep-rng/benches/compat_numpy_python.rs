//! Criterion benchmarks of the NumPy-compatible samplers, 10^7 float64 values each. The NumPy
//! side of the comparison is `bench/compare.py` (same sizes, best of 5), which writes BENCHMARKS.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_rng::compat::numpy::{RandomState, default_rng};
use std::hint::black_box;

fn numpy_samplers(c: &mut Criterion) {
    const N: usize = 10_000_000;
    let mut group = c.benchmark_group("numpy");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    let mut out = vec![0f64; N];
    let mut g = default_rng(0);
    group.bench_function("Generator.random_1e7_f64", |b| {
        b.iter(|| g.random(black_box(&mut out)))
    });
    group.bench_function("Generator.standard_normal_1e7_f64", |b| {
        b.iter(|| g.standard_normal(black_box(&mut out)))
    });
    let mut rs = RandomState::new(0);
    group.bench_function("RandomState.rand_1e7_f64", |b| {
        b.iter(|| rs.random_sample(black_box(&mut out)))
    });
    group.finish();
}

criterion_group!(benches, numpy_samplers);
criterion_main!(benches);
