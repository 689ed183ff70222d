//! pytorch/examples' `vae/main.py`, ported to lockstep against its public API, on the
//! embedded 8×8 digits scaled to [0, 1]: a linear encoder (64 → 400 → 20 means and 20 log
//! variances), the `randn_like` reparameterisation, a linear decoder (20 → 400 → 64, sigmoid),
//! binary cross-entropy summed plus the KL divergence, `Adam(lr=1e-3)`.
//!
//! `cargo run --release --example vae -- [--epochs 10] [--batch-size 128] [--max-steps N]
//! [--threads T]` prints one JSON object on stdout, the same report as its PyTorch twin
//! `tools/examples/vae.py` (see there for the adaptations): the sha256 of the initial and final
//! parameters, every step's loss (summed over the batch), the average test loss per epoch.
//! The initial parameters, the shuffling and every `randn` draw are PyTorch's bit for bit;
//! the losses agree to rounding, then drift slowly.

use lockstep::data::{DataLoader, Dataset, Digits, SampleRng, TensorDataset};
use lockstep::nn::functional::{self as F, BinaryCrossEntropy, Reduction};
use lockstep::nn::layers::Linear;
use lockstep::nn::optim::{Adam, AdamOptions, Optimizer};
use lockstep::nn::{Forward, Module, Training, Var, Visitor, no_grad};
use lockstep::{DType, Tensor};
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The example's flags, with its defaults (`--max-steps`, `--threads` are additions for
/// tests and benchmarks).
#[derive(Clone, Debug)]
pub struct Args {
    pub batch_size: usize,
    pub epochs: usize,
    pub seed: u64,
    pub log_interval: usize,
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
            batch_size: 128,
            epochs: 10,
            seed: 1,
            log_interval: 10,
            max_steps: 0,
            threads: 0,
            verbose: true,
            nondeterministic: false,
        }
    }
}

impl Args {
    /// Parses `--flag value` pairs (and `--quiet`).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, BoxError> {
        let mut a = Self::default();
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
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
            match flag.as_str() {
                "--batch-size" => a.batch_size = n()?,
                "--epochs" => a.epochs = n()?,
                "--seed" => a.seed = v.parse().map_err(|e| bad(&e))?,
                "--log-interval" => a.log_interval = n()?,
                "--max-steps" => a.max_steps = n()?,
                "--threads" => a.threads = n()?,
                _ => return Err(format!("unknown flag {flag}").into()),
            }
        }
        if a.batch_size == 0 || a.log_interval == 0 {
            return Err("--batch-size and --log-interval must be at least 1".into());
        }
        Ok(a)
    }
}

/// The example's `VAE`.
pub struct Vae {
    fc1: Linear,
    fc21: Linear,
    fc22: Linear,
    fc3: Linear,
    fc4: Linear,
    training: Training,
}

impl Vae {
    /// Draws the parameters from the default generator in PyTorch's `__init__` order.
    pub fn new() -> lockstep::nn::Result<Self> {
        Ok(Self {
            fc1: Linear::new(64, 400, true)?,
            fc21: Linear::new(400, 20, true)?,
            fc22: Linear::new(400, 20, true)?,
            fc3: Linear::new(20, 400, true)?,
            fc4: Linear::new(400, 64, true)?,
            training: Training::default(),
        })
    }

    fn encode(&self, x: &Var) -> lockstep::nn::Result<(Var, Var)> {
        let h1 = self.fc1.forward(x)?.relu()?;
        Ok((self.fc21.forward(&h1)?, self.fc22.forward(&h1)?))
    }

    /// `mu + eps * std` with `eps = torch.randn_like(std)` from the default generator.
    fn reparameterize(&self, mu: &Var, logvar: &Var) -> lockstep::nn::Result<Var> {
        let std = logvar.mul_scalar(0.5)?.exp()?;
        let eps = Var::constant(Tensor::randn(std.shape(), DType::F32, None)?);
        mu.add(&eps.mul(&std)?)
    }

    fn decode(&self, z: &Var) -> lockstep::nn::Result<Var> {
        let h3 = self.fc3.forward(z)?.relu()?;
        self.fc4.forward(&h3)?.sigmoid()
    }

    /// `(reconstruction, mu, logvar)`.
    pub fn forward(&self, x: &Var) -> lockstep::nn::Result<(Var, Var, Var)> {
        let (mu, logvar) = self.encode(&x.reshape(&[-1, 64])?)?;
        let z = self.reparameterize(&mu, &logvar)?;
        Ok((self.decode(&z)?, mu, logvar))
    }
}

impl Module for Vae {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("fc1", &self.fc1);
        v.child("fc21", &self.fc21);
        v.child("fc22", &self.fc22);
        v.child("fc3", &self.fc3);
        v.child("fc4", &self.fc4);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// Reconstruction (binary cross-entropy, summed) plus the KL divergence
/// `-0.5 * sum(1 + logvar - mu^2 - exp(logvar))` (Kingma and Welling, appendix B).
fn loss_function(recon_x: &Var, x: &Tensor, mu: &Var, logvar: &Var) -> lockstep::nn::Result<Var> {
    let sum = BinaryCrossEntropy {
        reduction: Reduction::Sum,
        ..BinaryCrossEntropy::default()
    };
    let bce = F::binary_cross_entropy_with(recon_x, &x.reshape(&[-1, 64])?, &sum)?;
    let kld = logvar
        .add_scalar(1.0)?
        .sub(&mu.pow_scalar(2.0)?)?
        .sub(&logvar.exp()?)?
        .sum()?
        .mul_scalar(-0.5)?;
    bce.add(&kld)
}

/// Digits `range` as `(images [n, 1, 8, 8] = pixel / 16, labels)`.
fn digits(range: std::ops::Range<usize>) -> Result<TensorDataset, BoxError> {
    let ds = Digits::new()?;
    let n = range.len();
    let (mut x, mut y) = (Vec::with_capacity(n * 64), Vec::with_capacity(n));
    for i in range {
        let (img, label) = ds.get(i, &mut SampleRng::global())?;
        x.extend(img.to_vec::<f32>()?);
        y.push(label);
    }
    Ok(TensorDataset::new(vec![
        Tensor::from_vec(x, &[n, 1, 8, 8])?,
        Tensor::from_vec(y, &[n])?,
    ])?)
}

/// The whole program: trains and returns the JSON report the twin prints.
///
/// # Errors
/// Bad flags or an op error naming the op.
pub fn run(args: &Args) -> Result<serde_json::Value, BoxError> {
    if args.threads > 0 {
        lockstep::set_num_threads(args.threads);
    }
    lockstep::use_deterministic_algorithms(!args.nondeterministic);
    lockstep::manual_seed(args.seed);

    // The first 1437 digits train, the last 360 test.
    let mut train_loader = DataLoader::builder(digits(0..1437)?)
        .batch_size(args.batch_size)
        .shuffle(true)
        .build()?;
    let mut test_loader = DataLoader::builder(digits(1437..Digits::LEN)?)
        .batch_size(args.batch_size)
        .build()?;

    let mut model = Vae::new()?;
    let params = model.parameters();
    let init_sha256 = params_sha256(&params);
    let mut optimizer = Adam::new(
        params.clone(),
        AdamOptions {
            lr: 1e-3,
            ..AdamOptions::default()
        },
    )?;
    let (mut losses, mut test_losses) = (Vec::new(), Vec::new());
    let done = |losses: &Vec<f64>| args.max_steps > 0 && losses.len() >= args.max_steps;

    for epoch in 1..=args.epochs {
        // train(epoch)
        model.train(true);
        let mut train_loss = 0f64;
        let (batches, n) = (train_loader.len(), train_loader.dataset().len());
        for (batch_idx, batch) in train_loader.iter().enumerate() {
            let data = &batch?[0];
            optimizer.zero_grad();
            let (recon, mu, logvar) = model.forward(&Var::constant(data.clone()))?;
            let loss = loss_function(&recon, data, &mu, &logvar)?;
            loss.backward()?;
            let l = loss.data().item::<f32>()? as f64;
            train_loss += l;
            optimizer.step()?;
            losses.push(l);
            if args.verbose && batch_idx % args.log_interval == 0 {
                let b = data.shape()[0];
                eprintln!(
                    "Train Epoch: {epoch} [{}/{n} ({:.0}%)]\tLoss: {:.6}",
                    batch_idx * b,
                    100.0 * batch_idx as f64 / batches as f64,
                    l / b as f64
                );
            }
            if done(&losses) {
                break;
            }
        }
        if args.verbose {
            eprintln!(
                "====> Epoch: {epoch} Average loss: {:.4}",
                train_loss / n as f64
            );
        }

        // test(epoch)
        model.eval();
        let mut test_loss = 0f64;
        for batch in test_loader.iter() {
            let data = &batch?[0];
            let l = no_grad(|| {
                let (recon, mu, logvar) = model.forward(&Var::constant(data.clone()))?;
                loss_function(&recon, data, &mu, &logvar)
            })?;
            test_loss += l.data().item::<f32>()? as f64;
        }
        test_loss /= test_loader.dataset().len() as f64;
        if args.verbose {
            eprintln!("====> Test set loss: {test_loss:.4}");
        }
        test_losses.push(test_loss);

        // The original saves these 64 samples as an image; drawing them moves the generator.
        let sample = Var::constant(Tensor::randn(&[64, 20], DType::F32, None)?);
        no_grad(|| model.decode(&sample))?;
        if done(&losses) {
            break;
        }
    }

    Ok(json!({
        "example": "vae",
        "init_sha256": init_sha256,
        "losses": losses,
        "test_loss": test_losses,
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
