//! Adadelta (`torch.optim.Adadelta`), as `_single_tensor_adadelta` computes it.

use super::{
    Optimizer, Real, check_hyper, check_params, dense,
    extra_state::{Slots, load_slots, state_entries},
    multiversion, with_real,
};
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

/// `torch.optim.Adadelta` over one parameter group.
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
    params: Vec<Var>,
    opts: AdadeltaOptions,
    initial_lr: Option<f64>,
    state: Vec<Option<Slots>>,
}

const KEYS: &[&str] = &["square_avg", "acc_delta"];

impl Adadelta {
    /// An optimizer over `params` (`torch.optim.Adadelta(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `eps` or `weight_decay`, `rho` outside
    /// `[0, 1]`; a parameter that is not a float leaf, or one listed twice.
    pub fn new(params: Vec<Var>, opts: AdadeltaOptions) -> Result<Self> {
        check_hyper(OP, "lr", opts.lr >= 0.0, "learning rate", opts.lr)?;
        check_hyper(
            OP,
            "rho",
            (0.0..=1.0).contains(&opts.rho),
            "rho value",
            opts.rho,
        )?;
        check_hyper(OP, "eps", opts.eps >= 0.0, "epsilon value", opts.eps)?;
        check_hyper(
            OP,
            "weight_decay",
            opts.weight_decay >= 0.0,
            "weight_decay value",
            opts.weight_decay,
        )?;
        check_params(OP, &params)?;
        let n = params.len();
        Ok(Self {
            params,
            opts,
            initial_lr: None,
            state: vec![None; n],
        })
    }

    /// The hyperparameters (the learning rate as last set).
    pub fn options(&self) -> AdadeltaOptions {
        self.opts
    }

    fn update<T: Real>(&mut self, i: usize, g: &Tensor) -> Result<()> {
        let o = self.opts;
        let p = &self.params[i];
        let n = p.numel();
        let st = self.state[i].get_or_insert_with(|| Slots::zeros(T::DTYPE, n, KEYS.len()));
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

impl Optimizer for Adadelta {
    fn step(&mut self) -> Result<()> {
        for i in 0..self.params.len() {
            let p = &self.params[i];
            let Some(g) = p.grad() else { continue };
            with_real!(OP, p.dtype(), T => self.update::<T>(i, &g))?;
        }
        Ok(())
    }

    fn params(&self) -> &[Var] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.opts.lr
    }

    fn set_lr(&mut self, lr: f64) {
        self.opts.lr = lr;
    }

    fn initial_lr(&self) -> Option<f64> {
        self.initial_lr
    }

    fn set_initial_lr(&mut self, lr: Option<f64>) {
        self.initial_lr = lr;
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        state_entries(&self.params, &self.state, KEYS)
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.state = load_slots(OP, &self.params, state, KEYS)?;
        Ok(())
    }
}
