//! `torch.topk` with PyTorch's CPU order of ties.
//!
//! PyTorch documents no order for equal values. Its CPU kernel (`TopKImpl.h`, torch 2.x) fills
//! a queue of `(value, index)` pairs per slice and runs GNU libstdc++'s `std::partial_sort`
//! when `64·k ≤ n`, else `std::nth_element` then (if `sorted`) `std::sort` of the first `k − 1`,
//! with "NaN first, then larger" (or "smaller first, NaN last") as the only comparison. Which
//! of several equal values comes first is whatever those algorithms leave, so this file ports
//! them step for step (`stl`, below); the order then matches torch 2.15 on CPU (Linux, libstdc++),
//! checked against real torch on tie- and NaN-heavy inputs
//! (`tools/golden_transformer_prims.py`). Each slice is independent: thread-invariant.

use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::layout::resolve_dim;
use crate::op::{Guarantee, Impl, Op};
use crate::tensor::try_with_capacity;
use crate::{Tensor, invalid};
use core::sync::atomic::{AtomicBool, Ordering};

/// `torch.topk`: one implementation, PyTorch's CPU algorithm per slice.
pub static TOPK: Op<()> = Op {
    name: "topk",
    impls: &[Impl {
        algo: "topk.libstdcxx_select",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![TOPK.info()]
}

/// Slices per parallel piece: at least this many elements of input per piece (a constant; a
/// slice's result never depends on its piece).
const PIECE_ELEMS: usize = 1 << 14;

impl Tensor {
    /// `torch.topk(self, k, dim, largest, sorted)`: the `k` largest (or smallest) elements of
    /// each slice along `dim`, and their indices (`I64`) in that slice. NaN counts as larger
    /// than every number (first when `largest`, last otherwise). With `sorted`, values come in
    /// order; without, in the order PyTorch's CPU kernel leaves them. Equal values come in
    /// PyTorch's CPU order (see the module documentation). Both outputs are dense, of `self`'s
    /// shape with `dim` of size `k`. A 0-dim tensor counts as one element.
    ///
    /// # Errors
    /// `dim` out of range; `k` larger than the dimension; a `Bool` tensor (as PyTorch); the
    /// outputs cannot be allocated; dispatch refuses the op.
    pub fn topk(
        &self,
        k: usize,
        dim: isize,
        largest: bool,
        sorted: bool,
    ) -> Result<(Tensor, Tensor)> {
        if self.ndim() == 0 {
            let (v, i) = self.reshape(&[1])?.topk(k, dim, largest, sorted)?;
            let s: &[isize] = if k == 1 { &[] } else { &[0] };
            return Ok((v.reshape(s)?, i.reshape(s)?));
        }
        let d = resolve_dim("topk", dim, self.ndim())?;
        let n = self.shape()[d];
        if k > n {
            return Err(invalid(
                "topk",
                "k",
                format!("selected index k ({k}) out of range: dimension {d} has size {n}"),
            ));
        }
        if self.dtype() == DType::Bool {
            return Err(invalid("topk", "input", "topk is not implemented for Bool"));
        }
        let last = self.ndim() - 1;
        // The slices along `d`, read in place as rows of a view with `d` last.
        let xt = self.transpose(d as isize, last as isize)?;
        TOPK.run(&[self], |_, par| {
            let (v, i) =
                crate::with_dtype!(self.dtype(), T => select::<T>(&xt, k, largest, sorted, par))?;
            let back = |t: Tensor| t.transpose(d as isize, last as isize)?.try_contiguous();
            Ok((back(v)?, back(i)?))
        })
    }
}

/// Top-k of each row of `xt` (the slices along its last dimension), as dense tensors of
/// `xt`'s shape with the last dimension `k`.
fn select<T: Element>(
    xt: &Tensor,
    k: usize,
    largest: bool,
    sorted: bool,
    par: &crate::threads::Par,
) -> Result<(Tensor, Tensor)> {
    let shape = xt.shape();
    let (&n, outer) = shape.split_last().expect("at least one dimension");
    let rows: usize = outer.iter().product();
    let mut out_shape = shape.to_vec();
    *out_shape.last_mut().expect("at least one dimension") = k;
    let total = rows.saturating_mul(k);
    let mut pairs: Vec<(T, i64)> = crate::try_filled_vec("topk", total, (T::ZERO, 0i64))?;
    if total > 0 {
        let data = T::slice(xt.storage()).expect("the storage's own dtype");
        let strides = xt.layout().strides();
        let (outer_st, step) = (&strides[..outer.len()], strides[outer.len()]);
        let offset = xt.layout().offset();
        // The first element of row `r`: its outer index decomposed, last dimension fastest.
        let base = |mut r: usize| {
            let mut off = offset;
            for (&sz, &st) in outer.iter().zip(outer_st).rev() {
                off += (r % sz) * st;
                r /= sz;
            }
            off
        };
        let per_piece = PIECE_ELEMS.div_ceil(n.max(1)).max(1);
        let failed = AtomicBool::new(false);
        par.for_each_chunk_mut(&mut pairs, per_piece * k, |c, out| {
            // A slice's length may come from a huge view: allocate fallibly.
            let mut queue: Vec<(T, i64)> = Vec::new();
            if queue.try_reserve_exact(n).is_err() {
                failed.store(true, Ordering::Relaxed);
                return;
            }
            for (j, o) in out.chunks_mut(k).enumerate() {
                let b = base(c * per_piece + j);
                queue.clear();
                queue.extend((0..n).map(|t| (data[b + t * step], t as i64)));
                top_row(&mut queue, k, largest, sorted);
                o.copy_from_slice(&queue[..k]);
            }
        });
        if failed.into_inner() {
            return Err(crate::Error::OutOfMemory {
                op: "topk",
                bytes: n as u128 * core::mem::size_of::<(T, i64)>() as u128,
            });
        }
    }
    let mut values = try_with_capacity::<T>("topk", total)?;
    values.extend(pairs.iter().map(|p| p.0));
    let mut indices = try_with_capacity::<i64>("topk", total)?;
    indices.extend(pairs.iter().map(|p| p.1));
    Ok((
        Tensor::from_vec(values, &out_shape)?,
        Tensor::from_vec(indices, &out_shape)?,
    ))
}

/// Whether `a` is NaN (the only value unequal to itself; false for integers).
#[allow(clippy::eq_op)]
fn nan<T: PartialOrd>(a: &T) -> bool {
    a != a
}

/// PyTorch's per-slice step: `queue` holds `(value, index)` in index order; afterwards its first
/// `k` entries are the result.
fn top_row<T: PartialOrd + Copy>(queue: &mut [(T, i64)], k: usize, largest: bool, sorted: bool) {
    if k == 0 {
        return;
    }
    let big = |x: &(T, i64), y: &(T, i64)| (nan(&x.0) && !nan(&y.0)) || x.0 > y.0;
    let small = |x: &(T, i64), y: &(T, i64)| (!nan(&x.0) && nan(&y.0)) || x.0 < y.0;
    let n = queue.len();
    let run = |q: &mut [(T, i64)], less: stl::Less<(T, i64)>| {
        if k * 64 <= n {
            stl::partial_sort(q, 0, k, n, less);
        } else {
            stl::nth_element(q, 0, k - 1, n, less);
            if sorted {
                stl::sort(q, 0, k - 1, less);
            }
        }
    };
    if largest {
        run(queue, &big)
    } else {
        run(queue, &small)
    }
}

/// GNU libstdc++'s `std::sort`, `std::nth_element` and `std::partial_sort` (introsort,
/// introselect, heap select), step for step, on index ranges `first..last` of `v`, with `less`
/// a strict weak order. Only the element moves matter (they decide the order of ties); the
/// "unguarded" loops keep a bound check that a strict weak order never reaches.
mod stl {
    /// A strict weak order on elements.
    pub(super) type Less<'a, E> = &'a dyn Fn(&E, &E) -> bool;

    /// `_S_threshold`.
    const THRESHOLD: usize = 16;

    /// `std::__lg`: ⌊log₂ n⌋ for `n ≥ 1`.
    fn lg(n: usize) -> usize {
        (usize::BITS - 1 - n.leading_zeros()) as usize
    }

    fn unguarded_linear_insert<E: Copy>(v: &mut [E], mut last: usize, less: Less<E>) {
        let val = v[last];
        while last > 0 && less(&val, &v[last - 1]) {
            v[last] = v[last - 1];
            last -= 1;
        }
        v[last] = val;
    }

    fn insertion_sort<E: Copy>(v: &mut [E], first: usize, last: usize, less: Less<E>) {
        if first == last {
            return;
        }
        for i in first + 1..last {
            if less(&v[i], &v[first]) {
                let val = v[i];
                v.copy_within(first..i, first + 1);
                v[first] = val;
            } else {
                unguarded_linear_insert(v, i, less);
            }
        }
    }

    fn final_insertion_sort<E: Copy>(v: &mut [E], first: usize, last: usize, less: Less<E>) {
        if last - first > THRESHOLD {
            insertion_sort(v, first, first + THRESHOLD, less);
            for i in first + THRESHOLD..last {
                unguarded_linear_insert(v, i, less);
            }
        } else {
            insertion_sort(v, first, last, less);
        }
    }

    fn move_median_to_first<E: Copy>(
        v: &mut [E],
        result: usize,
        a: usize,
        b: usize,
        c: usize,
        less: Less<E>,
    ) {
        let m = if less(&v[a], &v[b]) {
            if less(&v[b], &v[c]) {
                b
            } else if less(&v[a], &v[c]) {
                c
            } else {
                a
            }
        } else if less(&v[a], &v[c]) {
            a
        } else if less(&v[b], &v[c]) {
            c
        } else {
            b
        };
        v.swap(result, m);
    }

    fn unguarded_partition<E: Copy>(
        v: &mut [E],
        mut first: usize,
        mut last: usize,
        pivot: usize,
        less: Less<E>,
    ) -> usize {
        loop {
            while first < v.len() - 1 && less(&v[first], &v[pivot]) {
                first += 1;
            }
            last -= 1;
            while last > 0 && less(&v[pivot], &v[last]) {
                last -= 1;
            }
            if first >= last {
                return first;
            }
            v.swap(first, last);
            first += 1;
        }
    }

    fn unguarded_partition_pivot<E: Copy>(
        v: &mut [E],
        first: usize,
        last: usize,
        less: Less<E>,
    ) -> usize {
        let mid = first + (last - first) / 2;
        move_median_to_first(v, first, first + 1, mid, last - 1, less);
        unguarded_partition(v, first + 1, last, first, less)
    }

    fn push_heap<E: Copy>(
        v: &mut [E],
        first: usize,
        mut hole: usize,
        top: usize,
        val: E,
        less: Less<E>,
    ) {
        while hole > top {
            let parent = (hole - 1) / 2;
            if !less(&v[first + parent], &val) {
                break;
            }
            v[first + hole] = v[first + parent];
            hole = parent;
        }
        v[first + hole] = val;
    }

    fn adjust_heap<E: Copy>(
        v: &mut [E],
        first: usize,
        mut hole: usize,
        len: usize,
        val: E,
        less: Less<E>,
    ) {
        let top = hole;
        let mut second = hole;
        while second < (len - 1) / 2 {
            second = 2 * (second + 1);
            if less(&v[first + second], &v[first + second - 1]) {
                second -= 1;
            }
            v[first + hole] = v[first + second];
            hole = second;
        }
        if len.is_multiple_of(2) && second == (len - 2) / 2 {
            second = 2 * (second + 1);
            v[first + hole] = v[first + second - 1];
            hole = second - 1;
        }
        push_heap(v, first, hole, top, val, less);
    }

    fn make_heap<E: Copy>(v: &mut [E], first: usize, last: usize, less: Less<E>) {
        let len = last - first;
        if len < 2 {
            return;
        }
        let mut parent = (len - 2) / 2;
        loop {
            let val = v[first + parent];
            adjust_heap(v, first, parent, len, val, less);
            if parent == 0 {
                return;
            }
            parent -= 1;
        }
    }

    fn pop_heap<E: Copy>(v: &mut [E], first: usize, last: usize, result: usize, less: Less<E>) {
        let val = v[result];
        v[result] = v[first];
        adjust_heap(v, first, 0, last - first, val, less);
    }

    fn heap_select<E: Copy>(v: &mut [E], first: usize, middle: usize, last: usize, less: Less<E>) {
        make_heap(v, first, middle, less);
        for i in middle..last {
            if less(&v[i], &v[first]) {
                pop_heap(v, first, middle, i, less);
            }
        }
    }

    fn sort_heap<E: Copy>(v: &mut [E], first: usize, mut last: usize, less: Less<E>) {
        while last - first > 1 {
            last -= 1;
            pop_heap(v, first, last, last, less);
        }
    }

    /// `std::partial_sort(first, middle, last)`.
    pub(super) fn partial_sort<E: Copy>(
        v: &mut [E],
        first: usize,
        middle: usize,
        last: usize,
        less: Less<E>,
    ) {
        heap_select(v, first, middle, last, less);
        sort_heap(v, first, middle, less);
    }

    fn introsort_loop<E: Copy>(
        v: &mut [E],
        first: usize,
        mut last: usize,
        mut depth: usize,
        less: Less<E>,
    ) {
        while last - first > THRESHOLD {
            if depth == 0 {
                partial_sort(v, first, last, last, less);
                return;
            }
            depth -= 1;
            let cut = unguarded_partition_pivot(v, first, last, less);
            introsort_loop(v, cut, last, depth, less);
            last = cut;
        }
    }

    /// `std::sort(first, last)`.
    pub(super) fn sort<E: Copy>(v: &mut [E], first: usize, last: usize, less: Less<E>) {
        if first != last {
            introsort_loop(v, first, last, lg(last - first) * 2, less);
            final_insertion_sort(v, first, last, less);
        }
    }

    /// `std::nth_element(first, nth, last)`.
    pub(super) fn nth_element<E: Copy>(
        v: &mut [E],
        mut first: usize,
        nth: usize,
        mut last: usize,
        less: Less<E>,
    ) {
        if first == last || nth == last {
            return;
        }
        let mut depth = lg(last - first) * 2;
        while last - first > 3 {
            if depth == 0 {
                heap_select(v, first, nth + 1, last, less);
                v.swap(first, nth);
                return;
            }
            depth -= 1;
            let cut = unguarded_partition_pivot(v, first, last, less);
            if cut <= nth {
                first = cut;
            } else {
                last = cut;
            }
        }
        insertion_sort(v, first, last, less);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many slices (several parallel pieces) at 1, 2, 3 and 8 threads: the same bits.
    #[test]
    fn topk_is_thread_invariant() {
        let (rows, n) = (300, 257);
        let v: Vec<f32> = (0..rows * n)
            .map(|i| ((i * 7919) % 13) as f32 - 6.0)
            .collect();
        let x = Tensor::from_vec(v, &[rows, n]).unwrap();
        let run = || {
            let (a, b) = x.topk(5, -1, true, true).unwrap();
            let (c, d) = x.topk(100, 0, false, false).unwrap();
            (
                a.to_vec::<f32>().unwrap(),
                b.to_vec::<i64>().unwrap(),
                c.to_vec::<f32>().unwrap(),
                d.to_vec::<i64>().unwrap(),
            )
        };
        let one = crate::threads::with_num_threads(1, run);
        for t in [2, 3, 8] {
            assert!(
                crate::threads::with_num_threads(t, run) == one,
                "threads = {t}"
            );
        }
    }
}
