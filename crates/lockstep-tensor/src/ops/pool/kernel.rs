//! The pooling kernels: the plane-parallel driver ([`for_each_plane`]), the 2×2 stride-2 max
//! pooling and its gradient (scalar, AVX-512 and AVX2, the same values and indices), and the
//! window means. They take the thread team from the caller and read no global flag.

use crate::isa::Isa;
use crate::threads::Par;
use core::mem::MaybeUninit;

/// Planes of at most this many elements in all stay on the calling thread: handing them to
/// the pool costs more than the work. A function of the shapes only; each plane is computed
/// the same way either way, so the choice never changes the bits.
pub(super) const SERIAL_MAX: usize = 1 << 16;

/// Runs `f(plane, out_plane)` for every `chunk`-element plane of `out`: on the calling thread
/// when the work is small (`work` elements touched in all, at most [`SERIAL_MAX`]) or there is
/// one thread, else over contiguous plane ranges, one per thread ([`Par::run_parts`]).
pub(super) fn for_each_plane<T: Send>(
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
pub(super) fn split_planes<'a, T>(
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
pub(super) fn pool_2x2_planes(
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
pub(super) fn unpool_2x2(
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

    /// Stamps the stacked-planes kernel for one instruction set from one template: planes of
    /// `(2·oh, 2·ow)` with `ow` a power of two, `2·ow ≤ $n`, and `oh·ow` a multiple of `$n`.
    /// The planes stack into one tall image, and `$n` consecutive outputs (`$n/ow` output rows
    /// of one plane) come from `4·$n` consecutive inputs: their pair scans (`$pairs`), the top
    /// and the bottom rows' pairs gathered (`$gather`, with the permutation `$at` makes), then
    /// `$finish`.
    macro_rules! flat_kernel {
        ($(#[$m:meta])* $name:ident, $feat:literal, $n:literal, $load:ident, $set1:ident,
         $lanes:ident, $pairs:ident, $at:ident, $gather:ident, $finish:ident) => {
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
                let plane = oh * ow;
                let outs = v.len() / plane * plane;
                assert!(s.len() >= 4 * outs && ix.len() == v.len() && h == 2 * oh && w == 2 * ow);
                assert!(ow.is_power_of_two() && 2 * ow <= $n && plane % $n == 0);
                let at = $at(ow);
                let wi = w as i64;
                let lane_base = $lanes(|l| 2 * wi * (l / ow as i64) + 2 * (l % ow as i64));
                let wv = $set1(wi);
                let (sp, vp, ip) = (s.as_ptr(), v.as_mut_ptr(), ix.as_mut_ptr());
                for o in (0..outs).step_by($n) {
                    // The block lies in one plane ($n divides the plane size); its first
                    // output's window starts at in-plane index 2w·(row) with
                    // row = (o mod plane) / ow.
                    let base = $set1(2 * wi * ((o % plane) / ow) as i64);
                    // SAFETY: inputs 4o..4o + 4·$n ≤ 4·outs ≤ s.len(); outputs
                    // o..o + $n ≤ outs.
                    unsafe {
                        let p = sp.add(4 * o);
                        let (h0, m0) = $pairs($load(p), $load(p.add($n)));
                        let (h1, m1) = $pairs($load(p.add(2 * $n)), $load(p.add(3 * $n)));
                        let (tv, tm, bv, bm) = $gather(at, (h0, m0), (h1, m1));
                        $finish(tv, tm, bv, bm, base, lane_base, wv, vp.add(o), ip.add(o));
                    }
                }
            }
        };
    }

    flat_kernel!(
        /// AVX-512: `ow` one of 1, 2, 4, 8; 16 outputs from 64 consecutive inputs.
        flat_avx512,
        "avx512f",
        16,
        _mm512_loadu_ps,
        _mm512_set1_epi64,
        lanes,
        pairs,
        flat_at,
        flat_gather,
        finish
    );
    flat_kernel!(
        /// AVX2: `ow` one of 1, 2, 4; 8 outputs from 32 consecutive inputs.
        flat_avx2,
        "avx2",
        8,
        _mm256_loadu_ps,
        _mm256_set1_epi64x,
        lanes2,
        pairs2,
        flat_at2,
        flat_gather2,
        finish2
    );

    /// Where [`flat_avx512`]'s output lane `l` finds its top and its bottom pair among the 32
    /// pairs of two vectors (`32/(2·ow)` row pairs of `ow` top then `ow` bottom pairs): row
    /// pair `l / ow`, column `l % ow`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn flat_at(ow: usize) -> (__m512i, __m512i) {
        let owi = ow as i32;
        let top_at: [i32; 16] =
            core::array::from_fn(|l| (l as i32 / owi) * 2 * owi + l as i32 % owi);
        let bot_at: [i32; 16] = core::array::from_fn(|l| top_at[l] + owi);
        // SAFETY: 16 values each.
        unsafe {
            (
                _mm512_loadu_si512(top_at.as_ptr().cast()),
                _mm512_loadu_si512(bot_at.as_ptr().cast()),
            )
        }
    }

    /// The top and bottom pairs of 16 outputs (values, and where the right one was kept)
    /// gathered from the pair scans of 64 consecutive inputs, by [`flat_at`]'s permutation.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn flat_gather(
        (top_at, bot_at): (__m512i, __m512i),
        (h0, m0): (__m512, __mmask16),
        (h1, m1): (__m512, __mmask16),
    ) -> (__m512, __mmask16, __m512, __mmask16) {
        let one = _mm512_set1_epi32(1);
        let tv = _mm512_permutex2var_ps(h0, top_at, h1);
        let bv = _mm512_permutex2var_ps(h0, bot_at, h1);
        // The pairs' masks travel with them as 0/1 lanes.
        let (k0, k1) = (
            _mm512_maskz_mov_epi32(m0, one),
            _mm512_maskz_mov_epi32(m1, one),
        );
        let tm = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(k0, top_at, k1), one);
        let bm = _mm512_test_epi32_mask(_mm512_permutex2var_epi32(k0, bot_at, k1), one);
        (tv, tm, bv, bm)
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

    /// [`flat_at`] for AVX2: each vector of 8 pairs holds `8/(2·ow)` row pairs of `ow` top then
    /// `ow` bottom pairs; the permutation gathers its tops into the low half and its bottoms
    /// into the high half.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn flat_at2(ow: usize) -> __m256i {
        let owi = ow as i32;
        let split: [i32; 8] = core::array::from_fn(|l| {
            let (half, k) = (l as i32 / 4, l as i32 % 4);
            (k / owi) * 2 * owi + half * owi + k % owi
        });
        // SAFETY: 8 values.
        unsafe { _mm256_loadu_si256(split.as_ptr().cast()) }
    }

    /// [`flat_gather`] for AVX2: the top and bottom pairs of 8 outputs from the pair scans of
    /// 32 consecutive inputs (each vector's halves split, then the halves recombined).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn flat_gather2(
        split: __m256i,
        (h0, m0): (__m256, __m256),
        (h1, m1): (__m256, __m256),
    ) -> (__m256, __m256, __m256, __m256) {
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
        (tv, tm, bv, bm)
    }
}

/// A pooling window: `(y0, x0, y1, x1, divisor)` for output cell `(i, j)`.
pub(super) type Window = (usize, usize, usize, usize, usize);

/// The general case of [`window_mean`]: each window summed row by row.
pub(super) fn window_mean_planes(
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
