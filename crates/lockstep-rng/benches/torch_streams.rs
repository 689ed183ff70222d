//! Criterion benchmarks of the PyTorch-compatible samplers, the MT19937 and Philox fills.
//! The PyTorch side of the comparison is `bench/compare.py`, which writes BENCHMARKS.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_rng::compat::{glibc_math, torch};
use lockstep_rng::isa::{Isa, set_isa};
use lockstep_rng::{Generator, Mt19937, Philox4x32};
use std::hint::black_box;

fn torch_samplers(c: &mut Criterion) {
    const N: usize = 10_000_000;
    let mut group = c.benchmark_group("torch");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    let mut out = vec![0f32; N];
    let mut g = Generator::with_seed(0);
    group.bench_function("rand_f32_1e7", |b| {
        b.iter(|| torch::rand(&mut g, black_box(&mut out)))
    });
    group.bench_function("randn_f32_1e7", |b| {
        b.iter(|| torch::normal_(&mut g, black_box(&mut out), 0.0, 1.0).unwrap())
    });
    group.finish();
}

/// `fill_u32` of 2^16 words (105 twists) on each instruction-set path: the raw words behind
/// every PyTorch CPU draw (dropout masks, `rand`).
/// `randn` f64 (the glibc `log`/`sin`/`cos` ports behind its Box–Muller transform) and the
/// ports' slice forms on each instruction-set path: eight lanes with AVX-512, four with AVX2.
fn randn_f64(c: &mut Criterion) {
    const N: usize = 1 << 20;
    let mut group = c.benchmark_group("randn_f64");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    let mut out = vec![0f64; N];
    let x: Vec<f64> = (0..N).map(|i| (i as f64 + 0.5) / N as f64).collect();
    let (mut s, mut co) = (vec![0f64; N], vec![0f64; N]);
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        let mut g = Generator::with_seed(0);
        group.bench_function(format!("normal_2^20_{}", isa.name()), |b| {
            b.iter(|| torch::normal_(&mut g, black_box(&mut out), 0.0, 1.0).unwrap())
        });
        group.bench_function(format!("log_all_2^20_{}", isa.name()), |b| {
            b.iter(|| glibc_math::log_all(black_box(&x), &mut out))
        });
        group.bench_function(format!("sin_cos_all_2^20_{}", isa.name()), |b| {
            b.iter(|| glibc_math::sin_cos_all(black_box(&x), &mut s, &mut co))
        });
    }
    set_isa(None).unwrap();
    group.finish();
}

fn mt19937_fill(c: &mut Criterion) {
    const N: usize = 1 << 16;
    let mut group = c.benchmark_group("mt19937");
    group.throughput(Throughput::Elements(N as u64));
    let mut out = vec![0u32; N];
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        let mut mt = Mt19937::from_seed_u32(0);
        group.bench_function(format!("fill_u32_2^16_{}", isa.name()), |b| {
            b.iter(|| mt.fill_u32(black_box(&mut out)))
        });
    }
    set_isa(None).unwrap();
    group.finish();
}

fn philox_fill(c: &mut Criterion) {
    const N: usize = 1 << 28;
    let mut group = c.benchmark_group("philox");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((N * 4) as u64));
    let mut out = vec![0f32; N];
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut g = Philox4x32::new([1, 2]);
        group.bench_function(format!("uniform_f32_2^28_threads{threads}"), |b| {
            b.iter(|| pool.install(|| g.par_fill_uniform_f32(black_box(&mut out))))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    torch_samplers,
    randn_f64,
    mt19937_fill,
    philox_fill
);
criterion_main!(benches);
