//! Enqueue hooks, and the work middleware that undoes one: every job this
//! application enqueues is stamped with the user it was enqueued for, and
//! a customer's identity number is sealed (ChaCha20-Poly1305) before it
//! reaches the jobs table, then opened again around the handler, so the
//! number is never stored, listed or shown in the clear. Without a key the
//! sealing hook refuses the job rather than store the number as given.
//!
//! ```sh
//! export SEAL_KEY=$(openssl rand -hex 32)     # the same key for enqueuers and workers
//! cargo run --example sealed_fields -- migrate
//! cargo run --example sealed_fields -- enqueue customer.verify '{"customer_id": 7, "ssn": "078-05-1120"}'
//! cargo run --example sealed_fields -- show ID    # `ssn` is sealed; `enqueued_by` is cli:$USER
//! cargo run --example sealed_fields -- work
//! ```
//!
//! Its tests enqueue through the hooks and drain through the middleware
//! with the testing kit (`DATABASE_URL=postgres://… cargo test --example
//! sealed_fields`).

use std::cell::RefCell;
use std::process::ExitCode;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use jobqueue::prelude::*;
use jobqueue::{EnqueueHook, Middleware, NewJob, Next, Registry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Checks a customer's identity number with a provider (here: its shape).
#[derive(Debug, Serialize, Deserialize, Job)]
#[job(type = "customer.verify", queue = "kyc")]
struct VerifyCustomer {
    customer_id: i64,
    ssn: String,
}

impl Perform for VerifyCustomer {
    fn perform(&self, ctx: &mut JobContext<'_>) -> Result<(), JobError> {
        let digits = self.ssn.chars().filter(char::is_ascii_digit).count();
        if digits != 9 {
            return Err(JobError::fail(format!(
                "customer {}: not an identity number",
                self.customer_id
            )));
        }
        ctx.progress(100, "verified")
    }
}

thread_local! {
    /// The user the current request runs as (a web framework's request
    /// extension, in an application).
    static CURRENT_USER: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f` as `user`: what an application's request middleware does.
fn as_user<T>(user: &str, f: impl FnOnce() -> T) -> T {
    let before = CURRENT_USER.with(|current| current.replace(Some(user.to_owned())));
    let out = f();
    CURRENT_USER.with(|current| *current.borrow_mut() = before);
    out
}

/// Stamps each job with the user it was enqueued for (`system` when none:
/// a job a handler enqueues, say).
struct StampUser;

impl EnqueueHook for StampUser {
    fn before_insert(&self, job: &mut NewJob) -> Result<(), String> {
        let user = CURRENT_USER.with(|current| current.borrow().clone());
        job.set_meta("enqueued_by", user.unwrap_or_else(|| "system".into()))
            .map_err(|e| e.to_string())
    }
}

/// The job types whose `ssn` field is sealed.
const SEALED: &[&str] = &[VerifyCustomer::JOB_TYPE];

/// Seals the `ssn` field of the jobs of [`SEALED`] types: `{"sealed":
/// base64(nonce || ciphertext)}` in its place. Without a key, refuses them.
struct SealFields {
    cipher: Option<ChaCha20Poly1305>,
}

impl EnqueueHook for SealFields {
    fn before_insert(&self, job: &mut NewJob) -> Result<(), String> {
        if !SEALED.contains(&job.job_type()) {
            return Ok(());
        }
        let Some(cipher) = &self.cipher else {
            return Err(
                "SEAL_KEY is not set: refusing to store an identity number in the \
                        clear (set it to 64 hex digits, the same for enqueuers and workers)"
                    .into(),
            );
        };
        let mut payload: Value =
            serde_json::from_str(job.payload_json()).map_err(|e| e.to_string())?;
        let Some(Value::String(ssn)) = payload.get("ssn") else {
            return Err("no `ssn` text to seal".into());
        };
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = cipher
            .encrypt(&nonce, ssn.as_bytes())
            .map_err(|_| "sealing failed".to_owned())?;
        let mut bytes = nonce.to_vec();
        bytes.extend(sealed);
        payload["ssn"] = serde_json::json!({ "sealed": BASE64.encode(bytes) });
        job.set_payload_json(payload.to_string())
            .map_err(|e| e.to_string())
    }
}

/// Opens what [`SealFields`] sealed, around the handler: the handler
/// decodes the payload as it was enqueued.
struct OpenSealed {
    cipher: Option<ChaCha20Poly1305>,
}

impl Middleware for OpenSealed {
    fn around(&self, ctx: &mut JobContext<'_>, next: Next<'_>) -> Result<(), JobError> {
        let Some(sealed) = next
            .payload()
            .pointer("/ssn/sealed")
            .and_then(Value::as_str)
        else {
            return next.run(ctx);
        };
        let Some(cipher) = &self.cipher else {
            return Err(JobError::retry(
                "SEAL_KEY is not set on this worker: cannot open the job",
            ));
        };
        let bytes = BASE64
            .decode(sealed)
            .map_err(|e| JobError::fail(format!("a sealed field that is not base64: {e}")))?;
        if bytes.len() < 12 {
            return Err(JobError::fail("a sealed field too short to hold its nonce"));
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        let ssn = cipher
            .decrypt(Nonce::from_slice(nonce), ciphertext)
            .map_err(|_| JobError::fail("a sealed field that this key does not open"))?;
        let mut payload = next.payload().clone();
        payload["ssn"] = Value::String(
            String::from_utf8(ssn)
                .map_err(|_| JobError::fail("a sealed field that is not text"))?,
        );
        next.run_with_payload(&payload, ctx)
    }
}

/// The key in `SEAL_KEY` (64 hex digits), if set; an error naming what is
/// wrong with it otherwise.
fn cipher_from(hex: Option<&str>) -> Result<Option<ChaCha20Poly1305>, String> {
    let Some(hex) = hex else { return Ok(None) };
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect::<Option<_>>()
        .filter(|bytes: &Vec<u8>| bytes.len() == 32)
        .ok_or("SEAL_KEY must be 64 hex digits (32 bytes)")?;
    Ok(Some(ChaCha20Poly1305::new(Key::from_slice(&bytes))))
}

/// Installs the enqueue hooks (once per process) and returns the
/// registry, with the middleware that opens what they sealed.
fn set_up(cipher: Option<ChaCha20Poly1305>) -> Registry {
    jobqueue::add_enqueue_hook(StampUser);
    jobqueue::add_enqueue_hook(SealFields {
        cipher: cipher.clone(),
    });
    Registry::new()
        .middleware(OpenSealed { cipher })
        .register::<VerifyCustomer>()
}

fn main() -> ExitCode {
    let cipher = match cipher_from(std::env::var("SEAL_KEY").ok().as_deref()) {
        Ok(cipher) => cipher,
        Err(e) => {
            eprintln!("sealed_fields: {e}");
            return ExitCode::from(2);
        }
    };
    let registry = set_up(cipher);
    // What the command line enqueues is stamped with who ran it.
    let login = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    as_user(&format!("cli:{login}"), || {
        jobqueue::Cli::with_registry(registry).main()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use diesel::PgConnection;
    use jobqueue::testing::{Drain, Ended, TestDatabase};

    use super::*;

    /// The tests' key, and the registry set up once for the process (the
    /// hooks are the process's).
    fn registry() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
            set_up(cipher_from(Some(key)).expect("a key"))
        })
    }

    fn connect() -> (TestDatabase, PgConnection) {
        let db = TestDatabase::new().expect("a test database");
        let conn = jobqueue::testing::connect(db.url()).expect("a test connection");
        (db, conn)
    }

    #[test]
    fn a_job_is_stamped_and_stored_sealed_then_worked_in_the_clear() {
        let registry = registry();
        let (_db, mut conn) = connect();
        let verify = VerifyCustomer {
            customer_id: 7,
            ssn: "078-05-1120".into(),
        };
        as_user("user:ada", || verify.enqueue(&mut conn)).expect("enqueue");

        let row = stored(&mut conn);
        assert_eq!(
            row.metadata.as_deref(),
            Some(r#"{"enqueued_by": "user:ada"}"#)
        );
        let payload: Value = serde_json::from_str(&row.payload).expect("JSON");
        assert!(payload.pointer("/ssn/sealed").is_some(), "{payload}");
        assert!(!row.payload.contains("078-05-1120"), "{payload}");

        let drained = Drain::new(registry).run(&mut conn).expect("drain");
        assert!(
            matches!(drained.jobs[..], [ref job] if job.ended == Ended::Completed),
            "opened around the handler, which verified it:\n{drained}"
        );
    }

    #[test]
    fn a_job_enqueued_outside_a_request_is_stamped_as_the_system() {
        let registry = registry();
        let (_db, mut conn) = connect();
        VerifyCustomer {
            customer_id: 8,
            ssn: "not a number".into(),
        }
        .enqueue(&mut conn)
        .expect("enqueue");
        let drained = Drain::new(registry).run(&mut conn).expect("drain");
        let [ref job] = drained.jobs[..] else {
            panic!("one job:\n{drained}");
        };
        assert!(
            matches!(&job.ended, Ended::Failed { error } if error.contains("customer 8")),
            "{drained}"
        );
        let row = stored(&mut conn);
        assert_eq!(
            row.metadata.as_deref(),
            Some(r#"{"enqueued_by": "system"}"#)
        );
    }

    #[test]
    fn without_a_key_the_job_is_refused_and_nothing_is_stored() {
        let hook = SealFields { cipher: None };
        let mut job = NewJob::from_job(
            &VerifyCustomer {
                customer_id: 9,
                ssn: "078-05-1120".into(),
            },
            JobOptions::new(),
        )
        .expect("a job");
        let refused = hook.before_insert(&mut job).expect_err("no key");
        assert!(refused.contains("SEAL_KEY is not set"), "{refused}");
        assert!(job.payload_json().contains("078-05-1120"), "unchanged");
        assert!(cipher_from(Some("abc")).is_err());
    }

    /// The stored payload and metadata, as text.
    #[derive(diesel::QueryableByName)]
    struct Stored {
        #[diesel(sql_type = diesel::sql_types::Text)]
        payload: String,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
        metadata: Option<String>,
    }

    /// The one job's row as stored.
    fn stored(conn: &mut PgConnection) -> Stored {
        diesel::RunQueryDsl::get_result::<Stored>(
            diesel::sql_query(
                "SELECT payload::text AS payload, metadata::text AS metadata FROM jobqueue_jobs",
            ),
            conn,
        )
        .expect("the row")
    }
}
