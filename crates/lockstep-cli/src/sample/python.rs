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
use lockstep::rng::compat::python::Random;

/// `lockstep sample python FN`: what `r = random.Random(S)` then one call on `r` draws.
pub(super) const LIB: LibDoc = LibDoc {
    name: "python",
    seeding: "r = random.Random(S)",
    common: &[
        opt(&["seed"], "0; any integer, negative or beyond 64 bits"),
        opt(
            &["seed-str"],
            "none; r.seed(TEXT, version=version) instead of --seed",
        ),
        opt(
            &["seed-bytes"],
            "none; hex, r.seed(bytes.fromhex(HEX), version=version)",
        ),
        opt(
            &["version"],
            "2; or 1 (seed version for --seed-str/--seed-bytes)",
        ),
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
            options: &[
                opt(&["low"], "0; up to 2^127"),
                opt(&["high"], "required"),
                N,
            ],
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
        FnDoc {
            name: "triangular",
            call: "[r.triangular(low, high, mode) for _ in range(n)] (float64; no --mode = None)",
            options: &[
                opt(&["low"], "0"),
                opt(&["high"], "1"),
                opt(&["mode"], "None"),
                N,
            ],
            example: "--low=-1 --high=2 --mode=0.5 --n=3",
        },
        FnDoc {
            name: "normalvariate",
            call: "[r.normalvariate(mu, sigma) for _ in range(n)] (float64)",
            options: &[opt(&["mu"], "0"), opt(&["sigma"], "1"), N],
            example: "--mu=1 --sigma=2 --n=3",
        },
        FnDoc {
            name: "lognormvariate",
            call: "[r.lognormvariate(mu, sigma) for _ in range(n)] (float64)",
            options: &[opt(&["mu"], "required"), opt(&["sigma"], "required"), N],
            example: "--mu=0.5 --sigma=0.25 --n=3",
        },
        FnDoc {
            name: "expovariate",
            call: "[r.expovariate(lambd) for _ in range(n)] (float64)",
            options: &[opt(&["lambd"], "required"), N],
            example: "--lambd=2 --n=3",
        },
        FnDoc {
            name: "vonmisesvariate",
            call: "[r.vonmisesvariate(mu, kappa) for _ in range(n)] (float64)",
            options: &[opt(&["mu"], "required"), opt(&["kappa"], "required"), N],
            example: "--mu=1 --kappa=4 --n=3",
        },
        FnDoc {
            name: "gammavariate",
            call: "[r.gammavariate(alpha, beta) for _ in range(n)] (float64)",
            options: &[opt(&["alpha"], "required"), opt(&["beta"], "required"), N],
            example: "--alpha=2.5 --beta=2 --n=3",
        },
        FnDoc {
            name: "betavariate",
            call: "[r.betavariate(alpha, beta) for _ in range(n)] (float64)",
            options: &[opt(&["alpha"], "required"), opt(&["beta"], "required"), N],
            example: "--alpha=0.5 --beta=2 --n=3",
        },
        FnDoc {
            name: "paretovariate",
            call: "[r.paretovariate(alpha) for _ in range(n)] (float64)",
            options: &[opt(&["alpha"], "required"), N],
            example: "--alpha=3 --n=3",
        },
        FnDoc {
            name: "weibullvariate",
            call: "[r.weibullvariate(alpha, beta) for _ in range(n)] (float64)",
            options: &[opt(&["alpha"], "required"), opt(&["beta"], "required"), N],
            example: "--alpha=2 --beta=1.5 --n=3",
        },
        FnDoc {
            name: "binomialvariate",
            call: "r.binomialvariate(n, p) (CPython 3.12; int64; one value per call, --repeat \
                   for more)",
            options: &[opt(&["n"], "1"), opt(&["p"], "0.5")],
            example: "--n=40 --p=0.3",
        },
        FnDoc {
            name: "randbytes",
            call: "list(r.randbytes(n)) (int64 bytes)",
            options: &[opt(&["n"], "required")],
            example: "--n=10",
        },
        FnDoc {
            name: "randrange",
            call: "[r.randrange(start, stop, step) for _ in range(n)] (decimal integers; \
                   bounds up to 2^127)",
            options: &[
                opt(&["start"], "0"),
                opt(&["stop"], "required"),
                opt(&["step"], "1"),
                N,
            ],
            example: "--start=5 --stop=100000000000000000000000 --step=3 --n=3",
        },
        FnDoc {
            name: "sample",
            call: "r.sample(range(population), k) or r.sample(range(len(counts)), k, \
                   counts=counts) (int64)",
            options: &[
                opt(&["population"], "required unless --counts"),
                opt(&["counts"], "none; C1,C2,.."),
                opt(&["k"], "required"),
            ],
            example: "--population=3 --counts=2,0,5 --k=4",
        },
        FnDoc {
            name: "choices",
            call: "r.choices(range(population), weights, cum_weights=cum_weights, k=k) (int64)",
            options: &[
                opt(&["population"], "required"),
                opt(&["weights"], "none; W1,W2,.."),
                opt(&["cum-weights"], "none; C1,C2,.."),
                opt(&["k"], "1"),
            ],
            example: "--population=3 --weights=1,2,3 --cum-weights=1,3,6 --k=5",
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
    let mut r = seeded(opts)?;
    match func {
        "random" => {
            let n = count(opts, "n", 1, repeat)?;
            repeat_calls(repeat, || {
                Ok(Values::F64((0..n).map(|_| r.random()).collect()))
            })
        }
        "randint" => {
            let n = count(opts, "n", 1, repeat)?;
            let low: i128 = opts.get_or("low", 0)?;
            let high: i128 = opts.require("high")?;
            match (i64::try_from(low), i64::try_from(high)) {
                (Ok(low), Ok(high)) => repeat_calls(repeat, || {
                    let v = (0..n)
                        .map(|_| r.randint(low, high))
                        .collect::<Result<_, _>>()?;
                    Ok(Values::I64(v))
                }),
                // Beyond 64 bits: decimal integers.
                _ => repeat_calls(repeat, || {
                    let v = (0..n)
                        .map(|_| r.randint_i128(low, high).map(|x| x.to_string()))
                        .collect::<Result<_, _>>()?;
                    Ok(Values::BigInt(v))
                }),
            }
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
        "triangular" => {
            let n = count(opts, "n", 1, repeat)?;
            let low: f64 = opts.get_or("low", 0.0)?;
            let high: f64 = opts.get_or("high", 1.0)?;
            let mode: Option<f64> = opts.get("mode")?;
            repeat_calls(repeat, || {
                Ok(Values::F64(
                    (0..n).map(|_| r.triangular(low, high, mode)).collect(),
                ))
            })
        }
        "normalvariate" | "lognormvariate" => {
            let n = count(opts, "n", 1, repeat)?;
            let (mu, sigma): (f64, f64) = if func == "normalvariate" {
                (opts.get_or("mu", 0.0)?, opts.get_or("sigma", 1.0)?)
            } else {
                (opts.require("mu")?, opts.require("sigma")?)
            };
            repeat_calls(repeat, || {
                Ok(Values::F64(
                    (0..n)
                        .map(|_| {
                            if func == "normalvariate" {
                                r.normalvariate(mu, sigma)
                            } else {
                                r.lognormvariate(mu, sigma)
                            }
                        })
                        .collect(),
                ))
            })
        }
        "vonmisesvariate" => {
            let n = count(opts, "n", 1, repeat)?;
            let mu: f64 = opts.require("mu")?;
            let kappa: f64 = opts.require("kappa")?;
            repeat_calls(repeat, || {
                Ok(Values::F64(
                    (0..n).map(|_| r.vonmisesvariate(mu, kappa)).collect(),
                ))
            })
        }
        "expovariate" | "gammavariate" | "betavariate" | "paretovariate" | "weibullvariate" => {
            let n = count(opts, "n", 1, repeat)?;
            let (a, b): (f64, f64) = match func {
                "expovariate" => (opts.require("lambd")?, 0.0),
                "paretovariate" => (opts.require("alpha")?, 0.0),
                _ => (opts.require("alpha")?, opts.require("beta")?),
            };
            repeat_calls(repeat, || {
                let v = (0..n)
                    .map(|_| match func {
                        "expovariate" => r.expovariate(a),
                        "gammavariate" => r.gammavariate(a, b),
                        "betavariate" => r.betavariate(a, b),
                        "paretovariate" => r.paretovariate(a),
                        _ => r.weibullvariate(a, b),
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Values::F64(v))
            })
        }
        "binomialvariate" => {
            let trials: i64 = opts.get_or("n", 1)?;
            let p: f64 = opts.get_or("p", 0.5)?;
            check_count(repeat)?;
            repeat_calls(repeat, || {
                Ok(Values::I64(vec![r.binomialvariate(trials, p)?]))
            })
        }
        "randbytes" => {
            if opts.raw("n").is_none() {
                return fail("option --n is required here");
            }
            let n = count(opts, "n", 0, repeat)?;
            repeat_calls(repeat, || {
                Ok(Values::I64(
                    r.randbytes(n).into_iter().map(i64::from).collect(),
                ))
            })
        }
        "randrange" => {
            let n = count(opts, "n", 1, repeat)?;
            let start: i128 = opts.get_or("start", 0)?;
            let stop: i128 = opts.require("stop")?;
            let step: i128 = opts.get_or("step", 1)?;
            repeat_calls(repeat, || {
                let v = (0..n)
                    .map(|_| r.randrange_i128(start, stop, step).map(|x| x.to_string()))
                    .collect::<Result<_, _>>()?;
                Ok(Values::BigInt(v))
            })
        }
        "sample" => {
            let k = count(opts, "k", 0, repeat)?;
            let counts: Option<Vec<u64>> = opts.list("counts")?;
            let population: Option<usize> = opts.get("population")?;
            repeat_calls(repeat, || {
                let v = match &counts {
                    Some(c) => {
                        if population.is_some_and(|p| p != c.len()) {
                            return fail(
                                "sample: the number of counts does not match the population",
                            );
                        }
                        r.sample_counts_indices(c, k)?
                    }
                    None => {
                        let p = population.ok_or_else(|| {
                            SampleError("option --population is required here".into())
                        })?;
                        r.sample_indices(p, k)?
                    }
                };
                Ok(Values::I64(v.into_iter().map(|i| i as i64).collect()))
            })
        }
        "choices" => {
            let k = count(opts, "k", 1, repeat)?;
            let population: usize = opts.require("population")?;
            let weights: Option<Vec<f64>> = opts.list("weights")?;
            let cum: Option<Vec<f64>> = opts.list("cum-weights")?;
            repeat_calls(repeat, || {
                let v = match (&weights, &cum) {
                    (None, None) => r.choices_indices(population, None, k)?,
                    (Some(w), None) => r.choices_indices(population, Some(w), k)?,
                    (None, Some(c)) => {
                        if c.len() != population {
                            return fail(
                                "choices: the number of weights does not match the population",
                            );
                        }
                        r.choices_cum_indices(c, k)?
                    }
                    // CPython raises TypeError; the example gives both, so take cum_weights
                    // only when they agree with the running sums of the weights.
                    (Some(w), Some(c)) => {
                        let mut acc = 0.0;
                        let same = w.len() == c.len()
                            && w.iter().zip(c).all(|(x, y)| {
                                acc += x;
                                acc == *y
                            });
                        if !same {
                            return fail(
                                "choices: cannot specify both weights and cumulative weights",
                            );
                        }
                        r.choices_cum_indices(c, k)?
                    }
                };
                Ok(Values::I64(v.into_iter().map(|i| i as i64).collect()))
            })
        }
        _ => unknown_function(&LIB, func),
    }
}

/// The generator for `--seed`, or `--seed-str`/`--seed-bytes` with `--version`.
fn seeded(opts: &Opts) -> Result<Random, SampleError> {
    let version: u32 = opts.get_or("version", 2)?;
    if version != 1 && version != 2 {
        return fail(format!("option --version={version}: expected 1 or 2"));
    }
    let text = opts.raw("seed-str");
    let hex = opts.raw("seed-bytes");
    let seed = opts.raw("seed");
    let given = [text.is_some(), hex.is_some(), seed.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        return fail("give one of --seed, --seed-str, --seed-bytes");
    }
    if let Some(s) = text {
        return Ok(if version == 1 {
            Random::from_str_seed_v1(s)
        } else {
            Random::from_str_seed(s)
        });
    }
    if let Some(h) = hex {
        let h = h.trim();
        if h.len() % 2 != 0 {
            return fail("option --seed-bytes: an even number of hex digits is needed");
        }
        let bytes = (0..h.len())
            .step_by(2)
            .map(|i| {
                h.get(i..i + 2)
                    .and_then(|b| u8::from_str_radix(b, 16).ok())
                    .ok_or_else(|| SampleError(format!("option --seed-bytes: `{h}` is not hex")))
            })
            .collect::<Result<Vec<u8>, _>>()?;
        return Ok(if version == 1 {
            Random::from_bytes_v1(&bytes)
        } else {
            Random::from_bytes(&bytes)
        });
    }
    Ok(Random::from_decimal(seed.unwrap_or("0"))?)
}
