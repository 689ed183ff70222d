//! RMSprop (`torch.optim.RMSprop`), as `_single_tensor_rmsprop` computes it.

use super::group::{Core, Group, Hyper, Slots, impl_optimizer, options_accessors};
use super::{Real, check_hyper, dense, multiversion, with_real};
use crate::autograd::Var;
use lockstep_tensor::{Result, Tensor};

const OP: &str = "RMSprop";

/// The hyperparameters of [`RMSprop`], with PyTorch's names and defaults
/// (`RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
/// centered=False, maximize=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RMSpropOptions {
    /// Learning rate.
    pub lr: f64,
    /// Decay rate of the running average of the squared gradient.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// L2 penalty, added to the gradient (`grad + weight_decay * param`).
    pub weight_decay: f64,
    /// Momentum factor (0: no `momentum_buffer`).
    pub momentum: f64,
    /// Divide by an estimate of the gradient's variance (keeps `grad_avg`).
    pub centered: bool,
    /// Maximize the objective.
    pub maximize: bool,
}

impl Default for RMSpropOptions {
    fn default() -> Self {
        Self {
            lr: 1e-2,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            maximize: false,
        }
    }
}

/// `torch.optim.RMSprop`, over one parameter group ([`new`](Self::new)) or several, each
/// with its own options ([`with_groups`](Self::with_groups)).
///
/// For each parameter with a gradient `g` (negated when `maximize`), in PyTorch's order and
/// rounding (`lerp` as PyTorch's CPU kernel, one fused multiply-add):
/// ```text
/// g          = fma(param, weight_decay, g)                     if weight_decay != 0
/// square_avg = fma((1 - alpha) * g, g, square_avg * alpha)
/// grad_avg   = lerp(grad_avg, g, 1 - alpha)                    if centered
/// avg        = sqrt(fma(-grad_avg, grad_avg, square_avg)) + eps   if centered
///            | sqrt(square_avg) + eps
/// buf        = buf * momentum + g / avg;  param = fma(buf, -lr, param)   if momentum > 0
/// param      = param + (-lr * g) / avg                          otherwise
/// ```
/// State (`state.{i}.…`): `step`, `square_avg`, then `momentum_buffer` (momentum > 0) and
/// `grad_avg` (centered), PyTorch's order.
#[derive(Debug)]
pub struct RMSprop {
    core: Core<RMSpropOptions>,
}

impl Hyper for RMSpropOptions {
    const HAS_STEP: bool = true;
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
    fn check(&self, op: &'static str) -> Result<()> {
        check_hyper(op, "lr", self.lr >= 0.0, "learning rate", self.lr)?;
        check_hyper(op, "eps", self.eps >= 0.0, "epsilon value", self.eps)?;
        check_hyper(
            op,
            "momentum",
            self.momentum >= 0.0,
            "momentum value",
            self.momentum,
        )?;
        check_hyper(
            op,
            "weight_decay",
            self.weight_decay >= 0.0,
            "weight_decay value",
            self.weight_decay,
        )?;
        check_hyper(op, "alpha", self.alpha >= 0.0, "alpha value", self.alpha)
    }
    fn keys(&self) -> Vec<&'static str> {
        let mut keys = vec!["square_avg"];
        if self.momentum > 0.0 {
            keys.push("momentum_buffer");
        }
        if self.centered {
            keys.push("grad_avg");
        }
        keys
    }
}

impl RMSprop {
    /// An optimizer over `params` (`torch.optim.RMSprop(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `eps`, `momentum`, `weight_decay` or
    /// `alpha`; a parameter that is not a float leaf, or one listed twice.
    pub fn new(params: Vec<Var>, opts: RMSpropOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.RMSprop([{"params": ..., "weight_decay": ...}, ...])`).
    ///
    /// # Errors
    /// As [`new`](Self::new), for each group; no groups; a parameter in two groups.
    pub fn with_groups(groups: Vec<Group<RMSpropOptions>>) -> Result<Self> {
        Ok(Self {
            core: Core::new(OP, groups)?,
        })
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<RMSpropOptions>) -> Result<()> {
        self.core.add_group(group)
    }

    options_accessors!(RMSpropOptions);

    fn step_impl(&mut self) -> Result<()> {
        self.core.for_each_grad(
            |o, p, g, slot| with_real!(OP, p.dtype(), T => update::<T>(o, p, g, slot)),
        )
    }

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.core.state = self.core.parse_state(state)?;
        Ok(())
    }
}

impl_optimizer!(RMSprop, .core);

/// One RMSprop update of parameter `p` (its state in `slot`).
fn update<T: Real>(
    o: &RMSpropOptions,
    p: &Var,
    g: &Tensor,
    slot: &mut Option<Slots>,
) -> Result<()> {
    let o = *o;
    let n = p.numel();
    let nk = o.keys().len();
    let st = slot.get_or_insert_with(|| Slots::zeros(T::DTYPE, n, nk));
    st.step += 1.0;
    let w = T::from_f64(1.0 - o.alpha);
    let k = Consts::<T> {
        maximize: o.maximize,
        weight_decay: (o.weight_decay != 0.0).then(|| T::from_f64(o.weight_decay)),
        alpha: T::from_f64(o.alpha),
        c: w,
        w_small: w.abs() < T::from_f64(0.5),
        w_minus_one: w - T::ONE,
        eps: T::from_f64(o.eps),
        momentum: (o.momentum > 0.0).then(|| T::from_f64(o.momentum)),
        neg_lr: T::from_f64(-o.lr),
    };
    let pv = p.data();
    let pd = dense::<T>(&pv)?;
    let gd = dense::<T>(g)?;
    let mut out = vec![T::ZERO; n];
    let mut bufs = st.bufs.iter_mut();
    let sa = T::buf(bufs.next().expect("square_avg"));
    let mut none_m = Vec::new();
    let mut none_c = Vec::new();
    let mb = if o.momentum > 0.0 {
        T::buf(bufs.next().expect("momentum_buffer"))
    } else {
        &mut none_m
    };
    let ga = if o.centered {
        T::buf(bufs.next().expect("grad_avg"))
    } else {
        &mut none_c
    };
    rmsprop_kernel(&pd, &gd, sa, mb, ga, &mut out, &k);
    p.set_data(Tensor::from_vec(out, p.shape())?)
}

struct Consts<T> {
    maximize: bool,
    weight_decay: Option<T>,
    alpha: T,
    /// `addcmul_` value and `lerp_` weight `1 - alpha`.
    c: T,
    w_small: bool,
    w_minus_one: T,
    eps: T,
    momentum: Option<T>,
    neg_lr: T,
}

multiversion! {
    /// One RMSprop update of one parameter: the new values into `out`; `square_avg` (`sa`),
    /// `momentum_buffer` (`mb`, empty without momentum) and `grad_avg` (`ga`, empty unless
    /// centered) in place.
    fn rmsprop_kernel<T>(p: &[T], g: &[T], sa: &mut [T], mb: &mut [T], ga: &mut [T], out: &mut [T], k: &Consts<T>) {
        let n = p.len();
        let (g, sa, out) = (&g[..n], &mut sa[..n], &mut out[..n]);
        let centered = !ga.is_empty() || n == 0;
        for i in 0..n {
            let mut grad = if k.maximize { -g[i] } else { g[i] };
            if let Some(wd) = k.weight_decay {
                grad = p[i].mul_add(wd, grad);
            }
            // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            let s = (k.c * grad).mul_add(grad, sa[i] * k.alpha);
            sa[i] = s;
            let root = if centered {
                // grad_avg.lerp_(grad, 1 - alpha)  (PyTorch's CPU lerp with a scalar weight)
                let diff = grad - ga[i];
                let a = if k.w_small {
                    k.c.mul_add(diff, ga[i])
                } else {
                    k.w_minus_one.mul_add(diff, grad)
                };
                ga[i] = a;
                // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                (-a).mul_add(a, s).sqrt()
            } else {
                s.sqrt()
            };
            // avg.add_(eps)
            let avg = root + k.eps;
            out[i] = match k.momentum {
                Some(m) => {
                    // buf.mul_(momentum).addcdiv_(grad, avg); param.add_(buf, alpha=-lr)
                    let b = mb[i] * m + grad / avg;
                    mb[i] = b;
                    b.mul_add(k.neg_lr, p[i])
                }
                // param.addcdiv_(grad, avg, value=-lr)
                None => p[i] + (k.neg_lr * grad) / avg,
            };
        }
    }
}
