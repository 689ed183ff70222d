//! Adagrad (`torch.optim.Adagrad`), as `_single_tensor_adagrad` computes it (dense gradients).

use super::{
    Buf, Optimizer, Real, check_hyper, check_params, dense,
    extra_state::{Slots, load_slots, state_entries},
    multiversion, with_real,
};
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

/// `torch.optim.Adagrad` over one parameter group.
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
    params: Vec<Var>,
    opts: AdagradOptions,
    initial_lr: Option<f64>,
    state: Vec<Option<Slots>>,
}

const KEYS: &[&str] = &["sum"];

impl Adagrad {
    /// An optimizer over `params` (`torch.optim.Adagrad(params, ...)`).
    ///
    /// # Errors
    /// PyTorch's checks: a negative (or NaN) `lr`, `lr_decay`, `weight_decay`,
    /// `initial_accumulator_value` or `eps`; a parameter that is not a float leaf, or one
    /// listed twice.
    pub fn new(params: Vec<Var>, opts: AdagradOptions) -> Result<Self> {
        check_hyper(OP, "lr", opts.lr >= 0.0, "learning rate", opts.lr)?;
        check_hyper(
            OP,
            "lr_decay",
            opts.lr_decay >= 0.0,
            "lr_decay value",
            opts.lr_decay,
        )?;
        check_hyper(
            OP,
            "weight_decay",
            opts.weight_decay >= 0.0,
            "weight_decay value",
            opts.weight_decay,
        )?;
        check_hyper(
            OP,
            "initial_accumulator_value",
            opts.initial_accumulator_value >= 0.0,
            "initial_accumulator_value value",
            opts.initial_accumulator_value,
        )?;
        check_hyper(OP, "eps", opts.eps >= 0.0, "epsilon value", opts.eps)?;
        check_params(OP, &params)?;
        let mut s = Self {
            params,
            opts,
            initial_lr: None,
            state: Vec::new(),
        };
        s.state = (0..s.params.len()).map(|i| Some(s.fresh(i))).collect();
        Ok(s)
    }

    /// The hyperparameters (the learning rate as last set).
    pub fn options(&self) -> AdagradOptions {
        self.opts
    }

    /// `step` 0 and `sum = full_like(param, initial_accumulator_value)`.
    fn fresh(&self, i: usize) -> Slots {
        let p = &self.params[i];
        let v = self.opts.initial_accumulator_value;
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

    fn update<T: Real>(&mut self, i: usize, g: &Tensor) -> Result<()> {
        let o = self.opts;
        if self.state[i].is_none() {
            self.state[i] = Some(self.fresh(i));
        }
        let st = self.state[i].as_mut().expect("just set");
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
        let p = &self.params[i];
        let pv = p.data();
        let pd = dense::<T>(&pv)?;
        let gd = dense::<T>(g)?;
        let mut out = vec![T::ZERO; pd.len()];
        adagrad_kernel(&pd, &gd, T::buf(&mut st.bufs[0]), &mut out, &k);
        p.set_data(Tensor::from_vec(out, p.shape())?)
    }
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

impl Optimizer for Adagrad {
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

    /// Parameters without entries in `state` start afresh (`step` 0, `sum` at
    /// `initial_accumulator_value`), as at construction.
    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let mut new = load_slots(OP, &self.params, state, KEYS)?;
        for (i, s) in new.iter_mut().enumerate() {
            if s.is_none() {
                *s = Some(self.fresh(i));
            }
        }
        self.state = new;
        Ok(())
    }
}
