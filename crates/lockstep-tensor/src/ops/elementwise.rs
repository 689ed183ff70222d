//! Elementwise ops with NumPy/PyTorch broadcasting. Each output element is computed from its
//! own inputs only, so every kernel here is thread-invariant by construction; work is split into
//! fixed-size chunks over the output.
//!
//! Every op here is a `static` [`Op<Kernel>`] (PyTorch's name: `add`, `mul`, `relu`, `where`,
//! `tanh_backward`, …; algorithm `NAME.chunked`), reached through
//! [`Op::run`](crate::op::Op::run) — so each can be exempted with
//! `allow_nondeterministic`, pinned with `autotune::with_algorithm`, listed by
//! [`builtin_ops`](crate::dispatch::builtin_ops) and traced — at the cost of a few thread-local
//! reads (no allocation, no lock; the pool is touched only by outputs large enough to split).
//!
//! Both operands of an arithmetic op must have the same dtype (no implicit promotion); use
//! [`Tensor::to_dtype`] first. The comparisons (`eq`, `lt`, …) promote as PyTorch does
//! ([`result_type`]). Scalar forms (`add_scalar`, …) convert the scalar to the tensor's
//! dtype, as PyTorch does for a Python number. Broadcast operands are read in place (stride 0),
//! never expanded into copies. The transcendental functions come from [`crate::math`], so their
//! bits do not depend on the platform's libm.

// Kernels are written once and instantiated for every dtype (bool and u8 included), where some
// comparisons are trivially true or false; that is expected, not a bug.
#![allow(clippy::absurd_extreme_comparisons, clippy::bool_comparison)]

use core::mem::MaybeUninit;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::threads::Par;
use crate::{Tensor, invalid};

pub(super) const CHUNK: usize = 1 << 14;

/// Outputs of at most this many elements are computed on the calling thread: a hop into the
/// pool and back costs more than the work (a training step's activations are about this
/// size). Each element is computed from its own inputs either way, so this never changes bits.
pub(super) const SERIAL_MAX: usize = 1 << 16;

/// Whether an op with `len` outputs runs on the calling thread.
pub(super) fn serial(len: usize, par: &Par) -> bool {
    len <= SERIAL_MAX || par.threads() == 1
}

/// `iter`'s `n` values in a new vector (no zero-fill first), or [`Error::OutOfMemory`].
fn collect_out<U>(op: &'static str, n: usize, iter: impl Iterator<Item = U>) -> Result<Vec<U>> {
    let mut v = crate::tensor::try_with_capacity::<U>(op, n)?;
    v.extend(iter);
    Ok(v)
}

/// Runs `f`, an elementwise loop, compiled for the widest vectors of the path in use
/// ([`Isa::best`](crate::isa::Isa::best)): the base x86-64 build runs such loops two f64 lanes
/// at a time. Only the speed changes: the loops' operations are correctly rounded IEEE ones or
/// exact, whatever the width, and Rust never fuses a multiply and an add. `f` must hold the loop
/// itself (a call it makes to a function that is not inlined keeps that function's build).
#[inline(always)]
fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::isa::Isa;
        #[target_feature(enable = "avx512f")]
        fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        match Isa::best() {
            // SAFETY: the CPU has AVX-512F (checked).
            isa @ Isa::Avx512 if isa.available() => return unsafe { avx512(f) },
            // SAFETY: the CPU has AVX2 and FMA (checked).
            isa @ Isa::Avx2 if isa.available() => return unsafe { avx2(f) },
            _ => {}
        }
    }
    f()
}

/// How an elementwise op's kernel runs: its implementations' `f` (one today).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Fixed-size chunks of the output ([`CHUNK_LEN`] elements) in parallel, each output
    /// element computed from its own inputs only: thread-invariant.
    Chunked,
}

/// The number of output elements per chunk of [`Kernel::Chunked`]: a constant, and an element's
/// value never depends on which chunk computes it.
pub const CHUNK_LEN: usize = CHUNK;

chunked_ops! {
    /// `torch.add` (also `add_scalar`).
    ADD = "add";
    /// `Tensor.add_`: in place (the bias add of `linear`).
    ADD_ = "add_";
    /// `torch.sub`.
    SUB = "sub";
    /// `torch.mul`.
    MUL = "mul";
    /// `torch.div`.
    DIV = "div";
    /// `torch.maximum`.
    MAXIMUM = "maximum";
    /// `torch.minimum`.
    MINIMUM = "minimum";
    /// `torch.eq`.
    EQ = "eq";
    /// `torch.ne`.
    NE = "ne";
    /// `torch.lt`.
    LT = "lt";
    /// `torch.le`.
    LE = "le";
    /// `torch.gt`.
    GT = "gt";
    /// `torch.ge`.
    GE = "ge";
    /// `torch.where`.
    WHERE = "where";
    /// `torch.exp`.
    EXP = "exp";
    /// `torch.log`.
    LOG = "log";
    /// `torch.sqrt`.
    SQRT = "sqrt";
    /// `torch.sigmoid`.
    SIGMOID = "sigmoid";
    /// `torch.tanh`.
    TANH = "tanh";
    /// `F.gelu` (both approximations).
    GELU = "gelu";
    /// `torch.relu`.
    RELU = "relu";
    /// `torch.neg`.
    NEG = "neg";
    /// `torch.abs`.
    ABS = "abs";
    /// `torch.clamp`.
    CLAMP = "clamp";
    /// `torch.pow` (tensor or scalar exponent).
    POW = "pow";
    /// The gradient of `relu` (PyTorch's `threshold_backward(g, y, 0)`).
    RELU_BACKWARD = "relu_backward";
    /// `tanh_backward(g, y)`: `g · (1 − y²)`.
    TANH_BACKWARD = "tanh_backward";
    /// `sigmoid_backward(g, y)`: `g · (1 − y) · y`.
    SIGMOID_BACKWARD = "sigmoid_backward";
    /// The derivative of `gelu` at `x` (both approximations).
    GELU_BACKWARD = "gelu_backward";
    /// The gradient of `sqrt`: `g / (2y)`.
    SQRT_BACKWARD = "sqrt_backward";
}

/// The broadcast shape of `a` and `b` (trailing dimensions aligned; 1 stretches).
///
/// # Errors
/// If two aligned dimensions differ and neither is 1.
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::ShapeMismatch {
                    op,
                    lhs: a.to_vec(),
                    rhs: b.to_vec(),
                });
            }
        };
    }
    Ok(out)
}

/// The element count of `shape` for an output of `U`s, or [`Error::OutOfMemory`] naming `op`
/// when it overflows (a broadcast can ask for far more than its inputs hold).
pub(super) fn numel<U>(op: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::OutOfMemory {
            op,
            bytes: shape
                .iter()
                .fold(core::mem::size_of::<U>() as u128, |a, &d| {
                    a.saturating_mul(d as u128)
                }),
        })
}

/// A zeroed output buffer of `shape`'s size: [`Error::OutOfMemory`] naming `op` when the size
/// overflows or the allocation fails.
pub(super) fn out_buf<U: Element>(op: &'static str, shape: &[usize]) -> Result<Vec<U>> {
    crate::try_filled_vec(op, numel::<U>(op, shape)?, U::ZERO)
}

/// An input read in place, whatever its layout (a view, an expanded tensor): its elements from
/// its offset on, and its strides in the output's dimensions (0 where it is broadcast).
pub(super) struct Src<'a, T> {
    pub(super) data: &'a [T],
    pub(super) st: Vec<usize>,
}

impl<'a, T: Element> Src<'a, T> {
    pub(super) fn new(op: &'static str, t: &'a Tensor, out: &[usize]) -> Result<Self> {
        let s = T::slice(t.storage()).ok_or(Error::DType {
            op,
            expected: T::DTYPE,
            got: t.dtype(),
        })?;
        // An empty input makes an empty output: nothing is read.
        let data = if t.numel() == 0 {
            &[]
        } else {
            &s[t.layout().offset()..]
        };
        let mut st = vec![0; out.len()];
        let k = out.len() - t.ndim();
        for (d, (&n, &s)) in t.shape().iter().zip(t.layout().strides()).enumerate() {
            if n != 1 {
                st[k + d] = s;
            }
        }
        Ok(Self { data, st })
    }
}

/// Walks output elements `lo..lo + len` of `shape` in runs along the last dimension: for each
/// run, `f(position − lo, input offsets of its first element, input strides along the run,
/// run length)`. Pure index arithmetic: which inputs an element reads never depends on `lo`.
pub(super) fn walk<const K: usize>(
    shape: &[usize],
    st: [&[usize]; K],
    lo: usize,
    len: usize,
    mut f: impl FnMut(usize, [usize; K], [usize; K], usize),
) {
    let Some((&inner, outer)) = shape.split_last() else {
        if len > 0 {
            f(0, [0; K], [0; K], 1);
        }
        return;
    };
    if inner == 0 {
        return;
    }
    let step: [usize; K] = core::array::from_fn(|k| st[k][outer.len()]);
    let (mut pos, end) = (lo, lo + len);
    while pos < end {
        let (mut row, col) = (pos / inner, pos % inner);
        let run = (inner - col).min(end - pos);
        let mut off: [usize; K] = core::array::from_fn(|k| col * step[k]);
        for (d, &n) in outer.iter().enumerate().rev() {
            let i = row % n;
            row /= n;
            for k in 0..K {
                off[k] += i * st[k][d];
            }
        }
        f(pos - lo, off, step, run);
        pos += run;
    }
}

/// `shape` and the operands' strides `st` with adjacent dimensions merged wherever every
/// operand steps through the pair as through one dimension (the outer stride is the inner one
/// times its size), and size-1 dimensions dropped: the same elements in the same order, in
/// longer runs for [`walk`] (a dense `[64, 64, 4, 4]` operand against a scalar walks as one
/// run, not 4,096 runs of 4 with a division each).
fn coalesce<const K: usize>(shape: &[usize], st: [&[usize]; K]) -> (Vec<usize>, [Vec<usize>; K]) {
    let mut sh: Vec<usize> = Vec::with_capacity(shape.len());
    let mut ss: [Vec<usize>; K] = core::array::from_fn(|_| Vec::with_capacity(shape.len()));
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        if let Some(last) = sh.last_mut()
            && (0..K).all(|k| ss[k].last() == Some(&(st[k][d] * n)))
        {
            *last *= n;
            for k in 0..K {
                *ss[k].last_mut().expect("one per dimension") = st[k][d];
            }
            continue;
        }
        sh.push(n);
        for k in 0..K {
            ss[k].push(st[k][d]);
        }
    }
    (sh, ss)
}

/// Output chunk `out` (elements `lo..`) of a broadcast binary op.
fn chunk2<T: Element, U: Element>(
    out: &mut [MaybeUninit<U>],
    lo: usize,
    shape: &[usize],
    a: &Src<T>,
    b: &Src<T>,
    f: &(impl Fn(T, T) -> U + Sync),
) {
    let (va, vb) = (a.data, b.data);
    let (shape, [sta, stb]) = coalesce(shape, [&a.st, &b.st]);
    walk(
        &shape,
        [&sta, &stb],
        lo,
        out.len(),
        |p, [oa, ob], [ia, ib], n| {
            let o = &mut out[p..p + n];
            match (ia, ib) {
                (1, 1) => vectorised(|| {
                    for ((o, &x), &y) in o.iter_mut().zip(&va[oa..oa + n]).zip(&vb[ob..ob + n]) {
                        o.write(f(x, y));
                    }
                }),
                (1, 0) => vectorised(|| {
                    let y = vb[ob];
                    for (o, &x) in o.iter_mut().zip(&va[oa..oa + n]) {
                        o.write(f(x, y));
                    }
                }),
                (0, 1) => vectorised(|| {
                    let x = va[oa];
                    for (o, &y) in o.iter_mut().zip(&vb[ob..ob + n]) {
                        o.write(f(x, y));
                    }
                }),
                _ => {
                    for (t, o) in o.iter_mut().enumerate() {
                        o.write(f(va[oa + t * ia], vb[ob + t * ib]));
                    }
                }
            }
        },
    );
}

pub(super) fn check_dtype(op: &'static str, t: &Tensor, want: DType) -> Result<()> {
    if t.dtype() == want {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            expected: want,
            got: t.dtype(),
        })
    }
}

/// `out[i] = f(x[i])` over a tensor of type `T`, as the elementwise op `op`: through
/// [`Op::run`] (so deterministic mode, exemptions, pins and tracing apply), then its kernel.
/// Own ops: declare a `static Op<Kernel>` (one `Impl` with `f: Kernel::Chunked`).
///
/// # Errors
/// `x` not of type `T`; the output cannot be allocated; dispatch refuses the op.
pub fn map1<T: Element, U: Element>(
    op: &'static Op<Kernel>,
    x: &Tensor,
    f: impl Fn(T) -> U + Sync,
) -> Result<Tensor> {
    check_dtype(op.name, x, T::DTYPE)?;
    op.run(&[x], |imp, par| {
        // A view (an expanded tensor) is read through its strides, never copied.
        let dense = if x.is_contiguous() {
            Some(x.data::<T>()?)
        } else {
            None
        };
        if let (Some(d), Kernel::Chunked) = (dense, imp.f)
            && serial(d.len(), par)
        {
            let out = vectorised(|| collect_out(op.name, d.len(), d.iter().map(|&s| f(s))))?;
            return Tensor::from_vec(out, x.shape());
        }
        let n = x.numel();
        let mut out = crate::tensor::try_with_capacity::<U>(op.name, n)?;
        let spare = &mut out.spare_capacity_mut()[..n];
        let strided = match dense {
            Some(_) => None,
            None => Some(Src::<T>::new(op.name, x, x.shape())?),
        };
        let run = |o: &mut [MaybeUninit<U>], lo: usize| match (dense, &strided) {
            (Some(d), _) => {
                let n = o.len();
                vectorised(|| {
                    for (o, &s) in o.iter_mut().zip(&d[lo..lo + n]) {
                        o.write(f(s));
                    }
                })
            }
            (None, Some(s)) => walk(x.shape(), [&s.st], lo, o.len(), |p, [os], [is], n| {
                for (t, o) in o[p..p + n].iter_mut().enumerate() {
                    o.write(f(s.data[os + t * is]));
                }
            }),
            (None, None) => unreachable!("one of the two is set"),
        };
        match imp.f {
            // No hop into the pool for small tensors (most of a training step's ops).
            Kernel::Chunked if serial(n, par) => run(spare, 0),
            Kernel::Chunked => par.for_each_chunk_mut(spare, CHUNK, |i, o| run(o, i * CHUNK)),
        }
        // SAFETY: `run` wrote each of the `n` elements.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, x.shape())
    })
}

/// [`map1`] for a float function with a branch-free vectorisable form (`crate::math::lanes`):
/// [`map1_kernel`] with `f` itself compiled into a loop per instruction set
/// (`math::lanes::map_on`); `f` gives the same bits on every path, so the result is [`map1`]'s.
fn map1_lanes<T: Element>(
    op: &'static Op<Kernel>,
    x: &Tensor,
    f: impl Fn(T) -> T + Copy + Sync,
) -> Result<Tensor> {
    map1_kernel(
        op,
        x,
        f,
        move |isa, src: &[T], dst: &mut [MaybeUninit<T>]| {
            math::lanes::map_on(isa, src, dst, move |x| MaybeUninit::new(f(x)))
        },
    )
}

/// [`map1`] with a slice kernel: a dense input runs `kern` (a `math::lanes` kernel, the bits
/// of `f` on every instruction-set path) over the path in use, a view `f` element by element.
/// The kernel holds its whole loop, so nothing is left to a call per element; it writes the
/// new tensor's storage directly (no zero-fill, no copy through a buffer).
fn map1_kernel<T: Element>(
    op: &'static Op<Kernel>,
    x: &Tensor,
    f: impl Fn(T) -> T + Copy + Sync,
    kern: impl Fn(crate::isa::Isa, &[T], &mut [MaybeUninit<T>]) + Sync,
) -> Result<Tensor> {
    if !x.is_contiguous() {
        return map1(op, x, f);
    }
    check_dtype(op.name, x, T::DTYPE)?;
    op.run(&[x], |imp, par| {
        let d = x.data::<T>()?;
        let isa = crate::isa::Isa::best();
        let Kernel::Chunked = imp.f;
        let n = d.len();
        let mut out = crate::tensor::try_with_capacity::<T>(op.name, n)?;
        let spare = &mut out.spare_capacity_mut()[..n];
        if serial(n, par) {
            kern(isa, d, spare);
        } else {
            par.for_each_chunk_mut(spare, CHUNK, |i, o| {
                let lo = i * CHUNK;
                kern(isa, &d[lo..lo + o.len()], o);
            });
        }
        // SAFETY: the kernel wrote each of the `n` elements.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, x.shape())
    })
}

/// `grad · kern(x)` for dense `grad` and `x` of one shape, as `op`: the derivative through an
/// L1 block, multiplied into the output in the same pass (no tensor of derivatives).
fn mul_by_kernel<T: Element + core::ops::Mul<Output = T>>(
    op: &'static Op<Kernel>,
    grad: &Tensor,
    x: &Tensor,
    kern: fn(crate::isa::Isa, &[T], &mut [T]),
) -> Result<Tensor> {
    check_dtype(op.name, x, T::DTYPE)?;
    check_dtype(op.name, grad, T::DTYPE)?;
    op.run(&[grad, x], |imp, par| {
        let (g, d) = (grad.data::<T>()?, x.data::<T>()?);
        let isa = crate::isa::Isa::best();
        let Kernel::Chunked = imp.f;
        const B: usize = 512;
        // Elements `lo..lo + o.len()` into `o` (written, not read).
        let run = |o: &mut [MaybeUninit<T>], lo: usize| {
            let mut buf = [T::ZERO; B];
            for (c, o) in o.chunks_mut(B).enumerate() {
                let at = lo + c * B;
                let b = &mut buf[..o.len()];
                kern(isa, &d[at..at + o.len()], b);
                for ((o, &gv), &dv) in o.iter_mut().zip(&g[at..at + b.len()]).zip(b.iter()) {
                    o.write(gv * dv);
                }
            }
        };
        let n = d.len();
        let mut out = crate::tensor::try_with_capacity::<T>(op.name, n)?;
        let spare = &mut out.spare_capacity_mut()[..n];
        if serial(n, par) {
            run(spare, 0);
        } else {
            par.for_each_chunk_mut(spare, CHUNK, |i, o| run(o, i * CHUNK));
        }
        // SAFETY: `run` wrote each of the `n` elements.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, x.shape())
    })
}

/// `out[i] = f(a[i], b[i])` after broadcasting `a` and `b` (both of type `T`), as the
/// elementwise op `op` (see [`map1`]). Broadcast inputs are read in place, not expanded.
///
/// # Errors
/// Dtypes that differ or are not `T`; shapes that do not broadcast; the output cannot be
/// allocated; dispatch refuses the op.
pub fn map2<T: Element, U: Element>(
    op: &'static Op<Kernel>,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(Error::DType {
            op: op.name,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    check_dtype(op.name, a, T::DTYPE)?;
    let shape = broadcast_shapes(op.name, a.shape(), b.shape())?;
    op.run(&[a, b], |imp, par| {
        // Inputs are read in place: broadcast and other views through their strides, never
        // expanded into copies; two dense inputs of one shape take a plain loop.
        let dense = if a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous() {
            Some((a.data::<T>()?, b.data::<T>()?))
        } else {
            None
        };
        if let (Some((va, vb)), Kernel::Chunked) = (dense, imp.f)
            && serial(va.len(), par)
        {
            let mut out = crate::tensor::try_with_capacity::<U>(op.name, va.len())?;
            vectorised(|| out.extend(va.iter().zip(vb).map(|(&x, &y)| f(x, y))));
            return Tensor::from_vec(out, &shape);
        }
        let n = numel::<U>(op.name, &shape)?;
        let mut out = crate::tensor::try_with_capacity::<U>(op.name, n)?;
        let spare = &mut out.spare_capacity_mut()[..n];
        let strided = match dense {
            Some(_) => None,
            None => Some((
                Src::<T>::new(op.name, a, &shape)?,
                Src::<T>::new(op.name, b, &shape)?,
            )),
        };
        let run = |o: &mut [MaybeUninit<U>], lo: usize| match (dense, &strided) {
            (Some((va, vb)), _) => {
                let n = o.len();
                let (x, y) = (&va[lo..lo + n], &vb[lo..lo + n]);
                vectorised(|| {
                    for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                        o.write(f(x, y));
                    }
                })
            }
            (None, Some((sa, sb))) => chunk2(o, lo, &shape, sa, sb, &f),
            (None, None) => unreachable!("one of the two is set"),
        };
        match imp.f {
            Kernel::Chunked if serial(n, par) => run(spare, 0),
            Kernel::Chunked => par.for_each_chunk_mut(spare, CHUNK, |i, o| run(o, i * CHUNK)),
        }
        // SAFETY: `run` wrote each of the `n` elements.
        unsafe { out.set_len(n) };
        Tensor::from_vec(out, &shape)
    })
}

/// `dst[i] = f(dst[i], src[i])` in place, `src` broadcast to `dst`'s shape, as the elementwise
/// op `op` (see [`map1`]). Copies `dst` first only if its storage is shared or it is a view.
fn inplace2<T: Element>(
    op: &'static Op<Kernel>,
    dst: &mut Tensor,
    src: &Tensor,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    if dst.dtype() != src.dtype() {
        return Err(Error::DType {
            op: op.name,
            expected: dst.dtype(),
            got: src.dtype(),
        });
    }
    check_dtype(op.name, dst, T::DTYPE)?;
    let shape = dst.shape().to_vec();
    if broadcast_shapes(op.name, &shape, src.shape())? != shape {
        return Err(Error::ShapeMismatch {
            op: op.name,
            lhs: shape,
            rhs: src.shape().to_vec(),
        });
    }
    op.run_inplace(dst, &[src], |imp, par, dst| {
        // `src` may share `dst`'s storage: read it from its own handle, which keeps that storage
        // alive, while `dst` is written copy-on-write.
        let keep = src.clone();
        let s = Src::<T>::new(op.name, &keep, &shape)?;
        let d = dst.data_mut::<T>()?;
        // `dst` is dense now: an element's position is its offset.
        // Dimensions merged where `src` allows (a same-shape `src` is one run).
        let dense = crate::layout::contiguous_strides(&shape);
        let (cshape, [_, cst]) = coalesce(&shape, [&dense, &s.st]);
        let run = |o: &mut [T], lo: usize| {
            walk(&cshape, [&cst], lo, o.len(), |p, [os], [is], n| {
                let o = &mut o[p..p + n];
                match is {
                    0 => vectorised(|| {
                        let y = s.data[os];
                        o.iter_mut().for_each(|x| *x = f(*x, y));
                    }),
                    1 => vectorised(|| {
                        for (x, &y) in o.iter_mut().zip(&s.data[os..os + n]) {
                            *x = f(*x, y);
                        }
                    }),
                    _ => {
                        for (t, x) in o.iter_mut().enumerate() {
                            *x = f(*x, s.data[os + t * is]);
                        }
                    }
                }
            })
        };
        match imp.f {
            Kernel::Chunked if serial(d.len(), par) => run(d, 0),
            Kernel::Chunked => par.for_each_chunk_mut(d, CHUNK, |i, o| run(o, i * CHUNK)),
        }
        Ok(())
    })
}

macro_rules! float_unary {
    ($($(#[$doc:meta])* $name:ident, $op:ident, $map:ident => |$x:ident| $f32:expr, $f64:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// If the dtype is not `F32` or `F64`.
                pub fn $name(&self) -> Result<Tensor> {
                    match self.dtype() {
                        DType::F32 => $map(&$op, self, |$x: f32| $f32),
                        DType::F64 => $map(&$op, self, |$x: f64| $f64),
                        got => Err(Error::DType { op: $op.name, expected: DType::F32, got }),
                    }
                }
            )*
        }
    };
}

use crate::math;

float_unary! {
    /// `torch.exp` (portable: [`math::expf`] / [`math::exp`]; f32 vectorised, the same bits).
    exp, EXP, map1_lanes => |x| math::lanes::expf(x), math::lanes::exp(x);
    /// `torch.sqrt` (correctly rounded).
    sqrt, SQRT, map1 => |x| x.sqrt(), x.sqrt();
    /// `torch.sigmoid`: `1 / (1 + exp(−x))` (portable; f32 vectorised, the bits of
    /// [`math::sigmoidf`]).
    sigmoid, SIGMOID, map1_lanes => |x| 1.0 / (1.0 + math::lanes::expf(-x)),
        1.0 / (1.0 + math::lanes::exp(-x));
    /// `F.gelu(x, approximate='tanh')`: `½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, PyTorch's
    /// formula in the tensor's own precision (portable tanh).
    gelu_tanh, GELU, map1 => |x| gelu_tanh_f32(x), gelu_tanh_f64(x);
}

/// PyTorch's `GeluType::Tanh` value and derivative (`aten/src/ATen/native/cpu/GeluKernel.cpp`,
/// scalar path), in the tensor's own precision.
impl Tensor {
    /// `torch.log` (natural; the bits of [`math::lnf`] / [`math::ln`], vectorised on every
    /// instruction-set path).
    ///
    /// # Errors
    /// If the dtype is not `F32` or `F64`.
    pub fn log(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1_kernel(&LOG, self, math::lnf, math::lanes::lnf_slice_on),
            DType::F64 => map1_kernel(&LOG, self, math::ln, math::lanes::ln_slice_on),
            got => Err(Error::DType {
                op: LOG.name,
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.tanh` (the bits of [`math::tanhf`] / [`math::tanh`], vectorised on every
    /// instruction-set path).
    ///
    /// # Errors
    /// If the dtype is not `F32` or `F64`.
    pub fn tanh(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1_kernel(&TANH, self, math::tanhf, math::lanes::tanhf_slice_on),
            DType::F64 => map1_kernel(&TANH, self, math::tanh, math::lanes::tanh_slice_on),
            got => Err(Error::DType {
                op: TANH.name,
                expected: DType::F32,
                got,
            }),
        }
    }
}

macro_rules! gelu_tanh_fns {
    ($t:ty, $tanh:path, $fwd:ident, $grad:ident) => {
        fn $fwd(x: $t) -> $t {
            let k_beta =
                (core::f64::consts::SQRT_2 * core::f64::consts::FRAC_2_SQRT_PI * 0.5) as $t;
            let k_kappa: $t = 0.044715;
            let x_cube = x * x * x;
            let inner = k_beta * (x + k_kappa * x_cube);
            0.5 * x * (1.0 + $tanh(inner))
        }

        fn $grad(x: $t) -> $t {
            let k_beta =
                (core::f64::consts::SQRT_2 * core::f64::consts::FRAC_2_SQRT_PI * 0.5) as $t;
            let k_kappa: $t = 0.044715;
            let x_sq = x * x;
            let x_cube = x_sq * x;
            let inner = k_beta * (x + k_kappa * x_cube);
            let tanh_inner = $tanh(inner);
            let left = 0.5 * x;
            let right = 1.0 + tanh_inner;
            let left_derivative = 0.5 * right;
            let right_derivative =
                left * (1.0 - tanh_inner * tanh_inner) * k_beta * (1.0 + 3.0 * k_kappa * x_sq);
            left_derivative + right_derivative
        }
    };
}
gelu_tanh_fns!(f32, math::tanhf, gelu_tanh_f32, gelu_tanh_grad_f32);
gelu_tanh_fns!(f64, math::tanh, gelu_tanh_f64, gelu_tanh_grad_f64);

/// d/dx of `x · Φ(x)` in f64: `Φ(x) + x · φ(x)` (portable erf and exp).
fn gelu_grad(x: f64) -> f64 {
    let cdf = 0.5 * (1.0 + math::erf(x * core::f64::consts::FRAC_1_SQRT_2));
    let pdf = math::exp(-0.5 * x * x)
        * (0.5 * core::f64::consts::FRAC_2_SQRT_PI)
        * core::f64::consts::FRAC_1_SQRT_2;
    cdf + x * pdf
}

/// `f(g, y)` elementwise (broadcast) over two float tensors of one dtype, as `op`.
macro_rules! float_map2 {
    ($op:expr, $a:expr, $b:expr, |$x:ident, $y:ident| $e:expr) => {
        match $a.dtype() {
            DType::F32 => map2(&$op, $a, $b, |$x: f32, $y: f32| $e),
            DType::F64 => map2(&$op, $a, $b, |$x: f64, $y: f64| $e),
            got => Err(Error::DType {
                op: $op.name,
                expected: DType::F32,
                got,
            }),
        }
    };
}

impl Tensor {
    /// The gradient of `relu` given its output `y` (PyTorch's `threshold_backward(g, y, 0)`):
    /// `g` where `y > 0`, else 0.
    ///
    /// # Errors
    /// Dtypes that differ or are not float; shapes that do not broadcast.
    pub fn relu_backward(grad: &Tensor, output: &Tensor) -> Result<Tensor> {
        float_map2!(RELU_BACKWARD, grad, output, |g, y| if y > 0.0 {
            g
        } else {
            0.0
        })
    }

    /// PyTorch's `tanh_backward(g, y)` given the output `y`: `g · (1 − y²)`.
    ///
    /// # Errors
    /// As [`relu_backward`](Self::relu_backward).
    pub fn tanh_backward(grad: &Tensor, output: &Tensor) -> Result<Tensor> {
        float_map2!(TANH_BACKWARD, grad, output, |g, y| g * (1.0 - y * y))
    }

    /// PyTorch's `sigmoid_backward(g, y)` given the output `y`: `g · ((1 − y) · y)`.
    ///
    /// # Errors
    /// As [`relu_backward`](Self::relu_backward).
    pub fn sigmoid_backward(grad: &Tensor, output: &Tensor) -> Result<Tensor> {
        float_map2!(SIGMOID_BACKWARD, grad, output, |g, y| g * ((1.0 - y) * y))
    }

    /// The gradient of `sqrt` given its output `y`: `g / (y + y)`.
    ///
    /// # Errors
    /// As [`relu_backward`](Self::relu_backward).
    pub fn sqrt_backward(grad: &Tensor, output: &Tensor) -> Result<Tensor> {
        float_map2!(SQRT_BACKWARD, grad, output, |g, y| g / (y + y))
    }

    /// `F.gelu(x)` (exact form): `x · ½ · (1 + erf(x / √2))` with the portable erf
    /// ([`math::erff`] / [`math::erf`]), vectorised by `math::lanes`' GELU kernels (the same
    /// bits).
    ///
    /// # Errors
    /// If the dtype is not `F32` or `F64`.
    pub fn gelu(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1_kernel(
                &GELU,
                self,
                |x: f32| x * 0.5 * (1.0 + math::erff(x * core::f32::consts::FRAC_1_SQRT_2)),
                math::lanes::gelu_f32_slice_on,
            ),
            DType::F64 => map1_kernel(
                &GELU,
                self,
                |x: f64| x * 0.5 * (1.0 + math::erf(x * core::f64::consts::FRAC_1_SQRT_2)),
                math::lanes::gelu_f64_slice_on,
            ),
            got => Err(Error::DType {
                op: GELU.name,
                expected: DType::F32,
                got,
            }),
        }
    }

    /// The derivative of [`gelu`](Self::gelu) (or, with `tanh`, of
    /// [`gelu_tanh`](Self::gelu_tanh)) at `self`, PyTorch's formulas: the exact form's
    /// `Φ(x) + x·φ(x)` is computed in the input's dtype ([`math::gelu_gradf`] for f32, in
    /// PyTorch's operation order; f64 with [`math::erf`] and [`math::exp`]), vectorised with the
    /// same bits.
    ///
    /// # Errors
    /// A dtype that is not float.
    pub fn gelu_derivative(&self, tanh: bool) -> Result<Tensor> {
        match (self.dtype(), tanh) {
            (DType::F32, false) => map1_kernel(
                &GELU_BACKWARD,
                self,
                math::gelu_gradf,
                math::lanes::gelu_grad_f32_slice_on,
            ),
            (DType::F64, false) => map1_kernel(
                &GELU_BACKWARD,
                self,
                gelu_grad,
                math::lanes::gelu_grad_f64_slice_on,
            ),
            (DType::F32, true) => map1(&GELU_BACKWARD, self, gelu_tanh_grad_f32),
            (DType::F64, true) => map1(&GELU_BACKWARD, self, gelu_tanh_grad_f64),
            (got, _) => Err(Error::DType {
                op: GELU_BACKWARD.name,
                expected: DType::F32,
                got,
            }),
        }
    }

    /// [`gelu`](Self::gelu) and [`gelu_derivative`](Self::gelu_derivative)`(false)` of
    /// `self` together, the same bits as the two: a dense f32 tensor in one pass with one erf
    /// per element (its backward, `grad · gelu'(x)`, is then a product: the step's erf is not
    /// computed twice), any other tensor through the two ops. Traced as `gelu` (its value).
    ///
    /// # Errors
    /// As [`gelu`](Self::gelu).
    pub fn gelu_with_derivative(&self) -> Result<(Tensor, Tensor)> {
        if self.dtype() != DType::F32 || !self.is_contiguous() {
            return Ok((self.gelu()?, self.gelu_derivative(false)?));
        }
        GELU.run(&[self], |imp, par| {
            let x = self.data::<f32>()?;
            let isa = crate::isa::Isa::best();
            let Kernel::Chunked = imp.f;
            let n = x.len();
            let mut y = crate::tensor::try_with_capacity::<f32>(GELU.name, n)?;
            let mut d = crate::tensor::try_with_capacity::<f32>(GELU.name, n)?;
            let ys = &mut y.spare_capacity_mut()[..n];
            let ds = &mut d.spare_capacity_mut()[..n];
            if serial(n, par) {
                math::lanes::gelu_and_grad_f32_slice_on(isa, x, ys, ds);
            } else {
                let dp = crate::threads::SyncPtr(ds.as_mut_ptr());
                par.for_each_chunk_mut(ys, CHUNK, |i, o| {
                    let lo = i * CHUNK;
                    // SAFETY: elements `lo..lo + o.len()` of `d`'s spare capacity: chunk
                    // `i`'s, disjoint from every other chunk's; `d` outlives the loop.
                    let dq = unsafe { dp.rows(lo, o.len()) };
                    math::lanes::gelu_and_grad_f32_slice_on(isa, &x[lo..lo + o.len()], o, dq);
                });
            }
            // SAFETY: the kernel wrote each of the `n` elements of both.
            unsafe {
                y.set_len(n);
                d.set_len(n);
            }
            Ok((
                Tensor::from_vec(y, self.shape())?,
                Tensor::from_vec(d, self.shape())?,
            ))
        })
    }

    /// `grad · gelu'(x)` for the exact form: the bits of
    /// `grad.mul(&x.gelu_derivative(false)?)`, in one pass when both are dense and of one
    /// shape and dtype (the derivative never stored), else through those two ops.
    ///
    /// # Errors
    /// As [`gelu_derivative`](Self::gelu_derivative) and `mul`.
    pub fn gelu_backward(grad: &Tensor, x: &Tensor) -> Result<Tensor> {
        let fused = grad.shape() == x.shape()
            && grad.dtype() == x.dtype()
            && grad.is_contiguous()
            && x.is_contiguous();
        match (fused, x.dtype()) {
            (true, DType::F32) => {
                mul_by_kernel(&GELU_BACKWARD, grad, x, math::lanes::gelu_grad_f32_slice_on)
            }
            (true, DType::F64) => {
                mul_by_kernel(&GELU_BACKWARD, grad, x, math::lanes::gelu_grad_f64_slice_on)
            }
            _ => grad.mul(&x.gelu_derivative(false)?),
        }
    }

    /// `torch.relu`: `max(x, 0)` (NaN stays NaN).
    ///
    /// # Errors
    /// Only if dispatch refuses the op or the output cannot be allocated.
    pub fn relu(&self) -> Result<Tensor> {
        crate::with_dtype!(self.dtype(), T => map1(&RELU, self, |x: T| if x < T::ZERO { T::ZERO } else { x }))
    }

    /// `torch.neg`.
    ///
    /// # Errors
    /// For `Bool` and `U8` tensors.
    pub fn neg(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1(&NEG, self, |x: f32| -x),
            DType::F64 => map1(&NEG, self, |x: f64| -x),
            DType::I64 => map1(&NEG, self, |x: i64| x.wrapping_neg()),
            got => Err(Error::DType {
                op: "neg",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.abs` (`Bool` and `U8` values are their own absolute value).
    ///
    /// # Errors
    /// Only if dispatch refuses the op or the output cannot be allocated.
    pub fn abs(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1(&ABS, self, |x: f32| x.abs()),
            DType::F64 => map1(&ABS, self, |x: f64| x.abs()),
            DType::I64 => map1(&ABS, self, |x: i64| x.wrapping_abs()),
            DType::U8 => map1(&ABS, self, |x: u8| x),
            DType::Bool => map1(&ABS, self, |x: bool| x),
        }
    }

    /// `torch.clamp(x, min, max)`; either bound may be absent. NaN stays NaN.
    ///
    /// # Errors
    /// If `min > max`.
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Result<Tensor> {
        if let (Some(a), Some(b)) = (min, max)
            && a > b
        {
            return Err(invalid(
                "clamp",
                "min",
                format!("min ({a}) is greater than max ({b})"),
            ));
        }
        crate::with_dtype!(self.dtype(), T => {
            let (lo, hi) = (min.map(T::from_f64), max.map(T::from_f64));
            map1(&CLAMP, self, move |x: T| {
                let x = match lo { Some(l) if x < l => l, _ => x };
                match hi { Some(h) if x > h => h, _ => x }
            })
        })
    }

    /// `torch.pow(x, exponent)` with a scalar exponent (floats; portable [`math::powf`] /
    /// [`math::pow`]).
    ///
    /// # Errors
    /// If the dtype is not a float.
    pub fn pow_scalar(&self, exponent: f64) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => {
                let e = exponent as f32;
                map1(&POW, self, move |x: f32| math::powf(x, e))
            }
            DType::F64 => map1(&POW, self, move |x: f64| math::pow(x, exponent)),
            got => Err(Error::DType {
                op: "pow",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.pow(x, exponent)` elementwise with broadcasting (floats; portable).
    ///
    /// # Errors
    /// If the dtypes differ or are not float, or the shapes do not broadcast.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        float_map2!(POW, self, exponent, |a, b| pow_any(a, b))
    }

    /// `torch.where(cond, a, b)`: `a` where `cond` is true, else `b`, all three broadcast.
    ///
    /// # Errors
    /// If `cond` is not `Bool`, `a` and `b` differ in dtype, or shapes do not broadcast.
    pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        check_dtype("where", cond, DType::Bool)?;
        if a.dtype() != b.dtype() {
            return Err(Error::DType {
                op: "where",
                expected: a.dtype(),
                got: b.dtype(),
            });
        }
        let shape = broadcast_shapes("where", cond.shape(), a.shape())?;
        let shape = broadcast_shapes("where", &shape, b.shape())?;
        WHERE.run(&[cond, a, b], |imp, par| {
        let c = Src::<bool>::new("where", cond, &shape)?;
        crate::with_dtype!(a.dtype(), T => {
            let mut out = out_buf::<T>(WHERE.name, &shape)?;
            let (sa, sb) = (Src::<T>::new("where", a, &shape)?, Src::<T>::new("where", b, &shape)?);
            let (cshape, [stc, sta, stb]) = coalesce(&shape, [&c.st, &sa.st, &sb.st]);
            let run = |o: &mut [T], lo: usize| {
                walk(&cshape, [&stc, &sta, &stb], lo, o.len(), |p, [oc, oa, ob], [ic, ia, ib], n| {
                    let o = &mut o[p..p + n];
                    if (ic, ia, ib) == (1, 1, 1) {
                        // Dense operands (LeakyReLU's select): a plain loop the compiler vectorises.
                        let it = c.data[oc..oc + n].iter().zip(&sa.data[oa..oa + n]).zip(&sb.data[ob..ob + n]);
                        for (o, ((&c, &x), &y)) in o.iter_mut().zip(it) {
                            *o = if c { x } else { y };
                        }
                        return;
                    }
                    for (t, o) in o.iter_mut().enumerate() {
                        *o = if c.data[oc + t * ic] { sa.data[oa + t * ia] } else { sb.data[ob + t * ib] };
                    }
                })
            };
            match imp.f {
                Kernel::Chunked if serial(out.len(), par) => run(&mut out, 0),
                Kernel::Chunked => par.for_each_chunk_mut(&mut out, CHUNK, |i, o| run(o, i * CHUNK)),
            }
            Tensor::from_vec(out, &shape)
        })
        })
    }

    /// `Tensor.add_(other, alpha=alpha)`: `self += alpha·other` in place, `other` broadcast to
    /// `self`'s shape (the shape does not change). The storage is written directly when this
    /// tensor owns it alone and is dense; otherwise it is copied first (copy-on-write), so
    /// other tensors sharing it never see the change.
    ///
    /// With `alpha = 1` (PyTorch's default), `self[i] + other[j]` for every dtype but `Bool`:
    /// the bits of [`add`](Self::add) (op `add_`). Otherwise, for float tensors, one fused
    /// multiply-add per element, `fma(alpha, other, self)`, which is what PyTorch's CPU
    /// kernel computes (a multiply then an add would round twice and differ on about one
    /// element in eight); `alpha` is converted to the dtype first (op `add_alpha_`, in
    /// [`inplace`](super::inplace)). Where `other` is constant along the innermost run (a
    /// `[R, 1]` column, a 0-dimensional tensor), PyTorch's remainder loop rounds a few positions
    /// past the last whole vector twice, and so does this, position for position (see
    /// [`inplace`](super::inplace)). Both give the same bits at `alpha = 1`.
    ///
    /// # Errors
    /// Dtypes that differ or `Bool`; `other` not broadcastable to `self`'s shape; `alpha ≠ 1`
    /// with a non-float `self`; a read-only `self`.
    pub fn add_(&mut self, other: &Tensor, alpha: f64) -> Result<()> {
        if alpha != 1.0 {
            return self.add_alpha_impl(other, alpha);
        }
        match self.dtype() {
            DType::F32 => inplace2(&ADD_, self, other, |a: f32, b: f32| a + b),
            DType::F64 => inplace2(&ADD_, self, other, |a: f64, b: f64| a + b),
            DType::I64 => inplace2(&ADD_, self, other, |a: i64, b: i64| a.wrapping_add(b)),
            DType::U8 => inplace2(&ADD_, self, other, |a: u8, b: u8| a.wrapping_add(b)),
            got => Err(Error::DType {
                op: ADD_.name,
                expected: DType::F32,
                got,
            }),
        }
    }
}

/// `powf` for either float type, through [`math`].
trait PowAny: Copy {
    fn pow_any(self, e: Self) -> Self;
}
impl PowAny for f32 {
    fn pow_any(self, e: f32) -> f32 {
        math::powf(self, e)
    }
}
impl PowAny for f64 {
    fn pow_any(self, e: f64) -> f64 {
        math::pow(self, e)
    }
}
fn pow_any<T: PowAny>(a: T, b: T) -> T {
    a.pow_any(b)
}

macro_rules! arith {
    ($($(#[$doc:meta])* $name:ident, $scalar:ident, $op:ident, $float:expr, $int:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// If dtypes differ, shapes do not broadcast, or the dtype is `Bool`.
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    match self.dtype() {
                        DType::F32 => map2(&$op, self, other, |a: f32, b: f32| $float(a, b)),
                        DType::F64 => map2(&$op, self, other, |a: f64, b: f64| $float(a, b)),
                        DType::I64 => map2(&$op, self, other, |a: i64, b: i64| $int(a, b)),
                        DType::U8 => map2(&$op, self, other, |a: u8, b: u8| $int(a as i64, b as i64) as u8),
                        got => Err(Error::DType { op: $op.name, expected: DType::F32, got }),
                    }
                }

                /// The same with a scalar right operand, converted to the tensor's dtype.
                ///
                /// # Errors
                /// If the dtype is `Bool`.
                pub fn $scalar(&self, other: f64) -> Result<Tensor> {
                    let t = crate::with_dtype!(self.dtype(), T => Tensor::scalar(T::from_f64(other)));
                    self.$name(&t)
                }
            )*
        }
    };
}

/// NaN test for any float type (a NaN is the only value not comparable with itself).
#[inline]
fn is_nan<T: PartialOrd>(a: T) -> bool {
    a.partial_cmp(&a).is_none()
}

fn int_div(a: i64, b: i64) -> i64 {
    // PyTorch's integer `div` is true division; for i64 tensors we follow `floor_divide`
    // semantics only where exact. Division by zero yields 0 rather than a panic.
    if b == 0 { 0 } else { a.wrapping_div(b) }
}

arith! {
    /// `a + b` (`torch.add`).
    add, add_scalar, ADD, |a, b| a + b, |a: i64, b: i64| a.wrapping_add(b);
    /// `a − b` (`torch.sub`).
    sub, sub_scalar, SUB, |a, b| a - b, |a: i64, b: i64| a.wrapping_sub(b);
    /// `a · b` (`torch.mul`).
    mul, mul_scalar, MUL, |a, b| a * b, |a: i64, b: i64| a.wrapping_mul(b);
    /// `a / b` (`torch.div`; integers truncate, and dividing by 0 gives 0 instead of a panic).
    div, div_scalar, DIV, |a, b| a / b, int_div;
    /// `torch.maximum` (NaN propagates).
    maximum, maximum_scalar, MAXIMUM, |a, b| if is_nan(a) || a > b { a } else { b }, |a: i64, b: i64| a.max(b);
    /// `torch.minimum` (NaN propagates).
    minimum, minimum_scalar, MINIMUM, |a, b| if is_nan(a) || a < b { a } else { b }, |a: i64, b: i64| a.min(b);
}

/// PyTorch's `promoteTypes` for lockstep's dtypes: `Bool < U8 < I64 < F32 < F64`, the larger
/// wins (for these five, PyTorch's table is exactly that order).
fn promote_types(a: DType, b: DType) -> DType {
    let rank = |d: DType| match d {
        DType::Bool => 0,
        DType::U8 => 1,
        DType::I64 => 2,
        DType::F32 => 3,
        DType::F64 => 4,
    };
    if rank(a) >= rank(b) { a } else { b }
}

/// PyTorch's `combine_categories(higher, lower)`: a higher-priority group keeps its dtype unless
/// the lower group is of a higher category (bool → integer → float), which then promotes it.
fn combine_categories(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (Some(h), _) if h.is_float() => Some(h),
        (Some(h), Some(l)) if h == DType::Bool || l.is_float() => Some(promote_types(h, l)),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// `torch.result_type(a, b)` for two tensors: tensors with dimensions decide the dtype; 0-dim
/// tensors count only when they are of a higher category (an `F64` scalar tensor against an
/// `F32` matrix gives `F32`; an `F32` scalar tensor against an `I64` vector gives `F32`).
/// `float_scalar` adds a Python float (a wrapped number, of the default dtype `F32`), which
/// counts below both.
pub fn result_type(tensors: &[&Tensor], float_scalar: bool) -> DType {
    let (mut dim, mut zero): (Option<DType>, Option<DType>) = (None, None);
    for t in tensors {
        let slot = if t.ndim() == 0 { &mut zero } else { &mut dim };
        *slot = Some(slot.map_or(t.dtype(), |d| promote_types(d, t.dtype())));
    }
    let wrapped = float_scalar.then_some(DType::F32);
    combine_categories(dim, combine_categories(zero, wrapped)).unwrap_or(DType::F32)
}

/// `t` converted to `dtype` (itself when it already is).
fn promoted(op: &'static str, t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype() == dtype {
        Ok(t.clone())
    } else {
        t.try_to_dtype(dtype).map_err(|e| match e {
            Error::OutOfMemory { bytes, .. } => Error::OutOfMemory { op, bytes },
            e => e,
        })
    }
}

macro_rules! compare {
    ($($(#[$doc:meta])* $name:ident, $scalar:ident, $id:ident, $op:tt;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// Operands of different dtypes are compared in their common dtype
                /// ([`result_type`], PyTorch's promotion), with broadcasting; the result is
                /// `Bool`. NaN compares unequal to everything, itself included: only `ne` is
                /// true for it.
                ///
                /// # Errors
                /// If the shapes do not broadcast (an error naming the op), or a promoted copy
                /// cannot be allocated.
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    let dt = result_type(&[self, other], false);
                    let (a, b) = (promoted($id.name, self, dt)?, promoted($id.name, other, dt)?);
                    crate::with_dtype!(dt, T => map2(&$id, &a, &b, |x: T, y: T| x $op y))
                }

                /// The same against a Python float `other` (`x OP 0.5`): float tensors compare
                /// in their own dtype (the scalar rounded to it, as PyTorch does), `Bool` and
                /// integer tensors in `F32`, PyTorch's default dtype. To compare integers
                /// exactly with an integer, pass `&Tensor::scalar(v as i64)` to the tensor form.
                ///
                /// # Errors
                /// As the tensor form.
                pub fn $scalar(&self, other: f64) -> Result<Tensor> {
                    let dt = result_type(&[self], true);
                    let s = crate::with_dtype!(dt, T => Tensor::scalar(T::from_f64(other)));
                    let a = promoted($id.name, self, dt)?;
                    crate::with_dtype!(dt, T => map2(&$id, &a, &s, |x: T, y: T| x $op y))
                }
            )*
        }
    };
}

compare! {
    /// `torch.eq(a, b)`: `a == b`, elementwise, as `Bool`.
    eq, eq_scalar, EQ, ==;
    /// `torch.ne(a, b)`: `a != b`.
    ne, ne_scalar, NE, !=;
    /// `torch.lt(a, b)`: `a < b`.
    lt, lt_scalar, LT, <;
    /// `torch.le(a, b)`: `a <= b`.
    le, le_scalar, LE, <=;
    /// `torch.gt(a, b)`: `a > b`.
    gt, gt_scalar, GT, >;
    /// `torch.ge(a, b)`: `a >= b`.
    ge, ge_scalar, GE, >=;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_only_dimensions_every_operand_walks_as_one() {
        // Dense [64, 64, 4, 4] against a broadcast scalar: one run.
        let (sh, [a, b]) = coalesce(&[64, 64, 4, 4], [&[1024, 16, 4, 1], &[0, 0, 0, 0]]);
        assert_eq!((sh, a, b), (vec![65536], vec![1], vec![0]));
        // Against a per-channel [1, 64, 1, 1]: the channel keeps its own dimension.
        let (sh, [a, b]) = coalesce(&[8, 64, 4, 4], [&[1024, 16, 4, 1], &[0, 1, 0, 0]]);
        assert_eq!(
            (sh, a, b),
            (vec![8, 64, 16], vec![1024, 16, 1], vec![0, 1, 0])
        );
        // A transposed operand: nothing merges; size-1 dimensions drop out.
        let (sh, [a]) = coalesce(&[3, 1, 5], [&[1, 7, 3]]);
        assert_eq!((sh, a), (vec![3, 5], vec![1, 3]));
        let (sh, [a]) = coalesce(&[1, 1], [&[0, 0]]);
        assert!(sh.is_empty() && a.is_empty());
    }

    fn f(v: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_slice(v, shape).unwrap()
    }

    /// The chunked kernels (above the serial size, dense and broadcast inputs, in place, and
    /// `where`) give every element its value at 1, 2, 3 and 8 threads, chunk by chunk.
    #[test]
    fn chunked_kernels_are_thread_invariant() {
        let n = 3 * CHUNK + 5;
        let rows = SERIAL_MAX / n + 2;
        let v: Vec<f32> = (0..rows * n).map(|k| (k as f32 * 0.37).sin()).collect();
        let a = f(&v, &[rows, n]);
        let b = f(&v[..n], &[n]);
        let cond = Tensor::from_vec(v.iter().map(|&x| x > 0.0).collect(), &[rows, n]).unwrap();
        let run = || {
            let mut d = a.deep_clone();
            d.add_(&b, 1.0).unwrap();
            [
                a.tanh().unwrap(),
                a.mul(&a).unwrap(),
                a.add(&b).unwrap(),
                d,
                Tensor::where_(&cond, &a, &b).unwrap(),
            ]
            .map(|t| {
                t.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>()
            })
        };
        let one = crate::threads::with_num_threads(1, run);
        for t in [2, 3, 8] {
            assert!(
                crate::threads::with_num_threads(t, run) == one,
                "threads = {t}"
            );
        }
    }

    #[test]
    fn broadcasting_arithmetic() {
        let a = f(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let b = f(&[10., 20., 30.], &[3]);
        assert_eq!(
            a.add(&b).unwrap().to_vec::<f32>().unwrap(),
            [11., 22., 33., 14., 25., 36.]
        );
        let c = f(&[1., 2.], &[2, 1]);
        assert_eq!(
            a.mul(&c).unwrap().to_vec::<f32>().unwrap(),
            [1., 2., 3., 8., 10., 12.]
        );
        assert_eq!(
            a.sub_scalar(1.0).unwrap().to_vec::<f32>().unwrap(),
            [0., 1., 2., 3., 4., 5.]
        );
        assert_eq!(
            broadcast_shapes("t", &[4, 1, 3], &[2, 1]).unwrap(),
            [4, 2, 3]
        );
        assert!(a.add(&f(&[1., 2.], &[2])).is_err());
        let i = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
        assert!(a.add(&i).is_err(), "no implicit promotion");
        assert_eq!(
            i.div(&Tensor::from_vec(vec![0i64, 2, 2], &[3]).unwrap())
                .unwrap()
                .to_vec::<i64>()
                .unwrap(),
            [0, 1, 1]
        );
    }

    #[test]
    fn unary_comparisons_where() {
        let a = f(&[-1., 0., 2., f32::NAN], &[4]);
        let r = a.relu().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(&r[..3], [0., 0., 2.]);
        assert!(r[3].is_nan());
        let c = a
            .clamp(Some(-0.5), Some(1.0))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(&c[..3], [-0.5, 0., 1.]);
        assert!(a.clamp(Some(1.0), Some(0.0)).is_err());
        let m = a.gt(&f(&[0.], &[1])).unwrap();
        assert_eq!(m.to_vec::<bool>().unwrap(), [false, false, true, false]);
        let w = Tensor::where_(&m, &a, &f(&[7.], &[1])).unwrap();
        assert_eq!(&w.to_vec::<f32>().unwrap(), &[7., 7., 2., 7.]);
        let p = f(&[2., 3.], &[2]).pow(&f(&[2.], &[1])).unwrap();
        assert_eq!(p.to_vec::<f32>().unwrap(), [4., 9.]);
        let s = f(&[0.], &[1]).sigmoid().unwrap().item::<f32>().unwrap();
        assert_eq!(s, 0.5);
        let g = f(&[1.], &[1]).gelu().unwrap().item::<f32>().unwrap();
        assert!((g - 0.841_344_74).abs() < 1e-6);
        assert!(Tensor::from_vec(vec![1i64], &[1]).unwrap().exp().is_err());
        let mx = a.maximum(&f(&[1.], &[1])).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(&mx[..3], [1., 1., 2.]);
        assert!(mx[3].is_nan());
    }

    #[test]
    fn thread_invariant() {
        let n = 100_003;
        let v: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let x = f(&v, &[n]);
        let r1 = crate::threads::with_num_threads(1, || x.tanh().unwrap().mul(&x).unwrap());
        for t in [2, 3, 8] {
            let r = crate::threads::with_num_threads(t, || x.tanh().unwrap().mul(&x).unwrap());
            assert_eq!(r.to_vec::<f32>().unwrap(), r1.to_vec::<f32>().unwrap());
        }
    }
}
