//! [`Real`]: the float operations the dimension reductions and softmax need beyond
//! [`LaneSum`], with the vectorisable `expf` they share.

use super::lanes::LaneSum;

/// The float operations the reductions need beyond [`LaneSum`].
pub trait Real: LaneSum {
    /// `e^self` ([`crate::math`]: the same bits on every platform).
    fn exp(self) -> Self;
    /// Natural logarithm ([`crate::math`]: the same bits on every platform).
    fn ln(self) -> Self;
    /// `dst[i] = exp(src[i])` (a vectorisable kernel for `f32`; results do not depend on the
    /// CPU features used, as no operation is fused).
    fn exp_slice(src: &[Self], dst: &mut [Self]);
    /// [`exp_slice`](Self::exp_slice) without its own CPU-feature dispatch: inlined, so it is
    /// vectorised with the features of the caller (the same bits).
    fn exp_inline(src: &[Self], dst: &mut [Self]);
}

impl Real for f32 {
    fn exp(self) -> Self {
        crate::math::expf(self)
    }
    fn ln(self) -> Self {
        crate::math::lnf(self)
    }
    fn exp_slice(src: &[Self], dst: &mut [Self]) {
        exp_f32_slice(src, dst);
    }
    #[inline(always)]
    fn exp_inline(src: &[Self], dst: &mut [Self]) {
        exp_f32_generic(src, dst);
    }
}

impl Real for f64 {
    fn exp(self) -> Self {
        crate::math::exp(self)
    }
    fn ln(self) -> Self {
        crate::math::ln(self)
    }
    fn exp_slice(src: &[Self], dst: &mut [Self]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = crate::math::exp(s);
        }
    }
    #[inline(always)]
    fn exp_inline(src: &[Self], dst: &mut [Self]) {
        Self::exp_slice(src, dst);
    }
}

/// Cephes-style `expf`: range reduction by `ln 2` (split in two constants), a degree-6
/// polynomial, and the power of two put in the exponent bits. Within 2 ulp of the true value
/// for results above `2^-125`; results below are flushed to zero (inputs under `-86.6`).
/// Branch-free, so it vectorises; no fused operations, so the bits are the same with or
/// without AVX2/FMA.
#[inline(always)]
fn exp_f32_generic(src: &[f32], dst: &mut [f32]) {
    const LO: f32 = -86.6;
    const HI: f32 = 88.722_83;
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    for (d, &x) in dst.iter_mut().zip(src) {
        let xc = x.clamp(LO, HI); // NaN stays NaN
        let t = xc * LOG2E + MAGIC;
        let fx = t - MAGIC;
        let n = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
        let r = xc - fx * C1 - fx * C2;
        let z = r * r;
        let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2)
            * r
            + 1.666_666_5e-1)
            * r
            + 5.000_000_1e-1;
        let y = p * z + r + 1.0;
        let scale = f32::from_bits((n.wrapping_add(126) as u32) << 23);
        let v = y * scale * 2.0;
        *d = if x < LO {
            0.0
        } else if x > HI {
            f32::INFINITY
        } else {
            v
        };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn exp_f32_avx2(src: &[f32], dst: &mut [f32]) {
    exp_f32_generic(src, dst);
}

/// `dst[i] = exp(src[i])` for `f32` (see `exp_f32_generic`); uses AVX2 when present, with
/// identical results.
pub fn exp_f32_slice(src: &[f32], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { exp_f32_avx2(src, dst) };
            return;
        }
    }
    exp_f32_generic(src, dst);
}
