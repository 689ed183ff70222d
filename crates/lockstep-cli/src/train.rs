//! `lockstep train`: the port of `spec/train/torch_train.py`, step for step.
//!
//! Same flags, same JSON report. For the same seed it makes the same train/test split
//! (`random_split` with its own generator), the same initial parameters (bit for bit), the same
//! shuffling (`DataLoader(shuffle=True, generator=g)`), the same augmentation noise (`--aug
//! torch`: `torch.randn(64)` from the fetching worker's generator, or the default generator with
//! no workers; `--aug numpy`: `np.random.normal` from NumPy's global `RandomState`, seeded per
//! worker by the program's `seed_worker`), the same dropout masks and the same optimizer
//! arithmetic. Matrix products, convolutions and reductions are lockstep's deterministic
//! kernels, so the losses agree with PyTorch to rounding and then drift slowly.

pub use crate::names::{Aug, Model, Optimizer, Scheduler, Seeding};
use crate::shards::{Local, Shards, micro_batch_size};
use lockstep::Tensor;
use lockstep::checkpoint::{Checkpoint, CheckpointError};
use lockstep::data::{DataLoader, Dataset, Digits, SampleRng, SharedGenerator, get_worker_info};
use lockstep::nn::batch_blocks::with_batch_blocks;
use lockstep::nn::layers::{
    BatchNorm, Conv2d, Dropout, Flatten, Linear, Pool, ReLU, Sequential, Unflatten,
};
// `Optimizer` here is the `--optimizer` name; the trait is `optim::Optimizer`.
use lockstep::nn::optim::{self, LrScheduler};
use lockstep::nn::rng::{SampleKeys, with_sample_keys};
use lockstep::nn::rnn::{Rnn, RnnConfig};
use lockstep::nn::sync_batch_norm::{MicroShard, StatsExchange, SyncStep};
use lockstep::nn::{Forward, Module, Training, Var, Visitor, functional as F, no_grad};
use lockstep::rng::compat::numpy::RandomState;
use serde_json::json;
use std::cell::RefCell;
use std::path::PathBuf;

use lockstep::{Error, Result};

/// The flags of `torch_train.py`, with its defaults: `lockstep train`'s flags themselves
/// (`clap::Args`; the field docs are the `--help` texts). `--model gpt`'s other defaults
/// (seed 1337, …) are [`crate::gpt_config::GptConfig`]'s, taken where the flag is not given.
///
/// `micro_batch`: `invariant` seeding's micro-shards of this many samples (0: the default,
/// [`crate::shards::DEFAULT_MICRO_BATCH`]; another value needs `invariant` seeding); each
/// batch's gradient is the sum, in a fixed tree over micro-shard index, of the micro-shards'
/// gradients (see the `distributed` module), so that one process and any number of processes
/// compute the same bits.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct TrainConfig {
    /// mlp | cnn | lstm | gpt
    #[arg(long, value_enum, default_value_t = Model::Mlp, hide_possible_values = true)]
    pub model: Model,
    /// Seed of every generator (below 2^32) [default: 0; gpt: 1337].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub seed: u64,
    /// Passes over the training split.
    #[arg(long, default_value_t = 10)]
    pub epochs: usize,
    /// Samples per step [default: 32; gpt: 16 windows per micro-batch].
    #[arg(long, default_value_t = 32, hide_default_value = true)]
    pub batch_size: usize,
    /// Learning rate [default: 0.1; gpt: 0.001, the peak of warmup + cosine].
    #[arg(long, default_value_t = 0.1, hide_default_value = true)]
    pub lr: f64,
    /// sgd | adam | adamw
    #[arg(long, value_enum, default_value_t = Optimizer::Sgd, hide_possible_values = true)]
    pub optimizer: Optimizer,
    /// SGD momentum.
    #[arg(long, default_value_t = 0.0)]
    pub momentum: f64,
    /// SGD Nesterov momentum.
    #[arg(long)]
    pub nesterov: bool,
    /// Weight decay [default: 0; gpt: 0.1, on matrices and embeddings only].
    #[arg(long, default_value_t = 0.0, hide_default_value = true)]
    pub weight_decay: f64,
    /// none | step | cosine (stepped once per epoch)
    #[arg(long, value_enum, default_value_t = Scheduler::None, hide_possible_values = true)]
    pub scheduler: Scheduler,
    /// Clip gradients to this total 2-norm (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub clip_grad_norm: f64,
    /// Dropout probability.
    #[arg(long, default_value_t = 0.1)]
    pub dropout: f64,
    /// Hidden width (mlp, lstm).
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// none | torch | numpy: where the per-sample noise comes from.
    #[arg(long, value_enum, default_value_t = Aug::Torch, hide_possible_values = true)]
    pub aug: Aug,
    /// Standard deviation of the noise.
    #[arg(long, default_value_t = 0.05)]
    pub noise: f64,
    /// Data loader workers.
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// Samples held out for testing.
    #[arg(long, default_value_t = 360)]
    pub test_size: usize,
    /// Stop after this many steps (0 = no limit).
    #[arg(long, default_value_t = 0)]
    pub max_steps: usize,
    /// Kernel threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// CSV (optionally .gz) of 64 pixels (0..16) and a label per row; default: the embedded
    /// UCI digits. gpt: a .txt or .txt.gz corpus; default: the embedded Tiny Shakespeare.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// torch (PyTorch's draws, the default) | invariant (each sample's noise, window and
    /// dropout masks from its own stream, gradients summed over fixed micro-shards: results
    /// independent of workers, threads, processes and, for gpt, --batch-size x --grad-accum)
    // `--json` is listed between `--data` and `--seeding` (main.rs's `display_order`).
    #[arg(long, value_enum, default_value_t = Seeding::Torch, hide_possible_values = true)]
    pub seeding: Seeding,
    /// Directory for checkpoints (ckpt-STEP.safetensors).
    #[arg(long)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Save a checkpoint every N steps (needs --checkpoint-dir).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: usize,
    /// Keep only the newest K checkpoints (0 = all); older ones go after the new one is on
    /// disk.
    #[arg(long, default_value_t = 0)]
    pub keep: usize,
    /// Resume from a checkpoint file, or from the newest valid one in a directory (none there:
    /// start from the beginning).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Initial weights from a safetensors file saved from PyTorch
    /// (safetensors.torch.save_file(model.state_dict(), path)).
    #[arg(long)]
    pub init_from: Option<PathBuf>,
    /// Turn deterministic algorithms off (on by default), e.g. to see what `lockstep verify`
    /// reports without them.
    #[arg(long)]
    pub nondeterministic: bool,
    /// --seeding invariant: micro-shards of M samples (gpt: windows of the global batch,
    /// --batch-size x --grad-accum). A step's gradient is the fixed-order sum of its
    /// micro-shards' gradients, BatchNorm's statistics are over the batch in a fixed order:
    /// the same bits on one process or any number (--distributed), with no other flag
    /// [default: 8, in invariant seeding; torch seeding has no micro-shards].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub micro_batch: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            model: Model::Mlp,
            seed: 0,
            epochs: 10,
            batch_size: 32,
            lr: 0.1,
            optimizer: Optimizer::Sgd,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
            scheduler: Scheduler::None,
            clip_grad_norm: 0.0,
            dropout: 0.1,
            hidden: 64,
            aug: Aug::Torch,
            noise: 0.05,
            workers: 0,
            test_size: 360,
            max_steps: 0,
            threads: 0,
            data: None,
            seeding: Seeding::Torch,
            checkpoint_dir: None,
            checkpoint_every: 0,
            keep: 0,
            resume: None,
            init_from: None,
            nondeterministic: false,
            micro_batch: 0,
        }
    }
}

/// What one run reports (the keys of `torch_train.py`'s JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The model kind.
    pub model: Model,
    /// The seed.
    pub seed: u64,
    /// Optimizer steps taken.
    pub steps: usize,
    /// sha256 over the initial parameters (little-endian bytes, parameter order).
    pub init_sha256: String,
    /// `named_parameters()` names.
    pub parameter_names: Vec<String>,
    /// `state_dict()` names.
    pub state_dict_names: Vec<String>,
    /// The loss of every step.
    pub step_losses: Vec<f64>,
    /// Test accuracy after every epoch.
    pub test_accuracy: Vec<f64>,
    /// sha256 over the final `state_dict` values.
    pub final_sha256: String,
}

impl Report {
    /// The JSON object `torch_train.py` prints.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "model": self.model.as_str(),
            "seed": self.seed,
            "steps": self.steps,
            "init_sha256": self.init_sha256,
            "parameter_names": self.parameter_names,
            "state_dict_names": self.state_dict_names,
            "step_losses": self.step_losses,
            "test_accuracy": self.test_accuracy,
            "final_sha256": self.final_sha256,
        })
    }
}

pub use lockstep::sha256_of;

/// The images (`[n, 64]`, pixel / 16) and labels of the data set.
fn load_data(path: Option<&PathBuf>) -> Result<(Vec<f32>, Vec<i64>)> {
    match path {
        None => {
            let ds = Digits::new()?;
            let mut x = Vec::with_capacity(ds.len() * 64);
            let mut y = Vec::with_capacity(ds.len());
            for i in 0..ds.len() {
                let (img, label) = ds.get(i, &mut SampleRng::global())?;
                x.extend(img.to_vec::<f32>()?);
                y.push(label);
            }
            Ok((x, y))
        }
        Some(p) => {
            let table = lockstep::data::read_csv(p, false)?;
            let bad_row = |reason: String| -> Error {
                lockstep::data::Error::Format {
                    op: "lockstep train --data",
                    path: p.clone(),
                    format: "digits CSV",
                    reason,
                }
                .into()
            };
            let mut x = Vec::with_capacity(table.rows.len() * 64);
            let mut y = Vec::with_capacity(table.rows.len());
            for (i, row) in table.rows.iter().enumerate() {
                if row.len() != 65 {
                    return Err(bad_row(format!(
                        "row {} has {} columns; expected 64 pixels and a label",
                        i + 1,
                        row.len()
                    )));
                }
                for &v in &row[..64] {
                    if !(v.fract() == 0.0 && (0.0..=16.0).contains(&v)) {
                        return Err(bad_row(format!(
                            "row {}: pixel value {v} is not an integer in 0..=16",
                            i + 1
                        )));
                    }
                    x.push(v as f32 / 16.0);
                }
                let l = row[64];
                if !(l.fract() == 0.0 && (0.0..=9.0).contains(&l)) {
                    return Err(bad_row(format!(
                        "row {}: label {l} is not a class in 0..=9",
                        i + 1
                    )));
                }
                y.push(l as i64);
            }
            Ok((x, y))
        }
    }
}

thread_local! {
    /// NumPy's global `RandomState` inside a worker thread (a PyTorch worker is a process with
    /// its own copy); `None` in the main thread, which uses `lockstep::numpy_random()`.
    static WORKER_NUMPY: RefCell<Option<RandomState>> = const { RefCell::new(None) };
}

/// The program's `Digits` data set: training samples get additive Gaussian noise at fetch time.
struct NoisyDigits {
    x: Vec<f32>,
    y: Vec<i64>,
    aug: Aug,
    noise: f64,
}

/// Where numpy-augmented workers resume: per worker, the samples already drawn this epoch
/// (their 64 Gaussians each are replayed after `seed_worker`).
type NumpySkip = std::sync::Arc<std::sync::Mutex<Option<Vec<usize>>>>;

impl Dataset for NoisyDigits {
    /// `(image [64], label, data-set index)`.
    type Item = (Tensor, i64, i64);
    fn len(&self) -> usize {
        self.y.len()
    }
    fn get(&self, i: usize, rng: &mut SampleRng<'_>) -> lockstep::data::Result<(Tensor, i64, i64)> {
        let mut x = self.x[i * 64..(i + 1) * 64].to_vec();
        match self.aug {
            Aug::None => {}
            // Invariant seeding: the sample's own stream (NumPy's `standard_normal(64,
            // dtype=float32)` of `per_sample_generator`), whatever `--aug` names.
            _ if rng.numpy().is_some() => {
                let mut n = [0f32; 64];
                rng.randn_f32(&mut n);
                let s = self.noise as f32;
                for (x, n) in x.iter_mut().zip(n) {
                    *x += s * n;
                }
            }
            Aug::Torch => {
                // x + noise * torch.randn(64): the product rounded to f32, then the sum.
                let mut n = [0f32; 64];
                rng.randn_f32(&mut n);
                let s = self.noise as f32;
                for (x, n) in x.iter_mut().zip(n) {
                    *x += s * n;
                }
            }
            Aug::Numpy => {
                // x + np.random.normal(0.0, noise, 64).astype(float32)
                let mut n = [0f64; 64];
                WORKER_NUMPY.with(|w| match w.borrow_mut().as_mut() {
                    Some(rs) => rs.normal(0.0, self.noise, &mut n),
                    None => lockstep::numpy_random().normal(0.0, self.noise, &mut n),
                })?;
                for (x, n) in x.iter_mut().zip(n) {
                    *x += n as f32;
                }
            }
        }
        Ok((Tensor::from_vec(x, &[64])?, self.y[i], i as i64))
    }
}

/// `torch_train.py`'s `LstmNet`, with any recurrent module: each image is 8 rows of 8
/// features; the last step's output feeds a linear head. `name` prefixes the module's
/// parameters (`lstm.weight_ih_l0`).
struct SequenceNet {
    rnn: Rnn,
    name: &'static str,
    head: Linear,
    training: Training,
}

impl Forward for SequenceNet {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let out = self.rnn.forward(&x.reshape(&[-1, 8, 8])?)?;
        let last = out.shape()[1] - 1;
        self.head.forward(&out.select(1, last)?)
    }
}

impl Module for SequenceNet {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child(self.name, &self.rnn);
        v.child("head", &self.head);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// The lstm model's shape around another recurrent module (`rnn` taking 8 features, its
/// parameters named `name.…`): a linear head from the last step to 10 classes, drawn from the
/// default generator after `rnn` as PyTorch's `__init__` order draws it. In training mode.
///
/// # Errors
/// A head that cannot be built (a zero hidden size).
pub fn sequence_model(rnn: Rnn, name: &'static str) -> Result<Box<dyn Forward>> {
    let head = Linear::new(rnn.config().hidden_size, 10, true)?;
    Ok(Box::new(SequenceNet {
        rnn,
        name,
        head,
        training: Training::default(),
    }))
}

/// `build_model(kind, hidden, p)`: draws from the default generator in PyTorch's order.
///
/// # Errors
/// An unknown kind (one not of [`Model`], or `gpt`) or invalid sizes.
pub fn build_model(kind: &str, hidden: usize, p: f64) -> Result<Box<dyn Forward>> {
    match kind.parse() {
        Ok(m) if m != Model::Gpt => model_of(m, hidden, p),
        _ => Err(Error::config(format!(
            "unknown model {kind:?} (mlp, cnn, lstm)"
        ))),
    }
}

/// [`build_model`] of a kind already parsed.
fn model_of(kind: Model, hidden: usize, p: f64) -> Result<Box<dyn Forward>> {
    Ok(match kind {
        Model::Mlp => Box::new(
            Sequential::new()
                .add(Linear::new(64, hidden, true)?)
                .add(ReLU::default())
                .add(Dropout::new(p)?)
                .add(Linear::new(hidden, 10, true)?),
        ),
        Model::Cnn => Box::new(
            Sequential::new()
                .add(Unflatten::new(1, &[1, 8, 8]))
                .add(Conv2d::new(1, 16, 3, 1)?)
                .add(BatchNorm::new_2d(16)?)
                .add(ReLU::default())
                .add(Pool::max2d(2))
                .add(Conv2d::new(16, 32, 3, 1)?)
                .add(ReLU::default())
                .add(Pool::adaptive_avg2d(1, 1))
                .add(Flatten::default())
                .add(Dropout::new(p)?)
                .add(Linear::new(32, 10, true)?),
        ),
        Model::Lstm => {
            let lstm = Rnn::lstm(RnnConfig {
                num_layers: 2,
                batch_first: true,
                dropout: p,
                ..RnnConfig::new(8, hidden)
            })?;
            return sequence_model(lstm, "lstm");
        }
        Model::Gpt => {
            return Err(Error::config("unknown model \"gpt\" (mlp, cnn, lstm)"));
        }
    })
}

fn check(cfg: &TrainConfig) -> Result<()> {
    let bad = |flag: &str, v: String, want: &str| -> Error {
        Error::config(format!("invalid value {v} for --{flag}: {want}"))
    };
    // The other names are refused by their types; gpt is the `gpt` module's.
    if cfg.model == Model::Gpt {
        return Err(bad(
            "model",
            format!("{:?}", cfg.model.as_str()),
            "mlp, cnn or lstm",
        ));
    }
    if cfg.epochs == 0 && cfg.max_steps == 0 {
        // Valid in PyTorch too (no training); nothing to refuse.
    }
    if cfg.batch_size == 0 {
        return Err(bad("batch-size", "0".into(), "must be at least 1"));
    }
    if cfg.hidden == 0 || cfg.hidden > 1 << 16 {
        return Err(bad(
            "hidden",
            cfg.hidden.to_string(),
            "must be in 1..=65536",
        ));
    }
    if !(cfg.lr.is_finite() && cfg.lr >= 0.0) {
        return Err(bad("lr", cfg.lr.to_string(), "must be finite and >= 0"));
    }
    for (flag, v) in [
        ("momentum", cfg.momentum),
        ("weight-decay", cfg.weight_decay),
        ("clip-grad-norm", cfg.clip_grad_norm),
        ("noise", cfg.noise),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(flag, v.to_string(), "must be finite and >= 0"));
        }
    }
    if !(0.0..=1.0).contains(&cfg.dropout) {
        return Err(bad("dropout", cfg.dropout.to_string(), "must be in [0, 1]"));
    }
    if cfg.nesterov && cfg.momentum <= 0.0 {
        return Err(Error::config(
            "--nesterov requires a momentum > 0 (as PyTorch's SGD)",
        ));
    }
    if cfg.workers > 256 {
        return Err(bad("workers", cfg.workers.to_string(), "at most 256"));
    }
    if cfg.threads > 1024 {
        return Err(bad("threads", cfg.threads.to_string(), "at most 1024"));
    }
    if cfg.seed > u32::MAX as u64 {
        return Err(bad(
            "seed",
            cfg.seed.to_string(),
            "must be below 2^32 (np.random.seed refuses larger seeds)",
        ));
    }
    Ok(())
}

/// What the flags decide before a run starts.
struct Checked {
    aug: Aug,
    invariant: bool,
}

/// `--test-size` against the data set's `n` rows.
fn check_test_size(test_size: usize, n: usize) -> Result<()> {
    if test_size >= n {
        return Err(Error::config(format!(
            "--test-size {test_size} leaves no training sample (the data set has {n})"
        )));
    }
    Ok(())
}

/// Checks the flags of `lockstep train` and their combinations as [`run`] does before it trains
/// (it starts with these same checks), without training: every value's range, the seeding and
/// `--micro-batch` rules for `processes` processes (1, or W with `--distributed`),
/// `--checkpoint-every` without `--checkpoint-dir`, `--test-size` against the embedded data
/// set, and the optimizer's and scheduler's own checks (PyTorch's), run on no parameters. It
/// reads no file, creates no directory and changes no global state (generators, thread
/// count), so it is cheap enough for the CLI fuzz target.
///
/// Left to [`run`], which needs the file system for them: the `--data` file and
/// `--test-size` against its rows, `--resume`, `--init-from`, creating `--checkpoint-dir`.
///
/// # Errors
/// The first flag or combination that `run` would refuse, with the same message.
pub fn check_config(cfg: &TrainConfig, processes: usize) -> Result<()> {
    check_flags(cfg, processes).map(drop)
}

fn check_flags(cfg: &TrainConfig, processes: usize) -> Result<Checked> {
    check(cfg)?;
    check_micro_batch(cfg, processes)?;
    let (aug, invariant) = (cfg.aug, cfg.seeding == Seeding::Invariant);
    if cfg.checkpoint_every > 0 && cfg.checkpoint_dir.is_none() {
        return Err(Error::config("--checkpoint-every needs --checkpoint-dir"));
    }
    if cfg.data.is_none() {
        check_test_size(cfg.test_size, Digits::LEN)?;
    }
    Dropout::new(cfg.dropout)?;
    // The same constructors as the run's, on no parameters: their checks, no model built.
    let mut opt = build_optimizer(cfg, Vec::new())?;
    build_scheduler(cfg, opt.as_mut())?;
    Ok(Checked { aug, invariant })
}

fn build_optimizer(cfg: &TrainConfig, params: Vec<Var>) -> Result<Box<dyn optim::Optimizer>> {
    Ok(match cfg.optimizer {
        Optimizer::Sgd => Box::new(optim::Sgd::new(
            params,
            optim::SgdOptions {
                lr: cfg.lr,
                momentum: cfg.momentum,
                nesterov: cfg.nesterov,
                weight_decay: cfg.weight_decay,
                ..optim::SgdOptions::default()
            },
        )?),
        Optimizer::Adam => Box::new(optim::Adam::new(
            params,
            optim::AdamOptions {
                lr: cfg.lr,
                weight_decay: cfg.weight_decay,
                ..optim::AdamOptions::default()
            },
        )?),
        Optimizer::AdamW => Box::new(optim::AdamW::new(
            params,
            optim::AdamWOptions {
                lr: cfg.lr,
                weight_decay: cfg.weight_decay,
                ..optim::AdamWOptions::default()
            },
        )?),
    })
}

fn build_scheduler(
    cfg: &TrainConfig,
    opt: &mut dyn optim::Optimizer,
) -> Result<Option<Box<dyn LrScheduler>>> {
    Ok(match cfg.scheduler {
        Scheduler::Step => Some(Box::new(optim::StepLR::new(
            opt,
            (cfg.epochs / 3).max(1),
            0.1,
        )?)),
        Scheduler::Cosine => Some(Box::new(optim::CosineAnnealingLR::new(
            opt, cfg.epochs, 0.0,
        )?)),
        Scheduler::None => None,
    })
}

/// Progress callbacks of a run.
pub trait Progress {
    /// Called once with the number of steps the run will take at most.
    fn start(&mut self, _total_steps: usize) {}
    /// Called after every step.
    fn step(&mut self, _step: usize, _loss: f64) {}
    /// Called after every epoch's evaluation.
    fn epoch(&mut self, _epoch: usize, _test_accuracy: f64) {}
    /// Called at the end.
    fn finish(&mut self) {}
}

/// No progress output.
pub struct Quiet;
impl Progress for Quiet {}

/// The configuration a checkpoint must share with the run that resumes it (everything but
/// threads, workers, the number of epochs or steps and the checkpoint flags).
fn identity(cfg: &TrainConfig) -> serde_json::Value {
    let mut id = json!({
        "model": cfg.model.as_str(), "seed": cfg.seed, "batch_size": cfg.batch_size,
        "lr": cfg.lr, "optimizer": cfg.optimizer.as_str(), "momentum": cfg.momentum,
        "nesterov": cfg.nesterov, "weight_decay": cfg.weight_decay,
        "scheduler": cfg.scheduler.as_str(), "clip_grad_norm": cfg.clip_grad_norm,
        "dropout": cfg.dropout, "hidden": cfg.hidden, "aug": cfg.aug.as_str(),
        "noise": cfg.noise, "test_size": cfg.test_size,
        "data": cfg.data.as_ref().map(|p| p.display().to_string()),
        "seeding": cfg.seeding.as_str(),
        "init_from": cfg.init_from.as_ref().map(|p| p.display().to_string()),
        // StepLR's step size and the cosine period depend on the number of epochs.
        "epochs_for_scheduler": if cfg.scheduler == Scheduler::None { 0 } else { cfg.epochs },
    });
    // The micro-shard size is part of invariant seeding's arithmetic (the number of
    // processes is free to change); torch seeding has none, so its checkpoints keep their
    // identity.
    if cfg.seeding == Seeding::Invariant {
        id["micro_batch"] = json!(micro_batch_size(cfg.micro_batch));
    }
    id
}

/// `torch_train.py`'s class of each model and its submodules' paths in PyTorch's traversal
/// order (the root first): where `load_state_dict` looks for each key.
fn module_tree(kind: Model) -> (&'static str, Vec<String>) {
    let seq = |n: usize| (0..n).map(|i| i.to_string());
    match kind {
        Model::Lstm => ("LstmNet", vec![String::new(), "lstm".into(), "head".into()]),
        Model::Cnn => (
            "Sequential",
            std::iter::once(String::new()).chain(seq(11)).collect(),
        ),
        _ => (
            "Sequential",
            std::iter::once(String::new()).chain(seq(4)).collect(),
        ),
    }
}

/// PyTorch's `model.load_state_dict(state, strict=True)` for the model `kind` built by
/// [`build_model`], with its rules and its message: every key of the model must be given, no
/// other key may be, shapes must match; a tensor of another dtype is cast to the model's
/// (`param.copy_(input)`: an F64 file loads into F32 parameters, rounding to nearest). The
/// error lists the missing keys (model order), the unexpected keys (by the module that would
/// hold them, in traversal order, then file order) and every size mismatch, as PyTorch does.
/// Nothing is changed unless everything fits.
///
/// # Errors
/// `Error(s) in loading state_dict for CLASS:` and the lines above.
fn load_state_dict_strict(
    model: &dyn Module,
    kind: Model,
    state: Vec<(String, Tensor)>,
) -> Result<()> {
    let (class, modules) = module_tree(kind);
    let mine = model.named_all();
    let mut errors = Vec::new();
    let missing: Vec<String> = mine
        .iter()
        .filter(|n| !state.iter().any(|(k, _)| *k == n.name))
        .map(|n| format!("\"{}\"", n.name))
        .collect();
    // The module that would hold a key: the deepest one whose path prefixes it.
    let owner = |key: &str| {
        modules
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m.is_empty() || key.starts_with(&format!("{m}.")))
            .map_or(0, |(i, _)| i)
    };
    let mut unexpected: Vec<(usize, usize, &str)> = state
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| !mine.iter().any(|n| n.name == *k))
        .map(|(i, (k, _))| (owner(k), i, k.as_str()))
        .collect();
    unexpected.sort();
    if !missing.is_empty() {
        errors.push(format!(
            "Missing key(s) in state_dict: {}. ",
            missing.join(", ")
        ));
    }
    if !unexpected.is_empty() {
        let keys: Vec<String> = unexpected
            .iter()
            .map(|(_, _, k)| format!("\"{k}\""))
            .collect();
        errors.push(format!(
            "Unexpected key(s) in state_dict: {}. ",
            keys.join(", ")
        ));
    }
    let size = |s: &[usize]| {
        let d: Vec<String> = s.iter().map(ToString::to_string).collect();
        format!("torch.Size([{}])", d.join(", "))
    };
    let mut plan = Vec::new();
    for n in &mine {
        let Some((_, t)) = state.iter().find(|(k, _)| *k == n.name) else {
            continue;
        };
        if t.shape() != n.var.shape() {
            errors.push(format!(
                "size mismatch for {}: copying a param with shape {} from checkpoint, the shape \
                 in current model is {}.",
                n.name,
                size(t.shape()),
                size(n.var.shape())
            ));
        } else if t.dtype() != n.var.dtype() {
            plan.push((n.name.clone(), t.try_to_dtype(n.var.dtype())?));
        } else {
            plan.push((n.name.clone(), t.clone()));
        }
    }
    if !errors.is_empty() {
        return Err(Error::config(format!(
            "Error(s) in loading state_dict for {class}:\n\t{}",
            errors.join("\n\t")
        )));
    }
    model.load_state_dict(&plan)?;
    Ok(())
}

pub(crate) fn checkpoint_path(dir: &std::path::Path, step: usize) -> PathBuf {
    dir.join(format!("ckpt-{step:08}.safetensors"))
}

/// The checkpoints in `dir` (`ckpt-STEP.safetensors`), newest (highest step) first.
pub(crate) fn checkpoints_in(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read checkpoint directory", dir, &e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let step = p
                .file_name()?
                .to_str()?
                .strip_prefix("ckpt-")?
                .strip_suffix(".safetensors")?
                .parse::<u64>()
                .ok()?;
            Some((step, p))
        })
        .collect();
    v.sort();
    Ok(v.into_iter().rev().map(|(_, p)| p).collect())
}

/// Removes the temporary files killed runs left while writing a checkpoint
/// (`.ckpt-STEP.safetensors.XXXXXX.tmp`): they are never read, but would take a checkpoint's
/// space each. A live writer's file is locked and kept
/// (`lockstep::tensor::io::remove_stale_temporaries`).
pub(crate) fn remove_stale_temporaries(dir: &std::path::Path) {
    lockstep::tensor::io::remove_stale_temporaries(dir, |n| {
        n.starts_with(".ckpt-") && n.contains(".safetensors.")
    });
}

/// Takes `--checkpoint-dir`'s lock for the whole run (an advisory `flock` on the directory,
/// released when the returned file is dropped or the process ends, however it ends): two runs
/// writing `ckpt-STEP.safetensors` into one directory would overwrite and `--keep`-delete each
/// other's checkpoints, so the second refuses at start. Where the file system has no locks,
/// the run goes on with a warning (`None`).
///
/// # Errors
/// Another live run holds the lock.
pub(crate) fn lock_checkpoint_dir(dir: &std::path::Path) -> Result<Option<std::fs::File>> {
    if cfg!(not(unix)) {
        return Ok(None);
    }
    let f =
        std::fs::File::open(dir).map_err(|e| Error::io("open checkpoint directory", dir, &e))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::config(format!(
            "checkpoint directory {} is in use by another running `lockstep train` (it holds \
             the directory's lock); give each run its own --checkpoint-dir, or wait until \
             that run ends",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            eprintln!(
                "warning: cannot lock checkpoint directory {} ({e}); make sure no other run \
                 writes checkpoints there",
                dir.display()
            );
            Ok(None)
        }
    }
}

/// What a checkpoint's metadata says of the run, checked for consistency with itself.
struct Resumed {
    step: usize,
    epoch: usize,
    step_losses: Vec<f64>,
    test_accuracy: Vec<f64>,
    init_sha256: String,
}

/// Reads and checks a checkpoint's metadata: the step is the number of recorded step
/// losses, one test accuracy per finished epoch (the checkpoint is written inside epoch
/// `epoch`, before its evaluation), at most one epoch per step, accuracies in [0, 1], a
/// SHA-256 in hex. A checksum only says the file is as written, not that what was written
/// makes sense.
fn resumed_of(meta: &serde_json::Value) -> Result<Resumed, CheckpointError> {
    let num = |k: &str| {
        meta[k]
            .as_u64()
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| {
                CheckpointError::invalid(k, format!("no {k}, or not a count: {}", meta[k]))
            })
    };
    let floats = |k: &str| -> Result<Vec<f64>, CheckpointError> {
        meta[k]
            .as_array()
            .ok_or_else(|| CheckpointError::Missing(k.into()))?
            .iter()
            // A NaN (a diverged loss) is written as null.
            .map(|v| match v {
                serde_json::Value::Null => Ok(f64::NAN),
                v => v
                    .as_f64()
                    .ok_or_else(|| CheckpointError::invalid(k, "not a number")),
            })
            .collect()
    };
    let r = Resumed {
        step: num("step")?,
        epoch: num("epoch")?,
        step_losses: floats("step_losses")?,
        test_accuracy: floats("test_accuracy")?,
        init_sha256: meta["init_sha256"]
            .as_str()
            .ok_or_else(|| CheckpointError::Missing("init_sha256".into()))?
            .to_string(),
    };
    let bad = |what: String| Err(CheckpointError::Contradiction(what));
    if r.step_losses.len() != r.step {
        return bad(format!(
            "step {} but {} step losses",
            r.step,
            r.step_losses.len()
        ));
    }
    if r.test_accuracy.len() != r.epoch {
        return bad(format!(
            "epoch {} but {} test accuracies (one per finished epoch)",
            r.epoch,
            r.test_accuracy.len()
        ));
    }
    if r.step <= r.epoch {
        return bad(format!(
            "step {} in epoch {} (every epoch before it takes at least one step, and so does \
             this one)",
            r.step, r.epoch
        ));
    }
    if let Some(a) = r.test_accuracy.iter().find(|a| !(0.0..=1.0).contains(*a)) {
        return bad(format!("a test accuracy of {a}"));
    }
    if !(r.init_sha256.len() == 64 && r.init_sha256.bytes().all(|b| b.is_ascii_hexdigit())) {
        return bad(format!("init_sha256 {:?} is not a SHA-256", r.init_sha256));
    }
    Ok(r)
}

/// The settings of a checkpoint's run that differ from this run's (`seed 1, lr 0.05`).
pub(crate) fn differences(theirs: &serde_json::Value, ours: &serde_json::Value) -> String {
    let Some(o) = ours.as_object() else {
        return String::new();
    };
    let d: Vec<String> = o
        .iter()
        .filter(|(k, v)| theirs.get(k.as_str()) != Some(*v))
        .map(|(k, _)| format!("{k} {}", theirs.get(k.as_str()).unwrap_or(&json!(null))))
        .collect();
    if d.is_empty() {
        // Keys only the checkpoint has (a newer or older lockstep).
        "other settings".into()
    } else {
        d.join(", ")
    }
}

/// `--resume`: a file, or the newest checkpoint in a directory that loads, has consistent
/// metadata and is this run's (`identity`): another run's newer checkpoints are skipped with a
/// warning. `None` if the directory has no checkpoint: the run starts from the beginning.
///
/// # Errors
/// A file that does not load; a directory with checkpoints of which none loads or none is this
/// run's (the message lists each file and its run's settings that differ).
fn resume_checkpoint(
    path: &std::path::Path,
    identity: &serde_json::Value,
) -> Result<Option<(Checkpoint, Resumed)>> {
    if !path.is_dir() {
        let ck = Checkpoint::load(path)?;
        let r = resumed_of(&ck.meta()).map_err(|e| in_file(path, e))?;
        return Ok(Some((ck, r)));
    }
    newest_of_this_run(
        path,
        identity,
        Some(identity.to_string()),
        |p| {
            let ck = Checkpoint::load(p)?;
            let r = resumed_of(&ck.meta()).map_err(|e| in_file(p, e))?;
            Ok((ck, r))
        },
        |(ck, _)| ck.meta()["config"].clone(),
        differences,
    )
}

/// The newest checkpoint in `dir` that `load` accepts and whose run settings (`config_of`)
/// are `identity`; another run's newer checkpoints and files that do not load are skipped
/// with a warning (`describe` names another run's differing settings). `None` if `dir` holds
/// no checkpoint. Shared by `train` and `gpt` `--resume`.
///
/// # Errors
/// Checkpoints of which none is this run's (each file listed with its differences, and
/// `ours` when given), or none that loads (the last failure).
pub(crate) fn newest_of_this_run<T>(
    dir: &std::path::Path,
    identity: &serde_json::Value,
    ours: Option<String>,
    load: impl Fn(&std::path::Path) -> Result<T>,
    config_of: impl Fn(&T) -> serde_json::Value,
    describe: impl Fn(&serde_json::Value, &serde_json::Value) -> String,
) -> Result<Option<T>> {
    let mut last_err = None;
    let mut others = Vec::new();
    for p in checkpoints_in(dir)? {
        match load(&p) {
            Ok(found) => {
                let config = config_of(&found);
                if config == *identity {
                    return Ok(Some(found));
                }
                let d = describe(&config, identity);
                eprintln!(
                    "warning: skipping {}: another run's checkpoint ({d})",
                    p.display()
                );
                others.push(format!(
                    "{} ({d})",
                    p.file_name().unwrap_or_default().to_string_lossy()
                ));
            }
            Err(e) => {
                eprintln!("warning: skipping {}: {e}", p.display());
                last_err = Some(e);
            }
        }
    }
    if !others.is_empty() {
        return Err(CheckpointError::NoneOfThisRun {
            dir: dir.to_path_buf(),
            others,
            ours,
        }
        .into());
    }
    match last_err {
        Some(e) => Err(CheckpointError::NoneValid {
            dir: dir.to_path_buf(),
            last: Box::new(e),
        }
        .into()),
        None => Ok(None),
    }
}

/// `error` as the error of the checkpoint file at `path`.
pub(crate) fn in_file(path: &std::path::Path, error: CheckpointError) -> Error {
    CheckpointError::InFile {
        path: path.to_path_buf(),
        error: Box::new(error),
    }
    .into()
}

/// Trains once with `cfg` (the whole program of `torch_train.py`) and returns its report.
///
/// # Errors
/// Invalid flags, an unreadable data file or checkpoint, or an op error (naming the op and
/// shapes).
pub fn run(cfg: &TrainConfig, progress: &mut dyn Progress) -> Result<Report> {
    run_distributed(cfg, progress, &mut Local)
}

/// [`run`] as one of the processes of `shards` (`--micro-batch` must be on when there are
/// several): each computes its own micro-shards, all apply the same update; only rank 0
/// writes checkpoints.
///
/// # Errors
/// As [`run`]; a failed exchange.
pub fn run_distributed(
    cfg: &TrainConfig,
    progress: &mut dyn Progress,
    shards: &mut dyn Shards,
) -> Result<Report> {
    let Checked { aug, invariant } = check_flags(cfg, shards.size())?;
    // Held until the run returns; only rank 0 writes checkpoints.
    let _dir_lock = prepare_checkpoint_dir(cfg, shards.rank())?;
    let resume = match &cfg.resume {
        Some(p) => resume_checkpoint(p, &identity(cfg))?,
        None => None,
    };
    set_up_globals(cfg)?;
    let Split {
        train_ds,
        x_test,
        test_y,
    } = split_data(cfg, aug)?;
    let mut model = initial_model(cfg)?;
    let params = model.parameters();
    let init_sha256 = sha256_of(params.iter().map(|p| p.data()).collect::<Vec<_>>().iter());
    let numpy_skip: NumpySkip = Default::default();
    let mut loader = build_loader(cfg, invariant, train_ds, numpy_skip.clone())?;
    let mut opt = build_optimizer(cfg, params.clone())?;
    let mut sched = build_scheduler(cfg, opt.as_mut())?;

    let mut so_far = Resumed {
        step: 0,
        epoch: 0,
        step_losses: Vec::new(),
        test_accuracy: Vec::new(),
        init_sha256,
    };
    if let Some((ck, resumed)) = resume {
        let mut parts = Parts {
            model: model.as_ref(),
            opt: opt.as_mut(),
            sched: sched.as_deref_mut(),
        };
        restore(
            cfg,
            &ck,
            &mut parts,
            &mut loader,
            &numpy_skip,
            aug,
            invariant,
        )?;
        check_resumed_step(&resumed, loader.len())?;
        so_far = resumed;
    }
    let Resumed {
        mut step,
        epoch: first_epoch,
        mut step_losses,
        mut test_accuracy,
        init_sha256,
    } = so_far;

    let per_epoch = loader.len();
    let total = if cfg.max_steps > 0 {
        cfg.max_steps.min(per_epoch.saturating_mul(cfg.epochs))
    } else {
        per_epoch.saturating_mul(cfg.epochs)
    };
    progress.start(total);
    let done = |s: usize| cfg.max_steps > 0 && s >= cfg.max_steps;
    for epoch in first_epoch..cfg.epochs {
        model.train(true);
        let mut it = loader.iter();
        // Checked before each step, so that a run resumed at its last step only finishes the
        // epoch (scheduler, evaluation) as the uninterrupted run did.
        while !done(step) {
            let Some(batch) = it.next() else { break };
            let (xb, yb, ib) = batch?;
            lockstep::tensor::trace::set_step(step);
            let l = if invariant {
                // The micro-shard sum is invariant seeding's gradient, on one process as on W.
                let keys = SampleKeys::new(
                    cfg.seed,
                    it.epoch(),
                    ib.to_vec::<i64>()?.into_iter().map(|i| i as u64).collect(),
                );
                let m = micro_batch_size(cfg.micro_batch);
                // mlp, cnn and lstm are made of the ops `with_batch_blocks` covers.
                if shards.whole_batch() {
                    whole_batch_grads(model.as_ref(), &params, m, keys, &xb, &yb)?
                } else {
                    micro_batch_grads(model.as_ref(), &params, shards, m, &keys, &xb, &yb)?
                }
            } else {
                let out = model.forward(&Var::constant(xb))?;
                let loss = F::cross_entropy(&out, &yb)?;
                opt.zero_grad();
                loss.backward()?;
                loss.data().item::<f32>()? as f64
            };
            if cfg.clip_grad_norm > 0.0 {
                optim::clip_grad_norm_(&params, cfg.clip_grad_norm, 2.0)?;
            }
            opt.step()?;
            step_losses.push(l);
            step += 1;
            progress.step(step, l);
            if let Some(dir) = &cfg.checkpoint_dir
                && shards.rank() == 0
                && cfg.checkpoint_every > 0
                && step.is_multiple_of(cfg.checkpoint_every)
            {
                let parts = Parts {
                    model: model.as_ref(),
                    opt: opt.as_mut(),
                    sched: sched.as_deref_mut(),
                };
                let meta = json!({
                    "config": identity(cfg),
                    "step": step,
                    "epoch": epoch,
                    "step_losses": step_losses,
                    "test_accuracy": test_accuracy,
                    "init_sha256": init_sha256,
                    "deterministic": lockstep::are_deterministic_algorithms_enabled(),
                    "benchmark": lockstep::tensor::autotune::benchmark(),
                    "threads": lockstep::get_num_threads(),
                    "workers": cfg.workers,
                });
                save_checkpoint(cfg, dir, step, &parts, &it.state_dict(), &meta)?;
            }
        }
        drop(it);
        // The replay is for the resumed pass only: a worker of that pass that had no batch
        // may start after the next pass's workers (its pool is not joined) and must not
        // leave its count to them.
        *numpy_skip.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if let Some(s) = sched.as_mut() {
            s.step(opt.as_mut());
        }
        let acc = evaluate(model.as_mut(), &x_test, &test_y)?;
        test_accuracy.push(acc);
        progress.epoch(epoch + 1, acc);
        if done(step) {
            break;
        }
    }
    progress.finish();
    shards.finish();
    Ok(report(
        cfg,
        model.as_ref(),
        step,
        init_sha256,
        step_losses,
        test_accuracy,
    ))
}

/// Creates `--checkpoint-dir`; on rank 0 also takes its lock (held while the returned file
/// lives) and removes killed runs' temporaries. Only rank 0 writes checkpoints.
///
/// # Errors
/// The directory cannot be created, or another run holds it.
fn prepare_checkpoint_dir(cfg: &TrainConfig, rank: usize) -> Result<Option<std::fs::File>> {
    let Some(d) = &cfg.checkpoint_dir else {
        return Ok(None);
    };
    std::fs::create_dir_all(d).map_err(|e| Error::io("create checkpoint directory", d, &e))?;
    if rank != 0 {
        return Ok(None);
    }
    let lock = lock_checkpoint_dir(d)?;
    remove_stale_temporaries(d);
    Ok(lock)
}

/// The process-wide settings of the run: threads, then the tutorials' `seed_everything` in
/// this order, then deterministic algorithms (on unless `--nondeterministic`).
fn set_up_globals(cfg: &TrainConfig) -> Result<()> {
    if cfg.threads > 0 {
        lockstep::set_num_threads(cfg.threads);
    }
    lockstep::seed_everything(cfg.seed)?;
    lockstep::use_deterministic_algorithms(!cfg.nondeterministic);
    Ok(())
}

/// The training set and the test inputs and labels.
struct Split {
    train_ds: NoisyDigits,
    x_test: Var,
    test_y: Vec<i64>,
}

/// Loads the data and splits it as `torch_train.py`: a `randperm` of its own generator seeded
/// with `--seed`, the last `--test-size` rows for testing.
fn split_data(cfg: &TrainConfig, aug: Aug) -> Result<Split> {
    let (x, y) = load_data(cfg.data.as_ref())?;
    let n = y.len();
    check_test_size(cfg.test_size, n)?;
    let split_gen = SharedGenerator::with_seed(cfg.seed);
    let perm = split_gen.with(|g| lockstep::rng::compat::torch::randperm(g, n));
    let (train_idx, test_idx) = perm.split_at(n - cfg.test_size);
    let gather = |idx: &[i64]| {
        let mut xs = Vec::with_capacity(idx.len() * 64);
        let mut ys = Vec::with_capacity(idx.len());
        for &i in idx {
            let i = i as usize;
            xs.extend_from_slice(&x[i * 64..(i + 1) * 64]);
            ys.push(y[i]);
        }
        (xs, ys)
    };
    let (train_x, train_y) = gather(train_idx);
    let (test_x, test_y) = gather(test_idx);
    let train_ds = NoisyDigits {
        x: train_x,
        y: train_y,
        aug,
        noise: cfg.noise,
    };
    let x_test = Var::constant(Tensor::from_vec(test_x, &[test_y.len(), 64])?);
    Ok(Split {
        train_ds,
        x_test,
        test_y,
    })
}

/// The model of `--model`, its initial weights from `--init-from` if given.
fn initial_model(cfg: &TrainConfig) -> Result<Box<dyn Forward>> {
    let model = model_of(cfg.model, cfg.hidden, cfg.dropout)?;
    if let Some(p) = &cfg.init_from {
        let state = lockstep::checkpoint::read_state_dict(p)?;
        load_state_dict_strict(model.as_ref(), cfg.model, state)
            .map_err(|e| Error::config(format!("--init-from {}: {e}", p.display())))?;
    }
    Ok(model)
}

/// The training loader: shuffled by its own generator seeded with `--seed`, per-sample
/// streams in invariant seeding, and `torch_train.py`'s `seed_worker` in each worker (with
/// `numpy_skip`'s replay when resuming mid-epoch).
fn build_loader(
    cfg: &TrainConfig,
    invariant: bool,
    train_ds: NoisyDigits,
    skip: NumpySkip,
) -> Result<DataLoader<NoisyDigits>> {
    Ok(DataLoader::builder(train_ds)
        .batch_size(cfg.batch_size)
        .shuffle(true)
        .generator(SharedGenerator::with_seed(cfg.seed))
        .num_workers(cfg.workers)
        .seeding(if invariant {
            lockstep::data::Seeding::PerSample { seed: cfg.seed }
        } else {
            lockstep::data::Seeding::TorchCompatible
        })
        .worker_init_fn(move |_| {
            // seed_worker: np.random.seed(torch.initial_seed() % 2**32) (and random.seed).
            let info = get_worker_info();
            let seed = info.as_ref().map_or(0, |w| w.seed);
            let mut rs = RandomState::new((seed % (1 << 32)) as u32);
            // Resuming mid-epoch: replay the Gaussians this worker drew before the checkpoint.
            let replay = info.and_then(|w| {
                let mut g = skip.lock().unwrap_or_else(|e| e.into_inner());
                g.as_mut().and_then(|v| v.get_mut(w.id).map(std::mem::take))
            });
            if let Some(k) = replay {
                let mut sink = vec![0f64; 64];
                for _ in 0..k {
                    rs.normal(0.0, 1.0, &mut sink)?;
                }
            }
            WORKER_NUMPY.with(|w| *w.borrow_mut() = Some(rs));
            Ok(())
        })
        .build()?)
}

/// What a checkpoint holds besides the loader and the generators.
struct Parts<'a> {
    model: &'a dyn Forward,
    opt: &'a mut dyn optim::Optimizer,
    sched: Option<&'a mut (dyn LrScheduler + 'static)>,
}

/// Loads a checkpoint of this run into the model, optimizer, scheduler, loader and the
/// global generators; refuses one of another run or with tensors nothing reads.
fn restore(
    cfg: &TrainConfig,
    ck: &Checkpoint,
    parts: &mut Parts<'_>,
    loader: &mut DataLoader<NoisyDigits>,
    numpy_skip: &NumpySkip,
    aug: Aug,
    invariant: bool,
) -> Result<()> {
    let meta = ck.meta();
    if meta["config"] != identity(cfg) {
        return Err(CheckpointError::OtherRun {
            theirs: meta["config"].to_string(),
            ours: identity(cfg).to_string(),
        }
        .into());
    }
    let mut known: Vec<String> = parts
        .model
        .named_all()
        .into_iter()
        .map(|n| n.name)
        .collect();
    ck.load_module(parts.model)?;
    ck.load_optimizer(parts.opt)?;
    known.extend(
        parts
            .opt
            .state()
            .into_iter()
            .map(|(k, _)| format!("optimizer.{k}")),
    );
    if let Some(s) = parts.sched.as_deref_mut() {
        ck.load_scheduler(s)?;
    }
    let ls = ck.loader()?;
    if !invariant && ls.in_pass && aug == Aug::Numpy && cfg.workers > 0 {
        // Samples each worker fetched this epoch: batch k went to worker k mod W.
        let mut per = vec![0usize; cfg.workers];
        for (k, b) in ls.batches[..ls.batches_done].iter().enumerate() {
            per[k % cfg.workers] += b.len();
        }
        *numpy_skip.lock().unwrap_or_else(|e| e.into_inner()) = Some(per);
    }
    loader.load_state_dict(ls)?;
    ck.restore_global_rngs()?;
    known.extend(
        ["loader.state", "rng.torch", "rng.python", "rng.numpy"]
            .iter()
            .map(|s| s.to_string()),
    );
    let extra: Vec<&str> = ck
        .names()
        .filter(|k| !known.iter().any(|n| n == k) && !k.starts_with("rng.registered."))
        .collect();
    if !extra.is_empty() {
        return Err(
            CheckpointError::Unexpected(extra.into_iter().map(String::from).collect()).into(),
        );
    }
    Ok(())
}

/// The step must fall inside its epoch: `(epoch·P, (epoch + 1)·P]` for `P` steps per epoch.
fn check_resumed_step(resumed: &Resumed, per_epoch: usize) -> Result<()> {
    let (lo, hi) = (
        resumed.epoch.saturating_mul(per_epoch),
        resumed.epoch.saturating_add(1).saturating_mul(per_epoch),
    );
    if !(lo < resumed.step && resumed.step <= hi) {
        return Err(CheckpointError::Contradiction(format!(
            "step {} is not in epoch {} ({per_epoch} steps per epoch: steps {}..={hi})",
            resumed.step,
            resumed.epoch,
            lo + 1
        ))
        .into());
    }
    Ok(())
}

/// Writes `ckpt-STEP.safetensors` into `dir`, then keeps only the newest `--keep` ones.
fn save_checkpoint(
    cfg: &TrainConfig,
    dir: &std::path::Path,
    step: usize,
    parts: &Parts<'_>,
    loader: &lockstep::data::LoaderState,
    meta: &serde_json::Value,
) -> Result<()> {
    let mut ck = Checkpoint::new();
    ck.put_module(parts.model);
    ck.put_optimizer(&*parts.opt);
    if let Some(s) = &parts.sched {
        ck.put_scheduler(&**s);
    }
    ck.put_loader(loader);
    ck.put_global_rngs();
    ck.set_meta(meta);
    ck.save(checkpoint_path(dir, step))?;
    if cfg.keep > 0 {
        for old in checkpoints_in(dir)?.into_iter().skip(cfg.keep) {
            let _ = std::fs::remove_file(old);
        }
    }
    Ok(())
}

/// The test accuracy of `model` in eval mode.
fn evaluate(model: &mut dyn Forward, x_test: &Var, test_y: &[i64]) -> Result<f64> {
    model.eval();
    let pred = no_grad(|| model.forward(x_test))?
        .data()
        .argmax(Some(1), false)?;
    let pred = pred.to_vec::<i64>()?;
    let correct = pred.iter().zip(test_y).filter(|(a, b)| a == b).count();
    Ok(correct as f64 / test_y.len() as f64)
}

/// The run's report: its losses and accuracies, the model's names and hashes.
fn report(
    cfg: &TrainConfig,
    model: &dyn Forward,
    steps: usize,
    init_sha256: String,
    step_losses: Vec<f64>,
    test_accuracy: Vec<f64>,
) -> Report {
    let state = model.state_dict();
    Report {
        model: cfg.model,
        seed: cfg.seed,
        steps,
        init_sha256,
        parameter_names: model
            .named_parameters()
            .into_iter()
            .map(|(k, _)| k)
            .collect(),
        state_dict_names: state.iter().map(|(k, _)| k.clone()).collect(),
        step_losses,
        test_accuracy,
        final_sha256: sha256_of(state.iter().map(|(_, t)| t)),
    }
}

/// Terminal progress: a bar (steps, loss, samples/s) when stdout is a terminal, else nothing.
pub struct Bar {
    bar: Option<indicatif::ProgressBar>,
    batch_size: usize,
    lines: bool,
}

impl Bar {
    /// A bar on standard error if stdout is a terminal and `json` is off; with `lines`, one
    /// line per epoch on stdout.
    pub fn new(json: bool, batch_size: usize) -> Self {
        use std::io::IsTerminal;
        let tty = std::io::stdout().is_terminal();
        Self {
            bar: None,
            batch_size,
            lines: !json && tty,
        }
        .with_bar(tty && !json)
    }

    fn with_bar(mut self, on: bool) -> Self {
        if on {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} steps  loss {msg}  {per_sec}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            self.bar = Some(b);
        }
        self
    }
}

impl Progress for Bar {
    fn start(&mut self, total: usize) {
        if let Some(b) = &self.bar {
            b.set_length(total as u64);
        }
    }
    fn step(&mut self, _step: usize, loss: f64) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{loss:.4}  ({} samples/step)", self.batch_size));
            b.inc(1);
        }
    }
    fn epoch(&mut self, epoch: usize, acc: f64) {
        if self.lines {
            let line = format!("epoch {epoch:>3}  test accuracy {:6.2}%", acc * 100.0);
            match &self.bar {
                Some(b) => b.println(line),
                None => println!("{line}"),
            }
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// `lockstep train`: runs, prints the JSON report (`--json`) or a summary; exit code 2 on bad
/// input.
pub fn main(cfg: &TrainConfig, json: bool) -> std::process::ExitCode {
    let mut bar = Bar::new(json, cfg.batch_size);
    match run(cfg, &mut bar) {
        Ok(r) => {
            print_report(&r, json);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            bar.finish();
            eprintln!("error: lockstep train: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// What `lockstep train` prints at the end: the JSON report (`--json`) or a summary.
pub fn print_report(r: &Report, json: bool) {
    if json {
        println!("{}", r.to_json());
    } else {
        let last = r.step_losses.last().copied().unwrap_or(f64::NAN);
        let acc = r.test_accuracy.last().copied().unwrap_or(f64::NAN);
        println!(
            "{} seed {}: {} steps, final loss {last:.6}, test accuracy {:.2}%",
            r.model,
            r.seed,
            r.steps,
            acc * 100.0
        );
        println!("init_sha256  {}", r.init_sha256);
        println!("final_sha256 {}", r.final_sha256);
    }
}

/// `--micro-batch` and several processes: invariant seeding.
///
/// # Errors
/// Torch seeding with micro-shards or with several processes.
pub fn check_micro_batch(cfg: &TrainConfig, processes: usize) -> Result<()> {
    if cfg.micro_batch == 0 {
        if processes > 1 && cfg.seeding != Seeding::Invariant {
            return Err(Error::config("several processes need --seeding invariant"));
        }
        return Ok(());
    }
    if cfg.seeding != Seeding::Invariant {
        return Err(Error::config(format!(
            "--micro-batch {} needs --seeding invariant (each sample's noise and dropout masks \
             from its own stream); got --seeding {}",
            cfg.micro_batch, cfg.seeding
        )));
    }
    Ok(())
}

/// BatchNorm's partial statistics through the micro-shard exchange.
struct StatsOver<'a>(&'a mut dyn Shards);

impl StatsExchange for StatsOver<'_> {
    fn gather(
        &mut self,
        own: &[Vec<f64>],
        g: usize,
        len: usize,
    ) -> lockstep::tensor::Result<Vec<Vec<f64>>> {
        self.0
            .gather_f64(own, g, len)
            .map_err(|e| lockstep::tensor::Error::InvalidArgument {
                op: "sync_batch_norm",
                arg: "exchange",
                reason: e.to_string(),
            })
    }
}

/// One step's gradients as the fixed-order sum of micro-shard gradients: micro-shard `k` is
/// rows `k·m .. min((k+1)·m, B)` of the batch; its loss is the sum-reduced cross entropy
/// times `1 / B` (so the micro-shards' losses add up to the batch mean); this process computes
/// the micro-shards `shards` gives it, the exchange gathers all of them in order, and
/// [`crate::shards::tree_sum`] adds them. BatchNorm's statistics are over the whole
/// batch, gathered the same way ([`SyncStep`]); a process that owns no micro-shard runs one
/// as a shadow (for BatchNorm's exchanges and running statistics) and contributes nothing.
/// Sets every parameter's gradient; returns the batch loss.
fn micro_batch_grads(
    model: &dyn Forward,
    params: &[Var],
    shards: &mut dyn Shards,
    m: usize,
    keys: &SampleKeys,
    xb: &Tensor,
    yb: &Tensor,
) -> Result<f64> {
    let b = yb.shape()[0];
    let g = b.div_ceil(m);
    let sizes: Vec<usize> = params.iter().map(Var::numel).collect();
    let len = sizes.iter().sum::<usize>() + 1;
    let inv_b = 1.0 / b as f64;
    let sum_loss = F::CrossEntropy {
        reduction: F::Reduction::Sum,
        ..F::CrossEntropy::default()
    };
    let mut here: Vec<MicroShard> = (0..g)
        .filter(|&k| shards.owns(k))
        .map(|index| MicroShard { index, owned: true })
        .collect();
    if here.is_empty() {
        here.push(MicroShard {
            index: shards.rank() % g,
            owned: false,
        });
    }
    let mut own = Vec::new();
    {
        let mut exchange = StatsOver(&mut *shards);
        let mut step = SyncStep::new(&mut exchange, g, here)?;
        let losses = step.forward(|k| {
            let (start, n) = (k * m, m.min(b - k * m));
            let x = Var::constant(xb.narrow(0, start, n)?);
            let y = yb.narrow(0, start, n)?.contiguous();
            let keys = SampleKeys::new(
                keys.seed,
                keys.epoch,
                keys.indices[start..start + n].to_vec(),
            );
            let out = with_sample_keys(keys, || model.forward(&x))?;
            F::cross_entropy_with(&out, &y, &sum_loss)?.mul_scalar(inv_b)
        })?;
        step.backward(&losses, |_, loss| {
            params.iter().for_each(Var::zero_grad);
            loss.backward()?;
            let mut v = Vec::with_capacity(len);
            for (p, &size) in params.iter().zip(&sizes) {
                match p.grad() {
                    Some(gr) => v.extend(gr.contiguous().to_vec::<f32>()?),
                    None => v.resize(v.len() + size, 0.0),
                }
            }
            v.push(loss.data().item::<f32>()?);
            own.push(v);
            Ok(())
        })?;
    }
    let sum = shards.reduce(&own, g, len)?;
    shards.after_step(&own);
    let mut at = 0;
    for (p, &size) in params.iter().zip(&sizes) {
        let grad = Tensor::from_vec(sum[at..at + size].to_vec(), p.shape())?;
        p.set_grad(Some(grad))?;
        at += size;
    }
    Ok(sum[len - 1] as f64)
}

/// [`micro_batch_grads`] on one process owning every micro-shard, in one pass: the model's
/// forward and backward over the whole batch inside
/// [`with_batch_blocks`](lockstep::nn::batch_blocks::with_batch_blocks), whose ops reduce the
/// batch into the parameter gradients micro-shard by micro-shard and add them in the fixed
/// tree, and BatchNorm merges the micro-shards' statistics as [`SyncStep`] does; the loss is
/// each micro-shard's sum-reduced cross entropy times `1 / B`, added in the same tree. The
/// same bits as [`micro_batch_grads`] for models made of the ops it covers (mlp, cnn, lstm).
fn whole_batch_grads(
    model: &dyn Forward,
    params: &[Var],
    m: usize,
    keys: SampleKeys,
    xb: &Tensor,
    yb: &Tensor,
) -> Result<f64> {
    let b = yb.shape()[0];
    let inv_b = 1.0 / b as f64;
    let sum_loss = F::CrossEntropy {
        reduction: F::Reduction::Sum,
        ..F::CrossEntropy::default()
    };
    params.iter().for_each(Var::zero_grad);
    let out = with_batch_blocks(b, m, || {
        let out = with_sample_keys(keys, || model.forward(&Var::constant(xb.clone())))?;
        F::cross_entropy_with(&out, yb, &sum_loss)?
            .mul_scalar(inv_b)?
            .backward()?;
        Ok(out)
    })?;
    // The loss as the micro-shards computed it: each one's sum times 1 / B, then the tree.
    // A sum-reduced cross entropy is its rows' losses (each `-log p` of its own row, exact
    // in f32) added in f64 in row order, rounded to the dtype: so one pass over the batch
    // unreduced, each block's rows added as that sum adds them, and one `mul_scalar`.
    let rows = no_grad(|| {
        let none = F::CrossEntropy {
            reduction: F::Reduction::None,
            ..F::CrossEntropy::default()
        };
        F::cross_entropy_with(&Var::constant(out.data()), yb, &none)
    })?
    .data()
    .to_vec::<f32>()?;
    let sums: Vec<f32> = rows
        .chunks(m)
        .map(|c| c.iter().map(|&v| f64::from(v)).sum::<f64>() as f32)
        .collect();
    let g = sums.len();
    let losses: Vec<Vec<f32>> = Tensor::from_vec(sums, &[g])?
        .mul_scalar(inv_b)?
        .to_vec::<f32>()?
        .into_iter()
        .map(|l| vec![l])
        .collect();
    for p in params {
        if p.grad().is_none() {
            p.set_grad(Some(Tensor::zeros(p.shape(), p.dtype())?))?;
        }
    }
    Ok(crate::shards::tree_sum(&losses)[0] as f64)
}
