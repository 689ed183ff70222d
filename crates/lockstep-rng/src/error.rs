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
