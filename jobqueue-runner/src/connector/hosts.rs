//! Which of the URL's hosts a new connection tries first.
//!
//! libpq tries a multi-host URL's hosts in the order written, each for up
//! to its connect timeout. After a failover the old primary is often still
//! first; if it is down for good, refusing connections, that costs nothing,
//! but a frozen one (a paused VM, a SIGSTOPped server) accepts the TCP
//! connection and never answers, so every new connection would wait out a
//! connect timeout on it before reaching the new primary. So the runner
//! splits the URL into one URL per host and tries them starting from the
//! one that last took a connection, moving on in the written order.
//!
//! URLs it cannot split safely (one host, a `host`, `hostaddr` or `port`
//! list in a URL's query, `hostaddr` in key=value form) are used as given.

use std::sync::atomic::{AtomicUsize, Ordering};

use jobqueue_core::engine::{join_options, split_options};

/// One URL per host of the runner's URL, and the one that answered last.
#[derive(Debug)]
pub(crate) struct HostOrder {
    urls: Vec<String>,
    last_good: AtomicUsize,
}

impl HostOrder {
    /// The hosts of `url` (libpq syntax, either form).
    pub(crate) fn new(url: &str) -> Self {
        let urls = per_host(url).unwrap_or_else(|| vec![url.to_owned()]);
        HostOrder {
            urls,
            last_good: AtomicUsize::new(0),
        }
    }

    /// The index, in the URL's written order, of the host that last took a
    /// connection (0 for a URL used as given).
    pub(crate) fn last_good(&self) -> usize {
        self.last_good.load(Ordering::Relaxed)
    }

    /// Records that the host at `index` (in the URL's written order) took a
    /// connection made outside [`HostOrder::connect`] (the listener's, which
    /// reads the hosts from the URL itself).
    pub(crate) fn set_last_good(&self, index: usize) {
        self.last_good.store(index, Ordering::Relaxed);
    }

    /// How many URLs it has: the URL's hosts, or 1 for a URL used as given.
    pub(crate) fn len(&self) -> usize {
        self.urls.len()
    }

    /// Calls `connect` with each host's index and URL in turn, from the one
    /// that last took a connection, until one succeeds; returns its
    /// connection, or the error of the last host tried.
    pub(crate) fn connect<T, E>(
        &self,
        connect: impl Fn(usize, &str) -> Result<T, E>,
    ) -> Result<T, E> {
        let n = self.urls.len();
        let first = self.last_good.load(Ordering::Relaxed) % n;
        let mut result = connect(first, &self.urls[first]);
        for i in (1..n).map(|k| (first + k) % n) {
            if result.is_ok() {
                break;
            }
            result =
                connect(i, &self.urls[i]).inspect(|_| self.last_good.store(i, Ordering::Relaxed));
        }
        result
    }
}

/// One URL per host, or `None` when `url` has one host or cannot be split
/// safely.
fn per_host(url: &str) -> Option<Vec<String>> {
    let (head, options) = split_options(url).ok()?;
    if head.is_empty() {
        return per_host_key_value(url, &options);
    }
    if options
        .iter()
        .any(|(k, _)| matches!(k.as_str(), "host" | "hostaddr" | "port"))
    {
        return None;
    }
    let (scheme, rest) = head.split_once("://")?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let hosts: Vec<&str> = hosts.split(',').collect();
    if hosts.len() < 2 || hosts.iter().any(|h| h.is_empty()) {
        return None;
    }
    Some(
        hosts
            .iter()
            .map(|host| {
                let single = format!("{scheme}://{userinfo}{host}{path}");
                join_options(url, &single, &options)
            })
            .collect(),
    )
}

/// [`per_host`] for the key=value form: `host=a,b port=x,y`.
fn per_host_key_value(url: &str, options: &[(String, String)]) -> Option<Vec<String>> {
    if options.iter().any(|(k, _)| k == "hostaddr") {
        return None;
    }
    let value = |key: &str| options.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let hosts: Vec<&str> = value("host")?.split(',').collect();
    if hosts.len() < 2 {
        return None;
    }
    let ports: Vec<&str> = value("port").map_or_else(Vec::new, |p| p.split(',').collect());
    if ports.len() > 1 && ports.len() != hosts.len() {
        return None;
    }
    Some(
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let single: Vec<(String, String)> = options
                    .iter()
                    .map(|(k, v)| match k.as_str() {
                        "host" => (k.clone(), (*host).to_owned()),
                        "port" if ports.len() > 1 => (k.clone(), ports[i].to_owned()),
                        _ => (k.clone(), v.clone()),
                    })
                    .collect();
                join_options(url, "", &single)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_multi_host_url_keeping_everything_else() {
        assert_eq!(
            per_host("postgres://u:p@a:1,b:2/db?target_session_attrs=read-write").expect("split"),
            [
                "postgres://u:p@a:1/db?target_session_attrs=read-write",
                "postgres://u:p@b:2/db?target_session_attrs=read-write"
            ]
        );
        assert_eq!(
            per_host("postgresql://[::1]:5,h/x").expect("split"),
            ["postgresql://[::1]:5/x", "postgresql://h/x"]
        );
        assert_eq!(
            per_host("host=a,b port=1,2 dbname=d").expect("split"),
            [
                "host='a' port='1' dbname='d'",
                "host='b' port='2' dbname='d'"
            ]
        );
    }

    #[test]
    fn leaves_alone_what_it_cannot_split() {
        for url in [
            "postgres://u@a:1/db",
            "postgres://u@a,b/db?port=1,2",
            "host=a,b hostaddr=1.2.3.4,5.6.7.8",
            "host=a,b,c port=1,2",
            "host=a",
        ] {
            assert_eq!(per_host(url), None, "{url}");
        }
    }

    #[test]
    fn tries_from_the_host_that_answered_last() {
        let order = HostOrder::new("postgres://u@a,b,c/db");
        let tried = std::cell::RefCell::new(Vec::new());
        let tried = &tried;
        let up = |up: &'static str| {
            move |_: usize, url: &str| {
                tried.borrow_mut().push(url.to_owned());
                if url.contains(up) { Ok(()) } else { Err(()) }
            }
        };
        assert_eq!(order.connect(up("@b/")), Ok(()));
        assert_eq!(tried.take().len(), 2);
        assert_eq!(order.connect(up("@b/")), Ok(()));
        assert_eq!(tried.take(), ["postgres://u@b/db"]);
        assert_eq!(order.connect(up("@a/")), Ok(()));
        assert_eq!(
            tried.take(),
            [
                "postgres://u@b/db",
                "postgres://u@c/db",
                "postgres://u@a/db"
            ]
        );
        assert_eq!(order.connect(up("@none/")), Err(()));
    }
}
