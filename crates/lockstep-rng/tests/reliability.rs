//! Issue 13 regression tests for lockstep-rng.

use lockstep_rng::Generator;
use lockstep_rng::compat::torch::init;

/// Defect 11: `nn.Linear(0, n)`'s bias is +0.0 in PyTorch (`-bound` of the int 0), not -0.0.
#[test]
fn linear_with_no_inputs_has_positive_zero_bias() {
    let mut g = Generator::with_seed(0);
    let (w, b) = init::linear::<f32>(&mut g, 0, 3, true).unwrap();
    assert!(w.is_empty());
    let b = b.unwrap();
    assert_eq!(b.len(), 3);
    assert!(b.iter().all(|x| x.to_bits() == 0), "{b:?}");
    let (_, b) = init::linear::<f64>(&mut g, 0, 2, true).unwrap();
    assert!(b.unwrap().iter().all(|x| x.to_bits() == 0));
}

/// Defect 12: locking a global generator twice on one thread is an error (or, through the
/// guard-returning API, a panic with a message), never a deadlock.
#[test]
fn relocking_the_default_generator_on_one_thread_never_hangs() {
    let g = lockstep_rng::default_generator();
    let e = lockstep_rng::try_default_generator()
        .unwrap_err()
        .to_string();
    assert!(e.contains("already holds"), "{e}");
    let r = std::panic::catch_unwind(|| {
        let _again = lockstep_rng::default_generator();
    });
    assert!(r.is_err());
    drop(g);
    // Released: the next lock works, also from another thread.
    drop(lockstep_rng::try_default_generator().unwrap());
    std::thread::spawn(|| drop(lockstep_rng::default_generator()))
        .join()
        .unwrap();
}
