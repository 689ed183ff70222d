//! `lockstep sample numpy-legacy FN` and `lockstep sample numpy FN`.
//!
//! `numpy-legacy`: `rs = np.random.RandomState(seed)`; `--seed` is an integer in
//! `[0, 2^32)` (default 0) or a comma list of them (`--seed=1,2,3` = `RandomState([1, 2, 3])`).
//! `--shape=D0,D1,..` is NumPy's `size` (default: one value); `--repeat` calls FN again on
//! the same `rs`.
//!
//! | FN | options (default) | one call |
//! |---|---|---|
//! | `rand` | `--shape` | `rs.rand(*shape)` (float64) |
//! | `randn` | `--shape` | `rs.randn(*shape)` (float64) |
//! | `randint` | `--low` (0), `--high` (required), `--dtype` (int64\|int32), `--shape` | `rs.randint(low, high, size, dtype)` (printed as int64) |
//! | `permutation` | `--n` (required) | `rs.permutation(n)` (int64) |
//! | `uniform` | `--low` (0), `--high` (1), `--shape` | `rs.uniform(low, high, size)` |
//! | `normal` | `--loc` (0), `--scale` (1), `--shape` | `rs.normal(loc, scale, size)` |
//!
//! `numpy`: `g = np.random.default_rng(seed)`; `--seed` is an integer in `[0, 2^128)` or a
//! comma list of them (`default_rng([a, b])`).
//!
//! | FN | options (default) | one call |
//! |---|---|---|
//! | `random` | `--shape`, `--dtype` (float64\|float32) | `g.random(size, dtype)` |
//! | `standard_normal` | `--shape`, `--dtype` | `g.standard_normal(size, dtype)` |
//! | `integers` | `--low` (0), `--high` (required), `--endpoint` (false), `--dtype` (int64\|int32), `--shape` | `g.integers(low, high, size, dtype, endpoint)` |
//! | `permutation` | `--n` (required) | `g.permutation(n)` |
//! | `uniform` | `--low` (0), `--high` (1), `--shape` | `g.uniform(low, high, size)` |
//! | `normal` | `--loc` (0), `--scale` (1), `--shape` | `g.normal(loc, scale, size)` |
//! | `exponential` | `--scale` (1), `--shape` | `g.exponential(scale, size)` (float64; NumPy's has no dtype) |
//! | `standard_exponential` | `--shape`, `--dtype` | `g.standard_exponential(size, dtype)` |
use super::{Opts, SampleError, Values, check_count, fail, repeat_calls};

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
        _ => fail(format!(
            "numpy-legacy: unknown function `{func}`; expected one of: rand, randn, randint, permutation, uniform, normal"
        )),
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
        _ => fail(format!(
            "numpy: unknown function `{func}`; expected one of: random, standard_normal, integers, permutation, uniform, normal, exponential, standard_exponential"
        )),
    }
}
