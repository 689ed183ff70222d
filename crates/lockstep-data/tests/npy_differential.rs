//! Differential test against NumPy: `tests/golden/data/npy_corpus/` holds valid, hand-edited
//! and randomly mutated `.npy` files, and `manifest.json` records what real NumPy's `np.load`
//! did with each (written by `tools/golden_npy_corpus.py`). lockstep must refuse every file
//! NumPy refuses, and read every file NumPy accepts to the same shape and values — except files
//! of a dtype or a Python header syntax lockstep does not support, which it must refuse with a
//! message saying "unsupported" (never a wrong value, never a panic).

use lockstep_data::parse_npy;
use lockstep_tensor::{DType, Tensor};
use serde_json::Value;
use std::path::Path;

fn corpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/data/npy_corpus")
}

/// The values as NumPy's manifest writes them: floats as the bits of their f64 widening,
/// integers and bools as decimal.
fn values(t: &Tensor) -> Vec<String> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(|x| (x as f64).to_bits().to_string())
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(|x| x.to_bits().to_string())
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .into_iter()
            .map(|x| x.to_string())
            .collect(),
        DType::U8 => t
            .to_vec::<u8>()
            .unwrap()
            .into_iter()
            .map(|x| x.to_string())
            .collect(),
        DType::Bool => t
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|x| u8::from(x).to_string())
            .collect(),
    }
}

/// NumPy dtypes lockstep reads (`dtype.str`, both byte orders).
fn supported(numpy_dtype: &str) -> bool {
    matches!(
        &numpy_dtype[1..],
        "f4" | "f8" | "i1" | "i2" | "i4" | "i8" | "u1" | "u2" | "u4" | "b1"
    )
}

#[test]
fn lockstep_accepts_exactly_what_numpy_accepts() {
    let dir = corpus();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_object().unwrap();
    assert!(files.len() > 500, "corpus too small: {}", files.len());
    let (mut same, mut unsupported, mut failures) = (0, 0, Vec::new());
    for (name, rec) in files {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let got = parse_npy(&bytes, Path::new(name));
        let accepted = rec["accepted"].as_bool().unwrap();
        match (accepted, got) {
            (false, Err(_)) => same += 1,
            (false, Ok(t)) => failures.push(format!(
                "{name}: NumPy refuses ({}), lockstep read {:?} {:?}",
                rec["error"],
                t.dtype(),
                t.shape()
            )),
            (true, Err(e)) => {
                let msg = e.to_string();
                if msg.contains("unsupported") {
                    unsupported += 1;
                } else {
                    failures.push(format!("{name}: NumPy reads it, lockstep refuses: {msg}"));
                }
                if supported(rec["dtype"].as_str().unwrap()) && msg.contains("unsupported dtype") {
                    failures.push(format!(
                        "{name}: a supported dtype called unsupported: {msg}"
                    ));
                }
            }
            (true, Ok(t)) => {
                let dt = rec["dtype"].as_str().unwrap();
                let shape: Vec<usize> = rec["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_u64().unwrap() as usize)
                    .collect();
                let want: Vec<String> = rec["values"]
                    .as_array()
                    .map(|v| v.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                if !supported(dt) {
                    failures.push(format!("{name}: lockstep read unsupported dtype {dt}"));
                } else if t.shape() != shape.as_slice() || values(&t) != want {
                    failures.push(format!(
                        "{name}: different data: {:?} {:?} vs NumPy {dt} {shape:?}",
                        t.dtype(),
                        t.shape()
                    ));
                } else {
                    same += 1;
                }
            }
        }
    }
    eprintln!(
        "{} files: {same} agree with NumPy, {unsupported} read by NumPy are unsupported",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} disagreements with NumPy ({same} agree, {unsupported} unsupported):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        unsupported < 40,
        "{unsupported} files NumPy reads are unsupported"
    );
}
