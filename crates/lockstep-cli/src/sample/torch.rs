//! `lockstep sample torch FN`: PyTorch's CPU samplers after `torch.manual_seed(S)`.
//!
//! The functions, the PyTorch call each mirrors and their options are in [`LIB`] (printed by
//! `lockstep sample --list torch`).
use super::{
    FnDoc, LibDoc, MAX_VALUES, Opts, SampleError, Values, fail, opt, repeat_calls, unknown_function,
};
use lockstep::rng::Generator;
use lockstep::rng::compat::torch::{self as t, Float, init};

/// `--seed`, any integer PyTorch's `manual_seed` accepts (`-2^63 ..= 2^64-1`), mod 2^64.
pub fn seed_arg(opts: &Opts) -> Result<u64, SampleError> {
    let s = opts.raw("seed").unwrap_or("0");
    match s.trim().parse::<i128>() {
        Ok(v) if (-(1i128 << 63)..(1i128 << 64)).contains(&v) => Ok(v as u64),
        _ => fail(format!(
            "option --seed={s}: PyTorch seeds are integers in [-2^63, 2^64 - 1]"
        )),
    }
}

const SHAPE: super::OptDoc = opt(&["shape"], "1; D0,D1,..");
const FLOAT: super::OptDoc = opt(&["dtype"], "float32; or float64");

/// `lockstep sample torch FN`: what `torch.manual_seed(S)` then one PyTorch call draws.
pub(super) const LIB: LibDoc = LibDoc {
    name: "torch",
    seeding: "torch.manual_seed(S)",
    common: &[
        opt(&["seed"], "0; any integer in [-2^63, 2^64)"),
        opt(&["repeat"], "1"),
    ],
    functions: &[
        FnDoc {
            name: "rand",
            call: "torch.rand(shape, dtype)",
            options: &[SHAPE, FLOAT],
            example: "--shape=2,3 --dtype=float64",
        },
        FnDoc {
            name: "randn",
            call: "torch.randn(shape, dtype)",
            options: &[SHAPE, FLOAT],
            example: "--shape=2,3 --dtype=float32",
        },
        FnDoc {
            name: "normal",
            call: "torch.empty(shape, dtype).normal_(mean, std)",
            options: &[opt(&["mean"], "0"), opt(&["std"], "1"), SHAPE, FLOAT],
            example: "--mean=1 --std=2 --shape=20 --dtype=float64",
        },
        FnDoc {
            name: "uniform",
            call: "torch.empty(shape, dtype).uniform_(low, high)",
            options: &[
                opt(&["low", "a"], "0"),
                opt(&["high", "b"], "1"),
                SHAPE,
                FLOAT,
            ],
            example: "--low=-1 --high=3 --shape=4 --dtype=float32",
        },
        FnDoc {
            name: "exponential",
            call: "torch.empty(shape, dtype).exponential_(lambd)",
            options: &[opt(&["lambd"], "1"), SHAPE, FLOAT],
            example: "--lambd=0.5 --shape=4 --dtype=float64",
        },
        FnDoc {
            name: "bernoulli",
            call: "torch.empty(shape, dtype).bernoulli_(p); with a list --p=p1,p2,..: \
                   torch.bernoulli(torch.tensor([p1,p2,..], dtype))",
            options: &[opt(&["p"], "0.5; or a list p1,p2,.."), SHAPE, FLOAT],
            example: "--p=0.25 --shape=8 --dtype=float32",
        },
        FnDoc {
            name: "dropout",
            call: "F.dropout(torch.ones(shape, dtype), p, training=True)",
            options: &[opt(&["p"], "0.5"), SHAPE, FLOAT],
            example: "--p=0.3 --shape=8 --dtype=float32",
        },
        FnDoc {
            name: "randint",
            call: "torch.randint(low, high, shape, dtype)",
            options: &[
                opt(&["low"], "0"),
                opt(&["high"], "required"),
                SHAPE,
                opt(&["dtype"], "int64; or float32, float64"),
            ],
            example: "--low=-5 --high=10 --shape=2,3 --dtype=int64",
        },
        FnDoc {
            name: "randperm",
            call: "torch.randperm(n, dtype)",
            options: &[
                opt(&["n"], "required"),
                opt(&["dtype"], "int64; or float32, float64"),
            ],
            example: "--n=10 --dtype=int64",
        },
        FnDoc {
            name: "multinomial",
            call: "torch.multinomial(torch.tensor(weights, dtype).reshape(shape), num_samples, \
                   replacement)",
            options: &[
                opt(&["weights"], "required; w1,w2,.."),
                opt(&["num-samples"], "1"),
                opt(&["replacement"], "false"),
                opt(&["shape"], "one row; R,C for R rows of C weights"),
                FLOAT,
            ],
            example: "--weights=1,2,3,4,5,6 --num-samples=2 --replacement=true --shape=2,3 \
                      --dtype=float32",
        },
        FnDoc {
            name: "kaiming_uniform",
            call: "nn.init.kaiming_uniform_(torch.empty(shape, dtype), a, mode, nonlinearity)",
            options: KAIMING,
            example: "--a=0.1 --mode=fan_out --nonlinearity=relu --shape=4,3 --dtype=float32",
        },
        FnDoc {
            name: "kaiming_normal",
            call: "nn.init.kaiming_normal_(torch.empty(shape, dtype), a, mode, nonlinearity)",
            options: KAIMING,
            example: "--a=0 --mode=fan_in --nonlinearity=leaky_relu --shape=4,3 --dtype=float64",
        },
        FnDoc {
            name: "xavier_uniform",
            call: "nn.init.xavier_uniform_(torch.empty(shape, dtype), gain)",
            options: &[opt(&["gain"], "1"), SHAPE, FLOAT],
            example: "--gain=2 --shape=4,3 --dtype=float32",
        },
        FnDoc {
            name: "xavier_normal",
            call: "nn.init.xavier_normal_(torch.empty(shape, dtype), gain)",
            options: &[opt(&["gain"], "1"), SHAPE, FLOAT],
            example: "--gain=2 --shape=4,3 --dtype=float32",
        },
        FnDoc {
            name: "trunc_normal",
            call: "nn.init.trunc_normal_(torch.empty(shape, dtype), mean, std, a, b)",
            options: &[
                opt(&["mean"], "0"),
                opt(&["std"], "1"),
                opt(&["a"], "-2"),
                opt(&["b"], "2"),
                SHAPE,
                FLOAT,
            ],
            example: "--mean=0 --std=1 --a=-1 --b=1 --shape=10 --dtype=float32",
        },
        FnDoc {
            name: "linear",
            call: "nn.Linear(in_features, out_features, bias, dtype=dtype): the weight (flat), \
                   then the bias",
            options: &[
                opt(&["in-features"], "required"),
                opt(&["out-features"], "required"),
                opt(&["bias"], "true"),
                FLOAT,
            ],
            example: "--in-features=4 --out-features=3 --bias=true --dtype=float32",
        },
        FnDoc {
            name: "dataloader",
            call: "the indices DataLoader(range(n), batch_size, shuffle) yields, over `epochs` \
                   epochs",
            options: &[
                opt(&["n"], "required"),
                opt(&["batch-size"], "1"),
                opt(&["epochs"], "1"),
                opt(&["shuffle"], "true"),
            ],
            example: "--n=10 --batch-size=3 --epochs=2 --shuffle=true",
        },
        FnDoc {
            name: "worker-seeds",
            call: "get_worker_info().seed of each of `workers` workers, per epoch, for \
                   DataLoader(range(n), batch_size, shuffle, num_workers=workers)",
            options: &[
                opt(&["workers"], "required"),
                opt(&["epochs"], "1"),
                opt(&["n"], "16"),
                opt(&["batch-size"], "1"),
                opt(&["shuffle"], "true"),
            ],
            example: "--workers=2 --epochs=2 --n=16 --batch-size=4 --shuffle=true",
        },
        FnDoc {
            name: "rand_like",
            call: "torch.rand_like(torch.empty(shape, dtype)) (= rand)",
            options: &[SHAPE, FLOAT],
            example: "--shape=3 --dtype=float64",
        },
        FnDoc {
            name: "randn_like",
            call: "torch.randn_like(torch.empty(shape, dtype)) (= randn)",
            options: &[SHAPE, FLOAT],
            example: "--shape=20 --dtype=float32",
        },
        FnDoc {
            name: "randint_like",
            call: "torch.randint_like(torch.empty(shape, dtype), low, high) (= randint)",
            options: &[
                opt(&["low"], "0"),
                opt(&["high"], "required"),
                SHAPE,
                opt(&["dtype"], "int64; or float32, float64"),
            ],
            example: "--low=-5 --high=5 --shape=4 --dtype=int64",
        },
        FnDoc {
            name: "log_normal",
            call: "torch.empty(shape, dtype).log_normal_(mean, std)",
            options: &[opt(&["mean"], "1"), opt(&["std"], "2"), SHAPE, FLOAT],
            example: "--mean=0.5 --std=0.25 --shape=5 --dtype=float64",
        },
        FnDoc {
            name: "cauchy",
            call: "torch.empty(shape, dtype).cauchy_(median, sigma)",
            options: &[opt(&["median"], "0"), opt(&["sigma"], "1"), SHAPE, FLOAT],
            example: "--median=1 --sigma=2 --shape=5 --dtype=float32",
        },
        FnDoc {
            name: "geometric",
            call: "torch.empty(shape, dtype).geometric_(p)",
            options: &[
                opt(&["p"], "required"),
                SHAPE,
                opt(&["dtype"], "float32; or float64, int64"),
            ],
            example: "--p=0.2 --shape=5 --dtype=int64",
        },
        FnDoc {
            name: "random",
            call: "torch.empty(shape, dtype).random_(), or .random_(from, None) with --from; \
                   --then=K adds torch.empty(K, dtype).random_(from, to=None) (bool and the \
                   integer dtypes print as int64)",
            options: &[
                SHAPE,
                opt(
                    &["from"],
                    "none; an int64 (random_(from, None): [from, dtype max])",
                ),
                opt(&["then"], "none; with --from"),
                opt(
                    &["dtype"],
                    "int64; or int32, int16, int8, uint8, bool, float32, float64",
                ),
            ],
            example: "--shape=5 --from=-3 --then=2 --dtype=int16",
        },
        FnDoc {
            name: "normal_tensor",
            call: "torch.normal(mean, std) with mean = torch.tensor(means, dtype) or the float \
                   --mean, std likewise",
            options: &[
                opt(&["means"], "none; M1,M2,.. (else --mean)"),
                opt(&["stds"], "none; S1,S2,.. (else --std)"),
                opt(&["mean"], "0"),
                opt(&["std"], "1"),
                FLOAT,
            ],
            example: "--means=0,1,2 --stds=1,2,3 --mean=0 --std=1 --dtype=float32",
        },
        FnDoc {
            name: "poisson",
            call: "torch.poisson(torch.tensor(rates, dtype))",
            options: &[opt(&["rates"], "required; R1,R2,.."), FLOAT],
            example: "--rates=0.5,4,12,100 --dtype=float64",
        },
        FnDoc {
            name: "standard_gamma",
            call: "torch._standard_gamma(torch.tensor(alpha, dtype))",
            options: &[opt(&["alpha"], "required; A1,A2,.."), FLOAT],
            example: "--alpha=0.5,1,2.5 --dtype=float32",
        },
        FnDoc {
            name: "gamma",
            call: "torch.distributions.Gamma(torch.tensor(concentration, dtype), \
                   torch.tensor(rate, dtype)).sample()",
            options: &[
                opt(&["concentration"], "required; C1,C2,.."),
                opt(&["rate"], "1"),
                FLOAT,
            ],
            example: "--concentration=0.5,3 --rate=2 --dtype=float64",
        },
        FnDoc {
            name: "dirichlet",
            call: "torch.distributions.Dirichlet(torch.tensor(concentration, dtype)).sample((n,))",
            options: &[
                opt(&["concentration"], "required; C1,C2,.."),
                opt(&["n"], "1"),
                FLOAT,
            ],
            example: "--concentration=0.5,1,2 --n=3 --dtype=float32",
        },
        FnDoc {
            name: "beta",
            call: "torch.distributions.Beta(torch.tensor(concentration1, dtype), \
                   torch.tensor(concentration0, dtype)).sample()",
            options: &[
                opt(&["concentration1"], "required; A1,A2,.."),
                opt(&["concentration0"], "required; B1,B2,.."),
                FLOAT,
            ],
            example: "--concentration1=0.4,2 --concentration0=0.4,3 --dtype=float32",
        },
        FnDoc {
            name: "student_t",
            call: "torch.distributions.StudentT(torch.tensor(df, dtype), loc, scale).sample()",
            options: &[
                opt(&["df"], "required; D1,D2,.."),
                opt(&["loc"], "0"),
                opt(&["scale"], "1"),
                FLOAT,
            ],
            example: "--df=1,3.5,30 --loc=1 --scale=2 --dtype=float64",
        },
        FnDoc {
            name: "chi2",
            call: "torch.distributions.Chi2(torch.tensor(df, dtype)).sample()",
            options: &[opt(&["df"], "required; D1,D2,.."), FLOAT],
            example: "--df=1,3.5 --dtype=float32",
        },
    ],
};

const KAIMING: &[super::OptDoc] = &[
    opt(&["a"], "0"),
    opt(&["mode"], "fan_in; or fan_out"),
    opt(
        &["nonlinearity"],
        "leaky_relu; or relu, tanh, sigmoid, selu, linear, conv2d, ..",
    ),
    SHAPE,
    FLOAT,
];

#[derive(Clone, Copy, PartialEq)]
enum Dtype {
    F32,
    F64,
    I64,
}

fn dtype(opts: &Opts, default: Dtype) -> Result<Dtype, SampleError> {
    match opts.raw("dtype") {
        None => Ok(default),
        Some("float32" | "float" | "torch.float32") => Ok(Dtype::F32),
        Some("float64" | "double" | "torch.float64") => Ok(Dtype::F64),
        Some("int64" | "long" | "torch.int64") => Ok(Dtype::I64),
        Some(other) => fail(format!(
            "option --dtype={other}: expected float32, float64 or int64"
        )),
    }
}

fn float_dtype(opts: &Opts) -> Result<Dtype, SampleError> {
    match dtype(opts, Dtype::F32)? {
        Dtype::I64 => fail("option --dtype=int64: this function fills float tensors only"),
        d => Ok(d),
    }
}

/// A float sampler written once, instantiated for f32 and f64.
trait FloatFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError>;
}

fn run_float(
    g: &mut Generator,
    opts: &Opts,
    repeat: usize,
    numel: usize,
    f: impl FloatFn,
) -> Result<Values, SampleError> {
    fn one<T: Float>(
        g: &mut Generator,
        numel: usize,
        f: &impl FloatFn,
    ) -> Result<Vec<T>, SampleError> {
        let mut v = vec![T::ZERO; numel];
        f.call(g, &mut v)?;
        Ok(v)
    }
    match float_dtype(opts)? {
        Dtype::F32 => repeat_calls(repeat, || Ok(Values::F32(one::<f32>(g, numel, &f)?))),
        _ => repeat_calls(repeat, || Ok(Values::F64(one::<f64>(g, numel, &f)?))),
    }
}

fn numel(shape: &[usize]) -> Result<usize, SampleError> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= MAX_VALUES)
        .ok_or_else(|| {
            SampleError(format!(
                "--shape={shape:?} asks for more than {MAX_VALUES} values; sample prints at most that many"
            ))
        })
}

/// Errors if `count` values per call, `repeat` times, exceed [`MAX_VALUES`].
fn check_total(count: usize, repeat: usize) -> Result<(), SampleError> {
    match count.checked_mul(repeat) {
        Some(t) if t <= MAX_VALUES => Ok(()),
        _ => fail(format!(
            "{count} values per call × {repeat} calls is more than the {MAX_VALUES} values sample prints"
        )),
    }
}

/// Runs torch function `func` on `g`, which the caller has seeded.
pub fn run(
    g: &mut Generator,
    func: &str,
    opts: &Opts,
    repeat: usize,
) -> Result<Values, SampleError> {
    let shape = opts.shape(&[1])?;
    let n = numel(&shape)?;
    check_total(n, repeat)?;
    match func {
        "rand" => run_float(g, opts, repeat, n, RandFn),
        "randn" => run_float(g, opts, repeat, n, NormalFn(0.0, 1.0)),
        "normal" => {
            let (mean, std) = (opts.get_or("mean", 0.0)?, opts.get_or("std", 1.0)?);
            run_float(g, opts, repeat, n, NormalFn(mean, std))
        }
        "uniform" => {
            let low = alias(opts, "low", "a", 0.0)?;
            let high = alias(opts, "high", "b", 1.0)?;
            run_float(g, opts, repeat, n, UniformFn(low, high))
        }
        "exponential" => {
            let lambd: f64 = opts.get_or("lambd", 1.0)?;
            run_float(g, opts, repeat, n, ExponentialFn(lambd))
        }
        "bernoulli" => {
            let p: Vec<f64> = opts.list("p")?.unwrap_or_else(|| vec![0.5]);
            let tensor = opts.raw("p").is_some_and(|s| s.contains(','));
            run_float(g, opts, repeat, n, BernoulliFn(p, tensor))
        }
        "dropout" => {
            let p: f64 = opts.get_or("p", 0.5)?;
            run_float(g, opts, repeat, n, DropoutFn(p))
        }
        "randint" | "randint_like" => {
            let low: i64 = opts.get_or("low", 0)?;
            let high: i64 = opts.require("high")?;
            match dtype(opts, Dtype::I64)? {
                Dtype::I64 => repeat_calls(repeat, || {
                    let mut v = vec![0i64; n];
                    t::random_(g, &mut v, low, high)?;
                    Ok(Values::I64(v))
                }),
                Dtype::F32 => repeat_calls(repeat, || {
                    let mut v = vec![0f32; n];
                    t::random_(g, &mut v, low, high)?;
                    Ok(Values::F32(v))
                }),
                Dtype::F64 => repeat_calls(repeat, || {
                    let mut v = vec![0f64; n];
                    t::random_(g, &mut v, low, high)?;
                    Ok(Values::F64(v))
                }),
            }
        }
        "randperm" => {
            let count: i64 = opts.require("n")?;
            let count = usize::try_from(count).map_err(|_| {
                SampleError(format!("randperm: n must be non-negative, got {count}"))
            })?;
            check_total(count, repeat)?;
            let d = dtype(opts, Dtype::I64)?;
            if d == Dtype::F32 && count > 1 << 24 {
                return fail(format!(
                    "randperm: n = {count} is not exactly representable in float32"
                ));
            }
            repeat_calls(repeat, || {
                let p = t::randperm(g, count);
                Ok(match d {
                    Dtype::I64 => Values::I64(p),
                    Dtype::F32 => Values::F32(p.into_iter().map(|x| x as f32).collect()),
                    Dtype::F64 => Values::F64(p.into_iter().map(|x| x as f64).collect()),
                })
            })
        }
        "multinomial" => {
            let weights: Vec<f64> = opts
                .list("weights")?
                .ok_or_else(|| SampleError("option --weights=w1,w2,.. is required".into()))?;
            let k: usize = opts.get_or("num-samples", 1)?;
            let replacement = opts.flag("replacement", false)?;
            let (rows, cols) = match opts.list::<usize>("shape")? {
                None => (1, weights.len()),
                Some(s) if s.len() == 1 => (1, s[0]),
                Some(s) if s.len() == 2 => (s[0], s[1]),
                Some(s) => {
                    return fail(format!(
                        "multinomial: --shape must have 1 or 2 dims, got {s:?}"
                    ));
                }
            };
            check_total(rows.saturating_mul(k.max(cols)), repeat)?;
            let d = float_dtype(opts)?;
            repeat_calls(repeat, || {
                let r = match d {
                    Dtype::F32 => {
                        let w: Vec<f32> = weights.iter().map(|&x| x as f32).collect();
                        t::multinomial(g, &w, rows, cols, k, replacement)?
                    }
                    _ => t::multinomial(g, &weights, rows, cols, k, replacement)?,
                };
                Ok(Values::I64(r))
            })
        }
        "kaiming_uniform" | "kaiming_normal" => {
            let a: f64 = opts.get_or("a", 0.0)?;
            let mode: init::FanMode = opts.get_or("mode", init::FanMode::FanIn)?;
            let nl: String = opts.get_or("nonlinearity", "leaky_relu".to_string())?;
            let uniform = func == "kaiming_uniform";
            run_float(
                g,
                opts,
                repeat,
                n,
                KaimingFn {
                    shape: shape.clone(),
                    a,
                    mode,
                    nl,
                    uniform,
                },
            )
        }
        "xavier_uniform" | "xavier_normal" => {
            let gain: f64 = opts.get_or("gain", 1.0)?;
            let uniform = func == "xavier_uniform";
            run_float(
                g,
                opts,
                repeat,
                n,
                XavierFn {
                    shape: shape.clone(),
                    gain,
                    uniform,
                },
            )
        }
        "trunc_normal" => {
            let mean: f64 = opts.get_or("mean", 0.0)?;
            let std: f64 = opts.get_or("std", 1.0)?;
            let a: f64 = opts.get_or("a", -2.0)?;
            let b: f64 = opts.get_or("b", 2.0)?;
            run_float(g, opts, repeat, n, TruncNormalFn([mean, std, a, b]))
        }
        "linear" => {
            let i: usize = opts.require("in-features")?;
            let o: usize = opts.require("out-features")?;
            let bias = opts.flag("bias", true)?;
            let size = numel(&[i.saturating_add(1), o])?;
            let size = if bias { size } else { size - o };
            check_total(size, repeat)?;
            run_float(g, opts, repeat, size, LinearFn(i, o, bias))
        }
        "dataloader" => {
            let count: usize = opts.require("n")?;
            let _batch: usize = opts.get_or("batch-size", 1)?;
            let epochs: usize = opts.get_or("epochs", 1)?;
            let shuffle = opts.flag("shuffle", true)?;
            check_loader(count, _batch)?;
            check_total(count.saturating_mul(epochs), repeat)?;
            repeat_calls(repeat, || {
                let mut out = Vec::with_capacity(count * epochs);
                for _ in 0..epochs {
                    // Each iter(loader) draws base_seed first, then RandomSampler its own seed.
                    let _base_seed = t::random_i64(g);
                    if shuffle {
                        let seed = t::random_i64(g) as u64;
                        out.extend(t::randperm(&mut Generator::with_seed(seed), count));
                    } else {
                        out.extend(0..count as i64);
                    }
                }
                Ok(Values::I64(out))
            })
        }
        "worker-seeds" => {
            let workers: usize = opts.require("workers")?;
            let epochs: usize = opts.get_or("epochs", 1)?;
            let count: usize = opts.get_or("n", 16)?;
            let batch: usize = opts.get_or("batch-size", 1)?;
            let shuffle = opts.flag("shuffle", true)?;
            check_loader(count, batch)?;
            if workers == 0 {
                return fail("worker-seeds: --workers must be at least 1");
            }
            check_total(workers.saturating_mul(epochs), repeat)?;
            repeat_calls(repeat, || {
                let mut out = Vec::with_capacity(workers * epochs);
                for _ in 0..epochs {
                    let base = t::random_i64(g) as u64;
                    if shuffle {
                        t::random_i64(g);
                    }
                    out.extend((0..workers as u64).map(|w| base + w));
                }
                Ok(Values::U64(out))
            })
        }
        "rand_like" => run_float(g, opts, repeat, n, RandFn),
        "randn_like" => run_float(g, opts, repeat, n, NormalFn(0.0, 1.0)),
        "log_normal" => {
            let (mean, std) = (opts.get_or("mean", 1.0)?, opts.get_or("std", 2.0)?);
            run_float(g, opts, repeat, n, LogNormalFn(mean, std))
        }
        "cauchy" => {
            let (median, sigma) = (opts.get_or("median", 0.0)?, opts.get_or("sigma", 1.0)?);
            run_float(g, opts, repeat, n, CauchyFn(median, sigma))
        }
        "geometric" => {
            let p: f64 = opts.require("p")?;
            match dtype(opts, Dtype::F32)? {
                Dtype::I64 => repeat_calls(repeat, || {
                    let mut v = vec![0i64; n];
                    t::geometric_(g, &mut v, p)?;
                    Ok(Values::I64(v))
                }),
                Dtype::F32 => repeat_calls(repeat, || {
                    let mut v = vec![0f32; n];
                    t::geometric_(g, &mut v, p)?;
                    Ok(Values::F32(v))
                }),
                Dtype::F64 => repeat_calls(repeat, || {
                    let mut v = vec![0f64; n];
                    t::geometric_(g, &mut v, p)?;
                    Ok(Values::F64(v))
                }),
            }
        }
        "random" if opts.raw("from").is_some() => {
            let from: i64 = opts.require("from")?;
            let then: usize = opts.get_or("then", 0)?;
            check_total(n.saturating_add(then), repeat)?;
            fn draw<T: t::RandomFrom + Default>(
                g: &mut Generator,
                from: i64,
                sizes: [usize; 2],
            ) -> Result<Vec<T>, SampleError> {
                let mut all = Vec::new();
                for k in sizes {
                    let mut v = vec![T::default(); k];
                    t::random_from_(g, &mut v, from)?;
                    all.extend(v);
                }
                Ok(all)
            }
            fn ints<T: t::RandomFrom + Default + Into<i64>>(
                g: &mut Generator,
                from: i64,
                sizes: [usize; 2],
            ) -> Result<Values, SampleError> {
                Ok(Values::I64(
                    draw::<T>(g, from, sizes)?
                        .into_iter()
                        .map(Into::into)
                        .collect(),
                ))
            }
            let sizes = [n, then];
            let d = opts.raw("dtype").unwrap_or("int64").to_string();
            repeat_calls(repeat, || {
                Ok(match d.as_str() {
                    "int64" => ints::<i64>(g, from, sizes)?,
                    "int32" => ints::<i32>(g, from, sizes)?,
                    "int16" => ints::<i16>(g, from, sizes)?,
                    "int8" => ints::<i8>(g, from, sizes)?,
                    "uint8" => ints::<u8>(g, from, sizes)?,
                    "bool" => ints::<bool>(g, from, sizes)?,
                    "float32" => Values::F32(draw(g, from, sizes)?),
                    "float64" => Values::F64(draw(g, from, sizes)?),
                    other => {
                        return fail(format!(
                            "option --dtype={other}: expected int64, int32, int16, int8, uint8, \
                             bool, float32 or float64"
                        ));
                    }
                })
            })
        }
        "random" => {
            fn ints<T: t::RandomDefault + Default + Into<i64>>(
                g: &mut Generator,
                n: usize,
            ) -> Values {
                let mut v = vec![T::default(); n];
                t::random_default_(g, &mut v);
                Values::I64(v.into_iter().map(Into::into).collect())
            }
            let d = opts.raw("dtype").unwrap_or("int64").to_string();
            repeat_calls(repeat, || {
                Ok(match d.as_str() {
                    "int64" => ints::<i64>(g, n),
                    "int32" => ints::<i32>(g, n),
                    "int16" => ints::<i16>(g, n),
                    "int8" => ints::<i8>(g, n),
                    "uint8" => ints::<u8>(g, n),
                    "bool" => {
                        let mut v = vec![false; n];
                        t::random_default_(g, &mut v);
                        Values::I64(v.into_iter().map(i64::from).collect())
                    }
                    "float32" => {
                        let mut v = vec![0f32; n];
                        t::random_default_(g, &mut v);
                        Values::F32(v)
                    }
                    "float64" => {
                        let mut v = vec![0f64; n];
                        t::random_default_(g, &mut v);
                        Values::F64(v)
                    }
                    other => {
                        return fail(format!(
                            "option --dtype={other}: expected int64, int32, int16, int8, uint8, \
                             bool, float32 or float64"
                        ));
                    }
                })
            })
        }
        "normal_tensor" => {
            let means: Option<Vec<f64>> = opts.list("means")?;
            let stds: Option<Vec<f64>> = opts.list("stds")?;
            let (mean, std): (f64, f64) = (opts.get_or("mean", 0.0)?, opts.get_or("std", 1.0)?);
            if means.is_none() && stds.is_none() {
                return fail("normal_tensor: give --means or --stds (or both)");
            }
            let len = means
                .as_ref()
                .map_or(1, Vec::len)
                .max(stds.as_ref().map_or(1, Vec::len));
            check_total(len, repeat)?;
            fn one<T: Float>(
                g: &mut Generator,
                means: &Option<Vec<f64>>,
                stds: &Option<Vec<f64>>,
                mean: f64,
                std: f64,
            ) -> Result<Vec<T>, SampleError> {
                let conv = |v: &Vec<f64>| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
                let (m, s) = (means.as_ref().map(conv), stds.as_ref().map(conv));
                let m = m.as_deref().ok_or(mean);
                let s = s.as_deref().ok_or(std);
                Ok(t::normal_tensor(g, m, s)?)
            }
            match float_dtype(opts)? {
                Dtype::F32 => repeat_calls(repeat, || {
                    Ok(Values::F32(one::<f32>(g, &means, &stds, mean, std)?))
                }),
                _ => repeat_calls(repeat, || {
                    Ok(Values::F64(one::<f64>(g, &means, &stds, mean, std)?))
                }),
            }
        }
        "dirichlet" | "beta" | "student_t" => {
            let list = |k: &str| -> Result<Vec<f64>, SampleError> {
                opts.list(k)?
                    .ok_or_else(|| SampleError(format!("option --{k} is required here")))
            };
            let (a, b) = match func {
                "dirichlet" => (list("concentration")?, Vec::new()),
                "beta" => (list("concentration1")?, list("concentration0")?),
                _ => (list("df")?, Vec::new()),
            };
            let rows: usize = if func == "dirichlet" {
                opts.get_or("n", 1)?
            } else {
                1
            };
            let (loc, scale): (f64, f64) = if func == "student_t" {
                (opts.get_or("loc", 0.0)?, opts.get_or("scale", 1.0)?)
            } else {
                (0.0, 1.0)
            };
            check_total(a.len().saturating_mul(rows), repeat)?;
            fn one<T: Float>(
                g: &mut Generator,
                func: &str,
                a: &[f64],
                b: &[f64],
                rows: usize,
                loc: f64,
                scale: f64,
            ) -> Result<Vec<T>, SampleError> {
                let conv = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
                Ok(match func {
                    "dirichlet" => {
                        let row = conv(a);
                        let all: Vec<T> = (0..rows).flat_map(|_| row.iter().copied()).collect();
                        t::dirichlet_sample(g, &all, row.len())?
                    }
                    "beta" => t::beta_sample(g, &conv(a), &conv(b))?,
                    _ => t::student_t_sample(g, &conv(a), T::from_f64(loc), T::from_f64(scale))?,
                })
            }
            match float_dtype(opts)? {
                Dtype::F32 => repeat_calls(repeat, || {
                    Ok(Values::F32(one::<f32>(g, func, &a, &b, rows, loc, scale)?))
                }),
                _ => repeat_calls(repeat, || {
                    Ok(Values::F64(one::<f64>(g, func, &a, &b, rows, loc, scale)?))
                }),
            }
        }
        "poisson" | "standard_gamma" | "gamma" | "chi2" => {
            let key = match func {
                "poisson" => "rates",
                "standard_gamma" => "alpha",
                "gamma" => "concentration",
                _ => "df",
            };
            let xs: Vec<f64> = opts
                .list(key)?
                .ok_or_else(|| SampleError(format!("option --{key} is required here")))?;
            check_total(xs.len(), repeat)?;
            let rate: f64 = if func == "gamma" {
                opts.get_or("rate", 1.0)?
            } else {
                1.0
            };
            fn one<T: Float>(
                g: &mut Generator,
                func: &str,
                xs: &[f64],
                rate: f64,
            ) -> Result<Vec<T>, SampleError> {
                let xs: Vec<T> = xs.iter().map(|&x| T::from_f64(x)).collect();
                Ok(match func {
                    "poisson" => t::poisson(g, &xs)?,
                    "standard_gamma" => t::standard_gamma(g, &xs)?,
                    "gamma" => t::gamma_sample(g, &xs, T::from_f64(rate))?,
                    _ => {
                        // Chi2(df) = Gamma(0.5 * df, 0.5), `0.5 * df` in the dtype.
                        let half = T::from_f64(0.5);
                        let conc: Vec<T> = xs.iter().map(|&d| half.mul(d)).collect();
                        t::gamma_sample(g, &conc, half)?
                    }
                })
            }
            match float_dtype(opts)? {
                Dtype::F32 => {
                    repeat_calls(repeat, || Ok(Values::F32(one::<f32>(g, func, &xs, rate)?)))
                }
                _ => repeat_calls(repeat, || Ok(Values::F64(one::<f64>(g, func, &xs, rate)?))),
            }
        }
        _ => unknown_function(&LIB, func),
    }
}

fn check_loader(n: usize, batch: usize) -> Result<(), SampleError> {
    if n == 0 {
        return fail("num_samples should be a positive integer value, but got num_samples=0");
    }
    if batch == 0 {
        return fail("batch_size should be a positive integer value, but got batch_size=0");
    }
    Ok(())
}

fn alias(opts: &Opts, name: &str, other: &str, default: f64) -> Result<f64, SampleError> {
    match (opts.get::<f64>(name)?, opts.get::<f64>(other)?) {
        (Some(_), Some(_)) => fail(format!("give only one of --{name} and --{other}")),
        (Some(v), None) | (None, Some(v)) => Ok(v),
        (None, None) => Ok(default),
    }
}

struct RandFn;
impl FloatFn for RandFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        t::rand(g, out);
        Ok(())
    }
}

struct NormalFn(f64, f64);
impl FloatFn for NormalFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        Ok(t::normal_(g, out, self.0, self.1)?)
    }
}

struct UniformFn(f64, f64);
impl FloatFn for UniformFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        Ok(t::uniform_(g, out, self.0, self.1)?)
    }
}

struct LogNormalFn(f64, f64);
impl FloatFn for LogNormalFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        Ok(t::log_normal_(g, out, self.0, self.1)?)
    }
}

struct CauchyFn(f64, f64);
impl FloatFn for CauchyFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        Ok(t::cauchy_(g, out, self.0, self.1)?)
    }
}

struct ExponentialFn(f64);
impl FloatFn for ExponentialFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        Ok(t::exponential_(g, out, self.0)?)
    }
}

struct BernoulliFn(Vec<f64>, bool);
impl FloatFn for BernoulliFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        if self.1 {
            let probs: Vec<T> = self.0.iter().map(|&p| T::from_f64(p)).collect();
            *out = t::bernoulli_tensor(g, &probs)?;
            Ok(())
        } else {
            match self.0.as_slice() {
                [p] => Ok(t::bernoulli_(g, out, *p)?),
                _ => fail("bernoulli: --p must be one number, or a list of two or more"),
            }
        }
    }
}

struct DropoutFn(f64);
impl FloatFn for DropoutFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        let ones = vec![T::ONE; out.len()];
        *out = t::dropout(g, &ones, self.0, true)?;
        Ok(())
    }
}

struct KaimingFn {
    shape: Vec<usize>,
    a: f64,
    mode: init::FanMode,
    nl: String,
    uniform: bool,
}
impl FloatFn for KaimingFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        let f = if self.uniform {
            init::kaiming_uniform_::<T>
        } else {
            init::kaiming_normal_::<T>
        };
        Ok(f(g, out, &self.shape, self.a, self.mode, &self.nl)?)
    }
}

struct XavierFn {
    shape: Vec<usize>,
    gain: f64,
    uniform: bool,
}
impl FloatFn for XavierFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        let f = if self.uniform {
            init::xavier_uniform_::<T>
        } else {
            init::xavier_normal_::<T>
        };
        Ok(f(g, out, &self.shape, self.gain)?)
    }
}

struct TruncNormalFn([f64; 4]);
impl FloatFn for TruncNormalFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        let [mean, std, a, b] = self.0;
        Ok(init::trunc_normal_(g, out, mean, std, a, b)?)
    }
}

struct LinearFn(usize, usize, bool);
impl FloatFn for LinearFn {
    fn call<T: Float>(&self, g: &mut Generator, out: &mut Vec<T>) -> Result<(), SampleError> {
        let (w, b) = init::linear::<T>(g, self.0, self.1, self.2)?;
        out.clear();
        out.extend(w);
        out.extend(b.into_iter().flatten());
        Ok(())
    }
}
