//! Winograd F(4×4, 3×3) convolution (Lavin & Gray, 2016) for 3×3 kernels with stride 1,
//! dilation 1 and one group: the forward pass, the input gradient (a forward pass of the output
//! gradient with the flipped, transposed kernel) and the weight gradient.
//!
//! Each 4×4 block of outputs (a *tile*) comes from a 6×6 window of the input. The window is
//! transformed (`Bᵀ d B`), multiplied point by point with the transformed kernel (`G g Gᵀ`),
//! summed over input channels — 36 independent products of (tiles × C_in) by (C_in × C_out),
//! one per point ξ of the 6×6 transform — and transformed back (`Aᵀ m A`). The products take
//! 4× fewer multiply-adds than direct convolution. The weight gradient uses the same transforms
//! with the roles of `A` and `G` exchanged: `dW = Gᵀ [(A dY Aᵀ) ⊙ (Bᵀ d B)] G`, summed over
//! tiles.
//!
//! # Bits and determinism
//! Every transform is written out with a fixed order of operations (no fused multiply-adds), the
//! products are fused multiply-add chains over the input channels (forward) or over the tiles
//! (weight gradient) in increasing order, and the kernel transforms are computed in f64 and
//! rounded once. Threads only decide which tiles (forward) or which fixed part of the batch
//! (weight gradient, parts added in order) they compute, so the bits depend on the shapes and
//! the values only — not on the thread count or the instruction set.
//!
//! # Precision
//! The transforms' constants (up to 1/24 and 8) cost some precision against direct
//! convolution: errors are a few 1e-6 of the sum of the terms' magnitudes (tested below
//! 2e-5), about ten times those of `im2col_gemm`. So these kernels run only when asked for:
//! with [`crate::autotune::set_allow_fast_conv`] / [`crate::autotune::with_allow_fast_conv`]
//! (off by default, as PyTorch's `allow_tf32`), or pinned with
//! [`crate::autotune::with_algorithm`].

use super::{Geometry, Scratch};
use crate::error::{Error, Result};
use crate::ops::SyncPtr;
use crate::ops::matmul::Isa;
use crate::threads::Par;
use rayon::prelude::*;

/// Side of the transformed tile (`m + r - 1` with m = 4 outputs, r = 3 taps).
const T6: usize = 6;
/// Points of the 6×6 transform.
const XI: usize = T6 * T6;
/// Rows of one micro-tile of the products.
const MR: usize = 6;
/// Tiles per block: for up to 64 channels, a block's transformed inputs and products
/// (36 × TB × C floats each) and the transformed kernel stay in a 2 MiB L2.
const TB: usize = 36;
/// Channels per transform step (the vector width the transforms are written for).
const L: usize = 16;

type Lanes = [f32; L];

/// `G` of F(4, 3) (in f64; the transformed kernels are rounded to f32 once): the kernel
/// transform is `G g Gᵀ`.
const G: [[f64; 3]; T6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// Whether the Winograd kernels apply: 3×3, stride 1, dilation 1, one group, padding at most
/// 2 (so that the input gradient is a forward pass with padding `2 - p`), and outputs at least
/// one tile wide.
pub(super) fn applicable(g: &Geometry) -> bool {
    g.kh == 3
        && g.kw == 3
        && g.p.stride == (1, 1)
        && g.p.dilation == (1, 1)
        && g.p.groups == 1
        && g.p.padding.0 <= 2
        && g.p.padding.1 <= 2
        && g.oh >= 4
        && g.ow >= 4
}

/// Whether the heuristic prefers Winograd for the forward pass and the input gradient: enough
/// channels and tiles for the products to dominate the transforms. Measured against im2col +
/// GEMM (`conv_bench`, 1 thread, 2026-12-01): Winograd won from 64 channels and 24×24 outputs
/// (1.5–1.7×), lost below (up to 3× slower at 16→32 channels, 4×4 — the cnn model's second
/// convolution — and 1.2× at 64 channels, 16×16).
pub(super) fn preferred(g: &Geometry) -> bool {
    applicable(g) && g.cin >= 64 && g.cout >= 64 && g.oh * g.ow >= 24 * 24
}

/// [`preferred`] for the weight gradient, whose products sum over tiles: from 32×32 outputs
/// (at 24×24 and 64 channels it still lost, 1.2×).
pub(super) fn preferred_weight_grad(g: &Geometry) -> bool {
    preferred(g) && g.oh * g.ow >= 32 * 32
}

// ---------------------------------------------------------------------------------------------
// The products: micro-kernels computing `R × NR` outputs as fused multiply-add chains.

/// `(kc, a, ars, acs, b, ldb, c, ldc, load)`: `c[i·ldc + j] (+)= Σ_p a[i·ars + p·acs] ·
/// b[p·ldb + j]` for `i < R`, `j < NR`, each element a chain of fused multiply-adds over
/// `p = 0..kc` in increasing order, from `+0.0` or (with `load`) from the value in `c`.
type TileFn = unsafe fn(usize, *const f32, usize, usize, *const f32, usize, *mut f32, usize, bool);

/// The micro-kernels of one instruction set, for 1..=MR rows.
#[derive(Clone, Copy)]
struct Kern {
    isa: Isa,
    nr: usize,
    rows: [TileFn; MR],
}

impl Kern {
    /// The fastest micro-kernels of the running CPU.
    fn best() -> Kern {
        Kern::for_isa(Isa::best())
    }

    /// The micro-kernels of `isa`, or the portable ones if the CPU lacks it.
    fn for_isa(isa: Isa) -> Kern {
        #[cfg(target_arch = "x86_64")]
        match isa {
            _ if !isa.available() => {}
            Isa::Avx512 => {
                return Kern {
                    isa: Isa::Avx512,
                    nr: 64,
                    rows: [
                        x86::avx512::<1>,
                        x86::avx512::<2>,
                        x86::avx512::<3>,
                        x86::avx512::<4>,
                        x86::avx512::<5>,
                        x86::avx512::<6>,
                    ],
                };
            }
            Isa::Avx2 => {
                return Kern {
                    isa: Isa::Avx2,
                    nr: 16,
                    rows: [
                        x86::avx2::<1>,
                        x86::avx2::<2>,
                        x86::avx2::<3>,
                        x86::avx2::<4>,
                        x86::avx2::<5>,
                        x86::avx2::<6>,
                    ],
                };
            }
            Isa::Portable => {}
        }
        Kern {
            isa: Isa::Portable,
            nr: PORTABLE_NR,
            rows: [
                portable::<1>,
                portable::<2>,
                portable::<3>,
                portable::<4>,
                portable::<5>,
                portable::<6>,
            ],
        }
    }

    /// `C (m × n, row stride ldc) (+)= A (m × kc; element (i, p) at a[i·ars + p·acs]) ·
    /// B (kc × n, row stride ldb)`, `n` a multiple of `nr`.
    ///
    /// # Safety
    /// Every element named lies inside its buffer.
    #[allow(clippy::too_many_arguments)]
    unsafe fn product(
        &self,
        m: usize,
        n: usize,
        kc: usize,
        a: *const f32,
        (ars, acs): (usize, usize),
        b: *const f32,
        ldb: usize,
        c: *mut f32,
        ldc: usize,
        load: bool,
    ) {
        debug_assert_eq!(n % self.nr, 0);
        for j in (0..n).step_by(self.nr) {
            for i in (0..m).step_by(MR) {
                let r = MR.min(m - i);
                // SAFETY: rows i..i+r, columns j..j+nr and steps 0..kc are inside the
                // buffers (the caller's contract).
                unsafe {
                    (self.rows[r - 1])(
                        kc,
                        a.add(i * ars),
                        ars,
                        acs,
                        b.add(j),
                        ldb,
                        c.add(i * ldc + j),
                        ldc,
                        load,
                    )
                };
            }
        }
    }
}

const PORTABLE_NR: usize = 16;

/// The portable micro-kernel: scalar `mul_add` (one rounding, as the vector kernels).
///
/// # Safety
/// See [`TileFn`]: every element named lies inside its buffer.
#[allow(clippy::too_many_arguments)]
unsafe fn portable<const R: usize>(
    kc: usize,
    a: *const f32,
    ars: usize,
    acs: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    load: bool,
) {
    // SAFETY (whole body): the caller guarantees the bounds.
    unsafe {
        scalar_tile!(0f32, R, PORTABLE_NR;
            load if load => |i, j| c.add(i * ldc + j);
            for p in 0..kc {
                let bp = b.add(p * ldb);
            }
            b |j| bp.add(j);
            a |i| *a.add(i * ars + p * acs);
            store |i, j| c.add(i * ldc + j));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX-512 (R × 64) and AVX2+FMA (R × 16) micro-kernels: the R × NR accumulators stay
    //! in registers, one element of A is broadcast per row and step.
    use core::arch::x86_64::*;

    /// Stamps the kernel `$name::<R>` with `$nv` vectors per row: [`fma_tile!`] over
    /// [`x86_fma!`]'s vocabulary.
    macro_rules! tile_kernel {
        ($name:ident, $nv:expr, $feat:literal, $isa:tt) => {
            /// See [`TileFn`](super::TileFn).
            ///
            /// # Safety
            /// Every element named lies inside its buffer; the CPU has the target features.
            #[target_feature(enable = $feat)]
            #[allow(clippy::too_many_arguments)]
            pub(super) unsafe fn $name<const R: usize>(
                kc: usize,
                a: *const f32,
                ars: usize,
                acs: usize,
                mut b: *const f32,
                ldb: usize,
                c: *mut f32,
                ldc: usize,
                load: bool,
            ) {
                const LANES: usize = fma_tile!($isa LANES);
                // SAFETY (whole body): the caller guarantees bounds and CPU features.
                unsafe {
                    let mut ap = [a; R];
                    for i in 0..R {
                        ap[i] = a.add(i * ars);
                    }
                    fma_tile!($isa, R, $nv;
                        load if load => |i, v| c.add(i * ldc + v * LANES);
                        for _ in 0..kc {}
                        b |v| b.add(v * LANES);
                        a |i| *ap[i];
                        then {
                            // Wrapping: after the last step the pointers may leave the
                            // buffer (never dereferenced there).
                            for p in &mut ap {
                                *p = p.wrapping_add(acs);
                            }
                            b = b.wrapping_add(ldb);
                        }
                        store |i, v| c.add(i * ldc + v * LANES));
                }
            }
        };
    }

    /// `out = bᵀ` for a 16×16 block: 32-bit and 64-bit interleaves within 128-bit lanes, then
    /// two rounds of 128-bit lane shuffles.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn transpose16(b: &[[f32; 16]; 16], out: &mut [[f32; 16]; 16]) {
        // SAFETY: 16 rows of 16 floats in and out; the CPU has AVX-512F.
        unsafe {
            let r: [__m512; 16] = core::array::from_fn(|i| _mm512_loadu_ps(b[i].as_ptr()));
            let mut a = [_mm512_setzero_ps(); 16];
            for i in 0..8 {
                a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            // b4[4i + j], 128-bit lane k: rows 4i..4i+4 of column 4k + j.
            let mut b4 = [_mm512_setzero_ps(); 16];
            for i in 0..4 {
                let pd = |v: __m512| _mm512_castps_pd(v);
                let (x0, x1) = (pd(a[4 * i]), pd(a[4 * i + 2]));
                let (y0, y1) = (pd(a[4 * i + 1]), pd(a[4 * i + 3]));
                b4[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x1));
                b4[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x1));
                b4[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(y0, y1));
                b4[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(y0, y1));
            }
            for j in 0..4 {
                let p = _mm512_shuffle_f32x4::<0x44>(b4[j], b4[4 + j]);
                let q = _mm512_shuffle_f32x4::<0xEE>(b4[j], b4[4 + j]);
                let p2 = _mm512_shuffle_f32x4::<0x44>(b4[8 + j], b4[12 + j]);
                let q2 = _mm512_shuffle_f32x4::<0xEE>(b4[8 + j], b4[12 + j]);
                _mm512_storeu_ps(out[j].as_mut_ptr(), _mm512_shuffle_f32x4::<0x88>(p, p2));
                _mm512_storeu_ps(out[4 + j].as_mut_ptr(), _mm512_shuffle_f32x4::<0xDD>(p, p2));
                _mm512_storeu_ps(out[8 + j].as_mut_ptr(), _mm512_shuffle_f32x4::<0x88>(q, q2));
                _mm512_storeu_ps(
                    out[12 + j].as_mut_ptr(),
                    _mm512_shuffle_f32x4::<0xDD>(q, q2),
                );
            }
        }
    }

    x86_fma!(avx512_f32, tile_kernel!(avx512, 4));
    x86_fma!(avx2_f32, tile_kernel!(avx2, 2));
}

// ---------------------------------------------------------------------------------------------
// The transforms, on 16 channels at a time. Written with plain f32 arithmetic in a fixed order
// (Rust never contracts `a * b + c` into a fused multiply-add), so every instruction set gives
// the same bits.

/// `Bᵀ d` for one column of six inputs.
#[inline(always)]
fn bt(d: [&Lanes; T6]) -> [Lanes; T6] {
    let mut r = [[0f32; L]; T6];
    for l in 0..L {
        let (d0, d1, d2, d3, d4, d5) = (d[0][l], d[1][l], d[2][l], d[3][l], d[4][l], d[5][l]);
        let p = d4 - 4.0 * d2;
        let q = d3 - 4.0 * d1;
        let s = d4 - d2;
        let t = 2.0 * (d3 - d1);
        r[0][l] = 4.0 * d0 - 5.0 * d2 + d4;
        r[1][l] = p + q;
        r[2][l] = p - q;
        r[3][l] = s + t;
        r[4][l] = s - t;
        r[5][l] = 4.0 * d1 - 5.0 * d3 + d5;
    }
    r
}

/// `Aᵀ m` for one column of six products (four outputs).
#[inline(always)]
fn at_m(m: [&Lanes; T6]) -> [Lanes; 4] {
    let mut y = [[0f32; L]; 4];
    for l in 0..L {
        let s12 = m[1][l] + m[2][l];
        let d12 = m[1][l] - m[2][l];
        let s34 = m[3][l] + m[4][l];
        let d34 = m[3][l] - m[4][l];
        y[0][l] = m[0][l] + s12 + s34;
        y[1][l] = d12 + 2.0 * d34;
        y[2][l] = s12 + 4.0 * s34;
        y[3][l] = d12 + 8.0 * d34 + m[5][l];
    }
    y
}

/// `A x` for one column of four output gradients (six points).
#[inline(always)]
fn a6(x: [&Lanes; 4]) -> [Lanes; T6] {
    let mut e = [[0f32; L]; T6];
    for l in 0..L {
        let (x0, x1, x2, x3) = (x[0][l], x[1][l], x[2][l], x[3][l]);
        let s02 = x0 + x2;
        let s13 = x1 + x3;
        let f02 = x0 + 4.0 * x2;
        let f13 = 2.0 * x1 + 8.0 * x3;
        e[0][l] = x0;
        e[1][l] = s02 + s13;
        e[2][l] = s02 - s13;
        e[3][l] = f02 + f13;
        e[4][l] = f02 - f13;
        e[5][l] = x3;
    }
    e
}

#[inline(always)]
fn lanes(s: &[f32], at: usize) -> &Lanes {
    s[at..at + L].try_into().expect("16 lanes")
}

/// Transforms the 6×6 input window at `xp[base..]` (rows `row` apart, channels contiguous) of
/// channels `c0..c0+16` into `v[ξ·vs + off + c0..]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn input_tile(
    xp: &[f32],
    base: usize,
    row: usize,
    cp: usize,
    c0: usize,
    v: &mut [f32],
    vs: usize,
    off: usize,
) {
    let mut cols = [[[0f32; L]; T6]; T6];
    for j in 0..T6 {
        let get = |k: usize| lanes(xp, base + k * row + j * cp + c0);
        let r = bt([get(0), get(1), get(2), get(3), get(4), get(5)]);
        for (i, ri) in r.into_iter().enumerate() {
            cols[i][j] = ri;
        }
    }
    for (i, ci) in cols.iter().enumerate() {
        let r = bt([&ci[0], &ci[1], &ci[2], &ci[3], &ci[4], &ci[5]]);
        for (j, rj) in r.iter().enumerate() {
            v[(i * T6 + j) * vs + off + c0..][..L].copy_from_slice(rj);
        }
    }
}

/// `Aᵀ m A` of the products `m[ξ·ms + off + c0..]` of channels `c0..c0+16`: `y[r][c]`.
#[inline(always)]
fn output_tile(m: &[f32], ms: usize, off: usize, c0: usize) -> [[Lanes; 4]; 4] {
    let mut rows = [[[0f32; L]; T6]; 4];
    for j in 0..T6 {
        let get = |i: usize| lanes(m, (i * T6 + j) * ms + off + c0);
        let r = at_m([get(0), get(1), get(2), get(3), get(4), get(5)]);
        for (i, ri) in r.into_iter().enumerate() {
            rows[i][j] = ri;
        }
    }
    let mut y = [[[0f32; L]; 4]; 4];
    for (i, ri) in rows.iter().enumerate() {
        y[i] = at_m([&ri[0], &ri[1], &ri[2], &ri[3], &ri[4], &ri[5]]);
    }
    y
}

/// `A x Aᵀ` of the 4×4 output-gradient tile at `gp[base..]` (rows `row` apart) of channels
/// `c0..c0+16`, into `d[ξ·ds + off + c0..]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn grad_tile(
    gp: &[f32],
    base: usize,
    row: usize,
    cp: usize,
    c0: usize,
    d: &mut [f32],
    ds: usize,
    off: usize,
) {
    let mut cols = [[[0f32; L]; 4]; T6];
    for j in 0..4 {
        let get = |k: usize| lanes(gp, base + k * row + j * cp + c0);
        let r = a6([get(0), get(1), get(2), get(3)]);
        for (i, ri) in r.into_iter().enumerate() {
            cols[i][j] = ri;
        }
    }
    for (i, ci) in cols.iter().enumerate() {
        let r = a6([&ci[0], &ci[1], &ci[2], &ci[3]]);
        for (j, rj) in r.iter().enumerate() {
            d[(i * T6 + j) * ds + off + c0..][..L].copy_from_slice(rj);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Layout.

/// One stride-1 3×3 convolution as the Winograd kernels see it: `cin` input planes of `h × w`,
/// padded by `(ph, pw)`, giving `cout` planes of `oh × ow`.
#[derive(Clone, Copy, Debug)]
struct Plan {
    n: usize,
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    ph: usize,
    pw: usize,
    oh: usize,
    ow: usize,
    /// Tiles down and across.
    th: usize,
    tw: usize,
    /// Channels of the transform buffers: multiples of 16 (the transforms' width), and the
    /// output channels also of the kernel's NR (the products' columns).
    cinp: usize,
    coutp: usize,
}

impl Plan {
    fn new(
        n: usize,
        cin: usize,
        (h, w): (usize, usize),
        cout: usize,
        (ph, pw): (usize, usize),
        nr: usize,
    ) -> Plan {
        let (oh, ow) = (h + 2 * ph - 2, w + 2 * pw - 2);
        let (th, tw) = (oh.div_ceil(4), ow.div_ceil(4));
        Plan {
            n,
            cin,
            h,
            w,
            cout,
            ph,
            pw,
            oh,
            ow,
            th,
            tw,
            cinp: cin.next_multiple_of(L),
            coutp: cout.next_multiple_of(nr.max(L)),
        }
    }
    /// Rows and columns of the padded, channels-last input: every tile's window inside.
    fn hp(&self) -> usize {
        self.th * 4 + 2
    }
    fn wp(&self) -> usize {
        self.tw * 4 + 2
    }
    fn tiles(&self) -> usize {
        self.th * self.tw
    }
    /// Offset of tile `t`'s window in the padded channels-last input.
    fn window(&self, t: usize) -> usize {
        let (ty, tx) = (t / self.tw, t % self.tw);
        (ty * 4 * self.wp() + tx * 4) * self.cinp
    }
}

/// Compiles `$imp` (an `#[inline(always)]` function) once per instruction set, so that the
/// transforms vectorise to the widest registers; the bits are the same on every path (plain
/// f32 arithmetic, no contraction).
macro_rules! multiversion {
    ($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $imp:path) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        fn $name(isa: Isa, $($arg: $ty),*) {
            debug_assert!(isa.available());
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments)]
                fn avx512($($arg: $ty),*) {
                    $imp(Isa::Avx512, $($arg),*)
                }
                #[target_feature(enable = "avx2")]
                #[allow(clippy::too_many_arguments)]
                fn avx2($($arg: $ty),*) {
                    $imp(Isa::Avx2, $($arg),*)
                }
                match isa {
                    // SAFETY: `Kern::for_isa` reports an instruction set only if the CPU has it.
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

multiversion!(
    /// Copies the planes `src` (`c × h × w`) into `dst` (`rows × wp × cp`, channels last) at
    /// offset `(oy, ox)`, zeros elsewhere.
    fn channels_last(src: &[f32], c: usize, hw: (usize, usize), dst: &mut [f32], wp: usize, cp: usize, o: (usize, usize))
        => channels_last_impl
);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn channels_last_impl(
    isa: Isa,
    src: &[f32],
    c: usize,
    (h, w): (usize, usize),
    dst: &mut [f32],
    wp: usize,
    cp: usize,
    (oy, ox): (usize, usize),
) {
    let row = wp * cp;
    dst[..oy * row].fill(0.0);
    dst[(oy + h) * row..].fill(0.0);
    for y in 0..h {
        let drow = &mut dst[(y + oy) * row..][..row];
        drow[..ox * cp].fill(0.0);
        drow[(ox + w) * cp..].fill(0.0);
    }
    // 16 channels × 16 columns at a time: read 16 rows of 16, write 16 runs of 16 channels.
    // Channel blocks outermost, so that only 16 planes are streamed at a time.
    for c0 in (0..cp).step_by(L) {
        let planes = c.saturating_sub(c0).min(L);
        for y in 0..h {
            let drow = &mut dst[(y + oy) * row..][..row];
            for x0 in (0..w).step_by(L) {
                let xn = L.min(w - x0);
                let mut blk = [[0f32; L]; L];
                for (k, b) in blk.iter_mut().enumerate().take(planes) {
                    let from = &src[((c0 + k) * h + y) * w + x0..];
                    if xn == L {
                        *b = *lanes(from, 0);
                    } else {
                        b.iter_mut().zip(&from[..xn]).for_each(|(d, s)| *d = *s);
                    }
                }
                let mut cols = [[0f32; L]; L];
                transpose16(isa, &blk, &mut cols);
                for (j, col) in cols.iter().enumerate().take(xn) {
                    *lanes_mut(drow, (ox + x0 + j) * cp + c0) = *col;
                }
            }
        }
    }
}

/// `out = bᵀ` for a 16×16 block (data movement only: the same on every path).
#[inline(always)]
pub(super) fn transpose16(isa: Isa, b: &[Lanes; L], out: &mut [Lanes; L]) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 {
        debug_assert!(isa.available());
        // SAFETY: `isa` is Avx512 only when the CPU has AVX-512F (`Kern::for_isa` checks).
        unsafe { x86::transpose16(b, out) };
        return;
    }
    let _ = isa;
    for (j, o) in out.iter_mut().enumerate() {
        for (k, v) in o.iter_mut().enumerate() {
            *v = b[k][j];
        }
    }
}

#[inline(always)]
fn lanes_mut(s: &mut [f32], at: usize) -> &mut Lanes {
    (&mut s[at..at + L]).try_into().expect("16 lanes")
}

multiversion!(
    /// Transforms the windows of tiles `t0..t1` of the channels-last input `xs` into
    /// `v[ξ][t - t0][c]` (rows `cinp` apart, points `TB · cinp` apart).
    fn inputs_block(pl: &Plan, xs: &[f32], t0: usize, t1: usize, v: &mut [f32]) => inputs_block_impl
);

#[inline(always)]
fn inputs_block_impl(_isa: Isa, pl: &Plan, xs: &[f32], t0: usize, t1: usize, v: &mut [f32]) {
    let cp = pl.cinp;
    for t in t0..t1 {
        for c0 in (0..cp).step_by(L) {
            input_tile(
                xs,
                pl.window(t),
                pl.wp() * cp,
                cp,
                c0,
                v,
                TB * cp,
                (t - t0) * cp,
            );
        }
    }
}

multiversion!(
    /// Transforms the products `m[ξ][t - t0][co]` of tiles `t0..t1` of sample `s` back and
    /// writes the outputs (`n × cout × oh × ow` at `out`).
    fn outputs_block(pl: &Plan, m: &[f32], s: usize, t0: usize, t1: usize, out: SyncPtr<f32>) => outputs_block_impl
);

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn outputs_block_impl(
    isa: Isa,
    pl: &Plan,
    m: &[f32],
    s: usize,
    t0: usize,
    t1: usize,
    out: SyncPtr<f32>,
) {
    // Runs of up to four tiles of one tile row (16 columns): back-transform 16 channels of each
    // tile, then write each output row through a 16×16 transpose, so that every channel gets
    // 16 contiguous values.
    let mut t = t0;
    while t < t1 {
        let (ty, tx) = (t / pl.tw, t % pl.tw);
        let run = 4.min(pl.tw - tx).min(t1 - t);
        let rows = 4.min(pl.oh - ty * 4);
        let cols = (run * 4).min(pl.ow - tx * 4);
        for c0 in (0..pl.cout).step_by(L) {
            let mut tiles = [[[[0f32; L]; 4]; 4]; 4];
            for (i, tile) in tiles.iter_mut().enumerate().take(run) {
                *tile = output_tile(m, TB * pl.coutp, (t + i - t0) * pl.coutp, c0);
            }
            for r in 0..rows {
                let mut blk = [[0f32; L]; L];
                for (x, b) in blk.iter_mut().enumerate() {
                    *b = tiles[x / 4][r][x % 4];
                }
                let mut chans = [[0f32; L]; L];
                transpose16(isa, &blk, &mut chans);
                for (l, v) in chans.iter().enumerate().take(L.min(pl.cout - c0)) {
                    let at = ((s * pl.cout + c0 + l) * pl.oh + ty * 4 + r) * pl.ow + tx * 4;
                    // SAFETY: sample s, channel c0 + l < cout, row ty·4 + r < oh, columns
                    // tx·4 .. tx·4 + cols ≤ ow: inside `out`, and these tiles belong to this
                    // task only.
                    unsafe {
                        if cols == L {
                            core::ptr::copy_nonoverlapping(v.as_ptr(), out.get().add(at), L)
                        } else {
                            core::ptr::copy_nonoverlapping(v.as_ptr(), out.get().add(at), cols)
                        }
                    };
                }
            }
        }
        t += run;
    }
}

multiversion!(
    /// Transforms the output-gradient tiles `t0..t1` of the channels-last `gs` (`4·th × 4·tw ×
    /// coutp`) into `d[ξ][t - t0][co]`.
    fn grads_block(pl: &Plan, gs: &[f32], t0: usize, t1: usize, d: &mut [f32]) => grads_block_impl
);

#[inline(always)]
fn grads_block_impl(_isa: Isa, pl: &Plan, gs: &[f32], t0: usize, t1: usize, d: &mut [f32]) {
    let (op, gw) = (pl.coutp, pl.tw * 4);
    for t in t0..t1 {
        let (ty, tx) = (t / pl.tw, t % pl.tw);
        let base = (ty * 4 * gw + tx * 4) * op;
        for c0 in (0..op).step_by(L) {
            grad_tile(gs, base, gw * op, op, c0, d, TB * op, (t - t0) * op);
        }
    }
}

thread_local! {
    /// Winograd's own spares, apart from the other convolutions' (its buffers are far larger).
    static SPARE: core::cell::RefCell<Vec<Vec<f32>>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// The most each thread keeps for later calls: 64 MiB.
const SPARE_FLOATS: usize = 16 << 20;

/// The number of `f32`s in a buffer of `dims` (their product), or [`Error::OutOfMemory`]
/// naming `op` if no buffer that large can exist. Shapes of empty tensors can ask for that
/// (an empty batch of 2^40 channels still needs its per-channel buffers).
fn floats(op: &'static str, dims: &[usize]) -> Result<usize> {
    let n = dims
        .iter()
        .try_fold(1u128, |a, &d| a.checked_mul(d as u128))
        .unwrap_or(u128::MAX);
    if n > (isize::MAX as u128) / 4 {
        return Err(Error::OutOfMemory {
            op,
            bytes: n.saturating_mul(4),
        });
    }
    Ok(n as usize)
}

/// A scratch buffer of `len` elements from Winograd's pool (see [`super::scratch_in`]).
fn scratch(op: &'static str, len: usize) -> Result<Scratch> {
    super::scratch_in(&SPARE, SPARE_FLOATS, op, len)
}

// ---------------------------------------------------------------------------------------------
// Forward (and input gradient).

/// The transformed kernel `U[ξ][ci][co]` (`36 × cin × coutp`), from `weight(co, ci, a, b)`,
/// computed in f64 and rounded once; input channels in parallel.
fn kernel_transform(
    op: &'static str,
    pl: &Plan,
    weight: impl Fn(usize, usize, usize, usize) -> f32 + Sync,
    par: &Par,
) -> Result<Vec<f32>> {
    let mut u = crate::error::try_filled_vec(op, floats(op, &[XI, pl.cin, pl.coutp])?, 0f32)?;
    if pl.cout == 0 {
        // Nothing to transform (and 2^40 empty channels would take hours to walk).
        return Ok(u);
    }
    let dst = SyncPtr(u.as_mut_ptr());
    let channel = |ci: usize| {
        for co in 0..pl.cout {
            let g: [[f64; 3]; 3] =
                core::array::from_fn(|a| core::array::from_fn(|b| weight(co, ci, a, b) as f64));
            // t = G g (6×3), then t Gᵀ (6×6).
            let t: [[f64; 3]; T6] = core::array::from_fn(|i| {
                core::array::from_fn(|b| (0..3).map(|a| G[i][a] * g[a][b]).sum())
            });
            for i in 0..T6 {
                for j in 0..T6 {
                    let v: f64 = (0..3).map(|b| t[i][b] * G[j][b]).sum();
                    // SAFETY: inside `u`; row (ξ, ci) is written by this task only.
                    unsafe {
                        *dst.get().add(((i * T6 + j) * pl.cin + ci) * pl.coutp + co) = v as f32
                    };
                }
            }
        }
    };
    if par.threads() > 1 {
        par.install(|| (0..pl.cin).into_par_iter().for_each(channel));
    } else {
        (0..pl.cin).for_each(channel);
    }
    Ok(u)
}

/// Forward pass of `pl` on `x` (`n × cin × h × w`) with transformed kernel `u`, into `out`
/// (`n × cout × oh × ow`). Work units are blocks of `TB` tiles of one sample, each computed
/// whole by one thread.
fn forward_planned(
    op: &'static str,
    pl: &Plan,
    kern: Kern,
    x: &[f32],
    u: &[f32],
    out: &mut [f32],
    par: &Par,
) -> Result<()> {
    // The tasks write `out` through a raw pointer: its size is checked here, once.
    assert_eq!(
        out.len(),
        pl.n * pl.cout * pl.oh * pl.ow,
        "internal: output size"
    );
    let (wp, cp) = (pl.wp(), pl.cinp);
    let plane = pl.hp() * wp * cp;
    let chw = pl.cin * pl.h * pl.w;
    let mut xl = scratch(op, floats(op, &[pl.n, plane])?)?;
    // (No input channels: nothing to copy, and every product is an empty sum.)
    par.install(|| {
        xl.par_chunks_mut(plane.max(1))
            .enumerate()
            .for_each(|(s, d)| {
                let src = &x[s * chw..][..chw];
                channels_last(
                    kern.isa,
                    src,
                    pl.cin,
                    (pl.h, pl.w),
                    d,
                    wp,
                    cp,
                    (pl.ph, pl.pw),
                )
            })
    });
    let blocks = pl.tiles().div_ceil(TB);
    let dst = SyncPtr(out.as_mut_ptr());
    let xl = &*xl;
    let block = |(v, m): &mut (Scratch, Scratch), unit: usize| {
        let (s, b) = (unit / blocks, unit % blocks);
        let (t0, t1) = (b * TB, ((b + 1) * TB).min(pl.tiles()));
        inputs_block(kern.isa, pl, &xl[s * plane..][..plane], t0, t1, v);
        for xi in 0..XI {
            // SAFETY: V holds TB × cinp per point, U cin × coutp, M TB × coutp; rows
            // t1 - t0 ≤ TB, K = cin ≤ cinp, columns coutp.
            unsafe {
                kern.product(
                    t1 - t0,
                    pl.coutp,
                    pl.cin,
                    v.as_ptr().add(xi * TB * cp),
                    (cp, 1),
                    u.as_ptr().add(xi * pl.cin * pl.coutp),
                    pl.coutp,
                    m.as_mut_ptr().add(xi * TB * pl.coutp),
                    pl.coutp,
                    false,
                )
            };
        }
        outputs_block(kern.isa, pl, m, s, t0, t1, dst);
    };
    let units = pl.n * blocks;
    let (vlen, mlen) = (floats(op, &[XI, TB, cp])?, floats(op, &[XI, TB, pl.coutp])?);
    let buffers = || Ok::<_, Error>((scratch(op, vlen)?, scratch(op, mlen)?));
    if par.threads() > 1 && units > 1 {
        par.install(|| {
            (0..units)
                .into_par_iter()
                .with_max_len(1)
                .try_for_each_init(buffers, |bufs, unit| {
                    block(bufs.as_mut().map_err(|e| e.clone())?, unit);
                    Ok(())
                })
        })
    } else if units > 0 {
        let mut bufs = buffers()?;
        (0..units).for_each(|u| block(&mut bufs, u));
        Ok(())
    } else {
        Ok(())
    }
}

/// `conv2d.winograd_f4x3`: the forward pass of `g` (see [`applicable`]).
pub(super) fn forward(
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    out: &mut [f32],
    par: &Par,
) -> Result<()> {
    forward_with(Kern::best(), g, x, w, out, par)
}

fn forward_with(
    kern: Kern,
    g: &Geometry,
    x: &[f32],
    w: &[f32],
    out: &mut [f32],
    par: &Par,
) -> Result<()> {
    const OP: &str = "conv2d.winograd_f4x3";
    let pl = Plan::new(g.n, g.cin, (g.h, g.w), g.cout, g.p.padding, kern.nr);
    let u = kernel_transform(
        OP,
        &pl,
        |co, ci, a, b| w[((co * g.cin + ci) * 3 + a) * 3 + b],
        par,
    )?;
    forward_planned(OP, &pl, kern, x, &u, out, par)
}

/// `conv2d_input_grad.winograd_f4x3`: the input gradient of `g`, as the forward pass of the
/// output gradient with the kernel flipped and its channels swapped, padding `2 - p`.
pub(super) fn input_grad(
    g: &Geometry,
    gout: &[f32],
    w: &[f32],
    dx: &mut [f32],
    par: &Par,
) -> Result<()> {
    input_grad_with(Kern::best(), g, gout, w, dx, par)
}

fn input_grad_with(
    kern: Kern,
    g: &Geometry,
    gout: &[f32],
    w: &[f32],
    dx: &mut [f32],
    par: &Par,
) -> Result<()> {
    const OP: &str = "conv2d_input_grad.winograd_f4x3";
    let (ph, pw) = g.p.padding;
    let pl = Plan::new(g.n, g.cout, (g.oh, g.ow), g.cin, (2 - ph, 2 - pw), kern.nr);
    debug_assert_eq!((pl.oh, pl.ow), (g.h, g.w));
    let u = kernel_transform(
        OP,
        &pl,
        |ci, co, a, b| w[((co * g.cin + ci) * 3 + 2 - a) * 3 + 2 - b],
        par,
    )?;
    forward_planned(OP, &pl, kern, gout, &u, dx, par)
}

// ---------------------------------------------------------------------------------------------
// Weight gradient.

// Parts of the weight gradient: at most this many (as `conv2d_weight_grad.fixed_parts`).
use super::WEIGHT_GRAD_PARTS;

/// `conv2d_weight_grad.winograd_f4x3`: the weight gradient of `g`. The batch's tiles (sample
/// after sample) are cut into a number of ranges fixed by the shape; each range sums its
/// tiles' products in tile order on one thread, and the ranges are added in order.
pub(super) fn weight_grad(
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    weight_grad_with(Kern::best(), g, x, gout, dw, par)
}

fn weight_grad_with(
    kern: Kern,
    g: &Geometry,
    x: &[f32],
    gout: &[f32],
    dw: &mut [f32],
    par: &Par,
) -> Result<()> {
    const OP: &str = "conv2d_weight_grad.winograd_f4x3";
    let pl = Plan::new(g.n, g.cin, (g.h, g.w), g.cout, g.p.padding, kern.nr);
    let (wp, cp, op) = (pl.wp(), pl.cinp, pl.coutp);
    let gw = pl.tw * 4;
    // The batch's tiles, sample after sample, cut into a number of ranges fixed by the shape
    // (one per block of TB tiles, at most WEIGHT_GRAD_PARTS): even one sample is split.
    let tiles = pl.tiles();
    let total = pl.n * tiles;
    let parts = total.div_ceil(TB).clamp(1, WEIGHT_GRAD_PARTS);
    let per = total.div_ceil(parts);
    // Every part's buffers, sized (checked) once.
    let psize = floats(OP, &[XI, pl.cin, op])?;
    let xlen = floats(OP, &[pl.hp(), wp, cp])?;
    let glen = floats(OP, &[pl.th, 4, gw, op])?;
    let (vlen, dlen) = (floats(OP, &[XI, TB, cp])?, floats(OP, &[XI, TB, op])?);
    let chw = pl.cin * pl.h * pl.w;
    let ohw = pl.cout * pl.oh * pl.ow;
    let part = |k: usize| -> Result<Scratch> {
        let mut p = scratch(OP, psize)?;
        let mut xl = scratch(OP, xlen)?;
        let mut gl = scratch(OP, glen)?;
        let mut v = scratch(OP, vlen)?;
        let mut d = scratch(OP, dlen)?;
        let mut first = true;
        let (g0, g1) = ((k * per).min(total), ((k + 1) * per).min(total));
        let mut at = g0;
        while at < g1 {
            // Tiles `from..to` of sample `s`.
            let s = at / tiles;
            let (from, to) = (at % tiles, (g1 - s * tiles).min(tiles));
            at = s * tiles + to;
            let (xs, gs) = (&x[s * chw..][..chw], &gout[s * ohw..][..ohw]);
            channels_last(
                kern.isa,
                xs,
                pl.cin,
                (pl.h, pl.w),
                &mut xl,
                wp,
                cp,
                (pl.ph, pl.pw),
            );
            channels_last(
                kern.isa,
                gs,
                pl.cout,
                (pl.oh, pl.ow),
                &mut gl,
                gw,
                op,
                (0, 0),
            );
            for t0 in (from..to).step_by(TB) {
                let t1 = (t0 + TB).min(to);
                inputs_block(kern.isa, &pl, &xl, t0, t1, &mut v);
                grads_block(kern.isa, &pl, &gl, t0, t1, &mut d);
                for xi in 0..XI {
                    // SAFETY: V holds TB × cinp per point (A: element (ci, t) at ci + t·cinp,
                    // ci < cin), D TB × coutp (B: row t), P cin × coutp; K = t1 - t0 ≤ TB.
                    unsafe {
                        kern.product(
                            pl.cin,
                            op,
                            t1 - t0,
                            v.as_ptr().add(xi * TB * cp),
                            (1, cp),
                            d.as_ptr().add(xi * TB * op),
                            op,
                            p.as_mut_ptr().add(xi * pl.cin * op),
                            op,
                            !first,
                        )
                    };
                }
                first = false;
            }
        }
        if first {
            p.fill(0.0);
        }
        Ok(p)
    };
    let partials: Vec<Scratch> = if par.threads() > 1 && parts > 1 {
        par.install(|| {
            (0..parts)
                .into_par_iter()
                .with_max_len(1)
                .map(part)
                .collect::<Result<_>>()
        })?
    } else {
        (0..parts).map(part).collect::<Result<_>>()?
    };
    // dW = Gᵀ (Σ parts) G per (co, ci): the parts added in part order (f32), the transform in
    // f64, rounded once; chunks of 16 output channels in parallel (each element's order is
    // the same whatever the chunking).
    let (cin, cout) = (pl.cin, pl.cout);
    let chunk = |(k, dwc): (usize, &mut [f32])| {
        for co in k * L..((k + 1) * L).min(cout) {
            for ci in 0..cin {
                let pt = |i: usize, j: usize| {
                    let at = ((i * T6 + j) * cin + ci) * op + co;
                    partials.iter().fold(0f32, |t, p| t + p[at]) as f64
                };
                let p: [[f64; T6]; T6] =
                    core::array::from_fn(|i| core::array::from_fn(|j| pt(i, j)));
                // s = Gᵀ P (3×6), then s G (3×3).
                let s: [[f64; T6]; 3] = core::array::from_fn(|a| {
                    core::array::from_fn(|j| (0..T6).map(|i| G[i][a] * p[i][j]).sum())
                });
                for a in 0..3 {
                    for b in 0..3 {
                        let v: f64 = (0..T6).map(|j| s[a][j] * G[j][b]).sum();
                        dwc[(((co - k * L) * cin + ci) * 3 + a) * 3 + b] = v as f32;
                    }
                }
            }
        }
    };
    if dw.is_empty() {
        return Ok(());
    }
    // dw holds cout·cin·9 floats, so this product fits.
    let chunk_len = L * cin * 9;
    if par.threads() > 1 {
        par.install(|| dw.par_chunks_mut(chunk_len).enumerate().for_each(chunk));
    } else {
        dw.chunks_mut(chunk_len).enumerate().for_each(chunk);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::conv::Conv2dParams;

    /// Values in [-1, 1) from a fixed xorshift stream.
    fn data(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// `(n, cin, h, w, cout, padding)`: odd channel counts (not multiples of 16 or 64), sizes
    /// that leave partial tiles, asymmetric padding, more samples than weight-gradient parts.
    type Shape = (usize, usize, usize, usize, usize, (usize, usize));
    const SHAPES: [Shape; 7] = [
        (1, 1, 6, 6, 1, (0, 0)),
        (2, 17, 9, 13, 20, (1, 1)),
        (3, 5, 11, 7, 3, (2, 0)),
        (1, 33, 8, 8, 70, (1, 2)),
        (9, 4, 6, 5, 6, (1, 1)),
        (2, 16, 14, 10, 16, (0, 1)),
        // 56 tiles: two blocks per sample (a run cut at the block edge, products continued
        // across blocks), and one sample's blocks on several threads.
        (1, 17, 26, 30, 20, (1, 1)),
    ];

    fn geometry(&(n, cin, h, w, cout, padding): &Shape) -> Geometry {
        let p = Conv2dParams {
            padding,
            ..Conv2dParams::default()
        };
        let g = Geometry::new("test", &[n, cin, h, w], &[cout, cin, 3, 3], p).unwrap();
        assert!(applicable(&g));
        g
    }

    /// The textbook sums in f64, with the sum of the terms' magnitudes (the error scale):
    /// `(forward, input grad, weight grad)`, each as `(value, magnitude)` per element.
    #[allow(clippy::type_complexity)]
    fn naive(g: &Geometry, x: &[f32], w: &[f32], gy: &[f32]) -> [(Vec<f64>, Vec<f64>); 3] {
        let mut y = (
            vec![0f64; g.n * g.cout * g.ohw()],
            vec![0f64; g.n * g.cout * g.ohw()],
        );
        let mut dx = (vec![0f64; x.len()], vec![0f64; x.len()]);
        let mut dw = (vec![0f64; w.len()], vec![0f64; w.len()]);
        for n in 0..g.n {
            for co in 0..g.cout {
                for i in 0..g.oh {
                    for j in 0..g.ow {
                        let o = ((n * g.cout + co) * g.oh + i) * g.ow + j;
                        for ci in 0..g.cin {
                            for a in 0..3 {
                                for b in 0..3 {
                                    let (Some(yy), Some(xx)) = (g.in_y(i, a), g.in_x(j, b)) else {
                                        continue;
                                    };
                                    let xi = ((n * g.cin + ci) * g.h + yy) * g.w + xx;
                                    let wi = ((co * g.cin + ci) * 3 + a) * 3 + b;
                                    let (xv, wv, gv) = (x[xi] as f64, w[wi] as f64, gy[o] as f64);
                                    y.0[o] += xv * wv;
                                    y.1[o] += (xv * wv).abs();
                                    dx.0[xi] += gv * wv;
                                    dx.1[xi] += (gv * wv).abs();
                                    dw.0[wi] += gv * xv;
                                    dw.1[wi] += (gv * xv).abs();
                                }
                            }
                        }
                    }
                }
            }
        }
        [y, dx, dw]
    }

    /// Runs the three Winograd kernels with `kern` on `par`.
    fn run(kern: Kern, g: &Geometry, x: &[f32], w: &[f32], gy: &[f32], par: &Par) -> [Vec<f32>; 3] {
        let mut y = vec![f32::NAN; g.n * g.cout * g.ohw()];
        let mut dx = vec![0f32; x.len()];
        let mut dw = vec![f32::NAN; w.len()];
        forward_with(kern, g, x, w, &mut y, par).unwrap();
        input_grad_with(kern, g, gy, w, &mut dx, par).unwrap();
        weight_grad_with(kern, g, x, gy, &mut dw, par).unwrap();
        [y, dx, dw]
    }

    fn inputs(g: &Geometry, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        (
            data(g.n * g.cin * g.h * g.w, seed),
            data(g.cout * g.cin * 9, seed + 1),
            data(g.n * g.cout * g.ohw(), seed + 2),
        )
    }

    #[test]
    fn transposes_agree() {
        let b: [Lanes; L] = core::array::from_fn(|i| core::array::from_fn(|j| (i * L + j) as f32));
        for isa in [Isa::Portable, Isa::Avx512] {
            if isa.available() {
                let mut out = [[0f32; L]; L];
                transpose16(isa, &b, &mut out);
                for (j, o) in out.iter().enumerate() {
                    for (k, v) in o.iter().enumerate() {
                        assert_eq!(*v, b[k][j], "{isa:?} [{j}][{k}]");
                    }
                }
            }
        }
    }

    #[test]
    fn matches_the_textbook_sums() {
        let mut worst = 0f64;
        for (k, shape) in SHAPES.iter().enumerate() {
            let g = geometry(shape);
            let (x, w, gy) = inputs(&g, 10 * k as u64);
            let got = run(Kern::best(), &g, &x, &w, &gy, &Par::new(1));
            let want = naive(&g, &x, &w, &gy);
            for (what, (got, (val, mag))) in ["forward", "input grad", "weight grad"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                for (i, ((&a, &b), &m)) in got.iter().zip(val).zip(mag).enumerate() {
                    // F(4×4, 3×3) in f32: errors of a few 1e-6 of the terms' magnitude.
                    let err = (a as f64 - b).abs() / (m + 1e-30);
                    worst = worst.max(err);
                    assert!(
                        err < 2e-5,
                        "shape {shape:?} {what}[{i}]: {a} vs {b} (magnitude {m})"
                    );
                }
            }
        }
        eprintln!("worst relative error: {worst:e}");
    }

    #[test]
    fn empty_batches_and_channels_give_zeros() {
        for shape in [
            (0, 3, 6, 6, 2, (1, 1)),
            (2, 0, 6, 6, 2, (1, 1)),
            (2, 3, 6, 6, 0, (1, 1)),
        ] {
            let g = geometry(&shape);
            let (x, w, gy) = inputs(&g, 1);
            for t in [1, 3] {
                let [y, dx, dw] = run(Kern::best(), &g, &x, &w, &gy, &Par::new(t));
                assert!(
                    y.iter().chain(&dx).chain(&dw).all(|v| *v == 0.0),
                    "{shape:?}"
                );
            }
        }
    }

    #[test]
    fn every_instruction_set_and_thread_count_gives_the_same_bits() {
        let bits = |v: &[Vec<f32>; 3]| -> Vec<Vec<u32>> {
            v.iter()
                .map(|v| v.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        for (k, shape) in SHAPES.iter().enumerate() {
            let g = geometry(shape);
            let (x, w, gy) = inputs(&g, 100 + k as u64);
            let want = bits(&run(
                Kern::for_isa(Isa::Portable),
                &g,
                &x,
                &w,
                &gy,
                &Par::new(1),
            ));
            for isa in [Isa::Portable, Isa::Avx2, Isa::Avx512] {
                if !isa.available() {
                    continue;
                }
                for t in [1, 2, 3, 8] {
                    let got = bits(&run(Kern::for_isa(isa), &g, &x, &w, &gy, &Par::new(t)));
                    assert!(
                        got == want,
                        "shape {shape:?}: {isa:?} at {t} threads differs"
                    );
                }
            }
        }
    }
}
