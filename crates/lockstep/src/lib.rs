//! # lockstep
//!
//! A deep-learning runtime in which every source of randomness and nondeterminism is under
//! your control: for the same seed it draws bit for bit what PyTorch (CPU), CPython's `random`
//! and NumPy draw, its deterministic kernels give the same bits at any number of threads, and
//! its data loader is seeded per sample and resumable mid-epoch.
//!
//! This crate is the facade most programs depend on: the global seeding functions under
//! PyTorch's names, the layers re-exported ([`rng`], [`tensor`], [`data`], [`nn`]), [`checkpoint`]s and one error type
//! for all of them ([`Error`]).
//!
//! # A short tour
//!
//! ## Seeding
//!
//! [`seed_everything`] seeds every generator a run draws from (PyTorch's default generator,
//! Python's and NumPy's global ones, and any you [`register_rng`]); the draws are PyTorch's:
//!
//! ```
//! use lockstep::{DType, Tensor};
//!
//! fn main() -> lockstep::Result<()> {
//!     let _loader_generator = lockstep::seed_everything(0)?; // see "Data loading" below
//!     let x = Tensor::rand(&[3], DType::F32, None)?; // torch.manual_seed(0); torch.rand(3)
//!     assert_eq!(x.to_vec::<f32>()?, [0.49625658988952637, 0.7682217955589294, 0.08847743272781372]);
//!     assert_eq!(lockstep::python_random().random(), 0.8444218515250481); // random.seed(0); random.random()
//!     Ok(())
//! }
//! ```
//!
//! ## Deterministic mode
//!
//! With deterministic algorithms on, every op runs an implementation whose bits do not depend
//! on the number of threads, or fails with an error naming the op. [`use_deterministic_algorithms`]
//! sets it for the process, as in PyTorch; [`deterministic::scope`] sets it for one closure on
//! the calling thread (safe under `cargo test`'s parallel tests):
//!
//! ```
//! use lockstep::{DType, Tensor, deterministic, tensor::threads::with_num_threads};
//!
//! fn main() -> lockstep::Result<()> {
//!     let mut g = lockstep::Generator::with_seed(0);
//!     let x = Tensor::randn(&[100_000], DType::F32, Some(&mut g))?;
//!     let sum_at = |threads| with_num_threads(threads, || x.sum()?.item::<f32>());
//!     deterministic::scope(true, false, || -> lockstep::Result<()> {
//!         let one = sum_at(1)?;
//!         for threads in [2, 3, 8] {
//!             assert_eq!(sum_at(threads)?.to_bits(), one.to_bits());
//!         }
//!         Ok(())
//!     })
//! }
//! ```
//!
//! ## Data loading
//!
//! The generator [`seed_everything`] returns is PyTorch's `torch.Generator().manual_seed(seed)`;
//! hand it to the [`DataLoader`](data::DataLoader) as PyTorch's reproducibility notes do with
//! `DataLoader(..., generator=g)`, and the shuffle order is fixed by the seed:
//!
//! ```
//! use lockstep::data::{DataLoader, Digits, Seeding, SharedGenerator};
//!
//! fn first_labels(seed: u64) -> lockstep::Result<Vec<i64>> {
//!     let g = lockstep::seed_everything(seed)?;
//!     let mut loader = DataLoader::builder(Digits::new()?) // the embedded UCI digits set
//!         .batch_size(8)
//!         .shuffle(true)
//!         .num_workers(2)
//!         .generator(SharedGenerator::new(g)) // DataLoader(..., generator=g)
//!         .seeding(Seeding::PerSample { seed })
//!         .build()?;
//!     let (_images, labels) = loader.iter().next().expect("a non-empty data set")?;
//!     Ok(labels.to_vec::<i64>()?)
//! }
//!
//! fn main() -> lockstep::Result<()> {
//!     assert_eq!(first_labels(0)?, first_labels(0)?);
//!     Ok(())
//! }
//! ```
//!
//! ## One error type
//!
//! Each layer returns its own error ([`rng::Error`], [`tensor::Error`], [`data::Error`]);
//! [`Error`] converts from all three, so `?` works across layers in a function returning
//! [`Result`], and a match finds the layer that raised the error. Checkpoints say what is
//! wrong by kind ([`Error::Checkpoint`] holds a [`checkpoint::CheckpointError`]); a program's
//! own refusals have [`Error::Config`] (a named flag or setting) and [`Error::Io`] (a path):
//!
//! ```
//! use lockstep::{DType, Error, Tensor};
//!
//! fn product(n: usize) -> lockstep::Result<Tensor> {
//!     let g = lockstep::seed_everything(0)?; // a lockstep_rng::Error
//!     let a = Tensor::ones(&[2, 3], DType::F32)?; // a lockstep_tensor::Error
//!     let _loader = lockstep::data::DataLoader::builder(lockstep::data::Digits::new()?) // a lockstep_data::Error
//!         .generator(lockstep::data::SharedGenerator::new(g))
//!         .build()?;
//!     Ok(a.matmul(&Tensor::ones(&[n, 4], DType::F32)?)?)
//! }
//!
//! assert_eq!(product(3).unwrap().shape(), &[2, 4]);
//! assert!(matches!(
//!     product(5),
//!     Err(Error::Tensor(lockstep::tensor::Error::ShapeMismatch { op: "matmul", .. }))
//! ));
//! ```
//!
//! ## Training
//!
//! [`nn`] is the training layer: autograd, the `torch.nn` layers initialised bit for bit as
//! PyTorch initialises them, losses, optimizers whose updates are PyTorch's to the bit for
//! equal gradients, and schedulers. A training step in deterministic mode gives the same bits
//! at any number of threads:
//!
//! ```
//! use lockstep::nn::{Forward, Module, Var, functional as F, layers::{Dropout, Linear, ReLU, Sequential}};
//! use lockstep::nn::optim::{Optimizer, Sgd, SgdOptions};
//! use lockstep::{DType, Tensor};
//!
//! # fn main() -> lockstep::Result<()> {
//! lockstep::seed_everything(0)?;
//! lockstep::use_deterministic_algorithms(true);
//! let model = Sequential::new()                      // torch.manual_seed(0); nn.Sequential(…)
//!     .add(Linear::new(64, 32, true)?)
//!     .add(ReLU::default())
//!     .add(Dropout::new(0.1)?)
//!     .add(Linear::new(32, 10, true)?);
//! let mut opt = Sgd::new(model.parameters(), SgdOptions { lr: 0.1, momentum: 0.9, ..Default::default() })?;
//! let x = Var::constant(Tensor::rand(&[8, 64], DType::F32, None)?);
//! let y = Tensor::from_vec(vec![0i64, 1, 2, 3, 4, 5, 6, 7], &[8])?;
//! let loss = F::cross_entropy(&model.forward(&x)?, &y)?;
//! opt.zero_grad();
//! loss.backward()?;
//! opt.step()?;
//! assert_eq!(model.state_dict()[0].0, "0.weight");
//! # Ok(())
//! # }
//! ```
//!
//! `lockstep train` (in the `lockstep-cli` crate) runs the normative PyTorch training program
//! with the same flags and gets the same split, initial weights, shuffling, noise, dropout
//! masks and optimizer arithmetic; `lockstep demo` trains twice and compares bit for bit.
//!
//! # For PyTorch and Python users
//!
//! | PyTorch / Python | lockstep |
//! |---|---|
//! | `torch.manual_seed(s)` | [`manual_seed`] |
//! | `torch.initial_seed()`, `torch.seed()` | [`initial_seed`], [`seed`] |
//! | `torch.get_rng_state()` / `set_rng_state` | [`get_rng_state`] / [`set_rng_state`] (same 5056 bytes) |
//! | `torch.random.fork_rng()` | [`fork_rng`] |
//! | `torch.Generator()` | [`Generator::new`] |
//! | `random.seed(s)` (the module-level functions) | [`python_random`] |
//! | `numpy.random.seed(s)` (the legacy global `RandomState`) | [`numpy_random`] |
//! | the tutorials' `seed_everything(s)` | [`seed_everything`] |
//! | `torch.use_deterministic_algorithms(m, warn_only=w)` | [`use_deterministic_algorithms`], [`use_deterministic_algorithms_warn_only`] |
//! | `torch.set_num_threads(n)` | [`set_num_threads`] |
//! | `torch.Tensor` | [`Tensor`] (re-exported from [`tensor`]) |
//! | `torch.utils.data` (`DataLoader`, samplers, `worker_init_fn`, `generator=`) | [`data`] |
//! | `torch.nn`, `torch.autograd`, `torch.optim` | [`nn`] |

pub mod checkpoint;
pub use lockstep_data as data;
pub use lockstep_nn as nn;
pub use lockstep_rng as rng;
pub use lockstep_rng::{Generator, default_generator};
pub use lockstep_tensor as tensor;
pub use lockstep_tensor::{
    DType, Device, Tensor, are_deterministic_algorithms_enabled, deterministic, get_num_threads,
    is_deterministic_algorithms_warn_only_enabled, set_num_threads, use_deterministic_algorithms,
    use_deterministic_algorithms_warn_only,
};

use lockstep_rng::compat::{numpy, python};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Any lockstep error: one type for a program that calls several layers, so that `?` works
/// across them (see [the tour](crate#one-error-type)).
///
/// Every error is kept whole, message included, under the layer that raised it: an RNG error
/// that reached you through the tensor or the data layer (whose errors wrap the layers below
/// them) is still [`Error::Rng`], and a tensor error through the data layer is still
/// [`Error::Tensor`], so one `match` arm per layer catches all of its errors.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// From [`rng`]: bad distribution parameters, generator states, OS entropy.
    #[error(transparent)]
    Rng(lockstep_rng::Error),
    /// From [`tensor`]: shapes, dtypes, indices, deterministic mode.
    #[error(transparent)]
    Tensor(lockstep_tensor::Error),
    /// From [`data`]: data sets, samplers, loaders, workers, file readers.
    #[error(transparent)]
    Data(lockstep_data::Error),
    /// From [`checkpoint`]: a file that cannot be written, read or trusted, and why
    /// ([`checkpoint::CheckpointError`]: I/O with the path, not safetensors, another format
    /// version, a checksum mismatch, a missing or invalid entry, another run's settings, …).
    #[error("checkpoint: {0}")]
    Checkpoint(checkpoint::CheckpointError),
    /// A refused setting: a flag or configuration value out of its range, or settings that
    /// cannot go together. The message names the flag (`--lr`) or setting and what it must
    /// be; nothing has run yet when a program checks its settings first.
    #[error("{0}")]
    Config(String),
    /// A file or directory that cannot be read, written, created or locked: what was
    /// attempted, the path and the operating system's message.
    #[error("cannot {action} {}: {message}", path.display())]
    Io {
        /// What was attempted, e.g. `read data file`.
        action: String,
        /// The file or directory.
        path: std::path::PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A failed exchange between the processes of a distributed run (vectors of the wrong
    /// length, a failed collective).
    #[error("{0}")]
    Exchange(String),
}

impl Error {
    /// [`Error::Config`] with `message`.
    pub fn config(message: impl Into<String>) -> Self {
        Error::Config(message.into())
    }

    /// [`Error::Io`] for an I/O error while doing `action` on `path`.
    pub fn io(action: impl Into<String>, path: &std::path::Path, e: &std::io::Error) -> Self {
        Error::Io {
            action: action.into(),
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

impl From<lockstep_rng::Error> for Error {
    fn from(e: lockstep_rng::Error) -> Self {
        Error::Rng(e)
    }
}

impl From<lockstep_tensor::Error> for Error {
    /// A tensor error, or the RNG error it wraps as [`Error::Rng`].
    fn from(e: lockstep_tensor::Error) -> Self {
        match e {
            lockstep_tensor::Error::Rng(e) => Error::Rng(e),
            e => Error::Tensor(e),
        }
    }
}

impl From<lockstep_data::Error> for Error {
    /// A data error, or the RNG or tensor error it wraps under its own layer.
    fn from(e: lockstep_data::Error) -> Self {
        match e {
            lockstep_data::Error::Rng(e) => Error::Rng(e),
            lockstep_data::Error::Tensor(e) => e.into(),
            e => Error::Data(e),
        }
    }
}

/// `Result` with lockstep's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves a valid generator; keep serving it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Seeds the default generator of every device (today: the CPU) with `seed`, as
/// `torch.manual_seed`. Only the low 32 bits reach the CPU engine, as in PyTorch; all 64 are
/// kept for [`initial_seed`]. A negative Python seed `s` corresponds to `s as u64`.
pub fn manual_seed(seed: u64) {
    default_generator().manual_seed(seed);
}

/// The seed of the default CPU generator (`torch.initial_seed()`).
pub fn initial_seed() -> u64 {
    default_generator().initial_seed()
}

/// Seeds the default generator from OS entropy and returns the seed (`torch.seed()`).
pub fn seed() -> rng::Result<u64> {
    default_generator().seed()
}

/// The default CPU generator's state in PyTorch's 5056-byte layout (`torch.get_rng_state()`).
pub fn get_rng_state() -> Vec<u8> {
    default_generator().get_state()
}

/// Loads a state saved by [`get_rng_state`] or by `torch.get_rng_state()`.
///
/// # Errors
/// On a state of the wrong size or with an invalid field; the generator is then unchanged.
pub fn set_rng_state(state: &[u8]) -> rng::Result<()> {
    default_generator().set_state(state)
}

/// Runs `f`, then puts the default generator back in the state it had before
/// (`torch.random.fork_rng()`): draws inside `f` do not shift the stream outside it. The state
/// is restored however `f` ends — returning `Ok`, an error, or panicking.
pub fn fork_rng<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Generator);
    impl Drop for Restore {
        fn drop(&mut self) {
            *default_generator() = self.0.clone();
        }
    }
    let _restore = Restore(default_generator().clone());
    f()
}

/// Anything [`seed_everything`] can reseed: implement it for your own generator and
/// [`register_rng`] it.
pub trait Reseed: Send {
    /// Reseeds from `seed`, the way the library it mirrors seeds from an integer.
    fn reseed(&mut self, seed: u64) -> rng::Result<()>;

    /// The generator's state as bytes, saved in checkpoints (`rng.registered.{i}`); `None`
    /// (the default) if it cannot be saved.
    fn state_bytes(&self) -> Option<Vec<u8>> {
        None
    }

    /// Restores a state returned by [`state_bytes`](Self::state_bytes).
    ///
    /// # Errors
    /// Bytes that are not a valid state (the generator is then unchanged); by default, always.
    fn set_state_bytes(&mut self, _state: &[u8]) -> rng::Result<()> {
        Err(rng::Error::InvalidArgument {
            op: "set_state_bytes",
            arg: "state",
            reason: "this generator's state cannot be restored".into(),
        })
    }
}

impl Reseed for Generator {
    fn reseed(&mut self, seed: u64) -> rng::Result<()> {
        self.manual_seed(seed);
        Ok(())
    }
    /// PyTorch's 5056-byte state.
    fn state_bytes(&self) -> Option<Vec<u8>> {
        Some(self.get_state())
    }
    fn set_state_bytes(&mut self, state: &[u8]) -> rng::Result<()> {
        self.set_state(state)
    }
}

impl Reseed for python::Random {
    /// `random.seed(seed)`.
    fn reseed(&mut self, seed: u64) -> rng::Result<()> {
        self.seed_u64(seed);
        Ok(())
    }
    /// The layout of `rng.python` in checkpoints.
    fn state_bytes(&self) -> Option<Vec<u8>> {
        let p = self.getstate();
        Some(checkpoint::mt_state_bytes(&p.mt, p.pos, p.gauss_next))
    }
    fn set_state_bytes(&mut self, state: &[u8]) -> rng::Result<()> {
        let (mt, pos, gauss_next) = checkpoint::mt_state_parse_rng(state)?;
        self.setstate(&python::PyState {
            mt,
            pos,
            gauss_next,
        })
    }
}

impl Reseed for numpy::RandomState {
    /// `numpy.random.seed(seed)`; NumPy refuses seeds of 2^32 and above, and so does this.
    fn reseed(&mut self, seed: u64) -> rng::Result<()> {
        *self = numpy::RandomState::from_u64(seed)?;
        Ok(())
    }
    /// The layout of `rng.numpy` in checkpoints.
    fn state_bytes(&self) -> Option<Vec<u8>> {
        let n = self.get_state();
        let g = n.has_gauss.then_some(n.cached_gaussian);
        Some(checkpoint::mt_state_bytes(&n.key, n.pos, g))
    }
    fn set_state_bytes(&mut self, state: &[u8]) -> rng::Result<()> {
        let (key, pos, gauss) = checkpoint::mt_state_parse_rng(state)?;
        self.set_state(&numpy::LegacyState {
            key,
            pos,
            has_gauss: gauss.is_some(),
            cached_gaussian: gauss.unwrap_or(0.0),
        })
    }
}

impl Reseed for numpy::Generator {
    /// `numpy.random.default_rng(seed)`.
    fn reseed(&mut self, seed: u64) -> rng::Result<()> {
        *self = numpy::Generator::from_u64(seed);
        Ok(())
    }
}

static PYTHON: OnceLock<Mutex<python::Random>> = OnceLock::new();
static NUMPY: OnceLock<Mutex<numpy::RandomState>> = OnceLock::new();
type Registered = Vec<Arc<Mutex<dyn Reseed>>>;
static REGISTERED: Mutex<Registered> = Mutex::new(Vec::new());

/// The process-wide CPython-compatible generator behind Python's module-level `random.*`
/// functions. Seeded from OS entropy at first use, as CPython's is. Locking it again on a
/// thread that holds the guard panics with a message instead of deadlocking.
pub fn python_random() -> lockstep_rng::GlobalGuard<python::Random> {
    lockstep_rng::lock_global_or_panic(
        PYTHON.get_or_init(|| {
            let s = lockstep_rng::os_seed("python_random").unwrap_or(0);
            Mutex::new(python::Random::from_u64(s))
        }),
        "python_random",
    )
}

/// The process-wide NumPy legacy generator behind `numpy.random.*` (`np.random.seed`).
/// Seeded from OS entropy at first use, as NumPy's is. Locking it again on a thread that
/// holds the guard panics with a message instead of deadlocking.
pub fn numpy_random() -> lockstep_rng::GlobalGuard<numpy::RandomState> {
    lockstep_rng::lock_global_or_panic(
        NUMPY.get_or_init(|| {
            let s = lockstep_rng::os_seed("numpy_random").unwrap_or(0) as u32;
            Mutex::new(numpy::RandomState::new(s))
        }),
        "numpy_random",
    )
}

/// The generators added with [`register_rng`], in registration order.
pub(crate) fn registered_rngs() -> Vec<Arc<Mutex<dyn Reseed>>> {
    lock(&REGISTERED).clone()
}

/// Adds `rng` to the generators [`seed_everything`] reseeds. Keep your own clone of the `Arc`
/// to draw from it.
pub fn register_rng(rng: Arc<Mutex<dyn Reseed>>) {
    lock(&REGISTERED).push(rng);
}

/// Seeds every generator a training run draws from, and returns a generator for data loading.
///
/// In order: the default generator of every device ([`manual_seed`]), Python's global `random`
/// ([`python_random`], as `random.seed(seed)`), NumPy's global legacy generator
/// ([`numpy_random`], as `np.random.seed(seed)`), then every generator added with
/// [`register_rng`], in registration order. The returned generator is
/// `torch.Generator().manual_seed(seed)`, as PyTorch's reproducibility notes pass to
/// `DataLoader(generator=...)`.
///
/// # Errors
/// If `seed >= 2^32` (NumPy's global generator refuses such seeds) or a registered generator
/// refuses the seed; nothing is reseeded in the first case.
pub fn seed_everything(seed: u64) -> rng::Result<Generator> {
    if seed > u32::MAX as u64 {
        return Err(lockstep_rng::Error::InvalidArgument {
            op: "seed_everything",
            arg: "seed",
            reason: format!(
                "{seed} is not in [0, 2^32 - 1], the range NumPy's np.random.seed accepts"
            ),
        });
    }
    manual_seed(seed);
    python_random().reseed(seed)?;
    numpy_random().reseed(seed)?;
    let registered: Registered = lock(&REGISTERED).clone();
    for rng in registered {
        lock(&rng).reseed(seed)?;
    }
    Ok(Generator::with_seed(seed))
}

/// The README's Rust examples, compiled and run as doc tests (`cargo test --doc -p lockstep`),
/// so that they cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// sha256 over the tensors' little-endian element bytes, in order (`Bool` as one byte each), as
/// a lowercase hex string: what `hashlib.sha256` gives over `t.contiguous().numpy().tobytes()`
/// for each tensor in turn, so a lockstep run and its PyTorch twin can compare their weights
/// (`init_sha256`, `final_sha256` in `lockstep train`'s report).
pub fn sha256_of<'a>(tensors: impl IntoIterator<Item = &'a Tensor>) -> String {
    use sha2::{Digest, Sha256};
    fn feed<T: Copy, const N: usize>(h: &mut Sha256, v: &[T], bytes: fn(T) -> [u8; N]) {
        v.iter().for_each(|&x| h.update(bytes(x)));
    }
    let mut h = Sha256::new();
    for t in tensors {
        let c = t.contiguous();
        // `data` cannot fail: the dtype is matched first.
        match c.dtype() {
            DType::F32 => feed(&mut h, c.data::<f32>().unwrap_or(&[]), f32::to_le_bytes),
            DType::F64 => feed(&mut h, c.data::<f64>().unwrap_or(&[]), f64::to_le_bytes),
            DType::I64 => feed(&mut h, c.data::<i64>().unwrap_or(&[]), i64::to_le_bytes),
            DType::U8 => h.update(c.data::<u8>().unwrap_or(&[])),
            DType::Bool => feed(&mut h, c.data::<bool>().unwrap_or(&[]), |b| [u8::from(b)]),
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_rng::compat::torch;

    // The global generators are shared by every test in this process: serialize these tests.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn fork_rng_restores_after_error_and_panic() {
        let _s = lock(&SERIAL);
        manual_seed(11);
        let before = get_rng_state();
        let r: std::result::Result<(), &str> = fork_rng(|| {
            default_generator().next_u64();
            Err("failed")
        });
        assert!(r.is_err());
        assert_eq!(get_rng_state(), before);
        let caught = std::panic::catch_unwind(|| {
            fork_rng(|| {
                default_generator().next_u64();
                panic!("inside fork_rng");
            })
        });
        assert!(caught.is_err());
        assert_eq!(get_rng_state(), before);
    }

    #[test]
    fn seed_everything_seeds_all_and_registered() {
        let _s = lock(&SERIAL);
        struct Counter(u64);
        impl Reseed for Counter {
            fn reseed(&mut self, seed: u64) -> rng::Result<()> {
                self.0 = seed + 1;
                Ok(())
            }
        }
        let mine = Arc::new(Mutex::new(Counter(0)));
        register_rng(mine.clone());
        let g = seed_everything(42).unwrap();
        assert_eq!(g, Generator::with_seed(42));
        assert_eq!(initial_seed(), 42);
        let mut x = [0f32; 1];
        torch::rand(&mut default_generator(), &mut x);
        assert_eq!(x[0], 0.8822692632675171); // torch.manual_seed(42); torch.rand(1)
        assert_eq!(python_random().random(), 0.6394267984578837); // random.seed(42); random.random()
        assert_eq!(numpy_random().random_sample_one(), 0.3745401188473625); // np.random.seed(42); np.random.rand()
        assert_eq!(mine.lock().unwrap().0, 43);
        assert!(seed_everything(1 << 32).is_err());
        assert_eq!(
            initial_seed(),
            42,
            "a refused seed must not reseed anything"
        );
    }

    #[test]
    fn errors_land_under_the_layer_that_raised_them() {
        let rng = lockstep_rng::Error::InvalidArgument {
            op: "uniform_",
            arg: "from",
            reason: "from=1 > to=0".into(),
        };
        let tensor = lockstep_tensor::Error::DimOutOfRange {
            op: "sum",
            dim: 3,
            ndim: 1,
        };
        let data = lockstep_data::Error::State {
            op: "load_state_dict",
            reason: "wrong length".into(),
        };
        let cases: [(Error, Error); 6] = [
            (rng.clone().into(), Error::Rng(rng.clone())),
            (
                lockstep_tensor::Error::Rng(rng.clone()).into(),
                Error::Rng(rng.clone()),
            ),
            (
                lockstep_data::Error::Rng(rng.clone()).into(),
                Error::Rng(rng.clone()),
            ),
            (
                lockstep_data::Error::Tensor(lockstep_tensor::Error::Rng(rng.clone())).into(),
                Error::Rng(rng.clone()),
            ),
            (
                lockstep_data::Error::Tensor(tensor.clone()).into(),
                Error::Tensor(tensor.clone()),
            ),
            (data.clone().into(), Error::Data(data.clone())),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        // The message is the layer's own.
        assert_eq!(Error::from(rng.clone()).to_string(), rng.to_string());
        assert_eq!(Error::from(data.clone()).to_string(), data.to_string());
        // `?` converts from each layer.
        fn all() -> Result<()> {
            Tensor::zeros(&[2], DType::F32)?.sum_dim(3, false)?;
            Ok(())
        }
        assert_eq!(all(), Err(Error::Tensor(tensor)));
    }

    #[test]
    fn rng_state_round_trip_and_bad_state() {
        let _s = lock(&SERIAL);
        manual_seed(3);
        let s = get_rng_state();
        let a = default_generator().next_u64();
        set_rng_state(&s).unwrap();
        assert_eq!(default_generator().next_u64(), a);
        assert!(set_rng_state(&s[..10]).is_err());
    }
}
