//! Packed chunk rows (spec §1.6): one storage line standing for a run of consecutive `assistant/chunk`
//! delta events.
//!
//! On the read path the line scanner ([`super::scan`]) hands every parsed line whose `type` is a bare
//! packed tag to [`expand_row`], which checks the row and returns the member events (as JSON envelopes, so
//! they go through the same per-event pipeline as any other line). A row that breaks any rule is refused
//! whole and the scanner treats the line like an unparsable one. On the write path [`pack`] turns a batch
//! of events into storage lines, packing runs the way DSH's writer does.

use std::sync::Arc;

use serde_json::{Map, Number, Value};

use super::event::Event;
use super::row::{Row, RowTexts};
use crate::json::{is_safe_i64, safe_int, safe_uint, MAX_SAFE_INTEGER};

/// The shortest run the writer packs (DSH's `MIN_RUN`). Readers accept any row length ≥ 1.
pub const MIN_RUN: usize = 3;

/// The three packed row kinds, named by their bare `type` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// `text-chunks`: `text-delta` members.
    Text,
    /// `reasoning-chunks`: `reasoning-delta` members.
    Reasoning,
    /// `tool-call-chunks`: `tool-call-delta` members of one call.
    ToolCall,
}

impl RowKind {
    /// The kind whose row tag is `tag`.
    pub fn from_tag(tag: &str) -> Option<Self> {
        match tag {
            "text-chunks" => Some(Self::Text),
            "reasoning-chunks" => Some(Self::Reasoning),
            "tool-call-chunks" => Some(Self::ToolCall),
            _ => None,
        }
    }

    /// The row's `type` tag.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Text => "text-chunks",
            Self::Reasoning => "reasoning-chunks",
            Self::ToolCall => "tool-call-chunks",
        }
    }

    /// The `chunk.type` of the members.
    pub fn delta_type(self) -> &'static str {
        match self {
            Self::Text => "text-delta",
            Self::Reasoning => "reasoning-delta",
            Self::ToolCall => "tool-call-delta",
        }
    }

    fn from_delta_type(kind: &str) -> Option<Self> {
        match kind {
            "text-delta" => Some(Self::Text),
            "reasoning-delta" => Some(Self::Reasoning),
            "tool-call-delta" => Some(Self::ToolCall),
            _ => None,
        }
    }

    /// The key of the per-member payload array in the row's `data`.
    pub(crate) fn payload_key(self) -> &'static str {
        match self {
            Self::ToolCall => "args",
            _ => "texts",
        }
    }
}

/// The packed kind of a parsed storage line, if its top-level `type` is one of the bare packed tags.
pub fn row_kind(line: &Value) -> Option<RowKind> {
    row_kind_of(line.as_object()?)
}

/// [`row_kind`] for a line already known to be an object.
pub fn row_kind_of(line: &Map<String, Value>) -> Option<RowKind> {
    RowKind::from_tag(line.get("type")?.as_str()?)
}

/// Checks a packed row and expands it into its member `assistant/chunk` envelopes, in seq order, with keys
/// in DSH's order (`type, seq, time, data{turn, step, chunk}`). The error says which rule the row broke.
///
/// `row` must be an object whose `type` is a packed tag (see [`row_kind`]); anything else is refused.
pub fn expand_row(row: Map<String, Value>) -> Result<Vec<Value>, String> {
    Ok(expand_row_parts(row)?
        .members()
        .map(|member| member.into_event().to_value())
        .collect())
}

/// [`expand_row`] without building each member's envelope map: the row as the reader holds it.
pub(crate) fn expand_row_parts(row: Map<String, Value>) -> Result<Arc<Row>, String> {
    let kind = row
        .get("type")
        .and_then(Value::as_str)
        .and_then(RowKind::from_tag)
        .ok_or("not a packed row")?;
    if row.len() != 4 {
        return Err("packed row keys must be exactly type, seq0, time0, data".into());
    }
    let seq0 = row
        .get("seq0")
        .and_then(safe_uint)
        .ok_or("packed row seq0 is not a safe integer ≥ 0")?;
    let time0 = row
        .get("time0")
        .and_then(safe_int)
        .ok_or("packed row time0 is not a safe integer")?;
    let Some(Value::Object(mut data)) = row
        .into_iter()
        .find_map(|(k, v)| (k == "data").then_some(v))
    else {
        return Err("packed row data is not an object".into());
    };

    let expected_len = match kind {
        RowKind::ToolCall if data.contains_key("name") => 7,
        RowKind::ToolCall => 6,
        _ => 5,
    };
    let required: &[&str] = match kind {
        RowKind::ToolCall => &["turn", "step", "index", "id", "dt", "args"],
        _ => &["turn", "step", "index", "dt", "texts"],
    };
    if data.len() != expected_len || !required.iter().all(|k| data.contains_key(*k)) {
        return Err(format!(
            "packed {} row data keys are not exactly {}",
            kind.tag(),
            required.join(", ")
        ));
    }
    let mut take = |key: &str| data.remove(key).unwrap_or(Value::Null);
    let turn = take("turn");
    let step = take("step");
    let index = take("index");
    let dt = take("dt");
    let payload = take(kind.payload_key());
    let id = take("id");
    let name = take("name");
    if !(turn.is_number() && step.is_number() && index.is_number()) {
        return Err("packed row turn, step and index must be numbers".into());
    }
    if kind == RowKind::ToolCall {
        if !id.is_string() {
            return Err("packed tool-call row id is not a string".into());
        }
        if !(name.is_null() || name.is_string()) || (expected_len == 7 && !name.is_string()) {
            return Err("packed tool-call row name is not a string".into());
        }
    }
    let Value::Array(payload) = payload else {
        return Err(format!("packed row {} is not an array", kind.payload_key()));
    };
    if payload.is_empty() || !payload.iter().all(Value::is_string) {
        return Err(format!(
            "packed row {} must be a non-empty array of strings",
            kind.payload_key()
        ));
    }
    let Value::Array(dt) = dt else {
        return Err("packed row dt is not an array".into());
    };
    let (Value::Number(turn), Value::Number(step), Value::Number(index)) = (turn, step, index)
    else {
        return Err("packed row turn, step and index must be numbers".into());
    };
    let mut strings = Vec::with_capacity(payload.len());
    for text in &payload {
        match text {
            Value::String(text) => strings.push(text.as_str()),
            _ => {
                return Err(format!(
                    "packed row {} holds a non-string",
                    kind.payload_key()
                ))
            }
        }
    }
    let texts = RowTexts::of_strings(strings);
    members(RowFields {
        kind,
        seq0,
        time0,
        turn,
        step,
        index,
        id: match id {
            Value::String(id) => id,
            _ => String::new(),
        },
        name: match name {
            Value::String(name) => Some(name),
            _ => None,
        },
        dt: Gaps::Values(dt),
        texts,
    })
}

/// A packed row whose shape a typed parse of its line already checked (`line::parse_line`): exactly the
/// keys `type, seq0, time0, data`, `data` with exactly the keys its kind requires, `turn`, `step` and
/// `index` numbers, `id` and `name` strings, the payload an array of strings and `dt` an array of safe
/// integers. What is left to check is what [`expand_row_parts`] checks after the shape.
#[derive(Debug)]
pub(crate) struct TypedRow {
    pub(crate) kind: RowKind,
    pub(crate) seq0: Value,
    pub(crate) time0: Value,
    pub(crate) turn: Number,
    pub(crate) step: Number,
    pub(crate) index: Number,
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) dt: Vec<i64>,
    pub(crate) texts: RowTexts,
}

/// [`expand_row_parts`] for a row parsed typed: the same checks in the same order, the same members.
pub(crate) fn expand_typed_row(row: TypedRow) -> Result<Arc<Row>, String> {
    let seq0 = safe_uint(&row.seq0).ok_or("packed row seq0 is not a safe integer ≥ 0")?;
    let time0 = safe_int(&row.time0).ok_or("packed row time0 is not a safe integer")?;
    if row.texts.is_empty() {
        return Err(format!(
            "packed row {} must be a non-empty array of strings",
            row.kind.payload_key()
        ));
    }
    members(RowFields {
        kind: row.kind,
        seq0,
        time0,
        turn: row.turn,
        step: row.step,
        index: row.index,
        id: row.id.unwrap_or_default(),
        name: row.name,
        dt: Gaps::Ints(row.dt),
        texts: row.texts,
    })
}

/// A row's `dt` as read: values (the general parse) or safe integers (the typed one).
enum Gaps {
    Values(Vec<Value>),
    Ints(Vec<i64>),
}

impl Gaps {
    fn len(&self) -> usize {
        match self {
            Self::Values(gaps) => gaps.len(),
            Self::Ints(gaps) => gaps.len(),
        }
    }

    /// Gap `k` as a safe integer, if it is one.
    fn get(&self, k: usize) -> Option<i64> {
        match self {
            Self::Values(gaps) => gaps.get(k).and_then(safe_int),
            Self::Ints(gaps) => gaps.get(k).copied().filter(|g| is_safe_i64(*g)),
        }
    }
}

/// A row's fields once its shape is checked, however it was parsed.
struct RowFields {
    kind: RowKind,
    seq0: u64,
    time0: i64,
    turn: Number,
    step: Number,
    index: Number,
    /// Tool-call rows: the call id (empty otherwise).
    id: String,
    name: Option<String>,
    dt: Gaps,
    /// Non-empty.
    texts: RowTexts,
}

/// The checks after the shape (the gaps, the seq range, the running time), and the row its members
/// are read from.
fn members(row: RowFields) -> Result<Arc<Row>, String> {
    let RowFields {
        kind,
        seq0,
        time0,
        turn,
        step,
        index,
        id,
        name,
        dt,
        texts,
    } = row;
    if dt.len() != texts.len().saturating_sub(1) {
        return Err(format!(
            "packed row dt has {} gaps for {} members",
            dt.len(),
            texts.len()
        ));
    }
    let last_seq = u64::try_from(texts.len().saturating_sub(1))
        .ok()
        .and_then(|n| seq0.checked_add(n));
    if last_seq.is_none_or(|s| s > MAX_SAFE_INTEGER as u64) {
        return Err("packed row seq0 + members − 1 is not a safe integer".into());
    }
    let mut gaps = Vec::with_capacity(dt.len());
    let mut time = time0;
    for k in 0..dt.len() {
        let gap = dt
            .get(k)
            .ok_or("packed row dt holds a non-safe-integer gap")?;
        time = time
            .checked_add(gap)
            .filter(|t| is_safe_i64(*t))
            .ok_or("packed row running time leaves the safe integer range")?;
        gaps.push(gap);
    }
    Ok(Arc::new(Row {
        kind,
        turn,
        step,
        index,
        id,
        name,
        seq0,
        time0,
        dt: gaps,
        texts,
    }))
}

/// What a packable delta event shares with the rest of its run, and its own payload.
struct Delta<'a> {
    kind: RowKind,
    turn: &'a Value,
    step: &'a Value,
    index: &'a Value,
    id: Option<&'a Value>,
    name: Option<&'a Value>,
    payload: &'a Value,
}

impl Delta<'_> {
    fn same_run(&self, other: &Delta<'_>) -> bool {
        self.kind == other.kind
            && self.turn == other.turn
            && self.step == other.step
            && self.index == other.index
            && self.id == other.id
            && self.name == other.name
    }
}

fn keys_are<'a>(map: &'a Map<String, Value>, keys: &[&str]) -> Option<Vec<&'a Value>> {
    if map.len() != keys.len() {
        return None;
    }
    map.iter()
        .zip(keys)
        .map(|((k, v), want)| (k == want).then_some(v))
        .collect()
}

/// The event as a packable delta, or `None` when it must stay a line of its own. Key order must match
/// what expansion produces exactly (stricter than DSH's key-set test), so that packing never changes what a
/// reader sees.
fn packable(event: &Event) -> Option<Delta<'_>> {
    if event.kind != "assistant/chunk"
        || event.surface_op.is_some()
        || event.source_event_seqs.is_some()
        || event.ignorable.is_some()
        || event.seq > MAX_SAFE_INTEGER as u64
        || !is_safe_i64(event.time)
    {
        return None;
    }
    let data = keys_are(event.data.as_object()?, &["turn", "step", "chunk"])?;
    let (turn, step) = (data[0], data[1]);
    let chunk = data[2].as_object()?;
    let kind = RowKind::from_delta_type(chunk.get("type")?.as_str()?)?;
    let (index, id, name, payload) = match kind {
        RowKind::ToolCall if chunk.contains_key("name") => {
            let v = keys_are(chunk, &["type", "index", "id", "name", "argumentsDelta"])?;
            (v[1], Some(v[2]), Some(v[3]), v[4])
        }
        RowKind::ToolCall => {
            let v = keys_are(chunk, &["type", "index", "id", "argumentsDelta"])?;
            (v[1], Some(v[2]), None, v[3])
        }
        _ => {
            let v = keys_are(chunk, &["type", "index", "text"])?;
            (v[1], None, None, v[2])
        }
    };
    let ok = turn.is_number()
        && step.is_number()
        && index.is_number()
        && payload.is_string()
        && id.is_none_or(Value::is_string)
        && name.is_none_or(Value::is_string);
    ok.then_some(Delta {
        kind,
        turn,
        step,
        index,
        id,
        name,
        payload,
    })
}

/// Turns one append batch into storage lines, in order: every run of at least [`MIN_RUN`] consecutive
/// packable deltas (same kind, turn, step, block index and, for tool calls, call id and name; consecutive
/// seqs; time gaps that are safe integers) becomes one packed row; every other event stays its own
/// envelope. Packing never crosses a batch, so the writer calls this once per batch.
pub fn pack(events: &[Event]) -> Vec<Value> {
    let mut lines = Vec::with_capacity(events.len());
    let mut i = 0;
    while let Some(first) = events.get(i) {
        let Some(head) = packable(first) else {
            lines.push(first.to_value());
            i += 1;
            continue;
        };
        let mut members = vec![head];
        let mut gaps = Vec::new();
        let mut prev = first;
        for next in events.get(i + 1..).unwrap_or_default() {
            let Some(delta) = packable(next) else { break };
            let gap = next.time.checked_sub(prev.time).filter(|g| is_safe_i64(*g));
            let (Some(gap), true) = (gap, next.seq == prev.seq + 1 && delta.same_run(&members[0]))
            else {
                break;
            };
            members.push(delta);
            gaps.push(Value::from(gap));
            prev = next;
        }
        let n = members.len();
        if n < MIN_RUN {
            lines.extend(events.iter().skip(i).take(n).map(Event::to_value));
        } else {
            lines.push(packed_row(first, &members, gaps));
        }
        i += n;
    }
    lines
}

fn packed_row(first: &Event, members: &[Delta<'_>], gaps: Vec<Value>) -> Value {
    let head = &members[0];
    let mut data = Map::with_capacity(7);
    data.insert("turn".into(), head.turn.clone());
    data.insert("step".into(), head.step.clone());
    data.insert("index".into(), head.index.clone());
    data.insert("dt".into(), Value::Array(gaps));
    if let Some(id) = head.id {
        data.insert("id".into(), id.clone());
    }
    if let Some(name) = head.name {
        data.insert("name".into(), name.clone());
    }
    let payload = members.iter().map(|m| m.payload.clone()).collect();
    data.insert(head.kind.payload_key().into(), Value::Array(payload));
    let mut row = Map::with_capacity(4);
    row.insert("type".into(), head.kind.tag().into());
    row.insert("seq0".into(), first.seq.into());
    row.insert("time0".into(), first.time.into());
    row.insert("data".into(), Value::Object(data));
    Value::Object(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expand(v: Value) -> Result<Vec<Value>, String> {
        match v {
            Value::Object(map) => expand_row(map),
            _ => Err("not an object".into()),
        }
    }

    fn unpack(lines: &[Value]) -> Vec<Event> {
        lines
            .iter()
            .flat_map(|line| match row_kind(line) {
                Some(_) => expand(line.clone()).unwrap(),
                None => vec![line.clone()],
            })
            .map(|v| Event::from_value(v).unwrap())
            .collect()
    }

    fn delta(seq: u64, time: i64, chunk: Value) -> Event {
        Event::new(
            "assistant/chunk",
            seq,
            time,
            json!({"turn":1,"step":2,"chunk":chunk}),
        )
    }

    #[test]
    fn text_row_expands_with_running_times_and_exact_key_order() {
        let row = json!({"type":"text-chunks","seq0":7,"time0":100,"data":{"turn":1,"step":0,"index":0,"dt":[5,-2],"texts":["a","b","c"]}});
        let events = expand(row).unwrap();
        let lines: Vec<String> = events.iter().map(Value::to_string).collect();
        assert_eq!(
            lines,
            [
                r#"{"type":"assistant/chunk","seq":7,"time":100,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}}"#,
                r#"{"type":"assistant/chunk","seq":8,"time":105,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"b"}}}"#,
                r#"{"type":"assistant/chunk","seq":9,"time":103,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}"#,
            ]
        );
    }

    #[test]
    fn tool_rows_carry_name_only_when_the_row_has_it() {
        let named = json!({"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":2,"dt":[],"id":"c1","name":"read","args":["{}"]}});
        assert_eq!(
            expand(named).unwrap()[0]["data"]["chunk"].to_string(),
            r#"{"type":"tool-call-delta","index":2,"id":"c1","name":"read","argumentsDelta":"{}"}"#
        );
        let unnamed = json!({"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":2,"dt":[],"id":"c1","args":["{}"]}});
        assert_eq!(
            expand(unnamed).unwrap()[0]["data"]["chunk"].to_string(),
            r#"{"type":"tool-call-delta","index":2,"id":"c1","argumentsDelta":"{}"}"#
        );
        let reasoning = json!({"type":"reasoning-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["x"]}});
        assert_eq!(
            expand(reasoning).unwrap()[0]["data"]["chunk"]["type"],
            "reasoning-delta"
        );
    }

    #[test]
    fn every_decoder_rule_refuses_the_row() {
        let text = |data: Value| json!({"type":"text-chunks","seq0":0,"time0":0,"data":data});
        let ok = json!({"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]});
        assert!(expand(text(ok)).is_ok());
        let bad = [
            json!({"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a"]},"x":1}),
            json!({"type":"text-chunks","seq0":-1,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a"]}}),
            json!({"type":"text-chunks","seq0":0.5,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a"]}}),
            json!({"type":"text-chunks","seq0":0,"time0":"0","data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a"]}}),
            json!({"type":"text-chunks","seq0":0,"time0":0,"data":[]}),
            json!({"type":"text-chunks","seq0":0,"time0":0}),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"texts":["a"],"id":"x"})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"args":["a"]})),
            text(json!({"turn":"1","step":0,"index":0,"dt":[],"texts":["a"]})),
            text(json!({"turn":1,"step":0,"index":null,"dt":[],"texts":["a"]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"texts":[]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"texts":[1]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"texts":"a"})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[1],"texts":["a"]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[],"texts":["a","b"]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":[0.5],"texts":["a","b"]})),
            text(json!({"turn":1,"step":0,"index":0,"dt":{},"texts":["a","b"]})),
            json!({"type":"text-chunks","seq0":9007199254740991i64,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}}),
            json!({"type":"text-chunks","seq0":0,"time0":9007199254740990i64,"data":{"turn":1,"step":0,"index":0,"dt":[2],"texts":["a","b"]}}),
            json!({"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"id":1,"args":["a"]}}),
            json!({"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"id":"c","name":null,"args":["a"]}}),
            json!({"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"id":"c","texts":["a"]}}),
            json!({"type":"assistant/chunk","seq0":0,"time0":0,"data":{}}),
        ];
        for row in bad {
            assert!(expand(row.clone()).is_err(), "{row}");
        }
        // The largest safe seq is fine for a one-member row.
        let edge = json!({"type":"text-chunks","seq0":9007199254740991i64,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a"]}});
        assert!(expand(edge).is_ok());
    }

    #[test]
    fn pack_then_expand_is_the_identity() {
        let text = |s: &str| json!({"type":"text-delta","index":0,"text":s});
        let tool = |s: &str| json!({"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":s});
        let mut events = vec![Event::new("step/start", 0, 10, json!({"turn":1,"step":2}))];
        for (k, t) in [10, 12, 11, 20].into_iter().enumerate() {
            events.push(delta(1 + k as u64, t, text(&format!("t{k}"))));
        }
        // A run of two stays unpacked.
        events.push(delta(
            5,
            20,
            json!({"type":"reasoning-delta","index":0,"text":"r"}),
        ));
        events.push(delta(
            6,
            20,
            json!({"type":"reasoning-delta","index":0,"text":"s"}),
        ));
        for k in 0..3 {
            events.push(delta(7 + k, 30, tool(&format!("{{{k}"))));
        }
        // Same kind, different index: a new run.
        for k in 0..3 {
            events.push(delta(
                10 + k,
                30,
                json!({"type":"text-delta","index":3,"text":"x"}),
            ));
        }
        // Key order other than the expanded one must not pack.
        for k in 0..3 {
            events.push(delta(
                13 + k,
                30,
                json!({"index":0,"type":"text-delta","text":"x"}),
            ));
        }
        events.push(Event::appended("user/message", 16, 31, json!({"id":"m"})));

        let lines = pack(&events);
        let tags: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(
            tags,
            [
                "step/start",
                "text-chunks",
                "assistant/chunk",
                "assistant/chunk",
                "tool-call-chunks",
                "text-chunks",
                "assistant/chunk",
                "assistant/chunk",
                "assistant/chunk",
                "user/message"
            ]
        );
        assert_eq!(lines[1]["data"]["dt"], json!([2, -1, 9]));
        // Compared as lines: `tail_order` is not observable when an event has a single optional key.
        let back: Vec<String> = unpack(&lines).iter().map(Event::to_json_line).collect();
        let want: Vec<String> = events.iter().map(Event::to_json_line).collect();
        assert_eq!(back, want);
    }

    #[test]
    fn runs_break_on_seq_gaps_markers_and_unsafe_time_gaps() {
        let text = json!({"type":"text-delta","index":0,"text":"x"});
        let mut gapped: Vec<Event> = (0..3).map(|k| delta(k, 0, text.clone())).collect();
        gapped[2].seq = 5;
        assert!(pack(&gapped).iter().all(|l| l["type"] == "assistant/chunk"));
        let mut marked: Vec<Event> = (0..3).map(|k| delta(k, 0, text.clone())).collect();
        marked[1].surface_op = Some(json!("append"));
        assert!(pack(&marked).iter().all(|l| l["type"] == "assistant/chunk"));
        let times = [-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER];
        let wide: Vec<Event> = times
            .iter()
            .enumerate()
            .map(|(k, &t)| delta(k as u64, t, text.clone()))
            .collect();
        let lines = pack(&wide);
        assert_eq!(lines.len(), 3);
        assert_eq!(unpack(&lines), wide);
    }

    #[test]
    fn i64_min_time_is_never_packed_and_never_panics() {
        let text = json!({"type":"text-delta","index":0,"text":"x"});
        let events: Vec<Event> = [i64::MIN, 0, i64::MIN]
            .iter()
            .enumerate()
            .map(|(k, &t)| delta(k as u64, t, text.clone()))
            .collect();
        let lines = pack(&events);
        assert!(lines.iter().all(|l| l["type"] == "assistant/chunk"));
    }

    #[test]
    fn i64_min_dt_in_a_row_is_refused_not_overflowed() {
        let ok = json!({"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":0,"index":0,"dt":[1],"texts":["a","b"]}});
        assert!(expand_row(ok.as_object().cloned().unwrap()).is_ok());
        for (time0, gap) in [(0, i64::MIN), (i64::MIN, 0), (-MAX_SAFE_INTEGER, -1)] {
            let row = json!({"type":"text-chunks","seq0":0,"time0":time0,"data":{"turn":1,"step":0,"index":0,"dt":[gap],"texts":["a","b"]}});
            assert!(
                expand_row(row.as_object().cloned().unwrap()).is_err(),
                "{time0} {gap}"
            );
        }
    }
}
