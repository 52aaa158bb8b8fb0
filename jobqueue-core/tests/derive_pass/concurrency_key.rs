use std::fmt::Display;

use jobqueue_core::Job;
use serde::{Deserialize, Serialize};

// A raw identifier is named without its `r#`.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.raw", concurrency_key = "type")]
struct RawField {
    r#type: String,
}

// `Option` written as a path is still an optional key.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.path")]
#[job(concurrency_key = "region")]
struct PathOption {
    region: std::option::Option<String>,
}

// A generic field whose bound gives `Display`.
#[derive(Serialize, Deserialize, Job)]
#[job(type = "a.generic", concurrency_key = "tenant")]
struct Generic<T: Display> {
    tenant: T,
}

#[test]
fn derives() {
    let raw = RawField {
        r#type: "pdf".into(),
    };
    assert_eq!(raw.concurrency_key().as_deref(), Some("pdf"));
    let path = PathOption {
        region: Some("eu-west".into()),
    };
    assert_eq!(path.concurrency_key().as_deref(), Some("eu-west"));
    assert_eq!(PathOption { region: None }.concurrency_key(), None);
    let generic = Generic { tenant: 'x' };
    assert_eq!(generic.concurrency_key().as_deref(), Some("x"));
}
