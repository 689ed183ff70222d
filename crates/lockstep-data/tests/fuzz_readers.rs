//! Property tests ("fuzzing" on stable Rust) of every reader of outside input in this crate:
//! `.npy`, `.npz`, CSV, IDX (plain and gzip) and `LoaderState` bytes. Inputs are valid files
//! with random byte edits (replace, insert, delete, truncate, splice) and random bytes; the
//! property is that the reader returns (`Ok` or `Err`) without panicking, and that what it
//! accepts is consistent. Overflow checks are on (debug profile).
//!
//! Cases per property: `PROPTEST_CASES` (default 1,000 here, a few seconds in debug); the
//! figures in RELIABILITY.md come from `PROPTEST_CASES=100000 cargo test --release`.
//! The committed corpus of tests/golden/data/npy_corpus is replayed by npy_differential.rs.

use lockstep_data::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> Vec<u8> {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/data/fixtures")
        .join(name);
    std::fs::read(p).unwrap()
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    /// Copies `len` bytes from `from` over `to` (moves a length field, a header, ...).
    Splice(usize, usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        any::<u8>(),
        Just(0u8),
        Just(0xFF),
        Just(b'('),
        Just(b')'),
        Just(b','),
        Just(b'\''),
        Just(b'\n'),
        Just(b'9'),
    ];
    prop_oneof![
        4 => (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Set(i, b)),
        1 => (any::<usize>(), proptest::collection::vec(byte, 1..8)).prop_map(|(i, v)| Edit::Insert(i, v)),
        1 => (any::<usize>(), 1usize..16).prop_map(|(i, n)| Edit::Delete(i, n)),
        1 => any::<usize>().prop_map(Edit::Truncate),
        1 => (any::<usize>(), any::<usize>(), 1usize..16).prop_map(|(a, b, n)| Edit::Splice(a, b, n)),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = b.len().max(1);
        match e {
            Edit::Set(i, v) => {
                if !b.is_empty() {
                    let k = i % b.len();
                    b[k] = *v;
                }
            }
            Edit::Insert(i, v) => {
                let k = i % (b.len() + 1);
                b.splice(k..k, v.iter().copied());
            }
            Edit::Delete(i, len) => {
                let k = i % n;
                let end = (k + len).min(b.len());
                if k < end {
                    b.drain(k..end);
                }
            }
            Edit::Truncate(i) => b.truncate(i % n),
            Edit::Splice(from, to, len) => {
                if !b.is_empty() {
                    let (f, t) = (from % b.len(), to % b.len());
                    let len = (*len).min(b.len() - f).min(b.len() - t);
                    let src = b[f..f + len].to_vec();
                    b[t..t + len].copy_from_slice(&src);
                }
            }
        }
    }
    b
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(edit(), 1..5)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn npy_never_panics(base in 0usize..6, e in edits()) {
        let name = ["f4.npy", "f8.npy", "i4.npy", "i8.npy", "u1.npy", "b1.npy"][base];
        let b = apply(fixture(name), &e);
        if let Ok(t) = parse_npy(&b, Path::new(name)) {
            // What is accepted is backed by the file's bytes.
            prop_assert!(t.numel() <= b.len());
        }
    }

    #[test]
    fn npy_headers_never_panic(text in "[{}()\\[\\]':, \\n#0-9a-z_<>|=TFNL.-]{0,80}", v in 1u8..4) {
        let mut b = b"\x93NUMPY".to_vec();
        b.extend([v, 0]);
        let h = text.as_bytes();
        if v == 1 {
            b.extend((h.len() as u16).to_le_bytes());
        } else {
            b.extend((h.len() as u32).to_le_bytes());
        }
        b.extend(h);
        b.extend([0u8; 64]);
        let _ = parse_npy(&b, Path::new("h.npy"));
    }

    #[test]
    fn npz_never_panics(base in 0usize..2, e in edits()) {
        let name = ["arrays.npz", "arrays_compressed.npz"][base];
        let b = apply(fixture(name), &e);
        let _ = parse_npz(&b, Path::new(name));
    }

    #[test]
    fn idx_never_panics(base in 0usize..3, e in edits()) {
        let name = ["images-idx3-ubyte", "labels-idx1-ubyte.gz", "f32-idx2"][base];
        let b = apply(fixture(name), &e);
        if let Ok(t) = parse_idx(&b, Path::new(name)) {
            prop_assert!(t.numel() <= 8 * b.len() + (1 << 21));
        }
    }

    #[test]
    fn csv_never_panics(text in "[0-9a-z.,eE+\\- \\n\\r\\t\u{feff}]{0,200}", header in any::<bool>(), label in -3isize..3) {
        let p = Path::new("f.csv");
        if let Ok(t) = parse_csv(&text, header, p) {
            let w = t.rows[0].len();
            prop_assert!(t.rows.iter().all(|r| r.len() == w));
        }
        let _ = label;
    }

    #[test]
    fn loader_state_bytes_never_panic(e in edits(), in_pass in any::<bool>()) {
        let st = LoaderState {
            epoch: 3,
            batches_done: 1,
            batches: if in_pass { vec![vec![0, 1], vec![2, 3]] } else { Vec::new() },
            base_seed: 7,
            generator: Some(vec![1; 16]),
            sampler_generator: None,
            default_generator: vec![2; 16],
            worker_generators: vec![None, Some(vec![3; 8])],
            num_workers: 2,
            seeding: Seeding::PerSample { seed: 5 },
            in_pass,
            persistent: false,
        };
        let st = LoaderState { batches_done: if in_pass { 1 } else { 0 }, ..st };
        let good = st.to_bytes();
        prop_assert_eq!(LoaderState::from_bytes(&good).unwrap(), st);
        let b = apply(good, &e);
        if let Ok(s) = LoaderState::from_bytes(&b) {
            // Anything accepted is a consistent state that encodes back to the same bytes.
            prop_assert_eq!(s.to_bytes(), b);
            prop_assert!(s.worker_generators.is_empty() || s.worker_generators.len() == s.num_workers);
            prop_assert!(s.batches_done <= s.batches.len());
        }
    }
}

/// The gzip path of CSV: random edits of a gzipped table never panic.
#[test]
fn gzipped_csv_edits_never_panic() {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&fixture("table.csv")).unwrap();
    let gz = enc.finish().unwrap();
    let dir = std::env::temp_dir().join(format!("lockstep-fuzz-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("t.csv.gz");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&edits(), |e| {
            std::fs::write(&p, apply(gz.clone(), &e)).unwrap();
            let _ = read_csv(&p, true);
            Ok(())
        })
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
