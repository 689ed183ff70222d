//! Ops, one file per family. Each file declares its ops' implementations as
//! [`dispatch::Op`](crate::dispatch::Op) statics and the `Tensor` methods that call them.

pub mod reduce;
