//! `sum_dim0_blocks` has the bits of one `sum_dim(0)` per block of rows added in the fixed
//! tree (what invariant seeding's micro-shards compute for a bias gradient), on odd shapes,
//! strided inputs, long blocks, signed zeros, infinities and NaNs, f32 and f64, at 1, 2, 3
//! and 8 threads.

use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// Values with many significant bits, of both signs and of mixed magnitudes (sums of them
/// depend on the order).
fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0;
            if i % 7 == 3 { v * 1e6 } else { v }
        })
        .collect()
}

/// The fixed tree over `parts` with `add_` (`tree_sum_blocks`' sum): `sum(lo..hi) =
/// sum(lo..mid) + sum(mid..hi)`, `mid = lo + ⌈(hi − lo) / 2⌉`.
fn tree(mut parts: Vec<Tensor>) -> Tensor {
    if parts.len() == 1 {
        return parts.pop().unwrap();
    }
    let right = parts.split_off(parts.len().div_ceil(2));
    let mut a = tree(parts);
    a.add_(&tree(right), 1.0).unwrap();
    a
}

/// The composed version the op replaces: one `sum_dim(0)` per block, then the tree.
fn composed(x: &Tensor, block: usize) -> Tensor {
    let n = x.shape()[0];
    if n == 0 {
        return x.sum_dim(0, false).unwrap();
    }
    let parts = (0..n.div_ceil(block))
        .map(|t| {
            let k0 = t * block;
            x.narrow(0, k0, block.min(n - k0))
                .unwrap()
                .sum_dim(0, false)
                .unwrap()
        })
        .collect();
    tree(parts)
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        _ => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect(),
    }
}

/// The op at 1, 2, 3 and 8 threads against the composed version (at 1 thread and at the
/// same count): the same shape and bits.
fn check(x: &Tensor, block: usize, what: &str) {
    let want = with_num_threads(1, || composed(x, block));
    assert_eq!(want.shape(), &x.shape()[1..], "{what}");
    for threads in [1, 2, 3, 8] {
        let (got, same) = with_num_threads(threads, || {
            (x.sum_dim0_blocks(block).unwrap(), composed(x, block))
        });
        assert_eq!(got.shape(), want.shape(), "{what}, {threads} threads");
        assert_eq!(
            bits(&same),
            bits(&want),
            "{what}: composed, {threads} threads"
        );
        assert_eq!(
            bits(&got),
            bits(&want),
            "{what}: block {block}, {threads} threads"
        );
    }
}

const SHAPES: &[(&[usize], usize)] = &[
    // (shape, block)
    (&[1, 1], 1),
    (&[64, 10], 8),
    (&[64, 64], 8),
    (&[30, 7], 8),
    (&[7, 3], 2),
    (&[5, 9], 1),
    (&[17, 33], 5),
    (&[40, 13], 64),
    (&[100, 3, 5], 9),
    (&[9], 4),
    (&[512, 100], 8),
    (&[1000, 70], 33),
    (&[300, 257], 100),
    (&[0, 6], 3),
    (&[6, 0], 4),
];

#[test]
fn blocks_give_the_bits_of_per_block_sum_dim_and_the_tree() {
    for (i, &(shape, block)) in SHAPES.iter().enumerate() {
        let n: usize = shape.iter().product();
        let x = Tensor::from_vec(vals(n, i as u64 + 1), shape).unwrap();
        check(&x, block, &format!("{shape:?}/{block} f32"));
        check(
            &x.to_dtype(DType::F64),
            block,
            &format!("{shape:?}/{block} f64"),
        );
    }
}

#[test]
fn blocks_longer_than_a_chunk() {
    // Blocks of more than `CHUNK` rows: each block's column sum is itself a tree of pieces.
    let (n, c) = (40_000, 3);
    let x = Tensor::from_vec(vals(n * c, 99), &[n, c]).unwrap();
    check(&x, 17_000, "long blocks");
    check(&x, 20_000, "two long blocks");
}

#[test]
fn strided_inputs_read_as_their_values() {
    // A transposed view and a narrowed one: the bits of the composed version on the view.
    let x = Tensor::from_vec(vals(13 * 40, 7), &[13, 40]).unwrap();
    let t = x.transpose(0, 1).unwrap();
    check(&t, 8, "transposed");
    let nar = x.narrow(1, 3, 20).unwrap();
    check(&nar, 4, "narrowed");
}

#[test]
fn signed_zeros_infinities_and_nans() {
    let specials = [
        -0.0f32,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MAX,
        -f32::MAX,
        1e-45,
        -1.5,
    ];
    // Columns of: all -0.0; -0.0 with +0.0; +inf then -inf in another block; NaN; overflow.
    let (n, c) = (24, 6);
    let mut v = vec![0f32; n * c];
    for r in 0..n {
        v[r * c] = -0.0;
        v[r * c + 1] = if r % 3 == 0 { 0.0 } else { -0.0 };
        v[r * c + 2] = if r == 2 {
            f32::INFINITY
        } else if r == 17 {
            f32::NEG_INFINITY
        } else {
            1.0
        };
        v[r * c + 3] = if r == 9 { f32::NAN } else { -2.5 };
        v[r * c + 4] = f32::MAX;
        v[r * c + 5] = specials[(r * 7) % specials.len()];
    }
    let x = Tensor::from_vec(v, &[n, c]).unwrap();
    for block in [1, 2, 3, 5, 8, 24, 30] {
        check(&x, block, "specials");
        check(&x.to_dtype(DType::F64), block, "specials f64");
    }
    let want = bits(&composed(&x, 8));
    let got = bits(&x.sum_dim0_blocks(8).unwrap());
    // -0.0 sums to +0.0 (lanes start from +0), as `sum_dim`'s.
    assert_eq!(got[0], 0);
    assert_eq!(got, want);
}

#[test]
fn bad_arguments_are_errors() {
    let x = Tensor::from_vec(vals(6, 1), &[3, 2]).unwrap();
    assert!(x.sum_dim0_blocks(0).is_err());
    assert!(Tensor::scalar(1f32).sum_dim0_blocks(1).is_err());
    let i = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
    assert!(i.sum_dim0_blocks(2).is_err());
}
