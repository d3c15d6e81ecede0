//! The event envelope (spec §1.4): one logged fact, with `data` kept as arbitrary JSON.

use serde_json::{Map, Value};

use super::error::{clip_for_message, LogError, LogErrorCode};
pub use super::payload::Payload;
use crate::json::{safe_int, safe_uint};

/// The three event types that live on the model-visible surface (spec §1.5).
pub const SURFACE_EVENT_TYPES: [&str; 3] = ["user/message", "assistant/message", "tool/result"];

/// Defines [`KNOWN_EVENT_TYPES`] and [`is_known_type`] from one list. The lookup is a `match`, which
/// compiles to a switch on the length and a compare or two, where a binary search over the array took
/// about six string compares (and every plain line of a log asks, several times).
macro_rules! known_event_types {
    ($($kind:literal),* $(,)?) => {
        /// DSH's known event types (spec §1.5). A type outside it must carry `ignorable: true`.
        ///
        /// The spec calls the set "48 types" but lists 47 (44 log-only + 3 surface types); this is
        /// the list as written. Every type in the real fixtures is in it (the conformance test would
        /// fail otherwise).
        pub const KNOWN_EVENT_TYPES: [&str; [$($kind),*].len()] = [$($kind),*];

        /// Whether `kind` is in DSH's known set.
        pub fn is_known_type(kind: &str) -> bool {
            matches!(kind, $($kind)|*)
        }
    };
}

known_event_types![
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
];

/// Whether `kind` is one of the three surface-eligible types.
pub fn is_surface_type(kind: &str) -> bool {
    SURFACE_EVENT_TYPES.contains(&kind)
}

/// The optional envelope keys, in the order they appeared, so re-emitting an event keeps its key order
/// (`Session.append` writes `sourceEventSeqs` before `surfaceOp`; crash closers the other way round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TailOrder {
    /// `sourceEventSeqs`, then `surfaceOp`, then `ignorable` (the `Session.append` order).
    #[default]
    SourcesFirst,
    /// `surfaceOp`, then `sourceEventSeqs`, then `ignorable` (the crash-closer order).
    SurfaceOpFirst,
}

/// One event. `surface_op` and `source_event_seqs` are kept as raw JSON: the fold (`crate::surface`) is the
/// only place that interprets them, so that its error wording is the spec's.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: String,
    pub seq: u64,
    pub time: i64,
    /// Any JSON; for chunk deltas read from a packed row, built on first look (see [`Payload`]).
    pub data: Payload,
    pub source_event_seqs: Option<Value>,
    pub surface_op: Option<Value>,
    /// `Some(true)` only; any other value is rejected when the envelope is read.
    pub ignorable: Option<bool>,
    pub tail_order: TailOrder,
}

impl Event {
    /// A plain event with no surface marker.
    pub fn new(kind: impl Into<String>, seq: u64, time: i64, data: Value) -> Self {
        Self::with_payload(kind, seq, time, data.into())
    }

    /// [`Event::new`] with a payload that may not be built yet.
    pub fn with_payload(kind: impl Into<String>, seq: u64, time: i64, data: Payload) -> Self {
        Self {
            kind: kind.into(),
            seq,
            time,
            data,
            source_event_seqs: None,
            surface_op: None,
            ignorable: None,
            tail_order: TailOrder::SourcesFirst,
        }
    }

    /// A message event appended to the surface (`surfaceOp: "append"`).
    pub fn appended(kind: impl Into<String>, seq: u64, time: i64, data: Value) -> Self {
        let mut event = Self::new(kind, seq, time, data);
        event.surface_op = Some(Value::String("append".into()));
        event
    }

    /// Whether this event was appended to the surface (`surfaceOp === "append"`): the human transcript.
    pub fn is_append(&self) -> bool {
        matches!(&self.surface_op, Some(Value::String(s)) if s == "append")
    }

    /// Reads an envelope (spec §1.4): exactly the seven allowed keys, `seq` a safe integer ≥ 0, `time` a
    /// safe integer, `data` present, `ignorable` absent or `true`. `surfaceOp`/`sourceEventSeqs` are checked
    /// by the fold.
    pub fn from_value(value: Value) -> Result<Self, LogError> {
        let Value::Object(map) = value else {
            return Err(invalid_envelope("not a JSON object".into()));
        };
        let mut parts = EnvelopeParts::default();
        for (key, value) in map {
            match EnvelopeKey::of(&key) {
                Some(k) => parts.set(k, value),
                None => {
                    return Err(invalid_envelope(format!(
                        "unexpected key {:?}",
                        clip_for_message(&key)
                    )))
                }
            }
        }
        parts.into_event()
    }
    /// The envelope as JSON, keys in the order they were read (or `Session.append`'s order for new events).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(self.kind.clone()));
        map.insert("seq".into(), self.seq.into());
        map.insert("time".into(), self.time.into());
        map.insert("data".into(), self.data.as_value().clone());
        let sources = self
            .source_event_seqs
            .clone()
            .map(|v| ("sourceEventSeqs", v));
        let op = self.surface_op.clone().map(|v| ("surfaceOp", v));
        let tail = match self.tail_order {
            TailOrder::SourcesFirst => [sources, op],
            TailOrder::SurfaceOpFirst => [op, sources],
        };
        for (key, value) in tail.into_iter().flatten() {
            map.insert(key.into(), value);
        }
        if self.ignorable == Some(true) {
            map.insert("ignorable".into(), Value::Bool(true));
        }
        Value::Object(map)
    }

    /// The event as one JSON line without the trailing LF.
    pub fn to_json_line(&self) -> String {
        self.to_value().to_string()
    }
}

fn invalid_envelope(why: String) -> LogError {
    LogError::new(
        LogErrorCode::InvalidEnvelope,
        format!("invalid event envelope: {why}"),
    )
}

/// The seven keys an envelope may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvelopeKey {
    Type,
    Seq,
    Time,
    Data,
    SourceEventSeqs,
    SurfaceOp,
    Ignorable,
}

impl EnvelopeKey {
    pub(crate) fn of(key: &str) -> Option<Self> {
        Some(match key {
            "type" => Self::Type,
            "seq" => Self::Seq,
            "time" => Self::Time,
            "data" => Self::Data,
            "sourceEventSeqs" => Self::SourceEventSeqs,
            "surfaceOp" => Self::SurfaceOp,
            "ignorable" => Self::Ignorable,
            _ => return None,
        })
    }
}

/// An envelope's fields as read, before validation. Later duplicates win, as in `JSON.parse`.
#[derive(Debug, Default)]
pub(crate) struct EnvelopeParts {
    kind: Option<Value>,
    seq: Option<Value>,
    time: Option<Value>,
    data: Option<Payload>,
    /// Boxed because most events have none of these keys, and the parts are moved several times on
    /// their way to an event.
    tail: Option<Box<TailParts>>,
}

/// The optional envelope keys as read.
#[derive(Debug, Default)]
struct TailParts {
    source_event_seqs: Option<Value>,
    surface_op: Option<Value>,
    ignorable: Option<Value>,
    tail_order: Option<TailOrder>,
}

impl EnvelopeParts {
    pub(crate) fn set(&mut self, key: EnvelopeKey, value: Value) {
        match key {
            EnvelopeKey::Type => self.kind = Some(value),
            EnvelopeKey::Seq => self.seq = Some(value),
            EnvelopeKey::Time => self.time = Some(value),
            EnvelopeKey::Data => self.data = Some(value.into()),
            EnvelopeKey::SourceEventSeqs => {
                let tail = self.tail.get_or_insert_default();
                if tail.surface_op.is_none() {
                    tail.tail_order = Some(TailOrder::SourcesFirst);
                }
                tail.source_event_seqs = Some(value);
            }
            EnvelopeKey::SurfaceOp => {
                let tail = self.tail.get_or_insert_default();
                if tail.source_event_seqs.is_none() {
                    tail.tail_order = Some(TailOrder::SurfaceOpFirst);
                }
                tail.surface_op = Some(value);
            }
            EnvelopeKey::Ignorable => self.tail.get_or_insert_default().ignorable = Some(value),
        }
    }

    /// Sets `data` to a payload the line kept as text.
    pub(crate) fn set_data(&mut self, data: Payload) {
        self.data = Some(data);
    }

    /// The `type`, when it is a string.
    pub(crate) fn kind(&self) -> Option<&str> {
        self.kind.as_ref().and_then(Value::as_str)
    }

    /// The `seq` as read.
    pub(crate) fn seq(&self) -> Option<&Value> {
        self.seq.as_ref()
    }

    /// The `data` as read.
    pub(crate) fn data(&self) -> Option<&Payload> {
        self.data.as_ref()
    }

    /// The parts as an envelope value (canonical key order), for scanner tests.
    #[cfg(test)]
    pub(crate) fn into_value(self) -> Value {
        let mut map = Map::new();
        let tail = self.tail.map(|t| *t).unwrap_or_default();
        for (key, value) in [
            ("type", self.kind),
            ("seq", self.seq),
            ("time", self.time),
            ("data", self.data.map(Payload::into_value)),
            ("sourceEventSeqs", tail.source_event_seqs),
            ("surfaceOp", tail.surface_op),
            ("ignorable", tail.ignorable),
        ] {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        Value::Object(map)
    }

    /// Validates the envelope rules of spec §1.4.
    pub(crate) fn into_event(self) -> Result<Event, LogError> {
        let kind = match self.kind {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid_envelope("type is not a string".into())),
            None => return Err(invalid_envelope("type is missing".into())),
        };
        let seq = match &self.seq {
            Some(v) => safe_uint(v)
                .ok_or_else(|| invalid_envelope(format!("seq {v} is not a safe integer ≥ 0")))?,
            None => return Err(invalid_envelope("seq is missing".into())),
        };
        let time = match &self.time {
            Some(v) => safe_int(v).ok_or_else(|| {
                invalid_envelope(format!("time {v} is not a safe integer")).at_seq(seq)
            })?,
            None => return Err(invalid_envelope("time is missing".into()).at_seq(seq)),
        };
        let data = self
            .data
            .ok_or_else(|| invalid_envelope("data is missing".into()).at_seq(seq))?;
        let tail = self.tail.map(|t| *t).unwrap_or_default();
        let ignorable = match tail.ignorable {
            None => None,
            Some(Value::Bool(true)) => Some(true),
            Some(_) => {
                return Err(invalid_envelope("ignorable is present but not true".into()).at_seq(seq))
            }
        };
        // The order only matters when both keys are present; otherwise normalise it so that equal lines
        // make equal events.
        let tail_order = match (&tail.source_event_seqs, &tail.surface_op) {
            (Some(_), Some(_)) => tail.tail_order.unwrap_or_default(),
            _ => TailOrder::default(),
        };
        Ok(Event {
            kind,
            seq,
            time,
            data,
            source_event_seqs: tail.source_event_seqs,
            surface_op: tail.surface_op,
            ignorable,
            tail_order,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_types_are_the_spec_list_and_looked_up_exactly() {
        assert_eq!(KNOWN_EVENT_TYPES.len(), 47);
        // Sorted, so that the list reads as the spec's and a duplicate would sit beside its twin.
        let mut sorted = KNOWN_EVENT_TYPES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, KNOWN_EVENT_TYPES);
        for kind in KNOWN_EVENT_TYPES {
            assert!(is_known_type(kind), "{kind}");
        }
        for near in [
            "mode/set",
            "turn/en",
            "turn/end ",
            "Turn/end",
            "turn/endx",
            "",
            "tool",
        ] {
            assert!(!is_known_type(near), "{near:?}");
        }
    }

    #[test]
    fn envelope_round_trips_with_key_order() {
        let line = r#"{"type":"tool/result","seq":3,"time":-1,"data":{"b":1,"a":2},"surfaceOp":"append","sourceEventSeqs":[1]}"#;
        let event = Event::from_value(serde_json::from_str(line).unwrap()).unwrap();
        assert_eq!(event.tail_order, TailOrder::SurfaceOpFirst);
        assert_eq!(event.to_json_line(), line);
    }

    #[test]
    fn tail_order_is_only_recorded_when_both_keys_are_present() {
        let line = r#"{"type":"user/message","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#;
        let read = Event::from_value(serde_json::from_str(line).unwrap()).unwrap();
        assert_eq!(read, Event::appended("user/message", 0, 0, json!({})));
    }

    #[test]
    fn envelope_rules_are_enforced() {
        for bad in [
            json!({"type":"a","seq":0,"time":0,"data":{},"extra":1}),
            json!({"type":"a","seq":-1,"time":0,"data":{}}),
            json!({"type":"a","seq":0.5,"time":0,"data":{}}),
            json!({"type":"a","seq":0,"time":0}),
            json!({"type":"a","seq":0,"time":0,"data":{},"ignorable":false}),
            json!({"type":1,"seq":0,"time":0,"data":{}}),
            json!([1]),
        ] {
            let err = Event::from_value(bad.clone()).unwrap_err();
            assert_eq!(err.code, LogErrorCode::InvalidEnvelope, "{bad}");
        }
        let ok =
            Event::from_value(json!({"type":"a","seq":1.0,"time":0,"data":null,"ignorable":true}))
                .unwrap();
        assert_eq!(ok.seq, 1);
        assert_eq!(ok.ignorable, Some(true));
    }
}
