//! Text extraction (spec §3): the searchable text of one event, and the sanitising the index applies.
//!
//! Every event gets a text; an event whose text is empty produces no search document. The rules follow
//! the reference: message content blocks contribute their text (reasoning never does), tool calls their
//! name and raw argument JSON, tool results their (nested) output plus the error name and code, todo
//! lists their statuses and contents, and a turn end a word for how it ended. Parts are trimmed with
//! JavaScript's `trim` and joined with `\n`, empty parts dropped.
//!
//! Where the reference would throw on a malformed payload (a non-string part, a non-array content), this
//! skips the part instead: extraction must never fail or panic on a log that otherwise reads.

use std::borrow::Cow;

use serde_json::Value;

use crate::json::trim_js;
use crate::log::event::Event;
use crate::log::event_ref::EventRef;

/// The document text of one event (spec §3 table); empty when the event yields no document.
pub fn event_text(event: &Event) -> String {
    event_ref_text(EventRef::Event(event))
}

/// [`event_text`] for a borrowed event (see [`EventRef`]).
pub fn event_ref_text(event: EventRef<'_>) -> String {
    // A chunk delta has no text (its type is none of the table's), so its data is never built.
    let EventRef::Event(event) = event else {
        return String::new();
    };
    // A message read typed carries its text, extracted by these rules as it was parsed.
    if let Some(facts) = event.data.message_facts(&event.kind) {
        return facts.text.clone();
    }
    let data = &event.data;
    let mut text = Joiner::default();
    match event.kind.as_str() {
        "user/message" => text.blocks(data.get("content")),
        "assistant/message" => text.blocks(data.get("message").and_then(|m| m.get("content"))),
        "tool/call" => {
            text.part(data.get("name"));
            text.part(data.get("arguments"));
        }
        "tool/result" => {
            text.blocks(data.get("message").and_then(|m| m.get("content")));
            if let Some(error) = data.get("error") {
                text.part(error.get("name"));
                text.part(error.get("code"));
            }
        }
        "todo/write" => {
            if let Some(Value::Array(todos)) = data.get("todos") {
                for todo in todos {
                    text.part(todo.get("status"));
                    text.part(todo.get("content"));
                }
            }
        }
        // Another harness's record kept as log text (DESIGN.md deviation 8): what its importer extracted.
        crate::source::IMPORTED_RECORD => text.part(data.get("text")),
        "turn/end" => {
            // Read from the line when the data is kept as one (see `Payload::line_fields`).
            let kept = data.line_fields(["reason"]);
            let reason = match &kept {
                Some([reason]) => reason.as_ref(),
                None => data.get("reason"),
            };
            match reason.and_then(|r| r.get("kind")).and_then(Value::as_str) {
                Some("error") => {
                    text.push("error");
                    text.part(
                        reason
                            .and_then(|r| r.get("error"))
                            .and_then(|e| e.get("message")),
                    );
                }
                Some(kind @ ("aborted" | "max-tokens" | "interrupted")) => text.push(kind),
                // `completed`, `blocked` and kinds added later carry no semantic text.
                _ => {}
            }
        }
        _ => {}
    }
    text.finish()
}

/// `contentText(blocks)`: the joined text of an array of content blocks (empty for a non-array).
pub fn content_text(blocks: &Value) -> String {
    let mut text = Joiner::default();
    text.blocks(Some(blocks));
    text.finish()
}

/// What the SQLite index stores (spec §3, `sanitizeFtsText`): U+0000, U+FDD0 and U+FDD1 become U+FFFD.
/// Borrows when there is nothing to replace, which is nearly always.
pub fn sanitize_for_index(text: &str) -> Cow<'_, str> {
    const BAD: [char; 3] = ['\u{0000}', '\u{FDD0}', '\u{FDD1}'];
    if !has_index_bad(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if BAD.contains(&c) { '\u{FFFD}' } else { c })
            .collect(),
    )
}

/// Whether `bytes` (UTF-8) hold U+0000, U+FDD0 or U+FDD1: a byte search, since every document's text
/// is checked and decoding it character by character showed in a cold build's profile.
fn has_index_bad(bytes: &[u8]) -> bool {
    // U+FDD0 and U+FDD1 are EF B7 90 and EF B7 91.
    memchr::memchr2_iter(0, 0xEF, bytes)
        .any(|at| bytes[at] == 0 || matches!(bytes.get(at + 1..at + 3), Some([0xB7, 0x90 | 0x91])))
}

/// Length in Unicode code points (JavaScript `Array.from(s).length`), which the index stores.
pub fn codepoint_len(s: &str) -> usize {
    s.chars().count()
}

/// `join(parts)` built in place: each part trimmed, empty ones dropped, the rest separated by `\n`.
/// Joining nested joins flattens (a joined text starts and ends with non-whitespace), so nested
/// `contentText` calls can feed the same buffer. The typed message parse
/// ([`crate::log::message`]) feeds one as it reads a message's content blocks, in the order of
/// [`Joiner::blocks`].
#[derive(Default)]
pub(crate) struct Joiner {
    out: String,
}

impl Joiner {
    pub(crate) fn push(&mut self, part: &str) {
        let part = trim_js(part);
        if part.is_empty() {
            return;
        }
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out.push_str(part);
    }

    /// A part that should be a string; anything else contributes nothing.
    pub(crate) fn part(&mut self, value: Option<&Value>) {
        if let Some(Value::String(s)) = value {
            self.push(s);
        }
    }

    /// `blockText` over an array of blocks, depth first in order. An explicit stack rather than
    /// recursion, so a pathologically nested tool result cannot exhaust the call stack.
    fn blocks(&mut self, blocks: Option<&Value>) {
        let Some(Value::Array(blocks)) = blocks else {
            return;
        };
        let mut stack = vec![blocks.iter()];
        while let Some(level) = stack.last_mut() {
            let Some(block) = level.next() else {
                stack.pop();
                continue;
            };
            match block.get("type").and_then(Value::as_str) {
                Some("text") => self.part(block.get("text")),
                Some("tool-call") => {
                    self.part(block.get("name"));
                    self.part(block.get("arguments"));
                }
                Some("tool-result") => {
                    if let Some(Value::Array(inner)) = block.get("content") {
                        stack.push(inner.iter());
                    }
                }
                // `reasoning`, `image` and unknown block types are not searchable.
                _ => {}
            }
        }
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(kind: &str, data: Value) -> String {
        event_text(&Event::new(kind, 0, 0, data))
    }

    fn assistant(content: Value) -> Value {
        json!({"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":content,
            "source":{"kind":"model","provider":"p","model":"m"}}})
    }

    fn tool_result(content: Value, error: Option<Value>) -> Value {
        let mut data = json!({"turn":1,"step":1,"message":{"id":"t","role":"user",
            "source":{"kind":"tool","callId":"c"},
            "content":[{"type":"tool-result","toolCallId":"c","content":content,"isError":false}]},
            "meta":{"text":"meta is not indexed"}});
        if let Some(error) = error {
            data["error"] = error;
        }
        data
    }

    #[test]
    fn user_message_is_content_text_for_any_source() {
        let data = json!({"content":[{"type":"text","text":"  hello  "},{"type":"image","attachment":{"id":"x"}},
            {"type":"text","text":"\u{3000}"},{"type":"text","text":"world\n"}],
            "source":{"kind":"plugin","plugin":"compact"},"role":"user","id":"u"});
        assert_eq!(text_of("user/message", data), "hello\nworld");
        let checkpoint = json!({"content":[{"type":"text","text":"preamble"},{"type":"text","text":"<compacted-summary>\ns\n</compacted-summary>"}],
            "source":{"kind":"plugin","plugin":"compact","compactionId":"c"},"role":"user","id":"u"});
        assert_eq!(
            text_of("user/message", checkpoint),
            "preamble\n<compacted-summary>\ns\n</compacted-summary>"
        );
    }

    #[test]
    fn assistant_message_skips_reasoning_and_indexes_tool_calls() {
        let data = assistant(json!([
            {"type":"reasoning","text":"secret thoughts"},
            {"type":"text","text":"Running it."},
            {"type":"tool-call","id":"c","name":"bash","arguments":"{\"command\":\"ls\"}"},
            {"type":"future-block","text":"not indexed"}
        ]));
        assert_eq!(
            text_of("assistant/message", data),
            "Running it.\nbash\n{\"command\":\"ls\"}"
        );
        assert_eq!(text_of("assistant/message", assistant(json!([]))), "");
    }

    #[test]
    fn legacy_shapes_are_not_read_by_extraction() {
        // Extraction sees only upgraded (legacy-free) shapes; a pre-identity assistant message that
        // skipped the upgrade has no `data.message` and yields nothing.
        let legacy = json!({"turn":1,"step":1,"content":[{"type":"text","text":"old"}],"provenance":{"provider":"p"}});
        assert_eq!(text_of("assistant/message", legacy), "");
        let legacy_tool =
            json!({"callId":"c","content":[{"type":"text","text":"old"}],"isError":false});
        assert_eq!(text_of("tool/result", legacy_tool), "");
    }

    #[test]
    fn tool_call_is_name_and_arguments() {
        let data = json!({"turn":1,"step":1,"callId":"c","name":" read ","arguments":"{\"file_path\":\"a.txt\"}"});
        assert_eq!(
            text_of("tool/call", data),
            "read\n{\"file_path\":\"a.txt\"}"
        );
        assert_eq!(
            text_of("tool/call", json!({"name":"noop","arguments":""})),
            "noop"
        );
    }

    #[test]
    fn tool_result_flattens_nested_results_and_adds_error() {
        let content = json!([
            {"type":"text","text":"outer"},
            {"type":"tool-result","toolCallId":"inner","content":[
                {"type":"text","text":"inner one"},
                {"type":"tool-result","toolCallId":"deeper","content":[{"type":"text","text":"deepest"}]},
                {"type":"reasoning","text":"hidden"}
            ]},
            {"type":"text","text":"after"}
        ]);
        assert_eq!(
            text_of("tool/result", tool_result(content, None)),
            "outer\ninner one\ndeepest\nafter"
        );
        let error = json!({"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"});
        let content = json!([{"type":"text","text":"The tool call was interrupted."}]);
        assert_eq!(
            text_of("tool/result", tool_result(content, Some(error))),
            "The tool call was interrupted.\nToolOutcomeUnknownError\nTOOL_OUTCOME_UNKNOWN"
        );
        assert_eq!(
            text_of(
                "tool/result",
                tool_result(json!([]), Some(json!({"name":"E"})))
            ),
            "E"
        );
        assert_eq!(
            text_of("tool/result", tool_result(json!([]), Some(Value::Null))),
            ""
        );
    }

    #[test]
    fn todo_write_alternates_status_and_content() {
        let data = json!({"todos":[{"content":"write tests","status":"completed"},{"content":" ship ","status":"pending"}]});
        assert_eq!(
            text_of("todo/write", data),
            "completed\nwrite tests\npending\nship"
        );
        assert_eq!(text_of("todo/write", json!({"todos":[]})), "");
    }

    #[test]
    fn an_imported_record_is_its_extracted_text() {
        let data = json!({"source": "claude", "recordType": "zebra", "text": "  zebra counters "});
        assert_eq!(
            text_of(crate::source::IMPORTED_RECORD, data),
            "zebra counters"
        );
        assert_eq!(
            text_of(crate::source::IMPORTED_RECORD, json!({"text": 3})),
            ""
        );
    }

    #[test]
    fn turn_end_kinds() {
        let end = |reason: Value| text_of("turn/end", json!({"turn":1,"reason":reason}));
        assert_eq!(
            end(json!({"kind":"error","error":{"message":" boom ","code":"X"}})),
            "error\nboom"
        );
        assert_eq!(end(json!({"kind":"error","error":{"code":"X"}})), "error");
        assert_eq!(
            end(json!({"kind":"aborted","reason":{"kind":"user"}})),
            "aborted"
        );
        assert_eq!(
            end(json!({"kind":"aborted","reason":{"kind":"hook","reason":"why"}})),
            "aborted"
        );
        assert_eq!(end(json!({"kind":"max-tokens"})), "max-tokens");
        assert_eq!(end(json!({"kind":"interrupted"})), "interrupted");
        assert_eq!(end(json!({"kind":"completed"})), "");
        assert_eq!(end(json!({"kind":"blocked"})), "");
        assert_eq!(end(json!({"kind":"something-new","detail":"x"})), "");
        assert_eq!(text_of("turn/end", json!({"turn":1})), "");
    }

    #[test]
    fn everything_else_is_empty() {
        for (kind, data) in [
            ("turn/start", json!({"turn":1})),
            ("step/start", json!({"turn":1,"step":1})),
            ("step/end", json!({"turn":1,"step":1})),
            (
                "assistant/chunk",
                json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}),
            ),
            (
                "request/header",
                json!({"header":{"config":{"provider":"p","model":"m"},"system":"sys"},"reason":"initial"}),
            ),
            (
                "session/title",
                json!({"title":"A title","messageSeqs":[0],"source":{"kind":"user"}}),
            ),
            (
                "agent/inbox/spliced",
                json!({"inserted":[{"content":[{"type":"text","text":"queued"}]}]}),
            ),
            (
                "compaction/summary",
                json!({"summary":[{"type":"text","text":"sum"}]}),
            ),
            ("hook/result", json!({"text":"x"})),
            ("approval/asked", json!({"reason":"x"})),
        ] {
            assert_eq!(text_of(kind, data), "", "{kind}");
        }
    }

    #[test]
    fn malformed_payloads_contribute_nothing() {
        assert_eq!(
            text_of("user/message", json!({"content":"not an array"})),
            ""
        );
        assert_eq!(text_of("user/message", json!(null)), "");
        assert_eq!(
            text_of(
                "user/message",
                json!({"content":[null, 1, {"type":"text","text":7}, {"type":"text","text":"ok"}]})
            ),
            "ok"
        );
        assert_eq!(
            text_of("tool/call", json!({"name":1,"arguments":"{}"})),
            "{}"
        );
        assert_eq!(
            text_of("todo/write", json!({"todos":[{"status":1},"x"]})),
            ""
        );
        assert_eq!(content_text(&json!({"type":"text"})), "");
    }

    #[test]
    fn trimming_is_javascripts() {
        assert_eq!(
            content_text(&json!([{"type":"text","text":"\u{FEFF}a\u{00A0}"}])),
            "a"
        );
        assert_eq!(
            content_text(&json!([{"type":"text","text":"\u{0085}"}])),
            "\u{0085}"
        );
        assert_eq!(content_text(&json!([{"type":"text","text":" \t\r\n"}])), "");
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut block = json!({"type":"text","text":"bottom"});
        for _ in 0..50_000 {
            // Built by hand: `json!` would serialise `block` recursively.
            let mut wrapper = serde_json::Map::new();
            wrapper.insert("type".into(), json!("tool-result"));
            wrapper.insert("content".into(), Value::Array(vec![block]));
            block = Value::Object(wrapper);
        }
        let blocks = Value::Array(vec![block]);
        assert_eq!(content_text(&blocks), "bottom");
        // Dropping a Value this deep recurses in serde_json; leak it rather than crash the test thread.
        std::mem::forget(blocks);
    }

    #[test]
    fn sanitizing_and_lengths() {
        assert!(matches!(
            sanitize_for_index("plain"),
            Cow::Borrowed("plain")
        ));
        assert_eq!(
            sanitize_for_index("a\u{0}b\u{FDD0}c\u{FDD1}d\u{FDD2}"),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FDD2}"
        );
        assert_eq!(codepoint_len("a😀é"), 3);
        assert_eq!(codepoint_len(""), 0);
    }

    #[test]
    fn the_byte_search_for_characters_to_sanitize_agrees_with_decoding() {
        let bad = |t: &str| t.contains(['\u{0000}', '\u{FDD0}', '\u{FDD1}']);
        // Neighbours sharing lead or second bytes, the characters at either end, and lone lead bytes.
        for text in [
            "",
            "plain",
            "\u{0}",
            "x\u{FDD0}",
            "\u{FDD1}y",
            "\u{FDD2}",
            "\u{FDCF}",
            "\u{FDEF}",
            "，。",
            "\u{FFFD}",
            "\u{F000}\u{FD90}",
            "日本語\u{FDD1}",
            "end \u{EFFF}",
            "\u{EB7}",
        ] {
            assert_eq!(has_index_bad(text.as_bytes()), bad(text), "{text:?}");
        }
    }
}
