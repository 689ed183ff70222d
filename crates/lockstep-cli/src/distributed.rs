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
//! same as one process computing the micro-shards one after the other: in `--seeding
//! invariant` that is every run's definition of a step's gradient, with `m` =
//! [`DEFAULT_MICRO_BATCH`] unless `--micro-batch` says otherwise.
//!
//! [`Shards`] is the exchange: [`Local`] for one process, `Mpi` (feature `mpi`) over MPI.
//! The design and its cost model: `docs/distributed.md`.

pub use crate::shards::{
    DEFAULT_MICRO_BATCH, Local, Shards, micro_batch_size, own_count, tree_sum,
};

use crate::names::Seeding;
use lockstep::{Error, Result};

/// The configuration of `--distributed`: invariant seeding and no loader workers are
/// required (the micro-shards are invariant seeding's, as on one process).
///
/// # Errors
/// Another seeding, workers.
pub fn distributed_config(cfg: &crate::train::TrainConfig) -> Result<crate::train::TrainConfig> {
    if cfg.seeding != Seeding::Invariant {
        return Err(Error::config(format!(
            "--distributed needs --seeding invariant (each sample's noise and dropout masks from \
             its own stream); got --seeding {}",
            cfg.seeding
        )));
    }
    if cfg.workers != 0 {
        return Err(Error::config(format!(
            "--distributed needs --workers 0 (got {}): every process loads the batch itself",
            cfg.workers
        )));
    }
    crate::train::check_micro_batch(cfg, 2)?;
    Ok(cfg.clone())
}

/// The configuration of `--model gpt --distributed`: invariant seeding is required.
///
/// # Errors
/// Another seeding, or what [`crate::gpt::check_config`] refuses.
pub fn distributed_gpt_config(cfg: &crate::gpt::GptConfig) -> Result<crate::gpt::GptConfig> {
    if cfg.seeding != Seeding::Invariant {
        return Err(Error::config(format!(
            "--distributed needs --seeding invariant (each window and dropout mask from its \
             own stream); got --seeding {}",
            cfg.seeding
        )));
    }
    crate::gpt::check_config(cfg)?;
    Ok(cfg.clone())
}

pub use crate::names::Reduction;

/// The default of `--collective-timeout`, in seconds.
pub const DEFAULT_COLLECTIVE_TIMEOUT_S: f64 = 300.0;

/// The options of `lockstep train --distributed` beyond the training configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct DistOptions {
    /// How long a process waits at an exchange for the others to arrive before it ends the
    /// job, naming the processes that did not arrive.
    pub collective_timeout: std::time::Duration,
    /// How gradients are summed.
    pub reduction: Reduction,
}

impl Default for DistOptions {
    fn default() -> Self {
        Self {
            collective_timeout: std::time::Duration::from_secs_f64(DEFAULT_COLLECTIVE_TIMEOUT_S),
            reduction: Reduction::Gather,
        }
    }
}

impl DistOptions {
    /// From the flags: `--collective-timeout SECS` (default
    /// [`DEFAULT_COLLECTIVE_TIMEOUT_S`]) and `--reduction gather|reduce-scatter` (default
    /// [`Reduction::Gather`]; clap refuses other names).
    ///
    /// # Errors
    /// A timeout that is not a number of seconds in `(0, 10⁶]`.
    pub fn new(timeout_s: Option<f64>, reduction: Option<Reduction>) -> Result<Self> {
        let t = timeout_s.unwrap_or(DEFAULT_COLLECTIVE_TIMEOUT_S);
        if !(t > 0.0 && t <= 1e6) {
            return Err(Error::config(format!(
                "invalid value {t} for --collective-timeout: seconds, more than 0 and at most 1000000"
            )));
        }
        Ok(Self {
            collective_timeout: std::time::Duration::from_secs_f64(t),
            reduction: reduction.unwrap_or(Reduction::Gather),
        })
    }
}

/// `lockstep train --distributed` in a build without MPI: the error.
#[cfg(not(feature = "mpi"))]
pub fn main(
    _cfg: &crate::train::TrainConfig,
    _opts: &DistOptions,
    _json: bool,
) -> std::process::ExitCode {
    eprintln!(
        "error: lockstep train --distributed: built without MPI support: rebuild with --features mpi"
    );
    std::process::ExitCode::from(2)
}

/// `lockstep train --model gpt --distributed` in a build without MPI: the error.
#[cfg(not(feature = "mpi"))]
pub fn main_gpt(
    _cfg: &crate::gpt::GptConfig,
    _opts: &DistOptions,
    _json: bool,
) -> std::process::ExitCode {
    eprintln!(
        "error: lockstep train --model gpt --distributed: built without MPI support: rebuild \
         with --features mpi"
    );
    std::process::ExitCode::from(2)
}

#[cfg(feature = "mpi")]
pub use with_mpi::{Mpi, main, main_gpt};

#[cfg(feature = "mpi")]
mod with_mpi {
    use super::{DistOptions, Reduction, Shards, own_count, tree_sum};
    use crate::shards::check_own;
    use crate::train::{self, Quiet, TrainConfig};
    use lockstep::Result;
    use lockstep::tensor::try_filled_vec;
    use mpi::collective::SystemOperation;
    use mpi::datatype::Equivalence;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use std::time::{Duration, Instant};

    /// The tag of the arrival messages that precede every exchange.
    const ARRIVAL_TAG: i32 = 0x4c53;

    /// The exchange over MPI's world communicator. Every exchange starts with an arrival
    /// check (each process tells every other the exchange's sequence number and waits, up to
    /// the timeout, for theirs), so that a process that hangs ends the job with its rank
    /// named instead of leaving the others in a collective forever; then an all-gather of
    /// fixed-size blocks (each process's own micro-shards, padded to `ceil(G / W)` vectors),
    /// or for [`Reduction::ReduceScatter`] an all-to-all of chunks and an all-gather of sums.
    pub struct Mpi {
        world: SimpleCommunicator,
        rank: usize,
        size: usize,
        timeout: Duration,
        reduction: Reduction,
        /// Exchanges so far (the arrival messages carry it).
        seq: u64,
        /// `LOCKSTEP_DIST_BENCH=1`: time the fixed-order reduction and a plain all-reduce of
        /// the same length every step, each after a barrier.
        bench: bool,
        steps: usize,
        reduce_time: Duration,
        allreduce_time: Duration,
        floats: usize,
        /// The length of the last exchange's vectors.
        len: usize,
    }

    impl Mpi {
        /// Over the world communicator of an initialized MPI.
        pub fn new(world: SimpleCommunicator, opts: &DistOptions) -> Self {
            let rank = world.rank() as usize;
            let size = world.size() as usize;
            Self {
                world,
                rank,
                size,
                timeout: opts.collective_timeout,
                reduction: opts.reduction,
                seq: 0,
                bench: std::env::var("LOCKSTEP_DIST_BENCH").is_ok_and(|v| v == "1"),
                steps: 0,
                reduce_time: Duration::ZERO,
                allreduce_time: Duration::ZERO,
                floats: 0,
                len: 0,
            }
        }

        /// Waits until every process has arrived at this exchange (`W − 1` messages of 8 bytes
        /// sent and received per process). After the timeout the job ends (`MPI_Abort`) with
        /// the ranks that did not arrive named: a request still pending cannot be abandoned.
        fn arrive(&mut self) {
            self.seq += 1;
            if self.size == 1 {
                return;
            }
            let (rank, size, seq, timeout) = (self.rank, self.size, self.seq, self.timeout);
            let mine = [seq];
            let mut theirs = vec![[0u64]; size];
            let world = &self.world;
            mpi::request::scope(|scope| {
                let mut sends = Vec::with_capacity(size - 1);
                let mut pending = Vec::with_capacity(size - 1);
                for (q, buf) in theirs.iter_mut().enumerate() {
                    if q == rank {
                        continue;
                    }
                    let p = world.process_at_rank(q as i32);
                    sends.push(p.immediate_send_with_tag(scope, &mine[..], ARRIVAL_TAG));
                    pending.push((
                        q,
                        p.immediate_receive_into_with_tag(scope, &mut buf[..], ARRIVAL_TAG),
                    ));
                }
                let start = Instant::now();
                while !pending.is_empty() {
                    pending = pending
                        .into_iter()
                        .filter_map(|(q, r)| r.test().err().map(|r| (q, r)))
                        .collect();
                    if pending.is_empty() {
                        break;
                    }
                    if start.elapsed() > timeout {
                        let missing: Vec<usize> = pending.iter().map(|(q, _)| *q).collect();
                        eprintln!(
                            "error: lockstep train --distributed: rank {rank} of {size}: \
                             collective timeout: rank{} {} did not arrive at exchange {seq} \
                             within {:.1} s (--collective-timeout); ending the job",
                            if missing.len() == 1 { "" } else { "s" },
                            missing
                                .iter()
                                .map(|q| q.to_string())
                                .collect::<Vec<_>>()
                                .join(", "),
                            timeout.as_secs_f64()
                        );
                        world.abort(3);
                    }
                    std::thread::yield_now();
                }
                for s in sends {
                    s.wait_without_status();
                }
            });
            if let Some((q, b)) = theirs
                .iter()
                .enumerate()
                .find(|&(q, b)| q != rank && b[0] != seq)
            {
                // Every process makes the same exchanges in the same order; if not, say so.
                eprintln!(
                    "error: lockstep train --distributed: rank {rank} of {size}: at exchange \
                     {seq}, rank {q} is at exchange {} (the processes diverged)",
                    b[0]
                );
                world.abort(4);
            }
        }

        /// All `g` micro-shards' vectors in micro-shard order (micro-shard `k` from rank
        /// `k mod W`, slot `k div W`).
        fn gather_blocks<T: Equivalence + Copy + Default>(
            &mut self,
            own: &[Vec<T>],
            g: usize,
            len: usize,
        ) -> Result<Vec<Vec<T>>> {
            check_own(own, own_count(g, self.rank, self.size), len)?;
            let slots = g.div_ceil(self.size);
            let mut send = try_filled_vec("distributed gather", slots * len, T::default())?;
            for (j, v) in own.iter().enumerate() {
                send[j * len..(j + 1) * len].copy_from_slice(v);
            }
            let mut recv =
                try_filled_vec("distributed gather", self.size * send.len(), T::default())?;
            self.arrive();
            self.world.all_gather_into(&send[..], &mut recv[..]);
            let all = (0..g)
                .map(|k| {
                    let at = ((k % self.size) * slots + k / self.size) * len;
                    recv[at..at + len].to_vec()
                })
                .collect();
            self.floats += recv.len();
            Ok(all)
        }

        /// The fixed-tree sum with each process adding one chunk of the vector: an
        /// all-to-all gives process `j` chunk `j` of every micro-shard's vector, it adds them
        /// with [`tree_sum`] (element-wise, so the same bits as summing whole vectors), and an
        /// all-gather of the summed chunks gives everyone the whole sum.
        fn reduce_scatter(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<f32>> {
            check_own(own, own_count(g, self.rank, self.size), len)?;
            let (w, slots, chunk) = (self.size, g.div_ceil(self.size), len.div_ceil(self.size));
            // To rank q: this rank's micro-shards' chunk q, `slots` blocks of `chunk` floats.
            let mut send = try_filled_vec("distributed reduce-scatter", w * slots * chunk, 0f32)?;
            for (j, v) in own.iter().enumerate() {
                for q in 0..w {
                    let (lo, hi) = ((q * chunk).min(len), ((q + 1) * chunk).min(len));
                    let at = (q * slots + j) * chunk;
                    send[at..at + hi - lo].copy_from_slice(&v[lo..hi]);
                }
            }
            let mut recv = try_filled_vec("distributed reduce-scatter", send.len(), 0f32)?;
            self.arrive();
            self.world.all_to_all_into(&send[..], &mut recv[..]);
            let parts: Vec<Vec<f32>> = (0..g)
                .map(|k| {
                    let at = ((k % w) * slots + k / w) * chunk;
                    recv[at..at + chunk].to_vec()
                })
                .collect();
            let mine = tree_sum(&parts);
            let mut full = try_filled_vec("distributed reduce-scatter", w * chunk, 0f32)?;
            self.arrive();
            self.world.all_gather_into(&mine[..], &mut full[..]);
            full.truncate(len);
            self.floats += recv.len() + full.len();
            Ok(full)
        }
    }

    impl Shards for Mpi {
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn gather(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<Vec<f32>>> {
            self.gather_blocks(own, g, len)
        }
        fn gather_f64(&mut self, own: &[Vec<f64>], g: usize, len: usize) -> Result<Vec<Vec<f64>>> {
            self.gather_blocks(own, g, len)
        }
        fn reduce(&mut self, own: &[Vec<f32>], g: usize, len: usize) -> Result<Vec<f32>> {
            if self.bench {
                // Timed from when every process is ready: the exchange, not the wait for the
                // slowest process's backward.
                self.world.barrier();
            }
            let t = Instant::now();
            let sum = match self.reduction {
                Reduction::Gather => tree_sum(&self.gather(own, g, len)?),
                Reduction::ReduceScatter => self.reduce_scatter(own, g, len)?,
            };
            self.reduce_time += t.elapsed();
            self.len = len;
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
                tree_sum(own)
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
                    "reduction": self.reduction.as_str(),
                    "fixed_order_reduction_ms_per_step": per(self.reduce_time),
                    "plain_allreduce_ms_per_step": per(self.allreduce_time),
                    "received_floats_per_step": self.floats / self.steps,
                })
            );
        }
    }

    /// `mpirun -np W lockstep train --distributed …`: every process trains (rank 0 reports);
    /// an error on any process aborts the job (`MPI_Abort`) with a message naming the rank.
    pub fn main(cfg: &TrainConfig, opts: &DistOptions, json: bool) -> std::process::ExitCode {
        on_world(
            "lockstep train --distributed",
            opts,
            || super::distributed_config(cfg),
            |cfg, rank, shards| {
                if rank == 0 {
                    let mut bar = train::Bar::new(json, cfg.batch_size);
                    let r = train::run_distributed(cfg, &mut bar, shards);
                    if r.is_err() {
                        train::Progress::finish(&mut bar);
                    }
                    r
                } else {
                    train::run_distributed(cfg, &mut Quiet, shards)
                }
            },
            |r| train::print_report(r, json),
        )
    }

    /// `mpirun -np W lockstep train --model gpt --seeding invariant --distributed …`: as
    /// [`main`], with gpt's run and report.
    pub fn main_gpt(
        cfg: &crate::gpt::GptConfig,
        opts: &DistOptions,
        json: bool,
    ) -> std::process::ExitCode {
        on_world(
            "lockstep train --model gpt --distributed",
            opts,
            || super::distributed_gpt_config(cfg),
            |cfg, _, shards| crate::gpt::run_distributed(cfg, shards),
            |r| crate::gpt::print_report(r, json),
        )
    }

    /// Runs `body` on every process of MPI's world (after `check`, whose error rank 0
    /// prints before all exit 2); rank 0 prints the result. An error or panic on any process
    /// aborts the job naming the rank.
    fn on_world<C, R>(
        what: &'static str,
        opts: &DistOptions,
        check: impl FnOnce() -> Result<C>,
        body: impl FnOnce(&C, i32, &mut Mpi) -> Result<R>,
        print: impl FnOnce(&R),
    ) -> std::process::ExitCode {
        let Some(universe) = mpi::initialize() else {
            eprintln!("error: {what}: MPI is already initialized");
            return std::process::ExitCode::from(2);
        };
        let world = universe.world();
        let (rank, size) = (world.rank(), world.size());
        // Errors in the flags are the same on every process: rank 0 says so, all exit.
        let cfg = match check() {
            Ok(c) => c,
            Err(e) => {
                if rank == 0 {
                    eprintln!("error: {what}: {e}");
                }
                drop(universe);
                return std::process::ExitCode::from(2);
            }
        };
        // A panic on one process must not leave the others waiting in a collective.
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default_hook(info);
            eprintln!("error: {what}: rank {rank} of {size} panicked");
            SimpleCommunicator::world().abort(101);
        }));
        let fail = |e: &dyn std::fmt::Display| -> ! {
            eprintln!("error: {what}: rank {rank} of {size}: {e}");
            SimpleCommunicator::world().abort(2)
        };
        if std::env::var("LOCKSTEP_TEST_FAIL_RANK").is_ok_and(|v| v == rank.to_string()) {
            // For the tests: one process fails while the others wait in the first exchange.
            fail(&"injected failure (LOCKSTEP_TEST_FAIL_RANK)");
        }
        if std::env::var("LOCKSTEP_TEST_HANG_RANK").is_ok_and(|v| v == rank.to_string()) {
            // For the tests: one process hangs (alive, never arriving) until the others'
            // collective timeout ends the job.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        let mut shards = Mpi::new(world, opts);
        match body(&cfg, rank, &mut shards) {
            Ok(r) => {
                if rank == 0 {
                    print(&r);
                }
                drop(universe);
                std::process::ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        }
    }
}
