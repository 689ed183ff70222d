//! The two LAPACK drivers NumPy's `multivariate_normal` calls, followed step by step so that the
//! singular/eigen vectors come out with LAPACK's signs and order:
//!
//! * `numpy.linalg.svd(cov)` = `dgesdd(jobz='A')` on a square matrix: Householder
//!   bidiagonalisation (`dgebd2`: `dlarfg`'s `beta = −sign(alpha)·‖x‖`), then `dbdsdc`, which
//!   for `n ≤ 25` runs `dlasdq` → `dbdsqr` (implicit zero-shift / shifted QR with `dlartg`'s
//!   LAPACK ≥ 3.10 sign rule, `dlasv2` for 2 × 2 blocks, the same deflation tests and chase
//!   direction), then the three selection sorts (`dbdsqr` descending, `dlasdq` ascending,
//!   `dbdsdc` descending), then `dormbr` applies the reflectors to `U` and `Vᵀ`.
//! * `numpy.linalg.eigh(cov)` = `dsyevd(jobz='V', uplo='L')`: `dsytd2` (lower), then `dstedc`,
//!   which for `n ≤ 25` is `dsteqr` (implicit QL/QR with Wilkinson shifts, `dlaev2` for 2 × 2
//!   blocks, ascending selection sort), then `dormtr` applies the reflectors.
//!
//! The operations are those of the reference LAPACK 3.12 sources that OpenBLAS (NumPy's
//! wheels) compiles; the BLAS inside (dot products, norms, rank updates) is written plainly, so
//! values differ from NumPy's by rounding only. Above `n = 25` LAPACK switches to divide and
//! conquer (`dlasd0`/`dlaed0`), not reproduced here: [`MAX_N`].
//!
//! Matrices are column-major `n × n` (`a[i + j·n]`), as LAPACK sees them.

/// The largest order reproduced: LAPACK's `SMLSIZ` (`ilaenv(9, ..)` = 25), below which
/// `dbdsdc`/`dstedc` use QR iteration.
pub(crate) const MAX_N: usize = 25;

const EPS: f64 = f64::EPSILON * 0.5; // dlamch('E')
const PREC: f64 = f64::EPSILON; // dlamch('P')
const SAFMIN: f64 = f64::MIN_POSITIVE; // dlamch('S')

/// Why a decomposition failed (NumPy raises `LinAlgError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LapackError {
    /// A value of the matrix is NaN or infinite.
    NotFinite,
    /// The order is above [`MAX_N`].
    TooLarge,
    /// The QR iteration did not converge (LAPACK's `info > 0`).
    NoConvergence,
}

/// Fortran's `SIGN(a, b)`: `|a|` with the sign bit of `b` (gfortran honours `−0`).
#[inline]
fn sign(a: f64, b: f64) -> f64 {
    a.abs().copysign(b)
}

/// A column-major matrix with 1-based `(row, col)` access, as the Fortran reads.
struct Mat {
    ld: usize,
    a: Vec<f64>,
}

impl Mat {
    fn identity(n: usize) -> Self {
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            a[i + i * n] = 1.0;
        }
        Mat { ld: n, a }
    }
    #[inline]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.a[(i - 1) + (j - 1) * self.ld]
    }
    #[inline]
    fn set(&mut self, i: usize, j: usize, v: f64) {
        self.a[(i - 1) + (j - 1) * self.ld] = v;
    }
    fn swap_rows(&mut self, i: usize, k: usize) {
        for j in 1..=self.a.len() / self.ld {
            let (x, y) = (self.at(i, j), self.at(k, j));
            self.set(i, j, y);
            self.set(k, j, x);
        }
    }
    fn swap_cols(&mut self, j: usize, k: usize) {
        for i in 1..=self.ld {
            let (x, y) = (self.at(i, j), self.at(i, k));
            self.set(i, j, y);
            self.set(i, k, x);
        }
    }
    fn cols(&self) -> usize {
        self.a.len() / self.ld
    }
}

/// `dlasr(side, 'V', direct, ..)` on the block of `a` starting at `(r0, c0)` (1-based) with
/// `m` rows and `n` columns; `c[k]`, `s[k]` (0-based) is the `k+1`-th rotation.
#[allow(clippy::too_many_arguments)] // LAPACK's own argument list
fn dlasr(
    left: bool,
    forward: bool,
    a: &mut Mat,
    r0: usize,
    c0: usize,
    m: usize,
    n: usize,
    c: &[f64],
    s: &[f64],
) {
    let count = if left { m } else { n };
    if count < 2 {
        return;
    }
    let order: Vec<usize> = if forward {
        (1..count).collect()
    } else {
        (1..count).rev().collect()
    };
    for j in order {
        let (ct, st) = (c[j - 1], s[j - 1]);
        if ct == 1.0 && st == 0.0 {
            continue;
        }
        if left {
            for i in 0..n {
                let col = c0 + i;
                let temp = a.at(r0 + j, col);
                let aj = a.at(r0 + j - 1, col);
                a.set(r0 + j, col, ct * temp - st * aj);
                a.set(r0 + j - 1, col, st * temp + ct * aj);
            }
        } else {
            for i in 0..m {
                let row = r0 + i;
                let temp = a.at(row, c0 + j);
                let aj = a.at(row, c0 + j - 1);
                a.set(row, c0 + j, ct * temp - st * aj);
                a.set(row, c0 + j - 1, st * temp + ct * aj);
            }
        }
    }
}

/// `dlartg` of LAPACK ≥ 3.10: `r = sign(f)·√(f² + g²)`, `c = |f| / √…` ≥ 0.
fn dlartg(f: f64, g: f64) -> (f64, f64, f64) {
    const SAFMAX: f64 = 1.0 / SAFMIN;
    let rtmin = SAFMIN.sqrt();
    let rtmax = (SAFMAX / 2.0).sqrt();
    let (f1, g1) = (f.abs(), g.abs());
    if g == 0.0 {
        (1.0, 0.0, f)
    } else if f == 0.0 {
        (0.0, sign(1.0, g), g1)
    } else if f1 > rtmin && f1 < rtmax && g1 > rtmin && g1 < rtmax {
        let d = (f * f + g * g).sqrt();
        let r = sign(d, f);
        (f1 / d, g / r, r)
    } else {
        let u = SAFMAX.min(SAFMIN.max(f1).max(g1));
        let (fs, gs) = (f / u, g / u);
        let d = (fs * fs + gs * gs).sqrt();
        let r = sign(d, f);
        (fs.abs() / d, gs / r, r * u)
    }
}

fn dlapy2(x: f64, y: f64) -> f64 {
    let (xa, ya) = (x.abs(), y.abs());
    let w = xa.max(ya);
    let z = xa.min(ya);
    if z == 0.0 || w > f64::MAX {
        w
    } else {
        w * (1.0 + (z / w) * (z / w)).sqrt()
    }
}

/// `dlarfg` on `alpha` and `x` (the rest of the column/row): returns `(beta, tau)` and scales
/// `x` into the reflector's tail (`v = [1, x]`).
fn dlarfg(alpha: f64, x: &mut [f64]) -> (f64, f64) {
    if x.is_empty() {
        return (alpha, 0.0);
    }
    let norm = |x: &[f64]| x.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mut xnorm = norm(x);
    if xnorm == 0.0 {
        return (alpha, 0.0);
    }
    let mut alpha = alpha;
    let mut beta = -sign(dlapy2(alpha, xnorm), alpha);
    let safmin = SAFMIN / EPS;
    let mut knt = 0;
    if beta.abs() < safmin {
        let rsafmn = 1.0 / safmin;
        loop {
            knt += 1;
            x.iter_mut().for_each(|v| *v *= rsafmn);
            beta *= rsafmn;
            alpha *= rsafmn;
            if !(beta.abs() < safmin && knt < 20) {
                break;
            }
        }
        xnorm = norm(x);
        beta = -sign(dlapy2(alpha, xnorm), alpha);
    }
    let tau = (beta - alpha) / beta;
    let scal = 1.0 / (alpha - beta);
    x.iter_mut().for_each(|v| *v *= scal);
    for _ in 0..knt {
        beta *= safmin;
    }
    (beta, tau)
}

/// `dlascl('G', cfrom → cto)` on `x`: multiplies by `cto / cfrom` in steps that cannot
/// overflow.
fn dlascl(cfrom: f64, cto: f64, x: &mut [f64]) {
    let smlnum = SAFMIN;
    let bignum = 1.0 / smlnum;
    let (mut cfromc, mut ctoc) = (cfrom, cto);
    loop {
        let cfrom1 = cfromc * smlnum;
        let (mul, done);
        if cfrom1 == cfromc {
            mul = ctoc / cfromc;
            done = true;
        } else {
            let cto1 = ctoc / bignum;
            if cto1 == ctoc {
                mul = ctoc;
                done = true;
                cfromc = 1.0;
            } else if cfrom1.abs() > ctoc.abs() && ctoc != 0.0 {
                mul = smlnum;
                done = false;
                cfromc = cfrom1;
            } else if cto1.abs() > cfromc.abs() {
                mul = bignum;
                done = false;
                ctoc = cto1;
            } else {
                mul = ctoc / cfromc;
                done = true;
                if mul == 1.0 {
                    return;
                }
            }
        }
        x.iter_mut().for_each(|v| *v *= mul);
        if done {
            return;
        }
    }
}

/// Applies `H = I − tau·v·vᵀ` (`v` over rows `r0..r0+v.len()`) to all columns of `c` from
/// the left (`dlarf('L')`: `w = Cᵀv`, `C −= tau·v·wᵀ`).
fn apply_left(c: &mut Mat, r0: usize, v: &[f64], tau: f64) {
    if tau == 0.0 {
        return;
    }
    for j in 1..=c.cols() {
        let w: f64 = v
            .iter()
            .enumerate()
            .map(|(k, vk)| c.at(r0 + k, j) * vk)
            .sum();
        for (k, vk) in v.iter().enumerate() {
            let x = c.at(r0 + k, j) - tau * vk * w;
            c.set(r0 + k, j, x);
        }
    }
}

/// `dlarf('R')` on columns `c0..c0+v.len()` of rows `rows`: `w = Cv`, `C −= tau·w·vᵀ`.
fn apply_right(c: &mut Mat, rows: std::ops::RangeInclusive<usize>, c0: usize, v: &[f64], tau: f64) {
    if tau == 0.0 {
        return;
    }
    for i in rows {
        let w: f64 = v
            .iter()
            .enumerate()
            .map(|(k, vk)| c.at(i, c0 + k) * vk)
            .sum();
        for (k, vk) in v.iter().enumerate() {
            let x = c.at(i, c0 + k) - tau * w * vk;
            c.set(i, c0 + k, x);
        }
    }
}

/// `dlasv2`: the SVD of the upper triangular `[[f, g], [0, h]]`:
/// `(ssmin, ssmax, snr, csr, snl, csl)`.
#[allow(clippy::many_single_char_names)]
fn dlasv2(f: f64, g: f64, h: f64) -> (f64, f64, f64, f64, f64, f64) {
    let mut ft = f;
    let mut fa = ft.abs();
    let mut ht = h;
    let mut ha = h.abs();
    let mut pmax = 1;
    let swap = ha > fa;
    if swap {
        pmax = 3;
        std::mem::swap(&mut ft, &mut ht);
        std::mem::swap(&mut fa, &mut ha);
    }
    let gt = g;
    let ga = gt.abs();
    let (mut ssmin, mut ssmax, mut clt, mut crt, mut slt, mut srt) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    if ga == 0.0 {
        ssmin = ha;
        ssmax = fa;
        clt = 1.0;
        crt = 1.0;
        slt = 0.0;
        srt = 0.0;
    } else {
        let mut gasmal = true;
        if ga > fa {
            pmax = 2;
            if fa / ga < EPS {
                gasmal = false;
                ssmax = ga;
                ssmin = if ha > 1.0 {
                    fa / (ga / ha)
                } else {
                    (fa / ga) * ha
                };
                clt = 1.0;
                slt = ht / gt;
                srt = 1.0;
                crt = ft / gt;
            }
        }
        if gasmal {
            let d = fa - ha;
            let mut l = if d == fa { 1.0 } else { d / fa };
            let m = gt / ft;
            let mut t = 2.0 - l;
            let mm = m * m;
            let tt = t * t;
            let s = (tt + mm).sqrt();
            let r = if l == 0.0 {
                m.abs()
            } else {
                (l * l + mm).sqrt()
            };
            let a = 0.5 * (s + r);
            ssmin = ha / a;
            ssmax = fa * a;
            if mm == 0.0 {
                t = if l == 0.0 {
                    sign(2.0, ft) * sign(1.0, gt)
                } else {
                    gt / sign(d, ft) + m / t
                };
            } else {
                t = (m / (s + t) + m / (r + l)) * (1.0 + a);
            }
            l = (t * t + 4.0).sqrt();
            crt = 2.0 / l;
            srt = t / l;
            clt = (crt + srt * m) / a;
            slt = (ht / ft) * srt / a;
        }
    }
    let (csl, snl, csr, snr) = if swap {
        (srt, crt, slt, clt)
    } else {
        (clt, slt, crt, srt)
    };
    let tsign = match pmax {
        1 => sign(1.0, csr) * sign(1.0, csl) * sign(1.0, f),
        2 => sign(1.0, snr) * sign(1.0, csl) * sign(1.0, g),
        _ => sign(1.0, snr) * sign(1.0, snl) * sign(1.0, h),
    };
    ssmax = sign(ssmax, tsign);
    ssmin = sign(ssmin, tsign * sign(1.0, f) * sign(1.0, h));
    (ssmin, ssmax, snr, csr, snl, csl)
}

/// `dlas2`: the singular values `(ssmin, ssmax)` of `[[f, g], [0, h]]`.
fn dlas2(f: f64, g: f64, h: f64) -> (f64, f64) {
    let (fa, ga, ha) = (f.abs(), g.abs(), h.abs());
    let fhmn = fa.min(ha);
    let fhmx = fa.max(ha);
    if fhmn == 0.0 {
        let ssmax = if fhmx == 0.0 {
            ga
        } else {
            let r = fhmx.min(ga) / fhmx.max(ga);
            fhmx.max(ga) * (1.0 + r * r).sqrt()
        };
        (0.0, ssmax)
    } else if ga < fhmx {
        let as_ = 1.0 + fhmn / fhmx;
        let at = (fhmx - fhmn) / fhmx;
        let au = (ga / fhmx) * (ga / fhmx);
        let c = 2.0 / ((as_ * as_ + au).sqrt() + (at * at + au).sqrt());
        (fhmn * c, fhmx / c)
    } else {
        let au = fhmx / ga;
        if au == 0.0 {
            ((fhmn * fhmx) / ga, ga)
        } else {
            let as_ = 1.0 + fhmn / fhmx;
            let at = (fhmx - fhmn) / fhmx;
            let c = 1.0
                / ((1.0 + (as_ * au) * (as_ * au)).sqrt() + (1.0 + (at * au) * (at * au)).sqrt());
            let ssmin = (fhmn * c) * au;
            (ssmin + ssmin, ga / (c + c))
        }
    }
}

/// `dbdsqr('U', n, ncvt = n, nru = n, ncc = 0)` on `d[1..=n]`, `e[1..n]` (index 0 unused),
/// updating `vt` (rows) and `u` (columns).
#[allow(clippy::too_many_lines)]
fn dbdsqr(
    n: usize,
    d: &mut [f64],
    e: &mut [f64],
    vt: &mut Mat,
    u: &mut Mat,
) -> Result<(), LapackError> {
    const MAXITR: usize = 6;
    if n == 0 {
        return Ok(());
    }
    let ncvt = vt.cols();
    let nru = u.ld;
    if n > 1 {
        let nm1 = n - 1;
        let (nm12, nm13) = (2 * nm1, 3 * nm1);
        let mut work = vec![0.0; 4 * nm1];
        let mut idir = 0;
        let tolmul = 10f64.max(100f64.min(EPS.powf(-0.125)));
        let tol = tolmul * EPS;
        // tol >= 0: relative accuracy.
        let mut sminoa = d[1].abs();
        if sminoa != 0.0 {
            let mut mu = sminoa;
            for i in 2..=n {
                mu = d[i].abs() * (mu / (mu + e[i - 1].abs()));
                sminoa = sminoa.min(mu);
                if sminoa == 0.0 {
                    break;
                }
            }
        }
        sminoa /= (n as f64).sqrt();
        let thresh = (tol * sminoa).max(MAXITR as f64 * (n as f64 * (n as f64 * SAFMIN)));
        let maxitdivn = MAXITR * n;
        let mut iterdivn = 0;
        let mut iter: isize = -1;
        let mut oldll: isize = -1;
        let mut oldm: isize = -1;
        let mut m = n;
        'outer: loop {
            if m <= 1 {
                break;
            }
            if iter >= n as isize {
                iter -= n as isize;
                iterdivn += 1;
                if iterdivn >= maxitdivn {
                    return Err(LapackError::NoConvergence);
                }
            }
            // Find a diagonal block to work on.
            let mut smax = d[m].abs();
            let mut ll = 0usize;
            let mut split = false;
            for lll in 1..m {
                ll = m - lll;
                let abss = d[ll].abs();
                let abse = e[ll].abs();
                if abse <= thresh {
                    split = true;
                    break;
                }
                smax = smax.max(abss).max(abse);
            }
            if split {
                e[ll] = 0.0;
                if ll == m - 1 {
                    m -= 1;
                    continue 'outer;
                }
            } else {
                ll = 0;
            }
            ll += 1;
            // d[ll..=m] is unreduced.
            if ll == m - 1 {
                let (sigmn, sigmx, sinr, cosr, sinl, cosl) = dlasv2(d[m - 1], e[m - 1], d[m]);
                d[m - 1] = sigmx;
                e[m - 1] = 0.0;
                d[m] = sigmn;
                for j in 1..=ncvt {
                    let (x, y) = (vt.at(m - 1, j), vt.at(m, j));
                    vt.set(m - 1, j, cosr * x + sinr * y);
                    vt.set(m, j, cosr * y - sinr * x);
                }
                for i in 1..=nru {
                    let (x, y) = (u.at(i, m - 1), u.at(i, m));
                    u.set(i, m - 1, cosl * x + sinl * y);
                    u.set(i, m, cosl * y - sinl * x);
                }
                m -= 2;
                continue 'outer;
            }
            if ll as isize > oldm || (m as isize) < oldll {
                idir = if d[ll].abs() >= d[m].abs() { 1 } else { 2 };
            }
            // Convergence tests.
            let mut smin;
            if idir == 1 {
                if e[m - 1].abs() <= tol.abs() * d[m].abs() {
                    e[m - 1] = 0.0;
                    continue 'outer;
                }
                let mut mu = d[ll].abs();
                smin = mu;
                for lll in ll..m {
                    if e[lll].abs() <= tol * mu {
                        e[lll] = 0.0;
                        continue 'outer;
                    }
                    mu = d[lll + 1].abs() * (mu / (mu + e[lll].abs()));
                    smin = smin.min(mu);
                }
            } else {
                if e[ll].abs() <= tol.abs() * d[ll].abs() {
                    e[ll] = 0.0;
                    continue 'outer;
                }
                let mut mu = d[m].abs();
                smin = mu;
                for lll in (ll..m).rev() {
                    if e[lll].abs() <= tol * mu {
                        e[lll] = 0.0;
                        continue 'outer;
                    }
                    mu = d[lll].abs() * (mu / (mu + e[lll].abs()));
                    smin = smin.min(mu);
                }
            }
            oldll = ll as isize;
            oldm = m as isize;
            // Shift.
            let mut shift;
            if n as f64 * tol * (smin / smax) <= EPS.max(0.01 * tol) {
                shift = 0.0;
            } else {
                let sll;
                if idir == 1 {
                    sll = d[ll].abs();
                    shift = dlas2(d[m - 1], e[m - 1], d[m]).0;
                } else {
                    sll = d[m].abs();
                    shift = dlas2(d[ll], e[ll], d[ll + 1]).0;
                }
                if sll > 0.0 && (shift / sll) * (shift / sll) < EPS {
                    shift = 0.0;
                }
            }
            iter += (m - ll) as isize;
            let len = m - ll + 1;
            if shift == 0.0 {
                if idir == 1 {
                    let (mut cs, mut oldcs, mut oldsn) = (1.0, 1.0, 0.0);
                    for i in ll..m {
                        let (c, sn, r) = dlartg(d[i] * cs, e[i]);
                        cs = c;
                        if i > ll {
                            e[i - 1] = oldsn * r;
                        }
                        (oldcs, oldsn, d[i]) = dlartg(oldcs * r, d[i + 1] * sn);
                        let k = i - ll;
                        work[k] = cs;
                        work[k + nm1] = sn;
                        work[k + nm12] = oldcs;
                        work[k + nm13] = oldsn;
                    }
                    let h = d[m] * cs;
                    d[m] = h * oldcs;
                    e[m - 1] = h * oldsn;
                    dlasr(true, true, vt, ll, 1, len, ncvt, &work[..], &work[nm1..]);
                    dlasr(
                        false,
                        true,
                        u,
                        1,
                        ll,
                        nru,
                        len,
                        &work[nm12..],
                        &work[nm13..],
                    );
                    if e[m - 1].abs() <= thresh {
                        e[m - 1] = 0.0;
                    }
                } else {
                    let (mut cs, mut oldcs, mut oldsn) = (1.0, 1.0, 0.0);
                    for i in (ll + 1..=m).rev() {
                        let (c, sn, r) = dlartg(d[i] * cs, e[i - 1]);
                        cs = c;
                        if i < m {
                            e[i] = oldsn * r;
                        }
                        (oldcs, oldsn, d[i]) = dlartg(oldcs * r, d[i - 1] * sn);
                        let k = i - ll - 1;
                        work[k] = cs;
                        work[k + nm1] = -sn;
                        work[k + nm12] = oldcs;
                        work[k + nm13] = -oldsn;
                    }
                    let h = d[ll] * cs;
                    d[ll] = h * oldcs;
                    e[ll] = h * oldsn;
                    dlasr(
                        true,
                        false,
                        vt,
                        ll,
                        1,
                        len,
                        ncvt,
                        &work[nm12..],
                        &work[nm13..],
                    );
                    dlasr(false, false, u, 1, ll, nru, len, &work[..], &work[nm1..]);
                    if e[ll].abs() <= thresh {
                        e[ll] = 0.0;
                    }
                }
            } else if idir == 1 {
                // Chase the bulge from top to bottom.
                let mut f = (d[ll].abs() - shift) * (sign(1.0, d[ll]) + shift / d[ll]);
                let mut g = e[ll];
                for i in ll..m {
                    let (cosr, sinr, r) = dlartg(f, g);
                    if i > ll {
                        e[i - 1] = r;
                    }
                    f = cosr * d[i] + sinr * e[i];
                    e[i] = cosr * e[i] - sinr * d[i];
                    g = sinr * d[i + 1];
                    d[i + 1] *= cosr;
                    let (cosl, sinl, r) = dlartg(f, g);
                    d[i] = r;
                    f = cosl * e[i] + sinl * d[i + 1];
                    d[i + 1] = cosl * d[i + 1] - sinl * e[i];
                    if i < m - 1 {
                        g = sinl * e[i + 1];
                        e[i + 1] *= cosl;
                    }
                    let k = i - ll;
                    work[k] = cosr;
                    work[k + nm1] = sinr;
                    work[k + nm12] = cosl;
                    work[k + nm13] = sinl;
                }
                e[m - 1] = f;
                dlasr(true, true, vt, ll, 1, len, ncvt, &work[..], &work[nm1..]);
                dlasr(
                    false,
                    true,
                    u,
                    1,
                    ll,
                    nru,
                    len,
                    &work[nm12..],
                    &work[nm13..],
                );
                if e[m - 1].abs() <= thresh {
                    e[m - 1] = 0.0;
                }
            } else {
                // Chase the bulge from bottom to top.
                let mut f = (d[m].abs() - shift) * (sign(1.0, d[m]) + shift / d[m]);
                let mut g = e[m - 1];
                for i in (ll + 1..=m).rev() {
                    let (cosr, sinr, r) = dlartg(f, g);
                    if i < m {
                        e[i] = r;
                    }
                    f = cosr * d[i] + sinr * e[i - 1];
                    e[i - 1] = cosr * e[i - 1] - sinr * d[i];
                    g = sinr * d[i - 1];
                    d[i - 1] *= cosr;
                    let (cosl, sinl, r) = dlartg(f, g);
                    d[i] = r;
                    f = cosl * e[i - 1] + sinl * d[i - 1];
                    d[i - 1] = cosl * d[i - 1] - sinl * e[i - 1];
                    if i > ll + 1 {
                        g = sinl * e[i - 2];
                        e[i - 2] *= cosl;
                    }
                    let k = i - ll - 1;
                    work[k] = cosr;
                    work[k + nm1] = -sinr;
                    work[k + nm12] = cosl;
                    work[k + nm13] = -sinl;
                }
                e[ll] = f;
                if e[ll].abs() <= thresh {
                    e[ll] = 0.0;
                }
                dlasr(
                    true,
                    false,
                    vt,
                    ll,
                    1,
                    len,
                    ncvt,
                    &work[nm12..],
                    &work[nm13..],
                );
                dlasr(false, false, u, 1, ll, nru, len, &work[..], &work[nm1..]);
            }
        }
    }
    // Make the singular values non-negative, then sort them decreasing.
    for i in 1..=n {
        if d[i] < 0.0 {
            d[i] = -d[i];
            for j in 1..=ncvt {
                vt.set(i, j, -vt.at(i, j));
            }
        }
    }
    for i in 1..n {
        let mut isub = 1;
        let mut smin = d[1];
        for j in 2..=n + 1 - i {
            if d[j] <= smin {
                isub = j;
                smin = d[j];
            }
        }
        let last = n + 1 - i;
        if isub != last {
            d[isub] = d[last];
            d[last] = smin;
            vt.swap_rows(isub, last);
            u.swap_cols(isub, last);
        }
    }
    Ok(())
}

/// The SVD `a = U·diag(s)·Vᵀ` of the column-major `n × n` `a` as `dgesdd(jobz='A')` computes
/// it for `n ≤ MAX_N`: `(s, U, Vᵀ)`, `U` and `Vᵀ` column-major, `s` decreasing.
#[allow(clippy::type_complexity)]
pub(crate) fn dgesdd(a: &[f64], n: usize) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>), LapackError> {
    if n == 0 {
        return Ok((Vec::new(), Vec::new(), Vec::new()));
    }
    if a.iter().any(|v| !v.is_finite()) {
        return Err(LapackError::NotFinite);
    }
    if n > MAX_N {
        return Err(LapackError::TooLarge);
    }
    let mut a = Mat {
        ld: n,
        a: a.to_vec(),
    };
    let smlnum = SAFMIN.sqrt() / PREC;
    let bignum = 1.0 / smlnum;
    let anrm = a.a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scaled_to = if anrm > 0.0 && anrm < smlnum {
        Some(smlnum)
    } else if anrm > bignum {
        Some(bignum)
    } else {
        None
    };
    if let Some(to) = scaled_to {
        dlascl(anrm, to, &mut a.a);
    }
    // dgebd2 (m = n): A = Q·B·Pᵀ, B upper bidiagonal.
    let mut d = vec![0.0; n + 1];
    let mut e = vec![0.0; n + 1];
    let mut tauq = vec![0.0; n + 1];
    let mut taup = vec![0.0; n + 1];
    for i in 1..=n {
        let mut x: Vec<f64> = (i + 1..=n).map(|r| a.at(r, i)).collect();
        let (beta, tau) = dlarfg(a.at(i, i), &mut x);
        for (k, v) in x.iter().enumerate() {
            a.set(i + 1 + k, i, *v);
        }
        tauq[i] = tau;
        d[i] = beta;
        if i < n {
            let mut v = vec![1.0];
            v.extend_from_slice(&x);
            // H(i) from the left on A(i:n, i+1:n).
            for j in i + 1..=n {
                let w: f64 = v
                    .iter()
                    .enumerate()
                    .map(|(k, vk)| a.at(i + k, j) * vk)
                    .sum();
                for (k, vk) in v.iter().enumerate() {
                    let y = a.at(i + k, j) - tau * vk * w;
                    a.set(i + k, j, y);
                }
            }
            let mut x: Vec<f64> = (i + 2..=n).map(|c| a.at(i, c)).collect();
            let (beta, tau) = dlarfg(a.at(i, i + 1), &mut x);
            for (k, v) in x.iter().enumerate() {
                a.set(i, i + 2 + k, *v);
            }
            taup[i] = tau;
            e[i] = beta;
            let mut v = vec![1.0];
            v.extend_from_slice(&x);
            // G(i) from the right on A(i+1:n, i+1:n).
            apply_right(&mut a, i + 1..=n, i + 1, &v, tau);
        } else {
            taup[i] = 0.0;
        }
    }
    // dbdsdc('U', 'I').
    let mut u = Mat::identity(n);
    let mut vt = Mat::identity(n);
    if n == 1 {
        u.set(1, 1, sign(1.0, d[1]));
        d[1] = d[1].abs();
    } else {
        // dlasdq('U', sqre = 0) = dbdsqr, then an ascending selection sort.
        dbdsqr(n, &mut d, &mut e, &mut vt, &mut u)?;
        for i in 1..=n {
            let mut isub = i;
            let mut smin = d[i];
            for j in i + 1..=n {
                if d[j] < smin {
                    isub = j;
                    smin = d[j];
                }
            }
            if isub != i {
                d[isub] = d[i];
                d[i] = smin;
                vt.swap_rows(isub, i);
                u.swap_cols(isub, i);
            }
        }
        // dbdsdc's own decreasing selection sort.
        for ii in 2..=n {
            let i = ii - 1;
            let mut kk = i;
            let mut p = d[i];
            for j in ii..=n {
                if d[j] > p {
                    kk = j;
                    p = d[j];
                }
            }
            if kk != i {
                d[kk] = d[i];
                d[i] = p;
                u.swap_cols(i, kk);
                vt.swap_rows(i, kk);
            }
        }
    }
    // dormbr('Q', 'L', 'N'): U = H(1)···H(n)·U, applied from H(n).
    for i in (1..=n).rev() {
        let mut v = vec![1.0];
        v.extend((i + 1..=n).map(|r| a.at(r, i)));
        apply_left_rows(&mut u, i, &v, tauq[i]);
    }
    // dormbr('P', 'R', 'T'): Vᵀ = Vᵀ·G(n−1)···G(1), applied from G(n−1).
    for i in (1..n).rev() {
        let mut v = vec![1.0];
        v.extend((i + 2..=n).map(|c| a.at(i, c)));
        apply_right(&mut vt, 1..=n, i + 1, &v, taup[i]);
    }
    let mut s = d[1..].to_vec();
    if let Some(to) = scaled_to {
        dlascl(to, anrm, &mut s);
    }
    Ok((s, u.a, vt.a))
}

/// `dlarf('L')` with `v` over rows `r0..` of every column.
fn apply_left_rows(c: &mut Mat, r0: usize, v: &[f64], tau: f64) {
    apply_left(c, r0, v, tau);
}

/// `dlaev2`: the eigen decomposition of `[[a, b], [b, c]]`: `(rt1, rt2, cs1, sn1)`, `rt1`
/// of larger absolute value, `(cs1, sn1)` its eigenvector.
fn dlaev2(a: f64, b: f64, c: f64) -> (f64, f64, f64, f64) {
    let sm = a + c;
    let df = a - c;
    let adf = df.abs();
    let tb = b + b;
    let ab = tb.abs();
    let (acmx, acmn) = if a.abs() > c.abs() { (a, c) } else { (c, a) };
    let rt = if adf > ab {
        adf * (1.0 + (ab / adf) * (ab / adf)).sqrt()
    } else if adf < ab {
        ab * (1.0 + (adf / ab) * (adf / ab)).sqrt()
    } else {
        ab * 2f64.sqrt()
    };
    let (rt1, rt2, sgn1);
    if sm < 0.0 {
        rt1 = 0.5 * (sm - rt);
        sgn1 = -1;
        rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
    } else if sm > 0.0 {
        rt1 = 0.5 * (sm + rt);
        sgn1 = 1;
        rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
    } else {
        rt1 = 0.5 * rt;
        rt2 = -0.5 * rt;
        sgn1 = 1;
    }
    let (cs, sgn2) = if df >= 0.0 {
        (df + rt, 1)
    } else {
        (df - rt, -1)
    };
    let acs = cs.abs();
    let (mut cs1, mut sn1);
    if acs > ab {
        let ct = -tb / cs;
        sn1 = 1.0 / (1.0 + ct * ct).sqrt();
        cs1 = ct * sn1;
    } else if ab == 0.0 {
        cs1 = 1.0;
        sn1 = 0.0;
    } else {
        let tn = -cs / tb;
        cs1 = 1.0 / (1.0 + tn * tn).sqrt();
        sn1 = tn * cs1;
    }
    if sgn1 == sgn2 {
        let tn = cs1;
        cs1 = -sn1;
        sn1 = tn;
    }
    (rt1, rt2, cs1, sn1)
}

/// `dsteqr('I')` on `d[1..=n]`, `e[1..n]`, `z` starting as the identity: eigenvalues
/// ascending in `d`, eigenvectors in the columns of `z`.
#[allow(clippy::too_many_lines)]
fn dsteqr(n: usize, d: &mut [f64], e: &mut [f64], z: &mut Mat) -> Result<(), LapackError> {
    const MAXIT: usize = 30;
    if n <= 1 {
        return Ok(());
    }
    let eps2 = EPS * EPS;
    let safmax = 1.0 / SAFMIN;
    let ssfmax = safmax.sqrt() / 3.0;
    let ssfmin = SAFMIN.sqrt() / eps2;
    let nmaxit = n * MAXIT;
    let mut jtot = 0;
    let mut l1 = 1;
    let nm1 = n - 1;
    let mut work = vec![0.0; 2 * n];
    'top: loop {
        if l1 > n {
            break;
        }
        if l1 > 1 {
            e[l1 - 1] = 0.0;
        }
        let mut m = n;
        if l1 <= nm1 {
            for mm in l1..=nm1 {
                let tst = e[mm].abs();
                if tst == 0.0 {
                    m = mm;
                    break;
                }
                if tst <= (d[mm].abs().sqrt() * d[mm + 1].abs().sqrt()) * EPS {
                    e[mm] = 0.0;
                    m = mm;
                    break;
                }
            }
        }
        let mut l = l1;
        let lsv = l;
        let mut lend = m;
        let lendsv = lend;
        l1 = m + 1;
        if lend == l {
            continue 'top;
        }
        // Scale the block.
        let anorm = d[l..=lend]
            .iter()
            .chain(&e[l..lend])
            .fold(0.0f64, |a, v| a.max(v.abs()));
        let mut iscale = 0;
        if anorm == 0.0 {
            continue 'top;
        }
        if anorm > ssfmax {
            iscale = 1;
            dlascl(anorm, ssfmax, &mut d[l..=lend]);
            dlascl(anorm, ssfmax, &mut e[l..lend]);
        } else if anorm < ssfmin {
            iscale = 2;
            dlascl(anorm, ssfmin, &mut d[l..=lend]);
            dlascl(anorm, ssfmin, &mut e[l..lend]);
        }
        if d[lend].abs() < d[l].abs() {
            lend = lsv;
            l = lendsv;
        }
        if lend > l {
            // QL iteration.
            loop {
                let mut m = lend;
                if l != lend {
                    for mm in l..lend {
                        let tst = e[mm].abs() * e[mm].abs();
                        if tst <= (eps2 * d[mm].abs()) * d[mm + 1].abs() + SAFMIN {
                            m = mm;
                            break;
                        }
                    }
                }
                if m < lend {
                    e[m] = 0.0;
                }
                let p = d[l];
                if m == l {
                    d[l] = p;
                    l += 1;
                    if l <= lend {
                        continue;
                    }
                    break;
                }
                if m == l + 1 {
                    let (rt1, rt2, c, s) = dlaev2(d[l], e[l], d[l + 1]);
                    work[l] = c;
                    work[n - 1 + l] = s;
                    dlasr(false, false, z, 1, l, n, 2, &work[l..], &work[n - 1 + l..]);
                    d[l] = rt1;
                    d[l + 1] = rt2;
                    e[l] = 0.0;
                    l += 2;
                    if l <= lend {
                        continue;
                    }
                    break;
                }
                if jtot == nmaxit {
                    break;
                }
                jtot += 1;
                let mut g = (d[l + 1] - p) / (2.0 * e[l]);
                let mut r = dlapy2(g, 1.0);
                g = d[m] - p + (e[l] / (g + sign(r, g)));
                let (mut s, mut c, mut p) = (1.0, 1.0, 0.0);
                for i in (l..m).rev() {
                    let f = s * e[i];
                    let b = c * e[i];
                    (c, s, r) = dlartg(g, f);
                    if i != m - 1 {
                        e[i + 1] = r;
                    }
                    g = d[i + 1] - p;
                    r = (d[i] - g) * s + 2.0 * c * b;
                    p = s * r;
                    d[i + 1] = g + p;
                    g = c * r - b;
                    work[i] = c;
                    work[n - 1 + i] = -s;
                }
                let mm = m - l + 1;
                dlasr(false, false, z, 1, l, n, mm, &work[l..], &work[n - 1 + l..]);
                d[l] -= p;
                e[l] = g;
            }
        } else {
            // QR iteration.
            loop {
                let mut m = lend;
                if l != lend {
                    for mm in (lend + 1..=l).rev() {
                        let tst = e[mm - 1].abs() * e[mm - 1].abs();
                        if tst <= (eps2 * d[mm].abs()) * d[mm - 1].abs() + SAFMIN {
                            m = mm;
                            break;
                        }
                    }
                }
                if m > lend {
                    e[m - 1] = 0.0;
                }
                let p = d[l];
                if m == l {
                    d[l] = p;
                    if l == lend {
                        break;
                    }
                    l -= 1;
                    continue;
                }
                if m == l - 1 {
                    let (rt1, rt2, c, s) = dlaev2(d[l - 1], e[l - 1], d[l]);
                    work[m] = c;
                    work[n - 1 + m] = s;
                    dlasr(
                        false,
                        true,
                        z,
                        1,
                        l - 1,
                        n,
                        2,
                        &work[m..],
                        &work[n - 1 + m..],
                    );
                    d[l - 1] = rt1;
                    d[l] = rt2;
                    e[l - 1] = 0.0;
                    if l < lend + 2 {
                        break;
                    }
                    l -= 2;
                    continue;
                }
                if jtot == nmaxit {
                    break;
                }
                jtot += 1;
                let mut g = (d[l - 1] - p) / (2.0 * e[l - 1]);
                let mut r = dlapy2(g, 1.0);
                g = d[m] - p + (e[l - 1] / (g + sign(r, g)));
                let (mut s, mut c, mut p) = (1.0, 1.0, 0.0);
                for i in m..l {
                    let f = s * e[i];
                    let b = c * e[i];
                    (c, s, r) = dlartg(g, f);
                    if i != m {
                        e[i - 1] = r;
                    }
                    g = d[i] - p;
                    r = (d[i + 1] - g) * s + 2.0 * c * b;
                    p = s * r;
                    d[i] = g + p;
                    g = c * r - b;
                    work[i] = c;
                    work[n - 1 + i] = s;
                }
                let mm = l - m + 1;
                dlasr(false, true, z, 1, m, n, mm, &work[m..], &work[n - 1 + m..]);
                d[l] -= p;
                e[l - 1] = g;
            }
        }
        // Undo scaling.
        if iscale == 1 {
            dlascl(ssfmax, anorm, &mut d[lsv..=lendsv]);
            dlascl(ssfmax, anorm, &mut e[lsv..lendsv]);
        } else if iscale == 2 {
            dlascl(ssfmin, anorm, &mut d[lsv..=lendsv]);
            dlascl(ssfmin, anorm, &mut e[lsv..lendsv]);
        }
        if jtot >= nmaxit {
            // LAPACK returns here unsorted: an error unless every off-diagonal vanished.
            if e[1..n].iter().any(|&v| v != 0.0) {
                return Err(LapackError::NoConvergence);
            }
            return Ok(());
        }
    }
    // Ascending selection sort.
    for ii in 2..=n {
        let i = ii - 1;
        let mut k = i;
        let mut p = d[i];
        for j in ii..=n {
            if d[j] < p {
                k = j;
                p = d[j];
            }
        }
        if k != i {
            d[k] = d[i];
            d[i] = p;
            z.swap_cols(i, k);
        }
    }
    Ok(())
}

/// `dsyevd(jobz='V', uplo='L')` on the column-major `n × n` `a` (its lower triangle read) for
/// `n ≤ MAX_N`: `(w, Z)`, eigenvalues ascending, eigenvectors in the columns of the
/// column-major `Z`.
pub(crate) fn dsyevd_lower(a: &[f64], n: usize) -> Result<(Vec<f64>, Vec<f64>), LapackError> {
    if n == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let lower = |i: usize, j: usize| a[i + j * n];
    if (0..n).any(|j| (j..n).any(|i| !lower(i, j).is_finite())) {
        return Err(LapackError::NotFinite);
    }
    if n > MAX_N {
        return Err(LapackError::TooLarge);
    }
    if n == 1 {
        return Ok((vec![a[0]], vec![1.0]));
    }
    let mut a = Mat {
        ld: n,
        a: a.to_vec(),
    };
    let smlnum = SAFMIN / PREC;
    let bignum = 1.0 / smlnum;
    let (rmin, rmax) = (smlnum.sqrt(), bignum.sqrt());
    let anrm = (1..=n)
        .flat_map(|j| (j..=n).map(move |i| (i, j)))
        .fold(0.0f64, |m, (i, j)| m.max(a.at(i, j).abs()));
    let sigma = if anrm > 0.0 && anrm < rmin {
        Some(rmin / anrm)
    } else if anrm > rmax {
        Some(rmax / anrm)
    } else {
        None
    };
    if let Some(sigma) = sigma {
        // dlascl('L', 1 → sigma) on the lower triangle.
        for j in 1..=n {
            let mut col: Vec<f64> = (j..=n).map(|i| a.at(i, j)).collect();
            dlascl(1.0, sigma, &mut col);
            for (k, v) in col.into_iter().enumerate() {
                a.set(j + k, j, v);
            }
        }
    }
    // dsytd2('L'): A = Q·T·Qᵀ, Q = H(1)···H(n−1).
    let mut d = vec![0.0; n + 1];
    let mut e = vec![0.0; n + 1];
    let mut tau = vec![0.0; n + 1];
    let sym = |a: &Mat, i: usize, j: usize| if i >= j { a.at(i, j) } else { a.at(j, i) };
    for i in 1..n {
        let mut x: Vec<f64> = (i + 2..=n).map(|r| a.at(r, i)).collect();
        let (beta, taui) = dlarfg(a.at(i + 1, i), &mut x);
        for (k, v) in x.iter().enumerate() {
            a.set(i + 2 + k, i, *v);
        }
        e[i] = beta;
        if taui != 0.0 {
            let mut v = vec![1.0];
            v.extend_from_slice(&x);
            let k = n - i;
            // w = taui · A22 · v (dsymv, lower), then w += alpha · v.
            let mut w: Vec<f64> = (0..k)
                .map(|r| {
                    taui * (0..k)
                        .map(|c| sym(&a, i + 1 + r, i + 1 + c) * v[c])
                        .sum::<f64>()
                })
                .collect();
            let alpha = -0.5 * taui * w.iter().zip(&v).map(|(p, q)| p * q).sum::<f64>();
            for (wr, vr) in w.iter_mut().zip(&v) {
                *wr += alpha * vr;
            }
            // dsyr2: A22 −= v·wᵀ + w·vᵀ (lower triangle).
            for c in 0..k {
                for r in c..k {
                    let y = a.at(i + 1 + r, i + 1 + c) - (v[r] * w[c] + w[r] * v[c]);
                    a.set(i + 1 + r, i + 1 + c, y);
                }
            }
        }
        d[i] = a.at(i, i);
        tau[i] = taui;
    }
    d[n] = a.at(n, n);
    // dstedc('I') = dsteqr for n ≤ 25.
    let mut z = Mat::identity(n);
    dsteqr(n, &mut d, &mut e, &mut z)?;
    // dormtr('L', 'L', 'N'): Z = Q·Z; H(i) acts on rows i+1..n.
    for i in (1..n).rev() {
        let mut v = vec![1.0];
        v.extend((i + 2..=n).map(|r| a.at(r, i)));
        apply_left(&mut z, i + 1, &v, tau[i]);
    }
    let mut w = d[1..].to_vec();
    if let Some(sigma) = sigma {
        let inv = 1.0 / sigma;
        w.iter_mut().for_each(|v| *v *= inv);
    }
    Ok((w, z.a))
}
