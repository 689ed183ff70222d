//! Checkpoint files: round trip, and every corruption or truncation refused without a panic.

use lockstep::checkpoint::{Checkpoint, CheckpointError};
use lockstep::{DType, Error, Tensor};
use proptest::prelude::*;

fn sample() -> Checkpoint {
    let mut c = Checkpoint::new();
    c.put_tensor(
        "0.weight",
        Tensor::from_vec(vec![1.5f32, -2.0, 0.25, 8.0], &[2, 2]).unwrap(),
    );
    c.put_tensor("1.num_batches_tracked", Tensor::scalar(7i64));
    c.put_tensor(
        "x.f64",
        Tensor::from_vec(vec![0.1f64, 0.2, 0.3], &[3]).unwrap(),
    );
    c.put_tensor("mask", Tensor::from_vec(vec![true, false], &[2]).unwrap());
    c.put_tensor("bytes", Tensor::from_vec(vec![1u8, 2, 3], &[3]).unwrap());
    c.set_meta(&serde_json::json!({"step": 3, "note": "hello"}));
    c
}

#[test]
fn round_trip_keeps_every_tensor_and_the_metadata() {
    let c = sample();
    let back = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
    for name in c.names() {
        let (a, b) = (c.tensor(name).unwrap(), back.tensor(name).unwrap());
        assert_eq!(a.shape(), b.shape(), "{name}");
        assert_eq!(a.dtype(), b.dtype(), "{name}");
        assert_eq!(a.to_f64_vec(), b.to_f64_vec(), "{name}");
    }
    assert_eq!(back.meta()["step"], 3);
    assert_eq!(back.tensor("0.weight").unwrap().dtype(), DType::F32);
}

#[test]
fn save_is_atomic_and_load_checks_the_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ckpt-unit");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a.safetensors");
    sample().save(&p).unwrap();
    assert!(Checkpoint::load(&p).is_ok());
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    assert!(Checkpoint::load(dir.join("missing.safetensors")).is_err());
    // A plain safetensors file without lockstep's metadata is not a checkpoint.
    let plain = dir.join("plain.safetensors");
    let mut c = sample();
    c.put_tensor("y", Tensor::zeros(&[1], DType::F32).unwrap());
    let mut bytes = c.to_bytes().unwrap();
    let s = String::from_utf8_lossy(&bytes).replace("lockstep.format", "lockstep.formxt");
    bytes = s.into_bytes();
    std::fs::write(&plain, bytes).unwrap();
    assert!(Checkpoint::load(&plain).is_err());
}

/// Each refusal says what is wrong, by kind, with the file's path where there is a file.
#[test]
fn each_refusal_names_its_kind() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ckpt-kinds");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kind = |r: Result<Checkpoint, Error>| match r {
        Err(Error::Checkpoint(e)) => e,
        other => panic!("not a checkpoint error: {other:?}"),
    };
    // No file: an I/O error naming the action and the path.
    let missing = dir.join("missing.safetensors");
    match kind(Checkpoint::load(&missing)) {
        CheckpointError::Io { action, path, .. } => {
            assert_eq!((action.as_str(), path), ("read", missing));
        }
        e => panic!("{e:?}"),
    }
    let good = sample().to_bytes().unwrap();
    // Truncated: not a safetensors file; through `load`, inside the file's path.
    assert!(matches!(
        kind(Checkpoint::from_bytes(&good[..good.len() / 2])),
        CheckpointError::NotSafetensors(_)
    ));
    let short = dir.join("short.safetensors");
    std::fs::write(&short, &good[..good.len() / 2]).unwrap();
    match kind(Checkpoint::load(&short)) {
        CheckpointError::InFile { path, error } => {
            assert_eq!(path, short);
            assert!(matches!(*error, CheckpointError::NotSafetensors(_)));
        }
        e => panic!("{e:?}"),
    }
    // Same-length edits of the header's bytes.
    let edit = |from: &str, to: &str| {
        let (from, to) = (from.as_bytes(), to.as_bytes());
        assert_eq!(from.len(), to.len());
        let at = good
            .windows(from.len())
            .position(|w| w == from)
            .expect("in the header");
        let mut b = good.clone();
        b[at..at + from.len()].copy_from_slice(to);
        b
    };
    // Without lockstep's format key, and of another format version.
    assert_eq!(
        kind(Checkpoint::from_bytes(&edit(
            "lockstep.format",
            "lockstep.formxt"
        ))),
        CheckpointError::NotLockstep
    );
    let version = edit("\"lockstep.format\":\"1\"", "\"lockstep.format\":\"7\"");
    assert_eq!(
        kind(Checkpoint::from_bytes(&version)),
        CheckpointError::Version { found: "7".into() }
    );
    // A changed tensor byte (the last byte is data): the checksum catches it.
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(
        kind(Checkpoint::from_bytes(&flipped)),
        CheckpointError::ChecksumMismatch
    );
    // A missing entry is named.
    let c = Checkpoint::from_bytes(&good).unwrap();
    match c.loader() {
        Err(Error::Checkpoint(CheckpointError::Missing(what))) => assert_eq!(what, "loader state"),
        other => panic!("{other:?}"),
    }
    // The messages stay readable.
    assert_eq!(
        Error::from(CheckpointError::ChecksumMismatch).to_string(),
        "checkpoint: checksum mismatch: the file is corrupt"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Any flipped byte is refused (the header no longer parses, or the checksum fails) —
    /// never accepted as a different valid checkpoint, never a panic.
    #[test]
    fn any_flipped_byte_is_refused(pos in 0usize..10_000, bit in 0u8..8) {
        let good = sample().to_bytes().unwrap();
        let mut b = good.clone();
        let i = pos % b.len();
        b[i] ^= 1 << bit;
        let r = Checkpoint::from_bytes(&b);
        if let Ok(c) = r {
            // Only a flip inside JSON whitespace or an equivalent spelling could parse; the
            // content must then be exactly the original's.
            let orig = sample();
            for name in orig.names() {
                prop_assert_eq!(orig.tensor(name).unwrap().to_f64_vec(), c.tensor(name).unwrap().to_f64_vec());
            }
        }
    }

    /// Every truncation is refused.
    #[test]
    fn any_truncation_is_refused(len in 0usize..10_000) {
        let good = sample().to_bytes().unwrap();
        let n = len % good.len();
        prop_assert!(Checkpoint::from_bytes(&good[..n]).is_err());
    }

    /// Arbitrary bytes never panic.
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = Checkpoint::from_bytes(&b);
        let mut with_header = (b.len() as u64).to_le_bytes().to_vec();
        with_header.extend(&b);
        let _ = Checkpoint::from_bytes(&with_header);
    }
}

#[test]
fn global_and_registered_generators_round_trip() {
    use std::sync::{Arc, Mutex};
    let mine = Arc::new(Mutex::new(lockstep::Generator::with_seed(5)));
    lockstep::register_rng(mine.clone());
    lockstep::seed_everything(3).unwrap();
    let mut c = Checkpoint::new();
    c.put_global_rngs();
    assert!(c.names().any(|n| n.starts_with("rng.registered.")));
    let c = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
    let draw = || {
        (
            lockstep::default_generator().next_u64(),
            lockstep::python_random().random(),
            lockstep::numpy_random().random_sample_one(),
            mine.lock().unwrap().next_u64(),
        )
    };
    let first = draw();
    c.restore_global_rngs().unwrap();
    assert_eq!(draw(), first, "every generator is back where it was saved");
}
