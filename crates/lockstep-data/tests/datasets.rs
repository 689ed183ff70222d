//! File readers: values of the fixtures written by `tools/golden_data.py` with NumPy, and clear
//! errors on missing, corrupt and truncated files.

use lockstep_data::*;
use lockstep_tensor::{DType, Tensor};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden/data/fixtures")
        .join(name)
}

/// A scratch copy of a fixture with `edit` applied to its bytes.
fn edited(name: &str, tag: &str, edit: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut b = std::fs::read(fixture(name)).unwrap();
    edit(&mut b);
    let dir = std::env::temp_dir().join(format!("lockstep-data-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{tag}-{name}"));
    std::fs::write(&p, b).unwrap();
    p
}

fn f4() -> Vec<f32> {
    (0..12).map(|i| i as f32 * 0.5 - 1.0).collect()
}

#[test]
fn npy_values() {
    let t = read_npy(fixture("f4.npy")).unwrap();
    assert_eq!((t.shape(), t.dtype()), (&[3usize, 4][..], DType::F32));
    assert_eq!(t.to_vec::<f32>().unwrap(), f4());
    let t = read_npy(fixture("f8.npy")).unwrap();
    assert_eq!(
        t.to_vec::<f64>().unwrap(),
        (0..5).map(|i| i as f64 / 3.0).collect::<Vec<_>>()
    );
    let t = read_npy(fixture("i8.npy")).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![-3, -2, -1, 0, 1, 2]);
    let t = read_npy(fixture("i4.npy")).unwrap();
    assert_eq!(
        t.to_vec::<i64>().unwrap(),
        vec![-(1 << 31), 0, (1 << 31) - 1]
    );
    let t = read_npy(fixture("u1.npy")).unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    let t = read_npy(fixture("b1.npy")).unwrap();
    assert_eq!(t.to_vec::<bool>().unwrap(), vec![true, false, true]);
}

#[test]
fn npz_values_stored_and_compressed() {
    for f in ["arrays.npz", "arrays_compressed.npz"] {
        let a = read_npz(fixture(f)).unwrap();
        let names: Vec<&str> = a.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["f4", "i8"], "{f}");
        assert_eq!(a[0].1.to_vec::<f32>().unwrap(), f4());
        assert_eq!(a[1].1.to_vec::<i64>().unwrap(), vec![-3, -2, -1, 0, 1, 2]);
    }
}

#[test]
fn idx_and_mnist() {
    let t = read_idx(fixture("images-idx3-ubyte")).unwrap();
    assert_eq!(t.shape(), &[3, 4, 5]);
    assert_eq!(t.to_vec::<u8>().unwrap(), (0..60u8).collect::<Vec<_>>());
    let t = read_idx(fixture("f32-idx2")).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), f4());
    let m = Mnist::from_files(
        fixture("images-idx3-ubyte"),
        fixture("labels-idx1-ubyte.gz"),
    )
    .unwrap();
    assert_eq!(m.len(), 3);
    let (x, y) = m.get(1, &mut SampleRng::per_sample(0, 0, 1)).unwrap();
    assert_eq!((x.shape(), y), (&[1usize, 4, 5][..], 0));
    assert_eq!(x.to_vec::<f32>().unwrap()[0], 20.0 / 255.0);
}

#[test]
fn csv_values() {
    let ds = CsvDataset::from_path(fixture("table.csv"), true, -1).unwrap();
    assert_eq!(ds.labels(), &[0, 1, 2]);
    let (x, _) = ds.get(1, &mut SampleRng::per_sample(0, 0, 1)).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![-3.0, 0.4]);
    let t = read_csv(fixture("table.csv"), true).unwrap();
    assert_eq!(t.header, ["a", "b", "label"]);
}

#[test]
fn digits_are_embedded() {
    let d = Digits::new().unwrap();
    assert_eq!(d.len(), Digits::LEN);
    let (x, y) = d.get(0, &mut SampleRng::per_sample(0, 0, 0)).unwrap();
    assert_eq!(x.shape(), &[1, 8, 8]);
    assert_eq!(y, 0);
    // First row of the file: 0,0,5,13,9,1,0,0,... label 0.
    assert_eq!(
        &x.to_vec::<f32>().unwrap()[..4],
        &[0.0, 0.0, 5.0 / 16.0, 13.0 / 16.0]
    );
    let counts = (0..10)
        .map(|c| d.labels().iter().filter(|&&l| l == c).count())
        .collect::<Vec<_>>();
    assert_eq!(counts.iter().sum::<usize>(), 1797);
    assert!(Digits::ATTRIBUTION.contains("Alpaydin"));
}

fn is_format(r: &Result<impl std::fmt::Debug>, what: &str) -> bool {
    match r {
        Err(e @ Error::Format { reason, .. }) => {
            assert!(reason.contains(what) || e.to_string().contains(what), "{e}");
            true
        }
        other => panic!("expected a format error containing `{what}`, got {other:?}"),
    }
}

#[test]
fn missing_files_are_io_errors() {
    let nope = fixture("does-not-exist");
    assert!(matches!(read_npy(&nope), Err(Error::Io { .. })));
    assert!(matches!(read_npz(&nope), Err(Error::Io { .. })));
    assert!(matches!(read_idx(&nope), Err(Error::Io { .. })));
    assert!(matches!(read_csv(&nope, false), Err(Error::Io { .. })));
    let e = read_npy(&nope).unwrap_err().to_string();
    assert!(
        e.contains("does-not-exist") && e.contains("read_npy"),
        "{e}"
    );
}

#[test]
fn truncated_and_corrupt_files_are_format_errors() {
    let p = edited("f4.npy", "trunc", |b| b.truncate(b.len() - 3));
    assert!(is_format(&read_npy(&p), "truncated"));
    let p = edited("f4.npy", "magic", |b| b[1] = b'X');
    assert!(is_format(&read_npy(&p), "magic"));
    let p = edited("images-idx3-ubyte", "trunc", |b| b.truncate(b.len() - 1));
    assert!(is_format(&read_idx(&p), "truncated"));
    let p = edited("images-idx3-ubyte", "code", |b| b[2] = 0x42);
    assert!(is_format(&read_idx(&p), "type code"));
    let p = edited("labels-idx1-ubyte.gz", "trunc", |b| b.truncate(b.len() - 6));
    assert!(matches!(read_idx(&p), Err(Error::Format { .. })));
    let p = edited("arrays.npz", "trunc", |b| b.truncate(b.len() / 2));
    assert!(matches!(read_npz(&p), Err(Error::Format { .. })));
    let p = edited("arrays_compressed.npz", "crc", |b| {
        // Flip a byte inside the first entry's compressed data.
        let i = 30
            + u16::from_le_bytes([b[26], b[27]]) as usize
            + u16::from_le_bytes([b[28], b[29]]) as usize
            + 10;
        b[i] ^= 0x55;
    });
    assert!(matches!(read_npz(&p), Err(Error::Format { .. })));
    let p = edited("table.csv", "ragged", |b| b.extend_from_slice(b"7,8\n"));
    assert!(is_format(&read_csv(&p, true), "line 6"));
    let p = edited("table.csv", "nan", |b| b.extend_from_slice(b"7,x,1\n"));
    assert!(is_format(&read_csv(&p, true), "`x` is not a number"));
    assert!(matches!(
        CsvDataset::from_path(fixture("table.csv"), true, 5),
        Err(Error::Format { .. })
    ));
}

#[test]
fn parse_npy_rejects_garbage_without_panicking() {
    let p = Path::new("mem");
    for n in 0..40 {
        let bytes: Vec<u8> =
            b"\x93NUMPY\x01\x00\x30\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
                .iter()
                .copied()
                .take(n)
                .collect();
        assert!(parse_npy(&bytes, p).is_err());
    }
    let _ = Tensor::from_vec(vec![0f32], &[1]).unwrap();
}

#[test]
fn normalize_and_compose() {
    use lockstep_data::transforms::{Compose, Normalize, RandomCrop, Transform};
    let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 2, 2]).unwrap();
    let n = Normalize::new(vec![1.0, 5.0], vec![2.0, 0.5]);
    let mut rng = SampleRng::per_sample(0, 0, 0);
    let y = n.apply(x.clone(), &mut rng).unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![0.0, 0.5, 1.0, 1.5, 0.0, 2.0, 4.0, 6.0]
    );
    assert!(
        Normalize::new(vec![0.0; 3], vec![1.0; 3])
            .apply(x.clone(), &mut rng)
            .is_err()
    );
    // A crop of the full padded size with no padding draws nothing and is the identity.
    let c = Compose(vec![Box::new(RandomCrop::new(2, 0)), Box::new(n)]);
    assert_eq!(
        c.apply(x, &mut rng).unwrap().to_vec::<f32>().unwrap(),
        y.to_vec::<f32>().unwrap()
    );
}

#[test]
fn tiny_shakespeare_is_embedded_and_text_files_read_as_python_does() {
    let text = read_text(None).unwrap();
    // The corpus's own figures (shared/data/README.md): 1,115,394 characters, 65 distinct.
    assert_eq!(text.chars().count(), 1_115_394);
    let mut distinct: Vec<char> = text.chars().collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 65);
    assert!(text.starts_with("First Citizen:\n"));
    assert!(TINY_SHAKESPEARE_ATTRIBUTION.contains("public domain"));
    // The shared copy, read as --data PATH.txt.gz, is the same text.
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/tinyshakespeare.txt.gz");
    if shared.exists() {
        assert_eq!(read_text(Some(&shared)).unwrap(), text);
    }
    // A plain .txt: universal newlines, as Python's text mode.
    let dir = std::env::temp_dir().join(format!("lockstep-text-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("a.txt");
    std::fs::write(&p, b"ab\r\ncd\ref\n").unwrap();
    assert_eq!(read_text(Some(&p)).unwrap(), "ab\ncd\nef\n");
    // Errors name the reader: missing file, bad UTF-8, a .gz that is not gzip.
    let e = read_text(Some(&dir.join("missing.txt"))).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Io {
                op: "read_text",
                ..
            }
        ),
        "{e}"
    );
    std::fs::write(&p, b"ok \xff\xfe").unwrap();
    let e = read_text(Some(&p)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Format {
                op: "read_text",
                ..
            }
        ),
        "{e}"
    );
    let gz = dir.join("b.txt.gz");
    std::fs::write(&gz, b"plain text").unwrap();
    let e = read_text(Some(&gz)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Format {
                op: "read_text",
                ..
            }
        ),
        "{e}"
    );
}
