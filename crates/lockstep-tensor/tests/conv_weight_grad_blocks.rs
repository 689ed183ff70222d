//! `conv2d_backward_weight_blocks` has the bits of one `conv2d_backward_weight` call per block
//! of samples added in the fixed tree (what invariant seeding's micro-shards compute), on many
//! shapes, strided inputs and 1, 2, 3 and 8 threads, and where the blocks' calls would run
//! another kernel (a pin, Winograd). Every instruction set: the kernel's unit test
//! (`ops::conv::implicit::blocks`).

use lockstep_tensor::autotune::{with_algorithm, with_allow_fast_conv};
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// Values with many significant bits, of both signs (sums of them round).
fn vals(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
        })
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|f| f.to_bits())
        .collect()
}

/// The blocks' own calls, added in the tree (`sum(lo..hi) = sum(lo..mid) + sum(mid..hi)`,
/// `mid = lo + ⌈(hi − lo) / 2⌉`).
fn per_block(gy: &Tensor, x: &Tensor, ws: &[usize], p: Conv2dParams, block: usize) -> Tensor {
    fn tree(parts: &[Tensor]) -> Tensor {
        if parts.len() == 1 {
            return parts[0].clone();
        }
        let mid = parts.len().div_ceil(2);
        let mut a = tree(&parts[..mid]).contiguous();
        a.add_(&tree(&parts[mid..]), 1.0).unwrap();
        a
    }
    let n = x.shape()[0];
    let parts: Vec<Tensor> = (0..n.div_ceil(block))
        .map(|b| {
            let (s, k) = (b * block, block.min(n - b * block));
            let (gk, xk) = (gy.narrow(0, s, k).unwrap(), x.narrow(0, s, k).unwrap());
            Tensor::conv2d_backward_weight(&gk, &xk, ws, p).unwrap()
        })
        .collect();
    tree(&parts)
}

fn params(stride: usize, padding: usize, dilation: usize, groups: usize) -> Conv2dParams {
    Conv2dParams {
        stride: (stride, stride),
        padding: (padding, padding),
        dilation: (dilation, dilation),
        groups,
    }
}

/// (input, weight, params, blocks)
type Case = ([usize; 4], [usize; 4], Conv2dParams, Vec<usize>);

fn cases() -> Vec<Case> {
    vec![
        // The cnn model's convolutions at batch 64 and a ragged batch.
        (
            [64, 1, 8, 8],
            [16, 1, 3, 3],
            params(1, 1, 1, 1),
            vec![8, 7, 64],
        ),
        (
            [64, 16, 4, 4],
            [32, 16, 3, 3],
            params(1, 1, 1, 1),
            vec![8, 1],
        ),
        (
            [29, 16, 4, 4],
            [32, 16, 3, 3],
            params(1, 1, 1, 1),
            vec![8, 10, 17],
        ),
        // Stride, padding, dilation, groups and odd sizes.
        ([11, 4, 9, 7], [6, 2, 3, 2], params(2, 1, 1, 2), vec![3, 4]),
        ([10, 6, 9, 9], [9, 2, 2, 3], params(1, 2, 2, 3), vec![5, 9]),
        ([13, 3, 5, 6], [5, 3, 1, 1], params(1, 0, 1, 1), vec![2, 13]),
        ([12, 40, 6, 6], [9, 40, 3, 3], params(1, 1, 1, 1), vec![8]),
        // Enough work for the blocks to run on several threads.
        (
            [32, 16, 12, 12],
            [32, 16, 3, 3],
            params(1, 1, 1, 1),
            vec![8, 3],
        ),
    ]
}

#[test]
fn one_call_gives_the_blocks_calls_added_in_the_tree_at_any_thread_count() {
    for (ci, (xs, ws, p, blocks)) in cases().into_iter().enumerate() {
        let x = vals(&xs, ci as u64 * 2 + 1);
        let y = x.conv2d(&vals(&ws, 99), None, p).unwrap();
        let gy = vals(y.shape(), ci as u64 * 2 + 2);
        for block in blocks {
            let want = bits(&with_num_threads(1, || per_block(&gy, &x, &ws, p, block)));
            for threads in [1, 2, 3, 8] {
                let got = with_num_threads(threads, || {
                    Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, block).unwrap()
                });
                assert_eq!(got.shape(), ws, "{xs:?} {ws:?}");
                assert_eq!(
                    bits(&got),
                    want,
                    "{xs:?} {ws:?} {p:?} block {block} {threads} threads"
                );
            }
        }
    }
}

#[test]
fn strided_and_offset_inputs_give_the_bits_of_contiguous_ones() {
    let p = params(1, 1, 1, 1);
    // The batch as a view: every other sample of a longer batch, and the channels permuted in.
    let big = vals(&[40, 16, 4, 4], 7);
    let x = big.narrow(0, 3, 24).unwrap();
    let gy_t = vals(&[24, 4, 4, 32], 8).permute(&[0, 3, 1, 2]).unwrap();
    assert!(!gy_t.is_contiguous());
    let ws = [32, 16, 3, 3];
    let want = bits(
        &Tensor::conv2d_backward_weight_blocks(&gy_t.contiguous(), &x.contiguous(), &ws, p, 8)
            .unwrap(),
    );
    assert_eq!(
        bits(&Tensor::conv2d_backward_weight_blocks(&gy_t, &x, &ws, p, 8).unwrap()),
        want
    );
    assert_eq!(bits(&per_block(&gy_t, &x, &ws, p, 8)), want);
}

#[test]
fn where_the_blocks_calls_run_another_kernel_it_makes_them() {
    // A pin (here the same kernel: the same bits either way).
    let (xs, ws, p) = ([20, 16, 4, 4], [32, 16, 3, 3], params(1, 1, 1, 1));
    let x = vals(&xs, 3);
    let gy = vals(&[20, 32, 4, 4], 4);
    let free = bits(&Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 8).unwrap());
    let pinned = with_algorithm("conv2d_weight_grad.fixed_parts", || {
        Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 8).unwrap()
    });
    assert_eq!(bits(&pinned), free);
    // Winograd, where fast convolution is allowed and the shapes prefer it: each block's call
    // runs it, and so does the blocked entry.
    let (xs, ws) = ([3, 64, 32, 32], [64, 64, 3, 3]);
    let x = vals(&xs, 5);
    let gy = vals(&[3, 64, 32, 32], 6);
    let (fast, want) = with_allow_fast_conv(true, || {
        (
            Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 2).unwrap(),
            per_block(&gy, &x, &ws, p, 2),
        )
    });
    assert_eq!(bits(&fast), bits(&want));
    let exact = bits(&Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 2).unwrap());
    assert_ne!(bits(&fast), exact, "the case must tell the kernels apart");
}

#[test]
fn bad_arguments_are_errors() {
    let p = params(1, 1, 1, 1);
    let (x, gy) = (vals(&[4, 2, 5, 5], 1), vals(&[4, 3, 5, 5], 2));
    let ws = [3, 2, 3, 3];
    assert!(Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 2).is_ok());
    let e = Tensor::conv2d_backward_weight_blocks(&gy, &x, &ws, p, 0).unwrap_err();
    assert!(e.to_string().contains("block"), "{e}");
    let short = vals(&[3, 3, 5, 5], 2);
    assert!(Tensor::conv2d_backward_weight_blocks(&short, &x, &ws, p, 2).is_err());
    assert!(Tensor::conv2d_backward_weight_blocks(&gy, &x, &[3, 2, 3], p, 2).is_err());
    let xd = x.to_dtype(DType::F64);
    assert!(Tensor::conv2d_backward_weight_blocks(&gy, &xd, &ws, p, 2).is_err());
    // An empty batch: zeros.
    let (x0, g0) = (vals(&[0, 2, 5, 5], 1), vals(&[0, 3, 5, 5], 1));
    let z = Tensor::conv2d_backward_weight_blocks(&g0, &x0, &ws, p, 2).unwrap();
    assert!(z.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
}
