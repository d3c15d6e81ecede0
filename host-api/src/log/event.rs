//! The event envelope (spec §1.4): one logged fact, with `data` kept as arbitrary JSON.

use serde_json::{Map, Value};

use super::error::{LogError, LogErrorCode};
use crate::json::{safe_int, safe_uint};

/// The three event types that live on the model-visible surface (spec §1.5).
pub const SURFACE_EVENT_TYPES: [&str; 3] = ["user/message", "assistant/message", "tool/result"];

/// DSH's known event types (spec §1.5). A type outside it must carry `ignorable: true`.
///
/// The spec calls the set "48 types" but lists 47 (44 log-only + 3 surface types); this is the list as
/// written. Every type in the real fixtures is in it (the conformance test would fail otherwise).
pub const KNOWN_EVENT_TYPES: [&str; 47] = [
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

/// Whether `kind` is in DSH's known set.
pub fn is_known_type(kind: &str) -> bool {
    KNOWN_EVENT_TYPES.binary_search(&kind).is_ok()
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
    pub data: Value,
    pub source_event_seqs: Option<Value>,
    pub surface_op: Option<Value>,
    /// `Some(true)` only; any other value is rejected when the envelope is read.
    pub ignorable: Option<bool>,
    pub tail_order: TailOrder,
}

impl Event {
    /// A plain event with no surface marker.
    pub fn new(kind: impl Into<String>, seq: u64, time: i64, data: Value) -> Self {
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
        let invalid = |why: String| {
            LogError::new(
                LogErrorCode::InvalidEnvelope,
                format!("invalid event envelope: {why}"),
            )
        };
        let Value::Object(map) = value else {
            return Err(invalid("not a JSON object".into()));
        };
        let mut kind = None;
        let mut seq = None;
        let mut time = None;
        let mut data = None;
        let mut source_event_seqs = None;
        let mut surface_op = None;
        let mut ignorable = None;
        let mut tail_order = None;
        for (key, value) in map {
            match key.as_str() {
                "type" => match value {
                    Value::String(s) => kind = Some(s),
                    _ => return Err(invalid("type is not a string".into())),
                },
                "seq" => {
                    seq =
                        Some(safe_uint(&value).ok_or_else(|| {
                            invalid(format!("seq {value} is not a safe integer ≥ 0"))
                        })?)
                }
                "time" => {
                    time =
                        Some(safe_int(&value).ok_or_else(|| {
                            invalid(format!("time {value} is not a safe integer"))
                        })?)
                }
                "data" => data = Some(value),
                "sourceEventSeqs" => {
                    if surface_op.is_none() {
                        tail_order = Some(TailOrder::SourcesFirst);
                    }
                    source_event_seqs = Some(value);
                }
                "surfaceOp" => {
                    if source_event_seqs.is_none() {
                        tail_order = Some(TailOrder::SurfaceOpFirst);
                    }
                    surface_op = Some(value);
                }
                "ignorable" => match value {
                    Value::Bool(true) => ignorable = Some(true),
                    _ => return Err(invalid("ignorable is present but not true".into())),
                },
                other => return Err(invalid(format!("unexpected key {other:?}"))),
            }
        }
        let kind = kind.ok_or_else(|| invalid("type is missing".into()))?;
        let seq = seq.ok_or_else(|| invalid("seq is missing".into()))?;
        let err_seq = |e: LogError| e.at_seq(seq);
        let time = time
            .ok_or_else(|| invalid("time is missing".into()))
            .map_err(err_seq)?;
        let data = data
            .ok_or_else(|| invalid("data is missing".into()))
            .map_err(err_seq)?;
        // The order only matters when both keys are present; otherwise normalise it so that equal lines
        // make equal events.
        let tail_order = match (&source_event_seqs, &surface_op) {
            (Some(_), Some(_)) => tail_order.unwrap_or_default(),
            _ => TailOrder::default(),
        };
        Ok(Self {
            kind,
            seq,
            time,
            data,
            source_event_seqs,
            surface_op,
            ignorable,
            tail_order,
        })
    }

    /// The envelope as JSON, keys in the order they were read (or `Session.append`'s order for new events).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), Value::String(self.kind.clone()));
        map.insert("seq".into(), self.seq.into());
        map.insert("time".into(), self.time.into());
        map.insert("data".into(), self.data.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_types_are_sorted_for_binary_search() {
        let mut sorted = KNOWN_EVENT_TYPES;
        sorted.sort_unstable();
        assert_eq!(sorted, KNOWN_EVENT_TYPES);
        assert!(is_known_type("turn/end"));
        assert!(!is_known_type("mode/set"));
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
