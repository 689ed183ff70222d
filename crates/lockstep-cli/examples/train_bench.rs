//! Times one training step (forward, backward, optimizer) of the `lockstep train` models (and
//! `gru`, `rnn`: the lstm model with `nn.GRU` / `nn.RNN` in place of `nn.LSTM`), for
//! `bench/train.py`. Usage: `train_bench MODEL THREADS det|nondet [STEPS] [fast]` (`fast`:
//! allow the fast, less accurate convolutions, `set_allow_fast_conv(true)`); prints one JSON
//! line with the best and mean seconds per step over the timed steps and the process's peak
//! resident memory (VmHWM, kB), so run each configuration in its own process.

use lockstep::Tensor;
use lockstep_cli::train::{build_model, sequence_model};
use lockstep_nn::optim::{Optimizer, Sgd, SgdOptions};
use lockstep_nn::rnn::{Rnn, RnnConfig};
use lockstep_nn::{Var, functional as F};
use std::time::Instant;

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // The library keeps freed memory by itself (`LOCKSTEP_KEEP_FREED_MEMORY=0` measures without).
    let a: Vec<String> = std::env::args().collect();
    let model_kind = a.get(1).map_or("mlp", |s| s.as_str());
    let threads: usize = a.get(2).map_or(Ok(1), |s| s.parse())?;
    let det = a.get(3).is_none_or(|s| s == "det");
    let steps: usize = a.get(4).map_or(Ok(200), |s| s.parse())?;
    let fast = a.get(5).is_some_and(|s| s == "fast");
    lockstep_tensor::autotune::set_allow_fast_conv(fast);
    let (hidden, batch) = match model_kind {
        "mlp" => (256, 64),
        "cnn" => (64, 64),
        _ => (128, 32),
    };
    lockstep::set_num_threads(threads);
    lockstep::use_deterministic_algorithms(det);
    lockstep::manual_seed(0);
    let model = if model_kind == "gru" || model_kind == "rnn" {
        let make = if model_kind == "gru" {
            Rnn::gru
        } else {
            Rnn::rnn
        };
        let cfg = RnnConfig {
            num_layers: 2,
            batch_first: true,
            dropout: 0.1,
            ..RnnConfig::new(8, hidden)
        };
        sequence_model(make(cfg)?, if model_kind == "gru" { "gru" } else { "rnn" })?
    } else {
        build_model(model_kind, hidden, 0.1)?
    };
    let x = Var::constant(Tensor::rand(&[batch, 64], lockstep::DType::F32, None)?);
    let y = Tensor::randint(0, 10, &[batch], lockstep::DType::I64, None)?;
    let mut opt = Sgd::new(
        model.parameters(),
        SgdOptions {
            lr: 0.01,
            momentum: 0.9,
            ..SgdOptions::default()
        },
    )?;
    let mut step = || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        Ok(())
    };
    for _ in 0..10 {
        step()?;
    }
    let (mut best, mut total) = (f64::INFINITY, 0.0);
    for _ in 0..steps {
        let t = Instant::now();
        step()?;
        let s = t.elapsed().as_secs_f64();
        best = best.min(s);
        total += s;
    }
    println!(
        "{{\"model\":\"{model_kind}\",\"fast_conv\":{fast},\"threads\":{threads},\"mode\":\"{}\",\"best\":{best},\"mean\":{},\"peak_rss_kb\":{}}}",
        if det { "det" } else { "nondet" },
        total / steps as f64,
        peak_rss_kb()
    );
    Ok(())
}
