//! # lockstep-rng
//!
//! Reproducible random engines and streams that match PyTorch (CPU), CPython's `random` and
//! NumPy bit for bit. No tensor types: this crate is usable as a plain Rust RNG crate.
//!
//! * [`engines`]: [`Mt19937`], [`Philox4x32`] (counter-based, parallel fills identical at
//!   any thread count) and [`engines::Pcg64`]. All three implement `rand_core`'s
//!   `TryRng`/`Rng` and `SeedableRng`.
//! * [`Generator`]: PyTorch's CPU generator — `manual_seed`, `initial_seed`, `seed`,
//!   `get_state`/`set_state` in PyTorch's 5056-byte layout — and [`default_generator`].
//! * [`compat`]: the samplers of [`compat::torch`], [`compat::python`] and [`compat::numpy`].
//! * [`StreamKey`]: the key `(seed, epoch or step, index[, stream])` of the invariant seeding
//!   mode's per-sample streams (NumPy `SeedSequence` spawn keys), shared by the data and
//!   training layers.
//!
//! ## Value stability
//! A stream named after a library (`compat::*`, [`Generator`]) follows that library: it changes
//! only to fix a difference from it, and such a fix is listed under "Reproducibility-breaking
//! changes" in the changelog. The engines' streams never change.
//!
//! ## What depends on the machine
//! PyTorch's own results depend on its CPU build. lockstep reproduces the x86-64 AVX2 build
//! (what every current x86-64 machine runs): `uniform_` and the scalar normal path fuse
//! `x·R + A` into one FMA, and float32 `randn` with 16 or more elements uses PyTorch's
//! polynomial log/sincos. lockstep computes those with true fused multiply-adds on every
//! machine, so its results do not depend on the CPU. The float64 samplers (`randn` in double,
//! `exponential_`, the scalar normal path) call the C library's `log`, `log1p`, `sin`, `cos`:
//! they match PyTorch where the C library is glibc, as on PyTorch's Linux wheels.
//!
//! ```
//! use lockstep_rng::{Generator, compat::torch};
//! let mut g = Generator::with_seed(0);
//! let mut x = [0f32; 3];
//! torch::rand(&mut g, &mut x);
//! assert_eq!(x, [0.49625658988952637, 0.7682217955589294, 0.08847743272781372]);
//! ```

pub mod compat;
pub mod engines;
mod error;
mod generator;
mod global;
pub mod isa;
mod key;

pub use engines::{Mt19937, Philox4x32};
pub(crate) use error::invalid;
pub use error::{AllocError, Error, Result, try_with_capacity};
pub use generator::{Generator, STATE_SIZE, default_generator, os_seed, try_default_generator};
pub use global::{GlobalGuard, lock_global, lock_global_or_panic};
pub use key::StreamKey;
