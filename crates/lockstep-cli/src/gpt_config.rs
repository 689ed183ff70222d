//! The configuration of `lockstep train --model gpt` ([`GptConfig`], `torch_gpt.py`'s flags
//! and defaults) and what an evaluation reports ([`Eval`]): its own module so that the run
//! (`gpt`) and its checkpoints (`gpt_checkpoint`) both build on it and neither on the other's
//! config.

pub use crate::names::Seeding;
use std::path::PathBuf;

/// The flags of `torch_gpt.py`, with its defaults: the gpt-only flags of `lockstep train`
/// (`clap::Args`; the field docs are the `--help` texts). The flags it shares with the other
/// models (`--seed`, `--batch-size`, `--lr`, `--weight-decay`, `--dropout`, `--threads`,
/// `--data`, `--nondeterministic`, `--seeding`, `--micro-batch` and the checkpoint flags) are
/// [`crate::train::TrainConfig`]'s on the command line and skipped here (parsed alone, they
/// keep these defaults); the CLI copies those given, and the ones without a gpt default of
/// their own.
///
/// `seeding`: `torch` (PyTorch's draws) or `invariant` (windows and dropout masks from
/// per-sample streams, the step's gradient a fixed-order sum over micro-shards: one result for
/// every split of the global batch, thread count and number of processes). `micro_batch`:
/// invariant seeding's windows per micro-shard (0: the default,
/// [`crate::shards::DEFAULT_MICRO_BATCH`]). `checkpoint_dir`: where checkpoints go
/// (`ckpt-{step:08}.safetensors`; see the `gpt_checkpoint` module).
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct GptConfig {
    /// `torch.manual_seed(seed)`.
    #[arg(skip = 1337u64)]
    pub seed: u64,
    /// gpt: transformer blocks [default: 4].
    #[arg(long, default_value_t = 4, hide_default_value = true)]
    pub n_layer: usize,
    /// gpt: attention heads, dividing --n-embd [default: 4].
    #[arg(long, default_value_t = 4, hide_default_value = true)]
    pub n_head: usize,
    /// gpt: embedding width [default: 128].
    #[arg(long, default_value_t = 128, hide_default_value = true)]
    pub n_embd: usize,
    /// gpt: context length in characters [default: 64].
    #[arg(long, default_value_t = 64, hide_default_value = true)]
    pub block_size: usize,
    /// gpt: biases in linear layers and LayerNorms, 0 or 1 [default: 1].
    #[arg(long, default_value = "1", hide_default_value = true, value_parser = nonzero,
          action = clap::ArgAction::Set)]
    pub bias: bool,
    /// Dropout probability (embedding, attention, residual, MLP).
    #[arg(skip = 0.1)]
    pub dropout: f64,
    /// Windows per micro-batch.
    #[arg(skip = 16usize)]
    pub batch_size: usize,
    /// gpt: micro-batches per optimizer step [default: 1].
    #[arg(long, default_value_t = 1, hide_default_value = true)]
    pub grad_accum: usize,
    /// gpt: optimizer steps [default: 200].
    #[arg(long, default_value_t = 200, hide_default_value = true)]
    pub max_iters: usize,
    /// Peak learning rate.
    #[arg(skip = 1e-3)]
    pub lr: f64,
    /// gpt: learning rate at the end of the cosine [default: 0.0001].
    #[arg(long, default_value_t = 1e-4, hide_default_value = true)]
    pub min_lr: f64,
    /// gpt: steps of linear warmup [default: 20].
    #[arg(long, default_value_t = 20, hide_default_value = true)]
    pub warmup_iters: usize,
    /// gpt: step where the cosine ends, 0 = --max-iters [default: 0].
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub lr_decay_iters: usize,
    /// gpt: warmup + cosine (1) or a constant --lr (0) [default: 1].
    #[arg(long, default_value = "1", hide_default_value = true, value_parser = nonzero,
          action = clap::ArgAction::Set)]
    pub decay_lr: bool,
    /// AdamW weight decay of matrices and embeddings (biases and LayerNorm weights: none).
    #[arg(skip = 0.1)]
    pub weight_decay: f64,
    /// gpt: AdamW beta1 [default: 0.9].
    #[arg(long, default_value_t = 0.9, hide_default_value = true)]
    pub beta1: f64,
    /// gpt: AdamW beta2 [default: 0.95].
    #[arg(long, default_value_t = 0.95, hide_default_value = true)]
    pub beta2: f64,
    /// gpt: clip the gradients' total 2-norm to this, 0 = off [default: 1.0].
    #[arg(long, default_value_t = 1.0, hide_default_value = true)]
    pub grad_clip: f64,
    /// gpt: evaluate every N steps, 0 = never [default: 50].
    #[arg(long, default_value_t = 50, hide_default_value = true)]
    pub eval_interval: usize,
    /// gpt: windows per split and evaluation [default: 5].
    #[arg(long, default_value_t = 5, hide_default_value = true)]
    pub eval_iters: usize,
    /// gpt: characters sampled at the end [default: 200].
    #[arg(long, default_value_t = 200, hide_default_value = true)]
    pub sample_tokens: usize,
    /// gpt: sampling temperature [default: 0.8].
    #[arg(long, default_value_t = 0.8, hide_default_value = true)]
    pub temperature: f64,
    /// gpt: sample from the K most likely characters, 0 = all [default: 20].
    #[arg(long, default_value_t = 20, hide_default_value = true)]
    pub top_k: usize,
    /// gpt: the sample's prompt [default: a newline].
    #[arg(
        long,
        default_value = "\n",
        hide_default_value = true,
        allow_hyphen_values = true
    )]
    pub prompt: String,
    /// gpt: fraction of the text (its end) held out for validation [default: 0.1].
    #[arg(long, default_value_t = 0.1, hide_default_value = true)]
    pub val_fraction: f64,
    /// Kernel threads (0: all cores).
    #[arg(skip)]
    pub threads: usize,
    /// A `.txt` or `.txt.gz` corpus; `None`: the embedded Tiny Shakespeare.
    #[arg(skip)]
    pub data: Option<PathBuf>,
    /// Turn deterministic algorithms off.
    #[arg(skip)]
    pub nondeterministic: bool,
    /// `torch` or `invariant` (see above).
    #[arg(skip = Seeding::Torch)]
    pub seeding: Seeding,
    /// Invariant seeding: windows per micro-shard (0: the default).
    #[arg(skip)]
    pub micro_batch: usize,
    /// Where checkpoints go.
    #[arg(skip)]
    pub checkpoint_dir: Option<PathBuf>,
    /// Save a checkpoint every this many steps (0 = never).
    #[arg(skip)]
    pub checkpoint_every: usize,
    /// Keep only the newest this many checkpoints (0 = all).
    #[arg(skip)]
    pub keep: usize,
    /// Resume from this checkpoint, or from the newest of this run in this directory.
    #[arg(skip)]
    pub resume: Option<PathBuf>,
}

/// `--bias` and `--decay-lr`: an integer, true unless 0 (as `torch_gpt.py`'s `bool(int(x))`).
fn nonzero(s: &str) -> Result<bool, std::num::ParseIntError> {
    s.parse::<i64>().map(|v| v != 0)
}

impl Default for GptConfig {
    fn default() -> Self {
        Self {
            seed: 1337,
            n_layer: 4,
            n_head: 4,
            n_embd: 128,
            block_size: 64,
            bias: true,
            dropout: 0.1,
            batch_size: 16,
            grad_accum: 1,
            max_iters: 200,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup_iters: 20,
            lr_decay_iters: 0,
            decay_lr: true,
            weight_decay: 0.1,
            beta1: 0.9,
            beta2: 0.95,
            grad_clip: 1.0,
            eval_interval: 50,
            eval_iters: 5,
            sample_tokens: 200,
            temperature: 0.8,
            top_k: 20,
            prompt: "\n".into(),
            val_fraction: 0.1,
            threads: 0,
            data: None,
            nondeterministic: false,
            seeding: Seeding::Torch,
            micro_batch: 0,
            checkpoint_dir: None,
            checkpoint_every: 0,
            keep: 0,
            resume: None,
        }
    }
}

/// One evaluation: the mean loss over `eval_iters` random windows of each split.
#[derive(Clone, Debug, PartialEq)]
pub struct Eval {
    /// The step it ran before (`max_iters` for the final one).
    pub iter: usize,
    /// Mean training-split loss.
    pub train: f64,
    /// Mean validation-split loss.
    pub val: f64,
}

/// The step where the cosine ends: `--lr-decay-iters`, or `--max-iters` when it is 0.
pub(crate) fn decay_iters(cfg: &GptConfig) -> usize {
    if cfg.lr_decay_iters == 0 {
        cfg.max_iters
    } else {
        cfg.lr_decay_iters
    }
}
