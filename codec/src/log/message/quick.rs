//! A message event's `data` read without serde, to the very [`MessageFacts`] [`super::DataSeed`]
//! gives.
//!
//! serde reads a message a token at a time through a visitor per level (data, message, source,
//! blocks, block), and for the half of a raw log's bytes that messages are, that machinery cost more
//! than the bytes: about a third of a read's instructions. [`data`] walks the same structure once
//! over the bytes ([`crate::json::walk`]), level for level the way the typed parse does, with the
//! same checks, the shape checks themselves shared with it ([`super::source_shaped`],
//! [`super::tool_message`], [`super::tool_result`]). It answers only where it can give exactly the
//! typed parse's answer: keys without escapes, never serde_json's raw-value key, nesting within
//! [`crate::json::walk::MAX_NESTING`]. Anywhere else, and wherever the typed parse would send the line
//! to the general one, it is `None`, and the line goes to serde, which answers for every line.

use serde_json::{Map, Value};

use super::{
    source_shaped, tool_message, tool_result, BlockType, Closing, MessageFacts, MessageKind,
    MessageRead, ToolMessageRead,
};
use crate::json::walk::Text;
use crate::text::Joiner;

/// The `data` of a message event of type `kind` at `at` in `line` (one container deep: inside the
/// line's object), read to its facts, and where it ends; `None` where the typed parse would not take
/// it or this reading cannot be sure it would.
pub(crate) fn data(line: &str, kind: MessageKind, at: usize) -> Option<(MessageFacts, usize)> {
    let read = Reader {
        json: Text::new(line),
    };
    let mut text = Joiner::default();
    let (message, closing, end) = match kind {
        // A user message's data is the message itself.
        MessageKind::User => {
            let (message, end) = read.message(at, kind, &mut text, None, 2)?;
            (message, Closing::User, end)
        }
        MessageKind::Assistant => {
            let (mut message, mut step, mut call_ids) = (None, None, Vec::new());
            let end = read.json.object(at, 2, |name, value| match name {
                b"message" if message.is_none() => {
                    let (read, end) =
                        read.message(value, kind, &mut text, Some(&mut call_ids), 3)?;
                    message = Some(read);
                    Some(end)
                }
                b"step" if step.is_none() => {
                    let (value, end) = read.json.value(value, 2)?;
                    step = Some(value);
                    Some(end)
                }
                b"message" | b"step" => None,
                _ => read.json.skip(value, 2),
            })?;
            let step = step.unwrap_or(Value::Null);
            (message?, Closing::Assistant { step, call_ids }, end)
        }
        MessageKind::ToolResult => {
            // Every key but `message` is kept as a value: the fold's key holds them all.
            let (mut message, mut kept) = (None, Map::with_capacity(4));
            let end = read.json.object(at, 2, |name, value| {
                if name != b"message" {
                    return read.keep(&mut kept, name, value, 2);
                }
                if message.is_some() {
                    return None;
                }
                let (read, end) = read.tool_message(value, &mut text, 3)?;
                message = Some(read);
                Some(end)
            })?;
            let (message, closing) = tool_result(&mut text, kept, message?)?;
            (message, closing, end)
        }
    };
    let facts = MessageFacts {
        kind,
        id: message.id,
        text: text.finish(),
        closing,
    };
    Some((facts, end))
}

struct Reader<'l> {
    json: Text<'l>,
}

impl<'l> Reader<'l> {
    /// The value of a key the fold's key map keeps, once (see `super::keep`).
    fn keep(
        &self,
        kept: &mut Map<String, Value>,
        name: &[u8],
        at: usize,
        depth: usize,
    ) -> Option<usize> {
        let name = std::str::from_utf8(name).ok()?;
        if kept.contains_key(name) {
            return None;
        }
        let (value, end) = self.json.value(at, depth)?;
        kept.insert(name.to_owned(), value);
        Some(end)
    }

    /// A user or assistant message at `at` (the container `depth` deep), checked as
    /// `super::MessageVisitor` checks it: its id, and where it ends.
    fn message(
        &self,
        at: usize,
        kind: MessageKind,
        text: &mut Joiner,
        mut calls: Option<&mut Vec<String>>,
        depth: usize,
    ) -> Option<(MessageRead, usize)> {
        let (mut id, mut role, mut source, mut content) = (None, false, false, false);
        let end = self.json.object(at, depth, |name, value| match name {
            b"id" if id.is_none() => {
                let (read, end) = self.json.string(value)?;
                if read.is_empty() {
                    return None;
                }
                id = Some(read.into_owned());
                Some(end)
            }
            b"role" if !role => {
                role = true;
                let (read, end) = self.json.string(value)?;
                (read == kind.role()).then_some(end)
            }
            b"source" if !source => {
                source = true;
                self.source(value, kind, depth + 1)
            }
            b"content" if !content => {
                content = true;
                self.blocks(value, text, calls.as_deref_mut(), depth + 1)
            }
            b"id" | b"role" | b"source" | b"content" => None,
            _ => self.json.skip(value, depth),
        })?;
        if !(role && source && content) {
            return None;
        }
        let read = MessageRead {
            id: id?,
            call_ids: Vec::new(),
        };
        Some((read, end))
    }

    /// A user or assistant message's `source` (see `super::SourceSeed`): where it ends.
    fn source(&self, at: usize, message: MessageKind, depth: usize) -> Option<usize> {
        let (mut kind, mut provider, mut model) = (None, None, None);
        let end = self.json.object(at, depth, |name, value| {
            let slot = match name {
                b"kind" => &mut kind,
                b"provider" => &mut provider,
                b"model" => &mut model,
                _ => return self.json.skip(value, depth),
            };
            if slot.is_some() {
                return None;
            }
            let (read, end) = self.json.string(value)?;
            *slot = Some(read);
            Some(end)
        })?;
        source_shaped(
            message,
            kind.as_deref(),
            provider.as_deref(),
            model.as_deref(),
        )
        .then_some(end)
    }

    /// An array of content blocks (see `super::Blocks`): where it ends.
    fn blocks(
        &self,
        at: usize,
        text: &mut Joiner,
        mut calls: Option<&mut Vec<String>>,
        depth: usize,
    ) -> Option<usize> {
        self.json.array(at, depth, |block| {
            let (_, end) = self.block(block, text, calls.as_deref_mut(), None, depth + 1)?;
            Some(end)
        })
    }

    /// A tool result message at `at` (see `super::MessageVisitor::visit_tool_message`).
    fn tool_message(
        &self,
        at: usize,
        text: &mut Joiner,
        depth: usize,
    ) -> Option<(ToolMessageRead, usize)> {
        let (mut kept, mut block) = (Map::with_capacity(4), None);
        let end = self.json.object(at, depth, |name, value| {
            if name != b"content" {
                return self.keep(&mut kept, name, value, depth);
            }
            if block.is_some() {
                return None;
            }
            let (read, end) = self.tool_content(value, text, depth + 1)?;
            block = Some(read);
            Some(end)
        })?;
        Some((tool_message(kept, block?)?, end))
    }

    /// A tool result message's `content` (see `super::ToolContentSeed`): its one block's keys but
    /// `content`, and where it ends.
    fn tool_content(
        &self,
        at: usize,
        text: &mut Joiner,
        depth: usize,
    ) -> Option<(Map<String, Value>, usize)> {
        let (mut kept, mut blocks) = (Map::with_capacity(4), 0);
        let end = self.json.array(at, depth, |block| {
            blocks += 1;
            if blocks > 1 {
                return None;
            }
            match self.block(block, text, None, Some(&mut kept), depth + 1)? {
                (BlockType::ToolResult, end) => Some(end),
                _ => None,
            }
        })?;
        (blocks == 1).then_some((kept, end))
    }

    /// One content block at `at`, its `type` first (see `super::Block`): its type and where it ends.
    fn block(
        &self,
        at: usize,
        text: &mut Joiner,
        calls: Option<&mut Vec<String>>,
        mut kept: Option<&mut Map<String, Value>>,
        depth: usize,
    ) -> Option<(BlockType, usize)> {
        const TEXT: u8 = 1;
        const ID: u8 = 2;
        const NAME: u8 = 4;
        const ARGUMENTS: u8 = 8;
        const CONTENT: u8 = 16;
        let (mut block, mut seen, mut call_id) = (None, 0u8, None);
        let once = |seen: &mut u8, bit: u8| {
            let first = *seen & bit == 0;
            *seen |= bit;
            first.then_some(())
        };
        let end = self.json.object(at, depth, |name, value| {
            let Some(block) = block else {
                // The text is joined as it is read, so the type must be known before anything else.
                if name != b"type" {
                    return None;
                }
                let (tag, end) = self.json.string(value)?;
                block = Some(match &*tag {
                    "text" => BlockType::Text,
                    "tool-call" => BlockType::ToolCall,
                    "tool-result" => BlockType::ToolResult,
                    _ => BlockType::Other,
                });
                if let Some(kept) = kept.as_deref_mut() {
                    kept.insert("type".into(), Value::String(tag.into_owned()));
                }
                return Some(end);
            };
            match (block, name) {
                (_, b"type") => None,
                (BlockType::Text, b"text") => {
                    once(&mut seen, TEXT)?;
                    let (read, end) = self.json.string(value)?;
                    text.push(&read);
                    Some(end)
                }
                (BlockType::ToolCall, b"id") if calls.is_some() => {
                    once(&mut seen, ID)?;
                    let (read, end) = self.json.string(value)?;
                    call_id = Some(read.into_owned());
                    Some(end)
                }
                (BlockType::ToolCall, b"name") => {
                    once(&mut seen, NAME)?;
                    let (read, end) = self.json.string(value)?;
                    text.push(&read);
                    Some(end)
                }
                // `[name, arguments]`: arguments read before the name would be joined out of order.
                (BlockType::ToolCall, b"arguments") if seen & NAME != 0 => {
                    once(&mut seen, ARGUMENTS)?;
                    let (read, end) = self.json.string(value)?;
                    text.push(&read);
                    Some(end)
                }
                (BlockType::ToolCall, b"arguments") => None,
                (BlockType::ToolResult, b"content") => {
                    once(&mut seen, CONTENT)?;
                    self.blocks(value, text, None, depth + 1)
                }
                _ => match kept.as_deref_mut() {
                    Some(kept) => self.keep(kept, name, value, depth),
                    None => self.json.skip(value, depth),
                },
            }
        })?;
        let block = block?;
        if kept.is_some() && seen & CONTENT == 0 {
            // A tool result's block must have its `content` array.
            return None;
        }
        if let (Some(calls), Some(id)) = (calls, call_id) {
            calls.push(id);
        }
        Some((block, end))
    }
}
