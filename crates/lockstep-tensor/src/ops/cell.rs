//! The pointwise part of one `nn.LSTMCell` step as one op each way: from the two gate
//! pre-activations (`linear(h, w_hh, b_hh)`, `linear(x, w_ih, b_ih)`) and the cell state to the
//! new `(h, c)`, and back. PyTorch's CPU cell (and lockstep's unfused one) runs about fifteen
//! small ops for this, each a pass over memory and a temporary; here each row is one pass.
//!
//! The bits are those of the unfused composition, operation for operation: `z = gh + gi`,
//! `σ` and `tanh` from the same vector kernels as [`Tensor::sigmoid`] and [`Tensor::tanh`],
//! `c' = f·c + i·g`, `h' = o·tanh(c')`; the backward applies `mul`'s, `tanh_backward`'s and
//! `sigmoid_backward`'s formulas in their order and adds `+0.0` to each gate gradient, as
//! accumulating the four chunks' zero-padded gradients does. Each row is computed from its own
//! inputs only (rows are split among threads in fixed blocks): thread-invariant.

use super::elementwise::Kernel;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::isa::Isa;
use crate::op::{Guarantee, Impl, Op};
use crate::threads::{Par, SyncPtr};
use crate::{Tensor, invalid, math};
use std::sync::Mutex;

chunked_ops! {
    /// The pointwise step of `nn.LSTMCell` ([`Tensor::lstm_cell`]).
    LSTM_CELL = "lstm_cell";
    /// Its gradient ([`Tensor::lstm_cell_backward`]).
    LSTM_CELL_BACKWARD = "lstm_cell_backward";
}

/// Outputs of at most this many gate elements are computed on the calling thread (rows are
/// independent, so this never changes bits). Far below the plain elementwise ops' limit: each
/// gate element costs a `σ` or `tanh` (≈ 5 ns in f64 on AVX2), so 4096 of them are ≈ 20 µs,
/// well above the cost of waking a helper.
const SERIAL_MAX: usize = 1 << 12;

/// A float type's vector `σ` and `tanh` (the kernels of `Tensor::sigmoid` / `Tensor::tanh`).
trait CellFloat:
    Element
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
{
    fn sigmoid_slice(isa: Isa, src: &[Self], dst: &mut [Self]);
    fn tanh_slice(isa: Isa, src: &[Self], dst: &mut [Self]);
}

impl CellFloat for f32 {
    fn sigmoid_slice(isa: Isa, src: &[f32], dst: &mut [f32]) {
        math::lanes::map_on(isa, src, dst, |x: f32| 1.0 / (1.0 + math::lanes::expf(-x)))
    }
    fn tanh_slice(isa: Isa, src: &[f32], dst: &mut [f32]) {
        math::lanes::tanhf_slice_on(isa, src, dst)
    }
}

impl CellFloat for f64 {
    fn sigmoid_slice(isa: Isa, src: &[f64], dst: &mut [f64]) {
        math::lanes::sigmoid_slice_on(isa, src, dst)
    }
    fn tanh_slice(isa: Isa, src: &[f64], dst: &mut [f64]) {
        math::lanes::tanh_slice_on(isa, src, dst)
    }
}

/// `[B, 4H]` gates and a `[B, H]` state of one float dtype: `(B, H)`.
fn check(op: &'static str, gh: &Tensor, gi: &Tensor, c: &Tensor) -> Result<(usize, usize)> {
    for t in [gi, c] {
        if t.dtype() != gh.dtype() {
            return Err(Error::DType {
                op,
                expected: gh.dtype(),
                got: t.dtype(),
            });
        }
    }
    if !gh.dtype().is_float() {
        return Err(Error::DType {
            op,
            expected: DType::F32,
            got: gh.dtype(),
        });
    }
    let (b, h) = match (gh.shape(), c.shape()) {
        ([b, g4], [cb, h]) if b == cb && h.checked_mul(4) == Some(*g4) => (*b, *h),
        _ => {
            return Err(invalid(
                op,
                "c",
                format!(
                    "expected gates [B, 4H] and a state [B, H], got {:?} and {:?}",
                    gh.shape(),
                    c.shape()
                ),
            ));
        }
    };
    if gi.shape() != gh.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: gh.shape().to_vec(),
            rhs: gi.shape().to_vec(),
        });
    }
    Ok((b, h))
}

/// A zeroed buffer of `n` elements, [`Error::OutOfMemory`] naming `op` if it cannot be had.
fn buf<T: Element>(op: &'static str, n: usize) -> Result<Vec<T>> {
    crate::try_filled_vec(op, n, T::ZERO)
}

/// How many blocks of rows `b` rows with `work` gate elements are cut into: one for small
/// work or one thread, else one per thread.
fn block_count(par: &Par, b: usize, work: usize) -> usize {
    let threads = if work <= SERIAL_MAX { 1 } else { par.threads() };
    threads.min(b).max(1)
}

/// Runs `f(rows, part)` for each block of the `parts.len()` fixed blocks of `b` rows, `part`
/// holding that block's output slices.
fn for_row_blocks<P: Send>(
    par: &Par,
    b: usize,
    parts: Vec<P>,
    f: impl Fn(core::ops::Range<usize>, P) + Sync,
) {
    let n = parts.len();
    let blocks: Vec<Mutex<Option<P>>> = parts.into_iter().map(|p| Mutex::new(Some(p))).collect();
    par.run_parts(n, |p| {
        let slot = blocks[p].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(slot) = slot {
            f(p * b / n..(p + 1) * b / n, slot);
        }
    });
}

/// `v` cut at the row boundaries of `n` blocks of `b` rows of `w` elements.
fn split_rows<T>(v: &mut [T], b: usize, n: usize, w: usize) -> Vec<&mut [T]> {
    let mut out = Vec::with_capacity(n);
    let mut rest = v;
    for p in 0..n {
        let rows = (p + 1) * b / n - p * b / n;
        let (head, tail) = rest.split_at_mut(rows * w);
        out.push(head);
        rest = tail;
    }
    out
}

fn forward_t<T: CellFloat>(
    op: &'static str,
    (gh, gi, c): (&Tensor, &Tensor, &Tensor),
    biases: Option<(&Tensor, &Tensor)>,
    (b, h): (usize, usize),
    par: &Par,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (gh, gi, c) = (gh.data::<T>()?, gi.data::<T>()?, c.data::<T>()?);
    let biases = match biases {
        Some((bh, bi)) => Some((bh.data::<T>()?, bi.data::<T>()?)),
        None => None,
    };
    let isa = Isa::best();
    // Outputs not zero-filled (that `memset` was a twentieth of an LSTM-cell model's time):
    // each row is computed in scratch rows and copied out whole.
    let mut hy = crate::tensor::try_with_capacity::<T>(op, b * h)?;
    let mut cy = crate::tensor::try_with_capacity::<T>(op, b * h)?;
    let mut saved = crate::tensor::try_with_capacity::<T>(op, b * 5 * h)?;
    let (hp, cp, sp) = (
        SyncPtr(hy.as_mut_ptr()),
        SyncPtr(cy.as_mut_ptr()),
        SyncPtr(saved.as_mut_ptr()),
    );
    let n = block_count(par, b, b * 4 * h);
    for_row_blocks(par, b, vec![(); n], |rows, ()| {
        let mut z = vec![T::ZERO; 4 * h];
        let mut s = vec![T::ZERO; 5 * h];
        let (mut cyr, mut hyr) = (vec![T::ZERO; h], vec![T::ZERO; h]);
        for r in rows {
            let g4 = r * 4 * h..(r + 1) * 4 * h;
            let (ghr, gir) = (&gh[g4.clone()], &gi[g4]);
            match biases {
                // `linear`'s bias adds (`add_`, one rounding each), then `gh + gi`.
                Some((bh, bi)) => {
                    let it = ghr.iter().zip(bh).zip(gir.iter().zip(bi));
                    for (z, ((&a, &p), (&bb, &q))) in z.iter_mut().zip(it) {
                        *z = (a + p) + (bb + q);
                    }
                }
                None => {
                    for ((z, &a), &bb) in z.iter_mut().zip(ghr).zip(gir) {
                        *z = a + bb;
                    }
                }
            }
            T::sigmoid_slice(isa, &z[..2 * h], &mut s[..2 * h]);
            T::tanh_slice(isa, &z[2 * h..3 * h], &mut s[2 * h..3 * h]);
            T::sigmoid_slice(isa, &z[3 * h..], &mut s[3 * h..4 * h]);
            let (act, t) = s.split_at_mut(4 * h);
            let cr = &c[r * h..(r + 1) * h];
            for j in 0..h {
                cyr[j] = act[h + j] * cr[j] + act[j] * act[2 * h + j];
            }
            T::tanh_slice(isa, &cyr, t);
            for (j, o) in hyr.iter_mut().enumerate() {
                *o = act[3 * h + j] * t[j];
            }
            // SAFETY: row `r` of each output lies inside its capacity (`b·h`, `b·h`, `b·5h`);
            // the blocks' rows are disjoint.
            unsafe {
                core::ptr::copy_nonoverlapping(hyr.as_ptr(), hp.get().add(r * h), h);
                core::ptr::copy_nonoverlapping(cyr.as_ptr(), cp.get().add(r * h), h);
                core::ptr::copy_nonoverlapping(s.as_ptr(), sp.get().add(r * 5 * h), 5 * h);
            }
        }
    });
    // SAFETY: every row of both outputs was written whole above.
    unsafe {
        hy.set_len(b * h);
        cy.set_len(b * h);
        saved.set_len(b * 5 * h);
    }
    Ok((
        Tensor::from_vec(hy, &[b, h])?,
        Tensor::from_vec(cy, &[b, h])?,
        Tensor::from_vec(saved, &[b, 5 * h])?,
    ))
}

fn backward_t<T: CellFloat>(
    op: &'static str,
    (grad_h, grad_c): (Option<&Tensor>, Option<&Tensor>),
    saved: &Tensor,
    c: &Tensor,
    need_c: bool,
    (b, h): (usize, usize),
    par: &Par,
) -> Result<(Tensor, Option<Tensor>)> {
    let (s, c) = (saved.data::<T>()?, c.data::<T>()?);
    let (ghy, gcy) = (
        grad_h.map(|g| g.data::<T>()).transpose()?,
        grad_c.map(|g| g.data::<T>()).transpose()?,
    );
    // Both gradients present: each element + 0 (`-0` becomes `+0`), as the sum of the two
    // zero-padded gradients of `[h', c']` was; one alone: unchanged (`+ -0` is exact), the
    // other's zeros `+0`.
    let both = ghy.is_some() && gcy.is_some();
    let adj = if both { T::ZERO } else { T::from_f64(-0.0) };
    let zeros = buf::<T>(op, if both { 0 } else { h })?;
    let one = T::ONE;
    let mut dg = buf::<T>(op, b * 4 * h)?;
    let mut dc = buf::<T>(op, if need_c { b * h } else { 0 })?;
    let n = block_count(par, b, b * 4 * h);
    let ds = split_rows(&mut dg, b, n, 4 * h);
    let cs = if need_c {
        split_rows(&mut dc, b, n, h)
    } else {
        (0..n).map(|_| &mut [][..]).collect()
    };
    let parts = ds.into_iter().zip(cs).collect();
    for_row_blocks(par, b, parts, |rows, (dg, dc): (&mut [T], &mut [T])| {
        for (k, r) in rows.enumerate() {
            // Whole-row slices zipped, so the loops carry no bounds checks and vectorise.
            let s = &s[r * 5 * h..(r + 1) * 5 * h];
            let (si, s) = s.split_at(h);
            let (sf, s) = s.split_at(h);
            let (sg, s) = s.split_at(h);
            let (so, st) = s.split_at(h);
            let row = r * h..(r + 1) * h;
            let ghr = ghy.map_or(&zeros[..], |g| &g[row.clone()]);
            let ger = gcy.map_or(&zeros[..], |g| &g[row.clone()]);
            let cr = &c[row];
            let d = &mut dg[k * 4 * h..(k + 1) * 4 * h];
            let (di, d) = d.split_at_mut(h);
            let (df, d) = d.split_at_mut(h);
            let (dgg, dout) = d.split_at_mut(h);
            // h' = o·t: `mul`'s backward, then `tanh_backward`, then the two uses of c' summed;
            // c' = f·c + i·g: `mul`'s backward, then `sigmoid_backward` / `tanh_backward`; each
            // gate gradient + 0 as the chunks' zero-padded gradients accumulate.
            let gc = |gh: T, ge: T, o: T, t: T| (ge + adj) + (gh + adj) * o * (one - t * t);
            let it = si
                .iter()
                .zip(sf)
                .zip(sg)
                .zip(so)
                .zip(st)
                .zip(ghr)
                .zip(ger)
                .zip(cr);
            let out = di
                .iter_mut()
                .zip(df.iter_mut())
                .zip(dgg.iter_mut())
                .zip(dout.iter_mut());
            for ((((di, df), dg), dout), (((((((&i, &f), &g), &o), &t), &gh), &ge), &cj)) in
                out.zip(it)
            {
                let gcj = gc(gh, ge, o, t);
                *di = gcj * g * ((one - i) * i) + T::ZERO;
                *df = gcj * cj * ((one - f) * f) + T::ZERO;
                *dg = gcj * i * (one - g * g) + T::ZERO;
                *dout = (gh + adj) * t * ((one - o) * o) + T::ZERO;
            }
            if need_c {
                let dc = &mut dc[k * h..(k + 1) * h];
                let it = sf.iter().zip(so).zip(st).zip(ghr).zip(ger);
                for (d, ((((&f, &o), &t), &gh), &ge)) in dc.iter_mut().zip(it) {
                    *d = gc(gh, ge, o, t) * f;
                }
            }
        }
    });
    Ok((
        Tensor::from_vec(dg, &[b, 4 * h])?,
        if need_c {
            Some(Tensor::from_vec(dc, &[b, h])?)
        } else {
            None
        },
    ))
}

impl Tensor {
    /// The pointwise step of `nn.LSTMCell` (PyTorch's gate order `i, f, g, o`): with
    /// `z = gh + gi` (`[B, 4H]` each; with `biases = (b_hh, b_ih)`, `[4H]` each,
    /// `z = (gh + b_hh) + (gi + b_ih)`: the bits of the two linears' bias adds, without their
    /// passes), `i, f, o = σ(z)`, `g = tanh(z)`, `c' = f·c + i·g`, `h' = o·tanh(c')`. Returns
    /// `h'` and `c'` (`[B, H]` each, separate dense tensors) and what
    /// [`lstm_cell_backward`](Self::lstm_cell_backward) needs (`[B, 5H]`: the four activated
    /// gates and `tanh(c')`). The bits of those ops run one by one, at any thread count and
    /// on every instruction-set path. Views are copied dense first.
    ///
    /// # Errors
    /// Dtypes that differ or are not float; shapes other than `[B, 4H]`, `[B, 4H]`, `[B, H]`
    /// (and `[4H]` for the biases); dispatch refuses the op; an output cannot be allocated.
    pub fn lstm_cell(
        gh: &Tensor,
        gi: &Tensor,
        c: &Tensor,
        biases: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let op = &LSTM_CELL;
        let bh = check(op.name, gh, gi, c)?;
        if let Some((b_hh, b_ih)) = biases {
            for (name, t) in [("b_hh", b_hh), ("b_ih", b_ih)] {
                if t.shape() != [4 * bh.1] {
                    return Err(invalid(
                        op.name,
                        name,
                        format!("expected [{}], got {:?}", 4 * bh.1, t.shape()),
                    ));
                }
                if t.dtype() != gh.dtype() {
                    return Err(Error::DType {
                        op: op.name,
                        expected: gh.dtype(),
                        got: t.dtype(),
                    });
                }
            }
        }
        let (gh, gi, c) = (
            gh.contiguous_for(op.name)?,
            gi.contiguous_for(op.name)?,
            c.contiguous_for(op.name)?,
        );
        let biases = match biases {
            Some((p, q)) => Some((p.contiguous_for(op.name)?, q.contiguous_for(op.name)?)),
            None => None,
        };
        let mut inputs = vec![&gh, &gi, &c];
        inputs.extend(biases.iter().flat_map(|(p, q)| [p, q]));
        let biases = biases.as_ref().map(|(p, q)| (p, q));
        op.run(&inputs, |imp, par| {
            let Kernel::Chunked = imp.f;
            let t = (&gh, &gi, &c);
            match gh.dtype() {
                DType::F32 => forward_t::<f32>(op.name, t, biases, bh, par),
                _ => forward_t::<f64>(op.name, t, biases, bh, par),
            }
        })
    }

    /// The gradient of [`lstm_cell`](Self::lstm_cell): from the gradients of `h'` and `c'`
    /// (`[B, H]` each; `None` for one that no gradient reached, taken as zeros), the
    /// forward's `saved` and the state `c`, the gradient of the gates `z` (`[B, 4H]`, for `gh`
    /// and `gi` alike) and, with `need_c`, of `c`. The bits of the unfused ops' backwards
    /// (`mul`, `tanh_backward`, `sigmoid_backward`, the chunks' zero padding) and of the sum
    /// of the two outputs' zero-padded gradients, at any thread count.
    ///
    /// # Errors
    /// Both gradients `None`; shapes or dtypes that do not match the forward's; dispatch
    /// refuses the op; an output cannot be allocated.
    pub fn lstm_cell_backward(
        grad_h: Option<&Tensor>,
        grad_c: Option<&Tensor>,
        saved: &Tensor,
        c: &Tensor,
        need_c: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let op = &LSTM_CELL_BACKWARD;
        let (b, h) = match c.shape() {
            [b, h] => (*b, *h),
            s => return Err(invalid(op.name, "c", format!("expected [B, H], got {s:?}"))),
        };
        if grad_h.is_none() && grad_c.is_none() {
            return Err(invalid(op.name, "grad_h", "neither output has a gradient"));
        }
        let h5 = h.saturating_mul(5);
        let mut checks = vec![("saved", saved, vec![b, h5])];
        checks.extend(grad_h.map(|g| ("grad_h", g, vec![b, h])));
        checks.extend(grad_c.map(|g| ("grad_c", g, vec![b, h])));
        for (name, t, want) in checks {
            if t.shape() != want.as_slice() {
                return Err(invalid(
                    op.name,
                    name,
                    format!("expected {want:?}, got {:?}", t.shape()),
                ));
            }
            if t.dtype() != c.dtype() {
                return Err(Error::DType {
                    op: op.name,
                    expected: c.dtype(),
                    got: t.dtype(),
                });
            }
        }
        if !c.dtype().is_float() {
            return Err(Error::DType {
                op: op.name,
                expected: DType::F32,
                got: c.dtype(),
            });
        }
        let dense = |t: Option<&Tensor>| t.map(|t| t.contiguous_for(op.name)).transpose();
        let (grad_h, grad_c) = (dense(grad_h)?, dense(grad_c)?);
        let (saved, c) = (saved.contiguous_for(op.name)?, c.contiguous_for(op.name)?);
        let mut inputs: Vec<&Tensor> = grad_h.iter().chain(grad_c.iter()).collect();
        inputs.extend([&saved, &c]);
        let grads = (grad_h.as_ref(), grad_c.as_ref());
        op.run(&inputs, |imp, par| {
            let Kernel::Chunked = imp.f;
            match c.dtype() {
                DType::F32 => backward_t::<f32>(op.name, grads, &saved, &c, need_c, (b, h), par),
                _ => backward_t::<f64>(op.name, grads, &saved, &c, need_c, (b, h), par),
            }
        })
    }
}
