//! `F::causal_softmax` (the gpt's fused scale + causal mask + softmax): its value and its
//! gradient have the bits of the unfused chain `mul_scalar`, `masked_fill(−∞)`, `softmax` at
//! 1, 2, 3 and 8 threads (run under `LOCKSTEP_ISA=avx2` and `portable` too), and its gradient
//! passes gradcheck.

use lockstep_nn::Var;
use lockstep_nn::functional as F;
use lockstep_nn::gradcheck::gradcheck;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// Values with signs and a few large magnitudes, from a fixed integer hash.
fn vals(shape: &[usize], salt: u64, dt: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n as u64)
        .map(|i| {
            let h = (i.wrapping_add(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64;
            (h / (1u64 << 24) as f64 - 0.5) * if i % 13 == 0 { 30.0 } else { 5.0 }
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap().to_dtype(dt)
}

fn bits(t: &Tensor) -> Vec<u64> {
    let v = t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
    v.iter().map(|x| x.to_bits()).collect()
}

/// The value and the input's gradient for the upstream gradient `w`, by `f`.
fn value_and_grad(
    x: &Tensor,
    w: &Tensor,
    f: impl Fn(&Var) -> lockstep_nn::Result<Var>,
) -> (Tensor, Tensor) {
    let v = Var::new(x.clone(), true);
    let y = f(&v).unwrap();
    y.backward_with(w).unwrap();
    (y.data(), v.grad().unwrap())
}

fn unfused(x: &Var, scale: f64) -> lockstep_nn::Result<Var> {
    let s = x.shape();
    let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
    let mask = Tensor::ones(&[r, c], DType::F32)?.tril(0)?.eq_scalar(0.0)?;
    x.mul_scalar(scale)?
        .masked_fill(&mask, f64::NEG_INFINITY)?
        .softmax(-1)
}

#[test]
fn value_and_gradient_are_the_unfused_bits_at_any_thread_count() {
    for (shape, dt) in [
        (vec![16, 4, 64, 64], DType::F32),
        (vec![2, 3, 17, 17], DType::F32),
        (vec![3, 9, 20], DType::F64),
    ] {
        let x = vals(&shape, 1, dt);
        let w = vals(&shape, 7, dt);
        for scale in [1.0 / 32f64.sqrt(), 0.7] {
            let (want_y, want_g) =
                with_num_threads(1, || value_and_grad(&x, &w, |v| unfused(v, scale)));
            for threads in [1, 2, 3, 8] {
                let (y, g) = with_num_threads(threads, || {
                    value_and_grad(&x, &w, |v| F::causal_softmax(v, scale))
                });
                assert_eq!(bits(&y), bits(&want_y), "value {shape:?} {threads} threads");
                assert_eq!(bits(&g), bits(&want_g), "grad {shape:?} {threads} threads");
            }
        }
    }
}

#[test]
fn gradcheck_f64() {
    let x = vals(&[2, 5, 5], 3, DType::F64);
    gradcheck(|v| F::causal_softmax(&v[0], 0.6), &[x], 1e-6, 1e-6).unwrap();
    let x = vals(&[4, 6], 5, DType::F64);
    gradcheck(|v| F::causal_softmax(&v[0], -1.3), &[x], 1e-6, 1e-6).unwrap();
}

#[test]
fn bad_input_is_an_error() {
    let v = Var::new(Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap(), true);
    assert!(F::causal_softmax(&v, 1.0).is_err());
}
