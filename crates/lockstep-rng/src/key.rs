//! [`StreamKey`]: the one key type of the invariant seeding mode's random streams.

use crate::compat::numpy::{Generator as NpGenerator, SeedSequence, default_rng_from};

/// The key of one random stream of the invariant seeding mode: the run's seed and a path of
/// integers, `(epoch or step, sample index)` and optionally a stream number. The stream is
/// `numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=path))`: it depends on
/// these numbers alone (never on threads, workers, processes or the batch a sample lands in),
/// and NumPy reproduces it in one line.
///
/// * [`StreamKey::sample`]: a sample's own stream (the data loader's draws), path
///   `(epoch, index)`;
/// * [`StreamKey::stream`]: one of its sub-streams, path `(epoch, index, stream)` (the
///   training layer's dropout call `c` in a forward pass draws from stream `1 + c`);
/// * [`StreamKey::with_path`]: any other path (for keys of another shape, such as evaluation
///   windows).
///
/// ```
/// use lockstep_rng::StreamKey;
/// let k = StreamKey::sample(7, 2, 40);
/// assert_eq!(k.path(), &[2, 40]);
/// assert_eq!(k.stream(1).path(), &[2, 40, 1]);
/// let mut x = [0f32; 2];
/// k.generator().random_f32(&mut x);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamKey {
    seed: u64,
    path: Vec<u128>,
}

impl StreamKey {
    /// Sample `index`'s own stream in `epoch` (or step) of a run seeded `seed`.
    pub fn sample(seed: u64, epoch: u64, index: u64) -> Self {
        Self::with_path(seed, vec![u128::from(epoch), u128::from(index)])
    }

    /// The key with `stream` appended to its path: a stream of its own, independent of this
    /// key's and of every other stream number's.
    pub fn stream(&self, stream: u64) -> Self {
        let mut path = self.path.clone();
        path.push(u128::from(stream));
        Self {
            seed: self.seed,
            path,
        }
    }

    /// A key with any path (NumPy's `spawn_key`; an empty path is `SeedSequence(seed)`).
    pub fn with_path(seed: u64, path: Vec<u128>) -> Self {
        Self { seed, path }
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The path (NumPy's `spawn_key`).
    pub fn path(&self) -> &[u128] {
        &self.path
    }

    /// `numpy.random.SeedSequence(seed, spawn_key=path)`.
    pub fn seed_sequence(&self) -> SeedSequence {
        SeedSequence::from_seed_and_key(self.seed, self.path.clone())
    }

    /// The stream: `numpy.random.default_rng(self.seed_sequence())`.
    pub fn generator(&self) -> NpGenerator {
        default_rng_from(self.seed_sequence())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key gives the streams the data and training layers built by hand before it
    /// existed: NumPy's words of the seed (no high zero word), pool size 4.
    #[test]
    fn keys_give_the_streams_of_the_hand_built_seed_sequences() {
        for seed in [0u64, 1, 0xFFFF_FFFF, 1 << 32, u64::MAX] {
            let words = if seed >> 32 == 0 {
                vec![seed as u32]
            } else {
                vec![seed as u32, (seed >> 32) as u32]
            };
            for path in [vec![3u128, 17], vec![0, 5, 1], vec![]] {
                let want = SeedSequence::new(words.clone(), path.clone(), 4).unwrap();
                let key = StreamKey::with_path(seed, path.clone());
                assert_eq!(
                    key.seed_sequence().generate_state_u32(8),
                    want.generate_state_u32(8)
                );
                let (mut a, mut b) = ([0f32; 9], [0f32; 9]);
                key.generator().random_f32(&mut a);
                default_rng_from(want).random_f32(&mut b);
                assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits), "{seed} {path:?}");
            }
        }
        let s = StreamKey::sample(9, 2, 40);
        assert_eq!(s, StreamKey::with_path(9, vec![2, 40]));
        assert_eq!(s.stream(3), StreamKey::with_path(9, vec![2, 40, 3]));
        assert_ne!(s.stream(1).seed_sequence().pool(), s.seed_sequence().pool());
    }
}
