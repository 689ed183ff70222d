//! nanoGPT's causal self-attention from a fused `[B, T, 3C]` projection, one head at a time in
//! cache: `softmax(masked_fill(q·kᵀ · scale, j > i, −∞))`, times a dropout mask, times `v`,
//! and its backward — with exactly the bits of the composed ops (`matmul` on the blocked
//! kernel, [`causal_softmax`](Tensor::causal_softmax), `mul`, `matmul`, the heads merged), in
//! about half their products and without their intermediate tensors.
//!
//! Each product element is the blocked GEMM's one fma chain over K from `+0` (the same
//! micro-kernels, so the same bits on every path). What the causal mask makes exact zeros is
//! skipped, and skipping them is exact:
//! * a masked score is replaced by `−∞` whatever it is, so scores above the diagonal are not
//!   computed (whole micro-tiles of them);
//! * `y = att·v`, `∂q = ∂s·k`: row `i`'s chain ends with the masked columns' terms, `+0·v`
//!   (`0·scale·k`), each adding a zero to the sum so far, which leaves every value but `−0`
//!   unchanged: the chain stops at the row panel's last kept column, and a `−0` result of `y`
//!   finishes the chain one term at a time (`∂q` goes through the heads' merge, `g + 0`, which
//!   makes every zero `+0` anyway);
//! * `∂v = attᵀ·∂y`, `∂k = ∂sᵀ·q`: column `j`'s chain starts with the masked rows' terms, zeros
//!   added to the `+0` start, which stays `+0`: the chain starts at the panel's first row;
//! * `∂att = ∂y·vᵀ` above the diagonal only enters the softmax backward's row sum, as
//!   `∂att·0 = ±0` terms, which change the sum only when it is zero: those rows (rare) compute
//!   the masked columns after all.
//!
//! Those arguments need finite values, zeros where the mask is and no overflow in a skipped
//! chain; a head where any of that is not checked true (a non-finite input, a dropout mask with
//! a non-finite entry, a non-finite `scale`, `hd·max|∂y|·max|v|` near overflow) computes every
//! product in full, which is the composed ops' computation itself.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::ops::lines::copy_line;
use crate::ops::matmul::kernel::prefetch;
use crate::ops::matmul::{GemmFloat, Isa, Kernel};
use crate::ops::reduce::{LANES, Real, backward_row, forward_row};
use crate::threads::Par;
use crate::{Tensor, invalid};
use core::sync::atomic::{AtomicBool, Ordering};

/// `causal_self_attention`: heads split among threads, each computed whole by one.
pub static CAUSAL_SELF_ATTENTION: Op<()> = Op {
    name: "causal_self_attention",
    impls: &[Impl {
        algo: "causal_self_attention.heads",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// `causal_self_attention_backward`: heads split among threads, each computed whole by one.
pub static CAUSAL_SELF_ATTENTION_BACKWARD: Op<()> = Op {
    name: "causal_self_attention_backward",
    impls: &[Impl {
        algo: "causal_self_attention_backward.heads",
        guarantee: Guarantee::ThreadInvariant,
        f: (),
    }],
};

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![
        CAUSAL_SELF_ATTENTION.info(),
        CAUSAL_SELF_ATTENTION_BACKWARD.info(),
    ]
}

/// What the kernels need: the GEMM's micro-kernels, the softmax rows' `exp`, and the checks
/// behind the skipped products, on the bits (branch-free loops the compiler vectorises).
trait AttnFloat: GemmFloat + Real {
    /// The largest magnitude of `x` as bits (`|v|`'s bits compare as `|v|` does), and whether
    /// all of `x` is finite.
    fn max_abs_bits(x: &[Self]) -> (u64, bool);
    /// Whether every element of `x` is finite, `+0` or positive (no sign bit: not `−0`).
    fn all_finite_nonneg(x: &[Self]) -> bool;
    /// Whether every element of `x` is `+0`.
    fn all_pos_zero(x: &[Self]) -> bool;
    /// Whether `self` is `−0`.
    fn is_neg_zero(self) -> bool;
    /// Whether any element of `x` is `−0` (a branch-free fold: vectorised).
    fn any_neg_zero(x: &[Self]) -> bool;
    /// The largest finite value, as f64.
    const MAX_F64: f64;
}

macro_rules! attn_float {
    ($t:ty, $u:ty) => {
        impl AttnFloat for $t {
            #[inline(always)]
            fn max_abs_bits(x: &[Self]) -> (u64, bool) {
                const ABS: $u = <$u>::MAX >> 1;
                let m = x.iter().fold(0, |m: $u, v| m.max(v.to_bits() & ABS));
                (m as u64, m < <$t>::INFINITY.to_bits())
            }
            #[inline(always)]
            fn all_finite_nonneg(x: &[Self]) -> bool {
                // A sign bit makes the bits larger than any finite non-negative value's.
                x.iter().fold(0, |m: $u, v| m.max(v.to_bits())) < <$t>::INFINITY.to_bits()
            }
            #[inline(always)]
            fn all_pos_zero(x: &[Self]) -> bool {
                x.iter().fold(0, |m: $u, v| m | v.to_bits()) == 0
            }
            #[inline(always)]
            fn is_neg_zero(self) -> bool {
                self.to_bits() == 1 << (<$u>::BITS - 1)
            }
            #[inline(always)]
            fn any_neg_zero(x: &[Self]) -> bool {
                x.iter().fold(0, |m: $u, v| m | <$u>::from(v.is_neg_zero())) != 0
            }
            const MAX_F64: f64 = <$t>::MAX as f64;
        }
    };
}
attn_float!(f32, u32);
attn_float!(f64, u64);

/// The shapes: batch, tokens, width, heads, head size.
#[derive(Clone, Copy)]
struct Geom {
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
    hd: usize,
}

impl Geom {
    fn heads(&self) -> usize {
        self.b * self.nh
    }
    /// Where row `i` of head `bh`'s q (`part` 0), k (1) or v (2) starts in the `[B, T, 3C]`
    /// projection (rows `3C` apart).
    fn qkv(&self, bh: usize, part: usize, i: usize) -> usize {
        let (b, h) = (bh / self.nh, bh % self.nh);
        ((b * self.t + i) * 3 + part) * self.c + h * self.hd
    }
    /// Where row `i` of head `bh` starts in a `[B, T, C]` tensor (rows `C` apart).
    fn merged(&self, bh: usize, i: usize) -> usize {
        let (b, h) = (bh / self.nh, bh % self.nh);
        (b * self.t + i) * self.c + h * self.hd
    }
}

/// One task's scratch, sized for one head (`tp`, `tn`, `dn`: `t` and `hd` rounded up to the
/// kernel's panels).
struct Scratch<T> {
    /// B panels of a transposed `[T, hd]` block (kᵀ, vᵀ): `tn · hd`.
    bt: Vec<T>,
    /// B panels of a `[T, hd]` block (v, ∂y, k, q): `dn · t`.
    b: Vec<T>,
    /// Scores, or the scores' gradient: `tp × tn`.
    s: Vec<T>,
    /// The weights after dropout, `t × t` (forward without a mask: unused).
    ad: Vec<T>,
    /// The scores' gradient after the softmax backward, `t × t`.
    gs: Vec<T>,
    /// One packed A panel: `mr · max(t, hd)`.
    a: Vec<T>,
    /// One micro-tile of C: `mr × nr`.
    ct: Vec<T>,
    /// Two row buffers of `t`.
    row: Vec<T>,
    buf: Vec<T>,
    /// The forward's softmax row in and out, `t` rounded up to whole lane groups twice.
    pad: Vec<T>,
}

impl<T: AttnFloat> Scratch<T> {
    fn new(op: &'static str, g: &Geom, k: &Kernel<T>) -> Result<Self> {
        let (t, hd, mr, nr) = (g.t, g.hd, k.mr, k.nr);
        let (tp, tn, dn) = (
            t.div_ceil(mr) * mr,
            t.div_ceil(nr) * nr,
            hd.div_ceil(nr) * nr,
        );
        let v = |n: usize| crate::try_filled_vec(op, n, T::ZERO);
        Ok(Scratch {
            bt: v(tn * hd)?,
            b: v(dn * t)?,
            s: v(tp * tn)?,
            ad: v(t * t)?,
            gs: v(t * t)?,
            a: v(mr * t.max(hd))?,
            ct: v(mr * nr)?,
            row: v(t)?,
            buf: v(t)?,
            pad: v(2 * t.next_multiple_of(LANES))?,
        })
    }
}

/// Over `t` rows of `w` elements, `ld` apart from `base`: whether all are finite, and the
/// largest magnitude.
#[inline(always)]
fn finite_max<T: AttnFloat>(x: &[T], base: usize, ld: usize, t: usize, w: usize) -> (bool, f64) {
    let (mut fin, mut mx) = (true, 0u64);
    for i in 0..t {
        let (m, f) = T::max_abs_bits(&x[base + i * ld..base + i * ld + w]);
        (fin, mx) = (fin && f, mx.max(m));
    }
    let mx = match size_of::<T>() {
        4 => f32::from_bits(mx as u32) as f64,
        _ => f64::from_bits(mx),
    };
    (fin, mx)
}

/// Asks for the `len` elements at `p` in L2 (a hint: nothing is read, whatever `p` is).
#[inline(always)]
fn fetch<T>(p: *const T, len: usize) {
    let lead = p as usize % 64;
    let bytes = lead + len * size_of::<T>();
    prefetch(
        p.cast::<u8>().wrapping_sub(lead),
        0..bytes.div_ceil(64),
        false,
    );
}

/// Fetches row `i` of head `bh`'s q, k and v (and, at `out`, of the `[B, T, 3C]` result), of
/// its `[B, T, C]` rows at `merged` (∂y, or y) and of its `t × t` blocks (weights, mask), when
/// `bh` is a head: a task runs its heads in order, and prefetching the next one's rows a row
/// per row of this one's softmax hides the misses its first reads would take (the data was
/// written long before, by the projection or the forward, and is no longer in cache).
#[inline(always)]
fn fetch_head_row<T>(
    g: &Geom,
    bh: usize,
    i: usize,
    qkv: *const T,
    out: Option<*const T>,
    merged: *const T,
    blocks: [Option<*const T>; 2],
) {
    if bh >= g.heads() {
        return;
    }
    for part in 0..3 {
        let at = g.qkv(bh, part, i);
        fetch(qkv.wrapping_add(at), g.hd);
        if let Some(o) = out {
            fetch(o.wrapping_add(at), g.hd);
        }
    }
    fetch(merged.wrapping_add(g.merged(bh, i)), g.hd);
    for x in blocks.into_iter().flatten() {
        fetch(x.wrapping_add((bh * g.t + i) * g.t), g.t);
    }
}

/// Packs `n` rows of `k` elements (`src[base + r·ld + p]`) transposed into B panels of `nr`
/// columns: `dst[(jp·k + p)·nr + jj]` is row `jp·nr + jj`'s element `p` (zero past `n`). Full
/// f32 panels are transposed in registers (the GEMM's packing; a copy, the same bits).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pack_bt<T: AttnFloat>(
    src: &[T],
    base: usize,
    ld: usize,
    n: usize,
    k: usize,
    nr: usize,
    dst: &mut [T],
    isa: Isa,
) {
    if n == 0 || k == 0 {
        return;
    }
    for (jp, panel) in dst[..n.div_ceil(nr) * nr * k]
        .chunks_exact_mut(nr * k)
        .enumerate()
    {
        let r0 = jp * nr;
        if r0 + nr <= n && size_of::<T>() == 4 {
            assert!(base + (r0 + nr - 1) * ld + k <= src.len());
            #[cfg(target_arch = "x86_64")]
            // SAFETY: T is f32; the panel's `nr` rows of `k` elements are inside `src`
            // (asserted) and the panel holds `k · nr`; `isa` is the CPU's.
            if unsafe {
                crate::ops::matmul::gemm::pack_transposed(
                    isa,
                    src[base + r0 * ld..].as_ptr(),
                    ld,
                    panel,
                    nr,
                    k,
                )
            } {
                continue;
            }
        }
        for jj in 0..nr {
            let r = r0 + jj;
            if r < n {
                let row = &src[base + r * ld..base + r * ld + k];
                for (p, &v) in row.iter().enumerate() {
                    panel[p * nr + jj] = v;
                }
            } else {
                for p in 0..k {
                    panel[p * nr + jj] = T::ZERO;
                }
            }
        }
    }
}

/// Packs `n` rows of `w` elements (`src[base + r·ld + d]`) into B panels of `nr` columns:
/// `dst[(dp·n + r)·nr + dd]` is row `r`'s element `dp·nr + dd` (zero past `w`).
#[inline(always)]
fn pack_b<T: AttnFloat>(
    src: &[T],
    base: usize,
    ld: usize,
    n: usize,
    w: usize,
    nr: usize,
    dst: &mut [T],
) {
    if n == 0 {
        return;
    }
    for (dp, panel) in dst[..w.div_ceil(nr) * nr * n]
        .chunks_exact_mut(nr * n)
        .enumerate()
    {
        let (d0, d1) = (dp * nr, (dp * nr + nr).min(w));
        for (r, line) in panel.chunks_exact_mut(nr).enumerate() {
            let row = &src[base + r * ld + d0..base + r * ld + d1];
            copy_line(&mut line[..d1 - d0], row);
            line[d1 - d0..].fill(T::ZERO);
        }
    }
}

/// Packs columns `j0..j0 + rows` of rows `i0..i1` of a row-major block (`ld` apart) as one A
/// panel of `mr` rows (its rows are the block's columns): `dst[(i − i0)·mr + jj]` (zero past
/// `rows`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pack_at<T: AttnFloat>(
    src: &[T],
    ld: usize,
    j0: usize,
    rows: usize,
    i0: usize,
    i1: usize,
    mr: usize,
    dst: &mut [T],
) {
    for (line, i) in dst[..(i1 - i0) * mr].chunks_exact_mut(mr).zip(i0..i1) {
        copy_line(&mut line[..rows], &src[i * ld + j0..i * ld + j0 + rows]);
        line[rows..].fill(T::ZERO);
    }
}

/// The micro-tile at `c` (rows `rsc` apart, room for `mr` rows) = the fma chains of `kc`
/// steps of `rows` rows of A read in place (`a + r·lda + p`) and the B panel `b`; `apack` is
/// the panel A is packed into where the kernel has no in-place form.
///
/// # Safety
/// `a + r·lda + p` readable for `r < rows`, `p < kc`; `b` holds `kc · nr`; the tile writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_rows<T: AttnFloat>(
    k: &Kernel<T>,
    rows: usize,
    kc: usize,
    a: *const T,
    lda: usize,
    b: *const T,
    c: *mut T,
    rsc: usize,
    apack: &mut [T],
) {
    // SAFETY (whole body): the caller's bounds; the kernels are those of `Isa::best`.
    unsafe {
        if let Some(f) = k.direct.get(rows - 1) {
            f(kc, a, lda, b, c, rsc, false, &[]);
            return;
        }
        for (p, line) in apack[..kc * k.mr].chunks_exact_mut(k.mr).enumerate() {
            for (r, v) in line.iter_mut().enumerate() {
                *v = if r < rows {
                    *a.add(r * lda + p)
                } else {
                    T::ZERO
                };
            }
        }
        (k.for_rows(rows).0)(kc, apack.as_ptr(), b, c, rsc, false);
    }
}

/// `s` (`t` rows, `t` rounded up to `nr` apart) = `t` rows of `hd` elements of A (`a[i·lda..]`,
/// read in place) times the B panels `bt` (`t` columns, from [`pack_bt`]): the micro-tiles of
/// each row panel up to its last row's diagonal, or every tile with `full`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn upper_tiles<T: AttnFloat>(
    k: &Kernel<T>,
    a: &[T],
    lda: usize,
    bt: &[T],
    s: &mut [T],
    t: usize,
    hd: usize,
    full: bool,
    apack: &mut [T],
) {
    let (mr, nr) = (k.mr, k.nr);
    let tn = t.div_ceil(nr) * nr;
    if t == 0 {
        return;
    }
    assert!((t - 1) * lda + hd <= a.len() && t.div_ceil(mr) * mr * tn <= s.len());
    for i0 in (0..t).step_by(mr) {
        let rows = mr.min(t - i0);
        let last = if full { t - 1 } else { i0 + rows - 1 };
        for jp in 0..=last / nr {
            // SAFETY: A's rows `i0..i0 + rows` hold `hd` elements (asserted), the panel
            // `hd · nr`, and `s` a full tile at (i0, jp·nr) (asserted).
            unsafe {
                tile_rows(
                    k,
                    rows,
                    hd,
                    a.as_ptr().add(i0 * lda),
                    lda,
                    bt.as_ptr().add(jp * hd * nr),
                    s.as_mut_ptr().add(i0 * tn + jp * nr),
                    tn,
                    apack,
                )
            }
        }
    }
}

/// `rows` rows of the `mr × nr` scratch tile `ct` into `dst` rows `ld` apart from `base`, the
/// first `w` columns; `plus_zero`: each element `+ 0`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn copy_out<T: AttnFloat>(
    ct: &[T],
    nr: usize,
    rows: usize,
    w: usize,
    dst: SyncPtr<T>,
    base: usize,
    ld: usize,
    plus_zero: bool,
) {
    for (r, src) in ct.chunks_exact(nr).take(rows).enumerate() {
        // SAFETY: the callers' `(base, ld, rows, w)` stay inside their head's part of the
        // output, which no other task touches.
        let d = unsafe { core::slice::from_raw_parts_mut(dst.get().add(base + r * ld), w) };
        match plus_zero {
            true => {
                for (o, &v) in d.iter_mut().zip(src) {
                    *o = v + T::ZERO;
                }
            }
            false => copy_line(d, &src[..w]),
        }
    }
}

/// Runs `f(head, scratch)` for every head, in parts on the team, each part with its own
/// scratch allocated fallibly. A head's result depends on the head alone.
fn each_head<T: AttnFloat>(
    op: &'static str,
    g: &Geom,
    k: &Kernel<T>,
    par: &Par,
    f: impl Fn(usize, &mut Scratch<T>) + Sync,
) -> Result<()> {
    let heads = g.heads();
    let parts = match par.threads() {
        1 => 1,
        n => heads.min(4 * n),
    };
    let failed = AtomicBool::new(false);
    par.run_parts(parts, |p| {
        let Ok(mut ws) = Scratch::new(op, g, k) else {
            failed.store(true, Ordering::Relaxed);
            return;
        };
        for bh in p * heads / parts..(p + 1) * heads / parts {
            f(bh, &mut ws);
        }
    });
    match failed.into_inner() {
        true => Err(Error::OutOfMemory {
            op,
            bytes: (g.t * g.t * 4) as u128 * size_of::<T>() as u128,
        }),
        false => Ok(()),
    }
}

/// For one head: with a mask, fills `ad` with `att·mask` (as `mul`); says whether every
/// masked entry of the weights (after dropout) is `+0`, and the mask's largest magnitude (1
/// without a mask). A mask of finite non-negative values keeps `att`'s `+0`s.
#[inline(always)]
fn masked_weights<T: AttnFloat>(
    att: &[T],
    mask: Option<&[T]>,
    ad: &mut [T],
    t: usize,
) -> (bool, f64) {
    let mut clean = (0..t).all(|i| T::all_pos_zero(&att[i * t + i + 1..(i + 1) * t]));
    let Some(m) = mask else { return (clean, 1.0) };
    for ((o, &a), &mv) in ad.iter_mut().zip(att).zip(m) {
        *o = a * mv;
    }
    clean &= T::all_finite_nonneg(m);
    (clean, finite_max(m, 0, 0, 1, m.len()).1.max(1.0))
}

/// What every head of a forward shares.
#[derive(Clone, Copy)]
struct Fwd<'a, T: 'static> {
    g: Geom,
    qkv: &'a [T],
    mask: Option<&'a [T]>,
    scale: T,
    k: Kernel<T>,
    isa: Isa,
    y: SyncPtr<T>,
    att: SyncPtr<T>,
    scale_finite: bool,
}

/// One head of the forward (see the module docs), inlined into each instruction set's copy.
#[inline(always)]
fn fwd_head<T: AttnFloat>(cx: &Fwd<'_, T>, bh: usize, ws: &mut Scratch<T>) {
    let Fwd {
        g,
        qkv,
        mask,
        scale,
        ref k,
        isa,
        y: yp,
        att: ap,
        scale_finite,
    } = *cx;
    let (t, hd, c3, mr, nr) = (g.t, g.hd, 3 * g.c, k.mr, k.nr);
    let tn = t.div_ceil(nr) * nr;
    // SAFETY: head `bh`'s `t × t` weights, inside the allocation, written by this task
    // only; zeroed (`+0` in f32 and f64) before they are read.
    let att = unsafe {
        let p = ap.get().add(bh * t * t);
        core::ptr::write_bytes(p, 0, t * t);
        core::slice::from_raw_parts_mut(p, t * t)
    };
    let Scratch {
        bt,
        b,
        s,
        ad,
        a,
        ct,
        pad,
        ..
    } = ws;
    if t == 0 {
        return;
    }
    let mask = mask.map(|m| &m[bh * t * t..(bh + 1) * t * t]);
    // Scores: the row panels' tiles up to the diagonal (kᵀ packed; q read in place).
    pack_bt(qkv, g.qkv(bh, 1, 0), c3, t, hd, nr, bt, isa);
    let q = &qkv[g.qkv(bh, 0, 0)..];
    upper_tiles(k, q, c3, bt, s, t, hd, false, a);
    let mut clean = scale_finite;
    let half = pad.len() / 2;
    for i in 0..t {
        let next_blocks = [Some(ap.get().cast_const()), cx.mask.map(<[T]>::as_ptr)];
        fetch_head_row(&g, bh + 1, i, qkv.as_ptr(), None, yp.get(), next_blocks);
        let (srow, arow, keep) = (&s[i * tn..i * tn + t], &mut att[i * t..(i + 1) * t], i + 1);
        // Finite kept scores: the masked columns' exponentials are `+0`, adding nothing to
        // the lanes of the sum, and their weights `+0`: the row's softmax over the kept
        // columns alone has the same bits (unless scaling overflowed: then the full row).
        let kept_finite = T::max_abs_bits(&srow[..keep]).1;
        if kept_finite {
            // Padded with −∞ to whole lane groups: their exponentials are `+0` too, and the
            // softmax's loops run without scalar tails. The padding's weights are `+0`
            // (`+0` times the reciprocal of a sum in `[1, t]`), as the masked entries already
            // are: written straight into the row where it has room for them.
            let kp = keep.next_multiple_of(LANES);
            let (b, o) = pad.split_at_mut(half);
            if kp <= t {
                forward_row(
                    &srow[..keep],
                    keep,
                    scale,
                    &mut b[..kp],
                    &mut arow[..kp],
                    isa,
                );
            } else {
                forward_row(&srow[..keep], keep, scale, &mut b[..kp], &mut o[..kp], isa);
                arow[..keep].copy_from_slice(&o[..keep]);
            }
        }
        if !kept_finite || !T::max_abs_bits(&arow[..keep]).1 {
            let (b, o) = pad.split_at_mut(half);
            forward_row(srow, keep, scale, &mut b[..t], &mut o[..t], isa);
            arow.copy_from_slice(&o[..t]);
            clean = false;
        }
    }
    let masked = mask.is_some();
    if masked || clean {
        clean &= masked_weights(att, mask, ad, t).0;
    }
    clean &= finite_max(qkv, g.qkv(bh, 2, 0), c3, t, hd).0;
    // y = weights · v: each row panel's chain up to its last kept column when clean.
    pack_b(qkv, g.qkv(bh, 2, 0), c3, t, hd, nr, b);
    let wts: &[T] = if masked { ad } else { att };
    for i0 in (0..t).step_by(mr) {
        let rows = mr.min(t - i0);
        let kc = if clean { i0 + rows } else { t };
        for d0 in (0..hd).step_by(nr) {
            // SAFETY: rows `i0..i0 + rows` of the weights hold `t ≥ kc` elements; the v
            // panel at `d0` holds `t · nr`; the tile is the scratch micro-tile.
            unsafe {
                tile_rows(
                    k,
                    rows,
                    kc,
                    wts.as_ptr().add(i0 * t),
                    t,
                    b.as_ptr().add(d0 * t),
                    ct.as_mut_ptr(),
                    nr,
                    a,
                )
            }
            let w = nr.min(hd - d0);
            if kc < t {
                // The skipped terms (`+0·v`) can turn a −0 into +0: add them there.
                for (r, line) in ct.chunks_exact_mut(nr).take(rows).enumerate() {
                    if !T::any_neg_zero(&line[..w]) {
                        continue;
                    }
                    for (dd, v) in line[..w].iter_mut().enumerate() {
                        if v.is_neg_zero() {
                            let wr = &wts[(i0 + r) * t..(i0 + r + 1) * t];
                            let vc = |j| qkv[g.qkv(bh, 2, j) + d0 + dd];
                            *v = (kc..t).fold(*v, |acc, j| wr[j].mul_add(vc(j), acc));
                        }
                    }
                }
            }
            copy_out(ct, nr, rows, w, yp, g.merged(bh, i0) + d0, g.c, false);
        }
    }
}

/// What every head of a backward shares.
#[derive(Clone, Copy)]
struct Bwd<'a, T: 'static> {
    g: Geom,
    gy: &'a [T],
    qkv: &'a [T],
    att: &'a [T],
    mask: Option<&'a [T]>,
    scale: T,
    k: Kernel<T>,
    isa: Isa,
    out: SyncPtr<T>,
    scale_finite: bool,
    limit: f64,
}

/// One head of the backward (see the module docs), inlined into each instruction set's copy.
#[inline(always)]
fn bwd_head<T: AttnFloat>(cx: &Bwd<'_, T>, bh: usize, ws: &mut Scratch<T>) {
    let Bwd {
        g,
        gy,
        qkv,
        att,
        mask,
        scale,
        ref k,
        isa,
        out: op,
        scale_finite,
        limit,
    } = *cx;
    let (t, hd, c, c3, mr, nr) = (g.t, g.hd, g.c, 3 * g.c, k.mr, k.nr);
    let tn = t.div_ceil(nr) * nr;
    if t == 0 {
        return;
    }
    let serial = Par::new(1);
    let Scratch {
        bt,
        b,
        s,
        ad,
        gs,
        a,
        ct,
        row,
        buf,
        ..
    } = ws;
    let att = &att[bh * t * t..(bh + 1) * t * t];
    let mask = mask.map(|m| &m[bh * t * t..(bh + 1) * t * t]);
    let (wclean, mm) = masked_weights(att, mask, ad, t);
    let wts: &[T] = if mask.is_some() { ad } else { att };
    let (fy, my) = finite_max(gy, g.merged(bh, 0), c, t, hd);
    let (fv, mv) = finite_max(qkv, g.qkv(bh, 2, 0), c3, t, hd);
    let clean = scale_finite
        && wclean
        && fy
        && fv
        && (hd as f64) * my * mv * mm < limit
        && finite_max(qkv, g.qkv(bh, 0, 0), c3, t, hd).0
        && finite_max(qkv, g.qkv(bh, 1, 0), c3, t, hd).0;
    // ∂(weights) = ∂y · vᵀ, up to the diagonal when clean.
    pack_bt(qkv, g.qkv(bh, 2, 0), c3, t, hd, nr, bt, isa);
    upper_tiles(k, &gy[g.merged(bh, 0)..], c, bt, s, t, hd, !clean, a);
    // The softmax backward, row by row (∂att·mask first, as `mul`); a zero row sum
    // computes the skipped columns after all.
    for i in 0..t {
        let next_blocks = [Some(cx.att.as_ptr()), cx.mask.map(<[T]>::as_ptr)];
        fetch_head_row(
            &g,
            bh + 1,
            i,
            qkv.as_ptr(),
            Some(op.get()),
            gy.as_ptr(),
            next_blocks,
        );
        let keep = i + 1;
        let filled = if clean { keep } else { t };
        let srow = &s[i * tn..i * tn + t];
        match mask {
            Some(m) => {
                let mr = &m[i * t..i * t + filled];
                for ((r, &v), &mv) in row.iter_mut().zip(&srow[..filled]).zip(mr) {
                    *r = v * mv;
                }
            }
            None => row[..filled].copy_from_slice(&srow[..filled]),
        }
        row[filled..].fill(T::ZERO);
        let ar = &att[i * t..(i + 1) * t];
        let gsr = &mut gs[i * t..(i + 1) * t];
        // Over the filled columns only: the rest would add `+0·+0` terms to the sum's lanes,
        // which can change only the sign of a zero lane, hence of a zero sum (redone below).
        let (rf, af, bf) = (&row[..filled], &ar[..filled], &mut buf[..filled]);
        let sum = backward_row(rf, af, keep, scale, bf, &serial, &mut gsr[..]);
        gsr[filled..].fill(T::ZERO * scale);
        if filled < t && sum == T::ZERO {
            let yr = g.merged(bh, i);
            for (j, r) in row.iter_mut().enumerate().skip(filled) {
                let vr = g.qkv(bh, 2, j);
                let d = (0..hd).fold(T::ZERO, |acc, e| gy[yr + e].mul_add(qkv[vr + e], acc));
                *r = match mask {
                    Some(m) => d * m[i * t + j],
                    None => d,
                };
            }
            backward_row(row, ar, keep, scale, buf, &serial, &mut gsr[..]);
        }
    }
    // ∂v = weightsᵀ · ∂y and ∂k = ∂sᵀ · q: the chains of a panel of columns j0.. start
    // at row j0 when clean. ∂q = ∂s · k: a row panel's chains end at its last kept column
    // when clean. Every element `+ 0`, as the composed graph's merge of the heads.
    for part in [2, 1, 0] {
        match part {
            2 => pack_b(gy, g.merged(bh, 0), c, t, hd, nr, b),
            1 => pack_b(qkv, g.qkv(bh, 0, 0), c3, t, hd, nr, b),
            _ => pack_b(qkv, g.qkv(bh, 1, 0), c3, t, hd, nr, b),
        }
        for i0 in (0..t).step_by(mr) {
            let rows = mr.min(t - i0);
            let (p0, kc) = match (part, clean) {
                (_, false) => (0, t),
                (0, true) => (0, i0 + rows),
                (_, true) => (i0, t - i0),
            };
            match part {
                2 => pack_at(wts, t, i0, rows, p0, p0 + kc, mr, a),
                1 => pack_at(gs, t, i0, rows, p0, p0 + kc, mr, a),
                _ => {}
            }
            for d0 in (0..hd).step_by(nr) {
                let bp = b[d0 * t + p0 * nr..].as_ptr();
                // SAFETY: the A panel (packed, or ∂s's rows in place) holds `kc` steps of
                // the tile's rows; the B panel from step `p0` holds `kc · nr`; `ct` a
                // full micro-tile.
                unsafe {
                    match part {
                        0 => tile_rows(
                            k,
                            rows,
                            kc,
                            gs.as_ptr().add(i0 * t),
                            t,
                            bp,
                            ct.as_mut_ptr(),
                            nr,
                            a,
                        ),
                        _ => (k.for_rows(rows).0)(kc, a.as_ptr(), bp, ct.as_mut_ptr(), nr, false),
                    }
                }
                let base = g.qkv(bh, part, i0) + d0;
                copy_out(ct, nr, rows, nr.min(hd - d0), op, base, c3, true);
            }
        }
    }
}

/// `$name(cx, bh, ws)` runs `$head` compiled for `cx.isa` (a path the CPU has).
macro_rules! isa_dispatch {
    ($name:ident, $head:ident, $ctx:ident) => {
        fn $name<T: AttnFloat>(cx: &$ctx<'_, T>, bh: usize, ws: &mut Scratch<T>) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                fn avx2<T: AttnFloat>(cx: &$ctx<'_, T>, bh: usize, ws: &mut Scratch<T>) {
                    $head(cx, bh, ws)
                }
                #[target_feature(enable = "avx512f")]
                fn avx512<T: AttnFloat>(cx: &$ctx<'_, T>, bh: usize, ws: &mut Scratch<T>) {
                    $head(cx, bh, ws)
                }
                match cx.isa {
                    // SAFETY: `Isa::best` is a path this CPU supports.
                    Isa::Avx512 => return unsafe { avx512(cx, bh, ws) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { avx2(cx, bh, ws) },
                    Isa::Portable => {}
                }
            }
            $head(cx, bh, ws)
        }
    };
}
isa_dispatch!(fwd_dispatch, fwd_head, Fwd);
isa_dispatch!(bwd_dispatch, bwd_head, Bwd);

fn forward<T: AttnFloat>(
    g: Geom,
    qkv: &[T],
    mask: Option<&[T]>,
    scale: T,
    par: &Par,
) -> Result<(Vec<T>, Vec<T>)> {
    const OP: &str = "causal_self_attention";
    let t = g.t;
    let isa = Isa::best();
    let k = T::kernel(isa);
    let ny = g.b * t * g.c;
    let mut y = crate::tensor::try_with_capacity::<T>(OP, ny)?;
    let na = g
        .heads()
        .checked_mul(t)
        .and_then(|n| n.checked_mul(t))
        .ok_or_else(|| {
            invalid(
                OP,
                "qkv",
                format!("{} heads of {t}² weights overflow", g.heads()),
            )
        })?;
    let mut att = crate::tensor::try_with_capacity::<T>(OP, na)?;
    let (yp, ap) = (SyncPtr(y.as_mut_ptr()), SyncPtr(att.as_mut_ptr()));
    let scale_finite = T::max_abs_bits(&[scale]).1;
    let cx = Fwd {
        g,
        qkv,
        mask,
        scale,
        k,
        isa,
        y: yp,
        att: ap,
        scale_finite,
    };
    each_head(OP, &g, &k, par, |bh, ws| fwd_dispatch(&cx, bh, ws))?;
    // SAFETY: every head wrote its `t` rows × `hd` columns of y, and the heads cover `C`;
    // every head zeroed and then wrote its `t × t` weights.
    unsafe {
        y.set_len(ny);
        att.set_len(na);
    }
    Ok((y, att))
}

#[allow(clippy::too_many_arguments)]
fn backward<T: AttnFloat>(
    g: Geom,
    gy: &[T],
    qkv: &[T],
    att: &[T],
    mask: Option<&[T]>,
    scale: T,
    par: &Par,
) -> Result<Vec<T>> {
    const OP: &str = "causal_self_attention_backward";
    let isa = Isa::best();
    let k = T::kernel(isa);
    let n = g.b * g.t * 3 * g.c;
    let mut out = crate::tensor::try_with_capacity::<T>(OP, n)?;
    let op = SyncPtr(out.as_mut_ptr());
    let scale_finite = T::max_abs_bits(&[scale]).1;
    // No overflow in a skipped chain of `hd` products of ∂y and v (times the mask).
    let limit = T::MAX_F64 / 4.0;
    let cx = Bwd {
        g,
        gy,
        qkv,
        att,
        mask,
        scale,
        k,
        isa,
        out: op,
        scale_finite,
        limit,
    };
    each_head(OP, &g, &k, par, |bh, ws| bwd_dispatch(&cx, bh, ws))?;
    // SAFETY: every head wrote its q, k and v columns of every token row.
    unsafe { out.set_len(n) };
    Ok(out)
}

/// `[B, T, C, hd]` of a fused projection of `shape` and `dtype` split into `n_head` heads: the
/// one check of the callers' shapes (`op` names the caller in the error).
///
/// # Errors
/// `shape` not `[B, T, 3C]`, `dtype` not a float, `n_head` 0 or `3 · n_head` not dividing `3C`.
pub fn qkv_dims(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
    n_head: usize,
) -> Result<[usize; 4]> {
    if shape.len() != 3 || !dtype.is_float() {
        return Err(invalid(
            op,
            "qkv",
            format!("expected a float [B, T, 3C] tensor, got {dtype:?} {shape:?}"),
        ));
    }
    if n_head == 0 || !shape[2].is_multiple_of(3 * n_head) {
        return Err(invalid(
            op,
            "n_head",
            format!(
                "the last dimension {} of qkv is not 3 · n_head ({n_head}) · head size",
                shape[2]
            ),
        ));
    }
    let c = shape[2] / 3;
    Ok([shape[0], shape[1], c, c / n_head])
}

/// The checked shapes of a call.
fn geom(op: &'static str, qkv: &Tensor, n_head: usize) -> Result<Geom> {
    let [b, t, c, hd] = qkv_dims(op, qkv.shape(), qkv.dtype(), n_head)?;
    Ok(Geom {
        b,
        t,
        c,
        nh: n_head,
        hd,
    })
}

/// A tensor of exactly `shape` and `dtype`, or the error naming `arg`.
fn expect(op: &'static str, x: &Tensor, shape: &[usize], dt: DType) -> Result<Tensor> {
    if x.shape() != shape {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().to_vec(),
            rhs: shape.to_vec(),
        });
    }
    if x.dtype() != dt {
        return Err(Error::DType {
            op,
            expected: dt,
            got: x.dtype(),
        });
    }
    x.try_contiguous()
}

impl Tensor {
    /// nanoGPT's causal self-attention from the fused projection `self` (`[B, T, 3C]`, f32 or
    /// f64): `q, k, v = self.chunk(3, 2)` split into `n_head` heads, `att = softmax(masked_fill(
    /// q·kᵀ · scale, j > i, −∞))`, `y = (att · mask) · v` with the heads merged back into
    /// `[B, T, C]`. `mask` (`[B, n_head, T, T]`, the dtype of `self`) is a dropout mask or
    /// `None`. Returns `(y, att)`; `att` is what
    /// [`causal_self_attention_backward`](Self::causal_self_attention_backward) takes.
    ///
    /// Bit for bit the composed ops' values (`matmul` on its blocked kernel,
    /// [`causal_softmax`](Self::causal_softmax), `mul`, `matmul`; see [the module
    /// docs](crate::ops::self_attention) for the products it skips and why that is exact),
    /// the same bits at any thread count and on every instruction-set path. Where `matmul`
    /// would run split-K (`hd ≥ 2048` and `hd ≥ 4·T`, see
    /// [`is_skinny`](crate::ops::matmul::is_skinny)) its bits are the blocked kernel's, not
    /// split-K's.
    ///
    /// # Errors
    /// `self` not a float `[B, T, 3C]` tensor, `C` not a multiple of `n_head`, `n_head` 0, a
    /// mask of another shape or dtype, an allocation that fails.
    pub fn causal_self_attention(
        &self,
        n_head: usize,
        scale: f64,
        mask: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        const OP: &str = "causal_self_attention";
        let g = geom(OP, self, n_head)?;
        let att_shape = [g.b, g.nh, g.t, g.t];
        let x = self.try_contiguous()?;
        let m = mask
            .map(|m| expect(OP, m, &att_shape, self.dtype()))
            .transpose()?;
        let mut inputs = vec![self];
        inputs.extend(mask);
        CAUSAL_SELF_ATTENTION.run(&inputs, |_, par| {
            fn go<T: AttnFloat>(
                g: Geom,
                x: &Tensor,
                m: Option<&Tensor>,
                scale: f64,
                par: &Par,
            ) -> Result<(Tensor, Tensor)> {
                let md = m.map(|m| m.data::<T>()).transpose()?;
                let (y, att) = forward(g, x.data::<T>()?, md, T::from_f64(scale), par)?;
                Ok((
                    Tensor::from_vec(y, &[g.b, g.t, g.c])?,
                    Tensor::from_vec(att, &[g.b, g.nh, g.t, g.t])?,
                ))
            }
            match x.dtype() {
                DType::F32 => go::<f32>(g, &x, m.as_ref(), scale, par),
                _ => go::<f64>(g, &x, m.as_ref(), scale, par),
            }
        })
    }

    /// The gradient of [`causal_self_attention`](Self::causal_self_attention)'s `qkv` (`self`
    /// is `y`'s gradient, `[B, T, C]`; `qkv`, `att`, `mask`, `n_head`, `scale` as in the
    /// forward, `att` its output): q's, k's and v's gradients merged into one `[B, T, 3C]`
    /// tensor, each element `g + 0` (a zero always `+0`, as adding `chunk`'s zero-padded
    /// pieces gives). Bit for bit the composed ops' backward, the same bits at any thread
    /// count and on every instruction-set path.
    ///
    /// # Errors
    /// Shapes or dtypes that do not match the forward's, an allocation that fails.
    pub fn causal_self_attention_backward(
        &self,
        qkv: &Tensor,
        att: &Tensor,
        mask: Option<&Tensor>,
        n_head: usize,
        scale: f64,
    ) -> Result<Tensor> {
        const OP: &str = "causal_self_attention_backward";
        let g = geom(OP, qkv, n_head)?;
        let dt = qkv.dtype();
        let att_shape = [g.b, g.nh, g.t, g.t];
        let gy = expect(OP, self, &[g.b, g.t, g.c], dt)?;
        let a = expect(OP, att, &att_shape, dt)?;
        let m = mask.map(|m| expect(OP, m, &att_shape, dt)).transpose()?;
        let x = qkv.try_contiguous()?;
        let mut inputs = vec![self, qkv, att];
        inputs.extend(mask);
        CAUSAL_SELF_ATTENTION_BACKWARD.run(&inputs, |_, par| {
            fn go<T: AttnFloat>(
                g: Geom,
                gy: &Tensor,
                x: &Tensor,
                a: &Tensor,
                m: Option<&Tensor>,
                scale: f64,
                par: &Par,
            ) -> Result<Tensor> {
                let md = m.map(|m| m.data::<T>()).transpose()?;
                let v = backward(
                    g,
                    gy.data::<T>()?,
                    x.data::<T>()?,
                    a.data::<T>()?,
                    md,
                    T::from_f64(scale),
                    par,
                )?;
                Tensor::from_vec(v, &[g.b, g.t, 3 * g.c])
            }
            match dt {
                DType::F32 => go::<f32>(g, &gy, &x, &a, m.as_ref(), scale, par),
                _ => go::<f64>(g, &gy, &x, &a, m.as_ref(), scale, par),
            }
        })
    }
}
