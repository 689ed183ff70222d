//! The examples (`crates/lockstep/examples/`) against their PyTorch twins' committed reports
//! (`tests/golden/examples/NAME.json`, written by `tools/examples/golden.py`): the same
//! initial parameters (sha256), the first loss within 1e-6 relative, the later ones close;
//! and each example gives the same bits at 1, 2 and 3 threads.
//!
//! Each example file is compiled into this test as a module, so the test runs the program's
//! own `run` (its `main` stays unused here).

#[allow(dead_code)]
#[path = "../examples/dcgan.rs"]
mod dcgan;
#[allow(dead_code)]
#[path = "../examples/mnist.rs"]
mod mnist;
#[allow(dead_code)]
#[path = "../examples/time_sequence_prediction.rs"]
mod time_sequence_prediction;
#[allow(dead_code)]
#[path = "../examples/vae.rs"]
mod vae;

use lockstep::tensor::threads::with_num_threads;
use serde_json::Value;
use std::sync::Mutex;

/// The examples seed and draw from the process-wide default generator: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn golden(name: &str) -> (Vec<String>, Value) {
    let path = format!(
        "{}/../../tests/golden/examples/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let args = doc["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    (args, doc["report"].clone())
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// `ours` against the twin's report: init sha256 equal, as many losses, the first within
/// 1e-6 relative and every one within `drift`; the same keys for the other per-epoch figures.
fn compare(ours: &Value, torch: &Value, drift: f64) {
    assert_eq!(
        ours["init_sha256"], torch["init_sha256"],
        "initial parameters"
    );
    let (a, b) = (floats(&ours["losses"]), floats(&torch["losses"]));
    assert_eq!(a.len(), b.len(), "number of steps");
    assert!(rel(a[0], b[0]) <= 1e-6, "first loss {} vs {}", a[0], b[0]);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(rel(*x, *y) <= drift, "step {i}: loss {x} vs PyTorch {y}");
    }
}

#[test]
fn mnist_matches_pytorch_and_is_thread_invariant() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (args, torch) = golden("mnist");
    let mut a = mnist::Args::parse(args).unwrap();
    a.verbose = false;
    let one = with_num_threads(1, || mnist::run(&a)).unwrap();
    compare(&one, &torch, 1e-5);
    for (x, y) in floats(&one["test_loss"])
        .iter()
        .zip(floats(&torch["test_loss"]))
    {
        assert!(rel(*x, y) <= 1e-5, "test loss {x} vs PyTorch {y}");
    }
    assert_eq!(one["test_accuracy"], torch["test_accuracy"]);
    for threads in [2, 3] {
        let other = with_num_threads(threads, || mnist::run(&a)).unwrap();
        assert_eq!(other, one, "{threads} threads");
    }
}

#[test]
fn vae_matches_pytorch_and_is_thread_invariant() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (args, torch) = golden("vae");
    let mut a = vae::Args::parse(args).unwrap();
    a.verbose = false;
    let one = with_num_threads(1, || vae::run(&a)).unwrap();
    compare(&one, &torch, 1e-4);
    for (x, y) in floats(&one["test_loss"])
        .iter()
        .zip(floats(&torch["test_loss"]))
    {
        assert!(rel(*x, y) <= 1e-4, "test loss {x} vs PyTorch {y}");
    }
    for threads in [2, 3] {
        let other = with_num_threads(threads, || vae::run(&a)).unwrap();
        assert_eq!(other, one, "{threads} threads");
    }
}

#[test]
fn dcgan_matches_pytorch_and_is_thread_invariant() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (args, torch) = golden("dcgan");
    let mut a = dcgan::Args::parse(args).unwrap();
    a.verbose = false;
    let one = with_num_threads(1, || dcgan::run(&a)).unwrap();
    assert_eq!(one["fixed_noise_sha256"], torch["fixed_noise_sha256"]);
    compare(&one, &torch, 1e-4);
    let (g, tg) = (floats(&one["loss_g"]), floats(&torch["loss_g"]));
    assert!(
        rel(g[0], tg[0]) <= 1e-6,
        "first Loss_G {} vs {}",
        g[0],
        tg[0]
    );
    for (x, y) in g.iter().zip(tg) {
        assert!(rel(*x, y) <= 1e-4, "Loss_G {x} vs PyTorch {y}");
    }
    for threads in [2, 3] {
        let other = with_num_threads(threads, || dcgan::run(&a)).unwrap();
        assert_eq!(other, one, "{threads} threads");
    }
}

#[test]
fn time_sequence_prediction_matches_pytorch_and_is_thread_invariant() {
    use time_sequence_prediction as tsp;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (args, torch) = golden("time_sequence_prediction");
    let mut a = tsp::Args::parse(args).unwrap();
    a.verbose = false;
    let one = with_num_threads(1, || tsp::run(&a)).unwrap();
    assert_eq!(one["data_sha256"], torch["data_sha256"], "the waves");
    compare(&one, &torch, 1e-9);
    for threads in [2, 3] {
        let other = with_num_threads(threads, || tsp::run(&a)).unwrap();
        assert_eq!(other, one, "{threads} threads");
    }
}

#[test]
fn mnist_refuses_bad_flags() {
    for bad in [
        &["--batch-size", "0"][..],
        &["--epochs"],
        &["--lr", "fast"],
        &["--no-such-flag", "1"],
    ] {
        let e = mnist::Args::parse(bad.iter().map(|s| s.to_string()));
        assert!(e.is_err(), "{bad:?} accepted");
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let a = mnist::Args {
        conv2: 0,
        verbose: false,
        ..mnist::Args::default()
    };
    let e = mnist::run(&a).unwrap_err().to_string();
    assert!(!e.is_empty());
}
