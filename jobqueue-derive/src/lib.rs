//! `#[derive(Job)]` for jobqueue payload types.
//!
//! Use it through `jobqueue_core`, which re-exports it next to the `Job`
//! trait (feature `derive`, on by default): `use jobqueue_core::Job;` brings
//! both.

mod attr;
mod ctxt;
mod expand;
mod symbol;
mod valid;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Implements `jobqueue_core::Job` from a `#[job(...)]` attribute: one
/// associated constant per key given (`concurrency_key` gives a method), e.g.
/// `#[job(type = "email.send", priority = 150, queue = "mail")]`.
///
/// | key | constant | takes | default |
/// | --- | --- | --- | --- |
/// | `type` (required) | `JOB_TYPE` | 1 to 128 characters of `[A-Za-z0-9_.:-]` | — |
/// | `priority` | `PRIORITY` | an integer, `0..=1000`, higher runs first | 100 |
/// | `queue` | `QUEUE` | 1 to 64 characters of `[A-Za-z0-9_.:-]` | `"default"` |
/// | `max_attempts` | `MAX_ATTEMPTS` | an integer, `1..=1000` | 3 |
/// | `max_payload_bytes` | `MAX_PAYLOAD_BYTES` | an integer, at least 1 | 1 MiB |
/// | `concurrency_key` | `fn concurrency_key` | the name of a field (named fields only) whose `Display` text is the concurrency key; an `Option` field's `None` gives no key | no key |
/// | `crate` | — | the path to `jobqueue_core`, for crates that re-export it | `"::jobqueue_core"` |
///
/// Keys left out keep the trait's defaults. The values follow the rules
/// `jobqueue_core::limits` applies at enqueue time, checked here at compile
/// time: a bad value, an unknown or repeated key, or a literal of the wrong
/// kind is a compile error pointing at it. Several `#[job(...)]` attributes
/// on one type are read as one.
///
/// Works on structs (named, tuple, unit), enums and generic types. The impl
/// requires `Self: Serialize + DeserializeOwned` (the trait's supertraits),
/// so for `struct Wrap<T>` it applies wherever serde's derives do.
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::derive(&input).into()
}
