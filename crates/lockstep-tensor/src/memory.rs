//! The allocator policy lockstep sets for itself: freed memory stays in the process, and the
//! heap is backed by huge pages.
//!
//! glibc's malloc serves blocks above its mmap threshold (128 KiB at first) with fresh mappings
//! and trims the heap when 128 KiB lie free at its top, so a training step's activations and
//! temporaries were unmapped when freed and faulted back in (page by page, zeroed by the
//! kernel) on the next step: a fifth of a small cnn's step. PyTorch users get the same
//! effect from jemalloc or tcmalloc. So the first tensor a process makes raises both
//! thresholds (mmap to 32 MiB, trim to 64 MiB): faster steps, and a resident set that stays at
//! its peak instead of shrinking between steps. Values are never affected.
//!
//! **Huge pages.** A step that streams tens of MiB of activations through the cache crosses a
//! 4 KiB page every 64 lines, each a TLB miss and a stop for the hardware prefetcher. With the
//! policy in force the heap grows in 64 MiB steps (glibc's `M_TOP_PAD`) and each new stretch of
//! it is advised for transparent huge pages (`madvise(MADV_HUGEPAGE)`, what glibc's
//! `glibc.malloc.hugetlb=1` tunable does) when the next tensor is made, before tensors touch
//! it: the gpt training step at one thread ran 5 % faster (BENCHMARKS.md). This covers the heap
//! of the main thread (the program break), where a program's tensors are made; blocks that
//! other threads allocate come from glibc's per-thread arenas and keep 4 KiB pages. Whether
//! the kernel then uses huge pages is the system's setting
//! (`/sys/kernel/mm/transparent_hugepage/enabled`: `always` or `madvise`; `never` turns it off).
//! The resident set grows by up to 2 MiB at a time. Values are never affected.
//!
//! Opt out with the environment variable `LOCKSTEP_KEEP_FREED_MEMORY=0` (read once, at the first
//! tensor) or by calling [`set_keep_freed_memory`]`(false)` before the first tensor is made —
//! for a process that shares its heap with code tuned otherwise; `LOCKSTEP_HUGE_PAGES=0` keeps
//! the rest of the policy without the huge pages (and turns off the same advice that some ops
//! give their output buffers of 4 MiB and more, `ops::reduce::zeroed_vec`). Other platforms and C libraries than glibc:
//! nothing is changed.

use std::sync::Mutex;

/// `None`: not decided yet; `Some(applied)`: decided (once per process).
static STATE: Mutex<Option<bool>> = Mutex::new(None);
static DECIDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The environment variable that turns the policy off when set to `0`, `false`, `no` or `off`.
pub const ENV_VAR: &str = "LOCKSTEP_KEEP_FREED_MEMORY";

/// The environment variable that turns the huge pages alone off (same words as [`ENV_VAR`]).
pub const HUGE_PAGES_ENV_VAR: &str = "LOCKSTEP_HUGE_PAGES";

fn apply(huge: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocator parameters, under glibc's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        if huge {
            libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            huge_heap::start();
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = huge;
}

/// The program break's growth advised for transparent huge pages as it happens.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod huge_heap {
    use core::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// The end of the heap seen (and advised up to) so far, page-aligned; 0 until started.
    static END: AtomicUsize = AtomicUsize::new(0);
    static ADVISING: Mutex<()> = Mutex::new(());

    /// The program break rounded down to a page, or `None` if `sbrk` reports an error.
    fn brk() -> Option<usize> {
        // SAFETY: `sbrk(0)` only reads the current program break; `sysconf` only reads.
        let (b, page) = unsafe { (libc::sbrk(0), libc::sysconf(libc::_SC_PAGESIZE)) };
        let page = usize::try_from(page).ok().filter(|&p| p > 0)?;
        (b as isize != -1).then(|| b as usize / page * page)
    }

    /// From now on, heap beyond the current break is advised once it appears.
    pub(super) fn start() {
        END.store(brk().unwrap_or(0), Ordering::Relaxed);
    }

    /// Advises the heap grown since the last call (none: one load and `sbrk(0)`). Called as
    /// each tensor is made: the block whose allocation grew the heap is already written by
    /// then (its pages stay 4 KiB), the rest of the 64 MiB step not yet. Speed only: a stretch
    /// trimmed and regrown between two tensors, or a call that finds another thread advising
    /// (it skips rather than waits: no lock held across a `fork`), stays on 4 KiB pages or is
    /// advised by a later call.
    #[inline]
    pub(super) fn advise_growth() {
        let seen = END.load(Ordering::Relaxed);
        if seen == 0 || brk() == Some(seen) {
            return;
        }
        let Ok(_one) = ADVISING.try_lock() else {
            return;
        };
        let (seen, Some(end)) = (END.load(Ordering::Relaxed), brk()) else {
            return;
        };
        // `seen..end` is heap inside the program break.
        super::advise_hugepages(seen, end);
        // A heap trimmed below what was seen: its next growth is new memory, advised again.
        END.store(end, Ordering::Relaxed);
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

fn env_allows(var: &str) -> bool {
    allows(std::env::var(var).ok().as_deref())
}

/// Applies the policy unless it was decided already, then advises heap grown since the last
/// tensor (called for every new tensor: after the first, two relaxed atomic loads and
/// `sbrk(0)`).
#[inline]
pub(crate) fn on_first_tensor() {
    if !DECIDED.load(std::sync::atomic::Ordering::Relaxed) {
        decide(None);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    huge_heap::advise_growth();
}

/// Decides once: `want` (an explicit call) or the environment's choice.
fn decide(want: Option<bool>) -> bool {
    let mut s = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(applied) = *s {
        return applied;
    }
    let on = want.unwrap_or_else(|| env_allows(ENV_VAR));
    if on {
        apply(huge_pages_allowed());
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

/// Whether `LOCKSTEP_HUGE_PAGES` allows huge-page advice (read once): the heap's here, and
/// the large output buffers' of some ops (`ops::reduce::zeroed_vec`).
pub(crate) fn huge_pages_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| env_allows(HUGE_PAGES_ENV_VAR))
}

/// Whether the heap's growth is advised for huge pages (the policy in force,
/// `LOCKSTEP_HUGE_PAGES` not `0`, on Linux with glibc); decides the policy now if no tensor was
/// made yet. The advice, not its outcome: the kernel follows it in the `madvise` and `always`
/// modes ([`transparent_hugepage_mode`]) unless huge pages are off for the process.
pub fn huge_pages() -> bool {
    decide(None) && huge_pages_allowed() && cfg!(all(target_os = "linux", target_env = "gnu"))
}

/// Advises the pages `start..end` (page-aligned, inside memory this process owns) as
/// transparent-huge-page candidates: advice only, never a change of contents; a failure (a
/// kernel without transparent huge pages) leaves 4 KiB pages. Linux only; elsewhere nothing.
pub(crate) fn advise_hugepages(start: usize, end: usize) {
    #[cfg(target_os = "linux")]
    if end > start {
        const MADV_HUGEPAGE: i32 = 14;
        unsafe extern "C" {
            fn madvise(addr: *mut core::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        // SAFETY: the caller's range is mapped memory of this process (or heap being grown, a
        // range `madvise` skips with ENOMEM where unmapped); the advice changes no contents.
        unsafe { madvise(start as *mut core::ffi::c_void, end - start, MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, end);
}

/// The system's transparent huge page mode, which decides whether the advice is honoured: the
/// selected word of `/sys/kernel/mm/transparent_hugepage/enabled` (`always`, `madvise` or
/// `never`), or `None` where the kernel has no such setting.
pub fn transparent_hugepage_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    selected_word(&s).map(str::to_string)
}

/// Whether transparent huge pages are on for this process (`THP_enabled` in
/// `/proc/self/status`: `prctl(PR_SET_THP_DISABLE)`, which some container runtimes set, turns
/// them off whatever the system mode), or `None` where the kernel does not say.
pub fn transparent_hugepage_for_process() -> Option<bool> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let v = s.lines().find_map(|l| l.strip_prefix("THP_enabled:"))?;
    Some(v.trim() != "0")
}

/// The bracketed word of a sysfs choice list (`always [madvise] never` → `madvise`).
fn selected_word(s: &str) -> Option<&str> {
    let (_, rest) = s.split_once('[')?;
    rest.split_once(']').map(|(w, _)| w)
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
    fn the_selected_mode_is_the_bracketed_word() {
        assert_eq!(
            super::selected_word("always [madvise] never\n"),
            Some("madvise")
        );
        assert_eq!(
            super::selected_word("[always] madvise never"),
            Some("always")
        );
        assert_eq!(super::selected_word("always madvise never"), None);
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
