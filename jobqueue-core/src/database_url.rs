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
/// assert_eq!(connectable_url("host=db connect_timeout=2", t)?, "host=db connect_timeout=2");
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
    if sets_connect_timeout(url) {
        return Ok(url.to_owned());
    }
    let secs = timeout.as_secs().max(1);
    Ok(if is_uri(url) {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}connect_timeout={secs}")
    } else {
        format!("{} connect_timeout={secs}", url.trim_end())
    })
}

fn is_uri(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Whether the URL names a `connect_timeout` of its own.
fn sets_connect_timeout(url: &str) -> bool {
    if is_uri(url) {
        url.split_once('?').is_some_and(|(_, query)| {
            query
                .split('&')
                .any(|pair| pair.split('=').next() == Some("connect_timeout"))
        })
    } else {
        url.split_whitespace()
            .any(|word| word.split('=').next().map(str::trim) == Some("connect_timeout"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(7);

    #[test]
    fn a_url_of_its_own_timeout_is_kept() {
        for url in [
            "postgres://db/app?connect_timeout=1",
            "postgresql://u@db/app?sslmode=disable&connect_timeout=1",
            "host=db connect_timeout=1 user=app",
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
            connectable_url("host=db user=app ", T).expect("a URL"),
            "host=db user=app connect_timeout=7"
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
