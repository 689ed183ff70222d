//! lockstep's ports of glibc's `log`, `sin`, `cos`, `pow`, `exp` (`compat::glibc_math`): the scalar and the
//! vector forms agree everywhere, and on Linux x86-64 glibc with FMA (where the platform's
//! functions are the builds that were ported) they equal the platform's bits. The long check
//! (over 10^9 inputs) is `cargo run --release -p lockstep-rng --example check_glibc_math 110 log,sin,cos`; for pow and exp `... check_glibc_math 250 pow` and `... 360 exp`.

mod common;

use lockstep_rng::compat::glibc_math as gm;
use lockstep_rng::compat::torch;
use lockstep_rng::isa::{Isa, set_isa};
use lockstep_rng::{Generator, isa};

/// Reproducible inputs (splitmix64), independent of the crate's engines.
fn inputs(seed: u64, n: usize, f: impl Fn(u64) -> f64) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            f(z ^ (z >> 31))
        })
        .collect()
}

fn unit(z: u64) -> f64 {
    (z >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

fn all_inputs() -> Vec<f64> {
    let mut v = inputs(1, 20_000, |z| 1.0 - unit(z));
    v.extend(inputs(2, 20_000, |z| 1.0 + (unit(z) - 0.5) * 0.25));
    v.extend(inputs(3, 20_000, |z| std::f64::consts::TAU * unit(z)));
    v.extend(inputs(4, 20_000, |z| (unit(z) - 0.5) * 2e8));
    v.extend(inputs(5, 20_000, f64::from_bits));
    v.extend([
        0.0,
        -0.0,
        1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        1e300,
    ]);
    v
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Whether the platform's `log`/`sin`/`cos` are the glibc FMA builds the ports reproduce.
fn platform_is_ported_glibc() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    {
        std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
    {
        false
    }
}

#[test]
fn scalar_and_slice_forms_agree_on_every_isa() {
    let _turn = common::isa_turn();
    let x = all_inputs();
    let n = x.len();
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        let (mut l, mut s, mut c) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        gm::log_all(&x, &mut l);
        gm::sin_cos_all(&x, &mut s, &mut c);
        for i in 0..n {
            assert!(same(l[i], gm::log(x[i])), "{isa} log({:e})", x[i]);
            assert!(same(s[i], gm::sin(x[i])), "{isa} sin({:e})", x[i]);
            assert!(same(c[i], gm::cos(x[i])), "{isa} cos({:e})", x[i]);
        }
    }
    let _ = set_isa(None);
}

/// The edges of every branch of the ports: the `log` near-one interval and the normal range's
/// limits, `sin`/`cos`'s argument thresholds (the small-argument returns, `do_sin`/`do_cos`,
/// the π/2 fold, the reduction, the scalar fallback) and the Taylor/table switch at 0.126,
/// multiples of π/2 and of 1/128 (table knots), each ±64 ulp and both signs.
fn edge_inputs() -> Vec<f64> {
    let mut centres: Vec<f64> = [
        0x3fee_0000_0000_0000u64,
        0x3ff1_0900_0000_0000,
        0x0010_0000_0000_0000,
        0x7fef_ffff_ffff_ffff,
        0x3e50_0000_0000_0000,
        0x3e40_0000_0000_0000,
        0x3feb_6000_0000_0000,
        0x4003_68fd_0000_0000,
        0x4199_21fb_0000_0000,
    ]
    .iter()
    .map(|&b| f64::from_bits(b))
    .collect();
    centres.extend([0.126, 1.0, 0.5, 2.0]);
    centres.extend((1..=4000).map(|k| k as f64 * std::f64::consts::FRAC_PI_2));
    centres.extend((1..=110).map(|k| k as f64 / 128.0));
    centres.extend((-1074..1024).map(|e| 2f64.powi(e)));
    let mut v = Vec::new();
    for c in centres {
        for d in -64i64..=64 {
            let x = f64::from_bits((c.to_bits() as i64 + d) as u64);
            v.extend([x, -x]);
        }
    }
    v
}

/// Millions of random and edge inputs: the four-lane (AVX2) and eight-lane (AVX-512) forms
/// give the scalar ports' bits on every path the CPU has, at every position in a vector
/// (lengths not a multiple of the lane count, so the scalar tails run too).
#[test]
fn vector_forms_equal_the_scalar_ports_on_millions_of_inputs() {
    let _turn = common::isa_turn();
    let mut x = edge_inputs();
    x.extend(inputs(11, 600_000, f64::from_bits));
    x.extend(inputs(12, 400_000, |z| 1.0 - unit(z)));
    x.extend(inputs(13, 400_000, |z| std::f64::consts::TAU * unit(z)));
    x.extend(inputs(14, 200_000, |z| (unit(z) - 0.5) * 4e8));
    x.extend(inputs(15, 200_000, |z| 1.0 + (unit(z) - 0.5) * 0.25));
    x.push(0.3);
    assert!(x.len() > 2_000_000 && !x.len().is_multiple_of(8));
    let n = x.len();
    let want_l: Vec<f64> = x.iter().map(|&v| gm::log(v)).collect();
    let want_s: Vec<f64> = x.iter().map(|&v| gm::sin(v)).collect();
    let want_c: Vec<f64> = x.iter().map(|&v| gm::cos(v)).collect();
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        for off in [0, 3] {
            let (mut l, mut s, mut c) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            gm::log_all(&x[off..], &mut l[off..]);
            gm::sin_cos_all(&x[off..], &mut s[off..], &mut c[off..]);
            for i in off..n {
                assert!(same(l[i], want_l[i]), "{isa} log({:e})", x[i]);
                assert!(same(s[i], want_s[i]), "{isa} sin({:e})", x[i]);
                assert!(same(c[i], want_c[i]), "{isa} cos({:e})", x[i]);
            }
        }
    }
    let _ = set_isa(None);
}

/// `randn` f64 gives the portable path's bits on every path, for lengths around the 16-block
/// and chunk boundaries (the redrawn last block included), with a mean and std.
#[test]
fn torch_normal_f64_same_bits_on_every_isa() {
    let _turn = common::isa_turn();
    for n in [16, 17, 31, 48, 2047, 2048 + 5, 100_003] {
        let run = |isa: Isa| {
            let _ = set_isa(Some(isa)).unwrap();
            let mut g = Generator::with_seed(n as u64);
            let mut v = vec![0f64; n];
            torch::normal_(&mut g, &mut v, 0.25, 3.0).unwrap();
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        };
        let want = run(Isa::Portable);
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            assert_eq!(run(isa), want, "{isa} n {n}");
        }
    }
    let _ = set_isa(None);
}

#[test]
fn equal_to_the_platform_on_glibc_x86_64_with_fma() {
    let _turn = common::isa_turn();
    if !platform_is_ported_glibc() {
        eprintln!("skipped: the platform's libm is not glibc's x86-64 FMA build");
        return;
    }
    for &x in &all_inputs() {
        assert!(same(gm::log(x), x.ln()), "log({x:e})");
        assert!(same(gm::sin(x), x.sin()), "sin({x:e})");
        assert!(same(gm::cos(x), x.cos()), "cos({x:e})");
    }
}

/// `randn` f64 (the 16-block path) equals real PyTorch's bits on every instruction-set path
/// and every platform (the values come from PyTorch 2.15 on glibc 2.36 x86-64 with FMA,
/// `tools/golden_randn_f64.py`).
#[test]
fn torch_normal_f64_matches_pytorch_on_every_isa() {
    let _turn = common::isa_turn();
    use sha2::{Digest, Sha256};
    let golden: serde_json::Value =
        serde_json::from_str(include_str!("golden/torch_randn_f64.json")).unwrap();
    for isa in isa::Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        for case in golden["cases"].as_array().unwrap() {
            let seed = case["seed"].as_u64().unwrap();
            let n = case["n"].as_u64().unwrap() as usize;
            let (mean, std) = (
                case["mean"].as_f64().unwrap(),
                case["std"].as_f64().unwrap(),
            );
            let mut g = Generator::with_seed(seed);
            let mut v = vec![0f64; n];
            torch::normal_(&mut g, &mut v, mean, std).unwrap();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let sha: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                v[0],
                case["first"][0].as_f64().unwrap(),
                "{isa} seed {seed}"
            );
            assert_eq!(
                v[n - 1],
                case["last"].as_f64().unwrap(),
                "{isa} seed {seed}"
            );
            assert_eq!(
                sha,
                case["sha256"].as_str().unwrap(),
                "{isa} seed {seed} n {n}"
            );
        }
    }
    let _ = set_isa(None);
}

/// `pow` bases: the samplers' `1 - u`, `(0, 1024]`, any positive bits, negatives, subnormals
/// and specials.
fn pow_bases() -> Vec<f64> {
    let mut v = inputs(11, 200, |z| 1.0 - unit(z));
    v.extend(inputs(12, 100, |z| 1024.0 * (1.0 - unit(z))));
    v.extend(inputs(13, 100, |z| f64::from_bits(z >> 1)));
    v.extend(inputs(14, 60, |z| -(0.25 + 8.0 * unit(z))));
    v.extend(inputs(15, 40, |z| f64::from_bits(z >> 12)));
    v.extend(inputs(16, 40, f64::from_bits));
    v.extend(specials());
    v
}

fn specials() -> Vec<f64> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        -2.0,
        0.5,
        -3.0,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        -f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0x7ff0_0000_0000_0001),
        709.78,
        -745.2,
        1e-20,
    ]
}

/// `pow` exponents: the samplers' `1/shape`, small integers, moderate and special values.
fn pow_exponents() -> Vec<f64> {
    let mut v = inputs(21, 12, |z| 1.0 / (0.01 + 0.99 * unit(z)));
    v.extend([
        3.0,
        -3.0,
        2.0,
        -1.0,
        0.5,
        -0.5,
        7.5,
        1e300,
        2f64.powi(-66),
        2f64.powi(63),
    ]);
    v.extend(inputs(22, 6, |z| 40.0 * unit(z) - 20.0));
    v.extend(specials());
    v
}

fn exp_inputs() -> Vec<f64> {
    let mut v = inputs(31, 1000, |z| -746.0 + 1456.0 * unit(z));
    v.extend(inputs(32, 500, |z| 2.0 * unit(z) - 1.0));
    v.extend(inputs(33, 300, |z| 704.0 + 6.0 * unit(z)));
    v.extend(inputs(34, 300, |z| -746.0 + 46.0 * unit(z)));
    v.extend(inputs(35, 200, f64::from_bits));
    v.extend(specials());
    v.extend([
        512.0,
        -512.0,
        2f64.powi(-54),
        -(2f64.powi(-55)),
        1024.0,
        -1024.0,
    ]);
    v
}

#[test]
fn pow_exp_scalar_and_slice_forms_agree_on_every_isa() {
    let _turn = common::isa_turn();
    let (xs, ys, es) = (pow_bases(), pow_exponents(), exp_inputs());
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        let mut out = vec![0.0; xs.len()];
        for &y in &ys {
            gm::pow_all(&xs, y, &mut out);
            for (i, &x) in xs.iter().enumerate() {
                assert!(same(out[i], gm::pow(x, y)), "{isa} pow({x:e}, {y:e})");
            }
        }
        let mut out = vec![0.0; es.len()];
        gm::exp_all(&es, &mut out);
        for (i, &x) in es.iter().enumerate() {
            assert!(same(out[i], gm::exp(x)), "{isa} exp({x:e})");
        }
    }
    let _ = set_isa(None);
}

#[test]
fn pow_exp_equal_to_the_platform_on_glibc_x86_64_with_fma() {
    let _turn = common::isa_turn();
    if !platform_is_ported_glibc() {
        eprintln!("skipped: the platform's libm is not glibc's x86-64 FMA build");
        return;
    }
    for &y in &pow_exponents() {
        for &x in &pow_bases() {
            assert!(same(gm::pow(x, y), x.powf(y)), "pow({x:e}, {y:e})");
        }
    }
    for &x in &exp_inputs() {
        assert!(same(gm::exp(x), x.exp()), "exp({x:e})");
    }
}

/// `pow`/`exp` equal CPython's `math.pow`/`math.exp` (glibc 2.36 x86-64 FMA) on every
/// instruction-set path and every platform (`tools/golden_glibc_pow_exp.py`).
#[test]
fn pow_exp_match_cpython_golden_on_every_isa() {
    let _turn = common::isa_turn();
    let golden: serde_json::Value =
        serde_json::from_str(include_str!("golden/glibc_pow_exp.json")).unwrap();
    let hex = |v: &serde_json::Value| {
        f64::from_bits(u64::from_str_radix(v.as_str().unwrap(), 16).unwrap())
    };
    let groups = golden["pow_groups"].as_array().unwrap();
    let exps = golden["exp"].as_array().unwrap();
    assert!(groups.len() > 100 && exps.len() > 2000);
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        for g in groups {
            let y = hex(&g["y"]);
            let x: Vec<f64> = g["x"].as_array().unwrap().iter().map(hex).collect();
            let r: Vec<f64> = g["r"].as_array().unwrap().iter().map(hex).collect();
            let mut out = vec![0.0; x.len()];
            gm::pow_all(&x, y, &mut out);
            for i in 0..x.len() {
                assert_eq!(
                    out[i].to_bits(),
                    r[i].to_bits(),
                    "{isa} pow_all({:e}, {y:e})",
                    x[i]
                );
                assert_eq!(
                    gm::pow(x[i], y).to_bits(),
                    r[i].to_bits(),
                    "pow({:e}, {y:e})",
                    x[i]
                );
            }
        }
        let x: Vec<f64> = exps.iter().map(|p| hex(&p[0])).collect();
        let mut out = vec![0.0; x.len()];
        gm::exp_all(&x, &mut out);
        for (i, p) in exps.iter().enumerate() {
            let r = hex(&p[1]);
            assert_eq!(out[i].to_bits(), r.to_bits(), "{isa} exp_all({:e})", x[i]);
            assert_eq!(gm::exp(x[i]).to_bits(), r.to_bits(), "exp({:e})", x[i]);
        }
    }
    let _ = set_isa(None);
}
