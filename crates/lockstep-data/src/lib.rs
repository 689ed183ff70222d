//! Reproducible data loading with PyTorch's semantics: data sets, samplers, a `DataLoader`
//! with worker threads, transforms and built-in data sets.
//!
//! # Two seeding modes
//!
//! | | [`Seeding::TorchCompatible`] | [`Seeding::PerSample`] (recommended) |
//! |---|---|---|
//! | sample order (shuffle, samplers) | PyTorch's, bit for bit | the same |
//! | `base_seed` per `iter(loader)` | drawn from the loader's generator as PyTorch does | drawn the same way (so the default generator advances as in PyTorch) but not used for samples |
//! | a sample's randomness | the worker's generator, seeded `base_seed + worker_id` (as `torch.manual_seed` in a PyTorch worker); with `num_workers = 0` the default generator | its own stream `default_rng(SeedSequence(seed, spawn_key=(epoch, index)))` |
//! | changes with `num_workers` | yes, as in PyTorch | no |
//! | changes with an unrelated draw on the default generator | yes (it moves `base_seed`), as in PyTorch | no |
//! | changes with world size ([`DistributedSampler`]) | yes | no: a sample's augmentation depends on its data-set index, not on which rank loads it |
//! | mid-epoch resume | exact with the same `num_workers` | exact at any `num_workers` |
//!
//! TorchCompatible exists to reproduce an existing PyTorch pipeline: the same
//! `manual_seed` gives the same order, the same worker seeds
//! ([`get_worker_info`]`().seed`), and — for transforms written with the draws documented in
//! [`transforms`] — the same augmented batches. PerSample closes the traps PyTorch users hit:
//! results that change with `num_workers`, NumPy generators duplicated across workers, an
//! unrelated `torch.rand` shifting every augmentation, no mid-epoch resume.
//!
//! In PerSample mode the stream of sample `index` in epoch `epoch` is NumPy's
//! `np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, index)))`, so it can
//! be reproduced in Python with that line. The epoch is the loader's pass counter (0, 1, …;
//! [`DataLoader::set_epoch`] sets it). A sample drawn twice in one pass (sampling with
//! replacement) gets the same stream both times.
//!
//! # For PyTorch users
//!
//! | PyTorch | lockstep-data |
//! |---|---|
//! | `DataLoader(ds, batch_size=64, shuffle=True, num_workers=2, generator=g)` | `DataLoader::builder(ds).batch_size(64).shuffle(true).num_workers(2).generator(g).build()?` |
//! | `for x, y in loader:` | `for batch in loader.iter() { let (x, y) = batch?; }` |
//! | `torch.Generator().manual_seed(s)` shared by loader and sampler | [`SharedGenerator::with_seed`]`(s)` (clones share the stream) |
//! | `torch.manual_seed(s)` | `lockstep_rng::default_generator().manual_seed(s)` |
//! | `worker_init_fn(worker_id)`, `get_worker_info()` | [`DataLoaderBuilder::worker_init_fn`], [`get_worker_info`] |
//! | `random.seed` / `np.random.seed` in a worker | [`WorkerInfo::python_random`], [`WorkerInfo::numpy_random_state`] |
//! | `torch.rand` inside `__getitem__` | [`SampleRng`] passed to [`Dataset::get`] |
//! | `sampler.set_epoch(e)` | [`DataLoader::set_epoch`] (or the sampler's own) |
//! | torchdata `StatefulDataLoader.state_dict()` | [`LoaderIter::state_dict`], [`DataLoader::load_state_dict`], [`LoaderState::to_bytes`] |
//! | `IterableDataset` + workers | [`IterableDataset`], [`IterableLoader`] |
//!
//! Workers are threads, not processes: the data set is shared (`Sync`), nothing is pickled,
//! and the default generator is one per process — so in TorchCompatible mode a worker's
//! draws come from the generator handed to `get` in its [`SampleRng`] (PyTorch's per-process
//! `torch.manual_seed(base_seed + id)`), not from `default_generator()`.
//!
//! # Ordering and faults
//! Batch `k` is sent to worker `k mod num_workers` (PyTorch's round robin), and batches are
//! yielded in sampler order whatever the workers' timing. A sample whose `get` fails or panics
//! yields an [`Error::Sample`] naming its index; a dead worker or a timeout yields an error
//! too. After an error the pass ends; nothing hangs and no batch is silently dropped.
//!
//! # Example
//! ```
//! use lockstep_data::{DataLoader, Digits, Seeding, SharedGenerator};
//! use lockstep_data::transforms::{Compose, GaussianNoise, RandomCrop, RandomHorizontalFlip};
//!
//! let ds = Digits::new()?.with_transform(Compose(vec![
//!     Box::new(RandomCrop::new(8, 2)),
//!     Box::new(RandomHorizontalFlip::new(0.5)),
//!     Box::new(GaussianNoise::new(0.1)),
//! ]));
//! let mut loader = DataLoader::builder(ds)
//!     .batch_size(64)
//!     .shuffle(true)
//!     .generator(SharedGenerator::with_seed(0))
//!     .seeding(Seeding::PerSample { seed: 7 })
//!     .build()?;
//! let (images, labels) = loader.iter().next().unwrap()?;
//! assert_eq!(images.shape(), &[64, 1, 8, 8]);
//! assert_eq!(labels.shape(), &[64]);
//! # Ok::<(), lockstep_data::Error>(())
//! ```
//!
//! The digits data (UCI "Optical Recognition of Handwritten Digits", Alpaydin & Kaynak 1998,
//! CC BY 4.0) is embedded; see `data/README.md` in this crate.

pub mod collate;
pub mod dataset;
pub mod datasets;
mod error;
pub mod iterable;
pub mod loader;
mod npy;
pub mod rng;
pub mod sampler;
pub mod transforms;

pub use collate::{Collate, DefaultCollate, Stack, stack_tensors};
pub use dataset::{
    Dataset, IterableDataset, Subset, TensorDataset, random_split, random_split_fractions,
    tensor_row,
};
pub use datasets::{
    CsvDataset, CsvTable, Digits, MAX_INFLATED_BYTES, Mnist, TINY_SHAKESPEARE_ATTRIBUTION,
    parse_csv, parse_csv_bytes, parse_idx, parse_npy, parse_npz, read_csv, read_idx, read_npy,
    read_npz, read_text,
};
pub use error::{Error, Result};
pub use iterable::{IterableIter, IterableLoader};
pub use loader::{DataLoader, DataLoaderBuilder, LoaderIter, LoaderState, Seeding, WorkerInitFn};
pub use rng::{SampleRng, SharedGenerator, WorkerInfo, get_worker_info, per_sample_generator};
pub use sampler::{
    BatchSampler, DistributedSampler, RandomSampler, Sampler, SequentialSampler,
    SubsetRandomSampler, WeightedRandomSampler,
};
