//! An LSTM layer's input projection `x · W_ihᵀ + b_ih` for every step at once, as one op with
//! the fused layer's own kernels ([`lstm_kernel::project_rows`], [`lstm_kernel::product_rows`],
//! [`lstm_kernel::product_t_rows`]): no packing of the operands for the backward, no zeroed
//! outputs. Each element is the same fma chain as the blocked GEMM's, so the value and the
//! gradients have the bits of `linear` (`lstm_input.linear`, which runs instead off x86-64,
//! for f64, and for `4H` that is not whole tiles), at any number of threads: a thread computes
//! whole elements. Pin with `crate::autotune::with_algorithm`.

use super::lstm_kernel::{self, NV, Simd};
use super::{for_row_ranges, uninit};
use crate::error::invalid;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::threads::Par;
use crate::{DType, Result, Tensor};

/// `(x [M, k], W [g, k], b [g])` → `[M, g]`.
type ForwardFn = fn(&Tensor, &Tensor, Option<&Tensor>, &Par) -> Result<Tensor>;

/// The projection: `lstm_input.simd` (f32, AVX2+FMA or AVX-512, `k` and `g` whole tiles) or
/// `lstm_input.linear` (`Var::linear`); the same bits.
static LSTM_INPUT: Op<ForwardFn> = Op {
    name: "lstm_input",
    impls: &[
        Impl {
            algo: "lstm_input.simd",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_simd,
        },
        Impl {
            algo: "lstm_input.linear",
            guarantee: Guarantee::ThreadInvariant,
            f: forward_linear,
        },
    ],
};

/// Its backward: the SIMD kernels' products (`linear`'s products where the instruction set
/// changed since the forward), traced once per gradient.
pub(super) static LSTM_INPUT_BACKWARD: Op<()> = Op {
    name: "lstm_input_backward",
    impls: &[Impl {
        algo: "lstm_input_backward.simd",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// The op's registrations (forward and backward).
pub(super) fn ops() -> Vec<crate::op::OpInfo> {
    vec![LSTM_INPUT.info(), LSTM_INPUT_BACKWARD.info()]
}

/// Whether the SIMD kernels take a product with `g` outputs on this CPU (whole tiles).
fn simd_for(g: usize) -> Option<Simd> {
    let simd = Simd::detect()?;
    g.is_multiple_of(NV * simd.lanes()).then_some(simd)
}

/// Whether [`lstm_input`] can take `x.linear(w, b)` on this CPU: `x` `[T, B, k]`, `w`
/// `[g, k]`, `b` `[g]`, all f32, `k > 0`, and `g` whole tiles of the SIMD kernels.
pub fn lstm_input_fits(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> bool {
    let (xs, ws) = (x.shape(), w.shape());
    let f32s = x.dtype() == DType::F32
        && w.dtype() == DType::F32
        && b.is_none_or(|b| b.dtype() == DType::F32);
    f32s && xs.len() == 3
        && ws.len() == 2
        && xs[2] == ws[1]
        && ws[1] > 0
        && b.is_none_or(|b| b.shape() == [ws[0]])
        && simd_for(ws[0]).is_some()
}

/// `x.linear(w, b)` for `x` `[T, B, k]` through dispatch (`lstm_input`): `Some(value)` from
/// the SIMD kernels (`lstm_input.simd`), or `None` when `lstm_input.linear` was chosen (a pin,
/// or benchmark mode found it faster): the caller then computes `linear` itself, with the
/// same bits. The inputs must pass [`lstm_input_fits`].
///
/// # Errors
/// Inputs that do not fit (`InvalidArgument`), `OutOfMemory`.
pub fn lstm_input(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Option<Tensor>> {
    if !lstm_input_fits(x, w, b) {
        return Err(invalid(
            "lstm_input",
            "input",
            format!(
                "expected f32 x [T, B, k], W [g, k] and b [g] with g whole SIMD tiles, got {:?}, {:?}, {:?}",
                x.shape(),
                w.shape(),
                b.map(|b| b.shape().to_vec())
            ),
        ));
    }
    let (xt, wt) = (x.try_contiguous()?, w.try_contiguous()?);
    let bt = b.map(Tensor::try_contiguous).transpose()?;
    let key = format!("{:?}x{:?}", x.shape(), w.shape());
    let mut traced = vec![&xt, &wt];
    traced.extend(bt.as_ref());
    LSTM_INPUT.tuned(&key).run(&traced, |imp, par| {
        let v = (imp.f)(&xt, &wt, bt.as_ref(), par)?;
        Ok((imp.algo == "lstm_input.simd").then_some(v))
    })
}

/// The gradients of [`lstm_input`]'s `x` (`gy · W`, if `need_x`), `W` (`gyᵀ · x`, if
/// `need_w`) and, with `has_bias`, `b` (if `need_b`: `linear`'s column sums), in that order,
/// through dispatch (`lstm_input_backward`, traced once per gradient). `x` and `w` are the
/// forward's inputs.
///
/// # Errors
/// `gy` of another shape than the forward's value, `OutOfMemory`.
pub fn lstm_input_backward(
    gy: &Tensor,
    x: &Tensor,
    w: &Tensor,
    need_x: bool,
    need_w: bool,
    has_bias: bool,
    need_b: bool,
) -> Result<Vec<Option<Tensor>>> {
    check_backward(gy, x, w)?;
    let g = w.shape()[0];
    let gy = gy.try_contiguous()?;
    let (xt, wt) = (x.try_contiguous()?, w.try_contiguous()?);
    LSTM_INPUT_BACKWARD.run(&[&gy], |_, par| {
        let (gx, gw) = backward(&gy, &xt, &wt, need_x, need_w, par)?;
        let mut out = vec![gx, gw];
        if has_bias {
            // As `linear`'s backward: the same reduction, the same bits.
            out.push(if need_b {
                Some(gy.reshape(&[-1, g as isize])?.sum_dim(0, false)?)
            } else {
                None
            });
        }
        Ok(out)
    })
}

/// The checks of [`lstm_input_backward`]'s operands: `gy` of `x`'s shape with `w`'s rows as
/// its last dimension, all f32, `w` a matrix with `x`'s last dimension as its columns.
pub(super) fn check_backward(gy: &Tensor, x: &Tensor, w: &Tensor) -> Result<()> {
    let g = w.shape().first().copied().unwrap_or(0);
    let mut want = x.shape().to_vec();
    if let Some(last) = want.last_mut() {
        *last = g;
    }
    let f32s = [gy, x, w].iter().all(|t| t.dtype() == DType::F32);
    if gy.shape() != want.as_slice()
        || !f32s
        || w.ndim() != 2
        || x.shape().last() != w.shape().get(1)
    {
        return Err(invalid(
            "lstm_input_backward",
            "grad",
            format!(
                "expected an f32 gradient of shape {want:?}, got {:?} {:?}",
                gy.dtype(),
                gy.shape()
            ),
        ));
    }
    Ok(())
}

/// `lstm_input.simd`.
fn forward_simd(x: &Tensor, w: &Tensor, b: Option<&Tensor>, par: &Par) -> Result<Tensor> {
    let (g, k) = (w.shape()[0], w.shape()[1]);
    let simd = simd_for(g).ok_or_else(|| {
        invalid(
            "lstm_input",
            "algorithm",
            "lstm_input.simd needs AVX2+FMA or AVX-512 and whole tiles",
        )
    })?;
    let (xs, ws) = (x.data::<f32>()?, w.data::<f32>()?);
    let bs = b.map(|b| b.data::<f32>()).transpose()?;
    let m = xs.len() / k;
    let wt = lstm_kernel::pack_rows(simd, ws, g, k, par, m * g * k)?;
    let mut out = uninit("lstm_input", m * g)?;
    let o = SyncPtr(out.as_mut_ptr());
    for_row_ranges(par, m, m * g * k, |r0, r1| {
        // SAFETY: the row ranges are disjoint; `out` has room for m·g elements.
        unsafe { lstm_kernel::project_rows(simd, xs, k, &wt, g, bs, o, r0, r1) }
    });
    // SAFETY: every row was written whole.
    unsafe { out.set_len(m * g) };
    let mut shape = x.shape()[..x.ndim() - 1].to_vec();
    shape.push(g);
    Tensor::from_vec(out, &shape)
}

/// `lstm_input.linear`: `Tensor::linear`, the product and the bias of `Var::linear`.
fn forward_linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>, _: &Par) -> Result<Tensor> {
    x.linear(w, b)
}

/// The gradients of `x` (`gy · W`) and of `W` (`gyᵀ · x`), those asked for.
pub(super) fn backward(
    gy: &Tensor,
    x: &Tensor,
    w: &Tensor,
    rx: bool,
    rw: bool,
    par: &Par,
) -> Result<(Option<Tensor>, Option<Tensor>)> {
    let (g, k) = (w.shape()[0], w.shape()[1]);
    let Some(simd) = simd_for(g) else {
        // The instruction set changed since the forward (`set_isa`): `linear`'s products.
        let g2 = gy.reshape(&[-1, g as isize])?;
        let x2 = x.reshape(&[-1, k as isize])?;
        let gx = rx.then(|| gy.matmul(w)).transpose()?;
        let gw = rw.then(|| g2.transpose(0, 1)?.matmul(&x2)).transpose()?;
        return Ok((gx, gw));
    };
    let q = NV * simd.lanes();
    let (gs, xs, ws) = (gy.data::<f32>()?, x.data::<f32>()?, w.data::<f32>()?);
    let m = xs.len() / k.max(1);
    let gx = if !rx {
        None
    } else if k.is_multiple_of(q) {
        // `W_ih`'s column panels once for every row range (rows `k·4` bytes apart in place
        // crowd a few L1 sets).
        let wp = lstm_kernel::pack_cols(simd, ws, g, k)?;
        let mut dx = uninit("lstm_input_backward", m * k)?;
        let o = SyncPtr(dx.as_mut_ptr());
        for_row_ranges(par, m, m * g * k, |r0, r1| {
            // SAFETY: the row ranges are disjoint; `dx` has room for m·k elements.
            unsafe { lstm_kernel::product_rows(simd, gs, g, &wp, k, o, r0, r1) }
        });
        // SAFETY: every row was written whole.
        unsafe { dx.set_len(m * k) };
        Some(Tensor::from_vec(dx, x.shape())?)
    } else {
        // `linear`'s product (inputs that are not whole tiles: the first layer, rarely needed).
        Some(gy.matmul(w)?)
    };
    if rw && !k.is_multiple_of(q) {
        // Few inputs (the first layer): `W_ih`'s gradient transposed, `k` rows of `g`, then
        // turned around.
        let mut dwt = uninit("lstm_input_backward", g * k)?;
        let o = SyncPtr(dwt.as_mut_ptr());
        for_row_ranges(par, g / q, m * g * k, |b0, b1| {
            // SAFETY: the column blocks are disjoint; `dwt` has room for k·g elements.
            unsafe { lstm_kernel::product_t_cols(simd, gs, g, xs, k, o, b0, b1) }
        });
        // SAFETY: every column block was written whole.
        unsafe { dwt.set_len(g * k) };
        let mut dw = uninit("lstm_input_backward", g * k)?;
        for i in 0..g {
            dw.extend((0..k).map(|c| dwt[c * g + i]));
        }
        return Ok((gx, Some(Tensor::from_vec(dw, &[g, k])?)));
    }
    let gw = if rw {
        let mut dw = uninit("lstm_input_backward", g * k)?;
        let o = SyncPtr(dw.as_mut_ptr());
        // Blocks of DW_ROWS rows per thread (whole micro-tiles).
        let blocks = g.div_ceil(lstm_kernel::DW_ROWS);
        for_row_ranges(par, blocks, m * g * k, |p0, p1| {
            let (i0, i1) = (
                p0 * lstm_kernel::DW_ROWS,
                (p1 * lstm_kernel::DW_ROWS).min(g),
            );
            // SAFETY: the ranges are disjoint; `dw` has room for g·k elements.
            unsafe { lstm_kernel::product_t_rows(simd, gs, g, xs, k, o, i0, i1, None) }
        });
        // SAFETY: the ranges cover every row, each written whole.
        unsafe { dw.set_len(g * k) };
        Some(Tensor::from_vec(dw, &[g, k])?)
    } else {
        None
    };
    Ok((gx, gw))
}
