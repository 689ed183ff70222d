//! `Tensor::causal_self_attention` and its backward against the composed ops they fuse
//! (`matmul`, `causal_softmax`, `mul`, `matmul`; their backwards; the heads merged with
//! `+ 0`), bit for bit: f32 and f64, shapes off the kernels' panel sizes, with and without a
//! dropout mask, at 1, 2, 3 and 8 threads (run under `LOCKSTEP_ISA=avx2` and `portable` too);
//! and the inputs where skipping the masked products needs care: a `−0` that the skipped
//! `+0·v` terms turn into `+0`, a zero softmax-backward row sum, non-finite values, a mask with
//! negative or infinite entries.

use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// Values in roughly [−1, 1) (a few ×4) from a fixed integer hash.
fn vals(n: usize, salt: u64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let h = (i.wrapping_add(salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as f64;
            (h / (1u64 << 23) as f64 - 1.0) * if i % 7 == 0 { 4.0 } else { 1.0 }
        })
        .collect()
}

fn t(v: Vec<f64>, shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_vec(v, shape).unwrap().to_dtype(dt)
}

/// A dropout-like mask: `1 / (1 − p)` or 0.
fn mask(shape: &[usize], dt: DType, salt: u64) -> Tensor {
    let n = shape.iter().product();
    let m = vals(n, salt)
        .into_iter()
        .map(|u| if u < 0.5 { 1.0 / 0.75 } else { 0.0 })
        .collect();
    t(m, shape, dt)
}

fn bits(x: &Tensor) -> Vec<u64> {
    let v = x.to_dtype(DType::F64).to_vec::<f64>().unwrap();
    v.iter()
        .map(|f| if f.is_nan() { u64::MAX } else { f.to_bits() })
        .collect()
}

/// q, k, v (`[B, nh, T, hd]` views), the weights `att` and the weights after the mask.
fn heads(qkv: &Tensor, nh: usize, scale: f64, m: Option<&Tensor>) -> [Tensor; 5] {
    let s = qkv.shape();
    let (b, tt, c) = (s[0] as isize, s[1] as isize, (s[2] / 3) as isize);
    let parts = qkv
        .view(&[b, tt, 3, nh as isize, c / nh as isize])
        .unwrap()
        .permute(&[2, 0, 3, 1, 4])
        .unwrap();
    let piece = |i: usize| parts.narrow(0, i, 1).unwrap().squeeze(0).unwrap();
    let (q, k, v) = (piece(0), piece(1), piece(2));
    let att = q
        .matmul(&k.transpose(-2, -1).unwrap())
        .unwrap()
        .causal_softmax(scale)
        .unwrap();
    let att_d = m.map_or(att.clone(), |m| att.mul(m).unwrap());
    [q, k, v, att, att_d]
}

/// The composed forward: `(y, att)`.
fn composed(qkv: &Tensor, nh: usize, scale: f64, m: Option<&Tensor>) -> (Tensor, Tensor) {
    let s = qkv.shape();
    let (b, tt, c) = (s[0] as isize, s[1] as isize, (s[2] / 3) as isize);
    let [_, _, v, att, att_d] = heads(qkv, nh, scale, m);
    let y = att_d
        .matmul(&v)
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .reshape(&[b, tt, c])
        .unwrap();
    (y, att)
}

/// The composed backward: `[B, T, 3C]`, each element `+ 0`.
fn composed_grad(g: &Tensor, qkv: &Tensor, nh: usize, scale: f64, m: Option<&Tensor>) -> Tensor {
    let s = qkv.shape();
    let (bi, ti, hi) = (s[0] as isize, s[1] as isize, nh as isize);
    let c = (s[2] / 3) as isize;
    let [q, k, v, att, att_d] = heads(qkv, nh, scale, m);
    let gy = g
        .reshape(&[bi, ti, hi, c / hi])
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .try_contiguous()
        .unwrap();
    let g_att_d = gy.matmul(&v.transpose(-1, -2).unwrap()).unwrap();
    let gv = att_d.transpose(-1, -2).unwrap().matmul(&gy).unwrap();
    let g_att = m.map_or(g_att_d.clone(), |m| g_att_d.mul(m).unwrap());
    let gs = g_att.causal_softmax_backward(&att, scale).unwrap();
    let gq = gs.matmul(&k).unwrap();
    let gk = gs.transpose(-1, -2).unwrap().matmul(&q).unwrap();
    // [3, B, nh, T, hd] → [B, T, 3, nh, hd], each element + 0.
    let stacked = Tensor::stack(&[gq, gk, gv], 0).unwrap();
    let merged = stacked
        .permute(&[1, 3, 0, 2, 4])
        .unwrap()
        .try_contiguous()
        .unwrap()
        .reshape(&[bi, ti, 3 * c])
        .unwrap();
    let zero = Tensor::zeros(merged.shape(), merged.dtype()).unwrap();
    merged.add(&zero).unwrap()
}

/// Forward and backward, fused against composed, at 1, 2, 3 and 8 threads.
fn check(qkv: &Tensor, g: &Tensor, nh: usize, scale: f64, m: Option<&Tensor>, what: &str) {
    let (y, att) = composed(qkv, nh, scale, m);
    let gx = composed_grad(g, qkv, nh, scale, m);
    for threads in [1, 2, 3, 8] {
        let (fy, fatt) =
            with_num_threads(threads, || qkv.causal_self_attention(nh, scale, m)).unwrap();
        assert_eq!(bits(&fy), bits(&y), "y {what} {threads} threads");
        assert_eq!(bits(&fatt), bits(&att), "att {what} {threads} threads");
        let fg = with_num_threads(threads, || {
            g.causal_self_attention_backward(qkv, &fatt, m, nh, scale)
        })
        .unwrap();
        assert_eq!(bits(&fg), bits(&gx), "grad {what} {threads} threads");
    }
}

#[test]
fn same_bits_as_the_composed_ops() {
    for dt in [DType::F32, DType::F64] {
        for (b, tt, nh, hd) in [
            (2, 5, 2, 4),
            (3, 17, 4, 8),
            (1, 64, 4, 32),
            (2, 40, 3, 5),
            (1, 70, 1, 16),
        ] {
            let c = nh * hd;
            let qkv = t(vals(b * tt * 3 * c, 1), &[b, tt, 3 * c], dt);
            let g = t(vals(b * tt * c, 2), &[b, tt, c], dt);
            let m = mask(&[b, nh, tt, tt], dt, 3);
            let scale = 1.0 / (hd as f64).sqrt();
            let what = format!("{dt:?} b {b} t {tt} nh {nh} hd {hd}");
            check(&qkv, &g, nh, scale, None, &what);
            check(&qkv, &g, nh, scale, Some(&m), &format!("{what} masked"));
        }
    }
}

#[test]
fn a_negative_zero_the_skipped_terms_make_positive() {
    // One head, 24 tokens, q = k = 0: row 1's weights are ½, ½. v's rows 0..12 (past the
    // first row panel of every kernel) are the smallest negative subnormal, so row 1's chain
    // over the panel's columns underflows to −0; the later columns' masked terms `+0·1` make it
    // +0 in the full chain.
    let (tt, hd) = (24, 2);
    let mut x = vec![0f32; tt * 3 * hd];
    for tok in 0..tt {
        for d in 0..hd {
            x[tok * 3 * hd + 2 * hd + d] = if tok < 12 {
                f32::from_bits(0x8000_0001)
            } else {
                1.0
            };
        }
    }
    let qkv = Tensor::from_vec(x, &[1, tt, 3 * hd]).unwrap();
    let (y, _) = composed(&qkv, 1, 1.0, None);
    let row1 = &y.to_vec::<f32>().unwrap()[hd..2 * hd];
    assert!(
        row1.iter().all(|v| v.to_bits() == 0),
        "the full chain gives +0: {row1:?}"
    );
    let g = t(vals(tt * hd, 5), &[1, tt, hd], DType::F32);
    check(&qkv, &g, 1, 1.0, None, "negative zero");
}

#[test]
fn special_values_take_the_full_products() {
    let (b, tt, nh, hd) = (2, 13, 2, 8);
    let c = nh * hd;
    let base = vals(b * tt * 3 * c, 7);
    let g = t(vals(b * tt * c, 8), &[b, tt, c], DType::F32);
    let m = mask(&[b, nh, tt, tt], DType::F32, 9);
    // A zero output-gradient row: its softmax-backward row sums are zero.
    let mut gz = g.to_vec::<f32>().unwrap();
    gz[3 * c..4 * c].fill(0.0);
    let gz = Tensor::from_vec(gz, &[b, tt, c]).unwrap();
    let qkv = t(base.clone(), &[b, tt, 3 * c], DType::F32);
    check(&qkv, &gz, nh, 0.35, Some(&m), "zero gradient row");
    // Non-finite q, k, v (a late v row infinite: a masked product for the early rows).
    for (at, v) in [
        (2 * c + 1, f64::INFINITY),
        (11 * 3 * c + 2 * c, f64::NAN),
        (5, -f64::INFINITY),
    ] {
        let mut x = base.clone();
        x[at] = v;
        let qkv = t(x, &[b, tt, 3 * c], DType::F32);
        check(&qkv, &g, nh, 0.35, Some(&m), &format!("{v} at {at}"));
    }
    // Masks with a negative and an infinite entry; a non-finite scale; huge values.
    for (at, v) in [(5, -1.0), (7, f64::INFINITY), (tt * tt + 3, -0.0)] {
        let mut mv = m.to_vec::<f32>().unwrap();
        mv[at] = v as f32;
        let m = Tensor::from_vec(mv, &[b, nh, tt, tt]).unwrap();
        check(&qkv, &g, nh, 0.35, Some(&m), &format!("mask {v} at {at}"));
    }
    check(&qkv, &g, nh, f64::INFINITY, None, "infinite scale");
    // Finite scores whose scaled values overflow (a row redone whole, the padding to whole
    // lane groups included): rows shorter and longer than 16 (the padding written into the
    // weights' row, and through a buffer).
    for tl in [13, 20, 37] {
        let qkv = t(vals(tl * 3 * c, 10), &[1, tl, 3 * c], DType::F32);
        let g = t(vals(tl * c, 11), &[1, tl, c], DType::F32);
        let m = mask(&[1, nh, tl, tl], DType::F32, 12);
        for scale in [f64::INFINITY, 1e38] {
            for mk in [Some(&m), None] {
                check(&qkv, &g, nh, scale, mk, &format!("t {tl} scale {scale}"));
            }
        }
    }
    let big = t(
        base.iter().map(|v| v * 1e18).collect(),
        &[b, tt, 3 * c],
        DType::F32,
    );
    let gbig = t(
        vals(b * tt * c, 8).iter().map(|v| v * 1e18).collect(),
        &[b, tt, c],
        DType::F32,
    );
    check(&big, &gbig, nh, 1e-36, None, "near overflow");
}

#[test]
fn bad_input_is_an_error() {
    let x = t(vals(2 * 4 * 12, 1), &[2, 4, 12], DType::F32);
    assert!(x.causal_self_attention(0, 1.0, None).is_err());
    assert!(x.causal_self_attention(5, 1.0, None).is_err());
    let flat = t(vals(12, 1), &[12], DType::F32);
    assert!(flat.causal_self_attention(2, 1.0, None).is_err());
    let ints = Tensor::from_vec(vec![1i64; 24], &[1, 2, 12]).unwrap();
    assert!(ints.causal_self_attention(2, 1.0, None).is_err());
    let wrong = mask(&[2, 2, 4, 3], DType::F32, 1);
    assert!(x.causal_self_attention(2, 1.0, Some(&wrong)).is_err());
    let m64 = mask(&[2, 2, 4, 4], DType::F64, 1);
    assert!(x.causal_self_attention(2, 1.0, Some(&m64)).is_err());
    let (_, att) = x.causal_self_attention(2, 1.0, None).unwrap();
    let g = t(vals(2 * 4 * 4, 2), &[2, 4, 4], DType::F32);
    assert!(
        g.causal_self_attention_backward(&x, &att, None, 2, 1.0)
            .is_ok()
    );
    let g_wrong = t(vals(2 * 4 * 5, 2), &[2, 4, 5], DType::F32);
    assert!(
        g_wrong
            .causal_self_attention_backward(&x, &att, None, 2, 1.0)
            .is_err()
    );
    let att_wrong = t(vals(2 * 2 * 4 * 3, 2), &[2, 2, 4, 3], DType::F32);
    assert!(
        g.causal_self_attention_backward(&x, &att_wrong, None, 2, 1.0)
            .is_err()
    );
    assert!(
        g.causal_self_attention_backward(&x, &att, Some(&m64), 2, 1.0)
            .is_err()
    );
}

#[test]
fn empty_shapes_give_empty_results() {
    // No tokens, no batch, a head size of 0: the composed ops' (empty or zero) results.
    for (shape, nh) in [([2, 0, 12], 2), ([0, 3, 12], 2), ([2, 3, 0], 2)] {
        let x = t(vec![0.0; shape.iter().product()], &shape, DType::F32);
        let g = t(
            vec![0.0; shape[0] * shape[1] * shape[2] / 3],
            &[shape[0], shape[1], shape[2] / 3],
            DType::F32,
        );
        check(&x, &g, nh, 1.0, None, &format!("{shape:?}"));
    }
}
