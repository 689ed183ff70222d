//! Convolution: every candidate of the three conv ops on the shape (3×3, 64→64
//! channels, 56×56, batch 8, padding 1), pinned one at a time, at 1 and 2 threads.
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

criterion_group!(benches, conv);
criterion_main!(benches);
