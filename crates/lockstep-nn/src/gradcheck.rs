//! `torch.autograd.gradcheck`: compares the gradients [`Var::backward`] computes with central
//! finite differences.
//!
//! [`gradcheck`] checks a function of fresh inputs; [`gradcheck_vars`] checks a closure with
//! respect to leaves it already holds (a module's parameters, for instance), perturbing their
//! values in place. In `f64` a step of about `1e-6` and a tolerance of `1e-6`–`1e-7` suit
//! smooth functions; in `f32` the step must be much larger (about `1e-2`–`1e-3`) and the
//! tolerance looser (about `1e-2`), since the rounding error of a difference quotient is about
//! `ε_f32 · |f| / step`.

use crate::autograd::{Var, no_grad};
use lockstep_tensor::{DType, Error, Result, Tensor};

/// Fixed weights `w` (a function of the position only) so that `Σ w·f(x)` exercises every
/// output element with a different coefficient; rounded to `out`'s dtype, so that the
/// analytic and the numerical side use the same weights.
fn weights(out: &Var) -> Vec<f64> {
    (0..out.numel())
        .map(|i| {
            let w = 0.5 + ((i as f64) * 0.7548776662).fract();
            if out.dtype() == DType::F32 {
                f64::from(w as f32)
            } else {
                w
            }
        })
        .collect()
}

fn scalar_loss(out: &Var, w: &[f64]) -> Result<Var> {
    let wt = match out.dtype() {
        DType::F32 => Tensor::from_vec(w.iter().map(|&x| x as f32).collect(), out.shape())?,
        _ => Tensor::from_vec(w.to_vec(), out.shape())?,
    };
    out.mul(&Var::constant(wt))?.sum()
}

/// `t` with element `i` moved by (about) `delta`, and the step actually taken: in `f32` the
/// perturbed value is rounded, so the step differs from `delta`.
fn with_element(t: &Tensor, i: usize, delta: f64) -> Result<(Tensor, f64)> {
    let mut v = t.to_f64_vec();
    let x = v[i];
    match t.dtype() {
        DType::F32 => {
            let moved = (x + delta) as f32;
            v[i] = f64::from(moved);
            let step = f64::from(moved) - x;
            Ok((
                Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), t.shape())?,
                step,
            ))
        }
        _ => {
            v[i] = x + delta;
            let step = v[i] - x;
            Ok((Tensor::from_vec(v, t.shape())?, step))
        }
    }
}

/// `Σ w · out` in f64.
fn weighted(out: &Var, w: &[f64]) -> f64 {
    out.data()
        .to_f64_vec()
        .iter()
        .zip(w)
        .map(|(a, b)| a * b)
        .sum()
}

fn compare(what: &'static str, k: usize, i: usize, a: f64, numeric: f64, tol: f64) -> Result<()> {
    if (a - numeric).abs() <= tol * (1.0 + numeric.abs()) {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        op: "gradcheck",
        arg: what,
        reason: format!("{what} {k}, element {i}: analytic gradient {a}, numerical {numeric}"),
    })
}

/// Checks `f`'s gradient with respect to each float tensor of `inputs` by central
/// differences with step `eps`: every element must satisfy `|analytic − numeric| ≤ tol·(1 +
/// |numeric|)`. The output is reduced with fixed weights, so every output element counts.
/// Inputs that are not float tensors (indices) are passed as constants and not checked.
///
/// `f` must be a deterministic function of its inputs (a dropout inside it must draw from a
/// generator reset on every call).
///
/// # Errors
/// The first element that differs (input, position, both values), or any error of `f`.
pub fn gradcheck(
    f: impl Fn(&[Var]) -> Result<Var>,
    inputs: &[Tensor],
    eps: f64,
    tol: f64,
) -> Result<()> {
    let vars: Vec<Var> = inputs.iter().map(|t| Var::new(t.clone(), true)).collect();
    let out = f(&vars)?;
    let w = weights(&out);
    scalar_loss(&out, &w)?.backward()?;
    for (k, t) in inputs.iter().enumerate() {
        if !t.dtype().is_float() {
            continue;
        }
        let analytic = vars[k]
            .grad()
            .map(|g| g.to_f64_vec())
            .unwrap_or_else(|| vec![0.0; t.numel()]);
        for i in 0..t.numel() {
            let eval = |delta: f64| -> Result<(f64, f64)> {
                no_grad(|| {
                    let mut vs: Vec<Var> =
                        inputs.iter().map(|t| Var::constant(t.clone())).collect();
                    let (moved, step) = with_element(t, i, delta)?;
                    vs[k] = Var::constant(moved);
                    Ok((weighted(&f(&vs)?, &w), step))
                })
            };
            let ((hi, s_hi), (lo, s_lo)) = (eval(eps)?, eval(-eps)?);
            compare("input", k, i, analytic[i], (hi - lo) / (s_hi - s_lo), tol)?;
        }
    }
    Ok(())
}

/// Checks the gradient of `f()` with respect to `vars` — leaves that `f` uses, such as a
/// module's parameters and an input it captured — by central differences with step `eps`,
/// perturbing each element of each leaf in place with [`Var::set_data`] and restoring it
/// afterwards. The criterion is [`gradcheck`]'s. Gradients already accumulated in `vars` are
/// cleared first and hold `f`'s afterwards.
///
/// `f` must be a deterministic function of the leaves' values (put dropout layers in eval
/// mode, or have them draw from a generator reset on every call).
///
/// # Errors
/// The first element that differs (leaf index, position, both values), a leaf that is not a
/// float tensor requiring a gradient, or any error of `f`.
pub fn gradcheck_vars(f: impl Fn() -> Result<Var>, vars: &[Var], eps: f64, tol: f64) -> Result<()> {
    for (k, v) in vars.iter().enumerate() {
        if !v.is_leaf() || !v.requires_grad() {
            return Err(Error::InvalidArgument {
                op: "gradcheck",
                arg: "vars",
                reason: format!(
                    "leaf {k} (shape {:?}) is not a leaf that requires a gradient",
                    v.shape()
                ),
            });
        }
        v.zero_grad();
    }
    let out = f()?;
    let w = weights(&out);
    scalar_loss(&out, &w)?.backward()?;
    for (k, v) in vars.iter().enumerate() {
        let orig = v.data();
        let analytic = v
            .grad()
            .map(|g| g.to_f64_vec())
            .unwrap_or_else(|| vec![0.0; v.numel()]);
        let result = (|| -> Result<()> {
            for i in 0..v.numel() {
                let eval = |delta: f64| -> Result<(f64, f64)> {
                    let (moved, step) = with_element(&orig, i, delta)?;
                    v.set_data(moved)?;
                    Ok((no_grad(|| f().map(|o| weighted(&o, &w)))?, step))
                };
                let ((hi, s_hi), (lo, s_lo)) = (eval(eps)?, eval(-eps)?);
                compare("leaf", k, i, analytic[i], (hi - lo) / (s_hi - s_lo), tol)?;
            }
            Ok(())
        })();
        v.set_data(orig)?;
        result?;
    }
    Ok(())
}
