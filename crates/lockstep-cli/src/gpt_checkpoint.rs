//! Checkpoints and `--resume` for `lockstep train --model gpt`, in train's format.
//!
//! A gpt checkpoint is the file [`lockstep::checkpoint::Checkpoint`] writes for mlp, cnn and
//! lstm (`ckpt-STEP.safetensors`, written to a unique temporary file in the same directory,
//! fsynced, renamed): the model's `state_dict` under PyTorch's names (the tied
//! `lm_head.weight` and `transformer.wte.weight` both, as `torch.save(model.state_dict())`),
//! AdamW's state of both parameter groups (`optimizer.state.…`, the per-group learning rates in
//! the metadata), the default generator (`rng.torch`, the bytes `torch.set_rng_state` takes)
//! and, as JSON metadata, `kind: "gpt"`, the run's configuration, the step, the report so far
//! (`step_losses`, `lrs`, `grad_norms`, `evals`, `init_sha256`), the vocabulary and the model's
//! shape (what `lockstep generate` needs).
//!
//! A checkpoint is written after step `s` (`s` a multiple of `--checkpoint-every`), before step
//! `s`'s evaluation (if any): resuming at `s` replays that evaluation from the same generator
//! state, so a run stopped at `s` and resumed gives the uninterrupted run's report and final
//! weights bit for bit (at any thread count: the kernels are thread-invariant).

use crate::gpt_config::{Eval, GptConfig, decay_iters};
use crate::train::{
    checkpoint_path, checkpoints_in, differences, in_file, lock_checkpoint_dir, newest_of_this_run,
    remove_stale_temporaries,
};
use lockstep::checkpoint::{Checkpoint, CheckpointError, FlagDifference};
use lockstep::nn::Module;
use lockstep::nn::optim::Optimizer;
use serde_json::{Value, json};
use std::path::Path;

use lockstep::{Error, Result};

/// The configuration a checkpoint must share with the run that resumes it: every flag that
/// shapes the model, the data, the random streams or the arithmetic. Not `--threads` (the bits
/// do not depend on it), `--max-iters` (a run may be extended; its effect on the schedule is in
/// `lr_decay_iters`), the sampling flags or the checkpoint flags. With `--seeding invariant`
/// the split of the global batch is not part of it either (`--batch-size × --grad-accum` is,
/// and the micro-shard size): every split gives the same bits, so a run may resume with
/// another.
pub fn identity(cfg: &GptConfig) -> Value {
    let mut id = json!({
        "model": "gpt", "seed": cfg.seed, "n_layer": cfg.n_layer, "n_head": cfg.n_head,
        "n_embd": cfg.n_embd, "block_size": cfg.block_size, "bias": cfg.bias,
        "dropout": cfg.dropout, "batch_size": cfg.batch_size, "grad_accum": cfg.grad_accum,
        "lr": cfg.lr, "min_lr": cfg.min_lr, "warmup_iters": cfg.warmup_iters,
        // The step where the cosine ends (`--max-iters` when `--lr-decay-iters` is 0).
        "lr_decay_iters": if cfg.decay_lr { decay_iters(cfg) } else { 0 },
        "decay_lr": cfg.decay_lr, "weight_decay": cfg.weight_decay, "beta1": cfg.beta1,
        "beta2": cfg.beta2, "grad_clip": cfg.grad_clip, "eval_interval": cfg.eval_interval,
        "eval_iters": cfg.eval_iters, "val_fraction": cfg.val_fraction,
        "data": cfg.data.as_ref().map(|p| p.display().to_string()),
        "nondeterministic": cfg.nondeterministic,
        "seeding": cfg.seeding.as_str(),
    });
    if cfg.seeding == crate::names::Seeding::Invariant {
        let global = cfg.batch_size * cfg.grad_accum;
        id["batch_size"] = json!(global);
        id["grad_accum"] = json!(1);
        id["micro_batch"] = json!(crate::shards::micro_batch_size(cfg.micro_batch));
    }
    id
}

/// The report of a run up to a step: what a checkpoint carries and a resume restores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SoFar {
    /// Steps done.
    pub step: usize,
    /// Their losses.
    pub step_losses: Vec<f64>,
    /// Their learning rates.
    pub lrs: Vec<f64>,
    /// Their gradient norms (empty without clipping).
    pub grad_norms: Vec<f64>,
    /// The evaluations so far.
    pub evals: Vec<Eval>,
}

/// The model's shape and vocabulary as a gpt checkpoint records them.
#[derive(Clone, Debug, PartialEq)]
pub struct GptMeta {
    /// The run's configuration ([`identity`]).
    pub config: Value,
    /// The vocabulary, in id order.
    pub vocab: Vec<char>,
    /// Steps trained.
    pub step: usize,
}

/// What the checkpoint flags of one run hold: the directory's lock while the run lives.
pub struct Hooks {
    dir: Option<std::path::PathBuf>,
    every: usize,
    keep: usize,
    resume: Option<Checkpoint>,
    _lock: Option<std::fs::File>,
}

fn num(meta: &Value, k: &str) -> Result<usize, CheckpointError> {
    meta[k]
        .as_u64()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| {
            let v = &meta[k];
            CheckpointError::invalid(k, format!("no {k}, or not a count: {v}"))
        })
}

fn floats(meta: &Value, k: &str) -> Result<Vec<f64>, CheckpointError> {
    meta[k]
        .as_array()
        .ok_or_else(|| CheckpointError::Missing(k.into()))?
        .iter()
        // A NaN (a diverged loss) is written as null.
        .map(|v| match v {
            Value::Null => Ok(f64::NAN),
            v => v
                .as_f64()
                .ok_or_else(|| CheckpointError::invalid(k, "not a number")),
        })
        .collect()
}

/// Reads a gpt checkpoint's metadata and checks it for consistency with itself: `kind` gpt,
/// one loss and one learning rate per step, evaluations at steps not after the checkpoint's.
///
/// # Errors
/// A checkpoint of another model (mlp, cnn, lstm), or metadata that contradicts itself.
pub fn meta_of(meta: &Value) -> Result<(GptMeta, SoFar, String), CheckpointError> {
    if meta["kind"] != "gpt" {
        let what = meta["config"]["model"]
            .as_str()
            .map_or("not a gpt model".to_string(), |m| format!("--model {m}"));
        return Err(CheckpointError::OtherModel(format!(
            "not a gpt checkpoint (it holds {what}); write one with `lockstep train --model gpt \
             --checkpoint-dir DIR --checkpoint-every N`"
        )));
    }
    let evals = meta["evals"]
        .as_array()
        .ok_or_else(|| CheckpointError::Missing("evals".into()))?
        .iter()
        .map(|e| {
            Some(Eval {
                iter: usize::try_from(e["iter"].as_u64()?).ok()?,
                train: e["train"].as_f64().unwrap_or(f64::NAN),
                val: e["val"].as_f64().unwrap_or(f64::NAN),
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| CheckpointError::invalid("evals", "not a list of evaluations"))?;
    let s = SoFar {
        step: num(meta, "step")?,
        step_losses: floats(meta, "step_losses")?,
        lrs: floats(meta, "lrs")?,
        grad_norms: floats(meta, "grad_norms")?,
        evals,
    };
    let vocab: Vec<char> = meta["vocab"]
        .as_str()
        .ok_or_else(|| CheckpointError::Missing("vocab".into()))?
        .chars()
        .collect();
    let init = meta["init_sha256"]
        .as_str()
        .ok_or_else(|| CheckpointError::Missing("init_sha256".into()))?
        .to_string();
    let bad = |what: String| Err(CheckpointError::Contradiction(what));
    if s.step_losses.len() != s.step || s.lrs.len() != s.step {
        return bad(format!(
            "step {} but {} step losses and {} learning rates",
            s.step,
            s.step_losses.len(),
            s.lrs.len()
        ));
    }
    if !(s.grad_norms.is_empty() || s.grad_norms.len() == s.step) {
        return bad(format!(
            "step {} but {} gradient norms",
            s.step,
            s.grad_norms.len()
        ));
    }
    if s.evals.iter().any(|e| e.iter >= s.step) {
        return bad(format!("an evaluation after step {}", s.step));
    }
    if vocab.is_empty() || !vocab.windows(2).all(|w| w[0] < w[1]) {
        return bad("the vocabulary is not distinct characters in order".into());
    }
    if !(init.len() == 64 && init.bytes().all(|b| b.is_ascii_hexdigit())) {
        return bad(format!("init_sha256 {init:?} is not a SHA-256"));
    }
    let m = GptMeta {
        config: meta["config"].clone(),
        vocab,
        step: s.step,
    };
    Ok((m, s, init))
}

/// `--flag A (checkpoint) vs B (this run)` for each setting that differs (none: settings
/// only the checkpoint has).
fn flag_differences(theirs: &Value, ours: &Value) -> Vec<FlagDifference> {
    let Some(o) = ours.as_object() else {
        return Vec::new();
    };
    o.iter()
        .filter(|(k, v)| theirs.get(k.as_str()) != Some(*v))
        .map(|(k, v)| {
            let flag = match k.as_str() {
                // The cosine's end: `--max-iters` when `--lr-decay-iters` is 0.
                "lr_decay_iters" => "--lr-decay-iters (the cosine's end: --max-iters when \
                                     --lr-decay-iters is 0)"
                    .to_string(),
                k => format!("--{}", k.replace('_', "-")),
            };
            FlagDifference {
                flag,
                checkpoint: theirs.get(k.as_str()).unwrap_or(&Value::Null).to_string(),
                run: v.to_string(),
            }
        })
        .collect()
}

/// [`flag_differences`] as one line (train's `key value` list when no flag differs).
fn flag_line(theirs: &Value, ours: &Value) -> String {
    let d = flag_differences(theirs, ours);
    if d.is_empty() {
        return differences(theirs, ours);
    }
    d.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Loads a checkpoint file and checks that it is a consistent gpt checkpoint.
///
/// # Errors
/// Unreadable, truncated or corrupt (train's reader: checksum, format version), not gpt,
/// inconsistent metadata; each message names the file.
pub fn load(path: &Path) -> Result<(Checkpoint, GptMeta)> {
    let ck = Checkpoint::load(path)?;
    let (m, _, _) = meta_of(&ck.meta()).map_err(|e| in_file(path, e))?;
    Ok((ck, m))
}

/// `--resume PATH`: the file, or the newest checkpoint of this run in the directory (others
/// skipped with a warning; `None` when it holds none).
fn pick(path: &Path, id: &Value) -> Result<Option<Checkpoint>> {
    if !path.is_dir() {
        let (ck, m) = load(path)?;
        if m.config != *id {
            return Err(in_file(
                path,
                CheckpointError::OtherFlags(flag_differences(&m.config, id)),
            ));
        }
        return Ok(Some(ck));
    }
    Ok(
        newest_of_this_run(path, id, None, load, |(_, m)| m.config.clone(), flag_line)?
            .map(|(ck, _)| ck),
    )
}

impl Hooks {
    /// Checks the checkpoint flags, creates and locks `--checkpoint-dir` (removing temporary
    /// files killed runs left) and reads the `--resume` checkpoint, before any work.
    ///
    /// # Errors
    /// `--checkpoint-every` without `--checkpoint-dir`; a directory that cannot be created or
    /// that another live run holds; a checkpoint that does not load or is another run's.
    pub fn start(cfg: &GptConfig) -> Result<Self> {
        check(cfg)?;
        let mut lock = None;
        if let Some(d) = &cfg.checkpoint_dir {
            std::fs::create_dir_all(d)
                .map_err(|e| Error::io("create checkpoint directory", d, &e))?;
            lock = lock_checkpoint_dir(d)?;
            remove_stale_temporaries(d);
        }
        let resume = match &cfg.resume {
            Some(p) => pick(p, &identity(cfg))?,
            None => None,
        };
        Ok(Self {
            dir: cfg.checkpoint_dir.clone(),
            every: cfg.checkpoint_every,
            keep: cfg.keep,
            resume,
            _lock: lock,
        })
    }

    /// Restores the `--resume` checkpoint into the freshly built model and optimizer, and the
    /// default generator; returns the report so far (`None`: start from step 0).
    ///
    /// # Errors
    /// A checkpoint for another vocabulary or initialisation, past `--max-iters`, with
    /// tensors that do not fit or that the model does not have.
    pub fn resume(
        &mut self,
        cfg: &GptConfig,
        model: &dyn Module,
        opt: &mut dyn Optimizer,
        vocab: &[char],
        init_sha256: &str,
    ) -> Result<Option<SoFar>> {
        let Some(ck) = self.resume.take() else {
            return Ok(None);
        };
        let (m, so_far, init) = meta_of(&ck.meta())?;
        if m.vocab != vocab {
            return Err(Error::config(
                "--resume: the checkpoint's vocabulary differs from this corpus's (another --data)",
            ));
        }
        if init != init_sha256 {
            return Err(Error::config(format!(
                "--resume: the checkpoint's run started from other weights (init_sha256 {init}, \
                 this run {init_sha256})"
            )));
        }
        if so_far.step > cfg.max_iters {
            return Err(Error::config(format!(
                "invalid value {} for --max-iters: the checkpoint is at step {}",
                cfg.max_iters, so_far.step
            )));
        }
        let mut known: Vec<String> = model.named_all().into_iter().map(|n| n.name).collect();
        ck.load_module(model)?;
        ck.load_optimizer(opt)?;
        known.extend(
            opt.state()
                .into_iter()
                .map(|(k, _)| format!("optimizer.{k}")),
        );
        ck.restore_global_rngs()?;
        known.extend(["rng.torch", "rng.python", "rng.numpy"].map(String::from));
        let extra: Vec<&str> = ck
            .names()
            .filter(|k| !known.iter().any(|n| n == k) && !k.starts_with("rng.registered."))
            .collect();
        if !extra.is_empty() {
            return Err(
                CheckpointError::Unexpected(extra.into_iter().map(String::from).collect()).into(),
            );
        }
        Ok(Some(so_far))
    }

    /// After step `so_far.step`: writes `ckpt-STEP.safetensors` when the step is a multiple of
    /// `--checkpoint-every`, then removes all but the newest `--keep`.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn after_step(
        &self,
        cfg: &GptConfig,
        model: &dyn Module,
        opt: &dyn Optimizer,
        vocab: &[char],
        init_sha256: &str,
        so_far: &SoFar,
    ) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        if self.every == 0 || !so_far.step.is_multiple_of(self.every) {
            return Ok(());
        }
        let mut ck = Checkpoint::new();
        ck.put_module(model);
        ck.put_optimizer(opt);
        ck.put_global_rngs();
        let evals: Vec<Value> = so_far
            .evals
            .iter()
            .map(|e| json!({"iter": e.iter, "train": e.train, "val": e.val}))
            .collect();
        ck.set_meta(&json!({
            "kind": "gpt",
            "config": identity(cfg),
            "step": so_far.step,
            "step_losses": so_far.step_losses,
            "lrs": so_far.lrs,
            "grad_norms": so_far.grad_norms,
            "evals": evals,
            "init_sha256": init_sha256,
            "vocab": vocab.iter().collect::<String>(),
            "deterministic": lockstep::are_deterministic_algorithms_enabled(),
            "threads": lockstep::get_num_threads(),
        }));
        ck.save(checkpoint_path(dir, so_far.step))?;
        if self.keep > 0 {
            for old in checkpoints_in(dir)?.into_iter().skip(self.keep) {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(())
    }
}

/// The checkpoint flags' own checks (no file touched).
///
/// # Errors
/// `--checkpoint-every` without `--checkpoint-dir`.
pub fn check(cfg: &GptConfig) -> Result<()> {
    if cfg.checkpoint_every > 0 && cfg.checkpoint_dir.is_none() {
        return Err(Error::config("--checkpoint-every needs --checkpoint-dir"));
    }
    Ok(())
}
