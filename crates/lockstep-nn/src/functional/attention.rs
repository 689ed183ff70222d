//! `F.scaled_dot_product_attention` and `F.rms_norm`, composed of the autograd ops
//! (matmul, softmax, dropout, elementwise), so their gradients, determinism and tracing are
//! those ops'.

use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::ops::elementwise::broadcast_shapes;
use lockstep_tensor::{DType, Result, Tensor};

/// The options of [`scaled_dot_product_attention_with`] (PyTorch's defaults by `Default`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sdpa<'a> {
    /// `attn_mask=`: a `Bool` mask (true = the position takes part) or an additive float mask
    /// of the query's dtype, broadcast to `[…, L, S]`.
    pub attn_mask: Option<&'a Tensor>,
    /// `dropout_p=`: the probability of zeroing an attention weight (applied whenever > 0,
    /// as PyTorch does; pass 0 in evaluation).
    pub dropout_p: f64,
    /// `is_causal=`: query `i` attends to keys `0..=i` (the top-left aligned lower triangle of
    /// `ones(L, S)`, as `torch.tril`).
    pub is_causal: bool,
    /// `scale=`: the factor on `q·kᵀ`; `None` is `1/√E`.
    pub scale: Option<f64>,
}

/// `F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)`:
/// `softmax(q·kᵀ·scale + mask) · v` for `query` `[…, L, E]`, `key` `[…, S, E]`, `value`
/// `[…, S, Ev]` → `[…, L, Ev]`.
///
/// # Errors
/// As [`scaled_dot_product_attention_with`].
pub fn scaled_dot_product_attention(
    query: &Var,
    key: &Var,
    value: &Var,
    attn_mask: Option<&Tensor>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
) -> Result<Var> {
    scaled_dot_product_attention_with(
        query,
        key,
        value,
        &Sdpa {
            attn_mask,
            dropout_p,
            is_causal,
            scale,
        },
    )
}

/// [`scaled_dot_product_attention`] with its options in a struct.
///
/// The arithmetic is that of PyTorch's math path (`_scaled_dot_product_attention_math`),
/// which its CPU build takes whenever `dropout_p > 0` (its fused CPU kernel refuses dropout):
/// `q·√s` times `kᵀ·√s`, the mask added, `_safe_softmax` (a row with every position masked
/// gives zeros, not NaN), then `F.dropout` on the weights — its mask drawn from the default
/// generator (or the source set by [`crate::rng`]) in the weights' row-major order, the same
/// bits as PyTorch's — and the product with `v`. Without dropout PyTorch's fused kernel adds in
/// another order, so outputs then agree to rounding.
///
/// # Errors
/// Inputs of fewer than 2 dimensions or of different float dtypes (`query`/`key`/`value`),
/// `key` whose last dimension is not the query's, `value` whose sequence length is not the
/// key's, a mask that does not broadcast to `[…, L, S]` or of another float dtype
/// (`attn_mask`), `attn_mask` together with `is_causal`, `dropout_p` outside `[0, 1]`.
pub fn scaled_dot_product_attention_with(
    query: &Var,
    key: &Var,
    value: &Var,
    o: &Sdpa<'_>,
) -> Result<Var> {
    const OP: &str = "scaled_dot_product_attention";
    for (name, t) in [("query", query), ("key", key), ("value", value)] {
        if t.ndim() < 2 || !t.dtype().is_float() {
            return Err(invalid(
                OP,
                name,
                format!(
                    "expected a float tensor of at least 2 dimensions [..., seq, features], got {:?} of shape {:?}",
                    t.dtype(),
                    t.shape()
                ),
            ));
        }
        if t.dtype() != query.dtype() {
            return Err(invalid(
                OP,
                name,
                format!(
                    "expected the query's dtype {:?}, got {:?}",
                    query.dtype(),
                    t.dtype()
                ),
            ));
        }
    }
    let (qs, ks, vs) = (query.shape(), key.shape(), value.shape());
    let e = qs[qs.len() - 1];
    let (l, s) = (qs[qs.len() - 2], ks[ks.len() - 2]);
    if ks[ks.len() - 1] != e {
        return Err(invalid(
            OP,
            "key",
            format!("expected key [..., S, {e}] (the query's last dimension), got {ks:?}"),
        ));
    }
    if vs[vs.len() - 2] != s {
        return Err(invalid(
            OP,
            "value",
            format!("expected value [..., {s}, Ev] (the key's sequence length), got {vs:?}"),
        ));
    }
    if !(0.0..=1.0).contains(&o.dropout_p) {
        return Err(invalid(
            OP,
            "dropout_p",
            format!(
                "dropout probability has to be between 0 and 1, but got {}",
                o.dropout_p
            ),
        ));
    }
    // The scores' shape: the batch dimensions of q and k broadcast, then [L, S].
    let qb = &qs[..qs.len() - 2];
    let kb = &ks[..ks.len() - 2];
    let mut scores_shape = broadcast_shapes(OP, qb, kb)?;
    scores_shape.extend([l, s]);
    let dtype = query.dtype();
    let mask = match (o.attn_mask, o.is_causal) {
        (Some(_), true) => {
            return Err(invalid(
                OP,
                "attn_mask",
                "Explicit attn_mask should not be set when is_causal=True",
            ));
        }
        (None, true) => {
            let causal: Vec<bool> = (0..l * s).map(|i| i % s <= i / s).collect();
            Some(additive_mask(&Tensor::from_vec(causal, &[l, s])?, dtype)?)
        }
        (Some(m), false) => {
            let fits =
                broadcast_shapes(OP, m.shape(), &scores_shape).is_ok_and(|b| b == scores_shape);
            if !fits || (m.dtype() != DType::Bool && m.dtype() != dtype) {
                return Err(invalid(
                    OP,
                    "attn_mask",
                    format!(
                        "expected a Bool mask or a {dtype:?} mask broadcastable to the scores' shape {scores_shape:?}, got {:?} of shape {:?}",
                        m.dtype(),
                        m.shape()
                    ),
                ));
            }
            Some(if m.dtype() == DType::Bool {
                additive_mask(m, dtype)?
            } else {
                m.clone()
            })
        }
        (None, false) => None,
    };
    let scale = o.scale.unwrap_or(1.0 / (e as f64).sqrt());
    // √|s| on both factors (PyTorch's "scale q, k before matmul for stability"), the sign on q.
    let root = scale.abs().sqrt();
    let q = query.mul_scalar(if scale < 0.0 { 0.0 - root } else { root })?;
    let kt = key.transpose(-2, -1)?.mul_scalar(root)?;
    let mut attn = q.matmul(&kt)?;
    let mut dead_rows = None;
    if let Some(m) = mask {
        let (m, dead) = split_dead_rows(&m)?;
        dead_rows = dead;
        attn = attn.add(&Var::constant(m))?;
    }
    let mut attn = attn.softmax(-1)?;
    if let Some(keep) = dead_rows {
        attn = attn.mul(&Var::constant(keep))?;
    }
    if o.dropout_p > 0.0 {
        attn = crate::rng::dropout(&attn, o.dropout_p, true)?;
    }
    attn.matmul(value)
}

/// PyTorch's `convert_boolean_attn_mask`: 0 where `mask` is true, −∞ where false.
fn additive_mask(mask: &Tensor, dtype: DType) -> Result<Tensor> {
    let zero = Tensor::full(&[], 0.0, dtype)?;
    let ninf = Tensor::full(&[], f64::NEG_INFINITY, dtype)?;
    Tensor::where_(mask, &zero, &ninf)
}

/// `_safe_softmax` through the plain softmax: a mask row that is −∞ everywhere is set to 0
/// (so the softmax stays finite) and returned with a 0/1 row factor (shape `[…, 1]`) that
/// zeroes those rows afterwards, with a zero gradient, as PyTorch's. `None` when no row is
/// fully masked (the usual case).
fn split_dead_rows(m: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
    let shape = m.shape().to_vec();
    let s = shape[shape.len() - 1];
    let v = m.try_contiguous()?.to_f64_vec();
    if s == 0 {
        return Ok((m.clone(), None));
    }
    let dead: Vec<bool> = v
        .chunks(s)
        .map(|r| r.iter().all(|&x| x == f64::NEG_INFINITY))
        .collect();
    if !dead.iter().any(|&d| d) {
        return Ok((m.clone(), None));
    }
    let dtype = m.dtype();
    let mut fixed = v;
    for (r, &d) in fixed.chunks_mut(s).zip(&dead) {
        if d {
            r.fill(0.0);
        }
    }
    let mut row_shape = shape.clone();
    *row_shape.last_mut().expect("at least 2-D") = 1;
    let keep: Vec<f64> = dead.iter().map(|&d| if d { 0.0 } else { 1.0 }).collect();
    let cast = |v: Vec<f64>, sh: &[usize]| -> Result<Tensor> {
        match dtype {
            DType::F32 => Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), sh),
            _ => Tensor::from_vec(v, sh),
        }
    };
    Ok((cast(fixed, &shape)?, Some(cast(keep, &row_shape)?)))
}

/// `F.rms_norm(x, normalized_shape, weight, eps)`: `x · 1/√(mean(x²) + eps)` over the last
/// `normalized_shape.len()` dimensions, times `weight`; `eps` `None` is the machine epsilon of
/// `x`'s dtype (`torch.finfo(x.dtype).eps`), as PyTorch's default. The same operations as
/// PyTorch's composite CPU form (`pow`, `mean`, `add`, `rsqrt` as `1/sqrt`, `mul`), in the
/// input's dtype; the mean sums in another order, so values agree to rounding.
///
/// # Errors
/// `x`'s trailing dimensions not `normalized_shape` (`input`), a weight of another shape or
/// dtype (`weight`), a non-float input.
pub fn rms_norm(
    x: &Var,
    normalized_shape: &[usize],
    weight: Option<&Var>,
    eps: Option<f64>,
) -> Result<Var> {
    const OP: &str = "rms_norm";
    let k = normalized_shape.len();
    if !x.dtype().is_float()
        || k == 0
        || x.ndim() < k
        || x.shape()[x.ndim() - k..] != *normalized_shape
    {
        return Err(invalid(
            OP,
            "input",
            format!(
                "Given normalized_shape={normalized_shape:?}, expected a float input with shape [*, {normalized_shape:?}], but got {:?} of size {:?}",
                x.dtype(),
                x.shape()
            ),
        ));
    }
    if let Some(w) = weight
        && (w.shape() != normalized_shape || w.dtype() != x.dtype())
    {
        return Err(invalid(
            OP,
            "weight",
            format!(
                "expected weight of shape {normalized_shape:?} and dtype {:?}, got {:?} ({:?})",
                x.dtype(),
                w.shape(),
                w.dtype()
            ),
        ));
    }
    let eps = eps.unwrap_or(match x.dtype() {
        DType::F32 => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    });
    let shape = x.shape().to_vec();
    let l: usize = normalized_shape.iter().product();
    let mut rows: Vec<isize> = shape[..shape.len() - k]
        .iter()
        .map(|&d| d as isize)
        .collect();
    rows.push(l as isize);
    let flat = x.reshape(&rows)?;
    let ms = flat.mul(&flat)?.mean_dim(-1, true)?;
    let one = Var::constant(Tensor::full(&[], 1.0, x.dtype())?);
    let r = one.div(&ms.add_scalar(eps)?.sqrt()?)?;
    let sh: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    let y = flat.mul(&r)?.reshape(&sh)?;
    match weight {
        Some(w) => y.mul(w),
        None => Ok(y),
    }
}
