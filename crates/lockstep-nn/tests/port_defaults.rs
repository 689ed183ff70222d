//! The short forms a port reaches for: `F::nll_loss(&logp, &target)` with PyTorch's defaults,
//! `clip_grad_l2_norm_(params, max_norm)` (PyTorch's default norm type 2), and loss errors
//! that name `target` for a target of the wrong dtype.

use lockstep_nn::functional::{self as F, NllLoss, Reduction};
use lockstep_nn::optim::{clip_grad_l2_norm_, clip_grad_norm_};
use lockstep_nn::{Error, Var};
use lockstep_tensor::{DType, Tensor};

fn logits() -> Var {
    let v: Vec<f32> = (0..12).map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.37).collect();
    Var::new(Tensor::from_vec(v, &[4, 3]).unwrap(), true)
}

fn bits(v: &Var) -> Vec<u64> {
    v.data().to_f64_vec().iter().map(|x| x.to_bits()).collect()
}

#[test]
fn nll_loss_defaults_are_pytorchs() {
    let x = logits();
    let t = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4]).unwrap();
    let logp = x.log_softmax(1).unwrap();
    let short = F::nll_loss(&logp, &t).unwrap();
    let full = F::nll_loss_with(&logp, &t, &NllLoss::default()).unwrap();
    assert_eq!(bits(&short), bits(&full));
    // Mean over the picked log-probabilities, as PyTorch's default reduction.
    let lp = logp.data().to_f64_vec();
    let picked = [lp[0], lp[5], lp[7], lp[11]];
    let want = -(picked.iter().map(|&v| v as f32).sum::<f32>()) / 4.0;
    assert!((short.item().unwrap() - f64::from(want)).abs() < 1e-6);
    // cross_entropy is nll_loss of log_softmax, bit for bit.
    assert_eq!(bits(&short), bits(&F::cross_entropy(&x, &t).unwrap()));
    // ignore_index −100 by default: that row is left out of the mean.
    let t_ign = Tensor::from_vec(vec![0i64, -100, 1, 2], &[4]).unwrap();
    let ign = F::nll_loss(&logp, &t_ign).unwrap().item().unwrap();
    let want3 = -((lp[0] as f32 + lp[7] as f32 + lp[11] as f32) / 3.0);
    assert!((ign - f64::from(want3)).abs() < 1e-6);
    let sum = F::nll_loss_with(
        &logp,
        &t,
        &NllLoss {
            reduction: Reduction::Sum,
            ..NllLoss::default()
        },
    )
    .unwrap();
    assert!((sum.item().unwrap() - 4.0 * short.item().unwrap()).abs() < 1e-5);
}

fn names_target(e: &Error) -> bool {
    matches!(e, Error::InvalidArgument { arg: "target", .. })
}

#[test]
fn a_target_of_the_wrong_dtype_is_an_error_naming_target() {
    let x = logits();
    let logp = x.log_softmax(1).unwrap();
    let t_f = Tensor::from_vec(vec![0.0f32, 2.0, 1.0, 2.0], &[4]).unwrap();
    let e = F::nll_loss(&logp, &t_f).unwrap_err();
    assert!(names_target(&e), "{e}");
    let e = F::cross_entropy(&x, &t_f).unwrap_err();
    assert!(names_target(&e), "{e}");
    let t64 = Tensor::zeros(&[4, 3], DType::F64).unwrap();
    let e = F::mse_loss(&x, &Var::constant(t64.clone()), Reduction::Mean).unwrap_err();
    assert!(names_target(&e), "{e}");
    let e = F::binary_cross_entropy_with_logits(&x, &t64, None, None, Reduction::Mean).unwrap_err();
    assert!(names_target(&e), "{e}");
    let w64 = Tensor::ones(&[4, 3], DType::F64).unwrap();
    let t32 = Tensor::zeros(&[4, 3], DType::F32).unwrap();
    let e = F::binary_cross_entropy_with_logits(&x, &t32, Some(&w64), None, Reduction::Mean)
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { arg: "weight", .. }),
        "{e}"
    );
}

#[test]
fn clip_grad_l2_norm_is_norm_type_2() {
    let make = || -> Vec<Var> {
        [(&[3usize, 4][..], 0.7f32), (&[5][..], -1.3)]
            .iter()
            .map(|&(shape, s)| {
                let n: usize = shape.iter().product();
                let g: Vec<f32> = (0..n).map(|i| s * (i as f32 - 2.5)).collect();
                let p = Var::new(Tensor::zeros(shape, DType::F32).unwrap(), true);
                p.set_grad(Some(Tensor::from_vec(g, shape).unwrap()))
                    .unwrap();
                p
            })
            .collect()
    };
    let (a, b) = (make(), make());
    let ta = clip_grad_l2_norm_(&a, 1.0).unwrap();
    let tb = clip_grad_norm_(&b, 1.0, 2.0).unwrap();
    assert_eq!(ta.to_f64_vec(), tb.to_f64_vec());
    assert!(ta.to_f64_vec()[0] > 1.0, "the case must clip");
    for (p, q) in a.iter().zip(&b) {
        assert_eq!(
            p.grad().unwrap().to_f64_vec(),
            q.grad().unwrap().to_f64_vec()
        );
    }
    let clipped: f64 = a
        .iter()
        .flat_map(|p| p.grad().unwrap().to_f64_vec())
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt();
    assert!((clipped - 1.0).abs() < 1e-5, "{clipped}");
}
