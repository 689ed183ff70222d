//! Normalisation kernels: batch normalisation's per-channel statistics and elementwise passes
//! (`batch_norm`, `batch_norm_backward`), f64 accumulation in index order, the same bits at
//! any number of threads and on every instruction set (see `batch_norm_kernel.rs`).
//! `lockstep-nn`'s `F::batch_norm` turns them into a differentiable op and keeps the running
//! statistics.

mod batch_norm_kernel;

use crate::error::invalid;
use crate::op::{Guarantee, Impl, Op};
use crate::threads::Par;
use crate::{DType, Error, Result, Tensor};
use batch_norm_kernel::{BnElem, ChannelConst, Pass};

/// One thread-invariant implementation; the kernel is this file's (`f` unused).
macro_rules! single_op {
    ($(#[$doc:meta])* $id:ident = $name:literal, $algo:literal) => {
        $(#[$doc])*
        static $id: Op<()> = Op {
            name: $name,
            impls: &[Impl {
                algo: $algo,
                guarantee: Guarantee::ThreadInvariant,
                f: (),
            }],
        };
    };
}

single_op!(
    /// Batch normalisation's forward: per-channel statistics (training) and the normalised
    /// output, accumulated in f64 in index order.
    BATCH_NORM = "batch_norm", "batch_norm.f64_channels"
);
single_op!(
    /// Its backward: the input's, weight's and bias's gradients.
    BATCH_NORM_BACKWARD = "batch_norm_backward", "batch_norm_backward.f64_channels"
);

/// The ops of this family.
pub fn ops() -> Vec<crate::op::OpInfo> {
    vec![BATCH_NORM.info(), BATCH_NORM_BACKWARD.info()]
}

/// Batch statistics of a training step: the mean and the sum of squared deviations per
/// channel, in f64 (for the running statistics' update).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchStats {
    /// The mean per channel.
    pub mean: Vec<f64>,
    /// `Σ (x − mean)²` per channel.
    pub var_sum: Vec<f64>,
}

/// Batch normalisation of `x` `[N, C, ...]`, run forward through dispatch (`batch_norm`),
/// holding what its backward (`batch_norm_backward`) needs.
pub struct BatchNorm {
    x: Tensor,
    n: usize,
    c: usize,
    s: usize,
    mean: Vec<f64>,
    invstd: Vec<f64>,
    w: Option<Vec<f64>>,
    has_bias: bool,
    batch_stats: bool,
}

impl BatchNorm {
    /// `y = (x − mean)/√(var + eps)·weight + bias` per channel, computed in f64 and rounded
    /// once: with `running = Some((mean, var))` and `training == false` the running statistics,
    /// else the batch's (mean, biased variance), which are returned for the running update.
    /// `x` is `[N, C, ...]` of a float type; `weight`, `bias` and the running statistics are
    /// `[C]` of the same type. The bits do not depend on the number of threads.
    ///
    /// # Errors
    /// A non-float `x`, fewer than 2 dimensions, parameters of another shape or dtype, fewer
    /// than 2 values per channel in batch mode, `OutOfMemory`.
    pub fn forward(
        x: &Tensor,
        running: Option<(&Tensor, &Tensor)>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        training: bool,
        eps: f64,
    ) -> Result<(Tensor, Option<BatchStats>, BatchNorm)> {
        const OP: &str = "batch_norm";
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(Error::DType {
                op: OP,
                expected: DType::F32,
                got: dtype,
            });
        }
        if x.ndim() < 2 {
            return Err(invalid(
                OP,
                "input",
                format!(
                    "expected at least 2-D input [N, C, ...], got {:?}",
                    x.shape()
                ),
            ));
        }
        let (n, c) = (x.shape()[0], x.shape()[1]);
        let s: usize = x.shape()[2..].iter().product();
        let params = [
            ("running_mean", running.map(|r| r.0)),
            ("running_var", running.map(|r| r.1)),
            ("weight", weight),
            ("bias", bias),
        ];
        for (what, p) in params {
            if let Some(p) = p
                && (p.shape() != [c] || p.dtype() != dtype)
            {
                return Err(invalid(
                    OP,
                    what,
                    format!(
                        "expected {dtype:?} of shape [{c}], got {:?} {:?}",
                        p.dtype(),
                        p.shape()
                    ),
                ));
            }
        }
        let batch_stats = training || running.is_none();
        if batch_stats && n * s <= 1 {
            return Err(invalid(
                OP,
                "input",
                format!(
                    "Expected more than 1 value per channel when training, got input size {:?}",
                    x.shape()
                ),
            ));
        }
        let xt = x.try_contiguous()?;
        let mut traced = vec![x];
        traced.extend(weight);
        traced.extend(bias);
        let (y, (stats, norm)) = BATCH_NORM.run(&traced, |_, par| {
            let m = (n * s) as f64;
            let (mean, var, stats) = match running {
                Some((rm, rv)) if !batch_stats => (rm.to_f64_vec(), rv.to_f64_vec(), None),
                _ => {
                    let (mean, var_sum) = match dtype {
                        DType::F32 => stats_of(xt.data::<f32>()?, n, c, s, par),
                        _ => stats_of(xt.data::<f64>()?, n, c, s, par),
                    };
                    let var = var_sum.iter().map(|&v| v / m).collect();
                    (mean.clone(), var, Some(BatchStats { mean, var_sum }))
                }
            };
            let invstd: Vec<f64> = var.iter().map(|&v| 1.0 / (v + eps).sqrt()).collect();
            let norm = BatchNorm {
                x: xt.clone(),
                n,
                c,
                s,
                mean,
                invstd,
                w: weight.map(Tensor::to_f64_vec),
                has_bias: bias.is_some(),
                batch_stats,
            };
            let b = bias.map(Tensor::to_f64_vec);
            // x̂ is recomputed from x where needed (the same f64 operations, so the same bits
            // as a stored copy), with no f64 copies of the input, output or gradient.
            let y = match dtype {
                DType::F32 => norm.forward_t::<f32>(b.as_deref(), par)?,
                _ => norm.forward_t::<f64>(b.as_deref(), par)?,
            };
            Ok((y, (stats, norm)))
        })?;
        Ok((y, stats, norm))
    }

    /// The gradients from `g` (the output's gradient): the input's, then the weight's and the
    /// bias's (each only if the forward had it), through dispatch (`batch_norm_backward`).
    ///
    /// # Errors
    /// `g` of another shape or dtype than the output, `OutOfMemory`.
    pub fn backward(&self, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let dtype = self.x.dtype();
        if g.shape() != self.x.shape() || g.dtype() != dtype {
            return Err(invalid(
                "batch_norm_backward",
                "grad",
                format!(
                    "expected a {dtype:?} gradient of shape {:?}, got {:?} {:?}",
                    self.x.shape(),
                    g.dtype(),
                    g.shape()
                ),
            ));
        }
        let c = self.c;
        BATCH_NORM_BACKWARD.run(&[g], |_, par| {
            let (gx, sg, sgx) = match dtype {
                DType::F32 => self.backward_t::<f32>(g, par)?,
                _ => self.backward_t::<f64>(g, par)?,
            };
            let mut out = vec![Some(gx)];
            if self.w.is_some() {
                out.push(Some(from_f64s(sgx, &[c], dtype)?));
            }
            if self.has_bias {
                out.push(Some(from_f64s(sg, &[c], dtype)?));
            }
            Ok(out)
        })
    }
}

fn from_f64s(v: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    match dtype {
        DType::F32 => Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), shape),
        _ => Tensor::from_vec(v, shape),
    }
}

/// Batch statistics of `xs` (`[n, c, s]`): the mean and the sum of squared deviations per
/// channel, in f64 in index order (one serial chain per channel; see [`batch_norm_kernel`]).
fn stats_of<T: BnElem>(xs: &[T], n: usize, c: usize, s: usize, par: &Par) -> (Vec<f64>, Vec<f64>) {
    let m = (n * s) as f64;
    let sums = batch_norm_kernel::channel_sums::<T, { batch_norm_kernel::SUM_X }>(
        xs,
        &[],
        &[],
        &[],
        (n, c, s),
        par,
    );
    let mean: Vec<f64> = sums.iter().map(|&[a, _]| a / m).collect();
    let var_sum = batch_norm_kernel::channel_sums::<T, { batch_norm_kernel::SUM_SQDEV }>(
        xs,
        &[],
        &mean,
        &[],
        (n, c, s),
        par,
    );
    (mean, var_sum.into_iter().map(|[v, _]| v).collect())
}

impl BatchNorm {
    fn wc(&self, ch: usize) -> f64 {
        self.w.as_ref().map_or(1.0, |w| w[ch])
    }

    /// `y = x̂·w + b` with `x̂ = (x − mean)·invstd`, in f64, rounded once to `T`.
    fn forward_t<T: BnElem>(&self, b: Option<&[f64]>, par: &Par) -> Result<Tensor> {
        let xt = &self.x;
        let xs = xt.data::<T>()?;
        let consts: Vec<ChannelConst> = (0..self.c)
            .map(|ch| ChannelConst {
                mean: self.mean[ch],
                invstd: self.invstd[ch],
                scale: self.wc(ch),
                a: b.map_or(0.0, |b| b[ch]),
                b: 0.0,
                m: 0.0,
            })
            .collect();
        let y = batch_norm_kernel::elementwise(
            Pass::Forward,
            &consts,
            xs,
            &[],
            (self.n, self.c, self.s),
            par,
        );
        Tensor::from_vec(y, xt.shape())
    }

    /// The input's gradient and the per-channel sums `Σ g` and `Σ g·x̂` (the bias's and the
    /// weight's gradients), in f64 in index order.
    fn backward_t<T: BnElem>(&self, g: &Tensor, par: &Par) -> Result<(Tensor, Vec<f64>, Vec<f64>)> {
        let (xt, batch_stats) = (&self.x, self.batch_stats);
        let (n, c, s) = (self.n, self.c, self.s);
        let m = (n * s) as f64;
        let xs = xt.data::<T>()?;
        let g = g.try_contiguous()?;
        let gs = g.data::<T>()?;
        // Σ g and Σ g·x̂ in one pass (two chains per channel).
        let sums = batch_norm_kernel::channel_sums::<T, { batch_norm_kernel::SUM_GRAD }>(
            xs,
            gs,
            &self.mean,
            &self.invstd,
            (n, c, s),
            par,
        );
        let sg: Vec<f64> = sums.iter().map(|v| v[0]).collect();
        let sgx: Vec<f64> = sums.iter().map(|v| v[1]).collect();
        let consts: Vec<ChannelConst> = (0..c)
            .map(|ch| {
                let (is, wc) = (self.invstd[ch], self.wc(ch));
                ChannelConst {
                    mean: self.mean[ch],
                    invstd: is,
                    // wc·is/m · (m·g − Σg − x̂·Σgx̂), the factors per channel hoisted.
                    scale: if batch_stats { wc * is / m } else { wc },
                    a: sg[ch],
                    b: sgx[ch],
                    m,
                }
            })
            .collect();
        let pass = if batch_stats {
            Pass::BackwardBatch
        } else {
            Pass::BackwardRunning
        };
        let gx = batch_norm_kernel::elementwise(pass, &consts, xs, gs, (n, c, s), par);
        Ok((Tensor::from_vec(gx, xt.shape())?, sg, sgx))
    }
}
