//! The row kernels of the row-accumulating ops (`index_add`, `index_put`, the embedding
//! backward): destination `[outer, n, inner]`, source `[outer, m, inner]`, one index per source
//! row; and the work partition of the destination-partitioned kernels (`scatter_add`'s too).

use super::common::{AccElem, dense_mut};
use crate::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::ops::SyncPtr;
use crate::ops::matmul::Isa;
use crate::ops::matmul::kernel::prefetch;
use crate::ops::reduce::{dense, zeroed_vec};
use crate::threads::Par;
use rayon::prelude::*;
use std::sync::Mutex;

// ---------------------------------------------------------------------------------------------
// Work partition of the destination-partitioned kernels. The partition depends on the thread
// count, the results do not: each destination element belongs to exactly one task, and every
// task visits the sources in order.

#[derive(Clone, Copy, Debug)]
pub(super) struct Task {
    pub(super) o: (usize, usize),
    pub(super) r: (usize, usize),
    pub(super) c: (usize, usize),
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
pub(super) fn line_shift<T>(v: &[T]) -> usize {
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
pub(super) fn tasks(
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
pub(super) enum RowMode {
    Add,
    Assign,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct RowGeom {
    pub(super) outer: usize,
    pub(super) n: usize,
    pub(super) m: usize,
    pub(super) inner: usize,
}

/// Deterministic: destination-partitioned, sources in order (see the module docs).
pub(super) fn rows_det<T: AccElem>(
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
        let mut lists = vec![Vec::new(); idx.len().div_ceil(chunk)];
        par.for_each_chunk_mut(&mut lists, 1, |c, out| {
            let ic = &idx[c * chunk..((c + 1) * chunk).min(idx.len())];
            let mut b = vec![Vec::with_capacity(ic.len() / rc + 16); rc];
            for (j, &r) in ic.iter().enumerate() {
                // The range of row r: the b with floor(n*b/rc) <= r < floor(n*(b+1)/rc).
                let id = ((r as usize + 1) * rc).div_ceil(n) - 1;
                b[id].push((c * chunk + j) as u32);
            }
            out[0] = b;
        });
        lists
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
    // On the team: the tasks write disjoint rows.
    par.run_parts(ts.len(), |i| run(&ts[i]));
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
    pub(super) static FORCE: core::cell::Cell<Option<Isa>> = const { core::cell::Cell::new(None) };
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
pub(super) fn row_blocks(g: RowGeom) -> usize {
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
pub(super) fn rows_det_blocks<T: AccElem>(
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
pub(super) fn rows_nondet<T: AccElem>(
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

/// Kernel of the row-accumulating ops (`index_add`, `index_put(accumulate)`, embedding
/// backward): `(dst, src, indices, geometry, par)` on flat buffers of one dtype.
#[derive(Clone, Copy)]
pub struct RowAddFn {
    pub(super) f32: fn(&mut [f32], &[f32], &[i64], RowGeomPub, &Par),
    pub(super) f64: fn(&mut [f64], &[f64], &[i64], RowGeomPub, &Par),
    pub(super) i64: fn(&mut [i64], &[i64], &[i64], RowGeomPub, &Par),
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

pub(super) fn rg(g: RowGeomPub) -> RowGeom {
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
pub(super) use row_fns;

pub(super) fn rows_buffers<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_nondet(d, s, i, g, p, false);
}
pub(super) fn rows_atomic<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_nondet(d, s, i, g, p, true);
}

pub(super) fn rows_det_add<T: AccElem>(d: &mut [T], s: &[T], i: &[i64], g: RowGeom, p: &Par) {
    rows_det(d, s, i, g, RowMode::Add, p);
}

pub(super) const ROW_NONDET: RowAddFn = row_fns!(rows_buffers);
pub(super) const ROW_ATOMIC: RowAddFn = row_fns!(rows_atomic);
pub(super) const ROW_DET: RowAddFn = row_fns!(rows_det_add);

/// Runs a row-accumulating op through dispatch into `dst` (traced with `dst` as output); with
/// `check`, first checks every index against `g.n` on the op's threads.
pub(super) fn run_rows(
    op: &'static Op<RowAddFn>,
    dst: &mut Tensor,
    src: &Tensor,
    idx: &[i64],
    g: RowGeomPub,
    check: bool,
) -> Result<()> {
    let src = src.contiguous_for(op.name)?;
    op.run_inplace(dst, &[&src], |imp, par, dst| {
        if check {
            super::common::check_indices(op.name, idx, g.n, par)?;
        }
        match dst.dtype() {
            DType::F32 => (imp.f.f32)(dense_mut(dst)?, dense(&src)?, idx, g, par),
            DType::F64 => (imp.f.f64)(dense_mut(dst)?, dense(&src)?, idx, g, par),
            DType::I64 => (imp.f.i64)(dense_mut(dst)?, dense(&src)?, idx, g, par),
            got => {
                return Err(Error::DType {
                    op: op.name,
                    expected: DType::F32,
                    got,
                });
            }
        }
        Ok(())
    })
}
