//! conv2d and its backward primitives: against PyTorch (`tools/golden_conv.py`), every
//! candidate against the others, thread invariance, deterministic-mode policy, bad input.

use lockstep_tensor::autotune::{with_algorithm, with_allow_fast_conv};
use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::conv::{CONV2D, CONV2D_WEIGHT_GRAD, Conv2dParams};
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
mod common;

use common::{dims, f32_bits, f32s, golden, pair};

/// Sums of up to a few hundred terms of magnitude ≤ 1 in a different order: within 1e-6·terms
/// (the golden cases with ≥ 16 channels run Winograd, well inside this too).
fn close(got: &Tensor, want: &[f32], terms: usize, what: &str) {
    let g = got.to_vec::<f32>().unwrap();
    assert_eq!(g.len(), want.len(), "{what}: length");
    let tol = 1e-6 * terms as f32 + 1e-6;
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol,
            "{what}[{i}]: got {a}, want {b} (tol {tol})"
        );
    }
}

#[test]
fn conv2d_matches_pytorch() {
    for (k, c) in golden("conv.json")["cases"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let xs = dims(&c["input_shape"]);
        let ws = dims(&c["weight_shape"]);
        let p = Conv2dParams {
            stride: pair(&c["stride"]),
            padding: pair(&c["padding"]),
            dilation: pair(&c["dilation"]),
            groups: c["groups"].as_u64().unwrap() as usize,
        };
        let x = Tensor::from_vec(f32s(&c["input"]), &xs).unwrap();
        let w = Tensor::from_vec(f32s(&c["weight"]), &ws).unwrap();
        let b = c["bias"]
            .as_array()
            .map(|_| Tensor::from_vec(f32s(&c["bias"]), &[ws[0]]).unwrap());
        let y = x.conv2d(&w, b.as_ref(), p).unwrap();
        assert_eq!(y.shape(), dims(&c["output_shape"]).as_slice(), "case {k}");
        let kterms = ws[1] * ws[2] * ws[3];
        close(&y, &f32s(&c["output"]), kterms, &format!("case {k} output"));
        let gy = Tensor::from_vec(f32s(&c["grad_output"]), y.shape()).unwrap();
        let gx = Tensor::conv2d_backward_input(&gy, &xs, &w, p).unwrap();
        close(
            &gx,
            &f32s(&c["grad_input"]),
            ws[0] * ws[2] * ws[3],
            &format!("case {k} grad_input"),
        );
        for det in [false, true] {
            let gw = scope(det, false, || {
                Tensor::conv2d_backward_weight(&gy, &x, &ws, p).unwrap()
            });
            let n = xs[0] * y.shape()[2] * y.shape()[3];
            close(
                &gw,
                &f32s(&c["grad_weight"]),
                n,
                &format!("case {k} grad_weight det={det}"),
            );
        }
    }
}

fn sample(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(
        shape,
        DType::F32,
        Some(&mut lockstep_rng::Generator::with_seed(seed)),
    )
    .unwrap()
}

/// The bits of the forward pass and both gradients in deterministic mode, equal at 1, 2, 3
/// and 8 threads (asserted); returned for further checks.
fn same_bits_at_any_thread_count(
    x: &Tensor,
    w: &Tensor,
    gy: &Tensor,
    p: Conv2dParams,
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let run = || {
        scope(true, false, || {
            (
                f32_bits(&x.conv2d(w, None, p).unwrap()),
                f32_bits(&Tensor::conv2d_backward_input(gy, x.shape(), w, p).unwrap()),
                f32_bits(&Tensor::conv2d_backward_weight(gy, x, w.shape(), p).unwrap()),
            )
        })
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert_eq!(
            with_num_threads(t, run),
            one,
            "{:?}: threads = {t}",
            x.shape()
        );
    }
    one
}

#[test]
fn deterministic_conv_is_thread_invariant() {
    let p = Conv2dParams {
        stride: (2, 1),
        padding: (1, 2),
        dilation: (1, 1),
        groups: 2,
    };
    let x = sample(&[5, 4, 13, 11], 1);
    let w = sample(&[6, 2, 3, 3], 2);
    let y = x.conv2d(&w, None, p).unwrap();
    let gy = sample(y.shape(), 3);
    same_bits_at_any_thread_count(&x, &w, &gy, p);
}

/// Planes of more than 1,024 positions take the implicit GEMM only with a sample per thread
/// (here at 1 and 2 threads) and im2col + GEMM otherwise (3 and 8): the bits stay the same.
#[test]
fn large_planes_give_the_same_bits_on_either_path() {
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let x = sample(&[2, 16, 41, 37], 4);
    let w = sample(&[24, 16, 3, 3], 5);
    let gy = sample(&[2, 24, 41, 37], 6);
    same_bits_at_any_thread_count(&x, &w, &gy, p);
    close(
        &x.conv2d(&w, None, p).unwrap(),
        &naive_conv(&x, &w, p)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>(),
        16 * 9,
        "large plane",
    );
}

#[test]
fn special_kernels_match_the_reference() {
    // The 1×1 and depthwise kernels (registered beside im2col) on the shapes they serve.
    assert!(CONV2D.by_algo("conv2d.direct_1x1").is_some());
    assert!(CONV2D.by_algo("conv2d.depthwise_direct").is_some());
    let cases = [
        (vec![3, 8, 7, 5], vec![5, 8, 1, 1], Conv2dParams::default()),
        (
            vec![2, 6, 9, 9],
            vec![6, 1, 3, 3],
            Conv2dParams {
                stride: (2, 2),
                padding: (1, 1),
                dilation: (1, 1),
                groups: 6,
            },
        ),
    ];
    for (xs, ws, p) in cases {
        let x = sample(&xs, 4);
        let w = sample(&ws, 5);
        // The heuristic picks the special kernel for these shapes.
        let fast = x.conv2d(&w, None, p).unwrap().to_vec::<f32>().unwrap();
        let reference = naive_conv(&x, &w, p);
        for (i, (a, b)) in fast.iter().zip(&reference).enumerate() {
            assert!((*a as f64 - b).abs() < 1e-4, "{i}: {a} vs {b}");
        }
    }
}

/// A direct f64 convolution, the textbook definition.
fn naive_conv(x: &Tensor, w: &Tensor, p: Conv2dParams) -> Vec<f64> {
    let (xv, wv) = (x.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
    let (&[n, c, h, wd], &[o, cg, kh, kw]) = (x.shape(), w.shape()) else {
        unreachable!()
    };
    let og = o / p.groups;
    let oh = (h + 2 * p.padding.0 - p.dilation.0 * (kh - 1) - 1) / p.stride.0 + 1;
    let ow = (wd + 2 * p.padding.1 - p.dilation.1 * (kw - 1) - 1) / p.stride.1 + 1;
    let mut out = vec![0f64; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for i in 0..oh {
                for j in 0..ow {
                    let mut s = 0f64;
                    for ic in 0..cg {
                        let cin = g * cg + ic;
                        for a in 0..kh {
                            for bb in 0..kw {
                                let y = (i * p.stride.0 + a * p.dilation.0) as isize
                                    - p.padding.0 as isize;
                                let xx = (j * p.stride.1 + bb * p.dilation.1) as isize
                                    - p.padding.1 as isize;
                                if y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < wd {
                                    s += wv[((oc * cg + ic) * kh + a) * kw + bb] as f64
                                        * xv[((b * c + cin) * h + y as usize) * wd + xx as usize]
                                            as f64;
                                }
                            }
                        }
                    }
                    out[((b * o + oc) * oh + i) * ow + j] = s;
                }
            }
        }
    }
    out
}

#[test]
fn random_shapes_against_the_naive_reference() {
    let mut g = lockstep_rng::Generator::with_seed(9);
    for case in 0..12 {
        let mut r = |lo: i64, hi: i64| {
            let mut v = [0i64];
            lockstep_rng::compat::torch::random_(&mut g, &mut v, lo, hi).unwrap();
            v[0] as usize
        };
        let groups = r(1, 3);
        let (cg, og) = (r(1, 4), r(1, 4));
        let (kh, kw) = (r(1, 4), r(1, 4));
        let p = Conv2dParams {
            stride: (r(1, 3), r(1, 3)),
            padding: (r(0, 2), r(0, 2)),
            dilation: (r(1, 3), r(1, 3)),
            groups,
        };
        let (h, w) = (r(6, 12), r(6, 12));
        let x = sample(&[r(1, 4), cg * groups, h, w], 100 + case);
        let wt = sample(&[og * groups, cg, kh, kw], 200 + case);
        let got = x.conv2d(&wt, None, p).unwrap().to_vec::<f32>().unwrap();
        let want = naive_conv(&x, &wt, p);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*a as f64 - b).abs() < 1e-4,
                "case {case} [{i}]: {a} vs {b}"
            );
        }
    }
}

/// Sums over `terms` products of standard normals, by Winograd F(4×4, 3×3): its error is a few
/// 1e-6 of the terms' magnitude (≈ 0.8·terms for standard normals).
fn winograd_close(got: &[f32], want: &[f64], terms: usize, what: &str) {
    let tol = 2e-5 * terms as f64;
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (*a as f64 - b).abs() <= tol,
            "{what}[{i}]: {a} vs {b} (tol {tol})"
        );
    }
}

#[test]
fn winograd_shapes_match_the_reference_and_are_thread_invariant() {
    // Pinned for all three ops: partial tiles (11×9 outputs), 20 → 18 channels.
    with_algorithm("conv2d.winograd_f4x3", || {
        with_algorithm("conv2d_input_grad.winograd_f4x3", || {
            with_algorithm("conv2d_weight_grad.winograd_f4x3", winograd_shapes_body)
        })
    });
}

fn winograd_shapes_body() {
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let x = sample(&[3, 20, 11, 9], 11);
    let w = sample(&[18, 20, 3, 3], 12);
    let y = x.conv2d(&w, None, p).unwrap();
    winograd_close(
        &y.to_vec::<f32>().unwrap(),
        &naive_conv(&x, &w, p),
        20 * 9,
        "forward",
    );
    let gy = sample(y.shape(), 13);
    // The input gradient is the convolution of the output gradient with the flipped,
    // transposed kernel (padding 2 - 1 = 1).
    let wt = Tensor::from_vec(
        {
            let wv = w.to_vec::<f32>().unwrap();
            let mut t = vec![0f32; wv.len()];
            for o in 0..18 {
                for i in 0..20 {
                    for a in 0..3 {
                        for b in 0..3 {
                            t[((i * 18 + o) * 3 + 2 - a) * 3 + 2 - b] =
                                wv[((o * 20 + i) * 3 + a) * 3 + b];
                        }
                    }
                }
            }
            t
        },
        &[20, 18, 3, 3],
    )
    .unwrap();
    let gx = Tensor::conv2d_backward_input(&gy, x.shape(), &w, p).unwrap();
    winograd_close(
        &gx.to_vec::<f32>().unwrap(),
        &naive_conv(&gy, &wt, p),
        18 * 9,
        "input grad",
    );
    same_bits_at_any_thread_count(&x, &w, &gy, p);
    // The weight gradient against the im2col path's (same sums, other order).
    let gw = Tensor::conv2d_backward_weight(&gy, &x, w.shape(), p).unwrap();
    let gw64 = {
        let (xv, gv) = (x.to_vec::<f32>().unwrap(), gy.to_vec::<f32>().unwrap());
        let mut d = vec![0f64; 18 * 20 * 9];
        for n in 0..3 {
            for o in 0..18 {
                for i in 0..20 {
                    for a in 0..3 {
                        for b in 0..3 {
                            let mut s = 0f64;
                            for yy in 0..11 {
                                for xx in 0..9 {
                                    let (sy, sx) = (yy + a, xx + b);
                                    if (1..12).contains(&sy) && (1..10).contains(&sx) {
                                        s += gv[((n * 18 + o) * 11 + yy) * 9 + xx] as f64
                                            * xv[((n * 20 + i) * 11 + sy - 1) * 9 + sx - 1] as f64;
                                    }
                                }
                            }
                            d[((o * 20 + i) * 3 + a) * 3 + b] += s;
                        }
                    }
                }
            }
        }
        d
    };
    winograd_close(
        &gw.to_vec::<f32>().unwrap(),
        &gw64,
        3 * 11 * 9,
        "weight grad",
    );
}

#[test]
fn a_pinned_algorithm_replaces_the_heuristic_choice_where_it_applies() {
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let x = sample(&[1, 64, 24, 24], 31);
    let w = sample(&[64, 64, 3, 3], 32);
    // Opted in, the heuristic picks Winograd here (64 channels, 24×24); pinned, im2col's
    // GEMM-order sums run instead.
    let winograd = with_allow_fast_conv(true, || x.conv2d(&w, None, p).unwrap());
    let gemm = with_allow_fast_conv(true, || {
        with_algorithm("conv2d.im2col_gemm", || x.conv2d(&w, None, p).unwrap())
    });
    assert_ne!(f32_bits(&winograd), f32_bits(&gemm));
    // By default (not opted in) the accurate algorithm runs; a pin of Winograd is an explicit
    // opt-in of its own.
    assert_eq!(f32_bits(&x.conv2d(&w, None, p).unwrap()), f32_bits(&gemm));
    let pinned = with_algorithm("conv2d.winograd_f4x3", || x.conv2d(&w, None, p).unwrap());
    assert_eq!(f32_bits(&pinned), f32_bits(&winograd));
    let want = naive_conv(&x, &w, p);
    close(
        &gemm,
        &want.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        64 * 9,
        "im2col",
    );
    // A pin that does not apply to these shapes (1×1 only) leaves the usual choice.
    let other = with_allow_fast_conv(true, || {
        with_algorithm("conv2d.direct_1x1", || x.conv2d(&w, None, p).unwrap())
    });
    assert_eq!(f32_bits(&other), f32_bits(&winograd));
    // Unknown names and nondeterministic pins in deterministic mode are errors, not silence.
    assert!(with_algorithm("conv2d.no_such", || x.conv2d(&w, None, p)).is_err());
    let y = x.conv2d(&w, None, p).unwrap();
    let pinned_nondet = with_algorithm("conv2d_weight_grad.batch_partials", || {
        scope(true, false, || {
            Tensor::conv2d_backward_weight(&y, &x, w.shape(), p)
        })
    });
    assert!(pinned_nondet.is_err());
    // Outside the closure the pin is gone.
    assert_eq!(
        f32_bits(&with_allow_fast_conv(true, || x
            .conv2d(&w, None, p)
            .unwrap())),
        f32_bits(&winograd)
    );
    assert_eq!(f32_bits(&x.conv2d(&w, None, p).unwrap()), f32_bits(&gemm));
}

#[test]
fn conv_deterministic_switch_restricts_only_convolution() {
    let x = sample(&[4, 2, 6, 6], 7);
    let w = sample(&[3, 2, 3, 3], 8);
    let y = x.conv2d(&w, None, Conv2dParams::default()).unwrap();
    let gy = sample(y.shape(), 9);
    // The conv-only switch (`restrict_deterministic`) allows just the batched GEMM, whatever
    // the process-wide mode; deterministic mode reaches the same kernel, with repeatable bits.
    let a = scope(true, false, || {
        Tensor::conv2d_backward_weight(&gy, &x, w.shape(), Conv2dParams::default()).unwrap()
    });
    let allowed: Vec<_> = CONV2D_WEIGHT_GRAD
        .allowed(true)
        .unwrap()
        .iter()
        .map(|i| i.algo)
        .collect();
    assert_eq!(
        allowed,
        [
            "conv2d_weight_grad.fixed_parts",
            "conv2d_weight_grad.winograd_f4x3"
        ]
    );
    assert_eq!(
        f32_bits(&a),
        f32_bits(&scope(true, false, || Tensor::conv2d_backward_weight(
            &gy,
            &x,
            w.shape(),
            Conv2dParams::default()
        )
        .unwrap()))
    );
}

#[test]
fn bad_convolutions_are_errors() {
    let x = sample(&[1, 4, 5, 5], 1);
    let w = sample(&[2, 4, 3, 3], 2);
    let p = Conv2dParams::default();
    assert!(
        x.conv2d(&sample(&[2, 3, 3, 3], 3), None, p).is_err(),
        "channel mismatch"
    );
    assert!(
        x.conv2d(&w, Some(&sample(&[3], 4)), p).is_err(),
        "bias length"
    );
    assert!(
        x.conv2d(&sample(&[2, 4, 7, 7], 5), None, p).is_err(),
        "kernel larger than input"
    );
    assert!(
        x.conv2d(&w, None, Conv2dParams { groups: 3, ..p }).is_err(),
        "groups"
    );
    assert!(
        x.conv2d(
            &w,
            None,
            Conv2dParams {
                stride: (0, 1),
                ..p
            }
        )
        .is_err(),
        "stride 0"
    );
    assert!(
        x.to_dtype(DType::F64)
            .conv2d(&w.to_dtype(DType::F64), None, p)
            .is_err(),
        "f64"
    );
    assert!(
        sample(&[4, 5, 5], 6).conv2d(&w, None, p).is_err(),
        "3-D input"
    );
    let y = x.conv2d(&w, None, p).unwrap();
    assert!(Tensor::conv2d_backward_input(&sample(&[1, 2, 2, 2], 7), x.shape(), &w, p).is_err());
    assert!(Tensor::conv2d_backward_weight(&sample(&[1, 2, 2, 2], 7), &x, w.shape(), p).is_err());
    assert!(Tensor::conv2d_backward_input(&y, &[1, 4, 5], &w, p).is_err());
}

/// An output too large for memory is an out-of-memory error naming the op (issue 13,
/// defect 7), not an abort: here 2^21 + 1 squared outputs (about 17.6 TB) from a 1×1 input
/// with a huge padding, and the same through the input gradient's shape.
#[test]
fn a_huge_convolution_is_an_out_of_memory_error() {
    let x = sample(&[1, 1, 1, 1], 1);
    let w = sample(&[1, 1, 1, 1], 2);
    let p = Conv2dParams {
        padding: (1 << 20, 1 << 20),
        ..Conv2dParams::default()
    };
    for det in [false, true] {
        let e = scope(det, false, || x.conv2d(&w, None, p)).unwrap_err();
        assert!(
            matches!(e, lockstep_tensor::Error::OutOfMemory { op: "conv2d", .. }),
            "{e:?}"
        );
    }
    // A depthwise 1×1 kernel with a stride as tall as the input: 2^21 channels of one output
    // each, but an input gradient of 2^21 × 2^20 values (8 TiB).
    let c = 1 << 21;
    let gy = Tensor::zeros(&[1, c, 1, 1], DType::F32).unwrap();
    let wd = Tensor::zeros(&[c, 1, 1, 1], DType::F32).unwrap();
    let pd = Conv2dParams {
        stride: (1 << 20, 1),
        groups: c,
        ..Conv2dParams::default()
    };
    let e = Tensor::conv2d_backward_input(&gy, &[1, c, 1 << 20, 1], &wd, pd).unwrap_err();
    assert!(
        matches!(
            e,
            lockstep_tensor::Error::OutOfMemory {
                op: "conv2d_input_grad",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn fast_conv_is_opt_in_and_scoped_per_thread() {
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let x = sample(&[1, 64, 24, 24], 41);
    let w = sample(&[64, 64, 3, 3], 42);
    let default = f32_bits(&x.conv2d(&w, None, p).unwrap());
    let fast = with_allow_fast_conv(true, || {
        assert!(lockstep_tensor::autotune::allow_fast_conv());
        // Nested scopes: the innermost wins, and the outer setting comes back.
        let inner = with_allow_fast_conv(false, || f32_bits(&x.conv2d(&w, None, p).unwrap()));
        assert_eq!(inner, default);
        f32_bits(&x.conv2d(&w, None, p).unwrap())
    });
    assert_ne!(fast, default, "Winograd rounds differently");
    // Allowed is not forced: where Winograd measured slower (the cnn model's 16 → 32 channels
    // at 4×4; the weight gradient below 32×32 outputs) the heuristic keeps im2col.
    let (xs, ws) = (sample(&[4, 16, 4, 4], 43), sample(&[32, 16, 3, 3], 44));
    assert_eq!(
        f32_bits(&with_allow_fast_conv(true, || xs
            .conv2d(&ws, None, p)
            .unwrap())),
        f32_bits(&xs.conv2d(&ws, None, p).unwrap())
    );
    let gy = sample(&[1, 64, 24, 24], 45);
    let gw = |on| {
        with_allow_fast_conv(on, || {
            f32_bits(&Tensor::conv2d_backward_weight(&gy, &x, w.shape(), p).unwrap())
        })
    };
    assert_eq!(gw(true), gw(false));
    assert!(!lockstep_tensor::autotune::allow_fast_conv());
    // Another thread does not see this thread's opt-in.
    with_allow_fast_conv(true, || {
        let (x, w) = (x.clone(), w.clone());
        let there = std::thread::spawn(move || f32_bits(&x.conv2d(&w, None, p).unwrap()));
        assert_eq!(there.join().unwrap(), default);
    });
    // The default is as accurate as a direct sum: within 1e-6 of the f64 reference per term.
    let y = x.conv2d(&w, None, p).unwrap();
    close(
        &y,
        &naive_conv(&x, &w, p)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<_>>(),
        64 * 9,
        "default conv",
    );
}

/// The batched im2col paths (several small samples per product) give each sample the bits it
/// gets alone, at any thread count.
#[test]
fn batched_small_convolutions_equal_per_sample_ones_at_any_thread_count() {
    for (xs, ws, p) in [
        (
            [64, 1, 8, 8],
            [16, 1, 3, 3],
            Conv2dParams {
                padding: (1, 1),
                ..Conv2dParams::default()
            },
        ),
        (
            [64, 16, 4, 4],
            [32, 16, 3, 3],
            Conv2dParams {
                padding: (1, 1),
                ..Conv2dParams::default()
            },
        ),
        // dcgan's discriminator: a 2×2 output makes the batch one chunk of samples, which
        // is cut into one chunk per thread (and its weight gradient's sum split by blocks).
        (
            [64, 64, 4, 4],
            [128, 64, 4, 4],
            Conv2dParams {
                stride: (2, 2),
                padding: (1, 1),
                ..Conv2dParams::default()
            },
        ),
        (
            [37, 4, 7, 5],
            [6, 2, 3, 2],
            Conv2dParams {
                stride: (2, 1),
                padding: (1, 2),
                dilation: (1, 2),
                groups: 2,
            },
        ),
    ] {
        let x = sample(&xs, 51);
        let w = sample(&ws, 52);
        let y = x.conv2d(&w, None, p).unwrap();
        let gy = sample(y.shape(), 53);
        same_bits_at_any_thread_count(&x, &w, &gy, p);
        // Sample by sample (a batch of one: no batching), the same bits.
        let per = y.numel() / xs[0];
        let gper = x.numel() / xs[0];
        let (yb, gb) = (
            y.to_vec::<f32>().unwrap(),
            Tensor::conv2d_backward_input(&gy, x.shape(), &w, p)
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
        );
        for n in [0, 1, xs[0] / 2, xs[0] - 1] {
            let xn = x.narrow(0, n, 1).unwrap().contiguous();
            let gyn = gy.narrow(0, n, 1).unwrap().contiguous();
            let yn = xn.conv2d(&w, None, p).unwrap();
            let gxn = Tensor::conv2d_backward_input(&gyn, xn.shape(), &w, p).unwrap();
            let bits_of = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                f32_bits(&yn),
                bits_of(&yb[n * per..(n + 1) * per]),
                "{xs:?} y[{n}]"
            );
            assert_eq!(
                f32_bits(&gxn),
                bits_of(&gb[n * gper..(n + 1) * gper]),
                "{xs:?} dx[{n}]"
            );
        }
        close(
            &y,
            &naive_conv(&x, &w, p)
                .iter()
                .map(|&v| v as f32)
                .collect::<Vec<_>>(),
            ws[1] * ws[2] * ws[3],
            "batched conv",
        );
    }
}

#[test]
fn the_traced_forward_output_includes_the_bias() {
    let mut g = lockstep_rng::Generator::with_seed(3);
    let x = Tensor::randn(&[2, 3, 6, 5], DType::F32, Some(&mut g)).unwrap();
    let w = Tensor::randn(&[4, 3, 3, 3], DType::F32, Some(&mut g)).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25], &[4]).unwrap();
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    let (y, recs) = lockstep_tensor::trace::capture(|| x.conv2d(&w, Some(&b), p).unwrap());
    let r = recs
        .iter()
        .find(|r| r.op == "conv2d")
        .expect("conv2d traced");
    let bytes: Vec<u8> = y
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let want = format!("{:016x}", lockstep_tensor::trace::hash_bytes(&bytes));
    assert_eq!(r.hash, want);
}
