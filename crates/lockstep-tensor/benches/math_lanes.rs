//! The vectorised transcendental kernels (`math::lanes`) against the scalar portable functions
//! they reproduce bit for bit, per element, on 64 Ki f32 / f64 values in [−6, 6] (GELU's working
//! range), on the path in use (`LOCKSTEP_ISA=portable|avx2|avx512` to pick one); and the tensor
//! ops that use them (`exp`, `sigmoid`, `gelu`, `gelu_derivative`).
//!
//! `cargo bench -p lockstep-tensor --bench math_lanes`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstep_tensor::isa::Isa;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{Tensor, math};
use std::hint::black_box;

const N: usize = 1 << 16;

fn inputs() -> Vec<f32> {
    (0..N)
        .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 12.0)
        .collect()
}

fn kernels(c: &mut Criterion) {
    let x = inputs();
    let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut o = vec![0f32; N];
    let mut o64 = vec![0f64; N];
    let isa = Isa::best();
    let mut g = c.benchmark_group("math_lanes");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("expf/scalar", |b| {
        b.iter(|| {
            o.iter_mut()
                .zip(&x)
                .for_each(|(o, &v)| *o = math::expf(black_box(v)))
        })
    });
    g.bench_function(format!("expf/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::expf_slice_on(isa, black_box(&x), &mut o))
    });
    g.bench_function("erff/scalar", |b| {
        b.iter(|| {
            o.iter_mut()
                .zip(&x)
                .for_each(|(o, &v)| *o = math::erff(black_box(v)))
        })
    });
    g.bench_function(format!("erff/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::erff_slice_on(isa, black_box(&x), &mut o))
    });
    g.bench_function("exp/scalar", |b| {
        b.iter(|| {
            o64.iter_mut()
                .zip(&x64)
                .for_each(|(o, &v)| *o = math::exp(black_box(v)))
        })
    });
    g.bench_function(format!("exp/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::exp_slice_on(isa, black_box(&x64), &mut o64))
    });
    g.bench_function("erf/scalar", |b| {
        b.iter(|| {
            o64.iter_mut()
                .zip(&x64)
                .for_each(|(o, &v)| *o = math::erf(black_box(v)))
        })
    });
    g.bench_function(format!("erf/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::erf_slice_on(isa, black_box(&x64), &mut o64))
    });
    // f64 `tanh` and `sigmoid` (the LSTM cell's): the path's kernel, and for `tanh` the
    // compiler's vectorisation of the branch-free lane function (AVX-512 once ran that one).
    g.bench_function(format!("tanh/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::tanh_slice_on(isa, black_box(&x64), &mut o64[..]))
    });
    g.bench_function(format!("tanh/auto_{isa}"), |b| {
        b.iter(|| math::lanes::tanh_slice_auto(isa, black_box(&x64), &mut o64[..]))
    });
    g.bench_function(format!("sigmoid64/lanes_{isa}"), |b| {
        b.iter(|| math::lanes::sigmoid_slice_on(isa, black_box(&x64), &mut o64))
    });
    g.finish();
}

fn ops(c: &mut Criterion) {
    let t = Tensor::from_vec(inputs(), &[N]).unwrap();
    let mut g = c.benchmark_group("lanes_ops");
    g.throughput(Throughput::Elements(N as u64));
    type Op = fn(&Tensor) -> lockstep_tensor::Result<Tensor>;
    let cases: [(&str, Op); 4] = [
        ("exp", |t| t.exp()),
        ("sigmoid", |t| t.sigmoid()),
        ("gelu", |t| t.gelu()),
        ("gelu_derivative", |t| t.gelu_derivative(false)),
    ];
    for (name, op) in cases {
        g.bench_function(name, |b| {
            with_num_threads(1, || b.iter(|| op(black_box(&t)).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, ops);
criterion_main!(benches);
