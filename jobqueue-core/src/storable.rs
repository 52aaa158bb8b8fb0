//! What valid JSON PostgreSQL's `jsonb` still refuses, found before the
//! insert so that it is reported as a bad payload (naming what is wrong)
//! instead of a database error: the character U+0000 in a string or key
//! (`\u0000`), numbers outside `numeric`'s range (more than 131,072
//! digits before the decimal point, or more than 16,383 after it), and
//! nesting deep enough to exhaust the server's stack (refused here past
//! [`MAX_DEPTH`] levels, far beyond what a payload needs).
//!
//! One pass over the JSON text, outside strings looking only at numbers;
//! the text is already known to be valid JSON.

use crate::{Error, Result};

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
mod tests {
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
