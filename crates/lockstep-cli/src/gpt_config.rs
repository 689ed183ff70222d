//! The configuration of `lockstep train --model gpt` ([`GptConfig`], `torch_gpt.py`'s flags
//! and defaults) and what an evaluation reports ([`Eval`]): its own module so that the run
//! (`gpt`) and its checkpoints (`gpt_checkpoint`) both build on it and neither on the other's
//! config.

use std::path::PathBuf;

/// The flags of `torch_gpt.py`, with its defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GptConfig {
    /// `torch.manual_seed(seed)`.
    pub seed: u64,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads (must divide `n_embd`).
    pub n_head: usize,
    /// Embedding width.
    pub n_embd: usize,
    /// Context length.
    pub block_size: usize,
    /// Biases in the linear layers and LayerNorms.
    pub bias: bool,
    /// Dropout probability (embedding, attention, residual, MLP).
    pub dropout: f64,
    /// Windows per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    pub grad_accum: usize,
    /// Optimizer steps.
    pub max_iters: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Learning rate after the cosine decay.
    pub min_lr: f64,
    /// Steps of linear warmup.
    pub warmup_iters: usize,
    /// The step where the cosine ends (0: `max_iters`).
    pub lr_decay_iters: usize,
    /// Warmup + cosine (`true`) or a constant `lr`.
    pub decay_lr: bool,
    /// AdamW weight decay of matrices and embeddings (biases and LayerNorm weights: none).
    pub weight_decay: f64,
    /// AdamW β₁.
    pub beta1: f64,
    /// AdamW β₂.
    pub beta2: f64,
    /// `clip_grad_norm_` threshold (0: no clipping).
    pub grad_clip: f64,
    /// Evaluate every this many steps (0: never).
    pub eval_interval: usize,
    /// Windows per split and evaluation.
    pub eval_iters: usize,
    /// Tokens sampled at the end.
    pub sample_tokens: usize,
    /// Sampling temperature.
    pub temperature: f64,
    /// Keep the `top_k` largest logits when sampling (0: all).
    pub top_k: usize,
    /// The sample's prompt.
    pub prompt: String,
    /// Fraction of the text held out for validation (its end).
    pub val_fraction: f64,
    /// Kernel threads (0: all cores).
    pub threads: usize,
    /// A `.txt` or `.txt.gz` corpus; `None`: the embedded Tiny Shakespeare.
    pub data: Option<PathBuf>,
    /// Turn deterministic algorithms off.
    pub nondeterministic: bool,
    /// `torch` (PyTorch's draws) or `invariant` (windows and dropout masks from per-sample
    /// streams, the step's gradient a fixed-order sum over micro-shards: one result for
    /// every split of the global batch, thread count and number of processes).
    pub seeding: String,
    /// Invariant seeding: windows per micro-shard (0: the default,
    /// [`crate::shards::DEFAULT_MICRO_BATCH`]).
    pub micro_batch: usize,
    /// Where checkpoints go (`ckpt-{step:08}.safetensors`; see the `gpt_checkpoint` module).
    pub checkpoint_dir: Option<PathBuf>,
    /// Save a checkpoint every this many steps (0 = never).
    pub checkpoint_every: usize,
    /// Keep only the newest this many checkpoints (0 = all).
    pub keep: usize,
    /// Resume from this checkpoint, or from the newest of this run in this directory.
    pub resume: Option<PathBuf>,
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
            seeding: "torch".into(),
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
