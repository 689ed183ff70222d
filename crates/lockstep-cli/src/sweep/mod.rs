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
//! `lockstep::rng::Generator::with_seed(`[`BOOTSTRAP_SEED`]`)`, so the report is reproducible).
//!
//! Output: a per-seed table and the summary on stdout; `report.json`, `report.csv`,
//! `loss_curves.{svg,png}` and `final_accuracy.{svg,png}` in the output directory.

mod plot;
mod stats;

pub use plot::mean_curve;
pub use stats::{Stats, bootstrap95, inc_beta, percentile, t_quantile, uniform_index};

use plot::{PLOT_SIZE, Plot, register_font};
use plotters::prelude::{BitMapBackend, IntoDrawingArea, SVGBackend};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Why a sweep could not run or report: its own settings and I/O, or a seed's run.
#[derive(Debug)]
#[non_exhaustive]
pub enum SweepError {
    /// A refused flag ([`lockstep::Error::Config`], naming the flag), or this process's own
    /// I/O: its executable, the output directory and files ([`lockstep::Error::Io`]).
    Setup(lockstep::Error),
    /// A seed's run could not be started.
    Start {
        /// The seed.
        seed: u64,
        /// The program.
        program: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A seed's run exited with a failure.
    Failed {
        /// The seed.
        seed: u64,
        /// The program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its standard error.
        stderr: String,
    },
    /// A seed's run printed no usable report.
    Report {
        /// The seed.
        seed: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// Runs stopped before every seed was done.
    Unfinished,
    /// A plot could not be drawn.
    Plot {
        /// The plot's file.
        path: PathBuf,
        /// The drawing library's message.
        message: String,
    },
    /// The embedded font could not be loaded.
    Font,
}

impl std::fmt::Display for SweepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(e) => write!(f, "{e}"),
            Self::Start {
                seed,
                program,
                message,
            } => write!(
                f,
                "seed {seed}: cannot run {}: {message}",
                program.display()
            ),
            Self::Failed {
                seed,
                args,
                status,
                stderr,
                ..
            } => write!(
                f,
                "seed {seed}: `lockstep {}` failed ({status}):\n{}",
                args.join(" "),
                stderr.trim_end()
            ),
            Self::Report { seed, reason } => write!(f, "seed {seed}: {reason}"),
            Self::Unfinished => f.write_str("some runs did not finish"),
            Self::Plot { path, message } => {
                write!(f, "cannot draw {}: {message}", path.display())
            }
            Self::Font => f.write_str("cannot load the embedded DejaVu Sans font"),
        }
    }
}

impl std::error::Error for SweepError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Setup(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lockstep::Error> for SweepError {
    fn from(e: lockstep::Error) -> Self {
        Self::Setup(e)
    }
}

impl From<SweepError> for lockstep::Error {
    /// [`SweepError::Setup`] as it is; the others as [`lockstep::Error::Io`] naming the
    /// program (a run's failure) or the file (a plot), the message as [`SweepError`] prints
    /// it.
    fn from(e: SweepError) -> Self {
        let io = |action: &str, path: PathBuf, e: &SweepError| lockstep::Error::Io {
            action: action.into(),
            path,
            message: e.to_string(),
        };
        match e {
            SweepError::Setup(e) => e,
            SweepError::Start { ref program, .. } | SweepError::Failed { ref program, .. } => {
                io("run", program.clone(), &e)
            }
            SweepError::Plot { ref path, .. } => io("draw", path.clone(), &e),
            SweepError::Report { .. } | SweepError::Unfinished | SweepError::Font => {
                io("complete", own_name(), &e)
            }
        }
    }
}

/// `argv[0]`, naming this program where `current_exe` fails.
fn own_name() -> PathBuf {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .unwrap_or_default()
}

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
    /// [`lockstep::Error::Config`] naming the flag; [`lockstep::Error::Io`] when the current
    /// executable cannot be found.
    pub fn new(
        seeds: Option<usize>,
        seed_list: Option<Vec<u64>>,
        jobs: usize,
        out: PathBuf,
        command: &[String],
    ) -> lockstep::Result<Self> {
        let bad = |m: &str| Err(lockstep::Error::config(m));
        let seeds = match (seeds, seed_list) {
            (Some(_), Some(_)) => return bad("give either --seeds or --seed-list, not both"),
            (None, None) => return bad("give --seeds N or --seed-list S1,S2,…"),
            (Some(n), None) => {
                if n == 0 || n > MAX_SEEDS {
                    return bad(&format!("--seeds must be between 1 and {MAX_SEEDS}"));
                }
                (0..n as u64).collect()
            }
            (None, Some(list)) => {
                if list.is_empty() || list.len() > MAX_SEEDS {
                    return bad(&format!(
                        "--seed-list must have between 1 and {MAX_SEEDS} seeds"
                    ));
                }
                let mut sorted = list.clone();
                sorted.sort_unstable();
                if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                    return bad(&format!("--seed-list names seed {} twice", w[0]));
                }
                list
            }
        };
        if jobs == 0 || jobs > MAX_JOBS {
            return bad(&format!("--jobs must be between 1 and {MAX_JOBS}"));
        }
        let Some((first, rest)) = command.split_first() else {
            return bad("missing the training command: lockstep sweep … -- train ARGS…");
        };
        if first != "train" {
            return bad(&format!(
                "the command after -- must be `train ARGS…` (got `{first}`): only lockstep train \
                 can be swept"
            ));
        }
        if rest.iter().any(|a| is_flag(a, "--seed")) {
            return bad(
                "ARGS must not set --seed: the sweep gives each run its seed (--seeds or \
                 --seed-list)",
            );
        }
        let train_args = rest.iter().filter(|a| *a != "--json").cloned().collect();
        let exe = std::env::current_exe().map_err(|e| {
            lockstep::Error::io("find the lockstep executable to run", &own_name(), &e)
        })?;
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
    /// [`SweepError::Report`]: not JSON, another seed, or no losses or accuracies.
    pub fn parse(seed: u64, stdout: &str) -> Result<Self, SweepError> {
        let bad = |reason: String| SweepError::Report { seed, reason };
        let report: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            bad(format!(
                "the train report is not JSON ({e}): {}",
                stdout.trim()
            ))
        })?;
        let numbers = |key: &str| -> Result<Vec<f64>, SweepError> {
            let arr = report
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(format!("the train report has no array {key}")))?;
            let v = arr
                .iter()
                .map(|x| match x {
                    Value::Null => Some(f64::NAN),
                    x => x.as_f64(),
                })
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| bad(format!("{key} holds a value that is not a number")))?;
            if v.is_empty() {
                return Err(bad(format!("the run reported no {key}")));
            }
            Ok(v)
        };
        let step_losses = numbers("step_losses")?;
        let test_accuracy = numbers("test_accuracy")?;
        if report.get("seed").and_then(Value::as_u64) != Some(seed) {
            return Err(bad("the train report is for another seed".into()));
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
pub fn run_seeds(cfg: &SweepConfig, done: &(dyn Fn(u64) + Sync)) -> Result<Vec<Run>, SweepError> {
    let n = cfg.seeds.len();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<Run, SweepError>>>> =
        Mutex::new((0..n).map(|_| None).collect());
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
            Some(Err(e)) => return Err(e),
            None => {}
        }
    }
    if runs.len() != n {
        return Err(SweepError::Unfinished);
    }
    Ok(runs)
}

fn run_one(cfg: &SweepConfig, seed: u64) -> Result<Run, SweepError> {
    let args = cfg.child_args(seed);
    let out = Command::new(&cfg.exe)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| SweepError::Start {
            seed,
            program: cfg.exe.clone(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(SweepError::Failed {
            seed,
            program: cfg.exe.clone(),
            args,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Run::parse(seed, &String::from_utf8_lossy(&out.stdout))
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
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, SweepError> {
        std::fs::create_dir_all(dir).map_err(|e| lockstep::Error::io("create", dir, &e))?;
        let mut written = Vec::new();
        let mut put = |name: &str, bytes: &[u8]| -> Result<(), SweepError> {
            let p = dir.join(name);
            lockstep::tensor::io::write_atomic(&p, bytes)
                .map_err(|e| lockstep::Error::io("write", &p, &e))?;
            written.push(p);
            Ok(())
        };
        let report = dir.join("report.json");
        let mut json =
            serde_json::to_string_pretty(&self.to_json()).map_err(|e| lockstep::Error::Io {
                action: "write".into(),
                path: report,
                message: e.to_string(),
            })?;
        json.push('\n');
        put("report.json", json.as_bytes())?;
        put("report.csv", self.to_csv().as_bytes())?;
        register_font()?;
        for plot in [Plot::LossCurves, Plot::FinalAccuracy] {
            let svg = dir.join(format!("{}.svg", plot.name()));
            plot.draw(
                self,
                SVGBackend::new(&svg, PLOT_SIZE).into_drawing_area(),
                &svg,
            )?;
            written.push(svg);
            let png = dir.join(format!("{}.png", plot.name()));
            plot.draw(
                self,
                BitMapBackend::new(&png, PLOT_SIZE).into_drawing_area(),
                &png,
            )?;
            written.push(png);
        }
        Ok(written)
    }
}

/// Runs the sweep with a progress bar over the runs on a terminal, and summarizes it.
///
/// # Errors
/// A failed seed (named, with its stderr).
pub fn run(cfg: &SweepConfig) -> Result<SweepReport, SweepError> {
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
    use super::stats::t_upper_tail;
    use super::*;
    use lockstep::rng::Generator;

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

    /// Flags are `lockstep::Error::Config`; a seed's bad report is `SweepError::Report`
    /// naming the seed, which converts into `lockstep::Error` with the same message.
    #[test]
    fn errors_are_typed() {
        let e = SweepConfig::new(Some(0), None, 1, "x".into(), &["train".into()]).unwrap_err();
        assert!(matches!(e, lockstep::Error::Config(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("--seeds must be between 1 and {MAX_SEEDS}")
        );
        let e = Run::parse(3, "nope").unwrap_err();
        assert!(matches!(e, SweepError::Report { seed: 3, .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with("seed 3: the train report is not JSON ("),
            "{msg}"
        );
        match lockstep::Error::from(e) {
            lockstep::Error::Io { message, .. } => assert_eq!(message, msg),
            other => panic!("{other:?}"),
        }
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
