//! CPython 3.11's `random` module, bit for bit (verified against CPython 3.11.7 on Linux).
//!
//! [`Random`] is `random.Random`: the same MT19937 words are drawn in the same order for
//! every method below, so any interleaving of calls stays in lockstep with CPython. Float
//! math (`log`, `sqrt`, `cos`, `sin`, `exp`) uses Rust's `f64` methods, which call the
//! platform C library: results equal CPython's where that library is glibc (Linux).
//!
//! Integers larger than 64 bits (seeds, `getrandbits(k)` for `k > 64`) are written as
//! little-endian 32-bit words or as decimal strings; no bignum type is needed.
//!
//! ```
//! use lockstep_rng::compat::python::Random;
//! let mut r = Random::from_u64(42);
//! assert_eq!(r.random(), 0.6394267984578837);
//! assert_eq!(r.random(), 0.025010755222666936);
//! ```

use crate::engines::Mt19937;
use crate::engines::mt19937::N;
use crate::{Error, Result, invalid};
use sha2::{Digest, Sha512};

/// CPython 3.11 `random.Random`.
#[derive(Clone, Debug, PartialEq)]
pub struct Random {
    mt: Mt19937,
    /// The second Box–Muller value `gauss()` keeps for its next call.
    gauss_next: Option<f64>,
}

/// `Random.getstate()` (version 3): `(3, (mt[0], …, mt[623], pos), gauss_next)`.
#[derive(Clone, Debug, PartialEq)]
pub struct PyState {
    /// The 624 state words.
    pub mt: Vec<u32>,
    /// Words of the current block already used; 624 = the next draw twists.
    pub pos: usize,
    /// The cached Gaussian (`None` in Python when absent).
    pub gauss_next: Option<f64>,
}

impl PyState {
    /// The state version CPython 3.11 writes.
    pub const VERSION: u32 = 3;

    /// The middle element of Python's tuple: the 624 words followed by `pos` (625 ints).
    pub fn internal_state(&self) -> Vec<u32> {
        let mut v = self.mt.clone();
        v.push(self.pos as u32);
        v
    }

    /// Builds a state from Python's tuple parts: `version` 3 (or the legacy 2, whose words
    /// are read the same way), 625 ints (words then `pos`) and `gauss_next`.
    pub fn from_tuple(version: u32, internal: &[u32], gauss_next: Option<f64>) -> Result<Self> {
        if version != 2 && version != 3 {
            return Err(Error::InvalidState {
                op: "setstate",
                reason: format!(
                    "state with version {version} passed to Random.setstate() of version 3"
                ),
            });
        }
        if internal.len() != N + 1 {
            return Err(Error::InvalidState {
                op: "setstate",
                reason: format!(
                    "state vector must have {} ints, got {}",
                    N + 1,
                    internal.len()
                ),
            });
        }
        Ok(Self {
            mt: internal[..N].to_vec(),
            pos: internal[N] as usize,
            gauss_next,
        })
    }
}

/// Python's `int.bit_length()` for a `u64`.
#[inline]
fn bit_length(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// Python's floor division on `i128`.
fn floor_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

impl Random {
    /// `random.Random(seed)` for a non-negative integer seed (what `seed_everything` uses).
    pub fn from_u64(seed: u64) -> Self {
        Self::from_words(&[seed as u32, (seed >> 32) as u32])
    }

    /// `random.Random(seed)` for any `i64` (a negative seed equals its absolute value).
    pub fn from_i64(seed: i64) -> Self {
        Self::from_u64(seed.unsigned_abs())
    }

    /// `random.Random(n)` for `|n|` given as little-endian 32-bit words (high zero words are
    /// ignored, as they are not part of Python's integer).
    pub fn from_words(words: &[u32]) -> Self {
        let len = words.iter().rposition(|&w| w != 0).map_or(1, |i| i + 1);
        let key: &[u32] = if words.is_empty() {
            &[0]
        } else {
            &words[..len]
        };
        Self {
            mt: Mt19937::from_key(key),
            gauss_next: None,
        }
    }

    /// `random.Random(int(text))` for a decimal integer of any size, with optional sign.
    pub fn from_decimal(text: &str) -> Result<Self> {
        Ok(Self::from_words(&decimal_to_words(text)?.1))
    }

    /// `random.Random(b)` for bytes (`seed` version 2: the integer `b + sha512(b)` read
    /// big-endian).
    pub fn from_bytes(b: &[u8]) -> Self {
        let mut all = b.to_vec();
        all.extend_from_slice(&Sha512::digest(b));
        // Big-endian bytes to little-endian words.
        let words: Vec<u32> = all
            .rchunks(4)
            .map(|c| c.iter().fold(0u32, |acc, &x| (acc << 8) | x as u32))
            .collect();
        Self::from_words(&words)
    }

    /// `random.Random(s)` for a `str` (its UTF-8 bytes, then as [`from_bytes`](Self::from_bytes)).
    pub fn from_str_seed(s: &str) -> Self {
        Self::from_bytes(s.as_bytes())
    }

    /// `random.Random().seed(s, version=1)` for a `str`: CPython's old string hash of the
    /// code points (`x = ord(s[0]) << 7`, then `x = (1000003·x) ^ c` mod 2^64 per code point,
    /// then `x ^= len(s)`), used as an integer seed.
    pub fn from_str_seed_v1(s: &str) -> Self {
        let cps: Vec<u64> = s.chars().map(|c| c as u64).collect();
        Self::from_u64(seed_v1_hash(&cps))
    }

    /// `seed(b, version=1)` for `bytes`: the bytes are read as Latin-1 code points, then as
    /// [`from_str_seed_v1`](Self::from_str_seed_v1). (CPython 3.11 applies version 1 only to
    /// `str` and `bytes`: `seed(bytearray, version=1)` raises `TypeError` there, and a
    /// `bytearray` with version 2 seeds as the same `bytes`, [`from_bytes`](Self::from_bytes).)
    pub fn from_bytes_v1(b: &[u8]) -> Self {
        let cps: Vec<u64> = b.iter().map(|&c| c as u64).collect();
        Self::from_u64(seed_v1_hash(&cps))
    }

    /// `random.Random(x)` for a float: seeds with `hash(x)` reinterpreted as unsigned 64-bit
    /// (the sign is NOT dropped). NaN is an error (its hash is not reproducible).
    pub fn from_f64(x: f64) -> Result<Self> {
        if x.is_nan() {
            return Err(invalid(
                "seed",
                "a",
                "a NaN seed hashes by identity, not reproducibly",
            ));
        }
        Ok(Self::from_u64(py_float_hash(x) as u64))
    }

    /// `seed(n)` in place for a `u64` (also clears the Gaussian cache).
    pub fn seed_u64(&mut self, seed: u64) {
        *self = Self::from_u64(seed);
    }

    /// The engine, for raw 32-bit draws.
    pub fn engine(&mut self) -> &mut Mt19937 {
        &mut self.mt
    }

    /// `random()`: `((w1 >> 5)·2^26 + (w2 >> 6))·2^-53`; two words.
    #[inline]
    pub fn random(&mut self) -> f64 {
        let a = self.mt.next_u32() >> 5;
        let b = self.mt.next_u32() >> 6;
        (a as f64 * 67_108_864.0 + b as f64) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` as little-endian 32-bit words (`ceil(k/32)` of them, none for
    /// `k == 0`); draws `ceil(k/32)` words, the last one shifted right when `k % 32 != 0`.
    pub fn getrandbits_words(&mut self, k: usize) -> Vec<u32> {
        let n = k.div_ceil(32);
        let mut out = Vec::with_capacity(n);
        let mut left = k;
        while left > 0 {
            let w = self.mt.next_u32();
            out.push(if left < 32 { w >> (32 - left) } else { w });
            left = left.saturating_sub(32);
        }
        out
    }

    /// `getrandbits(k)` for `k <= 64`. Errors for larger `k`.
    pub fn getrandbits(&mut self, k: u32) -> Result<u64> {
        if k > 64 {
            return Err(invalid(
                "getrandbits",
                "k",
                format!("{k} bits do not fit in u64; use getrandbits_words or getrandbits_decimal"),
            ));
        }
        if k <= 32 {
            return Ok(if k == 0 {
                0
            } else {
                (self.mt.next_u32() >> (32 - k)) as u64
            });
        }
        let lo = self.mt.next_u32() as u64;
        let hi = (self.mt.next_u32() >> (64 - k)) as u64;
        Ok(lo | hi << 32)
    }

    /// `getrandbits(k)` for any `k`, as a decimal string.
    pub fn getrandbits_decimal(&mut self, k: usize) -> String {
        words_to_decimal(&self.getrandbits_words(k))
    }

    /// CPython's `_randbelow(n)`: draws `n.bit_length()` bits until the value is below `n`.
    /// Errors if `n == 0`.
    pub fn randbelow(&mut self, n: u64) -> Result<u64> {
        if n == 0 {
            return Err(invalid("randrange", "stop", "empty range for randrange()"));
        }
        Ok(self.randbelow_nz(n))
    }

    #[inline]
    fn randbelow_nz(&mut self, n: u64) -> u64 {
        let k = bit_length(n);
        loop {
            let r = if k <= 32 {
                (self.mt.next_u32() >> (32 - k)) as u64
            } else {
                let lo = self.mt.next_u32() as u64;
                lo | ((self.mt.next_u32() >> (64 - k)) as u64) << 32
            };
            if r < n {
                return r;
            }
        }
    }

    /// `randrange(stop)`; errors if `stop <= 0`.
    pub fn randrange_stop(&mut self, stop: i64) -> Result<i64> {
        if stop <= 0 {
            return Err(invalid("randrange", "stop", "empty range for randrange()"));
        }
        Ok(self.randbelow_nz(stop as u64) as i64)
    }

    /// `randrange(start, stop, step)`; errors on an empty range or `step == 0`.
    pub fn randrange(&mut self, start: i64, stop: i64, step: i64) -> Result<i64> {
        const OP: &str = "randrange";
        let width = stop as i128 - start as i128;
        let n = match step {
            0 => return Err(invalid(OP, "step", "zero step for randrange()")),
            1 => width,
            s if s > 0 => floor_div(width + s as i128 - 1, s as i128),
            s => floor_div(width + s as i128 + 1, s as i128),
        };
        if n <= 0 {
            return Err(invalid(
                OP,
                "stop",
                format!("empty range for randrange({start}, {stop}, {step})"),
            ));
        }
        let r = self.randbelow_nz(n as u64) as i128;
        Ok((start as i128 + step as i128 * r) as i64)
    }

    /// `randint(a, b)` = `randrange(a, b + 1)`, inclusive of `b`; errors if `a > b`.
    pub fn randint(&mut self, a: i64, b: i64) -> Result<i64> {
        if a > b {
            return Err(invalid(
                "randint",
                "b",
                format!("empty range for randint({a}, {b})"),
            ));
        }
        let n = (b as i128 - a as i128 + 1) as u128;
        if n > u64::MAX as u128 {
            // The full i64 range: 2^64 values, 65 bits drawn as CPython does.
            let k = 65;
            loop {
                let w = self.getrandbits_words(k);
                if w[2] == 0 {
                    return Ok((a as i128 + (w[0] as i128 | (w[1] as i128) << 32)) as i64);
                }
            }
        }
        Ok((a as i128 + self.randbelow_nz(n as u64) as i128) as i64)
    }

    /// `choice(seq)`; errors on an empty sequence.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> Result<&'a T> {
        if seq.is_empty() {
            return Err(invalid(
                "choice",
                "seq",
                "cannot choose from an empty sequence",
            ));
        }
        Ok(&seq[self.randbelow_nz(seq.len() as u64) as usize])
    }

    /// `shuffle(x)`: `i` from `len − 1` down to 1, swap with `_randbelow(i + 1)`.
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow_nz(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `sample(range(n), k)`: `k` distinct indices in selection order (pool or set method,
    /// chosen as CPython chooses). Errors if `k > n`.
    pub fn sample_indices(&mut self, n: usize, k: usize) -> Result<Vec<usize>> {
        if k > n {
            return Err(invalid(
                "sample",
                "k",
                format!("sample larger than population ({k} > {n})"),
            ));
        }
        let mut setsize = 21usize;
        if k > 5 {
            let e = (k.saturating_mul(3) as f64).ln() / 4f64.ln();
            let grow = 4usize.checked_pow(e.ceil() as u32).unwrap_or(usize::MAX);
            setsize = setsize.saturating_add(grow);
        }
        let mut out = Vec::with_capacity(k);
        if n <= setsize {
            let mut pool: Vec<usize> = (0..n).collect();
            for i in 0..k {
                let j = self.randbelow_nz((n - i) as u64) as usize;
                out.push(pool[j]);
                pool[j] = pool[n - i - 1];
            }
        } else {
            let mut selected = std::collections::HashSet::with_capacity(k);
            for _ in 0..k {
                let mut j = self.randbelow_nz(n as u64) as usize;
                while !selected.insert(j) {
                    j = self.randbelow_nz(n as u64) as usize;
                }
                out.push(j);
            }
        }
        Ok(out)
    }

    /// `sample(population, k)`; errors if `k > len(population)`.
    pub fn sample<T: Clone>(&mut self, population: &[T], k: usize) -> Result<Vec<T>> {
        Ok(self
            .sample_indices(population.len(), k)?
            .into_iter()
            .map(|i| population[i].clone())
            .collect())
    }

    /// `choices(range(n), weights, k=k)` as indices: without weights
    /// `floor(random()·n)`; with weights a bisection of the running sums by
    /// `random()·total`. Errors on an empty population, a weights length mismatch, or a
    /// total that is not positive and finite.
    pub fn choices_indices(
        &mut self,
        n: usize,
        weights: Option<&[f64]>,
        k: usize,
    ) -> Result<Vec<usize>> {
        const OP: &str = "choices";
        if n == 0 && k > 0 {
            return Err(invalid(
                OP,
                "population",
                "cannot choose from an empty population",
            ));
        }
        let Some(w) = weights else {
            let nf = n as f64;
            return Ok((0..k)
                .map(|_| (self.random() * nf).floor() as usize)
                .collect());
        };
        if w.len() != n {
            return Err(invalid(
                OP,
                "weights",
                "the number of weights does not match the population",
            ));
        }
        let mut acc = 0.0;
        let cum: Vec<f64> = w
            .iter()
            .map(|&x| {
                acc += x;
                acc
            })
            .collect();
        let total = acc;
        if !(total > 0.0) {
            return Err(invalid(
                OP,
                "weights",
                "total of weights must be greater than zero",
            ));
        }
        if !total.is_finite() {
            return Err(invalid(OP, "weights", "total of weights must be finite"));
        }
        let hi = n - 1;
        Ok((0..k)
            .map(|_| {
                let x = self.random() * total;
                cum[..hi].partition_point(|&c| c <= x)
            })
            .collect())
    }

    /// `uniform(a, b)` = `a + (b − a)·random()`.
    pub fn uniform(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.random()
    }

    /// `gauss(mu, sigma)`: Box–Muller; returns `cos`·radius and keeps `sin`·radius for the
    /// next call (the cache is part of the state and cleared by seeding).
    pub fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let z = match self.gauss_next.take() {
            Some(z) => z,
            None => {
                let x2pi = self.random() * core::f64::consts::TAU;
                let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
                self.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            }
        };
        mu + z * sigma
    }

    /// `normalvariate(mu, sigma)`: Kinderman–Monahan ratio of uniforms, no cache.
    pub fn normalvariate(&mut self, mu: f64, sigma: f64) -> f64 {
        let nv = 4.0 * (-0.5f64).exp() / 2.0f64.sqrt();
        loop {
            let u1 = self.random();
            let u2 = 1.0 - self.random();
            let z = nv * (u1 - 0.5) / u2;
            let zz = z * z / 4.0;
            if zz <= -u2.ln() {
                return mu + z * sigma;
            }
        }
    }

    /// `expovariate(lambd)` = `−log(1 − random())/lambd`; errors if `lambd == 0`.
    pub fn expovariate(&mut self, lambd: f64) -> Result<f64> {
        if lambd == 0.0 {
            return Err(invalid("expovariate", "lambd", "float division by zero"));
        }
        Ok(-(1.0 - self.random()).ln() / lambd)
    }

    /// `triangular(low, high, mode)` (`mode = None` is the midpoint). A zero-width interval
    /// returns `low` after drawing one value, as CPython does.
    pub fn triangular(&mut self, low: f64, high: f64, mode: Option<f64>) -> f64 {
        let mut u = self.random();
        if high - low == 0.0 {
            // CPython: ZeroDivisionError from `(mode - low) / (high - low)` returns low.
            if mode.is_some() {
                return low;
            }
        }
        let mut c = match mode {
            None => 0.5,
            Some(m) => (m - low) / (high - low),
        };
        let (mut lo, mut hi) = (low, high);
        if u > c {
            u = 1.0 - u;
            c = 1.0 - c;
            std::mem::swap(&mut lo, &mut hi);
        }
        lo + (hi - lo) * (u * c).sqrt()
    }

    /// `lognormvariate(mu, sigma)` = `exp(normalvariate(mu, sigma))`.
    pub fn lognormvariate(&mut self, mu: f64, sigma: f64) -> f64 {
        pylibm::exp(self.normalvariate(mu, sigma))
    }

    /// `vonmisesvariate(mu, kappa)`: Best & Fisher; an angle in `[0, 2π)`.
    pub fn vonmisesvariate(&mut self, mu: f64, kappa: f64) -> f64 {
        use core::f64::consts::{PI, TAU};
        if kappa <= 1e-6 {
            return TAU * self.random();
        }
        let s = 0.5 / kappa;
        let r = s + (1.0 + s * s).sqrt();
        let z = loop {
            let u1 = self.random();
            let z = pylibm::cos(PI * u1);
            let d = z / (r + z);
            let u2 = self.random();
            if u2 < 1.0 - d * d || u2 <= (1.0 - d) * pylibm::exp(d) {
                break z;
            }
        };
        let q = 1.0 / r;
        let f = (q + z) / (1.0 + q * z);
        let u3 = self.random();
        if u3 > 0.5 {
            py_mod(mu + pylibm::acos(f), TAU)
        } else {
            py_mod(mu - pylibm::acos(f), TAU)
        }
    }

    /// `gammavariate(alpha, beta)`: Cheng's GB for `alpha > 1`, an exponential for 1,
    /// Ahrens–Dieter GS below. Errors unless both are `> 0` (or if `alpha` is NaN, where
    /// CPython never returns).
    pub fn gammavariate(&mut self, alpha: f64, beta: f64) -> Result<f64> {
        const OP: &str = "gammavariate";
        if alpha <= 0.0 || beta <= 0.0 {
            return Err(invalid(
                OP,
                "alpha",
                "gammavariate: alpha and beta must be > 0.0",
            ));
        }
        if alpha.is_nan() {
            return Err(invalid(OP, "alpha", "alpha is NaN"));
        }
        if alpha > 1.0 {
            let ainv = (2.0 * alpha - 1.0).sqrt();
            let bbb = alpha - pylibm::log(4.0);
            let ccc = alpha + ainv;
            let sg_magic = 1.0 + pylibm::log(4.5);
            loop {
                let u1 = self.random();
                if !(1e-7 < u1 && u1 < 0.9999999) {
                    continue;
                }
                let u2 = 1.0 - self.random();
                let v = pylibm::log(u1 / (1.0 - u1)) / ainv;
                let x = alpha * pylibm::exp(v);
                let z = u1 * u1 * u2;
                let r = bbb + ccc * v - x;
                if r + sg_magic - 4.5 * z >= 0.0 || r >= pylibm::log(z) {
                    return Ok(x * beta);
                }
            }
        }
        if alpha == 1.0 {
            return Ok(-pylibm::log(1.0 - self.random()) * beta);
        }
        let e = core::f64::consts::E;
        loop {
            let u = self.random();
            let b = (e + alpha) / e;
            let p = b * u;
            let x = if p <= 1.0 {
                py_pow(OP, p, 1.0 / alpha)?
            } else {
                -pylibm::log((b - p) / alpha)
            };
            let u1 = self.random();
            if p > 1.0 {
                if u1 <= py_pow(OP, x, alpha - 1.0)? {
                    return Ok(x * beta);
                }
            } else if u1 <= pylibm::exp(-x) {
                return Ok(x * beta);
            }
        }
    }

    /// `betavariate(alpha, beta)`: `y / (y + gammavariate(beta, 1))` with
    /// `y = gammavariate(alpha, 1)`, or 0 when `y == 0` (then `beta` is not checked, as in
    /// CPython).
    pub fn betavariate(&mut self, alpha: f64, beta: f64) -> Result<f64> {
        let y = self.gammavariate(alpha, 1.0)?;
        if y != 0.0 {
            return Ok(y / (y + self.gammavariate(beta, 1.0)?));
        }
        Ok(0.0)
    }

    /// `paretovariate(alpha)` = `(1 − random()) ** (−1/alpha)`; errors where CPython raises
    /// (`alpha == 0`, overflow).
    pub fn paretovariate(&mut self, alpha: f64) -> Result<f64> {
        const OP: &str = "paretovariate";
        let u = 1.0 - self.random();
        if alpha == 0.0 {
            return Err(invalid(OP, "alpha", "float division by zero"));
        }
        py_pow(OP, u, -1.0 / alpha)
    }

    /// `weibullvariate(alpha, beta)` = `alpha·(−log(1 − random())) ** (1/beta)`.
    pub fn weibullvariate(&mut self, alpha: f64, beta: f64) -> Result<f64> {
        const OP: &str = "weibullvariate";
        let u = 1.0 - self.random();
        if beta == 0.0 {
            return Err(invalid(OP, "beta", "float division by zero"));
        }
        Ok(alpha * py_pow(OP, -pylibm::log(u), 1.0 / beta)?)
    }

    /// `binomialvariate(n, p)` (CPython 3.12; the same MT19937 draws as every other method):
    /// `random() < p` for `n = 1`, geometric jumps (`log2`) for `n·p < 10`, Hörmann's BTRS
    /// otherwise with CPython's own `math.lgamma` (a Lanczos sum, not the C library's).
    /// Errors if `n < 0` or `p` is outside `[0, 1]`.
    pub fn binomialvariate(&mut self, n: i64, p: f64) -> Result<i64> {
        const OP: &str = "binomialvariate";
        if n < 0 {
            return Err(invalid(OP, "n", "n must be non-negative"));
        }
        if p <= 0.0 || p >= 1.0 {
            if p == 0.0 {
                return Ok(0);
            }
            if p == 1.0 {
                return Ok(n);
            }
            return Err(invalid(OP, "p", "p must be in the range 0.0 <= p <= 1.0"));
        }
        if p.is_nan() {
            // CPython compares NaN false everywhere and loops in BTRS; refuse instead.
            return Err(invalid(OP, "p", "p is NaN"));
        }
        if n == 1 {
            return Ok(i64::from(self.random() < p));
        }
        if p > 0.5 {
            return Ok(n - self.binomialvariate(n, 1.0 - p)?);
        }
        let nf = n as f64;
        if nf * p < 10.0 {
            let (mut x, mut y) = (0i64, 0i64);
            let c = pylibm::log2(1.0 - p);
            if c == 0.0 {
                return Ok(x);
            }
            loop {
                y += (pylibm::log2(self.random()) / c).floor() as i64 + 1;
                if y > n {
                    return Ok(x);
                }
                x += 1;
            }
        }
        let spq = (nf * p * (1.0 - p)).sqrt();
        let b = 1.15 + 2.53 * spq;
        let a = -0.0873 + 0.0248 * b + 0.01 * p;
        let c = nf * p + 0.5;
        let vr = 0.92 - 4.2 / b;
        let mut setup: Option<(f64, f64, i64, f64)> = None;
        loop {
            let mut u = self.random();
            u -= 0.5;
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + c).floor() as i64;
            if k < 0 || k > n {
                continue;
            }
            let mut v = self.random();
            if us >= 0.07 && v <= vr {
                return Ok(k);
            }
            let (alpha, lpq, m, h) = *setup.get_or_insert_with(|| {
                let alpha = (2.83 + 5.1 / b) * spq;
                let lpq = pylibm::log(p / (1.0 - p));
                let m = ((n + 1) as f64 * p).floor() as i64;
                let h = py_lgamma((m + 1) as f64) + py_lgamma((n - m + 1) as f64);
                (alpha, lpq, m, h)
            });
            v *= alpha / (a / (us * us) + b);
            if pylibm::log(v)
                <= h - py_lgamma((k + 1) as f64) - py_lgamma((n - k + 1) as f64)
                    + (k - m) as f64 * lpq
            {
                return Ok(k);
            }
        }
    }

    /// `randbytes(n)`: `getrandbits(8n).to_bytes(n, 'little')`.
    pub fn randbytes(&mut self, n: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self
            .getrandbits_words(n * 8)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        out.truncate(n);
        out
    }

    /// `_randbelow(n)` for `n` up to 2^128: `n.bit_length()` bits until below `n`.
    /// Errors if `n == 0`.
    pub fn randbelow_u128(&mut self, n: u128) -> Result<u128> {
        if n == 0 {
            return Err(invalid("randrange", "stop", "empty range for randrange()"));
        }
        let k = 128 - n.leading_zeros() as usize;
        loop {
            let r = self
                .getrandbits_words(k)
                .iter()
                .rev()
                .fold(0u128, |acc, &w| (acc << 32) | w as u128);
            if r < n {
                return Ok(r);
            }
        }
    }

    /// `randrange(start, stop, step)` for 128-bit bounds (ranges beyond 64 bits draw as
    /// CPython does). Errors on an empty range, `step == 0`, or a result outside `i128`.
    pub fn randrange_i128(&mut self, start: i128, stop: i128, step: i128) -> Result<i128> {
        const OP: &str = "randrange";
        let over = || invalid(OP, "stop", "range does not fit in 128 bits");
        let width = stop.checked_sub(start).ok_or_else(over)?;
        let n = match step {
            0 => return Err(invalid(OP, "step", "zero step for randrange()")),
            1 => width,
            s if s > 0 => width.checked_add(s - 1).ok_or_else(over)?.div_euclid(s),
            s => floor_div(width.checked_add(s + 1).ok_or_else(over)?, s),
        };
        if n <= 0 {
            return Err(invalid(
                OP,
                "stop",
                format!("empty range for randrange({start}, {stop}, {step})"),
            ));
        }
        let r = self.randbelow_u128(n as u128)? as i128;
        step.checked_mul(r)
            .and_then(|x| x.checked_add(start))
            .ok_or_else(over)
    }

    /// `randint(a, b)` for 128-bit bounds = `randrange(a, b + 1)`.
    pub fn randint_i128(&mut self, a: i128, b: i128) -> Result<i128> {
        if a > b {
            return Err(invalid(
                "randint",
                "b",
                format!("empty range for randint({a}, {b})"),
            ));
        }
        let stop = b
            .checked_add(1)
            .ok_or_else(|| invalid("randint", "b", "range does not fit in 128 bits"))?;
        self.randrange_i128(a, stop, 1)
    }

    /// `sample(range(len(counts)), k, counts=counts)` as indices: a sample of
    /// `range(sum(counts))`, each mapped to its element by bisecting the running counts.
    /// Errors if the total is not positive or `k` exceeds it.
    pub fn sample_counts_indices(&mut self, counts: &[u64], k: usize) -> Result<Vec<usize>> {
        const OP: &str = "sample";
        let mut acc: u64 = 0;
        let mut cum = Vec::with_capacity(counts.len());
        for &c in counts {
            acc = acc
                .checked_add(c)
                .ok_or_else(|| invalid(OP, "counts", "total of counts too large"))?;
            cum.push(acc);
        }
        let Some(total) = cum.pop() else {
            return Err(invalid(
                OP,
                "counts",
                "Total of counts must be greater than zero",
            ));
        };
        if total == 0 {
            return Err(invalid(
                OP,
                "counts",
                "Total of counts must be greater than zero",
            ));
        }
        let total = usize::try_from(total)
            .map_err(|_| invalid(OP, "counts", "total of counts too large"))?;
        let picks = self.sample_indices(total, k)?;
        Ok(picks
            .into_iter()
            .map(|s| cum.partition_point(|&c| c <= s as u64))
            .collect())
    }

    /// `choices(range(n), cum_weights=cum, k=k)` as indices (`n = cum.len()`): a bisection
    /// of `cum` by `random()·cum[-1]`. Errors on an empty `cum` with `k > 0`, or a total
    /// that is not positive and finite.
    pub fn choices_cum_indices(&mut self, cum: &[f64], k: usize) -> Result<Vec<usize>> {
        const OP: &str = "choices";
        let Some(&total) = cum.last() else {
            if k == 0 {
                return Ok(Vec::new());
            }
            return Err(invalid(
                OP,
                "population",
                "cannot choose from an empty population",
            ));
        };
        let total = total + 0.0;
        if !(total > 0.0) {
            return Err(invalid(
                OP,
                "weights",
                "Total of weights must be greater than zero",
            ));
        }
        if !total.is_finite() {
            return Err(invalid(OP, "weights", "Total of weights must be finite"));
        }
        let hi = cum.len() - 1;
        Ok((0..k)
            .map(|_| {
                let x = self.random() * total;
                cum[..hi].partition_point(|&c| c <= x)
            })
            .collect())
    }

    /// `getstate()`.
    pub fn getstate(&self) -> PyState {
        PyState {
            mt: self.mt.state().to_vec(),
            pos: self.mt.pos(),
            gauss_next: self.gauss_next,
        }
    }

    /// `setstate(state)`: errors unless there are 624 words and `pos <= 624`.
    pub fn setstate(&mut self, state: &PyState) -> Result<()> {
        let bad = |reason: String| Error::InvalidState {
            op: "setstate",
            reason,
        };
        let words: [u32; N] = state
            .mt
            .as_slice()
            .try_into()
            .map_err(|_| bad(format!("need {N} state words, got {}", state.mt.len())))?;
        self.mt = Mt19937::from_state(words, state.pos)
            .ok_or_else(|| bad(format!("invalid state: pos {} > {N}", state.pos)))?;
        self.gauss_next = state.gauss_next;
        Ok(())
    }
}

/// Python's `hash(x)` for a non-NaN float: `x = m·2^e` reduced modulo the Mersenne prime
/// `2^61 − 1`, sign applied, −1 mapped to −2; ±inf hash to ±314159.
pub fn py_float_hash(x: f64) -> i64 {
    const P: u128 = (1 << 61) - 1;
    if x.is_infinite() {
        return if x > 0.0 { 314_159 } else { -314_159 };
    }
    if x == 0.0 || x.is_nan() {
        return 0;
    }
    let bits = x.to_bits();
    let exp_field = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1 << 52) - 1);
    // |x| = mant · 2^e exactly.
    let (mant, e) = if exp_field == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, exp_field - 1075)
    };
    // 2^61 ≡ 1 (mod P), so a power of two reduces by its exponent modulo 61.
    let shift = e.rem_euclid(61) as u32;
    let h = ((mant as u128 % P) << shift) % P;
    let mut h = h as i64;
    if x < 0.0 {
        h = -h;
    }
    if h == -1 { -2 } else { h }
}

/// Parses a decimal integer with optional sign into `(negative, little-endian u32 words)`.
pub fn decimal_to_words(text: &str) -> Result<(bool, Vec<u32>)> {
    let t = text.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits = digits.replace('_', "");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            "seed",
            "a",
            format!("`{text}` is not a decimal integer"),
        ));
    }
    let mut words: Vec<u32> = vec![0];
    for d in digits.bytes() {
        let mut carry = (d - b'0') as u64;
        for w in words.iter_mut() {
            let v = *w as u64 * 10 + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            words.push(carry as u32);
        }
    }
    Ok((neg, words))
}

/// Little-endian u32 words to a decimal string (repeated division by 10^9).
pub fn words_to_decimal(words: &[u32]) -> String {
    let mut w: Vec<u32> = words.to_vec();
    while w.last() == Some(&0) {
        w.pop();
    }
    if w.is_empty() {
        return "0".to_string();
    }
    let mut chunks = Vec::new();
    while !w.is_empty() {
        let mut rem = 0u64;
        for x in w.iter_mut().rev() {
            let cur = rem << 32 | *x as u64;
            *x = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem as u32);
        while w.last() == Some(&0) {
            w.pop();
        }
    }
    let mut s = chunks.pop().unwrap_or(0).to_string();
    for c in chunks.iter().rev() {
        s.push_str(&format!("{c:09}"));
    }
    s
}

/// `seed(version=1)`'s string hash over code points.
fn seed_v1_hash(cps: &[u64]) -> u64 {
    let mut x: u64 = cps.first().map_or(0, |&c| c << 7);
    for &c in cps {
        x = 1_000_003u64.wrapping_mul(x) ^ c;
    }
    x ^ cps.len() as u64
}

/// The C library's functions CPython's `math` module calls (glibc on Linux).
mod pylibm {
    unsafe extern "C" {
        pub safe fn log(x: f64) -> f64;
        pub safe fn exp(x: f64) -> f64;
        pub safe fn pow(x: f64, y: f64) -> f64;
        pub safe fn cos(x: f64) -> f64;
        pub safe fn acos(x: f64) -> f64;
        pub safe fn fmod(x: f64, y: f64) -> f64;
        pub safe fn log2(x: f64) -> f64;
    }
}

/// CPython's `math.lgamma` for `x > 0` (`m_lgamma` in `mathmodule.c`: Lanczos' sum with
/// g = 6.024680040776729583740234375, N = 13), which differs from the C library's `lgamma`
/// in the last bits. Non-positive integers give infinity, as CPython's C function does.
fn py_lgamma(x: f64) -> f64 {
    const G: f64 = 6.024680040776729583740234375;
    #[allow(clippy::excessive_precision)]
    const NUM: [f64; 13] = [
        23531376880.410759688572007674451636754734846804940,
        42919803642.649098768957899047001988850926355848959,
        35711959237.355668049440185451547166705960488635843,
        17921034426.037209699919755754458931112671403265390,
        6039542586.3520280050642916443072979210699388420708,
        1439720407.3117216736632230727949123939715485786772,
        248874557.86205415651146038641322942321632125127801,
        31426415.585400194380614231628318205362874684987640,
        2876370.6289353724412254090516208496135991145378768,
        186056.26539522349504029498971604569928220784236328,
        8071.6720023658162106380029022722506138218516325024,
        210.82427775157934587250973392071336271166969580291,
        2.5066282746310002701649081771338373386264310793408,
    ];
    const DEN: [f64; 13] = [
        0.0,
        39916800.0,
        120543840.0,
        150917976.0,
        105258076.0,
        45995730.0,
        13339535.0,
        2637558.0,
        357423.0,
        32670.0,
        1925.0,
        66.0,
        1.0,
    ];
    if !x.is_finite() {
        return if x.is_nan() { x } else { f64::INFINITY };
    }
    if x == x.floor() && x <= 2.0 {
        return if x <= 0.0 { f64::INFINITY } else { 0.0 };
    }
    let absx = x.abs();
    if absx < 1e-20 {
        return -pylibm::log(absx);
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    if absx < 5.0 {
        for i in (0..13).rev() {
            num = num * absx + NUM[i];
            den = den * absx + DEN[i];
        }
    } else {
        for i in 0..13 {
            num = num / absx + NUM[i];
            den = den / absx + DEN[i];
        }
    }
    let mut r = pylibm::log(num / den) - G;
    r += (absx - 0.5) * (pylibm::log(absx + G - 0.5) - 1.0);
    r
}

/// Python's float `x % y` (the result takes the sign of `y`).
fn py_mod(x: f64, y: f64) -> f64 {
    let m = pylibm::fmod(x, y);
    if m != 0.0 {
        if (y < 0.0) != (m < 0.0) { m + y } else { m }
    } else {
        0.0f64.copysign(y)
    }
}

/// Python's float `x ** y` for the cases `random` reaches: `pow` from the C library, with
/// CPython's errors (zero to a negative power, overflow).
fn py_pow(op: &'static str, x: f64, y: f64) -> Result<f64> {
    if y == 0.0 || x == 1.0 {
        return Ok(1.0);
    }
    if x == 0.0 && y < 0.0 {
        return Err(invalid(op, "x", "0.0 cannot be raised to a negative power"));
    }
    let r = pylibm::pow(x, y);
    if r.is_infinite() && x.is_finite() && y.is_finite() {
        return Err(invalid(
            op,
            "x",
            "OverflowError: (34, 'Numerical result out of range')",
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        type Row = (
            [f64; 3],
            u64,
            [i64; 5],
            [i32; 10],
            char,
            [usize; 5],
            f64,
            [f64; 2],
            f64,
        );
        let rows: [(u64, Row); 2] = [
            (
                0,
                (
                    [0.8444218515250481, 0.7579544029403025, 0.420571580830845],
                    1112038970,
                    [66, 63, 52, 39, 62],
                    [9, 4, 8, 6, 0, 1, 7, 2, 3, 5],
                    'c',
                    [12, 93, 9, 87, 42],
                    -0.055714569094573285,
                    [0.8606160946297771, 0.6310860668939006],
                    2.186825905429364,
                ),
            ),
            (
                42,
                (
                    [
                        0.6394267984578837,
                        0.025010755222666936,
                        0.27502931836911926,
                    ],
                    958682846,
                    [18, 95, 14, 87, 95],
                    [3, 2, 4, 9, 5, 7, 0, 6, 1, 8],
                    'e',
                    [25, 91, 83, 89, 69],
                    -0.16096035807668252,
                    [-0.7666888024097388, 0.2533316163983756],
                    -1.0112200444941262,
                ),
            ),
        ];
        for (seed, want) in rows {
            let mut r = Random::from_u64(seed);
            let a = [r.random(), r.random(), r.random()];
            assert_eq!(a, want.0);
            assert_eq!(r.getrandbits(32).unwrap(), want.1);
            let ints: Vec<i64> = (0..5).map(|_| r.randint(1, 100).unwrap()).collect();
            assert_eq!(ints, want.2);
            let mut v: Vec<i32> = (0..10).collect();
            r.shuffle(&mut v);
            assert_eq!(v, want.3);
            let letters: Vec<char> = "abcdef".chars().collect();
            assert_eq!(*r.choice(&letters).unwrap(), want.4);
            assert_eq!(r.sample_indices(100, 5).unwrap(), want.5);
            assert_eq!(r.uniform(-1.0, 1.0), want.6);
            assert_eq!([r.gauss(0.0, 1.0), r.gauss(0.0, 1.0)], want.7);
            assert_eq!(r.normalvariate(0.0, 1.0), want.8);
        }
        assert_eq!(Random::from_str_seed("hello").random(), 0.3537754404730722);
        assert_eq!(Random::from_i64(-42).random(), 0.6394267984578837);
        assert_eq!(
            Random::from_decimal("-42").unwrap().random(),
            0.6394267984578837
        );
    }

    #[test]
    fn big_ints() {
        let (neg, w) = decimal_to_words("-18446744073709563961").unwrap();
        assert!(neg);
        assert_eq!(w, [12345, 0, 1]);
        assert_eq!(words_to_decimal(&w), "18446744073709563961");
        assert_eq!(words_to_decimal(&[]), "0");
        assert!(decimal_to_words("12a").is_err());
        assert_eq!(py_float_hash(-3.5), -1152921504606846979);
        assert_eq!(py_float_hash(1.5), 1152921504606846977);
        assert_eq!(py_float_hash(-1.0), -2);
    }

    #[test]
    fn errors() {
        let mut r = Random::from_u64(1);
        assert!(r.randrange(5, 5, 1).is_err());
        assert!(r.randrange(0, 5, 0).is_err());
        assert!(r.randint(2, 1).is_err());
        assert!(r.choice::<u8>(&[]).is_err());
        assert!(r.sample_indices(3, 4).is_err());
        assert!(r.getrandbits(65).is_err());
        assert!(r.expovariate(0.0).is_err());
        assert!(r.choices_indices(2, Some(&[0.0, 0.0]), 1).is_err());
        let mut st = r.getstate();
        st.pos = 625;
        assert!(r.setstate(&st).is_err());
        assert!(PyState::from_tuple(3, &[0; 10], None).is_err());
        assert!(PyState::from_tuple(4, &[0; 625], None).is_err());
        assert!(Random::from_f64(f64::NAN).is_err());
    }
}
