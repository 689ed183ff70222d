//! Interop with PyTorch (issue 11): weights saved from PyTorch with
//! `safetensors.torch.save_file(model.state_dict(), path)` load with `--init-from` and give
//! PyTorch's `init_sha256`.
//!
//! The files and their expected hashes are `tests/golden/train/init_from/`, written by
//! `tools/golden_init_from.py` from `torch_train.py`'s `build_model` after
//! `torch.manual_seed(5)` (hidden 16). The run uses `--seed 0`, whose own initialisation
//! differs, so a run that ignored the file would not match. The other direction (a lockstep
//! checkpoint evaluated in PyTorch) is `tools/check_checkpoint_in_torch.py`; see
//! docs/resume.md.
//!
//! The global generators are process-wide, so the runs of this file are serialised.

use lockstep_cli::train::{Quiet, TrainConfig, run};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/train/init_from"
    ))
}

fn expected() -> Value {
    let p = dir().join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("expected.json")).expect("JSON")
}

fn config(model: &str, init_from: Option<PathBuf>) -> TrainConfig {
    TrainConfig {
        model: model.parse().unwrap(),
        seed: 0,
        hidden: 16,
        epochs: 1,
        max_steps: 1,
        init_from,
        ..TrainConfig::default()
    }
}

#[test]
fn init_from_pytorch_weights_gives_pytorchs_init_sha256() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let e = expected();
    assert_eq!(e["hidden"], 16);
    for model in ["mlp", "cnn", "lstm"] {
        let want = &e["models"][model];
        let file = dir().join(want["file"].as_str().expect("file"));
        let r = run(&config(model, Some(file.clone())), &mut Quiet)
            .unwrap_or_else(|err| panic!("{model}: --init-from {}: {err}", file.display()));
        assert_eq!(
            r.init_sha256,
            want["init_sha256"].as_str().expect("init_sha256"),
            "{model}: init_sha256 after --init-from differs from PyTorch's"
        );
        let names: Vec<&str> = want["state_dict_names"]
            .as_array()
            .expect("names")
            .iter()
            .map(|v| v.as_str().expect("name"))
            .collect();
        assert_eq!(r.state_dict_names, names, "{model}: state_dict names");
        // Without the file, lockstep's own seed-0 initialisation: another hash.
        let own = run(&config(model, None), &mut Quiet).expect("run");
        assert_ne!(
            own.init_sha256, r.init_sha256,
            "{model}: the file was ignored"
        );
    }
}

#[test]
fn init_from_refuses_a_file_of_another_model() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mlp = dir().join("mlp.safetensors");
    let Err(err) = run(&config("cnn", Some(mlp)), &mut Quiet) else {
        panic!("mlp weights must not load into the cnn");
    };
    assert!(err.to_string().contains("--init-from"), "{err}");
}
