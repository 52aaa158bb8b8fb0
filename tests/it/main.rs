//! The workspace's integration tests, in one test binary: each file of
//! this folder is a module, and libtest runs all their tests in parallel
//! threads of one process (each on a database of its own, see
//! `jobqueue_tests::TestDb`), so the long fault tests run beside the rest
//! rather than after them, and the harness is linked once instead of once
//! per file.
//!
//! Three tests hold something a process has only one of, and keep a
//! binary of their own beside this one: `tests/embedded.rs` (it installs
//! the process's logger and sends SIGTERM to its own process),
//! `tests/otel_trace.rs` (the global `tracing` subscriber and OpenTelemetry
//! propagator) and `tests/tracing_runner.rs` (the global `tracing`
//! subscriber, which sees the spans of every runner in the process).
//! Three files that need the cluster and the machine quiet around them
//! run in `tests/quiet/` after this binary (see there why).

mod admin;
mod async_enqueue;
mod async_handlers;
mod async_patterns;
mod async_signup;
mod backpressure;
mod bad_input;
mod bounded;
mod browser_harness;
mod chaos;
mod claim_concurrency;
mod claim_order;
mod claim_overlap;
mod claim_spread;
mod cli;
mod cli_completions;
mod cli_exit_status;
mod cli_hostile;
mod cli_json;
mod cli_pipe;
mod concurrency_keys;
mod dashboard;
mod dashboard_browser;
mod deadlocks;
mod declared_queues;
mod delete_on_complete;
mod derive_enqueue;
mod doctor;
mod durable_steps;
mod enqueue;
mod enqueue_hooks;
mod errors;
mod fault_clock;
mod fault_crash;
mod fault_failover;
mod fault_fence;
mod fault_hostile_db;
mod fault_poison;
mod fault_postgres;
mod fault_shutdown;
mod fault_stale;
mod fencing;
mod guide;
mod http_limits;
mod kit_database;
mod kit_drain;
mod kit_enqueued;
mod kit_perform;
mod ledger_example;
mod lifecycle;
mod maintenance;
mod metrics;
mod middleware;
mod migrations;
mod notify;
mod pgbouncer;
mod plans;
mod private_cluster;
mod progress;
mod queue_control;
mod quickstart;
mod races;
mod readme;
mod redaction;
mod rescue;
mod results;
mod retry;
mod robustness;
mod runner;
mod runner_process;
mod runners;
mod statements;
mod tags;
mod tls;
mod traced_signup;
mod tracing_spans;
mod unique_key;
mod workflow_example;
mod workflows;
mod workflows_kill;
