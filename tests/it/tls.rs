//! The runner on a server that accepts TLS connections only: every
//! connection, the listener's included, honours the URL's `sslmode` and
//! `sslrootcert`. The certificates are made by the test (a CA of its own,
//! and a server certificate it signed for 127.0.0.1 and localhost).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use diesel::{Connection, PgConnection};
use jobqueue_runner::RunnerConfig;
use jobqueue_tests::fault::OwnCluster;
use jobqueue_tests::{
    assert_success, noop_time_to_complete, scalar, start_idle_noop_runner, wait_for,
};
use jobqueue_tools::postgres::StopMode;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (scripts/setup installs it)");
    assert_success(&format!("openssl {args:?}"), &out);
}

/// A CA (`ca.crt`) and a server certificate it signed (`server.crt`,
/// `server.key`) for 127.0.0.1 and localhost, in `dir`.
fn make_certificates(dir: &Path) {
    std::fs::create_dir_all(dir).expect("certificate dir");
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("extensions file");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=jobqueue test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// Whether this database's listener (a session waiting on LISTEN) is
/// connected over TLS.
fn listener_on_tls(conn: &mut PgConnection) -> bool {
    scalar(
        conn,
        "SELECT count(*) AS n FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
         WHERE a.datname = current_database() AND a.query = 'LISTEN \"jobqueue_jobs\"'
           AND s.ssl",
    ) == 1
}

#[test]
fn every_connection_honours_sslmode_on_a_tls_only_server() {
    let pg = OwnCluster::start();
    let certs = std::env::temp_dir().join(format!("jobqueue-tls-{}", std::process::id()));
    make_certificates(&certs);
    let cluster = pg.cluster();
    cluster.stop(StopMode::Fast).expect("stop");
    cluster
        .require_tls(&certs.join("server.crt"), &certs.join("server.key"))
        .expect("configure TLS");
    cluster.start().expect("start");
    cluster
        .wait_ready(Duration::from_secs(30))
        .expect("the server back, with TLS");
    assert!(
        PgConnection::establish(&format!("{}?sslmode=disable", pg.url)).is_err(),
        "the server refuses connections without TLS"
    );

    let ca = certs.join("ca.crt");
    let ca = ca.to_str().expect("a UTF-8 path");
    let localhost = pg.url.replace("127.0.0.1", "localhost");
    for url in [
        pg.url.clone(),
        format!("{}?sslmode=prefer", pg.url),
        format!("{}?sslmode=require", pg.url),
        format!("{}?sslmode=verify-ca&sslrootcert={ca}", pg.url),
        format!("{}?sslmode=verify-full&sslrootcert={ca}", pg.url),
        format!("{localhost}?sslmode=verify-full&sslrootcert={ca}"),
    ] {
        let mut conn = PgConnection::establish(&url).expect("connect with TLS");
        let runner = start_idle_noop_runner(
            RunnerConfig::new(&url)
                .concurrency(2)
                .keep_completed(jobqueue_tests::KEEP_COMPLETED),
        );
        wait_for(
            &format!("the listener connected over TLS ({url})"),
            Duration::from_secs(30),
            || listener_on_tls(&mut conn),
        );
        let waited = noop_time_to_complete(&mut conn);
        runner.shutdown();
        assert!(
            waited < Duration::from_secs(5),
            "{url}: the job waited {waited:?}: the listener did not wake the runner"
        );
    }
    let _ = std::fs::remove_dir_all(&certs);
}
