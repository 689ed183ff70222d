//! [`DataLoader`]: batches in sampler order from worker threads, with PyTorch's seeding or
//! per-sample streams, and mid-epoch resume.

use crate::collate::{Collate, DefaultCollate, Stack};
use crate::dataset::Dataset;
use crate::error::{Error, Result, invalid, panic_message};
use crate::rng::{SampleRng, SharedGenerator, WorkerInfo, set_worker_info};
use crate::sampler::{BatchSampler, RandomSampler, Sampler, SequentialSampler};
use lockstep_rng::compat::torch as t;
use lockstep_rng::{Generator, default_generator};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where each sample's randomness comes from. See the crate docs for the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Seeding {
    /// PyTorch's scheme: each iterator draws `base_seed` from the loader's generator; worker
    /// `w` draws from a generator seeded `base_seed + w` and handles batches `w, w + W, …`;
    /// with `num_workers = 0` samples draw from the default generator. Same draws as PyTorch,
    /// so results change with `num_workers` and with unrelated draws on the default generator,
    /// exactly as they do in PyTorch.
    #[default]
    TorchCompatible,
    /// Each sample draws from its own stream,
    /// `numpy.random.default_rng(SeedSequence(seed, spawn_key=(epoch, index)))`
    /// ([`per_sample_generator`](crate::per_sample_generator)): identical batches at any
    /// `num_workers`, world size or timing, immune to other draws, and resumable anywhere.
    PerSample {
        /// The pipeline's seed (the SeedSequence entropy).
        seed: u64,
    },
}

/// The most worker threads a [`DataLoader`] starts (`num_workers` above it is an error, not
/// an attempt to start millions of threads).
pub const MAX_WORKERS: usize = 1024;

/// A `worker_init_fn(worker_id)`; [`get_worker_info`](crate::get_worker_info) works inside it.
pub type WorkerInitFn = Arc<dyn Fn(usize) -> Result<()> + Send + Sync>;

/// A snapshot of a [`DataLoader`] mid-epoch (or between epochs), from
/// [`LoaderIter::state_dict`] or [`DataLoader::state_dict`].
#[derive(Clone, Debug, PartialEq)]
pub struct LoaderState {
    /// The epoch of the pass in progress (or of the next pass).
    pub epoch: u64,
    /// Batches of the pass already yielded.
    pub batches_done: usize,
    /// The batches of the pass (data-set indices); empty between epochs.
    pub batches: Vec<Vec<usize>>,
    /// The pass's `base_seed` (workers get `base_seed + id`).
    pub base_seed: u64,
    /// The loader's own generator (`None` when it uses the default generator).
    pub generator: Option<Vec<u8>>,
    /// The sampler's own generator, if it has one distinct from the loader's.
    pub sampler_generator: Option<Vec<u8>>,
    /// The default generator.
    pub default_generator: Vec<u8>,
    /// TorchCompatible: each worker's generator after its last yielded batch (`None`: fresh).
    pub worker_generators: Vec<Option<Vec<u8>>>,
    /// `num_workers` when saved.
    pub num_workers: usize,
    /// The seeding mode when saved.
    pub seeding: Seeding,
    /// Whether a pass is in progress (resuming continues it instead of starting a new one).
    pub in_pass: bool,
    /// Whether the loader had persistent workers running: they keep `base_seed` and (in
    /// TorchCompatible mode) their generators across epochs, so both are part of the state.
    pub persistent: bool,
}

/// `torch.utils.data.DataLoader` over a map-style [`Dataset`].
///
/// Guarantees:
/// * batches come out in sampler order, whatever the worker timing;
/// * every sample index of the pass is in exactly one yielded batch, or an error naming it is
///   yielded (after which the pass ends); a worker never hangs the loader;
/// * [`Seeding::TorchCompatible`]: the generator draws (base seed, sampler order, worker seeds,
///   dispatch of batch `k` to worker `k mod num_workers`) are PyTorch's;
/// * [`Seeding::PerSample`]: the batches depend only on the seed, the epoch and the sampler.
pub struct DataLoader<D: Dataset, C: Collate<D::Item> = DefaultCollate> {
    dataset: Arc<D>,
    batch_sampler: BatchSampler,
    collate: Arc<C>,
    num_workers: usize,
    prefetch_factor: usize,
    persistent_workers: bool,
    timeout: Option<Duration>,
    worker_init_fn: Option<WorkerInitFn>,
    generator: SharedGenerator,
    seeding: Seeding,
    epoch: u64,
    pool: Option<Pool<C::Batch>>,
    persistent_seed: Option<u64>,
    /// Persistent workers' generator states after their last yielded batch.
    worker_states: Vec<Option<Vec<u8>>>,
    /// Generator states for the next pool started (after `load_state_dict`).
    pending_worker_states: Option<Vec<Option<Vec<u8>>>>,
    resume: Option<LoaderState>,
}

/// Builder for a [`DataLoader`], with PyTorch's argument names and defaults.
pub struct DataLoaderBuilder<D: Dataset, C = DefaultCollate> {
    dataset: Arc<D>,
    batch_size: Option<usize>,
    shuffle: bool,
    sampler: Option<Box<dyn Sampler>>,
    batch_sampler: Option<BatchSampler>,
    num_workers: usize,
    collate: C,
    drop_last: bool,
    prefetch_factor: Option<usize>,
    persistent_workers: bool,
    timeout: Option<Duration>,
    worker_init_fn: Option<WorkerInitFn>,
    generator: Option<SharedGenerator>,
    seeding: Seeding,
}

impl<D: Dataset + 'static> DataLoader<D>
where
    D::Item: Stack,
{
    /// A builder with PyTorch's defaults (`batch_size=1`, no shuffle, `num_workers=0`,
    /// default collation, TorchCompatible seeding).
    ///
    /// To share a data set between loaders, pass an `Arc<D>` (itself a [`Dataset`]).
    pub fn builder(dataset: D) -> DataLoaderBuilder<D> {
        DataLoaderBuilder::new(dataset)
    }
}

impl<D: Dataset + 'static> DataLoaderBuilder<D> {
    /// A builder with PyTorch's defaults; for samples that [`DefaultCollate`] cannot batch,
    /// follow with [`collate_fn`](Self::collate_fn).
    pub fn new(dataset: D) -> Self {
        DataLoaderBuilder {
            dataset: Arc::new(dataset),
            batch_size: None,
            shuffle: false,
            sampler: None,
            batch_sampler: None,
            num_workers: 0,
            collate: DefaultCollate,
            drop_last: false,
            prefetch_factor: None,
            persistent_workers: false,
            timeout: None,
            worker_init_fn: None,
            generator: None,
            seeding: Seeding::TorchCompatible,
        }
    }
}

impl<D: Dataset + 'static, C> DataLoaderBuilder<D, C> {
    /// `batch_size` (default 1).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = Some(n);
        self
    }
    /// `shuffle`: a [`RandomSampler`] over the data set with the loader's generator.
    pub fn shuffle(mut self, on: bool) -> Self {
        self.shuffle = on;
        self
    }
    /// `sampler` (exclusive with `shuffle`).
    pub fn sampler(mut self, s: impl Sampler + 'static) -> Self {
        self.sampler = Some(Box::new(s));
        self
    }
    /// `batch_sampler` (exclusive with `batch_size`, `shuffle`, `sampler`, `drop_last`).
    pub fn batch_sampler(mut self, b: BatchSampler) -> Self {
        self.batch_sampler = Some(b);
        self
    }
    /// `num_workers`: worker threads; 0 loads in the caller's thread.
    pub fn num_workers(mut self, n: usize) -> Self {
        self.num_workers = n;
        self
    }
    /// `collate_fn`.
    pub fn collate_fn<C2: Collate<D::Item>>(self, c: C2) -> DataLoaderBuilder<D, C2> {
        DataLoaderBuilder {
            dataset: self.dataset,
            batch_size: self.batch_size,
            shuffle: self.shuffle,
            sampler: self.sampler,
            batch_sampler: self.batch_sampler,
            num_workers: self.num_workers,
            collate: c,
            drop_last: self.drop_last,
            prefetch_factor: self.prefetch_factor,
            persistent_workers: self.persistent_workers,
            timeout: self.timeout,
            worker_init_fn: self.worker_init_fn,
            generator: self.generator,
            seeding: self.seeding,
        }
    }
    /// `drop_last`.
    pub fn drop_last(mut self, on: bool) -> Self {
        self.drop_last = on;
        self
    }
    /// `prefetch_factor`: batches in flight per worker (default 2; needs `num_workers > 0`).
    pub fn prefetch_factor(mut self, n: usize) -> Self {
        self.prefetch_factor = Some(n);
        self
    }
    /// `persistent_workers`: keep the workers (and their generators) across epochs.
    pub fn persistent_workers(mut self, on: bool) -> Self {
        self.persistent_workers = on;
        self
    }
    /// `timeout` for each batch (default: wait as long as the workers live).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// `worker_init_fn(worker_id)`, run first in each worker.
    pub fn worker_init_fn(
        mut self,
        f: impl Fn(usize) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.worker_init_fn = Some(Arc::new(f));
        self
    }
    /// `generator`: the loader's generator (base seeds, and the shuffle of `shuffle=true`).
    pub fn generator(mut self, g: SharedGenerator) -> Self {
        self.generator = Some(g);
        self
    }
    /// The seeding mode (default [`Seeding::TorchCompatible`]).
    pub fn seeding(mut self, s: Seeding) -> Self {
        self.seeding = s;
        self
    }

    /// Builds the loader, checking the arguments as PyTorch does.
    ///
    /// # Errors
    /// On conflicting arguments (`shuffle` with `sampler`, `batch_sampler` with `batch_size`,
    /// …), `batch_size=0`, `prefetch_factor` or `persistent_workers` without workers, or an
    /// empty data set with `shuffle`.
    pub fn build(self) -> Result<DataLoader<D, C>>
    where
        C: Collate<D::Item> + 'static,
    {
        const OP: &str = "DataLoader";
        if self.num_workers > MAX_WORKERS {
            return Err(invalid(
                OP,
                "num_workers",
                format!(
                    "{} worker threads is more than a DataLoader starts ({MAX_WORKERS})",
                    self.num_workers
                ),
            ));
        }
        if self.num_workers == 0 && self.prefetch_factor.is_some() {
            return Err(invalid(
                OP,
                "prefetch_factor",
                "prefetch_factor option could only be specified in multiprocessing; let num_workers > 0 to enable it",
            ));
        }
        if self.num_workers == 0 && self.persistent_workers {
            return Err(invalid(
                OP,
                "persistent_workers",
                "persistent_workers option needs num_workers > 0",
            ));
        }
        let prefetch_factor = self.prefetch_factor.unwrap_or(2);
        if prefetch_factor == 0 {
            return Err(invalid(OP, "prefetch_factor", "must be at least 1"));
        }
        if self.sampler.is_some() && self.shuffle {
            return Err(invalid(
                OP,
                "sampler",
                "sampler option is mutually exclusive with shuffle",
            ));
        }
        let generator = self.generator.unwrap_or_default();
        let batch_sampler = match self.batch_sampler {
            Some(b) => {
                if self.batch_size.is_some()
                    || self.shuffle
                    || self.sampler.is_some()
                    || self.drop_last
                {
                    return Err(invalid(
                        OP,
                        "batch_sampler",
                        "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last",
                    ));
                }
                b
            }
            None => {
                let sampler: Box<dyn Sampler> = match self.sampler {
                    Some(s) => s,
                    None if self.shuffle => {
                        let g = (!generator.is_default()).then(|| generator.clone());
                        Box::new(RandomSampler::new(self.dataset.len(), false, None, g)?)
                    }
                    None => Box::new(SequentialSampler::new(self.dataset.len())),
                };
                BatchSampler::new(sampler, self.batch_size.unwrap_or(1), self.drop_last)?
            }
        };
        Ok(DataLoader {
            dataset: self.dataset,
            batch_sampler,
            collate: Arc::new(self.collate),
            num_workers: self.num_workers,
            prefetch_factor,
            persistent_workers: self.persistent_workers,
            timeout: self.timeout,
            worker_init_fn: self.worker_init_fn,
            generator,
            seeding: self.seeding,
            epoch: 0,
            pool: None,
            persistent_seed: None,
            worker_states: Vec::new(),
            pending_worker_states: None,
            resume: None,
        })
    }
}

impl<D: Dataset + 'static, C: Collate<D::Item> + 'static> DataLoader<D, C> {
    /// Number of batches per epoch (`len(loader)`).
    pub fn len(&self) -> usize {
        self.batch_sampler.len()
    }

    /// Whether an epoch has no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data set.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }

    /// The epoch of the next pass (the PerSample stream key; 0 at first, +1 per pass).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sets the epoch of the next pass and forwards it to the sampler's `set_epoch`
    /// (as a PyTorch user calls `sampler.set_epoch(epoch)`).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.batch_sampler.sampler_mut().set_epoch(epoch);
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// Changes `num_workers` (e.g. before resuming in PerSample mode). Stops persistent workers.
    ///
    /// # Errors
    /// If `num_workers` is 0 while `persistent_workers` is on.
    pub fn set_num_workers(&mut self, n: usize) -> Result<()> {
        if n == 0 && self.persistent_workers {
            return Err(invalid(
                "DataLoader",
                "num_workers",
                "persistent_workers needs num_workers > 0",
            ));
        }
        self.pool = None;
        self.persistent_seed = None;
        self.num_workers = n;
        Ok(())
    }

    /// `iter(loader)`: starts a pass (or continues the one that
    /// [`load_state_dict`](Self::load_state_dict) restored).
    ///
    /// Draws, as PyTorch: `base_seed` from the loader's generator (once per loader with
    /// persistent workers); the sampler's pass now if `num_workers > 0`, at the first `next()`
    /// otherwise.
    pub fn iter(&mut self) -> LoaderIter<'_, D, C> {
        if let Some(st) = self.resume.take()
            && st.in_pass
        {
            return self.resumed_iter(st);
        }
        let base_seed = match (self.persistent_workers, self.persistent_seed) {
            (true, Some(s)) => s,
            _ => {
                let s = self.generator.with(t::random_i64) as u64;
                if self.persistent_workers {
                    self.persistent_seed = Some(s);
                }
                s
            }
        };
        let epoch = self.epoch;
        self.epoch += 1;
        let worker_states = if self.persistent_workers && self.pool.is_some() {
            self.worker_states.clone()
        } else {
            self.pending_worker_states
                .clone()
                .unwrap_or_else(|| vec![None; self.num_workers])
        };
        let mut it = LoaderIter {
            base_seed,
            epoch,
            batches: None,
            next_yield: 0,
            next_send: 0,
            reorder: BTreeMap::new(),
            worker_states,
            done: false,
            pending_error: None,
            loader: self,
        };
        if it.loader.num_workers > 0 {
            it.ensure_batches();
            if let Err(e) = it.start_pool(None) {
                it.pending_error = Some(e);
            }
        }
        it
    }

    fn resumed_iter(&mut self, st: LoaderState) -> LoaderIter<'_, D, C> {
        self.epoch = st.epoch + 1;
        self.pool = None;
        let mut it = LoaderIter {
            base_seed: st.base_seed,
            epoch: st.epoch,
            batches: Some(st.batches),
            next_yield: st.batches_done,
            next_send: st.batches_done,
            reorder: BTreeMap::new(),
            worker_states: vec![None; self.num_workers],
            done: false,
            pending_error: None,
            loader: self,
        };
        if it.loader.num_workers > 0 {
            let states = if st.seeding == Seeding::TorchCompatible {
                Some(st.worker_generators)
            } else {
                None
            };
            if let Some(s) = &states {
                it.worker_states = s.clone();
            }
            if let Err(e) = it.start_pool(states) {
                it.pending_error = Some(e);
            }
        }
        it
    }

    /// The state between epochs (see [`LoaderIter::state_dict`] for mid-epoch).
    pub fn state_dict(&self) -> LoaderState {
        if let Some(r) = &self.resume {
            return r.clone();
        }
        let persistent = self.persistent_seed.is_some();
        LoaderState {
            epoch: self.epoch,
            batches_done: 0,
            batches: Vec::new(),
            base_seed: self.persistent_seed.unwrap_or(0),
            generator: (!self.generator.is_default()).then(|| self.generator.get_state()),
            sampler_generator: self.sampler_generator_state(),
            default_generator: default_generator().get_state(),
            worker_generators: if persistent {
                self.worker_states.clone()
            } else {
                Vec::new()
            },
            num_workers: self.num_workers,
            seeding: self.seeding,
            in_pass: false,
            persistent,
        }
    }

    fn sampler_generator_state(&self) -> Option<Vec<u8>> {
        match self.batch_sampler.sampler().generator() {
            Some(SharedGenerator::Shared(a)) => match &self.generator {
                SharedGenerator::Shared(b) if Arc::ptr_eq(a, b) => None,
                _ => Some(crate::rng::lock(a).get_state()),
            },
            _ => None,
        }
    }

    /// Restores a state from [`state_dict`](Self::state_dict) or [`LoaderIter::state_dict`]:
    /// the generators (the loader's, the sampler's and the default generator) at once, and the
    /// pass position for the next [`iter`](Self::iter), which then yields exactly the batches
    /// that an uninterrupted run would have yielded after the saved point.
    ///
    /// In PerSample mode this holds at any `num_workers`; in TorchCompatible mode a mid-epoch
    /// state needs the `num_workers` it was saved with (the worker generators are part of it).
    ///
    /// # Errors
    /// If the seeding mode differs, TorchCompatible `num_workers` differs mid-epoch, the
    /// position is past the pass, or a generator state is invalid.
    pub fn load_state_dict(&mut self, st: LoaderState) -> Result<()> {
        const OP: &str = "load_state_dict";
        let bad = |reason: String| Error::State { op: OP, reason };
        if st.seeding != self.seeding {
            return Err(bad(format!(
                "saved with {:?}, loader uses {:?}",
                st.seeding, self.seeding
            )));
        }
        if st.in_pass {
            if st.batches_done > st.batches.len() {
                return Err(bad(format!(
                    "position {} is past the pass of {} batches",
                    st.batches_done,
                    st.batches.len()
                )));
            }
            if self.seeding == Seeding::TorchCompatible && st.num_workers != self.num_workers {
                return Err(bad(format!(
                    "a TorchCompatible state saved mid-epoch with num_workers={} cannot resume with num_workers={} (use Seeding::PerSample for that)",
                    st.num_workers, self.num_workers
                )));
            }
            let n = self.dataset.len();
            if let Some(&i) = st.batches.iter().flatten().find(|&&i| i >= n) {
                return Err(bad(format!(
                    "sample index {i} is out of range for {n} samples"
                )));
            }
        }
        if self.persistent_workers && st.persistent && st.num_workers != self.num_workers {
            return Err(bad(format!(
                "persistent workers saved with num_workers={} cannot continue with num_workers={}",
                st.num_workers, self.num_workers
            )));
        }
        // The worker generators are used (one per worker) when resuming a TorchCompatible pass
        // with workers, and by persistent workers between epochs (empty: fresh workers).
        let gens = st.worker_generators.len();
        let torch_pass =
            st.in_pass && self.seeding == Seeding::TorchCompatible && self.num_workers > 0;
        let persistent_gens = self.persistent_workers && st.persistent && !st.in_pass && gens > 0;
        if (torch_pass || persistent_gens) && gens != self.num_workers {
            return Err(bad(format!(
                "{gens} worker generator states for {} workers",
                self.num_workers
            )));
        }
        // Validate everything before changing anything: an error leaves the loader as it was.
        if !matches!(
            (&st.generator, &self.generator),
            (Some(_), SharedGenerator::Shared(_)) | (None, SharedGenerator::Default)
        ) {
            return Err(bad("the loader's generator kind differs".into()));
        }
        let check = |what: &str, b: &[u8]| {
            Generator::with_seed(0)
                .set_state(b)
                .map_err(|e| bad(format!("{what}: {e}")))
        };
        if let Some(b) = &st.generator {
            check("the loader's generator", b)?;
        }
        if let Some(b) = &st.sampler_generator {
            check("the sampler's generator", b)?;
        }
        check("the default generator", &st.default_generator)?;
        for (w, b) in st.worker_generators.iter().enumerate() {
            if let Some(b) = b {
                check(&format!("worker {w}'s generator"), b)?;
            }
        }
        // Now apply (each state was checked, so these cannot fail).
        if let (Some(b), g @ SharedGenerator::Shared(_)) = (&st.generator, &self.generator) {
            g.set_state(b)?;
        }
        if let (Some(b), Some(g)) = (
            &st.sampler_generator,
            self.batch_sampler.sampler().generator(),
        ) {
            g.set_state(b)?;
        }
        default_generator().set_state(&st.default_generator)?;
        self.pool = None;
        self.persistent_seed = (self.persistent_workers && st.persistent).then_some(st.base_seed);
        self.pending_worker_states = (self.persistent_workers && st.persistent && !st.in_pass)
            .then(|| st.worker_generators.clone());
        self.epoch = st.epoch;
        self.batch_sampler.sampler_mut().set_epoch(st.epoch);
        self.resume = Some(st);
        Ok(())
    }
}

impl<'a, D: Dataset + 'static, C: Collate<D::Item> + 'static> IntoIterator
    for &'a mut DataLoader<D, C>
{
    type Item = Result<C::Batch>;
    type IntoIter = LoaderIter<'a, D, C>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Loads one batch: each sample with its random source, then collation; panics are caught and
/// reported with the sample index.
#[allow(clippy::too_many_arguments)]
fn load_batch<D: Dataset, C: Collate<D::Item>>(
    ds: &D,
    collate: &C,
    seeding: Seeding,
    epoch: u64,
    batch_no: usize,
    indices: &[usize],
    worker: Option<usize>,
    mut torch_gen: Option<&mut Generator>,
) -> Result<C::Batch> {
    let mut items = Vec::with_capacity(indices.len());
    for &index in indices {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut rng = match (seeding, torch_gen.as_deref_mut()) {
                (Seeding::PerSample { seed }, _) => SampleRng::per_sample(seed, epoch, index),
                (Seeding::TorchCompatible, Some(g)) => SampleRng::torch(g),
                (Seeding::TorchCompatible, None) => SampleRng::global(),
            };
            ds.get(index, &mut rng)
        }));
        match r {
            Ok(Ok(x)) => items.push(x),
            Ok(Err(e)) => {
                return Err(Error::Sample {
                    index,
                    worker,
                    reason: e.to_string(),
                });
            }
            Err(p) => {
                return Err(Error::Sample {
                    index,
                    worker,
                    reason: panic_message(&*p),
                });
            }
        }
    }
    match catch_unwind(AssertUnwindSafe(|| collate.collate(items))) {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err(Error::Collate {
            batch: batch_no,
            indices: indices.to_vec(),
            reason: e.to_string(),
        }),
        Err(p) => Err(Error::Collate {
            batch: batch_no,
            indices: indices.to_vec(),
            reason: panic_message(&*p),
        }),
    }
}

struct Task {
    generation: u64,
    batch_no: usize,
    epoch: u64,
    indices: Vec<usize>,
}

struct Msg<B> {
    generation: u64,
    batch_no: usize,
    result: Result<B>,
    gen_state: Option<Vec<u8>>,
}

enum Reply<B> {
    Batch(Msg<B>),
    InitFailed(Error),
}

struct Pool<B> {
    senders: Vec<Sender<Task>>,
    results: Receiver<Reply<B>>,
    handles: Vec<JoinHandle<()>>,
    generation: u64,
}

impl<B> Drop for Pool<B> {
    fn drop(&mut self) {
        self.senders.clear();
        // Workers finish the sample in hand and exit; do not wait on a stuck one.
        for h in self.handles.drain(..) {
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

/// The iterator of one pass: yields `Ok(batch)` in sampler order, or one `Err` naming the
/// failing sample (after which the pass ends).
pub struct LoaderIter<'a, D: Dataset + 'static, C: Collate<D::Item> + 'static> {
    loader: &'a mut DataLoader<D, C>,
    base_seed: u64,
    epoch: u64,
    batches: Option<Vec<Vec<usize>>>,
    next_yield: usize,
    next_send: usize,
    reorder: BTreeMap<usize, Msg<C::Batch>>,
    worker_states: Vec<Option<Vec<u8>>>,
    done: bool,
    pending_error: Option<Error>,
}

impl<D: Dataset + 'static, C: Collate<D::Item> + 'static> LoaderIter<'_, D, C> {
    /// This pass's `base_seed`.
    pub fn base_seed(&self) -> u64 {
        self.base_seed
    }

    /// This pass's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Batches yielded so far in this pass.
    pub fn batches_done(&self) -> usize {
        self.next_yield
    }

    /// The worker info of worker `w` in this pass.
    pub fn worker_info(&self, w: usize) -> WorkerInfo {
        WorkerInfo {
            id: w,
            num_workers: self.loader.num_workers,
            seed: self.base_seed.wrapping_add(w as u64),
        }
    }

    fn ensure_batches(&mut self) {
        if self.batches.is_none() {
            match self.loader.batch_sampler.pass() {
                Ok(b) => self.batches = Some(b),
                Err(e) => {
                    self.batches = Some(Vec::new());
                    self.pending_error = Some(e);
                }
            }
        }
    }

    /// The state after the batches yielded so far: loading it into a loader (with
    /// [`DataLoader::load_state_dict`]) and iterating yields exactly the remaining batches.
    /// Draws the pass's order first if it has not been drawn yet (`num_workers = 0`, before
    /// the first `next()`).
    pub fn state_dict(&mut self) -> LoaderState {
        self.ensure_batches();
        let l = &*self.loader;
        LoaderState {
            epoch: self.epoch,
            batches_done: self.next_yield,
            batches: self.batches.clone().unwrap_or_default(),
            base_seed: self.base_seed,
            generator: (!l.generator.is_default()).then(|| l.generator.get_state()),
            sampler_generator: l.sampler_generator_state(),
            default_generator: default_generator().get_state(),
            worker_generators: self.worker_states.clone(),
            num_workers: l.num_workers,
            seeding: l.seeding,
            in_pass: true,
            persistent: l.persistent_workers,
        }
    }

    fn start_pool(&mut self, states: Option<Vec<Option<Vec<u8>>>>) -> Result<()> {
        let l = &mut *self.loader;
        if let Some(pool) = &mut l.pool {
            pool.generation += 1;
            return Ok(());
        }
        let states = states.or_else(|| l.pending_worker_states.take());
        let w_count = l.num_workers;
        let (rtx, rrx) = mpsc::channel::<Reply<C::Batch>>();
        let mut senders = Vec::with_capacity(w_count);
        let mut handles = Vec::with_capacity(w_count);
        for w in 0..w_count {
            let (tx, rx) = mpsc::channel::<Task>();
            let info = WorkerInfo {
                id: w,
                num_workers: w_count,
                seed: self.base_seed.wrapping_add(w as u64),
            };
            let mut gen_ = Generator::with_seed(info.seed);
            if let Some(Some(b)) = states.as_ref().and_then(|s| s.get(w)) {
                gen_.set_state(b)?;
            }
            let ds = Arc::clone(&l.dataset);
            let collate = Arc::clone(&l.collate);
            let init = l.worker_init_fn.clone();
            let seeding = l.seeding;
            let rtx = rtx.clone();
            let h = std::thread::Builder::new()
                .name(format!("lockstep-data-worker-{w}"))
                .spawn(move || worker_loop(info, gen_, ds, collate, init, seeding, rx, rtx))
                .map_err(|e| Error::Worker {
                    worker: w,
                    reason: format!("cannot start thread: {e}"),
                })?;
            senders.push(tx);
            handles.push(h);
        }
        l.pool = Some(Pool {
            senders,
            results: rrx,
            handles,
            generation: 0,
        });
        Ok(())
    }

    fn dispatch(&mut self) {
        let Some(batches) = &self.batches else { return };
        let l = &*self.loader;
        let Some(pool) = &l.pool else { return };
        let w = l.num_workers;
        while self.next_send < batches.len()
            && self.next_send - self.next_yield < l.prefetch_factor * w
        {
            let k = self.next_send;
            let task = Task {
                generation: pool.generation,
                batch_no: k,
                epoch: self.epoch,
                indices: batches[k].clone(),
            };
            // A closed queue means the worker is gone; `wait` reports it.
            let _ = pool.senders[k % w].send(task);
            self.next_send += 1;
        }
    }

    fn wait(&mut self, k: usize) -> Result<C::Batch> {
        let l = &*self.loader;
        let w = k % l.num_workers;
        let Some(pool) = &l.pool else {
            return Err(Error::Worker {
                worker: w,
                reason: "no worker pool".into(),
            });
        };
        let start = Instant::now();
        loop {
            if let Some(m) = self.reorder.remove(&k) {
                if let (Some(st), Some(slot)) = (m.gen_state, self.worker_states.get_mut(w)) {
                    *slot = Some(st);
                }
                return m.result;
            }
            match pool.results.recv_timeout(Duration::from_millis(50)) {
                Ok(Reply::Batch(m)) => {
                    if m.generation == pool.generation {
                        self.reorder.insert(m.batch_no, m);
                    }
                }
                Ok(Reply::InitFailed(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(t) = l.timeout
                        && start.elapsed() >= t
                    {
                        return Err(Error::Timeout {
                            batch: k,
                            indices: self
                                .batches
                                .as_ref()
                                .and_then(|b| b.get(k))
                                .cloned()
                                .unwrap_or_default(),
                            worker: w,
                            seconds: t.as_secs_f64(),
                        });
                    }
                    if pool.handles[w].is_finished() {
                        // Drain what it may have sent just before exiting.
                        while let Ok(Reply::Batch(m)) = pool.results.try_recv() {
                            if m.generation == pool.generation {
                                self.reorder.insert(m.batch_no, m);
                            }
                        }
                        if self.reorder.contains_key(&k) {
                            continue;
                        }
                        return Err(Error::Worker {
                            worker: w,
                            reason: format!("exited before producing batch {k}"),
                        });
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Worker {
                        worker: w,
                        reason: "all workers exited".into(),
                    });
                }
            }
        }
    }

    fn finish(&mut self) {
        self.done = true;
        if self.loader.persistent_workers {
            self.loader.worker_states = self.worker_states.clone();
        } else {
            self.loader.pool = None;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn worker_loop<D: Dataset, C: Collate<D::Item>>(
    info: WorkerInfo,
    mut gen_: Generator,
    ds: Arc<D>,
    collate: Arc<C>,
    init: Option<WorkerInitFn>,
    seeding: Seeding,
    rx: Receiver<Task>,
    tx: Sender<Reply<C::Batch>>,
) {
    let id = info.id;
    set_worker_info(Some(info));
    if let Some(f) = init {
        let r = catch_unwind(AssertUnwindSafe(|| f(id)));
        let err = match r {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("worker_init_fn failed: {e}")),
            Err(p) => Some(format!("worker_init_fn {}", panic_message(&*p))),
        };
        if let Some(reason) = err {
            let _ = tx.send(Reply::InitFailed(Error::Worker { worker: id, reason }));
            return;
        }
    }
    let torch = seeding == Seeding::TorchCompatible;
    while let Ok(task) = rx.recv() {
        let result = load_batch(
            &*ds,
            &*collate,
            seeding,
            task.epoch,
            task.batch_no,
            &task.indices,
            Some(id),
            Some(&mut gen_),
        );
        let msg = Msg {
            generation: task.generation,
            batch_no: task.batch_no,
            result,
            gen_state: torch.then(|| gen_.get_state()),
        };
        if tx.send(Reply::Batch(msg)).is_err() {
            return;
        }
    }
}

impl<D: Dataset + 'static, C: Collate<D::Item> + 'static> Iterator for LoaderIter<'_, D, C> {
    type Item = Result<C::Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending_error.take() {
            self.finish();
            return Some(Err(e));
        }
        self.ensure_batches();
        if let Some(e) = self.pending_error.take() {
            self.finish();
            return Some(Err(e));
        }
        let n = self.batches.as_ref().map_or(0, Vec::len);
        let k = self.next_yield;
        if k >= n {
            self.finish();
            return None;
        }
        let r = if self.loader.num_workers == 0 {
            let l = &*self.loader;
            let idx = &self.batches.as_ref().expect("drawn")[k];
            load_batch(
                &*l.dataset,
                &*l.collate,
                l.seeding,
                self.epoch,
                k,
                idx,
                None,
                None,
            )
        } else {
            self.dispatch();
            self.wait(k)
        };
        self.next_yield += 1;
        if r.is_err() {
            // The pool's state is unknown after a failure: never reuse it.
            self.loader.pool = None;
            self.finish();
        } else if self.next_yield == n {
            self.finish();
        }
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self
            .batches
            .as_ref()
            .map_or(self.loader.batch_sampler.len(), Vec::len);
        let left = if self.done {
            0
        } else {
            n - self.next_yield.min(n)
        };
        (0, Some(left))
    }
}

impl<D: Dataset + 'static, C: Collate<D::Item> + 'static> Drop for LoaderIter<'_, D, C> {
    fn drop(&mut self) {
        if !self.done {
            // An abandoned pass: persistent workers may still hold its tasks, which the next
            // pass's generation number discards.
            self.finish();
        }
    }
}

const STATE_MAGIC: &[u8; 8] = b"LSDATA01";

impl LoaderState {
    /// A self-contained byte encoding (little-endian, versioned) for checkpoints.
    pub fn to_bytes(&self) -> Vec<u8> {
        fn u(b: &mut Vec<u8>, v: u64) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        fn bytes(b: &mut Vec<u8>, v: &[u8]) {
            u(b, v.len() as u64);
            b.extend_from_slice(v);
        }
        fn opt(b: &mut Vec<u8>, v: &Option<Vec<u8>>) {
            match v {
                Some(v) => {
                    b.push(1);
                    bytes(b, v);
                }
                None => b.push(0),
            }
        }
        let mut b = STATE_MAGIC.to_vec();
        u(&mut b, self.epoch);
        u(&mut b, self.batches_done as u64);
        u(&mut b, self.batches.len() as u64);
        for batch in &self.batches {
            u(&mut b, batch.len() as u64);
            for &i in batch {
                u(&mut b, i as u64);
            }
        }
        u(&mut b, self.base_seed);
        opt(&mut b, &self.generator);
        opt(&mut b, &self.sampler_generator);
        bytes(&mut b, &self.default_generator);
        u(&mut b, self.worker_generators.len() as u64);
        for w in &self.worker_generators {
            opt(&mut b, w);
        }
        u(&mut b, self.num_workers as u64);
        match self.seeding {
            Seeding::TorchCompatible => {
                b.push(0);
                u(&mut b, 0);
            }
            Seeding::PerSample { seed } => {
                b.push(1);
                u(&mut b, seed);
            }
        }
        b.push(self.in_pass as u8);
        b.push(self.persistent as u8);
        b
    }

    /// Decodes [`to_bytes`](Self::to_bytes).
    ///
    /// # Errors
    /// [`Error::State`] if the bytes are not a complete state of this version.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        struct R<'a>(&'a [u8], usize);
        let bad = |why: String| Error::State {
            op: "LoaderState::from_bytes",
            reason: why,
        };
        impl R<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                let s = self.0.get(self.1..self.1.checked_add(n)?)?;
                self.1 += n;
                Some(s)
            }
            fn u(&mut self) -> Option<u64> {
                Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn byte(&mut self) -> Option<u8> {
                Some(self.take(1)?[0])
            }
            fn len(&mut self) -> Option<usize> {
                let n = usize::try_from(self.u()?).ok()?;
                // A length can never exceed what is left.
                (n <= self.0.len() - self.1).then_some(n)
            }
            fn bytes(&mut self) -> Option<Vec<u8>> {
                let n = self.len()?;
                Some(self.take(n)?.to_vec())
            }
            fn opt(&mut self) -> Option<Option<Vec<u8>>> {
                match self.byte()? {
                    0 => Some(None),
                    1 => Some(Some(self.bytes()?)),
                    _ => None,
                }
            }
        }
        let parse = |r: &mut R<'_>| -> Option<LoaderState> {
            if r.take(8)? != STATE_MAGIC {
                return None;
            }
            let epoch = r.u()?;
            let batches_done = usize::try_from(r.u()?).ok()?;
            let nb = r.len()?;
            let mut batches = Vec::with_capacity(nb);
            for _ in 0..nb {
                let n = r.len()?;
                batches.push(
                    (0..n)
                        .map(|_| r.u().and_then(|i| usize::try_from(i).ok()))
                        .collect::<Option<Vec<_>>>()?,
                );
            }
            let base_seed = r.u()?;
            let generator = r.opt()?;
            let sampler_generator = r.opt()?;
            let default_generator = r.bytes()?;
            let nw = r.len()?;
            let worker_generators = (0..nw).map(|_| r.opt()).collect::<Option<Vec<_>>>()?;
            let num_workers = usize::try_from(r.u()?).ok()?;
            // Canonical encodings only: one byte string per state.
            let seeding = match (r.byte()?, r.u()?) {
                (0, 0) => Seeding::TorchCompatible,
                (1, seed) => Seeding::PerSample { seed },
                _ => return None,
            };
            let flag = |b: u8| match b {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            };
            let in_pass = flag(r.byte()?)?;
            let persistent = flag(r.byte()?)?;
            // Self-consistency: one generator per worker (or none), a position within the pass.
            if !worker_generators.is_empty() && worker_generators.len() != num_workers {
                return None;
            }
            if batches_done > batches.len() || (!in_pass && (batches_done > 0 || nb > 0)) {
                return None;
            }
            (r.1 == r.0.len()).then_some(LoaderState {
                epoch,
                batches_done,
                batches,
                base_seed,
                generator,
                sampler_generator,
                default_generator,
                worker_generators,
                num_workers,
                seeding,
                in_pass,
                persistent,
            })
        };
        parse(&mut R(b, 0)).ok_or_else(|| {
            bad(format!(
                "{} bytes are not a consistent lockstep-data loader state (version 01)",
                b.len()
            ))
        })
    }
}
