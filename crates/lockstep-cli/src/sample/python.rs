//! `lockstep sample python FN`: CPython 3.11 `random`.
//!
//! Each run does `r = random.Random(seed)` with `--seed` (default 0; any integer, negative
//! and larger than 64 bits included) and calls FN `--repeat` times (default 1) on `r`:
//!
//! | FN | options (default) | one call draws | dtype |
//! |---|---|---|---|
//! | `random` | `--n` (1) | `[r.random() for _ in range(n)]` | float64 |
//! | `randint` | `--low` (0), `--high` (required), `--n` (1) | `[r.randint(low, high) ...]`, `high` inclusive | int64 |
//! | `gauss` | `--mu` (0), `--sigma` (1), `--n` (1) | `[r.gauss(mu, sigma) ...]` (cache carries over) | float64 |
//! | `shuffle` | `--n` (required) | `x = list(range(n)); r.shuffle(x); x` | int64 |
//! | `uniform` | `--low` (0), `--high` (1), `--n` (1) | `[r.uniform(low, high) ...]` | float64 |
//! | `choice` | `--k` (required), `--n` (1) | `[r.choice(range(k)) ...]` | int64 |
//! | `getrandbits` | `--k` (32), `--n` (1) | `[r.getrandbits(k) ...]` | int64 for k ≤ 63, else int (decimal) |
use super::{Opts, SampleError, Values, fail, repeat_calls};
use lockstep_rng::compat::python::Random;

pub fn run(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    let mut r = Random::from_decimal(seed)?;
    match func {
        "random" => {
            let n: usize = opts.get_or("n", 1)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.random()).collect()))
            })
        }
        "randint" => {
            let n: usize = opts.get_or("n", 1)?;
            let low: i64 = opts.get_or("low", 0)?;
            let high: i64 = opts.require("high")?;
            repeat_calls(repeat, || {
                let v = (0..n)
                    .map(|_| r.randint(low, high))
                    .collect::<Result<_, _>>()?;
                Ok(Values::I64(v))
            })
        }
        "gauss" => {
            let n: usize = opts.get_or("n", 1)?;
            let mu: f64 = opts.get_or("mu", 0.0)?;
            let sigma: f64 = opts.get_or("sigma", 1.0)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.gauss(mu, sigma)).collect()))
            })
        }
        "uniform" => {
            let n: usize = opts.get_or("n", 1)?;
            let low: f64 = opts.get_or("low", 0.0)?;
            let high: f64 = opts.get_or("high", 1.0)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.uniform(low, high)).collect()))
            })
        }
        "shuffle" => {
            let n: i64 = opts.require("n")?;
            if n < 0 {
                return fail("option --n must be non-negative");
            }
            repeat_calls(repeat, || {
                let mut x: Vec<i64> = (0..n).collect();
                r.shuffle(&mut x);
                Ok(Values::I64(x))
            })
        }
        "choice" => {
            let n: usize = opts.get_or("n", 1)?;
            let k: i64 = opts.require("k")?;
            repeat_calls(repeat, || {
                // choice(range(k)) = range(k)[_randbelow(k)]; randrange_stop is exactly that.
                let v = (0..n)
                    .map(|_| r.randrange_stop(k))
                    .collect::<Result<_, _>>()?;
                Ok(Values::I64(v))
            })
        }
        "getrandbits" => {
            let n: usize = opts.get_or("n", 1)?;
            let k: i64 = opts.get_or("k", 32)?;
            if k < 0 {
                return fail("getrandbits: option --k must be non-negative");
            }
            let k = k as usize;
            repeat_calls(repeat, || {
                if k <= 63 {
                    let v = (0..n).map(|_| r.getrandbits(k as u32).map(|x| x as i64));
                    Ok(Values::I64(v.collect::<Result<_, _>>()?))
                } else {
                    Ok(Values::BigInt(
                        (0..n).map(|_| r.getrandbits_decimal(k)).collect(),
                    ))
                }
            })
        }
        _ => fail(format!(
            "python: unknown function `{func}`; expected one of: random, randint, gauss, shuffle, uniform, choice, getrandbits"
        )),
    }
}
