//! The progress a handler reported that is not written yet: noted in
//! memory by `JobContext::progress` and `JobContext::events`, taken by the
//! lease keeper into the job's next heartbeat, or by the completer into
//! the flush that writes the job's outcome, whichever comes first.
//!
//! Events are counted from the claim on, never reset by a take: each write
//! carries all of them with the job's count at claim (`Beat::events_base`),
//! so a write sent again after its reply was lost, or two writes that
//! commit out of order, never count an event twice.

use std::sync::Mutex;

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
}

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
        lock(&self.notes).unwritten.take()
    }

    /// Gives back a taken note whose write failed, under anything reported
    /// since: newer percent and stage win; the events are the claim's so
    /// far, which a newer note already counts.
    pub(crate) fn put_back(&self, older: Progress) {
        let mut notes = lock(&self.notes);
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
