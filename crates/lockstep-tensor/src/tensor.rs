//! [`Tensor`]: shared storage plus a layout. Cloning is a reference-count bump; view ops share
//! the storage and only change the layout.
//!
//! Tensors are values: an op never changes a tensor another handle can see. The in-place
//! methods (`normal_`, `uniform_`, …) take `&mut self` and write copy-on-write: if the storage
//! is shared with another tensor or view, that other tensor keeps its old values.

use crate::dtype::{DType, Element, Storage};
use crate::error::{Error, Result, invalid};
use crate::layout::Layout;
use std::sync::Arc;

/// Where a tensor's storage lives. Only the CPU exists today; the enum leaves room for others.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// Host memory.
    #[default]
    Cpu,
}

/// An n-dimensional array of one [`DType`] on one [`Device`].
#[derive(Clone)]
pub struct Tensor {
    storage: Arc<Storage>,
    layout: Layout,
    /// In-place writes are refused (a copy of a parameter's value, see
    /// [`Tensor::into_read_only`]); kept by clones and views.
    read_only: bool,
}

impl core::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Tensor({:?}, {:?}", self.shape(), self.dtype())?;
        if self.numel() <= 16 {
            let c = self.contiguous();
            write!(f, ", ")?;
            crate::with_dtype!(self.dtype(), T => write!(f, "{:?}", c.data::<T>().unwrap())?);
        }
        write!(f, ")")
    }
}

/// The element count of `shape`, refused (instead of overflowing or aborting the allocation)
/// when the buffer could not exist: more than `isize::MAX` bytes at 8 bytes an element. The
/// product of the sizes with zeros counted as 1 is bounded too: row-major strides are built
/// from it, so an empty `[0, 2^40, 2^40]` would overflow them.
pub(crate) fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    const MAX: usize = isize::MAX as usize / 8;
    let fits = |f: fn(usize) -> usize| {
        shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(f(d)))
            .filter(|&n| n <= MAX)
    };
    fits(|d| d.max(1))
        .and(fits(|d| d))
        .ok_or_else(|| invalid(op, "shape", format!("{shape:?} has too many elements")))
}

/// Allocation sized from user input: the one copy lives in `lockstep_rng`; its error converts
/// into [`Error::OutOfMemory`] naming the op.
pub(crate) use lockstep_rng::try_with_capacity;

/// Writes rows `row0..` of the strided view (`shape`, `strides`, `offset`) over `src` — a row
/// being a run of the last dimension — to `out` in row-major order, as many rows as `out`
/// holds (a slice copy per row when the last dimension is unit-stride): how
/// [`Tensor::contiguous`] and `to_vec` copy views. `shape` has no zero and `out.len()` is a
/// multiple of the last dimension.
fn gather_rows<T: Copy>(
    src: &[T],
    shape: &[usize],
    strides: &[usize],
    offset: usize,
    row0: usize,
    out: &mut [core::mem::MaybeUninit<T>],
) {
    let Some((&run, outer_shape)) = shape.split_last() else {
        if let Some(o) = out.first_mut() {
            o.write(src[offset]);
        }
        return;
    };
    let st = strides[shape.len() - 1];
    // The outer index of row `row0`, last outer dimension fastest.
    let mut idx = vec![0usize; outer_shape.len()];
    let (mut rem, mut base) = (row0, offset);
    for k in (0..outer_shape.len()).rev() {
        idx[k] = rem % outer_shape[k];
        rem /= outer_shape[k];
        base += idx[k] * strides[k];
    }
    for row in out.chunks_exact_mut(run) {
        if st == 1 {
            for (o, &v) in row.iter_mut().zip(&src[base..base + run]) {
                o.write(v);
            }
        } else {
            for (j, o) in row.iter_mut().enumerate() {
                o.write(src[base + j * st]);
            }
        }
        // The next outer index, last dimension fastest.
        let mut k = outer_shape.len();
        while k > 0 {
            k -= 1;
            idx[k] += 1;
            base += strides[k];
            if idx[k] < outer_shape[k] {
                break;
            }
            base -= strides[k] * idx[k];
            idx[k] = 0;
        }
    }
}

/// Views of at least this many elements are copied by the team's threads (a copy: which
/// thread copies what never changes a bit).
const COPY_PAR_MIN: usize = 1 << 16;

impl Tensor {
    /// A tensor over `storage` with `layout` (crate-internal: the caller keeps it in bounds).
    pub(crate) fn from_parts(storage: Arc<Storage>, layout: Layout) -> Self {
        crate::memory::on_first_tensor();
        Self {
            storage,
            layout,
            read_only: false,
        }
    }

    /// A view of this tensor's storage with `layout`, read-only if this tensor is.
    pub(crate) fn view_with(&self, layout: Layout) -> Self {
        Self {
            storage: self.storage.clone(),
            layout,
            read_only: self.read_only,
        }
    }

    /// The same tensor, with in-place writes (through it, its clones and its views) refused
    /// with an error instead of being made on a private copy. What `lockstep_nn`'s
    /// `Var::data()` and `state_dict()` hand out: a tensor is a value here, so a write to it
    /// could never reach the parameter it came from, and a write that silently reaches nothing
    /// is worse than an error. Ops that make new tensors from it work as usual; a writable copy
    /// is [`try_deep_clone`](Self::try_deep_clone).
    pub fn into_read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Whether in-place writes to this tensor are refused (see
    /// [`into_read_only`](Self::into_read_only)).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// An error naming `op` if this tensor is read-only.
    pub(crate) fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            return Err(invalid(
                op,
                "self",
                "this tensor is a read-only copy of a parameter's value (Var::data, state_dict): an in-place write to it would not reach the parameter. Write through the parameter instead (lockstep_nn::init, or Var::add_, copy_, mul_, … under no_grad), or write to a copy made with try_deep_clone",
            ));
        }
        Ok(())
    }

    /// A contiguous tensor owning `storage`, shaped `shape`.
    pub(crate) fn from_storage(storage: Storage, shape: &[usize]) -> Self {
        debug_assert_eq!(storage.len(), shape.iter().product::<usize>());
        Self::from_parts(Arc::new(storage), Layout::contiguous(shape))
    }

    /// A tensor from a row-major buffer (`torch.tensor(data).reshape(shape)`); the dtype is
    /// the element type's.
    ///
    /// ```
    /// use lockstep_tensor::{DType, Tensor};
    /// let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3])?;
    /// assert_eq!((t.shape(), t.dtype()), (&[2, 3][..], DType::I64));
    /// assert_eq!(t.to_vec::<i64>()?, [1, 2, 3, 4, 5, 6]);
    /// assert!(Tensor::from_vec(vec![1f32, 2.], &[3]).is_err()); // 2 values for 3 elements
    /// # Ok::<(), lockstep_tensor::Error>(())
    /// ```
    ///
    /// # Errors
    /// If `data.len()` is not the product of `shape`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Self> {
        let n = checked_numel("from_vec", shape)?;
        if n != data.len() {
            return Err(invalid(
                "from_vec",
                "shape",
                format!("shape {shape:?} needs {n} elements, got {}", data.len()),
            ));
        }
        Ok(Self::from_storage(T::into_storage(data), shape))
    }

    /// A tensor copied from a row-major slice.
    ///
    /// # Errors
    /// If `data.len()` is not the product of `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Self> {
        Self::from_vec(data.to_vec(), shape)
    }

    /// A tensor of `shape` filled with `value` (converted to `dtype` as `as` does).
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Result<Self> {
        let n = checked_numel("full", shape)?;
        Ok(crate::with_dtype!(dtype, T => Self::from_storage(
            T::into_storage(crate::error::try_filled_vec("full", n, T::from_f64(value))?),
            shape
        )))
    }

    /// Zeros.
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<Self> {
        Self::full(shape, 0.0, dtype)
    }

    /// Ones.
    pub fn ones(shape: &[usize], dtype: DType) -> Result<Self> {
        Self::full(shape, 1.0, dtype)
    }

    /// `torch.empty`: a tensor whose values must not be relied on. When
    /// `fill_uninitialized_memory` is on (the default in deterministic mode, as in PyTorch) it
    /// is filled with NaN (floats) or the type's maximum (integers), so that reading it by
    /// mistake shows; otherwise with zeros (Rust never hands out uninitialised memory).
    pub fn empty(shape: &[usize], dtype: DType) -> Result<Self> {
        if crate::deterministic::fill_uninitialized_memory_active() {
            let v = match dtype {
                DType::F32 | DType::F64 => f64::NAN,
                DType::I64 => i64::MAX as f64,
                DType::U8 => 255.0,
                DType::Bool => 1.0,
            };
            Self::full(shape, v, dtype)
        } else {
            Self::zeros(shape, dtype)
        }
    }

    /// `torch.arange(start, end, step)`: `ceil((end − start) / step)` values `start + i·step`.
    ///
    /// # Errors
    /// If `step` is zero or its sign does not lead from `start` to `end`, or a bound is not finite.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Self> {
        if step == 0.0 || !start.is_finite() || !end.is_finite() || !step.is_finite() {
            return Err(invalid(
                "arange",
                "step",
                format!("invalid range start={start}, end={end}, step={step}"),
            ));
        }
        if (end - start) * step.signum() < 0.0 {
            return Err(invalid(
                "arange",
                "step",
                format!(
                    "upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
                ),
            ));
        }
        // A count beyond usize saturates here and is refused by `checked_numel`.
        let n = checked_numel("arange", &[((end - start) / step).ceil().max(0.0) as usize])?;
        Ok(crate::with_dtype!(dtype, T => {
            let mut v = try_with_capacity::<T>("arange", n)?;
            v.extend((0..n).map(|i| T::from_f64(start + i as f64 * step)));
            Self::from_storage(T::into_storage(v), &[n])
        }))
    }

    /// A 0-dimensional tensor holding `value`.
    pub fn scalar<T: Element>(value: T) -> Self {
        Self::from_storage(T::into_storage(vec![value]), &[])
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The device.
    pub fn device(&self) -> Device {
        Device::Cpu
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.layout.shape().len()
    }

    /// Size of dimension `dim` (negative counts from the end).
    pub fn size(&self, dim: isize) -> Result<usize> {
        let d = crate::layout::resolve_dim("size", dim, self.ndim())?;
        Ok(self.shape()[d])
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The layout (shape, strides, offset).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The storage this tensor views.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Whether the elements are dense and row-major.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// The same values in a dense row-major tensor (a cheap clone if already so).
    ///
    /// # Panics
    /// If the copy cannot be allocated (e.g. a huge [`expand`](Self::expand)ed view);
    /// [`try_contiguous`](Self::try_contiguous) returns that as an error.
    pub fn contiguous(&self) -> Tensor {
        match self.try_contiguous() {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`contiguous`](Self::contiguous), with a failed allocation returned as
    /// [`Error::OutOfMemory`] (PyTorch raises a catchable error for
    /// `x.expand(2**40).contiguous()`).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming `contiguous` and the bytes.
    pub fn try_contiguous(&self) -> Result<Tensor> {
        self.contiguous_for("contiguous")
    }

    /// [`try_contiguous`](Self::try_contiguous) for an op that needs a dense copy of its
    /// input: a failed allocation is [`Error::OutOfMemory`] naming `op`, so an op given a huge
    /// expanded view returns an error instead of panicking.
    pub(crate) fn contiguous_for(&self, op: &'static str) -> Result<Tensor> {
        if self.is_contiguous() && self.layout.offset() == 0 && self.storage.len() == self.numel() {
            return Ok(self.clone());
        }
        if self.numel() == 0 {
            // The copy's row-major strides must exist: only an empty shape can make them
            // overflow (`[0, 2^40, 2^40]`, e.g. from `view`).
            crate::layout::try_contiguous_strides(op, self.shape())?;
        }
        Ok(crate::with_dtype!(self.dtype(), T => {
            let v: Vec<T> = self.copy_out::<T>(op)?;
            Self::from_storage(T::into_storage(v), self.shape())
        }))
    }

    /// The elements of a dense tensor as a slice (row-major). Call [`contiguous`](Self::contiguous)
    /// first for views.
    ///
    /// # Errors
    /// If `T` is not the tensor's dtype, or the tensor is not dense from offset 0.
    pub fn data<T: Element>(&self) -> Result<&[T]> {
        let s = T::slice(&self.storage).ok_or(Error::DType {
            op: "data",
            expected: T::DTYPE,
            got: self.dtype(),
        })?;
        if !self.is_contiguous() {
            return Err(invalid(
                "data",
                "self",
                "tensor is not contiguous; call .contiguous() first",
            ));
        }
        let o = self.layout.offset();
        Ok(&s[o..o + self.numel()])
    }

    /// The elements in row-major order, copied out.
    ///
    /// # Errors
    /// If `T` is not the tensor's dtype; [`Error::OutOfMemory`] if the copy cannot be
    /// allocated.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.copy_out("to_vec")
    }

    /// The elements in row-major order, copied into a fallibly allocated vector.
    fn copy_out<T: Element>(&self, op: &'static str) -> Result<Vec<T>> {
        let s = T::slice(&self.storage).ok_or(Error::DType {
            op,
            expected: T::DTYPE,
            got: self.dtype(),
        })?;
        let mut v = try_with_capacity::<T>(op, self.numel())?;
        if self.is_contiguous() {
            let o = self.layout.offset();
            v.extend_from_slice(&s[o..o + self.numel()]);
        } else if self.numel() > 0 {
            let (l, n) = (&self.layout, self.numel());
            let (shape, strides, offset) = (l.shape(), l.strides(), l.offset());
            let run = shape.last().copied().unwrap_or(1);
            let out = &mut v.spare_capacity_mut()[..n];
            // Not from inside a kernel: its team is busy with that kernel's own pieces.
            let par = crate::threads::Par::for_dispatch();
            if n >= COPY_PAR_MIN && par.threads() > 1 && !crate::threads::team_busy_here() {
                // Pieces of whole rows, at least 16 Ki elements each.
                let rows = (COPY_PAR_MIN / 4).div_ceil(run);
                par.for_each_chunk_mut(out, rows * run, |i, part| {
                    gather_rows(s, shape, strides, offset, i * rows, part)
                });
            } else {
                gather_rows(s, shape, strides, offset, 0, out);
            }
            // SAFETY: `gather_rows` wrote all `n` elements (`n` is a multiple of `run`).
            unsafe { v.set_len(n) };
        }
        Ok(v)
    }

    /// The single value of a one-element tensor.
    ///
    /// # Errors
    /// If the tensor does not have exactly one element, or `T` is not its dtype.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(invalid(
                "item",
                "self",
                format!(
                    "a tensor with {} elements cannot be converted to a scalar",
                    self.numel()
                ),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The elements as f64, row-major, whatever the dtype (for tests and printing).
    ///
    /// # Panics
    /// If the copy cannot be allocated (a huge [`expand`](Self::expand)ed view):
    /// [`try_to_dtype`](Self::try_to_dtype)`(DType::F64)` returns that as an error.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.convert_out::<f64>("to_f64_vec") {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        }
    }

    /// A copy of the elements as a new dense tensor of the same dtype (`x.clone()` in
    /// PyTorch), with a failed allocation returned as an error ([`deep_clone`](Self::deep_clone)
    /// cannot return one).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming `deep_clone` and the bytes (e.g. a `[1]` tensor
    /// [`expand`](Self::expand)ed to `[2^40]`).
    pub fn try_deep_clone(&self) -> Result<Tensor> {
        Ok(crate::with_dtype!(self.dtype(), T => {
            let v: Vec<T> = self.copy_out::<T>("deep_clone")?;
            Self::from_storage(T::into_storage(v), self.shape())
        }))
    }

    /// `x.to(dtype)`: elements converted through `f64` (floats round, integers truncate), the
    /// same values as [`to_dtype`](Self::to_dtype), with a failed allocation returned as an
    /// error. The same dtype is a cheap clone (no copy), as in PyTorch.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming `to_dtype` and the bytes of the converted copy.
    pub fn try_to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        Ok(crate::with_dtype!(dtype, U => {
            let v: Vec<U> = self.convert_out::<U>("to_dtype")?;
            Self::from_storage(U::into_storage(v), self.shape())
        }))
    }

    /// The elements in row-major order converted to `U` through `f64` (`U::from_f64(x.to_f64())`,
    /// as [`to_dtype`](Self::to_dtype) converts), into a fallibly allocated vector.
    fn convert_out<U: Element>(&self, op: &'static str) -> Result<Vec<U>> {
        let mut v = try_with_capacity::<U>(op, self.numel())?;
        crate::with_dtype!(self.dtype(), T => {
            let s = T::slice(&self.storage).expect("the storage's own dtype");
            let conv = |&x: &T| U::from_f64(x.to_f64());
            if self.is_contiguous() {
                let o = self.layout.offset();
                v.extend(s[o..o + self.numel()].iter().map(conv));
            } else {
                v.extend(self.layout.indices().map(|i| conv(&s[i])));
            }
        });
        Ok(v)
    }

    /// Mutable access to the dense elements, copying the storage first if it is shared or if
    /// this tensor is a view (copy-on-write). Afterwards `self` is contiguous.
    pub(crate) fn data_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        self.check_writable("in-place write")?;
        if T::DTYPE != self.dtype() {
            return Err(Error::DType {
                op: "data_mut",
                expected: T::DTYPE,
                got: self.dtype(),
            });
        }
        if !(self.is_contiguous()
            && self.layout.offset() == 0
            && self.storage.len() == self.numel())
        {
            *self = self.try_contiguous()?;
        }
        let storage = Arc::make_mut(&mut self.storage);
        Ok(T::slice_mut(storage).expect("dtype checked above"))
    }
}
