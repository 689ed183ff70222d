//! The pointwise part of one `nn.LSTMCell` step as one op each way: from the two gate
//! pre-activations (`linear(h, w_hh, b_hh)`, `linear(x, w_ih, b_ih)`) and the cell state to the
//! new `(h, c)`, and back. PyTorch's CPU cell (and lockstep's unfused one) runs about fifteen
//! small ops for this, each a pass over memory and a temporary; here each block of rows is one
//! pass.
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
use core::ops::Range;
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

/// Rows per block of the forward's pointwise pass. The block's values of each gate lie side
/// by side (`R·H` of them), so the `σ` and `tanh` kernels run whole vectors over the block
/// instead of one short row at a time, each with a tail of single elements (H = 51 in f64 on
/// AVX-512: 3 of every 51 values one by one, at nearly a vector's cost each).
const BLOCK_ROWS: usize = 8;

/// What the forward's row blocks read and write.
struct FwdCx<'a, T> {
    gh: &'a [T],
    gi: &'a [T],
    c: &'a [T],
    biases: Option<(&'a [T], &'a [T])>,
    h: usize,
    hy: SyncPtr<T>,
    cy: SyncPtr<T>,
    saved: SyncPtr<T>,
}

/// [`forward_rows`] compiled for the path `isa`: its loops in that path's registers, the same
/// operations on every path, so the same bits.
///
/// # Safety
/// As [`forward_rows`]; `isa` is a path this CPU has.
unsafe fn forward_rows_on<T: CellFloat>(isa: Isa, cx: &FwdCx<'_, T>, rows: Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        unsafe fn avx512<T: CellFloat>(isa: Isa, cx: &FwdCx<'_, T>, rows: Range<usize>) {
            // SAFETY: forwarded.
            unsafe { forward_rows(isa, cx, rows) }
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2<T: CellFloat>(isa: Isa, cx: &FwdCx<'_, T>, rows: Range<usize>) {
            // SAFETY: forwarded.
            unsafe { forward_rows(isa, cx, rows) }
        }
        match isa {
            // SAFETY: the CPU has the path (the caller's contract); the rest is forwarded.
            Isa::Avx512 => return unsafe { avx512(isa, cx, rows) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(isa, cx, rows) },
            Isa::Portable => {}
        }
    }
    // SAFETY: forwarded.
    unsafe { forward_rows(isa, cx, rows) }
}

/// The forward of rows `rows`, [`BLOCK_ROWS`] at a time: the block's pre-activations gate by
/// gate (gate `v` of row `i` at `v·R·H + i·H`), their `σ` / `tanh`, `c'`, `tanh(c')` and `h'`,
/// then the rows copied out. Element by element the formulas of the unfused ops.
///
/// # Safety
/// `hy` and `cy` have room for rows `rows` of `H` elements, `saved` of `5·H`, and no other
/// task writes those rows.
#[inline(always)]
unsafe fn forward_rows<T: CellFloat>(isa: Isa, cx: &FwdCx<'_, T>, rows: Range<usize>) {
    let h = cx.h;
    let cap = BLOCK_ROWS.min(rows.len()) * h;
    let mut z = vec![T::ZERO; 4 * cap];
    let mut s = vec![T::ZERO; 4 * cap];
    let (mut cyr, mut t, mut hyr) = (vec![T::ZERO; cap], vec![T::ZERO; cap], vec![T::ZERO; cap]);
    let mut r0 = rows.start;
    while r0 < rows.end {
        let nr = BLOCK_ROWS.min(rows.end - r0);
        let w = nr * h;
        for i in 0..nr {
            let row = (r0 + i) * 4 * h;
            for v in 0..4 {
                let zr = &mut z[v * w + i * h..][..h];
                let (ghr, gir) = (&cx.gh[row + v * h..][..h], &cx.gi[row + v * h..][..h]);
                match cx.biases {
                    // `linear`'s bias adds (`add_`, one rounding each), then `gh + gi`.
                    Some((bh, bi)) => {
                        let it = ghr.iter().zip(&bh[v * h..][..h]);
                        let it = it.zip(gir.iter().zip(&bi[v * h..][..h]));
                        for (z, ((&a, &p), (&bb, &q))) in zr.iter_mut().zip(it) {
                            *z = (a + p) + (bb + q);
                        }
                    }
                    None => {
                        for ((z, &a), &bb) in zr.iter_mut().zip(ghr).zip(gir) {
                            *z = a + bb;
                        }
                    }
                }
            }
        }
        T::sigmoid_slice(isa, &z[..2 * w], &mut s[..2 * w]);
        T::tanh_slice(isa, &z[2 * w..3 * w], &mut s[2 * w..3 * w]);
        T::sigmoid_slice(isa, &z[3 * w..4 * w], &mut s[3 * w..4 * w]);
        let (si, rest) = s[..4 * w].split_at(w);
        let (sf, rest) = rest.split_at(w);
        let (sg, so) = rest.split_at(w);
        let c = &cx.c[r0 * h..][..w];
        for ((((cn, &f), &cj), &i), &g) in cyr[..w].iter_mut().zip(sf).zip(c).zip(si).zip(sg) {
            *cn = f * cj + i * g;
        }
        T::tanh_slice(isa, &cyr[..w], &mut t[..w]);
        for ((hn, &o), &tj) in hyr[..w].iter_mut().zip(so).zip(&t[..w]) {
            *hn = o * tj;
        }
        // SAFETY: rows r0..r0+nr of each output lie inside its capacity and are this task's
        // (the caller's contract); the scratch holds `w` (and `4·w`) elements.
        unsafe {
            core::ptr::copy_nonoverlapping(hyr.as_ptr(), cx.hy.get().add(r0 * h), w);
            core::ptr::copy_nonoverlapping(cyr.as_ptr(), cx.cy.get().add(r0 * h), w);
            for i in 0..nr {
                let dst = cx.saved.get().add((r0 + i) * 5 * h);
                for v in 0..4 {
                    core::ptr::copy_nonoverlapping(
                        s.as_ptr().add(v * w + i * h),
                        dst.add(v * h),
                        h,
                    );
                }
                core::ptr::copy_nonoverlapping(t.as_ptr().add(i * h), dst.add(4 * h), h);
            }
        }
        r0 += nr;
    }
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
    // each block of rows is computed in scratch and copied out whole.
    let mut hy = crate::tensor::try_with_capacity::<T>(op, b * h)?;
    let mut cy = crate::tensor::try_with_capacity::<T>(op, b * h)?;
    let mut saved = crate::tensor::try_with_capacity::<T>(op, b * 5 * h)?;
    let cx = FwdCx {
        gh,
        gi,
        c,
        biases,
        h,
        hy: SyncPtr(hy.as_mut_ptr()),
        cy: SyncPtr(cy.as_mut_ptr()),
        saved: SyncPtr(saved.as_mut_ptr()),
    };
    let n = block_count(par, b, b * 4 * h);
    for_row_blocks(par, b, vec![(); n], |rows, ()| {
        // SAFETY: `isa` is `Isa::best()`, a path this CPU has; the blocks' rows are disjoint
        // and inside the outputs' capacities.
        unsafe { forward_rows_on(isa, &cx, rows) }
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

/// What the backward's row blocks read.
struct BwdCx<'a, T> {
    s: &'a [T],
    c: &'a [T],
    ghy: Option<&'a [T]>,
    gcy: Option<&'a [T]>,
    zeros: &'a [T],
    adj: T,
    h: usize,
    need_c: bool,
}

/// [`backward_rows`] compiled for the path `isa` (as [`forward_rows_on`]).
///
/// # Safety
/// `isa` is a path this CPU has.
unsafe fn backward_rows_on<T: CellFloat>(
    isa: Isa,
    cx: &BwdCx<'_, T>,
    rows: Range<usize>,
    dg: &mut [T],
    dc: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn avx512<T: CellFloat>(cx: &BwdCx<'_, T>, rows: Range<usize>, dg: &mut [T], dc: &mut [T]) {
            backward_rows(cx, rows, dg, dc)
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2<T: CellFloat>(cx: &BwdCx<'_, T>, rows: Range<usize>, dg: &mut [T], dc: &mut [T]) {
            backward_rows(cx, rows, dg, dc)
        }
        match isa {
            // SAFETY: the CPU has the path (the caller's contract).
            Isa::Avx512 => return unsafe { avx512(cx, rows, dg, dc) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(cx, rows, dg, dc) },
            Isa::Portable => {}
        }
    }
    backward_rows(cx, rows, dg, dc)
}

/// The backward of rows `rows` into `dg` (`4·H` per row) and, with `need_c`, `dc` (`H` per
/// row), both starting at the first of `rows`.
#[inline(always)]
fn backward_rows<T: CellFloat>(cx: &BwdCx<'_, T>, rows: Range<usize>, dg: &mut [T], dc: &mut [T]) {
    let BwdCx {
        s,
        c,
        ghy,
        gcy,
        zeros,
        adj,
        h,
        need_c,
    } = *cx;
    let one = T::ONE;
    for (k, r) in rows.enumerate() {
        // Whole-row slices zipped, so the loops carry no bounds checks and vectorise.
        let s = &s[r * 5 * h..(r + 1) * 5 * h];
        let (si, s) = s.split_at(h);
        let (sf, s) = s.split_at(h);
        let (sg, s) = s.split_at(h);
        let (so, st) = s.split_at(h);
        let row = r * h..(r + 1) * h;
        let ghr = ghy.map_or(zeros, |g| &g[row.clone()]);
        let ger = gcy.map_or(zeros, |g| &g[row.clone()]);
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
        for ((((di, df), dg), dout), (((((((&i, &f), &g), &o), &t), &gh), &ge), &cj)) in out.zip(it)
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
    let cx = BwdCx {
        s,
        c,
        ghy,
        gcy,
        zeros: &zeros,
        adj,
        h,
        need_c,
    };
    let isa = Isa::best();
    for_row_blocks(par, b, parts, |rows, (dg, dc): (&mut [T], &mut [T])| {
        // SAFETY: `isa` is `Isa::best()`, a path this CPU has.
        unsafe { backward_rows_on(isa, &cx, rows, dg, dc) }
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
