//! The [`gemm`](https://docs.rs/gemm) crate (candle's CPU matrix product) as a `matmul`
//! candidate for benchmark mode. It chooses its blocking from the cache sizes it detects and
//! does not document how its threads share the work, so its bits may depend on the machine and
//! on the thread count: it is registered as `NotGuaranteed` and the heuristic never picks it.

use super::{GemmFloat, Strides};
use crate::error::{Error, Result};
use crate::threads::Par;

/// Whether an `rows × cols` operand with strides `s` fits in `len` elements.
fn fits(rows: usize, cols: usize, (rs, cs): Strides, len: usize) -> bool {
    rows == 0
        || cols == 0
        || (rows - 1)
            .checked_mul(rs)
            .zip((cols - 1).checked_mul(cs))
            .and_then(|(r, c)| r.checked_add(c))
            .is_some_and(|last| last < len)
}

/// `C = A·B` into the dense row-major `m × n` slice `c`, with the `gemm` crate on `par`'s
/// threads.
///
/// # Errors
/// An operand that does not fit in its slice, or strides beyond `isize`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn product<T: GemmFloat>(
    (m, n, k): (usize, usize, usize),
    a: &[T],
    sa: Strides,
    b: &[T],
    sb: Strides,
    c: &mut [T],
    par: &Par,
) -> Result<()> {
    let bad = |what: &str| Error::InvalidArgument {
        op: "matmul",
        arg: "input",
        reason: format!("internal: {what} does not fit its buffer"),
    };
    if !fits(m, k, sa, a.len()) {
        return Err(bad("a"));
    }
    if !fits(k, n, sb, b.len()) {
        return Err(bad("b"));
    }
    if c.len() != m * n {
        return Err(bad("c"));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        c.fill(T::ZERO);
        return Ok(());
    }
    let s = |v: usize| isize::try_from(v).map_err(|_| bad("a stride"));
    let (ars, acs, brs, bcs, n_i) = (s(sa.0)?, s(sa.1)?, s(sb.0)?, s(sb.1)?, s(n)?);
    let threads = par.threads();
    let mut run = || {
        // SAFETY: every element named by (m, k, sa) and (k, n, sb) lies inside `a` and `b`
        // (checked above), C is dense m × n, and `read_dst == false` never reads C.
        unsafe {
            ::gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n_i,
                false,
                a.as_ptr(),
                acs,
                ars,
                b.as_ptr(),
                bcs,
                brs,
                T::ZERO,
                T::ONE,
                false,
                false,
                false,
                if threads > 1 {
                    ::gemm::Parallelism::Rayon(threads)
                } else {
                    ::gemm::Parallelism::None
                },
            )
        }
    };
    if threads > 1 {
        par.install(run);
    } else {
        run();
    }
    Ok(())
}
