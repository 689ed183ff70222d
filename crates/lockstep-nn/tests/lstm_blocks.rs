//! An LSTM run once over a whole batch inside `with_batch_blocks` gives every parameter the
//! bits of the fixed-tree sum of separate micro-shards' gradients (invariant seeding's
//! definition): one and two layers, both directions, hidden sizes on the fused kernels'
//! paths (12: `linear`'s projection and the GEMM weight gradient; 16: the fused projection;
//! 64: `W_hh` read in place), short last blocks, 1, 2, 3 and 8 threads, the `.gemm` layer pinned,
//! and f64.

use lockstep_nn::batch_blocks::{tree_reduce, with_batch_blocks};
use lockstep_nn::rnn::{Rnn, RnnConfig};
use lockstep_nn::{Forward, Module, Var};
use lockstep_tensor::autotune::with_algorithm;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};

/// SplitMix64 uniforms in `[-scale, scale)`.
fn values(n: usize, scale: f64, mut seed: u64) -> Vec<f64> {
    (0..n)
        .map(|_| {
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn tensor(shape: &[usize], scale: f64, seed: u64, dtype: DType) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(values(n, scale, seed), shape)
        .unwrap()
        .to_dtype(dtype)
}

struct Case {
    layers: usize,
    bidirectional: bool,
    hidden: usize,
    batch: usize,
    block: usize,
    dtype: DType,
}

fn model(c: &Case) -> Rnn {
    let rnn = Rnn::lstm(RnnConfig {
        num_layers: c.layers,
        batch_first: true,
        bidirectional: c.bidirectional,
        ..RnnConfig::new(8, c.hidden)
    })
    .unwrap();
    rnn.to_dtype(c.dtype).unwrap();
    for (k, p) in rnn.parameters().iter().enumerate() {
        let scale = 1.5 / (c.hidden as f64).sqrt();
        p.set_data(tensor(p.shape(), scale, 1000 + k as u64, c.dtype))
            .unwrap();
    }
    rnn
}

/// `Σ out ⊙ weights` over the rows given.
fn loss(rnn: &Rnn, x: &Tensor, weights: &Tensor) -> Var {
    let out = rnn.forward(&Var::constant(x.clone())).unwrap();
    out.mul(&Var::constant(weights.clone()))
        .unwrap()
        .sum()
        .unwrap()
}

fn grads(rnn: &Rnn) -> Vec<Tensor> {
    rnn.parameters()
        .iter()
        .map(|p| p.grad().expect("a gradient"))
        .collect()
}

fn bits(ts: &[Tensor]) -> Vec<Vec<u64>> {
    ts.iter()
        .map(|t| {
            let v = t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
            let f32s = t.dtype() == DType::F32;
            v.iter()
                .map(|x| {
                    if f32s {
                        u64::from((*x as f32).to_bits())
                    } else {
                        x.to_bits()
                    }
                })
                .collect()
        })
        .collect()
}

/// (whole batch in blocks, micro-shards apart) gradients' bits.
fn both(c: &Case) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    let rnn = model(c);
    let x = tensor(&[c.batch, 6, 8], 1.0, 7, c.dtype);
    let dirs = if c.bidirectional { 2 } else { 1 };
    let w = tensor(&[c.batch, 6, dirs * c.hidden], 1.0, 8, c.dtype);
    rnn.parameters().iter().for_each(Var::zero_grad);
    with_batch_blocks(c.batch, c.block, || loss(&rnn, &x, &w).backward()).unwrap();
    let whole = grads(&rnn);
    let mut parts = Vec::new();
    for s in (0..c.batch).step_by(c.block) {
        let n = c.block.min(c.batch - s);
        rnn.parameters().iter().for_each(Var::zero_grad);
        loss(
            &rnn,
            &x.narrow(0, s, n).unwrap(),
            &w.narrow(0, s, n).unwrap(),
        )
        .backward()
        .unwrap();
        parts.push(grads(&rnn));
    }
    let apart = tree_reduce(parts, &mut |mut a: Vec<Tensor>, b: Vec<Tensor>| {
        for (a, b) in a.iter_mut().zip(&b) {
            a.add_(b, 1.0)?;
        }
        Ok::<_, lockstep_tensor::Error>(a)
    })
    .unwrap()
    .unwrap();
    (bits(&whole), bits(&apart))
}

#[test]
fn one_pass_in_blocks_is_the_micro_shard_sum_bit_for_bit() {
    for layers in [1, 2] {
        for bidirectional in [false, true] {
            for hidden in [12, 16, 64] {
                for (batch, block) in [(32, 8), (30, 8), (30, 7), (20, 4), (20, 32)] {
                    for threads in [1, 2, 3, 8] {
                        let c = Case {
                            layers,
                            bidirectional,
                            hidden,
                            batch,
                            block,
                            dtype: DType::F32,
                        };
                        let at = format!(
                            "{layers} layers, bidirectional {bidirectional}, hidden {hidden}, \
                             batch {batch} in {block}, {threads} threads"
                        );
                        let (whole, apart) = with_num_threads(threads, || both(&c));
                        assert_eq!(whole.len(), apart.len());
                        for (k, (w, a)) in whole.iter().zip(&apart).enumerate() {
                            assert!(w == a, "{at}: parameter {k}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_gemm_layer_and_f64_too() {
    for dtype in [DType::F32, DType::F64] {
        for hidden in [12, 64] {
            let c = Case {
                layers: 2,
                bidirectional: true,
                hidden,
                batch: 30,
                block: 7,
                dtype,
            };
            let (whole, apart) = with_algorithm("lstm_layer.gemm", || {
                with_algorithm("lstm_layer_backward.gemm", || both(&c))
            });
            assert!(whole == apart, "{dtype:?} hidden {hidden}");
        }
    }
}

#[test]
fn the_blocks_must_tell_orders_apart() {
    // The block sums are not the whole batch's one chain: otherwise the tests above would
    // prove nothing.
    let c = Case {
        layers: 1,
        bidirectional: false,
        hidden: 64,
        batch: 32,
        block: 8,
        dtype: DType::F32,
    };
    let rnn = model(&c);
    let x = tensor(&[c.batch, 6, 8], 1.0, 7, c.dtype);
    let w = tensor(&[c.batch, 6, c.hidden], 1.0, 8, c.dtype);
    rnn.parameters().iter().for_each(Var::zero_grad);
    loss(&rnn, &x, &w).backward().unwrap();
    let plain = bits(&grads(&rnn));
    let (whole, _) = both(&c);
    assert_ne!(plain, whole);
}
