//! Where the fetcher's claims of each queue resume while a long transaction
//! holds the xmin horizon.
//!
//! Every claimed job leaves its `pending` version in the claim index until
//! vacuum removes it, and vacuum cannot while an older snapshot is open. A
//! claim from the start of a queue reads all of those entries, so during a
//! long report every claim gets slower than the last. The fetcher keeps,
//! for each queue it claims from, the last job it took, and looks at each
//! queue's head once a second ([`jobqueue_core::engine::queue_head`]). When that
//! look reads more than [`RESUME_ABOVE`] entries to find the first due job,
//! the queue's claims resume after the last job taken
//! ([`jobqueue_core::engine::Resume`]) until a look finds the way clear again.
//! Each look also moves the point to just before the first due job it
//! found: back, to a job the resumed claims would pass over (a retry come
//! due, a job another runner skipped), or ahead, past the jobs other
//! runners took.
//!
//! A look that reads more than that, when the xmin horizon is not the one
//! the queue's last look saw, looks again at once, and the second look
//! decides. The first marks dead the entries whose versions no snapshot
//! needs any more, and the second steps over those without counting them:
//! it counts only what a claim from the start would still have to read.
//! Without it, once claims resume nothing but the looks walks the start of
//! the queue, so each look found there the jobs claimed since the one
//! before (5,000 a second at 5,000 jobs/s) and claims kept resuming long
//! after the long transaction had ended. While the same transaction holds
//! the horizon, nothing a look reads can be marked dead, and a second look
//! would only read it all again (two looks at 1.3 million entries held the
//! fetcher long enough to show in the soak's pickup p95: 200–370 ms).
//!
//! In the normal state a look reads one entry, nothing resumes, and claims
//! are exactly as without this.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobqueue_core::engine::{MAX_QUEUE_HEADS, QueueHead, QueueSession, Resume};
use jobqueue_core::{JobId, JobRow};

use crate::horizon::HorizonReader;

/// Entries read before a queue's first due job above which its claims
/// resume (a claim from the start reads them twice).
const RESUME_ABOVE: i64 = 1_000;

/// How long something must have held the xmin horizon before the queues'
/// heads are looked at (see [`Resumes::look_at`]).
const PINNED_FOR: Duration = Duration::from_secs(1);

/// How often each queue's head is looked at, at the most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long a resuming queue's looks may be apart: each look reads the
/// whole run of entries, so looks come further apart as it grows (one
/// second per [`ENTRIES_PER_SECOND`] entries), keeping their share of the
/// database's time small.
const LOOKS_AT_MOST_APART: Duration = Duration::from_secs(10);

/// Entries a look may read per second between looks.
const ENTRIES_PER_SECOND: i64 = 100_000;

/// A queue not claimed from for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(60);

struct QueueState {
    /// Just after the last job taken (or just before a job found behind it).
    point: Resume,
    /// Whether claims of the queue resume at `point`.
    resuming: bool,
    /// When the head was looked at last, and when to look next.
    looked_at: Option<Instant>,
    look_every: Duration,
    /// The transaction id the xmin horizon was held at
    /// ([`jobqueue_core::engine::Horizon::xid`]) at the last look, if that look
    /// read past [`RESUME_ABOVE`] and something held it.
    held_by: Option<i64>,
    claimed_at: Instant,
}

/// The fetcher's resume points, by queue.
#[derive(Default)]
pub(crate) struct Resumes {
    queues: HashMap<String, QueueState>,
}

impl Resumes {
    /// Moves each queue's point past the jobs a claim took.
    pub(crate) fn note_claimed(&mut self, rows: &[JobRow], now: Instant) {
        for row in rows {
            let after = Resume::after(row);
            match self.queues.get_mut(&row.queue) {
                Some(state) => {
                    if state.point.is_before(&after) {
                        state.point = after;
                    }
                    state.claimed_at = now;
                }
                None => {
                    self.queues.insert(
                        row.queue.clone(),
                        QueueState {
                            point: after,
                            resuming: false,
                            looked_at: None,
                            look_every: LOOK_EVERY,
                            held_by: None,
                            claimed_at: now,
                        },
                    );
                }
            }
        }
        self.queues
            .retain(|_, state| now.duration_since(state.claimed_at) < FORGET_AFTER);
    }

    /// The queues whose head is due for a look.
    pub(crate) fn due_looks(&self, now: Instant) -> Vec<String> {
        self.queues
            .iter()
            .filter(|(_, state)| {
                state
                    .looked_at
                    .is_none_or(|at| now.duration_since(at) >= state.look_every)
            })
            .map(|(queue, _)| queue.clone())
            .collect()
    }

    /// Looks at the heads of `queues` (those due for a look), on
    /// `session`: none while no queue resumes and nothing has held the xmin
    /// horizon for [`PINNED_FOR`], only a reading of the horizon. A claim
    /// from the start of a queue then reads at most the entries of the
    /// jobs claimed since the oldest snapshot began, less than that long
    /// ago, and those that no snapshot needs it steps over: a look would
    /// find the way clear. Otherwise in statements of at most
    /// [`MAX_QUEUE_HEADS`] queues each.
    pub(crate) fn look_at(
        &mut self,
        queues: &[String],
        session: &mut QueueSession,
        horizon: &HorizonReader,
        now: Instant,
    ) -> jobqueue_core::Result<()> {
        let resuming = self.queues.values().any(|state| state.resuming);
        // Something has held the horizon for `PINNED_FOR`, as read within
        // the last `LOOK_EVERY` (however many claims find queues due).
        if !resuming && !horizon.read(session, LOOK_EVERY)?.pinned_for(PINNED_FOR) {
            for queue in queues {
                if let Some(state) = self.queues.get_mut(queue) {
                    state.looked_at = Some(now);
                }
            }
            return Ok(());
        }
        for chunk in queues.chunks(MAX_QUEUE_HEADS) {
            self.look(chunk, session, horizon, now)?;
        }
        Ok(())
    }

    /// Looks at the heads of `queues` on `session` (one statement), and
    /// again at once at those whose look read past the threshold when the
    /// transaction holding the xmin horizon is not the one of the queue's
    /// last such look (see the module's documentation); takes in what the
    /// looks found.
    fn look(
        &mut self,
        queues: &[String],
        session: &mut QueueSession,
        horizon: &HorizonReader,
        now: Instant,
    ) -> jobqueue_core::Result<()> {
        let heads = session.queue_heads(queues)?;
        let far = heads
            .iter()
            .any(|(_, head)| head.entries_read > RESUME_ABOVE);
        let held_by = if far {
            horizon.read(session, Duration::ZERO)?.xid()
        } else {
            None
        };
        let again: Vec<String> = heads
            .iter()
            .filter(|(queue, head)| {
                head.entries_read > RESUME_ABOVE && self.look_again(queue, held_by)
            })
            .map(|(queue, _)| queue.clone())
            .collect();
        let mut second: HashMap<String, QueueHead> = if again.is_empty() {
            HashMap::new()
        } else {
            session.queue_heads(&again)?.into_iter().collect()
        };
        for (queue, head) in heads {
            let held_by = if head.entries_read > RESUME_ABOVE {
                held_by
            } else {
                None
            };
            let again = second.remove(&queue);
            self.looked(&queue, &head, held_by, again.as_ref(), now);
        }
        Ok(())
    }

    /// Whether a look at `queue`'s head that read past the threshold, with
    /// the xmin horizon held by transaction `held_by` (`None`: by nothing),
    /// is to be followed by a second: unless the same transaction held it
    /// at the queue's last such look.
    fn look_again(&self, queue: &str, held_by: Option<i64>) -> bool {
        held_by.is_none()
            || self
                .queues
                .get(queue)
                .is_none_or(|state| state.held_by != held_by)
    }

    /// Takes in what a look at `queue`'s head found: `head`, and, when it
    /// read past the threshold, the transaction holding the horizon then
    /// and what the second look found if there was one.
    fn looked(
        &mut self,
        queue: &str,
        head: &QueueHead,
        held_by: Option<i64>,
        again: Option<&QueueHead>,
        now: Instant,
    ) {
        let Some(state) = self.queues.get_mut(queue) else {
            return;
        };
        let read = head.entries_read + again.map_or(0, |again| again.entries_read);
        state.held_by = held_by;
        let head = again.unwrap_or(head);
        state.looked_at = Some(now);
        let was_resuming = state.resuming;
        state.resuming = head.entries_read > RESUME_ABOVE;
        state.look_every = if state.resuming {
            Duration::from_secs_f64(read as f64 / ENTRIES_PER_SECOND as f64)
                .clamp(LOOK_EVERY, LOOKS_AT_MOST_APART)
        } else {
            LOOK_EVERY
        };
        if let Some(first) = &head.first
            && first.priority <= state.point.priority
        {
            // Nothing is due before the first due job: resumed claims start
            // just before it, whether it lies behind the point (one they
            // would pass over) or ahead (past jobs other runners took).
            // One of higher priority is found by them anyway.
            state.point = just_before(first);
        }
        if state.resuming != was_resuming {
            if state.resuming {
                log::info!(
                    "claims of queue `{queue}` resume after the last job taken: {} claim-index \
                     entries lie before its first due job (jobs claimed since the oldest \
                     open transaction began; `jobqueue doctor` names it)",
                    head.entries_read
                );
            } else {
                log::info!("claims of queue `{queue}` start from the queue's head again");
            }
        }
    }

    /// The points of the queues whose claims resume.
    pub(crate) fn points(&self) -> Vec<Resume> {
        self.queues
            .values()
            .filter(|state| state.resuming)
            .map(|state| state.point.clone())
            .collect()
    }

    /// The queues claimed from lately, while some of them resume (a claim of
    /// every queue cannot resume: it finds its queues from their heads).
    pub(crate) fn queues_if_resuming(&self) -> Option<Vec<String>> {
        self.queues
            .values()
            .any(|state| state.resuming)
            .then(|| self.queues.keys().cloned().collect())
    }
}

/// The point just before `job` in its queue's order (the same priority
/// and `run_at`, the id one less), so a resumed claim takes it.
fn just_before(job: &Resume) -> Resume {
    let id = uuid::Uuid::from_u128(job.id.as_uuid().as_u128().saturating_sub(1));
    Resume {
        id: JobId::from(id),
        ..job.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(queue: &str, priority: i32, secs: i64, id: u128) -> Resume {
        Resume {
            queue: queue.into(),
            priority,
            run_at: chrono::DateTime::UNIX_EPOCH + chrono::Duration::seconds(secs),
            id: JobId::from(uuid::Uuid::from_u128(id)),
        }
    }

    fn head(entries_read: i64, first: Resume) -> QueueHead {
        QueueHead {
            entries_read,
            first: Some(first),
        }
    }

    fn resumes_with(point: Resume, now: Instant) -> Resumes {
        let mut resumes = Resumes::default();
        resumes.queues.insert(
            point.queue.clone(),
            QueueState {
                point,
                resuming: false,
                looked_at: None,
                look_every: LOOK_EVERY,
                held_by: None,
                claimed_at: now,
            },
        );
        resumes
    }

    #[test]
    fn a_queue_resumes_while_its_head_lies_behind_many_entries() {
        let now = Instant::now();
        let mut resumes = resumes_with(point("q", 100, 10, 10), now);
        assert_eq!(resumes.due_looks(now), ["q"]);
        assert!(resumes.points().is_empty());
        assert_eq!(resumes.queues_if_resuming(), None);

        // Two looks reading 250,000 entries each: the versions are still
        // needed by some snapshot.
        let far = head(250_000, point("q", 100, 20, 30));
        assert!(far.entries_read > RESUME_ABOVE);
        assert!(resumes.look_again("q", Some(7)));
        resumes.looked("q", &far, Some(7), Some(&far), now);
        assert_eq!(resumes.points(), [point("q", 100, 20, 29)]);
        assert_eq!(resumes.queues_if_resuming(), Some(vec!["q".to_owned()]));
        // Looks reading 500,000 entries in all: the next ones 5 s later.
        assert!(resumes.due_looks(now + Duration::from_secs(4)).is_empty());
        assert_eq!(resumes.due_looks(now + Duration::from_secs(5)), ["q"]);

        let clear = head(1, point("q", 100, 20, 30));
        // The same transaction holds the horizon: no second look.
        assert!(!resumes.look_again("q", Some(7)));
        assert!(resumes.look_again("q", Some(8)));
        assert!(clear.entries_read <= RESUME_ABOVE);
        resumes.looked("q", &clear, None, None, now + Duration::from_secs(5));
        assert!(resumes.points().is_empty());
    }

    #[test]
    fn a_second_look_that_finds_the_way_clear_ends_the_resuming() {
        let now = Instant::now();
        let mut resumes = resumes_with(point("q", 100, 10, 10), now);
        let far = head(250_000, point("q", 100, 20, 30));
        resumes.looked("q", &far, Some(7), Some(&far), now);
        assert_eq!(resumes.points().len(), 1);
        // Held by the same transaction: one look, still resuming.
        let further = head(300_000, point("q", 100, 30, 40));
        assert!(!resumes.look_again("q", Some(7)));
        resumes.looked("q", &further, Some(7), None, now);
        assert_eq!(resumes.points(), [point("q", 100, 30, 39)]);
        // The long transaction ended: the first look reads the jobs claimed
        // since the last (and marks their entries dead), the second reads
        // past them without counting them.
        let claimed_since = head(5_000, point("q", 100, 40, 50));
        let clear = head(2, point("q", 100, 40, 50));
        assert!(resumes.look_again("q", None));
        assert!(resumes.look_again("q", Some(8)));
        resumes.looked(
            "q",
            &claimed_since,
            None,
            Some(&clear),
            now + Duration::from_secs(5),
        );
        assert!(resumes.points().is_empty());
        assert_eq!(resumes.queues_if_resuming(), None);
        assert_eq!(resumes.due_looks(now + Duration::from_secs(6)), ["q"]);
        // Nothing holding the horizon, look after look: always a second.
        resumes.looked("q", &far, None, None, now + Duration::from_secs(6));
        assert!(resumes.look_again("q", None));
    }

    #[test]
    fn each_look_moves_the_point_to_just_before_the_first_due_job() {
        let now = Instant::now();
        let mut resumes = resumes_with(point("q", 100, 10, 10), now);
        let straggler = head(5_000, point("q", 100, 5, 7));
        resumes.looked("q", &straggler, Some(7), None, now);
        assert_eq!(resumes.points(), [point("q", 100, 5, 6)]);
        // A job of higher priority is found by the resumed claims anyway.
        let urgent = head(5_000, point("q", 500, 1, 1));
        resumes.looked("q", &urgent, Some(7), None, now);
        assert_eq!(resumes.points(), [point("q", 100, 5, 6)]);
        // Ahead: other runners took the jobs in between.
        let ahead = head(5_000, point("q", 100, 50, 90));
        resumes.looked("q", &ahead, Some(7), None, now);
        assert_eq!(resumes.points(), [point("q", 100, 50, 89)]);
    }
}
