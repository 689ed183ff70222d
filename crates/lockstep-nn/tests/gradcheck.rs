//! Finite-difference checks of every backward in lockstep-nn.
//!
//! Everything with an `f64` kernel is checked in `f64` (central differences, step 1e-6,
//! `|analytic − numeric| ≤ 1e-7·(1 + |numeric|)`). Convolution and the poolings have `f32`
//! kernels only in lockstep-tensor, so they are checked in `f32`: they are linear (conv, average
//! pools) or piecewise linear (max pool, with inputs spaced well apart), so a large step (0.1,
//! 0.05 for max pooling) has no truncation error and keeps the rounding error of the
//! difference quotient near 1e-5; the tolerance there is 1e-3.
//!
//! The recurrent modules are checked through their own parameters (converted to `f64` with
//! `Module::to_dtype`, as `module.double()`), their input and initial states, with
//! `gradcheck_vars`, which perturbs the leaves in place.
//!
//! The last tests check that a training step's gradients are bitwise identical at 1, 2, 3 and
//! 8 threads in deterministic mode.

use lockstep_nn::functional::{self as F, CrossEntropy, Reduction};
use lockstep_nn::gradcheck::{gradcheck, gradcheck_vars};
use lockstep_nn::layers::{Conv2d, Dropout, Linear, ReLU, Sequential};
use lockstep_nn::rnn::{Rnn, RnnConfig};
use lockstep_nn::{Forward, Module, Result, Var, no_grad};
use lockstep_rng::Generator;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::{DType, Tensor};

const EPS: f64 = 1e-6;
const TOL: f64 = 1e-7;

/// SplitMix64: test data from a seed, independent of every generator under test.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Uniform in `[-1, 1)`.
fn rnd(shape: &[usize], seed: u64) -> Tensor {
    let mut m = Mix(seed);
    let v: Vec<f64> = (0..numel(shape)).map(|_| m.uniform(-1.0, 1.0)).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// Uniform in `[0.5, 2)`.
fn pos(shape: &[usize], seed: u64) -> Tensor {
    let mut m = Mix(seed);
    let v: Vec<f64> = (0..numel(shape)).map(|_| m.uniform(0.5, 2.0)).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// `|x|` in `[0.2, 1.2)` with a random sign: no kink of relu within a step.
fn away(shape: &[usize], seed: u64) -> Tensor {
    let mut m = Mix(seed);
    let v: Vec<f64> = (0..numel(shape))
        .map(|_| {
            let a = m.uniform(0.2, 1.2);
            if m.next() & 1 == 0 { a } else { -a }
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn f32t(t: &Tensor) -> Tensor {
    t.to_dtype(DType::F32)
}

#[track_caller]
fn check(f: impl Fn(&[Var]) -> Result<Var>, inputs: &[Tensor]) {
    if let Err(e) = gradcheck(f, inputs, EPS, TOL) {
        panic!("{e}");
    }
}

#[track_caller]
fn check_f32(f: impl Fn(&[Var]) -> Result<Var>, inputs: &[Tensor], eps: f64) {
    let inputs: Vec<Tensor> = inputs.iter().map(f32t).collect();
    if let Err(e) = gradcheck(f, &inputs, eps, 1e-3) {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Elementwise

#[test]
fn binary_ops_with_broadcasting() {
    let shapes: [(&[usize], &[usize]); 5] = [
        (&[2, 3], &[2, 3]),
        (&[2, 3, 4], &[3, 1]),
        (&[1, 4], &[2, 1, 4]),
        (&[2, 3], &[]),
        (&[3, 1], &[1, 2]),
    ];
    for (k, (sa, sb)) in shapes.into_iter().enumerate() {
        let (a, b) = (rnd(sa, 10 + k as u64), pos(sb, 20 + k as u64));
        let ab = [a.clone(), b.clone()];
        check(|v| v[0].add(&v[1]), &ab);
        check(|v| v[0].sub(&v[1]), &ab);
        check(|v| v[0].mul(&v[1]), &ab);
        check(|v| v[0].div(&v[1]), &ab);
        // The other way round: the broadcast operand first.
        let ba = [b, a];
        check(|v| v[0].sub(&v[1]), &ba);
        check(|v| v[1].div(&v[0]), &ba);
    }
}

#[test]
fn binary_ops_with_one_constant_operand() {
    let (a, b) = (rnd(&[2, 3], 1), pos(&[3], 2));
    let cb = Var::constant(b.clone());
    check(|v| v[0].mul(&cb), std::slice::from_ref(&a));
    check(|v| v[0].div(&cb), std::slice::from_ref(&a));
    let ca = Var::constant(a);
    check(|v| ca.div(&v[0]), &[b]);
}

#[test]
fn scalar_forms_and_neg() {
    let a = rnd(&[2, 3], 3);
    let a = std::slice::from_ref(&a);
    check(|v| v[0].add_scalar(1.5), a);
    check(|v| v[0].mul_scalar(-2.5), a);
    check(|v| v[0].div_scalar(3.0), a);
    check(|v| v[0].neg(), a);
    check(|v| v[0].neg()?.mul_scalar(0.5)?.add_scalar(-1.0), a);
}

#[test]
fn unary_functions() {
    let x = rnd(&[3, 4], 4);
    let p = pos(&[3, 4], 5);
    let x = std::slice::from_ref(&x);
    let p = std::slice::from_ref(&p);
    check(|v| v[0].exp(), x);
    check(|v| v[0].log(), p);
    check(|v| v[0].sqrt(), p);
    for e in [2.0, 3.0, 0.5, -1.5, 1.0] {
        check(|v| v[0].pow_scalar(e), p);
    }
    for e in [2.0, 3.0] {
        check(|v| v[0].pow_scalar(e), x);
    }
    check(|v| v[0].pow_scalar(0.0), x);
    check(|v| v[0].tanh(), x);
    check(|v| v[0].sigmoid(), x);
    check(|v| v[0].relu(), &[away(&[3, 4], 6)]);
    check(|v| v[0].gelu(), &[rnd(&[3, 4], 7).mul_scalar(3.0).unwrap()]);
    check(
        |v| v[0].gelu_tanh(),
        &[rnd(&[3, 4], 8).mul_scalar(3.0).unwrap()],
    );
}

#[test]
fn pow_zero_and_relu_at_zero_have_finite_gradients() {
    // PyTorch: d/dx x^0 = 0 everywhere (also at 0), relu'(0) = 0.
    let x = Var::new(Tensor::from_vec(vec![0.0f64, 2.0], &[2]).unwrap(), true);
    x.pow_scalar(0.0)
        .unwrap()
        .sum()
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 0.0]);
    x.zero_grad();
    x.relu().unwrap().sum().unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), [0.0, 1.0]);
}

// ---------------------------------------------------------------------------------------------
// Matrix products

#[test]
fn matmul_all_shapes() {
    let cases: [(&[usize], &[usize]); 10] = [
        (&[3, 4], &[4, 5]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[2, 1, 3, 4], &[5, 4, 2]), // batch dims broadcast both ways
        (&[3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[4, 5]),
        (&[4], &[4]),
        (&[4], &[4, 5]),
        (&[3, 4], &[4]),
        (&[4], &[2, 4, 5]),
        (&[2, 3, 4], &[4]),
    ];
    for (k, (sa, sb)) in cases.into_iter().enumerate() {
        let ins = [rnd(sa, 30 + k as u64), rnd(sb, 40 + k as u64)];
        check(|v| v[0].matmul(&v[1]), &ins);
    }
}

#[test]
fn linear_with_and_without_bias() {
    let w = rnd(&[5, 4], 50);
    let b = rnd(&[5], 51);
    for (k, xs) in [&[3usize, 4][..], &[2, 3, 4], &[4], &[2, 1, 2, 4]]
        .into_iter()
        .enumerate()
    {
        let x = rnd(xs, 52 + k as u64);
        check(
            |v| v[0].linear(&v[1], Some(&v[2])),
            &[x.clone(), w.clone(), b.clone()],
        );
        check(|v| v[0].linear(&v[1], None), &[x, w.clone()]);
    }
}

// ---------------------------------------------------------------------------------------------
// Reductions and softmax

#[test]
fn reductions() {
    let x = rnd(&[2, 3, 4], 60);
    let x = std::slice::from_ref(&x);
    check(|v| v[0].sum(), x);
    check(|v| v[0].mean(), x);
    for d in [0, 1, 2, -1, -3] {
        for keep in [false, true] {
            check(|v| v[0].sum_dim(d, keep), x);
            check(|v| v[0].mean_dim(d, keep), x);
            check(|v| v[0].logsumexp(d, keep), x);
        }
        check(|v| v[0].softmax(d), x);
        check(|v| v[0].log_softmax(d), x);
    }
    // A 1-D tensor and a 0-d result.
    check(|v| v[0].softmax(0), &[rnd(&[5], 61)]);
    check(|v| v[0].logsumexp(0, false), &[rnd(&[5], 62)]);
}

// ---------------------------------------------------------------------------------------------
// Views, cat, stack

#[test]
fn views() {
    let x = rnd(&[2, 3, 4], 70);
    let x = std::slice::from_ref(&x);
    check(|v| v[0].reshape(&[4, -1]), x);
    check(|v| v[0].flatten(1, 2), x);
    check(|v| v[0].flatten(0, -1), x);
    check(|v| v[0].flatten(0, 1), x);
    check(|v| v[0].transpose(0, 2), x);
    check(|v| v[0].transpose(-1, 1), x);
    check(|v| v[0].permute(&[2, 0, 1]), x);
    check(|v| v[0].permute(&[-1, -3, -2]), x);
    check(|v| v[0].unsqueeze(1), x);
    check(|v| v[0].unsqueeze(-1), x);
    check(|v| v[0].unsqueeze(0)?.squeeze(0), x);
    check(|v| v[0].squeeze(1), x); // size 3: no change
    check(|v| v[0].narrow(1, 1, 2), x);
    check(|v| v[0].narrow(2, 0, 1), x);
    check(|v| v[0].narrow(-1, 3, 1), x);
    check(|v| v[0].select(2, 3), x);
    check(|v| v[0].select(0, 1), x);
    check(|v| v[0].select(-2, 0), x);
    // Views of views, and a transposed (non-contiguous) value fed to an op.
    check(
        |v| v[0].transpose(0, 1)?.reshape(&[3, 8])?.mul_scalar(2.0),
        x,
    );
    check(|v| v[0].permute(&[1, 2, 0])?.exp(), x);
    let y = rnd(&[2, 1, 3], 71);
    let y = std::slice::from_ref(&y);
    check(|v| v[0].squeeze(1), y);
    check(|v| v[0].squeeze(-2), y);
    check(|v| v[0].expand(&[2, 4, 3]), y);
    check(|v| v[0].expand(&[5, -1, 2, -1]), y);
    check(|v| v[0].expand(&[2, 1, 3]), y);
    // flatten of a 0-d tensor
    check(|v| v[0].flatten(0, -1), &[rnd(&[], 72)]);
}

#[test]
fn chunk_cat_stack() {
    let x = rnd(&[2, 6], 80);
    check(
        |v| {
            let c = v[0].chunk(3, 1)?;
            // Reordered and one chunk used twice: gradients meet at the input.
            Var::cat(&[c[2].clone(), c[0].clone(), c[2].mul_scalar(3.0)?], 1)
        },
        std::slice::from_ref(&x),
    );
    check(
        |v| {
            let c = v[0].chunk(2, 0)?;
            c[0].mul(&c[1])
        },
        &[x],
    );
    let (a, b, c) = (rnd(&[2, 3], 81), rnd(&[1, 3], 82), rnd(&[2, 3], 83));
    check(
        |v| Var::cat(&[v[0].clone(), v[1].clone(), v[0].clone()], 0),
        &[a.clone(), b.clone()],
    );
    check(
        |v| Var::cat(&[v[0].clone(), v[1].clone()], -1),
        &[a.clone(), rnd(&[2, 5], 84)],
    );
    for d in [0, 1, 2, -1] {
        check(
            |v| Var::stack(&[v[0].clone(), v[1].clone(), v[0].clone()], d),
            &[a.clone(), c.clone()],
        );
    }
}

#[test]
fn one_tensor_used_many_times() {
    check(
        |v| {
            let x = &v[0];
            let y = x.mul(x)?.add(&x.exp()?)?;
            let z = y.matmul(&x.transpose(0, 1)?)?;
            z.add(&x.sum_dim(1, true)?)
        },
        &[rnd(&[3, 3], 90)],
    );
}

// ---------------------------------------------------------------------------------------------
// Dropout

#[test]
fn dropout_with_a_fixed_generator() {
    let x = rnd(&[4, 5], 100);
    let f = |v: &[Var]| {
        let mut g = Generator::with_seed(7);
        v[0].dropout(0.4, true, Some(&mut g))
    };
    check(f, std::slice::from_ref(&x));
    // The mask is not trivial, and evaluation or p = 0 is the identity.
    let y = f(&[Var::constant(x.clone())])
        .unwrap()
        .data()
        .to_vec::<f64>()
        .unwrap();
    let zeros = y.iter().filter(|&&v| v == 0.0).count();
    assert!(zeros > 0 && zeros < y.len(), "{zeros} of {}", y.len());
    let xv = Var::new(x.clone(), true);
    for (p, training) in [(0.4, false), (0.0, true)] {
        let y = xv.dropout(p, training, None).unwrap();
        assert_eq!(
            y.data().to_vec::<f64>().unwrap(),
            x.to_vec::<f64>().unwrap()
        );
    }
    check(|v| v[0].dropout(0.4, false, None), &[x]);
}

// ---------------------------------------------------------------------------------------------
// Normalisation

#[test]
fn batch_norm_train_and_eval() {
    for (k, shape) in [&[4usize, 3][..], &[3, 2, 4], &[2, 3, 2, 2]]
        .into_iter()
        .enumerate()
    {
        let c = shape[1];
        let s = 110 + 10 * k as u64;
        let (x, w, b) = (rnd(shape, s), pos(&[c], s + 1), rnd(&[c], s + 2));
        let (rm, rv) = (rnd(&[c], s + 3), pos(&[c], s + 4));
        for training in [true, false] {
            // With running statistics (updated in training, used in evaluation) and affine.
            let stats = || (Var::constant(rm.clone()), Var::constant(rv.clone()));
            check(
                |v| {
                    let (m, r) = stats();
                    F::batch_norm(
                        &v[0],
                        Some(&m),
                        Some(&r),
                        Some(&v[1]),
                        Some(&v[2]),
                        training,
                        0.1,
                        1e-5,
                    )
                },
                &[x.clone(), w.clone(), b.clone()],
            );
            // Without affine.
            check(
                |v| {
                    let (m, r) = stats();
                    F::batch_norm(&v[0], Some(&m), Some(&r), None, None, training, 0.1, 1e-5)
                },
                std::slice::from_ref(&x),
            );
            // Weight only.
            check(
                |v| {
                    let (m, r) = stats();
                    F::batch_norm(
                        &v[0],
                        Some(&m),
                        Some(&r),
                        Some(&v[1]),
                        None,
                        training,
                        0.1,
                        1e-5,
                    )
                },
                &[x.clone(), w.clone()],
            );
        }
        // No running statistics: batch statistics in both modes.
        for training in [true, false] {
            check(
                |v| {
                    F::batch_norm(
                        &v[0],
                        None,
                        None,
                        Some(&v[1]),
                        Some(&v[2]),
                        training,
                        0.1,
                        1e-5,
                    )
                },
                &[x.clone(), w.clone(), b.clone()],
            );
        }
    }
}

#[test]
fn layer_norm() {
    let cases: [(&[usize], &[usize]); 3] = [(&[3, 4], &[4]), (&[2, 2, 3], &[2, 3]), (&[5], &[5])];
    for (k, (xs, ns)) in cases.into_iter().enumerate() {
        let s = 130 + 10 * k as u64;
        let (x, w, b) = (rnd(xs, s), pos(ns, s + 1), rnd(ns, s + 2));
        check(
            |v| F::layer_norm(&v[0], ns, Some(&v[1]), Some(&v[2]), 1e-5),
            &[x.clone(), w, b],
        );
        check(|v| F::layer_norm(&v[0], ns, None, None, 1e-5), &[x]);
    }
}

// ---------------------------------------------------------------------------------------------
// Embedding

#[test]
fn embedding_repeated_indices_and_padding() {
    let idx = Tensor::from_vec(vec![1i64, 2, 1, 0, 4, 1], &[2, 3]).unwrap();
    let w = rnd(&[5, 3], 150);
    check(
        |v| F::embedding(&idx, &v[0], None),
        std::slice::from_ref(&w),
    );
    // A padding index that does not occur changes nothing.
    check(
        |v| F::embedding(&idx, &v[0], Some(3)),
        std::slice::from_ref(&w),
    );
    // padding_idx = 1 (which occurs three times): its row gets no gradient, every other row
    // the gradient it gets without padding (checked above).
    let grads = |p: Option<usize>| {
        let wv = Var::new(w.clone(), true);
        let y = F::embedding(&idx, &wv, p).unwrap();
        let wt = Var::constant(rnd(&[2, 3, 3], 151));
        y.mul(&wt).unwrap().sum().unwrap().backward().unwrap();
        wv.grad().unwrap().to_vec::<f64>().unwrap()
    };
    let (plain, padded) = (grads(None), grads(Some(1)));
    assert!(plain[3..6].iter().all(|&g| g != 0.0));
    for (i, (a, b)) in plain.iter().zip(&padded).enumerate() {
        let want = if (3..6).contains(&i) { 0.0 } else { *a };
        assert_eq!(*b, want, "element {i}");
    }
    // Indices of more dimensions, and a 0-d index.
    let idx3 = Tensor::from_vec(vec![4i64, 0, 0, 2], &[2, 1, 2]).unwrap();
    check(
        |v| F::embedding(&idx3, &v[0], None),
        std::slice::from_ref(&w),
    );
    let idx0 = Tensor::scalar(2i64);
    check(|v| F::embedding(&idx0, &v[0], None), &[w]);
}

// ---------------------------------------------------------------------------------------------
// Losses

fn reductions_all() -> [Reduction; 3] {
    [Reduction::Mean, Reduction::Sum, Reduction::None]
}

#[test]
fn nll_loss() {
    let nll = |weight: Option<&Tensor>, ignore_index: i64, reduction| F::NllLoss {
        weight: weight.cloned(),
        ignore_index,
        reduction,
    };
    let x = rnd(&[4, 5], 160);
    let w = pos(&[5], 161);
    let t = Tensor::from_vec(vec![1i64, 0, 4, 1], &[4]).unwrap();
    let t_ign = Tensor::from_vec(vec![1i64, -100, 4, 1], &[4]).unwrap();
    for red in reductions_all() {
        for weight in [None, Some(&w)] {
            check(
                |v| F::nll_loss_with(&v[0], &t, &nll(weight, -100, red)),
                std::slice::from_ref(&x),
            );
            check(
                |v| F::nll_loss_with(&v[0], &t_ign, &nll(weight, -100, red)),
                std::slice::from_ref(&x),
            );
            check(
                |v| F::nll_loss_with(&v[0], &t, &nll(weight, 1, red)),
                std::slice::from_ref(&x),
            );
        }
    }
    // [N, C, d] input.
    let xk = rnd(&[2, 5, 3], 162);
    let tk = Tensor::from_vec(vec![0i64, 4, 2, 3, 3, 1], &[2, 3]).unwrap();
    for red in reductions_all() {
        check(
            |v| F::nll_loss_with(&v[0], &tk, &nll(Some(&w), -100, red)),
            std::slice::from_ref(&xk),
        );
    }
}

#[test]
fn cross_entropy_every_option() {
    let x = rnd(&[4, 5], 170).mul_scalar(2.0).unwrap();
    let w = pos(&[5], 171);
    let t = Tensor::from_vec(vec![1i64, 0, 4, 0], &[4]).unwrap();
    for reduction in reductions_all() {
        for weight in [None, Some(w.clone())] {
            for ignore_index in [-100, 0] {
                for label_smoothing in [0.0, 0.1] {
                    let o = CrossEntropy {
                        weight: weight.clone(),
                        ignore_index,
                        label_smoothing,
                        reduction,
                    };
                    check(
                        |v| F::cross_entropy_with(&v[0], &t, &o),
                        std::slice::from_ref(&x),
                    );
                }
            }
        }
    }
    check(|v| F::cross_entropy(&v[0], &t), std::slice::from_ref(&x));
    // [N, C, d1, d2] logits and an unbatched [C] one.
    let xk = rnd(&[2, 3, 2, 2], 172);
    let tk = Tensor::from_vec(vec![0i64, 2, 1, 1, 2, 0, 0, 2], &[2, 2, 2]).unwrap();
    for reduction in reductions_all() {
        let o = CrossEntropy {
            label_smoothing: 0.2,
            reduction,
            ..CrossEntropy::default()
        };
        check(
            |v| F::cross_entropy_with(&v[0], &tk, &o),
            std::slice::from_ref(&xk),
        );
    }
    let t0 = Tensor::scalar(3i64);
    check(|v| F::cross_entropy(&v[0], &t0), &[rnd(&[5], 173)]);
}

#[test]
fn mse_loss() {
    let (x, y) = (rnd(&[3, 4], 180), rnd(&[3, 4], 181));
    for red in reductions_all() {
        check(|v| F::mse_loss(&v[0], &v[1], red), &[x.clone(), y.clone()]);
    }
}

#[test]
fn binary_cross_entropy_with_logits() {
    let x = rnd(&[3, 4], 190).mul_scalar(3.0).unwrap();
    let hard = Tensor::from_vec(
        vec![
            1.0f64, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0,
        ],
        &[3, 4],
    )
    .unwrap();
    let soft = pos(&[3, 4], 191).div_scalar(2.0).unwrap();
    let (w, pw) = (pos(&[4], 192), pos(&[4], 193));
    let w_full = pos(&[3, 4], 194);
    for red in reductions_all() {
        for t in [&hard, &soft] {
            for (weight, pos_weight) in [
                (None, None),
                (Some(&w), None),
                (None, Some(&pw)),
                (Some(&w_full), Some(&pw)),
            ] {
                check(
                    |v| F::binary_cross_entropy_with_logits(&v[0], t, weight, pos_weight, red),
                    std::slice::from_ref(&x),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recurrent modules, through their parameters

/// Checks `rnn` (converted to f64) with respect to every parameter, the input and, if
/// `with_state`, the initial states; with `dropout_seed`, the inter-layer dropout draws from a
/// generator reset to that seed on every call.
fn check_rnn(rnn: Rnn, x_shape: &[usize], with_state: bool, lstm: bool, dropout_seed: Option<u64>) {
    rnn.to_dtype(DType::F64).unwrap();
    // Parameters of a size that makes the gates neither saturated nor linear.
    for (k, p) in rnn.parameters().iter().enumerate() {
        p.set_data(rnd(p.shape(), 500 + k as u64).mul_scalar(0.8).unwrap())
            .unwrap();
    }
    let cfg = rnn.config().clone();
    let dirs = if cfg.bidirectional { 2 } else { 1 };
    let batch = if x_shape.len() == 2 {
        None
    } else if cfg.batch_first {
        Some(x_shape[0])
    } else {
        Some(x_shape[1])
    };
    let mut sshape = vec![cfg.num_layers * dirs];
    sshape.extend(batch);
    sshape.push(cfg.hidden_size);
    let x = Var::new(rnd(x_shape, 600), true);
    let h0 = Var::new(rnd(&sshape, 601), true);
    let c0 = Var::new(rnd(&sshape, 602), true);
    let mut vars = rnn.parameters();
    vars.push(x.clone());
    if with_state {
        vars.push(h0.clone());
        if lstm {
            vars.push(c0.clone());
        }
    }
    let run = || -> Result<Var> {
        let (h, c) = if with_state {
            (Some(&h0), if lstm { Some(&c0) } else { None })
        } else {
            (None, None)
        };
        let o = rnn.forward_with_state(&x, h, c)?;
        let mut parts = vec![o.output.flatten(0, -1)?, o.h_n.flatten(0, -1)?];
        if let Some(c) = o.c_n {
            parts.push(c.flatten(0, -1)?);
        }
        Var::cat(&parts, 0)
    };
    let f = || match dropout_seed {
        Some(s) => lockstep_nn::rng::with_dropout_generator(Generator::with_seed(s), run).0,
        None => run(),
    };
    if let Err(e) = gradcheck_vars(f, &vars, EPS, TOL) {
        panic!("{:?}: {e}", rnn.config());
    }
}

fn cfg(layers: usize, bidirectional: bool, batch_first: bool) -> RnnConfig {
    RnnConfig {
        num_layers: layers,
        bidirectional,
        batch_first,
        ..RnnConfig::new(2, 2)
    }
}

#[test]
fn rnn_tanh_and_relu() {
    check_rnn(
        Rnn::rnn(cfg(1, false, false)).unwrap(),
        &[3, 2, 2],
        true,
        false,
        None,
    );
    check_rnn(
        Rnn::rnn(cfg(2, true, true)).unwrap(),
        &[2, 2, 2],
        false,
        false,
        None,
    );
    let relu = RnnConfig {
        nonlinearity: "relu".into(),
        ..cfg(2, false, true)
    };
    check_rnn(Rnn::rnn(relu).unwrap(), &[2, 3, 2], true, false, None);
}

#[test]
fn gru() {
    check_rnn(
        Rnn::gru(cfg(1, false, true)).unwrap(),
        &[2, 3, 2],
        true,
        false,
        None,
    );
    check_rnn(
        Rnn::gru(cfg(2, true, false)).unwrap(),
        &[2, 2, 2],
        false,
        false,
        None,
    );
}

#[test]
fn lstm() {
    check_rnn(
        Rnn::lstm(cfg(1, false, false)).unwrap(),
        &[3, 2, 2],
        true,
        true,
        None,
    );
    check_rnn(
        Rnn::lstm(cfg(2, true, true)).unwrap(),
        &[2, 2, 2],
        true,
        true,
        None,
    );
    // Unbatched input [T, F], no biases.
    let nb = RnnConfig {
        bias: false,
        ..cfg(1, true, false)
    };
    check_rnn(Rnn::lstm(nb).unwrap(), &[2, 2], true, true, None);
}

#[test]
fn lstm_with_inter_layer_dropout() {
    let c = RnnConfig {
        dropout: 0.5,
        ..cfg(2, false, true)
    };
    check_rnn(Rnn::lstm(c).unwrap(), &[2, 3, 2], false, true, Some(9));
}

// ---------------------------------------------------------------------------------------------
// Convolution and pooling: f32 kernels only (see the file's docs for step and tolerance)

#[test]
fn conv2d_f32() {
    let cases = [
        (
            [2usize, 2, 5, 5],
            [3usize, 2, 3, 3],
            Conv2dParams::default(),
        ),
        (
            [1, 2, 5, 4],
            [3, 2, 3, 2],
            Conv2dParams {
                stride: (2, 1),
                padding: (1, 0),
                ..Conv2dParams::default()
            },
        ),
        (
            [1, 1, 6, 6],
            [2, 1, 2, 2],
            Conv2dParams {
                dilation: (2, 2),
                padding: (1, 1),
                ..Conv2dParams::default()
            },
        ),
        (
            [1, 4, 4, 4],
            [4, 2, 3, 3],
            Conv2dParams {
                groups: 2,
                padding: (1, 1),
                ..Conv2dParams::default()
            },
        ),
    ];
    for (k, (xs, ws, p)) in cases.into_iter().enumerate() {
        let s = 200 + 10 * k as u64;
        let (x, w, b) = (rnd(&xs, s), rnd(&ws, s + 1), rnd(&[ws[0]], s + 2));
        check_f32(
            |v| F::conv2d(&v[0], &v[1], Some(&v[2]), p),
            &[x.clone(), w.clone(), b],
            0.1,
        );
        check_f32(|v| F::conv2d(&v[0], &v[1], None, p), &[x, w], 0.1);
    }
}

#[test]
fn conv2d_module_through_its_parameters_f32() {
    let conv = Conv2d::new(2, 3, 3, 1).unwrap();
    let x = Var::new(f32t(&rnd(&[2, 2, 4, 4], 250)), true);
    let mut vars = conv.parameters();
    vars.push(x.clone());
    gradcheck_vars(|| conv.forward(&x), &vars, 0.1, 1e-3).unwrap();
}

/// Distinct values spaced 0.25 apart, in a scrambled order: no ties in a max-pooling window
/// even after a step of 0.05.
fn spaced(shape: &[usize], seed: u64) -> Tensor {
    let n = numel(shape);
    let mut m = Mix(seed);
    let mut v: Vec<f64> = (0..n).map(|i| (i as f64 - n as f64 / 2.0) * 0.25).collect();
    for i in (1..n).rev() {
        v.swap(i, (m.next() % (i as u64 + 1)) as usize);
    }
    Tensor::from_vec(v, shape).unwrap()
}

#[test]
fn pools_f32() {
    let x = spaced(&[2, 2, 5, 4], 260);
    let xs = std::slice::from_ref(&x);
    let p3 = Pool2d {
        kernel: (3, 3),
        stride: (2, 1),
        padding: (1, 1),
        ..Pool2d::new(3)
    };
    let dil = Pool2d {
        kernel: (2, 2),
        stride: (1, 1),
        dilation: (2, 1),
        ..Pool2d::new(2)
    };
    let ceil = Pool2d {
        ceil_mode: true,
        ..Pool2d::new(2)
    };
    for p in [Pool2d::new(2), p3, dil, ceil] {
        check_f32(|v| F::max_pool2d(&v[0], p), xs, 0.05);
    }
    for p in [Pool2d::new(2), p3, ceil] {
        for cip in [true, false] {
            check_f32(|v| F::avg_pool2d(&v[0], p, cip), xs, 0.1);
        }
    }
    for hw in [(1, 1), (2, 3), (3, 3), (5, 4)] {
        check_f32(|v| F::adaptive_avg_pool2d(&v[0], hw), xs, 0.1);
    }
}

// ---------------------------------------------------------------------------------------------
// Gradient accumulation order: fixed by the graph, not by the number of threads

/// The bits of every parameter's gradient after one forward and backward of `loss`.
fn grad_bits(params: &[Var], loss: impl Fn() -> Result<Var>) -> Vec<Vec<u32>> {
    for p in params {
        p.zero_grad();
    }
    loss().unwrap().backward().unwrap();
    params
        .iter()
        .map(|p| {
            let g = p.grad().unwrap();
            g.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect()
        })
        .collect()
}

fn same_at_every_thread_count(params: &[Var], loss: impl Fn() -> Result<Var>) {
    let at = |n: usize| {
        lockstep_tensor::threads::with_num_threads(n, || {
            lockstep_tensor::deterministic::scope(true, false, || grad_bits(params, &loss))
        })
    };
    let one = at(1);
    for n in [2, 3, 8] {
        let other = at(n);
        for (k, (a, b)) in one.iter().zip(&other).enumerate() {
            assert!(
                a == b,
                "parameter {k}: gradients differ between 1 and {n} threads"
            );
        }
    }
}

fn f32_data(shape: &[usize], seed: u64) -> Tensor {
    f32t(&rnd(shape, seed))
}

fn targets(n: usize, classes: i64) -> Tensor {
    Tensor::from_vec((0..n as i64).map(|i| (i * 7 + 3) % classes).collect(), &[n]).unwrap()
}

#[test]
fn mlp_step_is_thread_invariant() {
    let model = Sequential::new()
        .add(Linear::new(64, 96, true).unwrap())
        .add(ReLU::default())
        .add(Dropout::new(0.2).unwrap())
        .add(Linear::new(96, 10, true).unwrap());
    let x = Var::constant(f32_data(&[48, 64], 300));
    let y = targets(48, 10);
    let params = model.parameters();
    same_at_every_thread_count(&params, || {
        // Dropout masks from a fixed generator, so that only the threads differ.
        lockstep_nn::rng::with_dropout_generator(Generator::with_seed(1), || {
            F::cross_entropy(&model.forward(&x)?, &y)
        })
        .0
    });
}

#[test]
fn lstm_step_is_thread_invariant() {
    let lstm = Rnn::lstm(RnnConfig {
        num_layers: 2,
        batch_first: true,
        dropout: 0.1,
        ..RnnConfig::new(8, 32)
    })
    .unwrap();
    let head = Linear::new(32, 10, true).unwrap();
    let x = Var::constant(f32_data(&[16, 8, 8], 310));
    let y = targets(16, 10);
    let mut params = lstm.parameters();
    params.extend(head.parameters());
    same_at_every_thread_count(&params, || {
        lockstep_nn::rng::with_dropout_generator(Generator::with_seed(2), || {
            let out = lstm.forward(&x)?;
            let last = out.select(1, 7)?;
            F::cross_entropy(&head.forward(&last)?, &y)
        })
        .0
    });
}

#[test]
fn gradcheck_reports_a_wrong_gradient() {
    // A deliberately wrong backward is caught, naming the input and element.
    let x = rnd(&[3], 400);
    let e = gradcheck(
        |v| {
            let d = v[0].data();
            Ok(Var::from_op(
                "twice_wrong",
                d.mul_scalar(2.0)?,
                &[&v[0]],
                |g| Ok(vec![Some(g.mul_scalar(3.0)?)]),
            ))
        },
        &[x],
        EPS,
        TOL,
    )
    .unwrap_err();
    assert!(e.to_string().contains("input 0, element 0"), "{e}");
    // And the in-place variant restores the leaves it perturbed.
    let v = Var::new(rnd(&[2], 401), true);
    let before = v.data().to_vec::<f64>().unwrap();
    let bad = || {
        let d = v.data();
        Ok(Var::from_op("wrong", d.clone(), &[&v], |g| {
            Ok(vec![Some(g.mul_scalar(2.0)?)])
        }))
    };
    assert!(gradcheck_vars(bad, std::slice::from_ref(&v), EPS, TOL).is_err());
    assert_eq!(v.data().to_vec::<f64>().unwrap(), before);
    let _ = no_grad(|| v.exp());
}

/// `gelu`'s gradient through autograd (f32: the derivative kept from the forward's own erf)
/// has the bits of `Tensor::gelu_backward` (the derivative computed again), at 1, 2, 3 and 8
/// threads, with a tensor large enough to be split over the pool; and, as in PyTorch (whose
/// `GeluBackward0` saves the input), writing the input in place before the backward is an
/// error even though the kept derivative no longer reads it.
#[test]
fn gelu_grad_keeps_the_bits_of_gelu_backward_at_every_thread_count() {
    use lockstep_tensor::threads::with_num_threads;
    let bits = |t: &Tensor| -> Vec<u32> {
        let v = t.to_vec::<f32>().unwrap();
        v.iter().map(|v| v.to_bits()).collect()
    };
    let n = 150_001;
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as f32 * 0.377).sin()) * if i % 7 == 0 { 8.0 } else { 1.1 })
        .collect();
    let g: Vec<f32> = (0..n).map(|i| ((i as f32 * 0.91).cos()) * 0.02).collect();
    let (x, g) = (
        Tensor::from_vec(x, &[n]).unwrap(),
        Tensor::from_vec(g, &[n]).unwrap(),
    );
    let want = bits(&Tensor::gelu_backward(&g, &x).unwrap());
    for threads in [1, 2, 3, 8] {
        let (value, grad) = with_num_threads(threads, || {
            let xv = Var::new(x.clone(), true);
            let y = xv.gelu().unwrap();
            let loss = y.mul(&Var::new(g.clone(), false)).unwrap().sum().unwrap();
            loss.backward().unwrap();
            (y.data(), xv.grad().unwrap())
        });
        assert!(
            bits(&value) == bits(&x.gelu().unwrap()),
            "value at {threads} threads"
        );
        assert!(bits(&grad) == want, "gradient at {threads} threads");
    }
    let h = Var::new(x.clone(), true).mul_scalar(1.0).unwrap();
    let loss = h.gelu().unwrap().sum().unwrap();
    no_grad(|| h.mul_scalar_(2.0)).unwrap();
    let e = loss.backward().unwrap_err().to_string();
    assert!(
        e.contains("modified by an inplace operation") && e.contains("gelu"),
        "{e}"
    );
}
