//! The `lockstep` command line, as a library so that its subcommands can be tested in-process.
//!
//! Every fallible function returns [`lockstep::Result`]: a refused flag is
//! [`lockstep::Error::Config`] (the message names the flag), a checkpoint that cannot be used is
//! [`lockstep::Error::Checkpoint`] with its kind ([`lockstep::checkpoint::CheckpointError`]).
//! (`sample` keeps its own `SampleError`, which converts into `lockstep::Error::Config`;
//! `verify` and `sweep`, which run child processes, have [`verify::VerifyError`] and
//! [`sweep::SweepError`]: a refused flag or their own I/O as the `lockstep::Error` it is, a
//! child's failure with its setting or seed, its status and its stderr; each converts into
//! `lockstep::Error`.)
//!
//! Modules import one another in one direction only: [`names`] (the named choices of
//! `lockstep train`, clap's value enums) and [`shards`] (the micro-shard exchange) depend on no
//! other module; [`gpt_config`] on `names`; [`train`] on `names` and `shards`; [`gpt_checkpoint`]
//! on `train` and `gpt_config`; [`gpt`] on all of these; [`distributed`] (MPI and
//! `--distributed`), [`generate`] and [`demo`] on those.

pub mod demo;
pub mod distributed;
pub mod doctor;
pub mod generate;
pub mod gpt;
pub mod gpt_checkpoint;
pub mod gpt_config;
pub mod names;
pub mod sample;
pub mod shards;
pub mod sweep;
pub mod train;
pub mod verify;

/// Keeps freed memory in the process instead of returning it to the OS after every step.
///
/// The tensor library now does this by itself at the first tensor a process makes
/// ([`lockstep::tensor::memory`]: glibc's mmap threshold raised to 32 MiB, trim threshold to
/// 64 MiB; opt-out `LOCKSTEP_KEEP_FREED_MEMORY=0`), so a library user need not call this. It
/// remains as the explicit form: it applies the policy now, overriding the environment variable.
/// Values are unaffected. Does nothing on other platforms.
#[deprecated(
    note = "lockstep::tensor applies this policy at the first tensor; see lockstep::tensor::memory"
)]
pub fn keep_freed_memory() {
    lockstep::tensor::memory::set_keep_freed_memory(true);
}
