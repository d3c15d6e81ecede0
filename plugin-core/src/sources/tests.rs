//! The importers over the sample logs in `tests/data/sources` (written for these tests from the
//! documented shapes), labelled by the one fold: one test per rule of ARCHITECTURE.md's tables.

use std::path::{Path, PathBuf};

use dsh_codec::log::Event;
use dsh_codec::surface::{Label, SurfaceFold};
use dsh_codec::text::event_text;

use super::*;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sources")
}

fn sources() -> Sources {
    Sources::new(SourceRoots {
        claude_projects: Some(data().join("claude/projects")),
        codex_home: Some(data().join("codex")),
    })
}

use dsh_fixtures::sources::{ARCHIVED, CLAUDE, CODEX, SUBAGENT};

struct Folded {
    imported: Imported,
    fold: SurfaceFold,
}

impl Folded {
    fn events(&self) -> &[Event] {
        &self.imported.events
    }

    /// The label of every event whose text contains `needle`.
    fn labels_of(&self, needle: &str) -> Vec<(String, Label)> {
        self.events()
            .iter()
            .filter(|e| event_text(e).contains(needle))
            .map(|e| {
                (
                    e.kind.clone(),
                    self.fold.label(e.seq).unwrap_or(Label::LogOnly),
                )
            })
            .collect()
    }

    fn label_of(&self, needle: &str) -> Label {
        let labels = self.labels_of(needle);
        assert_eq!(labels.len(), 1, "{needle}: {labels:?}");
        labels[0].1
    }
}

fn load(id: &str) -> Folded {
    let sources = sources();
    let listed = sources
        .list()
        .sessions
        .into_iter()
        .find(|s| s.header.id == id)
        .unwrap_or_else(|| panic!("{id} is not listed"));
    let imported = sources.read(&listed).unwrap();
    let fold = SurfaceFold::fold(imported.events.iter()).expect("the importer's events fold");
    Folded { imported, fold }
}

#[test]
fn lists_every_transcript_of_both_sources_with_namespaced_ids() {
    let listing = sources().list();
    assert!(listing.problems.is_empty(), "{:?}", listing.problems);
    let mut ids: Vec<&str> = listing
        .sessions
        .iter()
        .map(|s| s.header.id.as_str())
        .collect();
    ids.sort();
    assert_eq!(ids, [CLAUDE, SUBAGENT, CODEX, ARCHIVED]);
    let main = listing
        .sessions
        .iter()
        .find(|s| s.header.id == CLAUDE)
        .unwrap();
    assert_eq!(main.header.cwd.as_deref(), Some("/work/demo-app"));
    assert_eq!(
        main.header.created_at,
        lines::parse_time("2026-11-20T10:00:01.007Z").unwrap()
    );
    let sub = listing
        .sessions
        .iter()
        .find(|s| s.header.id == SUBAGENT)
        .unwrap();
    assert_eq!(sub.header.parent_session.as_deref(), Some(CLAUDE));
    assert_eq!(sub.header.origin.as_deref(), Some("subagent"));
    assert_eq!(sub.header.delegation_depth, Some(1));
}

#[test]
fn claude_streamed_blocks_of_one_message_are_one_event() {
    let s = load(CLAUDE);
    let merged: Vec<&Event> = s
        .events()
        .iter()
        .filter(|e| e.data["message"]["id"] == "msg_01")
        .collect();
    assert_eq!(merged.len(), 1);
    let content = merged[0].data["message"]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["reasoning", "text", "tool-call"]);
    assert_eq!(content[2]["name"], "Bash");
    // Reasoning is not searchable (spec §3); the tool call's name and arguments are.
    let text = event_text(merged[0]);
    assert!(!text.contains("check features"), "{text}");
    assert!(
        text.contains("Bash") && text.contains("cargo build --locked"),
        "{text}"
    );
}

#[test]
fn claude_tool_results_keep_is_error_and_images_are_placeholders() {
    let s = load(CLAUDE);
    let result = s
        .events()
        .iter()
        .find(|e| e.kind == "tool/result" && event_text(e).contains("E0432"))
        .unwrap();
    let block = &result.data["message"]["content"][0];
    assert_eq!(block["toolCallId"], "toolu_01");
    assert_eq!(block["isError"], true);
    let image = s
        .events()
        .iter()
        .find(|e| event_text(e).contains("screenshot of the failing job"))
        .unwrap();
    assert_eq!(image.data["content"][1]["text"], "[image: image/png]");
}

#[test]
fn claude_compaction_shadows_everything_before_the_boundary_and_the_summary_is_current() {
    let s = load(CLAUDE);
    for before in [
        "Why does the CI build fail",
        "Let me look at Cargo.toml",
        "net feature of tokio",
    ] {
        assert_eq!(s.label_of(before), Label::Shadowed, "{before}");
    }
    assert_eq!(
        s.label_of("being continued from a previous"),
        Label::Current
    );
    let summary = s
        .events()
        .iter()
        .find(|e| event_text(e).contains("being continued"))
        .unwrap();
    assert_eq!(summary.data["source"]["plugin"], "compact");
    assert_eq!(s.label_of("release notes for the walrus"), Label::Current);
}

#[test]
fn claude_rewind_shadows_the_abandoned_branch_and_keeps_the_path_to_the_newest_leaf() {
    let s = load(CLAUDE);
    assert_eq!(s.label_of("marmalade theme"), Label::Shadowed);
    assert_eq!(s.label_of("Marmalade notes"), Label::Shadowed);
    assert_eq!(s.label_of("quokka mascot"), Label::Current);
    assert_eq!(s.label_of("File written"), Label::Current);
    let quokka = s.labels_of("Quokka notes");
    assert_eq!(quokka, [("assistant/message".to_string(), Label::Current)]);
}

#[test]
fn claude_structure_and_unknown_records_are_log_only_with_their_text() {
    let s = load(CLAUDE);
    assert_eq!(s.label_of("zebra counters"), Label::LogOnly);
    assert_eq!(s.label_of("okapi check passed"), Label::LogOnly);
    let boundary = s
        .events()
        .iter()
        .find(|e| e.data["subtype"] == "compact_boundary")
        .unwrap();
    assert_eq!(s.fold.label(boundary.seq), Some(Label::LogOnly));
    // The harness's own user records are current but are not the person's (citations skip them).
    let meta = s
        .events()
        .iter()
        .find(|e| event_text(e).contains("Caveat"))
        .unwrap();
    assert_eq!(meta.data["source"]["kind"], "plugin");
    assert_eq!(s.fold.label(meta.seq), Some(Label::Current));
}

#[test]
fn claude_summary_is_the_title_and_a_torn_last_line_is_left_out() {
    let s = load(CLAUDE);
    let title = s
        .events()
        .iter()
        .rfind(|e| e.kind == "session/title")
        .unwrap();
    assert_eq!(
        title.data["title"],
        "Fixing tokio E0432 in CI and the quokka release notes"
    );
    assert!(s.labels_of("half a repl").is_empty());
}

#[test]
fn claude_subagent_is_its_own_session() {
    let s = load(SUBAGENT);
    assert_eq!(s.label_of("walrus config file"), Label::Current);
    assert_eq!(s.label_of("narwhal setting"), Label::Current);
    assert_eq!(s.imported.header.parent_session.as_deref(), Some(CLAUDE));
}

#[test]
fn codex_compacted_replacement_history_shadows_the_old_history_and_is_current() {
    let s = load(CODEX);
    assert_eq!(s.label_of("races the pelican timer"), Label::Shadowed);
    assert_eq!(s.label_of("timed out waiting"), Label::Shadowed);
    // The question is in the old history (shadowed) and again in the replacement (current).
    let question: Vec<Label> = s
        .labels_of("flamingo test flaky")
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(question, [Label::Shadowed, Label::Current]);
    assert_eq!(s.label_of("flake comes from the pelican"), Label::Current);
    assert_eq!(s.label_of("heron deadlock by"), Label::Current);
}

#[test]
fn codex_mirrored_event_messages_do_not_show_twice() {
    let s = load(CODEX);
    assert_eq!(s.labels_of("Now fix the heron deadlock").len(), 1);
    assert_eq!(s.labels_of("taking the locks in one order").len(), 1);
    assert_eq!(
        s.labels_of("flamingo test timing").len(),
        0,
        "reasoning is not searchable"
    );
    let mirrors = s
        .events()
        .iter()
        .filter(|e| e.data["recordType"] == "event_msg" && e.data["subtype"] == "user_message")
        .count();
    assert_eq!(
        mirrors, 2,
        "the mirrors are kept, as log-only records without text"
    );
}

#[test]
fn codex_structure_and_unknown_records_are_log_only_and_a_torn_line_is_left_out() {
    let s = load(CODEX);
    assert_eq!(s.label_of("ibis telemetry"), Label::LogOnly);
    let injected = s
        .events()
        .iter()
        .find(|e| event_text(e).contains("environment_context"))
        .unwrap();
    assert_eq!(injected.data["source"]["kind"], "plugin");
    assert!(
        s.events().iter().all(|e| event_text(e) != "par"),
        "the torn line is not read"
    );
    assert_eq!(
        s.events().last().unwrap().data["recordType"],
        "ghost_record"
    );
    assert_eq!(s.imported.header.cwd.as_deref(), Some("/work/demo-app"));
}

#[test]
fn codex_archived_sessions_list_and_images_are_placeholders() {
    let s = load(ARCHIVED);
    assert_eq!(s.label_of("osprey cache lives"), Label::Current);
    assert_eq!(s.label_of("[image]"), Label::Current);
}

#[test]
fn a_transcript_that_is_not_jsonl_is_a_problem_of_its_path_and_the_rest_still_lists() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("projects/-tmp-x");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("aaa.jsonl"),
        "{\"type\":\"user\"}\nnot json at all\n{}\n",
    )
    .unwrap();
    std::fs::write(
        project.join("bbb.jsonl"),
        "{\"type\":\"user\",\"uuid\":\"u\",\"parentUuid\":null,\"message\":{\"role\":\"user\",\"content\":\"fine\"}}\n",
    )
    .unwrap();
    let sources = Sources::new(SourceRoots {
        claude_projects: Some(dir.path().join("projects")),
        codex_home: Some(dir.path().join("no-codex-here")),
    });
    let listing = sources.list();
    assert_eq!(listing.sessions.len(), 1);
    assert_eq!(listing.problems.len(), 1);
    let e = &listing.problems[0];
    assert_eq!(e.code, dsh_codec::log::LogErrorCode::UnparsableLine);
    assert_eq!(e.line, Some(2));
    assert!(e.path.as_deref().unwrap().ends_with("aaa.jsonl"));
    // A bad line past the start the listing reads is found by the whole read.
    let late = project.join("ccc.jsonl");
    let mut text = String::new();
    for _ in 0..40 {
        text.push_str("{\"type\":\"queue-operation\"}\n");
    }
    text.push_str("{oops\n");
    std::fs::write(&late, text).unwrap();
    let listing = sources.list();
    let late = listing
        .sessions
        .iter()
        .find(|s| s.header.id == "claude:ccc")
        .unwrap();
    let e = sources.read(late).unwrap_err();
    assert_eq!(
        (e.code, e.line),
        (dsh_codec::log::LogErrorCode::UnparsableLine, Some(41))
    );
    let fine = listing
        .sessions
        .iter()
        .find(|s| s.header.id == "claude:bbb")
        .unwrap();
    assert_eq!(sources.read(fine).unwrap().events.len(), 1);
}

#[test]
fn importers_never_write_their_sources() {
    let before = snapshot(&data());
    let sources = sources();
    for listed in sources.list().sessions {
        sources.read(&listed).unwrap();
    }
    assert_eq!(snapshot(&data()), before);
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::metadata(&path).unwrap();
        if meta.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path, meta.len(), meta.modified().unwrap()));
        }
    }
    out.sort();
    out
}
