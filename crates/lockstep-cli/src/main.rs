//! The `lockstep` binary.

use clap::{Parser, Subcommand};
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
    /// Train a small network on the embedded digits data set, reproducibly.
    ///
    /// Every printed number (losses, accuracies, the weights' fingerprint) is identical on
    /// every run, at any thread count and number of loader workers; --verify trains twice
    /// (1 thread and 0 workers, then all threads and 2 workers) and compares.
    Demo {
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
        /// Train twice with different thread and worker counts and compare bit for bit.
        #[arg(long)]
        verify: bool,
    },
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
    /// Report what on this machine can break reproducibility.
    Doctor {
        /// Also run every deterministic kernel at 1, 2, 3 and all threads and compare bits.
        #[arg(long)]
        self_test: bool,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo {
            seed,
            epochs,
            batch_size,
            hidden,
            lr,
            threads,
            workers,
            verify,
        } => {
            let cfg = lockstep_cli::demo::DemoConfig {
                seed,
                epochs,
                batch_size,
                hidden,
                lr,
                threads,
                workers,
            };
            if lockstep_cli::demo::run(&cfg, verify) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
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
            match lockstep_cli::sample::run(&lib, &func, &options) {
                Ok(v) => {
                    println!("{v}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: lockstep sample {lib} {func}: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
