//! The cost of one op call through dispatch, small ops first (where dispatch's own work is a
//! visible share of the call): the best of several rounds, in nanoseconds per call.
//!
//! `cargo run --release -p lockstep-tensor --example dispatch_overhead [THREADS]`

use lockstep_tensor::{DType, Tensor, set_num_threads};
use std::hint::black_box;
use std::time::Instant;

/// The best per-call time of `rounds` rounds of `calls` calls of `f`, in nanoseconds.
fn best_ns(calls: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_nanos() as f64 / calls as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() -> lockstep_tensor::Result<()> {
    if let Some(t) = std::env::args().nth(1).and_then(|a| a.parse().ok()) {
        set_num_threads(t);
    }
    let mut g = lockstep_rng::Generator::with_seed(1);
    let small = Tensor::randn(&[64], DType::F32, Some(&mut g))?;
    let mid = Tensor::randn(&[4096], DType::F32, Some(&mut g))?;
    let big = Tensor::randn(&[1 << 20], DType::F32, Some(&mut g))?;
    let m64 = Tensor::randn(&[64, 64], DType::F32, Some(&mut g))?;
    let m256 = Tensor::randn(&[256, 256], DType::F32, Some(&mut g))?;
    type Row<'a> = (&'static str, usize, Box<dyn Fn() + 'a>);
    let rows: [Row; 7] = [
        (
            "add [64]",
            200_000,
            Box::new(|| drop(black_box(small.add(&small)).unwrap())),
        ),
        (
            "exp [64]",
            200_000,
            Box::new(|| drop(black_box(small.exp()).unwrap())),
        ),
        (
            "add [4096]",
            50_000,
            Box::new(|| drop(black_box(mid.add(&mid)).unwrap())),
        ),
        (
            "sum [4096]",
            50_000,
            Box::new(|| drop(black_box(mid.sum()).unwrap())),
        ),
        (
            "add [2^20]",
            200,
            Box::new(|| drop(black_box(big.add(&big)).unwrap())),
        ),
        (
            "matmul 64x64",
            20_000,
            Box::new(|| drop(black_box(m64.matmul(&m64)).unwrap())),
        ),
        (
            "matmul 256x256",
            200,
            Box::new(|| drop(black_box(m256.matmul(&m256)).unwrap())),
        ),
    ];
    println!("threads {}", lockstep_tensor::get_num_threads());
    for (name, calls, f) in &rows {
        println!("{name:>16}  {:>12.1} ns/call", best_ns(*calls, 7, f));
    }
    Ok(())
}
