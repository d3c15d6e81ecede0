//! Claude Code and Codex sessions beside the DSH sessions root, as a user meets them: the `sample-host`
//! binary, the real plugin cdylib loaded through the ABI, a real SQLite index, and the sample
//! transcripts of `tests/data/sources` (written for these tests from the documented shapes) copied
//! into a temporary folder so a test can grow or break them. Every run sets `HOME` to a folder of its
//! own, so the machine's real `~/.claude` and `~/.codex` never join.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tests::host::{demo_env, DemoEnv};

use dsh_fixtures::sources::{ARCHIVED, CLAUDE, CODEX, SUBAGENT};

struct Env {
    demo: DemoEnv,
    claude: PathBuf,
    codex: PathBuf,
    home: PathBuf,
}

impl Env {
    fn claude_main(&self) -> PathBuf {
        self.claude
            .join("-work-demo-app/11111111-1111-4111-8111-111111111111.jsonl")
    }

    fn codex_main(&self) -> PathBuf {
        self.codex.join(
            "sessions/2026/11/21/rollout-2026-11-21T09-00-00-33333333-3333-4333-8333-333333333333.jsonl",
        )
    }
}

fn env() -> Env {
    let demo = demo_env();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/sources");
    let sources = demo.root().join("sources");
    dsh_fixtures::copy_dir(&data, &sources);
    let home = demo.root().join("home");
    std::fs::create_dir_all(&home).unwrap();
    Env {
        claude: sources.join("claude/projects"),
        codex: sources.join("codex"),
        home,
        demo,
    }
}

/// `sample-host` with the demo's plugins, sessions and index, `HOME` set to the test's own folder.
fn host(env: &Env) -> Command {
    let mut cmd = env.demo.sample_host();
    cmd.env("HOME", &env.home).env_remove("XDG_CONFIG_HOME");
    cmd
}

/// Runs `sample-host --claude-projects … --codex-home … ARGS --json` and parses its one JSON value.
fn run(env: &Env, args: &[&str]) -> (i32, Value) {
    let mut cmd = host(env);
    cmd.arg("--claude-projects")
        .arg(&env.claude)
        .arg("--codex-home")
        .arg(&env.codex);
    json_of(cmd.args(args).arg("--json"), args)
}

fn json_of(cmd: &mut Command, args: &[&str]) -> (i32, Value) {
    let out = cmd.output().expect("sample-host runs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

fn items(page: &Value) -> &Vec<Value> {
    page["items"].as_array().expect("a page of items")
}

fn surfaces(page: &Value) -> Vec<&str> {
    items(page)
        .iter()
        .map(|h| h["surface"].as_str().unwrap())
        .collect()
}

#[test]
fn search_across_sources_says_the_source_of_every_hit() {
    let env = env();
    for (query, id, source) in [
        ("walrus release", CLAUDE, "claude"),
        ("heron deadlock", CODEX, "codex"),
        ("osprey cache", ARCHIVED, "codex"),
        ("narwhal", SUBAGENT, "claude"),
    ] {
        let (code, page) = run(&env, &["search", query]);
        assert_eq!(code, 0, "{page}");
        let hits = items(&page);
        assert!(!hits.is_empty(), "{query}: {page}");
        for hit in hits {
            assert_eq!(hit["sessionId"], id, "{query}: {hit}");
            assert_eq!(hit["source"], source, "{hit}");
            assert_eq!(hit["header"]["source"], source, "{hit}");
        }
        assert_eq!(page["skipped"], serde_json::json!([]), "{page}");
    }
    // DSH sessions are still there and say so.
    let (_, page) = run(&env, &["search", "parser"]);
    assert!(!items(&page).is_empty());
    assert!(items(&page).iter().all(|h| h["source"] == "dsh"), "{page}");

    // Plain output names the source too.
    let mut cmd = host(&env);
    let out = cmd
        .arg("--claude-projects")
        .arg(&env.claude)
        .arg("--codex-home")
        .arg(&env.codex)
        .args(["search", "heron deadlock"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(CODEX), "{text}");
    assert!(text.contains("(codex)"), "{text}");
}

#[test]
fn labels_follow_what_each_harness_model_still_sees() {
    let env = env();
    // Claude Code: compacted away, rewound away, current, structure.
    let (_, page) = run(&env, &["search", "E0432", "--session", CLAUDE]);
    let labels = surfaces(&page);
    assert!(
        labels.contains(&"shadowed") && labels.contains(&"current"),
        "{page}"
    );
    let (_, page) = run(&env, &["search", "marmalade", "--session", CLAUDE]);
    assert_eq!(surfaces(&page), ["shadowed", "shadowed"], "{page}");
    let (_, page) = run(
        &env,
        &[
            "search",
            "quokka",
            "--session",
            CLAUDE,
            "--surface",
            "current",
        ],
    );
    assert!(items(&page).len() >= 2, "{page}");
    let (_, page) = run(&env, &["search", "zebra counters", "--session", CLAUDE]);
    assert_eq!(surfaces(&page), ["log-only"], "{page}");
    assert_eq!(items(&page)[0]["type"], "import/record");

    // Codex: the replacement history is current, what it replaced shadowed, the mirrors not twice.
    let (_, page) = run(&env, &["search", "heron deadlock", "--session", CODEX]);
    assert_eq!(surfaces(&page), ["current", "current"], "{page}");
    let (_, page) = run(&env, &["search", "pelican", "--session", CODEX]);
    let mut labels = surfaces(&page);
    labels.sort();
    assert_eq!(labels, ["current", "shadowed", "shadowed"], "{page}");
    let (_, page) = run(&env, &["search", "ibis telemetry", "--session", CODEX]);
    assert_eq!(surfaces(&page), ["log-only"], "{page}");
}

#[test]
fn every_filter_works_across_sources() {
    let env = env();
    let (_, page) = run(&env, &["search", "E0432", "--type", "tool/result"]);
    let hits = items(&page);
    assert_eq!(hits.len(), 1, "{page}");
    assert_eq!(hits[0]["sessionId"], CLAUDE);
    let (_, page) = run(&env, &["search", "osprey", "--cwd", "/work/other"]);
    assert_eq!(items(&page).len(), 1, "{page}");
    let (_, page) = run(&env, &["search", "osprey", "--cwd", "/work/demo-app"]);
    assert!(items(&page).is_empty(), "{page}");
    // The Claude session is from 2026-11-20, the Codex one from 2026-11-21.
    let (_, page) = run(&env, &["search", "notes", "--since", "2026-11-21"]);
    assert!(
        items(&page).iter().all(|h| h["sessionId"] != CLAUDE),
        "{page}"
    );
    let (_, page) = run(
        &env,
        &[
            "search",
            "flamingo",
            "--since",
            "2026-11-21",
            "--surface",
            "shadowed",
        ],
    );
    assert!(!items(&page).is_empty());
    assert!(surfaces(&page).iter().all(|s| *s == "shadowed"), "{page}");
}

#[test]
fn exact_reads_titles_and_candidates_see_imported_sessions() {
    let env = env();
    let (code, list) = run(&env, &["sessions"]);
    assert_eq!(code, 0, "{list}");
    let sessions = list["sessions"].as_array().unwrap();
    let of = |id: &str| sessions.iter().find(|s| s["header"]["id"] == id).cloned();
    for (id, source) in [
        (CLAUDE, "claude"),
        (SUBAGENT, "claude"),
        (CODEX, "codex"),
        (ARCHIVED, "codex"),
    ] {
        let s = of(id).unwrap_or_else(|| panic!("{id} not listed: {list}"));
        assert_eq!(s["source"], source);
        assert_eq!(s["persisted"], true);
    }
    assert_eq!(of("demo-docs").unwrap()["source"], "dsh");
    assert_eq!(of(SUBAGENT).unwrap()["header"]["parentSession"], CLAUDE);
    // The subagent is a child session of its parent.
    let (code, lineage) = run(&env, &["trace", SUBAGENT]);
    assert_eq!(code, 0, "{lineage}");
    assert_eq!(lineage["ancestors"][0]["header"]["id"], CLAUDE, "{lineage}");
    assert_eq!(lineage["target"]["header"]["origin"], "subagent");

    let (code, surface) = run(&env, &["surface", CLAUDE]);
    assert_eq!(code, 0, "{surface}");
    assert_eq!(surface["source"], "claude");
    let text = surface["events"].to_string();
    assert!(text.contains("being continued from a previous conversation"));
    assert!(text.contains("Quokka notes"));
    assert!(
        !text.contains("Marmalade notes"),
        "a rewound branch is not on the surface"
    );
    assert!(!text.contains("tokio feature flags"), "compacted away");

    let (code, candidates) = run(&env, &["candidates", "--session", "demo-docs"]);
    assert_eq!(code, 0, "{candidates}");
    let claude = candidates
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["sessionId"] == CLAUDE)
        .unwrap_or_else(|| panic!("{candidates}"));
    assert_eq!(
        claude["mention"],
        format!("@[Fixing tokio E0432 in CI and the quokka release notes](dsh-session:{CLAUDE})")
    );
}

#[test]
fn growing_transcripts_are_searched_again_and_a_rewind_relabels() {
    let env = env();
    let (_, page) = run(&env, &["search", "half a reply"]);
    assert!(items(&page).is_empty(), "the torn line is not read: {page}");
    let (_, page) = run(&env, &["search", "quokka mascot", "--session", CLAUDE]);
    assert_eq!(surfaces(&page), ["current"], "{page}");

    // The harness finishes its torn line, then the user rewinds to before the quokka question.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(env.claude_main())
        .unwrap();
    f.write_all(b"y about grebes\"}]}}\n").unwrap();
    let rewind = serde_json::json!({
        "type": "user", "uuid": "aaaaaaaa-0000-4000-8000-000000000099",
        "parentUuid": "aaaaaaaa-0000-4000-8000-000000000013",
        "timestamp": "2026-11-20T10:01:00.000Z", "cwd": "/work/demo-app",
        "message": {"role": "user", "content": "Forget the mascot; write the notes about the kestrel API"},
    });
    writeln!(f, "{rewind}").unwrap();
    drop(f);
    let (_, page) = run(&env, &["search", "grebes"]);
    assert_eq!(
        surfaces(&page),
        ["shadowed"],
        "finished, then rewound away: {page}"
    );
    let (_, page) = run(&env, &["search", "quokka mascot", "--session", CLAUDE]);
    assert_eq!(surfaces(&page), ["shadowed"], "{page}");
    let (_, page) = run(&env, &["search", "kestrel", "--session", CLAUDE]);
    assert_eq!(surfaces(&page), ["current"], "{page}");

    // Codex grows too.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(env.codex_main())
        .unwrap();
    f.write_all(b"tly done\"}]}}\n").unwrap();
    drop(f);
    let (_, page) = run(&env, &["search", "partly done", "--session", CODEX]);
    assert_eq!(surfaces(&page), ["current"], "{page}");
}

#[test]
fn a_broken_transcript_is_reported_and_skipped_and_the_rest_searches() {
    let env = env();
    let project = env.claude.join("-work-broken");
    std::fs::create_dir_all(&project).unwrap();
    let broken = project.join("55555555-5555-4555-8555-555555555555.jsonl");
    let mut text = String::new();
    for i in 0..30 {
        text.push_str(&format!(
            "{{\"type\":\"user\",\"uuid\":\"u{i}\",\"parentUuid\":null,\"timestamp\":\"2026-11-22T00:00:00Z\",\"message\":{{\"role\":\"user\",\"content\":\"puffin {i}\"}}}}\n"
        ));
    }
    text.push_str("{\"type\": oops\n{\"type\":\"user\"}\n");
    std::fs::write(&broken, text).unwrap();
    let not_a_file = env.codex.join("sessions/2026/11/22");
    std::fs::create_dir_all(&not_a_file).unwrap();
    let fifo =
        not_a_file.join("rollout-2026-11-22T00-00-00-66666666-6666-4666-8666-666666666666.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());

    let (code, page) = run(&env, &["search", "walrus"]);
    assert_eq!(code, 0, "{page}");
    assert!(!items(&page).is_empty(), "{page}");
    let (_, page) = run(&env, &["search", "puffin"]);
    assert!(items(&page).is_empty(), "{page}");

    let (code, diag) = run(&env, &["diagnostics"]);
    assert_eq!(code, 0, "{diag}");
    let skipped = diag["skipped"].as_array().unwrap();
    let of = |path: &Path| {
        skipped
            .iter()
            .find(|s| s["path"] == path.display().to_string())
            .unwrap_or_else(|| panic!("{} not reported: {diag}", path.display()))
            .clone()
    };
    let b = of(&broken);
    assert_eq!(b["code"], "LOG_UNPARSABLE_LINE");
    assert!(b["reason"].as_str().unwrap().contains("line 31"), "{b}");
    assert_eq!(b["id"], "claude:55555555-5555-4555-8555-555555555555");
    let f = of(&fifo);
    assert_eq!(f["code"], "LOG_NOT_REGULAR_FILE", "{f}");
}

#[test]
fn diagnostics_show_the_sources_and_the_defaults_follow_home() {
    let env = env();
    let (_, diag) = run(&env, &["diagnostics"]);
    let sources = diag["sources"].as_array().unwrap();
    let kinds: Vec<&str> = sources
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["dsh", "claude", "codex"], "{diag}");
    assert_eq!(sources[1]["path"], env.claude.display().to_string());
    assert_eq!(sources[1]["indexedSessions"], 2);
    assert_eq!(sources[2]["indexedSessions"], 2);
    assert_eq!(sources[2]["exists"], true);

    // No flags and nothing under HOME: only DSH.
    let (_, diag) = json_of(host(&env).args(["diagnostics", "--json"]), &["diagnostics"]);
    assert_eq!(diag["sources"].as_array().unwrap().len(), 1, "{diag}");
    // The harnesses' own folders under HOME are read by default...
    dsh_fixtures::copy_dir(&env.claude, &env.home.join(".claude/projects"));
    dsh_fixtures::copy_dir(&env.codex, &env.home.join(".codex"));
    let (_, diag) = json_of(host(&env).args(["diagnostics", "--json"]), &["diagnostics"]);
    let sources = diag["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3, "{diag}");
    assert_eq!(
        sources[1]["path"],
        env.home.join(".claude/projects").display().to_string()
    );
    assert_eq!(
        sources[2]["path"],
        env.home.join(".codex").display().to_string()
    );
    // ...unless --no-default-sources.
    let (_, diag) = json_of(
        host(&env).args(["diagnostics", "--no-default-sources", "--json"]),
        &["diagnostics"],
    );
    assert_eq!(diag["sources"].as_array().unwrap().len(), 1, "{diag}");
    let (_, page) = json_of(
        host(&env).args(["search", "walrus", "--no-default-sources", "--json"]),
        &["search"],
    );
    assert!(items(&page).is_empty(), "{page}");

    let out = host(&env).args(["diagnostics"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("source claude: "), "{text}");
}

#[test]
fn a_claude_session_cited_into_a_dsh_chat_is_a_frozen_escaped_snapshot_of_its_current_surface() {
    let env = env();
    let before = std::fs::read(env.claude_main()).unwrap();
    let message = format!("what did we decide in @[the notes](dsh-session:{CLAUDE})?");
    let (code, cited) = run(
        &env,
        &["cite", "--into", "demo-ci-fix-child", "--message", &message],
    );
    assert_eq!(code, 0, "{cited}");
    let users: Vec<&Value> = cited["appended"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "user/message")
        .collect();
    assert_eq!(users.len(), 2, "{cited}");
    let context = users[0];
    assert_eq!(context["data"]["source"]["kind"], "session-reference");
    let reference = &context["data"]["source"]["references"][0];
    assert_eq!(reference["sessionId"], CLAUDE);
    assert_eq!(reference["compacted"], true, "{reference}");
    let prompt = context["data"]["content"][0]["text"].as_str().unwrap();
    assert!(prompt.contains("Quokka notes"), "{prompt}");
    assert!(prompt.contains("\\u003c3"), "every < is escaped: {prompt}");
    assert!(!prompt.contains("smiles at every release <3"));
    assert!(
        !prompt.contains("Marmalade"),
        "the abandoned branch is not cited"
    );
    assert!(!prompt.contains("tokio feature flags"), "compacted away");
    assert!(
        !prompt.contains("File written"),
        "tool results are not cited"
    );
    assert_eq!(
        users[1]["data"]["content"][0]["text"],
        "what did we decide in @the notes?"
    );
    assert_eq!(
        std::fs::read(env.claude_main()).unwrap(),
        before,
        "read-only"
    );

    // Frozen: the transcript changes afterwards, the cited text in the DSH log does not.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(env.claude_main())
        .unwrap();
    f.write_all(b"\n").unwrap();
    drop(f);
    let (_, surface) = run(&env, &["surface", "demo-ci-fix-child"]);
    assert!(surface.to_string().contains("Quokka notes"), "{surface}");

    // A Codex session through DSH's own base64 URI form, over a small budget.
    let big = env.codex.join("sessions/2026/11/23");
    std::fs::create_dir_all(&big).unwrap();
    let id = "77777777-7777-4777-8777-777777777777";
    let mut text = format!(
        "{{\"timestamp\":\"2026-11-23T00:00:00Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{id}\",\"cwd\":\"/work/big\"}}}}\n"
    );
    for i in 0..40 {
        let body = format!("answer {i} {}", "lorem ipsum ".repeat(500));
        text.push_str(&format!(
            "{{\"timestamp\":\"2026-11-23T00:00:01Z\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"text\":\"{body}\"}}]}}}}\n"
        ));
    }
    std::fs::write(
        big.join(format!("rollout-2026-11-23T00-00-00-{id}.jsonl")),
        text,
    )
    .unwrap();
    let codex_id = format!("codex:{id}");
    let uri_mention = format!(
        "@[big]({})",
        host_api::mention::encode_uri(&codex_id)
            .replace(&format!("dsh-session:{codex_id}"), &base64_uri(&codex_id))
    );
    let (code, cited) = run(
        &env,
        &[
            "cite",
            "--into",
            "demo-ci-fix-child",
            "--message",
            &format!("see {uri_mention}"),
        ],
    );
    assert_eq!(code, 0, "{cited}");
    let context = cited["appended"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["data"]["source"]["kind"] == "session-reference")
        .unwrap();
    let reference = &context["data"]["source"]["references"][0];
    assert_eq!(reference["sessionId"], codex_id.as_str());
    assert!(
        reference["omittedMessages"].as_u64().unwrap() > 0,
        "{reference}"
    );
    let prompt = context["data"]["content"][0]["text"].as_str().unwrap();
    assert!(prompt.len() < 70_000, "budgeted: {}", prompt.len());
    assert!(prompt.contains("answer 39"), "the newest item is kept");
}

/// DSH's URI form: base64url of the id's JSON string literal.
fn base64_uri(id: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = serde_json::Value::from(id).to_string().into_bytes();
    let mut out = String::from("dsh-session:");
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, &b| acc << 8 | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}
