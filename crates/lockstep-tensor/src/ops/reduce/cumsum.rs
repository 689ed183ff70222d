//! `cumsum`: sequential along each line (PyTorch's order), accumulated in `f64`.

use super::buf::{dense, zeroed_vec};
use super::dim::{
    Geom, RedArgs, RedFn, det_op, dim_args, float_only, geom, one, run_red, with_float,
};
use crate::Tensor;
use crate::dtype::DType;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::threads::Par;
use rayon::prelude::*;

fn cumsum_kernel(x: &Tensor, a: &RedArgs, par: &Par) -> Result<Vec<Tensor>> {
    let g = match a.dim {
        Some(d) => geom(x.shape(), d),
        None => Geom {
            outer: 1,
            n: x.numel(),
            inner: 1,
        },
    };
    let xc = x.contiguous_for("cumsum")?;
    with_float!("cumsum", x, T => {
        let data = dense::<T>(&xc)?;
        let Geom { n, inner, .. } = g;
        let mut out = zeroed_vec::<T>(data.len());
        if !data.is_empty() && n > 0 {
            // Sequential along the line (PyTorch's order), accumulated in f64 and rounded once
            // per output, as PyTorch's CPU kernel accumulates float32 (its `acc_type` is
            // double): the error of each output is one rounding, not one per term. Parallel
            // over blocks of lines; for inner > 1 the rows are added whole (vectorised).
            par.install(|| {
                out.par_chunks_mut(n * inner)
                    .zip(data.par_chunks(n * inner))
                    .with_min_len((1 << 14) / (n * inner).max(1) + 1)
                    .for_each_init(Vec::new, |acc: &mut Vec<f64>, (ob, xb)| {
                        if inner == 1 {
                            let mut a = 0f64;
                            for (o, &v) in ob.iter_mut().zip(xb) {
                                a += v.to_f64();
                                *o = T::from_f64(a);
                            }
                        } else {
                            acc.clear();
                            acc.resize(inner, 0.0);
                            for (orow, xrow) in ob.chunks_mut(inner).zip(xb.chunks(inner)) {
                                for ((o, a), &v) in orow.iter_mut().zip(acc.iter_mut()).zip(xrow) {
                                    *a += v.to_f64();
                                    *o = T::from_f64(*a);
                                }
                            }
                        }
                    })
            });
        }
        Ok(vec![Tensor::from_vec(out, x.shape())?])
    })
}

det_op!(
    /// `torch.cumsum`: sequential along each line, accumulated in `f64` (as PyTorch does for
    /// `float32`), parallel over lines.
    CUMSUM, "cumsum", "cumsum.sequential_f64_acc", cumsum_kernel
);

impl Tensor {
    /// `torch.cumsum(x, dim)`: sequential along the dimension, accumulated in `f64` and
    /// rounded once per output (as PyTorch's CPU kernel; floats only).
    ///
    /// # Errors
    /// If `dim` is out of range or the dtype is not a float.
    pub fn cumsum(&self, dim: isize) -> Result<Tensor> {
        let a = dim_args("cumsum", self, dim, false, 0.0)?;
        float_only("cumsum", self)?;
        run_red(&CUMSUM, self, a).map(one)
    }
}
