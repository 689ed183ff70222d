//! GEMM micro-kernels: one `MR × NR` tile of C updated by `kc` rank-1 steps from packed panels.
//!
//! Every kernel computes, for each element of its tile, the *same* chain of fused multiply-adds
//! `c = fma(a[i][p], b[p][j], c)` for `p = 0, 1, …, kc-1` in increasing order, starting from
//! `+0.0` (`load == false`) or from the value already in C (`load == true`). A fused
//! multiply-add rounds once, whatever the vector width, so the portable kernel (scalar
//! `mul_add`), the AVX2+FMA kernel and the AVX-512 kernel give the same bits, and so do kernels
//! of different `MR × NR`: the tile shape decides which elements are computed together, never
//! the order of the operations on one element.
//!
//! Packed layouts (written by the packing in `gemm.rs`): an A panel holds `kc` columns of `MR`
//! rows, `a[p * MR + i]`; a B panel holds `kc` rows of `NR` columns, `b[p * NR + j]`.

use super::GemmFloat;

/// A micro-kernel entry point: `(kc, a_panel, b_panel, c, rsc, load)`, with `c` the top-left
/// element of a full `MR × NR` tile whose rows are `rsc` elements apart and whose columns are
/// adjacent.
///
/// # Safety
/// `a` must hold `kc * MR` readable elements, `b` `kc * NR`, and the tile at `c` must be
/// writable; the CPU must support the kernel's target features.
pub type KernelFn<T> = unsafe fn(usize, *const T, *const T, *mut T, usize, bool);

/// Which instruction set a kernel uses: lockstep's one switch, defined in `lockstep-rng` (the
/// lowest crate, whose engines have vector paths too). [`Isa::best`] is the path in use,
/// honouring `LOCKSTEP_ISA` and [`crate::isa::set_isa`]; every build of a kernel gives the same
/// bits.
pub use lockstep_rng::isa::Isa;

/// Asks the CPU to fetch the cache lines `lines` (64 bytes each, counted from `p`) into L1
/// (`l1`) or L2: the one software-prefetch helper of the crate's kernels. Only a hint: an
/// address outside any allocation does not fault; nothing happens off x86-64.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T, lines: core::ops::Range<usize>, l1: bool) {
    #[cfg(target_arch = "x86_64")]
    for l in lines {
        use core::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
        let q = (p as *const i8).wrapping_add(l * 64);
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe {
            if l1 {
                _mm_prefetch::<_MM_HINT_T0>(q)
            } else {
                _mm_prefetch::<_MM_HINT_T1>(q)
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines, l1);
}

/// A micro-kernel and its tile shape.
#[derive(Clone, Copy)]
pub struct Kernel<T: 'static> {
    /// Kernel name (for benches and reports).
    pub name: &'static str,
    /// Instruction set.
    pub isa: Isa,
    /// Rows of C per tile (elements of A broadcast per step).
    pub mr: usize,
    /// Columns of C per tile (a multiple of the vector width).
    pub nr: usize,
    /// The entry point.
    pub f: KernelFn<T>,
    /// Edge kernels for a last, partial row panel, by ascending row count: `(rows, f)`
    /// computes the first `rows` rows of a tile from the same `mr`-wide packed A panels (the
    /// rows past `m` are not computed at all, instead of computed and thrown away). Same fma
    /// chain per element, so the same bits. May be empty.
    pub edge: &'static [(usize, KernelFn<T>)],
    /// Narrow kernels for a last, partial column panel of at most `nr / 2` columns, by
    /// ascending row count as [`edge`](Self::edge) (the last entry `mr`): `(rows, f)` computes
    /// the first `rows` rows and the first `nr / 2` columns of a tile from the same packed
    /// panels (half the multiply-adds of the full kernel, whose other half would be thrown
    /// away). Same fma chain per element, so the same bits. May be empty.
    pub narrow: &'static [(usize, KernelFn<T>)],
    /// Kernels that read A in place (see [`direct`](super::direct)), by row count: entry
    /// `r - 1` computes `r` rows (`1..=mr`) of an `mr × nr` tile. Empty where there are none
    /// (the driver then packs A). Same fma chain per element, so the same bits.
    pub direct: &'static [super::direct::DirectFn<T>],
    /// The largest A, in bytes, that the direct kernels read in place (larger ones are
    /// packed). Their broadcasts from rows far apart keep up with the FMAs from L1 on every
    /// path; from L2 only on AVX-512 (on AVX2 a gpt step ran 10 % slower with its 1024-row
    /// products direct).
    pub direct_max: usize,
}

impl<T> Kernel<T> {
    /// The entry point for a tile of `rows` rows (`1..=mr`) and how many rows it computes:
    /// the smallest edge kernel that covers them, else the full kernel.
    #[inline]
    pub fn for_rows(&self, rows: usize) -> (KernelFn<T>, usize) {
        self.edge
            .iter()
            .find(|&&(r, _)| r >= rows && r < self.mr)
            .map_or((self.f, self.mr), |&(r, f)| (f, r))
    }

    /// The entry point for a tile of `rows` rows and `cols` columns (`1..=nr`) and how many
    /// rows it computes: a [`narrow`](Self::narrow) kernel for `cols ≤ nr / 2` where there is
    /// one, else as [`for_rows`](Self::for_rows). A narrow kernel writes only the first
    /// `nr / 2` columns of the tile (and reads only those when it continues chains).
    #[inline]
    pub fn for_tile(&self, rows: usize, cols: usize) -> (KernelFn<T>, usize) {
        if cols <= self.nr / 2
            && let Some(&(r, f)) = self.narrow.iter().find(|&&(r, _)| r >= rows)
        {
            return (f, r);
        }
        self.for_rows(rows)
    }
}

/// The portable kernel: scalar fused multiply-adds in the order every kernel uses.
///
/// # Safety
/// See [`KernelFn`].
pub unsafe fn portable<T: GemmFloat, const MR: usize, const NR: usize>(
    kc: usize,
    a: *const T,
    b: *const T,
    c: *mut T,
    rsc: usize,
    load: bool,
) {
    // SAFETY (whole body): the caller guarantees the panels and the tile are in bounds.
    unsafe {
        scalar_tile!(T::ZERO, MR, NR;
            load if load => |i, j| c.add(i * rsc + j);
            for p in 0..kc {
                let ap = a.add(p * MR);
                let bp = b.add(p * NR);
            }
            b |j| bp.add(j);
            a |i| *ap.add(i);
            store |i, j| c.add(i * rsc + j));
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! AVX2+FMA and AVX-512 kernels. Each keeps the whole C tile in registers
    //! (`MR × NR / lanes` accumulators), broadcasts one element of A per row and step, and loads
    //! `NR / lanes` vectors of B per step.
    use core::arch::x86_64::*;

    /// Stamps a kernel `$name` of `$mr` rows of C from A panels packed `$as` rows wide (`$as >
    /// $mr`: an edge kernel for the last, partial row panel, reading the first `$mr` rows of
    /// each step) and `$nv` vectors of B, from B panels `$bw` times that wide (default 1; 2: a
    /// narrow kernel for the last, partial column panel, reading the first half of each step):
    /// [`fma_tile!`] over [`x86_fma!`]'s vocabulary.
    macro_rules! simd_kernel {
        ($name:ident, $mr:expr, $as:expr, $nv:expr, $feat:literal, $isa:tt) => {
            simd_kernel!($name, $mr, $as, $nv, 1, $feat, $isa);
        };
        ($name:ident, $mr:expr, $as:expr, $nv:expr, $bw:expr, $feat:literal, $isa:tt) => {
            /// A SIMD micro-kernel (see the module docs).
            ///
            /// # Safety
            /// See [`KernelFn`](super::KernelFn); the CPU must support the target features.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(
                kc: usize,
                mut a: *const fma_tile!($isa ELEM),
                mut b: *const fma_tile!($isa ELEM),
                c: *mut fma_tile!($isa ELEM),
                rsc: usize,
                load: bool,
            ) {
                const MR: usize = $mr;
                const AS: usize = $as;
                const NV: usize = $nv;
                const LANES: usize = fma_tile!($isa LANES);
                const NR: usize = NV * LANES;
                // Elements per step of the packed B panel: `$bw` times the tile's width (a
                // narrow kernel reads the first columns of a wider kernel's panel).
                const BS: usize = $bw * NR;
                // A streams from L2 (B stays in L1): fetch it a few steps ahead, every
                // line of the panel (a step may span two lines). Past the panel's end the
                // hint is harmless (prefetches do not fault).
                const PF: usize = 8 * AS;
                const STEP_BYTES: usize = AS * core::mem::size_of::<fma_tile!($isa ELEM)>();
                // SAFETY (whole body): the caller guarantees bounds and CPU features.
                unsafe {
                    fma_tile!($isa, MR, NV;
                        load if load => |i, v| c.add(i * rsc + v * LANES);
                        for _ in 0..kc {
                            _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(PF) as *const i8);
                            if STEP_BYTES > 64 {
                                _mm_prefetch::<_MM_HINT_T0>(
                                    (a.wrapping_add(PF) as *const i8).wrapping_add(64),
                                );
                            }
                        }
                        b |v| b.add(v * LANES);
                        a |i| *a.add(i);
                        then {
                            a = a.add(AS);
                            b = b.add(BS);
                        }
                        store |i, v| c.add(i * rsc + v * LANES));
                }
            }
        };
    }

    /// The transpose of an 8 × 8 block of f32 held in registers: `r[i]` is row `i`, result
    /// `[j]` is column `j`. An exact copy of each value; shared by the packing (`gemm.rs`) and
    /// the LSTM's transposes.
    #[target_feature(enable = "avx")]
    #[inline]
    pub(crate) fn transpose8x8(r: [__m256; 8]) -> [__m256; 8] {
        // Pairs of rows interleaved, then quadruples: s[4h + e] holds rows 4h..4h+3 of column
        // e (low half) and of column 4 + e (high half).
        let mut s = [_mm256_setzero_ps(); 8];
        for h in 0..2 {
            let (a, b, c, d) = (r[4 * h], r[4 * h + 1], r[4 * h + 2], r[4 * h + 3]);
            let t0 = _mm256_unpacklo_ps(a, b);
            let t1 = _mm256_unpackhi_ps(a, b);
            let t2 = _mm256_unpacklo_ps(c, d);
            let t3 = _mm256_unpackhi_ps(c, d);
            s[4 * h] = _mm256_shuffle_ps::<0x44>(t0, t2);
            s[4 * h + 1] = _mm256_shuffle_ps::<0xee>(t0, t2);
            s[4 * h + 2] = _mm256_shuffle_ps::<0x44>(t1, t3);
            s[4 * h + 3] = _mm256_shuffle_ps::<0xee>(t1, t3);
        }
        [
            _mm256_permute2f128_ps::<0x20>(s[0], s[4]),
            _mm256_permute2f128_ps::<0x20>(s[1], s[5]),
            _mm256_permute2f128_ps::<0x20>(s[2], s[6]),
            _mm256_permute2f128_ps::<0x20>(s[3], s[7]),
            _mm256_permute2f128_ps::<0x31>(s[0], s[4]),
            _mm256_permute2f128_ps::<0x31>(s[1], s[5]),
            _mm256_permute2f128_ps::<0x31>(s[2], s[6]),
            _mm256_permute2f128_ps::<0x31>(s[3], s[7]),
        ]
    }

    /// The transpose of a 4 × 4 block of f64 held in registers: `r[i]` is row `i`, result
    /// `[j]` is column `j`. An exact copy of each value (the GEMM packing and batch norm use it).
    #[target_feature(enable = "avx")]
    #[inline]
    pub(crate) fn transpose4x4_pd(r: [__m256d; 4]) -> [__m256d; 4] {
        // t0 = (r0[0], r1[0], r0[2], r1[2]), t1 = (r0[1], r1[1], r0[3], r1[3]), …
        let t0 = _mm256_unpacklo_pd(r[0], r[1]);
        let t1 = _mm256_unpackhi_pd(r[0], r[1]);
        let t2 = _mm256_unpacklo_pd(r[2], r[3]);
        let t3 = _mm256_unpackhi_pd(r[2], r[3]);
        [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ]
    }

    x86_fma!(avx2_f32, simd_kernel!(avx2_f32_6x16, 6, 6, 2));
    x86_fma!(avx2_f64, simd_kernel!(avx2_f64_6x8, 6, 6, 2));
    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_12x32, 12, 12, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_12x16, 12, 12, 2));
    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_4x32_a12, 4, 12, 2));
    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_8x32_a12, 8, 12, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_4x16_a12, 4, 12, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_8x16_a12, 8, 12, 2));

    /// Edge kernels of the AVX-512 f32 kernel (see [`Kernel::edge`](super::Kernel::edge)).
    pub const EDGE_F32: &[(usize, super::KernelFn<f32>)] =
        &[(4, avx512_f32_4x32_a12), (8, avx512_f32_8x32_a12)];
    /// Edge kernels of the AVX-512 f64 kernel.
    pub const EDGE_F64: &[(usize, super::KernelFn<f64>)] =
        &[(4, avx512_f64_4x16_a12), (8, avx512_f64_8x16_a12)];

    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_4x16_n, 4, 12, 1, 2));
    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_8x16_n, 8, 12, 1, 2));
    x86_fma!(avx512_f32, simd_kernel!(avx512_f32_12x16_n, 12, 12, 1, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_4x8_n, 4, 12, 1, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_8x8_n, 8, 12, 1, 2));
    x86_fma!(avx512_f64, simd_kernel!(avx512_f64_12x8_n, 12, 12, 1, 2));

    /// Narrow kernels of the AVX-512 f32 kernel (see [`Kernel::narrow`](super::Kernel::narrow)).
    pub const NARROW_F32: &[(usize, super::KernelFn<f32>)] = &[
        (4, avx512_f32_4x16_n),
        (8, avx512_f32_8x16_n),
        (12, avx512_f32_12x16_n),
    ];
    /// Narrow kernels of the AVX-512 f64 kernel.
    pub const NARROW_F64: &[(usize, super::KernelFn<f64>)] = &[
        (4, avx512_f64_4x8_n),
        (8, avx512_f64_8x8_n),
        (12, avx512_f64_12x8_n),
    ];
}

/// The AVX2 direct kernels' largest A: what stays in L1 beside a B panel (an attention head's
/// 64 × 64 scores).
const DIRECT_MAX_AVX2: usize = 1 << 15;

/// The kernels for `f32`: portable 6×16, AVX2 6×16, AVX-512 12×32.
pub fn kernel_f32(isa: Isa) -> Kernel<f32> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Kernel {
            name: "avx2_f32_6x16",
            isa,
            mr: 6,
            nr: 16,
            f: x86::avx2_f32_6x16,
            edge: &[],
            narrow: &[],
            direct: &super::direct::x86::F32_AVX2,
            direct_max: DIRECT_MAX_AVX2,
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Kernel {
            name: "avx512_f32_12x32",
            isa,
            mr: 12,
            nr: 32,
            f: x86::avx512_f32_12x32,
            edge: x86::EDGE_F32,
            narrow: x86::NARROW_F32,
            direct: &super::direct::x86::F32,
            direct_max: usize::MAX,
        },
        _ => Kernel {
            name: "portable_f32_6x16",
            isa: Isa::Portable,
            mr: 6,
            nr: 16,
            f: portable::<f32, 6, 16>,
            edge: &[],
            narrow: &[],
            direct: &[],
            direct_max: 0,
        },
    }
}

/// The kernels for `f64`: portable 6×8, AVX2 6×8, AVX-512 12×16.
pub fn kernel_f64(isa: Isa) -> Kernel<f64> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Kernel {
            name: "avx2_f64_6x8",
            isa,
            mr: 6,
            nr: 8,
            f: x86::avx2_f64_6x8,
            edge: &[],
            narrow: &[],
            direct: &[],
            direct_max: 0,
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Kernel {
            name: "avx512_f64_12x16",
            isa,
            mr: 12,
            nr: 16,
            f: x86::avx512_f64_12x16,
            edge: x86::EDGE_F64,
            narrow: x86::NARROW_F64,
            direct: &[],
            direct_max: 0,
        },
        _ => Kernel {
            name: "portable_f64_6x8",
            isa: Isa::Portable,
            mr: 6,
            nr: 8,
            f: portable::<f64, 6, 8>,
            edge: &[],
            narrow: &[],
            direct: &[],
            direct_max: 0,
        },
    }
}
