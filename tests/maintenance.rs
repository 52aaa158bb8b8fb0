//! A runner's maintenance runs each of its tasks on its own timer: with
//! recovery and pruning a minute away, the vacuum still runs every 100 ms
//! once enough dead row versions have piled up.

use std::time::Duration;

use jobqueue_runner::{Runner, RunnerConfig};
use jobqueue_tests::{TestDb, count_where, enqueue_all, scalar, wait_for};
use jobqueue_tools::bench::{BenchNoop, registry};

#[test]
fn the_vacuum_runs_on_its_own_timer() {
    let db = TestDb::new();
    let mut conn = db.conn();
    enqueue_all(&mut conn, (0..300).map(|_| BenchNoop { seq: 0 }));
    let mut config = RunnerConfig::new(&db.url);
    config.rescue_interval = Duration::from_secs(60);
    config.prune_interval = Duration::from_secs(60);
    config.vacuum_interval = Duration::from_millis(100);
    config.vacuum_min_dead = 50;
    let runner = Runner::new(config, registry()).start().expect("start");
    wait_for("the jobs done", Duration::from_secs(30), || {
        count_where(&mut conn, "status = 'completed'") == 300
    });
    // Dead row versions reach the statistics when the runner's sessions
    // report them (within about 10 s of going idle).
    wait_for(
        "the runner to vacuum the jobs table",
        Duration::from_secs(40),
        || {
            scalar(
                &mut conn,
                "SELECT count(*) AS n FROM pg_stat_user_tables
             WHERE relname = 'jobqueue_jobs' AND last_vacuum IS NOT NULL",
            ) == 1
        },
    );
    runner.shutdown();
}
