//! The training layer's error helper (a leaf: `autograd` and `ops` both use it, and neither
//! imports the other for it).

use lockstep_tensor::Error;

/// [`Error::InvalidArgument`] naming the op, the argument and why it was refused.
pub(crate) fn invalid(op: &'static str, arg: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op,
        arg,
        reason: reason.into(),
    }
}
