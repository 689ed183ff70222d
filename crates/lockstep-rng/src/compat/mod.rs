//! Streams identical, bit for bit, to those of other libraries for the same seed.
//!
//! * [`torch`]: PyTorch 2.15 CPU samplers (`rand`, `randn`, `randint`, `randperm`, `bernoulli_`,
//!   `dropout`, `multinomial`, `exponential_`, `nn.init`), drawing from a [`crate::Generator`].
//! * [`python`]: CPython 3.11's `random` module.
//! * [`numpy`]: NumPy 2.x's legacy `RandomState` and its `Generator` over `PCG64`, with
//!   `SeedSequence`.
//! * [`glibc_math`]: bit-exact ports of glibc's `log`, `sin`, `cos` (x86-64 FMA build), which
//!   those libraries call on Linux.

pub mod glibc_math;
pub mod numpy;
pub mod python;
pub mod torch;
