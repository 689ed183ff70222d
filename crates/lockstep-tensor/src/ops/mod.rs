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

pub mod attention;
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
pub mod split;
pub mod topk;
pub mod view;

/// Every built-in op of this crate, as each family lists it (`ops()` in each family's file):
/// what [`dispatch::builtin_ops`](crate::dispatch::builtin_ops) returns.
pub fn builtin_ops() -> Vec<crate::dispatch::OpInfo> {
    let families: [fn() -> Vec<crate::dispatch::OpInfo>; 14] = [
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
    ];
    families.into_iter().flat_map(|f| f()).collect()
}

/// A raw pointer shared by parallel tasks that write disjoint elements (or write atomically):
/// each use documents why no two tasks touch the same element.
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);

// Copy whatever `T` is (a derive would ask `T: Copy`): it is only a pointer.
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SyncPtr`, not its field).
    #[inline(always)]
    pub(crate) fn get(self) -> *mut T {
        self.0
    }

    /// The pointer `off` elements on.
    #[inline(always)]
    pub(crate) fn at(self, off: usize) -> *mut T {
        self.0.wrapping_add(off)
    }

    /// `len` elements from `at`, as a slice.
    ///
    /// # Safety
    /// They lie inside the buffer, and no other task touches them while the slice lives.
    #[allow(clippy::mut_from_ref, clippy::wrong_self_convention)]
    #[inline(always)]
    pub(crate) unsafe fn rows<'a>(self, at: usize, len: usize) -> &'a mut [T] {
        // SAFETY: as documented.
        unsafe { core::slice::from_raw_parts_mut(self.0.add(at), len) }
    }
}

impl<T: Copy> SyncPtr<T> {
    /// Copies `src` to `self + off`.
    ///
    /// # Safety
    /// `off + src.len()` elements must be inside the buffer, and no other task writes them.
    #[inline(always)]
    pub(crate) unsafe fn put(self, off: usize, src: &[T]) {
        // SAFETY: as documented.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.0.add(off), src.len()) }
    }
}
// SAFETY: used only where each element is written by one task (documented at each use) or
// atomically.
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SyncPtr<T> {}
