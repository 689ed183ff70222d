//! GEMM: the blocked kernel per instruction set, and the matmul candidates, at 1 and 2 threads;
//! `matmul_k_blocks` against one `matmul` per K block plus the tree of additions.
//!
//! `cargo bench -p lockstep-tensor --bench gemm` (criterion, throughput in elements = m·n·k
//! fused multiply-adds; `LOCKSTEP_CELL_ONLY=1` runs only the LSTM-cell products). `bench/gemm.py` compares with NumPy (OpenBLAS) and PyTorch through the
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

/// A weight gradient `dYᵀ·X` of invariant seeding at batch 64 in micro-shards of 8: one
/// `matmul_k_blocks` call against eight `matmul`s and seven additions (the same bits).
fn k_blocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_k_blocks_f32");
    g.sample_size(20);
    for (o, i) in [(64usize, 64usize), (10, 64), (128, 784)] {
        let (k, block) = (64usize, 8usize);
        let dy = Tensor::from_vec(data::<f32>(k * o, 5), &[k, o]).unwrap();
        let x = Tensor::from_vec(data::<f32>(k * i, 6), &[k, i]).unwrap();
        let dyt = dy.transpose(0, 1).unwrap();
        g.throughput(Throughput::Elements((o * i * k) as u64));
        let shape = format!("{o}x{i}x{k}/{block}");
        g.bench_function(BenchmarkId::new("one_call", &shape), |bch| {
            bch.iter(|| black_box(dyt.matmul_k_blocks(&x, block).unwrap()))
        });
        g.bench_function(BenchmarkId::new("per_block_matmul", &shape), |bch| {
            bch.iter(|| {
                let parts: Vec<Tensor> = (0..k / block)
                    .map(|t| {
                        let (a, b) = (
                            dyt.narrow(1, t * block, block),
                            x.narrow(0, t * block, block),
                        );
                        a.unwrap().matmul(&b.unwrap()).unwrap()
                    })
                    .collect();
                black_box(tree(parts))
            })
        });
    }
    g.finish();
}

/// The fixed tree of `lockstep train`'s micro-shard sum over tensors.
fn tree(mut parts: Vec<Tensor>) -> Tensor {
    if parts.len() == 1 {
        return parts.pop().unwrap();
    }
    let right = parts.split_off(parts.len().div_ceil(2));
    let mut a = tree(parts);
    a.add_(&tree(right), 1.0).unwrap();
    a
}

/// time_sequence_prediction's LSTM-cell products in f64 at one thread (`(m, n, k)`: the forward
/// `[97, 51] · [51, 204]`, the input gradient `[97, 204] · [204, 51]`, the weight gradient
/// `[204, 97] · [97, 51]` with A transposed in memory as `dGᵀ` is, and the first cell's 1-wide
/// weight gradient): edge rows, narrow last column panels.
fn cell_products(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm_f64_cell");
    let par = Par::new(1);
    for (m, n, k, a_t) in [
        (97usize, 204usize, 51usize, false),
        (97, 51, 204, false),
        (204, 51, 97, true),
        (204, 1, 97, true),
    ] {
        let a = data::<f64>(m * k, 1);
        let b = data::<f64>(k * n, 2);
        let mut out = vec![0f64; m * n];
        let sa = if a_t { (1, m) } else { (k, 1) };
        g.throughput(Throughput::Elements((m * n * k) as u64));
        let isa = Isa::best();
        g.bench_function(format!("{isa:?}/{m}x{n}x{k}"), |bch| {
            bch.iter(|| {
                gemm_with(isa, m, n, k, &a, sa, &b, (n, 1), &mut out, (n, 1), &par).unwrap();
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    if std::env::var_os("LOCKSTEP_CELL_ONLY").is_some() {
        return cell_products(c);
    }
    cell_products(c);
    k_blocks(c);
    square::<f32>(c, "f32");
    square::<f64>(c, "f64");
    skinny(c);
}

criterion_group!(gemm, benches);
criterion_main!(gemm);
