//! The error type of every fallible operation in this crate, and how it
//! composes with Diesel's.

use crate::JobId;

/// Everything that can go wrong when enqueueing, claiming or finishing jobs.
///
/// It converts both ways with [`diesel::result::Error`], so `?` works on
/// [`Job::enqueue`](crate::Job::enqueue) inside a Diesel transaction whose
/// closure returns `QueryResult<T>`, and on Diesel calls inside one that
/// returns `jobqueue_core::Result<T>`:
///
/// - `jobqueue_core::Error` → `diesel::result::Error`: a database error is
///   handed back as it was (so Diesel still sees a serialization failure or a
///   broken connection for what it is); any other is wrapped in
///   `QueryBuilderError`, from which [`Error::from_diesel`] (or the
///   conversion back) recovers it.
/// - `diesel::result::Error` → `jobqueue_core::Error`: [`Error::Database`],
///   except that a wrapped `jobqueue_core::Error` comes back unchanged, so
///   `Error::PayloadTooLarge`, say, survives the round trip through a
///   transaction.
///
/// ```no_run
/// use diesel::prelude::*;
/// use jobqueue_core::Job;
/// # #[derive(serde::Serialize, serde::Deserialize, Job)]
/// # #[job(type = "email.send")]
/// # struct SendEmail { to: String }
///
/// // A closure returning `QueryResult`, the usual Diesel shape.
/// fn sign_up(conn: &mut PgConnection, email: &str) -> QueryResult<()> {
///     conn.transaction(|conn| {
///         diesel::sql_query("INSERT INTO users (email) VALUES ($1)")
///             .bind::<diesel::sql_types::Text, _>(email)
///             .execute(conn)?;
///         SendEmail { to: email.into() }.enqueue(conn)?;
///         Ok(())
///     })
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused a statement or the connection failed mid-query.
    #[error("database error: {0}")]
    Database(#[source] diesel::result::Error),

    /// No connection could be made to the database.
    #[error("cannot connect to the database: {0}")]
    Connection(#[from] diesel::ConnectionError),

    /// Applying the embedded schema migrations failed.
    #[error("schema migration failed: {0}")]
    Migration(#[source] Box<dyn std::error::Error + Send + Sync>),

    /// A job payload could not be turned into JSON.
    #[error("cannot serialize the payload of job type `{job_type}`: {source}")]
    Serialize {
        /// The job type whose payload failed.
        job_type: String,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },

    /// A stored payload does not fit the payload type of its job type.
    #[error("cannot deserialize the payload of job type `{job_type}`: {source}")]
    Deserialize {
        /// The job type whose payload failed.
        job_type: String,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },

    /// A payload is larger than the configured limit.
    #[error(
        "payload of job type `{job_type}` is {size} bytes, over the limit of {limit} bytes \
         (store a reference to large data instead, or raise max_payload_bytes)"
    )]
    PayloadTooLarge {
        /// The job type whose payload is too large.
        job_type: String,
        /// Size of the serialized payload in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },

    /// An option or argument is outside what the queue accepts.
    #[error("invalid {field}: {reason}")]
    InvalidOption {
        /// The option at fault (`priority`, `queue`, `max_attempts`, ...).
        field: &'static str,
        /// What is wrong with it and what is allowed.
        reason: String,
    },

    /// A workflow cannot be enqueued as built: a cycle, an edge to a step of
    /// another workflow, two steps of one name, no steps at all.
    #[error("workflow `{workflow}` refused: {reason}")]
    InvalidWorkflow {
        /// The workflow's name.
        workflow: String,
        /// What is wrong and what to do.
        reason: String,
    },

    /// A live job already holds this unique key, where the operation needs it
    /// free: retrying a failed job whose key a newer job took, or an enqueue
    /// whose key's holder kept finishing and being replaced while it looked
    /// (a plain duplicate on enqueue is an outcome,
    /// [`EnqueueOutcome::Duplicate`](crate::EnqueueOutcome::Duplicate), not
    /// this error). Nothing was changed; the caller's transaction is still
    /// usable.
    #[error(
        "a live job{} already holds unique key `{unique_key}`; nothing was inserted",
        .existing.map(|id| format!(" ({id})")).unwrap_or_default()
    )]
    UniqueConflict {
        /// The key that is taken.
        unique_key: String,
        /// The job holding it (`None` if it finished while being looked up
        /// and the key was taken again each time the insert was retried).
        existing: Option<JobId>,
    },

    /// The worker no longer holds this job under this token: its lease expired
    /// and the job was recovered (and perhaps claimed again), or it was
    /// finished already. Nothing was changed.
    #[error("job {job_id} is no longer held under token {token}; nothing was changed")]
    LeaseLost {
        /// The job.
        job_id: JobId,
        /// The fencing token the caller presented.
        token: i32,
    },

    /// The job is in a status the operation does not apply to (retrying a
    /// pending job, say). Nothing was changed.
    #[error("job {job_id} is {status}; {expected}")]
    WrongStatus {
        /// The job.
        job_id: JobId,
        /// Its status when the operation looked.
        status: crate::JobStatus,
        /// What the operation needs, as a sentence.
        expected: &'static str,
    },

    /// No queue of this name has settings or jobs, nor is named by a
    /// schedule or a runner's `--queues` (most likely a typo).
    #[error(
        "no queue named `{queue}`: no job, setting, schedule or runner's --queues names it \
         (a runner of every queue names none); {}",
        known_names(.known, "there are no queues yet", "the queues are")
    )]
    UnknownQueue {
        /// The name given.
        queue: String,
        /// The queues that have settings or live jobs.
        known: Vec<String>,
    },

    /// No schedule of this name (most likely a typo).
    #[error(
        "no schedule named `{schedule}`; {}",
        known_names(.known, "there are no schedules", "the schedules are")
    )]
    UnknownSchedule {
        /// The name given.
        schedule: String,
        /// The schedules there are.
        known: Vec<String>,
    },

    /// A job type the program has no handler registered for, where the
    /// operation needs one: building a job by type name through a runner's
    /// registry (as a command line or an HTTP endpoint enqueues) that does
    /// not register it. Nothing was written. Distinct from
    /// [`Error::InvalidOption`]: the name may be valid, only not known
    /// here (most likely a typo, or a type another worker binary handles).
    #[error(
        "job type `{job_type}` is not registered here; {}",
        known_names(.known, "no job type is registered", "the registered types are")
    )]
    UnknownJobType {
        /// The job type given.
        job_type: String,
        /// The job types registered, sorted.
        known: Vec<String>,
    },

    /// No job has this id: none was enqueued with it, or it finished and
    /// its row is gone.
    #[error(
        "no job with id {0}: none was enqueued with it, or it finished and its row is gone \
         (completed jobs are deleted as they complete unless runners keep them, \
         `--retain-completed-hours`; failed and cancelled ones after their retention)"
    )]
    NotFound(JobId),

    /// An enqueue hook ([`crate::EnqueueHook`]) refused the job; nothing of
    /// its enqueue was inserted.
    #[error("an enqueue hook refused the job of type `{job_type}`: {reason}")]
    Refused {
        /// The job's type.
        job_type: String,
        /// What the hook said.
        reason: String,
    },

    /// The server connected to accepts no writes: a standby in recovery, or
    /// one with `default_transaction_read_only` on (as failover tools fence
    /// a demoted primary).
    #[error(
        "the database server is read-only (a standby, or default_transaction_read_only is on): \
         point the URL at the primary, or list every host and add \
         target_session_attrs=read-write so libpq picks the one that takes writes"
    )]
    ReadOnly,

    /// The result kept for a job does not decode as the type it was read
    /// as ([`crate::result`], [`crate::wait_result`]).
    #[error(
        "the result kept for job {job_id} does not decode as {type_name}: {source}; \
         read it as the type its handler recorded with `ctx.set_result`"
    )]
    ResultDecode {
        /// The job whose result it is.
        job_id: crate::JobId,
        /// The type it was read as.
        type_name: &'static str,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}

/// The end of an unknown-name error: `none` when nothing of the kind
/// exists, else `listed` followed by the names there are.
fn known_names(known: &[String], none: &str, listed: &str) -> String {
    if known.is_empty() {
        none.to_owned()
    } else {
        format!("{listed}: {}", known.join(", "))
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The queue's error inside a Diesel error made from one (see the type's
    /// documentation), if `error` is such.
    pub fn from_diesel(error: &diesel::result::Error) -> Option<&Error> {
        match error {
            diesel::result::Error::QueryBuilderError(inner) => inner.downcast_ref::<Error>(),
            _ => None,
        }
    }

    /// Whether the server refused a write because it is read-only
    /// (SQLSTATE 25006): the connection is on a standby, or on a primary
    /// fenced off by `default_transaction_read_only`. Such a connection is
    /// of no more use to a writer; a new one, through a URL that lists
    /// every host with `target_session_attrs=read-write`, finds the primary.
    pub fn is_read_only(&self) -> bool {
        match self {
            Error::ReadOnly => true,
            Error::Database(diesel::result::Error::DatabaseError(kind, _)) => {
                matches!(kind, diesel::result::DatabaseErrorKind::ReadOnlyTransaction)
            }
            _ => false,
        }
    }

    /// Whether trying again later may succeed with nothing changed: the
    /// database could not be reached or dropped the connection, refused a
    /// write during a failover ([`is_read_only`](Self::is_read_only)), or
    /// rolled the transaction back on a serialization conflict. A web
    /// handler answers such an error with 503 and a `Retry-After`, not 500.
    pub fn is_transient(&self) -> bool {
        use diesel::result::DatabaseErrorKind as Kind;
        if self.is_read_only() {
            return true;
        }
        match self {
            Error::Connection(_) => true,
            Error::Database(diesel::result::Error::DatabaseError(kind, _)) => matches!(
                kind,
                Kind::ClosedConnection | Kind::SerializationFailure | Kind::ReadOnlyTransaction
            ),
            Error::Database(diesel::result::Error::BrokenTransactionManager) => true,
            _ => false,
        }
    }

    /// Whether the error is about what the caller passed (an option out of
    /// range, a name the queue does not take, a payload that does not
    /// serialize, decode or fit, an unknown queue, schedule or job type):
    /// the same call fails again the same way. A web handler answers it with 400 and
    /// the message, which names what is wrong.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidOption { .. }
                | Error::InvalidWorkflow { .. }
                | Error::Serialize { .. }
                | Error::Deserialize { .. }
                | Error::ResultDecode { .. }
                | Error::PayloadTooLarge { .. }
                | Error::UnknownQueue { .. }
                | Error::UnknownSchedule { .. }
                | Error::UnknownJobType { .. }
        )
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidOption {
            field,
            reason: reason.into(),
        }
    }
}

impl From<diesel::result::Error> for Error {
    fn from(error: diesel::result::Error) -> Self {
        match error {
            diesel::result::Error::QueryBuilderError(inner) if inner.is::<Error>() => {
                match inner.downcast::<Error>() {
                    Ok(queue_error) => *queue_error,
                    Err(inner) => Error::Database(diesel::result::Error::QueryBuilderError(inner)),
                }
            }
            other => Error::Database(other),
        }
    }
}

impl From<Error> for diesel::result::Error {
    fn from(error: Error) -> Self {
        match error {
            Error::Database(database) => database,
            other => diesel::result::Error::QueryBuilderError(Box::new(other)),
        }
    }
}
