//! Implicit GEMM for small convolutions: the products of im2col + GEMM without the im2col
//! matrix and without packing it.
//!
//! One micro-kernel does the work of all three ops: an `MR × NR` tile of C, each of its `MR`
//! rows reading its A values straight from memory (`a_i[off[s]]` at step `s`: a pointer per
//! row plus an offset per step, the same for every row), and B from a packed panel of `NR`
//! columns. A row pointer is an output position in a zero-padded copy of the input (forward),
//! a patch row in that copy (weight gradient) or a position of the output gradient (input
//! gradient); B is the weight, or the output gradient transposed, packed once.
//!
//! # Bits
//! Every element is the chain of fused multiply-adds, from `+0.0`, over the same terms in the
//! same order as the im2col + GEMM kernels of `mod.rs` (padding zeros included: they are read
//! from the padded copy), and the input gradient adds the taps' chains into a zeroed gradient
//! in the order `col2im` does, skipping the same out-of-range terms. So this path gives the
//! bits of `conv2d.im2col_gemm`, `conv2d_input_grad.gemm_col2im` and one part of
//! `conv2d_weight_grad.fixed_parts` (tested bit for bit against them, special values
//! included), whatever the instruction set and the tile sizes.

use super::{Geometry, Scratch, scratch};
use crate::error::Result;
use crate::ops::lines::copy_line;
use crate::ops::matmul::Isa;

/// Whether the shapes suit the input gradient's path: [`applicable`], and enough input
/// channels per group to fill a good part of the kernel's columns.
pub(super) fn input_grad_applicable(g: &Geometry) -> bool {
    applicable(g) && g.cg() >= 8
}

/// Whether the shapes suit this path (a function of the shapes only): planes and reductions
/// short enough for a sample's padded input to stay in L2, where im2col + GEMM spends much of
/// its time copying. (The weight gradient's parts take it wherever this holds.)
pub(super) fn applicable(g: &Geometry) -> bool {
    let (hp, wp) = g.padded();
    g.n > 0
        && g.og() > 0
        && g.k() > 0
        && g.ohw() > 0
        && g.k() <= MAX_K
        && g.ohw() <= MAX_OHW
        && g.cg().saturating_mul(hp).saturating_mul(wp) <= MAX_PLANES
}

/// Whether the forward pass and the input gradient take this path with `threads` threads:
/// [`applicable`] (`input_grad` adds [`input_grad_applicable`]'s condition), and planes of
/// more than [`WHOLE_SAMPLE_OHW`] positions only with a sample for every thread (their chunks
/// are whole samples, while im2col's GEMM splits one sample's product over the threads). The
/// two paths give the same bits, so the thread count may choose.
pub(super) fn chosen(g: &Geometry, input_grad: bool, threads: usize) -> bool {
    let ok = if input_grad {
        // On large planes the input gradient wins from 16 channels (16 → 16 at 64×64: 5.1 →
        // 3.6 ms) but loses with 8 (8 → 8 at 60×60: 0.96 → 1.19 ms).
        input_grad_applicable(g) && (g.ohw() <= WHOLE_SAMPLE_OHW || g.cg() >= 16)
    } else {
        applicable(g)
    };
    ok && (g.ohw() <= WHOLE_SAMPLE_OHW || g.n >= threads)
}

/// Longest reduction of the forward pass (`C_in/groups · kH · kW`).
const MAX_K: usize = 1152;
/// Most output positions per plane. Measured 2026-12-01 (`conv_bench sizes`, one thread,
/// 3×3 with 64 → 64 channels): at 56×56, batch 8, forward 25.7 → 18.2 ms, input grad 29.6 →
/// 22.1, weight grad 28.0 → 17.5 against im2col + GEMM; at 64×64, batch 4, 17.3 → 11.7, 20.0 →
/// 14.1, 20.1 → 11.5.
const MAX_OHW: usize = 4096;
/// Planes up to this many positions have chunks of several samples (see [`chosen`]).
const WHOLE_SAMPLE_OHW: usize = 1024;
/// Most padded input values of one sample's group (2 MiB). Raised from 2^16 on 2026-12-01:
/// 3×3, 64 → 64 channels at 32×32 (batch 8, one thread) forward 7.7 → 5.8 ms, input grad
/// 9.8 → 7.1, weight grad 15.9 → 5.9; and with [`MAX_OHW`] for the planes above.
const MAX_PLANES: usize = 1 << 19;

/// Output columns per chunk of whole samples in the forward pass and the input gradient (a
/// function of the shape only; chunks change which thread computes an output, not its bits).
const CHUNK_COLS: usize = 256;

/// Output positions per block of the input gradient's tap loop (see [`input_grad_chunk`];
/// 384 against the whole chunk: 3×3 64 → 64 at 56×56, batch 8, AVX2, one thread 28.1 →
/// 25.7 ms CPU time, best of three rounds, 2026-12-01). A constant: the bits never depend
/// on it.
const IG_BLOCK_COLS: usize = 384;

/// Samples per chunk: about [`CHUNK_COLS`] output positions.
pub(super) fn samples_per_chunk(g: &Geometry) -> usize {
    (CHUNK_COLS / g.ohw().max(1)).clamp(1, g.n.max(1))
}

// ---------------------------------------------------------------------------------------------
// The micro-kernels.

/// `(kc, a, off, b, c)`: `c[i·NR + j] = Σ_{s < kc} a[i][off[s]] · b[s·NR + j]` for `i < MR`,
/// `j < NR`, each element one chain of fused multiply-adds from `+0.0` in increasing `s`.
///
/// # Safety
/// `a` holds `MR` pointers, each readable at every `off[s]`; `off` holds `kc` offsets; `b`
/// holds `kc · NR` values; `c` is writable for `MR · NR`; the CPU has the kernel's features.
type TileFn = unsafe fn(usize, *const *const f32, *const usize, *const f32, *mut f32);

/// A micro-kernel and its tile.
#[derive(Clone, Copy)]
pub(super) struct Kern {
    mr: usize,
    nr: usize,
    f: TileFn,
}

impl Kern {
    /// The kernel of `isa` (an available one) for products with `cols` columns of B: one
    /// vector of columns when that covers them all, else two.
    fn for_isa(isa: Isa, cols: usize) -> Kern {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if cols <= 16 => Kern {
                mr: 12,
                nr: 16,
                f: x86::avx512::<12, 1>,
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Kern {
                mr: 8,
                nr: 32,
                f: x86::avx512::<8, 2>,
            },
            // 10 rows, not AVX-512's 12: with 12 the compiler loads all the broadcasts
            // before the multiply-adds and spills accumulators (16 YMM registers); 10 row
            // pointers also leave enough general registers (disassembly: no stack traffic in
            // the loop).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 if cols <= 8 => Kern {
                mr: 10,
                nr: 8,
                f: x86::avx2::<10, 1>,
            },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Kern {
                mr: 6,
                nr: 16,
                f: x86::avx2::<6, 2>,
            },
            _ => Kern {
                mr: 4,
                nr: 8,
                f: portable::<4, 8>,
            },
        }
    }
}

/// The portable kernel: scalar `mul_add` (one rounding per step, as the vector kernels).
///
/// # Safety
/// See [`TileFn`].
unsafe fn portable<const MR: usize, const NR: usize>(
    kc: usize,
    a: *const *const f32,
    off: *const usize,
    b: *const f32,
    c: *mut f32,
) {
    // SAFETY (whole body): the caller guarantees the bounds (see `TileFn`).
    unsafe {
        let ap: [*const f32; MR] = core::array::from_fn(|i| *a.add(i));
        scalar_tile!(0f32, MR, NR;
            for s in 0..kc {
                let o = *off.add(s);
                let bp = b.add(s * NR);
            }
            b |j| bp.add(j);
            a |i| *ap[i].add(o);
            store |i, j| c.add(i * NR + j));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! AVX2+FMA and AVX-512 builds of the kernel: `MR × NV` vector accumulators, one
    //! broadcast per row and step, `NV` vector loads of B per step.
    use core::arch::x86_64::*;

    /// Stamps the kernel `$name::<MR, NV>`: [`fma_tile!`] over [`x86_fma!`]'s vocabulary.
    macro_rules! tile_kernel {
        ($name:ident, $feat:literal, $isa:tt) => {
            /// A SIMD build of the kernel (see `TileFn`).
            ///
            /// # Safety
            /// See `TileFn`; the CPU must support the target features.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name<const MR: usize, const NV: usize>(
                kc: usize,
                a: *const *const f32,
                off: *const usize,
                b: *const f32,
                c: *mut f32,
            ) {
                const LANES: usize = fma_tile!($isa LANES);
                // SAFETY (whole body): the caller guarantees bounds and CPU features.
                unsafe {
                    let ap: [*const f32; MR] = core::array::from_fn(|i| *a.add(i));
                    let mut bp = b;
                    fma_tile!($isa, MR, NV;
                        for s in 0..kc {
                            let o = *off.add(s);
                        }
                        b |v| bp.add(v * LANES);
                        a |i| *ap[i].add(o);
                        then {
                            bp = bp.add(NV * LANES);
                        }
                        store |i, v| c.add((i * NV + v) * LANES));
                }
            }
        };
    }

    x86_fma!(avx2_f32, tile_kernel!(avx2));
    x86_fma!(avx512_f32, tile_kernel!(avx512));
}

/// Calls `kern` on `kc` steps.
///
/// # Safety
/// As [`TileFn`], with `a.len() == kern.mr`, `off.len() >= kc`, `b.len() >= kc · kern.nr` and
/// `c.len() >= kern.mr · kern.nr`: only the row pointers' reads are the caller's to check.
#[inline]
unsafe fn tile(kern: Kern, kc: usize, a: &[*const f32], off: &[usize], b: &[f32], c: &mut [f32]) {
    debug_assert!(a.len() == kern.mr && off.len() >= kc && b.len() >= kc * kern.nr);
    debug_assert!(c.len() >= kern.mr * kern.nr);
    // SAFETY: lengths as asserted; the row pointers are the caller's guarantee.
    unsafe { (kern.f)(kc, a.as_ptr(), off.as_ptr(), b.as_ptr(), c.as_mut_ptr()) }
}

// ---------------------------------------------------------------------------------------------
// Shared layout: zero-padded copies of the input and the offsets into them.

/// Samples `ns` of `x` copied with their padding zeros: sample `s`, channel `c` starts at
/// `(s · C_in + c) · plane`, rows `wp` apart.
struct Padded {
    buf: Scratch,
    plane: usize,
    wp: usize,
    sample: usize,
}

fn padded(g: &Geometry, x: &[f32], ns: std::ops::Range<usize>) -> Result<Padded> {
    let (hp, wp) = g.padded();
    let (ph, pw) = g.p.padding;
    let plane = hp * wp;
    let sample = g.cin * plane;
    let mut buf = scratch(g.op, ns.len() * sample)?;
    let hw = g.h * g.w;
    if ph > 0 || pw > 0 {
        buf.fill(0.0);
    }
    let planes = x[ns.start * g.cin * hw..ns.end * g.cin * hw].chunks_exact(hw.max(1));
    for (src, dst) in planes.zip(buf.chunks_exact_mut(plane)) {
        for (row, d) in src
            .chunks_exact(g.w)
            .zip(dst[ph * wp..].chunks_exact_mut(wp))
        {
            // Rows are short: fixed-size moves (a `memcpy` call per row took 4.6 % of the
            // dcgan example's samples).
            copy_line(&mut d[pw..pw + g.w], row);
        }
    }
    Ok(Padded {
        buf,
        plane,
        wp,
        sample,
    })
}

/// Offset of patch row `p = (c, a, b)` of group 0 in a padded sample.
fn patch_offsets(g: &Geometry, pd: &Padded) -> Vec<usize> {
    let (dh, dw) = g.p.dilation;
    let mut v = Vec::with_capacity(g.k());
    for c in 0..g.cg() {
        for a in 0..g.kh {
            for b in 0..g.kw {
                v.push(c * pd.plane + a * dh * pd.wp + b * dw);
            }
        }
    }
    v
}

/// Offset of output position `(i, j)` (its window's top-left corner) in a padded plane.
fn position_offsets(g: &Geometry, pd: &Padded) -> Vec<usize> {
    let (sh, sw) = g.p.stride;
    let mut v = Vec::with_capacity(g.ohw());
    for i in 0..g.oh {
        for j in 0..g.ow {
            v.push(i * sh * pd.wp + j * sw);
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Data movement, compiled once per instruction set.

/// Compiles `$imp` (an `#[inline(always)]` function taking the ISA first) once per instruction
/// set, so that its copies, adds and transposes use the widest registers. Data movement and
/// plain f32 adds: the bits are the same on every path.
macro_rules! isa_versions {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $imp:path) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $name(isa: Isa, $($arg: $ty),*) -> $ret {
            debug_assert!(isa.available());
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments)]
                fn avx512($($arg: $ty),*) -> $ret {
                    $imp(Isa::Avx512, $($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2($($arg: $ty),*) -> $ret {
                    $imp(Isa::Avx2, $($arg),*)
                }
                match isa {
                    // SAFETY: callers pass an available instruction set (`Isa::best()`, or
                    // one the tests checked).
                    Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    Isa::Portable => {}
                }
            }
            $imp(Isa::Portable, $($arg),*)
        }
    };
}

/// `dst[j·ds + i] = src[i·ss + j]` for `i < rows`, `j < cols`: 16×16 blocks through
/// registers, the edges one by one.
#[inline(always)]
fn transpose(
    isa: Isa,
    src: &[f32],
    ss: usize,
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    ds: usize,
) {
    const B: usize = 16;
    let mut i0 = 0;
    while i0 + B <= rows {
        let mut j0 = 0;
        while j0 + B <= cols {
            // A plain copy loop: `array::from_fn` with `try_into` here was not inlined and
            // cost ~9 % of dcgan's training step (`core::array::try_from_fn`).
            let mut blk = [[0f32; B]; B];
            for (i, row) in blk.iter_mut().enumerate() {
                row.copy_from_slice(&src[(i0 + i) * ss + j0..][..B]);
            }
            let mut out = [[0f32; B]; B];
            super::winograd::transpose16(isa, &blk, &mut out);
            for (j, o) in out.iter().enumerate() {
                dst[(j0 + j) * ds + i0..][..B].copy_from_slice(o);
            }
            j0 += B;
        }
        for j in j0..cols {
            for i in i0..i0 + B {
                dst[j * ds + i] = src[i * ss + j];
            }
        }
        i0 += B;
    }
    for i in i0..rows {
        for j in 0..cols {
            dst[j * ds + i] = src[i * ss + j];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forward.

/// The weights packed for the forward pass: per group and panel of `nr` output channels,
/// `b[p · nr + j] = w[co0 + j][p]` (zeros past the group's channels).
pub(super) struct ForwardWeights {
    isa: Isa,
    kern: Kern,
    panels: usize,
    buf: Scratch,
}

pub(super) fn pack_forward_weights(g: &Geometry, w: &[f32], isa: Isa) -> Result<ForwardWeights> {
    let kern = Kern::for_isa(isa, g.og());
    let (k, og, nr) = (g.k(), g.og(), kern.nr);
    let panels = og.div_ceil(nr);
    let mut buf = scratch(g.op, g.p.groups * panels * k * nr)?;
    if og % nr != 0 {
        buf.fill(0.0);
    }
    for grp in 0..g.p.groups {
        for cp in 0..panels {
            let width = nr.min(og - cp * nr);
            let src = &w[(grp * og + cp * nr) * k..][..width * k];
            let dst = &mut buf[(grp * panels + cp) * k * nr..][..k * nr];
            transpose(isa, src, k, width, k, dst, nr);
        }
    }
    Ok(ForwardWeights {
        isa,
        kern,
        panels,
        buf,
    })
}

/// The forward pass of samples `ns` into `out` (their `|ns| × C_out × OH × OW` outputs).
pub(super) fn forward_chunk(
    g: &Geometry,
    x: &[f32],
    fw: &ForwardWeights,
    ns: std::ops::Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    forward_chunk_isa(fw.isa, g, x, fw, ns, out)
}

isa_versions!(
    fn forward_chunk_isa(g: &Geometry, x: &[f32], fw: &ForwardWeights, ns: std::ops::Range<usize>, out: &mut [f32]) -> Result<()>
        => forward_chunk_impl
);

#[inline(always)]
fn forward_chunk_impl(
    isa: Isa,
    g: &Geometry,
    x: &[f32],
    fw: &ForwardWeights,
    ns: std::ops::Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let (k, og, ohw) = (g.k(), g.og(), g.ohw());
    let (kern, panels) = (fw.kern, fw.panels);
    let (mr, nr) = (kern.mr, kern.nr);
    let pd = padded(g, x, ns.clone())?;
    let poff = patch_offsets(g, &pd);
    let qoff = position_offsets(g, &pd);
    let cols = ns.len() * ohw;
    // Products, channels last: panel `cp`, position `q`, channel `j` at `(cp·colsp + q)·nr + j`.
    let colsp = cols.div_ceil(mr) * mr;
    let mut cl = scratch(g.op, panels * colsp * nr)?;
    let mut a = [core::ptr::null::<f32>(); 12];
    let a = &mut a[..mr];
    let base = pd.buf.as_ptr();
    for grp in 0..g.p.groups {
        let gb = grp * g.cg() * pd.plane;
        for q0 in (0..cols).step_by(mr) {
            let (mut slot, mut pos) = (q0 / ohw, q0 % ohw);
            for ai in a.iter_mut() {
                // Rows past the end repeat the last position (computed, never read).
                let (s, p) = if slot < ns.len() {
                    (slot, pos)
                } else {
                    (ns.len() - 1, ohw - 1)
                };
                // SAFETY: a window's corner inside the padded copy.
                *ai = unsafe { base.add(s * pd.sample + gb + qoff[p]) };
                pos += 1;
                if pos == ohw {
                    (slot, pos) = (slot + 1, 0);
                }
            }
            for cp in 0..panels {
                let b = &fw.buf[(grp * panels + cp) * k * nr..][..k * nr];
                let c = &mut cl[(cp * colsp + q0) * nr..][..mr * nr];
                // SAFETY: every read `a_i + poff[p]` is inside its padded sample (a window's
                // corner plus an offset inside the window).
                unsafe { tile(kern, k, a, &poff, b, c) };
            }
        }
        for slot in 0..ns.len() {
            for cp in 0..panels {
                let width = nr.min(og - cp * nr);
                transpose(
                    isa,
                    &cl[(cp * colsp + slot * ohw) * nr..],
                    nr,
                    ohw,
                    width,
                    &mut out[(slot * g.cout + grp * og + cp * nr) * ohw..],
                    ohw,
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Input gradient.

/// The weights packed for the input gradient: per group, tap `(a, b)` and panel of `nr`
/// input channels, `b[co · nr + j] = w[co][c0 + j][a][b]` (zeros past the group's channels).
pub(super) struct InputGradWeights {
    isa: Isa,
    kern: Kern,
    panels: usize,
    buf: Scratch,
}

pub(super) fn pack_input_grad_weights(
    g: &Geometry,
    w: &[f32],
    isa: Isa,
) -> Result<InputGradWeights> {
    let kern = Kern::for_isa(isa, g.cg());
    let (og, cg, nr, taps) = (g.og(), g.cg(), kern.nr, g.kh * g.kw);
    let panels = cg.div_ceil(nr);
    let panel = og * nr;
    let mut buf = scratch(g.op, g.p.groups * taps * panels * panel)?;
    // Zeros past the group's channels (a reused scratch holds old values).
    if cg % nr != 0 {
        buf.fill(0.0);
    }
    // One panel's channels of one output channel at a time: their taps are one contiguous run
    // of the weight (reading one tap of every channel was 3.6 % of dcgan's profile), and each
    // tap's `nr` values are stored as one run (stored one value at a time, taps a power-of-two
    // stride apart, the writes thrashed one L1 set: 11 % of dcgan's profile).
    for grp in 0..g.p.groups {
        for co in 0..og {
            for cp in 0..panels {
                let (c0, cn) = (cp * nr, nr.min(cg - cp * nr));
                let src = &w[((grp * og + co) * cg + c0) * taps..][..cn * taps];
                for tap in 0..taps {
                    let at = ((grp * taps + tap) * panels + cp) * panel + co * nr;
                    for (j, d) in buf[at..at + cn].iter_mut().enumerate() {
                        *d = src[j * taps + tap];
                    }
                }
            }
        }
    }
    Ok(InputGradWeights {
        isa,
        kern,
        panels,
        buf,
    })
}

/// The input gradient of samples `ns` into `dx` (their `|ns| × C_in × H × W` values).
///
/// For each tap in order, the chains over the output channels for every output position
/// (what im2col + GEMM stores in the row `(c, a, b)` of its column matrix) are added into a
/// channels-last accumulator at the input position they touch, skipping positions outside the
/// input, as `col2im` adds them; then the accumulator is transposed into `dx`.
pub(super) fn input_grad_chunk(
    g: &Geometry,
    gout: &[f32],
    iw: &InputGradWeights,
    ns: std::ops::Range<usize>,
    dx: &mut [f32],
) -> Result<()> {
    input_grad_chunk_isa(iw.isa, g, gout, iw, ns, dx)
}

isa_versions!(
    fn input_grad_chunk_isa(g: &Geometry, gout: &[f32], iw: &InputGradWeights, ns: std::ops::Range<usize>, dx: &mut [f32]) -> Result<()>
        => input_grad_chunk_impl
);

#[inline(always)]
fn input_grad_chunk_impl(
    isa: Isa,
    g: &Geometry,
    gout: &[f32],
    iw: &InputGradWeights,
    ns: std::ops::Range<usize>,
    dx: &mut [f32],
) -> Result<()> {
    let (og, cg, ohw) = (g.og(), g.cg(), g.ohw());
    let (kern, panels) = (iw.kern, iw.panels);
    let (mr, nr) = (kern.mr, kern.nr);
    let taps = g.kh * g.kw;
    let cgp = panels * nr;
    let hw = g.h * g.w;
    let cols = ns.len() * ohw;
    let mut acc = scratch(g.op, ns.len() * hw * cgp)?;
    // Step `co` of a row reads output channel `co` of the row's position.
    let off: Vec<usize> = (0..og).map(|co| co * ohw).collect();
    // Where output position `pos` of each tap lands in the input plane, if inside.
    const OUTSIDE: usize = usize::MAX;
    let mut target = Vec::with_capacity(taps * ohw);
    for tap in 0..taps {
        let (ta, tb) = (tap / g.kw, tap % g.kw);
        for i in 0..g.oh {
            for j in 0..g.ow {
                target.push(match (g.in_y(i, ta), g.in_x(j, tb)) {
                    (Some(y), Some(x)) => y * g.w + x,
                    _ => OUTSIDE,
                });
            }
        }
    }
    let mut c = [0f32; 12 * 32];
    let mut a = [core::ptr::null::<f32>(); 12];
    let a = &mut a[..mr];
    // Where each row of a tile adds into `acc` (its first column), or `OUTSIDE`.
    let mut dst = [OUTSIDE; 12];
    let chw = g.cin * hw;
    for grp in 0..g.p.groups {
        acc.fill(0.0);
        // Blocks of positions, the last first, every tap over a block before the next block:
        // the block's rows of `gout` and `acc` stay in L2 through the taps. The adds into an
        // `acc` element keep `col2im`'s tap order: for a fixed input position, a later tap's
        // source is a strictly earlier output position (of the same sample), so its block
        // is never visited before an earlier tap's.
        let qblk = IG_BLOCK_COLS.div_ceil(mr) * mr;
        for qb0 in (0..cols.div_ceil(qblk)).rev().map(|b| b * qblk) {
            for tap in 0..taps {
                let target = &target[tap * ohw..][..ohw];
                for q0 in (qb0..cols.min(qb0 + qblk)).step_by(mr) {
                    let rows = mr.min(cols - q0);
                    // The rows' positions are consecutive: one division per tile, not two per
                    // row (the tail's spare rows repeat the last and add nothing).
                    let (mut slot, mut pos) = (q0 / ohw, q0 % ohw);
                    for (i, (ai, di)) in a.iter_mut().zip(dst.iter_mut()).enumerate() {
                        let at = ((ns.start + slot) * g.cout + grp * og) * ohw + pos;
                        *ai = gout[at..][..(og - 1) * ohw + 1].as_ptr();
                        // (Only the first `rows` are read.)
                        *di = match target[pos] {
                            OUTSIDE => OUTSIDE,
                            t => (slot * hw + t) * cgp,
                        };
                        if i + 1 < rows {
                            pos += 1;
                            if pos == ohw {
                                (slot, pos) = (slot + 1, 0);
                            }
                        }
                    }
                    for cp in 0..panels {
                        let b = &iw.buf[((grp * taps + tap) * panels + cp) * og * nr..][..og * nr];
                        // SAFETY: row `i` reads `a_i + co · ohw` for `co < og`, inside the slice
                        // it was taken from.
                        unsafe { tile(kern, og, a, &off, b, &mut c) };
                        for (row, &at) in c.chunks_exact(nr).zip(&dst[..rows]) {
                            if at != OUTSIDE {
                                add_row(&mut acc[at + cp * nr..][..nr], row);
                            }
                        }
                    }
                }
            }
        }
        for slot in 0..ns.len() {
            transpose(
                isa,
                &acc[slot * hw * cgp..],
                cgp,
                hw,
                cg,
                &mut dx[slot * chw + grp * cg * hw..],
                hw,
            );
        }
    }
    Ok(())
}

/// `d[j] += s[j]`, one addition per element: whole vectors for the kernels' tile widths (a
/// loop of unknown length went 8 lanes at a time, its loads straddling the tile's 16-lane
/// stores; 3×3 64 → 64 at 56², batch 8: 10.4 → 10.0 ms on Zen 5).
#[inline(always)]
fn add_row(d: &mut [f32], s: &[f32]) {
    #[inline(always)]
    fn fixed<const N: usize>(d: &mut [f32], s: &[f32]) {
        let (d, s): (&mut [f32; N], &[f32; N]) = (
            (&mut d[..N]).try_into().expect("a whole row"),
            s[..N].try_into().expect("a whole row"),
        );
        // Whole arrays in and out: as a loop over the elements in place it stayed scalar.
        let mut t = *d;
        for (t, &v) in t.iter_mut().zip(s) {
            *t += v;
        }
        *d = t;
    }
    match d.len() {
        32 => fixed::<32>(d, s),
        16 => fixed::<16>(d, s),
        8 => fixed::<8>(d, s),
        _ => d.iter_mut().zip(s).for_each(|(d, &v)| *d += v),
    }
}

// ---------------------------------------------------------------------------------------------
// Weight gradient.

/// `dW` of group `grp` over samples `ns` into `part` (`og × K`): element `(co, p)` is the chain
/// over the samples' output positions in order, as one GEMM over `|ns| · OH · OW` does.
pub(super) fn weight_grad_part(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
    part: &mut [f32],
    isa: Isa,
) -> Result<()> {
    weight_grad_part_isa(isa, g, x, gout, grp, ns, part)
}

isa_versions!(
    fn weight_grad_part_isa(g: &Geometry, x: &[f32], gout: &[f32], grp: usize, ns: std::ops::Range<usize>, part: &mut [f32]) -> Result<()>
        => weight_grad_part_impl
);

#[inline(always)]
fn weight_grad_part_impl(
    isa: Isa,
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    grp: usize,
    ns: std::ops::Range<usize>,
    part: &mut [f32],
) -> Result<()> {
    let (k, og, ohw) = (g.k(), g.og(), g.ohw());
    let kern = Kern::for_isa(isa, og);
    let (mr, nr) = (kern.mr, kern.nr);
    let panels = og.div_ceil(nr);
    let wide = ns.len() * ohw;
    let pd = padded(g, x, ns.clone())?;
    let poff = patch_offsets(g, &pd);
    let qoff = position_offsets(g, &pd);
    // Step `q` reads position `q` of its sample.
    let mut off = Vec::with_capacity(wide);
    for slot in 0..ns.len() {
        off.extend(qoff.iter().map(|&o| slot * pd.sample + o));
    }
    // The output gradient transposed, per panel of `nr` channels: `b[q · nr + j]`.
    let mut bt = scratch(g.op, panels * wide * nr)?;
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
    // Products, channels last: panel `cp`, patch row `p`, channel `j` at `(cp·kp + p)·nr + j`.
    let kp = k.div_ceil(mr) * mr;
    let mut cl = scratch(g.op, panels * kp * nr)?;
    let mut a = [core::ptr::null::<f32>(); 12];
    let a = &mut a[..mr];
    let base = pd.buf.as_ptr();
    let gb = grp * g.cg() * pd.plane;
    for p0 in (0..k).step_by(mr) {
        for (i, ai) in a.iter_mut().enumerate() {
            // SAFETY: a patch row's offset inside the first padded sample.
            *ai = unsafe { base.add(gb + poff[(p0 + i).min(k - 1)]) };
        }
        for cp in 0..panels {
            let b = &bt[cp * wide * nr..][..wide * nr];
            let c = &mut cl[(cp * kp + p0) * nr..][..mr * nr];
            // SAFETY: every read `a_i + off[q]` is a patch offset plus a window's corner,
            // inside its padded sample.
            unsafe { tile(kern, wide, a, &off, b, c) };
        }
    }
    for cp in 0..panels {
        let width = nr.min(og - cp * nr);
        transpose(
            isa,
            &cl[cp * kp * nr..],
            nr,
            k,
            width,
            &mut part[cp * nr * k..],
            k,
        );
    }
    Ok(())
}

// Every block's weight gradient in one call (a child module: it shares the kernels above).
pub(super) mod blocks;

#[cfg(test)]
mod tests {
    use super::super::{Conv2dParams, fwd_gemm, input_grad_col2im, weight_grad_part_gemm};
    use super::*;
    use crate::threads::Par;

    /// Values with every kind of special case: signed zeros, subnormals, infinities, NaNs,
    /// huge and tiny magnitudes, mostly ordinary numbers.
    pub(super) fn values(n: usize, seed: u64, special: bool) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 11) as f64 / (1u64 << 53) as f64;
                let r = ((s >> 3) % 64) as u32;
                if special {
                    match r {
                        0 => return 0.0,
                        1 => return -0.0,
                        2 => return f32::INFINITY,
                        3 => return f32::NEG_INFINITY,
                        4 => return f32::NAN,
                        5 => return 1e-40 * (u as f32 - 0.5),
                        6 => return 3e38 * (u as f32 - 0.5),
                        7 => return 1e-30 * (u as f32 - 0.5),
                        _ => {}
                    }
                }
                (u * 4.0 - 2.0) as f32
            })
            .collect()
    }

    /// Bits, with every NaN the same (their payloads depend on the operand order the
    /// compiler picks for each fused multiply-add, in either path).
    pub(super) fn bits(v: &[f32]) -> Vec<u32> {
        v.iter()
            .map(|f| if f.is_nan() { 0x7fc0_0000 } else { f.to_bits() })
            .collect()
    }

    fn isas() -> Vec<Isa> {
        [Isa::Portable, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.available())
            .collect()
    }

    fn cases() -> Vec<([usize; 4], [usize; 4], Conv2dParams)> {
        let p = |stride, padding, dilation, groups| Conv2dParams {
            stride,
            padding,
            dilation,
            groups,
        };
        vec![
            ([5, 1, 8, 8], [16, 1, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            ([3, 16, 4, 4], [32, 16, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            ([2, 3, 7, 5], [5, 3, 3, 2], p((1, 1), (0, 0), (1, 1), 1)),
            ([3, 4, 7, 5], [6, 2, 3, 2], p((2, 1), (1, 2), (1, 2), 2)),
            ([2, 6, 9, 9], [42, 2, 2, 3], p((2, 3), (2, 1), (2, 1), 3)),
            ([1, 20, 5, 6], [17, 20, 1, 1], p((1, 1), (0, 0), (1, 1), 1)),
            ([4, 2, 3, 3], [3, 2, 3, 3], p((1, 1), (2, 2), (1, 1), 1)),
            ([2, 40, 6, 6], [9, 40, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            ([2, 3, 0, 4], [4, 3, 3, 3], p((1, 1), (2, 1), (1, 1), 1)),
            // 256 output positions: the im2col paths' `col` rows get padded spacing.
            ([2, 4, 16, 16], [8, 4, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            // Several of the input gradient's position blocks, with strides, dilation and
            // groups.
            ([2, 8, 40, 30], [8, 4, 3, 3], p((2, 1), (1, 2), (2, 1), 2)),
            // Tiles across several samples: a tail tile across three (3 positions a sample)
            // and every row its own sample (1 position, fewer columns than any tile's rows).
            ([3, 8, 1, 3], [5, 8, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            ([3, 20, 1, 1], [4, 20, 3, 3], p((1, 1), (1, 1), (1, 1), 1)),
            // More than 1,024 positions (whole-sample chunks), odd sizes, 16 channels.
            (
                [2, 16, 41, 37],
                [24, 16, 3, 3],
                p((1, 1), (1, 1), (1, 1), 1),
            ),
        ]
    }

    #[test]
    fn implicit_gemm_gives_the_bits_of_im2col_gemm_on_every_isa() {
        for (ci, (xs, ws, p)) in cases().into_iter().enumerate() {
            for special in [false, true] {
                let seed = ci as u64 * 10 + special as u64;
                let g = Geometry::new("conv2d", &xs, &ws, p).unwrap();
                assert!(applicable(&g), "{xs:?} {ws:?}");
                let x = values(xs.iter().product(), seed, special);
                let w = values(ws.iter().product(), seed + 1000, special);
                let gout = values(g.n * g.cout * g.ohw(), seed + 2000, special);
                let one = Par::new(1);
                let mut y_ref = vec![0f32; gout.len()];
                fwd_gemm(&g, &x, &w, &mut y_ref, &one).unwrap();
                let mut dx_ref = vec![0f32; x.len()];
                input_grad_col2im(&g, &gout, &w, &mut dx_ref, &one).unwrap();
                let ns = 0..g.n;
                let dw_ref: Vec<Vec<u32>> = (0..p.groups)
                    .map(|grp| {
                        bits(&weight_grad_part_gemm(&g, &x, &gout, grp, ns.clone(), &one).unwrap())
                    })
                    .collect();
                for isa in isas() {
                    let what = format!("{xs:?} {ws:?} {p:?} special={special} {isa:?}");
                    let mut y = vec![f32::NAN; gout.len()];
                    let fw = pack_forward_weights(&g, &w, isa).unwrap();
                    forward_chunk(&g, &x, &fw, ns.clone(), &mut y).unwrap();
                    assert_eq!(bits(&y), bits(&y_ref), "forward {what}");
                    let mut dx = vec![f32::NAN; x.len()];
                    let iw = pack_input_grad_weights(&g, &w, isa).unwrap();
                    input_grad_chunk(&g, &gout, &iw, ns.clone(), &mut dx).unwrap();
                    assert_eq!(bits(&dx), bits(&dx_ref), "input grad {what}");
                    for (grp, want) in dw_ref.iter().enumerate() {
                        let mut part = vec![f32::NAN; g.og() * g.k()];
                        weight_grad_part(&g, &x, &gout, grp, ns.clone(), &mut part, isa).unwrap();
                        assert_eq!(&bits(&part), want, "weight grad group {grp} {what}");
                    }
                }
            }
        }
    }
}
