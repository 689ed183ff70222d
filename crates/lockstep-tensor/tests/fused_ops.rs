//! The fused ops of issue 27's examples against the op compositions they replace, bit for bit:
//! `leaky_relu` and `leaky_relu_backward` against `where(x > 0, x, x·s)`, on values with NaN,
//! ±0, ±∞ and subnormals, dense (serial and split into chunks) and as views, in f32 and f64,
//! on every instruction set this CPU runs and at 1, 2, 3 and 8 threads.

mod common;

use lockstep_tensor::isa::{Isa, set_isa};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// `n` values: specials every few elements, the rest spread over both signs.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let r = Tensor::randn(
        &[n],
        DType::F64,
        Some(&mut lockstep_rng::Generator::with_seed(seed)),
    )
    .unwrap()
    .to_vec::<f64>()
    .unwrap();
    r.iter()
        .enumerate()
        .map(|(i, &v)| match i % 13 {
            0 => f64::NAN,
            1 => -0.0,
            2 => 0.0,
            3 => f64::INFINITY,
            4 => f64::NEG_INFINITY,
            5 => -1e-310,
            _ => v * 3.0,
        })
        .collect()
}

fn tensor(n: usize, seed: u64, dtype: DType) -> Tensor {
    Tensor::from_vec(values(n, seed), &[n])
        .unwrap()
        .to_dtype(dtype)
}

fn bits(t: &Tensor) -> Vec<u64> {
    let t = t.to_dtype(DType::F64);
    t.to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// `f()` on each instruction set this CPU runs and at 1, 2, 3 and 8 threads, each result's
/// bits equal to `want`'s.
fn everywhere(want: &[u64], f: impl Fn() -> Tensor) {
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        for threads in [1, 2, 3, 8] {
            let got = with_num_threads(threads, &f);
            assert!(bits(&got) == want, "{isa:?} at {threads} threads");
        }
    }
    set_isa(None).unwrap();
}

#[test]
fn leaky_relu_is_the_bits_of_its_composition() {
    let _turn = common::isa_turn();
    let zero = |d| Tensor::zeros(&[], d).unwrap();
    for dtype in [DType::F32, DType::F64] {
        // 70,000 elements: past the serial limit, so chunks run on the pool too.
        for n in [1, 37, 70_000] {
            let x = tensor(n, 1, dtype);
            let g = tensor(n, 2, dtype);
            for s in [0.2, 0.01, -1.5] {
                let pos = x.gt(&zero(dtype)).unwrap();
                let want = Tensor::where_(&pos, &x, &x.mul_scalar(s).unwrap()).unwrap();
                everywhere(&bits(&want), || x.leaky_relu(s).unwrap());
                let want = Tensor::where_(&pos, &g, &g.mul_scalar(s).unwrap()).unwrap();
                everywhere(&bits(&want), || {
                    Tensor::leaky_relu_backward(&g, &x, s).unwrap()
                });
            }
        }
    }
}

#[test]
fn leaky_relu_reads_views_and_broadcasts() {
    let _turn = common::isa_turn();
    let x = tensor(48, 3, DType::F32).reshape(&[4, 12]).unwrap();
    let t = x.transpose(0, 1).unwrap();
    let want = t.contiguous().leaky_relu(0.2).unwrap();
    assert_eq!(bits(&t.leaky_relu(0.2).unwrap()), bits(&want));
    // A gradient broadcast against the input (an expanded row).
    let g = tensor(12, 4, DType::F32).reshape(&[1, 12]).unwrap();
    let full = g.expand(&[4, 12]).unwrap().contiguous();
    let want = Tensor::leaky_relu_backward(&full, &x, 0.2).unwrap();
    let got = Tensor::leaky_relu_backward(&g, &x, 0.2).unwrap();
    assert_eq!(got.shape(), &[4, 12]);
    assert_eq!(bits(&got), bits(&want));
}

#[test]
fn leaky_relu_refuses_non_float_dtypes() {
    let _turn = common::isa_turn();
    let i = Tensor::from_vec(vec![1i64, -2], &[2]).unwrap();
    let e = i.leaky_relu(0.2).unwrap_err().to_string();
    assert!(e.contains("leaky_relu"), "{e}");
    let f = Tensor::from_vec(vec![1f32, -2.0], &[2]).unwrap();
    let e = Tensor::leaky_relu_backward(&f, &f.to_dtype(DType::F64), 0.2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("leaky_relu_backward"), "{e}");
}
