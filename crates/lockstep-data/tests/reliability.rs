//! Regression tests for the hostile-input defects of issue 13 in the file readers: none may
//! panic, abort, hang, reserve what a header claims, or read data differently from NumPy.

use lockstep_data::*;
use lockstep_tensor::DType;
use std::io::Write;
use std::path::{Path, PathBuf};

fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-reliability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A `.npy` v1.0 file with header text `h` (padded as NumPy pads) and `data`.
fn npy(h: &str, data: &[u8]) -> Vec<u8> {
    let mut h = h.as_bytes().to_vec();
    let total = 10 + h.len() + 1;
    h.extend(std::iter::repeat_n(b' ', (64 - total % 64) % 64));
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((h.len() as u16).to_le_bytes());
    out.extend(h);
    out.extend(data);
    out
}

fn f4_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn defect1_close_paren_before_open_is_an_error() {
    let b = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': )2, 3(, }",
        &f4_bytes(&[0.0; 6]),
    );
    assert!(parse_npy(&b, Path::new("x.npy")).is_err());
}

#[test]
fn defect3_duplicate_keys_last_wins_like_numpy() {
    // Fortran-ordered storage of [[0, 1, 2], [3, 4, 5]].
    let data = f4_bytes(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    let b = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'fortran_order': True}",
        &data,
    );
    let t = parse_npy(&b, Path::new("x.npy")).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_vec::<f32>().unwrap(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let b = npy(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'descr': '<f4'}",
        &data,
    );
    assert_eq!(
        parse_npy(&b, Path::new("x.npy")).unwrap().dtype(),
        DType::F32
    );
}

#[test]
fn defect3_strict_where_numpy_is_strict() {
    let d = f4_bytes(&[1.0; 6]);
    for bad in [
        "{'descr': '<f4', 'fortran_order': 1, 'shape': (6,)}",
        "{'descr': '<f4', 'fortran_order': None, 'shape': (6,)}",
        "{'descr': '<f4', 'fortran_order': 'False', 'shape': (6,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)};",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [6]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}",
        "{'descr': '<f4', 'shape': (6,)}",
    ] {
        assert!(
            parse_npy(&npy(bad, &d), Path::new("x.npy")).is_err(),
            "{bad}"
        );
    }
    let good = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
        &d,
    );
    assert!(parse_npy(&good, Path::new("x.npy")).is_ok());
    for (maj, min) in [(1, 1), (2, 1), (3, 5), (4, 0), (0, 0)] {
        let mut b = good.clone();
        b[6] = maj;
        b[7] = min;
        let e = parse_npy(&b, Path::new("x.npy")).unwrap_err().to_string();
        assert!(e.contains("version"), "{e}");
    }
    // A big-endian file is read with its meaning, not refused or misread.
    let be: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let t = parse_npy(
        &npy(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}",
            &be,
        ),
        Path::new("x.npy"),
    )
    .unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [1.5, -2.0]);
}

/// A one-entry stored zip whose central directory declares `usize_`/`csize` (as ZIP64 when
/// `zip64`) for `data`.
fn zip_one(name: &str, data: &[u8], declared: u64, zip64: bool) -> Vec<u8> {
    let crc = {
        let mut c = flate2::Crc::new();
        c.update(data);
        c.sum()
    };
    let n = name.as_bytes();
    let mut z = Vec::new();
    // Local header.
    z.extend(0x0403_4b50u32.to_le_bytes());
    z.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    z.extend(crc.to_le_bytes());
    z.extend((data.len() as u32).to_le_bytes());
    z.extend((data.len() as u32).to_le_bytes());
    z.extend((n.len() as u16).to_le_bytes());
    z.extend(0u16.to_le_bytes());
    z.extend(n);
    z.extend(data);
    let cd = z.len();
    z.extend(0x0201_4b50u32.to_le_bytes());
    z.extend([45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    z.extend(crc.to_le_bytes());
    let extra: Vec<u8> = if zip64 {
        let mut e = vec![1, 0, 16, 0];
        e.extend(declared.to_le_bytes());
        e.extend((data.len() as u64).to_le_bytes());
        z.extend(u32::MAX.to_le_bytes());
        z.extend(u32::MAX.to_le_bytes());
        e
    } else {
        z.extend((data.len() as u32).to_le_bytes());
        z.extend((declared as u32).to_le_bytes());
        Vec::new()
    };
    z.extend((n.len() as u16).to_le_bytes());
    z.extend((extra.len() as u16).to_le_bytes());
    z.extend([0u8; 10]);
    z.extend(0u32.to_le_bytes());
    z.extend(n);
    z.extend(extra);
    let cd_len = z.len() - cd;
    z.extend(0x0605_4b50u32.to_le_bytes());
    z.extend([0, 0, 0, 0, 1, 0, 1, 0]);
    z.extend((cd_len as u32).to_le_bytes());
    z.extend((cd as u32).to_le_bytes());
    z.extend(0u16.to_le_bytes());
    z
}

#[test]
fn defect2_npz_never_reserves_a_claimed_size() {
    let arr = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
        &f4_bytes(&[1.0, 2.0]),
    );
    // The honest archive reads.
    let ok = zip_one("a.npy", &arr, arr.len() as u64, false);
    let got = parse_npz(&ok, Path::new("ok.npz")).unwrap();
    assert_eq!(got[0].0, "a");
    // Claims near isize::MAX (ZIP64) and 0xFFFFFFFF: a clear error, no allocation abort.
    for (declared, zip64) in [
        (isize::MAX as u64 - 7, true),
        (u64::MAX, true),
        (0xFFFF_FFF0, false),
        (arr.len() as u64 + 1, false),
        (arr.len() as u64 - 1, false),
    ] {
        let z = zip_one("a.npy", &arr, declared, zip64);
        let p = scratch("claim.npz", &z);
        assert!(
            matches!(read_npz(&p), Err(Error::Format { .. })),
            "declared {declared}"
        );
    }
    // A non-array entry is refused as unsupported, not misread.
    let z = zip_one("note.txt", b"hello", 5, false);
    let e = parse_npz(&z, Path::new("t.npz")).unwrap_err().to_string();
    assert!(e.contains("unsupported"), "{e}");
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn defect2_idx_inflates_only_what_its_header_declares() {
    // 3 declared bytes followed by a little padding: read, the padding ignored.
    let mut raw = vec![0, 0, 0x08, 1, 0, 0, 0, 3, 7, 8, 9];
    raw.extend(vec![0u8; 100]);
    let t = read_idx(scratch("pad.idx.gz", &gz(&raw))).unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), [7, 8, 9]);
    // ... followed by 8 MiB of zeros (a bomb): refused after at most 1 MiB past the data.
    raw.extend(vec![0u8; 8 << 20]);
    let e = read_idx(scratch("bomb.idx.gz", &gz(&raw)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("declare"), "{e}");
    // A header claiming 2^32 × 2^32 × 8 bytes of data: refused, nothing reserved.
    let raw = [
        0, 0, 0x0E, 2, 255, 255, 255, 255, 255, 255, 255, 255, 1, 2, 3,
    ];
    let e = read_idx(scratch("claim.idx.gz", &gz(&raw)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated") || e.contains("overflow"), "{e}");
}

#[test]
fn defect13_csv_labels_out_of_range_and_bom() {
    let p = scratch("big.csv", b"1,2,1e300\n3,4,1\n");
    let e = CsvDataset::from_path(&p, false, -1)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("1e300") && e.contains("int64"), "{e}");
    let p = scratch("bom.csv", "\u{feff}a,b,label\n1,2,3\n".as_bytes());
    let t = read_csv(&p, true).unwrap();
    assert_eq!(t.header, ["a", "b", "label"]);
    let p = scratch("bom2.csv", "\u{feff}1,2,3\n".as_bytes());
    assert_eq!(read_csv(&p, false).unwrap().rows, [vec![1.0, 2.0, 3.0]]);
}
