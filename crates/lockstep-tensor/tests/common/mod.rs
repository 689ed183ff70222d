//! Readers for the golden JSON files under `tests/golden/tensor/`, shared by the test files.
#![allow(dead_code)]

use serde_json::Value;

/// Parses `tests/golden/tensor/<name>` at the workspace root.
pub fn golden(name: &str) -> Value {
    let path = format!(
        "{}/../../tests/golden/tensor/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A JSON array of numbers as `f32` (the values are exact float32 widenings).
pub fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// A JSON array of non-negative integers.
pub fn dims(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// A JSON array of two non-negative integers.
pub fn pair(v: &Value) -> (usize, usize) {
    let d = dims(v);
    (d[0], d[1])
}
