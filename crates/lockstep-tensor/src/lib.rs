//! # lockstep-tensor
//!
//! [`Tensor`] (shared storage + layout, five dtypes, CPU), the single dispatch point
//! ([`dispatch::Op`]), the determinism system ([`deterministic`]) and lockstep's thread pool
//! ([`threads`]).
//!
//! In deterministic mode (`use_deterministic_algorithms(true)`) every op either runs an
//! implementation whose results are bitwise identical at any number of threads, or returns
//! [`Error::Nondeterministic`] naming the op — stronger than PyTorch, whose CPU `sum` differs
//! between 1 and 2 threads.

pub mod autotune;
pub mod deterministic;
pub mod dispatch;
pub mod doctor;
pub mod dtype;
mod error;
pub mod layout;
pub mod ops;
mod tensor;
pub mod threads;

pub use deterministic::{
    are_deterministic_algorithms_enabled, is_deterministic_algorithms_warn_only_enabled,
    use_deterministic_algorithms, use_deterministic_algorithms_warn_only,
};
pub use dtype::{DType, Element, Storage};
pub(crate) use error::invalid;
pub use error::{Error, Result};
pub use tensor::{Device, Tensor};
pub use threads::{get_num_threads, set_num_threads};
