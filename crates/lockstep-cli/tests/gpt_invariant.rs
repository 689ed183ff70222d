//! `lockstep train --model gpt --seeding invariant`: one result for every split of the global
//! batch (`--batch-size` × `--grad-accum`), every thread count and every instruction-set path
//! (`LOCKSTEP_ISA`); the micro-shard size is part of the definition, the seed matters, and the
//! flags that need invariant seeding are refused without it. (Every MPI world size:
//! `tests/mpi.rs`.)

use lockstep_tensor::isa::Isa;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn data() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lockstep-data/data/tinyshakespeare.txt.gz")
        .display()
        .to_string()
}

/// A small model with every dropout on, three steps of a global batch of 16 windows, an
/// evaluation at steps 0 and 2 and at the end, a short sample; `extra` adds flags.
fn args(batch: usize, accum: usize, threads: usize, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "train",
        "--model",
        "gpt",
        "--seeding",
        "invariant",
        "--n-layer",
        "2",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--block-size",
        "16",
        "--dropout",
        "0.2",
        "--max-iters",
        "3",
        "--warmup-iters",
        "1",
        "--eval-interval",
        "2",
        "--eval-iters",
        "2",
        "--sample-tokens",
        "8",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend([
        "--batch-size".to_string(),
        batch.to_string(),
        "--grad-accum".into(),
        accum.to_string(),
        "--threads".into(),
        threads.to_string(),
        "--data".into(),
        data(),
    ]);
    // `extra`'s (flag, value) pairs replace the flag's value or are added.
    for pair in extra.chunks(2) {
        match a.iter().position(|s| s == pair[0]) {
            Some(i) => a[i + 1] = pair[1].to_string(),
            None => a.extend(pair.iter().map(|s| s.to_string())),
        }
    }
    a
}

fn run_env(args: &[String], env: &[(&str, &str)]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

fn run(args: &[String]) -> Value {
    run_env(args, &[])
}

/// Everything a run reports that training touches.
fn assert_same(a: &Value, b: &Value, what: &str) {
    for k in [
        "final_sha256",
        "step_losses",
        "grad_norms",
        "evals",
        "sample_ids",
    ] {
        assert_eq!(a[k], b[k], "{what}: {k} differs");
    }
}

#[test]
fn one_result_for_every_split_of_the_batch_and_every_thread_count() {
    let base = run(&args(16, 1, 1, &[]));
    assert_eq!(base["step_losses"].as_array().unwrap().len(), 3);
    assert_eq!(base["evals"].as_array().unwrap().len(), 3);
    for (b, acc, threads) in [(8, 2, 2), (4, 4, 3), (2, 8, 1), (16, 1, 2), (1, 16, 3)] {
        let r = run(&args(b, acc, threads, &[]));
        assert_same(&base, &r, &format!("{b} x {acc} at {threads} threads"));
    }
    // The default micro-shard is 8 windows; naming it changes nothing.
    let r = run(&args(4, 4, 1, &["--micro-batch", "8"]));
    assert_same(&base, &r, "--micro-batch 8");
}

#[test]
fn the_same_bits_on_every_instruction_set_path() {
    let a = args(8, 2, 2, &[]);
    let paths: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.available()).collect();
    let base = run_env(&a, &[("LOCKSTEP_ISA", paths[0].name())]);
    for isa in &paths[1..] {
        let r = run_env(&a, &[("LOCKSTEP_ISA", isa.name())]);
        assert_same(&base, &r, isa.name());
    }
}

#[test]
fn the_micro_shard_size_the_seed_and_the_masks_matter() {
    let base = run(&args(8, 2, 1, &[]));
    let sha = |v: &Value| v["final_sha256"].as_str().unwrap().to_string();
    // Micro-shards of 4 add the gradients in another order (and another tree).
    let m4 = run(&args(8, 2, 1, &["--micro-batch", "4"]));
    assert_ne!(sha(&base), sha(&m4), "--micro-batch 4");
    // The windows and masks follow the seed.
    let s2 = run(&args(8, 2, 1, &["--seed", "7"]));
    assert_ne!(base["step_losses"][0], s2["step_losses"][0], "--seed 7");
    // The masks are drawn: without dropout the losses move.
    let d0 = run(&args(8, 2, 1, &["--dropout", "0"]));
    assert_ne!(base["step_losses"][0], d0["step_losses"][0], "--dropout 0");
    // Torch seeding draws other windows: not the same run.
    let torch = run(&args(8, 2, 1, &["--seeding", "torch"]));
    assert_ne!(base["step_losses"][0], torch["step_losses"][0]);
    // The first loss is the mean cross entropy of an untrained model: near ln(vocab).
    let l0 = base["step_losses"][0].as_f64().unwrap();
    let ln_v = (base["vocab_size"].as_f64().unwrap()).ln();
    assert!((l0 - ln_v).abs() < 0.5, "first loss {l0}, ln(vocab) {ln_v}");
}

#[test]
fn flags_that_need_invariant_seeding_are_refused_without_it() {
    for (extra, want) in [
        (
            &["--seeding", "torch", "--micro-batch", "4"][..],
            "--micro-batch 4 needs --seeding invariant",
        ),
        (&["--seeding", "jax"][..], "--seeding"),
        (&["--micro-batch", "2000000"][..], "--micro-batch"),
    ] {
        let a = args(8, 2, 1, extra);
        let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(&a)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(want),
            "{extra:?}: {err:?} does not name {want}"
        );
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
    }
}
