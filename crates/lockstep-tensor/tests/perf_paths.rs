//! The fast paths of the reductions and of the row-accumulating ops, through the public API:
//! the documented summation order of `sum` (lanes, fixed tree, chunks) at lengths around the
//! prefetch threshold and the lane remainder, thread invariance at 1, 2, 3 and 8 threads of
//! the shapes that take the block-partial `index_add` kernel (also with more threads than
//! blocks), and softmax / logsumexp on lines with remainders.

use lockstep_tensor::Tensor;
use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::reduce::{CHUNK, LANES};
use lockstep_tensor::threads::with_num_threads;
mod common;
use common::{Mix, f32_bits};

fn rand_f32(seed: u64, n: usize) -> Vec<f32> {
    let mut m = Mix(seed);
    (0..n).map(|_| m.f() as f32).collect()
}

/// `f` in deterministic mode at 1, 2, 3 and 8 threads: the same bits; returns the first.
fn invariant(what: &str, f: impl Fn() -> Tensor) -> Tensor {
    let r = scope(true, false, || with_num_threads(1, &f));
    for t in [2, 3, 8] {
        let o = scope(true, false, || with_num_threads(t, &f));
        assert_eq!(r.shape(), o.shape(), "{what}: shape at {t} threads");
        assert!(
            f32_bits(&r) == f32_bits(&o),
            "{what}: bits differ at {t} threads"
        );
    }
    r
}

/// Pairwise tree of the module docs: `(v0+v1) + (v2+v3)`, an odd last element carried up.
fn tree(mut v: Vec<f32>) -> f32 {
    if v.is_empty() {
        return 0.0;
    }
    while v.len() > 1 {
        v = v
            .chunks(2)
            .map(|p| if p.len() == 2 { p[0] + p[1] } else { p[0] })
            .collect();
    }
    v[0]
}

/// The documented order of the deterministic `sum`, written out plainly.
fn documented_sum(x: &[f32]) -> f32 {
    let lanes = |c: &[f32]| {
        let mut acc = vec![0f32; LANES];
        for (i, &v) in c.iter().enumerate() {
            acc[i % LANES] += v;
        }
        tree(acc)
    };
    if x.len() <= CHUNK {
        return lanes(x);
    }
    tree(x.chunks(CHUNK).map(lanes).collect())
}

#[test]
fn deterministic_sum_follows_the_documented_order() {
    for n in [
        0,
        1,
        LANES - 1,
        LANES + 1,
        4095,
        4096,
        4097,
        4111,
        CHUNK,
        CHUNK + 1,
        2 * CHUNK + LANES + 3,
    ] {
        let v = rand_f32(n as u64 + 1, n);
        let x = Tensor::from_vec(v.clone(), &[n]).unwrap();
        let s = invariant("sum", || x.sum().unwrap());
        assert_eq!(
            s.item::<f32>().unwrap().to_bits(),
            documented_sum(&v).to_bits(),
            "n = {n}"
        );
    }
}

#[test]
fn block_partial_index_add_is_thread_invariant_and_correct() {
    // Many source rows into few destination rows: the block-partial kernel (2 to 4 blocks, so
    // that 8 threads also split each block's destination rows), with row widths that leave
    // vector remainders.
    for (n, m, d) in [
        (200usize, 40_000usize, 16usize),
        (50, 20_000, 33),
        (9, 17_000, 1),
    ] {
        let base = Tensor::from_vec(rand_f32(1, n * d), &[n, d]).unwrap();
        let src_v = rand_f32(2, m * d);
        let src = Tensor::from_vec(src_v.clone(), &[m, d]).unwrap();
        let mut g = Mix(3);
        let idx_v: Vec<i64> = (0..m).map(|_| (g.next() % n as u64) as i64).collect();
        let idx = Tensor::from_vec(idx_v.clone(), &[m]).unwrap();
        let r = invariant("index_add", || base.index_add(0, &idx, &src).unwrap());
        let mut want: Vec<f64> = base
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect();
        for (k, &row) in idx_v.iter().enumerate() {
            for j in 0..d {
                want[row as usize * d + j] += src_v[k * d + j] as f64;
            }
        }
        for (i, (&g, &w)) in r.to_vec::<f32>().unwrap().iter().zip(&want).enumerate() {
            assert!((g as f64 - w).abs() < 1e-3, "{n}x{m}x{d}: {i}: {g} vs {w}");
        }
        invariant("embedding_backward", || {
            Tensor::embedding_backward(&src, &idx, n).unwrap()
        });
    }
}

#[test]
fn softmax_and_logsumexp_on_lines_with_remainders() {
    for (rows, cols) in [(3usize, 4111usize), (37, 257), (5, 1)] {
        let v = rand_f32(7, rows * cols);
        let x = Tensor::from_vec(v.clone(), &[rows, cols]).unwrap();
        let sm = invariant("softmax", || x.softmax(-1).unwrap());
        let ls = invariant("log_softmax", || x.log_softmax(-1).unwrap());
        let lse = invariant("logsumexp", || x.logsumexp(-1, false).unwrap());
        let (sm, ls, lse) = (
            sm.to_vec::<f32>().unwrap(),
            ls.to_vec::<f32>().unwrap(),
            lse.to_vec::<f32>().unwrap(),
        );
        for r in 0..rows {
            let line = &v[r * cols..(r + 1) * cols];
            let m = line.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
            let s: f64 = line.iter().map(|&b| (b as f64 - m).exp()).sum();
            let want_lse = m + s.ln();
            assert!((lse[r] as f64 - want_lse).abs() < 1e-5 * (1.0 + want_lse.abs()));
            for (c, &b) in line.iter().enumerate() {
                let p = (b as f64 - m).exp() / s;
                assert!((sm[r * cols + c] as f64 - p).abs() < 1e-6 + 1e-5 * p);
                let lp = b as f64 - want_lse;
                assert!((ls[r * cols + c] as f64 - lp).abs() < 1e-5 * (1.0 + lp.abs()));
            }
        }
    }
    // A column reduction (inner > 1) takes the copying path: still thread-invariant.
    let x = Tensor::from_vec(rand_f32(8, 300 * 7), &[300, 7]).unwrap();
    invariant("softmax dim 0", || x.softmax(0).unwrap());
}
