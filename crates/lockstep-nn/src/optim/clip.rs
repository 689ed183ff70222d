//! Gradient clipping (`torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`,
//! `get_total_norm`, `clip_grads_with_norm_`), with PyTorch's CPU arithmetic.
//!
//! `clip_grad_norm_` takes the norm of each gradient, then the norm of those norms
//! (`vector_norm(stack(norms))`), then `clip_coef = max_norm / (total_norm + 1e-6)` — which
//! PyTorch evaluates as `reciprocal(total_norm + 1e-6) * max_norm` in the gradients' dtype —
//! clamps it to at most 1 and multiplies every gradient by it (always, even when it is 1).
//! The order of each norm's sum is described at [`get_total_norm`].
//!
//! All three go through dispatch (ops `get_total_norm`, `clip_grads_with_norm_`,
//! `clip_grad_value_`, one thread-invariant implementation each) and are traced: the total
//! norm once, the scaled or clamped gradients once per gradient.

use super::{Real, multiversion, with_real};
use crate::autograd::Var;
use crate::ops::{CLIP_GRAD_VALUE, CLIP_GRADS_WITH_NORM, GET_TOTAL_NORM, invalid};
use core::mem::MaybeUninit;
use lockstep_tensor::threads::SyncPtr;
use lockstep_tensor::{DType, Element, Error, Result, Tensor};

/// Gradients of at least this many elements in all have their norms computed on the team.
const PAR_NORM_MIN: usize = 1 << 15;

multiversion! {
    /// `sqrt(Σ x²)` in the order of PyTorch's CPU 2-norm kernel.
    fn norm2_into<T>(x: &[T], out: &mut T) {
        let l = T::LANES;
        let main = x.len() - x.len() % l;
        let mut acc = [T::ZERO; 8];
        for chunk in x[..main].chunks_exact(l) {
            for j in 0..l {
                acc[j] = acc[j] + chunk[j] * chunk[j];
            }
        }
        let mut s = acc[0];
        for &a in &acc[1..l] {
            s = s + a;
        }
        let tail = &x[main..];
        let unfused = tail.len() / 4 * 4;
        for &v in &tail[..unfused] {
            s = s + v * v;
        }
        for &v in &tail[unfused..] {
            s = v.mul_add(v, s);
        }
        *out = s.sqrt();
    }
}

fn norm2<T: Real>(x: &[T]) -> T {
    let mut out = T::ZERO;
    norm2_into(x, &mut out);
    out
}

/// `max` that returns NaN if either argument is NaN (PyTorch's `max_propagate_nan`).
fn max_nan<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        a + b
    } else if a > b {
        a
    } else {
        b
    }
}

fn min_nan<T: Real>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        a + b
    } else if a < b {
        a
    } else {
        b
    }
}

/// `torch.linalg.vector_norm(x, p)` of a dense CPU tensor, as PyTorch computes it.
fn vector_norm<T: Real>(x: &[T], p: f64) -> T {
    if x.len() == 1 {
        // is_reduce_over_1D_vector: abs (ne(0) for p = 0)
        return if p == 0.0 {
            if x[0] != T::ZERO { T::ONE } else { T::ZERO }
        } else {
            x[0].abs()
        };
    }
    if x.is_empty() {
        return if p < 0.0 {
            T::from_f64(f64::INFINITY)
        } else {
            T::ZERO
        };
    }
    if p == 2.0 {
        norm2(x)
    } else if p == f64::INFINITY {
        x.iter().fold(T::ZERO, |a, &v| max_nan(a, v.abs()))
    } else if p == f64::NEG_INFINITY {
        x.iter()
            .fold(T::from_f64(f64::INFINITY), |a, &v| min_nan(a, v.abs()))
    } else if p == 0.0 {
        x.iter().fold(T::ZERO, |a, &v| {
            a + if v == T::ZERO { T::ZERO } else { T::ONE }
        })
    } else if p == 1.0 {
        x.iter().fold(T::ZERO, |a, &v| a + v.abs())
    } else {
        let pt = T::from_f64(p);
        let s = x.iter().fold(T::ZERO, |a, &v| a + v.abs().powf(pt));
        s.powf(T::ONE / pt)
    }
}

fn check_norm_type(op: &'static str, norm_type: f64) -> Result<()> {
    if norm_type.is_nan() {
        return Err(invalid(op, "norm_type", "must not be NaN"));
    }
    Ok(())
}

/// The dtype shared by `grads`.
fn common_dtype(op: &'static str, grads: &[Tensor]) -> Result<DType> {
    let dt = grads[0].dtype();
    for g in grads {
        if g.dtype() != dt {
            return Err(Error::DType {
                op,
                expected: dt,
                got: g.dtype(),
            });
        }
    }
    Ok(dt)
}

/// `torch.nn.utils.get_total_norm(tensors, norm_type, error_if_nonfinite)`: the `norm_type`
/// norm of the per-tensor norms (`vector_norm(stack(norms))`), a 0-dimensional tensor of the
/// tensors' dtype (`f32` 0 for none).
///
/// Each norm is computed in the order of PyTorch's CPU kernels, so the result is bit-identical
/// to PyTorch's (tested against PyTorch 2.15 on x86-64 for orders 2, ∞, 1 and 3):
/// - order 2 (the vectorised last-dimension kernel): 8 `f32` lanes (4 for `f64`) accumulate
///   `acc + x*x` with the square rounded; the lanes are then added in order; the `r` remaining
///   elements are added in order, the first `4 * (r / 4)` with the square rounded and the last
///   `r % 4` with one fused multiply-add each (how the compiler built the kernel's tail loop);
///   then `sqrt`;
/// - a one-element tensor's norm is `|x|` (PyTorch's shortcut), for any order but 0;
/// - ±∞: the largest (smallest) `|x|`, NaN if any element is NaN;
/// - other orders: PyTorch's serial reduction, `acc + |x|` (order 1) or `acc + |x|^p` then
///   `acc^(1/p)` with C's `powf` — PyTorch's order for tensors under 32768 elements or at one
///   thread (above that it splits the sum across its threads).
///
/// # Errors
/// Tensors of different or non-float dtypes, a NaN `norm_type`, or (with
/// `error_if_nonfinite`) a NaN or infinite total.
pub fn get_total_norm(
    tensors: &[Tensor],
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<Tensor> {
    const OP: &str = "get_total_norm";
    check_norm_type(OP, norm_type)?;
    if tensors.is_empty() {
        return Ok(Tensor::scalar(0.0f32));
    }
    let dt = common_dtype(OP, tensors)?;
    let inputs: Vec<&Tensor> = tensors.iter().collect();
    GET_TOTAL_NORM.run(&inputs, |_, par| with_real!(OP, dt, T => {
        let dense: Vec<Tensor> = tensors.iter().map(Tensor::try_contiguous).collect::<Result<_>>()?;
        let data: Vec<&[T]> = dense.iter().map(|c| c.data::<T>()).collect::<Result<_>>()?;
        // Each tensor's norm whole, by whichever thread takes it: the same bits.
        let mut norms = vec![T::ZERO; data.len()];
        let np = SyncPtr(norms.as_mut_ptr());
        let each = |i: usize| {
            let v = vector_norm::<T>(data[i], norm_type);
            // SAFETY: slot `i` is this call's alone, and `norms` outlives the calls.
            unsafe { *np.at(i) = v };
        };
        match data.iter().map(|d| d.len()).sum::<usize>() >= PAR_NORM_MIN {
            true => par.run_parts(data.len(), each),
            false => (0..data.len()).for_each(each),
        }
        let total = vector_norm::<T>(&norms, norm_type);
        if error_if_nonfinite && !total.to_f64().is_finite() {
            return Err(invalid(
                OP,
                "tensors",
                format!(
                    "The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
                ),
            ));
        }
        Ok::<_, Error>(Tensor::scalar(total))
    }))
}

multiversion! {
    fn scale_into<T>(g: &[T], c: T, out: &mut [MaybeUninit<T>]) {
        let out = &mut out[..g.len()];
        for i in 0..g.len() {
            out[i].write(g[i] * c);
        }
    }
}

multiversion! {
    fn clamp_into<T>(g: &[T], lo: T, hi: T, out: &mut [MaybeUninit<T>]) {
        let out = &mut out[..g.len()];
        for i in 0..g.len() {
            let x = g[i];
            // std::min(std::max(x, lo), hi), NaN kept
            out[i].write(if x.is_nan() {
                x
            } else if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            });
        }
    }
}

/// The gradients of `params` that exist, with their parameters.
fn grads_of(params: &[Var]) -> Vec<(&Var, Tensor)> {
    params
        .iter()
        .filter_map(|p| p.grad().map(|g| (p, g)))
        .collect()
}

/// `torch.nn.utils.clip_grads_with_norm_(params, max_norm, total_norm)`: multiplies every
/// gradient by `min(max_norm / (total_norm + 1e-6), 1)`, computed as PyTorch does in the
/// gradients' dtype (`reciprocal(total_norm + 1e-6) * max_norm`, clamped).
///
/// # Errors
/// Gradients of different or non-float dtypes, or `total_norm` not a one-element tensor.
pub fn clip_grads_with_norm_(params: &[Var], max_norm: f64, total_norm: &Tensor) -> Result<()> {
    const OP: &str = "clip_grads_with_norm_";
    let grads = grads_of(params);
    if grads.is_empty() {
        return Ok(());
    }
    if total_norm.numel() != 1 {
        return Err(invalid(
            OP,
            "total_norm",
            format!("must have one element, got shape {:?}", total_norm.shape()),
        ));
    }
    let gts: Vec<Tensor> = grads.iter().map(|(_, g)| g.clone()).collect();
    let dt = common_dtype(OP, &gts)?;
    let new = with_real!(OP, dt, T => {
        let total = T::from_f64(total_norm.to_f64_vec()[0]);
        // clip_coef = max_norm / (total_norm + 1e-6)  ==  (total_norm + 1e-6).reciprocal() * max_norm
        let coef = (T::ONE / (total + T::from_f64(1e-6))) * T::from_f64(max_norm);
        // torch.clamp(clip_coef, max=1.0)
        let coef = if coef.is_nan() || coef <= T::ONE { coef } else { T::ONE };
        let mut new = Vec::with_capacity(gts.len());
        // One dispatch per gradient: each traced with its own inputs.
        for g in &gts {
            let t = CLIP_GRADS_WITH_NORM.run(&[g, total_norm], |_, par| {
                let c = g.try_contiguous()?;
            let gd = c.data::<T>()?;
            let n = gd.len();
            let mut out: Vec<T> = lockstep_rng::try_with_capacity(OP, n)?;
            let op = SyncPtr(out.as_mut_ptr());
            super::for_each_range(par, n, |a, b| {
                // SAFETY: `out` has room for `n` values; the ranges are disjoint and all end
                // before `for_each_range` returns.
                let o = unsafe { core::slice::from_raw_parts_mut(op.at(a).cast::<MaybeUninit<T>>(), b - a) };
                scale_into(&gd[a..b], coef, o);
            });
            // SAFETY: the ranges cover `0..n`, and `scale_into` wrote each.
            unsafe { out.set_len(n) };
                Tensor::from_vec(out, g.shape())
            })?;
            new.push(t);
        }
        Ok::<_, Error>(new)
    })?;
    for ((p, _), g) in grads.iter().zip(new) {
        p.set_grad(Some(g))?;
    }
    Ok(())
}

/// `torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)`: scales the gradients of
/// `params` (those that have one) so that their total `norm_type`-norm is at most about
/// `max_norm`, and returns the total norm before clipping (a 0-dimensional tensor of the
/// gradients' dtype). Equivalent to [`get_total_norm`] then [`clip_grads_with_norm_`], as in
/// PyTorch; for `norm_type` 2 and ∞ both the norm and the clipped gradients are bit-identical
/// to PyTorch's on CPU.
///
/// # Errors
/// Gradients of different or non-float dtypes, or a NaN `norm_type`.
pub fn clip_grad_norm_(params: &[Var], max_norm: f64, norm_type: f64) -> Result<Tensor> {
    let grads: Vec<Tensor> = grads_of(params).into_iter().map(|(_, g)| g).collect();
    let total = get_total_norm(&grads, norm_type, false)?;
    clip_grads_with_norm_(params, max_norm, &total)?;
    Ok(total)
}

/// `torch.nn.utils.clip_grad_norm_(params, max_norm)` with PyTorch's default `norm_type`
/// 2: [`clip_grad_norm_`]`(params, max_norm, 2.0)`, bit-identical to PyTorch on CPU. Returns
/// the total norm before clipping.
///
/// # Errors
/// As [`clip_grad_norm_`].
pub fn clip_grad_l2_norm_(params: &[Var], max_norm: f64) -> Result<Tensor> {
    clip_grad_norm_(params, max_norm, 2.0)
}

/// `torch.nn.utils.clip_grad_value_(params, clip_value)`: clamps every gradient element into
/// `[-clip_value, clip_value]` (NaN stays NaN). Bit-identical to PyTorch.
///
/// # Errors
/// A gradient of a non-float dtype, or a NaN `clip_value`.
pub fn clip_grad_value_(params: &[Var], clip_value: f64) -> Result<()> {
    const OP: &str = "clip_grad_value_";
    if clip_value.is_nan() {
        return Err(invalid(OP, "clip_value", "must not be NaN"));
    }
    let grads = grads_of(params);
    let mut new = Vec::with_capacity(grads.len());
    for (_, g) in &grads {
        let t = CLIP_GRAD_VALUE.run(&[g], |_, _| {
            with_real!(OP, g.dtype(), T => {
                let c = g.try_contiguous()?;
            let gd = c.data::<T>()?;
            let n = gd.len();
            let mut out: Vec<T> = lockstep_rng::try_with_capacity(OP, n)?;
            let cells = &mut out.spare_capacity_mut()[..n];
            clamp_into(gd, T::from_f64(-clip_value), T::from_f64(clip_value), cells);
            // SAFETY: `clamp_into` wrote all `n` elements.
            unsafe { out.set_len(n) };
            Tensor::from_vec(out, g.shape())
            })
        })?;
        new.push(t);
    }
    for ((p, _), g) in grads.iter().zip(new) {
        p.set_grad(Some(g))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norm_shortcuts() {
        assert_eq!(vector_norm(&[-3.0f32], 2.0), 3.0);
        assert_eq!(vector_norm(&[3.0f32, -4.0], 2.0), 5.0);
        assert_eq!(vector_norm(&[3.0f32, -4.0], f64::INFINITY), 4.0);
        assert_eq!(vector_norm(&[3.0f32, -4.0], 1.0), 7.0);
        assert!(vector_norm(&[3.0f32, f32::NAN], f64::INFINITY).is_nan());
    }
}
