//! `conv_transpose2d`: the input gradient of `conv2d` under its own name (the same bits),
//! the bias, thread invariance in deterministic mode, and bad input. Its values against
//! PyTorch are checked in lockstep-nn's `layers27.rs` (`tools/golden_layers27.py`).

use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

fn sample(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(
        shape,
        DType::F32,
        Some(&mut lockstep_rng::Generator::with_seed(seed)),
    )
    .unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

fn params(stride: usize, padding: usize, groups: usize) -> Conv2dParams {
    Conv2dParams {
        stride: (stride, stride),
        padding: (padding, padding),
        groups,
        ..Conv2dParams::default()
    }
}

/// The output shape follows PyTorch's formula, and the values are conv2d's input gradient
/// (output_padding only widens the output, whose last rows then get no contribution from a
/// strided position) plus the bias per channel.
#[test]
fn is_conv2d_input_grad_plus_bias() {
    for (p, op, xs, ws) in [
        (params(2, 1, 1), (1, 1), [2, 3, 4, 4], [3, 4, 4, 4]),
        (params(1, 0, 1), (0, 0), [2, 5, 1, 1], [5, 2, 4, 4]),
        (params(2, 0, 2), (1, 0), [2, 4, 3, 3], [4, 3, 3, 3]),
        (
            Conv2dParams {
                stride: (2, 3),
                padding: (1, 0),
                ..Conv2dParams::default()
            },
            (1, 2),
            [1, 2, 3, 4],
            [2, 3, 3, 2],
        ),
    ] {
        let (x, w) = (sample(&xs, 1), sample(&ws, 2));
        let cout = ws[1] * p.groups;
        let b = sample(&[cout], 3);
        let y = x.conv_transpose2d(&w, Some(&b), p, op).unwrap();
        let ho = (xs[2] - 1) * p.stride.0 + ws[2] + op.0 - 2 * p.padding.0;
        let wo = (xs[3] - 1) * p.stride.1 + ws[3] + op.1 - 2 * p.padding.1;
        assert_eq!(y.shape(), &[xs[0], cout, ho, wo], "{p:?}");
        let want = Tensor::conv2d_backward_input(&x, y.shape(), &w, p)
            .unwrap()
            .add(&b.reshape(&[1, cout as isize, 1, 1]).unwrap())
            .unwrap();
        assert_eq!(bits(&y), bits(&want), "{p:?}");
    }
}

#[test]
fn deterministic_conv_transpose2d_is_thread_invariant() {
    // Big enough for the kernels to split work across threads (over 2^21 multiply-adds).
    let p = params(2, 1, 1);
    let (x, w, b) = (
        sample(&[4, 32, 16, 16], 4),
        sample(&[32, 16, 4, 4], 5),
        sample(&[16], 6),
    );
    let run = || {
        scope(true, false, || {
            bits(&x.conv_transpose2d(&w, Some(&b), p, (0, 0)).unwrap())
        })
    };
    let one = with_num_threads(1, run);
    for t in [2, 3, 8] {
        assert_eq!(with_num_threads(t, run), one, "threads = {t}");
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let x = sample(&[1, 3, 4, 4], 1);
    let w = sample(&[3, 2, 3, 3], 2);
    let p = params(2, 0, 1);
    let err = |r: lockstep_tensor::Result<Tensor>, pieces: &[&str]| {
        let e = r.unwrap_err().to_string();
        for piece in pieces {
            assert!(e.contains(piece), "{e:?} lacks {piece:?}");
        }
    };
    err(
        x.conv_transpose2d(&sample(&[4, 2, 3, 3], 2), None, p, (0, 0)),
        &["conv_transpose2d", "weight", "[4, 2, 3, 3]"],
    );
    err(
        x.conv_transpose2d(&w, None, p, (2, 0)),
        &[
            "conv_transpose2d",
            "output_padding",
            "smaller than the stride",
        ],
    );
    err(
        sample(&[3, 4, 4], 1).conv_transpose2d(&w, None, p, (0, 0)),
        &["conv_transpose2d", "input", "[3, 4, 4]"],
    );
    err(
        x.conv_transpose2d(&w, Some(&sample(&[3], 3)), p, (0, 0)),
        &["conv_transpose2d"],
    );
    err(
        x.conv_transpose2d(&w, None, params(1, 5, 1), (0, 0)),
        &["conv_transpose2d", "empty"],
    );
    err(
        x.conv_transpose2d(&w, None, params(2, 0, 2), (0, 0)),
        &["conv_transpose2d", "groups"],
    );
    err(
        x.to_dtype(DType::F64)
            .conv_transpose2d(&w.to_dtype(DType::F64), None, p, (0, 0)),
        &["conv_transpose2d", "F64"],
    );
}
