//! Optimizers, learning-rate schedulers and gradient clipping (`torch.optim`,
//! `torch.optim.lr_scheduler`, `torch.nn.utils.clip_grad_*`).
//!
//! The arithmetic follows PyTorch's single-tensor CPU implementation (`foreach=False`, which is
//! also what PyTorch picks by default for CPU tensors) formula by formula: each Python float
//! hyperparameter is first combined in `f64` exactly as Python does (`1 - beta1`,
//! `lr / (1 - beta1**step)`, `1 - lr * weight_decay`) and then rounded to the parameter's dtype
//! where PyTorch hands it to a tensor op; each tensor op rounds where PyTorch's kernel rounds,
//! and fuses a multiply and an add (one rounding, [`f32::mul_add`]) exactly where PyTorch's CPU
//! kernel does (`add(x, alpha=a)`, `lerp_`, `addcmul_`). Fed the same gradients, the
//! parameters and the optimizer state come out bit-identical to PyTorch's; the tests check this
//! against values recorded from real PyTorch 2.15 (`tests/golden/train/optim.json` and
//! `optim_extra.json`).
//!
//! | PyTorch | lockstep-nn |
//! |---|---|
//! | `torch.optim.SGD(params, lr, momentum, dampening, weight_decay, nesterov, maximize=)` | [`Sgd`], [`SgdOptions`] |
//! | `torch.optim.Adam(params, lr, betas, eps, weight_decay, amsgrad, maximize=)` | [`Adam`], [`AdamOptions`] |
//! | `torch.optim.AdamW(...)` | [`AdamW`], [`AdamWOptions`] |
//! | `torch.optim.Adadelta(params, lr, rho, eps, weight_decay, maximize=)` | [`Adadelta`], [`AdadeltaOptions`] |
//! | `torch.optim.Adagrad(params, lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize=)` | [`Adagrad`], [`AdagradOptions`] |
//! | `torch.optim.RMSprop(params, lr, alpha, eps, weight_decay, momentum, centered, maximize=)` | [`RMSprop`], [`RMSpropOptions`] |
//! | `Optimizer([{"params": a, "weight_decay": 0.1}, {"params": b, ...}], **defaults)` | `with_groups(vec![`[`Group`]`::new(a, opts), …])` on each optimizer |
//! | `opt.add_param_group({...})` | `add_param_group(`[`Group`]`)` on each optimizer |
//! | `opt.step()`, `opt.zero_grad()` | [`Optimizer::step`], [`Optimizer::zero_grad`] |
//! | `opt.param_groups`, `opt.param_groups[g]["lr"] = x` | [`Optimizer::param_groups`], [`Optimizer::param_groups_mut`]`()[g].lr = x` ([`ParamGroup`]) |
//! | `opt.param_groups[0]["lr"]` (read / write every group's) | [`Optimizer::lr`] / [`Optimizer::set_lr`] |
//! | `opt.state_dict()["state"]`, `opt.load_state_dict(...)` | [`Optimizer::state`], [`Optimizer::load_state`] |
//! | `lr_scheduler.StepLR`, `MultiStepLR`, `CosineAnnealingLR`, `LinearLR` | [`StepLR`], [`MultiStepLR`], [`CosineAnnealingLR`], [`LinearLR`] |
//! | `lr_scheduler.ExponentialLR`, `LambdaLR` (a closure), `OneCycleLR` (no momentum cycling) | [`ExponentialLR`], [`LambdaLR`], [`OneCycleLR`] |
//! | `lr_scheduler.ConstantLR`, `SequentialLR(opt, schedulers, milestones)` | [`ConstantLR`], [`SequentialLR`] |
//! | `lr_scheduler.ReduceLROnPlateau(opt, mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps)` | [`ReduceLROnPlateau`], [`PlateauOptions`] |
//! | `sched.step()`, `sched.get_last_lr()`, `sched.state_dict()` | [`LrScheduler::step`], [`LrScheduler::get_last_lrs`] (first group: [`LrScheduler::get_last_lr`]), [`LrScheduler::state`] |
//! | `nn.utils.clip_grad_norm_(params, max_norm, norm_type)` | [`clip_grad_norm_`] |
//! | `nn.utils.clip_grad_norm_(params, max_norm)` (norm type 2) | [`clip_grad_l2_norm_`] |
//! | `nn.utils.get_total_norm`, `nn.utils.clip_grads_with_norm_` | [`get_total_norm`], [`clip_grads_with_norm_`] |
//! | `nn.utils.clip_grad_value_(params, clip_value)` | [`clip_grad_value_`] |
//!
//! ## What is exact, and what depends on the machine
//! lockstep gives the same bits on every machine (fused multiply-add, division and square root
//! are exactly rounded operations, whatever instructions compute them). PyTorch's bits depend on
//! its build and the CPU in two places, so "bit-identical to PyTorch" means PyTorch on x86-64
//! with AVX2 (where it runs its AVX2 or AVX-512 kernels, which fuse as above; a PyTorch running
//! its baseline kernels would round some of those products separately), and:
//! - SGD (all options), the learning-rate schedules and [`clip_grad_value_`]: bit-identical.
//! - [`clip_grad_norm_`]: bit-identical for `norm_type` 2 and ∞ (the summation order of
//!   PyTorch's norm kernel is reproduced, see [`get_total_norm`]), and for other orders on
//!   gradients under 32768 elements (or at one thread).
//! - Adam/AdamW take a square root. Ours is correctly rounded; PyTorch's `torch.sqrt` on CPU is
//!   Intel MKL's vector function, which for `f32` is correctly rounded when MKL uses its AVX2
//!   code but not its AVX-512 code (about 0.7% of results 1 ulp off), and for `f64` is not
//!   correctly rounded on any instruction set (about 1.4%). So `f32` Adam/AdamW match PyTorch
//!   bit for bit on AVX2 machines, or anywhere under `MKL_ENABLE_INSTRUCTIONS=AVX2`; elsewhere,
//!   and for `f64`, an occasional denominator differs by 1 ulp, which moves a parameter by at
//!   most about 2 ulps of that step's update (the moments `exp_avg`, `exp_avg_sq` stay
//!   identical). The tests check that bound against PyTorch's AVX-512 and `f64` results.
//! - Adadelta, Adagrad and RMSprop take square roots too (correctly rounded here). Their golden
//!   file (`optim_more.json`) was recorded with a torch build whose CPU `torch.sqrt` is not
//!   correctly rounded in `f32` either, so the tests check the state that involves no square
//!   root bit for bit, and the parameters within a few ulps (about 96% are bit-identical).

//! ## Parameter groups
//! Every optimizer holds one or more parameter groups ([`ParamGroup`]), each with its own
//! learning rate and hyperparameters, as PyTorch's `param_groups`: `new(params, opts)` makes
//! one group (PyTorch's `Optimizer(params, ...)`), `with_groups` several, each given with its
//! full options (struct update syntax, `AdamWOptions { weight_decay: 0.0, ..opts }`, plays the
//! part of PyTorch's defaults), and `add_param_group` appends one. A parameter may appear in
//! one group only, once. Each group's learning rate is read and written through
//! [`Optimizer::param_groups`] / [`Optimizer::param_groups_mut`]; schedulers keep one base
//! rate per group (its `initial_lr`) and set each group's rate, as PyTorch's do. A group's
//! other hyperparameters are fixed after construction (read them with `group_options(g)`).
//!
//! ```
//! use lockstep_nn::Var;
//! use lockstep_nn::optim::{AdamW, AdamWOptions, Group, LrScheduler, Optimizer, StepLR};
//! use lockstep_tensor::Tensor;
//!
//! // Weights decay, biases and norms do not (PyTorch:
//! // AdamW([{"params": decay, "weight_decay": 0.1},
//! //        {"params": no_decay, "weight_decay": 0.0}], lr=6e-4)).
//! let w = Var::new(Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25], &[2, 2])?, true);
//! let b = Var::new(Tensor::from_vec(vec![0.1f32, 0.2], &[2])?, true);
//! let opts = AdamWOptions { lr: 6e-4, ..Default::default() };
//! let mut opt = AdamW::with_groups(vec![
//!     Group::new(vec![w.clone()], AdamWOptions { weight_decay: 0.1, ..opts }),
//!     Group::new(vec![b.clone()], AdamWOptions { weight_decay: 0.0, ..opts }),
//! ])?;
//! let mut sched = StepLR::new(&mut opt, 1, 0.5)?;
//! w.set_grad(Some(Tensor::ones(&[2, 2], lockstep_tensor::DType::F32)?))?;
//! b.set_grad(Some(Tensor::ones(&[2], lockstep_tensor::DType::F32)?))?;
//! opt.step()?;
//! sched.step(&mut opt); // every group's rate halves
//! assert_eq!(sched.get_last_lrs(), [3e-4, 3e-4]);
//! // The state numbers parameters over the groups in order: `b` is parameter 1.
//! assert_eq!(opt.state()[3].0, "state.1.step");
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```
//!
//! ## State, for checkpoints
//! [`Optimizer::state`] names every per-parameter tensor as PyTorch's optimizer `state_dict`
//! does, with the parameter's index in the optimizer's parameter list (the groups'
//! parameters in order, as PyTorch numbers them; with one group, the list given):
//! `state.{i}.momentum_buffer` (SGD with momentum), `state.{i}.step` (a 0-dimensional `f32`
//! tensor, as PyTorch stores it), `state.{i}.exp_avg`, `state.{i}.exp_avg_sq` and, with
//! `amsgrad`, `state.{i}.max_exp_avg_sq` (Adam, AdamW); `step`, `square_avg`, `acc_delta`
//! (Adadelta); `step`, `sum` (Adagrad, which as PyTorch creates it for every parameter at
//! construction); `step`, `square_avg`, `momentum_buffer` (with momentum), `grad_avg`
//! (centered) (RMSprop). A parameter that has never had a
//! gradient at a step has no entries. The learning rate is a hyperparameter, not state:
//! restore it with [`Optimizer::set_lr`] (and [`Optimizer::set_initial_lr`]; per group through
//! [`Optimizer::param_groups_mut`]), and a
//! scheduler's position with [`LrScheduler::load_state`]. As in PyTorch, build the scheduler
//! *before* restoring the learning rate: constructing a scheduler performs its initial step,
//! which writes the optimizer's learning rate.
//!
//! ## Not through the dispatch point
//! The updates are elementwise loops with one implementation (the order of operations within an
//! element is fixed, and elements do not interact), so they give the same bits at any number of
//! threads; they are not tensor ops and do not appear in an op trace.
//!
//! ```
//! use lockstep_nn::Var;
//! use lockstep_nn::optim::{Optimizer, Sgd, SgdOptions, LrScheduler, StepLR};
//! use lockstep_tensor::Tensor;
//!
//! let w = Var::new(Tensor::from_vec(vec![1.0f32, -2.0], &[2])?, true);
//! let mut opt = Sgd::new(vec![w.clone()], SgdOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
//! let mut sched = StepLR::new(&mut opt, 1, 0.5)?;
//! w.set_grad(Some(Tensor::from_vec(vec![0.5f32, 0.25], &[2])?))?;
//! opt.step()?;                // w -= 0.1 * grad
//! sched.step(&mut opt);       // lr = 0.05
//! assert_eq!(w.data().to_vec::<f32>()?, [0.95, -2.025]);
//! assert_eq!(opt.lr(), 0.05);
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```

mod adadelta;
mod adagrad;
mod adam;
mod clip;
mod group;
mod lbfgs;
mod rmsprop;
mod scheduler;
mod sgd;

pub use adadelta::{Adadelta, AdadeltaOptions};
pub use adagrad::{Adagrad, AdagradOptions};
pub use adam::{Adam, AdamOptions, AdamW, AdamWOptions};
pub use clip::{
    clip_grad_l2_norm_, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
};
pub use group::{Group, ParamGroup};
pub use lbfgs::{LBFGS, LBFGSOptions};
pub use rmsprop::{RMSprop, RMSpropOptions};
pub use scheduler::{
    ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, LrScheduler, MultiStepLR,
    OneCycleLR, PlateauOptions, ReduceLROnPlateau, SchedulerState, SequentialLR, StepLR,
};
pub use sgd::{Sgd, SgdOptions};

use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{DType, Error, Float, Result, Tensor};

/// An optimizer (`torch.optim.Optimizer`): parameter groups, each with its own learning rate
/// and hyperparameters, and one state per parameter.
pub trait Optimizer {
    /// One update of every parameter that has a gradient (`opt.step()`), each with its
    /// group's hyperparameters. A parameter whose [`Var::grad`] is `None` is skipped: its
    /// value is kept and its state is neither created nor advanced.
    ///
    /// # Errors
    /// None in practice: parameters are checked at construction, gradients by
    /// [`Var::set_grad`] and `backward`, loaded state by [`load_state`](Self::load_state).
    fn step(&mut self) -> Result<()>;

    /// Clears every parameter's gradient (`opt.zero_grad()`, whose default is
    /// `set_to_none=True`).
    fn zero_grad(&self) {
        for p in self.params() {
            p.zero_grad();
        }
    }

    /// Every parameter, groups in order, each group's in the order given (the `i` of the
    /// state names).
    fn params(&self) -> &[Var];

    /// The parameter groups (`opt.param_groups`); there is always at least one.
    fn param_groups(&self) -> &[ParamGroup];

    /// The parameter groups, to change a group's learning rate
    /// (`opt.param_groups[g]["lr"] = …`).
    fn param_groups_mut(&mut self) -> &mut [ParamGroup];

    /// The first group's learning rate (`param_groups[0]["lr"]`).
    fn lr(&self) -> f64 {
        self.param_groups()[0].lr
    }

    /// Sets every group's learning rate (for one group, what schedulers do; schedulers over
    /// several groups set each group's own through [`param_groups_mut`](Self::param_groups_mut)).
    fn set_lr(&mut self, lr: f64) {
        for g in self.param_groups_mut() {
            g.lr = lr;
        }
    }

    /// `param_groups[0]["initial_lr"]`: set by the first scheduler attached, `None` before.
    fn initial_lr(&self) -> Option<f64> {
        self.param_groups()[0].initial_lr
    }

    /// Sets every group's `initial_lr` (restoring a checkpoint of one group).
    fn set_initial_lr(&mut self, lr: Option<f64>) {
        for g in self.param_groups_mut() {
            g.initial_lr = lr;
        }
    }

    /// The per-parameter state under PyTorch's `state_dict` names (`state.{i}.exp_avg`, …; see
    /// the [module documentation](self)), parameters in order, each parameter's entries in
    /// PyTorch's order. The tensors are copies in effect: later steps do not change them.
    fn state(&self) -> Vec<(String, Tensor)>;

    /// Replaces the whole per-parameter state with `state`, as returned by
    /// [`state`](Self::state) (`opt.load_state_dict`). Parameters without entries start afresh.
    ///
    /// # Errors
    /// An unknown name, an index past the parameters, a tensor whose shape or dtype does not
    /// fit its parameter, or a parameter whose entries are incomplete (e.g. `exp_avg` without
    /// `step`); the state is unchanged then.
    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<()>;
}

/// An optimizer's state buffer for one parameter, owned (updated in place at each step), in
/// the parameter's dtype.
#[derive(Clone, Debug)]
pub(crate) enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Buf {
    /// Zeros of `dtype` (`torch.zeros_like(param)`).
    pub(crate) fn zeros(dtype: DType, n: usize) -> Buf {
        match dtype {
            DType::F64 => Buf::F64(vec![0.0; n]),
            _ => Buf::F32(vec![0.0; n]),
        }
    }

    /// A copy of a dense float tensor (checked by [`fit_buffer`]).
    pub(crate) fn from_tensor(t: &Tensor) -> Result<Buf> {
        Ok(match t.dtype() {
            DType::F64 => Buf::F64(t.to_vec()?),
            _ => Buf::F32(t.to_vec()?),
        })
    }

    /// A tensor holding a copy of the buffer.
    pub(crate) fn to_tensor(&self, shape: &[usize]) -> Tensor {
        match self {
            Buf::F32(v) => Tensor::from_slice(v, shape),
            Buf::F64(v) => Tensor::from_slice(v, shape),
        }
        .expect("a state buffer has its parameter's number of elements")
    }
}

/// `f32` or `f64`: the element types the optimizers compute in (a parameter's dtype), the
/// tensor crate's [`Float`] with what the optimizers add to it.
pub(crate) trait Real: Float {
    /// The number of lanes of PyTorch's AVX2 `Vectorized<T>` (its CPU norm kernel's width).
    const LANES: usize;
    /// `x ** p` through the portable `lockstep_tensor::math::pow` (the same bits on every libc).
    fn powf(self, p: Self) -> Self;
    /// The elements of a state buffer of this dtype.
    fn buf(b: &mut Buf) -> &mut Vec<Self>;
}

macro_rules! real {
    ($t:ty, $lanes:expr, $variant:ident, $pow:path) => {
        impl Real for $t {
            const LANES: usize = $lanes;
            fn buf(b: &mut Buf) -> &mut Vec<Self> {
                match b {
                    Buf::$variant(v) => v,
                    _ => unreachable!("state buffers are checked to have their parameter's dtype"),
                }
            }
            #[inline(always)]
            fn powf(self, p: Self) -> Self {
                $pow(self, p)
            }
        }
    };
}
real!(f32, 8, F32, lockstep_tensor::math::powf);
real!(f64, 4, F64, lockstep_tensor::math::pow);

/// Defines `fn $name<T: Real>(args)` running `$body` compiled for AVX2+FMA when the CPU has
/// them (so that [`Float::mul_add`] is one instruction and the loop vectorises) and for the
/// baseline otherwise. Both builds give the same bits: fused multiply-add, division and square
/// root are exactly rounded operations whatever the instructions.
macro_rules! multiversion {
    ($(#[$m:meta])* fn $name:ident<$T:ident>($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        fn $name<$T: $crate::optim::Real>($($arg: $ty),*) {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn imp<$T: $crate::optim::Real>($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn fast<$T: $crate::optim::Real>($($arg: $ty),*) {
                    imp($($arg),*)
                }
                if $crate::optim::fast_path() {
                    // SAFETY: the features `fast` is compiled for were just detected.
                    return unsafe { fast($($arg),*) };
                }
            }
            imp($($arg),*)
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
thread_local! {
    /// Tests: run the baseline build of the kernels even where AVX2+FMA exist.
    static FORCE_BASELINE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether the AVX2+FMA build of the kernels can run here.
#[cfg(target_arch = "x86_64")]
pub(crate) fn fast_path() -> bool {
    #[cfg(test)]
    if FORCE_BASELINE.with(|f| f.get()) {
        return false;
    }
    lockstep_tensor::isa::Isa::Avx2.enabled()
}

/// Calls `f::<f32>` or `f::<f64>` after the dtype of a parameter.
macro_rules! with_real {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            lockstep_tensor::DType::F32 => {
                type $T = f32;
                $body
            }
            lockstep_tensor::DType::F64 => {
                type $T = f64;
                $body
            }
            other => Err($crate::ops::invalid(
                $op,
                "params",
                format!("optimizers update float tensors (f32, f64), got {other:?}"),
            )),
        }
    };
}
pub(crate) use with_real;

/// Parameters of at least this many elements are updated in [`PAR_ROWS`]-element ranges
/// spread over the threads (a function of the size only; each element's update is its own, so
/// the bits never depend on it).
const PAR_MIN: usize = 1 << 15;
/// The range length of a split update.
const PAR_ROWS: usize = 1 << 12;

/// Runs `f(a, b)` for element ranges `a..b` that cover `0..n` exactly once: the whole range on
/// the caller below [`PAR_MIN`] elements or on one thread, else [`PAR_ROWS`]-aligned ranges,
/// one per thread of `par` (all done when this returns). For an optimizer's elementwise update.
pub(crate) fn for_each_range(
    par: &lockstep_tensor::threads::Par,
    n: usize,
    f: impl Fn(usize, usize) + Sync,
) {
    if par.threads() == 1 || n < PAR_MIN {
        return f(0, n);
    }
    let rows = n.div_ceil(PAR_ROWS);
    let parts = par.threads().min(rows);
    par.run_parts(parts, |q| {
        let (r0, r1) = (q * rows / parts, (q + 1) * rows / parts);
        f(r0 * PAR_ROWS, (r1 * PAR_ROWS).min(n));
    });
}

/// The dense elements of `t` (a cheap view when `t` is already dense).
pub(crate) fn dense<T: Real>(t: &Tensor) -> Result<std::borrow::Cow<'_, [T]>> {
    if t.is_contiguous()
        && let Ok(s) = t.data::<T>()
    {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    Ok(std::borrow::Cow::Owned(t.to_vec::<T>()?))
}

/// Checks a hyperparameter with PyTorch's message (`Invalid learning rate: -1`).
pub(crate) fn check_hyper(
    op: &'static str,
    arg: &'static str,
    ok: bool,
    what: &str,
    v: impl core::fmt::Display,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(invalid(op, arg, format!("Invalid {what}: {v}")))
    }
}

/// A name `state.{i}.{key}` split into `(i, key)`.
pub(crate) fn parse_state_name<'a>(
    op: &'static str,
    name: &'a str,
    n_params: usize,
) -> Result<(usize, &'a str)> {
    let bad = || {
        invalid(
            op,
            "state",
            format!("`{name}` is not a state name `state.{{i}}.{{key}}`"),
        )
    };
    let rest = name.strip_prefix("state.").ok_or_else(bad)?;
    let (i, key) = rest.split_once('.').ok_or_else(bad)?;
    let i: usize = i.parse().map_err(|_| bad())?;
    if i >= n_params {
        return Err(invalid(
            op,
            "state",
            format!("`{name}` refers to parameter {i}, but the optimizer has {n_params}"),
        ));
    }
    Ok((i, key))
}

/// Checks that a loaded state buffer fits its parameter, and returns it dense.
pub(crate) fn fit_buffer(op: &'static str, name: &str, t: &Tensor, p: &Var) -> Result<Tensor> {
    if t.shape() != p.shape() {
        return Err(invalid(
            op,
            "state",
            format!(
                "`{name}` has shape {:?}, its parameter {:?}",
                t.shape(),
                p.shape()
            ),
        ));
    }
    if t.dtype() != p.dtype() {
        return Err(Error::DType {
            op,
            expected: p.dtype(),
            got: t.dtype(),
        });
    }
    t.try_contiguous()
}

/// Checks a loaded `step` entry (a one-element float tensor) and returns its value as PyTorch
/// keeps it (`f32`).
pub(crate) fn fit_step(op: &'static str, name: &str, t: &Tensor) -> Result<f32> {
    if t.numel() != 1 || !t.dtype().is_float() {
        return Err(invalid(
            op,
            "state",
            format!(
                "`{name}` must be a one-element float tensor, got shape {:?} dtype {:?}",
                t.shape(),
                t.dtype()
            ),
        ));
    }
    Ok(t.to_f64_vec()[0] as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 test data.
    fn data(seed: u64, n: usize, scale: f64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                ((z >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * scale
            })
            .collect()
    }

    fn bits(t: &Tensor) -> Vec<u64> {
        t.to_f64_vec().iter().map(|x| x.to_bits()).collect()
    }

    /// Everything the kernels produce, for a few steps of each optimizer and a clipping.
    fn run(dtype: DType) -> Vec<Vec<u64>> {
        let sizes = [1usize, 7, 33, 1000];
        let tensor = |v: Vec<f64>, n: usize| match dtype {
            DType::F32 => {
                Tensor::from_vec(v.into_iter().map(|x| x as f32).collect::<Vec<_>>(), &[n]).unwrap()
            }
            _ => Tensor::from_vec(v, &[n]).unwrap(),
        };
        let mut out = Vec::new();
        for which in 0..6 {
            let params: Vec<Var> = sizes
                .iter()
                .map(|&n| Var::new(tensor(data(n as u64, n, 2.0), n), true))
                .collect();
            let mut opt: Box<dyn Optimizer> = match which {
                0 => Box::new(
                    Sgd::new(
                        params.clone(),
                        SgdOptions {
                            lr: 0.1,
                            momentum: 0.9,
                            nesterov: true,
                            weight_decay: 0.01,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                ),
                1 => Box::new(
                    Adam::new(
                        params.clone(),
                        AdamOptions {
                            amsgrad: true,
                            weight_decay: 0.1,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                ),
                2 => Box::new(AdamW::new(params.clone(), AdamWOptions::default()).unwrap()),
                3 => Box::new(
                    RMSprop::new(
                        params.clone(),
                        RMSpropOptions {
                            momentum: 0.9,
                            centered: true,
                            weight_decay: 0.01,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                ),
                4 => Box::new(
                    Adagrad::new(
                        params.clone(),
                        AdagradOptions {
                            lr_decay: 0.01,
                            ..Default::default()
                        },
                    )
                    .unwrap(),
                ),
                _ => Box::new(Adadelta::new(params.clone(), AdadeltaOptions::default()).unwrap()),
            };
            for step in 0..4u64 {
                for (p, &n) in params.iter().zip(&sizes) {
                    let g = tensor(data(1000 * step + n as u64, n, 0.2), n);
                    p.set_grad(Some(g)).unwrap();
                }
                let total = clip_grad_norm_(&params, 0.5, 2.0).unwrap();
                out.push(bits(&total));
                clip_grad_value_(&params, 0.03).unwrap();
                opt.step().unwrap();
            }
            out.extend(params.iter().map(|p| bits(&p.data())));
            out.extend(opt.state().iter().map(|(_, t)| bits(t)));
        }
        out
    }

    #[test]
    fn baseline_and_fma_builds_agree_bit_for_bit() {
        for dtype in [DType::F32, DType::F64] {
            let fast = run(dtype);
            FORCE_BASELINE.with(|f| f.set(true));
            let base = run(dtype);
            FORCE_BASELINE.with(|f| f.set(false));
            assert_eq!(fast, base, "{dtype:?}");
        }
    }
}
