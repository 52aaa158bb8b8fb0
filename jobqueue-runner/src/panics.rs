//! What a caught panic said, for the threads that catch one (a worker's
//! attempt, a claim connection, a lifecycle handler).

/// What a caught panic said: its message, if it was a string.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}
