//! One direction of a GRU or Elman RNN layer as one differentiable op (`gru_layer`,
//! `rnn_layer`): `xw` `[T, B, G·H]` (the input projection with `b_ih`; GRU gates in PyTorch's
//! `r, z, n` order, G = 3; RNN G = 1), then per step `w = h·W_hhᵀ + b_hh` and
//!
//! GRU: `r = σ(x_r + w_r)`, `z = σ(x_z + w_z)`, `n = tanh(x_n + r·w_n)`, `h' = n + z·(h − n)`;
//! RNN: `h' = tanh(x + w)` or `relu(x + w)`,
//!
//! each operation rounded as the op-by-op graph (`linear`, `add`, `sigmoid`, `mul`, `tanh`,
//! `relu`, `sub`) rounds it, instead of 4 to 12 nodes per step whose backward allocated a
//! `[T, B, G·H]` gradient per step for the projection. `W_hhᵀ` is packed once per call for the
//! blocked GEMM (`gemm_packed_b`, `gemm`'s bits). `sigmoid` and `tanh` are those of the fused
//! LSTM layer: f64 the portable `lockstep_tensor::math` functions of the elementwise ops (so
//! f64 values are bit for bit the op-by-op graph's), f32 the vectorised polynomials (within 4
//! ulp). The backward walks the steps in reverse with the saved activations: the gates'
//! gradients in one pass, one `[B, G·H]·[G·H, H]` product per step for the hidden state's,
//! then `W_hh`'s gradient as one product over all steps (`dWᵀ·H_prev`, K = T·B) and `b_hh`'s as
//! column sums in step order. The batch is cut into row ranges that run through every step on
//! their own threads (a row's recurrence needs no other row; each element of a product is the
//! blocked GEMM's chain whatever the rows beside it), and `W_hh`'s gradient splits output
//! tiles, so the bits do not depend on the number of threads. Traced as `gru_layer` /
//! `rnn_layer` and their `_backward` (one record per gradient).

use super::{Real, packed_transpose, try_row_ranges};
use crate::error::invalid;
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::ops::matmul::{PackedB, gemm, gemm_packed_b};
use crate::threads::Par;
use crate::{DType, Error, Result, Tensor};

/// The cell of a fused layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// `nn.GRU`.
    Gru,
    /// `nn.RNN(nonlinearity='tanh')`.
    Tanh,
    /// `nn.RNN(nonlinearity='relu')`.
    Relu,
}

impl CellKind {
    /// Gate blocks of `H` in `xw` and `W_hh`.
    pub fn gates(self) -> usize {
        match self {
            CellKind::Gru => 3,
            CellKind::Tanh | CellKind::Relu => 1,
        }
    }

    /// The op and its backward.
    fn ops(self) -> (&'static Op<ForwardFn>, &'static Op<BackwardFn>) {
        match self {
            CellKind::Gru => (&GRU_LAYER, &GRU_LAYER_BACKWARD),
            CellKind::Tanh | CellKind::Relu => (&RNN_LAYER, &RNN_LAYER_BACKWARD),
        }
    }
}

/// The layer's inputs, contiguous: `xw` `[T, B, G·H]`, `w` = `W_hh` `[G·H, H]`, `b` = `b_hh`
/// `[G·H]`, `h0` `[B, H]`; step `k` handles time `order[k]`.
struct LayerIn {
    cell: CellKind,
    xw: Tensor,
    w: Tensor,
    b: Option<Tensor>,
    h0: Tensor,
    order: Vec<usize>,
}

impl LayerIn {
    /// `(T, B, H)`.
    fn dims(&self) -> (usize, usize, usize) {
        let s = self.xw.shape();
        (s[0], s[1], s[2] / self.cell.gates())
    }
}

/// What the backward needs, in processing order.
struct Saved<T> {
    /// `[T, B, G·H]`: the GRU's r, z, n after their nonlinearities; the RNN's new hidden state.
    acts: Vec<T>,
    /// `[T, B, G·H]`: `h·W_hhᵀ + b_hh` (the GRU's backward reads its n block).
    hw: Vec<T>,
    /// `[T, B, H]`: the hidden state before each step.
    hprev: Vec<T>,
}

enum SavedAny {
    F32(Saved<f32>),
    F64(Saved<f64>),
}

/// The gradients of `xw`, `W_hh`, `b_hh` (with a bias) and `h0`.
struct Grads {
    dxw: Tensor,
    dw: Tensor,
    db: Option<Tensor>,
    dh0: Tensor,
}

type ForwardFn = fn(&LayerIn, &Par) -> Result<(Tensor, SavedAny)>;
/// `(input, saved, gradient of the outputs [T, B, H], whether h0's gradient is needed)`.
type BackwardFn = fn(&LayerIn, &SavedAny, &Tensor, bool, &Par) -> Result<Grads>;

static GRU_LAYER: Op<ForwardFn> = Op {
    name: "gru_layer",
    impls: &[Impl {
        algo: "gru_layer.gemm",
        guarantee: Guarantee::ThreadInvariant,
        f: forward,
    }],
};

static GRU_LAYER_BACKWARD: Op<BackwardFn> = Op {
    name: "gru_layer_backward",
    impls: &[Impl {
        algo: "gru_layer_backward.gemm",
        guarantee: Guarantee::ThreadInvariant,
        f: backward,
    }],
};

static RNN_LAYER: Op<ForwardFn> = Op {
    name: "rnn_layer",
    impls: &[Impl {
        algo: "rnn_layer.gemm",
        guarantee: Guarantee::ThreadInvariant,
        f: forward,
    }],
};

static RNN_LAYER_BACKWARD: Op<BackwardFn> = Op {
    name: "rnn_layer_backward",
    impls: &[Impl {
        algo: "rnn_layer_backward.gemm",
        guarantee: Guarantee::ThreadInvariant,
        f: backward,
    }],
};

/// The ops' registrations.
pub(super) fn ops() -> Vec<crate::op::OpInfo> {
    vec![
        GRU_LAYER.info(),
        GRU_LAYER_BACKWARD.info(),
        RNN_LAYER.info(),
        RNN_LAYER_BACKWARD.info(),
    ]
}

/// One direction of a GRU or Elman RNN layer, run forward through dispatch (`gru_layer` /
/// `rnn_layer`), holding what its backward needs.
pub struct RecurrentLayer {
    input: LayerIn,
    saved: SavedAny,
}

impl RecurrentLayer {
    /// Runs the layer: `xw` `[T, B, G·H]` (the input projection with `b_ih`; G = 3 for the GRU,
    /// gates in PyTorch's `r, z, n` order, G = 1 for the RNN), `w_hh` `[G·H, H]`, `b_hh`
    /// `[G·H]`, `h0` `[B, H]`, all of one float type; step `k` handles time `order[k]`.
    /// Returns the outputs `[T, B, H]` in time order (the last step's hidden state is
    /// `order.last()`'s row) and the layer for [`RecurrentLayer::backward`]. The bits do not
    /// depend on the number of threads.
    ///
    /// # Errors
    /// Shapes that do not fit (`InvalidArgument` naming them), an empty or out-of-range `order`,
    /// dtypes other than one float type for all inputs, `OutOfMemory`.
    pub fn forward(
        cell: CellKind,
        xw: &Tensor,
        w_hh: &Tensor,
        b_hh: Option<&Tensor>,
        h0: &Tensor,
        order: &[usize],
    ) -> Result<(Tensor, RecurrentLayer)> {
        let (op, _) = cell.ops();
        let (xs, ws, hs) = (xw.shape(), w_hh.shape(), h0.shape());
        let fits = xs.len() == 3
            && hs.len() == 2
            && xs[1] == hs[0]
            && xs[2] == cell.gates() * hs[1]
            && ws == [xs[2], hs[1]]
            && b_hh.is_none_or(|b| b.shape() == [xs[2]])
            && order.len() == xs[0]
            && !order.is_empty()
            && order.iter().all(|&s| s < xs[0]);
        if !fits {
            let g = if cell == CellKind::Gru { "3H" } else { "H" };
            return Err(invalid(
                op.name,
                "shapes",
                format!(
                    "expected xw [T, B, {g}], W_hh [{g}, H], b_hh [{g}], h0 [B, H] and T steps, \
                     got {xs:?}, {ws:?}, {:?}, {hs:?} and {} steps",
                    b_hh.map(|b| b.shape().to_vec()),
                    order.len()
                ),
            ));
        }
        let dtype = xw.dtype();
        let inputs: Vec<&Tensor> = [Some(xw), Some(w_hh), b_hh, Some(h0)]
            .into_iter()
            .flatten()
            .collect();
        if let Some(bad) = inputs
            .iter()
            .find(|v| v.dtype() != dtype || !dtype.is_float())
        {
            return Err(Error::DType {
                op: op.name,
                expected: if dtype.is_float() { dtype } else { DType::F32 },
                got: bad.dtype(),
            });
        }
        let input = LayerIn {
            cell,
            xw: xw.try_contiguous()?,
            w: w_hh.try_contiguous()?,
            b: b_hh.map(Tensor::try_contiguous).transpose()?,
            h0: h0.try_contiguous()?,
            order: order.to_vec(),
        };
        let (value, saved) = {
            let mut traced = vec![&input.xw, &input.w];
            traced.extend(input.b.as_ref());
            traced.push(&input.h0);
            op.run(&traced, |imp, par| (imp.f)(&input, par))?
        };
        Ok((value, RecurrentLayer { input, saved }))
    }

    /// The gradients from `gy` (the gradient of the outputs, `[T, B, H]`), in the order `xw`,
    /// `W_hh`, `b_hh` (only with a bias), `h0` (`None` unless `need_h0`). Traced once per
    /// gradient.
    ///
    /// # Errors
    /// `gy` of another shape or dtype than the outputs, `OutOfMemory`.
    pub fn backward(&self, gy: &Tensor, need_h0: bool) -> Result<Vec<Option<Tensor>>> {
        let (_, op_backward) = self.input.cell.ops();
        let (steps, b, hd) = self.input.dims();
        let dtype = self.input.xw.dtype();
        if gy.shape() != [steps, b, hd] || gy.dtype() != dtype {
            return Err(invalid(
                op_backward.name,
                "grad",
                format!(
                    "expected a {dtype:?} gradient of shape {:?}, got {:?} {:?}",
                    [steps, b, hd],
                    gy.dtype(),
                    gy.shape()
                ),
            ));
        }
        let gy = gy.try_contiguous()?;
        let has_bias = self.input.b.is_some();
        op_backward.run(&[&gy], |imp, par| {
            let g = (imp.f)(&self.input, &self.saved, &gy, need_h0, par)?;
            let mut out = vec![Some(g.dxw), Some(g.dw)];
            if has_bias {
                out.push(g.db);
            }
            out.push(need_h0.then_some(g.dh0));
            Ok(out)
        })
    }
}

/// `gru_layer.gemm` and `rnn_layer.gemm`.
fn forward(x: &LayerIn, par: &Par) -> Result<(Tensor, SavedAny)> {
    Ok(match x.xw.dtype() {
        DType::F32 => {
            let (v, s) = forward_t::<f32>(x, par)?;
            (v, SavedAny::F32(s))
        }
        _ => {
            let (v, s) = forward_t::<f64>(x, par)?;
            (v, SavedAny::F64(s))
        }
    })
}

/// `gru_layer_backward.gemm` and `rnn_layer_backward.gemm`.
fn backward(x: &LayerIn, saved: &SavedAny, gy: &Tensor, need_h0: bool, par: &Par) -> Result<Grads> {
    match saved {
        SavedAny::F32(s) => backward_t::<f32>(x, s, gy, need_h0, par),
        SavedAny::F64(s) => backward_t::<f64>(x, s, gy, need_h0, par),
    }
}

fn zeros<T: Real>(op: &'static str, n: usize) -> Result<Vec<T>> {
    crate::try_filled_vec(op, n, T::ZERO)
}

fn forward_t<T: Real>(x: &LayerIn, par: &Par) -> Result<(Tensor, Saved<T>)> {
    let op = x.cell.ops().0.name;
    let (steps, b, hd) = x.dims();
    let (gh, bh) = (x.cell.gates() * hd, b * hd);
    let (xs_all, w) = (x.xw.data::<T>()?, x.w.data::<T>()?);
    let bias = x.b.as_ref().map(|t| t.data::<T>()).transpose()?;
    let wt = packed_transpose(w, gh, hd)?;
    let mut sv = Saved {
        acts: zeros(op, steps * b * gh)?,
        hw: zeros(op, steps * b * gh)?,
        hprev: zeros(op, steps * bh)?,
    };
    let mut y = zeros::<T>(op, steps * bh)?;
    let h0 = x.h0.data::<T>()?;
    let (acts, hws, hprev, yo) = (
        SyncPtr(sv.acts.as_mut_ptr()),
        SyncPtr(sv.hw.as_mut_ptr()),
        SyncPtr(sv.hprev.as_mut_ptr()),
        SyncPtr(y.as_mut_ptr()),
    );
    // The batch cut into row ranges, each through every step on its own thread (a row's
    // recurrence needs no other row), the products serial inside: the same bits as one range.
    let serial = Par::new(1);
    try_row_ranges(par, b, steps * b * gh * hd, |r0, r1| {
        let n = r1 - r0;
        let mut h = h0[r0 * hd..r1 * hd].to_vec();
        let mut hn = zeros::<T>(op, n * hd)?;
        for (k, &s) in x.order.iter().enumerate() {
            // SAFETY: rows r0..r1 of step k (and of time s in `y`) are this range's alone;
            // the buffers hold `steps·b` rows.
            let (hp, hw, a, yk) = unsafe {
                (
                    hprev.rows((k * b + r0) * hd, n * hd),
                    hws.rows((k * b + r0) * gh, n * gh),
                    acts.rows((k * b + r0) * gh, n * gh),
                    yo.rows((s * b + r0) * hd, n * hd),
                )
            };
            hp.copy_from_slice(&h);
            gemm_packed_b(n, &h, (hd, 1), &wt, hw, (gh, 1), &serial)?;
            if let Some(bb) = bias {
                for row in hw.chunks_exact_mut(gh) {
                    for (v, &c) in row.iter_mut().zip(bb) {
                        *v = *v + c;
                    }
                }
            }
            let xs = &xs_all[(s * b + r0) * gh..(s * b + r1) * gh];
            match x.cell {
                CellKind::Gru => cell_rows(xs, hw, &h, a, &mut hn, hd),
                // The op-by-op `xs.add(&hw)?.tanh()` / `.relu()`; the output saved in `a`.
                CellKind::Tanh | CellKind::Relu => {
                    for ((o, &x), &w) in hn.iter_mut().zip(xs).zip(&*hw) {
                        *o = x + w;
                    }
                    if x.cell == CellKind::Tanh {
                        T::tanh_all(&mut hn);
                    } else {
                        hn.iter_mut()
                            .for_each(|v| *v = if *v < T::ZERO { T::ZERO } else { *v });
                    }
                    a.copy_from_slice(&hn);
                }
            }
            yk.copy_from_slice(&hn);
            core::mem::swap(&mut h, &mut hn);
        }
        Ok(())
    })?;
    Ok((Tensor::from_vec(y, &[steps, b, hd])?, sv))
}

/// One step's elementwise part, row by row: `acts` gets `r, z, n`, `out` the new hidden state.
fn cell_rows<T: Real>(xs: &[T], ws: &[T], hs: &[T], acts: &mut [T], out: &mut [T], hd: usize) {
    if hd == 0 {
        return;
    }
    for (((a, x), w), (hp, o)) in acts
        .chunks_exact_mut(3 * hd)
        .zip(xs.chunks_exact(3 * hd))
        .zip(ws.chunks_exact(3 * hd))
        .zip(hs.chunks_exact(hd).zip(out.chunks_exact_mut(hd)))
    {
        let (rz, nn) = a.split_at_mut(2 * hd);
        for ((a, &x), &w) in rz.iter_mut().zip(&x[..2 * hd]).zip(&w[..2 * hd]) {
            *a = x + w;
        }
        T::sigmoid_all(rz);
        let (r, z) = rz.split_at(hd);
        for (((n, &x), &w), &r) in nn.iter_mut().zip(&x[2 * hd..]).zip(&w[2 * hd..]).zip(r) {
            *n = x + r * w;
        }
        T::tanh_all(nn);
        for (((o, &n), &z), &hp) in o.iter_mut().zip(&*nn).zip(z).zip(hp) {
            *o = n + z * (hp - n);
        }
    }
}

/// One step's gradients, row by row, from `g = dh'`: `dz = g·(h − n)·z(1 − z)`,
/// `dn = g·(1 − z)·(1 − n²)`, `dr = dn·w_n·r(1 − r)`; `dx = [dr, dz, dn]`,
/// `dw = [dr, dz, dn·r]`, `dh = g·z`.
#[allow(clippy::too_many_arguments)]
fn cell_grad_rows<T: Real>(
    g: &[T],
    acts: &[T],
    ws: &[T],
    hs: &[T],
    dx: &mut [T],
    dw: &mut [T],
    dh: &mut [T],
    hd: usize,
) {
    if hd == 0 {
        return;
    }
    let one = T::ONE;
    let rows = acts
        .chunks_exact(3 * hd)
        .zip(ws.chunks_exact(3 * hd))
        .zip(g.chunks_exact(hd).zip(hs.chunks_exact(hd)))
        .zip(
            dx.chunks_exact_mut(3 * hd)
                .zip(dw.chunks_exact_mut(3 * hd))
                .zip(dh.chunks_exact_mut(hd)),
        );
    for (((a, w), (g, hp)), ((dx, dw), dh)) in rows {
        let (r, rest) = a.split_at(hd);
        let (z, n) = rest.split_at(hd);
        let wn = &w[2 * hd..];
        let (dxr, rest) = dx.split_at_mut(hd);
        let (dxz, dxn) = rest.split_at_mut(hd);
        let (dwr, rest) = dw.split_at_mut(hd);
        let (dwz, dwn) = rest.split_at_mut(hd);
        for j in 0..hd {
            let (r, z, n, gj) = (r[j], z[j], n[j], g[j]);
            let dz = gj * (hp[j] - n) * (z * (one - z));
            let dn = gj * (one - z) * (one - n * n);
            let dr = dn * wn[j] * (r * (one - r));
            dxr[j] = dr;
            dxz[j] = dz;
            dxn[j] = dn;
            dwr[j] = dr;
            dwz[j] = dz;
            dwn[j] = dn * r;
            dh[j] = gj * z;
        }
    }
}

fn backward_t<T: Real>(
    x: &LayerIn,
    sv: &Saved<T>,
    gy: &Tensor,
    need_h0: bool,
    par: &Par,
) -> Result<Grads> {
    let (steps, b, hd) = x.dims();
    let (gh, bh) = (x.cell.gates() * hd, b * hd);
    let gy = gy.data::<T>()?;
    // W_hh [G·H, H] packed once for every step's dW·W_hh.
    let w = PackedB::new(gh, hd, x.w.data::<T>()?, (hd, 1))?;
    let op = x.cell.ops().1.name;
    let mut dxw = zeros::<T>(op, steps * b * gh)?;
    let mut dws = zeros::<T>(op, steps * b * gh)?;
    let mut dh0 = zeros::<T>(op, bh)?;
    let (dxo, dwo, dho) = (
        SyncPtr(dxw.as_mut_ptr()),
        SyncPtr(dws.as_mut_ptr()),
        SyncPtr(dh0.as_mut_ptr()),
    );
    let serial = Par::new(1);
    // Row ranges through every step, as the forward.
    try_row_ranges(par, b, steps * b * gh * hd, |r0, r1| {
        let n = r1 - r0;
        let (mut dh, mut g, mut prod) = (
            zeros::<T>(op, n * hd)?,
            zeros::<T>(op, n * hd)?,
            zeros::<T>(op, n * hd)?,
        );
        for k in (0..steps).rev() {
            let s = x.order[k];
            for ((g, &y), &d) in g
                .iter_mut()
                .zip(&gy[(s * b + r0) * hd..(s * b + r1) * hd])
                .zip(&dh)
            {
                *g = y + d;
            }
            // SAFETY: rows r0..r1 of step k (time s in `dxw`) are this range's alone.
            let (dx, dw) = unsafe {
                (
                    dxo.rows((s * b + r0) * gh, n * gh),
                    dwo.rows((k * b + r0) * gh, n * gh),
                )
            };
            let acts = &sv.acts[(k * b + r0) * gh..(k * b + r1) * gh];
            match x.cell {
                CellKind::Gru => cell_grad_rows(
                    &g,
                    acts,
                    &sv.hw[(k * b + r0) * gh..(k * b + r1) * gh],
                    &sv.hprev[(k * b + r0) * hd..(k * b + r1) * hd],
                    dx,
                    dw,
                    &mut dh,
                    hd,
                ),
                // `tanh_backward` / `relu_backward` given the output; no direct term.
                CellKind::Tanh | CellKind::Relu => {
                    let tanh = x.cell == CellKind::Tanh;
                    for (((dx, dw), &g), &y) in dx.iter_mut().zip(&mut *dw).zip(&g).zip(acts) {
                        let d = if tanh {
                            g * (T::ONE - y * y)
                        } else if y > T::ZERO {
                            g
                        } else {
                            T::ZERO
                        };
                        *dx = d;
                        *dw = d;
                    }
                    dh.fill(T::ZERO);
                }
            }
            if k > 0 || need_h0 {
                gemm_packed_b(n, dw, (gh, 1), &w, &mut prod, (hd, 1), &serial)?;
                for (d, &p) in dh.iter_mut().zip(&prod) {
                    *d = *d + p;
                }
            }
        }
        // SAFETY: rows r0..r1 of h0's gradient are this range's alone.
        unsafe { dho.rows(r0 * hd, n * hd) }.copy_from_slice(&dh);
        Ok(())
    })?;
    let mut dw = zeros::<T>(op, gh * hd)?;
    gemm(
        gh,
        hd,
        steps * b,
        &dws,
        (1, gh),
        &sv.hprev,
        (hd, 1),
        &mut dw,
        (hd, 1),
        par,
    )?;
    let db = match x.b {
        Some(_) => {
            let mut db = zeros::<T>(op, gh)?;
            for row in dws.chunks_exact(gh.max(1)) {
                for (d, &v) in db.iter_mut().zip(row) {
                    *d = *d + v;
                }
            }
            Some(Tensor::from_vec(db, &[gh])?)
        }
        None => None,
    };
    Ok(Grads {
        dxw: Tensor::from_vec(dxw, &[steps, b, gh])?,
        dw: Tensor::from_vec(dw, &[gh, hd])?,
        db,
        dh0: Tensor::from_vec(dh0, &[b, hd])?,
    })
}
