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

/// A failed allocation: the operation that asked and the bytes it asked for. Returned by
/// [`try_with_capacity`]; each lockstep crate converts it into its own error's `OutOfMemory`
/// variant (same fields, same message), so the message names the operation in every layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{op}: out of memory: cannot allocate {bytes} bytes")]
pub struct AllocError {
    /// The operation.
    pub op: &'static str,
    /// The bytes asked for (`n` times the element size, exact in `u128`).
    pub bytes: u128,
}

impl From<AllocError> for Error {
    fn from(e: AllocError) -> Self {
        Error::OutOfMemory {
            op: e.op,
            bytes: e.bytes,
        }
    }
}

/// An empty vector with room for exactly `n` elements, or an [`AllocError`] naming `op`: for
/// allocations sized from outside input, which must fail with an error, never abort the
/// process or panic with "capacity overflow". The one copy for all the lockstep crates (the
/// lowest layer, which every other depends on).
///
/// # Errors
/// [`AllocError`] if the allocator refuses, or if `n` elements would exceed `isize::MAX` bytes.
pub fn try_with_capacity<T>(
    op: &'static str,
    n: usize,
) -> core::result::Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| AllocError {
        op,
        bytes: n as u128 * core::mem::size_of::<T>() as u128,
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_allocation_names_the_op_in_each_error() {
        let e = try_with_capacity::<u64>("randperm", usize::MAX).unwrap_err();
        assert_eq!(
            e,
            AllocError {
                op: "randperm",
                bytes: usize::MAX as u128 * 8
            }
        );
        let r = Error::from(e);
        assert_eq!(
            r,
            Error::OutOfMemory {
                op: "randperm",
                bytes: usize::MAX as u128 * 8
            }
        );
        // The rng error and the shared one read the same.
        assert_eq!(r.to_string(), e.to_string());
        assert!(r.to_string().starts_with("randperm: out of memory"));
        assert_eq!(try_with_capacity::<u8>("x", 5).unwrap().capacity(), 5);
    }
}
