//! The tensor layer's error type: every variant names the op.

use crate::DType;

/// What went wrong in a tensor op. Variants carry the op's name and the offending values so a
/// message reads on its own; callers can match on the kind (e.g. [`Error::Nondeterministic`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Two shapes that had to agree (or broadcast) do not.
    #[error("{op}: shape mismatch: {lhs:?} vs {rhs:?}")]
    ShapeMismatch {
        /// The op.
        op: &'static str,
        /// First shape.
        lhs: Vec<usize>,
        /// Second shape.
        rhs: Vec<usize>,
    },
    /// A dimension index outside `-ndim..ndim`.
    #[error("{op}: dimension {dim} out of range for a tensor of {ndim} dimensions")]
    DimOutOfRange {
        /// The op.
        op: &'static str,
        /// The dimension asked for.
        dim: isize,
        /// The tensor's number of dimensions.
        ndim: usize,
    },
    /// An element index outside the size of its dimension.
    #[error("{op}: index {index} is out of bounds for size {size}")]
    IndexOutOfRange {
        /// The op.
        op: &'static str,
        /// The index.
        index: i64,
        /// The size it must be below.
        size: usize,
    },
    /// A tensor of the wrong dtype.
    #[error("{op}: expected dtype {expected:?}, got {got:?}")]
    DType {
        /// The op.
        op: &'static str,
        /// What the op needs.
        expected: DType,
        /// What it got.
        got: DType,
    },
    /// Any other bad argument.
    #[error("{op}: invalid argument `{arg}`: {reason}")]
    InvalidArgument {
        /// The op.
        op: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// Why.
        reason: String,
    },
    /// Deterministic algorithms are on and the op has no deterministic implementation.
    #[error(
        "{op} does not have a deterministic implementation, but you set \
         'use_deterministic_algorithms(true)'. You can turn off determinism just for this op \
         with `deterministic::allow_nondeterministic(\"{op}\", ..)`, or for everything with \
         `use_deterministic_algorithms(false)`, or make it only warn with \
         `use_deterministic_algorithms_warn_only(true, true)`."
    )]
    Nondeterministic {
        /// The op that refused.
        op: String,
    },
    /// An allocation sized from the caller's input could not be made (PyTorch raises a
    /// catchable `RuntimeError` here rather than aborting the process).
    #[error("{op}: out of memory: cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The op.
        op: &'static str,
        /// The size asked for.
        bytes: u128,
    },
    /// An error from the RNG layer (bad distribution parameters).
    #[error(transparent)]
    Rng(#[from] lockstep_rng::Error),
}

/// `Result` with the tensor layer's [`Error`].
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

/// A vector of `n` copies of `value`, or [`Error::OutOfMemory`] naming `op` if the allocation
/// fails (instead of aborting the process).
pub fn try_filled_vec<T: Clone>(op: &'static str, n: usize, value: T) -> Result<Vec<T>> {
    let mut v = lockstep_rng::try_with_capacity(op, n)?;
    v.resize(n, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_advice_in_the_nondeterministic_error_compiles() {
        let e = super::Error::Nondeterministic { op: "x".into() }.to_string();
        assert!(e.contains("use_deterministic_algorithms_warn_only(true, true)"));
        // The advised call as the message writes it (not run: it would change the process mode).
        let _advised: fn() = || crate::use_deterministic_algorithms_warn_only(true, true);
    }
}
