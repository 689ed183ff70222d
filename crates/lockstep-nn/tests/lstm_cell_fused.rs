//! `LSTMCell`'s fused pointwise step (`Tensor::lstm_cell` and its backward) against the
//! unfused composition it replaced (`linear`s, `add`, `chunk`, `sigmoid`, `tanh`, `mul`,
//! `add`), over a few steps of two stacked cells as in `time_sequence_prediction`: outputs,
//! every parameter's gradient and the input's and first hidden state's gradients bit for bit
//! (the first cell state's gradient equal as numbers: only the sign of a zero may differ), in
//! f32 and f64, small and large enough to split rows among threads, on every instruction set
//! this CPU runs and at 1, 2, 3 and 8 threads.

mod common;

use lockstep_nn::cells::LSTMCell;
use lockstep_nn::{Module, Var};
use lockstep_rng::Generator;
use lockstep_tensor::isa::{Isa, set_isa};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Result, Tensor};

/// The cell as it was written op by op (PyTorch's CPU `LSTMCell`).
fn unfused(cell: &LSTMCell, x: &Var, h: &Var, c: &Var) -> Result<(Var, Var)> {
    let gi = x.linear(cell.weight_ih(), cell.bias_ih())?;
    let gh = h.linear(cell.weight_hh(), cell.bias_hh())?;
    let gates = gh.add(&gi)?.chunk(4, 1)?;
    let i = gates[0].sigmoid()?;
    let f = gates[1].sigmoid()?;
    let g = gates[2].tanh()?;
    let o = gates[3].sigmoid()?;
    let cy = f.mul(c)?.add(&i.mul(&g)?)?;
    let hy = o.mul(&cy.tanh()?)?;
    Ok((hy, cy))
}

struct Run {
    out: Tensor,
    grads: Vec<Tensor>,
    c0_grad: Tensor,
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_dtype(DType::F64)
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).to_vec::<f64>().unwrap()
}

fn randn(shape: &[usize], seed: u64, dtype: DType) -> Tensor {
    Tensor::randn(shape, DType::F32, Some(&mut Generator::with_seed(seed)))
        .unwrap()
        .to_dtype(dtype)
}

/// `steps` steps of two stacked cells from random states, the outputs concatenated and
/// reduced by fixed weights, then backward.
fn run(fused: bool, dtype: DType, (b, input, hidden, steps): (usize, usize, usize, usize)) -> Run {
    let g = &mut Generator::with_seed(7);
    let (l1, l2) = (
        LSTMCell::with_generator(g, input, hidden, true).unwrap(),
        LSTMCell::with_generator(g, hidden, hidden, true).unwrap(),
    );
    l1.to_dtype(dtype).unwrap();
    l2.to_dtype(dtype).unwrap();
    let x = Var::new(randn(&[steps, b, input], 1, dtype), true);
    let h0 = Var::new(randn(&[b, hidden], 2, dtype), true);
    let c0 = Var::new(randn(&[b, hidden], 3, dtype), true);
    let (mut h, mut c) = (h0.clone(), c0.clone());
    let (mut h2, mut c2) = (h0.clone(), c0.clone());
    let mut outs = Vec::new();
    for t in 0..steps {
        let xt = x.select(0, t).unwrap();
        let step = |cell: &LSTMCell, x: &Var, h: &Var, c: &Var| {
            if fused {
                cell.forward_with_state(x, Some((h, c))).unwrap()
            } else {
                unfused(cell, x, h, c).unwrap()
            }
        };
        (h, c) = step(&l1, &xt, &h, &c);
        (h2, c2) = step(&l2, &h, &h2, &c2);
        outs.push(h2.clone());
    }
    outs.push(c2);
    let out = Var::cat(&outs, 1).unwrap();
    let w = randn(out.shape(), 4, dtype);
    out.mul(&Var::constant(w))
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    let mut grads: Vec<Tensor> = l1
        .parameters()
        .iter()
        .chain(&l2.parameters())
        .map(|p| p.grad().unwrap())
        .collect();
    grads.extend([x.grad().unwrap(), h0.grad().unwrap()]);
    Run {
        out: out.data(),
        grads,
        c0_grad: c0.grad().unwrap(),
    }
}

#[test]
fn fused_cell_gives_the_bits_of_the_unfused_ops() {
    let _turn = common::isa_turn();
    // (B, input, hidden, steps): the example's shape and one of 300 × 4·64 gate elements, both
    // above the serial limit (rows split among threads), and a small odd one below it.
    for dims in [(97, 1, 51, 4), (3, 2, 5, 3), (300, 8, 64, 2)] {
        for dtype in [DType::F32, DType::F64] {
            let want = run(false, dtype, dims);
            for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
                set_isa(Some(isa)).unwrap();
                for threads in [1, 2, 3, 8] {
                    let got = with_num_threads(threads, || run(true, dtype, dims));
                    let at = format!("{dims:?} {dtype:?} {isa:?} {threads} threads");
                    assert!(bits(&got.out) == bits(&want.out), "output, {at}");
                    for (k, (g, w)) in got.grads.iter().zip(&want.grads).enumerate() {
                        assert!(bits(g) == bits(w), "gradient {k}, {at}");
                    }
                    assert!(values(&got.c0_grad) == values(&want.c0_grad), "c0, {at}");
                }
            }
            set_isa(None).unwrap();
        }
    }
}

#[test]
fn fused_cell_op_refuses_bad_shapes_and_dtypes() {
    let _turn = common::isa_turn();
    let t = |s: &[usize]| Tensor::zeros(s, DType::F32).unwrap();
    let e = Tensor::lstm_cell(&t(&[2, 8]), &t(&[2, 8]), &t(&[2, 3]), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell") && e.contains("[2, 3]"), "{e}");
    let e = Tensor::lstm_cell(&t(&[2, 8]), &t(&[3, 8]), &t(&[2, 2]), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell"), "{e}");
    let (b8, b7) = (t(&[8]), t(&[7]));
    let e = Tensor::lstm_cell(&t(&[2, 8]), &t(&[2, 8]), &t(&[2, 2]), Some((&b7, &b8)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell") && e.contains("b_hh"), "{e}");
    let b8d = Tensor::zeros(&[8], DType::F64).unwrap();
    let e = Tensor::lstm_cell(&t(&[2, 8]), &t(&[2, 8]), &t(&[2, 2]), Some((&b8, &b8d)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell"), "{e}");
    let d = Tensor::zeros(&[2, 2], DType::F64).unwrap();
    let e = Tensor::lstm_cell(&t(&[2, 8]), &t(&[2, 8]), &d, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell"), "{e}");
    let e = Tensor::lstm_cell_backward(Some(&t(&[2, 2])), None, &t(&[2, 9]), &t(&[2, 2]), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lstm_cell_backward") && e.contains("saved"),
        "{e}"
    );
    let e = Tensor::lstm_cell_backward(None, Some(&t(&[2, 3])), &t(&[2, 10]), &t(&[2, 2]), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lstm_cell_backward") && e.contains("grad_c"),
        "{e}"
    );
    let e = Tensor::lstm_cell_backward(None, None, &t(&[2, 10]), &t(&[2, 2]), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell_backward"), "{e}");
    let i = Tensor::zeros(&[2, 8], DType::I64).unwrap();
    let e = Tensor::lstm_cell(&i, &i, &Tensor::zeros(&[2, 2], DType::I64).unwrap(), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstm_cell"), "{e}");
}
