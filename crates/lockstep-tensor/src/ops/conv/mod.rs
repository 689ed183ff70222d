//! 2-D convolution (f32, NCHW) and its two backward primitives, on lockstep's GEMM.
//!
//! | op | implementations (algorithm id, guarantee) |
//! |---|---|
//! | `conv2d` | `conv2d.im2col_gemm` (thread-invariant), `conv2d.direct_1x1` (1×1, stride 1, no padding: the input is the GEMM operand, no copy), `conv2d.depthwise_direct` (groups = C_in = C_out), `conv2d.winograd_f4x3` (3×3, stride 1: thread-invariant, see [`winograd`](self#winograd)) |
//! | `conv2d_input_grad` | `conv2d_input_grad.gemm_col2im` (thread-invariant), `conv2d_input_grad.winograd_f4x3` |
//! | `conv_transpose2d` | `conv_transpose2d.gemm_col2im`, `conv_transpose2d.winograd_f4x3`: the input gradient's kernels under their own name (`transpose.rs`) |
//! | `conv2d_weight_grad` | `conv2d_weight_grad.fixed_parts` (the batch cut into a number of parts fixed by N, each one GEMM on one thread, added in part order: thread-invariant), `conv2d_weight_grad.batch_partials` (one part of the batch per thread, added as threads finish: not thread-invariant), `conv2d_weight_grad.winograd_f4x3` (the batch's tiles cut into ranges fixed by the shape, added in order: thread-invariant, parallel even for one sample) |
//! | `conv2d_weight_grad_blocks` | `conv2d_weight_grad_blocks.implicit`: the weight gradient of a batch cut into blocks of samples, each block's as its own `conv2d_weight_grad` call computes it, added in a fixed tree, in one call (invariant seeding's micro-shard sum; thread-invariant; see [`Tensor::conv2d_backward_weight_blocks`](crate::Tensor::conv2d_backward_weight_blocks)) |
//!
//! With benchmark mode off, a heuristic of the shapes chooses (so the choice never depends on
//! timing): the direct kernels for 1×1 and depthwise shapes; im2col + GEMM otherwise. Winograd
//! (fast, about ten times the rounding error) is registered as
//! `ThreadInvariantReducedAccuracy`, so dispatch makes it a candidate only where the caller opted
//! in with [`set_allow_fast_conv`](crate::autotune::set_allow_fast_conv) /
//! [`with_allow_fast_conv`](crate::autotune::with_allow_fast_conv) (PyTorch's `allow_tf32`; off
//! by default) or pinned it with [`with_algorithm`](crate::autotune::with_algorithm): then the
//! heuristic picks it for 3×3 convolutions with stride 1, dilation 1, one group, padding at
//! most 2, at least 64 input and 64 output channels and outputs of at least 24×24 (32×32 for
//! the weight gradient), where it measured faster; below, it lost to im2col + GEMM. A pin
//! runs it wherever it applies (outputs of at least 4×4); benchmark mode times it.
//!
//! im2col + GEMM gathers the patches of several samples into one product when planes are
//! small (about 512 output columns per product, a number fixed by the shape): every output is
//! one fma chain over `C_in/groups · kH · kW` in that order whatever the product's width, so
//! this changes speed, not bits; the input gradient likewise. Work under 2^21 multiply-adds
//! stays on the calling thread. With benchmark mode on, the
//! applicable candidates are timed once per shape. In deterministic mode — or with
//! [`set_conv_deterministic`](crate::autotune::set_conv_deterministic), which dispatch applies
//! to the ops declared as convolutions — only thread-invariant candidates run. Every
//! summation order here depends on the shapes only: GEMM never splits K across threads,
//! `col2im` adds in a fixed loop order per channel, and the weight gradients' parts are fixed
//! by the shape and added in order.
//!
//! # Winograd
//! `*.winograd_f4x3` computes each 4×4 block of outputs from a 6×6 window with 4× fewer
//! multiply-adds than direct convolution (Lavin & Gray's F(4×4, 3×3)); the input gradient is
//! the same algorithm on the flipped kernel, the weight gradient its transpose. The
//! transforms cost precision: errors are a few 1e-6 of the sum of the terms' magnitudes
//! (tested below 2e-5), about ten times im2col's. Its bits depend on the shapes and values
//! only, not on the thread count or instruction set (tested). For GEMM-order sums, pin
//! `conv2d.im2col_gemm` (and `conv2d_input_grad.gemm_col2im`,
//! `conv2d_weight_grad.fixed_parts`) with
//! [`with_algorithm`](crate::autotune::with_algorithm).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::matmul::{Isa, gemm};
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::Mutex;

mod implicit;
mod transpose;
mod winograd;

pub use implicit::blocks::CONV2D_WEIGHT_GRAD_BLOCKS;
pub use transpose::CONV_TRANSPOSE2D;

/// Stride, padding, dilation and groups of a 2-D convolution (PyTorch's arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    /// `(sh, sw)`, default `(1, 1)`.
    pub stride: (usize, usize),
    /// `(ph, pw)` zeros added on both sides, default `(0, 0)`.
    pub padding: (usize, usize),
    /// `(dh, dw)`, default `(1, 1)`.
    pub dilation: (usize, usize),
    /// Channel groups, default 1.
    pub groups: usize,
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Self {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// Every size of one convolution, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    n: usize,
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    p: Conv2dParams,
    /// The op these sizes belong to (named by out-of-memory errors).
    op: &'static str,
}

impl Geometry {
    fn new(op: &'static str, input: &[usize], weight: &[usize], p: Conv2dParams) -> Result<Self> {
        let &[n, cin, h, w] = input else {
            return Err(invalid(
                op,
                "input",
                format!("expected (N, C, H, W), got {input:?}"),
            ));
        };
        let &[cout, cg, kh, kw] = weight else {
            return Err(invalid(
                op,
                "weight",
                format!("expected (C_out, C_in/groups, kH, kW), got {weight:?}"),
            ));
        };
        let g = p.groups;
        if g == 0 || cin % g != 0 || cout % g != 0 {
            return Err(invalid(
                op,
                "groups",
                format!("groups={g} must divide C_in={cin} and C_out={cout}"),
            ));
        }
        if cg != cin / g {
            return Err(Error::ShapeMismatch {
                op,
                lhs: input.to_vec(),
                rhs: weight.to_vec(),
            });
        }
        let (sh, sw) = p.stride;
        let (dh, dw) = p.dilation;
        if sh == 0 || sw == 0 || dh == 0 || dw == 0 || kh == 0 || kw == 0 {
            return Err(invalid(
                op,
                "stride",
                "stride, dilation and kernel size must be positive",
            ));
        }
        // Saturating: absurd sizes then fail the checks below instead of overflowing.
        let span_h = dh.saturating_mul(kh - 1).saturating_add(1);
        let span_w = dw.saturating_mul(kw - 1).saturating_add(1);
        let ph = h.saturating_add(p.padding.0.saturating_mul(2));
        let pw = w.saturating_add(p.padding.1.saturating_mul(2));
        crate::tensor::checked_numel(op, &[n, cout, ph, pw])?;
        if ph < span_h || pw < span_w {
            return Err(invalid(
                op,
                "input",
                format!(
                    "padded input ({ph}×{pw}) is smaller than the dilated kernel ({span_h}×{span_w})"
                ),
            ));
        }
        Ok(Self {
            n,
            cin,
            h,
            w,
            cout,
            kh,
            kw,
            oh: (ph - span_h) / sh + 1,
            ow: (pw - span_w) / sw + 1,
            p,
            op,
        })
    }

    fn cg(&self) -> usize {
        self.cin / self.p.groups
    }
    fn og(&self) -> usize {
        self.cout / self.p.groups
    }
    /// Rows of the im2col matrix: `C_in/groups · kH · kW`.
    fn k(&self) -> usize {
        self.cg() * self.kh * self.kw
    }
    fn ohw(&self) -> usize {
        self.oh * self.ow
    }
    /// The input plane with its padding: `(H + 2·ph, W + 2·pw)` (saturating: `new` has
    /// checked that these sizes times N·C_out fit).
    fn padded(&self) -> (usize, usize) {
        (
            self.h.saturating_add(self.p.padding.0.saturating_mul(2)),
            self.w.saturating_add(self.p.padding.1.saturating_mul(2)),
        )
    }
    fn key(&self) -> String {
        format!(
            "n{} c{} h{} w{} o{} k{}x{} s{:?} p{:?} d{:?} g{}",
            self.n,
            self.cin,
            self.h,
            self.w,
            self.cout,
            self.kh,
            self.kw,
            self.p.stride,
            self.p.padding,
            self.p.dilation,
            self.p.groups
        )
    }
    fn is_1x1(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.p.stride == (1, 1) && self.p.padding == (0, 0)
    }
    fn is_depthwise(&self) -> bool {
        self.p.groups == self.cin && self.cin == self.cout
    }

    /// Input row for output row `o` and kernel row `a`, if inside the (unpadded) input.
    #[inline]
    fn in_y(&self, o: usize, a: usize) -> Option<usize> {
        (o * self.p.stride.0 + a * self.p.dilation.0)
            .checked_sub(self.p.padding.0)
            .filter(|&y| y < self.h)
    }
    #[inline]
    fn in_x(&self, o: usize, b: usize) -> Option<usize> {
        (o * self.p.stride.1 + b * self.p.dilation.1)
            .checked_sub(self.p.padding.1)
            .filter(|&x| x < self.w)
    }

    /// im2col of one sample's group `g` (`x` is that sample, `C_in·H·W`) into columns
    /// `off..off + OH·OW` of `col` (`K × ld`, row-major), zeros where the window leaves the input.
    fn im2col_at(&self, x: &[f32], g: usize, col: &mut [f32], ld: usize, off: usize) {
        let ohw = self.ohw();
        let sw = self.p.stride.1;
        if self.p.stride == (1, 1) && self.p.dilation == (1, 1) && self.w <= 64 {
            // Small planes: one zero-padded copy per channel, then every row of the patch
            // matrix is a plain copy of `OW` values (no per-row bounds or fills).
            let (ph, pw) = self.p.padding;
            let (hp, wp) = (self.h + 2 * ph, self.w + 2 * pw);
            let mut pad = vec![0f32; hp * wp];
            for c in 0..self.cg() {
                let plane = &x[(g * self.cg() + c) * self.h * self.w..][..self.h * self.w];
                for (y, src) in plane.chunks_exact(self.w).enumerate() {
                    pad[(y + ph) * wp + pw..][..self.w].copy_from_slice(src);
                }
                for a in 0..self.kh {
                    for b in 0..self.kw {
                        let row = &mut col[((c * self.kh + a) * self.kw + b) * ld + off..][..ohw];
                        for (i, dst) in row.chunks_exact_mut(self.ow).enumerate() {
                            let src = &pad[(i + a) * wp + b..][..self.ow];
                            for (d, &v) in dst.iter_mut().zip(src) {
                                *d = v;
                            }
                        }
                    }
                }
            }
            return;
        }
        for c in 0..self.cg() {
            let plane = &x[(g * self.cg() + c) * self.h * self.w..][..self.h * self.w];
            for a in 0..self.kh {
                for b in 0..self.kw {
                    let row = &mut col[((c * self.kh + a) * self.kw + b) * ld + off..][..ohw];
                    let (j0, j1) = self.valid_x(b);
                    for i in 0..self.oh {
                        let dst = &mut row[i * self.ow..(i + 1) * self.ow];
                        match self.in_y(i, a) {
                            None => dst.fill(0.0),
                            Some(y) => {
                                dst[..j0].fill(0.0);
                                dst[j1..].fill(0.0);
                                if j0 < j1 {
                                    // Input column of output column j: j·sw + x0.
                                    let x0 = (j0 * sw + b * self.p.dilation.1) - self.p.padding.1;
                                    let src = &plane[y * self.w..][..self.w];
                                    if sw == 1 {
                                        dst[j0..j1].copy_from_slice(&src[x0..x0 + (j1 - j0)]);
                                    } else {
                                        for (t, d) in dst[j0..j1].iter_mut().enumerate() {
                                            *d = src[x0 + t * sw];
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The output columns `j0..j1` whose input column for kernel column `b` lies inside the
    /// input (`in_x(j, b)` is `Some` exactly there).
    fn valid_x(&self, b: usize) -> (usize, usize) {
        let (sw, pw, off) = (self.p.stride.1, self.p.padding.1, b * self.p.dilation.1);
        // j·sw + off ≥ pw and j·sw + off < w + pw.
        let j0 = pw.saturating_sub(off).div_ceil(sw).min(self.ow);
        let j1 = if self.w + pw > off {
            (self.w + pw - off).div_ceil(sw).min(self.ow)
        } else {
            0
        };
        (j0, j1.max(j0))
    }

    /// Adds columns `off..off + OH·OW` of `col` (`K × ld`) back into group `g` of one sample's
    /// input gradient, in a fixed order (channel, kernel row, kernel column, output position).
    fn col2im_at(&self, col: &[f32], ld: usize, off: usize, g: usize, dx: &mut [f32]) {
        let ohw = self.ohw();
        let sw = self.p.stride.1;
        for c in 0..self.cg() {
            let plane = &mut dx[(g * self.cg() + c) * self.h * self.w..][..self.h * self.w];
            for a in 0..self.kh {
                for b in 0..self.kw {
                    let row = &col[((c * self.kh + a) * self.kw + b) * ld + off..][..ohw];
                    let (j0, j1) = self.valid_x(b);
                    if j0 == j1 {
                        continue;
                    }
                    let x0 = (j0 * sw + b * self.p.dilation.1) - self.p.padding.1;
                    for i in 0..self.oh {
                        let Some(y) = self.in_y(i, a) else { continue };
                        let src = &row[i * self.ow + j0..i * self.ow + j1];
                        let dst = &mut plane[y * self.w..][..self.w];
                        for (t, &v) in src.iter().enumerate() {
                            dst[x0 + t * sw] += v;
                        }
                    }
                }
            }
        }
    }
}

/// One thread's spare scratch buffers (a training loop repeats the same shapes; fresh buffers
/// would cost page faults and zeroing on every call).
pub(super) type Spares = std::thread::LocalKey<core::cell::RefCell<Vec<Vec<f32>>>>;

thread_local! {
    /// The im2col/implicit-GEMM convolutions' spares.
    static SPARE: core::cell::RefCell<Vec<Vec<f32>>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// The most scratch each thread keeps for later calls: 4 MiB (buffers made on a worker thread
/// may be dropped on another, so a larger cap let every thread's spares fill up: 40 MB of
/// peak RSS at 2 threads in the cnn training step, against 8 MB).
const SPARE_FLOATS: usize = 1 << 20;

/// A scratch buffer of `len` floats for `op` (contents unspecified: every user writes before
/// reading), reused from this thread's spares when one is large enough.
///
/// # Errors
/// [`Error::OutOfMemory`] if a new buffer cannot be allocated.
pub(super) fn scratch(op: &'static str, len: usize) -> Result<Scratch> {
    scratch_in(&SPARE, SPARE_FLOATS, op, len)
}

/// [`scratch`] from the pool `spares`, which keeps at most `cap` floats per thread.
pub(super) fn scratch_in(
    spares: &'static Spares,
    cap: usize,
    op: &'static str,
    len: usize,
) -> Result<Scratch> {
    let mut v = spares
        .with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|b| b.len() >= len)?;
            Some(s.swap_remove(i))
        })
        .unwrap_or_default();
    if v.len() < len {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| Error::OutOfMemory {
                op,
                bytes: len as u128 * 4,
            })?;
        v.resize(len, 0.0);
    }
    Ok(Scratch {
        buf: v,
        len,
        spares,
        cap,
    })
}

/// A scratch buffer (its first `len` elements), returned to its thread's pool when dropped, as
/// long as the pool stays within its cap.
pub(super) struct Scratch {
    buf: Vec<f32>,
    len: usize,
    spares: &'static Spares,
    cap: usize,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = core::mem::take(&mut self.buf);
        let cap = self.cap;
        self.spares.with(|s| {
            let mut s = s.borrow_mut();
            let kept: usize = s.iter().map(Vec::len).sum();
            if kept + v.len() <= cap {
                s.push(v);
            }
        });
    }
}

impl core::ops::Deref for Scratch {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}
impl core::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}

/// `n` zeros for an output of `op`, or [`Error::OutOfMemory`] (a huge output is an error, not
/// an abort). Fresh pages come zeroed from the system, so large outputs cost no memset.
fn try_zeroed(op: &'static str, n: usize) -> Result<Vec<f32>> {
    let oom = || Error::OutOfMemory {
        op,
        bytes: n as u128 * 4,
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<f32>(n).map_err(|_| oom())?;
    // SAFETY: `layout` has a non-zero size. A non-null result is an allocation of `n` zeroed
    // f32 (all-zero bits are +0.0) from the global allocator with the layout `Vec<f32>` uses
    // for capacity `n`, so the vector may own and free it.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut f32;
        if ptr.is_null() {
            return Err(oom());
        }
        Ok(Vec::from_raw_parts(ptr, n, n))
    }
}

type FwdFn = fn(&Geometry, &[f32], &[f32], &mut [f32], &Par) -> Result<()>;
type InputGradFn = fn(&Geometry, &[f32], &[f32], &mut [f32], &Par) -> Result<()>;
type WeightGradFn = fn(&Geometry, &[f32], &[f32], &mut [f32], &Par) -> Result<()>;

/// Samples per GEMM of the batched im2col paths: small planes are gathered so that one
/// product has about [`CHUNK_COLS`] columns (a function of the shape only). Every output is
/// one fma chain over K whatever the product's width, so batching never changes the bits.
fn samples_per_chunk(g: &Geometry) -> usize {
    (CHUNK_COLS / g.ohw().max(1)).clamp(1, g.n.max(1))
}

/// Columns of one batched product.
const CHUNK_COLS: usize = 512;

/// Multiply-adds below which a convolution stays on the calling thread.
const SERIAL_MAX_WORK: usize = 1 << 21;

/// Samples per chunk for a kernel that computes every sample on its own, whatever the chunk
/// (the implicit GEMM): `per`, or fewer when the work is split over threads and `per` leaves
/// fewer chunks than threads (a 2×2 plane makes the whole batch of 64 one chunk, which would
/// run on one thread). Only which thread computes a sample changes, never its bits.
fn samples_per_thread_chunk(g: &Geometry, per: usize, work: usize, par: &Par) -> usize {
    let threads = par.threads().min(g.n);
    if threads > 1 && work > SERIAL_MAX_WORK && g.n.div_ceil(per) < threads {
        g.n.div_ceil(threads)
    } else {
        per
    }
}

/// Runs `per_chunk(c, samples, par)` for the chunks of `per` samples of the batch, each
/// writing only its samples' part of `out` (`size` elements per sample): in parallel over
/// chunks (each on one thread) when there are at least as many chunks as threads and the work
/// is large enough, else chunk after chunk with `par`'s threads inside. Each chunk is
/// computed the same way either way, so the choice never changes the bits.
fn for_each_chunk(
    g: &Geometry,
    per: usize,
    out: &mut [f32],
    work: usize,
    par: &Par,
    per_chunk: impl Fn(std::ops::Range<usize>, &mut [f32], &Par) -> Result<()> + Sync,
) -> Result<()> {
    if g.n == 0 || out.is_empty() {
        return Ok(());
    }
    let size = out.len() / g.n;
    let chunks = g.n.div_ceil(per);
    let range = |c: usize| c * per..((c + 1) * per).min(g.n);
    if work <= SERIAL_MAX_WORK || par.threads() == 1 {
        let one = Par::new(1);
        out.chunks_mut(size * per)
            .enumerate()
            .try_for_each(|(c, o)| per_chunk(range(c), o, &one))
    } else if chunks >= par.threads() {
        // Through the standing helpers: a hop into the pool costs about as much as a small
        // convolution. The first failing chunk's error is returned, as serially.
        let one = Par::new(1);
        let err: Mutex<Option<(usize, Error)>> = Mutex::new(None);
        par.for_each_chunk_mut(out, size * per, |c, o| {
            if let Err(e) = per_chunk(range(c), o, &one) {
                let mut err = err.lock().unwrap_or_else(|e| e.into_inner());
                if err.as_ref().is_none_or(|(first, _)| c < *first) {
                    *err = Some((c, e));
                }
            }
        });
        match err.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    } else {
        out.chunks_mut(size * per)
            .enumerate()
            .try_for_each(|(c, o)| per_chunk(range(c), o, par))
    }
}

/// `conv2d.im2col_gemm`: the implicit GEMM for small shapes, im2col + GEMM otherwise (the
/// same bits either way).
fn fwd_im2col(g: &Geometry, x: &[f32], w: &[f32], out: &mut [f32], par: &Par) -> Result<()> {
    if implicit::chosen(g, false, par.threads()) {
        fwd_implicit(g, x, w, out, par)
    } else {
        fwd_gemm(g, x, w, out, par)
    }
}

fn fwd_implicit(g: &Geometry, x: &[f32], w: &[f32], out: &mut [f32], par: &Par) -> Result<()> {
    let fw = implicit::pack_forward_weights(g, w, Isa::best())?;
    let work = g.n * g.cout * g.ohw() * g.k();
    for_each_chunk(
        g,
        samples_per_thread_chunk(g, implicit::samples_per_chunk(g), work, par),
        out,
        work,
        par,
        |ns, o, _| implicit::forward_chunk(g, x, &fw, ns, o),
    )
}

fn fwd_gemm(g: &Geometry, x: &[f32], w: &[f32], out: &mut [f32], par: &Par) -> Result<()> {
    let (k, ohw, og) = (g.k(), g.ohw(), g.og());
    let chw = g.cin * g.h * g.w;
    let per = samples_per_chunk(g);
    let work = g.n * g.cout * ohw * k;
    for_each_chunk(g, per, out, work, par, |ns, o, par| {
        let cols = ns.len() * ohw;
        // Rows of `col` a multiple of 512 bytes apart share a few cache sets when the GEMM
        // packs across them: such rows get 64 bytes more (see `weight_grad_operands`).
        let ld = if cols.is_multiple_of(128) {
            cols + 16
        } else {
            cols
        };
        let mut col = scratch(g.op, k * ld)?;
        // One sample: the product writes straight into the output.
        let mut tmp = if ns.len() > 1 {
            vec![0f32; og * cols]
        } else {
            Vec::new()
        };
        for grp in 0..g.p.groups {
            for (slot, n) in ns.clone().enumerate() {
                g.im2col_at(&x[n * chw..][..chw], grp, &mut col, ld, slot * ohw);
            }
            let wg = &w[grp * og * k..][..og * k];
            if ns.len() == 1 {
                let og_out = &mut o[grp * og * ohw..][..og * ohw];
                gemm(og, ohw, k, wg, (k, 1), &col, (ld, 1), og_out, (ohw, 1), par)?;
                continue;
            }
            gemm(
                og,
                cols,
                k,
                wg,
                (k, 1),
                &col,
                (ld, 1),
                &mut tmp,
                (cols, 1),
                par,
            )?;
            for slot in 0..ns.len() {
                for r in 0..og {
                    o[(slot * g.cout + grp * og + r) * ohw..][..ohw]
                        .copy_from_slice(&tmp[r * cols + slot * ohw..][..ohw]);
                }
            }
        }
        Ok(())
    })
}

fn fwd_1x1(g: &Geometry, x: &[f32], w: &[f32], out: &mut [f32], par: &Par) -> Result<()> {
    let (k, ohw, og) = (g.k(), g.ohw(), g.og());
    for n in 0..g.n {
        for grp in 0..g.p.groups {
            let xs = &x[(n * g.cin + grp * g.cg()) * ohw..][..k * ohw];
            let wg = &w[grp * og * k..][..og * k];
            let o = &mut out[(n * g.cout + grp * og) * ohw..][..og * ohw];
            gemm(og, ohw, k, wg, (k, 1), xs, (ohw, 1), o, (ohw, 1), par)?;
        }
    }
    Ok(())
}

fn fwd_depthwise(g: &Geometry, x: &[f32], w: &[f32], out: &mut [f32], par: &Par) -> Result<()> {
    let (hw, ohw) = (g.h * g.w, g.ohw());
    par.install(|| {
        out.par_chunks_mut(ohw.max(1))
            .enumerate()
            .for_each(|(plane, o)| {
                let c = plane % g.cin;
                let xs = &x[plane * hw..][..hw];
                let wc = &w[c * g.kh * g.kw..][..g.kh * g.kw];
                for i in 0..g.oh {
                    for j in 0..g.ow {
                        let mut acc = 0f32;
                        for a in 0..g.kh {
                            let y = g.in_y(i, a);
                            for b in 0..g.kw {
                                let v = match (y, g.in_x(j, b)) {
                                    (Some(y), Some(xx)) => xs[y * g.w + xx],
                                    _ => 0.0,
                                };
                                acc = wc[a * g.kw + b].mul_add(v, acc);
                            }
                        }
                        o[i * g.ow + j] = acc;
                    }
                }
            })
    });
    Ok(())
}

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![
        CONV2D.info(),
        CONV2D_INPUT_GRAD.info(),
        CONV2D_WEIGHT_GRAD.info(),
        CONV2D_WEIGHT_GRAD_BLOCKS.info(),
        CONV_TRANSPOSE2D.info(),
    ]
}

/// `conv2d`: forward convolution.
pub static CONV2D: Op<FwdFn> = Op {
    name: "conv2d",
    impls: &[
        Impl {
            algo: "conv2d.im2col_gemm",
            guarantee: Guarantee::ThreadInvariant,
            f: fwd_im2col,
        },
        Impl {
            algo: "conv2d.direct_1x1",
            guarantee: Guarantee::ThreadInvariant,
            f: fwd_1x1,
        },
        Impl {
            algo: "conv2d.depthwise_direct",
            guarantee: Guarantee::ThreadInvariant,
            f: fwd_depthwise,
        },
        Impl {
            algo: "conv2d.winograd_f4x3",
            guarantee: Guarantee::ThreadInvariantReducedAccuracy,
            f: winograd::forward,
        },
    ],
};

/// `conv2d_input_grad.gemm_col2im`: the implicit GEMM for small shapes, GEMM + col2im
/// otherwise (the same bits either way).
fn input_grad_gemm(g: &Geometry, gout: &[f32], w: &[f32], dx: &mut [f32], par: &Par) -> Result<()> {
    if implicit::chosen(g, true, par.threads()) {
        input_grad_implicit(g, gout, w, dx, par)
    } else {
        input_grad_col2im(g, gout, w, dx, par)
    }
}

fn input_grad_implicit(
    g: &Geometry,
    gout: &[f32],
    w: &[f32],
    dx: &mut [f32],
    par: &Par,
) -> Result<()> {
    let iw = implicit::pack_input_grad_weights(g, w, Isa::best())?;
    let work = g.n * g.cout * g.ohw() * g.k();
    for_each_chunk(
        g,
        samples_per_thread_chunk(g, implicit::samples_per_chunk(g), work, par),
        dx,
        work,
        par,
        |ns, d, _| implicit::input_grad_chunk(g, gout, &iw, ns, d),
    )
}

fn input_grad_col2im(
    g: &Geometry,
    gout: &[f32],
    w: &[f32],
    dx: &mut [f32],
    par: &Par,
) -> Result<()> {
    let (k, ohw, og) = (g.k(), g.ohw(), g.og());
    let per = samples_per_chunk(g);
    let work = g.n * g.cout * ohw * k;
    let chw = g.cin * g.h * g.w;
    for_each_chunk(g, per, dx, work, par, |ns, dxs, par| {
        let cols = ns.len() * ohw;
        // `col` is the product's output here; its rows get the same spacing as the forward's.
        let ld = if cols.is_multiple_of(128) {
            cols + 16
        } else {
            cols
        };
        let mut col = scratch(g.op, k * ld)?;
        let mut go = if ns.len() > 1 {
            vec![0f32; og * cols]
        } else {
            Vec::new()
        };
        for grp in 0..g.p.groups {
            let wg = &w[grp * og * k..][..og * k];
            // col = W_gᵀ · gout_g: Wᵀ is W read with swapped strides; several samples'
            // output gradients side by side.
            if ns.len() == 1 {
                let go = &gout[(ns.start * g.cout + grp * og) * ohw..][..og * ohw];
                gemm(k, ohw, og, wg, (1, k), go, (ohw, 1), &mut col, (ld, 1), par)?;
            } else {
                for (slot, n) in ns.clone().enumerate() {
                    for r in 0..og {
                        go[r * cols + slot * ohw..][..ohw]
                            .copy_from_slice(&gout[(n * g.cout + grp * og + r) * ohw..][..ohw]);
                    }
                }
                gemm(
                    k,
                    cols,
                    og,
                    wg,
                    (1, k),
                    &go,
                    (cols, 1),
                    &mut col,
                    (ld, 1),
                    par,
                )?;
            }
            for slot in 0..ns.len() {
                g.col2im_at(&col, ld, slot * ohw, grp, &mut dxs[slot * chw..][..chw]);
            }
        }
        Ok(())
    })
}

/// `conv2d_input_grad`: the gradient of `conv2d` with respect to its input.
pub static CONV2D_INPUT_GRAD: Op<InputGradFn> = Op {
    name: "conv2d_input_grad",
    impls: &[
        Impl {
            algo: "conv2d_input_grad.gemm_col2im",
            guarantee: Guarantee::ThreadInvariant,
            f: input_grad_gemm,
        },
        Impl {
            algo: "conv2d_input_grad.winograd_f4x3",
            guarantee: Guarantee::ThreadInvariantReducedAccuracy,
            f: winograd::input_grad,
        },
    ],
};

/// The weight gradient's GEMM operands for samples `ns` of group `grp`: the patches, im2col's
/// `K × |ns|·OH·OW` with rows `ld` apart (read by the GEMM as its transposed B operand, so no
/// transpose is made), the output gradient's rows for that group, `og × |ns|·OH·OW`, and `ld`.
fn weight_grad_operands(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
) -> Result<(Scratch, Scratch, usize)> {
    let (k, ohw, og) = (g.k(), g.ohw(), g.og());
    let wide = ns.len() * ohw;
    // The GEMM packs B across rows of `col`: rows a multiple of 512 bytes apart fall into the
    // same few cache sets (64×64 planes: 1.5× slower), so such rows get 64 bytes more.
    let ld = if wide.is_multiple_of(128) {
        wide + 16
    } else {
        wide
    };
    let chw = g.cin * g.h * g.w;
    let mut col = scratch(g.op, k * ld)?;
    for (slot, n) in ns.clone().enumerate() {
        g.im2col_at(&x[n * chw..][..chw], grp, &mut col, ld, slot * ohw);
    }
    let mut go = scratch(g.op, og * wide)?;
    for (slot, n) in ns.enumerate() {
        for r in 0..og {
            go[r * wide + slot * ohw..][..ohw]
                .copy_from_slice(&gout[(n * g.cout + grp * og + r) * ohw..][..ohw]);
        }
    }
    Ok((col, go, ld))
}

/// `dW` of one group over samples `ns`: `og × K`, one GEMM with K = |ns|·OH·OW (the
/// implicit GEMM for small shapes: the same bits).
fn weight_grad_part(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
    par: &Par,
) -> Result<Scratch> {
    let (k, og) = (g.k(), g.og());
    if implicit::applicable(g) {
        let mut part = scratch(g.op, og * k)?;
        implicit::weight_grad_part(g, x, gout, grp, ns, &mut part, Isa::best())?;
        return Ok(part);
    }
    weight_grad_part_gemm(g, x, gout, grp, ns, par)
}

fn weight_grad_part_gemm(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
    par: &Par,
) -> Result<Scratch> {
    let (k, og) = (g.k(), g.og());
    let wide = ns.len() * g.ohw();
    let (col, go, ld) = weight_grad_operands(g, x, gout, grp, ns)?;
    let mut part = scratch(g.op, og * k)?;
    // B[p][j] = col[j][p]: the GEMM's packing reads the patches in place (same bits: each
    // element is one fma chain over p whatever the operands' strides).
    gemm(
        og,
        k,
        wide,
        &go,
        (wide, 1),
        &col,
        (1, ld),
        &mut part,
        (k, 1),
        par,
    )?;
    Ok(part)
}

/// Samples per part of the deterministic weight gradient: a function of the shape only.
const WEIGHT_GRAD_PARTS: usize = 8;

fn weight_grad_fixed_parts(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    if implicit::applicable(g) && implicit::blocks::one_block(g) {
        // The same sums, each tile's parts made in an L1 scratch and added at once (one block
        // of N samples, see `implicit::blocks`), the tiles split over the threads: no part's
        // `og × K` buffer written and read back. dcgan's 64 → 128 channels at 4×4, batch 64,
        // one thread: 0.84–0.89 → 0.43 ms.
        return implicit::blocks::blocks_with(Isa::best(), g, x, gout, g.n.max(1), dw, par);
    }
    weight_grad_parts_summed(g, x, gout, dw, par)
}

/// `conv2d_weight_grad.fixed_parts` as its definition reads: each part's `og × K` gradient
/// made whole, then the parts added in part order.
fn weight_grad_parts_summed(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    let (k, og) = (g.k(), g.og());
    let parts = g.n.clamp(1, WEIGHT_GRAD_PARTS);
    let per = g.n.div_ceil(parts);
    let one = Par::new(1);
    for grp in 0..g.p.groups {
        // The batch is cut into a number of parts fixed by N; each part's GEMM runs on one
        // thread and the parts are added in part order, so the bits do not depend on threads.
        let part = |t: usize| {
            weight_grad_part(
                g,
                x,
                gout,
                grp,
                (t * per).min(g.n)..((t + 1) * per).min(g.n),
                &one,
            )
        };
        let dst = &mut dw[grp * og * k..][..og * k];
        let serial = par.threads() == 1 || g.n * g.cout * g.ohw() * g.k() <= SERIAL_MAX_WORK;
        if serial {
            // Each part added as soon as it is made: the same sums in the same order, with one
            // part's scratch alive instead of all (eight large parts overflowed the spares'
            // cap and were allocated and zeroed again on every call).
            dst.fill(0.0);
            for t in 0..parts {
                let p = part(t)?;
                for (d, s) in dst.iter_mut().zip(p.iter()) {
                    *d += s;
                }
            }
            continue;
        }
        let mut partials: Vec<Option<Result<Scratch>>> = (0..parts).map(|_| None).collect();
        par.for_each_chunk_mut(&mut partials, 1, |t, slot| slot[0] = Some(part(t)));
        let partials = partials
            .into_iter()
            .map(|p| p.ok_or_else(|| invalid(g.op, "weight", "internal: a part did not run"))?)
            .collect::<Result<Vec<Scratch>>>()?;
        // Each element is `((0 + p_0) + p_1) + …` in part order, whichever thread adds it;
        // block by block, so that a block of the sum stays in L1 through the parts.
        let add = |b: usize, d: &mut [f32]| {
            d.fill(0.0);
            for p in &partials {
                for (d, s) in d.iter_mut().zip(&p[b * SUM_BLOCK..]) {
                    *d += s;
                }
            }
        };
        par.for_each_chunk_mut(dst, SUM_BLOCK, add);
    }
    Ok(())
}

/// Elements per block of the weight gradient's sum of parts (16 KiB).
const SUM_BLOCK: usize = 4096;

fn weight_grad_partials(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    let (k, og) = (g.k(), g.og());
    let parts = par.threads().min(g.n).max(1);
    let per = g.n.div_ceil(parts);
    let total = Mutex::new(try_zeroed(g.op, g.p.groups * og * k)?);
    let one = Par::new(1);
    let err: Mutex<Option<Error>> = Mutex::new(None);
    par.run_parts(parts, |t| {
        let ns = (t * per).min(g.n)..((t + 1) * per).min(g.n);
        for grp in 0..g.p.groups {
            match weight_grad_part(g, x, gout, grp, ns.clone(), &one) {
                // Completion order: whichever thread gets the lock first adds first.
                Ok(part) => {
                    let mut tot = total.lock().unwrap_or_else(|e| e.into_inner());
                    for (d, s) in tot[grp * og * k..][..og * k].iter_mut().zip(part.iter()) {
                        *d += s;
                    }
                }
                Err(e) => *err.lock().unwrap_or_else(|e| e.into_inner()) = Some(e),
            }
        }
    });
    if let Some(e) = err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    dw.copy_from_slice(&total.into_inner().unwrap_or_else(|e| e.into_inner()));
    Ok(())
}

/// `conv2d_weight_grad`: the gradient of `conv2d` with respect to its weight. The fixed
/// partition comes first: small per-part GEMMs keep their im2row buffer in cache, so it is
/// also the fastest; the completion-order variant remains a candidate for benchmark mode.
pub static CONV2D_WEIGHT_GRAD: Op<WeightGradFn> = Op {
    name: "conv2d_weight_grad",
    impls: &[
        Impl {
            algo: "conv2d_weight_grad.fixed_parts",
            guarantee: Guarantee::ThreadInvariant,
            f: weight_grad_fixed_parts,
        },
        Impl {
            algo: "conv2d_weight_grad.batch_partials",
            guarantee: Guarantee::NotGuaranteed,
            f: weight_grad_partials,
        },
        Impl {
            algo: "conv2d_weight_grad.winograd_f4x3",
            guarantee: Guarantee::ThreadInvariantReducedAccuracy,
            f: winograd::weight_grad,
        },
    ],
};

fn f32_data<'a>(op: &'static str, what: &'static str, t: &'a Tensor) -> Result<&'a [f32]> {
    if t.dtype() != DType::F32 {
        return Err(Error::DType {
            op,
            expected: DType::F32,
            got: t.dtype(),
        });
    }
    t.data::<f32>()
        .map_err(|_| invalid(op, what, "internal: expected a contiguous tensor"))
}

/// `grad_output` must have the convolution's output shape.
fn check_grad_output(op: &'static str, g: &Geometry, grad_output: &Tensor) -> Result<()> {
    let want = [g.n, g.cout, g.oh, g.ow];
    if grad_output.shape() == want {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            op,
            lhs: grad_output.shape().to_vec(),
            rhs: want.to_vec(),
        })
    }
}

/// The heuristic of the backward ops: Winograd where it is preferred (and allowed), else the
/// first allowed candidate.
fn winograd_or_first<F>(
    c: &[&'static Impl<F>],
    g: &Geometry,
    algo: &str,
    preferred: fn(&Geometry) -> bool,
) -> &'static Impl<F> {
    c.iter()
        .copied()
        .find(|i| i.algo == algo && preferred(g))
        .unwrap_or(c[0])
}

/// Runs a tunable conv op through dispatch (as a convolution: heuristic, or timed once per
/// shape in benchmark mode; Winograd only where allowed or pinned): `call` writes a zeroed
/// output of `out_shape`, which dispatch traces.
fn run<F: Copy + 'static>(
    op: &'static Op<F>,
    g: &Geometry,
    inputs: &[&Tensor],
    out_shape: &[usize],
    applies: &dyn Fn(&'static Impl<F>) -> bool,
    heuristic: &dyn Fn(&[&'static Impl<F>]) -> &'static Impl<F>,
    call: impl Fn(F, &mut [f32], &Par) -> Result<()>,
) -> Result<Tensor> {
    let out_len = out_shape.iter().product();
    op.tuned(&g.key())
        .applies(applies)
        .heuristic(heuristic)
        .convolution()
        .run(inputs, |imp, par| {
            let mut out = try_zeroed(op.name, out_len)?;
            call(imp.f, &mut out, par)?;
            Tensor::from_vec(out, out_shape)
        })
}

impl Tensor {
    /// `F.conv2d(input, weight, bias, stride, padding, dilation, groups)` for f32 NCHW input and
    /// `(C_out, C_in/groups, kH, kW)` weight. Thread-invariant: same bits at any thread count.
    ///
    /// # Errors
    /// Non-f32 or non-4-D operands, channel counts that do not match `groups`, a bias that is
    /// not `(C_out,)`, non-positive stride/dilation, an input smaller than the kernel.
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        p: Conv2dParams,
    ) -> Result<Tensor> {
        const OP: &str = "conv2d";
        let g = Geometry::new(OP, self.shape(), weight.shape(), p)?;
        let (x, w) = (self.contiguous_for(OP)?, weight.contiguous_for(OP)?);
        let (xs, ws) = (f32_data(OP, "input", &x)?, f32_data(OP, "weight", &w)?);
        let b = match bias {
            Some(b) if b.shape() != [g.cout] => {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: b.shape().to_vec(),
                    rhs: vec![g.cout],
                });
            }
            Some(b) => Some(b.contiguous_for(OP)?),
            None => None,
        };
        let bs = match &b {
            Some(b) => Some(f32_data(OP, "bias", b)?),
            None => None,
        };
        let mut inputs = vec![self, weight];
        inputs.extend(bias);
        run(
            &CONV2D,
            &g,
            &inputs,
            &[g.n, g.cout, g.oh, g.ow],
            &|i| match i.algo {
                "conv2d.direct_1x1" => g.is_1x1(),
                "conv2d.depthwise_direct" => g.is_depthwise(),
                "conv2d.winograd_f4x3" => winograd::applicable(&g),
                _ => true,
            },
            &|c| {
                let pick = |name: &str| c.iter().copied().find(|i| i.algo == name);
                (if g.is_depthwise() {
                    pick("conv2d.depthwise_direct")
                } else {
                    None
                })
                .or_else(|| {
                    if g.is_1x1() {
                        pick("conv2d.direct_1x1")
                    } else {
                        None
                    }
                })
                .or_else(|| {
                    if winograd::preferred(&g) {
                        pick("conv2d.winograd_f4x3")
                    } else {
                        None
                    }
                })
                .unwrap_or(c[0])
            },
            |f, out, par| {
                f(&g, xs, ws, out, par)?;
                // The bias is added before the output is traced: the trace holds the op's result.
                if let Some(bs) = bs {
                    for (plane, chunk) in out.chunks_mut(g.ohw().max(1)).enumerate() {
                        let v = bs[plane % g.cout];
                        chunk.iter_mut().for_each(|o| *o += v);
                    }
                }
                Ok(())
            },
        )
    }

    /// The gradient of [`conv2d`](Self::conv2d) with respect to its input
    /// (`torch.nn.grad.conv2d_input`).
    ///
    /// # Errors
    /// As [`conv2d`](Self::conv2d), and a `grad_output` whose shape is not the output's.
    pub fn conv2d_backward_input(
        grad_output: &Tensor,
        input_shape: &[usize],
        weight: &Tensor,
        p: Conv2dParams,
    ) -> Result<Tensor> {
        const OP: &str = "conv2d_input_grad";
        let g = Geometry::new(OP, input_shape, weight.shape(), p)?;
        check_grad_output(OP, &g, grad_output)?;
        let (go, w) = (grad_output.contiguous_for(OP)?, weight.contiguous_for(OP)?);
        let (gs, ws) = (
            f32_data(OP, "grad_output", &go)?,
            f32_data(OP, "weight", &w)?,
        );
        run(
            &CONV2D_INPUT_GRAD,
            &g,
            &[grad_output, weight],
            input_shape,
            &|i| i.algo != "conv2d_input_grad.winograd_f4x3" || winograd::applicable(&g),
            &|c| {
                winograd_or_first(
                    c,
                    &g,
                    "conv2d_input_grad.winograd_f4x3",
                    winograd::preferred,
                )
            },
            |f, out, par| f(&g, gs, ws, out, par),
        )
    }

    /// The gradient of [`conv2d`](Self::conv2d) with respect to its weight
    /// (`torch.nn.grad.conv2d_weight`). In deterministic mode (or with
    /// `set_conv_deterministic(true)`) the batch is summed in a fixed order.
    ///
    /// # Errors
    /// As [`conv2d`](Self::conv2d), and a `grad_output` whose shape is not the output's.
    pub fn conv2d_backward_weight(
        grad_output: &Tensor,
        input: &Tensor,
        weight_shape: &[usize],
        p: Conv2dParams,
    ) -> Result<Tensor> {
        const OP: &str = "conv2d_weight_grad";
        let g = Geometry::new(OP, input.shape(), weight_shape, p)?;
        check_grad_output(OP, &g, grad_output)?;
        let (go, x) = (grad_output.contiguous_for(OP)?, input.contiguous_for(OP)?);
        let (gs, xs) = (
            f32_data(OP, "grad_output", &go)?,
            f32_data(OP, "input", &x)?,
        );
        run(
            &CONV2D_WEIGHT_GRAD,
            &g,
            &[grad_output, input],
            weight_shape,
            &|i| i.algo != "conv2d_weight_grad.winograd_f4x3" || winograd::applicable(&g),
            &|c| {
                winograd_or_first(
                    c,
                    &g,
                    "conv2d_weight_grad.winograd_f4x3",
                    winograd::preferred_weight_grad,
                )
            },
            |f, out, par| f(&g, xs, gs, out, par),
        )
    }
}
