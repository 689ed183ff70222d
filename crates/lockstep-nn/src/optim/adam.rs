//! Adam and AdamW (`torch.optim.Adam`, `torch.optim.AdamW`), as `_single_tensor_adam`
//! computes them (AdamW is Adam with `decoupled_weight_decay=True`, as in PyTorch).

use super::{
    Buf, Optimizer, Real, check_hyper, check_params, dense, fit_buffer, fit_step, multiversion,
    parse_state_name, with_real,
};
use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{Result, Tensor};
use std::hint::black_box;

/// The hyperparameters of [`Adam`], with PyTorch's names and defaults
/// (`Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
/// maximize=False, decoupled_weight_decay=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamOptions {
    /// Learning rate.
    pub lr: f64,
    /// Decay rates of the running averages of the gradient and of its square.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay: an L2 penalty added to the gradient, or (with
    /// `decoupled_weight_decay`) a shrinking of the parameter by `1 - lr * weight_decay`.
    pub weight_decay: f64,
    /// The AMSGrad variant (keeps the running maximum of `exp_avg_sq`).
    pub amsgrad: bool,
    /// Maximize the objective.
    pub maximize: bool,
    /// AdamW's decoupled weight decay.
    pub decoupled_weight_decay: bool,
}

impl Default for AdamOptions {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            maximize: false,
            decoupled_weight_decay: false,
        }
    }
}

/// The hyperparameters of [`AdamW`], with PyTorch's defaults (`AdamW(params, lr=1e-3,
/// betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWOptions {
    /// Learning rate.
    pub lr: f64,
    /// Decay rates of the running averages of the gradient and of its square.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Decoupled weight decay: each step first multiplies the parameter by
    /// `1 - lr * weight_decay`.
    pub weight_decay: f64,
    /// The AMSGrad variant.
    pub amsgrad: bool,
    /// Maximize the objective.
    pub maximize: bool,
}

impl Default for AdamWOptions {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
            maximize: false,
        }
    }
}

impl From<AdamWOptions> for AdamOptions {
    fn from(o: AdamWOptions) -> Self {
        Self {
            lr: o.lr,
            betas: o.betas,
            eps: o.eps,
            weight_decay: o.weight_decay,
            amsgrad: o.amsgrad,
            maximize: o.maximize,
            decoupled_weight_decay: true,
        }
    }
}

/// The state of one parameter (created at its first step with a gradient).
#[derive(Clone, Debug)]
struct ParamState {
    /// The number of steps taken, counted in `f32` as PyTorch's `step` tensor is.
    step: f32,
    exp_avg: Buf,
    exp_avg_sq: Buf,
    max_exp_avg_sq: Option<Buf>,
}

/// `torch.optim.Adam` over one parameter group.
///
/// For each parameter with a gradient `g` (negated when `maximize`), with `step += 1` in `f32`
/// and PyTorch's order and rounding (`fma` = one rounding, as PyTorch's CPU kernels fuse):
/// ```text
/// param *= 1 - lr * weight_decay                          decoupled (AdamW), if weight_decay != 0
/// g = fma(param, weight_decay, g)                          otherwise,          if weight_decay != 0
/// exp_avg = lerp(exp_avg, g, 1 - beta1)                    (fused, PyTorch's two-sided lerp)
/// exp_avg_sq = fma((1 - beta2) * g, g, exp_avg_sq * beta2)
/// max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)     amsgrad
/// denom = sqrt(exp_avg_sq or max_exp_avg_sq) / sqrt(1 - beta2**step) + eps
/// param = param + (-(lr / (1 - beta1**step)) * exp_avg) / denom
/// ```
/// where the scalar factors are computed in `f64` as Python computes them (`**` is C's `pow`)
/// and rounded to the parameter's dtype once. Bit-identical to PyTorch wherever PyTorch's
/// `torch.sqrt` is correctly rounded (see the [module documentation](super)).
#[derive(Debug)]
pub struct Adam {
    params: Vec<Var>,
    opts: AdamOptions,
    initial_lr: Option<f64>,
    state: Vec<Option<ParamState>>,
    name: &'static str,
}

/// `torch.optim.AdamW`: [`Adam`] with decoupled weight decay (default `weight_decay=1e-2`).
///
/// Derefs to [`Adam`] for its accessors; implements [`Optimizer`] identically.
#[derive(Debug)]
pub struct AdamW(Adam);

impl Adam {
    /// An optimizer over `params` (`torch.optim.Adam(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `eps` or `weight_decay`, a beta outside
    /// `[0, 1)`; a parameter that is not a float leaf, or one listed twice.
    pub fn new(params: Vec<Var>, opts: AdamOptions) -> Result<Self> {
        Self::build(params, opts, "Adam")
    }

    fn build(params: Vec<Var>, opts: AdamOptions, name: &'static str) -> Result<Self> {
        check_hyper(name, "lr", opts.lr >= 0.0, "learning rate", opts.lr)?;
        check_hyper(name, "eps", opts.eps >= 0.0, "epsilon value", opts.eps)?;
        let (b1, b2) = opts.betas;
        check_hyper(
            name,
            "betas",
            (0.0..1.0).contains(&b1),
            "beta parameter at index 0",
            b1,
        )?;
        check_hyper(
            name,
            "betas",
            (0.0..1.0).contains(&b2),
            "beta parameter at index 1",
            b2,
        )?;
        check_hyper(
            name,
            "weight_decay",
            opts.weight_decay >= 0.0,
            "weight_decay value",
            opts.weight_decay,
        )?;
        check_params(name, &params)?;
        let n = params.len();
        Ok(Self {
            params,
            opts,
            initial_lr: None,
            state: vec![None; n],
            name,
        })
    }

    /// The hyperparameters (the learning rate as last set).
    pub fn options(&self) -> AdamOptions {
        self.opts
    }
}

impl AdamW {
    /// An optimizer over `params` (`torch.optim.AdamW(params, ...)`).
    ///
    /// # Errors
    /// As [`Adam::new`].
    pub fn new(params: Vec<Var>, opts: AdamWOptions) -> Result<Self> {
        Adam::build(params, opts.into(), "AdamW").map(Self)
    }
}

impl core::ops::Deref for AdamW {
    type Target = Adam;
    fn deref(&self) -> &Adam {
        &self.0
    }
}

/// The per-step constants of one parameter, rounded to its dtype where PyTorch rounds them.
struct Consts<T> {
    maximize: bool,
    /// `grad.add(param, alpha=weight_decay)` (coupled weight decay).
    weight_decay: Option<T>,
    /// `param.mul_(1 - lr * weight_decay)` (decoupled weight decay).
    decay: Option<T>,
    /// `lerp_` weight `1 - beta1`.
    w1: T,
    beta2: T,
    /// `addcmul_` value `1 - beta2`.
    c2: T,
    /// `sqrt(1 - beta2**step)`.
    bias_correction2_sqrt: T,
    eps: T,
    /// `addcdiv_` value `-lr / (1 - beta1**step)`.
    neg_step_size: T,
}

/// PyTorch's CPU `lerp` with a scalar weight (`LerpKernel`): `self + w * (end - self)` for
/// `|w| < 0.5`, else `end - (end - self) * (1 - w)`, each one fused multiply-add.
#[inline(always)]
fn lerp<T: Real>(start: T, end: T, w: T, w_small: bool, w_minus_one: T) -> T {
    let diff = end - start;
    if w_small {
        w.mul_add(diff, start)
    } else {
        w_minus_one.mul_add(diff, end)
    }
}

/// `torch.maximum`: NaN if either is NaN.
#[inline(always)]
fn maximum<T: Real>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() {
        b
    } else if a > b {
        a
    } else {
        b
    }
}

multiversion! {
    /// One Adam update of one parameter: the new values into `out`, the moments (and, with
    /// amsgrad, their running maximum `vmax`; empty otherwise) updated in place.
    fn adam_kernel<T>(
        p: &[T],
        g: &[T],
        m: &mut [T],
        v: &mut [T],
        vmax: &mut [T],
        amsgrad: bool,
        out: &mut [T],
        k: &Consts<T>,
    ) {
        let w_small = k.w1.abs() < T::from_f64(0.5);
        let w_minus_one = k.w1 - T::ONE;
        let n = p.len();
        let (g, m, v, out) = (&g[..n], &mut m[..n], &mut v[..n], &mut out[..n]);
        let vmax = if amsgrad { &mut vmax[..n] } else { &mut vmax[..0] };
        for i in 0..n {
            let mut grad = if k.maximize { -g[i] } else { g[i] };
            let mut param = p[i];
            // param.mul_(1 - lr * weight_decay)
            if let Some(d) = k.decay {
                param = param * d;
            }
            // grad = grad.add(param, alpha=weight_decay)
            if let Some(wd) = k.weight_decay {
                grad = param.mul_add(wd, grad);
            }
            // exp_avg.lerp_(grad, 1 - beta1)
            let ea = lerp(m[i], grad, k.w1, w_small, w_minus_one);
            m[i] = ea;
            // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            let sq = (k.c2 * grad).mul_add(grad, v[i] * k.beta2);
            v[i] = sq;
            // torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
            let src = if amsgrad {
                let x = maximum(vmax[i], sq);
                vmax[i] = x;
                x
            } else {
                sq
            };
            // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            let denom = src.sqrt() / k.bias_correction2_sqrt + k.eps;
            // param.addcdiv_(exp_avg, denom, value=-step_size)
            out[i] = param + (k.neg_step_size * ea) / denom;
        }
    }
}

/// Python's `x ** y` for floats, from the portable `lockstep_tensor::math::pow` (bit-equal to
/// glibc's on every golden case; `black_box` keeps the compiler from rewriting it, e.g.
/// `pow(x, 0.5)` as `sqrt(x)`).
fn py_pow(x: f64, y: f64) -> f64 {
    lockstep_tensor::math::pow(x, black_box(y))
}

impl Adam {
    fn step_impl(&mut self) -> Result<()> {
        for i in 0..self.params.len() {
            let p = &self.params[i];
            let Some(g) = p.grad() else { continue };
            with_real!(self.name, p.dtype(), T => self.update::<T>(i, &g))?;
        }
        Ok(())
    }

    fn update<T: Real>(&mut self, i: usize, g: &Tensor) -> Result<()> {
        let o = self.opts;
        let p = &self.params[i];
        let n = p.numel();
        let st = self.state[i].get_or_insert_with(|| ParamState {
            step: 0.0,
            exp_avg: Buf::zeros(T::DTYPE, n),
            exp_avg_sq: Buf::zeros(T::DTYPE, n),
            max_exp_avg_sq: o.amsgrad.then(|| Buf::zeros(T::DTYPE, n)),
        });
        // step_t += 1 (a float32 tensor); step = step_t.item()
        st.step += 1.0;
        let step = f64::from(st.step);
        let (b1, b2) = o.betas;
        let bias_correction1 = 1.0 - py_pow(b1, step);
        let bias_correction2 = 1.0 - py_pow(b2, step);
        let step_size = o.lr / bias_correction1;
        let bias_correction2_sqrt = py_pow(bias_correction2, 0.5);
        let wd = o.weight_decay != 0.0;
        let k = Consts::<T> {
            maximize: o.maximize,
            weight_decay: (wd && !o.decoupled_weight_decay).then(|| T::from_f64(o.weight_decay)),
            decay: (wd && o.decoupled_weight_decay)
                .then(|| T::from_f64(1.0 - o.lr * o.weight_decay)),
            w1: T::from_f64(1.0 - b1),
            beta2: T::from_f64(b2),
            c2: T::from_f64(1.0 - b2),
            bias_correction2_sqrt: T::from_f64(bias_correction2_sqrt),
            eps: T::from_f64(o.eps),
            neg_step_size: T::from_f64(-step_size),
        };
        let pv = p.data();
        let pd = dense::<T>(&pv)?;
        let gd = dense::<T>(g)?;
        let mut none = Vec::new();
        let vmax = match &mut st.max_exp_avg_sq {
            Some(b) => T::buf(b),
            None => &mut none,
        };
        let mut out = vec![T::ZERO; n];
        adam_kernel(
            &pd,
            &gd,
            T::buf(&mut st.exp_avg),
            T::buf(&mut st.exp_avg_sq),
            vmax,
            o.amsgrad,
            &mut out,
            &k,
        );
        p.set_data(Tensor::from_vec(out, p.shape())?)
    }

    fn state_impl(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (i, s) in self.state.iter().enumerate() {
            let Some(s) = s else { continue };
            out.push((format!("state.{i}.step"), Tensor::scalar(s.step)));
            let shape = self.params[i].shape();
            out.push((format!("state.{i}.exp_avg"), s.exp_avg.to_tensor(shape)));
            out.push((
                format!("state.{i}.exp_avg_sq"),
                s.exp_avg_sq.to_tensor(shape),
            ));
            if let Some(m) = &s.max_exp_avg_sq {
                out.push((format!("state.{i}.max_exp_avg_sq"), m.to_tensor(shape)));
            }
        }
        out
    }

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let name = self.name;
        let n = self.params.len();
        #[derive(Default, Clone)]
        struct Parts {
            step: Option<f32>,
            exp_avg: Option<Tensor>,
            exp_avg_sq: Option<Tensor>,
            max_exp_avg_sq: Option<Tensor>,
        }
        let mut parts = vec![Parts::default(); n];
        for (full, t) in state {
            let (i, key) = parse_state_name(name, full, n)?;
            let p = &self.params[i];
            let slot = &mut parts[i];
            match key {
                "step" => slot.step = Some(fit_step(name, full, t)?),
                "exp_avg" => slot.exp_avg = Some(fit_buffer(name, full, t, p)?),
                "exp_avg_sq" => slot.exp_avg_sq = Some(fit_buffer(name, full, t, p)?),
                "max_exp_avg_sq" if self.opts.amsgrad => {
                    slot.max_exp_avg_sq = Some(fit_buffer(name, full, t, p)?)
                }
                "max_exp_avg_sq" => {
                    return Err(invalid(
                        name,
                        "state",
                        format!("`{full}`: max_exp_avg_sq given but amsgrad is off"),
                    ));
                }
                _ => {
                    return Err(invalid(
                        name,
                        "state",
                        format!("`{full}`: {name} keeps step, exp_avg, exp_avg_sq, max_exp_avg_sq"),
                    ));
                }
            }
        }
        let mut new = Vec::with_capacity(n);
        for (i, pt) in parts.into_iter().enumerate() {
            new.push(match pt {
                Parts {
                    step: None,
                    exp_avg: None,
                    exp_avg_sq: None,
                    max_exp_avg_sq: None,
                } => None,
                Parts {
                    step: Some(step),
                    exp_avg: Some(exp_avg),
                    exp_avg_sq: Some(exp_avg_sq),
                    max_exp_avg_sq,
                } if max_exp_avg_sq.is_some() == self.opts.amsgrad => Some(ParamState {
                    step,
                    exp_avg: Buf::from_tensor(&exp_avg)?,
                    exp_avg_sq: Buf::from_tensor(&exp_avg_sq)?,
                    max_exp_avg_sq: max_exp_avg_sq.as_ref().map(Buf::from_tensor).transpose()?,
                }),
                _ => {
                    return Err(invalid(
                        name,
                        "state",
                        format!(
                            "the state of parameter {i} is incomplete: it needs step, exp_avg, exp_avg_sq{}",
                            if self.opts.amsgrad {
                                " and max_exp_avg_sq (amsgrad)"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
            });
        }
        self.state = new;
        Ok(())
    }
}

macro_rules! adam_optimizer {
    ($ty:ty, $($inner:tt)*) => {
        impl Optimizer for $ty {
            fn step(&mut self) -> Result<()> {
                self$($inner)*.step_impl()
            }
            fn params(&self) -> &[Var] {
                &self$($inner)*.params
            }
            fn lr(&self) -> f64 {
                self$($inner)*.opts.lr
            }
            fn set_lr(&mut self, lr: f64) {
                self$($inner)*.opts.lr = lr;
            }
            fn initial_lr(&self) -> Option<f64> {
                self$($inner)*.initial_lr
            }
            fn set_initial_lr(&mut self, lr: Option<f64>) {
                self$($inner)*.initial_lr = lr;
            }
            fn state(&self) -> Vec<(String, Tensor)> {
                self$($inner)*.state_impl()
            }
            fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
                self$($inner)*.load_state_impl(state)
            }
        }
    };
}
adam_optimizer!(Adam,);
adam_optimizer!(AdamW, .0);
