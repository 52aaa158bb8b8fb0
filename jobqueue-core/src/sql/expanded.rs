//! Every statement whole. The statements are assembled from fragments
//! (the macros of `mod.rs` and of each file), so the source shows none of
//! the longer ones as PostgreSQL runs it. The test here writes each file's
//! statements, expanded, with their doc comments, into
//! `jobqueue-core/sql/expanded/<file>.sql` (`jobs/<file>.sql` for `jobs/`), and fails when the checked-in
//! copy differs: a change to a fragment shows up in review as a diff of
//! every statement it touches. After a change, rewrite the copies with
//! `JOBQUEUE_BLESS=1 cargo test -p jobqueue-core --lib expanded`.
//!
//! The list of each file's statements is checked against the file's own
//! `pub(crate) const` items, so a new statement cannot be left out.

/// `(name, text)` of each statement listed, from module `$file`.
macro_rules! statements {
    ($file:ident: $($name:ident),* $(,)?) => {
        &[$((stringify!($name), super::$file::$name)),*]
    };
}

/// Each file of `src/sql/`: its name, its source, its statements.
type SqlFile = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const FILES: &[SqlFile] = &[
    (
        "completions",
        include_str!("completions.rs"),
        statements!(completions:
            COMPLETIONS_FOLD,
            COMPLETIONS_WITHIN,
            COMPLETIONS_PRUNE,
        ),
    ),
    (
        "doctor",
        include_str!("doctor.rs"),
        statements!(doctor:
            DOCTOR_LIMITS,
            DOCTOR_SEES_ALL_SESSIONS,
            DOCTOR_SLOTS,
            DOCTOR_PREPARED,
            DOCTOR_SCHEMA,
            DOCTOR_TABLE_STATS,
            DOCTOR_FETCH_INDEX,
            DOCTOR_TABLE_ESTIMATE,
            DOCTOR_COUNT_PENDING,
            DOCTOR_HELD,
            DOCTOR_WAITING,
            DOCTOR_DUE_QUEUES,
            DOCTOR_NOTIFY_USAGE,
            DOCTOR_CONNECTIONS,
            DOCTOR_FETCH_INDEX_DEFINITION,
            XMIN_HORIZON,
            DOCTOR_WORKFLOWS,
            DOCTOR_KEYS,
        ),
    ),
    (
        "jobs/insert",
        include_str!("jobs/insert.rs"),
        statements!(jobs:
            JOB_INSERT,
            JOB_INSERT_QUIET,
            JOB_INSERT_MANY,
            JOB_LIVE_HOLDERS,
            JOB_NOTIFY_QUEUES,
        ),
    ),
    (
        "jobs/claim",
        include_str!("jobs/claim.rs"),
        statements!(jobs:
            JOB_CLAIM_QUEUES,
            JOB_CLAIM_QUEUES_LIMITED,
            JOB_CLAIM_ANY,
            JOB_CLAIM_ANY_LIMITED,
            JOB_QUEUE_HEADS,
        ),
    ),
    (
        "jobs/finish",
        include_str!("jobs/finish.rs"),
        statements!(jobs:
            JOB_START_MANY,
            JOB_COMPLETE_MANY,
            JOB_COMPLETE_DELETE_MANY,
            JOB_COMPLETE_RESULTS_MANY,
            JOB_COMPLETE_DELETE_RESULTS_MANY,
            JOB_COMPLETE_STEPS_MANY,
            JOB_COMPLETE_DELETE_STEPS_MANY,
            JOB_FAIL_MANY,
            JOB_HEARTBEAT_MANY,
            JOB_PROGRESS,
            JOB_RECORD_STEP,
            JOB_ADVANCE_CURSOR,
            JOB_CANCEL_HELD_MANY,
            JOB_RELEASE_MANY,
            JOB_SNOOZE_MANY,
            JOB_PARK_MANY,
        ),
    ),
    (
        "jobs/operate",
        include_str!("jobs/operate.rs"),
        statements!(jobs:
            JOB_CANCEL,
            JOB_RETRY,
            JOB_RETRY_FAILED,
            JOB_DELETE_FINISHED,
        ),
    ),
    (
        "jobs/maintain",
        include_str!("jobs/maintain.rs"),
        statements!(jobs:
            JOB_SET_ASIDE_DUE,
            JOB_PROMOTE_DUE,
            JOB_PROMOTE_DUE_BY,
            JOB_UNPARK,
            JOB_RESCUE_STALE,
            JOB_PRUNE,
            JOB_DEAD_TUPLES,
            JOB_VACUUM,
            JOB_VACUUM_TRUNCATE,
            JOB_INDEX_SIZES,
            JOB_INDEX_LEFTOVERS,
            JOB_INDEX_UPKEEP_LOCK,
            JOB_INDEX_UPKEEP_UNLOCK,
            JOB_INDEX_REBUILD_LIMITS,
            JOB_INDEX_REBUILD_UNLIMIT,
        ),
    ),
    (
        "jobs/browse",
        include_str!("jobs/browse.rs"),
        statements!(jobs:
            JOB_STATS_BY_TYPE,
            JOB_GET,
            JOB_GET_STATUS,
            JOB_BROWSE_NEWEST,
            JOB_WINDOW_FLOOR,
            JOB_WINDOW_FLOOR_TAGGED,
            JOB_BROWSE_RUN_AT,
            JOB_BROWSE_FINISHED,
            JOB_COUNT_BOUNDED,
            JOB_THROUGHPUT,
        ),
    ),
    (
        "keys",
        include_str!("keys.rs"),
        statements!(keys:
            KEY_LOCK,
            KEY_LOCK_FOR_INSERT,
            KEY_ROOM_FOR_INSERT,
            KEY_RECHECK,
            KEY_ADMIT,
            KEY_MARK_CHECKED,
            KEY_WITH_WAITING,
            KEY_NEW,
            KEY_SWEEP,
            KEY_ANY_WAITING,
            KEY_WAITING_OF_QUEUE,
        ),
    ),
    (
        "migrations",
        include_str!("migrations.rs"),
        statements!(migrations:
            MIGRATIONS_SETUP,
            MIGRATIONS_ADOPT,
            MIGRATIONS_TABLES,
            MIGRATIONS_APPLIED,
            MIGRATIONS_APPLIED_LEGACY,
            MIGRATIONS_RECORD,
            MIGRATIONS_FORGET,
        ),
    ),
    (
        "queues",
        include_str!("queues.rs"),
        statements!(queues:
            QUEUE_LOCK_FOR_COUNT,
            QUEUE_COUNT_HELD,
            QUEUE_ANY_LIMITED,
            QUEUE_PAUSE,
            QUEUE_RESUME,
            QUEUE_SET_LIMIT,
            QUEUE_SET_RATE,
            QUEUE_SET_KEY_LIMIT,
            QUEUE_LIST,
            QUEUE_LIST_HISTORY,
            QUEUE_DECLARE_ROW,
            QUEUE_DECLARED_LOCK,
            QUEUE_DECLARED_SET,
        ),
    ),
    (
        "results",
        include_str!("results.rs"),
        statements!(results:
            RESULT_READ,
            RESULT_PRUNE,
        ),
    ),
    (
        "runners",
        include_str!("runners.rs"),
        statements!(runners:
            RUNNER_REGISTER,
            RUNNER_SEEN,
            RUNNER_TYPES_ELSEWHERE,
            RUNNER_DEREGISTER,
            RUNNER_LIST,
            RUNNER_LEAD_GAUGES,
        ),
    ),
    (
        "schedules",
        include_str!("schedules.rs"),
        statements!(schedules:
            SCHEDULE_DECLARE,
            SCHEDULE_STATE,
            SCHEDULE_FIRE,
            SCHEDULE_LIST,
            SCHEDULE_SET_PAUSED,
            SCHEDULE_RUN_NOW,
        ),
    ),
    (
        "session",
        include_str!("session.rs"),
        statements!(session:
            READ_COMMITTED_BEGIN,
            SESSION_SETUP,
            REPORT_BEGIN,
            HOT_PATH_BEGIN,
            JIT_OFF_LOCAL,
            JIT_RESTORE,
            SESSION_RUNNER_SETUP,
            SESSION_READ_ONLY,
            SESSION_BACKEND_PID,
            SESSION_ENDS,
            SESSION_ALIVE,
            SESSION_LISTEN,
            SESSION_CLOCK,
            SESSION_SERVER_VERSION,
            SESSION_CANCEL,
        ),
    ),
    (
        "workflows",
        include_str!("workflows.rs"),
        statements!(workflows:
            WORKFLOW_INSERT,
            WORKFLOW_SETTLE_ENDED,
            WORKFLOW_PARENT_RESULTS,
            WORKFLOW_GET,
            WORKFLOW_STEPS,
            WORKFLOW_LIST,
            WORKFLOW_OF_STEP,
            WORKFLOW_PRUNE,
        ),
    ),
];

/// The doc comment above `const NAME` in `source`, as `-- ` lines.
fn doc_of(source: &str, name: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|line| line.starts_with(&format!("pub(crate) const {name}: &str")))
        .unwrap_or_else(|| panic!("no `pub(crate) const {name}: &str` in its file"));
    let mut doc: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .take_while(|line| line.starts_with("///"))
        .map(|line| line.trim_start_matches("///").trim_start())
        .collect();
    doc.reverse();
    doc.iter()
        .map(|line| format!("-- {line}").trim_end().to_owned() + "\n")
        .collect()
}

/// The names of the `pub(crate) const ...: &str` items of `source`, in order.
fn consts_of(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|line| line.strip_prefix("pub(crate) const "))
        .filter_map(|rest| rest.split_once(": &str").map(|(name, _)| name))
        .collect()
}

/// The expanded file of one source file.
fn expanded(file: &str, source: &str, statements: &[(&str, &str)]) -> String {
    let mut out = format!(
        "-- Every statement of jobqueue-core/src/sql/{file}.rs, whole, with its doc\n\
         -- comment: written by the test of src/sql/expanded.rs, not by hand.\n"
    );
    for (name, text) in statements {
        out.push_str(&format!("\n-- {name}\n"));
        out.push_str(&doc_of(source, name));
        let body: Vec<&str> = text.lines().map(str::trim_end).collect();
        let first = body.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
        let last = body.iter().rposition(|l| !l.trim().is_empty()).unwrap_or(0);
        for line in &body[first..=last] {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(";\n");
    }
    out
}

#[test]
fn the_expanded_statements_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql/expanded");
    let bless = std::env::var_os("JOBQUEUE_BLESS").is_some();
    let mut stale = Vec::new();
    for (file, source, statements) in FILES {
        let listed: Vec<&str> = statements.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            listed,
            consts_of(source),
            "src/sql/expanded.rs lists other statements of {file}.rs than the file has"
        );
        let text = expanded(file, source, statements);
        let path = dir.join(format!("{file}.sql"));
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        if bless {
            let folder = path.parent().expect("a folder under sql/expanded/");
            std::fs::create_dir_all(folder).expect("create a folder of sql/expanded/");
            std::fs::write(&path, text).expect("write an expanded file");
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the expanded statements of {} differ from the source's; look at the change, then \
         rewrite them with `JOBQUEUE_BLESS=1 cargo test -p jobqueue-core --lib expanded`",
        stale.join(", ")
    );
}
