//! Times one gpt training step (the spec's defaults: forward, cross-entropy, backward, gradient
//! clipping, AdamW over two groups) on a fixed random batch, in process, for A/B comparisons of
//! kernels. Usage: `gpt_bench THREADS det|nondet [STEPS]`; prints one JSON line with the best,
//! median and mean seconds per step over the timed steps (after 5 warm-up steps). The per-step
//! best and median resist a noisy host better than whole-run times.

use lockstep::nn::optim::{self, Optimizer};
use lockstep::nn::{Module, Var};
use lockstep::{DType, Tensor};
use lockstep_cli::gpt::{Gpt, adamw};
use lockstep_cli::gpt_config::GptConfig;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let a: Vec<String> = std::env::args().collect();
    let threads: usize = a.get(1).map_or(Ok(1), |s| s.parse())?;
    let det = match a.get(2).map_or("det", String::as_str) {
        "det" => true,
        "nondet" => false,
        other => return Err(format!("mode {other:?}: det or nondet").into()),
    };
    let steps: usize = a.get(3).map_or(Ok(40), |s| s.parse())?;
    if steps == 0 || threads == 0 {
        return Err("THREADS and STEPS must be at least 1".into());
    }
    lockstep::set_num_threads(threads);
    lockstep::use_deterministic_algorithms(det);
    lockstep::manual_seed(1337);
    let cfg = GptConfig::default();
    // tinyshakespeare's 65 characters; the batch is random tokens (the step's work does not
    // depend on which).
    let vocab = 65;
    let mut model = Gpt::new(&cfg, vocab)?;
    model.train(true);
    let params: Vec<Var> = model.parameters();
    let mut opt = adamw(&cfg, &params)?;
    let shape = [cfg.batch_size, cfg.block_size];
    let x = Tensor::randint(0, vocab as i64, &shape, DType::I64, None)?;
    let y = Tensor::randint(0, vocab as i64, &shape, DType::I64, None)?;
    let mut step = || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        model.loss(&x, &y)?.backward()?;
        optim::clip_grad_norm_(&params, cfg.grad_clip, 2.0)?;
        opt.step()?;
        opt.zero_grad();
        Ok(())
    };
    for _ in 0..5 {
        step()?;
    }
    let mut times = Vec::new();
    times
        .try_reserve_exact(steps)
        .map_err(|_| format!("STEPS {steps}: too many to record"))?;
    for _ in 0..steps {
        let t = Instant::now();
        step()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let mean = times.iter().sum::<f64>() / steps as f64;
    times.sort_by(f64::total_cmp);
    println!(
        "{{\"threads\":{threads},\"mode\":\"{}\",\"best\":{},\"median\":{},\"mean\":{mean}}}",
        if det { "det" } else { "nondet" },
        times[0],
        times[steps / 2]
    );
    Ok(())
}
