//! Claude Code transcripts (`~/.claude/projects/<encoded cwd>/<uuid>.jsonl`, subagents under
//! `<uuid>/subagents/agent-<id>.jsonl`) mapped onto DSH events.
//!
//! The conversation is a tree (`uuid` / `parentUuid`); what the model sees is the path from the root to
//! the newest node. Records are emitted in file order; a message on that path takes the place (a spec
//! §2 `replace`) of every message after its parent that is not on it, so a branch a rewind abandoned and
//! everything before a compaction (whose `compact_boundary` starts a new root) end up shadowed, and the
//! path current. Streamed blocks of one reply (one `message.id`) are one `assistant/message`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use dsh_codec::log::SessionHeader;
use dsh_codec::source::SourceKind;
use serde_json::{json, Value};

use super::build::{image_placeholder, text_block, Builder, MAX_RECORD_TEXT};
use super::lines::{parse_time, str_of, string_leaves, timed, Record};
use super::Imported;

/// Records the header is taken from (the listing reads only these).
pub const HEADER_RECORDS: usize = 16;

/// Envelope keys, left out of an unknown record's text.
const ENVELOPE: &[&str] = &[
    "type",
    "uuid",
    "parentUuid",
    "logicalParentUuid",
    "sessionId",
    "timestamp",
    "version",
    "cwd",
    "gitBranch",
    "isSidechain",
    "userType",
    "agentId",
    "requestId",
    "isMeta",
];

/// Record types that are the harness's bookkeeping: log-only, no text.
const STRUCTURAL: &[&str] = &["file-history-snapshot", "queue-operation"];

/// Where a transcript sits: the session id it gets and, for a subagent, its parent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub id: String,
    pub parent: Option<String>,
}

/// The ids of the transcript at `path` under the projects folder: `claude:<uuid>` for
/// `<project>/<uuid>.jsonl`, `claude:<uuid>/agent-<id>` (parent `claude:<uuid>`) for
/// `<project>/<uuid>/subagents/agent-<id>.jsonl`; `None` for any other file.
pub fn placement(projects: &Path, path: &Path) -> Option<Placement> {
    let rel = path.strip_prefix(projects).ok()?;
    let parts: Vec<&str> = rel.iter().map(|p| p.to_str()).collect::<Option<_>>()?;
    match parts.as_slice() {
        [_project, file] => {
            let uuid = file.strip_suffix(".jsonl")?;
            (!uuid.is_empty()).then(|| Placement {
                id: SourceKind::Claude.session_id(uuid),
                parent: None,
            })
        }
        [_project, uuid, "subagents", file] if file.starts_with("agent-") => {
            let agent = file.strip_suffix(".jsonl")?;
            Some(Placement {
                id: SourceKind::Claude.session_id(&format!("{uuid}/{agent}")),
                parent: Some(SourceKind::Claude.session_id(uuid)),
            })
        }
        _ => None,
    }
}

/// The DSH header of a transcript from its first records: the first timestamp and cwd.
pub fn header(place: &Placement, records: &[Record]) -> SessionHeader {
    let first = &records[..records.len().min(HEADER_RECORDS)];
    let created_at = first
        .iter()
        .find_map(|r| {
            r.value
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(parse_time)
        })
        .unwrap_or(0);
    let cwd = first
        .iter()
        .find_map(|r| r.value.get("cwd").and_then(Value::as_str))
        .map(str::to_string);
    SessionHeader {
        version: 0,
        id: place.id.clone(),
        created_at,
        cwd,
        parent_session: place.parent.clone(),
        seed_length: None,
        origin: place.parent.as_ref().map(|_| "subagent".to_string()),
        delegation_depth: Some(u64::from(place.parent.is_some())),
        agent_preset: None,
    }
}

/// Whether a record is a node of the conversation tree. A sidechain record in a main transcript is a
/// subagent's (older releases wrote them inline): never in the main model's context.
fn is_node(v: &Value, subagent: bool) -> bool {
    matches!(str_of(v, "type"), Some("user" | "assistant" | "system"))
        && str_of(v, "uuid").is_some()
        && (subagent || v.get("isSidechain") != Some(&Value::Bool(true)))
}

/// The uuids on the path from the newest node back to its root.
fn active_path(records: &[Record], subagent: bool) -> HashSet<&str> {
    let mut parent: HashMap<&str, Option<&str>> = HashMap::new();
    let mut newest = None;
    for r in records.iter().filter(|r| is_node(&r.value, subagent)) {
        let uuid = str_of(&r.value, "uuid").unwrap_or_default();
        parent.insert(uuid, str_of(&r.value, "parentUuid"));
        newest = Some(uuid);
    }
    let mut path = HashSet::new();
    let mut at = newest;
    while let Some(uuid) = at {
        if !path.insert(uuid) {
            break; // a cycle: the file is odd, the path is what was walked
        }
        at = parent.get(uuid).copied().flatten();
    }
    path
}

/// Claude content (a string or blocks) as DSH content blocks.
fn blocks(content: Option<&Value>) -> Vec<Value> {
    match content {
        Some(Value::String(s)) => vec![text_block(s)],
        Some(Value::Array(items)) => items.iter().filter_map(block).collect(),
        _ => Vec::new(),
    }
}

fn block(b: &Value) -> Option<Value> {
    Some(match str_of(b, "type")? {
        "text" => text_block(str_of(b, "text").unwrap_or_default()),
        "thinking" => {
            json!({"type": "reasoning", "text": str_of(b, "thinking").unwrap_or_default()})
        }
        "redacted_thinking" => json!({"type": "reasoning", "text": ""}),
        "tool_use" | "server_tool_use" => json!({
            "type": "tool-call",
            "id": str_of(b, "id").unwrap_or_default(),
            "name": str_of(b, "name").unwrap_or_default(),
            "arguments": b.get("input").map(Value::to_string).unwrap_or_default(),
        }),
        "tool_result" => {
            let mut out = json!({
                "type": "tool-result",
                "toolCallId": str_of(b, "tool_use_id").unwrap_or_default(),
                "content": blocks(b.get("content")),
            });
            if b.get("is_error") == Some(&Value::Bool(true)) {
                out["isError"] = Value::Bool(true);
            }
            out
        }
        "image" => image_placeholder(b.get("source").and_then(|s| str_of(s, "media_type"))),
        "document" => text_block("[document]"),
        _ => text_block(str_of(b, "text")?),
    })
}

/// Maps a whole transcript (see the module header and ARCHITECTURE.md for the rule of each record).
pub fn import(place: &Placement, records: &[Record]) -> Imported {
    let header = header(place, records);
    let subagent = place.parent.is_some();
    let path = active_path(records, subagent);
    let mut out = Builder::new(SourceKind::Claude);
    // Surface nodes on the path come first; whatever follows them is off it (waiting to be replaced).
    let mut on_path_len = 0usize;
    // Compaction boundaries not yet cited by the message that follows them.
    let mut boundaries: Vec<u64> = Vec::new();
    for (record, kind, time) in timed(records, header.created_at) {
        let v = &record.value;
        let uuid = str_of(v, "uuid").unwrap_or("");
        let node = is_node(v, subagent);
        let on_path = node && path.contains(uuid);
        let message = v.get("message");
        match kind {
            "user" | "assistant" if node => {
                let content = blocks(message.and_then(|m| m.get("content")));
                let (event_kind, data) = if kind == "assistant" {
                    let mid = message.and_then(|m| str_of(m, "id")).unwrap_or(uuid);
                    if let Some(last) = out.last_assistant() {
                        let same = last.data["message"]["id"].as_str() == Some(mid);
                        if let (true, Some(Value::Array(have))) =
                            (same, last.data["message"].get_mut("content"))
                        {
                            have.extend(content);
                            continue;
                        }
                    }
                    let model = message.and_then(|m| str_of(m, "model")).unwrap_or("");
                    let mut data = json!({
                        "turn": 0,
                        "step": 0,
                        "message": {
                            "id": mid,
                            "role": "assistant",
                            "content": content,
                            "source": {"kind": "model", "provider": "anthropic", "model": model},
                        },
                    });
                    if let Some(usage) = message.and_then(|m| m.get("usage")) {
                        data["usage"] = usage.clone();
                    }
                    ("assistant/message", data)
                } else if content.iter().any(|b| b["type"] == "tool-result") {
                    let call = content
                        .iter()
                        .find_map(|b| b["toolCallId"].as_str())
                        .unwrap_or_default()
                        .to_string();
                    let data = json!({
                        "turn": 0,
                        "step": 0,
                        "message": {
                            "id": uuid,
                            "role": "user",
                            "content": content,
                            "source": {"kind": "tool", "callId": call},
                        },
                    });
                    ("tool/result", data)
                } else {
                    let source = if v.get("isCompactSummary") == Some(&Value::Bool(true)) {
                        json!({"kind": "plugin", "plugin": "compact"})
                    } else if v.get("isMeta") == Some(&Value::Bool(true)) {
                        json!({"kind": "plugin", "plugin": "claude-code"})
                    } else {
                        json!({"kind": "user"})
                    };
                    let data =
                        json!({"id": uuid, "role": "user", "content": content, "source": source});
                    ("user/message", data)
                };
                if on_path {
                    out.replace_from(event_kind, time, data, on_path_len, &boundaries);
                    boundaries.clear();
                    on_path_len = out.surface_len();
                } else {
                    out.append(event_kind, time, data);
                }
            }
            "system" => {
                let subtype = str_of(v, "subtype");
                let text = match subtype {
                    Some("compact_boundary") => String::new(),
                    _ => str_of(v, "content").unwrap_or_default().to_string(),
                };
                let seq = out.record(time, kind, subtype, text);
                if subtype == Some("compact_boundary") {
                    boundaries.push(seq);
                }
            }
            "summary" => {
                match str_of(v, "summary") {
                    Some(summary) => out.title(time, summary),
                    None => out.record(time, kind, None, String::new()),
                };
            }
            _ if STRUCTURAL.contains(&kind) => {
                out.record(time, kind, None, String::new());
            }
            _ => {
                // A sidechain message inside a main transcript, or a type this build does not know:
                // kept as log text.
                let text = match message {
                    Some(m) => string_leaves(m.get("content").unwrap_or(m), &[], MAX_RECORD_TEXT),
                    None => string_leaves(v, ENVELOPE, MAX_RECORD_TEXT),
                };
                out.record(time, kind, None, text);
            }
        }
    }
    Imported {
        header,
        events: out.finish(),
    }
}
