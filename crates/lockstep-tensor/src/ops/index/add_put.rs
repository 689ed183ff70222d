//! `index_add` and `index_put`: source rows added into (or written to) the destination rows an
//! index names, on the row kernels.

use super::common::{
    acc_op, dense_mut, dim_of, fresh_copy, geom, index_tensor, one_dim, same_dtype,
};
use super::rows::{
    ROW_ATOMIC, ROW_DET, ROW_NONDET, RowAddFn, RowGeomPub, RowMode, rg, rows_det, run_rows,
};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::reduce::dense;
use crate::{Tensor, invalid};

acc_op!(
    /// `Tensor.index_add`: source rows added into the rows the index names.
    INDEX_ADD: RowAddFn, "index_add", "index_add.source_parallel", "index_add.dest_partitioned", "index_add.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);
acc_op!(
    /// `Tensor.index_put_(indices, values, accumulate=True)`.
    INDEX_PUT_ACCUMULATE: RowAddFn, "index_put", "index_put.source_parallel", "index_put.dest_partitioned", "index_put.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);

/// `index_put` without `accumulate`: rows assigned in source order (the last write wins), one
/// thread-invariant implementation.
pub static INDEX_PUT: crate::op::Op<()> = crate::op::Op {
    name: "index_put",
    impls: &[crate::op::Impl {
        algo: "index_put.rows_in_order",
        guarantee: crate::op::Guarantee::ThreadInvariant,
        f: (),
    }],
};

impl Tensor {
    /// `Tensor.index_add(dim, index, source)`: a copy of `self` with row `k` of `source` along
    /// `dim` added into row `index[k]`.
    ///
    /// # Errors
    /// A bad `dim`; a non-`i64` or multi-dimensional index; `source` of another dtype or a
    /// shape other than `self`'s with `dim` of size `index.numel()`; an index outside
    /// `0..self.size(dim)`; an unsupported dtype (`u8`, `bool`).
    pub fn index_add(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_add";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        one_dim(OP, "index", index)?;
        same_dtype(OP, self.dtype(), source)?;
        let idx = dense::<i64>(&ic)?;
        let mut expect = self.shape().to_vec();
        if !expect.is_empty() {
            expect[d] = idx.len();
        }
        if source.shape() != expect.as_slice() && !(self.ndim() == 0 && source.numel() == idx.len())
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: expect,
                rhs: source.shape().to_vec(),
            });
        }
        let (outer, n, inner) = geom(self.shape(), d);
        let mut out = fresh_copy(OP, self)?;
        run_rows(
            &INDEX_ADD,
            &mut out,
            source,
            idx,
            RowGeomPub {
                outer,
                n,
                m: idx.len(),
                inner,
            },
            true,
        )?;
        Ok(out)
    }

    /// `Tensor.index_put(indices, values, accumulate)`: `indices` are 1-d `i64` tensors of one
    /// length `m`, one per leading dimension (negative values count from the end); `values`
    /// holds `m` rows of the remaining dimensions (or one row, or one value, broadcast). With
    /// `accumulate`, values at repeated positions are summed; without, the last one wins.
    ///
    /// # Errors
    /// No or too many index tensors; non-`i64`, multi-dimensional or unequal-length indices;
    /// an index outside `-size..size`; `values` of another dtype or shape.
    pub fn index_put(
        &self,
        indices: &[Tensor],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        const OP: &str = "index_put";
        let k = indices.len();
        if k == 0 || k > self.ndim() {
            return Err(invalid(
                OP,
                "indices",
                format!("expected 1 to {} index tensors, got {k}", self.ndim()),
            ));
        }
        same_dtype(OP, self.dtype(), values)?;
        let shape = self.shape();
        let mut m = None;
        let mut lin: Vec<i64> = Vec::new();
        for (a, t) in indices.iter().enumerate() {
            let ic = index_tensor(OP, t)?;
            one_dim(OP, "indices", t)?;
            let v = dense::<i64>(&ic)?;
            match m {
                None => {
                    m = Some(v.len());
                    lin = vec![0; v.len()];
                }
                Some(mm) if mm != v.len() => {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        lhs: indices[0].shape().to_vec(),
                        rhs: t.shape().to_vec(),
                    });
                }
                _ => {}
            }
            let size = shape[a];
            for (l, &i) in lin.iter_mut().zip(v) {
                let w = if i < 0 { i + size as i64 } else { i };
                if w < 0 || w as usize >= size {
                    return Err(Error::IndexOutOfRange {
                        op: OP,
                        index: i,
                        size,
                    });
                }
                *l = *l * size as i64 + w;
            }
        }
        let m = m.unwrap_or(0);
        let rows: usize = shape[..k].iter().product();
        let rest = &shape[k..];
        let inner: usize = rest.iter().product();
        let vals = if values.numel() == m * inner {
            values.contiguous_for("index_put")?
        } else if values.numel() == inner || values.numel() == 1 {
            // Broadcast one row (or one value) to m rows.
            let vc = values.contiguous_for("index_put")?;
            crate::with_dtype!(values.dtype(), T => {
                let v = dense::<T>(&vc)?;
                let row: Vec<T> = if v.len() == inner { v.to_vec() } else { vec![v[0]; inner] };
                let mut all = Vec::with_capacity(m * inner);
                for _ in 0..m {
                    all.extend_from_slice(&row);
                }
                Tensor::from_vec(all, &[m * inner])?
            })
        } else {
            let mut want = vec![m];
            want.extend_from_slice(rest);
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: want,
                rhs: values.shape().to_vec(),
            });
        };
        let g = RowGeomPub {
            outer: 1,
            n: rows,
            m,
            inner,
        };
        let mut out = fresh_copy(OP, self)?;
        if accumulate {
            run_rows(&INDEX_PUT_ACCUMULATE, &mut out, &vals, &lin, g, false)?;
        } else {
            // Plain assignment: the destination-partitioned kernel, sources in order, so the
            // last write wins at any thread count.
            let g = rg(g);
            INDEX_PUT.run_inplace(&mut out, &[values], |_, par, out| {
                match self.dtype() {
                    DType::F32 => rows_det(
                        dense_mut::<f32>(out)?,
                        dense(&vals)?,
                        &lin,
                        g,
                        RowMode::Assign,
                        par,
                    ),
                    DType::F64 => rows_det(
                        dense_mut::<f64>(out)?,
                        dense(&vals)?,
                        &lin,
                        g,
                        RowMode::Assign,
                        par,
                    ),
                    DType::I64 => rows_det(
                        dense_mut::<i64>(out)?,
                        dense(&vals)?,
                        &lin,
                        g,
                        RowMode::Assign,
                        par,
                    ),
                    DType::U8 => assign_rows(dense_mut::<u8>(out)?, dense(&vals)?, &lin, inner),
                    DType::Bool => assign_rows(dense_mut::<bool>(out)?, dense(&vals)?, &lin, inner),
                }
                Ok(())
            })?;
        }
        Ok(out)
    }
}

/// Row assignment in source order (the last write wins), for the dtypes without a row kernel.
fn assign_rows<T: Element>(dst: &mut [T], src: &[T], rows: &[i64], inner: usize) {
    for (k, &r) in rows.iter().enumerate() {
        let r = r as usize;
        dst[r * inner..(r + 1) * inner].copy_from_slice(&src[k * inner..(k + 1) * inner]);
    }
}
