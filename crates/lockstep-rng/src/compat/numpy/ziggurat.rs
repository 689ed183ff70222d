//! NumPy's 256-strip ziggurat samplers (`Generator.standard_normal`, `standard_exponential`)
//! on its embedded tables. The fast path is a table lookup and one multiply; the rare tail
//! and wedge paths call the C library's `log1p` (and the float variants `log1pf`/`expf`) like
//! NumPy, and glibc's `exp` through lockstep's bit-exact port.

use super::Bits;
use super::ziggurat_tables::*;
use crate::compat::glibc_math::exp;

/// `(u32 >> 8) · 2^-24`: NumPy's float32 uniform.
#[inline(always)]
pub(crate) fn next_f32<B: Bits>(b: &mut B) -> f32 {
    (b.u32() >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// One float64 standard normal from 64-bit draws.
#[inline(always)]
pub(crate) fn normal_f64<B: Bits>(b: &mut B) -> f64 {
    loop {
        let r = b.u64();
        let idx = (r & 0xff) as usize;
        let r = r >> 8;
        let rabs = (r >> 1) & 0x000f_ffff_ffff_ffff;
        // rabs < 2^52: the signed conversion is exact and is one instruction.
        let x = (rabs as i64) as f64 * WI_DOUBLE[idx];
        // Negate by flipping the sign bit: the same value as `-x`, and no unpredictable
        // branch (the sign is a fair coin).
        let x = f64::from_bits(x.to_bits() ^ ((r & 1) << 63));
        if rabs < KI_DOUBLE[idx] {
            return x;
        }
        if let Some(v) = normal_f64_slow(b, idx, rabs, x) {
            return v;
        }
    }
}

#[cold]
#[inline(never)]
fn normal_f64_slow<B: Bits>(b: &mut B, idx: usize, rabs: u64, x: f64) -> Option<f64> {
    if idx == 0 {
        loop {
            let xx = -ZIGGURAT_NOR_INV_R * (-b.f64()).ln_1p();
            let yy = -(-b.f64()).ln_1p();
            if yy + yy > xx * xx {
                return Some(if (rabs >> 8) & 1 == 1 {
                    -(ZIGGURAT_NOR_R + xx)
                } else {
                    ZIGGURAT_NOR_R + xx
                });
            }
        }
    }
    let f = (FI_DOUBLE[idx - 1] - FI_DOUBLE[idx]) * b.f64() + FI_DOUBLE[idx];
    (f < exp(-0.5 * x * x)).then_some(x)
}

/// One float32 standard normal from 32-bit draws.
#[inline(always)]
pub(crate) fn normal_f32<B: Bits>(b: &mut B) -> f32 {
    loop {
        let r = b.u32();
        let idx = (r & 0xff) as usize;
        let sign = (r >> 8) & 1;
        let rabs = (r >> 9) & 0x007f_ffff;
        let x = rabs as f32 * WI_FLOAT[idx];
        let x = f32::from_bits(x.to_bits() ^ (sign << 31));
        if rabs < KI_FLOAT[idx] {
            return x;
        }
        if let Some(v) = normal_f32_slow(b, idx, rabs, x) {
            return v;
        }
    }
}

#[cold]
#[inline(never)]
fn normal_f32_slow<B: Bits>(b: &mut B, idx: usize, rabs: u32, x: f32) -> Option<f32> {
    if idx == 0 {
        loop {
            let xx = -ZIGGURAT_NOR_INV_R_F * (-next_f32(b)).ln_1p();
            let yy = -(-next_f32(b)).ln_1p();
            if yy + yy > xx * xx {
                return Some(if (rabs >> 8) & 1 == 1 {
                    -(ZIGGURAT_NOR_R_F + xx)
                } else {
                    ZIGGURAT_NOR_R_F + xx
                });
            }
        }
    }
    let f = (FI_FLOAT[idx - 1] - FI_FLOAT[idx]) * next_f32(b) + FI_FLOAT[idx];
    (f < (-0.5f32 * x * x).exp()).then_some(x)
}

/// One float64 standard exponential: 3 low bits dropped, 8-bit strip index, 53-bit value.
#[inline(always)]
pub(crate) fn exponential_f64<B: Bits>(b: &mut B) -> f64 {
    loop {
        let r = b.u64() >> 3;
        let idx = (r & 0xff) as usize;
        let r = r >> 8;
        let x = (r as i64) as f64 * WE_DOUBLE[idx];
        if r < KE_DOUBLE[idx] {
            return x;
        }
        if idx == 0 {
            // Tail: the exponential is memoryless, so shift a fresh draw past the last strip.
            return ZIGGURAT_EXP_R - (-b.f64()).ln_1p();
        }
        if (FE_DOUBLE[idx - 1] - FE_DOUBLE[idx]) * b.f64() + FE_DOUBLE[idx] < exp(-x) {
            return x;
        }
    }
}

/// One float32 standard exponential from 32-bit draws.
#[inline(always)]
pub(crate) fn exponential_f32<B: Bits>(b: &mut B) -> f32 {
    loop {
        let r = b.u32() >> 1;
        let idx = (r & 0xff) as usize;
        let r = r >> 8;
        let x = r as f32 * WE_FLOAT[idx];
        if r < KE_FLOAT[idx] {
            return x;
        }
        if idx == 0 {
            return ZIGGURAT_EXP_R_F - (-next_f32(b)).ln_1p();
        }
        if (FE_FLOAT[idx - 1] - FE_FLOAT[idx]) * next_f32(b) + FE_FLOAT[idx] < (-x).exp() {
            return x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_spot_checks() {
        // numpy.md §D3.1 entries [0], [1], [255].
        assert_eq!(KI_DOUBLE[0], 4208095142473578);
        assert_eq!(KI_DOUBLE[255], 4251099761679434);
        assert_eq!(WI_DOUBLE[0], 8.683627060801306e-16);
        assert_eq!(WI_DOUBLE[1], 4.779330175727737e-17);
        assert_eq!(FI_DOUBLE[255], 0.001260285930498598);
        assert_eq!(KI_FLOAT[0], 7838188);
        assert_eq!(KI_FLOAT[255], 7918290);
        assert_eq!(WI_FLOAT[0], 4.6619868e-07);
        assert_eq!(WI_FLOAT[255], 4.3560897e-07);
        assert_eq!(FI_FLOAT[1], 0.9771017);
        assert_eq!(FI_FLOAT[255], 0.001260286);
    }
}
