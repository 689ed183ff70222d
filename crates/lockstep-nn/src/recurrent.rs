//! The fused recurrent layers as differentiable ops: each direction of an LSTM, GRU or RNN
//! layer is one node of the graph, running the kernels of `lockstep_tensor::ops::recurrent`
//! (`lstm_layer`, `gru_layer`, `rnn_layer`, the LSTM input projection `lstm_input`) forward
//! and, in the node's backward, their backward ops. This file only wires values and gradients
//! to the graph; the arithmetic and its bits are the kernels'.

use crate::autograd::Var;
use crate::batch_blocks::{self, BatchBlocks};
use lockstep_tensor::ops::recurrent::{self as kernels, BatchBlockSum, LstmLayer, RecurrentLayer};
use lockstep_tensor::{Result, Tensor};

pub(crate) use kernels::CellKind;

/// One direction of a GRU or RNN layer: `(outputs [T, B, H] in time order, the last step's
/// hidden state [B, H])`.
///
/// # Errors
/// As [`RecurrentLayer::forward`].
pub(crate) fn layer(
    cell: CellKind,
    xw: &Var,
    w_hh: &Var,
    b_hh: Option<&Var>,
    h0: &Var,
    order: &[usize],
) -> Result<(Var, Var)> {
    let (value, run) = RecurrentLayer::forward(
        cell,
        &xw.data(),
        &w_hh.data(),
        b_hh.map(|b| b.data()).as_ref(),
        &h0.data(),
        order,
    )?;
    let inputs: Vec<&Var> = [Some(xw), Some(w_hh), b_hh, Some(h0)]
        .into_iter()
        .flatten()
        .collect();
    let need_h0 = h0.requires_grad();
    let name = if cell == CellKind::Gru {
        "gru_layer"
    } else {
        "rnn_layer"
    };
    let last = *order.last().expect("checked non-empty by the kernel");
    let y = Var::from_op(name, value, &inputs, move |gy| run.backward(gy, need_h0));
    let h_last = y.select(0, last)?;
    Ok((y, h_last))
}

/// `x.linear(w, b)` for `x` `[T, B, k]` (an LSTM layer's input projection): the same value and
/// gradients, through the fused kernels where they apply.
///
/// # Errors
/// As [`Var::linear`].
pub(crate) fn project(x: &Var, w: &Var, b: Option<&Var>) -> Result<Var> {
    if let Some(blocks) = batch_blocks_of(x) {
        return project_blocks(x, w, b, blocks);
    }
    let (xt, wt) = (x.data(), w.data());
    let bt = b.map(|b| b.data());
    if !kernels::lstm_input_fits(&xt, &wt, bt.as_ref()) {
        return x.linear(w, b);
    }
    // `None`: `lstm_input.linear` was chosen, and `Var::linear` does the work (and the tracing).
    let Some(value) = kernels::lstm_input(&xt, &wt, bt.as_ref())? else {
        return x.linear(w, b);
    };
    let (rx, rw) = (x.requires_grad(), w.requires_grad());
    let rb = b.is_some_and(|b| b.requires_grad());
    let mut inputs = vec![x, w];
    inputs.extend(b);
    let has_bias = b.is_some();
    Ok(Var::from_op("lstm_input", value, &inputs, move |gy| {
        kernels::lstm_input_backward(gy, &xt, &wt, rx, rw, has_bias, rb)
    }))
}

/// The batch blocks in force for a time-major `[T, B, …]` value whose `B` is their batch.
fn batch_blocks_of(x: &Var) -> Option<BatchBlocks> {
    x.shape()
        .get(1)
        .filter(|_| x.ndim() == 3)
        .and_then(|&b| batch_blocks::for_batch(b))
}

/// The blocks' ranges and the fixed tree, as the kernels take them.
fn block_sum(blocks: BatchBlocks) -> BatchBlockSum<'static> {
    BatchBlockSum {
        ranges: blocks.ranges().collect(),
        sum: &batch_blocks::tree_sum,
    }
}

/// [`project`] inside [`with_batch_blocks`](crate::batch_blocks::with_batch_blocks) (the
/// batch is `x`'s dimension 1): the same value; `x`'s gradient over the whole batch,
/// `W_ih`'s and `b_ih`'s as the sum of each block's own gradient, as the block's samples run
/// alone would compute it ([`kernels::lstm_input_backward_blocks`], or `linear`'s backward on
/// the block's rows where the fused kernels do not apply), added in the fixed tree.
fn project_blocks(x: &Var, w: &Var, b: Option<&Var>, blocks: BatchBlocks) -> Result<Var> {
    let (xt, wt) = (x.data(), w.data());
    let bt = b.map(|b| b.data());
    let fused = if kernels::lstm_input_fits(&xt, &wt, bt.as_ref()) {
        kernels::lstm_input(&xt, &wt, bt.as_ref())?
    } else {
        None
    };
    let fused_ran = fused.is_some();
    let value = match fused {
        Some(v) => v,
        // `linear`'s value, checks and bits (its node is dropped: the op below is the graph's).
        None => x.linear(w, b)?.data(),
    };
    let (rx, rw) = (x.requires_grad(), w.requires_grad());
    let rb = b.is_some_and(|b| b.requires_grad());
    let mut inputs = vec![x, w];
    inputs.extend(b);
    let has_bias = b.is_some();
    let name = if fused_ran { "lstm_input" } else { "linear" };
    Ok(Var::from_op(name, value, &inputs, move |gy| {
        let sum = block_sum(blocks);
        if fused_ran {
            return kernels::lstm_input_backward_blocks(gy, &xt, &wt, rx, rw, has_bias, rb, &sum);
        }
        // `Var::linear`'s backward on each block's rows `[T, n, k]`.
        let (o, i) = (wt.shape()[0] as isize, wt.shape()[1] as isize);
        let gx = rx.then(|| gy.matmul(&wt)).transpose()?;
        let rows = |t: &Tensor, s: usize, n: usize| t.narrow(1, s, n)?.try_contiguous();
        let gw = rw
            .then(|| {
                sum.sum_blocks(|s, n| {
                    let g2 = rows(gy, s, n)?.reshape(&[-1, o])?;
                    let x2 = rows(&xt, s, n)?.reshape(&[-1, i])?;
                    g2.transpose(0, 1)?.matmul(&x2)
                })
            })
            .transpose()?;
        let mut out = vec![gx, gw];
        if has_bias {
            out.push(
                rb.then(|| {
                    sum.sum_blocks(|s, n| rows(gy, s, n)?.reshape(&[-1, o])?.sum_dim(0, false))
                })
                .transpose()?,
            );
        }
        Ok(out)
    }))
}

/// One direction of an LSTM layer as one differentiable op ([`LstmLayer`]): `xw` `[T, B, 4H]`
/// (the input projection with `bias_ih`), `W_hh`, `b_hh`, `h0`, `c0`; `(outputs [T, B, H],
/// h_T, c_T)`. Traced as `lstm_layer` and `lstm_layer_backward`.
///
/// # Errors
/// As [`LstmLayer::forward`].
pub(crate) fn lstm_layer(
    xw: &Var,
    w_hh: &Var,
    b_hh: Option<&Var>,
    h0: &Var,
    c0: &Var,
    order: &[usize],
) -> Result<(Var, Var, Var)> {
    let (value, run) = LstmLayer::forward(
        &xw.data(),
        &w_hh.data(),
        b_hh.map(|b| b.data()).as_ref(),
        &h0.data(),
        &c0.data(),
        order,
    )?;
    let mut inputs = vec![xw, w_hh];
    inputs.extend(b_hh);
    inputs.extend([h0, c0]);
    let (need_h0, need_c0) = (h0.requires_grad(), c0.requires_grad());
    let steps = order.len();
    let last = *order.last().expect("checked non-empty by the kernel");
    // Inside `with_batch_blocks` (the batch is `xw`'s dimension 1): W_hh's and b_hh's
    // gradients block by block, added in the fixed tree.
    let blocks = batch_blocks_of(xw);
    let y = Var::from_op("lstm_layer", value, &inputs, move |gy| match blocks {
        None => run.backward(gy, need_h0, need_c0),
        Some(b) => run.backward_blocks(gy, need_h0, need_c0, &block_sum(b)),
    });
    let outs = y.narrow(0, 0, steps)?;
    let h_last = y.select(0, last)?;
    let c_last = y.select(0, steps)?;
    Ok((outs, h_last, c_last))
}

#[cfg(test)]
mod tests {
    use super::{CellKind, layer};
    use crate::autograd::Var;
    use lockstep_rng::Generator;
    use lockstep_tensor::{DType, Tensor};

    const KINDS: [CellKind; 3] = [CellKind::Gru, CellKind::Tanh, CellKind::Relu];

    /// The layer written with the differentiable ops, as `Rnn` wrote it before this op.
    fn op_by_op(kind: CellKind, v: &[Var], order: &[usize]) -> (Var, Var) {
        let (xw, w, b, mut h) = (&v[0], &v[1], &v[2], v[3].clone());
        let mut outs = vec![None; order.len()];
        for &s in order {
            let xs = xw.select(0, s).unwrap();
            let hw = h.linear(w, Some(b)).unwrap();
            h = match kind {
                CellKind::Tanh => xs.add(&hw).unwrap().tanh().unwrap(),
                CellKind::Relu => xs.add(&hw).unwrap().relu().unwrap(),
                CellKind::Gru => {
                    let (xg, hg) = (xs.chunk(3, 1).unwrap(), hw.chunk(3, 1).unwrap());
                    let r = xg[0].add(&hg[0]).unwrap().sigmoid().unwrap();
                    let z = xg[1].add(&hg[1]).unwrap().sigmoid().unwrap();
                    let n = xg[2].add(&r.mul(&hg[2]).unwrap()).unwrap().tanh().unwrap();
                    n.add(&z.mul(&h.sub(&n).unwrap()).unwrap()).unwrap()
                }
            };
            outs[s] = Some(h.clone());
        }
        let outs: Vec<Var> = outs.into_iter().map(Option::unwrap).collect();
        (Var::stack(&outs, 0).unwrap(), h)
    }

    /// xw, W_hh, b_hh, h0 and the loss weightings of y and h_last; gates from unsaturated to
    /// saturated, pre-activations of both signs (relu).
    fn inputs(kind: CellKind, dtype: DType, seed: u64) -> Vec<Tensor> {
        let mut g = Generator::with_seed(seed);
        let (t, b, hd, gh) = (4, 3, 5, kind.gates() * 5);
        let mut r = |shape: &[usize], scale: f64| {
            Tensor::randn(shape, DType::F64, Some(&mut g))
                .unwrap()
                .mul_scalar(scale)
                .unwrap()
                .to_dtype(dtype)
        };
        vec![
            r(&[t, b, gh], 2.0),
            r(&[gh, hd], 0.6),
            r(&[gh], 0.5),
            r(&[b, hd], 1.0),
            r(&[t, b, hd], 1.0),
            r(&[b, hd], 1.0),
        ]
    }

    /// Values and gradients (xw, W_hh, b_hh, h0), as f64.
    fn run(kind: CellKind, fused: bool, t: &[Tensor], order: &[usize]) -> Vec<Vec<f64>> {
        let v: Vec<Var> = t[..4].iter().map(|t| Var::new(t.clone(), true)).collect();
        let (y, h) = if fused {
            layer(kind, &v[0], &v[1], Some(&v[2]), &v[3], order).unwrap()
        } else {
            op_by_op(kind, &v, order)
        };
        let weigh = |x: &Var, w: &Tensor| x.mul(&Var::constant(w.clone())).unwrap().sum().unwrap();
        weigh(&y, &t[4])
            .add(&weigh(&h, &t[5]))
            .unwrap()
            .backward()
            .unwrap();
        let f = |t: Tensor| t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
        let mut out = vec![f(y.data()), f(h.data())];
        out.extend(v.iter().map(|v| f(v.grad().unwrap())));
        out
    }

    fn close(got: &[Vec<f64>], want: &[Vec<f64>], rel: f64) {
        for (k, (g, w)) in got.iter().zip(want).enumerate() {
            let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                assert!((a - b).abs() <= rel * scale, "output {k}[{i}]: {a} vs {b}");
            }
        }
    }

    const ORDERS: [&[usize]; 2] = [&[0, 1, 2, 3], &[3, 2, 1, 0]];

    #[test]
    fn f64_values_are_the_op_by_op_graphs_bit_for_bit_and_gradients_agree() {
        for kind in KINDS {
            for seed in 0..3 {
                for order in ORDERS {
                    let t = inputs(kind, DType::F64, seed);
                    let (fused, ops) = (run(kind, true, &t, order), run(kind, false, &t, order));
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    let at = format!("{kind:?} seed {seed} {order:?}");
                    assert_eq!(bits(&fused[0]), bits(&ops[0]), "{at}");
                    assert_eq!(bits(&fused[1]), bits(&ops[1]), "{at}");
                    close(&fused[2..], &ops[2..], 1e-13);
                }
            }
        }
    }

    #[test]
    fn f32_within_rounding_of_the_op_by_op_graph() {
        for kind in KINDS {
            for seed in 0..3 {
                for order in ORDERS {
                    let t = inputs(kind, DType::F32, seed);
                    let (fused, ops) = (run(kind, true, &t, order), run(kind, false, &t, order));
                    close(&fused, &ops, 3e-6);
                    if kind == CellKind::Relu {
                        // No transcendental function: the values are the graph's bits.
                        let bits = |v: &[Vec<f64>]| -> Vec<u64> {
                            v.iter().flatten().map(|x| x.to_bits()).collect()
                        };
                        assert_eq!(bits(&fused[..2]), bits(&ops[..2]), "relu {seed} {order:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_shapes_order_and_dtypes_are_errors() {
        let (f, d, i) = (DType::F32, DType::F64, DType::I64);
        // xw [2, 3, 6], W_hh [6, 2], h0 [3, 2] fit a GRU with H = 2 over 2 steps.
        let call =
            |kind, dtypes: [DType; 3], h0: &[usize], bias: Option<&[usize]>, order: &[usize]| {
                let v =
                    |shape: &[usize], dtype| Var::new(Tensor::zeros(shape, dtype).unwrap(), true);
                let b = bias.map(|s| v(s, dtypes[1]));
                layer(
                    kind,
                    &v(&[2, 3, 6], dtypes[0]),
                    &v(&[6, 2], dtypes[1]),
                    b.as_ref(),
                    &v(h0, dtypes[2]),
                    order,
                )
                .map(drop)
                .map_err(|e| e.to_string())
            };
        let gru = CellKind::Gru;
        assert_eq!(call(gru, [f; 3], &[3, 2], Some(&[6]), &[0, 1]), Ok(()));
        let e = call(gru, [f; 3], &[3, 3], None, &[0, 1]).unwrap_err();
        assert!(
            e.contains("gru_layer") && e.contains("[2, 3, 6]") && e.contains("[3, 3]"),
            "{e}"
        );
        // An RNN's xw is [T, B, H].
        let e = call(CellKind::Tanh, [f; 3], &[3, 2], None, &[0, 1]).unwrap_err();
        assert!(e.contains("rnn_layer"), "{e}");
        for order in [&[0][..], &[0, 2], &[]] {
            assert!(
                call(gru, [f; 3], &[3, 2], None, order).is_err(),
                "{order:?}"
            );
        }
        assert!(call(gru, [f; 3], &[3, 2], Some(&[5]), &[0, 1]).is_err());
        let e = call(gru, [f, d, f], &[3, 2], None, &[0, 1]).unwrap_err();
        assert!(e.contains("gru_layer"), "{e}");
        assert!(call(gru, [i; 3], &[3, 2], None, &[0, 1]).is_err());
        // An empty batch: empty results, no panic.
        let v = |shape: &[usize]| Var::new(Tensor::zeros(shape, f).unwrap(), true);
        for kind in KINDS {
            let g = kind.gates() * 2;
            let (y, h) = layer(
                kind,
                &v(&[2, 0, g]),
                &v(&[g, 2]),
                None,
                &v(&[0, 2]),
                &[0, 1],
            )
            .unwrap();
            assert_eq!((y.shape(), h.shape()), (&[2, 0, 2][..], &[0, 2][..]));
            y.sum().unwrap().backward().unwrap();
        }
    }
}
