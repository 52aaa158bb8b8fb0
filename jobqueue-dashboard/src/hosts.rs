//! The host names the dashboard answers to (its defence against DNS
//! rebinding) and the origins an action may come from (against forms
//! posted by other sites).
//!
//! A page on `attacker.example` whose name is made to resolve to
//! `127.0.0.1` talks to a loopback dashboard as if it were its own site,
//! but its requests still carry `Host: attacker.example`: answering only to
//! known names stops it. IP literals cannot be rebound (a page on
//! `http://10.0.0.5/` is at 10.0.0.5), so the address the dashboard is
//! served on is always accepted.

use std::net::IpAddr;

/// One allowed host: a lowercase name or IP literal (IPv6 without its
/// brackets), on one port or any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: String,
    port: Option<u16>,
}

impl Entry {
    fn matches(&self, authority: &Authority) -> bool {
        self.host == authority.host && self.port.is_none_or(|port| Some(port) == authority.port)
    }
}

/// The host and port of a `Host` header, an `Origin` or a `Referer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    /// Lowercase; an IPv6 literal without its brackets.
    host: String,
    port: Option<u16>,
}

impl Authority {
    /// `host`, `host:port`, `[v6]` or `[v6]:port`; `None` for anything
    /// else (user info, an empty host, a bad port).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest.split_once(']')?;
            host.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (host, port)
        } else {
            match text.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        let port = match port {
            Some(port) => Some(port.parse::<u16>().ok()?),
            None => None,
        };
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':');
        if host.is_empty() || !host.chars().all(name_ok) {
            return None;
        }
        Some(Authority {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// The authority of an absolute URL (`scheme://authority/...`), and
    /// the scheme's default port.
    fn of_url(url: &str) -> Option<(Self, u16)> {
        let (scheme, rest) = url.split_once("://")?;
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        Some((Self::parse(&rest[..end])?, default_port))
    }

    fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

impl std::fmt::Display for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// The loopback names every dashboard answers to, on any port.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Which hosts a dashboard answers to.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// The loopback names, the address served on.
    always: Vec<Entry>,
    /// The configured ones (`DashboardConfig::allowed_hosts`).
    configured: Vec<Entry>,
    /// Served on every address of the machine (`0.0.0.0`, `[::]`): every
    /// IP literal is one of its addresses, or at least not a rebound name.
    any_ip: bool,
}

/// A configured host that is not a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadHost(pub(crate) String);

impl Hosts {
    /// The loopback names and `configured`.
    pub(crate) fn new(configured: &[String]) -> Result<Self, BadHost> {
        let configured = configured
            .iter()
            .map(|text| {
                let text = text.trim();
                let bracketed;
                // A bare IPv6 literal, as `fd00::1`.
                let text = if text.parse::<std::net::Ipv6Addr>().is_ok() {
                    bracketed = format!("[{text}]");
                    bracketed.as_str()
                } else {
                    text
                };
                Authority::parse(text)
                    .map(|a| Entry {
                        host: a.host,
                        port: a.port,
                    })
                    .ok_or_else(|| BadHost(text.to_owned()))
            })
            .collect::<Result<_, _>>()?;
        let always = LOOPBACK
            .iter()
            .map(|host| Entry {
                host: (*host).to_owned(),
                port: None,
            })
            .collect();
        Ok(Hosts {
            always,
            configured,
            any_ip: false,
        })
    }

    /// Also answers to `ip`, the address the dashboard is served on (to
    /// every IP literal if it is the unspecified address).
    pub(crate) fn serve_on(&mut self, ip: IpAddr) {
        if ip.is_unspecified() {
            self.any_ip = true;
        } else {
            let entry = Entry {
                host: ip.to_string(),
                port: None,
            };
            if !self.always.contains(&entry) {
                self.always.push(entry);
            }
        }
    }

    /// Whether a request whose `Host` is `host` is answered.
    pub(crate) fn allows(&self, host: &Authority) -> bool {
        (self.any_ip && host.ip().is_some())
            || self.always.iter().any(|e| e.matches(host))
            || self.configured.iter().any(|e| e.matches(host))
    }

    /// Whether an action sent to `host` comes from one of the dashboard's
    /// own pages: its `Origin` (or, when there is none, its `Referer`)
    /// names the same host and port, or a configured host (a proxy in
    /// front may send another `Host`). `Err` says where it came from.
    /// With neither header (a script, not a browser) it is allowed: the
    /// CSRF token still has to be right.
    pub(crate) fn same_origin(
        &self,
        host: &Authority,
        origin: Option<&str>,
        referer: Option<&str>,
    ) -> Result<(), String> {
        let (given, what) = match (origin, referer) {
            (Some(origin), _) => (origin.trim(), "Origin"),
            (None, Some(referer)) => (referer.trim(), "Referer"),
            (None, None) => return Ok(()),
        };
        if given == "null" {
            return Err(format!(
                "its {what} is `null`: it was sent by a page with no origin of its own \
                 (a sandboxed frame, a local file, or a redirect from another site)"
            ));
        }
        let Some((from, default_port)) = Authority::of_url(given) else {
            return Err(format!("its {what} `{given}` is not an http(s) origin"));
        };
        let from_port = from.port.unwrap_or(default_port);
        // A Host without a port was sent to the scheme's default port.
        let same_host = from.host == host.host && from_port == host.port.unwrap_or(default_port);
        let configured = self.configured.iter().any(|e| {
            e.matches(&Authority {
                host: from.host.clone(),
                port: Some(from_port),
            })
        });
        if same_host || configured {
            Ok(())
        } else {
            Err(format!(
                "its {what} is {from}, another site than this dashboard ({host})"
            ))
        }
    }

    /// The hosts answered to, for a message: `localhost, 127.0.0.1,
    /// [::1] (any port), ...`.
    pub(crate) fn describe(&self) -> String {
        let shown = |e: &Entry| {
            Authority {
                host: e.host.clone(),
                port: e.port,
            }
            .to_string()
        };
        let mut names: Vec<String> = self
            .always
            .iter()
            .chain(&self.configured)
            .map(|e| match e.port {
                Some(_) => shown(e),
                None => format!("{} (any port)", shown(e)),
            })
            .collect();
        if self.any_ip {
            names.push("any IP address of this machine".to_owned());
        }
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(text: &str) -> Authority {
        Authority::parse(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    #[test]
    fn authorities_parse_names_ports_and_ipv6_literals() {
        assert_eq!(authority("LocalHost:8080").to_string(), "localhost:8080");
        assert_eq!(authority("[::1]:80").to_string(), "[::1]:80");
        assert_eq!(authority("[::1]").to_string(), "[::1]");
        for bad in [
            "",
            ":80",
            "a b",
            "user@host",
            "host:port",
            "host:99999",
            "[zz]:1",
            "[::1]x",
        ] {
            assert!(Authority::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn loopback_names_are_answered_on_any_port_and_others_only_when_named() {
        let hosts = Hosts::new(&[]).expect("hosts");
        for host in ["localhost", "localhost:8080", "127.0.0.1:1", "[::1]:9"] {
            assert!(hosts.allows(&authority(host)), "{host}");
        }
        for host in [
            "attacker.example:8080",
            "127.0.0.2",
            "10.0.0.5",
            "localhost.evil",
        ] {
            assert!(!hosts.allows(&authority(host)), "{host}");
        }
        let named = Hosts::new(&[
            "jobs.internal".to_owned(),
            "proxy.example:443".to_owned(),
            "fd00::1".to_owned(),
        ])
        .expect("hosts");
        assert!(named.allows(&authority("jobs.internal:8080")));
        assert!(named.allows(&authority("proxy.example:443")));
        assert!(!named.allows(&authority("proxy.example:8443")));
        assert!(named.allows(&authority("[fd00::1]:8080")));
        assert!(Hosts::new(&["bad host".to_owned()]).is_err());
        assert!(Hosts::new(&["*.example".to_owned()]).is_err());
    }

    #[test]
    fn the_bound_address_is_answered_and_every_ip_literal_when_bound_to_all() {
        let mut hosts = Hosts::new(&[]).expect("hosts");
        hosts.serve_on("127.0.0.1".parse().expect("ip"));
        assert_eq!(hosts.describe().matches("127.0.0.1").count(), 1);
        hosts.serve_on("10.0.0.5".parse().expect("ip"));
        assert!(hosts.allows(&authority("10.0.0.5:8080")));
        assert!(!hosts.allows(&authority("10.0.0.6:8080")));
        let mut all = Hosts::new(&[]).expect("hosts");
        all.serve_on("0.0.0.0".parse().expect("ip"));
        assert!(all.allows(&authority("10.0.0.6:8080")));
        assert!(!all.allows(&authority("attacker.example:8080")));
        assert!(all.describe().contains("any IP address"));
    }

    #[test]
    fn actions_come_from_the_same_origin_or_a_configured_one() {
        let hosts = Hosts::new(&["jobs.example".to_owned()]).expect("hosts");
        let here = "127.0.0.1:8080";
        // (Host, Origin, Referer)
        let accepted = [
            (here, None, None),
            (here, Some("http://127.0.0.1:8080"), None),
            (here, None, Some("http://127.0.0.1:8080/jobs?x=1")),
            (here, Some("https://jobs.example"), None),
            // No port in Host: the origin's scheme's default port.
            ("localhost", Some("http://localhost"), None),
        ];
        let refused = [
            (here, Some("http://attacker.example:8080"), None),
            (here, Some("http://127.0.0.1:3000"), None),
            (here, Some("null"), None),
            (here, Some("file://"), None),
            (here, None, Some("http://attacker.example:8080/page")),
            ("localhost", Some("http://localhost:3000"), None),
        ];
        for (host, origin, referer) in accepted {
            let checked = hosts.same_origin(&authority(host), origin, referer);
            assert!(checked.is_ok(), "{host} {origin:?} {referer:?}");
        }
        for (host, origin, referer) in refused {
            let checked = hosts.same_origin(&authority(host), origin, referer);
            assert!(checked.is_err(), "{host} {origin:?} {referer:?}");
        }
    }
}
