//! Adadelta (`torch.optim.Adadelta`), as `_single_tensor_adadelta` computes it.

use super::group::{Core, Group, Hyper, Slots, impl_optimizer, options_accessors};
use super::{Real, check_hyper, dense, multiversion, with_real};
use crate::autograd::Var;
use lockstep_tensor::{Result, Tensor};

const OP: &str = "Adadelta";

/// The hyperparameters of [`Adadelta`], with PyTorch's names and defaults
/// (`Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdadeltaOptions {
    /// Scales the update (`delta`) before it is applied.
    pub lr: f64,
    /// Decay rate of the running averages of the squared gradient and squared update.
    pub rho: f64,
    /// Added inside both square roots.
    pub eps: f64,
    /// L2 penalty, added to the gradient (`grad + weight_decay * param`).
    pub weight_decay: f64,
    /// Maximize the objective.
    pub maximize: bool,
}

impl Default for AdadeltaOptions {
    fn default() -> Self {
        Self {
            lr: 1.0,
            rho: 0.9,
            eps: 1e-6,
            weight_decay: 0.0,
            maximize: false,
        }
    }
}

/// `torch.optim.Adadelta`, over one parameter group ([`new`](Self::new)) or several, each
/// with its own options ([`with_groups`](Self::with_groups)).
///
/// For each parameter with a gradient `g` (negated when `maximize`), in PyTorch's order and
/// rounding (`fma` = one rounding, as PyTorch's CPU `add(…, alpha=)` and `addcmul_`):
/// ```text
/// g          = fma(param, weight_decay, g)                         if weight_decay != 0
/// square_avg = fma((1 - rho) * g, g, square_avg * rho)
/// delta      = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
/// acc_delta  = fma((1 - rho) * delta, delta, acc_delta * rho)
/// param      = fma(delta, -lr, param)
/// ```
/// State (`state.{i}.…`): `step`, `square_avg`, `acc_delta`. The square roots are correctly
/// rounded (see the [module documentation](super) for how PyTorch's may differ).
#[derive(Debug)]
pub struct Adadelta {
    core: Core<AdadeltaOptions>,
}

impl Hyper for AdadeltaOptions {
    const HAS_STEP: bool = true;
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
            "rho",
            (0.0..=1.0).contains(&self.rho),
            "rho value",
            self.rho,
        )?;
        check_hyper(op, "eps", self.eps >= 0.0, "epsilon value", self.eps)?;
        check_hyper(
            op,
            "weight_decay",
            self.weight_decay >= 0.0,
            "weight_decay value",
            self.weight_decay,
        )
    }
    fn keys(&self) -> Vec<&'static str> {
        vec!["square_avg", "acc_delta"]
    }
}

impl Adadelta {
    /// An optimizer over `params` (`torch.optim.Adadelta(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `eps` or `weight_decay`, `rho` outside
    /// `[0, 1]`; a parameter that is not a float leaf, or one listed twice.
    pub fn new(params: Vec<Var>, opts: AdadeltaOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.Adadelta([{"params": ..., "weight_decay": ...}, ...])`).
    ///
    /// # Errors
    /// As [`new`](Self::new), for each group; no groups; a parameter in two groups.
    pub fn with_groups(groups: Vec<Group<AdadeltaOptions>>) -> Result<Self> {
        Ok(Self {
            core: Core::new(OP, groups)?,
        })
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<AdadeltaOptions>) -> Result<()> {
        self.core.add_group(group)
    }

    options_accessors!(AdadeltaOptions);

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

impl_optimizer!(Adadelta, .core);

/// One Adadelta update of parameter `p` (its state in `slot`).
fn update<T: Real>(
    o: &AdadeltaOptions,
    p: &Var,
    g: &Tensor,
    slot: &mut Option<Slots>,
) -> Result<()> {
    let o = *o;
    let n = p.numel();
    let st = slot.get_or_insert_with(|| Slots::zeros(T::DTYPE, n, 2));
    st.step += 1.0;
    let k = Consts::<T> {
        maximize: o.maximize,
        weight_decay: (o.weight_decay != 0.0).then(|| T::from_f64(o.weight_decay)),
        rho: T::from_f64(o.rho),
        c: T::from_f64(1.0 - o.rho),
        eps: T::from_f64(o.eps),
        neg_lr: T::from_f64(-o.lr),
    };
    let pv = p.data();
    let pd = dense::<T>(&pv)?;
    let gd = dense::<T>(g)?;
    let mut out = vec![T::ZERO; n];
    let (sa, ad) = st.bufs.split_at_mut(1);
    adadelta_kernel(
        &pd,
        &gd,
        T::buf(&mut sa[0]),
        T::buf(&mut ad[0]),
        &mut out,
        &k,
    );
    p.set_data(Tensor::from_vec(out, p.shape())?)
}

struct Consts<T> {
    maximize: bool,
    weight_decay: Option<T>,
    rho: T,
    /// `addcmul_` value `1 - rho`.
    c: T,
    eps: T,
    neg_lr: T,
}

multiversion! {
    /// One Adadelta update of one parameter: the new values into `out`, `square_avg` (`sa`)
    /// and `acc_delta` (`ad`) in place.
    fn adadelta_kernel<T>(p: &[T], g: &[T], sa: &mut [T], ad: &mut [T], out: &mut [T], k: &Consts<T>) {
        let n = p.len();
        let (g, sa, ad, out) = (&g[..n], &mut sa[..n], &mut ad[..n], &mut out[..n]);
        for i in 0..n {
            let mut grad = if k.maximize { -g[i] } else { g[i] };
            if let Some(wd) = k.weight_decay {
                grad = p[i].mul_add(wd, grad);
            }
            // square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            let s = (k.c * grad).mul_add(grad, sa[i] * k.rho);
            sa[i] = s;
            // std = square_avg.add(eps).sqrt_(); delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
            let std = (s + k.eps).sqrt();
            let delta = (ad[i] + k.eps).sqrt() / std * grad;
            // acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            ad[i] = (k.c * delta).mul_add(delta, ad[i] * k.rho);
            // param.add_(delta, alpha=-lr)
            out[i] = delta.mul_add(k.neg_lr, p[i]);
        }
    }
}
