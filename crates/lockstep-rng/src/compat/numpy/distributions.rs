//! NumPy's non-uniform distributions for both [`Generator`](super::Generator) and the legacy
//! [`RandomState`](super::RandomState), bit for bit with NumPy 2.4.
//!
//! The samplers are methods of the [`Distributions`] trait, implemented by both. The two
//! classes share most algorithms but not all: `RandomState` keeps NumPy 1.16's code frozen
//! (polar Gaussians with a cached second value, exponentials as `−log(1 − U)`, Jöhnk's beta
//! without the underflow guard, the original BTPE binomial error terms, the HRUA
//! hypergeometric with `loggam`, `1 − exp` in place of `−expm1`, …), while `Generator` uses
//! the ziggurat normal and exponential and the fixes made since. Each sampler below follows
//! the class it is called on.
//!
//! Where NumPy calls the C library, these samplers call lockstep's bit-exact ports of glibc's
//! `log`, `exp` and `pow` ([`glibc_math`](crate::compat::glibc_math)), so those give NumPy's
//! Linux values on every platform, and the same C functions through `extern "C"` for the rest
//! (`log1p`, `expm1`, `cos`, `acos`, `fmod`, `logf`, `powf`), equal to NumPy's where the C
//! library is glibc (NumPy's Linux wheels).
//!
//! Parameter checks follow NumPy's (`ValueError` there, [`Error::InvalidArgument`] here),
//! plus a few where NumPy would loop forever (a NaN gamma shape, for instance).
//!
//! [`Error::InvalidArgument`]: crate::Error::InvalidArgument

use std::f64::consts::PI;

use crate::{Result, invalid};

/// The C library's math functions NumPy calls (glibc on NumPy's Linux wheels), where
/// lockstep has no bit-exact port of glibc's.
pub(super) mod libm {
    unsafe extern "C" {
        pub safe fn log1p(x: f64) -> f64;
        pub safe fn expm1(x: f64) -> f64;
        pub safe fn cos(x: f64) -> f64;
        pub safe fn acos(x: f64) -> f64;
        pub safe fn fmod(x: f64, y: f64) -> f64;
        pub safe fn logf(x: f32) -> f32;
        pub safe fn powf(x: f32, y: f32) -> f32;
    }
}
// glibc's `log`, `exp` and `pow` as ports: the same bits as NumPy's Linux wheels on every
// platform, inlined, and eight lanes at a time where a sampler batches them.
use crate::compat::glibc_math::{exp, log, pow};
use libm::{acos, cos, expm1, fmod, log1p};

pub(crate) mod sealed {
    /// The draws every NumPy distribution is built from, as the class it runs on makes them.
    pub trait Source {
        /// `RandomState` (frozen legacy algorithms) rather than `Generator`.
        const LEGACY: bool;
        /// `next_double`: a uniform in `[0, 1)` with 53 bits.
        fn uniform(&mut self) -> f64;
        /// One 32-bit output (`next_uint32`).
        fn word32(&mut self) -> u32;
        /// One 64-bit output (`next_uint64`).
        fn word64(&mut self) -> u64;
        /// A standard normal: the ziggurat (`Generator`) or the cached polar pair (legacy).
        fn gauss(&mut self) -> f64;
        /// A standard exponential: the ziggurat (`Generator`) or `−log(1 − U)` (legacy).
        fn exp1(&mut self) -> f64;
        /// Legacy only: takes the cached second Gaussian of the last polar pair, if pending.
        fn take_gauss(&mut self) -> Option<f64> {
            None
        }
        /// Legacy only: caches `g` as the pending polar Gaussian.
        fn put_gauss(&mut self, _g: f64) {}
        /// Block sources: the buffered words not yet drawn (made when none are left; empty
        /// where the source has no buffer), to be read ahead and marked drawn by
        /// [`consume`](Source::consume).
        fn words(&mut self) -> &[u32] {
            &[]
        }
        /// Marks the first `n` words of [`words`](Source::words) drawn.
        fn consume(&mut self, _n: usize) {}
        /// `out[i] = uniform()` in order (block sources convert whole runs at once).
        #[inline(always)]
        fn uniforms(&mut self, out: &mut [f64]) {
            out.iter_mut().for_each(|o| *o = self.uniform());
        }
    }

    /// A class whose draws can also come from a block of words made at once.
    pub trait Blocked: Source {
        /// A source that draws exactly what `Self` would (same words, same order, same
        /// values) from words made in blocks; when dropped it leaves the generator exactly
        /// where drawing one at a time would have (unused words are given back).
        type Block<'a>: Source
        where
            Self: 'a;
        /// The block source over `self`.
        fn block(&mut self) -> Self::Block<'_>;
    }
}
use sealed::{Blocked, Source};

/// `x as i64` for the C casts `(int64_t)floor(...)`: values in range are exact.
#[inline]
fn to_i64(x: f64) -> i64 {
    x as i64
}

// ---------------------------------------------------------------------------------- checks

fn positive(op: &'static str, name: &'static str, v: f64) -> Result<()> {
    // NumPy: `val <= 0` is an error (so NaN passes); callers that would hang on NaN add
    // `not_nan`.
    if v <= 0.0 {
        return Err(invalid(op, name, format!("{name} <= 0 (got {v})")));
    }
    Ok(())
}

fn non_negative(op: &'static str, name: &'static str, v: f64) -> Result<()> {
    // NumPy tests the sign bit: -0.0 is rejected too, NaN passes.
    if !v.is_nan() && v.is_sign_negative() {
        return Err(invalid(op, name, format!("{name} < 0 (got {v})")));
    }
    Ok(())
}

fn not_nan(op: &'static str, name: &'static str, v: f64) -> Result<()> {
    if v.is_nan() {
        return Err(invalid(op, name, format!("{name} is NaN")));
    }
    Ok(())
}

fn bounded_0_1(op: &'static str, name: &'static str, v: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&v) {
        return Err(invalid(
            op,
            name,
            format!("{name} < 0, {name} > 1 or {name} is NaN (got {v})"),
        ));
    }
    Ok(())
}

fn bounded_gt_0_1(op: &'static str, name: &'static str, v: f64) -> Result<()> {
    if !(v > 0.0 && v <= 1.0) {
        return Err(invalid(
            op,
            name,
            format!("{name} <= 0, {name} > 1 or {name} is NaN (got {v})"),
        ));
    }
    Ok(())
}

/// NumPy's `POISSON_LAM_MAX` (also `LEGACY_POISSON_LAM_MAX` where C `long` is 64 bits):
/// `float(2^63 − 1) − sqrt(2^63 − 1)·10`.
fn poisson_lam_max() -> f64 {
    let m = i64::MAX as f64;
    m - m.sqrt() * 10.0
}

#[inline(always)]
fn fill<T>(out: &mut [T], mut draw: impl FnMut() -> T) {
    for o in out {
        *o = draw();
    }
}

/// Below this many values a call draws one word at a time: a block source costs a refill
/// (and giving back the unused words) that only pays off over several values.
const BLOCK_MIN: usize = 16;

/// `$body` with `$s` bound to the class itself or, for `$n >= BLOCK_MIN` values, to its block
/// source (same words, same values).
macro_rules! with_block {
    ($self:ident, $n:expr, |$s:ident| $body:expr) => {
        if $n >= BLOCK_MIN {
            let mut block = $self.block();
            let $s = &mut block;
            $body
        } else {
            let $s = &mut *$self;
            $body
        }
    };
}

/// A sampler loop, compiled twice: with FMA, taken where the CPU has it (the glibc ports'
/// multiply-adds, exact either way, are then one instruction instead of a call), and
/// without. The samplers it calls are `inline(always)` so that their code lands in it.
macro_rules! fma_fn {
    ($(#[$m:meta])* fn $name:ident<S: Source>($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[inline(always)]
        fn $name<S: Source>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if crate::isa::Isa::Avx2.enabled() {
                #[target_feature(enable = "avx2,fma")]
                fn with_fma<S: Source>($($arg: $ty),*) $body
                // SAFETY: AVX2 and FMA are available (checked by `enabled`).
                return unsafe { with_fma($($arg),*) };
            }
            $body
        }
    };
}

fma_fn! {
    /// `out[i] = scale · std_gamma(shape)` (`scale = 1` for `standard_gamma`: exact).
    fn gamma_fill<S: Source>(s: &mut S, shape: f64, scale: f64, out: &mut [f64]) {
        for o in out {
            *o = scale * std_gamma(s, shape);
        }
    }
}

fma_fn! {
    /// `out[i] = beta(a, b)`.
    fn beta_fill<S: Source>(s: &mut S, a: f64, b: f64, out: &mut [f64]) {
        for o in out {
            *o = beta(s, a, b);
        }
    }
}

fma_fn! {
    /// [`legacy_mt_loop`] with FMA where the CPU has it.
    fn legacy_mt_fill<S: Source>(s: &mut S, shapes: [MtShape; 2], beta: bool, scale: f64, out: &mut [f64]) {
        legacy_mt_loop(s, shapes, beta, scale, out)
    }
}

fma_fn! {
    /// `out[i] = poisson(lam)`, `p` set up for `lam`.
    fn poisson_fill<S: Source>(s: &mut S, p: &Poisson, out: &mut [i64]) {
        for o in out {
            *o = p.draw(s);
        }
    }
}

fma_fn! {
    /// `out[i] = poisson(lam)` by PTRS, attempts batched.
    fn ptrs_fill<S: Source>(s: &mut S, p: &Ptrs, out: &mut [i64]) {
        p.fill_batched(s, out)
    }
}

fma_fn! {
    /// `out[i] = binomial(n, p)` by tabulated inversion (`n − x` when `flip`).
    fn inversion_fill<S: Source>(s: &mut S, t: &InversionTable, n: i64, flip: bool, out: &mut [i64]) {
        for o in out {
            let x = t.draw(s);
            *o = if flip { n - x } else { x };
        }
    }
}

fma_fn! {
    /// `out[i] = binomial(n, p)` by BTPE with its explicit ratios tabulated (`n − y` when
    /// `flip`).
    fn btpe_fill<S: Source>(s: &mut S, alg: &Btpe, t: &[f64; 41], flip: bool, out: &mut [i64]) {
        alg.fill_batched(s, t, flip, out)
    }
}

fma_fn! {
    /// `out[i] = binomial(n, p)`, `b` set up for `(n, p)`.
    fn binomial_fill<S: Source>(s: &mut S, b: &Binomial, out: &mut [i64]) {
        for o in out {
            *o = b.draw(s);
        }
    }
}

fma_fn! {
    /// [`gamma_small_loop`] with FMA where the CPU has it.
    fn gamma_small_fill<S: Source>(s: &mut S, shape: f64, scale: f64, out: &mut [f64]) {
        gamma_small_loop(s, shape, scale, out)
    }
}

fma_fn! {
    /// [`johnk_loop`] with FMA where the CPU has it.
    fn johnk_fill<S: Source>(s: &mut S, a: f64, b: f64, out: &mut [f64]) {
        johnk_loop(s, a, b, out)
    }
}

/// Uniforms buffered by [`mult_batched`].
#[cfg(target_arch = "x86_64")]
const MULT_BUF: usize = 512;

/// Multiplication-method Poisson values from a buffer of uniforms. The product chain of a
/// value starting at every buffered position (`1·u_p·u_{p+1}·…` until it drops to `limit`,
/// left to right as the one-at-a-time loop multiplies) is computed for sixteen positions side
/// by side (thirty-two on AVX-512): one chain is a latency chain, the positions are
/// independent. The values are then
/// read off in order, each starting after the last uniform the previous one used. Products
/// never grow (uniforms are below 1, rounding is monotone), so a value is the number of steps
/// still above `limit`. No more uniforms are buffered than values still wanted (each takes
/// at least one), so the generator ends where drawing one at a time leaves it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn mult_batched<S: Source>(s: &mut S, limit: f64, out: &mut [i64]) {
    const L: usize = 32;
    let wide = crate::isa::Isa::Avx512.enabled();
    // Zero padding ends every chain by `len`: a chain that reaches it is incomplete.
    let mut buf = [0.0f64; MULT_BUF + L];
    let mut k = [0i64; MULT_BUF + L];
    let (mut pos, mut len, mut done) = (0usize, 0usize, 0usize);
    while done < out.len() {
        // Keep the unused uniforms; top up to at most the values still wanted.
        buf.copy_within(pos..len, 0);
        len -= pos;
        pos = 0;
        let add = (MULT_BUF - len).min((out.len() - done).saturating_sub(len));
        if add == 0 {
            // The value at `pos` runs past every uniform that may be buffered: finish it
            // one uniform at a time (all buffered products are above `limit`).
            let mut prod = 1.0;
            for &u in &buf[..len] {
                prod *= u;
            }
            let mut kk = len as i64;
            loop {
                prod *= s.uniform();
                if prod > limit {
                    kk += 1;
                } else {
                    break;
                }
            }
            out[done] = kk;
            done += 1;
            len = 0;
            continue;
        }
        s.uniforms(&mut buf[len..len + add]);
        len += add;
        buf[len..len + L].fill(0.0);
        if wide {
            // SAFETY: AVX-512F is available (checked by `enabled`).
            unsafe { mult_chains512(&buf[..len + L], len, limit, &mut k) };
        } else {
            mult_chains(&buf[..len + L], len, limit, &mut k);
        }
        while done < out.len() {
            let end = pos + k[pos] as usize;
            if end >= len {
                break;
            }
            out[done] = k[pos];
            done += 1;
            pos = end + 1;
        }
    }
}

/// `k[p]` for `p < len` (rounded up to 16): the steps of the chain from `p` still above `limit`
/// (`buf` has at least 16 zeros after `len`, which end every chain), sixteen chains side by
/// side.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn mult_chains(buf: &[f64], len: usize, limit: f64, k: &mut [i64]) {
    use std::arch::x86_64::*;
    assert!(buf.len() >= len + 16 && k.len() >= len.next_multiple_of(16));
    let lim = _mm256_set1_pd(limit);
    for p0 in (0..len).step_by(16) {
        let mut pr = [_mm256_set1_pd(1.0); 4];
        let mut kk = [_mm256_setzero_si256(); 4];
        let mut t = p0;
        loop {
            let mut any = _mm256_setzero_pd();
            for g in 0..4 {
                // SAFETY: t ≤ len, so t + 4g + 3 < len + 16 ≤ buf.len().
                let x = unsafe { _mm256_loadu_pd(buf.as_ptr().add(t + 4 * g)) };
                pr[g] = _mm256_mul_pd(pr[g], x);
                let above = _mm256_cmp_pd::<_CMP_GT_OQ>(pr[g], lim);
                // The mask is −1 where above.
                kk[g] = _mm256_sub_epi64(kk[g], _mm256_castpd_si256(above));
                any = _mm256_or_pd(any, above);
            }
            // By `t = len` every lane has met a zero (the bound keeps the loads in `buf`
            // whatever `limit` is).
            if _mm256_movemask_pd(any) == 0 || t == len {
                break;
            }
            t += 1;
        }
        for (g, v) in kk.iter().enumerate() {
            // SAFETY: p0 + 16 ≤ k.len() (asserted).
            unsafe { _mm256_storeu_si256(k.as_mut_ptr().add(p0 + 4 * g).cast(), *v) };
        }
    }
}

/// [`mult_chains`] on AVX-512: thirty-two chains side by side in four vectors of eight (a
/// product's latency is then hidden behind the other vectors'); the same products, so the
/// same `k`. Needs 32 zeros after `len` in `buf`, and `k` as long as `len` rounded up to 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn mult_chains512(buf: &[f64], len: usize, limit: f64, k: &mut [i64]) {
    use std::arch::x86_64::*;
    assert!(buf.len() >= len + 32 && k.len() >= len.next_multiple_of(32));
    let lim = _mm512_set1_pd(limit);
    let one = _mm512_set1_epi64(1);
    for p0 in (0..len).step_by(32) {
        let mut pr = [_mm512_set1_pd(1.0); 4];
        let mut kk = [_mm512_setzero_si512(); 4];
        let mut t = p0;
        loop {
            let mut any: __mmask8 = 0;
            for g in 0..4 {
                // SAFETY: t ≤ len, so t + 8g + 7 < len + 32 ≤ buf.len().
                let x = unsafe { _mm512_loadu_pd(buf.as_ptr().add(t + 8 * g)) };
                pr[g] = _mm512_mul_pd(pr[g], x);
                let above = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(pr[g], lim);
                kk[g] = _mm512_mask_add_epi64(kk[g], above, kk[g], one);
                any |= above;
            }
            // By `t = len` every lane has met a zero.
            if any == 0 || t == len {
                break;
            }
            t += 1;
        }
        for (g, v) in kk.iter().enumerate() {
            // SAFETY: p0 + 32 ≤ k.len() (asserted).
            unsafe { _mm512_storeu_si512(k.as_mut_ptr().add(p0 + 8 * g).cast(), *v) };
        }
    }
}

/// Attempts per batch of the batched rejection samplers: their transcendental functions run
/// over a whole batch, eight lanes at a time.
const BATCH: usize = 128;

// ------------------------------------------------------------------------------- samplers

/// `random_standard_gamma` / `legacy_standard_gamma` (same code, different sources):
/// Ahrens–Dieter style rejection for `shape < 1`, Marsaglia–Tsang for `shape > 1`.
#[inline(always)]
pub(crate) fn std_gamma<S: Source>(s: &mut S, shape: f64) -> f64 {
    if shape == 1.0 {
        return s.exp1();
    }
    if shape == 0.0 {
        return 0.0;
    }
    if shape < 1.0 {
        let inv = 1.0 / shape;
        loop {
            let u = s.uniform();
            let v = s.exp1();
            let y = if u <= 1.0 - shape {
                0.0
            } else {
                -log((1.0 - u) / shape)
            };
            let x = pow(small_base(shape, u, y), inv);
            if small_accepts(v, y, x) {
                return x;
            }
        }
    }
    let b = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * b).sqrt();
    loop {
        let (x, mut v) = loop {
            let x = s.gauss();
            let v = 1.0 + c * x;
            if v > 0.0 {
                break (x, v);
            }
        };
        v = v * v * v;
        let u = s.uniform();
        if u < 1.0 - 0.0331 * (x * x) * (x * x) {
            return b * v;
        }
        if log(u) < 0.5 * x * x + b * (1.0 - v + log(v)) {
            return b * v;
        }
    }
}

/// Marsaglia–Tsang's constants for one `shape > 1`: `b = shape − 1/3`, `c = 1/sqrt(9b)`.
#[derive(Clone, Copy)]
struct MtShape {
    b: f64,
    c: f64,
}

impl MtShape {
    fn new(shape: f64) -> Self {
        let b = shape - 1.0 / 3.0;
        Self {
            b,
            c: 1.0 / (9.0 * b).sqrt(),
        }
    }
}

/// Where the Gaussian of one attempt of [`legacy_mt_loop`] comes from.
#[derive(Clone, Copy)]
enum Gauss {
    /// Known exactly.
    Known(f64),
    /// `f·x2` of the batch's polar pair `j` (its `f` not yet computed).
    Second(usize),
    /// `f·x1` of pair `j`: the cached half.
    First(usize),
}

/// Complete uniforms a [`Window`] holds at most: a whole MT19937 block's words.
const WIN: usize = crate::engines::mt19937::N / 2;

/// 64-bit words of [`Window::acc`].
const WIN_BITS: usize = WIN.div_ceil(64);

/// Uniforms read ahead from a block source's buffered words (two words each, as `uniform`
/// makes them), with the polar pair at each position worked out at once: `x = 2U − 1`,
/// `r2[p] = x[p]² + x[p+1]²` and whether it falls in the unit disc (bit `p` of `acc`), so
/// that the polar loop of [`legacy_mt_loop`] is a search for the next set bit of the same
/// parity.
struct Window {
    u: [f64; WIN],
    x: [f64; WIN],
    r2: [f64; 64 * WIN_BITS],
    acc: [u64; WIN_BITS],
    /// Uniforms held, the next one not drawn, and how many of them are marked drawn.
    n: usize,
    pos: usize,
    synced: usize,
}

impl Window {
    fn new() -> Self {
        Self {
            u: [0.0; WIN],
            x: [0.0; WIN],
            r2: [0.0; 64 * WIN_BITS],
            acc: [0; WIN_BITS],
            n: 0,
            pos: 0,
            synced: 0,
        }
    }

    /// Reads at most `cap` uniforms ahead (fewer where a call wants only a few values).
    #[inline(always)]
    fn load<S: Source>(&mut self, s: &mut S, cap: usize) {
        let w = s.words();
        let n = (w.len() / 2).min(cap).min(WIN);
        for (u, p) in self.u[..n].iter_mut().zip(w.chunks_exact(2)) {
            let (a, b) = (p[0] >> 5, p[1] >> 6);
            *u = (a as f64 * 67_108_864.0 + b as f64) * (1.0 / 9_007_199_254_740_992.0);
        }
        for (x, &u) in self.x[..n].iter_mut().zip(&self.u[..n]) {
            *x = 2.0 * u - 1.0;
        }
        let pairs = n.saturating_sub(1);
        for p in 0..pairs {
            self.r2[p] = self.x[p] * self.x[p] + self.x[p + 1] * self.x[p + 1];
        }
        // Positions without a whole pair are never accepted.
        self.r2[pairs..].fill(1.0);
        for (bits, r2) in self.acc.iter_mut().zip(self.r2.chunks_exact(64)) {
            let mut b = 0u64;
            for (j, &r) in r2.iter().enumerate() {
                b |= ((r < 1.0 && r != 0.0) as u64) << j;
            }
            *bits = b;
        }
        (self.n, self.pos, self.synced) = (n, 0, 0);
    }

    /// The next accepted polar pair `(x1, x2, r2)`, the rejected ones before it drawn; `None`
    /// (nothing drawn) when the window holds none.
    #[inline(always)]
    fn next_pair(&mut self) -> Option<(f64, f64, f64)> {
        // The positions of `pos`'s parity (64 is even: the same in every word).
        let parity = 0x5555_5555_5555_5555u64 << (self.pos & 1);
        let mut i = self.pos / 64;
        let mut m = *self.acc.get(i)? & parity & (!0u64 << (self.pos % 64));
        while m == 0 {
            i += 1;
            m = *self.acc.get(i)? & parity;
        }
        let q = 64 * i + m.trailing_zeros() as usize;
        self.pos = q + 2;
        Some((self.x[q], self.x[q + 1], self.r2[q]))
    }

    /// The next uniform, if the window (not `stale`) holds one.
    #[inline(always)]
    fn next_uniform(&mut self, stale: bool) -> Option<f64> {
        if stale || self.pos >= self.n {
            return None;
        }
        self.pos += 1;
        Some(self.u[self.pos - 1])
    }

    /// Marks the uniforms drawn from the window drawn in the source.
    #[inline(always)]
    fn sync<S: Source>(&mut self, s: &mut S) {
        s.consume(2 * (self.pos - self.synced));
        self.synced = self.pos;
    }
}

/// `RandomState`'s `std_gamma(shape > 1)` (`scale·g` into `out`), or its `beta(a, b)` for
/// `a, b > 1` (`beta`: `g_a/(g_a + g_b)`, attempts alternating between `shapes[0]` and
/// `shapes[1]` as values are accepted), attempts in batches.
///
/// An attempt draws a polar Gaussian (a cached one, or pairs of uniforms until one falls in
/// the unit disc) and then one uniform, unless `v = 1 + c·x ≤ 0`. Which words an attempt
/// draws therefore depends only on the pairs' radii `r2` and on `v > 0`, and `v > 0` is
/// certain whenever `r2 > t = 4·exp(−4.5·b)` (then `x² ≤ −2·log r2 < 9b − 2.7 < 1/c²`, with
/// room for every rounding). So a batch first draws its attempts' words, computing `log(r2)`
/// at once only for the rare pairs at or below `t`; then the other pairs' logs run eight
/// lanes at a time and their square roots and quotients side by side (IEEE operations: the
/// same bits); then the attempts are judged in order. A batch has no more attempts than
/// gamma values still wanted (each attempt gives at most one), so it draws exactly the words
/// one-at-a-time drawing does, and the pending half of the last pair is cached as there. For
/// `beta` an attempt's shape is only known once the earlier ones are judged: one whose `v > 0`
/// differs between the two shapes (rare: only below `t`) ends the batch and starts the next.
/// The words come from a [`Window`] read ahead over the source's current block (marked drawn
/// only as far as used); past its end an attempt draws one word at a time.
#[inline(always)]
fn legacy_mt_loop<S: Source>(
    s: &mut S,
    shapes: [MtShape; 2],
    beta: bool,
    scale: f64,
    out: &mut [f64],
) {
    use crate::compat::glibc_math::{log_all, log_generic};
    // Per pair: x1, x2, r2, then log(r2) and f.
    let (mut x1, mut x2, mut r2, mut lr, mut f) = (
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
    );
    // Per attempt: where its Gaussian comes from, its uniform (NaN when it draws none), x.
    let mut src = [Gauss::Known(0.0); BATCH];
    let (mut u, mut x) = ([0.0; BATCH], [0.0; BATCH]);
    let t = 4.0 * exp(-4.5 * shapes[0].b.min(shapes[1].b));
    let v_pos = |k: usize, x: f64| 1.0 + shapes[k].c * x > 0.0;
    let exact_f = |r2: f64| (-2.0 * log_generic(r2) / r2).sqrt();
    // The cached Gaussian between batches; the Gaussian already drawn for the next attempt
    // (a batch ended on it); the shape of the next attempt; `g_a` while `beta` waits for `g_b`.
    let mut cache = s.take_gauss();
    let mut carry: Option<f64> = None;
    // Uniforms read ahead from the source's buffered words; `stale` until first loaded and
    // after drawing past them.
    let mut win = Window::new();
    let mut stale = true;
    let (mut k, mut ga) = (0usize, 0.0);
    let mut done = 0;
    while done < out.len() {
        let wanted = if beta {
            2 * (out.len() - done) - k
        } else {
            out.len() - done
        };
        let m_max = wanted.min(BATCH);
        // Phase 1: the words, in order.
        let (mut m, mut np) = (0, 0);
        let mut pend: Option<Gauss> = cache.map(Gauss::Known);
        while m < m_max {
            let g = if let Some(g) = carry.take() {
                Gauss::Known(g)
            } else if let Some(g) = pend.take() {
                g
            } else {
                if stale {
                    win.load(s, 3 * (wanted - m) + 8);
                    stale = false;
                }
                let (a, b, rr) = match win.next_pair() {
                    Some(p) => p,
                    None => {
                        // No pair left in the window is accepted: draw on one word at a time.
                        win.sync(s);
                        stale = true;
                        loop {
                            let a = 2.0 * s.uniform() - 1.0;
                            let b = 2.0 * s.uniform() - 1.0;
                            let rr = a * a + b * b;
                            if rr < 1.0 && rr != 0.0 {
                                break (a, b, rr);
                            }
                        }
                    }
                };
                (x1[np], x2[np], r2[np]) = (a, b, rr);
                np += 1;
                if rr > t {
                    pend = Some(Gauss::First(np - 1));
                    Gauss::Second(np - 1)
                } else {
                    let ff = exact_f(rr);
                    pend = Some(Gauss::Known(ff * a));
                    Gauss::Known(ff * b)
                }
            };
            let draws_u = match g {
                Gauss::Known(xx) => {
                    // The first attempt's shape is known; a later one's only if both agree.
                    let (p0, p1) = (v_pos(k, xx), v_pos(1 - k, xx));
                    if m > 0 && beta && p0 != p1 {
                        carry = Some(xx);
                        break;
                    }
                    p0
                }
                _ => true,
            };
            src[m] = g;
            u[m] = if !draws_u {
                f64::NAN
            } else if let Some(v) = win.next_uniform(stale) {
                v
            } else {
                win.sync(s);
                stale = true;
                s.uniform()
            };
            m += 1;
        }
        win.sync(s);
        // Phase 2: the pairs' f, then every attempt's x.
        log_all(&r2[..np], &mut lr[..np]);
        for j in 0..np {
            f[j] = (-2.0 * lr[j] / r2[j]).sqrt();
        }
        let value = |g: Gauss| match g {
            Gauss::Known(g) => g,
            Gauss::Second(j) => f[j] * x2[j],
            Gauss::First(j) => f[j] * x1[j],
        };
        for i in 0..m {
            x[i] = value(src[i]);
        }
        cache = pend.map(value);
        // Phase 3: judge the attempts in order.
        for i in 0..m {
            let (xx, sh) = (x[i], shapes[k]);
            let mut v = 1.0 + sh.c * xx;
            assert_eq!(v > 0.0, !u[i].is_nan(), "legacy gamma: speculated draws");
            if v <= 0.0 {
                continue;
            }
            v = v * v * v;
            let ui = u[i];
            let ok = ui < 1.0 - 0.0331 * (xx * xx) * (xx * xx)
                || log_generic(ui) < 0.5 * xx * xx + sh.b * (1.0 - v + log_generic(v));
            if !ok {
                continue;
            }
            let g = sh.b * v;
            if !beta {
                out[done] = scale * g;
                done += 1;
            } else if k == 0 {
                (ga, k) = (g, 1);
            } else {
                out[done] = ga / (ga + g);
                done += 1;
                k = 0;
            }
        }
    }
    debug_assert!(carry.is_none() && k == 0);
    if let Some(g) = cache {
        s.put_gauss(g);
    }
}

/// The base of `pow(base, 1/shape)` in one attempt of `std_gamma` for `shape < 1`: `u`, or
/// `1 − shape + shape·y` with `y = −log((1 − u)/shape)` when `u > 1 − shape`.
#[inline(always)]
fn small_base(shape: f64, u: f64, y: f64) -> f64 {
    if u <= 1.0 - shape {
        u
    } else {
        1.0 - shape + shape * y
    }
}

/// Whether that attempt (`v` its exponential, `x` the power) is accepted: NumPy's `x <= v`
/// when `u <= 1 − shape`, else `x <= v + y`; one test without a branch (a coin flip the CPU
/// cannot predict), since `y = 0` in the first case and `v + 0 = v` (`v ≥ 0`; `−0 + 0 = +0`
/// compares the same).
#[inline(always)]
fn small_accepts(v: f64, y: f64, x: f64) -> bool {
    x <= v + y
}

/// `scale · std_gamma(shape)` for `0 < shape < 1` into `out`, attempts in batches: each
/// attempt draws `(U, E)` whatever earlier attempts gave, so a batch of at most as many
/// attempts as values still wanted draws exactly the words one-at-a-time drawing does; its
/// logs and powers then run eight lanes at a time.
#[inline(always)]
fn gamma_small_loop<S: Source>(s: &mut S, shape: f64, scale: f64, out: &mut [f64]) {
    use crate::compat::glibc_math::{log_all, pow_all};
    let inv = 1.0 / shape;
    let (mut u, mut v, mut w, mut y, mut base, mut x) = (
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
        [0.0; BATCH],
    );
    let mut done = 0;
    while done < out.len() {
        let m = (out.len() - done).min(BATCH);
        for i in 0..m {
            u[i] = s.uniform();
            // Legacy: `−log(1 − U)`, its log below with the others.
            v[i] = if S::LEGACY {
                1.0 - s.uniform()
            } else {
                s.exp1()
            };
            w[i] = if u[i] <= 1.0 - shape {
                1.0
            } else {
                (1.0 - u[i]) / shape
            };
        }
        if S::LEGACY {
            log_all(&v[..m], &mut x[..m]);
            for i in 0..m {
                v[i] = -x[i];
            }
        }
        log_all(&w[..m], &mut y[..m]);
        for i in 0..m {
            y[i] = if u[i] <= 1.0 - shape { 0.0 } else { -y[i] };
            base[i] = small_base(shape, u[i], y[i]);
        }
        pow_all(&base[..m], inv, &mut x[..m]);
        // Branch-free compaction (acceptance is a coin flip the CPU cannot predict): every
        // attempt writes its value at `done`, and only an accepted one moves `done` on, so a
        // rejected value is overwritten later (`done < len` holds until the last value).
        for i in 0..m {
            let ok = small_accepts(v[i], y[i], x[i]);
            if let Some(o) = out.get_mut(done) {
                *o = scale * x[i];
            }
            done += ok as usize;
        }
    }
}

/// Jöhnk's acceptance for `beta(a, b)` with `a, b <= 1` (one attempt: uniforms `u`, `v`,
/// `x = u^(1/a)`, `y = v^(1/b)`): the value, or `None` to try again. The legacy flavour is
/// NumPy 1.16's; `Generator` also rejects `u = v = 0`.
#[inline(always)]
fn johnk_accepts(legacy: bool, a: f64, b: f64, u: f64, v: f64, x: f64, y: f64) -> Option<f64> {
    if legacy {
        if x + y <= 1.0 {
            if x + y > 0.0 {
                return Some(x / (x + y));
            }
            let mut log_x = log(u) / a;
            let mut log_y = log(v) / b;
            let log_m = if log_x > log_y { log_x } else { log_y };
            log_x -= log_m;
            log_y -= log_m;
            return Some(exp(log_x - log(exp(log_x) + exp(log_y))));
        }
        return None;
    }
    let xpy = x + y;
    if xpy <= 1.0 && u + v > 0.0 {
        if x > 0.0 && y > 0.0 {
            return Some(x / xpy);
        }
        // An underflow of x or y: finish in logarithms.
        let log_x = log(u) / a;
        let log_y = log(v) / b;
        let delta = log_x - log_y;
        return Some(if delta > 0.0 {
            exp(-log1p(exp(-delta)))
        } else {
            exp(delta - log1p(exp(delta)))
        });
    }
    None
}

/// `beta(a, b)` for `a, b <= 1` (not `Generator`'s tiny-parameter case) into `out`, Jöhnk's
/// attempts in batches (two uniforms each, whatever earlier attempts gave), the powers eight
/// lanes at a time.
#[inline(always)]
fn johnk_loop<S: Source>(s: &mut S, a: f64, b: f64, out: &mut [f64]) {
    use crate::compat::glibc_math::pow_all;
    let (mut u, mut v, mut x, mut y) = ([0.0; BATCH], [0.0; BATCH], [0.0; BATCH], [0.0; BATCH]);
    let mut done = 0;
    while done < out.len() {
        let m = (out.len() - done).min(BATCH);
        for i in 0..m {
            u[i] = s.uniform();
            v[i] = s.uniform();
        }
        pow_all(&u[..m], 1.0 / a, &mut x[..m]);
        pow_all(&v[..m], 1.0 / b, &mut y[..m]);
        for i in 0..m {
            if let Some(r) = johnk_accepts(S::LEGACY, a, b, u[i], v[i], x[i], y[i]) {
                out[done] = r;
                done += 1;
            }
        }
    }
}

/// Whether `beta(a, b)` takes the batched Jöhnk path.
fn johnk_batched(legacy: bool, a: f64, b: f64) -> bool {
    const TINY: f64 = 3e-103;
    a <= 1.0 && b <= 1.0 && (legacy || !(a < TINY && b < TINY))
}

/// `random_loggam`: log Γ(x) by the SPECFUN series (Zhang & Jin), as NumPy computes it.
#[inline(always)]
pub(crate) fn loggam(x: f64) -> f64 {
    const A: [f64; 10] = [
        8.333333333333333e-02,
        -2.777777777777778e-03,
        7.936507936507937e-04,
        -5.952380952380952e-04,
        8.417508417508418e-04,
        -1.917526917526918e-03,
        6.410256410256410e-03,
        -2.955065359477124e-02,
        1.796443723688307e-01,
        -1.39243221690590e+00,
    ];
    if x == 1.0 || x == 2.0 {
        return 0.0;
    }
    let n: i64 = if x < 7.0 { to_i64(7.0 - x) } else { 0 };
    let mut x0 = x + n as f64;
    let x2 = (1.0 / x0) * (1.0 / x0);
    let lg2pi = 1.8378770664093453e+00;
    let mut gl0 = A[9];
    for k in (0..9).rev() {
        gl0 *= x2;
        gl0 += A[k];
    }
    let mut gl = gl0 / x0 + 0.5 * lg2pi + (x0 - 0.5) * log(x0) - x0;
    if x < 7.0 {
        for _ in 1..=n {
            gl -= log(x0 - 1.0);
            x0 -= 1.0;
        }
    }
    gl
}

/// `logfactorial(k)`: a table below 126, else Stirling's series to the `1/k³` term.
fn logfactorial(k: i64) -> f64 {
    if (k as u64) < LOGFACT.len() as u64 {
        return LOGFACT[k as usize];
    }
    let halfln2pi = 0.9189385332046728;
    let kf = k as f64;
    (kf + 0.5) * log(kf) - kf + (halfln2pi + (1.0 / kf) * (1.0 / 12.0 - 1.0 / (360.0 * kf * kf)))
}

/// `log(k!)` for `k = 0..=125`, NumPy's table (`logfactorial.c`).
#[allow(clippy::excessive_precision, clippy::approx_constant)]
const LOGFACT: [f64; 126] = [
    0.0,
    0.0,
    0.69314718055994529,
    1.791759469228055,
    3.1780538303479458,
    4.7874917427820458,
    6.5792512120101012,
    8.5251613610654147,
    10.604602902745251,
    12.801827480081469,
    15.104412573075516,
    17.502307845873887,
    19.987214495661885,
    22.552163853123425,
    25.19122118273868,
    27.89927138384089,
    30.671860106080672,
    33.505073450136891,
    36.395445208033053,
    39.339884187199495,
    42.335616460753485,
    45.380138898476908,
    48.471181351835227,
    51.606675567764377,
    54.784729398112319,
    58.003605222980518,
    61.261701761002001,
    64.557538627006338,
    67.88974313718154,
    71.257038967168015,
    74.658236348830158,
    78.092223553315307,
    81.557959456115043,
    85.054467017581516,
    88.580827542197682,
    92.136175603687093,
    95.719694542143202,
    99.330612454787428,
    102.96819861451381,
    106.63176026064346,
    110.32063971475739,
    114.03421178146171,
    117.77188139974507,
    121.53308151543864,
    125.3172711493569,
    129.12393363912722,
    132.95257503561632,
    136.80272263732635,
    140.67392364823425,
    144.5657439463449,
    148.47776695177302,
    152.40959258449735,
    156.3608363030788,
    160.3311282166309,
    164.32011226319517,
    168.32744544842765,
    172.35279713916279,
    176.39584840699735,
    180.45629141754378,
    184.53382886144948,
    188.6281734236716,
    192.7390472878449,
    196.86618167289001,
    201.00931639928152,
    205.1681994826412,
    209.34258675253685,
    213.53224149456327,
    217.73693411395422,
    221.95644181913033,
    226.1905483237276,
    230.43904356577696,
    234.70172344281826,
    238.97838956183432,
    243.26884900298271,
    247.57291409618688,
    251.89040220972319,
    256.22113555000954,
    260.56494097186322,
    264.92164979855278,
    269.29109765101981,
    273.67312428569369,
    278.06757344036612,
    282.4742926876304,
    286.89313329542699,
    291.32395009427029,
    295.76660135076065,
    300.22094864701415,
    304.68685676566872,
    309.1641935801469,
    313.65282994987905,
    318.1526396202093,
    322.66349912672615,
    327.1852877037752,
    331.71788719692847,
    336.26118197919845,
    340.81505887079902,
    345.37940706226686,
    349.95411804077025,
    354.53908551944079,
    359.1342053695754,
    363.73937555556347,
    368.35449607240474,
    372.97946888568902,
    377.61419787391867,
    382.25858877306001,
    386.91254912321756,
    391.57598821732961,
    396.24881705179155,
    400.93094827891576,
    405.6222961611449,
    410.32277652693733,
    415.03230672824964,
    419.75080559954472,
    424.47819341825709,
    429.21439186665157,
    433.95932399501481,
    438.71291418612117,
    443.47508812091894,
    448.24577274538461,
    453.02489623849613,
    457.81238798127816,
    462.60817852687489,
    467.4121995716082,
    472.22438392698058,
    477.04466549258564,
    481.87297922988796,
];

/// `random_poisson`: multiplication of uniforms below `lam = 10`, Hörmann's PTRS above.
pub(crate) fn poisson<S: Source>(s: &mut S, lam: f64) -> i64 {
    Poisson::new(lam).draw(s)
}

/// `random_poisson` for one `lam`, its constants computed once (NumPy computes them per
/// draw; the values are the same).
#[derive(Clone, Copy)]
enum Poisson {
    Zero,
    /// Multiplication of uniforms until the product drops to `exp(−lam)`.
    Mult {
        limit: f64,
    },
    Ptrs(Ptrs),
}

/// Hörmann's PTRS constants for one `lam`.
#[derive(Clone, Copy)]
struct Ptrs {
    lam: f64,
    loglam: f64,
    b: f64,
    a: f64,
    log_invalpha: f64,
    vr: f64,
}

impl Poisson {
    fn new(lam: f64) -> Self {
        if lam >= 10.0 {
            let slam = lam.sqrt();
            let b = 0.931 + 2.53 * slam;
            Self::Ptrs(Ptrs {
                lam,
                loglam: log(lam),
                b,
                a: -0.059 + 0.02483 * b,
                log_invalpha: log(1.1239 + 1.1328 / (b - 3.4)),
                vr: 0.9277 - 3.6224 / (b - 2.0),
            })
        } else if lam == 0.0 {
            Self::Zero
        } else {
            Self::Mult { limit: exp(-lam) }
        }
    }

    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        match *self {
            Self::Zero => 0,
            Self::Mult { limit } => {
                let mut k = 0;
                let mut prod = 1.0;
                loop {
                    prod *= s.uniform();
                    if prod > limit {
                        k += 1;
                    } else {
                        return k;
                    }
                }
            }
            Self::Ptrs(p) => p.draw(s),
        }
    }
}

impl Ptrs {
    /// One attempt's `(us, k)` from its first uniform.
    #[inline(always)]
    fn attempt(&self, u: f64) -> (f64, i64) {
        let u = u - 0.5;
        let us = 0.5 - u.abs();
        (
            us,
            to_i64(((2.0 * self.a / us + self.b) * u + self.lam + 0.43).floor()),
        )
    }

    /// Accept at once (`Some(true)`), reject at once (`Some(false)`), or decide by logs.
    #[inline(always)]
    fn quick(&self, us: f64, v: f64, k: i64) -> Option<bool> {
        if us >= 0.07 && v <= self.vr {
            return Some(true);
        }
        if k < 0 || (us < 0.013 && v > us) {
            return Some(false);
        }
        None
    }

    /// The logarithmic test, `log_v = log(v)`, `log_w = log(a/us² + b)`, `lg = loggam(k + 1)`.
    #[inline(always)]
    fn by_logs(&self, log_v: f64, log_w: f64, k: i64, lg: f64) -> bool {
        log_v + self.log_invalpha - log_w <= -self.lam + k as f64 * self.loglam - lg
    }

    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        loop {
            let u = s.uniform();
            let v = s.uniform();
            let (us, k) = self.attempt(u);
            match self.quick(us, v, k) {
                Some(true) => return k,
                Some(false) => continue,
                None => {
                    let lg = loggam(k as f64 + 1.0);
                    if self.by_logs(log(v), log(self.a / (us * us) + self.b), k, lg) {
                        return k;
                    }
                }
            }
        }
    }

    /// `out.len()` draws, attempts in batches (two uniforms each, whatever earlier attempts
    /// gave; at most as many as values still wanted), their logs eight lanes at a time.
    #[inline(always)]
    fn fill_batched<S: Source>(&self, s: &mut S, out: &mut [i64]) {
        use crate::compat::glibc_math::log_all;
        let (mut v, mut w, mut us, mut lv, mut lw) = (
            [0.0; BATCH],
            [0.0; BATCH],
            [0.0; BATCH],
            [0.0; BATCH],
            [0.0; BATCH],
        );
        let mut k = [0i64; BATCH];
        // loggam(k + 1) for the k that reach the logarithmic test, computed once each (a pure
        // function of k, so the same values); k beyond the table is computed every time.
        let cap = (self.lam + 10.0 * self.lam.sqrt() + 64.0).min(65536.0) as usize;
        let mut lgs = vec![f64::NAN; cap];
        let mut done = 0;
        while done < out.len() {
            let m = (out.len() - done).min(BATCH);
            for i in 0..m {
                let u = s.uniform();
                v[i] = s.uniform();
                (us[i], k[i]) = self.attempt(u);
                w[i] = self.a / (us[i] * us[i]) + self.b;
            }
            log_all(&v[..m], &mut lv[..m]);
            log_all(&w[..m], &mut lw[..m]);
            for i in 0..m {
                let ok = match self.quick(us[i], v[i], k[i]) {
                    Some(q) => q,
                    None => {
                        let kk = k[i];
                        let lg = match lgs.get_mut(kk as usize) {
                            Some(slot) => {
                                if slot.is_nan() {
                                    *slot = loggam(kk as f64 + 1.0);
                                }
                                *slot
                            }
                            None => loggam(kk as f64 + 1.0),
                        };
                        self.by_logs(lv[i], lw[i], kk, lg)
                    }
                };
                if ok {
                    out[done] = k[i];
                    done += 1;
                }
            }
        }
    }
}

/// Binomial by inversion (`n·p ≤ 30`): the constants NumPy keeps in its `binomial_t` between
/// draws with the same `(n, p)`. The legacy flavour computes `q^n` as `exp(n·log(q))`,
/// `Generator` as `exp(n·log1p(−p))`.
#[derive(Clone, Copy)]
struct Inversion {
    n: i64,
    p: f64,
    q: f64,
    qn: f64,
    bound: i64,
}

impl Inversion {
    fn new(legacy: bool, n: i64, p: f64) -> Self {
        let q = 1.0 - p;
        let qn = if legacy {
            exp(n as f64 * log(q))
        } else {
            exp(n as f64 * log1p(-p))
        };
        let np = n as f64 * p;
        let bound = to_i64((n as f64).min(np + 10.0 * (np * q + 1.0).sqrt()));
        Self { n, p, q, qn, bound }
    }

    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        let Self { n, p, q, qn, bound } = *self;
        let mut x: i64 = 0;
        let mut px = qn;
        let mut u = s.uniform();
        while u > px {
            x += 1;
            if x > bound {
                x = 0;
                px = qn;
                u = s.uniform();
            } else {
                u -= px;
                px = ((n - x + 1) as f64 * p * px) / (x as f64 * q);
            }
        }
        x
    }
}

/// [`Inversion`] with its `px` sequence tabulated: `px` after `x` steps depends only on
/// `(n, p)`, so reading it from a table computed by the same operations gives the same
/// values without a division per step.
struct InversionTable {
    qn: f64,
    bound: i64,
    px: Vec<f64>,
}

impl InversionTable {
    fn new(alg: &Inversion) -> Self {
        let Inversion { n, p, q, qn, bound } = *alg;
        let mut px = Vec::with_capacity(bound as usize + 1);
        let mut v = qn;
        px.push(v);
        for x in 1..=bound {
            v = ((n - x + 1) as f64 * p * v) / (x as f64 * q);
            px.push(v);
        }
        Self { qn, bound, px }
    }

    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        let mut x: i64 = 0;
        let mut px = self.qn;
        let mut u = s.uniform();
        while u > px {
            x += 1;
            if x > self.bound {
                x = 0;
                px = self.qn;
                u = s.uniform();
            } else {
                u -= px;
                px = self.px[x as usize];
            }
        }
        x
    }
}

/// One term of BTPE's Stirling correction, with NumPy 2.4's constant 13680 (the paper has
/// 13860).
#[inline]
fn stirling_term(v: f64, v2: f64) -> f64 {
    (13680.0 - (462.0 - (132.0 - (99.0 - 140.0 / v2) / v2) / v2) / v2) / v / 166320.0
}

/// Kachitvichyanukul & Schmeiser's BTPE (`n·min(p, 1−p) > 30`), its constants computed once
/// per `(n, p)` as NumPy's `binomial_t` keeps them. NumPy 2.4 (both classes) adds all four
/// Stirling error terms, as the 1988 paper printed them; NumPy's development branch (2.5)
/// subtracts the last two in `Generator`. lockstep follows 2.4.
#[derive(Clone, Copy)]
struct Btpe {
    n: i64,
    nf: f64,
    r: f64,
    q: f64,
    m: i64,
    mf: f64,
    p1: f64,
    xm: f64,
    xl: f64,
    xr: f64,
    c: f64,
    laml: f64,
    lamr: f64,
    p2: f64,
    p3: f64,
    p4: f64,
    nrq: f64,
}

impl Btpe {
    fn new(n: i64, p: f64) -> Self {
        let nf = n as f64;
        let r = p.min(1.0 - p);
        let q = 1.0 - r;
        let fm = nf * r + r;
        let m = to_i64(fm.floor());
        let mf = m as f64;
        let p1 = (2.195 * (nf * r * q).sqrt() - 4.6 * q).floor() + 0.5;
        let xm = mf + 0.5;
        let xl = xm - p1;
        let xr = xm + p1;
        let c = 0.134 + 20.5 / (15.3 + mf);
        let a = (fm - xl) / (fm - xl * r);
        let laml = a * (1.0 + a / 2.0);
        let a = (xr - fm) / (xr * q);
        let lamr = a * (1.0 + a / 2.0);
        let p2 = p1 * (1.0 + 2.0 * c);
        let p3 = p2 + c / laml;
        let p4 = p3 + c / lamr;
        let nrq = nf * r * q;
        Self {
            n,
            nf,
            r,
            q,
            m,
            mf,
            p1,
            xm,
            xl,
            xr,
            c,
            laml,
            lamr,
            p2,
            p3,
            p4,
            nrq,
        }
    }

    /// `f(y)/f(m)` as BTPE's explicit evaluation computes it (a product or quotient chain,
    /// in NumPy's order).
    #[inline(always)]
    fn explicit_ratio(&self, y: i64) -> f64 {
        let (n, m, r, q) = (self.n, self.m, self.r, self.q);
        let s_ = r / q;
        let a = s_ * (n + 1) as f64;
        let mut f = 1.0;
        if m < y {
            for i in m + 1..=y {
                f *= a / i as f64 - s_;
            }
        } else if m > y {
            for i in y + 1..=m {
                f /= a / i as f64 - s_;
            }
        }
        f
    }

    /// [`explicit_ratio`](Self::explicit_ratio) for `y = m − 20 ..= m + 20`, the range where
    /// draws need it (a pure function of `y`: the same values, computed once per call).
    fn ratio_table(&self) -> [f64; 41] {
        std::array::from_fn(|i| self.explicit_ratio(self.m - 20 + i as i64))
    }

    /// One draw of `min(p, 1 − p)`'s binomial (the caller flips for `p > 0.5`).
    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        self.draw_with(s, None)
    }

    /// As [`draw`](Self::draw), reading the explicit ratios from `table` where it has them.
    #[inline(always)]
    fn draw_with<S: Source>(&self, s: &mut S, table: Option<&[f64; 41]>) -> i64 {
        loop {
            let u = s.uniform() * self.p4;
            let v = s.uniform();
            let log_v = if u > self.p2 { log(v) } else { 0.0 };
            match self.first(u, v, log_v, table) {
                Step::Accept(y) => return y,
                Step::Reject => continue,
                Step::Squeeze(y, w) => {
                    if self.squeeze(y, log(w)) {
                        return y;
                    }
                }
            }
        }
    }

    /// One attempt up to the squeeze, from `u` (already times `p4`), `v` and `log_v = log(v)`
    /// (read only in the tails, `u > p2`).
    #[inline(always)]
    fn first(&self, u: f64, v: f64, log_v: f64, table: Option<&[f64; 41]>) -> Step {
        let Self {
            n,
            m,
            mf,
            p1,
            xm,
            xl,
            xr,
            c,
            laml,
            lamr,
            p2,
            p3,
            nrq,
            ..
        } = *self;
        let y: i64;
        let v = if u <= p1 {
            // Triangular centre: accept at once.
            return Step::Accept(to_i64((xm - p1 * v + u).floor()));
        } else if u <= p2 {
            let x = xl + (u - p1) / c;
            let v = v * c + 1.0 - (mf - x + 0.5).abs() / p1;
            if v > 1.0 {
                return Step::Reject;
            }
            y = to_i64(x.floor());
            v
        } else if u <= p3 {
            y = to_i64((xl + log_v / laml).floor());
            if y < 0 || v == 0.0 {
                return Step::Reject;
            }
            v * (u - p2) * laml
        } else {
            y = to_i64((xr - log_v / lamr).floor());
            if y > n || v == 0.0 {
                return Step::Reject;
            }
            v * (u - p3) * lamr
        };
        let k = (y - m).abs();
        if !(k > 20 && (k as f64) < nrq / 2.0 - 1.0) {
            // Explicit evaluation of f(y)/f(m).
            let f = match table {
                Some(t) if k <= 20 => t[(y - m + 20) as usize],
                _ => self.explicit_ratio(y),
            };
            return if v > f { Step::Reject } else { Step::Accept(y) };
        }
        Step::Squeeze(y, v)
    }

    /// The squeeze of an attempt that reached it: the normal approximation, then the
    /// Stirling bound; `big_a = log(v)`.
    #[inline(always)]
    fn squeeze(&self, y: i64, big_a: f64) -> bool {
        let Self {
            n,
            nf,
            r,
            q,
            m,
            mf,
            xm,
            nrq,
            ..
        } = *self;
        let k = (y - m).abs();
        let kf = k as f64;
        let rho = (kf / nrq) * ((kf * (kf / 3.0 + 0.625) + 0.16666666666666666) / nrq + 0.5);
        let t = (-k * k) as f64 / (2.0 * nrq);
        if big_a < t - rho {
            return true;
        }
        if big_a > t + rho {
            return false;
        }
        let x1 = y as f64 + 1.0;
        let f1 = mf + 1.0;
        let z = nf + 1.0 - mf;
        let w = nf - y as f64 + 1.0;
        let (x2, f2, z2, w2) = (x1 * x1, f1 * f1, z * z, w * w);
        let bound = xm * log(f1 / x1)
            + ((n - m) as f64 + 0.5) * log(z / w)
            + (y - m) as f64 * log(w * r / (x1 * q))
            + stirling_term(f1, f2)
            + stirling_term(z, z2)
            + stirling_term(x1, x2)
            + stirling_term(w, w2);
        big_a <= bound
    }

    /// `out.len()` draws (`n − y` when `flip`), attempts in batches: each takes two uniforms
    /// whatever earlier attempts gave, and a batch has at most as many attempts as values
    /// still wanted. The tails' `log(v)` and the squeeze's `log(v)` run eight lanes at a time
    /// over the attempts that need them; the region choice and the tests before the squeeze
    /// are computed for every region and selected (the region is unpredictable), then the
    /// accepted values are kept in order.
    #[inline(always)]
    fn fill_batched<S: Source>(&self, s: &mut S, t: &[f64; 41], flip: bool, out: &mut [i64]) {
        use crate::compat::glibc_math::log_all;
        let Self {
            n,
            m,
            mf,
            p1,
            xm,
            xl,
            xr,
            c,
            laml,
            lamr,
            p2,
            p3,
            p4,
            nrq,
            ..
        } = *self;
        let far = nrq / 2.0 - 1.0;
        let (mut u, mut v) = ([0.0; BATCH], [0.0; BATCH]);
        // Compacted: the tail attempts' v and logs; the squeezed attempts' v, logs, index.
        let (mut tv, mut tl) = ([0.0; BATCH], [0.0; BATCH]);
        let (mut sv, mut sl, mut si) = ([0.0; BATCH], [0.0; BATCH], [0usize; BATCH]);
        // Per attempt: its y and 0 reject, 1 accept, 2 squeeze; then the accepted values.
        let (mut y, mut st, mut acc) = ([0i64; BATCH], [0u8; BATCH], [0i64; BATCH]);
        let mut done = 0;
        while done < out.len() {
            let b = (out.len() - done).min(BATCH);
            let mut nt = 0;
            for i in 0..b {
                u[i] = s.uniform() * p4;
                v[i] = s.uniform();
                tv[nt] = v[i];
                nt += (u[i] > p2) as usize;
            }
            // Whole lanes (the padding logs stale values, never read): no scalar remainder.
            let nt8 = nt.next_multiple_of(8);
            log_all(&tv[..nt8], &mut tl[..nt8]);
            let (mut j, mut ns) = (0, 0);
            for i in 0..b {
                let (uu, v0) = (u[i], v[i]);
                let tail = uu > p2;
                // Read only where `tail`.
                let lv = tl[j];
                j += tail as usize;
                let (r1, r2, r3) = (uu <= p1, uu <= p2, uu <= p3);
                let x = xl + (uu - p1) / c;
                let v2 = v0 * c + 1.0 - (mf - x + 0.5).abs() / p1;
                // The tails: the same operations as each side's own, operands selected.
                let (lam, pt) = if r3 { (laml, p2) } else { (lamr, p3) };
                let lq = lv / lam;
                let vt = v0 * (uu - pt) * lam;
                let yf = if r1 {
                    xm - p1 * v0 + uu
                } else if r2 {
                    x
                } else if r3 {
                    xl + lq
                } else {
                    xr - lq
                };
                // One conversion for the selected region.
                let yy = to_i64(yf.floor());
                let (vv, reject) = if r2 {
                    (v2, v2 > 1.0)
                } else if r3 {
                    (vt, yy < 0 || v0 == 0.0)
                } else {
                    (vt, yy > n || v0 == 0.0)
                };
                // Wrapping: a rejected tail's y may be i64::MIN or MAX (log(0)).
                let d = yy.wrapping_sub(m);
                let k = d.wrapping_abs();
                let f = t[(d.clamp(-20, 20) + 20) as usize];
                let mut state = if r1 {
                    1
                } else if reject {
                    0
                } else if k <= 20 {
                    u8::from(!(vv > f))
                } else if (k as f64) < far {
                    2
                } else {
                    3
                };
                if state == 3 {
                    state = u8::from(!(vv > self.explicit_ratio(yy)));
                }
                y[i] = yy;
                st[i] = state;
                sv[ns] = vv;
                si[ns] = i;
                ns += (state == 2) as usize;
            }
            let ns8 = ns.next_multiple_of(8);
            log_all(&sv[..ns8], &mut sl[..ns8]);
            for q in 0..ns {
                let i = si[q];
                st[i] = u8::from(self.squeeze(y[i], sl[q]));
            }
            let mut a = 0;
            for i in 0..b {
                acc[a] = if flip { n - y[i] } else { y[i] };
                a += st[i] as usize;
            }
            out[done..done + a].copy_from_slice(&acc[..a]);
            done += a;
        }
    }
}

/// Where one BTPE attempt stands before the squeeze.
enum Step {
    Accept(i64),
    Reject,
    /// `(y, v)`: decided by the squeeze on `log(v)`.
    Squeeze(i64, f64),
}

/// `random_binomial` / `legacy_random_binomial` for one `(n, p)`, set up once: `Generator`
/// returns 0 for `n = 0` or `p = 0` without drawing (the legacy code always draws); the
/// algorithm runs on `min(p, 1 − p)` and flips the result for `p > 0.5`.
#[derive(Clone, Copy)]
enum Binomial {
    Zero,
    Inversion { alg: Inversion, flip: bool },
    Btpe { alg: Btpe, flip: bool },
}

impl Binomial {
    fn new(legacy: bool, p: f64, n: i64) -> Self {
        if !legacy && (n == 0 || p == 0.0) {
            return Self::Zero;
        }
        let (pp, flip) = if p <= 0.5 {
            (p, false)
        } else {
            (1.0 - p, true)
        };
        if pp * n as f64 <= 30.0 {
            Self::Inversion {
                alg: Inversion::new(legacy, n, pp),
                flip,
            }
        } else {
            Self::Btpe {
                alg: Btpe::new(n, pp),
                flip,
            }
        }
    }

    #[inline(always)]
    fn draw<S: Source>(&self, s: &mut S) -> i64 {
        match self {
            Self::Zero => 0,
            Self::Inversion { alg, flip } => {
                let x = alg.draw(s);
                if *flip { alg.n - x } else { x }
            }
            Self::Btpe { alg, flip } => {
                let y = alg.draw(s);
                if *flip { alg.n - y } else { y }
            }
        }
    }
}

/// One binomial draw (for callers whose `(n, p)` changes from draw to draw).
pub(crate) fn binomial<S: Source>(s: &mut S, p: f64, n: i64) -> i64 {
    Binomial::new(S::LEGACY, p, n).draw(s)
}

fn chisquare<S: Source>(s: &mut S, df: f64) -> f64 {
    2.0 * std_gamma(s, df / 2.0)
}

#[inline(always)]
fn beta<S: Source>(s: &mut S, a: f64, b: f64) -> f64 {
    if a <= 1.0 && b <= 1.0 {
        const TINY: f64 = 3e-103;
        if !S::LEGACY && a < TINY && b < TINY {
            // Almost surely 0 or 1: one uniform decides which.
            let u = s.uniform();
            return if (a + b) * u < a { 1.0 } else { 0.0 };
        }
        // Jöhnk's algorithm (NumPy 1.16's in the legacy flavour).
        loop {
            let u = s.uniform();
            let v = s.uniform();
            let x = pow(u, 1.0 / a);
            let y = pow(v, 1.0 / b);
            if let Some(r) = johnk_accepts(S::LEGACY, a, b, u, v, x, y) {
                return r;
            }
        }
    }
    let ga = std_gamma(s, a);
    let gb = std_gamma(s, b);
    ga / (ga + gb)
}

fn noncentral_chisquare<S: Source>(s: &mut S, df: f64, nonc: f64) -> f64 {
    if !S::LEGACY && nonc.is_nan() {
        return f64::NAN;
    }
    if nonc == 0.0 {
        return chisquare(s, df);
    }
    if 1.0 < df {
        let chi2 = chisquare(s, df - 1.0);
        let n = s.gauss() + nonc.sqrt();
        chi2 + n * n
    } else {
        let i = poisson(s, nonc / 2.0);
        let out = chisquare(s, df + (2 * i) as f64);
        if nonc.is_nan() { f64::NAN } else { out }
    }
}

fn geometric<S: Source>(s: &mut S, p: f64) -> i64 {
    if p >= 0.333333333333333333333333 {
        // Search: the first k whose cumulative probability reaches U.
        let mut x = 1;
        let mut prod = p;
        let mut sum = p;
        let q = 1.0 - p;
        let u = s.uniform();
        while u > sum {
            prod *= q;
            sum += prod;
            x += 1;
        }
        return x;
    }
    if S::LEGACY {
        return to_i64((log1p(-s.uniform()) / log(1.0 - p)).ceil());
    }
    let z = (-s.exp1() / log1p(-p)).ceil();
    if z >= 9.223372036854776e+18 {
        i64::MAX
    } else {
        to_i64(z)
    }
}

fn zipf<S: Source>(s: &mut S, a: f64) -> i64 {
    if !S::LEGACY && a >= 1025.0 {
        return 1;
    }
    let am1 = a - 1.0;
    let b = pow(2.0, am1);
    let int_max = i64::MAX as f64;
    let umin = if S::LEGACY { 0.0 } else { pow(int_max, -am1) };
    loop {
        let u = if S::LEGACY {
            1.0 - s.uniform()
        } else {
            let u01 = s.uniform();
            u01 * umin + (1.0 - u01)
        };
        let v = s.uniform();
        let x = pow(u, -1.0 / am1).floor();
        if x > int_max || x < 1.0 {
            continue;
        }
        let t = pow(1.0 + 1.0 / x, am1);
        if v * x * (t - 1.0) / (b - 1.0) <= t / b {
            return to_i64(x);
        }
    }
}

fn logseries<S: Source>(s: &mut S, p: f64) -> i64 {
    let r = if S::LEGACY { log(1.0 - p) } else { log1p(-p) };
    loop {
        let v = s.uniform();
        if v >= p {
            return 1;
        }
        let u = s.uniform();
        let q = if S::LEGACY {
            1.0 - exp(r * u)
        } else {
            -expm1(r * u)
        };
        if v <= q * q {
            let result = to_i64((1.0 + log(v) / log(q)).floor());
            if result < 1 || v == 0.0 {
                continue;
            }
            return result;
        }
        return if v >= q { 1 } else { 2 };
    }
}

fn vonmises<S: Source>(s: &mut S, mu: f64, kappa: f64) -> f64 {
    if kappa.is_nan() {
        return f64::NAN;
    }
    if kappa < 1e-8 {
        return PI * (2.0 * s.uniform() - 1.0);
    }
    let sv = if kappa < 1e-5 {
        1.0 / kappa + kappa
    } else if S::LEGACY || kappa <= 1e6 {
        let r = 1.0 + (1.0 + 4.0 * kappa * kappa).sqrt();
        let rho = (r - (2.0 * r).sqrt()) / (2.0 * kappa);
        (1.0 + rho * rho) / (2.0 * rho)
    } else {
        // Generator: a wrapped normal for very large kappa.
        let mut result = mu + (1.0 / kappa).sqrt() * s.gauss();
        if result < -PI {
            result += 2.0 * PI;
        }
        if result > PI {
            result -= 2.0 * PI;
        }
        return result;
    };
    let w = loop {
        let u = s.uniform();
        let z = cos(PI * u);
        let w = (1.0 + sv * z) / (sv + z);
        let y = kappa * (sv - w);
        let v = s.uniform();
        if y * (2.0 - y) - v >= 0.0 || log(y / v) + 1.0 - y >= 0.0 {
            break w;
        }
    };
    let u = s.uniform();
    let mut result = acos(w);
    if u < 0.5 {
        result = -result;
    }
    result += mu;
    let neg = result < 0.0;
    let mut m = result.abs();
    m = fmod(m + PI, 2.0 * PI) - PI;
    if neg {
        m *= -1.0;
    }
    m
}

fn wald<S: Source>(s: &mut S, mean: f64, scale: f64) -> f64 {
    let x = if S::LEGACY {
        let mu_2l = mean / (2.0 * scale);
        let y = s.gauss();
        let y = mean * y * y;
        mean + mu_2l * (y - (4.0 * scale * y + y * y).sqrt())
    } else {
        let y = s.gauss();
        let y = mean * y * y;
        let d = 1.0 + (1.0 + 4.0 * scale / y).sqrt();
        mean * (1.0 - 2.0 / d)
    };
    let u = s.uniform();
    if u <= mean / (mean + x) {
        x
    } else {
        mean * mean / x
    }
}

fn laplace<S: Source>(s: &mut S, loc: f64, scale: f64) -> f64 {
    loop {
        let u = s.uniform();
        if u >= 0.5 {
            return loc - scale * log(2.0 - u - u);
        } else if u > 0.0 {
            return loc + scale * log(u + u);
        }
    }
}

fn gumbel<S: Source>(s: &mut S, loc: f64, scale: f64) -> f64 {
    loop {
        let u = 1.0 - s.uniform();
        if u < 1.0 {
            return loc - scale * log(-log(u));
        }
    }
}

fn logistic<S: Source>(s: &mut S, loc: f64, scale: f64) -> f64 {
    loop {
        let u = s.uniform();
        if u > 0.0 {
            return loc + scale * log(u / (1.0 - u));
        }
    }
}

fn triangular<S: Source>(s: &mut S, left: f64, mode: f64, right: f64) -> f64 {
    let base = right - left;
    let leftbase = mode - left;
    let ratio = leftbase / base;
    let leftprod = leftbase * base;
    let rightprod = (right - mode) * base;
    let u = s.uniform();
    if u <= ratio {
        left + (u * leftprod).sqrt()
    } else {
        right - ((1.0 - u) * rightprod).sqrt()
    }
}

/// `random_interval(max)` on the source's words (masked rejection).
fn interval<S: Source>(s: &mut S, max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let m = super::mask_of(max);
    if max <= u32::MAX as u64 {
        loop {
            let v = s.word32() as u64 & m;
            if v <= max {
                return v;
            }
        }
    }
    loop {
        let v = s.word64() & m;
        if v <= max {
            return v;
        }
    }
}

const HRUA_D1: f64 = 1.7155277699214135;
const HRUA_D2: f64 = 0.8989161620588988;

/// `Generator.hypergeometric`: draws one item at a time for small samples, Stadlober's HRUA
/// (with `logfactorial`) otherwise.
pub(crate) fn hypergeometric_gen<S: Source>(s: &mut S, good: i64, bad: i64, sample: i64) -> i64 {
    if sample >= 10 && sample <= good + bad - 10 {
        return hrua_gen(s, good, bad, sample);
    }
    let total = good + bad;
    let mut todo = if sample > total / 2 {
        total - sample
    } else {
        sample
    };
    let mut left_total = total;
    let mut left_good = good;
    while todo > 0 && left_good > 0 && left_total > left_good {
        left_total -= 1;
        if (interval(s, left_total as u64) as i64) < left_good {
            left_good -= 1;
        }
        todo -= 1;
    }
    if left_total == left_good {
        left_good -= todo;
    }
    if sample > total / 2 {
        left_good
    } else {
        good - left_good
    }
}

fn hrua_gen<S: Source>(s: &mut S, good: i64, bad: i64, sample: i64) -> i64 {
    let popsize = good + bad;
    let cs = sample.min(popsize - sample);
    let mingb = good.min(bad);
    let maxgb = good.max(bad);
    let p = mingb as f64 / popsize as f64;
    let q = maxgb as f64 / popsize as f64;
    let mu = cs as f64 * p;
    let a = mu + 0.5;
    let var = (popsize - cs) as f64 * cs as f64 * p * q / (popsize - 1) as f64;
    let c = (var + 0.5).sqrt();
    let h = HRUA_D1 * c + HRUA_D2;
    let m = to_i64(((cs + 1) as f64 * (mingb + 1) as f64 / (popsize + 2) as f64).floor());
    let g = logfactorial(m)
        + logfactorial(mingb - m)
        + logfactorial(cs - m)
        + logfactorial(maxgb - cs + m);
    let b = ((cs.min(mingb) + 1) as f64).min((a + 16.0 * c).floor());
    let mut k = loop {
        let u = s.uniform();
        let v = s.uniform();
        let x = a + h * (v - 0.5) / u;
        if x < 0.0 || x >= b {
            continue;
        }
        let k = to_i64(x.floor());
        let gp = logfactorial(k)
            + logfactorial(mingb - k)
            + logfactorial(cs - k)
            + logfactorial(maxgb - cs + k);
        let t = g - gp;
        if u * (4.0 - u) - 3.0 <= t {
            break k;
        }
        if u * (u - t) >= 1.0 {
            continue;
        }
        if 2.0 * log(u) <= t {
            break k;
        }
    };
    if good > bad {
        k = cs - k;
    }
    if cs < sample {
        k = good - k;
    }
    k
}

/// `RandomState.hypergeometric`: NumPy 1.16's HYP (sample ≤ 10) and HRUA with `loggam`.
fn hypergeometric_legacy<S: Source>(s: &mut S, good: i64, bad: i64, sample: i64) -> i64 {
    if sample > 10 {
        return hrua_legacy(s, good, bad, sample);
    }
    if sample <= 0 {
        return 0;
    }
    let d1 = bad + good - sample;
    let d2 = good.min(bad) as f64;
    let mut y = d2;
    let mut k = sample;
    while y > 0.0 {
        let u = s.uniform();
        y -= to_i64((u + y / (d1 + k) as f64).floor()) as f64;
        k -= 1;
        if k == 0 {
            break;
        }
    }
    let mut z = to_i64(d2 - y);
    if good > bad {
        z = sample - z;
    }
    z
}

fn hrua_legacy<S: Source>(s: &mut S, good: i64, bad: i64, sample: i64) -> i64 {
    let mingb = good.min(bad);
    let popsize = good + bad;
    let maxgb = good.max(bad);
    let m = sample.min(popsize - sample);
    let d4 = mingb as f64 / popsize as f64;
    let d5 = 1.0 - d4;
    let d6 = m as f64 * d4 + 0.5;
    let d7 = ((popsize - m) as f64 * sample as f64 * d4 * d5 / (popsize - 1) as f64 + 0.5).sqrt();
    let d8 = HRUA_D1 * d7 + HRUA_D2;
    let d9 = to_i64(((m + 1) as f64 * (mingb + 1) as f64 / (popsize + 2) as f64).floor());
    let lg = |v: i64| loggam(v as f64);
    let d10 = lg(d9 + 1) + lg(mingb - d9 + 1) + lg(m - d9 + 1) + lg(maxgb - m + d9 + 1);
    let d11 = ((m.min(mingb)) as f64 + 1.0).min((d6 + 16.0 * d7).floor());
    let mut z = loop {
        let x = s.uniform();
        let y = s.uniform();
        let w = d6 + d8 * (y - 0.5) / x;
        if w < 0.0 || w >= d11 {
            continue;
        }
        let z = to_i64(w.floor());
        let t = d10 - (lg(z + 1) + lg(mingb - z + 1) + lg(m - z + 1) + lg(maxgb - m + z + 1));
        if x * (4.0 - x) - 3.0 <= t {
            break z;
        }
        if x * (x - t) >= 1.0 {
            continue;
        }
        if 2.0 * log(x) <= t {
            break z;
        }
    };
    if good > bad {
        z = m - z;
    }
    if m < sample {
        z = good - z;
    }
    z
}

/// NumPy's `kahan_sum` (compensated), used to check `multinomial`'s `pvals`.
fn kahan_sum(v: &[f64]) -> f64 {
    let Some((&first, rest)) = v.split_first() else {
        return 0.0;
    };
    let (mut sum, mut c) = (first, 0.0);
    for &x in rest {
        let y = x - c;
        let t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    sum
}

// ------------------------------------------------------------------------------ the trait

/// NumPy's distributions, on a [`Generator`](super::Generator) (`np.random.default_rng`) or a
/// legacy [`RandomState`](super::RandomState): each method fills `out` (NumPy's `size`, in C
/// order) with what the same call of the same class draws, bit for bit, and leaves the
/// generator where NumPy leaves it. Parameters are scalars (NumPy also broadcasts arrays;
/// call once per distinct parameter for that).
///
/// ```
/// use lockstep_rng::compat::numpy::{Distributions, RandomState, default_rng};
/// let mut g = default_rng(0);
/// let mut x = [0.0; 2];
/// g.gamma(2.0, 1.0, &mut x).unwrap();
/// let mut k = [0i64; 3];
/// RandomState::new(0).poisson(4.0, &mut k).unwrap();
/// ```
pub trait Distributions: Blocked + Sized {
    /// `standard_gamma(shape, size)`. Errors if `shape < 0` or NaN.
    fn standard_gamma(&mut self, shape: f64, out: &mut [f64]) -> Result<()> {
        non_negative("standard_gamma", "shape", shape)?;
        not_nan("standard_gamma", "shape", shape)?;
        if 0.0 < shape && shape < 1.0 {
            with_block!(self, out.len(), |s| gamma_small_fill(s, shape, 1.0, out));
            return Ok(());
        }
        if Self::LEGACY && shape > 1.0 && out.len() >= BLOCK_MIN {
            let mt = MtShape::new(shape);
            legacy_mt_fill(&mut self.block(), [mt, mt], false, 1.0, out);
            return Ok(());
        }
        with_block!(self, out.len(), |s| gamma_fill(s, shape, 1.0, out));
        Ok(())
    }

    /// `gamma(shape, scale, size)`: `scale·standard_gamma(shape)`.
    fn gamma(&mut self, shape: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("gamma", "shape", shape)?;
        non_negative("gamma", "scale", scale)?;
        not_nan("gamma", "shape", shape)?;
        if 0.0 < shape && shape < 1.0 {
            with_block!(self, out.len(), |s| gamma_small_fill(s, shape, scale, out));
            return Ok(());
        }
        if Self::LEGACY && shape > 1.0 && out.len() >= BLOCK_MIN {
            let mt = MtShape::new(shape);
            legacy_mt_fill(&mut self.block(), [mt, mt], false, scale, out);
            return Ok(());
        }
        with_block!(self, out.len(), |s| gamma_fill(s, shape, scale, out));
        Ok(())
    }

    /// `beta(a, b, size)`. Errors unless `a > 0` and `b > 0`.
    fn beta(&mut self, a: f64, b: f64, out: &mut [f64]) -> Result<()> {
        for (n, v) in [("a", a), ("b", b)] {
            positive("beta", n, v)?;
            not_nan("beta", n, v)?;
        }
        if johnk_batched(Self::LEGACY, a, b) {
            with_block!(self, out.len(), |s| johnk_fill(s, a, b, out));
            return Ok(());
        }
        if Self::LEGACY && a > 1.0 && b > 1.0 && out.len() >= BLOCK_MIN {
            let shapes = [MtShape::new(a), MtShape::new(b)];
            legacy_mt_fill(&mut self.block(), shapes, true, 1.0, out);
            return Ok(());
        }
        with_block!(self, out.len(), |s| beta_fill(s, a, b, out));
        Ok(())
    }

    /// `exponential(scale, size)`: `scale·standard_exponential`.
    fn exponential(&mut self, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("exponential", "scale", scale)?;
        fill(out, || scale * self.exp1());
        Ok(())
    }

    /// `chisquare(df, size)`: `2·standard_gamma(df/2)`. Errors unless `df > 0`.
    fn chisquare(&mut self, df: f64, out: &mut [f64]) -> Result<()> {
        positive("chisquare", "df", df)?;
        not_nan("chisquare", "df", df)?;
        fill(out, || chisquare(self, df));
        Ok(())
    }

    /// `noncentral_chisquare(df, nonc, size)`. Errors unless `df > 0`, `nonc >= 0`.
    fn noncentral_chisquare(&mut self, df: f64, nonc: f64, out: &mut [f64]) -> Result<()> {
        positive("noncentral_chisquare", "df", df)?;
        not_nan("noncentral_chisquare", "df", df)?;
        non_negative("noncentral_chisquare", "nonc", nonc)?;
        fill(out, || noncentral_chisquare(self, df, nonc));
        Ok(())
    }

    /// `f(dfnum, dfden, size)`: `(χ²(dfnum)·dfden) / (χ²(dfden)·dfnum)`.
    fn f(&mut self, dfnum: f64, dfden: f64, out: &mut [f64]) -> Result<()> {
        for (n, v) in [("dfnum", dfnum), ("dfden", dfden)] {
            positive("f", n, v)?;
            not_nan("f", n, v)?;
        }
        fill(out, || {
            let num = chisquare(self, dfnum) * dfden;
            let den = chisquare(self, dfden) * dfnum;
            num / den
        });
        Ok(())
    }

    /// `noncentral_f(dfnum, dfden, nonc, size)`.
    fn noncentral_f(&mut self, dfnum: f64, dfden: f64, nonc: f64, out: &mut [f64]) -> Result<()> {
        for (n, v) in [("dfnum", dfnum), ("dfden", dfden)] {
            positive("noncentral_f", n, v)?;
            not_nan("noncentral_f", n, v)?;
        }
        non_negative("noncentral_f", "nonc", nonc)?;
        fill(out, || {
            let t = noncentral_chisquare(self, dfnum, nonc) * dfden;
            t / (chisquare(self, dfden) * dfnum)
        });
        Ok(())
    }

    /// `standard_cauchy(size)`: a ratio of two standard normals.
    fn standard_cauchy(&mut self, out: &mut [f64]) {
        fill(out, || {
            let num = self.gauss();
            num / self.gauss()
        });
    }

    /// `standard_t(df, size)`: `sqrt(df/2)·z / sqrt(standard_gamma(df/2))`.
    fn standard_t(&mut self, df: f64, out: &mut [f64]) -> Result<()> {
        positive("standard_t", "df", df)?;
        not_nan("standard_t", "df", df)?;
        fill(out, || {
            let num = self.gauss();
            let den = std_gamma(self, df / 2.0);
            (df / 2.0).sqrt() * num / den.sqrt()
        });
        Ok(())
    }

    /// `lognormal(mean, sigma, size)`: `exp(mean + sigma·z)`.
    fn lognormal(&mut self, mean: f64, sigma: f64, out: &mut [f64]) -> Result<()> {
        non_negative("lognormal", "sigma", sigma)?;
        fill(out, || exp(mean + sigma * self.gauss()));
        Ok(())
    }

    /// `laplace(loc, scale, size)` (inversion; U = 0 is redrawn).
    fn laplace(&mut self, loc: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("laplace", "scale", scale)?;
        fill(out, || laplace(self, loc, scale));
        Ok(())
    }

    /// `gumbel(loc, scale, size)`.
    fn gumbel(&mut self, loc: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("gumbel", "scale", scale)?;
        fill(out, || gumbel(self, loc, scale));
        Ok(())
    }

    /// `logistic(loc, scale, size)`.
    fn logistic(&mut self, loc: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("logistic", "scale", scale)?;
        fill(out, || logistic(self, loc, scale));
        Ok(())
    }

    /// `rayleigh(scale, size)`: `scale·sqrt(2·E)` (`Generator`) or
    /// `scale·sqrt(−2·log1p(−U))` (legacy).
    fn rayleigh(&mut self, scale: f64, out: &mut [f64]) -> Result<()> {
        non_negative("rayleigh", "scale", scale)?;
        if Self::LEGACY {
            fill(out, || scale * (-2.0 * log1p(-self.uniform())).sqrt());
        } else {
            fill(out, || scale * (2.0 * self.exp1()).sqrt());
        }
        Ok(())
    }

    /// `pareto(a, size)`: `expm1(E/a)` (`Generator`) or `exp(E/a) − 1` (legacy).
    fn pareto(&mut self, a: f64, out: &mut [f64]) -> Result<()> {
        positive("pareto", "a", a)?;
        if Self::LEGACY {
            fill(out, || exp(self.exp1() / a) - 1.0);
        } else {
            fill(out, || expm1(self.exp1() / a));
        }
        Ok(())
    }

    /// `weibull(a, size)`: `E^(1/a)` (0 when `a = 0`).
    fn weibull(&mut self, a: f64, out: &mut [f64]) -> Result<()> {
        non_negative("weibull", "a", a)?;
        fill(out, || {
            if a == 0.0 {
                0.0
            } else {
                pow(self.exp1(), 1.0 / a)
            }
        });
        Ok(())
    }

    /// `power(a, size)`: `(1 − exp(−E))^(1/a)`.
    fn power(&mut self, a: f64, out: &mut [f64]) -> Result<()> {
        positive("power", "a", a)?;
        if Self::LEGACY {
            fill(out, || pow(1.0 - exp(-self.exp1()), 1.0 / a));
        } else {
            fill(out, || pow(-expm1(-self.exp1()), 1.0 / a));
        }
        Ok(())
    }

    /// `triangular(left, mode, right, size)`. Errors unless `left <= mode <= right` and
    /// `left < right`.
    fn triangular(&mut self, left: f64, mode: f64, right: f64, out: &mut [f64]) -> Result<()> {
        if left > mode {
            return Err(invalid("triangular", "mode", "left > mode"));
        }
        if mode > right {
            return Err(invalid("triangular", "mode", "mode > right"));
        }
        if left == right {
            return Err(invalid("triangular", "right", "left == right"));
        }
        fill(out, || triangular(self, left, mode, right));
        Ok(())
    }

    /// `vonmises(mu, kappa, size)`: Best & Fisher's rejection, the angle wrapped to
    /// `[−π, π]` (`Generator` switches to a wrapped normal above `kappa = 1e6`).
    fn vonmises(&mut self, mu: f64, kappa: f64, out: &mut [f64]) -> Result<()> {
        non_negative("vonmises", "kappa", kappa)?;
        fill(out, || vonmises(self, mu, kappa));
        Ok(())
    }

    /// `wald(mean, scale, size)` (inverse Gaussian). Errors unless both are positive.
    fn wald(&mut self, mean: f64, scale: f64, out: &mut [f64]) -> Result<()> {
        positive("wald", "mean", mean)?;
        positive("wald", "scale", scale)?;
        fill(out, || wald(self, mean, scale));
        Ok(())
    }

    /// `poisson(lam, size)`. Errors if `lam < 0`, NaN or above NumPy's `POISSON_LAM_MAX`.
    fn poisson(&mut self, lam: f64, out: &mut [i64]) -> Result<()> {
        if !(lam >= 0.0) {
            return Err(invalid(
                "poisson",
                "lam",
                format!("lam < 0 or is NaN (got {lam})"),
            ));
        }
        if !(lam <= poisson_lam_max()) {
            return Err(invalid(
                "poisson",
                "lam",
                format!("lam value too large ({lam})"),
            ));
        }
        let p = Poisson::new(lam);
        #[cfg(target_arch = "x86_64")]
        if let Poisson::Mult { limit } = p
            && out.len() >= BLOCK_MIN
            && crate::isa::Isa::Avx2.enabled()
        {
            // SAFETY: AVX2 is available (checked by `enabled`).
            with_block!(self, out.len(), |s| unsafe { mult_batched(s, limit, out) });
            return Ok(());
        }
        if let Poisson::Ptrs(ptrs) = p {
            with_block!(self, out.len(), |s| ptrs_fill(s, &ptrs, out));
            return Ok(());
        }
        with_block!(self, out.len(), |s| poisson_fill(s, &p, out));
        Ok(())
    }

    /// `binomial(n, p, size)`. Errors if `n < 0` or `p` is outside `[0, 1]`.
    fn binomial(&mut self, n: i64, p: f64, out: &mut [i64]) -> Result<()> {
        bounded_0_1("binomial", "p", p)?;
        if n < 0 {
            return Err(invalid("binomial", "n", format!("n < 0 (got {n})")));
        }
        let b = Binomial::new(Self::LEGACY, p, n);
        if let Binomial::Inversion { alg, flip } = b
            && out.len() >= BLOCK_MIN
        {
            let t = InversionTable::new(&alg);
            with_block!(self, out.len(), |s| inversion_fill(s, &t, n, flip, out));
            return Ok(());
        }
        if let Binomial::Btpe { alg, flip } = b
            && out.len() >= BLOCK_MIN
        {
            let t = alg.ratio_table();
            with_block!(self, out.len(), |s| btpe_fill(s, &alg, &t, flip, out));
            return Ok(());
        }
        with_block!(self, out.len(), |s| binomial_fill(s, &b, out));
        Ok(())
    }

    /// `negative_binomial(n, p, size)`: `poisson(gamma(n, (1 − p)/p))`.
    fn negative_binomial(&mut self, n: f64, p: f64, out: &mut [i64]) -> Result<()> {
        const OP: &str = "negative_binomial";
        not_nan(OP, "n", n)?;
        positive(OP, "n", n)?;
        if Self::LEGACY {
            bounded_0_1(OP, "p", p)?;
            if p == 0.0 {
                // NumPy would draw from poisson(inf), which never ends.
                return Err(invalid(OP, "p", "p == 0 gives an infinite Poisson mean"));
            }
        } else {
            bounded_gt_0_1(OP, "p", p)?;
            if (1.0 - p) / p * (n + 10.0 * n.sqrt()) > poisson_lam_max() {
                return Err(invalid(
                    OP,
                    "p",
                    "n too large or p too small, see Generator.negative_binomial Notes",
                ));
            }
        }
        let scale = (1.0 - p) / p;
        fill(out, || {
            let y = scale * std_gamma(self, n);
            poisson(self, y)
        });
        Ok(())
    }

    /// `geometric(p, size)`: a cumulative search for `p >= 1/3`, inversion below. Errors
    /// unless `0 < p <= 1`.
    fn geometric(&mut self, p: f64, out: &mut [i64]) -> Result<()> {
        bounded_gt_0_1("geometric", "p", p)?;
        fill(out, || geometric(self, p));
        Ok(())
    }

    /// `zipf(a, size)`. Errors unless `a > 1`.
    fn zipf(&mut self, a: f64, out: &mut [i64]) -> Result<()> {
        if !(a > 1.0) {
            return Err(invalid(
                "zipf",
                "a",
                format!("a <= 1 or a is NaN (got {a})"),
            ));
        }
        if Self::LEGACY && pow(2.0, a - 1.0).is_infinite() {
            // NumPy 1.16's loop never accepts once 2^(a−1) overflows (a >= 1025).
            return Err(invalid(
                "zipf",
                "a",
                format!("a >= 1025 never returns in RandomState (got {a})"),
            ));
        }
        fill(out, || zipf(self, a));
        Ok(())
    }

    /// `logseries(p, size)`. Errors unless `0 <= p < 1`.
    fn logseries(&mut self, p: f64, out: &mut [i64]) -> Result<()> {
        if !(0.0..1.0).contains(&p) {
            return Err(invalid(
                "logseries",
                "p",
                format!("p < 0, p >= 1 or p is NaN (got {p})"),
            ));
        }
        fill(out, || logseries(self, p));
        Ok(())
    }

    /// `hypergeometric(ngood, nbad, nsample, size)`. Errors on negative counts,
    /// `ngood + nbad < nsample`, `Generator`'s limit of `10^9` on `ngood` and `nbad`, or the
    /// legacy `nsample >= 1`.
    fn hypergeometric(
        &mut self,
        ngood: i64,
        nbad: i64,
        nsample: i64,
        out: &mut [i64],
    ) -> Result<()> {
        const OP: &str = "hypergeometric";
        for (n, v) in [("ngood", ngood), ("nbad", nbad)] {
            if v < 0 {
                return Err(invalid(OP, n, format!("{n} < 0 (got {v})")));
            }
            if !Self::LEGACY && v >= 1_000_000_000 {
                return Err(invalid(
                    OP,
                    n,
                    "both ngood and nbad must be less than 1000000000",
                ));
            }
        }
        if Self::LEGACY && nsample < 1 {
            return Err(invalid(
                OP,
                "nsample",
                format!("nsample < 1 (got {nsample})"),
            ));
        }
        if nsample < 0 {
            return Err(invalid(
                OP,
                "nsample",
                format!("nsample < 0 (got {nsample})"),
            ));
        }
        if ngood.checked_add(nbad).is_none_or(|t| t < nsample) {
            return Err(invalid(OP, "nsample", "ngood + nbad < nsample"));
        }
        if Self::LEGACY {
            fill(out, || hypergeometric_legacy(self, ngood, nbad, nsample));
        } else {
            fill(out, || hypergeometric_gen(self, ngood, nbad, nsample));
        }
        Ok(())
    }

    /// `multinomial(n, pvals, size=rows)`: `rows` rows of `pvals.len()` counts, row-major,
    /// each by successive conditional binomials. Errors if `n < 0`, a `pvals` entry is
    /// outside `[0, 1]`, or `sum(pvals[:-1]) > 1 + 1e-12`.
    fn multinomial(&mut self, n: i64, pvals: &[f64], rows: usize) -> Result<Vec<i64>> {
        const OP: &str = "multinomial";
        for &p in pvals {
            bounded_0_1(OP, "pvals", p)?;
        }
        let d = pvals.len();
        if d > 0 && kahan_sum(&pvals[..d - 1]) > 1.0 + 1e-12 {
            return Err(invalid(OP, "pvals", "sum(pvals[:-1]) > 1.0"));
        }
        if n < 0 {
            return Err(invalid(OP, "n", format!("n < 0 (got {n})")));
        }
        let mut out = vec![0i64; rows * d];
        for row in out
            .chunks_exact_mut(d.max(1))
            .take(if d == 0 { 0 } else { rows })
        {
            let mut remaining_p = 1.0;
            let mut left = n;
            for j in 0..d - 1 {
                row[j] = binomial(self, pvals[j] / remaining_p, left);
                left -= row[j];
                if left <= 0 {
                    break;
                }
                remaining_p -= pvals[j];
            }
            if left > 0 {
                row[d - 1] = left;
            }
        }
        Ok(out)
    }

    /// `dirichlet(alpha, size=rows)`: `rows` rows of `alpha.len()` values, row-major;
    /// normalised gammas, or (`Generator`, every `alpha < 0.1`) stick-breaking with betas.
    /// Errors if an `alpha` is negative (legacy: `<= 0`) or NaN.
    fn dirichlet(&mut self, alpha: &[f64], rows: usize) -> Result<Vec<f64>> {
        const OP: &str = "dirichlet";
        for &a in alpha {
            not_nan(OP, "alpha", a)?;
            if Self::LEGACY && a <= 0.0 {
                return Err(invalid(OP, "alpha", "alpha <= 0"));
            }
            if a < 0.0 {
                return Err(invalid(OP, "alpha", "alpha < 0"));
            }
        }
        let k = alpha.len();
        let mut out = vec![0.0; rows * k];
        if k == 0 {
            return Ok(out);
        }
        let max = alpha.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !Self::LEGACY && max < 0.1 {
            // Right-to-left cumulative sums of alpha.
            let mut csum = vec![0.0; k];
            let mut acc = 0.0;
            for j in (0..k).rev() {
                acc += alpha[j];
                csum[j] = acc;
            }
            if acc > 0.0 {
                for row in out.chunks_exact_mut(k) {
                    let mut left = 1.0;
                    for j in 0..k - 1 {
                        let v = beta(self, alpha[j], csum[j + 1]);
                        row[j] = left * v;
                        left *= 1.0 - v;
                        if csum[j + 1] == 0.0 {
                            break;
                        }
                    }
                    row[k - 1] = left;
                }
            }
            return Ok(out);
        }
        for row in out.chunks_exact_mut(k) {
            let mut acc = 0.0;
            for (o, &a) in row.iter_mut().zip(alpha) {
                *o = std_gamma(self, a);
                acc += *o;
            }
            let inv = 1.0 / acc;
            for o in row.iter_mut() {
                *o *= inv;
            }
        }
        Ok(out)
    }
}

impl<T: Blocked> Distributions for T {}

/// `Generator.standard_gamma(shape, dtype=np.float32)`: the same algorithms in `float`
/// (`random_standard_gamma_f`), on 32-bit draws.
pub(crate) fn std_gamma_f32<B: super::Bits>(b: &mut B, shape: f32) -> f32 {
    use super::ziggurat::{exponential_f32, next_f32, normal_f32};
    use libm::{logf, powf};
    if shape == 1.0 {
        return exponential_f32(b);
    }
    if shape == 0.0 {
        return 0.0;
    }
    if shape < 1.0 {
        loop {
            let u = next_f32(b);
            let v = exponential_f32(b);
            if u <= 1.0 - shape {
                let x = powf(u, 1.0 / shape);
                if x <= v {
                    return x;
                }
            } else {
                let y = -logf((1.0 - u) / shape);
                let x = powf(1.0 - shape + shape * y, 1.0 / shape);
                if x <= v + y {
                    return x;
                }
            }
        }
    }
    let bb = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * bb).sqrt();
    loop {
        let (x, mut v) = loop {
            let x = normal_f32(b);
            let v = 1.0 + c * x;
            if v > 0.0 {
                break (x, v);
            }
        };
        v = v * v * v;
        let u = next_f32(b);
        if u < 1.0 - 0.0331 * (x * x) * (x * x) {
            return bb * v;
        }
        if logf(u) < 0.5 * x * x + bb * (1.0 - v + logf(v)) {
            return bb * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Distributions;
    use crate::compat::numpy::{Generator, Pcg64Dxsm, RandomState, SeedSequence, default_rng};

    /// (name, a, b): the samplers that draw through a block source, over their branches.
    const CASES: [(&str, f64, f64); 24] = [
        ("gamma", 2.5, 1.0),
        // Shapes near 1: many polar pairs at or below the batched legacy loop's threshold, and
        // attempts with `v <= 0` that draw no uniform.
        ("gamma", 1.0001, 1.0),
        ("gamma", 1.05, 0.5),
        ("gamma", 1e6, 1.0),
        ("gamma", f64::INFINITY, 1.0),
        ("gamma", 0.5, 2.0),
        ("gamma", 1e-3, 1.0),
        ("gamma", 1.0, 3.0),
        ("beta", 2.0, 3.0),
        ("beta", 0.5, 0.7),
        // Attempts whose `v > 0` differs between the shapes end a legacy batch.
        ("beta", 1.0001, 30.0),
        ("beta", 30.0, 1.0001),
        ("beta", 1.2, 1.1),
        ("beta", 2.0, 0.5),
        ("beta", 1e-200, 1e-200),
        ("poisson", 4.5, 0.0),
        ("poisson", 0.3, 0.0),
        ("poisson", 9.9, 0.0),
        ("poisson", 57.3, 0.0),
        ("poisson", 0.0, 0.0),
        ("binomial", 10.0, 0.3),
        ("binomial", 1000.0, 0.4),
        ("binomial", 1000.0, 0.9),
        ("binomial", 0.0, 0.5),
    ];

    /// One call of `n` values, as bit patterns.
    fn draw<D: Distributions>(d: &mut D, (name, a, b): (&str, f64, f64), n: usize) -> Vec<u64> {
        let mut f = vec![0.0; n];
        let mut k = vec![0i64; n];
        match name {
            "gamma" => d.gamma(a, b, &mut f).unwrap(),
            "beta" => d.beta(a, b, &mut f).unwrap(),
            "poisson" => d.poisson(a, &mut k).unwrap(),
            _ => d.binomial(a as i64, b, &mut k).unwrap(),
        }
        if matches!(name, "gamma" | "beta") {
            f.iter().map(|x| x.to_bits()).collect()
        } else {
            k.iter().map(|&x| x as u64).collect()
        }
    }

    /// `size = n` in one call equals `n` calls of `size = 1` (NumPy's loop over the same
    /// per-value function), value for value, and leaves the generator in the same state.
    fn one_call_is_n_calls<D: Distributions + Clone>(
        fresh: impl Fn() -> D,
        state: impl Fn(&mut D) -> String,
    ) {
        for case in CASES {
            for n in [1, 7, 8, 9, 15, 16, 17, 100, 1000, 3000] {
                let mut whole = fresh();
                let mut single = fresh();
                let a = draw(&mut whole, case, n);
                let b: Vec<u64> = (0..n).flat_map(|_| draw(&mut single, case, 1)).collect();
                assert_eq!(a, b, "{case:?} n = {n}");
                assert_eq!(state(&mut whole), state(&mut single), "{case:?} n = {n}");
                // And the next call continues the same stream.
                assert_eq!(draw(&mut whole, case, 20), draw(&mut single, case, 20));
            }
        }
    }

    #[test]
    fn random_state_one_call_is_n_calls() {
        one_call_is_n_calls(
            || {
                let mut rs = RandomState::new(7);
                // A cached Gaussian pending, and an engine position inside a block.
                rs.standard_normal(&mut [0.0]);
                rs
            },
            |rs| format!("{:?}", rs.get_state()),
        );
    }

    #[test]
    fn generator_one_call_is_n_calls() {
        one_call_is_n_calls(
            || {
                let mut g = default_rng(7);
                // A buffered 32-bit half pending.
                g.integers_i32(0, 10, false, &mut [0]).unwrap();
                g
            },
            |g| {
                let b = g.bit_generator();
                format!("{:?} {:?}", b.state(), b.pending())
            },
        );
        one_call_is_n_calls(
            || Generator::<Pcg64Dxsm>::from_seed_seq(SeedSequence::from_int(7)),
            |g| format!("{:?}", g.bit_generator()),
        );
    }
}
