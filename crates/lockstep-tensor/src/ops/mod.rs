//! Ops, one file per family. Each file declares its ops' implementations as
//! [`dispatch::Op`](crate::op::Op) statics where there is a choice of algorithm, and the
//! `Tensor` methods that call them.

/// Declares a family of elementwise ops (`elementwise.rs`, `inplace.rs`): a `static` [`Op<Kernel>`] each, with one thread-invariant
/// implementation whose algorithm id is `NAME.chunked`, and the list of them.
macro_rules! chunked_ops {
    ($($(#[$doc:meta])* $id:ident = $name:literal;)*) => {
        $(
            $(#[$doc])*
            pub static $id: Op<Kernel> = Op {
                name: $name,
                impls: &[Impl {
                    algo: concat!($name, ".chunked"),
                    guarantee: Guarantee::ThreadInvariant,
                    f: Kernel::Chunked,
                }],
            };
        )*
        /// Every op of this family, in the order of its file (for
        /// [`builtin_ops`](crate::dispatch::builtin_ops)).
        pub static OPS: &[&Op<Kernel>] = &[$(&$id),*];

        /// This family's ops (collected by [`crate::ops::builtin_ops`]).
        pub fn ops() -> Vec<crate::op::OpInfo> {
            OPS.iter().map(|o| o.info()).collect()
        }
    };
}

// Before the families: its macros are textually scoped.
#[macro_use]
mod fma_tile;
pub(crate) mod lines;

pub mod activation;
pub mod attention;
pub mod cell;
pub mod conv;
pub mod elementwise;
pub mod index;
pub mod inplace;
pub mod mask;
pub mod matmul;
pub mod norm;
pub mod pool;
pub mod random;
pub mod recurrent;
pub mod reduce;
pub mod self_attention;
pub mod split;
pub mod topk;
pub mod view;

/// Every built-in op of this crate, as each family lists it (`ops()` in each family's file):
/// what [`dispatch::builtin_ops`](crate::dispatch::builtin_ops) returns.
pub fn builtin_ops() -> Vec<crate::op::OpInfo> {
    let families: [fn() -> Vec<crate::op::OpInfo>; 17] = [
        reduce::ops,
        matmul::ops,
        conv::ops,
        index::ops,
        pool::ops,
        random::ops,
        view::ops,
        elementwise::ops,
        inplace::ops,
        recurrent::ops,
        norm::ops,
        mask::ops,
        topk::ops,
        attention::ops,
        activation::ops,
        cell::ops,
        self_attention::ops,
    ];
    families.into_iter().flat_map(|f| f()).collect()
}

/// The raw pointer parallel tasks share (defined beside the thread pool, which uses it too).
pub(crate) use crate::threads::SyncPtr;
