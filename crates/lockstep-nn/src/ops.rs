//! Differentiable ops on [`Var`]: each computes its value with the tensor op of the same name
//! and records the backward. Names and semantics follow PyTorch's (`torch.add`, `x.view`,
//! `F.linear`, …); shapes broadcast as there, and a gradient flowing to a broadcast input is
//! summed back to the input's shape.

use crate::autograd::{Var, is_grad_enabled};
use crate::batch_blocks::rows;
use lockstep_tensor::dispatch::{Guarantee, Impl, Op, OpInfo};
use lockstep_tensor::ops::matmul::is_skinny;
use lockstep_tensor::{DType, Error, Result, Tensor};

pub(crate) use crate::error::invalid;

/// The ops this crate registers with dispatch itself (the training layer's own kernels: gradient
/// clipping, SGD's and Adam's updates; batch normalisation's and the fused recurrent layers' kernels are the tensor crate's), as [`lockstep_tensor::dispatch::builtin_ops`] lists the tensor crate's — for
/// `lockstep verify`'s advice and tools that explain a trace.
pub fn builtin_ops() -> Vec<OpInfo> {
    vec![
        GET_TOTAL_NORM.info(),
        CLIP_GRADS_WITH_NORM.info(),
        CLIP_GRAD_VALUE.info(),
        SGD.info(),
        ADAM.info(),
        LAYER_NORM.info(),
        LAYER_NORM_BACKWARD.info(),
        MERGE_HEADS.info(),
    ]
}

/// One thread-invariant implementation (`f` unused: the kernel is the caller's).
macro_rules! single_op {
    ($(#[$doc:meta])* $id:ident = $name:literal, $algo:literal) => {
        $(#[$doc])*
        pub(crate) static $id: Op<()> = Op {
            name: $name,
            impls: &[Impl {
                algo: $algo,
                guarantee: Guarantee::ThreadInvariant,
                f: (),
            }],
        };
    };
}

single_op!(
    /// `torch.nn.utils.get_total_norm` (the first half of `clip_grad_norm_`): each norm in
    /// the order of PyTorch's serial CPU kernels.
    GET_TOTAL_NORM = "get_total_norm", "get_total_norm.torch_cpu_order"
);
single_op!(
    /// `clip_grads_with_norm_` (the second half of `clip_grad_norm_`): one product per
    /// element; traced once per gradient.
    CLIP_GRADS_WITH_NORM = "clip_grads_with_norm_", "clip_grads_with_norm_.scale"
);
single_op!(
    /// `clip_grad_value_`: one clamp per element; traced once per gradient.
    CLIP_GRAD_VALUE = "clip_grad_value_", "clip_grad_value_.clamp"
);
single_op!(
    /// `SGD.step`'s update of one parameter (PyTorch's single-tensor formulas, element by
    /// element); traced once per parameter with its new value.
    SGD = "sgd", "sgd.elementwise"
);
single_op!(
    /// `Adam.step`'s (and `AdamW.step`'s) update of one parameter (PyTorch's single-tensor
    /// formulas, element by element); traced once per parameter with its new value.
    ADAM = "adam", "adam.elementwise"
);
single_op!(
    /// `F.layer_norm`'s forward: rows split among threads (each row's sums are chains of its
    /// own, so the bits never depend on the split).
    LAYER_NORM = "layer_norm", "layer_norm.rows"
);
single_op!(
    /// `F.layer_norm`'s backward: the rows' input gradients split among threads, and the weight
    /// and bias gradients by column ranges, each column adding every row in row order (the
    /// one-thread order).
    LAYER_NORM_BACKWARD = "layer_norm_backward", "layer_norm_backward.rows"
);
single_op!(
    /// The gradient of `causal_self_attention`'s `qkv`: q's, k's and v's head gradients
    /// copied into one `[B, T, 3C]` tensor, token rows in pieces on the team.
    MERGE_HEADS = "merge_heads", "merge_heads.copy"
);
/// Sums `g` down to `shape` (the reverse of broadcasting): leading dimensions are summed away,
/// and dimensions where `shape` has 1 are summed with `keepdim`. Deterministic (`sum_dim`).
///
/// # Errors
/// If `g` cannot have been broadcast from `shape`.
pub fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    if g.ndim() < shape.len() {
        return Err(Error::ShapeMismatch {
            op: "sum_to",
            lhs: g.shape().to_vec(),
            rhs: shape.to_vec(),
        });
    }
    let mut r = g.clone();
    for _ in 0..g.ndim() - shape.len() {
        r = r.sum_dim(0, false)?;
    }
    for (d, &s) in shape.iter().enumerate() {
        if s == 1 && r.shape()[d] != 1 {
            r = r.sum_dim(d as isize, true)?;
        }
    }
    if r.shape() != shape {
        return Err(Error::ShapeMismatch {
            op: "sum_to",
            lhs: g.shape().to_vec(),
            rhs: shape.to_vec(),
        });
    }
    Ok(r)
}

fn isz(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// `g` broadcast to `shape` and made dense.
pub(crate) fn expand_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    g.expand(&isz(shape))?.try_contiguous()
}

fn resolve(op: &'static str, dim: isize, ndim: usize) -> Result<usize> {
    lockstep_tensor::layout::resolve_dim(op, dim, ndim)
}

impl Var {
    /// `torch.add(a, b)` with broadcasting.
    ///
    /// # Errors
    /// Dtypes that differ, shapes that do not broadcast.
    pub fn add(&self, other: &Var) -> Result<Var> {
        let v = self.data().add(&other.data())?;
        let (sa, sb) = (self.shape().to_vec(), other.shape().to_vec());
        Ok(Var::from_op("add", v, &[self, other], move |g| {
            Ok(vec![Some(sum_to(g, &sa)?), Some(sum_to(g, &sb)?)])
        }))
    }

    /// `torch.sub(a, b)` with broadcasting.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn sub(&self, other: &Var) -> Result<Var> {
        let v = self.data().sub(&other.data())?;
        let (sa, sb) = (self.shape().to_vec(), other.shape().to_vec());
        Ok(Var::from_op("sub", v, &[self, other], move |g| {
            Ok(vec![Some(sum_to(g, &sa)?), Some(sum_to(&g.neg()?, &sb)?)])
        }))
    }

    /// `torch.mul(a, b)` with broadcasting.
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn mul(&self, other: &Var) -> Result<Var> {
        let (a, b) = (self.data(), other.data());
        let v = a.mul(&b)?;
        let (ra, rb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op("mul", v, &[self, other], move |g| {
            let ga = if ra {
                Some(sum_to(&g.mul(&b)?, a.shape())?)
            } else {
                None
            };
            let gb = if rb {
                Some(sum_to(&g.mul(&a)?, b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }

    /// `torch.div(a, b)` with broadcasting (floats).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    pub fn div(&self, other: &Var) -> Result<Var> {
        let (a, b) = (self.data(), other.data());
        let v = a.div(&b)?;
        let (ra, rb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op("div", v, &[self, other], move |g| {
            let ga = if ra {
                Some(sum_to(&g.div(&b)?, a.shape())?)
            } else {
                None
            };
            let gb = if rb {
                // −g·a / b²
                let q = g.mul(&a)?.div(&b.mul(&b)?)?.neg()?;
                Some(sum_to(&q, b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }

    /// `x + c` for a number `c` (converted to the tensor's dtype).
    ///
    /// # Errors
    /// Non-numeric dtype.
    pub fn add_scalar(&self, c: f64) -> Result<Var> {
        let v = self.data().add_scalar(c)?;
        Ok(Var::from_op("add", v, &[self], |g| {
            Ok(vec![Some(g.clone())])
        }))
    }

    /// `x · c` for a number `c` (converted to the tensor's dtype).
    ///
    /// # Errors
    /// Non-numeric dtype.
    pub fn mul_scalar(&self, c: f64) -> Result<Var> {
        let v = self.data().mul_scalar(c)?;
        Ok(Var::from_op("mul", v, &[self], move |g| {
            Ok(vec![Some(g.mul_scalar(c)?)])
        }))
    }

    /// `x / c` for a number `c`.
    ///
    /// # Errors
    /// Non-numeric dtype.
    pub fn div_scalar(&self, c: f64) -> Result<Var> {
        let v = self.data().div_scalar(c)?;
        Ok(Var::from_op("div", v, &[self], move |g| {
            Ok(vec![Some(g.div_scalar(c)?)])
        }))
    }

    /// `−x`.
    ///
    /// # Errors
    /// Non-numeric dtype.
    pub fn neg(&self) -> Result<Var> {
        let v = self.data().neg()?;
        Ok(Var::from_op("neg", v, &[self], |g| {
            Ok(vec![Some(g.neg()?)])
        }))
    }

    /// `torch.exp`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn exp(&self) -> Result<Var> {
        let y = self.data().exp()?;
        let out = y.clone();
        Ok(Var::from_op("exp", y, &[self], move |g| {
            Ok(vec![Some(g.mul(&out)?)])
        }))
    }

    /// `torch.log`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn log(&self) -> Result<Var> {
        let x = self.data();
        let y = x.log()?;
        Ok(Var::from_op("log", y, &[self], move |g| {
            Ok(vec![Some(g.div(&x)?)])
        }))
    }

    /// `torch.sqrt`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn sqrt(&self) -> Result<Var> {
        let y = self.data().sqrt()?;
        let out = y.clone();
        Ok(Var::from_op("sqrt", y, &[self], move |g| {
            Ok(vec![Some(Tensor::sqrt_backward(g, &out)?)])
        }))
    }

    /// `x ** p` for a number `p`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn pow_scalar(&self, p: f64) -> Result<Var> {
        let x = self.data();
        let y = x.pow_scalar(p)?;
        Ok(Var::from_op("pow", y, &[self], move |g| {
            if p == 0.0 {
                // PyTorch's pow_backward: zeros (not 0 · x^−1, which is NaN at x = 0).
                return Ok(vec![Some(Tensor::zeros(x.shape(), x.dtype())?)]);
            }
            let d = x.pow_scalar(p - 1.0)?.mul_scalar(p)?;
            Ok(vec![Some(g.mul(&d)?)])
        }))
    }

    /// `torch.tanh`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn tanh(&self) -> Result<Var> {
        let y = self.data().tanh()?;
        let out = y.clone();
        Ok(Var::from_op("tanh", y, &[self], move |g| {
            Ok(vec![Some(Tensor::tanh_backward(g, &out)?)])
        }))
    }

    /// `torch.sigmoid`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn sigmoid(&self) -> Result<Var> {
        let y = self.data().sigmoid()?;
        let out = y.clone();
        Ok(Var::from_op("sigmoid", y, &[self], move |g| {
            Ok(vec![Some(Tensor::sigmoid_backward(g, &out)?)])
        }))
    }

    /// `torch.relu`.
    ///
    /// # Errors
    /// Non-numeric dtype.
    pub fn relu(&self) -> Result<Var> {
        let y = self.data().relu()?;
        let out = y.clone();
        Ok(Var::from_op("relu", y, &[self], move |g| {
            Ok(vec![Some(Tensor::relu_backward(g, &out)?)])
        }))
    }

    /// `F.gelu(x)` (exact, erf form). When `x` needs a gradient, the derivative is computed in
    /// the forward from the value's own erf ([`Tensor::gelu_with_derivative`], f32) and kept
    /// for the backward (one tensor of `x`'s size): the same bits as computing it again.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn gelu(&self) -> Result<Var> {
        let x = self.data();
        if is_grad_enabled() && self.requires_grad() {
            // The derivative from the forward's own erf, kept for the backward: `g · gelu'(x)`
            // with the bits of `Tensor::gelu_backward`, without a second erf per element.
            let (y, d) = x.gelu_with_derivative()?;
            return Ok(Var::from_op("gelu", y, &[self], move |g| {
                Ok(vec![Some(g.mul(&d)?)])
            }));
        }
        let y = x.gelu()?;
        Ok(Var::from_op("gelu", y, &[self], move |g| {
            // `g · gelu'(x)` in one pass (the bits of `g.mul(&x.gelu_derivative(false)?)`).
            Ok(vec![Some(Tensor::gelu_backward(g, &x)?)])
        }))
    }

    /// `F.gelu(x, approximate='tanh')`: `½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, with
    /// PyTorch's formula for the value and for the gradient.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn gelu_tanh(&self) -> Result<Var> {
        let x = self.data();
        let y = x.gelu_tanh()?;
        Ok(Var::from_op("gelu", y, &[self], move |g| {
            Ok(vec![Some(g.mul(&x.gelu_derivative(true)?)?)])
        }))
    }

    /// `torch.matmul(a, b)` for operands of at least 2 dimensions (batch dimensions
    /// broadcast); 1-D operands are taken as a row (left) or a column (right) vector and the
    /// added dimension removed, as in PyTorch.
    ///
    /// # Errors
    /// As [`Tensor::matmul`].
    pub fn matmul(&self, other: &Var) -> Result<Var> {
        if self.ndim() == 0 || other.ndim() == 0 {
            return Err(invalid(
                "matmul",
                "input",
                "both arguments to matmul need to be at least 1D",
            ));
        }
        if self.ndim() == 1 {
            let r = self.unsqueeze(0)?.matmul(other)?;
            let d = r.ndim() as isize - 2;
            return r.squeeze(d);
        }
        if other.ndim() == 1 {
            let r = self.matmul(&other.unsqueeze(1)?)?;
            return r.squeeze(-1);
        }
        let (a, b) = (self.data(), other.data());
        let v = a.matmul(&b)?;
        let (ra, rb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op("matmul", v, &[self, other], move |g| {
            let ga = if ra {
                let bt = b.transpose(-1, -2)?;
                Some(sum_to(&g.matmul(&bt)?, a.shape())?)
            } else {
                None
            };
            let gb = if rb {
                let at = a.transpose(-1, -2)?;
                Some(sum_to(&at.matmul(g)?, b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }

    /// `F.linear(x, weight, bias)`: `x · weightᵀ + bias` for `x` of shape `[…, in]`, weight
    /// `[out, in]` and bias `[out]`.
    ///
    /// # Errors
    /// As [`Tensor::linear`].
    pub fn linear(&self, weight: &Var, bias: Option<&Var>) -> Result<Var> {
        let (x, w) = (self.data(), weight.data());
        let v = linear_value(&x, &w, bias.map(|b| b.data()).as_ref())?;
        let grads = LinearGrads::new(
            x,
            w,
            [
                self.requires_grad(),
                weight.requires_grad(),
                bias.is_some_and(|b| b.requires_grad()),
            ],
        );
        let mut inputs = vec![self, weight];
        inputs.extend(bias);
        let has_bias = bias.is_some();
        Ok(Var::from_op("linear", v, &inputs, move |g| {
            let (gx, gw, gb) = grads.of(g)?;
            let mut out = vec![gx, gw];
            if has_bias {
                out.push(gb);
            }
            Ok(out)
        }))
    }

    /// `torch.sum(x)`.
    ///
    /// # Errors
    /// Non-float dtype.
    pub fn sum(&self) -> Result<Var> {
        let v = self.data().sum()?;
        let shape = self.shape().to_vec();
        Ok(Var::from_op("sum", v, &[self], move |g| {
            Ok(vec![Some(expand_to(g, &shape)?)])
        }))
    }

    /// `torch.sum(x, dim, keepdim)`.
    ///
    /// # Errors
    /// `dim` out of range; non-float dtype.
    pub fn sum_dim(&self, dim: isize, keepdim: bool) -> Result<Var> {
        let d = resolve("sum", dim, self.ndim())?;
        let v = self.data().sum_dim(dim, keepdim)?;
        let shape = self.shape().to_vec();
        Ok(Var::from_op("sum", v, &[self], move |g| {
            let g = if keepdim {
                g.clone()
            } else {
                g.unsqueeze(d as isize)?
            };
            Ok(vec![Some(expand_to(&g, &shape)?)])
        }))
    }

    /// `torch.mean(x)`.
    ///
    /// # Errors
    /// Non-float dtype or an empty tensor.
    pub fn mean(&self) -> Result<Var> {
        let v = self.data().mean()?;
        let shape = self.shape().to_vec();
        let n = self.numel() as f64;
        Ok(Var::from_op("mean", v, &[self], move |g| {
            Ok(vec![Some(expand_to(&g.div_scalar(n)?, &shape)?)])
        }))
    }

    /// `torch.mean(x, dim, keepdim)`.
    ///
    /// # Errors
    /// `dim` out of range; non-float dtype.
    pub fn mean_dim(&self, dim: isize, keepdim: bool) -> Result<Var> {
        let d = resolve("mean", dim, self.ndim())?;
        let v = self.data().mean_dim(dim, keepdim)?;
        let shape = self.shape().to_vec();
        let n = shape[d] as f64;
        Ok(Var::from_op("mean", v, &[self], move |g| {
            let g = if keepdim {
                g.clone()
            } else {
                g.unsqueeze(d as isize)?
            };
            Ok(vec![Some(expand_to(&g.div_scalar(n)?, &shape)?)])
        }))
    }

    /// `torch.softmax(x, dim)`.
    ///
    /// # Errors
    /// `dim` out of range; non-float dtype.
    pub fn softmax(&self, dim: isize) -> Result<Var> {
        let y = self.data().softmax(dim)?;
        let out = y.clone();
        Ok(Var::from_op("softmax", y, &[self], move |g| {
            // y · (g − Σ g·y)
            let s = g.mul(&out)?.sum_dim(dim, true)?;
            Ok(vec![Some(out.mul(&g.sub(&s)?)?)])
        }))
    }

    /// `torch.log_softmax(x, dim)`.
    ///
    /// # Errors
    /// `dim` out of range; non-float dtype.
    pub fn log_softmax(&self, dim: isize) -> Result<Var> {
        let y = self.data().log_softmax(dim)?;
        let out = y.clone();
        Ok(Var::from_op("log_softmax", y, &[self], move |g| {
            // g − exp(y) · Σ g
            let s = g.sum_dim(dim, true)?;
            Ok(vec![Some(g.sub(&out.exp()?.mul(&s)?)?)])
        }))
    }

    /// `torch.logsumexp(x, dim, keepdim)`.
    ///
    /// # Errors
    /// `dim` out of range; non-float dtype.
    pub fn logsumexp(&self, dim: isize, keepdim: bool) -> Result<Var> {
        let d = resolve("logsumexp", dim, self.ndim())?;
        let x = self.data();
        let y = x.logsumexp(dim, keepdim)?;
        let out = y.clone();
        Ok(Var::from_op("logsumexp", y, &[self], move |g| {
            let (g, o) = if keepdim {
                (g.clone(), out.clone())
            } else {
                (g.unsqueeze(d as isize)?, out.unsqueeze(d as isize)?)
            };
            // g · exp(x − lse)
            Ok(vec![Some(g.mul(&x.sub(&o)?.exp()?)?)])
        }))
    }

    /// `x.view(shape)` / `x.reshape(shape)` (one entry may be −1). The result is a new node
    /// whose gradient is reshaped back.
    ///
    /// # Errors
    /// If the element count does not match.
    pub fn reshape(&self, shape: &[isize]) -> Result<Var> {
        let v = self.data().reshape(shape)?;
        let s = isz(self.shape());
        Ok(Var::from_op("reshape", v, &[self], move |g| {
            Ok(vec![Some(g.reshape(&s)?)])
        }))
    }

    /// `x.flatten(start_dim, end_dim)`.
    ///
    /// # Errors
    /// Dimensions out of range or `start_dim > end_dim`.
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Var> {
        if self.ndim() == 0 {
            return self.reshape(&[1]);
        }
        let s = resolve("flatten", start_dim, self.ndim())?;
        let e = resolve("flatten", end_dim, self.ndim())?;
        if s > e {
            return Err(invalid(
                "flatten",
                "start_dim",
                "flatten() has invalid args: start_dim cannot come after end_dim",
            ));
        }
        let mut shape = isz(&self.shape()[..s]);
        shape.push(self.shape()[s..=e].iter().product::<usize>() as isize);
        shape.extend(isz(&self.shape()[e + 1..]));
        self.reshape(&shape)
    }

    /// `x.transpose(d0, d1)`.
    ///
    /// # Errors
    /// Dimensions out of range.
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Var> {
        let v = self.data().transpose(d0, d1)?;
        Ok(Var::from_op("transpose", v, &[self], move |g| {
            Ok(vec![Some(g.transpose(d0, d1)?.try_contiguous()?)])
        }))
    }

    /// `x.permute(dims)`.
    ///
    /// # Errors
    /// If `dims` is not a permutation of the dimensions.
    pub fn permute(&self, dims: &[isize]) -> Result<Var> {
        let v = self.data().permute(dims)?;
        let n = self.ndim();
        let mut inv = vec![0isize; n];
        for (i, &d) in dims.iter().enumerate() {
            inv[resolve("permute", d, n)?] = i as isize;
        }
        Ok(Var::from_op("permute", v, &[self], move |g| {
            Ok(vec![Some(g.permute(&inv)?.try_contiguous()?)])
        }))
    }

    /// `x.unsqueeze(dim)`.
    ///
    /// # Errors
    /// `dim` out of range.
    pub fn unsqueeze(&self, dim: isize) -> Result<Var> {
        let v = self.data().unsqueeze(dim)?;
        let s = isz(self.shape());
        Ok(Var::from_op("unsqueeze", v, &[self], move |g| {
            Ok(vec![Some(g.reshape(&s)?)])
        }))
    }

    /// `x.squeeze(dim)` (no change if that dimension is not 1).
    ///
    /// # Errors
    /// `dim` out of range.
    pub fn squeeze(&self, dim: isize) -> Result<Var> {
        let v = self.data().squeeze(dim)?;
        let s = isz(self.shape());
        Ok(Var::from_op("squeeze", v, &[self], move |g| {
            Ok(vec![Some(g.reshape(&s)?)])
        }))
    }

    /// `x.expand(shape)` (−1 keeps a dimension).
    ///
    /// # Errors
    /// If the shape is not a broadcast of `x`'s.
    pub fn expand(&self, shape: &[isize]) -> Result<Var> {
        let v = self.data().expand(shape)?.try_contiguous()?;
        let s = self.shape().to_vec();
        Ok(Var::from_op("expand", v, &[self], move |g| {
            Ok(vec![Some(sum_to(g, &s)?)])
        }))
    }

    /// `x.narrow(dim, start, length)`.
    ///
    /// # Errors
    /// `dim` out of range or the slice outside the dimension.
    pub fn narrow(&self, dim: isize, start: usize, length: usize) -> Result<Var> {
        let d = resolve("narrow", dim, self.ndim())?;
        let v = narrow_dense(&self.data(), d, start, length)?;
        let shape = self.shape().to_vec();
        let dtype = self.dtype();
        Ok(Var::from_op("narrow", v, &[self], move |g| {
            Ok(vec![Some(pad_dim(g, d, start, &shape, dtype)?)])
        }))
    }

    /// `x.select(dim, index)` (`x[:, index]` for `dim = 1`): the dimension is removed.
    ///
    /// # Errors
    /// `dim` or `index` out of range.
    pub fn select(&self, dim: isize, index: usize) -> Result<Var> {
        let d = resolve("select", dim, self.ndim())?;
        self.narrow(dim, index, 1)?.squeeze(d as isize)
    }

    /// `x.chunk(n, dim)` for a dimension divisible by `n` (what RNN gates use).
    ///
    /// # Errors
    /// `dim` out of range or not divisible by `n`.
    pub fn chunk(&self, n: usize, dim: isize) -> Result<Vec<Var>> {
        let d = resolve("chunk", dim, self.ndim())?;
        let len = self.shape()[d];
        if n == 0 || !len.is_multiple_of(n) {
            return Err(invalid(
                "chunk",
                "chunks",
                format!("dimension {d} of size {len} is not divisible into {n} chunks"),
            ));
        }
        let l = len / n;
        (0..n).map(|i| self.narrow(dim, i * l, l)).collect()
    }

    /// `torch.split(x, split_size, dim)`: pieces of `split_size` along `dim`, the last one
    /// shorter if the size is not a multiple. Each piece's gradient reaches `x` in its place
    /// (zeros elsewhere; a `-0.0` gradient element arrives as `+0.0`).
    ///
    /// # Errors
    /// `dim` out of range; `split_size` 0 for a non-empty dimension.
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Var>> {
        let d = resolve("split", dim, self.ndim())?;
        let lens =
            lockstep_tensor::ops::split::split_lengths("split", self.shape()[d], split_size)?;
        self.pieces(dim, &lens)
    }

    /// `torch.split(x, split_sizes, dim)` with a list (`split_with_sizes`): pieces of those
    /// lengths along `dim`, in order (gradients as [`split`](Self::split)).
    ///
    /// # Errors
    /// `dim` out of range; sizes that do not add up to the dimension's size.
    pub fn split_with_sizes(&self, split_sizes: &[usize], dim: isize) -> Result<Vec<Var>> {
        let d = resolve("split_with_sizes", dim, self.ndim())?;
        lockstep_tensor::ops::split::check_split_sizes(
            "split_with_sizes",
            self.shape()[d],
            d,
            split_sizes,
        )?;
        self.pieces(dim, split_sizes)
    }

    /// Consecutive narrows of lengths `lens` along `dim`.
    fn pieces(&self, dim: isize, lens: &[usize]) -> Result<Vec<Var>> {
        let mut out = lockstep_rng::try_with_capacity::<Var>("split", lens.len())?;
        let mut start = 0;
        for &l in lens {
            out.push(self.narrow(dim, start, l)?);
            start += l;
        }
        Ok(out)
    }

    /// `x.masked_fill(mask, value)`: `value` where the `Bool` `mask` is true (`mask` and `x`
    /// broadcast against each other, as [`Tensor::masked_fill`]). The gradient is the output's
    /// with zeros where the mask is true, summed back to `x`'s shape if `x` was broadcast
    /// (PyTorch's backward).
    ///
    /// # Errors
    /// As [`Tensor::masked_fill`]: a non-`Bool` mask, shapes that do not broadcast.
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Var> {
        let v = self.data().masked_fill(mask, value)?;
        let m = mask.clone();
        let s = self.shape().to_vec();
        Ok(Var::from_op("masked_fill", v, &[self], move |g| {
            Ok(vec![Some(sum_to(&g.masked_fill(&m, 0.0)?, &s)?)])
        }))
    }

    /// `torch.cat(vars, dim)`.
    ///
    /// # Errors
    /// No tensors, or shapes that differ outside `dim`.
    pub fn cat(vars: &[Var], dim: isize) -> Result<Var> {
        let ts: Vec<Tensor> = vars.iter().map(|v| v.data()).collect();
        let v = Tensor::cat(&ts, dim)?;
        let d = resolve("cat", dim, v.ndim())?;
        let lens: Vec<usize> = vars.iter().map(|v| v.shape()[d]).collect();
        let refs: Vec<&Var> = vars.iter().collect();
        Ok(Var::from_op("cat", v, &refs, move |g| {
            let mut off = 0;
            let mut out = Vec::with_capacity(lens.len());
            for &l in &lens {
                out.push(Some(narrow_dense(g, d, off, l)?));
                off += l;
            }
            Ok(out)
        }))
    }

    /// `torch.stack(vars, dim)`.
    ///
    /// # Errors
    /// No tensors, or shapes that differ.
    pub fn stack(vars: &[Var], dim: isize) -> Result<Var> {
        let un: Vec<Var> = vars
            .iter()
            .map(|v| v.unsqueeze(dim))
            .collect::<Result<_>>()?;
        Var::cat(&un, dim)
    }

    /// `F.dropout(x, p, training)` drawing PyTorch's mask from `g` (the default generator when
    /// `None`): `x · bernoulli(1 − p) / (1 − p)`, the mask in `x`'s row-major order, exactly
    /// the draws of `torch.nn.Dropout` on the CPU.
    ///
    /// # Errors
    /// Non-float dtype; `p` outside `[0, 1]`.
    pub fn dropout(
        &self,
        p: f64,
        training: bool,
        g: Option<&mut lockstep_rng::Generator>,
    ) -> Result<Var> {
        if !(0.0..=1.0).contains(&p) {
            return Err(invalid(
                "dropout",
                "p",
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        if !training || p == 0.0 || self.numel() == 0 {
            return Ok(self.clone());
        }
        // The mask is what dropout does to ones: bernoulli(1 − p) / (1 − p), drawn as PyTorch
        // draws it, in the memory order of `empty_like(x)`.
        let mask = dropout_mask(&self.data(), p, g)?;
        self.mul(&Var::constant(mask))
    }
}

/// The dropout mask for `x`, `bernoulli(1 − p) / (1 − p)` with `x`'s shape, drawn as
/// PyTorch's `at::empty_like(x).bernoulli_(1 − p)`: `empty_like` keeps the strides of a dense
/// permuted tensor (a transpose, an LSTM's `batch_first` output) and the draws fill it in
/// memory order; any other tensor gets a row-major mask.
fn dropout_mask(x: &Tensor, p: f64, g: Option<&mut lockstep_rng::Generator>) -> Result<Tensor> {
    let (shape, strides) = (x.shape(), x.layout().strides());
    // Dimensions of more than one element, from the slowest in memory to the fastest.
    let mut order: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
    order.sort_by(|&a, &b| strides[b].cmp(&strides[a]).then(a.cmp(&b)));
    let mut expect = 1;
    let mut dense = true;
    for &d in order.iter().rev() {
        dense &= strides[d] == expect;
        expect *= shape[d];
    }
    let in_order = order.windows(2).all(|w| w[0] < w[1]);
    if !dense || in_order {
        return Tensor::dropout_mask(shape, x.dtype(), p, g);
    }
    // Draw in memory order (the size-1 dimensions placed first), then view it logically.
    let mut phys: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] <= 1).collect();
    phys.extend(&order);
    let phys_shape: Vec<usize> = phys.iter().map(|&d| shape[d]).collect();
    let m = Tensor::dropout_mask(&phys_shape, x.dtype(), p, g)?;
    let mut inv = vec![0isize; phys.len()];
    for (i, &d) in phys.iter().enumerate() {
        inv[d] = i as isize;
    }
    m.permute(&inv)?.try_contiguous()
}

/// `t.narrow(d, start, length)` made dense. An empty slice is made afresh: a narrowed view of
/// a tensor with a zero-sized dimension can carry an offset past its (empty) storage, which
/// `Tensor::contiguous` does not accept.
/// The value of [`Var::linear`]: `x · wᵀ`, then the bias added in place as its own op (`add_`,
/// through dispatch, traced) rather than inside `Tensor::linear`: the same bits.
fn linear_value(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let mut v = x.linear(w, None)?;
    if let Some(b) = b {
        check_linear_bias(&v, w, b)?;
        v.add_(b, 1.0)?;
    }
    Ok(v)
}

/// A bias of `[out]` (`w`'s rows) and the product `v`'s dtype, as `linear` requires.
pub(crate) fn check_linear_bias(v: &Tensor, w: &Tensor, b: &Tensor) -> Result<()> {
    let of = w.shape()[0];
    if b.shape() != [of] {
        return Err(Error::ShapeMismatch {
            op: "linear",
            lhs: b.shape().to_vec(),
            rhs: vec![of],
        });
    }
    if b.dtype() != v.dtype() {
        return Err(Error::DType {
            op: "linear",
            expected: v.dtype(),
            got: b.dtype(),
        });
    }
    Ok(())
}

/// What [`Var::linear`]'s backward needs: the input and weight, which gradients are wanted
/// (input, weight, bias), and — inside `with_batch_blocks` — the batch's blocks, over which the
/// weight and bias gradients reduce in the fixed tree (each sample's rows are contiguous: the
/// input's first dimension is the batch).
pub(crate) struct LinearGrads {
    x: Tensor,
    w: Tensor,
    need: [bool; 3],
    blocks: Option<crate::batch_blocks::BatchBlocks>,
}

impl LinearGrads {
    pub(crate) fn new(x: Tensor, w: Tensor, need: [bool; 3]) -> Self {
        let blocks = if x.ndim() >= 2 {
            crate::batch_blocks::for_batch(x.shape()[0])
        } else {
            None
        };
        Self { x, w, need, blocks }
    }

    /// The gradients of the input, weight and bias (those wanted) from the output's `g`.
    pub(crate) fn of(
        &self,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (x, w, blocks) = (&self.x, &self.w, self.blocks);
        let [rx, rw, rb] = self.need;
        let (o, i) = (w.shape()[0], w.shape()[1]);
        let g2 = g.reshape(&[-1, o as isize])?;
        let gx = if rx { Some(g.matmul(w)?) } else { None };
        let per = blocks.map_or(1, |b| g2.shape()[0] / b.batch);
        let gw = if rw {
            let x2 = x.reshape(&[-1, i as isize])?;
            let gt = g2.transpose(0, 1)?;
            Some(match blocks {
                None => gt.matmul(&x2)?,
                // One call for every block's product and the tree: the bits of the per-block
                // `matmul`s (blocked kernel) added in the tree, which is what `matmul` runs on
                // shapes that are not skinny.
                Some(b) if !is_skinny(o, i, per * b.block) => {
                    gt.matmul_k_blocks(&x2, per * b.block)?
                }
                Some(b) => crate::batch_blocks::tree_sum_blocks(b, |s, n| {
                    let (gk, xk) = (rows(&g2, per, s, n)?, rows(&x2, per, s, n)?);
                    gk.transpose(0, 1)?.matmul(&xk)
                })?,
            })
        } else {
            None
        };
        let gb = if rb {
            Some(match blocks {
                None => g2.sum_dim(0, false)?,
                // One call: the bits of one `sum_dim(0)` per block's rows added in the tree of
                // `tree_sum_blocks`.
                Some(b) => g2.sum_dim0_blocks(per * b.block)?,
            })
        } else {
            None
        };
        Ok((gx, gw, gb))
    }
}

fn narrow_dense(t: &Tensor, d: usize, start: usize, length: usize) -> Result<Tensor> {
    let n = t.narrow(d as isize, start, length)?;
    if n.numel() == 0 {
        Tensor::zeros(n.shape(), n.dtype())
    } else {
        n.try_contiguous()
    }
}

/// `g` placed at `start` along `d` inside zeros of `shape` (the gradient of `narrow`).
fn pad_dim(g: &Tensor, d: usize, start: usize, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let len = g.shape()[d];
    if start == 0 && len == shape[d] {
        return Ok(g.clone());
    }
    if g.dtype() != dtype {
        return Err(Error::DType {
            op: "narrow",
            expected: dtype,
            got: g.dtype(),
        });
    }
    g.pad_dim(d as isize, start, shape[d])
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_rng::Generator;

    fn mask(x: &Tensor, seed: u64) -> Tensor {
        let v = Var::constant(x.clone());
        v.dropout(0.5, true, Some(&mut Generator::with_seed(seed)))
            .unwrap()
            .data()
    }

    #[test]
    fn dropout_draws_in_memory_order_like_empty_like() {
        // PyTorch (checked with torch 2.15): Dropout(x.t()) after manual_seed(s) equals
        // Dropout(x).t() after manual_seed(s), and the same for a permutation; the mask fills
        // `empty_like(x)`, which keeps a dense tensor's strides, in memory order.
        let x = Tensor::ones(&[3, 5], DType::F32).unwrap();
        let a = mask(&x.transpose(0, 1).unwrap(), 0);
        let b = mask(&x, 0).transpose(0, 1).unwrap().contiguous();
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        assert_ne!(
            a.to_vec::<f32>().unwrap(),
            mask(&Tensor::ones(&[5, 3], DType::F32).unwrap(), 0)
                .to_vec::<f32>()
                .unwrap()
        );
        let y = Tensor::ones(&[2, 3, 4], DType::F64).unwrap();
        let a = mask(&y.permute(&[2, 0, 1]).unwrap(), 3);
        let b = mask(&y, 3).permute(&[2, 0, 1]).unwrap().contiguous();
        assert_eq!(a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        // With size-1 dimensions in between, and an expanded (overlapping) tensor: row-major.
        let z = Tensor::ones(&[4, 1, 3], DType::F32).unwrap();
        let a = mask(&z.transpose(0, 2).unwrap(), 5);
        let b = mask(&z, 5).transpose(0, 2).unwrap().contiguous();
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let e = Tensor::ones(&[1, 4], DType::F32)
            .unwrap()
            .expand(&[3, 4])
            .unwrap();
        let a = mask(&e, 6);
        let b = mask(&Tensor::ones(&[3, 4], DType::F32).unwrap(), 6);
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    }

    #[test]
    fn narrow_of_an_empty_tensor() {
        let x = Var::new(Tensor::zeros(&[0, 8], DType::F32).unwrap(), true);
        let parts = x.chunk(4, 1).unwrap();
        assert_eq!(parts[3].shape(), [0, 2]);
        let y = Var::cat(&parts, 1).unwrap().sum().unwrap();
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().shape(), [0, 8]);
    }
}
