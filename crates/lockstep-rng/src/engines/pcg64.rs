//! PCG64 (XSL-RR 128/64), NumPy's default bit generator `np.random.PCG64`.
//!
//! A 128-bit linear congruential state with an odd increment; each 64-bit output is the
//! XSL-RR permutation of the state *after* the step. 32-bit draws use the two halves of one
//! 64-bit output (low half first) and keep the unused half buffered, exactly as NumPy does.

use core::convert::Infallible;

/// The LCG multiplier used by NumPy (and the PCG reference) for 128-bit states.
pub const MULTIPLIER: u128 = (2_549_297_995_355_413_924u128 << 64) | 4_865_540_595_714_422_341;

/// NumPy's `jumped()` step: `jumps` jumps advance the LCG by `jumps · JUMP_STEP` (mod 2^128),
/// a constant close to 2^128 divided by the golden ratio.
pub const JUMP_STEP: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835;

/// The PCG64 engine: 128-bit state, 128-bit odd increment, and a buffered 32-bit half.
///
/// Guarantees: [`next_u64`](Self::next_u64) equals NumPy 2.x `PCG64.random_raw()`,
/// [`next_u32`](Self::next_u32) equals NumPy's internal 32-bit draw (low half of a fresh
/// output, then the buffered high half), for the same `(state, inc)`; see
/// [`crate::compat::numpy::SeedSequence`] for seeding like `PCG64(seed)`. The stream never
/// changes between lockstep versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pcg64 {
    state: u128,
    inc: u128,
    /// The high half of the last 64-bit output, not yet used by a 32-bit draw.
    pending: Option<u32>,
}

#[inline(always)]
fn output(state: u128) -> u64 {
    let hi = (state >> 64) as u64;
    let lo = state as u64;
    (hi ^ lo).rotate_right((hi >> 58) as u32)
}

/// `(x >> 11)·2^-53`; the shifted value fits in i64, whose conversion is one instruction.
#[inline(always)]
fn u53_to_f64(x: u64) -> f64 {
    ((x >> 11) as i64) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// `(m, a)` with `step^delta(s) = m·s + a` for the LCG `s -> MULTIPLIER·s + inc`
/// (square-and-multiply on the affine map).
fn affine_power(inc: u128, delta: u128) -> (u128, u128) {
    let (mut acc_mul, mut acc_add) = (1u128, 0u128);
    let (mut cur_mul, mut cur_add) = (MULTIPLIER, inc);
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

impl Pcg64 {
    /// The reference `pcg_setseq_128_srandom_r(initstate, initseq)`: `inc = 2·initseq + 1`,
    /// one step from state 0, add `initstate`, one more step. This is what NumPy does with the
    /// four 64-bit words its `SeedSequence` generates.
    pub fn new(initstate: u128, initseq: u128) -> Self {
        let inc = (initseq << 1) | 1;
        let mut s = Self {
            state: 0,
            inc,
            pending: None,
        };
        s.step();
        s.state = s.state.wrapping_add(initstate);
        s.step();
        s
    }

    /// An engine with exactly this LCG state and increment (NumPy's `state['state']`
    /// dict), no buffered half. Returns `None` if `inc` is even (NumPy cannot produce it).
    pub fn from_parts(state: u128, inc: u128) -> Option<Self> {
        (inc & 1 == 1).then_some(Self {
            state,
            inc,
            pending: None,
        })
    }

    /// As [`from_parts`](Self::from_parts) plus NumPy's `has_uint32`/`uinteger` buffer.
    pub fn from_parts_buffered(state: u128, inc: u128, pending: Option<u32>) -> Option<Self> {
        let mut s = Self::from_parts(state, inc)?;
        s.pending = pending;
        Some(s)
    }

    /// The 128-bit LCG state (NumPy `bit_generator.state['state']['state']`).
    pub fn state(&self) -> u128 {
        self.state
    }

    /// The increment (NumPy `state['state']['inc']`).
    pub fn inc(&self) -> u128 {
        self.inc
    }

    /// The buffered high half (NumPy `has_uint32`/`uinteger`), if any.
    pub fn pending(&self) -> Option<u32> {
        self.pending
    }

    #[inline(always)]
    fn step(&mut self) {
        self.state = self.state.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
    }

    /// The next 64-bit output (NumPy `random_raw()`); leaves the 32-bit buffer alone.
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        output(self.state)
    }

    /// The next 32-bit output: the buffered high half if there is one, otherwise the low
    /// half of a fresh 64-bit output (whose high half is buffered).
    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        if let Some(h) = self.pending.take() {
            return h;
        }
        let v = self.next_u64();
        self.pending = Some((v >> 32) as u32);
        v as u32
    }

    /// A double in `[0, 1)` from the top 53 bits of one 64-bit output (NumPy `next_double`).
    #[inline(always)]
    pub fn next_f64(&mut self) -> f64 {
        u53_to_f64(self.next_u64())
    }

    /// Fills `out` with the next 64-bit outputs; identical to calling
    /// [`next_u64`](Self::next_u64) that many times (the 32-bit buffer is left alone).
    pub fn fill_u64(&mut self, out: &mut [u64]) {
        self.fill_map(out, |x| x);
    }

    /// Fills `out` with doubles, identical to calling [`next_f64`](Self::next_f64) that many
    /// times.
    pub fn fill_f64(&mut self, out: &mut [f64]) {
        self.fill_map(out, u53_to_f64);
    }

    /// As [`fill_f64`](Self::fill_f64), split over the rayon thread pool: the LCG can jump
    /// ahead exactly, so each piece of `out` starts from the state the serial fill would
    /// reach there. The values and the final state are the same at any thread count.
    pub fn par_fill_f64(&mut self, out: &mut [f64]) {
        use rayon::prelude::*;
        const PIECE: usize = 1 << 16;
        if out.len() <= PIECE {
            return self.fill_f64(out);
        }
        let base = self.clone();
        out.par_chunks_mut(PIECE)
            .enumerate()
            .for_each(|(i, piece)| {
                let mut e = base.clone();
                e.skip((i * PIECE) as u128);
                e.fill_f64(piece);
            });
        self.skip(out.len() as u128);
    }

    /// Interleaved LCG lanes, each stepping 4 at a time: the 128-bit multiplies of
    /// successive outputs no longer wait on each other, which roughly halves the time per
    /// output against the one serial chain of `next_u64`.
    #[inline(always)]
    fn fill_map<T>(&mut self, out: &mut [T], f: impl Fn(u64) -> T) {
        // Three lanes measured fastest on x86-64 (four spill registers).
        const LANES: usize = 3;
        let mut chunks = out.chunks_exact_mut(LANES);
        if chunks.len() > 0 {
            let (mul4, add4) = affine_power(self.inc, LANES as u128);
            let mut lane = [0u128; LANES];
            let mut s = self.state;
            for l in &mut lane {
                s = s.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
                *l = s;
            }
            for c in &mut chunks {
                for k in 0..LANES {
                    c[k] = f(output(lane[k]));
                }
                self.state = lane[LANES - 1];
                for l in &mut lane {
                    *l = l.wrapping_mul(mul4).wrapping_add(add4);
                }
            }
        }
        for o in chunks.into_remainder() {
            *o = f(self.next_u64());
        }
    }

    /// Takes the buffered high half, if any (for samplers that draw from a block of
    /// outputs but must keep NumPy's 32-bit buffer semantics).
    pub(crate) fn take_pending(&mut self) -> Option<u32> {
        self.pending.take()
    }

    /// Sets the buffered high half.
    pub(crate) fn set_pending(&mut self, v: u32) {
        self.pending = Some(v);
    }

    /// Moves the LCG by `delta` steps without touching the 32-bit buffer.
    pub(crate) fn skip(&mut self, delta: u128) {
        let (m, a) = affine_power(self.inc, delta);
        self.state = m.wrapping_mul(self.state).wrapping_add(a);
    }

    /// Advances the LCG by `delta` steps (mod 2^128) in O(log delta), as NumPy's
    /// `PCG64.advance(delta)`; like NumPy it also drops the buffered 32-bit half.
    pub fn advance(&mut self, delta: u128) {
        self.skip(delta);
        self.pending = None;
    }

    /// A copy advanced by `jumps · JUMP_STEP` steps, as NumPy's `PCG64.jumped(jumps)`.
    pub fn jumped(&self, jumps: u128) -> Self {
        let mut s = self.clone();
        s.advance(JUMP_STEP.wrapping_mul(jumps));
        s
    }
}

impl rand_core::TryRng for Pcg64 {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(Pcg64::next_u32(self))
    }

    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(Pcg64::next_u64(self))
    }

    /// Little-endian bytes of successive 64-bit outputs.
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let w = Pcg64::next_u64(self).to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        Ok(())
    }
}

impl rand_core::SeedableRng for Pcg64 {
    type Seed = [u8; 32];

    /// `initstate` = little-endian bytes 0..16, `initseq` = bytes 16..32; every seed is valid.
    fn from_seed(seed: [u8; 32]) -> Self {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        a.copy_from_slice(&seed[..16]);
        b.copy_from_slice(&seed[16..]);
        Self::new(u128::from_le_bytes(a), u128::from_le_bytes(b))
    }

    /// NumPy's `PCG64(state)` for the integer seed `state` (through `SeedSequence`).
    fn seed_from_u64(state: u64) -> Self {
        crate::compat::numpy::SeedSequence::from_int(state as u128).pcg64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_matches_steps() {
        let mut a = Pcg64::new(12345, 678);
        let mut b = a.clone();
        for _ in 0..1000 {
            a.next_u64();
        }
        b.advance(1000);
        assert_eq!(a.state(), b.state());
        let mut c = Pcg64::new(1, 2);
        let d = c.clone();
        c.advance(u128::MAX);
        c.next_u64();
        assert_eq!(c.state(), d.state());
    }

    #[test]
    fn fills_match_single_draws() {
        for n in [0, 1, 3, 4, 5, 17, 1000] {
            let mut a = Pcg64::new(99, 7);
            a.next_u32();
            let mut b = a.clone();
            let mut x = vec![0u64; n];
            a.fill_u64(&mut x);
            let y: Vec<u64> = (0..n).map(|_| b.next_u64()).collect();
            assert_eq!(x, y);
            assert_eq!(a, b);
            let mut f = vec![0f64; n];
            a.fill_f64(&mut f);
            let g: Vec<f64> = (0..n).map(|_| b.next_f64()).collect();
            assert_eq!(f, g);
            assert_eq!(a, b);
        }
        let mut a = Pcg64::new(5, 5);
        let mut b = a.clone();
        let mut x = vec![0f64; 300_001];
        a.par_fill_f64(&mut x);
        let mut y = vec![0f64; 300_001];
        b.fill_f64(&mut y);
        assert_eq!(x, y);
        assert_eq!(a, b);
        let mut a = Pcg64::new(3, 4);
        let b = a.clone();
        for _ in 0..10 {
            a.next_u64();
        }
        a.skip(10u128.wrapping_neg());
        assert_eq!(a, b);
    }

    #[test]
    fn u32_uses_low_half_first() {
        let mut a = Pcg64::new(5, 6);
        let mut b = a.clone();
        let v = b.next_u64();
        assert_eq!(a.next_u32(), v as u32);
        assert_eq!(a.next_f64(), b.next_f64());
        assert_eq!(a.next_u32(), (v >> 32) as u32);
    }
}
