//! Times NumPy's `gamma`, `beta`, `poisson` and `binomial` as lockstep draws them, on
//! `Generator` (PCG64, `default_rng(0)`) and `RandomState(0)`, and prints one JSON object per
//! line: `{"name", "seconds" (best of N runs), "elements", "checksum"}`. The checksum is the
//! wrapping sum of the first run's values as 64-bit patterns (f64 bits or i64), so
//! `bench/distributions.py` can check that NumPy drew the same bits in the same run.
//!
//! `cargo run --release -p lockstep-rng --example bench_distributions -- [RUNS] [N] [FILTER]`
//! (FILTER: only the cases whose name, e.g. `RandomState.poisson(4.5)`, contains it).

use lockstep_rng::compat::numpy::{Distributions, RandomState, default_rng};
use std::hint::black_box;
use std::time::Instant;

/// The cases: (name, parameters) — two per distribution, one per algorithm branch.
const CASES: [(&str, f64, f64); 8] = [
    ("gamma", 2.5, 1.0),
    ("gamma", 0.5, 1.0),
    ("beta", 2.0, 3.0),
    ("beta", 0.5, 0.7),
    ("poisson", 4.5, 0.0),
    ("poisson", 57.3, 0.0),
    ("binomial", 10.0, 0.3),
    ("binomial", 1000.0, 0.4),
];

enum Buf {
    F(Vec<f64>),
    I(Vec<i64>),
}

impl Buf {
    fn checksum(&self) -> u64 {
        match self {
            Buf::F(v) => v.iter().fold(0u64, |a, x| a.wrapping_add(x.to_bits())),
            Buf::I(v) => v.iter().fold(0u64, |a, &x| a.wrapping_add(x as u64)),
        }
    }
}

fn draw<D: Distributions>(d: &mut D, name: &str, a: f64, b: f64, out: &mut Buf) {
    let r = match (name, out) {
        ("gamma", Buf::F(v)) => d.gamma(a, b, black_box(v)),
        ("beta", Buf::F(v)) => d.beta(a, b, black_box(v)),
        ("poisson", Buf::I(v)) => d.poisson(a, black_box(v)),
        ("binomial", Buf::I(v)) => d.binomial(a as i64, b, black_box(v)),
        _ => unreachable!("{name}"),
    };
    r.expect("valid parameters");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let filter = args.next().unwrap_or_default();
    for class in ["Generator", "RandomState"] {
        for (name, a, b) in CASES {
            let params = if name == "binomial" {
                format!("{}, {b}", a as i64)
            } else if name == "poisson" {
                format!("{a}")
            } else {
                format!("{a}, {b}")
            };
            let full = format!("{class}.{name}({params})");
            if !full.contains(&filter) {
                continue;
            }
            let mut buf = if matches!(name, "gamma" | "beta") {
                Buf::F(vec![0.0; n])
            } else {
                Buf::I(vec![0; n])
            };
            let mut best = f64::INFINITY;
            let mut checksum = 0;
            for run in 0..=runs {
                // A fresh generator per run: every run draws the values NumPy's first call does.
                let t = Instant::now();
                if class == "Generator" {
                    draw(&mut default_rng(0), name, a, b, &mut buf);
                } else {
                    draw(&mut RandomState::new(0), name, a, b, &mut buf);
                }
                let s = t.elapsed().as_secs_f64();
                if run == 0 {
                    checksum = buf.checksum(); // the first run also warms up
                } else {
                    best = best.min(s);
                }
            }
            println!(
                "{{\"name\": \"{full}\", \"seconds\": {best:.6}, \
                 \"elements\": {n}, \"checksum\": {checksum}}}"
            );
        }
    }
}
