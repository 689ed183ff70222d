//! The [`Module`] trait: parameters and buffers under PyTorch's `state_dict` names and order,
//! `train()`/`eval()`, and `load_state_dict`.

use crate::autograd::Var;
use crate::ops::invalid;
use lockstep_tensor::{Error, Result, Tensor};

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

/// A layer or a model (`torch.nn.Module`).
///
/// Implementors list their own parameters and buffers, then their children's with the
/// child's name and a dot as prefix, in [`named_tensors`](Self::named_tensors) — the order of
/// PyTorch's `state_dict()` (a module's own parameters, then its own buffers, then each child
/// in registration order). Everything else is provided.
pub trait Module: Send + Sync {
    /// The forward pass.
    ///
    /// # Errors
    /// An input the module cannot take: the error names the module and the shapes.
    fn forward(&self, input: &Var) -> Result<Var>;

    /// Appends this module's parameters and buffers (and its children's) under `prefix`.
    fn named_tensors(&self, prefix: &str, out: &mut Vec<Named>);

    /// Sets training mode (`train(True)`) or evaluation mode (`train(False)`), recursively.
    fn train(&mut self, on: bool);

    /// Whether the module is in training mode.
    fn is_training(&self) -> bool;

    /// `module.eval()`.
    fn eval(&mut self) {
        self.train(false)
    }

    /// Every parameter and buffer in `state_dict` order.
    fn named_all(&self) -> Vec<Named> {
        let mut v = Vec::new();
        self.named_tensors("", &mut v);
        v
    }

    /// `named_parameters()`: the parameters with their names, in PyTorch's order.
    fn named_parameters(&self) -> Vec<(String, Var)> {
        self.named_all()
            .into_iter()
            .filter(|n| n.kind == Kind::Parameter)
            .map(|n| (n.name, n.var))
            .collect()
    }

    /// `parameters()`.
    fn parameters(&self) -> Vec<Var> {
        self.named_parameters()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// `state_dict()`: every parameter and buffer's current value, in PyTorch's order.
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
        for n in self.named_all() {
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

impl<M: Module + ?Sized> Module for Box<M> {
    fn forward(&self, input: &Var) -> Result<Var> {
        (**self).forward(input)
    }
    fn named_tensors(&self, prefix: &str, out: &mut Vec<Named>) {
        (**self).named_tensors(prefix, out)
    }
    fn train(&mut self, on: bool) {
        (**self).train(on)
    }
    fn is_training(&self) -> bool {
        (**self).is_training()
    }
}

/// Pushes a parameter under `prefix + name`.
pub fn push_param(out: &mut Vec<Named>, prefix: &str, name: &str, var: &Var) {
    out.push(Named {
        name: format!("{prefix}{name}"),
        var: var.clone(),
        kind: Kind::Parameter,
    });
}

/// Pushes a buffer under `prefix + name`.
pub fn push_buffer(out: &mut Vec<Named>, prefix: &str, name: &str, var: &Var) {
    out.push(Named {
        name: format!("{prefix}{name}"),
        var: var.clone(),
        kind: Kind::Buffer,
    });
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
