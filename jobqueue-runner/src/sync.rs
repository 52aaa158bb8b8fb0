//! Locking shared data that stays consistent whatever a holder did.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every critical section in the runner is a plain map, set or option
/// update).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
