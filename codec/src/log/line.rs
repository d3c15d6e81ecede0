//! Parsing one storage line without building a map for its envelope.
//!
//! Most lines of a real log are events of types no validation step looks at (chunks, steps, titles). For
//! those the envelope's fields go straight into [`EnvelopeParts`]: no `serde_json::Map`, no key strings,
//! no hashing. Message events of the current shape have their `data` read typed ([`super::message`]) in
//! the same parse, and packed rows theirs ([`RowDataSeed`]). Every other line (turn ends, legacy shapes,
//! anything odd) comes back as the `Value` the checked path expects, built from the same single parse;
//! a line the typed parses do not answer for is parsed again the general way.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::event::{EnvelopeKey, EnvelopeParts};
use super::message::{DataSeed, MessageFacts, MessageKind};
use super::packed::{RowKind, TypedRow};
use super::payload::{builds_as_value, is_lazy_kind, Payload};
use super::validate::is_plain_known;
use crate::json::parse_lossy;

/// One parsed storage line.
// `Plain` is the large variant and also the common one (most lines of a log), so boxing it would add an
// allocation per event to save copying in the rare case.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Parsed {
    /// An envelope of a type steps 2–5 of spec §1.7 never look at, not yet validated (§1.4).
    Plain(EnvelopeParts),
    /// A packed chunk row whose shape the parse checked (see [`RowDataSeed`]).
    Row(TypedRow),
    /// A message event whose `data` passed every check of spec §1.7 steps 2–5 as read (see
    /// [`super::message`]); its envelope is not yet validated (§1.4).
    Message(EnvelopeParts),
    /// Anything else, as `JSON.parse` would return it.
    Value(Value),
}

/// Parses one line (its LF included or not). Invalid UTF-8 and lone surrogate escapes take the lossy
/// path of [`parse_lossy`], as Node would read them.
pub(crate) fn parse_line(line: &[u8]) -> Result<Parsed, serde_json::Error> {
    let Ok(text) = std::str::from_utf8(line) else {
        return parse_lossy(line).map(Parsed::Value);
    };
    if text.trim_start().starts_with('{') {
        let mut de = serde_json::Deserializer::from_str(text);
        if let Ok(parsed) = (&mut de)
            .deserialize_map(LineVisitor { line: text })
            .and_then(|p| de.end().map(|()| p))
        {
            return Ok(parsed);
        }
    }
    // Not an object, not valid JSON as written (a lone surrogate, say), or invalid: the general path
    // gives JavaScript's answer or the parse error to report.
    parse_lossy(line).map(Parsed::Value)
}

enum LineKey {
    Known(EnvelopeKey),
    /// A packed row's own keys, known so that a row costs no key string.
    Seq0,
    Time0,
    Other(String),
}

impl LineKey {
    fn of(key: &str) -> Option<Self> {
        match key {
            "seq0" => Some(Self::Seq0),
            "time0" => Some(Self::Time0),
            _ => EnvelopeKey::of(key).map(Self::Known),
        }
    }
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
        Ok(LineKey::of(key).unwrap_or_else(|| LineKey::Other(key.to_owned())))
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<LineKey, E> {
        Ok(LineKey::of(&key).unwrap_or(LineKey::Other(key)))
    }
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
        let mut pairs: Vec<(LineKey, Field)> = Vec::with_capacity(7);
        let mut seen = 0u8;
        let mut plain_shape = true;
        // Whether a `type` read so far names a type whose `data` is kept as text (see `Payload`).
        let mut lazy = false;
        // The packed row kind a `type` read so far names: its `data` is parsed typed.
        let mut row = None;
        // The message type a `type` read so far names: its `data` is parsed typed.
        let mut message = None;
        while let Some(key) = map.next_key_seed(LineKeySeed)? {
            let field = match key {
                LineKey::Known(EnvelopeKey::Data) if row.is_some() => {
                    Field::Row(map.next_value_seed(RowDataSeed(row.unwrap_or(RowKind::Text)))?)
                }
                LineKey::Known(EnvelopeKey::Data) if message.is_some() => {
                    let kind = message.unwrap_or(MessageKind::User);
                    Field::Message(map.next_value_seed(DataSeed(kind))?)
                }
                LineKey::Known(EnvelopeKey::Data) if lazy => {
                    let raw: Box<RawValue> = map.next_value()?;
                    if builds_as_value(raw.get()) {
                        Field::Data(Payload::raw(raw))
                    } else {
                        // Built now, so that a value serde_json refuses fails the line as it always did.
                        Field::Value(serde_json::from_str(raw.get()).map_err(de::Error::custom)?)
                    }
                }
                _ => Field::Value(map.next_value()?),
            };
            match &key {
                LineKey::Known(k) => {
                    let bit = 1u8 << (*k as u8);
                    // A repeated key is legal JSON (the last one wins); leave it to the general path.
                    plain_shape &= seen & bit == 0;
                    seen |= bit;
                    if let (EnvelopeKey::Type, Field::Value(v)) = (k, &field) {
                        lazy = v.as_str().is_some_and(is_lazy_kind);
                        row = v.as_str().and_then(RowKind::from_tag);
                        message = v.as_str().and_then(MessageKind::of);
                    }
                }
                LineKey::Seq0 | LineKey::Time0 | LineKey::Other(_) => plain_shape = false,
            }
            pairs.push((key, field));
        }
        if pairs
            .iter()
            .any(|(_, field)| matches!(field, Field::Row(_)))
        {
            return typed_row(pairs);
        }
        if pairs
            .iter()
            .any(|(_, field)| matches!(field, Field::Message(_)))
        {
            return typed_message(pairs, plain_shape, self.line);
        }
        let plain_kind = pairs.iter().any(|(k, v)| {
            matches!((k, v), (LineKey::Known(EnvelopeKey::Type), Field::Value(v)) if v.as_str().is_some_and(is_plain_known))
        });
        if plain_shape && plain_kind {
            let mut parts = EnvelopeParts::default();
            for (key, field) in pairs {
                match (key, field) {
                    (LineKey::Known(EnvelopeKey::Data), Field::Data(payload)) => {
                        parts.set_data(payload)
                    }
                    (LineKey::Known(k), field) => parts.set(k, field.into_value()),
                    (LineKey::Seq0 | LineKey::Time0 | LineKey::Other(_), _) => {}
                }
            }
            return Ok(Parsed::Plain(parts));
        }
        let mut object = Map::with_capacity(pairs.len());
        for (key, field) in pairs {
            let key = match key {
                LineKey::Known(k) => k.name().to_owned(),
                LineKey::Seq0 => "seq0".to_owned(),
                LineKey::Time0 => "time0".to_owned(),
                LineKey::Other(s) => s,
            };
            object.insert(key, field.into_value());
        }
        Ok(Parsed::Value(Value::Object(object)))
    }
}

/// One field of a line's top-level object: a `Value`, a `data` kept as text, or a packed row's or a
/// message's `data` parsed typed.
enum Field {
    Value(Value),
    Data(Payload),
    Row(RowData),
    Message(MessageFacts),
}

impl Field {
    fn into_value(self) -> Value {
        match self {
            Self::Value(value) => value,
            Self::Data(payload) => payload.into_value(),
            // `typed_row` and `typed_message` take every line with a typed data; nothing else gets one.
            Self::Row(_) | Self::Message(_) => Value::Null,
        }
    }
}

/// A message event whose `data` was read typed: its envelope must be of the plain shape (known keys,
/// once each); any other goes to the general parse, whose envelope check words the refusal.
fn typed_message<E: de::Error>(
    pairs: Vec<(LineKey, Field)>,
    plain_shape: bool,
    line: &str,
) -> Result<Parsed, E> {
    if !plain_shape {
        return Err(not_typed());
    }
    let mut parts = EnvelopeParts::default();
    for (key, field) in pairs {
        match (key, field) {
            (LineKey::Known(_), Field::Message(facts)) => {
                parts.set_data(Payload::message(line, facts))
            }
            (LineKey::Known(k), field) => parts.set(k, field.into_value()),
            (LineKey::Seq0 | LineKey::Time0 | LineKey::Other(_), _) => return Err(not_typed()),
        }
    }
    Ok(Parsed::Message(parts))
}

/// The error that sends a line to the general parse: the typed parse of a packed row only answers for
/// rows of exactly the expected shape, and leaves everything else (with its wording) to
/// `packed::expand_row_parts`.
fn not_typed<E: de::Error>() -> E {
    E::custom("not a packed row of the expected shape")
}

/// A line whose `data` was parsed as a packed row's: exactly `type`, `seq0`, `time0` and `data`, once each.
fn typed_row<E: de::Error>(pairs: Vec<(LineKey, Field)>) -> Result<Parsed, E> {
    if pairs.len() != 4 {
        return Err(not_typed());
    }
    let (mut kind, mut seq0, mut time0, mut data) = (None, None, None, None);
    for (key, field) in pairs {
        match (key, field) {
            (LineKey::Known(EnvelopeKey::Type), Field::Value(v)) if kind.is_none() => {
                kind = v.as_str().and_then(RowKind::from_tag)
            }
            (LineKey::Seq0, Field::Value(v)) if seq0.is_none() => seq0 = Some(v),
            (LineKey::Time0, Field::Value(v)) if time0.is_none() => time0 = Some(v),
            (LineKey::Known(EnvelopeKey::Data), Field::Row(d)) if data.is_none() => data = Some(d),
            _ => return Err(not_typed()),
        }
    }
    let (Some(kind), Some(seq0), Some(time0), Some(data)) = (kind, seq0, time0, data) else {
        return Err(not_typed());
    };
    if data.kind != kind {
        return Err(not_typed());
    }
    Ok(Parsed::Row(TypedRow {
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
    }))
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
    kind: RowKind,
    turn: serde_json::Number,
    step: serde_json::Number,
    index: serde_json::Number,
    id: Option<String>,
    name: Option<String>,
    dt: Vec<Value>,
    texts: Vec<String>,
}

/// Parses a packed row's `data` straight into its fields: no map, no key strings, no `Value` per text.
/// Any other shape (a missing, repeated or unknown key, a value of another type) is [`not_typed`].
struct RowDataSeed(RowKind);

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
        let kind = self.0;
        let (mut turn, mut step, mut index, mut id, mut name, mut dt, mut texts) =
            (None, None, None, None, None, None, None);
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
                (RowKey::Dt, _) => once(&mut dt, map.next_value()?)?,
                (RowKey::Texts, RowKind::Text | RowKind::Reasoning)
                | (RowKey::Args, RowKind::ToolCall) => once(&mut texts, map.next_value()?)?,
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
            kind,
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
