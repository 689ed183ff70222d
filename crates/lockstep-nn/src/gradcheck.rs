//! `torch.autograd.gradcheck`: compares the gradients [`Var::backward`] computes with central
//! finite differences.

use crate::autograd::{Var, no_grad};
use lockstep_tensor::{DType, Error, Result, Tensor};

/// Fixed weights `w` (a function of the position only) so that `Σ w·f(x)` exercises every
/// output element with a different coefficient.
fn weights(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.5 + ((i as f64) * 0.7548776662).fract())
        .collect()
}

fn scalar_loss(out: &Var, w: &[f64]) -> Result<Var> {
    let wt = match out.dtype() {
        DType::F32 => Tensor::from_vec(w.iter().map(|&x| x as f32).collect(), out.shape())?,
        _ => Tensor::from_vec(w.to_vec(), out.shape())?,
    };
    out.mul(&Var::constant(wt))?.sum()
}

fn with_element(t: &Tensor, i: usize, delta: f64) -> Result<Tensor> {
    let mut v = t.to_f64_vec();
    v[i] += delta;
    match t.dtype() {
        DType::F32 => Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), t.shape()),
        _ => Tensor::from_vec(v, t.shape()),
    }
}

/// Checks `f`'s gradient with respect to each of `inputs` (float tensors) by central
/// differences with step `eps`: every element must satisfy `|analytic − numeric| ≤ tol·(1 +
/// |numeric|)`. The output is reduced with fixed weights, so every output element counts.
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
    let w = weights(out.numel());
    scalar_loss(&out, &w)?.backward()?;
    for (k, t) in inputs.iter().enumerate() {
        let analytic = vars[k]
            .grad()
            .map(|g| g.to_f64_vec())
            .unwrap_or_else(|| vec![0.0; t.numel()]);
        for i in 0..t.numel() {
            let eval = |delta: f64| -> Result<f64> {
                no_grad(|| {
                    let mut vs: Vec<Var> =
                        inputs.iter().map(|t| Var::constant(t.clone())).collect();
                    vs[k] = Var::constant(with_element(t, i, delta)?);
                    let o = f(&vs)?;
                    let v = o.data().to_f64_vec();
                    Ok(v.iter().zip(&w).map(|(a, b)| a * b).sum())
                })
            };
            let numeric = (eval(eps)? - eval(-eps)?) / (2.0 * eps);
            let a = analytic[i];
            if !((a - numeric).abs() <= tol * (1.0 + numeric.abs())) {
                return Err(Error::InvalidArgument {
                    op: "gradcheck",
                    arg: "inputs",
                    reason: format!(
                        "input {k}, element {i}: analytic gradient {a}, numerical {numeric}"
                    ),
                });
            }
        }
    }
    Ok(())
}
