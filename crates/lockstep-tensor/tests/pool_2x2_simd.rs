//! `max_pool2d`'s 2×2 vector kernels against the general window scan, value bits and indices,
//! on shapes that take each path (rows of 16k outputs, stacked planes of 1, 2, 4, 8 columns,
//! and the scalar fallbacks), with ties, NaNs, ±0 and infinities, on every instruction set
//! this CPU runs and at 1, 2, 3 and 8 threads.

use lockstep_tensor::isa::{Isa, set_isa};
use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

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
    let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.available()).collect();
    for isa in isas {
        // Every path gives the same bits, so tests beside this one cannot notice.
        set_isa(Some(isa)).unwrap();
        for (k, &[n, c, h, w]) in shapes.iter().enumerate() {
            for smooth in [false, true] {
                let v = values(n * c * h * w, 40 + k as u64, smooth);
                let want = scan(&v, (n * c, h, w));
                let x = Tensor::from_vec(v, &[n, c, h, w]).unwrap();
                for threads in [1, 2, 3, 8] {
                    let (m, i) =
                        with_num_threads(threads, || x.max_pool2d(Pool2d::new(2))).unwrap();
                    assert_eq!(m.shape(), [n, c, h / 2, w / 2]);
                    let got: Vec<u32> = m
                        .to_vec::<f32>()
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                    let what = format!(
                        "{:?} {isa:?} threads {threads} smooth {smooth}",
                        [n, c, h, w]
                    );
                    assert_eq!(got, want.0, "values {what}");
                    assert_eq!(i.to_vec::<i64>().unwrap(), want.1, "indices {what}");
                }
            }
        }
    }
    set_isa(None).unwrap();
}
