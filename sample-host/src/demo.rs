//! The bundled demo corpus: a few sessions written with `host-api`'s writer, so the default run needs
//! nothing but this binary and the plugin. They exercise what the plugin labels: a compaction that
//! shadows earlier messages, a pruned tool result, a subagent child, titles, raw and zstd logs.

use std::path::Path;

use host_api::log::write::{LogWriter, WriteOptions};
use host_api::log::{Compression, Event, LogError, SessionHeader};
use serde_json::{json, Value};

/// Builds one session's events with consecutive seqs and times.
pub struct Script {
    pub events: Vec<Event>,
    time: i64,
    turn: u64,
    step: u64,
    ids: u64,
    prefix: String,
}

impl Script {
    pub fn new(prefix: &str, start_time: i64) -> Self {
        Self {
            events: Vec::new(),
            time: start_time,
            turn: 0,
            step: 0,
            ids: 0,
            prefix: prefix.to_string(),
        }
    }

    fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    fn push(&mut self, event: Event) -> u64 {
        let seq = event.seq;
        self.events.push(event);
        self.time += 1_000;
        seq
    }

    fn id(&mut self, kind: &str) -> String {
        self.ids += 1;
        format!("{}-{kind}-{}", self.prefix, self.ids)
    }

    fn plain(&mut self, kind: &str, data: Value) -> u64 {
        let e = Event::new(kind, self.next_seq(), self.time, data);
        self.push(e)
    }

    /// `turn/start`, a `request/header` and `step/start`.
    pub fn begin_turn(&mut self) {
        self.turn += 1;
        self.step = 1;
        self.plain("turn/start", json!({"turn": self.turn}));
        self.plain("request/header", json!({"header": {"config": {"provider": "demo", "model": "stand-in"}}, "reason": "initial"}));
        self.plain("step/start", json!({"turn": self.turn, "step": self.step}));
    }

    /// `step/end` and `turn/end` (completed).
    pub fn end_turn(&mut self) {
        self.plain("step/end", json!({"turn": self.turn, "step": self.step}));
        self.plain(
            "turn/end",
            json!({"turn": self.turn, "reason": {"kind": "completed"}}),
        );
    }

    /// A user line (`source.kind: user`), appended.
    pub fn user(&mut self, text: &str) -> u64 {
        let id = self.id("user");
        let data = json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}});
        let e = Event::appended("user/message", self.next_seq(), self.time, data);
        self.push(e)
    }

    /// An assistant message with text, appended.
    pub fn assistant(&mut self, text: &str) -> u64 {
        let id = self.id("assistant");
        let data = json!({"turn": self.turn, "step": self.step, "message": {"id": id, "role": "assistant",
            "content": [{"type": "text", "text": text}], "source": {"kind": "model", "provider": "demo", "model": "stand-in"}}});
        let e = Event::appended("assistant/message", self.next_seq(), self.time, data);
        self.push(e)
    }

    /// An assistant tool call, its `tool/call` record and the tool's result, each appended where it goes.
    pub fn tool(&mut self, name: &str, arguments: &str, output: &str) -> u64 {
        let call_id = self.id("call");
        let id = self.id("assistant");
        let data = json!({"turn": self.turn, "step": self.step, "message": {"id": id, "role": "assistant",
            "content": [{"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}],
            "source": {"kind": "model", "provider": "demo", "model": "stand-in"}}});
        let e = Event::appended("assistant/message", self.next_seq(), self.time, data);
        self.push(e);
        self.plain("tool/call", json!({"turn": self.turn, "step": self.step, "callId": call_id, "name": name, "arguments": arguments}));
        let result_id = self.id("result");
        let data = json!({"turn": self.turn, "step": self.step, "message": {"id": result_id, "role": "user",
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": output}]}],
            "source": {"kind": "tool", "callId": call_id}}});
        let e = Event::appended("tool/result", self.next_seq(), self.time, data);
        self.push(e)
    }

    /// A `session/title`.
    pub fn title(&mut self, title: &str, message_seq: u64) {
        self.plain(
            "session/title",
            json!({"title": title, "messageSeqs": [message_seq], "source": {"kind": "fallback"}}),
        );
    }

    /// A compaction: the surface nodes `start..=end` (surface order) become one checkpoint message.
    pub fn compact(&mut self, start: u64, end: u64, shadowed: &[u64], summary: &str) -> u64 {
        let compaction_id = self.id("compaction");
        let marker = self.plain(
            "compaction/start",
            json!({"compactionId": compaction_id, "turn": null}),
        );
        let summary_seq = self.plain(
            "compaction/summary",
            json!({"compactionId": compaction_id, "summary": [{"type": "text", "text": summary}],
                "shadowedRange": {"start": start, "end": end}, "shadowedSeqs": shadowed, "shadowedTokenCount": 1200,
                "provider": "demo", "model": "stand-in"}),
        );
        let id = self.id("checkpoint");
        let text = format!("This conversation was compacted. Summary of the earlier part:\n<compacted-summary>\n{summary}\n</compacted-summary>");
        let data = json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id}});
        let mut e = Event::new("user/message", self.next_seq(), self.time, data);
        let mut sources = vec![marker, summary_seq];
        sources.extend_from_slice(shadowed);
        e.source_event_seqs = Some(json!(sources));
        e.surface_op = Some(json!({"op": "replace", "start": start, "end": end}));
        let seq = self.push(e);
        self.plain(
            "compaction/end",
            json!({"compactionId": compaction_id, "turn": null}),
        );
        seq
    }

    /// The tool-result pruner: `compaction/prune`, then a content-only rewrite of the result at `target`.
    pub fn prune(&mut self, target: u64, replacement_text: &str) -> u64 {
        let Some(original) = self.events.iter().find(|e| e.seq == target).cloned() else {
            return target;
        };
        let prune = self.plain("compaction/prune", json!({"shadowedRange": {"start": target, "end": target}, "shadowedSeqs": [target], "shadowedTokenCount": 300}));
        let mut data = original.data.clone();
        data["message"]["content"][0]["content"] =
            json!([{"type": "text", "text": replacement_text}]);
        let mut e = Event::new("tool/result", self.next_seq(), self.time, data);
        e.source_event_seqs = Some(json!([prune, target]));
        e.surface_op = Some(json!({"op": "replace", "start": target, "end": target}));
        self.push(e)
    }
}

/// The demo's project folder, recorded as every demo session's cwd.
pub const DEMO_CWD: &str = "/home/demo/projects/parser";
/// Ids of the demo sessions.
pub const CI_SESSION: &str = "demo-ci-fix";
pub const CHILD_SESSION: &str = "demo-ci-fix-child";
pub const DOCS_SESSION: &str = "demo-docs";

fn write(
    root: &Path,
    header: SessionHeader,
    compression: Compression,
    events: &[Event],
) -> Result<(), LogError> {
    let mut writer = LogWriter::create(
        root,
        header,
        WriteOptions {
            compression,
            ..WriteOptions::default()
        },
    )?;
    // Two batches, as a real host would append: the first turn, then the rest.
    let split = events
        .iter()
        .position(|e| e.kind == "turn/end")
        .map(|i| i + 1)
        .unwrap_or(events.len());
    if split > 0 {
        writer.append(&events[..split])?;
    }
    if split < events.len() {
        writer.append(&events[split..])?;
    }
    Ok(())
}

/// Writes the demo sessions under `root` (which should be empty). Returns their ids.
pub fn write_demo_corpus(root: &Path) -> Result<Vec<String>, LogError> {
    let base = 1_785_000_000_000;

    let mut ci = Script::new("ci", base);
    ci.begin_turn();
    let ask = ci.user(
        "CI fails on main: `cargo test` panics in parser::tests::nested_arrays. What is the stack?",
    );
    ci.title("CI failure in parser tests", ask);
    let run = ci.tool(
        "bash",
        r#"{"command":"cargo test -p parser nested_arrays"}"#,
        "thread 'parser::tests::nested_arrays' panicked at src/parser.rs:212:9:\nindex out of bounds: the len is 3 but the index is 3\nstack backtrace:\n   0: parser::Parser::close_array\n   1: parser::Parser::parse_value",
    );
    let answer = ci.assistant("The panic is an off-by-one in `Parser::close_array` (src/parser.rs:212): it reads `stack[depth]` after popping. Use `depth - 1`.");
    ci.end_turn();
    ci.begin_turn();
    ci.user("Fixed it with depth - 1, tests pass now. Thanks!");
    ci.assistant("Great. Consider a regression test named after the bug: `close_array_reads_past_stack_top`.");
    ci.end_turn();
    ci.compact(ask, answer, &[ask, run - 2, run, answer], "User hit an index-out-of-bounds panic in Parser::close_array (src/parser.rs:212) during `cargo test`; the fix is to read stack[depth - 1].");
    let mut header = SessionHeader::new(CI_SESSION, base, Some(DEMO_CWD.to_string()));
    header.agent_preset = Some("default".into());
    write(root, header, Compression::Zstd, &ci.events)?;

    let mut child = Script::new("child", base + 60_000);
    child.begin_turn();
    child.user("Write a regression test for the close_array off-by-one.");
    let result = child.tool(
        "write_file",
        r#"{"path":"tests/close_array.rs"}"#,
        &"fn close_array_reads_past_stack_top() { /* … */ }\n".repeat(40),
    );
    child.prune(result, "[pruned: 40 lines written to tests/close_array.rs]");
    child.assistant("Added tests/close_array.rs with `close_array_reads_past_stack_top`.");
    child.end_turn();
    let mut header = SessionHeader::new(CHILD_SESSION, base + 60_000, Some(DEMO_CWD.to_string()));
    header.parent_session = Some(CI_SESSION.to_string());
    header.origin = Some("subagent".into());
    header.delegation_depth = Some(1);
    write(root, header, Compression::None, &child.events)?;

    let mut docs = Script::new("docs", base + 3_600_000);
    docs.begin_turn();
    let q =
        docs.user("Summarise the JSON5 support plan for the README. 日本語の説明も少し欲しい。");
    docs.title("JSON5 plan for the README", q);
    docs.assistant("Plan: accept comments and trailing commas behind a `json5` feature; keep strict JSON the default.");
    docs.end_turn();
    write(
        root,
        SessionHeader::new(
            DOCS_SESSION,
            base + 3_600_000,
            Some("/home/demo/projects/docs".to_string()),
        ),
        Compression::None,
        &docs.events,
    )?;

    Ok(vec![
        CI_SESSION.into(),
        CHILD_SESSION.into(),
        DOCS_SESSION.into(),
    ])
}
