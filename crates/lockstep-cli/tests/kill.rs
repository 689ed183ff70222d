//! Kill test (issue 11): `lockstep train --checkpoint-every 1` is killed with SIGKILL at random
//! moments and restarted with `--resume D` until it completes; the completed run must report
//! the uninterrupted run's `final_sha256`, step losses and test accuracies, and no checkpoint
//! file left in `D` may ever fail to load.
//!
//! The real binary runs in a child process. The kill delays come from a seeded generator
//! (`LOCKSTEP_KILL_SEED`, default 11), uniform in `[0, 0.9 T)` where `T` is the median time
//! of three uninterrupted runs of that case with checkpoints. `LOCKSTEP_KILLS` kills are made (default
//! 20, the CI version); a trial is one run killed and resumed until it completes, and trials
//! cycle through the cases below. Each restart draws its thread count (1 or 2); the
//! `--seeding invariant` case also draws its worker count (0 to 3) on every restart.
//!
//! After every kill, every file of `D` is checked: `ckpt-*.safetensors` must load
//! (`Checkpoint::load`: format, shapes, checksum), its `step` must match its name and its
//! recorded step losses must be the uninterrupted run's first `step`; the only other files
//! allowed are the writer's temporary files (`.ckpt-*.safetensors.*.tmp`), which a kill
//! between creating and renaming them leaves behind (counted: "kills during a write"). A
//! resumed run must never warn that it skipped a checkpoint.
//!
//! The 200-kill figures of docs/resume.md:
//! `LOCKSTEP_KILLS=200 cargo test --release -p lockstep-cli --test kill -- --nocapture`.

#![cfg(unix)]

use lockstep::checkpoint::Checkpoint;
use lockstep_rng::Generator;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One training configuration the trials cycle through.
struct Case {
    name: &'static str,
    args: Vec<String>,
    /// `--seeding invariant`: the worker count may change on every restart.
    vary_workers: bool,
}

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// A small CSV (60 digits) so that the cnn and lstm cases cross epoch ends quickly.
fn small_csv(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../lockstep-data/data/digits.csv.gz"
    );
    let table = lockstep::data::read_csv(src, false).expect("digits.csv.gz");
    let mut text = String::new();
    for row in table.rows.iter().take(60) {
        let cells: Vec<String> = row.iter().map(|v| format!("{}", *v as i64)).collect();
        text.push_str(&cells.join(","));
        text.push('\n');
    }
    let p = dir.join("small.csv");
    std::fs::write(&p, text).expect("write small.csv");
    p
}

fn cases(csv: &Path) -> Vec<Case> {
    let csv = csv.display().to_string();
    // 20 steps (10 per epoch) on the embedded digits; 18 steps (6 per epoch, 3 epochs) on the
    // small CSV.
    let digits = "--epochs 2 --test-size 1500 --hidden 16";
    let small = format!("--data {csv} --test-size 12 --batch-size 8 --epochs 3 --hidden 16");
    vec![
        Case {
            name: "mlp sgd aug=torch workers=0",
            args: args(&format!("--model mlp {digits}")),
            vary_workers: false,
        },
        Case {
            name: "mlp adam aug=numpy workers=2",
            args: args(&format!(
                "--model mlp {digits} --optimizer adam --lr 0.01 --aug numpy --workers 2"
            )),
            vary_workers: false,
        },
        Case {
            name: "cnn sgd-momentum StepLR aug=torch workers=2",
            args: args(&format!(
                "--model cnn {small} --momentum 0.9 --lr 0.05 --scheduler step --workers 2"
            )),
            vary_workers: false,
        },
        Case {
            name: "lstm adam aug=numpy workers=0",
            args: args(&format!(
                "--model lstm {small} --optimizer adam --lr 0.01 --aug numpy"
            )),
            vary_workers: false,
        },
        Case {
            name: "mlp sgd-momentum cosine seeding=invariant workers=0..3",
            args: args(&format!(
                "--model mlp {digits} --momentum 0.9 --scheduler cosine --seeding invariant"
            )),
            vary_workers: true,
        },
    ]
}

struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Starts `lockstep train ARGS`, its output going to files in `out` (not pipes: a killed child
/// must not block on a full pipe, and nothing is lost).
fn spawn(args: &[String], out: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .arg("train")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out.join("stdout")).expect("stdout file"))
        .stderr(std::fs::File::create(out.join("stderr")).expect("stderr file"))
        .spawn()
        .expect("start lockstep")
}

fn finished(status: ExitStatus, out: &Path) -> Finished {
    Finished {
        status,
        stdout: read(&out.join("stdout")),
        stderr: read(&out.join("stderr")),
    }
}

fn run_to_end(args: &[String], out: &Path) -> (Finished, Duration) {
    let t = Instant::now();
    let status = spawn(args, out).wait().expect("wait");
    (finished(status, out), t.elapsed())
}

fn report(f: &Finished, what: &str) -> Value {
    assert!(
        f.status.success(),
        "{what}: lockstep train failed ({}): {}",
        f.status,
        f.stderr
    );
    serde_json::from_str(f.stdout.trim()).unwrap_or_else(|e| panic!("{what}: bad JSON {e}"))
}

fn ckpt_args(dir: &Path) -> Vec<String> {
    let d = dir.display().to_string();
    args(&format!(
        "--checkpoint-dir {d} --checkpoint-every 1 --keep 3 --resume {d} --json"
    ))
}

/// What the directory holds after a kill; `Err` names a failure.
#[derive(Default)]
struct Scan {
    checkpoints: usize,
    newest_step: u64,
    tmp: Vec<String>,
}

fn scan(dir: &Path, reference_losses: &[Value]) -> Result<Scan, String> {
    let mut s = Scan::default();
    if !dir.exists() {
        // Killed before the run created it.
        return Ok(s);
    }
    for e in std::fs::read_dir(dir).map_err(|e| format!("read_dir: {e}"))? {
        let e = e.map_err(|e| format!("read_dir: {e}"))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("ckpt-") && name.ends_with(".safetensors") {
            let ck =
                Checkpoint::load(e.path()).map_err(|err| format!("{name} does not load: {err}"))?;
            let meta = ck.meta();
            let step = meta["step"]
                .as_u64()
                .ok_or_else(|| format!("{name}: no step"))?;
            if name != format!("ckpt-{step:08}.safetensors") {
                return Err(format!("{name} holds step {step}"));
            }
            let losses = meta["step_losses"]
                .as_array()
                .ok_or_else(|| format!("{name}: no step_losses"))?;
            if losses.len() != step as usize
                || reference_losses.get(..step as usize) != Some(losses.as_slice())
            {
                return Err(format!(
                    "{name}: its step losses are not the uninterrupted run's first {step}"
                ));
            }
            s.checkpoints += 1;
            s.newest_step = s.newest_step.max(step);
        } else if name.starts_with(".ckpt-") && name.ends_with(".tmp") {
            s.tmp.push(name);
        } else {
            return Err(format!("stray file {name} in the checkpoint directory"));
        }
    }
    Ok(s)
}

#[derive(Default)]
struct Figures {
    trials: usize,
    kills: usize,
    /// Kills that left a new temporary file: the writer was between creating and renaming it.
    kills_in_write: usize,
    /// Kills after which the newest checkpoint was newer than before the restart.
    kills_after_progress: usize,
    /// Restarts that ran to the end without being killed.
    completions: usize,
    /// Temporary files left in the directories at the ends of the trials, in all.
    tmp_left: usize,
    /// Most temporary files left in one directory at the end of a trial.
    tmp_max: usize,
    failures: Vec<String>,
}

#[test]
fn sigkill_at_random_moments_then_resume_gives_the_uninterrupted_bits() {
    let target: usize = std::env::var("LOCKSTEP_KILLS")
        .ok()
        .map(|v| v.parse().expect("LOCKSTEP_KILLS: a number"))
        .unwrap_or(20);
    let seed: u64 = std::env::var("LOCKSTEP_KILL_SEED")
        .ok()
        .map(|v| v.parse().expect("LOCKSTEP_KILL_SEED: a number"))
        .unwrap_or(11);
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "kill-{}-{}",
        std::process::id(),
        seed
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("temp dir");
    let csv = small_csv(&root);
    let cases = cases(&csv);
    let mut rng = Generator::with_seed(seed);

    // The uninterrupted runs: without checkpoints, and with them (timed: the kill delays).
    let mut refs: Vec<(Value, Duration)> = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let out = root.join(format!("ref-{i}"));
        std::fs::create_dir_all(&out).expect("dir");
        let mut a = c.args.clone();
        a.push("--json".into());
        let (plain, _) = run_to_end(&a, &out);
        let plain = report(&plain, c.name);
        // Three uninterrupted runs with checkpoints (each in a fresh directory): the same
        // report as without, and their median time is T.
        let mut times = Vec::new();
        for r in 0..3 {
            let d = out.join(format!("ckpt-{r}"));
            let a: Vec<String> = c.args.iter().cloned().chain(ckpt_args(&d)).collect();
            let (with, t) = run_to_end(&a, &out);
            let with = report(&with, c.name);
            assert_eq!(
                plain, with,
                "{}: checkpointing changed the uninterrupted run",
                c.name
            );
            times.push(t);
        }
        times.sort();
        let t = times[1];
        eprintln!(
            "case {i} ({}): {} steps, {:.3} s uninterrupted with checkpoints (median of 3)",
            c.name,
            plain["steps"],
            t.as_secs_f64()
        );
        refs.push((plain, t));
    }

    let started = Instant::now();
    let mut f = Figures::default();
    while f.kills < target {
        let ci = f.trials % cases.len();
        let c = &cases[ci];
        let (reference, t_full) = &refs[ci];
        let ref_losses = reference["step_losses"].as_array().expect("losses");
        let out = root.join(format!("trial-{}", f.trials));
        let dir = out.join("ckpt");
        std::fs::create_dir_all(&out).expect("dir");
        f.trials += 1;
        let mut tmp_before = 0;
        let mut newest_before = 0;
        let mut restarts = 0;
        loop {
            restarts += 1;
            if restarts > 10_000 {
                f.failures.push(format!(
                    "trial {}: no completion in 10000 restarts",
                    f.trials
                ));
                break;
            }
            let threads = 1 + rng.next_u32() % 2;
            let mut a = c.args.clone();
            a.extend(args(&format!("--threads {threads}")));
            if c.vary_workers {
                a.extend(args(&format!("--workers {}", rng.next_u32() % 4)));
            }
            a.extend(ckpt_args(&dir));
            let delay = t_full.mul_f64(0.9 * rng.next_f64());
            let t0 = Instant::now();
            let mut child = spawn(&a, &out);
            let status = loop {
                if let Some(s) = child.try_wait().expect("try_wait") {
                    break s;
                }
                if t0.elapsed() >= delay {
                    // SIGKILL; a child that exited meanwhile reports its own status.
                    let _ = child.kill();
                    break child.wait().expect("wait");
                }
                std::thread::sleep(Duration::from_micros(500));
            };
            let fin = finished(status, &out);
            if fin.stderr.contains("warning: skipping") {
                f.failures.push(format!(
                    "trial {} ({}): a checkpoint was skipped: {}",
                    f.trials, c.name, fin.stderr
                ));
            }
            if status.signal() == Some(9) {
                f.kills += 1;
                match scan(&dir, ref_losses) {
                    Ok(s) => {
                        if s.tmp.len() > tmp_before {
                            f.kills_in_write += 1;
                        }
                        if s.newest_step > newest_before {
                            f.kills_after_progress += 1;
                        }
                        tmp_before = s.tmp.len();
                        newest_before = s.newest_step;
                    }
                    Err(e) => {
                        f.failures
                            .push(format!("trial {} ({}): {e}", f.trials, c.name));
                    }
                }
                continue;
            }
            f.completions += 1;
            if !status.success() {
                f.failures.push(format!(
                    "trial {} ({}): exit {status}: {}",
                    f.trials, c.name, fin.stderr
                ));
                break;
            }
            match serde_json::from_str::<Value>(fin.stdout.trim()) {
                Ok(r) if &r == reference => {}
                Ok(r) => f.failures.push(format!(
                    "trial {} ({}): resumed run differs: final_sha256 {} vs {}, step losses equal: {}",
                    f.trials,
                    c.name,
                    r["final_sha256"],
                    reference["final_sha256"],
                    r["step_losses"] == reference["step_losses"]
                )),
                Err(e) => f
                    .failures
                    .push(format!("trial {} ({}): bad JSON: {e}", f.trials, c.name)),
            }
            match scan(&dir, ref_losses) {
                Ok(s) => {
                    f.tmp_left += s.tmp.len();
                    f.tmp_max = f.tmp_max.max(s.tmp.len());
                }
                Err(e) => f
                    .failures
                    .push(format!("trial {} ({}): {e}", f.trials, c.name)),
            }
            break;
        }
        if f.failures.is_empty() {
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    eprintln!(
        "kill test (seed {seed}, {} build): {} trials, {} kills ({} left a temporary file: \
         killed inside a checkpoint write; {} after the newest checkpoint advanced), {} \
         completions, temporary files left at trial ends: {} in all, at most {} in one \
         directory; {} failures; {:.1} s",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        f.trials,
        f.kills,
        f.kills_in_write,
        f.kills_after_progress,
        f.completions,
        f.tmp_left,
        f.tmp_max,
        f.failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        f.failures.is_empty(),
        "failures:\n{}",
        f.failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&root);
}
