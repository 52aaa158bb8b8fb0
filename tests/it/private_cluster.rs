//! Where no server answers, the project runs a private cluster from the
//! machine's PostgreSQL binaries (as `nobody` when run as root).

use diesel::prelude::*;
use jobqueue_tools::postgres::{PrivateCluster, StopMode, free_port};

#[test]
fn a_private_cluster_starts_migrates_and_stops() {
    let port = free_port().expect("port");
    let base = std::env::temp_dir().join(format!("jobqueue-test-cluster-{port}"));
    let cluster = PrivateCluster::new(&base, port).expect("PostgreSQL binaries on this machine");
    cluster.ensure_running().expect("start the cluster");
    let mut conn = PgConnection::establish(&cluster.url("postgres")).expect("connect");
    let applied = jobqueue_core::run_migrations(&mut conn).expect("migrate");
    assert_eq!(applied.len(), jobqueue_tests::migration_count());
    assert!(
        jobqueue_core::run_migrations(&mut conn)
            .expect("again")
            .is_empty()
    );
    drop(conn);
    // Starting again is a no-op while it runs.
    cluster.ensure_running().expect("already running");
    cluster.stop(StopMode::Immediate).expect("stop");
    assert!(!cluster.is_running());
    assert!(PgConnection::establish(&cluster.url("postgres")).is_err());
    // And it comes back with its data.
    cluster.ensure_running().expect("restart");
    let mut conn = PgConnection::establish(&cluster.url("postgres")).expect("reconnect");
    assert!(
        jobqueue_core::run_migrations(&mut conn)
            .expect("migrate")
            .is_empty()
    );
    drop(conn);
    cluster.stop(StopMode::Fast).expect("stop");
    std::fs::remove_dir_all(&base).ok();
}
