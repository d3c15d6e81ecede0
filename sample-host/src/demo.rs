//! The `demo` command: the bundled demo corpus and a scripted tour of it.
//!
//! The corpus is a few sessions written with `host-api`'s writer, so the default run needs nothing but
//! this binary and the plugin. They exercise what the plugin labels: a compaction that shadows earlier
//! messages, a pruned tool result, a subagent child, titles, raw and zstd logs. The tour ([`tour`])
//! runs on a fresh copy in a temporary sessions root: search with all three labels, a chat that cites
//! two sessions, the cache figure, the three ledgers, and a replay after the cited sessions changed.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::{Compression, Event, LogError, SessionHeader};
use serde_json::json;

use crate::chat::mention;
use crate::chat::model::Model;
use crate::chat::repl::show_cache_figures;
use crate::chat::session::{ChatEnv, ChatSession, Turn};
use crate::chat::transcript::human_bytes;
use crate::replay::rebuild_request;
use crate::request::SYSTEM_PROMPT;

pub use dsh_codec::build::Script;

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

/// A fresh demo corpus in a temporary sessions root, removed when this is dropped.
pub struct DemoCorpus {
    dir: tempfile::TempDir,
    pub ids: Vec<String>,
}

impl DemoCorpus {
    /// Writes the corpus into a new temporary directory.
    pub fn create() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("dsh-session-search-demo-")
            .tempdir()?;
        let ids = write_demo_corpus(&dir.path().join("sessions")).map_err(io::Error::other)?;
        Ok(Self { dir, ids })
    }

    /// The sessions root to start the host on.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("sessions")
    }

    /// Where the demo's host should keep its index: beside the corpus, so it goes with it.
    pub fn index_path(&self) -> PathBuf {
        self.dir.path().join("index.sqlite")
    }
}

/// The id of the chat session the tour creates.
pub const TOUR_SESSION: &str = "demo-chat";

fn section(out: &mut dyn Write, n: u32, title: &str) -> io::Result<()> {
    writeln!(out, "\n== {n}. {title} ==")
}

fn clip(s: &str, max: usize) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() <= max {
        return s;
    }
    let mut c: String = s.chars().take(max).collect();
    c.push('…');
    c
}

/// With a real engine: its own figures for the citation as the host appended it, and for the same
/// snapshot put before the earlier history (sent once more, for one token, after the chat's turns, so
/// the chat itself is measured undisturbed; against the engine's cache the alternative shares the same
/// leading messages with the chat's later requests as with the one before the citation).
fn engine_contrast(
    client: &crate::openai::OpenAiClient,
    opening: Option<&Turn>,
    cited: &Turn,
    out: &mut dyn Write,
) -> io::Result<()> {
    let n = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    writeln!(out, "The engine's own figures:")?;
    // The previous request as the engine holds it: its prompt and its reply (llama.cpp runs all but
    // the reply's last sampled token through the model, so that one is never in its cache).
    let previous = opening
        .and_then(|t| t.engine)
        .and_then(|p| Some(p.prompt_tokens? + p.completion_tokens?));
    let verdict = |cached: Option<u64>| {
        match (cached, previous) {
        (Some(c), Some(p)) if c + 1 >= p => format!("the whole previous request ({p} tokens) was reused"),
        (Some(c), Some(p)) => format!(
            "the previous request ({p} tokens) was not reused: {} of its tokens were evaluated again",
            p.saturating_sub(c + 1)
        ),
        _ => "the server did not say enough to compare".to_string(),
    }
    };
    if let Some(e) = &cited.engine {
        writeln!(
            out,
            "  the citation appended before the line: {} of {} prompt tokens from its cache; {}",
            n(e.cached_tokens),
            n(e.prompt_tokens),
            verdict(e.cached_tokens)
        )?;
    }
    // The request as chat messages: the system prompt, the earlier history, the context, the line.
    let mut moved = cited.chat.clone();
    if moved.len() >= 3 {
        let context = moved.remove(moved.len() - 2);
        moved.insert(1, context);
    }
    match client.complete(&moved, Some(1), &mut |_| {}) {
        Ok(done) => match done.engine {
            Some(e) => writeln!(
                out,
                "  the same snapshot put before the earlier history: {} of {} prompt tokens from its cache; {}",
                n(e.cached_tokens),
                n(e.prompt_tokens),
                verdict(e.cached_tokens)
            )?,
            None => writeln!(
                out,
                "  the same snapshot put before the earlier history: the server reported no usage"
            )?,
        },
        Err(e) => writeln!(out, "  the alternative order could not be measured: error {}: {e}", e.code())?,
    }
    Ok(())
}

/// The tour over a host started on `root` (a [`DemoCorpus`]). Returns the exit code: 0 when every step
/// showed what it should, 1 when one failed (the step says why).
pub fn tour(env: ChatEnv<'_>, root: &Path, out: &mut dyn Write) -> i32 {
    match tour_steps(env, root, out) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            let _ = writeln!(out, "demo stopped: {e}");
            1
        }
    }
}

fn tour_steps(env: ChatEnv<'_>, root: &Path, out: &mut dyn Write) -> io::Result<bool> {
    let services = env.services;
    section(out, 1, "the corpus")?;
    writeln!(out, "plugin: {}", services.plugins_status().trim_end())?;
    writeln!(out, "sessions root: {}", root.display())?;
    match services.list_sessions() {
        Ok(records) => {
            for r in records {
                let h = &r["header"];
                writeln!(
                    out,
                    "  {:<20} cwd {}",
                    h["id"].as_str().unwrap_or("?"),
                    h["cwd"].as_str().unwrap_or("-")
                )?;
            }
        }
        Err(e) => writeln!(out, "  error {e}")?,
    }

    section(out, 2, "search: every event, whatever the model still sees")?;
    writeln!(
        out,
        "Labels: current = on the model's surface; shadowed = compacted away, still in the log;\n\
log-only = never a message (tool calls, turn markers). All three are searchable."
    )?;
    let style = crate::present::Style::detect(crate::present::ColorChoice::Never);
    writeln!(
        out,
        "$ sample-host search parser    (every session; the best hit of each)"
    )?;
    writeln!(out, "{}", crate::commands::search::RANK_ORDER)?;
    match services.search_sessions(json!({"query": "parser", "limit": 10})) {
        Ok(page) => write!(
            out,
            "{}",
            crate::commands::search::render_hits(
                &page,
                host_api::abi::client::QueryMethod::SearchSessions,
                "parser",
                &style
            )
        )?,
        Err(e) => writeln!(out, "  error {e}")?,
    }
    writeln!(
        out,
        "$ sample-host search parser --session {CI_SESSION}    (every hit inside it, compacted earlier)"
    )?;
    match services.search_events(json!({"sessionId": CI_SESSION, "query": "parser", "limit": 50})) {
        Ok(page) => write!(
            out,
            "{}",
            crate::commands::search::render_hits(
                &page,
                host_api::abi::client::QueryMethod::SearchEvents,
                "parser",
                &style
            )
        )?,
        Err(e) => writeln!(out, "  error {e}")?,
    }

    section(out, 3, "a chat that cites two sessions")?;
    let mut chat = match ChatSession::open(env, Some(TOUR_SESSION)) {
        Ok(chat) => chat,
        Err(e) => {
            writeln!(
                out,
                "cannot start the chat: error {}: {}",
                e.code(),
                e.message()
            )?;
            return Ok(false);
        }
    };
    let say =
        |chat: &mut ChatSession<'_>, line: &str, out: &mut dyn Write| -> io::Result<Option<Turn>> {
            writeln!(out, "you> {line}")?;
            match chat.send(line) {
                Ok(turn) => {
                    for c in &turn.citations {
                        writeln!(out, "{}", c.line())?;
                    }
                    writeln!(out, "assistant> {}", turn.reply)?;
                    show_cache_figures(&turn, out)?;
                    Ok(Some(turn))
                }
                Err(e) => {
                    writeln!(out, "error {}: {}", e.code(), e.message())?;
                    Ok(None)
                }
            }
        };
    let opening = say(
        &mut chat,
        "I'm back on the parser. Which sessions can I cite?",
        out,
    )?;
    writeln!(out, "candidates (what a mention picker offers):")?;
    let mut mentions = Vec::new();
    match services.candidates(TOUR_SESSION, "") {
        Ok(list) => {
            for c in &list {
                writeln!(
                    out,
                    "  {:<30} {}",
                    c["label"].as_str().unwrap_or("?"),
                    c["mention"].as_str().unwrap_or("")
                )?;
            }
            for id in [CI_SESSION, DOCS_SESSION] {
                let found = list.iter().find(|c| c["sessionId"] == id);
                mentions.push(
                    found
                        .and_then(|c| c["mention"].as_str().map(str::to_string))
                        .unwrap_or_else(|| mention::format(id, None)),
                );
            }
        }
        Err(e) => {
            writeln!(out, "  error {e}")?;
            mentions = vec![
                mention::format(CI_SESSION, None),
                mention::format(DOCS_SESSION, None),
            ];
        }
    }
    let line = format!(
        "What was the stack in {}, and does {} change the parser?",
        mentions[0], mentions[1]
    );
    let Some(cited) = say(&mut chat, &line, out)? else {
        return Ok(false);
    };
    writeln!(
        out,
        "    (the transcript shows the line as: {})",
        cited.readable
    )?;
    if let Some(c) = &cited.contrast {
        writeln!(
            out,
            "The host appended the context message and then the line, after all earlier history: the whole\n\
previous request ({} bytes) is a prefix of this one ({} bytes), so a provider's prompt cache is kept.\n\
Had the snapshot gone before the earlier history, only {} would have been shared; DSH's own order\n\
(the line first, then the context) shares {} as well — only the suffix differs.",
            cited.cache.previous_request_bytes,
            cited.cache.request_bytes,
            human_bytes(c.before_history.shared_prefix_bytes as u64),
            human_bytes(c.dsh_order.shared_prefix_bytes as u64),
        )?;
    }
    say(&mut chat, "Thanks, that's what I needed.", out)?;
    if let Model::OpenAi(client) = env.model {
        engine_contrast(client, opening.as_ref(), &cited, out)?;
    }

    section(out, 4, "one fact, three ledgers")?;
    writeln!(out, "human transcript: you> {}", cited.readable)?;
    for c in &cited.citations {
        writeln!(out, "                  {}", c.line())?;
    }
    writeln!(
        out,
        "model request, its last two messages (what the model saw):"
    )?;
    let text = String::from_utf8_lossy(&cited.request.bytes).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().skip(lines.len().saturating_sub(2)) {
        writeln!(out, "  {}", clip(line, 150))?;
    }
    match services.search_events(
        json!({"sessionId": TOUR_SESSION, "query": "referenced sessions", "limit": 5}),
    ) {
        Ok(page) => {
            let hits = page["items"].as_array().map_or(0, Vec::len);
            writeln!(
                out,
                "search: the context message is itself searchable in {TOUR_SESSION} ({} for \"referenced sessions\")",
                crate::present::plural(hits as u64, "hit", "hits")
            )?;
        }
        Err(e) => writeln!(out, "search: error {e}")?,
    }

    section(out, 5, "replay: citations are snapshots, not live links")?;
    let Some(target_log) = env.live.log_path(TOUR_SESSION) else {
        writeln!(out, "the chat session is not persisted; nothing to replay")?;
        return Ok(false);
    };
    match ChatSession::open_existing(env, CI_SESSION) {
        Ok(mut source) => {
            let grew = source.send("One more note: the regression test landed.");
            let compacted = source.compact();
            writeln!(
                out,
                "{CI_SESSION} grew ({}) and was compacted again ({}).",
                if grew.is_ok() { "a new turn" } else { "failed" },
                match &compacted {
                    Ok(c) => format!("{} surface messages became {}", c.before, c.after),
                    Err(e) => format!("error {}", e.code()),
                }
            )?;
        }
        Err(e) => writeln!(out, "could not continue {CI_SESSION}: error {}", e.code())?,
    }
    if let Ok(Some(docs)) = dsh_codec::log::layout::SessionsRoot::new(root).find(DOCS_SESSION) {
        std::fs::remove_file(&docs.path)?;
        writeln!(out, "{DOCS_SESSION} was deleted ({}).", docs.path.display())?;
    }
    match rebuild_request(&target_log, SYSTEM_PROMPT, cited.request.through_seq) {
        Ok(replayed) => {
            let same = replayed.bytes == cited.request.bytes;
            writeln!(
                out,
                "Rebuilt from {}'s log alone: {} bytes, fingerprint {} — {} the request sent ({}).",
                TOUR_SESSION,
                replayed.bytes.len(),
                replayed.fingerprint(),
                if same {
                    "identical to"
                } else {
                    "DIFFERENT from"
                },
                cited.request.fingerprint()
            )?;
            if !same {
                return Ok(false);
            }
        }
        Err(e) => {
            writeln!(out, "replay failed: {e}")?;
            return Ok(false);
        }
    }
    writeln!(
        out,
        "\nNext: `sample-host chat` for your own sessions (/help lists the commands)."
    )?;
    Ok(true)
}
