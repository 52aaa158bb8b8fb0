//! The listener's connection settings, from the database URL as libpq reads
//! it: the same hosts, and the same TLS settings (`sslmode`, `sslrootcert`).
//!
//! The listener connects with the `postgres` crate (it can block on its
//! socket, which Diesel cannot), so the URL's TLS settings are applied here
//! with OpenSSL, as libpq applies them to every other connection:
//! `disable` no TLS; `allow` and `prefer` TLS when the server offers it;
//! `require` TLS, the certificate checked against `sslrootcert` only if one
//! is given; `verify-ca` TLS with a certificate signed by `sslrootcert`;
//! `verify-full` that, and issued to the host connected to. Without
//! `sslmode`, `prefer`, libpq's default.

use std::path::PathBuf;
use std::str::FromStr;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use postgres_openssl::MakeTlsConnector;

use crate::RunnerError;
use jobqueue_core::engine::{join_options, split_options};

/// `sslmode`, as libpq spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, RunnerError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(RunnerError::Config(format!(
                    "database_url: sslmode `{other}` is not one of disable, allow, prefer, \
                     require, verify-ca, verify-full"
                )));
            }
        })
    }

    /// What the `postgres` crate is told: it knows disable, prefer and
    /// require; verification is the connector's.
    fn negotiation(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Allow | SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

/// libpq options the `postgres` crate does not take and the listener does
/// not need (client certificates, revocation lists, GSS, service files):
/// left out of its connection, with a warning.
const LEFT_OUT: &[&str] = &[
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "sslcompression",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "requirepeer",
    "gssencmode",
    "gssdelegation",
    "krbsrvname",
    "gsslib",
    "passfile",
];

/// The listener's connection settings and TLS connector.
pub(crate) struct ListenSettings {
    /// Hosts, ports, credentials, timeouts and TLS negotiation.
    pub(crate) config: tokio_postgres::Config,
    /// Checks the server's certificate as `sslmode` says.
    pub(crate) tls: MakeTlsConnector,
}

/// The listener's settings for `url` (URL or key=value form).
pub(crate) fn listen_settings(url: &str) -> Result<ListenSettings, RunnerError> {
    let (rest, options) = split_options(url)?;
    let mut mode = SslMode::Prefer;
    let mut root_cert = None;
    let mut kept = Vec::new();
    for (key, value) in options {
        match key.as_str() {
            "sslmode" => mode = SslMode::parse(&value)?,
            "sslrootcert" => root_cert = Some(value),
            // libpq's name for what the `postgres` crate calls retries.
            "keepalives_count" => kept.push(("keepalives_retries".to_owned(), value)),
            key if LEFT_OUT.contains(&key) => {
                log::warn!(
                    "database_url: `{key}` applies to libpq's connections, not the listener's"
                )
            }
            _ => kept.push((key, value)),
        }
    }
    let text = join_options(url, &rest, &kept);
    let mut config = tokio_postgres::Config::from_str(&text)
        .map_err(|e| RunnerError::Config(format!("database_url: {e}")))?;
    config.ssl_mode(mode.negotiation());
    Ok(ListenSettings {
        config,
        tls: tls_connector(mode, root_cert.as_deref())?,
    })
}

/// An OpenSSL connector that checks the server's certificate as `mode`
/// says, against `root_cert` (a file, or `system` for the system's store).
fn tls_connector(mode: SslMode, root_cert: Option<&str>) -> Result<MakeTlsConnector, RunnerError> {
    let tls = |e: openssl::error::ErrorStack| RunnerError::Config(format!("TLS setup: {e}"));
    let mut builder = SslConnector::builder(SslMethod::tls()).map_err(tls)?;
    // libpq: `require` with a root certificate checks the chain, as verify-ca.
    let verify = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull)
        || (mode == SslMode::Require && root_cert.is_some());
    if verify {
        match root_cert {
            Some("system") => builder.set_default_verify_paths().map_err(tls)?,
            Some(path) => builder.set_ca_file(path).map_err(|e| {
                RunnerError::Config(format!("database_url: sslrootcert `{path}`: {e}"))
            })?,
            None => {
                let default = default_root_cert()
                    .filter(|path| path.is_file())
                    .ok_or_else(|| {
                        RunnerError::Config(
                            "database_url: sslmode verify-ca and verify-full need a root \
                         certificate: set sslrootcert (a file, or `system`)"
                                .into(),
                        )
                    })?;
                builder.set_ca_file(&default).map_err(tls)?;
            }
        }
        builder.set_verify(SslVerifyMode::PEER);
    } else {
        builder.set_verify(SslVerifyMode::NONE);
    }
    let mut connector = MakeTlsConnector::new(builder.build());
    if mode != SslMode::VerifyFull {
        connector.set_callback(|config, _| {
            config.set_verify_hostname(false);
            Ok(())
        });
    }
    Ok(connector)
}

/// libpq's default root certificate: `~/.postgresql/root.crt`.
fn default_root_cert() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssl_mode(url: &str) -> tokio_postgres::config::SslMode {
        listen_settings(url).expect("valid").config.get_ssl_mode()
    }

    #[test]
    fn sslmode_maps_to_what_the_postgres_crate_negotiates() {
        use tokio_postgres::config::SslMode as Negotiated;
        let base = "postgres://u@db.example:5432/app";
        assert_eq!(ssl_mode(base), Negotiated::Prefer, "libpq's default");
        assert_eq!(
            ssl_mode(&format!("{base}?sslmode=disable")),
            Negotiated::Disable
        );
        assert_eq!(
            ssl_mode(&format!("{base}?sslmode=require")),
            Negotiated::Require
        );
        assert_eq!(
            ssl_mode(&format!("{base}?sslmode=verify-full&sslrootcert=system")),
            Negotiated::Require
        );
        assert_eq!(
            ssl_mode("host=db.example dbname=app sslmode='verify-ca' sslrootcert=system"),
            Negotiated::Require
        );
    }

    #[test]
    fn other_options_and_hosts_are_kept() {
        let config = listen_settings(
            "postgresql://u@a.example:5432,b.example:5433/app?target_session_attrs=read-write\
             &sslmode=require&application_name=my%20app",
        )
        .expect("valid")
        .config;
        assert_eq!(config.get_hosts().len(), 2);
        assert_eq!(config.get_application_name(), Some("my app"));
        assert_eq!(config.get_dbname(), Some("app"));
    }

    #[test]
    fn bad_tls_settings_are_configuration_errors() {
        for (url, expected) in [
            ("postgres://h/d?sslmode=sometimes", "sslmode `sometimes`"),
            (
                "postgres://h/d?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
                "sslrootcert",
            ),
            ("host=h dbname='d", "no closing quote"),
        ] {
            let error = listen_settings(url).err().expect(url).to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }
}
