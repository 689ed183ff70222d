//! The vectorised twins of `lockstep_tensor::math` (`math::lanes`) give the scalar functions'
//! bits on every instruction-set path: edge inputs (NaN payloads, ±inf, ±0, subnormals, every
//! branch threshold of the algorithm and its neighbours), a regular sweep over all bit
//! patterns and random inputs. The exhaustive check over all 2³² inputs is `#[ignore]`d (run it
//! in release: `cargo test --release -p lockstep-tensor --test math_lanes -- --ignored`).

use lockstep_tensor::isa::Isa;
use lockstep_tensor::math;

/// Bit patterns around the thresholds of the f32 algorithms, with ±1 and ±2 ulp neighbours, in
/// both signs; plus the special values.
fn edges(thresholds: &[u32]) -> Vec<f32> {
    let mut v = Vec::new();
    let specials = [
        0u32,
        1,
        2,
        0x007f_ffff,
        0x0080_0000,
        0x3f80_0000,
        0x7f7f_ffff,
        0x7f80_0000,
        0x7fc0_0000,
        0x7f80_0001, // signalling NaN
        0x7fff_ffff,
        0x7fc0_1234,
    ];
    for &t in thresholds.iter().chain(&specials) {
        for d in -2i64..=2 {
            let b = (t as i64 + d).clamp(0, 0x7fff_ffff) as u32;
            v.push(f32::from_bits(b));
            v.push(f32::from_bits(b | 0x8000_0000));
        }
    }
    v
}

/// About a million bit patterns spread over all 2³² (a stride prime to 2³²), then 200,000
/// pseudo-random ones (a fixed 64-bit LCG), then `extra`.
fn inputs(extra: &[f32]) -> Vec<f32> {
    let mut v: Vec<f32> = (0..(1u64 << 32))
        .step_by(4093)
        .map(|b| f32::from_bits(b as u32))
        .collect();
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200_000 {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        v.push(f32::from_bits((s >> 32) as u32));
    }
    v.extend_from_slice(extra);
    v
}

/// Every available path gives `want`'s bits for every input (lengths that are not multiples of
/// any vector width included: the remainder loops too).
fn check_all_paths(name: &str, xs: &[f32], want: fn(f32) -> f32, got: fn(Isa, &[f32], &mut [f32])) {
    let mut paths = 0;
    for isa in Isa::ALL {
        if !isa.available() {
            continue;
        }
        paths += 1;
        for len in [xs.len(), xs.len() - 7] {
            let mut out = vec![0f32; len];
            got(isa, &xs[..len], &mut out);
            for (&x, &y) in xs.iter().zip(&out) {
                assert_eq!(
                    y.to_bits(),
                    want(x).to_bits(),
                    "{name}({x:e} = {:#010x}) on {isa}: {y:e}, want {:e}",
                    x.to_bits(),
                    want(x)
                );
            }
        }
    }
    assert!(paths >= 1);
}

const EXPF_THRESHOLDS: [u32; 7] = [
    0x42ae_ac50, // |x| ≥ 87.33655: the special-case block
    0x42b1_7218, // 88.722839: overflow
    0x42cf_f1b5, // −103.972084: underflow to 0
    0x42d0_0000, // 104: the reduction's input clamp
    0x3f85_1592, // 1.5 ln 2: k by rounding
    0x3eb1_7218, // 0.5 ln 2: k = ±1
    0x3900_0000, // 2⁻¹⁴: 1 + x
];

#[test]
fn expf_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra = edges(&EXPF_THRESHOLDS);
    // The subnormal results: k from −127 down to −150, a dense sweep.
    extra.extend((0..20_000).map(|i| -87.0 - i as f32 * 0.000_85));
    check_all_paths(
        "expf",
        &inputs(&extra),
        math::expf,
        math::lanes::expf_slice_on,
    );
}

const ERFF_THRESHOLDS: [u32; 6] = [
    0x7f80_0000, // inf and NaN
    0x3f58_0000, // 0.84375
    0x3180_0000, // 2⁻²⁸
    0x3fa0_0000, // 1.25
    0x4036_db6d, // 1/0.35
    0x40c0_0000, // 6
];

#[test]
fn erff_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra = edges(&ERFF_THRESHOLDS);
    extra.extend((0..40_000).map(|i| -7.0 + i as f32 * 0.000_35));
    check_all_paths(
        "erff",
        &inputs(&extra),
        math::erff,
        math::lanes::erff_slice_on,
    );
}

const TANHF_THRESHOLDS: [u32; 8] = [
    0x4120_0000, // 10: 1 beyond
    0x3f0c_9f54, // log(3)/2
    0x3e82_c578, // log(5/3)/2: expm1f of 2|x| above, of −2|x| below
    0x0080_0000, // the smallest normal
    0x3eb1_7218, // 0.5 ln 2 (expm1f's k = ±1 from here, as an argument 2|x|)
    0x3f85_1592, // 1.5 ln 2 (k by rounding)
    0x3e31_7218, // half of 0.5 ln 2: the input whose 2|x| crosses it
    0x3f05_1592, // half of 1.5 ln 2
];

#[test]
fn tanhf_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra = edges(&TANHF_THRESHOLDS);
    extra.extend((0..60_000).map(|i| -12.0 + i as f32 * 0.000_4));
    extra.extend((0..20_000).map(|i| -0.6 + i as f32 * 0.000_06));
    check_all_paths(
        "tanhf",
        &inputs(&extra),
        math::tanhf,
        math::lanes::tanhf_slice_on,
    );
}

const LNF_THRESHOLDS: [u32; 5] = [
    0x0080_0000, // subnormals below: scaled by 2^25
    0x3f80_0000, // 1: exactly 0
    0x3f35_04f3, // √2/2: the reduction's boundary
    0x3fb5_04f3, // √2
    0x7f80_0000, // inf, NaN
];

#[test]
fn lnf_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra = edges(&LNF_THRESHOLDS);
    extra.extend((0..60_000).map(|i| i as f32 * 0.000_07));
    extra.extend((0..20_000).map(|i| 0.99 + i as f32 * 0.000_001));
    check_all_paths("lnf", &inputs(&extra), math::lnf, math::lanes::lnf_slice_on);
}

/// About a million f64 inputs: a regular sweep of the high words (with varied low words),
/// pseudo-random bit patterns, dense sweeps of the working ranges, and `extra`.
fn inputs64(thresholds_hi: &[u32], extra: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = (0..(1u64 << 32))
        .step_by(8191)
        .map(|h| f64::from_bits(h << 32 | (h.wrapping_mul(0x9e37_79b9) & 0xffff_ffff)))
        .collect();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..200_000 {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        v.push(f64::from_bits(s));
        v.push((s >> 11) as f64 / (1u64 << 53) as f64 * 1600.0 - 800.0);
    }
    for &t in thresholds_hi {
        let b = (t as u64) << 32;
        for d in [-2i64, -1, 0, 1, 2, 1 << 32, -(1 << 32)] {
            let x = f64::from_bits((b as i64 + d) as u64);
            v.extend([x, -x]);
        }
    }
    let specials = [
        0.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        709.782712893383973096,
        708.39641853226410622,
        745.13321910194110842,
        746.0,
    ];
    for x in specials {
        for y in [
            x,
            -x,
            f64::from_bits(x.to_bits() + 1),
            f64::from_bits(x.to_bits().saturating_sub(1)),
        ] {
            v.extend([y, -y]);
        }
    }
    v.extend_from_slice(extra);
    v
}

fn check_all_paths64(
    name: &str,
    xs: &[f64],
    want: fn(f64) -> f64,
    got: fn(Isa, &[f64], &mut [f64]),
) {
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        // Every remainder modulo 32 (the AVX-512 loops take four vectors of 8 lanes, then two,
        // then one, then a masked tail; AVX2's two of 4, one, a tail), and a longer output
        // whose extra elements must stay as they were.
        for len in xs.len() - 31..=xs.len() {
            let mut out = vec![0f64; len + 4];
            out[len..].fill(f64::from_bits(0x7ff8_dead_beef_0001));
            got(isa, &xs[..len], &mut out);
            for (i, y) in out[len..].iter().enumerate() {
                assert_eq!(
                    y.to_bits(),
                    0x7ff8_dead_beef_0001,
                    "{name} on {isa}, length {len}: wrote past the input at {i}"
                );
            }
            for (&x, &y) in xs.iter().zip(&out[..len]) {
                assert_eq!(
                    y.to_bits(),
                    want(x).to_bits(),
                    "{name}({x:e} = {:#018x}) on {isa}: {y:e}, want {:e}",
                    x.to_bits(),
                    want(x)
                );
            }
        }
    }
}

#[test]
fn exp_lanes_are_the_scalar_bits_on_every_path() {
    let extra: Vec<f64> = (0..100_000).map(|i| -746.0 + i as f64 * 0.014_63).collect();
    let xs = inputs64(
        &[0x4086_232b, 0x3ff0_a2b2, 0x3fd6_2e42, 0x3e30_0000],
        &extra,
    );
    check_all_paths64("exp", &xs, math::exp, math::lanes::exp_slice_on);
}

#[test]
fn sigmoid_lanes_are_the_scalar_bits_on_every_path() {
    let extra: Vec<f64> = (0..100_000).map(|i| -746.0 + i as f64 * 0.014_63).collect();
    let xs = inputs64(
        &[0x4086_232b, 0x3ff0_a2b2, 0x3fd6_2e42, 0x3e30_0000],
        &extra,
    );
    fn want(x: f64) -> f64 {
        1.0 / (1.0 + math::exp(-x))
    }
    check_all_paths64("sigmoid", &xs, want, math::lanes::sigmoid_slice_on);
}

#[test]
fn erf_lanes_are_the_scalar_bits_on_every_path() {
    let extra: Vec<f64> = (0..100_000).map(|i| -7.0 + i as f64 * 0.000_14).collect();
    let xs = inputs64(
        &[
            0x7ff0_0000,
            0x3feb_0000,
            0x3e30_0000,
            0x3ff4_0000,
            0x4006_db6d,
            0x4018_0000,
        ],
        &extra,
    );
    check_all_paths64("erf", &xs, math::erf, math::lanes::erf_slice_on);
}

/// GELU's exact form with the scalar `libm` erf, as `Tensor::gelu` defines it.
fn gelu32(x: f32) -> f32 {
    x * 0.5 * (1.0 + math::erff(x * core::f32::consts::FRAC_1_SQRT_2))
}
fn gelu64(x: f64) -> f64 {
    x * 0.5 * (1.0 + math::erf(x * core::f64::consts::FRAC_1_SQRT_2))
}
/// Its derivative, as `Tensor::gelu_derivative` defines it: f64 ...
fn gelu_grad64(x: f64) -> f64 {
    use core::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI};
    let cdf = 0.5 * (1.0 + math::erf(x * FRAC_1_SQRT_2));
    cdf + x * (math::exp(-0.5 * x * x) * (0.5 * FRAC_2_SQRT_PI) * FRAC_1_SQRT_2)
}
/// ... and f32, written out here from PyTorch's `GeluBackward` for `float` (not through
/// `math::gelu_gradf`), with the scalar `libm` erff and expf.
fn gelu_grad32(x: f32) -> f32 {
    let beta = (core::f64::consts::FRAC_2_SQRT_PI * core::f64::consts::FRAC_1_SQRT_2 * 0.5) as f32;
    let cdf = 0.5f32 * (1.0 + math::erff(x * core::f32::consts::FRAC_1_SQRT_2));
    let pdf = beta * math::expf(x * x * -0.5);
    cdf + x * pdf
}

/// GELU's inputs in blocks that take each of the kernels' three forms: dense sweeps inside
/// the small (|x/√2| < 0.84375) and mid (< 1.25) ranges, sweeps across both thresholds (blocks
/// straddling them), one outlier per block among small values, and the erf thresholds scaled
/// by √2 with their neighbours.
fn gelu_extra() -> Vec<f32> {
    let s2 = core::f32::consts::SQRT_2;
    let mut v: Vec<f32> = (0..200_000).map(|i| -1.19 + i as f32 * 1.19e-5).collect();
    v.extend((0..100_000).map(|i| 1.193 + i as f32 * 5.7e-6));
    v.extend((0..100_000).map(|i| -1.1 - i as f32 * 7.0e-6));
    v.extend((0..200_000).map(|i| -9.0 + i as f32 * 9.0e-5));
    v.extend((0..64_000).map(|i| match i % 16 {
        7 => [1.5f32, -40.0, f32::NAN, f32::INFINITY][(i / 16) % 4],
        _ => (i as f32 * 0.37).sin() * 0.5,
    }));
    // The thresholds of the derivative's exp (of −x²/2) in the small and mid forms: k = −1
    // from x²/2 > 0.3466 (|x| near 0.8326), k = −2 from 1.0397 (|x| near 1.4420), and the tiny
    // form below x²/2 = 2⁻²⁸ (|x| near 2^−13.5), every f32 nearby.
    for c in [0.832_554_6f32, 1.442_027_6, 8.631_674_6e-5] {
        for d in -4000i32..=4000 {
            let y = f32::from_bits((c.to_bits() as i32 + d) as u32);
            v.extend([y, -y]);
        }
    }
    for t in ERFF_THRESHOLDS {
        let x = f32::from_bits(t) * s2;
        for d in -3i32..=3 {
            let y = f32::from_bits((x.to_bits() as i32 + d) as u32);
            v.extend([y, -y]);
        }
    }
    v
}

#[test]
fn gelu_kernels_are_the_scalar_bits_on_every_path() {
    let xs = inputs(&gelu_extra());
    assert!(xs.len() > 1_000_000);
    check_all_paths("gelu", &xs, gelu32, math::lanes::gelu_f32_slice_on);
    check_all_paths(
        "gelu'",
        &xs,
        gelu_grad32,
        math::lanes::gelu_grad_f32_slice_on,
    );
    // The fused pair: each half the bits of its scalar function (both lengths: the
    // remainder loop too).
    check_all_paths("gelu (pair)", &xs, gelu32, |isa, x, out| {
        let mut d = vec![0f32; x.len()];
        math::lanes::gelu_and_grad_f32_slice_on(isa, x, out, &mut d[..]);
    });
    check_all_paths("gelu' (pair)", &xs, gelu_grad32, |isa, x, out| {
        let mut y = vec![0f32; x.len()];
        math::lanes::gelu_and_grad_f32_slice_on(isa, x, &mut y[..], out);
    });
    let mut x64: Vec<f64> = gelu_extra().iter().map(|&x| x as f64).collect();
    x64.extend((0..200_000).map(|i| -1.19 + i as f64 * 1.19e-5 + 1e-12));
    let xs64 = inputs64(&[0x3feb_0000, 0x3e30_0000, 0x3ff4_0000, 0x4018_0000], &x64);
    check_all_paths64("gelu", &xs64, gelu64, math::lanes::gelu_f64_slice_on);
    check_all_paths64(
        "gelu'",
        &xs64,
        gelu_grad64,
        math::lanes::gelu_grad_f64_slice_on,
    );
}

#[test]
fn tanh_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra: Vec<f64> = (0..100_000).map(|i| -22.0 + i as f64 * 0.000_44).collect();
    extra.extend((0..50_000).map(|i| -0.6 + i as f64 * 0.000_024));
    let xs = inputs64(
        &[
            0x4034_0000, // 20: 1 beyond
            0x3fe1_93ea, // log(3)/2
            0x3fd0_58ae, // log(5/3)/2
            0x0010_0000, // the smallest normal
            0x3fd6_2e42, // 0.5 ln 2 and 1.5 ln 2 (expm1's k = ±1), and their halves
            0x3ff0_a2b2,
            0x3fc6_2e42,
            0x3fe0_a2b2,
            0x3c90_0000, // 2⁻⁵⁴ (expm1 returns its argument), and its half
            0x3c80_0000,
            0x4043_687a, // 56 ln 2 (k > 56 beyond), and its half
            0x4033_687a,
        ],
        &extra,
    );
    check_all_paths64("tanh", &xs, math::tanh, math::lanes::tanh_slice_on);
}

#[test]
fn ln_lanes_are_the_scalar_bits_on_every_path() {
    let mut extra: Vec<f64> = (0..100_000).map(|i| i as f64 * 0.000_07).collect();
    extra.extend((0..50_000).map(|i| 0.999 + i as f64 * 0.000_000_04));
    let xs = inputs64(
        &[
            0x0010_0000,
            0x3ff0_0000,
            0x3fe6_a09e,
            0x3ff6_a09e,
            0x7ff0_0000,
        ],
        &extra,
    );
    check_all_paths64("ln", &xs, math::ln, math::lanes::ln_slice_on);
}

/// Every f32 input through `lanes` (the path in use) against the scalar function.
fn exhaustive(name: &str, want: fn(f32) -> f32, got: fn(Isa, &[f32], &mut [f32])) {
    let mut xs = vec![0f32; 1 << 24];
    let mut out = vec![0f32; 1 << 24];
    for hi in 0u32..256 {
        for (i, x) in xs.iter_mut().enumerate() {
            *x = f32::from_bits(hi << 24 | i as u32);
        }
        got(Isa::best(), &xs, &mut out);
        for (&x, &y) in xs.iter().zip(&out) {
            assert_eq!(
                y.to_bits(),
                want(x).to_bits(),
                "{name}({:#010x})",
                x.to_bits()
            );
        }
    }
}

#[test]
#[ignore = "exhaustive: 2^32 inputs, about a minute in release"]
fn expf_lanes_are_the_scalar_bits_for_every_f32() {
    exhaustive("expf", math::expf, math::lanes::expf_slice_on);
}

#[test]
#[ignore = "exhaustive: 2^32 inputs, about a minute in release"]
fn erff_lanes_are_the_scalar_bits_for_every_f32() {
    exhaustive("erff", math::erff, math::lanes::erff_slice_on);
}

#[test]
#[ignore = "exhaustive: 2^32 inputs, about a minute in release"]
fn tanhf_lanes_are_the_scalar_bits_for_every_f32() {
    exhaustive("tanhf", math::tanhf, math::lanes::tanhf_slice_on);
}

#[test]
#[ignore = "exhaustive: 2^32 inputs, about a minute in release"]
fn lnf_lanes_are_the_scalar_bits_for_every_f32() {
    exhaustive("lnf", math::lnf, math::lanes::lnf_slice_on);
}

/// The ops that run `lanes` (exp, tanh, log, sigmoid, gelu and gelu's derivative, f32 and f64): the scalar
/// definition's bits element by element, dense or through a view, small (on the calling
/// thread) or large (split over the pool), the same at 1, 2, 3 and 8 threads.
#[test]
fn vectorised_ops_are_the_scalar_bits_at_every_thread_count() {
    use lockstep_tensor::Tensor;
    use lockstep_tensor::threads::with_num_threads;
    use std::f64::consts::{FRAC_1_SQRT_2, FRAC_2_SQRT_PI};
    let n = 300_001; // above the serial limit, not a multiple of any width or chunk
    let xs: Vec<f32> = (0..n)
        .map(|i| {
            let t = (i as f32 * 0.618_034).fract();
            (t - 0.5) * if i % 7 == 0 { 240.0 } else { 12.0 }
        })
        .chain([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-40])
        .collect();
    let x32 = Tensor::from_vec(xs.clone(), &[xs.len()]).unwrap();
    let x64 = x32.to_dtype(lockstep_tensor::DType::F64);
    // A strided view (the transpose of 1000 × 3): the element-by-element path.
    let xt = x32
        .narrow(0, 0, 3000)
        .unwrap()
        .reshape(&[1000, 3])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    assert!(!xt.is_contiguous());
    let gelu_grad = |x: f64| {
        let cdf = 0.5 * (1.0 + math::erf(x * FRAC_1_SQRT_2));
        cdf + x * (math::exp(-0.5 * x * x) * (0.5 * FRAC_2_SQRT_PI) * FRAC_1_SQRT_2)
    };
    type Op = fn(&Tensor) -> lockstep_tensor::Result<Tensor>;
    type Case = (&'static str, Op, fn(f32) -> f32, fn(f64) -> f64);
    let cases: [Case; 6] = [
        ("exp", |t| t.exp(), math::expf, math::exp),
        ("tanh", |t| t.tanh(), math::tanhf, math::tanh),
        ("log", |t| t.log(), math::lnf, math::ln),
        ("sigmoid", |t| t.sigmoid(), math::sigmoidf, math::sigmoid),
        (
            "gelu",
            |t| t.gelu(),
            |x| x * 0.5 * (1.0 + math::erff(x * core::f32::consts::FRAC_1_SQRT_2)),
            |x| x * 0.5 * (1.0 + math::erf(x * FRAC_1_SQRT_2)),
        ),
        (
            "gelu_derivative",
            |t| t.gelu_derivative(false),
            |_| 0.0,
            |_| 0.0,
        ),
    ];
    for (name, op, f32_fn, f64_fn) in cases {
        let (w32, w64): (Vec<u32>, Vec<u64>) = if name == "gelu_derivative" {
            (
                xs.iter().map(|&x| gelu_grad32(x).to_bits()).collect(),
                xs.iter().map(|&x| gelu_grad(x as f64).to_bits()).collect(),
            )
        } else {
            (
                xs.iter().map(|&x| f32_fn(x).to_bits()).collect(),
                xs.iter().map(|&x| f64_fn(x as f64).to_bits()).collect(),
            )
        };
        for threads in [1, 2, 3, 8] {
            let (g32, g64, small, strided) = with_num_threads(threads, || {
                let g32 = op(&x32).unwrap().to_vec::<f32>().unwrap();
                let g64 = op(&x64).unwrap().to_vec::<f64>().unwrap();
                let small = op(&x32.narrow(0, 5, 1000).unwrap())
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap();
                let strided = op(&xt).unwrap().to_vec::<f32>().unwrap();
                (g32, g64, small, strided)
            });
            let b32: Vec<u32> = g32.iter().map(|v| v.to_bits()).collect();
            let b64: Vec<u64> = g64.iter().map(|v| v.to_bits()).collect();
            assert!(b32 == w32, "{name} f32 at {threads} threads");
            assert!(b64 == w64, "{name} f64 at {threads} threads");
            let bs: Vec<u32> = small.iter().map(|v| v.to_bits()).collect();
            assert!(
                bs[..] == w32[5..1005],
                "{name} on a slice at {threads} threads"
            );
            for (k, v) in strided.iter().enumerate() {
                let (r, c) = (k / 1000, k % 1000);
                assert_eq!(
                    v.to_bits(),
                    w32[c * 3 + r],
                    "{name} through a view at {threads} threads"
                );
            }
        }
    }
}

/// `Tensor::gelu_with_derivative` gives the bits of `gelu` and `gelu_derivative(false)`, f32
/// (dense: small and split over the pool; a view: the two-op path) and f64, at 1, 2, 3 and 8
/// threads.
#[test]
fn gelu_with_derivative_is_the_two_ops_at_every_thread_count() {
    use lockstep_tensor::threads::with_num_threads;
    use lockstep_tensor::{DType, Tensor};
    let n = 200_003;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as f32 * 0.731).sin()) * if i % 5 == 0 { 9.0 } else { 1.3 })
        .collect();
    let xt = Tensor::from_vec(x, &[n]).unwrap();
    let cases = [
        xt.clone(),
        xt.narrow(0, 5, 1001).unwrap(),
        xt.narrow(0, 0, 3000)
            .unwrap()
            .reshape(&[1000, 3])
            .unwrap()
            .transpose(0, 1)
            .unwrap(),
        xt.to_dtype(DType::F64),
    ];
    let bits = |t: &Tensor| -> Vec<u64> {
        let v = t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    // Not a float: the error `gelu` gives.
    let ints = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert_eq!(
        ints.gelu_with_derivative().unwrap_err().to_string(),
        ints.gelu().unwrap_err().to_string()
    );
    for x in &cases {
        let (y, d) = (x.gelu().unwrap(), x.gelu_derivative(false).unwrap());
        for threads in [1, 2, 3, 8] {
            let (gy, gd) = with_num_threads(threads, || x.gelu_with_derivative().unwrap());
            assert_eq!(gy.shape(), x.shape());
            assert_eq!(gd.shape(), x.shape());
            assert!(
                bits(&gy) == bits(&y),
                "gelu of {:?} at {threads} threads",
                x.shape()
            );
            assert!(
                bits(&gd) == bits(&d),
                "gelu' of {:?} at {threads} threads",
                x.shape()
            );
        }
    }
}

/// `Tensor::gelu_backward` (the gradient times GELU's derivative in one pass) gives the bits of
/// `grad.mul(&x.gelu_derivative(false))`, f32 and f64, dense (small and split over the pool)
/// and through a view (the two-op path), at 1, 2, 3 and 8 threads.
#[test]
fn gelu_backward_is_grad_times_the_derivative_at_every_thread_count() {
    use lockstep_tensor::Tensor;
    use lockstep_tensor::threads::with_num_threads;
    let n = 200_003;
    let x: Vec<f32> = (0..n).map(|i| ((i as f32 * 0.731).sin()) * 3.0).collect();
    let g: Vec<f32> = (0..n).map(|i| ((i as f32 * 0.173).cos()) * 0.01).collect();
    let (xt, gt) = (
        Tensor::from_vec(x, &[n]).unwrap(),
        Tensor::from_vec(g, &[n]).unwrap(),
    );
    let cases = [
        (xt.clone(), gt.clone()),
        (xt.narrow(0, 3, 900).unwrap(), gt.narrow(0, 7, 900).unwrap()),
        (
            xt.to_dtype(lockstep_tensor::DType::F64),
            gt.to_dtype(lockstep_tensor::DType::F64),
        ),
        (
            xt.narrow(0, 0, 3000)
                .unwrap()
                .reshape(&[1000, 3])
                .unwrap()
                .transpose(0, 1)
                .unwrap(),
            gt.narrow(0, 0, 3000).unwrap().reshape(&[3, 1000]).unwrap(),
        ),
    ];
    for (x, g) in &cases {
        let want = g.mul(&x.gelu_derivative(false).unwrap()).unwrap();
        let want = want
            .to_dtype(lockstep_tensor::DType::F64)
            .to_vec::<f64>()
            .unwrap();
        for threads in [1, 2, 3, 8] {
            let got = with_num_threads(threads, || Tensor::gelu_backward(g, x).unwrap());
            let got = got
                .to_dtype(lockstep_tensor::DType::F64)
                .to_vec::<f64>()
                .unwrap();
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same && got.len() == want.len(),
                "{:?} at {threads} threads",
                x.shape()
            );
        }
    }
}
