//! One direction of an LSTM layer as one op: `xw` `[T, B, 4H]` (the input projection with
//! `bias_ih`), then per step `gates = xw[t] + (h·W_hhᵀ + b_hh)`, `c = f·c + i·g`,
//! `h = o·tanh(c)` — the same operations, in the same order, as the op-by-op cell, so the
//! forward values are bit for bit those of the unfused graph. The backward recomputes nothing:
//! it walks the steps in reverse with the saved activations, one `[B, 4H]·[4H, H]` product per
//! step for the hidden state's gradient, then `W_hh`'s gradient as one product over all steps
//! (`dGᵀ · H_prev`, K = T·B) and `b_hh`'s as a sum in step order.

use super::blocks::{self, BatchBlockSum};
use super::lstm_kernel::{self, Simd};
use super::{Real, for_row_ranges, packed_transpose, uninit};
use crate::error::invalid;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::ops::matmul::{PackedB, gemm, gemm_packed_b};
use crate::threads::Par;
use crate::{DType, Error, Result, Tensor};

/// One direction of an LSTM layer, run forward through dispatch (`lstm_layer`), holding what
/// its backward (`lstm_layer_backward`) needs. Traced as `lstm_layer` (the value
/// `[T + 1, B, H]`) and `lstm_layer_backward` (one record per gradient).
pub struct LstmLayer {
    input: LayerIn,
    saved: SavedAny,
    key: String,
}

impl LstmLayer {
    /// Runs the layer: `xw` `[T, B, 4H]` (the input projection with `bias_ih`), `w_hh`
    /// `[4H, H]`, `b_hh` `[4H]`, `h0` and `c0` `[B, H]`, all of one float type; step `k`
    /// handles time `order[k]` (`0..T` forward, reversed for the reverse direction). Returns the
    /// value `[T + 1, B, H]` — the outputs in time order, then the last cell state — and the
    /// layer for [`LstmLayer::backward`]. The bits do not depend on the number of threads or
    /// on the implementation (`lstm_layer.simd` or `lstm_layer.gemm`).
    ///
    /// # Errors
    /// Shapes that do not fit, an empty or out-of-range `order` (`InvalidArgument`), dtypes
    /// other than one float type for all inputs, `OutOfMemory`.
    pub fn forward(
        xw: &Tensor,
        w_hh: &Tensor,
        b_hh: Option<&Tensor>,
        h0: &Tensor,
        c0: &Tensor,
        order: &[usize],
    ) -> Result<(Tensor, LstmLayer)> {
        let dtype = xw.dtype();
        for t in [Some(xw), Some(w_hh), b_hh, Some(h0), Some(c0)]
            .into_iter()
            .flatten()
        {
            if t.dtype() != dtype || !dtype.is_float() {
                return Err(Error::DType {
                    op: "lstm_layer",
                    expected: if dtype.is_float() { dtype } else { DType::F32 },
                    got: t.dtype(),
                });
            }
        }
        let (xs, ws, hs) = (xw.shape(), w_hh.shape(), h0.shape());
        let fits = xs.len() == 3
            && hs.len() == 2
            && xs[1] == hs[0]
            && xs[2] == 4 * hs[1]
            && c0.shape() == hs
            && ws == [xs[2], hs[1]]
            && b_hh.is_none_or(|b| b.shape() == [xs[2]])
            && order.len() == xs[0]
            && !order.is_empty()
            && order.iter().all(|&s| s < xs[0]);
        if !fits {
            return Err(Error::InvalidArgument {
                op: "lstm_layer",
                arg: "shapes",
                reason: format!(
                    "expected xw [T, B, 4H], W_hh [4H, H], b_hh [4H], h0 and c0 [B, H] and T \
                     steps, got {xs:?}, {ws:?}, {:?}, {hs:?}, {:?} and {} steps",
                    b_hh.map(|b| b.shape().to_vec()),
                    c0.shape(),
                    order.len()
                ),
            });
        }
        let input = LayerIn {
            xw: xw.try_contiguous()?,
            w: w_hh.try_contiguous()?,
            b: b_hh.map(Tensor::try_contiguous).transpose()?,
            h0: h0.try_contiguous()?,
            c0: c0.try_contiguous()?,
            order: order.to_vec(),
        };
        let key = format!("{:?}:{dtype:?}", input.xw.shape());
        let (value, saved) = {
            let mut traced = vec![&input.xw, &input.w];
            traced.extend(input.b.as_ref());
            traced.extend([&input.h0, &input.c0]);
            LSTM_LAYER
                .tuned(&key)
                .applies(&|i| applies(i.algo, dtype))
                .run(&traced, |imp, par| (imp.f)(&input, par))?
        };
        Ok((value, LstmLayer { input, saved, key }))
    }

    /// The gradients from `gy` (the gradient of the forward's value, `[T + 1, B, H]`), in the
    /// order `xw`, `W_hh`, `b_hh` (only with a bias), `h0` (if `need_h0`), `c0` (if `need_c0`);
    /// a gradient not asked for is `None`.
    ///
    /// # Errors
    /// `gy` of another shape or dtype than the forward's value, `OutOfMemory`.
    pub fn backward(
        &self,
        gy: &Tensor,
        need_h0: bool,
        need_c0: bool,
    ) -> Result<Vec<Option<Tensor>>> {
        self.backward_with(gy, need_h0, need_c0, None)
    }

    /// [`LstmLayer::backward`] with `W_hh`'s and `b_hh`'s gradients as the sum, by `blocks`,
    /// of each block of samples' own: block `(first, n)`'s is what `backward` gives for a
    /// layer run on samples `first..first + n` alone (the same bits), and every other gradient
    /// is `backward`'s (each sample's rows have their own bits).
    ///
    /// # Errors
    /// As [`LstmLayer::backward`]; blocks that do not cover the batch (`InvalidArgument`).
    pub fn backward_blocks(
        &self,
        gy: &Tensor,
        need_h0: bool,
        need_c0: bool,
        blocks: &BatchBlockSum<'_>,
    ) -> Result<Vec<Option<Tensor>>> {
        blocks.check("lstm_layer_backward", self.input.dims().1)?;
        self.backward_with(gy, need_h0, need_c0, Some(blocks))
    }

    fn backward_with(
        &self,
        gy: &Tensor,
        need_h0: bool,
        need_c0: bool,
        blocks: Option<&BatchBlockSum<'_>>,
    ) -> Result<Vec<Option<Tensor>>> {
        let (steps, b, hd) = self.input.dims();
        let dtype = self.input.xw.dtype();
        if gy.shape() != [steps + 1, b, hd] || gy.dtype() != dtype {
            return Err(Error::InvalidArgument {
                op: "lstm_layer_backward",
                arg: "grad",
                reason: format!(
                    "expected a {dtype:?} gradient of shape {:?}, got {:?} {:?}",
                    [steps + 1, b, hd],
                    gy.dtype(),
                    gy.shape()
                ),
            });
        }
        let gy = gy.try_contiguous()?;
        let bin = BackwardIn {
            gy: &gy,
            input: &self.input,
            saved: &self.saved,
            need_h0,
            blocks,
        };
        let has_bias = self.input.b.is_some();
        // Traced once per gradient.
        LSTM_LAYER_BACKWARD
            .tuned(&self.key)
            .applies(&|i| applies(i.algo, dtype))
            .run(&[&gy], |imp, par| {
                let g = (imp.f)(&bin, par)?;
                let mut out = vec![Some(g.dxw), Some(g.dw)];
                if has_bias {
                    out.push(g.db);
                }
                out.push(need_h0.then_some(g.dh0));
                out.push(need_c0.then_some(g.dc0));
                Ok(out)
            })
    }
}

/// The ops' registrations.
pub(super) fn ops() -> Vec<crate::op::OpInfo> {
    vec![LSTM_LAYER.info(), LSTM_LAYER_BACKWARD.info()]
}

/// The fused layer's inputs, contiguous: `xw` `[T, B, 4H]` (the input projection with
/// `bias_ih`), `w` = `W_hh` `[4H, H]`, `b` = `b_hh` `[4H]`, `h0` and `c0` `[B, H]`; step `k`
/// handles time `order[k]`.
struct LayerIn {
    xw: Tensor,
    w: Tensor,
    b: Option<Tensor>,
    h0: Tensor,
    c0: Tensor,
    order: Vec<usize>,
}

impl LayerIn {
    /// `(T, B, H)`.
    fn dims(&self) -> (usize, usize, usize) {
        let s = self.xw.shape();
        (s[0], s[1], s[2] / 4)
    }
}

/// The forward's saved values in either float type.
enum SavedAny {
    F32(Saved<f32>),
    F64(Saved<f64>),
}

impl Drop for SavedAny {
    fn drop(&mut self) {
        // The next step allocates the same sizes: keep the storage on this thread.
        if let SavedAny::F32(s) = self {
            for v in [&mut s.acts, &mut s.cs, &mut s.tcs, &mut s.hprev] {
                lstm_kernel::recycle(core::mem::take(v));
            }
        }
    }
}

/// An implementation of the fused layer's forward: the value `[T + 1, B, H]` (outputs by time,
/// then the last cell state) and what the backward needs.
type ForwardFn = fn(&LayerIn, &Par) -> Result<(Tensor, SavedAny)>;

/// What an implementation of the backward gets.
struct BackwardIn<'a> {
    /// The gradient of the forward's value, contiguous.
    gy: &'a Tensor,
    input: &'a LayerIn,
    saved: &'a SavedAny,
    /// Whether `h0` needs its gradient (the first step's `dG · W_hh`).
    need_h0: bool,
    /// `W_hh`'s and `b_hh`'s gradients as the sum of these blocks of the batch.
    blocks: Option<&'a BatchBlockSum<'a>>,
}

/// The gradients of `xw`, `W_hh`, `b_hh` (if any), `h0`, `c0`.
struct Grads {
    dxw: Tensor,
    dw: Tensor,
    db: Option<Tensor>,
    dh0: Tensor,
    dc0: Tensor,
}

/// An implementation of the fused layer's backward.
type BackwardFn = fn(&BackwardIn, &Par) -> Result<Grads>;

/// The fused LSTM layer: one node per direction of a layer instead of ~15 per time step. Both
/// implementations give the same bits (the SIMD one follows the GEMM path's order of operations
/// exactly; see [`lstm_kernel`]) at any number of threads: `lstm_layer.simd` (f32 on x86-64
/// with AVX2+FMA or AVX-512) cuts the batch into row ranges that run through every step on
/// their own threads; `lstm_layer.gemm` (any float type, any CPU) runs each step's product
/// with the blocked GEMM on the calling thread. Pin one with
/// `crate::autotune::with_algorithm`.
static LSTM_LAYER: Op<ForwardFn> = Op {
    name: "lstm_layer",
    impls: &[
        Impl {
            algo: "lstm_layer.simd",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_simd,
        },
        Impl {
            algo: "lstm_layer.gemm",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_gemm,
        },
    ],
};

/// Its backward, the same two ways.
static LSTM_LAYER_BACKWARD: Op<BackwardFn> = Op {
    name: "lstm_layer_backward",
    impls: &[
        Impl {
            algo: "lstm_layer_backward.simd",
            guarantee: Guarantee::ThreadInvariant,
            f: backward_simd,
        },
        Impl {
            algo: "lstm_layer_backward.gemm",
            guarantee: Guarantee::ThreadInvariant,
            f: backward_gemm,
        },
    ],
};

/// Whether an implementation runs for this dtype on this CPU.
fn applies(algo: &str, dtype: DType) -> bool {
    !algo.ends_with(".simd") || (dtype == DType::F32 && Simd::detect().is_some())
}

/// What the backward of the fused layer needs, all in processing order (step `k` handles time
/// `order[k]`).
struct Saved<T> {
    /// `[T, B, 4H]`: i, f, g, o after their nonlinearities.
    acts: Vec<T>,
    /// `[T, B, H]`: the cell state after each step.
    cs: Vec<T>,
    /// `[T, B, H]`: its tanh.
    tcs: Vec<T>,
    /// `[T, B, H]`: the hidden state before each step.
    hprev: Vec<T>,
}

/// `lstm_layer.simd`: the f32 forward of [`lstm_kernel`].
fn forward_simd(x: &LayerIn, par: &Par) -> Result<(Tensor, SavedAny)> {
    let simd = Simd::detect().ok_or_else(|| {
        invalid(
            "lstm_layer",
            "algorithm",
            "lstm_layer.simd needs AVX2+FMA or AVX-512",
        )
    })?;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let (xs, w) = (x.xw.data::<f32>()?, x.w.data::<f32>()?);
    let bias = x.b.as_ref().map(|t| t.data::<f32>()).transpose()?;
    let (h0, c0) = (x.h0.data::<f32>()?, x.c0.data::<f32>()?);
    let work = steps * b * hd * g4;
    let (wt, finite) = lstm_kernel::pack_forward(simd, w, hd, par, work)?;
    let mut sv = Saved {
        acts: lstm_kernel::scratch(steps * b * g4)?,
        cs: lstm_kernel::scratch(steps * bh)?,
        tcs: lstm_kernel::scratch(steps * bh)?,
        hprev: lstm_kernel::scratch(steps * bh)?,
    };
    // Every element is written by the steps (outputs, then the last cell state).
    let mut y = uninit("lstm_layer", (steps + 1) * bh)?;
    let f = lstm_kernel::Forward {
        steps,
        batch: b,
        hidden: hd,
        xw: xs,
        wt: &wt,
        bias,
        h0,
        c0,
        order: &x.order,
        skip_first: finite && lstm_kernel::all_zero(h0),
        acts: SyncPtr(sv.acts.as_mut_ptr()),
        cs: SyncPtr(sv.cs.as_mut_ptr()),
        tcs: SyncPtr(sv.tcs.as_mut_ptr()),
        hprev: SyncPtr(sv.hprev.as_mut_ptr()),
        y: SyncPtr(y.as_mut_ptr()),
    };
    for_row_ranges(par, b, work, |r0, r1| {
        lstm_kernel::forward_rows(simd, &f, r0, r1)
    });
    // SAFETY: every row of every step and of the last slot was written.
    unsafe { y.set_len((steps + 1) * bh) };
    Ok((Tensor::from_vec(y, &[steps + 1, b, hd])?, SavedAny::F32(sv)))
}

/// `lstm_layer_backward.simd`: the f32 backward of [`lstm_kernel`].
fn backward_simd(a: &BackwardIn, par: &Par) -> Result<Grads> {
    let simd = Simd::detect().ok_or_else(|| {
        invalid(
            "lstm_layer_backward",
            "algorithm",
            "lstm_layer_backward.simd needs AVX2+FMA or AVX-512",
        )
    })?;
    let SavedAny::F32(sv) = a.saved else {
        return Err(Error::DType {
            op: "lstm_layer_backward",
            expected: DType::F32,
            got: DType::F64,
        });
    };
    let x = a.input;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let q = lstm_kernel::NV * simd.lanes();
    // Packed even when the tiles could read `W_hh` in place: its rows 4·H·4 bytes apart fill
    // a few L1 sets and came from L2 at every row tile (that product ran ~35 % slower per
    // multiply-add than the forward's on AVX2); the panels are contiguous, in L1 per K block.
    let packed = lstm_kernel::pack_backward(simd, x.w.data::<f32>()?, hd)?;
    let (w, wks, wts) = (packed.as_slice(), q, g4 * q);
    // Every element is written by the steps below (no zeroing).
    let mut dg = uninit("lstm_layer_backward", steps * b * g4)?;
    let mut dh0 = crate::try_filled_vec("lstm_layer_backward", bh, 0f32)?;
    let mut dc0 = crate::try_filled_vec("lstm_layer_backward", bh, 0f32)?;
    let bw = lstm_kernel::Backward {
        steps,
        batch: b,
        hidden: hd,
        gy: a.gy.data::<f32>()?,
        w,
        wks,
        wts,
        acts: &sv.acts,
        cs: &sv.cs,
        tcs: &sv.tcs,
        c0: x.c0.data::<f32>()?,
        order: &x.order,
        need_h0: a.need_h0,
        dg: SyncPtr(dg.as_mut_ptr()),
        dh0: SyncPtr(dh0.as_mut_ptr()),
        dc0: SyncPtr(dc0.as_mut_ptr()),
    };
    for_row_ranges(par, b, steps * b * hd * g4, |r0, r1| {
        lstm_kernel::backward_rows(simd, &bw, r0, r1)
    });
    // SAFETY: the steps wrote all `steps·b·g4` elements (every row of every step).
    unsafe { dg.set_len(steps * b * g4) };
    let has_bias = x.b.is_some();
    let (dw, db) = blocks::hh_grads(&dg, &sv.hprev, steps, b, hd, a.blocks, |dg, hp, n| {
        hh_grads_simd(simd, dg, hp, steps, n, hd, has_bias, par)
    })?;
    let dxw = dxw_in_time_order(dg, x)?;
    Ok(Grads {
        dxw,
        dw,
        db,
        dh0: Tensor::from_vec(dh0, &[b, hd])?,
        dc0: Tensor::from_vec(dc0, &[b, hd])?,
    })
}

/// `W_hh`'s and `b_hh`'s gradients on the SIMD path from the gates' gradients `dg`
/// `[steps, b, 4H]` and the hidden states before each step `hprev` `[steps, b, H]`
/// (processing order): [`lstm_kernel::weight_grad_rows`] when `W_hh` is read in place, else
/// [`hh_grads_gemm`]; either way the first step is skipped when its rows add only `+0.0`.
#[allow(clippy::too_many_arguments)]
fn hh_grads_simd(
    simd: Simd,
    dg: &[f32],
    hprev: &[f32],
    steps: usize,
    b: usize,
    hd: usize,
    has_bias: bool,
    par: &Par,
) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
    let (g4, bh) = (4 * hd, b * hd);
    // The first step's rows add +0.0 to W_hh's gradient when h_prev is zero (and dG finite).
    let skip =
        usize::from(lstm_kernel::all_zero(&hprev[..bh]) && lstm_kernel::all_finite(&dg[..b * g4]));
    if !lstm_kernel::direct(simd, hd) {
        return hh_grads_gemm(dg, hprev, steps, b, hd, skip, has_bias, par);
    }
    let mut dw = uninit("lstm_layer_backward", g4 * hd)?;
    let out = SyncPtr(dw.as_mut_ptr());
    // b_hh's gradient beside it, the same columns of dG: each element the sum of its
    // column over every row in processing order from +0.0, as `hh_grads_gemm` (the product
    // adds the rows it reads as it copies them).
    let mut db = has_bias
        .then(|| crate::try_filled_vec("lstm_layer_backward", g4, 0f32))
        .transpose()?;
    let dbo = db.as_mut().map(|d| SyncPtr(d.as_mut_ptr()));
    let (dgs, hps) = (&dg[skip * b * g4..], &hprev[skip * bh..]);
    // Blocks of DW_ROWS rows of W_hh's gradient per thread: each element is one chain
    // whoever computes it.
    let blocks = g4.div_ceil(lstm_kernel::DW_ROWS);
    for_row_ranges(par, blocks, (steps - skip) * b * g4 * hd, |p0, p1| {
        let (i0, i1) = (
            p0 * lstm_kernel::DW_ROWS,
            (p1 * lstm_kernel::DW_ROWS).min(g4),
        );
        if let Some(dbo) = dbo {
            // SAFETY: elements i0..i1 of the g4 are this range's.
            let d = unsafe { core::slice::from_raw_parts_mut(dbo.at(i0), i1 - i0) };
            // The skipped first step's rows first; the product adds the others in order.
            for row in dg[..skip * b * g4].chunks_exact(g4) {
                for (d, &v) in d.iter_mut().zip(&row[i0..i1]) {
                    *d += v;
                }
            }
        }
        // SAFETY: the ranges are disjoint; `dw` holds g4·hd elements, `db` g4.
        unsafe { lstm_kernel::weight_grad_rows(simd, dgs, hps, hd, out, i0, i1, dbo) }
    });
    // SAFETY: the ranges cover every row, each written whole.
    unsafe { dw.set_len(g4 * hd) };
    Ok((dw, db))
}

/// `W_hh`'s gradient (`Σ_k dG_kᵀ · h_{k-1}`, one product with K = steps·b, from step `skip`
/// on: the steps before add `+0.0`) and `b_hh`'s (with `has_bias`: a sum in processing order
/// from `+0.0`), from the gates' gradients `dg` `[steps, b, 4H]` and `hprev` `[steps, b, H]`
/// in processing order.
#[allow(clippy::too_many_arguments)]
fn hh_grads_gemm<T: Real>(
    dg: &[T],
    hprev: &[T],
    steps: usize,
    b: usize,
    hd: usize,
    skip: usize,
    has_bias: bool,
    par: &Par,
) -> Result<(Vec<T>, Option<Vec<T>>)> {
    let (g4, bh) = (4 * hd, b * hd);
    let mut dw = crate::try_filled_vec("lstm_layer_backward", g4 * hd, T::ZERO)?;
    gemm(
        g4,
        hd,
        (steps - skip) * b,
        &dg[skip * b * g4..],
        (1, g4),
        &hprev[skip * bh..],
        (hd, 1),
        &mut dw,
        (hd, 1),
        par,
    )?;
    let db = if has_bias {
        let mut db = crate::try_filled_vec("lstm_layer_backward", g4, T::ZERO)?;
        for row in dg.chunks(g4) {
            for (d, &v) in db.iter_mut().zip(row) {
                *d = *d + v;
            }
        }
        Some(db)
    } else {
        None
    };
    Ok((dw, db))
}

/// `xw`'s gradient `[T, B, 4H]` in time order from the gates' gradients in processing order
/// (the forward direction's processing order already is).
fn dxw_in_time_order<T: Real>(dg: Vec<T>, x: &LayerIn) -> Result<Tensor> {
    let (steps, b, hd) = x.dims();
    let g4 = 4 * hd;
    let order = &x.order;
    let dxw = if order.iter().enumerate().all(|(k, &s)| k == s) {
        dg
    } else {
        let mut dxw = crate::try_filled_vec("lstm_layer_backward", dg.len(), T::ZERO)?;
        for (k, &s) in order.iter().enumerate() {
            dxw[s * b * g4..(s + 1) * b * g4].copy_from_slice(&dg[k * b * g4..(k + 1) * b * g4]);
        }
        dxw
    };
    Tensor::from_vec(dxw, &[steps, b, g4])
}

/// `lstm_layer.gemm`.
fn forward_gemm(x: &LayerIn, par: &Par) -> Result<(Tensor, SavedAny)> {
    Ok(match x.xw.dtype() {
        DType::F32 => {
            let (v, s) = forward_gemm_t::<f32>(x, par)?;
            (v, SavedAny::F32(s))
        }
        _ => {
            let (v, s) = forward_gemm_t::<f64>(x, par)?;
            (v, SavedAny::F64(s))
        }
    })
}

/// `lstm_layer_backward.gemm`.
fn backward_gemm(a: &BackwardIn, par: &Par) -> Result<Grads> {
    match a.saved {
        SavedAny::F32(s) => backward_gemm_t::<f32>(a, s, par),
        SavedAny::F64(s) => backward_gemm_t::<f64>(a, s, par),
    }
}

/// The GEMM path's forward: per step one `[B, H]·[H, 4H]` product (W_hhᵀ packed once), then
/// the gates row by row.
fn forward_gemm_t<T: Real>(x: &LayerIn, par: &Par) -> Result<(Tensor, Saved<T>)> {
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let (xs_all, w) = (x.xw.data::<T>()?, x.w.data::<T>()?);
    let bias = x.b.as_ref().map(|t| t.data::<T>()).transpose()?;
    let wt = packed_transpose(w, g4, hd)?;
    let mut sv = Saved {
        acts: vec![T::ZERO; steps * b * g4],
        cs: vec![T::ZERO; steps * bh],
        tcs: vec![T::ZERO; steps * bh],
        hprev: vec![T::ZERO; steps * bh],
    };
    let mut y = vec![T::ZERO; (steps + 1) * bh];
    let mut mm = vec![T::ZERO; b * g4];
    let mut h = x.h0.data::<T>()?.to_vec();
    let mut c = x.c0.data::<T>()?.to_vec();
    for (k, &s) in x.order.iter().enumerate() {
        sv.hprev[k * bh..(k + 1) * bh].copy_from_slice(&h);
        gemm_packed_b(b, &h, (hd, 1), &wt, &mut mm, (g4, 1), par)?;
        let xs = &xs_all[s * b * g4..(s + 1) * b * g4];
        let a = &mut sv.acts[k * b * g4..(k + 1) * b * g4];
        for r in 0..b {
            let (ar, xr, mr) = (
                &mut a[r * g4..(r + 1) * g4],
                &xs[r * g4..(r + 1) * g4],
                &mm[r * g4..(r + 1) * g4],
            );
            match bias {
                Some(bb) => {
                    for (((d, &x), &m), &bv) in ar.iter_mut().zip(xr).zip(mr).zip(bb) {
                        *d = x + (m + bv);
                    }
                }
                None => {
                    for ((d, &x), &m) in ar.iter_mut().zip(xr).zip(mr) {
                        *d = x + m;
                    }
                }
            }
            T::sigmoid_all(&mut ar[..2 * hd]);
            T::tanh_all(&mut ar[2 * hd..3 * hd]);
            T::sigmoid_all(&mut ar[3 * hd..]);
            let ar = &a[r * g4..(r + 1) * g4];
            for j in 0..hd {
                let (i, f, g, o) = (ar[j], ar[hd + j], ar[2 * hd + j], ar[3 * hd + j]);
                let e = r * hd + j;
                let cn = f * c[e] + i * g;
                let tc = cn.tanh();
                c[e] = cn;
                h[e] = o * tc;
                sv.cs[k * bh + e] = cn;
                sv.tcs[k * bh + e] = tc;
            }
        }
        y[s * bh..(s + 1) * bh].copy_from_slice(&h);
    }
    y[steps * bh..].copy_from_slice(&c);
    Ok((Tensor::from_vec(y, &[steps + 1, b, hd])?, sv))
}

/// The GEMM path's backward: per step (in reverse) the gates' gradients row by row, then one
/// `[B, 4H]·[4H, H]` product for the hidden state's.
fn backward_gemm_t<T: Real>(a: &BackwardIn, sv: &Saved<T>, par: &Par) -> Result<Grads> {
    let x = a.input;
    let (steps, b, hd) = x.dims();
    let (g4, bh) = (4 * hd, b * hd);
    let one = <T as crate::Element>::ONE;
    let gy = a.gy.data::<T>()?;
    let c0 = x.c0.data::<T>()?;
    // W_hh [4H, H] packed once for every step's dG·W_hh.
    let w = PackedB::new(g4, hd, x.w.data::<T>()?, (hd, 1))?;
    let mut dg_all = vec![T::ZERO; steps * b * g4];
    let mut dh = vec![T::ZERO; bh];
    let mut dc = gy[steps * bh..].to_vec();
    for k in (0..steps).rev() {
        let s = x.order[k];
        let gys = &gy[s * bh..(s + 1) * bh];
        let act = &sv.acts[k * b * g4..(k + 1) * b * g4];
        let dg = &mut dg_all[k * b * g4..(k + 1) * b * g4];
        let cprev = if k == 0 {
            c0
        } else {
            &sv.cs[(k - 1) * bh..k * bh]
        };
        let tcs = &sv.tcs[k * bh..(k + 1) * bh];
        for r in 0..b {
            let (ar, dr) = (&act[r * g4..(r + 1) * g4], &mut dg[r * g4..(r + 1) * g4]);
            for j in 0..hd {
                let e = r * hd + j;
                let (i, f, g, o) = (ar[j], ar[hd + j], ar[2 * hd + j], ar[3 * hd + j]);
                let dht = gys[e] + dh[e];
                let tc = tcs[e];
                let dct = dc[e] + (dht * o) * (one - tc * tc);
                dc[e] = dct * f;
                dr[j] = (dct * g) * ((one - i) * i);
                dr[hd + j] = (dct * cprev[e]) * ((one - f) * f);
                dr[2 * hd + j] = (dct * i) * (one - g * g);
                dr[3 * hd + j] = (dht * tc) * ((one - o) * o);
            }
        }
        if k > 0 || a.need_h0 {
            gemm_packed_b(b, dg, (g4, 1), &w, &mut dh, (hd, 1), par)?;
        }
    }
    let has_bias = x.b.is_some();
    let (dw, db) = blocks::hh_grads(&dg_all, &sv.hprev, steps, b, hd, a.blocks, |dg, hp, n| {
        hh_grads_gemm(dg, hp, steps, n, hd, 0, has_bias, par)
    })?;
    let dxw = dxw_in_time_order(dg_all, x)?;
    Ok(Grads {
        dxw,
        dw,
        db,
        dh0: Tensor::from_vec(dh, &[b, hd])?,
        dc0: Tensor::from_vec(dc, &[b, hd])?,
    })
}
