//! The fused LSTM ops' parameter gradients over a whole batch, block by block of samples.
//!
//! `--seeding invariant` defines a weight gradient as the fixed-tree sum of the gradients of
//! micro-shards of the batch, each computed by its own backward. The fused ops' backwards
//! reduce over time × batch rows (`[T, B, ·]`, time-major) into `W_ih`, `b_ih`, `W_hh` and
//! `b_hh`'s gradients. Run once over the whole batch, the per-row values (gates' gradients,
//! the input's gradient) have each row's own bits, so only those reductions need the blocks:
//! for block `(first, n)` the rows `first..first + n` of every step are gathered, in the
//! order a micro-shard of those samples holds them (step by step, then sample), into the
//! buffers a micro-shard's backward would have, and the very kernel call that backward makes
//! runs on them. The caller adds the blocks' parts in its tree ([`BatchBlockSum::sum`]).

use super::input;
use crate::error::invalid;
use crate::{Element, Result, Tensor};

/// A batch (dimension 1 of the fused ops' `[T, B, ·]` tensors) cut into blocks of samples,
/// and the fixed-order sum of the blocks' gradients.
pub struct BatchBlockSum<'a> {
    /// `(first sample, samples)` of each block, in order: together exactly `0..B`.
    pub ranges: Vec<(usize, usize)>,
    /// Adds one part per block, given in block order (equal shapes and dtypes): the caller's
    /// fixed tree.
    pub sum: &'a dyn Fn(Vec<Tensor>) -> Result<Tensor>,
}

impl BatchBlockSum<'_> {
    /// Checks that the ranges cover `0..batch` in order, none empty.
    pub(crate) fn check(&self, op: &'static str, batch: usize) -> Result<()> {
        let mut next = 0;
        for &(first, n) in &self.ranges {
            if first != next || n == 0 {
                break;
            }
            next += n;
        }
        let whole = next == batch && self.ranges.iter().map(|r| r.1).sum::<usize>() == batch;
        if whole && !self.ranges.is_empty() {
            return Ok(());
        }
        Err(invalid(
            op,
            "blocks",
            format!(
                "blocks {:?} do not cover a batch of {batch} samples in order",
                self.ranges
            ),
        ))
    }
}

impl BatchBlockSum<'_> {
    /// `Σ f(first, n)` over the blocks, added by [`BatchBlockSum::sum`].
    ///
    /// # Errors
    /// The first error of `f` or of the sum.
    pub fn sum_blocks(&self, mut f: impl FnMut(usize, usize) -> Result<Tensor>) -> Result<Tensor> {
        let parts = self
            .ranges
            .iter()
            .map(|&(s, n)| f(s, n))
            .collect::<Result<Vec<_>>>()?;
        (self.sum)(parts)
    }
}

/// Rows `first..first + n` of each of the `steps` steps of `src` (`[steps, b, width]`), as
/// `[steps, n, width]`, contiguous.
pub(crate) fn gather<T: Copy>(
    op: &'static str,
    src: &[T],
    steps: usize,
    b: usize,
    width: usize,
    first: usize,
    n: usize,
) -> Result<Vec<T>> {
    let mut v = lockstep_rng::try_with_capacity(op, steps * n * width)?;
    for k in 0..steps {
        let at = (k * b + first) * width;
        v.extend_from_slice(&src[at..at + n * width]);
    }
    Ok(v)
}

/// `W_hh`'s and `b_hh`'s gradients (`[4H, H]`, `[4H]`) from `f(dg, hprev, b)`, which computes
/// them from the gates' gradients `dg` `[steps, b, 4H]` and the hidden states `hprev`
/// `[steps, b, H]` (processing order) of `b` samples: on the whole batch without blocks, else
/// on each block's rows and added by `blocks`.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub(crate) fn hh_grads<T: Element>(
    dg: &[T],
    hprev: &[T],
    steps: usize,
    b: usize,
    hd: usize,
    blocks: Option<&BatchBlockSum<'_>>,
    mut f: impl FnMut(&[T], &[T], usize) -> Result<(Vec<T>, Option<Vec<T>>)>,
) -> Result<(Tensor, Option<Tensor>)> {
    let g4 = 4 * hd;
    let tensors = |(dw, db): (Vec<T>, Option<Vec<T>>)| -> Result<(Tensor, Option<Tensor>)> {
        Ok((
            Tensor::from_vec(dw, &[g4, hd])?,
            db.map(|d| Tensor::from_vec(d, &[g4])).transpose()?,
        ))
    };
    let Some(blocks) = blocks else {
        return tensors(f(dg, hprev, b)?);
    };
    let op = "lstm_layer_backward";
    let (mut dws, mut dbs) = (Vec::new(), Vec::new());
    for &(s, n) in &blocks.ranges {
        let dgk = gather(op, dg, steps, b, g4, s, n)?;
        let hpk = gather(op, hprev, steps, b, hd, s, n)?;
        let (dw, db) = tensors(f(&dgk, &hpk, n)?)?;
        dws.push(dw);
        dbs.extend(db);
    }
    let dw = (blocks.sum)(dws)?;
    let db = (!dbs.is_empty()).then(|| (blocks.sum)(dbs)).transpose()?;
    Ok((dw, db))
}

/// [`gather`] of a tensor `[T, B, width]` (contiguous) into a tensor `[T, n, width]`.
fn gather_tensor<T: Element>(t: &Tensor, first: usize, n: usize) -> Result<Tensor> {
    let s = t.shape();
    let v = gather(
        "lstm_input_backward",
        t.data::<T>()?,
        s[0],
        s[1],
        s[2],
        first,
        n,
    )?;
    Tensor::from_vec(v, &[s[0], n, s[2]])
}

/// [`input::lstm_input_backward`]'s gradients with the batch (`x`'s dimension 1) in blocks:
/// `x`'s gradient over the whole batch (each row's bits), `W_ih`'s and `b_ih`'s as the sum of
/// every block's own `lstm_input_backward` on that block's samples (`[T, n, ·]`), added by
/// `blocks`. Traced once per gradient, as `lstm_input_backward`.
///
/// # Errors
/// As [`input::lstm_input_backward`]; blocks that do not cover the batch.
#[allow(clippy::too_many_arguments)]
pub fn lstm_input_backward_blocks(
    gy: &Tensor,
    x: &Tensor,
    w: &Tensor,
    need_x: bool,
    need_w: bool,
    has_bias: bool,
    need_b: bool,
    blocks: &BatchBlockSum<'_>,
) -> Result<Vec<Option<Tensor>>> {
    let op = "lstm_input_backward";
    if x.ndim() != 3 || gy.ndim() != 3 {
        return Err(invalid(
            op,
            "input",
            format!(
                "blocks need x and its gradient as [T, B, ·], got {:?} and {:?}",
                x.shape(),
                gy.shape()
            ),
        ));
    }
    input::check_backward(gy, x, w)?;
    blocks.check(op, x.shape()[1])?;
    let g = w.shape()[0];
    let gy = gy.try_contiguous()?;
    let (xt, wt) = (x.try_contiguous()?, w.try_contiguous()?);
    input::LSTM_INPUT_BACKWARD.run(&[&gy], |_, par| {
        let (gx, _) = input::backward(&gy, &xt, &wt, need_x, false, par)?;
        let (mut gws, mut gbs) = (Vec::new(), Vec::new());
        if need_w || (has_bias && need_b) {
            for &(s, n) in &blocks.ranges {
                let gk = gather_tensor::<f32>(&gy, s, n)?;
                if need_w {
                    let xk = gather_tensor::<f32>(&xt, s, n)?;
                    let (_, gw) = input::backward(&gk, &xk, &wt, false, true, par)?;
                    gws.push(gw.ok_or_else(|| invalid(op, "weight", "no gradient"))?);
                }
                if has_bias && need_b {
                    // As the block's own backward: `linear`'s column sums.
                    gbs.push(gk.reshape(&[-1, g as isize])?.sum_dim(0, false)?);
                }
            }
        }
        let gw = need_w.then(|| (blocks.sum)(gws)).transpose()?;
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(
                (has_bias && need_b)
                    .then(|| (blocks.sum)(gbs))
                    .transpose()?,
            );
        }
        Ok(out)
    })
}
