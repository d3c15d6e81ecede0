//! Search and citations end to end, as a user runs them: the `sample-host` binary, the real plugin
//! cdylib loaded through the ABI, a real sessions root and a real SQLite index on disk.

use serde_json::Value;
use tests::libs::{install, libs};

use tests::host::{demo_env as env, json_of, log_file, DemoEnv as Env};

/// Runs `sample-host … ARGS --json` and parses its one JSON value.
fn run(env: &Env, args: &[&str]) -> (i32, Value) {
    let out = env
        .sample_host()
        .env("HOME", tests::host::isolated_home())
        .args(args)
        .arg("--json")
        .output()
        .expect("sample-host runs");
    (out.status.code().unwrap_or(-1), json_of(args, &out))
}

#[test]
fn search_through_the_plugin_labels_pages_and_reports_broken_sessions() {
    let env = env();
    let (code, page) = run(&env, &["search", "parser"]);
    assert_eq!(code, 0, "{page}");
    let items = page["items"].as_array().unwrap();
    assert!(!items.is_empty(), "{page}");
    for hit in items {
        for key in [
            "sessionId",
            "seq",
            "type",
            "time",
            "surface",
            "snippet",
            "header",
        ] {
            assert!(hit.get(key).is_some(), "{key} missing in {hit}");
        }
        assert!(
            hit["live"].is_boolean() && hit["persisted"] == true,
            "{hit}"
        );
    }
    assert_eq!(page["skipped"], serde_json::json!([]));

    // Inside the compacted session every label is searchable, and a surface filter narrows.
    let (code, inside) = run(&env, &["search", "parser", "--session", "demo-ci-fix"]);
    assert_eq!(code, 0, "{inside}");
    let labels: Vec<&str> = inside["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["surface"].as_str().unwrap())
        .collect();
    for label in ["current", "shadowed", "log-only"] {
        assert!(labels.contains(&label), "{label} not among {labels:?}");
    }
    let (_, shadowed) = run(
        &env,
        &[
            "search",
            "parser",
            "--session",
            "demo-ci-fix",
            "--surface",
            "shadowed",
        ],
    );
    let narrowed = shadowed["items"].as_array().unwrap();
    assert!(!narrowed.is_empty() && narrowed.iter().all(|h| h["surface"] == "shadowed"));

    // Paging one hit at a time returns every hit of the full page exactly once, in order.
    let all: Vec<(String, u64)> = labels_of(&inside);
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    // One hit of `demo-ci-fix` a page.
    let one_a_page = [
        "search",
        "parser",
        "--session",
        "demo-ci-fix",
        "--limit",
        "1",
    ];
    loop {
        let mut args = one_a_page.to_vec();
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let (code, page) = run(&env, &args);
        assert_eq!(code, 0, "{page}");
        paged.extend(labels_of(&page));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, all);

    // A cursor edited by hand is refused, never a page.
    let (_, first) = run(&env, &one_a_page);
    let mut forged = first["nextCursor"].as_str().unwrap().to_string();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let (code, err) = run(
        &env,
        &[&one_a_page[..], &["--cursor", forged.as_str()][..]].concat(),
    );
    assert_eq!(code, 1);
    assert_eq!(
        err["error"]["code"], "SESSION_QUERY_INVALID_CURSOR",
        "{err}"
    );

    // A session that grows on disk is searchable on the next call, CJK runs inside a sentence too.
    let docs = log_file(&env.sessions, "demo-docs");
    let mut writer =
        dsh_codec::log::write::LogWriter::open_append(&docs, Default::default()).unwrap();
    let seq = writer.next_seq();
    let mut more = dsh_codec::build::Script::new("cjk", 1_785_200_000_000 + seq as i64)
        .from_seq(seq)
        .time_step(1);
    more.turn_start(90);
    more.appended(
        "user/message",
        dsh_codec::build::user_data("u-cjk", "我们的测试失败了，因为解析器在嵌套数组上崩溃"),
    );
    more.turn_end(90);
    writer.append(&more.events).unwrap();
    for query in ["测", "测试", "测试失败", "cargo 测试失败"] {
        let (code, page) = run(&env, &["search", query, "--session", "demo-docs"]);
        // Nothing matched is exit status 1, as grep and ripgrep say it.
        assert_eq!(
            code,
            if query.starts_with("cargo") { 1 } else { 0 },
            "{page}"
        );
        let hits = page["items"].as_array().unwrap();
        if query.starts_with("cargo") {
            assert!(hits.is_empty(), "{query}: {page}");
        } else {
            assert_eq!(hits.len(), 1, "{query}: {page}");
            assert_eq!(hits[0]["seq"].as_u64(), Some(seq + 1));
            assert!(
                hits[0]["snippet"].as_str().unwrap().contains(query),
                "{page}"
            );
        }
    }

    // A log made unreadable is left out and reported; the rest stays searchable.
    let broken_dir = env.sessions.join("--broken--").join("broken-one");
    std::fs::create_dir_all(&broken_dir).unwrap();
    std::fs::write(broken_dir.join("session.jsonl"), b"{not a header}\n").unwrap();
    let (code, page) = run(&env, &["search", "parser"]);
    assert_eq!(code, 0, "{page}");
    assert!(!page["items"].as_array().unwrap().is_empty());
    let (code, report) = run(&env, &["diagnostics"]);
    assert_eq!(code, 0, "{report}");
    let skipped = report["skipped"].as_array().unwrap();
    assert!(
        skipped.iter().any(|s| s.to_string().contains("broken-one")),
        "{report}"
    );
}

fn labels_of(page: &Value) -> Vec<(String, u64)> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["surface"].as_str().unwrap().to_string(),
                h["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn cite_appends_the_context_then_the_line_and_keeps_the_prefix() {
    let env = env();
    let (code, candidates) = run(&env, &["candidates", "--session", "demo-ci-fix-child"]);
    assert_eq!(code, 0, "{candidates}");
    let list = candidates.as_array().unwrap();
    assert!(list.iter().all(|c| c["sessionId"] != "demo-ci-fix-child"));
    let mention = tests::host::mention_of(&candidates, "demo-docs");

    let target = log_file(&env.sessions, "demo-ci-fix-child");
    let message = format!("what did we plan in {mention}?");
    let (code, cited) = run(
        &env,
        &["cite", "--into", "demo-ci-fix-child", "--message", &message],
    );
    assert_eq!(code, 0, "{cited}");
    assert_eq!(
        cited["sharedPrefixBytes"], cited["previousRequestBytes"],
        "{cited}"
    );
    let appended = cited["appended"].as_array().unwrap();
    let users: Vec<&Value> = appended
        .iter()
        .filter(|e| e["type"] == "user/message")
        .collect();
    assert_eq!(users.len(), 2, "{cited}");
    assert_eq!(users[0]["data"]["source"]["kind"], "session-reference");
    assert_eq!(users[1]["data"]["source"]["kind"], "user");
    assert_eq!(
        users[1]["seq"].as_u64().unwrap(),
        users[0]["seq"].as_u64().unwrap() + 1,
        "context then line, contiguous"
    );
    let prompt = users[0]["data"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(prompt.matches("<referenced-sessions>").count(), 1);
    assert_eq!(prompt.matches("</referenced-sessions>").count(), 1);

    // A refused citation leaves the target log byte-identical.
    let before = std::fs::read(&target).unwrap();
    let self_mention = host_api::mention::format_mention("demo-ci-fix-child", None);
    let (code, err) = run(
        &env,
        &[
            "cite",
            "--into",
            "demo-ci-fix-child",
            "--message",
            &format!("see {self_mention}"),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        err["error"]["code"], "SESSION_REFERENCE_SELF_REFERENCE",
        "{err}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), before);
}

/// `chat` keeps watching the plugin folder: a new build dropped in while the chat runs answers the
/// next command of the same session.
#[test]
fn chat_hot_reloads_the_plugin_between_two_lines() {
    use std::io::Write as _;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let env = env();
    let mut child = env
        .sample_host()
        .env("HOME", tests::host::isolated_home())
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sample-host chat starts");
    let mut stdin = child.stdin.take().unwrap();
    // Read the chat's output as it comes, to see when the new build serves.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let output = || seen.lock().unwrap().clone();
    writeln!(stdin, "/plugins").unwrap();
    writeln!(stdin, "/search parser").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !output().contains("demo-ci-fix") {
        assert!(Instant::now() < deadline, "no answer:\n{}", output());
        std::thread::sleep(Duration::from_millis(50));
    }
    // A new build is published while the chat runs; ask until it serves.
    install(
        &libs().next_version,
        &env.plugins,
        "libdsh_session_search.so",
    );
    while !output().contains("0.2.0-next") {
        assert!(Instant::now() < deadline, "no reload seen:\n{}", output());
        writeln!(stdin, "/plugins").unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    let answered = output().matches("demo-ci-fix").count();
    writeln!(stdin, "/search parser").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let text = output();
    assert_eq!(status.code(), Some(0), "{text}");
    let first = text.find("dsh-session-search 0.1.0").expect(&text);
    let second = text.find("0.2.0-next").unwrap();
    assert!(first < second, "{text}");
    // The search after the reload was answered too, by the new build.
    assert!(text.matches("demo-ci-fix").count() > answered, "{text}");
}
