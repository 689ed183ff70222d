//! In-place arithmetic with PyTorch's CPU rounding: `add_` with `alpha`, `sub_`, `mul_`,
//! `div_`, `addcmul_`, `addcdiv_`, `lerp_`, `clamp_`, `copy_`, `fill_`, `zero_`.
//!
//! Each writes `self` element by element from its own value and the operands' elements at the
//! same position (operands broadcast to `self`'s shape, which never changes), so every kernel
//! is thread-invariant; work is split into fixed-size chunks. The formulas are the ones
//! PyTorch's CPU kernels evaluate, checked bit for bit against PyTorch on random inputs
//! (`tools/golden_inplace.py`): `add_(other, alpha)` is one fused multiply-add
//! `fma(alpha, other, self)` (in the vector body and in the tail alike), `addcmul_` is
//! `fma(value·t1, t2, self)`, `addcdiv_` is `self + (value·t1)/t2`, and `lerp_` is PyTorch's
//! two-sided formula with fused multiply-adds. A scalar operand is first converted to the
//! tensor's dtype, as PyTorch does for a Python number.
//!
//! `add_`/`sub_` with `alpha ≠ 1` and an operand that is constant along the innermost run
//! (a number, a 0-dimensional tensor, `[4, 1]` added to `[4, 37]`) round some elements twice,
//! as PyTorch does: its loop over such a run computes whole AVX-512 vectors with `fma`, but the
//! compiler vectorised its scalar remainder with `alpha·other` hoisted out of the loop (rounded
//! once) and a plain add, leaving the remainder's first element and last few as `fma`. Which
//! positions those are depends only on the run's length and the dtype (`two_rounded`);
//! measured element by element against PyTorch 2.15 running its AVX-512 kernels on one thread
//! (`tools/golden_inplace.py`'s tail cases; with more threads or under
//! `ATEN_CPU_CAPABILITY=avx2` PyTorch's own positions move).
//!
//! A write goes to the tensor's own storage when no other handle shares it, else to a private
//! copy (copy-on-write, as everywhere in this crate); a read-only tensor
//! ([`Tensor::into_read_only`]) refuses the write with an error naming the op.
//!
//! Each op is a `static` [`Op<Kernel>`] named after PyTorch's method, algorithm
//! `NAME.chunked`. [`Tensor::add_`] (in [`elementwise`](super::elementwise)) runs op `add_`
//! for `alpha = 1` and op `add_alpha_` (here) otherwise: the name a trace records.

use super::elementwise::Kernel;
use crate::Tensor;
use crate::dtype::{DType, Element, Float};
use crate::error::{Error, Result, invalid};
use crate::op::{Guarantee, Impl, Op};

use super::elementwise::{CHUNK, SERIAL_MAX};

chunked_ops! {
    /// `Tensor.add_(other, alpha=a)`: `fma(a, other, self)`.
    ADD_ALPHA_ = "add_alpha_";
    /// `Tensor.sub_(other, alpha=a)`: `fma(−a, other, self)`.
    SUB_ = "sub_";
    /// `Tensor.mul_`.
    MUL_ = "mul_";
    /// `Tensor.div_` (true division).
    DIV_ = "div_";
    /// `Tensor.addcmul_(t1, t2, value=v)`: `self + v·t1·t2`.
    ADDCMUL_ = "addcmul_";
    /// `Tensor.addcdiv_(t1, t2, value=v)`: `self + v·t1/t2`.
    ADDCDIV_ = "addcdiv_";
    /// `Tensor.lerp_(end, weight)`.
    LERP_ = "lerp_";
    /// `Tensor.clamp_(min, max)`.
    CLAMP_ = "clamp_";
    /// `Tensor.copy_(src)`.
    COPY_ = "copy_";
    /// `Tensor.fill_(value)` and `zero_()`.
    FILL_ = "fill_";
}

/// `self` must be a float tensor (the arithmetic ops here are defined for f32 and f64).
fn float_self(op: &'static str, t: &Tensor) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::DType {
            op,
            expected: DType::F32,
            got: t.dtype(),
        });
    }
    Ok(())
}

/// `operand` broadcast to `shape` as a dense tensor (a cheap clone when it already is one).
fn dense_as(op: &'static str, operand: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if operand.shape() == shape {
        return operand.try_contiguous();
    }
    let b = super::elementwise::broadcast_shapes(op, shape, operand.shape())?;
    if b != shape {
        return Err(Error::ShapeMismatch {
            op,
            lhs: shape.to_vec(),
            rhs: operand.shape().to_vec(),
        });
    }
    let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    operand.expand(&s)?.try_contiguous()
}

/// `self[i] = f(self[i], [operands[k][i]])` for every element, operands broadcast to `self`'s
/// shape and of `self`'s dtype, as the op `op`.
fn apply<T: Float, const N: usize>(
    op: &'static Op<Kernel>,
    dst: &mut Tensor,
    operands: [&Tensor; N],
    f: impl Fn(T, [T; N]) -> T + Sync,
) -> Result<()> {
    apply_indexed(op, dst, operands, move |_, x, a| f(x, a))
}

/// Runs `apply` for `self`'s float dtype.
macro_rules! float_apply {
    ($op:expr, $dst:expr, $ops:expr, |$x:ident: $t:ident, $a:pat_param| $body:expr) => {{
        float_self($op.name, $dst)?;
        match $dst.dtype() {
            DType::F32 => {
                #[allow(dead_code)]
                type $t = f32;
                apply::<f32, _>(&$op, $dst, $ops, |$x: f32, $a| $body)
            }
            _ => {
                #[allow(dead_code)]
                type $t = f64;
                apply::<f64, _>(&$op, $dst, $ops, |$x: f64, $a| $body)
            }
        }
    }};
}

/// `(end − x)` and PyTorch's two-sided lerp: `x + w·(end − x)` for `|w| < 0.5`, else
/// `end − (end − x)·(1 − w)`, each with one fused multiply-add.
#[inline]
fn lerp<T: Float>(x: T, end: T, w: T) -> T {
    let diff = end - x;
    let half = T::from_f64(0.5);
    if w.abs() < half {
        T::mul_add(w, diff, x)
    } else {
        T::mul_add(-diff, T::ONE - w, end)
    }
}

/// The length of PyTorch's innermost loop run over which an operand of shape `operand` stays
/// constant when broadcast to `shape` (row-major): the product of the trailing dimensions it
/// is broadcast along (dimensions of size 1 merge with any), or `None` when it varies along the
/// innermost non-unit dimension. A number is `operand = []`.
fn constant_run(shape: &[usize], operand: &[usize]) -> Option<usize> {
    let pad = shape.len() - operand.len().min(shape.len());
    let mut run = 1usize;
    for d in (0..shape.len()).rev() {
        if shape[d] == 1 {
            continue;
        }
        let o = if d < pad { 1 } else { operand[d - pad] };
        if o != 1 {
            return (run > 1).then_some(run);
        }
        run *= shape[d];
    }
    Some(run)
}

/// Whether PyTorch rounds position `p` of a constant-operand run of length `run` as
/// `self + round(alpha·other)` rather than one `fma`, for elements of `size` bytes: past the
/// last whole 64-byte vector, the remainder's first element is `fma`, then as many 16-byte
/// groups as fit in the rest are two-rounded, and what is left over is `fma` again.
fn two_rounded(p: usize, run: usize, size: usize) -> bool {
    let (vector, group) = (64 / size, 16 / size);
    let body = run / vector * vector;
    if p < body {
        return false;
    }
    let (q, rest) = (p - body, run - body);
    q >= 1 && q <= (rest - 1) / group * group
}

impl Tensor {
    /// `self + alpha·other` with PyTorch's per-position rounding (see the module docs): `fma`,
    /// or, at two-rounded positions of a constant run, `self + round(alpha·other)`.
    fn add_scaled<T: Float>(
        &mut self,
        op: &'static Op<Kernel>,
        other: &Tensor,
        alpha: T,
    ) -> Result<()> {
        let run = constant_run(self.shape(), other.shape());
        let size = core::mem::size_of::<T>();
        apply_indexed(op, self, [other], move |i, x: T, [b]| match run {
            Some(r) if two_rounded(i % r, r, size) => x + alpha * b,
            _ => T::mul_add(alpha, b, x),
        })
    }

    /// [`add_`](Self::add_) with `alpha ≠ 1`: `fma(alpha, other, self)` per element, two
    /// roundings where PyTorch's remainder loop has them (module docs).
    pub(crate) fn add_alpha_impl(&mut self, other: &Tensor, alpha: f64) -> Result<()> {
        float_self(ADD_ALPHA_.name, self)?;
        match self.dtype() {
            DType::F32 => self.add_scaled::<f32>(&ADD_ALPHA_, other, alpha as f32),
            _ => self.add_scaled::<f64>(&ADD_ALPHA_, other, alpha),
        }
    }

    /// `Tensor.sub_(other, alpha=alpha)`: `fma(−alpha, other, self)`, two roundings where
    /// PyTorch's remainder loop has them (module docs).
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn sub_(&mut self, other: &Tensor, alpha: f64) -> Result<()> {
        float_self(SUB_.name, self)?;
        match self.dtype() {
            DType::F32 => self.add_scaled::<f32>(&SUB_, other, -(alpha as f32)),
            _ => self.add_scaled::<f64>(&SUB_, other, -alpha),
        }
    }

    /// `Tensor.mul_(other)`.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn mul_(&mut self, other: &Tensor) -> Result<()> {
        float_apply!(MUL_, self, [other], |x: T, [b]| x * b)
    }

    /// `Tensor.div_(other)` (true division).
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn div_(&mut self, other: &Tensor) -> Result<()> {
        float_apply!(DIV_, self, [other], |x: T, [b]| x / b)
    }

    /// `Tensor.add_(s, alpha=alpha)` with a number `s`: `fma(alpha, s, self)`, both converted
    /// to the dtype first, two roundings where PyTorch's remainder loop has them (module docs).
    ///
    /// # Errors
    /// A non-float or read-only `self`.
    pub fn add_scalar_(&mut self, s: f64, alpha: f64) -> Result<()> {
        float_self(ADD_ALPHA_.name, self)?;
        match self.dtype() {
            DType::F32 => self.add_scaled(&ADD_ALPHA_, &Tensor::scalar(s as f32), alpha as f32),
            _ => self.add_scaled(&ADD_ALPHA_, &Tensor::scalar(s), alpha),
        }
    }

    /// `Tensor.mul_(s)` with a number `s` (converted to the dtype).
    ///
    /// # Errors
    /// A non-float or read-only `self`.
    pub fn mul_scalar_(&mut self, s: f64) -> Result<()> {
        float_apply!(MUL_, self, [], |x: T, []| x * T::from_f64(s))
    }

    /// `Tensor.div_(s)` with a number `s` (converted to the dtype).
    ///
    /// # Errors
    /// A non-float or read-only `self`.
    pub fn div_scalar_(&mut self, s: f64) -> Result<()> {
        float_apply!(DIV_, self, [], |x: T, []| x / T::from_f64(s))
    }

    /// `Tensor.addcmul_(t1, t2, value=value)`: `self + value·t1·t2`, evaluated as PyTorch's CPU
    /// kernel does: `fma(value·t1, t2, self)`.
    ///
    /// # Errors
    /// As [`add_`](Self::add_), for both operands.
    pub fn addcmul_(&mut self, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
        float_apply!(ADDCMUL_, self, [t1, t2], |x: T, [a, b]| T::mul_add(
            T::from_f64(value) * a,
            b,
            x
        ))
    }

    /// `Tensor.addcdiv_(t1, t2, value=value)`: `self + value·t1/t2`, evaluated as PyTorch's CPU
    /// kernel does: `self + (value·t1)/t2`, three roundings.
    ///
    /// # Errors
    /// As [`add_`](Self::add_), for both operands.
    pub fn addcdiv_(&mut self, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
        float_apply!(ADDCDIV_, self, [t1, t2], |x: T, [a, b]| x
            + (T::from_f64(value) * a) / b)
    }

    /// `Tensor.lerp_(end, weight)` with a number `weight` (converted to the dtype):
    /// `self + weight·(end − self)` for `|weight| < 0.5`, else `end − (end − self)·(1 − weight)`,
    /// PyTorch's formula, each a fused multiply-add.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn lerp_(&mut self, end: &Tensor, weight: f64) -> Result<()> {
        float_apply!(LERP_, self, [end], |x: T, [e]| lerp(
            x,
            e,
            T::from_f64(weight)
        ))
    }

    /// `Tensor.lerp_(end, weight)` with a tensor `weight`, elementwise as
    /// [`lerp_`](Self::lerp_).
    ///
    /// # Errors
    /// As [`add_`](Self::add_), for both operands.
    pub fn lerp_tensor_(&mut self, end: &Tensor, weight: &Tensor) -> Result<()> {
        float_apply!(LERP_, self, [end, weight], |x: T, [e, w]| lerp(x, e, w))
    }

    /// `Tensor.clamp_(min, max)`: each bound optional (at least one given), converted to the
    /// dtype; NaN stays NaN, and with `min > max` every element becomes `max`, as in PyTorch.
    ///
    /// # Errors
    /// Both bounds `None` (PyTorch: "At least one of 'min' or 'max' must not be None"), a NaN
    /// bound, a non-float or read-only `self`.
    pub fn clamp_(&mut self, min: Option<f64>, max: Option<f64>) -> Result<()> {
        if min.is_none() && max.is_none() {
            return Err(invalid(
                CLAMP_.name,
                "min",
                "At least one of 'min' or 'max' must not be None",
            ));
        }
        if min.is_some_and(f64::is_nan) || max.is_some_and(f64::is_nan) {
            return Err(invalid(CLAMP_.name, "min", "a bound is NaN"));
        }
        let (lo, hi) = (
            min.unwrap_or(f64::NEG_INFINITY),
            max.unwrap_or(f64::INFINITY),
        );
        float_apply!(CLAMP_, self, [], |x: T, []| {
            if x.is_nan() {
                x
            } else {
                let (lo, hi) = (T::from_f64(lo), T::from_f64(hi));
                let y = if x < lo { lo } else { x };
                if y > hi { hi } else { y }
            }
        })
    }

    /// `Tensor.copy_(src)`: `src`'s values, broadcast to `self`'s shape and converted to
    /// `self`'s dtype as [`to_dtype`](Self::to_dtype) converts (through f64). `self` keeps its
    /// shape and dtype.
    ///
    /// # Errors
    /// `src` not broadcastable to `self`'s shape, a read-only `self`.
    pub fn copy_(&mut self, src: &Tensor) -> Result<()> {
        self.check_writable(COPY_.name)?;
        let src = if src.dtype() == self.dtype() {
            src.clone()
        } else {
            src.try_to_dtype(self.dtype())?
        };
        crate::with_dtype!(self.dtype(), T => apply_any::<T, 1>(&COPY_, self, [&src], |_, [s]| s))
    }

    /// `Tensor.fill_(value)`: every element `value` converted to the dtype (as
    /// [`full`](Self::full) converts).
    ///
    /// # Errors
    /// A read-only `self`.
    pub fn fill_(&mut self, value: f64) -> Result<()> {
        crate::with_dtype!(self.dtype(), T => {
            let v = T::from_f64(value);
            apply_any::<T, 0>(&FILL_, self, [], move |_, []| v)
        })
    }

    /// `Tensor.zero_()`: [`fill_`](Self::fill_)`(0)`.
    ///
    /// # Errors
    /// A read-only `self`.
    pub fn zero_(&mut self) -> Result<()> {
        self.fill_(0.0)
    }
}

/// [`apply`] for any element type (the ops that only move values).
fn apply_any<T: Element + Send + Sync, const N: usize>(
    op: &'static Op<Kernel>,
    dst: &mut Tensor,
    operands: [&Tensor; N],
    f: impl Fn(T, [T; N]) -> T + Sync,
) -> Result<()> {
    apply_any_indexed(op, dst, operands, move |_, x, a| f(x, a))
}

/// [`apply`] with `f` also given the element's flat (row-major) index.
fn apply_indexed<T: Float, const N: usize>(
    op: &'static Op<Kernel>,
    dst: &mut Tensor,
    operands: [&Tensor; N],
    f: impl Fn(usize, T, [T; N]) -> T + Sync,
) -> Result<()> {
    for o in operands {
        if o.dtype() != dst.dtype() {
            return Err(Error::DType {
                op: op.name,
                expected: dst.dtype(),
                got: o.dtype(),
            });
        }
    }
    apply_any_indexed(op, dst, operands, f)
}

/// [`apply_any`] with `f` also given the element's flat (row-major) index.
fn apply_any_indexed<T: Element + Send + Sync, const N: usize>(
    op: &'static Op<Kernel>,
    dst: &mut Tensor,
    operands: [&Tensor; N],
    f: impl Fn(usize, T, [T; N]) -> T + Sync,
) -> Result<()> {
    dst.check_writable(op.name)?;
    let shape = dst.shape().to_vec();
    let mut dense = Vec::with_capacity(N);
    for o in operands {
        dense.push(dense_as(op.name, o, &shape)?);
    }
    let srcs: Vec<&[T]> = dense.iter().map(|t| t.data::<T>()).collect::<Result<_>>()?;
    let run = |i: usize, out: &mut [T]| {
        let lo = i * CHUNK;
        for (k, x) in out.iter_mut().enumerate() {
            *x = f(lo + k, *x, core::array::from_fn(|n| srcs[n][lo + k]));
        }
    };
    op.run_inplace(dst, &operands, |imp, par, dst| {
        let d = dst.data_mut::<T>()?;
        match imp.f {
            Kernel::Chunked if d.len() <= SERIAL_MAX || par.threads() == 1 => {
                for (i, c) in d.chunks_mut(CHUNK).enumerate() {
                    run(i, c);
                }
            }
            Kernel::Chunked => par.for_each_chunk_mut(d, CHUNK, run),
        }
        Ok(())
    })
}
