//! Reverse-mode automatic differentiation: [`Var`], a tensor that remembers how it was made.
//!
//! Every differentiable op on [`Var`]s computes its value with the tensor ops (so dispatch and
//! deterministic mode apply), and — when gradients are enabled and an input requires one —
//! records a node holding the inputs and a backward closure. [`Var::backward`] walks the nodes
//! reachable from the root in **decreasing creation order**: a node is always created after its
//! inputs, so that order is a valid reverse topological order, and it depends on the program
//! only — never on threads or timing. Where several uses of one tensor meet, their gradients
//! are added in that same order. Backward kernels are tensor ops too, so they go through the
//! dispatch point and deterministic mode covers them.
//!
//! | PyTorch | lockstep-nn |
//! |---|---|
//! | `torch.tensor(..., requires_grad=True)` | [`Var::new`]`(t, true)` |
//! | `loss.backward()`, `y.backward(g)` | [`Var::backward`], [`Var::backward_with`] |
//! | `x.grad`, `x.grad = None` | [`Var::grad`], [`Var::zero_grad`] |
//! | `with torch.no_grad():` | [`no_grad`] |
//! | `x.detach()`, `x.data` | [`Var::detach`], [`Var::data`] |
//! | `torch.autograd.Function` | [`Var::from_op`] |

use crate::ops::invalid;
use lockstep_tensor::{DType, Error, Result, Tensor};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// The backward of one op: given the gradient of its output, the gradients of its inputs (in
/// the order they were passed to [`Var::from_op`]; `None` for an input without a gradient).
pub type BackwardFn = dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops called from this thread record gradients (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Runs `f` with gradient recording off on this thread (`with torch.no_grad():`), restoring
/// the previous setting however `f` ends.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    set_grad_enabled(false, f)
}

/// Runs `f` with gradient recording on or off on this thread (`torch.set_grad_enabled(mode)`).
pub fn set_grad_enabled<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _r = Restore(GRAD_ENABLED.with(|g| g.replace(on)));
    f()
}

struct GradFn {
    name: &'static str,
    inputs: Vec<Var>,
    backward: Box<BackwardFn>,
}

struct Node {
    id: u64,
    shape: Vec<usize>,
    data: RwLock<Tensor>,
    requires_grad: bool,
    grad: Mutex<Option<Tensor>>,
    grad_fn: Option<GradFn>,
}

impl Drop for Node {
    // Long chains (an RNN over many steps) would otherwise be freed recursively.
    fn drop(&mut self) {
        let Some(f) = self.grad_fn.as_mut() else {
            return;
        };
        let mut stack = std::mem::take(&mut f.inputs);
        while let Some(v) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(v.0)
                && let Some(f) = node.grad_fn.as_mut()
            {
                stack.append(&mut f.inputs);
            }
        }
    }
}

/// A tensor in the autograd graph. Cloning is cheap and shares the node: a parameter cloned
/// into a model and an optimizer is one parameter.
#[derive(Clone)]
pub struct Var(Arc<Node>);

impl core::fmt::Debug for Var {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Var({:?}", self.data())?;
        if let Some(g) = &self.0.grad_fn {
            write!(f, ", grad_fn={}", g.name)?;
        } else if self.0.requires_grad {
            write!(f, ", requires_grad=true")?;
        }
        write!(f, ")")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Var {
    fn make(data: Tensor, requires_grad: bool, grad_fn: Option<GradFn>) -> Self {
        Self(Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shape: data.shape().to_vec(),
            data: RwLock::new(data),
            requires_grad,
            grad: Mutex::new(None),
            grad_fn,
        }))
    }

    /// A leaf: a tensor made by the user, with or without a gradient (`requires_grad`).
    /// Only float tensors can require a gradient; for others the flag is ignored.
    pub fn new(data: Tensor, requires_grad: bool) -> Self {
        let rg = requires_grad && data.dtype().is_float();
        Self::make(data, rg, None)
    }

    /// A leaf that never has a gradient (inputs, targets, masks).
    pub fn constant(data: Tensor) -> Self {
        Self::make(data, false, None)
    }

    /// The result of a differentiable op (`torch.autograd.Function`): `value` computed from
    /// `inputs`, and `backward` giving the inputs' gradients from the output's. Nothing is
    /// recorded when gradients are off ([`no_grad`]) or no input requires a gradient.
    ///
    /// `backward` must return one entry per input, each `None` or a tensor of that input's
    /// shape and dtype; [`Var::backward`] checks this and names `name` if it does not hold.
    /// It should capture tensors, not `Var`s, so the graph is freed with its output.
    pub fn from_op(
        name: &'static str,
        value: Tensor,
        inputs: &[&Var],
        backward: impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
    ) -> Self {
        let track = is_grad_enabled() && inputs.iter().any(|v| v.requires_grad());
        if !track || !value.dtype().is_float() {
            return Self::constant(value);
        }
        Self::make(
            value,
            true,
            Some(GradFn {
                name,
                inputs: inputs.iter().map(|&v| v.clone()).collect(),
                backward: Box::new(backward),
            }),
        )
    }

    /// The current value (a cheap handle; later [`set_data`](Self::set_data) calls do not
    /// change a handle taken before).
    pub fn data(&self) -> Tensor {
        self.0
            .data
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the value of a leaf (what an optimizer step or `load_state_dict` does;
    /// `param.data = t` / `param.copy_(t)` under `no_grad` in PyTorch).
    ///
    /// # Errors
    /// If the shape or dtype differs from the current value's, or `self` is not a leaf.
    pub fn set_data(&self, t: Tensor) -> Result<()> {
        if self.0.grad_fn.is_some() {
            return Err(invalid(
                "set_data",
                "self",
                "only a leaf's value can be replaced (this tensor was computed by an op)",
            ));
        }
        if t.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op: "set_data",
                lhs: self.shape().to_vec(),
                rhs: t.shape().to_vec(),
            });
        }
        if t.dtype() != self.dtype() {
            return Err(Error::DType {
                op: "set_data",
                expected: self.dtype(),
                got: t.dtype(),
            });
        }
        *self.0.data.write().unwrap_or_else(|e| e.into_inner()) = t;
        Ok(())
    }

    /// Converts a floating-point leaf's value, and its gradient if it has one, to the float
    /// dtype `dtype` in place: what `module.to(torch.float64)` / `module.double()` does to
    /// each parameter (the handle stays the same, so a model and an optimizer holding it
    /// both see the new dtype). Integer tensors cannot be converted this way (PyTorch's
    /// `module.to(dtype)` leaves them alone too; see [`Module::to_dtype`](crate::Module::to_dtype)).
    ///
    /// # Errors
    /// If `self` is not a leaf, or `self` or `dtype` is not a float dtype.
    pub fn set_dtype(&self, dtype: DType) -> Result<()> {
        if self.0.grad_fn.is_some() {
            return Err(invalid(
                "set_dtype",
                "self",
                "only a leaf's dtype can be changed (this tensor was computed by an op)",
            ));
        }
        if !dtype.is_float() || !self.dtype().is_float() {
            return Err(invalid(
                "set_dtype",
                "dtype",
                format!(
                    "only floating-point tensors can be converted between float dtypes (from {:?} to {dtype:?})",
                    self.dtype()
                ),
            ));
        }
        let mut data = self.0.data.write().unwrap_or_else(|e| e.into_inner());
        let mut grad = lock(&self.0.grad);
        *data = data.to_dtype(dtype);
        *grad = grad.as_ref().map(|g| g.to_dtype(dtype));
        Ok(())
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.0.shape.len()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.0
            .data
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .dtype()
    }

    /// Whether gradients flow to this tensor.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad
    }

    /// Whether this tensor was made by the user rather than by an op.
    pub fn is_leaf(&self) -> bool {
        self.0.grad_fn.is_none()
    }

    /// The name of the op that made this tensor (`grad_fn`), `None` for leaves.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.0.grad_fn.as_ref().map(|g| g.name)
    }

    /// A process-unique id, increasing with creation order.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Whether two handles are the same tensor.
    pub fn same(&self, other: &Var) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The accumulated gradient of a leaf (`x.grad`): `None` before the first backward and
    /// after [`zero_grad`](Self::zero_grad).
    pub fn grad(&self) -> Option<Tensor> {
        lock(&self.0.grad).clone()
    }

    /// Sets or clears the gradient (`x.grad = g`), e.g. for gradient clipping.
    ///
    /// # Errors
    /// If `g`'s shape or dtype differs from the tensor's.
    pub fn set_grad(&self, g: Option<Tensor>) -> Result<()> {
        if let Some(g) = &g {
            check_grad("set_grad", self, g)?;
        }
        *lock(&self.0.grad) = g;
        Ok(())
    }

    /// Clears the gradient (`x.grad = None`, what `optimizer.zero_grad()` does by default).
    pub fn zero_grad(&self) {
        *lock(&self.0.grad) = None;
    }

    /// The same value, cut from the graph (`x.detach()`).
    pub fn detach(&self) -> Var {
        Var::constant(self.data())
    }

    /// Back-propagates from a one-element tensor (`loss.backward()`): adds `d self / d x` to
    /// the gradient of every leaf `x` that requires one.
    ///
    /// # Errors
    /// If `self` has more than one element ("grad can be implicitly created only for scalar
    /// outputs"), does not require a gradient, or a backward kernel fails.
    pub fn backward(&self) -> Result<()> {
        if self.numel() != 1 {
            return Err(invalid(
                "backward",
                "self",
                format!(
                    "grad can be implicitly created only for scalar outputs (this tensor has shape {:?}); pass a gradient with backward_with",
                    self.shape()
                ),
            ));
        }
        let one = Tensor::ones(self.shape(), self.dtype())?;
        self.backward_with(&one)
    }

    /// Back-propagates with `grad` as the gradient of `self` (`y.backward(grad)`).
    ///
    /// # Errors
    /// If `grad`'s shape or dtype differs from `self`'s, `self` does not require a gradient,
    /// or a backward kernel fails (the leaves' gradients are then unchanged).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        if !self.requires_grad() {
            return Err(invalid(
                "backward",
                "self",
                "element 0 of tensors does not require grad and does not have a grad_fn",
            ));
        }
        check_grad("backward", self, grad)?;
        let mut pending: BTreeMap<u64, (Var, Tensor)> = BTreeMap::new();
        pending.insert(self.id(), (self.clone(), grad.clone()));
        let mut leaves: Vec<(Var, Tensor)> = Vec::new();
        while let Some((_, (var, g))) = pending.pop_last() {
            let Some(f) = &var.0.grad_fn else {
                leaves.push((var, g));
                continue;
            };
            let grads = lockstep_tensor::trace::backward_scope(f.name, || (f.backward)(&g))?;
            if grads.len() != f.inputs.len() {
                return Err(invalid(
                    f.name,
                    "backward",
                    format!(
                        "returned {} gradients for {} inputs",
                        grads.len(),
                        f.inputs.len()
                    ),
                ));
            }
            for (input, gi) in f.inputs.iter().zip(grads) {
                let Some(gi) = gi else { continue };
                if !input.requires_grad() {
                    continue;
                }
                check_grad(f.name, input, &gi)?;
                match pending.entry(input.id()) {
                    Entry::Occupied(mut e) => {
                        let acc = &mut e.get_mut().1;
                        *acc = acc.add(&gi)?;
                    }
                    Entry::Vacant(e) => {
                        e.insert((input.clone(), gi));
                    }
                }
            }
        }
        // Leaves last, so that a failing kernel above leaves every `.grad` as it was.
        for (leaf, g) in leaves {
            let mut slot = lock(&leaf.0.grad);
            *slot = Some(match slot.take() {
                None => g.try_contiguous()?,
                Some(old) => old.add(&g)?,
            });
        }
        Ok(())
    }
}

fn check_grad(op: &'static str, v: &Var, g: &Tensor) -> Result<()> {
    if g.shape() != v.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: v.shape().to_vec(),
            rhs: g.shape().to_vec(),
        });
    }
    if g.dtype() != v.dtype() {
        return Err(Error::DType {
            op,
            expected: v.dtype(),
            got: g.dtype(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f64]) -> Tensor {
        Tensor::from_slice(v, &[v.len()]).unwrap()
    }

    #[test]
    fn accumulates_across_uses_and_calls() {
        let x = Var::new(t(&[1.0, 2.0]), true);
        let y = x.mul(&x).unwrap().sum().unwrap(); // Σ x²
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [2.0, 4.0]);
        let y = x.mul(&x).unwrap().sum().unwrap();
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [4.0, 8.0]);
        x.zero_grad();
        assert!(x.grad().is_none());
    }

    #[test]
    fn no_grad_and_errors() {
        let x = Var::new(t(&[1.0, 2.0]), true);
        let y = no_grad(|| x.mul(&x).unwrap());
        assert!(!y.requires_grad());
        assert!(is_grad_enabled());
        let e = x.mul(&x).unwrap().backward().unwrap_err();
        assert!(e.to_string().contains("only for scalar outputs"), "{e}");
        assert!(y.sum().unwrap().backward().is_err());
        assert!(x.detach().is_leaf() && !x.detach().requires_grad());
        let bad = Var::from_op("bad_op", t(&[1.0]), &[&x], |_| Ok(vec![Some(t(&[1.0]))]));
        let e = bad.backward().unwrap_err();
        assert!(e.to_string().contains("bad_op"), "{e}");
        assert!(
            x.grad().is_none(),
            "a failed backward leaves grads unchanged"
        );
    }

    #[test]
    fn set_dtype_converts_value_and_gradient_in_place() {
        let x = Var::new(Tensor::from_slice(&[1.5f32, -2.0], &[2]).unwrap(), true);
        x.mul(&x).unwrap().sum().unwrap().backward().unwrap();
        let alias = x.clone();
        x.set_dtype(DType::F64).unwrap();
        assert_eq!(alias.dtype(), DType::F64);
        assert_eq!(alias.data().to_vec::<f64>().unwrap(), [1.5, -2.0]);
        assert_eq!(alias.grad().unwrap().to_vec::<f64>().unwrap(), [3.0, -4.0]);
        let y = x.mul(&x).unwrap();
        assert!(y.set_dtype(DType::F32).is_err(), "not a leaf");
        let i = Var::constant(Tensor::from_vec(vec![1i64], &[1]).unwrap());
        assert!(i.set_dtype(DType::F64).is_err());
        assert!(x.set_dtype(DType::I64).is_err());
        assert_eq!(x.dtype(), DType::F64);
    }

    #[test]
    fn accumulation_order_is_the_graph_order() {
        // Three uses of x meet in one gradient, added in decreasing creation order of the
        // using nodes (c, b, a), whatever the order in which they finish.
        let x = Var::new(t(&[1.0]), true);
        let a = x.mul_scalar(1e16).unwrap();
        let b = x.mul_scalar(1.0).unwrap();
        let c = x.mul_scalar(1.0).unwrap();
        let y = a.add(&b).unwrap().add(&c).unwrap().sum().unwrap();
        y.backward().unwrap();
        // (1 + 1) + 1e16 = 1e16 + 2 exactly; starting from a would give (1e16 + 1) + 1 = 1e16.
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [1e16 + 2.0]);
    }

    #[test]
    fn long_chain_drops_without_recursion() {
        let x = Var::new(t(&[1.0]), true);
        let mut y = x.clone();
        for _ in 0..50_000 {
            y = y.mul_scalar(1.0).unwrap();
        }
        drop(y);
    }
}
