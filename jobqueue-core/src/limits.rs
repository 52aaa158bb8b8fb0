//! What the queue accepts: defaults, ranges and name rules, checked in one
//! place before anything reaches the database (the migration's CHECK
//! constraints enforce the same rules); and what valid JSON `jsonb` still
//! refuses (`check_storable`), for payloads, metadata, results and steps.

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
    check_storable("metadata", metadata)
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

// What valid JSON PostgreSQL's `jsonb` still refuses, found before the
// insert so that it is reported as a bad payload (naming what is wrong)
// instead of a database error: the character U+0000 in a string or key
// (`\u0000`), numbers outside `numeric`'s range (more than 131,072
// digits before the decimal point, or more than 16,383 after it), and
// nesting deep enough to exhaust the server's stack (refused here past
// [`MAX_DEPTH`] levels, far beyond what a payload needs).
//
// One pass over the JSON text, outside strings looking only at numbers;
// the text is already known to be valid JSON.

/// Most digits `numeric` holds before the decimal point.
const MAX_INTEGER_DIGITS: i64 = 131_072;
/// Most digits `numeric` holds after the decimal point.
const MAX_SCALE: i64 = 16_383;

/// Most levels of arrays and objects a payload may nest (the server's
/// stack, at its default size, gives out between 10,000 and 20,000).
pub(crate) const MAX_DEPTH: usize = 1000;

/// Refuses valid JSON text that `jsonb` would not store.
pub(crate) fn check_storable(field: &'static str, json: &str) -> Result<()> {
    let bytes = json.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = string_end(field, bytes, i + 1)?,
            b'-' | b'0'..=b'9' => i = number_end(field, json, i)?,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "it nests arrays and objects more than {MAX_DEPTH} levels deep: \
                             flatten it"
                        ),
                    ));
                }
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// The index just past the string whose body starts at `i`; refuses a
/// `\u0000` escape.
fn string_end(field: &'static str, bytes: &[u8], mut i: usize) -> Result<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Ok(i + 1),
            b'\\' => {
                if bytes[i + 1..].starts_with(b"u0000") {
                    return Err(Error::invalid(
                        field,
                        "a string holds the character U+0000 (\\u0000), which PostgreSQL's \
                         jsonb cannot store: remove it, or encode binary data (base64)",
                    ));
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    Ok(i)
}

/// The index just past the number starting at `start`; refuses one out of
/// `numeric`'s range.
fn number_end(field: &'static str, json: &str, start: usize) -> Result<usize> {
    let bytes = json.as_bytes();
    let digits_from = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = start + usize::from(bytes[start] == b'-');
    let int_start = i;
    i = digits_from(i);
    let integer = &json[int_start..i];
    let mut fraction = "";
    if bytes.get(i) == Some(&b'.') {
        let frac_start = i + 1;
        i = digits_from(frac_start);
        fraction = &json[frac_start..i];
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let negative = bytes.get(i) == Some(&b'-');
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        i = digits_from(i);
        // Saturates: any exponent past i64 is far out of range anyway.
        let magnitude = json[exp_start..i].bytes().fold(0i64, |n, d| {
            n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
        exponent = if negative { -magnitude } else { magnitude };
    }
    let significant = integer.trim_start_matches('0');
    let integer_digits = if significant.is_empty() {
        0
    } else {
        (significant.len() as i64).saturating_add(exponent)
    };
    let scale = (fraction.len() as i64).saturating_sub(exponent);
    // A zero has no integer digits; its scale counts all the same.
    if integer_digits > MAX_INTEGER_DIGITS || scale > MAX_SCALE {
        let shown: String = json[start..i].chars().take(40).collect();
        return Err(Error::invalid(
            field,
            format!(
                "the number {shown} is out of the range PostgreSQL's jsonb stores (at most \
                 {MAX_INTEGER_DIGITS} digits before the decimal point and {MAX_SCALE} after): \
                 send it as a string"
            ),
        ));
    }
    Ok(i)
}

#[cfg(test)]
mod storable_tests {
    use super::check_storable;

    #[test]
    fn what_jsonb_stores_passes() {
        for json in [
            r#"{"a":1,"b":-2.5e10,"c":"x\\u0000 is text","d":[0e999999,1e131071]}"#,
            r#"{"n":1e-16383,"m":123e-16380,"s":"1e999999"}"#,
            r#"["\u0001", "\"\\", 0.000]"#,
            &format!("{}{}", "[".repeat(1000), "]".repeat(1000)),
        ] {
            check_storable("payload", json).unwrap_or_else(|e| panic!("{json}: {e}"));
        }
    }

    #[test]
    fn what_jsonb_refuses_is_named() {
        let deep = format!("{}{}", "[".repeat(1001), "]".repeat(1001));
        for (json, says) in [
            (r#"{"to":"a\u0000b"}"#, "U+0000"),
            (r#"{"a\u0000":1}"#, "U+0000"),
            (r#"{"n":1e999999}"#, "1e999999 is out of the range"),
            (r#"{"n":1e131072}"#, "out of the range"),
            (r#"{"n":1e-16384}"#, "out of the range"),
            (r#"{"n":0e-99999}"#, "out of the range"),
            (r#"{"n":0.5e-16383}"#, "out of the range"),
            (r#"[1.5E+999999999999999999999999]"#, "out of the range"),
            (deep.as_str(), "1000 levels"),
        ] {
            let err = check_storable("payload", json).expect_err(json).to_string();
            assert!(err.contains(says), "{json}: {err}");
        }
    }
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
