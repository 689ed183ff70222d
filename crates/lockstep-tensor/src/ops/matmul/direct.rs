//! Micro-kernels that read A in place (rows contiguous, `lda` apart) instead of from packed
//! panels, for products with few rows of A (an LM head's 64 rows): packing such an A costs a
//! gather per element from rows far apart, half the time of 64×50257×128. Each kernel also
//! issues a list of L2 prefetches (the memory the driver touches next: the next B block's
//! source, the next A block, the next tile of C) spread evenly over its steps, so that the loads
//! from memory overlap the multiply-adds instead of stalling in bursts between kernel calls.
//!
//! The fma chain per element is the one every kernel of [`kernel`](super::kernel) computes
//! (`c = fma(a[i][p], b[p][j], c)`, `p` increasing, from `+0.0` or from the value in C), so the
//! bits are the packed path's.

/// A direct-A entry point: `(kc, a, lda, b_panel, c, rsc, load, prefetch)`: `rows` rows of a
/// tile from A's rows `a + i * lda` (`kc` contiguous elements each), a packed B panel of `kc`
/// steps (`b[p * NR + j]`), C as for [`KernelFn`](super::kernel::KernelFn) (`rows` rows
/// written); the lines in `prefetch` are fetched into L2 along the way.
///
/// # Safety
/// `a + i * lda + p` must be readable for `i < rows`, `p < kc`; `b` must hold `kc * NR`
/// elements and the `rows × NR` tile at `c` must be writable; the CPU must support the
/// kernel's target features. `prefetch` may hold any addresses (a prefetch never faults).
pub type DirectFn<T> =
    unsafe fn(usize, *const T, usize, *const T, *mut T, usize, bool, &[*const i8]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use core::arch::x86_64::*;

    /// Stamps a direct kernel `$name::<MR>` (`MR` rows, `1..=12`, × `$nv` vectors of B):
    /// [`fma_tile!`] over [`x86_fma!`]'s vocabulary, A read in place (see the module docs).
    macro_rules! direct_kernel {
        ($name:ident, $nv:expr, $feat:literal, $isa:tt) => {
            /// A direct-A kernel (see the module docs).
            ///
            /// # Safety
            /// See [`DirectFn`](super::DirectFn).
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $feat)]
            pub unsafe fn $name<const MR: usize>(
                kc: usize,
                a: *const fma_tile!($isa ELEM),
                lda: usize,
                mut b: *const fma_tile!($isa ELEM),
                c: *mut fma_tile!($isa ELEM),
                rsc: usize,
                load: bool,
                pf: &[*const i8],
            ) {
                const NV: usize = $nv;
                const LANES: usize = fma_tile!($isa LANES);
                const NR: usize = NV * LANES;
                // A row's elements this far ahead are fetched into L1 (two lines: from L2 or
                // memory).
                const PFA: usize = 32;
                // One prefetch of the list every `every` steps.
                let every = match pf.len() {
                    0 => usize::MAX,
                    n => (kc / n).max(1),
                };
                let (mut cnt, mut next) = (every, 0);
                // SAFETY (whole body): the caller guarantees bounds and CPU features;
                // prefetches of addresses past A's rows do not fault (wrapping arithmetic,
                // never dereferenced).
                unsafe {
                    fma_tile!($isa, MR, NV;
                        load if load => |i, v| c.add(i * rsc + v * LANES);
                        for p in 0..kc {
                            // Each row's next lines, one row per step (a row advances a line
                            // every 16 steps).
                            let r = p & 15;
                            if r < MR {
                                _mm_prefetch::<_MM_HINT_T0>(
                                    a.wrapping_add(r * lda + p + PFA) as *const i8,
                                );
                            }
                            cnt -= 1;
                            if cnt == 0 {
                                cnt = every;
                                if next < pf.len() {
                                    _mm_prefetch::<_MM_HINT_T1>(*pf.get_unchecked(next));
                                    next += 1;
                                }
                            }
                        }
                        b |v| b.add(v * LANES);
                        a |i| *a.add(i * lda + p);
                        then {
                            b = b.add(NR);
                        }
                        store |i, v| c.add(i * rsc + v * LANES));
                }
                for &q in &pf[next.min(pf.len())..] {
                    _mm_prefetch::<_MM_HINT_T1>(q);
                }
            }
        };
    }

    x86_fma!(avx512_f32, direct_kernel!(avx512_f32_direct, 2));

    /// The AVX-512 f32 direct kernels by row count: entry `r - 1` computes `r` rows.
    pub const F32: [super::DirectFn<f32>; 12] = [
        avx512_f32_direct::<1>,
        avx512_f32_direct::<2>,
        avx512_f32_direct::<3>,
        avx512_f32_direct::<4>,
        avx512_f32_direct::<5>,
        avx512_f32_direct::<6>,
        avx512_f32_direct::<7>,
        avx512_f32_direct::<8>,
        avx512_f32_direct::<9>,
        avx512_f32_direct::<10>,
        avx512_f32_direct::<11>,
        avx512_f32_direct::<12>,
    ];

    x86_fma!(avx2_f32, direct_kernel!(avx2_f32_direct, 2));

    /// The AVX2 f32 direct kernels by row count: entry `r - 1` computes `r` rows.
    pub const F32_AVX2: [super::DirectFn<f32>; 6] = [
        avx2_f32_direct::<1>,
        avx2_f32_direct::<2>,
        avx2_f32_direct::<3>,
        avx2_f32_direct::<4>,
        avx2_f32_direct::<5>,
        avx2_f32_direct::<6>,
    ];

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Every element of a direct tile is the fma chain over `p` in order, from `+0.0` or from C.
        #[test]
        fn the_direct_template_computes_the_fma_chain() {
            if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
                return;
            }
            const NR: usize = 16;
            let val = |i: usize| ((i * 2_654_435_761) % 1000) as f32 / 97.0 - 5.0;
            for (rows, kc, lda, load) in [(1, 1, 1, false), (3, 17, 20, true), (6, 40, 45, false)] {
                let a: Vec<f32> = (0..rows * lda).map(val).collect();
                let b: Vec<f32> = (0..kc * NR).map(|i| val(i + 7)).collect();
                let c0: Vec<f32> = (0..rows * NR).map(|i| val(i + 13)).collect();
                let mut c = c0.clone();
                let pf = [a.as_ptr().cast::<i8>(), b.as_ptr().cast::<i8>()];
                let f = [
                    avx2_f32_direct::<1>,
                    avx2_f32_direct::<2>,
                    avx2_f32_direct::<3>,
                    avx2_f32_direct::<4>,
                    avx2_f32_direct::<5>,
                    avx2_f32_direct::<6>,
                ][rows - 1];
                // SAFETY: AVX2 and FMA are present; A holds `rows` rows of `lda ≥ kc`, B `kc`
                // rows of 16, C `rows` rows of 16.
                unsafe {
                    f(
                        kc,
                        a.as_ptr(),
                        lda,
                        b.as_ptr(),
                        c.as_mut_ptr(),
                        NR,
                        load,
                        &pf,
                    )
                };
                for i in 0..rows {
                    for j in 0..NR {
                        let mut want = if load { c0[i * NR + j] } else { 0.0 };
                        for p in 0..kc {
                            want = a[i * lda + p].mul_add(b[p * NR + j], want);
                        }
                        assert_eq!(
                            c[i * NR + j].to_bits(),
                            want.to_bits(),
                            "{rows}x{kc} ({i}, {j})"
                        );
                    }
                }
            }
        }
    }
}
