//! Modules declared once: the [`Module`] trait, whose one required listing ([`Module::visit`])
//! gives parameters and buffers under PyTorch's `state_dict` names and order, `train()`/`eval()`,
//! `load_state_dict`, `to_dtype`, `zero_grad` and `parameters()`; [`Forward`], the
//! single-input forward pass that [`Sequential`](crate::layers::Sequential) chains; and the
//! containers [`ModuleList`] and [`ModuleDict`].
//!
//! A module lists its members in [`visit`](Module::visit), one line each, and holds a
//! [`Training`] flag:
//!
//! ```
//! use lockstep_nn::layers::{Dropout, Linear};
//! use lockstep_nn::module::{Module, Training, Visitor};
//! use lockstep_nn::{Result, Var};
//!
//! /// `forward(x, h) -> (y, h')`: two inputs, two outputs, still a module.
//! struct Cell {
//!     ih: Linear,
//!     hh: Linear,
//!     drop: Dropout,
//!     scale: Var,
//!     training: Training,
//! }
//!
//! impl Module for Cell {
//!     fn visit(&self, v: &mut dyn Visitor) {
//!         v.param("scale", &self.scale);
//!         v.child("ih", &self.ih);
//!         v.child("hh", &self.hh);
//!         v.child("drop", &self.drop);
//!     }
//!     fn training(&self) -> &Training {
//!         &self.training
//!     }
//! }
//!
//! impl Cell {
//!     fn forward(&self, x: &Var, h: &Var) -> Result<(Var, Var)> {
//!         use lockstep_nn::Forward;
//!         let h2 = self.ih.forward(x)?.add(&self.hh.forward(h)?)?.tanh()?;
//!         Ok((self.drop.forward(&h2)?.mul(&self.scale)?, h2))
//!     }
//! }
//!
//! # fn main() -> Result<()> {
//! let mut cell = Cell {
//!     ih: Linear::new(3, 4, true)?,
//!     hh: Linear::new(4, 4, false)?,
//!     drop: Dropout::new(0.5)?,
//!     scale: Var::new(lockstep_tensor::Tensor::scalar(2.0f32), true),
//!     training: Training::default(),
//! };
//! let names: Vec<String> = cell.state_dict().into_iter().map(|(k, _)| k).collect();
//! assert_eq!(names, ["scale", "ih.weight", "ih.bias", "hh.weight"]);
//! cell.eval(); // reaches `drop` without a line of forwarding code
//! assert!(!cell.drop.is_training());
//! # Ok(())
//! # }
//! ```
//!
//! Why a listing and not a derive macro: a `#[derive(Module)]` would generate exactly this
//! `visit` from field attributes, at the price of a proc-macro crate (syn, quote) and of a
//! second way to declare, since computed names (`weight_ih_l1_reverse`, the numbered children
//! of [`Sequential`](crate::layers::Sequential)) cannot be field attributes and need the
//! listing anyway. The listing is one line a member, reads as PyTorch's `__init__`
//! registrations, and is the only thing a module writes: names, order, modes, dtypes and
//! gradients all follow from it, so there is no second list (a hand-written `train` forwarding
//! to each child) to forget. The training flag is the one piece of state the walk changes;
//! [`Training`] holds it behind `&self` so that one read-only listing serves every walk.

use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{Error, Result, Tensor};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a named tensor of a module is learned or only carried along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A parameter (`nn.Parameter`): returned by `parameters()`, updated by optimizers.
    Parameter,
    /// A buffer (`register_buffer`): saved in the `state_dict`, e.g. BatchNorm's running
    /// statistics.
    Buffer,
}

/// One named tensor of a module.
#[derive(Clone, Debug)]
pub struct Named {
    /// The dotted `state_dict` name (`0.weight`, `lstm.weight_ih_l0`, `1.running_mean`).
    pub name: String,
    /// The tensor (a handle: the module and the caller share it).
    pub var: Var,
    /// Parameter or buffer.
    pub kind: Kind,
}

/// A module's training flag (`module.training`): `true` when made, as in PyTorch. Only
/// [`Module::train`] on the module or an ancestor changes it; `forward` reads it with
/// [`get`](Self::get).
#[derive(Debug)]
pub struct Training(AtomicBool);

impl Training {
    /// Whether the module is in training mode.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed)
    }
}

impl Default for Training {
    fn default() -> Self {
        Self(AtomicBool::new(true))
    }
}

impl Clone for Training {
    fn clone(&self) -> Self {
        Self(AtomicBool::new(self.get()))
    }
}

/// What [`Module::visit`] lists its members to. Each name is the member's own (`weight`,
/// `encoder`, `3`), unique within the module and without a dot; the walks add the prefixes.
pub trait Visitor {
    /// A parameter (`self.weight = nn.Parameter(…)`).
    fn param(&mut self, name: &str, p: &Var);
    /// A buffer (`self.register_buffer(name, …)`).
    fn buffer(&mut self, name: &str, b: &Var);
    /// A submodule (`self.encoder = nn.Linear(…)`).
    fn child(&mut self, name: &str, m: &dyn Module);
}

/// A layer or a model (`torch.nn.Module`): what it holds, not how it is called.
///
/// Implementors write [`visit`](Self::visit) (their parameters, buffers and children, each
/// once) and [`training`](Self::training) (their flag); every other method follows. The order
/// is PyTorch's whatever the order of the listing's kinds: a module's own parameters (in
/// listed order), then its own buffers, then each child's, children in listed order — so
/// `state_dict()` and `named_parameters()` give PyTorch's names and order
/// (`h.0.attn.c_attn.weight`).
///
/// A parameter listed under two names (weight tying: `decoder.weight` the same [`Var`] as
/// `encoder.weight`) appears under both in `state_dict()`, and once, under its first name, in
/// `named_parameters()`/`parameters()`, as in PyTorch; [`Var::same`] is the identity.
///
/// `forward` is not part of this trait, so it may take and return anything
/// (`forward(x, hidden) -> (y, hidden)`); [`Forward`] is the single-input form.
pub trait Module: Send + Sync {
    /// Lists this module's parameters, buffers and direct children to `v`.
    fn visit(&self, v: &mut dyn Visitor);

    /// This module's training flag.
    fn training(&self) -> &Training;

    /// Whether the module is in training mode (`module.training`).
    fn is_training(&self) -> bool {
        self.training().get()
    }

    /// Sets training mode (`train(True)`) or evaluation mode (`train(False)`) on this module
    /// and every module under it.
    fn train(&mut self, on: bool) {
        self.training().set(on);
        self.for_each_submodule(&mut |_, m| m.training().set(on));
    }

    /// `module.eval()`.
    fn eval(&mut self) {
        self.train(false)
    }

    /// Calls `f` with every module under this one (not this one), parents before children,
    /// under its dotted name (`encoder`, `layers.3`), as PyTorch's `named_modules()` after the
    /// root.
    fn for_each_submodule(&self, f: &mut dyn FnMut(&str, &dyn Module)) {
        self.visit(&mut Walk {
            prefix: String::new(),
            f,
        });
    }

    /// Every parameter and buffer in `state_dict` order, tied ones under each of their names.
    fn named_all(&self) -> Vec<Named> {
        let mut c = Collect::new(String::new());
        self.visit(&mut c);
        c.finish()
    }

    /// `named_parameters()`: each parameter once, under its first name, in PyTorch's order.
    fn named_parameters(&self) -> Vec<(String, Var)> {
        unique(self.named_all(), Some(Kind::Parameter))
            .into_iter()
            .map(|n| (n.name, n.var))
            .collect()
    }

    /// `parameters()`: each parameter once, in PyTorch's order (what an optimizer takes).
    fn parameters(&self) -> Vec<Var> {
        self.named_parameters()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// `named_buffers()`: each buffer once, under its first name.
    fn named_buffers(&self) -> Vec<(String, Var)> {
        unique(self.named_all(), Some(Kind::Buffer))
            .into_iter()
            .map(|n| (n.name, n.var))
            .collect()
    }

    /// `state_dict()`: every parameter and buffer's current value under each of its names, in
    /// PyTorch's order.
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        self.named_all()
            .into_iter()
            .map(|n| (n.name, n.var.data()))
            .collect()
    }

    /// `load_state_dict(state, strict=True)`: every name must be present with its shape and
    /// dtype, and no other name may be given. Nothing is changed unless everything fits.
    ///
    /// # Errors
    /// Missing or unexpected keys, or a shape or dtype mismatch (all named in the message).
    fn load_state_dict(&self, state: &[(String, Tensor)]) -> Result<()> {
        let mine = self.named_all();
        let mut missing = Vec::new();
        let mut plan = Vec::new();
        for n in &mine {
            match state.iter().find(|(k, _)| *k == n.name) {
                None => missing.push(n.name.clone()),
                Some((_, t)) => {
                    if t.shape() != n.var.shape() || t.dtype() != n.var.dtype() {
                        return Err(invalid(
                            "load_state_dict",
                            "state_dict",
                            format!(
                                "size mismatch for {}: copying a param with shape {:?} ({:?}) from checkpoint, the shape in current model is {:?} ({:?})",
                                n.name,
                                t.shape(),
                                t.dtype(),
                                n.var.shape(),
                                n.var.dtype()
                            ),
                        ));
                    }
                    plan.push((n.var.clone(), t.clone()));
                }
            }
        }
        let unexpected: Vec<&str> = state
            .iter()
            .filter(|(k, _)| !mine.iter().any(|n| n.name == *k))
            .map(|(k, _)| k.as_str())
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            return Err(invalid(
                "load_state_dict",
                "state_dict",
                format!("Missing key(s): {missing:?}. Unexpected key(s): {unexpected:?}."),
            ));
        }
        for (v, t) in plan {
            v.set_data(t.try_contiguous()?)?;
        }
        Ok(())
    }

    /// `module.to(dtype)` for a float `dtype` (`module.double()` is `to_dtype(DType::F64)`):
    /// converts every floating-point parameter and buffer in place, keeping the handles;
    /// integer buffers such as `num_batches_tracked` are left alone, as in PyTorch. Layers whose
    /// kernels exist in `f32` only (`Conv2d`, the pools) then fail at `forward` with an error
    /// naming the op.
    ///
    /// # Errors
    /// If `dtype` is not a float dtype (nothing is changed then).
    fn to_dtype(&self, dtype: lockstep_tensor::DType) -> Result<()> {
        if !dtype.is_float() {
            return Err(invalid(
                "Module::to_dtype",
                "dtype",
                format!("nn.Module.to only accepts floating point dtypes, but got {dtype:?}"),
            ));
        }
        for n in unique(self.named_all(), None) {
            if n.var.dtype().is_float() {
                n.var.set_dtype(dtype)?;
            }
        }
        Ok(())
    }

    /// `zero_grad()`: clears every parameter's gradient (sets it to `None`, PyTorch's default).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.zero_grad();
        }
    }
}

/// The single-input forward pass (`y = module(x)`), which [`Sequential`] chains and
/// `lockstep train` calls. A module with other inputs or outputs implements [`Module`] only
/// and has its own `forward`.
///
/// [`Sequential`]: crate::layers::Sequential
pub trait Forward: Module {
    /// The forward pass.
    ///
    /// # Errors
    /// An input the module cannot take: the error names the module and the shapes.
    fn forward(&self, input: &Var) -> Result<Var>;
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, v: &mut dyn Visitor) {
        (**self).visit(v)
    }
    fn training(&self) -> &Training {
        (**self).training()
    }
}

impl<M: Forward + ?Sized> Forward for Box<M> {
    fn forward(&self, input: &Var) -> Result<Var> {
        (**self).forward(input)
    }
}

/// Gathers one module's members, then orders them as PyTorch: own parameters, own buffers,
/// children.
struct Collect {
    prefix: String,
    params: Vec<Named>,
    buffers: Vec<Named>,
    children: Vec<Named>,
}

impl Collect {
    fn new(prefix: String) -> Self {
        Self {
            prefix,
            params: Vec::new(),
            buffers: Vec::new(),
            children: Vec::new(),
        }
    }

    fn finish(mut self) -> Vec<Named> {
        self.params.append(&mut self.buffers);
        self.params.append(&mut self.children);
        self.params
    }
}

impl Visitor for Collect {
    fn param(&mut self, name: &str, p: &Var) {
        self.params.push(Named {
            name: format!("{}{name}", self.prefix),
            var: p.clone(),
            kind: Kind::Parameter,
        });
    }
    fn buffer(&mut self, name: &str, b: &Var) {
        self.buffers.push(Named {
            name: format!("{}{name}", self.prefix),
            var: b.clone(),
            kind: Kind::Buffer,
        });
    }
    fn child(&mut self, name: &str, m: &dyn Module) {
        let mut c = Collect::new(format!("{}{name}.", self.prefix));
        m.visit(&mut c);
        self.children.append(&mut c.finish());
    }
}

/// Visits every submodule, parents first.
struct Walk<'f> {
    prefix: String,
    f: &'f mut dyn FnMut(&str, &dyn Module),
}

impl Visitor for Walk<'_> {
    fn param(&mut self, _: &str, _: &Var) {}
    fn buffer(&mut self, _: &str, _: &Var) {}
    fn child(&mut self, name: &str, m: &dyn Module) {
        let full = format!("{}{name}", self.prefix);
        (self.f)(&full, m);
        m.visit(&mut Walk {
            prefix: format!("{full}."),
            f: &mut *self.f,
        });
    }
}

/// The first occurrence of each tensor (by identity) of `kind` (or of any kind).
fn unique(all: Vec<Named>, kind: Option<Kind>) -> Vec<Named> {
    let mut seen = HashSet::new();
    all.into_iter()
        .filter(|n| kind.is_none_or(|k| n.kind == k) && seen.insert(n.var.id()))
        .collect()
}

/// Checks a child's name as `add_module` does: not empty, no dot.
fn check_name(op: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name.contains('.') {
        return Err(invalid(
            op,
            "name",
            format!("module name can't be empty or contain \".\", got {name:?}"),
        ));
    }
    Ok(())
}

/// `nn.ModuleList`: children named `0`, `1`, … (`layers.3.bias` under a parent's `layers`),
/// with no forward of its own. `M` is the children's type: one block type for typed access, or
/// the default `Box<dyn Module>` for a mix.
pub struct ModuleList<M: Module = Box<dyn Module>> {
    items: Vec<M>,
    training: Training,
}

impl<M: Module> ModuleList<M> {
    /// An empty list (in training mode).
    pub fn new() -> Self {
        Self {
            items: Vec::new(),
            training: Training::default(),
        }
    }

    /// Appends a module (`append`).
    pub fn push(&mut self, m: M) {
        self.items.push(m);
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `i`-th module, if any.
    pub fn get(&self, i: usize) -> Option<&M> {
        self.items.get(i)
    }

    /// The modules in order.
    pub fn iter(&self) -> std::slice::Iter<'_, M> {
        self.items.iter()
    }
}

impl<M: Module> Default for ModuleList<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Module> FromIterator<M> for ModuleList<M> {
    fn from_iter<I: IntoIterator<Item = M>>(iter: I) -> Self {
        Self {
            items: iter.into_iter().collect(),
            training: Training::default(),
        }
    }
}

impl<M: Module> std::ops::Index<usize> for ModuleList<M> {
    type Output = M;
    fn index(&self, i: usize) -> &M {
        &self.items[i]
    }
}

impl<'a, M: Module> IntoIterator for &'a ModuleList<M> {
    type Item = &'a M;
    type IntoIter = std::slice::Iter<'a, M>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<M: Module> Module for ModuleList<M> {
    fn visit(&self, v: &mut dyn Visitor) {
        for (i, m) in self.items.iter().enumerate() {
            v.child(&i.to_string(), m);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// `nn.ModuleDict`: children under string keys, in insertion order (a key given again replaces
/// the module in its place, as a Python dict).
pub struct ModuleDict<M: Module = Box<dyn Module>> {
    items: Vec<(String, M)>,
    training: Training,
}

impl<M: Module> ModuleDict<M> {
    /// An empty dict (in training mode).
    pub fn new() -> Self {
        Self {
            items: Vec::new(),
            training: Training::default(),
        }
    }

    /// `dict[name] = m`.
    ///
    /// # Errors
    /// An empty name or one with a dot (it would break the dotted `state_dict` names).
    pub fn insert(&mut self, name: &str, m: M) -> Result<()> {
        check_name("ModuleDict::insert", name)?;
        match self.items.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = m,
            None => self.items.push((name.to_string(), m)),
        }
        Ok(())
    }

    /// The module under `name`, if any.
    pub fn get(&self, name: &str) -> Option<&M> {
        self.items.iter().find(|(k, _)| k == name).map(|(_, m)| m)
    }

    /// The number of modules.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the dict is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// `(key, module)` in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &M)> {
        self.items.iter().map(|(k, m)| (k.as_str(), m))
    }
}

impl<M: Module> Default for ModuleDict<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Module> Module for ModuleDict<M> {
    fn visit(&self, v: &mut dyn Visitor) {
        for (k, m) in &self.items {
            v.child(k, m);
        }
    }
    fn training(&self) -> &Training {
        &self.training
    }
}

/// An error naming a module and what it got (`Linear(64, 10): expected …`).
pub fn module_error(module: String, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op: "forward",
        arg: "input",
        reason: format!("{module}: {}", reason.into()),
    }
}

/// Checks that a layer's input has the dtype of its parameters (`weight`), naming the module
/// and the input's shape otherwise (`mat1 and mat2 must have the same dtype` in PyTorch).
///
/// # Errors
/// If the dtypes differ.
pub fn check_input_dtype(module: impl FnOnce() -> String, x: &Var, weight: &Var) -> Result<()> {
    if x.dtype() == weight.dtype() {
        return Ok(());
    }
    Err(module_error(
        module(),
        format!(
            "expected input of dtype {:?} (the parameters' dtype), got {:?} of shape {:?}; convert the input, or the module with to_dtype",
            weight.dtype(),
            x.dtype(),
            x.shape()
        ),
    ))
}
