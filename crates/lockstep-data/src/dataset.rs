//! Data sets: the map-style [`Dataset`] and [`IterableDataset`] traits, [`TensorDataset`],
//! [`Subset`], [`random_split`].

use crate::error::{Error, Result, invalid};
use crate::rng::{SampleRng, SharedGenerator, WorkerInfo};
use crate::sampler::check_index;
use lockstep_rng::compat::torch as t;
use lockstep_tensor::{DType, Tensor};
use std::sync::Arc;

/// A map-style data set (`torch.utils.data.Dataset` with `__len__` and `__getitem__`).
///
/// `get` receives the sample's random source: in PerSample mode a stream of its own, in
/// TorchCompatible mode the worker's (or the default) generator — see [`SampleRng`]. A data
/// set without randomness ignores it. `get` may be called from several worker threads at
/// once, hence `Sync`.
pub trait Dataset: Send + Sync {
    /// One sample.
    type Item: Send + 'static;

    /// Number of samples.
    fn len(&self) -> usize;

    /// Whether the data set has no sample.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sample `index` (`0..len()`).
    ///
    /// # Errors
    /// If `index` is out of range or the sample cannot be produced.
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<Self::Item>;
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<Self::Item> {
        (**self).get(index, rng)
    }
}

/// An iterable-style data set (`torch.utils.data.IterableDataset`). Each worker calls
/// [`iter`](Self::iter) with its [`WorkerInfo`] (`None` with `num_workers = 0`) and must
/// yield only its own shard (e.g. every `num_workers`-th item from `id`), as in PyTorch.
pub trait IterableDataset: Send + Sync {
    /// One sample.
    type Item: Send + 'static;

    /// The samples of this worker's shard.
    fn iter(
        &self,
        worker: Option<&WorkerInfo>,
    ) -> Box<dyn Iterator<Item = Result<Self::Item>> + Send + '_>;
}

/// `TensorDataset(*tensors)`: sample `i` is row `i` of each tensor.
#[derive(Clone, Debug)]
pub struct TensorDataset {
    tensors: Vec<Tensor>,
    len: usize,
}

impl TensorDataset {
    /// A data set over tensors that share their first dimension.
    ///
    /// # Errors
    /// If no tensor is given, a tensor has no dimension, or the first dimensions differ.
    pub fn new(tensors: Vec<Tensor>) -> Result<Self> {
        let first = tensors
            .first()
            .ok_or_else(|| invalid("TensorDataset", "tensors", "at least one tensor is needed"))?;
        let len = *first.shape().first().ok_or_else(|| {
            invalid(
                "TensorDataset",
                "tensors",
                "a 0-dimensional tensor has no rows",
            )
        })?;
        for (k, tns) in tensors.iter().enumerate() {
            if tns.shape().first() != Some(&len) {
                return Err(invalid(
                    "TensorDataset",
                    "tensors",
                    format!(
                        "Size mismatch between tensors: tensor 0 has shape {:?}, tensor {k} has shape {:?}",
                        first.shape(),
                        tns.shape()
                    ),
                ));
            }
        }
        let tensors = tensors.into_iter().map(|t| t.contiguous()).collect();
        Ok(Self { tensors, len })
    }

    /// The tensors.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
}

/// Row `i` of a contiguous tensor with at least one dimension.
pub fn tensor_row(t: &Tensor, i: usize) -> Result<Tensor> {
    let shape = t.shape();
    let rows = *shape
        .first()
        .ok_or_else(|| invalid("tensor_row", "tensor", "a 0-dimensional tensor has no rows"))?;
    check_index("tensor_row", i, rows)?;
    let inner = &shape[1..];
    let w: usize = inner.iter().product();
    let c = t.contiguous();
    let r = i * w..(i + 1) * w;
    Ok(match t.dtype() {
        DType::F32 => Tensor::from_vec(c.data::<f32>()?[r].to_vec(), inner)?,
        DType::F64 => Tensor::from_vec(c.data::<f64>()?[r].to_vec(), inner)?,
        DType::I64 => Tensor::from_vec(c.data::<i64>()?[r].to_vec(), inner)?,
        DType::U8 => Tensor::from_vec(c.data::<u8>()?[r].to_vec(), inner)?,
        DType::Bool => Tensor::from_vec(c.data::<bool>()?[r].to_vec(), inner)?,
    })
}

impl Dataset for TensorDataset {
    type Item = Vec<Tensor>;
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize, _rng: &mut SampleRng<'_>) -> Result<Vec<Tensor>> {
        check_index("TensorDataset", index, self.len)?;
        self.tensors.iter().map(|t| tensor_row(t, index)).collect()
    }
}

/// `Subset(dataset, indices)`: sample `i` is `dataset[indices[i]]`. Its random stream (in
/// PerSample mode) is keyed by the index in the subset, as the loader sees it.
pub struct Subset<D> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// A view of `dataset` at `indices`.
    ///
    /// # Errors
    /// If an index is out of range.
    pub fn new(dataset: Arc<D>, indices: Vec<usize>) -> Result<Self> {
        let n = dataset.len();
        if let Some(&i) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange {
                op: "Subset",
                index: i,
                len: n,
            });
        }
        Ok(Self { dataset, indices })
    }

    /// The indices into the parent data set.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The parent data set.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize, rng: &mut SampleRng<'_>) -> Result<D::Item> {
        check_index("Subset", index, self.indices.len())?;
        self.dataset.get(self.indices[index], rng)
    }
}

/// `random_split(dataset, lengths, generator)` with lengths in samples: the subsets take
/// consecutive slices of `randperm(len(dataset), generator)` (the default generator when
/// `generator` is [`SharedGenerator::Default`]), exactly as PyTorch.
///
/// # Errors
/// If the lengths do not add up to the data set's length.
pub fn random_split<D: Dataset>(
    dataset: Arc<D>,
    lengths: &[usize],
    generator: &SharedGenerator,
) -> Result<Vec<Subset<D>>> {
    let n = dataset.len();
    let total = lengths.iter().try_fold(0usize, |a, &l| a.checked_add(l));
    if total != Some(n) {
        return Err(invalid(
            "random_split",
            "lengths",
            format!(
                "Sum of input lengths {lengths:?} does not equal the length of the input dataset ({n})"
            ),
        ));
    }
    let perm = generator.with(|g| t::try_randperm(g, n))?;
    let mut out = Vec::with_capacity(lengths.len());
    let mut off = 0;
    for &l in lengths {
        let idx = perm[off..off + l].iter().map(|&i| i as usize).collect();
        out.push(Subset {
            dataset: Arc::clone(&dataset),
            indices: idx,
        });
        off += l;
    }
    Ok(out)
}

/// `random_split` with fractions summing to 1: each length is `floor(n·f)`, and the remainder
/// is handed out one by one round-robin from the first subset, as PyTorch does.
///
/// # Errors
/// If a fraction is outside `[0, 1]` or the fractions do not sum to 1 (within `1e-9`).
pub fn random_split_fractions<D: Dataset>(
    dataset: Arc<D>,
    fractions: &[f64],
    generator: &SharedGenerator,
) -> Result<Vec<Subset<D>>> {
    let sum: f64 = fractions.iter().sum();
    if fractions.iter().any(|f| !(0.0..=1.0).contains(f)) || (sum - 1.0).abs() > 1e-9 {
        return Err(invalid(
            "random_split",
            "lengths",
            format!("fractions {fractions:?} must each be in [0, 1] and sum to 1"),
        ));
    }
    let n = dataset.len();
    let mut lengths: Vec<usize> = fractions
        .iter()
        .map(|f| (n as f64 * f).floor() as usize)
        .collect();
    let rem = n - lengths.iter().sum::<usize>();
    let k = lengths.len();
    for i in 0..rem {
        lengths[i % k] += 1;
    }
    random_split(dataset, &lengths, generator)
}
