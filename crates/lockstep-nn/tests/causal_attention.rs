//! `F::causal_self_attention` (the gpt's attention from the fused q, k, v projection as one
//! op): its value and its gradient have the bits of the composed graph (`chunk`, heads by
//! `reshape`/`transpose`, `matmul`, `causal_softmax`, `Dropout`, `matmul`, heads merged) at
//! 1, 2, 3 and 8 threads, with and without dropout, with the default generator's masks and
//! with per-sample keyed masks (run under `LOCKSTEP_ISA=avx2` and `portable` too); its
//! gradient passes gradcheck; bad input is an error.

use lockstep_nn::functional as F;
use lockstep_nn::gradcheck::gradcheck;
use lockstep_nn::layers::Dropout;
use lockstep_nn::rng::{SampleKeys, with_dropout_generator, with_sample_keys};
use lockstep_nn::{Forward, Var};
use lockstep_rng::Generator;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// Values with signs and a few large magnitudes, from a fixed integer hash.
fn vals(shape: &[usize], salt: u64, dt: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n as u64)
        .map(|i| {
            let h = (i.wrapping_add(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64;
            (h / (1u64 << 24) as f64 - 0.5) * if i % 13 == 0 { 6.0 } else { 2.0 }
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap().to_dtype(dt)
}

fn bits(t: &Tensor) -> Vec<u64> {
    let v = t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
    v.iter().map(|x| x.to_bits()).collect()
}

/// nanoGPT's `CausalSelfAttention.forward` after `c_attn`, op by op.
fn composed(qkv: &Var, nh: usize, p: f64, training: bool) -> lockstep_nn::Result<Var> {
    let (b, t, c3) = (qkv.shape()[0], qkv.shape()[1], qkv.shape()[2]);
    let (bi, ti, ci, nhi) = (b as isize, t as isize, (c3 / 3) as isize, nh as isize);
    let hd = (c3 / 3 / nh) as isize;
    let parts = qkv.chunk(3, 2)?;
    let heads = |z: &Var| z.reshape(&[bi, ti, nhi, hd])?.transpose(1, 2);
    let (q, k, v) = (heads(&parts[0])?, heads(&parts[1])?, heads(&parts[2])?);
    let att = F::causal_softmax(&q.matmul(&k.transpose(-2, -1)?)?, 1.0 / (hd as f64).sqrt())?;
    let mut drop = Dropout::new(p)?;
    lockstep_nn::Module::train(&mut drop, training);
    let att = drop.forward(&att)?;
    att.matmul(&v)?.transpose(1, 2)?.reshape(&[bi, ti, ci])
}

fn fused(qkv: &Var, nh: usize, p: f64, training: bool) -> lockstep_nn::Result<Var> {
    let hd = qkv.shape()[2] / 3 / nh;
    F::causal_self_attention(qkv, nh, 1.0 / (hd as f64).sqrt(), p, training)
}

type Attn = fn(&Var, usize, f64, bool) -> lockstep_nn::Result<Var>;

/// Value, gradient and the dropout generator's next draw after one forward and backward.
fn run(
    f: Attn,
    x: &Tensor,
    w: &Tensor,
    nh: usize,
    p: f64,
    training: bool,
    keys: bool,
) -> (Tensor, Tensor, u64) {
    let v = Var::new(x.clone(), true);
    let forward = || {
        let y = f(&v, nh, p, training).unwrap();
        y.backward_with(w).unwrap();
        y.data()
    };
    let (y, mut g) = with_dropout_generator(Generator::with_seed(7), || {
        if keys {
            with_sample_keys(
                SampleKeys::new(3, 1, (0..x.shape()[0] as u64).collect()),
                forward,
            )
        } else {
            forward()
        }
    });
    (y, v.grad().unwrap(), g.next_u64())
}

#[test]
fn same_bits_as_the_composed_graph_at_1_2_3_8_threads() {
    for dt in [DType::F32, DType::F64] {
        // The last shape has more token rows (120) than one piece of the heads' merge (64).
        for (shape, nh) in [
            ([2, 5, 24], 2),
            ([3, 17, 48], 4),
            ([1, 64, 96], 4),
            ([3, 40, 24], 2),
        ] {
            let x = vals(&shape, 11, dt);
            let w = vals(&[shape[0], shape[1], shape[2] / 3], 29, dt);
            for (p, training, keys) in [
                (0.0, true, false),
                (0.3, true, false),
                (0.3, false, false),
                (0.25, true, true),
            ] {
                let want = with_num_threads(1, || run(composed, &x, &w, nh, p, training, keys));
                for threads in [1, 2, 3, 8] {
                    let got =
                        with_num_threads(threads, || run(fused, &x, &w, nh, p, training, keys));
                    let what = format!(
                        "{dt:?} {shape:?} p {p} training {training} keys {keys} {threads} threads"
                    );
                    assert_eq!(bits(&got.0), bits(&want.0), "value {what}");
                    assert_eq!(bits(&got.1), bits(&want.1), "grad {what}");
                    assert_eq!(got.2, want.2, "the generator's state after {what}");
                }
            }
        }
    }
}

#[test]
fn a_zero_gradient_comes_back_positive() {
    // Row 0 of the softmax is [1, 0, …]: its scores' gradient is zero, so is q's row 0; a
    // negative upstream gradient makes some of those zeros -0.0 before the merge.
    let x = vals(&[1, 4, 12], 5, DType::F32);
    let w = vals(&[1, 4, 4], 9, DType::F32).neg().unwrap();
    let want = run(composed, &x, &w, 2, 0.0, true, false);
    let got = run(fused, &x, &w, 2, 0.0, true, false);
    assert_eq!(bits(&got.1), bits(&want.1));
    let g = got.1.to_vec::<f32>().unwrap();
    assert!(g.iter().all(|z| *z != 0.0 || z.is_sign_positive()));
}

#[test]
fn gradcheck_f64() {
    let x = vals(&[2, 4, 12], 3, DType::F64);
    gradcheck(|v| fused(&v[0], 2, 0.0, true), &[x], 1e-6, 1e-6).unwrap();
}

#[test]
fn bad_input_is_an_error() {
    let v = Var::new(vals(&[2, 4, 12], 1, DType::F32), true);
    let e = F::causal_self_attention(&v, 5, 1.0, 0.0, true).unwrap_err();
    assert!(e.to_string().contains("causal_self_attention"), "{e}");
    assert!(F::causal_self_attention(&v, 0, 1.0, 0.0, true).is_err());
    let v2 = Var::new(vals(&[4, 12], 1, DType::F32), true);
    assert!(F::causal_self_attention(&v2, 2, 1.0, 0.0, true).is_err());
    let e = F::causal_self_attention(&v, 2, 1.0, 1.5, true).unwrap_err();
    assert!(e.to_string().contains("dropout"), "{e}");
    // The mask helper itself: a probability outside [0, 1] and a shape whose element count
    // overflows are errors, not panics.
    let e = lockstep_nn::rng::dropout_mask_like(&[2, 2], DType::F32, -0.5, true).unwrap_err();
    assert!(e.to_string().contains("between 0 and 1"), "{e}");
    let e =
        lockstep_nn::rng::dropout_mask_like(&[usize::MAX, 3], DType::F32, 0.5, true).unwrap_err();
    assert!(e.to_string().contains("shape"), "{e}");
    let i = Var::constant(Tensor::from_vec(vec![1i64; 24], &[1, 2, 12]).unwrap());
    assert!(F::causal_self_attention(&i, 2, 1.0, 0.0, true).is_err());
}
