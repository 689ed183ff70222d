//! The allocator policy's huge pages (`lockstep_tensor::memory`): a large tensor made on the main
//! thread lies in heap advised for transparent huge pages (`hg` among its mapping's flags in
//! `/proc/self/smaps`), and with `LOCKSTEP_HUGE_PAGES=0` it does not. Runs without the test
//! harness, whose tests run on threads of their own (glibc's per-thread arenas, not covered);
//! the opted-out case in a child process, since the policy is decided once per process.

use lockstep_tensor::{DType, Tensor, memory};

/// Set in the child process that checks the opt-out.
const CHILD: &str = "LOCKSTEP_HUGE_PAGES_TEST_CHILD";

/// The `VmFlags` of the mapping holding `addr`, from `/proc/self/smaps`.
fn vm_flags(addr: usize) -> Option<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = head.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            inside = (lo..hi).contains(&addr);
        } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
            return Some(flags.trim().to_string());
        }
    }
    None
}

/// Whether the mapping of every 16 MiB tensor made (the first grows the heap, the second lies
/// in the stretch advised ahead of it) says `hg`; each tensor's values are checked too.
/// `None` where `/proc/self/smaps` does not say (a restricted `/proc`).
fn tensors_advised() -> Option<bool> {
    let n = 4 << 20;
    let first = Tensor::ones(&[n], DType::F32).unwrap();
    let second = Tensor::full(&[n], 2.0, DType::F32).unwrap();
    let mut advised = true;
    for (t, v) in [(&first, 1.0f32), (&second, 2.0)] {
        let data = t.data::<f32>().unwrap();
        assert!(data.iter().all(|&x| x == v));
        let flags = vm_flags(data.as_ptr() as usize + data.len() * 2)?;
        advised &= flags.split_whitespace().any(|f| f == "hg");
    }
    Some(advised)
}

fn skip(why: &str) {
    println!("huge_pages: skipped ({why})");
}

fn main() {
    if !cfg!(all(target_os = "linux", target_env = "gnu"))
        || memory::transparent_hugepage_mode().is_none()
        || std::env::var_os(memory::ENV_VAR).is_some()
        || memory::transparent_hugepage_for_process() == Some(false)
    {
        return skip("needs Linux, glibc, transparent huge pages, the default policy");
    }
    if std::env::var_os(CHILD).is_some() {
        assert!(!memory::huge_pages());
        assert_ne!(
            tensors_advised(),
            Some(true),
            "advised with LOCKSTEP_HUGE_PAGES=0"
        );
        return;
    }
    if std::env::var_os(memory::HUGE_PAGES_ENV_VAR).is_some() {
        println!(
            "huge_pages: skipped ({} is set)",
            memory::HUGE_PAGES_ENV_VAR
        );
        return;
    }
    assert!(memory::huge_pages());
    match tensors_advised() {
        None => return skip("/proc/self/smaps gives no VmFlags"),
        Some(advised) => assert!(advised, "a 16 MiB tensor's heap was not advised"),
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "1")
        .env(memory::HUGE_PAGES_ENV_VAR, "0")
        .status()
        .unwrap();
    assert!(child.success(), "the opted-out child failed: {child}");
    println!("huge_pages: ok");
}
