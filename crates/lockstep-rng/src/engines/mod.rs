//! The engines: raw 32-bit word streams with no sampling logic. Shared by every compat stream.

pub mod mt19937;
pub mod pcg64;
pub use pcg64::Pcg64;
pub mod philox;

pub use mt19937::Mt19937;
pub use philox::Philox4x32;
