//! Diesel's view of the `jobqueue_jobs` table (see `migrations/`).

diesel::table! {
    /// One row per job.
    jobqueue_jobs (id) {
        /// UUIDv7 id.
        id -> Uuid,
        /// Stable job type name, e.g. `email.send`.
        job_type -> Text,
        /// Named queue.
        queue -> Text,
        /// Higher runs first.
        priority -> Int4,
        /// Lifecycle state.
        status -> Text,
        /// Serialized payload.
        payload -> Jsonb,
        /// Not claimed before this time.
        run_at -> Timestamptz,
        /// Attempts used so far.
        attempts -> Int4,
        /// Attempts allowed.
        max_attempts -> Int4,
        /// Error of the latest failed attempt.
        last_error -> Nullable<Text>,
        /// The last few failures: `[{attempt, at, error}]`.
        errors -> Jsonb,
        /// At most one live job per key.
        unique_key -> Nullable<Text>,
        /// The worker holding (or that last held) the job.
        worker_id -> Nullable<Text>,
        /// Fencing token: number of claims so far.
        claim_count -> Int4,
        /// When the current claim was made.
        claimed_at -> Nullable<Timestamptz>,
        /// Last heartbeat of the holder.
        heartbeat_at -> Nullable<Timestamptz>,
        /// When the current lease runs out.
        lease_expires_at -> Nullable<Timestamptz>,
        /// A cancel was requested while the job was held.
        cancel_requested -> Bool,
        /// Percent done, 0-100.
        progress -> Int2,
        /// Current stage reported by the handler.
        current_stage -> Nullable<Text>,
        /// Events reported by the handler.
        events_count -> Int4,
        /// When the job was enqueued.
        created_at -> Timestamptz,
        /// When the handler started.
        started_at -> Nullable<Timestamptz>,
        /// When the job reached a finished status.
        finished_at -> Nullable<Timestamptz>,
        /// Times a handler asked to run it again later (no attempt used).
        snoozes -> Int4,
        /// W3C `traceparent` of the span that enqueued the job, if any.
        traceparent -> Nullable<Text>,
        /// The key whose jobs a queue's key limit counts together, if any.
        concurrency_key -> Nullable<Text>,
        /// The workflow the job is a step of, if any.
        workflow_id -> Nullable<Uuid>,
        /// Tags set at enqueue, if any.
        tags -> Nullable<Array<Text>>,
        /// Metadata set at enqueue (a JSON object), if any.
        metadata -> Nullable<Jsonb>,
        /// The outputs of the durable steps its handler finished, in order.
        step_outputs -> Nullable<Jsonb>,
        /// Where the handler's durable cursor has got to, if it advanced one.
        step_cursor -> Nullable<Jsonb>,
    }
}

diesel::table! {
    /// What operators set on a queue (a row only for queues paused or limited).
    jobqueue_queues (name) {
        /// The queue.
        name -> Text,
        /// Runners claim nothing from it while set.
        paused -> Bool,
        /// When it was last paused.
        paused_at -> Nullable<Timestamptz>,
        /// Most jobs of the queue held at once by all runners together.
        global_limit -> Nullable<Int4>,
        /// When the row last changed.
        updated_at -> Timestamptz,
        /// Most jobs started per `rate_period`, fleet-wide.
        rate_starts -> Nullable<Int4>,
        /// The rate limit's window.
        rate_period -> Nullable<Interval>,
        /// Times of the claims within the last window.
        rate_at -> Array<Timestamptz>,
        /// Jobs each of those claims took.
        rate_jobs -> Array<Int4>,
        /// No claims before this time (a handler's "retry after").
        backoff_until -> Nullable<Timestamptz>,
        /// Most jobs of one concurrency key admitted at once, fleet-wide.
        key_limit -> Nullable<Int4>,
        /// Each key's jobs start in enqueue order, one at a time.
        key_ordered -> Bool,
        /// What the application's code last declared of its settings.
        declared -> Nullable<Jsonb>,
    }
}
