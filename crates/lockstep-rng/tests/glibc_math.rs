//! lockstep's ports of glibc's `log`, `sin`, `cos` (`compat::glibc_math`): the scalar and the
//! vector forms agree everywhere, and on Linux x86-64 glibc with FMA (where the platform's
//! functions are the builds that were ported) they equal the platform's bits. The long check
//! (over 10^9 inputs) is `cargo run --release -p lockstep-rng --example check_glibc_math 110`.

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

#[test]
fn equal_to_the_platform_on_glibc_x86_64_with_fma() {
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
