//! `nn.GRU` and `nn.RNN`, each layer direction one fused op (`gru_layer`, `rnn_layer`): a whole
//! layer stack's outputs and every gradient have the same bits at 1, 2, 3 and 8 threads (f32
//! and f64, tanh and relu), and the layers are traced, forward and backward.

use lockstep_nn::rnn::{Rnn, RnnConfig, RnnOutput};
use lockstep_nn::{Module, Var};
use lockstep_rng::Generator;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

fn randn(shape: &[usize], scale: f64, dtype: DType, g: &mut Generator) -> Tensor {
    Tensor::randn(shape, DType::F64, Some(g))
        .unwrap()
        .mul_scalar(scale)
        .unwrap()
        .to_dtype(dtype)
}

/// Bits of the output, `h_n` and every gradient (parameters, input, `h0`) of one
/// forward/backward of a 2-layer bidirectional batch-first GRU (or RNN with `nonlinearity`)
/// with a random loss weighting.
fn run(kind: &str, dtype: DType) -> Vec<Vec<u64>> {
    let cfg = RnnConfig {
        num_layers: 2,
        bidirectional: true,
        batch_first: true,
        ..RnnConfig::new(5, 24)
    };
    let gru = if kind == "gru" {
        Rnn::gru(cfg)
    } else {
        Rnn::rnn(RnnConfig {
            nonlinearity: kind.into(),
            ..cfg
        })
    }
    .unwrap();
    gru.to_dtype(dtype).unwrap();
    let mut g = Generator::with_seed(11);
    for p in gru.parameters() {
        p.set_data(randn(p.shape(), 0.4, dtype, &mut g)).unwrap();
    }
    let x = Var::new(randn(&[9, 6, 5], 1.5, dtype, &mut g), true);
    let h0 = Var::new(randn(&[4, 9, 24], 0.5, dtype, &mut g), true);
    let RnnOutput { output, h_n, .. } = gru.forward_with_state(&x, Some(&h0), None).unwrap();
    let weigh = |v: &Var, g: &mut Generator| {
        v.mul(&Var::constant(randn(v.shape(), 1.0, dtype, g)))
            .unwrap()
            .sum()
            .unwrap()
    };
    let loss = weigh(&output, &mut g).add(&weigh(&h_n, &mut g)).unwrap();
    loss.backward().unwrap();
    let bits = |t: Tensor| -> Vec<u64> {
        let v = t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    };
    let mut out = vec![bits(output.data()), bits(h_n.data())];
    out.extend(gru.parameters().iter().map(|p| bits(p.grad().unwrap())));
    out.push(bits(x.grad().unwrap()));
    out.push(bits(h0.grad().unwrap()));
    out
}

#[test]
fn same_bits_at_any_thread_count() {
    for kind in ["gru", "tanh", "relu"] {
        for dtype in [DType::F32, DType::F64] {
            let want = with_num_threads(1, || run(kind, dtype));
            for threads in [2, 3, 8] {
                let got = with_num_threads(threads, || run(kind, dtype));
                assert!(
                    got == want,
                    "{kind} {dtype:?}: {threads} threads differ from 1"
                );
            }
        }
    }
}

#[test]
fn the_layer_is_traced_forward_and_backward() {
    let gru = Rnn::gru(RnnConfig::new(3, 4)).unwrap();
    let x = Var::new(Tensor::ones(&[6, 2, 3], DType::F32).unwrap(), true);
    let (_, recs) = lockstep_tensor::trace::capture(|| {
        let out = gru.forward_with_state(&x, None, None).unwrap().output;
        out.sum().unwrap().backward().unwrap();
    });
    let fwd: Vec<_> = recs.iter().filter(|r| r.op == "gru_layer").collect();
    assert_eq!(fwd.len(), 1, "one record per layer direction");
    assert_eq!(fwd[0].algo, "gru_layer.gemm");
    // xw [T, B, 3H], W_hh, b_hh, h0 -> the outputs [T, B, H].
    assert_eq!(
        fwd[0].inputs,
        vec![vec![6, 2, 12], vec![12, 4], vec![12], vec![2, 4]]
    );
    assert_eq!(fwd[0].output, [6, 2, 4]);
    // xw's, W_hh's and b_hh's gradients (h0 is a constant zero state).
    let bwd: Vec<_> = recs
        .iter()
        .filter(|r| r.op == "gru_layer_backward")
        .map(|r| r.output.clone())
        .collect();
    assert_eq!(bwd, vec![vec![6, 2, 12], vec![12, 4], vec![12]]);
    assert!(
        lockstep_tensor::dispatch::builtin_ops()
            .iter()
            .any(|o| o.name == "gru_layer_backward")
    );
    // An RNN: rnn_layer, xw [T, B, H].
    let rnn = Rnn::rnn(RnnConfig::new(3, 4)).unwrap();
    let (_, recs) = lockstep_tensor::trace::capture(|| {
        let out = rnn.forward_with_state(&x, None, None).unwrap().output;
        out.sum().unwrap().backward().unwrap();
    });
    let fwd: Vec<_> = recs.iter().filter(|r| r.op == "rnn_layer").collect();
    assert_eq!(fwd.len(), 1);
    assert_eq!(
        (fwd[0].algo.as_str(), fwd[0].inputs[0].clone()),
        ("rnn_layer.gemm", vec![6, 2, 4])
    );
    let bwd = recs.iter().filter(|r| r.op == "rnn_layer_backward").count();
    assert_eq!(bwd, 3);
}
