//! `functional::batch_norm`'s vector kernels against the scalar formulas they replaced: the
//! same bits for the output, every gradient and the running statistics, on random and special
//! inputs (NaN, ±0, ±∞, ties), for shapes with and without vector tails, on every instruction
//! set this CPU runs and at 1, 2, 3 and 8 threads.

mod common;

use lockstep_nn::Var;
use lockstep_nn::functional as F;
use lockstep_tensor::isa::{Isa, set_isa};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Element, Tensor};

/// The reference: the loops `batch_norm` ran before its kernels, one serial f64 chain per
/// channel in index order, every formula written out.
struct Reference {
    y: Vec<f64>,
    gx: Vec<f64>,
    gw: Vec<f64>,
    gb: Vec<f64>,
    running_mean: Vec<f64>,
    running_var: Vec<f64>,
}

#[allow(clippy::too_many_arguments)]
fn reference<T: Element>(
    xs: &[T],
    gs: &[T],
    shape: &[usize],
    w: &[T],
    b: &[T],
    rm: &[T],
    rv: &[T],
    training: bool,
    momentum: f64,
    eps: f64,
) -> Reference {
    let (n, c) = (shape[0], shape[1]);
    let s: usize = shape[2..].iter().product();
    let m = n * s;
    let mf = m as f64;
    let narrow = T::DTYPE == DType::F32;
    let chain = |ch: usize, term: &dyn Fn(usize) -> f64| {
        let mut a = 0.0f64;
        for i in 0..n {
            for k in (i * c + ch) * s..(i * c + ch + 1) * s {
                a += term(k);
            }
        }
        a
    };
    let (mut mean, mut var_sum) = (vec![0.0; c], vec![0.0; c]);
    for ch in 0..c {
        mean[ch] = chain(ch, &|k| xs[k].to_f64()) / mf;
        let mu = mean[ch];
        var_sum[ch] = chain(ch, &|k| {
            let d = xs[k].to_f64() - mu;
            d * d
        });
    }
    let (mut running_mean, mut running_var): (Vec<f64>, Vec<f64>) = (
        rm.iter().map(|v| v.to_f64()).collect(),
        rv.iter().map(|v| v.to_f64()).collect(),
    );
    if training {
        for ch in 0..c {
            if narrow {
                let mo = momentum as f32;
                let (r, v) = (rm[ch].to_f64() as f32, rv[ch].to_f64() as f32);
                running_mean[ch] = f64::from(mo * mean[ch] as f32 + (1.0 - mo) * r);
                let unbiased = f64::from(var_sum[ch] as f32) / (mf - 1.0);
                running_var[ch] =
                    f64::from((f64::from(mo) * unbiased + f64::from((1.0 - mo) * v)) as f32);
            } else {
                running_mean[ch] = momentum * mean[ch] + (1.0 - momentum) * rm[ch].to_f64();
                running_var[ch] =
                    momentum * (var_sum[ch] / (mf - 1.0)) + (1.0 - momentum) * rv[ch].to_f64();
            }
        }
    }
    let (mean, var): (Vec<f64>, Vec<f64>) = if training {
        (mean, var_sum.iter().map(|&v| v / mf).collect())
    } else {
        (
            rm.iter().map(|v| v.to_f64()).collect(),
            rv.iter().map(|v| v.to_f64()).collect(),
        )
    };
    let invstd: Vec<f64> = var.iter().map(|&v| 1.0 / (v + eps).sqrt()).collect();
    let round = |v: f64| T::from_f64(v).to_f64();
    let mut y = vec![0.0; xs.len()];
    for k in 0..xs.len() {
        let ch = (k / s) % c;
        let xhat = (xs[k].to_f64() - mean[ch]) * invstd[ch];
        y[k] = round(xhat * w[ch].to_f64() + b[ch].to_f64());
    }
    let (mut gb, mut gw) = (vec![0.0; c], vec![0.0; c]);
    for ch in 0..c {
        gb[ch] = chain(ch, &|k| gs[k].to_f64());
        gw[ch] = chain(ch, &|k| {
            gs[k].to_f64() * ((xs[k].to_f64() - mean[ch]) * invstd[ch])
        });
    }
    let mut gx = vec![0.0; xs.len()];
    for k in 0..xs.len() {
        let ch = (k / s) % c;
        let (mu, is, wc) = (mean[ch], invstd[ch], w[ch].to_f64());
        gx[k] = if training {
            let scale = wc * is / mf;
            let xhat = (xs[k].to_f64() - mu) * is;
            round(scale * (mf * gs[k].to_f64() - gb[ch] - xhat * gw[ch]))
        } else {
            round(gs[k].to_f64() * wc * is)
        };
    }
    Reference {
        y,
        gx,
        gw: gw.into_iter().map(round).collect(),
        gb: gb.into_iter().map(round).collect(),
        running_mean,
        running_var,
    }
}

/// A reproducible stream of values in [−2, 2), with every `special`-th value taken from a list
/// of special ones (NaN, ±0, ±∞, repeated values) when `special > 0`.
fn values(len: usize, seed: u64, special: usize) -> Vec<f64> {
    let mut z = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let specials = [
        f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        -f64::INFINITY,
        1.5,
        1.5,
        -0.0,
    ];
    (0..len)
        .map(|i| {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            if special > 0 && i % special == special - 1 {
                specials[(z % specials.len() as u64) as usize]
            } else {
                (z >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
            }
        })
        .collect()
}

fn tensor<T: Element>(v: &[f64], shape: &[usize]) -> (Vec<T>, Tensor) {
    let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
    (t.clone(), Tensor::from_vec(t, shape).unwrap())
}

/// The bits of `v`, every NaN as one: which NaN an IEEE operation returns when both operands
/// are NaN (their signs) is the compiler's choice (LLVM may swap a product's operands), so
/// neither the old loops nor the kernels fix it.
fn bits(v: &[f64]) -> Vec<u64> {
    v.iter()
        .map(|x| if x.is_nan() { f64::NAN } else { *x }.to_bits())
        .collect()
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

/// Runs `batch_norm` on one case and compares every output with [`reference`].
fn check_case<T: Element>(shape: &[usize], seed: u64, special: usize, training: bool) {
    let c = shape[1];
    let len: usize = shape.iter().product();
    let (xs, xt) = tensor::<T>(&values(len, seed, special), shape);
    let (gs, gt) = tensor::<T>(&values(len, seed + 1, special), shape);
    let (w, wt) = tensor::<T>(&values(c, seed + 2, 0), &[c]);
    let (b, bt) = tensor::<T>(&values(c, seed + 3, 0), &[c]);
    let (rm, rmt) = tensor::<T>(&values(c, seed + 4, 0), &[c]);
    let rv_vals: Vec<f64> = values(c, seed + 5, 0)
        .iter()
        .map(|v| v.abs() + 0.1)
        .collect();
    let (rv, rvt) = tensor::<T>(&rv_vals, &[c]);
    let want = reference(&xs, &gs, shape, &w, &b, &rm, &rv, training, 0.1, 1e-5);
    for threads in [1, 2, 3, 8] {
        with_num_threads(threads, || {
            let x = Var::new(xt.clone(), true);
            let (wv, bv) = (Var::new(wt.clone(), true), Var::new(bt.clone(), true));
            let (rmv, rvv) = (Var::constant(rmt.clone()), Var::constant(rvt.clone()));
            let y = F::batch_norm(
                &x,
                Some(&rmv),
                Some(&rvv),
                Some(&wv),
                Some(&bv),
                training,
                0.1,
                1e-5,
            )
            .unwrap();
            y.backward_with(&gt).unwrap();
            let what = format!(
                "{:?} shape {shape:?} seed {seed} special {special} training {training} threads {threads} isa {}",
                T::DTYPE,
                Isa::best().name()
            );
            assert_eq!(bits(&as_f64(&y.data())), bits(&want.y), "y: {what}");
            assert_eq!(
                bits(&as_f64(&x.grad().unwrap())),
                bits(&want.gx),
                "gx: {what}"
            );
            assert_eq!(
                bits(&as_f64(&wv.grad().unwrap())),
                bits(&want.gw),
                "gw: {what}"
            );
            assert_eq!(
                bits(&as_f64(&bv.grad().unwrap())),
                bits(&want.gb),
                "gb: {what}"
            );
            assert_eq!(
                bits(&as_f64(&rmv.data())),
                bits(&want.running_mean),
                "running mean: {what}"
            );
            assert_eq!(
                bits(&as_f64(&rvv.data())),
                bits(&want.running_var),
                "running var: {what}"
            );
        });
    }
}

const SHAPES: &[&[usize]] = &[
    // The cnn model's BatchNorm2d(16) (large enough to split over threads).
    &[64, 16, 8, 8],
    // Channel remainders (9, 17) and position tails (35, 11 values per plane).
    &[3, 9, 5, 7],
    &[5, 17, 11],
    // Planes shorter than a vector block, one value per plane (BatchNorm1d).
    &[4, 8, 3],
    &[6, 8],
    &[7, 3, 2, 2],
    // Large, with a tail, split over threads.
    &[33, 24, 9, 13],
];

#[test]
fn batch_norm_matches_the_scalar_formulas() {
    let _turn = common::isa_turn();
    // This test changes the process-wide ISA; the others wait for their turn (`isa_turn`),
    // so each runs on the path it means to check.
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.available()).collect();
    for isa in isas {
        set_isa(Some(isa)).unwrap();
        for (k, shape) in SHAPES.iter().enumerate() {
            for training in [true, false] {
                for special in [0, 7, 2] {
                    let seed = 1000 + 10 * k as u64 + special as u64;
                    check_case::<f32>(shape, seed, special, training);
                    check_case::<f64>(shape, seed, special, training);
                }
            }
        }
    }
    set_isa(None).unwrap();
}

/// All-equal inputs (zero variance, every deviation ±0) and −0 everywhere.
#[test]
fn batch_norm_constant_and_negative_zero_inputs() {
    let _turn = common::isa_turn();
    for v in [0.0, -0.0, 1.25] {
        for shape in [&[16usize, 16, 8, 8][..], &[3, 9, 5]] {
            let len: usize = shape.iter().product();
            let c = shape[1];
            let xs = vec![v as f32; len];
            let gs = vec![-0.0f32; len];
            let w = vec![1.0f32; c];
            let b = vec![-0.0f32; c];
            let rm = vec![0.0f32; c];
            let rv = vec![1.0f32; c];
            let want = reference(&xs, &gs, shape, &w, &b, &rm, &rv, true, 0.1, 1e-5);
            for threads in [1, 2, 3, 8] {
                with_num_threads(threads, || {
                    let x = Var::new(Tensor::from_vec(xs.clone(), shape).unwrap(), true);
                    let wv = Var::new(Tensor::from_vec(w.clone(), &[c]).unwrap(), true);
                    let bv = Var::new(Tensor::from_vec(b.clone(), &[c]).unwrap(), true);
                    let y = F::batch_norm(&x, None, None, Some(&wv), Some(&bv), true, 0.1, 1e-5)
                        .unwrap();
                    y.backward_with(&Tensor::from_vec(gs.clone(), shape).unwrap())
                        .unwrap();
                    assert_eq!(bits(&as_f64(&y.data())), bits(&want.y), "{v} {shape:?}");
                    assert_eq!(bits(&as_f64(&x.grad().unwrap())), bits(&want.gx));
                    assert_eq!(bits(&as_f64(&wv.grad().unwrap())), bits(&want.gw));
                    assert_eq!(bits(&as_f64(&bv.grad().unwrap())), bits(&want.gb));
                });
            }
        }
    }
}
