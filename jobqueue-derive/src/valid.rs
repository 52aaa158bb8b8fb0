//! The values' rules, the same as `jobqueue_core::limits` applies at run
//! time, checked here so a bad constant fails the build instead of every
//! enqueue.

use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Field, Fields, LitStr, Meta};

use crate::attr::{CORRECT_FORM, IntLit, JobAttrs};
use crate::ctxt::Ctxt;
use crate::symbol;

/// `jobqueue_core::limits::MIN_PRIORITY`.
const MIN_PRIORITY: i128 = 0;
/// `jobqueue_core::limits::MAX_PRIORITY`.
const MAX_PRIORITY: i128 = 1000;
/// `jobqueue_core::limits::MAX_MAX_ATTEMPTS`.
const MAX_MAX_ATTEMPTS: i128 = 1000;
/// `jobqueue_core::limits::MAX_QUEUE_LEN`.
const MAX_QUEUE_LEN: usize = 64;
/// `jobqueue_core::limits::MAX_JOB_TYPE_LEN`.
const MAX_JOB_TYPE_LEN: usize = 128;

/// `jobqueue_core::RetryPolicy::DEFAULT.base`, in milliseconds.
const DEFAULT_BACKOFF_BASE_MS: i128 = 2_000;
/// `jobqueue_core::RetryPolicy::DEFAULT.max`, in seconds.
const DEFAULT_BACKOFF_MAX_SECS: i128 = 3_600;
/// The longest backoff accepted: a year, in seconds.
const MAX_BACKOFF_SECS: i128 = 365 * 24 * 3600;

/// Reports every rule `input` and its `#[job(...)]` break.
pub fn check(cx: &mut Ctxt, input: &DeriveInput, attrs: &JobAttrs) {
    check_data(cx, input);
    check_job_type(cx, input, attrs);
    if let Some(queue) = &attrs.queue {
        check_name(cx, "queue", queue, MAX_QUEUE_LEN);
    }
    if let Some(priority) = &attrs.priority {
        check_range(
            cx,
            "priority",
            priority,
            MIN_PRIORITY,
            MAX_PRIORITY,
            ", higher runs first",
        );
    }
    if let Some(max_attempts) = &attrs.max_attempts {
        check_range(cx, "max_attempts", max_attempts, 1, MAX_MAX_ATTEMPTS, "");
    }
    check_backoff(cx, attrs);
    if let Some(key) = &attrs.key {
        check_key(cx, input, key);
    }
    if let Some(limit) = &attrs.max_payload_bytes {
        match limit.value() {
            Some(value) if value >= 1 && value <= i128::from(u64::MAX) => {}
            Some(value) if value >= 1 => cx.error_spanned_by(
                limit,
                format!(
                    "invalid max_payload_bytes: {} does not fit in a usize",
                    limit.text()
                ),
            ),
            _ => cx.error_spanned_by(
                limit,
                format!(
                    "invalid max_payload_bytes: {} is out of range (at least 1 byte)",
                    limit.text()
                ),
            ),
        }
    }
}

/// The backoff keys: in range, and the first delay no longer than the
/// longest (a key left out has the runner default's value).
fn check_backoff(cx: &mut Ctxt, attrs: &JobAttrs) {
    let max_ms = MAX_BACKOFF_SECS * 1000;
    if let Some(base) = &attrs.backoff_base_ms {
        check_range(cx, "backoff_base_ms", base, 0, max_ms, " milliseconds");
    }
    if let Some(max) = &attrs.backoff_max_secs {
        check_range(cx, "backoff_max_secs", max, 1, MAX_BACKOFF_SECS, " seconds");
    }
    let base_ms = attrs
        .backoff_base_ms
        .as_ref()
        .map_or(Some(DEFAULT_BACKOFF_BASE_MS), IntLit::value);
    let max_secs = attrs
        .backoff_max_secs
        .as_ref()
        .map_or(Some(DEFAULT_BACKOFF_MAX_SECS), IntLit::value);
    if let (Some(base_ms), Some(max_secs)) = (base_ms, max_secs)
        && (0..=max_ms).contains(&base_ms)
        && (1..=MAX_BACKOFF_SECS).contains(&max_secs)
        && base_ms > max_secs * 1000
    {
        let culprit = match (&attrs.backoff_base_ms, &attrs.backoff_max_secs) {
            (_, Some(max)) => max.to_token_stream(),
            (Some(base), None) => base.to_token_stream(),
            (None, None) => return,
        };
        cx.error_spanned_by(
            culprit,
            format!(
                "invalid backoff: the first delay ({base_ms} ms) is longer than the longest \
                 ({max_secs} s){}",
                if attrs.backoff_max_secs.is_none() {
                    "; the default longest is 3600 s: set `backoff_max_secs` too"
                } else {
                    ""
                }
            ),
        );
    }
}

/// `concurrency_key = "field"` names one of the struct's named fields.
fn check_key(cx: &mut Ctxt, input: &DeriveInput, key: &LitStr) {
    let Some(fields) = named_fields(input) else {
        // A union is already reported as no payload at all.
        if !matches!(input.data, Data::Union(_)) {
            cx.error_spanned_by(
                key,
                "`concurrency_key` names a field: use it on a struct with named fields",
            );
        }
        return;
    };
    if key_field(input, key).is_none() {
        let names: Vec<String> = fields
            .filter_map(|field| field.ident.as_ref())
            .map(|ident| format!("`{}`", ident.unraw()))
            .collect();
        let known = if names.is_empty() {
            format!("`{}` has no fields", input.ident)
        } else {
            format!("the fields of `{}` are {}", input.ident, names.join(", "))
        };
        cx.error_spanned_by(
            key,
            format!(
                "invalid concurrency_key: no field named {:?}; {known}",
                key.value()
            ),
        );
    }
}

/// The named field `concurrency_key = "..."` names (written without `r#`), if the
/// input is a struct with named fields and has it.
pub fn key_field<'a>(input: &'a DeriveInput, key: &LitStr) -> Option<&'a Field> {
    let name = key.value();
    named_fields(input)?.find(|field| {
        field
            .ident
            .as_ref()
            .is_some_and(|ident| ident.unraw() == name)
    })
}

/// The fields of a struct with named fields; `None` for any other input.
fn named_fields(input: &DeriveInput) -> Option<impl Iterator<Item = &Field>> {
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => Some(fields.named.iter()),
            Fields::Unnamed(_) | Fields::Unit => None,
        },
        Data::Enum(_) | Data::Union(_) => None,
    }
}

/// Unions cannot be payloads; `#[job]` belongs on the type, not inside it.
fn check_data(cx: &mut Ctxt, input: &DeriveInput) {
    let mut field_attrs = Vec::new();
    match &input.data {
        Data::Union(data) => cx.error_spanned_by(
            data.union_token,
            "`#[derive(Job)]` does not support unions; a job payload is a struct or an enum that serde can (de)serialize",
        ),
        Data::Struct(data) => field_attrs.extend(data.fields.iter().flat_map(|f| &f.attrs)),
        Data::Enum(data) => {
            for variant in &data.variants {
                field_attrs.extend(&variant.attrs);
                field_attrs.extend(variant.fields.iter().flat_map(|f| &f.attrs));
            }
        }
    }
    for attr in field_attrs {
        if attr.path() == symbol::JOB {
            cx.error_spanned_by(
                attr,
                "`#[job(...)]` belongs on the type itself, not on a field or variant",
            );
        }
    }
}

/// `type` is required and follows the name rules.
fn check_job_type(cx: &mut Ctxt, input: &DeriveInput, attrs: &JobAttrs) {
    if let Some(job_type) = &attrs.job_type {
        check_name(cx, "job type", job_type, MAX_JOB_TYPE_LEN);
    } else if attrs.has(symbol::TYPE) || attrs.malformed {
        // Already reported where it was written.
    } else if let Some(first) = &attrs.first {
        let given = match &first.meta {
            Meta::List(list) if !list.tokens.is_empty() => format!(", {}", list.tokens),
            _ => String::new(),
        };
        cx.error_spanned_by(
            first,
            format!(
                "missing `type` in `#[job(...)]`: every job needs a stable type name, stored with it\n\
                 help: add it, as in `#[job(type = \"email.send\"{given})]`"
            ),
        );
    } else {
        cx.error_spanned_by(
            &input.ident,
            format!(
                "`#[derive(Job)]` needs a `#[job(type = \"...\")]` attribute naming the job type\n{CORRECT_FORM}"
            ),
        );
    }
}

/// 1 to `max` characters of `[A-Za-z0-9_.:-]`, as `limits::check_name`.
fn check_name(cx: &mut Ctxt, field: &str, lit: &LitStr, max: usize) {
    let value = lit.value();
    let len = value.chars().count();
    if len == 0 || len > max {
        cx.error_spanned_by(
            lit,
            format!("invalid {field}: {value:?} must be 1 to {max} characters long (it has {len})"),
        );
    } else if let Some(bad) = value.chars().find(|c| !is_name_char(*c)) {
        cx.error_spanned_by(
            lit,
            format!(
                "invalid {field}: {value:?} contains {bad:?}; only A-Z, a-z, 0-9, '_', '.', ':' and '-' are allowed"
            ),
        );
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

/// `min..=max`, as `limits::check_priority` and `check_max_attempts`.
fn check_range(cx: &mut Ctxt, field: &str, lit: &IntLit, min: i128, max: i128, note: &str) {
    let in_range = lit
        .value()
        .is_some_and(|value| (min..=max).contains(&value));
    if !in_range {
        cx.error_spanned_by(
            lit,
            format!(
                "invalid {field}: {} is out of range ({min} to {max}{note})",
                lit.text()
            ),
        );
    }
}
