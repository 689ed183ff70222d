//! Views and layout ops. Views (`view`, `permute`, `transpose`, `narrow`, `expand`, `squeeze`,
//! `unsqueeze`) share the storage and return a new layout; `reshape` views when it can and
//! copies otherwise; `cat` and `stack` copy. None of them does arithmetic, so all are
//! deterministic.

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, contiguous_strides, resolve_dim};
use crate::tensor::try_with_capacity;
use crate::{Tensor, invalid};

use crate::op::{Guarantee, Impl, Op};

/// `torch.cat`: one copy per part, in order (serial).
pub static CAT: Op<()> = Op {
    name: "cat",
    impls: &[Impl {
        algo: "cat.copy",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// [`Tensor::pad_dim`]: one copy, each element written once (serial).
pub static PAD_DIM: Op<()> = Op {
    name: "pad_dim",
    impls: &[Impl {
        algo: "pad_dim.copy",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// The view family's copying ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![CAT.info(), PAD_DIM.info()]
}

/// Resolves a shape with at most one `-1` against `numel` elements.
fn infer_shape(op: &'static str, shape: &[isize], numel: usize) -> Result<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => {
                return Err(invalid(
                    op,
                    "shape",
                    "only one dimension can be inferred (-1)",
                ));
            }
            d if d < 0 => return Err(invalid(op, "shape", format!("invalid shape dimension {d}"))),
            d => known = known.saturating_mul(d as usize),
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(invalid(
                op,
                "shape",
                format!("shape {shape:?} is invalid for input of size {numel}"),
            ));
        }
        out[i] = numel / known;
    } else if known != numel {
        return Err(invalid(
            op,
            "shape",
            format!("shape {shape:?} is invalid for input of size {numel}"),
        ));
    }
    Ok(out)
}

impl Tensor {
    fn with_layout(&self, layout: Layout) -> Tensor {
        self.view_with(layout)
    }

    /// `x.view(shape)`: the same storage seen with a new shape (one entry may be `-1`).
    ///
    /// # Errors
    /// If the element count differs, or the tensor is not contiguous (use
    /// [`reshape`](Self::reshape), which copies when it must).
    pub fn view(&self, shape: &[isize]) -> Result<Tensor> {
        let shape = infer_shape("view", shape, self.numel())?;
        if !self.is_contiguous() {
            return Err(invalid(
                "view",
                "self",
                "view size is not compatible with input tensor's size and stride; use reshape",
            ));
        }
        let strides = contiguous_strides(&shape);
        Ok(self.with_layout(Layout::new(shape, strides, self.layout().offset())))
    }

    /// `x.reshape(shape)`: a view if the tensor is contiguous, else a copy.
    ///
    /// # Errors
    /// If the element count differs.
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        if self.is_contiguous() {
            self.view(shape)
        } else {
            self.contiguous_for("reshape")?.view(shape)
        }
    }

    /// `x.permute(dims)`: dimensions reordered.
    ///
    /// # Errors
    /// If `dims` is not a permutation of the dimensions.
    pub fn permute(&self, dims: &[isize]) -> Result<Tensor> {
        let n = self.ndim();
        if dims.len() != n {
            return Err(invalid(
                "permute",
                "dims",
                format!("number of dims {} doesn't match tensor's {n}", dims.len()),
            ));
        }
        let mut seen = vec![false; n];
        let mut shape = Vec::with_capacity(n);
        let mut strides = Vec::with_capacity(n);
        for &d in dims {
            let d = resolve_dim("permute", d, n)?;
            if std::mem::replace(&mut seen[d], true) {
                return Err(invalid("permute", "dims", format!("repeated dim {d}")));
            }
            shape.push(self.shape()[d]);
            strides.push(self.layout().strides()[d]);
        }
        Ok(self.with_layout(Layout::new(shape, strides, self.layout().offset())))
    }

    /// `x.transpose(d0, d1)`: two dimensions swapped.
    ///
    /// # Errors
    /// If a dimension is out of range.
    pub fn transpose(&self, d0: isize, d1: isize) -> Result<Tensor> {
        let n = self.ndim();
        let (a, b) = (
            resolve_dim("transpose", d0, n)?,
            resolve_dim("transpose", d1, n)?,
        );
        let mut dims: Vec<isize> = (0..n as isize).collect();
        dims.swap(a, b);
        self.permute(&dims)
    }

    /// `x.narrow(dim, start, length)`: elements `start..start+length` of `dim` (slicing).
    ///
    /// # Errors
    /// If `dim` is out of range or the slice leaves the dimension.
    pub fn narrow(&self, dim: isize, start: usize, length: usize) -> Result<Tensor> {
        let d = resolve_dim("narrow", dim, self.ndim())?;
        let size = self.shape()[d];
        if start.checked_add(length).is_none_or(|e| e > size) {
            return Err(invalid(
                "narrow",
                "start",
                format!("start ({start}) + length ({length}) exceeds dimension size ({size})"),
            ));
        }
        let mut shape = self.shape().to_vec();
        shape[d] = length;
        // An empty result keeps the offset: `start * stride` may lie past an empty storage.
        let offset = if shape.contains(&0) {
            self.layout().offset()
        } else {
            self.layout().offset() + start * self.layout().strides()[d]
        };
        Ok(self.with_layout(Layout::new(shape, self.layout().strides().to_vec(), offset)))
    }

    /// `x.expand(shape)`: size-1 dimensions repeated without copying (stride 0); new leading
    /// dimensions may be added; `-1` keeps a size.
    ///
    /// # Errors
    /// If a non-1 dimension would change size.
    pub fn expand(&self, shape: &[isize]) -> Result<Tensor> {
        let n = self.ndim();
        if shape.len() < n {
            return Err(invalid(
                "expand",
                "shape",
                format!(
                    "the number of sizes ({}) must be at least the tensor's dims ({n})",
                    shape.len()
                ),
            ));
        }
        let lead = shape.len() - n;
        let mut out_shape = Vec::with_capacity(shape.len());
        let mut strides = Vec::with_capacity(shape.len());
        for (i, &s) in shape.iter().enumerate() {
            if i < lead {
                if s < 0 {
                    return Err(invalid(
                        "expand",
                        "shape",
                        format!("size {s} for a new dimension"),
                    ));
                }
                out_shape.push(s as usize);
                strides.push(0);
                continue;
            }
            let (cur, st) = (self.shape()[i - lead], self.layout().strides()[i - lead]);
            let want = if s == -1 {
                cur
            } else if s < 0 {
                return Err(invalid("expand", "shape", format!("invalid size {s}")));
            } else {
                s as usize
            };
            if want == cur {
                out_shape.push(cur);
                strides.push(st);
            } else if cur == 1 {
                out_shape.push(want);
                strides.push(0);
            } else {
                return Err(Error::ShapeMismatch {
                    op: "expand",
                    lhs: self.shape().to_vec(),
                    rhs: shape.iter().map(|&d| d.max(0) as usize).collect(),
                });
            }
        }
        crate::tensor::checked_numel("expand", &out_shape)?;
        Ok(self.with_layout(Layout::new(out_shape, strides, self.layout().offset())))
    }

    /// `x.squeeze(dim)`: removes `dim` if its size is 1 (otherwise returns `x` unchanged, as
    /// PyTorch does).
    ///
    /// # Errors
    /// If `dim` is out of range.
    pub fn squeeze(&self, dim: isize) -> Result<Tensor> {
        let d = resolve_dim("squeeze", dim, self.ndim())?;
        if self.shape()[d] != 1 {
            return Ok(self.clone());
        }
        let mut shape = self.shape().to_vec();
        let mut strides = self.layout().strides().to_vec();
        shape.remove(d);
        strides.remove(d);
        Ok(self.with_layout(Layout::new(shape, strides, self.layout().offset())))
    }

    /// `x.squeeze()`: removes every dimension of size 1.
    pub fn squeeze_all(&self) -> Tensor {
        let (shape, strides): (Vec<usize>, Vec<usize>) = self
            .shape()
            .iter()
            .zip(self.layout().strides())
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .unzip();
        self.with_layout(Layout::new(shape, strides, self.layout().offset()))
    }

    /// `x.unsqueeze(dim)`: inserts a dimension of size 1 at `dim` (in `-(n+1)..=n`).
    ///
    /// # Errors
    /// If `dim` is out of range.
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        let d = resolve_dim("unsqueeze", dim, self.ndim() + 1)?;
        let mut shape = self.shape().to_vec();
        let mut strides = self.layout().strides().to_vec();
        let st = if d < shape.len() {
            strides[d] * shape[d]
        } else {
            1
        };
        shape.insert(d, 1);
        strides.insert(d, st);
        Ok(self.with_layout(Layout::new(shape, strides, self.layout().offset())))
    }

    /// `torch.cat(tensors, dim)`: concatenation along an existing dimension.
    ///
    /// # Errors
    /// If `tensors` is empty, dtypes differ, or shapes differ outside `dim`.
    pub fn cat(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| invalid("cat", "tensors", "expected a non-empty list of tensors"))?;
        let d = resolve_dim("cat", dim, first.ndim())?;
        for t in tensors {
            if t.dtype() != first.dtype() {
                return Err(Error::DType {
                    op: "cat",
                    expected: first.dtype(),
                    got: t.dtype(),
                });
            }
            let same = t.ndim() == first.ndim()
                && t.shape()
                    .iter()
                    .zip(first.shape())
                    .enumerate()
                    .all(|(i, (a, b))| i == d || a == b);
            if !same {
                return Err(Error::ShapeMismatch {
                    op: "cat",
                    lhs: first.shape().to_vec(),
                    rhs: t.shape().to_vec(),
                });
            }
        }
        let mut shape = first.shape().to_vec();
        shape[d] = tensors.iter().map(|t| t.shape()[d]).sum();
        let outer: usize = shape[..d].iter().product();
        let inputs: Vec<&Tensor> = tensors.iter().collect();
        CAT.run(&inputs, |_, _| {
            crate::with_dtype!(first.dtype(), T => {
            // Dense parts are read in place; views are copied out once.
            let parts: Vec<std::borrow::Cow<'_, [T]>> = tensors
                .iter()
                .map(|t| match t.data::<T>() {
                    Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
                    Err(_) => t.to_vec::<T>().map(std::borrow::Cow::Owned),
                })
                .collect::<Result<_>>()?;
            let mut out: Vec<T> = try_with_capacity("cat", shape.iter().product())?;
            for o in 0..outer {
                for (t, p) in tensors.iter().zip(&parts) {
                    let row: usize = t.shape()[d..].iter().product();
                    out.extend_from_slice(&p[o * row..(o + 1) * row]);
                }
            }
                Tensor::from_vec(out, &shape)
            })
        })
    }

    /// `torch.stack(tensors, dim)`: tensors of one shape joined along a new dimension.
    ///
    /// # Errors
    /// If `tensors` is empty, or shapes or dtypes differ.
    pub fn stack(tensors: &[Tensor], dim: isize) -> Result<Tensor> {
        let first = tensors
            .first()
            .ok_or_else(|| invalid("stack", "tensors", "expected a non-empty list of tensors"))?;
        if let Some(t) = tensors.iter().find(|t| t.shape() != first.shape()) {
            return Err(Error::ShapeMismatch {
                op: "stack",
                lhs: first.shape().to_vec(),
                rhs: t.shape().to_vec(),
            });
        }
        let d = resolve_dim("stack", dim, first.ndim() + 1)? as isize;
        let parts: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.unsqueeze(d))
            .collect::<Result<_>>()?;
        Tensor::cat(&parts, d)
    }

    /// `self` placed at `start` along `dim` inside zeros of `len` elements along that
    /// dimension (what PyTorch's `narrow`/`select` backward builds): the same values as
    /// concatenating zeros, `self` and zeros along `dim`.
    ///
    /// # Errors
    /// `dim` out of range, or `start + self.shape()[dim] > len`.
    pub fn pad_dim(&self, dim: isize, start: usize, len: usize) -> Result<Tensor> {
        let d = resolve_dim("pad_dim", dim, self.ndim())?;
        let w = self.shape()[d];
        if start.checked_add(w).is_none_or(|e| e > len) {
            return Err(invalid(
                "pad_dim",
                "start",
                format!("a slice of {w} at {start} does not fit in a dimension of {len}"),
            ));
        }
        let mut shape = self.shape().to_vec();
        shape[d] = len;
        let outer: usize = shape[..d].iter().product();
        let inner: usize = shape[d + 1..].iter().product();
        let g = self.try_contiguous()?;
        PAD_DIM.run(&[self], |_, _| {
            crate::with_dtype!(self.dtype(), T => {
            let n = crate::tensor::checked_numel("pad_dim", &shape)?;
            // One pass, each element written once: zeros, the piece, zeros, per outer index.
            let mut out = try_with_capacity::<T>("pad_dim", n)?;
            let src = g.data::<T>()?;
            let piece = w * inner;
            let (before, after) = (start * inner, (len - start - w) * inner);
            for o in 0..outer {
                out.extend(core::iter::repeat_n(T::ZERO, before));
                out.extend_from_slice(&src[o * piece..(o + 1) * piece]);
                out.extend(core::iter::repeat_n(T::ZERO, after));
            }
                Tensor::from_vec(out, &shape)
            })
        })
    }

    /// A copy of the elements as a new dense tensor of the same dtype (`x.clone()` in PyTorch).
    ///
    /// # Panics
    /// When the copy cannot be allocated; [`try_deep_clone`](Self::try_deep_clone) returns the
    /// error.
    pub fn deep_clone(&self) -> Tensor {
        self.try_deep_clone().unwrap_or_else(|e| panic!("{e}"))
    }

    /// `x.to(dtype)`: elements converted through `f64` (floats round, integers truncate).
    ///
    /// # Panics
    /// When the copy cannot be allocated; [`try_to_dtype`](Self::try_to_dtype) returns the error.
    pub fn to_dtype(&self, dtype: crate::DType) -> Tensor {
        self.try_to_dtype(dtype).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Row-major values of `t` as `T`, checking the dtype (helper for ops and tests).
pub fn values<T: Element>(t: &Tensor) -> Result<Vec<T>> {
    t.to_vec::<T>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: usize, shape: &[usize]) -> Tensor {
        Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
    }

    #[test]
    fn views_share_and_reorder() {
        let x = t(24, &[2, 3, 4]);
        let p = x.permute(&[2, 0, 1]).unwrap();
        assert_eq!(p.shape(), &[4, 2, 3]);
        assert_eq!(p.to_vec::<i64>().unwrap()[..6], [0, 4, 8, 12, 16, 20]);
        let tr = x.transpose(0, -1).unwrap();
        assert_eq!(tr.shape(), &[4, 3, 2]);
        assert!(!tr.is_contiguous());
        assert!(tr.view(&[24]).is_err());
        assert_eq!(
            tr.reshape(&[-1]).unwrap().to_vec::<i64>().unwrap()[..4],
            [0, 12, 4, 16]
        );
        let n = x.narrow(2, 1, 2).unwrap();
        assert_eq!(
            n.to_vec::<i64>().unwrap(),
            [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22]
        );
        let e = t(3, &[3, 1]).expand(&[2, 3, 4]).unwrap();
        assert_eq!(e.shape(), &[2, 3, 4]);
        assert_eq!(e.to_vec::<i64>().unwrap()[..8], [0, 0, 0, 0, 1, 1, 1, 1]);
        let u = x.unsqueeze(1).unwrap();
        assert_eq!(u.shape(), &[2, 1, 3, 4]);
        assert_eq!(u.squeeze(1).unwrap().shape(), &[2, 3, 4]);
        assert_eq!(u.squeeze_all().shape(), &[2, 3, 4]);
    }

    #[test]
    fn cat_and_stack() {
        let a = t(6, &[2, 3]);
        let b = t(4, &[2, 2]);
        let c = Tensor::cat(&[a.clone(), b], 1).unwrap();
        assert_eq!(c.to_vec::<i64>().unwrap(), [0, 1, 2, 0, 1, 3, 4, 5, 2, 3]);
        let s = Tensor::stack(&[a.clone(), a.clone()], 1).unwrap();
        assert_eq!(s.shape(), &[2, 2, 3]);
        assert_eq!(s.to_vec::<i64>().unwrap()[..6], [0, 1, 2, 0, 1, 2]);
        assert!(Tensor::stack(&[a.clone(), t(4, &[2, 2])], 0).is_err());
        assert!(Tensor::cat(&[], 0).is_err());
    }

    #[test]
    fn contiguous_copies_views_by_runs() {
        let x = t(120, &[2, 3, 4, 5]);
        let f = Tensor::from_vec((0..60).map(|i| i as f32 * 0.5).collect(), &[3, 4, 5]).unwrap();
        let views = [
            x.clone(),
            x.transpose(0, 1).unwrap(),
            x.transpose(1, 3).unwrap(),
            x.permute(&[3, 1, 0, 2]).unwrap(),
            x.narrow(2, 1, 2).unwrap(),
            x.narrow(3, 4, 1).unwrap().transpose(0, 2).unwrap(),
            x.narrow(0, 1, 1).unwrap(),
            t(4, &[4, 1]).expand(&[2, 4, 3]).unwrap(),
            t(1, &[]),
            x.narrow(1, 1, 1).unwrap().squeeze(1).unwrap(),
            f.transpose(0, 2).unwrap(),
        ];
        for v in &views {
            let d = v.try_contiguous().unwrap();
            assert!(
                d.is_contiguous() && d.layout().offset() == 0,
                "{:?}",
                v.layout()
            );
            assert_eq!(d.shape(), v.shape());
            // Element by element through the layout's own index walk.
            let want: Vec<f64> = match v.dtype() {
                crate::DType::F32 => {
                    let s = f32::slice(v.storage()).unwrap();
                    v.layout().indices().map(|i| s[i] as f64).collect()
                }
                _ => {
                    let s = i64::slice(v.storage()).unwrap();
                    v.layout().indices().map(|i| s[i] as f64).collect()
                }
            };
            assert_eq!(d.to_f64_vec(), want, "{:?}", v.layout());
        }
        let e = Tensor::zeros(&[0, 3], crate::DType::F32).unwrap();
        assert_eq!(
            e.transpose(0, 1).unwrap().try_contiguous().unwrap().shape(),
            [3, 0]
        );
    }

    #[test]
    fn pad_dim_is_cat_with_zeros() {
        let x = Tensor::from_vec((1..=24).map(|i| i as f64).collect(), &[2, 3, 4]).unwrap();
        for (d, len) in [(0usize, 5usize), (1, 7), (2, 6)] {
            let w = x.shape()[d];
            for start in 0..=len - w {
                let mut zs = x.shape().to_vec();
                let mut parts = Vec::new();
                if start > 0 {
                    zs[d] = start;
                    parts.push(Tensor::zeros(&zs, crate::DType::F64).unwrap());
                }
                parts.push(x.clone());
                if len - w - start > 0 {
                    zs[d] = len - w - start;
                    parts.push(Tensor::zeros(&zs, crate::DType::F64).unwrap());
                }
                let want = Tensor::cat(&parts, d as isize).unwrap();
                let got = x.pad_dim(d as isize, start, len).unwrap();
                assert_eq!(got.shape(), want.shape());
                assert_eq!(got.to_f64_vec(), want.to_f64_vec(), "d {d} start {start}");
            }
        }
        // A view as input, and a narrowed slice of an i64 tensor.
        let v = x.transpose(0, 2).unwrap();
        let got = v.pad_dim(1, 1, 4).unwrap();
        let z = Tensor::zeros(&[4, 1, 2], crate::DType::F64).unwrap();
        let want = Tensor::cat(&[z, v.clone()], 1).unwrap();
        assert_eq!(got.to_f64_vec(), want.to_f64_vec());
        assert!(x.pad_dim(1, 1, 3).is_err());
        assert!(x.pad_dim(3, 0, 3).is_err());
        assert!(x.pad_dim(1, usize::MAX, 3).is_err());
    }

    #[test]
    fn cat_reads_views_and_dense_parts() {
        let a = t(6, &[2, 3]);
        let b = t(6, &[3, 2]).transpose(0, 1).unwrap();
        let c = Tensor::cat(&[a.clone(), b.clone(), a.clone()], 0).unwrap();
        let mut want = a.to_vec::<i64>().unwrap();
        want.extend(b.to_vec::<i64>().unwrap());
        want.extend(a.to_vec::<i64>().unwrap());
        assert_eq!(c.to_vec::<i64>().unwrap(), want);
    }

    #[test]
    fn bad_views_are_errors() {
        let x = t(6, &[2, 3]);
        assert!(x.view(&[4, -1]).is_err());
        assert!(x.view(&[-1, -1]).is_err());
        assert!(x.permute(&[0, 0]).is_err());
        assert!(x.permute(&[0]).is_err());
        assert!(x.narrow(1, 2, 2).is_err());
        assert!(x.narrow(5, 0, 1).is_err());
        assert!(x.expand(&[4, 3]).is_err());
        assert!(x.unsqueeze(3).is_err());
        assert!(x.transpose(0, 2).is_err());
    }
}
