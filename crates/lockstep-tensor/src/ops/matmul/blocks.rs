//! `matmul_k_blocks`: a product whose inner dimension is cut into blocks, each block's product
//! computed as its own [`gemm`](super::gemm()) call would compute it, the blocks added in a
//! fixed binary tree — in one call.
//!
//! Invariant seeding (`lockstep train --seeding invariant`) defines a weight gradient `Xᵀ·dY`
//! as the fixed-tree sum of the micro-shards' own products (K = the micro-shard's rows).
//! Computing them as `K / block` separate products pays each one's dispatch, allocation and
//! packing, and then a tensor addition per block. Here both operands are packed once, every
//! block's `MR × NR` tiles of a group of row panels are computed by the same micro-kernel into
//! a scratch that stays in L1, and the tree runs on the scratch before one write of each tile.
//!
//! # Order of operations
//! Block `t` covers `k0 = t·block .. min(k0 + block, k)`. Its element `P_t[i][j]` is the chain
//! `c = fma(A[i][p], B[p][j], c)` for `p = k0, …, k1 − 1` in increasing order from `+0.0` —
//! the chain of [`gemm`](super::gemm()) on that block's columns of A and rows of B (one
//! micro-kernel call over the whole block: its length never splits a chain). Then
//! `C = S(0, T)` with `S(lo, hi) = S(lo, mid) + S(mid, hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`, one
//! rounding per addition. Threads only decide which tiles they compute, so the bits depend on
//! the shapes, `block` and the values only, at any thread count and on every instruction set.

use super::GemmFloat;
use super::kernel::Isa;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::threads::Par;
use crate::{Tensor, invalid};

/// The entry point of a `matmul_k_blocks` implementation: `(a, b, block, par)`.
pub type KBlocksFn = fn(&Tensor, &Tensor, usize, &Par) -> Result<Tensor>;

/// `matmul_k_blocks` (see [`Tensor::matmul_k_blocks`]): one thread-invariant implementation.
pub static MATMUL_K_BLOCKS: Op<KBlocksFn> = Op {
    name: "matmul_k_blocks",
    impls: &[Impl {
        algo: "matmul_k_blocks.blocked",
        guarantee: Guarantee::ThreadInvariant,
        f: k_blocks_impl,
    }],
};

const OP: &str = "matmul_k_blocks";

/// Bytes of block tiles one tree covers (the row panels of a group, every block): about half
/// of L1. Speed only: the additions are the same for any grouping.
const GROUP_BYTES: usize = 16 << 10;

fn k_blocks_impl(a: &Tensor, b: &Tensor, block: usize, par: &Par) -> Result<Tensor> {
    let (m, k, n) = (a.shape()[0], a.shape()[1], b.shape()[1]);
    let (sa, sb) = (a.layout().strides(), b.layout().strides());
    fn go<T: GemmFloat>(
        a: &Tensor,
        b: &Tensor,
        dims: (usize, usize, usize),
        strides: ((usize, usize), (usize, usize)),
        block: usize,
        par: &Par,
    ) -> Result<Tensor> {
        let (m, n, k) = dims;
        let da = T::slice(a.storage()).expect("dtype checked");
        let db = T::slice(b.storage()).expect("dtype checked");
        let len = m.checked_mul(n).ok_or(Error::OutOfMemory {
            op: OP,
            bytes: m as u128 * n as u128 * core::mem::size_of::<T>() as u128,
        })?;
        let mut c = crate::try_filled_vec(OP, len, T::ZERO)?;
        gemm_k_blocks_with(
            Isa::best(),
            (m, n, k),
            block,
            da.get(a.layout().offset()..).unwrap_or(&[]),
            strides.0,
            db.get(b.layout().offset()..).unwrap_or(&[]),
            strides.1,
            &mut c,
            par,
        )?;
        Tensor::from_vec(c, &[m, n])
    }
    let strides = ((sa[0], sa[1]), (sb[0], sb[1]));
    match a.dtype() {
        DType::F32 => go::<f32>(a, b, (m, n, k), strides, block, par),
        _ => go::<f64>(a, b, (m, n, k), strides, block, par),
    }
}

impl Tensor {
    /// `A·B` for a 2-D `self` (`m × k`) and `other` (`k × n`), with K cut into blocks of
    /// `block` (the last one shorter when `block` does not divide `k`): each block's product
    /// has the bits of `self.narrow(1, k0, kb).matmul(&other.narrow(0, k0, kb))` with the
    /// blocked kernel (the one [`matmul`](Self::matmul) runs on every shape that is not
    /// skinny, and in deterministic mode), and the blocks are added in the fixed binary tree
    /// over block index (`sum(lo..hi) = sum(lo..mid) + sum(mid..hi)`,
    /// `mid = lo + ⌈(hi − lo) / 2⌉`), element by element. One call instead of one product per
    /// block and the additions (see the [module docs](self)); the bits depend on the shapes,
    /// `block` and the values only. `k == 0` gives zeros. Strided operands are read in place.
    ///
    /// # Errors
    /// Operands that are not 2-D, non-float or mismatched dtypes, inner dimensions that differ,
    /// `block == 0`, or an output or packing too large for memory.
    pub fn matmul_k_blocks(&self, other: &Tensor, block: usize) -> Result<Tensor> {
        for (t, arg) in [(self, "input"), (other, "other")] {
            if t.ndim() != 2 {
                return Err(invalid(
                    OP,
                    arg,
                    format!("expected a 2-D matrix, got shape {:?}", t.shape()),
                ));
            }
            if !t.dtype().is_float() {
                return Err(Error::DType {
                    op: OP,
                    expected: DType::F32,
                    got: t.dtype(),
                });
            }
        }
        if self.dtype() != other.dtype() {
            return Err(Error::DType {
                op: OP,
                expected: self.dtype(),
                got: other.dtype(),
            });
        }
        if self.shape()[1] != other.shape()[0] {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: other.shape().to_vec(),
            });
        }
        if block == 0 {
            return Err(invalid(OP, "block", "blocks of K must be at least 1 long"));
        }
        MATMUL_K_BLOCKS.run(&[self, other], |imp, par| (imp.f)(self, other, block, par))
    }
}

/// The slice-level entry of [`Tensor::matmul_k_blocks`]: `c` (`m × n`, rows contiguous)
/// becomes the fixed-tree sum over K blocks of `block` of the blocks' products, with the
/// micro-kernel of `isa` (every instruction set gives the same bits). `dims` is `(m, n, k)`;
/// `a` is `m × k` and `b` `k × n`, each with its own strides.
///
/// # Errors
/// `isa` not supported by the CPU, `block == 0`, an operand that does not fit in its slice,
/// `c` shorter than `m·n`, or packing buffers too large for memory.
#[allow(clippy::too_many_arguments)]
pub fn gemm_k_blocks_with<T: GemmFloat>(
    isa: Isa,
    dims: (usize, usize, usize),
    block: usize,
    a: &[T],
    a_strides: (usize, usize),
    b: &[T],
    b_strides: (usize, usize),
    c: &mut [T],
    par: &Par,
) -> Result<()> {
    let (m, n, k) = dims;
    if !isa.available() {
        return Err(invalid(
            OP,
            "isa",
            format!("this CPU does not support {isa:?}"),
        ));
    }
    if block == 0 {
        return Err(invalid(OP, "block", "blocks of K must be at least 1 long"));
    }
    super::gemm::operand_fits(OP, "a", m, k, a_strides, a.len())?;
    super::gemm::operand_fits(OP, "b", k, n, b_strides, b.len())?;
    if m.checked_mul(n).is_none_or(|l| c.len() < l) {
        return Err(invalid(OP, "c", format!("fewer than {m}×{n} elements")));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        c[..m * n].fill(T::ZERO);
        return Ok(());
    }
    let kern = T::kernel(isa);
    let (mr, nr) = (kern.mr, kern.nr);
    let (mp, np) = (m.div_ceil(mr), n.div_ceil(nr));
    let blocks = k.div_ceil(block);
    // Both operands packed once, as panels over the whole of K: block `t`'s panel of row
    // panel `ip` starts at `ip·mr·k + k0·mr` (and B's likewise).
    let oom = |elems: Option<usize>| Error::OutOfMemory {
        op: OP,
        bytes: elems.map_or(u128::MAX, |e| e as u128 * core::mem::size_of::<T>() as u128),
    };
    let pa_len = (mp * mr).checked_mul(k);
    let pb_len = (np * nr).checked_mul(k);
    let mut pa = crate::try_filled_vec(OP, pa_len.ok_or_else(|| oom(None))?, T::ZERO)
        .map_err(|_| oom(pa_len))?;
    let mut pb = crate::try_filled_vec(OP, pb_len.ok_or_else(|| oom(None))?, T::ZERO)
        .map_err(|_| oom(pb_len))?;
    for (ip, dst) in pa.chunks_mut(mr * k).enumerate() {
        pack(a, a_strides, ip * mr, m, mr, k, false, dst);
    }
    for (jp, dst) in pb.chunks_mut(nr * k).enumerate() {
        pack(b, b_strides, jp * nr, n, nr, k, true, dst);
    }
    let tile = mr * nr;
    let work = m.saturating_mul(n).saturating_mul(k);
    let parts = if work > super::gemm::PAR_MIN_WORK {
        par.threads().min(np)
    } else {
        1
    };
    // Row panels in groups whose block tiles stay in L1 together: one tree per group, over
    // rows of `g·tile` elements (fewer, longer additions than a tree per tile; element by
    // element the same ones).
    let group = (GROUP_BYTES / (blocks * tile * core::mem::size_of::<T>()).max(1)).clamp(1, mp);
    let per_part = blocks * group * tile;
    let scratch_len = per_part.checked_mul(parts);
    let mut scratch = crate::try_filled_vec(OP, scratch_len.ok_or_else(|| oom(None))?, T::ZERO)
        .map_err(|_| oom(scratch_len))?;
    let (cp, sp) = (SyncPtr(c.as_mut_ptr()), SyncPtr(scratch.as_mut_ptr()));
    let (pa, pb) = (&pa[..], &pb[..]);
    let piece = |part: usize| {
        // SAFETY: piece `part` alone uses scratch `part` and writes the columns of its own
        // column panels of C.
        let s = unsafe { core::slice::from_raw_parts_mut(sp.get().add(part * per_part), per_part) };
        for jp in np * part / parts..np * (part + 1) / parts {
            for ip0 in (0..mp).step_by(group) {
                let g = group.min(mp - ip0);
                // Block `t`'s tile of row panel `ip0 + q` at `s[(t·g + q)·tile..]`.
                for t in 0..blocks {
                    let k0 = t * block;
                    let kb = block.min(k - k0);
                    for q in 0..g {
                        // SAFETY: the panels hold `kb·mr` and `kb·nr` elements from these
                        // offsets (packed over all of K); the tile `s[(t·g + q)·tile..]` is
                        // `mr × nr` with rows `nr` apart; `isa` was checked above.
                        unsafe {
                            (kern.f)(
                                kb,
                                pa.as_ptr().add((ip0 + q) * mr * k + k0 * mr),
                                pb.as_ptr().add(jp * nr * k + k0 * nr),
                                s.as_mut_ptr().add((t * g + q) * tile),
                                nr,
                                false,
                            )
                        };
                    }
                }
                T::tree_blocks(s, blocks, g * tile);
                for q in 0..g {
                    let (i0, j0) = ((ip0 + q) * mr, jp * nr);
                    let cols = nr.min(n - j0);
                    let t = &s[q * tile..(q + 1) * tile];
                    for i in 0..mr.min(m - i0) {
                        // SAFETY: row `i0 + i`, columns `j0..j0 + cols` of the `m × n` C:
                        // this piece's columns only.
                        let row = unsafe {
                            core::slice::from_raw_parts_mut(cp.get().add((i0 + i) * n + j0), cols)
                        };
                        row.copy_from_slice(&t[i * nr..i * nr + cols]);
                    }
                }
            }
        }
    };
    par.run_parts(parts, piece);
    Ok(())
}

/// Packs one panel of `w` rows of A (`by_rows == false`: `dst[p·w + i] = A[r0 + i][p]`) or
/// of `w` columns of B (`by_rows == true`: `dst[p·w + j] = B[p][r0 + j]`) over all `k`,
/// zeros past the matrix's `len` rows or columns: the micro-kernels' panel layout.
#[allow(clippy::too_many_arguments)]
fn pack<T: GemmFloat>(
    x: &[T],
    (s0, s1): (usize, usize),
    r0: usize,
    len: usize,
    w: usize,
    k: usize,
    by_rows: bool,
    dst: &mut [T],
) {
    let live = w.min(len - r0);
    // (stride along the panel's width, stride along K)
    let (sw, sk) = if by_rows { (s1, s0) } else { (s0, s1) };
    for (p, d) in dst.chunks_exact_mut(w).take(k).enumerate() {
        let base = r0 * sw + p * sk;
        if sw == 1 {
            d[..live].copy_from_slice(&x[base..base + live]);
        } else {
            for (i, v) in d[..live].iter_mut().enumerate() {
                *v = x[base + i * sw];
            }
        }
        d[live..].fill(T::ZERO);
    }
}
