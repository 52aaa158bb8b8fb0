//! Periodic jobs: each slot fires once across runner processes that are
//! killed and restarted, missed slots follow their policy after every
//! runner was down, a schedule's state survives restarts, and bad
//! schedules stop a runner at start, naming the schedule.

use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Timestamptz};
use jobqueue_tests::fault::{Proc, runner_command, runner_flags};
use jobqueue_tests::{TestDb, count_where, db_now, scalar, wait_for};

const WORKER: &str = env!("CARGO_BIN_EXE_jobqueue-test-worker");

/// A runner process of the test worker declaring `schedules`.
fn runner(db: &TestDb, name: &str, schedules: &str) -> Proc {
    let mut command = runner_command(
        WORKER,
        &db.url,
        name,
        &runner_flags(&[("poll-interval-ms", "200")]),
    );
    command.env("JOBQUEUE_TEST_SCHEDULES", schedules);
    Proc::spawn(name, command)
}

fn cli(db: &TestDb, args: &[&str]) -> (Option<i32>, String, String) {
    jobqueue_tests::run_cli(WORKER, &db.url, args)
}

#[derive(QueryableByName)]
struct Time {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    t: Option<DateTime<Utc>>,
}

fn time(conn: &mut PgConnection, query: &str) -> Option<DateTime<Utc>> {
    diesel::sql_query(query)
        .get_result::<Time>(conn)
        .expect("a time")
        .t
}

/// The slots fired for payload `n`, oldest first, with their job counts.
fn fired(conn: &mut PgConnection, n: u64) -> Vec<(DateTime<Utc>, i64)> {
    #[derive(QueryableByName)]
    struct Slot {
        #[diesel(sql_type = Timestamptz)]
        run_at: DateTime<Utc>,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        jobs: i64,
    }
    diesel::sql_query(format!(
        "SELECT run_at, count(*) AS jobs FROM jobqueue_jobs
         WHERE job_type = 'test.noop' AND payload->>'n' = '{n}'
         GROUP BY run_at ORDER BY run_at"
    ))
    .load::<Slot>(conn)
    .expect("slots")
    .into_iter()
    .map(|slot| (slot.run_at, slot.jobs))
    .collect()
}

/// Whole seconds in `(from, to]` (slots of an every-second schedule).
fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    to.timestamp() - from.timestamp()
}

#[test]
fn every_slot_fires_once_while_runners_are_killed_and_restarted() {
    let _alone = crate::one_fleet_at_a_time();
    let (db, mut conn) = TestDb::with_side_tables();
    const TICK: &str = "tick|* * * * * *|catch_up:30|1";
    let mut runners: Vec<Proc> = (0..4)
        .map(|i| runner(&db, &format!("cron-{i}"), TICK))
        .collect();
    let started = Instant::now();
    let mut kills = 0;
    let mut next_kill = started + Duration::from_secs(2);
    while started.elapsed() < Duration::from_secs(30) {
        if Instant::now() >= next_kill {
            let victim = kills % runners.len();
            runners[victim].signal("KILL");
            let _ = runners[victim].wait_exit(Duration::from_secs(10));
            runners[victim] = runner(&db, &format!("cron-{victim}-again-{kills}"), TICK);
            kills += 1;
            next_kill += Duration::from_secs(2);
        }
        // The kills' pace is the scenario: sleep until the next one.
        std::thread::sleep(next_kill.saturating_duration_since(Instant::now()));
    }
    for runner in &mut runners {
        runner.terminate(Duration::from_secs(20));
    }
    let slots = fired(&mut conn, 1);
    let (first, last) = (slots[0].0, slots[slots.len() - 1].0);
    let expected = seconds_between(first, last) + 1;
    let duplicated: i64 = slots.iter().map(|(_, jobs)| jobs - 1).sum();
    let missing = expected - slots.len() as i64;
    println!(
        "periodic slots: {expected} from {first} to {last}, fired {}, missing {missing}, \
         duplicated {duplicated}, runner kills {kills}",
        slots.len()
    );
    assert!(
        expected >= 25,
        "the schedule fired through the run ({expected} slots)"
    );
    assert_eq!((missing, duplicated), (0, 0));
    assert!(kills >= 10);
}

#[test]
fn missed_slots_follow_the_policy_after_every_runner_was_down() {
    let (db, mut conn) = TestDb::with_side_tables();
    const BOTH: &str = "latest|* * * * * *|latest|2;caught-up|* * * * * *|catch_up:10|3";
    let mut first = runner(&db, "policy-1", BOTH);
    wait_for("both schedules fired", Duration::from_secs(20), || {
        fired(&mut conn, 2).len() >= 2 && fired(&mut conn, 3).len() >= 2
    });
    first.terminate(Duration::from_secs(20));
    let stopped = db_now(&mut conn);
    let last_latest = fired(&mut conn, 2).last().expect("fired").0;
    let last_caught_up = fired(&mut conn, 3).last().expect("fired").0;
    // Three slots or more pass with no runner up, by the database's clock.
    wait_for("three slots missed", Duration::from_secs(20), || {
        seconds_between(stopped, db_now(&mut conn)) >= 4
    });
    let restarted = db_now(&mut conn);
    let second = runner(&db, "policy-2", BOTH);
    wait_for("both fired again", Duration::from_secs(20), || {
        fired(&mut conn, 2)
            .last()
            .is_some_and(|(t, _)| *t >= restarted - chrono::Duration::seconds(1))
            && fired(&mut conn, 3)
                .last()
                .is_some_and(|(t, _)| *t >= restarted - chrono::Duration::seconds(1))
    });
    drop(second);
    let missed_window = |slots: &[(DateTime<Utc>, i64)], last_before: DateTime<Utc>| {
        slots
            .iter()
            .filter(|(t, _)| *t > last_before && t.timestamp() < restarted.timestamp())
            .count() as i64
    };
    let missed_seconds = seconds_between(last_latest, restarted) - 1;
    assert!(missed_seconds >= 3, "{missed_seconds} slots missed");
    // Latest: none of the missed slots before the newest at restart fired.
    let latest = fired(&mut conn, 2);
    assert_eq!(missed_window(&latest, last_latest), 0, "{latest:?}");
    // Catch-up: each missed slot fired, once.
    let caught_up = fired(&mut conn, 3);
    assert_eq!(
        missed_window(&caught_up, last_caught_up),
        seconds_between(last_caught_up, restarted) - 1,
        "{caught_up:?}"
    );
    assert!(caught_up.iter().all(|(_, jobs)| *jobs == 1));
    assert!(latest.iter().all(|(_, jobs)| *jobs == 1));
}

#[test]
fn a_schedules_state_survives_restarts_between_its_slots() {
    let (db, mut conn) = TestDb::with_side_tables();
    // Weekly, Monday 09:00 in Paris. The runner stops; by the database's
    // clock, its last slot was two weeks ago (a runner that restarted more
    // often than weekly never reached a slot, the way an in-memory
    // scheduler does).
    const WEEKLY: &str = "weekly|0 9 * * 1|latest|4|Europe/Paris";
    let mut first = runner(&db, "weekly-1", WEEKLY);
    wait_for("declared", Duration::from_secs(20), || {
        scalar(&mut conn, "SELECT count(*) AS n FROM jobqueue_schedules") == 1
    });
    first.terminate(Duration::from_secs(20));
    assert!(
        fired(&mut conn, 4).is_empty(),
        "no slot since it was declared"
    );
    diesel::sql_query(
        "UPDATE jobqueue_schedules SET last_slot = now() - interval '15 days' WHERE name = 'weekly'",
    )
    .execute(&mut conn)
    .expect("set the last slot back");
    for round in 0..3 {
        let before = db_now(&mut conn);
        let mut again = runner(&db, &format!("weekly-again-{round}"), WEEKLY);
        // Up and past its first pass: it declared the schedule again.
        wait_for("declared again", Duration::from_secs(20), || {
            time(&mut conn, "SELECT declared_at AS t FROM jobqueue_schedules")
                .is_some_and(|t| t > before)
        });
        wait_for("the missed slot fired", Duration::from_secs(20), || {
            fired(&mut conn, 4).len() == 1
        });
        again.terminate(Duration::from_secs(20));
    }
    let slots = fired(&mut conn, 4);
    assert_eq!(
        slots.len(),
        1,
        "the latest missed slot, once, whatever the restarts"
    );
    let slot = slots[0].0;
    assert_eq!(
        slot.format("%u %H:%M").to_string(),
        "1 08:00",
        "Monday 09:00 CET is 08:00 UTC"
    );
    assert!(seconds_between(slot, db_now(&mut conn)) < 7 * 24 * 3600);
}

#[test]
fn cron_commands_pause_resume_run_and_list() {
    let (db, mut conn) = TestDb::with_side_tables();
    const TICK: &str = "tick|* * * * * *|latest|5";
    let runner = runner(&db, "cron-cli", TICK);
    wait_for("it fires", Duration::from_secs(20), || {
        !fired(&mut conn, 5).is_empty()
    });
    let (code, out, err) = cli(&db, &["cron", "pause", "tick"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("paused schedule tick"));
    let paused_at = db_now(&mut conn);
    // Slots pass while it is paused: none fires.
    wait_for("two slots passed", Duration::from_secs(20), || {
        seconds_between(paused_at, db_now(&mut conn)) >= 2
    });
    let late = count_where(
        &mut conn,
        &format!(
            "payload->>'n' = '5' AND run_at > '{}'",
            paused_at.to_rfc3339()
        ),
    );
    assert_eq!(late, 0, "a paused schedule fires nothing");
    let (_, listed, _) = cli(&db, &["cron", "list"]);
    let line = listed
        .lines()
        .find(|line| line.starts_with("tick"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        line.contains("* * * * * *") && line.contains("UTC") && line.ends_with("paused"),
        "{line}"
    );

    // Run now, outside its slots, even while paused.
    let (code, id, err) = cli(&db, &["cron", "run", "tick"]);
    assert_eq!(code, Some(0), "{err}");
    wait_for("the run-now job done", Duration::from_secs(20), || {
        jobqueue_tests::is_completed(&mut conn, id.trim().parse().expect("an id"))
    });

    let resumed_at = db_now(&mut conn);
    assert!(
        cli(&db, &["cron", "resume", "tick"])
            .1
            .contains("resumed schedule tick")
    );
    wait_for("it fires again", Duration::from_secs(20), || {
        fired(&mut conn, 5)
            .last()
            .is_some_and(|(t, _)| *t > resumed_at)
    });
    // The slots that passed while paused stay unfired.
    let resumed_slot = resumed_at - chrono::Duration::seconds(1);
    let during: Vec<_> = fired(&mut conn, 5)
        .into_iter()
        .filter(|(t, _)| *t > paused_at && *t < resumed_slot)
        .collect();
    assert_eq!(during, [], "slots fired while paused");
    drop(runner);

    // Unknown names list the known ones.
    let (code, _, err) = cli(&db, &["cron", "resume", "tcik"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no schedule named `tcik`; the schedules are: tick"),
        "{err}"
    );

    // Removed from the code: kept, shown as orphaned, fires nothing.
    diesel::sql_query("UPDATE jobqueue_schedules SET declared_at = now() - interval '1 hour'")
        .execute(&mut conn)
        .expect("age the declaration");
    let (_, listed, _) = cli(&db, &["cron", "list"]);
    assert!(
        listed.contains("orphaned (no runner declares it)"),
        "{listed}"
    );
}

#[test]
fn a_bad_schedule_stops_the_runner_at_start_naming_it() {
    let db = TestDb::new();
    for (spec, expect) in [
        (
            "nightly|0 3 * *|latest|1",
            "schedule `nightly`: invalid cron expression",
        ),
        (
            "nightly|61 * * * *|latest|1",
            "schedule `nightly`: invalid cron expression",
        ),
        (
            "tick|* * * * * *|catch_up:0|1",
            "catching up on at most 0 slots",
        ),
    ] {
        let out = Command::new(WORKER)
            .args(["--database-url", &db.url, "work"])
            .env("JOBQUEUE_TEST_SCHEDULES", spec)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert!(stderr.contains(expect), "{spec}: {stderr}");
    }
    // A time zone that does not exist, through the library.
    let schedule =
        jobqueue_core::Periodic::new("zoned", "0 3 * * *", &jobqueue_tests::jobs::Noop { n: 0 })
            .time_zone("Mars/Olympus");
    let err = schedule.validate().expect_err("no such zone");
    assert!(
        err.to_string().contains(
            "schedule `zoned`: invalid time zone: `Mars/Olympus` is not an IANA time zone"
        ),
        "{err}"
    );
    let runner = jobqueue_runner::Runner::new(
        jobqueue_runner::RunnerConfig::new(&db.url),
        jobqueue_tests::jobs::registry().periodic(schedule),
    )
    .start();
    assert!(runner.is_err(), "the runner refuses to start");
}
