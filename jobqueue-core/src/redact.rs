//! Database URLs with their passwords hidden, for `Debug` output, logs and
//! messages.

/// What a hidden password is shown as.
const HIDDEN: &str = "***";

/// `url` with every password in it replaced by `***`, for printing.
///
/// Covers both forms libpq accepts: a URI (`postgres://user:secret@host/db`,
/// and a `password=` query parameter) and a key/value string
/// (`host=db password=secret`, quoted values included). Anything else is
/// returned as it is.
///
/// ```
/// use jobqueue_core::redact_url;
/// assert_eq!(
///     redact_url("postgres://app:s3cret@db:5432/app?sslmode=require"),
///     "postgres://app:***@db:5432/app?sslmode=require"
/// );
/// assert_eq!(redact_url("host=db password='a b' user=app"), "host=db password=*** user=app");
/// ```
pub fn redact_url(url: &str) -> String {
    match url
        .strip_prefix("postgresql://")
        .map(|rest| ("postgresql://", rest))
        .or_else(|| {
            url.strip_prefix("postgres://")
                .map(|rest| ("postgres://", rest))
        }) {
        Some((scheme, rest)) => format!("{scheme}{}", redact_uri_rest(rest)),
        None => redact_key_values(url),
    }
}

/// The part of a URI after its scheme: the user information's password
/// (up to the first `@`, if that comes before the first `/`, as libpq reads
/// it) and any `password` query parameter.
fn redact_uri_rest(rest: &str) -> String {
    let mut out = String::with_capacity(rest.len());
    let mut tail = rest;
    let at = rest.find('@');
    let slash = rest.find('/');
    if let Some(at) = at.filter(|at| slash.is_none_or(|slash| *at < slash)) {
        let userinfo = &rest[..at];
        match userinfo.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push(':');
                out.push_str(HIDDEN);
            }
            None => out.push_str(userinfo),
        }
        out.push('@');
        tail = &rest[at + 1..];
    }
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key == "password" => format!("{key}={HIDDEN}"),
                    _ => param.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

/// A key/value connection string with the value of `password` hidden.
fn redact_key_values(conninfo: &str) -> String {
    let mut out = String::with_capacity(conninfo.len());
    let mut chars = conninfo.char_indices().peekable();
    // The last word before an `=` (spaces may stand between them).
    let mut key = String::new();
    let mut after_space = false;
    while let Some((_, c)) = chars.next() {
        if c != '=' {
            if c.is_whitespace() {
                after_space = true;
            } else {
                if after_space {
                    key.clear();
                    after_space = false;
                }
                key.push(c);
            }
            out.push(c);
            continue;
        }
        after_space = false;
        out.push('=');
        let secret = key == "password";
        key.clear();
        // Spaces may stand around `=`.
        while let Some((_, ' ')) = chars.peek() {
            chars.next();
            out.push(' ');
        }
        let quoted = matches!(chars.peek(), Some((_, '\'')));
        let mut value = String::new();
        if quoted {
            value.push('\'');
            chars.next();
            while let Some((_, c)) = chars.next() {
                value.push(c);
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '\'' => break,
                    _ => {}
                }
            }
        } else {
            while let Some((_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(*c);
                chars.next();
            }
        }
        out.push_str(if secret { HIDDEN } else { &value });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_hidden_in_every_form() {
        for (url, shown) in [
            ("postgres://app:s3cret@db/app", "postgres://app:***@db/app"),
            (
                "postgresql://app:p%40ss@h1:5432,h2:5433/app?target_session_attrs=read-write",
                "postgresql://app:***@h1:5432,h2:5433/app?target_session_attrs=read-write",
            ),
            (
                "postgres://app@db/app?password=s3cret&sslmode=require",
                "postgres://app@db/app?password=***&sslmode=require",
            ),
            ("postgres://db/app", "postgres://db/app"),
            ("postgres://app@db/a@b", "postgres://app@db/a@b"),
            (
                "host=db password=s3cret user=app",
                "host=db password=*** user=app",
            ),
            (
                "host=db password = 'it\\'s a secret' dbname=x",
                "host=db password = *** dbname=x",
            ),
            ("host=db user=app", "host=db user=app"),
            ("", ""),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
            assert!(!redact_url(url).contains("s3cret"));
        }
    }
}
