//! Early claims: while the runner is busy with the backlog of some queues,
//! jobs announced in another queue are claimed at once, on the claim
//! connection the fetcher's batch is not using, so they start at the next
//! free worker instead of waiting for room, or for the batch under way,
//! behind the others' jobs.
//!
//! An early claim takes only from the queues announced since the last one,
//! and of those only the queues of which the runner holds no job waiting
//! for a worker (those queues' new jobs would wait anyway), at most
//! `RunnerConfig::early_reserve` jobs held at once. An idle runner needs
//! none: its fetch claims come at once. Queues whose claims resume (a long
//! transaction holds the xmin horizon, see `resume.rs`) are left to the
//! fetch claims: an early claim reads its queues from the start, through
//! every job claimed since the transaction began.
//!
//! Meanwhile the fetch claims leave the announced queues out
//! (`Announced::left_out_except`): a claim of the backlog's batch takes
//! tens of milliseconds on a saturated machine, and a quiet queue's new job
//! that it locked (`SKIP LOCKED` then hides it from the early claim) would
//! start only once the whole batch is delivered. Once the early claim
//! returned, whatever it found, the fetcher claims at once, so no job
//! waits on a queue left out.
//!
//! Early claims are a mode of the fetcher's loop (`fetcher.rs`), which
//! decides them from its own state: no other thread takes part.

use super::room::Room;
use crate::RunnerConfig;

/// Room in the early reserve, or `None` when early claims are off: the
/// runner is idle (it holds no job and its last fetch claim found no
/// backlog: fetch claims come at once, and as fast).
pub(super) fn early_room(config: &RunnerConfig, room: &Room, backlog: bool) -> Option<usize> {
    let free = config.early_reserve().saturating_sub(room.early_held());
    let busy = room.outstanding() > 0 || backlog;
    (free > 0 && busy).then_some(free)
}
