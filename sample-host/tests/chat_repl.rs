//! The chat REPL driven by a script of lines (as a pipe on standard input would feed it), over the demo
//! corpus with the deterministic fake services: slash commands, `/cite` picking a hit, the three
//! ledgers kept apart, `/compact` shadowing for real, and the `cite` / `candidates` entry points.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::surface::{Label, SurfaceFold};
use sample_host::chat::commands::{self, CiteOptions};
use sample_host::chat::fake::FakeServices;
use sample_host::chat::mention;
use sample_host::chat::repl::{run_with, ChatOptions, ScriptedLines};
use sample_host::chat::ChatEnv;
use sample_host::demo;
use sample_host::Shared;
use serde_json::Value;

struct Fixture {
    _dir: tempfile::TempDir,
    shared: Arc<Shared>,
    services: FakeServices,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().join("sessions");
    demo::write_demo_corpus(&root).unwrap();
    let shared = Shared::new(Some(root), false);
    let services = FakeServices::new(shared.clone());
    Fixture {
        _dir: dir,
        shared,
        services,
    }
}

fn chat(f: &Fixture, session: &str, script: &str) -> (i32, String) {
    let mut out = Vec::new();
    let mut lines = ScriptedLines::new(script.as_bytes());
    let code = run_with(
        ChatEnv::new(&f.shared, &f.services),
        &ChatOptions {
            session: Some(session.to_string()),
            ..ChatOptions::default()
        },
        &mut lines,
        &mut out,
    );
    (code, String::from_utf8(out).unwrap())
}

#[test]
fn a_scripted_chat_cites_by_search_and_shows_each_ledger_in_its_place() {
    let f = fixture();
    let script = "hello\n/cite parser\n1\nwhat was the stack?\n/request\n/find demo-ci-fix parser\n/quit\nnever read\n";
    let (code, out) = chat(&f, "t", script);
    assert_eq!(code, 0, "{out}");
    // /cite searched, the pick became the next line's mention.
    assert!(out.contains("  1. demo-ci-fix"), "{out}");
    assert!(
        out.contains("the next line starts with @[CI failure in parser tests](dsh-session:"),
        "{out}"
    );
    // The human view: one line for the citation, the readable text with @label, never the snapshot.
    assert!(
        out.contains("[cited: CI failure in parser tests, "),
        "{out}"
    );
    assert!(
        out.contains(
            "(as the transcript shows it: @CI failure in parser tests what was the stack?)"
        ),
        "{out}"
    );
    let human: String = out.split("last model request").next().unwrap().to_string();
    assert!(!human.contains("referenced-sessions"), "{human}");
    assert!(!human.contains("\"conversation\""), "{human}");
    // The cache figure after the citation: kept.
    assert!(out.contains("cache kept"), "{out}");
    assert!(
        out.contains("had the snapshot gone before the earlier history"),
        "{out}"
    );
    // The model's view shows the framed snapshot.
    let model: String = out.split("last model request").nth(1).unwrap().to_string();
    assert!(model.contains("<referenced-sessions>"), "{model}");
    assert!(model.contains("session-reference"), "{model}");
    // Search shows all three labels.
    for label in ["current", "shadowed", "log-only"] {
        assert!(
            out.contains(&format!(" {label} ")),
            "no {label} hit in {out}"
        );
    }
    // Nothing after /quit ran.
    assert!(!out.contains("never read"));
}

#[test]
fn every_slash_command_answers_and_errors_are_shown_not_fatal() {
    let f = fixture();
    let script =
        "/help\n/sessions\n/plugins\n/candidates json5\n/search\n/search zzzz-nothing\n/bogus\n\
see @[x](dsh-session:bad!)\n/cite parser\nnot a number\n/compact\n";
    let (code, out) = chat(&f, "t2", script);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("/compact"), "help: {out}");
    assert!(
        out.contains("demo-docs") && out.contains("disk"),
        "sessions: {out}"
    );
    assert!(out.contains("in-process fake services"), "plugins: {out}");
    assert!(
        out.contains("JSON5 plan for the README"),
        "candidates: {out}"
    );
    assert!(out.contains("usage: /search QUERY"), "{out}");
    assert!(out.contains("no session matches"), "{out}");
    assert!(out.contains("unknown command /bogus"), "{out}");
    assert!(
        out.contains("error SESSION_REFERENCE_INVALID_REFERENCE: invalid session reference URI"),
        "{out}"
    );
    assert!(out.contains("no hit numbered \"not a number\""), "{out}");
    // Nothing on the surface yet: compaction refuses.
    assert!(out.contains("error HOST_NOTHING_TO_COMPACT"), "{out}");
    // The malformed mention appended nothing.
    assert_eq!(f.shared.live.next_seq("t2"), Some(0));
}

#[test]
fn compact_shadows_the_earlier_messages_in_the_log() {
    let f = fixture();
    let (code, out) = chat(&f, "t3", "one\ntwo\nthree\n/compact\nfour\n");
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("compacted: 6 messages on the surface became 3"),
        "{out}"
    );
    // The turn after a compaction cannot reuse the old prefix.
    assert!(
        out.lines().filter(|l| l.contains("cache rebuilt")).count() >= 1,
        "{out}"
    );
    let path = f.shared.live.log_path("t3").unwrap();
    let log = read_log(&path, &ReadOptions::default()).unwrap();
    let fold = SurfaceFold::fold(&log.events).unwrap();
    let checkpoint = log
        .events
        .iter()
        .find(|e| e.data["source"]["plugin"] == "compact")
        .unwrap();
    assert_eq!(fold.label(checkpoint.seq), Some(Label::Current));
    let first_user = log
        .events
        .iter()
        .find(|e| e.kind == "user/message")
        .unwrap();
    assert_eq!(fold.label(first_user.seq), Some(Label::Shadowed));
    assert_eq!(checkpoint.surface_op.as_ref().unwrap()["op"], "replace");
}

#[test]
fn a_session_that_cannot_be_opened_is_exit_status_1() {
    // A sessions root that is a file: the session can be neither found nor created there.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("not-a-dir");
    std::fs::write(&root, b"x").unwrap();
    let shared = Shared::new(Some(root), false);
    let services = FakeServices::new(shared.clone());
    let mut out = Vec::new();
    let code = run_with(
        ChatEnv::new(&shared, &services),
        &ChatOptions {
            session: Some("s".into()),
            ..ChatOptions::default()
        },
        &mut ScriptedLines::new(&b"hello\n"[..]),
        &mut out,
    );
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("error HOST_SESSION_UNAVAILABLE: "), "{out}");
}

#[test]
fn cite_command_prints_the_events_and_both_prefix_figures() {
    let f = fixture();
    let env = ChatEnv::new(&f.shared, &f.services);
    // Cite into a session that exists on disk.
    let options = CiteOptions {
        into: demo::DOCS_SESSION.to_string(),
        message: format!(
            "compare with {}",
            mention::format(demo::CI_SESSION, Some("CI fix"))
        ),
        json: true,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(commands::cite(env, &options, &mut out, &mut err), 0);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["sharedPrefixBytes"], v["previousRequestBytes"]);
    assert!(v["previousRequestBytes"].as_u64().unwrap() > 0);
    let appended = v["appended"].as_array().unwrap();
    assert_eq!(appended[2]["data"]["source"]["kind"], "session-reference");
    assert_eq!(
        appended[3]["data"]["content"][0]["text"],
        "compare with @CI fix"
    );
    assert!(
        v["contrast"]["beforeHistorySharedPrefixBytes"]
            .as_u64()
            .unwrap()
            < v["previousRequestBytes"].as_u64().unwrap()
    );

    // Plain text.
    let options = CiteOptions {
        json: false,
        ..options
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(commands::cite(env, &options, &mut out, &mut err), 0);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("the context message"), "{text}");
    assert!(
        text.contains("the readable line: compare with @CI fix"),
        "{text}"
    );
    assert!(text.contains("sharedPrefixBytes"), "{text}");
    assert!(text.contains("[cited: CI fix, "), "{text}");
}

#[test]
fn cite_command_refusals_print_the_code_and_append_nothing() {
    let f = fixture();
    let env = ChatEnv::new(&f.shared, &f.services);
    let run = |into: &str, message: &str, json: bool| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = commands::cite(
            env,
            &CiteOptions {
                into: into.into(),
                message: message.into(),
                json,
            },
            &mut out,
            &mut err,
        );
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    };
    let (code, out, _) = run(demo::DOCS_SESSION, "no mention here", true);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["error"]["code"], "HOST_NO_MENTION");
    let (code, _, err) = run(
        "missing-target",
        &mention::format(demo::CI_SESSION, None),
        false,
    );
    assert_eq!(code, 1);
    assert!(err.starts_with("error HOST_SESSION_UNAVAILABLE: "), "{err}");
    let (code, out, _) = run(
        demo::DOCS_SESSION,
        &mention::format(demo::DOCS_SESSION, None),
        true,
    );
    assert_eq!(code, 1);
    assert!(out.contains("SESSION_REFERENCE_SELF_REFERENCE"), "{out}");
    // Nothing was appended to the target by any of them.
    assert!(f.shared.live.get("missing-target").is_none());
    let docs = dsh_codec::log::layout::SessionsRoot::new(f.shared.sessions_root.as_ref().unwrap())
        .find(demo::DOCS_SESSION)
        .unwrap()
        .unwrap();
    let events = read_log(&docs.path, &ReadOptions::default())
        .unwrap()
        .events;
    assert!(events
        .iter()
        .all(|e| e.data["source"]["kind"] != "session-reference"));
}

#[test]
fn candidates_command_lists_mentions_as_text_and_json() {
    let f = fixture();
    let env = ChatEnv::new(&f.shared, &f.services);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        commands::candidates(env, demo::CI_SESSION, "", true, &mut out, &mut err),
        0
    );
    let list: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert!(list.iter().all(|c| c["sessionId"] != demo::CI_SESSION));
    assert!(list.iter().any(|c| c["sessionId"] == demo::DOCS_SESSION));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        commands::candidates(env, "", "json5", false, &mut out, &mut err),
        0
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("JSON5 plan for the README  (demo-docs"),
        "{text}"
    );
    assert!(
        text.contains("@[JSON5 plan for the README](dsh-session:"),
        "{text}"
    );
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        commands::candidates(env, "", "zzz-none", false, &mut out, &mut err),
        0
    );
    // A notice, so on stderr; stdout stays the (empty) listing.
    assert_eq!(String::from_utf8(out).unwrap(), "");
    assert_eq!(String::from_utf8(err).unwrap(), "no candidates\n");
}
