//! The one error type of the data layer.

use std::path::PathBuf;

/// What went wrong while building or running a data pipeline. Every variant names the
/// operation and the offending value, so a message reads on its own.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An argument outside the domain of the operation (`batch_size=0`, `rank >= num_replicas`, …).
    #[error("{op}: invalid argument `{arg}`: {reason}")]
    InvalidArgument {
        /// The operation, named as in PyTorch (`DataLoader`, `RandomSampler`, …).
        op: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// Why it was rejected, with the offending value.
        reason: String,
    },
    /// An index outside a data set.
    #[error("{op}: index {index} is out of range for a data set of {len} samples")]
    IndexOutOfRange {
        /// The operation.
        op: &'static str,
        /// The index asked for.
        index: usize,
        /// The data set's length.
        len: usize,
    },
    /// Loading one sample failed (the data set's `get` returned an error or panicked).
    #[error("loading sample {index} failed (worker {worker:?}): {reason}")]
    Sample {
        /// The data-set index of the sample.
        index: usize,
        /// The worker that ran it (`None`: in the caller's thread).
        worker: Option<usize>,
        /// The error, or the panic message.
        reason: String,
    },
    /// Collating a batch failed (samples of different shapes, a `collate_fn` error or panic).
    #[error("collating batch {batch} (samples {indices:?}) failed: {reason}")]
    Collate {
        /// The batch's position in the epoch.
        batch: usize,
        /// The data-set indices of its samples.
        indices: Vec<usize>,
        /// What went wrong.
        reason: String,
    },
    /// A worker failed outside any sample (`worker_init_fn` error or panic, thread start, exit).
    #[error("DataLoader worker {worker} failed: {reason}")]
    Worker {
        /// The worker id.
        worker: usize,
        /// What went wrong.
        reason: String,
    },
    /// No batch arrived within the loader's `timeout`.
    #[error(
        "DataLoader timed out after {seconds} s waiting for batch {batch} (samples {indices:?}) from worker {worker}"
    )]
    Timeout {
        /// The batch waited for.
        batch: usize,
        /// The data-set indices of its samples (an `IterableLoader`: the positions of its
        /// items in the worker's shard, at most 1,024 of them).
        indices: Vec<usize>,
        /// The worker it was sent to.
        worker: usize,
        /// The timeout.
        seconds: f64,
    },
    /// A file could not be read (missing, unreadable).
    #[error("{op}: cannot read {path:?}: {reason}")]
    Io {
        /// The loader (`read_npy`, `CsvDataset`, …).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// A file's content is not what its format requires (corrupt, truncated).
    #[error("{op}: {path:?} is not a valid {format} file: {reason}")]
    Format {
        /// The loader.
        op: &'static str,
        /// The file (`<embedded>` for built-in data).
        path: PathBuf,
        /// The format expected (`NPY`, `IDX`, `CSV`, …).
        format: &'static str,
        /// What is wrong, with the position where it was found.
        reason: String,
    },
    /// A saved loader state that does not fit this loader.
    #[error("{op}: invalid state: {reason}")]
    State {
        /// `load_state_dict` or a sampler's `load_state`.
        op: &'static str,
        /// Why it does not fit.
        reason: String,
    },
    /// An allocation sized from the caller's input (a pass over a data set of 2^40 samples)
    /// could not be made; PyTorch raises a catchable error there rather than aborting.
    #[error("{op}: out of memory: cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The operation.
        op: &'static str,
        /// The size asked for.
        bytes: u128,
    },
    /// An error from the RNG layer.
    #[error(transparent)]
    Rng(#[from] lockstep_rng::Error),
    /// An error from the tensor layer.
    #[error(transparent)]
    Tensor(#[from] lockstep_tensor::Error),
}

/// `Result` with the data layer's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

pub(crate) fn invalid(op: &'static str, arg: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        arg,
        reason: reason.into(),
    }
}

impl From<lockstep_rng::AllocError> for Error {
    /// A failed allocation of [`lockstep_rng::try_with_capacity`] as this layer's
    /// [`Error::OutOfMemory`] (the same op, bytes and message).
    fn from(e: lockstep_rng::AllocError) -> Self {
        Error::OutOfMemory {
            op: e.op,
            bytes: e.bytes,
        }
    }
}

/// Allocation sized from user input: the one copy lives in `lockstep_rng`; its error converts
/// into [`Error::OutOfMemory`] naming the op.
pub(crate) use lockstep_rng::try_with_capacity;

/// The message of a caught panic.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}
