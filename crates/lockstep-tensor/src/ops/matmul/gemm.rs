//! The blocked GEMM driver: packing, the (KC, MC, NC) loops, the parallel split of output
//! tiles, and the split-K variants for skinny shapes.
//!
//! # Order of operations
//! Every element `C[i][j]` of the blocked kernel is the chain
//! `c = fma(A[i][p], B[p][j], c)` for `p = 0, …, k-1` in increasing order, starting from `+0.0`:
//! the first KC block starts its micro-kernel from zero, each later block reloads the value the
//! previous block stored and continues the chain. Threads only decide which output tiles they
//! compute, never how one element is computed, so the bits depend on `(m, n, k)` and the data
//! only — not on the thread count, not on the tile partition, not even on KC/MC/NC/MR/NR or the
//! instruction set (scalar `mul_add`, AVX2 and AVX-512 all round each fused step once).
//!
//! The deterministic split-K variant cuts K into a number of ranges fixed by the shape
//! ([`splitk_parts`]) and adds the partial products in range order, so its bits differ from the
//! blocked kernel's but still depend on the shape only. The completion-order variant adds the
//! partial products in the order the threads finish.

use super::GemmFloat;
use super::kernel::{Isa, Kernel, prefetch};
use crate::error::{Error, Result};
use crate::ops::SyncPtr;
use crate::threads::Par;
use rayon::prelude::*;
use std::sync::Mutex;

/// Strides of a matrix operand in elements: `(row stride, column stride)`.
pub type Strides = (usize, usize);

/// Shapes with `m·n` at most this many outputs may use split-K (see [`is_skinny`]).
pub const SKINNY_MAX_MN: usize = 128 * 256;
/// ... and `k` at least this long.
pub const SKINNY_MIN_K: usize = 2048;
/// Deterministic split-K: one K range per this many steps of K (rounded up)…
pub const SPLITK_RANGE_K: usize = 4096;
/// … and at most this many ranges.
pub const SPLITK_MAX_PARTS: usize = 16;

/// Whether split-K pays for a shape: few outputs (too few tiles to keep threads busy) and a long
/// K. Depends on the shape only.
pub fn is_skinny(m: usize, n: usize, k: usize) -> bool {
    m.saturating_mul(n) <= SKINNY_MAX_MN && k >= SKINNY_MIN_K && k >= 4 * m.max(n)
}

/// Products of at most this many multiply-adds (`m·n·k`) run on the calling thread: below it a
/// hop into the pool (waking workers, waiting on a latch) costs more than the threads save, and
/// on a busy machine a woken worker may wait a whole time slice. A function of the shape only;
/// it cannot change the bits (threads only decide which tiles they compute). 2²¹ until
/// 2026-12-04: at 2²¹ time_sequence_prediction's 1 M multiply-add f64 cell products (≈ 45 µs)
/// ran on one thread while the other spun between the cell ops; split, its 2-thread run took
/// 22 % less wall time (2.33–2.53 s against 2.98–3.46 s, six interleaved pairs), mnist and vae
/// 3–10 % less, dcgan, mlp, cnn and lstm steps within noise.
pub const PAR_MIN_WORK: usize = 1 << 19;

/// The number of K ranges of the deterministic split-K for `k` (a function of `k` only).
pub fn splitk_parts(k: usize) -> usize {
    k.div_ceil(SPLITK_RANGE_K).clamp(1, SPLITK_MAX_PARTS)
}

/// Parallel products of at most this many multiply-adds (`m·n·k`) run as one tile per thread,
/// each packing its own blocks (see [`blocked`]).
const SMALL_WORK: usize = 1 << 24;
/// At most this many lines in a direct kernel's prefetch list (one micro-tile's share).
const PF_MAX: usize = 512;
/// A direct A larger than this many bytes is read once per column of tiles from memory, not
/// from cache: the columns are then as few as the threads.
const DIRECT_A_SHARED: usize = 1 << 20;

/// Packing buffers kept by each calling thread for its next product (a training loop repeats
/// the same shapes; fresh buffers would cost page faults and zeroing on every call). Buffers
/// over [`KEEP_BYTES`] are freed instead.
const KEEP_BYTES: usize = 64 << 20;
/// At most this many spare buffers per thread (packed A, packed B, a tile's A, B and C blocks).
const SPARES: usize = 5;

thread_local! {
    static SPARE: core::cell::RefCell<Vec<Vec<u64>>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// A 64-byte aligned packing buffer of `len` elements of `T` (over `u64` storage, reused from
/// [`SPARE`]; `T` is `f32` or `f64`, for which every bit pattern is a value). Its contents are
/// unspecified until written: the packing writes every element, padding included.
struct Aligned<T> {
    buf: Vec<u64>,
    off: usize,
    len: usize,
    _t: core::marker::PhantomData<T>,
}

impl<T: GemmFloat> Aligned<T> {
    fn new(len: usize) -> Self {
        let words = (len * core::mem::size_of::<T>()).div_ceil(8) + 8;
        // The smallest spare that is large enough, else the largest: a product takes buffers
        // of very different sizes (whole packed operands, per-tile blocks), and growing a small
        // one costs page faults and zeroing on every call.
        let mut buf = SPARE
            .with(|s| {
                let mut s = s.borrow_mut();
                let fits = (0..s.len())
                    .filter(|&i| s[i].len() >= words)
                    .min_by_key(|&i| s[i].len());
                fits.or_else(|| (0..s.len()).max_by_key(|&i| s[i].len()))
                    .map(|i| s.swap_remove(i))
            })
            .unwrap_or_default();
        if buf.len() < words {
            buf.resize(words, 0);
        }
        let addr = buf.as_ptr() as usize;
        let off = addr.next_multiple_of(64) - addr;
        Self {
            buf,
            off,
            len,
            _t: core::marker::PhantomData,
        }
    }
    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: `off + len * size_of::<T>()` bytes lie inside `buf` (8 spare words cover the
        // alignment offset); the storage is initialised, 64-byte aligned at `off`, and any bit
        // pattern is a valid f32/f64.
        unsafe {
            core::slice::from_raw_parts_mut(
                (self.buf.as_mut_ptr() as *mut u8).add(self.off) as *mut T,
                self.len,
            )
        }
    }
    fn as_mut_ptr(&mut self) -> *mut T {
        self.as_mut_slice().as_mut_ptr()
    }
    fn as_ptr(&self) -> *const T {
        // SAFETY: `off` is inside `buf` (see `as_mut_slice`).
        unsafe { (self.buf.as_ptr() as *const u8).add(self.off) as *const T }
    }
}

impl<T> Drop for Aligned<T> {
    fn drop(&mut self) {
        let buf = core::mem::take(&mut self.buf);
        if buf.len() * 8 <= KEEP_BYTES {
            SPARE.with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARES {
                    s.push(buf);
                } else if let Some(i) = (0..s.len()).min_by_key(|&i| s[i].len()) {
                    // Full: keep the larger buffers.
                    if s[i].len() < buf.len() {
                        s[i] = buf;
                    }
                }
            });
        }
    }
}

fn bad(arg: &'static str, reason: String) -> Error {
    Error::InvalidArgument {
        op: "gemm",
        arg,
        reason,
    }
}

/// Checks that a `rows × cols` operand with strides `s` lies inside `len` elements.
fn check_operand(
    arg: &'static str,
    rows: usize,
    cols: usize,
    s: Strides,
    len: usize,
) -> Result<()> {
    operand_fits("gemm", arg, rows, cols, s, len)
}

/// Checks that `op`'s `rows × cols` operand `arg` with strides `s` lies inside `len`
/// elements, or an `InvalidArgument` naming both.
pub(super) fn operand_fits(
    op: &'static str,
    arg: &'static str,
    rows: usize,
    cols: usize,
    s: Strides,
    len: usize,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let last = (rows - 1)
        .checked_mul(s.0)
        .and_then(|r| (cols - 1).checked_mul(s.1).and_then(|c| r.checked_add(c)));
    match last {
        Some(l) if l < len => Ok(()),
        _ => Err(Error::InvalidArgument {
            op,
            arg,
            reason: format!(
                "a {rows}×{cols} matrix with strides {s:?} does not fit in {len} elements"
            ),
        }),
    }
}

/// Checks that no two elements of the output share a memory location.
fn check_no_overlap(m: usize, n: usize, s: Strides) -> Result<()> {
    let mut dims = vec![(s.0, m), (s.1, n)];
    dims.retain(|&(_, d)| d > 1);
    dims.sort_unstable();
    let ok = match dims[..] {
        [] => true,
        [(st, _)] => st >= 1,
        [(s0, d0), (s1, _)] => s0 >= 1 && s0.checked_mul(d0).is_some_and(|x| s1 >= x),
        _ => unreachable!(),
    };
    if ok {
        Ok(())
    } else {
        Err(bad(
            "c_strides",
            format!("strides {s:?} make elements of the {m}×{n} output overlap"),
        ))
    }
}

/// `C = A·B` for an `m×k` A and a `k×n` B (each with its own strides, so transposed operands
/// need no copy), overwriting the `m×n` C (beta = 0: C's previous values are never read, NaNs
/// included). Uses the fastest micro-kernel the CPU has, and `par`'s threads over output tiles.
///
/// Bits depend on `(m, n, k)` and the values only (see the module docs); `k == 0` gives zeros.
///
/// # Errors
/// If an operand does not fit in its slice, or C's strides make outputs overlap.
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: GemmFloat>(
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    a_strides: Strides,
    b: &[T],
    b_strides: Strides,
    c: &mut [T],
    c_strides: Strides,
    par: &Par,
) -> Result<()> {
    gemm_with(
        Isa::best(),
        m,
        n,
        k,
        a,
        a_strides,
        b,
        b_strides,
        c,
        c_strides,
        par,
    )
}

/// [`gemm()`] with a chosen instruction set (tests and benches compare them).
///
/// # Errors
/// As [`gemm()`], and if the CPU does not support `isa`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_with<T: GemmFloat>(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    a_strides: Strides,
    b: &[T],
    b_strides: Strides,
    c: &mut [T],
    c_strides: Strides,
    par: &Par,
) -> Result<()> {
    if !isa.available() {
        return Err(bad("isa", format!("this CPU does not support {isa:?}")));
    }
    check_operand("a", m, k, a_strides, a.len())?;
    check_operand("b", k, n, b_strides, b.len())?;
    check_operand("c", m, n, c_strides, c.len())?;
    check_no_overlap(m, n, c_strides)?;
    let p = Problem {
        m,
        n,
        k,
        a,
        sa: a_strides,
        b,
        sb: b_strides,
    };
    blocked(
        &T::kernel(isa),
        &p,
        SyncPtr(c.as_mut_ptr()),
        c_strides,
        Some(par),
    );
    Ok(())
}

/// A `k × n` right-hand operand packed once for many products `C = A·B` with the same B (the
/// recurrent weights of an RNN, used at every time step): [`gemm_packed_b`] then skips B's
/// packing. The layout is the one [`gemm()`] packs B into, so the bits are [`gemm()`]'s.
pub struct PackedB<T: GemmFloat> {
    isa: Isa,
    k: usize,
    n: usize,
    buf: Aligned<T>,
}

impl<T: GemmFloat> PackedB<T> {
    /// Packs `b` (`k × n`, with strides `b_strides`) for the fastest instruction set.
    ///
    /// # Errors
    /// If B does not fit in its slice.
    pub fn new(k: usize, n: usize, b: &[T], b_strides: Strides) -> Result<Self> {
        check_operand("b", k, n, b_strides, b.len())?;
        let isa = Isa::best();
        let (nr, kisa) = (T::kernel(isa).nr, T::kernel(isa).isa);
        let p = Problem {
            m: 0,
            n,
            k,
            a: &[],
            sa: (0, 0),
            b,
            sb: b_strides,
        };
        let buf = pack_all(k, T::KC, n.div_ceil(nr), nr, None, |j0, p0, kc, d| {
            pack_b_panel(&p, nr, j0, p0, kc, d, kisa)
        });
        Ok(Self { isa, k, n, buf })
    }

    /// `(k, n)`.
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }
}

/// [`gemm()`] with a B packed by [`PackedB::new`]: `C = A·B` for an `m×k` A, the same bits.
///
/// # Errors
/// As [`gemm()`].
#[allow(clippy::too_many_arguments)]
pub fn gemm_packed_b<T: GemmFloat>(
    m: usize,
    a: &[T],
    a_strides: Strides,
    b: &PackedB<T>,
    c: &mut [T],
    c_strides: Strides,
    par: &Par,
) -> Result<()> {
    let (k, n) = (b.k, b.n);
    check_operand("a", m, k, a_strides, a.len())?;
    check_operand("c", m, n, c_strides, c.len())?;
    check_no_overlap(m, n, c_strides)?;
    let p = Problem {
        m,
        n,
        k,
        a,
        sa: a_strides,
        b: &[],
        sb: (0, 0),
    };
    blocked_with(
        &T::kernel(b.isa),
        &p,
        SyncPtr(c.as_mut_ptr()),
        c_strides,
        Some(par),
        Some(b.buf.as_ptr()),
    );
    Ok(())
}

/// The inputs of one product.
#[derive(Clone, Copy)]
pub(crate) struct Problem<'a, T> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: &'a [T],
    pub sa: Strides,
    pub b: &'a [T],
    pub sb: Strides,
}

impl<'a, T: GemmFloat> Problem<'a, T> {
    /// The same product restricted to K range `k0..k1` (`k0 < k1 <= k`, `m, n > 0`).
    fn k_range(&self, k0: usize, k1: usize) -> Self {
        Self {
            k: k1 - k0,
            a: &self.a[k0 * self.sa.1..],
            b: &self.b[k0 * self.sb.0..],
            ..*self
        }
    }
}

/// How many rows ahead a transposed A's panel packing fetches its source lines.
const PF_ROWS: usize = 24;

/// Packs the A block of rows `0..m`, columns `p0..p0+kc` into `dst` (`m_pad × kc`, panel by
/// panel: `dst[ip * mr * kc + p * mr + i]`), zero-padding rows past `m`. `isa`: the
/// instruction set of the kernel in use (the CPU has it), which the packing may use too.
fn pack_a_panel<T: GemmFloat>(
    p: &Problem<T>,
    mr: usize,
    i0: usize,
    p0: usize,
    kc: usize,
    dst: &mut [T],
    isa: Isa,
) {
    let (rs, cs) = p.sa;
    let rows = mr.min(p.m - i0);
    if rows < mr {
        dst.fill(T::ZERO);
    }
    // The last element read; the operand was checked to fit, this keeps the loop below sound.
    let last = (i0 + rows - 1) * rs + (p0 + kc - 1) * cs;
    assert!(last < p.a.len() && kc * mr <= dst.len());
    // A full panel of a row-major f32 A: transposed 16 (AVX-512) or 8 (AVX2) columns at a
    // time in registers (the scalar gather below moves one element per load and store). A
    // copy: the same bits.
    #[cfg(target_arch = "x86_64")]
    if cs == 1 && rows == mr && size_of::<T>() == 4 {
        // SAFETY: T is f32 (4 bytes: the GEMM takes f32 and f64 only), so the block is plain
        // 32-bit words; every read is at most `last` and every write below `kc * mr` (checked
        // above); the CPU has the kernel's instruction set.
        if unsafe { pack_transposed(isa, p.a.as_ptr().add(i0 * rs + p0), rs, dst, mr, kc) } {
            return;
        }
    }
    // A full panel of a row-major f64 A for the 6-row AVX2 kernel: transposed four columns at
    // a time in registers (the gather below moves one element per load and store; it was half
    // of the driver's time on the LSTM cells' products). A copy: the same bits.
    #[cfg(target_arch = "x86_64")]
    if cs == 1 && rows == 6 && mr == 6 && size_of::<T>() == 8 && isa == Isa::Avx2 {
        // SAFETY: the CPU has AVX2 (the kernel's instruction set); T is f64 (8 bytes: the GEMM
        // takes f32 and f64 only); every read is at most `last` and every write below
        // `kc * mr` (checked above).
        unsafe {
            pack_rows6_f64_avx2(
                p.a.as_ptr().add(i0 * rs + p0) as *const f64,
                rs,
                dst.as_mut_ptr() as *mut f64,
                kc,
            )
        };
        return;
    }
    // The same for the 12-row AVX-512 f64 kernel: three 4 × 4 blocks per four columns (the
    // gather was most of the driver's time on time_sequence_prediction's cell products).
    #[cfg(target_arch = "x86_64")]
    if cs == 1 && rows == 12 && mr == 12 && size_of::<T>() == 8 && isa == Isa::Avx512 {
        // SAFETY: the CPU has AVX-512F, hence AVX2 (the kernel's instruction set); T is f64
        // (8 bytes: the GEMM takes f32 and f64 only); every read is at most `last` and every
        // write below `kc * mr` (checked above).
        unsafe {
            pack_rows4_f64_avx2::<3>(
                p.a.as_ptr().add(i0 * rs + p0) as *const f64,
                rs,
                dst.as_mut_ptr() as *mut f64,
                kc,
            )
        };
        return;
    }
    let _ = isa;
    // Column by column: contiguous writes, `rows` read streams (or one, for a transposed A).
    // Raw pointers: checked indexing cost more than the copy itself.
    // SAFETY: every read is at most `last` (checked above) and every write below `kc * mr`.
    unsafe {
        let src = p.a.as_ptr().add(i0 * rs + p0 * cs);
        let d = dst.as_mut_ptr();
        // A transposed A's full panel: each column is `mr` contiguous elements, copied as
        // one fixed-size move (the loop below moves them one by one).
        match (rs, rows == mr, mr) {
            // Each step reads a new line (`cs` apart), from L2 or beyond: the line of the row
            // `PF_ROWS` steps ahead is fetched into L1 first (a hint, whatever the address).
            (1, true, 6) => (0..kc).for_each(|q| {
                prefetch(src.wrapping_add((q + PF_ROWS) * cs + 5), 0..1, true);
                copy_row::<T, 6>(src.add(q * cs), d.add(q * 6))
            }),
            (1, true, 12) => {
                (0..kc).for_each(|q| copy_row::<T, 12>(src.add(q * cs), d.add(q * 12)))
            }
            _ => {
                for q in 0..kc {
                    let (s, dq) = (src.add(q * cs), d.add(q * mr));
                    for i in 0..rows {
                        *dq.add(i) = *s.add(i * rs);
                    }
                }
            }
        }
    }
}

/// Packs `w` rows of 32-bit words, `kc` long and `rs` apart, column by column
/// (`dst[q * w + i] = src[i * rs + q]`) with `isa`'s register transposes, where it has one for
/// this `w` ([`pack_transposed_avx512`]: `w ≤ 32`; [`pack_transposed_avx2`]: `w < 8` or a
/// multiple of 8); returns whether it did (else nothing is written). A copy: the same bits.
///
/// # Safety
/// The CPU must have `isa`; `src` must hold `w` readable rows of `kc` 4-byte elements `rs`
/// apart; `T` must be 4 bytes (f32) and `dst` hold `kc * w` elements.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn pack_transposed<T>(
    isa: Isa,
    src: *const T,
    rs: usize,
    dst: &mut [T],
    w: usize,
    kc: usize,
) -> bool {
    debug_assert!(size_of::<T>() == 4 && kc * w <= dst.len());
    let (s, d) = (src as *const f32, dst.as_mut_ptr() as *mut f32);
    // SAFETY: as documented.
    unsafe {
        match isa {
            Isa::Avx512 if w <= 32 => pack_transposed_avx512(s, rs, d, w, kc),
            Isa::Avx2 if w < 8 || w.is_multiple_of(8) => pack_transposed_avx2(s, rs, d, w, kc),
            _ => return false,
        }
    }
    true
}

/// [`pack_transposed_avx512`] for AVX2: eight columns at a time, each group of up to eight
/// rows loaded as vectors (zeros for the missing ones) and transposed as an 8 × 8 block in
/// registers. `w` is below 8 (the 6-row A panel: each column stored as a whole vector, whose
/// tail the next column's store overwrites; the panel's last column exactly) or a multiple of
/// 8 (the 16-column B panel); the columns past the last multiple of 8 one by one. A copy: the
/// same bits as the scalar gather.
///
/// # Safety
/// The CPU must have AVX2; `w < 8` or a multiple of 8; `src` must hold `w` readable rows of
/// `kc` words `rs` apart, and `dst` `kc * w` writable words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_transposed_avx2(src: *const f32, rs: usize, dst: *mut f32, w: usize, kc: usize) {
    use core::arch::x86_64::*;
    debug_assert!(w < 8 || w.is_multiple_of(8));
    // The next panel's rows (callers pack panels in order), fetched into L1 a step at a time
    // while this one is packed: the loads below waited on L2 or L3 (most of this function's
    // time in a gpt step). A hint: past the operand it fetches nothing useful, never faults.
    let next = src.wrapping_add(w * rs);
    // SAFETY: as documented; loads stay inside the rows, stores inside the panel (a column's
    // whole-vector store only where it ends at or before the panel's end).
    unsafe {
        let mut q = 0;
        while q + 8 <= kc {
            for g0 in (0..w).step_by(8) {
                let rows = (w - g0).min(8);
                // Constant indices once unrolled: the block stays in registers.
                let mut r = [_mm256_setzero_ps(); 8];
                #[allow(clippy::needless_range_loop)]
                for i in 0..8 {
                    if i < rows {
                        r[i] = _mm256_loadu_ps(src.add((g0 + i) * rs + q));
                        prefetch(next.wrapping_add((g0 + i) * rs + q), 0..1, true);
                    }
                }
                let cols = super::kernel::x86::transpose8x8(r);
                for (c, col) in cols.into_iter().enumerate() {
                    let at = (q + c) * w + g0;
                    if rows == 8 || at + 8 <= kc * w {
                        // A short column's last lanes land in the next column's slots, which
                        // its own store (or the tail loop) writes after this one.
                        _mm256_storeu_ps(dst.add(at), col);
                    } else {
                        let mut v = [0f32; 8];
                        _mm256_storeu_ps(v.as_mut_ptr(), col);
                        core::ptr::copy_nonoverlapping(v.as_ptr(), dst.add(at), rows);
                    }
                }
            }
            q += 8;
        }
        for q in q..kc {
            for i in 0..w {
                *dst.add(q * w + i) = *src.add(i * rs + q);
            }
        }
    }
}

/// Packs 6 rows of f64, `kc` long and `rs` apart, column by column: `dst[q * 6 + i] =
/// src[i * rs + q]` (a row-major A panel for the 6-row kernels). Four columns at a time: rows
/// 0–3 transposed as a 4 × 4 block in registers, rows 4–5 interleaved in pairs; the columns
/// past the last multiple of 4 one by one. A copy: the same bits as the scalar gather.
///
/// # Safety
/// The CPU must have AVX2; `src` must hold 6 readable rows of `kc` elements `rs` apart, and
/// `dst` `kc * 6` writable elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_rows6_f64_avx2(src: *const f64, rs: usize, dst: *mut f64, kc: usize) {
    use core::arch::x86_64::*;
    // SAFETY: as documented; loads stay inside the rows and stores inside the panel.
    unsafe {
        let mut q = 0;
        while q + 4 <= kc {
            let r = |i: usize| _mm256_loadu_pd(src.add(i * rs + q));
            let cols = super::kernel::x86::transpose4x4_pd([r(0), r(1), r(2), r(3)]);
            // Rows 4 and 5 interleaved: u0 = (r4[0], r5[0], r4[2], r5[2]), u1 the odd columns.
            let (r4, r5) = (r(4), r(5));
            let u0 = _mm256_unpacklo_pd(r4, r5);
            let u1 = _mm256_unpackhi_pd(r4, r5);
            let d = dst.add(q * 6);
            // Column e: rows 0–3 at d + 6e, rows 4–5 at d + 6e + 4.
            for (e, col) in cols.into_iter().enumerate() {
                _mm256_storeu_pd(d.add(6 * e), col);
            }
            _mm_storeu_pd(d.add(4), _mm256_castpd256_pd128(u0));
            _mm_storeu_pd(d.add(10), _mm256_castpd256_pd128(u1));
            _mm_storeu_pd(d.add(16), _mm256_extractf128_pd::<1>(u0));
            _mm_storeu_pd(d.add(22), _mm256_extractf128_pd::<1>(u1));
            q += 4;
        }
        for q in q..kc {
            for i in 0..6 {
                *dst.add(q * 6 + i) = *src.add(i * rs + q);
            }
        }
    }
}

/// Packs `4·G` rows of f64, `kc` long and `rs` apart, column by column: `dst[q * 4G + i] =
/// src[i * rs + q]` (a row-major A panel for the 12-row AVX-512 kernel, `G = 3`). Four columns
/// at a time, each group of four rows transposed as a 4 × 4 block in registers; the columns
/// past the last multiple of 4 one by one. A copy: the same bits as the scalar gather.
///
/// # Safety
/// The CPU must have AVX2; `src` must hold `4·G` readable rows of `kc` elements `rs` apart,
/// and `dst` `kc * 4·G` writable elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_rows4_f64_avx2<const G: usize>(
    src: *const f64,
    rs: usize,
    dst: *mut f64,
    kc: usize,
) {
    use core::arch::x86_64::*;
    let w = 4 * G;
    // SAFETY: as documented; loads stay inside the rows and stores inside the panel.
    unsafe {
        let mut q = 0;
        while q + 4 <= kc {
            let d = dst.add(q * w);
            for g in 0..G {
                let r = |i: usize| _mm256_loadu_pd(src.add((4 * g + i) * rs + q));
                let cols = super::kernel::x86::transpose4x4_pd([r(0), r(1), r(2), r(3)]);
                // Column e's rows 4g–4g+3 at d + w·e + 4g.
                for (e, col) in cols.into_iter().enumerate() {
                    _mm256_storeu_pd(d.add(e * w + 4 * g), col);
                }
            }
            q += 4;
        }
        for q in q..kc {
            for i in 0..w {
                *dst.add(q * w + i) = *src.add(i * rs + q);
            }
        }
    }
}

/// Packs `w` (at most 32) rows of 32-bit words, `kc` long and `rs` apart, column by column:
/// `dst[q * w + i] = src[i * rs + q]` — a row-major A panel (`w = MR`) or a column-major B
/// panel (`w = NR`). Sixteen columns at a time: each group of up to sixteen rows loaded as
/// vectors (zeros for the missing ones), transposed as a 16 × 16 block in registers and stored
/// as one masked store per column; the columns past the last multiple of 16 one by one. A
/// copy: the same bits as the scalar gather.
///
/// # Safety
/// The CPU must have AVX-512F; `src` must hold `w` readable rows of `kc` words `rs` apart, and
/// `dst` `kc * w` writable words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_transposed_avx512(src: *const f32, rs: usize, dst: *mut f32, w: usize, kc: usize) {
    use core::arch::x86_64::*;
    debug_assert!(w <= 32);
    // SAFETY: as documented; loads and stores stay inside the rows and the panel.
    unsafe {
        let mut q = 0;
        while q + 16 <= kc {
            for g0 in (0..w).step_by(16) {
                let rows = (w - g0).min(16);
                // A loop of constant length with every index constant once unrolled: the
                // block stays in registers (a runtime-length fill went through the stack).
                let mut r = [_mm512_setzero_ps(); 16];
                #[allow(clippy::needless_range_loop)]
                for i in 0..16 {
                    if i < rows {
                        r[i] = _mm512_loadu_ps(src.add((g0 + i) * rs + q));
                    }
                }
                // 32-bit then 64-bit interleaves: u[4g + e], lane L, holds rows 4g..4g+3 of
                // column 4L + e.
                let mut u = [_mm512_setzero_ps(); 16];
                let (pd, ps) = (_mm512_castps_pd, _mm512_castpd_ps);
                #[allow(clippy::needless_range_loop)]
                for g in 0..4 {
                    let (a, b, c, d) = (r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
                    let t0 = _mm512_unpacklo_ps(a, b);
                    let t1 = _mm512_unpackhi_ps(a, b);
                    let t2 = _mm512_unpacklo_ps(c, d);
                    let t3 = _mm512_unpackhi_ps(c, d);
                    u[4 * g] = ps(_mm512_unpacklo_pd(pd(t0), pd(t2)));
                    u[4 * g + 1] = ps(_mm512_unpackhi_pd(pd(t0), pd(t2)));
                    u[4 * g + 2] = ps(_mm512_unpacklo_pd(pd(t1), pd(t3)));
                    u[4 * g + 3] = ps(_mm512_unpackhi_pd(pd(t1), pd(t3)));
                }
                let mask = ((1u32 << rows) - 1) as u16;
                let d = dst.add(q * w + g0);
                for e in 0..4 {
                    // Lanes (0, 2) and (1, 3) of rows 0–7, then of rows 8–15.
                    let v = _mm512_shuffle_f32x4::<0x88>(u[e], u[4 + e]);
                    let x = _mm512_shuffle_f32x4::<0xdd>(u[e], u[4 + e]);
                    let y = _mm512_shuffle_f32x4::<0x88>(u[8 + e], u[12 + e]);
                    let z = _mm512_shuffle_f32x4::<0xdd>(u[8 + e], u[12 + e]);
                    // Column 4L + e: lane L of u[e], u[4 + e], u[8 + e], u[12 + e].
                    let cols = [
                        (e, _mm512_shuffle_f32x4::<0x88>(v, y)),
                        (4 + e, _mm512_shuffle_f32x4::<0x88>(x, z)),
                        (8 + e, _mm512_shuffle_f32x4::<0xdd>(v, y)),
                        (12 + e, _mm512_shuffle_f32x4::<0xdd>(x, z)),
                    ];
                    for (c, col) in cols {
                        _mm512_mask_storeu_ps(d.add(c * w), mask, col);
                    }
                }
            }
            q += 16;
        }
        for q in q..kc {
            for i in 0..w {
                *dst.add(q * w + i) = *src.add(i * rs + q);
            }
        }
    }
}

/// Packs the B panel of columns `j0..j0+nr`, rows `p0..p0+kc` (`dst[p * nr + j]`), zero-padding
/// columns past `n`. `isa`: the instruction set of the kernel in use (see [`pack_a_panel`]).
fn pack_b_panel<T: GemmFloat>(
    p: &Problem<T>,
    nr: usize,
    j0: usize,
    p0: usize,
    kc: usize,
    dst: &mut [T],
    isa: Isa,
) {
    let (rs, cs) = p.sb;
    let cols = nr.min(p.n - j0);
    if cols < nr {
        dst.fill(T::ZERO);
    }
    let last = (p0 + kc - 1) * rs + (j0 + cols - 1) * cs;
    assert!(last < p.b.len() && kc * nr <= dst.len());
    // A full panel of a column-major f32 B (a transposed operand, e.g. the keys of attention):
    // transposed in registers as a row-major A is (a copy: the same bits).
    #[cfg(target_arch = "x86_64")]
    if rs == 1 && cs != 1 && cols == nr && size_of::<T>() == 4 {
        // SAFETY: T is f32 (see `pack_a_panel`); every read is at most `last` and every write
        // below `kc * nr` (checked above); the CPU has the kernel's instruction set.
        if unsafe { pack_transposed(isa, p.b.as_ptr().add(p0 + j0 * cs), cs, dst, nr, kc) } {
            return;
        }
    }
    let _ = isa;
    // SAFETY: every read is at most `last` (checked above) and every write below `kc * nr`.
    unsafe {
        let src = p.b.as_ptr().add(p0 * rs + j0 * cs);
        let d = dst.as_mut_ptr();
        for q in 0..kc {
            let (s, dq) = (src.add(q * rs), d.add(q * nr));
            // Whole rows of a dense B as fixed-size copies (inlined vector moves; a `memcpy`
            // call per 64-byte row cost a sixth of a wide product's time).
            match (cs, cols) {
                (1, 8) => copy_row::<T, 8>(s, dq),
                (1, 16) => copy_row::<T, 16>(s, dq),
                (1, 24) => copy_row::<T, 24>(s, dq),
                (1, 32) => copy_row::<T, 32>(s, dq),
                _ => {
                    for j in 0..cols {
                        *dq.add(j) = *s.add(j * cs);
                    }
                }
            }
        }
    }
}

/// Packs the B panels `jp0..jp1` of rows `p0..p0+kc` into `dst` (panel `x` at `x * kc * nr`,
/// each as [`pack_b_panel`] lays it out). A B with dense rows is read row by row across all the
/// panels (one contiguous run per row, which the hardware prefetcher follows; panel by panel
/// reads `kc` short runs a row stride apart, each on its own page), the rest panel by panel.
#[allow(clippy::too_many_arguments)]
fn pack_b_block<T: GemmFloat>(
    p: &Problem<T>,
    nr: usize,
    jp0: usize,
    jp1: usize,
    p0: usize,
    kc: usize,
    dst: &mut [T],
    isa: Isa,
) {
    let (rs, cs) = p.sb;
    let full = jp1.min(p.n / nr).max(jp0);
    if cs != 1 || full == jp0 || !matches!(nr, 8 | 16 | 32) {
        for (x, jp) in (jp0..jp1).enumerate() {
            pack_b_panel(
                p,
                nr,
                jp * nr,
                p0,
                kc,
                &mut dst[x * nr * kc..(x + 1) * nr * kc],
                isa,
            );
        }
        return;
    }
    // Full panels `jp0..full` here, a ragged last one (if any) panel-wise below.
    let last = (p0 + kc - 1) * rs + full * nr - 1;
    assert!(last < p.b.len() && (full - jp0) * kc * nr <= dst.len());
    let panel = kc * nr;
    // SAFETY: every read is at most `last` (checked above) and every write below
    // `(full - jp0) * kc * nr`; the CPU has the kernel's instruction set.
    unsafe {
        let src = p.b.as_ptr().add(p0 * rs + jp0 * nr);
        let args = (src, rs, dst.as_mut_ptr(), kc, nr, full - jp0);
        #[cfg(target_arch = "x86_64")]
        match isa {
            Isa::Avx512 => pack_rows_avx512(args),
            Isa::Avx2 => pack_rows_avx2(args),
            Isa::Portable => pack_rows(args),
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = isa;
            pack_rows(args);
        }
    }
    for (x, jp) in (full..jp1).enumerate() {
        let x = x + full - jp0;
        pack_b_panel(
            p,
            nr,
            jp * nr,
            p0,
            kc,
            &mut dst[x * panel..(x + 1) * panel],
            isa,
        );
    }
}

/// The dense part of [`pack_b_block`]: `kc` rows of `panels` full panels of `nr` columns
/// from `src` (rows `rs` apart) into `dst` (panel `x` at `x * kc * nr`).
///
/// # Safety
/// As [`pack_b_block`] checks.
#[inline(always)]
unsafe fn pack_rows<T: Copy>(
    (src, rs, d, kc, nr, panels): (*const T, usize, *mut T, usize, usize, usize),
) {
    let panel = kc * nr;
    // SAFETY: as documented.
    unsafe {
        for q in 0..kc {
            let (s, dq) = (src.add(q * rs), d.add(q * nr));
            for x in 0..panels {
                let (s, dx) = (s.add(x * nr), dq.add(x * panel));
                match nr {
                    8 => copy_row::<T, 8>(s, dx),
                    16 => copy_row::<T, 16>(s, dx),
                    _ => copy_row::<T, 32>(s, dx),
                }
            }
        }
    }
}

/// [`pack_rows`] with 64-byte moves (the generic build copies 16 bytes at a time).
///
/// # Safety
/// As [`pack_rows`]; the CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_rows_avx512<T: Copy>(args: (*const T, usize, *mut T, usize, usize, usize)) {
    // SAFETY: as documented.
    unsafe { pack_rows(args) }
}

/// [`pack_rows`] with 32-byte moves.
///
/// # Safety
/// As [`pack_rows`]; the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pack_rows_avx2<T: Copy>(args: (*const T, usize, *mut T, usize, usize, usize)) {
    // SAFETY: as documented.
    unsafe { pack_rows(args) }
}

/// Copies `N` elements.
///
/// # Safety
/// `src` must hold `N` readable elements, `dst` `N` writable ones, not overlapping.
#[inline(always)]
unsafe fn copy_row<T: Copy, const N: usize>(src: *const T, dst: *mut T) {
    // SAFETY: as documented; unaligned accesses because neither is aligned to `[T; N]`'s size.
    unsafe { (dst as *mut [T; N]).write_unaligned((src as *const [T; N]).read_unaligned()) }
}

/// Packs a whole operand: for each KC block in order, its panels (`panels` of `width` rows of
/// A or columns of B). Block `pc` starts at `pc * KC * width * panels`.
fn pack_all<T: GemmFloat>(
    len_k: usize,
    kcb: usize,
    panels: usize,
    width: usize,
    par: Option<&Par>,
    pack: impl Fn(usize, usize, usize, &mut [T]) + Sync,
) -> Aligned<T> {
    let mut buf = Aligned::<T>::new(len_k * panels * width);
    // One job per panel of each KC block, each `kc · width` elements of `buf`, in order.
    let blocks = len_k.div_ceil(kcb);
    let jobs = blocks * panels;
    let base = SyncPtr(buf.as_mut_slice().as_mut_ptr());
    let job = |x: usize| {
        let (pc, ip) = (x / panels, x % panels);
        let (p0, kc) = (pc * kcb, kcb.min(len_k - pc * kcb));
        // SAFETY: job x's range, `pc·kcb·width·panels + ip·kc·width` plus `kc·width`, lies
        // inside `buf` (`len_k·panels·width` elements) and no other job's range overlaps it.
        let d = unsafe {
            core::slice::from_raw_parts_mut(
                base.get().add((p0 * panels + ip * kc) * width),
                kc * width,
            )
        };
        pack(ip * width, p0, kc, d);
    };
    match par {
        // On the team (the caller and its standing helpers), not in the rayon pool: a helper
        // still spinning from the last region would compete with the pool's threads for the
        // cores.
        Some(par) if par.threads() > 1 && jobs > 1 => par.run_parts(jobs, job),
        _ => (0..jobs).for_each(job),
    }
    buf
}

/// Runs one micro-tile: straight into C when it is full and C's rows are dense, else through
/// `tmp` (the caller's scratch tile, kept across calls: zeroing one per partial tile was most
/// of a small product's `memset`).
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn micro_tile<T: GemmFloat>(
    kern: &Kernel<T>,
    kc: usize,
    ap: *const T,
    bp: *const T,
    c: *mut T,
    (rsc, csc): Strides,
    (rows, cols): (usize, usize),
    load: bool,
    tmp: &mut [T; 12 * 32],
) {
    // A partial row panel runs an edge kernel that computes only the rows it needs, a narrow
    // column panel a narrow kernel.
    let (f, frows) = kern.for_tile(rows, cols);
    // SAFETY: the caller passes panels of `kc` steps and a tile inside C.
    unsafe {
        if rows == frows && cols == kern.nr && csc == 1 {
            f(kc, ap, bp, c, rsc, load);
            return;
        }
        debug_assert!(kern.mr * kern.nr <= tmp.len());
        if load {
            for i in 0..rows {
                for j in 0..cols {
                    tmp[i * kern.nr + j] = *c.add(i * rsc + j * csc);
                }
            }
        }
        f(kc, ap, bp, tmp.as_mut_ptr(), kern.nr, load);
        for i in 0..rows {
            for j in 0..cols {
                *c.add(i * rsc + j * csc) = tmp[i * kern.nr + j];
            }
        }
    }
}

/// Copies a `rows × cols` block of C into the top-left of a dense micro-tile (rows `rst`
/// apart).
///
/// # Safety
/// The block at `src` must be readable and `dst` must hold `rows` rows of `cols` elements.
#[inline]
unsafe fn copy_in<T: Copy>(
    src: *const T,
    (rsc, csc): Strides,
    dst: *mut T,
    rst: usize,
    rows: usize,
    cols: usize,
) {
    // SAFETY: as documented above.
    unsafe {
        for i in 0..rows {
            for j in 0..cols {
                *dst.add(i * rst + j) = *src.add(i * rsc + j * csc);
            }
        }
    }
}

/// Copies the top-left `rows × cols` of a dense micro-tile (rows `rst` apart) into C.
///
/// # Safety
/// `src` must hold `rows` rows of `cols` readable elements, and the tile at `dst` must be
/// writable.
#[inline]
unsafe fn copy_out<T: Copy>(
    src: *const T,
    rst: usize,
    dst: *mut T,
    (rsc, csc): Strides,
    rows: usize,
    cols: usize,
) {
    // SAFETY: as documented above.
    unsafe {
        for i in 0..rows {
            let (s, d) = (src.add(i * rst), dst.add(i * rsc));
            match (csc, cols) {
                (1, 8) => copy_row::<T, 8>(s, d),
                (1, 16) => copy_row::<T, 16>(s, d),
                (1, 24) => copy_row::<T, 24>(s, d),
                (1, 32) => copy_row::<T, 32>(s, d),
                (1, _) => core::ptr::copy_nonoverlapping(s, d, cols),
                _ => {
                    for j in 0..cols {
                        *d.add(j * csc) = *s.add(j);
                    }
                }
            }
        }
    }
}

/// The blocked product into C (`m, n` may be 0). Output tiles of `MC × nc` run in parallel;
/// each runs the KC blocks in order. B is packed once up front and shared when there are
/// several rows of tiles, or per task and per step when there is one (wide products: each B
/// block is then used by one task only); A likewise with columns of tiles.
pub(crate) fn blocked<T: GemmFloat>(
    kern: &Kernel<T>,
    p: &Problem<T>,
    c: SyncPtr<T>,
    sc: Strides,
    par: Option<&Par>,
) {
    blocked_with(kern, p, c, sc, par, None);
}

/// Rows of C per block of [`gemv_cols`] (4 KiB of f64): the block's sums stay in L1 while
/// every column of A passes.
const GEMV_ROWS: usize = 512;

/// `C = A·b` for one column of B (`n = 1`, `k > 0`) when A's columns are contiguous (`sa.0 ==
/// 1`, a transposed operand such as a weight gradient's `dYᵀ`): each output is the chain `c =
/// fma(A[i][p], b[p], c)` over `p` in increasing order from `+0.0`, the blocked kernel's bits,
/// computed as whole columns of A times one element of b, nothing packed (packing a 204 × 97 A
/// for one column cost more than the product: 9.9 µs). One thread: callers send only products
/// of at most [`PAR_MIN_WORK`] multiply-adds, which the blocked path runs on one thread too.
fn gemv_cols<T: GemmFloat>(isa: Isa, p: &Problem<T>, c: SyncPtr<T>, rsc: usize) {
    #[inline(always)]
    fn imp<T: GemmFloat>(p: &Problem<T>, c: SyncPtr<T>, rsc: usize) {
        let (m, k, lda, sb) = (p.m, p.k, p.sa.1, p.sb.0);
        let mut acc = [T::ZERO; GEMV_ROWS];
        for i0 in (0..m).step_by(GEMV_ROWS) {
            let rows = GEMV_ROWS.min(m - i0);
            let acc = &mut acc[..rows];
            acc.fill(T::ZERO);
            for q in 0..k {
                let bq = p.b[q * sb];
                let col = &p.a[q * lda + i0..][..rows];
                for (s, &a) in acc.iter_mut().zip(col) {
                    *s = a.mul_add(bq, *s);
                }
            }
            for (i, &v) in acc.iter().enumerate() {
                // SAFETY: row `i0 + i < m` of the checked `m × 1` output.
                unsafe { *c.0.add((i0 + i) * rsc) = v };
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn wide<T: GemmFloat>(p: &Problem<T>, c: SyncPtr<T>, rsc: usize) {
            imp(p, c, rsc)
        }
        #[target_feature(enable = "avx2,fma")]
        fn fast<T: GemmFloat>(p: &Problem<T>, c: SyncPtr<T>, rsc: usize) {
            imp(p, c, rsc)
        }
        match isa {
            // SAFETY: a kernel's instruction set is one the CPU has; AVX2 and FMA checked.
            Isa::Avx512 if Isa::Avx2.available() => return unsafe { wide(p, c, rsc) },
            // SAFETY: as above (`Isa::Avx2` means AVX2 and FMA).
            Isa::Avx2 => return unsafe { fast(p, c, rsc) },
            _ => {}
        }
    }
    imp(p, c, rsc)
}

/// [`blocked`], with B already packed (by [`PackedB::new`], for `kern`) when `packed_b` is
/// given: `p.b` is then not read.
fn blocked_with<T: GemmFloat>(
    kern: &Kernel<T>,
    p: &Problem<T>,
    c: SyncPtr<T>,
    sc: Strides,
    par: Option<&Par>,
    packed_b: Option<*const T>,
) {
    let (m, n, k) = (p.m, p.n, p.k);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                // SAFETY: (i, j) is inside the checked output.
                unsafe { *c.0.add(i * sc.0 + j * sc.1) = T::ZERO };
            }
        }
        return;
    }
    if n == 1 && p.sa.0 == 1 && packed_b.is_none() && m.saturating_mul(k) <= PAR_MIN_WORK {
        return gemv_cols(kern.isa, p, c, sc.0);
    }
    let (mr, nr) = (kern.mr, kern.nr);
    let (mp, np) = (m.div_ceil(mr), n.div_ceil(nr));
    let par = par.filter(|_| m.saturating_mul(n).saturating_mul(k) > PAR_MIN_WORK);
    let threads = par.map_or(1, Par::threads);
    // Output tiles: MC rows × `nc` columns. Shrinking `nc` when there are few tiles only changes
    // which thread computes which outputs, never the bits (see the module docs).
    let mc_panels = T::MC / mr;
    let mut nc_panels = T::NC / nr;
    let tiles_m = mp.div_ceil(mc_panels);
    // A small product on several threads (256³: a fifth of a millisecond) runs in one parallel
    // region, a tile per thread, each packing the A and B blocks it reads (B once per row of
    // tiles), instead of packing A and B up front in parallel regions of their own.
    let small = threads > 1 && m.saturating_mul(n).saturating_mul(k) <= SMALL_WORK;
    // With a single row of tiles each B block is used once: each task packs its own B block
    // per KC step into a buffer that stays in cache, instead of packing all of B up front
    // (which costs a round trip through memory for wide products such as 64×128×50257).
    let local_b = (tiles_m == 1 || small) && packed_b.is_none();
    // The kernel's instruction set (the CPU has it): the packing may use it too.
    let isa = kern.isa;
    let pb = if local_b || packed_b.is_some() {
        None
    } else {
        Some(pack_all(k, T::KC, np, nr, par, |j0, p0, kc, d| {
            pack_b_panel(p, nr, j0, p0, kc, d, isa)
        }))
    };
    // A with contiguous rows and a single row of tiles (few rows: an LM head) is read in place
    // by the direct kernels, not packed (see [`super::direct`]).
    let direct = !kern.direct.is_empty()
        && tiles_m == 1
        && p.sa.1 == 1
        && packed_b.is_none()
        && m.saturating_mul(k).saturating_mul(size_of::<T>()) <= kern.direct_max;
    // Four tiles per thread for balance; one for a small product (above), and when each
    // column of tiles reads all of a direct A too large to stay in cache between them
    // (64×50257×128).
    let per_thread = match small || (direct && m * k * size_of::<T>() > DIRECT_A_SHARED) {
        true => 1,
        false => 4,
    };
    while threads > 1 && nc_panels > 1 && tiles_m * np.div_ceil(nc_panels) < per_thread * threads {
        nc_panels = nc_panels.div_ceil(2);
    }
    let tiles_n = np.div_ceil(nc_panels);
    // Likewise A: with several columns of tiles each A block is used by each of them, so all of
    // A is packed once up front (repacking it per tile cost a tenth of the time at 2048³); with
    // one column each task packs its own block per KC step, straight into L2.
    let local_a = (tiles_n == 1 || small) && !direct;
    let pa = if local_a || direct {
        None
    } else {
        Some(pack_all(k, T::KC, mp, mr, par, |i0, p0, kc, d| {
            pack_a_panel(p, mr, i0, p0, kc, d, isa)
        }))
    };
    let pa_ptr = SyncPtr(
        pa.as_ref()
            .map_or(core::ptr::null_mut(), |a| a.as_ptr() as *mut T),
    );
    // Even out the tiles (22 panels make 11 + 11, not 20 + 2), for balance between threads.
    let mc_panels = mp.div_ceil(tiles_m);
    let nc_panels = np.div_ceil(tiles_n);
    let pb_ptr = SyncPtr(match packed_b {
        Some(b) => b as *mut T,
        None => pb
            .as_ref()
            .map_or(core::ptr::null_mut(), |b| b.as_ptr() as *mut T),
    });
    // Tile `t`, or its row panels' part `part` of `parts` (nothing when that part is empty).
    let tile = |t: usize, (part, parts): (usize, usize)| {
        let (tm, tn) = (t % tiles_m, t / tiles_m);
        let (ip0, ip1) = (tm * mc_panels, ((tm + 1) * mc_panels).min(mp));
        let span = ip1 - ip0;
        let (ip0, ip1) = (ip0 + span * part / parts, ip0 + span * (part + 1) / parts);
        if ip0 == ip1 {
            return;
        }
        let (jp0, jp1) = (tn * nc_panels, ((tn + 1) * nc_panels).min(np));
        let mut local = local_b.then(|| Aligned::<T>::new(T::KC.min(k) * (jp1 - jp0) * nr));
        let mut abuf = local_a.then(|| Aligned::<T>::new(T::KC.min(k) * (ip1 - ip0) * mr));
        // With several KC blocks, the tile's partial sums live in a dense buffer of
        // contiguous micro-tiles between blocks: rows of C a power of two apart would map a
        // micro-tile onto a few L1 sets and evict the B panel. Copied out after the last block.
        let mut cbuf = (k > T::KC).then(|| Aligned::<T>::new((ip1 - ip0) * mr * (jp1 - jp0) * nr));
        let cbuf_ptr = cbuf.as_mut().map(Aligned::as_mut_ptr);
        // The partial micro-tiles' scratch (its contents between calls do not matter).
        let mut scratch = [T::ZERO; 12 * 32];
        // The direct kernels' prefetch list for one micro-tile.
        let mut pfl = [core::ptr::null::<i8>(); PF_MAX];
        let mut p0 = 0;
        while p0 < k {
            let kc = T::KC.min(k - p0);
            // Panel `jp` of this KC block is at `bblk + (jp - jp_first) * nr * kc`.
            let (bblk, jp_first) = match local.as_mut() {
                Some(buf) => {
                    pack_b_block(p, nr, jp0, jp1, p0, kc, buf.as_mut_slice(), isa);
                    (buf.as_ptr(), jp0)
                }
                // SAFETY: block `p0` of the packed B starts `p0 * np * nr` elements in.
                None => (unsafe { pb_ptr.get().add(p0 * np * nr) as *const T }, 0),
            };
            // Panel `ip` of this KC block is at `ablk + (ip - ip_first) * mr * kc`.
            let (ablk, ip_first) = match abuf.as_mut() {
                _ if direct => (core::ptr::null(), ip0),
                Some(buf) => {
                    let d = buf.as_mut_slice();
                    for (x, ip) in (ip0..ip1).enumerate() {
                        let panel = &mut d[x * mr * kc..(x + 1) * mr * kc];
                        pack_a_panel(p, mr, ip * mr, p0, kc, panel, isa);
                    }
                    (buf.as_ptr(), ip0)
                }
                // SAFETY: block `p0` of the packed A starts `p0 * mp * mr` elements in.
                None => (unsafe { pa_ptr.get().add(p0 * mp * mr) as *const T }, 0),
            };
            // With B packed per task, the source of the block this task packs next (this
            // tile's next KC block, else the next tile's first: a task mostly runs tiles in
            // order) is fetched into L2 a slice per micro-tile while this block computes, so
            // that packing it reads L2 instead of waiting on memory row by row. Dense rows only,
            // and not when the block is one contiguous run (a long-K product's B: the hardware
            // prefetcher streams that, and the extra hints only queue behind it).
            let next_src = match (local.is_some() && p.sb.1 == 1, p0 + kc < k) {
                (false, _) => None,
                (true, true) => Some((p0 + kc, (p0 + kc + T::KC).min(k), jp0, jp1)),
                (true, false) if jp1 < np => Some((0, T::KC.min(k), jp1, (2 * jp1 - jp0).min(np))),
                _ => None,
            }
            .map(|(r0, r1, q0, q1)| (r0, r1, q0 * nr, (q1 * nr).min(n)))
            .filter(|&(_, _, c0, c1)| direct || c1 - c0 < p.sb.0)
            .map(|(r0, r1, c0, c1)| {
                let lpr = ((c1 - c0) * size_of::<T>()).div_ceil(64) + 1;
                let base = p.b.as_ptr().wrapping_add(r0 * p.sb.0 + c0);
                let calls = (jp1 - jp0) * (ip1 - ip0);
                (
                    base,
                    lpr,
                    (r1 - r0) * lpr,
                    ((r1 - r0) * lpr).div_ceil(calls),
                )
            });
            // Direct A: the next A block this task reads (this tile's next KC block, else the
            // next tile's first), fetched into L2 a slice per micro-tile.
            let next_a = match (direct, p0 + kc < k) {
                (false, _) => None,
                (true, true) => Some((p0 + kc, (p0 + kc + T::KC).min(k))),
                (true, false) if jp1 < np => Some((0, T::KC.min(k))),
                _ => None,
            }
            .map(|(q0, q1)| {
                let lpr = ((q1 - q0) * size_of::<T>()).div_ceil(64) + 1;
                let rows = (ip1 * mr).min(m) - ip0 * mr;
                let base = p.a.as_ptr().wrapping_add(ip0 * mr * p.sa.0 + q0);
                let calls = (jp1 - jp0) * (ip1 - ip0);
                (base, lpr, rows * lpr, (rows * lpr).div_ceil(calls))
            });
            // SAFETY: the A block holds panels from `ip_first` and the B block panels from
            // `jp_first`, each of `kc` steps; the tile rows/cols are clipped to the output, and
            // the C buffer holds one full micro-tile per (ip, jp) of the tile.
            unsafe {
                let last = p0 + kc == k;
                // The next B panel, a slice per micro-tile, into L2 (it is read from L3 else).
                let b_lines = (nr * kc * size_of::<T>()).div_ceil(64);
                let b_step = b_lines.div_ceil(ip1 - ip0);
                for jp in jp0..jp1 {
                    let bp = bblk.add((jp - jp_first) * nr * kc);
                    let j = jp * nr;
                    for ip in ip0..ip1 {
                        if jp + 1 < jp1 {
                            let x = (ip - ip0) * b_step;
                            prefetch(bp.add(nr * kc), x..(x + b_step).min(b_lines), false);
                        }
                        let call = (jp - jp0) * (ip1 - ip0) + ip - ip0;
                        if direct {
                            let i = ip * mr;
                            let rows = mr.min(m - i);
                            let mut npf = 0;
                            let mut push = |q: *const T| {
                                if npf < PF_MAX {
                                    pfl[npf] = q as *const i8;
                                    npf += 1;
                                }
                            };
                            for (base, lpr, lines, per, rs) in [
                                next_src.map(|(b, l, n, x)| (b, l, n, x, p.sb.0)),
                                next_a.map(|(b, l, n, x)| (b, l, n, x, p.sa.0)),
                            ]
                            .into_iter()
                            .flatten()
                            {
                                // Lines `x..end` of the block, row by row (no division
                                // per line: it cost a tenth of the driver's time).
                                let (x, end) = (call * per, ((call + 1) * per).min(lines));
                                let (mut r, mut q) = (x / lpr, x % lpr);
                                for _ in x..end {
                                    let row = base.wrapping_add(r * rs) as *const u8;
                                    push(row.wrapping_add(q * 64) as *const T);
                                    q += 1;
                                    if q == lpr {
                                        (r, q) = (r + 1, 0);
                                    }
                                }
                            }
                            // The next micro-tile of C (when written straight into C).
                            let (ni, nj) = match ip + 1 < ip1 {
                                true => (i + mr, j),
                                false => (ip0 * mr, j + nr),
                            };
                            if cbuf_ptr.is_none() && sc.1 == 1 && ni < m && nj < n {
                                let t = c.get().wrapping_add(ni * sc.0 + nj);
                                let lines = (nr.min(n - nj) * size_of::<T>()).div_ceil(64) + 1;
                                for r in 0..mr.min(m - ni) {
                                    let row = t.wrapping_add(r * sc.0) as *const u8;
                                    for l in 0..lines {
                                        push(row.wrapping_add(l * 64) as *const T);
                                    }
                                }
                            }
                            let ap = p.a.as_ptr().add(i * p.sa.0 + p0);
                            let f = kern.direct[rows - 1];
                            let (cols, pf) = (nr.min(n - j), &pfl[..npf]);
                            match cbuf_ptr {
                                Some(buf) => {
                                    let t = buf.add(call * mr * nr);
                                    prefetch(
                                        t.add(mr * nr),
                                        0..(mr * nr * size_of::<T>()).div_ceil(64),
                                        true,
                                    );
                                    f(kc, ap, p.sa.0, bp, t, nr, p0 > 0, pf);
                                    if last {
                                        let out = c.get().add(i * sc.0 + j * sc.1);
                                        copy_out(t, nr, out, sc, rows, cols);
                                    }
                                }
                                None => {
                                    let out = c.get().add(i * sc.0 + j * sc.1);
                                    if cols == nr && sc.1 == 1 {
                                        f(kc, ap, p.sa.0, bp, out, sc.0, p0 > 0, pf);
                                    } else {
                                        let mut tmp = [T::ZERO; 12 * 32];
                                        debug_assert!(mr * nr <= tmp.len());
                                        if p0 > 0 {
                                            copy_in(out, sc, tmp.as_mut_ptr(), nr, rows, cols);
                                        }
                                        f(kc, ap, p.sa.0, bp, tmp.as_mut_ptr(), nr, p0 > 0, pf);
                                        copy_out(tmp.as_ptr(), nr, out, sc, rows, cols);
                                    }
                                }
                            }
                            continue;
                        }
                        if let Some((base, lpr, lines, per)) = next_src {
                            let x = call * per;
                            for l in x..(x + per).min(lines) {
                                let row = base.wrapping_add(l / lpr * p.sb.0);
                                prefetch(row, l % lpr..l % lpr + 1, false);
                            }
                        }
                        let i = ip * mr;
                        let ap = ablk.add((ip - ip_first) * mr * kc);
                        let (rows, cols) = (mr.min(m - i), nr.min(n - j));
                        let out = c.get().add(i * sc.0 + j * sc.1);
                        match cbuf_ptr {
                            Some(buf) => {
                                let t = buf.add(((jp - jp0) * (ip1 - ip0) + (ip - ip0)) * mr * nr);
                                // The next micro-tile's partial sums, read first thing.
                                prefetch(
                                    t.add(mr * nr),
                                    0..(mr * nr * size_of::<T>()).div_ceil(64),
                                    true,
                                );
                                // The same kernel for every KC block of the tile (it
                                // reloads the rows it stored).
                                (kern.for_tile(rows, cols).0)(kc, ap, bp, t, nr, p0 > 0);
                                if last {
                                    copy_out(t, nr, out, sc, rows, cols);
                                }
                            }
                            None => {
                                // The next micro-tile of C (written from the kernel's
                                // registers; a store that misses waits on the line).
                                let (ni, nj) = match ip + 1 < ip1 {
                                    true => (i + mr, j),
                                    false => (ip0 * mr, j + nr),
                                };
                                if sc.1 == 1 && ni < m && nj < n {
                                    let t = c.get().wrapping_add(ni * sc.0 + nj);
                                    let lines = (nr.min(n - nj) * size_of::<T>()).div_ceil(64) + 1;
                                    for r in 0..mr.min(m - ni) {
                                        prefetch(t.wrapping_add(r * sc.0), 0..lines, true);
                                    }
                                }
                                micro_tile(
                                    kern,
                                    kc,
                                    ap,
                                    bp,
                                    out,
                                    sc,
                                    (rows, cols),
                                    p0 > 0,
                                    &mut scratch,
                                )
                            }
                        }
                    }
                }
            }
            p0 += kc;
        }
    };
    let tiles = tiles_m * tiles_n;
    match par {
        // On the team, as `pack_all`'s jobs: tiles claimed one at a time by the caller and the
        // helpers. The last `threads` tiles (the last each thread claims) go in halves by rows,
        // so that a thread done early waits on half a tile at most, not a whole one.
        Some(par) if threads > 1 && tiles > 1 => {
            let halved = if tiles >= 2 * threads { threads } else { 0 };
            let whole = tiles - halved;
            par.run_parts(whole + 2 * halved, |q| match q.checked_sub(whole) {
                None => tile(q, (0, 1)),
                Some(h) => tile(whole + h / 2, (h % 2, 2)),
            })
        }
        _ => (0..tiles).for_each(|t| tile(t, (0, 1))),
    }
}

/// Split-K: the product over K range `r` of `parts` equal ranges, into a fresh dense `m×n`
/// buffer, computed on the calling thread.
fn partial<T: GemmFloat>(kern: &Kernel<T>, p: &Problem<T>, parts: usize, r: usize) -> Vec<T> {
    let per = p.k.div_ceil(parts);
    let (k0, k1) = ((r * per).min(p.k), ((r + 1) * per).min(p.k));
    let mut out = vec![T::ZERO; p.m * p.n];
    if k1 > k0 {
        let sub = p.k_range(k0, k1);
        blocked(kern, &sub, SyncPtr(out.as_mut_ptr()), (p.n, 1), None);
    }
    out
}

fn write_out<T: GemmFloat>(src: &[T], m: usize, n: usize, c: SyncPtr<T>, sc: Strides) {
    for i in 0..m {
        for j in 0..n {
            // SAFETY: (i, j) is inside the checked output.
            unsafe { *c.0.add(i * sc.0 + j * sc.1) = src[i * n + j] };
        }
    }
}

/// Deterministic split-K: [`splitk_parts`]`(k)` ranges computed in parallel, their products
/// added in range order (`((P0 + P1) + P2) + …`).
pub(crate) fn splitk_fixed<T: GemmFloat>(
    kern: &Kernel<T>,
    p: &Problem<T>,
    c: SyncPtr<T>,
    sc: Strides,
    par: &Par,
) {
    let parts = splitk_parts(p.k);
    if p.m == 0 || p.n == 0 || parts == 1 {
        return blocked(kern, p, c, sc, Some(par));
    }
    let partials: Vec<Vec<T>> = par.install(|| {
        (0..parts)
            .into_par_iter()
            .map(|r| partial(kern, p, parts, r))
            .collect()
    });
    let mut acc = partials[0].clone();
    for q in &partials[1..] {
        for (a, &b) in acc.iter_mut().zip(q) {
            *a = *a + b;
        }
    }
    write_out(&acc, p.m, p.n, c, sc);
}

/// Nondeterministic split-K: one K range per thread, partial products added to the result in
/// the order the threads finish.
pub(crate) fn splitk_completion<T: GemmFloat>(
    kern: &Kernel<T>,
    p: &Problem<T>,
    c: SyncPtr<T>,
    sc: Strides,
    par: &Par,
) {
    let parts = par.threads().min(p.k.div_ceil(T::KC));
    if p.m == 0 || p.n == 0 || parts <= 1 {
        return blocked(kern, p, c, sc, Some(par));
    }
    let total: Mutex<Option<Vec<T>>> = Mutex::new(None);
    par.install(|| {
        (0..parts).into_par_iter().with_max_len(1).for_each(|r| {
            let part = partial(kern, p, parts, r);
            let mut t = total.lock().unwrap_or_else(|e| e.into_inner());
            match t.as_mut() {
                None => *t = Some(part),
                Some(acc) => acc.iter_mut().zip(&part).for_each(|(a, &b)| *a = *a + b),
            }
        })
    });
    let acc = total.into_inner().unwrap_or_else(|e| e.into_inner());
    write_out(&acc.expect("parts > 1"), p.m, p.n, c, sc);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain fma chain of every output (`p` increasing from `+0.0`): the order every path
    /// must keep.
    fn chain(m: usize, n: usize, k: usize, a: &[f32], lda: usize, b: &[f32]) -> Vec<u32> {
        let mut c = vec![0u32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for p in 0..k {
                    acc = a[i * lda + p].mul_add(b[p * n + j], acc);
                }
                c[i * n + j] = acc.to_bits();
            }
        }
        c
    }

    /// The direct-A kernels (A read in place: one row of tiles, rows contiguous) give the fma
    /// chain's bits on every row count 1..=12 of a last panel, with one and several KC blocks,
    /// ragged and full column panels, A rows further apart than `k`, and at 1, 2, 3 and 8
    /// threads; every instruction set agrees.
    #[test]
    fn direct_a_gives_the_chain_bits_at_any_thread_count() {
        let mut g = lockstep_rng::Generator::with_seed(11);
        let mut vals = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (g.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect()
        };
        let mut shapes: Vec<(usize, usize, usize, usize)> =
            (1..=12).map(|r| (24 + r, 70, 300, 300)).collect();
        shapes.extend([
            (64, 1100, 130, 130),
            (64, 96, 2100, 2100),
            (17, 64, 260, 300),
            (240, 40, 20, 20),
            (1, 1, 1, 1),
            (64, 33, 9, 13),
        ]);
        for (m, n, k, lda) in shapes {
            let a = vals(m * lda);
            let b = vals(k * n);
            let want = chain(m, n, k, &a, lda, &b);
            for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
                if !isa.available() {
                    continue;
                }
                for t in [1, 2, 3, 8] {
                    let mut c = vec![f32::NAN; m * n];
                    gemm_with(
                        isa,
                        m,
                        n,
                        k,
                        &a,
                        (lda, 1),
                        &b,
                        (n, 1),
                        &mut c,
                        (n, 1),
                        &Par::new(t),
                    )
                    .unwrap();
                    let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                    assert!(
                        got == want,
                        "{isa:?} {m}x{n}x{k} (lda {lda}) at {t} threads"
                    );
                    // C written column-major (through the scratch tile).
                    let mut ct = vec![f32::NAN; m * n];
                    gemm_with(
                        isa,
                        m,
                        n,
                        k,
                        &a,
                        (lda, 1),
                        &b,
                        (n, 1),
                        &mut ct,
                        (1, m),
                        &Par::new(t),
                    )
                    .unwrap();
                    let back: Vec<u32> = (0..m * n)
                        .map(|x| ct[(x % n) * m + x / n].to_bits())
                        .collect();
                    assert!(
                        back == want,
                        "{isa:?} {m}x{n}x{k} C transposed at {t} threads"
                    );
                }
            }
        }
    }

    /// Small parallel products (one tile per thread, each packing its own A and B blocks, B
    /// once per row of tiles) give the fma chain's bits at 1, 2, 3 and 8 threads, with several
    /// rows of tiles, a KC block boundary, and A row- or column-major.
    #[test]
    fn small_parallel_products_give_the_chain_bits() {
        let mut g = lockstep_rng::Generator::with_seed(13);
        let mut vals = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (g.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect()
        };
        for (m, n, k) in [
            (256, 256, 256),
            (300, 100, 200),
            (500, 40, 300),
            (30, 700, 200),
        ] {
            assert!(m * n * k > PAR_MIN_WORK && m * n * k <= SMALL_WORK);
            let a = vals(m * k);
            let b = vals(k * n);
            let want = chain(m, n, k, &a, k, &b);
            let mut at = vec![0f32; m * k];
            for i in 0..m {
                for p in 0..k {
                    at[p * m + i] = a[i * k + p];
                }
            }
            for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
                if !isa.available() {
                    continue;
                }
                for t in [1, 2, 3, 8] {
                    for (src, sa) in [(&a, (k, 1)), (&at, (1, m))] {
                        let mut c = vec![f32::NAN; m * n];
                        gemm_with(
                            isa,
                            m,
                            n,
                            k,
                            src,
                            sa,
                            &b,
                            (n, 1),
                            &mut c,
                            (n, 1),
                            &Par::new(t),
                        )
                        .unwrap();
                        let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                        assert!(got == want, "{isa:?} {m}x{n}x{k} A {sa:?} at {t} threads");
                    }
                }
            }
        }
    }

    /// A row-major A packed by the transposing AVX-512 path (full 12-row panels, 16 columns
    /// at a time, the rest one by one) gives the fma chain's bits: K with and without a tail
    /// of columns, several KC blocks, rows further apart than `k`, ragged last panels, A packed
    /// up front or per tile, at 1, 2, 3 and 8 threads; every instruction set agrees.
    #[test]
    fn row_major_a_packs_to_the_chain_bits() {
        let mut g = lockstep_rng::Generator::with_seed(29);
        let mut vals = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (g.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect()
        };
        // m > MC: several rows of tiles, so A is packed (not read in place).
        for (m, n, k, lda) in [
            (300, 40, 16, 16),
            (253, 70, 47, 51),
            (520, 33, 300, 301),
            (264, 800, 128, 128),
            (241, 20, 1, 3),
        ] {
            let a = vals(m * lda);
            let b = vals(k * n);
            let want = chain(m, n, k, &a, lda, &b);
            for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
                if !isa.available() {
                    continue;
                }
                for t in [1, 2, 3, 8] {
                    let mut c = vec![f32::NAN; m * n];
                    let par = Par::new(t);
                    gemm_with(isa, m, n, k, &a, (lda, 1), &b, (n, 1), &mut c, (n, 1), &par)
                        .unwrap();
                    let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                    assert!(got == want, "{isa:?} {m}x{n}x{k} lda {lda} at {t} threads");
                }
            }
        }
    }

    /// A column-major B (a transposed operand) packed by the transposing AVX-512 path (full
    /// panels of 32 columns, 16 steps of K at a time, the rest one by one) gives the fma
    /// chain's bits, with B packed per task and up front, ragged last panels, several KC
    /// blocks; every instruction set agrees.
    #[test]
    fn column_major_b_packs_to_the_chain_bits() {
        let mut g = lockstep_rng::Generator::with_seed(31);
        let mut vals = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (g.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect()
        };
        for (m, n, k, ldb) in [
            (64, 64, 32, 384),
            (30, 70, 47, 50),
            (300, 96, 300, 301),
            (500, 33, 17, 17),
        ] {
            let a = vals(m * k);
            let bt = vals(n * ldb); // B[p][j] = bt[j * ldb + p]
            let mut b = vec![0f32; k * n];
            for p in 0..k {
                for j in 0..n {
                    b[p * n + j] = bt[j * ldb + p];
                }
            }
            let want = chain(m, n, k, &a, k, &b);
            for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
                if !isa.available() {
                    continue;
                }
                for t in [1, 2, 3, 8] {
                    let mut c = vec![f32::NAN; m * n];
                    let par = Par::new(t);
                    gemm_with(
                        isa,
                        m,
                        n,
                        k,
                        &a,
                        (k, 1),
                        &bt,
                        (1, ldb),
                        &mut c,
                        (n, 1),
                        &par,
                    )
                    .unwrap();
                    let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                    assert!(got == want, "{isa:?} {m}x{n}x{k} ldb {ldb} at {t} threads");
                }
            }
        }
    }

    /// A pre-packed B gives `gemm`'s bits, for one thread and several, with several KC blocks,
    /// ragged edges and strided operands.
    #[test]
    fn packed_b_gives_gemm_bits_at_any_thread_count() {
        let mut g = lockstep_rng::Generator::with_seed(7);
        let mut vals = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| (g.next_u32() as f32 / u32::MAX as f32) * 2.0 - 1.0)
                .collect()
        };
        for &(m, n, k, bt) in &[
            (32, 512, 128, false),
            (32, 128, 512, false),
            (300, 77, 600, true),
            (5, 3, 2, false),
        ] {
            let a = vals(m * k);
            let b = vals(k * n);
            let sb = if bt { (1, k) } else { (n, 1) };
            let want = {
                let mut c = vec![0f32; m * n];
                gemm(m, n, k, &a, (k, 1), &b, sb, &mut c, (n, 1), &Par::new(1)).unwrap();
                c
            };
            let packed = PackedB::new(k, n, &b, sb).unwrap();
            assert_eq!(packed.dims(), (k, n));
            for t in [1, 2, 3, 8] {
                let mut c = vec![f32::NAN; m * n];
                gemm_packed_b(m, &a, (k, 1), &packed, &mut c, (n, 1), &Par::new(t)).unwrap();
                let same = c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}x{n}x{k} at {t} threads");
            }
        }
    }
}
