//! Locks that a panic does not break for everyone after it.
//!
//! A std `Mutex` is poisoned when a thread panics while holding it, and `lock().expect(..)`
//! then panics in every later caller: one bad request would take every group down. A panic
//! inside a core call may leave the group it was changing half-changed; going on with that
//! state affects that group at worst (its members rejoin when it misbehaves), which is what
//! Kafka does after an exception under a group lock. The poison is logged and cleared.

use std::sync::{Mutex, MutexGuard};

use tracing::error;

/// Locks `mutex`, recovering (and logging) a poisoned one.
pub(crate) fn lock<'a, T>(mutex: &'a Mutex<T>, what: &'static str) -> MutexGuard<'a, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => {
            error!(
                lock = what,
                "a request panicked while holding this lock; continuing with the state it left"
            );
            mutex.clear_poison();
            poisoned.into_inner()
        }
    }
}
