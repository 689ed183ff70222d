//! Parameter groups and the one per-parameter state store every optimizer keeps
//! (`torch.optim.Optimizer`'s `param_groups` and `state`).
//!
//! An optimizer is its options type (implementing [`Hyper`]) plus its update: [`Core`] holds
//! the groups, checks parameters, walks the parameters that have gradients, and saves and
//! loads the state under PyTorch's `state_dict` names (`state.{i}.{key}`, `i` counting
//! parameters over all groups in order, as PyTorch numbers them).

use super::{Buf, fit_buffer, fit_step, parse_state_name};
use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{DType, Result, Tensor};

/// One of an optimizer's parameter groups (PyTorch's `optimizer.param_groups[g]`): its
/// parameters and its learning rate, which schedulers read and write.
///
/// The group's other hyperparameters (weight decay, momentum, …) are fixed at construction
/// (see each optimizer's `group_options`). The parameters cannot be changed: the state is
/// keyed by them.
#[derive(Clone, Debug)]
pub struct ParamGroup {
    params: Vec<Var>,
    /// Index of the group's first parameter among all the optimizer's parameters.
    start: usize,
    /// `param_groups[g]["lr"]`: the learning rate of the group's next step.
    pub lr: f64,
    /// `param_groups[g]["initial_lr"]`: set by the first scheduler attached, `None` before.
    pub initial_lr: Option<f64>,
}

impl ParamGroup {
    /// The group's parameters, in the order given.
    pub fn params(&self) -> &[Var] {
        &self.params
    }

    /// The index of the group's first parameter in [`Optimizer::params`](super::Optimizer::params)
    /// (the `i` of its first `state.{i}.…` names).
    pub fn first_index(&self) -> usize {
        self.start
    }
}

/// Parameters with their own options, to build an optimizer from several groups
/// (PyTorch's `{"params": [...], "weight_decay": 0.0}` dictionaries). Options a group does not
/// change are spelled with struct update syntax: `AdamWOptions { weight_decay: 0.0, ..opts }`.
#[derive(Clone, Debug)]
pub struct Group<O> {
    /// The group's parameters.
    pub params: Vec<Var>,
    /// The group's hyperparameters (its learning rate included).
    pub options: O,
}

impl<O> Group<O> {
    /// A group of `params` with `options`.
    pub fn new(params: Vec<Var>, options: O) -> Self {
        Self { params, options }
    }
}

/// An optimizer's options: its learning rate, its checks, and the names of the per-parameter
/// state buffers it keeps.
pub(crate) trait Hyper: Copy {
    /// Whether the state holds PyTorch's `step` (a 0-dimensional `f32` tensor), first.
    const HAS_STEP: bool;
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Sets the learning rate.
    fn set_lr(&mut self, lr: f64);
    /// PyTorch's constructor checks, each error naming the argument.
    fn check(&self, op: &'static str) -> Result<()>;
    /// The state buffers of one parameter of a group with these options, in PyTorch's order.
    fn keys(&self) -> Vec<&'static str>;
    /// A specific reason a state key is refused (when one is more helpful than the list).
    fn refuse_key(&self, _key: &str) -> Option<String> {
        None
    }
}

/// One parameter's state: `step` (when the optimizer counts steps) and the buffers named by
/// [`Hyper::keys`], in that order.
#[derive(Clone, Debug)]
pub(crate) struct Slots {
    pub(crate) step: f32,
    pub(crate) bufs: Vec<Buf>,
}

impl Slots {
    /// Step 0 and `k` buffers of zeros.
    pub(crate) fn zeros(dtype: DType, n: usize, k: usize) -> Slots {
        Slots {
            step: 0.0,
            bufs: (0..k).map(|_| Buf::zeros(dtype, n)).collect(),
        }
    }
}

/// The groups, their options and the per-parameter state of one optimizer.
#[derive(Debug)]
pub(crate) struct Core<O> {
    /// The optimizer's name, for errors (`SGD`, `AdamW`, …).
    pub(crate) name: &'static str,
    /// Every parameter, groups in order: the `i` of the state names.
    params: Vec<Var>,
    groups: Vec<ParamGroup>,
    /// Each group's options; their `lr` is the one given at construction, the group's is
    /// authoritative.
    opts: Vec<O>,
    /// The state of each parameter (`None` before its first step), indexed as `params`.
    pub(crate) state: Vec<Option<Slots>>,
}

impl<O: Hyper> Core<O> {
    /// An optimizer's core over `groups`, each checked as [`add_group`](Self::add_group) does.
    pub(crate) fn new(name: &'static str, groups: Vec<Group<O>>) -> Result<Self> {
        if groups.is_empty() {
            return Err(invalid(
                name,
                "params",
                "optimizer got an empty list of parameter groups",
            ));
        }
        let mut core = Core {
            name,
            params: Vec::new(),
            groups: Vec::new(),
            opts: Vec::new(),
            state: Vec::new(),
        };
        for g in groups {
            core.add_group(g)?;
        }
        Ok(core)
    }

    /// `add_param_group`: checks the options, and that every parameter is a float leaf
    /// listed once, in no other group.
    pub(crate) fn add_group(&mut self, g: Group<O>) -> Result<()> {
        let op = self.name;
        g.options.check(op)?;
        let start = self.params.len();
        check_params(op, &g.params, start)?;
        for (k, p) in g.params.iter().enumerate() {
            let i = start + k;
            if self.params.iter().any(|q| q.same(p)) {
                return Err(invalid(
                    op,
                    "params",
                    format!(
                        "parameter {i}: some parameters appear in more than one parameter group"
                    ),
                ));
            }
        }
        self.params.extend(g.params.iter().cloned());
        self.state.resize(self.params.len(), None);
        self.groups.push(ParamGroup {
            params: g.params,
            start,
            lr: g.options.lr(),
            initial_lr: None,
        });
        self.opts.push(g.options);
        Ok(())
    }

    /// Every parameter, groups in order.
    pub(crate) fn params(&self) -> &[Var] {
        &self.params
    }

    pub(crate) fn groups(&self) -> &[ParamGroup] {
        &self.groups
    }

    pub(crate) fn groups_mut(&mut self) -> &mut [ParamGroup] {
        &mut self.groups
    }

    /// Group `g`'s options with its current learning rate (`None` past the last group).
    pub(crate) fn options(&self, g: usize) -> Option<O> {
        let mut o = *self.opts.get(g)?;
        o.set_lr(self.groups[g].lr);
        Some(o)
    }

    /// Calls `f(options, param, grad, state)` for every parameter that has a gradient, groups
    /// and parameters in order (the options with the group's current learning rate).
    pub(crate) fn for_each_grad(
        &mut self,
        mut f: impl FnMut(&O, &Var, &Tensor, &mut Option<Slots>) -> Result<()>,
    ) -> Result<()> {
        for (g, grp) in self.groups.iter().enumerate() {
            let mut o = self.opts[g];
            o.set_lr(grp.lr);
            for (k, p) in grp.params.iter().enumerate() {
                let Some(grad) = p.grad() else { continue };
                f(&o, p, &grad, &mut self.state[grp.start + k])?;
            }
        }
        Ok(())
    }

    /// The group of parameter `i`.
    fn group_of(&self, i: usize) -> usize {
        self.groups.partition_point(|g| g.start <= i) - 1
    }

    /// `state.{i}.step` (when kept), then `state.{i}.{key}` for each buffer, parameters in
    /// order.
    pub(crate) fn state_entries(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (g, grp) in self.groups.iter().enumerate() {
            let keys = self.opts[g].keys();
            for (k, p) in grp.params.iter().enumerate() {
                let i = grp.start + k;
                let Some(s) = &self.state[i] else { continue };
                if O::HAS_STEP {
                    out.push((format!("state.{i}.step"), Tensor::scalar(s.step)));
                }
                for (key, b) in keys.iter().zip(&s.bufs) {
                    out.push((format!("state.{i}.{key}"), b.to_tensor(p.shape())));
                }
            }
        }
        out
    }

    /// Parses a whole state as written by [`state_entries`](Self::state_entries): every
    /// parameter has all its entries or none. The current state is not touched.
    pub(crate) fn parse_state(&self, state: &[(String, Tensor)]) -> Result<Vec<Option<Slots>>> {
        let op = self.name;
        let n = self.params.len();
        let keys: Vec<Vec<&'static str>> = self.opts.iter().map(Hyper::keys).collect();
        let mut steps: Vec<Option<f32>> = vec![None; n];
        let mut bufs: Vec<Vec<Option<Buf>>> = (0..n)
            .map(|i| vec![None; keys[self.group_of(i)].len()])
            .collect();
        for (full, t) in state {
            let (i, key) = parse_state_name(op, full, n)?;
            let g = self.group_of(i);
            if O::HAS_STEP && key == "step" {
                steps[i] = Some(fit_step(op, full, t)?);
            } else if let Some(k) = keys[g].iter().position(|k| *k == key) {
                bufs[i][k] = Some(Buf::from_tensor(&fit_buffer(
                    op,
                    full,
                    t,
                    &self.params[i],
                )?)?);
            } else {
                let why = self.opts[g].refuse_key(key).unwrap_or_else(|| {
                    let step = if O::HAS_STEP { "step, " } else { "" };
                    format!("{op} keeps {step}{}", keys[g].join(", "))
                });
                return Err(invalid(op, "state", format!("`{full}`: {why}")));
            }
        }
        let mut out = Vec::with_capacity(n);
        for (i, (step, b)) in steps.into_iter().zip(bufs).enumerate() {
            if step.is_none() && b.iter().all(Option::is_none) {
                out.push(None);
                continue;
            }
            let step = match step {
                Some(s) => Some(s),
                None if !O::HAS_STEP => Some(0.0),
                None => None,
            };
            match (step, b.into_iter().collect::<Option<Vec<Buf>>>()) {
                (Some(step), Some(bufs)) => out.push(Some(Slots { step, bufs })),
                _ => {
                    let step = if O::HAS_STEP { "step, " } else { "" };
                    return Err(invalid(
                        op,
                        "state",
                        format!(
                            "the state of parameter {i} is incomplete: it needs {step}{}",
                            keys[self.group_of(i)].join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// Implements [`Optimizer`](super::Optimizer) for a type whose [`Core`] is at `self$path`
/// and whose update is its inherent `step_impl`.
macro_rules! impl_optimizer {
    ($ty:ty, $($path:tt)*) => {
        impl $crate::optim::Optimizer for $ty {
            fn step(&mut self) -> lockstep_tensor::Result<()> {
                self.step_impl()
            }
            fn params(&self) -> &[$crate::autograd::Var] {
                self$($path)*.params()
            }
            fn param_groups(&self) -> &[$crate::optim::ParamGroup] {
                self$($path)*.groups()
            }
            fn param_groups_mut(&mut self) -> &mut [$crate::optim::ParamGroup] {
                self$($path)*.groups_mut()
            }
            fn state(&self) -> Vec<(String, lockstep_tensor::Tensor)> {
                self$($path)*.state_entries()
            }
            fn load_state(&mut self, state: &[(String, lockstep_tensor::Tensor)]) -> lockstep_tensor::Result<()> {
                self.load_state_impl(state)
            }
        }
    };
}
pub(crate) use impl_optimizer;

/// An optimizer's `options()` and `group_options(g)` (inside its `impl` block), read from its
/// `core`: every optimizer has them, with its own options type.
macro_rules! options_accessors {
    ($opts:ty) => {
        /// The first group's hyperparameters (the learning rate as last set).
        pub fn options(&self) -> $opts {
            self.group_options(0).expect("an optimizer has a group")
        }

        /// Group `g`'s hyperparameters (the learning rate as last set); `None` past the last
        /// group.
        pub fn group_options(&self, g: usize) -> Option<$opts> {
            self.core.options(g)
        }
    };
}
pub(crate) use options_accessors;

/// That every parameter of `params` (numbered from `start` in errors) is a float leaf, listed
/// once.
///
/// # Errors
/// `InvalidArgument` naming `params` and the parameter's number.
pub(crate) fn check_params(op: &'static str, params: &[Var], start: usize) -> Result<()> {
    for (k, p) in params.iter().enumerate() {
        let i = start + k;
        if !matches!(p.dtype(), DType::F32 | DType::F64) {
            return Err(invalid(
                op,
                "params",
                format!(
                    "parameter {i} has dtype {:?}; optimizers update f32 or f64 tensors",
                    p.dtype()
                ),
            ));
        }
        if !p.is_leaf() {
            return Err(invalid(
                op,
                "params",
                format!("parameter {i} is not a leaf tensor (it was computed by an op)"),
            ));
        }
        if params[..k].iter().any(|q| q.same(p)) {
            return Err(invalid(
                op,
                "params",
                format!("parameter {i} appears more than once"),
            ));
        }
    }
    Ok(())
}
