//! 2-D pooling over `(N, C, H, W)` tensors and its backward passes, with PyTorch's output-size
//! rules. Work is split over the `N·C` planes (contiguous plane ranges, one per thread, through
//! [`Par::run_parts`]); inside a plane every sum (window averages, the gradient scatter of the
//! backward passes) runs in a fixed order, so all kernels here are thread-invariant. The common
//! 2×2, stride-2 max pooling has AVX-512 and AVX2 kernels over all planes at once (see
//! `pool_2x2_planes`), with the values and indices of the scalar scan.

use crate::dispatch::{Guarantee, Impl, Op};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::isa::Isa;
use crate::threads::Par;
use crate::{Tensor, invalid};
use core::mem::MaybeUninit;

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
        pub fn ops() -> Vec<crate::dispatch::OpInfo> {
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
        Some(n) => crate::tensor::try_with_capacity(op, n),
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

/// Planes of at most this many elements in all stay on the calling thread: handing them to
/// the pool costs more than the work. A function of the shapes only; each plane is computed
/// the same way either way, so the choice never changes the bits.
const SERIAL_MAX: usize = 1 << 16;

/// Runs `f(plane, out_plane)` for every `chunk`-element plane of `out`: on the calling thread
/// when the work is small (`work` elements touched in all, at most [`SERIAL_MAX`]) or there is
/// one thread, else over contiguous plane ranges, one per thread ([`Par::run_parts`]).
fn for_each_plane<T: Send>(
    par: &Par,
    out: &mut [T],
    chunk: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let chunk = chunk.max(1);
    let planes = out.len() / chunk;
    if par.threads() == 1 || work <= SERIAL_MAX || planes <= 1 {
        out.chunks_mut(chunk).enumerate().for_each(|(i, o)| f(i, o));
        return;
    }
    let parts = par.threads().min(planes);
    let bounds: Vec<usize> = (0..=parts).map(|p| p * planes / parts).collect();
    let slots = split_planes(out, chunk, &bounds);
    par.run_parts(parts, |p| {
        let mut o = slots[p].lock().unwrap_or_else(|e| e.into_inner());
        for (q, o) in o.chunks_mut(chunk).enumerate() {
            f(bounds[p] + q, o);
        }
    });
}

/// `out` cut at planes `bounds` (`chunk` elements each; the last range takes any rest), each
/// piece behind a lock so that [`Par::run_parts`]' pieces can take theirs.
fn split_planes<'a, T>(
    out: &'a mut [T],
    chunk: usize,
    bounds: &[usize],
) -> Vec<std::sync::Mutex<&'a mut [T]>> {
    let mut slots = Vec::with_capacity(bounds.len());
    let mut rest = out;
    for (k, w) in bounds.windows(2).enumerate() {
        let len = if k + 2 == bounds.len() {
            rest.len()
        } else {
            (w[1] - w[0]) * chunk
        };
        let (a, b) = rest.split_at_mut(len);
        slots.push(std::sync::Mutex::new(a));
        rest = b;
    }
    slots
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

/// One plane `s` (row length `w`) of a 2×2, stride-2 max pooling whose windows all lie inside:
/// `v`/`ix` hold `ow` outputs per row. Each window is scanned as the general loop scans it
/// (row by row; a later value wins if greater, or if NaN over a non-NaN), so the values and
/// indices are the general loop's.
fn pool_2x2(s: &[f32], w: usize, ow: usize, v: &mut [f32], ix: &mut [i64]) {
    // Branch-free (selects, not jumps): with random data each comparison is a coin flip.
    #[inline(always)]
    fn take(best: &mut f32, at: &mut i64, val: f32, k: i64) {
        let wins = (val > *best) | (val.is_nan() & !best.is_nan());
        *best = if wins { val } else { *best };
        *at = if wins { k } else { *at };
    }
    for (i, (vr, ir)) in v
        .chunks_exact_mut(ow)
        .zip(ix.chunks_exact_mut(ow))
        .enumerate()
    {
        let top = 2 * i * w;
        let (r0, r1) = (&s[top..][..2 * ow], &s[top + w..][..2 * ow]);
        let (top, w) = (top as i64, w as i64);
        for (j, (o, oi)) in vr.iter_mut().zip(ir.iter_mut()).enumerate() {
            let k = top + 2 * j as i64;
            let (mut best, mut at) = (r0[2 * j], k);
            take(&mut best, &mut at, r0[2 * j + 1], k + 1);
            take(&mut best, &mut at, r1[2 * j], k + w);
            take(&mut best, &mut at, r1[2 * j + 1], k + w + 1);
            *o = best;
            *oi = at;
        }
    }
}

/// Planes `p0..` of a 2×2, stride-2 max pooling whose windows all lie inside (`v`/`ix` hold
/// whole output planes): the vector kernel where the instruction set and the shape allow it,
/// else [`pool_2x2`] plane by plane. Both give the same values and indices.
///
/// # Two pairs instead of a scan of four
/// The scan of a window `a, b` (top row) `c, d` (bottom row) keeps the first NaN if there is
/// one (nothing replaces a NaN, and a NaN replaces any non-NaN), else the first maximum (a
/// later value wins only if strictly greater; `−0` and `+0` tie). The kernel takes `h₀` =
/// the scan of `a, b`, `h₁` = the scan of `c, d`, then the scan of `h₀, h₁`: if `a` or `b` is
/// NaN, `h₀` is the first NaN of the window and stays; else if `c` or `d` is NaN, `h₁` is the
/// first NaN of the window and replaces `h₀`; else no NaN: `h₁` replaces `h₀` only if it is
/// strictly greater, i.e. if the window's maximum lies only in the bottom row, and then `h₁`
/// is its first occurrence; otherwise `h₀`, the first maximum of the top row, is the first of
/// the window. So both give the same element: the same value bits and the same index.
fn pool_2x2_planes(
    src: &[f32],
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    p0: usize,
    v: &mut [f32],
    ix: &mut [i64],
) {
    let plane = oh * ow;
    #[cfg(target_arch = "x86_64")]
    if let Some(planes) = v.len().checked_div(plane) {
        let s = &src[p0 * h * w..(p0 + planes) * h * w];
        // Stacked planes: every input row is in a window, so the planes form one tall image.
        let flat = w == 2 * ow && h == 2 * oh;
        if Isa::Avx512.enabled() {
            if ow % 16 == 0 {
                // SAFETY: AVX-512F is available (`enabled` implies it); the shape conditions
                // hold.
                unsafe { x86::rows_avx512(s, (h, w), (oh, ow), v, ix) };
                return;
            }
            if flat && matches!(ow, 1 | 2 | 4 | 8) && plane % 16 == 0 {
                // SAFETY: as above.
                unsafe { x86::flat_avx512(s, (h, w), (oh, ow), v, ix) };
                return;
            }
        }
        if Isa::Avx2.enabled() {
            if ow % 8 == 0 {
                // SAFETY: AVX2 is available; the shape conditions hold.
                unsafe { x86::rows_avx2(s, (h, w), (oh, ow), v, ix) };
                return;
            }
            if flat && matches!(ow, 1 | 2 | 4) && plane % 8 == 0 {
                // SAFETY: as above.
                unsafe { x86::flat_avx2(s, (h, w), (oh, ow), v, ix) };
                return;
            }
        }
    }
    for (q, (v, ix)) in v
        .chunks_exact_mut(plane.max(1))
        .zip(ix.chunks_exact_mut(plane.max(1)))
        .enumerate()
    {
        let pl = p0 + q;
        pool_2x2(&src[pl * h * w..(pl + 1) * h * w], w, ow, v, ix);
    }
}

/// The gradient of a 2×2, stride-2 max pooling that covers the input exactly
/// (`(h, w) = (2·oh, 2·ow)`), when every index lies in its own output's window: each window
/// then receives its one gradient at its index and `+0` elsewhere, and the scatter's single
/// add `0 + g` is written directly (the same bits, `−0` becoming `+0` as there), into
/// every element of `out`: `Some(true)`. `Some(false)` (`out` partly written) where an index
/// lies outside its window (or outside the plane), `None` (nothing written) where no vector
/// kernel fits the shape; the caller then runs the general scatter.
fn unpool_2x2(
    g: &[f32],
    k: &[i64],
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    out: &mut [MaybeUninit<f32>],
) -> Option<bool> {
    let plane = oh * ow;
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx512.enabled() && plane > 0 && g.len() == k.len() && out.len() == 4 * g.len() {
        if ow % 16 == 0 {
            // SAFETY: AVX-512F is available; the lengths are checked.
            return Some(unsafe { x86::unpool_rows_avx512(g, k, (h, w), (oh, ow), out) });
        }
        if matches!(ow, 1 | 2 | 4 | 8) && plane % 16 == 0 {
            // SAFETY: as above.
            return Some(unsafe { x86::unpool_flat_avx512(g, k, (h, w), (oh, ow), out) });
        }
    }
    let _ = (g, k, h, w, out, plane);
    None
}

/// The AVX-512 2×2 max pooling: 16 outputs per step, each window as two pairs (see
/// [`pool_2x2_planes`]), every comparison a mask.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;
    use core::mem::MaybeUninit;

    /// Where `val` replaces `best` in the scan: `val > best`, or `val` NaN and `best` not.
    /// `!(best >= val)` is true when either is NaN; masked by "`best` is not NaN".
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn wins(best: __m512, val: __m512) -> __mmask16 {
        let ord = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
        _mm512_mask_cmp_ps_mask::<_CMP_NGE_UQ>(ord, best, val)
    }

    /// The pair scans of 16 horizontal pairs held in `lo`, `hi` (32 consecutive values):
    /// the kept values and where the right one was kept.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn pairs(lo: __m512, hi: __m512) -> (__m512, __mmask16) {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let a = _mm512_permutex2var_ps(lo, even, hi);
        let b = _mm512_permutex2var_ps(lo, odd, hi);
        let m = wins(a, b);
        (_mm512_mask_blend_ps(m, a, b), m)
    }

    /// 16 outputs from their top pairs `top` (right kept where `tm`) and bottom pairs `bot`
    /// (`bm`): values to `v`, indices `base + lane_base + offset` to `ix`.
    ///
    /// # Safety
    /// `v` and `ix` must hold 16 elements.
    #[target_feature(enable = "avx512f")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish(
        top: __m512,
        tm: __mmask16,
        bot: __m512,
        bm: __mmask16,
        base: __m512i,
        lane_base: [__m512i; 2],
        w: __m512i,
        v: *mut f32,
        ix: *mut i64,
    ) {
        let vm = wins(top, bot);
        // The right column where the kept pair kept its right value.
        let right = (vm & bm) | (!vm & tm);
        let one = _mm512_set1_epi64(1);
        for (half, lb) in lane_base.into_iter().enumerate() {
            let (vh, rh) = ((vm >> (8 * half)) as u8, (right >> (8 * half)) as u8);
            let mut k = _mm512_add_epi64(base, lb);
            k = _mm512_mask_add_epi64(k, vh, k, w);
            k = _mm512_mask_add_epi64(k, rh, k, one);
            // SAFETY: the caller's bounds.
            unsafe { _mm512_storeu_si512(ix.add(8 * half).cast(), k) };
        }
        // SAFETY: the caller's bounds.
        unsafe { _mm512_storeu_ps(v, _mm512_mask_blend_ps(vm, top, bot)) };
    }

    /// `f(lane)` for 16 lanes, as two vectors of 8.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn lanes(f: impl Fn(i64) -> i64) -> [__m512i; 2] {
        let l: [i64; 16] = core::array::from_fn(|k| f(k as i64));
        // SAFETY: `l` holds 16 values.
        unsafe {
            [
                _mm512_loadu_si512(l.as_ptr().cast()),
                _mm512_loadu_si512(l.as_ptr().add(8).cast()),
            ]
        }
    }

    /// Stamps the row-wise kernel for one instruction set from one template: planes of
    /// `(h, w)` with `ow` a multiple of `$n`, each output row in steps of `$n` outputs, from
    /// `2·$n` values of its top and of its bottom input row (`$pairs`, then `$finish`).
    macro_rules! rows_kernel {
        ($(#[$m:meta])* $name:ident, $feat:literal, $n:literal, $load:ident, $set1:ident,
         $lanes:ident, $pairs:ident, $finish:ident) => {
            $(#[$m])*
            ///
            /// # Safety
            /// The CPU has the target feature; `s` holds `v.len() / (oh·ow)` planes of `h·w`
            /// values and `ix` as many elements as `v`.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name(
                s: &[f32],
                (h, w): (usize, usize),
                (oh, ow): (usize, usize),
                v: &mut [f32],
                ix: &mut [i64],
            ) {
                let planes = v.len() / (oh * ow);
                assert!(
                    s.len() >= planes * h * w
                        && ix.len() == v.len()
                        && 2 * oh <= h
                        && 2 * ow <= w
                );
                let lane_base = $lanes(|l| 2 * l);
                let wv = $set1(w as i64);
                let (sp, vp, ip) = (s.as_ptr(), v.as_mut_ptr(), ix.as_mut_ptr());
                for pl in 0..planes {
                    for i in 0..oh {
                        let top = pl * h * w + 2 * i * w;
                        let out = (pl * oh + i) * ow;
                        for j in (0..ow).step_by($n) {
                            // SAFETY: columns 2j..2j + 2·$n ≤ w of rows 2i, 2i + 1 < h of
                            // plane pl, and outputs out + j..+$n ≤ (pl·oh + i + 1)·ow, all in
                            // bounds (asserted).
                            unsafe {
                                let t = sp.add(top + 2 * j);
                                let (tv, tm) = $pairs($load(t), $load(t.add($n)));
                                let b = t.add(w);
                                let (bv, bm) = $pairs($load(b), $load(b.add($n)));
                                let base = $set1((2 * i * w + 2 * j) as i64);
                                $finish(
                                    tv,
                                    tm,
                                    bv,
                                    bm,
                                    base,
                                    lane_base,
                                    wv,
                                    vp.add(out + j),
                                    ip.add(out + j),
                                );
                            }
                        }
                    }
                }
            }
        };
    }

    rows_kernel!(
        /// AVX-512: 16 outputs per step.
        rows_avx512,
        "avx512f",
        16,
        _mm512_loadu_ps,
        _mm512_set1_epi64,
        lanes,
        pairs,
        finish
    );
    rows_kernel!(
        /// AVX2: 8 outputs per step.
        rows_avx2,
        "avx2",
        8,
        _mm256_loadu_ps,
        _mm256_set1_epi64x,
        lanes2,
        pairs2,
        finish2
    );

    /// Planes of `(2·oh, 2·ow)` with `ow` one of 1, 2, 4, 8 and `oh·ow` a multiple of 16: the
    /// planes stack into one tall image, and 16 consecutive outputs (`16/ow` output rows of
    /// one plane) come from 64 consecutive inputs: their pair scans, then the top and bottom
    /// rows' pairs gathered by a permutation.
    ///
    /// # Safety
    /// AVX-512F; `s` holds `v.len() / (oh·ow)` planes of `h·w` values and `ix` as many
    /// elements as `v`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn flat_avx512(
        s: &[f32],
        (h, w): (usize, usize),
        (oh, ow): (usize, usize),
        v: &mut [f32],
        ix: &mut [i64],
    ) {
        let plane = oh * ow;
        let outs = v.len() / plane * plane;
        assert!(s.len() >= 4 * outs && ix.len() == v.len() && h == 2 * oh && w == 2 * ow);
        assert!(matches!(ow, 1 | 2 | 4 | 8) && plane % 16 == 0);
        // 32 pairs (two vectors, `32/(2·ow)` row pairs of `ow` top then `ow` bottom pairs):
        // output lane l is row pair l / ow, column l % ow.
        let (owi, wi) = (ow as i32, w as i64);
        let top_at: [i32; 16] =
            core::array::from_fn(|l| (l as i32 / owi) * 2 * owi + l as i32 % owi);
        let bot_at: [i32; 16] = core::array::from_fn(|l| top_at[l] + owi);
        // SAFETY: 16 values each.
        let (top_at, bot_at) = unsafe {
            (
                _mm512_loadu_si512(top_at.as_ptr().cast()),
                _mm512_loadu_si512(bot_at.as_ptr().cast()),
            )
        };
        let lane_base = lanes(|l| 2 * wi * (l / ow as i64) + 2 * (l % ow as i64));
        let wv = _mm512_set1_epi64(wi);
        let one = _mm512_set1_epi32(1);
        let (sp, vp, ip) = (s.as_ptr(), v.as_mut_ptr(), ix.as_mut_ptr());
        for o in (0..outs).step_by(16) {
            // The block lies in one plane (16 divides the plane size); its first output's
            // window starts at in-plane index 2w·(row) with row = (o mod plane) / ow.
            let base = _mm512_set1_epi64(2 * wi * ((o % plane) / ow) as i64);
            // SAFETY: inputs 4o..4o + 64 ≤ 4·outs ≤ s.len(); outputs o..o + 16 ≤ outs.
            unsafe {
                let p = sp.add(4 * o);
                let (h0, m0) = pairs(_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                let (h1, m1) = pairs(_mm512_loadu_ps(p.add(32)), _mm512_loadu_ps(p.add(48)));
                let tv = _mm512_permutex2var_ps(h0, top_at, h1);
                let bv = _mm512_permutex2var_ps(h0, bot_at, h1);
                // The pairs' masks travel with them as 0/1 lanes.
                let (k0, k1) = (
                    _mm512_maskz_mov_epi32(m0, one),
                    _mm512_maskz_mov_epi32(m1, one),
                );
                let tm = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(k0, top_at, k1), one);
                let bm = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(k0, bot_at, k1), one);
                finish(tv, tm, bv, bm, base, lane_base, wv, vp.add(o), ip.add(o));
            }
        }
    }

    /// Which of `{0, 1, w, w + 1}` each `k − base − lane_base` is, for 16 indices `k`:
    /// masks `[top left, top right, bottom left, bottom right]`, or `None` if some index is
    /// none of them (outside its window).
    ///
    /// # Safety
    /// `k` must hold 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn window_slots(
        k: *const i64,
        base: __m512i,
        lane_base: [__m512i; 2],
        w: i64,
    ) -> Option<[__mmask16; 4]> {
        let mut m = [0 as __mmask16; 4];
        for (half, lb) in lane_base.into_iter().enumerate() {
            // SAFETY: the caller's bounds.
            let kv = unsafe { _mm512_loadu_si512(k.add(8 * half).cast()) };
            let d = _mm512_sub_epi64(kv, _mm512_add_epi64(base, lb));
            for (s, off) in [0, 1, w, w + 1].into_iter().enumerate() {
                let e = _mm512_cmpeq_epi64_mask(d, _mm512_set1_epi64(off));
                m[s] |= (e as __mmask16) << (8 * half);
            }
        }
        (m[0] | m[1] | m[2] | m[3] == 0xFFFF).then_some(m)
    }

    /// 16 gradients `0 + g` placed in their slots: the top row's pairs and the bottom row's
    /// pairs, each as two vectors of 8 interleaved (left, right) pairs.
    ///
    /// # Safety
    /// `g` must hold 16 values.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn slot_pairs(g: *const f32, m: [__mmask16; 4]) -> [__m512; 4] {
        // SAFETY: the caller's bounds.
        let v = _mm512_add_ps(_mm512_setzero_ps(), unsafe { _mm512_loadu_ps(g) });
        let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        let (tl, tr) = (_mm512_maskz_mov_ps(m[0], v), _mm512_maskz_mov_ps(m[1], v));
        let (bl, br) = (_mm512_maskz_mov_ps(m[2], v), _mm512_maskz_mov_ps(m[3], v));
        [
            _mm512_permutex2var_ps(tl, lo, tr),
            _mm512_permutex2var_ps(tl, hi, tr),
            _mm512_permutex2var_ps(bl, lo, br),
            _mm512_permutex2var_ps(bl, hi, br),
        ]
    }

    /// [`super::unpool_2x2`] for `ow` a multiple of 16: each output row in steps of 16.
    ///
    /// # Safety
    /// AVX-512F; `out.len() = 4·g.len() = 4·k.len()`, a whole number of `(2·oh, 2·ow)` planes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn unpool_rows_avx512(
        g: &[f32],
        k: &[i64],
        (h, w): (usize, usize),
        (oh, ow): (usize, usize),
        out: &mut [MaybeUninit<f32>],
    ) -> bool {
        let planes = g.len() / (oh * ow);
        assert!(out.len() == planes * h * w && k.len() == g.len() && (h, w) == (2 * oh, 2 * ow));
        let lane_base = lanes(|l| 2 * l);
        let (gp, kp, op) = (g.as_ptr(), k.as_ptr(), out.as_mut_ptr().cast::<f32>());
        for pl in 0..planes {
            for i in 0..oh {
                let top = pl * h * w + 2 * i * w;
                let o = (pl * oh + i) * ow;
                for j in (0..ow).step_by(16) {
                    let base = _mm512_set1_epi64((2 * i * w + 2 * j) as i64);
                    // SAFETY: outputs o + j..+16 ≤ (pl·oh + i + 1)·ow and columns
                    // 2j..2j + 32 ≤ w of rows 2i, 2i + 1 of plane pl, in bounds (asserted).
                    unsafe {
                        let Some(m) = window_slots(kp.add(o + j), base, lane_base, w as i64) else {
                            return false;
                        };
                        let [t0, t1, b0, b1] = slot_pairs(gp.add(o + j), m);
                        let t = op.add(top + 2 * j);
                        _mm512_storeu_ps(t, t0);
                        _mm512_storeu_ps(t.add(16), t1);
                        _mm512_storeu_ps(t.add(w), b0);
                        _mm512_storeu_ps(t.add(w + 16), b1);
                    }
                }
            }
        }
        true
    }

    /// [`super::unpool_2x2`] for `ow` one of 1, 2, 4, 8 and `oh·ow` a multiple of 16: the
    /// planes stacked, 16 outputs writing 64 consecutive inputs (the inverse of
    /// [`flat_avx512`]'s gathering).
    ///
    /// # Safety
    /// As [`unpool_rows_avx512`].
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn unpool_flat_avx512(
        g: &[f32],
        k: &[i64],
        (h, w): (usize, usize),
        (oh, ow): (usize, usize),
        out: &mut [MaybeUninit<f32>],
    ) -> bool {
        let plane = oh * ow;
        let outs = g.len();
        assert!(out.len() == 4 * outs && k.len() == outs && (h, w) == (2 * oh, 2 * ow));
        assert!(matches!(ow, 1 | 2 | 4 | 8) && plane % 16 == 0 && outs.is_multiple_of(plane));
        // Input float f of the 16 in destination vector q (of 4) lies in row pair
        // r = (16q + f)/(4·ow), top or bottom row, column pair j, side f % 2: it takes output
        // l = r·ow + j, from the top (first source) or bottom (second) pairs of its half.
        let four = 4 * ow;
        let at = |q: usize| -> [i32; 16] {
            core::array::from_fn(|f| {
                let x = 16 * q + f;
                let (r, c) = (x / four, x % four);
                let (bottom, c) = if c < 2 * ow { (0, c) } else { (1, c - 2 * ow) };
                let l = r * ow + c / 2;
                (16 * bottom + 2 * (l % 8) + c % 2) as i32
            })
        };
        let (a0, a1) = (at(0), at(1));
        // SAFETY: 16 values each.
        let (a0, a1) = unsafe {
            (
                _mm512_loadu_si512(a0.as_ptr().cast()),
                _mm512_loadu_si512(a1.as_ptr().cast()),
            )
        };
        let wi = w as i64;
        let lane_base = lanes(|l| 2 * wi * (l / ow as i64) + 2 * (l % ow as i64));
        let (gp, kp, op) = (g.as_ptr(), k.as_ptr(), out.as_mut_ptr().cast::<f32>());
        for o in (0..outs).step_by(16) {
            let base = _mm512_set1_epi64(2 * wi * ((o % plane) / ow) as i64);
            // SAFETY: outputs o..o + 16 ≤ outs and inputs 4o..4o + 64 ≤ out.len() (asserted).
            unsafe {
                let Some(m) = window_slots(kp.add(o), base, lane_base, wi) else {
                    return false;
                };
                let [t0, t1, b0, b1] = slot_pairs(gp.add(o), m);
                let p = op.add(4 * o);
                _mm512_storeu_ps(p, _mm512_permutex2var_ps(t0, a0, b0));
                _mm512_storeu_ps(p.add(16), _mm512_permutex2var_ps(t0, a1, b0));
                _mm512_storeu_ps(p.add(32), _mm512_permutex2var_ps(t1, a0, b1));
                _mm512_storeu_ps(p.add(48), _mm512_permutex2var_ps(t1, a1, b1));
            }
        }
        true
    }

    /// [`wins`] with AVX2: all-ones lanes where `val` replaces `best`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn wins2(best: __m256, val: __m256) -> __m256 {
        let ord = _mm256_cmp_ps::<_CMP_ORD_Q>(best, best);
        _mm256_and_ps(ord, _mm256_cmp_ps::<_CMP_NGE_UQ>(best, val))
    }

    /// [`pairs`] with AVX2: the pair scans of 8 horizontal pairs held in `lo`, `hi`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn pairs2(lo: __m256, hi: __m256) -> (__m256, __m256) {
        // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the middle 64-bit lanes swapped.
        let fix = |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(v)));
        let a = fix(_mm256_shuffle_ps::<0x88>(lo, hi));
        let b = fix(_mm256_shuffle_ps::<0xDD>(lo, hi));
        let m = wins2(a, b);
        (_mm256_blendv_ps(a, b, m), m)
    }

    /// [`finish`] with AVX2: 8 outputs.
    ///
    /// # Safety
    /// `v` and `ix` must hold 8 elements.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish2(
        top: __m256,
        tm: __m256,
        bot: __m256,
        bm: __m256,
        base: __m256i,
        lane_base: [__m256i; 2],
        w: __m256i,
        v: *mut f32,
        ix: *mut i64,
    ) {
        let vm = wins2(top, bot);
        let right = _mm256_castps_si256(_mm256_blendv_ps(tm, bm, vm));
        let vmi = _mm256_castps_si256(vm);
        let one = _mm256_set1_epi64x(1);
        let halves = [
            (_mm256_castsi256_si128(vmi), _mm256_castsi256_si128(right)),
            (
                _mm256_extracti128_si256::<1>(vmi),
                _mm256_extracti128_si256::<1>(right),
            ),
        ];
        for (k, ((vh, rh), lb)) in halves.into_iter().zip(lane_base).enumerate() {
            // The 32-bit masks widened to 64-bit lanes (all ones stay all ones).
            let (vh, rh) = (_mm256_cvtepi32_epi64(vh), _mm256_cvtepi32_epi64(rh));
            let mut i = _mm256_add_epi64(base, lb);
            i = _mm256_add_epi64(i, _mm256_and_si256(vh, w));
            i = _mm256_add_epi64(i, _mm256_and_si256(rh, one));
            // SAFETY: the caller's bounds.
            unsafe { _mm256_storeu_si256(ix.add(4 * k).cast(), i) };
        }
        // SAFETY: the caller's bounds.
        unsafe { _mm256_storeu_ps(v, _mm256_blendv_ps(top, bot, vm)) };
    }

    /// `f(lane)` for 8 lanes, as two vectors of 4.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lanes2(f: impl Fn(i64) -> i64) -> [__m256i; 2] {
        let l: [i64; 8] = core::array::from_fn(|k| f(k as i64));
        // SAFETY: `l` holds 8 values.
        unsafe {
            [
                _mm256_loadu_si256(l.as_ptr().cast()),
                _mm256_loadu_si256(l.as_ptr().add(4).cast()),
            ]
        }
    }

    /// [`flat_avx512`] with AVX2, for `ow` one of 1, 2, 4 and `oh·ow` a multiple of 8: 8
    /// outputs from 32 consecutive inputs.
    ///
    /// # Safety
    /// AVX2; `s` holds `v.len() / (oh·ow)` planes of `h·w` values and `ix` as many elements
    /// as `v`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn flat_avx2(
        s: &[f32],
        (h, w): (usize, usize),
        (oh, ow): (usize, usize),
        v: &mut [f32],
        ix: &mut [i64],
    ) {
        let plane = oh * ow;
        let outs = v.len() / plane * plane;
        assert!(s.len() >= 4 * outs && ix.len() == v.len() && h == 2 * oh && w == 2 * ow);
        assert!(matches!(ow, 1 | 2 | 4) && plane % 8 == 0);
        // Each vector of 8 pairs holds 8/(2·ow) row pairs of `ow` top then `ow` bottom pairs:
        // gather its tops into the low half and its bottoms into the high half.
        let owi = ow as i32;
        let split: [i32; 8] = core::array::from_fn(|l| {
            let (half, k) = (l as i32 / 4, l as i32 % 4);
            (k / owi) * 2 * owi + half * owi + k % owi
        });
        // SAFETY: 8 values.
        let split = unsafe { _mm256_loadu_si256(split.as_ptr().cast()) };
        let lane_base = lanes2(|l| 2 * w as i64 * (l / ow as i64) + 2 * (l % ow as i64));
        let wv = _mm256_set1_epi64x(w as i64);
        let (sp, vp, ip) = (s.as_ptr(), v.as_mut_ptr(), ix.as_mut_ptr());
        for o in (0..outs).step_by(8) {
            // As in `flat_avx512`: the block lies in one plane.
            let base = _mm256_set1_epi64x((2 * w * ((o % plane) / ow)) as i64);
            // SAFETY: inputs 4o..4o + 32 ≤ 4·outs ≤ s.len(); outputs o..o + 8 ≤ outs.
            unsafe {
                let p = sp.add(4 * o);
                let (h0, m0) = pairs2(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
                let (h1, m1) = pairs2(_mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24)));
                let (h0, m0) = (
                    _mm256_permutevar8x32_ps(h0, split),
                    _mm256_permutevar8x32_ps(m0, split),
                );
                let (h1, m1) = (
                    _mm256_permutevar8x32_ps(h1, split),
                    _mm256_permutevar8x32_ps(m1, split),
                );
                let tv = _mm256_permute2f128_ps::<0x20>(h0, h1);
                let bv = _mm256_permute2f128_ps::<0x31>(h0, h1);
                let tm = _mm256_permute2f128_ps::<0x20>(m0, m1);
                let bm = _mm256_permute2f128_ps::<0x31>(m0, m1);
                finish2(tv, tm, bv, bm, base, lane_base, wv, vp.add(o), ip.add(o));
            }
        }
    }
}

/// A pooling window: `(y0, x0, y1, x1, divisor)` for output cell `(i, j)`.
type Window = (usize, usize, usize, usize, usize);

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

/// The general case of [`window_mean`]: each window summed row by row.
fn window_mean_planes(
    par: &Par,
    out: &mut [f32],
    src: &[f32],
    (h, w): (usize, usize),
    (oh, ow): (usize, usize),
    work: usize,
    win: &(impl Fn(usize, usize) -> Window + Sync),
) {
    for_each_plane(par, out, oh * ow, work, |pl, o| {
        let s = &src[pl * h * w..(pl + 1) * h * w];
        for i in 0..oh {
            for j in 0..ow {
                let (y0, x0, y1, x1, div) = win(i, j);
                let mut sum = 0f32;
                for y in y0..y1 {
                    for xx in x0..x1 {
                        sum += s[y * w + xx];
                    }
                }
                o[i * ow + j] = sum / div as f32;
            }
        }
    });
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
