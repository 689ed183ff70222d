//! The allocator policy lockstep sets for itself: freed memory stays in the process.
//!
//! glibc's malloc serves blocks above its mmap threshold (128 KiB at first) with fresh mappings
//! and trims the heap when 128 KiB lie free at its top, so a training step's activations and
//! temporaries were unmapped when freed and faulted back in (page by page, zeroed by the
//! kernel) on the next step: a fifth of a small cnn's step. PyTorch users get the same
//! effect from jemalloc or tcmalloc. So the first tensor a process makes raises both
//! thresholds (mmap to 32 MiB, trim to 64 MiB): faster steps, and a resident set that stays at
//! its peak instead of shrinking between steps. Values are never affected.
//!
//! Opt out with the environment variable `LOCKSTEP_KEEP_FREED_MEMORY=0` (read once, at the first
//! tensor) or by calling [`set_keep_freed_memory`]`(false)` before the first tensor is made —
//! for a process that shares its heap with code tuned otherwise. Other platforms and C libraries
//! than glibc: nothing is changed.

use std::sync::Mutex;

/// `None`: not decided yet; `Some(applied)`: decided (once per process).
static STATE: Mutex<Option<bool>> = Mutex::new(None);
static DECIDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The environment variable that turns the policy off when set to `0`, `false`, `no` or `off`.
pub const ENV_VAR: &str = "LOCKSTEP_KEEP_FREED_MEMORY";

fn apply() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocator parameters, under glibc's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

/// Whether the variable's value (if set) allows the policy: all but `0`, `false`, `no`, `off`.
fn allows(value: Option<&str>) -> bool {
    value.is_none_or(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    })
}

fn env_allows() -> bool {
    allows(std::env::var(ENV_VAR).ok().as_deref())
}

/// Applies the policy unless it was decided already (called for every new tensor: after the
/// first, one relaxed atomic load).
#[inline]
pub(crate) fn on_first_tensor() {
    if !DECIDED.load(std::sync::atomic::Ordering::Relaxed) {
        decide(None);
    }
}

/// Decides once: `want` (an explicit call) or the environment's choice.
fn decide(want: Option<bool>) -> bool {
    let mut s = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(applied) = *s {
        return applied;
    }
    let on = want.unwrap_or_else(env_allows);
    if on {
        apply();
    }
    *s = Some(on);
    DECIDED.store(true, std::sync::atomic::Ordering::Relaxed);
    on
}

/// Chooses the allocator policy now instead of at the first tensor: `true` keeps freed memory
/// in the process (the default), `false` leaves the C library's settings alone. The choice is
/// made once per process; returns the policy in force, which differs from `keep` when an earlier
/// call or the first tensor decided already (settings once raised are not lowered again). An
/// explicit call overrides the environment variable [`ENV_VAR`].
pub fn set_keep_freed_memory(keep: bool) -> bool {
    decide(Some(keep))
}

/// Whether the policy is in force (deciding it now, from the environment, if no tensor was made
/// yet).
pub fn keeps_freed_memory() -> bool {
    decide(None)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_policy_is_decided_once_and_reported() {
        // Tests share the process: whichever decision came first stays.
        let first = super::keeps_freed_memory();
        assert_eq!(super::set_keep_freed_memory(!first), first);
        assert_eq!(super::keeps_freed_memory(), first);
    }

    #[test]
    fn the_variable_turns_it_off_with_the_usual_words() {
        for off in ["0", "false", "No", " off "] {
            assert!(!super::allows(Some(off)), "{off}");
        }
        for on in [None, Some("1"), Some("yes"), Some("")] {
            assert!(super::allows(on), "{on:?}");
        }
    }
}
