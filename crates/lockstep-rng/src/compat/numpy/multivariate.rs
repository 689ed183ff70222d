//! `Generator.permuted`, `bytes`, `multivariate_hypergeometric` and `multivariate_normal`
//! (methods `'svd'`, `'eigh'`, `'cholesky'`; `RandomState.multivariate_normal`), as NumPy 2.4
//! computes them. The LAPACK steps behind `'svd'`/`'eigh'` live in `lapack.rs`.

use super::{BitGenerator, Bits, Generator, lapack, random_interval};
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

    /// `multivariate_normal(mean, cov, size=rows, method='cholesky')`: the same as
    /// [`multivariate_normal`](Self::multivariate_normal) with [`MvnMethod::Cholesky`] (where
    /// NumPy ignores `check_valid` and `tol`), returning the values only.
    ///
    /// # Errors
    /// As [`multivariate_normal`](Self::multivariate_normal).
    pub fn multivariate_normal_cholesky(
        &mut self,
        mean: &[f64],
        cov: &[f64],
        rows: usize,
    ) -> Result<Vec<f64>> {
        let draw = self.multivariate_normal(
            mean,
            cov,
            rows,
            MvnMethod::Cholesky,
            CheckValid::Ignore,
            1e-8,
        )?;
        Ok(draw.values)
    }

    /// `multivariate_normal(mean, cov, size=rows, check_valid=check_valid, tol=tol,
    /// method=method)`: `rows` rows of `d = mean.len()` values, row-major, `cov` row-major
    /// `d × d`. As NumPy: `rows × d` standard normals `x` are drawn first, then `cov` is
    /// factored and each row is `mean + x·Fᵀ`, with `F = U·diag(√s)` from `svd(cov)`
    /// ([`MvnMethod::Svd`], NumPy's default), `F = U·diag(√|w|)` from `eigh(cov)` (its lower
    /// triangle) or the lower Cholesky factor. With `'svd'`/`'eigh'`, `check_valid` decides what
    /// happens when `cov` is not symmetric positive-semidefinite (`svd`: `Vᵀ·diag(s)·V` not
    /// `allclose` to `cov` with `rtol = atol = tol`; `eigh`: an eigenvalue below `−tol`): the
    /// returned [`MvnDraw::not_psd`] is set (`Warn`; NumPy's `RuntimeWarning`), an error
    /// (`Raise`), or nothing (`Ignore`).
    ///
    /// **Precision (tested against NumPy 2.4.6 on its OpenBLAS 0.3.31 LAPACK):** the normals
    /// are NumPy's bit for bit. The factorizations follow the LAPACK routines NumPy calls
    /// (`dgesdd`, `dsyevd`, `dpotrf`) operation by operation, so the singular/eigen vectors
    /// carry LAPACK's signs and order; only rounding differs (NumPy's BLAS sums in another
    /// order). Every value is within `1e-12` of the largest magnitude of NumPy's result for
    /// `'cholesky'` (any `d`) and, for `d ≤ 25`, for `'svd'`/`'eigh'` whenever `cov`'s singular
    /// values / eigenvalues are separated: measured on 3,252 calls (`d` = 1..25; positive
    /// definite, spectra spread over 6 decades, indefinite, non-symmetric, scaled by
    /// `1e±150`) with a worst error of `5e-13`, plus diagonal, identity and diagonal-with-
    /// repeats `cov`, which come out exact (the iteration never rotates). Known exceptions:
    ///
    /// * **repeated eigenvalues in a non-diagonal basis** (e.g. `Q·diag(1.5, 1.5, 2)·Qᵀ`):
    ///   the basis inside the eigenspace is decided by rounding, so values may differ from
    ///   NumPy's by `O(1)` (with the same distribution);
    /// * **rank-deficient `cov`**: the zero singular values / eigenvalues come out as rounding
    ///   noise (`~1e-16·‖cov‖`) whose square roots (`~1e-8·√‖cov‖`) scale arbitrary null
    ///   vectors: off by up to about `5e-8` relative;
    /// * rare **knife-edge matrices** where LAPACK itself returns the opposite sign of a
    ///   singular pair when `cov` changes by one ulp (1 of ~1,800 separated cases measured,
    ///   a `d = 18` SPD matrix): the values then differ by `O(1)`.
    ///
    /// # Errors
    /// Before drawing: `cov` not `d × d`, a non-finite value in `cov` (NumPy returns NaN or
    /// raises `LinAlgError`), `d > 25` with `'svd'`/`'eigh'` (LAPACK switches to divide and
    /// conquer there, not reproduced: use `Cholesky`), or [`Error::OutOfMemory`]. After
    /// drawing the normals, as in NumPy: `cov` not positive definite with `'cholesky'`
    /// (`LinAlgError`), LAPACK's QR iteration not converging (`LinAlgError`), or `cov` not
    /// symmetric positive-semidefinite with [`CheckValid::Raise`] (`ValueError`).
    pub fn multivariate_normal(
        &mut self,
        mean: &[f64],
        cov: &[f64],
        rows: usize,
        method: MvnMethod,
        check_valid: CheckValid,
        tol: f64,
    ) -> Result<MvnDraw> {
        let d = mean.len();
        check_mvn_args(mean, cov, method)?;
        let x = draw_normals(rows, d, |x| self.standard_normal(x))?;
        mvn_finish(x, mean, cov, method, check_valid, tol, Layout::Generator)
    }
}

impl<B: BitGenerator> super::RandomState<B> {
    /// `RandomState.multivariate_normal(mean, cov, size=rows, check_valid=check_valid,
    /// tol=tol)`: `rows × d` normals (the legacy `gauss`, its cached value carried over), then
    /// `x·(diag(√s)·Vᵀ) + mean` with `(U, s, Vᵀ) = svd(cov)` (RandomState has no `method`;
    /// it uses `Vᵀ` where `Generator` uses `U`). `check_valid` as in
    /// [`Generator::multivariate_normal`] with `'svd'`.
    ///
    /// **Precision:** as [`Generator::multivariate_normal`] with `'svd'`: within `1e-12` of the
    /// largest magnitude of NumPy's result for `d ≤ 25` with separated singular values.
    ///
    /// # Errors
    /// As [`Generator::multivariate_normal`] with `'svd'`.
    pub fn multivariate_normal(
        &mut self,
        mean: &[f64],
        cov: &[f64],
        rows: usize,
        check_valid: CheckValid,
        tol: f64,
    ) -> Result<MvnDraw> {
        let d = mean.len();
        check_mvn_args(mean, cov, MvnMethod::Svd)?;
        let x = draw_normals(rows, d, |x| self.standard_normal(x))?;
        mvn_finish(
            x,
            mean,
            cov,
            MvnMethod::Svd,
            check_valid,
            tol,
            Layout::Legacy,
        )
    }
}

/// The algorithm of [`Generator::multivariate_normal`] (NumPy's `method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MvnMethod {
    /// `'svd'` (NumPy's default): LAPACK `dgesdd`, `d ≤ 25`.
    #[default]
    Svd,
    /// `'eigh'`: LAPACK `dsyevd` on the lower triangle, `d ≤ 25`.
    Eigh,
    /// `'cholesky'`: LAPACK `dpotrf` on the lower triangle; `check_valid` is ignored.
    Cholesky,
}

/// What [`Generator::multivariate_normal`] does when `cov` is not symmetric
/// positive-semidefinite (NumPy's `check_valid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CheckValid {
    /// `'warn'` (NumPy's default): draw anyway, and set [`MvnDraw::not_psd`].
    #[default]
    Warn,
    /// `'raise'`: an error (after the normals are drawn, as in NumPy).
    Raise,
    /// `'ignore'`: no check.
    Ignore,
}

/// The result of `multivariate_normal`.
#[derive(Clone, Debug, PartialEq)]
pub struct MvnDraw {
    /// `rows × d` values, row-major.
    pub values: Vec<f64>,
    /// `cov` failed the check of [`CheckValid::Warn`]: NumPy printed `RuntimeWarning:
    /// covariance is not symmetric positive-semidefinite.` Always `false` with `Ignore` and
    /// `Cholesky`.
    pub not_psd: bool,
}

/// How the factor meets the normals: `Generator` computes `mean + x @ (U·√s)ᵀ`,
/// `RandomState` `x @ (√s[:, None]·Vᵀ) + mean`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Generator,
    Legacy,
}

const MVN: &str = "multivariate_normal";

fn check_mvn_args(mean: &[f64], cov: &[f64], method: MvnMethod) -> Result<()> {
    let d = mean.len();
    if d.checked_mul(d) != Some(cov.len()) {
        return Err(invalid(
            MVN,
            "cov",
            format!(
                "cov must be 2 dimensional and square, of the length of mean ({d} × {d}); \
                 got {} values",
                cov.len()
            ),
        ));
    }
    if cov.iter().any(|v| !v.is_finite()) {
        return Err(invalid(MVN, "cov", "cov must be finite"));
    }
    if method != MvnMethod::Cholesky && d > lapack::MAX_N {
        return Err(invalid(
            MVN,
            "cov",
            format!(
                "method '{}' reproduces NumPy's LAPACK result for d <= {} only (got d = {d}; \
                 LAPACK switches to divide and conquer above); use method 'cholesky'",
                if method == MvnMethod::Svd {
                    "svd"
                } else {
                    "eigh"
                },
                lapack::MAX_N
            ),
        ));
    }
    Ok(())
}

fn draw_normals(rows: usize, d: usize, fill: impl FnOnce(&mut [f64])) -> Result<Vec<f64>> {
    let cells = rows
        .checked_mul(d)
        .ok_or_else(|| out_of_memory(MVN, rows as u128 * d as u128, 8))?;
    let mut x = try_with_capacity::<f64>(MVN, cells)?;
    x.resize(cells, 0.0);
    fill(&mut x);
    Ok(x)
}

fn not_psd_error() -> Error {
    invalid(
        MVN,
        "cov",
        "covariance is not symmetric positive-semidefinite.",
    )
}

/// NumPy's `np.allclose(a, b, rtol, atol)` on equal-length slices.
fn allclose(a: &[f64], b: &[f64], rtol: f64, atol: f64) -> bool {
    a.iter()
        .zip(b)
        .all(|(&x, &y)| (x - y).abs() <= atol + rtol * y.abs())
}

/// Factors `cov`, checks it, and maps the normals `x` (consumed) to the samples.
fn mvn_finish(
    mut x: Vec<f64>,
    mean: &[f64],
    cov: &[f64],
    method: MvnMethod,
    check_valid: CheckValid,
    tol: f64,
    layout: Layout,
) -> Result<MvnDraw> {
    let d = mean.len();
    if d == 0 {
        return Ok(MvnDraw {
            values: Vec::new(),
            not_psd: false,
        });
    }
    // LAPACK sees cov column-major: a[i + j·d] = cov[i][j].
    let mut a = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..d {
            a[i + j * d] = cov[i * d + j];
        }
    }
    let linalg = |e: lapack::LapackError| {
        invalid(
            MVN,
            "cov",
            match e {
                lapack::LapackError::NoConvergence => "SVD did not converge (LinAlgError)",
                _ => "cov cannot be factored (LinAlgError)",
            },
        )
    };
    // f[i·d + j] = F[i][j], the factor with cov ≈ F·Fᵀ; each row is mean + x·Fᵀ.
    let mut f = vec![0.0; d * d];
    let mut psd = true;
    match method {
        MvnMethod::Cholesky => {
            f = cholesky_lower(cov, d)
                .ok_or_else(|| invalid(MVN, "cov", "Matrix is not positive definite (cholesky)"))?;
        }
        MvnMethod::Svd => {
            let (s, u, vt) = lapack::dgesdd(&a, d).map_err(linalg)?;
            if check_valid != CheckValid::Ignore {
                // np.dot(vh.T * s, vh): element (i, j) = Σ_k vh[k][i]·s[k]·vh[k][j].
                let mut r = vec![0.0; d * d];
                for i in 0..d {
                    for j in 0..d {
                        r[i * d + j] = (0..d).map(|k| vt[k + i * d] * s[k] * vt[k + j * d]).sum();
                    }
                }
                psd = allclose(&r, cov, tol, tol);
            }
            let root: Vec<f64> = s.iter().map(|v| v.sqrt()).collect();
            for i in 0..d {
                for j in 0..d {
                    f[i * d + j] = match layout {
                        // u * sqrt(s): F[i][j] = U[i][j]·√s[j].
                        Layout::Generator => u[i + j * d] * root[j],
                        // (√s[:, None]·vh)ᵀ: F[i][j] = √s[j]·vh[j][i].
                        Layout::Legacy => root[j] * vt[j + i * d],
                    };
                }
            }
        }
        MvnMethod::Eigh => {
            let (w, z) = lapack::dsyevd_lower(&a, d).map_err(|e| match e {
                lapack::LapackError::NoConvergence => {
                    invalid(MVN, "cov", "Eigenvalues did not converge (LinAlgError)")
                }
                e => linalg(e),
            })?;
            if check_valid != CheckValid::Ignore {
                psd = !w.iter().any(|&v| v < -tol);
            }
            for i in 0..d {
                for j in 0..d {
                    f[i * d + j] = z[i + j * d] * w[j].abs().sqrt();
                }
            }
        }
    }
    let checked = method != MvnMethod::Cholesky && check_valid != CheckValid::Ignore;
    if checked && !psd && check_valid == CheckValid::Raise {
        return Err(not_psd_error());
    }
    let mut row = vec![0.0; d];
    for xr in x.chunks_exact_mut(d) {
        for (i, r) in row.iter_mut().enumerate() {
            let dot: f64 = xr
                .iter()
                .zip(&f[i * d..i * d + d])
                .map(|(a, b)| a * b)
                .sum();
            *r = match layout {
                Layout::Generator => mean[i] + dot,
                Layout::Legacy => dot + mean[i],
            };
        }
        xr.copy_from_slice(&row);
    }
    Ok(MvnDraw {
        values: x,
        not_psd: checked && !psd,
    })
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
