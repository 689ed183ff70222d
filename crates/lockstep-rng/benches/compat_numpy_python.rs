//! Criterion benchmarks of the NumPy-compatible samplers: the streams, 10^7 float64 values each
//! (NumPy's side: `bench/compare.py`), and gamma/beta/poisson/binomial, 10^6 values each
//! (NumPy's side: `bench/distributions.py`); both scripts write BENCHMARKS.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_rng::compat::numpy::{Distributions, RandomState, default_rng};
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

/// The rejection samplers, on both NumPy classes (the rows of `bench/distributions.py`).
fn numpy_distributions(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let mut group = c.benchmark_group("numpy_distributions");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    let (mut f, mut i) = (vec![0f64; N], vec![0i64; N]);
    fn rows<D: Distributions>(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        class: &str,
        d: &mut D,
        f: &mut [f64],
        i: &mut [i64],
    ) {
        group.bench_function(format!("{class}.gamma(2.5)"), |b| {
            b.iter(|| d.gamma(2.5, 1.0, black_box(&mut *f)))
        });
        group.bench_function(format!("{class}.beta(2,3)"), |b| {
            b.iter(|| d.beta(2.0, 3.0, black_box(&mut *f)))
        });
        group.bench_function(format!("{class}.poisson(4.5)"), |b| {
            b.iter(|| d.poisson(4.5, black_box(&mut *i)))
        });
        group.bench_function(format!("{class}.binomial(1000,0.4)"), |b| {
            b.iter(|| d.binomial(1000, 0.4, black_box(&mut *i)))
        });
    }
    rows(&mut group, "Generator", &mut default_rng(0), &mut f, &mut i);
    rows(
        &mut group,
        "RandomState",
        &mut RandomState::new(0),
        &mut f,
        &mut i,
    );
    group.finish();
}

criterion_group!(benches, numpy_samplers, numpy_distributions);
criterion_main!(benches);
