//! `F.layer_norm` at the gpt step's shape (`[16, 64, 128]`, weight and bias): the forward alone
//! and forward + backward (`∂x`, `∂w`, `∂b`), at 1 and 2 threads. Every path gives the same
//! bits (see `functional/layer_norm_rows.rs`); this measures the rows' kernels.
//!
//! `cargo bench -p lockstep-nn --bench layer_norm`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_nn::Var;
use lockstep_nn::functional::layer_norm;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::hint::black_box;

const SHAPE: [usize; 3] = [16, 64, 128];

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 500.0 - 2.0)
        .collect()
}

fn bench(c: &mut Criterion) {
    let n: usize = SHAPE.iter().product();
    let l = SHAPE[2];
    let x = Var::new(Tensor::from_vec(values(n, 1), &SHAPE).unwrap(), true);
    let w = Var::new(Tensor::ones(&[l], DType::F32).unwrap(), true);
    let b = Var::new(Tensor::zeros(&[l], DType::F32).unwrap(), true);
    let g = Tensor::from_vec(values(n, 7), &SHAPE).unwrap();
    let mut grp = c.benchmark_group("layer_norm_16x64x128");
    grp.throughput(Throughput::Elements(n as u64));
    for threads in [1, 2] {
        grp.bench_function(format!("forward/{threads}t"), |bn| {
            with_num_threads(threads, || {
                bn.iter(|| layer_norm(black_box(&x), &[l], Some(&w), Some(&b), 1e-5).unwrap())
            })
        });
        grp.bench_function(format!("forward_backward/{threads}t"), |bn| {
            with_num_threads(threads, || {
                bn.iter(|| {
                    let y = layer_norm(black_box(&x), &[l], Some(&w), Some(&b), 1e-5).unwrap();
                    y.backward_with(&g).unwrap();
                })
            })
        });
    }
    grp.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
