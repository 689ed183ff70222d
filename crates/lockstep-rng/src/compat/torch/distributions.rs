//! PyTorch 2.15's other CPU samplers, bit for bit: `log_normal_`, `cauchy_`, `geometric_`,
//! `random_()` per dtype, `torch.normal` with tensor arguments, `torch.poisson`,
//! `torch._standard_gamma` and the `torch.distributions` samplers built on it.
//!
//! All of them run serially in element order and compute in f64 with the C library's `log`,
//! `log1p`, `exp`, `tan`, `pow`, `lgamma` (glibc on Linux, as PyTorch's wheels), then round
//! to the tensor's dtype. Where PyTorch's AVX2 kernels fuse a multiply and an add (the
//! element-wise kernels under `ATen/native/cpu`), a true fused multiply-add is used here too;
//! `torch.poisson` and `_standard_gamma` live in `ATen/native/Distributions.cpp`, compiled
//! without FMA, and use plain operations.

use super::{Float, FromI64};
use crate::{Generator, Result, invalid};

mod libm {
    unsafe extern "C" {
        pub safe fn log(x: f64) -> f64;
        pub safe fn exp(x: f64) -> f64;
        pub safe fn log1p(x: f64) -> f64;
        pub safe fn tan(x: f64) -> f64;
        pub safe fn pow(x: f64, y: f64) -> f64;
        pub safe fn lgamma(x: f64) -> f64;
    }
}
use libm::{exp, lgamma, log, log1p, pow, tan};

/// One standard normal of PyTorch's double `normal_distribution`: the generator's cached
/// value if it has one, else a Box–Muller pair whose sine half is cached (the scalar path of
/// `normal_`, shared with it).
pub(crate) fn std_normal(g: &mut Generator) -> f64 {
    if let Some(z) = g.take_normal_cache() {
        return z;
    }
    let u1 = g.next_f64();
    let u2 = g.next_f64();
    let r = (-2.0 * log1p(-u2)).sqrt();
    let theta = core::f64::consts::TAU * u1;
    g.set_normal_cache(r * theta.sin());
    r * theta.cos()
}

/// `Tensor.log_normal_(mean, std)`: always the scalar normal path (cache shared with
/// `normal_`), `exp(fma(z, std, mean))`, rounded to `T`.
///
/// # Errors
/// If `std` is not positive.
pub fn log_normal_<T: Float>(g: &mut Generator, out: &mut [T], mean: f64, std: f64) -> Result<()> {
    if !(std > 0.0) {
        return Err(invalid(
            "log_normal_",
            "std",
            format!("log_normal_ expects std > 0.0, but found std={std}"),
        ));
    }
    for v in out.iter_mut() {
        *v = T::from_f64(exp(std_normal(g).mul_add(std, mean)));
    }
    Ok(())
}

/// `Tensor.cauchy_(median, sigma)`: `median + sigma·tan(π·(u − 0.5))` (one fused
/// multiply-add) for a 53-bit uniform `u`, rounded to `T`.
///
/// # Errors
/// If `sigma` is not positive.
pub fn cauchy_<T: Float>(g: &mut Generator, out: &mut [T], median: f64, sigma: f64) -> Result<()> {
    if !(sigma > 0.0) {
        return Err(invalid(
            "cauchy_",
            "sigma",
            format!("cauchy_ expects sigma > 0.0, but found sigma={sigma}"),
        ));
    }
    for v in out.iter_mut() {
        let u = g.next_f64();
        *v = T::from_f64(sigma.mul_add(tan(core::f64::consts::PI * (u - 0.5)), median));
    }
    Ok(())
}

/// `Tensor.geometric_(p)`: `ceil(log(u) / log1p(−p))` for a 53-bit uniform `u`, rounded to
/// `T` (integers or floats).
///
/// # Errors
/// Unless `0 < p < 1`.
pub fn geometric_<T: FromI64 + FromF64>(g: &mut Generator, out: &mut [T], p: f64) -> Result<()> {
    if !(p > 0.0 && p < 1.0) {
        return Err(invalid(
            "geometric_",
            "p",
            format!("geometric_ expects p to be in (0, 1), but got p={p}"),
        ));
    }
    let den = log1p(-p);
    for v in out.iter_mut() {
        let u = g.next_f64();
        *v = T::from_f64_value((log(u) / den).ceil());
    }
    Ok(())
}

/// A dtype a double result can be written to, as PyTorch's `static_cast<scalar_t>(double)`.
pub trait FromF64: Copy {
    /// The cast (integers truncate toward zero, floats round).
    fn from_f64_value(x: f64) -> Self;
}

macro_rules! from_f64 {
    ($($t:ty),*) => {$(
        impl FromF64 for $t {
            #[inline]
            fn from_f64_value(x: f64) -> Self { x as $t }
        }
    )*};
}
from_f64!(i64, i32, i16, i8, u8, f32, f64);

/// A dtype `Tensor.random_()` (no bounds) can fill, with PyTorch's per-dtype rule.
pub trait RandomDefault: Copy {
    /// One element of `random_()`.
    fn draw(g: &mut Generator) -> Self;
}

macro_rules! random_default {
    ($($t:ty => |$g:ident| $e:expr),* $(,)?) => {$(
        impl RandomDefault for $t {
            #[inline]
            fn draw($g: &mut Generator) -> Self { $e }
        }
    )*};
}
random_default! {
    i64 => |g| (g.next_u64() % (1 << 63)) as i64,
    i32 => |g| (g.next_u32() % (1 << 31)) as i32,
    i16 => |g| (g.next_u32() % (1 << 15)) as i16,
    i8 => |g| (g.next_u32() % (1 << 7)) as i8,
    u8 => |g| (g.next_u32() % (1 << 8)) as u8,
    bool => |g| g.next_u32() & 1 == 1,
    f32 => |g| (g.next_u32() % ((1 << 24) + 1)) as f32,
    f64 => |g| (g.next_u64() % ((1 << 53) + 1)) as f64,
}

/// `Tensor.random_()` without bounds: integers in `[0, 2^digits]` of the dtype (`[0, 2^63)`
/// for int64, `[0, 2^24]` for float32, `[0, 2^53]` for float64, one bit for bool).
pub fn random_default_<T: RandomDefault>(g: &mut Generator, out: &mut [T]) {
    for v in out.iter_mut() {
        *v = T::draw(g);
    }
}

/// `Tensor.random_(-2^63, None)` on int64: every 64-bit value, `u64` reinterpreted.
pub fn random_full_range_(g: &mut Generator, out: &mut [i64]) {
    for v in out.iter_mut() {
        *v = g.next_u64() as i64;
    }
}

/// `torch.normal(mean, std)` with `mean` and/or `std` tensors of one length `n` (a length-1
/// slice broadcasts; `None` is a Python float given in `scalar`). The output (length of the
/// longest) is filled by `normal_` — `normal_(0, std)` when only `mean` is a tensor, else
/// `normal_(0, 1)` — then multiplied by `std` and added to `mean` in `T`, as PyTorch does.
///
/// # Errors
/// If the lengths do not broadcast, or a `std` is negative.
pub fn normal_tensor<T: Float>(
    g: &mut Generator,
    mean: Result<&[T], f64>,
    std: Result<&[T], f64>,
) -> Result<Vec<T>> {
    const OP: &str = "normal";
    let len = |x: &Result<&[T], f64>| x.as_ref().map_or(1, |s| s.len());
    let n = len(&mean).max(len(&std));
    for l in [len(&mean), len(&std)] {
        if l != n && l != 1 {
            return Err(invalid(OP, "std", "mean and std do not broadcast"));
        }
    }
    let at = |s: &[T], i: usize| if s.len() == 1 { s[0] } else { s[i] };
    let mut out = vec![T::ZERO; n];
    match (&mean, &std) {
        (Ok(m), Err(s)) => {
            if !(*s >= 0.0) {
                return Err(invalid(
                    OP,
                    "std",
                    format!("normal expects std >= 0.0, but found std {s}"),
                ));
            }
            super::normal_(g, &mut out, 0.0, *s)?;
            for (i, o) in out.iter_mut().enumerate() {
                *o = o.add(at(m, i));
            }
        }
        _ => {
            if let Ok(s) = &std
                && s.iter().any(|v| !(v.to_f64() >= 0.0))
            {
                return Err(invalid(
                    OP,
                    "std",
                    "normal expects all elements of std >= 0.0",
                ));
            }
            super::normal_(g, &mut out, 0.0, 1.0)?;
            for (i, o) in out.iter_mut().enumerate() {
                let s = match &std {
                    Ok(s) => at(s, i),
                    Err(s) => T::from_f64(*s),
                };
                let m = match &mean {
                    Ok(m) => at(m, i),
                    Err(m) => T::from_f64(*m),
                };
                *o = o.mul(s).add(m);
            }
        }
    }
    Ok(out)
}

/// `torch.poisson(rates)`: Hörmann's PTRS for rates of at least 10 (with the C library's
/// `lgamma`), a product of uniforms below.
///
/// # Errors
/// If a rate is negative or NaN.
pub fn poisson<T: Float>(g: &mut Generator, rates: &[T]) -> Result<Vec<T>> {
    rates
        .iter()
        .map(|&r| {
            let lam = r.to_f64();
            if !(lam >= 0.0) {
                return Err(invalid(
                    "poisson",
                    "rates",
                    "invalid Poisson rate, expected rate to be non-negative",
                ));
            }
            Ok(T::from_f64(sample_poisson(g, lam) as f64))
        })
        .collect()
}

fn sample_poisson(g: &mut Generator, lam: f64) -> i64 {
    if lam >= 10.0 {
        let slam = lam.sqrt();
        let loglam = log(lam);
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let invalpha = 1.1239 + 1.1328 / (b - 3.4);
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        loop {
            let u = g.next_f64() - 0.5;
            let v = g.next_f64();
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + lam + 0.43).floor() as i64;
            if us >= 0.07 && v <= vr {
                return k;
            }
            if k < 0 || (us < 0.013 && v > us) {
                continue;
            }
            if log(v) + log(invalpha) - log(a / (us * us) + b)
                <= -lam + k as f64 * loglam - lgamma(k as f64 + 1.0)
            {
                return k;
            }
        }
    }
    if lam == 0.0 {
        return 0;
    }
    let limit = exp(-lam);
    let mut x = 0;
    let mut prod = 1.0;
    loop {
        prod *= g.next_f64();
        if prod > limit {
            x += 1;
        } else {
            return x;
        }
    }
}

/// PyTorch's `sample_gamma` for a `T` concentration, computed in f64: boost `alpha < 1` by
/// `pow(1 − u, 1/alpha)`, then Marsaglia–Tsang. PyTorch writes its constants as `float`
/// literals (`1.0f / 3.0f`, `0.0331f`), which are kept.
fn sample_gamma<T: Float>(g: &mut Generator, alpha: T) -> f64 {
    let mut alpha = alpha;
    let mut scale = 1.0f64;
    if alpha.to_f64() < 1.0 {
        if alpha.to_f64() == 0.0 {
            return 0.0;
        }
        // `1.0f / alpha` in the scalar type, then pow in double.
        let inv = T::ONE.div(alpha).to_f64();
        scale *= pow(1.0 - g.next_f64(), inv);
        alpha = alpha.add(T::ONE);
    }
    let third = (1.0f32 / 3.0f32) as f64;
    let d = alpha.sub(T::from_f64(third)).to_f64();
    let c = 1.0 / (9.0 * d).sqrt();
    let k = 0.0331f32 as f64;
    loop {
        let (x, y) = loop {
            let x = std_normal(g);
            let y = 1.0 + c * x;
            if y > 0.0 {
                break (x, y);
            }
        };
        let v = y * y * y;
        let u = 1.0 - g.next_f64();
        let xx = x * x;
        if u < 1.0 - k * xx * xx {
            return scale * d * v;
        }
        if log(u) < 0.5 * xx + d * (1.0 - v + log(v)) {
            return scale * d * v;
        }
    }
}

/// `torch._standard_gamma(alpha)`: one gamma variate per concentration, rounded to `T` and
/// clamped below at `T`'s smallest positive normal number (`finfo.tiny`).
///
/// # Errors
/// If a concentration is negative or NaN.
pub fn standard_gamma<T: Float>(g: &mut Generator, alpha: &[T]) -> Result<Vec<T>> {
    alpha
        .iter()
        .map(|&a| {
            if !(a.to_f64() >= 0.0) {
                return Err(invalid(
                    "_standard_gamma",
                    "alpha",
                    "concentration must be >= 0",
                ));
            }
            let x = T::from_f64(sample_gamma(g, a));
            let tiny = T::tiny();
            Ok(if x.to_f64() < tiny.to_f64() { tiny } else { x })
        })
        .collect()
}

/// `torch.distributions.Gamma(concentration, rate).sample()`:
/// `_standard_gamma(concentration) / rate`, clamped below at `finfo.tiny`.
///
/// # Errors
/// As [`standard_gamma`], or a rate that is not positive.
pub fn gamma_sample<T: Float>(g: &mut Generator, concentration: &[T], rate: T) -> Result<Vec<T>> {
    if !(rate.to_f64() > 0.0) {
        return Err(invalid("Gamma", "rate", "rate must be > 0"));
    }
    let tiny = T::tiny();
    Ok(standard_gamma(g, concentration)?
        .into_iter()
        .map(|x| {
            let v = x.div(rate);
            if v.to_f64() < tiny.to_f64() { tiny } else { v }
        })
        .collect())
}

/// `torch._sample_dirichlet(alpha)` for `alpha` of `rows × k` (row-major), which
/// `distributions.Dirichlet(...).sample()` calls: one f64 gamma per element (clamped below at
/// the f64 `finfo.tiny`), each divided by its row's sum, rounded to `T` and clamped to
/// `[finfo.tiny, largest T below 1]`.
///
/// # Errors
/// If `k == 0` with rows, `alpha.len()` is not a multiple of `k`, or a concentration is
/// negative or NaN.
pub fn dirichlet_sample<T: Float>(g: &mut Generator, alpha: &[T], k: usize) -> Result<Vec<T>> {
    if k == 0 || !alpha.len().is_multiple_of(k) {
        return Err(invalid(
            "Dirichlet",
            "concentration",
            "the concentration must have a last dimension of k > 0 values per row",
        ));
    }
    let mut gam = Vec::with_capacity(alpha.len());
    for &a in alpha {
        if !(a.to_f64() >= 0.0) {
            return Err(invalid(
                "Dirichlet",
                "concentration",
                "concentration must be >= 0",
            ));
        }
        // `sample_gamma<double, double>` on the concentration converted to double.
        gam.push(sample_gamma(g, a.to_f64()).max(f64::MIN_POSITIVE));
    }
    let below_one = T::below_one();
    let mut out = Vec::with_capacity(alpha.len());
    for row in gam.chunks_exact(k) {
        let sum = inner_sum_f64(row);
        for &x in row {
            let v = T::from_f64(x / sum);
            let v = if v.to_f64() < T::tiny().to_f64() {
                T::tiny()
            } else {
                v
            };
            out.push(if v.to_f64() > below_one.to_f64() {
                below_one
            } else {
                v
            });
        }
    }
    Ok(out)
}

/// `torch.distributions.Beta(c1, c0).sample()`: the first component of a Dirichlet draw of
/// `[c1, c0]` for each pair.
///
/// # Errors
/// As [`dirichlet_sample`], or if the two lengths differ.
pub fn beta_sample<T: Float>(g: &mut Generator, c1: &[T], c0: &[T]) -> Result<Vec<T>> {
    if c1.len() != c0.len() {
        return Err(invalid(
            "Beta",
            "concentration0",
            "c1 and c0 must have the same length",
        ));
    }
    let alpha: Vec<T> = c1.iter().zip(c0).flat_map(|(&a, &b)| [a, b]).collect();
    Ok(dirichlet_sample(g, &alpha, 2)?
        .into_iter()
        .step_by(2)
        .collect())
}

/// `torch.distributions.StudentT(df, loc, scale).sample()`: `X = empty(n).normal_()` (the
/// path `normal_` picks for `n` values), `Z = Chi2(df).sample()`, then
/// `loc + scale · (X · rsqrt(Z / df))`, each operation rounded in `T`.
///
/// # Errors
/// If a `df` is not positive.
pub fn student_t_sample<T: Float>(g: &mut Generator, df: &[T], loc: T, scale: T) -> Result<Vec<T>> {
    if df.iter().any(|d| !(d.to_f64() > 0.0)) {
        return Err(invalid("StudentT", "df", "df must be > 0"));
    }
    let mut x = vec![T::ZERO; df.len()];
    super::normal_(g, &mut x, 0.0, 1.0)?;
    let half = T::from_f64(0.5);
    let conc: Vec<T> = df.iter().map(|&d| half.mul(d)).collect();
    let z = gamma_sample(g, &conc, half)?;
    Ok(x.iter()
        .zip(&z)
        .zip(df)
        .map(|((&x, &z), &d)| {
            let r = T::ONE.div(T::from_f64(z.div(d).to_f64().sqrt()));
            loc.add(scale.mul(x.mul(r)))
        })
        .collect())
}

/// `tensor.sum(-1)` over one contiguous row of doubles as PyTorch's AVX2 reduction kernel
/// orders it (`SumKernel.cpp`): rows shorter than 4 add left to right; longer rows add
/// 4-lane vectors into 4 interleaved accumulators (cascaded in levels for long rows), fold
/// them, add the scalar tail, then the 4 lanes in order.
fn inner_sum_f64(row: &[f64]) -> f64 {
    const V: usize = 4;
    const ILP: usize = 4;
    let k = row.len();
    if k < V {
        return row.iter().fold(0.0, |a, &x| a + x);
    }
    let nvec = k / V;
    let vec =
        |i: usize| -> [f64; V] { [row[V * i], row[V * i + 1], row[V * i + 2], row[V * i + 3]] };
    let nilp = nvec / ILP;
    let mut partial = multi_row_sum(nilp, |i, m| vec(ILP * i + m));
    for i in nilp * ILP..nvec {
        add_lanes(&mut partial[0], vec(i));
    }
    for m in 1..ILP {
        let p = partial[m];
        add_lanes(&mut partial[0], p);
    }
    let mut acc = 0.0;
    for &x in &row[nvec * V..] {
        acc += x;
    }
    for l in 0..V {
        acc += partial[0][l];
    }
    acc
}

fn add_lanes(dst: &mut [f64; 4], src: [f64; 4]) {
    for l in 0..4 {
        dst[l] += src[l];
    }
}

/// PyTorch's `multi_row_sum` for 4 interleaved rows of 4-lane vectors: `size` groups, summed
/// in up to 4 cascade levels of at least 16 groups each.
fn multi_row_sum(size: usize, load: impl Fn(usize, usize) -> [f64; 4]) -> [[f64; 4]; 4] {
    const LEVELS: usize = 4;
    let ceil_log2 = if size <= 1 {
        0
    } else {
        usize::BITS as usize - (size - 1).leading_zeros() as usize
    };
    let level_power = 4.max(ceil_log2 / LEVELS);
    let level_step = 1usize << level_power;
    let level_mask = level_step - 1;
    let mut acc = [[[0.0f64; 4]; 4]; LEVELS];
    let mut i = 0;
    while i + level_step <= size {
        for _ in 0..level_step {
            for k in 0..4 {
                add_lanes(&mut acc[0][k], load(i, k));
            }
            i += 1;
        }
        for j in 1..LEVELS {
            for k in 0..4 {
                let lower = acc[j - 1][k];
                add_lanes(&mut acc[j][k], lower);
                acc[j - 1][k] = [0.0; 4];
            }
            if i & (level_mask << (j * level_power)) != 0 {
                break;
            }
        }
    }
    while i < size {
        for k in 0..4 {
            add_lanes(&mut acc[0][k], load(i, k));
        }
        i += 1;
    }
    for j in 1..LEVELS {
        for k in 0..4 {
            let upper = acc[j][k];
            add_lanes(&mut acc[0][k], upper);
        }
    }
    acc[0]
}
