//! Reductions and indexing ops: references in f64, thread invariance of every deterministic
//! kernel at 1, 2, 3 and 8 threads, the determinism switch, bad input → `Err`, and golden
//! values from real PyTorch (`tools/golden_tensor_ops.py`).

use lockstep_tensor::deterministic::{allow_nondeterministic, scope};
use lockstep_tensor::ops::index::{
    BINCOUNT, BagMode, EMBEDDING_BACKWARD, HISTC, INDEX_ADD, INDEX_PUT_ACCUMULATE, SCATTER_ADD,
};
use lockstep_tensor::ops::reduce::{LOG_SOFTMAX, SOFTMAX};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Error, Tensor};
use proptest::prelude::*;
mod common;
use common::Mix;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Helpers.

fn randn(seed: u64, shape: &[usize], dt: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let mut m = Mix(seed);
    let v: Vec<f64> = (0..n).map(|_| m.f()).collect();
    match dt {
        DType::F32 => Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape),
        _ => Tensor::from_vec(v, shape),
    }
    .unwrap()
}

fn randi(seed: u64, shape: &[usize], hi: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let mut m = Mix(seed);
    Tensor::from_vec((0..n).map(|_| m.below(hi)).collect::<Vec<_>>(), shape).unwrap()
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits() as u64)
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .map(|&x| x as u64)
            .collect(),
        _ => t.to_f64_vec().iter().map(|x| x.to_bits()).collect(),
    }
}

/// Runs `f` in deterministic mode at 1, 2, 3 and 8 threads; asserts identical shapes and bits.
fn thread_invariant(what: &str, f: impl Fn() -> Vec<Tensor>) -> Vec<Tensor> {
    let r = scope(true, false, || with_num_threads(1, &f));
    for t in [2, 3, 8] {
        let o = scope(true, false, || with_num_threads(t, &f));
        assert_eq!(r.len(), o.len());
        for (a, b) in r.iter().zip(&o) {
            assert_eq!(a.shape(), b.shape(), "{what}: shape at {t} threads");
            assert!(bits(a) == bits(b), "{what}: bits differ at {t} threads");
        }
    }
    r
}

fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// `[outer, n, inner]` around `d`.
fn geom(shape: &[usize], d: usize) -> (usize, usize, usize) {
    (
        shape[..d].iter().product(),
        shape[d],
        shape[d + 1..].iter().product(),
    )
}

/// The lines of `x` along `d`, in output order.
fn lines(x: &[f64], shape: &[usize], d: usize) -> Vec<Vec<f64>> {
    let (o, n, i) = geom(shape, d);
    let mut v = Vec::new();
    for a in 0..o {
        for c in 0..i {
            v.push((0..n).map(|k| x[(a * n + k) * i + c]).collect());
        }
    }
    v
}

/// Writes per-line outputs back into `x`'s layout.
fn unlines(ls: &[Vec<f64>], shape: &[usize], d: usize) -> Vec<f64> {
    let (o, n, i) = geom(shape, d);
    let mut out = vec![0.0; o * n * i];
    for a in 0..o {
        for c in 0..i {
            for k in 0..n {
                out[(a * n + k) * i + c] = ls[a * i + c][k];
            }
        }
    }
    out
}

const SHAPES: &[&[usize]] = &[
    &[0],
    &[1],
    &[17],
    &[3, 1, 5],
    &[2, 33, 3],
    &[3, 20_001],
    &[20_003, 2],
    &[1, 0, 4],
];

// ---------------------------------------------------------------------------------------------
// Reductions.

/// f32 `var`/`std` accumulate in f64 and round once (as PyTorch's `double` accumulation for
/// `float`): on lines longer than one deterministic piece (offset data, where an f32 sum of
/// squares loses several ulps), every result is within one f32 ulp of the f64 two-pass value,
/// and the bits are the same at 1, 2, 3 and 8 threads.
#[test]
fn f32_var_std_accumulate_in_f64_and_are_thread_invariant() {
    let (rows, n) = (3, 3 * (1 << 14) + 17);
    let mut m = Mix(77);
    let v: Vec<f32> = (0..rows * n).map(|_| (m.f() + 100.0) as f32).collect();
    let x = Tensor::from_vec(v.clone(), &[rows, n]).unwrap();
    let flat = Tensor::from_vec(v.clone(), &[rows * n]).unwrap();
    let xt = x.transpose(0, 1).unwrap();
    let r = thread_invariant("f32 var/std f64 accumulation", || {
        vec![
            x.var_dim(1, 1.0, false).unwrap(),
            x.std_dim(1, 0.0, false).unwrap(),
            xt.var_dim(0, 1.0, false).unwrap(),
            flat.var(1.0).unwrap(),
            flat.std(1.0).unwrap(),
        ]
    });
    let var64 = |l: &[f32], c: f64| {
        let mean = l.iter().map(|&a| a as f64).sum::<f64>() / l.len() as f64;
        let ss: f64 = l
            .iter()
            .map(|&a| (a as f64 - mean) * (a as f64 - mean))
            .sum();
        ss / (l.len() as f64 - c)
    };
    let within_ulp = |what: &str, got: f32, want: f64| {
        let ulp = (want as f32).abs() * f32::EPSILON;
        assert!(
            (got as f64 - want).abs() <= ulp as f64,
            "{what}: {got} vs f64 {want}"
        );
    };
    for row in 0..rows {
        let l = &v[row * n..(row + 1) * n];
        within_ulp("var_dim", r[0].to_vec::<f32>().unwrap()[row], var64(l, 1.0));
        within_ulp(
            "std_dim",
            r[1].to_vec::<f32>().unwrap()[row],
            var64(l, 0.0).sqrt(),
        );
        within_ulp(
            "var_dim (strided)",
            r[2].to_vec::<f32>().unwrap()[row],
            var64(l, 1.0),
        );
    }
    within_ulp("var", r[3].to_vec::<f32>().unwrap()[0], var64(&v, 1.0));
    within_ulp(
        "std",
        r[4].to_vec::<f32>().unwrap()[0],
        var64(&v, 1.0).sqrt(),
    );
}

#[test]
fn reductions_match_f64_reference_and_are_thread_invariant() {
    for dt in [DType::F32, DType::F64] {
        let tol = if dt == DType::F32 { 2e-5 } else { 1e-12 };
        for (s, &shape) in SHAPES.iter().enumerate() {
            let x = randn(s as u64 + 1, shape, dt);
            let xv = x.to_f64_vec();
            for d in 0..shape.len() {
                let di = d as isize;
                let ls = lines(&xv, shape, d);
                let what = format!("{dt:?} {shape:?} dim {d}");
                // mean, var, std, logsumexp.
                let r = thread_invariant(&what, || {
                    vec![
                        x.mean_dim(di, false).unwrap(),
                        x.var_dim(di, 1.0, false).unwrap(),
                        x.std_dim(di, 0.0, true).unwrap(),
                        x.logsumexp(di, false).unwrap(),
                        x.softmax(di).unwrap(),
                        x.log_softmax(di).unwrap(),
                        x.cumsum(di).unwrap(),
                    ]
                });
                let mean: Vec<f64> = ls
                    .iter()
                    .map(|l| l.iter().sum::<f64>() / l.len() as f64)
                    .collect();
                close(&format!("{what} mean"), &r[0].to_f64_vec(), &mean, tol);
                let var = |l: &Vec<f64>, c: f64| {
                    let m = l.iter().sum::<f64>() / l.len() as f64;
                    l.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (l.len() as f64 - c).max(0.0)
                };
                let v1: Vec<f64> = ls.iter().map(|l| var(l, 1.0)).collect();
                close(&format!("{what} var"), &r[1].to_f64_vec(), &v1, tol * 10.0);
                let s0: Vec<f64> = ls.iter().map(|l| var(l, 0.0).sqrt()).collect();
                close(&format!("{what} std"), &r[2].to_f64_vec(), &s0, tol * 10.0);
                let lse: Vec<f64> = ls
                    .iter()
                    .map(|l| l.iter().map(|v| v.exp()).sum::<f64>().ln())
                    .collect();
                close(&format!("{what} logsumexp"), &r[3].to_f64_vec(), &lse, tol);
                let sm: Vec<Vec<f64>> = ls
                    .iter()
                    .map(|l| {
                        let z: f64 = l.iter().map(|v| v.exp()).sum();
                        l.iter().map(|v| v.exp() / z).collect()
                    })
                    .collect();
                close(
                    &format!("{what} softmax"),
                    &r[4].to_f64_vec(),
                    &unlines(&sm, shape, d),
                    tol,
                );
                let lsm: Vec<Vec<f64>> = ls
                    .iter()
                    .zip(&lse)
                    .map(|(l, z)| l.iter().map(|v| v - z).collect())
                    .collect();
                close(
                    &format!("{what} log_softmax"),
                    &r[5].to_f64_vec(),
                    &unlines(&lsm, shape, d),
                    tol * 10.0,
                );
                let cs: Vec<Vec<f64>> = ls
                    .iter()
                    .map(|l| {
                        let mut a = 0.0;
                        l.iter()
                            .map(|v| {
                                a += v;
                                a
                            })
                            .collect()
                    })
                    .collect();
                close(
                    &format!("{what} cumsum"),
                    &r[6].to_f64_vec(),
                    &unlines(&cs, shape, d),
                    tol * 50.0,
                );
                // max/min/argmax: exact.
                if shape[d] > 0 {
                    let r = thread_invariant(&what, || {
                        let (v, i) = x.max_dim(di, false).unwrap();
                        let (w, j) = x.min_dim(di, true).unwrap();
                        vec![v, i, w, j, x.argmax(Some(di), false).unwrap()]
                    });
                    let mx: Vec<(f64, i64)> = ls
                        .iter()
                        .map(|l| {
                            let mut b = (l[0], 0);
                            for (k, &v) in l.iter().enumerate() {
                                if v > b.0 {
                                    b = (v, k as i64);
                                }
                            }
                            b
                        })
                        .collect();
                    assert_eq!(
                        r[0].to_f64_vec(),
                        mx.iter().map(|p| p.0).collect::<Vec<_>>()
                    );
                    assert_eq!(
                        r[1].to_vec::<i64>().unwrap(),
                        mx.iter().map(|p| p.1).collect::<Vec<_>>()
                    );
                    assert_eq!(
                        r[4].to_vec::<i64>().unwrap(),
                        mx.iter().map(|p| p.1).collect::<Vec<_>>()
                    );
                } else {
                    assert!(x.max_dim(di, false).is_err());
                }
            }
            // Whole-tensor.
            let r = thread_invariant("whole", || {
                let mut v = vec![x.var(1.0).unwrap(), x.std(0.0).unwrap()];
                if x.numel() > 0 {
                    v.extend([
                        x.max().unwrap(),
                        x.min().unwrap(),
                        x.argmax(None, false).unwrap(),
                    ]);
                }
                v
            });
            if xv.len() > 1 {
                let m = xv.iter().sum::<f64>() / xv.len() as f64;
                let var =
                    xv.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (xv.len() as f64 - 1.0);
                close("var", &r[0].to_f64_vec(), &[var], tol * 10.0);
                let mx = xv.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                assert_eq!(r[2].to_f64_vec(), vec![mx]);
                let am = xv.iter().position(|&v| v == mx).unwrap() as i64;
                assert_eq!(r[4].to_vec::<i64>().unwrap(), vec![am]);
            }
        }
    }
}

#[test]
fn max_ties_nan_and_infinities() {
    let x = Tensor::from_vec(vec![1.0f32, 3.0, 3.0, f32::NAN, 5.0, f32::NAN], &[6]).unwrap();
    let (v, i) = x.max_dim(0, false).unwrap();
    assert!(v.item::<f32>().unwrap().is_nan());
    assert_eq!(i.item::<i64>().unwrap(), 3);
    let y = Tensor::from_vec(vec![1.0f64, 3.0, 3.0, 0.5], &[4]).unwrap();
    assert_eq!(y.argmax(None, false).unwrap().item::<i64>().unwrap(), 1);
    assert_eq!(y.argmin(Some(0), true).unwrap().shape(), &[1]);
    // Long lines (the chunked path): first index on ties, first NaN.
    let mut v = vec![0.0f32; 100_000];
    v[40_000] = 2.0;
    v[90_000] = 2.0;
    let t = Tensor::from_vec(v.clone(), &[100_000]).unwrap();
    assert_eq!(
        t.argmax(None, false).unwrap().item::<i64>().unwrap(),
        40_000
    );
    v[70_000] = f32::NAN;
    v[80_000] = f32::NAN;
    let t = Tensor::from_vec(v, &[100_000]).unwrap();
    assert_eq!(
        t.argmax(None, false).unwrap().item::<i64>().unwrap(),
        70_000
    );
    // logsumexp / softmax with infinities.
    let z = Tensor::from_vec(vec![f32::NEG_INFINITY; 3], &[1, 3]).unwrap();
    assert_eq!(
        z.logsumexp(1, false).unwrap().item::<f32>().unwrap(),
        f32::NEG_INFINITY
    );
    let z = Tensor::from_vec(vec![0.0f32, f32::NEG_INFINITY, 0.0], &[3]).unwrap();
    assert_eq!(
        z.softmax(0).unwrap().to_vec::<f32>().unwrap(),
        vec![0.5, 0.0, 0.5]
    );
    // Large magnitudes do not overflow.
    let z = Tensor::from_vec(vec![1000.0f32, 1000.0], &[2]).unwrap();
    assert_eq!(
        z.softmax(0).unwrap().to_vec::<f32>().unwrap(),
        vec![0.5, 0.5]
    );
    // Integer tensors: dtype errors.
    let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(matches!(i.softmax(0), Err(Error::DType { .. })));
    assert!(matches!(i.var(1.0), Err(Error::DType { .. })));
    assert!(matches!(i.max(), Err(Error::DType { .. })));
    // 0-d tensors.
    let s = Tensor::scalar(2.5f32);
    assert_eq!(s.softmax(0).unwrap().item::<f32>().unwrap(), 1.0);
    assert_eq!(s.cumsum(-1).unwrap().item::<f32>().unwrap(), 2.5);
    assert!(s.softmax(1).is_err());
}

#[test]
fn exp_kernel_is_accurate() {
    // The vectorised f32 exp used by softmax: within 2 ulp of the f64 exp.
    let mut xs: Vec<f32> = (-8600..8872).map(|i| i as f32 * 0.01).collect();
    xs.extend([0.0, -0.0, 1e-8, -1e-8, 88.72, -86.5]);
    let mut out = vec![0.0; xs.len()];
    lockstep_tensor::ops::reduce::exp_f32_slice(&xs, &mut out);
    for (&x, &y) in xs.iter().zip(&out) {
        let want = (x as f64).exp();
        let ulp = (want as f32).to_bits().abs_diff(y.to_bits());
        assert!(ulp <= 2, "exp({x}) = {y}, want {want} ({ulp} ulp)");
    }
    let mut o = [0.0f32; 4];
    lockstep_tensor::ops::reduce::exp_f32_slice(
        &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -200.0],
        &mut o,
    );
    assert!(o[0].is_nan());
    assert_eq!(&o[1..], &[f32::INFINITY, 0.0, 0.0]);
}

// ---------------------------------------------------------------------------------------------
// Indexing: references.

/// Reference index_add along `d`, in f64, source order.
fn ref_index_add(x: &[f64], shape: &[usize], d: usize, idx: &[i64], src: &[f64]) -> Vec<f64> {
    let (o, n, i) = geom(shape, d);
    let m = idx.len();
    let mut out = x.to_vec();
    for a in 0..o {
        for (k, &r) in idx.iter().enumerate() {
            for c in 0..i {
                out[(a * n + r as usize) * i + c] += src[(a * m + k) * i + c];
            }
        }
    }
    out
}

#[test]
fn index_add_and_friends_match_reference_and_threads() {
    // (dest shape, dim, number of indices)
    let cases: &[(&[usize], usize, usize)] = &[
        (&[5, 3], 0, 7),
        (&[100, 64], 0, 3000),
        (&[1000, 17], 0, 2500),
        (&[1, 40], 0, 5000),
        (&[4, 9, 33], 1, 600),
        (&[300, 5], 1, 41),
        (&[3, 0], 0, 10),
        (&[6, 4], 0, 0),
        (&[20_000, 3], 0, 30_000),
        (&[50, 8], 0, 40_000),
        (&[3, 7, 5], 1, 20_000),
    ];
    for dt in [DType::F32, DType::F64] {
        for (ci, &(shape, d, m)) in cases.iter().enumerate() {
            let n = shape[d];
            let x = randn(ci as u64 + 100, shape, dt);
            let mut sshape = shape.to_vec();
            sshape[d] = m;
            let src = randn(ci as u64 + 200, &sshape, dt);
            let idx = randi(ci as u64 + 300, &[m], n.max(1));
            let idx = if n == 0 {
                Tensor::from_vec(Vec::<i64>::new(), &[0]).unwrap()
            } else {
                idx
            };
            if n == 0 && m > 0 {
                continue;
            }
            let what = format!("index_add {dt:?} {shape:?} dim {d} m {m}");
            let r = thread_invariant(&what, || vec![x.index_add(d as isize, &idx, &src).unwrap()]);
            let want = ref_index_add(
                &x.to_f64_vec(),
                shape,
                d,
                &idx.to_vec::<i64>().unwrap(),
                &src.to_f64_vec(),
            );
            let tol = if dt == DType::F32 {
                3e-7 * m as f64
            } else {
                1e-12
            };
            close(&what, &r[0].to_f64_vec(), &want, tol);
            // The nondeterministic kernel agrees within rounding.
            let nd = scope(false, false, || {
                with_num_threads(3, || x.index_add(d as isize, &idx, &src).unwrap())
            });
            close(&format!("{what} nondet"), &nd.to_f64_vec(), &want, tol);
            // The deterministic kernel at 1 thread is the sequential loop: exact in f64 order.
            // (Below 16384 source rows: one block, so exactly the sequential order.)
            if dt == DType::F64 && m < 16_384 {
                let mut seq = x.to_f64_vec();
                let (o, nn, i) = geom(shape, d);
                let (iv, sv) = (idx.to_vec::<i64>().unwrap(), src.to_f64_vec());
                for a in 0..o {
                    for (k, &rr) in iv.iter().enumerate() {
                        for c in 0..i {
                            let p = (a * nn + rr as usize) * i + c;
                            seq[p] += sv[(a * m + k) * i + c];
                        }
                    }
                }
                assert_eq!(
                    bits(&r[0]),
                    seq.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{what}: source order"
                );
            }
            if d == 0 {
                // index_put(accumulate) is index_add along dim 0; embedding_backward too.
                let r2 = thread_invariant(&what, || {
                    vec![x.index_put(std::slice::from_ref(&idx), &src, true).unwrap()]
                });
                assert!(bits(&r2[0]) == bits(&r[0]), "{what}: index_put");
                if shape.len() == 2 {
                    let z = Tensor::zeros(shape, dt).unwrap();
                    let want0 = scope(true, false, || z.index_add(0, &idx, &src).unwrap());
                    let r3 = thread_invariant(&what, || {
                        vec![Tensor::embedding_backward(&src, &idx, n).unwrap()]
                    });
                    assert!(bits(&r3[0]) == bits(&want0), "{what}: embedding_backward");
                }
            }
        }
    }
}

#[test]
fn scatter_add_matches_reference_and_threads() {
    let cases: &[(&[usize], &[usize], usize)] = &[
        // (self shape, index = src shape, dim)
        (&[5, 3], &[9, 3], 0),
        (&[7, 64], &[5000, 64], 0),
        (&[3, 10], &[3, 4000], 1),
        (&[1000, 2], &[40_000, 2], 0),
        (&[2, 5, 40], &[2, 300, 40], 1),
        (&[4], &[0], 0),
    ];
    for dt in [DType::F32, DType::F64] {
        for (ci, &(shape, ishape, d)) in cases.iter().enumerate() {
            let x = randn(ci as u64 + 1, shape, dt);
            let src = randn(ci as u64 + 2, ishape, dt);
            let idx = randi(ci as u64 + 3, ishape, shape[d]);
            let what = format!("scatter_add {dt:?} {shape:?} {ishape:?} dim {d}");
            let r = thread_invariant(&what, || {
                vec![x.scatter_add(d as isize, &idx, &src).unwrap()]
            });
            let (o, n, i) = geom(shape, d);
            let m = ishape[d];
            let (iv, sv) = (idx.to_vec::<i64>().unwrap(), src.to_f64_vec());
            let mut want = x.to_f64_vec();
            for a in 0..o {
                for k in 0..m {
                    for c in 0..i {
                        let p = (a * m + k) * i + c;
                        want[(a * n + iv[p] as usize) * i + c] += sv[p];
                    }
                }
            }
            let tol = if dt == DType::F32 {
                3e-7 * m as f64
            } else {
                1e-12
            };
            close(&what, &r[0].to_f64_vec(), &want, tol);
            let nd = scope(false, false, || {
                with_num_threads(2, || x.scatter_add(d as isize, &idx, &src).unwrap())
            });
            close(&format!("{what} nondet"), &nd.to_f64_vec(), &want, tol);
        }
    }
    // Index smaller than src and self (the general path) equals the fast path on a narrowed src.
    let x = randn(9, &[4, 6], DType::F64);
    let src = randn(10, &[5, 6], DType::F64);
    let idx = Tensor::from_vec(vec![3i64, 0, 3, 1, 1, 2], &[2, 3]).unwrap();
    let r = thread_invariant("scatter general", || {
        vec![x.scatter_add(0, &idx, &src).unwrap()]
    });
    let mut want = x.to_f64_vec();
    let sv = src.to_f64_vec();
    for (p, &k) in [3i64, 0, 3, 1, 1, 2].iter().enumerate() {
        let (row, col) = (p / 3, p % 3);
        want[k as usize * 6 + col] += sv[row * 6 + col];
    }
    assert_eq!(r[0].to_f64_vec(), want);
}

#[test]
fn selection_ops_match_reference() {
    let x = randn(1, &[5, 4, 3], DType::F32);
    let xv = x.to_f64_vec();
    let idx = Tensor::from_vec(vec![3i64, 0, 3], &[3]).unwrap();
    let r = thread_invariant("index_select", || vec![x.index_select(1, &idx).unwrap()]);
    assert_eq!(r[0].shape(), &[5, 3, 3]);
    let got = r[0].to_f64_vec();
    for a in 0..5 {
        for (k, &j) in [3usize, 0, 3].iter().enumerate() {
            for c in 0..3 {
                assert_eq!(got[(a * 3 + k) * 3 + c], xv[(a * 4 + j) * 3 + c]);
            }
        }
    }
    // gather along each dim, index smaller than x outside dim.
    for d in 0..3 {
        let ishape = [4usize, 3, 2];
        let gi = randi(d as u64, &ishape, [5usize, 4, 3][d]);
        let iv = gi.to_vec::<i64>().unwrap();
        let g = x.gather(d as isize, &gi).unwrap();
        assert_eq!(g.shape(), &ishape);
        let gv = g.to_f64_vec();
        for a in 0..4 {
            for b in 0..3 {
                for c in 0..2 {
                    let p = (a * 3 + b) * 2 + c;
                    let mut pos = [a, b, c];
                    pos[d] = iv[p] as usize;
                    assert_eq!(
                        gv[p],
                        xv[(pos[0] * 4 + pos[1]) * 3 + pos[2]],
                        "gather dim {d}"
                    );
                }
            }
        }
    }
    // embedding of a 2-d index.
    let w = randn(2, &[10, 4], DType::F64);
    let ei = Tensor::from_vec(vec![1i64, 9, 0, 1], &[2, 2]).unwrap();
    let e = w.embedding(&ei).unwrap();
    assert_eq!(e.shape(), &[2, 2, 4]);
    assert_eq!(&e.to_f64_vec()[4..8], &w.to_f64_vec()[36..40]);
    // embedding_bag: sum/mean/max with an empty bag.
    let bi = Tensor::from_vec(vec![1i64, 2, 1, 9], &[4]).unwrap();
    let off = Tensor::from_vec(vec![0i64, 3, 3], &[3]).unwrap();
    let wv = w.to_f64_vec();
    let s = w.embedding_bag(&bi, &off, BagMode::Sum).unwrap();
    assert_eq!(s.shape(), &[3, 4]);
    let sv = s.to_f64_vec();
    for c in 0..4 {
        assert_eq!(sv[c], wv[4 + c] + wv[8 + c] + wv[4 + c]);
        assert_eq!(sv[4 + c], 0.0);
        assert_eq!(sv[8 + c], wv[36 + c]);
    }
    let mn = w
        .embedding_bag(&bi, &off, BagMode::Mean)
        .unwrap()
        .to_f64_vec();
    assert!((mn[0] - sv[0] / 3.0).abs() < 1e-15);
    let mx = w
        .embedding_bag(&bi, &off, BagMode::Max)
        .unwrap()
        .to_f64_vec();
    assert_eq!(mx[0], wv[4].max(wv[8]));
}

#[test]
fn index_put_wraps_negative_and_last_write_wins() {
    let x = Tensor::zeros(&[4, 2], DType::F32).unwrap();
    let i = Tensor::from_vec(vec![-1i64, 0, 3], &[3]).unwrap();
    let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let a = x.index_put(std::slice::from_ref(&i), &v, true).unwrap();
    assert_eq!(
        a.to_vec::<f32>().unwrap(),
        vec![3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 6.0, 8.0]
    );
    let b = x.index_put(std::slice::from_ref(&i), &v, false).unwrap();
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        vec![3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 5.0, 6.0]
    );
    // Two index tensors; broadcast scalar values.
    let r = Tensor::from_vec(vec![0i64, 3, 3], &[3]).unwrap();
    let c = Tensor::from_vec(vec![1i64, 0, 0], &[3]).unwrap();
    let s = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
    let o = x.index_put(&[r, c], &s, true).unwrap();
    assert_eq!(
        o.to_vec::<f32>().unwrap(),
        vec![0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 4.0, 0.0]
    );
}

#[test]
fn bincount_and_histc() {
    let x = randi(7, &[200_003], 1000);
    let xv = x.to_vec::<i64>().unwrap();
    let w = randn(8, &[200_003], DType::F32);
    let wf = randn(8, &[200_003], DType::F64);
    let r = thread_invariant("bincount", || {
        vec![
            x.bincount(None, 0).unwrap(),
            x.bincount(Some(&w), 1500).unwrap(),
            x.bincount(Some(&wf), 0).unwrap(),
        ]
    });
    let mut cnt = vec![0i64; 1000];
    let mut sum = vec![0f64; 1500];
    for (&v, &ww) in xv.iter().zip(&w.to_f64_vec()) {
        cnt[v as usize] += 1;
        sum[v as usize] += ww;
    }
    assert_eq!(r[0].to_vec::<i64>().unwrap(), cnt);
    assert_eq!(r[1].dtype(), DType::F32);
    close("bincount weights", &r[1].to_f64_vec(), &sum, 1e-4);
    assert_eq!(r[2].dtype(), DType::F64);
    let mut sum64 = vec![0f64; 1000];
    for (&v, &ww) in xv.iter().zip(&wf.to_f64_vec()) {
        sum64[v as usize] += ww;
    }
    close("bincount weights f64", &r[2].to_f64_vec(), &sum64, 1e-10);
    let nd = with_num_threads(2, || x.bincount(Some(&w), 1500).unwrap());
    close("bincount nondet", &nd.to_f64_vec(), &sum, 1e-4);
    // Small and empty inputs.
    let e = Tensor::from_vec(Vec::<i64>::new(), &[0]).unwrap();
    assert_eq!(
        e.bincount(None, 3).unwrap().to_vec::<i64>().unwrap(),
        vec![0, 0, 0]
    );
    assert_eq!(e.bincount(None, 0).unwrap().numel(), 0);
    // histc.
    let h = randn(11, &[150_001], DType::F32);
    let hv = h.to_vec::<f32>().unwrap();
    let r = thread_invariant("histc", || {
        vec![
            h.histc(13, -1.5, 1.0).unwrap(),
            h.histc(4, 0.0, 0.0).unwrap(),
        ]
    });
    let mut want = vec![0f64; 13];
    for &v in &hv {
        if (-1.5..=1.0).contains(&v) {
            let p = (((v - -1.5) * 13.0 / 2.5) as usize).min(12);
            want[p] += 1.0;
        }
    }
    assert_eq!(r[0].to_f64_vec(), want);
    assert_eq!(r[1].to_f64_vec().iter().sum::<f64>(), 150_001.0);
}

#[test]
fn thread_invariance_on_large_skewed_indices() {
    // Many sources into few rows and into many rows, with a skewed distribution.
    for (n, m, d) in [
        (3usize, 50_000usize, 8usize),
        (40_000, 60_000, 5),
        (7, 3, 300),
    ] {
        let x = randn(1, &[n, d], DType::F32);
        let src = randn(2, &[m, d], DType::F32);
        let mut g = Mix(3);
        let idx: Vec<i64> = (0..m)
            .map(|_| {
                if g.next().is_multiple_of(4) {
                    0
                } else {
                    g.below(n)
                }
            })
            .collect();
        let idx = Tensor::from_vec(idx, &[m]).unwrap();
        thread_invariant("index_add skewed", || {
            vec![x.index_add(0, &idx, &src).unwrap()]
        });
        thread_invariant("embedding_backward", || {
            vec![Tensor::embedding_backward(&src, &idx, n).unwrap()]
        });
    }
}

// ---------------------------------------------------------------------------------------------
// The determinism switch.

#[test]
fn deterministic_mode_picks_the_thread_invariant_kernels() {
    let det = |name: &str, algo: &str| {
        scope(true, false, || {
            let got = match name {
                "index_add" => INDEX_ADD.select().unwrap().imp.algo,
                "scatter_add" => SCATTER_ADD.select().unwrap().imp.algo,
                "index_put" => INDEX_PUT_ACCUMULATE.select().unwrap().imp.algo,
                "embedding_backward" => EMBEDDING_BACKWARD.select().unwrap().imp.algo,
                "bincount" => BINCOUNT.select().unwrap().imp.algo,
                "histc" => HISTC.select().unwrap().imp.algo,
                "softmax" => SOFTMAX.select().unwrap().imp.algo,
                _ => LOG_SOFTMAX.select().unwrap().imp.algo,
            };
            assert_eq!(got, algo);
        })
    };
    det("index_add", "index_add.dest_partitioned");
    det("scatter_add", "scatter_add.dest_partitioned");
    det("index_put", "index_put.dest_partitioned");
    det("embedding_backward", "embedding_backward.dest_partitioned");
    det("bincount", "bincount.fixed_blocks");
    det("histc", "histc.fixed_blocks");
    det("softmax", "softmax.fixed_lanes");
    det("log_softmax", "log_softmax.fixed_lanes");
    // Off: the fast kernels; warn-only with a deterministic kernel: still the deterministic one;
    // allow_nondeterministic: the fast one again.
    scope(false, false, || {
        assert_eq!(
            INDEX_ADD.select().unwrap().imp.algo,
            "index_add.source_parallel"
        )
    });
    scope(true, true, || {
        assert_eq!(
            INDEX_ADD.select().unwrap().imp.algo,
            "index_add.dest_partitioned"
        )
    });
    scope(true, false, || {
        allow_nondeterministic("index_add", || {
            assert_eq!(
                INDEX_ADD.select().unwrap().imp.algo,
                "index_add.source_parallel"
            );
            assert_eq!(
                SCATTER_ADD.select().unwrap().imp.algo,
                "scatter_add.dest_partitioned"
            );
        })
    });
    // Every op of this file runs in deterministic mode (none returns Nondeterministic).
    scope(true, false, || {
        let x = randn(1, &[6, 4], DType::F32);
        let i = Tensor::from_vec(vec![1i64, 0, 1], &[3]).unwrap();
        let s = randn(2, &[3, 4], DType::F32);
        x.index_add(0, &i, &s).unwrap();
        x.index_select(0, &i).unwrap();
        x.gather(0, &Tensor::from_vec(vec![1i64, 0], &[1, 2]).unwrap())
            .unwrap();
        x.scatter_add(0, &Tensor::from_vec(vec![1i64, 0], &[1, 2]).unwrap(), &s)
            .unwrap();
        x.index_put(std::slice::from_ref(&i), &s, true).unwrap();
        x.embedding(&i).unwrap();
        Tensor::embedding_backward(&s, &i, 6).unwrap();
        x.embedding_bag(
            &i,
            &Tensor::from_vec(vec![0i64, 1], &[2]).unwrap(),
            BagMode::Mean,
        )
        .unwrap();
        i.bincount(
            Some(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap()),
            0,
        )
        .unwrap();
        x.histc(5, -1.0, 1.0).unwrap();
        x.softmax(1).unwrap();
        x.log_softmax(0).unwrap();
        x.logsumexp(1, true).unwrap();
        x.var(1.0).unwrap();
        x.std_dim(0, 1.0, false).unwrap();
        x.max_dim(1, false).unwrap();
        x.argmax(None, false).unwrap();
        x.cumsum(0).unwrap();
        x.mean_dim(1, true).unwrap();
    });
}

#[test]
fn an_op_without_a_deterministic_kernel_refuses_warns_or_is_allowed() {
    // The contract every op relies on, shown with an op that has only a nondeterministic
    // kernel (all of this file's ops have a deterministic one).
    use lockstep_tensor::dispatch::{Guarantee, Impl, Op};
    static ONLY_FAST: Op<fn() -> u32> = Op {
        name: "reduce_index_test_only_fast",
        impls: &[Impl {
            algo: "only_fast.atomic",
            guarantee: Guarantee::NotGuaranteed,
            f: || 7,
        }],
    };
    let err = scope(true, false, || ONLY_FAST.select().err()).unwrap();
    assert!(matches!(&err, Error::Nondeterministic { op } if op == "reduce_index_test_only_fast"));
    assert!(err.to_string().contains("reduce_index_test_only_fast"));
    assert_eq!(
        scope(true, true, || (ONLY_FAST.select().unwrap().imp.f)()),
        7
    );
    scope(true, false, || {
        allow_nondeterministic("reduce_index_test_only_fast", || {
            assert!(ONLY_FAST.select().is_ok())
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Bad input: errors, never panics.

#[test]
fn bad_inputs_are_errors() {
    let x = randn(1, &[4, 3], DType::F32);
    let i = Tensor::from_vec(vec![0i64, 4], &[2]).unwrap();
    let s = randn(2, &[2, 3], DType::F32);
    assert!(matches!(
        x.index_add(0, &i, &s),
        Err(Error::IndexOutOfRange {
            index: 4,
            size: 4,
            ..
        })
    ));
    let neg = Tensor::from_vec(vec![0i64, -1], &[2]).unwrap();
    assert!(matches!(
        x.index_add(0, &neg, &s),
        Err(Error::IndexOutOfRange { index: -1, .. })
    ));
    assert!(matches!(
        x.index_select(0, &neg),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert!(matches!(
        x.embedding(&neg),
        Err(Error::IndexOutOfRange { .. })
    ));
    let fi = Tensor::from_vec(vec![0.0f32, 1.0], &[2]).unwrap();
    assert!(matches!(x.index_select(0, &fi), Err(Error::DType { .. })));
    let s64 = randn(2, &[2, 3], DType::F64);
    let ok = Tensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    assert!(matches!(
        x.index_add(0, &ok, &s64),
        Err(Error::DType { .. })
    ));
    assert!(matches!(
        x.index_add(0, &ok, &randn(2, &[2, 4], DType::F32)),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        x.index_add(2, &ok, &s),
        Err(Error::DimOutOfRange { .. })
    ));
    assert!(matches!(
        x.index_add(-3, &ok, &s),
        Err(Error::DimOutOfRange { .. })
    ));
    assert!(
        x.scatter_add(0, &Tensor::from_vec(vec![0i64; 3], &[3]).unwrap(), &s)
            .is_err()
    );
    assert!(
        x.gather(0, &Tensor::from_vec(vec![0i64; 8], &[2, 4]).unwrap())
            .is_err()
    );
    assert!(x.index_put(&[], &s, true).is_err());
    assert!(
        x.index_put(&[ok.clone(), ok.clone(), ok.clone()], &s, true)
            .is_err()
    );
    let l = Tensor::from_vec(vec![-5i64], &[1]).unwrap();
    assert!(matches!(
        x.index_put(&[l], &s, true),
        Err(Error::IndexOutOfRange { .. })
    ));
    assert!(Tensor::embedding_backward(&s, &ok, 1).is_err());
    assert!(
        Tensor::embedding_backward(&s, &Tensor::from_vec(vec![0i64; 3], &[3]).unwrap(), 5).is_err()
    );
    assert!(
        x.embedding_bag(
            &ok,
            &Tensor::from_vec(vec![1i64], &[1]).unwrap(),
            BagMode::Sum
        )
        .is_err()
    );
    assert!(
        x.embedding_bag(
            &ok,
            &Tensor::from_vec(vec![0i64, 3], &[2]).unwrap(),
            BagMode::Sum
        )
        .is_err()
    );
    assert!(neg.bincount(None, 0).is_err());
    assert!(ok.bincount(Some(&randn(1, &[3], DType::F32)), 0).is_err());
    assert!(x.bincount(None, 0).is_err());
    assert!(x.histc(0, 0.0, 1.0).is_err());
    assert!(x.histc(3, 1.0, 0.0).is_err());
    assert!(x.histc(3, f64::NEG_INFINITY, 0.0).is_err());
    assert!(ok.histc(3, 0.0, 1.0).is_err());
    assert!(x.softmax(2).is_err());
    assert!(x.var_dim(-3, 1.0, false).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn index_ops_never_panic(
        rows in 0usize..6,
        cols in 0usize..5,
        idx in proptest::collection::vec(-8i64..8, 0..7),
        dim in -3isize..3,
        src_rows in 0usize..8,
        float_index in any::<bool>(),
        f64_src in any::<bool>(),
    ) {
        let x = randn(1, &[rows, cols], DType::F32);
        let n = idx.len();
        let index = if float_index {
            Tensor::from_vec(idx.iter().map(|&v| v as f32).collect::<Vec<_>>(), &[n]).unwrap()
        } else {
            Tensor::from_vec(idx.clone(), &[n]).unwrap()
        };
        let src = randn(2, &[src_rows, cols], if f64_src { DType::F64 } else { DType::F32 });
        let in_range = |size: usize| idx.iter().all(|&v| v >= 0 && (v as usize) < size);
        let r = x.index_add(dim, &index, &src);
        let d = match dim {
            0 | -2 => Some(0),
            1 | -1 => Some(1),
            _ => None,
        };
        let valid = !float_index
            && !f64_src
            && match d {
                Some(0) => src_rows == n && in_range(rows),
                Some(_) => src_rows == rows && cols == n && in_range(cols),
                None => false,
            };
        prop_assert_eq!(r.is_ok(), valid, "index_add {:?}", r.err());
        let _ = x.index_select(dim, &index);
        let _ = x.embedding(&index);
        let _ = x.index_put(std::slice::from_ref(&index), &src, true);
        let _ = x.index_put(std::slice::from_ref(&index), &src, false);
        let _ = Tensor::embedding_backward(&src, &index, rows);
        let _ = index.bincount(Some(&src), cols);
        let _ = index.bincount(None, cols);
        let _ = x.histc(cols, -1.0, rows as f64 - 2.0);
        let gi = Tensor::from_vec(idx.iter().chain(&[0]).cycle().take(src_rows * cols).copied().collect::<Vec<_>>(), &[src_rows, cols]).unwrap();
        let _ = x.gather(dim, &gi);
        let _ = x.scatter_add(dim, &gi, &src);
        let offs = Tensor::from_vec(idx.iter().copied().take(3).collect::<Vec<_>>(), &[idx.len().min(3)]).unwrap();
        let _ = x.embedding_bag(&index, &offs, BagMode::Mean);
        let _ = x.softmax(dim);
        let _ = x.max_dim(dim, true);
        let _ = x.var_dim(dim, 1.0, false);
        let _ = x.cumsum(dim);
        let _ = x.logsumexp(dim, false);
    }
}

// ---------------------------------------------------------------------------------------------
// Golden values from PyTorch.

/// The accessors the golden file needs, on serde_json's values (NaN and the infinities are
/// written as the strings "nan", "inf", "-inf").
trait Golden {
    fn num(&self) -> f64;
    fn arr(&self) -> &[Value];
    fn str(&self) -> &str;
}

impl Golden for Value {
    fn num(&self) -> f64 {
        match self {
            Value::Number(x) => x.as_f64().expect("finite number"),
            Value::String(s) if s == "nan" => f64::NAN,
            Value::String(s) if s == "inf" => f64::INFINITY,
            Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
            Value::Bool(b) => f64::from(u8::from(*b)),
            other => panic!("not a number: {other:?}"),
        }
    }
    fn arr(&self) -> &[Value] {
        self.as_array().expect("an array")
    }
    fn str(&self) -> &str {
        self.as_str().expect("a string")
    }
}

fn tensor_of(j: &Value) -> Tensor {
    let shape: Vec<usize> = j
        .get("shape")
        .unwrap()
        .arr()
        .iter()
        .map(|v| v.num() as usize)
        .collect();
    let data: Vec<f64> = j
        .get("data")
        .unwrap()
        .arr()
        .iter()
        .map(Golden::num)
        .collect();
    match j.get("dtype").unwrap().str() {
        "f32" => Tensor::from_vec(data.iter().map(|&v| v as f32).collect::<Vec<_>>(), &shape),
        "f64" => Tensor::from_vec(data, &shape),
        _ => Tensor::from_vec(data.iter().map(|&v| v as i64).collect::<Vec<_>>(), &shape),
    }
    .unwrap()
}

/// Distance in ulps between two floats of `dt` (0 for equal values, NaN with NaN).
fn ulps(dt: DType, a: f64, b: f64) -> u64 {
    if (a.is_nan() && b.is_nan()) || a == b {
        return 0;
    }
    let key32 = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 {
            i64::from(i32::MIN) - i64::from(i)
        } else {
            i64::from(i)
        }
    };
    let key64 = |x: f64| {
        let i = x.to_bits() as i64;
        if i < 0 { i64::MIN - i } else { i }
    };
    match dt {
        DType::F32 => key32(a as f32).abs_diff(key32(b as f32)),
        _ => key64(a).abs_diff(key64(b)),
    }
}

#[test]
fn golden_values_from_pytorch() {
    let root = common::golden("ops.json");
    let cases = root.get("cases").unwrap().arr();
    assert!(cases.len() > 100);
    for c in cases {
        let op = c.get("op").unwrap().str();
        let inp = c.get("inputs").unwrap();
        let args = c.get("args").unwrap();
        let t = |k: &str| tensor_of(inp.get(k).unwrap());
        let a = |k: &str| args.get(k).unwrap().num();
        let dim = || a("dim") as isize;
        let (got, exact): (Vec<Tensor>, bool) = match op {
            "softmax" => (vec![t("x").softmax(dim()).unwrap()], false),
            "log_softmax" => (vec![t("x").log_softmax(dim()).unwrap()], false),
            "logsumexp" => (vec![t("x").logsumexp(dim(), false).unwrap()], false),
            "cumsum" => (vec![t("x").cumsum(dim()).unwrap()], false),
            "var_dim" => (
                vec![t("x").var_dim(dim(), a("correction"), false).unwrap()],
                false,
            ),
            "std_dim" => (
                vec![t("x").std_dim(dim(), a("correction"), false).unwrap()],
                false,
            ),
            "mean_dim" => (vec![t("x").mean_dim(dim(), false).unwrap()], false),
            "var" => (vec![t("x").var(a("correction")).unwrap()], false),
            "std" => (vec![t("x").std(a("correction")).unwrap()], false),
            "max_dim" => {
                let (v, i) = t("x").max_dim(dim(), false).unwrap();
                (vec![v, i], true)
            }
            "min_dim" => {
                let (v, i) = t("x").min_dim(dim(), false).unwrap();
                (vec![v, i], true)
            }
            "argmax" => (vec![t("x").argmax(Some(dim()), false).unwrap()], true),
            "index_select" => (vec![t("x").index_select(dim(), &t("index")).unwrap()], true),
            "index_add" => (
                vec![t("x").index_add(dim(), &t("index"), &t("source")).unwrap()],
                true,
            ),
            "gather" => (vec![t("x").gather(dim(), &t("index")).unwrap()], true),
            "scatter_add" => (
                vec![t("x").scatter_add(dim(), &t("index"), &t("src")).unwrap()],
                true,
            ),
            "index_put" => (
                vec![
                    t("x")
                        .index_put(&[t("index")], &t("values"), a("accumulate") != 0.0)
                        .unwrap(),
                ],
                true,
            ),
            "embedding" => (vec![t("x").embedding(&t("index")).unwrap()], true),
            "embedding_backward" => (
                vec![
                    Tensor::embedding_backward(&t("grad"), &t("index"), a("num_weights") as usize)
                        .unwrap(),
                ],
                true,
            ),
            "embedding_bag" => {
                let mode = match args.get("mode").unwrap().str() {
                    "sum" => BagMode::Sum,
                    "mean" => BagMode::Mean,
                    _ => BagMode::Max,
                };
                (
                    vec![
                        t("x")
                            .embedding_bag(&t("index"), &t("offsets"), mode)
                            .unwrap(),
                    ],
                    mode != BagMode::Mean,
                )
            }
            "histc" => (
                vec![
                    t("x")
                        .histc(a("bins") as usize, a("min"), a("max"))
                        .unwrap(),
                ],
                true,
            ),
            "bincount" => {
                let w = inp.get("weights").map(tensor_of);
                (
                    vec![
                        t("x")
                            .bincount(w.as_ref(), a("minlength") as usize)
                            .unwrap(),
                    ],
                    true,
                )
            }
            other => panic!("unknown golden op {other}"),
        };
        let want: Vec<Tensor> = c
            .get("outputs")
            .unwrap()
            .arr()
            .iter()
            .map(tensor_of)
            .collect();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape(), w.shape(), "{op} {args:?}: shape");
            assert_eq!(g.dtype(), w.dtype(), "{op} {args:?}: dtype");
            let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
            for (k, (&x, &y)) in gv.iter().zip(&wv).enumerate() {
                let u = ulps(g.dtype(), x, y);
                let lim = if exact || g.dtype() == DType::I64 {
                    0
                } else {
                    8
                };
                // Values near zero (softmax of -inf neighbours, cumsum cancellation) compare
                // absolutely.
                let abs_ok = !exact
                    && (x - y).abs()
                        < 1e-6 * (1.0 + wv.iter().map(|v| v.abs()).fold(0.0, f64::max));
                assert!(
                    u <= lim || abs_ok,
                    "{op} {args:?}: element {k}: got {x}, torch {y} ({u} ulp)"
                );
            }
        }
    }
}

/// Issue 13 (defects 7/8): bin counts sized from the input or the arguments are refused with
/// a clear error (out of memory), never a capacity-overflow panic or an abort.
#[test]
fn huge_histograms_are_errors() {
    let big = Tensor::from_vec(vec![i64::MAX], &[1]).unwrap();
    let small = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    let xf = Tensor::from_vec(vec![0.5f32, 1.5], &[2]).unwrap();
    for det in [false, true] {
        scope(det, false, || {
            let e = big.bincount(None, 0).unwrap_err();
            assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
            let w = Tensor::from_vec(vec![1f32], &[1]).unwrap();
            assert!(matches!(
                big.bincount(Some(&w), 0),
                Err(Error::OutOfMemory { .. })
            ));
            for m in [usize::MAX, 1 << 60] {
                let e = small.bincount(None, m).unwrap_err();
                assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
            }
            for bins in [usize::MAX, 1 << 60] {
                let e = xf.histc(bins, 0.0, 2.0).unwrap_err();
                assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
            }
        });
    }
}

/// `sum_dim` over an empty dimension of a huge shape: the output is refused, not an abort.
#[test]
fn huge_reduction_outputs_are_errors() {
    let x = Tensor::zeros(&[1 << 30, 0, 1 << 29], DType::F32).unwrap();
    assert!(matches!(
        x.sum_dim(1, false),
        Err(Error::OutOfMemory { .. })
    ));
}

/// Deterministic `bincount` with f32 weights equals PyTorch's one-thread result bit for bit on
/// inputs large enough to be split across threads (golden: `tools/golden_bincount_order.py`,
/// inputs redrawn from the same torch seeds), at 1, 2, 3 and 8 threads.
#[test]
fn det_bincount_matches_pytorch_index_order() {
    let root = common::golden("bincount_order.json");
    for c in root["cases"].as_array().unwrap() {
        let seed = c["seed"].as_u64().unwrap();
        let n = c["n"].as_u64().unwrap() as usize;
        let bins = c["bins"].as_u64().unwrap() as usize;
        let mut g = lockstep_rng::Generator::with_seed(seed);
        let x = Tensor::randint(0, bins as i64, &[n], DType::I64, Some(&mut g)).unwrap();
        let w = Tensor::randn(&[n], DType::F32, Some(&mut g)).unwrap();
        // The inputs are torch's.
        let xs: i64 = x.to_vec::<i64>().unwrap().iter().sum();
        assert_eq!(
            xs,
            c["x_sum"].as_i64().unwrap(),
            "seed {seed}: randint differs"
        );
        let w_first: Vec<i64> = w.to_vec::<f32>().unwrap()[..4]
            .iter()
            .map(|v| v.to_bits() as i32 as i64)
            .collect();
        let want_first: Vec<i64> = c["w_bits_first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(w_first, want_first, "seed {seed}: randn differs");
        let want: Vec<u32> = c["out_bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        for threads in [1, 2, 3, 8] {
            let got = scope(true, false, || {
                with_num_threads(threads, || x.bincount(Some(&w), bins))
            })
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
            let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "seed {seed}, {bins} bins, {threads} threads");
        }
    }
}
