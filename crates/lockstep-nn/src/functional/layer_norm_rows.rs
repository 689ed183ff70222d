//! LayerNorm's row kernels (for [`super::layer_norm`]): statistics in f64, every row's sums one
//! chain in column order, so a row's bits depend on that row alone — not on its neighbours,
//! the thread count or the instruction set.
//!
//! Speed without changing those chains: the sums of [`LN_ROWS`] rows run side by side, one
//! row per vector lane, over a copy of the block laid out column by column (a row's chain is
//! then one lane of a vector add, in the same order), and every loop is compiled for the
//! widest vector path enabled ([`isa_dispatch`]). IEEE addition, multiplication, division and
//! square root round the same whatever the instructions, and nothing is contracted into a
//! fused multiply-add, so every path gives the same bits.

use core::mem::MaybeUninit;
use lockstep_tensor::Element;
use lockstep_tensor::threads::{Par, SyncPtr};

/// Rows whose sums run together, one per vector lane (eight f64: one AVX-512 vector).
const LN_ROWS: usize = 8;

/// LayerNorm inputs of at least this many elements split their rows among threads (a function
/// of the size only: rows are independent, so the bits never depend on it).
const LN_PAR_MIN: usize = 1 << 14;

/// Defines `fn $name` running `$body` compiled for AVX-512 or AVX2 when that path is
/// enabled (see `lockstep_tensor::isa`), else the baseline build: the same expressions, so the
/// same bits. Generics are written `<T: Bound, …; const C: Type, …>`.
macro_rules! isa_dispatch {
    ($(#[$m:meta])* fn $name:ident<$($g:ident: $b:path),*; $(const $c:ident: $ct:ty),*>($($a:ident: $t:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        fn $name<$($g: $b,)* $(const $c: $ct,)*>($($a: $t),*) {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn imp<$($g: $b,)* $(const $c: $ct,)*>($($a: $t),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                use lockstep_tensor::isa::Isa;
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments)]
                fn wide<$($g: $b,)* $(const $c: $ct,)*>($($a: $t),*) {
                    imp::<$($g,)* $($c,)*>($($a),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2<$($g: $b,)* $(const $c: $ct,)*>($($a: $t),*) {
                    imp::<$($g,)* $($c,)*>($($a),*)
                }
                if Isa::Avx512.enabled() {
                    // SAFETY: the CPU has AVX-512F (an enabled path is an available one).
                    return unsafe { wide::<$($g,)* $($c,)*>($($a),*) };
                }
                if Isa::Avx2.enabled() {
                    // SAFETY: the CPU has AVX2 and FMA.
                    return unsafe { avx2::<$($g,)* $($c,)*>($($a),*) };
                }
            }
            imp::<$($g,)* $($c,)*>($($a),*)
        }
    };
}

/// How many row ranges `rows` rows of `l` elements are cut into on `par`.
fn ln_parts(par: &Par, rows: usize, l: usize) -> usize {
    if l == 0 || rows < 2 || rows * l < LN_PAR_MIN {
        1
    } else {
        par.threads().min(rows)
    }
}

/// Range `q` of `rows` rows cut into `parts` (the cut depends on the sizes only).
fn ln_span(q: usize, rows: usize, parts: usize) -> core::ops::Range<usize> {
    q * rows / parts..(q + 1) * rows / parts
}

/// Copies the `LN_ROWS` rows of `l` elements at the start of `xs` into `t` column by column,
/// as f64: `t[j·LN_ROWS + q]` is row `q`'s element `j` (exact conversions).
#[inline(always)]
fn columns<T: Element>(xs: &[T], l: usize, t: &mut [f64]) {
    let rows: [&[T]; LN_ROWS] = core::array::from_fn(|q| &xs[q * l..(q + 1) * l]);
    let t = &mut t[..l * LN_ROWS];
    let mut j0 = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(rows) = as_f32(rows)
        && lockstep_tensor::isa::Isa::Avx512.enabled()
    {
        j0 = l - l % 8;
        for (c, blk) in t[..j0 * LN_ROWS].chunks_exact_mut(8 * LN_ROWS).enumerate() {
            let block: &mut [f64; 8 * LN_ROWS] = blk.try_into().expect("a whole block");
            // SAFETY: the CPU has AVX-512F (an enabled path is an available one).
            unsafe { transpose_8x8_avx512(rows, 8 * c, block) };
        }
    }
    for (j, c) in t.chunks_exact_mut(LN_ROWS).enumerate().skip(j0) {
        for (o, r) in c.iter_mut().zip(rows) {
            *o = r[j].to_f64();
        }
    }
}

/// `rows` as f32 rows when `T` is f32.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn as_f32<T: Element>(rows: [&[T]; LN_ROWS]) -> Option<[&[f32]; LN_ROWS]> {
    (T::DTYPE == lockstep_tensor::DType::F32).then(|| {
        // SAFETY: `T` is f32 (its dtype says so), so the slices are f32 slices.
        rows.map(|r| unsafe { core::slice::from_raw_parts(r.as_ptr().cast::<f32>(), r.len()) })
    })
}

/// Columns `j..j + 8` of the eight `rows` as f64, column by column into `t`: eight vector
/// loads, conversions and a transpose in registers (a compiler-vectorised copy scattered its
/// stores, slower than scalar code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose_8x8_avx512(rows: [&[f32]; LN_ROWS], j: usize, t: &mut [f64; 8 * LN_ROWS]) {
    use core::arch::x86_64::*;
    let r: [__m512d; 8] = core::array::from_fn(|q| {
        let s: &[f32; 8] = rows[q][j..j + 8].try_into().expect("eight columns");
        // SAFETY: `s` holds the eight f32 the unaligned load reads.
        _mm512_cvtps_pd(unsafe { _mm256_loadu_ps(s.as_ptr()) })
    });
    // Pairs of rows interleaved, then 128-bit lanes gathered: u[4h + e] holds, for rows
    // 4h..4h+4, columns (0, 4), (2, 6), (1, 5), (3, 7) for e = 0..4.
    let mut u = [_mm512_setzero_pd(); 8];
    for h in 0..2 {
        let [a, b, c, d] = [r[4 * h], r[4 * h + 1], r[4 * h + 2], r[4 * h + 3]];
        let (ab0, ab1) = (_mm512_unpacklo_pd(a, b), _mm512_unpackhi_pd(a, b));
        let (cd0, cd1) = (_mm512_unpacklo_pd(c, d), _mm512_unpackhi_pd(c, d));
        u[4 * h] = _mm512_shuffle_f64x2::<0x88>(ab0, cd0);
        u[4 * h + 1] = _mm512_shuffle_f64x2::<0xdd>(ab0, cd0);
        u[4 * h + 2] = _mm512_shuffle_f64x2::<0x88>(ab1, cd1);
        u[4 * h + 3] = _mm512_shuffle_f64x2::<0xdd>(ab1, cd1);
    }
    let cols = [
        (0, _mm512_shuffle_f64x2::<0x88>(u[0], u[4])),
        (4, _mm512_shuffle_f64x2::<0xdd>(u[0], u[4])),
        (2, _mm512_shuffle_f64x2::<0x88>(u[1], u[5])),
        (6, _mm512_shuffle_f64x2::<0xdd>(u[1], u[5])),
        (1, _mm512_shuffle_f64x2::<0x88>(u[2], u[6])),
        (5, _mm512_shuffle_f64x2::<0xdd>(u[2], u[6])),
        (3, _mm512_shuffle_f64x2::<0x88>(u[3], u[7])),
        (7, _mm512_shuffle_f64x2::<0xdd>(u[3], u[7])),
    ];
    for (c, v) in cols {
        // SAFETY: column `c`'s eight f64 lie inside `t`.
        unsafe { _mm512_storeu_pd(t[c * LN_ROWS..].as_mut_ptr(), v) };
    }
}

/// Asks for the cache lines of `s` (the next block's rows while this one computes: a block's
/// rows are read a line of each row at a time, too short a run per row for the hardware
/// prefetcher). A hint: no effect on any value.
#[inline(always)]
fn prefetch<T>(s: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let (p, bytes) = (s.as_ptr().cast::<i8>(), core::mem::size_of_val(s));
        for off in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults; the address lies inside `s`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// Blocks of [`LN_ROWS`] rows whose chains run side by side (independent vector adds: the
/// adds' latency overlaps instead of adding up).
const LN_GROUPS: usize = 2;

/// `f(g, c)` for each column `c` of each group `g`'s block in `xt` (`l` columns of [`LN_ROWS`]),
/// column by column with the groups interleaved: one chain per row, in column order.
#[inline(always)]
fn each_column<const G: usize>(
    xt: &[&[f64]; G],
    l: usize,
    mut f: impl FnMut(usize, &[f64; LN_ROWS]),
) {
    for j in 0..l {
        for (g, x) in xt.iter().enumerate() {
            f(g, x[j * LN_ROWS..][..LN_ROWS].try_into().expect("a column"));
        }
    }
}

/// `stats` (`G · LN_ROWS` rows: `(μ, 1/√(var + eps))`) of the rows of `l` elements at the start
/// of `xs`, through `xt` (room for `G · l · LN_ROWS`): each row's two sums one chain in column
/// order from `−0`, the groups' chains interleaved column by column.
#[inline(always)]
fn block_stats<T: Element, const G: usize>(
    xs: &[T],
    l: usize,
    eps: f64,
    xt: &mut [f64],
    stats: &mut [(f64, f64)],
) {
    let lf = l as f64;
    let block = l * LN_ROWS;
    for g in 0..G {
        columns(&xs[g * block..], l, &mut xt[g * block..(g + 1) * block]);
    }
    let xt: [&[f64]; G] = core::array::from_fn(|g| &xt[g * block..(g + 1) * block]);
    let mut s = [[-0.0f64; LN_ROWS]; G];
    each_column(&xt, l, |g, c| {
        for q in 0..LN_ROWS {
            s[g][q] += c[q];
        }
    });
    let mu = s.map(|s| s.map(|s| s / lf));
    let mut v = [[-0.0f64; LN_ROWS]; G];
    each_column(&xt, l, |g, c| {
        for q in 0..LN_ROWS {
            let d = c[q] - mu[g][q];
            v[g][q] += d * d;
        }
    });
    for g in 0..G {
        for q in 0..LN_ROWS {
            stats[g * LN_ROWS + q] = (mu[g][q], 1.0 / (v[g][q] / lf + eps).sqrt());
        }
    }
}

/// LayerNorm's forward with its rows split among `par`'s threads, each part writing its rows
/// of the one output: the same bits at any thread count. `y = (x − μ)·σ⁻¹·w + b` per element
/// (`w` 1 and `b` +0 when absent: `−0` becomes `+0`), with `μ` and the biased variance each a
/// sum in column order from `−0`. Returns `y` and each row's `(μ, 1/√(var + eps))`.
pub(super) fn ln_forward_par<T: Element>(
    par: &Par,
    xs: &[T],
    l: usize,
    w: Option<&[f64]>,
    b: Option<&[f64]>,
    eps: f64,
) -> (Vec<T>, Vec<(f64, f64)>) {
    let rows = xs.len().checked_div(l).unwrap_or(0);
    let parts = ln_parts(par, rows, l);
    let mut y = Vec::with_capacity(xs.len());
    let mut stats = vec![(0.0, 0.0); rows];
    let (yp, sp) = (
        SyncPtr(y.spare_capacity_mut().as_mut_ptr()),
        SyncPtr(stats.as_mut_ptr()),
    );
    par.run_parts(parts, |q| {
        let r = ln_span(q, rows, parts);
        // SAFETY: part q's rows `r` (elements `r·l`) of the output's spare capacity and of
        // `stats`, disjoint from every other part's; both outlive `run_parts`.
        let (yq, sq) = unsafe {
            (
                core::slice::from_raw_parts_mut(yp.at(r.start * l), r.len() * l),
                core::slice::from_raw_parts_mut(sp.at(r.start), r.len()),
            )
        };
        ln_forward_into(&xs[r.start * l..r.end * l], l, w, b, eps, yq, sq);
    });
    // SAFETY: the parts' ranges cover every row, and each wrote all of its elements.
    unsafe { y.set_len(rows * l) };
    (y, stats)
}

isa_dispatch! {
    /// [`ln_forward_par`]'s rows `xs` into `y` (`xs.len()` elements, each written) and `stats`
    /// (one per row).
    fn ln_forward_into<T: Element;>(
        xs: &[T],
        l: usize,
        w: Option<&[f64]>,
        b: Option<&[f64]>,
        eps: f64,
        y: &mut [MaybeUninit<T>],
        stats: &mut [(f64, f64)],
    ) {
        let (rows, lf) = (stats.len(), l as f64);
        let mut xt = vec![0.0f64; l * LN_ROWS * LN_GROUPS];
        let mut r0 = 0;
        while r0 + LN_ROWS * LN_GROUPS <= rows {
            let n = LN_ROWS * LN_GROUPS;
            prefetch(xs.get((r0 + n) * l..(r0 + 2 * n) * l).unwrap_or(&[]));
            block_stats::<T, LN_GROUPS>(&xs[r0 * l..], l, eps, &mut xt, &mut stats[r0..r0 + n]);
            r0 += n;
        }
        while r0 + LN_ROWS <= rows {
            prefetch(xs.get((r0 + LN_ROWS) * l..(r0 + 2 * LN_ROWS) * l).unwrap_or(&[]));
            block_stats::<T, 1>(&xs[r0 * l..], l, eps, &mut xt, &mut stats[r0..r0 + LN_ROWS]);
            r0 += LN_ROWS;
        }
        for (r, st) in stats.iter_mut().enumerate().skip(r0) {
            let row = &xs[r * l..(r + 1) * l];
            let mu = row.iter().fold(-0.0, |s, v| s + v.to_f64()) / lf;
            let var = row.iter().fold(-0.0, |s, v| {
                let d = v.to_f64() - mu;
                s + d * d
            });
            *st = (mu, 1.0 / (var / lf + eps).sqrt());
        }
        let l1 = l.max(1);
        for ((row, yr), &(mu, is)) in xs.chunks_exact(l1).zip(y.chunks_exact_mut(l1)).zip(&*stats) {
            let h = row.iter().map(|&v| (v.to_f64() - mu) * is);
            let put = |v: T, o: &mut MaybeUninit<T>| {
                o.write(v);
            };
            match (w, b) {
                (Some(w), Some(b)) => h
                    .zip(w.iter().zip(b))
                    .zip(yr)
                    .for_each(|((h, (&w, &b)), o)| put(T::from_f64(h * w + b), o)),
                (Some(w), None) => h
                    .zip(w)
                    .zip(yr)
                    .for_each(|((h, &w), o)| put(T::from_f64(h * w + 0.0), o)),
                (None, Some(b)) => h
                    .zip(b)
                    .zip(yr)
                    .for_each(|((h, &b), o)| put(T::from_f64(h * 1.0 + b), o)),
                (None, None) => h
                    .zip(yr)
                    .for_each(|(h, o)| put(T::from_f64(h * 1.0 + 0.0), o)),
            }
        }
    }
}

/// LayerNorm's backward from the saved input and row statistics (the normalised row
/// `x̂ = (x − μ)·σ⁻¹` recomputed, the same bits as when it was kept): per row `a = Σ g·w`,
/// `b = Σ g·w·x̂` in column order from `+0`, `∂x = σ⁻¹/l · (l·g·w − a − x̂·b)`; `∂w = Σ g·x̂`
/// and `∂b = Σ g` over rows in row order from `+0` (zeros without `need_wb`). One thread runs
/// it whole; more split the rows' `∂x` among them and `∂w`, `∂b` by column ranges, each column
/// adding every row in row order with the same expressions: the same bits.
pub(super) fn ln_backward_par<T: Element, G: Element>(
    par: &Par,
    xs: &[T],
    gs: &[G],
    l: usize,
    stats: &[(f64, f64)],
    w: Option<&[f64]>,
    need_wb: bool,
) -> (Vec<T>, Vec<f64>, Vec<f64>) {
    let rows = stats.len();
    let parts = ln_parts(par, rows, l);
    let mut gx = Vec::with_capacity(rows * l);
    let (mut gw, mut gb) = (vec![0.0; l], vec![0.0; l]);
    if parts == 1 {
        let out = &mut gx.spare_capacity_mut()[..rows * l];
        ln_backward_into::<T, G, true>(xs, gs, l, stats, w, out, &mut gw, &mut gb);
        // SAFETY: `ln_backward_into` wrote every element.
        unsafe { gx.set_len(rows * l) };
        return (gx, gw, gb);
    }
    let gp = SyncPtr(gx.spare_capacity_mut().as_mut_ptr());
    let (wp, bp) = (SyncPtr(gw.as_mut_ptr()), SyncPtr(gb.as_mut_ptr()));
    // Tasks `0..cols`: the weight and bias gradients' column ranges; then the rows' ranges,
    // each written into its rows of the one output.
    let cols = if need_wb { parts.min(l) } else { 0 };
    par.run_parts(cols + parts, |p| {
        if p < cols {
            let span = ln_span(p, l, cols);
            // SAFETY: columns `span` of `gw` and `gb`, disjoint from every other task's; both
            // outlive `run_parts`.
            let (gw, gb) = unsafe {
                (
                    core::slice::from_raw_parts_mut(wp.at(span.start), span.len()),
                    core::slice::from_raw_parts_mut(bp.at(span.start), span.len()),
                )
            };
            ln_weight_grads(xs, gs, l, stats, span.start, gw, gb);
        } else {
            let r = ln_span(p - cols, rows, parts);
            let span = r.start * l..r.end * l;
            // SAFETY: the rows `r` of the output's spare capacity, disjoint from every other
            // task's; `gx` outlives `run_parts`.
            let out = unsafe { core::slice::from_raw_parts_mut(gp.at(span.start), span.len()) };
            let (xr, gr) = (&xs[span.clone()], &gs[span]);
            ln_backward_into::<T, G, false>(xr, gr, l, &stats[r], w, out, &mut [], &mut []);
        }
    });
    // SAFETY: the row tasks cover every row, and each wrote all of its elements.
    unsafe { gx.set_len(rows * l) };
    (gx, gw, gb)
}

isa_dispatch! {
    /// LayerNorm's `∂w = Σ g·x̂` and `∂b = Σ g` for the columns `c0..c0 + gw.len()`, added from
    /// `+0` over rows in row order, each element's terms as [`ln_backward_into`] forms them
    /// ([`ln_terms`]): the same bits.
    fn ln_weight_grads<T: Element, G: Element;>(
        xs: &[T],
        gs: &[G],
        l: usize,
        stats: &[(f64, f64)],
        c0: usize,
        gw: &mut [f64],
        gb: &mut [f64],
    ) {
        let n = gw.len();
        assert!(gb.len() == n && c0 + n <= l);
        gw.fill(0.0);
        gb.fill(0.0);
        for (r, &(mu, is)) in stats.iter().enumerate() {
            let (xr, gr) = (&xs[r * l + c0..][..n], &gs[r * l + c0..][..n]);
            for j in 0..n {
                let (g, h) = ln_terms(xr[j], gr[j], mu, is);
                gw[j] += g * h;
                gb[j] += g;
            }
        }
    }
}

/// One element's `(g, x̂)` for LayerNorm's backward, `x̂ = (x − μ)·σ⁻¹`: the one expression
/// the row and column kernels both use, so that their sums have the same bits.
#[inline(always)]
fn ln_terms<T: Element, G: Element>(x: T, g: G, mu: f64, is: f64) -> (f64, f64) {
    (g.to_f64(), (x.to_f64() - mu) * is)
}

isa_dispatch! {
    /// [`ln_backward_par`]'s `∂x` of the rows `xs`, `gs` into `gx` (each element written); with
    /// `WB`, `∂w` and `∂b` (`l` each, from `+0`) into `gw` and `gb`.
    fn ln_backward_into<T: Element, G: Element; const WB: bool>(
        xs: &[T],
        gs: &[G],
        l: usize,
        stats: &[(f64, f64)],
        w: Option<&[f64]>,
        gx: &mut [MaybeUninit<T>],
        gw: &mut [f64],
        gb: &mut [f64],
    ) {
        let (rows, lf) = (stats.len(), l as f64);
        // `g·1` is `g`: a missing weight reads as ones, the same bits.
        let ones;
        let wv = match w {
            Some(w) => &w[..l],
            None => {
                ones = vec![1.0; l];
                &ones
            }
        };
        if WB {
            gw[..l].fill(0.0);
            gb[..l].fill(0.0);
        }
        let (mut xt, mut gt) = (vec![0.0f64; l * LN_ROWS], vec![0.0f64; l * LN_ROWS]);
        let mut r0 = 0;
        while r0 < rows {
            let n = if rows - r0 >= LN_ROWS { LN_ROWS } else { 1 };
            // `a` and `b` start from +0 (an explicit fold, not `Iterator::sum`).
            let mut a = [0.0f64; LN_ROWS];
            let mut bb = [0.0f64; LN_ROWS];
            if n == LN_ROWS {
                let next = (r0 + LN_ROWS) * l..(r0 + 2 * LN_ROWS) * l;
                prefetch(xs.get(next.clone()).unwrap_or(&[]));
                prefetch(gs.get(next).unwrap_or(&[]));
                columns(&xs[r0 * l..], l, &mut xt);
                columns(&gs[r0 * l..], l, &mut gt);
                let mu: [f64; LN_ROWS] = core::array::from_fn(|q| stats[r0 + q].0);
                let is: [f64; LN_ROWS] = core::array::from_fn(|q| stats[r0 + q].1);
                for ((xc, gc), &wj) in xt
                    .chunks_exact(LN_ROWS)
                    .zip(gt.chunks_exact(LN_ROWS))
                    .zip(wv)
                {
                    for q in 0..LN_ROWS {
                        let v = gc[q] * wj;
                        a[q] += v;
                        bb[q] += v * ((xc[q] - mu[q]) * is[q]);
                    }
                }
            } else {
                let (mu, is) = stats[r0];
                let (xr, gr) = (&xs[r0 * l..(r0 + 1) * l], &gs[r0 * l..(r0 + 1) * l]);
                for ((&x, &g), &wj) in xr.iter().zip(gr).zip(wv) {
                    let v = g.to_f64() * wj;
                    a[0] += v;
                    bb[0] += v * ((x.to_f64() - mu) * is);
                }
            }
            for q in 0..n {
                let r = r0 + q;
                let (mu, is) = stats[r];
                let (a, bb) = (a[q], bb[q]);
                // Indexed over slices of one length, written into the output (through `extend`
                // the loop was not vectorised); `σ⁻¹/l` is computed once per row: the same value
                // every time.
                let (xr, gr) = (&xs[r * l..(r + 1) * l], &gs[r * l..(r + 1) * l]);
                let scale = is / lf;
                let out = &mut gx[r * l..(r + 1) * l];
                for j in 0..l {
                    let (g, h) = ln_terms(xr[j], gr[j], mu, is);
                    if WB {
                        gw[j] += g * h;
                        gb[j] += g;
                    }
                    out[j].write(T::from_f64(scale * (lf * (g * wv[j]) - a - h * bb)));
                }
            }
            r0 += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_tensor::isa::{Isa, set_isa};

    /// The definition, one row at a time: the statistics' chains and the per-element
    /// expressions of the kernels' documentation.
    fn reference(
        xs: &[f32],
        gs: &[f32],
        l: usize,
        w: &[f64],
        b: &[f64],
        eps: f64,
    ) -> (Vec<f32>, Vec<f32>, Vec<f64>, Vec<f64>) {
        let rows = xs.len() / l;
        let lf = l as f64;
        let (mut y, mut gx) = (vec![], vec![]);
        let (mut gw, mut gb) = (vec![0.0; l], vec![0.0; l]);
        for r in 0..rows {
            let (x, g) = (&xs[r * l..(r + 1) * l], &gs[r * l..(r + 1) * l]);
            let mu = x.iter().fold(-0.0, |s, &v| s + v as f64) / lf;
            let var = x
                .iter()
                .fold(-0.0, |s, &v| s + (v as f64 - mu) * (v as f64 - mu));
            let is = 1.0 / (var / lf + eps).sqrt();
            let h: Vec<f64> = x.iter().map(|&v| (v as f64 - mu) * is).collect();
            y.extend((0..l).map(|j| (h[j] * w[j] + b[j]) as f32));
            let (mut a, mut bb) = (0.0, 0.0);
            for j in 0..l {
                let v = g[j] as f64 * w[j];
                a += v;
                bb += v * h[j];
            }
            for j in 0..l {
                let g = g[j] as f64;
                gw[j] += g * h[j];
                gb[j] += g;
                gx.push((is / lf * (lf * (g * w[j]) - a - h[j] * bb)) as f32);
            }
        }
        (y, gx, gw, gb)
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn bits64(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Values spread over many magnitudes (from a fixed LCG), with some `±0` and repeats.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                match i % 29 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => 3.0,
                    _ => u * (1 << (s >> 60)) as f32,
                }
            })
            .collect()
    }

    #[test]
    fn every_path_and_thread_count_gives_the_one_row_definitions_bits() {
        for (rows, l) in [
            (1, 1),
            (3, 5),
            (8, 8),
            (17, 13),
            (64, 128),
            (130, 7),
            (9, 300),
        ] {
            let (xs, gs) = (
                values(rows * l, 1 + l as u64),
                values(rows * l, 99 + rows as u64),
            );
            let w: Vec<f64> = values(l, 7).iter().map(|&v| v as f64 + 1.0).collect();
            let b: Vec<f64> = values(l, 8).iter().map(|&v| v as f64).collect();
            let want = reference(&xs, &gs, l, &w, &b, 1e-5);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                set_isa(Some(isa)).unwrap();
                for threads in [1, 2, 3, 8] {
                    let par = Par::new(threads);
                    let (y, st) = ln_forward_par(&par, &xs, l, Some(&w), Some(&b), 1e-5);
                    let (gx, gw, gb) = ln_backward_par(&par, &xs, &gs, l, &st, Some(&w), true);
                    let at = format!("{rows}×{l}, {isa}, {threads} threads");
                    assert_eq!(bits(&y), bits(&want.0), "forward, {at}");
                    assert_eq!(bits(&gx), bits(&want.1), "∂x, {at}");
                    assert_eq!(bits64(&gw), bits64(&want.2), "∂w, {at}");
                    assert_eq!(bits64(&gb), bits64(&want.3), "∂b, {at}");
                }
            }
            set_isa(None).unwrap();
        }
    }
}
