//! `lockstep sample numpy-legacy FN` and `lockstep sample numpy FN`.
//!
//! `numpy-legacy`: `rs = np.random.RandomState(seed)`; `--seed` is an integer in
//! `[0, 2^32)` (default 0) or a comma list of them (`--seed=1,2,3` = `RandomState([1, 2, 3])`).
//! `--shape=D0,D1,..` is NumPy's `size` (default: one value); `--repeat` calls FN again on
//! the same `rs`.
//!
//! Its functions and their options: [`LEGACY`] (printed by `lockstep sample --list
//! numpy-legacy`).
//!
//! `numpy`: `g = np.random.default_rng(seed)`; `--seed` is an integer in `[0, 2^128)` or a
//! comma list of them (`default_rng([a, b])`).
//!
//! Its functions and their options: [`GENERATOR`] (printed by `lockstep sample --list
//! numpy`).
use super::{
    FnDoc, LibDoc, OptDoc, Opts, SampleError, Values, check_count, fail, opt, repeat_calls,
    unknown_function,
};

/// `--shape`: NumPy's `size`.
const SIZE: OptDoc = opt(&["shape"], "one value; D0,D1,..");
const LOW: OptDoc = opt(&["low"], "0");
const HIGH: OptDoc = opt(&["high"], "required");
const INT: OptDoc = opt(&["dtype"], "int64; or int32 (printed as int64)");
const FLOAT: OptDoc = opt(&["dtype"], "float64; or float32");

/// `lockstep sample numpy-legacy FN`: what `rs = np.random.RandomState(S)` then one call draws.
pub(super) const LEGACY: LibDoc = LibDoc {
    name: "numpy-legacy",
    seeding: "rs = np.random.RandomState(S)",
    common: &[
        opt(&["seed"], "0; an integer in [0, 2^32), or a list S1,S2,.."),
        opt(&["repeat"], "1"),
    ],
    functions: &[
        FnDoc {
            name: "rand",
            call: "rs.rand(*shape) (float64)",
            options: &[SIZE],
            example: "--shape=2,3",
        },
        FnDoc {
            name: "randn",
            call: "rs.randn(*shape) (float64)",
            options: &[SIZE],
            example: "--shape=2,3",
        },
        FnDoc {
            name: "randint",
            call: "rs.randint(low, high, size=shape, dtype=dtype)",
            options: &[LOW, HIGH, INT, SIZE],
            example: "--low=-3 --high=3 --dtype=int32 --shape=5",
        },
        FnDoc {
            name: "permutation",
            call: "rs.permutation(n) (int64)",
            options: &[opt(&["n"], "required")],
            example: "--n=10",
        },
        FnDoc {
            name: "uniform",
            call: "rs.uniform(low, high, size=shape) (float64)",
            options: &[LOW, opt(&["high"], "1"), SIZE],
            example: "--low=-1 --high=1 --shape=3",
        },
        FnDoc {
            name: "normal",
            call: "rs.normal(loc, scale, size=shape) (float64)",
            options: &[opt(&["loc"], "0"), opt(&["scale"], "1"), SIZE],
            example: "--loc=1 --scale=2 --shape=3",
        },
    ],
};

/// `lockstep sample numpy FN`: what `g = np.random.default_rng(S)` then one call draws.
pub(super) const GENERATOR: LibDoc = LibDoc {
    name: "numpy",
    seeding: "g = np.random.default_rng(S)",
    common: &[
        opt(&["seed"], "0; an integer in [0, 2^128), or a list S1,S2,.."),
        opt(&["repeat"], "1"),
    ],
    functions: &[
        FnDoc {
            name: "random",
            call: "g.random(size=shape, dtype=dtype)",
            options: &[SIZE, FLOAT],
            example: "--shape=2,3 --dtype=float32",
        },
        FnDoc {
            name: "standard_normal",
            call: "g.standard_normal(size=shape, dtype=dtype)",
            options: &[SIZE, FLOAT],
            example: "--shape=2,3 --dtype=float64",
        },
        FnDoc {
            name: "integers",
            call: "g.integers(low, high, size=shape, dtype=dtype, endpoint=endpoint)",
            options: &[LOW, HIGH, opt(&["endpoint"], "false"), INT, SIZE],
            example: "--low=0 --high=6 --endpoint=true --dtype=int64 --shape=4",
        },
        FnDoc {
            name: "permutation",
            call: "g.permutation(n) (int64)",
            options: &[opt(&["n"], "required")],
            example: "--n=10",
        },
        FnDoc {
            name: "uniform",
            call: "g.uniform(low, high, size=shape) (float64)",
            options: &[LOW, opt(&["high"], "1"), SIZE],
            example: "--low=-1 --high=1 --shape=3",
        },
        FnDoc {
            name: "normal",
            call: "g.normal(loc, scale, size=shape) (float64)",
            options: &[opt(&["loc"], "0"), opt(&["scale"], "1"), SIZE],
            example: "--loc=1 --scale=2 --shape=3",
        },
        FnDoc {
            name: "exponential",
            call: "g.exponential(scale, size=shape) (float64; NumPy's has no dtype)",
            options: &[opt(&["scale"], "1"), SIZE],
            example: "--scale=2 --shape=3",
        },
        FnDoc {
            name: "standard_exponential",
            call: "g.standard_exponential(size=shape, dtype=dtype)",
            options: &[SIZE, FLOAT],
            example: "--shape=3 --dtype=float32",
        },
    ],
};

/// `repeat` calls of a sampler that fills `n` float64 values.
fn f64_calls(
    repeat: usize,
    n: usize,
    mut fill: impl FnMut(&mut [f64]) -> lockstep_rng::Result<()>,
) -> Result<Values, SampleError> {
    repeat_calls(repeat, || {
        let mut v = vec![0.0; n];
        fill(&mut v)?;
        Ok(Values::F64(v))
    })
}
use lockstep_rng::compat::numpy::{RandomState, SeedSequence, default_rng_from};

/// The number of values in `--shape` (one when absent), checked so that all `--repeat`
/// calls stay within the print cap.
fn size(opts: &Opts, repeat: usize) -> Result<usize, SampleError> {
    let n = opts.shape(&[])?.iter().product::<usize>();
    check_count(n.saturating_mul(repeat))?;
    Ok(n)
}

/// `--dtype` among `allowed` (the first is the default).
fn dtype<'a>(opts: &Opts, allowed: &[&'a str]) -> Result<&'a str, SampleError> {
    match opts.raw("dtype") {
        None => Ok(allowed[0]),
        Some(d) => match allowed.iter().find(|a| **a == d) {
            Some(a) => Ok(a),
            None => fail(format!(
                "option --dtype={d}: expected one of {}",
                allowed.join(", ")
            )),
        },
    }
}

fn need_n(opts: &Opts, repeat: usize) -> Result<usize, SampleError> {
    let n: usize = opts.require("n")?;
    check_count(n.saturating_mul(repeat))?;
    Ok(n)
}

pub fn run_legacy(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    let mut rs = if seed.contains(',') || seed.trim().starts_with('[') {
        let key: Vec<u32> = seed
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u32>()
                    .map_err(|e| SampleError(format!("--seed: `{p}` is not in [0, 2^32): {e}")))
            })
            .collect::<Result<_, _>>()?;
        RandomState::from_key(&key)?
    } else {
        let s: u64 = seed
            .trim()
            .parse()
            .map_err(|e| SampleError(format!("--seed={seed}: {e}")))?;
        RandomState::from_u64(s)?
    };
    match func {
        "rand" => {
            let n = size(opts, repeat)?;
            f64_calls(repeat, n, |v| {
                rs.random_sample(v);
                Ok(())
            })
        }
        "randn" => {
            let n = size(opts, repeat)?;
            f64_calls(repeat, n, |v| {
                rs.standard_normal(v);
                Ok(())
            })
        }
        "randint" => {
            let n = size(opts, repeat)?;
            let low: i64 = opts.get_or("low", 0)?;
            let high: i64 = opts.require("high")?;
            let dt = dtype(opts, &["int64", "int32"])?;
            repeat_calls(repeat, || {
                if dt == "int32" {
                    let mut v = vec![0i32; n];
                    rs.randint_i32(low, high, &mut v)?;
                    Ok(Values::I64(v.into_iter().map(i64::from).collect()))
                } else {
                    let mut v = vec![0i64; n];
                    rs.randint_i64(low, high, &mut v)?;
                    Ok(Values::I64(v))
                }
            })
        }
        "permutation" => {
            let n = need_n(opts, repeat)?;
            repeat_calls(repeat, || Ok(Values::I64(rs.permutation(n))))
        }
        "uniform" => {
            let n = size(opts, repeat)?;
            let low: f64 = opts.get_or("low", 0.0)?;
            let high: f64 = opts.get_or("high", 1.0)?;
            f64_calls(repeat, n, |v| rs.uniform(low, high, v))
        }
        "normal" => {
            let n = size(opts, repeat)?;
            let loc: f64 = opts.get_or("loc", 0.0)?;
            let scale: f64 = opts.get_or("scale", 1.0)?;
            f64_calls(repeat, n, |v| rs.normal(loc, scale, v))
        }
        _ => unknown_function(&LEGACY, func),
    }
}

pub fn run_generator(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    let mut g = default_rng_from(SeedSequence::parse(seed)?);
    match func {
        "random" | "standard_normal" | "standard_exponential" => {
            let n = size(opts, repeat)?;
            let dt = dtype(opts, &["float64", "float32"])?;
            repeat_calls(repeat, || {
                Ok(if dt == "float32" {
                    let mut v = vec![0f32; n];
                    match func {
                        "random" => g.random_f32(&mut v),
                        "standard_normal" => g.standard_normal_f32(&mut v),
                        _ => g.standard_exponential_f32(&mut v),
                    }
                    Values::F32(v)
                } else {
                    let mut v = vec![0f64; n];
                    match func {
                        "random" => g.random(&mut v),
                        "standard_normal" => g.standard_normal(&mut v),
                        _ => g.standard_exponential(&mut v),
                    }
                    Values::F64(v)
                })
            })
        }
        "integers" => {
            let n = size(opts, repeat)?;
            let low: i64 = opts.get_or("low", 0)?;
            let high: i64 = opts.require("high")?;
            let endpoint = opts.flag("endpoint", false)?;
            let dt = dtype(opts, &["int64", "int32"])?;
            repeat_calls(repeat, || {
                if dt == "int32" {
                    let mut v = vec![0i32; n];
                    g.integers_i32(low, high, endpoint, &mut v)?;
                    Ok(Values::I64(v.into_iter().map(i64::from).collect()))
                } else {
                    let mut v = vec![0i64; n];
                    g.integers_i64(low, high, endpoint, &mut v)?;
                    Ok(Values::I64(v))
                }
            })
        }
        "permutation" => {
            let n = need_n(opts, repeat)?;
            repeat_calls(repeat, || Ok(Values::I64(g.permutation(n))))
        }
        "uniform" => {
            let n = size(opts, repeat)?;
            let low: f64 = opts.get_or("low", 0.0)?;
            let high: f64 = opts.get_or("high", 1.0)?;
            f64_calls(repeat, n, |v| g.uniform(low, high, v))
        }
        "normal" => {
            let n = size(opts, repeat)?;
            let loc: f64 = opts.get_or("loc", 0.0)?;
            let scale: f64 = opts.get_or("scale", 1.0)?;
            f64_calls(repeat, n, |v| g.normal(loc, scale, v))
        }
        "exponential" => {
            let n = size(opts, repeat)?;
            let scale: f64 = opts.get_or("scale", 1.0)?;
            f64_calls(repeat, n, |v| g.exponential(scale, v))
        }
        _ => unknown_function(&GENERATOR, func),
    }
}
