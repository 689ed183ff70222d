//! `causal_softmax`: attention's scaling, causal mask and softmax in one pass over the scores,
//! and its backward in one pass — the bits of the unfused ops
//! `softmax(masked_fill(x · scale, j > i, −∞), −1)` and of their three backwards, without the
//! intermediate tensors (a gpt step made five passes over each layer's scores for this).
//!
//! Row `i` of every `[R, C]` matrix keeps columns `j ≤ i`. Forward, per row: the kept scores
//! times `scale` (converted to the dtype first, as `mul_scalar`), −∞ elsewhere, then the
//! softmax line kernel of [`super::SOFTMAX`]. Backward, per row: `s = Σ_j g_j·y_j` in the order
//! of `sum_dim` (every column, as the unfused `sum_dim(g·y)`), then `(y_j·(g_j − s))·scale`
//! for the kept columns and `0·scale` for the masked ones (what `masked_fill(…, 0)` then
//! `mul_scalar` give). Each row depends on its own values only: the same bits at any thread
//! count and on every instruction-set path.

use super::buf::dense;
use super::real::Real;
use super::softmax::softmax_line;
use super::sum::sum_det;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::math::lanes::OutSlice;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::matmul::Isa;
use crate::threads::Par;
use crate::{Tensor, invalid};
use core::sync::atomic::{AtomicBool, Ordering};

/// `causal_softmax`: one implementation, row by row in a fixed order.
pub static CAUSAL_SOFTMAX: Op<()> = Op {
    name: "causal_softmax",
    impls: &[Impl {
        algo: "causal_softmax.fixed_lanes",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// `causal_softmax_backward`: one implementation, row by row in a fixed order.
pub static CAUSAL_SOFTMAX_BACKWARD: Op<()> = Op {
    name: "causal_softmax_backward",
    impls: &[Impl {
        algo: "causal_softmax_backward.fixed_lanes",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// Rows per parallel piece (a constant; a row's result never depends on its piece).
const ROWS_PER_PIECE: usize = 64;

/// `[R, C]` of a float tensor with at least two dimensions.
fn rows_cols(op: &'static str, arg: &'static str, x: &Tensor) -> Result<(usize, usize)> {
    if x.ndim() < 2 {
        return Err(invalid(
            op,
            arg,
            format!(
                "needs at least 2 dimensions [..., R, C]; got {:?}",
                x.shape()
            ),
        ));
    }
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(Error::DType {
            op,
            expected: DType::F32,
            got: x.dtype(),
        });
    }
    let s = x.shape();
    Ok((s[s.len() - 2], s[s.len() - 1]))
}

/// Runs `row(index, scratch, out_row)` for every row of `out` (`c` columns) in pieces of
/// [`ROWS_PER_PIECE`] rows, each piece with a scratch line of `c` elements allocated fallibly.
fn each_row<T: Real, O: Send>(
    op: &'static str,
    out: &mut [O],
    c: usize,
    par: &Par,
    row: impl Fn(usize, &mut [T], &mut [O]) + Sync,
) -> Result<()> {
    if out.is_empty() || c == 0 {
        return Ok(());
    }
    let failed = AtomicBool::new(false);
    par.for_each_chunk_mut(out, ROWS_PER_PIECE * c, |p, o| {
        let Ok(mut buf) = crate::try_filled_vec(op, c, T::default()) else {
            failed.store(true, Ordering::Relaxed);
            return;
        };
        for (k, orow) in o.chunks_mut(c).enumerate() {
            row(p * ROWS_PER_PIECE + k, &mut buf, orow);
        }
    });
    if failed.into_inner() {
        return Err(Error::OutOfMemory {
            op,
            bytes: c as u128 * core::mem::size_of::<T>() as u128,
        });
    }
    Ok(())
}

fn forward<T: Real>(x: &[T], r: usize, c: usize, scale: T, par: &Par) -> Result<Vec<T>> {
    // Each row is zeroed by the thread that then computes it (the line kernel takes an
    // initialised output), not all up front on the caller.
    let mut out = crate::tensor::try_with_capacity::<T>("causal_softmax", x.len())?;
    let isa = Isa::best();
    each_row(
        "causal_softmax",
        &mut out.spare_capacity_mut()[..x.len()],
        c,
        par,
        |row, buf, orow| {
            let keep = (row % r + 1).min(c);
            forward_row(
                &x[row * c..(row + 1) * c],
                keep,
                scale,
                buf,
                init_zero(orow),
                isa,
            );
        },
    )?;
    // SAFETY: `each_row` ran every row, and each row was zeroed and then written.
    unsafe { out.set_len(x.len()) };
    Ok(out)
}

/// One row of [`Tensor::causal_softmax`]: `out` (zeroed, `x.len()` long) becomes the softmax
/// of `x[..keep] · scale` with `−∞` in the other columns; `buf` is scratch of the same length.
/// The one definition of a row's bits, shared with the fused attention of
/// [`crate::ops::self_attention`].
#[inline]
pub(crate) fn forward_row<T: Real>(
    x: &[T],
    keep: usize,
    scale: T,
    buf: &mut [T],
    out: &mut [T],
    isa: Isa,
) {
    for (b, &v) in buf[..keep].iter_mut().zip(&x[..keep]) {
        *b = v * scale;
    }
    buf[keep..].fill(T::NEG_INFINITY);
    softmax_line(buf, out, false, isa, false);
}

/// One row of [`Tensor::causal_softmax_backward`] from the output gradient `g` and the
/// output `y` (one row each): `out[j]` for every column (`out.len() ≥ g.len()`),
/// `(y_j·(g_j − s))·scale` for `j < keep` and `0·scale` after, `s = Σ_j g_j·y_j` over every
/// column in `sum_dim`'s order (returned); `buf` is scratch of the row's length. Shared with
/// the fused attention. A slice, not a callback, so that the loops are vectorised.
#[inline]
pub(crate) fn backward_row<T: Real, D: OutSlice<T> + ?Sized>(
    g: &[T],
    y: &[T],
    keep: usize,
    scale: T,
    buf: &mut [T],
    serial: &Par,
    out: &mut D,
) -> T {
    for ((b, &gv), &yv) in buf.iter_mut().zip(g).zip(y) {
        *b = gv * yv;
    }
    // `sum_det` is thread-invariant: the bits of `sum_dim` on any team.
    let s = sum_det(buf, serial);
    // SAFETY: only values are written below.
    let out = &mut unsafe { out.cells() }[..g.len()];
    let (kept, masked) = out.split_at_mut(keep);
    for ((o, &gv), &yv) in kept.iter_mut().zip(&g[..keep]).zip(y) {
        o.write((yv * (gv - s)) * scale);
    }
    let zero = T::default() * scale;
    for o in masked {
        o.write(zero);
    }
    s
}

/// `row` with every element `T::default()`, as initialised elements.
fn init_zero<T: Real>(row: &mut [core::mem::MaybeUninit<T>]) -> &mut [T] {
    for v in row.iter_mut() {
        v.write(T::default());
    }
    // SAFETY: every element was written just above; `MaybeUninit<T>` has `T`'s layout.
    unsafe { &mut *(row as *mut [core::mem::MaybeUninit<T>] as *mut [T]) }
}

fn backward<T: Real>(g: &[T], y: &[T], r: usize, c: usize, scale: T, par: &Par) -> Result<Vec<T>> {
    // Every element is written below (the kept columns, then the masked ones): no fill first.
    let mut out = crate::tensor::try_with_capacity::<T>("causal_softmax_backward", g.len())?;
    let serial = Par::new(1);
    each_row(
        "causal_softmax_backward",
        &mut out.spare_capacity_mut()[..g.len()],
        c,
        par,
        |row, buf, orow| {
            let keep = (row % r + 1).min(c);
            let (gr, yr) = (&g[row * c..(row + 1) * c], &y[row * c..(row + 1) * c]);
            backward_row(gr, yr, keep, scale, buf, &serial, orow);
        },
    )?;
    // SAFETY: each row wrote all `c` of its elements (`keep ≤ c` kept, the rest masked), and
    // the rows cover the output; an error returned above before this line.
    unsafe { out.set_len(g.len()) };
    Ok(out)
}

impl Tensor {
    /// Attention weights from raw scores `self` (`[..., R, C]`, a float dtype):
    /// `softmax(masked_fill(self · scale, mask, −∞), −1)` where `mask` is true above the
    /// diagonal (column `j > i` of row `i`), computed in one pass with exactly the bits of
    /// those three ops (`scale` is converted to the dtype first, as `mul_scalar`). The output
    /// is dense, with the masked entries 0; the same bits at any thread count.
    ///
    /// # Errors
    /// Fewer than 2 dimensions, a non-float dtype, an output that cannot be allocated.
    pub fn causal_softmax(&self, scale: f64) -> Result<Tensor> {
        let op = "causal_softmax";
        let (r, c) = rows_cols(op, "input", self)?;
        let x = self.try_contiguous()?;
        CAUSAL_SOFTMAX.run(&[self], |_, par| match x.dtype() {
            DType::F32 => {
                let v = forward(dense::<f32>(&x)?, r, c, scale as f32, par)?;
                Tensor::from_vec(v, x.shape())
            }
            _ => {
                let v = forward(dense::<f64>(&x)?, r, c, scale, par)?;
                Tensor::from_vec(v, x.shape())
            }
        })
    }

    /// The gradient of [`causal_softmax`](Self::causal_softmax)'s input, given the gradient
    /// of its output `self` and its output `y` (same shape): for the kept entries
    /// `(y · (g − Σ_row g·y)) · scale`, for the masked ones `0 · scale` — the bits of the
    /// unfused backwards (softmax's, `masked_fill`'s, `mul_scalar`'s) chained, the row sums in
    /// `sum_dim`'s order. The same bits at any thread count.
    ///
    /// # Errors
    /// Shapes or dtypes that differ, fewer than 2 dimensions, a non-float dtype, an output
    /// that cannot be allocated.
    pub fn causal_softmax_backward(&self, y: &Tensor, scale: f64) -> Result<Tensor> {
        let op = "causal_softmax_backward";
        let (r, c) = rows_cols(op, "grad", self)?;
        if y.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.shape().to_vec(),
                rhs: y.shape().to_vec(),
            });
        }
        if y.dtype() != self.dtype() {
            return Err(Error::DType {
                op,
                expected: self.dtype(),
                got: y.dtype(),
            });
        }
        let (g, yc) = (self.try_contiguous()?, y.try_contiguous()?);
        CAUSAL_SOFTMAX_BACKWARD.run(&[self, y], |_, par| match g.dtype() {
            DType::F32 => {
                let (gd, yd) = (dense::<f32>(&g)?, dense::<f32>(&yc)?);
                Tensor::from_vec(backward(gd, yd, r, c, scale as f32, par)?, g.shape())
            }
            _ => {
                let (gd, yd) = (dense::<f64>(&g)?, dense::<f64>(&yc)?);
                Tensor::from_vec(backward(gd, yd, r, c, scale, par)?, g.shape())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;
    use crate::dtype::DType;

    /// Values with ties, signs and a few large magnitudes, from a fixed integer hash.
    fn vals(n: usize, salt: u64) -> Vec<f64> {
        (0..n as u64)
            .map(|i| {
                let h = (i.wrapping_add(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64;
                (h / (1u64 << 24) as f64 - 0.5) * if i % 11 == 0 { 40.0 } else { 6.0 }
            })
            .collect()
    }

    fn unfused_forward(x: &Tensor, scale: f64) -> Tensor {
        let s = x.shape();
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        let mask = Tensor::ones(&[r, c], DType::F32)
            .unwrap()
            .tril(0)
            .unwrap()
            .eq_scalar(0.0)
            .unwrap();
        x.mul_scalar(scale)
            .unwrap()
            .masked_fill(&mask, f64::NEG_INFINITY)
            .unwrap()
            .softmax(-1)
            .unwrap()
    }

    fn unfused_backward(g: &Tensor, y: &Tensor, scale: f64) -> Tensor {
        let s = g.shape();
        let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
        let mask = Tensor::ones(&[r, c], DType::F32)
            .unwrap()
            .tril(0)
            .unwrap()
            .eq_scalar(0.0)
            .unwrap();
        let sum = g.mul(y).unwrap().sum_dim(-1, true).unwrap();
        y.mul(&g.sub(&sum).unwrap())
            .unwrap()
            .masked_fill(&mask, 0.0)
            .unwrap()
            .mul_scalar(scale)
            .unwrap()
    }

    fn bits(t: &Tensor) -> Vec<u64> {
        t.to_dtype(DType::F64)
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    #[test]
    fn matches_the_unfused_ops_bit_for_bit() {
        // Square and non-square matrices, rows longer than one lane group and than a piece.
        for (shape, dt) in [
            (vec![2, 3, 5, 5], DType::F32),
            (vec![3, 64, 64], DType::F32),
            (vec![2, 7, 40], DType::F32),
            (vec![130, 17], DType::F64),
            (vec![2, 2, 33, 33], DType::F64),
        ] {
            let n: usize = shape.iter().product();
            let x = Tensor::from_vec(vals(n, 1), &shape).unwrap().to_dtype(dt);
            let g = Tensor::from_vec(vals(n, 2), &shape).unwrap().to_dtype(dt);
            for scale in [0.17677669529663687, -0.5] {
                let y = unfused_forward(&x, scale);
                let fused = x.causal_softmax(scale).unwrap();
                assert_eq!(bits(&fused), bits(&y), "forward {shape:?} {dt:?} {scale}");
                let want = unfused_backward(&g, &y, scale);
                for threads in [1, 2, 3, 8] {
                    let got = crate::threads::with_num_threads(threads, || {
                        g.causal_softmax_backward(&y, scale).unwrap()
                    });
                    assert_eq!(bits(&got), bits(&want), "backward {shape:?} {threads}");
                    let f = crate::threads::with_num_threads(threads, || {
                        x.causal_softmax(scale).unwrap()
                    });
                    assert_eq!(bits(&f), bits(&y), "forward {shape:?} {threads}");
                }
            }
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        let v = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        assert!(v.causal_softmax(1.0).is_err());
        let i = Tensor::from_vec(vec![1i64; 4], &[2, 2]).unwrap();
        assert!(i.causal_softmax(1.0).is_err());
        let a = Tensor::from_vec(vec![1.0f32; 4], &[2, 2]).unwrap();
        let b = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap();
        assert!(a.causal_softmax_backward(&b, 1.0).is_err());
        let d = a.to_dtype(DType::F64);
        assert!(a.causal_softmax_backward(&d, 1.0).is_err());
    }
}
