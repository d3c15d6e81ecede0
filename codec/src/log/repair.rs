//! Crash-repair closers (spec §1.9): the synthetic events that balance a log whose last turn never ended.
//!
//! The last stage of the read pipeline ([`super::read`]): [`CloserTracker::observe`] sees every stored
//! event (after the legacy upgrades, in order) and keeps only the open turn, the open step and the tool
//! calls still waiting for a result; [`CloserTracker::closers`] then returns the events DSH appends in
//! memory when it inspects such a log: one `tool/result` per unanswered call, a `step/end` if a step is
//! open, and a `turn/end` with reason `interrupted`. Texts, ids and key orders are DSH's, byte for byte,
//! because the closers are indexed and searchable like stored events.
//!
//! The tracker is serialisable so that a read checkpoint can carry it: closers are never stored, only
//! what they are computed from, so a log that later grows past its open turn simply has none.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::event::{Event, TailOrder};
use super::event_ref::EventRef;
use super::message::Closing;

/// The text of the closer for a call whose `tool/call` was recorded.
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// The text of the closer for a call that never got a `tool/call`.
pub const NOT_STARTED_TEXT: &str =
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PendingCall {
    id: String,
    step: Value,
    call_seq: Option<u64>,
}

/// Tracks what a crash would leave open (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CloserTracker {
    last: Option<(u64, i64)>,
    #[serde(with = "held")]
    open_turn: Option<Value>,
    #[serde(with = "held")]
    open_step: Option<Value>,
    /// Insertion-ordered; a step rarely has more than a handful of calls, so a vector beats a map.
    calls: Vec<PendingCall>,
}

impl CloserTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Observes the next stored event.
    pub fn observe(&mut self, event: &Event) {
        self.observe_ref(EventRef::Event(event));
    }

    /// [`CloserTracker::observe`] for a borrowed event. A chunk delta only moves the last seq and time.
    pub fn observe_ref(&mut self, event: EventRef<'_>) {
        self.last = Some((event.seq(), event.time()));
        let EventRef::Event(event) = event else {
            return;
        };
        let data = &event.data;
        match event.kind.as_str() {
            "turn/start" => {
                // Read from the line when the data is kept as one (see `Payload::line_fields`).
                let turn = match data.line_fields(["turn"]) {
                    Some([turn]) => turn,
                    None => data.get("turn").cloned(),
                };
                self.open_turn = Some(turn.unwrap_or(Value::Null));
                self.open_step = None;
                self.calls.clear();
            }
            "turn/end" => {
                self.open_turn = None;
                self.open_step = None;
                self.calls.clear();
            }
            "step/start" => {
                // Read from the line when the data is kept as one (see `Payload::line_fields`).
                let step = match data.line_fields(["step"]) {
                    Some([step]) => step,
                    None => data.get("step").cloned(),
                };
                self.open_step = Some(step.unwrap_or(Value::Null));
            }
            "step/end" => {
                self.open_step = None;
                self.calls.clear();
            }
            "assistant/message" => {
                if let Some(Closing::Assistant { step, call_ids }) =
                    data.message_facts(&event.kind).map(|f| &f.closing)
                {
                    for id in call_ids {
                        self.call_made(id, step);
                    }
                    return;
                }
                let step = data.get("step").cloned().unwrap_or(Value::Null);
                let content = data
                    .get("message")
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_array);
                for block in content.into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) != Some("tool-call") {
                        continue;
                    }
                    if let Some(id) = block.get("id").and_then(Value::as_str) {
                        self.call_made(id, &step);
                    }
                }
            }
            "tool/call" => {
                if let Some(id) = data.get("callId").and_then(Value::as_str) {
                    if let Some(call) = self.calls.iter_mut().find(|c| c.id == id) {
                        call.call_seq = Some(event.seq);
                    }
                }
            }
            "tool/result" => {
                if let Some(Closing::ToolResult { call_id, .. }) =
                    data.message_facts(&event.kind).map(|f| &f.closing)
                {
                    self.calls.retain(|c| &c.id != call_id);
                    return;
                }
                let source = data.get("message").and_then(|m| m.get("source"));
                if let Some(id) = source.and_then(|s| s.get("callId")).and_then(Value::as_str) {
                    self.calls.retain(|c| c.id != id);
                }
            }
            _ => {}
        }
    }

    /// An assistant message's tool call `id`, made in `step`: now waiting for its result.
    fn call_made(&mut self, id: &str, step: &Value) {
        // `Map.set` on an existing key keeps its position and replaces the entry.
        let call = PendingCall {
            id: id.to_owned(),
            step: step.clone(),
            call_seq: None,
        };
        match self.calls.iter_mut().find(|c| c.id == id) {
            Some(existing) => *existing = call,
            None => self.calls.push(call),
        }
    }

    /// The seq of the last event observed.
    pub fn last_seq(&self) -> Option<u64> {
        self.last.map(|(seq, _)| seq)
    }

    /// Whether the events observed so far end inside a turn (and so would get closers).
    pub fn turn_open(&self) -> bool {
        self.last.is_some() && self.open_turn.is_some()
    }

    /// The closers for the events observed so far, in order; empty when no turn is open.
    pub fn closers(&self) -> Vec<Event> {
        let (Some((last_seq, time)), Some(turn)) = (self.last, &self.open_turn) else {
            return Vec::new();
        };
        let mut seq = last_seq.saturating_add(1);
        let mut out = Vec::with_capacity(self.calls.len() + 2);
        for call in &self.calls {
            out.push(tool_result_closer(seq, time, turn, call));
            seq = seq.saturating_add(1);
        }
        if let Some(step) = &self.open_step {
            out.push(Event::new(
                "step/end",
                seq,
                time,
                object([("turn", turn.clone()), ("step", step.clone())]),
            ));
            seq = seq.saturating_add(1);
        }
        let reason = object([("kind", "interrupted".into())]);
        out.push(Event::new(
            "turn/end",
            seq,
            time,
            object([("turn", turn.clone()), ("reason", reason)]),
        ));
        out
    }
}

/// `Option<Value>` stored as `null` or `{"value": …}`: stored plainly, a `Some(null)` (a `turn/start`
/// without a turn number still opens a turn) would read back as `None` and lose the open turn.
mod held {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    #[derive(Serialize)]
    struct HeldRef<'a> {
        value: &'a Value,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Held {
        value: Value,
    }

    pub fn serialize<S: Serializer>(held: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
        held.as_ref().map(|value| HeldRef { value }).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Ok(Option::<Held>::deserialize(d)?.map(|held| held.value))
    }
}

fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut map = Map::with_capacity(N);
    for (key, value) in entries {
        map.insert(key.to_owned(), value);
    }
    Value::Object(map)
}

fn tool_result_closer(seq: u64, time: i64, turn: &Value, call: &PendingCall) -> Event {
    let (text, name, code) = match call.call_seq {
        Some(_) => (
            OUTCOME_UNKNOWN_TEXT,
            "ToolOutcomeUnknownError",
            "TOOL_OUTCOME_UNKNOWN",
        ),
        None => (NOT_STARTED_TEXT, "ToolNotStartedError", "TOOL_NOT_STARTED"),
    };
    let id = Value::String(call.id.clone());
    let text_block = object([("type", "text".into()), ("text", text.into())]);
    let result_block = object([
        ("type", "tool-result".into()),
        ("toolCallId", id.clone()),
        ("isError", true.into()),
        ("content", Value::Array(vec![text_block])),
    ]);
    let message = object([
        (
            "id",
            format!("interrupted-tool-result-{}-{seq}", call.id).into(),
        ),
        ("role", "user".into()),
        ("source", object([("kind", "tool".into()), ("callId", id)])),
        ("content", Value::Array(vec![result_block])),
    ]);
    let data = object([
        ("turn", turn.clone()),
        ("step", call.step.clone()),
        ("message", message),
        (
            "error",
            object([("name", name.into()), ("code", code.into())]),
        ),
    ]);
    let mut event = Event::appended("tool/result", seq, time, data);
    event.source_event_seqs = call.call_seq.map(|s| Value::Array(vec![s.into()]));
    // Closers write `surfaceOp` before `sourceEventSeqs`; with one of the two the order is moot, and
    // `Event::from_value` normalises it, so only set it when it shows.
    if event.source_event_seqs.is_some() {
        event.tail_order = TailOrder::SurfaceOpFirst;
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn track(events: &[Event]) -> Vec<String> {
        let mut t = CloserTracker::new();
        for e in events {
            t.observe(e);
        }
        assert_eq!(t.turn_open(), !t.closers().is_empty());
        for closer in t.closers() {
            // A closer equals what reading its own line back gives.
            let reread = Event::from_value(serde_json::from_str(&closer.to_json_line()).unwrap());
            assert_eq!(reread.unwrap(), closer);
        }
        t.closers().iter().map(Event::to_json_line).collect()
    }

    fn calls(ids: &[&str]) -> Value {
        let content: Vec<Value> = ids
            .iter()
            .map(|id| json!({"type":"tool-call","id":id,"name":"n","arguments":"{}"}))
            .collect();
        json!({"turn":1,"step":0,"message":{"id":"a","role":"assistant","content":content,"source":{"kind":"model","provider":"p","model":"m"}}})
    }

    #[test]
    fn no_closers_without_an_open_turn() {
        assert!(track(&[]).is_empty());
        let closed = [
            Event::new("turn/start", 0, 1, json!({"turn":1})),
            Event::new(
                "turn/end",
                1,
                2,
                json!({"turn":1,"reason":{"kind":"completed"}}),
            ),
        ];
        assert!(track(&closed).is_empty());
        assert!(track(&[Event::new("session/title", 0, 1, json!({}))]).is_empty());
    }

    #[test]
    fn open_turn_without_step_gets_only_a_turn_end() {
        let lines = track(&[Event::new("turn/start", 0, 5, json!({"turn":3}))]);
        assert_eq!(
            lines,
            [
                r#"{"type":"turn/end","seq":1,"time":5,"data":{"turn":3,"reason":{"kind":"interrupted"}}}"#
            ]
        );
    }

    #[test]
    fn open_step_with_calls_gets_exact_closers() {
        let events = [
            Event::new("turn/start", 0, 1, json!({"turn":1})),
            Event::new("step/start", 1, 2, json!({"turn":1,"step":0})),
            Event::appended("assistant/message", 2, 3, calls(&["c1", "c2", "c3"])),
            Event::new(
                "tool/call",
                3,
                4,
                json!({"turn":1,"step":0,"callId":"c2","name":"n","arguments":"{}"}),
            ),
            Event::appended(
                "tool/result",
                4,
                9,
                json!({"turn":1,"step":0,"message":{"id":"r","role":"user","content":[],"source":{"kind":"tool","callId":"c3"}}}),
            ),
        ];
        let lines = track(&events);
        let unknown = format!(
            r#"{{"type":"tool/result","seq":6,"time":9,"data":{{"turn":1,"step":0,"message":{{"id":"interrupted-tool-result-c2-6","role":"user","source":{{"kind":"tool","callId":"c2"}},"content":[{{"type":"tool-result","toolCallId":"c2","isError":true,"content":[{{"type":"text","text":"{OUTCOME_UNKNOWN_TEXT}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[3]}}"#
        );
        let not_started = format!(
            r#"{{"type":"tool/result","seq":5,"time":9,"data":{{"turn":1,"step":0,"message":{{"id":"interrupted-tool-result-c1-5","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{{"type":"text","text":"{NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        );
        assert_eq!(
            lines,
            [
                not_started,
                unknown,
                r#"{"type":"step/end","seq":7,"time":9,"data":{"turn":1,"step":0}}"#.to_owned(),
                r#"{"type":"turn/end","seq":8,"time":9,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#.to_owned(),
            ]
        );
    }

    #[test]
    fn tracker_survives_serialisation_with_a_null_turn() {
        let events = [
            Event::new("turn/start", 0, 1, json!({})),
            Event::new("step/start", 1, 2, json!({"turn":null,"step":0})),
            Event::appended("assistant/message", 2, 3, calls(&["c1", "c2"])),
            Event::new(
                "tool/call",
                3,
                4,
                json!({"turn":1,"step":0,"callId":"c2","name":"n","arguments":"{}"}),
            ),
        ];
        let mut t = CloserTracker::new();
        for e in &events {
            t.observe(e);
        }
        let text = serde_json::to_string(&t).unwrap();
        let back: CloserTracker = serde_json::from_str(&text).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.open_turn, Some(Value::Null));
        assert_eq!(back.closers(), t.closers());
        assert_eq!(back.closers().len(), 4);
        assert_eq!(back.last_seq(), Some(3));
        // A stored turn that is neither null nor a held value is refused, not guessed at.
        let bad = text.replace(r#""open_turn":{"value":null}"#, r#""open_turn":5"#);
        assert_ne!(bad, text);
        assert!(serde_json::from_str::<CloserTracker>(&bad).is_err());
    }

    #[test]
    fn step_end_clears_pending_calls_and_turn_start_resets() {
        let events = [
            Event::new("turn/start", 0, 1, json!({"turn":1})),
            Event::new("step/start", 1, 2, json!({"turn":1,"step":0})),
            Event::appended("assistant/message", 2, 3, calls(&["c1"])),
            Event::new("step/end", 3, 4, json!({"turn":1,"step":0})),
        ];
        let lines = track(&events);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("turn/end"));
    }
}
