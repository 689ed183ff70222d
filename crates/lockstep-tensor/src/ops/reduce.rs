//! Reductions. `sum` is the model every reduction follows:
//!
//! * the deterministic kernel cuts the input into fixed-size chunks ([`CHUNK`] elements, a
//!   constant), sums each chunk with [`LANES`] independent accumulators (element `i` goes to
//!   lane `i mod LANES`) folded by a fixed tree, and combines the chunk sums with a fixed
//!   pairwise tree — the order of every addition depends on the length only, so the bits are
//!   the same at any thread count;
//! * the nondeterministic kernel gives each thread a contiguous range and adds the per-thread
//!   sums in the order the threads finish.

use crate::dispatch::{Guarantee, Impl, Op};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::resolve_dim;
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::Mutex;

/// Elements per chunk of the deterministic reductions (a constant: never derived from the
/// thread count or cache sizes).
pub const CHUNK: usize = 1 << 14;
/// Independent accumulators per chunk (lets the compiler use vector registers).
pub const LANES: usize = 16;

/// A float type the reductions accumulate in (`f32` sums in `f32`, as PyTorch does).
pub trait Float: Element + core::ops::Add<Output = Self> + Default {}
impl Float for f32 {}
impl Float for f64 {}

/// Sum of a slice in a fixed order: lanes, then a fixed tree over the lanes.
#[inline]
pub fn sum_lanes<T: Float>(x: &[T]) -> T {
    let mut acc = [T::default(); LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] = acc[l] + c[l];
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] = acc[l] + v;
    }
    tree_sum(&mut acc)
}

/// Pairwise sum of `v` in place: `(v0+v1) + (v2+v3)`, … — a fixed tree for a given length.
pub fn tree_sum<T: Float>(v: &mut [T]) -> T {
    let mut n = v.len();
    if n == 0 {
        return T::default();
    }
    while n > 1 {
        let half = n / 2;
        for i in 0..half {
            v[i] = v[2 * i] + v[2 * i + 1];
        }
        if n % 2 == 1 {
            v[half] = v[n - 1];
            n = half + 1;
        } else {
            n = half;
        }
    }
    v[0]
}

/// Deterministic sum of a slice using `par`: identical bits at any thread count.
pub fn sum_det<T: Float>(x: &[T], par: &Par) -> T {
    if x.len() <= CHUNK {
        return sum_lanes(x);
    }
    let mut partials: Vec<T> = par.install(|| x.par_chunks(CHUNK).map(sum_lanes).collect());
    tree_sum(&mut partials)
}

/// Nondeterministic sum: one contiguous range per thread, partial sums added in completion
/// order.
pub fn sum_nondet<T: Float>(x: &[T], par: &Par) -> T {
    let threads = par.threads();
    if threads == 1 || x.len() <= CHUNK {
        return sum_lanes(x);
    }
    let total = Mutex::new(T::default());
    let per = x.len().div_ceil(threads);
    par.install(|| {
        x.par_chunks(per).for_each(|c| {
            let s = sum_lanes(c);
            let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
            *t = *t + s;
        })
    });
    total.into_inner().unwrap_or_else(|e| e.into_inner())
}

type SumFn = fn(&Tensor, &Par) -> Result<Tensor>;

fn full_sum(x: &Tensor, par: &Par, det: bool) -> Result<Tensor> {
    let x = x.contiguous();
    match x.dtype() {
        DType::F32 => {
            let d = x.data::<f32>()?;
            Ok(Tensor::scalar(if det {
                sum_det(d, par)
            } else {
                sum_nondet(d, par)
            }))
        }
        DType::F64 => {
            let d = x.data::<f64>()?;
            Ok(Tensor::scalar(if det {
                sum_det(d, par)
            } else {
                sum_nondet(d, par)
            }))
        }
        DType::I64 | DType::U8 | DType::Bool => {
            // Integer sums are exact in any order: one kernel serves both policies.
            let v = x.to_f64_vec();
            let s: i64 = match x.dtype() {
                DType::I64 => x
                    .data::<i64>()?
                    .iter()
                    .fold(0i64, |a, &b| a.wrapping_add(b)),
                _ => v.iter().map(|&f| f as i64).sum(),
            };
            Ok(Tensor::scalar(s))
        }
    }
}

/// `torch.sum(x)`: the sum of all elements (integers sum to `i64`, floats in their own dtype).
pub static SUM: Op<SumFn> = Op {
    name: "sum",
    impls: &[
        Impl {
            algo: "sum.completion_order",
            guarantee: Guarantee::NotGuaranteed,
            f: |x, par| full_sum(x, par, false),
        },
        Impl {
            algo: "sum.fixed_tree",
            guarantee: Guarantee::ThreadInvariant,
            f: |x, par| full_sum(x, par, true),
        },
    ],
};

/// Sums rows of a `[outer, n, inner]` view into `[outer, inner]`, each output in a fixed order
/// (sequential over `n`); parallel over outputs, so thread-invariant.
fn sum_dim_kernel<T: Float>(x: &[T], outer: usize, n: usize, inner: usize, par: &Par) -> Vec<T> {
    let mut out = vec![T::default(); outer * inner];
    if inner == 1 {
        par.install(|| {
            out.par_iter_mut()
                .enumerate()
                .for_each(|(o, dst)| *dst = sum_lanes(&x[o * n..(o + 1) * n]))
        });
    } else {
        par.install(|| {
            out.par_chunks_mut(inner).enumerate().for_each(|(o, dst)| {
                for k in 0..n {
                    let row = &x[(o * n + k) * inner..(o * n + k + 1) * inner];
                    for (d, &v) in dst.iter_mut().zip(row) {
                        *d = *d + v;
                    }
                }
            })
        });
    }
    out
}

impl Tensor {
    /// `torch.sum(x)`: the sum of every element, through dispatch (`sum`).
    ///
    /// # Errors
    /// [`Error::Nondeterministic`] cannot happen (a deterministic kernel exists).
    pub fn sum(&self) -> Result<Tensor> {
        let c = SUM.select()?;
        (c.imp.f)(self, &c.par)
    }

    /// `torch.sum(x, dim, keepdim)`: deterministic at any thread count (each output element
    /// adds its inputs in index order).
    ///
    /// # Errors
    /// If `dim` is out of range, or the dtype is not a float.
    pub fn sum_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let d = resolve_dim("sum", dim, self.ndim())?;
        let shape = self.shape().to_vec();
        let outer: usize = shape[..d].iter().product();
        let inner: usize = shape[d + 1..].iter().product();
        let n = shape[d];
        let mut out_shape = shape.clone();
        if keepdim {
            out_shape[d] = 1;
        } else {
            out_shape.remove(d);
        }
        let x = self.contiguous();
        let par = Par::current();
        match x.dtype() {
            DType::F32 => Tensor::from_vec(
                sum_dim_kernel(x.data::<f32>()?, outer, n, inner, &par),
                &out_shape,
            ),
            DType::F64 => Tensor::from_vec(
                sum_dim_kernel(x.data::<f64>()?, outer, n, inner, &par),
                &out_shape,
            ),
            got => Err(Error::DType {
                op: "sum",
                expected: DType::F32,
                got,
            }),
        }
    }

    /// `torch.mean(x)`: [`sum`](Self::sum) divided by the number of elements (floats only).
    ///
    /// # Errors
    /// If the dtype is not a float, or the tensor is empty.
    pub fn mean(&self) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(Error::DType {
                op: "mean",
                expected: DType::F32,
                got: self.dtype(),
            });
        }
        if self.numel() == 0 {
            return Err(invalid("mean", "self", "mean of an empty tensor"));
        }
        let s = self.sum()?;
        let n = self.numel() as f64;
        match s.dtype() {
            DType::F32 => Ok(Tensor::scalar(s.item::<f32>()? / n as f32)),
            _ => Ok(Tensor::scalar(s.item::<f64>()? / n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deterministic::scope;
    use crate::threads::with_num_threads;

    fn data(n: usize) -> Vec<f32> {
        let mut g = lockstep_rng::Generator::with_seed(5);
        let mut v = vec![0f32; n];
        lockstep_rng::compat::torch::normal_(&mut g, &mut v, 0.0, 1.0).unwrap();
        v
    }

    #[test]
    fn deterministic_sum_is_thread_invariant() {
        // Lengths around the chunk and lane boundaries.
        for n in [0, 1, 15, 17, CHUNK - 1, CHUNK + 3, 5 * CHUNK + 17, 100_003] {
            let x = Tensor::from_vec(data(n), &[n]).unwrap();
            let bits: Vec<u32> = [1, 2, 3, 8]
                .iter()
                .map(|&t| {
                    scope(true, false, || {
                        with_num_threads(t, || x.sum().unwrap().item::<f32>().unwrap())
                    })
                    .to_bits()
                })
                .collect();
            assert!(bits.iter().all(|&b| b == bits[0]), "n = {n}: {bits:?}");
        }
    }

    #[test]
    fn sums_are_close_to_the_f64_reference() {
        let v = data(70_001);
        let exact: f64 = v.iter().map(|&x| x as f64).sum();
        let x = Tensor::from_vec(v, &[70_001]).unwrap();
        for det in [false, true] {
            let s = scope(det, false, || x.sum().unwrap().item::<f32>().unwrap());
            assert!((s as f64 - exact).abs() < 1e-3, "det={det}: {s} vs {exact}");
        }
    }

    #[test]
    fn sum_dim_matches_reference_and_threads() {
        let x = Tensor::from_vec(data(3 * 50 * 7), &[3, 50, 7]).unwrap();
        let v = x.to_vec::<f32>().unwrap();
        for dim in [0isize, 1, 2, -1] {
            let r = with_num_threads(1, || x.sum_dim(dim, false).unwrap());
            for t in [2, 3, 8] {
                let o = with_num_threads(t, || x.sum_dim(dim, false).unwrap());
                assert_eq!(r.to_vec::<f32>().unwrap(), o.to_vec::<f32>().unwrap());
            }
            let d = if dim < 0 { 2 } else { dim as usize };
            let shape = [3usize, 50, 7];
            let got = r.to_vec::<f32>().unwrap();
            // Reference: f64 sums over the reduced axis.
            let mut idx = 0;
            for a in 0..(if d == 0 { 1 } else { 3 }) {
                for b in 0..(if d == 1 { 1 } else { 50 }) {
                    for c in 0..(if d == 2 { 1 } else { 7 }) {
                        let mut s = 0f64;
                        for k in 0..shape[d] {
                            let (i, j, l) = match d {
                                0 => (k, b, c),
                                1 => (a, k, c),
                                _ => (a, b, k),
                            };
                            s += v[(i * 50 + j) * 7 + l] as f64;
                        }
                        assert!((got[idx] as f64 - s).abs() < 1e-4);
                        idx += 1;
                    }
                }
            }
        }
        assert!(x.sum_dim(3, false).is_err());
    }
}
