//! The `lockstep` command line, as a library so that its subcommands can be tested in-process.

pub mod demo;
pub mod distributed;
pub mod doctor;
pub mod generate;
pub mod gpt;
pub mod gpt_checkpoint;
pub mod gpt_config;
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
