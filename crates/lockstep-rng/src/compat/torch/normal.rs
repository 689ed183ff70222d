//! `randn` / `normal_`: PyTorch's two Box–Muller paths.
//!
//! * Scalar path (fewer than 16 elements, or a non-contiguous tensor): in f64, one pair per two
//!   values, the second value cached in the generator and used by the next call.
//! * 16-block path (16 or more contiguous elements): fill the whole output with unit uniforms,
//!   transform each block of 16 in place (lanes 0..8 are radii, 8..16 angles); if `n % 16 ≠ 0`,
//!   redraw 16 fresh uniforms into the LAST 16 slots and transform them again, overwriting up to
//!   15 finished values. This is what PyTorch does, waste included.

use super::Float;
use crate::{Generator, Result, invalid};

/// 2π as PyTorch writes it (the double nearest 2π, equal to `TAU`).
const TWO_PI: f64 = core::f64::consts::TAU;
/// Elements drawn and transformed together (a multiple of 16 that fits in L1).
const CHUNK: usize = 2048;

fn check_std(std: f64) -> Result<()> {
    if std >= 0.0 {
        Ok(())
    } else {
        Err(invalid(
            "normal_",
            "std",
            format!("normal expects std >= 0.0, but found std {std}"),
        ))
    }
}

/// Fills a contiguous `out` like `Tensor.normal_(mean, std)` (and `torch.randn` with mean 0,
/// std 1): the 16-block path if `out.len() >= 16`, the scalar path otherwise.
///
/// # Errors
/// If `std` is negative or NaN.
pub fn normal_<T: Float>(g: &mut Generator, out: &mut [T], mean: f64, std: f64) -> Result<()> {
    check_std(std)?;
    let n = out.len();
    if n < 16 {
        return normal_scalar_path_(g, out, mean, std);
    }
    let (mean, std) = (T::from_f64(mean), T::from_f64(std));
    // Draw and transform one cache-sized run of whole blocks at a time: the same draws in the
    // same order as filling everything first, without a second pass over memory.
    let full = n - n % 16;
    for chunk in out[..full].chunks_mut(CHUNK) {
        T::fill_unit(g, chunk);
        T::box_muller_blocks(chunk, mean, std);
    }
    T::fill_unit(g, &mut out[full..]);
    if !n.is_multiple_of(16) {
        let tail = &mut out[n - 16..];
        T::fill_unit(g, tail);
        T::box_muller_blocks(tail, mean, std);
    }
    Ok(())
}

/// Fills `out` with PyTorch's scalar normal path, whatever its length: what `normal_` does for
/// a non-contiguous tensor (in the order its elements are visited). Each value is
/// `fma(z, std, mean)` in f64, rounded to `T`; `z` comes from the generator's cached value if
/// it has one, else from a new Box–Muller pair whose second value is cached.
///
/// # Errors
/// If `std` is negative or NaN.
pub fn normal_scalar_path_<T: Float>(
    g: &mut Generator,
    out: &mut [T],
    mean: f64,
    std: f64,
) -> Result<()> {
    check_std(std)?;
    for v in out.iter_mut() {
        let z = match g.take_normal_cache() {
            Some(z) => z,
            None => {
                let u1 = g.next_f64();
                let u2 = g.next_f64();
                let r = (-2.0 * (-u2).ln_1p()).sqrt();
                let theta = TWO_PI * u1;
                g.set_normal_cache(r * theta.sin());
                r * theta.cos()
            }
        };
        *v = T::from_f64(z.mul_add(std, mean));
    }
    Ok(())
}

/// The f64 block transform. PyTorch calls the C library's `log`, `cos`, `sin`; this uses
/// lockstep's bit-exact ports of glibc's (≥ 2.28, x86-64 FMA build: [`crate::compat::glibc_math`]),
/// so the values are those of PyTorch on Linux x86-64 (any CPU since Haswell), on every
/// platform. Eight lanes at a time with AVX-512, four with AVX2 and FMA; the same bits on every
/// path.
pub(super) fn blocks_f64(d: &mut [f64], mean: f64, std: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::Isa::Avx512.enabled() {
            // SAFETY: AVX-512F is available (checked by `enabled`).
            return unsafe { avx512::blocks_f64(d, mean, std) };
        }
        if crate::isa::Isa::Avx2.enabled() {
            // SAFETY: AVX2 and FMA are available (checked by `enabled`).
            return unsafe { avx2_f64::blocks_f64(d, mean, std) };
        }
    }
    blocks_f64_body(d, mean, std)
}

#[inline(always)]
fn blocks_f64_body(d: &mut [f64], mean: f64, std: f64) {
    use crate::compat::glibc_math as gm;
    for b in d.chunks_exact_mut(16) {
        for j in 0..8 {
            let u1 = 1.0 - b[j];
            let u2 = b[j + 8];
            let radius = (-2.0 * gm::log(u1)).sqrt();
            let theta = TWO_PI * u2;
            b[j] = (radius * gm::cos(theta)).mul_add(std, mean);
            b[j + 8] = (radius * gm::sin(theta)).mul_add(std, mean);
        }
    }
}

/// The f64 block transform with AVX-512: one block of 16 is one vector of radii inputs and one
/// of angles.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use crate::compat::glibc_math::x86::{log8, sincos8};
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) fn blocks_f64(d: &mut [f64], mean: f64, std: f64) {
        let (mean, std) = (_mm512_set1_pd(mean), _mm512_set1_pd(std));
        for b in d.chunks_exact_mut(16) {
            // SAFETY: `b` holds 16 doubles; unaligned loads and stores.
            unsafe {
                let p = b.as_mut_ptr();
                let u1 = _mm512_sub_pd(_mm512_set1_pd(1.0), _mm512_loadu_pd(p));
                let radius = _mm512_sqrt_pd(_mm512_mul_pd(_mm512_set1_pd(-2.0), log8(u1)));
                let theta = _mm512_mul_pd(_mm512_set1_pd(super::TWO_PI), _mm512_loadu_pd(p.add(8)));
                let (s, c) = sincos8(theta);
                _mm512_storeu_pd(p, _mm512_fmadd_pd(_mm512_mul_pd(radius, c), std, mean));
                _mm512_storeu_pd(
                    p.add(8),
                    _mm512_fmadd_pd(_mm512_mul_pd(radius, s), std, mean),
                );
            }
        }
    }
}

/// The f64 block transform with AVX2 and FMA: one block of 16 is two vectors of radii inputs
/// and two of angles (the glibc ports four lanes at a time were about twice as fast as the
/// scalar ports compiled with FMA, which were slower than glibc itself on AVX2-only CPUs).
#[cfg(target_arch = "x86_64")]
mod avx2_f64 {
    use crate::compat::glibc_math::x86_avx2::{log4, sincos4};
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn blocks_f64(d: &mut [f64], mean: f64, std: f64) {
        let (mean, std) = (_mm256_set1_pd(mean), _mm256_set1_pd(std));
        for b in d.chunks_exact_mut(16) {
            let p = b.as_mut_ptr();
            for h in [0, 4] {
                // SAFETY: `b` holds 16 doubles and h + 8 + 4 ≤ 16; unaligned loads and stores.
                unsafe {
                    let u1 = _mm256_sub_pd(_mm256_set1_pd(1.0), _mm256_loadu_pd(p.add(h)));
                    let radius = _mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), log4(u1)));
                    let theta =
                        _mm256_mul_pd(_mm256_set1_pd(super::TWO_PI), _mm256_loadu_pd(p.add(h + 8)));
                    let (s, c) = sincos4(theta);
                    _mm256_storeu_pd(
                        p.add(h),
                        _mm256_fmadd_pd(_mm256_mul_pd(radius, c), std, mean),
                    );
                    _mm256_storeu_pd(
                        p.add(h + 8),
                        _mm256_fmadd_pd(_mm256_mul_pd(radius, s), std, mean),
                    );
                }
            }
        }
    }
}

/// The f32 block transform of PyTorch's AVX2 kernel, operation by operation (torch.md §3.4a):
/// a Cephes-style `log` and `sincos` with fused multiply-adds exactly where the compiled kernel
/// has them. Every `mul_add` below is a true single-rounding FMA on any CPU.
fn blocks_f32_body(d: &mut [f32], mean: f32, std: f32) {
    for b in d.chunks_exact_mut(16) {
        let mut u1 = [0f32; 8];
        let mut u2 = [0f32; 8];
        for j in 0..8 {
            u1[j] = 1.0 - b[j];
            u2[j] = b[j + 8];
        }
        for j in 0..8 {
            let radius = (-2.0 * log_avx2(u1[j])).sqrt();
            let theta = TWO_PI_F * u2[j];
            let (s, c) = sincos_avx2(theta);
            b[j] = (radius * c).mul_add(std, mean);
            b[j + 8] = (radius * s).mul_add(std, mean);
        }
    }
}

const TWO_PI_F: f32 = f32::from_bits(0x40C9_0FDB);

#[inline(always)]
fn log_avx2(x: f32) -> f32 {
    const SQRTHF: f32 = f32::from_bits(0x3F35_04F3);
    const P: [u32; 9] = [
        0x3D90_21BB,
        0xBDEB_D1B8,
        0x3DEF_251A,
        0xBDFE_5D4F,
        0x3E11_E9BF,
        0xBE2A_AE50,
        0x3E4C_CEAC,
        0xBE7F_FFFC,
        0x3EAA_AAAA,
    ];
    const Q1: f32 = f32::from_bits(0xB95E_8083);
    const Q2: f32 = f32::from_bits(0x3F31_8000);
    // Inputs are in [2^-24, 1]: normal, positive.
    let bits = x.to_bits();
    let e_int = (bits >> 23) as i32 - 127;
    let m = f32::from_bits((bits & 0x807F_FFFF) | 0x3F00_0000);
    let mut e = e_int as f32 + 1.0;
    let t = if m < SQRTHF {
        e -= 1.0;
        m
    } else {
        0.0
    };
    let x = (m - 1.0) + t;
    let z = x * x;
    let mut y = f32::from_bits(P[0]);
    for &p in &P[1..] {
        y = y.mul_add(x, f32::from_bits(p));
    }
    y *= x;
    y = y.mul_add(z, e * Q1);
    y -= 0.5 * z;
    let x = x + y;
    e.mul_add(Q2, x)
}

#[inline(always)]
fn sincos_avx2(a: f32) -> (f32, f32) {
    const FOPI: f32 = f32::from_bits(0x3FA2_F983);
    const DP1: f32 = f32::from_bits(0xBF49_0000);
    const DP2: f32 = f32::from_bits(0xB97D_A000);
    const DP3: f32 = f32::from_bits(0xB322_2169);
    const C0: f32 = f32::from_bits(0x37CC_F5CE);
    const C1: f32 = f32::from_bits(0xBAB6_061A);
    const C2: f32 = f32::from_bits(0x3D2A_AAA5);
    const S0: f32 = f32::from_bits(0xB94C_A1F9);
    const S1: f32 = f32::from_bits(0x3C08_839E);
    const S2: f32 = f32::from_bits(0xBE2A_AAA3);
    let sign_sin = a.to_bits() & 0x8000_0000;
    let a = a.abs();
    let mut j = (a * FOPI) as i32;
    j = (j + 1) & !1;
    let y = j as f32;
    let swap_sin = if j & 4 != 0 { 0x8000_0000 } else { 0 };
    let poly_sin_for_sin = j & 2 == 0;
    let mut a = y.mul_add(DP1, a);
    a = y.mul_add(DP2, a);
    a = y.mul_add(DP3, a);
    let flip_cos = if (j.wrapping_sub(2)) & 4 == 0 {
        0x8000_0000
    } else {
        0
    };
    let flip_sin = sign_sin ^ swap_sin;
    let z = a * a;
    let mut c = C0.mul_add(z, C1);
    c = c.mul_add(z, C2);
    c *= z;
    c = z.mul_add(c, -(0.5 * z));
    c += 1.0;
    let mut p = S0.mul_add(z, S1);
    p = p.mul_add(z, S2);
    p *= z;
    p = a.mul_add(p, a);
    let (s, c) = if poly_sin_for_sin { (p, c) } else { (c, p) };
    (
        f32::from_bits(s.to_bits() ^ flip_sin),
        f32::from_bits(c.to_bits() ^ flip_cos),
    )
}

/// The same block transform in AVX2 + FMA registers, eight lanes at a time: each intrinsic
/// below is the vector form of the scalar operation at the same place in `log_avx2` /
/// `sincos_avx2`, so the bits are identical (checked against PyTorch's golden values).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn splat(bits: u32) -> __m256 {
        _mm256_castsi256_ps(_mm256_set1_epi32(bits as i32))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn log(x: __m256) -> __m256 {
        const P: [u32; 9] = [
            0x3D90_21BB,
            0xBDEB_D1B8,
            0x3DEF_251A,
            0xBDFE_5D4F,
            0x3E11_E9BF,
            0xBE2A_AE50,
            0x3E4C_CEAC,
            0xBE7F_FFFC,
            0x3EAA_AAAA,
        ];
        let one = _mm256_set1_ps(1.0);
        let bits = _mm256_castps_si256(x);
        let e_int = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127));
        let m = _mm256_castsi256_ps(_mm256_or_si256(
            _mm256_and_si256(bits, _mm256_set1_epi32(0x807F_FFFFu32 as i32)),
            _mm256_set1_epi32(0x3F00_0000),
        ));
        let mut e = _mm256_add_ps(_mm256_cvtepi32_ps(e_int), one);
        let mask = _mm256_cmp_ps::<_CMP_LT_OQ>(m, splat(0x3F35_04F3));
        let t = _mm256_and_ps(mask, m);
        e = _mm256_sub_ps(e, _mm256_and_ps(mask, one));
        let x = _mm256_add_ps(_mm256_sub_ps(m, one), t);
        let z = _mm256_mul_ps(x, x);
        let mut y = splat(P[0]);
        for &p in &P[1..] {
            y = _mm256_fmadd_ps(y, x, splat(p));
        }
        y = _mm256_mul_ps(y, x);
        y = _mm256_fmadd_ps(y, z, _mm256_mul_ps(e, splat(0xB95E_8083)));
        y = _mm256_sub_ps(y, _mm256_mul_ps(_mm256_set1_ps(0.5), z));
        let x = _mm256_add_ps(x, y);
        _mm256_fmadd_ps(e, splat(0x3F31_8000), x)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn sincos(a: __m256) -> (__m256, __m256) {
        let sign_bit = _mm256_set1_epi32(i32::MIN);
        let bits = _mm256_castps_si256(a);
        let sign_sin = _mm256_and_si256(bits, sign_bit);
        let a = _mm256_castsi256_ps(_mm256_andnot_si256(sign_bit, bits));
        let mut j = _mm256_cvttps_epi32(_mm256_mul_ps(a, splat(0x3FA2_F983)));
        j = _mm256_and_si256(
            _mm256_add_epi32(j, _mm256_set1_epi32(1)),
            _mm256_set1_epi32(!1),
        );
        let y = _mm256_cvtepi32_ps(j);
        let four = _mm256_set1_epi32(4);
        let swap_sin = _mm256_slli_epi32::<29>(_mm256_and_si256(j, four));
        let poly_sin_for_sin = _mm256_castsi256_ps(_mm256_cmpeq_epi32(
            _mm256_and_si256(j, _mm256_set1_epi32(2)),
            _mm256_setzero_si256(),
        ));
        let mut a = _mm256_fmadd_ps(y, splat(0xBF49_0000), a);
        a = _mm256_fmadd_ps(y, splat(0xB97D_A000), a);
        a = _mm256_fmadd_ps(y, splat(0xB322_2169), a);
        let flip_cos = _mm256_slli_epi32::<29>(_mm256_andnot_si256(
            _mm256_sub_epi32(j, _mm256_set1_epi32(2)),
            four,
        ));
        let flip_sin = _mm256_xor_si256(sign_sin, swap_sin);
        let z = _mm256_mul_ps(a, a);
        let mut c = _mm256_fmadd_ps(splat(0x37CC_F5CE), z, splat(0xBAB6_061A));
        c = _mm256_fmadd_ps(c, z, splat(0x3D2A_AAA5));
        c = _mm256_mul_ps(z, c);
        let neg_half_z = _mm256_xor_ps(
            _mm256_mul_ps(_mm256_set1_ps(0.5), z),
            _mm256_castsi256_ps(sign_bit),
        );
        c = _mm256_fmadd_ps(z, c, neg_half_z);
        c = _mm256_add_ps(c, _mm256_set1_ps(1.0));
        let mut p = _mm256_fmadd_ps(splat(0xB94C_A1F9), z, splat(0x3C08_839E));
        p = _mm256_fmadd_ps(p, z, splat(0xBE2A_AAA3));
        p = _mm256_mul_ps(z, p);
        p = _mm256_fmadd_ps(a, p, a);
        let s = _mm256_blendv_ps(c, p, poly_sin_for_sin);
        let co = _mm256_blendv_ps(p, c, poly_sin_for_sin);
        (
            _mm256_xor_ps(s, _mm256_castsi256_ps(flip_sin)),
            _mm256_xor_ps(co, _mm256_castsi256_ps(flip_cos)),
        )
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn blocks(d: &mut [f32], mean: f32, std: f32) {
        let (mean, std) = (_mm256_set1_ps(mean), _mm256_set1_ps(std));
        for b in d.chunks_exact_mut(16) {
            let (lo, hi) = b.split_at_mut(8);
            let lo: &mut [f32; 8] = lo.try_into().unwrap();
            let hi: &mut [f32; 8] = hi.try_into().unwrap();
            // SAFETY: `lo` and `hi` are 8 floats each; loads and stores are unaligned.
            let (d0, d1) = unsafe { (_mm256_loadu_ps(lo.as_ptr()), _mm256_loadu_ps(hi.as_ptr())) };
            let u1 = _mm256_sub_ps(_mm256_set1_ps(1.0), d0);
            let radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0), log(u1)));
            let theta = _mm256_mul_ps(splat(super::TWO_PI_F.to_bits()), d1);
            let (s, c) = sincos(theta);
            let out0 = _mm256_fmadd_ps(_mm256_mul_ps(radius, c), std, mean);
            let out1 = _mm256_fmadd_ps(_mm256_mul_ps(radius, s), std, mean);
            // SAFETY: as above.
            unsafe {
                _mm256_storeu_ps(lo.as_mut_ptr(), out0);
                _mm256_storeu_ps(hi.as_mut_ptr(), out1);
            }
        }
    }
}

/// Dispatches to a build with hardware FMA when the CPU has it; the bits are the same either
/// way, only the speed differs (without it `mul_add` is the C library's exact `fmaf`).
pub(super) fn blocks_f32(d: &mut [f32], mean: f32, std: f32) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: both features were detected on this CPU just above.
        return unsafe { avx2::blocks(d, mean, std) };
    }
    blocks_f32_body(d, mean, std)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The portable path (used on CPUs without AVX2/FMA) and the vector path agree bit for
    /// bit; the vector path is checked against PyTorch by the golden tests.
    #[test]
    fn portable_and_vector_f32_blocks_agree() {
        let mut g = Generator::with_seed(123);
        let mut a = vec![0f32; 16 * 4096];
        <f32 as Float>::fill_unit(&mut g, &mut a);
        // Include the extreme inputs: u = 0 (log(1)) and the largest u below 1.
        a[0] = 0.0;
        a[1] = 1.0 - f32::EPSILON / 2.0;
        a[8] = 0.0;
        a[9] = 1.0 - f32::EPSILON / 2.0;
        let mut b = a.clone();
        blocks_f32_body(&mut a, 0.25, 1.5);
        blocks_f32(&mut b, 0.25, 1.5);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
    }
}
