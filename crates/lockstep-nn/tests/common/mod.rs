//! The optimizer tests' reading of PyTorch's golden files (`tests/golden/train/optim*.json`)
//! and their bit comparisons, shared by `optim.rs` and `optim_more.rs`.
#![allow(dead_code)]

use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use std::path::PathBuf;

pub fn load(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/train")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run tools/golden_optim*.py)", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A tensor stored as `{"shape", "dtype", "values"}` (exact float values).
pub fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect();
    let vals: Vec<f64> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    match v["dtype"].as_str().unwrap() {
        "float32" => {
            let f: Vec<f32> = vals.iter().map(|&x| x as f32).collect();
            assert!(
                f.iter()
                    .zip(&vals)
                    .all(|(a, b)| f64::from(*a) == *b || b.is_nan()),
                "golden float32 values are exact"
            );
            Tensor::from_vec(f, &shape).unwrap()
        }
        "float64" => Tensor::from_vec(vals, &shape).unwrap(),
        d => panic!("dtype {d}"),
    }
}

/// The bits of every element (f32 widened losslessly), for exact comparison.
pub fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| u64::from(x.to_bits()))
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect(),
        d => panic!("dtype {d:?}"),
    }
}

pub fn assert_bits(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (bits(got), bits(want));
    let bad: Vec<usize> = (0..g.len()).filter(|&i| g[i] != w[i]).collect();
    assert!(
        bad.is_empty(),
        "{what}: {} of {} elements differ, first at {}: got {:?}, PyTorch {:?}",
        bad.len(),
        g.len(),
        bad[0],
        got.to_f64_vec()[bad[0]],
        want.to_f64_vec()[bad[0]]
    );
}

pub fn f(v: &Value, key: &str, default: f64) -> f64 {
    v.get(key).map_or(default, |x| x.as_f64().unwrap())
}

pub fn b(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| x.as_bool().unwrap())
}

/// A JSON list of tensors.
pub fn tensors(v: &Value) -> Vec<Tensor> {
    v.as_array().unwrap().iter().map(tensor).collect()
}

/// `set_isa` is process-wide: the tests of a binary that force an instruction set and its
/// other tests take turns (each test holds this guard), so that no test silently runs on
/// another path than the one it means to check.
pub fn isa_turn() -> std::sync::MutexGuard<'static, ()> {
    static ISA: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ISA.lock().unwrap_or_else(|e| e.into_inner())
}
