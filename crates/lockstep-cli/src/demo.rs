//! `lockstep demo`: a reproducible training run on the embedded digits data set.
//!
//! A two-layer perceptron (`Linear(64, hidden) → ReLU → Linear(hidden, 10)`, initialised
//! exactly as `torch.manual_seed(seed); nn.Sequential(nn.Linear(64, h), nn.ReLU(),
//! nn.Linear(h, 10))` would be) trained with plain SGD on softmax cross-entropy. The data set is
//! split with `random_split`, shuffled by a seeded `DataLoader`, and augmented with Gaussian
//! noise drawn from per-sample streams. Deterministic algorithms are on, so every number
//! printed — losses, accuracies, the fingerprint of the weights — is the same on every run,
//! at any thread count and any number of loader workers; `--verify` proves it by training
//! twice (1 thread and 0 workers, then all threads and 2 workers) and comparing.
//!
//! The model, its gradients (autograd) and the optimizer come from `lockstep-nn`.

use lockstep::Tensor;
use lockstep::data::transforms::GaussianNoise;
use lockstep::data::{DataLoader, Dataset, Digits, Seeding, SharedGenerator, random_split};
use lockstep_nn::layers::{Linear, ReLU, Sequential};
use lockstep_nn::optim::{Optimizer, Sgd, SgdOptions};
use lockstep_nn::{Module, Var, functional as F, no_grad};
use std::sync::Arc;
use std::time::Instant;

/// Options of one demo run.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// Seed for everything (`seed_everything`).
    pub seed: u64,
    /// Passes over the training split.
    pub epochs: usize,
    /// Samples per step.
    pub batch_size: usize,
    /// Width of the hidden layer.
    pub hidden: usize,
    /// SGD step size.
    pub lr: f64,
    /// Kernel threads (`set_num_threads`); `None` = all cores.
    pub threads: Option<usize>,
    /// Loader worker threads.
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

/// One epoch's report.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochReport {
    /// 1-based epoch.
    pub epoch: usize,
    /// Mean training loss over the epoch's steps.
    pub train_loss: f64,
    /// Accuracy on the held-out split.
    pub test_accuracy: f64,
    /// FNV-1a hash of the bits of every parameter after the epoch.
    pub fingerprint: u64,
}

type BoxError = Box<dyn std::error::Error>;

fn fnv1a(h: &mut u64, t: &Tensor) -> Result<(), BoxError> {
    for v in t.to_vec::<f32>()? {
        for b in v.to_bits().to_le_bytes() {
            *h ^= b as u64;
            *h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(())
}

/// `nn.Sequential(nn.Linear(64, h), nn.ReLU(), nn.Linear(h, 10))`, drawn from the default
/// generator as PyTorch draws it.
fn mlp(hidden: usize) -> Result<Sequential, BoxError> {
    Ok(Sequential::new()
        .add(Linear::new(64, hidden, true)?)
        .add(ReLU::default())
        .add(Linear::new(hidden, 10, true)?))
}

fn fingerprint(model: &dyn Module) -> Result<u64, BoxError> {
    let mut h = 0xcbf2_9ce4_8422_2325;
    for p in model.parameters() {
        fnv1a(&mut h, &p.data())?;
    }
    Ok(h)
}

/// The widest hidden layer the demo builds (64·h + 10·h weights: 2^20 is about 300 MB).
pub const MAX_HIDDEN: usize = 1 << 20;

/// The most loader workers the demo starts.
pub const MAX_WORKERS: usize = 256;

/// Refuses options that cannot give a meaningful run, with a message naming the flag.
pub fn check(cfg: &DemoConfig) -> Result<(), BoxError> {
    if cfg.epochs == 0 || cfg.batch_size == 0 || cfg.hidden == 0 {
        return Err("--epochs, --batch-size and --hidden must be positive".into());
    }
    if !(cfg.lr > 0.0 && cfg.lr.is_finite()) {
        return Err(format!("--lr={} must be a positive finite number", cfg.lr).into());
    }
    if cfg.hidden > MAX_HIDDEN {
        return Err(format!(
            "--hidden={} is more than the demo builds ({MAX_HIDDEN})",
            cfg.hidden
        )
        .into());
    }
    if cfg.workers > MAX_WORKERS {
        return Err(format!(
            "--workers={} is more than the demo starts ({MAX_WORKERS})",
            cfg.workers
        )
        .into());
    }
    if let Some(t) = cfg.threads {
        lockstep::tensor::threads::resolve_num_threads(t)?;
    }
    Ok(())
}

/// Trains once with `cfg`, calling `report` after every epoch.
pub fn train(
    cfg: &DemoConfig,
    mut report: impl FnMut(&EpochReport),
) -> Result<Vec<EpochReport>, BoxError> {
    check(cfg)?;
    if let Some(t) = cfg.threads {
        lockstep::set_num_threads(lockstep::tensor::threads::resolve_num_threads(t)?);
    }
    lockstep::use_deterministic_algorithms(true);
    let loader_gen = SharedGenerator::new(lockstep::seed_everything(cfg.seed)?);
    let model = mlp(cfg.hidden)?;
    let digits = Arc::new(Digits::new()?.with_transform(GaussianNoise::new(0.05)));
    let n = digits.len();
    let test_len = n / 5;
    let mut parts = random_split(digits, &[n - test_len, test_len], &loader_gen)?.into_iter();
    let (train_set, test_set) = (parts.next().ok_or("split")?, parts.next().ok_or("split")?);
    let mut loader = DataLoader::builder(train_set)
        .batch_size(cfg.batch_size)
        .shuffle(true)
        .num_workers(cfg.workers)
        .generator(loader_gen.clone())
        .seeding(Seeding::PerSample { seed: cfg.seed })
        .build()?;
    let mut test_loader = DataLoader::builder(test_set)
        .batch_size(256)
        .generator(loader_gen)
        .seeding(Seeding::PerSample {
            seed: cfg.seed ^ 0x7e57,
        })
        .build()?;
    let mut opt = Sgd::new(
        model.parameters(),
        SgdOptions {
            lr: cfg.lr,
            ..SgdOptions::default()
        },
    )?;
    let mut out = Vec::new();
    for epoch in 1..=cfg.epochs {
        let (mut total, mut steps) = (0.0, 0usize);
        for batch in loader.iter() {
            let (x, y) = batch?;
            let b = y.shape()[0];
            let x = Var::constant(x.reshape(&[b as isize, 64])?);
            let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
            total += loss.data().item::<f32>()? as f64;
            steps += 1;
        }
        let (mut right, mut seen) = (0usize, 0usize);
        for batch in test_loader.iter() {
            let (x, y) = batch?;
            let b = y.shape()[0];
            let x = Var::constant(x.reshape(&[b as isize, 64])?);
            let logits = no_grad(|| model.forward(&x))?.data();
            let pred = logits.argmax(Some(1), false)?.to_vec::<i64>()?;
            right += pred
                .iter()
                .zip(y.to_vec::<i64>()?)
                .filter(|(p, t)| **p == *t)
                .count();
            seen += b;
        }
        let r = EpochReport {
            epoch,
            train_loss: total / steps.max(1) as f64,
            test_accuracy: right as f64 / seen.max(1) as f64,
            fingerprint: fingerprint(&model)?,
        };
        report(&r);
        out.push(r);
    }
    Ok(out)
}

fn print_epoch(r: &EpochReport) {
    println!(
        "epoch {:>3}  train loss {:.6}  test accuracy {:>6.2}%  weights {:016x}",
        r.epoch,
        r.train_loss,
        100.0 * r.test_accuracy,
        r.fingerprint
    );
}

/// Runs the demo (and with `verify`, the second run and the comparison). Returns whether it
/// succeeded (and, with `verify`, whether both runs agreed).
pub fn run(cfg: &DemoConfig, verify: bool) -> bool {
    if let Err(e) = check(cfg) {
        eprintln!("error: lockstep demo: {e}");
        return false;
    }
    // `--threads=0` means all cores, as without the flag.
    let cfg = &DemoConfig {
        threads: cfg.threads.filter(|&t| t > 0),
        ..cfg.clone()
    };
    println!(
        "lockstep demo: MLP 64-{}-10 on the UCI digits (CC BY 4.0), seed {}, {} epochs, batch {}, lr {}",
        cfg.hidden, cfg.seed, cfg.epochs, cfg.batch_size, cfg.lr
    );
    let runs: Vec<DemoConfig> = if verify {
        vec![
            DemoConfig {
                threads: Some(1),
                workers: 0,
                ..cfg.clone()
            },
            DemoConfig {
                threads: Some(
                    std::thread::available_parallelism()
                        .map_or(2, |n| n.get())
                        .max(2),
                ),
                workers: 2,
                ..cfg.clone()
            },
        ]
    } else {
        vec![cfg.clone()]
    };
    let mut results = Vec::new();
    for r in &runs {
        println!(
            "run: {} kernel thread(s), {} loader worker(s), deterministic algorithms on",
            r.threads.unwrap_or_else(lockstep::get_num_threads),
            r.workers
        );
        let t = Instant::now();
        match train(r, print_epoch) {
            Ok(rep) => {
                println!("done in {:.2} s", t.elapsed().as_secs_f64());
                results.push(rep);
            }
            Err(e) => {
                eprintln!("error: lockstep demo: {e}");
                return false;
            }
        }
    }
    if verify {
        // Bits, not values: two runs that both reach NaN are still identical.
        let same = |a: &EpochReport, b: &EpochReport| {
            a.epoch == b.epoch
                && a.train_loss.to_bits() == b.train_loss.to_bits()
                && a.test_accuracy.to_bits() == b.test_accuracy.to_bits()
                && a.fingerprint == b.fingerprint
        };
        match results[0]
            .iter()
            .zip(&results[1])
            .find(|(a, b)| !same(a, b))
        {
            None => println!("verify: both runs identical, bit for bit, in every epoch"),
            Some((a, b)) => {
                println!("verify: runs differ from epoch {}: {a:?} vs {b:?}", a.epoch);
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13 defects 9 and 10: absurd flags are clear errors before anything is built.
    #[test]
    fn absurd_flags_are_refused() {
        let base = DemoConfig::default();
        for (cfg, flag) in [
            (
                DemoConfig {
                    lr: f64::INFINITY,
                    ..base.clone()
                },
                "--lr",
            ),
            (
                DemoConfig {
                    lr: f64::NAN,
                    ..base.clone()
                },
                "--lr",
            ),
            (
                DemoConfig {
                    hidden: 100_000_000_000,
                    ..base.clone()
                },
                "--hidden",
            ),
            (
                DemoConfig {
                    hidden: usize::MAX,
                    ..base.clone()
                },
                "--hidden",
            ),
            (
                DemoConfig {
                    workers: 100_000_000,
                    ..base.clone()
                },
                "--workers",
            ),
            (
                DemoConfig {
                    threads: Some(usize::MAX),
                    ..base.clone()
                },
                "threads",
            ),
        ] {
            let e = check(&cfg).unwrap_err().to_string();
            assert!(e.contains(flag), "{flag}: {e}");
            assert!(!run(&cfg, false));
        }
        assert!(
            check(&DemoConfig {
                threads: Some(0),
                ..base
            })
            .is_ok()
        );
    }

    #[test]
    fn demo_is_identical_at_any_thread_and_worker_count() {
        let base = DemoConfig {
            epochs: 2,
            hidden: 16,
            ..DemoConfig::default()
        };
        let a = train(
            &DemoConfig {
                threads: Some(1),
                workers: 0,
                ..base.clone()
            },
            |_| {},
        )
        .unwrap();
        let b = train(
            &DemoConfig {
                threads: Some(3),
                workers: 2,
                ..base
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(a, b);
        assert!(a[1].test_accuracy > 0.5, "it learns: {a:?}");
        assert!(
            train(
                &DemoConfig {
                    epochs: 0,
                    ..DemoConfig::default()
                },
                |_| {}
            )
            .is_err()
        );
    }
}
