//! The fetcher: the one thread that decides what the runner claims and
//! when. It owns everything its decisions read (the announced queues,
//! where claims resume, the limits and types last read, what the last claim
//! found, the claims under way) and waits on what wakes it: a wake-up (room
//! made, jobs made due), an announcement, a claim's report, the stop, or
//! its own timer (a re-poll, a rate limit's room). The claims themselves run
//! on the claim connections (`connections.rs`): a batch for the workers'
//! room, a second batch while the first runs when a backlog allows it, and
//! early claims of quiet queues while the runner is busy (their room is
//! at the end of this file). The
//! jobs they claim come back here and are delivered from here.

use super::connections::{Line, Report, Task};
use super::elsewhere::ElsewhereRead;
use super::limits::LimitsRead;
use super::pacing::{MAX_START_DELAY, RATE_ROOM_SLACK, next_repoll, prefetch, rate_limited_most};
use super::resume::Resumes;
use super::room::Room;
use super::shed::{HandBack, shed};
use super::under_way::Delivery;
use super::under_way::UnderWay;
use super::{Announced, Claimer};
use crate::RunnerConfig;
use crate::backoff::Backoff;
use crate::dispatch::{Disconnected, JobSender};
use crate::shared::Shared;
use crossbeam_channel::{Receiver, select};
use jobqueue_core::JobStatus;
use jobqueue_core::engine::{Claim, Claimed, GlobalLimits, MAX_CLAIM_QUEUES};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// While claims resume, how often a runner of every queue still claims
/// from every queue (reading each from its start): new queues are found
/// sooner by their notifications.
const FIND_QUEUES_EVERY: Duration = Duration::from_secs(30);

/// What wakes the fetcher, besides its claims' reports and the stop.
pub(crate) struct Wakeups {
    /// Room was made, or jobs made due (capacity 1: wake-ups coalesce).
    pub(super) wake: Receiver<()>,
    /// New jobs are due in a queue.
    pub(super) announced: Receiver<String>,
}

/// Runs the fetcher until `stop` disconnects; then delivers what the
/// claims under way took, and ends.
pub(super) fn run(
    shared: &Shared,
    claimer: &Claimer,
    jobs: JobSender,
    hand_back: HandBack,
    line: Line,
    wakeups: &Wakeups,
    stop: &Receiver<()>,
) {
    let mut fetcher = Fetcher::new(shared, claimer, jobs, hand_back, line);
    let reports = fetcher.line.reports().clone();
    loop {
        if shared.is_stopping() {
            break;
        }
        fetcher.dispatch();
        let timeout = fetcher.timeout();
        let delivered = select! {
            recv(wakeups.wake) -> _ => {
                fetcher.due_now();
                Ok(())
            }
            recv(wakeups.announced) -> queue => {
                if let Ok(queue) = queue {
                    fetcher.announced(queue);
                }
                Ok(())
            }
            recv(reports) -> report => match report {
                Ok(report) => fetcher.reported(report),
                Err(_) => break,
            },
            recv(stop) -> _ => break,
            default(timeout) => Ok(()),
        };
        if delivered.is_err() {
            // Every worker is gone: the runner is going down. The leases
            // of what is left expire and get recovered.
            return;
        }
        for queue in wakeups.announced.try_iter() {
            fetcher.announced(queue);
        }
    }
    fetcher.line.close();
    while !fetcher.under_way.is_empty() {
        let Ok(report) = reports.recv() else { break };
        if fetcher.reported(report).is_err() {
            return;
        }
    }
    log::debug!("fetcher stopped");
}

/// The fetcher's state: all of it its own.
struct Fetcher<'a> {
    shared: &'a Shared,
    claimer: &'a Claimer,
    jobs: JobSender,
    hand_back: HandBack,
    /// The claim connections, where its claims run, and the reads its
    /// decisions need (limits, types handled elsewhere, the heads of
    /// resuming queues, admissions of announced waiting jobs).
    line: Line,
    under_way: UnderWay,
    /// The fetch claims' claim: its queues, lease and handled types, and
    /// where a claim of every queue starts; the rest is set per claim.
    claim: Claim,
    /// The early claims' (named queues, no resume points).
    early_claim: Claim,
    /// The number of the next claim sent.
    next_number: u64,
    fetched: Delivery,
    early: Delivery,
    backoff: Backoff,
    /// When the next fetch claim is due.
    due_at: Instant,
    /// No fetch claim before this (a failed claim's backoff).
    retry_at: Instant,
    /// Woken since the last fetch claim was sent: a claim that comes back
    /// having run dry claims again at once.
    woken: bool,
    /// After finding work, re-poll at short intervals (see `next_repoll`)
    /// before falling back to the slow poll: jobs whose enqueue skipped its
    /// notification (debounced) commit after one that did.
    repoll: Duration,
    /// When a claim last found work.
    found_at: Option<Instant>,
    /// Moving average of a claim's round trip, in microseconds.
    claim_micros: u64,
    /// When the last fetch claim returned, in the runner's microseconds.
    last_claim: u64,
    /// Whether some of the runner's queues have a global or rate limit,
    /// read while the fetcher goes idle (not between a wake-up and its
    /// claim), and at least every other poll interval.
    limits: LimitsRead,
    /// The job types other live runners of its queues handle, read as often.
    elsewhere: ElsewhereRead,
    /// Where claims resume in each queue while a long transaction holds the
    /// xmin horizon, and when a claim of every queue last found its queues.
    resumes: Resumes,
    found_queues_at: Instant,
    /// The queues whose claims resume: early claims leave them alone.
    resuming: HashSet<String>,
    /// The queues announced while claims resume: how a runner of every
    /// queue learns of queues new to it meanwhile.
    announced_while_resuming: HashSet<String>,
    /// The queues announced, for the early claims.
    announced: Announced,
    /// The queues the last fetch claim found jobs in: not left to early
    /// claims.
    found_in: HashSet<String>,
    /// Whether the last fetch claim found a backlog (at least as many jobs
    /// as the early reserve): see the early reserve's room, in `fetcher.rs`.
    backlog: bool,
    /// Whether the last fetch claim took all it asked for.
    full: bool,
}

impl<'a> Fetcher<'a> {
    fn new(
        shared: &'a Shared,
        claimer: &'a Claimer,
        jobs: JobSender,
        hand_back: HandBack,
        line: Line,
    ) -> Self {
        let config = &shared.config;
        let early_claim = Claim::new(config.worker_id.clone())
            .lease(config.lease)
            .handled_types(shared.job_types.iter().cloned());
        let claim = early_claim.clone().queues(config.queues.iter().cloned());
        let now = Instant::now();
        Fetcher {
            shared,
            claimer,
            fetched: Delivery::new(jobs.clone(), hand_back.outcomes.clone(), false),
            early: Delivery::new(jobs.clone(), hand_back.outcomes.clone(), true),
            jobs,
            hand_back,
            line,
            under_way: UnderWay::default(),
            claim,
            early_claim,
            next_number: 0,
            backoff: Backoff::new(),
            due_at: now,
            retry_at: now,
            woken: false,
            repoll: config.poll_interval,
            found_at: None,
            claim_micros: 0,
            last_claim: 0,
            limits: LimitsRead::default(),
            elsewhere: ElsewhereRead::default(),
            resumes: Resumes::default(),
            found_queues_at: now,
            resuming: HashSet::new(),
            announced_while_resuming: HashSet::new(),
            announced: Announced::default(),
            found_in: HashSet::new(),
            backlog: false,
            full: false,
        }
    }

    /// A wake-up: a fetch claim is due now.
    fn due_now(&mut self) {
        self.due_at = Instant::now();
        self.woken = true;
    }

    /// New jobs are due in `queue`.
    fn announced(&mut self, queue: String) {
        // Only a runner of every queue claims from the queues announced
        // while claims resume.
        if self.shared.config.queues.is_empty() && !self.resuming.is_empty() {
            self.announced_while_resuming.insert(queue.clone());
        }
        self.announced.add(queue);
        self.due_now();
    }

    /// How long to wait for something to happen: until the next fetch
    /// claim is due, or, while one is due and waits for room or a
    /// connection (a finished job or a report wakes it), the poll interval.
    fn timeout(&self) -> Duration {
        let poll = self.shared.config.poll_interval;
        let at = self.due_at.max(self.retry_at);
        match at.checked_duration_since(Instant::now()) {
            Some(wait) if !wait.is_zero() => wait.min(poll),
            _ => poll,
        }
    }

    /// Sends the claims that are due to idle connections: an early claim
    /// of announced queues, then fetch claims (a second one only while a
    /// backlog lets two run at once: `may_pipeline`).
    fn dispatch(&mut self) {
        self.dispatch_early();
        loop {
            let now = Instant::now();
            let due = now >= self.due_at && now >= self.retry_at;
            let may = self.under_way.fetches() == 0 || self.may_pipeline();
            if !due || !may || self.line.idle() == 0 || !self.dispatch_fetch() {
                return;
            }
        }
    }

    /// Whether a fetch claim may be sent while another is under way: the
    /// last one took all it asked for (a backlog), none of the runner's
    /// queues has a global or rate limit, no claim resumes (a resuming
    /// claim starts after the last job taken, which the claim under way has
    /// not said yet), and no announced queue waits for the connection.
    ///
    /// A claim of limited queues locks their rows first: a second one waits
    /// for the first's commit, then steps over every job the first took,
    /// rechecking each (they were pending in its snapshot), which made a
    /// burn-down of a queue with a limit that never binds slower, not
    /// faster. The runner's own per-queue limits and the starts its free
    /// workers make in time are shared out among the claims under way by
    /// `UnderWay`.
    fn may_pipeline(&self) -> bool {
        self.full
            && self.limits.policy() == GlobalLimits::Skip
            && self.claim.resume.is_empty()
            && !self.announced.any_pending()
    }

    fn number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number
    }

    /// Sends an early claim of the announced queues, if early claims are
    /// on and a connection is idle (see the early reserve's room, in `fetcher.rs`).
    fn dispatch_early(&mut self) {
        if !self.announced.any_pending() || self.under_way.early() {
            return;
        }
        let config = &self.shared.config;
        let room = &self.claimer.room;
        let Some(free) = early_room(config, room, self.backlog) else {
            return self.fetch_claims_take_announced();
        };
        if self.line.idle() == 0 {
            // Taken once a connection is idle.
            return;
        }
        // Queues with jobs waiting for a worker are the fetch claims', and
        // so are those whose claims resume.
        let mut busy: HashSet<String> = self.jobs.waiting_queues().into_iter().collect();
        busy.extend(self.resuming.iter().cloned());
        let queues = self.announced.take_for_early(&busy);
        if queues.is_empty() {
            return self.fetch_claims_take_announced();
        }
        let mut claim = self.early_claim.clone();
        claim.queues = queues;
        claim.limit = free as i64;
        // As the fetch claims': of a rate-limited queue, only what free
        // workers start now, less what the claims under way may take.
        let free_workers = config.concurrency.saturating_sub(room.outstanding()) as i64;
        claim.rate_limited_most = Some(self.under_way.rate_limited_most(free_workers));
        claim.global_limits = self.limits.policy();
        claim.handled_elsewhere = self.elsewhere.types().to_vec();
        claim.queue_limits = self.under_way.queue_room(room.queue_room());
        crate::counters::Counters::add(&self.shared.counters.early_claims, 1);
        self.send(true, claim);
    }

    /// No early claim takes the announced queues (early claims are off,
    /// or every one of them is the fetch claims'): the fetch claims take
    /// them, at once if one left some out.
    fn fetch_claims_take_announced(&mut self) {
        if self.announced.early_off() {
            self.due_now();
        }
    }

    fn send(&mut self, early: bool, claim: Claim) {
        let number = self.number();
        let task = Task::new(number, early, claim);
        self.under_way.sent(&task);
        if !self.line.send(task) {
            // Every connection's thread is gone (logged by the line): no
            // claim is under way, and none is sent again.
            self.under_way.withdraw(number);
        }
    }

    /// Sends a fetch claim if the workers have room for one. Returns
    /// whether it did.
    fn dispatch_fetch(&mut self) -> bool {
        let shared = self.shared;
        let config = &shared.config;
        let poll = config.poll_interval;
        let (limits, elsewhere, claimer) = (&mut self.limits, &mut self.elsewhere, self.claimer);
        self.line.with_idle(|db| {
            limits.refresh_if_older(shared, db, 2 * poll);
            elsewhere.refresh_if_older(shared, db, 2 * poll);
            super::waiting::admit_announced(shared, claimer, db);
        });
        shed(shared, &self.jobs, &self.hand_back, self.last_claim);
        let room = &self.claimer.room;
        let job_micros = shared.job_micros.load(Ordering::Relaxed);
        let Some(free) = self.room_for_claim(job_micros) else {
            return false;
        };
        let outstanding = room.outstanding();
        self.claim.limit = free as i64;
        let starts_in_time =
            rate_limited_most(config, outstanding, job_micros, self.claim_micros, free);
        self.claim.rate_limited_most = Some(self.under_way.rate_limited_most(starts_in_time));
        // Its handlers start up to a claim's round trip after the claim's
        // time (twice the moving average, for its spread); what a limit's
        // least margin does not cover is counted on top (see
        // `Claim::start_delay`): nothing while claims are quick.
        self.claim.start_delay = Duration::from_micros(self.claim_micros.saturating_mul(2))
            .saturating_sub(jobqueue_core::MIN_RATE_MARGIN)
            .min(MAX_START_DELAY);
        self.claim.global_limits = self.limits.policy();
        self.claim.handled_elsewhere = self.elsewhere.types().to_vec();
        self.claim.queue_limits = self.under_way.queue_room(room.queue_room());
        self.aim();
        self.leave_to_early();
        self.woken = false;
        if self.under_way.fetches() > 0 {
            crate::counters::Counters::add(&shared.counters.overlapped_claims, 1);
        }
        let claim = self.claim.clone();
        self.send(false, claim);
        true
    }

    /// The room for a fetch claim: the workers' capacity (with the prefetch
    /// for jobs of `job_micros`) less the jobs held and what the claims
    /// under way may take, at most a batch; `None` while that is less than
    /// a chunk (half a batch) and the runner holds jobs. Then the workers
    /// are asked for a wake-up once there is a chunk of room (a report
    /// wakes the fetcher too), and the room looked at again in case it
    /// came about meanwhile.
    fn room_for_claim(&self, job_micros: u64) -> Option<usize> {
        let config = &self.shared.config;
        let room = &self.claimer.room;
        let capacity = config.concurrency + prefetch(config, job_micros, self.claim_micros);
        let chunk = (capacity.min(config.batch_size) / 2).max(1);
        let under_way = self.under_way.jobs();
        let mut asked = false;
        loop {
            let held = room.outstanding() + under_way;
            let free = capacity.saturating_sub(held).min(config.batch_size);
            if free > 0 && (free >= chunk || held == 0) {
                return Some(free);
            }
            if asked {
                return None;
            }
            room.wake_below(capacity.saturating_sub(chunk + under_way));
            asked = true;
            if under_way > 0 {
                return None;
            }
        }
    }

    /// Looks at the heads of the queues due for it, then sets where the
    /// claim resumes (see `resume.rs`). While some queue resumes, a runner
    /// of every queue claims from the queues it claimed from lately and
    /// those announced since, and from every queue every
    /// [`FIND_QUEUES_EVERY`].
    fn aim(&mut self) {
        let shared = self.shared;
        let now = Instant::now();
        let due = self.resumes.due_looks(now);
        let resumes = &mut self.resumes;
        if !due.is_empty()
            && let Some(Err(e)) = self.line.with_idle(|db| {
                db.run(&shared.health, |session| {
                    resumes.look_at(&due, session, &shared.horizon, now)
                })
            })
        {
            log::debug!("looking at the heads of {} queues failed: {e}", due.len());
        }
        self.claim.resume = self.resumes.points();
        self.resuming.clear();
        self.resuming
            .extend(self.claim.resume.iter().map(|point| point.queue.clone()));
        if shared.config.queues.is_empty() {
            let announced = self.announced_while_resuming.drain();
            self.claim.queues = match self.resumes.queues_if_resuming() {
                Some(mut queues) if self.found_queues_at.elapsed() < FIND_QUEUES_EVERY => {
                    queues.extend(announced);
                    queues.sort_unstable();
                    queues.dedup();
                    queues
                }
                _ => {
                    self.found_queues_at = now;
                    self.claim.resume.clear();
                    Vec::new()
                }
            };
        }
    }

    /// Leaves the announced queues out of the claim while early claims are
    /// on (see the early reserve's room, in `fetcher.rs`), unless found in by the last fetch claim, with
    /// jobs waiting for a worker, or resuming: the fetch claims take those
    /// as always.
    fn leave_to_early(&mut self) {
        if self.announced.is_empty()
            || early_room(&self.shared.config, &self.claimer.room, self.backlog).is_none()
        {
            return;
        }
        let mut busy = self.found_in.clone();
        busy.extend(self.jobs.waiting_queues());
        busy.extend(self.resuming.iter().cloned());
        for queue in self.announced.left_out_except(&busy) {
            self.claim.cap_queue(&queue, 0);
        }
    }

    /// A claim came back: delivers what is due for delivery.
    fn reported(&mut self, report: Report) -> Result<(), Disconnected> {
        self.line.returned(&report);
        for report in self.under_way.returned(report) {
            if report.task.early {
                self.early_returned(report)?;
            } else {
                self.fetch_returned(report)?;
            }
        }
        Ok(())
    }

    fn early_returned(&mut self, report: Report) -> Result<(), Disconnected> {
        match report.claimed {
            Ok(claimed) => self.early.deliver(
                self.shared,
                self.claimer,
                claimed.rows,
                report.took,
                report.started,
                &claimed.rate_margins,
            )?,
            // The fetch claims take them instead.
            Err(e) if !report.lost => {
                log::debug!("early claim failed: {}", crate::health::one_line(&e));
            }
            Err(_) => {}
        }
        // The fetch claims may have left some of its queues out meanwhile.
        if self.announced.early_returned() {
            self.due_now();
        }
        Ok(())
    }

    fn fetch_returned(&mut self, report: Report) -> Result<(), Disconnected> {
        let shared = self.shared;
        let config = &shared.config;
        let Report {
            task,
            started,
            took,
            claimed,
            lost,
        } = report;
        let Claimed {
            rows,
            rate_room_in,
            rate_margins,
            ..
        } = match claimed {
            Ok(claimed) => claimed,
            Err(e) => {
                // A lost connection is logged once per outage by `Db`.
                if !lost {
                    log::warn!("claim failed: {}", crate::health::one_line(&e));
                }
                self.retry_at = Instant::now() + self.backoff.next_delay();
                return Ok(());
            }
        };
        self.backoff.reset();
        let micros = took.as_micros().min(u128::from(u32::MAX)) as u64;
        self.claim_micros = if self.claim_micros == 0 {
            micros
        } else {
            (self.claim_micros * 7 + micros) / 8
        };
        let got = rows.len();
        let asked = usize::try_from(task.claim.limit).unwrap_or(0);
        self.backlog = got >= config.early_reserve();
        self.full = got >= asked;
        self.found_in.clear();
        for row in &rows {
            // One allocation per queue, not per job.
            if !self.found_in.contains(&row.queue) {
                self.found_in.insert(row.queue.clone());
            }
        }
        self.last_claim = shared.micros_now();
        if rows.iter().any(|row| row.status == JobStatus::Unhandled) {
            self.elsewhere.expire();
        }
        self.claim.rotate(&rows);
        self.resumes.note_claimed(&rows, Instant::now());
        if !task.claim.resume.is_empty() {
            crate::counters::Counters::add(&shared.counters.resumed_claims, 1);
        }
        self.fetched
            .deliver(shared, self.claimer, rows, took, started, &rate_margins)?;
        let now = Instant::now();
        if got > 0 {
            self.found_at = Some(now);
        }
        let since_found = self.found_at.map_or(Duration::MAX, |at| at.elapsed());
        self.repoll = next_repoll(config, got, self.repoll, since_found);
        // A claim of every queue that stopped at its most queues may have
        // left others with due jobs.
        let more_queues =
            task.claim.queues.is_empty() && self.found_in.len() as i64 >= MAX_CLAIM_QUEUES;
        if got < asked && !more_queues {
            // The queue ran dry, or a rate limit held the claim back:
            // finishing jobs cannot bring more. A rate limit gives room
            // when its window drops a start: claim again then, whatever
            // the re-poll's pace (or at once if woken since the claim was
            // sent).
            self.claimer.room.ran_dry();
            let limits = &mut self.limits;
            self.line
                .with_idle(|db| limits.refresh_if_older(shared, db, config.poll_interval));
            let pause = match rate_room_in {
                Some(room_in) => room_in.max(RATE_ROOM_SLACK),
                None => self.repoll,
            };
            if !self.woken {
                self.due_at = now + pause.min(config.poll_interval);
            }
        } else {
            self.due_at = now;
        }
        Ok(())
    }
}

// Early claims: while the runner is busy with the backlog of some queues,
// jobs announced in another queue are claimed at once, on the claim
// connection the fetcher's batch is not using, so they start at the next
// free worker instead of waiting for room, or for the batch under way,
// behind the others' jobs.
//
// An early claim takes only from the queues announced since the last one,
// and of those only the queues of which the runner holds no job waiting
// for a worker (those queues' new jobs would wait anyway), at most
// `RunnerConfig::early_reserve` jobs held at once. An idle runner needs
// none: its fetch claims come at once. Queues whose claims resume (a long
// transaction holds the xmin horizon, see `resume.rs`) are left to the
// fetch claims: an early claim reads its queues from the start, through
// every job claimed since the transaction began.
//
// Meanwhile the fetch claims leave the announced queues out
// (`Announced::left_out_except`): a claim of the backlog's batch takes
// tens of milliseconds on a saturated machine, and a quiet queue's new job
// that it locked (`SKIP LOCKED` then hides it from the early claim) would
// start only once the whole batch is delivered. Once the early claim
// returned, whatever it found, the fetcher claims at once, so no job
// waits on a queue left out.
//
// Early claims are a mode of the fetcher's loop (`fetcher.rs`), which
// decides them from its own state: no other thread takes part.

/// Room in the early reserve, or `None` when early claims are off: the
/// runner is idle (it holds no job and its last fetch claim found no
/// backlog: fetch claims come at once, and as fast).
pub(super) fn early_room(config: &RunnerConfig, room: &Room, backlog: bool) -> Option<usize> {
    let free = config.early_reserve().saturating_sub(room.early_held());
    let busy = room.outstanding() > 0 || backlog;
    (free > 0 && busy).then_some(free)
}
