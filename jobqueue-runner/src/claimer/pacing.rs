//! How much the fetcher claims and when: the prefetch grown for short
//! jobs, the re-polls after found work, and how many jobs of rate-limited
//! queues one claim may take.

use std::time::Duration;

use crate::RunnerConfig;

/// The least wait for a rate limit's room: its window drops a start at a
/// time the claim could only estimate.
pub(super) const RATE_ROOM_SLACK: Duration = Duration::from_millis(1);

/// First re-poll after a claim that found work.
const QUICK_REPOLL: Duration = Duration::from_millis(2);

/// For this long after a claim that found work, re-polls come at most
/// `LATE_COMMIT_GAP` apart. Enqueues within a notification's debounce send
/// none of their own (see `jobqueue_core::engine::NOTIFY_DEBOUNCE`), and their
/// transactions may commit well after the one that notified (the
/// application's work in them): re-polls that grew apart at once would
/// find those jobs only as late as the gap had grown.
const LATE_COMMITS: Duration = Duration::from_millis(250);

/// The most time between re-polls within `LATE_COMMITS` of found work.
const LATE_COMMIT_GAP: Duration = Duration::from_millis(8);

/// The wait before the next claim after one that found `got` jobs, when
/// the last found some `since_found` ago and the wait before was `last`.
pub(super) fn next_repoll(
    config: &RunnerConfig,
    got: usize,
    last: Duration,
    since_found: Duration,
) -> Duration {
    if got > 0 {
        return QUICK_REPOLL;
    }
    let most = if since_found < LATE_COMMITS {
        LATE_COMMIT_GAP
    } else {
        config.poll_interval
    };
    (last * 2).min(most).min(config.poll_interval)
}

/// Jobs to claim beyond what the workers can start at once: the configured
/// prefetch, raised (up to two batches: one being claimed while the last is
/// written) to what the workers finish during one claim round trip. A job
/// prefetched so would not start sooner on another runner, since it starts
/// before a new claim could return; for jobs that take longer than a round
/// trip, this stays at the configured prefetch. `job_micros` and
/// `claim_micros` are the average handler run time and claim round trip (0:
/// not measured yet).
pub(super) fn prefetch(config: &RunnerConfig, job_micros: u64, claim_micros: u64) -> usize {
    if job_micros == 0 || claim_micros == 0 {
        return config.effective_prefetch();
    }
    let finished_per_claim = (config.concurrency as u64).saturating_mul(claim_micros) / job_micros;
    (finished_per_claim as usize).clamp(config.effective_prefetch(), config.max_prefetch())
}

/// The longest a claim's starts are counted past a rate limit's margin for
/// the claim's own round trip (a claim slower than this is an outage, not
/// a delay to plan for).
pub(super) const MAX_START_DELAY: Duration = Duration::from_secs(1);

/// How many jobs of rate-limited queues a claim may take, all of them
/// together: what the free workers start at once, and what the busy ones
/// are likely to start within what is left of the least margin of a rate
/// limit once the claim is back (by the moving averages of a job's time
/// and of a claim's round trip; none while a job's time is unknown, or
/// when a claim takes the whole margin). A rate limit counts claims; a job
/// that waits for a worker past its limit's margin is handed back
/// unstarted, its start counted, so a claim takes no more than the workers
/// start in time: a claim of hundreds of short jobs of rate-limited queues
/// took longer than the margin itself, and every job of it came back late.
pub(super) fn rate_limited_most(
    config: &RunnerConfig,
    outstanding: usize,
    job_micros: u64,
    claim_micros: u64,
    room: usize,
) -> i64 {
    let free = config.concurrency.saturating_sub(outstanding);
    let margin_micros = jobqueue_core::MIN_RATE_MARGIN.as_micros() as u64;
    let soon = (config.concurrency as u64)
        .saturating_mul(margin_micros.saturating_sub(claim_micros))
        .checked_div(job_micros)
        .unwrap_or(0);
    let most = free.saturating_add(usize::try_from(soon).unwrap_or(usize::MAX));
    most.min(room) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RunnerConfig {
        let mut config = RunnerConfig::new("postgres://x/y").concurrency(8);
        config.batch_size = 100;
        config
    }

    #[test]
    fn the_prefetch_grows_for_short_jobs_up_to_two_batches() {
        let config = config();
        // Not measured yet, or jobs longer than a claim: the configured 2.
        assert_eq!(prefetch(&config, 0, 500), 2);
        assert_eq!(prefetch(&config, 10_000, 500), 2);
        // 8 workers finish 8 × 500 / 50 = 80 jobs of 50 µs during a claim.
        assert_eq!(prefetch(&config, 50, 500), 80);
        // No-op jobs: capped at two batches.
        assert_eq!(prefetch(&config, 1, 500), 200);
    }

    #[test]
    fn re_polls_stay_close_for_a_while_after_found_work_then_back_off() {
        let config = config();
        let ms = Duration::from_millis;
        assert_eq!(next_repoll(&config, 5, ms(1000), ms(0)), QUICK_REPOLL);
        // Within LATE_COMMITS of found work: doubling, capped at the gap.
        let mut wait = QUICK_REPOLL;
        for _ in 0..10 {
            wait = next_repoll(&config, 0, wait, ms(100));
            assert!(wait <= LATE_COMMIT_GAP, "{wait:?}");
        }
        assert_eq!(wait, LATE_COMMIT_GAP);
        // Later: back to doubling up to the poll interval.
        for _ in 0..20 {
            wait = next_repoll(&config, 0, wait, ms(2000));
        }
        assert_eq!(wait, config.poll_interval);
    }

    #[test]
    fn claims_of_rate_limited_queues_take_what_starts_within_the_margin() {
        let config = config();
        // Job time unknown: the free workers only.
        assert_eq!(rate_limited_most(&config, 3, 0, 1_000, 100), 5);
        // 8 workers, jobs of 1 ms, claims of 5 ms: 8 × 20 ms / 1 ms more.
        assert_eq!(rate_limited_most(&config, 8, 1_000, 5_000, 500), 160);
        // A claim that takes the whole margin: the free workers only.
        assert_eq!(rate_limited_most(&config, 0, 10, 40_000, 500), 8);
        // Never more than the claim's room.
        assert_eq!(rate_limited_most(&config, 0, 10, 1_000, 50), 50);
    }
}
