//! The `lockstep` command line, as a library so that its subcommands can be tested in-process.

pub mod demo;
pub mod distributed;
pub mod doctor;
pub mod generate;
pub mod gpt;
pub mod gpt_checkpoint;
pub mod sample;
pub mod sweep;
pub mod train;
pub mod verify;

/// Keeps freed memory in the process instead of returning it to the OS after every step.
///
/// glibc's malloc serves blocks above its mmap threshold with fresh mappings and trims the heap
/// when 128 KiB lie free at its top, so a training step's 100–300 KiB activations were unmapped
/// and faulted back in on every step (about a fifth of a cnn step). This raises both thresholds
/// (mmap to 32 MiB, trim to 64 MiB), as PyTorch users get from jemalloc or tcmalloc: faster
/// steps, a resident set that stays at its peak. Values are unaffected. Called first by the
/// `lockstep` binary; a library user may call it at the start of `main`. Does nothing on other
/// platforms.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocator parameters; it is called before other
    // threads allocate (and is thread-safe in glibc anyway).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}
