//! A traced training step of a small MLP and a small CNN: every part of the step shows up in
//! the trace — the bias adds of `linear`, pooling forward and backward, the activations and
//! their gradients, and `clip_grad_norm_` (its total norm and the scaled gradients).

use lockstep_nn::layers::{Conv2d, Flatten, Linear, Pool, ReLU, Sequential};
use lockstep_nn::module::{Forward, Module};
use lockstep_nn::optim::clip_grad_norm_;
use lockstep_nn::{Var, functional as F};
use lockstep_rng::Generator;
use lockstep_tensor::{DType, Tensor, trace};

/// The tests draw their weights from the default generator: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn seed0() {
    lockstep_rng::default_generator().manual_seed(0);
}

fn step(model: &Sequential, x: &Tensor, y: &Tensor) -> Vec<trace::Record> {
    let ((), recs) = trace::capture(|| {
        let loss = F::cross_entropy(&model.forward(&Var::constant(x.clone())).unwrap(), y).unwrap();
        loss.backward().unwrap();
        clip_grad_norm_(&model.parameters(), 0.5, 2.0).unwrap();
    });
    recs
}

fn ops(recs: &[trace::Record]) -> Vec<(&str, Option<&str>)> {
    recs.iter()
        .map(|r| (r.op.as_str(), r.backward.as_deref()))
        .collect()
}

fn has(recs: &[trace::Record], op: &str, backward: bool) -> bool {
    recs.iter()
        .any(|r| r.op == op && r.backward.is_some() == backward)
}

#[test]
fn mlp_step_traces_bias_add_activations_and_clipping() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    seed0();
    let model = Sequential::new()
        .add(Linear::new(8, 16, true).unwrap())
        .add(ReLU::default())
        .add(Linear::new(16, 4, true).unwrap());
    let mut g = Generator::with_seed(1);
    let x = Tensor::randn(&[5, 8], DType::F32, Some(&mut g)).unwrap();
    let y = Tensor::from_vec(vec![0i64, 3, 1, 2, 3], &[5]).unwrap();
    let recs = step(&model, &x, &y);
    let o = ops(&recs);
    // Two linear layers: a product then the bias added in place, twice.
    assert_eq!(
        recs.iter()
            .filter(|r| r.op == "add_" && r.backward.is_none())
            .count(),
        2,
        "{o:?}"
    );
    let bias = recs.iter().find(|r| r.op == "add_").unwrap();
    assert_eq!(bias.algo, "add_.chunked");
    assert_eq!(bias.inputs, vec![vec![5, 16], vec![16]]);
    assert!(
        has(&recs, "relu", false) && has(&recs, "relu_backward", true),
        "{o:?}"
    );
    // The bias gradients: a sum over the batch, through dispatch.
    assert!(has(&recs, "sum_dim", true), "{o:?}");
    // clip_grad_norm_: the total norm of the 4 gradients, then each gradient scaled.
    let total = recs
        .iter()
        .find(|r| r.op == "get_total_norm")
        .expect("total norm");
    assert_eq!(total.inputs.len(), 4);
    assert_eq!(total.algo, "get_total_norm.torch_cpu_order");
    assert_eq!(
        recs.iter()
            .filter(|r| r.op == "clip_grads_with_norm_")
            .count(),
        4
    );
    // Calls are numbered in order.
    assert!(recs.iter().enumerate().all(|(i, r)| r.call == i as u64));
}

#[test]
fn cnn_step_traces_pooling_forward_and_backward() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    seed0();
    let model = Sequential::new()
        .add(Conv2d::new(1, 4, 3, 1).unwrap())
        .add(ReLU::default())
        .add(Pool::max2d(2))
        .add(Pool::avg2d(2))
        .add(Pool::adaptive_avg2d(1, 1))
        .add(Flatten::default())
        .add(Linear::new(4, 3, true).unwrap());
    let mut g = Generator::with_seed(2);
    let x = Tensor::randn(&[2, 1, 8, 8], DType::F32, Some(&mut g)).unwrap();
    let y = Tensor::from_vec(vec![0i64, 2], &[2]).unwrap();
    let recs = step(&model, &x, &y);
    let o = ops(&recs);
    for (op, bw) in [
        ("conv2d", false),
        ("max_pool2d", false),
        ("avg_pool2d", false),
        ("adaptive_avg_pool2d", false),
        ("add_", false),
        ("adaptive_avg_pool2d_backward", true),
        ("avg_pool2d_backward", true),
        ("max_pool2d_backward", true),
        ("relu_backward", true),
        ("get_total_norm", false),
        ("clip_grads_with_norm_", false),
    ] {
        assert!(has(&recs, op, bw), "no {op} (backward: {bw}) in {o:?}");
    }
    let mp = recs.iter().find(|r| r.op == "max_pool2d").unwrap();
    assert_eq!(
        (mp.algo.as_str(), mp.inputs.clone(), mp.output.clone()),
        (
            "max_pool2d.per_plane",
            vec![vec![2, 4, 8, 8]],
            vec![2, 4, 4, 4]
        )
    );
    // The same step again from the same state traces the same hashes.
    seed0();
    let again = Sequential::new()
        .add(Conv2d::new(1, 4, 3, 1).unwrap())
        .add(ReLU::default())
        .add(Pool::max2d(2))
        .add(Pool::avg2d(2))
        .add(Pool::adaptive_avg2d(1, 1))
        .add(Flatten::default())
        .add(Linear::new(4, 3, true).unwrap());
    let r2 = step(&again, &x, &y);
    assert_eq!(recs, r2);
}
