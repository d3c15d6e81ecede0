//! Message events (`user/message`, `assistant/message`, `tool/result`) read typed, in their line's one
//! parse, into the few facts the rest of a read looks at.
//!
//! Messages and tool results are about half the bytes of a real log. Parsed into a `serde_json::Value`
//! (a map with a key string and a value per field, at every level), each was built only to be walked
//! by the message shape check (spec §1.7 step 4), the legacy upgrader, the closer tracker, the surface
//! fold and text extraction, and then dropped. [`DataSeed`] parses the `data` of a message event
//! straight into [`MessageFacts`]: the message id (the upgrader's seq → id map), the search text (spec
//! §3, fed to the same [`Joiner`] as [`crate::text`]'s walk), what the closer tracker keeps (an
//! assistant message's step and tool-call ids, a tool result's call id) and a tool result's
//! content-only key for the fold. The event's payload keeps the line and builds the `Value` only when
//! something asks for it ([`super::payload::Payload::message`]).
//!
//! Only what DSH writes takes this path: a message of the current shape that passes every check of
//! steps 2–5 as it is (so no legacy upgrade applies), each key this parse reads present once, and each
//! content block's `type` its first key (so its text can be joined as it is read). Anything else fails
//! this parse, and the line is read the general way (a `Value`, the checks, the upgrader), so whatever
//! it yields or however it is refused reads exactly as before. The parts of `data` this parse does not
//! read are still parsed ([`Skip`], or a `Value` where the fold's key keeps them) with the checks a
//! `Value` parse makes, at the same depth of the same line: a line this path accepts is one the general
//! parse accepts, and its payload builds later without fail.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::json::{Skip, Str, RAW_VALUE_KEY};
use crate::text::Joiner;

/// The three message event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    User,
    Assistant,
    ToolResult,
}

impl MessageKind {
    pub(crate) fn of(kind: &str) -> Option<Self> {
        match kind {
            "user/message" => Some(Self::User),
            "assistant/message" => Some(Self::Assistant),
            "tool/result" => Some(Self::ToolResult),
            _ => None,
        }
    }

    /// The `role` the shape check requires.
    fn role(self) -> &'static str {
        match self {
            Self::User | Self::ToolResult => "user",
            Self::Assistant => "assistant",
        }
    }
}

/// What the read path, the fold and extraction need of a message event read typed (see the module
/// doc). Each consumer checks [`MessageFacts::is_for`] against the event's type, so facts never answer
/// for an event whose type was changed after the read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MessageFacts {
    kind: MessageKind,
    /// The message id: non-empty.
    pub(crate) id: String,
    /// The event's search text (spec §3).
    pub(crate) text: String,
    pub(crate) closing: Closing,
}

/// What the closer tracker (spec §1.9) and the fold read of a message, by type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Closing {
    User,
    /// `data.step` (`null` when absent) and the ids of the tool-call blocks of `message.content`
    /// whose id is a string, in order.
    Assistant {
        step: Value,
        call_ids: Vec<String>,
    },
    /// `message.source.callId`, and the fold's content-only comparison key: `data` with
    /// `message.content` reduced to its one block with that block's `content` nulled (see
    /// `crate::surface::fold`).
    ToolResult {
        call_id: String,
        key: Arc<Value>,
    },
}

impl MessageFacts {
    /// Whether these facts are those of an event of type `kind`.
    pub(crate) fn is_for(&self, kind: &str) -> bool {
        MessageKind::of(kind) == Some(self.kind)
    }
}

/// The error that sends a line to the general parse: the shape is not one this parse answers for.
fn general<E: de::Error>() -> E {
    E::custom("not a message event of the shape read typed")
}

/// Marks a key as read; a key read twice sends the line to the general parse (`JSON.parse` keeps the
/// last, and so would the general parse; this one does not try).
fn once<E: de::Error>(seen: &mut u8, bit: u8) -> Result<(), E> {
    if *seen & bit != 0 {
        return Err(general());
    }
    *seen |= bit;
    Ok(())
}

/// Reads the value of a key this parse does not look at, checked as a `Value` parse would check it.
fn skip<'de, A: MapAccess<'de>>(map: &mut A, key: &Str<'_>) -> Result<(), A::Error> {
    if key.as_str() == RAW_VALUE_KEY {
        return Err(general());
    }
    map.next_value::<Skip>()?;
    Ok(())
}

/// Reads the value of a key the fold's key map keeps, once.
fn keep<'de, A: MapAccess<'de>>(
    map: &mut A,
    kept: &mut Map<String, Value>,
    key: Str<'_>,
) -> Result<(), A::Error> {
    if kept.contains_key(key.as_str()) || key.as_str() == RAW_VALUE_KEY {
        return Err(general());
    }
    let value = map.next_value::<Value>()?;
    kept.insert(key.0.into_owned(), value);
    Ok(())
}

fn non_empty(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Parses the `data` of a message event of the given type into its [`MessageFacts`].
pub(crate) struct DataSeed(pub(crate) MessageKind);

impl<'de> DeserializeSeed<'de> for DataSeed {
    type Value = MessageFacts;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<MessageFacts, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DataSeed {
    type Value = MessageFacts;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message event's data")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MessageFacts, A::Error> {
        let kind = self.0;
        let mut text = Joiner::default();
        let (message, closing) = match kind {
            // A user message's data is the message itself.
            MessageKind::User => (
                MessageVisitor::new(kind, &mut text).visit_map(map)?.read,
                Closing::User,
            ),
            MessageKind::Assistant => {
                let (mut message, mut step, mut seen) = (None, None, 0u8);
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    match key.as_str() {
                        "message" => {
                            once(&mut seen, 1)?;
                            let read = map.next_value_seed(MessageVisitor::new(kind, &mut text))?;
                            message = Some(read.read);
                        }
                        "step" => {
                            once(&mut seen, 2)?;
                            step = Some(map.next_value::<Value>()?);
                        }
                        _ => skip(&mut map, &key)?,
                    }
                }
                let mut message = message.ok_or_else(general)?;
                let call_ids = std::mem::take(&mut message.call_ids);
                let step = step.unwrap_or(Value::Null);
                (message, Closing::Assistant { step, call_ids })
            }
            MessageKind::ToolResult => {
                // Every key but `message` is kept as a value: the fold's key holds them all.
                // Sized for what DSH writes (`turn, step, error`), so the map is not grown key by key.
                let (mut message, mut kept) = (None, Map::with_capacity(4));
                while let Some(key) = map.next_key::<Str<'de>>()? {
                    if key.as_str() == "message" {
                        if message.is_some() {
                            return Err(general());
                        }
                        message = Some(map.next_value_seed(MessageVisitor::new(kind, &mut text))?);
                    } else {
                        keep(&mut map, &mut kept, key)?;
                    }
                }
                let message = message.ok_or_else(general)?;
                // `join([contentText(content), error?.name, error?.code])`: after the content.
                if let Some(error) = kept.get("error") {
                    text.part(error.get("name"));
                    text.part(error.get("code"));
                }
                let mut reduced = message.kept;
                let mut block = message.block.ok_or_else(general)?;
                block.insert("content".into(), Value::Null);
                reduced.insert("content".into(), Value::Array(vec![Value::Object(block)]));
                kept.insert("message".into(), Value::Object(reduced));
                let closing = Closing::ToolResult {
                    call_id: message.call_id,
                    key: Arc::new(Value::Object(kept)),
                };
                (message.read, closing)
            }
        };
        Ok(MessageFacts {
            kind,
            id: message.id,
            text: text.finish(),
            closing,
        })
    }
}

/// Reads a message object (`data` of a user message, `data.message` of the others) and checks its
/// shape (spec §1.7 step 4) as it goes; a message the check would refuse is [`general`].
struct MessageVisitor<'t> {
    kind: MessageKind,
    text: &'t mut Joiner,
}

impl<'t> MessageVisitor<'t> {
    fn new(kind: MessageKind, text: &'t mut Joiner) -> Self {
        Self { kind, text }
    }
}

/// A message as [`MessageVisitor`] read it.
#[derive(Default)]
struct MessageRead {
    id: String,
    /// Assistant messages: the tool-call ids of the content.
    call_ids: Vec<String>,
}

/// A tool result's message as [`MessageVisitor`] read it: what the fold's key keeps besides the id.
#[derive(Default)]
struct ToolMessageRead {
    read: MessageRead,
    call_id: String,
    /// Every key of the message but `content`, in order.
    kept: Map<String, Value>,
    /// The one content block's keys but `content`, in order.
    block: Option<Map<String, Value>>,
}

impl<'de> DeserializeSeed<'de> for MessageVisitor<'_> {
    type Value = ToolMessageRead;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageVisitor<'_> {
    type Value = ToolMessageRead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolMessageRead, A::Error> {
        if self.kind == MessageKind::ToolResult {
            return self.visit_tool_message(map);
        }
        const ID: u8 = 1;
        const ROLE: u8 = 2;
        const SOURCE: u8 = 4;
        const CONTENT: u8 = 8;
        let mut seen = 0u8;
        let mut read = MessageRead::default();
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_str() {
                "id" => {
                    once(&mut seen, ID)?;
                    read.id = map.next_value::<Str<'de>>()?.0.into_owned();
                    if read.id.is_empty() {
                        return Err(general());
                    }
                }
                "role" => {
                    once(&mut seen, ROLE)?;
                    if map.next_value::<Str<'de>>()?.as_str() != self.kind.role() {
                        return Err(general());
                    }
                }
                "source" => {
                    once(&mut seen, SOURCE)?;
                    map.next_value_seed(SourceSeed(self.kind))?;
                }
                "content" => {
                    once(&mut seen, CONTENT)?;
                    let calls = (self.kind == MessageKind::Assistant).then_some(&mut read.call_ids);
                    map.next_value_seed(Blocks {
                        text: &mut *self.text,
                        calls,
                    })?;
                }
                _ => skip(&mut map, &key)?,
            }
        }
        if seen != ID | ROLE | SOURCE | CONTENT {
            return Err(general());
        }
        Ok(ToolMessageRead {
            read,
            ..ToolMessageRead::default()
        })
    }
}

impl MessageVisitor<'_> {
    /// A tool result's message: every key but `content` kept as a value for the fold's key, and
    /// checked from those values once all are read.
    fn visit_tool_message<'de, A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<ToolMessageRead, A::Error> {
        let mut kept = Map::with_capacity(4);
        let mut block = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            if key.as_str() == "content" {
                if block.is_some() {
                    return Err(general());
                }
                block = Some(map.next_value_seed(ToolContentSeed(&mut *self.text))?);
            } else {
                keep(&mut map, &mut kept, key)?;
            }
        }
        let block: Map<String, Value> = block.ok_or_else(general)?;
        let source = kept.get("source").and_then(Value::as_object);
        let call_id = source.and_then(|s| non_empty(s.get("callId")));
        let shaped = non_empty(kept.get("id")).is_some()
            && kept.get("role").and_then(Value::as_str) == Some(self.kind.role())
            && source.and_then(|s| s.get("kind")).and_then(Value::as_str) == Some("tool")
            && call_id.is_some()
            && block.get("toolCallId").and_then(Value::as_str) == call_id;
        let (true, Some(call_id), Some(id)) = (shaped, call_id, non_empty(kept.get("id"))) else {
            return Err(general());
        };
        Ok(ToolMessageRead {
            read: MessageRead {
                id: id.to_owned(),
                call_ids: Vec::new(),
            },
            call_id: call_id.to_owned(),
            block: Some(block),
            kept,
        })
    }
}

/// A user or assistant message's `source`: an object with a non-empty string `kind`; an assistant's
/// `kind` is `model` with non-empty string `provider` and `model`.
struct SourceSeed(MessageKind);

impl<'de> DeserializeSeed<'de> for SourceSeed {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SourceSeed {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message source")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut kind, mut provider, mut model) = (None, None, None);
        let mut seen = 0u8;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            let (slot, bit) = match key.as_str() {
                "kind" => (&mut kind, 1),
                "provider" => (&mut provider, 2),
                "model" => (&mut model, 4),
                _ => {
                    skip(&mut map, &key)?;
                    continue;
                }
            };
            once(&mut seen, bit)?;
            *slot = Some(map.next_value::<Str<'de>>()?);
        }
        let filled = |s: &Option<Str<'_>>| s.as_ref().is_some_and(|s| !s.as_str().is_empty());
        let shaped = match self.0 {
            MessageKind::Assistant => {
                kind.as_ref().map(Str::as_str) == Some("model")
                    && filled(&provider)
                    && filled(&model)
            }
            MessageKind::User | MessageKind::ToolResult => filled(&kind),
        };
        if shaped {
            Ok(())
        } else {
            Err(general())
        }
    }
}

/// An array of content blocks, joined into the text as [`Joiner::blocks`] joins them (`blockText`,
/// depth first, in order). `calls`: the top level of an assistant message, whose tool-call ids the
/// closer tracker keeps.
struct Blocks<'a> {
    text: &'a mut Joiner,
    calls: Option<&'a mut Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Blocks<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Blocks<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of content blocks")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let block = Block {
                text: &mut *self.text,
                calls: self.calls.as_deref_mut(),
                kept: None,
            };
            if seq.next_element_seed(block)?.is_none() {
                return Ok(());
            }
        }
    }
}

/// A tool result message's `content`: exactly one `tool-result` block, whose `content` is an array;
/// its keys but `content` are kept for the fold's key.
struct ToolContentSeed<'a>(&'a mut Joiner);

impl<'de> DeserializeSeed<'de> for ToolContentSeed<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ToolContentSeed<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool result's content")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::with_capacity(4);
        let block = Block {
            text: self.0,
            calls: None,
            kept: Some(&mut kept),
        };
        match seq.next_element_seed(block)? {
            Some(BlockType::ToolResult) => {}
            _ => return Err(general()),
        }
        if seq.next_element::<Skip>()?.is_some() {
            return Err(general());
        }
        Ok(kept)
    }
}

/// A string joined into the text where it is read: an escaped one straight from the parser's scratch
/// buffer, not first copied into a `String` of its own. Anything but a string is an error, as for
/// [`Str`].
struct Joined<'a>(&'a mut Joiner);

impl<'de> DeserializeSeed<'de> for Joined<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Joined<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.0.push(s);
        Ok(())
    }
}

/// The block types that contribute text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BlockType {
    Text,
    ToolCall,
    ToolResult,
    /// `reasoning`, `image` and any other type: no text.
    Other,
}

/// One content block, its `type` first: its text joined as it is read (`text` → its text, `tool-call`
/// → name then arguments, `tool-result` → its content's blocks). `kept`: a tool result message's one
/// block, whose keys but `content` the fold's key keeps.
struct Block<'a> {
    text: &'a mut Joiner,
    calls: Option<&'a mut Vec<String>>,
    kept: Option<&'a mut Map<String, Value>>,
}

impl<'de> DeserializeSeed<'de> for Block<'_> {
    type Value = BlockType;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<BlockType, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Block<'_> {
    type Value = BlockType;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<BlockType, A::Error> {
        const TEXT: u8 = 1;
        const ID: u8 = 2;
        const NAME: u8 = 4;
        const ARGUMENTS: u8 = 8;
        const CONTENT: u8 = 16;
        // The text is joined as it is read, so the type must be known before anything else.
        match map.next_key::<Str<'de>>()? {
            Some(key) if key.as_str() == "type" => {}
            _ => return Err(general()),
        }
        let tag = map.next_value::<Str<'de>>()?;
        let block = match tag.as_str() {
            "text" => BlockType::Text,
            "tool-call" => BlockType::ToolCall,
            "tool-result" => BlockType::ToolResult,
            _ => BlockType::Other,
        };
        if let Some(kept) = self.kept.as_deref_mut() {
            kept.insert("type".into(), Value::String(tag.0.into_owned()));
        }
        let mut seen = 0u8;
        let mut call_id = None;
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match (block, key.as_str()) {
                (_, "type") => return Err(general()),
                (BlockType::Text, "text") => {
                    once(&mut seen, TEXT)?;
                    map.next_value_seed(Joined(&mut *self.text))?;
                }
                (BlockType::ToolCall, "id") if self.calls.is_some() => {
                    once(&mut seen, ID)?;
                    call_id = Some(map.next_value::<Str<'de>>()?.0.into_owned());
                }
                (BlockType::ToolCall, "name") => {
                    once(&mut seen, NAME)?;
                    map.next_value_seed(Joined(&mut *self.text))?;
                }
                // `[name, arguments]`: arguments read before the name would be joined out of order.
                (BlockType::ToolCall, "arguments") if seen & NAME != 0 => {
                    once(&mut seen, ARGUMENTS)?;
                    map.next_value_seed(Joined(&mut *self.text))?;
                }
                (BlockType::ToolCall, "arguments") => return Err(general()),
                (BlockType::ToolResult, "content") => {
                    once(&mut seen, CONTENT)?;
                    map.next_value_seed(Blocks {
                        text: &mut *self.text,
                        calls: None,
                    })?;
                }
                _ => match self.kept.as_deref_mut() {
                    Some(kept) => keep(&mut map, kept, key)?,
                    None => skip(&mut map, &key)?,
                },
            }
        }
        if self.kept.is_some() && seen & CONTENT == 0 {
            // A tool result's block must have its `content` array.
            return Err(general());
        }
        if let (Some(calls), Some(id)) = (self.calls, call_id) {
            calls.push(id);
        }
        Ok(block)
    }
}

#[cfg(test)]
mod tests;
