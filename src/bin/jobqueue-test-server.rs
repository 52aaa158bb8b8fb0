//! Prints the URL of the suite's PostgreSQL server (`DATABASE_URL`, else
//! the suite's own cluster, started if it is not running: see
//! `jobqueue_tests::server_url`), so that `scripts/test` can hand it to the
//! tests that take their server from `DATABASE_URL` as an application's
//! tests do (`examples/app_worker.rs`).

fn main() {
    println!("{}", jobqueue_tests::server_url());
}
