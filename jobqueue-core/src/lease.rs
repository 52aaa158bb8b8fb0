//! The lease: what a worker holds on a claimed job, and the fencing token
//! every later write must present.

use crate::JobId;

/// A worker's hold on one claimed job.
///
/// `token` is the job's claim count when it was claimed. Complete, fail,
/// heartbeat and progress apply only while the row is still held under that
/// token, so a worker whose lease expired (and whose job was recovered and
/// perhaps claimed by someone else) can change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The job.
    pub job_id: JobId,
    /// The fencing token from the claim.
    pub token: i32,
    /// The attempt this claim is (1 for the first).
    pub attempt: i32,
}

/// The result of a write on many leases at once: which jobs it changed, and
/// which it left alone because their lease was lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fenced {
    /// Jobs the write applied to.
    pub applied: Vec<JobId>,
    /// Jobs no longer held under the presented token; left unchanged.
    pub lost: Vec<JobId>,
}

impl Fenced {
    /// Splits `leases` by whether their job is in `applied`.
    pub(crate) fn sort(leases: &[Lease], applied: Vec<JobId>) -> Self {
        let done: std::collections::HashSet<JobId> = applied.iter().copied().collect();
        let lost = leases
            .iter()
            .map(|lease| lease.job_id)
            .filter(|id| !done.contains(id))
            .collect();
        Fenced { applied, lost }
    }
}

/// Splits leases into the parallel id and token arrays the SQL takes,
/// sorted by id: the statements find each id's token by a binary search
/// of the id array (`width_bucket`), which needs it sorted.
///
/// A batch statement locks its rows in id order (a primary-key scan for
/// `id = ANY(ids)`: see `planner_settings!` in `sql/session.rs`), so every
/// statement that locks several job rows takes them in one order, by id,
/// and two of them (a completion and a heartbeat on overlapping jobs) can
/// wait for each other but never deadlock.
pub(crate) fn columns(leases: &[Lease]) -> (Vec<JobId>, Vec<i32>) {
    let mut pairs: Vec<(JobId, i32)> = leases
        .iter()
        .map(|lease| (lease.job_id, lease.token))
        .collect();
    pairs.sort_unstable();
    pairs.into_iter().unzip()
}
