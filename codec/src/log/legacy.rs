//! Legacy read upgrades (spec §1.8): older shapes of the same format version 0, upgraded in memory as
//! they are read (storage is never rewritten).
//!
//! Runs in the per-event pipeline of [`super::read`] after the obsolete-vocabulary check and before the
//! message-shape check, on the event envelope as parsed JSON. Upgrades are applied per event, in log
//! order, because a pre-identity `tool/result` replacement inherits the message id of the event it
//! replaces: [`LegacyUpgrader`] keeps the seq → message id map for that. The map holds one id per message
//! event read so far, the only per-log state of the reader that grows with the log.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{LogError, LogErrorCode};
use crate::json::safe_uint;

/// The id given to a message that predates message identity: `legacy-message:<sessionId>:<seq>`.
pub fn legacy_message_id(session_id: &str, seq: u64) -> String {
    format!("legacy-message:{session_id}:{seq}")
}

/// Applies the upgrades of spec §1.8 to one event at a time, in log order.
#[derive(Debug, Clone)]
pub struct LegacyUpgrader {
    session_id: String,
    message_ids: MessageIds,
    upgraded: u64,
}

/// The seq → message id map. Seqs arrive in increasing order, so the ids live in one growing string
/// with a sorted index beside it: no allocation per message event, and a binary search per lookup.
#[derive(Debug, Clone, Default)]
struct MessageIds {
    text: String,
    index: Vec<(u64, usize, usize)>,
}

impl MessageIds {
    fn insert(&mut self, seq: u64, id: &str) {
        if self.index.last().is_some_and(|&(last, _, _)| last >= seq) {
            // Out of order can only mean a caller that skipped the scanner; keep the map correct anyway.
            self.index.retain(|&(s, _, _)| s < seq);
        }
        let start = self.text.len();
        self.text.push_str(id);
        self.index.push((seq, start, id.len()));
    }

    fn get(&self, seq: u64) -> Option<&str> {
        let at = self.index.binary_search_by_key(&seq, |&(s, _, _)| s).ok()?;
        let &(_, start, len) = self.index.get(at)?;
        self.text.get(start..start.checked_add(len)?)
    }
}

/// What a [`LegacyUpgrader`] carries from one event to the next, in a form a read checkpoint can store:
/// the upgrade count and the seq → message id map, its ids concatenated in `text` with one
/// `(seq, byte length)` pair per id in `ids` (compact, and rebuilt into the map without parsing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyState {
    upgraded: u64,
    text: String,
    ids: Vec<(u64, u32)>,
}

impl LegacyUpgrader {
    /// The state to store in a checkpoint that covers the events below `next_seq`. An event at or past
    /// it was upgraded but then refused by a later check, so it is not part of what is covered.
    pub fn state_before(&self, next_seq: u64) -> LegacyState {
        let mut ids = Vec::with_capacity(self.message_ids.index.len());
        let mut text = String::with_capacity(self.message_ids.text.len());
        for &(seq, start, len) in self.message_ids.index.iter().filter(|e| e.0 < next_seq) {
            let id = self
                .message_ids
                .text
                .get(start..start.saturating_add(len))
                .unwrap_or_default();
            // An id longer than 4 GiB cannot come out of a line the reader accepted; skipping it would
            // only cost a replacement its inherited id, never a wrong one.
            let Ok(stored) = u32::try_from(id.len()) else {
                continue;
            };
            text.push_str(id);
            ids.push((seq, stored));
        }
        LegacyState {
            upgraded: self.upgraded,
            text,
            ids,
        }
    }

    /// An upgrader for session `session_id` continuing from `state`, before the event with seq
    /// `next_seq`. Refuses (with the reason) a state that does not fit: ids out of order, at or past
    /// `next_seq`, or spans that do not tile `text` on character boundaries.
    pub fn restore(session_id: &str, state: LegacyState, next_seq: u64) -> Result<Self, String> {
        let mut index = Vec::with_capacity(state.ids.len());
        let mut start = 0usize;
        let mut previous: Option<u64> = None;
        for (seq, len) in state.ids {
            if previous.is_some_and(|p| p >= seq) || seq >= next_seq {
                return Err(format!(
                    "legacy message ids are not in increasing seq order below {next_seq} (at seq {seq})"
                ));
            }
            let len = len as usize;
            let end = start.saturating_add(len);
            if state.text.get(start..end).is_none() {
                return Err(format!(
                    "legacy message id of seq {seq} does not lie on character boundaries of the stored ids"
                ));
            }
            index.push((seq, start, len));
            start = end;
            previous = Some(seq);
        }
        if start != state.text.len() {
            return Err("legacy message ids do not cover the stored id text".to_owned());
        }
        Ok(Self {
            session_id: session_id.to_owned(),
            message_ids: MessageIds {
                text: state.text,
                index,
            },
            upgraded: state.upgraded,
        })
    }

    /// An upgrader for the log of session `session_id` (the header id).
    pub fn new(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_owned(),
            message_ids: MessageIds::default(),
            upgraded: 0,
        }
    }

    /// How many events were changed so far.
    pub fn upgraded(&self) -> u64 {
        self.upgraded
    }

    /// Upgrades `event` (an envelope whose `seq` the scanner already proved to be `seq`) in place. Returns
    /// whether it changed. A legacy shape that cannot be upgraded, or any `turn/end` whose data breaks the
    /// rules, is a [`LogErrorCode::MalformedLegacy`] error.
    pub fn upgrade(&mut self, seq: u64, event: &mut Value) -> Result<bool, LogError> {
        let Value::Object(envelope) = event else {
            return Ok(false);
        };
        let changed = self
            .upgrade_envelope(seq, envelope)
            .map_err(|e| e.at_seq(seq))?;
        if changed {
            self.upgraded = self.upgraded.saturating_add(1);
        }
        if let Some(id) = message_id(envelope) {
            self.message_ids.insert(seq, id);
        }
        Ok(changed)
    }

    /// Records the id of the message event `seq` that needed no upgrade (one read typed, see
    /// [`super::message`]), as [`LegacyUpgrader::upgrade`] records the id of every message event.
    pub(crate) fn record(&mut self, seq: u64, id: &str) {
        self.message_ids.insert(seq, id);
    }

    fn upgrade_envelope(
        &self,
        seq: u64,
        envelope: &mut Map<String, Value>,
    ) -> Result<bool, LogError> {
        let kind = match envelope.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            _ => return Ok(false),
        };
        match kind {
            "turn/start" => upgrade_turn_start(envelope),
            "turn/end" => upgrade_turn_end(envelope),
            "steering/message" => {
                let data = take_data(envelope);
                let message = self.steering_message(seq, data)?;
                envelope.insert("type".into(), "user/message".into());
                envelope.insert("data".into(), message);
                Ok(true)
            }
            "user/message" => Ok(self.upgrade_user_message(seq, envelope)),
            "assistant/message" => self.upgrade_assistant_message(seq, envelope),
            "tool/result" => Ok(self.upgrade_tool_result(seq, envelope)),
            _ => Ok(false),
        }
    }

    fn steering_message(&self, seq: u64, data: Value) -> Result<Value, LogError> {
        let malformed = || {
            malformed("malformed steering/message: data must be {turn, message} or {turn, content, source}")
        };
        let Value::Object(mut data) = data else {
            return Err(malformed());
        };
        if data.len() == 2 && data.contains_key("turn") {
            return match data.remove("message") {
                Some(message @ Value::Object(_)) => Ok(message),
                _ => Err(malformed()),
            };
        }
        if data.len() == 3 && data.contains_key("turn") {
            if let (Some(content), Some(source)) = (data.remove("content"), data.remove("source")) {
                let mut message = Map::with_capacity(4);
                message.insert("content".into(), content);
                message.insert("source".into(), source);
                message.insert("id".into(), legacy_message_id(&self.session_id, seq).into());
                message.insert("role".into(), "user".into());
                return Ok(Value::Object(message));
            }
        }
        Err(malformed())
    }

    fn upgrade_user_message(&self, seq: u64, envelope: &mut Map<String, Value>) -> bool {
        let Some(Value::Object(data)) = envelope.get_mut("data") else {
            return false;
        };
        let pre_identity = data.contains_key("content")
            && data.contains_key("source")
            && !data.contains_key("id")
            && !data.contains_key("role")
            && !data.contains_key("message");
        if pre_identity {
            data.insert("id".into(), legacy_message_id(&self.session_id, seq).into());
            data.insert("role".into(), "user".into());
        }
        pre_identity
    }

    fn upgrade_assistant_message(
        &self,
        seq: u64,
        envelope: &mut Map<String, Value>,
    ) -> Result<bool, LogError> {
        let pre_identity = matches!(envelope.get("data"), Some(Value::Object(d))
            if d.contains_key("content") && d.contains_key("provenance") && !d.contains_key("message"));
        if !pre_identity {
            return Ok(false);
        }
        let Value::Object(data) = take_data(envelope) else {
            return Ok(false);
        };
        let mut rest = Map::with_capacity(data.len());
        let mut content = Value::Null;
        let mut provenance = Value::Null;
        for (key, value) in data {
            match key.as_str() {
                "content" => content = value,
                "provenance" => provenance = value,
                _ => {
                    rest.insert(key, value);
                }
            }
        }
        // `{...provenance, kind: 'model'}`: spreading anything but an object is not a shape DSH wrote.
        let Value::Object(mut source) = provenance else {
            return Err(malformed(
                "malformed pre-identity assistant/message: provenance is not an object",
            ));
        };
        source.insert("kind".into(), "model".into());
        let mut message = Map::with_capacity(4);
        message.insert("id".into(), legacy_message_id(&self.session_id, seq).into());
        message.insert("role".into(), "assistant".into());
        message.insert("content".into(), content);
        message.insert("source".into(), Value::Object(source));
        rest.insert("message".into(), Value::Object(message));
        envelope.insert("data".into(), Value::Object(rest));
        Ok(true)
    }

    fn upgrade_tool_result(&self, seq: u64, envelope: &mut Map<String, Value>) -> bool {
        let pre_identity = matches!(envelope.get("data"), Some(Value::Object(d))
            if d.contains_key("callId") && d.contains_key("content") && d.contains_key("isError")
                && !d.contains_key("message"));
        if !pre_identity {
            return false;
        }
        // A replacement keeps the id of the message it replaces, so the chain reads as one message.
        let inherited = match envelope.get("surfaceOp") {
            Some(Value::Object(op)) => op
                .get("start")
                .and_then(safe_uint)
                .and_then(|s| self.message_ids.get(s)),
            _ => None,
        };
        let id = inherited.map_or_else(|| legacy_message_id(&self.session_id, seq), str::to_owned);
        let Value::Object(data) = take_data(envelope) else {
            return false;
        };
        let mut rest = Map::with_capacity(data.len());
        let (mut call_id, mut content, mut is_error) = (Value::Null, Value::Null, Value::Null);
        for (key, value) in data {
            match key.as_str() {
                "callId" => call_id = value,
                "content" => content = value,
                "isError" => is_error = value,
                _ => {
                    rest.insert(key, value);
                }
            }
        }
        let mut block = Map::with_capacity(4);
        block.insert("type".into(), "tool-result".into());
        block.insert("toolCallId".into(), call_id.clone());
        block.insert("content".into(), content);
        block.insert("isError".into(), is_error);
        let mut source = Map::with_capacity(2);
        source.insert("kind".into(), "tool".into());
        source.insert("callId".into(), call_id);
        let mut message = Map::with_capacity(4);
        message.insert("id".into(), id.into());
        message.insert("role".into(), "user".into());
        message.insert("content".into(), Value::Array(vec![Value::Object(block)]));
        message.insert("source".into(), Value::Object(source));
        rest.insert("message".into(), Value::Object(message));
        envelope.insert("data".into(), Value::Object(rest));
        true
    }
}

fn malformed(message: &str) -> LogError {
    LogError::new(LogErrorCode::MalformedLegacy, message)
}

/// Takes `data` out of the envelope, leaving `null` in its place (the key keeps its position).
fn take_data(envelope: &mut Map<String, Value>) -> Value {
    envelope
        .get_mut("data")
        .map(Value::take)
        .unwrap_or(Value::Null)
}

fn is_message_type(kind: &str) -> bool {
    matches!(kind, "user/message" | "assistant/message" | "tool/result")
}

/// Whether [`LegacyUpgrader::upgrade`] can change an event of this type (or needs to see it). Readers
/// use it to skip the upgrader for the bulk of events.
pub fn concerns(kind: &str) -> bool {
    is_message_type(kind) || matches!(kind, "turn/start" | "turn/end" | "steering/message")
}

/// The message id of a (current-shape) message event, the key of the replacement map.
fn message_id(envelope: &Map<String, Value>) -> Option<&str> {
    let data = envelope.get("data")?;
    match envelope.get("type")?.as_str()? {
        "user/message" => data.get("id")?.as_str(),
        "assistant/message" | "tool/result" => data.get("message")?.get("id")?.as_str(),
        _ => None,
    }
}

fn turn_at_least_one(value: Option<&Value>) -> bool {
    value.and_then(safe_uint).is_some_and(|t| t >= 1)
}

/// A pre-react-loop `turn/start` (`{turn, trigger}`) becomes `{turn}`.
fn upgrade_turn_start(envelope: &mut Map<String, Value>) -> Result<bool, LogError> {
    let Some(Value::Object(data)) = envelope.get_mut("data") else {
        return Ok(false);
    };
    if !data.contains_key("trigger") {
        return Ok(false);
    }
    let trigger_ok = data
        .get("trigger")
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str)
        .is_some_and(|k| !k.is_empty());
    if data.len() != 2 || !turn_at_least_one(data.get("turn")) || !trigger_ok {
        return Err(malformed(
            "malformed pre-react-loop turn/start: data must be {turn, trigger} with turn ≥ 1 and a trigger kind",
        ));
    }
    data.shift_remove("trigger");
    Ok(true)
}

/// Checks every `turn/end` and upgrades the legacy reasons.
fn upgrade_turn_end(envelope: &mut Map<String, Value>) -> Result<bool, LogError> {
    let Some(Value::Object(data)) = envelope.get_mut("data") else {
        return Err(malformed("malformed turn/end: data is not an object"));
    };
    if data.len() != 2 || !turn_at_least_one(data.get("turn")) {
        return Err(malformed(
            "malformed turn/end: data must be exactly {turn, reason} with turn a safe integer ≥ 1",
        ));
    }
    let Some(Value::Object(reason)) = data.get_mut("reason") else {
        return Err(malformed("malformed turn/end: reason is not an object"));
    };
    let Some(kind) = reason.get("kind").and_then(Value::as_str) else {
        return Err(malformed("malformed turn/end: reason.kind is not a string"));
    };
    let only_kind = reason.len() == 1;
    let bad = |kind: &str| {
        malformed(&format!(
            "malformed {kind} turn/end: unexpected reason keys"
        ))
    };
    let upgraded = match kind {
        "completed" | "blocked" | "max-tokens" | "interrupted" => {
            return if only_kind { Ok(false) } else { Err(bad(kind)) };
        }
        "aborted" if reason.contains_key("reason") => return Ok(false),
        "aborted" if only_kind => aborted("legacy"),
        "disposed" if only_kind => aborted("disposed"),
        "aborted" | "disposed" => return Err(bad(kind)),
        "error" if reason.contains_key("error") => return Ok(false),
        "error" => legacy_error(reason)?,
        _ => return Ok(false),
    };
    *reason = upgraded;
    Ok(true)
}

fn aborted(why: &str) -> Map<String, Value> {
    let mut inner = Map::with_capacity(1);
    inner.insert("kind".into(), why.into());
    let mut reason = Map::with_capacity(2);
    reason.insert("kind".into(), "aborted".into());
    reason.insert("reason".into(), Value::Object(inner));
    reason
}

/// `{kind:'error', step, failure}` and `{kind:'error', step, message, code?}` become `{kind:'error', error}`.
fn legacy_error(reason: &Map<String, Value>) -> Result<Map<String, Value>, LogError> {
    let bad = |why: &str| malformed(&format!("malformed legacy error turn/end: {why}"));
    if reason.get("step").and_then(safe_uint).is_none() {
        return Err(bad("step is not a safe integer ≥ 0"));
    }
    let error = if let Some(failure) = reason.get("failure") {
        if reason.len() != 3 {
            return Err(bad("reason must be exactly {kind, step, failure}"));
        }
        let Value::Object(f) = failure else {
            return Err(bad("failure is not an object"));
        };
        let fields_ok = f.iter().all(|(key, value)| match key.as_str() {
            "message" | "code" | "requestId" => value.is_string(),
            "status" | "providerRetryAfterMs" => value.is_number(),
            _ => false,
        });
        if !fields_ok || !f.contains_key("message") || !f.contains_key("code") {
            return Err(bad(
                "failure must be {message, code, status?, providerRetryAfterMs?, requestId?}",
            ));
        }
        failure.clone()
    } else {
        let message = reason.get("message").filter(|m| m.is_string());
        let code = match reason.get("code") {
            None | Some(Value::Null) => Value::from("UNKNOWN"),
            Some(code @ Value::String(_)) => code.clone(),
            Some(_) => return Err(bad("code is not a string")),
        };
        let expected_len = if reason.contains_key("code") { 4 } else { 3 };
        let (Some(message), true) = (message, reason.len() == expected_len) else {
            return Err(bad(
                "reason must be {kind, step, failure} or {kind, step, message, code?}",
            ));
        };
        let mut error = Map::with_capacity(2);
        error.insert("message".into(), message.clone());
        error.insert("code".into(), code);
        Value::Object(error)
    };
    let mut upgraded = Map::with_capacity(2);
    upgraded.insert("kind".into(), "error".into());
    upgraded.insert("error".into(), error);
    Ok(upgraded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn up(u: &mut LegacyUpgrader, seq: u64, event: Value) -> Result<String, LogErrorCode> {
        let mut event = event;
        u.upgrade(seq, &mut event)
            .map(|_| event.to_string())
            .map_err(|e| e.code)
    }

    fn turn_end(reason: Value) -> Value {
        json!({"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":reason}})
    }

    #[test]
    fn message_id_map_finds_ids_by_seq() {
        let mut ids = MessageIds::default();
        ids.insert(2, "a");
        ids.insert(5, "bb");
        ids.insert(9, "");
        assert_eq!(
            (ids.get(2), ids.get(5), ids.get(9), ids.get(3)),
            (Some("a"), Some("bb"), Some(""), None)
        );
        // A seq seen again replaces what followed it rather than breaking the order.
        ids.insert(5, "c");
        assert_eq!((ids.get(5), ids.get(9)), (Some("c"), None));
    }

    #[test]
    fn restored_state_keeps_ids_for_replacements_and_the_count() {
        let mut u = LegacyUpgrader::new("s");
        let result = |seq: u64, op: Value| {
            json!({"type":"tool/result","seq":seq,"time":0,"surfaceOp":op,
                   "data":{"turn":1,"callId":"c","content":[],"isError":false}})
        };
        up(&mut u, 0, json!({"type":"user/message","seq":0,"time":0,"data":{"id":"ü1","role":"user","content":[],"source":{"kind":"user"}}})).unwrap();
        up(&mut u, 1, result(1, json!("append"))).unwrap();
        // The map is rebuilt from the ids only: an id dropped by an out-of-order insert is not carried.
        u.message_ids.insert(1, "legacy-message:s:1");
        let state = u.state_before(2);
        let back: LegacyState =
            serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        let mut restored = LegacyUpgrader::restore("s", back, 2).unwrap();
        assert_eq!(restored.upgraded(), 1);
        assert_eq!(restored.message_ids.get(0), Some("ü1"));
        let replaced = up(
            &mut restored,
            2,
            result(2, json!({"op":"replace","start":1,"end":1})),
        )
        .unwrap();
        assert!(
            replaced.contains(r#""id":"legacy-message:s:1""#),
            "{replaced}"
        );
        assert_eq!(restored.upgraded(), 2);
    }

    #[test]
    fn restore_refuses_a_state_that_does_not_fit() {
        let state = |text: &str, ids: Vec<(u64, u32)>| LegacyState {
            upgraded: 0,
            text: text.to_owned(),
            ids,
        };
        let cases = [
            (state("ab", vec![(3, 1), (2, 1)]), "increasing"),
            (state("ab", vec![(1, 1), (5, 1)]), "increasing"),
            (state("ü", vec![(1, 1)]), "character boundaries"),
            (state("ab", vec![(1, 1)]), "cover"),
            (state("a", vec![(1, 2)]), "character boundaries"),
        ];
        for (bad, why) in cases {
            let err = LegacyUpgrader::restore("s", bad.clone(), 5).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(LegacyUpgrader::restore("s", state("ab", vec![(1, 1), (4, 1)]), 5).is_ok());
    }

    #[test]
    fn turn_start_trigger_is_dropped() {
        let mut u = LegacyUpgrader::new("s");
        let e = json!({"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{"kind":"user"}}});
        assert_eq!(
            up(&mut u, 0, e).unwrap(),
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#
        );
        for bad in [
            json!({"turn":0,"trigger":{"kind":"user"}}),
            json!({"turn":1,"trigger":{"kind":""}}),
            json!({"turn":1,"trigger":"user"}),
            json!({"turn":1,"trigger":{"kind":"user"},"x":1}),
        ] {
            let e = json!({"type":"turn/start","seq":0,"time":0,"data":bad});
            assert_eq!(up(&mut u, 0, e), Err(LogErrorCode::MalformedLegacy));
        }
    }

    #[test]
    fn turn_end_reasons_are_checked_and_upgraded() {
        let mut u = LegacyUpgrader::new("s");
        let reason = |e: Value| -> Value {
            serde_json::from_str::<Value>(&up(&mut LegacyUpgrader::new("s"), 1, e).unwrap())
                .unwrap()["data"]["reason"]
                .clone()
        };
        assert_eq!(
            reason(turn_end(json!({"kind":"completed"}))),
            json!({"kind":"completed"})
        );
        assert_eq!(
            reason(turn_end(json!({"kind":"aborted"}))),
            json!({"kind":"aborted","reason":{"kind":"legacy"}})
        );
        assert_eq!(
            reason(turn_end(json!({"kind":"aborted","reason":{"kind":"user"}}))),
            json!({"kind":"aborted","reason":{"kind":"user"}})
        );
        assert_eq!(
            reason(turn_end(json!({"kind":"disposed"}))),
            json!({"kind":"aborted","reason":{"kind":"disposed"}})
        );
        assert_eq!(
            reason(turn_end(
                json!({"kind":"error","step":0,"failure":{"message":"m","code":"C","status":500}})
            )),
            json!({"kind":"error","error":{"message":"m","code":"C","status":500}})
        );
        assert_eq!(
            reason(turn_end(json!({"kind":"error","step":2,"message":"m"}))),
            json!({"kind":"error","error":{"message":"m","code":"UNKNOWN"}})
        );
        assert_eq!(
            reason(turn_end(
                json!({"kind":"error","step":2,"message":"m","code":"X"})
            )),
            json!({"kind":"error","error":{"message":"m","code":"X"}})
        );
        assert_eq!(
            reason(turn_end(json!({"kind":"future","x":1}))),
            json!({"kind":"future","x":1})
        );
        for bad in [
            json!({"type":"turn/end","seq":1,"time":0,"data":{"turn":0,"reason":{"kind":"completed"}}}),
            json!({"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"},"x":1}}),
            json!({"type":"turn/end","seq":1,"time":0,"data":{"turn":1}}),
            json!({"type":"turn/end","seq":1,"time":0,"data":null}),
            turn_end(json!({"kind":1})),
            turn_end(json!("completed")),
            turn_end(json!({"kind":"completed","x":1})),
            turn_end(json!({"kind":"disposed","x":1})),
            turn_end(json!({"kind":"error","step":-1,"message":"m"})),
            turn_end(json!({"kind":"error","step":0,"failure":{"message":"m"}})),
            turn_end(json!({"kind":"error","step":0,"failure":{"message":"m","code":"C","x":1}})),
            turn_end(json!({"kind":"error","step":0,"failure":{"message":"m","code":"C"},"x":1})),
            turn_end(json!({"kind":"error","step":0})),
            turn_end(json!({"kind":"error","step":0,"message":"m","extra":1})),
        ] {
            assert_eq!(
                up(&mut u, 1, bad.clone()),
                Err(LogErrorCode::MalformedLegacy),
                "{bad}"
            );
        }
    }

    #[test]
    fn steering_messages_become_user_messages() {
        let mut u = LegacyUpgrader::new("s");
        let e = json!({"type":"steering/message","seq":4,"time":0,"data":{"turn":1,"message":{"id":"m","role":"user"}},"surfaceOp":"append"});
        assert_eq!(
            up(&mut u, 4, e).unwrap(),
            r#"{"type":"user/message","seq":4,"time":0,"data":{"id":"m","role":"user"},"surfaceOp":"append"}"#
        );
        let e = json!({"type":"steering/message","seq":5,"time":0,"data":{"turn":1,"content":[],"source":{"kind":"user"}}});
        assert_eq!(
            up(&mut u, 5, e).unwrap(),
            r#"{"type":"user/message","seq":5,"time":0,"data":{"content":[],"source":{"kind":"user"},"id":"legacy-message:s:5","role":"user"}}"#
        );
        for bad in [
            json!({"turn":1}),
            json!({"turn":1,"message":"x"}),
            json!({"turn":1,"content":[]}),
            json!([]),
        ] {
            let e = json!({"type":"steering/message","seq":6,"time":0,"data":bad});
            assert_eq!(up(&mut u, 6, e), Err(LogErrorCode::MalformedLegacy));
        }
    }

    #[test]
    fn pre_identity_messages_get_ids_and_replacements_inherit_them() {
        let mut u = LegacyUpgrader::new("s");
        let user = json!({"type":"user/message","seq":0,"time":0,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"});
        assert_eq!(
            up(&mut u, 0, user).unwrap(),
            r#"{"type":"user/message","seq":0,"time":0,"data":{"content":[],"source":{"kind":"user"},"id":"legacy-message:s:0","role":"user"},"surfaceOp":"append"}"#
        );
        let assistant = json!({"type":"assistant/message","seq":1,"time":0,"data":{"turn":1,"content":[],"step":0,"provenance":{"kind":"x","provider":"p","model":"m"}}});
        assert_eq!(
            up(&mut u, 1, assistant).unwrap(),
            r#"{"type":"assistant/message","seq":1,"time":0,"data":{"turn":1,"step":0,"message":{"id":"legacy-message:s:1","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}}}"#
        );
        let bad = json!({"type":"assistant/message","seq":1,"time":0,"data":{"content":[],"provenance":"p"}});
        assert_eq!(up(&mut u, 1, bad), Err(LogErrorCode::MalformedLegacy));
        let result = json!({"type":"tool/result","seq":2,"time":0,"data":{"turn":1,"step":0,"callId":"c","content":[],"isError":false},"surfaceOp":"append"});
        assert_eq!(
            up(&mut u, 2, result).unwrap(),
            r#"{"type":"tool/result","seq":2,"time":0,"data":{"turn":1,"step":0,"message":{"id":"legacy-message:s:2","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}},"surfaceOp":"append"}"#
        );
        let replacement = json!({"type":"tool/result","seq":3,"time":0,"data":{"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":2,"end":2}});
        let out: Value = serde_json::from_str(&up(&mut u, 3, replacement).unwrap()).unwrap();
        assert_eq!(out["data"]["message"]["id"], "legacy-message:s:2");
        // A replacement of a current-shape message inherits that message's own id.
        let current = json!({"type":"tool/result","seq":4,"time":0,"data":{"message":{"id":"real"}},"surfaceOp":"append"});
        assert!(!u.upgrade(4, &mut current.clone()).unwrap());
        let replacement = json!({"type":"tool/result","seq":5,"time":0,"data":{"callId":"c","content":[],"isError":true},"surfaceOp":{"op":"replace","start":4,"end":4}});
        let out: Value = serde_json::from_str(&up(&mut u, 5, replacement).unwrap()).unwrap();
        assert_eq!(out["data"]["message"]["id"], "real");
        assert_eq!(u.upgraded(), 5);
    }
}
