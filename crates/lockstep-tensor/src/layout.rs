//! Shape, strides and offset: how a tensor's elements sit in its storage. View ops only make a
//! new `Layout`; they never touch data.

use crate::error::{Error, Result};

/// Shape, element strides and start offset of a tensor in its storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

/// Row-major strides for `shape` (sizes of 0 count as 1), or `None` where they overflow
/// `usize`.
fn checked_strides(shape: &[usize]) -> Option<Vec<usize>> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].checked_mul(shape[i + 1].max(1))?;
    }
    Some(strides)
}

/// Row-major strides for `shape`.
///
/// Only an empty shape can have strides beyond `usize` (a non-empty one's are at most its
/// element count, which a buffer holds): those saturate at `usize::MAX` rather than overflow,
/// and address no element. Where such a shape must be refused,
/// [`try_contiguous_strides`] returns the error.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    checked_strides(shape).unwrap_or_else(|| {
        let mut strides = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
        }
        strides
    })
}

/// Row-major strides for `shape`, checked.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `op` if they overflow `usize` (an empty shape such as
/// `[0, 2^40, 2^40]`).
pub fn try_contiguous_strides(op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
    checked_strides(shape).ok_or_else(|| {
        crate::error::invalid(
            op,
            "shape",
            format!("{shape:?} has too many elements: its row-major strides overflow"),
        )
    })
}

/// Resolves a possibly negative dimension index against `ndim` dimensions.
pub fn resolve_dim(op: &'static str, dim: isize, ndim: usize) -> Result<usize> {
    let d = if dim < 0 { dim + ndim as isize } else { dim };
    if d < 0 || d as usize >= ndim {
        return Err(Error::DimOutOfRange { op, dim, ndim });
    }
    Ok(d as usize)
}

impl Layout {
    /// A row-major layout of `shape` at offset 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Self {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// A layout from its parts (the caller guarantees it stays inside the storage).
    pub fn new(shape: Vec<usize>, strides: Vec<usize>, offset: usize) -> Self {
        Self {
            shape,
            strides,
            offset,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index in the storage of the first element.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        // Checked: a size of 0 after sizes whose product overflows (`[2^40, 2^40, 0]`, an
        // empty view) is still 0 elements. A non-empty shape's product fits (a buffer holds it).
        self.shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or_else(|| {
                if self.shape.contains(&0) {
                    0
                } else {
                    usize::MAX
                }
            })
    }

    /// Whether the elements are row-major and dense (dimensions of size 1 may have any stride).
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            // No element to misplace: any strides describe an empty dense tensor.
            return true;
        }
        let mut expected = 1;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d != 1 && s != expected {
                return false;
            }
            expected *= d;
        }
        true
    }

    /// Storage index of every element, in row-major order of the view.
    pub fn indices(&self) -> StridedIndex<'_> {
        StridedIndex {
            layout: self,
            pos: vec![0; self.shape.len()],
            next: if self.numel() == 0 {
                None
            } else {
                Some(self.offset)
            },
        }
    }
}

/// Iterator over the storage indices of a layout, in row-major order.
pub struct StridedIndex<'a> {
    layout: &'a Layout,
    pos: Vec<usize>,
    next: Option<usize>,
}

impl Iterator for StridedIndex<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        let cur = self.next?;
        let mut idx = cur;
        let mut d = self.pos.len();
        loop {
            if d == 0 {
                self.next = None;
                break;
            }
            d -= 1;
            self.pos[d] += 1;
            idx += self.layout.strides[d];
            if self.pos[d] < self.layout.shape[d] {
                self.next = Some(idx);
                break;
            }
            idx -= self.layout.strides[d] * self.pos[d];
            self.pos[d] = 0;
        }
        Some(cur)
    }
}
