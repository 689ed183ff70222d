//! `F.layer_norm` forward and backward split their rows among threads (and the weight and bias
//! gradients by columns, each column added in row order): every output's bits are the one-thread
//! run's at 1, 2, 3 and 8 threads, f32 and f64, with and without weight and bias, for row
//! counts that split unevenly, and with gradients of another dtype than the input's.

use lockstep_nn::Var;
use lockstep_nn::functional::layer_norm;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 3.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u64, dtype: DType) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(values(n, seed), shape)
        .unwrap()
        .to_dtype(dtype)
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_f64_vec().iter().map(|v| v.to_bits()).collect()
}

/// The output, the input's gradient and (when present) the weight's and bias's gradients.
fn run(rows: usize, l: usize, dtype: DType, affine: (bool, bool)) -> Vec<Vec<u64>> {
    let x = Var::new(tensor(&[rows, l], 1, dtype), true);
    let w = affine.0.then(|| Var::new(tensor(&[l], 2, dtype), true));
    let b = affine.1.then(|| Var::new(tensor(&[l], 3, dtype), true));
    let y = layer_norm(&x, &[l], w.as_ref(), b.as_ref(), 1e-5).unwrap();
    // A gradient that is not all ones, so that every term of the backward matters.
    let g = Var::new(tensor(&[rows, l], 4, dtype), false);
    y.mul(&g).unwrap().sum().unwrap().backward().unwrap();
    let mut out = vec![bits(&y.data()), bits(&x.grad().unwrap())];
    out.extend(w.map(|w| bits(&w.grad().unwrap())));
    out.extend(b.map(|b| bits(&b.grad().unwrap())));
    out
}

#[test]
fn layer_norm_gives_the_one_thread_bits_at_every_thread_count() {
    // 300 × 64 and 257 × 65 are above the split limit (16,384 elements), 5 × 7 below it.
    for (rows, l) in [(300, 64), (257, 65), (5, 7)] {
        for dtype in [DType::F32, DType::F64] {
            for affine in [(true, true), (true, false), (false, true), (false, false)] {
                let want = with_num_threads(1, || run(rows, l, dtype, affine));
                for threads in [2, 3, 8] {
                    let got = with_num_threads(threads, || run(rows, l, dtype, affine));
                    assert!(
                        got == want,
                        "{rows} x {l} {dtype:?} {affine:?} at {threads} threads"
                    );
                }
            }
        }
    }
}
