//! Snapshot projection (spec §6.6): which messages of a source's current surface a citation carries.
//!
//! Kept: user messages the user typed (`source.kind == "user"`), compaction checkpoints (`source.kind ==
//! "plugin"`, `source.plugin == "compact"`), and every assistant message (interrupted prefixes too), each
//! as the `text` of its `text` blocks joined with `\n`, untrimmed. Dropped: tool results, reasoning, tool
//! calls, images, messages whose text is empty, and every other user message source, which is what keeps
//! an earlier citation's `session-reference` context from being cited again.

use std::borrow::Cow;

use dsh_codec::log::Event;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One message of the snapshot, borrowing the source's text when it is a single block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'a> {
    pub role: Role,
    pub text: Cow<'a, str>,
    pub checkpoint: bool,
}

/// The items of `surface` (current-surface events, in model order).
pub fn project<'a>(surface: impl IntoIterator<Item = &'a Event>) -> Vec<Item<'a>> {
    surface.into_iter().filter_map(item_of).collect()
}

fn item_of(event: &Event) -> Option<Item<'_>> {
    let (role, message, checkpoint) = match event.kind.as_str() {
        "user/message" => {
            let source = event.data.get("source");
            let kind = source.and_then(|s| s.get("kind")).and_then(Value::as_str);
            let plugin = source.and_then(|s| s.get("plugin")).and_then(Value::as_str);
            let checkpoint = kind == Some("plugin") && plugin == Some("compact");
            if !checkpoint && kind != Some("user") {
                return None;
            }
            (Role::User, event.data.as_value(), checkpoint)
        }
        "assistant/message" => (Role::Assistant, event.data.get("message")?, false),
        _ => return None,
    };
    let text = text_of(message.get("content")?);
    (!text.is_empty()).then_some(Item {
        role,
        text,
        checkpoint,
    })
}

/// The `text` of every `text` block, joined with `\n`. A text that is not a string counts as empty, as
/// JavaScript's `join` renders a missing one (the reader has already refused such blocks in a log).
fn text_of(content: &Value) -> Cow<'_, str> {
    let Value::Array(blocks) = content else {
        return Cow::Borrowed("");
    };
    let mut texts = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .map(|b| b.get("text").and_then(Value::as_str).unwrap_or(""));
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = texts.next() else {
        return Cow::Borrowed(first);
    };
    let mut joined = format!("{first}\n{second}");
    for t in texts {
        joined.push('\n');
        joined.push_str(t);
    }
    Cow::Owned(joined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(source: Value, content: Value) -> Event {
        Event::appended(
            "user/message",
            0,
            0,
            json!({"id": "u", "role": "user", "content": content, "source": source}),
        )
    }

    fn assistant(content: Value, interrupted: bool) -> Event {
        let mut data = json!({"turn": 1, "step": 1, "message": {"id": "a", "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"}}});
        if interrupted {
            data["interrupted"] = json!(true);
        }
        Event::appended("assistant/message", 1, 0, data)
    }

    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }

    #[test]
    fn keeps_user_checkpoint_and_assistant_text_only() {
        let events = vec![
            user(json!({"kind": "user"}), json!([text("question")])),
            user(
                json!({"kind": "plugin", "plugin": "compact", "compactionId": "k"}),
                json!([text("summary")]),
            ),
            user(
                json!({"kind": "session-reference", "form": "recall", "version": 1, "references": []}),
                json!([text("an earlier citation")]),
            ),
            user(
                json!({"kind": "plugin", "plugin": "other"}),
                json!([text("hook")]),
            ),
            user(
                json!({"kind": "agent-instructions"}),
                json!([text("system")]),
            ),
            Event::appended(
                "tool/result",
                2,
                0,
                json!({"turn": 1, "step": 1, "message": {"id": "t", "role": "user",
                    "content": [{"type": "tool-result", "toolCallId": "c", "content": [text("out")]}],
                    "source": {"kind": "tool", "callId": "c"}}}),
            ),
            assistant(
                json!([{"type": "reasoning", "text": "think"}, text("a"), {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}, text(" b ")]),
                false,
            ),
            assistant(json!([text("partial")]), true),
            assistant(json!([]), false),
            assistant(
                json!([{"type": "reasoning", "text": "only thinking"}]),
                false,
            ),
            user(json!({"kind": "user"}), json!([text("")])),
        ];
        let items = project(&events);
        let got: Vec<(Role, &str, bool)> = items
            .iter()
            .map(|i| (i.role, i.text.as_ref(), i.checkpoint))
            .collect();
        assert_eq!(
            got,
            vec![
                (Role::User, "question", false),
                (Role::User, "summary", true),
                (Role::Assistant, "a\n b ", false),
                (Role::Assistant, "partial", false),
            ]
        );
        assert!(matches!(items[0].text, Cow::Borrowed(_)));
    }

    #[test]
    fn empty_text_blocks_still_join() {
        let events = [user(json!({"kind": "user"}), json!([text(""), text("")]))];
        assert_eq!(project(&events)[0].text, "\n");
    }
}
