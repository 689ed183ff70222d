//! NumPy's other bit generators, bit for bit with NumPy 2.4: `MT19937` (seeded through
//! `SeedSequence`), `PCG64DXSM`, `Philox` (NumPy's 4×64, 10 rounds) and `SFC64`, with their
//! `random_raw`, `state`, `advance`/`jumped` (where NumPy has them) and seeding. Each can drive
//! a [`Generator`](super::Generator): `Generator::<Sfc64>::from_seed_seq(...)` or
//! [`Generator::with_bit_generator`](super::Generator::with_bit_generator).
//!
//! 32-bit draws follow NumPy's rule for 64-bit generators (the low half of a fresh output,
//! then the buffered high half); doubles are `(u64 >> 11)·2^-53`, except for MT19937, whose
//! doubles take two 32-bit words and whose 64-bit draws are `(first << 32) | second`.

use super::{Bits, SeedSequence};
use crate::engines::Mt19937;
use crate::engines::mt19937::N;

/// A NumPy bit generator that a [`Generator`](super::Generator) can run on.
pub trait BitGenerator: Bits + Clone + std::fmt::Debug + sealed::Sealed {
    /// NumPy's class name (`state['bit_generator']`).
    const NAME: &'static str;
    /// `BitGenerator(seed_seq)`: the state NumPy derives from a `SeedSequence`.
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self;
    /// `random_raw()`: one raw output (a 32-bit word for MT19937, else 64 bits).
    fn random_raw(&mut self) -> u64;
    /// Fills `out` with doubles, as repeated `next_double` (PCG64 overrides this with its
    /// parallel jump-ahead fill).
    #[doc(hidden)]
    fn fill_f64(&mut self, out: &mut [f64]) {
        for o in out {
            *o = self.f64();
        }
    }
    /// Fills `out` with ziggurat normals, `loc + scale·z` when `loc_scale` is given (PCG64
    /// overrides this with block draws).
    #[doc(hidden)]
    fn fill_normal(&mut self, out: &mut [f64], loc_scale: Option<(f64, f64)>) {
        for o in out {
            let z = super::ziggurat::normal_f64(self);
            *o = match loc_scale {
                None => z,
                Some((loc, scale)) => loc + scale * z,
            };
        }
    }
    /// Fills `out` with ziggurat exponentials, times `scale` when given.
    #[doc(hidden)]
    fn fill_exponential(&mut self, out: &mut [f64], scale: Option<f64>) {
        for o in out {
            let e = super::ziggurat::exponential_f64(self);
            *o = match scale {
                None => e,
                Some(s) => s * e,
            };
        }
    }
    /// Whether [`fill_raw`](Self::fill_raw) and [`rewind`](Self::rewind) serve block draws
    /// (PCG64; the others draw one output at a time).
    #[doc(hidden)]
    const BLOCKS: bool = false;
    /// Fills `out` with the next 64-bit outputs, as repeated `next_uint64` (only called
    /// when `BLOCKS`).
    #[doc(hidden)]
    fn fill_raw(&mut self, out: &mut [u64]) {
        for o in out {
            *o = self.u64();
        }
    }
    /// Steps back over the last `n` 64-bit outputs (only called when `BLOCKS`).
    #[doc(hidden)]
    fn rewind(&mut self, _n: usize) {}
    /// Takes the buffered high half of a 64-bit output (only called when `BLOCKS`).
    #[doc(hidden)]
    fn take_pending(&mut self) -> Option<u32> {
        None
    }
    /// Sets the buffered high half (only called when `BLOCKS`).
    #[doc(hidden)]
    fn set_pending(&mut self, _v: u32) {}
    /// Whether `RandomState`'s block source may read this generator's 32-bit words ahead
    /// with [`legacy_words`](Self::legacy_words) (MT19937, whose doubles take two words).
    #[doc(hidden)]
    const LEGACY_WORDS: bool = false;
    /// Fills the front of `buf` with the rest of the current block of 32-bit words (a whole
    /// new block when it is used up) and returns how many (only called when `LEGACY_WORDS`).
    #[doc(hidden)]
    fn legacy_words(&mut self, _buf: &mut [u32; N]) -> usize {
        0
    }
    /// Steps back over the last `n` words read by [`legacy_words`](Self::legacy_words)
    /// (only called when `LEGACY_WORDS`).
    #[doc(hidden)]
    fn legacy_unread(&mut self, _n: usize) {}
}

pub(crate) mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::engines::Pcg64 {}
    impl Sealed for crate::engines::Mt19937 {}
    impl Sealed for super::Pcg64Dxsm {}
    impl Sealed for super::Philox {}
    impl Sealed for super::Sfc64 {}
}

#[inline(always)]
fn u53(x: u64) -> f64 {
    ((x >> 11) as i64) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// `(m, a)` with `step^delta(s) = m·s + a` for the LCG `s -> mult·s + inc`.
fn lcg_power(mult: u128, inc: u128, delta: u128) -> (u128, u128) {
    let (mut acc_mul, mut acc_add) = (1u128, 0u128);
    let (mut cur_mul, mut cur_add) = (mult, inc);
    let mut d = delta;
    while d > 0 {
        if d & 1 == 1 {
            acc_mul = acc_mul.wrapping_mul(cur_mul);
            acc_add = acc_add.wrapping_mul(cur_mul).wrapping_add(cur_add);
        }
        cur_add = cur_mul.wrapping_add(1).wrapping_mul(cur_add);
        cur_mul = cur_mul.wrapping_mul(cur_mul);
        d >>= 1;
    }
    (acc_mul, acc_add)
}

/// `np.random.MT19937(seed)`: the legacy engine seeded from `SeedSequence`:
/// `key = [0x80000000] + generate_state(624)[1:]` and `pos = 623`, so the first output is the
/// tempered, untwisted `key[623]`.
impl BitGenerator for Mt19937 {
    const NAME: &'static str = "MT19937";
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self {
        let w = seed_seq.generate_state_u32(N);
        let mut key = [0u32; N];
        key[0] = 0x8000_0000;
        key[1..].copy_from_slice(&w[1..]);
        Mt19937::from_state(key, N - 1).expect("pos 623 is in range")
    }
    fn random_raw(&mut self) -> u64 {
        self.next_u32() as u64
    }
    fn fill_f64(&mut self, out: &mut [f64]) {
        // Whole blocks of words at once: far faster than one `next_u32` per word.
        let mut words = [0u32; 512];
        for chunk in out.chunks_mut(256) {
            let w = &mut words[..2 * chunk.len()];
            self.fill_u32(w);
            for (o, p) in chunk.iter_mut().zip(w.chunks_exact(2)) {
                let (a, b) = (p[0] >> 5, p[1] >> 6);
                *o = (a as f64 * 67_108_864.0 + b as f64) * (1.0 / 9_007_199_254_740_992.0);
            }
        }
    }
    const LEGACY_WORDS: bool = true;
    fn legacy_words(&mut self, buf: &mut [u32; N]) -> usize {
        let used = self.pos();
        let take = if used >= N { N } else { N - used };
        self.fill_u32(&mut buf[..take]);
        take
    }
    fn legacy_unread(&mut self, n: usize) {
        if n > 0 {
            // The words all come from the current block: step back over them.
            *self = Mt19937::from_state(*self.state(), self.pos() - n)
                .expect("a position inside the current block");
        }
    }
}

/// The "cheap multiplier" of PCG64DXSM's LCG and its output mix.
pub const DXSM_MULTIPLIER: u64 = 0xda94_2042_e4dd_58b5;

/// `np.random.PCG64DXSM`: a 128-bit LCG with a 64-bit multiplier; each output is the DXSM
/// mix of the state *before* the step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pcg64Dxsm {
    state: u128,
    inc: u128,
    pending: Option<u32>,
}

impl Pcg64Dxsm {
    /// NumPy's `pcg64_set_seed(initstate, initseq)`, shared with PCG64: the state and
    /// increment PCG64's seeding (with its 128-bit multiplier) would reach; only the later
    /// steps use the cheap multiplier.
    pub fn new(initstate: u128, initseq: u128) -> Self {
        let p = crate::engines::Pcg64::new(initstate, initseq);
        Self {
            state: p.state(),
            inc: p.inc(),
            pending: None,
        }
    }

    /// Exactly this state (`state['state']`), increment and buffered half; `None` if `inc`
    /// is even.
    pub fn from_parts(state: u128, inc: u128, pending: Option<u32>) -> Option<Self> {
        (inc & 1 == 1).then_some(Self {
            state,
            inc,
            pending,
        })
    }

    /// `state['state']['state']`.
    pub fn state(&self) -> u128 {
        self.state
    }
    /// `state['state']['inc']`.
    pub fn inc(&self) -> u128 {
        self.inc
    }
    /// `has_uint32`/`uinteger`.
    pub fn pending(&self) -> Option<u32> {
        self.pending
    }

    #[inline(always)]
    fn step(&mut self) {
        self.state = self
            .state
            .wrapping_mul(DXSM_MULTIPLIER as u128)
            .wrapping_add(self.inc);
    }

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut hi = (self.state >> 64) as u64;
        let lo = self.state as u64 | 1;
        hi ^= hi >> 32;
        hi = hi.wrapping_mul(DXSM_MULTIPLIER);
        hi ^= hi >> 48;
        hi = hi.wrapping_mul(lo);
        self.step();
        hi
    }

    /// `advance(delta)`: the LCG moved by `delta` steps (mod 2^128); drops the buffered half.
    pub fn advance(&mut self, delta: u128) {
        let (m, a) = lcg_power(DXSM_MULTIPLIER as u128, self.inc, delta);
        self.state = m.wrapping_mul(self.state).wrapping_add(a);
        self.pending = None;
    }

    /// `jumped(jumps)`: a copy advanced by `jumps · 0x9e3779b97f4a7c15f39cc0605cedc835`.
    pub fn jumped(&self, jumps: u128) -> Self {
        let mut s = self.clone();
        s.advance(crate::engines::pcg64::JUMP_STEP.wrapping_mul(jumps));
        s
    }
}

impl BitGenerator for Pcg64Dxsm {
    const NAME: &'static str = "PCG64DXSM";
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self {
        let w = seed_seq.generate_state_u64(4);
        Self::new(
            (w[0] as u128) << 64 | w[1] as u128,
            (w[2] as u128) << 64 | w[3] as u128,
        )
    }
    fn random_raw(&mut self) -> u64 {
        self.next_u64()
    }
}

/// `np.random.SFC64`: Chris Doty-Humphrey's small fast chaotic generator (256-bit state,
/// the last word a counter), seeded from three `SeedSequence` words and 12 warm-up rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sfc64 {
    s: [u64; 4],
    pending: Option<u32>,
}

impl Sfc64 {
    /// `sfc64_set_seed`: `(a, b, c) = seed`, counter 1, 12 outputs discarded.
    pub fn new(seed: [u64; 3]) -> Self {
        let mut g = Self {
            s: [seed[0], seed[1], seed[2], 1],
            pending: None,
        };
        for _ in 0..12 {
            g.next_u64();
        }
        g
    }

    /// Exactly this state (`state['state']`, four words) and buffered half.
    pub fn from_parts(s: [u64; 4], pending: Option<u32>) -> Self {
        Self { s, pending }
    }

    /// The four state words.
    pub fn state(&self) -> [u64; 4] {
        self.s
    }
    /// `has_uint32`/`uinteger`.
    pub fn pending(&self) -> Option<u32> {
        self.pending
    }

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let tmp = s[0].wrapping_add(s[1]).wrapping_add(s[3]);
        s[3] = s[3].wrapping_add(1);
        s[0] = s[1] ^ (s[1] >> 11);
        s[1] = s[2].wrapping_add(s[2] << 3);
        s[2] = s[2].rotate_left(24).wrapping_add(tmp);
        tmp
    }
}

impl BitGenerator for Sfc64 {
    const NAME: &'static str = "SFC64";
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self {
        let w = seed_seq.generate_state_u64(3);
        Self::new([w[0], w[1], w[2]])
    }
    fn random_raw(&mut self) -> u64 {
        self.next_u64()
    }
}

/// `np.random.Philox`: Philox 4×64 with 10 rounds (Random123), a 256-bit counter and a
/// 128-bit key; each block of four outputs is the cipher of the incremented counter.
/// [`with_rounds`](Philox::with_rounds) gives Random123's Philox4x64-R for another round
/// count (NumPy itself fixes 10 rounds; there is no NumPy stream to compare those with, only
/// Random123's known answers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Philox {
    ctr: [u64; 4],
    key: [u64; 2],
    buffer: [u64; 4],
    buffer_pos: usize,
    pending: Option<u32>,
    rounds: u32,
}

/// The rounds of NumPy's `Philox` (Random123's default for Philox4x64).
pub const PHILOX_ROUNDS: u32 = 10;

/// The most rounds [`philox4x64`] and [`Philox::with_rounds`] take (Random123's limit).
pub const PHILOX_MAX_ROUNDS: u32 = 16;

const PHILOX_M0: u64 = 0xD2E7_470E_E14C_6C93;
const PHILOX_M1: u64 = 0xCA5A_8263_9512_1157;
const PHILOX_W0: u64 = 0x9E37_79B9_7F4A_7C15;
const PHILOX_W1: u64 = 0xBB67_AE85_84CA_A73B;

#[inline(always)]
fn mulhilo(a: u64, b: u64) -> (u64, u64) {
    let p = a as u128 * b as u128;
    (p as u64, (p >> 64) as u64)
}

/// Random123's Philox4x64-R block function: `rounds` rounds over `counter` with `key` (the
/// key bumped by the Weyl constants between rounds). NumPy's `Philox` is `rounds = 10`.
pub fn philox4x64(counter: [u64; 4], key: [u64; 2], rounds: u32) -> [u64; 4] {
    philox_block(counter, key, rounds)
}

#[inline(always)]
fn philox_block(mut ctr: [u64; 4], mut key: [u64; 2], rounds: u32) -> [u64; 4] {
    for round in 0..rounds {
        if round > 0 {
            key[0] = key[0].wrapping_add(PHILOX_W0);
            key[1] = key[1].wrapping_add(PHILOX_W1);
        }
        let (lo0, hi0) = mulhilo(PHILOX_M0, ctr[0]);
        let (lo1, hi1) = mulhilo(PHILOX_M1, ctr[2]);
        ctr = [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0];
    }
    ctr
}

impl Philox {
    /// `Philox(counter=counter, key=key)`: explicit 256-bit counter and 128-bit key, as
    /// little-endian 64-bit words; no buffered outputs.
    pub fn new(counter: [u64; 4], key: [u64; 2]) -> Self {
        Self {
            ctr: counter,
            key,
            buffer: [0; 4],
            buffer_pos: 4,
            pending: None,
            rounds: PHILOX_ROUNDS,
        }
    }

    /// This generator with `rounds` rounds per block instead of NumPy's 10 (Random123's
    /// Philox4x64-R, e.g. 7); the state is unchanged, buffered outputs included.
    ///
    /// # Errors
    /// If `rounds` is 0 or above [`PHILOX_MAX_ROUNDS`].
    pub fn with_rounds(mut self, rounds: u32) -> crate::Result<Self> {
        if !(1..=PHILOX_MAX_ROUNDS).contains(&rounds) {
            return Err(crate::invalid(
                "Philox",
                "rounds",
                format!("must be in 1..={PHILOX_MAX_ROUNDS}, got {rounds}"),
            ));
        }
        self.rounds = rounds;
        Ok(self)
    }

    /// Rounds per block (10 unless set by [`with_rounds`](Self::with_rounds)).
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// `state['state']['counter']`.
    pub fn counter(&self) -> [u64; 4] {
        self.ctr
    }
    /// `state['state']['key']`.
    pub fn key(&self) -> [u64; 2] {
        self.key
    }
    /// `state['buffer']` and `state['buffer_pos']`.
    pub fn buffer(&self) -> ([u64; 4], usize) {
        (self.buffer, self.buffer_pos)
    }
    /// `has_uint32`/`uinteger`.
    pub fn pending(&self) -> Option<u32> {
        self.pending
    }

    /// Exactly this state (NumPy's `state` setter); `None` if `buffer_pos > 4`.
    pub fn from_parts(
        counter: [u64; 4],
        key: [u64; 2],
        buffer: [u64; 4],
        buffer_pos: usize,
        pending: Option<u32>,
    ) -> Option<Self> {
        (buffer_pos <= 4).then_some(Self {
            ctr: counter,
            key,
            buffer,
            buffer_pos,
            pending,
            rounds: PHILOX_ROUNDS,
        })
    }

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        if self.buffer_pos < 4 {
            let v = self.buffer[self.buffer_pos];
            self.buffer_pos += 1;
            return v;
        }
        for w in &mut self.ctr {
            *w = w.wrapping_add(1);
            if *w != 0 {
                break;
            }
        }
        // NumPy's 10 rounds as a constant, so that the common case stays unrolled.
        self.buffer = if self.rounds == PHILOX_ROUNDS {
            philox_block(self.ctr, self.key, PHILOX_ROUNDS)
        } else {
            philox_block(self.ctr, self.key, self.rounds)
        };
        self.buffer_pos = 1;
        self.buffer[0]
    }

    /// `advance(delta)`: adds `delta` (a 256-bit integer, little-endian words) to the
    /// counter with NumPy's carry rule, and drops the buffered outputs.
    pub fn advance(&mut self, delta: [u64; 4]) {
        let mut carry = false;
        for (c, &d) in self.ctr.iter_mut().zip(&delta) {
            if carry {
                *c = c.wrapping_add(1);
                carry = *c == 0;
            }
            let before = *c;
            *c = c.wrapping_add(d);
            if *c < before && !carry {
                carry = true;
            }
        }
        self.buffer = [0; 4];
        self.buffer_pos = 4;
        self.pending = None;
    }

    /// `jumped(jumps)`: a copy advanced by `jumps · 2^128` (the jump count taken mod 2^128).
    pub fn jumped(&self, jumps: u128) -> Self {
        let mut s = self.clone();
        s.advance([0, 0, jumps as u64, (jumps >> 64) as u64]);
        s
    }
}

impl BitGenerator for Philox {
    const NAME: &'static str = "Philox";
    fn from_seed_seq(seed_seq: &SeedSequence) -> Self {
        let k = seed_seq.generate_state_u64(2);
        Self::new([0; 4], [k[0], k[1]])
    }
    fn random_raw(&mut self) -> u64 {
        self.next_u64()
    }
}

macro_rules! bits_64 {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn u32(&mut self) -> u32 {
                if let Some(h) = self.pending.take() {
                    return h;
                }
                let v = self.next_u64();
                self.pending = Some((v >> 32) as u32);
                v as u32
            }
            #[inline(always)]
            fn u64(&mut self) -> u64 {
                self.next_u64()
            }
            #[inline(always)]
            fn f64(&mut self) -> f64 {
                u53(self.next_u64())
            }
        }
    )*};
}
bits_64!(Pcg64Dxsm, Sfc64, Philox);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_equals_draws() {
        let ss = SeedSequence::from_int(9);
        let mut a = Pcg64Dxsm::from_seed_seq(&ss);
        let mut b = a.clone();
        for _ in 0..1000 {
            a.next_u64();
        }
        b.advance(1000);
        assert_eq!(a, b);
        let mut p = Philox::from_seed_seq(&ss);
        let mut q = p.clone();
        for _ in 0..4 * 7 {
            p.next_u64();
        }
        q.advance([7, 0, 0, 0]);
        assert_eq!(p.counter(), q.counter());
    }
}

/// `MT19937.jumped(jumps)`: a copy of `mt` advanced as if `2^128 · jumps` outputs were
/// drawn, by NumPy's Horner evaluation of the jump polynomial on the state (Haramoto,
/// Matsumoto et al.); equal to NumPy's jumped state word for word.
pub fn mt19937_jumped(mt: &Mt19937, jumps: u64) -> Mt19937 {
    let mut s = JumpState {
        key: *mt.state(),
        pos: mt.pos(),
    };
    for _ in 0..jumps {
        if s.pos >= N {
            s.pos = 0;
        }
        s = horner(&s);
    }
    Mt19937::from_state(s.key, s.pos).expect("pos < 624")
}

/// The 624-word window the jump works on: `pos` is its oldest word.
#[derive(Clone)]
struct JumpState {
    key: [u32; N],
    pos: usize,
}

const MT_M: usize = 397;
const MEXP: usize = 19937;

fn poly_coef(deg: usize) -> bool {
    super::mt19937_jump_poly::JUMP_POLY[deg >> 5] >> (deg & 31) & 1 == 1
}

/// One word of the next lap, in place at `pos` (`gen_next`).
fn gen_next(s: &mut JumpState) {
    const UPPER: u32 = 0x8000_0000;
    const LOWER: u32 = 0x7FFF_FFFF;
    const MATRIX_A: u32 = 0x9908_B0DF;
    let mag = |y: u32| if y & 1 == 1 { MATRIX_A } else { 0 };
    let num = s.pos;
    if num < N - 1 {
        let y = (s.key[num] & UPPER) | (s.key[num + 1] & LOWER);
        let far = if num < N - MT_M {
            s.key[num + MT_M]
        } else {
            s.key[num + MT_M - N]
        };
        s.key[num] = far ^ (y >> 1) ^ mag(y);
        s.pos += 1;
    } else {
        let y = (s.key[N - 1] & UPPER) | (s.key[0] & LOWER);
        s.key[N - 1] = s.key[MT_M - 1] ^ (y >> 1) ^ mag(y);
        s.pos = 0;
    }
}

/// `state1 ^= state2`, each read from its own `pos` (`add_state`).
fn add_state(a: &mut JumpState, b: &JumpState) {
    for i in 0..N {
        a.key[(a.pos + i) % N] ^= b.key[(b.pos + i) % N];
    }
}

/// `pf(state)` by Horner's rule over the jump polynomial (`horner1`).
fn horner(state: &JumpState) -> JumpState {
    let mut i = MEXP - 1;
    while !poly_coef(i) {
        i -= 1;
    }
    let mut temp = state.clone();
    if i > 0 {
        gen_next(&mut temp);
        i -= 1;
        while i > 0 {
            if poly_coef(i) {
                add_state(&mut temp, state);
            }
            gen_next(&mut temp);
            i -= 1;
        }
        if poly_coef(0) {
            add_state(&mut temp, state);
        }
    }
    temp
}
