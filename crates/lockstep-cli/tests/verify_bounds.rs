//! `lockstep verify`'s counts are checked before anything is built or run (issue 30): a huge
//! `--runs` used to build threads × workers × runs settings up front and abort with
//! `memory allocation of 5368709120 bytes failed`.

use lockstep_cli::verify::{MAX_RUNS, MAX_TOTAL_RUNS, VerifyConfig};
use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_lockstep");

/// Runs `lockstep verify ARGS -- train --epochs 0`; returns the exit code and stderr.
fn verify(args: &[&str]) -> (Option<i32>, String) {
    let t = Instant::now();
    let out = Command::new(EXE)
        .arg("verify")
        .args(args)
        .args(["--", "train", "--epochs", "0"])
        .output()
        .expect("run lockstep verify");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "{args:?} took {:?}",
        t.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn counts_out_of_range_are_clear_errors_not_aborts() {
    let huge = u64::MAX.to_string();
    let cases: [(&[&str], &str); 7] = [
        (
            &["--runs", &huge],
            "--runs 18446744073709551615: must be between 1 and 1000",
        ),
        (&["--runs", "0"], "--runs 0: must be between 1 and 1000"),
        (&["--runs", "1001"], "--runs 1001"),
        (&["--threads", "1,2000"], "--threads 2000: at most 1024"),
        (
            &["--workers", &huge],
            "--workers 18446744073709551615: at most 256",
        ),
        (
            &["--threads", "1,2,3,4,5,6,7,8,9,10,11", "--runs", "1000"],
            "11000 runs in all",
        ),
        (
            &[
                "--threads",
                "1,2,3",
                "--workers",
                "0,1,2,3",
                "--runs",
                "1000",
            ],
            "12000 runs in all",
        ),
    ];
    for (args, want) in cases {
        let (code, err) = verify(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("error: lockstep verify: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("memory allocation"), "{args:?}: {err}");
    }
}

#[test]
fn check_bounds_the_total_without_building_it() {
    let cfg = |threads: Vec<usize>, workers: Vec<usize>, runs: Option<usize>| VerifyConfig {
        threads,
        workers,
        runs,
        train_args: vec!["train".into()],
        cmd: None,
        json: true,
    };
    assert!(cfg(vec![1, 2], vec![0], None).check().is_ok());
    assert!(cfg(vec![1], vec![0], Some(MAX_RUNS)).check().is_ok());
    assert!(cfg(vec![], vec![], Some(MAX_RUNS)).check().is_ok());
    assert!(cfg(vec![1; 10], vec![0], Some(MAX_RUNS)).check().is_ok());
    assert!(cfg(vec![1; 11], vec![0], Some(MAX_RUNS)).check().is_err());
    // Many list entries: the product saturates instead of overflowing.
    let many = vec![1usize; 1 << 16];
    let e = cfg(many.clone(), many.clone(), Some(MAX_RUNS))
        .check()
        .unwrap_err();
    // A refused count is a config error naming the bound.
    assert!(matches!(e, lockstep::Error::Config(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains(&format!("at most {MAX_TOTAL_RUNS}")), "{e}");
    // With --cmd the worker counts are not used, so they do not count.
    let mut c = cfg(vec![1; 10], vec![0, 1, 2], Some(MAX_RUNS));
    c.cmd = Some("prog".into());
    assert!(c.check().is_ok());
}

/// A run that fails is a typed error naming its setting, and converts into
/// `lockstep::Error::Io` naming the program with the same message; a refused count is
/// `Setup(Config)`.
#[test]
fn a_failing_run_is_a_typed_error() {
    use lockstep_cli::verify::{VerifyError, run};
    use std::path::Path;
    let cfg = VerifyConfig {
        threads: vec![1],
        workers: vec![],
        runs: Some(1),
        train_args: vec![],
        cmd: Some("false".into()),
        json: true,
    };
    let e = run(&cfg, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&e, VerifyError::Failed { program, .. } if program == Path::new("false")),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("the run (threads=1 run 1) failed ("),
        "{msg}"
    );
    match lockstep::Error::from(e) {
        lockstep::Error::Io { path, message, .. } => {
            assert_eq!(path, Path::new("false"));
            assert_eq!(message, msg);
        }
        other => panic!("{other:?}"),
    }
    let e = run(
        &VerifyConfig {
            runs: Some(0),
            ..cfg
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(e, VerifyError::Setup(lockstep::Error::Config(_))),
        "{e:?}"
    );
}
