//! Shared by the test files: readers for the golden JSON files under `tests/golden/tensor/`,
//! and seeded test data.
#![allow(dead_code)]

use lockstep_tensor::Tensor;
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

/// SplitMix64: test data without depending on any RNG crate's stream.
pub struct Mix(pub u64);
impl Mix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-2, 2).
    pub fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    /// An index in `0..n`.
    pub fn below(&mut self, n: usize) -> i64 {
        (self.next() % n as u64) as i64
    }
}

/// The bits of an f32 tensor's elements in row-major order (for bit-for-bit comparisons).
pub fn f32_bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// `set_isa` is process-wide: the tests of a binary that force an instruction set and its
/// other tests take turns (each test holds this guard), so that no test silently runs on
/// another path than the one it means to check.
pub fn isa_turn() -> std::sync::MutexGuard<'static, ()> {
    static ISA: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ISA.lock().unwrap_or_else(|e| e.into_inner())
}
