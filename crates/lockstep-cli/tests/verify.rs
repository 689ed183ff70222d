//! `lockstep verify` through the binary: deterministic training verifies identical; with
//! deterministic mode off, a nondeterministic kernel picked at 2 threads (split-K matmul of a
//! large batch in `train`, the completion-order `sum` in a program run with `--cmd`) is named;
//! a custom op with only a nondeterministic implementation is named as the first divergence.

use serde_json::Value;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");

fn verify(args: &[&str]) -> (i32, Value) {
    let out = Command::new(EXE)
        .arg("verify")
        .arg("--json")
        .args(args)
        .output()
        .expect("run lockstep verify");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn deterministic_training_is_identical() {
    let (code, v) = verify(&[
        "--threads=1,2",
        "--workers=0,2",
        "--",
        "train",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--max-steps",
        "3",
        "--hidden",
        "8",
        "--seeding",
        "invariant",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["identical"], true);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    assert!(v["records"].as_u64().unwrap() > 20, "{v}");
}

#[test]
fn torch_seeding_with_workers_differs_in_the_data() {
    // PyTorch's seeding: each loader worker draws the noise from its own generator, so the
    // first matmul already sees other inputs; verify says the kernel is thread-invariant.
    let (code, v) = verify(&[
        "--threads=1",
        "--workers=0,2",
        "--",
        "train",
        "--epochs",
        "1",
        "--max-steps",
        "1",
        "--hidden",
        "8",
    ]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        (v["op"].as_str(), v["call"].as_u64()),
        (Some("matmul"), Some(0))
    );
    assert!(
        v["advice"]
            .as_str()
            .unwrap()
            .contains("--seeding invariant"),
        "{v}"
    );
}

#[test]
fn nondeterministic_training_names_the_split_k_matmul() {
    // A batch of 2048 makes the weight gradient of the first layer a skinny product (K = 2048),
    // where deterministic mode off picks split-K with partial sums added in completion order.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let csv = dir.join("verify-big.csv");
    let mut text = String::new();
    let mut s = 1u64;
    for i in 0..2300 {
        for _ in 0..64 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(&format!("{},", (s >> 33) % 17));
        }
        text.push_str(&format!("{}\n", i % 10));
    }
    std::fs::write(&csv, text).unwrap();
    let (code, v) = verify(&[
        "--threads=1,2",
        "--",
        "train",
        "--nondeterministic",
        "--data",
        csv.to_str().unwrap(),
        "--batch-size",
        "2048",
        "--test-size",
        "100",
        "--hidden",
        "8",
        "--epochs",
        "1",
        "--max-steps",
        "1",
    ]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["identical"], false);
    assert_eq!(v["op"], "matmul", "{v}");
    assert_eq!(v["algo"], "matmul.splitk_completion", "{v}");
    assert_eq!(v["backward"], "linear", "{v}");
    assert_eq!(v["step"], 0);
    let d = v["max_abs_diff"].as_f64().unwrap();
    assert!(d > 0.0 && d < 1e-3, "{v}");
    let advice = v["advice"].as_str().unwrap();
    assert!(
        advice.contains("a deterministic implementation exists"),
        "{advice}"
    );
    assert!(advice.contains("without --nondeterministic"), "{advice}");
}

#[test]
#[ignore = "the nondeterministic sum (parallel, completion-order combine) is now as accurate as \
            the fixed tree and, on this program's data, gives its bits at 1, 2 and 3 threads; it \
            differs by 1 ulp only at 8 threads on 3M values, and then depends on completion \
            order (a flaky test). The --cmd path is covered by \
            custom_nondeterministic_op_is_the_first_divergence"]
fn cmd_names_the_completion_order_sum() {
    let (code, v) = verify(&["--cmd", &format!("{EXE} verify-test-program")]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(
        (v["op"].as_str(), v["algo"].as_str()),
        (Some("sum"), Some("sum.completion_order"))
    );
    assert!(
        v["advice"].as_str().unwrap().contains("sum.fixed_tree"),
        "{v}"
    );
}

#[test]
fn custom_nondeterministic_op_is_the_first_divergence() {
    let (code, v) = verify(&[
        "--threads=1,2",
        "--cmd",
        &format!("{EXE} verify-test-program --custom-op"),
    ]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["op"], "test_custom_nondet_sum", "{v}");
    assert_eq!(v["call"], 3, "{v}");
    assert!(v["max_abs_diff"].as_f64().unwrap() > 0.0);
    // At one thread, repeated runs agree.
    let (code, v) = verify(&[
        "--threads=1",
        "--runs=2",
        "--cmd",
        &format!("{EXE} verify-test-program --custom-op"),
    ]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_failing_run_is_an_error() {
    let out = Command::new(EXE)
        .args(["verify", "--", "train", "--model", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed"));
}
