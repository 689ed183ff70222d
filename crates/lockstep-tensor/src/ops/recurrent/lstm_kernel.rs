//! The fused LSTM layer's `f32` kernels (`lstm_layer.simd`): AVX-512 or AVX2+FMA registers,
//! each time step's product and its gate arithmetic in one pass, the batch cut into row ranges
//! that run on their own threads through all the steps.
//!
//! # Same bits as the GEMM path
//! Every product element is the blocked GEMM's chain `c = fma(a[p], b[p], c)` over `p` in
//! increasing order from `+0.0` (see `lockstep_tensor::ops::matmul`), whatever the tile, the
//! vector width or the row range; every elementwise formula is the GEMM path's, in the same
//! order, without fused multiply-adds (Rust never contracts `a * b + c`). So this path gives the
//! bits of `lstm_layer.gemm` on every instruction set and for any number of threads: a row of
//! the batch never reads another row until the weight gradient, which is one GEMM over all rows.
//!
//! Two shortcuts keep those bits: with a zero initial hidden state the first step's product is
//! `+0.0` in every element as long as `W_hh` is finite (each chain step `fma(±0, w, +0) = +0`),
//! so it is skipped; and `W_hh`'s gradient skips the first step's rows (`h_prev = 0`) as long as
//! their `dG` is finite, for the same reason (a chain of `+0.0` then continues unchanged).

use super::for_row_ranges;
use crate::ops::lines::copy_fixed;
use crate::threads::Par;
use crate::{Error, Result};
use core::sync::atomic::{AtomicBool, Ordering};

/// Gate vectors per micro-tile: the forward tile holds `i, f, g, o` of `U` hidden units, the
/// backward tile `4·U` columns of `dh`.
pub(crate) const NV: usize = 4;

/// The instruction set of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Simd {
    /// 16 lanes, [`AVX512_MR`] rows per tile.
    Avx512,
    /// 8 lanes, [`AVX2_MR`] rows per tile.
    Avx2,
}

impl Simd {
    /// The best path the instruction-set switch allows (`lockstep_tensor::isa`: the CPU, or
    /// `LOCKSTEP_ISA` / `set_isa`), or `None`: the GEMM path then runs. Not cached here, so a
    /// later `set_isa` reaches it; `Isa::best` is one atomic load.
    pub(crate) fn detect() -> Option<Simd> {
        use crate::isa::Isa;
        match Isa::best() {
            Isa::Avx512 => Some(Simd::Avx512),
            Isa::Avx2 => Some(Simd::Avx2),
            Isa::Portable => None,
        }
    }

    /// Lanes per vector.
    pub(crate) fn lanes(self) -> usize {
        match self {
            Simd::Avx512 => 16,
            Simd::Avx2 => 8,
        }
    }
}

/// Branch-free f32 `exp`, `sigmoid` and `tanh` (Cephes' polynomials) that the compiler
/// vectorises. No fused multiply-adds, so the bits are the same with every instruction set
/// (a vectorised copy of a loop only runs the same operations on wider registers).
pub(crate) mod fast {
    /// `exp(x)`, within 2 ulp for `x` in `[−87.3, 88.3]` (clamped outside, NaN kept).
    #[inline(always)]
    pub fn exp(x: f32) -> f32 {
        const LOG2E: f32 = std::f32::consts::LOG2_E;
        // Adding and subtracting 1.5·2²³ rounds to the nearest integer (|v| < 2²²).
        const MAGIC: f32 = 12_582_912.0;
        let x = x.clamp(-87.3, 88.3);
        let s = x * LOG2E + MAGIC;
        let n = s - MAGIC;
        let r = (x - n * 0.693_359_4) - n * -2.121_944_4e-4;
        let p = ((((1.987_569_2e-4 * r + 1.398_2e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
            + 1.666_666_5e-1)
            * r
            + 5.000_000_1e-1;
        let e = (p * (r * r) + r) + 1.0;
        // `n` as an integer: `s` lies in [2²³, 2²⁴), where one unit is one step of the bits.
        // (`n as i32` would be a saturating scalar conversion that stops vectorisation.)
        let ni = s.to_bits().wrapping_sub(MAGIC.to_bits());
        e * f32::from_bits(ni.wrapping_add(127) << 23)
    }

    /// Where [`sigmoid`] switches from [`tanh`]'s polynomial to the exponential form.
    pub const SIGMOID_SMALL: f32 = 2.0 * TANH_SMALL;

    /// `sigmoid(x) = (1 + tanh(x/2)) / 2` below [`SIGMOID_SMALL`] (where `tanh(x/2)` is the
    /// polynomial: no `exp`, no division), `1 / (1 + exp(−x))` above. Within 4 ulp of the
    /// true value for every `x ≥ −88.3` (measured over every f32 of `[−104, 20]`, above which
    /// it is 1 as the true value rounds: at most 1.6 ulp on the polynomial side, whose results
    /// lie in [0.22, 0.78], 2.5 on the other); below −88.3, where [`exp`] clamps its argument,
    /// the result stays at about 4.6e-39 rather than falling toward 0 (an absolute error
    /// under 5e-39).
    #[inline(always)]
    pub fn sigmoid(x: f32) -> f32 {
        let big = 1.0 / (1.0 + exp(-x));
        if x.abs() < SIGMOID_SMALL {
            sigmoid_small(x)
        } else {
            big
        }
    }

    /// [`sigmoid`]'s value for `|x| <` [`SIGMOID_SMALL`].
    #[inline(always)]
    pub fn sigmoid_small(x: f32) -> f32 {
        0.5 * tanh_small(0.5 * x) + 0.5
    }

    /// [`sigmoid`] of every element, `L` at a time, as [`tanh_runs`]: the same bits as
    /// [`sigmoid`] element by element.
    #[inline(always)]
    pub fn sigmoid_runs<const L: usize>(v: &mut [f32]) {
        runs::<L>(v, SIGMOID_SMALL, sigmoid_small, sigmoid);
    }

    /// Where [`tanh`] switches from the polynomial to the exponential form.
    pub const TANH_SMALL: f32 = 0.625;

    /// `tanh(x)`: an odd polynomial below [`TANH_SMALL`], `1 − 2/(exp(2|x|) + 1)` above.
    #[inline(always)]
    pub fn tanh(x: f32) -> f32 {
        let a = x.abs();
        let big = (1.0 - 2.0 / (exp(2.0 * a.clamp(0.0, 10.0)) + 1.0)).copysign(x);
        if a < TANH_SMALL { tanh_small(x) } else { big }
    }

    /// [`tanh`]'s polynomial: its value for `|x| <` [`TANH_SMALL`], with the sign of `x` (the
    /// polynomial alone gives +0 at −0, where `tanh(−0)` is −0; elsewhere the copy changes no
    /// bit, as `|x·p(x²)| < |x|`).
    #[inline(always)]
    pub fn tanh_small(x: f32) -> f32 {
        let z = x * x;
        ((((((-5.704_988_7e-3 * z + 2.063_908_9e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1)
            * z
            - 3.333_328_2e-1)
            * z)
            * x
            + x)
            .copysign(x)
    }

    /// [`tanh`] of every element, `L` at a time: a run whose every `|x|` is below
    /// [`TANH_SMALL`] (the common case for gates and cell states) takes only the polynomial,
    /// without the exponential form's `exp` and division that a vector otherwise computes for
    /// all its lanes. The same bits as [`tanh`] element by element.
    #[inline(always)]
    pub fn tanh_runs<const L: usize>(v: &mut [f32]) {
        runs::<L>(v, TANH_SMALL, tanh_small, tanh);
    }

    /// `full` of every element, `L` at a time, taking `small` alone for a run whose every
    /// `|x| < bound` (where `full(x) == small(x)`); the remainder through `full`.
    #[inline(always)]
    fn runs<const L: usize>(
        v: &mut [f32],
        bound: f32,
        small: impl Fn(f32) -> f32,
        full: impl Fn(f32) -> f32,
    ) {
        let mut runs = v.chunks_exact_mut(L);
        for run in &mut runs {
            // NaN compares false: its run takes the general path, as `full` does.
            if run.iter().fold(true, |s, x| s & (x.abs() < bound)) {
                run.iter_mut().for_each(|x| *x = small(*x));
            } else {
                run.iter_mut().for_each(|x| *x = full(*x));
            }
        }
        runs.into_remainder().iter_mut().for_each(|x| *x = full(*x));
    }

    /// `v[i] = f(v[i])`, with AVX2 registers where the CPU has them.
    #[inline(always)]
    pub fn map(v: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::Isa::Avx2.enabled() {
            // SAFETY: the CPU supports AVX2 (the switch allows AVX2 only where the CPU has it).
            return unsafe { map_avx2(v, f) };
        }
        v.iter_mut().for_each(|x| *x = f(*x));
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn map_avx2(v: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
        v.iter_mut().for_each(|x| *x = f(*x));
    }
}

/// The output pointer the row-range tasks share: each writes only its own rows, and nothing
/// reads them until the tasks are joined.
pub(crate) type Out = crate::ops::SyncPtr<f32>;

/// A 64-byte aligned `f32` buffer: packed weights, read a vector at a time (a vector across two
/// cache lines costs two loads). Its storage comes from, and goes back to, [`scratch`].
pub(crate) struct Packed {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

impl Packed {
    /// Contents unspecified (the packing writes them).
    pub(crate) fn new(len: usize) -> Result<Self> {
        let buf = scratch(len + 16)?;
        let addr = buf.as_ptr() as usize;
        let off = (addr.next_multiple_of(64) - addr) / 4;
        Ok(Self { buf, off, len })
    }
    pub(crate) fn as_slice(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        recycle(core::mem::take(&mut self.buf));
    }
}

/// Whether every element is `±0.0`.
pub(crate) fn all_zero(v: &[f32]) -> bool {
    v.iter().fold(0u32, |a, x| a | (x.to_bits() & 0x7fff_ffff)) == 0
}

/// Whether every element is finite.
pub(crate) fn all_finite(v: &[f32]) -> bool {
    // |x|'s bits + 2²³ reach the top bit exactly for infinities and NaNs (and never carry out):
    // an OR over the elements, which vectorises without any particular instruction set.
    v.iter()
        .fold(0u32, |a, x| a | ((x.to_bits() & 0x7fff_ffff) + 0x0080_0000))
        & 0x8000_0000
        == 0
}

/// `W_hh` (`[4H, H]`) for the forward steps: for each tile of `U` hidden units `t`, for each
/// `p < H`, the four gates' `U` weights `W[v·H + t·U + l][p]` (zero past `H`). Returns the
/// panels and whether every weight is finite. The tiles are cut among `par`'s threads as
/// [`for_row_ranges`] cuts rows for `work` (exact copies: the bits never depend on it).
pub(crate) fn pack_forward(
    simd: Simd,
    w: &[f32],
    h: usize,
    par: &Par,
    work: usize,
) -> Result<(Packed, bool)> {
    let u = simd.lanes();
    let tiles = h.div_ceil(u);
    let rows = |t: usize, v: usize| (v * h + t * u, u.min(h - t * u));
    let finite = AtomicBool::new(true);
    let pk = pack_tiles(simd, w, h, tiles, rows, par, work, |panel| {
        // Every weight is in exactly one panel (beside zeros), checked while the panel is in
        // L1 rather than by another pass over `w`.
        if !all_finite(panel) {
            finite.store(false, Ordering::Relaxed);
        }
    })?;
    Ok((pk, finite.load(Ordering::Relaxed)))
}

/// `W` (`[g, k]`, `g` a multiple of `4·U`) for `x · Wᵀ`: for each tile of `4·U` rows `t`, for
/// each `p < k`, the weights `W[t·4·U + c][p]`, `c < 4·U`; cut among threads as
/// [`pack_forward`].
pub(crate) fn pack_rows(
    simd: Simd,
    w: &[f32],
    g: usize,
    k: usize,
    par: &Par,
    work: usize,
) -> Result<Packed> {
    let (u, q) = (simd.lanes(), NV * simd.lanes());
    assert!(g.is_multiple_of(q) && w.len() == g * k);
    pack_tiles(
        simd,
        w,
        k,
        g / q,
        |t, v| (t * q + v * u, u),
        par,
        work,
        |_| {},
    )
}

/// [`pack_panels`] into a new buffer, tile ranges on `par`'s threads, each panel followed by
/// `after(panel)` on the same thread.
#[allow(clippy::too_many_arguments)]
fn pack_tiles(
    simd: Simd,
    w: &[f32],
    k: usize,
    tiles: usize,
    rows: impl Fn(usize, usize) -> (usize, usize) + Sync,
    par: &Par,
    work: usize,
    after: impl Fn(&[f32]) + Sync,
) -> Result<Packed> {
    let pl = k * NV * simd.lanes();
    let mut pk = Packed::new(tiles * pl)?;
    let dst = crate::ops::SyncPtr(pk.as_mut_slice().as_mut_ptr());
    for_row_ranges(par, tiles, work, |t0, t1| {
        // SAFETY: panels t0..t1 lie inside the buffer (`tiles · pl` elements) and are this
        // range's alone.
        let d = unsafe { core::slice::from_raw_parts_mut(dst.at(t0 * pl), (t1 - t0) * pl) };
        for (t, panel) in (t0..t1).zip(d.chunks_exact_mut(pl)) {
            pack_panels(simd, w, k, t, t + 1, panel, &rows);
            after(panel);
        }
    });
    Ok(pk)
}

/// Transposed panels `t0..t1` of `w` (rows of `k`) into `dst`: panel `t` (`k·NV·U` values, at
/// `(t − t0)·k·NV·U`) holds at `p·NV·U + v·U + l` the value `w[(r + l)·k + p]` for
/// `(r, nu) = rows(t, v)` and `l < nu`, zero for `nu ≤ l < U`.
fn pack_panels(
    simd: Simd,
    w: &[f32],
    k: usize,
    t0: usize,
    t1: usize,
    dst: &mut [f32],
    rows: &impl Fn(usize, usize) -> (usize, usize),
) {
    let u = simd.lanes();
    let pl = k * NV * u;
    assert!(dst.len() == (t1 - t0) * pl);
    for t in t0..t1 {
        let panel = &mut dst[(t - t0) * pl..(t - t0 + 1) * pl];
        // 16 × 16 blocks: the block's source rows and destination lines stay in L1.
        for v in 0..NV {
            let (r, nu) = rows(t, v);
            let src = &w[r * k..][..nu * k];
            for p0 in (0..k).step_by(16) {
                let pn = 16.min(k - p0);
                let dst = &mut panel[p0 * NV * u + v * u..][..(pn - 1) * NV * u + u];
                #[cfg(target_arch = "x86_64")]
                if simd == Simd::Avx512 && nu == 16 && pn == 16 {
                    // SAFETY: AVX-512 found by `Simd::detect`; 16 rows of 16 from `k` apart
                    // in `src`, 16 lines of 16 from `NV·U` apart in `dst` (sized above).
                    unsafe { x86::transpose16(src[p0..].as_ptr(), k, dst.as_mut_ptr(), NV * u) };
                    continue;
                }
                #[cfg(target_arch = "x86_64")]
                if simd == Simd::Avx2 && nu == 8 && pn.is_multiple_of(8) {
                    for c in (0..pn).step_by(8) {
                        // SAFETY: AVX2 found by `Simd::detect`; 8 rows of 8 from `k` apart in
                        // `src` (columns p0 + c.. < k), 8 lines of 8 from `NV·U` apart in `dst`.
                        unsafe {
                            x86::transpose8(
                                src[p0 + c..].as_ptr(),
                                k,
                                dst[c * NV * u..].as_mut_ptr(),
                                NV * u,
                            )
                        };
                    }
                    continue;
                }
                for q in 0..pn {
                    let line = &mut dst[q * NV * u..][..u];
                    for (l, d) in line.iter_mut().enumerate() {
                        *d = if l < nu { src[l * k + p0 + q] } else { 0.0 };
                    }
                }
            }
        }
    }
}

/// Whether `H` is whole tiles of `4·U` columns: then `W_hh`'s gradient is computed here too
/// (see [`weight_grad_rows`]).
pub(crate) fn direct(simd: Simd, h: usize) -> bool {
    h.is_multiple_of(NV * simd.lanes())
}

/// `W_hh` (`[4H, H]`) for the backward steps' `dG · W_hh`: [`pack_cols`] of it.
pub(crate) fn pack_backward(simd: Simd, w: &[f32], h: usize) -> Result<Packed> {
    pack_cols(simd, w, 4 * h, h)
}

/// `W` (`[g, n]`) for products `dG · W`: for each tile of `4·U` columns `t`, the `g` rows'
/// slices `W[j][t·4·U..]` one after the other (`g·4·U` values, zero past `n`): plain copies.
pub(crate) fn pack_cols(simd: Simd, w: &[f32], g: usize, n: usize) -> Result<Packed> {
    let q = NV * simd.lanes();
    assert!(w.len() == g * n);
    let tiles = n.div_ceil(q);
    let mut pk = Packed::new(tiles * g * q)?;
    let dst = pk.as_mut_slice();
    if !n.is_multiple_of(q) {
        dst.fill(0.0);
    }
    for t in 0..tiles {
        let cols = q.min(n - t * q);
        let lines = dst[t * g * q..(t + 1) * g * q].chunks_exact_mut(q);
        for (j, line) in lines.enumerate() {
            let src = &w[j * n + t * q..][..cols];
            // Whole lines as fixed-size moves: a `memmove` call per 128-byte line cost more
            // than the copy (a few percent of the lstm step).
            match cols {
                32 => copy_fixed::<f32, 32>(line, src),
                64 => copy_fixed::<f32, 64>(line, src),
                _ => line[..cols].copy_from_slice(src),
            }
        }
    }
    Ok(pk)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! The micro-kernels: `MR` rows × `NV` vectors of accumulators, one broadcast of A per row
    //! and one load of B per vector and step.
    use super::NV;
    use core::arch::x86_64::*;

    /// Stamps the tile function `$name::<MR>`: [`fma_tile!`] over [`x86_fma!`]'s vocabulary.
    macro_rules! tile_fn {
        ($name:ident, $feat:literal, $isa:tt) => {
            /// `out[i·ors + v·ovs + l]` for `i < MR`: the chain over `p < kc` of
            /// `a[i·ars + p·aks] · b[p·bks + v·U + l]`, from `+0.0`, or from the value in
            /// `out` with `init` (a chain continued).
            ///
            /// # Safety
            /// The CPU supports the target features; every `a` and `b` index above is readable
            /// and every `out` index is writable (and readable with `init`).
            #[target_feature(enable = $feat)]
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe fn $name<const MR: usize>(
                kc: usize,
                a: *const f32,
                ars: usize,
                aks: usize,
                b: *const f32,
                bks: usize,
                out: *mut f32,
                ors: usize,
                ovs: usize,
                init: bool,
            ) {
                const U: usize = fma_tile!($isa LANES);
                // SAFETY (whole body): the caller guarantees bounds and CPU features; the
                // pointers advance with `wrapping_add` (they end one step past their data).
                unsafe {
                    let (mut a, mut b) = (a, b);
                    fma_tile!($isa, MR, NV;
                        load if init => |i, v| out.add(i * ors + v * ovs);
                        for _ in 0..kc {}
                        a |i| *a.add(i * ars);
                        b |v| b.add(v * U);
                        then {
                            a = a.wrapping_add(aks);
                            b = b.wrapping_add(bks);
                        }
                        store |i, v| out.add(i * ors + v * ovs));
                }
            }
        };
    }

    x86_fma!(avx512_f32, tile_fn!(tile512));
    x86_fma!(avx2_f32, tile_fn!(tile256));

    /// Stores the transpose of the 16 × 16 block at `src` (rows `ss` apart) to `dst` (rows
    /// `ds` apart): an exact copy of each value.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; both blocks are inside their buffers.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn transpose16(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        // SAFETY (whole body): as documented.
        unsafe {
            let mut r = [_mm512_setzero_ps(); 16];
            for (i, r) in r.iter_mut().enumerate() {
                *r = _mm512_loadu_ps(src.add(i * ss));
            }
            // u[4·g + m]: column 4·k + m of rows 4·g..4·g + 4 in 128-bit lane k.
            let mut u = [_mm512_setzero_ps(); 16];
            for g in 0..4 {
                let (a, b) = (
                    _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]),
                    _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]),
                );
                let (c, d) = (
                    _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]),
                    _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]),
                );
                let pd = _mm512_castps_pd;
                let ps = _mm512_castpd_ps;
                u[4 * g] = ps(_mm512_unpacklo_pd(pd(a), pd(c)));
                u[4 * g + 1] = ps(_mm512_unpackhi_pd(pd(a), pd(c)));
                u[4 * g + 2] = ps(_mm512_unpacklo_pd(pd(b), pd(d)));
                u[4 * g + 3] = ps(_mm512_unpackhi_pd(pd(b), pd(d)));
            }
            for m in 0..4 {
                let a = _mm512_shuffle_f32x4::<0x88>(u[m], u[4 + m]);
                let b = _mm512_shuffle_f32x4::<0xdd>(u[m], u[4 + m]);
                let c = _mm512_shuffle_f32x4::<0x88>(u[8 + m], u[12 + m]);
                let d = _mm512_shuffle_f32x4::<0xdd>(u[8 + m], u[12 + m]);
                _mm512_storeu_ps(dst.add(m * ds), _mm512_shuffle_f32x4::<0x88>(a, c));
                _mm512_storeu_ps(dst.add((8 + m) * ds), _mm512_shuffle_f32x4::<0xdd>(a, c));
                _mm512_storeu_ps(dst.add((4 + m) * ds), _mm512_shuffle_f32x4::<0x88>(b, d));
                _mm512_storeu_ps(dst.add((12 + m) * ds), _mm512_shuffle_f32x4::<0xdd>(b, d));
            }
        }
    }

    /// Stores the transpose of the 8 × 8 block at `src` (rows `ss` apart) to `dst` (rows `ds`
    /// apart): an exact copy of each value (the AVX2 twin of [`transpose16`]).
    ///
    /// # Safety
    /// The CPU supports AVX; both blocks are inside their buffers.
    #[target_feature(enable = "avx")]
    pub(crate) unsafe fn transpose8(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        // SAFETY (whole body): as documented.
        unsafe {
            let r: [__m256; 8] = core::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ss)));
            let cols = crate::ops::matmul::kernel::x86::transpose8x8(r);
            for (m, col) in cols.into_iter().enumerate() {
                _mm256_storeu_ps(dst.add(m * ds), col);
            }
        }
    }

    /// Stamps `$name(mr, …)`: `$tile::<MR>` for `mr` rows, `mr` from 1 to the largest `MR`
    /// listed (the bodies' row tiles, [`super::AVX512_MR`] and [`super::AVX2_MR`], checked at
    /// compile time; a larger `mr` would compute one row).
    macro_rules! rows_fn {
        ($name:ident, $tile:ident, $max:literal, [$($mr:literal),*]) => {
            #[doc = concat!("[`", stringify!($tile), "`] for `mr` rows (1 to ", $max, ").")]
            ///
            /// # Safety
            #[doc = concat!("As [`", stringify!($tile), "`].")]
            #[allow(clippy::too_many_arguments)]
            #[inline(always)]
            pub(crate) unsafe fn $name(
                mr: usize,
                kc: usize,
                a: *const f32,
                ars: usize,
                aks: usize,
                b: *const f32,
                bks: usize,
                out: *mut f32,
                ors: usize,
                ovs: usize,
                init: bool,
            ) {
                debug_assert!((1..=$max).contains(&mr), "{mr} rows");
                // SAFETY: forwarded.
                unsafe {
                    match mr {
                        $($mr => $tile::<$mr>(kc, a, ars, aks, b, bks, out, ors, ovs, init),)*
                        _ => $tile::<1>(kc, a, ars, aks, b, bks, out, ors, ovs, init),
                    }
                }
            }
        };
    }

    rows_fn!(tile512_rows, tile512, 4, [4, 3, 2]);
    rows_fn!(tile256_rows, tile256, 3, [3, 2]);
}

/// The forward pass's inputs (all contiguous, row-major) and outputs.
pub(crate) struct Forward<'a> {
    /// Steps `T`, batch `B`, hidden `H`.
    pub steps: usize,
    pub batch: usize,
    pub hidden: usize,
    /// `[T, B, 4H]`: the input projection with `bias_ih`, by time.
    pub xw: &'a [f32],
    /// [`pack_forward`]'s panels.
    pub wt: &'a Packed,
    /// `bias_hh` `[4H]`.
    pub bias: Option<&'a [f32]>,
    /// `[B, H]` each.
    pub h0: &'a [f32],
    pub c0: &'a [f32],
    /// Step `k` handles time `order[k]`.
    pub order: &'a [usize],
    /// Skip the first step's product (`h0` zero, `W_hh` finite: it is `+0.0`).
    pub skip_first: bool,
    /// `[T, B, 4H]` activated gates, `[T, B, H]` cell states, their tanh, the hidden states
    /// before each step — all in processing order — and `[T + 1, B, H]` the outputs by time
    /// then the last cell state.
    pub acts: Out,
    pub cs: Out,
    pub tcs: Out,
    pub hprev: Out,
    pub y: Out,
}

/// The backward pass's inputs and outputs.
pub(crate) struct Backward<'a> {
    pub steps: usize,
    pub batch: usize,
    pub hidden: usize,
    /// `[T + 1, B, H]`: the gradient of the forward's value.
    pub gy: &'a [f32],
    /// `W_hh` for `dG · W_hh`: [`pack_backward`]'s panels (`wks = 4·U`, `wts = 4H·4·U`) or
    /// `W_hh` itself (`wks = H`, `wts = 4·U`, `H` [`direct`]): tile `t`'s row `j` starts at
    /// `t·wts + j·wks`.
    pub w: &'a [f32],
    pub wks: usize,
    pub wts: usize,
    /// The forward's saved values (processing order) and the initial cell state `[B, H]`.
    pub acts: &'a [f32],
    pub cs: &'a [f32],
    pub tcs: &'a [f32],
    pub c0: &'a [f32],
    pub order: &'a [usize],
    /// Whether the first step's `dG · W_hh` (the initial hidden state's gradient) is needed.
    pub need_h0: bool,
    /// `[T, B, 4H]` the gates' gradients in processing order; `[B, H]` the initial states'.
    pub dg: Out,
    pub dh0: Out,
    pub dc0: Out,
}

/// Runs rows `r0..r1` of the forward pass.
pub(crate) fn forward_rows(simd: Simd, f: &Forward, r0: usize, r1: usize) {
    // SAFETY: `Simd::detect` found the features; the arguments were checked by the caller.
    unsafe { forward_simd(simd, f, r0, r1) }
}

/// Runs rows `r0..r1` of the backward pass.
pub(crate) fn backward_rows(simd: Simd, b: &Backward, r0: usize, r1: usize) {
    // SAFETY: as in `forward_rows`.
    unsafe { backward_simd(simd, b, r0, r1) }
}

/// Rows per tile of the AVX-512 builds: 4 × 4 vectors of accumulators (eight loads per
/// sixteen FMAs, within the load ports), whole tiles for batches that are multiples of 4. Six
/// rows left a 2-row tail at batch 32: on Zen 5 the lstm layer's products ran 1.5–3 % slower.
const AVX512_MR: usize = 4;

/// Rows per tile of the AVX2 builds.
const AVX2_MR: usize = 3;

// The tile functions handle up to 4 (AVX-512) and 3 (AVX2) rows, and the weight gradient's
// thread shares start on whole tiles.
const _: () = assert!(
    AVX512_MR <= 4
        && AVX2_MR <= 3
        && DW_ROWS.is_multiple_of(AVX512_MR)
        && DW_ROWS.is_multiple_of(AVX2_MR)
);

/// Stamps, for each kernel body, `unsafe fn NAME(simd, ARGS)`: the body (generic over the
/// lanes `U` and the rows per tile `MR`, with the tile function as its last argument) built
/// once with AVX-512 (`U` 16, [`AVX512_MR`], [`x86::tile512_rows`]) and once with AVX2+FMA (`U` 8,
/// [`AVX2_MR`], [`x86::tile256_rows`]) from the one template, and the build `simd` names run.
/// The stamped function's safety contract is its body's, plus: `simd` is available.
macro_rules! simd_twins {
    ($($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $body:ident;)*) => {$(
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name(simd: Simd, $($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512($($arg: $ty),*) {
                    // SAFETY: forwarded (the caller's contract).
                    unsafe { $body::<16, AVX512_MR>($($arg,)* x86::tile512_rows) }
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2($($arg: $ty),*) {
                    // SAFETY: forwarded (the caller's contract).
                    unsafe { $body::<8, AVX2_MR>($($arg,)* x86::tile256_rows) }
                }
                match simd {
                    // SAFETY: the caller passes an available instruction set.
                    Simd::Avx512 => unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Simd::Avx2 => unsafe { avx2($($arg),*) },
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = ($($arg,)*);
                unreachable!("no SIMD kernels off x86-64 ({simd:?})")
            }
        }
    )*};
}

simd_twins! {
    /// [`forward_body`] on `simd`.
    fn forward_simd(f: &Forward, r0: usize, r1: usize) => forward_body;
    /// [`backward_body`] on `simd`.
    fn backward_simd(b: &Backward, r0: usize, r1: usize) => backward_body;
    /// [`dw_body`] on `simd`.
    fn dw_simd(
        dg: &[f32],
        g: usize,
        xs: &[f32],
        n: usize,
        k: usize,
        dw: Out,
        i0: usize,
        i1: usize,
        db: Option<Out>,
    ) => dw_body;
    /// [`project_body`] on `simd`.
    fn project_simd(
        x: &[f32],
        k: usize,
        wt: &[f32],
        g: usize,
        bias: Option<&[f32]>,
        out: Out,
        r0: usize,
        r1: usize,
    ) => project_body;
    /// [`product_body`] on `simd`.
    fn product_simd(
        dg: &[f32], g: usize, w: &[f32], n: usize, out: Out, r0: usize, r1: usize,
    ) => product_body;
    /// [`cols_body`] on `simd`.
    fn cols_simd(
        dg: &[f32], g: usize, xs: &[f32], n: usize, k: usize, out: Out, b0: usize, b1: usize,
    ) => cols_body;
}

pub(crate) type TileFn = unsafe fn(
    usize,
    usize,
    *const f32,
    usize,
    usize,
    *const f32,
    usize,
    *mut f32,
    usize,
    usize,
    bool,
);

/// The forward steps of rows `r0..r1` with `U` lanes and tiles of up to `MR` rows; inlined into
/// the target-feature functions above so that the gate arithmetic is vectorised with them.
///
/// # Safety
/// `tile` must run on this CPU; the slices have the sizes [`Forward`] documents and the outputs
/// hold them too; no other task writes rows `r0..r1`.
#[inline(always)]
unsafe fn forward_body<const U: usize, const MR: usize>(
    f: &Forward,
    r0: usize,
    r1: usize,
    tile: TileFn,
) {
    let (bsz, h) = (f.batch, f.hidden);
    let g4 = 4 * h;
    let n = r1 - r0;
    let tiles = h.div_ceil(U);
    let wt = f.wt.as_slice();
    // At least one step: step 0's hidden-state rows are written before the loop, and the
    // last cell state is read from the last step's.
    assert!(
        f.steps > 0
            && f.order.len() == f.steps
            && f.order.iter().all(|&s| s < f.steps)
            && f.xw.len() == f.steps * bsz * g4
            && wt.len() == tiles * h * NV * U
            && f.h0.len() == bsz * h
            && f.c0.len() == bsz * h
            && f.bias.is_none_or(|b| b.len() == g4)
            && r1 <= bsz
    );
    let hp = tiles * U;
    // The hidden state before step k is read from, and the new one written straight into,
    // the saved `hprev` rows (and `y`); the cell state likewise from `cs`: no copies per step.
    // SAFETY: rows r0..r1 of step 0 are this task's.
    unsafe { f.hprev.put(r0 * h, &f.h0[r0 * h..r1 * h]) };
    // The last step's new hidden state goes to `y` only; its second copy lands here.
    let mut spare = vec![0f32; h];
    // The products of a step, `[n, 4, hp]`: gate v of unit j at `v·hp + j` (whole tiles).
    let mut mm = vec![0f32; n * NV * hp];
    for (k, &s) in f.order.iter().enumerate() {
        let kc = if k == 0 && f.skip_first { 0 } else { h };
        // This task's rows of the hidden state before step k (written above or by step k − 1).
        let hc = f.hprev.at((k * bsz + r0) * h) as *const f32;
        for t in 0..tiles {
            let panel = wt[t * h * NV * U..].as_ptr();
            let mut i0 = 0;
            while i0 < n {
                let mr = MR.min(n - i0);
                // SAFETY: rows i0..i0+mr of `hc` have `h` elements each (kc ≤ h), the panel
                // `kc` steps of NV·U; `mm` rows of NV·hp hold gate vectors of `U` at `t·U`.
                unsafe {
                    tile(
                        mr,
                        kc,
                        hc.add(i0 * h),
                        h,
                        1,
                        panel,
                        NV * U,
                        mm[i0 * NV * hp + t * U..].as_mut_ptr(),
                        NV * hp,
                        hp,
                        false,
                    )
                };
                i0 += mr;
            }
        }
        for i in 0..n {
            let r = r0 + i;
            let (ka, kh) = ((k * bsz + r) * g4, (k * bsz + r) * h);
            // SAFETY: row r of steps k and k + 1 and of time s is this task's (nobody else
            // reads or writes it now); the cell state of step k − 1 was written by this task.
            let (a, cprev, cs, tcs, hn, hnext) = unsafe {
                (
                    core::slice::from_raw_parts_mut(f.acts.0.add(ka), g4),
                    if k == 0 {
                        &f.c0[r * h..][..h]
                    } else {
                        core::slice::from_raw_parts(f.cs.0.add(kh - bsz * h), h)
                    },
                    core::slice::from_raw_parts_mut(f.cs.0.add(kh), h),
                    core::slice::from_raw_parts_mut(f.tcs.0.add(kh), h),
                    core::slice::from_raw_parts_mut(f.y.0.add((s * bsz + r) * h), h),
                    if k + 1 < f.steps {
                        core::slice::from_raw_parts_mut(f.hprev.0.add(kh + bsz * h), h)
                    } else {
                        &mut spare[..]
                    },
                )
            };
            gates::<U>(
                a,
                &f.xw[(s * bsz + r) * g4..][..g4],
                &mm[i * NV * hp..][..NV * hp],
                f.bias,
                cprev,
                cs,
                tcs,
                hn,
                hnext,
            );
        }
    }
    // The last cell state, after the outputs.
    let last = ((f.steps - 1) * bsz + r0) * h;
    // SAFETY: as above; `cs` and `y` are different buffers.
    unsafe {
        let c = core::slice::from_raw_parts(f.cs.0.add(last), n * h);
        f.y.put((f.steps * bsz + r0) * h, c);
    }
}

/// One row of one step: `a` becomes the activated gates `x + (m + b)` (`m` with gate `v` at
/// `v·hp`), `cs` the new cell state (from `cprev`), `tcs` its tanh and `hn` and `hnext` the
/// new hidden state — the GEMM path's formulas and order, in flat loops that vectorise.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gates<const L: usize>(
    a: &mut [f32],
    x: &[f32],
    m: &[f32],
    bias: Option<&[f32]>,
    cprev: &[f32],
    cs: &mut [f32],
    tcs: &mut [f32],
    hn: &mut [f32],
    hnext: &mut [f32],
) {
    let h = cs.len();
    let hp = m.len() / NV;
    for v in 0..NV {
        let (av, xv, mv) = (&mut a[v * h..][..h], &x[v * h..][..h], &m[v * hp..][..h]);
        match bias {
            Some(b) => {
                let bv = &b[v * h..][..h];
                for j in 0..h {
                    av[j] = xv[j] + (mv[j] + bv[j]);
                }
            }
            None => {
                for j in 0..h {
                    av[j] = xv[j] + mv[j];
                }
            }
        }
    }
    let (ai, rest) = a.split_at_mut(h);
    let (af, rest) = rest.split_at_mut(h);
    let (ag, ao) = rest.split_at_mut(h);
    let (ao, c, cs, tcs, hn, hnext) = (
        &mut ao[..h],
        &cprev[..h],
        &mut cs[..h],
        &mut tcs[..h],
        &mut hn[..h],
        &mut hnext[..h],
    );
    fast::sigmoid_runs::<L>(ai);
    fast::sigmoid_runs::<L>(af);
    fast::tanh_runs::<L>(ag);
    fast::sigmoid_runs::<L>(ao);
    for j in 0..h {
        let cn = af[j] * c[j] + ai[j] * ag[j];
        cs[j] = cn;
        tcs[j] = cn;
    }
    fast::tanh_runs::<L>(tcs);
    for j in 0..h {
        let hv = ao[j] * tcs[j];
        hn[j] = hv;
        hnext[j] = hv;
    }
}

/// The backward steps of rows `r0..r1` (see [`forward_body`]).
///
/// # Safety
/// As [`forward_body`], for [`Backward`]'s sizes.
#[inline(always)]
unsafe fn backward_body<const U: usize, const MR: usize>(
    b: &Backward,
    r0: usize,
    r1: usize,
    tile: TileFn,
) {
    let (bsz, h, steps) = (b.batch, b.hidden, b.steps);
    let g4 = 4 * h;
    let q = NV * U;
    let n = r1 - r0;
    let tiles = h.div_ceil(q);
    let hp = tiles * q;
    let w = b.w;
    assert!(
        b.gy.len() == (steps + 1) * bsz * h
            && (tiles - 1) * b.wts + (g4 - 1) * b.wks + q <= w.len()
            && b.acts.len() == steps * bsz * g4
            && b.cs.len() == steps * bsz * h
            && b.tcs.len() == steps * bsz * h
            && b.c0.len() == bsz * h
            && r1 <= bsz
    );
    // dh padded to whole tiles (the product writes whole tiles).
    let mut dh = vec![0f32; n * hp];
    let mut dc = b.gy[(steps * bsz + r0) * h..(steps * bsz + r1) * h].to_vec();
    for k in (0..steps).rev() {
        let s = b.order[k];
        for i in 0..n {
            let r = r0 + i;
            let cprev = if k == 0 {
                &b.c0[r * h..][..h]
            } else {
                &b.cs[((k - 1) * bsz + r) * h..][..h]
            };
            gates_grad(
                &b.gy[(s * bsz + r) * h..][..h],
                &dh[i * hp..][..h],
                &mut dc[i * h..][..h],
                &b.acts[(k * bsz + r) * g4..][..g4],
                cprev,
                &b.tcs[(k * bsz + r) * h..][..h],
                // SAFETY: row r of step k is this task's (written here, read back below).
                unsafe { core::slice::from_raw_parts_mut(b.dg.at((k * bsz + r) * g4), g4) },
            );
        }
        if k == 0 && !b.need_h0 {
            continue;
        }
        // This task's rows of dG for step k, just written (and read back only by it).
        let dgk = b.dg.0.wrapping_add((k * bsz + r0) * g4) as *const f32;
        for t in 0..tiles {
            let panel = w[t * b.wts..].as_ptr();
            // K blocks of the panel that stay in L1 across the row tiles; each block continues
            // the chains the one before stored (`init`), so the bits are one chain's.
            for j0 in (0..g4).step_by(KB / U) {
                let kc = (KB / U).min(g4 - j0);
                let mut i0 = 0;
                while i0 < n {
                    let mr = MR.min(n - i0);
                    // SAFETY: rows i0..i0+mr of this step's dG hold g4 elements each (columns
                    // j0..j0+kc), the panel g4 rows of q from `wks` apart (asserted above),
                    // `dh` rows of `hp ≥ (t + 1)·q`, written by the block before when j0 > 0.
                    unsafe {
                        tile(
                            mr,
                            kc,
                            dgk.add(i0 * g4 + j0),
                            g4,
                            1,
                            panel.wrapping_add(j0 * b.wks),
                            b.wks,
                            dh[i0 * hp + t * q..].as_mut_ptr(),
                            hp,
                            U,
                            j0 > 0,
                        );
                    }
                    i0 += mr;
                }
            }
        }
    }
    for i in 0..n {
        // SAFETY: rows r0..r1 are this task's.
        unsafe {
            b.dh0.put((r0 + i) * h, &dh[i * hp..][..h]);
            b.dc0.put((r0 + i) * h, &dc[i * h..][..h]);
        }
    }
}

/// `K` steps per block, times the lanes `U`, of the products whose B operand is a panel of
/// `4·U` columns in rows of their own (`dG · W` from [`pack_cols`]' panels, the weight
/// gradients from [`dw_body`]'s copied blocks): `KB / U` rows of `4·U` floats fill 16 KiB of
/// L1 (AVX2: 128 rows of 128 bytes), reused by every row tile before the next block.
const KB: usize = 1024;

/// Rows of `W_hh`'s gradient per block: a multiple of every micro-tile's row count (4 and 3),
/// so that the threads' shares ([`weight_grad_rows`]) start on tile boundaries.
pub(crate) const DW_ROWS: usize = 12;

/// `K` steps per pass over `W_hh`'s gradient when `H_prev` is read in place (no memory for
/// [`dw_body`]'s copied block): a block of its rows (`KC × 4·U`) stays in L1 while every row
/// tile of the share uses it (rows 512 bytes apart, H = 128, share 32 of the 64 sets: 64 rows
/// fill 8 of their 12 ways, 128 overflowed them; measured ~2 % of the step).
const KC: usize = 64;

/// Rows `i0..i1` of `W_hh`'s gradient `[4H, H]` into `dw`: element `(i, j)` is the chain over
/// `p < K` of `dg[p·4H + i] · hp[p·H + j]` from `+0.0` — the blocked GEMM's bits for
/// `dGᵀ · H_prev` (see the module doc): `dG`'s columns give the broadcasts, `H_prev`'s rows
/// the vectors (both copied per K block, see `dw_packed`). `dg` is `[K, 4H]`, `hp` `[K, H]`,
/// `H` [`direct`].
///
/// With `db`, also adds each column `i` of `dg` (`i0 ≤ i < i1`), row by row in order, to
/// `db[i]`: the same additions as a loop over the rows after the product, done while the
/// product's copy of `dg` reads them.
///
/// # Safety
/// `dw` holds `4H·H` elements, `db` (if any) `4H`, and no other task writes rows `i0..i1` of
/// `dw` or elements `i0..i1` of `db`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn weight_grad_rows(
    simd: Simd,
    dg: &[f32],
    hp: &[f32],
    h: usize,
    dw: Out,
    i0: usize,
    i1: usize,
    db: Option<Out>,
) {
    assert!(direct(simd, h));
    // SAFETY: as documented (`dw` is `[4H, H]`, `db` `[4H]`).
    unsafe { product_t_rows(simd, dg, 4 * h, hp, h, dw, i0, i1, db) }
}

/// Rows `i0..i1` of `dgᵀ · xs` (`[g, n]`) into `dw`: element `(i, j)` is the chain over `p < K`
/// of `dg[p·g + i] · xs[p·n + j]` from `+0.0` — the blocked GEMM's bits for that product, with
/// no packing. `dg` is `[K, g]`, `xs` `[K, n]`, `n` a multiple of `4·U` (see [`Simd::lanes`]).
/// With `db`, also adds each column `i` of `dg` (`i0 ≤ i < i1`), row by row in order, to
/// `db[i]` (see [`weight_grad_rows`]).
///
/// # Safety
/// `dw` holds `g·n` elements, `db` (if any) `g`, and no other task writes rows `i0..i1` of `dw`
/// or elements `i0..i1` of `db`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product_t_rows(
    simd: Simd,
    dg: &[f32],
    g: usize,
    xs: &[f32],
    n: usize,
    dw: Out,
    i0: usize,
    i1: usize,
    db: Option<Out>,
) {
    let k = xs.len() / n.max(1);
    assert!(
        n.is_multiple_of(NV * simd.lanes())
            && dg.len() == k * g
            && xs.len() == k * n
            && i0 <= i1
            && i1 <= g
    );
    // SAFETY: `Simd::detect` found the features; sizes asserted, `dw` and `db` as documented.
    unsafe { dw_simd(simd, dg, g, xs, n, k, dw, i0, i1, db) }
}

/// See [`product_t_rows`] (`g4` is its `g`, `h` its `n`).
///
/// # Safety
/// As [`product_t_rows`], sizes checked there.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dw_body<const U: usize, const MR: usize>(
    dg: &[f32],
    g4: usize,
    hp: &[f32],
    h: usize,
    k: usize,
    dw: Out,
    i0: usize,
    i1: usize,
    db: Option<Out>,
    tile: TileFn,
) {
    let q = NV * U;
    if k == 0 {
        for i in i0..i1 {
            // SAFETY: row i is this task's.
            unsafe { core::ptr::write_bytes(dw.0.add(i * h), 0, h) };
        }
        return;
    }
    let kcb = KB / U;
    // The block of `hp` (kc rows of q) copied contiguous: in place its rows `h·4` bytes apart
    // crowd a few L1 sets (with `dg`'s lines) and left it in L2.
    let Ok(mut blk) = Packed::new(kcb.min(k) * q) else {
        // No memory for 16 KiB: read `hp` in place (the same bits).
        // SAFETY: forwarded (the caller's contract).
        unsafe { dw_blocks::<U, MR>(dg, g4, hp, h, k, dw, i0, i1, tile, None) };
        // SAFETY: forwarded (the caller's contract).
        return unsafe { col_sums(dg, g4, i0, i1, db) };
    };
    // `dg`'s block regrouped (see `dw_packed`): read in place, a tile's broadcasts came from
    // L2 (~80 % of the FMA rate).
    let Ok(mut at) = Packed::new(kcb.min(k) * (i1 - i0).next_multiple_of(DW_GROUP)) else {
        // SAFETY: forwarded (the caller's contract).
        unsafe { dw_blocks::<U, MR>(dg, g4, hp, h, k, dw, i0, i1, tile, Some(&mut blk)) };
        // SAFETY: forwarded (the caller's contract).
        return unsafe { col_sums(dg, g4, i0, i1, db) };
    };
    // SAFETY: forwarded (the caller's contract).
    unsafe { dw_packed::<U, MR>(dg, g4, hp, h, k, dw, i0, i1, db, tile, &mut blk, &mut at) }
}

/// `db[i] += dg[p·g4 + i]` for every row `p` in order, `i0 ≤ i < i1` (nothing without `db`).
///
/// # Safety
/// `db` holds at least `i1` elements and no other task touches `i0..i1`.
#[inline(always)]
unsafe fn col_sums(dg: &[f32], g4: usize, i0: usize, i1: usize, db: Option<Out>) {
    let Some(db) = db else { return };
    // SAFETY: elements i0..i1 are this task's (the caller's contract).
    let d = unsafe { core::slice::from_raw_parts_mut(db.at(i0), i1 - i0) };
    for row in dg.chunks_exact(g4) {
        for (d, &v) in d.iter_mut().zip(&row[i0..i1]) {
            *d += v;
        }
    }
}

/// Columns of `dg` per group in [`dw_packed`]'s copy: whole row tiles of either instruction
/// set (4 and 3 rows), a group's block (`kc` steps of 24: 6 KiB with AVX-512, 12 KiB with
/// AVX2) in L1 beside `hp`'s (16 KiB)
/// while its tiles run.
const DW_GROUP: usize = 24;

/// [`dw_body`] with both operands copied per K block of `kc` steps: `at` holds `dg`'s columns
/// `i0..i1` of the block in groups of [`DW_GROUP`] (group `m`'s step `p` at `(m·kc + p)·24`:
/// a tile's broadcasts one short run per step, the steps 96 bytes apart; in place they were
/// `g4·4` bytes apart, 2 KiB at H = 128, all in two L1 sets, so read from L2), `blk` `hp`'s
/// block of `4·U` columns. Every element is still one chain over `p` in increasing order,
/// continued across the blocks (`init`).
///
/// # Safety
/// As [`dw_body`]; `blk` holds `kcb · 4·U` and `at` at least `kcb · (i1 − i0)` rounded up to
/// whole groups, `kcb ≥ 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dw_packed<const U: usize, const MR: usize>(
    dg: &[f32],
    g4: usize,
    hp: &[f32],
    h: usize,
    k: usize,
    dw: Out,
    i0: usize,
    i1: usize,
    db: Option<Out>,
    tile: TileFn,
    blk: &mut Packed,
    at: &mut Packed,
) {
    const { assert!(DW_GROUP.is_multiple_of(MR)) };
    let q = NV * U;
    let kcb = blk.as_slice().len() / q;
    let n = i1 - i0;
    assert!(kcb > 0 && at.as_slice().len() >= kcb * n.next_multiple_of(DW_GROUP));
    for p0 in (0..k).step_by(kcb) {
        let kc = kcb.min(k - p0);
        let a = at.as_mut_slice();
        // Group by group, each written in order (one stream of stores; by steps, every step's
        // row scattered its stores over all the groups' lines).
        for m in 0..n.div_ceil(DW_GROUP) {
            let (c0, w) = (i0 + m * DW_GROUP, DW_GROUP.min(n - m * DW_GROUP));
            let dst = &mut a[m * kc * DW_GROUP..][..kc * DW_GROUP];
            // The group's running column sums (with `db`), in registers across the steps.
            let mut sum = [0f32; DW_GROUP];
            if let Some(db) = db {
                // SAFETY: elements c0..c0+w of `db` are this task's (the caller's contract).
                sum[..w].copy_from_slice(unsafe { core::slice::from_raw_parts(db.at(c0), w) });
            }
            if w == DW_GROUP {
                for (p, d) in dst.chunks_exact_mut(DW_GROUP).enumerate() {
                    // Fixed-size copies: a few vector moves, no `memcpy` call.
                    let d: &mut [f32; DW_GROUP] = d.try_into().unwrap();
                    // The sums take the loaded registers: read back from `d`, every row's adds
                    // waited on store forwarding (a 512 × 128 × 256 product with the bias
                    // 159.5 µs, 143 µs now, as without it).
                    let v: [f32; DW_GROUP] =
                        dg[(p0 + p) * g4 + c0..][..DW_GROUP].try_into().unwrap();
                    *d = v;
                    if db.is_some() {
                        for (s, v) in sum.iter_mut().zip(v) {
                            *s += v;
                        }
                    }
                }
            } else {
                for (p, d) in dst.chunks_exact_mut(DW_GROUP).enumerate() {
                    d[..w].copy_from_slice(&dg[(p0 + p) * g4 + c0..][..w]);
                    if db.is_some() {
                        for (s, &v) in sum[..w].iter_mut().zip(&d[..w]) {
                            *s += v;
                        }
                    }
                }
            }
            if let Some(db) = db {
                // SAFETY: as above.
                unsafe { db.put(c0, &sum[..w]) };
            }
        }
        let a = at.as_slice().as_ptr();
        for j0 in (0..h).step_by(q) {
            let b = blk.as_mut_slice();
            for (p, line) in b.chunks_exact_mut(q).take(kc).enumerate() {
                line.copy_from_slice(&hp[(p0 + p) * h + j0..][..q]);
            }
            let b = b.as_ptr();
            let mut i = i0;
            while i < i1 {
                let mr = MR.min(i1 - i);
                let (m, c) = ((i - i0) / DW_GROUP, (i - i0) % DW_GROUP);
                // SAFETY: group m's kc steps hold columns c..c+mr (tiles start at multiples of
                // MR, which divides the group), written just above; `b` kc rows of q; `dw`
                // rows i..i+mr, columns j0..j0+q are this task's, written by the first block
                // (init false) before the later ones read them.
                unsafe {
                    tile(
                        mr,
                        kc,
                        a.add(m * kc * DW_GROUP + c),
                        1,
                        DW_GROUP,
                        b,
                        q,
                        dw.0.add(i * h + j0),
                        h,
                        U,
                        p0 > 0,
                    );
                }
                i += mr;
            }
        }
    }
}

/// [`dw_body`]'s loops, the `hp` blocks copied into `blk` when given.
///
/// # Safety
/// As [`dw_body`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dw_blocks<const U: usize, const MR: usize>(
    dg: &[f32],
    g4: usize,
    hp: &[f32],
    h: usize,
    k: usize,
    dw: Out,
    i0: usize,
    i1: usize,
    tile: TileFn,
    mut blk: Option<&mut Packed>,
) {
    let q = NV * U;
    let kcb = match &blk {
        Some(b) => b.as_slice().len() / q,
        None => KC,
    };
    for j0 in (0..h).step_by(q) {
        for p0 in (0..k).step_by(kcb) {
            let kc = kcb.min(k - p0);
            let (b, bks) = match blk.as_deref_mut() {
                Some(b) => {
                    let b = b.as_mut_slice();
                    for (p, line) in b.chunks_exact_mut(q).take(kc).enumerate() {
                        line.copy_from_slice(&hp[(p0 + p) * h + j0..][..q]);
                    }
                    (b.as_ptr(), q)
                }
                None => (hp[p0 * h + j0..].as_ptr(), h),
            };
            let mut i = i0;
            while i < i1 {
                let mr = MR.min(i1 - i);
                // SAFETY: `dg` rows p0..p0+kc hold columns i..i+mr, `b` kc rows of q from
                // `bks` apart (hp's columns j0..j0+q, q divides h); `dw` rows i..i+mr, columns
                // j0..j0+q are this task's, written by the first block (init false) before
                // the later ones read them.
                unsafe {
                    tile(
                        mr,
                        kc,
                        dg.as_ptr().add(p0 * g4 + i),
                        1,
                        g4,
                        b,
                        bks,
                        dw.0.add(i * h + j0),
                        h,
                        U,
                        p0 > 0,
                    );
                }
                i += mr;
            }
        }
    }
}

/// The gates' gradient of one row at one step (the GEMM path's formulas and order); `dc`
/// becomes the previous step's cell-state gradient.
#[inline(always)]
fn gates_grad(
    gy: &[f32],
    dh: &[f32],
    dc: &mut [f32],
    a: &[f32],
    cprev: &[f32],
    tcs: &[f32],
    dg: &mut [f32],
) {
    let h = gy.len();
    let (ai, rest) = a.split_at(h);
    let (af, rest) = rest.split_at(h);
    let (ag, ao) = rest.split_at(h);
    let (di, rest) = dg.split_at_mut(h);
    let (df, rest) = rest.split_at_mut(h);
    let (dgg, dout) = rest.split_at_mut(h);
    let (dh, dc, cprev, tcs, ao, dout) = (
        &dh[..h],
        &mut dc[..h],
        &cprev[..h],
        &tcs[..h],
        &ao[..h],
        &mut dout[..h],
    );
    for j in 0..h {
        let (i, f, g, o) = (ai[j], af[j], ag[j], ao[j]);
        let dht = gy[j] + dh[j];
        let tc = tcs[j];
        let dct = dc[j] + (dht * o) * (1.0 - tc * tc);
        dc[j] = dct * f;
        di[j] = (dct * g) * ((1.0 - i) * i);
        df[j] = (dct * cprev[j]) * ((1.0 - f) * f);
        dgg[j] = (dct * i) * (1.0 - g * g);
        dout[j] = (dht * tc) * ((1.0 - o) * o);
    }
}

/// A vector of `n` elements whose contents are unspecified (reused storage or zeros), for
/// buffers the kernels overwrite completely.
///
/// # Errors
/// [`Error::OutOfMemory`] if the allocation fails.
pub(crate) fn scratch(n: usize) -> Result<Vec<f32>> {
    let reused = POOL.with(|p| {
        let mut p = p.borrow_mut();
        let i = (0..p.len())
            .filter(|&i| p[i].capacity() >= n)
            .min_by_key(|&i| p[i].capacity())?;
        Some(p.swap_remove(i))
    });
    match reused {
        Some(mut v) => {
            v.truncate(n);
            v.resize(n, 0.0);
            Ok(v)
        }
        None => crate::try_filled_vec("lstm_layer", n, 0f32),
    }
}

/// Gives a [`scratch`] buffer back for reuse on this thread.
pub(crate) fn recycle(v: Vec<f32>) {
    const KEEP: usize = 16;
    const MAX_BYTES: usize = 64 << 20;
    if v.capacity() * 4 > MAX_BYTES || v.capacity() == 0 {
        return;
    }
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEEP {
            p.push(v);
        } else if let Some(i) = (0..p.len()).min_by_key(|&i| p[i].capacity())
            && p[i].capacity() < v.capacity()
        {
            p[i] = v;
        }
    });
}

thread_local! {
    /// The saved activations of a layer are a few hundred KiB each; training allocates the
    /// same sizes every step, and fresh buffers cost zeroing (or page faults) every time.
    static POOL: core::cell::RefCell<Vec<Vec<f32>>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// An `OutOfMemory` error for the layer.
#[allow(dead_code)]
pub(crate) fn oom(bytes: usize) -> Error {
    Error::OutOfMemory {
        op: "lstm_layer",
        bytes: bytes as u128,
    }
}

/// Rows `r0..r1` of `x · Wᵀ`, then `+ bias` (one more rounding, as `linear`): `x` is `[M, k]`,
/// `wt` [`pack_rows`]' panels of `W` `[g, k]`, `out` `[M, g]`. Element `(r, j)` is the chain
/// over `p < k` of `x[r·k + p] · W[j·k + p]` from `+0.0` — the blocked GEMM's bits.
///
/// # Safety
/// `out` holds `M·g` elements and no other task writes rows `r0..r1`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn project_rows(
    simd: Simd,
    x: &[f32],
    k: usize,
    wt: &Packed,
    g: usize,
    bias: Option<&[f32]>,
    out: Out,
    r0: usize,
    r1: usize,
) {
    let q = NV * simd.lanes();
    assert!(
        g.is_multiple_of(q)
            && wt.as_slice().len() == g * k
            && r0 <= r1
            && r1 * k <= x.len()
            && bias.is_none_or(|b| b.len() == g)
    );
    // SAFETY: `Simd::detect` found the features; sizes asserted, `out` as documented.
    unsafe { project_simd(simd, x, k, wt.as_slice(), g, bias, out, r0, r1) }
}

/// See [`project_rows`].
///
/// # Safety
/// As [`project_rows`], sizes checked there.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn project_body<const U: usize, const MR: usize>(
    x: &[f32],
    k: usize,
    wt: &[f32],
    g: usize,
    bias: Option<&[f32]>,
    out: Out,
    r0: usize,
    r1: usize,
    tile: TileFn,
) {
    let q = NV * U;
    for t in 0..g / q {
        let panel = wt[t * k * q..].as_ptr();
        let mut i = r0;
        while i < r1 {
            let mr = MR.min(r1 - i);
            // SAFETY: rows i..i+mr of `x` hold k values, the panel k steps of q; `out` rows
            // i..i+mr, columns t·q..(t+1)·q are this task's.
            unsafe {
                tile(
                    mr,
                    k,
                    x.as_ptr().add(i * k),
                    k,
                    1,
                    panel,
                    q,
                    out.0.add(i * g + t * q),
                    g,
                    U,
                    false,
                )
            };
            // The bias while the tile's outputs are still in L1 (one more rounding after
            // the whole chain, as before).
            if let Some(b) = bias {
                let b = &b[t * q..][..q];
                for r in i..i + mr {
                    // SAFETY: row r, columns t·q..(t+1)·q are this task's, written just above.
                    let row =
                        unsafe { core::slice::from_raw_parts_mut(out.0.add(r * g + t * q), q) };
                    for (x, &b) in row.iter_mut().zip(b) {
                        *x += b;
                    }
                }
            }
            i += mr;
        }
    }
}

/// Rows `r0..r1` of `dg · W` into `out` `[M, n]`: `dg` is `[M, g]`, `W` `[g, n]` as
/// [`pack_cols`]' panels (`n` a multiple of `4·U`). Element `(r, c)` is the chain over `j < g`
/// of `dg[r·g + j] · W[j·n + c]` from `+0.0` — the blocked GEMM's bits.
///
/// # Safety
/// `out` holds `M·n` elements and no other task writes rows `r0..r1`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product_rows(
    simd: Simd,
    dg: &[f32],
    g: usize,
    w: &Packed,
    n: usize,
    out: Out,
    r0: usize,
    r1: usize,
) {
    let w = w.as_slice();
    assert!(
        n.is_multiple_of(NV * simd.lanes()) && w.len() == g * n && r0 <= r1 && r1 * g <= dg.len()
    );
    // SAFETY: `Simd::detect` found the features; sizes asserted, `out` as documented.
    unsafe { product_simd(simd, dg, g, w, n, out, r0, r1) }
}

/// See [`product_rows`].
///
/// # Safety
/// As [`product_rows`], sizes checked there.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn product_body<const U: usize, const MR: usize>(
    dg: &[f32],
    g: usize,
    w: &[f32],
    n: usize,
    out: Out,
    r0: usize,
    r1: usize,
    tile: TileFn,
) {
    let q = NV * U;
    if g == 0 {
        // No K block runs: the empty chains' +0.0.
        for i in r0..r1 {
            // SAFETY: row i is this task's.
            unsafe { core::ptr::write_bytes(out.0.add(i * n), 0, n) };
        }
        return;
    }
    for t in 0..n / q {
        let panel = w[t * g * q..].as_ptr();
        // K blocks of the panel that stay in L1 across the row tiles (see [`KB`]); each
        // continues the chains the block before stored.
        for j0 in (0..g).step_by(KB / U) {
            let kc = (KB / U).min(g - j0);
            let mut i = r0;
            while i < r1 {
                let mr = MR.min(r1 - i);
                // SAFETY: rows i..i+mr of `dg` hold g values (columns j0..j0+kc), the panel g
                // rows of q; `out` rows i..i+mr, columns t·q..(t+1)·q, are this task's,
                // written by the block before when j0 > 0.
                unsafe {
                    tile(
                        mr,
                        kc,
                        dg.as_ptr().add(i * g + j0),
                        g,
                        1,
                        panel.add(j0 * q),
                        q,
                        out.0.add(i * n + t * q),
                        n,
                        U,
                        j0 > 0,
                    )
                };
                i += mr;
            }
        }
    }
}

/// Column blocks `b0..b1` (`4·U` columns each) of `(dgᵀ · xs)ᵀ` (`[n, g]`) into `out`:
/// element `(c, i)` is the chain over `p < K` of `dg[p·g + i] · xs[p·n + c]` from `+0.0` — the
/// bits of [`product_t_rows`]' element `(i, c)`, for any `n` (`g` a multiple of `4·U`).
///
/// # Safety
/// `out` holds `n·g` elements and no other task writes those column blocks.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product_t_cols(
    simd: Simd,
    dg: &[f32],
    g: usize,
    xs: &[f32],
    n: usize,
    out: Out,
    b0: usize,
    b1: usize,
) {
    let q = NV * simd.lanes();
    let k = xs.len() / n.max(1);
    assert!(g.is_multiple_of(q) && dg.len() == k * g && xs.len() == k * n && b0 <= b1);
    assert!(b1 * q <= g);
    // SAFETY: `Simd::detect` found the features; sizes asserted, `out` as documented.
    unsafe { cols_simd(simd, dg, g, xs, n, k, out, b0, b1) }
}

/// See [`product_t_cols`].
///
/// # Safety
/// As [`product_t_cols`], sizes checked there.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn cols_body<const U: usize, const MR: usize>(
    dg: &[f32],
    g: usize,
    xs: &[f32],
    n: usize,
    k: usize,
    out: Out,
    b0: usize,
    b1: usize,
    tile: TileFn,
) {
    let q = NV * U;
    for blk in b0..b1 {
        let i0 = blk * q;
        let mut c = 0;
        while c < n {
            let mr = MR.min(n - c);
            // SAFETY: `xs` rows of n hold columns c..c+mr, `dg` rows of g columns i0..i0+q;
            // `out` rows c..c+mr, those columns, are this task's.
            unsafe {
                tile(
                    mr,
                    k,
                    xs.as_ptr().add(c),
                    1,
                    n,
                    dg.as_ptr().add(i0),
                    g,
                    out.0.add(c * g + i0),
                    g,
                    U,
                    false,
                )
            };
            c += mr;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fast;

    /// Distance in units in the last place between `got` and the f64 value `want`, measured in
    /// the spacing of f32 at `want`'s rounded value.
    fn ulps(got: f32, want: f64) -> f64 {
        let r = want as f32;
        let spacing = f32::from_bits(r.abs().to_bits() + 1) - r.abs();
        (got as f64 - want).abs() / spacing as f64
    }

    /// Every 61st f32 of `[lo, hi]` (about 36 million values over the sigmoid range).
    fn sample(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
        let neg = (0..=lo.to_bits()).step_by(61).map(f32::from_bits);
        let pos = (0..=hi.to_bits()).step_by(61).map(f32::from_bits);
        neg.map(|x| -x).chain(pos)
    }

    #[test]
    fn sigmoid_within_4_ulp_above_minus_88_3() {
        let mut worst = (0.0f64, 0.0f32);
        for x in sample(88.3, 20.0).chain([-88.3, 20.0, 1.25, -1.25, 1.249_999_9, -1.249_999_9]) {
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            let e = ulps(fast::sigmoid(x), want);
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(worst.0 <= 4.0, "sigmoid: {} ulp at {}", worst.0, worst.1);
        // Above 20 the true value rounds to 1; far below, the clamped exp leaves a tiny floor.
        for x in [20.0f32, 30.0, 1e6, f32::INFINITY] {
            assert_eq!(fast::sigmoid(x), 1.0, "{x}");
        }
        for x in [-88.4f32, -100.0, -1e6, f32::NEG_INFINITY] {
            let y = fast::sigmoid(x);
            assert!((0.0..5e-39).contains(&y), "{x} -> {y}");
        }
        assert!(fast::sigmoid(f32::NAN).is_nan());
    }

    #[test]
    fn tanh_close_and_odd() {
        let mut worst = (0.0f64, 0.0f32);
        for x in sample(10.0, 10.0) {
            let want = (x as f64).tanh();
            let e = ulps(fast::tanh(x), want);
            if e > worst.0 {
                worst = (e, x);
            }
            // Odd, bit for bit, the sign of zero included.
            assert_eq!(fast::tanh(-x).to_bits(), (-fast::tanh(x)).to_bits(), "{x}");
        }
        assert_eq!(fast::tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(fast::tanh(0.0).to_bits(), 0);
        assert!(worst.0 <= 4.0, "tanh: {} ulp at {}", worst.0, worst.1);
        assert_eq!(fast::tanh(1e6), 1.0);
        assert_eq!(fast::tanh(-1e6), -1.0);
        assert!(fast::tanh(f32::NAN).is_nan());
    }

    #[test]
    fn runs_equal_element_by_element() {
        let v: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 150.0)
            .chain([f32::NAN, 0.7, -0.2, 0.1])
            .collect();
        let mut a = v.clone();
        fast::tanh_runs::<16>(&mut a);
        let mut b = v.clone();
        fast::sigmoid_runs::<8>(&mut b);
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(a[i].to_bits(), fast::tanh(x).to_bits(), "tanh {x}");
            assert_eq!(b[i].to_bits(), fast::sigmoid(x).to_bits(), "sigmoid {x}");
        }
    }
}
