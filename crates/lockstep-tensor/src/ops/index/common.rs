//! What the index ops share: the element types they accumulate in, the registration macro of
//! the accumulating ops, and the argument checks.

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::resolve_dim;
use crate::ops::reduce::{copied_vec, dense};
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

// ---------------------------------------------------------------------------------------------
// Elements that can be accumulated.

/// An element type the accumulating ops add in (`f32`, `f64`, `i64`; integers wrap).
pub trait AccElem: Element + Default {
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// `*p += v`, atomically.
    ///
    /// # Safety
    /// `p` must be valid, aligned, and only accessed atomically while other threads may touch it.
    unsafe fn atomic_add(p: *mut Self, v: Self);
}

/// Floats add through a compare-and-swap loop on the atomic integer of their size.
macro_rules! float_acc {
    ($t:ty, $atomic:ty) => {
        impl AccElem for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            unsafe fn atomic_add(p: *mut Self, v: Self) {
                // SAFETY: the float and its atomic integer have the same size and alignment;
                // the caller guarantees validity and atomic-only access.
                let a = unsafe { <$atomic>::from_ptr(p.cast()) };
                let mut old = a.load(Ordering::Relaxed);
                loop {
                    let new = (<$t>::from_bits(old) + v).to_bits();
                    match a.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(x) => old = x,
                    }
                }
            }
        }
    };
}
float_acc!(f32, AtomicU32);
float_acc!(f64, AtomicU64);

impl AccElem for i64 {
    #[inline(always)]
    fn add(a: Self, b: Self) -> Self {
        a.wrapping_add(b)
    }
    unsafe fn atomic_add(p: *mut Self, v: Self) {
        // SAFETY: `AtomicI64` has the size and alignment of `i64`; the caller's guarantees.
        unsafe { AtomicI64::from_ptr(p) }.fetch_add(v, Ordering::Relaxed);
    }
}

/// Runs `$body` with `$T` = `f32`, `f64` or `i64`, else a dtype error naming `$op`.
macro_rules! with_acc {
    ($op:expr, $dt:expr, $T:ident => $body:expr) => {
        match $dt {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            got => Err(Error::DType {
                op: $op,
                expected: DType::F32,
                got,
            }),
        }
    };
}
pub(super) use with_acc;

// ---------------------------------------------------------------------------------------------
// Argument checks.

/// A private dense copy of `t` (written by the accumulating ops), in a fresh buffer.
pub(super) fn fresh_copy(op: &'static str, t: &Tensor) -> Result<Tensor> {
    let c = t.contiguous_for(op)?;
    crate::with_dtype!(t.dtype(), T => Tensor::from_vec(copied_vec(dense::<T>(&c)?), t.shape()))
}

/// Mutable dense elements (copy-on-write), also for tensors with no elements.
pub(super) fn dense_mut<T: Element>(t: &mut Tensor) -> Result<&mut [T]> {
    if t.numel() == 0 && t.dtype() == T::DTYPE {
        return Ok(Default::default());
    }
    t.data_mut::<T>()
}

/// The `i64` indices of `t`, contiguous (a dtype error naming `op` otherwise).
pub(super) fn index_tensor(op: &'static str, t: &Tensor) -> Result<Tensor> {
    if t.dtype() != DType::I64 {
        return Err(Error::DType {
            op,
            expected: DType::I64,
            got: t.dtype(),
        });
    }
    t.contiguous_for(op)
}

/// Checks that every index is in `0..size` (a branch-free scan on the op's threads `par`; the
/// first bad index is looked up only when there is one).
pub(super) fn check_indices(op: &'static str, idx: &[i64], size: usize, par: &Par) -> Result<()> {
    let bad = |c: &[i64]| c.iter().fold(false, |a, &i| a | (i as u64 >= size as u64));
    let any_bad = if idx.len() > 1 << 16 {
        par.install(|| idx.par_chunks(1 << 14).any(bad))
    } else {
        bad(idx)
    };
    if any_bad && let Some(&i) = idx.iter().find(|&&i| i as u64 >= size as u64) {
        return Err(Error::IndexOutOfRange { op, index: i, size });
    }
    Ok(())
}

pub(super) fn same_dtype(op: &'static str, expected: DType, t: &Tensor) -> Result<()> {
    if t.dtype() != expected {
        return Err(Error::DType {
            op,
            expected,
            got: t.dtype(),
        });
    }
    Ok(())
}

pub(super) fn one_dim(op: &'static str, arg: &'static str, t: &Tensor) -> Result<()> {
    if t.ndim() > 1 {
        return Err(invalid(
            op,
            arg,
            format!("expected a 0-d or 1-d tensor, got shape {:?}", t.shape()),
        ));
    }
    Ok(())
}

/// `[outer, n, inner]` around dimension `d` (a 0-d shape is taken as `[1]`).
pub(super) fn geom(shape: &[usize], d: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    (
        shape[..d].iter().product(),
        shape[d],
        shape[d + 1..].iter().product(),
    )
}

pub(super) fn dim_of(op: &'static str, dim: isize, t: &Tensor) -> Result<usize> {
    resolve_dim(op, dim, t.ndim().max(1))
}

/// `index` must have `x`'s number of dimensions and be no larger than `x` outside `dim` (and no
/// larger than `src` anywhere, when given).
pub(super) fn check_index_shape(
    op: &'static str,
    x: &[usize],
    index: &[usize],
    dim: usize,
    src: Option<&[usize]>,
) -> Result<()> {
    let bad = || Error::ShapeMismatch {
        op,
        lhs: x.to_vec(),
        rhs: index.to_vec(),
    };
    if index.len() != x.len() && !(index.is_empty() && x.len() <= 1) {
        return Err(bad());
    }
    for a in 0..index.len() {
        if a != dim && index[a] > x[a] {
            return Err(bad());
        }
    }
    if let Some(s) = src {
        if s.len() != index.len() && !(index.is_empty() && s.len() <= 1) {
            return Err(Error::ShapeMismatch {
                op,
                lhs: s.to_vec(),
                rhs: index.to_vec(),
            });
        }
        if index.iter().zip(s).any(|(&i, &s)| i > s)
            || (index.is_empty() && s.iter().product::<usize>() < 1)
        {
            return Err(Error::ShapeMismatch {
                op,
                lhs: s.to_vec(),
                rhs: index.to_vec(),
            });
        }
    }
    Ok(())
}

macro_rules! acc_op {
    ($(#[$m:meta])* $name:ident: $ty:ty, $op:literal, $nd:literal, $d:literal, $nk:expr, $dk:expr) => {
        $(#[$m])*
        pub static $name: Op<$ty> = Op {
            name: $op,
            impls: &[
                Impl {
                    algo: $nd,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $nk,
                },
                Impl {
                    algo: $d,
                    guarantee: Guarantee::ThreadInvariant,
                    f: $dk,
                },
            ],
        };
    };
    ($(#[$m:meta])* $name:ident: $ty:ty, $op:literal, $nd:literal, $d:literal, $a:literal, $nk:expr, $dk:expr, $ak:expr) => {
        $(#[$m])*
        ///
        /// Implementations: source-parallel with per-thread buffers (first; it runs the
        /// destination-partitioned kernel when the destination is too large for a buffer per
        /// thread), destination-partitioned (deterministic), and atomic compare-and-swap adds
        /// (last: only through [`Op::by_algo`], for benchmarks and tuning).
        pub static $name: Op<$ty> = Op {
            name: $op,
            impls: &[
                Impl {
                    algo: $nd,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $nk,
                },
                Impl {
                    algo: $d,
                    guarantee: Guarantee::ThreadInvariant,
                    f: $dk,
                },
                Impl {
                    algo: $a,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $ak,
                },
            ],
        };
    };
}
pub(super) use acc_op;
