//! Copies of short lines (rows of a few to a few dozen elements) as moves of a constant size:
//! a `copy_from_slice` of a length only known at run time becomes a `memcpy` call per line,
//! which costs more than the copy (the attention's panels, the LSTM's weight panels, the
//! convolutions' padded rows).

/// `d = s` for short lines: the panel widths' lengths as moves of a constant size, other
/// short lengths (a head's last, partial panel) in pieces of 8, 4, 2 and 1 (a call to
/// `memmove` per line cost more than the copy).
#[inline(always)]
pub(crate) fn copy_line<T: Copy>(d: &mut [T], s: &[T]) {
    match d.len() {
        6 => copy_fixed::<T, 6>(d, s),
        8 => copy_fixed::<T, 8>(d, s),
        12 => copy_fixed::<T, 12>(d, s),
        16 => copy_fixed::<T, 16>(d, s),
        32 => copy_fixed::<T, 32>(d, s),
        n if n < 16 => {
            let mut at = 0;
            for piece in [8, 4, 2, 1] {
                if n & piece != 0 {
                    match piece {
                        8 => copy_fixed::<T, 8>(&mut d[at..], &s[at..]),
                        4 => copy_fixed::<T, 4>(&mut d[at..], &s[at..]),
                        2 => copy_fixed::<T, 2>(&mut d[at..], &s[at..]),
                        _ => d[at] = s[at],
                    }
                    at += piece;
                }
            }
        }
        _ => d.copy_from_slice(s),
    }
}

/// `d[..N] = s[..N]` as one value moved through registers (`copy_from_slice` of 128 bytes
/// became a `memcpy` call).
#[inline(always)]
pub(crate) fn copy_fixed<T: Copy, const N: usize>(d: &mut [T], s: &[T]) {
    let (d, s) = (&mut d[..N], &s[..N]);
    // SAFETY: both slices hold `N` elements (the slicing above checked it); unaligned
    // accesses, as neither need be aligned to `[T; N]`.
    unsafe {
        let v = (s.as_ptr() as *const [T; N]).read_unaligned();
        (d.as_mut_ptr() as *mut [T; N]).write_unaligned(v);
    }
}
