//! 2-D pooling over `(N, C, H, W)` tensors and its backward passes, with PyTorch's output-size
//! rules. Work is split over the `N·C` planes (contiguous plane ranges, one per thread, through
//! [`Par::run_parts`](crate::threads::Par::run_parts)); inside a plane every sum (window
//! averages, the gradient scatter of the backward passes) runs in a fixed order, so all kernels
//! here are thread-invariant. The common 2×2, stride-2 max pooling has AVX-512 and AVX2 kernels
//! over all planes at once (see `pool_2x2_planes`), with the values and indices of the scalar
//! scan.
//!
//! Layout: this file holds the API (argument checks, output sizes, dispatch); `kernel` holds
//! the kernels it hands the thread team to.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::{Tensor, invalid};

mod kernel;

use kernel::{
    SERIAL_MAX, Window, for_each_plane, pool_2x2_planes, split_planes, unpool_2x2,
    window_mean_planes,
};

/// Declares the pooling ops: one thread-invariant implementation each (`NAME.per_plane`:
/// parallel over planes, each plane's sums in a fixed order), through dispatch so that they can
/// be exempted, pinned, listed and traced like every op.
macro_rules! pool_ops {
    ($($(#[$doc:meta])* $id:ident = $name:literal;)*) => {
        $(
        $(#[$doc])*
        pub static $id: Op<()> = Op {
            name: $name,
            impls: &[Impl {
                algo: concat!($name, ".per_plane"),
                guarantee: Guarantee::ThreadInvariant,
                f: (),
            }],
        };
        )*
        /// This family's ops (collected by [`crate::ops::builtin_ops`]).
        pub fn ops() -> Vec<crate::op::OpInfo> {
            vec![$($id.info()),*]
        }
    };
}

pool_ops! {
    /// `F.max_pool2d` (with indices).
    MAX_POOL2D = "max_pool2d";
    /// Its gradient: each output gradient added at its index, in output order.
    MAX_POOL2D_BACKWARD = "max_pool2d_backward";
    /// `F.avg_pool2d`.
    AVG_POOL2D = "avg_pool2d";
    /// Its gradient.
    AVG_POOL2D_BACKWARD = "avg_pool2d_backward";
    /// `F.adaptive_avg_pool2d`.
    ADAPTIVE_AVG_POOL2D = "adaptive_avg_pool2d";
    /// Its gradient.
    ADAPTIVE_AVG_POOL2D_BACKWARD = "adaptive_avg_pool2d_backward";
}

/// A zeroed buffer of `dims`' product elements: [`Error::OutOfMemory`] naming `op` when the
/// size overflows or cannot be allocated (sizes come from the caller: output sizes, shapes).
fn out_buf<T: Clone + Default>(op: &'static str, dims: &[usize]) -> Result<Vec<T>> {
    match dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) => crate::try_filled_vec(op, n, T::default()),
        None => Err(Error::OutOfMemory {
            op,
            bytes: dims
                .iter()
                .fold(core::mem::size_of::<T>() as u128, |a, &d| {
                    a.saturating_mul(d as u128)
                }),
        }),
    }
}

/// An empty buffer with room for `dims`' product elements, with [`out_buf`]'s errors.
fn out_room<T>(op: &'static str, dims: &[usize]) -> Result<Vec<T>> {
    match dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) => Ok(crate::tensor::try_with_capacity(op, n)?),
        None => Err(Error::OutOfMemory {
            op,
            bytes: dims
                .iter()
                .fold(core::mem::size_of::<T>() as u128, |a, &d| {
                    a.saturating_mul(d as u128)
                }),
        }),
    }
}

/// Kernel size, stride, padding and dilation of a 2-D pooling window (PyTorch's arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2d {
    /// `(kh, kw)`.
    pub kernel: (usize, usize),
    /// `(sh, sw)`; PyTorch's default is the kernel size.
    pub stride: (usize, usize),
    /// `(ph, pw)`, at most half the kernel.
    pub padding: (usize, usize),
    /// `(dh, dw)` (max pooling only; 1 for average pooling).
    pub dilation: (usize, usize),
    /// Round the output size up instead of down.
    pub ceil_mode: bool,
}

impl Pool2d {
    /// A `k×k` window with stride `k`, no padding.
    pub fn new(k: usize) -> Self {
        Self {
            kernel: (k, k),
            stride: (k, k),
            padding: (0, 0),
            dilation: (1, 1),
            ceil_mode: false,
        }
    }

    fn out_len(
        &self,
        op: &'static str,
        len: usize,
        k: usize,
        s: usize,
        p: usize,
        d: usize,
    ) -> Result<usize> {
        if k == 0 || s == 0 || d == 0 {
            return Err(invalid(
                op,
                "kernel_size",
                "kernel size, stride and dilation must be positive",
            ));
        }
        if p > k / 2 {
            return Err(invalid(
                op,
                "padding",
                format!(
                    "pad should be at most half of effective kernel size, got pad={p}, kernel={k}"
                ),
            ));
        }
        let span = d.saturating_mul(k - 1).saturating_add(1);
        let padded = len.saturating_add(p.saturating_mul(2));
        if padded < span {
            return Err(invalid(
                op,
                "input",
                format!("input size {len} (padded {padded}) is smaller than the window {span}"),
            ));
        }
        let num = padded - span;
        let mut out = if self.ceil_mode {
            num.div_ceil(s)
        } else {
            num / s
        } + 1;
        // PyTorch: the last window must start inside the input or the left padding.
        if self.ceil_mode && (out - 1).saturating_mul(s) >= len.saturating_add(p) {
            out -= 1;
        }
        Ok(out)
    }

    fn out_hw(&self, op: &'static str, h: usize, w: usize) -> Result<(usize, usize)> {
        Ok((
            self.out_len(
                op,
                h,
                self.kernel.0,
                self.stride.0,
                self.padding.0,
                self.dilation.0,
            )?,
            self.out_len(
                op,
                w,
                self.kernel.1,
                self.stride.1,
                self.padding.1,
                self.dilation.1,
            )?,
        ))
    }
}

fn nchw(op: &'static str, x: &Tensor) -> Result<(usize, usize, usize, usize)> {
    match *x.shape() {
        [n, c, h, w] => Ok((n, c, h, w)),
        _ => Err(invalid(
            op,
            "input",
            format!(
                "expected a 4-D (N, C, H, W) tensor, got shape {:?}",
                x.shape()
            ),
        )),
    }
}

fn float_data<'a>(op: &'static str, x: &'a Tensor) -> Result<&'a [f32]> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType {
            op,
            expected: DType::F32,
            got: x.dtype(),
        });
    }
    x.data::<f32>()
}

impl Tensor {
    /// `F.max_pool2d(x, …, return_indices=True)` for f32 `(N, C, H, W)`: the maxima and their
    /// flat indices `h·W + w` within each plane (the first maximum on ties; NaN wins).
    ///
    /// # Errors
    /// A non-4-D or non-f32 input, a zero kernel/stride/dilation, padding over half the kernel,
    /// or an input smaller than the window.
    pub fn max_pool2d(&self, p: Pool2d) -> Result<(Tensor, Tensor)> {
        const OP: &str = "max_pool2d";
        let (n, c, h, w) = nchw(OP, self)?;
        let (oh, ow) = p.out_hw(OP, h, w)?;
        let x = self.contiguous_for(OP)?;
        let src = float_data(OP, &x)?;
        MAX_POOL2D.run(&[self], |_, par| {
            let mut vals = out_buf::<f32>(OP, &[n, c, oh, ow])?;
            let mut idx = out_buf::<i64>(OP, &[n, c, oh, ow])?;
            let plane = oh * ow;
            // Without padding and with the last window inside (no ceil-mode overhang), every
            // window lies inside the input: no bounds to check.
            let inside = p.padding == (0, 0)
                && oh > 0
                && ow > 0
                && (oh - 1) * p.stride.0 + (p.kernel.0 - 1) * p.dilation.0 < h
                && (ow - 1) * p.stride.1 + (p.kernel.1 - 1) * p.dilation.1 < w;
            // The common 2×2 window with stride 2 (a CNN's `MaxPool2d(2)`): the same comparisons
            // in the same order as the general loop below, unrolled.
            let two_by_two =
                inside && p.kernel == (2, 2) && p.stride == (2, 2) && p.dilation == (1, 1);
            let pool_plane = |pl: usize, (v, ix): (&mut [f32], &mut [i64])| {
                let s = &src[pl * h * w..(pl + 1) * h * w];
                if inside {
                    for i in 0..oh {
                        for j in 0..ow {
                            let (y0, x0) = (i * p.stride.0, j * p.stride.1);
                            let mut best = s[y0 * w + x0];
                            let mut at = y0 * w + x0;
                            for a in 0..p.kernel.0 {
                                let row = (y0 + a * p.dilation.0) * w;
                                for b in 0..p.kernel.1 {
                                    let k = row + x0 + b * p.dilation.1;
                                    let val = s[k];
                                    if val > best || val.is_nan() && !best.is_nan() {
                                        best = val;
                                        at = k;
                                    }
                                }
                            }
                            v[i * ow + j] = best;
                            ix[i * ow + j] = at as i64;
                        }
                    }
                    return;
                }
                for i in 0..oh {
                    for j in 0..ow {
                        let mut best = f32::NEG_INFINITY;
                        let mut at = -1i64;
                        for a in 0..p.kernel.0 {
                            let y =
                                (i * p.stride.0 + a * p.dilation.0) as isize - p.padding.0 as isize;
                            if y < 0 || y >= h as isize {
                                continue;
                            }
                            for b in 0..p.kernel.1 {
                                let xx = (j * p.stride.1 + b * p.dilation.1) as isize
                                    - p.padding.1 as isize;
                                if xx < 0 || xx >= w as isize {
                                    continue;
                                }
                                let k = y as usize * w + xx as usize;
                                let val = s[k];
                                if at < 0 || val > best || val.is_nan() && !best.is_nan() {
                                    best = val;
                                    at = k as i64;
                                }
                            }
                        }
                        v[i * ow + j] = best;
                        ix[i * ow + j] = at;
                    }
                }
            };
            // Planes `p0..` into `v`/`ix` (whole planes).
            let pool_planes = |p0: usize, v: &mut [f32], ix: &mut [i64]| {
                if two_by_two {
                    pool_2x2_planes(src, (h, w), (oh, ow), p0, v, ix);
                    return;
                }
                for (q, vi) in v
                    .chunks_mut(plane.max(1))
                    .zip(ix.chunks_mut(plane.max(1)))
                    .enumerate()
                {
                    pool_plane(p0 + q, vi);
                }
            };
            let planes = n * c;
            // The vector 2×2 kernels take about a cycle per output: on the cnn model's 64×16×8×8
            // input (~10 µs) handing half to a helper thread saved nothing measurable.
            let serial_max = if two_by_two {
                4 * SERIAL_MAX
            } else {
                SERIAL_MAX
            };
            if par.threads() == 1 || src.len() + vals.len() <= serial_max || planes <= 1 {
                pool_planes(0, &mut vals, &mut idx);
            } else {
                let parts = par.threads().min(planes);
                let bounds: Vec<usize> = (0..=parts).map(|p| p * planes / parts).collect();
                let vs = split_planes(&mut vals, plane, &bounds);
                let is = split_planes(&mut idx, plane, &bounds);
                par.run_parts(parts, |p| {
                    let mut v = vs[p].lock().unwrap_or_else(|e| e.into_inner());
                    let mut ix = is[p].lock().unwrap_or_else(|e| e.into_inner());
                    pool_planes(bounds[p], &mut v, &mut ix);
                });
            }
            let (vals, idx) = (
                Tensor::from_vec(vals, &[n, c, oh, ow])?,
                Tensor::from_vec(idx, &[n, c, oh, ow])?,
            );
            Ok((vals, idx))
        })
    }

    /// The gradient of [`max_pool2d`](Self::max_pool2d) with respect to its input: each output
    /// gradient is added at its recorded index, in output order within each plane.
    ///
    /// # Errors
    /// Shapes of `grad_output` and `indices` that differ, an index outside the plane, or an
    /// `input_shape` that is not 4-D.
    pub fn max_pool2d_backward(
        grad_output: &Tensor,
        indices: &Tensor,
        input_shape: &[usize],
    ) -> Result<Tensor> {
        const OP: &str = "max_pool2d_backward";
        let [n, c, h, w] = *input_shape else {
            return Err(invalid(
                OP,
                "input_shape",
                format!("expected 4 dims, got {input_shape:?}"),
            ));
        };
        if grad_output.shape() != indices.shape()
            || grad_output.shape().len() != 4
            || grad_output.shape()[..2] != [n, c]
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: grad_output.shape().to_vec(),
                rhs: indices.shape().to_vec(),
            });
        }
        let g = grad_output.contiguous_for(OP)?;
        let gi = float_data(OP, &g)?;
        let ix = indices.contiguous_for(OP)?;
        let ixs = ix.data::<i64>()?;
        let plane_out = grad_output.shape()[2] * grad_output.shape()[3];
        MAX_POOL2D_BACKWARD.run(&[grad_output, indices], |_, par| {
            let mut out = out_room::<f32>(OP, &[n, c, h, w])?;
            // Fits: `out_room` checked the product.
            let len = n * c * h * w;
            let (oh, ow) = (grad_output.shape()[2], grad_output.shape()[3]);
            if (h, w) == (2 * oh, 2 * ow)
                && unpool_2x2(
                    gi,
                    ixs,
                    (h, w),
                    (oh, ow),
                    &mut out.spare_capacity_mut()[..len],
                ) == Some(true)
            {
                // SAFETY: `unpool_2x2` wrote all `len` elements (it checked every index, too).
                unsafe { out.set_len(len) };
                return Tensor::from_vec(out, input_shape);
            }
            out.resize(len, 0.0);
            // h·w fits: the buffer above holds n·c·h·w elements (n·c ≥ 1 when there are indices).
            let hw = h.saturating_mul(w);
            // One branch-free pass (it vectorises), then a search only when something is out.
            let outside = |k: i64| k < 0 || k as u64 >= hw as u64;
            if ixs.iter().fold(false, |any, &k| any | outside(k))
                && let Some(&bad) = ixs.iter().find(|&&k| outside(k))
            {
                return Err(Error::IndexOutOfRange {
                    op: OP,
                    index: bad,
                    size: hw,
                });
            }
            let work = out.len() + gi.len();
            for_each_plane(par, &mut out, hw, work, |pl, o| {
                let (g, k) = (
                    &gi[pl * plane_out..(pl + 1) * plane_out],
                    &ixs[pl * plane_out..(pl + 1) * plane_out],
                );
                assert_eq!(o.len(), hw);
                for (&gv, &kv) in g.iter().zip(k) {
                    // SAFETY: every index was checked above to lie in 0..hw, and o holds hw.
                    unsafe { *o.get_unchecked_mut(kv as usize) += gv };
                }
            });
            Tensor::from_vec(out, input_shape)
        })
    }

    /// `F.avg_pool2d(x, …, count_include_pad)` for f32 `(N, C, H, W)` (dilation must be 1).
    ///
    /// # Errors
    /// As [`max_pool2d`](Self::max_pool2d), and a dilation other than 1.
    pub fn avg_pool2d(&self, p: Pool2d, count_include_pad: bool) -> Result<Tensor> {
        const OP: &str = "avg_pool2d";
        if p.dilation != (1, 1) {
            return Err(invalid(OP, "dilation", "avg_pool2d has no dilation"));
        }
        let (n, c, h, w) = nchw(OP, self)?;
        let (oh, ow) = p.out_hw(OP, h, w)?;
        let win = |i, j| avg_window(&p, i, j, h, w, count_include_pad);
        window_mean(&AVG_POOL2D, self, (n * c, h, w), (oh, ow), win)
    }

    /// The gradient of [`avg_pool2d`](Self::avg_pool2d) with respect to its input.
    ///
    /// # Errors
    /// If `grad_output` does not have the shape the forward pass gives for `input_shape`.
    pub fn avg_pool2d_backward(
        grad_output: &Tensor,
        input_shape: &[usize],
        p: Pool2d,
        count_include_pad: bool,
    ) -> Result<Tensor> {
        const OP: &str = "avg_pool2d_backward";
        let [n, c, h, w] = *input_shape else {
            return Err(invalid(
                OP,
                "input_shape",
                format!("expected 4 dims, got {input_shape:?}"),
            ));
        };
        let (oh, ow) = p.out_hw(OP, h, w)?;
        let win = |i, j| avg_window(&p, i, j, h, w, count_include_pad);
        window_scatter(
            &AVG_POOL2D_BACKWARD,
            grad_output,
            [n, c, h, w],
            (oh, ow),
            win,
        )
    }

    /// `F.adaptive_avg_pool2d(x, (oh, ow))` for f32 `(N, C, H, W)`: output cell `(i, j)`
    /// averages rows `⌊i·H/oh⌋ .. ⌈(i+1)·H/oh⌉` and the same for columns.
    ///
    /// # Errors
    /// A non-4-D or non-f32 input, or a zero output size.
    pub fn adaptive_avg_pool2d(&self, out_hw: (usize, usize)) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool2d";
        let (n, c, h, w) = nchw(OP, self)?;
        if out_hw.0 == 0 || out_hw.1 == 0 {
            return Err(invalid(OP, "output_size", "output size must be positive"));
        }
        let win = |i, j| adaptive_window(i, j, h, w, out_hw);
        window_mean(&ADAPTIVE_AVG_POOL2D, self, (n * c, h, w), out_hw, win)
    }

    /// The gradient of [`adaptive_avg_pool2d`](Self::adaptive_avg_pool2d) with respect to its
    /// input.
    ///
    /// # Errors
    /// If `grad_output` is not `(N, C, oh, ow)` for a 4-D `input_shape`.
    pub fn adaptive_avg_pool2d_backward(
        grad_output: &Tensor,
        input_shape: &[usize],
    ) -> Result<Tensor> {
        const OP: &str = "adaptive_avg_pool2d_backward";
        let [n, c, h, w] = *input_shape else {
            return Err(invalid(
                OP,
                "input_shape",
                format!("expected 4 dims, got {input_shape:?}"),
            ));
        };
        let &[_, _, oh, ow] = grad_output.shape() else {
            return Err(invalid(
                OP,
                "grad_output",
                format!("expected 4 dims, got {:?}", grad_output.shape()),
            ));
        };
        if oh == 0 || ow == 0 {
            return Err(invalid(OP, "grad_output", "output size must be positive"));
        }
        let win = |i, j| adaptive_window(i, j, h, w, (oh, ow));
        window_scatter(
            &ADAPTIVE_AVG_POOL2D_BACKWARD,
            grad_output,
            [n, c, h, w],
            (oh, ow),
            win,
        )
    }
}

/// Mean over `win(i, j)` of every plane of `x` (`planes × h × w`) into `planes × oh × ow`;
/// each window summed row by row, in a fixed order.
fn window_mean(
    op: &'static Op<()>,
    input: &Tensor,
    (planes, h, w): (usize, usize, usize),
    (oh, ow): (usize, usize),
    win: impl Fn(usize, usize) -> Window + Sync,
) -> Result<Tensor> {
    let x = input.contiguous_for(op.name)?;
    let src = float_data(op.name, &x)?;
    op.run(&[input], |_, par| {
        let mut out = out_buf::<f32>(op.name, &[planes, oh, ow])?;
        let work = out.len() + src.len();
        let (y0, x0, y1, x1, div) = win(0, 0);
        if (oh, ow) == (1, 1) && (y0, x0, y1, x1) == (0, 0, h, w) {
            // One window over each whole plane (global average pooling): a serial chain per
            // plane, as below, but P planes' chains side by side so that they overlap.
            const P: usize = 8;
            let hw = h * w;
            for_each_plane(par, &mut out, P, work, |b, o| {
                let s = &src[b * P * hw..][..o.len() * hw];
                if o.len() == P {
                    let mut acc = [0f32; P];
                    for t in 0..hw {
                        for (k, a) in acc.iter_mut().enumerate() {
                            *a += s[k * hw + t];
                        }
                    }
                    for (o, a) in o.iter_mut().zip(acc) {
                        *o = a / div as f32;
                    }
                } else {
                    for (o, plane) in o.iter_mut().zip(s.chunks_exact(hw.max(1))) {
                        *o = plane.iter().fold(0f32, |a, &v| a + v) / div as f32;
                    }
                }
            });
        } else {
            window_mean_planes(par, &mut out, src, (h, w), (oh, ow), work, &win);
        }
        let mut shape = x.shape().to_vec();
        (shape[2], shape[3]) = (oh, ow);
        Tensor::from_vec(out, &shape)
    })
}

/// The gradient of [`window_mean`]: each output gradient, divided by its window's divisor, is
/// added to every input of the window, in output order within each plane.
fn window_scatter(
    op: &'static Op<()>,
    grad_output: &Tensor,
    input_shape: [usize; 4],
    (oh, ow): (usize, usize),
    win: impl Fn(usize, usize) -> Window + Sync,
) -> Result<Tensor> {
    let [n, c, h, w] = input_shape;
    if grad_output.shape() != [n, c, oh, ow] {
        return Err(Error::ShapeMismatch {
            op: op.name,
            lhs: grad_output.shape().to_vec(),
            rhs: vec![n, c, oh, ow],
        });
    }
    let g = grad_output.contiguous_for(op.name)?;
    let gs = float_data(op.name, &g)?;
    op.run(&[grad_output], |_, par| {
        let mut out = out_buf::<f32>(op.name, &[n, c, h, w])?;
        let work = out.len() + gs.len();
        let (y0, x0, y1, x1, div) = win(0, 0);
        let whole_plane = (oh, ow) == (1, 1) && (y0, x0, y1, x1) == (0, 0, h, w);
        // h·w fits: `out` holds n·c·h·w elements (or is empty, when no plane is visited).
        for_each_plane(par, &mut out, h.saturating_mul(w), work, |pl, o| {
            if whole_plane {
                // Every input gets the one add of the loop below: 0 + g/div (the same bits,
                // −0 included).
                o.fill(0.0 + gs[pl] / div as f32);
                return;
            }
            let g = &gs[pl * oh * ow..(pl + 1) * oh * ow];
            for i in 0..oh {
                for j in 0..ow {
                    let (y0, x0, y1, x1, div) = win(i, j);
                    let v = g[i * ow + j] / div as f32;
                    for y in y0..y1 {
                        for o in &mut o[y * w + x0..y * w + x1] {
                            *o += v;
                        }
                    }
                }
            }
        });
        Tensor::from_vec(out, &input_shape)
    })
}

/// Adaptive pooling's window: rows `⌊i·H/oh⌋ .. ⌈(i+1)·H/oh⌉`, the same for columns.
fn adaptive_window(i: usize, j: usize, h: usize, w: usize, (oh, ow): (usize, usize)) -> Window {
    let (y0, y1) = adaptive_range(i, h, oh);
    let (x0, x1) = adaptive_range(j, w, ow);
    (y0, x0, y1, x1, ((y1 - y0) * (x1 - x0)).max(1))
}

/// `⌊i·len/out⌋ .. ⌈(i+1)·len/out⌉`, exact also where the products overflow `usize`.
fn adaptive_range(i: usize, len: usize, out: usize) -> (usize, usize) {
    match (i.checked_mul(len), (i + 1).checked_mul(len)) {
        (Some(a), Some(b)) => (a / out, b.div_ceil(out)),
        _ => {
            let (i, len, out) = (i as u128, len as u128, out as u128);
            (
                (i * len / out) as usize,
                ((i + 1) * len).div_ceil(out) as usize,
            )
        }
    }
}

/// Window `[y0, y1) × [x0, x1)` clipped to the input, and the divisor PyTorch uses.
fn avg_window(p: &Pool2d, i: usize, j: usize, h: usize, w: usize, include_pad: bool) -> Window {
    let ys = (i * p.stride.0) as isize - p.padding.0 as isize;
    let xs = (j * p.stride.1) as isize - p.padding.1 as isize;
    let ye = (ys + p.kernel.0 as isize).min((h + p.padding.0) as isize);
    let xe = (xs + p.kernel.1 as isize).min((w + p.padding.1) as isize);
    let pool = ((ye - ys) * (xe - xs)) as usize;
    let (y0, x0) = (ys.max(0) as usize, xs.max(0) as usize);
    let (y1, x1) = (ye.min(h as isize) as usize, xe.min(w as isize) as usize);
    let div = if include_pad {
        pool
    } else {
        (y1 - y0) * (x1 - x0)
    };
    (y0, x0, y1, x1, div.max(1))
}
