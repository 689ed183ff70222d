//! `matmul_k_blocks` has the bits of one `matmul` per K block added in the fixed tree (what
//! invariant seeding's micro-shards compute), on many shapes, strided operands, every
//! instruction set and 1, 2, 3 and 8 threads.

use lockstep_tensor::ops::matmul::blocks::gemm_k_blocks_with;
use lockstep_tensor::ops::matmul::{GemmFloat, Isa, gemm_with};
use lockstep_tensor::threads::{Par, with_num_threads};
use lockstep_tensor::{DType, Tensor};

/// Values with many significant bits, of both signs (sums of them round).
fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
        })
        .collect()
}

/// The fixed tree over `parts`: `sum(lo..hi) = sum(lo..mid) + sum(mid..hi)`,
/// `mid = lo + ⌈(hi − lo) / 2⌉` (`lockstep train`'s micro-shard sum).
fn tree<T: Copy + core::ops::Add<Output = T>>(parts: &[Vec<T>]) -> Vec<T> {
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let mid = parts.len().div_ceil(2);
    let (a, b) = (tree(&parts[..mid]), tree(&parts[mid..]));
    a.iter().zip(&b).map(|(&x, &y)| x + y).collect()
}

/// The definition, written out: per block the fma chain from +0 in increasing k, then the tree.
fn reference<T: GemmFloat>(
    a: &[T],
    b: &[T],
    (m, n, k): (usize, usize, usize),
    block: usize,
) -> Vec<T> {
    if k == 0 {
        return vec![T::ZERO; m * n];
    }
    let parts: Vec<Vec<T>> = (0..k.div_ceil(block))
        .map(|t| {
            let (k0, k1) = (t * block, ((t + 1) * block).min(k));
            let mut c = vec![T::ZERO; m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut acc = T::ZERO;
                    for p in k0..k1 {
                        acc = a[i * k + p].mul_add(b[p * n + j], acc);
                    }
                    c[i * n + j] = acc;
                }
            }
            c
        })
        .collect();
    tree(&parts)
}

const SHAPES: &[(usize, usize, usize, usize)] = &[
    // (m, n, k, block)
    (1, 1, 1, 1),
    (3, 5, 7, 3),
    (12, 32, 64, 8),
    (13, 33, 64, 8),
    (10, 784, 64, 8),
    (128, 784, 64, 8),
    (25, 17, 30, 7),
    (64, 40, 30, 4),
    (7, 9, 20, 32),
    (6, 16, 300, 260),
    (50, 70, 513, 64),
    (300, 200, 96, 8),
];

#[test]
fn every_isa_gives_the_definition_and_the_per_block_gemm_calls() {
    for &(m, n, k, block) in SHAPES {
        let a = vals(m * k, (m * 1000 + k) as u64);
        let b = vals(k * n, (n * 1000 + k) as u64 + 7);
        let want = reference(&a, &b, (m, n, k), block);
        for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
            // The per-block products through `gemm` itself, then the tree.
            let parts: Vec<Vec<f32>> = (0..k.div_ceil(block))
                .map(|t| {
                    let (k0, kb) = (t * block, block.min(k - t * block));
                    let mut c = vec![0f32; m * n];
                    let (ab, bb) = (&a[k0..], &b[k0 * n..]);
                    gemm_with(
                        isa,
                        m,
                        n,
                        kb,
                        ab,
                        (k, 1),
                        bb,
                        (n, 1),
                        &mut c,
                        (n, 1),
                        &Par::new(1),
                    )
                    .unwrap();
                    c
                })
                .collect();
            let per_block = tree(&parts);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&per_block),
                bits(&want),
                "{isa:?} gemm per block {m}×{n}×{k}/{block}"
            );
            for threads in [1, 2, 3, 8] {
                let mut c = vec![f32::NAN; m * n];
                gemm_k_blocks_with(
                    isa,
                    (m, n, k),
                    block,
                    &a,
                    (k, 1),
                    &b,
                    (n, 1),
                    &mut c,
                    &Par::new(threads),
                )
                .unwrap();
                assert_eq!(
                    bits(&c),
                    bits(&want),
                    "{isa:?} {threads} threads {m}×{n}×{k}/{block}"
                );
                // A transposed in memory (as `Xᵀ·dY` reads it): the same bits.
                let at: Vec<f32> = (0..k * m).map(|q| a[(q % m) * k + q / m]).collect();
                let mut ct = vec![f32::NAN; m * n];
                gemm_k_blocks_with(
                    isa,
                    (m, n, k),
                    block,
                    &at,
                    (1, m),
                    &b,
                    (n, 1),
                    &mut ct,
                    &Par::new(threads),
                )
                .unwrap();
                assert_eq!(
                    bits(&ct),
                    bits(&want),
                    "{isa:?} {threads} threads, A transposed"
                );
            }
        }
    }
}

#[test]
fn the_tensor_op_is_the_sum_of_block_matmuls_at_every_thread_count() {
    for &(m, n, k, block) in SHAPES {
        // `Xᵀ·dY` as the weight gradient reads it: A a transposed view.
        let a = Tensor::from_vec(vals(k * m, 3 + m as u64), &[k, m])
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let b = Tensor::from_vec(vals(k * n, 5 + n as u64), &[k, n]).unwrap();
        let parts: Vec<Vec<f32>> = (0..k.div_ceil(block))
            .map(|t| {
                let (k0, kb) = (t * block, block.min(k - t * block));
                let x = a
                    .narrow(1, k0, kb)
                    .unwrap()
                    .matmul(&b.narrow(0, k0, kb).unwrap());
                x.unwrap().to_vec::<f32>().unwrap()
            })
            .collect();
        let want: Vec<u32> = tree(&parts).iter().map(|x| x.to_bits()).collect();
        for threads in [1, 2, 3, 8] {
            let got = with_num_threads(threads, || a.matmul_k_blocks(&b, block)).unwrap();
            assert_eq!(got.shape(), [m, n]);
            let got: Vec<u32> = got
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(got, want, "{m}×{n}×{k}/{block}, {threads} threads");
        }
    }
    // f64 as well.
    let a = Tensor::from_vec(
        vals(40 * 9, 1)
            .iter()
            .map(|&x| x as f64 / 3.0)
            .collect::<Vec<_>>(),
        &[9, 40],
    )
    .unwrap();
    let b = Tensor::from_vec(
        vals(40 * 11, 2)
            .iter()
            .map(|&x| x as f64 / 7.0)
            .collect::<Vec<_>>(),
        &[40, 11],
    )
    .unwrap();
    let want = reference(
        &a.to_vec::<f64>().unwrap(),
        &b.to_vec::<f64>().unwrap(),
        (9, 11, 40),
        6,
    );
    let got = a.matmul_k_blocks(&b, 6).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(
        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn bad_arguments_are_errors() {
    let a = Tensor::from_vec(vals(12, 1), &[3, 4]).unwrap();
    let b = Tensor::from_vec(vals(20, 2), &[4, 5]).unwrap();
    assert!(a.matmul_k_blocks(&b, 0).is_err(), "block 0");
    assert!(b.matmul_k_blocks(&a, 2).is_err(), "inner dimensions");
    assert!(
        a.reshape(&[12]).unwrap().matmul_k_blocks(&b, 2).is_err(),
        "1-D"
    );
    assert!(
        a.matmul_k_blocks(&b.to_dtype(DType::F64), 2).is_err(),
        "dtypes"
    );
    let i = Tensor::from_vec(vec![1i64; 12], &[3, 4]).unwrap();
    assert!(i.matmul_k_blocks(&b, 2).is_err(), "integers");
    // K = 0: zeros, as `matmul`.
    let z = Tensor::zeros(&[3, 0], DType::F32)
        .unwrap()
        .matmul_k_blocks(&Tensor::zeros(&[0, 5], DType::F32).unwrap(), 4);
    assert_eq!(z.unwrap().to_vec::<f32>().unwrap(), vec![0.0; 15]);
}
