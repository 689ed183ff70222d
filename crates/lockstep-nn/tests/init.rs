//! `lockstep_nn::init` against real PyTorch (`tests/golden/nn/init.json`, from
//! `tools/golden_init.py`): each init on a parameter gives PyTorch's bits, consumes as many
//! draws (the next uniform draw matches), from the default or a given generator; the write
//! reaches the parameter; bad input is an error where PyTorch raises.

use lockstep_nn::{Var, init};
use lockstep_rng::Generator;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use std::sync::Mutex;

/// The default generator is process-global: tests that seed it run one at a time.
static DEFAULT_GEN: Mutex<()> = Mutex::new(());

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/nn/init.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn bits(t: &Tensor) -> Vec<i64> {
    match t.dtype() {
        DType::F32 => t
            .to_f64_vec()
            .iter()
            .map(|&v| i64::from((v as f32).to_bits() as i32))
            .collect(),
        _ => t.to_f64_vec().iter().map(|&v| v.to_bits() as i64).collect(),
    }
}

fn f(kw: &Value, k: &str) -> f64 {
    kw[k].as_f64().unwrap()
}

fn mode(kw: &Value) -> init::FanMode {
    kw["mode"].as_str().unwrap().parse().unwrap()
}

fn run(name: &str, w: &Var, kw: &Value, g: Option<&mut Generator>) -> lockstep_nn::Result<()> {
    match name {
        "uniform_" => init::uniform_(w, f(kw, "a"), f(kw, "b"), g),
        "normal_" => init::normal_(w, f(kw, "mean"), f(kw, "std"), g),
        "constant_" => init::constant_(w, f(kw, "val")),
        "ones_" => init::ones_(w),
        "zeros_" => init::zeros_(w),
        "eye_" => init::eye_(w),
        "xavier_uniform_" => init::xavier_uniform_(w, f(kw, "gain"), g),
        "xavier_normal_" => init::xavier_normal_(w, f(kw, "gain"), g),
        "kaiming_uniform_" => init::kaiming_uniform_(
            w,
            f(kw, "a"),
            mode(kw),
            kw["nonlinearity"].as_str().unwrap(),
            g,
        ),
        "kaiming_normal_" => init::kaiming_normal_(
            w,
            f(kw, "a"),
            mode(kw),
            kw["nonlinearity"].as_str().unwrap(),
            g,
        ),
        "trunc_normal_" => {
            init::trunc_normal_(w, f(kw, "mean"), f(kw, "std"), f(kw, "a"), f(kw, "b"), g)
        }
        other => panic!("unknown init {other}"),
    }
}

#[test]
fn every_init_matches_pytorch_bits_and_draw_count() {
    let _lock = DEFAULT_GEN.lock().unwrap_or_else(|e| e.into_inner());
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 160);
    for c in cases {
        let name = c["fn"].as_str().unwrap();
        let shape: Vec<usize> = c["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let dtype = if c["dtype"] == "f32" {
            DType::F32
        } else {
            DType::F64
        };
        let seed = c["seed"].as_u64().unwrap();
        let w = Var::new(Tensor::full(&shape, 9.0, dtype).unwrap(), true);
        let before = w.version();
        let after_uniform = if c["explicit_generator"].as_bool().unwrap() {
            let mut rng = Generator::with_seed(seed);
            run(name, &w, &c["kwargs"], Some(&mut rng)).unwrap();
            let mut u = Tensor::zeros(&[1], DType::F64).unwrap();
            u.uniform_(0.0, 1.0, Some(&mut rng)).unwrap();
            u
        } else {
            lockstep_rng::default_generator().manual_seed(seed);
            run(name, &w, &c["kwargs"], None).unwrap();
            let mut u = Tensor::zeros(&[1], DType::F64).unwrap();
            u.uniform_(0.0, 1.0, None).unwrap();
            u
        };
        let want: Vec<i64> = c["bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(bits(&w.data()), want, "{c}");
        assert_eq!(
            bits(&after_uniform)[0],
            c["next_uniform_bits"].as_i64().unwrap(),
            "draw count differs: {c}"
        );
        assert!(w.requires_grad() && w.is_leaf(), "{name}");
        if !shape.contains(&0) {
            assert!(
                w.version() > before,
                "{name}: the write must bump the version"
            );
        }
    }
}

#[test]
fn calculate_gain_matches_pytorch() {
    for c in golden()["gains"].as_array().unwrap() {
        let got =
            init::calculate_gain(c["nonlinearity"].as_str().unwrap(), c["param"].as_f64()).unwrap();
        let want = c["gain"].as_str().unwrap();
        assert_eq!(format!("{got:?}"), format!("{:?}", parse_hex(want)), "{c}");
    }
}

/// Python's `float.hex()` form `[-]0x1.<hex>p<exp>` (or `0x0.0p+0`).
fn parse_hex(s: &str) -> f64 {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let s = s.strip_prefix("0x").unwrap();
    let (mant, exp) = s.split_once('p').unwrap();
    let (int, frac) = mant.split_once('.').unwrap();
    let mut v = u64::from_str_radix(int, 16).unwrap() as f64;
    let mut scale = 1.0 / 16.0;
    for ch in frac.chars() {
        v += f64::from(ch.to_digit(16).unwrap()) * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp.parse().unwrap());
    if neg { -v } else { v }
}

#[test]
fn bad_input_is_an_error_where_pytorch_raises() {
    let g = golden();
    for c in g["raises"].as_array().unwrap() {
        assert!(c["raises"].as_bool().unwrap(), "{c}");
    }
    let v = |shape: &[usize]| Var::new(Tensor::zeros(shape, DType::F32).unwrap(), true);
    let mut rng = Generator::with_seed(0);
    let e = init::eye_(&v(&[3])).unwrap_err().to_string();
    assert!(e.contains("eye_") && e.contains("2 dimensions"), "{e}");
    assert!(init::eye_(&v(&[2, 2, 2])).is_err());
    let e = init::xavier_uniform_(&v(&[5]), 1.0, Some(&mut rng))
        .unwrap_err()
        .to_string();
    assert!(e.contains("fewer than 2 dimensions"), "{e}");
    assert!(init::xavier_normal_(&v(&[]), 1.0, Some(&mut rng)).is_err());
    assert!(
        init::kaiming_uniform_(
            &v(&[5]),
            0.0,
            init::FanMode::FanIn,
            "leaky_relu",
            Some(&mut rng)
        )
        .is_err()
    );
    let e = init::kaiming_normal_(
        &v(&[2, 2]),
        0.0,
        init::FanMode::FanIn,
        "swish",
        Some(&mut rng),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("swish"), "{e}");
    assert!(init::trunc_normal_(&v(&[4, 4]), 0.0, 1.0, 2.0, -2.0, Some(&mut rng)).is_err());
    assert!(init::calculate_gain("swish", None).is_err());
    assert!("fan_sideways".parse::<init::FanMode>().is_err());
    // PyTorch divides by zero for xavier on a (0, 0) weight.
    assert!(init::xavier_uniform_(&v(&[0, 0]), 1.0, Some(&mut rng)).is_err());
    // Integer tensors cannot be drawn into.
    let i = Var::constant(Tensor::zeros(&[2, 2], DType::I64).unwrap());
    assert!(init::trunc_normal_(&i, 0.0, 1.0, -2.0, 2.0, Some(&mut rng)).is_err());
    assert!(init::normal_(&i, 0.0, 1.0, Some(&mut rng)).is_err());
}

#[test]
fn init_reaches_the_parameter_and_its_detached_alias() {
    let w = Var::new(Tensor::zeros(&[3, 3], DType::F64).unwrap(), true);
    let alias = w.detach();
    init::eye_(&w).unwrap();
    assert_eq!(
        w.data().to_f64_vec(),
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(alias.data().to_f64_vec(), w.data().to_f64_vec());
    let mut rng = Generator::with_seed(3);
    init::trunc_normal_(&w, 0.0, 1.0, -0.5, 0.5, Some(&mut rng)).unwrap();
    assert!(w.data().to_f64_vec().iter().all(|v| v.abs() <= 0.5));
    assert_eq!(alias.data().to_f64_vec(), w.data().to_f64_vec());
}
