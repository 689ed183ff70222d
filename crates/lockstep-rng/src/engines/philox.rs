//! Philox4x32-10, the counter-based generator of Salmon et al. (SC'11, "Parallel random
//! numbers: as easy as 1, 2, 3"), as in the Random123 library and PyTorch's CUDA generator.
//!
//! Word `i` of the stream is word `i mod 4` of the block `philox(key, counter0 + i/4)`, so any
//! part of the stream can be computed without the parts before it. The parallel fills below
//! split the output into fixed-size chunks and compute each chunk's counter from its index:
//! the bits never depend on the number of threads or on scheduling.

use core::convert::Infallible;
use rayon::prelude::*;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;
/// Words per parallel work item: a constant, so chunk boundaries depend on the length only.
const CHUNK_WORDS: usize = 1 << 16;

/// The Philox4x32-10 block function: 10 rounds over a 128-bit counter with a 64-bit key.
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    philox4x32(counter, key, 10)
}

/// Random123's Philox4x32-R block function for any round count (`rounds = 7` is Random123's
/// other listed variant, `philox4x32_7`; 10 is [`philox4x32_10`]): `rounds` rounds over a
/// 128-bit counter with a 64-bit key, the key bumped by the Weyl constants between rounds.
#[inline(always)]
pub fn philox4x32(counter: [u32; 4], key: [u32; 2], rounds: u32) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for round in 0..rounds {
        if round > 0 {
            k0 = k0.wrapping_add(W0);
            k1 = k1.wrapping_add(W1);
        }
        let p0 = (M0 as u64) * (c0 as u64);
        let p1 = (M1 as u64) * (c2 as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    [c0, c1, c2, c3]
}

#[inline(always)]
fn words_of(counter: u128) -> [u32; 4] {
    [
        counter as u32,
        (counter >> 32) as u32,
        (counter >> 64) as u32,
        (counter >> 96) as u32,
    ]
}

/// Fills `out` with the stream words starting at block `counter` (whole blocks; `out.len()` is
/// a multiple of 4 except possibly at the very end). Eight blocks at a time so the compiler can
/// keep the lanes in vector registers.
#[inline(always)]
fn blocks_into(out: &mut [u32], counter: u128, key: [u32; 2]) {
    const LANES: usize = 8;
    let mut chunks = out.chunks_exact_mut(4 * LANES);
    let mut ctr = counter;
    for chunk in &mut chunks {
        let mut c = [[0u32; LANES]; 4];
        for l in 0..LANES {
            let w = words_of(ctr.wrapping_add(l as u128));
            for r in 0..4 {
                c[r][l] = w[r];
            }
        }
        let (mut k0, mut k1) = (key[0], key[1]);
        for round in 0..10 {
            if round > 0 {
                k0 = k0.wrapping_add(W0);
                k1 = k1.wrapping_add(W1);
            }
            for l in 0..LANES {
                let p0 = (M0 as u64) * (c[0][l] as u64);
                let p1 = (M1 as u64) * (c[2][l] as u64);
                let n0 = ((p1 >> 32) as u32) ^ c[1][l] ^ k0;
                let n2 = ((p0 >> 32) as u32) ^ c[3][l] ^ k1;
                c[1][l] = p1 as u32;
                c[3][l] = p0 as u32;
                c[0][l] = n0;
                c[2][l] = n2;
            }
        }
        for l in 0..LANES {
            for r in 0..4 {
                chunk[4 * l + r] = c[r][l];
            }
        }
        ctr = ctr.wrapping_add(LANES as u128);
    }
    for block in chunks.into_remainder().chunks_mut(4) {
        let w = philox4x32_10(words_of(ctr), key);
        block.copy_from_slice(&w[..block.len()]);
        ctr = ctr.wrapping_add(1);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{M0, M1, W0, W1, blocks_into};
    use core::arch::x86_64::*;

    /// High and low halves of the 32×32-bit products of the eight lanes of `a` with `m`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mulhilo(a: __m256i, m: __m256i) -> (__m256i, __m256i) {
        let even = _mm256_mul_epu32(a, m);
        let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), m);
        let lo = _mm256_blend_epi32::<0b1010_1010>(even, _mm256_slli_epi64::<32>(odd));
        let hi = _mm256_blend_epi32::<0b1010_1010>(_mm256_srli_epi64::<32>(even), odd);
        (hi, lo)
    }

    /// Eight blocks (counters `ctr .. ctr+8`, whose low words do not wrap) into `out[..32]`,
    /// in stream order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn eight_blocks(out: &mut [u32], ctr: u128, key: [u32; 2]) {
        let w = super::words_of(ctr);
        let mut c0 = _mm256_add_epi32(
            _mm256_set1_epi32(w[0] as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        let mut c1 = _mm256_set1_epi32(w[1] as i32);
        let mut c2 = _mm256_set1_epi32(w[2] as i32);
        let mut c3 = _mm256_set1_epi32(w[3] as i32);
        let (m0, m1) = (_mm256_set1_epi32(M0 as i32), _mm256_set1_epi32(M1 as i32));
        let (mut k0, mut k1) = (key[0], key[1]);
        for round in 0..10 {
            if round > 0 {
                k0 = k0.wrapping_add(W0);
                k1 = k1.wrapping_add(W1);
            }
            let (hi0, lo0) = mulhilo(c0, m0);
            let (hi1, lo1) = mulhilo(c2, m1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(k0 as i32));
            c1 = lo1;
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(k1 as i32));
            c3 = lo0;
        }
        // Transpose the four word-vectors into eight consecutive 4-word blocks.
        let t0 = _mm256_unpacklo_epi32(c0, c1);
        let t1 = _mm256_unpackhi_epi32(c0, c1);
        let t2 = _mm256_unpacklo_epi32(c2, c3);
        let t3 = _mm256_unpackhi_epi32(c2, c3);
        let u0 = _mm256_unpacklo_epi64(t0, t2);
        let u1 = _mm256_unpackhi_epi64(t0, t2);
        let u2 = _mm256_unpacklo_epi64(t1, t3);
        let u3 = _mm256_unpackhi_epi64(t1, t3);
        let p = out.as_mut_ptr().cast::<__m256i>();
        assert!(out.len() >= 32);
        // SAFETY: `out` holds at least 32 words (checked above); stores are unaligned.
        unsafe {
            _mm256_storeu_si256(p, _mm256_permute2x128_si256::<0x20>(u0, u1));
            _mm256_storeu_si256(p.add(1), _mm256_permute2x128_si256::<0x20>(u2, u3));
            _mm256_storeu_si256(p.add(2), _mm256_permute2x128_si256::<0x31>(u0, u1));
            _mm256_storeu_si256(p.add(3), _mm256_permute2x128_si256::<0x31>(u2, u3));
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn blocks(out: &mut [u32], counter: u128, key: [u32; 2]) {
        let mut ctr = counter;
        let mut chunks = out.chunks_exact_mut(32);
        for chunk in &mut chunks {
            if (ctr as u32).checked_add(7).is_some() {
                eight_blocks(chunk, ctr, key);
            } else {
                blocks_into(chunk, ctr, key);
            }
            ctr = ctr.wrapping_add(8);
        }
        blocks_into(chunks.into_remainder(), ctr, key);
    }
}

fn blocks_dispatch(out: &mut [u32], counter: u128, key: [u32; 2]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.enabled() {
        // SAFETY: the CPU supports AVX2 (the ISA switch allows it only where the CPU has it).
        return unsafe { avx2::blocks(out, counter, key) };
    }
    blocks_into(out, counter, key)
}

/// Philox4x32-10 engine: a 64-bit key, a 128-bit block counter and a word position.
///
/// Guarantees: the stream is a pure function of `(key, counter, word)`; the same words come
/// out of [`next_u32`](Self::next_u32), [`fill_u32`](Self::fill_u32) and the parallel fills,
/// at any thread count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Philox4x32 {
    key: [u32; 2],
    /// The block the next word comes from.
    counter: u128,
    /// Index of the next word inside that block (0..4).
    word: u8,
    /// Rounds per block: 10 (Philox4x32-10) unless set by `with_rounds`.
    rounds: u32,
}

/// The most rounds [`philox4x32`] streams take ([`Philox4x32::with_rounds`]): Random123's limit.
pub const MAX_ROUNDS: u32 = 16;

impl Philox4x32 {
    /// A generator at the start of the stream for `key`.
    pub fn new(key: [u32; 2]) -> Self {
        Self::with_counter(key, 0)
    }

    /// A generator positioned at word 0 of block `counter`.
    pub fn with_counter(key: [u32; 2], counter: u128) -> Self {
        Self {
            key,
            counter,
            word: 0,
            rounds: 10,
        }
    }

    /// This stream with `rounds` rounds per block (Random123's Philox4x32-R, e.g. 7) instead
    /// of 10; the position is unchanged. Fills at other round counts run the scalar block
    /// function (the same words, serial or parallel, at any thread count).
    ///
    /// # Errors
    /// If `rounds` is 0 or above [`MAX_ROUNDS`].
    pub fn with_rounds(mut self, rounds: u32) -> crate::Result<Self> {
        if !(1..=MAX_ROUNDS).contains(&rounds) {
            return Err(crate::invalid(
                "Philox4x32",
                "rounds",
                format!("must be in 1..={MAX_ROUNDS}, got {rounds}"),
            ));
        }
        self.rounds = rounds;
        Ok(self)
    }

    /// Rounds per block (10 unless set by [`with_rounds`](Self::with_rounds)).
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The key.
    pub fn key(&self) -> [u32; 2] {
        self.key
    }

    /// `(block counter, word index in 0..4)` of the next word.
    pub fn position(&self) -> (u128, u8) {
        (self.counter, self.word)
    }

    /// Moves forward by `words` words, without generating them.
    pub fn advance(&mut self, words: u128) {
        let total = self.word as u128 + words;
        self.counter = self.counter.wrapping_add(total / 4);
        self.word = (total % 4) as u8;
    }

    /// The next 32-bit word.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        // 10 rounds as a constant, so that the common case stays unrolled.
        let block = if self.rounds == 10 {
            philox4x32_10(words_of(self.counter), self.key)
        } else {
            philox4x32(words_of(self.counter), self.key, self.rounds)
        };
        let w = block[self.word as usize];
        self.advance(1);
        w
    }

    /// Fills `out` with the next words of the stream, serially.
    pub fn fill_u32(&mut self, out: &mut [u32]) {
        self.fill_words(out, false)
    }

    /// Fills `out` with the next words of the stream using the current rayon pool.
    /// Bitwise identical to [`fill_u32`](Self::fill_u32) at any thread count.
    pub fn par_fill_u32(&mut self, out: &mut [u32]) {
        self.fill_words(out, true)
    }

    fn fill_words(&mut self, out: &mut [u32], parallel: bool) {
        // Finish the current block word by word, then whole blocks from a block boundary.
        let head = if self.word == 0 {
            0
        } else {
            (4 - self.word as usize).min(out.len())
        };
        let (first, rest) = out.split_at_mut(head);
        for o in first {
            *o = self.next_u32();
        }
        let (key, start, rounds) = (self.key, self.counter, self.rounds);
        let fill = |c: &mut [u32], ctr: u128| blocks_rounds(c, ctr, key, rounds);
        let chunk_blocks = (CHUNK_WORDS / 4) as u128;
        if parallel && rest.len() > CHUNK_WORDS {
            rest.par_chunks_mut(CHUNK_WORDS)
                .enumerate()
                .for_each(|(i, c)| fill(c, start.wrapping_add(i as u128 * chunk_blocks)));
        } else {
            fill(rest, start);
        }
        self.advance(rest.len() as u128);
    }

    /// Fills `out` with uniform floats in `[0, 1)`: element `i` is
    /// `(w_i >> 8) · 2^-24` for the `i`-th next word `w_i`. Parallel, thread-count invariant.
    pub fn par_fill_uniform_f32(&mut self, out: &mut [f32]) {
        const SCALE: f32 = 1.0 / (1u32 << 24) as f32;
        let head = if self.word == 0 {
            0
        } else {
            (4 - self.word as usize).min(out.len())
        };
        let (first, rest) = out.split_at_mut(head);
        for o in first {
            *o = (self.next_u32() >> 8) as f32 * SCALE;
        }
        let (key, start, rounds) = (self.key, self.counter, self.rounds);
        let chunk_blocks = (CHUNK_WORDS / 4) as u128;
        // Generate and convert one cache-sized chunk at a time, in place.
        let work = |(i, c): (usize, &mut [f32])| {
            let words = as_words(c);
            blocks_rounds(
                words,
                start.wrapping_add(i as u128 * chunk_blocks),
                key,
                rounds,
            );
            for x in c {
                *x = (x.to_bits() >> 8) as f32 * SCALE;
            }
        };
        if rest.len() > CHUNK_WORDS {
            rest.par_chunks_mut(CHUNK_WORDS).enumerate().for_each(work);
        } else {
            rest.chunks_mut(CHUNK_WORDS).enumerate().for_each(work);
        }
        self.advance(rest.len() as u128);
    }
}

/// Whole blocks from block `counter` at `rounds` rounds: the vector kernels at 10, the scalar
/// block function otherwise.
fn blocks_rounds(out: &mut [u32], counter: u128, key: [u32; 2], rounds: u32) {
    if rounds == 10 {
        blocks_dispatch(out, counter, key);
    } else {
        for (j, block) in out.chunks_mut(4).enumerate() {
            let w = philox4x32(words_of(counter.wrapping_add(j as u128)), key, rounds);
            block.copy_from_slice(&w[..block.len()]);
        }
    }
}

/// Views an `f32` slice as its `u32` bit patterns (same size and alignment).
fn as_words(x: &mut [f32]) -> &mut [u32] {
    // SAFETY: f32 and u32 have the same size and alignment and every bit pattern is valid
    // for both; the borrow is carried over.
    unsafe { core::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<u32>(), x.len()) }
}

impl rand_core::TryRng for Philox4x32 {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(Philox4x32::next_u32(self))
    }

    /// Two words, the first as the low half (the `rand_core` convention).
    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let lo = Philox4x32::next_u32(self) as u64;
        Ok(lo | (Philox4x32::next_u32(self) as u64) << 32)
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(4) {
            let w = Philox4x32::next_u32(self).to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        Ok(())
    }
}

impl rand_core::SeedableRng for Philox4x32 {
    type Seed = [u8; 8];

    /// The key from the little-endian seed bytes, counter 0; every seed is valid.
    fn from_seed(seed: [u8; 8]) -> Self {
        let k0 = u32::from_le_bytes([seed[0], seed[1], seed[2], seed[3]]);
        let k1 = u32::from_le_bytes([seed[4], seed[5], seed[6], seed[7]]);
        Self::new([k0, k1])
    }

    /// The key is the seed itself (low word first), counter 0, as PyTorch's CUDA generator
    /// uses its 64-bit seed.
    fn seed_from_u64(seed: u64) -> Self {
        Self::new([seed as u32, (seed >> 32) as u32])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random123_known_answers() {
        // Random123 kat_vectors, the three "philox4x32 10" lines: counter, key, expected.
        let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
            ),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (ctr, key, want) in kat {
            assert_eq!(philox4x32_10(ctr, key), want);
            let counter = u128::from(ctr[0])
                | u128::from(ctr[1]) << 32
                | u128::from(ctr[2]) << 64
                | u128::from(ctr[3]) << 96;
            let mut buf = [0u32; 4];
            blocks_into(&mut buf, counter, key);
            assert_eq!(buf, want);
        }
    }

    #[test]
    fn fills_agree_with_single_draws_from_odd_positions() {
        for skip in 0..6u128 {
            for len in [0usize, 1, 3, 5, 33, 100, CHUNK_WORDS * 2 + 7] {
                let mut a = Philox4x32::with_counter([7, 9], u64::MAX as u128);
                a.advance(skip);
                let mut b = a.clone();
                let mut c = a.clone();
                let mut fa = vec![0; len];
                a.fill_u32(&mut fa);
                let mut fc = vec![0; len];
                c.par_fill_u32(&mut fc);
                let fb: Vec<u32> = (0..len).map(|_| b.next_u32()).collect();
                assert_eq!(fa, fb);
                assert_eq!(fc, fb);
                assert_eq!(a, b);
                assert_eq!(c, b);
            }
        }
    }

    #[test]
    fn seven_round_stream_matches_random123_and_any_thread_count() {
        // Random123 kat_vectors, "philox4x32 7" with the pi-digits counter and key.
        let ctr = [0x243f6a88u32, 0x85a308d3, 0x13198a2e, 0x03707344];
        let key = [0xa4093822, 0x299f31d0];
        let counter = ctr
            .iter()
            .rev()
            .fold(0u128, |a, &w| a << 32 | u128::from(w));
        let mut g = Philox4x32::with_counter(key, counter)
            .with_rounds(7)
            .unwrap();
        let words: Vec<u32> = (0..4).map(|_| g.next_u32()).collect();
        assert_eq!(words, [0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a]);
        assert!(Philox4x32::new(key).with_rounds(0).is_err());
        assert!(Philox4x32::new(key).with_rounds(17).is_err());
        // Fills (serial and parallel, from an odd position) equal one word at a time.
        let n = CHUNK_WORDS * 3 + 7;
        let mut one = Philox4x32::new([5, 6]).with_rounds(7).unwrap();
        one.advance(3);
        let start = one.clone();
        let want: Vec<u32> = (0..n).map(|_| one.next_u32()).collect();
        let mut serial = start.clone();
        let mut got = vec![0u32; n];
        serial.fill_u32(&mut got);
        assert_eq!(got, want);
        assert_eq!(serial, one);
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut g = start.clone();
            let mut got = vec![0u32; n];
            pool.install(|| g.par_fill_u32(&mut got));
            assert_eq!(got, want, "threads = {threads}");
            assert_eq!(g, one);
            let mut g = start.clone();
            let mut f = vec![0f32; n];
            pool.install(|| g.par_fill_uniform_f32(&mut f));
            let scale = 1.0 / (1u32 << 24) as f32;
            assert!(
                f.iter()
                    .zip(&want)
                    .all(|(x, w)| *x == (w >> 8) as f32 * scale)
            );
        }
    }

    #[test]
    fn parallel_fill_is_thread_count_invariant() {
        let n = CHUNK_WORDS * 5 + 13;
        let mut reference: Option<Vec<u32>> = None;
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut g = Philox4x32::new([1, 2]);
            g.advance(3);
            let mut out = vec![0f32; n];
            pool.install(|| g.par_fill_uniform_f32(&mut out));
            let bits: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
            match &reference {
                None => reference = Some(bits),
                Some(r) => assert_eq!(r, &bits, "threads = {threads}"),
            }
        }
    }
}
