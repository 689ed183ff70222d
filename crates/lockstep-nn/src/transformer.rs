//! `nn.MultiheadAttention`, `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer` and
//! `nn.RMSNorm`, with PyTorch's parameter and submodule names, its initialisation (the same
//! draws from the default generator, in the same order, so the same bits after
//! `manual_seed`) and the arithmetic of its `F.multi_head_attention_forward`. Dropout masks
//! (attention weights included) are drawn as PyTorch draws them in training mode.
//!
//! Masks follow PyTorch: for `MultiheadAttention` and the layers a `Bool` mask is true where
//! a position may *not* take part (it becomes −∞), a float mask is added; for
//! [`F::scaled_dot_product_attention`](crate::functional::scaled_dot_product_attention) a
//! `Bool` mask is true where a position takes part.
//!
//! ```
//! use lockstep_nn::{Module, Var, transformer::{MultiheadAttention, Mha}};
//! use lockstep_tensor::{DType, Tensor};
//!
//! lockstep_rng::default_generator().manual_seed(0);
//! let mha = MultiheadAttention::new(8, 2)?;
//! let x = Var::constant(Tensor::ones(&[5, 3, 8], DType::F32)?); // [L, N, E]
//! let (y, w) = mha.forward(&x, &x, &x, &Mha::default())?;
//! assert_eq!(y.shape(), [5, 3, 8]);
//! assert_eq!(w.unwrap().shape(), [3, 5, 5]); // averaged over the heads
//! assert_eq!(mha.named_parameters()[0].0, "in_proj_weight");
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```

use crate::autograd::Var;
use crate::functional as F;
use crate::layers::{Dropout, LayerNorm, Linear};
use crate::module::{Forward, Module, Training, Visitor};
use crate::ops::invalid;
use lockstep_tensor::{DType, Result, Tensor};

/// `nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=…)` (packed
/// in-projection: `kdim = vdim = embed_dim`, no `add_bias_kv`, no `add_zero_attn`).
pub struct MultiheadAttention {
    /// `E`.
    pub embed_dim: usize,
    /// `H`; `E` is a multiple of it.
    pub num_heads: usize,
    /// The dropout probability on the attention weights (training only).
    pub dropout: f64,
    /// Inputs and output `[N, L, E]` rather than `[L, N, E]`.
    pub batch_first: bool,
    /// `[3E, E]`: the query, key and value projections stacked; `xavier_uniform_`.
    pub in_proj_weight: Var,
    /// `[3E]`, zeros.
    pub in_proj_bias: Option<Var>,
    /// `Linear(E, E)`, its bias zeroed.
    pub out_proj: Linear,
    training: Training,
}

/// The arguments of [`MultiheadAttention::forward`] beyond the inputs (PyTorch's defaults by
/// `Default`: `need_weights` and `average_attn_weights` true).
#[derive(Clone, Copy, Debug)]
pub struct Mha<'a> {
    /// `[N, S]` (`[S]` unbatched): `Bool` true = that key is padding, or an additive float.
    pub key_padding_mask: Option<&'a Tensor>,
    /// Also return the attention weights (then computed by PyTorch's explicit `bmm` path).
    pub need_weights: bool,
    /// `[L, S]` or `[N·H, L, S]`: `Bool` true = not allowed, or an additive float.
    pub attn_mask: Option<&'a Tensor>,
    /// Average the returned weights over the heads (`[N, L, S]`), else `[N, H, L, S]`.
    pub average_attn_weights: bool,
    /// A hint that `attn_mask` is the causal mask (it must still be given, as in PyTorch).
    pub is_causal: bool,
}

impl Default for Mha<'_> {
    fn default() -> Self {
        Self {
            key_padding_mask: None,
            need_weights: true,
            attn_mask: None,
            average_attn_weights: true,
            is_causal: false,
        }
    }
}

fn bad(op: &'static str, arg: &'static str, reason: String) -> lockstep_tensor::Error {
    invalid(op, arg, reason)
}

/// PyTorch's `_canonical_mask`: a `Bool` mask as 0 / −∞ (true = −∞) in `dtype`, a float mask
/// of `dtype` as it is.
fn canonical_mask(op: &'static str, arg: &'static str, m: &Tensor, dtype: DType) -> Result<Tensor> {
    if m.dtype() == DType::Bool {
        let zero = Tensor::full(&[], 0.0, dtype)?;
        let ninf = Tensor::full(&[], f64::NEG_INFINITY, dtype)?;
        Tensor::where_(m, &ninf, &zero)
    } else if m.dtype() == dtype {
        Ok(m.clone())
    } else {
        Err(bad(
            op,
            arg,
            format!(
                "only Bool and floating types of masks are supported; expected Bool or {dtype:?}, got {:?}",
                m.dtype()
            ),
        ))
    }
}

impl MultiheadAttention {
    /// `nn.MultiheadAttention(embed_dim, num_heads)`: no dropout, biases, `[L, N, E]` inputs.
    ///
    /// # Errors
    /// As [`with_options`](Self::with_options).
    pub fn new(embed_dim: usize, num_heads: usize) -> Result<Self> {
        Self::with_options(embed_dim, num_heads, 0.0, true, false)
    }

    /// `nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=batch_first)`,
    /// initialised as PyTorch's: `out_proj` made first (its weight's and bias's draws), then
    /// `xavier_uniform_(in_proj_weight)`, then both biases set to 0.
    ///
    /// # Errors
    /// `embed_dim` or `num_heads` 0, `embed_dim` not a multiple of `num_heads` (named
    /// `num_heads`), `dropout` outside `[0, 1]`, sizes that overflow.
    pub fn with_options(
        embed_dim: usize,
        num_heads: usize,
        dropout: f64,
        bias: bool,
        batch_first: bool,
    ) -> Result<Self> {
        const OP: &str = "MultiheadAttention";
        if embed_dim == 0 {
            return Err(bad(
                OP,
                "embed_dim",
                "embed_dim must be greater than 0".into(),
            ));
        }
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            return Err(bad(
                OP,
                "num_heads",
                format!("embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"),
            ));
        }
        if !(0.0..=1.0).contains(&dropout) {
            return Err(bad(
                OP,
                "dropout",
                format!("dropout probability has to be between 0 and 1, but got {dropout}"),
            ));
        }
        let rows = embed_dim
            .checked_mul(3)
            .filter(|r| {
                r.checked_mul(embed_dim)
                    .is_some_and(|n| n <= isize::MAX as usize / 8)
            })
            .ok_or_else(|| {
                bad(
                    OP,
                    "embed_dim",
                    format!("embed_dim {embed_dim} is too large"),
                )
            })?;
        // PyTorch's order: `in_proj_weight = empty(…)` (no draws), `out_proj = Linear(…)`
        // (draws), then `_reset_parameters`.
        let in_proj_weight = Var::new(Tensor::zeros(&[rows, embed_dim], DType::F32)?, true);
        let in_proj_bias = if bias {
            Some(Var::new(Tensor::zeros(&[rows], DType::F32)?, true))
        } else {
            None
        };
        let out_proj = Linear::new(embed_dim, embed_dim, bias)?;
        crate::init::xavier_uniform_(&in_proj_weight, 1.0, None)?;
        if let Some(b) = &out_proj.bias {
            crate::init::constant_(b, 0.0)?;
        }
        Ok(Self {
            embed_dim,
            num_heads,
            dropout,
            batch_first,
            in_proj_weight,
            in_proj_bias,
            out_proj,
            training: Training::default(),
        })
    }

    /// `mha(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
    /// is_causal)` → `(attn_output, attn_output_weights)`. Inputs `[L, N, E]` (`[N, L, E]`
    /// with `batch_first`, `[L, E]` unbatched); the weights are `Some` when `need_weights`
    /// (after dropout, as PyTorch returns them). When `query`, `key` and `value` are the same
    /// [`Var`] the projection is one `linear` with the stacked weight, as PyTorch's.
    ///
    /// # Errors
    /// Shapes that do not fit (named `query`, `key`, `value`, `attn_mask`,
    /// `key_padding_mask`), masks of a dtype other than `Bool` or the query's, `is_causal`
    /// without `attn_mask`.
    pub fn forward(
        &self,
        query: &Var,
        key: &Var,
        value: &Var,
        o: &Mha<'_>,
    ) -> Result<(Var, Option<Var>)> {
        const OP: &str = "MultiheadAttention";
        let (e, h) = (self.embed_dim, self.num_heads);
        let hd = e / h;
        let nd = query.ndim();
        if nd != 2 && nd != 3 {
            return Err(bad(
                OP,
                "query",
                format!(
                    "query should be unbatched 2D or batched 3D tensor but received {nd}-D query tensor"
                ),
            ));
        }
        for (name, t) in [("query", query), ("key", key), ("value", value)] {
            if t.ndim() != nd || t.shape()[nd - 1] != e || t.dtype() != self.in_proj_weight.dtype()
            {
                return Err(bad(
                    OP,
                    name,
                    format!(
                        "expected a {nd}-D {:?} {name} with last dimension embed_dim={e} (like the query {:?}), got {:?} of shape {:?}",
                        self.in_proj_weight.dtype(),
                        query.shape(),
                        t.dtype(),
                        t.shape()
                    ),
                ));
            }
        }
        if key.shape() != value.shape() {
            return Err(bad(
                OP,
                "value",
                format!(
                    "key shape {:?} does not match value shape {:?}",
                    key.shape(),
                    value.shape()
                ),
            ));
        }
        let batched = nd == 3;
        let self_attn = query.same(key) && key.same(value);
        let kv_same = key.same(value);
        let to_seq_first = |x: &Var| -> Result<Var> {
            if !batched {
                x.unsqueeze(1)
            } else if self.batch_first {
                x.transpose(0, 1)
            } else {
                Ok(x.clone())
            }
        };
        let (qi, ki) = (to_seq_first(query)?, to_seq_first(key)?);
        let vi = if kv_same {
            ki.clone()
        } else {
            to_seq_first(value)?
        };
        let (l, n) = (qi.shape()[0], qi.shape()[1]);
        let s = ki.shape()[0];
        if ki.shape()[1] != n {
            return Err(bad(
                OP,
                "key",
                format!(
                    "key batch size {} does not match the query's {n}",
                    ki.shape()[1]
                ),
            ));
        }
        let dtype = query.dtype();
        let kpm = match o.key_padding_mask {
            Some(m) => {
                let want: &[usize] = if batched { &[n, s] } else { &[s] };
                if m.shape() != want {
                    return Err(bad(
                        OP,
                        "key_padding_mask",
                        format!(
                            "expected shape {want:?} (batch, source length), got {:?}",
                            m.shape()
                        ),
                    ));
                }
                Some(canonical_mask(OP, "key_padding_mask", m, dtype)?)
            }
            None => None,
        };
        if o.is_causal && o.attn_mask.is_none() {
            return Err(bad(
                OP,
                "attn_mask",
                "Need attn_mask if specifying the is_causal hint".into(),
            ));
        }
        // PyTorch drops the mask for the causal flag when nothing else needs it.
        let causal_flag = o.is_causal && kpm.is_none() && !o.need_weights;
        let mut mask = match o.attn_mask {
            Some(m) if !causal_flag => {
                let m = canonical_mask(OP, "attn_mask", m, dtype)?;
                Some(match m.ndim() {
                    2 if m.shape() == [l, s] => m.unsqueeze(0)?,
                    3 if m.shape() == [n * h, l, s] => m,
                    _ => {
                        return Err(bad(
                            OP,
                            "attn_mask",
                            format!(
                                "expected attn_mask of shape {:?} or {:?}, got {:?}",
                                [l, s],
                                [n * h, l, s],
                                m.shape()
                            ),
                        ));
                    }
                })
            }
            _ => None,
        };
        // In-projection.
        let w = &self.in_proj_weight;
        let b = self.in_proj_bias.as_ref();
        let part = |i: usize, k: usize| -> Result<(Var, Option<Var>)> {
            Ok((
                w.narrow(0, i * e, k * e)?,
                b.map(|b| b.narrow(0, i * e, k * e)).transpose()?,
            ))
        };
        let (q, k, v) = if self_attn {
            let c = qi.linear(w, b)?.chunk(3, -1)?;
            (c[0].clone(), c[1].clone(), c[2].clone())
        } else {
            let (wq, bq) = part(0, 1)?;
            let q = qi.linear(&wq, bq.as_ref())?;
            if kv_same {
                let (wkv, bkv) = part(1, 2)?;
                let c = ki.linear(&wkv, bkv.as_ref())?.chunk(2, -1)?;
                (q, c[0].clone(), c[1].clone())
            } else {
                let (wk, bk) = part(1, 1)?;
                let (wv, bv) = part(2, 1)?;
                (
                    q,
                    ki.linear(&wk, bk.as_ref())?,
                    vi.linear(&wv, bv.as_ref())?,
                )
            }
        };
        let heads = |x: &Var, len: usize| -> Result<Var> {
            x.reshape(&[len as isize, (n * h) as isize, hd as isize])?
                .transpose(0, 1)
        };
        let (q, k, v) = (heads(&q, l)?, heads(&k, s)?, heads(&v, s)?);
        if let Some(kp) = kpm {
            let kp = kp
                .reshape(&[n as isize, 1, 1, s as isize])?
                .expand(&[n as isize, h as isize, 1, s as isize])?
                .reshape(&[(n * h) as isize, 1, s as isize])?;
            mask = Some(match mask {
                Some(m) => m.add(&kp)?,
                None => kp,
            });
        }
        let p = if self.training.get() {
            self.dropout
        } else {
            0.0
        };
        let (ni, hi, li, si, hdi) = (n as isize, h as isize, l as isize, s as isize, hd as isize);
        let (out, weights) = if o.need_weights {
            // PyTorch's explicit path: q·√(1/hd), baddbmm with the mask, softmax, dropout.
            let qs = q.mul_scalar((1.0 / hd as f64).sqrt())?;
            let mut a = qs.matmul(&k.transpose(-2, -1)?)?;
            if let Some(m) = &mask {
                a = a.add(&Var::constant(m.clone()))?;
            }
            let mut a = a.softmax(-1)?;
            if p > 0.0 {
                // Drawn over [N, H, L, S] (the same order as PyTorch's [N·H, L, S]) so that
                // per-sample masks key on the batch.
                let a4 = a.reshape(&[ni, hi, li, si])?;
                a = crate::rng::dropout(&a4, p, true)?.reshape(&[ni * hi, li, si])?;
            }
            let out = a.matmul(&v)?.transpose(0, 1)?;
            let wts = a.reshape(&[ni, hi, li, si])?;
            let wts = if o.average_attn_weights {
                wts.mean_dim(1, false)?
            } else {
                wts
            };
            (out, Some(wts))
        } else {
            let mask4 = match mask {
                Some(m) if m.shape()[0] == 1 => Some(m.unsqueeze(0)?),
                Some(m) => Some(m.reshape(&[ni, hi, -1, si])?),
                None => None,
            };
            let q4 = q.reshape(&[ni, hi, li, hdi])?;
            let k4 = k.reshape(&[ni, hi, si, hdi])?;
            let v4 = v.reshape(&[ni, hi, si, hdi])?;
            let a = F::scaled_dot_product_attention(
                &q4,
                &k4,
                &v4,
                mask4.as_ref(),
                p,
                causal_flag,
                None,
            )?;
            (a.permute(&[2, 0, 1, 3])?, None)
        };
        let out = out
            .reshape(&[li * ni, e as isize])?
            .linear(&self.out_proj.weight, self.out_proj.bias.as_ref())?
            .reshape(&[li, ni, e as isize])?;
        if !batched {
            let wts = match weights {
                Some(w) => Some(w.squeeze(0)?),
                None => None,
            };
            return Ok((out.squeeze(1)?, wts));
        }
        let out = if self.batch_first {
            out.transpose(0, 1)?
        } else {
            out
        };
        Ok((out, weights))
    }
}

impl Module for MultiheadAttention {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("in_proj_weight", &self.in_proj_weight);
        if let Some(b) = &self.in_proj_bias {
            v.param("in_proj_bias", b);
        }
        v.child("out_proj", &self.out_proj);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// The feed-forward activation of the transformer layers (`activation="relu"` / `"gelu"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// `F.relu` (PyTorch's default).
    #[default]
    Relu,
    /// `F.gelu`, the exact (erf) form.
    Gelu,
}

impl core::str::FromStr for Activation {
    type Err = lockstep_tensor::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "relu" => Ok(Self::Relu),
            "gelu" => Ok(Self::Gelu),
            _ => Err(bad(
                "TransformerEncoderLayer",
                "activation",
                format!("activation should be relu/gelu, not {s}"),
            )),
        }
    }
}

impl Activation {
    fn apply(self, x: &Var) -> Result<Var> {
        match self {
            Self::Relu => x.relu(),
            Self::Gelu => x.gelu(),
        }
    }
}

/// The options of the transformer layers beyond `d_model` and `nhead`, with PyTorch's
/// defaults by `Default` (`dim_feedforward=2048, dropout=0.1, activation=relu,
/// layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True`).
#[derive(Clone, Copy, Debug)]
pub struct LayerConfig {
    /// The feed-forward width.
    pub dim_feedforward: usize,
    /// Every dropout of the layer (attention weights included).
    pub dropout: f64,
    /// The feed-forward activation.
    pub activation: Activation,
    /// The layer norms' epsilon.
    pub layer_norm_eps: f64,
    /// `[N, L, E]` inputs.
    pub batch_first: bool,
    /// Pre-norm (`x + f(norm(x))`) rather than post-norm (`norm(x + f(x))`).
    pub norm_first: bool,
    /// Biases in the linear layers, the attention and the layer norms.
    pub bias: bool,
}

impl Default for LayerConfig {
    fn default() -> Self {
        Self {
            dim_feedforward: 2048,
            dropout: 0.1,
            activation: Activation::Relu,
            layer_norm_eps: 1e-5,
            batch_first: false,
            norm_first: false,
            bias: true,
        }
    }
}

fn layer_norm(d_model: usize, c: &LayerConfig) -> Result<LayerNorm> {
    let mut n = LayerNorm::new(&[d_model], true)?;
    n.eps = c.layer_norm_eps;
    if !c.bias {
        n.bias = None;
    }
    Ok(n)
}

/// The feed-forward block `linear2(dropout(activation(linear1(x))))`.
fn feed_forward(
    x: &Var,
    linear1: &Linear,
    activation: Activation,
    dropout: &Dropout,
    linear2: &Linear,
) -> Result<Var> {
    linear2.forward(&dropout.forward(&activation.apply(&linear1.forward(x)?)?)?)
}

/// Self-attention as the layers call it (`need_weights=False`), then its dropout.
fn sa_block(
    attn: &MultiheadAttention,
    x: &Var,
    mask: Option<&Tensor>,
    kpm: Option<&Tensor>,
    is_causal: bool,
    drop: &Dropout,
) -> Result<Var> {
    let o = Mha {
        key_padding_mask: kpm,
        need_weights: false,
        attn_mask: mask,
        average_attn_weights: true,
        is_causal,
    };
    drop.forward(&attn.forward(x, x, x, &o)?.0)
}

/// `nn.TransformerEncoderLayer(d_model, nhead, …)`: self-attention and a feed-forward block,
/// each with dropout, a residual connection and a layer norm (before, with `norm_first`, or
/// after). Submodules under PyTorch's names: `self_attn`, `linear1`, `dropout`, `linear2`,
/// `norm1`, `norm2`, `dropout1`, `dropout2`; made (and drawn) in that order.
pub struct TransformerEncoderLayer {
    /// The self-attention.
    pub self_attn: MultiheadAttention,
    /// `Linear(d_model, dim_feedforward)`.
    pub linear1: Linear,
    /// The dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `Linear(dim_feedforward, d_model)`.
    pub linear2: Linear,
    /// After (or before) the attention block.
    pub norm1: LayerNorm,
    /// After (or before) the feed-forward block.
    pub norm2: LayerNorm,
    /// On the attention block's output.
    pub dropout1: Dropout,
    /// On the feed-forward block's output.
    pub dropout2: Dropout,
    /// Pre-norm.
    pub norm_first: bool,
    /// The feed-forward activation.
    pub activation: Activation,
    training: Training,
}

impl TransformerEncoderLayer {
    /// `nn.TransformerEncoderLayer(d_model, nhead)` with PyTorch's defaults.
    ///
    /// # Errors
    /// As [`with_config`](Self::with_config).
    pub fn new(d_model: usize, nhead: usize) -> Result<Self> {
        Self::with_config(d_model, nhead, &LayerConfig::default())
    }

    /// `nn.TransformerEncoderLayer(d_model, nhead, **c)`.
    ///
    /// # Errors
    /// As [`MultiheadAttention::with_options`]; sizes that overflow.
    pub fn with_config(d_model: usize, nhead: usize, c: &LayerConfig) -> Result<Self> {
        let self_attn =
            MultiheadAttention::with_options(d_model, nhead, c.dropout, c.bias, c.batch_first)?;
        Ok(Self {
            self_attn,
            linear1: Linear::new(d_model, c.dim_feedforward, c.bias)?,
            dropout: Dropout::new(c.dropout)?,
            linear2: Linear::new(c.dim_feedforward, d_model, c.bias)?,
            norm1: layer_norm(d_model, c)?,
            norm2: layer_norm(d_model, c)?,
            dropout1: Dropout::new(c.dropout)?,
            dropout2: Dropout::new(c.dropout)?,
            norm_first: c.norm_first,
            activation: c.activation,
            training: Training::default(),
        })
    }

    /// `layer(src, src_mask, src_key_padding_mask, is_causal)`; masks as
    /// [`MultiheadAttention::forward`]'s `attn_mask` and `key_padding_mask`.
    ///
    /// # Errors
    /// As [`MultiheadAttention::forward`].
    pub fn forward_masked(
        &self,
        src: &Var,
        src_mask: Option<&Tensor>,
        src_key_padding_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Result<Var> {
        let sa = |x: &Var| {
            sa_block(
                &self.self_attn,
                x,
                src_mask,
                src_key_padding_mask,
                is_causal,
                &self.dropout1,
            )
        };
        let ff = |x: &Var| -> Result<Var> {
            let y = feed_forward(
                x,
                &self.linear1,
                self.activation,
                &self.dropout,
                &self.linear2,
            )?;
            self.dropout2.forward(&y)
        };
        let x = src.clone();
        if self.norm_first {
            let x = x.add(&sa(&self.norm1.forward(&x)?)?)?;
            x.add(&ff(&self.norm2.forward(&x)?)?)
        } else {
            let x = self.norm1.forward(&x.add(&sa(&x)?)?)?;
            self.norm2.forward(&x.add(&ff(&x)?)?)
        }
    }
}

impl Forward for TransformerEncoderLayer {
    /// `layer(src)`, no masks.
    fn forward(&self, x: &Var) -> Result<Var> {
        self.forward_masked(x, None, None, false)
    }
}

impl Module for TransformerEncoderLayer {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("self_attn", &self.self_attn);
        v.child("linear1", &self.linear1);
        v.child("dropout", &self.dropout);
        v.child("linear2", &self.linear2);
        v.child("norm1", &self.norm1);
        v.child("norm2", &self.norm2);
        v.child("dropout1", &self.dropout1);
        v.child("dropout2", &self.dropout2);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// The masks of [`TransformerDecoderLayer::forward`] (none by `Default`).
#[derive(Clone, Copy, Debug, Default)]
pub struct DecoderMasks<'a> {
    /// The self-attention's `attn_mask`.
    pub tgt_mask: Option<&'a Tensor>,
    /// The cross-attention's `attn_mask`.
    pub memory_mask: Option<&'a Tensor>,
    /// The self-attention's `key_padding_mask`.
    pub tgt_key_padding_mask: Option<&'a Tensor>,
    /// The cross-attention's `key_padding_mask`.
    pub memory_key_padding_mask: Option<&'a Tensor>,
    /// `tgt_mask` is causal (a hint, as PyTorch's).
    pub tgt_is_causal: bool,
    /// `memory_mask` is causal (a hint).
    pub memory_is_causal: bool,
}

/// `nn.TransformerDecoderLayer(d_model, nhead, …)`: self-attention, cross-attention over the
/// encoder's `memory`, and a feed-forward block. Submodules under PyTorch's names:
/// `self_attn`, `multihead_attn`, `linear1`, `dropout`, `linear2`, `norm1`, `norm2`, `norm3`,
/// `dropout1`, `dropout2`, `dropout3`; made (and drawn) in that order.
pub struct TransformerDecoderLayer {
    /// The self-attention.
    pub self_attn: MultiheadAttention,
    /// The cross-attention (queries from the target, keys and values from `memory`).
    pub multihead_attn: MultiheadAttention,
    /// `Linear(d_model, dim_feedforward)`.
    pub linear1: Linear,
    /// The dropout inside the feed-forward block.
    pub dropout: Dropout,
    /// `Linear(dim_feedforward, d_model)`.
    pub linear2: Linear,
    /// Around the self-attention block.
    pub norm1: LayerNorm,
    /// Around the cross-attention block.
    pub norm2: LayerNorm,
    /// Around the feed-forward block.
    pub norm3: LayerNorm,
    /// On the self-attention block's output.
    pub dropout1: Dropout,
    /// On the cross-attention block's output.
    pub dropout2: Dropout,
    /// On the feed-forward block's output.
    pub dropout3: Dropout,
    /// Pre-norm.
    pub norm_first: bool,
    /// The feed-forward activation.
    pub activation: Activation,
    training: Training,
}

impl TransformerDecoderLayer {
    /// `nn.TransformerDecoderLayer(d_model, nhead)` with PyTorch's defaults.
    ///
    /// # Errors
    /// As [`with_config`](Self::with_config).
    pub fn new(d_model: usize, nhead: usize) -> Result<Self> {
        Self::with_config(d_model, nhead, &LayerConfig::default())
    }

    /// `nn.TransformerDecoderLayer(d_model, nhead, **c)`.
    ///
    /// # Errors
    /// As [`MultiheadAttention::with_options`]; sizes that overflow.
    pub fn with_config(d_model: usize, nhead: usize, c: &LayerConfig) -> Result<Self> {
        let mha =
            || MultiheadAttention::with_options(d_model, nhead, c.dropout, c.bias, c.batch_first);
        let self_attn = mha()?;
        let multihead_attn = mha()?;
        Ok(Self {
            self_attn,
            multihead_attn,
            linear1: Linear::new(d_model, c.dim_feedforward, c.bias)?,
            dropout: Dropout::new(c.dropout)?,
            linear2: Linear::new(c.dim_feedforward, d_model, c.bias)?,
            norm1: layer_norm(d_model, c)?,
            norm2: layer_norm(d_model, c)?,
            norm3: layer_norm(d_model, c)?,
            dropout1: Dropout::new(c.dropout)?,
            dropout2: Dropout::new(c.dropout)?,
            dropout3: Dropout::new(c.dropout)?,
            norm_first: c.norm_first,
            activation: c.activation,
            training: Training::default(),
        })
    }

    /// `layer(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
    /// memory_key_padding_mask, tgt_is_causal, memory_is_causal)`.
    ///
    /// # Errors
    /// As [`MultiheadAttention::forward`] (`memory` as its `key`).
    pub fn forward(&self, tgt: &Var, memory: &Var, m: &DecoderMasks<'_>) -> Result<Var> {
        let sa = |x: &Var| {
            sa_block(
                &self.self_attn,
                x,
                m.tgt_mask,
                m.tgt_key_padding_mask,
                m.tgt_is_causal,
                &self.dropout1,
            )
        };
        let mha = |x: &Var| -> Result<Var> {
            let o = Mha {
                key_padding_mask: m.memory_key_padding_mask,
                need_weights: false,
                attn_mask: m.memory_mask,
                average_attn_weights: true,
                is_causal: m.memory_is_causal,
            };
            self.dropout2
                .forward(&self.multihead_attn.forward(x, memory, memory, &o)?.0)
        };
        let ff = |x: &Var| -> Result<Var> {
            let y = feed_forward(
                x,
                &self.linear1,
                self.activation,
                &self.dropout,
                &self.linear2,
            )?;
            self.dropout3.forward(&y)
        };
        let x = tgt.clone();
        if self.norm_first {
            let x = x.add(&sa(&self.norm1.forward(&x)?)?)?;
            let x = x.add(&mha(&self.norm2.forward(&x)?)?)?;
            x.add(&ff(&self.norm3.forward(&x)?)?)
        } else {
            let x = self.norm1.forward(&x.add(&sa(&x)?)?)?;
            let x = self.norm2.forward(&x.add(&mha(&x)?)?)?;
            self.norm3.forward(&x.add(&ff(&x)?)?)
        }
    }
}

impl Module for TransformerDecoderLayer {
    fn visit(&self, v: &mut dyn Visitor) {
        v.child("self_attn", &self.self_attn);
        v.child("multihead_attn", &self.multihead_attn);
        v.child("linear1", &self.linear1);
        v.child("dropout", &self.dropout);
        v.child("linear2", &self.linear2);
        v.child("norm1", &self.norm1);
        v.child("norm2", &self.norm2);
        v.child("norm3", &self.norm3);
        v.child("dropout1", &self.dropout1);
        v.child("dropout2", &self.dropout2);
        v.child("dropout3", &self.dropout3);
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`: see [`F::rms_norm`].
pub struct RMSNorm {
    /// The trailing shape normalised over.
    pub normalized_shape: Vec<usize>,
    /// `None`: the input dtype's machine epsilon, as PyTorch.
    pub eps: Option<f64>,
    /// Ones at init (`elementwise_affine`).
    pub weight: Option<Var>,
    training: Training,
}

impl RMSNorm {
    /// `nn.RMSNorm(normalized_shape, eps, elementwise_affine)` (no draws).
    ///
    /// # Errors
    /// An empty `normalized_shape`, a negative `eps`.
    pub fn new(
        normalized_shape: &[usize],
        eps: Option<f64>,
        elementwise_affine: bool,
    ) -> Result<Self> {
        if normalized_shape.is_empty() {
            return Err(bad(
                "RMSNorm",
                "normalized_shape",
                "normalized_shape must have at least one dimension".into(),
            ));
        }
        if eps.is_some_and(|e| !(e >= 0.0)) {
            return Err(bad(
                "RMSNorm",
                "eps",
                format!("eps must be >= 0, got {eps:?}"),
            ));
        }
        let weight = if elementwise_affine {
            Some(Var::new(Tensor::ones(normalized_shape, DType::F32)?, true))
        } else {
            None
        };
        Ok(Self {
            normalized_shape: normalized_shape.to_vec(),
            eps,
            weight,
            training: Training::default(),
        })
    }
}

impl Forward for RMSNorm {
    fn forward(&self, x: &Var) -> Result<Var> {
        F::rms_norm(x, &self.normalized_shape, self.weight.as_ref(), self.eps)
    }
}

impl Module for RMSNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        if let Some(w) = &self.weight {
            v.param("weight", w);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}
