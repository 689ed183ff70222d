//! Collation: turning a list of samples into one batch (`collate_fn`).

use crate::error::Result;
use lockstep_tensor::{DType, Tensor};

/// A `collate_fn`: builds one batch from the samples of a batch, in sampler order.
///
/// Any `Fn(Vec<T>) -> Result<B>` is one; [`DefaultCollate`] is PyTorch's `default_collate`.
pub trait Collate<T>: Send + Sync {
    /// The batch type.
    type Batch: Send + 'static;

    /// Collates `items` (in sampler order).
    ///
    /// # Errors
    /// If the samples cannot form a batch (e.g. tensors of different shapes).
    fn collate(&self, items: Vec<T>) -> Result<Self::Batch>;
}

impl<T, B, F> Collate<T> for F
where
    F: Fn(Vec<T>) -> Result<B> + Send + Sync,
    B: Send + 'static,
{
    type Batch = B;
    fn collate(&self, items: Vec<T>) -> Result<B> {
        self(items)
    }
}

/// PyTorch's `default_collate`: numbers become a 1-d tensor of their own dtype (`f32` → `F32`,
/// `f64` → `F64`, `i64` → `I64`, `u8` → `U8`, `bool` → `Bool`), tensors are stacked along a new
/// first dimension, and tuples / vectors of tensors are collated element-wise.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultCollate;

impl<T: Stack> Collate<T> for DefaultCollate {
    type Batch = T::Batch;
    fn collate(&self, items: Vec<T>) -> Result<T::Batch> {
        T::stack(items)
    }
}

/// A sample type [`DefaultCollate`] knows how to batch.
pub trait Stack: Sized + Send + 'static {
    /// What a batch of these becomes.
    type Batch: Send + 'static;

    /// Stacks `items` into a batch.
    ///
    /// # Errors
    /// If the items disagree in shape or dtype.
    fn stack(items: Vec<Self>) -> Result<Self::Batch>;
}

macro_rules! stack_scalar {
    ($($t:ty),*) => {$(
        impl Stack for $t {
            type Batch = Tensor;
            fn stack(items: Vec<Self>) -> Result<Tensor> {
                let n = items.len();
                Ok(Tensor::from_vec(items, &[n])?)
            }
        }
    )*};
}
stack_scalar!(f32, f64, i64, u8, bool);

fn mismatch(what: String) -> crate::Error {
    crate::error::invalid("default_collate", "batch", what)
}

/// Stacks tensors of one shape and dtype along a new first dimension.
///
/// # Errors
/// If the tensors differ in shape or dtype.
pub fn stack_tensors(items: &[Tensor]) -> Result<Tensor> {
    let Some(first) = items.first() else {
        return Err(mismatch("cannot stack an empty list of tensors".into()));
    };
    let (shape, dtype) = (first.shape().to_vec(), first.dtype());
    for (k, x) in items.iter().enumerate() {
        if x.shape() != shape.as_slice() || x.dtype() != dtype {
            return Err(mismatch(format!(
                "stack expects each tensor to be equal size and dtype, but got {:?} {:?} at entry 0 and {:?} {:?} at entry {k}",
                shape,
                dtype,
                x.shape(),
                x.dtype()
            )));
        }
    }
    let mut out_shape = Vec::with_capacity(shape.len() + 1);
    out_shape.push(items.len());
    out_shape.extend_from_slice(&shape);
    macro_rules! cat {
        ($t:ty) => {{
            let mut buf: Vec<$t> = Vec::with_capacity(first.numel() * items.len());
            for x in items {
                if x.is_contiguous() {
                    buf.extend_from_slice(x.data::<$t>()?);
                } else {
                    buf.extend_from_slice(x.contiguous().data::<$t>()?);
                }
            }
            Tensor::from_vec(buf, &out_shape)?
        }};
    }
    Ok(match dtype {
        DType::F32 => cat!(f32),
        DType::F64 => cat!(f64),
        DType::I64 => cat!(i64),
        DType::U8 => cat!(u8),
        DType::Bool => cat!(bool),
    })
}

impl Stack for Tensor {
    type Batch = Tensor;
    fn stack(items: Vec<Self>) -> Result<Tensor> {
        stack_tensors(&items)
    }
}

/// A list of tensors per sample (e.g. [`TensorDataset`](crate::TensorDataset)'s rows) becomes
/// a list of stacked tensors.
impl Stack for Vec<Tensor> {
    type Batch = Vec<Tensor>;
    fn stack(items: Vec<Self>) -> Result<Vec<Tensor>> {
        let k = items.first().map_or(0, Vec::len);
        if let Some(bad) = items.iter().find(|v| v.len() != k) {
            return Err(mismatch(format!(
                "each element in list of batch should be of equal size ({k} vs {})",
                bad.len()
            )));
        }
        (0..k)
            .map(|j| {
                let col: Vec<Tensor> = items.iter().map(|v| v[j].clone()).collect();
                stack_tensors(&col)
            })
            .collect()
    }
}

impl<A: Stack, B: Stack> Stack for (A, B) {
    type Batch = (A::Batch, B::Batch);
    fn stack(items: Vec<Self>) -> Result<Self::Batch> {
        let (a, b): (Vec<A>, Vec<B>) = items.into_iter().unzip();
        Ok((A::stack(a)?, B::stack(b)?))
    }
}

impl<A: Stack, B: Stack, C: Stack> Stack for (A, B, C) {
    type Batch = (A::Batch, B::Batch, C::Batch);
    fn stack(items: Vec<Self>) -> Result<Self::Batch> {
        let mut a = Vec::with_capacity(items.len());
        let mut b = Vec::with_capacity(items.len());
        let mut c = Vec::with_capacity(items.len());
        for (x, y, z) in items {
            a.push(x);
            b.push(y);
            c.push(z);
        }
        Ok((A::stack(a)?, B::stack(b)?, C::stack(c)?))
    }
}
