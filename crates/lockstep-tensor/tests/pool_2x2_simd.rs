//! `max_pool2d`'s 2×2 vector kernels against the general window scan, value bits and indices,
//! on shapes that take each path (rows of 16k outputs, stacked planes of 1, 2, 4, 8 columns,
//! and the scalar fallbacks), with ties, NaNs, ±0 and infinities, on every instruction set
//! this CPU runs and at 1, 2, 3 and 8 threads.

use lockstep_tensor::isa::{Isa, set_isa};
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
mod common;
use common::f32_bits;

/// Few distinct values (many ties), NaNs, ±0 and −∞, or (`smooth`) distinct random values.
fn values(n: usize, seed: u64, smooth: bool) -> Vec<f32> {
    let r = Tensor::randint(
        0,
        1 << 20,
        &[n],
        DType::I64,
        Some(&mut lockstep_rng::Generator::with_seed(seed)),
    )
    .unwrap()
    .to_vec::<i64>()
    .unwrap();
    r.iter()
        .map(|&k| {
            if smooth {
                return k as f32 / 1000.0 - 500.0;
            }
            match k % 9 {
                0 => f32::NAN,
                1 => -f32::NAN,
                2 => f32::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                k => (k % 3) as f32,
            }
        })
        .collect()
}

/// `f(isa)` with each instruction set this CPU runs forced in turn (every path gives the same
/// bits, so tests running beside this one cannot notice), then the default again.
fn on_every_isa(mut f: impl FnMut(Isa)) {
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        set_isa(Some(isa)).unwrap();
        f(isa);
    }
    set_isa(None).unwrap();
}

/// The general scan: each window row by row, a later value wins if greater, or if NaN over a
/// non-NaN.
fn scan(v: &[f32], (planes, h, w): (usize, usize, usize)) -> (Vec<u32>, Vec<i64>) {
    let (oh, ow) = (h / 2, w / 2);
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for pl in 0..planes {
        let s = &v[pl * h * w..][..h * w];
        for a in 0..oh {
            for b in 0..ow {
                let (mut best, mut at) = (s[2 * a * w + 2 * b], 2 * a * w + 2 * b);
                for y in 2 * a..2 * a + 2 {
                    for x in 2 * b..2 * b + 2 {
                        let (k, val) = (y * w + x, s[y * w + x]);
                        if val > best || val.is_nan() && !best.is_nan() {
                            (best, at) = (val, k);
                        }
                    }
                }
                vals.push(best.to_bits());
                idx.push(at as i64);
            }
        }
    }
    (vals, idx)
}

#[test]
fn max_pool_2x2_kernels_match_the_scan() {
    let _turn = common::isa_turn();
    let shapes: &[[usize; 4]] = &[
        // The cnn model's MaxPool2d(2) input: stacked planes, 4 columns.
        [64, 16, 8, 8],
        // Stacked planes with 1, 2 and 8 columns.
        [3, 2, 32, 2],
        [5, 3, 16, 4],
        [2, 5, 8, 16],
        // Rows of 16 and 32 outputs, even and odd heights.
        [2, 3, 6, 32],
        [3, 2, 7, 64],
        // Odd widths with rows of 16 and 8 outputs; plane sizes that are multiples of 8 but
        // not of 16 (the AVX2 kernels under AVX-512).
        [2, 3, 6, 33],
        [2, 2, 5, 17],
        [3, 2, 4, 8],
        [2, 3, 6, 16],
        [4, 1, 16, 2],
        // Scalar fallbacks: plane sizes not a multiple of 16, odd widths, other widths.
        [4, 3, 6, 8],
        [3, 5, 9, 11],
        [2, 3, 28, 28],
        [1, 1, 2, 2],
        // Large enough to run over threads.
        [16, 32, 32, 32],
        [8, 20, 16, 8],
    ];
    on_every_isa(|isa| {
        for (k, &[n, c, h, w]) in shapes.iter().enumerate() {
            for smooth in [false, true] {
                let v = values(n * c * h * w, 40 + k as u64, smooth);
                let want = scan(&v, (n * c, h, w));
                let x = Tensor::from_vec(v, &[n, c, h, w]).unwrap();
                for threads in [1, 2, 3, 8] {
                    let (m, i) =
                        with_num_threads(threads, || x.max_pool2d(Pool2d::new(2))).unwrap();
                    assert_eq!(m.shape(), [n, c, h / 2, w / 2]);
                    let got = f32_bits(&m);
                    let what = format!(
                        "{:?} {isa:?} threads {threads} smooth {smooth}",
                        [n, c, h, w]
                    );
                    assert_eq!(got, want.0, "values {what}");
                    assert_eq!(i.to_vec::<i64>().unwrap(), want.1, "indices {what}");
                }
            }
        }
    });
}

/// The scatter the backward pass defines: zeros, then each gradient added at its index in
/// output order within each plane.
fn scatter(g: &[f32], idx: &[i64], planes: usize, hw: usize) -> Vec<u32> {
    let per = g.len() / planes;
    let mut out = vec![0f32; planes * hw];
    for pl in 0..planes {
        for q in 0..per {
            out[pl * hw + idx[pl * per + q] as usize] += g[pl * per + q];
        }
    }
    out.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn max_pool_2x2_backward_matches_the_scatter() {
    let _turn = common::isa_turn();
    let shapes: &[[usize; 4]] = &[
        [64, 16, 8, 8],
        [3, 2, 32, 2],
        [5, 3, 16, 4],
        [2, 5, 8, 16],
        [2, 3, 6, 32],
        [3, 2, 8, 64],
        [4, 3, 6, 8],
        [3, 5, 9, 11],
        [16, 32, 32, 32],
    ];
    on_every_isa(|isa| {
        for (k, &[n, c, h, w]) in shapes.iter().enumerate() {
            let x = Tensor::from_vec(values(n * c * h * w, 70 + k as u64, true), &[n, c, h, w])
                .unwrap();
            let (m, i) = x.max_pool2d(Pool2d::new(2)).unwrap();
            let (oh, ow) = (h / 2, w / 2);
            // Gradients with −0, NaN and ties to the other values.
            let g = values(n * c * oh * ow, 90 + k as u64, false);
            let gt = Tensor::from_vec(g.clone(), m.shape()).unwrap();
            let idx = i.to_vec::<i64>().unwrap();
            // The forward's indices (each in its window), then some moved to another window
            // of the plane (two gradients then land on one input).
            let mut moved = idx.clone();
            for q in (5..moved.len()).step_by(37) {
                moved[q] = (moved[q] + 2 * w as i64 + 1) % (h * w) as i64;
            }
            for ix in [idx, moved] {
                let want = scatter(&g, &ix, n * c, h * w);
                let it = Tensor::from_vec(ix, m.shape()).unwrap();
                for threads in [1, 2, 3, 8] {
                    let got = with_num_threads(threads, || {
                        Tensor::max_pool2d_backward(&gt, &it, x.shape())
                    })
                    .unwrap();
                    assert_eq!(
                        f32_bits(&got),
                        want,
                        "{:?} {isa:?} threads {threads}",
                        [n, c, h, w]
                    );
                }
            }
        }
    });
}

/// Indices outside the plane are errors on the 2×2 path too.
#[test]
fn max_pool_2x2_backward_rejects_indices_outside_the_plane() {
    let _turn = common::isa_turn();
    let x = Tensor::from_vec(values(2 * 3 * 8 * 8, 5, true), &[2, 3, 8, 8]).unwrap();
    let (m, i) = x.max_pool2d(Pool2d::new(2)).unwrap();
    for bad in [64, -1, i64::MIN] {
        let mut ix = i.to_vec::<i64>().unwrap();
        ix[19] = bad;
        let it = Tensor::from_vec(ix, m.shape()).unwrap();
        assert!(Tensor::max_pool2d_backward(&m, &it, x.shape()).is_err());
    }
}
