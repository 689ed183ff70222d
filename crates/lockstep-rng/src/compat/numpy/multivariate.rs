//! `Generator.permuted`, `bytes`, `multivariate_hypergeometric` and `multivariate_normal`
//! (method `'cholesky'`), as NumPy 2.4 computes them.

use super::{BitGenerator, Bits, Generator, random_interval};
use crate::{Error, Result, invalid, try_with_capacity};

/// `bytes(length)` of either class: `(length − 1) / 4 + 1` 32-bit draws in C division (so
/// one draw for `length = 0`) of `integers(0, 2^32, dtype=uint32)`, which takes each
/// `next_uint32` as is, written little-endian, cut to `length`.
pub(crate) fn random_bytes<B: Bits>(b: &mut B, length: usize) -> Result<Vec<u8>> {
    let words = if length == 0 { 1 } else { length.div_ceil(4) };
    let mut out = try_with_capacity::<u8>("bytes", words.saturating_mul(4))?;
    for _ in 0..words {
        out.extend_from_slice(&b.u32().to_le_bytes());
    }
    out.truncate(length);
    Ok(out)
}

/// How NumPy's `out` array of [`Generator::permuted_out`] is laid out in memory. It decides the
/// result only for `axis=None` with two or more dimensions, where NumPy shuffles the elements
/// in memory order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemoryOrder {
    /// C-contiguous (NumPy's default), or not contiguous at all (NumPy then shuffles a
    /// C-ordered copy).
    #[default]
    C,
    /// Fortran-contiguous (`np.empty(shape, order='F')`).
    F,
}

/// The algorithm of [`Generator::multivariate_hypergeometric`] (NumPy's `method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MvhgMethod {
    /// `'marginals'` (NumPy's default): one univariate hypergeometric draw per color.
    #[default]
    Marginals,
    /// `'count'`: a partial Fisher–Yates shuffle of the `sum(colors)` items, then counts.
    Count,
}

fn out_of_memory(op: &'static str, elems: u128, size: usize) -> Error {
    Error::OutOfMemory {
        op,
        bytes: elems.saturating_mul(size as u128),
    }
}

impl<B: BitGenerator> Generator<B> {
    /// `bytes(length)`: `length` random bytes (see [`RandomState::bytes`] for the rule; the
    /// same on every bit generator).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] if `length` bytes cannot be allocated (nothing drawn).
    ///
    /// [`RandomState::bytes`]: super::RandomState::bytes
    pub fn bytes(&mut self, length: usize) -> Result<Vec<u8>> {
        random_bytes(self, length)
    }

    /// `permuted(x, axis=axis)` for `x` of `shape`, given and returned in C order: each slice
    /// along `axis` shuffled on its own (slices in C order of the other indices, each by
    /// NumPy's loop `i = n−1 … 0, j = random_interval(i)`); `axis = None` shuffles all
    /// elements as one. Negative axes count from the end.
    ///
    /// # Errors
    /// If `x.len()` is not the product of `shape`, `shape` is empty (a 0-d array), or `axis` is
    /// out of range; [`Error::OutOfMemory`] if the copy cannot be allocated. Nothing is drawn
    /// then.
    pub fn permuted<T: Copy>(
        &mut self,
        x: &[T],
        shape: &[usize],
        axis: Option<isize>,
    ) -> Result<Vec<T>> {
        let mut out = try_with_capacity("permuted", x.len())?;
        out.extend_from_slice(x);
        self.permuted_out(&mut out, shape, axis, MemoryOrder::C)?;
        Ok(out)
    }

    /// `permuted(x, axis=axis, out=out)`: `out` holds `x` (in C order, already converted to
    /// `out`'s dtype, as NumPy's `copyto`) and is shuffled in place; `order` is how NumPy's
    /// `out` array lies in memory. Errors as [`permuted`](Self::permuted).
    pub fn permuted_out<T>(
        &mut self,
        out: &mut [T],
        shape: &[usize],
        axis: Option<isize>,
        order: MemoryOrder,
    ) -> Result<()> {
        const OP: &str = "permuted";
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| invalid(OP, "x", format!("shape {shape:?} is too large")))?;
        if n != out.len() {
            return Err(invalid(
                OP,
                "x",
                format!("{} values do not fill the shape {shape:?}", out.len()),
            ));
        }
        let ndim = shape.len();
        if ndim == 0 {
            return Err(invalid(OP, "x", "a 0-d array cannot be permuted"));
        }
        let Some(axis) = axis else {
            if ndim > 1 && order == MemoryOrder::F {
                // Shuffle in Fortran memory order: position p of that order is C index at(p).
                let mut strides = vec![0usize; ndim];
                let mut stride = 1;
                for (k, s) in strides.iter_mut().enumerate().rev() {
                    *s = stride;
                    stride *= shape[k];
                }
                let at = |mut p: usize| {
                    let mut idx = 0;
                    for (&d, &s) in shape.iter().zip(&strides) {
                        idx += (p % d) * s;
                        p /= d;
                    }
                    idx
                };
                for i in (1..n).rev() {
                    let j = random_interval(self, i as u64) as usize;
                    out.swap(at(i), at(j));
                }
            } else {
                super::shuffle_slice(self, out);
            }
            return Ok(());
        };
        let ax = if axis < 0 { axis + ndim as isize } else { axis };
        if !(0..ndim as isize).contains(&ax) {
            return Err(invalid(
                OP,
                "axis",
                format!("axis {axis} is out of bounds for array of dimension {ndim}"),
            ));
        }
        let ax = ax as usize;
        if n == 0 {
            return Ok(());
        }
        let len = shape[ax];
        let inner: usize = shape[ax + 1..].iter().product();
        let outer = n / (len * inner);
        for o in 0..outer {
            for k in 0..inner {
                let base = o * len * inner + k;
                for i in (1..len).rev() {
                    let j = random_interval(self, i as u64) as usize;
                    out.swap(base + i * inner, base + j * inner);
                }
            }
        }
        Ok(())
    }

    /// `multivariate_hypergeometric(colors, nsample, size=rows, method=method)`: `rows` rows of
    /// `colors.len()` counts, row-major — NumPy's `random_mvhg_marginals` (successive
    /// univariate hypergeometric draws) or `random_mvhg_count` (a partial shuffle of the
    /// `sum(colors)` items), both drawing the complement when `nsample > sum(colors) / 2`.
    ///
    /// # Errors
    /// As NumPy: `nsample < 0`, a negative color, `sum(colors)` above `i64::MAX`,
    /// `sum(colors) >= 10^9` with `'marginals'` or above `i64::MAX / 8` with `'count'`,
    /// `nsample > sum(colors)`; [`Error::OutOfMemory`] if the result (or `'count'`'s table of
    /// `sum(colors)` entries) cannot be allocated. Nothing is drawn then.
    pub fn multivariate_hypergeometric(
        &mut self,
        colors: &[i64],
        nsample: i64,
        rows: usize,
        method: MvhgMethod,
    ) -> Result<Vec<i64>> {
        const OP: &str = "multivariate_hypergeometric";
        if nsample < 0 {
            return Err(invalid(OP, "nsample", "nsample must be nonnegative."));
        }
        if colors.iter().any(|&c| c < 0) {
            return Err(invalid(
                OP,
                "colors",
                format!(
                    "colors must be a one-dimensional sequence of nonnegative integers not \
                     exceeding {}.",
                    i64::MAX
                ),
            ));
        }
        let total = colors
            .iter()
            .try_fold(0i64, |a, &c| a.checked_add(c))
            .ok_or_else(|| {
                invalid(
                    OP,
                    "colors",
                    format!(
                        "sum(colors) must not exceed the maximum value of a 64 bit signed \
                         integer ({})",
                        i64::MAX
                    ),
                )
            })?;
        if method == MvhgMethod::Marginals && total >= 1_000_000_000 {
            return Err(invalid(
                OP,
                "colors",
                "When method is \"marginals\", sum(colors) must be less than 1000000000.",
            ));
        }
        let max_index = i64::MAX / 8;
        if method == MvhgMethod::Count && total > max_index {
            return Err(invalid(
                OP,
                "colors",
                format!("When method is 'count', sum(colors) must not exceed {max_index}"),
            ));
        }
        if nsample > total {
            return Err(invalid(OP, "nsample", "nsample > sum(colors)"));
        }
        let k = colors.len();
        let cells = rows
            .checked_mul(k)
            .ok_or_else(|| out_of_memory(OP, rows as u128 * k as u128, 8))?;
        let mut out = try_with_capacity::<i64>(OP, cells)?;
        out.resize(cells, 0);
        if k == 0 || total == 0 || nsample == 0 || rows == 0 {
            return Ok(out);
        }
        let more_than_half = nsample > total / 2;
        let ns = if more_than_half {
            total - nsample
        } else {
            nsample
        };
        match method {
            MvhgMethod::Marginals => {
                for row in out.chunks_exact_mut(k) {
                    let mut to_sample = ns;
                    let mut remaining = total;
                    for j in 0..k - 1 {
                        if to_sample <= 0 {
                            break;
                        }
                        remaining -= colors[j];
                        let r = super::distributions::hypergeometric_gen(
                            self, colors[j], remaining, to_sample,
                        );
                        row[j] = r;
                        to_sample -= r;
                    }
                    if to_sample > 0 {
                        row[k - 1] = to_sample;
                    }
                    if more_than_half {
                        for (v, &c) in row.iter_mut().zip(colors) {
                            *v = c - *v;
                        }
                    }
                }
            }
            MvhgMethod::Count => {
                let total = usize::try_from(total)
                    .map_err(|_| out_of_memory(OP, total as u128, size_of::<usize>()))?;
                let mut choices = try_with_capacity::<usize>(OP, total)?;
                for (i, &c) in colors.iter().enumerate() {
                    choices.extend(std::iter::repeat_n(i, c as usize));
                }
                let ns = ns as usize;
                for row in out.chunks_exact_mut(k) {
                    for j in 0..ns {
                        let t = j + random_interval(self, (total - j - 1) as u64) as usize;
                        choices.swap(j, t);
                    }
                    for &c in &choices[..ns] {
                        row[c] += 1;
                    }
                    if more_than_half {
                        for (v, &c) in row.iter_mut().zip(colors) {
                            *v = c - *v;
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// `multivariate_normal(mean, cov, size=rows, method='cholesky')`: `rows` rows of
    /// `mean.len()` values, row-major. Draws `rows × d` standard normals first (as NumPy), then
    /// returns `mean + x · Lᵀ` with `L` the lower Cholesky factor of `cov` (row-major `d × d`,
    /// lower triangle read, as LAPACK's `dpotrf`).
    ///
    /// **Precision:** the normals are NumPy's bit for bit; `L` and the product are computed in
    /// f64 in a fixed order, where NumPy uses LAPACK and BLAS, so a value differs from NumPy's
    /// by rounding only: within `1e-12` of the largest magnitude in the result (tested).
    ///
    /// # Errors
    /// If `cov` is not `d × d`, `mean` is empty while `cov` is not, a value is not finite, or
    /// `cov` is not positive definite (NumPy's `LinAlgError`); [`Error::OutOfMemory`] if the
    /// result cannot be allocated. Arguments are checked before anything is drawn.
    pub fn multivariate_normal_cholesky(
        &mut self,
        mean: &[f64],
        cov: &[f64],
        rows: usize,
    ) -> Result<Vec<f64>> {
        const OP: &str = "multivariate_normal";
        let d = mean.len();
        if d.checked_mul(d) != Some(cov.len()) {
            return Err(invalid(
                OP,
                "cov",
                format!(
                    "cov must be 2 dimensional and square, of the length of mean ({d} × {d}); \
                     got {} values",
                    cov.len()
                ),
            ));
        }
        if mean.iter().chain(cov).any(|v| !v.is_finite()) {
            return Err(invalid(OP, "cov", "mean and cov must be finite"));
        }
        let l = cholesky_lower(cov, d)
            .ok_or_else(|| invalid(OP, "cov", "Matrix is not positive definite (cholesky)"))?;
        let cells = rows
            .checked_mul(d)
            .ok_or_else(|| out_of_memory(OP, rows as u128 * d as u128, 8))?;
        let mut x = try_with_capacity::<f64>(OP, cells)?;
        x.resize(cells, 0.0);
        self.standard_normal(&mut x);
        let mut out = try_with_capacity::<f64>(OP, cells)?;
        for xr in x.chunks_exact(d.max(1)).take(if d == 0 { 0 } else { rows }) {
            for (i, &m) in mean.iter().enumerate() {
                let lr = &l[i * d..i * d + i + 1];
                let dot: f64 = xr.iter().zip(lr).map(|(a, b)| a * b).sum();
                out.push(m + dot);
            }
        }
        Ok(out)
    }
}

/// The lower Cholesky factor of the `d × d` row-major `a` (its lower triangle read), row-major
/// with zeros above the diagonal; `None` if a pivot is not positive (as `dpotrf`'s `info > 0`).
fn cholesky_lower(a: &[f64], d: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; d * d];
    for j in 0..d {
        let mut s = a[j * d + j];
        for k in 0..j {
            s -= l[j * d + k] * l[j * d + k];
        }
        if !(s > 0.0) {
            return None;
        }
        let ljj = s.sqrt();
        l[j * d + j] = ljj;
        for i in j + 1..d {
            let mut s = a[i * d + j];
            for k in 0..j {
                s -= l[i * d + k] * l[j * d + k];
            }
            l[i * d + j] = s / ljj;
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::numpy::default_rng;

    #[test]
    fn permuted_axis_none_equals_shuffle() {
        let x: Vec<i64> = (0..12).collect();
        let a = default_rng(4).permuted(&x, &[3, 4], None).unwrap();
        let mut b = x.clone();
        default_rng(4).shuffle(&mut b);
        assert_eq!(a, b);
        let c = default_rng(4).permuted(&x, &[12], Some(-1)).unwrap();
        assert_eq!(a, c);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut g = default_rng(1);
        assert!(g.permuted(&[1, 2, 3], &[2, 2], None).is_err());
        assert!(g.permuted(&[1, 2, 3, 4], &[2, 2], Some(2)).is_err());
        assert!(g.permuted(&[1], &[], None).is_err());
        let m = MvhgMethod::Count;
        assert!(g.multivariate_hypergeometric(&[3, 2], 6, 1, m).is_err());
        assert!(g.multivariate_hypergeometric(&[3, -2], 1, 1, m).is_err());
        assert!(
            g.multivariate_hypergeometric(&[i64::MAX, 1], 1, 1, m)
                .is_err()
        );
        assert!(
            g.multivariate_hypergeometric(&[i64::MAX / 8], 1, 1, m)
                .is_err()
        );
        assert!(
            g.multivariate_hypergeometric(&[3], 1, usize::MAX, m)
                .is_err()
        );
        assert!(
            g.multivariate_normal_cholesky(&[0.0, 0.0], &[1.0, 2.0, 2.0, 1.0], 1)
                .is_err()
        );
        assert!(
            g.multivariate_normal_cholesky(&[0.0], &[1.0, 0.0], 1)
                .is_err()
        );
        assert!(g.bytes(usize::MAX).is_err());
    }
}
