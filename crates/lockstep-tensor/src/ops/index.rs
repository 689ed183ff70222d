//! Indexing: `index_select`, `gather`, `scatter_add`, `index_add`, `index_put`, `embedding`
//! (and its dense backward), `embedding_bag`, `bincount`, `histc`.
//!
//! Index tensors are `i64`. Every index is checked before any kernel runs: an index out of
//! range (or negative where PyTorch forbids it) is [`Error::IndexOutOfRange`], never a panic.
//!
//! The accumulating ops have two kernels:
//!
//! * **nondeterministic** (`NotGuaranteed`, registered first): parallel over the *source*; each
//!   thread adds into a private buffer merged into the output in the order the threads finish,
//!   or, when the destination is too large for a buffer per thread, adds with atomic
//!   compare-and-swap on the float's bits;
//! * **deterministic** (`ThreadInvariant`): *destination-partitioned* — each task owns a range
//!   of destination rows (and, for wide rows, a block of columns) and scans the sources in
//!   order, adding only those that land in its range. Every destination element therefore adds
//!   its contributions in source order, exactly as a sequential loop does, whatever the number
//!   of threads. `bincount`/`histc` (many sources, few bins) instead cut the input into a
//!   number of blocks fixed by the shapes, count each block in order, and add the block
//!   partials per bin in block order.

use crate::dispatch::{Guarantee, Impl, Op};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::layout::{contiguous_strides, resolve_dim};
use crate::ops::SyncPtr;
use crate::ops::matmul::Isa;
use crate::ops::matmul::kernel::prefetch;
use crate::ops::reduce::{copied_vec, dense, zeroed_vec};
use crate::threads::Par;
use crate::{Tensor, invalid};
use rayon::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

// ---------------------------------------------------------------------------------------------
// Elements that can be accumulated.

/// An element type the accumulating ops add in (`f32`, `f64`, `i64`; integers wrap).
pub trait AccElem: Element + Default {
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
    /// `*p += v`, atomically.
    ///
    /// # Safety
    /// `p` must be valid, aligned, and only accessed atomically while other threads may touch it.
    unsafe fn atomic_add(p: *mut Self, v: Self);
}

/// Floats add through a compare-and-swap loop on the atomic integer of their size.
macro_rules! float_acc {
    ($t:ty, $atomic:ty) => {
        impl AccElem for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            unsafe fn atomic_add(p: *mut Self, v: Self) {
                // SAFETY: the float and its atomic integer have the same size and alignment;
                // the caller guarantees validity and atomic-only access.
                let a = unsafe { <$atomic>::from_ptr(p.cast()) };
                let mut old = a.load(Ordering::Relaxed);
                loop {
                    let new = (<$t>::from_bits(old) + v).to_bits();
                    match a.compare_exchange_weak(old, new, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(x) => old = x,
                    }
                }
            }
        }
    };
}
float_acc!(f32, AtomicU32);
float_acc!(f64, AtomicU64);

impl AccElem for i64 {
    #[inline(always)]
    fn add(a: Self, b: Self) -> Self {
        a.wrapping_add(b)
    }
    unsafe fn atomic_add(p: *mut Self, v: Self) {
        // SAFETY: `AtomicI64` has the size and alignment of `i64`; the caller's guarantees.
        unsafe { AtomicI64::from_ptr(p) }.fetch_add(v, Ordering::Relaxed);
    }
}

/// Runs `$body` with `$T` = `f32`, `f64` or `i64`, else a dtype error naming `$op`.
macro_rules! with_acc {
    ($op:expr, $dt:expr, $T:ident => $body:expr) => {
        match $dt {
            DType::F32 => {
                type $T = f32;
                $body
            }
            DType::F64 => {
                type $T = f64;
                $body
            }
            DType::I64 => {
                type $T = i64;
                $body
            }
            got => Err(Error::DType {
                op: $op,
                expected: DType::F32,
                got,
            }),
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Argument checks.

/// A private dense copy of `t` (written by the accumulating ops), in a fresh buffer.
fn fresh_copy(t: &Tensor) -> Result<Tensor> {
    let c = t.contiguous();
    crate::with_dtype!(t.dtype(), T => Tensor::from_vec(copied_vec(dense::<T>(&c)?), t.shape()))
}

/// Mutable dense elements (copy-on-write), also for tensors with no elements.
fn dense_mut<T: Element>(t: &mut Tensor) -> Result<&mut [T]> {
    if t.numel() == 0 && t.dtype() == T::DTYPE {
        return Ok(Default::default());
    }
    t.data_mut::<T>()
}

/// The `i64` indices of `t`, contiguous (a dtype error naming `op` otherwise).
fn index_tensor(op: &'static str, t: &Tensor) -> Result<Tensor> {
    if t.dtype() != DType::I64 {
        return Err(Error::DType {
            op,
            expected: DType::I64,
            got: t.dtype(),
        });
    }
    Ok(t.contiguous())
}

/// Checks that every index is in `0..size` (a branch-free scan on lockstep's threads; the first
/// bad index is looked up only when there is one).
fn check_indices(op: &'static str, idx: &[i64], size: usize) -> Result<()> {
    let bad = |c: &[i64]| c.iter().fold(false, |a, &i| a | (i as u64 >= size as u64));
    let any_bad = if idx.len() > 1 << 16 {
        Par::current().install(|| idx.par_chunks(1 << 14).any(bad))
    } else {
        bad(idx)
    };
    if any_bad && let Some(&i) = idx.iter().find(|&&i| i as u64 >= size as u64) {
        return Err(Error::IndexOutOfRange { op, index: i, size });
    }
    Ok(())
}

fn same_dtype(op: &'static str, expected: DType, t: &Tensor) -> Result<()> {
    if t.dtype() != expected {
        return Err(Error::DType {
            op,
            expected,
            got: t.dtype(),
        });
    }
    Ok(())
}

fn one_dim(op: &'static str, arg: &'static str, t: &Tensor) -> Result<()> {
    if t.ndim() > 1 {
        return Err(invalid(
            op,
            arg,
            format!("expected a 0-d or 1-d tensor, got shape {:?}", t.shape()),
        ));
    }
    Ok(())
}

/// `[outer, n, inner]` around dimension `d` (a 0-d shape is taken as `[1]`).
fn geom(shape: &[usize], d: usize) -> (usize, usize, usize) {
    if shape.is_empty() {
        return (1, 1, 1);
    }
    (
        shape[..d].iter().product(),
        shape[d],
        shape[d + 1..].iter().product(),
    )
}

fn dim_of(op: &'static str, dim: isize, t: &Tensor) -> Result<usize> {
    resolve_dim(op, dim, t.ndim().max(1))
}

// ---------------------------------------------------------------------------------------------
// Work partition of the destination-partitioned kernels. The partition depends on the thread
// count, the results do not: each destination element belongs to exactly one task, and every
// task visits the sources in order.

#[derive(Clone, Copy, Debug)]
struct Task {
    o: (usize, usize),
    r: (usize, usize),
    c: (usize, usize),
    /// Which of the `rc` destination-row ranges `r` is.
    rb: usize,
    rc: usize,
}

fn split(n: usize, parts: usize, i: usize, align: usize, shift: usize) -> (usize, usize) {
    let at = |p: usize| {
        let x = n * p / parts;
        if p == 0 {
            0
        } else if p == parts {
            n
        } else {
            (x / align * align + shift).min(n)
        }
    };
    (at(i), at(i + 1))
}

/// Elements from the start of `v` to its first 64-byte boundary (cache-line alignment of the
/// column blocks; the partition never changes the results).
fn line_shift<T>(v: &[T]) -> usize {
    let sz = core::mem::size_of::<T>().max(1);
    let mis = v.as_ptr() as usize % 64;
    if mis == 0 || !mis.is_multiple_of(sz) {
        0
    } else {
        ((64 - mis) / sz) % 16
    }
}

/// Tasks over `[outer, n, inner]` destinations for `threads` threads: outer ranges first, then
/// destination-row ranges, then column blocks of at least 16 elements (one cache line of f32).
///
/// `cols_first` (element-indexed kernels, whose index has one entry per element) splits the
/// columns before the rows, so that each task reads only its columns of the index.
///
/// Column blocks are multiples of 16 elements, shifted by `shift` elements so that their
/// boundaries fall on the destination's 64-byte cache lines (no line written by two tasks when
/// rows are whole lines).
fn tasks(
    outer: usize,
    n: usize,
    inner: usize,
    threads: usize,
    cols_first: bool,
    shift: usize,
) -> Vec<Task> {
    let oc = outer.clamp(1, threads);
    let (rc, cc) = if cols_first {
        let cc = (inner / 16).clamp(1, threads.div_ceil(oc));
        (n.clamp(1, threads.div_ceil(oc * cc)), cc)
    } else {
        let rc = n.clamp(1, threads.div_ceil(oc));
        (rc, (inner / 16).clamp(1, threads.div_ceil(oc * rc)))
    };
    let mut v = Vec::with_capacity(oc * rc * cc);
    for a in 0..oc {
        for b in 0..rc {
            for c in 0..cc {
                v.push(Task {
                    o: split(outer, oc, a, 1, 0),
                    r: split(n, rc, b, 1, 0),
                    c: split(inner, cc, c, 16, shift),
                    rb: b,
                    rc,
                });
            }
        }
    }
    v.retain(|t| t.o.0 < t.o.1 && t.r.0 < t.r.1 && t.c.0 < t.c.1);
    v
}

// ---------------------------------------------------------------------------------------------
// Row kernels: dst `[outer, n, inner]`, src `[outer, m, inner]`, one index per source row.

/// What a row kernel does with a source row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RowMode {
    Add,
    Assign,
}

#[derive(Clone, Copy, Debug)]
struct RowGeom {
    outer: usize,
    n: usize,
    m: usize,
    inner: usize,
}

/// Deterministic: destination-partitioned, sources in order (see the module docs).
fn rows_det<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    mode: RowMode,
    par: &Par,
) {
    let RowGeom { outer, n, m, inner } = g;
    if dst.is_empty() || src.is_empty() {
        return;
    }
    let work = src.len() + outer * m;
    let threads = if work < 1 << 15 { 1 } else { par.threads() };
    let nb = row_blocks(g);
    if mode == RowMode::Add && nb > 1 {
        return rows_det_blocks(dst, src, idx, g, nb, par);
    }
    let ts = tasks(outer, n, inner, threads, false, line_shift(dst));
    let rc = ts.first().map_or(1, |t| t.rc);
    // With several row ranges, the source rows are first bucketed by range, in source order
    // (chunk by chunk, each chunk's list in order), so that a task visits only its own sources
    // instead of testing every index.
    let buckets: Vec<Vec<Vec<u32>>> = if rc > 1 && m <= u32::MAX as usize {
        let chunk = m.div_ceil(threads).max(1 << 12);
        par.install(|| {
            idx.par_chunks(chunk)
                .enumerate()
                .map(|(c, ic)| {
                    let mut b = vec![Vec::with_capacity(ic.len() / rc + 16); rc];
                    for (j, &r) in ic.iter().enumerate() {
                        // The range of row r: the b with floor(n*b/rc) <= r < floor(n*(b+1)/rc).
                        let id = ((r as usize + 1) * rc).div_ceil(n) - 1;
                        b[id].push((c * chunk + j) as u32);
                    }
                    b
                })
                .collect()
        })
    } else {
        Vec::new()
    };
    let job = RowJob {
        dp: SyncPtr(dst.as_mut_ptr()),
        src,
        idx,
        g,
        mode,
        buckets: &buckets,
    };
    let simd = row_isa();
    // SAFETY: the tasks are disjoint (see `RowJob::run`), and `simd` is supported.
    let run = |t: &Task| unsafe { job.run(t, simd) };
    if ts.len() <= 1 {
        ts.iter().for_each(run);
    } else {
        par.install(|| ts.par_iter().for_each(run));
    }
}

/// Rows ahead of the current one whose source (and destination) the row loops prefetch: the
/// source is streamed, but the hardware prefetchers stop at 4 KiB pages, and the destination
/// rows are random.
const PF_ROWS: usize = 8;

/// Prefetches the `bytes` bytes from `p` (one hint per 64-byte line, at most 8 lines).
#[inline(always)]
fn prefetch_row<T>(p: *const T, bytes: usize) {
    prefetch(p, 0..bytes.min(512).div_ceil(64), true);
}

/// `d[i] += s[i]` (one addition per element: the same bits however it is vectorised).
#[inline(always)]
fn add_row<T: AccElem>(d: &mut [T], s: &[T]) {
    for (d, &s) in d.iter_mut().zip(s) {
        *d = T::add(*d, s);
    }
}

#[cfg(test)]
thread_local! {
    /// Tests force an instruction set on their thread to compare it with the others.
    static FORCE: core::cell::Cell<Option<Isa>> = const { core::cell::Cell::new(None) };
}

/// The instruction set the row loops are compiled for (elementwise adds: the results do not
/// depend on it): the widest the CPU has, read on the calling thread before any task runs.
fn row_isa() -> Isa {
    #[cfg(test)]
    if let Some(s) = FORCE.with(|f| f.get()) {
        return s;
    }
    Isa::best()
}

/// One deterministic row kernel run: what every task of [`rows_det`] shares.
struct RowJob<'a, T> {
    dp: SyncPtr<T>,
    src: &'a [T],
    idx: &'a [i64],
    g: RowGeom,
    mode: RowMode,
    buckets: &'a [Vec<Vec<u32>>],
}

// SAFETY: `dp` is only written through disjoint tasks (see `RowJob::run`).
unsafe impl<T: Send> Sync for RowJob<'_, T> {}

impl<T: AccElem> RowJob<'_, T> {
    /// Runs task `t`.
    ///
    /// # Safety
    /// No other task may overlap `t`'s destination block while it runs, and `simd` must be
    /// supported by the CPU.
    unsafe fn run(&self, t: &Task, simd: Isa) {
        match simd {
            // SAFETY: the caller's guarantees.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { self.run_avx512(t) },
            // SAFETY: the caller's guarantees.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { self.run_avx2(t) },
            // SAFETY: the caller's guarantees.
            _ => unsafe { self.run_generic(t) },
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(&self, t: &Task) {
        // SAFETY: the caller's guarantees.
        unsafe { self.run_generic(t) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, t: &Task) {
        // SAFETY: the caller's guarantees.
        unsafe { self.run_generic(t) }
    }

    /// Task `t`: every source row that lands in its destination block, in source order.
    #[inline(always)]
    unsafe fn run_generic(&self, t: &Task) {
        let RowGeom { n, m, inner, .. } = self.g;
        let (src, idx, dp) = (self.src, self.idx, self.dp);
        let (r0, r1) = t.r;
        let (c0, c1) = t.c;
        let w = c1 - c0;
        let bytes = w * core::mem::size_of::<T>();
        let full = r0 == 0 && r1 == n;
        let row = |o: usize, k: usize, r: usize| {
            let sbase = o * m * inner;
            let dbase = o * n * inner;
            let s = &src[sbase + k * inner + c0..sbase + k * inner + c1];
            // SAFETY: indices were checked to be in 0..n; this task is the only one that
            // touches rows r0..r1, columns c0..c1 of outer rows t.o (tasks are disjoint).
            let d =
                unsafe { core::slice::from_raw_parts_mut(dp.get().add(dbase + r * inner + c0), w) };
            match self.mode {
                RowMode::Add => add_row(d, s),
                RowMode::Assign => d.copy_from_slice(s),
            }
        };
        // Prefetch of the row `PF_ROWS` visits ahead (source and destination).
        let ahead = |o: usize, k: usize| {
            let r = idx[k] as usize;
            prefetch_row(src.as_ptr().wrapping_add((o * m + k) * inner + c0), bytes);
            prefetch_row(
                dp.get().cast_const().wrapping_add((o * n + r) * inner + c0),
                bytes,
            );
        };
        for o in t.o.0..t.o.1 {
            if full {
                for (k, &r) in idx.iter().enumerate() {
                    if k + PF_ROWS < m {
                        ahead(o, k + PF_ROWS);
                    }
                    row(o, k, r as usize);
                }
            } else if !self.buckets.is_empty() {
                for lists in self.buckets {
                    let l = &lists[t.rb];
                    for (j, &k) in l.iter().enumerate() {
                        if let Some(&ka) = l.get(j + PF_ROWS) {
                            ahead(o, ka as usize);
                        }
                        row(o, k as usize, idx[k as usize] as usize);
                    }
                }
            } else {
                for (k, &r) in idx.iter().enumerate() {
                    let r = r as usize;
                    if r >= r0 && r < r1 {
                        row(o, k, r);
                    }
                }
            }
        }
    }
}

/// Number of source blocks of the deterministic row kernel: a function of the shapes only.
/// Many sources into a small destination (at least 32 source elements per destination element
/// and 8192 source rows per block) use per-block partial sums; otherwise 1 (destination
/// partitioning). The partials of the blocks after the first together hold at most 1/32 of the
/// source's elements, so zeroing and adding them costs little next to streaming the source.
fn row_blocks(g: RowGeom) -> usize {
    let src = g.outer * g.m * g.inner;
    let dst = (g.outer * g.n * g.inner).max(1);
    (1 + src / (32 * dst)).min(g.m / 8192).clamp(1, 16)
}

/// Deterministic, for many sources into a small destination: the source rows are cut into `nb`
/// blocks (fixed by the shapes); the first block adds its rows in order into the destination
/// itself, every other block into a private zeroed buffer, and every destination element then
/// adds the partials of blocks `1..nb` in block order. The order of every addition depends on
/// the shapes only.
///
/// Each block is one task per destination-row range (`threads / nb` ranges, at least 1: more
/// tasks than blocks only when there are more threads than blocks), so at up to `nb` threads
/// every task streams its own contiguous part of the source.
fn rows_det_blocks<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    nb: usize,
    par: &Par,
) {
    let RowGeom { n, m, .. } = g;
    let len = dst.len();
    let mut parts = zeroed_vec::<T>((nb - 1) * len);
    let rc = par.threads().div_ceil(nb).clamp(1, n.max(1));
    let simd = row_isa();
    let (dp, pp) = (SyncPtr(dst.as_mut_ptr()), SyncPtr(parts.as_mut_ptr()));
    let run = |t: usize| {
        let (b, j) = (t / rc, t % rc);
        let buf = if b == 0 {
            dp.get()
        } else {
            pp.get().wrapping_add((b - 1) * len)
        };
        let ks = (m * b / nb, m * (b + 1) / nb);
        // SAFETY: `buf` is a buffer of `len` elements (the destination or partial b - 1); this
        // task alone writes its rows `split(n, rc, j)` (tasks are disjoint); `simd` is
        // supported by the CPU.
        unsafe { block_rows(buf, src, idx, g, ks, split(n, rc, j, 1, 0), simd) }
    };
    par.install(|| (0..nb * rc).into_par_iter().for_each(run));
    if nb == 1 {
        return;
    }
    const C: usize = 1 << 12;
    par.install(|| {
        dst.par_chunks_mut(C).enumerate().for_each(|(c, d)| {
            let lo = c * C;
            for b in 0..nb - 1 {
                let p = &parts[b * len + lo..b * len + lo + d.len()];
                for (d, &v) in d.iter_mut().zip(p) {
                    *d = T::add(*d, v);
                }
            }
        })
    });
}

/// Adds the source rows `ks.0..ks.1` (of every outer index) whose destination row is in
/// `rows.0..rows.1` into the buffer at `p` (laid out as the destination), in source order.
///
/// # Safety
/// `p` must point to `outer * n * inner` elements, whose rows `rows.0..rows.1` no one else
/// touches meanwhile; the indices must be in `0..n`; `simd` must be supported by the CPU.
unsafe fn block_rows<T: AccElem>(
    p: *mut T,
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    ks: (usize, usize),
    rows: (usize, usize),
    simd: Isa,
) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512<T: AccElem>(
        p: *mut T,
        src: &[T],
        idx: &[i64],
        g: RowGeom,
        ks: (usize, usize),
        rows: (usize, usize),
    ) {
        // SAFETY: the caller's guarantees.
        unsafe { generic(p, src, idx, g, ks, rows) };
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<T: AccElem>(
        p: *mut T,
        src: &[T],
        idx: &[i64],
        g: RowGeom,
        ks: (usize, usize),
        rows: (usize, usize),
    ) {
        // SAFETY: the caller's guarantees.
        unsafe { generic(p, src, idx, g, ks, rows) };
    }
    #[inline(always)]
    unsafe fn generic<T: AccElem>(
        p: *mut T,
        src: &[T],
        idx: &[i64],
        g: RowGeom,
        ks: (usize, usize),
        rows: (usize, usize),
    ) {
        let RowGeom { outer, n, m, inner } = g;
        let bytes = inner * core::mem::size_of::<T>();
        let mine = |r: usize| r >= rows.0 && r < rows.1;
        for o in 0..outer {
            for k in ks.0..ks.1 {
                if k + PF_ROWS < ks.1 {
                    let ka = k + PF_ROWS;
                    let ra = idx[ka] as usize;
                    if mine(ra) {
                        prefetch_row(src.as_ptr().wrapping_add((o * m + ka) * inner), bytes);
                        prefetch_row(p.cast_const().wrapping_add((o * n + ra) * inner), bytes);
                    }
                }
                let r = idx[k] as usize;
                if !mine(r) {
                    continue;
                }
                let s = &src[(o * m + k) * inner..(o * m + k + 1) * inner];
                // SAFETY: r < n (checked indices), so the row is inside the buffer, and it is
                // this task's alone (the caller's guarantees).
                let d =
                    unsafe { core::slice::from_raw_parts_mut(p.add((o * n + r) * inner), inner) };
                add_row(d, s);
            }
        }
    }
    match simd {
        // SAFETY: the caller's guarantees.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512(p, src, idx, g, ks, rows) },
        // SAFETY: the caller's guarantees.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2(p, src, idx, g, ks, rows) },
        // SAFETY: the caller's guarantees.
        _ => unsafe { generic(p, src, idx, g, ks, rows) },
    }
}

/// Nondeterministic: parallel over source rows, private buffers merged in completion order
/// (small destinations) or atomic adds (large ones).
///
/// With `atomic == false`, a destination too large for one buffer per thread (more buffer
/// elements than source elements) runs the destination-partitioned kernel instead (measured
/// 2–4× faster than atomics there); with `atomic == true`, always atomics (`*.atomic`).
fn rows_nondet<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    par: &Par,
    atomic: bool,
) {
    let RowGeom { outer, n, m, inner } = g;
    let threads = par.threads();
    if threads == 1 || src.len() < 1 << 15 || dst.is_empty() {
        return rows_det(dst, src, idx, g, RowMode::Add, par);
    }
    // Source rows (o, k) flattened, cut into one range per thread.
    let rows = outer * m;
    let per = rows.div_ceil(threads);
    let buffers = dst.len() * threads <= src.len();
    if !atomic && !buffers {
        return rows_det(dst, src, idx, g, RowMode::Add, par);
    }
    if !atomic {
        let total = Mutex::new(dst);
        let simd = row_isa();
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                // Source rows k in one range per thread (for every outer index).
                let mut buf = zeroed_vec::<T>(outer * n * inner);
                let ks = (m * t / threads, m * (t + 1) / threads);
                // SAFETY: `buf` is laid out as the destination and private; `simd` is
                // supported by the CPU.
                unsafe { block_rows(buf.as_mut_ptr(), src, idx, g, ks, (0, n), simd) };
                let mut out = total.lock().unwrap_or_else(|e| e.into_inner());
                for (d, &b) in out.iter_mut().zip(&buf) {
                    *d = T::add(*d, b);
                }
            })
        });
    } else {
        let dp = SyncPtr(dst.as_mut_ptr());
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                for row in t * per..((t + 1) * per).min(rows) {
                    let (o, k) = (row / m, row % m);
                    let r = idx[k] as usize;
                    let base = (o * n + r) * inner;
                    for (j, &s) in src[row * inner..(row + 1) * inner].iter().enumerate() {
                        // SAFETY: in bounds (indices checked); all concurrent access is atomic.
                        unsafe { T::atomic_add(dp.get().add(base + j), s) };
                    }
                }
            })
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Element-index kernels (scatter_add): dst `[outer, n, inner]`, idx/src `[outer, m, inner]`.

fn scatter_det<T: AccElem>(dst: &mut [T], src: &[T], idx: &[i64], g: RowGeom, par: &Par) {
    let RowGeom { outer, n, m, inner } = g;
    if dst.is_empty() || src.is_empty() {
        return;
    }
    let nb = scatter_blocks(g);
    if nb > 1 {
        return scatter_det_blocks(dst, src, idx, g, nb, par);
    }
    let threads = if src.len() < 1 << 15 {
        1
    } else {
        par.threads()
    };
    let ts = tasks(outer, n, inner, threads, true, line_shift(dst));
    let dp = SyncPtr(dst.as_mut_ptr());
    let run = |t: &Task| {
        let (r0, r1) = t.r;
        let (c0, c1) = t.c;
        for o in t.o.0..t.o.1 {
            for k in 0..m {
                let base = (o * m + k) * inner;
                let ir = &idx[base + c0..base + c1];
                let sr = &src[base + c0..base + c1];
                let dbase = o * n * inner + c0;
                for (j, (&r, &s)) in ir.iter().zip(sr).enumerate() {
                    let r = r as usize;
                    if r >= r0 && r < r1 {
                        // SAFETY: in bounds (indices checked); this task alone owns rows
                        // r0..r1 × columns c0..c1 of its outer range.
                        unsafe {
                            let p = dp.get().add(dbase + r * inner + j);
                            *p = T::add(*p, s);
                        }
                    }
                }
            }
        }
    };
    if ts.len() <= 1 {
        ts.iter().for_each(run);
    } else {
        par.install(|| ts.par_iter().for_each(run));
    }
}

/// Number of source blocks of the deterministic scatter kernel (a function of the shapes only):
/// partials when there are at least 16 source elements per destination element, 8192 source
/// rows per block, up to 16 blocks. More blocks than [`row_blocks`] gives: the blocks are the
/// only parallelism of [`scatter_det_blocks`].
fn scatter_blocks(g: RowGeom) -> usize {
    let src = g.outer * g.m * g.inner;
    let dst = (g.outer * g.n * g.inner).max(1);
    (src / (8 * dst)).min(g.m / 8192).clamp(1, 16)
}

/// [`rows_det_blocks`] per element: source-row blocks fixed by the shapes, each summed in order
/// into a private buffer, the partials added per element in block order.
fn scatter_det_blocks<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    nb: usize,
    par: &Par,
) {
    let RowGeom { outer, n, m, inner } = g;
    let len = dst.len();
    let mut parts = zeroed_vec::<T>(nb * len);
    par.install(|| {
        parts.par_chunks_mut(len).enumerate().for_each(|(b, p)| {
            let (k0, k1) = (m * b / nb, m * (b + 1) / nb);
            for o in 0..outer {
                let dbase = o * n * inner;
                for k in k0..k1 {
                    let base = (o * m + k) * inner;
                    let ir = &idx[base..base + inner];
                    let sr = &src[base..base + inner];
                    for (j, (&r, &v)) in ir.iter().zip(sr).enumerate() {
                        let q = dbase + r as usize * inner + j;
                        p[q] = T::add(p[q], v);
                    }
                }
            }
        })
    });
    combine_blocks(dst, &parts, nb, par);
}

/// `dst[e] += parts[0][e] + … + parts[nb-1][e]`, one addition at a time in block order.
fn combine_blocks<T: AccElem>(dst: &mut [T], parts: &[T], nb: usize, par: &Par) {
    let len = dst.len();
    const C: usize = 1 << 12;
    par.install(|| {
        dst.par_chunks_mut(C).enumerate().for_each(|(c, d)| {
            let lo = c * C;
            for b in 0..nb {
                let p = &parts[b * len + lo..b * len + lo + d.len()];
                for (d, &v) in d.iter_mut().zip(p) {
                    *d = T::add(*d, v);
                }
            }
        })
    });
}

/// As [`rows_nondet`], per element.
fn scatter_nondet<T: AccElem>(
    dst: &mut [T],
    src: &[T],
    idx: &[i64],
    g: RowGeom,
    par: &Par,
    atomic: bool,
) {
    let RowGeom { outer, n, m, inner } = g;
    let threads = par.threads();
    if threads == 1 || src.len() < 1 << 15 || dst.is_empty() {
        return scatter_det(dst, src, idx, g, par);
    }
    let buffers = dst.len() * threads <= src.len();
    if !atomic && !buffers {
        return scatter_det(dst, src, idx, g, par);
    }
    // Source rows (o, k) flattened, one contiguous range per thread; `add(q, v)` adds `v` at
    // destination element `q`.
    let rows = outer * m;
    let per = rows.div_ceil(threads);
    /// Calls `add(destination element, value)` for source rows `r0..r1` in order.
    #[inline(always)]
    fn visit<T: Copy>(
        (idx, src): (&[i64], &[T]),
        (r0, r1): (usize, usize),
        (m, n, inner): (usize, usize, usize),
        mut add: impl FnMut(usize, T),
    ) {
        for row in r0..r1 {
            let dbase = (row / m) * n * inner;
            let ir = &idx[row * inner..(row + 1) * inner];
            let sr = &src[row * inner..(row + 1) * inner];
            for (j, (&r, &v)) in ir.iter().zip(sr).enumerate() {
                add(dbase + r as usize * inner + j, v);
            }
        }
    }
    let range = |t: usize| (t * per, ((t + 1) * per).min(rows));
    if !atomic {
        let total = Mutex::new(dst);
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                let mut buf = vec![T::default(); outer * n * inner];
                visit((idx, src), range(t), (m, n, inner), |q, v| {
                    buf[q] = T::add(buf[q], v)
                });
                let mut out = total.lock().unwrap_or_else(|e| e.into_inner());
                for (d, &b) in out.iter_mut().zip(&buf) {
                    *d = T::add(*d, b);
                }
            })
        });
    } else {
        let dp = SyncPtr(dst.as_mut_ptr());
        par.install(|| {
            (0..threads).into_par_iter().for_each(|t| {
                // SAFETY: in bounds (indices checked); all concurrent access is atomic.
                visit((idx, src), range(t), (m, n, inner), |q, v| unsafe {
                    T::atomic_add(dp.get().add(q), v)
                });
            })
        });
    }
}

/// Sequential scatter for index shapes smaller than `src`/`self` in some dimension: visits the
/// index positions in row-major order (the order both policies' kernels use).
fn scatter_general<T: AccElem>(
    dst: &mut [T],
    dshape: &[usize],
    src: &[T],
    sshape: &[usize],
    idx: &[i64],
    ishape: &[usize],
    dim: usize,
) {
    let ds = contiguous_strides(dshape);
    let ss = contiguous_strides(sshape);
    let nd = ishape.len();
    let mut pos = vec![0usize; nd];
    for &r in idx {
        let mut so = 0;
        let mut d_o = 0;
        for d in 0..nd {
            so += pos[d] * ss[d];
            d_o += if d == dim { r as usize } else { pos[d] } * ds[d];
        }
        dst[d_o] = T::add(dst[d_o], src[so]);
        for d in (0..nd).rev() {
            pos[d] += 1;
            if pos[d] < ishape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// index_select, gather (no accumulation: one deterministic kernel each).

fn index_select_kernel(x: &Tensor, dim: usize, idx: &[i64], par: &Par) -> Result<Tensor> {
    let (outer, n, inner) = geom(x.shape(), dim);
    let m = idx.len();
    let mut shape = x.shape().to_vec();
    if shape.is_empty() {
        shape.push(m);
    } else {
        shape[dim] = m;
    }
    let _ = n;
    let xc = x.contiguous();
    crate::with_dtype!(x.dtype(), T => {
        let s = dense::<T>(&xc)?;
        let mut out = zeroed_vec::<T>(outer * m * inner);
        if !out.is_empty() {
            let min_rows = ((1 << 12) / inner.max(1)).max(1);
            par.install(|| {
                out.par_chunks_mut(inner).enumerate().with_min_len(min_rows).for_each(|(l, d)| {
                    let (o, k) = (l / m, l % m);
                    let r = idx[k] as usize;
                    let b = (o * n + r) * inner;
                    d.copy_from_slice(&s[b..b + inner]);
                })
            });
        }
        Tensor::from_vec(out, &shape)
    })
}

fn gather_kernel(x: &Tensor, dim: usize, index: &Tensor, idx: &[i64], par: &Par) -> Result<Tensor> {
    let ishape = index.shape().to_vec();
    let xs = contiguous_strides(x.shape());
    let nd = ishape.len();
    let last = ishape.last().copied().unwrap_or(1);
    let xc = x.contiguous();
    crate::with_dtype!(x.dtype(), T => {
        let s = dense::<T>(&xc)?;
        let mut out = zeroed_vec::<T>(idx.len());
        if !out.is_empty() && last > 0 {
            let min_rows = ((1 << 12) / last).max(1);
            par.install(|| {
                out.par_chunks_mut(last).enumerate().with_min_len(min_rows).for_each(|(row, d)| {
                    // Base offset of this row in x, without the `dim` component.
                    let mut rem = row;
                    let mut base = 0;
                    for a in (0..nd.saturating_sub(1)).rev() {
                        let p = rem % ishape[a];
                        rem /= ishape[a];
                        if a != dim {
                            base += p * xs[a];
                        }
                    }
                    let ir = &idx[row * last..(row + 1) * last];
                    if nd == 0 {
                        d[0] = s[ir[0] as usize];
                    } else if dim == nd - 1 {
                        for (d, &i) in d.iter_mut().zip(ir) {
                            *d = s[base + i as usize];
                        }
                    } else {
                        let st = xs[dim];
                        for (j, (d, &i)) in d.iter_mut().zip(ir).enumerate() {
                            *d = s[base + j + i as usize * st];
                        }
                    }
                })
            });
        }
        Tensor::from_vec(out, &ishape)
    })
}

// ---------------------------------------------------------------------------------------------
// Registrations.

/// Kernel of `index_select`: `(x, dim, indices)`.
pub type IndexSelectFn = fn(&Tensor, usize, &[i64], &Par) -> Result<Tensor>;
/// Kernel of `gather`: `(x, dim, index, index values)`.
pub type GatherFn = fn(&Tensor, usize, &Tensor, &[i64], &Par) -> Result<Tensor>;

/// `torch.index_select`: one copy per selected row (no accumulation, so thread-invariant).
pub static INDEX_SELECT: Op<IndexSelectFn> = Op {
    name: "index_select",
    impls: &[Impl {
        algo: "index_select.row_copy",
        guarantee: Guarantee::ThreadInvariant,
        f: index_select_kernel,
    }],
};

/// `torch.gather`: one read per output element (thread-invariant).
pub static GATHER: Op<GatherFn> = Op {
    name: "gather",
    impls: &[Impl {
        algo: "gather.elementwise",
        guarantee: Guarantee::ThreadInvariant,
        f: gather_kernel,
    }],
};

/// Kernel of the row-accumulating ops (`index_add`, `index_put(accumulate)`, embedding
/// backward): `(dst, src, indices, geometry, par)` on flat buffers of one dtype.
#[derive(Clone, Copy)]
pub struct RowAddFn {
    f32: fn(&mut [f32], &[f32], &[i64], RowGeomPub, &Par),
    f64: fn(&mut [f64], &[f64], &[i64], RowGeomPub, &Par),
    i64: fn(&mut [i64], &[i64], &[i64], RowGeomPub, &Par),
}

/// `[outer, n, inner]` destination, `[outer, m, inner]` source of a row kernel.
#[derive(Clone, Copy, Debug)]
pub struct RowGeomPub {
    /// Product of the dimensions before the indexed one.
    pub outer: usize,
    /// Destination size of the indexed dimension.
    pub n: usize,
    /// Source size of the indexed dimension (the number of indices).
    pub m: usize,
    /// Product of the dimensions after the indexed one.
    pub inner: usize,
}

fn rg(g: RowGeomPub) -> RowGeom {
    RowGeom {
        outer: g.outer,
        n: g.n,
        m: g.m,
        inner: g.inner,
    }
}

macro_rules! row_fns {
    ($k:ident) => {
        RowAddFn {
            f32: |d, s, i, g, p| $k(d, s, i, rg(g), p),
            f64: |d, s, i, g, p| $k(d, s, i, rg(g), p),
            i64: |d, s, i, g, p| $k(d, s, i, rg(g), p),
        }
    };
}

fn rows_buffers<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_nondet(d, s, i, g, p, false);
}
fn rows_atomic<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_nondet(d, s, i, g, p, true);
}
fn scatter_buffers<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    scatter_nondet(d, s, i, g, p, false);
}
fn scatter_atomic<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    scatter_nondet(d, s, i, g, p, true);
}

fn rows_det_add<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_det(d, s, i, g, RowMode::Add, p);
}

const ROW_NONDET: RowAddFn = row_fns!(rows_buffers);
const ROW_ATOMIC: RowAddFn = row_fns!(rows_atomic);
const SCATTER_ATOMIC: RowAddFn = row_fns!(scatter_atomic);
const ROW_DET: RowAddFn = row_fns!(rows_det_add);
const SCATTER_NONDET: RowAddFn = row_fns!(scatter_buffers);
const SCATTER_DET: RowAddFn = row_fns!(scatter_det);

macro_rules! acc_op {
    ($(#[$m:meta])* $name:ident: $ty:ty, $op:literal, $nd:literal, $d:literal, $nk:expr, $dk:expr) => {
        $(#[$m])*
        pub static $name: Op<$ty> = Op {
            name: $op,
            impls: &[
                Impl {
                    algo: $nd,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $nk,
                },
                Impl {
                    algo: $d,
                    guarantee: Guarantee::ThreadInvariant,
                    f: $dk,
                },
            ],
        };
    };
    ($(#[$m:meta])* $name:ident: $ty:ty, $op:literal, $nd:literal, $d:literal, $a:literal, $nk:expr, $dk:expr, $ak:expr) => {
        $(#[$m])*
        ///
        /// Implementations: source-parallel with per-thread buffers (first; it runs the
        /// destination-partitioned kernel when the destination is too large for a buffer per
        /// thread), destination-partitioned (deterministic), and atomic compare-and-swap adds
        /// (last: only through [`Op::by_algo`], for benchmarks and tuning).
        pub static $name: Op<$ty> = Op {
            name: $op,
            impls: &[
                Impl {
                    algo: $nd,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $nk,
                },
                Impl {
                    algo: $d,
                    guarantee: Guarantee::ThreadInvariant,
                    f: $dk,
                },
                Impl {
                    algo: $a,
                    guarantee: Guarantee::NotGuaranteed,
                    f: $ak,
                },
            ],
        };
    };
}

acc_op!(
    /// `Tensor.index_add`: source rows added into the rows the index names.
    INDEX_ADD: RowAddFn, "index_add", "index_add.source_parallel", "index_add.dest_partitioned", "index_add.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);
acc_op!(
    /// `Tensor.scatter_add`: source elements added at the positions the index names.
    SCATTER_ADD: RowAddFn, "scatter_add", "scatter_add.source_parallel", "scatter_add.dest_partitioned", "scatter_add.atomic", SCATTER_NONDET, SCATTER_DET, SCATTER_ATOMIC
);
acc_op!(
    /// `Tensor.index_put_(indices, values, accumulate=True)`.
    INDEX_PUT_ACCUMULATE: RowAddFn, "index_put", "index_put.source_parallel", "index_put.dest_partitioned", "index_put.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);
acc_op!(
    /// `embedding_dense_backward`: gradient rows summed per token id.
    EMBEDDING_BACKWARD: RowAddFn, "embedding_backward", "embedding_backward.source_parallel",
    "embedding_backward.dest_partitioned", "embedding_backward.atomic", ROW_NONDET, ROW_DET, ROW_ATOMIC
);

fn run_rows(
    op: &'static Op<RowAddFn>,
    dst: &mut Tensor,
    src: &Tensor,
    idx: &[i64],
    g: RowGeomPub,
) -> Result<()> {
    let c = op.select()?;
    let src = src.contiguous();
    match dst.dtype() {
        DType::F32 => (c.imp.f.f32)(dense_mut(dst)?, dense(&src)?, idx, g, &c.par),
        DType::F64 => (c.imp.f.f64)(dense_mut(dst)?, dense(&src)?, idx, g, &c.par),
        DType::I64 => (c.imp.f.i64)(dense_mut(dst)?, dense(&src)?, idx, g, &c.par),
        got => {
            return Err(Error::DType {
                op: op.name,
                expected: DType::F32,
                got,
            });
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// bincount / histc: counts into bins.

/// Number of blocks the deterministic histogram cuts `n` inputs into for `bins` bins: a
/// function of the shapes only (at least 2^16 inputs per block, at most 64 blocks, and the
/// block partials together at most half as many values as the input).
fn hist_blocks(n: usize, bins: usize) -> usize {
    let by_len = (n >> 16).clamp(1, 64);
    let by_mem = (n / (2 * bins.max(1))).max(1);
    by_len.min(by_mem)
}

/// What a histogram counts.
#[derive(Clone, Copy, Debug)]
pub enum HistInput<'a> {
    /// Values that are bin numbers already (`bincount`; checked non-negative).
    Bins(&'a [i64]),
    /// `f32` values binned in `bins` equal bins over `[lo, hi]` (`histc`).
    F32 {
        /// The values.
        x: &'a [f32],
        /// Left edge.
        lo: f32,
        /// Right edge.
        hi: f32,
    },
    /// `f64` values binned in `bins` equal bins over `[lo, hi]` (`histc`).
    F64 {
        /// The values.
        x: &'a [f64],
        /// Left edge.
        lo: f64,
        /// Right edge.
        hi: f64,
    },
}

/// Kernel of a histogram: `(input, weights or None for counts, number of bins, par)`.
pub type HistFn<W> = fn(&HistInput<'_>, Option<&[W]>, usize, &Par) -> Vec<W>;

/// Deterministic histogram: fixed blocks, each counted in order, partials added per bin in
/// block order.
fn hist_det_g<W: AccElem>(
    bin: &(impl Fn(usize) -> usize + Sync),
    n: usize,
    w: &(impl Fn(usize) -> W + Sync),
    nbins: usize,
    par: &Par,
) -> Vec<W> {
    let nb = hist_blocks(n, nbins);
    let count = |lo: usize, hi: usize, out: &mut [W]| {
        for i in lo..hi {
            let b = bin(i);
            if b < nbins {
                out[b] = W::add(out[b], w(i));
            }
        }
    };
    let mut out = vec![W::default(); nbins];
    if nb == 1 || nbins == 0 {
        count(0, n, &mut out);
        return out;
    }
    let mut parts = vec![W::default(); nb * nbins];
    par.install(|| {
        parts
            .par_chunks_mut(nbins)
            .enumerate()
            .for_each(|(b, p)| count(n * b / nb, n * (b + 1) / nb, p))
    });
    par.install(|| {
        out.par_chunks_mut(1 << 12).enumerate().for_each(|(c, o)| {
            let lo = c << 12;
            for b in 0..nb {
                let p = &parts[b * nbins + lo..b * nbins + lo + o.len()];
                for (o, &v) in o.iter_mut().zip(p) {
                    *o = W::add(*o, v);
                }
            }
        })
    });
    out
}

/// Nondeterministic histogram: one contiguous range per thread, buffers merged as threads
/// finish.
fn hist_nondet_g<W: AccElem>(
    bin: &(impl Fn(usize) -> usize + Sync),
    n: usize,
    w: &(impl Fn(usize) -> W + Sync),
    nbins: usize,
    par: &Par,
) -> Vec<W> {
    let t = par.threads();
    let count = |lo: usize, hi: usize, out: &mut [W]| {
        for i in lo..hi {
            let b = bin(i);
            if b < nbins {
                out[b] = W::add(out[b], w(i));
            }
        }
    };
    if t == 1 || n < 1 << 15 {
        let mut out = vec![W::default(); nbins];
        count(0, n, &mut out);
        return out;
    }
    let total = Mutex::new(vec![W::default(); nbins]);
    par.install(|| {
        (0..t).into_par_iter().for_each(|k| {
            let mut buf = vec![W::default(); nbins];
            count(n * k / t, n * (k + 1) / t, &mut buf);
            let mut o = total.lock().unwrap_or_else(|e| e.into_inner());
            for (o, &b) in o.iter_mut().zip(&buf) {
                *o = W::add(*o, b);
            }
        })
    });
    total.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// `histc`'s bin of `v` (PyTorch's formula, in the input's precision); `usize::MAX` outside
/// `[lo, hi]` or NaN.
macro_rules! histc_bin {
    ($T:ty, $x:expr, $lo:expr, $hi:expr, $bins:expr) => {{
        let (x, lo, hi, bins) = ($x, $lo, $hi, $bins);
        let span = hi - lo;
        move |i: usize| {
            let v = x[i];
            if !(v >= lo && v <= hi) {
                return usize::MAX;
            }
            let p = ((v - lo) * bins as $T / span) as usize;
            if p >= bins { bins - 1 } else { p }
        }
    }};
}

fn hist_run<W: AccElem>(
    inp: &HistInput<'_>,
    w: Option<&[W]>,
    nbins: usize,
    par: &Par,
    det: bool,
) -> Vec<W> {
    macro_rules! go {
        ($bin:expr, $n:expr) => {{
            let bin = $bin;
            match w {
                Some(w) => {
                    let wf = |i: usize| w[i];
                    if det {
                        hist_det_g(&bin, $n, &wf, nbins, par)
                    } else {
                        hist_nondet_g(&bin, $n, &wf, nbins, par)
                    }
                }
                None => {
                    let wf = |_: usize| W::ONE;
                    if det {
                        hist_det_g(&bin, $n, &wf, nbins, par)
                    } else {
                        hist_nondet_g(&bin, $n, &wf, nbins, par)
                    }
                }
            }
        }};
    }
    match *inp {
        HistInput::Bins(x) => go!(|i: usize| x[i] as usize, x.len()),
        HistInput::F32 { x, lo, hi } => go!(histc_bin!(f32, x, lo, hi, nbins), x.len()),
        HistInput::F64 { x, lo, hi } => go!(histc_bin!(f64, x, lo, hi, nbins), x.len()),
    }
}

fn hist_det<W: AccElem>(inp: &HistInput<'_>, w: Option<&[W]>, nbins: usize, par: &Par) -> Vec<W> {
    hist_run(inp, w, nbins, par, true)
}

fn hist_nondet<W: AccElem>(
    inp: &HistInput<'_>,
    w: Option<&[W]>,
    nbins: usize,
    par: &Par,
) -> Vec<W> {
    hist_run(inp, w, nbins, par, false)
}

/// The histogram kernels of each weight type.
#[derive(Clone, Copy)]
pub struct HistKernels {
    f32: HistFn<f32>,
    f64: HistFn<f64>,
    i64: HistFn<i64>,
}

const HIST_NONDET: HistKernels = HistKernels {
    f32: hist_nondet,
    f64: hist_nondet,
    i64: hist_nondet,
};
const HIST_DET: HistKernels = HistKernels {
    f32: hist_det,
    f64: hist_det,
    i64: hist_det,
};

acc_op!(
    /// `torch.bincount`: counts (or summed weights) per value.
    BINCOUNT: HistKernels, "bincount", "bincount.thread_buffers", "bincount.fixed_blocks", HIST_NONDET, HIST_DET
);
acc_op!(
    /// `torch.histc`: equal-width bins between `min` and `max` (integer counts, so both
    /// kernels give the same values; the deterministic one is still the one deterministic mode
    /// picks).
    HISTC: HistKernels, "histc", "histc.thread_buffers", "histc.fixed_blocks", HIST_NONDET, HIST_DET
);

/// Reduction of `embedding_bag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BagMode {
    /// Sum of the bag's rows.
    Sum,
    /// Mean of the bag's rows (zeros for an empty bag).
    Mean,
    /// Elementwise maximum of the bag's rows (zeros for an empty bag).
    Max,
}

/// Kernel of `embedding_bag`: `(weight, indices, bag starts, mode, par)`.
pub type EmbeddingBagFn = fn(&Tensor, &[i64], &[usize], BagMode, &Par) -> Result<Tensor>;

fn embedding_bag_kernel(
    w: &Tensor,
    idx: &[i64],
    starts: &[usize],
    mode: BagMode,
    par: &Par,
) -> Result<Tensor> {
    let d = w.shape()[1];
    let nbags = starts.len();
    let wc = w.contiguous();
    with_acc!("embedding_bag", w.dtype(), T => {
        let wd = dense::<T>(&wc)?;
        let mut out = vec![T::default(); nbags * d];
        if d > 0 {
            par.install(|| {
                out.par_chunks_mut(d).enumerate().for_each(|(b, o)| {
                    let lo = starts[b];
                    let hi = if b + 1 < nbags { starts[b + 1] } else { idx.len() };
                    for (j, &r) in idx[lo..hi].iter().enumerate() {
                        let row = &wd[r as usize * d..(r as usize + 1) * d];
                        if mode == BagMode::Max {
                            for (o, &v) in o.iter_mut().zip(row) {
                                if j == 0 || v > *o || v.partial_cmp(&v).is_none() { *o = v; }
                            }
                        } else {
                            for (o, &v) in o.iter_mut().zip(row) {
                                *o = T::add(*o, v);
                            }
                        }
                    }
                    if mode == BagMode::Mean && hi > lo {
                        let c = (hi - lo) as f64;
                        for o in o.iter_mut() {
                            *o = T::from_f64(o.to_f64() / c);
                        }
                    }
                })
            });
        }
        Tensor::from_vec(out, &[nbags, d])
    })
}

/// `torch.nn.functional.embedding_bag`: each bag reduces its rows in order (thread-invariant).
pub static EMBEDDING_BAG: Op<EmbeddingBagFn> = Op {
    name: "embedding_bag",
    impls: &[Impl {
        algo: "embedding_bag.per_bag",
        guarantee: Guarantee::ThreadInvariant,
        f: embedding_bag_kernel,
    }],
};

// ---------------------------------------------------------------------------------------------
// Tensor methods.

impl Tensor {
    /// `torch.index_select(x, dim, index)`: the rows `index` (a 0-d or 1-d `i64` tensor) along
    /// `dim`.
    ///
    /// # Errors
    /// A bad `dim`, a non-`i64` or multi-dimensional index, or an index outside `0..size`.
    pub fn index_select(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        one_dim(OP, "index", index)?;
        let idx = dense::<i64>(&ic)?;
        check_indices(OP, idx, geom(self.shape(), d).1)?;
        let c = INDEX_SELECT.select()?;
        (c.imp.f)(self, d, idx, &c.par)
    }

    /// `torch.gather(x, dim, index)`: `out[p] = x[p with dim replaced by index[p]]`; the
    /// output has `index`'s shape.
    ///
    /// # Errors
    /// A bad `dim`, a non-`i64` index, an index with another number of dimensions or a larger
    /// size than `x` outside `dim`, or an index outside `0..x.size(dim)`.
    pub fn gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "gather";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        check_index_shape(OP, self.shape(), index.shape(), d, None)?;
        let idx = dense::<i64>(&ic)?;
        check_indices(OP, idx, geom(self.shape(), d).1)?;
        let c = GATHER.select()?;
        (c.imp.f)(self, d, &ic, idx, &c.par)
    }

    /// `Tensor.scatter_add(dim, index, src)`: a copy of `self` with `src[p]` added at
    /// `p with dim replaced by index[p]` for every position `p` of `index`.
    ///
    /// # Errors
    /// A bad `dim`; a non-`i64` index; `src` of another dtype; `index` with another number of
    /// dimensions, larger than `src` anywhere or than `self` outside `dim`; an index outside
    /// `0..self.size(dim)`; [`Error::Nondeterministic`] cannot happen.
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        const OP: &str = "scatter_add";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        same_dtype(OP, self.dtype(), src)?;
        check_index_shape(OP, self.shape(), index.shape(), d, Some(src.shape()))?;
        let idx = dense::<i64>(&ic)?;
        let (outer, n, inner) = geom(self.shape(), d);
        check_indices(OP, idx, n)?;
        let mut out = fresh_copy(self)?;
        let fast = index.ndim() == 0
            || (index.shape() == src.shape()
                && (0..index.ndim()).all(|a| a == d || index.shape()[a] == self.shape()[a]));
        if fast {
            let m = if index.ndim() == 0 {
                1
            } else {
                index.shape()[d]
            };
            let g = RowGeomPub { outer, n, m, inner };
            run_rows(&SCATTER_ADD, &mut out, src, idx, g)?;
        } else {
            SCATTER_ADD.select()?;
            let sc = src.contiguous();
            let (ds, ss, is) = (
                self.shape().to_vec(),
                src.shape().to_vec(),
                index.shape().to_vec(),
            );
            with_acc!(OP, self.dtype(), T => {
                scatter_general(dense_mut::<T>(&mut out)?, &ds, dense::<T>(&sc)?, &ss, idx, &is, d);
                Ok::<(), Error>(())
            })?;
        }
        Ok(out)
    }

    /// `Tensor.index_add(dim, index, source)`: a copy of `self` with row `k` of `source` along
    /// `dim` added into row `index[k]`.
    ///
    /// # Errors
    /// A bad `dim`; a non-`i64` or multi-dimensional index; `source` of another dtype or a
    /// shape other than `self`'s with `dim` of size `index.numel()`; an index outside
    /// `0..self.size(dim)`; an unsupported dtype (`u8`, `bool`).
    pub fn index_add(&self, dim: isize, index: &Tensor, source: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_add";
        let d = dim_of(OP, dim, self)?;
        let ic = index_tensor(OP, index)?;
        one_dim(OP, "index", index)?;
        same_dtype(OP, self.dtype(), source)?;
        let idx = dense::<i64>(&ic)?;
        let mut expect = self.shape().to_vec();
        if !expect.is_empty() {
            expect[d] = idx.len();
        }
        if source.shape() != expect.as_slice() && !(self.ndim() == 0 && source.numel() == idx.len())
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: expect,
                rhs: source.shape().to_vec(),
            });
        }
        let (outer, n, inner) = geom(self.shape(), d);
        check_indices(OP, idx, n)?;
        let mut out = fresh_copy(self)?;
        run_rows(
            &INDEX_ADD,
            &mut out,
            source,
            idx,
            RowGeomPub {
                outer,
                n,
                m: idx.len(),
                inner,
            },
        )?;
        Ok(out)
    }

    /// `Tensor.index_put(indices, values, accumulate)`: `indices` are 1-d `i64` tensors of one
    /// length `m`, one per leading dimension (negative values count from the end); `values`
    /// holds `m` rows of the remaining dimensions (or one row, or one value, broadcast). With
    /// `accumulate`, values at repeated positions are summed; without, the last one wins.
    ///
    /// # Errors
    /// No or too many index tensors; non-`i64`, multi-dimensional or unequal-length indices;
    /// an index outside `-size..size`; `values` of another dtype or shape.
    pub fn index_put(
        &self,
        indices: &[Tensor],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        const OP: &str = "index_put";
        let k = indices.len();
        if k == 0 || k > self.ndim() {
            return Err(invalid(
                OP,
                "indices",
                format!("expected 1 to {} index tensors, got {k}", self.ndim()),
            ));
        }
        same_dtype(OP, self.dtype(), values)?;
        let shape = self.shape();
        let mut m = None;
        let mut lin: Vec<i64> = Vec::new();
        for (a, t) in indices.iter().enumerate() {
            let ic = index_tensor(OP, t)?;
            one_dim(OP, "indices", t)?;
            let v = dense::<i64>(&ic)?;
            match m {
                None => {
                    m = Some(v.len());
                    lin = vec![0; v.len()];
                }
                Some(mm) if mm != v.len() => {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        lhs: indices[0].shape().to_vec(),
                        rhs: t.shape().to_vec(),
                    });
                }
                _ => {}
            }
            let size = shape[a];
            for (l, &i) in lin.iter_mut().zip(v) {
                let w = if i < 0 { i + size as i64 } else { i };
                if w < 0 || w as usize >= size {
                    return Err(Error::IndexOutOfRange {
                        op: OP,
                        index: i,
                        size,
                    });
                }
                *l = *l * size as i64 + w;
            }
        }
        let m = m.unwrap_or(0);
        let rows: usize = shape[..k].iter().product();
        let rest = &shape[k..];
        let inner: usize = rest.iter().product();
        let vals = if values.numel() == m * inner {
            values.contiguous()
        } else if values.numel() == inner || values.numel() == 1 {
            // Broadcast one row (or one value) to m rows.
            let vc = values.contiguous();
            crate::with_dtype!(values.dtype(), T => {
                let v = dense::<T>(&vc)?;
                let row: Vec<T> = if v.len() == inner { v.to_vec() } else { vec![v[0]; inner] };
                let mut all = Vec::with_capacity(m * inner);
                for _ in 0..m {
                    all.extend_from_slice(&row);
                }
                Tensor::from_vec(all, &[m * inner])?
            })
        } else {
            let mut want = vec![m];
            want.extend_from_slice(rest);
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: want,
                rhs: values.shape().to_vec(),
            });
        };
        let g = RowGeomPub {
            outer: 1,
            n: rows,
            m,
            inner,
        };
        let mut out = fresh_copy(self)?;
        if accumulate {
            run_rows(&INDEX_PUT_ACCUMULATE, &mut out, &vals, &lin, g)?;
        } else {
            // Plain assignment: the destination-partitioned kernel, sources in order, so the
            // last write wins at any thread count.
            let par = Par::current();
            let g = rg(g);
            match self.dtype() {
                DType::F32 => rows_det(
                    dense_mut::<f32>(&mut out)?,
                    dense(&vals)?,
                    &lin,
                    g,
                    RowMode::Assign,
                    &par,
                ),
                DType::F64 => rows_det(
                    dense_mut::<f64>(&mut out)?,
                    dense(&vals)?,
                    &lin,
                    g,
                    RowMode::Assign,
                    &par,
                ),
                DType::I64 => rows_det(
                    dense_mut::<i64>(&mut out)?,
                    dense(&vals)?,
                    &lin,
                    g,
                    RowMode::Assign,
                    &par,
                ),
                DType::U8 => assign_rows(dense_mut::<u8>(&mut out)?, dense(&vals)?, &lin, inner),
                DType::Bool => {
                    assign_rows(dense_mut::<bool>(&mut out)?, dense(&vals)?, &lin, inner)
                }
            }
        }
        Ok(out)
    }

    /// `torch.nn.functional.embedding(indices, weight)` with `self` the `[V, D]` weight: the
    /// rows `indices` (any shape) → `[*indices.shape, D]`.
    ///
    /// # Errors
    /// `self` not 2-d; a non-`i64` index; an index outside `0..V`.
    pub fn embedding(&self, indices: &Tensor) -> Result<Tensor> {
        const OP: &str = "embedding";
        if self.ndim() != 2 {
            return Err(invalid(
                OP,
                "weight",
                format!("expected a 2-d weight, got shape {:?}", self.shape()),
            ));
        }
        let ic = index_tensor(OP, indices)?;
        let idx = dense::<i64>(&ic)?;
        check_indices(OP, idx, self.shape()[0])?;
        let c = INDEX_SELECT.select()?;
        let out = (c.imp.f)(self, 0, idx, &c.par)?;
        let mut shape = indices.shape().to_vec();
        shape.push(self.shape()[1]);
        crate::with_dtype!(out.dtype(), T => Tensor::from_vec(out.to_vec::<T>()?, &shape))
    }

    /// `embedding_dense_backward(grad, indices, num_weights)`: the gradient of the weight,
    /// `[num_weights, D]`, with row `v` the sum (in token order, deterministically) of the rows
    /// of `grad` (`[*indices.shape, D]`) whose token is `v`.
    ///
    /// # Errors
    /// A non-`i64` index; `grad` not float or not shaped `[*indices.shape, D]`; an index outside
    /// `0..num_weights`.
    pub fn embedding_backward(
        grad: &Tensor,
        indices: &Tensor,
        num_weights: usize,
    ) -> Result<Tensor> {
        const OP: &str = "embedding_backward";
        let ic = index_tensor(OP, indices)?;
        if !grad.dtype().is_float() {
            return Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got: grad.dtype(),
            });
        }
        if grad.ndim() != indices.ndim() + 1 || grad.shape()[..indices.ndim()] != *indices.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: indices.shape().to_vec(),
                rhs: grad.shape().to_vec(),
            });
        }
        let idx = dense::<i64>(&ic)?;
        check_indices(OP, idx, num_weights)?;
        let d = *grad.shape().last().unwrap_or(&0);
        let mut out = match grad.dtype() {
            DType::F32 => Tensor::from_vec(zeroed_vec::<f32>(num_weights * d), &[num_weights, d])?,
            _ => Tensor::from_vec(zeroed_vec::<f64>(num_weights * d), &[num_weights, d])?,
        };
        let g = RowGeomPub {
            outer: 1,
            n: num_weights,
            m: idx.len(),
            inner: d,
        };
        run_rows(&EMBEDDING_BACKWARD, &mut out, grad, idx, g)?;
        Ok(out)
    }

    /// `torch.nn.functional.embedding_bag(indices, weight, offsets, mode)` with `self` the
    /// `[V, D]` weight, `indices` 1-d and `offsets` 1-d (bag `b` is
    /// `indices[offsets[b]..offsets[b+1]]`, the last bag runs to the end) → `[B, D]`.
    ///
    /// # Errors
    /// `self` not a 2-d float tensor; non-`i64` or multi-dimensional indices/offsets; offsets
    /// not starting at 0, decreasing, or past the end; an index outside `0..V`.
    pub fn embedding_bag(
        &self,
        indices: &Tensor,
        offsets: &Tensor,
        mode: BagMode,
    ) -> Result<Tensor> {
        const OP: &str = "embedding_bag";
        if self.ndim() != 2 || !self.dtype().is_float() {
            return Err(invalid(
                OP,
                "weight",
                format!(
                    "expected a 2-d float weight, got {:?} {:?}",
                    self.shape(),
                    self.dtype()
                ),
            ));
        }
        let ic = index_tensor(OP, indices)?;
        one_dim(OP, "indices", indices)?;
        let oc = index_tensor(OP, offsets)?;
        one_dim(OP, "offsets", offsets)?;
        let idx = dense::<i64>(&ic)?;
        let offs = dense::<i64>(&oc)?;
        check_indices(OP, idx, self.shape()[0])?;
        if let Some(&f) = offs.first()
            && f != 0
        {
            return Err(invalid(
                OP,
                "offsets",
                format!("offsets[0] has to be 0, got {f}"),
            ));
        }
        let mut starts = Vec::with_capacity(offs.len());
        let mut prev = 0i64;
        for &o in offs {
            if o < prev || o as u64 > idx.len() as u64 {
                return Err(invalid(
                    OP,
                    "offsets",
                    format!(
                        "offsets must be non-decreasing and at most {}, got {o} after {prev}",
                        idx.len()
                    ),
                ));
            }
            prev = o;
            starts.push(o as usize);
        }
        let c = EMBEDDING_BAG.select()?;
        (c.imp.f)(self, idx, &starts, mode, &c.par)
    }

    /// `torch.bincount(x, weights, minlength)`: `x` 1-d non-negative `i64`; the count of each
    /// value (`i64`), or the sum of the weights at each value (`f32` for `f32` weights, else
    /// `f64`), of length `max(max(x) + 1, minlength)`.
    ///
    /// # Errors
    /// `x` not 1-d `i64`, a negative value, weights of another length.
    pub fn bincount(&self, weights: Option<&Tensor>, minlength: usize) -> Result<Tensor> {
        const OP: &str = "bincount";
        let xc = index_tensor(OP, self)?;
        if self.ndim() != 1 {
            return Err(invalid(
                OP,
                "self",
                format!(
                    "bincount only supports 1-d non-negative integral inputs, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        let x = dense::<i64>(&xc)?;
        // One pass for the smallest (must be >= 0) and the largest value (the bin count).
        let minmax = |c: &[i64]| {
            c.iter()
                .fold((i64::MAX, i64::MIN), |(a, b), &v| (a.min(v), b.max(v)))
        };
        let (mn, mx) = if x.len() > 1 << 20 {
            let par = crate::threads::Par::current();
            par.install(|| {
                x.par_chunks(1 << 18)
                    .map(minmax)
                    .reduce(|| (i64::MAX, i64::MIN), |a, b| (a.0.min(b.0), a.1.max(b.1)))
            })
        } else {
            minmax(x)
        };
        if !x.is_empty() && mn < 0 {
            return Err(invalid(
                OP,
                "self",
                format!("bincount only supports non-negative inputs, got {mn}"),
            ));
        }
        let nbins = if x.is_empty() { 0 } else { mx as usize + 1 }.max(minlength);
        let inp = HistInput::Bins(x);
        let c = BINCOUNT.select()?;
        match weights {
            None => {
                let v = (c.imp.f.i64)(&inp, None, nbins, &c.par);
                Tensor::from_vec(v, &[nbins])
            }
            Some(w) => {
                if w.shape() != self.shape() {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        lhs: self.shape().to_vec(),
                        rhs: w.shape().to_vec(),
                    });
                }
                let wc = w.contiguous();
                if w.dtype() == DType::F32 {
                    let wd = dense::<f32>(&wc)?;
                    let v = (c.imp.f.f32)(&inp, Some(wd), nbins, &c.par);
                    Tensor::from_vec(v, &[nbins])
                } else {
                    let wd = wc.to_f64_vec();
                    let v = (c.imp.f.f64)(&inp, Some(&wd), nbins, &c.par);
                    Tensor::from_vec(v, &[nbins])
                }
            }
        }
    }

    /// `torch.histc(x, bins, min, max)`: counts in `bins` equal-width bins over `[min, max]`
    /// (values outside, and NaN, ignored; `min == max` takes the data's range), in `x`'s dtype.
    ///
    /// # Errors
    /// `x` not a float tensor, `bins == 0`, `min > max`, or a non-finite range.
    pub fn histc(&self, bins: usize, min: f64, max: f64) -> Result<Tensor> {
        const OP: &str = "histc";
        if bins == 0 {
            return Err(invalid(OP, "bins", "bins must be > 0"));
        }
        if min > max {
            return Err(invalid(
                OP,
                "max",
                format!("max must be larger than min, got min={min}, max={max}"),
            ));
        }
        let c = HISTC.select()?;
        let xc = self.contiguous();
        macro_rules! go {
            ($T:ty, $V:ident) => {{
                let x = dense::<$T>(&xc)?;
                let (mut lo, mut hi) = (min as $T, max as $T);
                if lo == hi && !x.is_empty() {
                    lo = x.iter().copied().fold(<$T>::INFINITY, <$T>::min);
                    hi = x.iter().copied().fold(<$T>::NEG_INFINITY, <$T>::max);
                }
                if lo == hi {
                    lo -= 1.0;
                    hi += 1.0;
                }
                if !(lo.is_finite() && hi.is_finite()) {
                    return Err(invalid(
                        OP,
                        "min",
                        format!("range of [{lo}, {hi}] is not finite"),
                    ));
                }
                let inp = HistInput::$V { x, lo, hi };
                let v = (c.imp.f.i64)(&inp, None, bins, &c.par);
                Tensor::from_vec(v.into_iter().map(|c| c as $T).collect::<Vec<$T>>(), &[bins])
            }};
        }
        match self.dtype() {
            DType::F32 => go!(f32, F32),
            DType::F64 => go!(f64, F64),
            got => Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got,
            }),
        }
    }
}

/// Row assignment in source order (the last write wins), for the dtypes without a row kernel.
fn assign_rows<T: Element>(dst: &mut [T], src: &[T], rows: &[i64], inner: usize) {
    for (k, &r) in rows.iter().enumerate() {
        let r = r as usize;
        dst[r * inner..(r + 1) * inner].copy_from_slice(&src[k * inner..(k + 1) * inner]);
    }
}

/// `index` must have `x`'s number of dimensions and be no larger than `x` outside `dim` (and no
/// larger than `src` anywhere, when given).
fn check_index_shape(
    op: &'static str,
    x: &[usize],
    index: &[usize],
    dim: usize,
    src: Option<&[usize]>,
) -> Result<()> {
    let bad = || Error::ShapeMismatch {
        op,
        lhs: x.to_vec(),
        rhs: index.to_vec(),
    };
    if index.len() != x.len() && !(index.is_empty() && x.len() <= 1) {
        return Err(bad());
    }
    for a in 0..index.len() {
        if a != dim && index[a] > x[a] {
            return Err(bad());
        }
    }
    if let Some(s) = src {
        if s.len() != index.len() && !(index.is_empty() && s.len() <= 1) {
            return Err(Error::ShapeMismatch {
                op,
                lhs: s.to_vec(),
                rhs: index.to_vec(),
            });
        }
        if index.iter().zip(s).any(|(&i, &s)| i > s)
            || (index.is_empty() && s.iter().product::<usize>() < 1)
        {
            return Err(Error::ShapeMismatch {
                op,
                lhs: s.to_vec(),
                rhs: index.to_vec(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect()
    }

    #[test]
    fn every_row_and_scatter_kernel_agrees_with_the_sequential_loop() {
        // Destinations small (buffers), large (atomics / delegation) and with several outer rows.
        for (outer, n, m, inner) in [
            (1usize, 7usize, 40_000usize, 3usize),
            (1, 50_000, 20_000, 2),
            (3, 20, 9000, 5),
        ] {
            let src = data(outer * m * inner, 1);
            let idx: Vec<i64> = data(m, 2)
                .iter()
                .map(|v| ((v + 0.5) * n as f64) as i64 % n as i64)
                .collect();
            let g = RowGeom { outer, n, m, inner };
            let mut want = vec![0.0; outer * n * inner];
            for o in 0..outer {
                for (k, &r) in idx.iter().enumerate() {
                    for j in 0..inner {
                        want[(o * n + r as usize) * inner + j] += src[(o * m + k) * inner + j];
                    }
                }
            }
            let par = Par::new(3);
            type K = fn(&mut [f64], &[f64], &[i64], RowGeom, &Par);
            let kernels: [(&str, K); 3] = [
                ("buffers", rows_buffers),
                ("atomic", rows_atomic),
                ("det", rows_det_add),
            ];
            for (name, k) in kernels {
                let mut got = vec![0.0; want.len()];
                k(&mut got, &src, &idx, g, &par);
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9, "rows {name}: {a} vs {b}");
                }
            }
            // The same through scatter with the index broadcast along `inner`.
            let eidx: Vec<i64> = (0..outer * m * inner)
                .map(|p| idx[(p / inner) % m])
                .collect();
            let skernels: [(&str, K); 3] = [
                ("buffers", scatter_buffers),
                ("atomic", scatter_atomic),
                ("det", scatter_det),
            ];
            for (name, k) in skernels {
                let mut got = vec![0.0; want.len()];
                k(&mut got, &src, &eidx, g, &par);
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9, "scatter {name}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn row_kernels_give_the_same_bits_on_every_simd_path() {
        // Block partials (many sources, small destination; with more threads than blocks, so
        // that blocks split their destination rows), destination-partitioned with buckets,
        // several outer rows; widths that leave vector remainders.
        for (outer, n, m, inner) in [
            (1usize, 10usize, 40_000usize, 67usize),
            (1, 5000, 3000, 33),
            (2, 30, 5000, 17),
            (1, 3, 70_000, 1),
            (1, 100, 20_000, 16),
            (2, 40, 17_000, 8),
        ] {
            let src: Vec<f32> = data(outer * m * inner, 3)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let idx: Vec<i64> = data(m, 4)
                .iter()
                .map(|v| ((v + 0.5) * n as f64) as i64 % n as i64)
                .collect();
            let g = RowGeom { outer, n, m, inner };
            let base: Vec<f32> = data(outer * n * inner, 5)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let run = |simd: Isa, threads: usize| {
                FORCE.with(|f| f.set(Some(simd)));
                let mut d = base.clone();
                rows_det_add(&mut d, &src, &idx, g, &Par::new(threads));
                FORCE.with(|f| f.set(None));
                d.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
            };
            let want = run(Isa::Portable, 1);
            let paths = [Isa::Portable, Isa::Avx2, Isa::Avx512];
            for simd in paths.into_iter().filter(|i| i.available()) {
                for threads in [1, 3, 8] {
                    assert!(
                        run(simd, threads) == want,
                        "{outer}x{n}x{m}x{inner}: {simd:?} threads={threads}"
                    );
                }
            }
        }
    }
}
