//! `lockstep generate`: text from a gpt checkpoint, batch-invariant.
//!
//! The model is the checkpoint's (`lockstep train --model gpt --checkpoint-dir …`), run in eval
//! mode (no dropout). Each step feeds the context — the last `block_size` tokens, cropped as
//! nanoGPT's `generate` does — and takes the last position's logits.
//!
//! **Batch invariance.** With `--batch B` the prompt is row 0 of B sequences; a row's
//! floating-point order depends on that row alone, never on B, the other rows or the cache:
//! the matrix products give a row the same bits for any number of rows (lockstep's blocked
//! GEMM in deterministic mode: each output is one multiply-add chain over K, tested for
//! M = 1..=250), LayerNorm, GELU and the additions work per row or per element, and attention
//! is [`Tensor::causal_attention`], which adds each query's scores, softmax and weighted values
//! over keys `0..=t` in one fixed order, for the full pass and for a cached step alike. So
//! `first_logits_sha256` and `sample_ids` are the same for every `--batch`, with `--kv-cache`
//! true or false, at any `--threads`.
//!
//! **Other rows' prompts.** Row r ≥ 1 starts from the validation text (the end
//! `val_fraction` of the checkpoint's corpus): the `L` tokens at offset
//! `(r − 1) · 997 mod (len(val) − L + 1)`, `L` the prompt's length, so no row is padded.
//!
//! **Sampling.** `--temperature 0` is greedy: the first index of the largest logit. Otherwise
//! logits / temperature (in f32), the `top_k` largest kept (`--top-k 0`: all), softmax, and
//! `torch.multinomial(probs, 1)` from the row's own generator: row 0's is
//! `torch.Generator().manual_seed(seed)`, row r's is seeded with
//! `np.random.SeedSequence([seed, r]).generate_state(1)[0]` — no row's draws depend on another.
//!
//! **Cache.** With `--kv-cache true` (the default) the prompt is run once and each new token
//! attends to the cached keys and values; once the context would pass `block_size`, positions
//! shift, so each further step recomputes the cropped window (as without the cache).

use crate::gpt::tokenize;
use crate::gpt_checkpoint;
use lockstep::checkpoint::{Checkpoint, CheckpointError};
use lockstep::nn::{Var, functional as F, no_grad};
use lockstep::rng::Generator;
use lockstep::rng::compat::numpy::SeedSequence;
use lockstep::{DType, Tensor};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

use lockstep::{Error, Result};

/// The offset stride of the other rows' prompts in the validation text (a prime).
pub const ROW_STRIDE: usize = 997;

/// `lockstep generate`'s flags.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateConfig {
    /// A gpt checkpoint (`ckpt-STEP.safetensors`).
    pub checkpoint: PathBuf,
    /// Row 0's prompt (at least one character of the vocabulary).
    pub prompt: String,
    /// Tokens to generate per row.
    pub tokens: usize,
    /// Seed of the rows' generators.
    pub seed: u64,
    /// Sampling temperature; 0: greedy (argmax).
    pub temperature: f64,
    /// Sample from the `top_k` largest logits (0: all).
    pub top_k: usize,
    /// Sequences generated together (row 0 is the prompt's).
    pub batch: usize,
    /// Attend to cached keys and values instead of recomputing the context.
    pub kv_cache: bool,
    /// Kernel threads (0: all cores).
    pub threads: usize,
    /// The corpus for the other rows' prompts (default: the checkpoint's `--data`).
    pub data: Option<PathBuf>,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        Self {
            checkpoint: PathBuf::new(),
            prompt: "\n".into(),
            tokens: 200,
            seed: 1337,
            temperature: 0.8,
            top_k: 20,
            batch: 1,
            kv_cache: true,
            threads: 0,
            data: None,
        }
    }
}

/// What a generation reports.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateReport {
    /// Row 0's generated ids (after the prompt).
    pub sample_ids: Vec<i64>,
    /// Row 0's generated text.
    pub sample: String,
    /// sha256 over row 0's logits at every step (f32 little-endian, step after step).
    pub first_logits_sha256: String,
    /// Where each row's prompt starts in the validation text (row 0: none).
    pub prompt_offsets: Vec<usize>,
    /// Seconds generating (after loading).
    pub seconds: f64,
    /// Tokens per second over all rows.
    pub tokens_per_s: f64,
}

/// Checks the flags that need no file.
///
/// # Errors
/// `--batch 0`, a negative or non-finite `--temperature`, an empty `--prompt`, sizes past
/// what could run.
pub fn check_config(cfg: &GenerateConfig) -> Result<()> {
    let bad = |flag: &str, v: String, want: &str| -> Error {
        Error::config(format!("invalid value {v} for --{flag}: {want}"))
    };
    if cfg.batch == 0 {
        return Err(bad("batch", "0".into(), "must be at least 1"));
    }
    if cfg.batch > 1 << 16 {
        return Err(bad("batch", cfg.batch.to_string(), "at most 65536"));
    }
    if cfg.tokens > 1 << 24 {
        return Err(bad("tokens", cfg.tokens.to_string(), "at most 16777216"));
    }
    if cfg.threads > 1024 {
        return Err(bad("threads", cfg.threads.to_string(), "at most 1024"));
    }
    if !(cfg.temperature.is_finite() && cfg.temperature >= 0.0) {
        return Err(bad(
            "temperature",
            cfg.temperature.to_string(),
            "must be finite and >= 0 (0: greedy)",
        ));
    }
    if cfg.prompt.is_empty() {
        return Err(bad(
            "prompt",
            "\"\"".into(),
            "must have at least one character",
        ));
    }
    Ok(())
}

/// One block's weights.
struct Block {
    ln_1: (Var, Option<Var>),
    c_attn: (Tensor, Option<Tensor>),
    c_proj: (Tensor, Option<Tensor>),
    ln_2: (Var, Option<Var>),
    c_fc: (Tensor, Option<Tensor>),
    mlp_proj: (Tensor, Option<Tensor>),
}

/// The checkpoint's model, for inference.
struct Model {
    wte: Tensor,
    wpe: Tensor,
    h: Vec<Block>,
    ln_f: (Var, Option<Var>),
    lm_head: Tensor,
    n_head: usize,
    n_embd: usize,
    block_size: usize,
}

fn count(cfg: &serde_json::Value, k: &str) -> Result<usize> {
    cfg[k]
        .as_u64()
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&v| v > 0 && v <= 1 << 16)
        .ok_or_else(|| {
            CheckpointError::invalid(
                "config",
                format!("bad {k} in its configuration: {}", cfg[k]),
            )
            .into()
        })
}

impl Model {
    fn load(ck: &Checkpoint, cfg: &serde_json::Value, vocab: usize) -> Result<Self> {
        let (n_layer, n_head, c, block_size) = (
            count(cfg, "n_layer")?,
            count(cfg, "n_head")?,
            count(cfg, "n_embd")?,
            count(cfg, "block_size")?,
        );
        if !c.is_multiple_of(n_head) {
            return Err(CheckpointError::invalid(
                "config",
                format!("n_embd {c} is not a multiple of n_head {n_head}"),
            )
            .into());
        }
        let bias = cfg["bias"]
            .as_bool()
            .ok_or_else(|| CheckpointError::Missing("bias flag".into()))?;
        let get = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let t = ck
                .tensor(name)
                .ok_or_else(|| CheckpointError::Missing(format!("tensor {name}")))?;
            if t.shape() != shape || t.dtype() != DType::F32 {
                return Err(CheckpointError::Tensor {
                    name: name.into(),
                    reason: format!("is {:?} {:?}, expected F32 {shape:?}", t.dtype(), t.shape()),
                }
                .into());
            }
            Ok(t.contiguous())
        };
        let opt = |name: String, shape: &[usize]| -> Result<Option<Tensor>> {
            bias.then(|| get(&name, shape)).transpose()
        };
        let lin = |p: &str, o: usize, i: usize| -> Result<(Tensor, Option<Tensor>)> {
            Ok((
                get(&format!("{p}.weight"), &[o, i])?,
                opt(format!("{p}.bias"), &[o])?,
            ))
        };
        let ln = |p: &str| -> Result<(Var, Option<Var>)> {
            Ok((
                Var::constant(get(&format!("{p}.weight"), &[c])?),
                opt(format!("{p}.bias"), &[c])?.map(Var::constant),
            ))
        };
        let mut h = Vec::with_capacity(n_layer);
        for i in 0..n_layer {
            let p = format!("transformer.h.{i}");
            h.push(Block {
                ln_1: ln(&format!("{p}.ln_1"))?,
                c_attn: lin(&format!("{p}.attn.c_attn"), 3 * c, c)?,
                c_proj: lin(&format!("{p}.attn.c_proj"), c, c)?,
                ln_2: ln(&format!("{p}.ln_2"))?,
                c_fc: lin(&format!("{p}.mlp.c_fc"), 4 * c, c)?,
                mlp_proj: lin(&format!("{p}.mlp.c_proj"), c, 4 * c)?,
            });
        }
        Ok(Self {
            wte: get("transformer.wte.weight", &[vocab, c])?,
            wpe: get("transformer.wpe.weight", &[block_size, c])?,
            h,
            ln_f: ln("transformer.ln_f")?,
            lm_head: get("lm_head.weight", &[vocab, c])?,
            n_head,
            n_embd: c,
            block_size,
        })
    }

    fn layer_norm(&self, x: &Tensor, (w, b): &(Var, Option<Var>)) -> Result<Tensor> {
        let y = F::layer_norm(
            &Var::constant(x.clone()),
            &[self.n_embd],
            Some(w),
            b.as_ref(),
            1e-5,
        )?;
        Ok(y.data())
    }

    /// The last position's logits `[B, V]` of `idx` (`[B, T]`) at positions
    /// `start..start + T`, appending the keys and values to `cache` (one `(K, V)` per layer,
    /// `[B, H, start, hd]` before; empty when `start` is 0).
    fn forward(
        &self,
        idx: &Tensor,
        start: usize,
        cache: &mut Vec<(Tensor, Tensor)>,
    ) -> Result<Tensor> {
        let (b, t) = (idx.shape()[0], idx.shape()[1]);
        let (c, nh) = (self.n_embd, self.n_head);
        let hd = c / nh;
        let pos = Tensor::arange(start as f64, (start + t) as f64, 1.0, DType::I64)?;
        let mut x = self.wte.embedding(idx)?.add(&self.wpe.embedding(&pos)?)?;
        let lin = |x: &Tensor, (w, bias): &(Tensor, Option<Tensor>)| x.linear(w, bias.as_ref());
        let heads = |z: Tensor| -> Result<Tensor> {
            Ok(
                z.reshape(&[b as isize, t as isize, nh as isize, hd as isize])?
                    .transpose(1, 2)?
                    .try_contiguous()?,
            )
        };
        let scale = 1.0 / (hd as f64).sqrt();
        for (l, blk) in self.h.iter().enumerate() {
            let qkv = lin(&self.layer_norm(&x, &blk.ln_1)?, &blk.c_attn)?;
            let q = heads(qkv.narrow(2, 0, c)?)?;
            let k = heads(qkv.narrow(2, c, c)?)?;
            let v = heads(qkv.narrow(2, 2 * c, c)?)?;
            let (k, v) = match cache.get(l) {
                Some((ck, cv)) if start > 0 => (
                    Tensor::cat(&[ck.clone(), k], 2)?,
                    Tensor::cat(&[cv.clone(), v], 2)?,
                ),
                _ => (k, v),
            };
            let y = q.causal_attention(&k, &v, start, scale)?;
            if l < cache.len() {
                cache[l] = (k, v);
            } else {
                cache.push((k, v));
            }
            let y = y
                .transpose(1, 2)?
                .try_contiguous()?
                .reshape(&[b as isize, t as isize, c as isize])?;
            x = x.add(&lin(&y, &blk.c_proj)?)?;
            let m = lin(
                &lin(&self.layer_norm(&x, &blk.ln_2)?, &blk.c_fc)?.gelu()?,
                &blk.mlp_proj,
            )?;
            x = x.add(&m)?;
        }
        let last = x.narrow(1, t - 1, 1)?.try_contiguous()?;
        Ok(self
            .layer_norm(&last, &self.ln_f)?
            .linear(&self.lm_head, None)?
            .reshape(&[b as isize, -1])?)
    }
}

/// The next token of one row from its logits.
fn next_token(logits: &[f32], cfg: &GenerateConfig, g: &mut Generator) -> Result<i64> {
    if cfg.temperature == 0.0 {
        let mut best = 0;
        for (i, &z) in logits.iter().enumerate() {
            if z > logits[best] || (logits[best].is_nan() && !z.is_nan()) {
                best = i;
            }
        }
        return Ok(best as i64);
    }
    let v = logits.len();
    let temp = cfg.temperature as f32;
    let l: Vec<f32> = logits.iter().map(|&z| z / temp).collect();
    let mut l = Tensor::from_vec(l, &[1, v])?;
    if cfg.top_k > 0 {
        // logits[logits < v[:, [-1]]] = -inf
        let k = cfg.top_k.min(v);
        let (top, _) = l.topk(k, -1, true, true)?;
        let kth = top.narrow(1, k - 1, 1)?;
        l = l.masked_fill(&l.lt(&kth)?, f64::NEG_INFINITY)?;
    }
    let probs = l.softmax(-1)?;
    Ok(Tensor::multinomial(&probs, 1, false, Some(g))?.to_vec::<i64>()?[0])
}

/// Row `r`'s generator (see the module documentation).
pub fn row_generator(seed: u64, row: usize) -> Result<Generator> {
    if row == 0 {
        return Ok(Generator::with_seed(seed));
    }
    let ss = SeedSequence::from_ints(&[seed as u128, row as u128])?;
    Ok(Generator::with_seed(ss.generate_state_u32(1)[0] as u64))
}

/// Generates as `cfg` says.
///
/// # Errors
/// A bad flag; a missing, corrupt or non-gpt checkpoint; prompt characters outside the
/// vocabulary; a validation text shorter than the prompt (with `--batch` > 1).
pub fn run(cfg: &GenerateConfig) -> Result<GenerateReport> {
    check_config(cfg)?;
    let (ck, meta) = gpt_checkpoint::load(&cfg.checkpoint)?;
    let vocab = &meta.vocab;
    let prompt: Vec<i64> = cfg
        .prompt
        .chars()
        .map(|ch| {
            vocab.binary_search(&ch).map(|i| i as i64).map_err(|_| {
                Error::config(format!(
                    "invalid value {:?} for --prompt: the character {ch:?} is not in the \
                     checkpoint's vocabulary",
                    cfg.prompt
                ))
            })
        })
        .collect::<Result<_>>()?;
    let model = Model::load(&ck, &meta.config, vocab.len())?;
    let l = prompt.len();
    let mut rows = vec![prompt];
    let mut prompt_offsets = vec![];
    if cfg.batch > 1 {
        let data = cfg
            .data
            .clone()
            .or_else(|| meta.config["data"].as_str().map(PathBuf::from));
        let text = lockstep::data::read_text(data.as_deref()).map_err(|e| {
            Error::config(format!(
                "the other rows' prompts come from the corpus (--data): {e}"
            ))
        })?;
        let (chars, ids) = tokenize(&text);
        if chars != *vocab {
            return Err(Error::config(
                "--data: the corpus's vocabulary differs from the checkpoint's",
            ));
        }
        let vf = meta.config["val_fraction"].as_f64().unwrap_or(0.1);
        let n_train = (ids.len() as f64 * (1.0 - vf)) as usize;
        let val = &ids[n_train.min(ids.len())..];
        if val.len() < l {
            return Err(Error::config(format!(
                "invalid value {} for --batch: the other rows' prompts are {l} tokens of the \
                 validation text, which has {}",
                cfg.batch,
                val.len()
            )));
        }
        for r in 1..cfg.batch {
            let o = (r - 1) * ROW_STRIDE % (val.len() - l + 1);
            prompt_offsets.push(o);
            rows.push(val[o..o + l].to_vec());
        }
    }
    if cfg.threads > 0 {
        lockstep::set_num_threads(cfg.threads);
    }
    // The blocked GEMM (deterministic mode, no autotuning) is what makes rows independent.
    lockstep::use_deterministic_algorithms(true);
    lockstep::tensor::autotune::set_benchmark(false);
    let mut gens = (0..cfg.batch)
        .map(|r| row_generator(cfg.seed, r))
        .collect::<Result<Vec<_>, _>>()?;
    let b = cfg.batch;
    let mut hash = Sha256::new();
    let started = std::time::Instant::now();
    let mut cache = Vec::new();
    // Tokens of every row in the cache (0: none).
    let mut cached = 0usize;
    for _ in 0..cfg.tokens {
        let len = rows[0].len();
        let ctx = len.min(model.block_size);
        let (from, start) = if cfg.kv_cache && cached > 0 && len <= model.block_size {
            (cached, cached)
        } else {
            (len - ctx, 0)
        };
        let mut flat = Vec::with_capacity(b * (len - from));
        for r in &rows {
            flat.extend_from_slice(&r[from..]);
        }
        let idx = Tensor::from_vec(flat, &[b, len - from])?;
        if start == 0 {
            cache.clear();
        }
        let logits = no_grad(|| model.forward(&idx, start, &mut cache))?;
        cached = if cfg.kv_cache && len <= model.block_size {
            len
        } else {
            0
        };
        let logits = logits.to_vec::<f32>()?;
        let v = vocab.len();
        for z in &logits[..v] {
            hash.update(z.to_le_bytes());
        }
        for (r, row) in rows.iter_mut().enumerate() {
            row.push(next_token(&logits[r * v..(r + 1) * v], cfg, &mut gens[r])?);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let sample_ids = rows.swap_remove(0).split_off(l);
    Ok(GenerateReport {
        sample: sample_ids.iter().map(|&i| vocab[i as usize]).collect(),
        sample_ids,
        first_logits_sha256: hash.finalize().iter().map(|x| format!("{x:02x}")).collect(),
        prompt_offsets,
        seconds,
        tokens_per_s: (b * cfg.tokens) as f64 / seconds.max(1e-9),
    })
}

/// `lockstep generate`: prints the JSON report (with `json`, only it; else the text first, on
/// stderr); exit 2 with the error otherwise.
pub fn main(cfg: &GenerateConfig, json: bool) -> std::process::ExitCode {
    match run(cfg) {
        Ok(r) => {
            if !json {
                eprintln!("{}{}", cfg.prompt, r.sample);
                eprintln!("{:.1} tokens/s ({} rows)", r.tokens_per_s, cfg.batch);
            }
            println!(
                "{}",
                json!({
                    "sample_ids": r.sample_ids,
                    "sample": r.sample,
                    "first_logits_sha256": r.first_logits_sha256,
                    "tokens": cfg.tokens,
                    "batch": cfg.batch,
                    "kv_cache": cfg.kv_cache,
                    "seed": cfg.seed,
                    "temperature": cfg.temperature,
                    "top_k": cfg.top_k,
                    "prompt_offsets": r.prompt_offsets,
                    "seconds": r.seconds,
                    "tokens_per_s": r.tokens_per_s,
                })
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: lockstep generate: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
