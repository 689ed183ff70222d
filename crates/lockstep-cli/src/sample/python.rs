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
//! | `getrandbits` | `--k` (32, at most 65536), `--n` (1) | `[r.getrandbits(k) ...]` | int64 for k ≤ 63, else int (decimal) |
//!
//! `--n` times `--repeat` may not exceed the print cap of `lockstep sample`.
use super::{Opts, SampleError, Values, check_count, fail, repeat_calls};
use lockstep_rng::compat::python::Random;

/// Widest `getrandbits(k)` printed: decimal conversion is quadratic in the size.
const MAX_BITS: usize = 1 << 16;

/// `--n` (default `default`), checked so that all `--repeat` calls stay within the print cap.
fn count(opts: &Opts, name: &str, default: usize, repeat: usize) -> Result<usize, SampleError> {
    let n: usize = opts.get_or(name, default)?;
    check_count(n.saturating_mul(repeat))
        .map_err(|e| SampleError(format!("option --{name} with --repeat={repeat}: {e}")))?;
    Ok(n)
}

pub fn run(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    let mut r = Random::from_decimal(seed)?;
    match func {
        "random" => {
            let n = count(opts, "n", 1, repeat)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.random()).collect()))
            })
        }
        "randint" => {
            let n = count(opts, "n", 1, repeat)?;
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
            let n = count(opts, "n", 1, repeat)?;
            let mu: f64 = opts.get_or("mu", 0.0)?;
            let sigma: f64 = opts.get_or("sigma", 1.0)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.gauss(mu, sigma)).collect()))
            })
        }
        "uniform" => {
            let n = count(opts, "n", 1, repeat)?;
            let low: f64 = opts.get_or("low", 0.0)?;
            let high: f64 = opts.get_or("high", 1.0)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.uniform(low, high)).collect()))
            })
        }
        "shuffle" => {
            if opts.raw("n").is_none() {
                return fail("option --n is required here");
            }
            let n = count(opts, "n", 0, repeat)?;
            repeat_calls(repeat, || {
                let mut x: Vec<i64> = (0..n as i64).collect();
                r.shuffle(&mut x);
                Ok(Values::I64(x))
            })
        }
        "choice" => {
            let n = count(opts, "n", 1, repeat)?;
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
            let n = count(opts, "n", 1, repeat)?;
            let k: i64 = opts.get_or("k", 32)?;
            if !(0..=MAX_BITS as i64).contains(&k) {
                return fail(format!("getrandbits: option --k must be in 0..={MAX_BITS}"));
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
