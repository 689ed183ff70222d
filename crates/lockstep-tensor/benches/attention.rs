//! The gpt's causal self-attention (the spec's default shape: batch 16, 64 tokens, width 128,
//! 4 heads; f32, dropout mask 0.1), forward and backward: the fused heads
//! (`Tensor::causal_self_attention` and its backward) against the composed ops they replace
//! (`matmul`, `causal_softmax`, `mul`, `matmul` and their backwards; the heads' merge left out),
//! which give the same bits.
//!
//! `cargo bench -p lockstep-tensor --bench attention` runs criterion; `LOCKSTEP_QUICK=1 cargo
//! bench -p lockstep-tensor --bench attention` prints the best of `LOCKSTEP_REPS` (default 200)
//! interleaved runs of each at 1 and 2 threads, which holds up better on a shared machine.

use criterion::{Criterion, criterion_group};
use lockstep_tensor::Tensor;
use lockstep_tensor::threads::with_num_threads;
use std::hint::black_box;
use std::time::Instant;

const B: usize = 16;
const T: usize = 64;
const C: usize = 128;
const NH: usize = 4;
const HD: usize = C / NH;

/// Uniform values in [−1, 1) from SplitMix64.
fn rand(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .map(|v| v * scale)
        .collect()
}

struct Inputs {
    qkv: Tensor,
    g: Tensor,
    mask: Tensor,
    scale: f64,
}

fn inputs() -> Inputs {
    let keep: Vec<f32> = rand(B * NH * T * T, 3, 1.0)
        .into_iter()
        .map(|u| if u < 0.8 { 1.0 / 0.9 } else { 0.0 })
        .collect();
    Inputs {
        qkv: Tensor::from_vec(rand(B * T * 3 * C, 1, 2.0), &[B, T, 3 * C]).unwrap(),
        g: Tensor::from_vec(rand(B * T * C, 2, 0.01), &[B, T, C]).unwrap(),
        mask: Tensor::from_vec(keep, &[B, NH, T, T]).unwrap(),
        scale: 1.0 / (HD as f64).sqrt(),
    }
}

fn fused(x: &Inputs) -> Tensor {
    let (y, att) = x
        .qkv
        .causal_self_attention(NH, x.scale, Some(&x.mask))
        .unwrap();
    black_box(y);
    x.g.causal_self_attention_backward(&x.qkv, &att, Some(&x.mask), NH, x.scale)
        .unwrap()
}

fn composed(x: &Inputs) -> Tensor {
    let parts = x
        .qkv
        .view(&[B as isize, T as isize, 3, NH as isize, HD as isize])
        .unwrap()
        .permute(&[2, 0, 3, 1, 4])
        .unwrap();
    let piece = |i: usize| parts.narrow(0, i, 1).unwrap().squeeze(0).unwrap();
    let (q, k, v) = (piece(0), piece(1), piece(2));
    let att = q
        .matmul(&k.transpose(-2, -1).unwrap())
        .unwrap()
        .causal_softmax(x.scale)
        .unwrap();
    let att_d = att.mul(&x.mask).unwrap();
    let y = att_d.matmul(&v).unwrap().transpose(1, 2).unwrap();
    black_box(y.reshape(&[B as isize, T as isize, C as isize]).unwrap());
    let gy =
        x.g.reshape(&[B as isize, T as isize, NH as isize, HD as isize])
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .try_contiguous()
            .unwrap();
    let g_att = gy
        .matmul(&v.transpose(-1, -2).unwrap())
        .unwrap()
        .mul(&x.mask)
        .unwrap();
    black_box(att_d.transpose(-1, -2).unwrap().matmul(&gy).unwrap());
    let gs = g_att.causal_softmax_backward(&att, x.scale).unwrap();
    black_box(gs.matmul(&k).unwrap());
    gs.transpose(-1, -2).unwrap().matmul(&q).unwrap()
}

fn bench(c: &mut Criterion) {
    let x = inputs();
    for threads in [1, 2] {
        c.bench_function(&format!("attention fused {threads}t"), |b| {
            b.iter(|| with_num_threads(threads, || fused(&x)))
        });
        c.bench_function(&format!("attention composed {threads}t"), |b| {
            b.iter(|| with_num_threads(threads, || composed(&x)))
        });
    }
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("LOCKSTEP_QUICK").is_none() {
        benches();
        Criterion::default().configure_from_args().final_summary();
        return;
    }
    let reps: usize = std::env::var("LOCKSTEP_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let x = inputs();
    // `LOCKSTEP_ONLY=fused` (or `composed`) runs one side only, for a profile.
    let only = std::env::var("LOCKSTEP_ONLY").unwrap_or_default();
    for threads in [1, 2] {
        let (mut bf, mut bc) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps {
            if only != "composed" {
                let t = Instant::now();
                black_box(with_num_threads(threads, || fused(&x)));
                bf = bf.min(t.elapsed().as_secs_f64());
            }
            if only != "fused" {
                let t = Instant::now();
                black_box(with_num_threads(threads, || composed(&x)));
                bc = bc.min(t.elapsed().as_secs_f64());
            }
        }
        println!(
            "attention fwd+bwd [{B}, {T}, {}] {NH} heads, {threads} thread(s): fused {:.3} ms, composed {:.3} ms ({:.2}x)",
            3 * C,
            bf * 1e3,
            bc * 1e3,
            bc / bf
        );
    }
}
