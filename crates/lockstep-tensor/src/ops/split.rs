//! `split` and `split_with_sizes`: views along one dimension (no copy, no arithmetic, so
//! nothing to dispatch), with PyTorch's rules for the sizes.

use crate::error::Result;
use crate::layout::resolve_dim;
use crate::{Tensor, invalid};

/// The piece lengths of `torch.split(x, split_size, dim)` for a dimension of size `n`:
/// `split_size` each, the last piece shorter when `n` is not a multiple; one empty piece when
/// `n` is 0.
///
/// # Errors
/// `split_size` 0 for a non-empty dimension (naming `op` and `split_size`).
pub fn split_lengths(op: &'static str, n: usize, split_size: usize) -> Result<Vec<usize>> {
    if split_size == 0 {
        return if n == 0 {
            Ok(vec![0])
        } else {
            Err(invalid(
                op,
                "split_size",
                format!("split_size can only be 0 if the dimension size is 0, but got size {n}"),
            ))
        };
    }
    let pieces = n.div_ceil(split_size).max(1);
    Ok((0..pieces)
        .map(|i| split_size.min(n - (i * split_size).min(n)))
        .collect())
}

/// Checks that `sizes` add up to `n` (`torch.split_with_sizes`).
///
/// # Errors
/// Sizes whose sum is not `n` (or overflows), naming `op` and `split_sizes`.
pub fn check_split_sizes(op: &'static str, n: usize, dim: usize, sizes: &[usize]) -> Result<()> {
    let sum = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
    if sum == Some(n) {
        Ok(())
    } else {
        Err(invalid(
            op,
            "split_sizes",
            format!(
                "split_sizes must sum exactly to {n} (the size of dimension {dim}), but got split_sizes={sizes:?}"
            ),
        ))
    }
}

impl Tensor {
    /// `torch.split(self, split_size, dim)`: views of `split_size` elements along `dim`, the
    /// last one shorter if the size is not a multiple (one empty view for an empty dimension).
    /// The views share `self`'s storage.
    ///
    /// # Errors
    /// `dim` out of range; `split_size` 0 for a non-empty dimension.
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Tensor>> {
        let d = resolve_dim("split", dim, self.ndim())?;
        let lens = split_lengths("split", self.shape()[d], split_size)?;
        self.pieces(d, &lens)
    }

    /// `torch.split(self, split_sizes, dim)` with a list (`split_with_sizes`): views of those
    /// lengths along `dim`, in order, sharing `self`'s storage.
    ///
    /// # Errors
    /// `dim` out of range; sizes that do not add up to the dimension's size.
    pub fn split_with_sizes(&self, split_sizes: &[usize], dim: isize) -> Result<Vec<Tensor>> {
        let d = resolve_dim("split_with_sizes", dim, self.ndim())?;
        check_split_sizes("split_with_sizes", self.shape()[d], d, split_sizes)?;
        self.pieces(d, split_sizes)
    }

    /// Consecutive narrow views of lengths `lens` along `d`.
    fn pieces(&self, d: usize, lens: &[usize]) -> Result<Vec<Tensor>> {
        let mut start = 0;
        lens.iter()
            .map(|&l| {
                let v = self.narrow(d as isize, start, l);
                start += l;
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_pytorch() {
        assert_eq!(split_lengths("t", 10, 3).unwrap(), [3, 3, 3, 1]);
        assert_eq!(split_lengths("t", 9, 3).unwrap(), [3, 3, 3]);
        assert_eq!(split_lengths("t", 2, 5).unwrap(), [2]);
        assert_eq!(split_lengths("t", 0, 5).unwrap(), [0]);
        assert_eq!(split_lengths("t", 0, 0).unwrap(), [0]);
        assert!(split_lengths("t", 4, 0).is_err());
        assert!(check_split_sizes("t", 5, 0, &[2, 3]).is_ok());
        assert!(check_split_sizes("t", 5, 0, &[2, 2]).is_err());
        assert!(check_split_sizes("t", 5, 0, &[usize::MAX, 6]).is_err());
    }
}
