//! Where a sample's randomness comes from: [`SampleRng`], the generator handles, worker info.

use crate::error::Result;
use lockstep_rng::StreamKey;
use lockstep_rng::compat::numpy::{Generator as NpGenerator, RandomState, SeedSequence};
use lockstep_rng::compat::python::Random;
use lockstep_rng::compat::torch as t;
use lockstep_rng::{Generator, default_generator};
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};

/// A generator that several pipeline parts draw from in turn, as one `torch.Generator` object
/// is shared in PyTorch (`DataLoader(generator=g, shuffle=True)` hands `g` to its
/// `RandomSampler`): either the process-wide default generator or one shared handle.
#[derive(Clone, Debug, Default)]
pub enum SharedGenerator {
    /// `lockstep_rng::default_generator()` (PyTorch's `generator=None`).
    #[default]
    Default,
    /// A generator owned by the pipeline; clones of the handle draw from the same stream.
    Shared(Arc<Mutex<Generator>>),
}

impl SharedGenerator {
    /// A handle to a new shared generator.
    pub fn new(g: Generator) -> Self {
        Self::Shared(Arc::new(Mutex::new(g)))
    }

    /// A handle to a new generator after `manual_seed(seed)`.
    pub fn with_seed(seed: u64) -> Self {
        Self::new(Generator::with_seed(seed))
    }

    /// Runs `f` on the generator (holding its lock only for the call).
    pub fn with<R>(&self, f: impl FnOnce(&mut Generator) -> R) -> R {
        match self {
            Self::Default => f(&mut default_generator()),
            Self::Shared(m) => f(&mut lock(m)),
        }
    }

    /// Whether this is the process-wide default generator.
    pub fn is_default(&self) -> bool {
        matches!(self, Self::Default)
    }

    /// PyTorch's 5056-byte state of the generator.
    pub fn get_state(&self) -> Vec<u8> {
        self.with(|g| g.get_state())
    }

    /// Restores a state from [`get_state`](Self::get_state) or `torch.Generator.get_state()`.
    ///
    /// # Errors
    /// If the bytes are not a valid PyTorch CPU generator state.
    pub fn set_state(&self, bytes: &[u8]) -> Result<()> {
        Ok(self.with(|g| g.set_state(bytes))?)
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The per-sample stream of [`Seeding::PerSample`](crate::Seeding::PerSample):
/// `numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=(epoch, index)))`.
///
/// It depends on nothing but the three numbers, so it is the same in every worker, at every
/// `num_workers`, world size and timing; NumPy itself reproduces it with that one line. The key
/// is [`StreamKey::sample`], which the training layer's per-sample dropout extends.
pub fn per_sample_generator(seed: u64, epoch: u64, index: usize) -> NpGenerator {
    StreamKey::sample(seed, epoch, index as u64).generator()
}

enum Source<'a> {
    PerSample(NpGenerator),
    Worker(&'a mut Generator),
    Global,
}

/// The random source handed to [`Dataset::get`](crate::Dataset::get) for one sample.
///
/// * In [`Seeding::PerSample`](crate::Seeding::PerSample) mode it is the sample's own stream,
///   [`per_sample_generator`]`(seed, epoch, index)`; the draws below use NumPy's `Generator`
///   samplers (`random`, `integers`, `standard_normal`, float32 variants).
/// * In [`Seeding::TorchCompatible`](crate::Seeding::TorchCompatible) mode it is what a
///   PyTorch `Dataset.__getitem__` would draw from: the worker's generator (seeded
///   `base_seed + worker_id`, as `torch.manual_seed` inside a PyTorch worker), or with
///   `num_workers = 0` the process-wide default generator; the draws below are then exactly
///   `torch.rand(())`, `torch.randint(low, high, ())` and `torch.randn(n)` (float32).
pub struct SampleRng<'a> {
    src: Source<'a>,
}

impl<'a> SampleRng<'a> {
    /// The stream of sample `index` in `epoch` for `seed` (PerSample mode).
    pub fn per_sample(seed: u64, epoch: u64, index: usize) -> Self {
        Self {
            src: Source::PerSample(per_sample_generator(seed, epoch, index)),
        }
    }

    /// Draws from a PyTorch generator (a TorchCompatible worker's).
    pub fn torch(g: &'a mut Generator) -> Self {
        Self {
            src: Source::Worker(g),
        }
    }

    /// Draws from the process-wide default generator (TorchCompatible with `num_workers = 0`).
    pub fn global() -> Self {
        Self {
            src: Source::Global,
        }
    }

    fn torch_draw<R>(&mut self, f: impl FnOnce(&mut Generator) -> R) -> Option<R> {
        match &mut self.src {
            Source::PerSample(_) => None,
            Source::Worker(g) => Some(f(g)),
            Source::Global => Some(f(&mut default_generator())),
        }
    }

    /// A float32 uniform in `[0, 1)`: `torch.rand(())` (24 bits of one word) or NumPy's
    /// `random(dtype=float32)` (`(u32 >> 8)·2^-24`).
    pub fn rand_f32(&mut self) -> f32 {
        if let Source::PerSample(g) = &mut self.src {
            let mut x = [0f32];
            g.random_f32(&mut x);
            return x[0];
        }
        self.torch_draw(|g| g.next_f32()).unwrap_or_default()
    }

    /// A float64 uniform in `[0, 1)`: `torch.rand((), dtype=float64)` or NumPy's `random()`.
    pub fn rand_f64(&mut self) -> f64 {
        if let Source::PerSample(g) = &mut self.src {
            let mut x = [0f64];
            g.random(&mut x);
            return x[0];
        }
        self.torch_draw(|g| g.next_f64()).unwrap_or_default()
    }

    /// An integer in `[low, high)`: `torch.randint(low, high, ())` or NumPy's
    /// `integers(low, high)`.
    ///
    /// # Errors
    /// If `low >= high`.
    pub fn randint(&mut self, low: i64, high: i64) -> Result<i64> {
        let mut x = [0i64];
        match &mut self.src {
            Source::PerSample(g) => g.integers_i64(low, high, false, &mut x)?,
            Source::Worker(g) => t::random_(g, &mut x, low, high)?,
            Source::Global => t::random_(&mut default_generator(), &mut x, low, high)?,
        }
        Ok(x[0])
    }

    /// Fills `out` with standard normals: `torch.randn(out.len())` (float32, PyTorch's size-
    /// dependent paths) or NumPy's `standard_normal(dtype=float32)`.
    pub fn randn_f32(&mut self, out: &mut [f32]) {
        match &mut self.src {
            Source::PerSample(g) => g.standard_normal_f32(out),
            Source::Worker(g) => {
                let _ = t::normal_(g, out, 0.0, 1.0);
            }
            Source::Global => {
                let _ = t::normal_(&mut default_generator(), out, 0.0, 1.0);
            }
        }
    }

    /// The NumPy generator of a PerSample stream, for other samplers (`None` in
    /// TorchCompatible mode).
    pub fn numpy(&mut self) -> Option<&mut NpGenerator> {
        match &mut self.src {
            Source::PerSample(g) => Some(g),
            _ => None,
        }
    }

    /// Runs `f` on the PyTorch generator of a TorchCompatible source (`None` in PerSample
    /// mode), for any `lockstep_rng::compat::torch` sampler.
    pub fn with_torch<R>(&mut self, f: impl FnOnce(&mut Generator) -> R) -> Option<R> {
        self.torch_draw(f)
    }
}

/// What `torch.utils.data.get_worker_info()` returns inside a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// The worker's id, `0..num_workers`.
    pub id: usize,
    /// The number of workers.
    pub num_workers: usize,
    /// `base_seed + id` (mod 2^64), exactly PyTorch's `get_worker_info().seed`.
    pub seed: u64,
}

impl WorkerInfo {
    /// The generator PyTorch's worker gets from `torch.manual_seed(seed)`.
    pub fn torch_generator(&self) -> Generator {
        Generator::with_seed(self.seed)
    }

    /// PyTorch's worker seeding of Python's `random`: `random.seed(seed)`.
    pub fn python_random(&self) -> Random {
        Random::from_u64(self.seed)
    }

    /// The four words PyTorch passes to `numpy.random.seed` in a worker:
    /// `SeedSequence([id, base_seed & 0xFFFFFFFF, base_seed >> 32]).generate_state(4)`.
    pub fn numpy_seed_words(&self) -> [u32; 4] {
        let base = self.seed.wrapping_sub(self.id as u64);
        let ss = SeedSequence::from_ints(&[
            self.id as u128,
            (base & 0xFFFF_FFFF) as u128,
            (base >> 32) as u128,
        ])
        .expect("three integers");
        let w = ss.generate_state_u32(4);
        [w[0], w[1], w[2], w[3]]
    }

    /// NumPy's legacy global generator as PyTorch seeds it in a worker
    /// (`numpy.random.seed(numpy_seed_words())`).
    pub fn numpy_random_state(&self) -> RandomState {
        RandomState::from_key(&self.numpy_seed_words()).expect("four words are a valid key")
    }
}

thread_local! {
    static WORKER_INFO: RefCell<Option<WorkerInfo>> = const { RefCell::new(None) };
}

/// `torch.utils.data.get_worker_info()`: the info of the worker thread this is called from,
/// `None` in any other thread (including the caller's with `num_workers = 0`).
pub fn get_worker_info() -> Option<WorkerInfo> {
    WORKER_INFO.with(|w| w.borrow().clone())
}

pub(crate) fn set_worker_info(info: Option<WorkerInfo>) {
    WORKER_INFO.with(|w| *w.borrow_mut() = info);
}
