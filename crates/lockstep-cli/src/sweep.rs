//! `lockstep sweep`: one training configuration over several seeds, with the spread reported.
//!
//! Each seed runs as its own child process of the current executable, `lockstep train ARGS
//! --seed S --json`, so every run is exactly what `lockstep train --seed S` prints (and its
//! process-wide generators are its own). `--jobs` runs go at a time, each with
//! `--threads max(1, cores / jobs)` unless ARGS sets the threads.
//!
//! For the final test accuracy, the final loss and the best test accuracy the summary gives the
//! mean, the sample standard deviation (n − 1), min, max, a 95 % Student t interval
//! (mean ± t₀.₉₇₅,ₙ₋₁ · s / √n) and a 95 % percentile bootstrap interval of the mean
//! ([`BOOTSTRAP_RESAMPLES`] resamples whose indices come from
//! `lockstep_rng::Generator::with_seed(`[`BOOTSTRAP_SEED`]`)`, so the report is reproducible).
//!
//! Output: a per-seed table and the summary on stdout; `report.json`, `report.csv`,
//! `loss_curves.{svg,png}` and `final_accuracy.{svg,png}` in the output directory.

use lockstep_rng::Generator;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Bootstrap resamples per metric.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// Seed of the generator that draws the bootstrap indices (a fresh one per metric).
pub const BOOTSTRAP_SEED: u64 = 0;
/// The most seeds one sweep runs.
pub const MAX_SEEDS: usize = 100_000;
/// The most runs at a time.
pub const MAX_JOBS: usize = 256;

/// What `lockstep sweep` was asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// The seeds, in report order.
    pub seeds: Vec<u64>,
    /// Runs at a time.
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// The `lockstep train` flags after `train` (without `--seed` and `--json`).
    pub train_args: Vec<String>,
    /// The executable run as `EXE train ARGS --seed S --json` (normally the current one).
    pub exe: PathBuf,
}

impl SweepConfig {
    /// Checks the flags: `seeds` (`--seeds N`: 0..N) or `seed_list`, `jobs` ≥ 1, and `command`
    /// = `train ARGS…` where ARGS does not set `--seed` (the sweep does) — a `--json` there is
    /// dropped (the sweep adds its own).
    ///
    /// # Errors
    /// A message for the user.
    pub fn new(
        seeds: Option<usize>,
        seed_list: Option<Vec<u64>>,
        jobs: usize,
        out: PathBuf,
        command: &[String],
    ) -> Result<Self, BoxError> {
        let seeds = match (seeds, seed_list) {
            (Some(_), Some(_)) => return Err("give either --seeds or --seed-list, not both".into()),
            (None, None) => return Err("give --seeds N or --seed-list S1,S2,…".into()),
            (Some(n), None) => {
                if n == 0 || n > MAX_SEEDS {
                    return Err(format!("--seeds must be between 1 and {MAX_SEEDS}").into());
                }
                (0..n as u64).collect()
            }
            (None, Some(list)) => {
                if list.is_empty() || list.len() > MAX_SEEDS {
                    return Err(
                        format!("--seed-list must have between 1 and {MAX_SEEDS} seeds").into(),
                    );
                }
                let mut sorted = list.clone();
                sorted.sort_unstable();
                if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!("--seed-list names seed {} twice", w[0]).into());
                }
                list
            }
        };
        if jobs == 0 || jobs > MAX_JOBS {
            return Err(format!("--jobs must be between 1 and {MAX_JOBS}").into());
        }
        let Some((first, rest)) = command.split_first() else {
            return Err("missing the training command: lockstep sweep … -- train ARGS…".into());
        };
        if first != "train" {
            return Err(format!(
                "the command after -- must be `train ARGS…` (got `{first}`): only lockstep train \
                 can be swept"
            )
            .into());
        }
        if rest.iter().any(|a| is_flag(a, "--seed")) {
            return Err(
                "ARGS must not set --seed: the sweep gives each run its seed (--seeds or \
                 --seed-list)"
                    .into(),
            );
        }
        let train_args = rest.iter().filter(|a| *a != "--json").cloned().collect();
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the lockstep executable to run: {e}"))?;
        Ok(Self {
            seeds,
            jobs,
            out,
            train_args,
            exe,
        })
    }

    /// The kernel threads each run gets when ARGS does not set them: max(1, cores / jobs).
    pub fn threads_per_run(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / self.jobs.min(self.seeds.len()).max(1)).max(1)
    }

    /// The arguments of seed `seed`'s child process (after the executable).
    pub fn child_args(&self, seed: u64) -> Vec<String> {
        let mut args = vec!["train".to_string()];
        args.extend(self.train_args.iter().cloned());
        if !self.train_args.iter().any(|a| is_flag(a, "--threads")) {
            args.push("--threads".into());
            args.push(self.threads_per_run().to_string());
        }
        args.extend(["--seed".into(), seed.to_string(), "--json".into()]);
        args
    }
}

/// `arg` is `flag` or `flag=…`.
fn is_flag(arg: &str, flag: &str) -> bool {
    arg == flag || arg.strip_prefix(flag).is_some_and(|r| r.starts_with('='))
}

/// One seed's run: its train report and the numbers the sweep uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The seed.
    pub seed: u64,
    /// The JSON report `lockstep train --json` printed, as printed.
    pub report: Value,
    /// Its `step_losses`.
    pub step_losses: Vec<f64>,
    /// Its `test_accuracy` (one per epoch).
    pub test_accuracy: Vec<f64>,
}

impl Run {
    /// Reads `lockstep train --json`'s output.
    ///
    /// # Errors
    /// Not JSON, another seed, or no losses or accuracies.
    pub fn parse(seed: u64, stdout: &str) -> Result<Self, BoxError> {
        let report: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            format!(
                "seed {seed}: the train report is not JSON ({e}): {}",
                stdout.trim()
            )
        })?;
        let numbers = |key: &str| -> Result<Vec<f64>, BoxError> {
            let arr = report
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| format!("seed {seed}: the train report has no array {key}"))?;
            let v = arr
                .iter()
                .map(|x| match x {
                    Value::Null => Some(f64::NAN),
                    x => x.as_f64(),
                })
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| format!("seed {seed}: {key} holds a value that is not a number"))?;
            if v.is_empty() {
                return Err(format!("seed {seed}: the run reported no {key}").into());
            }
            Ok(v)
        };
        let step_losses = numbers("step_losses")?;
        let test_accuracy = numbers("test_accuracy")?;
        if report.get("seed").and_then(Value::as_u64) != Some(seed) {
            return Err(format!("seed {seed}: the train report is for another seed").into());
        }
        Ok(Self {
            seed,
            report,
            step_losses,
            test_accuracy,
        })
    }

    /// The last epoch's test accuracy.
    pub fn final_test_accuracy(&self) -> f64 {
        *self.test_accuracy.last().unwrap_or(&f64::NAN)
    }
    /// The last step's loss.
    pub fn final_loss(&self) -> f64 {
        *self.step_losses.last().unwrap_or(&f64::NAN)
    }
    /// The best epoch's test accuracy.
    pub fn best_test_accuracy(&self) -> f64 {
        self.test_accuracy
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
    fn steps(&self) -> u64 {
        self.report
            .get("steps")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
    fn sha(&self, key: &str) -> &str {
        self.report.get(key).and_then(Value::as_str).unwrap_or("")
    }
}

/// Runs every seed (`cfg.jobs` at a time), calling `done(seed)` as each finishes.
///
/// # Errors
/// The first failed seed (in seed order) with its stderr; no new run starts after a failure.
pub fn run_seeds(cfg: &SweepConfig, done: &(dyn Fn(u64) + Sync)) -> Result<Vec<Run>, BoxError> {
    let n = cfg.seeds.len();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<Run, String>>>> = Mutex::new(vec![None; n]);
    std::thread::scope(|s| {
        for _ in 0..cfg.jobs.min(n) {
            s.spawn(|| {
                loop {
                    if failed.load(Ordering::SeqCst) {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    let seed = cfg.seeds[i];
                    let r = run_one(cfg, seed);
                    if r.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    done(seed);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut runs = Vec::with_capacity(n);
    for r in results {
        match r {
            Some(Ok(run)) => runs.push(run),
            Some(Err(e)) => return Err(e.into()),
            None => {}
        }
    }
    if runs.len() != n {
        return Err("some runs did not finish".into());
    }
    Ok(runs)
}

fn run_one(cfg: &SweepConfig, seed: u64) -> Result<Run, String> {
    let args = cfg.child_args(seed);
    let out = Command::new(&cfg.exe)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("seed {seed}: cannot run {}: {e}", cfg.exe.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "seed {seed}: `lockstep {}` failed ({}):\n{}",
            args.join(" "),
            out.status,
            stderr.trim_end()
        ));
    }
    Run::parse(seed, &String::from_utf8_lossy(&out.stdout)).map_err(|e| e.to_string())
}

/// Mean, spread and intervals of one metric over the seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divides by n − 1; NaN for one seed).
    pub std: f64,
    /// Smallest value (NaN if any value is NaN).
    pub min: f64,
    /// Largest value (NaN if any value is NaN).
    pub max: f64,
    /// mean ∓ t₀.₉₇₅,ₙ₋₁ · std / √n (NaN for one seed).
    pub t95: [f64; 2],
    /// The 2.5 % and 97.5 % percentiles of the bootstrap means (NaN if any value is NaN).
    pub bootstrap95: [f64; 2],
    /// How many values were NaN (runs that diverged): every statistic above is then NaN, as
    /// NumPy's `mean`, `min` and `max` of such values are.
    pub nan: usize,
}

impl Stats {
    /// Summarizes `xs` (at least one value).
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len();
        let nan = xs.iter().filter(|x| x.is_nan()).count();
        // f64::min and f64::max skip a NaN: an all-NaN fold would give inf and -inf.
        let extreme = |f: fn(f64, f64) -> f64, start: f64| {
            if nan > 0 {
                f64::NAN
            } else {
                xs.iter().copied().fold(start, f)
            }
        };
        let nf = n as f64;
        let mean = xs.iter().sum::<f64>() / nf;
        let std = if n >= 2 {
            (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (nf - 1.0)).sqrt()
        } else {
            f64::NAN
        };
        let t95 = if n >= 2 {
            let h = t_quantile(0.975, nf - 1.0) * std / nf.sqrt();
            [mean - h, mean + h]
        } else {
            [f64::NAN; 2]
        };
        Self {
            mean,
            std,
            min: extreme(f64::min, f64::INFINITY),
            max: extreme(f64::max, f64::NEG_INFINITY),
            t95,
            bootstrap95: if nan > 0 {
                [f64::NAN; 2]
            } else {
                bootstrap95(xs, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED)
            },
            nan,
        }
    }

    /// `{"mean", "std", "min", "max", "t95": [lo, hi], "bootstrap95": [lo, hi], "nan_runs"}`
    /// (non-finite values as null; `nan_runs`: how many values were NaN).
    pub fn to_json(&self) -> Value {
        json!({
            "mean": num(self.mean),
            "std": num(self.std),
            "min": num(self.min),
            "max": num(self.max),
            "t95": [num(self.t95[0]), num(self.t95[1])],
            "bootstrap95": [num(self.bootstrap95[0]), num(self.bootstrap95[1])],
            "nan_runs": self.nan,
        })
    }
}

fn num(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

/// A uniform index below `n` from `g` (rejection sampling on 64-bit draws: unbiased).
pub fn uniform_index(g: &mut Generator, n: usize) -> usize {
    let n = n as u64;
    // 2^64 mod n values at the top of the range are rejected.
    let rem = (u64::MAX % n + 1) % n;
    loop {
        let x = g.next_u64();
        if rem == 0 || x < 0u64.wrapping_sub(rem) {
            return (x % n) as usize;
        }
    }
}

/// The percentile bootstrap 95 % interval of the mean: `b` resamples of `xs` with replacement,
/// indices drawn in order with [`uniform_index`] from `Generator::with_seed(seed)`; each
/// resample's mean sums in draw order; the means sorted; the 2.5 % and 97.5 % percentiles with
/// linear interpolation between order statistics (NumPy's default: position q·(b − 1)).
pub fn bootstrap95(xs: &[f64], b: usize, seed: u64) -> [f64; 2] {
    let n = xs.len();
    if n == 0 || b == 0 {
        return [f64::NAN; 2];
    }
    let mut g = Generator::with_seed(seed);
    let mut means: Vec<f64> = (0..b)
        .map(|_| (0..n).map(|_| xs[uniform_index(&mut g, n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    [percentile(&means, 0.025), percentile(&means, 0.975)]
}

/// The `q` quantile of sorted values, interpolating linearly at position q·(len − 1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let h = q * (sorted.len() - 1) as f64;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error about 1e-15).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..100_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_cf(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_cf(b, a, 1.0 - x) / b
    }
}

/// P(T > t) for t ≥ 0, T Student t with `df` degrees of freedom.
fn t_upper_tail(t: f64, df: f64) -> f64 {
    0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The `p` quantile of Student's t distribution with `df` > 0 degrees of freedom: closed forms
/// for 1 and 2, otherwise bisection on the upper tail 1 − p = ½ I_{df/(df+t²)}(df/2, ½) to
/// full double precision.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    if p == 0.5 {
        return 0.0;
    }
    if df == 1.0 {
        return (std::f64::consts::PI * (p - 0.5)).tan();
    }
    if df == 2.0 {
        return (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
    }
    let tail = 1.0 - p;
    let mut hi = 1.0;
    while t_upper_tail(hi, df) > tail {
        hi *= 2.0;
        if hi > 1e300 {
            return f64::INFINITY;
        }
    }
    let mut lo = 0.0;
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if t_upper_tail(mid, df) > tail {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The sweep's result.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepReport {
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// Each seed's run.
    pub runs: Vec<Run>,
    /// Last test accuracy of each run.
    pub final_test_accuracy: Stats,
    /// Last step loss of each run.
    pub final_loss: Stats,
    /// Best test accuracy of each run.
    pub best_test_accuracy: Stats,
}

impl SweepReport {
    /// Summarizes the runs (at least one).
    pub fn new(runs: Vec<Run>) -> Self {
        let metric = |f: fn(&Run) -> f64| Stats::of(&runs.iter().map(f).collect::<Vec<_>>());
        Self {
            seeds: runs.iter().map(|r| r.seed).collect(),
            final_test_accuracy: metric(Run::final_test_accuracy),
            final_loss: metric(Run::final_loss),
            best_test_accuracy: metric(Run::best_test_accuracy),
            runs,
        }
    }

    /// `report.json`'s content.
    pub fn to_json(&self) -> Value {
        json!({
            "seeds": self.seeds,
            "runs": self.runs.iter().map(|r| r.report.clone()).collect::<Vec<_>>(),
            "summary": {
                "final_test_accuracy": self.final_test_accuracy.to_json(),
                "final_loss": self.final_loss.to_json(),
                "best_test_accuracy": self.best_test_accuracy.to_json(),
            },
            "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "generator_seed": BOOTSTRAP_SEED},
        })
    }

    /// `report.csv`: a header and one row per seed.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "seed,steps,final_loss,final_test_accuracy,best_test_accuracy,init_sha256,final_sha256\n",
        );
        for r in &self.runs {
            s += &format!(
                "{},{},{},{},{},{},{}\n",
                r.seed,
                r.steps(),
                r.final_loss(),
                r.final_test_accuracy(),
                r.best_test_accuracy(),
                r.sha("init_sha256"),
                r.sha("final_sha256"),
            );
        }
        s
    }

    /// The per-seed table and the summary, as printed.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{:>10}  {:>7}  {:>12}  {:>10}  {:>10}  {}\n",
            "seed", "steps", "final loss", "final acc", "best acc", "final_sha256"
        );
        for r in &self.runs {
            s += &format!(
                "{:>10}  {:>7}  {:>12.6}  {:>9.2}%  {:>9.2}%  {}\n",
                r.seed,
                r.steps(),
                r.final_loss(),
                r.final_test_accuracy() * 100.0,
                r.best_test_accuracy() * 100.0,
                r.sha("final_sha256").get(..16).unwrap_or(""),
            );
        }
        s += &format!(
            "\n{} seeds; 95 % intervals of the mean: Student t and percentile bootstrap ({} \
             resamples, generator seed {})\n",
            self.runs.len(),
            BOOTSTRAP_RESAMPLES,
            BOOTSTRAP_SEED
        );
        s += &format!(
            "{:<20} {:>10} {:>10} {:>10} {:>10}  {:>23}  {:>23}\n",
            "metric", "mean", "std", "min", "max", "t95", "bootstrap95"
        );
        /// A metric's row: name, statistics, scale, and the metric itself.
        type Row<'a> = (&'a str, &'a Stats, f64, fn(&Run) -> f64);
        let rows: [Row; 3] = [
            (
                "final test acc (%)",
                &self.final_test_accuracy,
                100.0,
                Run::final_test_accuracy,
            ),
            ("final loss", &self.final_loss, 1.0, Run::final_loss),
            (
                "best test acc (%)",
                &self.best_test_accuracy,
                100.0,
                Run::best_test_accuracy,
            ),
        ];
        let mut nan_lines = String::new();
        for (name, st, k, metric) in rows {
            if st.nan > 0 {
                let seeds: Vec<String> = self
                    .runs
                    .iter()
                    .filter(|r| metric(r).is_nan())
                    .map(|r| r.seed.to_string())
                    .collect();
                nan_lines += &format!(
                    "{name}: NaN in {} of {} runs (seeds {}), so its statistics are NaN\n",
                    st.nan,
                    self.runs.len(),
                    seeds.join(", ")
                );
            }
            let iv = |v: [f64; 2]| format!("[{:.4}, {:.4}]", v[0] * k, v[1] * k);
            s += &format!(
                "{:<20} {:>10.4} {:>10.4} {:>10.4} {:>10.4}  {:>23}  {:>23}\n",
                name,
                st.mean * k,
                st.std * k,
                st.min * k,
                st.max * k,
                iv(st.t95),
                iv(st.bootstrap95)
            );
        }
        s + &nan_lines
    }

    /// Writes `report.json`, `report.csv` and the plots into `dir` (created if missing);
    /// returns the files written.
    ///
    /// # Errors
    /// The directory or a file cannot be written, or a plot cannot be drawn.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, BoxError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut written = Vec::new();
        let mut put = |name: &str, bytes: &[u8]| -> Result<(), BoxError> {
            let p = dir.join(name);
            lockstep_tensor::io::write_atomic(&p, bytes)
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            written.push(p);
            Ok(())
        };
        let mut json = serde_json::to_string_pretty(&self.to_json())?;
        json.push('\n');
        put("report.json", json.as_bytes())?;
        put("report.csv", self.to_csv().as_bytes())?;
        register_font()?;
        for plot in [Plot::LossCurves, Plot::FinalAccuracy] {
            let svg = dir.join(format!("{}.svg", plot.name()));
            plot.draw(self, SVGBackend::new(&svg, PLOT_SIZE).into_drawing_area())
                .map_err(|e| format!("cannot draw {}: {e}", svg.display()))?;
            written.push(svg);
            let png = dir.join(format!("{}.png", plot.name()));
            plot.draw(
                self,
                BitMapBackend::new(&png, PLOT_SIZE).into_drawing_area(),
            )
            .map_err(|e| format!("cannot draw {}: {e}", png.display()))?;
            written.push(png);
        }
        Ok(written)
    }
}

const PLOT_SIZE: (u32, u32) = (960, 560);

/// The two plots, each drawn once as SVG and once as PNG.
#[derive(Clone, Copy)]
enum Plot {
    LossCurves,
    FinalAccuracy,
}

impl Plot {
    fn name(self) -> &'static str {
        match self {
            Plot::LossCurves => "loss_curves",
            Plot::FinalAccuracy => "final_accuracy",
        }
    }
    fn draw<DB: DrawingBackend>(
        self,
        report: &SweepReport,
        area: DrawingArea<DB, Shift>,
    ) -> Result<(), String> {
        match self {
            Plot::LossCurves => loss_curves(report, area),
            Plot::FinalAccuracy => final_accuracy(report, area),
        }
    }
}

/// DejaVu Sans (embedded from the `dejavu` crate) as plotters' "sans-serif": text in the PNG
/// needs a font file and none is looked up on the system.
fn register_font() -> Result<(), BoxError> {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *OK.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err("cannot load the embedded DejaVu Sans font".into())
    }
}

/// Per step: the mean over the runs that reached it and the sample std (0 with one run).
pub fn mean_curve(runs: &[Run]) -> Vec<(f64, f64)> {
    let len = runs.iter().map(|r| r.step_losses.len()).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let xs: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.step_losses.get(i).copied())
                .collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let std = if xs.len() >= 2 {
                (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            (mean, std)
        })
        .collect()
}

fn finite_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        0.05 * (hi - lo)
    } else {
        0.05 * lo.abs().max(1e-3)
    };
    (lo - pad, hi + pad)
}

fn loss_curves<DB: DrawingBackend>(
    report: &SweepReport,
    root: DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let curve = mean_curve(&report.runs);
    let steps = curve.len().max(2);
    let (lo, hi) = finite_range(
        report
            .runs
            .iter()
            .flat_map(|r| r.step_losses.iter().copied())
            .chain(curve.iter().flat_map(|(m, s)| [m - s, m + s])),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Training loss per step, {} seeds: each seed, mean and mean ± std",
                report.runs.len()
            ),
            ("sans-serif", 22),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(1f64..steps as f64, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss")
        .x_labels(steps.min(12))
        .x_label_formatter(&|x: &f64| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let band: Vec<(f64, f64)> = curve
        .iter()
        .enumerate()
        .map(|(i, (m, s))| (i as f64 + 1.0, m + s))
        .chain(
            curve
                .iter()
                .enumerate()
                .rev()
                .map(|(i, (m, s))| (i as f64 + 1.0, m - s)),
        )
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(band, BLUE.mix(0.18).filled())))
        .map_err(e)?
        .label("mean ± std")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], BLUE.mix(0.18).filled()));
    for (k, r) in report.runs.iter().enumerate() {
        let color = Palette99::pick(k).mix(0.8);
        let s = chart
            .draw_series(LineSeries::new(
                r.step_losses
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (i as f64 + 1.0, *l)),
                color.stroke_width(2),
            ))
            .map_err(e)?;
        if k == 0 {
            s.label("each seed").legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], Palette99::pick(0).stroke_width(2))
            });
        }
    }
    chart
        .draw_series(LineSeries::new(
            curve
                .iter()
                .enumerate()
                .map(|(i, (m, _))| (i as f64 + 1.0, *m)),
            BLACK.stroke_width(3),
        ))
        .map_err(e)?
        .label("mean")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(3)));
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

fn final_accuracy<DB: DrawingBackend>(
    report: &SweepReport,
    root: DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let st = &report.final_test_accuracy;
    let accs: Vec<f64> = report
        .runs
        .iter()
        .map(|r| r.final_test_accuracy() * 100.0)
        .collect();
    let t95 = [st.t95[0] * 100.0, st.t95[1] * 100.0];
    let (lo, hi) = finite_range(accs.iter().copied().chain(t95));
    let n = accs.len();
    let seeds = report.seeds.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Final test accuracy per seed: mean {:.2} %, 95 % t-interval shaded",
                st.mean * 100.0
            ),
            ("sans-serif", 22),
        )
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, lo..hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seed")
        .y_desc("final test accuracy (%)")
        .x_labels(n.min(20) + 1)
        .x_label_formatter(&|x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < seeds.len() {
                seeds[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let x_end = n as f64 - 0.5;
    if t95.iter().all(|v| v.is_finite()) {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(-0.5, t95[0]), (x_end, t95[1])],
                BLUE.mix(0.15).filled(),
            )))
            .map_err(e)?
            .label("95 % t-interval of the mean")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 6), (x + 20, y + 6)], BLUE.mix(0.15).filled())
            });
    }
    chart
        .draw_series(LineSeries::new(
            [(-0.5, st.mean * 100.0), (x_end, st.mean * 100.0)],
            BLACK.stroke_width(2),
        ))
        .map_err(e)?
        .label("mean")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(
            accs.iter()
                .enumerate()
                .map(|(i, a)| Circle::new((i as f64, *a), 6, RED.filled())),
        )
        .map_err(e)?
        .label("seed's final accuracy")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, RED.filled()));
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

/// Runs the sweep with a progress bar over the runs on a terminal, and summarizes it.
///
/// # Errors
/// A failed seed (named, with its stderr).
pub fn run(cfg: &SweepConfig) -> Result<SweepReport, BoxError> {
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(cfg.seeds.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} runs  {elapsed_precise} (eta {eta})  {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_message(format!("{} at a time", cfg.jobs.min(cfg.seeds.len())));
        b.enable_steady_tick(std::time::Duration::from_millis(250));
        b
    });
    let done = |seed: u64| {
        if let Some(b) = &bar {
            b.inc(1);
            b.set_message(format!("seed {seed} done"));
        }
    };
    let runs = run_seeds(cfg, &done);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(SweepReport::new(runs?))
}

/// `lockstep sweep`: runs, prints the table and summary, writes the report; exit code 1 when a
/// run fails or the report cannot be written.
pub fn main(cfg: &SweepConfig) -> ExitCode {
    let report = match run(cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: lockstep sweep: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", report.to_text());
    match report.write(&cfg.out) {
        Ok(files) => {
            println!();
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: lockstep sweep: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_closed_forms_and_tables() {
        // ν = 1 and 2 have closed forms (used directly); check the bisection path against
        // them by going through inc_beta.
        for df in [1.0f64, 2.0] {
            let t = t_quantile(0.975, df);
            assert!((t_upper_tail(t, df) - 0.025).abs() < 1e-15, "df {df}");
        }
        // ν = 4: t = 2·sqrt(q − 1), q = cos(acos(√α)/3)/√α, α = 4p(1 − p).
        let p: f64 = 0.975;
        let a = (4.0 * p * (1.0 - p)).sqrt();
        let q = ((a.acos()) / 3.0).cos() / a;
        let t4 = 2.0 * (q - 1.0).sqrt();
        assert!((t_quantile(0.975, 4.0) - t4).abs() < 1e-12 * t4);
        // Printed tables (t_{0.975, ν}).
        for (df, want) in [
            (1.0, 12.706204736174707),
            (2.0, 4.302652729749464),
            (3.0, 3.182446305284263),
            (5.0, 2.570581835636314),
            (9.0, 2.262157162740991),
            (10.0, 2.228138851964938),
            (29.0, 2.045229642132703),
            (100.0, 1.983971518449634),
            (1000.0, 1.962339080826408),
        ] {
            let got = t_quantile(0.975, df);
            assert!((got - want).abs() < 1e-9 * want, "df {df}: {got} vs {want}");
        }
        // Large ν tends to the normal quantile.
        assert!((t_quantile(0.975, 1e7) - 1.959963984540054).abs() < 1e-6);
        assert_eq!(t_quantile(0.5, 7.0), 0.0);
        assert!((t_quantile(0.025, 7.0) + t_quantile(0.975, 7.0)).abs() < 1e-15);
        // Round trip at other levels and degrees of freedom.
        for df in [3.0, 6.5, 17.0, 250.0] {
            for p in [0.6, 0.9, 0.99, 0.9999] {
                let t = t_quantile(p, df);
                assert!(
                    ((1.0 - t_upper_tail(t, df)) - p).abs() < 1e-13,
                    "df {df} p {p}"
                );
            }
        }
    }

    #[test]
    fn stats_of_known_values() {
        let s = Stats::of(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(s.mean, 2.5);
        assert!((s.std - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        let h = 3.182446305284263 * s.std / 2.0;
        assert!((s.t95[0] - (2.5 - h)).abs() < 1e-12 && (s.t95[1] - (2.5 + h)).abs() < 1e-12);
        assert!(s.bootstrap95[0] >= 1.0 && s.bootstrap95[0] < 2.5);
        assert!(s.bootstrap95[1] <= 4.0 && s.bootstrap95[1] > 2.5);
        assert_eq!(s, Stats::of(&[1.0, 2.0, 3.0, 4.0]), "reproducible");
        let one = Stats::of(&[0.5]);
        assert!(one.std.is_nan() && one.t95[0].is_nan());
        assert_eq!(one.bootstrap95, [0.5, 0.5]);
        assert_eq!(one.to_json()["std"], Value::Null);
        assert_eq!(s.nan, 0);
        assert_eq!(s.to_json()["nan_runs"], 0);
    }

    #[test]
    fn stats_over_nan_runs_are_nan_and_counted() {
        // Before: min inf and max -inf when every run was NaN, and a NaN run silently
        // skipped by min and max otherwise.
        for xs in [&[f64::NAN, f64::NAN][..], &[0.5, f64::NAN, 0.25]] {
            let s = Stats::of(xs);
            let nan = xs.iter().filter(|x| x.is_nan()).count();
            assert_eq!(s.nan, nan);
            assert!(s.mean.is_nan() && s.std.is_nan(), "{s:?}");
            assert!(s.min.is_nan() && s.max.is_nan(), "{s:?}");
            assert!(
                s.t95.iter().chain(&s.bootstrap95).all(|v| v.is_nan()),
                "{s:?}"
            );
            assert_eq!(s.to_json()["nan_runs"], nan);
            assert_eq!(s.to_json()["min"], Value::Null);
        }
        let run = |seed: u64, loss: &str| {
            let j = format!(
                r#"{{"seed":{seed},"steps":2,"step_losses":[1.0,{loss}],"test_accuracy":[0.5]}}"#
            );
            Run::parse(seed, &j).unwrap()
        };
        let r = SweepReport::new(vec![run(0, "null"), run(1, "0.5"), run(2, "null")]);
        let text = r.to_text();
        let line = text.lines().find(|l| l.starts_with("final loss ")).unwrap();
        assert!(!line.contains("inf"), "{line}");
        assert_eq!(line.matches("NaN").count(), 8, "{line}");
        assert!(
            text.contains("final loss: NaN in 2 of 3 runs (seeds 0, 2)"),
            "{text}"
        );
        assert!(!text.contains("final test acc (%): NaN"), "{text}");
    }

    #[test]
    fn uniform_index_is_in_range_and_uses_every_value() {
        let mut g = Generator::with_seed(1);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            seen[uniform_index(&mut g, 7)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
    }

    #[test]
    fn config_checks() {
        let cmd = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let out = PathBuf::from("x");
        let c = SweepConfig::new(
            Some(3),
            None,
            2,
            out.clone(),
            &cmd("train --model mlp --json"),
        )
        .unwrap();
        assert_eq!(c.seeds, [0, 1, 2]);
        assert_eq!(c.train_args, ["--model", "mlp"]);
        let a = c.child_args(2);
        assert_eq!(a[..3], ["train", "--model", "mlp"]);
        assert_eq!(a[a.len() - 3..], ["--seed", "2", "--json"]);
        assert!(a.contains(&"--threads".to_string()));
        let c = SweepConfig::new(
            None,
            Some(vec![7, 3]),
            1,
            out.clone(),
            &cmd("train --threads=1"),
        )
        .unwrap();
        assert_eq!(c.seeds, [7, 3]);
        assert_eq!(
            c.child_args(7),
            ["train", "--threads=1", "--seed", "7", "--json"]
        );
        for (n, list, jobs, c) in [
            (Some(3), None, 1, "train --seed 4"),
            (Some(3), None, 1, "train --seed=4"),
            (Some(3), None, 1, "demo"),
            (Some(0), None, 1, "train"),
            (Some(3), Some(vec![1]), 1, "train"),
            (None, None, 1, "train"),
            (None, Some(vec![1, 1]), 1, "train"),
            (Some(3), None, 0, "train"),
            (Some(3), None, 1, ""),
        ] {
            assert!(
                SweepConfig::new(n, list, jobs, out.clone(), &cmd(c)).is_err(),
                "{c}"
            );
        }
    }
}
