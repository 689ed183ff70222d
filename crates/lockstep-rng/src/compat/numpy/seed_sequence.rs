//! NumPy's `SeedSequence`: hashes entropy words into a pool, then expands the pool into
//! seeds for bit generators, and derives independent children with `spawn`.

use crate::engines::Pcg64;
use crate::{Error, Result, invalid};

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;

/// The default (and minimum) pool size, NumPy's `DEFAULT_POOL_SIZE`.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// NumPy 2.x `np.random.SeedSequence`, bit for bit: same pool, same `generate_state`, same
/// children from [`spawn`](Self::spawn) for the same entropy and spawn key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    entropy: Vec<u32>,
    spawn_key: Vec<u128>,
    pool_size: usize,
    n_children_spawned: u128,
    pool: Vec<u32>,
}

/// An integer as 32-bit words, least significant first; 0 is the single word `[0]`.
pub(crate) fn int_words(mut n: u128) -> Vec<u32> {
    let mut w = vec![n as u32];
    n >>= 32;
    while n > 0 {
        w.push(n as u32);
        n >>= 32;
    }
    w
}

/// The number of words [`int_words`] gives for `n`.
fn int_word_count(n: u128) -> usize {
    (128 - n.leading_zeros() as usize).div_ceil(32).max(1)
}

/// Input words of [`mix_pool`] kept on the stack up to this many: a seed's words padded to the
/// pool and a spawn key of a few integers (invariant seeding builds one pool per sample key)
/// cost no heap allocation. Speed only: longer inputs give the same pool from the heap.
const STACK_WORDS: usize = 24;

/// NumPy's pool for `entropy` and `spawn_key`, `pool.len()` words: the input words (the
/// entropy, zero-padded to the pool size when there is a spawn key, then each key integer's
/// [`int_words`]) hashed into the pool, mixed all to all, then the words past the pool size
/// mixed into every pool word.
fn mix_pool(entropy: &[u32], spawn_key: &[u128], pool: &mut [u32]) {
    let pool_size = pool.len();
    let padded = if !spawn_key.is_empty() && entropy.len() < pool_size {
        pool_size
    } else {
        entropy.len()
    };
    let len = padded + spawn_key.iter().map(|&k| int_word_count(k)).sum::<usize>();
    let (mut stack, mut heap) = ([0u32; STACK_WORDS], Vec::new());
    let words: &mut [u32] = if len <= STACK_WORDS {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    // The padding between the entropy and the key stays zero.
    words[..entropy.len()].copy_from_slice(entropy);
    let mut at = padded;
    for &k in spawn_key {
        let c = int_word_count(k);
        for (j, w) in words[at..at + c].iter_mut().enumerate() {
            *w = (k >> (32 * j)) as u32;
        }
        at += c;
    }
    let words = &*words;
    let mut h = INIT_A;
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(words.get(i).copied().unwrap_or(0), &mut h);
    }
    for src in 0..pool_size {
        for dst in 0..pool_size {
            if src != dst {
                let m = hashmix(pool[src], &mut h);
                pool[dst] = mix(pool[dst], m);
            }
        }
    }
    for &w in words.iter().skip(pool_size) {
        for dst in 0..pool_size {
            let m = hashmix(w, &mut h);
            pool[dst] = mix(pool[dst], m);
        }
    }
}

fn hashmix(v: u32, h: &mut u32) -> u32 {
    let mut v = v ^ *h;
    *h = h.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*h);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L
        .wrapping_mul(x)
        .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

impl SeedSequence {
    /// `SeedSequence(n)` for a non-negative integer `n` (any value up to 2^128 − 1).
    pub fn from_int(n: u128) -> Self {
        Self::from_words(int_words(n))
    }

    /// `SeedSequence([n0, n1, ...])`: the words of each integer, concatenated. Errors on an
    /// empty list (NumPy cannot concatenate nothing either).
    pub fn from_ints(ns: &[u128]) -> Result<Self> {
        if ns.is_empty() {
            return Err(invalid(
                "SeedSequence",
                "entropy",
                "an empty list of integers",
            ));
        }
        Ok(Self::from_words(
            ns.iter().flat_map(|&n| int_words(n)).collect(),
        ))
    }

    /// `SeedSequence(np.array(words, dtype=np.uint32))`: the words are the entropy as is.
    pub fn from_words(entropy: Vec<u32>) -> Self {
        Self::build(entropy, Vec::new(), DEFAULT_POOL_SIZE)
    }

    /// The general constructor: `SeedSequence(entropy, spawn_key=spawn_key,
    /// pool_size=pool_size)` with the entropy already as words. Errors if
    /// `pool_size < 4`.
    pub fn new(entropy: Vec<u32>, spawn_key: Vec<u128>, pool_size: usize) -> Result<Self> {
        if pool_size < DEFAULT_POOL_SIZE {
            return Err(invalid(
                "SeedSequence",
                "pool_size",
                format!("must be at least {DEFAULT_POOL_SIZE}, got {pool_size}"),
            ));
        }
        Ok(Self::build(entropy, spawn_key, pool_size))
    }

    /// `SeedSequence(seed, spawn_key=spawn_key)` for a non-negative integer seed (NumPy's
    /// words of `seed`, the default pool size): the constructor of [`crate::StreamKey`].
    pub(crate) fn from_seed_and_key(seed: u64, spawn_key: Vec<u128>) -> Self {
        Self::build(int_words(u128::from(seed)), spawn_key, DEFAULT_POOL_SIZE)
    }

    fn build(entropy: Vec<u32>, spawn_key: Vec<u128>, pool_size: usize) -> Self {
        let mut pool = vec![0; pool_size];
        mix_pool(&entropy, &spawn_key, &mut pool);
        Self {
            entropy,
            spawn_key,
            pool_size,
            n_children_spawned: 0,
            pool,
        }
    }

    /// The entropy words (NumPy's `entropy` converted to uint32 words).
    pub fn entropy_words(&self) -> &[u32] {
        &self.entropy
    }

    /// NumPy's `spawn_key`.
    pub fn spawn_key(&self) -> &[u128] {
        &self.spawn_key
    }

    /// NumPy's `pool_size`.
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }

    /// NumPy's `n_children_spawned`.
    pub fn n_children_spawned(&self) -> u128 {
        self.n_children_spawned
    }

    /// NumPy's `pool` (the mixed entropy).
    pub fn pool(&self) -> &[u32] {
        &self.pool
    }

    /// `generate_state(n_words)` (dtype uint32).
    pub fn generate_state_u32(&self, n_words: usize) -> Vec<u32> {
        let mut h = INIT_B;
        (0..n_words)
            .map(|i| {
                let mut v = self.pool[i % self.pool_size] ^ h;
                h = h.wrapping_mul(MULT_B);
                v = v.wrapping_mul(h);
                v ^ (v >> XSHIFT)
            })
            .collect()
    }

    /// `generate_state(n_words, dtype=np.uint64)`: `2·n_words` uint32 words paired
    /// little-endian.
    pub fn generate_state_u64(&self, n_words: usize) -> Vec<u64> {
        self.generate_state_u32(2 * n_words)
            .chunks_exact(2)
            .map(|w| w[0] as u64 | (w[1] as u64) << 32)
            .collect()
    }

    /// `spawn(n)`: children whose spawn key is this key plus `(i,)`, numbered on from earlier
    /// spawns.
    pub fn spawn(&mut self, n: usize) -> Vec<SeedSequence> {
        let start = self.n_children_spawned;
        self.n_children_spawned += n as u128;
        (0..n as u128)
            .map(|i| {
                let mut key = self.spawn_key.clone();
                key.push(start + i);
                Self::build(self.entropy.clone(), key, self.pool_size)
            })
            .collect()
    }

    /// `np.random.PCG64(self)`: seeds PCG64 from `generate_state(4, uint64)`.
    pub fn pcg64(&self) -> Pcg64 {
        let w = self.generate_state_u64(4);
        Pcg64::new(
            (w[0] as u128) << 64 | w[1] as u128,
            (w[2] as u128) << 64 | w[3] as u128,
        )
    }

    /// Parses a seed as the CLI and configs write it: a decimal or `0x` hex integer in
    /// `[0, 2^128)`, or a comma-separated list of them.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| -> Error { invalid("SeedSequence", "entropy", why) };
        let parts: Vec<&str> = text
            .trim()
            .trim_start_matches(['[', '('])
            .trim_end_matches([']', ')'])
            .split(',')
            .map(str::trim)
            .collect();
        let mut ns = Vec::with_capacity(parts.len());
        for p in &parts {
            let n = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
                u128::from_str_radix(h, 16)
            } else {
                p.parse::<u128>()
            };
            ns.push(n.map_err(|e| bad(format!("`{p}` is not an integer in [0, 2^128): {e}")))?);
        }
        if parts.len() == 1 && !text.contains(',') && !text.trim().starts_with('[') {
            Ok(Self::from_int(ns[0]))
        } else {
            Self::from_ints(&ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_pools_and_states() {
        let s = SeedSequence::from_int(0);
        assert_eq!(s.pool(), [4265667335, 1328953910, 1320288413, 3365567143]);
        assert_eq!(
            s.generate_state_u32(4),
            [2968811710, 3677149159, 745650761, 2884920346]
        );
        let s = SeedSequence::from_int(42);
        assert_eq!(s.pool(), [1662858758, 128880814, 1875164712, 753753205]);
        assert_eq!(
            s.generate_state_u32(4),
            [3444837047, 2669555309, 2046530742, 3581440988]
        );
    }

    #[test]
    fn pcg64_known_answers() {
        let mut p = SeedSequence::from_int(0).pcg64();
        assert_eq!(p.state(), 35399562948360463058890781895381311971);
        assert_eq!(p.inc(), 87136372517582989555478159403783844777);
        assert_eq!(p.next_u64(), 11749869230777074271);
        assert_eq!(p.next_u64(), 4976686463289251617);
        let mut p = SeedSequence::from_int(42).pcg64();
        assert_eq!(p.state(), 274674114334540486603088602300644985544);
        assert_eq!(p.inc(), 332724090758049132448979897138935081983);
        assert_eq!(p.next_u64(), 14276969152011380360);
        assert_eq!(p.next_u64(), 8095878257575067585);
    }

    /// The word counts `mix_pool` sizes its buffer from (NumPy's: at least one word per
    /// integer). Its pools on both sides of `STACK_WORDS` are checked against NumPy in
    /// `tests/compat_python_numpy.rs` (`numpy_seed_sequences_of_many_words`).
    #[test]
    fn int_word_counts() {
        assert_eq!(int_word_count(0), 1);
        assert_eq!(int_word_count(1 << 32), 2);
        assert_eq!(int_word_count(u128::MAX), 4);
    }

    #[test]
    fn parse_and_errors() {
        assert_eq!(
            SeedSequence::parse("42").unwrap(),
            SeedSequence::from_int(42)
        );
        assert_eq!(
            SeedSequence::parse("1,2").unwrap(),
            SeedSequence::from_ints(&[1, 2]).unwrap()
        );
        assert!(SeedSequence::parse("-1").is_err());
        assert!(SeedSequence::new(vec![1], vec![], 3).is_err());
        assert!(SeedSequence::from_ints(&[]).is_err());
    }
}
