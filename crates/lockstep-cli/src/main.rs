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
    /// Print what a random function of PyTorch, CPython or NumPy draws, as JSON.
    ///
    /// LIB is one of torch, python, numpy-legacy, numpy. Options are --name=value, e.g.
    /// `lockstep sample torch randn --seed=0 --shape=2,3`.
    Sample {
        /// torch | python | numpy-legacy | numpy
        lib: String,
        /// The function, e.g. rand, randn, randint, randperm, shuffle, standard_normal
        #[arg(name = "FN")]
        func: String,
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
        Command::Doctor { self_test, json } => {
            if lockstep_cli::doctor::run(self_test, json) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Sample { lib, func, options } => {
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
