//! Checkpoint directories shared by several runs, and checkpoints whose metadata contradicts
//! itself (issue 30), through the real binary in child processes.
//!
//! Before: a run starting with `--checkpoint-dir D` deleted every temporary checkpoint file in
//! `D`, including the one a live run was about to rename (that run then failed with `cannot
//! write D/ckpt-N.safetensors: No such file or directory`), and two live runs overwrote and
//! `--keep`-deleted each other's checkpoints. Now a run holds `D`'s lock while it runs and a
//! second one refuses at start; `--resume D` skips another run's checkpoints; metadata that
//! contradicts itself is refused even when its checksum matches.
//!
//! `LOCKSTEP_CONCURRENT_ROUNDS` (default 3) rounds of `LOCKSTEP_CONCURRENT_RUNS` (default 4)
//! runs started at once on one directory; the figures of RELIABILITY.md:
//! `LOCKSTEP_CONCURRENT_ROUNDS=50 cargo test --release -p lockstep-cli --test checkpoint_dir -- --nocapture`.

#![cfg(unix)]

use lockstep::checkpoint::Checkpoint;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");
/// 10 steps per epoch (297 training samples, batch 32).
const SMALL: &str = "--model mlp --test-size 1500 --hidden 16 --threads 1";
const IN_USE: &str = "is in use by another running `lockstep train`";

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lockstep-ckdir-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn train(extra: &str) -> Command {
    let mut c = Command::new(EXE);
    c.arg("train")
        .args(args(SMALL))
        .args(args(extra))
        .arg("--json");
    c
}

fn spawn(extra: &str) -> Child {
    train(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockstep train")
}

/// Waits for a child at most `limit` (then kills it and fails).
fn finish(mut child: Child, limit: Duration) -> Output {
    let t = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a run took more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn report(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "{}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON report")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn checkpoints(d: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("ckpt-") && n.ends_with(".safetensors")
        })
        .collect();
    v.sort();
    v
}

fn env_usize(k: &str, default: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_second_run_on_a_live_directory_refuses_and_the_first_completes() {
    let d = tempdir("live");
    let dir = d.display().to_string();
    let plain = report(&finish(spawn("--epochs 6"), Duration::from_secs(300)));
    let ck = format!("--epochs 6 --checkpoint-dir {dir} --checkpoint-every 1 --keep 2");
    let first = spawn(&ck);
    // Wait until the first run writes checkpoints: it is live and between writes.
    let t = Instant::now();
    while checkpoints(&d).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut refused = 0;
    let mut second_done = 0;
    for _ in 0..5 {
        let o = finish(
            spawn(&format!(
                "--epochs 1 --checkpoint-dir {dir} --checkpoint-every 1"
            )),
            Duration::from_secs(120),
        );
        if o.status.success() {
            // Only possible once the first run has ended.
            second_done += 1;
        } else {
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains(IN_USE), "{}", stderr(&o));
            assert!(stderr(&o).contains(&dir), "{}", stderr(&o));
            refused += 1;
        }
    }
    let o = finish(first, Duration::from_secs(300));
    let r = report(&o);
    println!(
        "a live run with --checkpoint-every 1: {refused} starts on its directory refused, \
         {second_done} completed after it ended; it ended with the uninterrupted run's bits"
    );
    assert!(refused > 0, "no start while the first run was live");
    assert_eq!(r["final_sha256"], plain["final_sha256"], "{second_done}");
    assert_eq!(r["step_losses"], plain["step_losses"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn runs_started_together_on_one_directory_complete_or_refuse_clearly() {
    let rounds = env_usize("LOCKSTEP_CONCURRENT_ROUNDS", 3);
    let n = env_usize("LOCKSTEP_CONCURRENT_RUNS", 4);
    let d = tempdir("together");
    let dir = d.display().to_string();
    let plain = report(&finish(spawn("--epochs 2"), Duration::from_secs(300)));
    let (mut ok, mut refused) = (0, 0);
    let t = Instant::now();
    for _ in 0..rounds {
        // The same run, so that any checkpoint left is one of it at its step.
        let cmd = format!("--epochs 2 --checkpoint-dir {dir} --checkpoint-every 1 --keep 3");
        let children: Vec<Child> = (0..n).map(|_| spawn(&cmd)).collect();
        for c in children {
            let o = finish(c, Duration::from_secs(300));
            if o.status.success() {
                let r = report(&o);
                assert_eq!(r["final_sha256"], plain["final_sha256"]);
                ok += 1;
            } else {
                assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
                assert!(stderr(&o).contains(IN_USE), "{}", stderr(&o));
                refused += 1;
            }
        }
        for p in checkpoints(&d) {
            let ck = Checkpoint::load(&p).unwrap_or_else(|e| panic!("{e}"));
            let step = ck.meta()["step"].as_u64().unwrap() as usize;
            assert!(p.ends_with(format!("ckpt-{step:08}.safetensors")));
            let losses: Vec<Value> = ck.meta()["step_losses"].as_array().unwrap().clone();
            assert_eq!(losses[..], plain["step_losses"].as_array().unwrap()[..step]);
        }
    }
    println!(
        "{rounds} rounds of {n} runs started together on one --checkpoint-dir: {ok} completed \
         with the uninterrupted run's bits, {refused} refused at start (directory in use), 0 \
         other outcomes; {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(ok >= rounds, "every round has a run that completes");
    assert_eq!(ok + refused, rounds * n);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_killed_writers_temporary_file_is_removed_at_start() {
    let d = tempdir("stale");
    let stale = d.join(".ckpt-00000003.safetensors.AbC123.tmp");
    std::fs::write(&stale, b"partial").unwrap();
    let other = d.join("notes.tmp");
    std::fs::write(&other, b"mine").unwrap();
    let o = finish(
        spawn(&format!(
            "--epochs 1 --max-steps 1 --checkpoint-dir {}",
            d.display()
        )),
        Duration::from_secs(120),
    );
    report(&o);
    assert!(!stale.exists(), "a stale temporary file was kept");
    assert!(other.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn resume_skips_another_runs_newer_checkpoints_or_names_them() {
    let d = tempdir("resume");
    let dir = d.display().to_string();
    let plain = report(&finish(spawn("--epochs 2"), Duration::from_secs(300)));
    // Run A (seed 0) leaves ckpt 5 and 10; run B (lr 0.05, seed 1) then ckpt 15.
    report(&finish(
        spawn(&format!(
            "--epochs 2 --max-steps 10 --checkpoint-dir {dir} --checkpoint-every 5"
        )),
        Duration::from_secs(300),
    ));
    report(&finish(
        spawn(&format!(
            "--epochs 2 --max-steps 15 --seed 1 --lr 0.05 --checkpoint-dir {dir} \
             --checkpoint-every 15"
        )),
        Duration::from_secs(300),
    ));
    // A resumes from its own ckpt-10, not B's newer ckpt-15, and ends with the bits of the
    // run that never stopped.
    let o = finish(
        spawn(&format!("--epochs 2 --resume {dir}")),
        Duration::from_secs(300),
    );
    let r = report(&o);
    assert_eq!(r["final_sha256"], plain["final_sha256"]);
    assert_eq!(r["step_losses"], plain["step_losses"]);
    let err = stderr(&o);
    assert!(
        err.contains("ckpt-00000015.safetensors: another run's checkpoint (lr 0.05, seed 1)"),
        "{err}"
    );
    // A third run finds none of its own: every file and its run's settings are named.
    let o = finish(
        spawn(&format!("--epochs 2 --seed 2 --resume {dir}")),
        Duration::from_secs(300),
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    for want in [
        "no checkpoint of this run in",
        "3 checkpoint(s) of other runs",
        "ckpt-00000015.safetensors (lr 0.05, seed 1)",
        "ckpt-00000010.safetensors (seed 0)",
        "ckpt-00000005.safetensors (seed 0)",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn metadata_that_contradicts_itself_is_refused() {
    let d = tempdir("meta");
    let dir = d.display().to_string();
    report(&finish(
        spawn(&format!(
            "--epochs 2 --max-steps 12 --checkpoint-dir {dir} --checkpoint-every 12"
        )),
        Duration::from_secs(300),
    ));
    let good = Checkpoint::load(d.join("ckpt-00000012.safetensors")).unwrap();
    let meta = good.meta();
    assert_eq!(
        (meta["step"].as_u64(), meta["epoch"].as_u64()),
        (Some(12), Some(1))
    );
    let losses = meta["step_losses"].clone();
    let first = |n: usize| Value::Array(losses.as_array().unwrap()[..n].to_vec());
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "step",
            u64::MAX.into(),
            "step 18446744073709551615 but 12 step losses",
        ),
        ("step", 7.into(), "step 7 but 12 step losses"),
        ("step_losses", first(11), "step 12 but 11 step losses"),
        ("epoch", 0.into(), "epoch 0 but 1 test accuracies"),
        (
            "test_accuracy",
            serde_json::json!([]),
            "epoch 1 but 0 test accuracies",
        ),
        (
            "test_accuracy",
            serde_json::json!([1.5]),
            "a test accuracy of 1.5",
        ),
        (
            "init_sha256",
            "zz".into(),
            "init_sha256 \"zz\" is not a SHA-256",
        ),
        (
            "epoch",
            u64::MAX.into(),
            "epoch 18446744073709551615 but 1 test accuracies",
        ),
        ("epoch", (-1).into(), "no epoch, or not a count: -1"),
    ];
    for (k, v, want) in cases {
        let mut m = meta.clone();
        m[k] = v.clone();
        let mut ck = good.clone();
        ck.set_meta(&m);
        let p = d.join("bad.safetensors");
        ck.save(&p).unwrap();
        // The checksum matches: only the consistency check can refuse it.
        Checkpoint::load(&p).unwrap();
        let o = finish(
            spawn(&format!("--epochs 2 --resume {}", p.display())),
            Duration::from_secs(120),
        );
        assert_eq!(o.status.code(), Some(2), "{k} = {v}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{k} = {v}: {}", stderr(&o));
    }
    // Lengths that agree, but step 3 cannot be in epoch 1 (steps 11..=20).
    let mut m = meta.clone();
    m["step"] = 3.into();
    m["step_losses"] = first(3);
    let mut ck = good.clone();
    ck.set_meta(&m);
    let p = d.join("bad.safetensors");
    ck.save(&p).unwrap();
    let o = finish(
        spawn(&format!("--epochs 2 --resume {}", p.display())),
        Duration::from_secs(120),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("step 3 is not in epoch 1 (10 steps per epoch: steps 11..=20)"),
        "{}",
        stderr(&o)
    );
    // In a directory, a contradicting newest checkpoint is skipped with a warning.
    let mut m = meta.clone();
    m["step"] = 7.into();
    let mut ck = good.clone();
    ck.set_meta(&m);
    ck.save(d.join("ckpt-00000013.safetensors")).unwrap();
    std::fs::remove_file(&p).unwrap();
    let o = finish(
        spawn(&format!("--epochs 2 --resume {dir}")),
        Duration::from_secs(120),
    );
    report(&o);
    assert!(stderr(&o).contains("contradicts itself"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}
