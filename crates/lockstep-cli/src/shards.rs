//! The micro-shard exchange that both training loops use: who computes which micro-shard of a
//! global batch ([`Shards`]), the fixed-order sum of their vectors ([`tree_sum`]) and the
//! micro-shard size ([`micro_batch_size`]).
//!
//! Its own module so that imports run one way: `train` and `gpt` compute micro-shards through
//! it, and `distributed` (the MPI exchange and `--distributed`'s entry points) builds on
//! `train`, `gpt` and this. The design: the `distributed` module and `docs/distributed.md`.

use lockstep::{Error, Result};

/// The micro-shard size of `--seeding invariant` (every model, one process or several)
/// unless `--micro-batch` says otherwise: a constant, so the arithmetic of a step depends on
/// its global batch only, never on the number of processes or on how the batch is split
/// into accumulation steps.
pub const DEFAULT_MICRO_BATCH: usize = 8;

/// The micro-shard size for `--micro-batch requested` (0: [`DEFAULT_MICRO_BATCH`]).
pub fn micro_batch_size(requested: usize) -> usize {
    if requested == 0 {
        DEFAULT_MICRO_BATCH
    } else {
        requested
    }
}

/// Who computes which micro-shard, and how their vectors meet.
pub trait Shards {
    /// This process's index, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of processes `W`.
    fn size(&self) -> usize;
    /// Whether micro-shard `k` is computed here (`k mod W == rank`).
    fn owns(&self, k: usize) -> bool {
        k % self.size() == self.rank()
    }
    /// All `g` micro-shards' vectors (each of `len` floats) in micro-shard order, given this
    /// process's own (`own[j]` is micro-shard `rank + j·W`).
    ///
    /// # Errors
    /// A vector of the wrong length, or a failed exchange.
    fn gather(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<Vec<f32>>>;
    /// [`gather`](Self::gather) for `f64` vectors (BatchNorm's partial statistics).
    ///
    /// # Errors
    /// As [`gather`](Self::gather).
    fn gather_f64(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>>;
    /// The sum of all `g` micro-shards' vectors: [`gather`](Self::gather), then [`tree_sum`].
    ///
    /// # Errors
    /// As [`gather`](Self::gather).
    fn reduce(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<f32>> {
        Ok(tree_sum(&self.gather(own, g, len)?))
    }
    /// Whether this process may compute the step as one pass over the whole batch whose
    /// parameter-gradient reductions add micro-shard blocks in the fixed tree (the same bits
    /// as every micro-shard on its own: one process owning them all). Default: one process.
    fn whole_batch(&self) -> bool {
        self.size() == 1
    }
    /// Called once per step with this process's own vectors (for benchmarks: the MPI
    /// exchange compares its cost with a plain all-reduce of their sum there).
    fn after_step(&mut self, _own: &[Vec<f32>]) {}
    /// Called at the end of the run (benchmark figures, if any, go to standard error).
    fn finish(&mut self) {}
}

/// One process computing every micro-shard.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl Shards for Local {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn gather(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<Vec<f32>>> {
        check_own(own, own_count(g, 0, 1), len)?;
        Ok(own.to_vec())
    }
    fn gather_f64(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>> {
        check_own(own, own_count(g, 0, 1), len)?;
        Ok(own.to_vec())
    }
}

/// How many of `g` micro-shards process `rank` of `w` owns.
pub fn own_count(g: usize, rank: usize, w: usize) -> usize {
    if rank >= g { 0 } else { (g - rank).div_ceil(w) }
}

pub(crate) fn check_own<T>(own: &[Vec<T>], count: usize, len: usize) -> Result<()> {
    if own.len() != count || own.iter().any(|v| v.len() != len) {
        return Err(Error::Exchange(format!(
            "micro-shard exchange: expected {count} vectors of {len} floats, got {} (lengths {:?})",
            own.len(),
            own.iter().map(Vec::len).collect::<Vec<_>>()
        )));
    }
    Ok(())
}

/// The sum of `parts` (equal lengths, at least one) in a fixed binary tree over their
/// indices: `sum(lo..hi) = sum(lo..mid) + sum(mid..hi)` with `mid = lo + ceil((hi − lo) / 2)`,
/// element by element in `f32`. The order of additions depends on `parts.len()` only: the
/// tree of [`tree_reduce`](lockstep::nn::batch_blocks::tree_reduce), which the one-pass
/// step's per-block tensor sums use too.
///
/// # Panics
/// If `parts` is empty or the lengths differ (broken internal invariants).
pub fn tree_sum(parts: &[Vec<f32>]) -> Vec<f32> {
    let add = &mut |mut a: Vec<f32>, b: Vec<f32>| {
        assert_eq!(a.len(), b.len(), "tree_sum of vectors of different lengths");
        for (x, y) in a.iter_mut().zip(&b) {
            *x += *y;
        }
        Ok::<_, core::convert::Infallible>(a)
    };
    match lockstep::nn::batch_blocks::tree_reduce(parts.to_vec(), add) {
        Ok(Some(s)) => s,
        Ok(None) => panic!("tree_sum of no vectors"),
        Err(e) => match e {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_covers_every_micro_shard_once() {
        for g in 0..20 {
            for w in 1..7 {
                let total: usize = (0..w).map(|r| own_count(g, r, w)).sum();
                assert_eq!(total, g, "g {g} w {w}");
            }
        }
    }

    #[test]
    fn the_tree_depends_on_the_number_of_parts_only() {
        // Values whose sum depends on the order of additions in f32.
        let parts: Vec<Vec<f32>> = (0..7)
            .map(|k| vec![1e8f32 * if k % 2 == 0 { 1.0 } else { -1.0 }, 1.0 + k as f32])
            .collect();
        let s = tree_sum(&parts);
        // ((0+1)+(2+3)) + ((4+5)+6)
        let want0 = ((1e8f32 - 1e8) + (1e8 - 1e8)) + ((1e8 - 1e8) + 1e8);
        assert_eq!(s[0].to_bits(), want0.to_bits());
        assert_eq!(s[1], 28.0);
        assert_eq!(tree_sum(&parts[..1]), parts[0]);
    }
}
