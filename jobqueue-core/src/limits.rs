//! What the queue accepts: defaults, ranges and name rules, checked in one
//! place before anything reaches the database (the migration's CHECK
//! constraints enforce the same rules).

use crate::{Error, Result};

/// Default priority of a job.
pub const DEFAULT_PRIORITY: i32 = 100;
/// Lowest allowed priority.
pub const MIN_PRIORITY: i32 = 0;
/// Highest allowed priority (higher runs first).
pub const MAX_PRIORITY: i32 = 1000;
/// Default queue name.
pub const DEFAULT_QUEUE: &str = "default";
/// Default number of attempts before a job is `failed`.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 3;
/// Highest allowed `max_attempts`.
pub const MAX_MAX_ATTEMPTS: i32 = 1000;
/// Default limit on a serialized payload: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Longest queue name.
pub const MAX_QUEUE_LEN: usize = 64;
/// Longest job type name.
pub const MAX_JOB_TYPE_LEN: usize = 128;
/// Longest unique key.
pub const MAX_UNIQUE_KEY_LEN: usize = 255;
/// Longest error text kept per failure; longer ones are cut.
pub const MAX_ERROR_LEN: usize = 8 * 1024;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn check_name(field: &'static str, value: &str, max: usize) -> Result<()> {
    let len = value.chars().count();
    if len == 0 || len > max {
        return Err(Error::invalid(
            field,
            format!("{value:?} must be 1 to {max} characters long (it has {len})"),
        ));
    }
    if let Some(bad) = value.chars().find(|c| !is_name_char(*c)) {
        return Err(Error::invalid(
            field,
            format!(
                "{value:?} contains {bad:?}; only A-Z, a-z, 0-9, '_', '.', ':' and '-' are allowed"
            ),
        ));
    }
    Ok(())
}

/// Checks a queue name: 1 to 64 characters of `[A-Za-z0-9_.:-]`.
pub fn check_queue(queue: &str) -> Result<()> {
    check_name("queue", queue, MAX_QUEUE_LEN)
}

/// Checks a job type name: 1 to 128 characters of `[A-Za-z0-9_.:-]`.
pub fn check_job_type(job_type: &str) -> Result<()> {
    check_name("job type", job_type, MAX_JOB_TYPE_LEN)
}

/// Checks a schedule name: as a job type, 1 to 128 characters of
/// `[A-Za-z0-9_.:-]`.
pub fn check_schedule_name(name: &str) -> Result<()> {
    check_name("schedule", name, MAX_JOB_TYPE_LEN)
}

/// Checks a priority: `0..=1000`.
pub fn check_priority(priority: i32) -> Result<()> {
    if (MIN_PRIORITY..=MAX_PRIORITY).contains(&priority) {
        Ok(())
    } else {
        Err(Error::invalid(
            "priority",
            format!(
                "{priority} is out of range ({MIN_PRIORITY} to {MAX_PRIORITY}, higher runs first)"
            ),
        ))
    }
}

/// Checks `max_attempts`: `1..=1000`.
pub fn check_max_attempts(max_attempts: i32) -> Result<()> {
    if (1..=MAX_MAX_ATTEMPTS).contains(&max_attempts) {
        Ok(())
    } else {
        Err(Error::invalid(
            "max_attempts",
            format!("{max_attempts} is out of range (1 to {MAX_MAX_ATTEMPTS})"),
        ))
    }
}

/// Longest concurrency key, in characters.
pub const MAX_CONCURRENCY_KEY_LEN: usize = 255;

/// Checks a concurrency key: 1 to [`MAX_CONCURRENCY_KEY_LEN`] characters,
/// no NUL.
pub fn check_concurrency_key(key: &str) -> Result<()> {
    let len = key.chars().count();
    if len == 0 || len > MAX_CONCURRENCY_KEY_LEN {
        return Err(Error::invalid(
            "key",
            format!(
                "a concurrency key must be 1 to {MAX_CONCURRENCY_KEY_LEN} characters long \
                 (it has {len}); use an id such as `customer:42`, or a hash of a longer name"
            ),
        ));
    }
    if key.contains('\0') {
        return Err(Error::invalid(
            "key",
            "a concurrency key must not contain NUL characters",
        ));
    }
    Ok(())
}

/// Most tags on one job.
pub const MAX_TAGS: usize = 16;
/// Longest tag, in characters.
pub const MAX_TAG_LEN: usize = 64;
/// Largest metadata object, in bytes of JSON.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;

/// Checks a job's tags: at most [`MAX_TAGS`], each 1 to [`MAX_TAG_LEN`]
/// characters of `[A-Za-z0-9_.:=/-]` (`tenant:42`, `import/2026-11`).
pub fn check_tags(tags: &[String]) -> Result<()> {
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(
            "tags",
            format!(
                "{} tags; a job carries at most {MAX_TAGS}: put the rest in its metadata",
                tags.len()
            ),
        ));
    }
    for tag in tags {
        let len = tag.chars().count();
        if len == 0 || len > MAX_TAG_LEN {
            return Err(Error::invalid(
                "tags",
                format!("{tag:?} must be 1 to {MAX_TAG_LEN} characters long (it has {len})"),
            ));
        }
        if let Some(bad) = tag
            .chars()
            .find(|&c| !is_name_char(c) && c != '/' && c != '=')
        {
            return Err(Error::invalid(
                "tags",
                format!(
                    "{tag:?} contains {bad:?}; only A-Z, a-z, 0-9, '_', '.', ':', '=', '/' and \
                     '-' are allowed"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks a job's metadata, as JSON text: at most [`MAX_METADATA_BYTES`].
pub(crate) fn check_metadata(metadata: &str) -> Result<()> {
    if metadata.len() > MAX_METADATA_BYTES {
        return Err(Error::invalid(
            "metadata",
            format!(
                "{} bytes of JSON; a job's metadata holds at most {MAX_METADATA_BYTES}: keep \
                 large values in the payload",
                metadata.len()
            ),
        ));
    }
    crate::storable::check_storable("metadata", metadata)
}

/// Most jobs of one key a queue's key limit may admit at once.
pub const MAX_KEY_LIMIT: i32 = 10_000;

/// Checks a unique key: 1 to 255 characters, no NUL.
pub fn check_unique_key(key: &str) -> Result<()> {
    let len = key.chars().count();
    if len == 0 || len > MAX_UNIQUE_KEY_LEN {
        return Err(Error::invalid(
            "unique_key",
            format!("must be 1 to {MAX_UNIQUE_KEY_LEN} characters long (it has {len})"),
        ));
    }
    if key.contains('\0') {
        return Err(Error::invalid(
            "unique_key",
            "must not contain NUL characters",
        ));
    }
    Ok(())
}

/// Checks the size of a maintenance batch (recovery, moving jobs to
/// pending): 1 to 100,000 rows per statement.
pub(crate) fn check_batch(limit: i64) -> Result<()> {
    if (1..=100_000).contains(&limit) {
        Ok(())
    } else {
        Err(Error::invalid(
            "limit",
            format!("{limit} is out of range (1 to 100000)"),
        ))
    }
}

/// Cuts an error text to [`MAX_ERROR_LEN`] bytes (on a character boundary)
/// and removes NUL characters, which PostgreSQL text cannot hold.
pub fn clip_error(text: &str) -> String {
    let mut end = text.len().min(MAX_ERROR_LEN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut clipped = text[..end].replace('\0', "\u{FFFD}");
    if end < text.len() {
        clipped.push_str(" [truncated]");
    }
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_queue("mail").is_ok());
        assert!(check_queue("a.b:c-d_e").is_ok());
        assert!(check_queue("").is_err());
        assert!(check_queue(&"q".repeat(65)).is_err());
        assert!(check_queue("x'; DROP TABLE t;--").is_err());
        assert!(check_queue("naïve").is_err());
        assert!(check_job_type("email.send").is_ok());
        assert!(check_job_type("email send").is_err());
    }

    #[test]
    fn ranges() {
        assert!(check_priority(0).is_ok());
        assert!(check_priority(1000).is_ok());
        assert!(check_priority(-1).is_err());
        assert!(check_priority(1001).is_err());
        assert!(check_max_attempts(0).is_err());
        assert!(check_max_attempts(1).is_ok());
    }

    #[test]
    fn clip() {
        let long = "é".repeat(MAX_ERROR_LEN);
        let clipped = clip_error(&long);
        assert!(clipped.len() <= MAX_ERROR_LEN + " [truncated]".len());
        assert!(clipped.ends_with("[truncated]"));
        assert_eq!(clip_error("a\0b"), "a\u{FFFD}b");
    }
}
