//! Queues declared in code: the settings an application states for a
//! queue where it registers its handlers (a global limit, a rate limit, a
//! key limit or per-key order, paused or not), applied by a runner at its
//! start ([`declare_queue`]).
//!
//! **What wins.** The database keeps what the code last declared of each
//! queue (`jobqueue_queues.declared`). A declared setting is applied when
//! its declaration changes (the first start that declares it, or a start
//! whose code declares another value); a start whose declaration is the
//! same leaves the setting as it is. So an operator's change at run time
//! (`jobqueue queue pause`, `queue limit`, the dashboard) stands across
//! restarts until the code declares something else, and a new declaration
//! in a deploy is applied by its first runner. A setting the code does not
//! declare is the operator's alone.

use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text};
use serde_json::{Map, Value};

use crate::isolation::read_committed;
use crate::key_limit::set_queue_key_limit;
use crate::queues::{pause_queue, paused_word, resume_queue, set_queue_limit, shown};
use crate::rate_limit::set_queue_rate_limit;
use crate::{Error, GlobalLimit, KeyLimit, RateLimit, Result, limits, sql};

/// A queue's settings as the application's code declares them. Each
/// setting is declared or left to operators; see the module's docs for
/// what wins when an operator changed one since.
///
/// ```
/// use std::time::Duration;
/// use jobqueue_core::{GlobalLimit, KeyLimit, QueueConfig, RateLimit};
///
/// let ledger = QueueConfig::new("ledger").keys(KeyLimit::ordered());
/// let mail = QueueConfig::new("mail")
///     .rate(RateLimit::new(20, Duration::from_secs(1)).expect("a rate"))
///     .limit(GlobalLimit::new(10).expect("a limit"))
///     .workers(4);
/// # let _ = (ledger, mail);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    name: String,
    limit: Option<Option<GlobalLimit>>,
    rate: Option<Option<RateLimit>>,
    keys: Option<Option<KeyLimit>>,
    paused: Option<bool>,
    workers: Option<usize>,
}

impl QueueConfig {
    /// A queue `name` with nothing declared yet.
    pub fn new(name: impl Into<String>) -> Self {
        QueueConfig {
            name: name.into(),
            limit: None,
            rate: None,
            keys: None,
            paused: None,
            workers: None,
        }
    }

    /// At most `most` of its jobs held at once by all runners together
    /// (as `jobqueue queue limit`).
    pub fn limit(mut self, most: GlobalLimit) -> Self {
        self.limit = Some(Some(most));
        self
    }

    /// No global limit.
    pub fn no_limit(mut self) -> Self {
        self.limit = Some(None);
        self
    }

    /// At most `rate.starts` jobs started per `rate.period`, fleet-wide (as
    /// `jobqueue queue rate`).
    pub fn rate(mut self, rate: RateLimit) -> Self {
        self.rate = Some(Some(rate));
        self
    }

    /// No rate limit.
    pub fn no_rate(mut self) -> Self {
        self.rate = Some(None);
        self
    }

    /// A key limit, or per-key order ([`KeyLimit::ordered`]), fleet-wide
    /// (as `jobqueue queue keys`).
    pub fn keys(mut self, keys: KeyLimit) -> Self {
        self.keys = Some(Some(keys));
        self
    }

    /// No key limit.
    pub fn no_key_limit(mut self) -> Self {
        self.keys = Some(None);
        self
    }

    /// Paused (`true`) or working (`false`) when this declaration is
    /// first applied: a queue that starts paused until an operator
    /// resumes it, say.
    pub fn paused(mut self, paused: bool) -> Self {
        self.paused = Some(paused);
        self
    }

    /// The workers a runner gives the queue at most (its own concurrency
    /// for it, as `--queues name=N`): a runner's setting, not stored; the
    /// runner's own configuration wins over it.
    pub fn workers(mut self, most: usize) -> Self {
        self.workers = Some(most);
        self
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared workers, if any.
    pub fn declared_workers(&self) -> Option<usize> {
        self.workers
    }

    /// The declared settings, each under its name as `queue list` shows
    /// it (`shown`), as stored in `jobqueue_queues.declared`: a setting
    /// whose text changed is declared anew, and `QueueInfo::overrides`
    /// compares the text with what the queue has now.
    fn stored(&self) -> Map<String, Value> {
        let declared = [
            ("limit", self.limit.map(shown)),
            ("rate", self.rate.map(shown)),
            ("keys", self.keys.map(shown)),
            ("paused", self.paused.map(|p| paused_word(p).to_owned())),
        ];
        declared
            .into_iter()
            .filter_map(|(name, text)| Some((name.to_owned(), Value::String(text?))))
            .collect()
    }

    /// Checks the name and the values, as the setters would.
    pub fn validate(&self) -> Result<()> {
        limits::check_queue(&self.name)?;
        if self.workers == Some(0) {
            return Err(Error::invalid(
                "queue workers",
                format!("0 workers for queue `{}`: give at least 1", self.name),
            ));
        }
        Ok(())
    }
}

/// What [`declare_queue`] applied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Declared {
    /// The queue.
    pub queue: String,
    /// The settings whose declaration changed, now applied (`limit`,
    /// `rate`, `keys`, `paused`); empty when the declaration was the same
    /// as the last one (operators' changes since stand).
    pub applied: Vec<&'static str>,
}

/// Applies `config` to its queue: in one transaction, with the queue's row
/// locked, each declared setting whose declaration differs from the one
/// stored is set (as the operator's commands set it: a raised key limit
/// admits at once, a resume wakes the runners), and the declaration is
/// stored. Settings declared as before are left as they are.
pub fn declare_queue(conn: &mut PgConnection, config: &QueueConfig) -> Result<Declared> {
    config.validate()?;
    let queue = config.name.as_str();
    let now = config.stored();
    read_committed(conn, |conn| {
        diesel::sql_query(sql::QUEUE_DECLARE_ROW)
            .bind::<Text, _>(queue)
            .execute(conn)?;
        let before: StoredRow = diesel::sql_query(sql::QUEUE_DECLARED_LOCK)
            .bind::<Text, _>(queue)
            .get_result(conn)?;
        let before = before
            .declared
            .and_then(|text| serde_json::from_str::<Map<String, Value>>(&text).ok())
            .unwrap_or_default();
        let mut applied = Vec::new();
        for name in ["limit", "rate", "keys", "paused"] {
            let Some(value) = now.get(name) else { continue };
            if before.get(name) == Some(value) {
                continue;
            }
            match name {
                "limit" => {
                    set_queue_limit(conn, queue, config.limit.flatten())?;
                }
                "rate" => {
                    set_queue_rate_limit(conn, queue, config.rate.flatten())?;
                }
                "keys" => {
                    set_queue_key_limit(conn, queue, config.keys.flatten())?;
                }
                _ => {
                    if config.paused == Some(true) {
                        pause_queue(conn, queue)?;
                    } else {
                        resume_queue(conn, queue)?;
                    }
                }
            }
            applied.push(name);
        }
        // The record is what the code declares now: a setting no longer
        // declared is the operator's alone from now on.
        if before != now {
            diesel::sql_query(sql::QUEUE_DECLARED_SET)
                .bind::<Text, _>(queue)
                .bind::<Nullable<Text>, _>(Some(Value::Object(now.clone()).to_string()))
                .execute(conn)?;
        }
        Ok(Declared {
            queue: queue.to_owned(),
            applied,
        })
    })
}

/// [`declare_queue`] for each of `configs`, in order; the settings each
/// applied, as `queue: setting`.
pub fn declare_queues(conn: &mut PgConnection, configs: &[QueueConfig]) -> Result<Vec<String>> {
    let mut applied = Vec::new();
    for config in configs {
        let declared = declare_queue(conn, config)?;
        applied.extend(
            declared
                .applied
                .iter()
                .map(|setting| format!("{}: {setting}", declared.queue)),
        );
    }
    Ok(applied)
}

#[derive(QueryableByName)]
struct StoredRow {
    #[diesel(sql_type = Nullable<Text>)]
    declared: Option<String>,
}
