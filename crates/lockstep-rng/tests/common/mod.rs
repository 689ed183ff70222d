//! Shared by the test files that force an instruction set.
#![allow(dead_code)]

/// `set_isa` is process-wide: the tests of a binary that force an instruction set and its
/// other tests take turns (each test holds this guard), so that no test silently runs on
/// another path than the one it means to check.
pub fn isa_turn() -> std::sync::MutexGuard<'static, ()> {
    static ISA: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ISA.lock().unwrap_or_else(|e| e.into_inner())
}
