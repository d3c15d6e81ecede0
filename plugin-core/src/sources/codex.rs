//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` and
//! `archived_sessions/`) mapped onto DSH events.
//!
//! `response_item`s are the model's history: messages, reasoning, tool calls and their outputs become
//! message events appended to the surface. A `compacted` record replaces the whole surface: with a
//! `replacement_history`, by its first item (the rest appended), else by a compaction checkpoint holding
//! its `message`; so everything before is shadowed. `event_msg` records mirror the conversation for the
//! UI: a mirrored text is kept log-only without text (it is already searchable once), anything else
//! with its text.

use std::collections::HashSet;
use std::path::Path;

use dsh_codec::log::SessionHeader;
use dsh_codec::source::SourceKind;
use serde_json::{json, Value};

use super::build::{image_placeholder, text_block, Builder, MAX_RECORD_TEXT};
use super::lines::{parse_time, str_of, string_leaves, timed, Record};
use super::Imported;

/// Records the header is taken from (the listing reads only these).
pub const HEADER_RECORDS: usize = 8;

/// `event_msg` types that repeat a response item's text.
const MIRRORS: &[&str] = &["user_message", "agent_message", "agent_reasoning"];

/// `event_msg` types that are bookkeeping: log-only, no text.
const STRUCTURAL_EVENTS: &[&str] = &[
    "token_count",
    "context_compacted",
    "task_started",
    "task_complete",
    "turn_started",
    "turn_complete",
];

/// The uuid at the end of a rollout's file name (`rollout-2026-11-30T09-15-02-<uuid>.jsonl`).
pub fn file_uuid(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    let rest = stem.strip_prefix("rollout-")?;
    let uuid = rest.get(rest.len().checked_sub(36)?..)?;
    (uuid.len() == 36 && uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| uuid.to_string())
}

fn meta(records: &[Record]) -> Option<&Value> {
    records[..records.len().min(HEADER_RECORDS)]
        .iter()
        .find(|r| str_of(&r.value, "type") == Some("session_meta"))
        .and_then(|r| r.value.get("payload"))
}

/// The session id of a rollout: its `session_meta` id, else the uuid in its file name.
pub fn session_id(path: &Path, records: &[Record]) -> Option<String> {
    let native = meta(records)
        .and_then(|m| str_of(m, "id"))
        .map(str::to_string)
        .or_else(|| file_uuid(path))?;
    Some(SourceKind::Codex.session_id(&native))
}

/// The DSH header of a rollout from its first records.
pub fn header(id: &str, records: &[Record]) -> SessionHeader {
    let meta = meta(records);
    let first = &records[..records.len().min(HEADER_RECORDS)];
    let created_at = meta
        .and_then(|m| str_of(m, "timestamp"))
        .and_then(parse_time)
        .or_else(|| {
            first
                .iter()
                .find_map(|r| str_of(&r.value, "timestamp").and_then(parse_time))
        })
        .unwrap_or(0);
    let parent = meta
        .and_then(|m| str_of(m, "forked_from_id"))
        .map(|p| SourceKind::Codex.session_id(p));
    SessionHeader {
        version: 0,
        id: id.to_string(),
        created_at,
        cwd: meta.and_then(|m| str_of(m, "cwd")).map(str::to_string),
        parent_session: parent,
        seed_length: None,
        origin: None,
        delegation_depth: Some(0),
        agent_preset: None,
    }
}

/// A message's content items as DSH blocks.
fn blocks(content: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(items)) = content else {
        return match content {
            Some(Value::String(s)) => vec![text_block(s)],
            _ => Vec::new(),
        };
    };
    items
        .iter()
        .filter_map(|b| match str_of(b, "type")? {
            "input_text" | "output_text" | "text" => Some(text_block(str_of(b, "text")?)),
            "input_image" | "image" => Some(image_placeholder(None)),
            _ => str_of(b, "text").map(text_block),
        })
        .collect()
}

/// The text of a tool's output: a string, or `{content}` / `{output}` objects; and whether it failed.
fn output_of(v: Option<&Value>) -> (String, bool) {
    match v {
        Some(Value::String(s)) => (s.clone(), false),
        Some(o @ Value::Object(_)) => {
            let text = str_of(o, "content")
                .or_else(|| str_of(o, "output"))
                .map(str::to_string)
                .unwrap_or_else(|| string_leaves(o, &[], MAX_RECORD_TEXT));
            (text, o.get("success") == Some(&Value::Bool(false)))
        }
        Some(other) => (string_leaves(other, &[], MAX_RECORD_TEXT), false),
        None => (String::new(), false),
    }
}

/// A response item as a DSH message event (kind and data); `None` when it is not part of the model's
/// history as text (an encrypted `compaction`, or a type this build does not know).
fn message_of(item: &Value, fallback_id: &str) -> Option<(&'static str, Value)> {
    let id = str_of(item, "id").unwrap_or(fallback_id);
    let assistant = |content: Vec<Value>| {
        json!({
            "turn": 0,
            "step": 0,
            "message": {
                "id": id,
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "openai", "model": ""},
            },
        })
    };
    let call = |call_id: &str, name: &str, arguments: String| {
        assistant(vec![
            json!({"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}),
        ])
    };
    Some(match str_of(item, "type")? {
        "message" => {
            let content = blocks(item.get("content"));
            match str_of(item, "role") {
                Some("assistant") => ("assistant/message", assistant(content)),
                role => {
                    let injected = role != Some("user")
                        || content.iter().any(|b| {
                            b["text"].as_str().is_some_and(|t| {
                                let t = t.trim_start();
                                t.starts_with("<user_instructions>")
                                    || t.starts_with("<environment_context>")
                            })
                        });
                    let source = if injected {
                        json!({"kind": "plugin", "plugin": "codex"})
                    } else {
                        json!({"kind": "user"})
                    };
                    let data =
                        json!({"id": id, "role": "user", "content": content, "source": source});
                    ("user/message", data)
                }
            }
        }
        "reasoning" => {
            let content = match item.get("summary") {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| str_of(p, "text"))
                    .map(|t| json!({"type": "reasoning", "text": t}))
                    .collect(),
                _ => Vec::new(),
            };
            ("assistant/message", assistant(content))
        }
        "function_call" => (
            "assistant/message",
            call(
                str_of(item, "call_id").unwrap_or_default(),
                str_of(item, "name").unwrap_or_default(),
                str_of(item, "arguments").unwrap_or_default().to_string(),
            ),
        ),
        "custom_tool_call" => (
            "assistant/message",
            call(
                str_of(item, "call_id").unwrap_or_default(),
                str_of(item, "name").unwrap_or_default(),
                str_of(item, "input").unwrap_or_default().to_string(),
            ),
        ),
        "local_shell_call" => (
            "assistant/message",
            call(
                str_of(item, "call_id").unwrap_or(id),
                "local_shell",
                item.get("action").map(Value::to_string).unwrap_or_default(),
            ),
        ),
        "web_search_call" => (
            "assistant/message",
            call(
                id,
                "web_search",
                item.get("action").map(Value::to_string).unwrap_or_default(),
            ),
        ),
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let call_id = str_of(item, "call_id").unwrap_or_default();
            let (text, failed) = output_of(item.get("output"));
            let mut result = json!({
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [text_block(&text)],
            });
            if failed {
                result["isError"] = Value::Bool(true);
            }
            let data = json!({
                "turn": 0,
                "step": 0,
                "message": {
                    "id": id,
                    "role": "user",
                    "content": [result],
                    "source": {"kind": "tool", "callId": call_id},
                },
            });
            ("tool/result", data)
        }
        _ => return None,
    })
}

/// The texts a response item's message carries, each trimmed: what a mirror repeats.
fn message_texts(item: &Value, into: &mut HashSet<String>) {
    let parts: Vec<&str> = match str_of(item, "type") {
        Some("message") => match item.get("content") {
            Some(Value::Array(c)) => c.iter().filter_map(|b| str_of(b, "text")).collect(),
            _ => Vec::new(),
        },
        Some("reasoning") => match item.get("summary") {
            Some(Value::Array(s)) => s.iter().filter_map(|p| str_of(p, "text")).collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    for p in &parts {
        into.insert(p.trim().to_string());
    }
    into.insert(parts.join("\n").trim().to_string());
    into.insert(parts.concat().trim().to_string());
}

/// The text an `event_msg` mirrors.
fn mirrored_text(payload: &Value) -> Option<&str> {
    str_of(payload, "message").or_else(|| str_of(payload, "text"))
}

/// Maps a whole rollout (see the module header and ARCHITECTURE.md for the rule of each record).
pub fn import(id: &str, records: &[Record]) -> Imported {
    let header = header(id, records);
    let mut said: HashSet<String> = HashSet::new();
    for r in records {
        if str_of(&r.value, "type") == Some("response_item") {
            if let Some(p) = r.value.get("payload") {
                message_texts(p, &mut said);
            }
        }
        if str_of(&r.value, "type") == Some("compacted") {
            if let Some(Value::Array(items)) = r.value.pointer("/payload/replacement_history") {
                items.iter().for_each(|i| message_texts(i, &mut said));
            }
        }
    }
    let mut out = Builder::new(SourceKind::Codex);
    for (record, kind, time) in timed(records, header.created_at) {
        let v = &record.value;
        let empty = Value::Null;
        let payload = v.get("payload").unwrap_or(&empty);
        let line_id = format!("line-{}", record.line);
        match kind {
            "response_item" => match message_of(payload, &line_id) {
                Some((event_kind, data)) => {
                    out.append(event_kind, time, data);
                }
                None => {
                    let item_type = str_of(payload, "type");
                    let text = match item_type {
                        Some("compaction") => String::new(),
                        _ => string_leaves(payload, &["type", "id"], MAX_RECORD_TEXT),
                    };
                    out.record(time, kind, item_type, text);
                }
            },
            "compacted" => {
                let marker = out.record(time, kind, None, String::new());
                let history: Vec<(&'static str, Value)> = match payload.get("replacement_history") {
                    Some(Value::Array(items)) => items
                        .iter()
                        .enumerate()
                        .filter_map(|(i, item)| message_of(item, &format!("{line_id}-{i}")))
                        .collect(),
                    _ => Vec::new(),
                };
                if payload
                    .get("replacement_history")
                    .is_some_and(Value::is_array)
                    && !history.is_empty()
                {
                    let mut items = history.into_iter();
                    if let Some((k, data)) = items.next() {
                        out.replace_from(k, time, data, 0, &[marker]);
                    }
                    for (k, data) in items {
                        out.append(k, time, data);
                    }
                } else {
                    let summary = str_of(payload, "message").unwrap_or_default();
                    let data = json!({
                        "id": line_id,
                        "role": "user",
                        "content": [text_block(summary)],
                        "source": {"kind": "plugin", "plugin": "compact"},
                    });
                    out.replace_from("user/message", time, data, 0, &[marker]);
                }
            }
            "event_msg" => {
                let sub = str_of(payload, "type");
                let text = match sub {
                    Some(s) if MIRRORS.contains(&s) => match mirrored_text(payload) {
                        Some(t) if said.contains(t.trim()) => String::new(),
                        _ => string_leaves(payload, &["type"], MAX_RECORD_TEXT),
                    },
                    Some(s) if STRUCTURAL_EVENTS.contains(&s) => String::new(),
                    _ => string_leaves(payload, &["type"], MAX_RECORD_TEXT),
                };
                out.record(time, kind, sub, text);
            }
            "session_meta" | "turn_context" => {
                out.record(time, kind, None, String::new());
            }
            _ => {
                let text = string_leaves(v, &["type", "timestamp"], MAX_RECORD_TEXT);
                out.record(time, kind, None, text);
            }
        }
    }
    Imported {
        header,
        events: out.finish(),
    }
}
