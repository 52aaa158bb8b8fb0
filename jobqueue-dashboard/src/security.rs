//! Who may look and act: the access token (when the dashboard is reachable
//! from other machines) and the CSRF token every action carries.

/// The cookie that carries the access token after `/login?token=...`.
pub(crate) const TOKEN_COOKIE: &str = "jobqueue_token";

/// A fresh random secret: 244 bits from the operating system's generator
/// (two version 4 UUIDs).
pub(crate) fn random_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Least length of a shared CSRF secret.
const CSRF_SECRET_MIN_CHARS: usize = 32;

/// The forms' CSRF token derived from a secret shared by replicas: a hash
/// of it, so that pages never show the secret itself.
pub(crate) fn csrf_from(secret: &str) -> Result<String, String> {
    use sha2::Digest;
    check_token(secret)?;
    if secret.len() < CSRF_SECRET_MIN_CHARS {
        return Err(format!(
            "has {} characters, fewer than {CSRF_SECRET_MIN_CHARS}",
            secret.len()
        ));
    }
    let digest = sha2::Sha256::new()
        .chain_update(b"jobqueue dashboard csrf\0")
        .chain_update(secret.as_bytes())
        .finalize();
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares two secrets in time that does not depend on where they differ.
pub(crate) fn same_secret(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// Whether a request may see the dashboard: no token is set, or it carries
/// the token (its cookie, or `Authorization: Bearer`).
pub(crate) fn allowed(
    token: Option<&str>,
    cookie_header: Option<&str>,
    authorization: Option<&str>,
) -> bool {
    let Some(token) = token else {
        return true;
    };
    let from_cookie = cookie_header.and_then(|h| cookie(h, TOKEN_COOKIE));
    let from_header = authorization.and_then(|h| h.strip_prefix("Bearer "));
    [from_cookie, from_header]
        .into_iter()
        .flatten()
        .any(|given| same_secret(given, token))
}

/// `path` as it may be logged or shown: the query string of `/login`
/// (which carries the access token) redacted.
pub(crate) fn shown_path(path: &str) -> String {
    match path.split_once('?') {
        Some((login, _)) if login.ends_with("/login") => {
            format!("{login}?{}", crate::config::REDACTED)
        }
        _ => path.to_owned(),
    }
}

/// Least length of an access token.
const TOKEN_MIN_CHARS: usize = 16;
/// Least number of different characters in an access token (16 × `a` is
/// not a secret).
const TOKEN_MIN_DISTINCT: usize = 8;

/// Whether `token` can serve as an access token: long and varied enough to
/// resist guessing, and made of characters that travel unchanged in a
/// cookie, a header and a `/login?token=` link. `Err` says what is wrong.
pub(crate) fn check_token(token: &str) -> Result<(), String> {
    if let Some(bad) = token
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '"' | ',' | ';' | '\\'))
    {
        return Err(format!("holds the character {bad:?}"));
    }
    if token.len() < TOKEN_MIN_CHARS {
        return Err(format!("has {} characters", token.len()));
    }
    let distinct = token
        .bytes()
        .collect::<std::collections::BTreeSet<u8>>()
        .len();
    if distinct < TOKEN_MIN_DISTINCT {
        return Err(format!("has only {distinct} different characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert_ne!(random_secret(), random_secret());
        assert_eq!(random_secret().len(), 64);
    }

    #[test]
    fn the_token_comes_from_the_cookie_or_the_header() {
        let token = Some("s3cret-s3cret-s3cret");
        assert!(allowed(None, None, None));
        assert!(!allowed(token, None, None));
        assert!(allowed(
            token,
            Some("a=b; jobqueue_token=s3cret-s3cret-s3cret"),
            None
        ));
        assert!(!allowed(token, Some("jobqueue_token=wrong"), None));
        assert!(allowed(token, None, Some("Bearer s3cret-s3cret-s3cret")));
    }

    #[test]
    fn the_login_token_is_not_shown() {
        assert_eq!(shown_path("/login?token=s3cret"), "/login?<redacted>");
        assert_eq!(shown_path("/jobs?status=failed"), "/jobs?status=failed");
    }
}
