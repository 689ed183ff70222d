//! Stochastic gradient descent (`torch.optim.SGD`), as `_single_tensor_sgd` computes it.

use super::group::{Core, Group, Hyper, Slots, impl_optimizer, options_accessors};
use super::{Real, check_hyper, dense, for_each_range, multiversion, with_real};
use crate::autograd::Var;
use crate::ops::invalid;
use core::mem::MaybeUninit;
use lockstep_tensor::threads::{Par, SyncPtr};
use lockstep_tensor::{Result, Tensor};

const OP: &str = "SGD";

/// The hyperparameters of [`Sgd`], with PyTorch's names and defaults
/// (`SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdOptions {
    /// Learning rate.
    pub lr: f64,
    /// Momentum factor (0: no momentum buffer).
    pub momentum: f64,
    /// Dampening for momentum (not applied at the first step, where the buffer is the gradient).
    pub dampening: f64,
    /// L2 penalty, added to the gradient (`grad + weight_decay * param`).
    pub weight_decay: f64,
    /// Nesterov momentum (needs `momentum > 0` and `dampening == 0`).
    pub nesterov: bool,
    /// Maximize the objective (step along the gradient).
    pub maximize: bool,
}

impl Default for SgdOptions {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            maximize: false,
        }
    }
}

impl Hyper for SgdOptions {
    const HAS_STEP: bool = false;
    fn lr(&self) -> f64 {
        self.lr
    }
    fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }
    fn check(&self, op: &'static str) -> Result<()> {
        check_hyper(op, "lr", self.lr >= 0.0, "learning rate", self.lr)?;
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
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(invalid(
                op,
                "nesterov",
                "Nesterov momentum requires a momentum and zero dampening",
            ));
        }
        Ok(())
    }
    fn keys(&self) -> Vec<&'static str> {
        vec!["momentum_buffer"]
    }
}

/// `torch.optim.SGD`, over one parameter group ([`new`](Self::new)) or several, each with its
/// own options ([`with_groups`](Self::with_groups)).
///
/// For each parameter with a gradient `g` (negated when `maximize`), in PyTorch's order and
/// rounding (`fma` = one rounding, as PyTorch's CPU `add(…, alpha=)` kernel):
/// ```text
/// g   = fma(param, weight_decay, g)                     if weight_decay != 0
/// buf = g (first step) | fma(g, 1 - dampening, buf * momentum)   if momentum != 0
/// g   = fma(buf, momentum, g) if nesterov else buf      if momentum != 0
/// param = fma(g, -lr, param)
/// ```
/// with every Python-float factor (of the parameter's group) rounded to the parameter's
/// dtype. The results are bit-identical to PyTorch's for the same gradients.
#[derive(Debug)]
pub struct Sgd {
    core: Core<SgdOptions>,
}

impl Sgd {
    /// An optimizer over `params`, one group (`torch.optim.SGD(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `momentum` or `weight_decay`; `nesterov`
    /// without momentum or with dampening; a parameter that is not a float leaf, or one
    /// listed twice.
    pub fn new(params: Vec<Var>, opts: SgdOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.SGD([{"params": ..., "momentum": ...}, ...])`).
    ///
    /// # Errors
    /// As [`new`](Self::new), for each group; no groups; a parameter in two groups.
    pub fn with_groups(groups: Vec<Group<SgdOptions>>) -> Result<Self> {
        Ok(Self {
            core: Core::new(OP, groups)?,
        })
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<SgdOptions>) -> Result<()> {
        self.core.add_group(group)
    }

    options_accessors!(SgdOptions);

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.core.state = self.core.parse_state(state)?;
        Ok(())
    }

    fn step_impl(&mut self) -> Result<()> {
        self.core.for_each_grad(|o, p, g, slot| {
            let new = crate::ops::SGD.run(
                &[&p.data(), g],
                |_, par| with_real!(OP, p.dtype(), T => update::<T>(o, p, g, slot, par)),
            )?;
            p.set_data(new)
        })
    }
}

impl_optimizer!(Sgd, .core);

/// The per-step constants, already rounded to the parameter's dtype.
struct Consts<T> {
    weight_decay: Option<T>,
    momentum: Option<T>,
    one_minus_dampening: T,
    neg_lr: T,
    nesterov: bool,
    maximize: bool,
}

multiversion! {
    /// One SGD update of (a range of) one parameter: every element of `out` written with the
    /// new values (`out.len() == p.len()`); the momentum buffer `buf` (empty without momentum)
    /// updated in place, or set to the gradient when `first`. Each element is computed from
    /// its own inputs only, so any split into ranges gives the same bits.
    fn sgd_kernel<T>(p: &[T], g: &[T], buf: &mut [T], first: bool, out: &mut [MaybeUninit<T>], k: &Consts<T>) {
        // grad = -grad if maximize; grad = grad.add(param, alpha=weight_decay)
        let grad = |p: T, g: T| {
            let d = if k.maximize { -g } else { g };
            match k.weight_decay {
                Some(wd) => p.mul_add(wd, d),
                None => d,
            }
        };
        let n = p.len();
        let (g, out) = (&g[..n], &mut out[..n]);
        // Without weight decay or maximize, `grad(p, g)` is `g` itself: the loops below that
        // skip it give the same bits with no per-element branches.
        let plain = k.weight_decay.is_none() && !k.maximize;
        let Some(m) = k.momentum else {
            // param.add_(grad, alpha=-lr)
            for ((o, &p), &g) in out.iter_mut().zip(p).zip(g) {
                let d = if plain { g } else { grad(p, g) };
                o.write(d.mul_add(k.neg_lr, p));
            }
            return;
        };
        let buf = &mut buf[..n];
        let it = out.iter_mut().zip(p).zip(g).zip(buf);
        if plain && !first && !k.nesterov {
            let (omd, neg_lr) = (k.one_minus_dampening, k.neg_lr);
            for (((o, &p), &g), b) in it {
                *b = g.mul_add(omd, *b * m);
                o.write(b.mul_add(neg_lr, p));
            }
            return;
        }
        for (((o, &p), &g), b) in it {
            let d = grad(p, g);
            // buf = grad.clone() | buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            *b = if first {
                d
            } else {
                d.mul_add(k.one_minus_dampening, *b * m)
            };
            // grad = grad.add(buf, alpha=momentum) if nesterov else buf
            let u = if k.nesterov { b.mul_add(m, d) } else { *b };
            // param.add_(grad, alpha=-lr)
            o.write(u.mul_add(k.neg_lr, p));
        }
    }
}

/// A parameter's new value (its momentum buffer in `slot` updated), on the threads `par`.
fn update<T: Real>(
    o: &SgdOptions,
    p: &Var,
    g: &Tensor,
    slot: &mut Option<Slots>,
    par: &Par,
) -> Result<Tensor> {
    let k = Consts::<T> {
        weight_decay: (o.weight_decay != 0.0).then(|| T::from_f64(o.weight_decay)),
        momentum: (o.momentum != 0.0).then(|| T::from_f64(o.momentum)),
        one_minus_dampening: T::from_f64(1.0 - o.dampening),
        neg_lr: T::from_f64(-o.lr),
        nesterov: o.nesterov,
        maximize: o.maximize,
    };
    let pv = p.data();
    let pd = dense::<T>(&pv)?;
    let gd = dense::<T>(g)?;
    let n = pd.len();
    if gd.len() != n {
        return Err(invalid(OP, "grad", "gradient and parameter sizes differ"));
    }
    let first = k.momentum.is_some() && slot.is_none();
    let mut none = Vec::new();
    let buf = match slot {
        _ if k.momentum.is_none() => &mut none,
        Some(s) => T::buf(&mut s.bufs[0]),
        None => T::buf(&mut slot.insert(Slots::zeros(T::DTYPE, n, 1)).bufs[0]),
    };
    // Filled by the kernel, never zeroed first.
    let mut out: Vec<T> = lockstep_rng::try_with_capacity(OP, n)?;
    let has_buf = !buf.is_empty();
    // Shared by the ranges of this update only: they are disjoint (`for_each_range`).
    let (o_ptr, b_ptr) = (SyncPtr(out.as_mut_ptr()), SyncPtr(buf.as_mut_ptr()));
    let (pd, gd, k) = (&pd[..], &gd[..], &k);
    for_each_range(par, n, |a, b| {
        // SAFETY: `out` has room for `n` values and `buf` holds `n` (when `has_buf`); the
        // ranges `a..b` are disjoint and all end before `for_each_range` returns.
        let (o, bb) = unsafe {
            let o = core::slice::from_raw_parts_mut(o_ptr.at(a).cast::<MaybeUninit<T>>(), b - a);
            let bb: &mut [T] = if has_buf {
                core::slice::from_raw_parts_mut(b_ptr.at(a), b - a)
            } else {
                &mut []
            };
            (o, bb)
        };
        sgd_kernel(&pd[a..b], &gd[a..b], bb, first, o, k);
    });
    // SAFETY: the kernel wrote all `n` values (over the ranges covering `0..n`).
    unsafe { out.set_len(n) };
    Tensor::from_vec(out, p.shape())
}
