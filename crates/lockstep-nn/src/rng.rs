//! Where the training layer's random draws come from.
//!
//! By default `Dropout` (and an RNN's inter-layer dropout) draws its mask from the default
//! generator, as PyTorch does, so a PyTorch program and its port draw the same masks.
//! [`with_dropout_generator`] hands a forward pass another generator instead, and
//! [`with_sample_keys`] makes every mask row come from its own sample's stream, so that masks
//! depend on the samples only — not on the batch composition, the number of threads, workers
//! or processes.

use crate::autograd::Var;
use lockstep_rng::Generator;
use lockstep_tensor::Result;
use std::cell::RefCell;

thread_local! {
    static DROPOUT_GEN: RefCell<Option<Generator>> = const { RefCell::new(None) };
    static SAMPLE_KEYS: RefCell<Option<SampleKeys>> = const { RefCell::new(None) };
}

/// The samples of the batch a forward pass computes: dropout masks for sample `indices[b]`
/// (row `b` along the batch dimension) come from
/// `numpy.random.default_rng(SeedSequence(seed, spawn_key=(epoch, indices[b], 1 + call)))`,
/// where `call` counts the dropout calls of the forward pass (0, 1, …) — the
/// [`lockstep_rng::StreamKey`] `sample(seed, epoch, indices[b]).stream(1 + call)`: element kept
/// iff its `random(dtype=float32)` draw is below `1 − p`, in the row's row-major order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleKeys {
    /// The run's seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// The data-set index of each row of the batch.
    pub indices: Vec<u64>,
    calls: u64,
}

impl SampleKeys {
    /// Keys for a batch of samples `indices` in `epoch` of a run seeded `seed`.
    pub fn new(seed: u64, epoch: u64, indices: Vec<u64>) -> Self {
        Self {
            seed,
            epoch,
            indices,
            calls: 0,
        }
    }
}

/// Runs `f` (a forward pass) with per-sample dropout masks (see [`SampleKeys`]).
pub fn with_sample_keys<R>(keys: SampleKeys, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<SampleKeys>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SAMPLE_KEYS.with(|d| *d.borrow_mut() = self.0.take());
        }
    }
    let _r = Restore(SAMPLE_KEYS.with(|d| d.borrow_mut().replace(keys)));
    f()
}

/// Runs `f` with dropout masks on this thread drawn from `g` instead of the default
/// generator; returns `f`'s result and the generator as it is afterwards.
pub fn with_dropout_generator<R>(g: Generator, f: impl FnOnce() -> R) -> (R, Generator) {
    struct Restore(Option<Generator>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DROPOUT_GEN.with(|d| *d.borrow_mut() = self.0.take());
        }
    }
    let prev = DROPOUT_GEN.with(|d| d.borrow_mut().replace(g));
    let restore = Restore(prev);
    let r = f();
    let g = DROPOUT_GEN
        .with(|d| d.borrow_mut().take())
        .expect("set above and only taken here");
    drop(restore);
    (r, g)
}

/// `F.dropout(x, p, training)` from the current dropout source (see the module docs), with the
/// batch along dimension 0.
///
/// # Errors
/// Non-float dtype; `p` outside `[0, 1]`.
pub fn dropout(x: &Var, p: f64, training: bool) -> Result<Var> {
    dropout_batch_dim(x, p, training, 0)
}

/// [`dropout`] with the batch along `batch_dim` (1 for an RNN's time-major `[T, B, H]`), which
/// matters only for per-sample masks ([`with_sample_keys`]).
///
/// # Errors
/// Non-float dtype; `p` outside `[0, 1]`; with sample keys, a batch dimension whose size is not
/// the number of keys.
pub fn dropout_batch_dim(x: &Var, p: f64, training: bool, batch_dim: usize) -> Result<Var> {
    let keyed = SAMPLE_KEYS.with(|k| {
        k.borrow_mut().as_mut().map(|k| {
            let call = k.calls;
            k.calls += 1;
            (k.seed, k.epoch, k.indices.clone(), call)
        })
    });
    if let Some((seed, epoch, indices, call)) = keyed
        && training
        && p > 0.0
        && x.numel() > 0
    {
        return per_sample_dropout(x, p, batch_dim, seed, epoch, &indices, call);
    }
    dropout_from_source(x, p, training)
}

fn per_sample_dropout(
    x: &Var,
    p: f64,
    batch_dim: usize,
    seed: u64,
    epoch: u64,
    indices: &[u64],
    call: u64,
) -> Result<Var> {
    let m = per_sample_mask(
        x.shape(),
        x.dtype(),
        p,
        batch_dim,
        (seed, epoch, indices, call),
    )?;
    x.mul(&Var::constant(m))
}

/// The per-sample mask of [`with_sample_keys`] for a tensor of `shape` and `dtype`; `key` is
/// (seed, epoch, indices, call).
fn per_sample_mask(
    shape: &[usize],
    dtype: lockstep_tensor::DType,
    p: f64,
    batch_dim: usize,
    (seed, epoch, indices, call): (u64, u64, &[u64], u64),
) -> Result<lockstep_tensor::Tensor> {
    use lockstep_rng::StreamKey;
    use lockstep_tensor::{DType, Error, Tensor};
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op: "dropout",
            arg: "p",
            reason: format!("dropout probability has to be between 0 and 1, but got {p}"),
        });
    }
    if batch_dim >= shape.len() || shape[batch_dim] != indices.len() {
        return Err(Error::InvalidArgument {
            op: "dropout",
            arg: "input",
            reason: format!(
                "per-sample dropout: dimension {batch_dim} of input {shape:?} should be the batch of {} samples",
                indices.len()
            ),
        });
    }
    let outer: usize = shape[..batch_dim].iter().product();
    let inner: usize = shape[batch_dim + 1..].iter().product();
    let b = indices.len();
    let keep = (1.0 - p) as f32;
    let scale = 1.0f32 / keep;
    let mut mask = vec![0f32; shape.iter().product()];
    let mut u = vec![0f32; outer * inner];
    for (row, &idx) in indices.iter().enumerate() {
        StreamKey::sample(seed, epoch, idx)
            .stream(1 + call)
            .generator()
            .random_f32(&mut u);
        for o in 0..outer {
            for i in 0..inner {
                let m = if u[o * inner + i] < keep { scale } else { 0.0 };
                mask[(o * b + row) * inner + i] = m;
            }
        }
    }
    let m = Tensor::from_vec(mask, shape)?;
    Ok(if dtype == DType::F64 {
        m.to_dtype(DType::F64)
    } else {
        m
    })
}

/// The mask [`dropout`] multiplies a dense (row-major) tensor of `shape` and `dtype` by in
/// this forward pass, from the current source, with the same draws and the same effect on
/// the source ([`with_sample_keys`]' call count included): `1 / (1 − p)` where kept, `0`
/// where dropped; `None` where dropout is the identity (not training, `p == 0`, no elements).
/// For fused ops that apply dropout inside (`F::causal_self_attention`).
///
/// # Errors
/// As [`dropout`]: a dtype that is not float, `p` outside `[0, 1]`.
pub fn dropout_mask_like(
    shape: &[usize],
    dtype: lockstep_tensor::DType,
    p: f64,
    training: bool,
) -> Result<Option<lockstep_tensor::Tensor>> {
    use lockstep_tensor::{Error, Tensor};
    // Refused before the keyed source counts a call, whichever source is active.
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op: "dropout",
            arg: "p",
            reason: format!("dropout probability has to be between 0 and 1, but got {p}"),
        });
    }
    let numel = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::InvalidArgument {
            op: "dropout",
            arg: "shape",
            reason: format!("{shape:?} has more elements than fit in memory"),
        })?;
    let keyed = SAMPLE_KEYS.with(|k| {
        k.borrow_mut().as_mut().map(|k| {
            let call = k.calls;
            k.calls += 1;
            (k.seed, k.epoch, k.indices.clone(), call)
        })
    });
    if !dtype.is_float() {
        return Err(Error::DType {
            op: "dropout",
            expected: lockstep_tensor::DType::F32,
            got: dtype,
        });
    }
    if let Some((seed, epoch, indices, call)) = keyed
        && training
        && p > 0.0
        && numel > 0
    {
        return per_sample_mask(shape, dtype, p, 0, (seed, epoch, &indices, call)).map(Some);
    }
    if !training || p == 0.0 || numel == 0 {
        return Ok(None);
    }
    DROPOUT_GEN
        .with(|d| Tensor::dropout_mask(shape, dtype, p, d.borrow_mut().as_mut()))
        .map(Some)
}

fn dropout_from_source(x: &Var, p: f64, training: bool) -> Result<Var> {
    DROPOUT_GEN.with(|d| match d.borrow_mut().as_mut() {
        Some(g) => x.dropout(p, training, Some(g)),
        None => x.dropout(p, training, None),
    })
}
