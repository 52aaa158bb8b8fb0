//! The names the derive reads: the attribute and its keys, with what each
//! key takes, for messages.

use std::fmt::{self, Display};

use proc_macro2::Ident;
use syn::Path;

/// A name in `#[job(...)]`, compared against identifiers and paths.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Symbol(&'static str);

/// The attribute: `#[job(...)]`.
pub const JOB: Symbol = Symbol("job");
/// `type = "email.send"`: the stable job type name (required).
pub const TYPE: Symbol = Symbol("type");
/// `priority = 150`.
pub const PRIORITY: Symbol = Symbol("priority");
/// `queue = "mail"`.
pub const QUEUE: Symbol = Symbol("queue");
/// `max_attempts = 5`.
pub const MAX_ATTEMPTS: Symbol = Symbol("max_attempts");
/// `max_payload_bytes = 65536`.
pub const MAX_PAYLOAD_BYTES: Symbol = Symbol("max_payload_bytes");
/// `backoff_base_ms = 500`: the first retry's delay.
pub const BACKOFF_BASE_MS: Symbol = Symbol("backoff_base_ms");
/// `backoff_max_secs = 600`: the longest delay between attempts.
pub const BACKOFF_MAX_SECS: Symbol = Symbol("backoff_max_secs");
/// `concurrency_key = "customer_id"`: the field whose value is the job's
/// concurrency key.
pub const KEY: Symbol = Symbol("concurrency_key");
/// `crate = "my_app::jobqueue"`: where the core crate is, for facades.
pub const CRATE: Symbol = Symbol("crate");

/// Every key `#[job(...)]` accepts, in the order the docs list them.
pub const KEYS: [Symbol; 9] = [
    TYPE,
    PRIORITY,
    QUEUE,
    MAX_ATTEMPTS,
    MAX_PAYLOAD_BYTES,
    BACKOFF_BASE_MS,
    BACKOFF_MAX_SECS,
    KEY,
    CRATE,
];

impl Symbol {
    /// The key `ident` names, if it is one of [`KEYS`].
    pub fn key(ident: &Ident) -> Option<Symbol> {
        KEYS.into_iter().find(|key| ident == key)
    }

    /// `` `type`, `priority`, ... `` for messages.
    pub fn key_list() -> String {
        KEYS.iter()
            .map(|key| format!("`{key}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// What the key takes, for messages.
    pub fn expected(self) -> &'static str {
        match self {
            TYPE => "a string literal of 1 to 128 characters of `[A-Za-z0-9_.:-]`",
            QUEUE => "a string literal of 1 to 64 characters of `[A-Za-z0-9_.:-]`",
            PRIORITY => "an integer literal from 0 to 1000",
            MAX_ATTEMPTS => "an integer literal from 1 to 1000",
            MAX_PAYLOAD_BYTES => "an integer literal of at least 1",
            BACKOFF_BASE_MS => "an integer literal of milliseconds (0 or more)",
            BACKOFF_MAX_SECS => "an integer literal of seconds (1 or more)",
            KEY => "a string literal naming a field of the struct",
            CRATE => "a string literal holding a path",
            _ => "a literal",
        }
    }

    /// A correct use of the key, for messages.
    pub fn example(self) -> &'static str {
        match self {
            QUEUE => "queue = \"mail\"",
            PRIORITY => "priority = 150",
            MAX_ATTEMPTS => "max_attempts = 5",
            MAX_PAYLOAD_BYTES => "max_payload_bytes = 65536",
            BACKOFF_BASE_MS => "backoff_base_ms = 500",
            BACKOFF_MAX_SECS => "backoff_max_secs = 600",
            KEY => "concurrency_key = \"customer_id\"",
            CRATE => "crate = \"my_app::jobqueue\"",
            _ => "type = \"email.send\"",
        }
    }

    /// Whether the key takes an integer (else a string).
    pub fn takes_integer(self) -> bool {
        matches!(
            self,
            PRIORITY | MAX_ATTEMPTS | MAX_PAYLOAD_BYTES | BACKOFF_BASE_MS | BACKOFF_MAX_SECS
        )
    }

    /// The Rust type of an integer key's constant.
    pub fn rust_type(self) -> &'static str {
        match self {
            MAX_PAYLOAD_BYTES => "usize",
            BACKOFF_BASE_MS | BACKOFF_MAX_SECS => "u64",
            _ => "i32",
        }
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl Display for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(self.0)
    }
}
