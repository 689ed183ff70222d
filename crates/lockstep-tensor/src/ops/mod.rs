//! Ops, one file per family. Each file declares its ops' implementations as
//! [`dispatch::Op`](crate::dispatch::Op) statics where there is a choice of algorithm, and the
//! `Tensor` methods that call them.

pub mod conv;
pub mod elementwise;
pub mod index;
pub mod matmul;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod view;
