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
/// used to deadlock; now it is an error naming the guard (neither a hang nor a panic).
#[test]
fn randn_while_holding_the_default_generator_does_not_hang() {
    use lockstep_tensor::{DType, Tensor};
    let g = lockstep_rng::default_generator();
    let e = Tensor::randn(&[2], DType::F32, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("already holds default_generator()'s guard"),
        "{e}"
    );
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

/// Issue 13 defects 7 and 8: random tensors, `arange` and copies of huge views refuse sizes
/// that cannot be held with an error (no abort, no "capacity overflow" panic), before drawing.
#[test]
fn huge_random_arange_and_copies_are_errors() {
    use lockstep_rng::Generator;
    use lockstep_tensor::{DType, Error, Tensor};
    let oom = |r: Result<Tensor, Error>, op: &str| match r {
        Err(Error::OutOfMemory { op: o, bytes }) => {
            assert_eq!(o, op);
            assert!(bytes >= 1 << 40, "{bytes}");
        }
        Err(e) => panic!("{op}: {e}"),
        Ok(t) => panic!("{op}: allocated {:?}", t.shape()),
    };
    let mut g = Generator::with_seed(7);
    let before = g.get_state();
    let n = 1usize << 40;
    oom(Tensor::rand(&[n], DType::F32, Some(&mut g)), "full");
    oom(Tensor::randn(&[n], DType::F64, Some(&mut g)), "full");
    oom(
        Tensor::randint(0, 10, &[n], DType::I64, Some(&mut g)),
        "randint",
    );
    oom(Tensor::randperm(n, Some(&mut g)), "randperm");
    assert!(Tensor::randperm(usize::MAX, Some(&mut g)).is_err());
    assert!(Tensor::randint(0, 10, &[usize::MAX, 2], DType::I64, Some(&mut g)).is_err());
    let p = Tensor::from_vec(vec![0.25f32; 4], &[4]).unwrap();
    assert!(Tensor::multinomial(&p, usize::MAX, true, Some(&mut g)).is_err());
    oom(
        Tensor::multinomial(&p, n, true, Some(&mut g)),
        "multinomial",
    );
    let p2 = Tensor::from_vec(vec![0.25f32; 8], &[2, 4]).unwrap();
    assert!(Tensor::multinomial(&p2, usize::MAX, true, Some(&mut g)).is_err());
    assert_eq!(g.get_state(), before, "a refused size draws nothing");

    oom(Tensor::arange(0.0, n as f64, 1.0, DType::I64), "arange");
    assert!(Tensor::arange(0.0, 1e300, 1.0, DType::F32).is_err());
    assert!(Tensor::arange(0.0, 1e19, 1.0, DType::F32).is_err());

    let e = Tensor::from_vec(vec![1.5f64], &[1])
        .unwrap()
        .expand(&[n as isize])
        .unwrap();
    oom(e.try_contiguous(), "contiguous");
    assert!(matches!(
        e.to_vec::<f64>(),
        Err(Error::OutOfMemory { op: "to_vec", .. })
    ));
    // In-place sampling of a huge view copies it first: an error too.
    let mut v = e.clone();
    assert!(v.normal_(0.0, 1.0, Some(&mut g)).is_err());
    assert_eq!(g.get_state(), before);
}

/// A slice of an empty tensor whose start lies past the (empty) storage reads as empty.
#[test]
fn narrow_of_an_empty_tensor_stays_inside_its_storage() {
    use lockstep_tensor::{DType, Tensor};
    let x = Tensor::zeros(&[0, 5], DType::F32).unwrap();
    let y = x.narrow(1, 2, 3).unwrap();
    assert_eq!(y.shape(), &[0, 3]);
    assert_eq!(y.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    assert_eq!(y.contiguous().shape(), &[0, 3]);
    assert!(y.data::<f32>().unwrap().is_empty());
    let z = Tensor::zeros(&[4, 0], DType::I64)
        .unwrap()
        .narrow(0, 3, 1)
        .unwrap();
    assert_eq!(z.to_vec::<i64>().unwrap(), Vec::<i64>::new());
}

/// The random ops are serial: the same bits at any thread count.
#[test]
fn random_tensors_do_not_depend_on_threads() {
    use lockstep_rng::Generator;
    use lockstep_tensor::threads::with_num_threads;
    use lockstep_tensor::{DType, Tensor};
    let run = || {
        let mut g = Generator::with_seed(3);
        let a = Tensor::randint(-5, 5, &[3, 7], DType::I64, Some(&mut g)).unwrap();
        let b = Tensor::randperm(1000, Some(&mut g)).unwrap();
        let c = Tensor::arange(0.0, 9.5, 0.5, DType::F32).unwrap();
        (
            a.to_vec::<i64>().unwrap(),
            b.to_vec::<i64>().unwrap(),
            c.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>(),
        )
    };
    let want = with_num_threads(1, run);
    for n in [2, 3, 8] {
        assert_eq!(with_num_threads(n, run), want, "{n} threads");
    }
}
