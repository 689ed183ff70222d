//! `--init-from` follows PyTorch's `load_state_dict(strict=True)` (issue 30): the files of
//! `tests/golden/train/init_from/strict/` (a misspelt key, extra keys, a missing key, another
//! hidden width, float64 values) and what real PyTorch did with each, recorded by
//! `tools/golden_init_from_strict.py` in `expected.json`: the error message, which lockstep's
//! must end with exactly, or the `init_sha256` after loading.
//!
//! Before: keys the model does not have were dropped silently, a misspelt key was reported as
//! `Unexpected key(s): []`, and a float64 file was refused as a size mismatch.

use lockstep_cli::train::{Quiet, TrainConfig, run};
use serde_json::Value;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/train/init_from/strict"
    ))
}

#[test]
fn init_from_gives_pytorchs_load_state_dict_outcome() {
    let p = dir().join("expected.json");
    let e: Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("expected.json")).expect("JSON");
    let cases = e["cases"].as_object().expect("cases");
    assert_eq!(cases.len(), 9);
    let (mut errors, mut loads) = (0, 0);
    // One test function: the global generators are process-wide, so the runs go one by one.
    for (name, want) in cases {
        let file = dir().join(format!("{name}.safetensors"));
        let cfg = TrainConfig {
            model: want["model"].as_str().expect("model").parse().unwrap(),
            seed: 0,
            hidden: 16,
            epochs: 1,
            max_steps: 1,
            init_from: Some(file.clone()),
            ..TrainConfig::default()
        };
        let got = run(&cfg, &mut Quiet);
        match (want.get("error").and_then(Value::as_str), got) {
            (Some(msg), Err(err)) => {
                let err = err.to_string();
                let prefix = format!("--init-from {}: ", file.display());
                assert_eq!(err.strip_prefix(&prefix), Some(msg), "{name}: {err}");
                errors += 1;
            }
            (None, Ok(r)) => {
                assert_eq!(
                    r.init_sha256,
                    want["init_sha256"].as_str().expect("init_sha256"),
                    "{name}: the cast values differ from PyTorch's"
                );
                loads += 1;
            }
            (Some(msg), Ok(_)) => panic!("{name}: loaded, but PyTorch says {msg}"),
            (None, Err(err)) => panic!("{name}: PyTorch loads it, lockstep says {err}"),
        }
    }
    assert_eq!((errors, loads), (6, 3));
}
