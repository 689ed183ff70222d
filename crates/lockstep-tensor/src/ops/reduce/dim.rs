//! Reductions along a dimension and over the whole tensor: mean, var/std, max/min/argmax,
//! with the line machinery (geometry, per-line kernels, the op signature) that softmax and
//! cumsum share.
//!
//! Every kernel below is thread-invariant by construction: each output element is computed by
//! one task from its own line of inputs, in an order fixed by the line's length (lanes, then the
//! fixed tree of [`sum_lanes`], and [`CHUNK`]-sized pieces combined by [`tree_sum`] for long
//! lines). Threads only decide *which* lines run where, never how a line is combined, so each op
//! registers a single `ThreadInvariant` implementation (a completion-order variant would not be
//! faster: the lines are already independent).
//!

use super::buf::dense;
use super::lanes::{CHUNK, LANES, fold_lanes, tree_sum};
use super::real::Real;
use super::sum::{SERIAL_MAX, sum_det, sum_dim_kernel};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::resolve_dim;
use crate::op::{Guarantee, Impl, Op};
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;

/// `[outer, n, inner]`: the tensor seen around dimension `d`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geom {
    pub(super) outer: usize,
    pub(super) n: usize,
    pub(super) inner: usize,
}

pub(super) fn geom(shape: &[usize], d: usize) -> Geom {
    Geom {
        outer: shape[..d].iter().product(),
        n: shape[d],
        inner: shape[d + 1..].iter().product(),
    }
}

fn reduced_shape(shape: &[usize], d: usize, keepdim: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    if keepdim {
        s[d] = 1;
    } else {
        s.remove(d);
    }
    s
}

/// One value per line (`outer * inner` lines of length `n`); lines run in parallel, each line
/// with `f` on a contiguous copy (`inner > 1`) or on the data itself (`inner == 1`).
pub(super) fn reduce_lines<T: Real, R: Send + Copy + Default>(
    x: &[T],
    g: Geom,
    par: &Par,
    f: impl Fn(&[T]) -> R + Sync + Send,
) -> Vec<R> {
    let lines = g.outer * g.inner;
    let mut out = vec![R::default(); lines];
    let Geom { n, inner, .. } = g;
    // Small inputs in one chunk (the caller alone); else on the team, with no hop into rayon's
    // pool. Each line's value is computed alone either way.
    let serial = par.threads() == 1 || x.len() <= SERIAL_MAX;
    let per = |k: usize| if serial { lines.max(1) } else { k };
    if inner == 1 {
        let per = per(64);
        par.for_each_chunk_mut(&mut out, per, |c, d| {
            for (j, d) in d.iter_mut().enumerate() {
                let o = c * per + j;
                *d = f(&x[o * n..(o + 1) * n]);
            }
        });
    } else {
        let per = per(16);
        par.for_each_chunk_mut(&mut out, per, |c, d| {
            let mut tmp = Vec::with_capacity(n);
            for (j, d) in d.iter_mut().enumerate() {
                let l = c * per + j;
                let (o, i) = (l / inner, l % inner);
                let base = o * n * inner + i;
                tmp.clear();
                tmp.extend((0..n).map(|k| x[base + k * inner]));
                *d = f(&tmp);
            }
        });
    }
    out
}

/// Fixed-order sum of a line: [`sum_lanes`] for short lines, [`CHUNK`]-sized pieces combined
/// by [`tree_sum`] for long ones (the same bits as [`sum_det`] at any thread count).
fn line_sum<T: Real>(x: &[T], par: &Par) -> T {
    sum_det(x, par)
}

/// `Σ (x - mean)²` in the same fixed order as [`line_sum`].
fn line_sq_dev<T: Real>(x: &[T], mean: T, par: &Par) -> T {
    fn lanes<T: Real>(x: &[T], mean: T) -> T {
        let mut acc = fold_lanes(x, T::default(), |a, v| {
            let d = v - mean;
            a + d * d
        });
        tree_sum(&mut acc)
    }
    if x.len() <= CHUNK {
        return lanes(x, mean);
    }
    let mut p: Vec<T> = par.install(|| x.par_chunks(CHUNK).map(|c| lanes(c, mean)).collect());
    tree_sum(&mut p)
}

/// Variance of a line with `correction`, and its square root when `sqrt` (two passes: the
/// fixed-order mean, then the fixed-order sum of squared deviations). Both passes accumulate in
/// `f64` for every input type, as PyTorch accumulates `float` variance in `double`; an `f32`
/// result is rounded once, after the division (and the square root).
fn line_var<T: Real>(x: &[T], correction: f64, sqrt: bool, par: &Par) -> T {
    let n = x.len();
    if n == 0 {
        return T::NAN;
    }
    let den = (n as f64 - correction).max(0.0);
    let v = if T::DTYPE == DType::F64 {
        // `f64` input: the accumulation type already (the same additions as below).
        let mean = line_sum(x, par) / T::from_f64(n as f64);
        (line_sq_dev(x, mean, par) / T::from_f64(den)).to_f64()
    } else {
        let mean = line_sum_f64(x, par) / n as f64;
        line_sq_dev_f64(x, mean, par) / den
    };
    T::from_f64(if sqrt { v.sqrt() } else { v })
}

/// `Σ f(x)` in `f64`, in the order of [`sum_lanes`]: element `i` to lane `i mod LANES`, the
/// lanes folded by [`tree_sum`].
#[inline]
fn lanes_f64<T: Real>(x: &[T], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0f64; LANES];
    let mut c = x.chunks_exact(LANES);
    for c in &mut c {
        for l in 0..LANES {
            acc[l] += f(c[l].to_f64());
        }
    }
    for (l, &v) in c.remainder().iter().enumerate() {
        acc[l] += f(v.to_f64());
    }
    tree_sum(&mut acc)
}

/// [`lanes_f64`] over the [`CHUNK`]-element pieces of `x`, the pieces combined by
/// [`tree_sum`]: the order of [`sum_det`] (thread-invariant).
fn pieces_f64<T: Real>(x: &[T], par: &Par, f: impl Fn(f64) -> f64 + Sync) -> f64 {
    if x.len() <= CHUNK {
        return lanes_f64(x, f);
    }
    let mut p: Vec<f64> = if par.threads() == 1 {
        x.chunks(CHUNK).map(|c| lanes_f64(c, &f)).collect()
    } else {
        par.install(|| x.par_chunks(CHUNK).map(|c| lanes_f64(c, &f)).collect())
    };
    tree_sum(&mut p)
}

/// The fixed-order sum of a line, accumulated in `f64`.
fn line_sum_f64<T: Real>(x: &[T], par: &Par) -> f64 {
    pieces_f64(x, par, |v| v)
}

/// `Σ (x - mean)²` in `f64`, in the order of [`line_sum_f64`].
fn line_sq_dev_f64<T: Real>(x: &[T], mean: f64, par: &Par) -> f64 {
    pieces_f64(x, par, |v| {
        let d = v - mean;
        d * d
    })
}

/// `(value, index)` of the maximum (`greater = true`) or minimum: the first index on ties, the
/// first NaN if there is one (as PyTorch).
fn extreme_seq<T: Real>(x: &[T], offset: usize, greater: bool) -> (T, usize) {
    let mut best = x[0];
    let mut bi = 0;
    if best.is_nan() {
        return (best, offset);
    }
    for (k, &v) in x.iter().enumerate().skip(1) {
        if v.is_nan() {
            return (v, offset + k);
        }
        if (greater && v > best) || (!greater && v < best) {
            best = v;
            bi = k;
        }
    }
    (best, offset + bi)
}

fn line_extreme<T: Real>(x: &[T], greater: bool, par: &Par) -> (T, usize) {
    if x.len() <= CHUNK {
        return extreme_seq(x, 0, greater);
    }
    let parts: Vec<(T, usize)> = par.install(|| {
        x.par_chunks(CHUNK)
            .enumerate()
            .map(|(c, s)| extreme_seq(s, c * CHUNK, greater))
            .collect()
    });
    // Combined in index order: NaN first wins, else strictly better wins (first on ties).
    let mut best = parts[0];
    for &p in &parts[1..] {
        if best.0.is_nan() {
            break;
        }
        if p.0.is_nan() || (greater && p.0 > best.0) || (!greater && p.0 < best.0) {
            best = p;
        }
    }
    best
}

/// Arguments of the dimension reductions (one signature for all of them).
#[derive(Clone, Copy, Debug)]
pub struct RedArgs {
    /// The dimension (already resolved), or `None` for the whole tensor.
    pub dim: Option<usize>,
    /// Keep the reduced dimension with size 1.
    pub keepdim: bool,
    /// Bessel's correction for `var`/`std`.
    pub correction: f64,
}

/// Kernel signature of the reductions below: one or two outputs (values, indices).
pub type RedFn = fn(&Tensor, &RedArgs, &Par) -> Result<Vec<Tensor>>;

pub(super) fn float_only(op: &'static str, x: &Tensor) -> Result<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            expected: DType::F32,
            got: x.dtype(),
        })
    }
}

/// Runs `$body` with `$T` = `f32` or `f64` for a float tensor, else a dtype error.
macro_rules! with_float {
    ($op:expr, $x:expr, $T:ident => $body:expr) => {
        match $x.dtype() {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
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
pub(super) use with_float;

/// The `[outer, n, inner]` geometry and the output shape of a reduction.
pub(super) fn red_geom(x: &Tensor, a: &RedArgs) -> (Geom, Vec<usize>) {
    match a.dim {
        Some(d) => (geom(x.shape(), d), reduced_shape(x.shape(), d, a.keepdim)),
        None => (
            Geom {
                outer: 1,
                n: x.numel(),
                inner: 1,
            },
            if a.keepdim { vec![1; x.ndim()] } else { vec![] },
        ),
    }
}

fn mean_kernel(x: &Tensor, a: &RedArgs, par: &Par) -> Result<Vec<Tensor>> {
    let (g, shape) = red_geom(x, a);
    let xc = x.contiguous_for("mean")?;
    with_float!("mean", x, T => {
        let d = dense::<T>(&xc)?;
        let nn = T::from_f64(g.n as f64);
        // The sums of `sum_dim` (same order, same bits), divided by the count.
        let mut v = sum_dim_kernel(d, g.outer, g.n, g.inner, par)?;
        for s in v.iter_mut() {
            *s /= nn;
        }
        Ok(vec![Tensor::from_vec(v, &shape)?])
    })
}

fn var_kernel(x: &Tensor, a: &RedArgs, par: &Par, sqrt: bool) -> Result<Vec<Tensor>> {
    let (g, shape) = red_geom(x, a);
    let xc = x.contiguous_for(if sqrt { "std" } else { "var" })?;
    let c = a.correction;
    with_float!(if sqrt { "std" } else { "var" }, x, T => {
        let d = dense::<T>(&xc)?;
        let v = reduce_lines(d, g, par, |l| line_var(l, c, sqrt, par));
        Ok(vec![Tensor::from_vec(v, &shape)?])
    })
}

fn extreme_kernel(
    op: &'static str,
    x: &Tensor,
    a: &RedArgs,
    par: &Par,
    greater: bool,
) -> Result<Vec<Tensor>> {
    let (g, shape) = red_geom(x, a);
    if g.n == 0 {
        return Err(invalid(
            op,
            "self",
            "cannot reduce over a zero-size dimension (the operation has no identity)",
        ));
    }
    let xc = x.contiguous_for(op)?;
    with_float!(op, x, T => {
        let d = dense::<T>(&xc)?;
        let v: Vec<(T, usize)> = reduce_lines(d, g, par, |l| line_extreme(l, greater, par));
        let vals: Vec<T> = v.iter().map(|p| p.0).collect();
        let idx: Vec<i64> = v.iter().map(|p| p.1 as i64).collect();
        Ok(vec![Tensor::from_vec(vals, &shape)?, Tensor::from_vec(idx, &shape)?])
    })
}

macro_rules! det_op {
    ($(#[$m:meta])* $name:ident, $op:literal, $algo:literal, $f:expr) => {
        $(#[$m])*
        pub static $name: Op<RedFn> = Op {
            name: $op,
            impls: &[Impl {
                algo: $algo,
                guarantee: Guarantee::ThreadInvariant,
                f: $f,
            }],
        };
    };
}
pub(super) use det_op;

det_op!(
    /// `torch.mean(x, dim)`: fixed-order sums divided by the count.
    MEAN_DIM, "mean", "mean.fixed_tree", mean_kernel
);
det_op!(
    /// `torch.var`: two passes (fixed-order mean, fixed-order squared deviations).
    VAR, "var", "var.two_pass_fixed_tree", |x, a, p| var_kernel(x, a, p, false)
);
det_op!(
    /// `torch.std`: the square root of [`VAR`]'s kernel.
    STD, "std", "std.two_pass_fixed_tree", |x, a, p| var_kernel(x, a, p, true)
);
det_op!(
    /// `torch.max(x, dim)` / `torch.argmax`: first index on ties, NaN propagates.
    MAX, "max", "max.first_index", |x, a, p| extreme_kernel("max", x, a, p, true)
);
det_op!(
    /// `torch.min(x, dim)` / `torch.argmin`: first index on ties, NaN propagates.
    MIN, "min", "min.first_index", |x, a, p| extreme_kernel("min", x, a, p, false)
);

pub(super) fn run_red(op: &'static Op<RedFn>, x: &Tensor, a: RedArgs) -> Result<Vec<Tensor>> {
    // Traced: the first output (the values, before any indices).
    op.run(&[x], |imp, par| (imp.f)(x, &a, par))
}

pub(super) fn dim_args(
    op: &'static str,
    x: &Tensor,
    dim: isize,
    keepdim: bool,
    correction: f64,
) -> Result<RedArgs> {
    // A 0-d tensor accepts dim 0 / -1 as PyTorch does.
    let nd = x.ndim().max(1);
    let d = resolve_dim(op, dim, nd)?;
    Ok(RedArgs {
        dim: if x.ndim() == 0 { None } else { Some(d) },
        keepdim,
        correction,
    })
}

fn whole(keepdim: bool, correction: f64) -> RedArgs {
    RedArgs {
        dim: None,
        keepdim,
        correction,
    }
}

pub(super) fn one(mut v: Vec<Tensor>) -> Tensor {
    v.swap_remove(0)
}

fn two(mut v: Vec<Tensor>) -> (Tensor, Tensor) {
    let i = v.pop().expect("two outputs");
    let x = v.pop().expect("two outputs");
    (x, i)
}

impl Tensor {
    /// `torch.mean(x, dim, keepdim)` (floats only; an empty dimension gives NaN as in PyTorch).
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn mean_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor> {
        let a = dim_args("mean", self, dim, keepdim, 0.0)?;
        float_only("mean", self)?;
        run_red(&MEAN_DIM, self, a).map(one)
    }

    /// `torch.var(x, correction=correction)` over all elements.
    ///
    /// # Errors
    /// If the dtype is not a float.
    pub fn var(&self, correction: f64) -> Result<Tensor> {
        float_only("var", self)?;
        run_red(&VAR, self, whole(false, correction)).map(one)
    }

    /// `torch.var(x, dim, correction=correction, keepdim=keepdim)`.
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn var_dim(&self, dim: isize, correction: f64, keepdim: bool) -> Result<Tensor> {
        let a = dim_args("var", self, dim, keepdim, correction)?;
        float_only("var", self)?;
        run_red(&VAR, self, a).map(one)
    }

    /// `torch.std(x, correction=correction)` over all elements.
    ///
    /// # Errors
    /// If the dtype is not a float.
    pub fn std(&self, correction: f64) -> Result<Tensor> {
        float_only("std", self)?;
        run_red(&STD, self, whole(false, correction)).map(one)
    }

    /// `torch.std(x, dim, correction=correction, keepdim=keepdim)`.
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn std_dim(&self, dim: isize, correction: f64, keepdim: bool) -> Result<Tensor> {
        let a = dim_args("std", self, dim, keepdim, correction)?;
        float_only("std", self)?;
        run_red(&STD, self, a).map(one)
    }

    /// `torch.max(x)`: the largest element (NaN if any element is NaN).
    ///
    /// # Errors
    /// If the tensor is empty or not a float tensor.
    pub fn max(&self) -> Result<Tensor> {
        run_red(&MAX, self, whole(false, 0.0)).map(one)
    }

    /// `torch.min(x)`: the smallest element (NaN if any element is NaN).
    ///
    /// # Errors
    /// If the tensor is empty or not a float tensor.
    pub fn min(&self) -> Result<Tensor> {
        run_red(&MIN, self, whole(false, 0.0)).map(one)
    }

    /// `torch.max(x, dim, keepdim)`: `(values, indices)`, the first index on ties, the first NaN
    /// if a line has one.
    ///
    /// # Errors
    /// If `dim` is out of range, the dimension is empty, or the dtype is not a float.
    pub fn max_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let a = dim_args("max", self, dim, keepdim, 0.0)?;
        run_red(&MAX, self, a).map(two)
    }

    /// `torch.min(x, dim, keepdim)`: `(values, indices)` (see [`max_dim`](Self::max_dim)).
    ///
    /// # Errors
    /// If `dim` is out of range, the dimension is empty, or the dtype is not a float.
    pub fn min_dim(&self, dim: isize, keepdim: bool) -> Result<(Tensor, Tensor)> {
        let a = dim_args("min", self, dim, keepdim, 0.0)?;
        run_red(&MIN, self, a).map(two)
    }

    /// `torch.argmax(x, dim, keepdim)`; `dim = None` indexes the flattened tensor.
    ///
    /// # Errors
    /// If `dim` is out of range, the reduced size is zero, or the dtype is not a float.
    pub fn argmax(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let a = match dim {
            Some(d) => dim_args("argmax", self, d, keepdim, 0.0)?,
            None => whole(keepdim, 0.0),
        };
        run_red(&MAX, self, a).map(|v| two(v).1)
    }

    /// `torch.argmin(x, dim, keepdim)`; `dim = None` indexes the flattened tensor.
    ///
    /// # Errors
    /// If `dim` is out of range, the reduced size is zero, or the dtype is not a float.
    pub fn argmin(&self, dim: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let a = match dim {
            Some(d) => dim_args("argmin", self, d, keepdim, 0.0)?,
            None => whole(keepdim, 0.0),
        };
        run_red(&MIN, self, a).map(|v| two(v).1)
    }
}
