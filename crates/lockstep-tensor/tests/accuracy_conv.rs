//! Accuracy of the default convolution against a float64 reference, next to PyTorch's error on
//! the same data (issue 15, "Accuracy"; the other families are in `tests/accuracy.rs`, the
//! data and PyTorch's figures come from `tools/accuracy_torch.py`).
//!
//! The default (no fast-convolution opt-in) sums each output's terms directly, so its error
//! must stay within a small multiple of PyTorch's; the error is `max|y - ref| / max|ref|`.

mod common;

use lockstep_tensor::Tensor;
use lockstep_tensor::ops::conv::Conv2dParams;

const U: f64 = 1.0 / (1u64 << 24) as f64;

fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The script's "signed" data (uniform in [-10, 10), rounded to f32) divided by 10 in f32.
fn signed_tenths(seed: u64, n: usize) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let u = (splitmix64(i.wrapping_add(seed << 40)) >> 40) as f64 * U;
            (u * 20.0 - 10.0) as f32 / 10.0
        })
        .collect()
}

/// Direct float64 convolution (stride 1, no dilation, one group).
fn conv64(x: &[f32], xs: &[usize], w: &[f32], ws: &[usize], pad: usize) -> Vec<f64> {
    let (n, ci, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (co, kh, kw) = (ws[0], ws[2], ws[3]);
    let (oh, ow) = (h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1);
    let mut out = vec![0f64; n * co * oh * ow];
    for b in 0..n {
        for o in 0..co {
            for y in 0..oh {
                for xx in 0..ow {
                    let mut s = 0f64;
                    for c in 0..ci {
                        for i in 0..kh {
                            for j in 0..kw {
                                let (iy, ix) = (
                                    (y + i) as isize - pad as isize,
                                    (xx + j) as isize - pad as isize,
                                );
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((b * ci + c) * h + iy as usize) * wd + ix as usize];
                                let wv = w[((o * ci + c) * kh + i) * kw + j];
                                s += xv as f64 * wv as f64;
                            }
                        }
                    }
                    out[((b * co + o) * oh + y) * ow + xx] = s;
                }
            }
        }
    }
    out
}

#[test]
fn default_convolution_is_as_accurate_as_pytorch() {
    let doc = common::golden("accuracy.json");
    let mut seen = 0;
    for c in doc["cases"].as_array().unwrap() {
        if c["op"] != "conv2d" {
            continue;
        }
        let name = c["name"].as_str().unwrap();
        let xs = common::dims(&c["shape"]);
        let ws = common::dims(&c["weight_shape"]);
        let pad = c["padding"].as_u64().unwrap() as usize;
        let x = signed_tenths(c["seed"].as_u64().unwrap(), xs.iter().product());
        let w = signed_tenths(c["weight_seed"].as_u64().unwrap(), ws.iter().product());
        let r = conv64(&x, &xs, &w, &ws, pad);
        let p = Conv2dParams {
            padding: (pad, pad),
            ..Default::default()
        };
        let y = Tensor::from_vec(x, &xs)
            .unwrap()
            .conv2d(&Tensor::from_vec(w, &ws).unwrap(), None, p)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        let num = y
            .iter()
            .zip(&r)
            .map(|(&a, &b)| (a as f64 - b).abs())
            .fold(0.0, f64::max);
        let ours = num / r.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let torch = c["torch_error"].as_f64().unwrap();
        // Direct sums (one fma chain per output, as PyTorch's CPU kernels): within 2x.
        let bound = 2.0 * torch + 4.0 * U;
        println!("{name:<28} ours {ours:.3e}  PyTorch {torch:.3e}  bound {bound:.3e}");
        assert!(
            ours <= bound,
            "{name}: relative error {ours:.3e} > bound {bound:.3e} (2 x PyTorch's {torch:.3e} + 4 U)"
        );
        seen += 1;
    }
    assert_eq!(seen, 2);
}
