//! Data-parallel training whose results do not depend on the number of processes.
//!
//! A global batch of `B` samples is cut by position into micro-shards of `m` samples (the last
//! one shorter when `m` does not divide `B`): `G = ceil(B / m)` of them, a number that depends
//! on `B` and `m` only. Each micro-shard's gradient is computed on its own, the same way
//! wherever it runs (forward and backward on its samples, the sum-reduced loss times `1 / B`,
//! dropout masks and noise from the samples' own streams), and flattened into one `f32`
//! vector (the gradients in parameter order, then the micro-shard's loss). Process `r` of `W`
//! computes micro-shards `r, r + W, r + 2W, …`; every process gathers all `G` vectors in
//! micro-shard order and adds them with [`tree_sum`], whose shape depends on `G` only — never
//! on `W` or on the order messages arrive — so every process applies the same update, and the
//! same as one process computing the micro-shards one after the other (`--micro-batch m`).
//!
//! [`Shards`] is the exchange: [`Local`] for one process, `Mpi` (feature `mpi`) over MPI.
//! The design and its cost model: `docs/distributed.md`.

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The micro-shard size `lockstep train --distributed` uses unless `--micro-batch` says
/// otherwise.
pub const DEFAULT_MICRO_BATCH: usize = 8;

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
    fn gather(&mut self, own: &[Vec<f32>], g: usize, len: usize)
    -> Result<Vec<Vec<f32>>, BoxError>;
    /// The sum of all `g` micro-shards' vectors: [`gather`](Self::gather), then [`tree_sum`].
    ///
    /// # Errors
    /// As [`gather`](Self::gather).
    fn reduce(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<f32>, BoxError> {
        Ok(tree_sum(&self.gather(own, g, len)?))
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
    fn gather(
        &mut self,
        own: &[Vec<f32>],
        g: usize,
        len: usize,
    ) -> Result<Vec<Vec<f32>>, BoxError> {
        check_own(own, own_count(g, 0, 1), len)?;
        Ok(own.to_vec())
    }
}

/// How many of `g` micro-shards process `rank` of `w` owns.
pub fn own_count(g: usize, rank: usize, w: usize) -> usize {
    if rank >= g { 0 } else { (g - rank).div_ceil(w) }
}

fn check_own(own: &[Vec<f32>], count: usize, len: usize) -> Result<(), BoxError> {
    if own.len() != count || own.iter().any(|v| v.len() != len) {
        return Err(format!(
            "micro-shard exchange: expected {count} vectors of {len} floats, got {} (lengths {:?})",
            own.len(),
            own.iter().map(Vec::len).collect::<Vec<_>>()
        )
        .into());
    }
    Ok(())
}

/// The sum of `parts` (equal lengths, at least one) in a fixed binary tree over their
/// indices: `sum(lo..hi) = sum(lo..mid) + sum(mid..hi)` with `mid = lo + ceil((hi − lo) / 2)`,
/// element by element in `f32`. The order of additions depends on `parts.len()` only.
///
/// # Panics
/// If `parts` is empty or the lengths differ (broken internal invariants).
pub fn tree_sum(parts: &[Vec<f32>]) -> Vec<f32> {
    assert!(!parts.is_empty(), "tree_sum of no vectors");
    fn go(parts: &[Vec<f32>]) -> Vec<f32> {
        if parts.len() == 1 {
            return parts[0].clone();
        }
        let mid = parts.len().div_ceil(2);
        let mut a = go(&parts[..mid]);
        let b = go(&parts[mid..]);
        assert_eq!(a.len(), b.len(), "tree_sum of vectors of different lengths");
        for (x, y) in a.iter_mut().zip(&b) {
            *x += *y;
        }
        a
    }
    go(parts)
}

/// The configuration of `--distributed`: `--micro-batch` defaults to
/// [`DEFAULT_MICRO_BATCH`]; invariant seeding and no loader workers are required.
///
/// # Errors
/// Another seeding, workers, a model with BatchNorm.
pub fn distributed_config(
    cfg: &crate::train::TrainConfig,
) -> Result<crate::train::TrainConfig, BoxError> {
    if cfg.seeding != "invariant" {
        return Err(format!(
            "--distributed needs --seeding invariant (each sample's noise and dropout masks from \
             its own stream); got --seeding {}",
            cfg.seeding
        )
        .into());
    }
    if cfg.workers != 0 {
        return Err(format!(
            "--distributed needs --workers 0 (got {}): every process loads the batch itself",
            cfg.workers
        )
        .into());
    }
    let mut c = cfg.clone();
    if c.micro_batch == 0 {
        c.micro_batch = DEFAULT_MICRO_BATCH;
    }
    crate::train::check_micro_batch(&c, 2)?;
    Ok(c)
}

/// `lockstep train --distributed` in a build without MPI: the error.
#[cfg(not(feature = "mpi"))]
pub fn main(_cfg: &crate::train::TrainConfig, _json: bool) -> std::process::ExitCode {
    eprintln!(
        "error: lockstep train --distributed: built without MPI support: rebuild with --features mpi"
    );
    std::process::ExitCode::from(2)
}

#[cfg(feature = "mpi")]
pub use with_mpi::{Mpi, main};

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::{BoxError, Shards, check_own, own_count};
    use crate::train::{self, Quiet, TrainConfig};
    use mpi::collective::SystemOperation;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use std::time::{Duration, Instant};

    /// The exchange over MPI's world communicator: an all-gather of fixed-size blocks (each
    /// process's own micro-shards, padded to `ceil(G / W)` vectors).
    pub struct Mpi {
        world: SimpleCommunicator,
        rank: usize,
        size: usize,
        /// `LOCKSTEP_DIST_BENCH=1`: time the fixed-order reduction (all-gather and tree sum)
        /// and a plain all-reduce of the same length every step, each after a barrier.
        bench: bool,
        steps: usize,
        gather_time: Duration,
        allreduce_time: Duration,
        floats: usize,
        /// The length of the last exchange's vectors.
        len: usize,
    }

    impl Mpi {
        /// Over the world communicator of an initialized MPI.
        pub fn new(world: SimpleCommunicator) -> Self {
            let rank = world.rank() as usize;
            let size = world.size() as usize;
            Self {
                world,
                rank,
                size,
                bench: std::env::var("LOCKSTEP_DIST_BENCH").is_ok_and(|v| v == "1"),
                steps: 0,
                gather_time: Duration::ZERO,
                allreduce_time: Duration::ZERO,
                floats: 0,
                len: 0,
            }
        }
    }

    impl Shards for Mpi {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn gather(
            &mut self,
            own: &[Vec<f32>],
            g: usize,
            len: usize,
        ) -> Result<Vec<Vec<f32>>, BoxError> {
            check_own(own, own_count(g, self.rank, self.size), len)?;
            let slots = g.div_ceil(self.size);
            let mut send = vec![0f32; slots * len];
            for (j, v) in own.iter().enumerate() {
                send[j * len..(j + 1) * len].copy_from_slice(v);
            }
            let mut recv = vec![0f32; self.size * slots * len];
            self.world.all_gather_into(&send[..], &mut recv[..]);
            // Micro-shard k came from rank k mod W, slot k div W.
            let all = (0..g)
                .map(|k| {
                    let at = ((k % self.size) * slots + k / self.size) * len;
                    recv[at..at + len].to_vec()
                })
                .collect();
            self.floats += recv.len();
            self.len = len;
            Ok(all)
        }
        fn reduce(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<f32>, BoxError> {
            if self.bench {
                // Timed from when every process is ready: the exchange, not the wait for the
                // slowest process's backward.
                self.world.barrier();
            }
            let t = Instant::now();
            let sum = super::tree_sum(&self.gather(own, g, len)?);
            self.gather_time += t.elapsed();
            Ok(sum)
        }
        fn after_step(&mut self, own: &[Vec<f32>]) {
            self.steps += 1;
            if !self.bench {
                return;
            }
            // What DDP does: each process's partial sum, all-reduced in MPI's order (the bits
            // depend on W). Timed for comparison only; the result is discarded.
            let partial = if own.is_empty() {
                vec![0f32; self.len]
            } else {
                super::tree_sum(own)
            };
            self.world.barrier();
            let t = Instant::now();
            let mut out = vec![0f32; partial.len()];
            self.world
                .all_reduce_into(&partial[..], &mut out[..], SystemOperation::sum());
            self.allreduce_time += t.elapsed();
        }
        fn finish(&mut self) {
            if !self.bench || self.rank != 0 || self.steps == 0 {
                return;
            }
            let per = |d: Duration| d.as_secs_f64() * 1e3 / self.steps as f64;
            eprintln!(
                "{}",
                serde_json::json!({
                    "world_size": self.size,
                    "steps": self.steps,
                    "fixed_order_gather_and_tree_sum_ms_per_step": per(self.gather_time),
                    "plain_allreduce_ms_per_step": per(self.allreduce_time),
                    "gathered_floats_per_step": self.floats / self.steps,
                })
            );
        }
    }

    /// `mpirun -np W lockstep train --distributed …`: every process trains (rank 0 reports);
    /// an error on any process aborts the job (`MPI_Abort`) with a message naming the rank.
    pub fn main(cfg: &TrainConfig, json: bool) -> std::process::ExitCode {
        let Some(universe) = mpi::initialize() else {
            eprintln!("error: lockstep train --distributed: MPI is already initialized");
            return std::process::ExitCode::from(2);
        };
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        // Errors in the flags are the same on every process: rank 0 says so, all exit.
        let cfg = match super::distributed_config(cfg) {
            Ok(c) => c,
            Err(e) => {
                if rank == 0 {
                    eprintln!("error: lockstep train --distributed: {e}");
                }
                drop(universe);
                return std::process::ExitCode::from(2);
            }
        };
        // A panic on one process must not leave the others waiting in a collective.
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            eprintln!("error: lockstep train --distributed: rank {rank} of {size} panicked");
            SimpleCommunicator::world().abort(101);
        }));
        let fail = |e: &dyn std::fmt::Display| -> ! {
            eprintln!("error: lockstep train --distributed: rank {rank} of {size}: {e}");
            SimpleCommunicator::world().abort(2)
        };
        if std::env::var("LOCKSTEP_TEST_FAIL_RANK").is_ok_and(|v| v == rank.to_string()) {
            // For the tests: one process fails while the others wait in the first exchange.
            fail(&"injected failure (LOCKSTEP_TEST_FAIL_RANK)");
        }
        let mut shards = Mpi::new(world);
        let result = if rank == 0 {
            let mut bar = train::Bar::new(json, cfg.batch_size);
            let r = train::run_distributed(&cfg, &mut bar, &mut shards);
            if r.is_err() {
                train::Progress::finish(&mut bar);
            }
            r
        } else {
            train::run_distributed(&cfg, &mut Quiet, &mut shards)
        };
        match result {
            Ok(r) => {
                if rank == 0 {
                    train::print_report(&r, json);
                }
                drop(universe);
                std::process::ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        }
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
