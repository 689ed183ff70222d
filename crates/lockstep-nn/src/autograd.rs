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
//! | `torch.autograd.Function` | [`Var::from_op`]; with several outputs [`Var::from_op_multi`] |

use crate::error::invalid;
use lockstep_tensor::{DType, Error, Result, Tensor};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The backward of one op: given the gradient of its output, the gradients of its inputs (in
/// the order they were passed to [`Var::from_op`]; `None` for an input without a gradient).
pub type BackwardFn = dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// The backward of an op with several outputs ([`Var::from_op_multi`]): given each output's
/// gradient (`None` for an output no gradient reached), the gradients of its inputs.
pub type MultiBackwardFn = dyn Fn(&[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> + Send + Sync;

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
    /// The inputs, their versions when the op ran, and the backward closure (with the tensors
    /// it saved); `None` once a backward without `retain_graph` has run through this node.
    saved: Mutex<Option<Arc<Saved>>>,
}

struct Saved {
    inputs: Vec<Var>,
    versions: Vec<u64>,
    backward: Backward,
}

enum Backward {
    /// An op with one output.
    One(Box<BackwardFn>),
    /// The hidden node of a multi-output op: runs once with every output's gradient.
    Multi(Box<MultiBackwardFn>),
    /// Output `k` of `n` of a multi-output op (whose hidden node is this node's one input): its
    /// gradient is handed to the hidden node as piece `k`, unchanged.
    Piece(usize, usize),
}

/// The gradient waiting at a node: a tensor, or (at a multi-output op's hidden node) one per
/// output.
enum Pending {
    Whole(Tensor),
    Pieces(Vec<Option<Tensor>>),
}

/// Adds `g` to the running sum `acc` (in place when shapes and dtypes agree: the same `a + b`
/// per element without a fresh buffer; `add_` copies first if the storage is shared).
fn accumulate(acc: &mut Tensor, g: &Tensor) -> Result<()> {
    if acc.shape() == g.shape() && acc.dtype() == g.dtype() {
        acc.add_(g, 1.0)
    } else {
        *acc = acc.add(g)?;
        Ok(())
    }
}

/// A value and its version counter, shared by a tensor and its [`Var::detach`]ed aliases as
/// PyTorch's `detach()` shares storage and version.
struct Value {
    tensor: RwLock<Tensor>,
    version: AtomicU64,
}

struct Node {
    id: u64,
    shape: Vec<usize>,
    value: Arc<Value>,
    requires_grad: bool,
    grad: Mutex<Option<Tensor>>,
    grad_fn: Option<GradFn>,
}

impl Drop for Node {
    // Long chains (an RNN over many steps) would otherwise be freed recursively.
    fn drop(&mut self) {
        fn take_inputs(f: &mut GradFn) -> Vec<Var> {
            match f.saved.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
                Some(s) => match Arc::try_unwrap(s) {
                    Ok(mut s) => std::mem::take(&mut s.inputs),
                    Err(_) => Vec::new(),
                },
                None => Vec::new(),
            }
        }
        let Some(f) = self.grad_fn.as_mut() else {
            return;
        };
        let mut stack = take_inputs(f);
        while let Some(v) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(v.0)
                && let Some(f) = node.grad_fn.as_mut()
            {
                stack.append(&mut take_inputs(f));
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

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

impl Var {
    fn make(data: Tensor, requires_grad: bool, grad_fn: Option<GradFn>) -> Self {
        let value = Arc::new(Value {
            tensor: RwLock::new(data),
            version: AtomicU64::new(0),
        });
        Self::with_value(value, requires_grad, grad_fn)
    }

    fn with_value(value: Arc<Value>, requires_grad: bool, grad_fn: Option<GradFn>) -> Self {
        let shape = read(&value.tensor).shape().to_vec();
        Self(Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shape,
            value,
            requires_grad,
            grad: Mutex::new(None),
            grad_fn,
        }))
    }

    /// How many times the value was changed in place (`x._version`): each in-place write
    /// through a [`Var`] (or an alias made by [`detach`](Self::detach)) adds one. A backward
    /// that needs a value whose version moved since the op ran is an error.
    pub fn version(&self) -> u64 {
        self.0.value.version.load(Ordering::Acquire)
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
                saved: Mutex::new(Some(Arc::new(Saved {
                    inputs: inputs.iter().map(|&v| v.clone()).collect(),
                    versions: inputs.iter().map(|v| v.version()).collect(),
                    backward: Backward::One(Box::new(backward)),
                }))),
            }),
        )
    }

    /// The results of a differentiable op with several outputs (a `torch.autograd.Function`
    /// returning a tuple): `values` computed from `inputs`, and `backward` giving the inputs'
    /// gradients from the outputs' — one call per backward pass, with each output's gradient
    /// (`None` for an output that no gradient reached, as PyTorch's
    /// `ctx.set_materialize_grads(False)`). Nothing is recorded when gradients are off or no
    /// input requires a gradient. `backward`'s results are checked as [`from_op`](Self::from_op)'s.
    ///
    /// The outputs are separate tensors (no copy, no views of one buffer); the op's backward
    /// runs after every use of every output, as a one-output op's does.
    pub fn from_op_multi(
        name: &'static str,
        values: Vec<Tensor>,
        inputs: &[&Var],
        backward: impl Fn(&[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
    ) -> Result<Vec<Var>> {
        let track = is_grad_enabled() && inputs.iter().any(|v| v.requires_grad());
        if !track || values.iter().any(|v| !v.dtype().is_float()) {
            return Ok(values.into_iter().map(Self::constant).collect());
        }
        let grad_fn = |backward: Backward, inputs: Vec<Var>| {
            let versions = inputs.iter().map(|v| v.version()).collect();
            Some(GradFn {
                name,
                saved: Mutex::new(Some(Arc::new(Saved {
                    inputs,
                    versions,
                    backward,
                }))),
            })
        };
        // Made before the outputs, so the backward walk reaches it after all of them.
        let n = values.len();
        let hidden = Self::make(
            Tensor::empty(&[0], values.first().map_or(DType::F32, |v| v.dtype()))?,
            true,
            grad_fn(
                Backward::Multi(Box::new(backward)),
                inputs.iter().map(|&v| v.clone()).collect(),
            ),
        );
        Ok(values
            .into_iter()
            .enumerate()
            .map(|(k, v)| {
                Self::make(
                    v,
                    true,
                    grad_fn(Backward::Piece(k, n), vec![hidden.clone()]),
                )
            })
            .collect())
    }

    /// The current value, as a cheap **read-only** handle (`x.data` / `x.detach()` for
    /// reading): later writes to the parameter do not change a handle taken before, and an
    /// in-place write to the handle ([`Tensor::uniform_`], [`Tensor::mul_`], …) is an error
    /// naming the op, since it could not reach the parameter (PyTorch's `.data` shares storage;
    /// a write that silently reaches nothing would be worse than an error). Write through the
    /// parameter instead: [`Var::uniform_`], [`Var::add_`], [`Var::copy_`], …, under [`no_grad`] for a parameter that requires a gradient.
    pub fn data(&self) -> Tensor {
        read(&self.0.value.tensor).clone().into_read_only()
    }

    /// The value of a one-element tensor as an `f64` (`loss.item()`).
    ///
    /// # Errors
    /// If the tensor does not have exactly one element.
    pub fn item(&self) -> Result<f64> {
        let t = read(&self.0.value.tensor).clone();
        if t.numel() != 1 {
            return Err(invalid(
                "item",
                "self",
                format!(
                    "a Tensor with {} elements cannot be converted to Scalar",
                    t.numel()
                ),
            ));
        }
        Ok(t.to_f64_vec()[0])
    }

    /// Runs `f`, an in-place tensor op (it keeps the shape and dtype), on the value itself: a
    /// write that reaches this tensor (and its [`detach`](Self::detach)ed aliases) and adds
    /// one to its [`version`](Self::version), as any in-place op on a PyTorch tensor does.
    ///
    /// # Errors
    /// As PyTorch: a tensor that requires a gradient while gradients are recorded ("a leaf
    /// Variable that requires grad is being used in an in-place operation"; use [`no_grad`]);
    /// `f`'s error.
    pub(crate) fn with_data_mut<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Tensor) -> Result<R>,
    ) -> Result<R> {
        if self.requires_grad() && is_grad_enabled() {
            let why = if self.is_leaf() {
                "a leaf Variable that requires grad is being used in an in-place operation (write to parameters under no_grad)"
            } else {
                "in-place operations on a tensor computed by a recorded op are not supported; use the out-of-place op, or no_grad"
            };
            return Err(invalid(op, "self", why));
        }
        let r = f(&mut write(&self.0.value.tensor))?;
        self.0.value.version.fetch_add(1, Ordering::AcqRel);
        Ok(r)
    }

    /// `p.add_(other, alpha=alpha)` in place (see [`Tensor::add_`]: PyTorch's fused
    /// multiply-add), e.g. the SGD update `p.add_(&grad, -lr)` under [`no_grad`].
    ///
    /// # Errors
    /// A tensor that requires a gradient while gradients are recorded ("a leaf Variable that
    /// requires grad is being used in an in-place operation": use [`no_grad`]); as
    /// [`Tensor::add_`].
    pub fn add_(&self, other: &Tensor, alpha: f64) -> Result<()> {
        self.with_data_mut("add_", |t| t.add_(other, alpha))
    }

    /// `p.sub_(other, alpha=alpha)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn sub_(&self, other: &Tensor, alpha: f64) -> Result<()> {
        self.with_data_mut("sub_", |t| t.sub_(other, alpha))
    }

    /// `p.mul_(other)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn mul_(&self, other: &Tensor) -> Result<()> {
        self.with_data_mut("mul_", |t| t.mul_(other))
    }

    /// `p.mul_(s)` in place with a number.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn mul_scalar_(&self, s: f64) -> Result<()> {
        self.with_data_mut("mul_", |t| t.mul_scalar_(s))
    }

    /// `p.div_(other)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn div_(&self, other: &Tensor) -> Result<()> {
        self.with_data_mut("div_", |t| t.div_(other))
    }

    /// `p.addcmul_(t1, t2, value=value)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn addcmul_(&self, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
        self.with_data_mut("addcmul_", |t| t.addcmul_(t1, t2, value))
    }

    /// `p.addcdiv_(t1, t2, value=value)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn addcdiv_(&self, t1: &Tensor, t2: &Tensor, value: f64) -> Result<()> {
        self.with_data_mut("addcdiv_", |t| t.addcdiv_(t1, t2, value))
    }

    /// `p.lerp_(end, weight)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn lerp_(&self, end: &Tensor, weight: f64) -> Result<()> {
        self.with_data_mut("lerp_", |t| t.lerp_(end, weight))
    }

    /// `p.clamp_(min, max)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn clamp_(&self, min: Option<f64>, max: Option<f64>) -> Result<()> {
        self.with_data_mut("clamp_", |t| t.clamp_(min, max))
    }

    /// `p.copy_(src)` in place (broadcast, converted to `p`'s dtype).
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn copy_(&self, src: &Tensor) -> Result<()> {
        self.with_data_mut("copy_", |t| t.copy_(src))
    }

    /// `p.fill_(value)` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn fill_(&self, value: f64) -> Result<()> {
        self.with_data_mut("fill_", |t| t.fill_(value))
    }

    /// `p.zero_()` in place.
    ///
    /// # Errors
    /// As [`add_`](Self::add_).
    pub fn zero_(&self) -> Result<()> {
        self.with_data_mut("zero_", |t| t.zero_())
    }

    /// `p.uniform_(a, b, generator=g)` in place, drawing as PyTorch does.
    ///
    /// # Errors
    /// As [`add_`](Self::add_) and [`Tensor::uniform_`].
    pub fn uniform_(&self, a: f64, b: f64, g: Option<&mut lockstep_rng::Generator>) -> Result<()> {
        self.with_data_mut("uniform_", |t| t.uniform_(a, b, g))
    }

    /// `p.normal_(mean, std, generator=g)` in place, drawing as PyTorch does.
    ///
    /// # Errors
    /// As [`add_`](Self::add_) and [`Tensor::normal_`].
    pub fn normal_(
        &self,
        mean: f64,
        std: f64,
        g: Option<&mut lockstep_rng::Generator>,
    ) -> Result<()> {
        self.with_data_mut("normal_", |t| t.normal_(mean, std, g))
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
        *write(&self.0.value.tensor) = t;
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
        let mut data = write(&self.0.value.tensor);
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
        read(&self.0.value.tensor).dtype()
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

    /// The same value, cut from the graph (`x.detach()`). As in PyTorch, the result shares
    /// the value and its version counter with `self`: an in-place write through either is
    /// seen by both.
    pub fn detach(&self) -> Var {
        Var::with_value(self.0.value.clone(), false, None)
    }

    /// Back-propagates from a one-element tensor (`loss.backward()`): adds `d self / d x` to
    /// the gradient of every leaf `x` that requires one, then frees the graph behind `self`
    /// (the saved tensors), as PyTorch does: a second backward through any part of it is an
    /// error. [`backward_options`](Self::backward_options) with `retain_graph` keeps it.
    ///
    /// # Errors
    /// If `self` has more than one element ("grad can be implicitly created only for scalar
    /// outputs"), does not require a gradient, reaches a node an earlier backward freed, reaches
    /// a value changed in place since it was used, or a backward kernel fails.
    pub fn backward(&self) -> Result<()> {
        self.backward_options(&BackwardOptions::default())
    }

    /// Back-propagates with `grad` as the gradient of `self` (`y.backward(grad)`), then frees
    /// the graph as [`backward`](Self::backward) does.
    ///
    /// # Errors
    /// If `grad`'s shape or dtype differs from `self`'s, or as [`backward`](Self::backward)
    /// (the leaves' gradients are then unchanged).
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        self.backward_options(&BackwardOptions {
            gradient: Some(grad.clone()),
            retain_graph: false,
        })
    }

    /// `y.backward(gradient=None, retain_graph=False)` with the options spelled out.
    ///
    /// Without `retain_graph`, every node the pass runs through drops its saved tensors and
    /// its links to its inputs (so earlier batches' graphs are released); a later backward that
    /// reaches such a node fails with PyTorch's "Trying to backward through the graph a second
    /// time" naming the op. (PyTorch raises only at nodes that had saved tensors; lockstep
    /// raises at any freed node.) Before a node's backward runs, each of its inputs must be at
    /// the version it had when the op ran, else PyTorch's "modified by an inplace operation"
    /// error names the op.
    ///
    /// # Errors
    /// As [`backward`](Self::backward) and [`backward_with`](Self::backward_with); the
    /// leaves' gradients are unchanged by a failed pass.
    pub fn backward_options(&self, opts: &BackwardOptions) -> Result<()> {
        if !self.requires_grad() {
            return Err(invalid(
                "backward",
                "self",
                "element 0 of tensors does not require grad and does not have a grad_fn",
            ));
        }
        let grad = match &opts.gradient {
            Some(g) => g.clone(),
            None => {
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
                Tensor::ones(self.shape(), self.dtype())?
            }
        };
        check_grad("backward", self, &grad)?;
        let mut pending: BTreeMap<u64, (Var, Pending)> = BTreeMap::new();
        pending.insert(self.id(), (self.clone(), Pending::Whole(grad)));
        let mut leaves: Vec<(Var, Tensor)> = Vec::new();
        while let Some((_, (var, g))) = pending.pop_last() {
            let Some(f) = &var.0.grad_fn else {
                if let Pending::Whole(g) = g {
                    leaves.push((var, g));
                }
                continue;
            };
            let saved = {
                let mut slot = lock(&f.saved);
                if opts.retain_graph {
                    slot.clone()
                } else {
                    slot.take()
                }
            };
            let Some(saved) = saved else {
                return Err(invalid(f.name, "backward", FREED));
            };
            for (i, (input, &v)) in saved.inputs.iter().zip(&saved.versions).enumerate() {
                let now = input.version();
                if now != v {
                    return Err(invalid(
                        f.name,
                        "backward",
                        format!(
                            "one of the variables needed for gradient computation has been modified by an inplace operation: [{:?} {:?}] (input {i} of {}) is at version {now}; expected version {v} instead",
                            input.dtype(),
                            input.shape(),
                            f.name
                        ),
                    ));
                }
            }
            let grads = match (&saved.backward, g) {
                (&Backward::Piece(k, n), Pending::Whole(g)) => {
                    // Handed on unchanged; pieces of one output add up as any gradient does.
                    let hidden = &saved.inputs[0];
                    let entry = pending
                        .entry(hidden.id())
                        .or_insert_with(|| (hidden.clone(), Pending::Pieces(vec![None; n])));
                    if let Pending::Pieces(pieces) = &mut entry.1 {
                        match &mut pieces[k] {
                            Some(acc) => accumulate(acc, &g)?,
                            slot => *slot = Some(g),
                        }
                    }
                    continue;
                }
                (Backward::One(b), Pending::Whole(g)) => {
                    lockstep_tensor::trace::backward_scope(f.name, || b(&g))?
                }
                (Backward::Multi(backward), Pending::Pieces(pieces)) => {
                    lockstep_tensor::trace::backward_scope(f.name, || backward(&pieces))?
                }
                _ => {
                    // Not reachable: hidden nodes are inputs of their pieces only.
                    return Err(invalid(
                        f.name,
                        "backward",
                        "a gradient reached a multi-output op's node out of order",
                    ));
                }
            };
            if grads.len() != saved.inputs.len() {
                return Err(invalid(
                    f.name,
                    "backward",
                    format!(
                        "returned {} gradients for {} inputs",
                        grads.len(),
                        saved.inputs.len()
                    ),
                ));
            }
            for (input, gi) in saved.inputs.iter().zip(grads) {
                let Some(gi) = gi else { continue };
                if !input.requires_grad() {
                    continue;
                }
                check_grad(f.name, input, &gi)?;
                match pending.entry(input.id()) {
                    Entry::Occupied(mut e) => {
                        if let Pending::Whole(acc) = &mut e.get_mut().1 {
                            accumulate(acc, &gi)?;
                        }
                    }
                    Entry::Vacant(e) => {
                        e.insert((input.clone(), Pending::Whole(gi)));
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

/// PyTorch's message for a backward through a freed graph.
const FREED: &str = "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True (BackwardOptions { retain_graph: true, .. }) if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.";

/// The options of [`Var::backward_options`] (`tensor.backward(gradient, retain_graph)`).
#[derive(Clone, Debug, Default)]
pub struct BackwardOptions {
    /// The gradient of the tensor backward starts from; `None` means ones, allowed for a
    /// one-element tensor only.
    pub gradient: Option<Tensor>,
    /// Keep the graph (its saved tensors) for another backward through it.
    pub retain_graph: bool,
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

    /// `(2x, 3x)` as one two-output op, counting its backward calls and recording which
    /// outputs had a gradient.
    fn pair(x: &Var, calls: &Arc<Mutex<Vec<[bool; 2]>>>) -> (Var, Var) {
        let d = x.data();
        let log = calls.clone();
        let out = Var::from_op_multi(
            "pair",
            vec![d.mul_scalar(2.0).unwrap(), d.mul_scalar(3.0).unwrap()],
            &[x],
            move |g| {
                lock(&log).push([g[0].is_some(), g[1].is_some()]);
                let mut sum: Option<Tensor> = None;
                for (k, gk) in g.iter().enumerate() {
                    if let Some(gk) = gk {
                        let part = gk.mul_scalar(k as f64 + 2.0)?;
                        sum = Some(match sum {
                            Some(s) => s.add(&part)?,
                            None => part,
                        });
                    }
                }
                Ok(vec![sum])
            },
        )
        .unwrap();
        (out[0].clone(), out[1].clone())
    }

    #[test]
    fn a_multi_output_op_runs_its_backward_once_with_every_output_gradient() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let x = Var::new(t(&[1.0, 2.0]), true);
        let (a, b) = pair(&x, &calls);
        assert_eq!(a.grad_fn_name(), Some("pair"));
        // a used twice, b once: d/dx (a + a·a + b) = 2 + 2·(2x)·2 + 3.
        let y = a
            .add(&a.mul(&a).unwrap())
            .unwrap()
            .add(&b)
            .unwrap()
            .sum()
            .unwrap();
        y.backward().unwrap();
        assert_eq!(*lock(&calls), [[true, true]]);
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [13.0, 21.0]);
        // Through the freed graph again: PyTorch's error.
        let e = a.sum().unwrap().backward().unwrap_err().to_string();
        assert!(e.contains("second time"), "{e}");
    }

    #[test]
    fn an_output_no_gradient_reached_is_none() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let x = Var::new(t(&[1.0]), true);
        let (_, b) = pair(&x, &calls);
        b.sum().unwrap().backward().unwrap();
        assert_eq!(*lock(&calls), [[false, true]]);
        assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [3.0]);
        // Nothing recorded without gradients.
        let (a, b) = no_grad(|| pair(&x, &calls));
        assert!(a.is_leaf() && !a.requires_grad() && b.is_leaf());
        assert_eq!(a.data().to_vec::<f64>().unwrap(), [2.0]);
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
