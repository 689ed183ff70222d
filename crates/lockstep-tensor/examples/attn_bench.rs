//! Times the six per-head products of one causal self-attention layer's training step
//! (gpt's shape: batch 16, 4 heads, T 64, head size 32) on one thread, with q, k, v as the
//! strided head views of a `[B, T, 3C]` projection and as dense copies.
//!
//! Usage: `attn_bench [RUNS]`.

use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::time::Instant;

fn best(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut wall = f64::INFINITY;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        wall = wall.min(t.elapsed().as_secs_f64());
    }
    wall
}

fn main() -> lockstep_tensor::Result<()> {
    let runs: usize = std::env::args().nth(1).map_or(50, |s| s.parse().unwrap());
    let (b, t, nh, hd) = (16usize, 64usize, 4usize, 32usize);
    let c = nh * hd;
    let qkv = Tensor::randn(&[b, t, 3 * c], DType::F32, None)?;
    let parts = qkv
        .view(&[b as isize, t as isize, 3, nh as isize, hd as isize])?
        .permute(&[2, 0, 3, 1, 4])?;
    let piece = |i: usize| parts.narrow(0, i, 1).and_then(|p| p.squeeze(0));
    let (q, k, v) = (piece(0)?, piece(1)?, piece(2)?);
    let (qd, kd, vd) = (q.contiguous(), k.contiguous(), v.contiguous());
    let att = Tensor::rand(&[b, nh, t, t], DType::F32, None)?;
    let gy = Tensor::randn(&[b, nh, t, hd], DType::F32, None)?;
    with_num_threads(1, || -> lockstep_tensor::Result<()> {
        for (name, q, k, v) in [("strided", &q, &k, &v), ("dense", &qd, &kd, &vd)] {
            let kt = k.transpose(-2, -1)?;
            let s = best(runs, || drop(q.matmul(&kt).unwrap()));
            let av = best(runs, || drop(att.matmul(v).unwrap()));
            let vt = v.transpose(-1, -2)?;
            let ga = best(runs, || drop(gy.matmul(&vt).unwrap()));
            let at = att.transpose(-1, -2)?;
            let gv = best(runs, || drop(at.matmul(&gy).unwrap()));
            let gq = best(runs, || drop(att.matmul(k).unwrap()));
            let qt = q.transpose(-1, -2)?;
            let gk = best(runs, || drop(qt.matmul(&att).unwrap()));
            let macs = (b * nh * t * t * hd) as f64;
            let tot = s + av + ga + gv + gq + gk;
            println!(
                "{name}: q·kT {:.1} att·v {:.1} gy·vT {:.1} attT·gy {:.1} g·k {:.1} qT·g {:.1} µs; total {:.1} µs = {:.1} GMAC/s",
                s * 1e6,
                av * 1e6,
                ga * 1e6,
                gv * 1e6,
                gq * 1e6,
                gk * 1e6,
                tot * 1e6,
                6.0 * macs / tot / 1e9
            );
        }
        Ok(())
    })
}
