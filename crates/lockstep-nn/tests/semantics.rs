//! PyTorch's autograd semantics a port relies on (issue 26): backward frees the graph, in-place
//! writes reach the tensor they name, and a value saved for backward cannot change unseen.

use lockstep_nn::{BackwardOptions, Var, no_grad};
use lockstep_tensor::Tensor;

fn t(v: &[f64]) -> Tensor {
    Tensor::from_slice(v, &[v.len()]).unwrap()
}

fn grad(v: &Var) -> Vec<f64> {
    v.grad().unwrap().to_vec::<f64>().unwrap()
}

const FREED: &str = "Trying to backward through the graph a second time";

#[test]
fn second_backward_through_the_same_loss_is_an_error_naming_the_op() {
    let x = Var::new(t(&[1.0, 2.0]), true);
    let loss = x.mul(&x).unwrap().sum().unwrap();
    loss.backward().unwrap();
    assert_eq!(grad(&x), [2.0, 4.0]);
    let e = loss.backward().unwrap_err().to_string();
    assert!(e.contains(FREED) && e.contains("sum"), "{e}");
    assert_eq!(grad(&x), [2.0, 4.0], "the failed pass adds nothing");
}

#[test]
fn retain_graph_keeps_it_for_one_more_pass() {
    let x = Var::new(t(&[1.0, 2.0]), true);
    let loss = x.mul(&x).unwrap().sum().unwrap();
    let keep = BackwardOptions {
        gradient: None,
        retain_graph: true,
    };
    loss.backward_options(&keep).unwrap();
    loss.backward_options(&keep).unwrap();
    loss.backward().unwrap();
    assert_eq!(grad(&x), [6.0, 12.0]);
    assert!(loss.backward().unwrap_err().to_string().contains(FREED));
}

#[test]
fn a_new_loss_reaching_a_freed_graph_through_a_hidden_state_is_an_error() {
    // A recurrent loop that forgets to detach its hidden state between batches.
    let w = Var::new(t(&[0.5, -0.25]), true);
    let mut h = Var::constant(t(&[1.0, 1.0]));
    h = h.mul(&w).unwrap().tanh().unwrap();
    h.sum().unwrap().backward().unwrap();
    let h2 = h.mul(&w).unwrap().tanh().unwrap();
    let e = h2.sum().unwrap().backward().unwrap_err().to_string();
    assert!(e.contains(FREED) && e.contains("tanh"), "{e}");
    // Detached, the second batch back-propagates through its own graph only.
    w.zero_grad();
    let h3 = h.detach().mul(&w).unwrap().tanh().unwrap();
    h3.sum().unwrap().backward().unwrap();
    assert!(w.grad().is_some());
}

#[test]
fn backward_with_a_gradient_frees_too() {
    let x = Var::new(t(&[1.0, 2.0]), true);
    let y = x.mul_scalar(3.0).unwrap();
    y.backward_with(&t(&[1.0, 1.0])).unwrap();
    assert_eq!(grad(&x), [3.0, 3.0]);
    let e = y.backward_with(&t(&[1.0, 1.0])).unwrap_err().to_string();
    assert!(e.contains(FREED), "{e}");
}

#[test]
fn freeing_releases_the_saved_tensors() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    // What a backward closure captures stands for the tensors an op saves.
    struct Saved(Arc<AtomicBool>);
    impl Drop for Saved {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let run = |retain: bool| {
        let dropped = Arc::new(AtomicBool::new(false));
        let saved = Saved(dropped.clone());
        let x = Var::new(t(&[1.0, 2.0]), true);
        let y = Var::from_op("keeps_saved", x.data(), &[&x], move |g| {
            let _ = &saved;
            Ok(vec![Some(g.clone())])
        });
        let loss = y.sum().unwrap();
        loss.backward_options(&BackwardOptions {
            gradient: None,
            retain_graph: retain,
        })
        .unwrap();
        // `loss` and `y` are still alive: only the backward can have dropped the closure.
        let freed = dropped.load(Ordering::SeqCst);
        drop((loss, y));
        freed
    };
    assert!(run(false), "backward frees what the op saved");
    assert!(!run(true), "retain_graph keeps it");
}

#[test]
fn writes_through_data_are_errors_not_silent_no_ops() {
    let p = Var::new(
        Tensor::zeros(&[3], lockstep_tensor::DType::F32).unwrap(),
        true,
    );
    let e = p.data().uniform_(-0.1, 0.1, None).unwrap_err().to_string();
    assert!(e.contains("uniform_") && e.contains("read-only"), "{e}");
    let mut sd = p.data();
    assert!(
        sd.add_(&Tensor::ones(&[3], sd.dtype()).unwrap(), 1.0)
            .is_err()
    );
    assert_eq!(p.data().to_vec::<f32>().unwrap(), [0.0; 3]);
    // The writable path reaches the parameter.
    no_grad(|| p.uniform_(-0.1, 0.1, None)).unwrap();
    assert!(p.data().to_vec::<f32>().unwrap().iter().all(|&x| x != 0.0));
    assert_eq!(p.version(), 1);
}

#[test]
fn in_place_write_to_a_parameter_outside_no_grad_is_an_error() {
    let p = Var::new(t(&[1.0, 2.0]), true);
    let e = p.add_(&t(&[1.0, 1.0]), -0.5).unwrap_err().to_string();
    assert!(e.contains("a leaf Variable that requires grad"), "{e}");
    no_grad(|| p.add_(&t(&[1.0, 1.0]), -0.5)).unwrap();
    assert_eq!(p.data().to_vec::<f64>().unwrap(), [0.5, 1.5]);
}

#[test]
fn a_write_to_a_value_saved_for_backward_is_an_error_at_backward() {
    let w = Var::new(t(&[1.0, 2.0]), true);
    let loss = w.mul(&w).unwrap().sum().unwrap();
    no_grad(|| w.mul_scalar_(2.0)).unwrap();
    let e = loss.backward().unwrap_err().to_string();
    assert!(
        e.contains("modified by an inplace operation") && e.contains("mul"),
        "{e}"
    );
    // Through a detached alias, which shares the value and its version.
    let x = Var::new(t(&[1.0, 2.0]), true);
    let y = x.exp().unwrap();
    let loss = y.sum().unwrap();
    let alias = x.detach();
    alias.fill_(0.0).unwrap();
    assert_eq!(
        x.data().to_vec::<f64>().unwrap(),
        [0.0, 0.0],
        "the write reaches x"
    );
    let e = loss.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
}

#[test]
fn item_of_a_loss() {
    let x = Var::new(t(&[1.5, 2.0]), true);
    assert_eq!(x.sum().unwrap().item().unwrap(), 3.5);
    assert!(x.item().unwrap_err().to_string().contains("item"));
}

#[test]
fn an_lstm_takes_both_states_or_neither_and_errors_name_hx() {
    use lockstep_nn::rnn::{Rnn, RnnConfig};
    use lockstep_tensor::DType;
    let lstm = Rnn::lstm(RnnConfig::new(3, 4)).unwrap();
    let x = Var::constant(Tensor::zeros(&[5, 2, 3], DType::F32).unwrap());
    let s = Var::constant(Tensor::zeros(&[1, 2, 4], DType::F32).unwrap());
    for (h0, c0) in [(Some(&s), None), (None, Some(&s))] {
        let e = lstm.forward_with_state(&x, h0, c0).err().unwrap();
        let m = e.to_string();
        assert!(
            m.contains("argument `hx`") && m.contains("both h0 and c0"),
            "{m}"
        );
    }
    assert!(lstm.forward_with_state(&x, Some(&s), Some(&s)).is_ok());
    let bad = Var::constant(Tensor::zeros(&[1, 3, 4], DType::F32).unwrap());
    let m = lstm
        .forward_with_state(&x, Some(&bad), Some(&s))
        .err()
        .unwrap()
        .to_string();
    assert!(m.contains("argument `hx`"), "{m}");
}
