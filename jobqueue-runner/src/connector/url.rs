//! The database URL as libpq reads it, in either form (a
//! `postgres://` URL or `key=value` pairs): its options split off and put
//! back, and the options the runner adds for those the URL does not set,
//! so that a dead or frozen server is noticed in bounded time.
//!
//! The defaults, for a `RunnerConfig::db_timeout` of T seconds:
//!
//! - `connect_timeout` T (2 to 10 s): per host, so a multi-host URL moves
//!   on from a host that accepts the TCP connection and never answers;
//! - `keepalives_idle=10`, `keepalives_interval=5`, `keepalives_count=3`:
//!   an idle connection to a host that vanished ends in about 25 s;
//! - `tcp_user_timeout` T: a connection whose sent data goes unacknowledged
//!   (a host gone behind a network that drops packets) ends after T.
//!
//! None of these ends a connection to a frozen server process whose host
//! still acknowledges packets: that is `hang_guard`'s work.

use std::time::Duration;

use crate::RunnerError;

/// `url` with the runner's connection defaults for the options it does not
/// set (see the module documentation).
pub(crate) fn with_defaults(url: &str, db_timeout: Duration) -> Result<String, RunnerError> {
    let secs = db_timeout.as_secs_f64();
    let defaults = [
        ("connect_timeout", connect_timeout(db_timeout).to_string()),
        ("keepalives", "1".to_owned()),
        ("keepalives_idle", "10".to_owned()),
        ("keepalives_interval", "5".to_owned()),
        ("keepalives_count", "3".to_owned()),
        (
            "tcp_user_timeout",
            format!("{}", (secs * 1000.0).round() as u64),
        ),
    ];
    with_options(url, &defaults)
}

/// Whole seconds for libpq's `connect_timeout` (which takes at least 2).
fn connect_timeout(db_timeout: Duration) -> u64 {
    db_timeout.as_secs_f64().ceil().clamp(2.0, 10.0) as u64
}

/// `url` (either form) with `defaults` added for the options it does not
/// set; the options it sets are kept as they are.
fn with_options(url: &str, defaults: &[(&str, String)]) -> Result<String, RunnerError> {
    let (head, mut options) = split_options(url)?;
    for (key, value) in defaults {
        if !options.iter().any(|(k, _)| k == key) {
            options.push(((*key).to_owned(), value.clone()));
        }
    }
    Ok(join_options(url, &head, &options))
}

fn is_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Splits `url` into what comes before its options and its options
/// (decoded): the query of a URL, or the pairs of a key=value string.
pub(crate) fn split_options(url: &str) -> Result<(String, Vec<(String, String)>), RunnerError> {
    if is_url(url) {
        let Some((head, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), Vec::new()));
        };
        let options = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key), percent_decode(value))
            })
            .collect();
        return Ok((head.to_owned(), options));
    }
    let mut options = Vec::new();
    let mut chars = url.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(RunnerError::Config(format!(
                "database_url: `{key}` has no value (expected key=value)"
            )));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => {
                        return Err(RunnerError::Config(format!(
                            "database_url: the value of `{key}` has no closing quote"
                        )));
                    }
                }
            }
        } else {
            value.extend(std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())));
        }
        options.push((key, value));
    }
    Ok((String::new(), options))
}

/// Puts `head` and `options` back together in `url`'s form.
pub(crate) fn join_options(url: &str, head: &str, options: &[(String, String)]) -> String {
    if is_url(url) {
        if options.is_empty() {
            return head.to_owned();
        }
        let query: Vec<String> = options
            .iter()
            .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
            .collect();
        format!("{head}?{}", query.join("&"))
    } else {
        options
            .iter()
            .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'.'
            | b'_'
            | b'~'
            | b'/'
            | b','
            | b':' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
