//! A concurrency key of a queue, as the admission and the enqueue of keyed
//! jobs name it.

use diesel::QueryableByName;
use diesel::sql_types::Text;

/// A concurrency key of a queue: keys are counted per queue. Read from
/// the admission statements' `queue` and `key` columns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, QueryableByName)]
pub struct QueueKey {
    /// The queue.
    #[diesel(sql_type = Text)]
    pub queue: String,
    /// The concurrency key.
    #[diesel(sql_type = Text)]
    pub key: String,
}
