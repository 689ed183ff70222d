//! Criterion benchmark of one training step (forward, backward, SGD with momentum) of the
//! `lockstep train` models at 1 and 2 threads, deterministic mode: mlp (H=256, batch 64), cnn
//! (batch 64), lstm (H=128, batch 32); and a 2-layer GRU's forward and backward (H=128, batch
//! 32, 8 steps: the fused `gru_layer`). PyTorch's side of the comparison, with memory peaks, is
//! `bench/train.py` (same models and sizes), which writes BENCHMARKS.md.

use criterion::{Criterion, criterion_group, criterion_main};
use lockstep::Tensor;
use lockstep_cli::train::build_model;
use lockstep_nn::optim::{Optimizer, Sgd, SgdOptions};
use lockstep_nn::rnn::{Rnn, RnnConfig};
use lockstep_nn::{Forward, Module, Var, functional as F};

fn train_step(c: &mut Criterion) {
    lockstep::use_deterministic_algorithms(true);
    let mut group = c.benchmark_group("train_step");
    group.sample_size(30);
    for (kind, hidden, batch) in [("mlp", 256, 64), ("cnn", 64, 64), ("lstm", 128, 32)] {
        lockstep::manual_seed(0);
        let model = build_model(kind, hidden, 0.1).expect("model");
        let x = Var::constant(Tensor::rand(&[batch, 64], lockstep::DType::F32, None).expect("x"));
        let y = Tensor::randint(0, 10, &[batch], lockstep::DType::I64, None).expect("y");
        let opts = SgdOptions {
            lr: 0.01,
            momentum: 0.9,
            ..SgdOptions::default()
        };
        let mut opt = Sgd::new(model.parameters(), opts).expect("optimizer");
        for threads in [1, 2] {
            lockstep::set_num_threads(threads);
            group.bench_function(format!("{kind}/{threads}t"), |b| {
                b.iter(|| {
                    let loss =
                        F::cross_entropy(&model.forward(&x).expect("forward"), &y).expect("loss");
                    opt.zero_grad();
                    loss.backward().expect("backward");
                    opt.step().expect("step");
                })
            });
        }
    }
    lockstep::manual_seed(0);
    let gru = Rnn::gru(RnnConfig {
        num_layers: 2,
        batch_first: true,
        ..RnnConfig::new(8, 128)
    })
    .expect("gru");
    let x = Var::constant(Tensor::rand(&[32, 8, 8], lockstep::DType::F32, None).expect("x"));
    for threads in [1, 2] {
        lockstep::set_num_threads(threads);
        group.bench_function(format!("gru_layers/{threads}t"), |b| {
            b.iter(|| {
                gru.zero_grad();
                let out = gru.forward(&x).expect("forward");
                out.sum().expect("sum").backward().expect("backward");
            })
        });
    }
    group.finish();
}

criterion_group!(benches, train_step);
criterion_main!(benches);
