//! `lockstep train --model gpt --checkpoint-dir D --checkpoint-every N` and `--resume`: a run
//! stopped at step s and resumed equals the uninterrupted run bit for bit (final_sha256,
//! step_losses, lrs, grad_norms, evals, sample_ids), for s on and off an evaluation step, with
//! dropout, with gradient accumulation and at another thread count; bad checkpoints exit 2 with
//! a message, never a panic.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn data() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/lockstep-data/data/tinyshakespeare.txt.gz")
        .display()
        .to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lockstep-gpt-ckpt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small model: a run takes well under a second. A flag in `extra` replaces its default.
fn small(extra: &[&str]) -> Vec<String> {
    let d = data();
    let defaults: [(&str, &str); 13] = [
        ("--data", d.as_str()),
        ("--n-layer", "1"),
        ("--n-head", "2"),
        ("--n-embd", "16"),
        ("--block-size", "16"),
        ("--batch-size", "4"),
        ("--max-iters", "8"),
        ("--warmup-iters", "2"),
        ("--eval-interval", "3"),
        ("--eval-iters", "2"),
        ("--sample-tokens", "20"),
        ("--dropout", "0.1"),
        ("--threads", "1"),
    ];
    let mut a: Vec<String> = ["train", "--model", "gpt", "--json"]
        .map(String::from)
        .to_vec();
    for (f, v) in defaults {
        if !extra.contains(&f) {
            a.extend([f.to_string(), v.to_string()]);
        }
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn lockstep(args: &[String]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn report(args: &[String]) -> Value {
    let (code, out, err) = lockstep(args);
    assert_eq!(code, 0, "{args:?} failed: {err}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// The keys a resumed run must reproduce.
const KEYS: &[&str] = &[
    "init_sha256",
    "step_losses",
    "lrs",
    "grad_norms",
    "evals",
    "sample_ids",
    "sample",
    "final_sha256",
];

fn assert_same(a: &Value, b: &Value, what: &str) {
    for k in KEYS {
        assert_eq!(a[k], b[k], "{what}: {k} differs");
    }
}

fn ckpt(dir: &Path, step: usize) -> String {
    dir.join(format!("ckpt-{step:08}.safetensors"))
        .display()
        .to_string()
}

fn resumed_equals_uninterrupted(extra: &[&str], stops: &[usize], name: &str) {
    let full = report(&small(extra));
    let dir = tmp(name);
    let d = dir.display().to_string();
    let mut a = extra.to_vec();
    a.extend(["--checkpoint-dir", d.as_str(), "--checkpoint-every", "1"]);
    // Writing checkpoints changes nothing.
    assert_same(
        &full,
        &report(&small(&a)),
        &format!("{name}: with checkpoints"),
    );
    for &s in stops {
        let p = ckpt(&dir, s);
        for threads in ["1", "3"] {
            let mut r = extra.to_vec();
            r.extend(["--resume", p.as_str(), "--threads", threads]);
            assert_same(
                &full,
                &report(&small(&r)),
                &format!("{name}: resumed at step {s}, {threads} threads"),
            );
        }
    }
    // A directory: its newest checkpoint (the last step), then only the final evaluation and
    // the sample remain.
    let mut r = extra.to_vec();
    r.extend(["--resume", d.as_str()]);
    assert_same(
        &full,
        &report(&small(&r)),
        &format!("{name}: resumed from dir"),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resumed_run_equals_uninterrupted_run() {
    // Step 3 and 6 are evaluation steps (--eval-interval 3), 5 is not; 1 is the first.
    resumed_equals_uninterrupted(&[], &[1, 3, 5, 6], "plain");
}

#[test]
fn resumed_run_equals_uninterrupted_run_with_grad_accum() {
    resumed_equals_uninterrupted(&["--grad-accum", "2"], &[3, 4], "accum");
}

#[test]
fn invariant_run_resumed_with_another_split_and_thread_count_equals_uninterrupted() {
    // --seeding invariant: one result for every split of the global batch (8 windows) and
    // every thread count, also across a resume: stop a 4 × 2 run at step 3 (an evaluation
    // step) and 5, resume it as 8 × 1 and 2 × 4 at 1 and 3 threads.
    let inv = ["--seeding", "invariant", "--micro-batch", "2"];
    let split = |b: &'static str, g: &'static str| {
        let mut a = inv.to_vec();
        a.extend(["--batch-size", b, "--grad-accum", g]);
        a
    };
    let full = report(&small(&split("4", "2")));
    assert_same(&full, &report(&small(&split("8", "1"))), "invariant: 8 x 1");
    let dir = tmp("invariant");
    let d = dir.display().to_string();
    let mut a = split("4", "2");
    a.extend(["--checkpoint-dir", d.as_str(), "--checkpoint-every", "1"]);
    assert_same(&full, &report(&small(&a)), "invariant: with checkpoints");
    for s in [3, 5] {
        let p = ckpt(&dir, s);
        for (b, g, threads) in [("8", "1", "3"), ("2", "4", "1")] {
            let mut r = split(b, g);
            r.extend(["--resume", p.as_str(), "--threads", threads]);
            assert_same(
                &full,
                &report(&small(&r)),
                &format!("invariant: resumed at {s} as {b} x {g}, {threads} threads"),
            );
        }
    }
    // Another global batch or micro-shard size is another run.
    let p = ckpt(&dir, 3);
    for (b, m) in [("2", "2"), ("8", "4")] {
        let mut r = vec!["--seeding", "invariant", "--micro-batch", m];
        r.extend(["--batch-size", b, "--resume", p.as_str()]);
        let (code, _, err) = lockstep(&small(&r));
        assert_eq!(code, 2, "{r:?}: {err}");
        assert!(err.contains("other settings"), "{r:?}: {err}");
    }
    // A torch-seeded resume of an invariant checkpoint is refused naming --seeding.
    let r = ["--batch-size", "8", "--resume", p.as_str()];
    let (code, _, err) = lockstep(&small(&r));
    assert_eq!(code, 2);
    assert!(err.contains("--seeding"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_keeps_newest_and_extends_a_run() {
    // --keep 2 leaves the two newest; a run of 8 steps resumed from step 4 of a run with the
    // same schedule (--lr-decay-iters fixed) to 8 equals the run of 8.
    let dir = tmp("keep");
    let d = dir.display().to_string();
    let sched = ["--lr-decay-iters", "8"];
    let mut a = sched.to_vec();
    a.extend([
        "--checkpoint-dir",
        d.as_str(),
        "--checkpoint-every",
        "2",
        "--keep",
        "2",
        "--max-iters",
        "4",
    ]);
    report(&small(&a));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ckpt-"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["ckpt-00000002.safetensors", "ckpt-00000004.safetensors"]
    );
    let full = report(&small(&sched));
    let mut r = sched.to_vec();
    r.extend(["--resume", d.as_str()]);
    assert_same(&full, &report(&small(&r)), "extended from step 4");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_checkpoints_exit_2_with_a_message() {
    let dir = tmp("bad");
    let d = dir.display().to_string();
    report(&small(&[
        "--checkpoint-dir",
        d.as_str(),
        "--checkpoint-every",
        "4",
    ]));
    let good = ckpt(&dir, 4);
    let bytes = std::fs::read(&good).unwrap();
    let fail = |args: &[&str], want: &str| {
        let (code, _, err) = lockstep(&small(args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(want),
            "{args:?}: {err:?} does not say {want:?}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    };
    // Truncated, a flipped byte in the tensors, an empty file, a missing file.
    let trunc = dir.join("trunc.safetensors");
    std::fs::write(&trunc, &bytes[..bytes.len() / 2]).unwrap();
    fail(&["--resume", trunc.to_str().unwrap()], "trunc.safetensors");
    let flipped = dir.join("flipped.safetensors");
    let mut b = bytes.clone();
    let n = b.len();
    b[n - 10] ^= 0x40;
    std::fs::write(&flipped, &b).unwrap();
    fail(&["--resume", flipped.to_str().unwrap()], "checksum");
    let empty = dir.join("empty.safetensors");
    std::fs::write(&empty, b"").unwrap();
    fail(&["--resume", empty.to_str().unwrap()], "empty.safetensors");
    fail(
        &["--resume", "/nonexistent/x.safetensors"],
        "/nonexistent/x",
    );
    // Another model shape: the error names the flag.
    fail(&["--resume", good.as_str(), "--n-layer", "2"], "--n-layer");
    fail(&["--resume", good.as_str(), "--seed", "7"], "--seed");
    // A schedule that ends elsewhere; a checkpoint past --max-iters.
    fail(
        &["--resume", good.as_str(), "--max-iters", "2"],
        "--max-iters",
    );
    let sched = dir.join("sched");
    let sd = sched.display().to_string();
    let with_end = ["--lr-decay-iters", "8"];
    let mut a = with_end.to_vec();
    a.extend(["--checkpoint-dir", sd.as_str(), "--checkpoint-every", "4"]);
    report(&small(&a));
    let p4 = ckpt(&sched, 4);
    let mut a = with_end.to_vec();
    a.extend(["--resume", p4.as_str(), "--max-iters", "2"]);
    fail(
        &a,
        "invalid value 2 for --max-iters: the checkpoint is at step 4",
    );
    // An mlp checkpoint is not a gpt checkpoint.
    let mlp_dir = tmp("mlp");
    let m = mlp_dir.display().to_string();
    let (code, _, err) = lockstep(
        &[
            "train",
            "--model",
            "mlp",
            "--epochs",
            "1",
            "--max-steps",
            "2",
            "--checkpoint-dir",
            m.as_str(),
            "--checkpoint-every",
            "2",
            "--json",
        ]
        .map(String::from),
    );
    assert_eq!(code, 0, "{err}");
    fail(
        &["--resume", ckpt(&mlp_dir, 2).as_str()],
        "not a gpt checkpoint",
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&mlp_dir);
}
