//! Causal attention over a key/value cache, batch-invariant: each query row's floating-point
//! order depends on its own position and the head size only.
//!
//! Query `i` of a call sits at position `start + i` and attends to keys `0..=start + i`. For
//! that row, in this order: each score is one dot product over the head dimension (eight
//! running lane sums over the dimension in steps of eight, added pairwise `((0+1)+(2+3))+
//! ((4+5)+(6+7))`, then the tail in order) times `scale`; the maximum is taken over keys in
//! order; the weights `exp(s − max)` are summed over keys in order; the output is
//! `Σ_j w_j·v_j` over keys in order, then divided by the sum. Nothing of that depends on the
//! batch size, the other rows, the number of queries in the call or the number of threads, so
//! a full pass (all positions at once, `start = 0`) and cached steps (one query at a time,
//! `start = t`, the cache holding keys `0..=t`) give the same bits for the same position.

use crate::dtype::{DType, Element, Float};
use crate::error::Result;
use crate::op::{Guarantee, Impl, Op};
use crate::{Tensor, invalid};

/// `causal_attention`: one implementation, one row at a time in a fixed order.
pub static CAUSAL_ATTENTION: Op<()> = Op {
    name: "causal_attention",
    impls: &[Impl {
        algo: "causal_attention.rowwise",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![CAUSAL_ATTENTION.info()]
}

/// Query rows per parallel piece (a constant: a row's result never depends on its piece).
const ROWS_PER_PIECE: usize = 16;

/// What the kernel needs beyond [`Float`]: `exp` (the standard library's) and a NaN-propagating
/// `max`.
trait AttnFloat: Float {
    fn exp(self) -> Self;
    fn max(self, o: Self) -> Self;
}

impl AttnFloat for f32 {
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn max(self, o: Self) -> Self {
        // NaN propagates, as PyTorch's softmax of a NaN score.
        if self.is_nan() || o > self { o } else { self }
    }
}

impl AttnFloat for f64 {
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn max(self, o: Self) -> Self {
        if self.is_nan() || o > self { o } else { self }
    }
}

/// The dot product of `a` and `b` (equal lengths) in the module's fixed order.
#[inline]
fn dot<T: AttnFloat>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::ZERO; 8];
    let (ca, ta) = a.split_at(a.len() / 8 * 8);
    let (cb, tb) = b.split_at(ca.len());
    for (x, y) in ca.chunks_exact(8).zip(cb.chunks_exact(8)) {
        for ((a, &xl), &yl) in acc.iter_mut().zip(x).zip(y) {
            *a = *a + xl * yl;
        }
    }
    let mut s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (x, y) in ta.iter().zip(tb) {
        s = s + *x * *y;
    }
    s
}

impl Tensor {
    /// Causal attention of the queries `self` (`[B, H, Tq, D]`) over the keys `k` and values
    /// `v` (`[B, H, Tk, D]`, e.g. a key/value cache): query `i` is at position `start + i` and
    /// attends to keys `0..=start + i`, with weights `softmax(q·kᵀ·scale)`; the output is
    /// `[B, H, Tq, D]`, dense. Equal to `scaled_dot_product_attention(q, k, v, is_causal)` to
    /// rounding (for `start = 0`, `Tq = Tk`), and batch-invariant: a row's bits depend on its
    /// own values, position and `D` only — never on `B`, `H`, `Tq`, the other rows, how much
    /// of the cache lies beyond its position, or the number of threads (see the module
    /// documentation for the order).
    ///
    /// # Errors
    /// Shapes that are not 4-D or do not agree, `start + Tq > Tk`, dtypes other than one float
    /// type (`F32`, `F64`) for all three, an output that cannot be allocated.
    pub fn causal_attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        start: usize,
        scale: f64,
    ) -> Result<Tensor> {
        let op = "causal_attention";
        let (qs, ks, vs) = (self.shape(), k.shape(), v.shape());
        if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
            return Err(invalid(
                op,
                "query",
                format!("q, k, v must be 4-D [B, H, T, D]; got {qs:?}, {ks:?}, {vs:?}"),
            ));
        }
        if ks != vs || qs[0] != ks[0] || qs[1] != ks[1] || qs[3] != ks[3] {
            return Err(invalid(
                op,
                "key",
                format!("shapes do not agree: q {qs:?}, k {ks:?}, v {vs:?}"),
            ));
        }
        if start.checked_add(qs[2]).is_none_or(|e| e > ks[2]) {
            return Err(invalid(
                op,
                "start",
                format!(
                    "queries at positions {start}..{} need that many keys; k has {}",
                    start.saturating_add(qs[2]),
                    ks[2]
                ),
            ));
        }
        let dt = self.dtype();
        if !matches!(dt, DType::F32 | DType::F64) || k.dtype() != dt || v.dtype() != dt {
            return Err(invalid(
                op,
                "query",
                format!(
                    "q, k, v must share one float dtype; got {:?}, {:?}, {:?}",
                    dt,
                    k.dtype(),
                    v.dtype()
                ),
            ));
        }
        CAUSAL_ATTENTION.run(&[self, k, v], |_, par| match dt {
            DType::F32 => rows::<f32>(self, k, v, start, scale as f32, par),
            _ => rows::<f64>(self, k, v, start, scale, par),
        })
    }
}

/// A contiguous tensor's elements.
fn data<T: Element>(t: &Tensor) -> &[T] {
    let sl = T::slice(t.storage()).expect("dtype checked");
    &sl[t.layout().offset()..]
}

fn rows<T: AttnFloat>(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    start: usize,
    scale: T,
    par: &crate::threads::Par,
) -> Result<Tensor> {
    let (q, k, v) = (
        q.try_contiguous()?,
        k.try_contiguous()?,
        v.try_contiguous()?,
    );
    let s = q.shape().to_vec();
    let (tq, d, tk) = (s[2], s[3], k.shape()[2]);
    let total = s[0]
        .saturating_mul(s[1])
        .saturating_mul(tq)
        .saturating_mul(d);
    let mut out = crate::try_filled_vec("causal_attention", total, T::ZERO)?;
    let (qd, kd, vd) = (data::<T>(&q), data::<T>(&k), data::<T>(&v));
    let mut failed = false;
    if total > 0 {
        let bad = core::sync::atomic::AtomicBool::new(false);
        par.for_each_chunk_mut(&mut out, ROWS_PER_PIECE * d, |c, o| {
            let mut w: Vec<T> = Vec::new();
            if w.try_reserve_exact(start + tq).is_err() {
                bad.store(true, core::sync::atomic::Ordering::Relaxed);
                return;
            }
            for (j, orow) in o.chunks_mut(d).enumerate() {
                let r = c * ROWS_PER_PIECE + j;
                let (bh, i) = (r / tq, r % tq);
                let qrow = &qd[r * d..(r + 1) * d];
                let kv0 = bh * tk * d;
                let n = start + i + 1;
                w.clear();
                let mut m = T::from_f64(f64::NEG_INFINITY);
                for t in 0..n {
                    let sc = dot(qrow, &kd[kv0 + t * d..kv0 + (t + 1) * d]) * scale;
                    m = m.max(sc);
                    w.push(sc);
                }
                let mut sum = T::ZERO;
                for x in w.iter_mut() {
                    *x = x.sub(m).exp();
                    sum = sum + *x;
                }
                orow.fill(T::ZERO);
                for (t, &wt) in w.iter().enumerate() {
                    let vrow = &vd[kv0 + t * d..kv0 + (t + 1) * d];
                    for (o, &x) in orow.iter_mut().zip(vrow) {
                        *o = *o + wt * x;
                    }
                }
                for o in orow.iter_mut() {
                    *o = o.div(sum);
                }
            }
        });
        failed = bad.into_inner();
    }
    if failed {
        return Err(crate::Error::OutOfMemory {
            op: "causal_attention",
            bytes: (start + tq) as u128 * core::mem::size_of::<T>() as u128,
        });
    }
    Tensor::from_vec(out, &s)
}
