//! Parsing one storage line without building a map for its envelope.
//!
//! DSH writes `type` first, and the type decides how the rest of the line is read, in one parse:
//! - events of types no validation step looks at (chunks, steps, titles; most lines of a log): the
//!   envelope's fields go straight into [`EnvelopeParts`], no `serde_json::Map`, no key strings, no
//!   hashing; their `data` is kept as the line ([`Payload`]);
//! - message events: the same, with `data` read typed into the facts the read needs
//!   ([`super::message`]);
//! - packed rows: their `data` read typed into its fields ([`RowDataSeed`]), the texts and gaps kept
//!   as their JSON text and scanned;
//! - any other type (turn lines, request headers, legacy and unknown types): the `Value` the checked
//!   path expects.
//!
//! A line the typed reading does not answer for (`type` not first, a key read twice, an envelope key
//! the envelope check refuses, a row or message of another shape) is parsed again the general way, as
//! `JSON.parse` reads it, so its events or its refusal read as before. Before all of this, the
//! commonest shapes (plain events, turn lines the checks pass unchanged, packed rows) are read
//! without serde ([`quick`]).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::event::{EnvelopeKey, EnvelopeParts};
use super::message::{DataSeed, MessageKind};
use super::packed::{RowKind, TypedRow};
use super::payload::{is_lazy_kind, Payload};
use super::row::RowTexts;
use super::validate::is_plain_known;
use crate::json::check::skip_ws;

mod quick;
use crate::json::{parse_lossy, Skip};

/// One parsed storage line.
///
/// The parts are boxed: a line's parse result is moved half a dozen times on its way to an event
/// (out of the parser, into the reader's queue and out again), and one small allocation costs less
/// than copying an envelope's worth of bytes each time.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// An envelope of a type steps 2–5 of spec §1.7 never look at, not yet validated (§1.4).
    Plain(Box<EnvelopeParts>),
    /// A packed chunk row whose shape the parse checked (see [`RowDataSeed`]).
    Row(Box<TypedRow>),
    /// A message event whose `data` passed every check of spec §1.7 steps 2–5 as read (see
    /// [`super::message`]); its envelope is not yet validated (§1.4).
    Message(Box<EnvelopeParts>),
    /// Anything else, as `JSON.parse` would return it.
    Value(Value),
}

/// Parses one line (its LF included or not). Invalid UTF-8 and lone surrogate escapes take the lossy
/// path of [`parse_lossy`], as Node would read them.
pub(crate) fn parse_line(line: &[u8]) -> Result<Parsed, serde_json::Error> {
    // `basic` says only whether the bytes are UTF-8; where they are not, the lossy parse finds out how.
    let Ok(text) = simdutf8::basic::from_utf8(line) else {
        return parse_lossy(line).map(Parsed::Value);
    };
    if let Some(parsed) = quick::read(text) {
        return Ok(parsed);
    }
    parse_text(text)
}

/// [`parse_line`] through serde alone.
#[cfg(test)]
fn parse_line_serde(line: &[u8]) -> Result<Parsed, serde_json::Error> {
    match std::str::from_utf8(line) {
        Ok(text) => parse_text(text),
        Err(_) => parse_lossy(line).map(Parsed::Value),
    }
}

/// [`parse_line`] of a line that is valid UTF-8, through serde.
fn parse_text(text: &str) -> Result<Parsed, serde_json::Error> {
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        if let Ok(parsed) = (&mut de)
            .deserialize_map(LineVisitor { line: text })
            .and_then(|p| de.end().map(|()| p))
        {
            return Ok(parsed);
        }
    }
    // Not an object, not valid JSON as written (a lone surrogate, say), or a line the typed reading
    // does not answer for: the general path gives JavaScript's answer or the parse error to report.
    parse_lossy(text.as_bytes()).map(Parsed::Value)
}

/// The error that sends a line to the general parse.
fn not_typed<E: de::Error>() -> E {
    E::custom("not a line of the shape read typed")
}

enum LineKey {
    Known(EnvelopeKey),
    /// A packed row's own keys, known so that a row costs no key string.
    Seq0,
    Time0,
    Other,
}

struct LineKeySeed;

impl<'de> DeserializeSeed<'de> for LineKeySeed {
    type Value = LineKey;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<LineKey, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for LineKeySeed {
    type Value = LineKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<LineKey, E> {
        Ok(match key {
            "seq0" => LineKey::Seq0,
            "time0" => LineKey::Time0,
            _ => EnvelopeKey::of(key).map_or(LineKey::Other, LineKey::Known),
        })
    }
}

/// How a line's fields after its `type` are read.
#[derive(Clone, Copy)]
enum Mode {
    /// A type no check reads: the envelope's fields as they are.
    Plain,
    /// A chunk event: as `Plain`, its `data` kept as text.
    Lazy,
    /// A message event: as `Plain`, its `data` read typed.
    Message(MessageKind),
}

struct LineVisitor<'l> {
    /// The line, kept by a message event's payload.
    line: &'l str,
}

impl<'de> Visitor<'de> for LineVisitor<'_> {
    type Value = Parsed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed, A::Error> {
        match map.next_key_seed(LineKeySeed)? {
            Some(LineKey::Known(EnvelopeKey::Type)) => {}
            _ => return Err(not_typed()),
        }
        let kind: Value = map.next_value()?;
        let tag = kind.as_str().unwrap_or_default();
        if let Some(row) = RowKind::from_tag(tag) {
            return read_row(row, map);
        }
        let mode = if let Some(message) = MessageKind::of(tag) {
            Mode::Message(message)
        } else if is_lazy_kind(tag) {
            Mode::Lazy
        } else if kind.is_string() && is_plain_known(tag) {
            Mode::Plain
        } else {
            return read_value(kind, map);
        };
        let mut parts = Box::<EnvelopeParts>::default();
        parts.set(EnvelopeKey::Type, kind);
        let mut seen = 1u8 << (EnvelopeKey::Type as u8);
        while let Some(key) = map.next_key_seed(LineKeySeed)? {
            // Another key is the envelope check's to refuse, and a repeated one is JSON's last-wins:
            // both are the general path's.
            let LineKey::Known(key) = key else {
                return Err(not_typed());
            };
            let bit = 1u8 << (key as u8);
            if seen & bit != 0 {
                return Err(not_typed());
            }
            seen |= bit;
            match (key, mode) {
                (EnvelopeKey::Data, Mode::Message(kind)) => {
                    let facts = map.next_value_seed(DataSeed(kind))?;
                    parts.set_data(Payload::message(self.line, facts));
                }
                // Checked as a `Value` parse checks it, in its place in the line, so the line can
                // build it later without fail (and fails now where that parse fails).
                (EnvelopeKey::Data, Mode::Lazy) => {
                    map.next_value::<Skip>()?;
                    parts.set_data(Payload::line(self.line));
                }
                // A message lists every chunk it was streamed from: often dozens of seqs.
                (EnvelopeKey::SourceEventSeqs, _) => {
                    let raw: &'de RawValue = map.next_value()?;
                    let seqs = scan_seqs(raw.get()).ok_or_else(not_typed)?;
                    parts.set(key, seqs);
                }
                (key, _) => parts.set(key, map.next_value()?),
            }
        }
        match mode {
            // Without `data`, the message shape check (before the envelope's) refuses the event.
            Mode::Message(_) if parts.data().is_none() => Err(not_typed()),
            Mode::Message(_) => Ok(Parsed::Message(parts)),
            Mode::Plain | Mode::Lazy => Ok(Parsed::Plain(parts)),
        }
    }
}

/// The rest of a line of a type the checks read, as the `Value` a general parse gives (`type` first,
/// which is where a `Value` parse puts it too).
fn read_value<'de, A: MapAccess<'de>>(kind: Value, mut map: A) -> Result<Parsed, A::Error> {
    let mut object = Map::new();
    object.insert("type".to_owned(), kind);
    while let Some(key) = map.next_key::<String>()? {
        let value = map.next_value()?;
        object.insert(key, value);
    }
    Ok(Parsed::Value(Value::Object(object)))
}

/// The rest of a packed row: exactly `seq0`, `time0` and `data` besides its `type`, once each.
fn read_row<'de, A: MapAccess<'de>>(kind: RowKind, mut map: A) -> Result<Parsed, A::Error> {
    let (mut seq0, mut time0, mut data) = (None, None, None);
    while let Some(key) = map.next_key_seed(LineKeySeed)? {
        match key {
            LineKey::Seq0 if seq0.is_none() => seq0 = Some(map.next_value::<Value>()?),
            LineKey::Time0 if time0.is_none() => time0 = Some(map.next_value::<Value>()?),
            LineKey::Known(EnvelopeKey::Data) if data.is_none() => {
                data = Some(map.next_value_seed(RowDataSeed { kind })?)
            }
            _ => return Err(not_typed()),
        }
    }
    let (Some(seq0), Some(time0), Some(data)) = (seq0, time0, data) else {
        return Err(not_typed());
    };
    Ok(Parsed::Row(Box::new(TypedRow {
        kind,
        seq0,
        time0,
        turn: data.turn,
        step: data.step,
        index: data.index,
        id: data.id,
        name: data.name,
        dt: data.dt,
        texts: data.texts,
    })))
}

/// The keys a packed row's `data` may have, read without allocating.
#[derive(Clone, Copy)]
enum RowKey {
    Turn,
    Step,
    Index,
    Dt,
    Texts,
    Args,
    Id,
    Name,
}

struct RowKeySeed;

impl<'de> DeserializeSeed<'de> for RowKeySeed {
    type Value = RowKey;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RowKey, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for RowKeySeed {
    type Value = RowKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a packed row data key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<RowKey, E> {
        Ok(match key {
            "turn" => RowKey::Turn,
            "step" => RowKey::Step,
            "index" => RowKey::Index,
            "dt" => RowKey::Dt,
            "texts" => RowKey::Texts,
            "args" => RowKey::Args,
            "id" => RowKey::Id,
            "name" => RowKey::Name,
            _ => return Err(not_typed()),
        })
    }
}

/// A packed row's `data` of the expected shape (see [`TypedRow`]).
struct RowData {
    turn: Number,
    step: Number,
    index: Number,
    id: Option<String>,
    name: Option<String>,
    dt: Vec<i64>,
    texts: RowTexts,
}

/// Parses a packed row's `data` straight into its fields: no map, no key strings, no `Value` per text
/// or gap (both arrays kept as their JSON text and scanned). Any other shape (a missing, repeated or unknown key, a value of another
/// type, a gap that is not an integer) is [`not_typed`].
struct RowDataSeed {
    kind: RowKind,
}

impl<'de> DeserializeSeed<'de> for RowDataSeed {
    type Value = RowData;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RowData, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowDataSeed {
    type Value = RowData;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a packed row's data")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RowData, A::Error> {
        let kind = self.kind;
        let (mut turn, mut step, mut index): (Option<Number>, Option<Number>, Option<Number>) =
            (None, None, None);
        let (mut id, mut name): (Option<String>, Option<String>) = (None, None);
        let (mut dt, mut texts) = (None, None);
        fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
            match slot.replace(value) {
                None => Ok(()),
                Some(_) => Err(not_typed()),
            }
        }
        while let Some(key) = map.next_key_seed(RowKeySeed)? {
            match (key, kind) {
                (RowKey::Turn, _) => once(&mut turn, map.next_value()?)?,
                (RowKey::Step, _) => once(&mut step, map.next_value()?)?,
                (RowKey::Index, _) => once(&mut index, map.next_value()?)?,
                // Both arrays are read as their JSON text (no value per element) and scanned.
                (RowKey::Dt, _) => {
                    let raw: &'de RawValue = map.next_value()?;
                    let gaps = match scan_gaps(raw.get().as_bytes(), 0) {
                        Some((gaps, end)) if end == raw.get().len() => gaps,
                        _ => return Err(not_typed()),
                    };
                    once(&mut dt, gaps)?
                }
                (RowKey::Texts, RowKind::Text | RowKind::Reasoning)
                | (RowKey::Args, RowKind::ToolCall) => {
                    let raw: &'de RawValue = map.next_value()?;
                    // DSH writes `dt` first, which tells how many texts follow.
                    let count = dt.as_ref().map_or(16, |dt: &Vec<i64>| dt.len() + 1);
                    let scanned = match RowTexts::scan(raw.get(), 0, count) {
                        Some((texts, end)) if end == raw.get().len() => texts,
                        _ => return Err(not_typed()),
                    };
                    once(&mut texts, scanned)?
                }
                (RowKey::Id, RowKind::ToolCall) => once(&mut id, map.next_value()?)?,
                (RowKey::Name, RowKind::ToolCall) => once(&mut name, map.next_value()?)?,
                _ => return Err(not_typed()),
            }
        }
        let (Some(turn), Some(step), Some(index), Some(dt), Some(texts)) =
            (turn, step, index, dt, texts)
        else {
            return Err(not_typed());
        };
        if kind == RowKind::ToolCall && id.is_none() {
            return Err(not_typed());
        }
        Ok(RowData {
            turn,
            step,
            index,
            id,
            name,
            dt,
            texts,
        })
    }
}

/// A row's `dt` array starting at `at` (JSON or not: this checks the grammar itself), and where it
/// ends: the gaps if every one is an integer of at most 15 digits written as such. `None` for anything
/// else (`1.0` or `-0`, which JavaScript reads as integers too, a longer number, another element),
/// which the general parse reads and words.
pub(crate) fn scan_gaps(bytes: &[u8], at: usize) -> Option<(Vec<i64>, usize)> {
    let mut at = skip_ws(bytes, at);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    // About the row's members (DSH packs runs of a few dozen).
    let mut gaps = Vec::with_capacity(32);
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Some((gaps, at + 1));
    }
    loop {
        let negative = bytes.get(at) == Some(&b'-');
        at += usize::from(negative);
        // One pass over the digits: JSON's integer grammar (no leading zero) and the value.
        let first = at;
        let mut magnitude: i64 = 0;
        while let Some(&digit @ b'0'..=b'9') = bytes.get(at) {
            if at - first == 15 {
                return None;
            }
            magnitude = magnitude * 10 + i64::from(digit - b'0');
            at += 1;
        }
        let digits = at - first;
        let leading_zero = digits > 1 && bytes.get(first) == Some(&b'0');
        if digits == 0 || leading_zero || matches!(bytes.get(at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        gaps.push(match (negative, magnitude) {
            // `-0`: a float to serde_json.
            (true, 0) => return None,
            (true, n) => -n,
            (false, n) => n,
        });
        at = skip_ws(bytes, at);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => return Some((gaps, at + 1)),
            _ => return None,
        }
    }
}

/// A `sourceEventSeqs` array as its line holds it (JSON the line's parse accepted), as the `Value` a
/// parse gives, if it holds only integers of up to 15 digits written as such (each one a `u64` in the
/// `Value`, as serde_json reads it). `None` for anything else (a negative or fractional number, another
/// element, not an array), which the general parse reads and the fold words.
fn scan_seqs(array: &str) -> Option<Value> {
    let bytes = array.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'[') {
        return None;
    }
    // Room for elements of three digits and a comma, a message's usual; one more growth for shorter
    // ones. (A bound from two bytes an element reserved 16 bytes of `Value`s for every byte of the
    // array, so a few hundred seqs took a fresh allocation of up to 32 KiB.)
    let mut seqs = Vec::with_capacity(bytes.len() / 4 + 1);
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b']') {
        return Some(Value::Array(seqs));
    }
    loop {
        // The digits and their value in one pass: a message's array is hundreds of them.
        let start = at;
        let mut seq: u64 = 0;
        while let Some(digit) = bytes
            .get(at)
            .map(|b| b.wrapping_sub(b'0'))
            .filter(|d| *d <= 9)
        {
            seq = seq * 10 + u64::from(digit);
            at += 1;
            if at - start > 15 {
                return None;
            }
        }
        if at == start || matches!(bytes.get(at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        seqs.push(Value::from(seq));
        at = skip_ws(bytes, at);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => return Some(Value::Array(seqs)),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(line: &str) -> Value {
        match parse_line(line.as_bytes()).unwrap() {
            Parsed::Value(v) => v,
            Parsed::Plain(p) | Parsed::Message(p) => p.into_event().unwrap().to_value(),
            Parsed::Row(_) => panic!("a packed row"),
        }
    }

    #[test]
    fn packed_rows_of_the_expected_shape_parse_typed_and_any_other_shape_generally() {
        let typed = [
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[1,0],"texts":["he","l","lo"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":5,"time0":9,"data":{"turn":1,"step":1,"index":1,"id":"c1","name":"read","dt":[2],"args":["{","}"]}}"#,
            // Checks past the shape (an empty payload, a gap count) are the expansion's.
            r#"{"type":"reasoning-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}"#,
        ];
        for line in typed {
            assert!(
                matches!(parse_line(line.as_bytes()).unwrap(), Parsed::Row(_)),
                "{line}"
            );
        }
        for line in [
            // `type` after `data`, a repeated key, an unknown key, a value of another type, a missing key.
            r#"{"seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]},"type":"text-chunks"}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"],"x":0}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":"1","step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[1]}}"#,
            r#"{"type":"tool-call-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"seq":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":2,"time0":3,"data":[]}"#,
        ] {
            assert!(
                matches!(parse_line(line.as_bytes()).unwrap(), Parsed::Value(_)),
                "{line}"
            );
        }
    }

    /// The gaps the scan takes are the safe integers a `Value` parse reads, each as that integer.
    #[test]
    fn gaps_written_as_safe_integers_are_scanned_and_any_other_left_to_the_general_parse() {
        for json in [
            "[]",
            " [ 1 , -2,0,\t900719925474099 ] ",
            "[-900719925474099]",
        ] {
            let want: Vec<i64> = serde_json::from_str::<Vec<Value>>(json)
                .unwrap()
                .iter()
                .map(|v| crate::json::safe_int(v).unwrap())
                .collect();
            let gaps = scan_gaps(json.as_bytes(), 0).map(|(gaps, _)| gaps);
            assert_eq!(gaps, Some(want), "{json}");
        }
        for json in [
            "[1.0]",
            "[-0]",
            "[1e2]",
            "[9007199254740991]",
            "[12345678901234567890]",
            "[\"1\"]",
            "[null]",
            "{}",
            "[01]",
            "[1,]",
            "[-]",
        ] {
            assert_eq!(scan_gaps(json.as_bytes(), 0), None, "{json}");
        }
    }

    /// The seq lists the scan takes are the `Value`s a parse gives; any other is the general parse's.
    #[test]
    fn seq_lists_of_plain_integers_are_scanned_to_the_value_a_parse_gives() {
        for json in ["[]", " [ 0 ,7,\t123456789012345 ] ", "[5]"] {
            let want: Value = serde_json::from_str(json).unwrap();
            assert_eq!(scan_seqs(json), Some(want), "{json}");
        }
        for json in [
            "[-1]",
            "[-0]",
            "[1.0]",
            "[1e2]",
            "[1234567890123456]",
            "[\"1\"]",
            "[null]",
            "[[1]]",
            "{}",
            "\"append\"",
        ] {
            assert_eq!(scan_seqs(json), None, "{json}");
        }
    }

    /// A lone surrogate escape in a row's texts is for the general parse, which reads it as U+FFFD.
    #[test]
    fn a_row_text_with_a_lone_surrogate_is_read_the_general_way() {
        let line = r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a\ud800","b"]}}"#;
        let Parsed::Value(value) = parse_line(line.as_bytes()).unwrap() else {
            panic!("the general parse")
        };
        assert_eq!(value["data"]["texts"][0], "a\u{FFFD}");
    }

    #[test]
    fn row_keys_outside_a_row_or_repeated_in_one_keep_their_general_reading() {
        // An event carrying `seq0` is no plain envelope: the general path refuses it by the key's name.
        let line = r#"{"type":"step/start","seq":0,"time":0,"data":{},"seq0":1}"#;
        let Parsed::Value(v) = parse_line(line.as_bytes()).unwrap() else {
            panic!("a row key makes the envelope general")
        };
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["type", "seq", "time", "data", "seq0"]);
        let err = super::super::event::Event::from_value(v).unwrap_err();
        assert!(
            err.to_string().contains(r#"unexpected key "seq0""#),
            "{err}"
        );
        // A repeated `time0` is JSON's last-wins, which only the general parse gives.
        let dup = r#"{"type":"text-chunks","seq0":2,"time0":3,"time0":4,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}"#;
        let Parsed::Value(v) = parse_line(dup.as_bytes()).unwrap() else {
            panic!("a repeated row key is general")
        };
        assert_eq!(v["time0"], 4);
    }

    #[test]
    fn plain_events_skip_the_map_and_keep_their_fields() {
        let line = r#"{"type":"step/start","seq":3,"time":-5,"data":{"b":1,"a":[2]}}"#;
        let Parsed::Plain(parts) = parse_line(line.as_bytes()).unwrap() else {
            panic!("not plain")
        };
        let event = parts.into_event().unwrap();
        assert_eq!(event.to_json_line(), line);
    }

    #[test]
    fn data_nothing_on_the_read_path_reads_is_kept_as_text_and_builds_the_same() {
        let data = r#"{"turn":1,"step":2,"x":[1.5,"é"]}"#;
        for (kind, kept) in [
            ("assistant/chunk", true),
            ("step/end", true),
            ("session/title", true),
            ("compaction/summary", true),
            // The closer tracker reads its field from the line; extraction reads the others at length.
            ("step/start", true),
            ("tool/call", false),
            ("todo/write", false),
            // The checks read these.
            ("turn/start", false),
            ("request/header", false),
        ] {
            let line = format!(r#"{{"type":"{kind}","seq":0,"time":0,"data":{data}}}"#);
            let event = match parse_line(line.as_bytes()).unwrap() {
                Parsed::Plain(parts) => parts.into_event().unwrap(),
                Parsed::Value(value) => crate::log::event::Event::from_value(value).unwrap(),
                _ => panic!("{kind}: neither plain nor general"),
            };
            assert_eq!(!event.data.is_built(), kept, "{kind}");
            assert_eq!(event.to_json_line(), line, "{kind}");
        }
    }

    #[test]
    fn checked_types_odd_keys_and_duplicates_take_the_general_path_with_js_semantics() {
        for line in [
            r#"{"type":"user/message","seq":0,"time":0,"data":{}}"#,
            r#"{"type":"step/start","seq":0,"time":0,"data":{},"extra":1}"#,
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{}}"#,
        ] {
            assert!(
                matches!(parse_line(line.as_bytes()).unwrap(), Parsed::Value(_)),
                "{line}"
            );
        }
        let dup = r#"{"type":"step/start","seq":0,"seq":1,"time":0,"data":{}}"#;
        let Parsed::Value(v) = parse_line(dup.as_bytes()).unwrap() else {
            panic!("duplicates are general")
        };
        assert_eq!(v["seq"], 1, "the last duplicate wins");
        assert_eq!(
            v.as_object().unwrap().keys().next().map(String::as_str),
            Some("type")
        );
    }

    #[test]
    fn non_objects_escapes_and_bad_bytes_read_as_javascript_would() {
        assert_eq!(value("[1,2]"), serde_json::json!([1, 2]));
        assert_eq!(value("null"), Value::Null);
        assert_eq!(
            value(r#"{"type":"step\/start","seq":0,"time":0,"data":"\uD800"}"#)["data"],
            "\u{FFFD}"
        );
        assert!(parse_line(b"{\"type\":").is_err());
        assert!(parse_line(b"{} trailing").is_err());
        let Parsed::Value(v) =
            parse_line(b"{\"type\":\"step/start\",\"seq\":0,\"time\":0,\"data\":\"\xff\"}")
                .unwrap()
        else {
            panic!("invalid UTF-8 takes the lossy path")
        };
        assert_eq!(v["data"], "\u{FFFD}");
    }
}
