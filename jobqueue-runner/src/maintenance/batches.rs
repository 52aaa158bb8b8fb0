//! Work done a batch at a time, until a batch comes back short.

/// Runs `batch` (one statement moving `most` jobs at the most, returning
/// how many it moved) until one moves fewer; returns how many moved in
/// all. The first error ends it.
pub(super) fn until_short(
    most: i64,
    mut batch: impl FnMut() -> jobqueue_core::Result<i64>,
) -> jobqueue_core::Result<i64> {
    let mut moved = 0;
    loop {
        let n = batch()?;
        moved += n;
        if n < most {
            return Ok(moved);
        }
    }
}
