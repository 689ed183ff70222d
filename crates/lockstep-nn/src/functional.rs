//! `torch.nn.functional`: convolution, pooling, normalisation, embedding and the losses, with
//! their gradients. Normalisation statistics and loss sums are accumulated in f64 in index
//! order, so they are deterministic at any thread count.

use crate::autograd::{Var, no_grad};
use crate::ops::invalid;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::ops::norm::BatchNorm;
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::{DType, Element, Error, Result, Tensor, math};

mod attention;
mod causal_attention;
mod layer_norm_rows;

use layer_norm_rows::{ln_backward_par, ln_forward_par};

pub use attention::{
    Sdpa, rms_norm, scaled_dot_product_attention, scaled_dot_product_attention_with,
};
pub use causal_attention::causal_self_attention;

/// `F.conv2d(x, weight, bias, stride, padding, dilation, groups)` (f32): `x` `[N, Cin, H, W]`,
/// weight `[Cout, Cin/groups, kh, kw]`, bias `[Cout]`. The gradients use the convolution's own
/// backward kernels (deterministic ones in deterministic mode).
///
/// # Errors
/// As [`Tensor::conv2d`].
pub fn conv2d(x: &Var, weight: &Var, bias: Option<&Var>, p: Conv2dParams) -> Result<Var> {
    let (xv, wv) = (x.data(), weight.data());
    let bv = bias.map(|b| b.data());
    let y = xv.conv2d(&wv, bv.as_ref(), p)?;
    let (rx, rw) = (x.requires_grad(), weight.requires_grad());
    let rb = bias.is_some_and(|b| b.requires_grad());
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    let has_bias = bias.is_some();
    // Inside `with_batch_blocks`: the weight and bias gradients in blocks of the batch.
    let blocks = if xv.ndim() == 4 {
        crate::batch_blocks::for_batch(xv.shape()[0])
    } else {
        None
    };
    Ok(Var::from_op("conv2d", y, &inputs, move |g| {
        let gx = if rx {
            Some(Tensor::conv2d_backward_input(g, xv.shape(), &wv, p)?)
        } else {
            None
        };
        let weight_grad =
            |g: &Tensor, x: &Tensor| Tensor::conv2d_backward_weight(g, x, wv.shape(), p);
        let gw = if rw {
            Some(match blocks {
                None => weight_grad(g, &xv)?,
                // One call for every block's gradient and the tree: the bits of the blocks'
                // own `conv2d_backward_weight` calls added in the tree.
                Some(b) => Tensor::conv2d_backward_weight_blocks(g, &xv, wv.shape(), p, b.block)?,
            })
        } else {
            None
        };
        // Each (n, c) plane in one row sum, then over the batch: two passes, not three (the
        // first of which summed rows of W elements, one call each).
        let plane_sums = |g: &Tensor| {
            let (n, c) = (g.shape()[0] as isize, g.shape()[1] as isize);
            g.reshape(&[n, c, -1])?.sum_dim(2, false)
        };
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(if rb {
                Some(match blocks {
                    None => plane_sums(g)?.sum_dim(0, false)?,
                    // A plane's sum is its row's alone (the same bits in any batch): one call
                    // for every block's planes, then one for every block's column sum and the
                    // tree (the bits of a `sum_dim(0)` per block added by `tree_sum_blocks`).
                    Some(b) => plane_sums(g)?.sum_dim0_blocks(b.block)?,
                })
            } else {
                None
            });
        }
        Ok(out)
    }))
}

/// `F.max_pool2d(x, …)` (f32, `[N, C, H, W]`); the gradient goes to the first maximum of
/// each window, as PyTorch's.
///
/// # Errors
/// As [`Tensor::max_pool2d`].
pub fn max_pool2d(x: &Var, p: Pool2d) -> Result<Var> {
    let (y, idx) = x.data().max_pool2d(p)?;
    let shape = x.shape().to_vec();
    Ok(Var::from_op("max_pool2d", y, &[x], move |g| {
        Ok(vec![Some(Tensor::max_pool2d_backward(g, &idx, &shape)?)])
    }))
}

/// `F.avg_pool2d(x, …, count_include_pad)` (f32, `[N, C, H, W]`).
///
/// # Errors
/// As [`Tensor::avg_pool2d`].
pub fn avg_pool2d(x: &Var, p: Pool2d, count_include_pad: bool) -> Result<Var> {
    let y = x.data().avg_pool2d(p, count_include_pad)?;
    let shape = x.shape().to_vec();
    Ok(Var::from_op("avg_pool2d", y, &[x], move |g| {
        Ok(vec![Some(Tensor::avg_pool2d_backward(
            g,
            &shape,
            p,
            count_include_pad,
        )?)])
    }))
}

/// `F.adaptive_avg_pool2d(x, (oh, ow))` (f32, `[N, C, H, W]`).
///
/// # Errors
/// As [`Tensor::adaptive_avg_pool2d`].
pub fn adaptive_avg_pool2d(x: &Var, out_hw: (usize, usize)) -> Result<Var> {
    let y = x.data().adaptive_avg_pool2d(out_hw)?;
    let shape = x.shape().to_vec();
    Ok(Var::from_op("adaptive_avg_pool2d", y, &[x], move |g| {
        Ok(vec![Some(Tensor::adaptive_avg_pool2d_backward(g, &shape)?)])
    }))
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

fn from_f64s(v: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    match dtype {
        DType::F32 => Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), shape),
        _ => Tensor::from_vec(v, shape),
    }
}

fn float_check(op: &'static str, t: &Var) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            expected: DType::F32,
            got: t.dtype(),
        })
    }
}

/// A normalisation's parameter or statistic: shape `shape` and the input's dtype (its
/// gradient, or its update, has that dtype).
fn check_param(
    op: &'static str,
    what: &'static str,
    p: Option<&Var>,
    shape: &[usize],
    x: &Var,
) -> Result<()> {
    if let Some(p) = p
        && (p.shape() != shape || p.dtype() != x.dtype())
    {
        return Err(invalid(
            op,
            what,
            format!(
                "expected {what} of shape {shape:?} and dtype {:?} (the input's, of shape {:?}), got {:?} ({:?})",
                x.dtype(),
                x.shape(),
                p.shape(),
                p.dtype()
            ),
        ));
    }
    Ok(())
}

/// `F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)` for `x`
/// of shape `[N, C, …]`. In training the batch statistics normalise (biased variance) and the
/// running statistics, if given, are updated in place as PyTorch does:
/// `running = (1 − momentum)·running + momentum·stat`, with the unbiased variance. In
/// evaluation the running statistics normalise.
///
/// # Errors
/// `x` with fewer than 2 dimensions, parameters not of shape `[C]`, a training batch with one
/// value per channel ("Expected more than 1 value per channel when training").
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &Var,
    running_mean: Option<&Var>,
    running_var: Option<&Var>,
    weight: Option<&Var>,
    bias: Option<&Var>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> Result<Var> {
    const OP: &str = "batch_norm";
    float_check(OP, x)?;
    if x.ndim() < 2 {
        return Err(invalid(
            OP,
            "input",
            format!(
                "expected at least 2-D input [N, C, ...], got {:?}",
                x.shape()
            ),
        ));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let s: usize = x.shape()[2..].iter().product();
    let m = n * s;
    for (name, p) in [
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ] {
        check_param(OP, name, p, &[c], x)?;
    }
    if training && m <= 1 {
        return Err(invalid(
            OP,
            "input",
            format!(
                "Expected more than 1 value per channel when training, got input size {:?}",
                x.shape()
            ),
        ));
    }
    let running = match (running_mean, running_var) {
        (Some(rm), Some(rv)) => Some((rm.data(), rv.data())),
        _ => None,
    };
    let (weight_t, bias_t) = (weight.map(|w| w.data()), bias.map(|b| b.data()));
    let (y, stats, norm) = BatchNorm::forward(
        &x.data(),
        running.as_ref().map(|(m, v)| (m, v)),
        weight_t.as_ref(),
        bias_t.as_ref(),
        training,
        eps,
    )?;
    if training && let Some(stats) = &stats {
        no_grad(|| {
            update_running_stats(
                running_mean,
                running_var,
                &stats.mean,
                &stats.var_sum,
                m,
                momentum,
            )
        })?;
    }
    let mut inputs = vec![x];
    inputs.extend(weight);
    inputs.extend(bias);
    Ok(Var::from_op(OP, y, &inputs, move |g| norm.backward(g)))
}

/// The running statistics' update of `batch_norm_cpu_update_stats_template`, formula by
/// formula and in the buffers' precision: `momentum·mean + (1 − momentum)·running` and
/// `momentum·var_sum/(m − 1) + (1 − momentum)·running` (the unbiased variance in the
/// accumulation type, `f64`).
fn update_running_stats(
    running_mean: Option<&Var>,
    running_var: Option<&Var>,
    mean: &[f64],
    var_sum: &[f64],
    m: usize,
    momentum: f64,
) -> Result<()> {
    let c = mean.len();
    let unbiased = |var_sum: f64, narrow: bool| {
        let var_sum = if narrow {
            f64::from(var_sum as f32)
        } else {
            var_sum
        };
        var_sum / (m as f64 - 1.0)
    };
    if let Some(rm) = running_mean {
        let new = match rm.dtype() {
            DType::F32 => {
                let mo = momentum as f32;
                let old = rm.data().to_vec::<f32>()?;
                let v: Vec<f32> = old
                    .iter()
                    .zip(mean)
                    .map(|(&r, &mu)| mo * mu as f32 + (1.0 - mo) * r)
                    .collect();
                Tensor::from_vec(v, &[c])?
            }
            _ => {
                let old = f64s(&rm.data());
                let v: Vec<f64> = old
                    .iter()
                    .zip(mean)
                    .map(|(&r, &mu)| momentum * mu + (1.0 - momentum) * r)
                    .collect();
                from_f64s(v, &[c], rm.dtype())?
            }
        };
        rm.set_data(new)?;
    }
    if let Some(rv) = running_var {
        let new = match rv.dtype() {
            DType::F32 => {
                let mo = momentum as f32;
                let old = rv.data().to_vec::<f32>()?;
                let v: Vec<f32> = old
                    .iter()
                    .zip(var_sum)
                    .map(|(&r, &v)| {
                        (f64::from(mo) * unbiased(v, true) + f64::from((1.0 - mo) * r)) as f32
                    })
                    .collect();
                Tensor::from_vec(v, &[c])?
            }
            _ => {
                let old = f64s(&rv.data());
                let v: Vec<f64> = old
                    .iter()
                    .zip(var_sum)
                    .map(|(&r, &v)| momentum * unbiased(v, false) + (1.0 - momentum) * r)
                    .collect();
                from_f64s(v, &[c], rv.dtype())?
            }
        };
        rv.set_data(new)?;
    }
    Ok(())
}

/// `F.layer_norm(x, normalized_shape, weight, bias, eps)`: each row over the last
/// `normalized_shape.len()` dimensions normalised by its mean and biased variance.
///
/// # Errors
/// If `x`'s trailing dimensions are not `normalized_shape`, or weight/bias are not of that
/// shape.
pub fn layer_norm(
    x: &Var,
    normalized_shape: &[usize],
    weight: Option<&Var>,
    bias: Option<&Var>,
    eps: f64,
) -> Result<Var> {
    const OP: &str = "layer_norm";
    float_check(OP, x)?;
    let k = normalized_shape.len();
    if k == 0 || x.ndim() < k || x.shape()[x.ndim() - k..] != *normalized_shape {
        return Err(invalid(
            OP,
            "input",
            format!(
                "Given normalized_shape={normalized_shape:?}, expected input with shape [*, {}], but got input of size {:?}",
                normalized_shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                x.shape()
            ),
        ));
    }
    for (name, p) in [("weight", weight), ("bias", bias)] {
        check_param(OP, name, p, normalized_shape, x)?;
    }
    let l: usize = normalized_shape.iter().product();
    let w = weight.map(|w| f64s(&w.data()));
    let b = bias.map(|b| f64s(&b.data()));
    let xd = x.data().try_contiguous()?;
    let dtype = x.dtype();
    let shape = x.shape().to_vec();
    let (y, stats) = crate::ops::LAYER_NORM.run(&[&xd], |_, par| {
        let (wv, bv) = (w.as_deref(), b.as_deref());
        Ok(match dtype {
            DType::F32 => {
                let (y, st) = ln_forward_par(par, xd.data::<f32>()?, l, wv, bv, eps);
                (Tensor::from_vec(y, &shape)?, st)
            }
            _ => {
                let (y, st) = ln_forward_par(par, xd.data::<f64>()?, l, wv, bv, eps);
                (Tensor::from_vec(y, &shape)?, st)
            }
        })
    })?;
    let ns = normalized_shape.to_vec();
    let mut inputs = vec![x];
    let (has_w, has_b) = (weight.is_some(), bias.is_some());
    inputs.extend(weight);
    inputs.extend(bias);
    Ok(Var::from_op(OP, y, &inputs, move |g| {
        let gc = g.try_contiguous()?;
        let need_wb = has_w || has_b;
        let (gx, (gw, gb)) = crate::ops::LAYER_NORM_BACKWARD.run(&[&gc, &xd], |_, par| {
            let wv = w.as_deref();
            let (gx, gw, gb) = match (dtype, gc.dtype()) {
                (DType::F32, DType::F32) => {
                    let (xs, gs) = (xd.data::<f32>()?, gc.data::<f32>()?);
                    let (gx, gw, gb) = ln_backward_par(par, xs, gs, l, &stats, wv, need_wb);
                    (Tensor::from_vec(gx, &shape)?, gw, gb)
                }
                (DType::F32, _) => {
                    let gs = f64s(&gc);
                    let xs = xd.data::<f32>()?;
                    let (gx, gw, gb) = ln_backward_par(par, xs, &gs, l, &stats, wv, need_wb);
                    (Tensor::from_vec(gx, &shape)?, gw, gb)
                }
                _ => {
                    let gs = f64s(&gc);
                    let xs = xd.data::<f64>()?;
                    let (gx, gw, gb) = ln_backward_par(par, xs, &gs, l, &stats, wv, need_wb);
                    (Tensor::from_vec(gx, &shape)?, gw, gb)
                }
            };
            Ok((gx, (gw, gb)))
        })?;
        let mut out = vec![Some(gx)];
        if has_w {
            out.push(Some(from_f64s(gw, &ns, dtype)?));
        }
        if has_b {
            out.push(Some(from_f64s(gb, &ns, dtype)?));
        }
        Ok(out)
    }))
}

/// `F.embedding(indices, weight, padding_idx)`: rows of the `[V, D]` weight for `i64`
/// indices of any shape. The weight's gradient adds rows in token order (deterministic);
/// the `padding_idx` row gets none.
///
/// # Errors
/// A weight that is not 2-D, non-`i64` indices or an index outside `0..V`.
pub fn embedding(indices: &Tensor, weight: &Var, padding_idx: Option<usize>) -> Result<Var> {
    let w = weight.data();
    let y = w.embedding(indices)?;
    let idx = indices.clone();
    let v = w.shape()[0];
    Ok(Var::from_op("embedding", y, &[weight], move |g| {
        let mut gw = Tensor::embedding_backward(g, &idx, v)?;
        if let Some(p) = padding_idx
            && p < v
        {
            let d = gw.shape()[1];
            let mut rows = Vec::with_capacity(3);
            if p > 0 {
                rows.push(gw.narrow(0, 0, p)?);
            }
            rows.push(Tensor::zeros(&[1, d], gw.dtype())?);
            if p + 1 < v {
                rows.push(gw.narrow(0, p + 1, v - p - 1)?);
            }
            gw = Tensor::cat(&rows, 0)?;
        }
        Ok(vec![Some(gw)])
    }))
}

/// How a loss combines its per-sample values (`reduction=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// One value per sample.
    None,
    /// The (weighted) mean — PyTorch's default.
    #[default]
    Mean,
    /// The sum.
    Sum,
}

impl core::str::FromStr for Reduction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Self::None),
            "mean" => Ok(Self::Mean),
            "sum" => Ok(Self::Sum),
            _ => Err(invalid(
                "loss",
                "reduction",
                format!("{s} is not a valid value for reduction (none, mean, sum)"),
            )),
        }
    }
}

/// The input as rows `[M, C]` and the targets as `[M]` class indices, for an input `[C]`
/// (target `[]`), `[N, C]` (target `[N]`) or `[N, C, d1, …, dk]` (target `[N, d1, …, dk]`,
/// the class dimension moved last), with the shape of an unreduced loss.
fn class_rows(
    op: &'static str,
    input: &Var,
    target: &Tensor,
) -> Result<(Var, Vec<i64>, Vec<usize>)> {
    float_check(op, input)?;
    if target.dtype() != DType::I64 {
        // Named, as PyTorch's message points at the target ("expected scalar type Long").
        return Err(invalid(
            op,
            "target",
            format!(
                "expected a target of class indices of dtype I64 (torch.long), got {:?}",
                target.dtype()
            ),
        ));
    }
    let shape = input.shape().to_vec();
    let want: Vec<usize> = match shape.len() {
        0 => Vec::new(),
        1 => Vec::new(),
        _ => shape[..1].iter().chain(&shape[2..]).copied().collect(),
    };
    if shape.is_empty() || target.shape() != want.as_slice() {
        return Err(invalid(
            op,
            "target",
            format!(
                "expected an input of shape [C], [N, C] or [N, C, d1, ...] and a target of shape {want:?} (one class index per position; the input without its class dimension), got input {shape:?} and target {:?}",
                target.shape()
            ),
        ));
    }
    let t = target.try_contiguous()?.to_vec::<i64>()?;
    let rows = match shape.len() {
        1 => input.unsqueeze(0)?,
        2 => input.clone(),
        k => {
            let mut perm: Vec<isize> = vec![0];
            perm.extend((2..k as isize).chain([1]));
            input.permute(&perm)?.reshape(&[-1, shape[1] as isize])?
        }
    };
    Ok((rows, t, want))
}

fn check_class(op: &'static str, t: i64, c: usize, ignore: i64, shape: &[usize]) -> Result<()> {
    if t != ignore && (t < 0 || t as u64 >= c as u64) {
        return Err(invalid(
            op,
            "target",
            format!(
                "Target {t} is out of bounds: the input of shape {shape:?} has {c} classes (valid targets 0..{c}, or ignore_index {ignore})"
            ),
        ));
    }
    Ok(())
}

/// Options of [`nll_loss_with`] beyond the inputs (PyTorch's defaults by `Default`).
#[derive(Clone, Debug)]
pub struct NllLoss {
    /// A weight per class (`weight=`).
    pub weight: Option<Tensor>,
    /// A target value that contributes nothing (`ignore_index=`, default −100).
    pub ignore_index: i64,
    /// `reduction=` (default mean).
    pub reduction: Reduction,
}

impl Default for NllLoss {
    fn default() -> Self {
        Self {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// `F.nll_loss(log_probs, target)` with PyTorch's defaults (no weight, `ignore_index` −100,
/// mean).
///
/// # Errors
/// As [`nll_loss_with`].
pub fn nll_loss(log_probs: &Var, target: &Tensor) -> Result<Var> {
    nll_loss_with(log_probs, target, &NllLoss::default())
}

/// `F.nll_loss(log_probs, target, weight, ignore_index, reduction)` for `log_probs` `[N, C]`
/// and `i64` targets `[N]` (or `[C]` and `[]`, or `[N, C, d1, …]` and `[N, d1, …]`). The mean
/// divides by the sum of the targets' weights.
///
/// # Errors
/// Shapes that do not fit, a `target` that is not `i64` or outside `0..C` (other than
/// `ignore_index`); each names `target`.
pub fn nll_loss_with(log_probs: &Var, target: &Tensor, o: &NllLoss) -> Result<Var> {
    const OP: &str = "nll_loss";
    let reduction = o.reduction;
    let (rows, t, out_shape) = class_rows(OP, log_probs, target)?;
    let loss = nll_rows(
        OP,
        &rows,
        log_probs.shape(),
        &t,
        o.weight.as_ref(),
        o.ignore_index,
        reduction,
    )?;
    unrows(loss, reduction, &out_shape)
}

/// An unreduced loss over rows back to the target's shape.
fn unrows(loss: Var, reduction: Reduction, out_shape: &[usize]) -> Result<Var> {
    if reduction == Reduction::None && loss.shape() != out_shape {
        let s: Vec<isize> = out_shape.iter().map(|&d| d as isize).collect();
        return loss.reshape(&s);
    }
    Ok(loss)
}

/// `nll_loss` on rows `[N, C]` with targets `[N]` (`shape`: the caller's input shape, for
/// messages).
fn nll_rows(
    op: &'static str,
    log_probs: &Var,
    shape: &[usize],
    t: &[i64],
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
) -> Result<Var> {
    let (n, c) = (log_probs.shape()[0], log_probs.shape()[1]);
    let t = t.to_vec();
    let w = match weight {
        Some(w) if w.shape() != [c] => {
            return Err(invalid(
                op,
                "weight",
                format!(
                    "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}",
                    w.shape()
                ),
            ));
        }
        Some(w) => Some(w.to_f64_vec()),
        None => None,
    };
    let lp = f64s(&log_probs.data());
    let mut per = vec![0.0; n];
    let mut wsum = 0.0;
    let mut wi = vec![0.0; n];
    for i in 0..n {
        check_class(op, t[i], c, ignore_index, shape)?;
        if t[i] == ignore_index {
            continue;
        }
        let ti = t[i] as usize;
        let wt = w.as_ref().map_or(1.0, |w| w[ti]);
        wi[i] = wt;
        per[i] = -wt * lp[i * c + ti];
        wsum += wt;
    }
    let dtype = log_probs.dtype();
    let value = match reduction {
        Reduction::None => from_f64s(per, &[n], dtype)?,
        Reduction::Sum => from_f64s(vec![per.iter().sum()], &[], dtype)?,
        Reduction::Mean => from_f64s(vec![per.iter().sum::<f64>() / wsum], &[], dtype)?,
    };
    Ok(Var::from_op(op, value, &[log_probs], move |g| {
        let gs = f64s(g);
        let mut gx = vec![0.0; n * c];
        for i in 0..n {
            if t[i] == ignore_index {
                continue;
            }
            let gi = match reduction {
                Reduction::None => gs[i],
                Reduction::Sum => gs[0],
                Reduction::Mean => gs[0] / wsum,
            };
            gx[i * c + t[i] as usize] = -wi[i] * gi;
        }
        Ok(vec![Some(from_f64s(gx, &[n, c], dtype)?)])
    }))
}

/// Options of [`cross_entropy`] beyond the inputs (PyTorch's defaults by `Default`).
#[derive(Clone, Debug)]
pub struct CrossEntropy {
    /// A weight per class (`weight=`).
    pub weight: Option<Tensor>,
    /// A target value that contributes nothing (`ignore_index=`, default −100).
    pub ignore_index: i64,
    /// `label_smoothing=` in `[0, 1]`.
    pub label_smoothing: f64,
    /// `reduction=`.
    pub reduction: Reduction,
}

impl Default for CrossEntropy {
    fn default() -> Self {
        Self {
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            reduction: Reduction::Mean,
        }
    }
}

/// `F.cross_entropy(logits, target)` with class indices and PyTorch's defaults.
///
/// # Errors
/// As [`cross_entropy_with`].
pub fn cross_entropy(logits: &Var, target: &Tensor) -> Result<Var> {
    cross_entropy_with(logits, target, &CrossEntropy::default())
}

/// `F.cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing)` for
/// logits `[N, C]` and `i64` class indices `[N]` (or logits `[C]` and a target `[]`, or
/// `[N, C, d1, …]` and `[N, d1, …]`): `nll_loss(log_softmax(logits, 1))`, and with
/// label smoothing `ε` PyTorch's `(1 − ε)·nll + ε/C · smooth` where `smooth` is the
/// (weighted) sum of `−log p` over classes, reduced like the nll term.
///
/// # Errors
/// Shapes that do not fit (the message names both), a target outside `0..C` (other than
/// `ignore_index`), `label_smoothing` outside `[0, 1]`.
pub fn cross_entropy_with(logits: &Var, target: &Tensor, o: &CrossEntropy) -> Result<Var> {
    const OP: &str = "cross_entropy";
    if !(0.0..=1.0).contains(&o.label_smoothing) {
        return Err(invalid(
            OP,
            "label_smoothing",
            format!(
                "label_smoothing must be between 0.0 and 1.0. Got: {}",
                o.label_smoothing
            ),
        ));
    }
    let (rows, t, out_shape) = class_rows(OP, logits, target)?;
    let logp = rows.log_softmax(1)?;
    let nll = nll_rows(
        OP,
        &logp,
        logits.shape(),
        &t,
        o.weight.as_ref(),
        o.ignore_index,
        o.reduction,
    )?;
    if o.label_smoothing == 0.0 {
        return unrows(nll, o.reduction, &out_shape);
    }
    let (n, c) = (rows.shape()[0], rows.shape()[1]);
    let dtype = logits.dtype();
    let keep: Vec<f64> = t
        .iter()
        .map(|&ti| if ti == o.ignore_index { 0.0 } else { 1.0 })
        .collect();
    let keep_t = Var::constant(from_f64s(keep.clone(), &[n], dtype)?);
    let weighted = match &o.weight {
        Some(w) => logp.mul(&Var::constant(w.to_dtype(dtype).reshape(&[1, c as isize])?))?,
        None => logp.clone(),
    };
    let smooth = weighted.sum_dim(1, false)?.neg()?.mul(&keep_t)?;
    let smooth = match o.reduction {
        Reduction::None => smooth,
        Reduction::Sum => smooth.sum()?,
        Reduction::Mean => {
            let denom: f64 = match &o.weight {
                Some(w) => {
                    let wv = w.to_f64_vec();
                    t.iter()
                        .filter(|&&ti| ti != o.ignore_index)
                        .map(|&ti| wv[ti as usize])
                        .sum()
                }
                None => keep.iter().sum(),
            };
            smooth.sum()?.div_scalar(denom)?
        }
    };
    let eps = o.label_smoothing;
    let loss = nll
        .mul_scalar(1.0 - eps)?
        .add(&smooth.mul_scalar(eps / c as f64)?)?;
    unrows(loss, o.reduction, &out_shape)
}

/// `F.mse_loss(input, target, reduction)`: `(input − target)²`, reduced.
///
/// # Errors
/// Shapes that do not broadcast; non-float dtype.
pub fn mse_loss(input: &Var, target: &Var, reduction: Reduction) -> Result<Var> {
    lockstep_tensor::ops::elementwise::broadcast_shapes("mse_loss", input.shape(), target.shape())?;
    if input.dtype() != target.dtype() {
        return Err(invalid(
            "mse_loss",
            "target",
            format!(
                "expected a target of the input's dtype {:?}, got {:?}",
                input.dtype(),
                target.dtype()
            ),
        ));
    }
    let d = input.sub(target)?;
    let sq = d.mul(&d)?;
    match reduction {
        Reduction::None => Ok(sq),
        Reduction::Sum => sq.sum(),
        Reduction::Mean => sq.mean(),
    }
}

/// `F.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)`, in
/// PyTorch's stable form `(1 − t)·x + (1 + (pw − 1)·t)·(log1p(exp(−|x|)) + max(−x, 0))`,
/// computed per element in f64.
///
/// # Errors
/// A `target` not of `input`'s shape, `weight` or `pos_weight` that do not broadcast to it,
/// dtypes that differ from `input`'s.
pub fn binary_cross_entropy_with_logits(
    input: &Var,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Var> {
    const OP: &str = "binary_cross_entropy_with_logits";
    float_check(OP, input)?;
    let shape = input.shape().to_vec();
    let full = |t: &Tensor, arg: &'static str| -> Result<Vec<f64>> {
        if t.dtype() != input.dtype() {
            return Err(invalid(
                OP,
                arg,
                format!(
                    "expected the input's dtype {:?}, got {:?}",
                    input.dtype(),
                    t.dtype()
                ),
            ));
        }
        let s = lockstep_tensor::ops::elementwise::broadcast_shapes(OP, t.shape(), &shape)?;
        if s != shape {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: t.shape().to_vec(),
                rhs: shape.clone(),
            });
        }
        Ok(f64s(&crate::ops::expand_to(t, &shape)?))
    };
    if target.shape() != shape.as_slice() {
        return Err(invalid(
            OP,
            "target",
            format!(
                "Target size ({:?}) must be the same as input size ({shape:?})",
                target.shape()
            ),
        ));
    }
    let x = f64s(&input.data());
    let t = full(target, "target")?;
    let w = weight.map(|w| full(w, "weight")).transpose()?;
    let pw = pos_weight.map(|p| full(p, "pos_weight")).transpose()?;
    let k = x.len();
    let mut per = vec![0.0; k];
    let mut grad = vec![0.0; k];
    for i in 0..k {
        let lw = pw.as_ref().map_or(1.0, |p| 1.0 + (p[i] - 1.0) * t[i]);
        let sp = math::ln_1p(math::exp(-x[i].abs())) + (-x[i]).max(0.0);
        let wi = w.as_ref().map_or(1.0, |w| w[i]);
        per[i] = wi * ((1.0 - t[i]) * x[i] + lw * sp);
        // d/dx: (1 − t) − lw · sigmoid(−x)
        grad[i] = wi * ((1.0 - t[i]) - lw / (1.0 + math::exp(x[i])));
    }
    let dtype = input.dtype();
    let value = match reduction {
        Reduction::None => from_f64s(per, &shape, dtype)?,
        Reduction::Sum => from_f64s(vec![per.iter().sum()], &[], dtype)?,
        Reduction::Mean => from_f64s(vec![per.iter().sum::<f64>() / k as f64], &[], dtype)?,
    };
    Ok(Var::from_op(OP, value, &[input], move |g| {
        let gs = f64s(g);
        let gx: Vec<f64> = (0..k)
            .map(|i| {
                grad[i]
                    * match reduction {
                        Reduction::None => gs[i],
                        Reduction::Sum => gs[0],
                        Reduction::Mean => gs[0] / k as f64,
                    }
            })
            .collect();
        Ok(vec![Some(from_f64s(gx, &shape, dtype)?)])
    }))
}

/// The elements of a float tensor as `T` (a convenience for tests and reports).
///
/// # Errors
/// If `T` is not the tensor's dtype.
pub fn values<T: Element>(t: &Tensor) -> Result<Vec<T>> {
    t.to_vec::<T>()
}

// ---------------------------------------------------------------------------------------------
// Activations and pointwise losses of issue 27 (PyTorch's example programs).

/// Causal attention weights from raw scores `x` (`[..., T, T]`, float):
/// `(x · scale).masked_fill(mask, −∞).softmax(−1)` with `mask` true above the diagonal
/// (nanoGPT's explicit attention path), as one op forward ([`Tensor::causal_softmax`]) and one
/// backward ([`Tensor::causal_softmax_backward`]). The value and the gradient have exactly the
/// bits of those three ops chained (tested), with no intermediate tensors.
///
/// # Errors
/// Fewer than 2 dimensions; a dtype that is not float.
pub fn causal_softmax(x: &Var, scale: f64) -> Result<Var> {
    let y = x.data().causal_softmax(scale)?;
    let out = y.clone();
    Ok(Var::from_op("causal_softmax", y, &[x], move |g| {
        Ok(vec![Some(g.causal_softmax_backward(&out, scale)?)])
    }))
}

/// `F.leaky_relu(x, negative_slope)`: `x` where `x > 0`, else `x · negative_slope` (PyTorch's
/// kernel, in the tensor's dtype: the same bits). The gradient is `g` where `x > 0`, else
/// `g · negative_slope`, as PyTorch's `leaky_relu_backward`. Both are one fused tensor op
/// through dispatch ([`Tensor::leaky_relu`], [`Tensor::leaky_relu_backward`]), with the bits
/// of `where(x > 0, x, x · s)`: deterministic at any thread count.
///
/// # Errors
/// A dtype that is not float.
pub fn leaky_relu(x: &Var, negative_slope: f64) -> Result<Var> {
    float_check("leaky_relu", x)?;
    let xt = x.data();
    let y = xt.leaky_relu(negative_slope)?;
    Ok(Var::from_op("leaky_relu", y, &[x], move |g| {
        Ok(vec![Some(Tensor::leaky_relu_backward(
            g,
            &xt,
            negative_slope,
        )?)])
    }))
}

/// `F.silu(x)` (swish): `x / (1 + exp(−x))`, PyTorch's formula in the tensor's dtype (the
/// portable `exp`, so values may differ from PyTorch's vectorised `exp` in the last bit). The
/// gradient is PyTorch's `silu_backward`: `g · s · (1 + x · (1 − s))` with
/// `s = 1 / (1 + exp(−x))`. Tensor ops through dispatch: deterministic at any thread count.
///
/// # Errors
/// A dtype that is not float.
pub fn silu(x: &Var) -> Result<Var> {
    float_check("silu", x)?;
    let xt = x.data();
    let den = xt.neg()?.exp()?.add_scalar(1.0)?;
    let y = xt.div(&den)?;
    Ok(Var::from_op("silu", y, &[x], move |g| {
        let one = Tensor::ones(&[], den.dtype())?;
        let s = one.div(&den)?;
        let right = xt.mul(&one.sub(&s)?)?.add_scalar(1.0)?;
        Ok(vec![Some(g.mul(&s)?.mul(&right)?)])
    }))
}

/// A float tensor's elements mapped one by one in its own precision: `f32` elements by `f`,
/// `f64` elements by `d` (for the ops whose PyTorch kernel has no tensor-op composition here).
fn map_float(
    t: &Tensor,
    f: impl Fn(usize, f32) -> f32,
    d: impl Fn(usize, f64) -> f64,
) -> Result<Tensor> {
    let t = t.try_contiguous()?;
    match t.dtype() {
        DType::F32 => {
            let v: Vec<f32> = t
                .data::<f32>()?
                .iter()
                .enumerate()
                .map(|(i, &x)| f(i, x))
                .collect();
            Tensor::from_vec(v, t.shape())
        }
        _ => {
            let v: Vec<f64> = t
                .data::<f64>()?
                .iter()
                .enumerate()
                .map(|(i, &x)| d(i, x))
                .collect();
            Tensor::from_vec(v, t.shape())
        }
    }
}

/// `F.softplus(x, beta, threshold)`: `log1p(exp(β·x)) / β`, or `x` where `β·x > threshold`
/// (PyTorch's defaults: β = 1, threshold = 20), per element in the tensor's own precision
/// with the portable `exp` and `log1p`. The gradient is PyTorch's `softplus_backward`:
/// `g · z / (z + 1)` with `z = exp(β·x)`, or `g` above the threshold.
///
/// # Errors
/// A dtype that is not float, or β = 0.
pub fn softplus(x: &Var, beta: f64, threshold: f64) -> Result<Var> {
    const OP: &str = "softplus";
    float_check(OP, x)?;
    if beta == 0.0 || !beta.is_finite() {
        return Err(invalid(
            OP,
            "beta",
            format!("expected a finite, nonzero beta, got {beta}"),
        ));
    }
    let xt = x.data().try_contiguous()?;
    let (b32, t32) = (beta as f32, threshold as f32);
    let y = map_float(
        &xt,
        |_, x| {
            if x * b32 > t32 {
                x
            } else {
                math::ln_1pf(math::expf(x * b32)) / b32
            }
        },
        |_, x| {
            if x * beta > threshold {
                x
            } else {
                math::ln_1p(math::exp(x * beta)) / beta
            }
        },
    )?;
    Ok(Var::from_op(OP, y, &[x], move |g| {
        let g = g.try_contiguous()?;
        let (g32, g64) = match g.dtype() {
            DType::F32 => (g.data::<f32>()?.to_vec(), Vec::new()),
            _ => (Vec::new(), g.data::<f64>()?.to_vec()),
        };
        Ok(vec![Some(map_float(
            &xt,
            |i, x| {
                let z = math::expf(x * b32);
                if x * b32 > t32 {
                    g32[i]
                } else {
                    g32[i] * z / (z + 1.0)
                }
            },
            |i, x| {
                let z = math::exp(x * beta);
                if x * beta > threshold {
                    g64[i]
                } else {
                    g64[i] * z / (z + 1.0)
                }
            },
        )?)])
    }))
}

/// A pointwise loss: `f(i, x, t)` gives the per-element value and its derivatives with
/// respect to `x` and `t`, in f64; the result is reduced in f64 in index order (the mean
/// divides by the element count, or by `mean_denominator` where given) and rounded once to
/// the input's dtype. `target` gets a gradient when it is a `Var` that requires one.
#[allow(clippy::too_many_arguments)]
fn pointwise_loss(
    op: &'static str,
    input: &Var,
    target: &Tensor,
    target_var: Option<&Var>,
    reduction: Reduction,
    mean_denominator: Option<f64>,
    f: impl Fn(usize, f64, f64) -> (f64, f64, f64),
) -> Result<Var> {
    float_check(op, input)?;
    if target.dtype() != input.dtype() {
        return Err(invalid(
            op,
            "target",
            format!(
                "expected a target of the input's dtype {:?}, got {:?}",
                input.dtype(),
                target.dtype()
            ),
        ));
    }
    if target.shape() != input.shape() {
        return Err(invalid(
            op,
            "target",
            format!(
                "Using a target size ({:?}) that is different to the input size ({:?}) is not supported",
                target.shape(),
                input.shape()
            ),
        ));
    }
    let shape = input.shape().to_vec();
    let x = f64s(&input.data());
    let t = f64s(target);
    let k = x.len();
    let mut per = Vec::with_capacity(k);
    let mut dx = Vec::with_capacity(k);
    let mut dt = Vec::with_capacity(k);
    for i in 0..k {
        let (v, a, b) = f(i, x[i], t[i]);
        per.push(v);
        dx.push(a);
        dt.push(b);
    }
    let denom = mean_denominator.unwrap_or(k as f64);
    let dtype = input.dtype();
    let value = match reduction {
        Reduction::None => from_f64s(per, &shape, dtype)?,
        Reduction::Sum => from_f64s(vec![per.iter().sum()], &[], dtype)?,
        Reduction::Mean => from_f64s(vec![per.iter().sum::<f64>() / denom], &[], dtype)?,
    };
    let mut inputs = vec![input];
    inputs.extend(target_var);
    let with_target = target_var.is_some();
    Ok(Var::from_op(op, value, &inputs, move |g| {
        let gs = f64s(g);
        let scale = |i: usize| match reduction {
            Reduction::None => gs[i],
            Reduction::Sum => gs[0],
            Reduction::Mean => gs[0] / denom,
        };
        let gx: Vec<f64> = (0..k).map(|i| dx[i] * scale(i)).collect();
        let mut out = vec![Some(from_f64s(gx, &shape, dtype)?)];
        if with_target {
            let gt: Vec<f64> = (0..k).map(|i| dt[i] * scale(i)).collect();
            out.push(Some(from_f64s(gt, &shape, dtype)?));
        }
        Ok(out)
    }))
}

/// Options of [`binary_cross_entropy_with`] (PyTorch's defaults by `Default`).
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossEntropy {
    /// A weight per element, broadcast to the input's shape (`weight=`).
    pub weight: Option<Tensor>,
    /// `reduction=` (default mean).
    pub reduction: Reduction,
}

/// `F.binary_cross_entropy(input, target)` with PyTorch's defaults (no weight, mean).
///
/// # Errors
/// As [`binary_cross_entropy_with`].
pub fn binary_cross_entropy(input: &Var, target: &Tensor) -> Result<Var> {
    binary_cross_entropy_with(input, target, &BinaryCrossEntropy::default())
}

/// `F.binary_cross_entropy(input, target, weight, reduction)` for probabilities `input` in
/// `[0, 1]`: `w · ((t − 1)·max(log(1 − x), −100) − t·max(log x, −100))` per element (PyTorch
/// clamps each log at −100, so a probability of exactly 0 or 1 gives a finite loss), in f64,
/// reduced in index order and rounded once. The gradient is PyTorch's:
/// `w · g · (x − t) / max((1 − x)·x, ε)` with ε the `f32` value of 1e−12. The target gets no gradient.
///
/// # Errors
/// A `target` or `weight` whose dtype is not the input's, a `target` not of the input's shape,
/// a `weight` that does not broadcast to it, an input element outside `[0, 1]`.
pub fn binary_cross_entropy_with(
    input: &Var,
    target: &Tensor,
    o: &BinaryCrossEntropy,
) -> Result<Var> {
    const OP: &str = "binary_cross_entropy";
    float_check(OP, input)?;
    let shape = input.shape().to_vec();
    let w = match &o.weight {
        Some(w) => {
            if w.dtype() != input.dtype() {
                return Err(invalid(
                    OP,
                    "weight",
                    format!(
                        "expected the input's dtype {:?}, got {:?}",
                        input.dtype(),
                        w.dtype()
                    ),
                ));
            }
            let s = lockstep_tensor::ops::elementwise::broadcast_shapes(OP, w.shape(), &shape);
            if s.ok().as_ref() != Some(&shape) {
                return Err(invalid(
                    OP,
                    "weight",
                    format!(
                        "a weight of shape {:?} does not broadcast to the input's shape {shape:?}",
                        w.shape()
                    ),
                ));
            }
            Some(f64s(&crate::ops::expand_to(w, &shape)?))
        }
        None => None,
    };
    if let Some(bad) = f64s(&input.data())
        .into_iter()
        .find(|x| !(0.0..=1.0).contains(x))
    {
        return Err(invalid(
            OP,
            "input",
            format!("all elements of input should be between 0 and 1, found {bad}"),
        ));
    }
    pointwise_loss(OP, input, target, None, o.reduction, None, |i, x, t| {
        let wi = w.as_ref().map_or(1.0, |w| w[i]);
        let v = (t - 1.0) * math::ln_1p(-x).max(-100.0) - t * math::ln(x).max(-100.0);
        // PyTorch's EPSILON is the f32 constant 1e-12.
        let d = (x - t) / ((1.0 - x) * x).max(f64::from(1e-12f32));
        (wi * v, wi * d, 0.0)
    })
}

/// `F.l1_loss(input, target, reduction)`: `|x − t|`, reduced. The gradient is
/// `sign(x − t)` (0 where they are equal) for the input and its negation for the target.
///
/// # Errors
/// A target of another shape or dtype; a non-float dtype.
pub fn l1_loss(input: &Var, target: &Var, reduction: Reduction) -> Result<Var> {
    pointwise_loss(
        "l1_loss",
        input,
        &target.data(),
        Some(target),
        reduction,
        None,
        |_, x, t| {
            let d = x - t;
            let s = if d > 0.0 {
                1.0
            } else if d < 0.0 {
                -1.0
            } else {
                0.0
            };
            (d.abs(), s, -s)
        },
    )
}

/// Options of [`smooth_l1_loss_with`] (PyTorch's defaults by `Default`: mean, β = 1).
#[derive(Clone, Copy, Debug)]
pub struct SmoothL1Loss {
    /// `reduction=`.
    pub reduction: Reduction,
    /// `beta=` (≥ 0): below it the loss is quadratic; 0 makes it [`l1_loss`].
    pub beta: f64,
}

impl Default for SmoothL1Loss {
    fn default() -> Self {
        Self {
            reduction: Reduction::Mean,
            beta: 1.0,
        }
    }
}

/// `F.smooth_l1_loss(input, target)` with PyTorch's defaults.
///
/// # Errors
/// As [`smooth_l1_loss_with`].
pub fn smooth_l1_loss(input: &Var, target: &Var) -> Result<Var> {
    smooth_l1_loss_with(input, target, &SmoothL1Loss::default())
}

/// `F.smooth_l1_loss(input, target, reduction, beta)`: with `d = x − t`, `½·d²/β` where
/// `|d| < β`, else `|d| − ½·β`; β = 0 is [`l1_loss`], as in PyTorch. Gradients for the input
/// and the target (`d/β`, or `±1` outside).
///
/// # Errors
/// A negative or non-finite `beta`; a target of another shape or dtype.
pub fn smooth_l1_loss_with(input: &Var, target: &Var, o: &SmoothL1Loss) -> Result<Var> {
    const OP: &str = "smooth_l1_loss";
    let beta = o.beta;
    if !(beta >= 0.0 && beta.is_finite()) {
        return Err(invalid(
            OP,
            "beta",
            format!("smooth_l1_loss does not support negative values for beta, got {beta}"),
        ));
    }
    if beta == 0.0 {
        return l1_loss(input, target, o.reduction);
    }
    pointwise_loss(
        OP,
        input,
        &target.data(),
        Some(target),
        o.reduction,
        None,
        |_, x, t| {
            let d = x - t;
            let (v, g) = if d.abs() < beta {
                (0.5 * d * d / beta, d / beta)
            } else {
                (d.abs() - 0.5 * beta, if d > 0.0 { 1.0 } else { -1.0 })
            };
            (v, g, -g)
        },
    )
}

/// Options of [`huber_loss_with`] (PyTorch's defaults by `Default`: mean, δ = 1).
#[derive(Clone, Copy, Debug)]
pub struct HuberLoss {
    /// `reduction=`.
    pub reduction: Reduction,
    /// `delta=` (> 0): below it the loss is quadratic.
    pub delta: f64,
}

impl Default for HuberLoss {
    fn default() -> Self {
        Self {
            reduction: Reduction::Mean,
            delta: 1.0,
        }
    }
}

/// `F.huber_loss(input, target)` with PyTorch's defaults.
///
/// # Errors
/// As [`huber_loss_with`].
pub fn huber_loss(input: &Var, target: &Var) -> Result<Var> {
    huber_loss_with(input, target, &HuberLoss::default())
}

/// `F.huber_loss(input, target, reduction, delta)`: with `d = x − t`, `½·d²` where
/// `|d| < δ`, else `δ·(|d| − ½·δ)`. Gradients for the input and the target (`d`, or `±δ`
/// outside).
///
/// # Errors
/// A `delta` that is not positive and finite; a target of another shape or dtype.
pub fn huber_loss_with(input: &Var, target: &Var, o: &HuberLoss) -> Result<Var> {
    const OP: &str = "huber_loss";
    let delta = o.delta;
    if !(delta > 0.0 && delta.is_finite()) {
        return Err(invalid(
            OP,
            "delta",
            format!("huber_loss does not support non-positive values for delta, got {delta}"),
        ));
    }
    pointwise_loss(
        OP,
        input,
        &target.data(),
        Some(target),
        o.reduction,
        None,
        |_, x, t| {
            let d = x - t;
            let (v, g) = if d.abs() < delta {
                (0.5 * d * d, d)
            } else {
                (
                    delta * (d.abs() - 0.5 * delta),
                    if d > 0.0 { delta } else { -delta },
                )
            };
            (v, g, -g)
        },
    )
}

/// `reduction=` of [`kl_div_with`]: [`Reduction`]'s three and `batchmean`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlReduction {
    /// One value per element.
    None,
    /// The mean over every element (PyTorch's default, which PyTorch warns about).
    #[default]
    Mean,
    /// The sum divided by the batch size (the first dimension): the KL divergence's definition.
    BatchMean,
    /// The sum.
    Sum,
}

/// Options of [`kl_div_with`] (PyTorch's defaults by `Default`: mean, `log_target` false).
#[derive(Clone, Copy, Debug, Default)]
pub struct KlDiv {
    /// `reduction=`.
    pub reduction: KlReduction,
    /// `log_target=`: the target holds log-probabilities.
    pub log_target: bool,
}

/// `F.kl_div(input, target)` with PyTorch's defaults.
///
/// # Errors
/// As [`kl_div_with`].
pub fn kl_div(input: &Var, target: &Tensor) -> Result<Var> {
    kl_div_with(input, target, &KlDiv::default())
}

/// `F.kl_div(input, target, reduction, log_target)` for log-probabilities `input`:
/// `t·(log t − x)` per element (0 where `t` = 0, PyTorch's `xlogy`), or with `log_target`
/// `exp(t)·(t − x)`; in f64, reduced in index order and rounded once. The input's gradient is
/// `−t` (`−exp(t)`); the target gets none.
///
/// # Errors
/// A target of another shape or dtype; a non-float dtype; `batchmean` on a 0-d input.
pub fn kl_div_with(input: &Var, target: &Tensor, o: &KlDiv) -> Result<Var> {
    const OP: &str = "kl_div";
    let (reduction, denom) = match o.reduction {
        KlReduction::None => (Reduction::None, None),
        KlReduction::Mean => (Reduction::Mean, None),
        KlReduction::Sum => (Reduction::Sum, None),
        KlReduction::BatchMean => {
            let Some(&b) = input.shape().first() else {
                return Err(invalid(
                    OP,
                    "reduction",
                    "batchmean needs an input with a batch dimension, got a 0-d input",
                ));
            };
            (Reduction::Mean, Some(b as f64))
        }
    };
    let log_target = o.log_target;
    pointwise_loss(OP, input, target, None, reduction, denom, |_, x, t| {
        if log_target {
            let e = math::exp(t);
            (e * (t - x), -e, 0.0)
        } else {
            let xlogy = if t == 0.0 { 0.0 } else { t * math::ln(t) };
            (xlogy - t * x, -t, 0.0)
        }
    })
}

/// Stride, padding, dilation and groups of a 1-D convolution (PyTorch's arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dParams {
    /// Default 1.
    pub stride: usize,
    /// Zeros added on both sides, default 0.
    pub padding: usize,
    /// Default 1.
    pub dilation: usize,
    /// Channel groups, default 1.
    pub groups: usize,
}

impl Default for Conv1dParams {
    fn default() -> Self {
        Self {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

impl Conv1dParams {
    /// The same convolution as a 2-D one over a unit height.
    fn as_2d(self) -> Conv2dParams {
        Conv2dParams {
            stride: (1, self.stride),
            padding: (0, self.padding),
            dilation: (1, self.dilation),
            groups: self.groups,
        }
    }
}

/// `F.conv1d(x, weight, bias, stride, padding, dilation, groups)` (f32): `x` `[N, Cin, L]`,
/// weight `[Cout, Cin/groups, k]`, bias `[Cout]`. Runs as [`conv2d`] over a unit height
/// (`[N, Cin, 1, L]`, kernel `1 × k`): the same kernels, deterministic, and gradients through
/// the views.
///
/// # Errors
/// An input or weight that is not 3-D; otherwise as [`Tensor::conv2d`].
pub fn conv1d(x: &Var, weight: &Var, bias: Option<&Var>, p: Conv1dParams) -> Result<Var> {
    const OP: &str = "conv1d";
    if x.ndim() != 3 {
        return Err(invalid(
            OP,
            "input",
            format!("expected input of shape [N, C_in, L], got {:?}", x.shape()),
        ));
    }
    if weight.ndim() != 3 {
        return Err(invalid(
            OP,
            "weight",
            format!(
                "expected weight of shape [C_out, C_in/groups, k], got {:?}",
                weight.shape()
            ),
        ));
    }
    conv2d(&x.unsqueeze(2)?, &weight.unsqueeze(2)?, bias, p.as_2d())?.squeeze(2)
}

/// `F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)`
/// (f32): `x` `[N, Cin, H, W]`, weight `[Cin, Cout/groups, kh, kw]`, bias `[Cout]`; see
/// [`Tensor::conv_transpose2d`]. The input's gradient is `conv2d(g, weight)`, the weight's is
/// conv2d's weight gradient with the output gradient as the convolution's input and `x` as
/// its output gradient: the convolution's own kernels (deterministic ones in deterministic
/// mode).
///
/// # Errors
/// As [`Tensor::conv_transpose2d`].
pub fn conv_transpose2d(
    x: &Var,
    weight: &Var,
    bias: Option<&Var>,
    p: Conv2dParams,
    output_padding: (usize, usize),
) -> Result<Var> {
    let (xv, wv) = (x.data(), weight.data());
    let bv = bias.map(|b| b.data());
    let y = xv.conv_transpose2d(&wv, bv.as_ref(), p, output_padding)?;
    let (rx, rw) = (x.requires_grad(), weight.requires_grad());
    let rb = bias.is_some_and(|b| b.requires_grad());
    let mut inputs = vec![x, weight];
    inputs.extend(bias);
    let has_bias = bias.is_some();
    Ok(Var::from_op("conv_transpose2d", y, &inputs, move |g| {
        let gx = if rx {
            Some(g.conv2d(&wv, None, p)?)
        } else {
            None
        };
        let gw = if rw {
            Some(Tensor::conv2d_backward_weight(&xv, g, wv.shape(), p)?)
        } else {
            None
        };
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(if rb {
                let (n, c) = (g.shape()[0] as isize, g.shape()[1] as isize);
                Some(
                    g.reshape(&[n, c, -1])?
                        .sum_dim(2, false)?
                        .sum_dim(0, false)?,
                )
            } else {
                None
            });
        }
        Ok(out)
    }))
}
