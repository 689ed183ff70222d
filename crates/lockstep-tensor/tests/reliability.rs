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
