//! pytorch/examples' `mnist/main.py`, ported to lockstep against its public API, on the
//! embedded 8×8 digits: two 3×3 convolutions, ReLU, max-pool, dropout, two linear layers,
//! `log_softmax` + `nll_loss`, `Adadelta(lr=1.0)` and `StepLR(step_size=1, gamma=0.7)`.
//!
//! `cargo run --release --example mnist -- [--epochs 14] [--batch-size 64] [--max-steps N]
//! [--threads T] …` prints one JSON object on stdout, the same report as its PyTorch twin
//! `tools/examples/mnist.py` (see there for the adaptations to the digits): the sha256 of the
//! initial and final parameters (little-endian, `parameters()` order), every step's loss, the
//! test loss and accuracy per epoch. For the same flags the initial parameters, the dropout
//! masks and the optimizer's arithmetic are PyTorch's bit for bit; the losses agree to
//! rounding, then drift slowly (the README's "Examples" section gives how far).

use lockstep::Tensor;
use lockstep::data::{DataLoader, Dataset, Digits, SampleRng, TensorDataset};
use lockstep::nn::functional::{self as F, NllLoss, Reduction};
use lockstep::nn::layers::{Conv2d, Dropout, Linear};
use lockstep::nn::optim::{Adadelta, AdadeltaOptions, LrScheduler, Optimizer, StepLR};
use lockstep::nn::{Forward, Module, Training, Var, Visitor, no_grad};
use lockstep::tensor::ops::pool::Pool2d;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The example's flags, with its defaults (`--conv1`/`--conv2`, `--max-steps`, `--threads`
/// are additions for tests and benchmarks).
#[derive(Clone, Debug)]
pub struct Args {
    pub batch_size: usize,
    pub test_batch_size: usize,
    pub epochs: usize,
    pub lr: f64,
    pub gamma: f64,
    pub dry_run: bool,
    pub seed: u64,
    pub log_interval: usize,
    pub conv1: usize,
    pub conv2: usize,
    /// Stop after this many steps (0 = no limit).
    pub max_steps: usize,
    /// Kernel threads (0 = leave the setting alone).
    pub threads: usize,
    /// Print PyTorch's progress lines on stderr.
    pub verbose: bool,
    /// Leave deterministic mode off (`--nondeterministic`, for benchmarks): the default turns
    /// it on, as the tests need.
    pub nondeterministic: bool,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            batch_size: 64,
            test_batch_size: 1000,
            epochs: 14,
            lr: 1.0,
            gamma: 0.7,
            dry_run: false,
            seed: 1,
            log_interval: 10,
            conv1: 32,
            conv2: 64,
            max_steps: 0,
            threads: 0,
            verbose: true,
            nondeterministic: false,
        }
    }
}

impl Args {
    /// Parses `--flag value` pairs (and `--dry-run`).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut a = Self::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            if flag == "--dry-run" {
                a.dry_run = true;
                continue;
            }
            if flag == "--nondeterministic" {
                a.nondeterministic = true;
                continue;
            }
            if flag == "--quiet" {
                a.verbose = false;
                continue;
            }
            let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("invalid value {v:?} for {flag}: {e}");
            let n = || v.parse::<usize>().map_err(|e| bad(&e));
            let x = || v.parse::<f64>().map_err(|e| bad(&e));
            match flag.as_str() {
                "--batch-size" => a.batch_size = n()?,
                "--test-batch-size" => a.test_batch_size = n()?,
                "--epochs" => a.epochs = n()?,
                "--lr" => a.lr = x()?,
                "--gamma" => a.gamma = x()?,
                "--seed" => a.seed = v.parse().map_err(|e| bad(&e))?,
                "--log-interval" => a.log_interval = n()?,
                "--conv1" => a.conv1 = n()?,
                "--conv2" => a.conv2 = n()?,
                "--max-steps" => a.max_steps = n()?,
                "--threads" => a.threads = n()?,
                _ => return Err(format!("unknown flag {flag}").into()),
            }
        }
        if a.batch_size == 0 || a.test_batch_size == 0 || a.log_interval == 0 {
            return Err(
                "--batch-size, --test-batch-size and --log-interval must be at least 1".into(),
            );
        }
        Ok(a)
    }
}

/// The example's `Net`.
pub struct Net {
    conv1: Conv2d,
    conv2: Conv2d,
    dropout1: Dropout,
    dropout2: Dropout,
    fc1: Linear,
    fc2: Linear,
    training: Training,
}

impl Net {
    /// Draws the parameters from the default generator in PyTorch's `__init__` order.
    pub fn new(c1: usize, c2: usize) -> lockstep::nn::Result<Self> {
        Ok(Self {
            conv1: Conv2d::new(1, c1, 3, 0)?,
            conv2: Conv2d::new(c1, c2, 3, 0)?,
            dropout1: Dropout::new(0.25)?,
            dropout2: Dropout::new(0.5)?,
            // 8×8 → 6×6 → 4×4 → pooled 2×2 (28×28 → 12×12 and 9216 inputs on MNIST).
            fc1: Linear::new(c2 * 2 * 2, 128, true)?,
            fc2: Linear::new(128, 10, true)?,
            training: Training::default(),
        })
    }
}

impl Forward for Net {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let x = self.conv1.forward(x)?.relu()?;
        let x = self.conv2.forward(&x)?.relu()?;
        let x = F::max_pool2d(&x, Pool2d::new(2))?;
        let x = self.dropout1.forward(&x)?;
        let x = x.flatten(1, -1)?;
        let x = self.fc1.forward(&x)?.relu()?;
        let x = self.dropout2.forward(&x)?;
        self.fc2.forward(&x)?.log_softmax(1)
    }
}

impl Module for Net {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("conv1", &self.conv1);
        v.child("conv2", &self.conv2);
        v.child("dropout1", &self.dropout1);
        v.child("dropout2", &self.dropout2);
        v.child("fc1", &self.fc1);
        v.child("fc2", &self.fc2);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// The digits as the twin loads them: images `[n, 1, 8, 8]` (pixel / 16, then
/// torchvision's `Normalize((0.1307,), (0.3081,))` in f32) and labels.
fn load_digits() -> Result<(Vec<f32>, Vec<i64>), BoxError> {
    let ds = Digits::new()?;
    let (mean, std) = (0.1307f64 as f32, 0.3081f64 as f32);
    let mut x = Vec::with_capacity(ds.len() * 64);
    let mut y = Vec::with_capacity(ds.len());
    for i in 0..ds.len() {
        let (img, label) = ds.get(i, &mut SampleRng::global())?;
        x.extend(img.to_vec::<f32>()?.into_iter().map(|v| (v - mean) / std));
        y.push(label);
    }
    Ok((x, y))
}

/// The first 1437 digits train, the last 360 test (`[n, 1, 8, 8]` images, labels).
fn split(x: &[f32], y: &[i64], range: std::ops::Range<usize>) -> Result<TensorDataset, BoxError> {
    let n = range.len();
    let images = Tensor::from_vec(x[range.start * 64..range.end * 64].to_vec(), &[n, 1, 8, 8])?;
    let labels = Tensor::from_vec(y[range].to_vec(), &[n])?;
    Ok(TensorDataset::new(vec![images, labels])?)
}

fn test(
    model: &mut Net,
    loader: &mut DataLoader<TensorDataset>,
    verbose: bool,
) -> Result<(f64, f64), BoxError> {
    model.eval();
    let sum = NllLoss {
        reduction: Reduction::Sum,
        ..NllLoss::default()
    };
    let (mut test_loss, mut correct) = (0f64, 0usize);
    for batch in loader.iter() {
        let batch = batch?;
        let (data, target) = (&batch[0], &batch[1]);
        let output = no_grad(|| model.forward(&Var::constant(data.clone())))?;
        test_loss += F::nll_loss_with(&output, target, &sum)?
            .data()
            .item::<f32>()? as f64;
        let pred = output.data().argmax(Some(1), false)?.to_vec::<i64>()?;
        let target = target.to_vec::<i64>()?;
        correct += pred.iter().zip(&target).filter(|(p, t)| p == t).count();
    }
    let n = loader.dataset().len();
    test_loss /= n as f64;
    if verbose {
        eprintln!(
            "\nTest set: Average loss: {test_loss:.4}, Accuracy: {correct}/{n} ({:.0}%)\n",
            100.0 * correct as f64 / n as f64
        );
    }
    Ok((test_loss, correct as f64 / n as f64))
}

/// The whole program: trains and returns the JSON report the twin prints.
///
/// # Errors
/// Bad flags (zero widths) or an op error naming the op.
pub fn run(args: &Args) -> Result<serde_json::Value, BoxError> {
    if args.threads > 0 {
        lockstep::set_num_threads(args.threads);
    }
    lockstep::use_deterministic_algorithms(!args.nondeterministic);
    lockstep::manual_seed(args.seed);

    let (x, y) = load_digits()?;
    let mut train_loader = DataLoader::builder(split(&x, &y, 0..1437)?)
        .batch_size(args.batch_size)
        .build()?;
    let mut test_loader = DataLoader::builder(split(&x, &y, 1437..y.len())?)
        .batch_size(args.test_batch_size)
        .build()?;

    let mut model = Net::new(args.conv1, args.conv2)?;
    let params = model.parameters();
    let init_sha256 = params_sha256(&params);
    let mut optimizer = Adadelta::new(
        params.clone(),
        AdadeltaOptions {
            lr: args.lr,
            ..AdadeltaOptions::default()
        },
    )?;

    let (mut losses, mut test_losses, mut accuracies) = (Vec::new(), Vec::new(), Vec::new());
    let mut scheduler = StepLR::new(&mut optimizer, 1, args.gamma)?;
    let done =
        |losses: &Vec<f64>| args.dry_run || (args.max_steps > 0 && losses.len() >= args.max_steps);
    for epoch in 1..=args.epochs {
        model.train(true);
        let batches = train_loader.len();
        let n = train_loader.dataset().len();
        for (batch_idx, batch) in train_loader.iter().enumerate() {
            let batch = batch?;
            let (data, target) = (&batch[0], &batch[1]);
            optimizer.zero_grad();
            let output = model.forward(&Var::constant(data.clone()))?;
            let loss = F::nll_loss(&output, target)?;
            loss.backward()?;
            optimizer.step()?;
            let l = loss.data().item::<f32>()? as f64;
            losses.push(l);
            if args.verbose && batch_idx % args.log_interval == 0 {
                eprintln!(
                    "Train Epoch: {epoch} [{}/{n} ({:.0}%)]\tLoss: {l:.6}",
                    batch_idx * data.shape()[0],
                    100.0 * batch_idx as f64 / batches as f64
                );
            }
            if done(&losses) {
                break;
            }
        }
        let (test_loss, acc) = test(&mut model, &mut test_loader, args.verbose)?;
        test_losses.push(test_loss);
        accuracies.push(acc);
        scheduler.step(&mut optimizer);
        if done(&losses) {
            break;
        }
    }

    Ok(json!({
        "example": "mnist",
        "init_sha256": init_sha256,
        "losses": losses,
        "test_loss": test_losses,
        "test_accuracy": accuracies,
        "final_sha256": params_sha256(&params),
    }))
}

fn main() -> std::process::ExitCode {
    match Args::parse(std::env::args().skip(1)).and_then(|a| run(&a)) {
        Ok(report) => {
            println!("{report}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `init_sha256` / `final_sha256`: [`lockstep::sha256_of`] over the parameters' values.
fn params_sha256(params: &[Var]) -> String {
    let data: Vec<Tensor> = params.iter().map(|p| p.data()).collect();
    lockstep::sha256_of(&data)
}
