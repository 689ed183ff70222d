//! Masking ops: `masked_fill`, `tril`, `triu`. Each output element is its input element or the
//! fill value, chosen by the mask or by its row and column alone, so every kernel is
//! thread-invariant by construction (fixed-size chunks of the output, as in `elementwise.rs`).
//! Inputs are read in place through their strides (views, broadcast masks), never expanded.

use super::elementwise::{Kernel, Src, check_dtype, out_buf, serial, walk};
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::op::{Guarantee, Impl, Op};
use crate::{Tensor, invalid};

/// Output elements per chunk (a constant: no element's value depends on its chunk).
const CHUNK: usize = super::elementwise::CHUNK_LEN;

chunked_ops! {
    /// `torch.masked_fill`.
    MASKED_FILL = "masked_fill";
    /// `torch.tril`.
    TRIL = "tril";
    /// `torch.triu`.
    TRIU = "triu";
}

impl Tensor {
    /// `torch.masked_fill(self, mask, value)`: `value` where `mask` is true, `self`'s element
    /// elsewhere. `mask` must be `Bool`; `self` and `mask` broadcast against each other (the
    /// output has the broadcast shape, as PyTorch's out-of-place form). `value` is converted to
    /// `self`'s dtype as a Python number is (floats round, integers truncate, `Bool` is
    /// `value != 0`).
    ///
    /// # Errors
    /// A `mask` that is not `Bool`; shapes that do not broadcast; the output cannot be
    /// allocated; dispatch refuses the op.
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Result<Tensor> {
        let op = &MASKED_FILL;
        check_dtype(op.name, mask, DType::Bool)?;
        let shape = super::elementwise::broadcast_shapes(op.name, self.shape(), mask.shape())?;
        op.run(&[self, mask], |imp, par| {
            crate::with_dtype!(self.dtype(), T => {
                let fill = T::from_f64(value);
                // A dense input of the output's shape and a dense mask over its trailing
                // dimensions (a causal mask broadcast over batch and heads): the mask repeats
                // every `block` elements; straight loops, no zero-fill first.
                let ms = &mask.shape()[mask.shape().iter().take_while(|&&d| d == 1).count()..];
                if self.shape() == &shape[..] && self.is_contiguous() && mask.is_contiguous()
                    && mask.numel() > 0 && shape.ends_with(ms)
                {
                    let (x, m) = (self.data::<T>()?, mask.data::<bool>()?);
                    let block = m.len();
                    let run = |o: &mut [core::mem::MaybeUninit<T>], lo: usize| {
                        let (mut pos, mut j) = (0, lo % block);
                        while pos < o.len() {
                            let seg = (block - j).min(o.len() - pos);
                            let xs = &x[lo + pos..lo + pos + seg];
                            for ((o, &v), &b) in o[pos..pos + seg].iter_mut().zip(xs).zip(&m[j..j + seg]) {
                                o.write(if b { fill } else { v });
                            }
                            (pos, j) = (pos + seg, 0);
                        }
                    };
                    let n = x.len();
                    let mut out = crate::tensor::try_with_capacity::<T>(op.name, n)?;
                    let spare = &mut out.spare_capacity_mut()[..n];
                    let Kernel::Chunked = imp.f;
                    if serial(n, par) {
                        run(spare, 0);
                    } else {
                        par.for_each_chunk_mut(spare, CHUNK, |i, o| run(o, i * CHUNK));
                    }
                    // SAFETY: `run` wrote each of the `n` elements.
                    unsafe { out.set_len(n) };
                    return Tensor::from_vec(out, &shape);
                }
                let (sx, sm) = (Src::<T>::new(op.name, self, &shape)?, Src::<bool>::new(op.name, mask, &shape)?);
                let mut out = out_buf::<T>(op.name, &shape)?;
                let run = |o: &mut [T], lo: usize| {
                    walk(&shape, [&sx.st, &sm.st], lo, o.len(), |p, [ox, om], [ix, im], n| {
                        for (t, o) in o[p..p + n].iter_mut().enumerate() {
                            *o = if sm.data[om + t * im] { fill } else { sx.data[ox + t * ix] };
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

    /// `torch.tril(self, diagonal)`: the lower triangle of the last two dimensions (every
    /// leading dimension is a batch), elements with `column − row ≤ diagonal` kept, the rest 0
    /// (`false` for `Bool`). Any dtype.
    ///
    /// # Errors
    /// Fewer than two dimensions; the output cannot be allocated; dispatch refuses the op.
    pub fn tril(&self, diagonal: i64) -> Result<Tensor> {
        triangle(&TRIL, self, diagonal, true)
    }

    /// `torch.triu(self, diagonal)`: the upper triangle of the last two dimensions, elements
    /// with `column − row ≥ diagonal` kept, the rest 0 (`false` for `Bool`). Any dtype.
    ///
    /// # Errors
    /// As [`tril`](Self::tril).
    pub fn triu(&self, diagonal: i64) -> Result<Tensor> {
        triangle(&TRIU, self, diagonal, false)
    }
}

/// `tril` (`lower`) or `triu` of `x`.
fn triangle(op: &'static Op<Kernel>, x: &Tensor, diagonal: i64, lower: bool) -> Result<Tensor> {
    if x.ndim() < 2 {
        return Err(invalid(
            op.name,
            "input",
            format!(
                "input tensor must have at least 2 dimensions, got shape {:?}",
                x.shape()
            ),
        ));
    }
    let shape = x.shape().to_vec();
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    // In i128, so no diagonal or size overflows the test `column − row` against it.
    let keep = move |r: usize, c: usize| {
        let d = c as i128 - r as i128;
        if lower {
            d <= diagonal as i128
        } else {
            d >= diagonal as i128
        }
    };
    op.run(&[x], |imp, par| {
        crate::with_dtype!(x.dtype(), T => {
            let sx = Src::<T>::new(op.name, x, &shape)?;
            let mut out = out_buf::<T>(op.name, &shape)?;
            let run = |o: &mut [T], lo: usize| {
                walk(&shape, [&sx.st], lo, o.len(), |p, [ox], [ix], n| {
                    // A run lies within one row of the last dimension.
                    let pos = lo + p;
                    let (r, c0) = ((pos / cols) % rows, pos % cols);
                    for (t, o) in o[p..p + n].iter_mut().enumerate() {
                        *o = if keep(r, c0 + t) { sx.data[ox + t * ix] } else { T::ZERO };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Above the serial size, at 1, 2, 3 and 8 threads: the same bits.
    #[test]
    fn chunked_kernels_are_thread_invariant() {
        let (b, n) = (3, 160);
        let v: Vec<f32> = (0..b * n * n).map(|k| (k as f32 * 0.37).sin()).collect();
        let x = Tensor::from_vec(v, &[b, n, n]).unwrap();
        let mask = Tensor::ones(&[n, n], DType::Bool).unwrap().triu(1).unwrap();
        let run = || {
            [
                x.masked_fill(&mask, f64::NEG_INFINITY).unwrap(),
                x.tril(0).unwrap(),
                x.triu(-3).unwrap(),
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
}
