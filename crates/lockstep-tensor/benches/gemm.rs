//! GEMM: the blocked kernel per instruction set, and the matmul candidates, at 1 and 2 threads.
//!
//! `cargo bench -p lockstep-tensor --bench gemm` (criterion, throughput in elements = m·n·k
//! fused multiply-adds). `bench/gemm.py` compares with NumPy (OpenBLAS) and PyTorch through the
//! `gemm_bench` example, and measures the FMA peak.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_tensor::ops::matmul::{GemmFloat, Isa, MATMUL, gemm_with};
use lockstep_tensor::threads::Par;
use lockstep_tensor::{Element, Tensor};
use std::hint::black_box;

fn data<T: Element>(n: usize, seed: u64) -> Vec<T> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            T::from_f64((s >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
        })
        .collect()
}

fn square<T: GemmFloat>(c: &mut Criterion, name: &str) {
    let mut g = c.benchmark_group(format!("gemm_{name}"));
    g.sample_size(10);
    for n in [256usize, 1024] {
        let a = data::<T>(n * n, 1);
        let b = data::<T>(n * n, 2);
        let mut out = vec![T::ZERO; n * n];
        g.throughput(Throughput::Elements((n * n * n) as u64));
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Portable] {
            if !isa.available() || (isa == Isa::Portable && n > 256) {
                continue;
            }
            for t in [1, 2] {
                let par = Par::new(t);
                g.bench_with_input(
                    BenchmarkId::new(format!("{isa:?}/{t}t"), n),
                    &n,
                    |bch, &n| {
                        bch.iter(|| {
                            gemm_with(isa, n, n, n, &a, (n, 1), &b, (n, 1), &mut out, (n, 1), &par)
                                .unwrap();
                            black_box(&out);
                        })
                    },
                );
            }
        }
    }
    g.finish();
}

fn skinny(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_skinny_f32");
    g.sample_size(10);
    let (m, k, n) = (64usize, 50257usize, 128usize);
    let a = Tensor::from_vec(data::<f32>(m * k, 3), &[m, k]).unwrap();
    let b = Tensor::from_vec(data::<f32>(k * n, 4), &[k, n]).unwrap();
    g.throughput(Throughput::Elements((m * n * k) as u64));
    for imp in MATMUL.impls {
        for t in [1, 2] {
            let par = Par::new(t);
            g.bench_function(
                BenchmarkId::new(imp.algo, format!("{m}x{k}x{n}/{t}t")),
                |bch| bch.iter(|| black_box((imp.f)(&a, &b, &par).unwrap())),
            );
        }
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    square::<f32>(c, "f32");
    square::<f64>(c, "f64");
    skinny(c);
}

criterion_group!(gemm, benches);
criterion_main!(gemm);
