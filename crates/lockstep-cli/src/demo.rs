//! `lockstep demo`: a reproducible training run on the embedded digits data set, checked, then
//! a small seed sweep.
//!
//! 1. `lockstep train` (the port of the PyTorch program in `spec/train/`) with
//!    `--seeding invariant`, deterministic algorithms on, twice: 1 thread and 0 loader
//!    workers, then all threads and 2 workers. Every printed number — losses, accuracies, the
//!    fingerprint of the final weights — must be identical, bit for bit.
//! 2. With `--verify` (the README's main command), `lockstep sweep` over 5 seeds of the same
//!    run: the mean and spread of the test accuracy with intervals, and the plots' paths.

use crate::sweep::SweepConfig;
use crate::train::{Progress, Report, TrainConfig, run as train_run};
use std::path::PathBuf;
use std::time::Instant;

/// Options of the demo.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// Seed of the two checked runs.
    pub seed: u64,
    /// Passes over the training split.
    pub epochs: usize,
    /// Samples per step.
    pub batch_size: usize,
    /// Width of the hidden layer.
    pub hidden: usize,
    /// SGD step size.
    pub lr: f64,
    /// Kernel threads of the second run (`None` = all cores); the first uses 1.
    pub threads: Option<usize>,
    /// Loader workers of the second run; the first uses 0.
    pub workers: usize,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            epochs: 10,
            batch_size: 32,
            hidden: 64,
            lr: 0.1,
            threads: None,
            workers: 2,
        }
    }
}

use lockstep::{Error, Result};

/// The widest hidden layer the demo builds.
pub const MAX_HIDDEN: usize = 1 << 16;

/// The most loader workers the demo starts.
pub const MAX_WORKERS: usize = 256;

/// Refuses options that cannot give a meaningful run, with a message naming the flag.
///
/// # Errors
/// A message naming the flag.
pub fn check(cfg: &DemoConfig) -> Result<()> {
    if cfg.epochs == 0 || cfg.batch_size == 0 || cfg.hidden == 0 {
        return Err(Error::config(
            "--epochs, --batch-size and --hidden must be positive",
        ));
    }
    if !(cfg.lr > 0.0 && cfg.lr.is_finite()) {
        return Err(Error::config(format!(
            "--lr={} must be a positive finite number",
            cfg.lr
        )));
    }
    if cfg.hidden > MAX_HIDDEN {
        return Err(Error::config(format!(
            "--hidden={} is more than the demo builds ({MAX_HIDDEN})",
            cfg.hidden
        )));
    }
    if cfg.workers > MAX_WORKERS {
        return Err(Error::config(format!(
            "--workers={} is more than the demo starts ({MAX_WORKERS})",
            cfg.workers
        )));
    }
    if let Some(t) = cfg.threads {
        lockstep::tensor::threads::resolve_num_threads(t)?;
    }
    Ok(())
}

/// The `lockstep train` flags of the demo's run (without `--seed`, `--threads`, `--workers`).
pub fn train_args(cfg: &DemoConfig) -> Vec<String> {
    [
        ("--model", crate::names::Model::Mlp.to_string()),
        ("--epochs", cfg.epochs.to_string()),
        ("--batch-size", cfg.batch_size.to_string()),
        ("--hidden", cfg.hidden.to_string()),
        ("--lr", cfg.lr.to_string()),
        ("--seeding", crate::names::Seeding::Invariant.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [k.to_string(), v])
    .collect()
}

fn train_config(cfg: &DemoConfig, threads: usize, workers: usize) -> TrainConfig {
    TrainConfig {
        model: crate::names::Model::Mlp,
        seed: cfg.seed,
        epochs: cfg.epochs,
        batch_size: cfg.batch_size,
        hidden: cfg.hidden,
        lr: cfg.lr,
        seeding: crate::names::Seeding::Invariant,
        threads,
        workers,
        ..TrainConfig::default()
    }
}

/// Prints one line per epoch.
struct EpochLines {
    losses: Vec<f64>,
    per_epoch: usize,
}

impl Progress for EpochLines {
    fn step(&mut self, _step: usize, loss: f64) {
        self.losses.push(loss);
        self.per_epoch += 1;
    }
    fn epoch(&mut self, epoch: usize, acc: f64) {
        let n = self.per_epoch.max(1);
        let mean = self.losses[self.losses.len() - self.per_epoch..]
            .iter()
            .sum::<f64>()
            / n as f64;
        println!(
            "epoch {epoch:>3}  train loss {mean:.6}  test accuracy {:>6.2}%",
            100.0 * acc
        );
        self.per_epoch = 0;
    }
}

/// Trains once (1 thread and 0 workers, or `threads` and `workers`), printing each epoch.
///
/// # Errors
/// Invalid options or a training error.
pub fn train_once(cfg: &DemoConfig, threads: usize, workers: usize) -> Result<Report> {
    check(cfg)?;
    let mut p = EpochLines {
        losses: Vec::new(),
        per_epoch: 0,
    };
    train_run(&train_config(cfg, threads, workers), &mut p)
}

/// Whether two runs agree bit for bit (NaN losses included).
pub fn identical(a: &Report, b: &Report) -> bool {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    bits(&a.step_losses) == bits(&b.step_losses)
        && bits(&a.test_accuracy) == bits(&b.test_accuracy)
        && a.final_sha256 == b.final_sha256
}

/// Runs the demo; with `verify`, also the 5-seed sweep. Returns whether everything succeeded
/// and the two runs agreed.
pub fn run(cfg: &DemoConfig, verify: bool) -> bool {
    if let Err(e) = check(cfg) {
        eprintln!("error: lockstep demo: {e}");
        return false;
    }
    println!(
        "lockstep demo: lockstep train --model mlp --hidden {} on the UCI digits (CC BY 4.0), seed {}, {} epochs, batch {}, lr {}, --seeding invariant, deterministic algorithms on",
        cfg.hidden, cfg.seed, cfg.epochs, cfg.batch_size, cfg.lr
    );
    let all = cfg
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let mut reports = Vec::new();
    for (threads, workers) in [(1, 0), (all, cfg.workers)] {
        println!("run: {threads} kernel thread(s), {workers} loader worker(s)");
        let t = Instant::now();
        match train_once(cfg, threads, workers) {
            Ok(r) => {
                println!(
                    "done in {:.2} s; weights {}",
                    t.elapsed().as_secs_f64(),
                    &r.final_sha256[..16]
                );
                reports.push(r);
            }
            Err(e) => {
                eprintln!("error: lockstep demo: {e}");
                return false;
            }
        }
    }
    if identical(&reports[0], &reports[1]) {
        println!("verify: both runs identical, bit for bit, in every step and epoch");
    } else {
        println!("verify: the runs differ");
        return false;
    }
    if !verify {
        return true;
    }
    println!("\nsweep: the same run over seeds 0..5 (lockstep sweep --seeds 5 -- train …)");
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: lockstep demo: cannot find the lockstep executable: {e}");
            return false;
        }
    };
    let mut command = vec!["train".to_string()];
    command.extend(train_args(cfg));
    let sweep = SweepConfig::new(
        Some(5),
        None,
        1,
        PathBuf::from("lockstep-demo-sweep"),
        &command,
    )
    .map(|c| SweepConfig { exe, ..c });
    match sweep {
        Ok(c) => crate::sweep::main(&c) == std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: lockstep demo: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_runs_are_identical_at_any_thread_and_worker_count() {
        let base = DemoConfig {
            epochs: 2,
            hidden: 16,
            ..DemoConfig::default()
        };
        let a = train_once(&base, 1, 0).unwrap();
        let b = train_once(&base, 3, 2).unwrap();
        assert!(identical(&a, &b));
        assert!(a.test_accuracy[1] > 0.5, "it learns: {:?}", a.test_accuracy);
        for bad in [
            DemoConfig {
                epochs: 0,
                ..DemoConfig::default()
            },
            DemoConfig {
                lr: f64::INFINITY,
                ..DemoConfig::default()
            },
            DemoConfig {
                hidden: usize::MAX,
                ..DemoConfig::default()
            },
        ] {
            assert!(train_once(&bad, 1, 0).is_err());
        }
    }
}
