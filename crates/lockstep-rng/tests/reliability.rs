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

/// Defect 8: sizes near `usize::MAX` are refused with an error before any draw (they used to
/// panic with "capacity overflow").
#[test]
fn huge_randperm_and_multinomial_are_errors() {
    use lockstep_rng::compat::torch;
    let mut g = Generator::with_seed(0);
    let before = g.get_state();
    for n in [usize::MAX, usize::MAX / 8 + 1, 1 << 62] {
        let e = torch::try_randperm(&mut g, n).unwrap_err().to_string();
        assert!(e.contains("randperm"), "{e}");
    }
    let e = torch::multinomial(&mut g, &[0.5f32, 0.5], 1, 2, usize::MAX, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("multinomial") && e.contains("out of memory"),
        "{e}"
    );
    let e = torch::multinomial(&mut g, &[0.5f64; 4], 2, 2, usize::MAX, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("out of memory"), "{e}");
    assert_eq!(g.get_state(), before, "nothing drawn");
    // The fallible form draws what the plain one does.
    let a = torch::try_randperm(&mut Generator::with_seed(3), 50).unwrap();
    assert_eq!(a, torch::randperm(&mut Generator::with_seed(3), 50));
}

mod fuzz {
    //! Property tests of every RNG state format: a refused state leaves the generator as it
    //! was; an accepted one can be drawn from. `PROPTEST_CASES` sets the count (default 2,000).
    use lockstep_rng::Generator;
    use lockstep_rng::compat::numpy::{LegacyState, RandomState};
    use lockstep_rng::compat::python::{PyState, Random};
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(2000);
        ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn torch_state_bytes(seed in any::<u64>(), edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), cut in any::<usize>(), do_cut in any::<bool>()) {
            let mut b = Generator::with_seed(seed).get_state();
            for (i, v) in edits {
                let k = i % b.len();
                b[k] = v;
            }
            if do_cut {
                b.truncate(cut % (b.len() + 1));
            }
            let mut g = Generator::with_seed(1);
            let before = g.clone();
            match g.set_state(&b) {
                Ok(()) => {
                    let _ = g.next_u32();
                }
                Err(_) => prop_assert_eq!(g, before),
            }
        }

        #[test]
        fn python_state(mt in proptest::collection::vec(any::<u32>(), 620..628), pos in 0usize..700, gauss in proptest::option::of(any::<f64>())) {
            let mut r = Random::from_u64(3);
            let before = r.getstate();
            match r.setstate(&PyState { mt, pos, gauss_next: gauss }) {
                Ok(()) => {
                    let _ = r.random();
                }
                Err(_) => prop_assert_eq!(r.getstate(), before),
            }
        }

        #[test]
        fn numpy_legacy_state(key in proptest::collection::vec(any::<u32>(), 620..628), pos in 0usize..700, has_gauss in any::<bool>(), g in any::<f64>()) {
            let mut r = RandomState::new(3);
            let before = r.get_state();
            match r.set_state(&LegacyState { key, pos, has_gauss, cached_gaussian: g }) {
                Ok(()) => {
                    let _ = r.random_sample_one();
                }
                Err(_) => prop_assert_eq!(r.get_state(), before),
            }
        }
    }
}
