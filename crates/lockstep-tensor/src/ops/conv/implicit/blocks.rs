//! `conv2d_weight_grad_blocks`: the weight gradient of a batch cut into blocks of samples,
//! each block's gradient as its own [`conv2d_backward_weight`](Tensor::conv2d_backward_weight)
//! call computes it, the blocks added in a fixed binary tree — in one call.
//!
//! Invariant seeding (`lockstep train --seeding invariant`) defines a weight gradient as the
//! fixed-tree sum of the micro-shards' own gradients. One call per micro-shard pays, per
//! block, the dispatch, and per sample of it (the deterministic kernel's parts are single
//! samples at micro-shard sizes) a padded copy, a transposed output gradient, buffers and a
//! transpose of the result, then a tensor addition per tree node. Here each block's samples
//! are copied and transposed once, every part's `MR × NR` tile is computed by the implicit
//! GEMM's micro-kernel into an L1 scratch and added to the block's tile in part order, and
//! the tree runs on the blocks' results before one transpose per group. With one block of all
//! N samples this is `conv2d_weight_grad.fixed_parts` itself wherever the implicit GEMM
//! applies and the batch fits in L2 ([`one_block`]; its tiles then split over the threads).
//!
//! # Order of operations
//! Block `b` covers samples `b·block .. min((b + 1)·block, N)`, `nb` of them. As
//! `conv2d_weight_grad.fixed_parts` does on those samples, the block is cut into
//! `parts = min(max(nb, 1), 8)` parts of `per = ⌈nb / parts⌉` samples (the last ones shorter or
//! empty); part `t`'s element `(co, p)` is the chain `c = fma(x_patch[p][q], dy[co][q], c)` over
//! its samples' output positions `q` in order, from `+0.0`; the block's element is
//! `((0 + P_0) + P_1) + …` in part order. Then `dW = S(0, B)` with `S(lo, hi) = S(lo, mid) +
//! S(mid, hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`, one rounding per addition. Threads only decide
//! which blocks they compute, so the bits depend on the shapes, `block` and the values only, at
//! any thread count and on every instruction set.

use super::super::{
    CONV2D_WEIGHT_GRAD, Conv2dParams, Geometry, SERIAL_MAX_WORK, WEIGHT_GRAD_PARTS,
    check_grad_output, f32_data, scratch, try_zeroed, winograd,
};
use super::{Kern, applicable, padded, patch_offsets, position_offsets, tile, transpose};
use crate::error::{Error, Result};
use crate::op::{Guarantee, Impl, Op};
use crate::ops::SyncPtr;
use crate::ops::matmul::Isa;
use crate::policy;
use crate::threads::Par;
use crate::{Tensor, invalid};
use std::sync::Mutex;

/// The entry point of a `conv2d_weight_grad_blocks` implementation:
/// `(geometry, input, grad_output, block, dW, par)`.
pub type BlocksFn = fn(&Geometry, &[f32], &[f32], usize, &mut [f32], &Par) -> Result<()>;

/// `conv2d_weight_grad_blocks` (see [`Tensor::conv2d_backward_weight_blocks`]): one
/// thread-invariant implementation.
pub static CONV2D_WEIGHT_GRAD_BLOCKS: Op<BlocksFn> = Op {
    name: "conv2d_weight_grad_blocks",
    impls: &[Impl {
        algo: "conv2d_weight_grad_blocks.implicit",
        guarantee: Guarantee::ThreadInvariant,
        f: blocks_impl,
    }],
};

const OP: &str = "conv2d_weight_grad_blocks";

/// Whether a block's own `conv2d_backward_weight` call runs `conv2d_weight_grad.fixed_parts`
/// on the implicit GEMM (the sums this kernel reproduces): no pin of that op, benchmark mode
/// off (its choice may depend on timing), no Winograd (it is chosen only where fast
/// convolution is allowed and the shapes prefer it), and shapes the implicit GEMM takes. All
/// but the pin and the modes are functions of the shapes other than N.
fn matches_per_block_call(g: &Geometry) -> bool {
    policy::pinned(CONV2D_WEIGHT_GRAD.name).is_none()
        && !policy::benchmark()
        && !(policy::allow_fast_conv() && winograd::preferred_weight_grad(g))
        && applicable(g)
}

fn blocks_impl(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    block: usize,
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    blocks_with(Isa::best(), g, x, gout, block, dw, par)
}

/// [`blocks_impl`] with the micro-kernel of `isa` (an available one; every one gives the same
/// bits). `dw` is `groups · og × K`, zeroed.
pub(in super::super) fn blocks_with(
    isa: Isa,
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    block: usize,
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    if g.n == 0 || dw.is_empty() {
        return Ok(());
    }
    let (k, og) = (g.k(), g.og());
    let kern = Kern::for_isa(isa, og);
    let panels = og.div_ceil(kern.nr);
    let kp = k.div_ceil(kern.mr) * kern.mr;
    // One block's result, in the kernel's layout (see `leaf_impl`).
    let leaf_len = panels * kp * kern.nr;
    let blocks = g.n.div_ceil(block);
    let mut leaves = scratch(OP, blocks.saturating_mul(leaf_len))?;
    let parallel =
        par.threads() > 1 && blocks > 1 && g.n * g.cout * g.ohw() * g.k() > SERIAL_MAX_WORK;
    for grp in 0..g.p.groups {
        // With one block its tiles are split over the threads instead (the same bits: a
        // tile's value does not depend on who computes it).
        let one = Par::new(1);
        let tiles_par = if parallel { &one } else { par };
        let leaf = |b: usize, out: &mut [f32]| {
            let ns = b * block..((b + 1) * block).min(g.n);
            leaf_isa(isa, g, x, gout, grp, ns, out, tiles_par)
        };
        if parallel {
            // The first failing block's error, as serially.
            let err: Mutex<Option<(usize, Error)>> = Mutex::new(None);
            par.for_each_chunk_mut(&mut leaves, leaf_len, |b, out| {
                if let Err(e) = leaf(b, out) {
                    let mut err = err.lock().unwrap_or_else(|e| e.into_inner());
                    if err.as_ref().is_none_or(|(first, _)| b < *first) {
                        *err = Some((b, e));
                    }
                }
            });
            if let Some((_, e)) = err.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(e);
            }
        } else {
            for (b, out) in leaves.chunks_mut(leaf_len).enumerate() {
                leaf(b, out)?;
            }
        }
        tree(&mut leaves, 0, blocks, leaf_len);
        finish_isa(
            isa,
            g,
            &leaves[..leaf_len],
            &mut dw[grp * og * k..][..og * k],
        )?;
    }
    Ok(())
}

isa_versions!(
    fn leaf_isa(g: &Geometry, x: &[f32], gout: &[f32], grp: usize, ns: std::ops::Range<usize>, out: &mut [f32], par: &Par) -> Result<()>
        => leaf_impl
);

isa_versions!(
    fn finish_isa(g: &Geometry, acc: &[f32], dw: &mut [f32]) -> Result<()>
        => finish_impl
);

/// Block `ns`'s gradient of group `grp` into `out`: panel `cp` of `nr` channels, patch row `p`,
/// channel `j` at `(cp·kp + p)·nr + j` (rows past K and channels past the group's are
/// padding). Each part's tile is the micro-kernel's chain over the part's positions (as
/// `weight_grad_part` computes it for those samples) and is added to the block's tile in
/// part order, from `+0.0`. Rows of tiles are split over `par`'s threads when the work is
/// large enough (a tile's value does not depend on which thread computes it).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn leaf_impl(
    isa: Isa,
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
    out: &mut [f32],
    par: &Par,
) -> Result<()> {
    let (k, og, ohw) = (g.k(), g.og(), g.ohw());
    let kern = Kern::for_isa(isa, og);
    let (mr, nr) = (kern.mr, kern.nr);
    let panels = og.div_ceil(nr);
    let nb = ns.len();
    let wide = nb * ohw;
    let pd = padded(g, x, ns.clone())?;
    let poff = patch_offsets(g, &pd);
    let qoff = position_offsets(g, &pd);
    let mut off = Vec::new();
    off.try_reserve_exact(wide)
        .map_err(|_| Error::OutOfMemory {
            op: OP,
            bytes: wide as u128 * core::mem::size_of::<usize>() as u128,
        })?;
    for slot in 0..nb {
        off.extend(qoff.iter().map(|&o| slot * pd.sample + o));
    }
    // The output gradient transposed, per panel of `nr` channels: `b[q · nr + j]`.
    let mut bt = scratch(OP, panels * wide * nr)?;
    if og % nr != 0 {
        bt.fill(0.0);
    }
    for cp in 0..panels {
        let width = nr.min(og - cp * nr);
        for (slot, n) in ns.clone().enumerate() {
            transpose(
                isa,
                &gout[(n * g.cout + grp * og + cp * nr) * ohw..],
                ohw,
                width,
                ohw,
                &mut bt[(cp * wide + slot * ohw) * nr..],
                nr,
            );
        }
    }
    // The parts of `conv2d_weight_grad.fixed_parts` on these `nb` samples.
    let parts = nb.clamp(1, WEIGHT_GRAD_PARTS);
    let per = nb.div_ceil(parts);
    let kp = k.div_ceil(mr) * mr;
    assert!(out.len() >= panels * kp * nr, "leaf buffer too short");
    let job = Tiles {
        kern,
        k,
        kp,
        panels,
        wide,
        parts,
        per,
        nb,
        ohw,
        base: SyncPtr(pd.buf.as_ptr() as *mut f32),
        gb: grp * g.cg() * pd.plane,
        poff: &poff,
        off: &off,
        bt: &bt,
        dst: SyncPtr(out.as_mut_ptr()),
    };
    let row_tiles = kp / mr;
    let work = nb * g.cout * ohw * k;
    if par.threads() > 1 && work > SERIAL_MAX_WORK && row_tiles > 1 {
        let pieces = row_tiles.min(4 * par.threads());
        par.run_parts(pieces, |i| {
            tile_rows_isa(
                isa,
                &job,
                i * row_tiles / pieces,
                (i + 1) * row_tiles / pieces,
            )
        });
    } else {
        tile_rows_isa(isa, &job, 0, row_tiles);
    }
    Ok(())
}

/// What [`tile_rows_impl`] reads and writes: a block's padded samples (`base`, group offset
/// `gb`), patch and position offsets, the transposed output gradient `bt`, and the block's
/// result `dst` (see [`leaf_impl`], which owns them all while the rows run).
pub(super) struct Tiles<'a> {
    kern: Kern,
    k: usize,
    kp: usize,
    panels: usize,
    wide: usize,
    parts: usize,
    per: usize,
    nb: usize,
    ohw: usize,
    base: SyncPtr<f32>,
    gb: usize,
    poff: &'a [usize],
    off: &'a [usize],
    bt: &'a [f32],
    dst: SyncPtr<f32>,
}

isa_versions!(
    fn tile_rows_isa(j: &Tiles, r0: usize, r1: usize) -> ()
        => tile_rows_impl
);

/// The tiles of patch rows `r0·mr .. r1·mr`, every panel (compiled per instruction set, so that
/// the parts' additions and the zero fills use the widest registers).
#[inline(always)]
fn tile_rows_impl(_isa: Isa, j: &Tiles, r0: usize, r1: usize) {
    let (mr, nr, k) = (j.kern.mr, j.kern.nr, j.k);
    let mut t = [0f32; MAX_TILE];
    let t = &mut t[..mr * nr];
    let mut a = [core::ptr::null::<f32>(); 12];
    let a = &mut a[..mr];
    for p0 in (r0..r1).map(|r| r * mr) {
        for (i, ai) in a.iter_mut().enumerate() {
            // A patch row's offset inside the first padded sample.
            *ai = j.base.at(j.gb + j.poff[(p0 + i).min(k - 1)]) as *const f32;
        }
        for cp in 0..j.panels {
            let b = &j.bt[cp * j.wide * nr..][..j.wide * nr];
            // SAFETY: `(cp·kp + p0)·nr + mr·nr ≤ panels·kp·nr ≤ out.len()` (asserted in
            // `leaf_impl`), and the tile of (`cp`, `p0`) is written by this call alone: the
            // callers' row ranges are disjoint.
            let c = unsafe {
                core::slice::from_raw_parts_mut(j.dst.at((cp * j.kp + p0) * nr), mr * nr)
            };
            c.fill(0.0);
            for part in 0..j.parts {
                let (s0, s1) = ((part * j.per).min(j.nb), ((part + 1) * j.per).min(j.nb));
                let q0 = s0 * j.ohw;
                // SAFETY: every read `a_i + off[q]` is a patch offset plus a window's corner,
                // inside its padded sample; `off` and `b` hold the part's `(s1 − s0)·ohw`
                // steps from `q0`.
                unsafe { tile(j.kern, (s1 - s0) * j.ohw, a, &j.off[q0..], &b[q0 * nr..], t) };
                for (d, &s) in c.iter_mut().zip(t.iter()) {
                    *d += s;
                }
            }
        }
    }
}

/// Most floats of a batch's padded input and transposed output gradient (1 MiB, the size of
/// an L2) for which `conv2d_weight_grad.fixed_parts` runs as one block (see [`one_block`]).
const ONE_BLOCK_MAX_FLOATS: usize = 1 << 18;

/// Whether `conv2d_weight_grad.fixed_parts` computes the whole batch as one block here (each
/// tile's parts added in L1) rather than part by part: only while the batch's padded input and
/// transposed output gradient fit in L2. Beyond, every row of tiles would read them from
/// memory (1 → 64 channels at 32×32, batch 256: 7.7 ms part by part, 41 ms as one block). The
/// same bits either way: a function of the shapes only.
pub(in super::super) fn one_block(g: &Geometry) -> bool {
    let (hp, wp) = g.padded();
    let padded =
        g.n.saturating_mul(g.cin)
            .saturating_mul(hp)
            .saturating_mul(wp);
    let bt = g
        .og()
        .next_multiple_of(32)
        .saturating_mul(g.n)
        .saturating_mul(g.ohw());
    padded.saturating_add(bt) <= ONE_BLOCK_MAX_FLOATS
}

/// The largest `MR × NR` tile of [`Kern::for_isa`] (AVX-512's 8 × 32).
const MAX_TILE: usize = 256;

/// `acc` (the tree's result, in [`leaf_impl`]'s layout) into `dw` (`og × K`).
#[inline(always)]
fn finish_impl(isa: Isa, g: &Geometry, acc: &[f32], dw: &mut [f32]) -> Result<()> {
    let (k, og) = (g.k(), g.og());
    let kern = Kern::for_isa(isa, og);
    let (mr, nr) = (kern.mr, kern.nr);
    let kp = k.div_ceil(mr) * mr;
    for cp in 0..og.div_ceil(nr) {
        let width = nr.min(og - cp * nr);
        transpose(
            isa,
            &acc[cp * kp * nr..],
            nr,
            k,
            width,
            &mut dw[cp * nr * k..],
            k,
        );
    }
    Ok(())
}

/// `s[lo] = S(lo, hi)` for leaves of `len` elements: the fixed binary tree over block index.
fn tree(s: &mut [f32], lo: usize, hi: usize, len: usize) {
    if hi - lo <= 1 {
        return;
    }
    let mid = lo + (hi - lo).div_ceil(2);
    tree(s, lo, mid, len);
    tree(s, mid, hi, len);
    let (left, right) = s.split_at_mut(mid * len);
    for (x, &y) in left[lo * len..(lo + 1) * len].iter_mut().zip(&right[..len]) {
        *x += y;
    }
}

impl Tensor {
    /// The gradient of [`conv2d`](Self::conv2d) with respect to its weight, for a batch cut
    /// into blocks of `block` samples (the last one shorter when `block` does not divide N):
    /// each block's gradient has the bits of
    /// [`conv2d_backward_weight`](Self::conv2d_backward_weight) on that block's samples, and
    /// the blocks are added in the fixed binary tree over block index (`sum(lo..hi) =
    /// sum(lo..mid) + sum(mid..hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`), element by element: invariant
    /// seeding's micro-shard sum of a convolution's weight gradient. Where a block's call runs
    /// the deterministic `fixed_parts` kernel on the implicit GEMM (the default on small
    /// shapes), one call computes every block (each block's samples copied once, each part's tile into an
    /// L1 scratch and added to its block's in part order, the tree on the blocks' results: no
    /// call, buffer or tensor per block); otherwise (a pinned
    /// algorithm, benchmark mode, Winograd, large shapes) it makes the blocks' calls and adds
    /// them in the same tree. The bits depend on the shapes, `block`, the values and the
    /// policy the blocks' calls would see only; never on the thread count.
    ///
    /// # Errors
    /// As [`conv2d_backward_weight`](Self::conv2d_backward_weight), and `block == 0`.
    pub fn conv2d_backward_weight_blocks(
        grad_output: &Tensor,
        input: &Tensor,
        weight_shape: &[usize],
        p: Conv2dParams,
        block: usize,
    ) -> Result<Tensor> {
        let g = Geometry::new(OP, input.shape(), weight_shape, p)?;
        check_grad_output(OP, &g, grad_output)?;
        if block == 0 {
            return Err(invalid(
                OP,
                "block",
                "blocks of samples must be at least 1 long",
            ));
        }
        if g.n > 0 && !matches_per_block_call(&g) {
            return per_block_calls(grad_output, input, weight_shape, p, block, g.n);
        }
        let (go, x) = (grad_output.contiguous_for(OP)?, input.contiguous_for(OP)?);
        let (gs, xs) = (
            f32_data(OP, "grad_output", &go)?,
            f32_data(OP, "input", &x)?,
        );
        CONV2D_WEIGHT_GRAD_BLOCKS.run(&[grad_output, input], |imp, par| {
            let mut out = try_zeroed(OP, weight_shape.iter().product())?;
            (imp.f)(&g, xs, gs, block, &mut out, par)?;
            Tensor::from_vec(out, weight_shape)
        })
    }
}

/// The blocks' own `conv2d_backward_weight` calls, added in the tree.
fn per_block_calls(
    grad_output: &Tensor,
    input: &Tensor,
    weight_shape: &[usize],
    p: Conv2dParams,
    block: usize,
    n: usize,
) -> Result<Tensor> {
    fn sum(parts: &mut [Option<Tensor>]) -> Result<Tensor> {
        if let [only] = parts {
            return only
                .take()
                .ok_or_else(|| invalid(OP, "block", "internal: a block summed twice"));
        }
        let mid = parts.len().div_ceil(2);
        let (l, r) = parts.split_at_mut(mid);
        let mut a = sum(l)?;
        a.add_(&sum(r)?, 1.0)?;
        Ok(a)
    }
    let mut parts = (0..n.div_ceil(block))
        .map(|b| {
            let (s, len) = (b * block, block.min(n - b * block));
            Tensor::conv2d_backward_weight(
                &grad_output.narrow(0, s, len)?,
                &input.narrow(0, s, len)?,
                weight_shape,
                p,
            )
            .map(Some)
        })
        .collect::<Result<Vec<_>>>()?;
    sum(&mut parts)
}

#[cfg(test)]
mod tests {
    use super::super::super::weight_grad_parts_summed;
    // The implicit kernel's own test inputs (special values included) and NaN-blind bits.
    use super::super::tests::{bits, values};
    use super::*;

    /// The definition: each block's `fixed_parts` gradient (each part made whole, then the
    /// parts added in order), then the tree.
    fn reference(
        xs: [usize; 4],
        ws: [usize; 4],
        p: Conv2dParams,
        x: &[f32],
        gout: &[f32],
        block: usize,
    ) -> Vec<f32> {
        fn tree(parts: &[Vec<f32>]) -> Vec<f32> {
            if parts.len() == 1 {
                return parts[0].clone();
            }
            let mid = parts.len().div_ceil(2);
            let (a, b) = (tree(&parts[..mid]), tree(&parts[mid..]));
            a.iter().zip(&b).map(|(&x, &y)| x + y).collect()
        }
        let g = Geometry::new("t", &xs, &ws, p).unwrap();
        let (chw, ochw) = (g.cin * g.h * g.w, g.cout * g.ohw());
        let parts: Vec<Vec<f32>> = (0..g.n.div_ceil(block))
            .map(|b| {
                let (s, nb) = (b * block, block.min(g.n - b * block));
                let gb = Geometry::new("t", &[nb, xs[1], xs[2], xs[3]], &ws, p).unwrap();
                let mut dw = vec![f32::NAN; ws.iter().product()];
                weight_grad_parts_summed(
                    &gb,
                    &x[s * chw..(s + nb) * chw],
                    &gout[s * ochw..(s + nb) * ochw],
                    &mut dw,
                    &Par::new(1),
                )
                .unwrap();
                dw
            })
            .collect();
        tree(&parts)
    }

    fn isas() -> Vec<Isa> {
        [Isa::Portable, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.available())
            .collect()
    }

    /// (input, weight, params, blocks)
    type Case = ([usize; 4], [usize; 4], Conv2dParams, &'static [usize]);

    #[test]
    fn every_isa_and_thread_count_gives_the_blocks_fixed_parts_sums_in_the_tree() {
        let p = |stride, padding, dilation, groups| Conv2dParams {
            stride,
            padding,
            dilation,
            groups,
        };
        // (input, weight, params, blocks)
        let cases: Vec<Case> = vec![
            // The cnn model's two convolutions at batch 64 (and a short last block).
            (
                [64, 1, 8, 8],
                [16, 1, 3, 3],
                p((1, 1), (1, 1), (1, 1), 1),
                &[8, 7],
            ),
            (
                [20, 16, 4, 4],
                [32, 16, 3, 3],
                p((1, 1), (1, 1), (1, 1), 1),
                &[8, 3, 1, 20, 64],
            ),
            // Blocks of 9 to 17 samples: parts of two or three samples, some empty.
            (
                [30, 3, 7, 5],
                [5, 3, 3, 2],
                p((1, 1), (0, 0), (1, 1), 1),
                &[9, 11, 17],
            ),
            // Strides, dilation, padding and groups; odd sizes.
            (
                [7, 4, 7, 5],
                [6, 2, 3, 2],
                p((2, 1), (1, 2), (1, 2), 2),
                &[2, 3],
            ),
            (
                [5, 6, 9, 9],
                [42, 2, 2, 3],
                p((2, 3), (2, 1), (2, 1), 3),
                &[2, 4],
            ),
            (
                [6, 20, 5, 6],
                [17, 20, 1, 1],
                p((1, 1), (0, 0), (1, 1), 1),
                &[4],
            ),
            (
                [9, 2, 3, 3],
                [3, 2, 3, 3],
                p((1, 1), (2, 2), (1, 1), 1),
                &[8],
            ),
            (
                [4, 40, 6, 6],
                [9, 40, 3, 3],
                p((1, 1), (1, 1), (1, 1), 1),
                &[3],
            ),
            (
                [5, 3, 0, 4],
                [4, 3, 3, 3],
                p((1, 1), (2, 1), (1, 1), 1),
                &[2],
            ),
            // Enough work for the blocks to run on several threads, and for one block's
            // tiles to (block 24).
            (
                [24, 16, 12, 12],
                [32, 16, 3, 3],
                p((1, 1), (1, 1), (1, 1), 1),
                &[8, 5, 24],
            ),
            // The dcgan example's 64 → 128 channels (parts of 8 samples; one block is what
            // `conv2d_weight_grad.fixed_parts` runs).
            (
                [64, 64, 4, 4],
                [128, 64, 4, 4],
                p((2, 2), (1, 1), (1, 1), 1),
                &[64, 13],
            ),
        ];
        for (ci, (xs, ws, p, blocks)) in cases.into_iter().enumerate() {
            let g = Geometry::new(OP, &xs, &ws, p).unwrap();
            assert!(applicable(&g), "{xs:?} {ws:?}");
            for special in [false, true] {
                let seed = ci as u64 * 10 + special as u64;
                let x = values(xs.iter().product(), seed, special);
                let gout = values(g.n * g.cout * g.ohw(), seed + 1000, special);
                for &block in blocks {
                    let want = bits(&reference(xs, ws, p, &x, &gout, block));
                    for isa in isas() {
                        for threads in [1, 2, 3, 8] {
                            let mut dw = vec![0f32; ws.iter().product()];
                            blocks_with(isa, &g, &x, &gout, block, &mut dw, &Par::new(threads))
                                .unwrap();
                            assert_eq!(
                                bits(&dw),
                                want,
                                "{xs:?} {ws:?} {p:?} block {block} special={special} {isa:?} {threads} threads"
                            );
                        }
                    }
                }
            }
        }
    }
}
