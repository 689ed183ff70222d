//! L-BFGS (`torch.optim.LBFGS`), PyTorch's algorithm without a line search
//! (`line_search_fn=None`).

use super::group::check_params;
use super::{Real, check_hyper, dense, with_real};
use crate::autograd::Var;
use lockstep_tensor::{Result, Tensor};

const OP: &str = "LBFGS";

/// The hyperparameters of [`LBFGS`], with PyTorch's names and defaults
/// (`LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
/// tolerance_change=1e-9, history_size=100, line_search_fn=None)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LBFGSOptions {
    /// The step length (scaled down on the very first iteration, as PyTorch).
    pub lr: f64,
    /// Iterations per [`LBFGS::step`].
    pub max_iter: usize,
    /// Closure evaluations per step; `None` is PyTorch's `max_iter * 5 // 4`.
    pub max_eval: Option<usize>,
    /// Stop when every gradient element is at most this in magnitude.
    pub tolerance_grad: f64,
    /// Stop when the loss or the step changes by less than this.
    pub tolerance_change: f64,
    /// Correction pairs kept.
    pub history_size: usize,
}

impl Default for LBFGSOptions {
    fn default() -> Self {
        Self {
            lr: 1.0,
            max_iter: 20,
            max_eval: None,
            tolerance_grad: 1e-7,
            tolerance_change: 1e-9,
            history_size: 100,
        }
    }
}

/// `torch.optim.LBFGS` over one parameter group, without a line search.
///
/// [`step`](Self::step) takes the closure PyTorch's `step(closure)` takes (clear the
/// gradients, compute the loss, `backward()`, return the loss) and runs PyTorch's loop: the
/// two-loop recursion over the stored pairs, the first step length `min(1, 1/|g|₁)·lr`, the
/// fixed step `lr` after it, and PyTorch's stopping tests in its order. All parameters share
/// one dtype (f32 or f64), in which the vector arithmetic is done: each element operation is
/// rounded to it, `add(…, alpha=)` as one fused multiply-add as PyTorch's CPU kernels; dot
/// products and sums are accumulated in f64 and rounded once, so they may differ from
/// PyTorch's (BLAS-ordered) ones in the last bit. The state (history, direction, step) is
/// kept between calls, as PyTorch keeps it.
#[allow(clippy::upper_case_acronyms)] // PyTorch's name
pub struct LBFGS {
    params: Vec<Var>,
    opts: LBFGSOptions,
    st: State,
}

#[derive(Default)]
struct State {
    func_evals: usize,
    n_iter: usize,
    d: Vec<f64>,
    t: f64,
    old_dirs: Vec<Vec<f64>>,
    old_stps: Vec<Vec<f64>>,
    ro: Vec<f64>,
    h_diag: f64,
    prev_flat_grad: Option<Vec<f64>>,
    prev_loss: f64,
}

impl std::fmt::Debug for LBFGS {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LBFGS")
            .field("opts", &self.opts)
            .field("n_iter", &self.st.n_iter)
            .field("func_evals", &self.st.func_evals)
            .finish()
    }
}

impl LBFGS {
    /// An optimizer over `params` (`torch.optim.LBFGS(params, ...)`).
    ///
    /// # Errors
    /// A negative or NaN `lr`, a zero `max_iter` or `history_size`; parameters that are not
    /// float leaves, listed twice, or of different dtypes.
    pub fn new(params: Vec<Var>, opts: LBFGSOptions) -> Result<Self> {
        check_hyper(OP, "lr", opts.lr >= 0.0, "learning rate", opts.lr)?;
        check_hyper(OP, "max_iter", opts.max_iter > 0, "max_iter", opts.max_iter)?;
        check_hyper(
            OP,
            "history_size",
            opts.history_size > 0,
            "history_size",
            opts.history_size,
        )?;
        check_params(OP, &params, 0)?;
        if let Some(p) = params.iter().find(|p| p.dtype() != params[0].dtype()) {
            return Err(crate::ops::invalid(
                OP,
                "params",
                format!(
                    "all parameters must have one dtype (LBFGS works on their concatenation), got {:?} and {:?}",
                    params[0].dtype(),
                    p.dtype()
                ),
            ));
        }
        Ok(Self {
            params,
            opts,
            st: State::default(),
        })
    }

    /// The parameters, in order.
    pub fn params(&self) -> &[Var] {
        &self.params
    }

    /// Clears every parameter's gradient (`opt.zero_grad()`).
    pub fn zero_grad(&self) {
        for p in &self.params {
            p.zero_grad();
        }
    }

    /// The number of closure evaluations so far (`state['func_evals']`).
    pub fn func_evals(&self) -> usize {
        self.st.func_evals
    }

    /// The number of iterations so far (`state['n_iter']`).
    pub fn n_iter(&self) -> usize {
        self.st.n_iter
    }

    /// One `opt.step(closure)`: returns the closure's first loss (`orig_loss`).
    ///
    /// # Errors
    /// The closure's errors; a parameter whose dtype is not the first's.
    pub fn step(&mut self, mut closure: impl FnMut() -> Result<Var>) -> Result<Var> {
        match self.params.first() {
            None => closure(),
            Some(p) => with_real!(OP, p.dtype(), T => self.step_as::<T>(&mut closure)),
        }
    }

    fn step_as<T: Real>(&mut self, closure: &mut dyn FnMut() -> Result<Var>) -> Result<Var> {
        // Each scalar or element result rounded to the parameters' dtype.
        let r = |x: f64| T::from_f64(x).to_f64();
        let dot = |a: &[f64], b: &[f64]| r(a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>());
        // x + alpha * y, rounded once (PyTorch's CPU add with alpha).
        let axpy = |x: &mut [f64], alpha: f64, y: &[f64]| {
            let a = T::from_f64(alpha);
            for (x, &y) in x.iter_mut().zip(y) {
                *x = T::from_f64(y).mul_add(a, T::from_f64(*x)).to_f64();
            }
        };
        let o = self.opts;
        let max_eval = o.max_eval.unwrap_or(o.max_iter * 5 / 4);

        let orig_loss = crate::autograd::set_grad_enabled(true, &mut *closure)?;
        let mut loss = value(&orig_loss)?;
        let mut current_evals = 1;
        self.st.func_evals += 1;
        let mut flat_grad = flat_grad_of::<T>(&self.params)?;
        let max_abs = |g: &[f64]| g.iter().fold(0f64, |m, v| m.max(v.abs()));
        let mut opt_cond = max_abs(&flat_grad) <= o.tolerance_grad;
        if opt_cond {
            return Ok(orig_loss);
        }

        let st = &mut self.st;
        let mut n_iter = 0;
        while n_iter < o.max_iter {
            n_iter += 1;
            st.n_iter += 1;
            if st.n_iter == 1 {
                st.d = flat_grad.iter().map(|g| -g).collect();
                st.old_dirs.clear();
                st.old_stps.clear();
                st.ro.clear();
                st.h_diag = 1.0;
            } else {
                let prev = st
                    .prev_flat_grad
                    .as_ref()
                    .expect("set on the first iteration");
                let y: Vec<f64> = flat_grad.iter().zip(prev).map(|(a, b)| r(a - b)).collect();
                let s: Vec<f64> = st.d.iter().map(|d| r(d * st.t)).collect();
                let ys = dot(&y, &s);
                if ys > 1e-10 {
                    if st.old_dirs.len() == o.history_size {
                        st.old_dirs.remove(0);
                        st.old_stps.remove(0);
                        st.ro.remove(0);
                    }
                    st.ro.push(r(1.0 / ys));
                    st.h_diag = r(ys / dot(&y, &y));
                    st.old_dirs.push(y);
                    st.old_stps.push(s);
                }
                let num_old = st.old_dirs.len();
                let mut al = vec![0f64; num_old];
                let mut q: Vec<f64> = flat_grad.iter().map(|g| -g).collect();
                for i in (0..num_old).rev() {
                    al[i] = r(dot(&st.old_stps[i], &q) * st.ro[i]);
                    axpy(&mut q, -al[i], &st.old_dirs[i]);
                }
                let mut d: Vec<f64> = q.iter().map(|v| r(v * st.h_diag)).collect();
                for i in 0..num_old {
                    let be_i = r(dot(&st.old_dirs[i], &d) * st.ro[i]);
                    axpy(&mut d, r(al[i] - be_i), &st.old_stps[i]);
                }
                st.d = d;
            }
            st.prev_flat_grad = Some(flat_grad.clone());
            st.prev_loss = loss;

            st.t = if st.n_iter == 1 {
                let l1 = r(flat_grad.iter().map(|g| g.abs()).sum::<f64>());
                // min(1., 1. / tensor) * lr: a tensor (rounded) when the reciprocal is smaller.
                let inv = r(1.0 / l1);
                if 1.0 <= inv { o.lr } else { r(inv * o.lr) }
            } else {
                o.lr
            };
            let gtd = dot(&flat_grad, &st.d);
            if gtd > -o.tolerance_change {
                break;
            }

            let mut ls_func_evals = 0;
            add_grad::<T>(&self.params, st.t, &st.d)?;
            if n_iter != o.max_iter {
                let l = crate::autograd::set_grad_enabled(true, &mut *closure)?;
                loss = value(&l)?;
                flat_grad = flat_grad_of::<T>(&self.params)?;
                opt_cond = max_abs(&flat_grad) <= o.tolerance_grad;
                ls_func_evals = 1;
            }
            current_evals += ls_func_evals;
            st.func_evals += ls_func_evals;

            if n_iter == o.max_iter
                || current_evals >= max_eval
                || opt_cond
                || st.d.iter().fold(0f64, |m, d| m.max(r(d * st.t).abs())) <= o.tolerance_change
                || (loss - st.prev_loss).abs() < o.tolerance_change
            {
                break;
            }
        }
        Ok(orig_loss)
    }
}

/// `torch.cat([p.grad.view(-1)])`, zeros for a parameter without a gradient.
fn flat_grad_of<T: Real>(params: &[Var]) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for p in params {
        match p.grad() {
            Some(g) => out.extend(dense::<T>(&g)?.iter().map(|v| v.to_f64())),
            None => out.extend(std::iter::repeat_n(0.0, p.numel())),
        }
    }
    Ok(out)
}

/// `p.add_(update[offset:offset + numel].view_as(p), alpha=step)` for each parameter.
fn add_grad<T: Real>(params: &[Var], step: f64, update: &[f64]) -> Result<()> {
    let a = T::from_f64(step);
    let mut off = 0;
    for p in params {
        let n = p.numel();
        let pv = p.data();
        let pd = dense::<T>(&pv)?;
        let out: Vec<T> = pd
            .iter()
            .zip(&update[off..off + n])
            .map(|(&x, &u)| T::from_f64(u).mul_add(a, x))
            .collect();
        p.set_data(Tensor::from_vec(out, p.shape())?)?;
        off += n;
    }
    Ok(())
}

/// `float(loss)`.
fn value(loss: &Var) -> Result<f64> {
    let t = loss.data();
    match t.dtype() {
        lockstep_tensor::DType::F32 => Ok(t.item::<f32>()? as f64),
        _ => t.try_to_dtype(lockstep_tensor::DType::F64)?.item::<f64>(),
    }
}
