//! Samplers: the order in which a pass visits a data set, drawn exactly as PyTorch draws it.
//!
//! A [`Sampler`] produces one whole pass at a time ([`Sampler::pass`]), consuming from its
//! generators exactly what PyTorch's sampler consumes when its iterator is run to exhaustion
//! (which a `DataLoader` always does). Passes are materialized so that a loader can save its
//! position and resume.

use crate::error::{Error, Result, invalid, try_with_capacity};
use crate::rng::SharedGenerator;
use lockstep_rng::Generator;
use lockstep_rng::compat::torch as t;

/// The order of one pass over a data set.
pub trait Sampler: Send {
    /// Number of indices in one pass (`len(sampler)`).
    fn len(&self) -> usize;

    /// Whether a pass is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The indices of the next pass, drawing from the generators exactly what
    /// `list(iter(sampler))` draws in PyTorch.
    ///
    /// # Errors
    /// If the sampler's parameters are invalid for drawing (e.g. weights that sum to zero).
    fn pass(&mut self) -> Result<Vec<usize>>;

    /// `set_epoch` (used by [`DistributedSampler`]; a no-op elsewhere).
    fn set_epoch(&mut self, _epoch: u64) {}

    /// The generator this sampler draws from, if it has one of its own (saved and restored
    /// by the loader's `state_dict`).
    fn generator(&self) -> Option<&SharedGenerator> {
        None
    }
}

impl<S: Sampler + ?Sized> Sampler for Box<S> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        (**self).pass()
    }
    fn set_epoch(&mut self, epoch: u64) {
        (**self).set_epoch(epoch)
    }
    fn generator(&self) -> Option<&SharedGenerator> {
        (**self).generator()
    }
}

fn to_usize(v: Vec<i64>) -> Vec<usize> {
    // In place: `i64` and `usize` have one size and alignment.
    v.into_iter().map(|i| i as usize).collect()
}

/// `randperm(n)` as indices: an error, not an abort, when `n` values cannot be held.
fn randperm(g: &mut Generator, n: usize) -> Result<Vec<usize>> {
    Ok(to_usize(t::try_randperm(g, n)?))
}

/// `0..n` as a vector, allocated fallibly.
fn iota(op: &'static str, n: usize) -> Result<Vec<usize>> {
    let mut v = try_with_capacity(op, n)?;
    v.extend(0..n);
    Ok(v)
}

/// `SequentialSampler`: `0, 1, …, n − 1`.
#[derive(Clone, Debug)]
pub struct SequentialSampler {
    n: usize,
}

impl SequentialSampler {
    /// A sampler over `n` samples.
    pub fn new(n: usize) -> Self {
        Self { n }
    }
}

impl Sampler for SequentialSampler {
    fn len(&self) -> usize {
        self.n
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        iota("SequentialSampler", self.n)
    }
}

/// `RandomSampler(data_source, replacement, num_samples, generator)`, bit for bit.
///
/// * Without a generator, each pass draws `seed = u64 mod 2^63` from the default generator
///   and shuffles with a fresh generator seeded with it (PyTorch's private per-pass generator).
/// * Without replacement: `num_samples / n` whole `randperm(n)`, then the first
///   `num_samples % n` of one more `randperm(n)`, which is drawn even when that remainder is 0.
/// * With replacement: `randint(0, n, (32,))` chunks, then one of `num_samples % 32`.
#[derive(Clone, Debug)]
pub struct RandomSampler {
    n: usize,
    replacement: bool,
    num_samples: usize,
    generator: Option<SharedGenerator>,
}

impl RandomSampler {
    /// `RandomSampler` over `n` samples; `num_samples` defaults to `n`.
    ///
    /// # Errors
    /// If `num_samples` (or `n`, when it is the default) is 0, as PyTorch's `ValueError`.
    pub fn new(
        n: usize,
        replacement: bool,
        num_samples: Option<usize>,
        generator: Option<SharedGenerator>,
    ) -> Result<Self> {
        let num_samples = num_samples.unwrap_or(n);
        if num_samples == 0 {
            return Err(invalid(
                "RandomSampler",
                "num_samples",
                "num_samples should be a positive integer value, but got num_samples=0",
            ));
        }
        if n == 0 {
            return Err(invalid(
                "RandomSampler",
                "data_source",
                "cannot sample from an empty data set",
            ));
        }
        Ok(Self {
            n,
            replacement,
            num_samples,
            generator,
        })
    }

    fn draw(&self, g: &mut Generator) -> Result<Vec<usize>> {
        let n = self.n;
        let mut out = try_with_capacity("RandomSampler", self.num_samples)?;
        if self.replacement {
            let mut chunk = [0i64; 32];
            for _ in 0..self.num_samples / 32 {
                t::random_(g, &mut chunk, 0, n as i64)?;
                out.extend(chunk.iter().map(|&i| i as usize));
            }
            let rest = &mut chunk[..self.num_samples % 32];
            t::random_(g, rest, 0, n as i64)?;
            out.extend(rest.iter().map(|&i| i as usize));
        } else {
            for _ in 0..self.num_samples / n {
                out.extend(randperm(g, n)?);
            }
            let last = randperm(g, n)?;
            out.extend_from_slice(&last[..self.num_samples % n]);
        }
        Ok(out)
    }
}

impl Sampler for RandomSampler {
    fn len(&self) -> usize {
        self.num_samples
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        match &self.generator {
            Some(g) => g.with(|g| self.draw(g)),
            None => {
                let seed = SharedGenerator::Default.with(t::random_i64) as u64;
                self.draw(&mut Generator::with_seed(seed))
            }
        }
    }
    fn generator(&self) -> Option<&SharedGenerator> {
        self.generator.as_ref()
    }
}

/// `SubsetRandomSampler(indices, generator)`: `indices[randperm(len(indices))]`, drawn from
/// the generator directly (the default generator when none is given; no seed draw).
#[derive(Clone, Debug)]
pub struct SubsetRandomSampler {
    indices: Vec<usize>,
    generator: SharedGenerator,
}

impl SubsetRandomSampler {
    /// A sampler over `indices`.
    pub fn new(indices: Vec<usize>, generator: Option<SharedGenerator>) -> Self {
        Self {
            indices,
            generator: generator.unwrap_or_default(),
        }
    }
}

impl Sampler for SubsetRandomSampler {
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        let p = self.generator.with(|g| randperm(g, self.indices.len()))?;
        Ok(p.into_iter().map(|i| self.indices[i]).collect())
    }
    fn generator(&self) -> Option<&SharedGenerator> {
        (!self.generator.is_default()).then_some(&self.generator)
    }
}

/// `WeightedRandomSampler(weights, num_samples, replacement, generator)`: one
/// `torch.multinomial(float64 weights, num_samples, replacement)` per pass.
#[derive(Clone, Debug)]
pub struct WeightedRandomSampler {
    weights: Vec<f64>,
    num_samples: usize,
    replacement: bool,
    generator: SharedGenerator,
}

impl WeightedRandomSampler {
    /// A sampler drawing `num_samples` indices with probabilities proportional to `weights`.
    ///
    /// # Errors
    /// If `num_samples` is 0, a weight is negative or not finite, the weights sum to 0, or
    /// `num_samples > weights.len()` without replacement.
    pub fn new(
        weights: Vec<f64>,
        num_samples: usize,
        replacement: bool,
        generator: Option<SharedGenerator>,
    ) -> Result<Self> {
        const OP: &str = "WeightedRandomSampler";
        if num_samples == 0 {
            return Err(invalid(
                OP,
                "num_samples",
                "num_samples should be a positive integer value, but got num_samples=0",
            ));
        }
        if let Some(w) = weights.iter().find(|w| !(w.is_finite() && **w >= 0.0)) {
            return Err(invalid(OP, "weights", format!("invalid weight {w}")));
        }
        if !(weights.iter().sum::<f64>() > 0.0) {
            return Err(invalid(OP, "weights", "the weights sum to 0"));
        }
        if !replacement && num_samples > weights.len() {
            return Err(invalid(
                OP,
                "num_samples",
                format!(
                    "{num_samples} samples without replacement from {} weights",
                    weights.len()
                ),
            ));
        }
        Ok(Self {
            weights,
            num_samples,
            replacement,
            generator: generator.unwrap_or_default(),
        })
    }
}

impl Sampler for WeightedRandomSampler {
    fn len(&self) -> usize {
        self.num_samples
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        let n = self.weights.len();
        let r = self
            .generator
            .with(|g| t::multinomial(g, &self.weights, 1, n, self.num_samples, self.replacement))?;
        Ok(to_usize(r))
    }
    fn generator(&self) -> Option<&SharedGenerator> {
        (!self.generator.is_default()).then_some(&self.generator)
    }
}

/// `DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)`: the same
/// indices per rank and epoch as PyTorch (a `randperm(n)` from a generator seeded
/// `seed + epoch`, padded or truncated to a multiple of `num_replicas`, every
/// `num_replicas`-th from `rank`).
#[derive(Clone, Debug)]
pub struct DistributedSampler {
    n: usize,
    num_replicas: usize,
    rank: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
    epoch: u64,
}

impl DistributedSampler {
    /// A sampler for `rank` of `num_replicas` over `n` samples.
    ///
    /// # Errors
    /// If `num_replicas` is 0 or `rank >= num_replicas`.
    pub fn new(
        n: usize,
        num_replicas: usize,
        rank: usize,
        shuffle: bool,
        seed: u64,
        drop_last: bool,
    ) -> Result<Self> {
        if num_replicas == 0 {
            return Err(invalid(
                "DistributedSampler",
                "num_replicas",
                "must be at least 1",
            ));
        }
        if rank >= num_replicas {
            return Err(invalid(
                "DistributedSampler",
                "rank",
                format!(
                    "Invalid rank {rank}, rank should be in the interval [0, {}]",
                    num_replicas - 1
                ),
            ));
        }
        Ok(Self {
            n,
            num_replicas,
            rank,
            shuffle,
            seed,
            drop_last,
            epoch: 0,
        })
    }

    /// The epoch the next pass shuffles for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn num_samples(&self) -> usize {
        let (n, r) = (self.n, self.num_replicas);
        if self.drop_last && n % r != 0 {
            (n - r).div_ceil(r)
        } else {
            n.div_ceil(r)
        }
    }
}

impl Sampler for DistributedSampler {
    fn len(&self) -> usize {
        self.num_samples()
    }
    fn pass(&mut self) -> Result<Vec<usize>> {
        const OP: &str = "DistributedSampler";
        let total = self
            .num_samples()
            .checked_mul(self.num_replicas)
            .ok_or_else(|| {
                invalid(
                    OP,
                    "dataset",
                    format!(
                        "{} samples padded to a multiple of {} replicas overflow",
                        self.n, self.num_replicas
                    ),
                )
            })?;
        let mut idx: Vec<usize> = if self.shuffle {
            let seed = self.seed.wrapping_add(self.epoch);
            randperm(&mut Generator::with_seed(seed), self.n)?
        } else {
            iota(OP, self.n)?
        };
        if let Some(extra) = total.checked_sub(idx.len()) {
            idx.try_reserve_exact(extra)
                .map_err(|_| Error::OutOfMemory {
                    op: OP,
                    bytes: total as u128 * 8,
                })?;
        }
        if !self.drop_last {
            let pad = total - idx.len();
            if pad > 0 && idx.is_empty() {
                return Err(invalid(OP, "dataset", "empty data set"));
            }
            if pad <= idx.len() {
                idx.extend_from_within(..pad);
            } else {
                let base = idx.clone();
                while idx.len() < total {
                    let need = (total - idx.len()).min(base.len());
                    idx.extend_from_slice(&base[..need]);
                }
            }
        } else {
            idx.truncate(total);
        }
        Ok(idx
            .into_iter()
            .skip(self.rank)
            .step_by(self.num_replicas)
            .collect())
    }
    fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }
}

/// `BatchSampler(sampler, batch_size, drop_last)`: consecutive groups of `batch_size`
/// indices; the last, shorter group is dropped if `drop_last`.
pub struct BatchSampler {
    sampler: Box<dyn Sampler>,
    batch_size: usize,
    drop_last: bool,
}

impl BatchSampler {
    /// Batches of `batch_size` from `sampler`.
    ///
    /// # Errors
    /// If `batch_size` is 0.
    pub fn new(sampler: Box<dyn Sampler>, batch_size: usize, drop_last: bool) -> Result<Self> {
        if batch_size == 0 {
            return Err(invalid(
                "BatchSampler",
                "batch_size",
                "batch_size should be a positive integer value, but got batch_size=0",
            ));
        }
        Ok(Self {
            sampler,
            batch_size,
            drop_last,
        })
    }

    /// Number of batches per pass.
    pub fn len(&self) -> usize {
        if self.drop_last {
            self.sampler.len() / self.batch_size
        } else {
            self.sampler.len().div_ceil(self.batch_size)
        }
    }

    /// Whether a pass has no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The batches of the next pass.
    ///
    /// # Errors
    /// As the inner sampler's [`Sampler::pass`].
    pub fn pass(&mut self) -> Result<Vec<Vec<usize>>> {
        const OP: &str = "BatchSampler";
        let idx = self.sampler.pass()?;
        let mut out: Vec<Vec<usize>> = try_with_capacity(OP, idx.len().div_ceil(self.batch_size))?;
        for c in idx.chunks(self.batch_size) {
            let mut b = try_with_capacity(OP, c.len())?;
            b.extend_from_slice(c);
            out.push(b);
        }
        if self.drop_last && out.last().is_some_and(|b| b.len() < self.batch_size) {
            out.pop();
        }
        Ok(out)
    }

    /// The inner sampler.
    pub fn sampler(&self) -> &dyn Sampler {
        &*self.sampler
    }

    /// The inner sampler, mutably (e.g. for `set_epoch`).
    pub fn sampler_mut(&mut self) -> &mut dyn Sampler {
        &mut *self.sampler
    }

    /// The batch size.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
}

pub(crate) fn check_index(op: &'static str, index: usize, len: usize) -> Result<()> {
    if index < len {
        Ok(())
    } else {
        Err(Error::IndexOutOfRange { op, index, len })
    }
}
