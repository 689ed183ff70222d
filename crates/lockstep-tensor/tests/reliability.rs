//! Issue 13 regression tests for the tensor layer: thread counts and file writes.

use lockstep_tensor::threads::{MAX_THREADS, Par, resolve_num_threads};

#[test]
fn absurd_thread_counts_are_refused_and_zero_means_all_cores() {
    for n in [MAX_THREADS + 1, 65_535, usize::MAX] {
        let e = resolve_num_threads(n).unwrap_err().to_string();
        assert!(e.contains("threads"), "{e}");
    }
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(resolve_num_threads(0).unwrap(), all.min(MAX_THREADS));
    assert_eq!(resolve_num_threads(3).unwrap(), 3);
    assert_eq!(Par::new(2).threads(), 2);
}

/// Issue 13 defect 12: drawing from the default generator while this thread holds its guard
/// used to deadlock; now it panics at once with a message (`try_default_generator` is the
/// error-returning form).
#[test]
fn randn_while_holding_the_default_generator_does_not_hang() {
    use lockstep_tensor::{DType, Tensor};
    let g = lockstep_rng::default_generator();
    let r = std::panic::catch_unwind(|| Tensor::randn(&[2], DType::F32, None));
    assert!(r.is_err());
    drop(g);
    assert!(Tensor::randn(&[2], DType::F32, None).is_ok());
}

/// Property test of the autotune file reader: random edits of a valid file never panic, and
/// what is accepted has the documented shape. One test (the autotune cache is process-wide).
#[test]
fn autotune_file_edits_never_panic() {
    use lockstep_tensor::autotune;
    use proptest::prelude::*;
    let dir = std::env::temp_dir().join(format!("lockstep-fuzz-autotune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("tune.json");
    let feats = serde_json::to_string(&autotune::cpu_features()).unwrap();
    let good = format!(
        r#"{{"format": "lockstep-autotune/1", "lockstep": "{}", "cpu_features": {feats}, "choices": [{{"op": "conv2d", "key": "1x1x8x8", "algo": "conv2d.im2col_gemm"}}]}}"#,
        env!("CARGO_PKG_VERSION")
    );
    std::fs::write(&p, &good).unwrap();
    assert_eq!(autotune::load(&p).unwrap(), 1);
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let edits = proptest::collection::vec(
        (
            any::<usize>(),
            prop_oneof![any::<u8>(), Just(b'"'), Just(b'.'), Just(b'7'), Just(b'[')],
        ),
        1..4,
    );
    runner
        .run(&edits, |e| {
            let mut b = good.clone().into_bytes();
            for (i, v) in e {
                let k = i % b.len();
                b[k] = v;
            }
            std::fs::write(&p, &b).unwrap();
            let _ = autotune::load(&p);
            Ok(())
        })
        .unwrap();
    autotune::clear();
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 13 defect 7: an allocation sized from input that cannot be made is an error naming
/// the op and the bytes, not an abort.
#[test]
fn huge_zeros_is_an_out_of_memory_error() {
    use lockstep_tensor::{DType, Error, Tensor};
    let e = Tensor::zeros(&[1 << 45], DType::F64).unwrap_err();
    assert!(
        matches!(e, Error::OutOfMemory { op: "full", bytes } if bytes == 8 << 45),
        "{e}"
    );
    assert!(e.to_string().contains("out of memory"));
}
