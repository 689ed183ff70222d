//! Learning-rate schedulers (`torch.optim.lr_scheduler`), computing PyTorch's values exactly.
//!
//! PyTorch's `step()` uses each scheduler's *chainable* (recursive) form, `get_lr()`, which
//! derives the new rate from the optimizer's current one; its closed form
//! (`_get_closed_form_lr`, used only by the deprecated `step(epoch)`) rounds differently in the
//! last bits. These schedulers reproduce the chainable form operation by operation in `f64`,
//! Python's float, with C's `cos` and `pow` as Python's `math.cos` and `**` call them, so
//! the learning rates are bit-identical to PyTorch's after every step.
//!
//! As in PyTorch, a scheduler keeps one base rate per parameter group (the group's
//! `initial_lr`) and sets each group's rate from its own current rate and base rate.

use super::Optimizer;
use crate::ops::invalid;
use lockstep_tensor::Result;
use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::hint::black_box;

/// A learning-rate scheduler attached to one optimizer (`torch.optim.lr_scheduler.LRScheduler`).
///
/// The optimizer is passed to each call rather than held, so the training loop keeps using it.
/// Always pass the optimizer the scheduler was built with.
pub trait LrScheduler {
    /// Advances one epoch (`sched.step()`, called after `opt.step()`): computes each group's
    /// next rate from its current one and sets it.
    fn step(&mut self, opt: &mut dyn Optimizer);

    /// The first group's rate set by the last step or by construction (`get_last_lr()[0]`).
    fn get_last_lr(&self) -> f64 {
        self.get_last_lrs()[0]
    }

    /// Every group's rate set by the last step or by construction (`get_last_lr()`).
    fn get_last_lrs(&self) -> Vec<f64>;

    /// The scheduler's position (`last_epoch`, PyTorch's name; 0 after construction).
    fn last_epoch(&self) -> i64 {
        self.state().last_epoch
    }

    /// The position, for a checkpoint (`state_dict()` without the constructor arguments).
    fn state(&self) -> SchedulerState;

    /// Restores a position saved by [`state`](Self::state) (`load_state_dict`). The
    /// constructor arguments (`step_size`, `gamma`, …) stay those given at construction.
    ///
    /// # Errors
    /// A negative `last_epoch`, a non-finite rate, or rates for another number of groups.
    fn load_state(&mut self, state: &SchedulerState) -> Result<()>;

    /// PyTorch's `_update_lr(epoch)`, which [`SequentialLR`] calls on reaching a milestone:
    /// sets `last_epoch` to `epoch` and every group's rate from the closed form of the
    /// schedule where it has one (`_get_closed_form_lr`), else from its recursive rule; not
    /// counted as a step. The default, for schedulers defined outside this crate, is
    /// [`step`](Self::step).
    fn update_lr_at(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
        let _ = epoch;
        self.step(opt);
    }

    /// `last_epoch -= 1`: what [`SequentialLR`] does to undo the step each scheduler made at
    /// construction. The default does nothing.
    fn undo_step(&mut self) {}

    /// PyTorch's `_initial_step()`: the step count back to 0, then a step in the mode of the
    /// constructor's step ([`SequentialLR`] makes it for its first scheduler). The default is
    /// [`step`](Self::step).
    fn initial_step(&mut self, opt: &mut dyn Optimizer) {
        self.step(opt);
    }
}

/// What a scheduler must save to continue where it was, under PyTorch's `state_dict` keys:
/// `last_epoch`, `_step_count`, `base_lrs`, `_last_lr` (one rate per parameter group).
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerState {
    /// Epochs stepped (`last_epoch`; 0 right after construction).
    pub last_epoch: i64,
    /// Calls to `step`, the one made by the constructor included (`_step_count`).
    pub step_count: u64,
    /// Each group's `initial_lr` when the scheduler was built (`base_lrs`).
    pub base_lrs: Vec<f64>,
    /// Each group's last rate set (`_last_lr`).
    pub last_lrs: Vec<f64>,
}

/// The part every scheduler shares (PyTorch's `LRScheduler` base class).
#[derive(Clone, Debug)]
struct Base {
    st: SchedulerState,
    /// `_is_initial`: true during the constructor's step only.
    is_initial: bool,
}

/// A schedule's rule: a group's next rate from its base rate and current rate.
type GetLr<'a> = &'a dyn Fn(&Base, f64, f64) -> f64;

impl Base {
    /// `LRScheduler.__init__` with `last_epoch=-1`, then `_initial_step()`.
    fn new(opt: &mut dyn Optimizer, get_lr: GetLr) -> Self {
        // group.setdefault("initial_lr", group["lr"])
        for g in opt.param_groups_mut() {
            g.initial_lr.get_or_insert(g.lr);
        }
        let groups = opt.param_groups();
        let mut b = Base {
            st: SchedulerState {
                last_epoch: -1,
                step_count: 0,
                base_lrs: groups
                    .iter()
                    .map(|g| g.initial_lr.unwrap_or(g.lr))
                    .collect(),
                last_lrs: groups.iter().map(|g| g.lr).collect(),
            },
            is_initial: true,
        };
        b.initial_step(opt, get_lr);
        b
    }

    /// `_initial_step()`.
    fn initial_step(&mut self, opt: &mut dyn Optimizer, get_lr: GetLr) {
        self.st.step_count = 0;
        self.is_initial = true;
        self.step(opt, get_lr);
        self.is_initial = false;
    }

    /// `LRScheduler.step()` without an epoch.
    fn step(&mut self, opt: &mut dyn Optimizer, get_lr: GetLr) {
        self.st.step_count += 1;
        self.st.last_epoch += 1;
        self.set_lrs(opt, get_lr);
    }

    /// Every group's rate from `get_lr` (groups added after the scheduler was built, which
    /// have no base rate, are left alone), then `_last_lr`.
    fn set_lrs(&mut self, opt: &mut dyn Optimizer, get_lr: GetLr) {
        let lrs: Vec<f64> = (opt.param_groups().iter().zip(&self.st.base_lrs))
            .map(|(g, &base)| get_lr(self, base, g.lr))
            .collect();
        for (g, lr) in opt.param_groups_mut().iter_mut().zip(lrs) {
            g.lr = lr;
        }
        self.st.last_lrs = opt.param_groups().iter().map(|g| g.lr).collect();
    }

    fn load(&mut self, s: &SchedulerState) -> Result<()> {
        if s.last_epoch < 0 {
            return Err(invalid(
                "LRScheduler",
                "last_epoch",
                format!(
                    "a saved scheduler has last_epoch >= 0, got {}",
                    s.last_epoch
                ),
            ));
        }
        if !s.base_lrs.iter().chain(&s.last_lrs).all(|x| x.is_finite()) {
            return Err(invalid(
                "LRScheduler",
                "state",
                format!(
                    "learning rates must be finite, got base_lrs {:?} and last_lrs {:?}",
                    s.base_lrs, s.last_lrs
                ),
            ));
        }
        let n = self.st.base_lrs.len();
        if s.base_lrs.len() != n || s.last_lrs.len() != n {
            return Err(invalid(
                "LRScheduler",
                "state",
                format!(
                    "the scheduler was built for {n} parameter group(s), the state has {} base and {} last rates",
                    s.base_lrs.len(),
                    s.last_lrs.len()
                ),
            ));
        }
        self.st = s.clone();
        Ok(())
    }
}

macro_rules! scheduler {
    ($ty:ident) => {
        impl LrScheduler for $ty {
            fn step(&mut self, opt: &mut dyn Optimizer) {
                let rule = &self.rule;
                self.base.step(opt, &|b, base, lr| rule.get_lr(b, base, lr));
            }
            fn get_last_lrs(&self) -> Vec<f64> {
                self.base.st.last_lrs.clone()
            }
            fn state(&self) -> SchedulerState {
                self.base.st.clone()
            }
            fn load_state(&mut self, state: &SchedulerState) -> Result<()> {
                self.base.load(state)
            }
            fn update_lr_at(&mut self, opt: &mut dyn Optimizer, epoch: i64) {
                // _update_lr(epoch): closed form where the schedule has one.
                self.base.st.last_epoch = epoch;
                let rule = &self.rule;
                self.base.set_lrs(opt, &|b, base, lr| {
                    rule.closed_form(b, base)
                        .unwrap_or_else(|| rule.get_lr(b, base, lr))
                });
            }
            fn undo_step(&mut self) {
                self.base.st.last_epoch -= 1;
            }
            fn initial_step(&mut self, opt: &mut dyn Optimizer) {
                let rule = &self.rule;
                self.base
                    .initial_step(opt, &|b, base, lr| rule.get_lr(b, base, lr));
            }
        }
    };
}

/// Python's `x ** y` for floats, from the portable `lockstep_tensor::math::pow` (bit-equal to
/// glibc's on every golden case; `black_box` keeps the compiler from rewriting it).
fn py_pow(x: f64, y: f64) -> f64 {
    lockstep_tensor::math::pow(x, black_box(y))
}

fn check_finite(op: &'static str, arg: &'static str, v: f64) -> Result<()> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(invalid(op, arg, format!("must be finite, got {v}")))
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct StepRule {
    step_size: i64,
    gamma: f64,
}

impl StepRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        let k = b.st.last_epoch.div_euclid(self.step_size);
        Some(base_lr * py_pow(self.gamma, k as f64))
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        let e = b.st.last_epoch;
        if e == 0 || e.rem_euclid(self.step_size) != 0 {
            lr
        } else {
            lr * self.gamma
        }
    }
}

/// `StepLR(opt, step_size, gamma)`: multiplies the rate by `gamma` every `step_size` epochs.
#[derive(Clone, Debug)]
pub struct StepLR {
    base: Base,
    rule: StepRule,
}

impl StepLR {
    /// Attaches to `opt` and makes the initial step (the rate is unchanged by it).
    ///
    /// # Errors
    /// `step_size == 0`, or a non-finite `gamma`.
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, gamma: f64) -> Result<Self> {
        if step_size == 0 {
            return Err(invalid("StepLR", "step_size", "must be at least 1"));
        }
        check_finite("StepLR", "gamma", gamma)?;
        let rule = StepRule {
            step_size: step_size as i64,
            gamma,
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}
scheduler!(StepLR);

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct MultiStepRule {
    /// `Counter(milestones)`: a milestone listed twice decays by `gamma**2`.
    milestones: BTreeMap<i64, u32>,
    gamma: f64,
}

impl MultiStepRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        // bisect_right(sorted(milestones.elements()), last_epoch)
        let k: u32 = self
            .milestones
            .range(..=b.st.last_epoch)
            .map(|(_, c)| c)
            .sum();
        Some(base_lr * py_pow(self.gamma, f64::from(k)))
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        match self.milestones.get(&b.st.last_epoch) {
            None => lr,
            Some(&count) => lr * py_pow(self.gamma, f64::from(count)),
        }
    }
}

/// `MultiStepLR(opt, milestones, gamma)`: multiplies the rate by `gamma` at each milestone
/// epoch (by `gamma**k` at a milestone listed `k` times).
#[derive(Clone, Debug)]
pub struct MultiStepLR {
    base: Base,
    rule: MultiStepRule,
}

impl MultiStepLR {
    /// Attaches to `opt` and makes the initial step.
    ///
    /// # Errors
    /// A non-finite `gamma`.
    pub fn new(opt: &mut dyn Optimizer, milestones: &[usize], gamma: f64) -> Result<Self> {
        check_finite("MultiStepLR", "gamma", gamma)?;
        let mut m = BTreeMap::new();
        for &e in milestones {
            *m.entry(e as i64).or_insert(0u32) += 1;
        }
        let rule = MultiStepRule {
            milestones: m,
            gamma,
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}
scheduler!(MultiStepLR);

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct CosineRule {
    t_max: i64,
    eta_min: f64,
}

impl CosineRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        let (e, t, eta) = (b.st.last_epoch as f64, self.t_max as f64, self.eta_min);
        Some(eta + (base_lr - eta) * (1.0 + (PI * e / t).cos()) / 2.0)
    }

    fn get_lr(&self, b: &Base, base_lr: f64, lr: f64) -> f64 {
        let e = b.st.last_epoch;
        let t = self.t_max as f64;
        let eta = self.eta_min;
        if b.is_initial {
            lr
        } else if b.st.step_count == 1 && e > 0 {
            eta + (base_lr - eta) * (1.0 + ((e as f64) * PI / t).cos()) / 2.0
        } else if (e - 1 - self.t_max).rem_euclid(2 * self.t_max) == 0 {
            lr + (base_lr - eta) * (1.0 - (PI / t).cos()) / 2.0
        } else {
            (1.0 + (PI * e as f64 / t).cos()) / (1.0 + (PI * (e - 1) as f64 / t).cos()) * (lr - eta)
                + eta
        }
    }
}

/// `CosineAnnealingLR(opt, T_max, eta_min)`: the rate follows half a cosine from the base rate
/// down to `eta_min` over `T_max` epochs (and back up, periodically), computed recursively
/// from the current rate as PyTorch does.
#[derive(Clone, Debug)]
pub struct CosineAnnealingLR {
    base: Base,
    rule: CosineRule,
}

impl CosineAnnealingLR {
    /// Attaches to `opt` and makes the initial step (the rate is unchanged by it).
    ///
    /// # Errors
    /// `t_max == 0`, or a non-finite `eta_min`.
    pub fn new(opt: &mut dyn Optimizer, t_max: usize, eta_min: f64) -> Result<Self> {
        if t_max == 0 {
            return Err(invalid("CosineAnnealingLR", "T_max", "must be at least 1"));
        }
        check_finite("CosineAnnealingLR", "eta_min", eta_min)?;
        let rule = CosineRule {
            t_max: t_max as i64,
            eta_min,
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}
scheduler!(CosineAnnealingLR);

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct LinearRule {
    start_factor: f64,
    end_factor: f64,
    total_iters: i64,
}

impl LinearRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        if self.total_iters == 0 {
            return None; // PyTorch divides by zero here
        }
        let m = self.total_iters.min(b.st.last_epoch) as f64;
        let d = self.end_factor - self.start_factor;
        Some(base_lr * (self.start_factor + d * m / self.total_iters as f64))
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        let e = b.st.last_epoch;
        if e == 0 {
            return lr * self.start_factor;
        }
        if b.is_initial || e > self.total_iters {
            return lr;
        }
        let d = self.end_factor - self.start_factor;
        lr * (1.0 + d / (self.total_iters as f64 * self.start_factor + (e - 1) as f64 * d))
    }
}

/// `LinearLR(opt, start_factor, end_factor, total_iters)`: the rate is multiplied by a factor
/// going linearly from `start_factor` to `end_factor` over `total_iters` epochs (applied
/// recursively, as PyTorch does).
#[derive(Clone, Debug)]
pub struct LinearLR {
    base: Base,
    rule: LinearRule,
}

impl LinearLR {
    /// Attaches to `opt` and makes the initial step, which multiplies the optimizer's rate by
    /// `start_factor`.
    ///
    /// # Errors
    /// PyTorch's checks: `start_factor` outside `(0, 1]`, `end_factor` outside `[0, 1]`.
    pub fn new(
        opt: &mut dyn Optimizer,
        start_factor: f64,
        end_factor: f64,
        total_iters: usize,
    ) -> Result<Self> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            return Err(invalid(
                "LinearLR",
                "start_factor",
                format!(
                    "Starting multiplicative factor expected to be greater than 0 and less or equal to 1, got {start_factor}"
                ),
            ));
        }
        if !(0.0..=1.0).contains(&end_factor) {
            return Err(invalid(
                "LinearLR",
                "end_factor",
                format!(
                    "Ending multiplicative factor expected to be between 0 and 1, got {end_factor}"
                ),
            ));
        }
        let rule = LinearRule {
            start_factor,
            end_factor,
            total_iters: total_iters as i64,
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}
scheduler!(LinearLR);

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct ConstantRule {
    factor: f64,
    total_iters: i64,
}

impl ConstantRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        let done = if b.st.last_epoch >= self.total_iters {
            1.0 - self.factor
        } else {
            0.0
        };
        Some(base_lr * (self.factor + done))
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        let e = b.st.last_epoch;
        if e == 0 {
            lr * self.factor
        } else if e != self.total_iters {
            lr
        } else {
            lr * (1.0 / self.factor)
        }
    }
}

/// `ConstantLR(opt, factor, total_iters)`: the rate is multiplied by `factor` until epoch
/// `total_iters`, where it is divided by it again (recursively, as PyTorch does).
#[derive(Clone, Debug)]
pub struct ConstantLR {
    base: Base,
    rule: ConstantRule,
}

impl ConstantLR {
    /// Attaches to `opt` and makes the initial step, which multiplies the optimizer's rate by
    /// `factor`. PyTorch's defaults are `factor = 1/3`, `total_iters = 5`.
    ///
    /// # Errors
    /// PyTorch's check: `factor` outside `[0, 1]`.
    pub fn new(opt: &mut dyn Optimizer, factor: f64, total_iters: usize) -> Result<Self> {
        if !(0.0..=1.0).contains(&factor) {
            return Err(invalid(
                "ConstantLR",
                "factor",
                "Constant multiplicative factor expected to be between 0 and 1.",
            ));
        }
        let rule = ConstantRule {
            factor,
            total_iters: total_iters as i64,
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}
scheduler!(ConstantLR);

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct ExponentialRule {
    gamma: f64,
}

impl ExponentialRule {
    fn closed_form(&self, b: &Base, base_lr: f64) -> Option<f64> {
        Some(base_lr * py_pow(self.gamma, b.st.last_epoch as f64))
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        if b.is_initial { lr } else { lr * self.gamma }
    }
}

/// `ExponentialLR(opt, gamma)`: multiplies the rate by `gamma` every epoch (recursively, as
/// PyTorch does, so the rates are bit-identical to its).
#[derive(Clone, Debug)]
pub struct ExponentialLR {
    base: Base,
    rule: ExponentialRule,
}

impl ExponentialLR {
    /// Attaches to `opt` and makes the initial step (the rate is unchanged by it).
    ///
    /// # Errors
    /// A non-finite `gamma`.
    pub fn new(opt: &mut dyn Optimizer, gamma: f64) -> Result<Self> {
        check_finite("ExponentialLR", "gamma", gamma)?;
        let rule = ExponentialRule { gamma };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}

scheduler!(ExponentialLR);

// ---------------------------------------------------------------------------------------------

/// The factor function of [`LambdaLR`]: epoch (`last_epoch`) to multiplier of the base rate.
type LrLambda = std::sync::Arc<dyn Fn(i64) -> f64 + Send + Sync>;

#[derive(Clone)]
struct LambdaRule {
    lambda: LrLambda,
}

impl core::fmt::Debug for LambdaRule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LambdaRule(<closure>)")
    }
}

impl LambdaRule {
    fn closed_form(&self, _b: &Base, _base_lr: f64) -> Option<f64> {
        None
    }

    fn get_lr(&self, b: &Base, base_lr: f64, _lr: f64) -> f64 {
        base_lr * (self.lambda)(b.st.last_epoch)
    }
}

/// `LambdaLR(opt, lr_lambda)`: the rate at epoch `e` is `base_lr * lr_lambda(e)` (the closure
/// is called with `e = 0` at construction). Bit-identical to PyTorch when the closure computes
/// the same `f64` as the Python lambda.
#[derive(Clone, Debug)]
pub struct LambdaLR {
    base: Base,
    rule: LambdaRule,
}

impl LambdaLR {
    /// Attaches to `opt` and makes the initial step (rate `base_lr * lr_lambda(0)`).
    ///
    /// # Errors
    /// None today; a `Result` like the other schedulers' constructors.
    pub fn new(
        opt: &mut dyn Optimizer,
        lr_lambda: impl Fn(i64) -> f64 + Send + Sync + 'static,
    ) -> Result<Self> {
        let rule = LambdaRule {
            lambda: std::sync::Arc::new(lr_lambda),
        };
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}

scheduler!(LambdaLR);

// ---------------------------------------------------------------------------------------------

/// The options of [`ReduceLROnPlateau`], with PyTorch's names and defaults
/// (`mode='min', factor=0.1, patience=10, threshold=1e-4, threshold_mode='rel', cooldown=0,
/// min_lr=0, eps=1e-8`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlateauOptions {
    /// `true` for `mode='max'` (a metric to increase), `false` for `'min'`.
    pub mode_max: bool,
    /// The rate is multiplied by `factor` (< 1) on a plateau.
    pub factor: f64,
    /// Epochs without improvement tolerated before reducing.
    pub patience: u64,
    /// The least change that counts as an improvement.
    pub threshold: f64,
    /// `true` for `threshold_mode='abs'`, `false` for `'rel'`.
    pub threshold_abs: bool,
    /// Epochs to wait after a reduction before counting bad epochs again.
    pub cooldown: u64,
    /// The rate never goes below `min_lr`.
    pub min_lr: f64,
    /// A reduction smaller than `eps` is not applied.
    pub eps: f64,
}

impl Default for PlateauOptions {
    fn default() -> Self {
        Self {
            mode_max: false,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_abs: false,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
        }
    }
}

/// `ReduceLROnPlateau(opt, ...)`: reduces the rate when a metric stops improving. Its
/// [`step`](Self::step) takes the metric, so it is not an [`LrScheduler`]. The comparisons
/// and the reduction `max(lr * factor, min_lr)` are PyTorch's, in `f64`, so the rates are
/// bit-identical to its for the same metrics.
#[derive(Clone, Debug)]
pub struct ReduceLROnPlateau {
    opts: PlateauOptions,
    best: f64,
    num_bad_epochs: u64,
    cooldown_counter: u64,
    last_epoch: i64,
    last_lrs: Vec<f64>,
}

impl ReduceLROnPlateau {
    /// Attaches to `opt` (the rate is not changed until a plateau).
    ///
    /// # Errors
    /// `factor >= 1` (PyTorch's check) or a NaN option.
    pub fn new(opt: &dyn Optimizer, opts: PlateauOptions) -> Result<Self> {
        if !(opts.factor < 1.0) {
            return Err(invalid(
                "ReduceLROnPlateau",
                "factor",
                "Factor should be < 1.0.",
            ));
        }
        for (arg, v) in [
            ("threshold", opts.threshold),
            ("min_lr", opts.min_lr),
            ("eps", opts.eps),
        ] {
            if v.is_nan() {
                return Err(invalid("ReduceLROnPlateau", arg, "must not be NaN"));
            }
        }
        Ok(Self {
            opts,
            best: if opts.mode_max {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            },
            num_bad_epochs: 0,
            cooldown_counter: 0,
            last_epoch: 0,
            last_lrs: opt.param_groups().iter().map(|g| g.lr).collect(),
        })
    }

    fn is_better(&self, a: f64) -> bool {
        let (o, best) = (&self.opts, self.best);
        match (o.mode_max, o.threshold_abs) {
            (false, false) => a < best * (1.0 - o.threshold),
            (false, true) => a < best - o.threshold,
            (true, false) => a > best * (o.threshold + 1.0),
            (true, true) => a > best + o.threshold,
        }
    }

    /// One epoch with its metric (`sched.step(metrics)`): may reduce every group's rate.
    pub fn step(&mut self, opt: &mut dyn Optimizer, metric: f64) {
        self.last_epoch += 1;
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.opts.patience {
            // _reduce_lr: each group on its own.
            for g in opt.param_groups_mut() {
                let old = g.lr;
                let new = (old * self.opts.factor).max(self.opts.min_lr);
                if old - new > self.opts.eps {
                    g.lr = new;
                }
            }
            self.cooldown_counter = self.opts.cooldown;
            self.num_bad_epochs = 0;
        }
        self.last_lrs = opt.param_groups().iter().map(|g| g.lr).collect();
    }

    /// The first group's rate after the last step (`get_last_lr()[0]`).
    pub fn get_last_lr(&self) -> f64 {
        self.last_lrs[0]
    }

    /// Every group's rate after the last step (`get_last_lr()`).
    pub fn get_last_lrs(&self) -> &[f64] {
        &self.last_lrs
    }

    /// Epochs stepped (`last_epoch`).
    pub fn last_epoch(&self) -> i64 {
        self.last_epoch
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct OneCycleRule {
    /// `(end_step, start_lr, end_lr)` of each phase.
    phases: Vec<(f64, f64, f64)>,
    total_steps: i64,
    cos: bool,
}

impl OneCycleRule {
    fn closed_form(&self, _b: &Base, _base_lr: f64) -> Option<f64> {
        None
    }

    fn get_lr(&self, b: &Base, _base_lr: f64, lr: f64) -> f64 {
        let step = b.st.last_epoch;
        if step > self.total_steps {
            return lr; // PyTorch raises here; the rate stays.
        }
        let step = step as f64;
        let mut start_step = 0.0;
        for (i, &(end_step, start, end)) in self.phases.iter().enumerate() {
            if step <= end_step || i == self.phases.len() - 1 {
                let pct = (step - start_step) / (end_step - start_step);
                return if self.cos {
                    end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0)
                } else {
                    (end - start) * pct + start
                };
            }
            start_step = end_step;
        }
        lr
    }
}

/// `OneCycleLR(opt, max_lr, total_steps, pct_start, anneal_strategy, div_factor,
/// final_div_factor, three_phase, cycle_momentum=False)`: the 1cycle policy, with PyTorch's
/// phases and arithmetic (bit-identical rates). Momentum cycling is not implemented (pass
/// `cycle_momentum=False` in PyTorch to compare). Steps past `total_steps` keep the rate
/// (PyTorch raises).
#[derive(Clone, Debug)]
pub struct OneCycleLR {
    base: Base,
    rule: OneCycleRule,
}

impl OneCycleLR {
    /// Attaches to `opt`, sets its `initial_lr` to `max_lr / div_factor` and makes the initial
    /// step. `cos`: `anneal_strategy='cos'` (else `'linear'`).
    ///
    /// # Errors
    /// `total_steps == 0`, `pct_start` outside `[0, 1]`, or a non-finite rate or factor.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        opt: &mut dyn Optimizer,
        max_lr: f64,
        total_steps: usize,
        pct_start: f64,
        cos: bool,
        div_factor: f64,
        final_div_factor: f64,
        three_phase: bool,
    ) -> Result<Self> {
        const OP: &str = "OneCycleLR";
        if total_steps == 0 {
            return Err(invalid(OP, "total_steps", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&pct_start) {
            return Err(invalid(
                OP,
                "pct_start",
                format!("Expected float between 0 and 1 pct_start, but got {pct_start}"),
            ));
        }
        check_finite(OP, "max_lr", max_lr)?;
        check_finite(OP, "div_factor", div_factor)?;
        check_finite(OP, "final_div_factor", final_div_factor)?;
        let t = total_steps as f64;
        let initial = max_lr / div_factor;
        let min = initial / final_div_factor;
        let phases = if three_phase {
            vec![
                (pct_start * t - 1.0, initial, max_lr),
                (2.0 * pct_start * t - 2.0, max_lr, initial),
                (t - 1.0, initial, min),
            ]
        } else {
            vec![
                (pct_start * t - 1.0, initial, max_lr),
                (t - 1.0, max_lr, min),
            ]
        };
        let rule = OneCycleRule {
            phases,
            total_steps: total_steps as i64,
            cos,
        };
        opt.set_initial_lr(Some(initial)); // every group: PyTorch sets each group's
        let base = Base::new(opt, &|b, base, lr| rule.get_lr(b, base, lr));
        Ok(Self { base, rule })
    }
}

scheduler!(OneCycleLR);

// ---------------------------------------------------------------------------------------------

/// `SequentialLR(opt, schedulers, milestones)`: runs `schedulers[0]` until the first
/// milestone epoch, then `schedulers[1]` (restarted at its epoch 0 with its closed form,
/// [`LrScheduler::update_lr_at`]) until the next, and so on, exactly as PyTorch does
/// (bit-identical rates).
///
/// Build the inner schedulers on the same optimizer first, then this one (which undoes their
/// construction steps, as PyTorch's does). [`state`](LrScheduler::state) holds this
/// scheduler's own position; the inner schedulers' positions are saved and restored through
/// [`schedulers`](Self::schedulers) and [`schedulers_mut`](Self::schedulers_mut).
pub struct SequentialLR {
    schedulers: Vec<Box<dyn LrScheduler>>,
    milestones: Vec<i64>,
    last_epoch: i64,
    last_lrs: Vec<f64>,
}

impl core::fmt::Debug for SequentialLR {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SequentialLR")
            .field("schedulers", &self.schedulers.len())
            .field("milestones", &self.milestones)
            .field("last_epoch", &self.last_epoch)
            .field("last_lrs", &self.last_lrs)
            .finish()
    }
}

impl SequentialLR {
    /// Chains `schedulers` (all built on `opt`) at `milestones`: resets every group's rate
    /// to its `initial_lr`, undoes the inner schedulers' construction steps and makes the
    /// initial step of the one that runs at epoch 0.
    ///
    /// # Errors
    /// No scheduler, or a number of milestones other than one less than the number of
    /// schedulers (PyTorch's checks), or milestones that decrease.
    pub fn new(
        opt: &mut dyn Optimizer,
        mut schedulers: Vec<Box<dyn LrScheduler>>,
        milestones: &[usize],
    ) -> Result<Self> {
        const OP: &str = "SequentialLR";
        if schedulers.is_empty() {
            return Err(invalid(
                OP,
                "schedulers",
                "SequentialLR expects at least one scheduler, but got no scheduler.",
            ));
        }
        if milestones.len() != schedulers.len() - 1 {
            return Err(invalid(
                OP,
                "milestones",
                format!(
                    "Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers {} and the number of milestones to be equal to {}",
                    schedulers.len(),
                    milestones.len()
                ),
            ));
        }
        if milestones.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid(
                OP,
                "milestones",
                format!("milestones must not decrease, got {milestones:?}"),
            ));
        }
        let milestones: Vec<i64> = milestones.iter().map(|&m| m as i64).collect();
        // Reset learning rates back to initial values.
        for g in opt.param_groups_mut() {
            if let Some(lr) = g.initial_lr {
                g.lr = lr;
            }
        }
        for s in &mut schedulers {
            s.undo_step();
        }
        let idx = milestones.partition_point(|&m| m <= 0);
        schedulers[idx].initial_step(opt);
        let last_lrs = schedulers[idx].get_last_lrs();
        Ok(Self {
            schedulers,
            milestones,
            last_epoch: 0,
            last_lrs,
        })
    }

    /// The inner schedulers, in order.
    pub fn schedulers(&self) -> &[Box<dyn LrScheduler>] {
        &self.schedulers
    }

    /// The inner schedulers, to restore their positions.
    pub fn schedulers_mut(&mut self) -> &mut [Box<dyn LrScheduler>] {
        &mut self.schedulers
    }
}

impl LrScheduler for SequentialLR {
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.last_epoch += 1;
        let e = self.last_epoch;
        let idx = self.milestones.partition_point(|&m| m <= e);
        let s = &mut self.schedulers[idx];
        if idx > 0 && self.milestones[idx - 1] == e {
            s.update_lr_at(opt, 0);
        } else {
            s.step(opt);
        }
        self.last_lrs = s.get_last_lrs();
    }

    fn get_last_lrs(&self) -> Vec<f64> {
        self.last_lrs.clone()
    }

    /// `last_epoch` and `_last_lr`; `step_count` 0 and `base_lrs` empty (PyTorch's
    /// `SequentialLR` keeps neither).
    fn state(&self) -> SchedulerState {
        SchedulerState {
            last_epoch: self.last_epoch,
            step_count: 0,
            base_lrs: Vec::new(),
            last_lrs: self.last_lrs.clone(),
        }
    }

    fn load_state(&mut self, state: &SchedulerState) -> Result<()> {
        if state.last_epoch < 0 || !state.last_lrs.iter().all(|x| x.is_finite()) {
            return Err(invalid(
                "SequentialLR",
                "state",
                format!(
                    "a saved scheduler has last_epoch >= 0 and finite rates, got {} and {:?}",
                    state.last_epoch, state.last_lrs
                ),
            ));
        }
        self.last_epoch = state.last_epoch;
        self.last_lrs = state.last_lrs.clone();
        Ok(())
    }

    fn undo_step(&mut self) {
        // PyTorch's recursive_undo reaches the schedulers inside.
        for s in &mut self.schedulers {
            s.undo_step();
        }
    }
}
