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

/// Issue 13 defect 7: `deep_clone` and `to_dtype` of a huge expanded view cannot allocate
/// their copy; `try_deep_clone` / `try_to_dtype` return that as an error naming the op and
/// the bytes (no abort), and give the infallible methods' values and bits otherwise.
#[test]
fn huge_deep_clone_and_to_dtype_are_errors() {
    use lockstep_tensor::{DType, Error, Tensor};
    // 2^46 elements: beyond any address space at 4 bytes each, whatever the overcommit policy.
    let n = 1usize << 46;
    let e = Tensor::from_vec(vec![1.5f32], &[1])
        .unwrap()
        .expand(&[n as isize])
        .unwrap();
    match e.try_deep_clone() {
        Err(Error::OutOfMemory { op, bytes }) => {
            assert_eq!((op, bytes), ("deep_clone", 4 * n as u128));
        }
        r => panic!("{:?}", r.map(|t| t.shape().to_vec())),
    }
    match e.try_to_dtype(DType::F64) {
        Err(Error::OutOfMemory { op, bytes }) => {
            assert_eq!((op, bytes), ("to_dtype", 8 * n as u128));
        }
        r => panic!("{:?}", r.map(|t| t.shape().to_vec())),
    }
    // The same dtype is a cheap clone, as `to_dtype`'s.
    assert_eq!(e.try_to_dtype(DType::F32).unwrap().shape(), &[n]);

    // Small tensors and views: the infallible methods' values, bit for bit.
    let bits = |t: &Tensor| -> Vec<u64> { t.to_f64_vec().iter().map(|v| v.to_bits()).collect() };
    let x = Tensor::from_vec(
        vec![-2.5f32, 0.5, 3.75, f32::NAN, -0.0, 1e30, 255.9, -1.0],
        &[2, 4],
    )
    .unwrap();
    for v in [
        x.clone(),
        x.transpose(0, 1).unwrap(),
        x.narrow(1, 1, 2).unwrap(),
    ] {
        let c = v.try_deep_clone().unwrap();
        assert!(c.is_contiguous());
        assert_eq!((c.shape(), bits(&c)), (v.shape(), bits(&v.deep_clone())));
        for dt in [DType::F32, DType::F64, DType::I64, DType::U8, DType::Bool] {
            let (a, b) = (v.to_dtype(dt), v.try_to_dtype(dt).unwrap());
            assert_eq!((a.dtype(), a.shape()), (b.dtype(), b.shape()));
            assert_eq!(bits(&a), bits(&b), "{dt:?}");
        }
    }
}

/// Issue 13: row-major strides are computed with checked arithmetic. Only an empty shape can
/// have strides beyond `usize` (`[0, 2^40, 2^40]`, e.g. from `view` of an empty tensor): they
/// saturate instead of overflowing, its element count is 0, and a copy that would need them
/// is an error (as PyTorch's "Stride calculation overflowed").
#[test]
fn strides_of_huge_empty_shapes_do_not_overflow() {
    use lockstep_tensor::layout::{contiguous_strides, try_contiguous_strides};
    use lockstep_tensor::{DType, Tensor};
    let big = 1usize << 40;
    assert_eq!(try_contiguous_strides("t", &[2, 3, 4]).unwrap(), [12, 4, 1]);
    assert_eq!(contiguous_strides(&[2, 0, 4]), [4, 4, 1]);
    let e = try_contiguous_strides("t", &[0, big, big]).unwrap_err();
    assert!(e.to_string().contains("strides overflow"), "{e}");
    assert_eq!(contiguous_strides(&[0, big, big]), [usize::MAX, big, 1]);

    let x = Tensor::zeros(&[0], DType::F32).unwrap();
    let v = x.view(&[0, big as isize, big as isize]).unwrap();
    assert_eq!((v.numel(), v.to_vec::<f32>().unwrap().len()), (0, 0));
    // A zero after sizes whose product overflows: still 0 elements.
    let w = x.view(&[big as isize, big as isize, 0]).unwrap();
    assert_eq!(w.numel(), 0);
    assert_eq!(w.try_contiguous().unwrap().numel(), 0);
    // An empty view inside a larger storage must be copied by `contiguous`: refused.
    let y = Tensor::zeros(&[4], DType::F32)
        .unwrap()
        .narrow(0, 2, 0)
        .unwrap()
        .view(&[0, big as isize, big as isize])
        .unwrap();
    let e = y.try_contiguous().unwrap_err();
    assert!(e.to_string().contains("strides overflow"), "{e}");
}

/// Issue 13 defect 7: Winograd's per-thread scratch buffers are allocated fallibly. An empty
/// batch of 2^40 channels needs no output, but the weight gradient's per-part buffers are
/// sized by the channels: an OutOfMemory error naming the algorithm, not an abort. The forward
/// pass and the input gradient have no work and allocate nothing.
#[test]
fn winograd_scratch_for_huge_channel_counts_is_an_error() {
    use lockstep_tensor::autotune::with_algorithm;
    use lockstep_tensor::ops::conv::Conv2dParams;
    use lockstep_tensor::{DType, Error, Tensor};
    let c = 1usize << 40;
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let x = Tensor::zeros(&[0, c, 4, 4], DType::F32).unwrap();
    let w = Tensor::zeros(&[0, c, 3, 3], DType::F32).unwrap();
    let gy = Tensor::zeros(&[0, 0, 4, 4], DType::F32).unwrap();
    let y = with_algorithm("conv2d.winograd_f4x3", || x.conv2d(&w, None, p)).unwrap();
    assert_eq!(y.shape(), &[0, 0, 4, 4]);
    let dx = with_algorithm("conv2d_input_grad.winograd_f4x3", || {
        Tensor::conv2d_backward_input(&gy, x.shape(), &w, p)
    })
    .unwrap();
    assert_eq!(dx.shape(), x.shape());
    let r = with_algorithm("conv2d_weight_grad.winograd_f4x3", || {
        Tensor::conv2d_backward_weight(&gy, &x, w.shape(), p)
    });
    match r {
        Err(Error::OutOfMemory { op, bytes }) => {
            assert_eq!(op, "conv2d_weight_grad.winograd_f4x3");
            assert!(bytes >= 4 * c as u128, "{bytes}");
        }
        r => panic!("{:?}", r.map(|t| t.shape().to_vec())),
    }
}
