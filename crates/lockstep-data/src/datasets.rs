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

/// The most bytes any reader inflates from one compressed stream or archive entry (a sane cap
/// on top of the bounds below).
pub const MAX_INFLATED_BYTES: u64 = 16 << 30;

/// Deflate cannot expand data more than 1032:1; a stream that claims more is corrupt or hostile.
const DEFLATE_MAX_RATIO: u64 = 1032;

/// Reads `r` to its end into a buffer grown fallibly, failing once it passes `limit` bytes,
/// so neither a hostile size field nor a decompression bomb can exhaust memory or abort.
pub(crate) fn read_bounded(mut r: impl Read, limit: u64) -> std::result::Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        if out.len() as u64 + n as u64 > limit {
            return Err(format!(
                "inflates past {limit} bytes (the bound for this input)"
            ));
        }
        out.try_reserve(n).map_err(|_| {
            format!(
                "out of memory: cannot hold {} inflated bytes",
                out.len() + n
            )
        })?;
        out.extend_from_slice(&buf[..n]);
    }
}

fn gunzip(op: &'static str, path: &Path, bytes: &[u8]) -> Result<Vec<u8>> {
    let limit = (bytes.len() as u64)
        .saturating_mul(DEFLATE_MAX_RATIO)
        .saturating_add(1024)
        .min(MAX_INFLATED_BYTES);
    read_bounded(flate2::read::MultiGzDecoder::new(bytes), limit)
        .map_err(|e| format_err(op, path, "gzip", e))
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
    // A UTF-8 byte-order mark (as spreadsheet programs write) is not part of the first field.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
    parse_csv_bytes(read_file("read_csv", path)?, has_header, path)
}

/// [`read_csv`] on a file's bytes already in memory (`path` names them in errors): gzip when
/// they start with its magic, then UTF-8, then [`parse_csv`].
///
/// # Errors
/// [`Error::Format`] as [`read_csv`].
pub fn parse_csv_bytes(bytes: Vec<u8>, has_header: bool, path: &Path) -> Result<CsvTable> {
    let bytes = maybe_gunzip("read_csv", path, bytes)?;
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

    /// [`from_path`](Self::from_path) on a file's bytes already in memory (`path` names them
    /// in errors).
    ///
    /// # Errors
    /// As [`from_path`](Self::from_path).
    pub fn from_bytes(
        bytes: Vec<u8>,
        has_header: bool,
        label_column: isize,
        path: &Path,
    ) -> Result<Self> {
        let table = parse_csv_bytes(bytes, has_header, path)?;
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
            // `as i64` would saturate 1e300 to i64::MAX: refuse what does not fit.
            if l.fract() != 0.0
                || !l.is_finite()
                || !(-9.223372036854776e18..9.223372036854776e18).contains(&l)
            {
                return Err(format_err(
                    "CsvDataset",
                    path,
                    "CSV",
                    format!(
                        "data row {}: label {l:e} is not an integer in the int64 range",
                        r + 1
                    ),
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
        if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(self.width) {
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

/// The embedded Tiny Shakespeare corpus (`data/tinyshakespeare.txt.gz`).
const TINY_SHAKESPEARE_GZ: &[u8] = include_bytes!("../data/tinyshakespeare.txt.gz");

/// Attribution of the embedded Tiny Shakespeare corpus (public domain text), to keep beside
/// any copy.
pub const TINY_SHAKESPEARE_ATTRIBUTION: &str = "Tiny Shakespeare: 40,000 lines of Shakespeare's \
    plays (public domain), as collected in karpathy/char-rnn, data/tinyshakespeare/input.txt.";

/// A text corpus as `open(path, "rt", encoding="utf-8").read()` (or `gzip.open` when the name
/// ends in `.gz`) returns it in Python, universal newlines included (`\r\n` and `\r` read as
/// `\n`); `None` reads the embedded Tiny Shakespeare (1,115,394 characters, 65 distinct).
///
/// # Errors
/// [`Error::Io`] if the file cannot be read, [`Error::Format`] if it is not valid gzip or
/// UTF-8.
pub fn read_text(path: Option<&Path>) -> Result<String> {
    const OP: &str = "read_text";
    let (bytes, path) = match path {
        None => {
            let p = Path::new("<embedded tinyshakespeare.txt.gz>");
            (gunzip(OP, p, TINY_SHAKESPEARE_GZ)?, p)
        }
        Some(p) => {
            let raw = read_file(OP, p)?;
            let gz = p.extension().is_some_and(|e| e == "gz");
            (if gz { gunzip(OP, p, &raw)? } else { raw }, p)
        }
    };
    let text = String::from_utf8(bytes)
        .map_err(|e| format_err(OP, path, "UTF-8 text", format!("not UTF-8: {e}")))?;
    Ok(if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    })
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
    parse_idx(&read_file(OP, path)?, path)
}

/// [`read_idx`] on bytes already in memory (`path` names them in errors).
///
/// # Errors
/// As [`read_idx`].
pub fn parse_idx(file: &[u8], path: &Path) -> Result<Tensor> {
    const OP: &str = "read_idx";
    let bad = |r: String| format_err(OP, path, "IDX", r);
    // Inflate only as much as the header declares (a gzip bomb cannot grow past it).
    let mut r: Box<dyn Read + '_> = if file.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut take = |n: u64| -> Result<Vec<u8>> {
        read_bounded((&mut r).take(n), n).map_err(|e| format_err(OP, path, "gzip", e))
    };
    let mut b = take(4)?;
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(bad("missing the 0x0000 magic".into()));
    }
    let (code, nd) = (b[2], b[3] as usize);
    let head = 4 + 4 * nd;
    b.extend(take(4 * nd as u64)?);
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
    b.extend(take((need - head) as u64)?);
    if b.len() < need {
        return Err(bad(format!(
            "truncated: {} data bytes, dimensions {dims:?} need {}",
            b.len() - head,
            need - head
        )));
    }
    // The rest of a gzip stream must end soon and intact (its CRC and size checked), so a
    // truncated or corrupt file is refused without inflating an unbounded tail.
    const TAIL: u64 = 1 << 20;
    let tail = read_bounded((&mut r).take(TAIL + 1), TAIL).map_err(|e| {
        bad(format!(
            "after the {} bytes its dimensions declare: {e}",
            need
        ))
    })?;
    drop(tail);
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

/// Parses `.npy` bytes as `np.load` does: format versions 1.0, 2.0 and 3.0 only; the header
/// must be a Python dict with exactly the keys `descr`, `fortran_order` (`True` or `False`)
/// and `shape` (a tuple of ints), a repeated key taking the last value as in Python, and
/// nothing after the dict but whitespace and comments. C and Fortran order; little- and
/// big-endian; `f4`→F32, `f8`→F64, `i1`/`i2`/`i4`/`i8`/`u2`/`u4` → I64, `u1`→U8, `b1`→Bool.
/// Bytes after the data are ignored, as NumPy ignores them.
///
/// # Errors
/// [`Error::Format`] on anything `np.load` refuses (bad magic, version, header, truncated
/// data), and on valid files lockstep cannot represent (other dtypes, rare Python syntax such
/// as string escapes): those messages say "unsupported".
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<Tensor> {
    use crate::npy::{Refusal, parse_header, read_data};
    let bad = |r: Refusal| match r {
        Refusal::Invalid(s) | Refusal::Unsupported(s) => format_err("read_npy", path, "NPY", s),
    };
    let h = parse_header(bytes).map_err(bad)?;
    read_data(&h, bytes).map_err(bad)
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
/// `.npy`), in archive order. The archive is walked by the `zip` crate; each entry is inflated
/// into a buffer bounded by its declared size (itself bounded by deflate's maximum ratio and
/// [`MAX_INFLATED_BYTES`]), grown fallibly, and its CRC-32 and size are checked. A name that
/// occurs twice keeps its first position and the last entry's data, as `np.load(..)[name]`
/// reads the last.
///
/// # Errors
/// [`Error::Io`] if missing; [`Error::Format`] if the zip structure is corrupt or truncated,
/// an entry's CRC or size does not match, or an entry is not a valid `.npy` (an entry that
/// is not an array at all, which NumPy would return as raw bytes, is "unsupported").
pub fn read_npz(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    const OP: &str = "read_npz";
    let path = path.as_ref();
    let b = read_file(OP, path)?;
    parse_npz(&b, path)
}

/// [`read_npz`] on bytes already in memory (`path` names them in errors).
///
/// # Errors
/// As [`read_npz`].
pub fn parse_npz(b: &[u8], path: &Path) -> Result<Vec<(String, Tensor)>> {
    const OP: &str = "read_npz";
    let bad = |r: String| format_err(OP, path, "NPZ (zip)", r);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(b)).map_err(|e| bad(e.to_string()))?;
    let mut out: Vec<(String, Tensor)> = Vec::new();
    for i in 0..zip.len() {
        let entry = zip
            .by_index(i)
            .map_err(|e| bad(format!("entry {i}: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| bad(format!("entry {i}: bad name: {e}")))?
            .to_string();
        let declared = entry.size();
        let packed = entry.compressed_size();
        let bound = match entry.compression() {
            zip::CompressionMethod::Stored => packed,
            zip::CompressionMethod::Deflated => packed
                .saturating_mul(DEFLATE_MAX_RATIO)
                .saturating_add(1024),
            m => return Err(bad(format!("entry `{name}`: unsupported compression {m}"))),
        };
        if declared > bound || declared > MAX_INFLATED_BYTES {
            return Err(bad(format!(
                "entry `{name}` claims {declared} bytes from {packed} compressed (impossible or over {MAX_INFLATED_BYTES})"
            )));
        }
        let data =
            read_bounded(entry, declared).map_err(|e| bad(format!("entry `{name}`: {e}")))?;
        if data.len() as u64 != declared {
            return Err(bad(format!(
                "entry `{name}`: {} bytes, {declared} declared (corrupt)",
                data.len()
            )));
        }
        let entry_path: PathBuf = path.join(&name);
        if !data.starts_with(b"\x93NUMPY") {
            return Err(format_err(
                OP,
                &entry_path,
                "NPY",
                "unsupported: the entry is not a .npy array (NumPy returns its raw bytes)",
            ));
        }
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let t = parse_npy(&data, &entry_path)?;
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = t,
            None => out.push((key, t)),
        }
    }
    Ok(out)
}
