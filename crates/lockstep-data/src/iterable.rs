//! [`IterableLoader`]: `DataLoader` over an [`IterableDataset`].

use crate::collate::{Collate, DefaultCollate, Stack};
use crate::dataset::IterableDataset;
use crate::error::{Error, Result, invalid, panic_message};
use crate::rng::{SharedGenerator, WorkerInfo, set_worker_info};
use lockstep_rng::compat::torch as t;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `DataLoader(iterable_dataset, batch_size, drop_last, num_workers, generator)`.
///
/// Each `iter()` draws `base_seed` from the generator as PyTorch does. With workers, worker
/// `w` iterates its own shard (the data set sees its [`WorkerInfo`]), groups `batch_size`
/// items into a batch (the last one shorter unless `drop_last`), and the batches come out
/// round robin — worker 0's first, worker 1's first, … — skipping exhausted workers, exactly
/// PyTorch's order, whatever the timing. An item error or panic yields an
/// [`Error::Worker`] naming the worker and the item's position in its shard, then the pass
/// ends. With a [`timeout`](Self::timeout), a worker that produces no batch in time (a stuck
/// iterator) ends the pass with [`Error::Timeout`] instead of hanging.
pub struct IterableLoader<D: IterableDataset, C = DefaultCollate> {
    dataset: Arc<D>,
    collate: Arc<C>,
    batch_size: usize,
    drop_last: bool,
    num_workers: usize,
    prefetch_factor: usize,
    generator: SharedGenerator,
    timeout: Option<Duration>,
}

impl<D: IterableDataset + 'static> IterableLoader<D>
where
    D::Item: Stack,
{
    /// A loader with default collation.
    ///
    /// # Errors
    /// As [`with_collate`](Self::with_collate).
    pub fn new(dataset: D, batch_size: usize, drop_last: bool, num_workers: usize) -> Result<Self> {
        Self::with_collate(dataset, batch_size, drop_last, num_workers, DefaultCollate)
    }
}

impl<D: IterableDataset + 'static, C: Collate<D::Item> + 'static> IterableLoader<D, C> {
    /// A loader with a custom `collate_fn`.
    ///
    /// # Errors
    /// If `batch_size` is 0, or `num_workers` is above [`MAX_WORKERS`](crate::loader::MAX_WORKERS).
    pub fn with_collate(
        dataset: D,
        batch_size: usize,
        drop_last: bool,
        num_workers: usize,
        collate: C,
    ) -> Result<Self> {
        if batch_size == 0 {
            return Err(invalid(
                "DataLoader",
                "batch_size",
                "batch_size should be a positive integer value, but got batch_size=0",
            ));
        }
        if num_workers > crate::loader::MAX_WORKERS {
            return Err(invalid(
                "DataLoader",
                "num_workers",
                format!(
                    "{num_workers} worker threads is more than a DataLoader starts ({})",
                    crate::loader::MAX_WORKERS
                ),
            ));
        }
        Ok(Self {
            dataset: Arc::new(dataset),
            collate: Arc::new(collate),
            batch_size,
            drop_last,
            num_workers,
            prefetch_factor: 2,
            generator: SharedGenerator::Default,
            timeout: None,
        })
    }

    /// The generator `base_seed` is drawn from (default: the default generator).
    pub fn generator(mut self, g: SharedGenerator) -> Self {
        self.generator = g;
        self
    }

    /// Batches buffered per worker (default 2).
    pub fn prefetch_factor(mut self, n: usize) -> Self {
        self.prefetch_factor = n.max(1);
        self
    }

    /// `timeout` (the map-style loader's option): the longest wait for one batch. When it
    /// passes, the pass ends with [`Error::Timeout`] naming the batch, the worker and the
    /// positions in that worker's shard of the items it was gathering (an iterable data set
    /// has no sample indices). The stuck worker thread is left to finish on its own. Default:
    /// wait as long as the workers live.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// `iter(loader)`: one pass; returns the batches in PyTorch's order.
    pub fn iter(&mut self) -> IterableIter<C::Batch> {
        let base_seed = self.generator.with(t::random_i64) as u64;
        let w_count = self.num_workers.max(1);
        let mut rxs = Vec::with_capacity(w_count);
        let mut handles = Vec::with_capacity(w_count);
        for w in 0..w_count {
            let (tx, rx) = mpsc::sync_channel::<Result<C::Batch>>(self.prefetch_factor);
            let info = (self.num_workers > 0).then(|| WorkerInfo {
                id: w,
                num_workers: self.num_workers,
                seed: base_seed.wrapping_add(w as u64),
            });
            let (ds, collate) = (Arc::clone(&self.dataset), Arc::clone(&self.collate));
            let (bs, drop_last) = (self.batch_size, self.drop_last);
            let run = move || {
                set_worker_info(info.clone());
                let mut it = match catch_unwind(AssertUnwindSafe(|| ds.iter(info.as_ref()))) {
                    Ok(it) => it,
                    Err(p) => {
                        let _ = tx.send(Err(Error::Worker {
                            worker: w,
                            reason: format!("IterableDataset::iter {}", panic_message(&*p)),
                        }));
                        return;
                    }
                };
                let mut pos = 0usize;
                loop {
                    // Not `bs` up front: a huge batch_size must not be reserved before items exist.
                    let mut items = Vec::with_capacity(bs.min(1024));
                    while items.len() < bs {
                        match catch_unwind(AssertUnwindSafe(|| it.next())) {
                            Ok(Some(Ok(x))) => items.push(x),
                            Ok(None) => break,
                            Ok(Some(Err(e))) => {
                                let _ = tx.send(Err(Error::Worker {
                                    worker: w,
                                    reason: format!("item {pos} of its shard: {e}"),
                                }));
                                return;
                            }
                            Err(p) => {
                                let _ = tx.send(Err(Error::Worker {
                                    worker: w,
                                    reason: format!(
                                        "item {pos} of its shard {}",
                                        panic_message(&*p)
                                    ),
                                }));
                                return;
                            }
                        }
                        pos += 1;
                    }
                    let last = items.len() < bs;
                    if items.is_empty() || (last && drop_last) {
                        return;
                    }
                    let r = match catch_unwind(AssertUnwindSafe(|| collate.collate(items))) {
                        Ok(r) => r,
                        Err(p) => Err(Error::Worker {
                            worker: w,
                            reason: format!("collate_fn {}", panic_message(&*p)),
                        }),
                    };
                    let failed = r.is_err();
                    if tx.send(r).is_err() || failed || last {
                        return;
                    }
                }
            };
            match std::thread::Builder::new()
                .name(format!("lockstep-data-iterable-{w}"))
                .spawn(run)
            {
                Ok(h) => handles.push(Some(h)),
                Err(e) => {
                    return IterableIter {
                        rxs: Vec::new(),
                        handles: Vec::new(),
                        active: Vec::new(),
                        received: Vec::new(),
                        batch: 0,
                        batch_size: self.batch_size,
                        timeout: self.timeout,
                        next_worker: 0,
                        pending: Some(Error::Worker {
                            worker: w,
                            reason: format!("cannot start thread: {e}"),
                        }),
                        base_seed,
                    };
                }
            }
            rxs.push(rx);
        }
        IterableIter {
            active: vec![true; rxs.len()],
            received: vec![0; rxs.len()],
            batch: 0,
            batch_size: self.batch_size,
            timeout: self.timeout,
            rxs,
            handles,
            next_worker: 0,
            pending: None,
            base_seed,
        }
    }
}

/// One pass of an [`IterableLoader`].
pub struct IterableIter<B> {
    rxs: Vec<Receiver<Result<B>>>,
    handles: Vec<Option<JoinHandle<()>>>,
    active: Vec<bool>,
    /// Batches received from each worker (its next batch's position in its shard).
    received: Vec<usize>,
    /// Batches yielded in this pass.
    batch: usize,
    batch_size: usize,
    timeout: Option<Duration>,
    next_worker: usize,
    pending: Option<Error>,
    base_seed: u64,
}

impl<B> IterableIter<B> {
    /// This pass's `base_seed`.
    pub fn base_seed(&self) -> u64 {
        self.base_seed
    }

    fn stop(&mut self) {
        self.active.iter_mut().for_each(|a| *a = false);
        self.rxs.clear();
    }
}

impl<B> Iterator for IterableIter<B> {
    type Item = Result<B>;

    fn next(&mut self) -> Option<Result<B>> {
        if let Some(e) = self.pending.take() {
            self.stop();
            return Some(Err(e));
        }
        loop {
            let n = self.active.len();
            if !self.active.iter().any(|&a| a) {
                return None;
            }
            let w = self.next_worker;
            self.next_worker = (w + 1) % n;
            if !self.active[w] {
                continue;
            }
            let start = Instant::now();
            loop {
                match self.rxs[w].recv_timeout(Duration::from_millis(50)) {
                    Ok(Ok(b)) => {
                        self.received[w] += 1;
                        self.batch += 1;
                        return Some(Ok(b));
                    }
                    Ok(Err(e)) => {
                        self.stop();
                        return Some(Err(e));
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        // Exhausted (or gone after sending everything): drop it from the cycle.
                        self.active[w] = false;
                        if let Some(h) = self.handles[w].take()
                            && h.join().is_err()
                        {
                            self.stop();
                            return Some(Err(Error::Worker {
                                worker: w,
                                reason: "panicked outside the data set".into(),
                            }));
                        }
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if let Some(t) = self.timeout
                            && start.elapsed() >= t
                        {
                            let first = self.received[w].saturating_mul(self.batch_size);
                            let e = Error::Timeout {
                                batch: self.batch,
                                indices: (first..first.saturating_add(self.batch_size))
                                    .take(1024)
                                    .collect(),
                                worker: w,
                                seconds: t.as_secs_f64(),
                            };
                            self.stop();
                            return Some(Err(e));
                        }
                    }
                }
            }
        }
    }
}
