//! Output buffers shared by the op files: dense views, zeroed and copied buffers, the
//! transparent-huge-page hint for large ones.

use crate::Tensor;
use crate::dtype::Element;
use crate::error::Result;

/// The dense elements of `t` (as [`Tensor::data`], but also for tensors with no elements,
/// which the layout does not always report as contiguous).
pub(crate) fn dense<T: Element>(t: &Tensor) -> Result<&[T]> {
    if t.numel() == 0 && t.dtype() == T::DTYPE {
        return Ok(&[]);
    }
    t.data::<T>()
}

/// A zeroed buffer of `n` elements for an op's output. Large buffers (4 MiB and up) are
/// advised to the kernel as transparent-huge-page candidates first (Linux only, unless
/// `LOCKSTEP_HUGE_PAGES=0`; a hint, with no effect on values): first-touch page faults are otherwise a large part of the time of
/// streaming ops on fresh outputs.
pub fn zeroed_vec<T: Element + Default>(n: usize) -> Vec<T> {
    let v = vec![T::default(); n];
    advise_huge(&v);
    v
}

/// `v` copied into a fresh buffer from [`zeroed_vec`].
pub fn copied_vec<T: Element + Default>(v: &[T]) -> Vec<T> {
    let mut o = zeroed_vec(v.len());
    o.copy_from_slice(v);
    o
}

/// Advises the pages of a large buffer as transparent-huge-page candidates (see
/// [`zeroed_vec`]).
pub(crate) fn advise_huge<T>(v: &[T]) {
    const MIN: usize = 4 << 20;
    let bytes = core::mem::size_of_val(v);
    if bytes >= MIN && crate::memory::huge_pages_allowed() {
        // The whole pages inside `v`'s allocation.
        let start = v.as_ptr() as usize;
        crate::memory::advise_hugepages(start.next_multiple_of(4096), (start + bytes) & !4095);
    }
}
