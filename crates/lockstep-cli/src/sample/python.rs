//! `lockstep sample python FN`: CPython 3.11 `random`.
//!
//! Each run does `r = random.Random(seed)` with `--seed` (default 0; any integer, negative
//! and larger than 64 bits included) and calls FN `--repeat` times (default 1) on `r`:
//!
//! The functions, what one call draws and their options are in [`LIB`] (printed by
//! `lockstep sample --list python`).
//!
//! `--n` times `--repeat` may not exceed the print cap of `lockstep sample`.
use super::{
    FnDoc, LibDoc, Opts, SampleError, Values, check_count, fail, opt, repeat_calls,
    unknown_function,
};
use lockstep_rng::compat::python::Random;

/// `lockstep sample python FN`: what `r = random.Random(S)` then one call on `r` draws.
pub(super) const LIB: LibDoc = LibDoc {
    name: "python",
    seeding: "r = random.Random(S)",
    common: &[
        opt(&["seed"], "0; any integer, negative or beyond 64 bits"),
        opt(&["repeat"], "1"),
    ],
    functions: &[
        FnDoc {
            name: "random",
            call: "[r.random() for _ in range(n)] (float64)",
            options: &[N],
            example: "--n=3",
        },
        FnDoc {
            name: "randint",
            call: "[r.randint(low, high) for _ in range(n)], high inclusive (int64)",
            options: &[opt(&["low"], "0"), opt(&["high"], "required"), N],
            example: "--low=1 --high=6 --n=5",
        },
        FnDoc {
            name: "gauss",
            call: "[r.gauss(mu, sigma) for _ in range(n)] (float64; the cached second value \
                   carries over)",
            options: &[opt(&["mu"], "0"), opt(&["sigma"], "1"), N],
            example: "--mu=1 --sigma=2 --n=3",
        },
        FnDoc {
            name: "uniform",
            call: "[r.uniform(low, high) for _ in range(n)] (float64)",
            options: &[opt(&["low"], "0"), opt(&["high"], "1"), N],
            example: "--low=-1 --high=1 --n=3",
        },
        FnDoc {
            name: "shuffle",
            call: "x = list(range(n)); r.shuffle(x); x (int64)",
            options: &[opt(&["n"], "required")],
            example: "--n=10",
        },
        FnDoc {
            name: "choice",
            call: "[r.choice(range(k)) for _ in range(n)] (int64)",
            options: &[opt(&["k"], "required"), N],
            example: "--k=7 --n=4",
        },
        FnDoc {
            name: "getrandbits",
            call: "[r.getrandbits(k) for _ in range(n)] (int64 for k <= 63, else decimal \
                   integers)",
            options: &[opt(&["k"], "32; at most 65536"), N],
            example: "--k=100 --n=2",
        },
    ],
};

/// `--n`: values per call.
const N: super::OptDoc = opt(&["n"], "1");

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
            // Each value prints about k·log10(2) digits: bound the bytes, not only the count.
            let digits = k * 30103 / 100_000 + 2;
            if n.saturating_mul(repeat).saturating_mul(digits) > super::MAX_OUTPUT_BYTES {
                return fail(format!(
                    "getrandbits: {n} values of {k} bits with --repeat={repeat} print more than {} bytes",
                    super::MAX_OUTPUT_BYTES
                ));
            }
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
        _ => unknown_function(&LIB, func),
    }
}
