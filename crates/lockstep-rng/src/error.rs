//! The one error type of the RNG layer.

/// What went wrong in an RNG call. Every variant names the operation and the bad argument, so
/// a message can be read without the code beside it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// An argument outside the domain of the operation (a negative probability, `low > high`, …).
    #[error("{op}: invalid argument `{arg}`: {reason}")]
    InvalidArgument {
        /// The operation, named as in the library it mirrors (`uniform_`, `multinomial`, …).
        op: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// Why it was rejected, with the offending value.
        reason: String,
    },
    /// A serialized generator state that cannot be loaded (wrong size, invalid field).
    #[error("{op}: invalid generator state: {reason}")]
    InvalidState {
        /// The loading function (`set_state`, `setstate`, …).
        op: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An allocation sized from the caller's arguments failed or would exceed `isize::MAX`
    /// bytes (PyTorch raises a catchable error there too).
    #[error("{op}: out of memory: cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The operation.
        op: &'static str,
        /// The bytes asked for (saturated at `u128::MAX` — never reached in practice).
        bytes: u128,
    },
    /// The operating system's entropy source failed.
    #[error("{op}: could not read OS entropy: {reason}")]
    Entropy {
        /// The seeding function.
        op: &'static str,
        /// The OS error.
        reason: String,
    },
}

/// `Result` with the RNG layer's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

pub(crate) fn invalid(op: &'static str, arg: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        arg,
        reason: reason.into(),
    }
}

/// An empty vector with room for exactly `n` elements, or [`Error::OutOfMemory`] naming `op`:
/// for allocations sized from outside input, which must fail with an error, never abort.
pub(crate) fn try_with_capacity<T>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        op,
        bytes: n as u128 * core::mem::size_of::<T>() as u128,
    })?;
    Ok(v)
}
