//! MT19937, the 32-bit Mersenne Twister of Matsumoto and Nishimura (1998).
//!
//! One engine serves PyTorch's CPU generator, CPython's `random` and NumPy's legacy
//! `RandomState`: they share the twist and the tempering and differ only in seeding and in
//! the samplers built on top, which live in [`crate::compat`].
//!
//! The read position is kept the way PyTorch keeps it (`left`, `next`), because that is the
//! most general form: PyTorch's 5056-byte state stores both fields, and CPython's and NumPy's
//! single `pos` index maps onto it without loss (see [`Mt19937::pos`]).

use core::convert::Infallible;

/// Number of 32-bit words in the state.
pub const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_B0DF;
const UPPER: u32 = 0x8000_0000;
const LOWER: u32 = 0x7FFF_FFFF;

/// The MT19937 engine: 624 words of state and a read position.
///
/// Guarantees: the output of [`next_u32`](Self::next_u32) after
/// [`from_seed_u32`](Self::from_seed_u32) is exactly the reference `genrand_int32` after
/// `init_genrand`; after [`from_key`](Self::from_key) it is the reference after
/// `init_by_array`. The stream never changes between lockstep versions.
#[derive(Clone, PartialEq, Eq)]
pub struct Mt19937 {
    state: [u32; N],
    /// Words left before the next twist, plus one (PyTorch's `left`): 1 means "twist first".
    left: u32,
    /// Index of the next word to temper (PyTorch's `next`).
    next: u32,
}

impl core::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mt19937")
            .field("left", &self.left)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

#[inline(always)]
fn temper(mut y: u32) -> u32 {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9D2C_5680;
    y ^= (y << 15) & 0xEFC6_0000;
    y ^ (y >> 18)
}

#[inline(always)]
fn mix(cur: u32, nxt: u32, far: u32) -> u32 {
    let y = (cur & UPPER) | (nxt & LOWER);
    far ^ (y >> 1) ^ ((y & 1).wrapping_neg() & MATRIX_A)
}

fn init_genrand(seed: u32) -> [u32; N] {
    let mut mt = [0u32; N];
    mt[0] = seed;
    for i in 1..N {
        mt[i] = 1_812_433_253u32
            .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
            .wrapping_add(i as u32);
    }
    mt
}

impl Mt19937 {
    /// Seeds with the reference `init_genrand(seed)` (PyTorch, NumPy `RandomState(int)`).
    pub fn from_seed_u32(seed: u32) -> Self {
        Self {
            state: init_genrand(seed),
            left: 1,
            next: 0,
        }
    }

    /// Seeds with the reference `init_by_array(key)` (CPython `random.seed`, NumPy
    /// `RandomState(array)`). An empty key is treated as the single word `0`, as CPython does.
    pub fn from_key(key: &[u32]) -> Self {
        let key: &[u32] = if key.is_empty() { &[0] } else { key };
        let mut mt = init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        Self {
            state: mt,
            left: 1,
            next: 0,
        }
    }

    /// Builds an engine from raw state words and a CPython/NumPy position `pos` in `0..=624`
    /// (624 means the next draw twists first). Returns `None` if `pos > 624`.
    pub fn from_state(state: [u32; N], pos: usize) -> Option<Self> {
        if pos > N {
            return None;
        }
        let (left, next) = if pos == N {
            (1, N as u32)
        } else {
            (N as u32 + 1 - pos as u32, pos as u32)
        };
        Some(Self { state, left, next })
    }

    /// Builds an engine from PyTorch's `(left, next)` pair, as stored in its state bytes.
    /// Returns `None` unless `1 <= left <= 624`, `next <= 624` (PyTorch's own check) and the
    /// pair is one PyTorch can produce (`left == 1`, or `left + next == 625`); other pairs
    /// would make PyTorch read past its state array.
    pub fn from_torch_parts(state: [u32; N], left: u32, next: u32) -> Option<Self> {
        if left == 0 || left > N as u32 || next > N as u32 || (left != 1 && left + next != 625) {
            return None;
        }
        Some(Self { state, left, next })
    }

    /// PyTorch's `(left, next)` pair.
    pub fn torch_parts(&self) -> (u32, u32) {
        (self.left, self.next)
    }

    /// The state words, as CPython's `getstate()` and NumPy's `get_state()` report them.
    pub fn state(&self) -> &[u32; N] {
        &self.state
    }

    /// The CPython/NumPy position: how many words of the current block were used
    /// (624 = the next draw twists first).
    pub fn pos(&self) -> usize {
        if self.left <= 1 {
            N
        } else {
            // A consistent state has next + left == 625; `next` is what the next draw reads.
            self.next as usize
        }
    }

    fn twist(&mut self) {
        Path::best().twist(&mut self.state);
        self.left = N as u32;
        self.next = 0;
    }

    /// The next 32-bit output.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.left -= 1;
        if self.left == 0 {
            self.twist();
        }
        let y = self.state[self.next as usize];
        self.next += 1;
        temper(y)
    }

    /// Two outputs joined as PyTorch and NumPy join them: `(first << 32) | second`.
    #[inline]
    pub fn next_u64_hi_lo(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        (hi << 32) | self.next_u32() as u64
    }

    /// Fills `out` with the next `out.len()` outputs; identical to calling
    /// [`next_u32`](Self::next_u32) that many times, but twists and tempers whole vectors of
    /// words at once (AVX-512 or AVX2 where the instruction-set switch allows: the same words
    /// on every path).
    pub fn fill_u32(&mut self, out: &mut [u32]) {
        self.fill_with(out, |path, words, out| path.temper(words, out))
    }

    /// [`fill_u32`](Self::fill_u32) without the tempering: the engine's state words that the
    /// next `out.len()` outputs temper, in order (`temper_words` of them gives those outputs).
    /// The engine advances exactly as `fill_u32` advances it. Lets the serial twist run apart
    /// from the tempering, which any thread can do.
    pub(crate) fn fill_untempered(&mut self, out: &mut [u32]) {
        let copy = |_: Path, words: &[u32], out: &mut [u32]| out.copy_from_slice(words);
        // The current block's words, then the first fresh block (twisted in the state).
        let head = (self.left.max(1) as usize - 1 + N).min(out.len());
        self.fill_with(&mut out[..head], copy);
        // Whole blocks after it straight into `out`, from the block before them there (its
        // last `N` words are the state now): no twist in the state and copy per block.
        let full = (out.len() - head) / N * N;
        if full > 0 {
            Path::best().extend(&mut out[head - N..head + full]);
            self.state
                .copy_from_slice(&out[head + full - N..head + full]);
            // The last of them used up, as `fill_with` leaves a block.
            (self.left, self.next) = (1, N as u32);
        }
        self.fill_with(&mut out[head + full..], copy);
    }

    /// Walks the next `out.len()` state words, twisting fresh blocks as needed, and hands each
    /// run of them to `emit` with the run of `out` they fill.
    #[inline(always)]
    fn fill_with(&mut self, out: &mut [u32], emit: impl Fn(Path, &[u32], &mut [u32])) {
        let path = Path::best();
        let mut done = 0;
        while done < out.len() {
            if self.left <= 1 {
                path.twist(&mut self.state);
                // A fresh block: 624 words left, the first at 0 (`next_u32` counts the
                // current draw in `left`, hence one more).
                self.left = N as u32 + 1;
                self.next = 0;
            }
            let avail = (self.left - 1) as usize;
            let start = self.next as usize;
            let take = avail.min(out.len() - done).min(N - start);
            emit(
                path,
                &self.state[start..start + take],
                &mut out[done..done + take],
            );
            self.next += take as u32;
            self.left -= take as u32;
            done += take;
        }
    }
}

/// `out[i]` = the tempered output of state word `words[i]` (what [`Mt19937::fill_u32`] gives
/// for the words [`Mt19937::fill_untempered`] gave), vectorised where the switch allows.
pub(crate) fn temper_words(words: &[u32], out: &mut [u32]) {
    Path::best().temper(words, out)
}

/// The twist and the tempering of whole vectors of words: one path per instruction set
/// (`crate::isa`), the same words on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Path {
    /// The widest path the instruction-set switch allows.
    #[inline]
    fn best() -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::isa::Isa;
            if Isa::Avx512.enabled() {
                return Path::Avx512;
            }
            if Isa::Avx2.enabled() {
                return Path::Avx2;
            }
        }
        Path::Scalar
    }

    /// Every path this CPU runs (for the tests).
    #[cfg(test)]
    fn all() -> Vec<Path> {
        let mut v = vec![Path::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Path::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Path::Avx512);
            }
        }
        v
    }

    fn twist(self, mt: &mut [u32; N]) {
        match self {
            Path::Scalar => twist_scalar(mt),
            // SAFETY: the path exists only where the CPU has the feature (`best`, `all`).
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::twist256(mt) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::twist512(mt) },
        }
    }

    /// Continues the stream of state words whose first block is `words[..N]`: each later word
    /// `j` is `mix(words[j − N], words[j − N + 1], words[j − (N − M)])` (what twisting block by
    /// block gives), all of them words before `j`.
    fn extend(self, words: &mut [u32]) {
        assert!(words.len() >= N);
        match self {
            Path::Scalar => extend_scalar(words, N),
            // SAFETY: as in `twist`; the stream holds its first block (checked above).
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::extend256(words) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::extend512(words) },
        }
    }

    /// `out[i] = temper(words[i])` (the same lengths).
    fn temper(self, words: &[u32], out: &mut [u32]) {
        assert_eq!(words.len(), out.len());
        match self {
            Path::Scalar => {
                for (o, &w) in out.iter_mut().zip(words) {
                    *o = temper(w);
                }
            }
            // SAFETY: as in `twist`; the lengths are equal.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::temper256(words, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::temper512(words, out) },
        }
    }
}

/// The reference twist, one word at a time.
fn twist_scalar(mt: &mut [u32; N]) {
    for i in 0..N - M {
        mt[i] = mix(mt[i], mt[i + 1], mt[i + M]);
    }
    for i in N - M..N - 1 {
        mt[i] = mix(mt[i], mt[i + 1], mt[i + M - N]);
    }
    mt[N - 1] = mix(mt[N - 1], mt[0], mt[M - 1]);
}

/// [`Path::extend`] one word at a time, from word `from` (at least `N`).
fn extend_scalar(words: &mut [u32], from: usize) {
    for j in from..words.len() {
        words[j] = mix(words[j - N], words[j - N + 1], words[j - (N - M)]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The twist `L` words at a time gives the reference words for any `L ≤ N − M`: word
    //! `i < N − M` reads words `i + 1` and `i + M`, which the twist has not written yet; word
    //! `i ≥ N − M` reads word `i + 1`, not written yet, and word `i − (N − M)`, written
    //! `N − M = 227` words earlier. So a run of `L` consecutive words reads nothing the run
    //! itself writes, as long as it does not straddle `N − M` (where the far word switches)
    //! or reach the last word (which reads word 0). Those few words go one at a time.
    use super::{M, MATRIX_A, N, extend_scalar, mix, temper};
    use core::arch::x86_64::*;

    macro_rules! paths {
        ($run:ident, $twist:ident, $extend:ident, $temper:ident, $feat:literal, $l:literal,
         $load:ident, $store:ident, $set1:ident, $and:ident, $or:ident, $xor:ident,
         $srli:ident, $slli:ident, $srai:ident) => {
            /// Words `dst..dst + L` = `mix` of words `cur + l`, `cur + l + 1` and `far + l`.
            ///
            /// # Safety
            /// The CPU supports the target feature; every word read and written is inside the
            /// buffer at `p`.
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn $run(p: *mut u32, cur: usize, far: usize, dst: usize) {
                // SAFETY: as documented.
                unsafe {
                    let c = $load(p.add(cur).cast());
                    let nxt = $load(p.add(cur + 1).cast());
                    let fr = $load(p.add(far).cast());
                    let y = $or(
                        $and(c, $set1(0x8000_0000u32 as i32)),
                        $and(nxt, $set1(0x7FFF_FFFF)),
                    );
                    // All ones where y is odd.
                    let odd = $srai::<31>($slli::<31>(y));
                    let v = $xor($xor(fr, $srli::<1>(y)), $and(odd, $set1(MATRIX_A as i32)));
                    $store(p.add(dst).cast(), v);
                }
            }

            /// The twist of all `N` words in place, vectors of `L` words where they fit.
            ///
            /// # Safety
            /// The CPU supports the target feature.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $twist(mt: &mut [u32; N]) {
                const L: usize = $l;
                let p = mt.as_mut_ptr();
                // SAFETY (whole body): every run reads and writes words below N (see the
                // module doc for why the order of runs keeps the reference's values).
                unsafe {
                    let mut i = 0;
                    while i + L <= N - M {
                        $run(p, i, i + M, i);
                        i += L;
                    }
                    while i < N - M {
                        *p.add(i) = mix(*p.add(i), *p.add(i + 1), *p.add(i + M));
                        i += 1;
                    }
                    while i + L < N {
                        $run(p, i, i + M - N, i);
                        i += L;
                    }
                    while i < N - 1 {
                        *p.add(i) = mix(*p.add(i), *p.add(i + 1), *p.add(i + M - N));
                        i += 1;
                    }
                    *p.add(N - 1) = mix(*p.add(N - 1), *p, *p.add(M - 1));
                }
            }

            /// [`Path::extend`](super::Path::extend), `L` words at a time: a run of `L ≤ N − M`
            /// words reads only words at least `N − M` before its first.
            ///
            /// # Safety
            /// The CPU supports the target feature; `words` holds at least `N` words.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $extend(words: &mut [u32]) {
                const L: usize = $l;
                let (n, p) = (words.len(), words.as_mut_ptr());
                let mut j = N;
                // SAFETY: every read is below `j` and every write at `j..j + L ≤ n`.
                unsafe {
                    while j + L <= n {
                        $run(p, j - N, j - (N - M), j);
                        j += L;
                    }
                }
                extend_scalar(words, j);
            }

            /// `out[i] = temper(words[i])`, `L` words at a time.
            ///
            /// # Safety
            /// The CPU supports the target feature; `out` is as long as `words`.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $temper(words: &[u32], out: &mut [u32]) {
                const L: usize = $l;
                let n = words.len();
                let (b, c) = ($set1(0x9D2C_5680u32 as i32), $set1(0xEFC6_0000u32 as i32));
                let mut i = 0;
                // SAFETY: words i..i + L exist in both slices.
                unsafe {
                    while i + L <= n {
                        let mut y = $load(words.as_ptr().add(i).cast());
                        y = $xor(y, $srli::<11>(y));
                        y = $xor(y, $and($slli::<7>(y), b));
                        y = $xor(y, $and($slli::<15>(y), c));
                        y = $xor(y, $srli::<18>(y));
                        $store(out.as_mut_ptr().add(i).cast(), y);
                        i += L;
                    }
                }
                for j in i..n {
                    out[j] = temper(words[j]);
                }
            }
        };
    }

    paths!(
        run512,
        twist512,
        extend512,
        temper512,
        "avx512f",
        16,
        _mm512_loadu_si512,
        _mm512_storeu_si512,
        _mm512_set1_epi32,
        _mm512_and_si512,
        _mm512_or_si512,
        _mm512_xor_si512,
        _mm512_srli_epi32,
        _mm512_slli_epi32,
        _mm512_srai_epi32
    );
    paths!(
        run256,
        twist256,
        extend256,
        temper256,
        "avx2",
        8,
        _mm256_loadu_si256,
        _mm256_storeu_si256,
        _mm256_set1_epi32,
        _mm256_and_si256,
        _mm256_or_si256,
        _mm256_xor_si256,
        _mm256_srli_epi32,
        _mm256_slli_epi32,
        _mm256_srai_epi32
    );
}

impl rand_core::TryRng for Mt19937 {
    type Error = Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(Mt19937::next_u32(self))
    }

    /// `(first << 32) | second`, the convention of PyTorch and NumPy.
    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.next_u64_hi_lo())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(4) {
            let w = Mt19937::next_u32(self).to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        Ok(())
    }
}

impl rand_core::SeedableRng for Mt19937 {
    type Seed = [u8; 4];

    /// `init_genrand` with the little-endian word; every seed, zero included, is valid.
    fn from_seed(seed: [u8; 4]) -> Self {
        Self::from_seed_u32(u32::from_le_bytes(seed))
    }

    /// `init_genrand` with the low 32 bits of `state`, as PyTorch's `manual_seed` does.
    fn seed_from_u64(state: u64) -> Self {
        Self::from_seed_u32(state as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_10000th_output_for_5489() {
        let mut mt = Mt19937::from_seed_u32(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = mt.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn reference_init_by_array() {
        // mt19937ar.out, the authors' published test output for init_by_array.
        let mut mt = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let first: Vec<u32> = (0..5).map(|_| mt.next_u32()).collect();
        assert_eq!(
            first,
            [
                1_067_595_299,
                955_945_823,
                477_289_528,
                4_107_218_783,
                4_228_976_476
            ]
        );
    }

    #[test]
    fn fill_matches_single_draws_across_twists() {
        let mut a = Mt19937::from_seed_u32(7);
        let mut b = a.clone();
        a.next_u32();
        b.next_u32();
        let mut buf = vec![0u32; 2000];
        a.fill_u32(&mut buf);
        let one: Vec<u32> = (0..2000).map(|_| b.next_u32()).collect();
        assert_eq!(buf, one);
        assert_eq!(a, b);
    }

    #[test]
    fn pos_round_trip() {
        let mut a = Mt19937::from_seed_u32(1);
        for _ in 0..10 {
            a.next_u32();
        }
        let b = Mt19937::from_state(*a.state(), a.pos()).unwrap();
        assert_eq!(a, b);
        assert!(Mt19937::from_state(*a.state(), 625).is_none());
    }

    #[test]
    fn every_path_twists_and_tempers_as_the_reference() {
        let mut mt = Mt19937::from_seed_u32(12_345);
        for round in 0..20 {
            let mut want = mt.state;
            twist_scalar(&mut want);
            let tempered: Vec<u32> = want.iter().map(|&w| temper(w)).collect();
            for path in Path::all() {
                let mut got = mt.state;
                path.twist(&mut got);
                assert!(got == want, "{path:?}, round {round}");
                for (a, b) in [(0, N), (3, 600), (1, 2), (617, N)] {
                    let mut out = vec![0u32; b - a];
                    path.temper(&want[a..b], &mut out);
                    assert_eq!(out, tempered[a..b], "{path:?}, {a}..{b}");
                }
            }
            mt.state = want;
        }
    }

    #[test]
    fn every_path_extends_the_stream_as_the_reference() {
        let mut mt = Mt19937::from_seed_u32(7);
        let mut want: Vec<u32> = mt.state.to_vec();
        for _ in 0..4 {
            twist_scalar(&mut mt.state);
            want.extend_from_slice(&mt.state);
        }
        for path in Path::all() {
            for len in [N, N + 1, N + 7, 2 * N - 1, 2 * N + 227, 5 * N] {
                let mut got = want[..N].to_vec();
                got.resize(len, 0);
                path.extend(&mut got);
                assert!(got == want[..len], "{path:?}, {len} words");
            }
        }
    }

    /// Engines restored mid-block from one state: CPython/NumPy positions and PyTorch's
    /// `(left, next)` pairs (`left == 1` with any `next`).
    fn restored_starts() -> Vec<Mt19937> {
        let mut seed = Mt19937::from_seed_u32(2024);
        for _ in 0..700 {
            seed.next_u32();
        }
        let st = *seed.state();
        let mut starts: Vec<Mt19937> = [0, 1, 300, 623, 624]
            .iter()
            .map(|&p| Mt19937::from_state(st, p).unwrap())
            .collect();
        for (left, next) in [(1, 0), (1, 17), (1, 624), (624, 1), (2, 623), (325, 300)] {
            starts.push(Mt19937::from_torch_parts(st, left, next).unwrap());
        }
        starts
    }

    /// The untempered words, tempered, are `fill_u32`'s outputs, from every kind of position
    /// and for lengths around whole blocks; the engine ends in the same state.
    #[test]
    fn untempered_words_temper_to_the_outputs() {
        for start in restored_starts() {
            for len in [0, 1, 623, 624, 625, 1248, 1249, 1873, 3 * N + 5, 32_768] {
                let (mut a, mut b) = (start.clone(), start.clone());
                let mut want = vec![0u32; len];
                a.fill_u32(&mut want);
                let mut words = vec![0u32; len];
                b.fill_untempered(&mut words);
                let mut got = vec![0u32; len];
                temper_words(&words, &mut got);
                assert!(got == want, "{:?}, {len} words", start.torch_parts());
                assert_eq!(a, b, "{:?}, {len} words", start.torch_parts());
            }
        }
    }

    #[test]
    fn fill_matches_single_draws_for_every_chunking() {
        let mut one = Mt19937::from_seed_u32(99);
        let want: Vec<u32> = (0..5000).map(|_| one.next_u32()).collect();
        for sizes in [
            &[1usize][..],
            &[623, 1, 1],
            &[624, 624, 1],
            &[5, 1300, 2],
            &[4999],
        ] {
            let mut mt = Mt19937::from_seed_u32(99);
            let mut got = Vec::new();
            let mut k = 0;
            while got.len() < want.len() {
                let n = sizes[k % sizes.len()].min(want.len() - got.len());
                let mut buf = vec![0u32; n];
                mt.fill_u32(&mut buf);
                got.extend(buf);
                k += 1;
            }
            assert_eq!(got, want, "{sizes:?}");
            assert_eq!(mt, one, "{sizes:?}");
        }
    }

    /// A state restored mid-block (CPython/NumPy positions, PyTorch's `(left, next)` pairs,
    /// `left == 1` with any `next`) fills, mixed with single draws, as single draws alone,
    /// and ends with the same `(left, next)`.
    #[test]
    fn fill_from_restored_states_matches_single_draws() {
        for start in restored_starts() {
            let mut one = start.clone();
            let want: Vec<u32> = (0..3000).map(|_| one.next_u32()).collect();
            let mut mt = start.clone();
            let mut got = Vec::new();
            for (k, n) in [1usize, 622, 3, 624, 0, 700, 1, 5]
                .iter()
                .cycle()
                .enumerate()
            {
                if got.len() >= want.len() {
                    break;
                }
                let n = (*n).min(want.len() - got.len());
                if k % 3 == 2 {
                    got.extend((0..n).map(|_| mt.next_u32()));
                } else {
                    let mut buf = vec![0u32; n];
                    mt.fill_u32(&mut buf);
                    got.extend(buf);
                }
            }
            assert_eq!(got, want, "{:?}", start.torch_parts());
            assert_eq!(mt.torch_parts(), one.torch_parts());
            assert_eq!(mt, one);
        }
    }
}
