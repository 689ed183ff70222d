//! The rest of NumPy's random surface through the library API, against values recorded from
//! the real NumPy 2.4.6 by `tools/golden_numpy_surface.py` (`tests/golden/numpy_surface.json`,
//! its `api` section; the same file's `cases` run through `lockstep sample` in
//! `crates/lockstep-cli/tests/golden.rs`):
//!
//! * `RandomState.randint` and `Generator.integers` for every integer dtype, scalar and
//!   broadcast array bounds, on every bit generator (NumPy's own test-suite seeds and bounds
//!   among them);
//! * `RandomState(BG(seed))` for every other bit generator, the polar Gaussian's cached value
//!   carried across samplers;
//! * `RandomState.tomaxint` and `random_integers` up to 2^63 − 1;
//! * `Generator.standard_exponential(method='inv')`, float64 and float32.

use std::path::Path;

use lockstep_rng::compat::numpy::{
    BitGenerator, Generator, IntDtype, Pcg64Dxsm, Philox, RandomState, SeedSequence, Sfc64,
};
use lockstep_rng::engines::{Mt19937, Pcg64};
use serde_json::Value;

fn load() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/numpy_surface.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

fn api_cases(call: &str) -> Vec<Value> {
    let doc = load();
    let all = doc["api"].as_array().expect("api cases").clone();
    let cases: Vec<Value> = all.into_iter().filter(|c| c["call"] == call).collect();
    assert!(!cases.is_empty(), "no {call} cases");
    cases
}

/// Runs `$body` with `$B` the bit generator named `$bg`.
macro_rules! each_bg {
    ($bg:expr, $B:ident => $body:expr) => {
        match $bg {
            "PCG64" => {
                type $B = Pcg64;
                $body
            }
            "PCG64DXSM" => {
                type $B = Pcg64Dxsm;
                $body
            }
            "MT19937" => {
                type $B = Mt19937;
                $body
            }
            "Philox" => {
                type $B = Philox;
                $body
            }
            "SFC64" => {
                type $B = Sfc64;
                $body
            }
            other => panic!("unknown bit generator {other}"),
        }
    };
}

fn seed_seq(case: &Value) -> SeedSequence {
    SeedSequence::from_int(u128::from(case["seed"].as_u64().expect("seed")))
}

/// `RandomState(seed)` (legacy seeding) or `RandomState(BG(seed))`, handed to `f`.
macro_rules! with_rs {
    ($case:expr, $rs:ident => $body:expr) => {{
        let case = $case;
        match case["bit_generator"].as_str() {
            None => {
                let mut $rs = RandomState::new(case["seed"].as_u64().unwrap() as u32);
                $body
            }
            Some(bg) => each_bg!(bg, B => {
                let mut $rs = RandomState::from_bit_generator(B::from_seed_seq(&seed_seq(case)));
                $body
            }),
        }
    }};
}

fn ints(v: &Value) -> Vec<i128> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| match x {
            Value::String(s) => s.parse().unwrap(),
            Value::Number(n) => n.to_string().parse().unwrap(),
            x => panic!("not an integer: {x}"),
        })
        .collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// The integer samplers of both classes.
trait Ints {
    fn scalar<T: IntDtype>(&mut self, low: i128, high: i128, endpoint: bool, out: &mut [T]);
    fn array<T: IntDtype>(
        &mut self,
        low: (&[i128], &[usize]),
        high: (&[i128], &[usize]),
        size: Option<&[usize]>,
        endpoint: bool,
    ) -> (Vec<T>, Vec<usize>);
}

impl<B: BitGenerator> Ints for RandomState<B> {
    fn scalar<T: IntDtype>(&mut self, low: i128, high: i128, endpoint: bool, out: &mut [T]) {
        assert!(!endpoint);
        self.randint(low, high, out).unwrap();
    }
    fn array<T: IntDtype>(
        &mut self,
        low: (&[i128], &[usize]),
        high: (&[i128], &[usize]),
        size: Option<&[usize]>,
        endpoint: bool,
    ) -> (Vec<T>, Vec<usize>) {
        assert!(!endpoint);
        self.randint_array(low, high, size).unwrap()
    }
}

impl<B: BitGenerator> Ints for Generator<B> {
    fn scalar<T: IntDtype>(&mut self, low: i128, high: i128, endpoint: bool, out: &mut [T]) {
        self.integers(low, high, endpoint, out).unwrap();
    }
    fn array<T: IntDtype>(
        &mut self,
        low: (&[i128], &[usize]),
        high: (&[i128], &[usize]),
        size: Option<&[usize]>,
        endpoint: bool,
    ) -> (Vec<T>, Vec<usize>) {
        self.integers_array(low, high, size, endpoint).unwrap()
    }
}

fn draw<T: IntDtype, I: Ints>(r: &mut I, case: &Value) -> Vec<i128> {
    let (low, high) = (ints(&case["low"]), ints(&case["high"]));
    let (ls, hs) = (usizes(&case["low_shape"]), usizes(&case["high_shape"]));
    let size = case["size"].as_array().map(|_| usizes(&case["size"]));
    let endpoint = case["endpoint"].as_bool().unwrap();
    let mut got = Vec::new();
    for _ in 0..case["repeat"].as_u64().unwrap() {
        if ls.is_empty() && hs.is_empty() {
            let n = size.as_ref().map_or(1, |s| s.iter().product());
            let mut v = vec![T::default(); n];
            r.scalar(low[0], high[0], endpoint, &mut v);
            got.extend(v.iter().map(|x| x.to_i128()));
        } else {
            let (v, shape) = r.array::<T>((&low, &ls), (&high, &hs), size.as_deref(), endpoint);
            assert_eq!(v.len(), shape.iter().product::<usize>());
            if let Some(s) = &size {
                assert_eq!(&shape, s);
            }
            got.extend(v.iter().map(|x| x.to_i128()));
        }
    }
    got
}

fn by_dtype<I: Ints>(r: &mut I, case: &Value) -> Vec<i128> {
    match case["dtype"].as_str().unwrap() {
        "int64" => draw::<i64, I>(r, case),
        "int32" => draw::<i32, I>(r, case),
        "int16" => draw::<i16, I>(r, case),
        "int8" => draw::<i8, I>(r, case),
        "uint64" => draw::<u64, I>(r, case),
        "uint32" => draw::<u32, I>(r, case),
        "uint16" => draw::<u16, I>(r, case),
        "uint8" => draw::<u8, I>(r, case),
        "bool" => draw::<bool, I>(r, case),
        d => panic!("unknown dtype {d}"),
    }
}

#[test]
fn randint_and_integers_match_numpy_for_every_dtype_and_broadcast() {
    let mut cases = api_cases("randint");
    cases.extend(api_cases("integers"));
    let mut failed = Vec::new();
    let mut dtypes = std::collections::BTreeSet::new();
    for case in &cases {
        dtypes.insert(case["dtype"].as_str().unwrap().to_string());
        let got = if case["class"] == "RandomState" {
            with_rs!(case, rs => by_dtype(&mut rs, case))
        } else {
            each_bg!(case["bit_generator"].as_str().unwrap(), B => {
                by_dtype(&mut Generator::<B>::from_seed_seq(seed_seq(case)), case)
            })
        };
        if got != ints(&case["values"]) {
            failed.push(format!("{case}\n  got {got:?}"));
        }
    }
    assert_eq!(dtypes.len(), 9, "{dtypes:?}");
    assert!(
        failed.is_empty(),
        "{} of {} cases differ:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

#[test]
fn random_state_on_every_bit_generator_keeps_numpys_cached_gaussian() {
    for case in api_cases("mixed") {
        let got: Vec<f64> = with_rs!(&case, rs => {
            let a = rs.gauss();
            let b = rs.random_sample_one();
            let c = rs.gauss();
            let mut d = [0.0];
            rs.normal(3.0, 0.5, &mut d).unwrap();
            let e = rs.random_sample_one();
            vec![a, b, c, d[0], e]
        });
        let want: Vec<f64> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{case}");
    }
}

#[test]
fn tomaxint_and_random_integers_match_numpy() {
    for case in api_cases("tomaxint") {
        let got: Vec<i128> = with_rs!(&case, rs => {
            let mut v = [0i64; 7];
            rs.tomaxint(&mut v);
            v.iter().map(|&x| i128::from(x)).collect()
        });
        assert_eq!(got, ints(&case["values"]), "{case}");
    }
    for case in api_cases("random_integers") {
        let low: i64 = case["low"].as_str().unwrap().parse().unwrap();
        let high: i64 = case["high"].as_str().unwrap().parse().unwrap();
        let got: Vec<i128> = with_rs!(&case, rs => {
            let mut v = [0i64; 6];
            rs.random_integers(low, high, &mut v).unwrap();
            v.iter().map(|&x| i128::from(x)).collect()
        });
        assert_eq!(got, ints(&case["values"]), "{case}");
    }
    let mut rs = RandomState::new(0);
    assert!(rs.random_integers(2, 1, &mut [0]).is_err());
}

#[test]
fn standard_exponential_inv_matches_numpy() {
    for case in api_cases("standard_exponential_inv") {
        let want: Vec<f64> = case["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().parse().unwrap())
            .collect();
        let f32s = case["dtype"] == "float32";
        let got: Vec<u64> = each_bg!(case["bit_generator"].as_str().unwrap(), B => {
            let mut g = Generator::<B>::from_seed_seq(seed_seq(&case));
            if f32s {
                let mut v = [0f32; 9];
                g.standard_exponential_inv_f32(&mut v);
                v.iter().map(|x| u64::from(x.to_bits())).collect()
            } else {
                let mut v = [0f64; 9];
                g.standard_exponential_inv(&mut v);
                v.iter().map(|x| x.to_bits()).collect()
            }
        });
        let want: Vec<u64> = if f32s {
            want.iter()
                .map(|&x| u64::from((x as f32).to_bits()))
                .collect()
        } else {
            want.iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn bad_integer_bounds_are_errors_that_draw_nothing() {
    let mut g = Generator::<Pcg64>::from_seed_seq(SeedSequence::from_int(1));
    let before = g.clone().bit_generator().clone();
    let mut out = [0u8; 3];
    assert!(g.integers(0, 257, false, &mut out).is_err());
    assert!(g.integers(-1, 3, false, &mut out).is_err());
    assert!(g.integers(3, 3, false, &mut out).is_err());
    let mut b = [false; 2];
    assert!(g.integers(0, 2, true, &mut b).is_err());
    let (l, h): (&[i128], &[i128]) = (&[0, 5], &[4, 5]);
    assert!(
        g.integers_array::<i16>((l, &[2]), (h, &[2]), None, false)
            .is_err()
    );
    assert!(
        g.integers_array::<i16>((l, &[2]), (&[1, 2, 3], &[3]), None, false)
            .is_err()
    );
    assert!(
        g.integers_array::<i16>((l, &[2]), (&[9], &[]), Some(&[3]), false)
            .is_err()
    );
    assert!(
        g.integers_array::<i16>((l, &[3]), (&[9], &[]), None, false)
            .is_err()
    );
    assert_eq!(*g.bit_generator(), before);
    let mut rs = RandomState::from_bit_generator(Philox::new([0; 4], [1, 2]));
    assert!(rs.randint::<u64>(0, (1 << 64) + 1, &mut [0]).is_err());
    assert!(
        rs.randint::<i64>(i64::MIN as i128 - 1, 0, &mut [0])
            .is_err()
    );
}
