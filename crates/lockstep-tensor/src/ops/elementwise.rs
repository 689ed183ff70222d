//! Elementwise ops with NumPy/PyTorch broadcasting. Each output element is computed from its
//! own inputs only, so every kernel here is thread-invariant by construction; work is split into
//! fixed-size chunks over the output.
//!
//! Both operands of a binary op must have the same dtype (no implicit promotion); use
//! [`Tensor::to_dtype`] first. Scalar forms (`add_scalar`, …) convert the scalar to the tensor's
//! dtype, as PyTorch does for a Python number.

// Kernels are written once and instantiated for every dtype (bool and u8 included), where some
// comparisons are trivially true or false; that is expected, not a bug.
#![allow(clippy::absurd_extreme_comparisons, clippy::bool_comparison)]

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;

const CHUNK: usize = 1 << 14;

/// The algorithm id of every elementwise op: their only implementation, thread-invariant (each
/// output element from its own inputs). They have nothing to choose, so they skip
/// [`Op::select`](crate::dispatch::Op::select) (no cost in small ops) and go straight to
/// [`trace::record`](crate::trace::record).
pub const ALGO: &str = "elementwise.chunked";

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

/// `t`'s elements broadcast to `shape`, borrowed when `t` is already dense in that shape.
fn dense_cow<'a, T: Element>(t: &'a Tensor, shape: &[usize]) -> Result<std::borrow::Cow<'a, [T]>> {
    if t.shape() == shape && t.is_contiguous() {
        return Ok(std::borrow::Cow::Borrowed(t.data::<T>()?));
    }
    Ok(std::borrow::Cow::Owned(dense::<T>(t, shape)?))
}

fn dense<T: Element>(t: &Tensor, shape: &[usize]) -> Result<Vec<T>> {
    let isz: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    let e = if t.shape() == shape {
        t.clone()
    } else {
        t.expand(&isz)?
    };
    e.to_vec::<T>()
}

fn check_dtype(op: &'static str, t: &Tensor, want: DType) -> Result<()> {
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

/// `out[i] = f(x[i])` over a tensor of type `T`.
pub fn map1<T: Element, U: Element>(
    op: &'static str,
    x: &Tensor,
    f: impl Fn(T) -> U + Sync,
) -> Result<Tensor> {
    check_dtype(op, x, T::DTYPE)?;
    let c = x.contiguous();
    let src = c.data::<T>()?;
    let mut out = vec![U::ZERO; src.len()];
    // One chunk: no hop into the pool (small tensors are most of a training step's ops).
    if src.len() <= CHUNK {
        for (o, &s) in out.iter_mut().zip(src) {
            *o = f(s);
        }
        return crate::trace::traced(op, ALGO, &[x], Tensor::from_vec(out, x.shape()));
    }
    Par::current().install(|| {
        out.par_chunks_mut(CHUNK)
            .zip(src.par_chunks(CHUNK))
            .for_each(|(o, s)| {
                for (o, &s) in o.iter_mut().zip(s) {
                    *o = f(s);
                }
            })
    });
    crate::trace::traced(op, ALGO, &[x], Tensor::from_vec(out, x.shape()))
}

/// `out[i] = f(a[i], b[i])` after broadcasting `a` and `b` (both of type `T`).
pub fn map2<T: Element, U: Element>(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(Error::DType {
            op,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    check_dtype(op, a, T::DTYPE)?;
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let (va, vb) = (dense_cow::<T>(a, &shape)?, dense_cow::<T>(b, &shape)?);
    let (va, vb) = (&*va, &*vb);
    let mut out = vec![U::ZERO; va.len()];
    if va.len() <= CHUNK {
        for ((o, &x), &y) in out.iter_mut().zip(va).zip(vb) {
            *o = f(x, y);
        }
        return crate::trace::traced(op, ALGO, &[a, b], Tensor::from_vec(out, &shape));
    }
    Par::current().install(|| {
        out.par_chunks_mut(CHUNK)
            .zip(va.par_chunks(CHUNK).zip(vb.par_chunks(CHUNK)))
            .for_each(|(o, (x, y))| {
                for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            })
    });
    crate::trace::traced(op, ALGO, &[a, b], Tensor::from_vec(out, &shape))
}

macro_rules! float_unary {
    ($($(#[$doc:meta])* $name:ident => |$x:ident| $e:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// If the dtype is not `F32` or `F64`.
                pub fn $name(&self) -> Result<Tensor> {
                    match self.dtype() {
                        DType::F32 => map1(stringify!($name), self, |$x: f32| $e),
                        DType::F64 => map1(stringify!($name), self, |$x: f64| $e),
                        got => Err(Error::DType { op: stringify!($name), expected: DType::F32, got }),
                    }
                }
            )*
        }
    };
}

unsafe extern "C" {
    safe fn erf(x: f64) -> f64;
    safe fn erff(x: f32) -> f32;
}

float_unary! {
    /// `torch.exp`.
    exp => |x| x.exp();
    /// `torch.log` (natural).
    log => |x| x.ln();
    /// `torch.sqrt`.
    sqrt => |x| x.sqrt();
    /// `torch.sigmoid`: `1 / (1 + exp(−x))`.
    sigmoid => |x| 1.0 / (1.0 + (-x).exp());
    /// `torch.tanh`.
    tanh => |x| x.tanh();
}

impl Tensor {
    /// `F.gelu(x)` (exact form): `x · ½ · (1 + erf(x / √2))`.
    ///
    /// # Errors
    /// If the dtype is not a float.
    pub fn gelu(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1("gelu", self, |x: f32| {
                x * 0.5 * (1.0 + erff(x * core::f32::consts::FRAC_1_SQRT_2))
            }),
            DType::F64 => map1("gelu", self, |x: f64| {
                x * 0.5 * (1.0 + erf(x * core::f64::consts::FRAC_1_SQRT_2))
            }),
            got => Err(Error::DType {
                op: "gelu",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.relu`: `max(x, 0)` (NaN stays NaN).
    pub fn relu(&self) -> Result<Tensor> {
        crate::with_dtype!(self.dtype(), T => map1("relu", self, |x: T| if x < T::ZERO { T::ZERO } else { x }))
    }

    /// `torch.neg`.
    ///
    /// # Errors
    /// For `Bool` and `U8` tensors.
    pub fn neg(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1("neg", self, |x: f32| -x),
            DType::F64 => map1("neg", self, |x: f64| -x),
            DType::I64 => map1("neg", self, |x: i64| x.wrapping_neg()),
            got => Err(Error::DType {
                op: "neg",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.abs`.
    pub fn abs(&self) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map1("abs", self, |x: f32| x.abs()),
            DType::F64 => map1("abs", self, |x: f64| x.abs()),
            DType::I64 => map1("abs", self, |x: i64| x.wrapping_abs()),
            _ => Ok(self.clone()),
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
            map1("clamp", self, move |x: T| {
                let x = match lo { Some(l) if x < l => l, _ => x };
                match hi { Some(h) if x > h => h, _ => x }
            })
        })
    }

    /// `torch.pow(x, exponent)` with a scalar exponent (floats).
    ///
    /// # Errors
    /// If the dtype is not a float.
    pub fn pow_scalar(&self, exponent: f64) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => {
                let e = exponent as f32;
                map1("pow", self, move |x: f32| x.powf(e))
            }
            DType::F64 => map1("pow", self, move |x: f64| x.powf(exponent)),
            got => Err(Error::DType {
                op: "pow",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.pow(x, exponent)` elementwise with broadcasting (floats).
    ///
    /// # Errors
    /// If the dtypes differ or are not float, or the shapes do not broadcast.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        match self.dtype() {
            DType::F32 => map2("pow", self, exponent, |a: f32, b: f32| a.powf(b)),
            DType::F64 => map2("pow", self, exponent, |a: f64, b: f64| a.powf(b)),
            got => Err(Error::DType {
                op: "pow",
                expected: DType::F32,
                got,
            }),
        }
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
        let c = dense::<bool>(cond, &shape)?;
        crate::with_dtype!(a.dtype(), T => {
            let (va, vb) = (dense::<T>(a, &shape)?, dense::<T>(b, &shape)?);
            let v: Vec<T> = c.iter().zip(va.iter().zip(&vb)).map(|(&c, (&x, &y))| if c { x } else { y }).collect();
            crate::trace::traced("where", ALGO, &[cond, a, b], Tensor::from_vec(v, &shape))
        })
    }
}

macro_rules! arith {
    ($($(#[$doc:meta])* $name:ident, $scalar:ident, $float:expr, $int:expr;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// If dtypes differ, shapes do not broadcast, or the dtype is `Bool`.
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    let op = stringify!($name);
                    match self.dtype() {
                        DType::F32 => map2(op, self, other, |a: f32, b: f32| $float(a, b)),
                        DType::F64 => map2(op, self, other, |a: f64, b: f64| $float(a, b)),
                        DType::I64 => map2(op, self, other, |a: i64, b: i64| $int(a, b)),
                        DType::U8 => map2(op, self, other, |a: u8, b: u8| $int(a as i64, b as i64) as u8),
                        got => Err(Error::DType { op, expected: DType::F32, got }),
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
    add, add_scalar, |a, b| a + b, |a: i64, b: i64| a.wrapping_add(b);
    /// `a − b` (`torch.sub`).
    sub, sub_scalar, |a, b| a - b, |a: i64, b: i64| a.wrapping_sub(b);
    /// `a · b` (`torch.mul`).
    mul, mul_scalar, |a, b| a * b, |a: i64, b: i64| a.wrapping_mul(b);
    /// `a / b` (`torch.div`; integers truncate, and dividing by 0 gives 0 instead of a panic).
    div, div_scalar, |a, b| a / b, int_div;
    /// `torch.maximum` (NaN propagates).
    maximum, maximum_scalar, |a, b| if is_nan(a) || a > b { a } else { b }, |a: i64, b: i64| a.max(b);
    /// `torch.minimum` (NaN propagates).
    minimum, minimum_scalar, |a, b| if is_nan(a) || a < b { a } else { b }, |a: i64, b: i64| a.min(b);
}

macro_rules! compare {
    ($($(#[$doc:meta])* $name:ident, $op:tt;)*) => {
        impl Tensor {
            $(
                $(#[$doc])*
                ///
                /// # Errors
                /// If dtypes differ or shapes do not broadcast.
                pub fn $name(&self, other: &Tensor) -> Result<Tensor> {
                    crate::with_dtype!(self.dtype(), T => map2(stringify!($name), self, other, |a: T, b: T| a $op b))
                }
            )*
        }
    };
}

compare! {
    /// `a == b`, elementwise, as `Bool`.
    eq, ==;
    /// `a != b`.
    ne, !=;
    /// `a < b`.
    lt, <;
    /// `a <= b`.
    le, <=;
    /// `a > b`.
    gt, >;
    /// `a >= b`.
    ge, >=;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_slice(v, shape).unwrap()
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
