//! An event's `data` (spec §1.4: any JSON), built into a [`Value`] only when something looks at it.
//!
//! Chunk deltas are most events of a real log, and no step of the read path, the fold or text extraction
//! reads them; building a `serde_json::Value` (an insertion-ordered map and a key string per field, two
//! levels deep) for each one was most of what a read cost. A [`Payload`] read from a packed chunk row holds
//! the row and the member's index instead, and one read from a line of a type nothing on the read path
//! looks into (a chunk line of its own, a step end, …, see [`is_lazy_kind`]) holds the line, whose
//! `data` its parse checked as a `Value` parse would ([`crate::json::Skip`]); either becomes the very
//! `Value` the old read built the first time it is dereferenced (at most once; later looks share it). A message event read typed
//! ([`super::message`]) holds its whole line and the facts its parse found, which the read path, the
//! fold and extraction use instead of the `Value`. Everything else is held as a `Value` from the start.
//! To its users a payload is a `Value`: it dereferences to one, compares with one, serialises as one,
//! and [`Payload::into_value`] hands it over.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::message::MessageFacts;
use super::row::Row;
use super::validate::is_plain_known;

mod fields;

/// An event's `data`: a [`Value`], possibly not built yet (see the module doc). As large as a `Value`, so
/// that events, which the read path moves several times, grow by nothing.
pub struct Payload(Repr);

enum Repr {
    Built(Value),
    Lazy(Box<Lazy>),
}

/// A value not built yet: what it is built from, and the value once something looked.
struct Lazy {
    source: Source,
    value: OnceLock<Value>,
}

#[derive(Clone)]
enum Source {
    Chunk(ChunkDelta),
    /// A message event's line, read typed (boxed: the other sources are small, and most events).
    Message(Box<MessageLine>),
    /// A line whose `data` its parse checked as a `Value` parse would ([`crate::json::Skip`]).
    Line(Box<str>),
}

/// A message event's whole line, and what its typed parse found.
#[derive(Clone)]
struct MessageLine {
    line: Box<str>,
    facts: MessageFacts,
}

impl Source {
    fn to_value(&self) -> Value {
        match self {
            Self::Chunk(delta) => delta.to_value(),
            Self::Message(message) => data_of_line(&message.line),
            Self::Line(line) => data_of_line(line),
        }
    }
}

/// The `data` of a line the typed parse accepted, as the general parse reads it. That parse checked the
/// whole line as a `Value` parse would (see [`super::message`], [`crate::json::Skip`]), so this cannot
/// fail.
fn data_of_line(line: &str) -> Value {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(mut envelope)) => envelope.remove("data").unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// The event types whose `data` a read keeps as text until it is looked at: the known types no check
/// reads (see [`is_plain_known`]) but those whose `data` extraction reads at length (`tool/call`,
/// `todo/write`: reading a field twice from text costs more than building it once). Chunk deltas are
/// most lines of a real log; the others (step starts and ends, compaction records, titles, …) are
/// small or rare, but a text costs less to keep than a map to build and drop. The closer tracker reads
/// a step start's `step` from the text ([`Payload::line_fields`]).
pub(crate) fn is_lazy_kind(kind: &str) -> bool {
    kind == "assistant/chunk" || is_plain_known(kind) && !matches!(kind, "tool/call" | "todo/write")
}

/// One member of a packed chunk row (spec §1.6): the checked row it shares with the other members, and
/// its index there.
#[derive(Clone)]
pub(crate) struct ChunkDelta {
    pub(crate) row: Arc<Row>,
    pub(crate) k: usize,
}

impl ChunkDelta {
    fn to_value(&self) -> Value {
        self.row.member_data(self.k)
    }
}

impl Payload {
    fn lazy(source: Source) -> Self {
        Self(Repr::Lazy(Box::new(Lazy {
            source,
            value: OnceLock::new(),
        })))
    }

    /// A payload built from a packed row's member, not yet a `Value`.
    pub(crate) fn chunk(delta: ChunkDelta) -> Self {
        Self::lazy(Source::Chunk(delta))
    }

    /// The `data` of `line`, kept as the line: its parse must have checked `data` as a `Value` parse
    /// would ([`crate::json::Skip`]).
    pub(crate) fn line(line: &str) -> Self {
        Self::lazy(Source::Line(line.into()))
    }

    /// A message event's payload: its `line` (which the typed parse read, `data` included) and the
    /// facts that parse found. Built into `data`'s `Value` when first dereferenced.
    pub(crate) fn message(line: &str, facts: MessageFacts) -> Self {
        Self::lazy(Source::Message(Box::new(MessageLine {
            line: line.into(),
            facts,
        })))
    }

    /// The facts of a message event read typed, when this is such a payload and `kind` the event's
    /// type. Still there once the value is built (it is the same data); gone once it is changed.
    pub(crate) fn message_facts(&self, kind: &str) -> Option<&MessageFacts> {
        match &self.0 {
            Repr::Lazy(lazy) => match &lazy.source {
                Source::Message(message) if message.facts.is_for(kind) => Some(&message.facts),
                _ => None,
            },
            Repr::Built(_) => None,
        }
    }

    /// The fields `names` of `data` (each `None` when absent; the last when repeated, as `JSON.parse`
    /// keeps it), read from the line this payload keeps without building `data`. A `data` that is not
    /// an object has no fields. `None` when this payload is no such line, or its value is built
    /// already, or `data` is an object a `Value` parse reads otherwise than as a map (led by
    /// serde_json's raw-value key): the caller then reads the `Value`.
    pub(crate) fn line_fields<const N: usize>(
        &self,
        names: [&'static str; N],
    ) -> Option<[Option<Value>; N]> {
        let Repr::Lazy(lazy) = &self.0 else {
            return None;
        };
        let Source::Line(line) = &lazy.source else {
            return None;
        };
        if lazy.value.get().is_some() {
            return None;
        }
        fields::of_line_data(line, names)
    }

    /// Whether the `Value` has been built (always, except for a chunk delta's payload that nothing has
    /// looked at yet).
    pub fn is_built(&self) -> bool {
        match &self.0 {
            Repr::Built(_) => true,
            Repr::Lazy(lazy) => lazy.value.get().is_some(),
        }
    }

    /// The data as a `Value`, built now if it was not.
    pub fn as_value(&self) -> &Value {
        match &self.0 {
            Repr::Built(value) => value,
            Repr::Lazy(lazy) => lazy.value.get_or_init(|| lazy.source.to_value()),
        }
    }

    /// The data as an owned `Value`, built now if it was not.
    pub fn into_value(self) -> Value {
        match self.0 {
            Repr::Built(value) => value,
            Repr::Lazy(lazy) => {
                let Lazy { source, value } = *lazy;
                value.into_inner().unwrap_or_else(|| source.to_value())
            }
        }
    }
}

impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Self(Repr::Built(value))
    }
}

impl From<Payload> for Value {
    fn from(payload: Payload) -> Self {
        payload.into_value()
    }
}

impl Default for Payload {
    fn default() -> Self {
        Value::Null.into()
    }
}

impl Deref for Payload {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.as_value()
    }
}

impl DerefMut for Payload {
    /// Builds the value and lets go of what it was built from, so that what is changed is what is seen.
    fn deref_mut(&mut self) -> &mut Value {
        if let Repr::Lazy(_) = self.0 {
            let value = std::mem::take(self).into_value();
            self.0 = Repr::Built(value);
        }
        match &mut self.0 {
            Repr::Built(value) => value,
            Repr::Lazy(_) => unreachable!("a payload being changed was built just above"),
        }
    }
}

impl Clone for Payload {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Built(value) => Self(Repr::Built(value.clone())),
            Repr::Lazy(lazy) => Self(Repr::Lazy(Box::new(Lazy {
                source: lazy.source.clone(),
                value: lazy.value.clone(),
            }))),
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_value() == other.as_value()
    }
}

impl PartialEq<Value> for Payload {
    fn eq(&self, other: &Value) -> bool {
        self.as_value() == other
    }
}

impl PartialEq<Payload> for Value {
    fn eq(&self, other: &Payload) -> bool {
        self == other.as_value()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_value(), f)
    }
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_value(), f)
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_value().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::packed::RowKind;
    use crate::log::row::RowTexts;
    use serde_json::json;

    fn delta(kind: RowKind, name: Option<&str>, texts: &[&str], k: usize) -> ChunkDelta {
        let all = RowTexts::of_strings(texts.iter().copied());
        let row = Row {
            kind,
            turn: 1.into(),
            step: 2.into(),
            index: 0.into(),
            id: if kind == RowKind::ToolCall { "c1" } else { "" }.into(),
            name: name.map(str::to_owned),
            seq0: 0,
            time0: 0,
            dt: vec![0; texts.len().saturating_sub(1)],
            texts: all,
        };
        ChunkDelta {
            row: Arc::new(row),
            k,
        }
    }

    fn text_delta() -> ChunkDelta {
        delta(RowKind::Text, None, &["hel"], 0)
    }

    #[test]
    fn a_chunk_payload_is_built_once_on_first_look_in_dsh_key_order() {
        let payload = Payload::chunk(text_delta());
        assert!(!payload.is_built());
        assert_eq!(
            payload.to_string(),
            r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"hel"}}"#
        );
        assert!(payload.is_built());
        assert!(std::ptr::eq(payload.as_value(), &*payload));
        assert_eq!(std::mem::size_of::<Payload>(), std::mem::size_of::<Value>());
    }

    #[test]
    fn tool_call_members_keep_id_and_name_before_the_arguments() {
        let payload = Payload::chunk(delta(RowKind::ToolCall, Some("read"), &["x", "{\"a\""], 1));
        assert_eq!(
            payload.into_value(),
            json!({"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":0,"id":"c1","name":"read","argumentsDelta":"{\"a\""}})
        );
    }

    #[test]
    fn a_changed_payload_is_what_clones_and_comparisons_see() {
        let mut payload = Payload::chunk(text_delta());
        payload["chunk"]["text"] = json!("changed");
        let copy = payload.clone();
        assert_eq!(copy["chunk"]["text"], "changed");
        assert_eq!(copy, payload);
        assert_eq!(payload.into_value()["chunk"]["text"], "changed");
        assert_eq!(Payload::from(json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn a_line_builds_its_data_as_the_general_parse_reads_it() {
        let line = r#"{"type":"step/end","seq":0,"time":0,"data":{"b":[1,2.5,"x\"}"],"a":{"c":null}},"x":1}"#;
        let payload = Payload::line(line);
        assert!(!payload.is_built());
        let want: Value = serde_json::from_str(line).unwrap();
        assert_eq!(payload, want["data"]);
        assert_eq!(
            payload.to_string(),
            r#"{"b":[1,2.5,"x\"}"],"a":{"c":null}}"#
        );
    }
}
