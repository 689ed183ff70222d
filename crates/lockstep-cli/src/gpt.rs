//! `lockstep train --model gpt`: the port of `spec/train/torch_gpt.py` (a character-level
//! nanoGPT), step for step, in torch-compatible seeding.
//!
//! Same flags, same defaults, same JSON report. For the same seed it builds the same
//! vocabulary and split, the same initial parameters bit for bit (the modules' default
//! initialisation, then nanoGPT's re-initialisation in `apply` order, the tied matrix drawn
//! twice, then the scaled `c_proj` draws), the same names, the same training and evaluation
//! windows (`torch.randint` on the default generator, interleaved with the dropout masks in
//! program order), the same learning rates (Python's float arithmetic and `math.cos`, which is
//! the C library's `cos`, as Rust's `f64::cos`), the same AdamW arithmetic over the two weight
//! decay groups and the same `clip_grad_norm_`. Matrix products, softmax, LayerNorm and
//! cross-entropy are lockstep's deterministic kernels, so losses equal PyTorch's to rounding
//! and the run's bits are the same at any thread count.

use crate::gpt_config::decay_iters;
pub use crate::gpt_config::{Eval, GptConfig, Seeding};
use crate::shards::{Local, Shards};
use crate::train::sha256_of;
use lockstep::nn::layers::{Dropout, Embedding, GELU, LayerNorm, Linear};
use lockstep::nn::module::ModuleList;
use lockstep::nn::optim::{self, Optimizer};
use lockstep::nn::{Forward, Module, Training, Var, Visitor, functional as F, no_grad};
use lockstep::{DType, Tensor};
use serde_json::json;

use lockstep::{Error, Result};

/// What one run reports (the keys of `torch_gpt.py`'s JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct GptReport {
    /// The seed.
    pub seed: u64,
    /// Distinct characters of the corpus.
    pub vocab_size: usize,
    /// Parameters (the tied matrix once).
    pub n_params: usize,
    /// sha256 over the initial `parameters()`.
    pub init_sha256: String,
    /// `named_parameters()` names.
    pub parameter_names: Vec<String>,
    /// `state_dict()` names (the tied `lm_head.weight` included).
    pub state_dict_names: Vec<String>,
    /// Each step's loss (the sum of its micro-batches' `loss / grad_accum`).
    pub step_losses: Vec<f64>,
    /// Each step's learning rate.
    pub lrs: Vec<f64>,
    /// Each step's total gradient norm before clipping (empty without clipping).
    pub grad_norms: Vec<f64>,
    /// The evaluations.
    pub evals: Vec<Eval>,
    /// The sampled token ids (after the prompt).
    pub sample_ids: Vec<i64>,
    /// The sampled text.
    pub sample: String,
    /// sha256 over the final `parameters()`.
    pub final_sha256: String,
}

impl GptReport {
    /// The JSON object `torch_gpt.py` prints.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "model": "gpt",
            "seed": self.seed,
            "vocab_size": self.vocab_size,
            "n_params": self.n_params,
            "init_sha256": self.init_sha256,
            "parameter_names": self.parameter_names,
            "state_dict_names": self.state_dict_names,
            "steps": self.step_losses.len(),
            "step_losses": self.step_losses,
            "lrs": self.lrs,
            "grad_norms": self.grad_norms,
            "evals": self.evals.iter().map(|e| json!({"iter": e.iter, "train": e.train, "val": e.val})).collect::<Vec<_>>(),
            "sample_ids": self.sample_ids,
            "sample": self.sample,
            "final_sha256": self.final_sha256,
        })
    }
}

/// nanoGPT's `CausalSelfAttention` (the explicit path): `c_attn` makes q, k, v; a causal mask
/// before the softmax; dropout on the attention weights and on the projected output.
struct CausalSelfAttention {
    c_attn: Linear,
    c_proj: Linear,
    attn_dropout: Dropout,
    resid_dropout: Dropout,
    n_head: usize,
    training: Training,
}

impl Module for CausalSelfAttention {
    fn visit(&self, v: &mut dyn Visitor) {
        // The `causal` buffer is not persistent: not in the state_dict.
        v.child("c_attn", &self.c_attn);
        v.child("c_proj", &self.c_proj);
        v.child("attn_dropout", &self.attn_dropout);
        v.child("resid_dropout", &self.resid_dropout);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

impl Forward for CausalSelfAttention {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let hd = x.shape()[2] / self.n_head;
        // `q, k, v = c_attn(x).split(C, 2)`, the heads, `(q·kᵀ · scale).masked_fill(causal ==
        // 0, −∞).softmax(−1)`, `attn_dropout`, `· v` and the heads merged, in one op (the same
        // bits as those ops chained, without the copies of the pieces and their gradients).
        let y = F::causal_self_attention(
            &self.c_attn.forward(x)?,
            self.n_head,
            1.0 / (hd as f64).sqrt(),
            self.attn_dropout.p,
            self.attn_dropout.training().get(),
        )?;
        self.resid_dropout.forward(&self.c_proj.forward(&y)?)
    }
}

/// nanoGPT's `MLP`: `c_fc` to 4·C, exact GELU, `c_proj` back, dropout.
struct Mlp {
    c_fc: Linear,
    gelu: GELU,
    c_proj: Linear,
    dropout: Dropout,
    training: Training,
}

impl Module for Mlp {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("c_fc", &self.c_fc);
        v.child("gelu", &self.gelu);
        v.child("c_proj", &self.c_proj);
        v.child("dropout", &self.dropout);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

impl Forward for Mlp {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let h = self.gelu.forward(&self.c_fc.forward(x)?)?;
        self.dropout.forward(&self.c_proj.forward(&h)?)
    }
}

/// A pre-LayerNorm block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`.
struct Block {
    ln_1: LayerNorm,
    attn: CausalSelfAttention,
    ln_2: LayerNorm,
    mlp: Mlp,
    training: Training,
}

impl Module for Block {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("ln_1", &self.ln_1);
        v.child("attn", &self.attn);
        v.child("ln_2", &self.ln_2);
        v.child("mlp", &self.mlp);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

impl Forward for Block {
    fn forward(&self, x: &Var) -> lockstep::nn::Result<Var> {
        let x = x.add(&self.attn.forward(&self.ln_1.forward(x)?)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

/// `nn.ModuleDict(wte, wpe, drop, h, ln_f)`: the members in their registration order.
struct Transformer {
    wte: Embedding,
    wpe: Embedding,
    drop: Dropout,
    h: ModuleList<Block>,
    ln_f: LayerNorm,
    training: Training,
}

impl Module for Transformer {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("wte", &self.wte);
        v.child("wpe", &self.wpe);
        v.child("drop", &self.drop);
        v.child("h", &self.h);
        v.child("ln_f", &self.ln_f);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `torch_gpt.py`'s optimizer: AdamW over two parameter groups, as
/// `torch.optim.AdamW([{decay}, {no_decay}])` — matrices and embeddings (`ndim ≥ 2`) decay
/// with `--weight-decay`, biases and LayerNorm weights not — with the learning rate and betas
/// of `cfg`.
///
/// # Errors
/// Options AdamW refuses (a negative learning rate, betas outside `[0, 1)`).
pub fn adamw(cfg: &GptConfig, params: &[Var]) -> Result<optim::AdamW> {
    let (decay, no_decay): (Vec<Var>, Vec<Var>) =
        params.iter().cloned().partition(|p| p.ndim() >= 2);
    let group = |ps: Vec<Var>, wd: f64| {
        optim::Group::new(
            ps,
            optim::AdamWOptions {
                lr: cfg.lr,
                betas: (cfg.beta1, cfg.beta2),
                weight_decay: wd,
                ..optim::AdamWOptions::default()
            },
        )
    };
    Ok(optim::AdamW::with_groups(vec![
        group(decay, cfg.weight_decay),
        group(no_decay, 0.0),
    ])?)
}

/// `torch_gpt.py`'s `Gpt`: the output head's weight is the token embedding's (one [`Var`]
/// under two names, as PyTorch's tying).
pub struct Gpt {
    transformer: Transformer,
    lm_head: Linear,
    block_size: usize,
    training: Training,
}

impl Module for Gpt {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("transformer", &self.transformer);
        v.child("lm_head", &self.lm_head);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.LayerNorm(n, bias=bias)`: without a bias, the weight only.
fn layer_norm(n: usize, bias: bool) -> lockstep::nn::Result<LayerNorm> {
    LayerNorm::with_options(&[n], true, bias)
}

impl Gpt {
    /// `Gpt(a, vocab_size)` after `torch.manual_seed`: the modules' default initialisation
    /// from the default generator in `__init__` order, the tie, nanoGPT's re-initialisation in
    /// `apply` order (children before parents; the tied matrix as the Embedding, then as the
    /// Linear), then `N(0, 0.02/√(2·n_layer))` on every `c_proj.weight` in parameter order.
    ///
    /// # Errors
    /// Sizes the layers refuse (`n_embd` not a multiple of `n_head` is checked by the caller).
    pub fn new(cfg: &GptConfig, vocab_size: usize) -> Result<Self> {
        let c = cfg.n_embd;
        let wte = Embedding::new(vocab_size, c, None)?;
        let wpe = Embedding::new(cfg.block_size, c, None)?;
        let drop = Dropout::new(cfg.dropout)?;
        let mut h = ModuleList::new();
        for _ in 0..cfg.n_layer {
            let ln_1 = layer_norm(c, cfg.bias)?;
            let attn = CausalSelfAttention {
                c_attn: Linear::new(c, 3 * c, cfg.bias)?,
                c_proj: Linear::new(c, c, cfg.bias)?,
                attn_dropout: Dropout::new(cfg.dropout)?,
                resid_dropout: Dropout::new(cfg.dropout)?,
                n_head: cfg.n_head,
                training: Training::default(),
            };
            let ln_2 = layer_norm(c, cfg.bias)?;
            let mlp = Mlp {
                c_fc: Linear::new(c, 4 * c, cfg.bias)?,
                gelu: GELU::new("none")?,
                c_proj: Linear::new(4 * c, c, cfg.bias)?,
                dropout: Dropout::new(cfg.dropout)?,
                training: Training::default(),
            };
            h.push(Block {
                ln_1,
                attn,
                ln_2,
                mlp,
                training: Training::default(),
            });
        }
        let ln_f = layer_norm(c, cfg.bias)?;
        let lm_head = Linear::new(c, vocab_size, false)?;
        let mut transformer = Transformer {
            wte,
            wpe,
            drop,
            h,
            ln_f,
            training: Training::default(),
        };
        transformer.wte.weight = lm_head.weight.clone();
        let gpt = Self {
            transformer,
            lm_head,
            block_size: cfg.block_size,
            training: Training::default(),
        };
        // `self.apply(_init_weights)`: children before parents, in registration order.
        let normal = |w: &Var, std: f64| lockstep::nn::init::normal_(w, 0.0, std, None);
        let linear = |l: &Linear| -> lockstep::nn::Result<()> {
            normal(&l.weight, 0.02)?;
            if let Some(b) = &l.bias {
                lockstep::nn::init::zeros_(b)?;
            }
            Ok(())
        };
        let t = &gpt.transformer;
        normal(&t.wte.weight, 0.02)?;
        normal(&t.wpe.weight, 0.02)?;
        for i in 0..t.h.len() {
            let b = t.h.get(i).expect("in range");
            linear(&b.attn.c_attn)?;
            linear(&b.attn.c_proj)?;
            linear(&b.mlp.c_fc)?;
            linear(&b.mlp.c_proj)?;
        }
        linear(&gpt.lm_head)?;
        let std = 0.02 / ((2 * cfg.n_layer) as f64).sqrt();
        for (name, p) in gpt.named_parameters() {
            if name.ends_with("c_proj.weight") {
                normal(&p, std)?;
            }
        }
        Ok(gpt)
    }

    /// Logits `[B, T, vocab]` for token ids `idx` (`[B, T]`, `i64`, `T ≤ block_size`).
    ///
    /// # Errors
    /// A sequence longer than `block_size`; ids outside the vocabulary.
    pub fn forward(&self, idx: &Tensor) -> Result<Var> {
        let t = idx.shape()[1];
        if t > self.block_size {
            return Err(lockstep::tensor::Error::InvalidArgument {
                op: "gpt.forward",
                arg: "idx",
                reason: format!(
                    "sequence of {t} tokens is longer than block_size {}",
                    self.block_size
                ),
            }
            .into());
        }
        let tr = &self.transformer;
        let pos = Tensor::arange(0.0, t as f64, 1.0, DType::I64)?;
        let x = tr.wte.lookup(idx)?.add(&tr.wpe.lookup(&pos)?)?;
        let mut x = tr.drop.forward(&x)?;
        for i in 0..tr.h.len() {
            x = tr.h.get(i).expect("in range").forward(&x)?;
        }
        Ok(self.lm_head.forward(&tr.ln_f.forward(&x)?)?)
    }

    /// `F.cross_entropy(logits.view(-1, V), targets.view(-1))` for token ids `x` and targets
    /// `y` (`[B, T]`, i64).
    ///
    /// # Errors
    /// As [`forward`](Self::forward); targets whose shape or values do not fit the logits.
    pub fn loss(&self, x: &Tensor, y: &Tensor) -> Result<Var> {
        let logits = self.forward(x)?;
        let v = logits.shape()[2] as isize;
        Ok(F::cross_entropy(
            &logits.reshape(&[-1, v])?,
            &y.reshape(&[-1])?,
        )?)
    }
}

/// The corpus as token ids: the vocabulary (distinct characters in code-point order) and each
/// character's id.
pub fn tokenize(text: &str) -> (Vec<char>, Vec<i64>) {
    let mut chars: Vec<char> = text.chars().collect();
    let ids_of = chars.clone();
    chars.sort_unstable();
    chars.dedup();
    let ids = ids_of
        .iter()
        .map(|c| chars.binary_search(c).expect("from the text") as i64)
        .collect();
    (chars, ids)
}

/// `get_lr(it)`: linear warmup, then cosine down to `min_lr`, in Python's float arithmetic.
pub fn get_lr(cfg: &GptConfig, it: usize) -> f64 {
    if !cfg.decay_lr {
        return cfg.lr;
    }
    let decay_iters = decay_iters(cfg);
    if it < cfg.warmup_iters {
        return cfg.lr * (it + 1) as f64 / (cfg.warmup_iters + 1) as f64;
    }
    if it > decay_iters {
        return cfg.min_lr;
    }
    let ratio = (it - cfg.warmup_iters) as f64 / (decay_iters - cfg.warmup_iters) as f64;
    let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
    cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)
}

/// Checks the flags as `torch_gpt.py` would fail on them, plus the values it would accept but
/// cannot run (each error names its flag). Reads no file and changes no global state.
///
/// # Errors
/// The first bad value.
pub fn check_config(cfg: &GptConfig) -> Result<()> {
    let bad = |flag: &str, v: String, want: &str| -> Error {
        Error::config(format!("invalid value {v} for --{flag}: {want}"))
    };
    let pos = |flag: &str, v: usize| -> Result<()> {
        if v == 0 {
            return Err(bad(flag, "0".into(), "must be at least 1"));
        }
        Ok(())
    };
    pos("n-head", cfg.n_head)?;
    pos("n-embd", cfg.n_embd)?;
    pos("block-size", cfg.block_size)?;
    pos("batch-size", cfg.batch_size)?;
    pos("grad-accum", cfg.grad_accum)?;
    if !cfg.n_embd.is_multiple_of(cfg.n_head) {
        return Err(bad(
            "n-embd",
            cfg.n_embd.to_string(),
            &format!("must be a multiple of --n-head ({})", cfg.n_head),
        ));
    }
    // Sizes a run could never allocate are refused here rather than failing mid-way.
    let limits = [
        ("n-layer", cfg.n_layer, 1 << 12),
        ("n-embd", cfg.n_embd, 1 << 16),
        ("block-size", cfg.block_size, 1 << 16),
        ("batch-size", cfg.batch_size, 1 << 20),
        ("grad-accum", cfg.grad_accum, 1 << 20),
        ("threads", cfg.threads, 1024),
    ];
    for (flag, v, max) in limits {
        if v > max {
            return Err(bad(flag, v.to_string(), &format!("at most {max}")));
        }
    }
    for (flag, v) in [
        ("lr", cfg.lr),
        ("min-lr", cfg.min_lr),
        ("weight-decay", cfg.weight_decay),
        ("grad-clip", cfg.grad_clip),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(flag, v.to_string(), "must be finite and >= 0"));
        }
    }
    for (flag, v) in [("beta1", cfg.beta1), ("beta2", cfg.beta2)] {
        if !(0.0..1.0).contains(&v) {
            return Err(bad(flag, v.to_string(), "must be in [0, 1)"));
        }
    }
    if !(0.0..=1.0).contains(&cfg.dropout) {
        return Err(bad("dropout", cfg.dropout.to_string(), "must be in [0, 1]"));
    }
    if !(cfg.temperature.is_finite() && cfg.temperature > 0.0) {
        return Err(bad(
            "temperature",
            cfg.temperature.to_string(),
            "must be finite and > 0",
        ));
    }
    if !(0.0..1.0).contains(&cfg.val_fraction) {
        return Err(bad(
            "val-fraction",
            cfg.val_fraction.to_string(),
            "must be in [0, 1)",
        ));
    }
    if cfg.sample_tokens > 0 && cfg.prompt.is_empty() {
        return Err(bad(
            "prompt",
            "\"\"".into(),
            "must have at least one character when --sample-tokens > 0",
        ));
    }
    if cfg.seeding == Seeding::Torch && cfg.micro_batch > 0 {
        return Err(Error::config(format!(
            "--micro-batch {} needs --seeding invariant (the micro-shard sum is its \
             definition of a step's gradient); got --seeding torch",
            cfg.micro_batch
        )));
    }
    if cfg.micro_batch > 1 << 20 {
        return Err(bad(
            "micro-batch",
            cfg.micro_batch.to_string(),
            &format!("at most {}", 1 << 20),
        ));
    }
    // torch_gpt.py divides by zero here (the cosine's ratio 0/0 at step warmup_iters).
    if cfg.decay_lr && decay_iters(cfg) == cfg.warmup_iters && cfg.max_iters > cfg.warmup_iters {
        return Err(bad(
            "lr-decay-iters",
            decay_iters(cfg).to_string(),
            "must differ from --warmup-iters (the cosine would divide by zero)",
        ));
    }
    crate::gpt_checkpoint::check(cfg)
}

/// The corpus split, the vocabulary and what the flags need of them.
struct Corpus {
    chars: Vec<char>,
    train: Vec<i64>,
    val: Vec<i64>,
}

fn corpus(cfg: &GptConfig) -> Result<Corpus> {
    let text = lockstep::data::read_text(cfg.data.as_deref())?;
    let (chars, ids) = tokenize(&text);
    let n_train = (ids.len() as f64 * (1.0 - cfg.val_fraction)) as usize;
    let (train, val) = ids.split_at(n_train.min(ids.len()));
    let c = Corpus {
        chars,
        train: train.to_vec(),
        val: val.to_vec(),
    };
    let need_val = cfg.eval_interval > 0 && cfg.eval_iters > 0;
    for (name, d, used) in [
        ("training", &c.train, cfg.max_iters > 0 || need_val),
        ("validation", &c.val, need_val),
    ] {
        if used && d.len() <= cfg.block_size {
            return Err(Error::config(format!(
                "invalid value {} for --block-size: the {name} split has {} tokens; it needs more \
                 than block-size (check --block-size, --val-fraction, --data)",
                cfg.block_size,
                d.len()
            )));
        }
    }
    if let Some(bad) = cfg
        .prompt
        .chars()
        .find(|ch| c.chars.binary_search(ch).is_err())
    {
        return Err(Error::config(format!(
            "invalid value {:?} for --prompt: the character {bad:?} is not in the corpus's \
             vocabulary",
            cfg.prompt
        )));
    }
    Ok(c)
}

/// `get_batch(split)`: `torch.randint(len(d) - block_size, (batch_size,))` from the default
/// generator, then the windows and their next-token targets.
fn get_batch(d: &[i64], cfg: &GptConfig) -> Result<(Tensor, Tensor)> {
    let (b, t) = (cfg.batch_size, cfg.block_size);
    let ix = Tensor::randint(0, (d.len() - t) as i64, &[b], DType::I64, None)?.to_vec::<i64>()?;
    let mut x = Vec::with_capacity(b * t);
    let mut y = Vec::with_capacity(b * t);
    for &i in &ix {
        let i = i as usize;
        x.extend_from_slice(&d[i..i + t]);
        y.extend_from_slice(&d[i + 1..i + 1 + t]);
    }
    Ok((Tensor::from_vec(x, &[b, t])?, Tensor::from_vec(y, &[b, t])?))
}

/// `estimate_loss()`: the model in eval mode, `eval_iters` windows per split without
/// gradients, each mean as `torch.zeros(k)` filled with the losses and `.mean()` (f32).
fn estimate_loss(model: &mut Gpt, c: &Corpus, cfg: &GptConfig, iter: usize) -> Result<Eval> {
    model.eval();
    let mut out = [0f64; 2];
    for (o, d) in out.iter_mut().zip([&c.train, &c.val]) {
        let mut losses = Vec::with_capacity(cfg.eval_iters);
        for _ in 0..cfg.eval_iters {
            let (x, y) = get_batch(d, cfg)?;
            let l = no_grad(|| model.loss(&x, &y))?;
            losses.push(l.data().item::<f32>()?);
        }
        // A few f32 values: PyTorch's sum adds them in order, then divides.
        *o = (losses.iter().fold(0f32, |a, &l| a + l) / cfg.eval_iters as f32) as f64;
    }
    model.train(true);
    Ok(Eval {
        iter,
        train: out[0],
        val: out[1],
    })
}

/// Sampling: the last `block_size` tokens as context, logits / temperature, top-k, softmax,
/// `torch.multinomial(probs, 1)` from the default generator.
fn sample(model: &mut Gpt, c: &Corpus, cfg: &GptConfig) -> Result<Vec<i64>> {
    model.eval();
    let mut idx: Vec<i64> = cfg
        .prompt
        .chars()
        .map(|ch| c.chars.binary_search(&ch).expect("checked") as i64)
        .collect();
    let v = c.chars.len();
    let temp = cfg.temperature as f32;
    for _ in 0..cfg.sample_tokens {
        let ctx = &idx[idx.len().saturating_sub(cfg.block_size)..];
        let x = Tensor::from_vec(ctx.to_vec(), &[1, ctx.len()])?;
        let logits = no_grad(|| model.forward(&x))?.data();
        let last = logits.narrow(1, ctx.len() - 1, 1)?.to_vec::<f32>()?;
        let l: Vec<f32> = last.iter().map(|&z| z / temp).collect();
        let mut l = Tensor::from_vec(l, &[1, v])?;
        if cfg.top_k > 0 {
            // logits[logits < v[:, [-1]]] = -inf
            let k = cfg.top_k.min(v);
            let (top, _) = l.topk(k, -1, true, true)?;
            let kth = top.narrow(1, k - 1, 1)?;
            l = l.masked_fill(&l.lt(&kth)?, f64::NEG_INFINITY)?;
        }
        let probs = l.softmax(-1)?;
        let next = Tensor::multinomial(&probs, 1, false, None)?.to_vec::<i64>()?;
        idx.push(next[0]);
    }
    Ok(idx.split_off(cfg.prompt.chars().count()))
}

/// Runs `torch_gpt.py`'s program.
///
/// # Errors
/// A bad flag (see [`check_config`]), an unreadable corpus, a prompt outside its vocabulary,
/// a split too short for the block size.
pub fn run(cfg: &GptConfig) -> Result<GptReport> {
    run_distributed(cfg, &mut Local)
}

/// [`run`] as one of the processes of `shards` (`--seeding invariant` when there are
/// several): each computes the micro-shards it owns, all apply the same update.
///
/// # Errors
/// As [`run`]; torch seeding on several processes; a failed exchange.
pub fn run_distributed(cfg: &GptConfig, shards: &mut dyn Shards) -> Result<GptReport> {
    check_config(cfg)?;
    let invariant = cfg.seeding == Seeding::Invariant;
    if shards.size() > 1 && !invariant {
        return Err(Error::config(format!(
            "--distributed needs --seeding invariant (each window and dropout mask from its \
             own stream); got --seeding {}",
            cfg.seeding
        )));
    }
    if shards.size() > 1 && (cfg.checkpoint_dir.is_some() || cfg.resume.is_some()) {
        return Err(Error::config(
            "--checkpoint-dir and --resume are not yet supported for gpt under --distributed on \
             several processes",
        ));
    }
    let c = corpus(cfg)?;
    // Checkpoint hooks (gpt_checkpoint.rs): the directory's lock and the `--resume` file.
    let mut hooks = crate::gpt_checkpoint::Hooks::start(cfg)?;
    if cfg.threads > 0 {
        lockstep::set_num_threads(cfg.threads);
    }
    lockstep::use_deterministic_algorithms(!cfg.nondeterministic);
    lockstep::manual_seed(cfg.seed);
    let mut model = Gpt::new(cfg, c.chars.len())?;
    let named = model.named_parameters();
    let params: Vec<Var> = named.iter().map(|(_, p)| p.clone()).collect();
    let init_sha256 = sha256_of(params.iter().map(|p| p.data()).collect::<Vec<_>>().iter());

    let mut opt = adamw(cfg, &params)?;

    let mut step_losses = Vec::with_capacity(cfg.max_iters);
    let mut lrs = Vec::with_capacity(cfg.max_iters);
    let mut grad_norms = Vec::new();
    let mut evals = Vec::new();
    let evaluating = cfg.eval_interval > 0 && cfg.eval_iters > 0;
    let mut start = 0;
    if let Some(r) = hooks.resume(cfg, &model, &mut opt, &c.chars, &init_sha256)? {
        start = r.step;
        (step_losses, lrs, grad_norms, evals) = (r.step_losses, r.lrs, r.grad_norms, r.evals);
    }
    model.train(true);
    for it in start..cfg.max_iters {
        lockstep::tensor::trace::set_step(it);
        let lr = get_lr(cfg, it);
        opt.set_lr(lr);
        lrs.push(lr);
        if evaluating && it.is_multiple_of(cfg.eval_interval) {
            evals.push(if invariant {
                invariant::estimate_loss(&mut model, &c, cfg, it)?
            } else {
                estimate_loss(&mut model, &c, cfg, it)?
            });
        }
        let total = if invariant {
            invariant::step_grads(&model, &params, &c.train, cfg, it, shards)?
        } else {
            let mut total = 0.0f64;
            for _ in 0..cfg.grad_accum {
                let (x, y) = get_batch(&c.train, cfg)?;
                let loss = model.loss(&x, &y)?.div_scalar(cfg.grad_accum as f64)?;
                total += loss.data().item::<f32>()? as f64;
                loss.backward()?;
            }
            total
        };
        if cfg.grad_clip > 0.0 {
            let n = optim::clip_grad_norm_(&params, cfg.grad_clip, 2.0)?;
            grad_norms.push(n.item::<f32>()? as f64);
        }
        opt.step()?;
        opt.zero_grad();
        step_losses.push(total);
        if cfg.checkpoint_every > 0 && (it + 1).is_multiple_of(cfg.checkpoint_every) {
            let so_far = crate::gpt_checkpoint::SoFar {
                step: it + 1,
                step_losses: step_losses.clone(),
                lrs: lrs.clone(),
                grad_norms: grad_norms.clone(),
                evals: evals.clone(),
            };
            hooks.after_step(cfg, &model, &opt, &c.chars, &init_sha256, &so_far)?;
        }
    }
    if evaluating {
        evals.push(if invariant {
            invariant::estimate_loss(&mut model, &c, cfg, cfg.max_iters)?
        } else {
            estimate_loss(&mut model, &c, cfg, cfg.max_iters)?
        });
    }
    let sample_ids = sample(&mut model, &c, cfg)?;
    let state = model.state_dict();
    Ok(GptReport {
        seed: cfg.seed,
        vocab_size: c.chars.len(),
        n_params: params.iter().map(|p| p.numel()).sum(),
        init_sha256,
        parameter_names: named.into_iter().map(|(n, _)| n).collect(),
        state_dict_names: state.into_iter().map(|(n, _)| n).collect(),
        step_losses,
        lrs,
        grad_norms,
        evals,
        sample: sample_ids.iter().map(|&i| c.chars[i as usize]).collect(),
        sample_ids,
        final_sha256: sha256_of(params.iter().map(|p| p.data()).collect::<Vec<_>>().iter()),
    })
}

/// What `lockstep train --model gpt` prints at the end: the JSON report on stdout (without
/// `json`, also the losses, evaluations and sample on stderr).
pub fn print_report(r: &GptReport, json: bool) {
    if !json {
        for (i, l) in r.step_losses.iter().enumerate() {
            if i % 10 == 0 || i + 1 == r.step_losses.len() {
                eprintln!("step {i:5}  loss {l:.4}  lr {:.3e}", r.lrs[i]);
            }
        }
        for e in &r.evals {
            eprintln!(
                "eval at {:5}: train {:.4}, val {:.4}",
                e.iter, e.train, e.val
            );
        }
        eprintln!("sample: {:?}", r.sample);
    }
    println!("{}", r.to_json());
}

/// `lockstep train --model gpt`: runs and prints the JSON report (with `json`, only it);
/// exit 2 with the error otherwise.
pub fn main(cfg: &GptConfig, json: bool) -> std::process::ExitCode {
    match run(cfg) {
        Ok(r) => {
            print_report(&r, json);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: lockstep train --model gpt: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `--seeding invariant`: what makes a run's bits independent of how the global batch is cut
/// (`--batch-size` × `--grad-accum`), of the thread count, the instruction set and the number
/// of processes.
///
/// * The global batch of step `s` is `B = batch_size · grad_accum` windows; window `j` starts
///   at `integers(0, len(train) − block_size)` drawn from
///   `numpy.random.default_rng(SeedSequence(seed, spawn_key=(s, j)))`.
/// * Its dropout masks come from `SeedSequence(seed, spawn_key=(s, j, 1 + site))`
///   ([`lockstep::nn::rng::SampleKeys`]), where `site` numbers the dropouts in forward order:
///   0 the embedding's, then for block `l` `1 + 3l` the attention weights', `2 + 3l` the
///   residual after attention, `3 + 3l` the MLP's.
/// * The windows are cut by position into micro-shards of `m` (`--micro-batch`, default
///   [`crate::shards::DEFAULT_MICRO_BATCH`]); each micro-shard's loss is its tokens' summed cross entropy
///   times `1 / (B · block_size)`, its gradient computed on its own, and the step's gradient
///   and loss are the [`crate::shards::tree_sum`] of the micro-shards' (a tree fixed by
///   `ceil(B / m)` alone).
/// * Evaluation at step `s`: iteration `k` of split `p` (0 train, 1 validation) reads `B`
///   windows, window `i` from `SeedSequence(seed, spawn_key=(EVAL_KEY, s, p, k·B + i))`; its
///   loss is the same micro-shard sum (without dropout), and the estimate is the mean of the
///   `eval_iters` losses as in torch seeding.
mod invariant {
    use super::{Corpus, Eval, Gpt, GptConfig};
    use crate::shards::{Shards, micro_batch_size, tree_sum};
    use lockstep::Result;
    use lockstep::Tensor;
    use lockstep::nn::rng::{SampleKeys, with_sample_keys};
    use lockstep::nn::{Module, Var, functional as F, no_grad};
    use lockstep::rng::StreamKey;

    /// The first word of evaluation windows' spawn keys ("eval"), which training keys (two
    /// words) and dropout keys (three) never have in a key of four words.
    pub const EVAL_KEY: u128 = 0x6576_616c;

    fn micro_batch(cfg: &GptConfig) -> usize {
        micro_batch_size(cfg.micro_batch)
    }

    /// `integers(0, high)` from `default_rng(SeedSequence(seed, spawn_key=key))`: the stream
    /// of [`StreamKey::with_path`], the one key type of invariant seeding.
    fn draw(seed: u64, key: Vec<u128>, high: usize) -> Result<usize> {
        let mut g = StreamKey::with_path(seed, key).generator();
        let mut x = [0i64];
        g.integers_i64(0, high as i64, false, &mut x)?;
        Ok(x[0] as usize)
    }

    /// The windows at `starts` and their next-token targets, `[n, block_size]` each.
    fn windows(d: &[i64], starts: &[usize], t: usize) -> Result<(Tensor, Tensor)> {
        let mut x = Vec::with_capacity(starts.len() * t);
        let mut y = Vec::with_capacity(starts.len() * t);
        for &i in starts {
            x.extend_from_slice(&d[i..i + t]);
            y.extend_from_slice(&d[i + 1..i + 1 + t]);
        }
        let n = starts.len();
        Ok((Tensor::from_vec(x, &[n, t])?, Tensor::from_vec(y, &[n, t])?))
    }

    /// A micro-shard's loss: its tokens' summed cross entropy times `scale`.
    fn shard_loss(model: &Gpt, x: &Tensor, y: &Tensor, scale: f64) -> Result<Var> {
        let logits = model.forward(x)?;
        let v = logits.shape()[2] as isize;
        let sum = F::CrossEntropy {
            reduction: F::Reduction::Sum,
            ..F::CrossEntropy::default()
        };
        Ok(
            F::cross_entropy_with(&logits.reshape(&[-1, v])?, &y.reshape(&[-1])?, &sum)?
                .mul_scalar(scale)?,
        )
    }

    /// Step `step`'s gradient (set on every parameter) as the fixed-order sum over the
    /// micro-shards of the global batch, this process computing those `shards` gives it;
    /// returns the step's loss.
    pub fn step_grads(
        model: &Gpt,
        params: &[Var],
        d: &[i64],
        cfg: &GptConfig,
        step: usize,
        shards: &mut dyn Shards,
    ) -> Result<f64> {
        let (t, m) = (cfg.block_size, micro_batch(cfg));
        let b = cfg.batch_size * cfg.grad_accum;
        let g = b.div_ceil(m);
        let sizes: Vec<usize> = params.iter().map(Var::numel).collect();
        let len = sizes.iter().sum::<usize>() + 1;
        let scale = 1.0 / (b * t) as f64;
        let mut own = Vec::new();
        for k in (0..g).filter(|&k| shards.owns(k)) {
            let idx: Vec<u64> = (k * m..b.min((k + 1) * m)).map(|j| j as u64).collect();
            let starts = idx
                .iter()
                .map(|&j| draw(cfg.seed, vec![step as u128, j as u128], d.len() - t))
                .collect::<Result<Vec<_>, _>>()?;
            let (x, y) = windows(d, &starts, t)?;
            let keys = SampleKeys::new(cfg.seed, step as u64, idx);
            let loss = with_sample_keys(keys, || shard_loss(model, &x, &y, scale))?;
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
        }
        let sum = shards.reduce(&own, g, len)?;
        shards.after_step(&own);
        let mut at = 0;
        for (p, &size) in params.iter().zip(&sizes) {
            p.set_grad(Some(Tensor::from_vec(
                sum[at..at + size].to_vec(),
                p.shape(),
            )?))?;
            at += size;
        }
        Ok(sum[len - 1] as f64)
    }

    /// `estimate_loss()` with keyed windows and micro-shard sums (every process computes all
    /// of it: no exchange).
    pub fn estimate_loss(
        model: &mut Gpt,
        c: &Corpus,
        cfg: &GptConfig,
        iter: usize,
    ) -> Result<Eval> {
        model.eval();
        let (t, m) = (cfg.block_size, micro_batch(cfg));
        let b = cfg.batch_size * cfg.grad_accum;
        let scale = 1.0 / (b * t) as f64;
        let mut out = [0f64; 2];
        for (split, (o, d)) in out.iter_mut().zip([&c.train, &c.val]).enumerate() {
            let mut losses = Vec::with_capacity(cfg.eval_iters);
            for k in 0..cfg.eval_iters {
                let mut parts = Vec::with_capacity(b.div_ceil(m));
                for lo in (0..b).step_by(m) {
                    let starts = (lo..b.min(lo + m))
                        .map(|i| {
                            let key =
                                vec![EVAL_KEY, iter as u128, split as u128, (k * b + i) as u128];
                            draw(cfg.seed, key, d.len() - t)
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let (x, y) = windows(d, &starts, t)?;
                    let l = no_grad(|| shard_loss(model, &x, &y, scale))?;
                    parts.push(vec![l.data().item::<f32>()?]);
                }
                losses.push(tree_sum(&parts)[0]);
            }
            *o = (losses.iter().fold(0f32, |a, &l| a + l) / cfg.eval_iters as f32) as f64;
        }
        model.train(true);
        Ok(Eval {
            iter,
            train: out[0],
            val: out[1],
        })
    }
}
