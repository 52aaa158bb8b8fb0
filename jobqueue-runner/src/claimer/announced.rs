//! The queues announced by notifications, for the early claims (see
//! `early.rs`): the fetcher's own, changed only by its loop.

use std::collections::{BTreeSet, HashSet};

/// The queues announced and not yet claimed by an early claim.
#[derive(Default)]
pub(super) struct Announced {
    /// Announced since the last early claim took them (in name order, as a
    /// claim names its queues).
    pending: BTreeSet<String>,
    /// Taken by the early claim under way.
    in_early: Vec<String>,
    /// Whether a fetch claim left some of them out since the last early
    /// claim returned: the fetcher must claim again once it does, since
    /// the early claim may have left some of their jobs.
    left_out: bool,
}

impl Announced {
    /// New jobs are due in `queue`. One announced again while an early
    /// claim of it is under way stays announced: its job may have
    /// committed after the claim began.
    pub(super) fn add(&mut self, queue: String) {
        self.pending.insert(queue);
    }

    /// Whether no queue is announced or being claimed early.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.in_early.is_empty()
    }

    /// Whether queues wait for an early claim.
    pub(super) fn any_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the announced queues for an early claim: those not `busy`
    /// (the others' jobs are the fetch claims', which take them as always).
    pub(super) fn take_for_early(&mut self, busy: &HashSet<String>) -> Vec<String> {
        let pending = std::mem::take(&mut self.pending);
        self.in_early = pending
            .into_iter()
            .filter(|queue| !busy.contains(queue))
            .collect();
        self.in_early.clone()
    }

    /// The early claim returned. Returns whether the fetcher must claim at
    /// once (it left some of the queues out meanwhile).
    pub(super) fn early_returned(&mut self) -> bool {
        self.in_early.clear();
        std::mem::take(&mut self.left_out)
    }

    /// No early claim takes the announced queues (none is under way): the
    /// fetch claims take every queue. Returns whether the fetcher must
    /// claim at once (as `early_returned`).
    pub(super) fn early_off(&mut self) -> bool {
        self.pending.clear();
        self.early_returned()
    }

    /// The queues a fetch claim leaves out for the early claims: those
    /// announced or being claimed early, except the `busy` ones.
    pub(super) fn left_out_except(&mut self, busy: &HashSet<String>) -> Vec<String> {
        let left: Vec<String> = self
            .pending
            .iter()
            .chain(&self.in_early)
            .filter(|queue| !busy.contains(*queue))
            .cloned()
            .collect();
        self.left_out |= !left.is_empty();
        left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(queues: &[&str]) -> HashSet<String> {
        queues.iter().map(|queue| (*queue).to_owned()).collect()
    }

    #[test]
    fn a_fetch_claim_leaves_out_announced_queues_but_busy_ones() {
        let mut announced = Announced::default();
        announced.add("quiet".into());
        announced.add("bulk".into());
        assert_eq!(announced.left_out_except(&busy(&["bulk"])), ["quiet"]);
        assert!(
            announced
                .left_out_except(&busy(&["bulk", "quiet"]))
                .is_empty()
        );
        // An early claim takes the quiet one; the bulk one is the fetcher's.
        assert_eq!(announced.take_for_early(&busy(&["bulk"])), ["quiet"]);
        assert!(!announced.any_pending());
        assert_eq!(announced.left_out_except(&busy(&[])), ["quiet"]);
        assert!(announced.early_returned(), "the fetcher left one out");
        assert!(announced.is_empty());
        assert!(!announced.early_returned(), "woken once");
    }

    #[test]
    fn a_queue_announced_again_during_an_early_claim_stays_announced() {
        let mut announced = Announced::default();
        announced.add("quiet".into());
        assert_eq!(announced.take_for_early(&busy(&[])), ["quiet"]);
        announced.add("quiet".into());
        assert!(!announced.early_returned(), "nothing was left out");
        assert!(announced.any_pending());
        // Early claims went off with it still announced: the fetch claims
        // take it, at once if one left it out.
        assert_eq!(announced.left_out_except(&busy(&[])), ["quiet"]);
        assert!(announced.early_off());
        assert!(announced.is_empty());
    }
}
