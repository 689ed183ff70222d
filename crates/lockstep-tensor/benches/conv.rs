//! Convolution: every candidate of the three conv ops on the shape (3×3, 64→64
//! channels, 56×56, batch 8, padding 1), pinned one at a time, at 1 and 2 threads; and
//! `conv2d_backward_weight_blocks` against one `conv2d_backward_weight` per block plus the tree
//! of additions (the cnn model's convolutions at batch 64 in micro-shards of 8).
//!
//! `cargo bench -p lockstep-tensor --bench conv` (criterion, throughput in elements = the
//! multiply-adds of direct convolution). `bench/conv.py` compares the default choice with
//! PyTorch through the `conv_bench` example.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstep_tensor::autotune::with_algorithm;
use lockstep_tensor::ops::conv::{CONV2D, CONV2D_INPUT_GRAD, CONV2D_WEIGHT_GRAD, Conv2dParams};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::hint::black_box;

fn conv(c: &mut Criterion) {
    let mut g = lockstep_rng::Generator::with_seed(0);
    let x = Tensor::randn(&[8, 64, 56, 56], DType::F32, Some(&mut g)).unwrap();
    let w = Tensor::randn(&[64, 64, 3, 3], DType::F32, Some(&mut g)).unwrap();
    let gy = Tensor::randn(&[8, 64, 56, 56], DType::F32, Some(&mut g)).unwrap();
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let mut grp = c.benchmark_group("conv2d_3x3_64_56x56_b8");
    grp.sample_size(10);
    grp.throughput(Throughput::Elements(8 * 64 * 64 * 9 * 56 * 56));
    type Run<'a> = Box<dyn Fn() + 'a>;
    let mut cases: Vec<(&'static str, Run)> = Vec::new();
    for imp in CONV2D.impls {
        cases.push((
            imp.algo,
            Box::new(|| drop(black_box(x.conv2d(&w, None, p)))),
        ));
    }
    for imp in CONV2D_INPUT_GRAD.impls {
        cases.push((
            imp.algo,
            Box::new(|| {
                drop(black_box(Tensor::conv2d_backward_input(
                    &gy,
                    x.shape(),
                    &w,
                    p,
                )))
            }),
        ));
    }
    for imp in CONV2D_WEIGHT_GRAD.impls {
        cases.push((
            imp.algo,
            Box::new(|| {
                drop(black_box(Tensor::conv2d_backward_weight(
                    &gy,
                    &x,
                    w.shape(),
                    p,
                )))
            }),
        ));
    }
    for (algo, run) in &cases {
        // Candidates for other shapes (1×1, depthwise) do not apply: the pin falls back to the
        // default choice, so they are skipped rather than timed twice.
        if algo.contains("1x1") || algo.contains("depthwise") {
            continue;
        }
        for t in [1, 2] {
            grp.bench_with_input(BenchmarkId::new(*algo, format!("{t}t")), &t, |b, &t| {
                b.iter(|| with_num_threads(t, || with_algorithm(algo, run)))
            });
        }
    }
    grp.finish();
}

/// The weight gradients of invariant seeding at batch 64 in micro-shards of 8, on the cnn
/// model's two convolutions: one `conv2d_backward_weight_blocks` call against eight
/// `conv2d_backward_weight` calls and seven additions (the same bits), one thread.
fn weight_grad_blocks(c: &mut Criterion) {
    let mut rng = lockstep_rng::Generator::with_seed(1);
    let mut g = c.benchmark_group("conv2d_weight_grad_blocks");
    g.sample_size(20);
    let (n, block) = (64usize, 8usize);
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    for (cin, cout, hw) in [(1usize, 16usize, 8usize), (16, 32, 4)] {
        let x = Tensor::randn(&[n, cin, hw, hw], DType::F32, Some(&mut rng)).unwrap();
        let gy = Tensor::randn(&[n, cout, hw, hw], DType::F32, Some(&mut rng)).unwrap();
        let ws = [cout, cin, 3, 3];
        g.throughput(Throughput::Elements((n * cout * cin * 9 * hw * hw) as u64));
        let shape = format!("{cin}to{cout}_{hw}x{hw}_b{n}/{block}");
        g.bench_function(BenchmarkId::new("one_call", &shape), |b| {
            b.iter(|| {
                with_num_threads(1, || {
                    black_box(
                        Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, block).unwrap(),
                    )
                })
            })
        });
        g.bench_function(BenchmarkId::new("per_block_calls", &shape), |b| {
            b.iter(|| {
                with_num_threads(1, || {
                    let mut parts = (0..n / block).map(|t| {
                        let (gk, xk) = (
                            gy.narrow(0, t * block, block),
                            x.narrow(0, t * block, block),
                        );
                        Tensor::conv2d_backward_weight(&gk.unwrap(), &xk.unwrap(), &ws, p).unwrap()
                    });
                    // The tree for eight blocks: ((0+1)+(2+3))+((4+5)+(6+7)).
                    let mut pair = || {
                        let mut a = parts.next().unwrap();
                        a.add_(&parts.next().unwrap(), 1.0).unwrap();
                        a
                    };
                    let (mut q0, q1, mut q2, q3) = (pair(), pair(), pair(), pair());
                    q0.add_(&q1, 1.0).unwrap();
                    q2.add_(&q3, 1.0).unwrap();
                    q0.add_(&q2, 1.0).unwrap();
                    black_box(q0)
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, conv, weight_grad_blocks);
criterion_main!(benches);
