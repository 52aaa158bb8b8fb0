//! The fetcher: claims batches of jobs when workers have room, and sleeps
//! until woken (a notification, a finished job) or the poll interval passes.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use jobqueue_core::JobStatus;
use jobqueue_core::engine::{Claim, Claimed, MAX_CLAIM_QUEUES};

use super::Claimer;
use super::deliver::Delivery;
use super::elsewhere::ElsewhereRead;
use super::limits::LimitsRead;
use super::resume::Resumes;
use crate::RunnerConfig;
use crate::backoff::Backoff;
use crate::db::Db;
use crate::dispatch::{JobReceiver, JobSender};
use crate::messages::{Outcome, OutcomeKind};
use crate::shared::Shared;
use crate::sync::lock;
use crate::trace::ClaimSpan;

/// The least wait for a rate limit's room: its window drops a start at a
/// time the claim could only estimate.
const RATE_ROOM_SLACK: Duration = Duration::from_millis(1);

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
fn next_repoll(
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
fn prefetch(config: &RunnerConfig, job_micros: u64, claim_micros: u64) -> usize {
    if job_micros == 0 || claim_micros == 0 {
        return config.effective_prefetch();
    }
    let finished_per_claim = (config.concurrency as u64).saturating_mul(claim_micros) / job_micros;
    (finished_per_claim as usize).clamp(config.effective_prefetch(), config.max_prefetch())
}

/// How many waiting jobs to hand back: those beyond the configured prefetch,
/// once the workers have started nothing for [`SHED_AFTER`] (`idle_for`).
fn to_shed(config: &RunnerConfig, waiting: usize, idle_for: Duration) -> usize {
    if idle_for < SHED_AFTER {
        return 0;
    }
    waiting.saturating_sub(config.effective_prefetch())
}

/// Waits for a wake-up, a stop, or `timeout`. Returns false on stop.
fn wait(wake: &Receiver<()>, stop: &Receiver<()>, timeout: Duration) -> bool {
    let stopped = select! {
        recv(wake) -> _ => false,
        recv(stop) -> _ => true,
        default(timeout) => false,
    };
    !stopped
}

/// What the fetcher needs to hand jobs back without a worker: claimed jobs
/// nobody is starting (released), and jobs of types this runner has no
/// handler for (set aside).
pub(crate) struct HandBack {
    /// The workers' queue, to take unstarted jobs back out of.
    pub(crate) queued: JobReceiver,
    /// Where handed-back jobs go (the completer writes them).
    pub(crate) outcomes: Sender<Outcome>,
}

/// How long the workers may start nothing while claimed jobs wait before the
/// waiting jobs beyond the configured prefetch are handed back.
const SHED_AFTER: Duration = Duration::from_millis(100);

/// Hands back claimed jobs beyond the configured prefetch when every worker
/// has been busy for `SHED_AFTER`: the prefetch grew while jobs were short,
/// the jobs now are long, and another runner could start the waiting ones.
/// They go back to pending without using up an attempt.
fn shed(shared: &Shared, jobs: &JobSender, shed: &HandBack, last_claim: u64) {
    let waiting = jobs.len();
    if waiting <= shared.config.effective_prefetch() {
        return;
    }
    // Since the last job start or the last claim, whichever came later.
    let idle_for = shared
        .micros_now()
        .saturating_sub(shared.last_start.load(Ordering::Relaxed).max(last_claim));
    let excess = to_shed(&shared.config, waiting, Duration::from_micros(idle_for));
    if excess == 0 {
        return;
    }
    // Jobs run at least this long now: the prefetch drops at once.
    shared.job_micros.fetch_max(idle_for, Ordering::Relaxed);
    let mut released = 0;
    for _ in 0..excess {
        let Some(claimed) = shed.queued.try_recv() else {
            break;
        };
        let _ = shed
            .outcomes
            .send(Outcome::new(&claimed.state, OutcomeKind::Release));
        released += 1;
    }
    if released > 0 {
        log::info!("handed back {released} claimed jobs: every worker is busy with long jobs");
    }
}

/// While claims resume, how often a runner of every queue still claims
/// from every queue (reading each from its start): new queues are found
/// sooner by their notifications.
const FIND_QUEUES_EVERY: Duration = Duration::from_secs(30);

/// Looks at the heads of the queues due for it, then sets where `claim`
/// resumes (see `resume.rs`). While some queue resumes, a runner of every
/// queue claims from the queues it claimed from lately and those announced
/// since, and from every queue every [`FIND_QUEUES_EVERY`].
fn aim(
    shared: &Shared,
    claimer: &Claimer,
    db: &mut Db,
    resumes: &mut Resumes,
    claim: &mut Claim,
    found_queues_at: &mut Instant,
) {
    let now = Instant::now();
    let due = resumes.due_looks(now);
    if !due.is_empty()
        && let Err(e) = db.run(&shared.health, |session| {
            resumes.look_at(&due, session, &shared.horizon, now)
        })
    {
        log::debug!("looking at the heads of {} queues failed: {e}", due.len());
    }
    claim.resume = resumes.points();
    {
        // Usually empty: nothing allocated.
        let mut resuming = lock(&claimer.resuming);
        resuming.clear();
        resuming.extend(claim.resume.iter().map(|point| point.queue.clone()));
    }
    if shared.config.queues.is_empty() {
        let announced: Vec<String> = lock(&claimer.announced_while_resuming).drain().collect();
        claim.queues = match resumes.queues_if_resuming() {
            Some(mut queues) if found_queues_at.elapsed() < FIND_QUEUES_EVERY => {
                queues.extend(announced);
                queues.sort_unstable();
                queues.dedup();
                queues
            }
            _ => {
                *found_queues_at = now;
                claim.resume.clear();
                Vec::new()
            }
        };
    }
}

/// Leaves the queues announced to the early claims out of `claim` (see
/// `early.rs`), unless `found_in` by the last claim, with jobs waiting for
/// a worker, or resuming: the fetcher's claims take those as always.
fn leave_to_early(
    shared: &Shared,
    claimer: &Claimer,
    jobs: &JobSender,
    claim: &mut Claim,
    found_in: &HashSet<String>,
) {
    if claimer.announced.is_empty() {
        return;
    }
    let mut busy = found_in.clone();
    busy.extend(jobs.waiting_queues());
    busy.extend(lock(&claimer.resuming).iter().cloned());
    for queue in super::early::left_to_early(shared, claimer, &busy) {
        claim.cap_queue(&queue, 0);
    }
}

pub(super) fn run(
    shared: &Shared,
    claimer: &Claimer,
    jobs: JobSender,
    hand_back: HandBack,
    wake: Receiver<()>,
    stop: Receiver<()>,
) {
    let config = &shared.config;
    let mut db = Db::new(shared, "fetcher");
    let mut backoff = Backoff::new();
    // After finding work, re-poll at short intervals (see `next_repoll`)
    // before falling back to the slow poll: jobs whose enqueue skipped its
    // notification (debounced) commit after one that did.
    let mut repoll = config.poll_interval;
    // When a claim last found work.
    let mut found_at: Option<Instant> = None;
    // Moving average of a claim's round trip, in microseconds.
    let mut claim_micros = 0u64;
    // When the last claim returned, in the runner's microseconds.
    let mut last_claim = 0u64;
    let mut claim = Claim::new(config.worker_id.clone())
        .queues(config.queues.iter().cloned())
        .lease(config.lease)
        .handled_types(shared.job_types.iter().cloned());
    let mut delivery = Delivery::new(jobs.clone(), hand_back.outcomes.clone(), false);
    // Whether some of this runner's queues have a global or rate limit, and when
    // that was last read: checked while the fetcher goes idle (not between
    // a wake-up and its claim), and at least every other poll interval.
    let mut limits = LimitsRead::default();
    // The job types other live runners of its queues handle, read as often.
    let mut elsewhere = ElsewhereRead::default();
    // Where claims resume in each queue while a long transaction holds the
    // xmin horizon, and when a claim of every queue last found its queues.
    let mut resumes = Resumes::default();
    let mut found_queues_at = Instant::now();
    // The queues the last claim found jobs in: not left to early claims.
    let mut found_in: HashSet<String> = HashSet::new();
    loop {
        if shared.is_stopping() {
            break;
        }
        limits.refresh_if_older(shared, &claimer.limits, &mut db, 2 * config.poll_interval);
        elsewhere.refresh_if_older(
            shared,
            &claimer.elsewhere,
            &mut db,
            2 * config.poll_interval,
        );
        claim.global_limits = claimer.limits.policy();
        claim.handled_elsewhere = claimer.elsewhere.types();
        claim.queue_limits = claimer.room.queue_room();
        shed(shared, &jobs, &hand_back, last_claim);
        super::waiting::admit_announced(shared, claimer, &mut db);
        let job_micros = shared.job_micros.load(Ordering::Relaxed);
        let capacity = config.concurrency + prefetch(config, job_micros, claim_micros);
        // Claim in chunks: wait until at least this much room, unless idle.
        let chunk = (capacity.min(config.batch_size) / 2).max(1);
        let outstanding = claimer.room.outstanding();
        let room = capacity.saturating_sub(outstanding).min(config.batch_size);
        if room == 0 || (room < chunk && outstanding > 0) {
            // Ask the workers for a wake-up once there is a chunk of room,
            // then look again in case it came about meanwhile.
            claimer.room.wake_below(capacity - chunk);
            if claimer.room.outstanding() > capacity - chunk
                && !wait(&wake, &stop, config.poll_interval)
            {
                break;
            }
            continue;
        }
        claim.limit = room as i64;
        claim.rate_limited_most = Some(rate_limited_most(
            config,
            outstanding,
            job_micros,
            claim_micros,
            room,
        ));
        // Its handlers start up to a claim's round trip after the claim's
        // time (twice the moving average, for its spread); what a limit's
        // least margin does not cover is counted on top (see
        // `Claim::start_delay`): nothing while claims are quick.
        claim.start_delay = Duration::from_micros(claim_micros.saturating_mul(2))
            .saturating_sub(jobqueue_core::MIN_RATE_MARGIN)
            .min(MAX_START_DELAY);
        aim(
            shared,
            claimer,
            &mut db,
            &mut resumes,
            &mut claim,
            &mut found_queues_at,
        );
        leave_to_early(shared, claimer, &jobs, &mut claim, &found_in);
        let started = Instant::now();
        let span = ClaimSpan::enter("fetcher", &claim);
        match db.run(&shared.health, |session| session.claim_paced(&claim)) {
            Ok(Claimed {
                rows,
                rate_room_in,
                rate_margins,
                ..
            }) => {
                span.claimed(rows.len());
                backoff.reset();
                let took = started.elapsed();
                let micros = took.as_micros().min(u128::from(u32::MAX)) as u64;
                claim_micros = if claim_micros == 0 {
                    micros
                } else {
                    (claim_micros * 7 + micros) / 8
                };
                let got = rows.len();
                claimer.note_backlog(got >= config.early_reserve());
                found_in.clear();
                for row in &rows {
                    // One allocation per queue, not per job.
                    if !found_in.contains(&row.queue) {
                        found_in.insert(row.queue.clone());
                    }
                }
                last_claim = shared.micros_now();
                if rows.iter().any(|row| row.status == JobStatus::Unhandled) {
                    elsewhere.expire();
                }
                claim.rotate(&rows);
                resumes.note_claimed(&rows, Instant::now());
                if !claim.resume.is_empty() {
                    crate::counters::Counters::add(&shared.counters.resumed_claims, 1);
                }
                if delivery
                    .deliver(shared, claimer, rows, took, started, &rate_margins)
                    .is_err()
                {
                    // Every worker is gone: the runner is going down. The
                    // leases of what is left expire and get recovered.
                    return;
                }
                if got > 0 {
                    found_at = Some(Instant::now());
                }
                let since_found = found_at.map_or(Duration::MAX, |at| at.elapsed());
                repoll = next_repoll(config, got, repoll, since_found);
                // A claim of every queue that stopped at its most queues
                // may have left others with due jobs.
                let more_queues =
                    claim.queues.is_empty() && found_in.len() as i64 >= MAX_CLAIM_QUEUES;
                if got < room && !more_queues {
                    // The queue ran dry, or a rate limit held the claim
                    // back: finishing jobs cannot bring more. A rate limit
                    // gives room when its window drops a start: claim
                    // again then, whatever the re-poll's pace.
                    claimer.room.ran_dry();
                    limits.refresh_if_older(shared, &claimer.limits, &mut db, config.poll_interval);
                    let pause = match rate_room_in {
                        Some(room_in) => room_in.max(RATE_ROOM_SLACK),
                        None => repoll,
                    };
                    if !wait(&wake, &stop, pause.min(config.poll_interval)) {
                        break;
                    }
                }
            }
            Err(e) => {
                // A lost connection is logged once per outage by `Db`.
                if !db.lost_connection() {
                    log::warn!("claim failed: {}", crate::health::one_line(&e));
                }
                if crate::backoff::stopped_within(&stop, backoff.next_delay()) {
                    break;
                }
            }
        }
    }
    log::debug!("fetcher stopped");
}

/// The longest a claim's starts are counted past a rate limit's margin for
/// the claim's own round trip (a claim slower than this is an outage, not
/// a delay to plan for).
const MAX_START_DELAY: Duration = Duration::from_secs(1);

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
fn rate_limited_most(
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

    #[test]
    fn waiting_jobs_beyond_the_prefetch_are_shed_once_workers_stall() {
        let config = config();
        assert_eq!(to_shed(&config, 50, Duration::from_millis(20)), 0);
        assert_eq!(to_shed(&config, 50, SHED_AFTER), 48);
        assert_eq!(to_shed(&config, 2, Duration::from_secs(1)), 0);
    }
}
