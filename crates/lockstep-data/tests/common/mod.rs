//! Shared test helpers.
#![allow(dead_code)]

use lockstep_data::{Dataset, Result, SampleRng};
use std::sync::{Mutex, MutexGuard};

/// Tests that touch the process-wide default generator run one at a time.
pub fn global_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `range(n)`: sample `i` is `i as i64`.
pub struct Range(pub usize);

impl Dataset for Range {
    type Item = i64;
    fn len(&self) -> usize {
        self.0
    }
    fn get(&self, index: usize, _rng: &mut SampleRng<'_>) -> Result<i64> {
        Ok(index as i64)
    }
}
