//! The commonest lines read without serde: `{"type":…,"seq":…,"time":…,"data":…}` of a type whose
//! `data` no check reads (chunk lines, steps, titles, compaction records), turn starts and ends of the
//! shapes no check refuses or changes, and packed rows of the shape DSH writes.
//!
//! For the first, the read needs the type, the seq, the time, and to know that `data` parses; for a
//! row, its few fields and its texts' places. serde costs a token at a time through its visitors for
//! that, more than all the rest of the line's way. [`read`] walks the bytes once, checking with
//! [`crate::json::check`]. It answers only for exactly those shapes: `type` first, a string without
//! escape; for the first kind a type of [`is_lazy_kind`], `seq` and `time` integers of at most 15
//! digits (`-0` excepted, which serde reads as a float), `data` a value the check accepts; for a turn
//! start `data` exactly `{"turn": <integer>}`, for a turn end exactly a turn of at least 1 and a
//! reason of only a plain kind (see [`Data`]): the legacy upgrader's checks pass them unchanged, and
//! no other check of spec §1.7 steps 2–5 reads them, so they take the plain events' way; for a row,
//! `seq0` and `time0` such integers, `data` with exactly the keys its kind has (see
//! `super::RowDataSeed`), `turn`, `step` and `index` such integers, `dt` such integers, the texts
//! strings; each key once and no other. Anything else is `None` and goes to the serde parse, which
//! answers for every line, so what a line yields is what that parse gives.

use serde_json::{Number, Value};

use super::{scan_gaps, Parsed};
use crate::json::check::{key, number_end, skip_ws, string_end, value_end};
use crate::log::event::{EnvelopeKey, EnvelopeParts};
use crate::log::message::MessageKind;
use crate::log::packed::{RowKind, TypedRow};
use crate::log::payload::{is_lazy_kind, Payload};
use crate::log::row::RowTexts;

/// `line` read without serde, if it has one of the shapes this module answers for (see the module
/// doc), else `None`.
pub(super) fn read(line: &str) -> Option<Parsed> {
    let bytes = line.as_bytes();
    let at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let (name, after) = key(bytes, skip_ws(bytes, at + 1))?;
    if name != b"type" || bytes.get(after) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(bytes, after + 1)?;
    let kind = line.get(after + 1..end)?;
    if escaped {
        return None;
    }
    let rest = skip_ws(bytes, end + 1);
    if let Some(row) = RowKind::from_tag(kind) {
        return row_line(line, row, rest).map(|row| Parsed::Row(Box::new(row)));
    }
    let shape = match kind {
        // The commonest first: the known-type lookup below costs more than the line's type.
        "assistant/chunk" => Data::Any,
        "turn/start" => Data::TurnStart,
        "turn/end" => Data::TurnEnd,
        _ if MessageKind::of(kind).is_some() => return None,
        _ if is_lazy_kind(kind) => Data::Any,
        _ => return None,
    };
    plain_line(line, kind, rest, shape).map(Parsed::Plain)
}

/// What `data` a line of the first kind may hold.
#[derive(Clone, Copy)]
enum Data {
    /// Anything a `Value` parse reads (a type nothing checks).
    Any,
    /// `{"turn": <integer>}`: no legacy `trigger` to upgrade.
    TurnStart,
    /// `{"turn": <integer ≥ 1>, "reason": {"kind": <a plain ending>}}`: what the legacy upgrader
    /// checks of every turn end and leaves as it is (spec §1.8).
    TurnEnd,
}

/// The rest of a line of a type whose `data` no check reads or changes, from `at` (past its `type`).
fn plain_line(line: &str, kind: &str, mut at: usize, shape: Data) -> Option<Box<EnvelopeParts>> {
    let bytes = line.as_bytes();
    let (mut seq, mut time, mut data) = (None, None, false);
    while bytes.get(at) == Some(&b',') {
        let (name, after) = key(bytes, skip_ws(bytes, at + 1))?;
        at = match name {
            b"seq" => integer_once(bytes, after, &mut seq)?,
            b"time" => integer_once(bytes, after, &mut time)?,
            // One container deep: inside the line's object.
            b"data" if !data => {
                data = true;
                match shape {
                    Data::Any => value_end(bytes, after, 1)?,
                    Data::TurnStart => turn_start_end(bytes, after)?,
                    Data::TurnEnd => turn_end_end(bytes, after)?,
                }
            }
            _ => return None,
        };
        at = skip_ws(bytes, at);
    }
    if !closes(bytes, at) || !data {
        return None;
    }
    let mut parts = Box::<EnvelopeParts>::default();
    parts.set(EnvelopeKey::Type, Value::String(kind.to_owned()));
    parts.set(EnvelopeKey::Seq, seq?);
    parts.set(EnvelopeKey::Time, time?);
    parts.set_data(Payload::line(line));
    Some(parts)
}

/// A turn start's `data` at `at` that is exactly `{"turn": <integer>}`, and where it ends.
fn turn_start_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let (name, value) = key(bytes, skip_ws(bytes, at + 1))?;
    if name != b"turn" {
        return None;
    }
    let (_, end) = integer(bytes, value)?;
    let end = skip_ws(bytes, end);
    (bytes.get(end) == Some(&b'}')).then_some(end + 1)
}

/// A turn end's `data` at `at` that is exactly a turn of at least 1 and a reason of only a kind that
/// needs no upgrade (`completed`, `blocked`, `max-tokens`, `interrupted`), keys in either order; and
/// where it ends.
fn turn_end_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(bytes, at + 1);
    let (mut turn, mut reason) = (false, false);
    loop {
        let (name, value) = key(bytes, at)?;
        at = match name {
            b"turn" if !turn => {
                turn = true;
                match integer(bytes, value)? {
                    (Value::Number(n), end) if n.as_u64().is_some_and(|t| t >= 1) => end,
                    _ => return None,
                }
            }
            b"reason" if !reason => {
                reason = true;
                plain_reason_end(bytes, value)?
            }
            _ => return None,
        };
        at = skip_ws(bytes, at);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b'}' if turn && reason => return Some(at + 1),
            _ => return None,
        }
    }
}

/// `{"kind": "completed" | "blocked" | "max-tokens" | "interrupted"}` at `at`, and where it ends.
fn plain_reason_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let (name, value) = key(bytes, skip_ws(bytes, at + 1))?;
    if name != b"kind" || bytes.get(value) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(bytes, value + 1)?;
    let plain = matches!(
        bytes.get(value + 1..end)?,
        b"completed" | b"blocked" | b"max-tokens" | b"interrupted"
    );
    if escaped || !plain {
        return None;
    }
    let end = skip_ws(bytes, end + 1);
    (bytes.get(end) == Some(&b'}')).then_some(end + 1)
}

/// The rest of a packed row, from `at` (past its `type`).
fn row_line(line: &str, kind: RowKind, mut at: usize) -> Option<TypedRow> {
    let bytes = line.as_bytes();
    let (mut seq0, mut time0, mut data) = (None, None, None);
    while bytes.get(at) == Some(&b',') {
        let (name, after) = key(bytes, skip_ws(bytes, at + 1))?;
        at = match name {
            b"seq0" => integer_once(bytes, after, &mut seq0)?,
            b"time0" => integer_once(bytes, after, &mut time0)?,
            b"data" if data.is_none() => {
                let (fields, end) = row_data(line, kind, after)?;
                data = Some(fields);
                end
            }
            _ => return None,
        };
        at = skip_ws(bytes, at);
    }
    if !closes(bytes, at) {
        return None;
    }
    let data = data?;
    Some(TypedRow {
        kind,
        seq0: seq0?,
        time0: time0?,
        turn: data.turn?,
        step: data.step?,
        index: data.index?,
        id: data.id,
        name: data.name,
        dt: data.dt?,
        texts: data.texts?,
    })
}

/// A row's `data` as read, each field once.
#[derive(Default)]
struct RowFields {
    turn: Option<Number>,
    step: Option<Number>,
    index: Option<Number>,
    id: Option<String>,
    name: Option<String>,
    dt: Option<Vec<i64>>,
    texts: Option<RowTexts>,
}

/// A row's `data` object at `at`, and where it ends.
fn row_data(line: &str, kind: RowKind, at: usize) -> Option<(RowFields, usize)> {
    let bytes = line.as_bytes();
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    let mut fields = RowFields::default();
    let mut at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return None;
    }
    loop {
        let (name, after) = key(bytes, at)?;
        let tool = kind == RowKind::ToolCall;
        at = match name {
            b"turn" => number(bytes, after, &mut fields.turn)?,
            b"step" => number(bytes, after, &mut fields.step)?,
            b"index" => number(bytes, after, &mut fields.index)?,
            b"dt" if fields.dt.is_none() => {
                let (gaps, end) = scan_gaps(bytes, after)?;
                fields.dt = Some(gaps);
                end
            }
            b"texts" | b"args" if fields.texts.is_none() && (name == b"args") == tool => {
                // DSH writes `dt` first, which tells how many texts follow.
                let count = fields.dt.as_ref().map_or(16, |dt| dt.len() + 1);
                let (texts, end) = RowTexts::scan(line, after, count)?;
                fields.texts = Some(texts);
                end
            }
            b"id" if tool => string(line, after, &mut fields.id)?,
            b"name" if tool => string(line, after, &mut fields.name)?,
            _ => return None,
        };
        at = skip_ws(bytes, at);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b'}' => break,
            _ => return None,
        }
    }
    if kind == RowKind::ToolCall && fields.id.is_none() {
        return None;
    }
    Some((fields, at + 1))
}

/// An integer field of a line at `at`, read once into `slot` (a second one is left to serde); where
/// it ends.
fn integer_once(bytes: &[u8], at: usize, slot: &mut Option<Value>) -> Option<usize> {
    let (value, end) = integer(bytes, at)?;
    slot.replace(value).is_none().then_some(end)
}

/// An integer field of a row at `at`, read once into `slot`; where it ends.
fn number(bytes: &[u8], at: usize, slot: &mut Option<Number>) -> Option<usize> {
    let (Value::Number(n), end) = integer(bytes, at)? else {
        return None;
    };
    slot.replace(n).is_none().then_some(end)
}

/// A string field of a row at `at`, read once into `slot` (decoded by serde_json when it has an
/// escape); where it ends.
fn string(line: &str, at: usize, slot: &mut Option<String>) -> Option<usize> {
    let bytes = line.as_bytes();
    if bytes.get(at) != Some(&b'"') || slot.is_some() {
        return None;
    }
    let (end, escaped) = string_end(bytes, at + 1)?;
    let text = if escaped {
        serde_json::from_str::<String>(line.get(at..end + 1)?).ok()?
    } else {
        line.get(at + 1..end)?.to_owned()
    };
    *slot = Some(text);
    Some(end + 1)
}

/// Whether the line's object closes at `at` with nothing but whitespace after it.
fn closes(bytes: &[u8], at: usize) -> bool {
    bytes.get(at) == Some(&b'}') && skip_ws(bytes, at + 1) == bytes.len()
}

/// An integer of at most 15 digits at `at`, as the `Value` serde_json reads it (`u64` when not
/// negative, `i64` when negative), and where it ends.
fn integer(bytes: &[u8], at: usize) -> Option<(Value, usize)> {
    let (end, integer) = number_end(bytes, at)?;
    let negative = bytes.get(at) == Some(&b'-');
    let digits = bytes.get(at + usize::from(negative)..end)?;
    if !integer || digits.len() > 15 {
        return None;
    }
    let magnitude = digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    let value = match (negative, magnitude) {
        (false, n) => Value::from(n),
        // serde_json reads `-0` as a float.
        (true, 0) => return None,
        // At most 15 digits: well within `i64`.
        (true, n) => Value::from(-(n as i64)),
    };
    Some((value, end))
}

#[cfg(test)]
mod tests {
    use super::super::{parse_line_serde, Parsed};
    use super::*;

    /// The line as the serde parse reads it, as an event (its data built).
    fn by_serde(line: &str) -> Option<crate::log::event::Event> {
        match parse_line_serde(line.as_bytes()) {
            Ok(Parsed::Plain(parts)) => parts.into_event().ok(),
            _ => None,
        }
    }

    fn quick(line: &str) -> Option<crate::log::event::Event> {
        match read(line) {
            Some(Parsed::Plain(parts)) => parts.into_event().ok(),
            _ => None,
        }
    }

    #[test]
    fn the_common_shapes_read_as_the_serde_parse_reads_them() {
        for line in [
            "{\"type\":\"assistant/chunk\",\"seq\":5,\"time\":1783848400046,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"block-start\",\"index\":0,\"blockType\":\"reasoning\"}}}\n",
            r#"{"type":"step/end","seq":0,"time":-3,"data":{"turn":1,"step":2}}"#,
            r#" { "type" : "session/title" , "data" : {"title":"a \"b\" \u00e9"} , "time" : 7 , "seq" : 1 } "#,
            "{\"type\":\"compaction/prune\",\"seq\":2,\"time\":0,\"data\":[1,2.5,null,true]}\r\n",
        ] {
            let quick = quick(line);
            assert!(quick.is_some(), "{line}");
            assert_eq!(quick, by_serde(line), "{line}");
            assert_eq!(quick.unwrap().to_json_line(), by_serde(line).unwrap().to_json_line());
        }
    }

    #[test]
    fn any_other_shape_is_left_to_the_serde_parse() {
        for line in [
            // Types something reads, or another shape of envelope.
            r#"{"type":"turn/start","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"user/message","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{}}"#,
            r#"{"seq":0,"type":"step/end","time":0,"data":{}}"#,
            r#"{"type":"step/end","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#,
            r#"{"type":"step/end","seq":0,"seq":0,"time":0,"data":{}}"#,
            r#"{"type":"step/end","seq":0,"time":0}"#,
            r#"{"type":"step\/end","seq":0,"time":0,"data":{}}"#,
            // Numbers serde reads otherwise, or that may need its range checks.
            r#"{"type":"step/end","seq":-0,"time":0,"data":{}}"#,
            r#"{"type":"step/end","seq":1.0,"time":0,"data":{}}"#,
            r#"{"type":"step/end","seq":1234567890123456,"time":0,"data":{}}"#,
            r#"{"type":"step/end","seq":0,"time":0,"data":{"n":1e400}}"#,
            // Data a `Value` parse refuses or reads specially; trailing bytes.
            r#"{"type":"step/end","seq":0,"time":0,"data":"\ud800"}"#,
            r#"{"type":"step/end","seq":0,"time":0,"data":{"$serde_json::private::RawValue":"1"}}"#,
            r#"{"type":"step/end","seq":0,"time":0,"data":{}} x"#,
            r#"{"type":"step/end","seq":0,"time":0,"data":{},}"#,
        ] {
            assert!(quick(line).is_none(), "{line}");
        }
    }

    /// A turn line through the general path: its `Value`, unchanged by the legacy upgrader (whose
    /// checks it passes), made an event.
    fn by_general_path(line: &str) -> crate::log::event::Event {
        let Ok(Parsed::Value(mut value)) = parse_line_serde(line.as_bytes()) else {
            panic!("a turn line is a value to the serde parse: {line}")
        };
        let mut upgrader = crate::log::legacy::LegacyUpgrader::new("s");
        assert!(!upgrader.upgrade(0, &mut value).unwrap(), "{line}");
        crate::log::validate::check_known_type(&value).unwrap();
        crate::log::event::Event::from_value(value).unwrap()
    }

    #[test]
    fn turn_lines_no_check_refuses_or_changes_read_as_the_general_path_reads_them() {
        use crate::log::repair::CloserTracker;
        use crate::text::event_text;
        for line in [
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
            r#"{"type":"turn/start","seq":0,"time":5,"data":{ "turn" : 0 }}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":2,"reason":{"kind":"completed"}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"reason":{"kind":"max-tokens"},"turn":1}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"reason":{"kind":"blocked"}}}"#,
        ] {
            let Some(Parsed::Plain(parts)) = read(line) else {
                panic!("read quickly: {line}")
            };
            let quick = parts.into_event().unwrap();
            let general = by_general_path(line);
            assert_eq!(event_text(&quick), event_text(&general), "{line}");
            let (mut a, mut b) = (CloserTracker::new(), CloserTracker::new());
            a.observe(&quick);
            b.observe(&general);
            assert_eq!(a, b, "{line}");
            assert!(!quick.data.is_built(), "{line}");
            assert_eq!(quick, general, "{line}");
        }
        for line in [
            // A legacy trigger, other keys, a turn below 1, endings the upgrader changes or that
            // carry more than their kind: the serde parse and the checks answer for these.
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1,"trigger":{"kind":"user"}}}"#,
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1,"x":0}}"#,
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1.0}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":0,"reason":{"kind":"completed"}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"reason":{"kind":"aborted"}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"reason":{"kind":"error","error":{"message":"m"}}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"reason":{"kind":"completed","x":1}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1,"turn":1,"reason":{"kind":"completed"}}}"#,
            r#"{"type":"turn/end","seq":0,"time":5,"data":{"turn":1}}"#,
        ] {
            assert!(read(line).is_none(), "{line}");
        }
    }

    /// A row line's members as the row checks give them (or their refusal), from a parse's result.
    fn members(parsed: Option<Parsed>) -> Option<Result<Vec<crate::log::event::Event>, String>> {
        let Some(Parsed::Row(row)) = parsed else {
            return None;
        };
        Some(
            crate::log::packed::expand_typed_row(*row)
                .map(|row| row.members().map(|m| m.into_event()).collect()),
        )
    }

    #[test]
    fn rows_of_the_shape_dsh_writes_read_as_the_serde_parse_reads_them() {
        let mut state = dsh_fixtures::Rng(0x1234_5678_9ABC_DEF1);
        let seeds = [
            r#"{"type":"text-chunks","seq0":4,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[1,0,-3],"texts":["he","l\n","l\u00e9","o"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":9,"time0":7,"data":{"turn":1,"step":1,"index":1,"id":"c\u0031","name":"read","dt":[2],"args":["{\"a\"",":1}"]}}"#,
            r#"{"type":"reasoning-chunks","seq0":0,"time0":0,"data":{"turn":3,"step":1,"index":2,"dt":[],"texts":["hm"]}}"#,
        ];
        let pieces = [
            "\"",
            ",",
            "]",
            "[",
            "}",
            "{",
            "-",
            "0",
            "1.5",
            "e2",
            " ",
            "\\u",
            "\\ud800",
            "null",
            "\"x\":1,",
            "\"dt\":[],",
            "\"name\":\"n\",",
            "9007199254740993",
            "é",
        ];
        let mut read_rows = 0;
        for round in 0..20_000 {
            let mut chars: Vec<char> = seeds[round % seeds.len()].chars().collect();
            if round >= seeds.len() {
                for _ in 0..1 + state.next_u64() % 2 {
                    let at = (state.next_u64() as usize) % (chars.len() + 1);
                    let piece = pieces[(state.next_u64() as usize) % pieces.len()];
                    if state.next_u64().is_multiple_of(2) && at < chars.len() {
                        chars.remove(at);
                    } else {
                        chars.splice(at..at, piece.chars());
                    }
                }
            }
            let line: String = chars.into_iter().collect();
            let ours = members(read(&line));
            if round < seeds.len() {
                assert!(matches!(ours, Some(Ok(_))), "{line}");
            }
            if let Some(ours) = ours {
                read_rows += 1;
                assert!(serde_json::from_str::<Value>(&line).is_ok(), "{line}");
                let theirs = members(parse_line_serde(line.as_bytes()).ok());
                assert_eq!(Some(ours), theirs, "{line}");
            }
        }
        assert!(read_rows > 500, "only {read_rows} mutated rows read");
    }

    /// Whatever this reads, the serde parse reads the same (and a `Value` parse of the line succeeds).
    #[test]
    fn mutated_lines_are_read_only_as_the_serde_parse_reads_them() {
        let seeds = [
            r#"{"type":"assistant/chunk","seq":12,"time":1783848400196,"data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"a\nb \"c\""}}}}"#,
            r#"{"type":"step/end","seq":3,"time":-40,"data":{"turn":1,"step":2,"x":[0.5,-1,null]}}"#,
        ];
        let pieces = [
            "\"", "\\", "{", "}", "[", "]", ",", ":", "-", ".", "e", " ", "0", "7", "\\u00",
            "\\ud800", "seq", "time", "data", "type", "\"x\":1,", "\u{1}", "é",
        ];
        let (mut read, mut state) = (0, dsh_fixtures::Rng(0x9E37_79B9_7F4A_7C15));
        for round in 0..30_000 {
            let mut chars: Vec<char> = seeds[round % seeds.len()].chars().collect();
            for _ in 0..1 + state.next_u64() % 2 {
                let at = (state.next_u64() as usize) % (chars.len() + 1);
                let piece = pieces[(state.next_u64() as usize) % pieces.len()];
                if state.next_u64().is_multiple_of(2) && at < chars.len() {
                    chars.remove(at);
                } else {
                    chars.splice(at..at, piece.chars());
                }
            }
            let line: String = chars.into_iter().collect();
            if let Some(event) = quick(&line) {
                read += 1;
                assert!(serde_json::from_str::<Value>(&line).is_ok(), "{line}");
                assert_eq!(Some(event), by_serde(&line), "{line}");
            }
        }
        assert!(read > 3_000, "only {read} mutated lines read");
    }
}
