//! Database URLs as the project's tools take them: an empty one is refused
//! (libpq would read it as "the defaults": the local socket, a database
//! named after the OS user), and one without a `connect_timeout` gets a
//! default, so a server that accepts TCP and never answers gives an error
//! instead of a silent hang. A `connect_timeout` the URL sets is kept.

use std::time::Duration;

use crate::{Error, Result};

/// The connect timeout the project's tools add to a URL that sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `url` ready to connect with: refused when empty (or only blanks), and
/// with `connect_timeout` set to `timeout` (whole seconds, at least one)
/// unless the URL sets its own.
///
/// Both forms libpq accepts are handled: a URI (`postgres://…`, where the
/// timeout is a query parameter) and a key/value string (`host=db
/// user=app`).
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::engine::connectable_url;
///
/// let t = Duration::from_secs(5);
/// assert_eq!(connectable_url("postgres://db/app", t)?, "postgres://db/app?connect_timeout=5");
/// assert_eq!(
///     connectable_url("postgres://db/app?sslmode=require", t)?,
///     "postgres://db/app?sslmode=require&connect_timeout=5"
/// );
/// assert_eq!(
///     connectable_url("host=db connect_timeout=2", t)?,
///     "host='db' connect_timeout='2'"
/// );
/// assert!(connectable_url("  ", t).is_err());
/// # Ok::<(), jobqueue_core::Error>(())
/// ```
pub fn connectable_url(url: &str, timeout: Duration) -> Result<String> {
    if url.trim().is_empty() {
        return Err(Error::invalid(
            "database_url",
            "the database URL is empty: set DATABASE_URL or --database-url to a \
             postgres://user@host/database URL (an empty one would make libpq guess \
             the database)",
        ));
    }
    let secs = timeout.as_secs().max(1);
    with_default_options(url, &[("connect_timeout", secs.to_string())])
}

/// `url` (either form) with `defaults` added for the options it does not
/// set; the options it sets are kept as they are.
pub fn with_default_options(url: &str, defaults: &[(&str, String)]) -> Result<String> {
    let (head, mut options) = split_options(url)?;
    for (key, value) in defaults {
        if !options.iter().any(|(k, _)| k == key) {
            options.push(((*key).to_owned(), value.clone()));
        }
    }
    Ok(join_options(url, &head, &options))
}

/// `url` (either form) naming `database` instead of the database it names:
/// a URI's path (and its `dbname` parameter, which libpq would read over
/// the path), a key/value string's `dbname`; every other part kept.
///
/// ```
/// use jobqueue_core::engine::with_database;
///
/// assert_eq!(
///     with_database("postgres://u:p@db:5433/app?sslmode=require", "test_1")?,
///     "postgres://u:p@db:5433/test_1?sslmode=require"
/// );
/// assert_eq!(with_database("postgresql://db", "test_1")?, "postgresql://db/test_1");
/// assert_eq!(
///     with_database("host=db dbname=app", "test_1")?,
///     "host='db' dbname='test_1'"
/// );
/// # Ok::<(), jobqueue_core::Error>(())
/// ```
pub fn with_database(url: &str, database: &str) -> Result<String> {
    let (head, mut options) = split_options(url)?;
    let named_in_options = options.iter().any(|(key, _)| key == "dbname");
    for (key, value) in &mut options {
        if key == "dbname" {
            *value = database.to_owned();
        }
    }
    if !is_uri(url) {
        if !named_in_options {
            options.push(("dbname".to_owned(), database.to_owned()));
        }
        return Ok(join_options(url, &head, &options));
    }
    let authority_start = head.find("://").map_or(0, |i| i + 3);
    let base = head[authority_start..]
        .find('/')
        .map_or(head.as_str(), |slash| &head[..authority_start + slash]);
    let path = percent_encoding::utf8_percent_encode(database, PATH_SEGMENT);
    Ok(join_options(url, &format!("{base}/{path}"), &options))
}

fn is_uri(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Splits `url` into what comes before its options and its options
/// (decoded): the query of a URI, or the pairs of a key/value string
/// (`host=db password='a b'`, quotes and backslash escapes as libpq reads
/// them).
pub fn split_options(url: &str) -> Result<(String, Vec<(String, String)>)> {
    if is_uri(url) {
        let Some((head, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), Vec::new()));
        };
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(text)
                .decode_utf8_lossy()
                .into_owned()
        };
        let options = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(key), decode(value))
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
            return Err(Error::invalid(
                "database_url",
                format!("`{key}` has no value (expected key=value)"),
            ));
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
                        return Err(Error::invalid(
                            "database_url",
                            format!("the value of `{key}` has no closing quote"),
                        ));
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

/// The characters an option's key or value keeps as they are in a URI's
/// query; every other byte is percent-encoded.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/')
    .remove(b',')
    .remove(b':');

/// The characters a database name keeps as they are in a URI's path (one
/// segment: a `/` is encoded); every other byte is percent-encoded.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Puts `head` and `options` back together in `url`'s form.
pub fn join_options(url: &str, head: &str, options: &[(String, String)]) -> String {
    if is_uri(url) {
        if options.is_empty() {
            return head.to_owned();
        }
        let encode =
            |text: &str| percent_encoding::utf8_percent_encode(text, QUERY_VALUE).to_string();
        let query: Vec<String> = options
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_replaces_the_one_a_url_names_in_either_form() {
        let cases = [
            ("postgres://u@h/app", "postgres://u@h/t"),
            (
                "postgres://u@h:5/app?sslmode=disable",
                "postgres://u@h:5/t?sslmode=disable",
            ),
            ("postgresql://h", "postgresql://h/t"),
            ("postgresql://h/", "postgresql://h/t"),
            // libpq reads a `dbname` parameter over the path: both named.
            ("postgres://h/app?dbname=other", "postgres://h/t?dbname=t"),
            ("host=h dbname=app user=u", "host='h' dbname='t' user='u'"),
            ("host=h", "host='h' dbname='t'"),
        ];
        for (url, expected) in cases {
            assert_eq!(with_database(url, "t").expect("a URL"), expected, "{url}");
        }
        // A name the path cannot hold as it is, encoded.
        assert_eq!(
            with_database("postgres://h/app", "a b/c").expect("a URL"),
            "postgres://h/a%20b%2Fc"
        );
        assert!(with_database("host", "t").is_err());
    }

    const T: Duration = Duration::from_secs(7);

    #[test]
    fn a_url_of_its_own_timeout_is_kept() {
        for url in [
            "postgres://db/app?connect_timeout=1",
            "postgresql://u@db/app?sslmode=disable&connect_timeout=1",
            "host='db' connect_timeout='1' user='app'",
        ] {
            assert_eq!(connectable_url(url, T).expect("a URL"), url);
        }
    }

    #[test]
    fn a_default_is_added_in_the_url_s_own_form() {
        assert_eq!(
            connectable_url("postgresql://u:p@db:5433/app", T).expect("a URL"),
            "postgresql://u:p@db:5433/app?connect_timeout=7"
        );
        assert_eq!(
            connectable_url("host=db password='a b\\'c' ", T).expect("a URL"),
            "host='db' password='a b\\'c' connect_timeout='7'"
        );
        // A parameter that merely ends in the name is not it.
        assert_eq!(
            connectable_url("postgres://db/app?x_connect_timeout=3", T).expect("a URL"),
            "postgres://db/app?x_connect_timeout=3&connect_timeout=7"
        );
        // Less than a second still bounds the connect.
        assert_eq!(
            connectable_url("postgres://db/app", Duration::from_millis(200)).expect("a URL"),
            "postgres://db/app?connect_timeout=1"
        );
    }

    #[test]
    fn an_empty_url_is_refused_with_what_to_set() {
        for url in ["", "   ", "\t\n"] {
            let err = connectable_url(url, T).expect_err("refused").to_string();
            assert!(err.contains("DATABASE_URL"), "{err}");
        }
    }
}
