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
//!
//! # Example
//!
//! ```
//! use lockstep_rng::Generator;
//! use lockstep_tensor::{DType, Tensor, deterministic, threads::with_num_threads};
//!
//! // Tensors from data, filled, or drawn as PyTorch draws them.
//! let a = Tensor::from_vec(vec![1f32, 2., 3., 4., 5., 6.], &[2, 3])?;
//! let b = Tensor::ones(&[3, 2], DType::F32)?;
//! let x = Tensor::randn(&[1000, 64], DType::F32, Some(&mut Generator::with_seed(0)))?;
//!
//! // Ops return a new tensor (or an error naming the op and the bad argument).
//! let c = a.matmul(&b)?; // torch.matmul
//! assert_eq!(c.shape(), &[2, 2]);
//! assert_eq!(c.to_vec::<f32>()?, [6., 6., 15., 15.]);
//! assert!(a.matmul(&a).is_err()); // [2, 3] × [2, 3]: a ShapeMismatch naming matmul
//!
//! // Deterministic mode, for one closure on this thread: the sum's bits are the same at any
//! // number of threads.
//! let sum_at = |t| with_num_threads(t, || x.sum_dim(0, false)?.to_vec::<f32>());
//! deterministic::scope(true, false, || -> lockstep_tensor::Result<()> {
//!     assert_eq!(sum_at(1)?, sum_at(4)?);
//!     Ok(())
//! })?;
//! # Ok::<(), lockstep_tensor::Error>(())
//! ```

pub mod autotune;
pub mod deterministic;
pub mod dispatch;
pub mod doctor;
pub mod dtype;
mod error;
pub mod io;
/// The instruction-set switch (`LOCKSTEP_ISA`, [`isa::set_isa`]), from `lockstep-rng`.
pub use lockstep_rng::isa;
pub mod layout;
pub mod math;
pub mod memory;
mod op;
pub mod ops;
mod policy;
mod tensor;
pub mod threads;
pub mod trace;

pub use deterministic::{
    are_deterministic_algorithms_enabled, is_deterministic_algorithms_warn_only_enabled,
    use_deterministic_algorithms, use_deterministic_algorithms_warn_only,
};
pub use dtype::{DType, Element, Float, Storage};
pub(crate) use error::invalid;
pub use error::{Error, Result, try_filled_vec};
pub use tensor::{Device, Tensor};
pub use threads::{get_num_threads, set_num_threads};
