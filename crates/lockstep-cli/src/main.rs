//! The `lockstep` binary.

use clap::{Parser, Subcommand};
use lockstep_cli::distributed::Reduction;
use lockstep_cli::gpt::GptConfig;
use lockstep_cli::train::{Model, TrainConfig};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "lockstep",
    version,
    about = "Reproducible deep learning: every random stream under your control"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train on the embedded digits data set twice and compare bit for bit; with --verify,
    /// then sweep 5 seeds.
    ///
    /// Runs `lockstep train --model mlp --seeding invariant` at 1 thread and 0 loader workers,
    /// then at all threads and 2 workers: every loss, accuracy and the final weights must be
    /// identical. --verify then runs `lockstep sweep --seeds 5` over the same configuration
    /// and prints the mean, spread and intervals of the test accuracy and the plots' paths.
    Demo(DemoArgs),
    /// Train a model exactly as spec/train/torch_train.py does in PyTorch (same flags, same
    /// JSON report): same split, initial weights, shuffling, noise, dropout masks and
    /// optimizer arithmetic, bit for bit; losses equal to rounding.
    Train(Box<TrainArgs>),
    /// Print what a random function of PyTorch, CPython or NumPy draws, as JSON.
    ///
    /// LIB is one of torch, python, numpy-legacy, numpy. Options are --name=value, e.g.
    /// `lockstep sample torch randn --seed=0 --shape=2,3`. `lockstep sample --list [LIB]`
    /// lists every function with the call it mirrors and its options.
    Sample {
        /// List the functions of LIB (of every library without LIB) with their options.
        #[arg(long)]
        list: bool,
        /// torch | python | numpy-legacy | numpy
        #[arg(required_unless_present = "list")]
        lib: Option<String>,
        /// The function, e.g. rand, randn, randint, randperm, shuffle, standard_normal
        #[arg(name = "FN", required_unless_present = "list")]
        func: Option<String>,
        /// --seed=S --shape=D0,D1 --dtype=float32 --repeat=R and the function's own options
        #[arg(allow_hyphen_values = true, trailing_var_arg = true)]
        options: Vec<String>,
    },
    /// Run a training (or any program using lockstep) under several settings with tracing on
    /// and compare op by op: identical (exit 0), or the first op where two runs part — op, step,
    /// call, algorithm, shapes, max abs difference, and whether a deterministic implementation
    /// exists (exit 1).
    ///
    /// Example: `lockstep verify --threads=1,2 --workers=0,2 -- train --model mlp --epochs 1`;
    /// `lockstep verify --runs 2 --cmd "./my_program --flag"` (the program is traced through
    /// LOCKSTEP_TRACE; with --threads it gets LOCKSTEP_NUM_THREADS).
    Verify {
        /// Kernel thread counts to compare.
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        threads: Vec<usize>,
        /// Loader worker counts to compare (train only).
        #[arg(long, value_delimiter = ',', default_value = "0")]
        workers: Vec<usize>,
        /// Runs per setting (default 1; 2 when there is one setting; at most 1000).
        #[arg(long)]
        runs: Option<usize>,
        /// A program using lockstep and its arguments, instead of `train ARGS`.
        #[arg(long, conflicts_with = "command")]
        cmd: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// `train` and its flags (not --threads/--workers), after `--`.
        #[arg(last = true, value_name = "train ARGS")]
        command: Vec<String>,
    },
    /// Test-only: a small nondeterministic program for `verify --cmd` tests.
    #[command(hide = true)]
    VerifyTestProgram {
        /// Use a custom op with only a nondeterministic implementation.
        #[arg(long)]
        custom_op: bool,
    },
    /// Generate text from a gpt checkpoint (`train --model gpt --checkpoint-dir …`),
    /// batch-invariant: row 0's logits and tokens are the same bits for any --batch, with or
    /// without --kv-cache, at any --threads.
    ///
    /// Example: `lockstep generate --checkpoint ckpt/ckpt-00000200.safetensors --prompt "ROMEO:"
    /// --tokens 200 --batch 8 --json`. Rows 1.. start from the validation text at offsets
    /// (r−1)·997 mod (len(val) − L + 1), L the prompt's length; row r samples from its own
    /// generator keyed by (seed, r). --temperature 0 is greedy (argmax).
    Generate(GenerateArgs),
    /// Report what on this machine can break reproducibility.
    Doctor {
        /// Also run every deterministic kernel at 1, 2, 3 and all threads and compare bits.
        #[arg(long)]
        self_test: bool,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run `lockstep train ARGS` for several seeds and report the spread: a per-seed table, mean,
    /// std, min, max, 95 % t and bootstrap intervals of final/best accuracy and final loss.
    ///
    /// Each seed is a child `lockstep train ARGS --seed S --json` (repeatable on its own). Writes
    /// report.json, report.csv, loss_curves.{svg,png} and final_accuracy.{svg,png} into --out.
    /// Example: `lockstep sweep --seeds 5 --jobs 2 -- train --model mlp --epochs 3`.
    Sweep {
        /// Run seeds 0..N.
        #[arg(long, value_name = "N", required_unless_present = "seed_list")]
        seeds: Option<usize>,
        /// Run these seeds instead, e.g. 3,7,11.
        #[arg(long, value_delimiter = ',', conflicts_with = "seeds")]
        seed_list: Option<Vec<u64>>,
        /// Runs at a time (each gets max(1, cores / jobs) threads unless ARGS sets --threads).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Output directory.
        #[arg(long, default_value = "sweep-out")]
        out: std::path::PathBuf,
        /// `train` and its flags (not --seed), after `--`.
        #[arg(last = true, required = true, value_name = "train ARGS")]
        command: Vec<String>,
    },
}

/// The flags of `lockstep demo`.
#[derive(clap::Args)]
struct DemoArgs {
    /// Seed for every generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Passes over the training split.
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// Samples per SGD step.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// SGD learning rate.
    #[arg(long, default_value_t = 0.1)]
    lr: f64,
    /// Kernel threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Data loader worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// After the two compared runs, sweep 5 seeds (mean, spread, intervals, plots).
    #[arg(long)]
    verify: bool,
}

impl DemoArgs {
    /// The run's configuration (everything but `--verify`).
    fn config(&self) -> lockstep_cli::demo::DemoConfig {
        lockstep_cli::demo::DemoConfig {
            seed: self.seed,
            epochs: self.epochs,
            batch_size: self.batch_size,
            hidden: self.hidden,
            lr: self.lr,
            threads: self.threads,
            workers: self.workers,
        }
    }
}

/// The flags of `lockstep generate`.
#[derive(clap::Args)]
struct GenerateArgs {
    /// A gpt checkpoint file (ckpt-STEP.safetensors).
    #[arg(long)]
    checkpoint: std::path::PathBuf,
    /// Row 0's prompt (characters of the checkpoint's vocabulary).
    #[arg(long, default_value = "\n", allow_hyphen_values = true)]
    prompt: String,
    /// Tokens to generate per row (the context is cropped to block_size, as nanoGPT).
    #[arg(long, default_value_t = 200)]
    tokens: usize,
    /// Seed: row 0 samples as torch.Generator().manual_seed(SEED).
    #[arg(long, default_value_t = 1337)]
    seed: u64,
    /// Sampling temperature; 0 = greedy (argmax).
    #[arg(long, default_value_t = 0.8, allow_hyphen_values = true)]
    temperature: f64,
    /// Sample from the K largest logits (0 = all).
    #[arg(long, default_value_t = 20)]
    top_k: usize,
    /// Sequences generated together; rows 1.. take their prompts from the validation text.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Reuse cached keys and values (true) or recompute the context every step (false).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    kv_cache: bool,
    /// Kernel threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// The corpus of the other rows' prompts [default: the checkpoint's --data].
    #[arg(long)]
    data: Option<std::path::PathBuf>,
    /// Print only the JSON report.
    #[arg(long)]
    json: bool,
}

impl GenerateArgs {
    fn config(&self) -> lockstep_cli::generate::GenerateConfig {
        lockstep_cli::generate::GenerateConfig {
            checkpoint: self.checkpoint.clone(),
            prompt: self.prompt.clone(),
            tokens: self.tokens,
            seed: self.seed,
            temperature: self.temperature,
            top_k: self.top_k,
            batch: self.batch,
            kv_cache: self.kv_cache,
            threads: self.threads,
            data: self.data.clone(),
        }
    }
}

/// The flags of torch_train.py and, with `--model gpt`, of torch_gpt.py: the two
/// configurations' own flags, and the CLI's.
#[derive(clap::Args)]
struct TrainArgs {
    /// The flags of every model (gpt's defaults apply where one is not given: see
    /// `gpt_config`).
    #[command(flatten)]
    train: TrainConfig,
    /// The flags of `--model gpt` only.
    #[command(flatten)]
    gpt: GptConfig,
    /// Print only the JSON report (torch_train.py's keys).
    // Listed after --data (display order 19) and before --seeding (20; ties go by name), where
    // it stood before the configurations took their flags.
    #[arg(long, display_order = 20)]
    json: bool,
    /// The flags given on the command line (clap's ids), filled after parsing.
    #[arg(skip)]
    given: Vec<String>,
    /// Data-parallel over MPI: `mpirun -np W lockstep train --distributed --seeding invariant
    /// ...` (a build with --features mpi); the same bits for any W.
    #[arg(long)]
    distributed: bool,
    /// With --distributed: seconds a process waits at an exchange for the others before it
    /// ends the job naming the ranks that did not arrive [default: 300].
    #[arg(long, value_name = "SECS", requires = "distributed")]
    collective_timeout: Option<f64>,
    /// With --distributed: how gradients are summed, `gather` (every process adds every
    /// micro-shard's gradient) or `reduce-scatter` (each adds a slice); the same bits
    /// [default: gather].
    #[arg(
        long,
        value_enum,
        requires = "distributed",
        hide_possible_values = true
    )]
    reduction: Option<Reduction>,
}

fn main() -> ExitCode {
    // Freed memory stays in the process: lockstep::tensor::memory, at the first tensor.
    // A bad LOCKSTEP_ISA is refused up front (the library alone would warn and fall back).
    if let Err(e) = lockstep_cli::doctor::check_isa_env() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let cli = match parse(std::env::args_os()) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Demo(a) => {
            if lockstep_cli::demo::run(&a.config(), a.verify) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Train(a) if a.train.model == Model::Gpt => match gpt_config(&a) {
            Ok(cfg) if a.distributed => match dist_options(&a) {
                Ok(opts) => lockstep_cli::distributed::main_gpt(&cfg, &opts, a.json),
                Err(e) => {
                    eprintln!("error: lockstep train --model gpt --distributed: {e}");
                    ExitCode::from(2)
                }
            },
            Ok(cfg) => lockstep_cli::gpt::main(&cfg, a.json),
            Err(e) => {
                eprintln!("error: lockstep train --model gpt: {e}");
                ExitCode::from(2)
            }
        },
        Command::Train(a) => {
            if let Err(e) = no_gpt_flags(&a) {
                eprintln!("error: lockstep train: {e}");
                return ExitCode::from(2);
            }
            let cfg = &a.train;
            if a.distributed {
                let opts = match dist_options(&a) {
                    Ok(o) => o,
                    Err(e) => {
                        eprintln!("error: lockstep train --distributed: {e}");
                        return ExitCode::from(2);
                    }
                };
                return lockstep_cli::distributed::main(cfg, &opts, a.json);
            }
            lockstep_cli::train::main(cfg, a.json)
        }
        Command::Sweep {
            seeds,
            seed_list,
            jobs,
            out,
            command,
        } => match lockstep_cli::sweep::SweepConfig::new(seeds, seed_list, jobs, out, &command) {
            Ok(cfg) => lockstep_cli::sweep::main(&cfg),
            Err(e) => {
                eprintln!("error: lockstep sweep: {e}");
                ExitCode::from(2)
            }
        },
        Command::Verify {
            threads,
            workers,
            runs,
            cmd,
            json,
            command,
        } => match verify_config(threads, workers, runs, cmd, json, command) {
            Ok(cfg) => lockstep_cli::verify::main(&cfg),
            Err(e) => {
                eprintln!("error: lockstep verify: {e}");
                ExitCode::from(2)
            }
        },
        Command::VerifyTestProgram { custom_op } => {
            match lockstep_cli::verify::test_program(custom_op) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Generate(a) => lockstep_cli::generate::main(&a.config(), a.json),
        Command::Doctor { self_test, json } => {
            if lockstep_cli::doctor::run(self_test, json) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Sample {
            list: true, lib, ..
        } => match lockstep_cli::sample::list(lib.as_deref()) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: lockstep sample --list: {e}");
                ExitCode::from(2)
            }
        },
        Command::Sample {
            lib, func, options, ..
        } => {
            let (lib, func) = (lib.unwrap_or_default(), func.unwrap_or_default());
            // Streamed: the values are never held as a JSON tree.
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match lockstep_cli::sample::run_to(&lib, &func, &options, &mut out) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: lockstep sample {lib} {func}: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// `lockstep verify`'s configuration.
fn verify_config(
    threads: Vec<usize>,
    workers: Vec<usize>,
    runs: Option<usize>,
    cmd: Option<String>,
    json: bool,
    command: Vec<String>,
) -> lockstep::Result<lockstep_cli::verify::VerifyConfig> {
    if cmd.is_none() && command.is_empty() {
        return Err(lockstep::Error::config(
            "give `-- train ARGS…` or --cmd \"PROGRAM ARGS\"",
        ));
    }
    let cfg = lockstep_cli::verify::VerifyConfig {
        threads,
        workers,
        runs,
        train_args: command,
        cmd,
        json,
    };
    cfg.check()?;
    Ok(cfg)
}

/// `--collective-timeout` and `--reduction` of `train --distributed`.
fn dist_options(a: &TrainArgs) -> lockstep::Result<lockstep_cli::distributed::DistOptions> {
    lockstep_cli::distributed::DistOptions::new(a.collective_timeout, a.reduction)
}

/// Every check `lockstep train` makes of its flags before it starts, without training
/// (`train::check_config`; with `--distributed` also the options, `distributed_config` and,
/// in a build without MPI, the refusal).
fn check_train(a: &TrainArgs) -> lockstep::Result<()> {
    if a.train.model == Model::Gpt {
        let cfg = gpt_config(a)?;
        lockstep_cli::gpt::check_config(&cfg)?;
        if !a.distributed {
            return Ok(());
        }
        dist_options(a)?;
        lockstep_cli::distributed::distributed_gpt_config(&cfg)?;
        return if cfg!(feature = "mpi") {
            Ok(())
        } else {
            Err(lockstep::Error::config(
                "built without MPI support: rebuild with --features mpi",
            ))
        };
    }
    no_gpt_flags(a)?;
    let cfg = &a.train;
    if !a.distributed {
        return lockstep_cli::train::check_config(cfg, 1);
    }
    dist_options(a)?;
    let c = lockstep_cli::distributed::distributed_config(cfg)?;
    // `--micro-batch` is on here, so the number of processes changes nothing.
    lockstep_cli::train::check_config(&c, 2)?;
    if cfg!(feature = "mpi") {
        Ok(())
    } else {
        Err(lockstep::Error::config(
            "built without MPI support: rebuild with --features mpi",
        ))
    }
}

/// Parses the command line, recording which `train` flags were given (not defaulted).
fn parse(argv: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command();
    let m = cmd.clone().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&m)?;
    if let (Command::Train(a), Some(("train", tm)), Some(train)) = (
        &mut cli.command,
        m.subcommand(),
        cmd.find_subcommand("train"),
    ) {
        // The derive's argument groups (`TrainArgs`, `TrainConfig`, `GptConfig`) are listed
        // too: arguments only.
        let is_arg = |id: &str| train.get_arguments().any(|x| x.get_id() == id);
        a.given = tm
            .ids()
            .map(|id| id.as_str())
            .filter(|&id| {
                is_arg(id) && tm.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
            })
            .map(str::to_string)
            .collect();
    }
    Ok(cli)
}

/// The flags that only `--model gpt` takes (clap's ids): [`GptConfig`]'s.
fn gpt_only() -> Vec<String> {
    use clap::Args;
    GptConfig::augment_args(clap::Command::new("gpt"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect()
}

/// `--flag` for a clap id.
fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// Refuses gpt-only flags given to mlp, cnn or lstm.
fn no_gpt_flags(a: &TrainArgs) -> lockstep::Result<()> {
    let gpt_only = gpt_only();
    match a.given.iter().find(|g| gpt_only.contains(g)) {
        Some(g) => Err(lockstep::Error::config(format!(
            "{} is a flag of --model gpt only (this run is --model {})",
            flag(g),
            a.train.model
        ))),
        None => Ok(()),
    }
}

/// `--model gpt`'s configuration: torch_gpt.py's defaults, the flags given; flags of the other
/// models, and those gpt does not support yet, refused by name.
fn gpt_config(a: &TrainArgs) -> lockstep::Result<GptConfig> {
    const LATER: &[&str] = &["init_from"];
    // The flags of `TrainConfig` (and the CLI's) that gpt reads too.
    const SHARED: &[&str] = &[
        "model",
        "seed",
        "batch_size",
        "lr",
        "weight_decay",
        "dropout",
        "threads",
        "data",
        "json",
        "seeding",
        "nondeterministic",
        "micro_batch",
        "distributed",
        "collective_timeout",
        "reduction",
        "checkpoint_dir",
        "checkpoint_every",
        "keep",
        "resume",
    ];
    let gpt_only = gpt_only();
    for g in &a.given {
        if LATER.contains(&g.as_str()) {
            return Err(lockstep::Error::config(format!(
                "{} is not yet supported for gpt",
                flag(g)
            )));
        }
        if !SHARED.contains(&g.as_str()) && !gpt_only.contains(g) {
            return Err(lockstep::Error::config(format!(
                "{} is not a flag of --model gpt (it belongs to mlp, cnn and lstm)",
                flag(g)
            )));
        }
    }
    // gpt has its own defaults for these four: `TrainConfig`'s value only when given.
    let given = |id: &str| a.given.iter().any(|g| g == id);
    let (t, g) = (&a.train, &a.gpt);
    Ok(GptConfig {
        seed: if given("seed") { t.seed } else { g.seed },
        batch_size: if given("batch_size") {
            t.batch_size
        } else {
            g.batch_size
        },
        lr: if given("lr") { t.lr } else { g.lr },
        weight_decay: if given("weight_decay") {
            t.weight_decay
        } else {
            g.weight_decay
        },
        dropout: t.dropout,
        threads: t.threads,
        data: t.data.clone(),
        nondeterministic: t.nondeterministic,
        seeding: t.seeding,
        micro_batch: t.micro_batch,
        checkpoint_dir: t.checkpoint_dir.clone(),
        checkpoint_every: t.checkpoint_every,
        keep: t.keep,
        resume: t.resume.clone(),
        ..g.clone()
    })
}

/// Why [`check_args`] refused a command line.
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum ArgsError {
    /// clap's refusal: an unknown flag, a bad value (the message names the flag), or the
    /// `--help`/`--version` text clap prints instead of running.
    Usage(clap::Error),
    /// The subcommand's own check of its flags (a refused setting names its flag).
    Refused(lockstep::Error),
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(e) => write!(f, "{}", e.to_string().trim_end()),
            Self::Refused(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ArgsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Usage(e) => Some(e),
            Self::Refused(e) => Some(e),
        }
    }
}

impl From<clap::Error> for ArgsError {
    fn from(e: clap::Error) -> Self {
        Self::Usage(e)
    }
}

impl From<lockstep::Error> for ArgsError {
    fn from(e: lockstep::Error) -> Self {
        Self::Refused(e)
    }
}

impl From<lockstep_cli::sweep::SweepError> for ArgsError {
    fn from(e: lockstep_cli::sweep::SweepError) -> Self {
        Self::Refused(e.into())
    }
}

impl From<lockstep_cli::sample::SampleError> for ArgsError {
    fn from(e: lockstep_cli::sample::SampleError) -> Self {
        Self::Refused(e.into())
    }
}

impl From<ArgsError> for lockstep::Error {
    /// A usage error as [`lockstep::Error::Config`] with clap's message; a refusal as it is.
    fn from(e: ArgsError) -> Self {
        match e {
            ArgsError::Usage(_) => lockstep::Error::config(e.to_string()),
            ArgsError::Refused(e) => e,
        }
    }
}

/// Parses `argv` (program name first) and checks the flags the way the subcommand does before
/// any work, without running it (`sample` runs into a sink: its draws are capped and cheap).
/// The entry of the CLI fuzz target (`fuzz/`) and its corpus replay
/// (`tests/fuzz_corpus_replay.rs`), which include this file as a module.
#[allow(dead_code)]
pub(crate) fn check_args(argv: &[std::ffi::OsString]) -> Result<(), ArgsError> {
    let cli = parse(argv.iter().cloned())?;
    match cli.command {
        Command::Demo(a) => lockstep_cli::demo::check(&a.config())?,
        Command::Train(a) => check_train(&a)?,
        Command::Sweep {
            seeds,
            seed_list,
            jobs,
            out,
            command,
        } => {
            lockstep_cli::sweep::SweepConfig::new(seeds, seed_list, jobs, out, &command)?;
        }
        Command::Sample {
            list: true, lib, ..
        } => {
            lockstep_cli::sample::list(lib.as_deref())?;
        }
        Command::Sample {
            lib, func, options, ..
        } => {
            lockstep_cli::sample::run_to(
                &lib.unwrap_or_default(),
                &func.unwrap_or_default(),
                &options,
                &mut std::io::sink(),
            )?;
        }
        Command::Verify {
            threads,
            workers,
            runs,
            cmd,
            json,
            command,
        } => {
            verify_config(threads, workers, runs, cmd, json, command)?;
        }
        Command::Generate(a) => lockstep_cli::generate::check_config(&a.config())?,
        Command::VerifyTestProgram { .. } | Command::Doctor { .. } => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn train_args(args: &[&str]) -> TrainArgs {
        let argv = ["lockstep", "train"].iter().chain(args).map(|s| s.into());
        match parse(argv).expect("parses").command {
            Command::Train(a) => *a,
            _ => unreachable!("a train command"),
        }
    }

    fn argv(line: &str) -> Vec<std::ffi::OsString> {
        ["lockstep"]
            .into_iter()
            .chain(line.split(' '))
            .map(Into::into)
            .collect()
    }

    /// `check_args` keeps clap's refusals apart from the subcommands' own; both convert into
    /// `lockstep::Error::Config` naming the flag.
    #[test]
    fn check_args_types_its_refusals() {
        let e = check_args(&argv(
            "train --distributed --seeding invariant --reduction ring",
        ))
        .unwrap_err();
        assert!(
            matches!(&e, ArgsError::Usage(c) if c.kind() == clap::error::ErrorKind::InvalidValue),
            "{e:?}"
        );
        let e = lockstep::Error::from(e);
        assert!(
            matches!(&e, lockstep::Error::Config(m)
                if m.contains("'ring' for '--reduction <")
                    && m.contains("[possible values: gather, reduce-scatter]")),
            "{e}"
        );
        let e = check_args(&argv("train --lr inf")).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Refused(lockstep::Error::Config(_))),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "invalid value inf for --lr: must be finite and >= 0"
        );
        let e = check_args(&argv("sample torch no_such_function")).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Refused(lockstep::Error::Config(_))),
            "{e:?}"
        );
        let e = check_args(&argv("sweep --seeds 2 --jobs 0 -- train")).unwrap_err();
        assert!(matches!(&e, ArgsError::Refused(_)), "{e:?}");
        let e = check_args(&argv("train --help")).unwrap_err();
        assert!(
            matches!(&e, ArgsError::Usage(c) if c.kind() == clap::error::ErrorKind::DisplayHelp),
            "{e:?}"
        );
        check_args(&argv("train --epochs 1")).unwrap();
        // Parsed into the enum, whatever the build then says of MPI.
        let a = train_args(&["--distributed", "--reduction", "reduce-scatter"]);
        assert_eq!(a.reduction, Some(Reduction::ReduceScatter));
    }

    /// The clap defaults are the configurations' `Default`s: one run, however it is built.
    #[test]
    fn parsed_defaults_are_the_configs_defaults() {
        let a = train_args(&[]);
        assert_eq!(a.train, TrainConfig::default());
        assert_eq!(a.gpt, GptConfig::default());
        assert!(a.given.is_empty(), "{:?}", a.given);
        let a = train_args(&["--model", "gpt"]);
        assert_eq!(a.given, ["model"]);
        assert_eq!(gpt_config(&a).unwrap(), GptConfig::default());
    }

    /// gpt takes a shared flag's value when it is given and its own default otherwise;
    /// `--bias` and `--decay-lr` are integers, true unless 0.
    #[test]
    fn gpt_keeps_its_own_defaults_for_shared_flags_not_given() {
        let a = train_args(&[
            "--model",
            "gpt",
            "--seed",
            "0",
            "--lr",
            "0.01",
            "--bias",
            "0",
            "--decay-lr",
            "7",
            "--seeding",
            "invariant",
            "--n-layer",
            "2",
        ]);
        let mut given = a.given.clone();
        given.sort();
        assert_eq!(
            given,
            [
                "bias", "decay_lr", "lr", "model", "n_layer", "seed", "seeding"
            ]
        );
        let c = gpt_config(&a).unwrap();
        let want = GptConfig {
            seed: 0,
            lr: 0.01,
            bias: false,
            decay_lr: true,
            seeding: lockstep_cli::train::Seeding::Invariant,
            n_layer: 2,
            ..GptConfig::default()
        };
        assert_eq!(c, want);
        assert_eq!((c.batch_size, c.weight_decay), (16, 0.1));
        // The other models keep theirs, and refuse gpt's flags by name.
        let a = train_args(&["--n-layer", "2"]);
        let e = no_gpt_flags(&a).unwrap_err().to_string();
        assert_eq!(
            e,
            "--n-layer is a flag of --model gpt only (this run is --model mlp)"
        );
        let a = train_args(&["--model", "gpt", "--hidden", "3"]);
        let e = gpt_config(&a).unwrap_err().to_string();
        assert!(
            e.starts_with("--hidden is not a flag of --model gpt"),
            "{e}"
        );
    }
}
