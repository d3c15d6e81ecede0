//! The citation append flow end to end over the demo corpus, with the deterministic fake services:
//! what is appended and in which order, the cache figure, the error paths (nothing appended, the log
//! byte-identical), and replay after the cited session changes or disappears.

use std::path::{Path, PathBuf};

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::Event;
use dsh_codec::surface::{Label, SurfaceFold};
use host_api::abi::{ErrorCode, PluginError};
use sample_host::chat::mention;
use sample_host::chat::{ChatEnv, ChatSession, Services};
use sample_host::demo;
use sample_host::replay::rebuild_request;
use sample_host::request::SYSTEM_PROMPT;
use sample_host::Shared;
use serde_json::Value;

mod support;
use support::{fixture, Fixture};

impl Fixture {
    fn env(&self) -> ChatEnv<'_> {
        ChatEnv::new(&self.shared, &self.services)
    }
}

fn stored(path: &Path) -> Vec<Event> {
    read_log(
        path,
        &ReadOptions {
            crash_closers: false,
            ..ReadOptions::default()
        },
    )
    .unwrap()
    .events
}

fn ci_mention() -> String {
    mention::format(demo::CI_SESSION, Some("CI failure in parser tests"))
}

#[test]
fn a_citation_appends_the_context_then_the_line_in_one_batch_and_keeps_the_cache() {
    let f = fixture();
    let mut chat = ChatSession::open(f.env(), Some("target")).unwrap();
    let first = chat.send("hello there").unwrap();
    assert!(first.citations.is_empty());
    assert!(first.contrast.is_none());

    let turn = chat
        .send(&format!("what was the stack in {}?", ci_mention()))
        .unwrap();
    // turn/start, step/start, context, readable line: one batch, the two messages on consecutive seqs.
    let kinds: Vec<&str> = turn.user_batch.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["turn/start", "step/start", "user/message", "user/message"]
    );
    let (context, line) = (&turn.user_batch[2], &turn.user_batch[3]);
    assert_eq!(line.seq, context.seq + 1);
    assert!(context.is_append() && line.is_append());
    assert_eq!(context.data["source"]["kind"], "session-reference");
    assert_eq!(line.data["source"]["kind"], "user");
    assert_eq!(
        line.data["content"][0]["text"],
        "what was the stack in @CI failure in parser tests?"
    );
    assert_eq!(
        turn.readable,
        "what was the stack in @CI failure in parser tests?"
    );

    // The whole previous request is a prefix of this one.
    assert_eq!(turn.cache.previous_request_bytes, first.request.bytes.len());
    assert_eq!(
        turn.cache.shared_prefix_bytes,
        turn.cache.previous_request_bytes
    );
    assert!(turn.request.bytes.starts_with(&first.request.bytes));
    // The contrast: inserting the snapshot before the history keeps only the system line; DSH's order
    // keeps the prefix too.
    let contrast = turn.contrast.unwrap();
    let system_line = sample_host::request::ModelRequest::build(SYSTEM_PROMPT, &[], None)
        .bytes
        .len();
    // The system line, and at most the few bytes every canonical user message starts with.
    assert!(contrast.before_history.shared_prefix_bytes >= system_line);
    assert!(
        contrast.before_history.shared_prefix_bytes < system_line + 32,
        "{contrast:?}"
    );
    assert!(turn.cache.previous_request_bytes > system_line + 100);
    assert_eq!(
        contrast.dsh_order.shared_prefix_bytes,
        turn.cache.previous_request_bytes
    );

    // On disk, in that order, and folded as current.
    let path = f.shared.live.log_path("target").unwrap();
    let events = stored(&path);
    assert_eq!(events[context.seq as usize], *context);
    assert_eq!(events[line.seq as usize], *line);
    let fold = SurfaceFold::fold(&events).unwrap();
    assert_eq!(fold.label(context.seq), Some(Label::Current));
    assert_eq!(fold.label(line.seq), Some(Label::Current));

    // The human view is one line per citation.
    assert_eq!(
        turn.citations[0].line().split(',').next().unwrap(),
        "[cited: CI failure in parser tests"
    );
    // The next plain turn keeps the cache too.
    let next = chat.send("thanks").unwrap();
    assert!(next.cache.kept());
}

fn assert_refused_unchanged(f: &Fixture, line: &str, code: ErrorCode) {
    let mut chat = ChatSession::open(f.env(), Some("target")).unwrap();
    let path = f.shared.live.log_path("target").unwrap();
    let before = std::fs::read(&path).unwrap();
    let next = f.shared.live.next_seq("target");
    let err = chat.send(line).unwrap_err();
    assert_eq!(err.code(), code.as_str(), "{err}");
    assert!(!err.message().is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), before, "the log changed");
    assert_eq!(f.shared.live.next_seq("target"), next);
}

#[test]
fn every_refusal_leaves_the_target_log_byte_identical() {
    let f = fixture();
    // A first turn so the log exists on disk.
    ChatSession::open(f.env(), Some("target"))
        .unwrap()
        .send("hello")
        .unwrap();
    assert_refused_unchanged(
        &f,
        "see @[x](dsh-session:not-canonical!)",
        ErrorCode::SessionReferenceInvalidReference,
    );
    assert_refused_unchanged(
        &f,
        &format!("me: {}", mention::format("target", None)),
        ErrorCode::SessionReferenceSelfReference,
    );
    assert_refused_unchanged(
        &f,
        &format!("gone: {}", mention::format("no-such-session", None)),
        ErrorCode::SessionReferenceReadFailed,
    );
    f.services.fail_prepare_with(PluginError::new(
        ErrorCode::SessionReferenceBudgetExceeded,
        "referenced session snapshot cannot fit the configured byte budget",
    ));
    assert_refused_unchanged(
        &f,
        &format!("big: {}", ci_mention()),
        ErrorCode::SessionReferenceBudgetExceeded,
    );
}

#[test]
fn a_plugin_answer_without_content_is_refused_and_nothing_is_appended() {
    struct Broken;
    impl sample_host::chat::Services for Broken {
        fn search_sessions(&self, _: Value) -> Result<Value, PluginError> {
            unreachable_call()
        }
        fn search_events(&self, _: Value) -> Result<Value, PluginError> {
            unreachable_call()
        }
        fn candidates(&self, _: &str, _: &str) -> Result<Vec<Value>, PluginError> {
            Ok(Vec::new())
        }
        fn prepare(&self, _: &str, _: Value, _: Vec<Value>) -> Result<Value, PluginError> {
            Ok(serde_json::json!({"additionalContext": "not an object", "content": []}))
        }
        fn list_sessions(&self) -> Result<Vec<Value>, PluginError> {
            Ok(Vec::new())
        }
        fn plugins_status(&self) -> String {
            String::new()
        }
    }
    fn unreachable_call() -> Result<Value, PluginError> {
        Err(PluginError::new(ErrorCode::PluginUnavailable, "not used"))
    }
    let dir = tempfile::tempdir().unwrap();
    let shared = Shared::new(Some(dir.path().to_path_buf()), false);
    let mut chat = ChatSession::open(ChatEnv::new(&shared, &Broken), Some("t")).unwrap();
    chat.send("first").unwrap();
    let before = std::fs::read(shared.live.log_path("t").unwrap()).unwrap();
    let err = chat.send(&format!("x {}", ci_mention())).unwrap_err();
    assert_eq!(err.code(), "HOST_BAD_PLUGIN_ANSWER");
    assert_eq!(
        std::fs::read(shared.live.log_path("t").unwrap()).unwrap(),
        before
    );
}

/// Cites `source` from `target` and returns the request sent and the target's log path.
fn cite(f: &Fixture, source: &str, label: &str) -> (sample_host::request::ModelRequest, PathBuf) {
    let mut target = ChatSession::open(f.env(), Some("target")).unwrap();
    target.send("before the citation").unwrap();
    let turn = target
        .send(&format!("recall {}", mention::format(source, Some(label))))
        .unwrap();
    // A later turn must not change the replay of this one.
    target.send("after the citation").unwrap();
    (turn.request, f.shared.live.log_path("target").unwrap())
}

#[test]
fn replay_is_byte_identical_after_the_source_is_appended_to_and_compacted() {
    let f = fixture();
    let mut source = ChatSession::open(f.env(), Some("source")).unwrap();
    source.send("the source's first line").unwrap();
    source.send("the source's second line").unwrap();
    let (sent, target_log) = cite(&f, "source", "the source");
    assert!(String::from_utf8_lossy(&sent.bytes).contains("the source's second line"));

    source.send("a later line in the source").unwrap();
    assert_eq!(
        rebuild_request(&target_log, SYSTEM_PROMPT, sent.through_seq).unwrap(),
        sent
    );

    source.compact().unwrap();
    // The source really changed: a fresh citation would now see its checkpoint.
    let fresh = f
        .services
        .prepare(
            "other",
            serde_json::json!([]),
            vec![serde_json::json!({"sessionId": "source"})],
        )
        .unwrap();
    assert!(fresh["additionalContext"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("compacted-summary"));
    assert_eq!(
        rebuild_request(&target_log, SYSTEM_PROMPT, sent.through_seq).unwrap(),
        sent
    );
}

#[test]
fn replay_is_byte_identical_after_the_source_is_deleted() {
    let f = fixture();
    let (sent, target_log) = cite(&f, demo::DOCS_SESSION, "JSON5 plan");
    let docs = dsh_codec::log::layout::SessionsRoot::new(&f.root)
        .find(demo::DOCS_SESSION)
        .unwrap()
        .unwrap();
    std::fs::remove_file(&docs.path).unwrap();
    // The source is gone: citing it again fails ...
    let mut other = ChatSession::open(f.env(), Some("other")).unwrap();
    let err = other
        .send(&mention::format(demo::DOCS_SESSION, None))
        .unwrap_err();
    assert_eq!(err.code(), "SESSION_REFERENCE_READ_FAILED");
    // ... but what the target's model saw is still in the target's log.
    let replayed = rebuild_request(&target_log, SYSTEM_PROMPT, sent.through_seq).unwrap();
    assert_eq!(replayed, sent);
    assert!(String::from_utf8_lossy(&replayed.bytes).contains("JSON5"));
}

#[test]
fn an_existing_session_on_disk_is_continued_not_recreated() {
    let f = fixture();
    let docs = dsh_codec::log::layout::SessionsRoot::new(&f.root)
        .find(demo::DOCS_SESSION)
        .unwrap()
        .unwrap();
    let before = stored(&docs.path).len();
    let mut chat = ChatSession::open_existing(f.env(), demo::DOCS_SESSION).unwrap();
    // The first request is measured against what the surface already held.
    assert_eq!(chat.last_request().messages, 2);
    let turn = chat.send("and the Japanese part?").unwrap();
    assert!(turn.cache.kept());
    assert_eq!(turn.user_batch[0].seq, before as u64);
    assert_eq!(
        stored(&docs.path).len(),
        before + turn.user_batch.len() + turn.reply_batch.len()
    );
    assert!(ChatSession::open_existing(f.env(), "missing").is_err());
}
