//! Ops, one file per family. Each file declares its ops' implementations as
//! [`dispatch::Op`](crate::dispatch::Op) statics where there is a choice of algorithm, and the
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
        pub fn ops() -> Vec<crate::dispatch::OpInfo> {
            OPS.iter().map(|o| o.info()).collect()
        }
    };
}

pub mod conv;
pub mod elementwise;
pub mod index;
pub mod inplace;
pub mod mask;
pub mod matmul;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod split;
pub mod topk;
pub mod view;

/// Every built-in op of this crate, as each family lists it (`ops()` in each family's file):
/// what [`dispatch::builtin_ops`](crate::dispatch::builtin_ops) returns.
pub fn builtin_ops() -> Vec<crate::dispatch::OpInfo> {
    let families: [fn() -> Vec<crate::dispatch::OpInfo>; 11] = [
        reduce::ops,
        matmul::ops,
        conv::ops,
        index::ops,
        pool::ops,
        random::ops,
        view::ops,
        elementwise::ops,
        inplace::ops,
        mask::ops,
        topk::ops,
    ];
    families.into_iter().flat_map(|f| f()).collect()
}

/// A raw pointer shared by parallel tasks that write disjoint elements (or write atomically):
/// each use documents why no two tasks touch the same element.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);

impl<T> SyncPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SyncPtr`, not its field).
    #[inline(always)]
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}
// SAFETY: used only where each element is written by one task (documented at each use) or
// atomically.
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SyncPtr<T> {}
