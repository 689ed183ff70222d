//! Adam and AdamW (`torch.optim.Adam`, `torch.optim.AdamW`), as `_single_tensor_adam`
//! computes them (AdamW is Adam with `decoupled_weight_decay=True`, as in PyTorch).

use super::group::{Core, Group, Hyper, Slots, impl_optimizer, options_accessors};
use super::{Real, check_hyper, dense, for_each_range, multiversion, with_real};
use crate::autograd::Var;
use core::mem::MaybeUninit;
use lockstep_tensor::threads::{Par, SyncPtr};
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

impl Hyper for AdamOptions {
    const HAS_STEP: bool = true;
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
    fn check(&self, name: &'static str) -> Result<()> {
        check_hyper(name, "lr", self.lr >= 0.0, "learning rate", self.lr)?;
        check_hyper(name, "eps", self.eps >= 0.0, "epsilon value", self.eps)?;
        let (b1, b2) = self.betas;
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
            self.weight_decay >= 0.0,
            "weight_decay value",
            self.weight_decay,
        )
    }
    fn keys(&self) -> Vec<&'static str> {
        let mut k = vec!["exp_avg", "exp_avg_sq"];
        if self.amsgrad {
            k.push("max_exp_avg_sq");
        }
        k
    }
    fn refuse_key(&self, key: &str) -> Option<String> {
        (key == "max_exp_avg_sq" && !self.amsgrad)
            .then(|| "max_exp_avg_sq given but amsgrad is off".to_string())
    }
}

/// `torch.optim.Adam`, over one parameter group ([`new`](Self::new)) or several, each with
/// its own options ([`with_groups`](Self::with_groups)).
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
/// where the scalar factors (of the parameter's group) are computed in `f64` as Python
/// computes them (`**` is C's `pow`) and rounded to the parameter's dtype once.
/// Bit-identical to PyTorch wherever PyTorch's `torch.sqrt` is correctly rounded (see the
/// [module documentation](super)).
#[derive(Debug)]
pub struct Adam {
    core: Core<AdamOptions>,
}

/// `torch.optim.AdamW`: [`Adam`] with decoupled weight decay (default `weight_decay=1e-2`).
///
/// Derefs to [`Adam`] for its accessors; implements [`Optimizer`](super::Optimizer)
/// identically. Groups with their own weight decay (PyTorch's usual "no decay for biases
/// and norms"):
/// ```
/// use lockstep_nn::Var;
/// use lockstep_nn::optim::{AdamW, AdamWOptions, Group, Optimizer};
/// use lockstep_tensor::Tensor;
///
/// let weight = Var::new(Tensor::from_vec(vec![1.0f32, -2.0], &[2])?, true);
/// let bias = Var::new(Tensor::from_vec(vec![0.5f32], &[1])?, true);
/// let opts = AdamWOptions { lr: 1e-3, ..Default::default() };
/// // torch.optim.AdamW([{"params": [weight], "weight_decay": 0.1},
/// //                    {"params": [bias], "weight_decay": 0.0}], lr=1e-3)
/// let mut opt = AdamW::with_groups(vec![
///     Group::new(vec![weight.clone()], AdamWOptions { weight_decay: 0.1, ..opts }),
///     Group::new(vec![bias.clone()], AdamWOptions { weight_decay: 0.0, ..opts }),
/// ])?;
/// assert_eq!(opt.param_groups().len(), 2);
/// assert_eq!(opt.group_options(1).unwrap().weight_decay, 0.0);
/// // opt.param_groups[1]["lr"] = 1e-4
/// opt.param_groups_mut()[1].lr = 1e-4;
/// assert_eq!(opt.group_options(1).unwrap().lr, 1e-4);
/// # Ok::<(), lockstep_tensor::Error>(())
/// ```
#[derive(Debug)]
pub struct AdamW(Adam);

impl Adam {
    /// An optimizer over `params`, one group (`torch.optim.Adam(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `eps` or `weight_decay`, a beta outside
    /// `[0, 1)`; a parameter that is not a float leaf, or one listed twice.
    pub fn new(params: Vec<Var>, opts: AdamOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.Adam([{"params": ..., "weight_decay": ...}, ...])`).
    ///
    /// # Errors
    /// As [`new`](Self::new), for each group; no groups; a parameter in two groups.
    pub fn with_groups(groups: Vec<Group<AdamOptions>>) -> Result<Self> {
        Ok(Self {
            core: Core::new("Adam", groups)?,
        })
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<AdamOptions>) -> Result<()> {
        self.core.add_group(group)
    }

    options_accessors!(AdamOptions);
}

impl AdamW {
    /// An optimizer over `params`, one group (`torch.optim.AdamW(params, ...)`).
    ///
    /// # Errors
    /// As [`Adam::new`].
    pub fn new(params: Vec<Var>, opts: AdamWOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay,
    /// "weight_decay": 0.0}], lr=...)`; see the example on [`AdamW`]).
    ///
    /// # Errors
    /// As [`Adam::with_groups`].
    pub fn with_groups(groups: Vec<Group<AdamWOptions>>) -> Result<Self> {
        let groups = groups
            .into_iter()
            .map(|g| Group::new(g.params, g.options.into()))
            .collect();
        Ok(Self(Adam {
            core: Core::new("AdamW", groups)?,
        }))
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<AdamWOptions>) -> Result<()> {
        self.0
            .core
            .add_group(Group::new(group.params, group.options.into()))
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
        out: &mut [MaybeUninit<T>],
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
            out[i].write(param + (k.neg_step_size * ea) / denom);
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
        let name = self.core.name;
        self.core.for_each_grad(|o, p, g, slot| {
            let new = crate::ops::ADAM.run(
                &[&p.data(), g],
                |_, par| with_real!(name, p.dtype(), T => update::<T>(o, p, g, slot, par)),
            )?;
            p.set_data(new)
        })
    }

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.core.state = self.core.parse_state(state)?;
        Ok(())
    }
}

impl AdamW {
    fn step_impl(&mut self) -> Result<()> {
        self.0.step_impl()
    }

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.0.load_state_impl(state)
    }
}

impl_optimizer!(Adam, .core);
impl_optimizer!(AdamW, .0.core);

/// Parameter `p`'s new value after one Adam update (its state in `slot`, created at its first
/// step), on the threads `par`.
fn update<T: Real>(
    o: &AdamOptions,
    p: &Var,
    g: &Tensor,
    slot: &mut Option<Slots>,
    par: &Par,
) -> Result<Tensor> {
    let o = *o;
    let n = p.numel();
    let st = slot.get_or_insert_with(|| Slots::zeros(T::DTYPE, n, 2 + usize::from(o.amsgrad)));
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
        decay: (wd && o.decoupled_weight_decay).then(|| T::from_f64(1.0 - o.lr * o.weight_decay)),
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
    let (m, rest) = st.bufs.split_at_mut(1);
    let (v, rest) = rest.split_at_mut(1);
    let vmax = match rest.first_mut() {
        Some(b) => T::buf(b),
        None => &mut none,
    };
    let (m, v) = (T::buf(&mut m[0]), T::buf(&mut v[0]));
    if pd.len() != n
        || gd.len() != n
        || m.len() != n
        || v.len() != n
        || (o.amsgrad && vmax.len() != n)
    {
        return Err(crate::ops::invalid(
            "adam",
            "grad",
            "gradient, parameter and state sizes differ",
        ));
    }
    // Filled by the kernel, never zeroed first.
    let mut out: Vec<T> = lockstep_rng::try_with_capacity("adam", n)?;
    let ams = o.amsgrad;
    // Shared by the ranges of this update only: they are disjoint (`for_each_range`).
    let (op, mp, vp, xp) = (
        SyncPtr(out.as_mut_ptr()),
        SyncPtr(m.as_mut_ptr()),
        SyncPtr(v.as_mut_ptr()),
        SyncPtr(vmax.as_mut_ptr()),
    );
    let (pd, gd, k) = (&pd[..], &gd[..], &k);
    for_each_range(par, n, |a, b| {
        // SAFETY: `out` has room for `n` values, `m` and `v` hold `n` and `vmax` `n` with
        // amsgrad (checked above); the ranges `a..b` are disjoint and all end before
        // `for_each_range` returns.
        let (os, ms, vs, xs) = unsafe {
            (
                core::slice::from_raw_parts_mut(op.at(a).cast::<MaybeUninit<T>>(), b - a),
                core::slice::from_raw_parts_mut(mp.at(a), b - a),
                core::slice::from_raw_parts_mut(vp.at(a), b - a),
                match ams {
                    true => core::slice::from_raw_parts_mut(xp.at(a), b - a),
                    false => &mut [][..],
                },
            )
        };
        adam_kernel(&pd[a..b], &gd[a..b], ms, vs, xs, ams, os, k);
    });
    // SAFETY: the kernel wrote all `n` values (over the ranges covering `0..n`).
    unsafe { out.set_len(n) };
    Tensor::from_vec(out, p.shape())
}
