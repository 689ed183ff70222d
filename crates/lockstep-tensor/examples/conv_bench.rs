//! Times conv2d and its two backward primitives on the shape (3×3, 64→64 channels,
//! 56×56, batch 8, padding 1) at 1 and 2 threads, deterministic and not, and prints one JSON
//! object per line: `{"name", "threads", "seconds"}` (best of N). `bench/conv.py` runs this
//! beside PyTorch.

use lockstep_tensor::deterministic::scope;
use lockstep_tensor::ops::conv::Conv2dParams;
use lockstep_tensor::threads::with_num_threads;
use lockstep_tensor::{DType, Tensor};
use std::time::Instant;

fn best(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// A named benchmark body.
type Row<'a> = (&'static str, Box<dyn Fn() + 'a>);

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mut g = lockstep_rng::Generator::with_seed(0);
    let x = Tensor::randn(&[8, 64, 56, 56], DType::F32, Some(&mut g)).unwrap();
    let w = Tensor::randn(&[64, 64, 3, 3], DType::F32, Some(&mut g)).unwrap();
    let gy = Tensor::randn(&[8, 64, 56, 56], DType::F32, Some(&mut g)).unwrap();
    let p = Conv2dParams {
        padding: (1, 1),
        ..Conv2dParams::default()
    };
    for threads in [1, 2] {
        for det in [false, true] {
            let mode = if det { "det" } else { "nondet" };
            let rows: [Row; 3] = [
                (
                    "conv2d forward",
                    Box::new(|| drop(x.conv2d(&w, None, p).unwrap())),
                ),
                (
                    "conv2d input grad",
                    Box::new(|| {
                        drop(Tensor::conv2d_backward_input(&gy, x.shape(), &w, p).unwrap())
                    }),
                ),
                (
                    "conv2d weight grad",
                    Box::new(|| {
                        drop(Tensor::conv2d_backward_weight(&gy, &x, w.shape(), p).unwrap())
                    }),
                ),
            ];
            for (name, f) in rows {
                let s = with_num_threads(threads, || scope(det, false, || best(runs, &f)));
                println!(
                    "{{\"name\": \"{name}\", \"mode\": \"{mode}\", \"threads\": {threads}, \"seconds\": {s:.6}}}"
                );
            }
        }
    }
}
