//! Locks on process-wide generators that cannot deadlock their own thread.
//!
//! A `std::sync::Mutex` locked twice by one thread deadlocks (or panics, at the standard
//! library's choice). Holding [`default_generator`](crate::default_generator)'s guard — as its
//! docs suggest for multi-draw operations — and then calling something that draws from the
//! default generator itself (`Tensor::randn(.., None)`) did exactly that: the program hung.
//! [`GlobalGuard`] records which process-wide generators the current thread holds, so a second
//! lock from the same thread is an error ([`lock_global`]) or a panic with a message that says
//! what to do — never a hang. Other threads still wait for the lock as usual.

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

thread_local! {
    /// Addresses of the global mutexes this thread holds.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A locked process-wide generator (dereferences to it). Dropping it unlocks.
pub struct GlobalGuard<T: 'static> {
    guard: MutexGuard<'static, T>,
    key: usize,
}

impl<T> Deref for GlobalGuard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for GlobalGuard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

impl<T> Drop for GlobalGuard<T> {
    fn drop(&mut self) {
        let key = self.key;
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&k| k == key) {
                h.remove(i);
            }
        });
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for GlobalGuard<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

/// Locks the process-wide `m` (named `name` in errors) for this thread.
///
/// # Errors
/// [`Error::InvalidArgument`] if this thread already holds it: waiting would never end.
pub fn lock_global<T>(m: &'static Mutex<T>, name: &'static str) -> Result<GlobalGuard<T>> {
    let key = m as *const Mutex<T> as usize;
    if HELD.with(|h| h.borrow().contains(&key)) {
        return Err(Error::InvalidArgument {
            op: name,
            arg: "lock",
            reason: format!(
                "this thread already holds {name}()'s guard, so locking it again would wait \
                 forever: drop the guard first, or pass the generator explicitly instead of \
                 drawing from the global one"
            ),
        });
    }
    // A panic while the lock was held cannot leave a generator in a memory-unsafe state.
    let guard = m.lock().unwrap_or_else(|e| e.into_inner());
    HELD.with(|h| h.borrow_mut().push(key));
    Ok(GlobalGuard { guard, key })
}

/// [`lock_global`] for APIs that return the guard itself: a second lock from the same thread
/// panics with the error's message instead of deadlocking.
pub fn lock_global_or_panic<T>(m: &'static Mutex<T>, name: &'static str) -> GlobalGuard<T> {
    match lock_global(m, name) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    }
}
