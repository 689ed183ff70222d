//! `lockstep sample numpy-legacy FN` and `lockstep sample numpy FN`.
//!
//! `numpy-legacy`: `rs = np.random.RandomState(seed)`; `--seed` is an integer in
//! `[0, 2^32)` (default 0) or a comma list of them (`--seed=1,2,3` = `RandomState([1, 2, 3])`).
//! With `--bit-generator=BG` it is `rs = np.random.RandomState(np.random.BG(seed))` instead
//! (seeded through `SeedSequence`, as `numpy`'s `--seed`).
//!
//! Integer samplers (`randint`, `integers`) take every NumPy integer dtype (`--dtype=uint8`,
//! …, `bool`) and array bounds: `--low`/`--high` with commas are 1-d arrays, reshaped (C
//! order) by `--low-shape`/`--high-shape`, broadcast together (and with `--shape` when given).
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
const INT: OptDoc = opt(
    &["dtype"],
    "int64; or int32, int16, int8, uint64, uint32, uint16, uint8, bool (printed as int64, \
     uint64 as uint64, bool as 0/1)",
);
/// Integer bounds: a scalar, or a comma list (a 1-d array) reshaped by `--low-shape`.
const ILOW: OptDoc = opt(&["low"], "0; or L1,L2,.. (an array)");
const IHIGH: OptDoc = opt(&["high"], "required; or H1,H2,.. (an array)");
const LOW_SHAPE: OptDoc = opt(
    &["low-shape"],
    "none; D0,D1,.. (the shape of the low array)",
);
const HIGH_SHAPE: OptDoc = opt(
    &["high-shape"],
    "none; D0,D1,.. (the shape of the high array)",
);
const ISIZE: OptDoc = opt(
    &["shape"],
    "one value; D0,D1,.. (with array bounds: the broadcast shape)",
);
/// The dtypes `--dtype` takes for integers.
const INT_DTYPES: [&str; 9] = [
    "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool",
];
const FLOAT: OptDoc = opt(&["dtype"], "float64; or float32");

/// `lockstep sample numpy-legacy FN`: what `rs = np.random.RandomState(S)` then one call draws.
pub(super) const LEGACY: LibDoc = LibDoc {
    name: "numpy-legacy",
    seeding: "rs = np.random.RandomState(S), or np.random.RandomState(np.random.BG(S)) with \
              --bit-generator=BG",
    common: &[
        opt(
            &["seed"],
            "0; an integer in [0, 2^32), or a list S1,S2,.. (with --bit-generator: as numpy's)",
        ),
        opt(
            &["bit-generator"],
            "none (MT19937 seeded the legacy way); or PCG64, PCG64DXSM, MT19937, Philox, SFC64",
        ),
        opt(&["repeat"], "1"),
    ],
    functions: &LEGACY_FNS,
};

/// `lockstep sample numpy FN`: what `g = np.random.default_rng(S)` then one call draws.
pub(super) const GENERATOR: LibDoc = LibDoc {
    name: "numpy",
    seeding: "g = np.random.default_rng(S), or np.random.Generator(np.random.BG(S)) with \
              --bit-generator=BG",
    common: &[
        opt(&["seed"], "0; an integer in [0, 2^128), or a list S1,S2,.."),
        opt(
            &["bit-generator"],
            "PCG64; or PCG64DXSM, MT19937, Philox, SFC64",
        ),
        opt(&["repeat"], "1"),
    ],
    functions: &GENERATOR_FNS,
};

/// `numpy-legacy`'s functions: its own, then the distributions.
const LEGACY_FNS: [FnDoc; 12 + DISTS.len()] = concat(
    [
        BYTES,
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
            call: "rs.randint(low, high, size=shape, dtype=dtype) (masked rejection)",
            options: &[ILOW, IHIGH, LOW_SHAPE, HIGH_SHAPE, INT, ISIZE],
            example: "--low=-3,0 --high=3 --low-shape=2,1 --high-shape=1 --dtype=int8 --shape=2,5",
        },
        FnDoc {
            name: "tomaxint",
            call: "rs.tomaxint(size=shape) (int64: next_uint64 >> 1)",
            options: &[SIZE],
            example: "--shape=3",
        },
        FnDoc {
            name: "random_integers",
            call: "rs.random_integers(low, high, size=shape) (int64; randint(low, high + 1), \
                   high up to 2^63 - 1)",
            options: &[opt(&["low"], "1"), HIGH, SIZE],
            example: "--low=-5 --high=5 --shape=4",
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
        FnDoc {
            name: "standard_exponential",
            call: "rs.standard_exponential(size=shape) (float64; -log(1 - U))",
            options: &[DSIZE],
            example: "--shape=3",
        },
        FnDoc {
            name: "multivariate_normal",
            call: "rs.multivariate_normal(mean, np.reshape(cov, (d, d)), size=shape, \
                   check_valid=check_valid, tol=tol) (float64, size + (d,); LAPACK's svd, \
                   d <= 25; within 1e-12 of NumPy's result, relative to the largest magnitude, \
                   where cov's singular values are separated; NumPy's RuntimeWarning printed \
                   to stderr)",
            options: &[
                opt(&["mean"], "required; M1,..,Md"),
                opt(&["cov"], "required; d*d values, row-major"),
                opt(&["check-valid"], "warn; or raise, ignore"),
                opt(&["tol"], "1e-8"),
                DSIZE,
            ],
            example: "--mean=0,1 --cov=2,0.5,0.5,1 --check-valid=warn --tol=1e-8 --shape=3",
        },
        FnDoc {
            name: "standard_gamma",
            call: "rs.standard_gamma(shape, size) (float64)",
            options: &[opt(&["shape"], "required"), GSIZE],
            example: "--shape=0.5 --size=4",
        },
    ],
    DISTS,
);

/// `bytes`, on both classes.
const BYTES: FnDoc = FnDoc {
    name: "bytes",
    call: "list(bytes(length)), then list(bytes(then)) on the same generator (ints 0..255)",
    options: &[opt(&["length"], "required"), opt(&["then"], "none")],
    example: "--length=5 --then=3",
};

/// `--length` then `--then` bytes, `repeat` times, as integers.
fn bytes_calls(
    opts: &Opts,
    repeat: usize,
    mut draw: impl FnMut(usize) -> lockstep::rng::Result<Vec<u8>>,
) -> Result<Values, SampleError> {
    let length: usize = opts.require("length")?;
    let then: Option<usize> = opts.get("then")?;
    check_count(
        length
            .saturating_add(then.unwrap_or(0))
            .saturating_mul(repeat),
    )?;
    repeat_calls(repeat, || {
        let mut v = draw(length)?;
        if let Some(t) = then {
            v.extend(draw(t)?);
        }
        Ok(Values::I64(v.into_iter().map(i64::from).collect()))
    })
}

/// `numpy`'s functions: its own, then the distributions.
const GENERATOR_FNS: [FnDoc; 15 + DISTS.len()] = concat(
    [
        BYTES,
        FnDoc {
            name: "permuted",
            call: "g.permuted(x, axis=axis, out=out) with x = np.arange(prod(shape)).reshape(shape), \
                   out = np.empty(shape, order=out) (int64, printed in C order)",
            options: &[
                opt(&["shape"], "required; D0,D1,.. (the shape of x)"),
                opt(&["axis"], "none; an integer, negative from the end"),
                opt(&["out"], "none; C or F (out's memory order)"),
            ],
            example: "--shape=3,4 --axis=1 --out=F",
        },
        FnDoc {
            name: "multivariate_hypergeometric",
            call: "g.multivariate_hypergeometric(colors, nsample, size=shape, method=method) \
                   (int64, size + (len(colors),))",
            options: &[
                opt(&["colors"], "required; C1,C2,.."),
                opt(&["nsample"], "required"),
                opt(&["method"], "marginals; or count"),
                DSIZE,
            ],
            example: "--colors=16,8,4 --nsample=6 --method=count --shape=3",
        },
        FnDoc {
            name: "multivariate_normal",
            call: "g.multivariate_normal(mean, np.reshape(cov, (d, d)), size=shape, \
                   check_valid=check_valid, tol=tol, method=method) (float64, size + (d,); \
                   within 1e-12 of NumPy's LAPACK result, relative to the largest magnitude, \
                   where cov's singular values / eigenvalues are separated; svd/eigh for \
                   d <= 25; NumPy's RuntimeWarning printed to stderr)",
            options: &[
                opt(&["mean"], "required; M1,..,Md"),
                opt(&["cov"], "required; d*d values, row-major"),
                opt(&["method"], "svd; or eigh, cholesky"),
                opt(
                    &["check-valid"],
                    "warn; or raise, ignore (ignored with cholesky, as in NumPy)",
                ),
                opt(&["tol"], "1e-8; ignored with cholesky, as in NumPy"),
                DSIZE,
            ],
            example: "--mean=0,1 --cov=2,0.5,0.5,1 --method=eigh --check-valid=warn --tol=1e-8 --shape=3",
        },
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
            call: "g.integers(low, high, size=shape, dtype=dtype, endpoint=endpoint) (Lemire)",
            options: &[
                ILOW,
                IHIGH,
                LOW_SHAPE,
                HIGH_SHAPE,
                opt(&["endpoint"], "false"),
                INT,
                ISIZE,
            ],
            example: "--low=0 --high=6,7,8 --low-shape=1 --high-shape=3 --endpoint=true --dtype=uint16 \
                      --shape=2,3",
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
            name: "standard_exponential",
            call: "g.standard_exponential(size=shape, dtype=dtype, method=method)",
            options: &[SIZE, FLOAT, opt(&["method"], "zig; or inv (-log1p(-U))")],
            example: "--shape=3 --dtype=float32 --method=inv",
        },
        FnDoc {
            name: "random_raw",
            call: "bg = g.bit_generator; bg.advance(advance); bg = bg.jumped(jumped); \
                   bg.random_raw(size) (uint64; MT19937 gives 32-bit words)",
            options: &[
                SIZE,
                opt(&["advance"], "none; PCG64, PCG64DXSM, Philox"),
                opt(&["jumped"], "none; PCG64, PCG64DXSM, Philox, MT19937"),
            ],
            example: "--shape=4 --advance=10 --jumped=2",
        },
        FnDoc {
            name: "state",
            call: "bg.random_raw(draws) after --advance/--jumped, then bg.state flattened to \
                   integers (state, inc | counter, key, buffer, buffer_pos | s | key, pos; \
                   then has_uint32, uinteger)",
            options: &[
                opt(&["draws"], "0"),
                opt(&["advance"], "none"),
                opt(&["jumped"], "none"),
            ],
            example: "--draws=3 --advance=5 --jumped=1",
        },
        FnDoc {
            name: "spawn",
            call: "[c.random(size) for c in g.spawn(n)] (float64)",
            options: &[opt(&["n"], "required"), SIZE],
            example: "--n=3 --shape=2",
        },
        FnDoc {
            name: "standard_gamma",
            call: "g.standard_gamma(shape, size, dtype=dtype)",
            options: &[opt(&["shape"], "required"), GSIZE, FLOAT],
            example: "--shape=0.5 --size=4 --dtype=float32",
        },
    ],
    DISTS,
);

/// `repeat` calls of a sampler that fills `n` float64 values.
fn f64_calls(
    repeat: usize,
    n: usize,
    mut fill: impl FnMut(&mut [f64]) -> lockstep::rng::Result<()>,
) -> Result<Values, SampleError> {
    repeat_calls(repeat, || {
        let mut v = vec![0.0; n];
        fill(&mut v)?;
        Ok(Values::F64(v))
    })
}
use lockstep::rng::compat::numpy::{
    BitGenerator, CheckValid, Distributions, Generator, IntDtype, MemoryOrder, MvhgMethod, MvnDraw,
    MvnMethod, Pcg64Dxsm, Philox, RandomState, SeedSequence, Sfc64,
};
use lockstep::rng::engines::{Mt19937, Pcg64};

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

/// `multivariate_normal`'s `--mean`, `--cov`, `--check-valid` and `--tol`, for both classes.
fn mvn_options(opts: &Opts) -> Result<(Vec<f64>, Vec<f64>, CheckValid, f64), SampleError> {
    let mean: Vec<f64> = opts
        .list("mean")?
        .ok_or_else(|| SampleError("option --mean is required here".into()))?;
    let cov: Vec<f64> = opts
        .list("cov")?
        .ok_or_else(|| SampleError("option --cov is required here".into()))?;
    // NumPy ignores check_valid with cholesky; an unknown value is refused here all the same.
    let check = match opts.raw("check-valid").unwrap_or("warn") {
        "warn" => CheckValid::Warn,
        "raise" => CheckValid::Raise,
        "ignore" => CheckValid::Ignore,
        c => {
            return fail(format!(
                "option --check-valid={c}: check_valid must equal 'warn', 'raise', or 'ignore'"
            ));
        }
    };
    let tol: f64 = opts.get_or("tol", 1e-8)?;
    Ok((mean, cov, check, tol))
}

/// The values of one `multivariate_normal` call; NumPy's `RuntimeWarning` goes to stderr.
fn mvn_values(draw: MvnDraw) -> Result<Values, SampleError> {
    if draw.not_psd {
        eprintln!("RuntimeWarning: covariance is not symmetric positive-semidefinite.");
    }
    Ok(Values::F64(draw.values))
}

pub fn run_legacy(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    if let Some(bg) = opts.raw("bit-generator") {
        let ss = SeedSequence::parse(seed)?;
        return match bg {
            "PCG64" => run_rs(rs_on::<Pcg64>(&ss), func, opts, repeat),
            "PCG64DXSM" => run_rs(rs_on::<Pcg64Dxsm>(&ss), func, opts, repeat),
            "MT19937" => run_rs(rs_on::<Mt19937>(&ss), func, opts, repeat),
            "Philox" => run_rs(rs_on::<Philox>(&ss), func, opts, repeat),
            "SFC64" => run_rs(rs_on::<Sfc64>(&ss), func, opts, repeat),
            other => fail(format!(
                "option --bit-generator={other}: expected PCG64, PCG64DXSM, MT19937, Philox or SFC64"
            )),
        };
    }
    let rs = if seed.contains(',') || seed.trim().starts_with('[') {
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
    run_rs(rs, func, opts, repeat)
}

/// `np.random.RandomState(BG(seed_seq))`.
fn rs_on<B: BitGenerator>(ss: &SeedSequence) -> RandomState<B> {
    RandomState::from_bit_generator(B::from_seed_seq(ss))
}

fn run_rs<B: BitGenerator>(
    mut rs: RandomState<B>,
    func: &str,
    opts: &Opts,
    repeat: usize,
) -> Result<Values, SampleError> {
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
            let dt = dtype(opts, &INT_DTYPES)?;
            int_calls(&mut LegacyInts(&mut rs), dt, opts, repeat)
        }
        "tomaxint" => {
            let n = size(opts, repeat)?;
            repeat_calls(repeat, || {
                let mut v = vec![0i64; n];
                rs.tomaxint(&mut v);
                Ok(Values::I64(v))
            })
        }
        "random_integers" => {
            let n = size(opts, repeat)?;
            let low: i64 = opts.get_or("low", 1)?;
            let high: i64 = opts.require("high")?;
            repeat_calls(repeat, || {
                let mut v = vec![0i64; n];
                rs.random_integers(low, high, &mut v)?;
                Ok(Values::I64(v))
            })
        }
        "permutation" => {
            let n = need_n(opts, repeat)?;
            repeat_calls(repeat, || Ok(Values::I64(rs.permutation(n))))
        }
        "bytes" => bytes_calls(opts, repeat, |n| rs.bytes(n)),
        "multivariate_normal" => {
            let (mean, cov, check, tol) = mvn_options(opts)?;
            let rows = dist_size(opts, false, mean.len(), repeat)?;
            repeat_calls(repeat, || {
                mvn_values(rs.multivariate_normal(&mean, &cov, rows, check, tol)?)
            })
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
        "standard_exponential" => {
            let n = dist_size(opts, false, 1, repeat)?;
            f64_calls(repeat, n, |v| {
                rs.standard_exponential(v);
                Ok(())
            })
        }
        _ => {
            run_dist(&mut rs, func, opts, repeat).unwrap_or_else(|| unknown_function(&LEGACY, func))
        }
    }
}

pub fn run_generator(func: &str, opts: &Opts, repeat: usize) -> Result<Values, SampleError> {
    let seed = opts.raw("seed").unwrap_or("0");
    let ss = SeedSequence::parse(seed)?;
    match opts.raw("bit-generator").unwrap_or("PCG64") {
        "PCG64" => run_gen(Generator::<Pcg64>::from_seed_seq(ss), func, opts, repeat),
        "PCG64DXSM" => run_gen(
            Generator::<Pcg64Dxsm>::from_seed_seq(ss),
            func,
            opts,
            repeat,
        ),
        "MT19937" => run_gen(Generator::<Mt19937>::from_seed_seq(ss), func, opts, repeat),
        "Philox" => run_gen(Generator::<Philox>::from_seed_seq(ss), func, opts, repeat),
        "SFC64" => run_gen(Generator::<Sfc64>::from_seed_seq(ss), func, opts, repeat),
        other => fail(format!(
            "option --bit-generator={other}: expected PCG64, PCG64DXSM, MT19937, Philox or SFC64"
        )),
    }
}

/// What the CLI needs of a bit generator beyond drawing: `jumped`, `advance` and its state.
trait BitGenOps: BitGenerator {
    fn jumped_by(&self, _jumps: u128) -> Result<Self, SampleError> {
        fail(format!("{}: jumped is not supported", Self::NAME))
    }
    fn advance_by(&mut self, _delta: u128) -> Result<(), SampleError> {
        fail(format!("{}: advance is not supported", Self::NAME))
    }
    /// The state as NumPy's `state` dict lists it, flattened to integers.
    fn state_ints(&self) -> Vec<String>;
}

fn pending_ints(p: Option<u32>) -> [String; 2] {
    [
        u32::from(p.is_some()).to_string(),
        p.unwrap_or(0).to_string(),
    ]
}

/// PCG64 and PCG64DXSM share their state layout and jump/advance API (they differ only in
/// the multiplier and output function).
macro_rules! pcg_bit_gen_ops {
    ($($t:ty),*) => {$(
        impl BitGenOps for $t {
            fn jumped_by(&self, jumps: u128) -> Result<Self, SampleError> {
                Ok(self.jumped(jumps))
            }
            fn advance_by(&mut self, delta: u128) -> Result<(), SampleError> {
                self.advance(delta);
                Ok(())
            }
            fn state_ints(&self) -> Vec<String> {
                let mut v = vec![self.state().to_string(), self.inc().to_string()];
                v.extend(pending_ints(self.pending()));
                v
            }
        }
    )*};
}
pcg_bit_gen_ops!(Pcg64, Pcg64Dxsm);

impl BitGenOps for Philox {
    fn jumped_by(&self, jumps: u128) -> Result<Self, SampleError> {
        Ok(self.jumped(jumps))
    }
    fn advance_by(&mut self, delta: u128) -> Result<(), SampleError> {
        self.advance([delta as u64, (delta >> 64) as u64, 0, 0]);
        Ok(())
    }
    fn state_ints(&self) -> Vec<String> {
        let (buffer, pos) = self.buffer();
        let mut v: Vec<String> = self.counter().iter().map(u64::to_string).collect();
        v.extend(self.key().iter().map(u64::to_string));
        v.extend(buffer.iter().map(u64::to_string));
        v.push(pos.to_string());
        v.extend(pending_ints(self.pending()));
        v
    }
}

impl BitGenOps for Sfc64 {
    fn state_ints(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state().iter().map(u64::to_string).collect();
        v.extend(pending_ints(self.pending()));
        v
    }
}

impl BitGenOps for Mt19937 {
    fn jumped_by(&self, jumps: u128) -> Result<Self, SampleError> {
        let jumps = u64::try_from(jumps)
            .map_err(|_| SampleError(format!("MT19937: jumped({jumps}) is too many jumps")))?;
        Ok(lockstep::rng::compat::numpy::mt19937_jumped(self, jumps))
    }
    fn state_ints(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state().iter().map(u32::to_string).collect();
        v.push(self.pos().to_string());
        v
    }
}

/// `--advance=D` then `--jumped=K` on the generator's bit generator, when given.
fn moved<B: BitGenOps>(mut g: Generator<B>, opts: &Opts) -> Result<Generator<B>, SampleError> {
    if let Some(d) = opts.get::<u128>("advance")? {
        g.bit_generator().advance_by(d)?;
    }
    if let Some(k) = opts.get::<u128>("jumped")? {
        let b = g.bit_generator().jumped_by(k)?;
        g = Generator::with_bit_generator(b);
    }
    Ok(g)
}

fn run_gen<B: BitGenOps>(
    mut g: Generator<B>,
    func: &str,
    opts: &Opts,
    repeat: usize,
) -> Result<Values, SampleError> {
    match func {
        "random_raw" => {
            let n = size(opts, repeat)?;
            let mut g = moved(g, opts)?;
            repeat_calls(repeat, || {
                Ok(Values::U64(
                    (0..n).map(|_| g.bit_generator().random_raw()).collect(),
                ))
            })
        }
        "state" => {
            let draws: usize = opts.get_or("draws", 0)?;
            check_count(draws)?;
            let mut g = moved(g, opts)?;
            repeat_calls(repeat, || {
                for _ in 0..draws {
                    g.bit_generator().random_raw();
                }
                Ok(Values::BigInt(g.bit_generator().state_ints()))
            })
        }
        "spawn" => {
            let kids: usize = opts.require("n")?;
            let n = size(opts, repeat)?;
            check_count(kids.saturating_mul(n).saturating_mul(repeat))?;
            repeat_calls(repeat, || {
                let mut all = Vec::with_capacity(kids * n);
                for mut c in g.spawn(kids)? {
                    let mut v = vec![0.0; n];
                    c.random(&mut v);
                    all.extend(v);
                }
                Ok(Values::F64(all))
            })
        }
        "random" | "standard_normal" | "standard_exponential" => {
            let n = size(opts, repeat)?;
            let dt = dtype(opts, &["float64", "float32"])?;
            let inv = func == "standard_exponential"
                && match opts.raw("method").unwrap_or("zig") {
                    "zig" => false,
                    "inv" => true,
                    m => {
                        return fail(format!(
                            "option --method={m}: method must be either 'inv' or 'zig'"
                        ));
                    }
                };
            repeat_calls(repeat, || {
                Ok(if dt == "float32" {
                    let mut v = vec![0f32; n];
                    match func {
                        "random" => g.random_f32(&mut v),
                        "standard_normal" => g.standard_normal_f32(&mut v),
                        _ if inv => g.standard_exponential_inv_f32(&mut v),
                        _ => g.standard_exponential_f32(&mut v),
                    }
                    Values::F32(v)
                } else {
                    let mut v = vec![0f64; n];
                    match func {
                        "random" => g.random(&mut v),
                        "standard_normal" => g.standard_normal(&mut v),
                        _ if inv => g.standard_exponential_inv(&mut v),
                        _ => g.standard_exponential(&mut v),
                    }
                    Values::F64(v)
                })
            })
        }
        "integers" => {
            let endpoint = opts.flag("endpoint", false)?;
            let dt = dtype(opts, &INT_DTYPES)?;
            int_calls(&mut GenInts(&mut g, endpoint), dt, opts, repeat)
        }
        "permutation" => {
            let n = need_n(opts, repeat)?;
            repeat_calls(repeat, || Ok(Values::I64(g.permutation(n))))
        }
        "bytes" => bytes_calls(opts, repeat, |n| g.bytes(n)),
        "permuted" => {
            let shape: Vec<usize> = opts
                .list("shape")?
                .ok_or_else(|| SampleError("option --shape is required here".into()))?;
            let n = shape
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .unwrap_or(usize::MAX);
            check_count(n.saturating_mul(repeat))?;
            let axis: Option<isize> = opts.get("axis")?;
            let order = match opts.raw("out") {
                None | Some("C") => MemoryOrder::C,
                Some("F") => MemoryOrder::F,
                Some(o) => return fail(format!("option --out={o}: expected C or F")),
            };
            let x: Vec<i64> = (0..n as i64).collect();
            repeat_calls(repeat, || {
                let mut v = x.clone();
                g.permuted_out(&mut v, &shape, axis, order)?;
                Ok(Values::I64(v))
            })
        }
        "multivariate_hypergeometric" => {
            let colors: Vec<i64> = opts
                .list("colors")?
                .ok_or_else(|| SampleError("option --colors is required here".into()))?;
            let nsample: i64 = opts.require("nsample")?;
            let method = match opts.raw("method").unwrap_or("marginals") {
                "marginals" => MvhgMethod::Marginals,
                "count" => MvhgMethod::Count,
                m => {
                    return fail(format!(
                        "option --method={m}: method must be \"count\" or \"marginals\""
                    ));
                }
            };
            let rows = dist_size(opts, false, colors.len(), repeat)?;
            repeat_calls(repeat, || {
                Ok(Values::I64(g.multivariate_hypergeometric(
                    &colors, nsample, rows, method,
                )?))
            })
        }
        "multivariate_normal" => {
            let method = match opts.raw("method").unwrap_or("svd") {
                "svd" => MvnMethod::Svd,
                "eigh" => MvnMethod::Eigh,
                "cholesky" => MvnMethod::Cholesky,
                m => {
                    return fail(format!(
                        "option --method={m}: method must be one of {{'eigh', 'svd', 'cholesky'}}"
                    ));
                }
            };
            let (mean, cov, check, tol) = mvn_options(opts)?;
            let rows = dist_size(opts, false, mean.len(), repeat)?;
            repeat_calls(repeat, || {
                mvn_values(g.multivariate_normal(&mean, &cov, rows, method, check, tol)?)
            })
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
        "standard_gamma" if opts.raw("dtype").is_some() => {
            let shape: f64 = opts.require("shape")?;
            let n = dist_size(opts, true, 1, repeat)?;
            if dtype(opts, &["float64", "float32"])? == "float32" {
                repeat_calls(repeat, || {
                    let mut v = vec![0f32; n];
                    g.standard_gamma_f32(shape as f32, &mut v)?;
                    Ok(Values::F32(v))
                })
            } else {
                f64_calls(repeat, n, |v| g.standard_gamma(shape, v))
            }
        }
        _ => run_dist(&mut g, func, opts, repeat)
            .unwrap_or_else(|| unknown_function(&GENERATOR, func)),
    }
}

// ------------------------------------------------------------------ non-uniform distributions

/// `--size` or `--shape`: NumPy's `size` for the distributions (gamma's own `--shape` is its
/// parameter, so there only `--size` is the output shape).
const DSIZE: OptDoc = opt(&["shape", "size"], "one value; D0,D1,..");
const GSIZE: OptDoc = opt(&["size"], "one value; D0,D1,..");

const fn f(
    name: &'static str,
    call: &'static str,
    options: &'static [OptDoc],
    example: &'static str,
) -> FnDoc {
    FnDoc {
        name,
        call,
        options,
        example,
    }
}

/// The distributions both `RandomState` and `Generator` have (same names and options; each
/// class runs its own algorithms).
const DISTS: [FnDoc; 29] = [
    f(
        "beta",
        "beta(a, b, size) (float64)",
        &[opt(&["a"], "required"), opt(&["b"], "required"), DSIZE],
        "--a=0.5 --b=0.7 --shape=4",
    ),
    f(
        "binomial",
        "binomial(n, p, size) (int64)",
        &[opt(&["n"], "required"), opt(&["p"], "required"), DSIZE],
        "--n=100 --p=0.4 --shape=4",
    ),
    f(
        "chisquare",
        "chisquare(df, size) (float64)",
        &[opt(&["df"], "required"), DSIZE],
        "--df=3 --shape=4",
    ),
    f(
        "dirichlet",
        "dirichlet(alpha, size) (float64, size + (len(alpha),))",
        &[opt(&["alpha"], "required; A1,A2,.."), DSIZE],
        "--alpha=0.5,1,2 --shape=2",
    ),
    f(
        "exponential",
        "exponential(scale, size) (float64)",
        &[opt(&["scale"], "1"), DSIZE],
        "--scale=2 --shape=3",
    ),
    f(
        "f",
        "f(dfnum, dfden, size) (float64)",
        &[
            opt(&["dfnum"], "required"),
            opt(&["dfden"], "required"),
            DSIZE,
        ],
        "--dfnum=3 --dfden=5 --shape=4",
    ),
    f(
        "gamma",
        "gamma(shape, scale, size) (float64)",
        &[opt(&["shape"], "required"), opt(&["scale"], "1"), GSIZE],
        "--shape=2.5 --scale=2 --size=4",
    ),
    f(
        "geometric",
        "geometric(p, size) (int64)",
        &[opt(&["p"], "required"), DSIZE],
        "--p=0.2 --shape=4",
    ),
    f(
        "gumbel",
        "gumbel(loc, scale, size) (float64)",
        &[opt(&["loc"], "0"), opt(&["scale"], "1"), DSIZE],
        "--loc=1 --scale=2 --shape=3",
    ),
    f(
        "hypergeometric",
        "hypergeometric(ngood, nbad, nsample, size) (int64)",
        &[
            opt(&["ngood"], "required"),
            opt(&["nbad"], "required"),
            opt(&["nsample"], "required"),
            DSIZE,
        ],
        "--ngood=30 --nbad=20 --nsample=15 --shape=4",
    ),
    f(
        "laplace",
        "laplace(loc, scale, size) (float64)",
        &[opt(&["loc"], "0"), opt(&["scale"], "1"), DSIZE],
        "--loc=1 --scale=2 --shape=3",
    ),
    f(
        "logistic",
        "logistic(loc, scale, size) (float64)",
        &[opt(&["loc"], "0"), opt(&["scale"], "1"), DSIZE],
        "--loc=1 --scale=2 --shape=3",
    ),
    f(
        "lognormal",
        "lognormal(mean, sigma, size) (float64)",
        &[opt(&["mean"], "0"), opt(&["sigma"], "1"), DSIZE],
        "--mean=1 --sigma=0.5 --shape=3",
    ),
    f(
        "logseries",
        "logseries(p, size) (int64)",
        &[opt(&["p"], "required"), DSIZE],
        "--p=0.9 --shape=4",
    ),
    f(
        "multinomial",
        "multinomial(n, pvals, size) (int64, size + (len(pvals),))",
        &[
            opt(&["n"], "required"),
            opt(&["pvals"], "required; P1,P2,.."),
            DSIZE,
        ],
        "--n=20 --pvals=0.2,0.3,0.5 --shape=2",
    ),
    f(
        "negative_binomial",
        "negative_binomial(n, p, size) (int64)",
        &[opt(&["n"], "required"), opt(&["p"], "required"), DSIZE],
        "--n=5 --p=0.3 --shape=4",
    ),
    f(
        "noncentral_chisquare",
        "noncentral_chisquare(df, nonc, size) (float64)",
        &[opt(&["df"], "required"), opt(&["nonc"], "required"), DSIZE],
        "--df=3 --nonc=2 --shape=4",
    ),
    f(
        "noncentral_f",
        "noncentral_f(dfnum, dfden, nonc, size) (float64)",
        &[
            opt(&["dfnum"], "required"),
            opt(&["dfden"], "required"),
            opt(&["nonc"], "required"),
            DSIZE,
        ],
        "--dfnum=3 --dfden=5 --nonc=2 --shape=4",
    ),
    f(
        "pareto",
        "pareto(a, size) (float64)",
        &[opt(&["a"], "required"), DSIZE],
        "--a=3 --shape=4",
    ),
    f(
        "poisson",
        "poisson(lam, size) (int64)",
        &[opt(&["lam"], "1"), DSIZE],
        "--lam=4.5 --shape=4",
    ),
    f(
        "power",
        "power(a, size) (float64)",
        &[opt(&["a"], "required"), DSIZE],
        "--a=3 --shape=4",
    ),
    f(
        "rayleigh",
        "rayleigh(scale, size) (float64)",
        &[opt(&["scale"], "1"), DSIZE],
        "--scale=2 --shape=4",
    ),
    f(
        "standard_cauchy",
        "standard_cauchy(size) (float64)",
        &[DSIZE],
        "--shape=4",
    ),
    f(
        "standard_t",
        "standard_t(df, size) (float64)",
        &[opt(&["df"], "required"), DSIZE],
        "--df=4 --shape=4",
    ),
    f(
        "triangular",
        "triangular(left, mode, right, size) (float64)",
        &[
            opt(&["left"], "required"),
            opt(&["mode"], "required"),
            opt(&["right"], "required"),
            DSIZE,
        ],
        "--left=-1 --mode=0.5 --right=2 --shape=4",
    ),
    f(
        "vonmises",
        "vonmises(mu, kappa, size) (float64)",
        &[opt(&["mu"], "required"), opt(&["kappa"], "required"), DSIZE],
        "--mu=0.5 --kappa=2 --shape=4",
    ),
    f(
        "wald",
        "wald(mean, scale, size) (float64)",
        &[
            opt(&["mean"], "required"),
            opt(&["scale"], "required"),
            DSIZE,
        ],
        "--mean=1 --scale=2 --shape=4",
    ),
    f(
        "weibull",
        "weibull(a, size) (float64)",
        &[opt(&["a"], "required"), DSIZE],
        "--a=1.5 --shape=4",
    ),
    f(
        "zipf",
        "zipf(a, size) (int64)",
        &[opt(&["a"], "required"), DSIZE],
        "--a=2 --shape=4",
    ),
];

/// `a` followed by `b`, for the constant function lists.
const fn concat<const A: usize, const B: usize, const C: usize>(
    a: [FnDoc; A],
    b: [FnDoc; B],
) -> [FnDoc; C] {
    assert!(A + B == C);
    let mut out = [DISTS[0]; C];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < C {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

/// The number of values of `--size` (gamma's) or `--size`/`--shape` (the others), checked
/// against the print cap with `per` values per element and `repeat` calls.
fn dist_size(opts: &Opts, gamma: bool, per: usize, repeat: usize) -> Result<usize, SampleError> {
    let dims: Vec<usize> = match opts.list::<usize>("size")? {
        Some(d) => d,
        None if gamma => Vec::new(),
        None => opts.shape(&[])?,
    };
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX);
    check_count(n.saturating_mul(per).saturating_mul(repeat))?;
    Ok(n)
}

/// `--low`/`--high` as NumPy takes them: a scalar, or a 1-d array (a comma list) that
/// `--NAME-shape` may reshape.
struct Bound {
    data: Vec<i128>,
    shape: Vec<usize>,
}

fn bound(opts: &Opts, name: &str, default: Option<i128>) -> Result<Bound, SampleError> {
    let shape_opt = format!("{name}-shape");
    let data: Vec<i128> = match opts.raw(name) {
        None => match default {
            Some(d) => vec![d],
            None => return fail(format!("option --{name} is required here")),
        },
        Some(_) => opts.list(name)?.unwrap_or_default(),
    };
    let listed = opts.raw(name).is_some_and(|r| r.contains(','));
    let shape = match opts.list::<usize>(&shape_opt)? {
        Some(s) => s,
        None if listed => vec![data.len()],
        None => Vec::new(),
    };
    if shape.is_empty() && data.len() != 1 {
        return fail(format!("option --{name}: expected one integer"));
    }
    Ok(Bound { data, shape })
}

/// The output's size at most, for broadcast bounds (a bound on the broadcast shape's size
/// that holds whether or not the shapes broadcast).
fn broadcast_bound(shapes: &[&[usize]]) -> usize {
    let nd = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..nd)
        .map(|k| {
            shapes
                .iter()
                .filter_map(|s| (k + s.len()).checked_sub(nd).map(|i| s[i]))
                .max()
                .unwrap_or(1)
        })
        .try_fold(1usize, |a, d| a.checked_mul(d))
        .unwrap_or(usize::MAX)
}

/// The integer samplers of both classes, for every dtype.
trait IntDraw {
    fn scalar<T: IntDtype>(
        &mut self,
        low: i128,
        high: i128,
        out: &mut [T],
    ) -> lockstep::rng::Result<()>;
    fn array<T: IntDtype>(
        &mut self,
        low: &Bound,
        high: &Bound,
        size: Option<&[usize]>,
    ) -> lockstep::rng::Result<Vec<T>>;
}

/// `RandomState.randint` (open interval, masked rejection).
struct LegacyInts<'a, B: BitGenerator>(&'a mut RandomState<B>);

impl<B: BitGenerator> IntDraw for LegacyInts<'_, B> {
    fn scalar<T: IntDtype>(
        &mut self,
        low: i128,
        high: i128,
        out: &mut [T],
    ) -> lockstep::rng::Result<()> {
        self.0.randint(low, high, out)
    }
    fn array<T: IntDtype>(
        &mut self,
        low: &Bound,
        high: &Bound,
        size: Option<&[usize]>,
    ) -> lockstep::rng::Result<Vec<T>> {
        let (v, _) =
            self.0
                .randint_array((&low.data, &low.shape), (&high.data, &high.shape), size)?;
        Ok(v)
    }
}

/// `Generator.integers` (Lemire; closed interval with `endpoint`).
struct GenInts<'a, B: BitGenerator>(&'a mut Generator<B>, bool);

impl<B: BitGenerator> IntDraw for GenInts<'_, B> {
    fn scalar<T: IntDtype>(
        &mut self,
        low: i128,
        high: i128,
        out: &mut [T],
    ) -> lockstep::rng::Result<()> {
        self.0.integers(low, high, self.1, out)
    }
    fn array<T: IntDtype>(
        &mut self,
        low: &Bound,
        high: &Bound,
        size: Option<&[usize]>,
    ) -> lockstep::rng::Result<Vec<T>> {
        let (v, _) = self.0.integers_array(
            (&low.data, &low.shape),
            (&high.data, &high.shape),
            size,
            self.1,
        )?;
        Ok(v)
    }
}

/// Integers as printed: uint64 as uint64, every other dtype (bool as 0/1) as int64.
fn int_values<T: IntDtype>(v: Vec<T>) -> Values {
    if T::NAME == "uint64" {
        Values::U64(v.into_iter().map(|x| x.to_i128() as u64).collect())
    } else {
        Values::I64(v.into_iter().map(|x| x.to_i128() as i64).collect())
    }
}

/// `randint`/`integers` for `--dtype=dt`.
fn int_calls<D: IntDraw>(
    d: &mut D,
    dt: &str,
    opts: &Opts,
    repeat: usize,
) -> Result<Values, SampleError> {
    match dt {
        "int64" => int_calls_of::<i64, D>(d, opts, repeat),
        "int32" => int_calls_of::<i32, D>(d, opts, repeat),
        "int16" => int_calls_of::<i16, D>(d, opts, repeat),
        "int8" => int_calls_of::<i8, D>(d, opts, repeat),
        "uint64" => int_calls_of::<u64, D>(d, opts, repeat),
        "uint32" => int_calls_of::<u32, D>(d, opts, repeat),
        "uint16" => int_calls_of::<u16, D>(d, opts, repeat),
        "uint8" => int_calls_of::<u8, D>(d, opts, repeat),
        _ => int_calls_of::<bool, D>(d, opts, repeat),
    }
}

fn int_calls_of<T: IntDtype, D: IntDraw>(
    d: &mut D,
    opts: &Opts,
    repeat: usize,
) -> Result<Values, SampleError> {
    let low = bound(opts, "low", Some(0))?;
    let high = bound(opts, "high", None)?;
    if low.shape.is_empty() && high.shape.is_empty() {
        let n = size(opts, repeat)?;
        return repeat_calls(repeat, || {
            let mut v = vec![T::default(); n];
            d.scalar(low.data[0], high.data[0], &mut v)?;
            Ok(int_values(v))
        });
    }
    let size = match opts.raw("shape") {
        Some(_) => Some(opts.shape(&[])?),
        None => None,
    };
    let most = broadcast_bound(&[&low.shape, &high.shape, size.as_deref().unwrap_or(&[])]);
    check_count(most.saturating_mul(repeat))?;
    repeat_calls(repeat, || {
        Ok(int_values(d.array::<T>(&low, &high, size.as_deref())?))
    })
}

/// Runs distribution `func` on `d` (a `RandomState` or a `Generator`); `None` if `func` is not
/// one of [`DISTS`].
fn run_dist<D: Distributions>(
    d: &mut D,
    func: &str,
    opts: &Opts,
    repeat: usize,
) -> Option<Result<Values, SampleError>> {
    let req = |name: &str| opts.require::<f64>(name);
    let opt = |name: &str, default: f64| opts.get_or::<f64>(name, default);
    let run = || -> Result<Values, SampleError> {
        macro_rules! floats {
            ($n:expr, |$v:ident| $body:expr) => {{
                let n = $n;
                repeat_calls(repeat, || {
                    let mut $v = vec![0.0f64; n];
                    $body?;
                    Ok(Values::F64($v))
                })
            }};
        }
        macro_rules! ints {
            ($n:expr, |$v:ident| $body:expr) => {{
                let n = $n;
                repeat_calls(repeat, || {
                    let mut $v = vec![0i64; n];
                    $body?;
                    Ok(Values::I64($v))
                })
            }};
        }
        let size = |gamma: bool| dist_size(opts, gamma, 1, repeat);
        match func {
            "beta" => {
                let (a, b) = (req("a")?, req("b")?);
                floats!(size(false)?, |v| d.beta(a, b, &mut v))
            }
            "binomial" => {
                let n: i64 = opts.require("n")?;
                let p = req("p")?;
                ints!(size(false)?, |v| d.binomial(n, p, &mut v))
            }
            "chisquare" => {
                let df = req("df")?;
                floats!(size(false)?, |v| d.chisquare(df, &mut v))
            }
            "dirichlet" => {
                let alpha: Vec<f64> = opts
                    .list("alpha")?
                    .ok_or_else(|| SampleError("option --alpha is required here".into()))?;
                let rows = dist_size(opts, false, alpha.len(), repeat)?;
                repeat_calls(repeat, || Ok(Values::F64(d.dirichlet(&alpha, rows)?)))
            }
            "exponential" => {
                let scale = opt("scale", 1.0)?;
                floats!(size(false)?, |v| d.exponential(scale, &mut v))
            }
            "f" => {
                let (a, b) = (req("dfnum")?, req("dfden")?);
                floats!(size(false)?, |v| d.f(a, b, &mut v))
            }
            "gamma" => {
                let (shape, scale) = (req("shape")?, opt("scale", 1.0)?);
                floats!(size(true)?, |v| d.gamma(shape, scale, &mut v))
            }
            "geometric" => {
                let p = req("p")?;
                ints!(size(false)?, |v| d.geometric(p, &mut v))
            }
            "gumbel" | "laplace" | "logistic" => {
                let (loc, scale) = (opt("loc", 0.0)?, opt("scale", 1.0)?);
                floats!(size(false)?, |v| match func {
                    "gumbel" => d.gumbel(loc, scale, &mut v),
                    "laplace" => d.laplace(loc, scale, &mut v),
                    _ => d.logistic(loc, scale, &mut v),
                })
            }
            "hypergeometric" => {
                let ngood: i64 = opts.require("ngood")?;
                let nbad: i64 = opts.require("nbad")?;
                let nsample: i64 = opts.require("nsample")?;
                ints!(size(false)?, |v| d
                    .hypergeometric(ngood, nbad, nsample, &mut v))
            }
            "lognormal" => {
                let (mean, sigma) = (opt("mean", 0.0)?, opt("sigma", 1.0)?);
                floats!(size(false)?, |v| d.lognormal(mean, sigma, &mut v))
            }
            "logseries" => {
                let p = req("p")?;
                ints!(size(false)?, |v| d.logseries(p, &mut v))
            }
            "multinomial" => {
                let n: i64 = opts.require("n")?;
                let pvals: Vec<f64> = opts
                    .list("pvals")?
                    .ok_or_else(|| SampleError("option --pvals is required here".into()))?;
                let rows = dist_size(opts, false, pvals.len(), repeat)?;
                repeat_calls(repeat, || Ok(Values::I64(d.multinomial(n, &pvals, rows)?)))
            }
            "negative_binomial" => {
                let (n, p) = (req("n")?, req("p")?);
                ints!(size(false)?, |v| d.negative_binomial(n, p, &mut v))
            }
            "noncentral_chisquare" => {
                let (df, nonc) = (req("df")?, req("nonc")?);
                floats!(size(false)?, |v| d.noncentral_chisquare(df, nonc, &mut v))
            }
            "noncentral_f" => {
                let (a, b, nonc) = (req("dfnum")?, req("dfden")?, req("nonc")?);
                floats!(size(false)?, |v| d.noncentral_f(a, b, nonc, &mut v))
            }
            "pareto" | "power" | "weibull" => {
                let a = req("a")?;
                floats!(size(false)?, |v| match func {
                    "pareto" => d.pareto(a, &mut v),
                    "power" => d.power(a, &mut v),
                    _ => d.weibull(a, &mut v),
                })
            }
            "poisson" => {
                let lam = opt("lam", 1.0)?;
                ints!(size(false)?, |v| d.poisson(lam, &mut v))
            }
            "rayleigh" => {
                let scale = opt("scale", 1.0)?;
                floats!(size(false)?, |v| d.rayleigh(scale, &mut v))
            }
            "standard_cauchy" => floats!(size(false)?, |v| {
                d.standard_cauchy(&mut v);
                Ok::<(), lockstep::rng::Error>(())
            }),
            "standard_gamma" => {
                let shape = req("shape")?;
                floats!(size(true)?, |v| d.standard_gamma(shape, &mut v))
            }
            "standard_t" => {
                let df = req("df")?;
                floats!(size(false)?, |v| d.standard_t(df, &mut v))
            }
            "triangular" => {
                let (l, m, r) = (req("left")?, req("mode")?, req("right")?);
                floats!(size(false)?, |v| d.triangular(l, m, r, &mut v))
            }
            "vonmises" => {
                let (mu, kappa) = (req("mu")?, req("kappa")?);
                floats!(size(false)?, |v| d.vonmises(mu, kappa, &mut v))
            }
            "wald" => {
                let (mean, scale) = (req("mean")?, req("scale")?);
                floats!(size(false)?, |v| d.wald(mean, scale, &mut v))
            }
            "zipf" => {
                let a = req("a")?;
                ints!(size(false)?, |v| d.zipf(a, &mut v))
            }
            _ => unreachable!(),
        }
    };
    (func == "standard_gamma" || DISTS.iter().any(|f| f.name == func)).then(run)
}

#[cfg(test)]
mod tests {
    use super::super::run;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn bad_integer_options_are_errors() {
        for (lib, func, a) in [
            (
                "numpy-legacy",
                "randint",
                "--high=257 --dtype=uint8 --shape=2",
            ),
            (
                "numpy-legacy",
                "randint",
                "--low=-1 --high=3 --dtype=uint16",
            ),
            ("numpy-legacy", "randint", "--high=3 --dtype=float32"),
            (
                "numpy-legacy",
                "randint",
                "--low=1,2 --low-shape=3 --high=9",
            ),
            ("numpy-legacy", "randint", "--low=1,2 --high=1,2,3"),
            ("numpy-legacy", "randint", "--low=1,2 --high=2,2"),
            ("numpy-legacy", "randint", "--low=0,1 --high=5 --shape=3"),
            ("numpy-legacy", "randint", "--low= --high=5"),
            ("numpy-legacy", "randint", "--high=5 --bit-generator=Nope"),
            ("numpy-legacy", "random_integers", "--low=3 --high=2"),
            ("numpy-legacy", "tomaxint", "--shape=100000,100000"),
            (
                "numpy-legacy",
                "randint",
                "--low=0,1 --low-shape=2,1 --high=5,6 --high-shape=1,2 --shape=65536,65536",
            ),
            (
                "numpy",
                "integers",
                "--low=0 --high=2 --endpoint=true --dtype=bool",
            ),
            (
                "numpy",
                "integers",
                "--high=18446744073709551617 --dtype=uint64",
            ),
            (
                "numpy",
                "integers",
                "--high=99999999999999999999999999999999999999999",
            ),
            ("numpy", "standard_exponential", "--method=ziggurat"),
        ] {
            let r = std::panic::catch_unwind(|| run(lib, func, &args(a)));
            match r {
                Ok(Err(_)) => {}
                Ok(Ok(v)) => panic!("{lib} {func} {a}: accepted, gave {v}"),
                Err(_) => panic!("{lib} {func} {a}: panicked"),
            }
        }
        // The largest bounds are fine: uint64 values beyond int64, random_integers at 2^63 - 1.
        let v = run(
            "numpy",
            "integers",
            &args("--low=18446744073709551615 --high=18446744073709551615 --endpoint=true --dtype=uint64"),
        )
        .unwrap();
        assert_eq!(v["values"][0].to_string(), "18446744073709551615");
        let m = i64::MAX;
        let v = run(
            "numpy-legacy",
            "random_integers",
            &args(&format!("--low={m} --high={m}")),
        )
        .unwrap();
        assert_eq!(v["values"][0].to_string(), m.to_string());
    }
}
