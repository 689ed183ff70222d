//! Adagrad (`torch.optim.Adagrad`), as `_single_tensor_adagrad` computes it (dense gradients).

use super::group::{Core, Group, Hyper, Slots, impl_optimizer, options_accessors};
use super::{Buf, Real, check_hyper, dense, multiversion, with_real};
use crate::autograd::Var;
use lockstep_tensor::{DType, Result, Tensor};

const OP: &str = "Adagrad";

/// The hyperparameters of [`Adagrad`], with PyTorch's names and defaults
/// (`Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
/// eps=1e-10, maximize=False)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdagradOptions {
    /// Learning rate.
    pub lr: f64,
    /// The rate at step `t` is `lr / (1 + (t - 1) * lr_decay)`.
    pub lr_decay: f64,
    /// L2 penalty, added to the gradient (`grad + weight_decay * param`).
    pub weight_decay: f64,
    /// The starting value of every element of the `sum` accumulator.
    pub initial_accumulator_value: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Maximize the objective.
    pub maximize: bool,
}

impl Default for AdagradOptions {
    fn default() -> Self {
        Self {
            lr: 1e-2,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
            maximize: false,
        }
    }
}

/// `torch.optim.Adagrad`, over one parameter group ([`new`](Self::new)) or several, each
/// with its own options ([`with_groups`](Self::with_groups)).
///
/// For each parameter with a gradient `g` (negated when `maximize`), at step `t`, in
/// PyTorch's order and rounding:
/// ```text
/// g     = fma(param, weight_decay, g)                 if weight_decay != 0
/// clr   = lr / (1 + (t - 1) * lr_decay)               (f64, Python's float)
/// sum   = fma(g, g, sum)
/// param = param + (-clr * g) / (sqrt(sum) + eps)
/// ```
/// As in PyTorch, the state (`state.{i}.step`, `state.{i}.sum`) of every parameter exists
/// from construction (`step` 0, `sum` filled with `initial_accumulator_value`).
#[derive(Debug)]
pub struct Adagrad {
    core: Core<AdagradOptions>,
}

impl Hyper for AdagradOptions {
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
            "lr_decay",
            self.lr_decay >= 0.0,
            "lr_decay value",
            self.lr_decay,
        )?;
        check_hyper(
            op,
            "weight_decay",
            self.weight_decay >= 0.0,
            "weight_decay value",
            self.weight_decay,
        )?;
        check_hyper(
            op,
            "initial_accumulator_value",
            self.initial_accumulator_value >= 0.0,
            "initial_accumulator_value value",
            self.initial_accumulator_value,
        )?;
        check_hyper(op, "eps", self.eps >= 0.0, "epsilon value", self.eps)
    }
    fn keys(&self) -> Vec<&'static str> {
        vec!["sum"]
    }
}

/// `step` 0 and `sum = full_like(param, initial_accumulator_value)`.
fn fresh(o: &AdagradOptions, p: &Var) -> Slots {
    let v = o.initial_accumulator_value;
    let n = p.numel();
    let buf = match p.dtype() {
        DType::F64 => Buf::F64(vec![v; n]),
        _ => Buf::F32(vec![v as f32; n]),
    };
    Slots {
        step: 0.0,
        bufs: vec![buf],
    }
}

impl Adagrad {
    /// An optimizer over `params` (`torch.optim.Adagrad(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `lr_decay`, `weight_decay`,
    /// `initial_accumulator_value` or `eps`; a parameter that is not a float leaf, or one
    /// listed twice.
    pub fn new(params: Vec<Var>, opts: AdagradOptions) -> Result<Self> {
        Self::with_groups(vec![Group::new(params, opts)])
    }

    /// An optimizer over several parameter groups, each with its own options
    /// (`torch.optim.Adagrad([{"params": ..., "weight_decay": ...}, ...])`).
    ///
    /// # Errors
    /// As [`new`](Self::new), for each group; no groups; a parameter in two groups.
    pub fn with_groups(groups: Vec<Group<AdagradOptions>>) -> Result<Self> {
        let mut s = Self {
            core: Core::new(OP, groups)?,
        };
        s.fill_fresh(0);
        Ok(s)
    }

    /// Appends a group (`opt.add_param_group({...})`).
    ///
    /// # Errors
    /// As [`with_groups`](Self::with_groups); the optimizer is unchanged then.
    pub fn add_param_group(&mut self, group: Group<AdagradOptions>) -> Result<()> {
        let n = self.core.params().len();
        self.core.add_group(group)?;
        self.fill_fresh(n);
        Ok(())
    }

    options_accessors!(AdagradOptions);

    /// Creates the state of parameters `from..` that have none, as PyTorch's constructor
    /// does for every parameter.
    fn fill_fresh(&mut self, from: usize) {
        let groups = self.core.groups().to_vec();
        for (g, grp) in groups.iter().enumerate() {
            let o = self.core.options(g).expect("a group");
            for (k, p) in grp.params().iter().enumerate() {
                let i = grp.first_index() + k;
                if i >= from && self.core.state[i].is_none() {
                    self.core.state[i] = Some(fresh(&o, p));
                }
            }
        }
    }

    fn step_impl(&mut self) -> Result<()> {
        self.core.for_each_grad(
            |o, p, g, slot| with_real!(OP, p.dtype(), T => update::<T>(o, p, g, slot)),
        )
    }

    fn load_state_impl(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        self.core.state = self.core.parse_state(state)?;
        self.fill_fresh(0);
        Ok(())
    }
}

impl_optimizer!(Adagrad, .core);

/// One Adagrad update of parameter `p` (its state in `slot`).
fn update<T: Real>(
    o: &AdagradOptions,
    p: &Var,
    g: &Tensor,
    slot: &mut Option<Slots>,
) -> Result<()> {
    let o = *o;
    let st = slot.get_or_insert_with(|| fresh(&o, p));
    // step_t += 1; step = _get_value(step_t)
    st.step += 1.0;
    let step = f64::from(st.step);
    let clr = o.lr / (1.0 + (step - 1.0) * o.lr_decay);
    let k = Consts::<T> {
        maximize: o.maximize,
        weight_decay: (o.weight_decay != 0.0).then(|| T::from_f64(o.weight_decay)),
        eps: T::from_f64(o.eps),
        neg_clr: T::from_f64(-clr),
    };
    let pv = p.data();
    let pd = dense::<T>(&pv)?;
    let gd = dense::<T>(g)?;
    let mut out = vec![T::ZERO; pd.len()];
    adagrad_kernel(&pd, &gd, T::buf(&mut st.bufs[0]), &mut out, &k);
    p.set_data(Tensor::from_vec(out, p.shape())?)
}

struct Consts<T> {
    maximize: bool,
    weight_decay: Option<T>,
    eps: T,
    /// `addcdiv_` value `-clr`.
    neg_clr: T,
}

multiversion! {
    /// One Adagrad update of one parameter: the new values into `out`, `sum` in place.
    fn adagrad_kernel<T>(p: &[T], g: &[T], sum: &mut [T], out: &mut [T], k: &Consts<T>) {
        let n = p.len();
        let (g, sum, out) = (&g[..n], &mut sum[..n], &mut out[..n]);
        for i in 0..n {
            let mut grad = if k.maximize { -g[i] } else { g[i] };
            if let Some(wd) = k.weight_decay {
                grad = p[i].mul_add(wd, grad);
            }
            // state_sum.addcmul_(grad, grad, value=1)
            let s = grad.mul_add(grad, sum[i]);
            sum[i] = s;
            // std = state_sum.sqrt().add_(eps); param.addcdiv_(grad, std, value=-clr)
            let std = s.sqrt() + k.eps;
            out[i] = p[i] + (k.neg_clr * grad) / std;
        }
    }
}
