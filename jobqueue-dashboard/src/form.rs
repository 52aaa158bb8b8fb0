//! Query strings and form bodies.

/// The decoded `name=value` pairs of a query string or a form body.
#[derive(Debug, Default, Clone)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    pub(crate) fn parse(encoded: &[u8]) -> Self {
        Params(form_urlencoded::parse(encoded).into_owned().collect())
    }

    /// The first value of `name` exactly as sent, blanks included (a name
    /// read back from the database, which may hold any text).
    pub(crate) fn exact(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The first value of `name`, if present and not blank.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
            .filter(|value| !value.is_empty())
    }
}

/// A query string from `pairs`, leaving out the absent ones.
pub(crate) fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if let Some(value) = value {
            out.append_pair(name, value);
        }
    }
    out.finish()
}

/// Splits a request path into its path and its query parameters.
pub(crate) fn split(path: &str) -> (&str, Params) {
    match path.split_once('?') {
        Some((path, query)) => (path, Params::parse(query.as_bytes())),
        None => (path, Params::default()),
    }
}

/// A request path's segments, each percent-decoded once (`/jobs/a%2Fb` is
/// the two segments `jobs` and `a/b`); `None` if one decodes to bytes that
/// are not UTF-8.
pub(crate) fn segments(path: &str) -> Option<Vec<String>> {
    path.trim_matches('/')
        .split('/')
        .map(|segment| {
            percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .ok()
                .map(|decoded| decoded.into_owned())
        })
        .collect()
}
