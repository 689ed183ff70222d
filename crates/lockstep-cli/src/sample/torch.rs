//! `lockstep sample torch FN`: PyTorch's CPU samplers after `torch.manual_seed(S)`.
//!
//! | FN | the PyTorch call it mirrors | options (default) |
//! |---|---|---|
//! | `rand` | `torch.rand(shape, dtype)` | |
//! | `randn` | `torch.randn(shape, dtype)` | |
//! | `normal` | `torch.empty(shape, dtype).normal_(mean, std)` | `--mean` (0) `--std` (1) |
//! | `uniform` | `torch.empty(shape, dtype).uniform_(low, high)` | `--low`/`--a` (0) `--high`/`--b` (1) |
//! | `exponential` | `torch.empty(shape, dtype).exponential_(lambd)` | `--lambd` (1) |
//! | `bernoulli` | `torch.empty(shape, dtype).bernoulli_(p)`; with a list `--p=p1,p2,..`: `torch.bernoulli(torch.tensor([p1,p2,..], dtype))` | `--p` (0.5) |
//! | `dropout` | `F.dropout(torch.ones(shape, dtype), p, training=True)` | `--p` (0.5) |
//! | `randint` | `torch.randint(low, high, shape, dtype)` (dtype default int64) | `--low` (0) `--high` (required) |
//! | `randperm` | `torch.randperm(n, dtype)` (dtype default int64) | `--n` (required) |
//! | `multinomial` | `torch.multinomial(torch.tensor(weights, dtype).reshape(shape), num_samples, replacement)` | `--weights` (required) `--num-samples` (1) `--replacement` (false); `--shape=R,C` for rows |
//! | `kaiming_uniform`, `kaiming_normal` | `nn.init.kaiming_*_(torch.empty(shape, dtype), a, mode, nonlinearity)` | `--a` (0) `--mode` (fan_in) `--nonlinearity` (leaky_relu) |
//! | `xavier_uniform`, `xavier_normal` | `nn.init.xavier_*_(torch.empty(shape, dtype), gain)` | `--gain` (1) |
//! | `trunc_normal` | `nn.init.trunc_normal_(torch.empty(shape, dtype), mean, std, a, b)` | `--mean` (0) `--std` (1) `--a` (-2) `--b` (2) |
//! | `linear` | `nn.Linear(in, out, bias, dtype)`: weight (flat), then bias | `--in-features` `--out-features` (required) `--bias` (true) |
//! | `dataloader` | the indices of `DataLoader(range(n), batch_size, shuffle)` over `epochs` epochs | `--n` (required) `--batch-size` (1) `--epochs` (1) `--shuffle` (true) |
//! | `worker-seeds` | `get_worker_info().seed` of each of `workers` workers, per epoch, same loader | `--workers` (required) `--epochs` (1) `--n` (16) `--batch-size` (1) `--shuffle` (true) |
//!
//! Common options: `--seed` (0; any integer in `[-2^63, 2^64)`), `--shape` (`1`), `--dtype`
//! (`float32`, or `int64` for `randint`/`randperm`), `--repeat` (1).

use super::{MAX_VALUES, Opts, SampleError, Values, fail, repeat_calls};
use lockstep_rng::Generator;
use lockstep_rng::compat::torch::{self as t, Float, init};

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
        "randint" => {
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
        _ => fail(format!(
            "unknown torch function `{func}`; expected one of: rand randn normal uniform \
             exponential bernoulli dropout randint randperm multinomial kaiming_uniform \
             kaiming_normal xavier_uniform xavier_normal trunc_normal linear dataloader worker-seeds"
        )),
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
