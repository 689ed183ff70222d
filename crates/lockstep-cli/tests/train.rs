//! `lockstep train` against the normative PyTorch program (`tests/golden/train/runs.json`,
//! written by `tools/golden_train.py` from real PyTorch), and its determinism.
//!
//! Every run of the golden grid must give the same `init_sha256`, the same parameter and
//! `state_dict` names, and a first-step loss within 1e-6 relative of PyTorch's. The global
//! generators are process-wide, so the runs go one after the other in one test.

use lockstep_cli::train::{Model, Quiet, Report, Seeding, TrainConfig, run};
use serde_json::Value;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn golden() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/golden/train/runs.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).expect("runs.json")).expect("valid JSON")
}

/// The `TrainConfig` of torch_train.py's command line `args`.
fn config(args: &[Value]) -> TrainConfig {
    let a: Vec<&str> = args
        .iter()
        .map(|v| v.as_str().expect("string arg"))
        .collect();
    let mut c = TrainConfig::default();
    let mut i = 0;
    while i < a.len() {
        let flag = a[i].trim_start_matches("--");
        if flag == "nesterov" {
            c.nesterov = true;
            i += 1;
            continue;
        }
        let v = a[i + 1];
        match flag {
            "model" => c.model = v.parse().unwrap(),
            "seed" => c.seed = v.parse().unwrap(),
            "epochs" => c.epochs = v.parse().unwrap(),
            "batch-size" => c.batch_size = v.parse().unwrap(),
            "lr" => c.lr = v.parse().unwrap(),
            "optimizer" => c.optimizer = v.parse().unwrap(),
            "momentum" => c.momentum = v.parse().unwrap(),
            "weight-decay" => c.weight_decay = v.parse().unwrap(),
            "scheduler" => c.scheduler = v.parse().unwrap(),
            "clip-grad-norm" => c.clip_grad_norm = v.parse().unwrap(),
            "dropout" => c.dropout = v.parse().unwrap(),
            "hidden" => c.hidden = v.parse().unwrap(),
            "aug" => c.aug = v.parse().unwrap(),
            "noise" => c.noise = v.parse().unwrap(),
            "workers" => c.workers = v.parse().unwrap(),
            "test-size" => c.test_size = v.parse().unwrap(),
            "max-steps" => c.max_steps = v.parse().unwrap(),
            "threads" => c.threads = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
        i += 2;
    }
    c
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-30)
}

#[test]
fn same_split_init_names_and_first_loss_as_pytorch() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let g = golden();
    let mut checked = 0;
    for case in g["runs"].as_array().unwrap() {
        let mut cfg = config(case["args"].as_array().unwrap());
        let want = &case["report"];
        // Long drift runs are summarised elsewhere (README); here the first steps suffice.
        cfg.max_steps = cfg.max_steps.clamp(1, 3);
        let label = format!("{:?}", case["args"]);
        let r = run(&cfg, &mut Quiet).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(r.init_sha256, want["init_sha256"], "{label}: init_sha256");
        assert_eq!(
            r.parameter_names,
            strings(&want["parameter_names"]),
            "{label}"
        );
        assert_eq!(
            r.state_dict_names,
            strings(&want["state_dict_names"]),
            "{label}"
        );
        let l0 = want["step_losses"][0].as_f64().unwrap();
        assert!(
            rel(r.step_losses[0], l0) <= 1e-6,
            "{label}: first loss {} vs PyTorch {l0}",
            r.step_losses[0]
        );
        checked += 1;
    }
    assert!(checked >= 80, "the grid has {checked} runs");
}

fn quick(model: &str) -> TrainConfig {
    TrainConfig {
        model: model.parse().unwrap(),
        epochs: 1,
        max_steps: 4,
        hidden: 16,
        ..TrainConfig::default()
    }
}

fn run_with(cfg: TrainConfig) -> Report {
    run(&cfg, &mut Quiet).unwrap()
}

#[test]
fn deterministic_at_any_thread_count_and_without_aug_any_worker_count() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for model in ["mlp", "cnn", "lstm"] {
        let base = run_with(TrainConfig {
            threads: 1,
            ..quick(model)
        });
        for t in [2, 3] {
            let r = run_with(TrainConfig {
                threads: t,
                ..quick(model)
            });
            assert_eq!(r.final_sha256, base.final_sha256, "{model} at {t} threads");
            assert_eq!(r.step_losses, base.step_losses, "{model} at {t} threads");
        }
        let none = |w| {
            run_with(TrainConfig {
                aug: lockstep_cli::train::Aug::None,
                workers: w,
                ..quick(model)
            })
        };
        let w0 = none(0);
        for w in [1, 3] {
            assert_eq!(
                none(w).final_sha256,
                w0.final_sha256,
                "{model}, {w} workers"
            );
        }
    }
}

#[test]
fn bad_flags_are_clear_errors() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Unknown names are refused by clap (tests/names.rs); gpt is not this module's.
    for (cfg, needle) in [
        (
            TrainConfig {
                model: Model::Gpt,
                ..quick("mlp")
            },
            "--model",
        ),
        (
            TrainConfig {
                lr: f64::INFINITY,
                ..quick("mlp")
            },
            "--lr",
        ),
        (
            TrainConfig {
                test_size: 5000,
                ..quick("mlp")
            },
            "--test-size",
        ),
        (
            TrainConfig {
                dropout: 1.5,
                ..quick("mlp")
            },
            "--dropout",
        ),
        (
            TrainConfig {
                data: Some("/nonexistent/file.csv".into()),
                ..quick("mlp")
            },
            "nonexistent",
        ),
    ] {
        let e = run(&cfg, &mut Quiet).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
}

/// A small run: 97 training samples, batches of 32 → 4 steps an epoch, 2 epochs.
fn small(model: &str, optimizer: &str, aug: &str) -> TrainConfig {
    TrainConfig {
        model: model.parse().unwrap(),
        optimizer: optimizer.parse().unwrap(),
        momentum: if optimizer == "sgd" { 0.9 } else { 0.0 },
        lr: if optimizer == "sgd" { 0.05 } else { 0.01 },
        aug: aug.parse().unwrap(),
        dropout: 0.3,
        hidden: 12,
        test_size: 1700,
        epochs: 2,
        scheduler: lockstep_cli::train::Scheduler::Step,
        ..TrainConfig::default()
    }
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Stops after `k` steps (checkpoint at `k`), resumes with `second` for the rest, and compares
/// with the uninterrupted run.
fn resume_matches(
    label: &str,
    base: TrainConfig,
    k: usize,
    first: (usize, usize),
    second: (usize, usize),
) {
    let straight = run_with(TrainConfig {
        threads: first.0,
        workers: first.1,
        ..base.clone()
    });
    let dir = tmpdir(label);
    let part1 = run_with(TrainConfig {
        threads: first.0,
        workers: first.1,
        max_steps: k,
        checkpoint_dir: Some(dir.clone()),
        checkpoint_every: k,
        ..base.clone()
    });
    assert_eq!(part1.steps, k, "{label}");
    let part2 = run_with(TrainConfig {
        threads: second.0,
        workers: second.1,
        resume: Some(dir.clone()),
        ..base.clone()
    });
    assert_eq!(part2.step_losses, straight.step_losses, "{label}: losses");
    assert_eq!(
        part2.final_sha256, straight.final_sha256,
        "{label}: final state"
    );
    assert_eq!(part2.init_sha256, straight.init_sha256, "{label}");
    assert_eq!(part2.test_accuracy, straight.test_accuracy, "{label}");
}

#[test]
fn stop_and_resume_gives_the_bits_of_a_run_that_never_stopped() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (model, optimizer, aug) in [
        ("mlp", "sgd", "torch"),
        ("mlp", "adam", "numpy"),
        ("cnn", "sgd", "numpy"),
        ("cnn", "adam", "torch"),
        ("lstm", "sgd", "torch"),
        ("lstm", "adam", "numpy"),
    ] {
        let base = small(model, optimizer, aug);
        // torch seeding: same worker count, threads changed; mid-epoch and at an epoch end.
        for workers in [0, 2] {
            for k in [2, 4] {
                let label = format!("{model}-{optimizer}-{aug}-w{workers}-k{k}");
                resume_matches(&label, base.clone(), k, (1, workers), (2, workers));
            }
        }
        // invariant seeding: the worker count may change too.
        let inv = TrainConfig {
            seeding: Seeding::Invariant,
            ..base
        };
        resume_matches(
            &format!("{model}-{optimizer}-inv-0to2"),
            inv.clone(),
            3,
            (1, 0),
            (2, 2),
        );
        resume_matches(
            &format!("{model}-{optimizer}-inv-2to3"),
            inv,
            5,
            (2, 2),
            (1, 3),
        );
    }
}

#[test]
fn invariant_seeding_does_not_depend_on_workers_or_threads() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for model in ["mlp", "cnn", "lstm"] {
        let base = TrainConfig {
            seeding: Seeding::Invariant,
            ..small(model, "sgd", "torch")
        };
        let a = run_with(TrainConfig {
            workers: 0,
            threads: 1,
            ..base.clone()
        });
        for (w, t) in [(1, 2), (3, 3)] {
            let b = run_with(TrainConfig {
                workers: w,
                threads: t,
                ..base.clone()
            });
            assert_eq!(
                a.final_sha256, b.final_sha256,
                "{model} at {w} workers {t} threads"
            );
        }
    }
}

#[test]
fn invariant_seeding_sums_micro_shards_of_8_by_default() {
    // The definition `--distributed` computes on W processes, with no flag on one.
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for model in ["mlp", "cnn", "lstm"] {
        let base = TrainConfig {
            seeding: Seeding::Invariant,
            ..small(model, "sgd", "torch")
        };
        let default = run_with(base.clone());
        let named = run_with(TrainConfig {
            micro_batch: 8,
            ..base.clone()
        });
        assert_eq!(default.final_sha256, named.final_sha256, "{model}");
        assert_eq!(default.step_losses, named.step_losses, "{model}");
        // Another size is another sum.
        let four = run_with(TrainConfig {
            micro_batch: 4,
            ..base
        });
        assert_ne!(default.final_sha256, four.final_sha256, "{model}");
    }
}

#[test]
fn bad_checkpoints_are_refused() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmpdir("bad-ckpt");
    let base = small("mlp", "sgd", "torch");
    run_with(TrainConfig {
        max_steps: 2,
        checkpoint_dir: Some(dir.clone()),
        checkpoint_every: 1,
        keep: 1,
        ..base.clone()
    });
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "--keep 1 leaves one checkpoint: {files:?}");
    let good = std::fs::read(&files[0]).unwrap();
    // Another model: refused, naming the difference.
    let e = run(
        &TrainConfig {
            resume: Some(files[0].clone()),
            hidden: 13,
            ..base.clone()
        },
        &mut Quiet,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("another run"), "{e}");
    // Truncated and corrupted files: refused, never a panic.
    for (i, bytes) in [good[..good.len() / 2].to_vec(), good[..7].to_vec(), {
        let mut b = good.clone();
        let n = b.len();
        b[n - 3] ^= 0x40;
        b
    }]
    .into_iter()
    .enumerate()
    {
        let p = dir.join(format!("corrupt-{i}.safetensors"));
        std::fs::write(&p, bytes).unwrap();
        let e = run(
            &TrainConfig {
                resume: Some(p),
                ..base.clone()
            },
            &mut Quiet,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("checkpoint"), "{e}");
    }
}

/// The library's errors say what kind of thing is wrong: a flag (named), a checkpoint file (by
/// kind, with its path), another run's checkpoint.
#[test]
fn errors_are_typed() {
    use lockstep::Error;
    use lockstep::checkpoint::CheckpointError;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bad_lr = TrainConfig {
        lr: f64::INFINITY,
        ..quick("mlp")
    };
    match lockstep_cli::train::check_config(&bad_lr, 1) {
        Err(Error::Config(m)) => assert!(m.contains("--lr"), "{m}"),
        other => panic!("{other:?}"),
    }
    let dir = tmpdir("typed-errors");
    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"not a checkpoint").unwrap();
    let resume = |p: &std::path::Path, hidden: usize| {
        run(
            &TrainConfig {
                resume: Some(p.to_path_buf()),
                hidden,
                ..quick("mlp")
            },
            &mut Quiet,
        )
        .unwrap_err()
    };
    match resume(&junk, 16) {
        Error::Checkpoint(CheckpointError::InFile { path, error }) => {
            assert_eq!(path, junk);
            assert!(
                matches!(*error, CheckpointError::NotSafetensors(_)),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let ckpt_dir = dir.join("ckpts");
    run_with(TrainConfig {
        checkpoint_dir: Some(ckpt_dir.clone()),
        checkpoint_every: 2,
        ..quick("mlp")
    });
    let file = ckpt_dir.join("ckpt-00000002.safetensors");
    match resume(&file, 13) {
        Error::Checkpoint(CheckpointError::OtherRun { theirs, ours }) => {
            assert!(theirs.contains("\"hidden\":16") && ours.contains("\"hidden\":13"));
        }
        other => panic!("{other:?}"),
    }
    // A directory of other runs' checkpoints only: each file named.
    match resume(&ckpt_dir, 13) {
        Error::Checkpoint(CheckpointError::NoneOfThisRun { dir, others, .. }) => {
            assert_eq!(dir, ckpt_dir);
            assert!(
                others[0].starts_with("ckpt-00000004.safetensors (hidden 16"),
                "{others:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}
