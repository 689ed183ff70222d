//! Issue 28, batch-invariant inference: the pieces a transformer's forward pass is made of give
//! a row the same bits whatever else is in the batch.
//!
//! * `matmul` / `linear` in deterministic mode (`matmul.blocked`): row i of `x[M, K]·Wᵀ` equals
//!   the product of row i alone, for M = 1..=40 and past one row-block (M > 240), for K below
//!   and above one K block (256), with contiguous rows (read in place) and strided rows
//!   (packed), at 1 and 3 threads.
//! * `causal_attention`: the same bits at 1, 2, 3 and 8 threads; a query row alone, in a
//!   batch, or as one cached step equals the row of the full pass; equal to the composed
//!   softmax(q·kᵀ·scale + causal mask)·v to rounding.

use lockstep_rng::Generator;
use lockstep_tensor::deterministic::scope;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let mut g = Generator::with_seed(seed);
    Tensor::randn(shape, DType::F32, Some(&mut g)).unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.contiguous()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

fn det<R>(f: impl FnOnce() -> R) -> R {
    scope(true, false, f)
}

/// Each row of `x·wᵀ (+ b)` equals that row's own product (`M = 1`).
fn rows_alone(x: &Tensor, w: &Tensor, b: Option<&Tensor>, what: &str) {
    let all = bits(&x.linear(w, b).unwrap());
    let n = w.shape()[0];
    for i in 0..x.shape()[0] {
        let row = x.narrow(0, i, 1).unwrap();
        let alone = bits(&row.linear(w, b).unwrap());
        assert_eq!(alone[..], all[i * n..(i + 1) * n], "{what}: row {i}");
    }
}

#[test]
fn gemm_gives_a_row_the_same_bits_for_any_m() {
    det(|| {
        for threads in [1, 3] {
            with_num_threads(threads, || {
                for (k, n) in [(16, 65), (128, 384), (300, 40), (512, 128)] {
                    let w = randn(&[n, k], 1);
                    let b = randn(&[n], 2);
                    for m in (1..=40).chain([241, 250]) {
                        let x = randn(&[m, k], 3 + m as u64);
                        let what = format!("m {m} k {k} n {n}, {threads} threads");
                        rows_alone(&x, &w, Some(&b), &what);
                        if m <= 12 {
                            rows_alone(&x, &w, None, &format!("{what}, no bias"));
                        }
                        // Strided rows (a transposed matrix): the packed path.
                        if m <= 20 || m == 250 {
                            let xs = randn(&[k, m], 99 + m as u64).transpose(0, 1).unwrap();
                            rows_alone(&xs, &w, Some(&b), &format!("{what}, strided"));
                            // The same values contiguous give the same bits.
                            assert_eq!(
                                bits(&xs.linear(&w, Some(&b)).unwrap()),
                                bits(&xs.contiguous().linear(&w, Some(&b)).unwrap()),
                                "{what}: strided vs contiguous"
                            );
                        }
                    }
                }
            });
        }
        // matmul of a 3-D batch [B, T, K] · [K, N]: each (b, t) row as alone.
        let x = randn(&[3, 7, 64], 5);
        let w = randn(&[64, 48], 6);
        let all = bits(&x.matmul(&w).unwrap());
        for b in 0..3 {
            for t in 0..7 {
                let r = x.narrow(0, b, 1).unwrap().narrow(1, t, 1).unwrap();
                let alone = bits(&r.matmul(&w).unwrap());
                let at = (b * 7 + t) * 48;
                assert_eq!(alone[..], all[at..at + 48], "matmul row ({b}, {t})");
            }
        }
    });
}

/// `softmax(q·kᵀ·scale + causal)·v` from the general ops, the reference.
fn composed(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Tensor {
    let t = q.shape()[2];
    let att = q
        .matmul(&k.transpose(-2, -1).unwrap())
        .unwrap()
        .mul_scalar(scale)
        .unwrap();
    let mask = Tensor::ones(&[t, t], DType::F32)
        .unwrap()
        .tril(0)
        .unwrap()
        .eq_scalar(0.0)
        .unwrap();
    let att = att
        .masked_fill(&mask, f64::NEG_INFINITY)
        .unwrap()
        .softmax(-1)
        .unwrap();
    att.matmul(v).unwrap()
}

#[test]
fn causal_attention_matches_the_composed_ops_to_rounding() {
    det(|| {
        for (b, h, t, d) in [(1, 1, 1, 4), (2, 3, 9, 8), (1, 2, 33, 21), (2, 4, 64, 32)] {
            let (q, k, v) = (
                randn(&[b, h, t, d], 10),
                randn(&[b, h, t, d], 11),
                randn(&[b, h, t, d], 12),
            );
            let scale = 1.0 / (d as f64).sqrt();
            let ours = q.causal_attention(&k, &v, 0, scale).unwrap();
            assert_eq!(ours.shape(), &[b, h, t, d]);
            let want = composed(&q, &k, &v, scale);
            let (a, w) = (ours.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
            for (i, (x, y)) in a.iter().zip(&w).enumerate() {
                assert!(
                    (x - y).abs() <= 2e-6 * (1.0 + y.abs()),
                    "{b}x{h}x{t}x{d} [{i}]: {x} vs {y}"
                );
            }
        }
        // f64 too.
        let q = randn(&[1, 2, 5, 6], 1).to_dtype(DType::F64);
        let k = randn(&[1, 2, 5, 6], 2).to_dtype(DType::F64);
        let v = randn(&[1, 2, 5, 6], 3).to_dtype(DType::F64);
        let ours = q.causal_attention(&k, &v, 0, 0.4).unwrap();
        let want = composed(&q, &k, &v, 0.4);
        for (x, y) in ours
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .zip(want.to_vec::<f64>().unwrap())
        {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "f64: {x} vs {y}");
        }
    });
}

#[test]
fn causal_attention_same_bits_at_1_2_3_and_8_threads() {
    let (q, k, v) = (
        randn(&[3, 4, 40, 16], 20),
        randn(&[3, 4, 40, 16], 21),
        randn(&[3, 4, 40, 16], 22),
    );
    let one = with_num_threads(1, || bits(&q.causal_attention(&k, &v, 0, 0.25).unwrap()));
    for n in [2, 3, 8] {
        let got = with_num_threads(n, || bits(&q.causal_attention(&k, &v, 0, 0.25).unwrap()));
        assert_eq!(got, one, "{n} threads");
    }
}

#[test]
fn causal_attention_is_batch_and_cache_invariant() {
    let (b, h, t, d) = (5, 2, 12, 10);
    let (q, k, v) = (
        randn(&[b, h, t, d], 30),
        randn(&[b, h, t, d], 31),
        randn(&[b, h, t, d], 32),
    );
    let full = bits(&q.causal_attention(&k, &v, 0, 0.3).unwrap());
    let row = |bi: usize, hi: usize, ti: usize| {
        let at = ((bi * h + hi) * t + ti) * d;
        full[at..at + d].to_vec()
    };
    for bi in 0..b {
        // One sequence alone.
        let one = |x: &Tensor| x.narrow(0, bi, 1).unwrap();
        let alone = bits(
            &one(&q)
                .causal_attention(&one(&k), &one(&v), 0, 0.3)
                .unwrap(),
        );
        for hi in 0..h {
            for ti in 0..t {
                let at = (hi * t + ti) * d;
                assert_eq!(
                    alone[at..at + d],
                    row(bi, hi, ti)[..],
                    "alone {bi} {hi} {ti}"
                );
            }
        }
        // Cached steps: the query at position ti over a cache of ti + 1 keys, and over the
        // whole cache (keys past the position are never read).
        for ti in 0..t {
            let qs = one(&q).narrow(2, ti, 1).unwrap();
            for keys in [ti + 1, t] {
                let kc = one(&k).narrow(2, 0, keys).unwrap();
                let vc = one(&v).narrow(2, 0, keys).unwrap();
                let step = bits(&qs.causal_attention(&kc, &vc, ti, 0.3).unwrap());
                for hi in 0..h {
                    assert_eq!(
                        step[hi * d..(hi + 1) * d],
                        row(bi, hi, ti)[..],
                        "cached step {bi} {hi} {ti} over {keys} keys"
                    );
                }
            }
        }
    }
}

#[test]
fn causal_attention_refuses_bad_shapes() {
    let q = randn(&[1, 2, 3, 4], 1);
    let k = randn(&[1, 2, 3, 4], 2);
    let msg = |r: lockstep_tensor::Result<Tensor>| r.unwrap_err().to_string();
    assert!(msg(q.causal_attention(&k, &k, 1, 1.0)).contains("causal_attention"));
    assert!(msg(q.causal_attention(&randn(&[1, 2, 3, 5], 3), &k, 0, 1.0)).contains("agree"));
    assert!(
        msg(q
            .reshape(&[2, 3, 4])
            .unwrap()
            .causal_attention(&k, &k, 0, 1.0))
        .contains("4-D")
    );
    let qi = Tensor::from_vec(vec![1i64; 24], &[1, 2, 3, 4]).unwrap();
    assert!(msg(qi.causal_attention(&k, &k, 0, 1.0)).contains("dtype"));
    let qs = q.narrow(2, 0, 1).unwrap();
    assert!(msg(qs.causal_attention(&k, &k, usize::MAX, 1.0)).contains("start"));
}
