//! Matrix products: `matmul` (PyTorch's rules for 1-D, 2-D and batched operands) and `linear`,
//! on lockstep's own blocked GEMM.
//!
//! * [`gemm`](fn@gemm) — the slice-level kernel: packed panels, a micro-kernel chosen at run time
//!   (AVX-512, AVX2+FMA, or portable scalar `mul_add`, all giving the same bits), output tiles
//!   split over threads, K never split. The bits of every output depend on the shape and the
//!   values only (see [`gemm`](mod@gemm)'s module docs).
//! * [`MATMUL`] — the dispatch point, with three implementations: `matmul.splitk_completion`
//!   (nondeterministic split-K for skinny shapes, the blocked kernel otherwise),
//!   `matmul.blocked` (thread-invariant, used in deterministic mode) and `matmul.splitk_fixed`
//!   (thread-invariant split-K with partial products added in a fixed order; bits depend on
//!   the shape only, but differ from `matmul.blocked`'s). With the crate's `gemm-crate`
//!   feature (off by default) there is a fourth, `matmul.gemm_crate`: the `gemm` crate,
//!   candle's CPU GEMM (blocking from detected cache sizes, no documented thread invariance,
//!   so `NotGuaranteed`; only benchmark mode with deterministic mode off picks it). Without the
//!   feature that name is not an implementation of `matmul` (pinning it is an error).
//! * [`blocks`] — `matmul_k_blocks`: K cut into blocks, each block's product with the blocked
//!   kernel's bits, the blocks added in a fixed tree, in one call (invariant seeding's
//!   micro-shard weight gradients).
//!
//! # Blocking constants
//! `KC × MC × NC` are per-dtype constants ([`GemmFloat::KC`] …), never derived from the thread
//! count or from detected cache sizes. They cannot change the bits (every element is one fma
//! chain over K, whatever the blocking), but constants keep the work per tile reproducible and
//! the code free of machine probing. They were chosen, by measurement, for the development
//! machine (x86-64 with AVX-512, 48 KiB L1d and 2 MiB L2 per core, a large shared L3):
//!
//! | dtype | kernel (MR×NR) | KC  | MC  | NC  | KC×NR B panel | MR×KC A panel | MC×KC A block | KC×NC B block |
//! |-------|----------------|-----|-----|-----|---------------|---------------|---------------|---------------|
//! | f32   | 12×32 (AVX-512)| 256 | 240 | 768 | 32 KiB (L1)   | 12 KiB (L2)   | 240 KiB (L2)  | 768 KiB (L3)  |
//! | f64   | 12×16 (AVX-512)| 128 | 240 | 384 | 16 KiB (L1)   | 12 KiB (L2)   | 240 KiB (L2)  | 384 KiB (L3)  |
//!
//! The B micro-panel stays in L1 while the A micro-panels of the block stream past it from L2;
//! an `MC × NC` tile's partial sums (720 KiB, in a dense buffer of contiguous micro-tiles
//! between KC blocks) plus the A block stay within L2. A and B are each packed once per product
//! (per task and KC block when only one task uses a block), and the driver prefetches the next
//! B micro-panel into L2 and the next micro-tile of sums into L1 while the kernel runs. With
//! those, f64 KC 192 or 256, the 8×24 f64 kernel, and MC/NC halved or doubled all measured
//! within noise of the table at 1024³ and 2048³. MC is a multiple of 6 and 12 (every kernel's
//! MR), NC of 16 and 32 (every NR). The AVX2 (6×16 f32, 6×8 f64) and portable kernels use the
//! same constants. A last row panel of at most 4 or 8 rows runs an AVX-512 edge kernel (4×NR,
//! 8×NR, reading the same 12-wide packed A panels) instead of computing 12 rows and dropping
//! the rest: a 64-row product (an LM head) no longer spends a ninth of its time on padding.
//!
//! With AVX-512 (f32), a product with a single row of tiles (`m ≤ MC`) and A's rows contiguous
//! reads A in place instead of packing it ([`direct`]: kernels for 1 to 12 rows, so no
//! padding either): packing 64 rows 50,257 floats apart was half the time of 64×50257×128.
//! Those kernels also take a list of lines to fetch into L2 (the next B block's source, the next
//! A block, the next micro-tile of C), issued evenly over their steps so that memory traffic
//! overlaps the multiply-adds. A parallel product of at most 2²⁴ multiply-adds (256³) runs one
//! tile per thread, each packing the blocks it reads, in a single parallel region.

pub mod blocks;
pub mod direct;
#[cfg(feature = "gemm-crate")]
mod external;
pub mod gemm;
pub mod kernel;

use crate::dtype::{DType, Float};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::threads::Par;
use crate::{Tensor, invalid};
use gemm::Problem;
pub use gemm::{PackedB, Strides, gemm, gemm_packed_b, gemm_with, is_skinny, splitk_parts};
pub use kernel::{Isa, Kernel};

/// A float type the GEMM supports (`f32`, `f64`), with its blocking constants.
pub trait GemmFloat: Float {
    /// Steps of K per block (the micro-kernel's loop length).
    const KC: usize;
    /// Rows of C per output tile (a multiple of every kernel's `MR`).
    const MC: usize;
    /// Columns of C per output tile (a multiple of every kernel's `NR`).
    const NC: usize;
    /// The micro-kernel for an instruction set (the portable one if `isa` is not compiled in).
    fn kernel(isa: Isa) -> Kernel<Self>;
    /// `acc[i] = acc[i] + v[i]` over the shorter length with the widest vectors available:
    /// one addition per element, so the same bits on every path.
    #[doc(hidden)]
    fn add_into(acc: &mut [Self], v: &[Self]);
    /// `s[..w]` becomes the fixed binary tree sum of the first `blocks` rows of `w` elements
    /// (`S(lo, hi) = S(lo, mid) + S(mid, hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`), one addition per
    /// element, so the same bits on every path.
    #[doc(hidden)]
    fn tree_blocks(s: &mut [Self], blocks: usize, w: usize);
}

impl GemmFloat for f32 {
    const KC: usize = 256;
    const MC: usize = 240;
    const NC: usize = 768;
    fn kernel(isa: Isa) -> Kernel<Self> {
        kernel::kernel_f32(isa)
    }
    fn add_into(acc: &mut [Self], v: &[Self]) {
        crate::ops::reduce::sum::add_into(acc, v)
    }
    fn tree_blocks(s: &mut [Self], blocks: usize, w: usize) {
        crate::ops::reduce::sum::tree_blocks(s, blocks, w)
    }
}

impl GemmFloat for f64 {
    const KC: usize = 128;
    const MC: usize = 240;
    const NC: usize = 384;
    fn kernel(isa: Isa) -> Kernel<Self> {
        kernel::kernel_f64(isa)
    }
    fn add_into(acc: &mut [Self], v: &[Self]) {
        crate::ops::reduce::sum::add_into(acc, v)
    }
    fn tree_blocks(s: &mut [Self], blocks: usize, w: usize) {
        crate::ops::reduce::sum::tree_blocks(s, blocks, w)
    }
}

/// Which algorithm a matmul implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Blocked,
    SplitKFixed,
    SplitKCompletion,
    #[cfg(feature = "gemm-crate")]
    GemmCrate,
}

/// The entry point of a `matmul` implementation: `(a, b, par)` with PyTorch's `matmul` rules.
pub type MatmulFn = fn(&Tensor, &Tensor, &Par) -> Result<Tensor>;

/// This family's ops (collected by [`crate::ops::builtin_ops`]).
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![MATMUL.info(), blocks::MATMUL_K_BLOCKS.info()]
}

/// `torch.matmul`: nondeterministic split-K for skinny shapes first (used only when
/// deterministic mode is off), then the thread-invariant blocked kernel, then the
/// thread-invariant fixed-order split-K (reachable through [`Op::by_algo`] and tuning), and
/// with the `gemm-crate` feature the `gemm` crate last (`NotGuaranteed`, benchmark mode only).
pub static MATMUL: Op<MatmulFn> = Op {
    name: "matmul",
    impls: &[
        Impl {
            algo: "matmul.splitk_completion",
            guarantee: Guarantee::NotGuaranteed,
            f: |a, b, par| matmul_impl(a, b, par, Algo::SplitKCompletion),
        },
        Impl {
            algo: "matmul.blocked",
            guarantee: Guarantee::ThreadInvariant,
            f: |a, b, par| matmul_impl(a, b, par, Algo::Blocked),
        },
        Impl {
            algo: "matmul.splitk_fixed",
            guarantee: Guarantee::ThreadInvariant,
            f: |a, b, par| matmul_impl(a, b, par, Algo::SplitKFixed),
        },
        #[cfg(feature = "gemm-crate")]
        Impl {
            algo: "matmul.gemm_crate",
            guarantee: Guarantee::NotGuaranteed,
            f: |a, b, par| matmul_impl(a, b, par, Algo::GemmCrate),
        },
    ],
};

/// One operand seen as a batch of matrices: shape `[batch…, rows, cols]`, strides, offset.
struct Operand<'t> {
    t: &'t Tensor,
    batch: Vec<usize>,
    batch_strides: Vec<usize>,
    rows: usize,
    cols: usize,
    strides: Strides,
}

fn operand(t: &Tensor) -> Operand<'_> {
    let s = t.shape();
    let st = t.layout().strides();
    let n = s.len();
    Operand {
        t,
        batch: s[..n - 2].to_vec(),
        batch_strides: st[..n - 2].to_vec(),
        rows: s[n - 2],
        cols: s[n - 1],
        strides: (st[n - 2], st[n - 1]),
    }
}

/// Storage offsets of every matrix of `op` over the broadcast batch shape `batch`.
fn batch_offsets(op: &Operand, batch: &[usize]) -> Result<Vec<usize>> {
    let total = batch
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .unwrap_or(usize::MAX);
    let lead = batch.len() - op.batch.len();
    // Sized from the caller's shapes (a huge batch of empty matrices): fallible.
    let mut out = crate::try_filled_vec("matmul", total, 0usize)?;
    out.clear();
    let mut idx = vec![0usize; batch.len()];
    for _ in 0..total {
        let mut off = op.t.layout().offset();
        for (d, &i) in idx.iter().enumerate().skip(lead) {
            if op.batch[d - lead] != 1 {
                off += i * op.batch_strides[d - lead];
            }
        }
        out.push(off);
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Products smaller than this (m·n·k) run one matrix per thread in batched matmul.
const SMALL_BATCH_ITEM: usize = 64 * 64 * 64;

fn run<T: GemmFloat>(
    a: &Operand,
    b: &Operand,
    batch: &[usize],
    par: &Par,
    algo: Algo,
) -> Result<Vec<T>> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let sa = T::slice(a.t.storage()).expect("dtype checked");
    let sb = T::slice(b.t.storage()).expect("dtype checked");
    let offs_a = batch_offsets(a, batch)?;
    let offs_b = batch_offsets(b, batch)?;
    // The output is sized from the shapes: a product too large for memory (or for `usize`)
    // is an error, not an abort.
    let mn = m.saturating_mul(n);
    let len = offs_a
        .len()
        .checked_mul(mn)
        .filter(|&l| l <= isize::MAX as usize / core::mem::size_of::<T>())
        .ok_or(Error::OutOfMemory {
            op: "matmul",
            bytes: offs_a.len() as u128 * mn as u128 * core::mem::size_of::<T>() as u128,
        })?;
    if mn == 0 {
        return Ok(Vec::new());
    }
    // Not zero-filled first: every product below writes each of its outputs (beta = 0, zeros
    // for k = 0) without reading C's previous values, so a fill would only be overwritten.
    let mut out: Vec<T> = crate::tensor::try_with_capacity("matmul", len)?;
    let kern = T::kernel(Isa::best());
    let one = |oa: usize, ob: usize, c: &mut [core::mem::MaybeUninit<T>], par: Option<&Par>| {
        let p = Problem {
            m,
            n,
            k,
            a: sa.get(oa..).unwrap_or(&[]),
            sa: a.strides,
            b: sb.get(ob..).unwrap_or(&[]),
            sb: b.strides,
        };
        #[cfg(feature = "gemm-crate")]
        if algo == Algo::GemmCrate {
            // The `gemm` crate takes an initialised slice.
            c.iter_mut().for_each(|x| {
                x.write(T::ZERO);
            });
            // SAFETY: every element was just written.
            let c = unsafe { &mut *(c as *mut [core::mem::MaybeUninit<T>] as *mut [T]) };
            return external::product(
                (m, n, k),
                p.a,
                p.sa,
                p.b,
                p.sb,
                c,
                par.unwrap_or(&Par::new(1)),
            );
        }
        let ptr = SyncPtr(c.as_mut_ptr() as *mut T);
        match (algo, par) {
            (Algo::SplitKFixed, Some(par)) if is_skinny(m, n, k) => {
                gemm::splitk_fixed(&kern, &p, ptr, (n, 1), par)
            }
            (Algo::SplitKCompletion, Some(par)) if is_skinny(m, n, k) => {
                gemm::splitk_completion(&kern, &p, ptr, (n, 1), par)
            }
            _ => gemm::blocked(&kern, &p, ptr, (n, 1), par),
        }
        Ok::<(), Error>(())
    };
    let items = offs_a.len();
    if items > 1
        && par.threads() > 1
        && m * n * k <= SMALL_BATCH_ITEM
        && items * m * n * k > gemm::PAR_MIN_WORK
    {
        // Many small products: one per part, claimed one at a time by the team (the caller
        // and its helpers; the bits do not depend on who computes what).
        let base = SyncPtr(out.spare_capacity_mut()[..len].as_mut_ptr());
        let failed = std::sync::Mutex::new(None);
        par.run_parts(items, |x| {
            // SAFETY: product x's block, `x·mn..(x + 1)·mn` of the spare capacity (`len =
            // items·mn` elements), is written by this part alone.
            let c = unsafe { core::slice::from_raw_parts_mut(base.get().add(x * mn), mn) };
            if let Err(e) = one(offs_a[x], offs_b[x], c, None) {
                failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
    } else {
        let spare = &mut out.spare_capacity_mut()[..len];
        for ((c, &oa), &ob) in spare.chunks_mut(mn).zip(&offs_a).zip(&offs_b) {
            one(oa, ob, c, Some(par))?;
        }
    }
    // SAFETY: the products above wrote all `len` elements (one `m × n` block each, every
    // element of it; an error returned before this line).
    unsafe { out.set_len(len) };
    Ok(out)
}

fn check_float(t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::DType {
            op: "matmul",
            expected: DType::F32,
            got: t.dtype(),
        })
    }
}

fn matmul_impl(a: &Tensor, b: &Tensor, par: &Par, algo: Algo) -> Result<Tensor> {
    check_float(a)?;
    check_float(b)?;
    if a.dtype() != b.dtype() {
        return Err(Error::DType {
            op: "matmul",
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    let mismatch = || Error::ShapeMismatch {
        op: "matmul",
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
    };
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(invalid(
            "matmul",
            "input",
            "both arguments to matmul need to be at least 1D",
        ));
    }
    // 1-D operands: a vector on the left is a row (dimension removed afterwards), on the right
    // a column.
    let a2 = if a.ndim() == 1 {
        a.unsqueeze(0)?
    } else {
        a.clone()
    };
    let b2 = if b.ndim() == 1 {
        b.unsqueeze(1)?
    } else {
        b.clone()
    };
    // A batched left operand times a matrix: fold the batch into the rows (one big product).
    let a2 = if a2.ndim() > 2 && b2.ndim() == 2 {
        let k = a2.shape()[a2.ndim() - 1];
        let rows: usize = a2.shape()[..a2.ndim() - 1].iter().product();
        a2.reshape(&[rows as isize, k as isize])?
    } else {
        a2
    };
    let (oa, ob) = (operand(&a2), operand(&b2));
    if oa.cols != ob.rows {
        return Err(mismatch());
    }
    let batch = crate::ops::elementwise::broadcast_shapes("matmul", &oa.batch, &ob.batch)
        .map_err(|_| mismatch())?;
    // Output shape: batch, then m (unless `a` was 1-D), then n (unless `b` was 1-D); a batched
    // left operand folded into rows keeps its own leading dims.
    let mut shape: Vec<usize> = if a.ndim() > 2 && b.ndim() <= 2 {
        a.shape()[..a.ndim() - 1].to_vec()
    } else {
        let mut s = batch.clone();
        if a.ndim() > 1 {
            s.push(oa.rows);
        }
        s
    };
    if b.ndim() > 1 {
        shape.push(ob.cols);
    }
    match a.dtype() {
        DType::F32 => Tensor::from_vec(run::<f32>(&oa, &ob, &batch, par, algo)?, &shape),
        _ => Tensor::from_vec(run::<f64>(&oa, &ob, &batch, par, algo)?, &shape),
    }
}

/// `(m, n, k)` of one product of `matmul(a, b)` (vectors count as one row / one column), if
/// both operands have at least one dimension.
fn product_dims(a: &Tensor, b: &Tensor) -> Option<(usize, usize, usize)> {
    let (sa, sb) = (a.shape(), b.shape());
    let k = *sa.last()?;
    let _ = sb.last()?;
    let m = if sa.len() >= 2 {
        sa[..sa.len() - 1].iter().product()
    } else {
        1
    };
    let n = if sb.len() >= 2 { sb[sb.len() - 1] } else { 1 };
    // A batched right operand: each product has only its own rows.
    let m = if sb.len() > 2 && sa.len() >= 2 {
        sa[sa.len() - 2]
    } else {
        m
    };
    Some((m, n, k))
}

impl Tensor {
    /// `torch.matmul(self, other)`, through dispatch (`matmul`): dot product for two vectors,
    /// matrix-vector, vector-matrix and matrix products, and batched products with the batch
    /// dimensions broadcast. Strided (transposed, sliced) operands are read in place by the
    /// packing step, without a copy. Both operands must be `f32` or both `f64`.
    ///
    /// In deterministic mode the result's bits depend on the shapes and values only. With
    /// [benchmark mode](crate::autotune::set_benchmark) on, skinny shapes time the allowed
    /// split-K and blocked candidates once per shape and keep the fastest.
    ///
    /// # Errors
    /// A 0-dimensional operand, mismatched inner dimensions or batch dimensions that do not
    /// broadcast, non-float or mismatched dtypes.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        // Split-K candidates only compete for skinny shapes (elsewhere they run the blocked
        // kernel anyway). Without benchmark mode the first allowed candidate is used: split-K
        // by completion order for skinny shapes when deterministic mode is off, else the
        // blocked kernel.
        let skinny = product_dims(self, other).is_some_and(|(m, n, k)| is_skinny(m, n, k));
        let key = format!("{:?}x{:?}:{:?}", self.shape(), other.shape(), self.dtype());
        MATMUL
            .tuned(&key)
            .applies(&|i| skinny || i.algo == "matmul.blocked")
            .run(&[self, other], |imp, par| (imp.f)(self, other, par))
    }

    /// `torch.nn.functional.linear(x, weight, bias)`: `x · weightᵀ + bias`, with `x` of shape
    /// `[…, in]`, `weight` `[out, in]` (read transposed in place) and `bias` `[out]`. The bias
    /// is added after the product (one rounding per element).
    ///
    /// # Errors
    /// Shape or dtype mismatches, as [`matmul`](Self::matmul), and a bias that is not `[out]`.
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if weight.ndim() != 2 {
            return Err(invalid(
                "linear",
                "weight",
                format!(
                    "weight must be 2-D [out, in], got shape {:?}",
                    weight.shape()
                ),
            ));
        }
        let out = self.matmul(&weight.transpose(0, 1)?)?;
        let Some(bias) = bias else { return Ok(out) };
        let of = weight.shape()[0];
        if bias.shape() != [of] {
            return Err(Error::ShapeMismatch {
                op: "linear",
                lhs: bias.shape().to_vec(),
                rhs: vec![of],
            });
        }
        if bias.dtype() != out.dtype() {
            return Err(Error::DType {
                op: "linear",
                expected: out.dtype(),
                got: bias.dtype(),
            });
        }
        // In place: the product's storage is fresh and unshared, so `data_mut` copies nothing.
        fn add_bias<T: GemmFloat>(mut out: Tensor, bias: &Tensor) -> Result<Tensor> {
            let bc = bias.contiguous_for("linear")?;
            let b = bc.data::<T>()?;
            if !b.is_empty() {
                for row in out.data_mut::<T>()?.chunks_mut(b.len()) {
                    for (x, &y) in row.iter_mut().zip(b) {
                        *x = *x + y;
                    }
                }
            }
            Ok(out)
        }
        match out.dtype() {
            DType::F32 => add_bias::<f32>(out, bias),
            _ => add_bias::<f64>(out, bias),
        }
    }
}
