//! The progress a handler reported that is not written yet: noted in
//! memory by `JobContext::progress` and `JobContext::events`, taken by the
//! lease keeper into the job's next heartbeat, or by the completer into
//! the flush that writes the job's outcome, whichever comes first.
//!
//! A note taken for a write is *in flight* until the write returns
//! (`written`, or `put_back` when it failed): the completer holds back the
//! outcome of a job whose note a heartbeat is writing, so that a heartbeat
//! that fails after the outcome was written cannot leave the last reports
//! unwritten for good.
//!
//! Events are counted from the claim on, never reset by a take: each write
//! carries all of them with the job's count at claim (`Beat::events_base`),
//! so a write sent again after its reply was lost, or two writes that
//! commit out of order, never count an event twice.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jobqueue_core::engine::Progress;

use crate::sync::lock;

/// One job's unwritten progress: the latest percent and stage, and the
/// events of the claim so far.
#[derive(Debug, Default)]
pub(crate) struct ProgressNote {
    notes: Mutex<Notes>,
}

#[derive(Debug, Default)]
struct Notes {
    /// What was reported since the last take, with every event so far.
    unwritten: Option<Progress>,
    /// Every event reported since the claim.
    events: i32,
    /// When the note being written was taken, until its write returns.
    in_flight: Option<Instant>,
}

impl Notes {
    /// The unwritten note, taken for a write: in flight until it returns.
    fn take(&mut self) -> Option<Progress> {
        let taken = self.unwritten.take();
        if taken.is_some() {
            self.in_flight = Some(Instant::now());
        }
        taken
    }
}

/// A note is being written by another write (see the module's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InFlight;

/// How long a note counts as in flight at most: past it, a write that
/// never returned (a thread that died) holds no outcome back.
const IN_FLIGHT_AT_MOST: Duration = Duration::from_secs(30);

impl ProgressNote {
    /// Notes a report: `percent` and `stage` (when given) replace what is
    /// noted, `events` add to it (up to `i32::MAX`). A NUL character,
    /// which PostgreSQL's text cannot hold, becomes U+FFFD in the stage.
    pub(crate) fn note(&self, percent: Option<u8>, stage: Option<&str>, events: u32) {
        let mut notes = lock(&self.notes);
        notes.events = notes
            .events
            .saturating_add(i32::try_from(events).unwrap_or(i32::MAX));
        let total = notes.events;
        let noted = notes.unwritten.get_or_insert_with(Progress::default);
        if let Some(percent) = percent {
            noted.percent = Some(i16::from(percent.min(100)));
        }
        if let Some(stage) = stage {
            let text = noted.stage.get_or_insert_with(String::new);
            text.clear();
            if stage.contains('\0') {
                text.push_str(&stage.replace('\0', "\u{FFFD}"));
            } else {
                text.push_str(stage);
            }
        }
        noted.events = total;
    }

    /// Takes what is noted, to be written (its events: all of the claim so
    /// far); `None` if nothing was reported since the last take.
    pub(crate) fn take(&self) -> Option<Progress> {
        lock(&self.notes).take()
    }

    /// For the write of a job's outcome: what is noted, taken as [`take`]
    /// does, unless a note taken earlier is still in flight (`Err`): then
    /// nothing is taken, and the outcome waits for that write to return.
    ///
    /// [`take`]: ProgressNote::take
    pub(crate) fn take_unless_in_flight(&self) -> Result<Option<Progress>, InFlight> {
        let mut notes = lock(&self.notes);
        if notes
            .in_flight
            .is_some_and(|since| since.elapsed() < IN_FLIGHT_AT_MOST)
        {
            return Err(InFlight);
        }
        Ok(notes.take())
    }

    /// The write of the note taken last returned successfully.
    pub(crate) fn written(&self) {
        lock(&self.notes).in_flight = None;
    }

    /// Gives back a taken note whose write failed, under anything reported
    /// since: newer percent and stage win; the events are the claim's so
    /// far, which a newer note already counts.
    pub(crate) fn put_back(&self, older: Progress) {
        let mut notes = lock(&self.notes);
        notes.in_flight = None;
        notes.unwritten = Some(match notes.unwritten.take() {
            None => older,
            Some(newer) => Progress {
                percent: newer.percent.or(older.percent),
                stage: newer.stage.or(older.stage),
                events: newer.events.max(older.events),
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_report_wins_and_events_add_up() {
        let note = ProgressNote::default();
        assert_eq!(note.take(), None, "nothing reported");
        note.note(Some(10), Some("download"), 2);
        note.note(Some(150), None, 3);
        note.note(None, Some("un\0zip"), u32::MAX);
        let taken = note.take().expect("a note");
        assert_eq!(
            taken,
            Progress {
                percent: Some(100),
                stage: Some("un\u{FFFD}zip".into()),
                events: i32::MAX,
            }
        );
        assert_eq!(note.take(), None, "taken once");
    }

    #[test]
    fn events_count_from_the_claim_across_takes() {
        let note = ProgressNote::default();
        note.note(None, None, 2);
        assert_eq!(note.take().map(|p| p.events), Some(2));
        note.note(None, None, 3);
        assert_eq!(note.take().map(|p| p.events), Some(5));
    }

    #[test]
    fn an_outcome_waits_while_a_heartbeat_writes_the_note() {
        let note = ProgressNote::default();
        assert_eq!(note.take_unless_in_flight(), Ok(None), "nothing noted");
        note.note(Some(10), Some("last"), 1);
        // A heartbeat takes it; the outcome's write waits.
        let taken = note.take().expect("a note");
        assert_eq!(note.take_unless_in_flight(), Err(InFlight));
        // The heartbeat failed: the note is back, and goes with the outcome.
        note.put_back(taken);
        let with_outcome = note.take_unless_in_flight().expect("not in flight");
        assert_eq!(with_outcome.and_then(|p| p.stage).as_deref(), Some("last"));
        // Had it been written, the outcome goes with nothing.
        note.written();
        note.note(None, None, 1);
        let _ = note.take().expect("a note");
        note.written();
        assert_eq!(note.take_unless_in_flight(), Ok(None));
    }

    #[test]
    fn a_note_given_back_is_under_newer_reports() {
        let note = ProgressNote::default();
        note.note(Some(10), Some("download"), 2);
        let older = note.take().expect("a note");
        note.note(Some(40), None, 1);
        note.put_back(older);
        assert_eq!(
            note.take(),
            Some(Progress {
                percent: Some(40),
                stage: Some("download".into()),
                events: 3,
            })
        );
        note.put_back(Progress::default());
        assert_eq!(note.take(), Some(Progress::default()));
    }
}
