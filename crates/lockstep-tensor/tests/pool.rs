//! 2-D pooling against PyTorch's own outputs (`tools/golden_pool.py`), and thread invariance.

use lockstep_tensor::ops::pool::Pool2d;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
mod common;

use common::{dims, f32s, golden, pair};

/// Sums in the same order as PyTorch give the same bits; allow a couple of ulps of slack for
/// places where PyTorch's vectorized loops may associate differently.
fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 2.0 * f32::EPSILON * w.abs().max(1.0);
        assert!((g - w).abs() <= tol, "{what}[{i}]: got {g}, want {w}");
    }
}

#[test]
fn pooling_matches_pytorch() {
    let g = golden("pool.json");
    for (k, c) in g["cases"].as_array().unwrap().iter().enumerate() {
        let shape = dims(&c["shape"]);
        let p = Pool2d {
            kernel: pair(&c["kernel"]),
            stride: pair(&c["stride"]),
            padding: pair(&c["padding"]),
            dilation: pair(&c["dilation"]),
            ceil_mode: c["ceil_mode"].as_bool().unwrap(),
        };
        let x = Tensor::from_vec(f32s(&c["input"]), &shape).unwrap();
        let (y, idx) = x.max_pool2d(p).unwrap();
        assert_eq!(y.shape(), dims(&c["max_shape"]).as_slice(), "case {k}");
        assert_eq!(y.to_vec::<f32>().unwrap(), f32s(&c["max"]), "case {k} max");
        let want_idx: Vec<i64> = c["max_indices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(idx.to_vec::<i64>().unwrap(), want_idx, "case {k} indices");
        let gy = Tensor::from_vec(f32s(&c["grad_output_max"]), y.shape()).unwrap();
        let gx = Tensor::max_pool2d_backward(&gy, &idx, &shape).unwrap();
        close(
            &gx.to_vec::<f32>().unwrap(),
            &f32s(&c["max_grad_input"]),
            &format!("case {k} max grad"),
        );
        if c.get("avg").is_some() {
            let cip = c["count_include_pad"].as_bool().unwrap();
            let a = x.avg_pool2d(p, cip).unwrap();
            assert_eq!(a.shape(), dims(&c["avg_shape"]).as_slice());
            close(
                &a.to_vec::<f32>().unwrap(),
                &f32s(&c["avg"]),
                &format!("case {k} avg"),
            );
            let ga = Tensor::from_vec(f32s(&c["grad_output_avg"]), a.shape()).unwrap();
            let gx = Tensor::avg_pool2d_backward(&ga, &shape, p, cip).unwrap();
            close(
                &gx.to_vec::<f32>().unwrap(),
                &f32s(&c["avg_grad_input"]),
                &format!("case {k} avg grad"),
            );
        }
    }
    for c in g["adaptive"].as_array().unwrap() {
        let shape = dims(&c["shape"]);
        let x = Tensor::from_vec(f32s(&c["input"]), &shape).unwrap();
        let a = x.adaptive_avg_pool2d(pair(&c["output_size"])).unwrap();
        close(&a.to_vec::<f32>().unwrap(), &f32s(&c["out"]), "adaptive");
        let gy = Tensor::from_vec(f32s(&c["grad_output"]), a.shape()).unwrap();
        let gx = Tensor::adaptive_avg_pool2d_backward(&gy, &shape).unwrap();
        close(
            &gx.to_vec::<f32>().unwrap(),
            &f32s(&c["grad_input"]),
            "adaptive grad",
        );
    }
}

#[test]
fn pooling_is_thread_invariant() {
    let x = Tensor::randn(
        &[3, 5, 17, 13],
        DType::F32,
        Some(&mut lockstep_rng::Generator::with_seed(1)),
    )
    .unwrap();
    let p = Pool2d {
        kernel: (3, 3),
        stride: (2, 2),
        padding: (1, 1),
        dilation: (1, 1),
        ceil_mode: true,
    };
    let run = || {
        let (m, i) = x.max_pool2d(p).unwrap();
        let a = x.avg_pool2d(p, false).unwrap();
        let gm = Tensor::max_pool2d_backward(&m, &i, x.shape()).unwrap();
        let ga = Tensor::avg_pool2d_backward(&a, x.shape(), p, false).unwrap();
        let ad = x.adaptive_avg_pool2d((4, 6)).unwrap();
        let gad = Tensor::adaptive_avg_pool2d_backward(&ad, x.shape()).unwrap();
        [m, a, gm, ga, ad, gad].map(|t| {
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        })
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert_eq!(with_num_threads(t, run), one, "threads = {t}");
    }
}

#[test]
fn bad_pooling_arguments_are_errors() {
    let x = Tensor::zeros(&[1, 1, 4, 4], DType::F32).unwrap();
    assert!(
        Tensor::zeros(&[4, 4], DType::F32)
            .unwrap()
            .max_pool2d(Pool2d::new(2))
            .is_err()
    );
    assert!(x.to_dtype(DType::F64).max_pool2d(Pool2d::new(2)).is_err());
    assert!(x.max_pool2d(Pool2d::new(0)).is_err());
    assert!(x.max_pool2d(Pool2d::new(5)).is_err());
    let mut p = Pool2d::new(2);
    p.padding = (2, 2);
    assert!(x.avg_pool2d(p, true).is_err());
    assert!(x.adaptive_avg_pool2d((0, 1)).is_err());
    let (m, i) = x.max_pool2d(Pool2d::new(2)).unwrap();
    let bad = Tensor::full(&[1, 1, 2, 2], 99.0, DType::I64).unwrap();
    assert!(Tensor::max_pool2d_backward(&m, &bad, x.shape()).is_err());
    assert!(Tensor::max_pool2d_backward(&m, &i, &[1, 1, 4]).is_err());
}

/// Values with ties, NaNs and infinities: the cases where the scan order decides.
fn awkward(n: usize, seed: u64) -> Vec<f32> {
    let r = Tensor::randint(
        0,
        7,
        &[n],
        DType::I64,
        Some(&mut lockstep_rng::Generator::with_seed(seed)),
    )
    .unwrap()
    .to_vec::<i64>()
    .unwrap();
    r.iter()
        .map(|&k| match k {
            0 => f32::NAN,
            1 => f32::NEG_INFINITY,
            2 => -0.0,
            k => (k % 3) as f32,
        })
        .collect()
}

#[test]
fn max_pool_2x2_fast_path_scans_as_the_general_loop() {
    // Odd sizes: the last row and column are outside every window.
    let (n, c, h, w) = (3, 5, 9, 11);
    let v = awkward(n * c * h * w, 4);
    let x = Tensor::from_vec(v.clone(), &[n, c, h, w]).unwrap();
    let (m, i) = x.max_pool2d(Pool2d::new(2)).unwrap();
    let (m, i) = (m.to_vec::<f32>().unwrap(), i.to_vec::<i64>().unwrap());
    let (oh, ow) = (h / 2, w / 2);
    for pl in 0..n * c {
        let s = &v[pl * h * w..][..h * w];
        for a in 0..oh {
            for b in 0..ow {
                let (mut best, mut at) = (f32::NEG_INFINITY, usize::MAX);
                for y in 2 * a..2 * a + 2 {
                    for xx in 2 * b..2 * b + 2 {
                        let (k, val) = (y * w + xx, s[y * w + xx]);
                        if at == usize::MAX || val > best || val.is_nan() && !best.is_nan() {
                            (best, at) = (val, k);
                        }
                    }
                }
                let o = pl * oh * ow + a * ow + b;
                assert_eq!(m[o].to_bits(), best.to_bits(), "value {o}");
                assert_eq!(i[o], at as i64, "index {o}");
            }
        }
    }
}

#[test]
fn global_average_pooling_sums_each_plane_in_order() {
    // 13 planes: blocks of planes side by side and a remainder.
    let (n, c, h, w) = (1, 13, 5, 7);
    let v = awkward(n * c * h * w, 5)
        .into_iter()
        .map(|x| if x.is_finite() { x * 0.3 + 0.1 } else { 1.7 })
        .collect::<Vec<_>>();
    let x = Tensor::from_vec(v.clone(), &[n, c, h, w]).unwrap();
    let y = x
        .adaptive_avg_pool2d((1, 1))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (pl, got) in y.iter().enumerate() {
        let mut sum = 0f32;
        for &e in &v[pl * h * w..][..h * w] {
            sum += e;
        }
        assert_eq!(
            got.to_bits(),
            (sum / (h * w) as f32).to_bits(),
            "plane {pl}"
        );
    }
    // The gradient: 0 + g/div in every input of the plane (a −0 gradient gives +0).
    let mut g = vec![0.5f32; n * c];
    g[3] = -0.0;
    g[4] = -1.25;
    let gt = Tensor::from_vec(g.clone(), &[n, c, 1, 1]).unwrap();
    let gx = Tensor::adaptive_avg_pool2d_backward(&gt, x.shape())
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (k, got) in gx.iter().enumerate() {
        let want = 0.0 + g[k / (h * w)] / (h * w) as f32;
        assert_eq!(got.to_bits(), want.to_bits(), "gradient {k}");
    }
}

#[test]
fn cnn_pooling_fast_paths_are_thread_invariant() {
    // Large enough to run in parallel.
    let x = Tensor::from_vec(awkward(8 * 20 * 32 * 32, 6), &[8, 20, 32, 32]).unwrap();
    let run = || {
        let (m, i) = x.max_pool2d(Pool2d::new(2)).unwrap();
        let gm = Tensor::max_pool2d_backward(&m, &i, x.shape()).unwrap();
        let ad = x.adaptive_avg_pool2d((1, 1)).unwrap();
        let gad = Tensor::adaptive_avg_pool2d_backward(&ad, x.shape()).unwrap();
        let bits = [m, gm, ad, gad].map(|t| {
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        });
        (bits, i.to_vec::<i64>().unwrap())
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert_eq!(with_num_threads(t, run), one, "threads = {t}");
    }
}
