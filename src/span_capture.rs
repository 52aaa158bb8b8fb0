//! A `tracing` layer for the span tests (`tests/it/tracing_spans.rs`,
//! `tests/tracing_runner.rs`): it keeps each span's name, fields (as
//! recorded by its end) and parent, for the runner's spans (the `tracing`
//! feature) to be checked.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A span as the subscriber saw it: its name, its fields (as recorded by
/// the end) and its parent's index among the spans seen.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The span's name.
    pub name: &'static str,
    /// Its fields, by name.
    pub fields: BTreeMap<String, String>,
    /// Its parent's index in the capture.
    pub parent: Option<usize>,
}

impl Seen {
    /// A field's value, as text.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// A `tracing` layer that keeps every span made, in order (a span's
/// index is kept in its extensions); clones share what they saw.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Seen>>>);

/// A span's index in [`Capture`].
struct Index(usize);

/// Writes fields into a map, values by their `Debug` (a `%` field's is its
/// `Display`), strings as they are.
struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is in the registry");
        let parent = span
            .parent()
            .and_then(|parent| parent.extensions().get::<Index>().map(|i| i.0));
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut seen = self.0.lock().expect("capture lock");
        seen.push(Seen {
            name: attrs.metadata().name(),
            fields,
            parent,
        });
        span.extensions_mut().insert(Index(seen.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a recorded span is in the registry");
        let Some(index) = span.extensions().get::<Index>().map(|i| i.0) else {
            return;
        };
        let mut seen = self.0.lock().expect("capture lock");
        values.record(&mut Fields(&mut seen[index].fields));
    }
}

impl Capture {
    /// Every span seen so far, in the order they were made.
    pub fn spans(&self) -> Vec<Seen> {
        self.0.lock().expect("capture lock").clone()
    }
}

/// Makes `subscriber` this thread's default until the guard is dropped, as
/// `tracing::subscriber::set_default` does, in a test process whose other
/// threads (other tests, their runners) reach `tracing` callsites
/// meanwhile.
///
/// While a single dispatcher is registered in a process, `tracing-core`
/// caches a newly reached callsite's interest from the default of
/// whichever thread reaches it first: a thread without a subscriber turns
/// the callsite off for every thread, this test's too, and its spans are
/// never seen. A second dispatcher (an idle one, kept for the life of the
/// process) makes it ask every live dispatcher instead.
pub fn set_default<S>(subscriber: S) -> tracing::subscriber::DefaultGuard
where
    S: tracing::Subscriber + Send + Sync + 'static,
{
    static IDLE: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    IDLE.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    tracing::subscriber::set_default(subscriber)
}
