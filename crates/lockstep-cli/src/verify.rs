//! `lockstep verify`: runs a training (or any program using lockstep) under several settings
//! with tracing on (`LOCKSTEP_TRACE`), compares the traces record by record and names the first
//! op where two runs part: op, step, call index, algorithm, shapes, the largest difference of
//! its outputs (from a rerun of both settings that dumps that one call) and whether a
//! deterministic implementation exists.

use lockstep::tensor::dispatch::{Guarantee, find_algo};
use lockstep::tensor::trace::{self, Record};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

/// The most runs per setting (`--runs`).
pub const MAX_RUNS: usize = 1000;
/// The most runs in all (thread counts × worker counts × runs): each is a whole training.
pub const MAX_TOTAL_RUNS: usize = 10_000;
/// The largest thread count (`lockstep train --threads`'s own limit).
pub const MAX_THREADS: usize = 1024;
/// The largest worker count (`lockstep train --workers`'s own limit).
pub const MAX_WORKERS: usize = 256;

/// What to run and under which settings.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// Kernel thread counts (`train --threads`; `LOCKSTEP_NUM_THREADS` for `--cmd`).
    pub threads: Vec<usize>,
    /// Loader worker counts (`train --workers`; ignored with `--cmd`).
    pub workers: Vec<usize>,
    /// Runs per setting (default: 1, or 2 when there is a single setting).
    pub runs: Option<usize>,
    /// `train ARGS…` (the leading `train` optional).
    pub train_args: Vec<String>,
    /// A program and its arguments, split on whitespace (`--cmd`), instead of `train`.
    pub cmd: Option<String>,
    /// Print one JSON object.
    pub json: bool,
}

/// One run's setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// Threads, if set.
    pub threads: Option<usize>,
    /// Workers, if set.
    pub workers: Option<usize>,
    /// Which repetition (from 1).
    pub run: usize,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = self.threads {
            parts.push(format!("threads={t}"));
        }
        if let Some(w) = self.workers {
            parts.push(format!("workers={w}"));
        }
        parts.push(format!("run {}", self.run));
        write!(f, "{}", parts.join(" "))
    }
}

/// Where two runs part.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// The reference run and the other one.
    pub settings: (Setting, Setting),
    /// Their records at the first difference (`None`: that trace ended before).
    pub records: (Option<Record>, Option<Record>),
    /// The largest absolute difference of the two outputs, from the rerun with a dump.
    pub max_abs_diff: Option<f64>,
    /// The explanation: guarantee of the algorithm, deterministic alternative, how to switch.
    pub advice: String,
}

/// The result of a verification.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Every trace identical: the number of runs and records per run.
    Identical {
        /// The settings that ran.
        settings: Vec<Setting>,
        /// Records per trace.
        records: usize,
    },
    /// The first difference.
    Different(Box<Divergence>),
}

/// Why `lockstep verify` could not compare its runs: its own settings and I/O, or a run.
#[derive(Debug)]
#[non_exhaustive]
pub enum VerifyError {
    /// A refused flag or count ([`lockstep::Error::Config`], naming the flag), or this
    /// process's own I/O: the temporary directory, its executable ([`lockstep::Error::Io`]).
    Setup(lockstep::Error),
    /// A run could not be started.
    Start {
        /// The run's setting.
        setting: Setting,
        /// The program.
        program: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A run exited with a failure.
    Failed {
        /// The run's setting.
        setting: Setting,
        /// The program.
        program: PathBuf,
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error.
        stderr: String,
    },
    /// A run left no readable trace (`LOCKSTEP_TRACE`).
    NoTrace {
        /// The run's setting.
        setting: Setting,
        /// The program.
        program: PathBuf,
        /// Where the trace should be.
        path: PathBuf,
        /// Why it cannot be read.
        message: String,
    },
    /// A run traced no op.
    NoOps {
        /// The run's setting.
        setting: Setting,
        /// The program.
        program: PathBuf,
    },
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(e) => write!(f, "{e}"),
            Self::Start {
                setting, message, ..
            } => write!(f, "could not start the run ({setting}): {message}"),
            Self::Failed {
                setting,
                status,
                stderr,
                ..
            } => write!(
                f,
                "the run ({setting}) failed ({status}): {}",
                stderr.trim()
            ),
            Self::NoTrace {
                setting,
                path,
                message,
                ..
            } => write!(
                f,
                "the run ({setting}) left no readable trace at {} ({message}); does the \
                 program use lockstep?",
                path.display()
            ),
            Self::NoOps { setting, .. } => write!(
                f,
                "the run ({setting}) traced no op; does the program use lockstep on its main \
                 thread?"
            ),
        }
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Setup(e) => Some(e),
            _ => None,
        }
    }
}

impl From<lockstep::Error> for VerifyError {
    fn from(e: lockstep::Error) -> Self {
        Self::Setup(e)
    }
}

impl From<VerifyError> for lockstep::Error {
    /// [`VerifyError::Setup`] as it is; a run's failure as [`lockstep::Error::Io`] naming the
    /// program, the message as [`VerifyError`] prints it.
    fn from(e: VerifyError) -> Self {
        match e {
            VerifyError::Setup(e) => e,
            VerifyError::Start { ref program, .. }
            | VerifyError::Failed { ref program, .. }
            | VerifyError::NoTrace { ref program, .. }
            | VerifyError::NoOps { ref program, .. } => lockstep::Error::Io {
                action: "run".into(),
                path: program.clone(),
                message: e.to_string(),
            },
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

impl VerifyConfig {
    /// Checks every count before anything runs or is built: `--runs` in 1..=[`MAX_RUNS`],
    /// thread counts up to [`MAX_THREADS`], worker counts up to [`MAX_WORKERS`], and at most
    /// [`MAX_TOTAL_RUNS`] runs in all.
    ///
    /// # Errors
    /// The first count out of range, naming its flag.
    pub fn check(&self) -> lockstep::Result<()> {
        let bad = |m: String| Err(lockstep::Error::config(m));
        if let Some(r) = self.runs
            && !(1..=MAX_RUNS).contains(&r)
        {
            return bad(format!("--runs {r}: must be between 1 and {MAX_RUNS}"));
        }
        if let Some(t) = self.threads.iter().find(|&&t| t > MAX_THREADS) {
            return bad(format!(
                "--threads {t}: at most {MAX_THREADS} (0 = all cores)"
            ));
        }
        if let Some(w) = self.workers.iter().find(|&&w| w > MAX_WORKERS) {
            return bad(format!("--workers {w}: at most {MAX_WORKERS}"));
        }
        let total = self.total_runs();
        if total > MAX_TOTAL_RUNS {
            return bad(format!(
                "{total} runs in all (threads × workers × runs): at most {MAX_TOTAL_RUNS}"
            ));
        }
        Ok(())
    }

    /// Thread counts × worker counts × runs, saturating (nothing is built).
    fn total_runs(&self) -> usize {
        let threads = self.threads.len().max(1);
        let workers = if self.cmd.is_some() {
            1
        } else {
            self.workers.len().max(1)
        };
        let n = threads.saturating_mul(workers);
        let runs = self.runs.unwrap_or(if n == 1 { 2 } else { 1 });
        n.saturating_mul(runs)
    }

    /// Every setting in order (call after [`check`](Self::check): at most
    /// [`MAX_TOTAL_RUNS`]).
    fn settings(&self) -> Vec<Setting> {
        let opt = |v: &[usize]| -> Vec<Option<usize>> {
            if v.is_empty() {
                vec![None]
            } else {
                v.iter().copied().map(Some).collect()
            }
        };
        let workers = if self.cmd.is_some() {
            vec![None]
        } else {
            opt(&self.workers)
        };
        let threads = opt(&self.threads);
        let n = threads.len() * workers.len();
        let runs = self.runs.unwrap_or(if n == 1 { 2 } else { 1 });
        let mut out = Vec::new();
        for &t in &threads {
            for &w in &workers {
                for run in 1..=runs {
                    out.push(Setting {
                        threads: t,
                        workers: w,
                        run,
                    });
                }
            }
        }
        out
    }

    fn command(&self, s: &Setting) -> lockstep::Result<Command> {
        let mut c = if let Some(cmd) = &self.cmd {
            let mut words = cmd.split_whitespace();
            let prog = words
                .next()
                .ok_or_else(|| lockstep::Error::config("--cmd is empty"))?;
            let mut c = Command::new(prog);
            c.args(words);
            if let Some(t) = s.threads {
                c.env("LOCKSTEP_NUM_THREADS", t.to_string());
            }
            c
        } else {
            let exe = std::env::current_exe()
                .map_err(|e| lockstep::Error::io("find the running executable", &own_name(), &e))?;
            let mut c = Command::new(exe);
            let args = match self.train_args.first().map(String::as_str) {
                Some("train") => &self.train_args[1..],
                _ => &self.train_args[..],
            };
            c.arg("train").args(args);
            if let Some(t) = s.threads {
                c.args(["--threads", &t.to_string()]);
            }
            if let Some(w) = s.workers {
                c.args(["--workers", &w.to_string()]);
            }
            if !args.iter().any(|a| a == "--json") {
                c.arg("--json");
            }
            c
        };
        c.env_remove("LOCKSTEP_TRACE_DUMP");
        Ok(c)
    }
}

fn run_traced(
    cfg: &VerifyConfig,
    s: &Setting,
    path: &Path,
    dump: Option<u64>,
) -> Result<Vec<Record>, VerifyError> {
    let mut c = cfg.command(s)?;
    let program = PathBuf::from(c.get_program());
    c.env("LOCKSTEP_TRACE", path);
    if let Some(d) = dump {
        c.env("LOCKSTEP_TRACE_DUMP", d.to_string());
    }
    let out = c.output().map_err(|e| VerifyError::Start {
        setting: s.clone(),
        program: program.clone(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(VerifyError::Failed {
            setting: s.clone(),
            program,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let t = trace::read(path).map_err(|e| VerifyError::NoTrace {
        setting: s.clone(),
        program: program.clone(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if t.is_empty() {
        return Err(VerifyError::NoOps {
            setting: s.clone(),
            program,
        });
    }
    Ok(t)
}

fn same(a: &Record, b: &Record) -> bool {
    a.op == b.op
        && a.hash == b.hash
        && a.inputs == b.inputs
        && a.output == b.output
        && a.dtype == b.dtype
        && a.step == b.step
        && a.algo == b.algo
}

/// The index of the first record where two traces differ (`None`: identical).
pub fn first_difference(a: &[Record], b: &[Record]) -> Option<usize> {
    (0..a.len().max(b.len())).find(|&i| match (a.get(i), b.get(i)) {
        (Some(x), Some(y)) => !same(x, y),
        _ => true,
    })
}

/// The registration of `algo` among the built-in ops of the tensor and training layers.
fn find_any_algo(algo: &str) -> Option<(lockstep::tensor::dispatch::OpInfo, Guarantee)> {
    find_algo(algo).or_else(|| {
        lockstep::nn::builtin_ops().into_iter().find_map(|o| {
            let g = o.impls.iter().find(|(a, _)| *a == algo)?.1;
            Some((o, g))
        })
    })
}

/// Explains a diverging record: its algorithm's guarantee, a deterministic alternative.
pub fn advice(a: Option<&Record>, b: Option<&Record>, train: bool) -> String {
    let Some(r) = a.or(b) else {
        return String::new();
    };
    let switch = if train {
        "run `lockstep train` without --nondeterministic (deterministic mode is its default)"
    } else {
        "call `lockstep::use_deterministic_algorithms(true)` (or run the op inside \
         `lockstep::tensor::deterministic::scope(true, false, ..)`)"
    };
    let algos: Vec<&str> = [a, b].iter().flatten().map(|r| r.algo.as_str()).collect();
    let infos: Vec<_> = algos.iter().filter_map(|a| find_any_algo(a)).collect();
    if algos.len() == 2 && algos[0] != algos[1] {
        return format!(
            "the runs chose different implementations ({} vs {}): benchmark mode or a pinned \
             choice differed; pin one with lockstep::tensor::autotune, or load the same tuning \
             file",
            algos[0], algos[1]
        );
    }
    match infos.first() {
        Some((info, Guarantee::NotGuaranteed)) => {
            match info
                .impls
                .iter()
                .find(|(_, g)| *g >= Guarantee::ThreadInvariant)
            {
                Some((det, _)) => format!(
                    "{} is not guaranteed to repeat (its result depends on threads or timing); \
                     a deterministic implementation exists: {det} — to use it, {switch}",
                    r.algo
                ),
                None => format!(
                    "{} is not guaranteed to repeat and {} has no deterministic implementation: \
                     run it at a fixed thread count, or register a ThreadInvariant one",
                    r.algo, info.name
                ),
            }
        }
        Some((_, _)) => format!(
            "{} is thread-invariant, so its inputs differed: they come from an untraced \
             computation (data loading, a kernel outside dispatch) or a differing program{}",
            r.algo,
            if train {
                " (in `lockstep train`, loader workers draw the augmentation noise \
                 from per-worker generators unless --seeding invariant)"
            } else {
                ""
            }
        ),
        None => format!(
            "{} is not a built-in algorithm (a custom op?): if it is registered as \
             NotGuaranteed, give it a ThreadInvariant implementation; to find out, {switch} \
             and see whether lockstep refuses it",
            r.algo
        ),
    }
}

/// A directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> lockstep::Result<Self> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "lockstep-verify-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p)
            .map_err(|e| lockstep::Error::io("create the temporary directory", &p, &e))?;
        Ok(TempDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs every setting and compares each trace with the first one as it comes (only the first
/// is kept), stopping at the first run that differs.
///
/// # Errors
/// Counts out of range ([`VerifyConfig::check`]) and the temporary directory
/// ([`VerifyError::Setup`]), a run that fails or leaves no trace (its own variants).
pub fn run(cfg: &VerifyConfig, log: &mut dyn FnMut(&str)) -> Result<Outcome, VerifyError> {
    cfg.check()?;
    let dir = TempDir::new()?;
    let settings = cfg.settings();
    let mut reference: Vec<Record> = Vec::new();
    for (k, s) in settings.iter().enumerate() {
        log(&format!("run {}/{}: {s}", k + 1, settings.len()));
        let path = dir.path().join(format!("trace-{}.jsonl", k.min(1)));
        let t = run_traced(cfg, s, &path, None)?;
        if k == 0 {
            reference = t;
            continue;
        }
        let Some(i) = first_difference(&reference, &t) else {
            continue;
        };
        let (a, b) = (reference.get(i).cloned(), t.get(i).cloned());
        let mut max_abs_diff = None;
        if a.is_some() && b.is_some() {
            log(&format!(
                "call {i} differs; rerunning both settings to dump its output"
            ));
            let va = run_traced(
                cfg,
                &settings[0],
                &dir.path().join("dump-a.jsonl"),
                Some(i as u64),
            );
            let vb = run_traced(
                cfg,
                &settings[k],
                &dir.path().join("dump-b.jsonl"),
                Some(i as u64),
            );
            if let (Ok(va), Ok(vb)) = (va, vb) {
                let values = |t: &[Record]| t.get(i).and_then(|r| r.values.clone());
                if let (Some(x), Some(y)) = (values(&va), values(&vb))
                    && x.len() == y.len()
                {
                    max_abs_diff = Some(
                        x.iter()
                            .zip(&y)
                            .map(|(p, q)| (p - q).abs())
                            .fold(0.0, f64::max),
                    );
                }
            }
        }
        let advice = advice(a.as_ref(), b.as_ref(), cfg.cmd.is_none());
        return Ok(Outcome::Different(Box::new(Divergence {
            settings: (settings[0].clone(), settings[k].clone()),
            records: (a, b),
            max_abs_diff,
            advice,
        })));
    }
    Ok(Outcome::Identical {
        settings,
        records: reference.len(),
    })
}

fn describe(r: &Option<Record>) -> String {
    match r {
        None => "(the trace ended)".into(),
        Some(r) => format!(
            "{}{} algo {} inputs {:?} -> {:?} {} hash {}",
            r.op,
            r.backward
                .as_ref()
                .map(|b| format!(" (backward of {b})"))
                .unwrap_or_default(),
            r.algo,
            r.inputs,
            r.output,
            r.dtype,
            r.hash
        ),
    }
}

/// The outcome as JSON.
pub fn to_json(o: &Outcome) -> serde_json::Value {
    match o {
        Outcome::Identical { settings, records } => json!({
            "identical": true,
            "runs": settings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "records": records,
        }),
        Outcome::Different(d) => {
            let r = d.records.0.as_ref().or(d.records.1.as_ref());
            json!({
                "identical": false,
                "runs": [d.settings.0.to_string(), d.settings.1.to_string()],
                "op": r.map(|r| r.op.clone()),
                "backward": r.and_then(|r| r.backward.clone()),
                "step": r.and_then(|r| r.step),
                "call": r.map(|r| r.call),
                "algo": r.map(|r| r.algo.clone()),
                "inputs": r.map(|r| r.inputs.clone()),
                "output": r.map(|r| r.output.clone()),
                "records": [d.records.0.as_ref().map(Record::to_json), d.records.1.as_ref().map(Record::to_json)],
                "max_abs_diff": d.max_abs_diff,
                "advice": d.advice,
            })
        }
    }
}

/// `lockstep verify`: prints the outcome; exit 0 identical, 1 different, 2 error.
pub fn main(cfg: &VerifyConfig) -> ExitCode {
    let quiet = cfg.json;
    let mut log = |m: &str| {
        if !quiet {
            eprintln!("verify: {m}");
        }
    };
    let o = match run(cfg, &mut log) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: lockstep verify: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg.json {
        println!("{}", to_json(&o));
    } else {
        match &o {
            Outcome::Identical { settings, records } => println!(
                "identical: {} runs ({}) traced the same {records} op calls, bit for bit",
                settings.len(),
                settings
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Outcome::Different(d) => {
                let r = d.records.0.as_ref().or(d.records.1.as_ref());
                println!(
                    "DIFFERENT: [{}] and [{}] part at op {}",
                    d.settings.0,
                    d.settings.1,
                    r.map_or("?".into(), |r| r.op.clone())
                );
                if let Some(r) = r {
                    println!(
                        "  step {}, call {}, algorithm {}",
                        r.step.map_or("-".into(), |s| s.to_string()),
                        r.call,
                        r.algo
                    );
                }
                println!("  [{}]: {}", d.settings.0, describe(&d.records.0));
                println!("  [{}]: {}", d.settings.1, describe(&d.records.1));
                match d.max_abs_diff {
                    Some(m) => println!("  max abs difference: {m:e}"),
                    None => println!("  max abs difference: unknown (the rerun did not repeat it)"),
                }
                println!("  {}", d.advice);
            }
        }
    }
    match o {
        Outcome::Identical { .. } => ExitCode::SUCCESS,
        Outcome::Different(_) => ExitCode::from(1),
    }
}

/// A test-only custom op with a single implementation that is not guaranteed to repeat: its
/// partial sums follow the number of threads.
pub static TEST_CUSTOM_OP: lockstep::tensor::dispatch::Op<fn(&[f32], usize) -> f32> =
    lockstep::tensor::dispatch::Op {
        name: "test_custom_nondet_sum",
        impls: &[lockstep::tensor::dispatch::Impl {
            algo: "test_custom_nondet_sum.per_thread_ranges",
            guarantee: Guarantee::NotGuaranteed,
            f: |x, threads| {
                let per = x.len().div_ceil(threads.max(1)).max(1);
                x.chunks(per).map(|c| c.iter().sum::<f32>()).sum()
            },
        }],
    };

/// The hidden `lockstep verify-test-program`: a small program for `verify --cmd` tests, in
/// nondeterministic mode at `LOCKSTEP_NUM_THREADS` threads. Elementwise ops, then either a
/// large built-in `sum` (whose first implementation adds per-thread partials in completion
/// order) or, with `custom_op`, [`TEST_CUSTOM_OP`]; then more elementwise ops.
///
/// # Errors
/// A failing op.
pub fn test_program(custom_op: bool) -> lockstep::tensor::Result<()> {
    use lockstep::tensor::{DType, Tensor};
    if let Some(t) = std::env::var("LOCKSTEP_NUM_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        lockstep::tensor::set_num_threads(t);
    }
    lockstep::tensor::use_deterministic_algorithms(false);
    let mut g = lockstep::rng::Generator::with_seed(0);
    // 400,003 values (25 pieces): at 2 threads the completion-order sum adds 13 + 12 pieces,
    // the fixed tree 16 + 9 (a power of two would split both at the half: the same bits).
    let x = Tensor::randn(&[400_003], DType::F32, Some(&mut g))?;
    let y = x.mul_scalar(1.5)?.tanh()?;
    for step in 0..2 {
        lockstep::tensor::trace::set_step(step);
        let s = if custom_op {
            let c = TEST_CUSTOM_OP.select()?;
            let yc = y.contiguous();
            let v = (c.imp.f)(yc.data::<f32>()?, c.par.threads());
            let s = Tensor::scalar(v);
            lockstep::tensor::trace::record(TEST_CUSTOM_OP.name, c.imp.algo, &[&y], &s);
            s
        } else {
            y.sum()?
        };
        s.exp()?;
    }
    Ok(())
}
