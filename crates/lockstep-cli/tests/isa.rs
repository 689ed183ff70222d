//! The same bits on every instruction-set path: the `lockstep` binary, run with `LOCKSTEP_ISA`
//! set to each path this CPU has, gives identical self-test outputs and identical training
//! results (mlp, cnn, lstm). A machine without AVX-512 or AVX2 (or an ARM machine, which runs the
//! portable path) therefore computes what this one does.

use lockstep_tensor::isa::Isa;
use serde_json::Value;
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");

fn lockstep(isa: &str, args: &[&str]) -> Output {
    Command::new(EXE)
        .env("LOCKSTEP_ISA", isa)
        .args(args)
        .output()
        .expect("run lockstep")
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn available() -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|i| i.available()).collect()
}

#[test]
fn the_self_test_gives_the_same_bits_on_every_path() {
    let mut first: Option<(Isa, Vec<(String, String)>)> = None;
    for isa in available() {
        let out = lockstep(isa.name(), &["doctor", "--self-test", "--json"]);
        let v = json(&out);
        assert!(out.status.success() && v["ok"] == true, "{isa}: {v}");
        let env = &v["environment"];
        assert_eq!(env["isa"]["in_use"], isa.name(), "{isa}: {env}");
        assert_eq!(env["isa"]["source"], "environment", "{isa}: {env}");
        let hashes: Vec<(String, String)> = v["self_test"]
            .as_array()
            .expect("self_test")
            .iter()
            .map(|r| {
                let h = r["output_hash"].as_str().expect("output_hash");
                (r["op"].as_str().unwrap().to_string(), h.to_string())
            })
            .collect();
        assert!(!hashes.is_empty());
        match &first {
            None => first = Some((isa, hashes)),
            Some((i0, h0)) => {
                for (a, b) in h0.iter().zip(&hashes) {
                    assert_eq!(a, b, "{i0} and {isa} differ");
                }
                assert_eq!(h0.len(), hashes.len());
            }
        }
    }
}

#[test]
fn training_gives_the_same_bits_on_every_path() {
    for model in ["mlp", "cnn", "lstm"] {
        let mut first: Option<(Isa, String)> = None;
        for isa in available() {
            let out = lockstep(
                isa.name(),
                &[
                    "train",
                    "--model",
                    model,
                    "--epochs",
                    "1",
                    "--max-steps",
                    "6",
                    "--hidden",
                    "16",
                    "--test-size",
                    "300",
                    "--threads",
                    "2",
                    "--json",
                ],
            );
            let v = json(&out);
            assert!(out.status.success(), "{model} {isa}: {v}");
            let sha = v["final_sha256"]
                .as_str()
                .expect("final_sha256")
                .to_string();
            match &first {
                None => first = Some((isa, sha)),
                Some((i0, s0)) => assert_eq!(s0, &sha, "{model}: {i0} and {isa} differ"),
            }
        }
    }
}

#[test]
fn a_bad_lockstep_isa_is_a_clear_error() {
    let out = lockstep("avx-512", &["doctor", "--json"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("LOCKSTEP_ISA") && err.contains("avx-512") && err.contains("portable"),
        "{err}"
    );
    // A path this CPU lacks is refused the same way, naming what it can run.
    if let Some(missing) = Isa::ALL.into_iter().find(|i| !i.available()) {
        let out = lockstep(missing.name(), &["doctor"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot run"), "{err}");
    }
    // Every other command at least says so on standard error (the library warns and takes the
    // detected path: the same bits; the binary may refuse it outright).
    let out = lockstep(
        "avx-512",
        &[
            "train",
            "--model",
            "mlp",
            "--max-steps",
            "1",
            "--test-size",
            "100",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("LOCKSTEP_ISA") && err.contains("avx-512"),
        "{err}"
    );
}

#[test]
fn an_empty_lockstep_isa_means_unset() {
    let v = json(&lockstep("", &["doctor", "--json"]));
    assert_eq!(v["environment"]["isa"]["source"], "detected", "{v}");
    assert_eq!(
        v["environment"]["isa"]["in_use"],
        Isa::detected().name(),
        "{v}"
    );
}
