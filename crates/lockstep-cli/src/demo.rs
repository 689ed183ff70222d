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
//! The gradients are written out by hand here; the autograd layer will replace them.

use lockstep::data::transforms::GaussianNoise;
use lockstep::data::{DataLoader, Dataset, Digits, Seeding, SharedGenerator, random_split};
use lockstep::rng::compat::torch::init;
use lockstep::{DType, Tensor};
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

struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    /// `nn.Linear(64, h)` then `nn.Linear(h, 10)`, drawn from the default generator.
    fn new(hidden: usize) -> Result<Self, BoxError> {
        let mut g = lockstep::default_generator();
        let (w1, b1) = init::linear::<f32>(&mut g, 64, hidden, true)?;
        let (w2, b2) = init::linear::<f32>(&mut g, hidden, 10, true)?;
        Ok(Self {
            w1: Tensor::from_vec(w1, &[hidden, 64])?,
            b1: Tensor::from_vec(b1.unwrap_or_default(), &[hidden])?,
            w2: Tensor::from_vec(w2, &[10, hidden])?,
            b2: Tensor::from_vec(b2.unwrap_or_default(), &[10])?,
        })
    }

    fn fingerprint(&self) -> Result<u64, BoxError> {
        let mut h = 0xcbf2_9ce4_8422_2325;
        for t in [&self.w1, &self.b1, &self.w2, &self.b2] {
            fnv1a(&mut h, t)?;
        }
        Ok(h)
    }

    /// `(z1, h, log-probabilities)` for a `(B, 64)` batch.
    fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor), BoxError> {
        let z1 = x.linear(&self.w1, Some(&self.b1))?;
        let h = z1.relu()?;
        let logp = h.linear(&self.w2, Some(&self.b2))?.log_softmax(1)?;
        Ok((z1, h, logp))
    }

    /// One SGD step on a batch; returns the mean cross-entropy.
    fn step(&mut self, x: &Tensor, y: &[i64], lr: f64) -> Result<f64, BoxError> {
        let b = y.len();
        let (z1, h, logp) = self.forward(x)?;
        let lp = logp.to_vec::<f32>()?;
        let loss = -y
            .iter()
            .enumerate()
            .map(|(i, &c)| lp[i * 10 + c as usize] as f64)
            .sum::<f64>()
            / b as f64;
        // d loss / d logits = (softmax − one_hot) / B.
        let mut onehot = vec![0f32; b * 10];
        for (i, &c) in y.iter().enumerate() {
            onehot[i * 10 + c as usize] = 1.0;
        }
        let onehot = Tensor::from_vec(onehot, &[b, 10])?;
        let dlogits = logp.exp()?.sub(&onehot)?.div_scalar(b as f64)?;
        let dw2 = dlogits.transpose(0, 1)?.matmul(&h)?;
        let db2 = dlogits.sum_dim(0, false)?;
        let dz1 = dlogits
            .matmul(&self.w2)?
            .mul(&z1.gt(&Tensor::scalar(0f32))?.to_dtype(DType::F32))?;
        let dw1 = dz1.transpose(0, 1)?.matmul(x)?;
        let db1 = dz1.sum_dim(0, false)?;
        let sgd = |p: &Tensor, g: &Tensor| p.sub(&g.mul_scalar(lr)?);
        self.w1 = sgd(&self.w1, &dw1)?;
        self.b1 = sgd(&self.b1, &db1)?;
        self.w2 = sgd(&self.w2, &dw2)?;
        self.b2 = sgd(&self.b2, &db2)?;
        Ok(loss)
    }
}

/// Trains once with `cfg`, calling `report` after every epoch.
pub fn train(
    cfg: &DemoConfig,
    mut report: impl FnMut(&EpochReport),
) -> Result<Vec<EpochReport>, BoxError> {
    if cfg.epochs == 0 || cfg.batch_size == 0 || cfg.hidden == 0 || !(cfg.lr > 0.0) {
        return Err("epochs, batch size, hidden width and learning rate must be positive".into());
    }
    if let Some(t) = cfg.threads {
        lockstep::set_num_threads(t);
    }
    lockstep::use_deterministic_algorithms(true);
    let loader_gen = SharedGenerator::new(lockstep::seed_everything(cfg.seed)?);
    let model_first = Mlp::new(cfg.hidden)?;
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
    let mut model = model_first;
    let mut out = Vec::new();
    for epoch in 1..=cfg.epochs {
        let (mut total, mut steps) = (0.0, 0usize);
        for batch in loader.iter() {
            let (x, y) = batch?;
            let b = y.shape()[0];
            total += model.step(&x.reshape(&[b as isize, 64])?, &y.to_vec::<i64>()?, cfg.lr)?;
            steps += 1;
        }
        let (mut right, mut seen) = (0usize, 0usize);
        for batch in test_loader.iter() {
            let (x, y) = batch?;
            let b = y.shape()[0];
            let (_, _, logp) = model.forward(&x.reshape(&[b as isize, 64])?)?;
            let pred = logp.argmax(Some(1), false)?.to_vec::<i64>()?;
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
            fingerprint: model.fingerprint()?,
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
        match results[0].iter().zip(&results[1]).find(|(a, b)| a != b) {
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
