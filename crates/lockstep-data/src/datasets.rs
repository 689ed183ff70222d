//! Built-in and file-backed data sets: the embedded digits, CSV, MNIST IDX, `.npy` / `.npz`.
//!
//! Every reader reports a missing file as [`Error::Io`] and a corrupt or truncated one as
//! [`Error::Format`] naming the file, the format and where the problem was found; none panics.

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::rng::SampleRng;
use crate::sampler::check_index;
use crate::transforms::Transform;
use lockstep_tensor::{DType, Tensor};
use std::io::Read;
use std::path::{Path, PathBuf};

fn read_file(op: &'static str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io {
        op,
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn format_err(
    op: &'static str,
    path: &Path,
    format: &'static str,
    reason: impl Into<String>,
) -> Error {
    Error::Format {
        op,
        path: path.to_path_buf(),
        format,
        reason: reason.into(),
    }
}

fn gunzip(op: &'static str, path: &Path, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| format_err(op, path, "gzip", e.to_string()))?;
    Ok(out)
}

fn maybe_gunzip(op: &'static str, path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        gunzip(op, path, &bytes)
    } else {
        Ok(bytes)
    }
}

/// A parsed numeric CSV table.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvTable {
    /// The header's column names (empty without a header).
    pub header: Vec<String>,
    /// The rows, all of one width.
    pub rows: Vec<Vec<f64>>,
}

/// Parses numeric CSV text (comma-separated, no quoting; blank lines are skipped; a `.gz`
/// file is decompressed). With `has_header` the first non-blank line names the columns.
///
/// # Errors
/// [`Error::Format`] on a non-numeric field or a row of another width (with its line and
/// column), or on an empty table.
pub fn parse_csv(text: &str, has_header: bool, path: &Path) -> Result<CsvTable> {
    const OP: &str = "read_csv";
    let mut header = Vec::new();
    let mut rows: Vec<Vec<f64>> = Vec::new();
    let mut width = None;
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if has_header && header.is_empty() && rows.is_empty() && width.is_none() {
            header = line.split(',').map(|s| s.trim().to_string()).collect();
            width = Some(header.len());
            continue;
        }
        let mut row = Vec::with_capacity(width.unwrap_or(8));
        for (col, field) in line.split(',').enumerate() {
            let f = field.trim();
            let v: f64 = f.parse().map_err(|_| {
                format_err(
                    OP,
                    path,
                    "CSV",
                    format!("line {}, column {}: `{f}` is not a number", ln + 1, col + 1),
                )
            })?;
            row.push(v);
        }
        match width {
            None => width = Some(row.len()),
            Some(w) if w != row.len() => {
                return Err(format_err(
                    OP,
                    path,
                    "CSV",
                    format!(
                        "line {}: {} fields, expected {w} (truncated or ragged row)",
                        ln + 1,
                        row.len()
                    ),
                ));
            }
            _ => {}
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(format_err(OP, path, "CSV", "no data rows"));
    }
    Ok(CsvTable { header, rows })
}

/// Reads a numeric CSV file (gzip-compressed if it starts with the gzip magic).
///
/// # Errors
/// [`Error::Io`] if it cannot be read, [`Error::Format`] as [`parse_csv`].
pub fn read_csv(path: impl AsRef<Path>, has_header: bool) -> Result<CsvTable> {
    let path = path.as_ref();
    let bytes = maybe_gunzip("read_csv", path, read_file("read_csv", path)?)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| format_err("read_csv", path, "CSV", format!("not UTF-8: {e}")))?;
    parse_csv(&text, has_header, path)
}

/// A labelled table of float features: sample `i` is `(features [k] as F32, label as i64)`,
/// with an optional transform applied to the features.
pub struct CsvDataset {
    features: Vec<f32>,
    labels: Vec<i64>,
    width: usize,
    shape: Vec<usize>,
    transform: Option<Box<dyn Transform>>,
}

impl CsvDataset {
    /// Reads `path`; `label_column` (negative counts from the end, `-1` = last) holds integer
    /// class labels, the other columns are the features.
    ///
    /// # Errors
    /// As [`read_csv`], plus [`Error::Format`] if the label column does not exist or holds a
    /// non-integer.
    pub fn from_path(
        path: impl AsRef<Path>,
        has_header: bool,
        label_column: isize,
    ) -> Result<Self> {
        let path = path.as_ref();
        let table = read_csv(path, has_header)?;
        Self::from_table(&table, label_column, path)
    }

    fn from_table(table: &CsvTable, label_column: isize, path: &Path) -> Result<Self> {
        let ncol = table.rows[0].len();
        let lc = if label_column < 0 {
            ncol as isize + label_column
        } else {
            label_column
        };
        if !(0..ncol as isize).contains(&lc) || ncol < 2 {
            return Err(format_err(
                "CsvDataset",
                path,
                "CSV",
                format!(
                    "label column {label_column} does not exist in {ncol} columns (features need one more)"
                ),
            ));
        }
        let lc = lc as usize;
        let width = ncol - 1;
        let mut features = Vec::with_capacity(table.rows.len() * width);
        let mut labels = Vec::with_capacity(table.rows.len());
        for (r, row) in table.rows.iter().enumerate() {
            let l = row[lc];
            if l.fract() != 0.0 || !l.is_finite() {
                return Err(format_err(
                    "CsvDataset",
                    path,
                    "CSV",
                    format!("data row {}: label {l} is not an integer", r + 1),
                ));
            }
            labels.push(l as i64);
            features.extend(
                row.iter()
                    .enumerate()
                    .filter(|&(c, _)| c != lc)
                    .map(|(_, &v)| v as f32),
            );
        }
        Ok(Self {
            features,
            labels,
            width,
            shape: vec![width],
            transform: None,
        })
    }

    /// Reshapes each sample's features (e.g. `[1, 8, 8]` for images).
    ///
    /// # Errors
    /// If the shape does not hold the features' count.
    pub fn with_shape(mut self, shape: &[usize]) -> Result<Self> {
        if shape.iter().product::<usize>() != self.width {
            return Err(crate::error::invalid(
                "CsvDataset",
                "shape",
                format!("{shape:?} does not hold {} features", self.width),
            ));
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// Multiplies every feature by `s` (e.g. `1/16` for the digits' pixels).
    pub fn scaled(mut self, s: f32) -> Self {
        for v in &mut self.features {
            *v *= s;
        }
        self
    }

    /// Applies `t` to each sample's features (drawing from the sample's [`SampleRng`]).
    pub fn with_transform(mut self, t: impl Transform + 'static) -> Self {
        self.transform = Some(Box::new(t));
        self
    }

    /// All labels.
    pub fn labels(&self) -> &[i64] {
        &self.labels
    }
}

impl Dataset for CsvDataset {
    type Item = (Tensor, i64);
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<(Tensor, i64)> {
        check_index("CsvDataset", index, self.labels.len())?;
        let w = self.width;
        let x = Tensor::from_vec(
            self.features[index * w..(index + 1) * w].to_vec(),
            &self.shape,
        )?;
        let x = match &self.transform {
            Some(t) => t.apply(x, rng)?,
            None => x,
        };
        Ok((x, self.labels[index]))
    }
}

/// The embedded UCI digits file (`data/digits.csv.gz`).
const DIGITS_GZ: &[u8] = include_bytes!("../data/digits.csv.gz");

/// The default data set, embedded in the binary: the UCI "Optical Recognition of Handwritten
/// Digits" test set (E. Alpaydin, C. Kaynak, 1998; UCI Machine Learning Repository, CC BY 4.0),
/// 1,797 images of 8×8 pixels in `0..=16`, labels `0..=9`.
///
/// Samples are `(image [1, 8, 8] F32 = pixel / 16, label)`.
pub struct Digits;

impl Digits {
    /// Number of images.
    pub const LEN: usize = 1797;

    /// Attribution to keep beside any copy of the data.
    pub const ATTRIBUTION: &'static str = "Alpaydin, E. & Kaynak, C. (1998). Optical Recognition of Handwritten Digits. \
        UCI Machine Learning Repository. CC BY 4.0.";

    /// Loads the embedded digits.
    ///
    /// # Errors
    /// Only if the embedded file were corrupt (it is checked by the tests).
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Result<CsvDataset> {
        let path = Path::new("<embedded digits.csv.gz>");
        let text = String::from_utf8(gunzip("Digits", path, DIGITS_GZ)?)
            .map_err(|e| format_err("Digits", path, "CSV", e.to_string()))?;
        let table = parse_csv(&text, false, path)?;
        Ok(CsvDataset::from_table(&table, -1, path)?
            .with_shape(&[1, 8, 8])?
            .scaled(1.0 / 16.0))
    }
}

/// Reads an IDX file (MNIST's format; gzip-compressed if it starts with the gzip magic) into a
/// tensor: `u8` data as `U8`, `i8`/`i16`/`i32` as `I64`, `f32` as `F32`, `f64` as `F64`.
///
/// # Errors
/// [`Error::Io`] if missing; [`Error::Format`] on a bad magic, an unknown type code, or fewer
/// data bytes than the dimensions need (truncated).
pub fn read_idx(path: impl AsRef<Path>) -> Result<Tensor> {
    const OP: &str = "read_idx";
    let path = path.as_ref();
    let b = maybe_gunzip(OP, path, read_file(OP, path)?)?;
    let bad = |r: String| format_err(OP, path, "IDX", r);
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(bad("missing the 0x0000 magic".into()));
    }
    let (code, nd) = (b[2], b[3] as usize);
    let head = 4 + 4 * nd;
    if b.len() < head {
        return Err(bad(format!(
            "truncated header: {} bytes for {nd} dimensions",
            b.len()
        )));
    }
    let dims: Vec<usize> = (0..nd)
        .map(|k| {
            u32::from_be_bytes([b[4 + 4 * k], b[5 + 4 * k], b[6 + 4 * k], b[7 + 4 * k]]) as usize
        })
        .collect();
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad("dimensions overflow".into()))?;
    let size = match code {
        0x08 | 0x09 => 1,
        0x0B => 2,
        0x0C | 0x0D => 4,
        0x0E => 8,
        c => return Err(bad(format!("unknown type code 0x{c:02X}"))),
    };
    let need = n
        .checked_mul(size)
        .and_then(|x| x.checked_add(head))
        .ok_or_else(|| bad("size overflow".into()))?;
    if b.len() < need {
        return Err(bad(format!(
            "truncated: {} data bytes, dimensions {dims:?} need {}",
            b.len() - head,
            need - head
        )));
    }
    let d = &b[head..need];
    Ok(match code {
        0x08 => Tensor::from_vec(d.to_vec(), &dims)?,
        0x09 => Tensor::from_vec(d.iter().map(|&x| x as i8 as i64).collect::<Vec<_>>(), &dims)?,
        0x0B => Tensor::from_vec(
            d.chunks_exact(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]) as i64)
                .collect::<Vec<_>>(),
            &dims,
        )?,
        0x0C => Tensor::from_vec(
            d.chunks_exact(4)
                .map(|c| i32::from_be_bytes(c.try_into().expect("4")) as i64)
                .collect::<Vec<_>>(),
            &dims,
        )?,
        0x0D => Tensor::from_vec(
            d.chunks_exact(4)
                .map(|c| f32::from_be_bytes(c.try_into().expect("4")))
                .collect::<Vec<_>>(),
            &dims,
        )?,
        _ => Tensor::from_vec(
            d.chunks_exact(8)
                .map(|c| f64::from_be_bytes(c.try_into().expect("8")))
                .collect::<Vec<_>>(),
            &dims,
        )?,
    })
}

/// MNIST from its IDX image and label files: sample `i` is `(image [1, H, W] F32 = byte / 255,
/// label)`, with an optional transform.
pub struct Mnist {
    images: Vec<u8>,
    labels: Vec<i64>,
    hw: (usize, usize),
    transform: Option<Box<dyn Transform>>,
}

impl Mnist {
    /// Reads `images` (u8, `[N, H, W]`) and `labels` (u8, `[N]`).
    ///
    /// # Errors
    /// As [`read_idx`], plus [`Error::Format`] if the shapes or types are not MNIST's or the
    /// counts differ.
    pub fn from_files(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Self> {
        let (ip, lp) = (images.as_ref(), labels.as_ref());
        let im = read_idx(ip)?;
        let lb = read_idx(lp)?;
        let [n, h, w] = *im.shape() else {
            return Err(format_err(
                "Mnist",
                ip,
                "IDX",
                format!("images must be [N, H, W], got {:?}", im.shape()),
            ));
        };
        if im.dtype() != DType::U8 || lb.dtype() != DType::U8 || lb.shape() != [n] {
            return Err(format_err(
                "Mnist",
                lp,
                "IDX",
                format!(
                    "labels must be u8 [{n}], got {:?} {:?} (images {:?} {:?})",
                    lb.dtype(),
                    lb.shape(),
                    im.dtype(),
                    im.shape()
                ),
            ));
        }
        Ok(Self {
            images: im.to_vec::<u8>()?,
            labels: lb.to_vec::<u8>()?.into_iter().map(i64::from).collect(),
            hw: (h, w),
            transform: None,
        })
    }

    /// Applies `t` to each image.
    pub fn with_transform(mut self, t: impl Transform + 'static) -> Self {
        self.transform = Some(Box::new(t));
        self
    }
}

impl Dataset for Mnist {
    type Item = (Tensor, i64);
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<(Tensor, i64)> {
        check_index("Mnist", index, self.labels.len())?;
        let (h, w) = self.hw;
        let px = &self.images[index * h * w..(index + 1) * h * w];
        let x = Tensor::from_vec(
            px.iter().map(|&b| b as f32 / 255.0).collect::<Vec<_>>(),
            &[1, h, w],
        )?;
        let x = match &self.transform {
            Some(t) => t.apply(x, rng)?,
            None => x,
        };
        Ok((x, self.labels[index]))
    }
}

/// Parses `.npy` bytes (format 1.0–3.0, C order): `<f4`→F32, `<f8`→F64, `<i8`/`<i4`/`<i2`/`|i1`
/// and `<u4`/`<u2` → I64, `|u1`→U8, `|b1`→Bool.
///
/// # Errors
/// [`Error::Format`] on a bad magic or header, Fortran order, big-endian or unsupported dtype,
/// or truncated data.
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<Tensor> {
    const OP: &str = "read_npy";
    let bad = |r: String| format_err(OP, path, "NPY", r);
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing the \\x93NUMPY magic".into()));
    }
    let (hl, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(bad("truncated header".into()));
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(bad(format!("unsupported format version {v}"))),
    };
    let header = bytes
        .get(start..start + hl)
        .ok_or_else(|| bad("truncated header".into()))?;
    let header = String::from_utf8_lossy(header);
    let field = |key: &str| -> Option<String> {
        let k = header.find(&format!("'{key}'"))?;
        let rest = &header[k + key.len() + 2..];
        let rest = rest[rest.find(':')? + 1..].trim_start();
        Some(rest.to_string())
    };
    let descr = field("descr").ok_or_else(|| bad(format!("no 'descr' in header {header}")))?;
    let descr = descr.trim_start_matches(['\'', '"']);
    let descr = &descr[..descr
        .find(['\'', '"'])
        .ok_or_else(|| bad("bad descr".into()))?];
    let fortran = field("fortran_order").ok_or_else(|| bad("no 'fortran_order'".into()))?;
    if fortran.starts_with("True") {
        return Err(bad("Fortran-ordered arrays are not supported".into()));
    }
    let shape_s = field("shape").ok_or_else(|| bad("no 'shape'".into()))?;
    let open = shape_s.find('(').ok_or_else(|| bad("bad shape".into()))?;
    let close = shape_s.find(')').ok_or_else(|| bad("bad shape".into()))?;
    let shape: Vec<usize> = shape_s[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(format!("bad shape entry `{s}`")))
        })
        .collect::<Result<_>>()?;
    let n: usize = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad("shape overflows".into()))?;
    let size = match descr {
        "|u1" | "|b1" | "|i1" | "<u1" | "<i1" => 1,
        "<i2" | "<u2" => 2,
        "<f4" | "<i4" | "<u4" => 4,
        "<f8" | "<i8" => 8,
        d => {
            return Err(bad(format!(
                "unsupported dtype `{d}` (little-endian f4/f8/i1-i8/u1-u4/b1 only)"
            )));
        }
    };
    let d0 = start + hl;
    let need = n
        .checked_mul(size)
        .ok_or_else(|| bad("size overflows".into()))?;
    let d = bytes.get(d0..d0 + need).ok_or_else(|| {
        bad(format!(
            "truncated: {} data bytes, shape {shape:?} needs {need}",
            bytes.len().saturating_sub(d0)
        ))
    })?;
    macro_rules! le {
        ($t:ty, $w:expr) => {
            d.chunks_exact($w)
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("width")))
        };
    }
    Ok(match descr {
        "|u1" | "<u1" => Tensor::from_vec(d.to_vec(), &shape)?,
        "|b1" => Tensor::from_vec(d.iter().map(|&x| x != 0).collect::<Vec<_>>(), &shape)?,
        "|i1" | "<i1" => Tensor::from_vec(
            d.iter().map(|&x| x as i8 as i64).collect::<Vec<_>>(),
            &shape,
        )?,
        "<i2" => Tensor::from_vec(le!(i16, 2).map(i64::from).collect::<Vec<_>>(), &shape)?,
        "<u2" => Tensor::from_vec(le!(u16, 2).map(i64::from).collect::<Vec<_>>(), &shape)?,
        "<i4" => Tensor::from_vec(le!(i32, 4).map(i64::from).collect::<Vec<_>>(), &shape)?,
        "<u4" => Tensor::from_vec(le!(u32, 4).map(i64::from).collect::<Vec<_>>(), &shape)?,
        "<f4" => Tensor::from_vec(le!(f32, 4).collect::<Vec<_>>(), &shape)?,
        "<i8" => Tensor::from_vec(le!(i64, 8).collect::<Vec<_>>(), &shape)?,
        _ => Tensor::from_vec(le!(f64, 8).collect::<Vec<_>>(), &shape)?,
    })
}

/// Reads a `.npy` file (see [`parse_npy`]).
///
/// # Errors
/// [`Error::Io`] if it cannot be read, otherwise as [`parse_npy`].
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    parse_npy(&read_file("read_npy", path)?, path)
}

/// Reads a `.npz` archive (`np.savez` or `np.savez_compressed`): the arrays by name (without
/// `.npy`), in archive order. Checks each entry's CRC-32.
///
/// # Errors
/// [`Error::Io`] if missing; [`Error::Format`] if the zip structure is corrupt or truncated,
/// an entry's CRC does not match, or an entry is not a valid `.npy`.
pub fn read_npz(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    const OP: &str = "read_npz";
    let path = path.as_ref();
    let b = read_file(OP, path)?;
    let bad = |r: String| format_err(OP, path, "NPZ (zip)", r);
    let u16_at = |o: usize| -> Result<u16> {
        b.get(o..o + 2)
            .map(|s| u16::from_le_bytes([s[0], s[1]]))
            .ok_or_else(|| bad(format!("truncated at byte {o}")))
    };
    let u32_at = |o: usize| -> Result<u32> {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or_else(|| bad(format!("truncated at byte {o}")))
    };
    let eocd = (0..=b.len().saturating_sub(22))
        .rev()
        .take(65_536 + 22)
        .find(|&o| b[o..].starts_with(&[0x50, 0x4b, 0x05, 0x06]))
        .ok_or_else(|| bad("no end-of-central-directory record (truncated?)".into()))?;
    let count = u16_at(eocd + 10)? as usize;
    let mut cd = u32_at(eocd + 16)? as usize;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        if u32_at(cd)? != 0x0201_4b50 {
            return Err(bad(format!("bad central directory entry at byte {cd}")));
        }
        let method = u16_at(cd + 10)?;
        let crc = u32_at(cd + 16)?;
        let mut csize = u32_at(cd + 20)? as u64;
        let mut usize_ = u32_at(cd + 24)? as u64;
        let (nl, el, kl) = (
            u16_at(cd + 28)? as usize,
            u16_at(cd + 30)? as usize,
            u16_at(cd + 32)? as usize,
        );
        let mut local = u32_at(cd + 42)? as u64;
        let name_b = b
            .get(cd + 46..cd + 46 + nl)
            .ok_or_else(|| bad("truncated entry name".into()))?;
        let name = String::from_utf8_lossy(name_b).into_owned();
        // ZIP64 extra field: the 0xFFFFFFFF fields, in order usize, csize, offset.
        let mut e = cd + 46 + nl;
        let eend = e + el;
        while e + 4 <= eend {
            let (id, sz) = (u16_at(e)?, u16_at(e + 2)? as usize);
            if id == 1 {
                let mut p = e + 4;
                let next = |p: &mut usize| -> Result<u64> {
                    let v = b
                        .get(*p..*p + 8)
                        .map(|s| u64::from_le_bytes(s.try_into().expect("8")))
                        .ok_or_else(|| bad("truncated ZIP64 field".into()))?;
                    *p += 8;
                    Ok(v)
                };
                if usize_ == 0xFFFF_FFFF {
                    usize_ = next(&mut p)?;
                }
                if csize == 0xFFFF_FFFF {
                    csize = next(&mut p)?;
                }
                if local == 0xFFFF_FFFF {
                    local = next(&mut p)?;
                }
            }
            e += 4 + sz;
        }
        cd = eend + kl;
        let local = local as usize;
        if u32_at(local)? != 0x0403_4b50 {
            return Err(bad(format!(
                "bad local header for `{name}` at byte {local}"
            )));
        }
        let data0 = local + 30 + u16_at(local + 26)? as usize + u16_at(local + 28)? as usize;
        let raw = b
            .get(data0..data0 + csize as usize)
            .ok_or_else(|| bad(format!("entry `{name}` is truncated")))?;
        let data = match method {
            0 => raw.to_vec(),
            8 => {
                let mut v = Vec::with_capacity(usize_ as usize);
                flate2::read::DeflateDecoder::new(raw)
                    .read_to_end(&mut v)
                    .map_err(|e| bad(format!("entry `{name}`: {e}")))?;
                v
            }
            m => {
                return Err(bad(format!(
                    "entry `{name}`: unsupported compression method {m}"
                )));
            }
        };
        let mut c = flate2::Crc::new();
        c.update(&data);
        if c.sum() != crc || data.len() as u64 != usize_ {
            return Err(bad(format!(
                "entry `{name}`: CRC or size mismatch (corrupt)"
            )));
        }
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let entry_path: PathBuf = path.join(&name);
        out.push((key, parse_npy(&data, &entry_path)?));
    }
    Ok(out)
}
