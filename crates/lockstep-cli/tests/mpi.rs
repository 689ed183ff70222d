//! `lockstep train --distributed` under `mpirun`: the same bits for any number of processes
//! (mlp, cnn with BatchNorm, lstm, gpt; both reductions), and the same as one process given
//! the same flags (no `--micro-batch`: invariant seeding's default); resuming across world sizes; failing and hanging ranks. Needs Open MPI (`mpirun` on the path):
//! `cargo test -p lockstep-cli --features mpi --test mpi`.
#![cfg(feature = "mpi")]

use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_lockstep");

/// Small runs: `max_steps` steps of 30 samples (micro-shards of 8, 8, 8 and 6: two for rank 0
/// and one for the others at W = 3), with dropout and augmentation on; `extra` flags replace
/// or add to these (flag, value), `--distributed` is added if `distributed`.
fn args_with(
    model: &str,
    max_steps: usize,
    distributed: bool,
    extra: &[(&str, &str)],
) -> Vec<String> {
    let max_steps = max_steps.to_string();
    let mut a: Vec<String> = [
        "train",
        "--model",
        model,
        "--seeding",
        "invariant",
        "--epochs",
        "1",
        "--max-steps",
        &max_steps,
        "--batch-size",
        "30",
        "--hidden",
        "16",
        "--test-size",
        "1500",
        "--threads",
        "1",
        "--dropout",
        "0.2",
        "--aug",
        "torch",
        "--noise",
        "0.1",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (k, v) in extra {
        match a.iter().position(|s| s == k) {
            Some(i) => a[i + 1] = v.to_string(),
            None => a.extend([k.to_string(), v.to_string()]),
        }
    }
    if distributed {
        a.push("--distributed".into());
    }
    a
}

fn args(model: &str) -> Vec<String> {
    args_with(model, 4, false, &[])
}

/// Runs `cmd` to completion, failing the test (after killing it) if it takes over `limit`:
/// a hang is a failure, never a stuck test.
fn run_limited(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun on the path (apt-get install openmpi-bin)");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{cmd:?} still running after {limit:?} (a hang); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mpirun(w: usize, args: &[String], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &w.to_string(),
        BIN,
    ]);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_limited(cmd, Duration::from_secs(180))
}

fn report(out: &Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: one report (rank 0 only), got {stdout}"
    );
    serde_json::from_str(lines[0]).expect("JSON report")
}

/// One process, no flag beyond the run's: invariant seeding's micro-shards are its default.
fn single(args: &[String]) -> Value {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    report(
        &run_limited(cmd, Duration::from_secs(120)),
        "single process",
    )
}

fn distributed(w: usize, args: &[String]) -> Value {
    let mut a = args.to_vec();
    a.push("--distributed".into());
    report(&mpirun(w, &a, &[]), &format!("mpirun -np {w}"))
}

fn same_bits_for_any_world_size(model: &str) {
    let a = args(model);
    let base = single(&a);
    assert_eq!(base["steps"], 4);
    for w in 1..=4 {
        let r = distributed(w, &a);
        assert_eq!(
            r["final_sha256"], base["final_sha256"],
            "{model}: W = {w} differs from the single process"
        );
        assert_eq!(r["step_losses"], base["step_losses"], "{model}: W = {w}");
        assert_eq!(
            r["test_accuracy"], base["test_accuracy"],
            "{model}: W = {w}"
        );
        assert_eq!(r["init_sha256"], base["init_sha256"], "{model}: W = {w}");
    }
}

#[test]
fn mlp_same_bits_for_one_to_four_processes() {
    same_bits_for_any_world_size("mlp");
}

#[test]
fn lstm_same_bits_for_one_to_four_processes() {
    same_bits_for_any_world_size("lstm");
}

#[test]
fn cnn_same_bits_for_one_to_four_processes() {
    // BatchNorm's statistics over the batch, gathered in micro-shard order.
    same_bits_for_any_world_size("cnn");
}

#[test]
fn naming_the_default_micro_shard_changes_nothing() {
    let a = args("mlp");
    let mut cmd = Command::new(BIN);
    cmd.args(&a).args(["--micro-batch", "8"]);
    let named = report(
        &run_limited(cmd, Duration::from_secs(120)),
        "--micro-batch 8",
    );
    let base = single(&a);
    assert_eq!(named["final_sha256"], base["final_sha256"]);
    let r = distributed(2, &a);
    assert_eq!(r["final_sha256"], base["final_sha256"]);
}

/// gpt: a global batch of 4 × 5 = 20 windows (micro-shards of 8, 8 and 4), every dropout on.
fn gpt_args(batch: &str, accum: &str) -> Vec<String> {
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lockstep-data/data/tinyshakespeare.txt.gz"
    );
    [
        "train",
        "--model",
        "gpt",
        "--seeding",
        "invariant",
        "--n-layer",
        "1",
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
        "1",
        "--sample-tokens",
        "4",
        "--threads",
        "1",
        "--json",
        "--data",
        data,
        "--batch-size",
        batch,
        "--grad-accum",
        accum,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn gpt_same_bits_for_one_to_three_processes_and_any_split() {
    let base = single(&gpt_args("4", "5"));
    assert_eq!(base["step_losses"].as_array().unwrap().len(), 3);
    for (w, (b, acc)) in [(1, ("20", "1")), (2, ("4", "5")), (3, ("10", "2"))] {
        let r = distributed(w, &gpt_args(b, acc));
        for k in [
            "final_sha256",
            "step_losses",
            "grad_norms",
            "evals",
            "sample_ids",
        ] {
            assert_eq!(r[k], base[k], "gpt: W = {w}, {b} x {acc}: {k}");
        }
    }
    // Torch seeding cannot be distributed.
    let mut t = gpt_args("4", "5");
    t[4] = "torch".into();
    t.push("--distributed".into());
    let out = mpirun(2, &t, &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--distributed needs --seeding invariant")
    );
}

#[test]
fn a_process_without_micro_shards_follows_as_a_shadow() {
    // Batches of 12: micro-shards of 8 and 4, so rank 2 of 3 owns none; it still meets
    // every BatchNorm exchange and keeps the same running statistics.
    let a = args_with("cnn", 3, false, &[("--batch-size", "12")]);
    let base = single(&a);
    let r = distributed(3, &a);
    assert_eq!(r["final_sha256"], base["final_sha256"]);
    assert_eq!(r["step_losses"], base["step_losses"]);
}

#[test]
fn reduce_scatter_gives_the_bits_of_the_gather() {
    let a = args_with("cnn", 3, false, &[("--reduction", "reduce-scatter")]);
    // --reduction needs --distributed: the reference is the plain single process.
    let base = single(&args_with("cnn", 3, false, &[]));
    for w in [2, 3] {
        let r = distributed(w, &a);
        assert_eq!(r["final_sha256"], base["final_sha256"], "W = {w}");
        assert_eq!(r["step_losses"], base["step_losses"], "W = {w}");
    }
}

/// Saved after 2 steps at W = 2, resumed at W = 3 for 2 more: the bits of 4 steps in one go.
fn checkpoint_saved_at_two_processes_resumes_at_three(model: &str) {
    let dir = std::env::temp_dir().join(format!(
        "lockstep-mpi-resume-{model}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display().to_string();
    let first = args_with(
        model,
        2,
        true,
        &[("--checkpoint-dir", &d), ("--checkpoint-every", "2")],
    );
    report(&mpirun(2, &first, &[]), "mpirun -np 2 (save)");
    assert!(dir.join("ckpt-00000002.safetensors").exists());
    let second = args_with(model, 4, true, &[("--resume", &d)]);
    let resumed = report(&mpirun(3, &second, &[]), "mpirun -np 3 (resume)");
    let _ = std::fs::remove_dir_all(&dir);
    let base = single(&args(model));
    assert_eq!(resumed["final_sha256"], base["final_sha256"], "{model}");
    assert_eq!(resumed["step_losses"], base["step_losses"], "{model}");
}

#[test]
fn lstm_checkpoint_saved_at_two_processes_resumes_at_three() {
    checkpoint_saved_at_two_processes_resumes_at_three("lstm");
}

#[test]
fn cnn_checkpoint_saved_at_two_processes_resumes_at_three() {
    // BatchNorm's running statistics and step count travel in the checkpoint.
    checkpoint_saved_at_two_processes_resumes_at_three("cnn");
}

#[test]
fn a_hanging_rank_ends_the_job_after_the_collective_timeout() {
    let a = args_with("mlp", 4, true, &[("--collective-timeout", "4")]);
    let start = Instant::now();
    let out = mpirun(3, &a, &[("LOCKSTEP_TEST_HANG_RANK", "1")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("collective timeout: rank 1 did not arrive"),
        "{err}"
    );
    assert!(
        !err.contains("rank 0 did not") && !err.contains("rank 2 did not"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // Well before the test's own limit for a hang (180 s).
    assert!(
        start.elapsed() < Duration::from_secs(120),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_failing_rank_ends_the_job_naming_the_rank() {
    let a = args_with("mlp", 4, true, &[]);
    let out = mpirun(3, &a, &[("LOCKSTEP_TEST_FAIL_RANK", "1")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rank 1 of 3"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "no report: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn distributed_refuses_torch_seeding_workers_and_bad_options() {
    for (bad, want) in [
        (
            ("--seeding", "torch"),
            "--distributed needs --seeding invariant",
        ),
        (("--workers", "2"), "--distributed needs --workers 0"),
        (
            ("--collective-timeout", "0"),
            "invalid value 0 for --collective-timeout",
        ),
        (
            ("--collective-timeout", "nan"),
            "invalid value NaN for --collective-timeout",
        ),
        (
            ("--reduction", "ring"),
            "invalid value 'ring' for '--reduction <",
        ),
    ] {
        let a = args_with("mlp", 4, true, &[bad]);
        let out = mpirun(2, &a, &[]);
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{bad:?}: {err}");
    }
    // The distributed options without --distributed: a usage error, not ignored.
    let mut cmd = Command::new(BIN);
    cmd.args(args_with("mlp", 1, false, &[("--reduction", "gather")]));
    let out = run_limited(cmd, Duration::from_secs(60));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--distributed"));
}
