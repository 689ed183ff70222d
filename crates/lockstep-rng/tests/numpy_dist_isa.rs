//! NumPy's gamma, beta and Poisson samplers on every instruction-set path (`set_isa`, which
//! `LOCKSTEP_ISA` also selects): the batched paths (the legacy Marsaglia–Tsang loop with its
//! pairs' logs eight lanes at a time, the `shape < 1` loop, the Poisson product chains sixteen
//! side by side on AVX2 and thirty-two on AVX-512) give the values of one-at-a-time drawing
//! (calls of size 1) and leave the generator in the same state, on every path. The golden
//! values from NumPy itself are in `tests/golden/numpy_dist_blocks.json` (checked by
//! `lockstep-cli`'s golden test).

use lockstep_rng::compat::numpy::{Distributions, RandomState, default_rng};
use lockstep_rng::isa::{Isa, set_isa};

/// (name, a, b) over the batched paths' branches.
const CASES: [(&str, f64, f64); 12] = [
    ("gamma", 2.5, 1.0),
    // Shapes near 1: many pairs computed at once, attempts with `v <= 0` (no uniform).
    ("gamma", 1.0001, 2.0),
    ("gamma", 1.3, 1.0),
    // Shapes below 1: the batched Ahrens–Dieter loop (logs and powers eight lanes at a time).
    ("gamma", 0.5, 2.0),
    ("gamma", 0.05, 1.0),
    ("beta", 2.0, 3.0),
    // Attempts whose shape decides whether they draw a uniform end a legacy batch.
    ("beta", 1.0001, 30.0),
    ("beta", 40.0, 1.001),
    ("poisson", 4.5, 0.0),
    ("poisson", 0.3, 0.0),
    ("poisson", 9.9, 0.0),
    ("poisson", 1e-9, 0.0),
];

/// One call of `n` values, as bit patterns.
fn draw<D: Distributions>(d: &mut D, (name, a, b): (&str, f64, f64), n: usize) -> Vec<u64> {
    let mut f = vec![0.0; n];
    let mut k = vec![0i64; n];
    match name {
        "gamma" => d.gamma(a, b, &mut f).unwrap(),
        "beta" => d.beta(a, b, &mut f).unwrap(),
        _ => d.poisson(a, &mut k).unwrap(),
    }
    if name == "poisson" {
        k.iter().map(|&x| x as u64).collect()
    } else {
        f.iter().map(|x| x.to_bits()).collect()
    }
}

/// For one generator kind: per case and size, (values of one call, state after, next 20).
fn run<D: Distributions>(
    fresh: &impl Fn() -> D,
    state: &impl Fn(&mut D) -> String,
) -> Vec<(Vec<u64>, String, Vec<u64>)> {
    let mut all = Vec::new();
    for case in CASES {
        // 5000 values cross many 624-word MT19937 blocks and 256-output PCG64 blocks.
        for n in [16, 17, 100, 1000, 5000] {
            let mut whole = fresh();
            let mut single = fresh();
            let a = draw(&mut whole, case, n);
            let b: Vec<u64> = (0..n).flat_map(|_| draw(&mut single, case, 1)).collect();
            assert_eq!(a, b, "{:?} {case:?} n = {n}", Isa::best());
            let st = state(&mut whole);
            assert_eq!(st, state(&mut single), "{:?} {case:?} n = {n}", Isa::best());
            let next = draw(&mut whole, case, 20);
            assert_eq!(next, draw(&mut single, case, 20));
            all.push((a, st, next));
        }
    }
    all
}

#[test]
fn batched_samplers_equal_one_at_a_time_on_every_isa() {
    let legacy = || {
        let mut rs = RandomState::new(11);
        // A cached Gaussian pending and an engine position inside a block.
        rs.standard_normal(&mut [0.0]);
        rs
    };
    let legacy_state = |rs: &mut RandomState| format!("{:?}", rs.get_state());
    let gen_ = || {
        let mut g = default_rng(11);
        // A buffered 32-bit half pending.
        g.integers_i32(0, 10, false, &mut [0]).unwrap();
        g
    };
    let gen_state = |g: &mut lockstep_rng::compat::numpy::Generator| {
        let b = g.bit_generator();
        format!("{:?} {:?}", b.state(), b.pending())
    };
    let mut first = None;
    for isa in Isa::ALL.into_iter().filter(|i| i.available()) {
        let _ = set_isa(Some(isa)).unwrap();
        let got = (run(&legacy, &legacy_state), run(&gen_, &gen_state));
        // And every path draws the same values as the others.
        match &first {
            None => first = Some(got),
            Some(f) => assert!(*f == got, "{isa} differs from the first path"),
        }
    }
    let _ = set_isa(None);
}
