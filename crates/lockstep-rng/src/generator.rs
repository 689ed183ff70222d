//! [`Generator`]: PyTorch's CPU generator (MT19937 plus its cached normal), and the process-wide
//! default generator behind `lockstep::manual_seed`.

use crate::engines::{Mt19937, mt19937::N};
use crate::error::{Error, Result};
use core::convert::Infallible;
use std::sync::{Mutex, OnceLock};

/// Size in bytes of PyTorch's serialized CPU generator state (`torch.get_rng_state()`).
pub const STATE_SIZE: usize = 5056;

/// A random generator that draws exactly what PyTorch's CPU `torch.Generator` draws.
///
/// It is an MT19937 engine seeded as PyTorch seeds it (only the low 32 bits of the seed reach
/// the engine; all 64 are kept for [`initial_seed`](Self::initial_seed)), plus the cached
/// second value of the scalar Box–Muller normal sampler, which PyTorch also keeps in the
/// generator and saves in its state.
///
/// Guarantees:
/// * same seed ⇒ same stream, on every platform and in every lockstep version;
/// * [`get_state`](Self::get_state) writes PyTorch's 5056-byte layout, so bytes from
///   `torch.get_rng_state()` load with [`set_state`](Self::set_state) and the other way round.
#[derive(Clone, Debug, PartialEq)]
pub struct Generator {
    engine: Mt19937,
    seed: u64,
    /// The second value of the last scalar Box–Muller pair, if not yet used.
    normal_cache: Option<f64>,
}

impl Default for Generator {
    fn default() -> Self {
        Self::new()
    }
}

impl Generator {
    /// The seed of a fresh `torch.Generator()`: 67280421310721.
    pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

    /// A generator seeded like a fresh `torch.Generator()` (with [`Self::DEFAULT_SEED`]).
    pub fn new() -> Self {
        Self::with_seed(Self::DEFAULT_SEED)
    }

    /// A generator after `manual_seed(seed)`.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            engine: Mt19937::from_seed_u32(seed as u32),
            seed,
            normal_cache: None,
        }
    }

    /// Reseeds, as `Generator.manual_seed`: resets the engine from the low 32 bits of `seed`
    /// and clears the cached normal. A negative Python seed `s` corresponds to `s as u64`.
    pub fn manual_seed(&mut self, seed: u64) -> &mut Self {
        *self = Self::with_seed(seed);
        self
    }

    /// Reseeds from 64 bits of OS entropy and returns the seed, as `Generator.seed()`.
    pub fn seed(&mut self) -> Result<u64> {
        let seed = os_seed("Generator::seed")?;
        self.manual_seed(seed);
        Ok(seed)
    }

    /// The seed given to the last `manual_seed` (or drawn by [`seed`](Self::seed)).
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// The next raw 32-bit engine output (PyTorch's `random()`).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.engine.next_u32()
    }

    /// Two outputs as `(first << 32) | second` (PyTorch's `random64()`).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.engine.next_u64_hi_lo()
    }

    /// Fills `out` with the next raw outputs; same as repeated [`next_u32`](Self::next_u32).
    pub fn fill_u32(&mut self, out: &mut [u32]) {
        self.engine.fill_u32(out)
    }

    /// [`fill_u32`](Self::fill_u32)'s words before tempering (see
    /// `Mt19937::fill_untempered`); the engine advances the same.
    pub(crate) fn fill_untempered(&mut self, out: &mut [u32]) {
        self.engine.fill_untempered(out)
    }

    /// A double in `[0, 1)` from 53 bits of one [`next_u64`](Self::next_u64):
    /// `(u64 & (2^53 − 1)) · 2^-53`.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() & ((1 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A float in `[0, 1)` from 24 bits of one [`next_u32`](Self::next_u32):
    /// `(u32 & (2^24 − 1)) · 2^-24`.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() & 0xFF_FFFF) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    pub(crate) fn take_normal_cache(&mut self) -> Option<f64> {
        self.normal_cache.take()
    }

    pub(crate) fn set_normal_cache(&mut self, z: f64) {
        self.normal_cache = Some(z);
    }

    /// The engine, for code that wants raw MT19937 words.
    pub fn engine(&self) -> &Mt19937 {
        &self.engine
    }

    /// The state in PyTorch's 5056-byte CPU layout (`torch.get_rng_state()`).
    pub fn get_state(&self) -> Vec<u8> {
        let mut b = vec![0u8; STATE_SIZE];
        let (left, next) = self.engine.torch_parts();
        b[0..8].copy_from_slice(&self.seed.to_le_bytes());
        b[8..12].copy_from_slice(&(left as i32).to_le_bytes());
        b[12..16].copy_from_slice(&1i32.to_le_bytes());
        b[16..24].copy_from_slice(&(next as u64).to_le_bytes());
        for (i, w) in self.engine.state().iter().enumerate() {
            let o = 24 + 8 * i;
            b[o..o + 8].copy_from_slice(&(*w as u64).to_le_bytes());
        }
        if let Some(z) = self.normal_cache {
            b[5024..5032].copy_from_slice(&z.to_le_bytes());
            b[5040..5044].copy_from_slice(&1i32.to_le_bytes());
        }
        b
    }

    /// Loads a state in PyTorch's layout (`torch.set_rng_state`). Rejects a wrong size, an
    /// unseeded state, `left` outside `1..=624`, `next > 624`, or a cache flag other than 0/1,
    /// leaving `self` unchanged. State words are truncated to 32 bits and padding is ignored,
    /// as PyTorch does.
    pub fn set_state(&mut self, bytes: &[u8]) -> Result<()> {
        const OP: &str = "set_state";
        let bad = |reason: String| Error::InvalidState { op: OP, reason };
        if bytes.len() != STATE_SIZE {
            return Err(bad(format!(
                "expected {STATE_SIZE} bytes (PyTorch's CPU generator layout), got {}",
                bytes.len()
            )));
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
        let i32_at = |o: usize| i32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
        let seed = u64_at(0);
        let left = i32_at(8);
        let seeded = i32_at(12);
        let next = u64_at(16);
        if seeded != 1 {
            return Err(bad(format!("`seeded` must be 1, got {seeded}")));
        }
        if !(1..=N as i32).contains(&left) {
            return Err(bad(format!("`left` must be in 1..=624, got {left}")));
        }
        if next > N as u64 {
            return Err(bad(format!("`next` must be at most 624, got {next}")));
        }
        let mut words = [0u32; N];
        for (i, w) in words.iter_mut().enumerate() {
            *w = u64_at(24 + 8 * i) as u32;
        }
        let engine = Mt19937::from_torch_parts(words, left as u32, next as u32).ok_or_else(|| {
            bad(format!(
                "`left` = {left} and `next` = {next} do not describe a position PyTorch can reach"
            ))
        })?;
        let normal_cache = match i32_at(5040) {
            0 => None,
            1 => Some(f64::from_le_bytes(bytes[5024..5032].try_into().unwrap())),
            flag => return Err(bad(format!("normal cache flag must be 0 or 1, got {flag}"))),
        };
        *self = Self {
            engine,
            seed,
            normal_cache,
        };
        Ok(())
    }
}

impl rand_core::TryRng for Generator {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(Generator::next_u32(self))
    }

    /// `(first << 32) | second`, as PyTorch's `random64()`.
    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(Generator::next_u64(self))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        rand_core::TryRng::try_fill_bytes(&mut self.engine, dst)
    }
}

impl rand_core::SeedableRng for Generator {
    type Seed = [u8; 8];

    /// `manual_seed` with the little-endian `u64`.
    fn from_seed(seed: [u8; 8]) -> Self {
        Self::with_seed(u64::from_le_bytes(seed))
    }

    /// Exactly `manual_seed(state)`.
    fn seed_from_u64(state: u64) -> Self {
        Self::with_seed(state)
    }
}

/// 64 bits from the operating system's entropy source.
pub fn os_seed(op: &'static str) -> Result<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| Error::Entropy {
        op,
        reason: e.to_string(),
    })?;
    Ok(u64::from_le_bytes(b))
}

static DEFAULT: OnceLock<Mutex<Generator>> = OnceLock::new();

/// The default CPU generator (PyTorch's `torch.default_generator`), locked for the caller.
///
/// At first use it is seeded from OS entropy, as PyTorch's is at process start (falling back
/// to [`Generator::DEFAULT_SEED`] if the OS has no entropy to give). Hold the guard for the
/// whole of a multi-draw operation so that no other thread's draw lands in the middle — but
/// do not call anything that draws from the default generator itself while holding it (such
/// as `Tensor::randn(.., None)`): locking it again from the same thread panics with a message
/// saying so (it used to deadlock); [`try_default_generator`] returns that as an error.
pub fn default_generator() -> crate::GlobalGuard<Generator> {
    crate::global::lock_global_or_panic(default_mutex(), "default_generator")
}

/// [`default_generator`], or an error if this thread already holds its guard (instead of
/// waiting forever).
///
/// # Errors
/// [`Error::InvalidArgument`] if the calling thread already holds the guard.
pub fn try_default_generator() -> Result<crate::GlobalGuard<Generator>> {
    crate::global::lock_global(default_mutex(), "default_generator")
}

fn default_mutex() -> &'static Mutex<Generator> {
    DEFAULT.get_or_init(|| {
        Mutex::new(Generator::with_seed(
            os_seed("default_generator").unwrap_or(Generator::DEFAULT_SEED),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_layout_known_answers() {
        // torch.md §1.5: manual_seed(0) and manual_seed(42) state prefixes.
        let s = Generator::with_seed(0).get_state();
        assert_eq!(s.len(), STATE_SIZE);
        assert_eq!(
            &s[0..24],
            &[
                0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        let s = Generator::with_seed(42).get_state();
        assert_eq!(&s[0..8], &42u64.to_le_bytes());
        assert_eq!(&s[24..32], &42u64.to_le_bytes());
    }

    #[test]
    fn state_round_trip_and_rejections() {
        let mut g = Generator::with_seed(3);
        for _ in 0..700 {
            g.next_u32();
        }
        g.set_normal_cache(0.25);
        let bytes = g.get_state();
        let mut h = Generator::new();
        h.set_state(&bytes).unwrap();
        assert_eq!(g, h);
        assert_eq!(g.next_u64(), h.next_u64());

        let before = h.clone();
        assert!(h.set_state(&bytes[..100]).is_err());
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&0i32.to_le_bytes());
        assert!(h.set_state(&bad).is_err());
        let mut bad = bytes.clone();
        bad[12..16].copy_from_slice(&0i32.to_le_bytes());
        assert!(h.set_state(&bad).is_err());
        let mut bad = bytes;
        bad[5040..5044].copy_from_slice(&7i32.to_le_bytes());
        let err = h.set_state(&bad).unwrap_err();
        assert!(err.to_string().contains("cache flag"), "{err}");
        assert_eq!(h, before);
    }

    #[test]
    fn raw_known_answers() {
        // torch.md §14: first raw u32 and u64 for seeds 0 and 42.
        let mut g = Generator::with_seed(0);
        let w: Vec<u32> = (0..4).map(|_| g.next_u32()).collect();
        assert_eq!(w, [2357136044, 2546248239, 3071714933, 3626093760]);
        let mut g = Generator::with_seed(42);
        assert_eq!(g.next_u64(), 6909045637428952499);
        assert_eq!(g.next_u64(), 17537583593393853710);
        // Seeds equal mod 2^32 give the same stream, but keep their own initial_seed.
        let (a, b) = (Generator::with_seed(7), Generator::with_seed((1 << 32) + 7));
        assert_eq!(a.engine(), b.engine());
        assert_eq!(b.initial_seed(), (1 << 32) + 7);
    }
}
