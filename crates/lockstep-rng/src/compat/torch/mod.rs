//! PyTorch 2.15 CPU samplers, bit for bit, on slices.
//!
//! Each function takes the [`Generator`] to draw from and fills (or returns) plain slices in
//! row-major order — the order PyTorch fills a contiguous tensor. Draws happen serially, so the
//! results never depend on the number of threads, exactly as in PyTorch.
//!
//! Bits consumed per element (the engine's 32-bit words):
//!
//! | sampler | f32 | f64 / i64 |
//! |---|---|---|
//! | [`rand`], [`uniform_`] | 1: `(w & 0xFFFFFF)·2^-24` | 2: `(u64 & (2^53−1))·2^-53` |
//! | [`normal_`], n < 16 (scalar path) | 2 per value, computed in f64 with a cached second value | same |
//! | [`normal_`], n ≥ 16 (16-block path) | 1, plus 16 if `n % 16 ≠ 0` | 2, plus 32 |
//! | [`random_`] | 1 if `to − from < 2^28`, else 2 | same |
//! | [`randperm`] | `n − 1` words for `n < 214748364`, else `2n` | – |
//! | [`bernoulli_`], [`dropout`], [`exponential_`] | 2 | 2 |
//! | [`bernoulli_tensor`] | 1 (f32 probabilities) | 2 (f64 probabilities) |
//!
//! Where PyTorch's x86-64 AVX2 build fuses a multiply and an add (`uniform_`, the scalar normal
//! path) lockstep computes a true fused multiply-add too, on every CPU; float32 normals of the
//! 16-block path use PyTorch's AVX2 polynomial `log` and `sincos`, reproduced operation by
//! operation (see `normal.rs`).

mod distributions;
mod float;
pub mod init;
mod normal;

pub use distributions::{
    FromF64, RandomDefault, beta_sample, cauchy_, dirichlet_sample, gamma_sample, geometric_,
    log_normal_, normal_tensor, poisson, random_default_, random_full_range_, standard_gamma,
    student_t_sample,
};
pub use float::Float;
pub use normal::{normal_, normal_scalar_path_};

use crate::{Generator, Result, invalid};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};

/// Fills `out` like `torch.rand`: uniform in `[0, 1)`.
pub fn rand<T: Float>(g: &mut Generator, out: &mut [T]) {
    T::fill_unit(g, out);
}

/// Fills `out` like `Tensor.uniform_(a, b)`: `fma(x, b − a, a)` for a unit uniform `x`, with
/// `a`, `b` and `b − a` rounded to `T` first, and `b` itself replaced by `a`.
///
/// # Errors
/// If `a > b`, or either bound or `b − a` is not finite.
pub fn uniform_<T: Float>(g: &mut Generator, out: &mut [T], a: f64, b: f64) -> Result<()> {
    if !(a <= b) {
        return Err(invalid(
            "uniform_",
            "from",
            format!("expects to return a [from, to) range, but found from={a} > to={b}"),
        ));
    }
    if !(b - a).is_finite() {
        return Err(invalid(
            "uniform_",
            "to",
            format!("to - from must be finite, but found from={a}, to={b}"),
        ));
    }
    let (lo, hi) = (T::from_f64(a), T::from_f64(b));
    let range = hi.sub(lo);
    T::fill_unit(g, out);
    for v in out.iter_mut() {
        let x = v.mul_add(range, lo);
        *v = if x == hi { lo } else { x };
    }
    Ok(())
}

/// An integer type or float type that [`random_`] can write.
pub trait FromI64: Copy {
    /// Conversion as PyTorch's cast from `int64` to the tensor dtype.
    fn from_i64(v: i64) -> Self;
}

macro_rules! from_i64 {
    ($($t:ty),*) => {$(
        impl FromI64 for $t {
            #[inline]
            fn from_i64(v: i64) -> Self { v as $t }
        }
    )*};
}
from_i64!(i64, i32, i16, i8, u8, f32, f64);

/// Fills `out` like `Tensor.random_(from, to)` / `torch.randint(from, to)`:
/// `from + (w mod (to − from))`, where `w` is one 32-bit word if the range is below `2^28` and
/// one 64-bit draw otherwise (plain modulo, slightly biased for large ranges, as in PyTorch).
///
/// # Errors
/// If `from >= to`.
pub fn random_<T: FromI64>(g: &mut Generator, out: &mut [T], from: i64, to: i64) -> Result<()> {
    if from >= to {
        return Err(invalid(
            "random_",
            "from",
            format!("expects 'from' to be less than 'to', but got from={from} >= to={to}"),
        ));
    }
    let range = (to as i128 - from as i128) as u64;
    if range >= 1 << 28 {
        for v in out.iter_mut() {
            let w = g.next_u64() % range;
            *v = T::from_i64(from.wrapping_add(w as i64));
        }
    } else {
        let r = range as u32;
        for v in out.iter_mut() {
            let w = g.next_u32() % r;
            *v = T::from_i64(from + w as i64);
        }
    }
    Ok(())
}

/// A dtype `Tensor.random_(from, None)` can fill: the top of its range and how `from` is
/// checked, as PyTorch's `random_from_to_impl` decides them per dtype.
pub trait RandomFrom: Copy {
    /// PyTorch's name of the dtype in its errors (`int`, `short int`, `float`, …).
    const NAME: &'static str;
    /// Whether `from = i64::MIN` (the full 64-bit range) is supported (int64, float, double).
    const FULL_RANGE: bool;
    /// `(from, to_inc)` after PyTorch's adjustment and checks, or the error's reason.
    fn bounds(from: i64) -> core::result::Result<(i64, i64), String>;
    /// `static_cast<T>(int64 v)`.
    fn cast(v: i64) -> Self;
}

macro_rules! random_from_int {
    ($($t:ty => $name:expr),*) => {$(
        impl RandomFrom for $t {
            const NAME: &'static str = $name;
            const FULL_RANGE: bool = <$t>::MIN as i64 == i64::MIN;
            fn bounds(from: i64) -> core::result::Result<(i64, i64), String> {
                if from < <$t>::MIN as i64 || from > <$t>::MAX as i64 {
                    return Err(format!("from is out of bounds for {}", $name));
                }
                Ok((from, <$t>::MAX as i64))
            }
            #[inline]
            fn cast(v: i64) -> Self { v as $t }
        }
    )*};
}
random_from_int!(i64 => "long int", i32 => "int", i16 => "short int", i8 => "signed char",
    u8 => "unsigned char");

impl RandomFrom for bool {
    const NAME: &'static str = "bool";
    const FULL_RANGE: bool = false;
    fn bounds(from: i64) -> core::result::Result<(i64, i64), String> {
        if !(0..=1).contains(&from) {
            return Err("from is out of bounds for bool".into());
        }
        Ok((from, 1))
    }
    #[inline]
    fn cast(v: i64) -> Self {
        v != 0
    }
}

/// `static_cast<int64_t>(x)` as x86-64 computes it (`cvttsd2si`): out of range or NaN gives
/// `i64::MIN` (Rust's `as` saturates instead).
fn x86_to_i64(x: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

macro_rules! random_from_float {
    ($($t:ty => $name:expr, $digits:expr),*) => {$(
        impl RandomFrom for $t {
            const NAME: &'static str = $name;
            const FULL_RANGE: bool = true;
            fn bounds(mut from: i64) -> core::result::Result<(i64, i64), String> {
                // `update_from`: move `from` right until it survives the cast to the dtype.
                if from == i64::MAX {
                    // PyTorch's `update_from` never returns here (it shifts a negative value
                    // right until it reaches zero).
                    return Err(format!(
                        "from={from} is too large for {} (PyTorch does not return)",
                        $name
                    ));
                }
                let from_plus_1 = x86_to_i64((from + 1) as $t as f64);
                if from_plus_1 < from {
                    let mut f = from.wrapping_add(1).unsigned_abs();
                    let mut n = 0i32;
                    loop {
                        f >>= 1;
                        if f == 0 {
                            break;
                        }
                        n += 1;
                    }
                    from = from_plus_1.wrapping_add(1i64 << (n - $digits + 1));
                }
                let to_inc = 1i64 << $digits;
                if from >= to_inc {
                    return Err(format!(
                        "random_ expects 'from' casted to dtype to be less than or equal to \
                         'to_inc' casted to dtype, but got from={from} > to_inc={to_inc}"
                    ));
                }
                Ok((from, to_inc))
            }
            #[inline]
            fn cast(v: i64) -> Self { v as $t }
        }
    )*};
}
random_from_float!(f32 => "float", 24, f64 => "double", 53);

/// Fills `out` like `Tensor.random_(from, None)` (also `random_(from, to=None)`): integers in
/// `[from, top]` where `top` is the dtype's largest value (1 for bool, `2^24` for float32,
/// `2^53` for float64), drawn as in [`random_`] with `range = top − from + 1`; `from =
/// i64::MIN` gives every 64-bit value (int64, float32, float64 only).
///
/// # Errors
/// If `from` is outside the dtype (PyTorch's "from is out of bounds for int"), or, for floats,
/// not below the top after PyTorch's rounding of `from`; `from = i64::MIN` on a dtype other
/// than int64/float32/float64 with a non-empty `out`. Nothing is drawn then.
pub fn random_from_<T: RandomFrom>(g: &mut Generator, out: &mut [T], from: i64) -> Result<()> {
    if from == i64::MIN {
        if out.is_empty() {
            return Ok(());
        }
        if !T::FULL_RANGE {
            return Err(invalid(
                "random_",
                "from",
                format!(
                    "random_full_64_bits_range_kernel_cpu handles only int64, double, float and \
                     bfloat16 (dtype {})",
                    T::NAME
                ),
            ));
        }
        for v in out.iter_mut() {
            *v = T::cast(g.next_u64() as i64);
        }
        return Ok(());
    }
    let (from, to_inc) = T::bounds(from).map_err(|r| invalid("random_", "from", r))?;
    let range = (to_inc as u64).wrapping_sub(from as u64).wrapping_add(1);
    if range >= 1 << 28 {
        for v in out.iter_mut() {
            *v = T::cast((g.next_u64() % range).wrapping_add(from as u64) as i64);
        }
    } else {
        for v in out.iter_mut() {
            *v = T::cast((g.next_u32() as u64 % range).wrapping_add(from as u64) as i64);
        }
    }
    Ok(())
}

/// One draw of `torch.empty((), dtype=torch.int64).random_()`: a 64-bit draw modulo `2^63`.
/// This is how PyTorch's data pipeline draws seeds (`base_seed`, `RandomSampler`).
pub fn random_i64(g: &mut Generator) -> i64 {
    (g.next_u64() % (1 << 63)) as i64
}

/// Below this size `randperm` uses a forward Fisher–Yates shuffle on 32-bit words, from it on
/// an inside-out shuffle on 64-bit words (PyTorch's `4294967295 / 20`).
pub const RANDPERM_THRESHOLD: usize = 214_748_364;

/// `torch.randperm(n)`: a random permutation of `0..n`.
///
/// # Panics
/// If the permutation cannot be allocated (`n` near `usize::MAX`, or more than memory holds);
/// [`try_randperm`] returns that as an error instead.
pub fn randperm(g: &mut Generator, n: usize) -> Vec<i64> {
    match try_randperm(g, n) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// `torch.randperm(n)`: a random permutation of `0..n`, the same draws as [`randperm`].
///
/// # Errors
/// [`Error::OutOfMemory`](crate::Error::OutOfMemory) if `n` values of 8 bytes cannot be
/// allocated, before anything is drawn; [`Error::InvalidArgument`](crate::Error) if `n`
/// exceeds `i64::MAX` (the permutation's values are `int64`, as in PyTorch).
pub fn try_randperm(g: &mut Generator, n: usize) -> Result<Vec<i64>> {
    if i64::try_from(n).is_err() {
        return Err(invalid(
            "randperm",
            "n",
            format!("n must fit in int64, but got n={n}"),
        ));
    }
    let mut r = crate::try_with_capacity::<i64>("randperm", n)?;
    if n < RANDPERM_THRESHOLD {
        r.extend(0..n as i64);
        for i in 0..n.saturating_sub(1) {
            let z = (g.next_u32() % (n - i) as u32) as usize;
            r.swap(i, i + z);
        }
    } else {
        r.resize(n, 0);
        for i in 0..n {
            let z = (g.next_u64() % (i as u64 + 1)) as usize;
            r[i] = r[z];
            r[z] = i as i64;
        }
    }
    Ok(r)
}

fn check_probability(op: &'static str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(invalid(
            op,
            "p",
            format!("expects p to be in [0, 1], but got p={p}"),
        ))
    }
}

/// Fills `out` like `Tensor.bernoulli_(p)` with a float `p`: `1` where a 53-bit uniform double
/// is below `p`, else `0`.
///
/// # Errors
/// If `p` is not in `[0, 1]`.
pub fn bernoulli_<T: Float>(g: &mut Generator, out: &mut [T], p: f64) -> Result<()> {
    check_probability("bernoulli_", p)?;
    // SAFETY: only values are written through the cells (`decide` writes each one).
    let cells = unsafe { &mut *(out as *mut [T] as *mut [MaybeUninit<T>]) };
    bernoulli_fill(g, p, T::ONE, T::ZERO, cells);
    Ok(())
}

/// The draws of [`bernoulli_`] for `out.len()` elements as values, written into `out` (every
/// element) a block at a time: `hit` where the element's 53-bit uniform double `u` is below
/// `p`, else `miss`.
///
/// `u < p` is decided on the integers: `u = m · 2⁻⁵³` exactly for the 53-bit integer `m`, and
/// `p · 2⁵³` is exact (a power-of-two scaling), so `u < p` holds iff `m < ⌈p · 2⁵³⌉` — the
/// same outcome as the double comparison, without converting `m` (which AVX2 cannot do in
/// vectors).
#[inline]
fn bernoulli_fill<T: Float>(
    g: &mut Generator,
    p: f64,
    hit: T,
    miss: T,
    out: &mut [MaybeUninit<T>],
) {
    // Raw words in blocks (the engine tempers whole runs at once): each value takes two words,
    // `(first << 32) | second`, exactly as `next_f64` would.
    const BLOCK: usize = 256;
    let threshold = (p * (1u64 << 53) as f64).ceil() as u64;
    let mut raw = [0u32; 2 * BLOCK];
    for o in out.chunks_mut(BLOCK) {
        let raw = &mut raw[..2 * o.len()];
        g.fill_u32(raw);
        decide(raw, threshold, hit, miss, o);
    }
}

/// `out[i] = hit` if the 53 low bits of `(raw[2i] << 32) | raw[2i + 1]` are below `threshold`,
/// else `miss`; built for AVX-512 or AVX2 where the path in use allows it (the same integer
/// comparisons: eight 64-bit lanes at a time with AVX-512, four with AVX2).
#[inline]
fn decide<T: Float>(raw: &[u32], threshold: u64, hit: T, miss: T, out: &mut [MaybeUninit<T>]) {
    #[inline(always)]
    fn imp<T: Float>(raw: &[u32], threshold: u64, hit: T, miss: T, out: &mut [MaybeUninit<T>]) {
        for (o, w) in out.iter_mut().zip(raw.chunks_exact(2)) {
            let bits = ((w[0] as u64) << 32) | w[1] as u64;
            o.write(if (bits & ((1 << 53) - 1)) < threshold {
                hit
            } else {
                miss
            });
        }
    }
    // Opaque values: with `hit = 1 / k` and `miss = 0 / k` in sight the compiler would divide
    // per element.
    let (hit, miss) = (core::hint::black_box(hit), core::hint::black_box(miss));
    // `imp` compiled for `$feat`, run when the path in use allows `$isa` and the CPU has it.
    #[cfg(target_arch = "x86_64")]
    macro_rules! build_for {
        ($isa:ident, $feat:literal) => {{
            #[target_feature(enable = $feat)]
            fn build<T: Float>(
                raw: &[u32],
                threshold: u64,
                hit: T,
                miss: T,
                out: &mut [MaybeUninit<T>],
            ) {
                imp(raw, threshold, hit, miss, out)
            }
            if crate::isa::Isa::$isa.enabled() && crate::isa::Isa::$isa.available() {
                // SAFETY: the CPU supports the build's features (checked just above).
                return unsafe { build(raw, threshold, hit, miss, out) };
            }
        }};
    }
    #[cfg(target_arch = "x86_64")]
    build_for!(Avx512, "avx512f");
    #[cfg(target_arch = "x86_64")]
    build_for!(Avx2, "avx2");
    imp(raw, threshold, hit, miss, out)
}

/// `torch.bernoulli(probs)`: one draw per probability, in `T`'s precision (24-bit uniforms for
/// `f32` probabilities, 53-bit for `f64`), compared with `<`.
///
/// # Errors
/// If a probability is not in `[0, 1]` (NaN included).
pub fn bernoulli_tensor<T: Float>(g: &mut Generator, probs: &[T]) -> Result<Vec<T>> {
    if let Some(p) = probs
        .iter()
        .find(|p| !(p.to_f64() >= 0.0 && p.to_f64() <= 1.0))
    {
        return Err(invalid(
            "bernoulli",
            "p",
            format!("all elements of p must be in [0, 1], found {}", p.to_f64()),
        ));
    }
    Ok(probs
        .iter()
        .map(|&p| if T::unit(g) < p { T::ONE } else { T::ZERO })
        .collect())
}

/// `torch.nn.functional.dropout(input, p, training)`: zeroes each element with probability `p`
/// and scales the rest by `1 / (1 − p)` (the mask is `bernoulli_(1 − p)` divided by `1 − p` in
/// `T`, then multiplied in). No draws if `p` is 0 or 1, `training` is false or `input` is empty.
///
/// # Errors
/// If `p` is not in `[0, 1]`.
pub fn dropout<T: Float>(g: &mut Generator, input: &[T], p: f64, training: bool) -> Result<Vec<T>> {
    if !(0.0..=1.0).contains(&p) {
        return Err(invalid(
            "dropout",
            "p",
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    if p == 0.0 || !training || input.is_empty() {
        return Ok(input.to_vec());
    }
    if p == 1.0 {
        return Ok(input.iter().map(|&x| x.mul(T::ZERO)).collect());
    }
    let mask = dropout_mask::<T>(g, input.len(), p)?;
    Ok(input.iter().zip(&mask).map(|(&x, &m)| x.mul(m)).collect())
}

/// The mask [`dropout`] multiplies its input by, for `n` elements: `bernoulli_(1 − p)` divided
/// by `1 − p` in `T` (`1 / (1 − p)` where kept, `0` where dropped), from the same draws — so
/// it is what `dropout` returns for an input of `n` ones, bit for bit (`1 · m = m`). All ones
/// if `p` is 0 and all zeros if `p` is 1 (no draws in either case).
///
/// # Errors
/// If `p` is not in `[0, 1]`; [`Error::OutOfMemory`](crate::Error::OutOfMemory) if the mask
/// cannot be allocated.
pub fn dropout_mask<T: Float>(g: &mut Generator, n: usize, p: f64) -> Result<Vec<T>> {
    dropout_mask_with(g, n, p, None)
}

/// Runs `f(i)` once for every `i < parts` and returns when all are done, on whichever threads
/// it chooses (a thread team's `run_parts`).
pub type Parts<'a> = &'a (dyn Fn(usize, &(dyn Fn(usize) + Sync)) + Sync);

/// [`dropout_mask`], with the tempering of the engine's words and the decisions of a large
/// mask run as parts through `parts` (the engine's twist, a chain from block to block, stays
/// one part at a time): the same draws, the same mask, the generator left in the same state.
/// Each part does its work once, whoever calls it first; a runner that calls one twice does
/// nothing more.
///
/// # Errors
/// As [`dropout_mask`]; an error too (the mask is not returned, and the generator's state is
/// unspecified) if `parts` returns without having called every part.
pub fn dropout_mask_with<T: Float>(
    g: &mut Generator,
    n: usize,
    p: f64,
    parts: Option<Parts>,
) -> Result<Vec<T>> {
    if !(0.0..=1.0).contains(&p) {
        return Err(invalid(
            "dropout",
            "p",
            format!("dropout probability has to be between 0 and 1, but got {p}"),
        ));
    }
    let mut mask = crate::try_with_capacity::<T>("dropout", n)?;
    if p == 0.0 || p == 1.0 {
        mask.resize(n, if p == 0.0 { T::ONE } else { T::ZERO });
        return Ok(mask);
    }
    let keep = T::from_f64(1.0 - p);
    // The mask is 0 or 1 before the division, so it takes two values: divide once.
    let kept = T::ONE.div(keep);
    let dropped = T::ZERO.div(keep);
    let out = &mut mask.spare_capacity_mut()[..n];
    match parts {
        Some(parts) if n >= 2 * PAR_PIECE => {
            bernoulli_fill_parts(g, 1.0 - p, kept, dropped, out, parts)?
        }
        _ => bernoulli_fill(g, 1.0 - p, kept, dropped, out),
    }
    // SAFETY: the fill wrote all `n` elements.
    unsafe { mask.set_len(n) };
    Ok(mask)
}

/// Elements per part of [`bernoulli_fill_parts`], and per region (a region's raw words, two
/// per element, stay in L2 from their twist to their decisions).
const PAR_PIECE: usize = 1 << 12;
const PAR_CHUNK: usize = 1 << 14;
// A region's parts (the twist and the pieces) each have a bit of one `u64`.
const _: () = assert!(PAR_CHUNK / PAR_PIECE < 64);

/// [`bernoulli_fill`] with the decisions in parts: the mask in regions of [`PAR_CHUNK`]
/// elements, each region one call of `parts` whose part 0 draws the next region's untempered
/// engine words (the twist: a chain, so one part) while the other parts temper this region's
/// words and decide, [`PAR_PIECE`] elements each. The same words in the same order: the same
/// values, and the generator ends where [`bernoulli_fill`] leaves it.
fn bernoulli_fill_parts<T: Float>(
    g: &mut Generator,
    p: f64,
    hit: T,
    miss: T,
    out: &mut [MaybeUninit<T>],
    parts: Parts,
) -> Result<()> {
    /// The output's elements, shared by parts that each write their own range.
    struct Cells<T>(*mut MaybeUninit<T>);
    // SAFETY: each range is written only by the one call that claimed its part (below), and
    // `out` stays borrowed until `parts` returns.
    unsafe impl<T: Send> Sync for Cells<T> {}
    const BLOCK: usize = 256;
    let threshold = (p * (1u64 << 53) as f64).ceil() as u64;
    let words = 2 * PAR_CHUNK.min(out.len());
    let mut b0 = crate::try_with_capacity::<u32>("dropout", words)?;
    let mut b1 = crate::try_with_capacity::<u32>("dropout", words)?;
    b0.resize(words, 0);
    b1.resize(words, 0);
    let n = out.len();
    let span = |c: usize| c * PAR_CHUNK..((c + 1) * PAR_CHUNK).min(n);
    g.fill_untempered(&mut b0[..2 * span(0).len()]);
    let g = std::sync::Mutex::new(g);
    for c in 0..n.div_ceil(PAR_CHUNK) {
        let (cur, next) = match c % 2 {
            0 => (&b0[..], &mut b1[..]),
            _ => (&b1[..], &mut b0[..]),
        };
        let next_len = match (c + 1) * PAR_CHUNK < n {
            true => span(c + 1).len(),
            false => 0,
        };
        let next = std::sync::Mutex::new(&mut next[..2 * next_len]);
        let r = span(c);
        let len = r.len();
        let cells = Cells(out[r].as_mut_ptr());
        let cells = &cells;
        // Which parts have run: each claims its bit first, so a part's work is done once
        // (its range written by one thread) whatever the runner does.
        let count = 1 + len.div_ceil(PAR_PIECE);
        let done = AtomicU64::new(0);
        parts(count, &|i| {
            if i >= count || done.fetch_or(1 << i, Ordering::Relaxed) & (1 << i) != 0 {
                return;
            }
            if i == 0 {
                let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                if !next.is_empty() {
                    g.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .fill_untempered(&mut next);
                }
                return;
            }
            let (a, b) = ((i - 1) * PAR_PIECE, (i * PAR_PIECE).min(len));
            // SAFETY: elements `a..b` of the region are this part's alone.
            let o = unsafe { core::slice::from_raw_parts_mut(cells.0.add(a), b - a) };
            let mut w = [0u32; 2 * BLOCK];
            for (k, ob) in o.chunks_mut(BLOCK).enumerate() {
                let src = &cur[2 * (a + k * BLOCK)..][..2 * ob.len()];
                let w = &mut w[..src.len()];
                crate::engines::mt19937::temper_words(src, w);
                decide(w, threshold, hit, miss, ob);
            }
        });
        if done.into_inner() != (1 << count) - 1 {
            return Err(invalid(
                "dropout",
                "parts",
                "the part runner returned without running every part",
            ));
        }
    }
    Ok(())
}

/// Fills `out` like `Tensor.exponential_(lambd)`: `(−1/λ)·log1p(−u)` in f64 for a 53-bit
/// uniform `u`, rounded to `T`.
///
/// # Errors
/// If `lambd` is not positive (or NaN).
pub fn exponential_<T: Float>(g: &mut Generator, out: &mut [T], lambd: f64) -> Result<()> {
    if !(lambd > 0.0) {
        return Err(invalid(
            "exponential_",
            "lambd",
            format!("expects lambda > 0.0, but found lambda={lambd}"),
        ));
    }
    let scale = -1.0 / lambd;
    for v in out.iter_mut() {
        *v = T::from_f64(scale * (-g.next_f64()).ln_1p());
    }
    Ok(())
}

/// `torch.multinomial(probs, num_samples, replacement)` for `probs` of `rows × categories`
/// (row-major); returns `rows × num_samples` category indices.
///
/// Without replacement, or with `num_samples == 1`, PyTorch races exponentials: it draws one
/// exponential per category, divides the probabilities by them and takes the largest
/// (`rows × categories` draws whatever `num_samples` is). With replacement and more than one
/// sample it inverts the normalized running sum with one 53-bit uniform per sample.
///
/// # Errors
/// If `probs.len() != rows × categories`, a weight is negative, infinite or NaN, a row sums to
/// zero, `num_samples` is 0, or `num_samples > categories` without replacement;
/// [`Error::OutOfMemory`](crate::Error::OutOfMemory) if the `rows × num_samples` result cannot
/// be allocated (checked before anything is drawn).
pub fn multinomial<T: Float>(
    g: &mut Generator,
    probs: &[T],
    rows: usize,
    categories: usize,
    num_samples: usize,
    replacement: bool,
) -> Result<Vec<i64>> {
    const OP: &str = "multinomial";
    if rows.checked_mul(categories) != Some(probs.len()) {
        return Err(invalid(
            OP,
            "input",
            format!(
                "{} probabilities do not form {rows} rows of {categories} categories",
                probs.len()
            ),
        ));
    }
    if categories == 0 {
        return Err(invalid(
            OP,
            "input",
            "prob_dist must have at least 1 category",
        ));
    }
    if num_samples == 0 {
        return Err(invalid(
            OP,
            "num_samples",
            "cannot sample n_sample <= 0 samples",
        ));
    }
    if !replacement && num_samples > categories {
        return Err(invalid(
            OP,
            "num_samples",
            format!(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement \
                 ({num_samples} > {categories})"
            ),
        ));
    }
    for row in probs.chunks(categories) {
        let mut sum = 0.0;
        for p in row {
            let p = p.to_f64();
            if !p.is_finite() || p < 0.0 {
                return Err(invalid(
                    OP,
                    "input",
                    format!("probability tensor contains either `inf`, `nan` or element < 0 ({p})"),
                ));
            }
            sum += p;
        }
        if sum <= 0.0 {
            return Err(invalid(
                OP,
                "input",
                "invalid multinomial distribution (sum of probabilities <= 0)",
            ));
        }
    }
    let total = rows
        .checked_mul(num_samples)
        .ok_or(crate::Error::OutOfMemory {
            op: OP,
            bytes: rows as u128 * num_samples as u128 * 8,
        })?;
    let mut out = crate::try_with_capacity::<i64>(OP, total)?;
    if !replacement || num_samples == 1 {
        let mut q = vec![T::ZERO; probs.len()];
        exponential_(g, &mut q, 1.0)?;
        for (row, qrow) in probs.chunks(categories).zip(q.chunks_mut(categories)) {
            for (qi, &p) in qrow.iter_mut().zip(row) {
                *qi = p.div(*qi);
            }
            let mut idx: Vec<usize> = (0..categories).collect();
            // Largest first; equal keys (zero probabilities only) keep index order.
            idx.sort_by(|&a, &b| {
                qrow[b]
                    .to_f64()
                    .total_cmp(&qrow[a].to_f64())
                    .then(a.cmp(&b))
            });
            out.extend(idx[..num_samples].iter().map(|&i| i as i64));
        }
    } else {
        let mut cum = vec![T::ZERO; categories];
        for row in probs.chunks(categories) {
            let mut s = T::ZERO;
            for (c, &p) in cum.iter_mut().zip(row) {
                s = s.add(p);
                *c = s;
            }
            for c in cum.iter_mut() {
                *c = c.div(s);
            }
            cum[categories - 1] = T::ONE;
            for _ in 0..num_samples {
                let u = g.next_f64();
                let (mut left, mut right) = (0usize, categories);
                while right > left {
                    let mid = left + (right - left) / 2;
                    if cum[mid].to_f64() < u {
                        left = mid + 1;
                    } else {
                        right = mid;
                    }
                }
                out.push(left as i64);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
