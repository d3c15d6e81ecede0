//! `sample-host mcp` driven by rmcp's own client: the real binary spawned over stdio, the real plugin
//! cdylib, a real sessions root and SQLite index. Every tool's answer is checked against what the
//! command line prints for the same question (`sample-host … --json`, on an index of its own, since one
//! index belongs to one process at a time), budgets and cursors against their promises, bad arguments
//! against their codes, and a plugin rebuilt under the running server against its next answer.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use tests::host::DemoEnv;
use tests::libs::{install, libs};
use tests::mcp_env::{mcp_env, HUGE_OUTPUT_BYTES, LONG_PHRASE, LONG_SESSION, LONG_TURNS};
use tokio::io::AsyncBufReadExt;

const CI: &str = "demo-ci-fix";
const DOCS: &str = "demo-docs";

/// `sample-host ARGS --json` on its own index; its one JSON value.
fn cli(env: &DemoEnv, args: &[&str]) -> Value {
    let index = env.root().join("cli-index.sqlite");
    let out = tests::host::sample_host(&env.plugins, &env.sessions, &index)
        .args(args)
        .arg("--json")
        .output()
        .expect("sample-host runs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout}"))
}

/// A running `sample-host mcp` and what it has written to stderr so far.
struct Server {
    client: RunningService<RoleClient, ()>,
    stderr: Arc<Mutex<String>>,
}

async fn start(env: &DemoEnv, extra: &[&str]) -> Server {
    let mut cmd = env.sample_host();
    cmd.arg("mcp").args(extra).env_remove("RUST_LOG");
    let cmd = tokio::process::Command::from(cmd);
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("sample-host mcp starts");
    let log = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = stderr {
        let log = log.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
    }
    let client = ().serve(transport).await.expect("the MCP handshake succeeds");
    Server {
        client,
        stderr: log,
    }
}

/// A tool's answer: whether it is a tool error, and its text contents.
struct Reply {
    is_error: bool,
    texts: Vec<String>,
}

impl Reply {
    fn json(&self) -> Value {
        assert!(!self.is_error, "a tool error: {:?}", self.texts);
        serde_json::from_str(&self.texts[0])
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.texts[0]))
    }

    fn bytes(&self) -> usize {
        self.texts.iter().map(String::len).sum()
    }

    fn error(&self) -> &str {
        assert!(self.is_error, "expected a tool error, got {:?}", self.texts);
        &self.texts[0]
    }
}

async fn call(server: &Server, tool: &str, args: Value) -> Reply {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = server
        .client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: the call itself failed: {e}"));
    let texts = result
        .content
        .iter()
        .map(|c| c.as_text().map(|t| t.text.clone()).expect("text content"))
        .collect();
    Reply {
        is_error: result.is_error == Some(true),
        texts,
    }
}

/// Every page of a tool's answer, following `nextCursor`; each page is checked against `maxBytes`.
async fn all_pages(server: &Server, tool: &str, args: Value, list: &str) -> Vec<Value> {
    let max = args["maxBytes"].as_u64().map(|n| n as usize);
    let mut items = Vec::new();
    let mut args = args;
    for _ in 0..1_000 {
        let reply = call(server, tool, args.clone()).await;
        if let Some(max) = max {
            assert!(
                reply.bytes() <= max,
                "{tool}: {} bytes over {max}",
                reply.bytes()
            );
        }
        let page = reply.json();
        items.extend(page[list].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => args["cursor"] = next.into(),
            None => return items,
        }
    }
    panic!("{tool}: the cursor never ended");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every page of a CLI search, following the plugin's own cursors.
fn cli_search_all(env: &DemoEnv, args: &[&str]) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut full: Vec<&str> = args.to_vec();
        if let Some(c) = &cursor {
            full.extend(["--cursor", c.as_str()]);
        }
        let page = cli(env, &full);
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return items,
        }
    }
}

fn without(mut item: Value, key: &str) -> Value {
    item.as_object_mut().unwrap().remove(key);
    item
}

#[test]
fn every_tool_answers_what_the_command_line_answers() {
    let env = mcp_env();
    // The command line's answers first: `cite` below writes into a session.
    let search = cli(&env, &["search", "parser"]);
    let inside = cli(
        &env,
        &[
            "search",
            "parser",
            "--session",
            CI,
            "--surface",
            "shadowed,current",
        ],
    );
    let sessions = cli(&env, &["sessions"]);
    let surface = cli(&env, &["surface", CI]);
    let events = cli(&env, &["events", CI]);
    let window = cli(&env, &["event", CI, "7", "--before", "2", "--after", "3"]);

    runtime().block_on(async {
        let server = start(&env, &[]).await;
        let info = server.client.peer_info().expect("server info");
        assert_eq!(
            info.server_info.as_ref().unwrap().name,
            "dsh-session-search"
        );

        let tools = server.client.list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "cite",
                "list_sessions",
                "read_session",
                "search_events",
                "search_sessions"
            ]
        );
        for tool in &tools {
            let description = tool.description.as_deref().unwrap_or("");
            assert!(description.len() > 80, "{}: {description:?}", tool.name);
            let props = tool.input_schema["properties"].as_object().unwrap();
            assert!(
                props.contains_key("maxBytes") && props.contains_key("cursor"),
                "{}: {props:?}",
                tool.name
            );
            assert_eq!(
                tool.annotations.as_ref().and_then(|a| a.read_only_hint),
                Some(true)
            );
        }
        let schema = |name: &str| {
            tools
                .iter()
                .find(|t| t.name == name)
                .unwrap()
                .input_schema
                .clone()
        };
        assert_eq!(schema("search_sessions")["required"], json!(["query"]));
        assert_eq!(schema("read_session")["required"], json!(["sessionId"]));
        let surface_labels = &schema("search_sessions")["properties"]["surface"];
        assert!(
            surface_labels.to_string().contains("log-only"),
            "{surface_labels}"
        );

        let page = call(&server, "search_sessions", json!({"query": "parser"}))
            .await
            .json();
        assert_eq!(page["items"], search["items"]);
        assert_eq!(page["skipped"], search["skipped"]);
        assert_eq!(page["nextCursor"], Value::Null);

        let page = call(
            &server,
            "search_events",
            json!({"sessionId": CI, "query": "parser", "surface": ["shadowed", "current"]}),
        )
        .await
        .json();
        assert!(!inside["items"].as_array().unwrap().is_empty());
        assert_eq!(page["items"], inside["items"]);
        assert_eq!(page["session"], inside["session"]);

        let page = call(&server, "list_sessions", json!({})).await.json();
        assert_eq!(page["sessions"], sessions["sessions"]);
        assert_eq!(page["skipped"], sessions["skipped"]);

        let page = call(&server, "read_session", json!({"sessionId": CI}))
            .await
            .json();
        assert_eq!(page["events"], surface["events"]);
        assert_eq!(page["session"], surface["session"]);
        assert_eq!(page["capturedThroughSeq"], surface["capturedThroughSeq"]);

        let page = call(
            &server,
            "read_session",
            json!({"sessionId": CI, "mode": "events"}),
        )
        .await
        .json();
        let records: Vec<Value> = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| without(e.clone(), "text"))
            .collect();
        assert_eq!(Value::Array(records), events);
        let tool_result = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["seq"] == 7)
            .unwrap();
        assert!(
            tool_result["text"]
                .as_str()
                .unwrap()
                .contains("panicked at src/parser.rs:212:9"),
            "{tool_result}"
        );

        let page = call(
            &server,
            "read_session",
            json!({"sessionId": CI, "mode": "window", "seq": 7, "before": 2, "after": 3}),
        )
        .await
        .json();
        assert_eq!(page["events"], window["events"]);
        assert_eq!(page["startSeq"], window["startSeq"]);
        assert_eq!(page["endSeq"], window["endSeq"]);
        assert_eq!(page["targetSeq"], 7);

        let reply = call(
            &server,
            "cite",
            json!({"sessions": [CI], "callingSessionId": DOCS}),
        )
        .await;
        assert!(!reply.is_error, "{:?}", reply.texts);
        assert_eq!(reply.texts.len(), 2);
        let text = reply.texts[0].clone();
        assert!(
            text.starts_with("## Referenced sessions\n")
                && text.ends_with("</referenced-sessions>"),
            "{text}"
        );
        let meta: Value = serde_json::from_str(&reply.texts[1]).unwrap();
        assert_eq!(meta["sources"][0]["sessionId"], CI);
        assert_eq!(meta["nextCursor"], Value::Null);
        assert_eq!(meta["bytes"], text.len());

        // The command line's citation of the same source into the same session: the same text.
        let cited = cli(
            &env,
            &[
                "cite",
                "--into",
                DOCS,
                "--message",
                &format!("see {}", host_api::mention::format_mention(CI, None)),
            ],
        );
        let context = cited["appended"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["data"]["source"]["kind"] == "session-reference")
            .expect("the context message");
        assert_eq!(
            context["data"]["content"][0]["text"].as_str().unwrap(),
            text
        );
        server.client.cancel().await.unwrap();
    });
}

#[test]
fn an_oversized_answer_is_cut_to_its_budget_and_its_cursor_continues() {
    let env = mcp_env();
    let cli_hits = cli_search_all(&env, &["search", LONG_PHRASE, "--session", LONG_SESSION]);
    assert_eq!(cli_hits.len(), LONG_TURNS);
    let cli_events = cli(&env, &["events", LONG_SESSION]);
    let cli_surface = cli(&env, &["surface", LONG_SESSION]);

    runtime().block_on(async {
        let server = start(&env, &[]).await;
        // One page of the plugin's holds more hits than 1024 bytes: the page is cut and continued,
        // across the plugin's own pages too, and the pages together are the command line's hits.
        let args = json!({"sessionId": LONG_SESSION, "query": LONG_PHRASE, "maxBytes": 1024});
        let first = call(&server, "search_events", args.clone()).await;
        assert!(first.bytes() <= 1024, "{}", first.bytes());
        let first = first.json();
        assert!(first["nextCursor"].is_string(), "{first}");
        assert!(first["items"].as_array().unwrap().len() < LONG_TURNS);
        let hits = all_pages(&server, "search_events", args, "items").await;
        assert_eq!(hits, cli_hits);

        let events = all_pages(
            &server,
            "read_session",
            json!({"sessionId": LONG_SESSION, "mode": "events", "maxBytes": 2048}),
            "events",
        )
        .await;
        let records: Vec<Value> = events.iter().map(|e| without(e.clone(), "text")).collect();
        assert_eq!(Value::Array(records), cli_events);

        // The surface holds an event of 60 kB: alone on its page, cut to the budget with a marker, and
        // the cursor goes on to the events after it.
        let surface = all_pages(
            &server,
            "read_session",
            json!({"sessionId": LONG_SESSION, "maxBytes": 4096}),
            "events",
        )
        .await;
        let expected = cli_surface["events"].as_array().unwrap();
        assert_eq!(surface.len(), expected.len());
        let huge_seq = expected
            .iter()
            .find(|e| e.to_string().len() > HUGE_OUTPUT_BYTES)
            .expect("the huge tool output is on the surface")["seq"]
            .clone();
        for (got, want) in surface.iter().zip(expected) {
            if want["seq"] == huge_seq {
                assert_ne!(got, want);
                assert!(got.to_string().contains("…[cut "), "{got}");
                assert_eq!(got["seq"], want["seq"]);
                assert_eq!(got["type"], want["type"]);
            } else {
                assert_eq!(got, want);
            }
        }
        let alone = call(
            &server,
            "read_session",
            json!({"sessionId": LONG_SESSION, "mode": "window", "seq": huge_seq, "before": 0, "after": 2, "maxBytes": 4096}),
        )
        .await;
        assert!(alone.bytes() <= 4096);
        let alone = alone.json();
        assert_eq!(alone["cut"], true);
        assert_eq!(alone["events"].as_array().unwrap().len(), 1);
        assert!(alone["nextCursor"].is_string());

        // Without maxBytes the budget is the default: the 60 kB event still comes cut, within 20,000 bytes.
        let default = call(&server, "read_session", json!({"sessionId": LONG_SESSION})).await;
        assert!(default.bytes() <= 20_000, "{}", default.bytes());
        assert!(default.json()["nextCursor"].is_string());

        // A citation larger than its budget comes in parts that add up to the whole snapshot.
        let whole = call(&server, "cite", json!({"sessions": [LONG_SESSION], "maxBytes": 1_048_576})).await;
        assert!(!whole.is_error, "{:?}", whole.texts);
        let whole_text = whole.texts[0].clone();
        assert!(whole_text.len() > 4 * 1024);
        let mut text = String::new();
        let mut args = json!({"sessions": [LONG_SESSION], "maxBytes": 4096});
        let mut parts = 0;
        loop {
            let part = call(&server, "cite", args.clone()).await;
            assert!(!part.is_error, "{:?}", part.texts);
            assert!(part.bytes() <= 4096, "{}", part.bytes());
            text.push_str(&part.texts[0]);
            parts += 1;
            let meta: Value = serde_json::from_str(&part.texts[1]).unwrap();
            match meta["nextCursor"].as_str() {
                Some(next) => args["cursor"] = next.into(),
                None => break,
            }
        }
        assert!(parts > 1);
        assert_eq!(text, whole_text);
        server.client.cancel().await.unwrap();
    });
}

#[test]
fn bad_arguments_are_tool_errors_with_our_codes() {
    let env = mcp_env();
    runtime().block_on(async {
        let server = start(&env, &[]).await;
        let cases = [
            ("search_sessions", json!({"query": "   "}), "SESSION_QUERY_INVALID_QUERY: "),
            ("search_sessions", json!({}), "HOST_INVALID_ARGUMENTS: search_sessions: missing field `query`"),
            ("search_sessions", json!({"query": "x", "bogus": 1}), "HOST_INVALID_ARGUMENTS: search_sessions: unknown field `bogus`"),
            ("search_sessions", json!({"query": "x", "surface": ["visible"]}), "HOST_INVALID_ARGUMENTS: "),
            ("search_sessions", json!({"query": "x", "since": "last tuesday"}), "SESSION_QUERY_INVALID_FILTER: since \"last tuesday\""),
            ("search_sessions", json!({"query": "x", "maxBytes": 10}), "HOST_INVALID_ARGUMENTS: maxBytes must be between 1024 and 1048576, not 10"),
            ("search_sessions", json!({"query": "x", "cursor": "not-a-cursor"}), "SESSION_QUERY_INVALID_CURSOR: "),
            ("search_events", json!({"sessionId": "no-such-session", "query": "x"}), "SESSION_QUERY_SESSION_NOT_FOUND: "),
            ("read_session", json!({"sessionId": "no-such-session"}), "SESSION_QUERY_SESSION_NOT_FOUND: "),
            ("read_session", json!({"sessionId": CI, "mode": "window"}), "SESSION_QUERY_INVALID_WINDOW: "),
            ("read_session", json!({"sessionId": CI, "seq": 3}), "HOST_INVALID_ARGUMENTS: "),
            ("read_session", json!({"sessionId": CI, "mode": "window", "seq": 9999}), "SESSION_QUERY_EVENT_NOT_FOUND: "),
            ("cite", json!({"sessions": []}), "SESSION_REFERENCE_INVALID_REFERENCE: "),
            ("cite", json!({"sessions": [CI], "callingSessionId": CI}), "SESSION_REFERENCE_SELF_REFERENCE: "),
            ("cite", json!({"sessions": [CI, DOCS, LONG_SESSION, "demo-ci-fix-child"]}), "SESSION_REFERENCE_TOO_MANY: "),
            ("cite", json!({"sessions": ["no-such-session"]}), "SESSION_REFERENCE_READ_FAILED: "),
        ];
        for (tool, args, want) in cases {
            let reply = call(&server, tool, args.clone()).await;
            let text = reply.error();
            assert!(text.starts_with(want), "{tool} {args}: {text}");
        }

        // A cursor is bound to its tool and to its arguments.
        let args = json!({"sessionId": LONG_SESSION, "query": LONG_PHRASE, "maxBytes": 1024});
        let page = call(&server, "search_events", args).await.json();
        let cursor = page["nextCursor"].as_str().expect("a second page").to_string();
        let reply = call(&server, "read_session", json!({"sessionId": CI, "cursor": cursor})).await;
        assert!(reply.error().starts_with("SESSION_QUERY_INVALID_CURSOR: ") && reply.error().contains("search_events"), "{}", reply.error());
        let other = json!({"sessionId": LONG_SESSION, "query": "lexer", "maxBytes": 1024, "cursor": cursor});
        let reply = call(&server, "search_events", other).await;
        assert!(reply.error().starts_with("SESSION_QUERY_INVALID_CURSOR: ") && reply.error().contains("other arguments"), "{}", reply.error());
        // The server still answers after all of that.
        assert!(!call(&server, "list_sessions", json!({})).await.is_error);
        server.client.cancel().await.unwrap();
    });
}

#[test]
fn the_calling_session_is_left_out_of_results() {
    let env = mcp_env();
    runtime().block_on(async {
        // Named when the server starts…
        let server = start(&env, &["--session", CI]).await;
        let ids = |page: &Value| -> Vec<String> {
            page["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["header"]["id"].as_str().unwrap().to_string())
                .collect()
        };
        let listed = ids(&call(&server, "list_sessions", json!({})).await.json());
        assert!(
            !listed.contains(&CI.to_string()) && listed.contains(&DOCS.to_string()),
            "{listed:?}"
        );
        let hits = call(&server, "search_sessions", json!({"query": "parser"}))
            .await
            .json();
        assert!(
            hits["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|h| h["sessionId"] != CI),
            "{hits}"
        );
        let reply = call(&server, "cite", json!({"sessions": [CI]})).await;
        assert!(
            reply
                .error()
                .starts_with("SESSION_REFERENCE_SELF_REFERENCE: "),
            "{}",
            reply.error()
        );
        // Its own session by id still answers: what a compaction took out of its context is there.
        let own = call(
            &server,
            "search_events",
            json!({"sessionId": CI, "query": "parser", "surface": ["shadowed"], "callingSessionId": CI}),
        )
        .await
        .json();
        assert!(!own["items"].as_array().unwrap().is_empty(), "{own}");
        let own = call(&server, "read_session", json!({"sessionId": CI, "callingSessionId": CI})).await;
        assert!(!own.is_error);

        // …or by the call, which wins.
        let listed = ids(
            &call(&server, "list_sessions", json!({"callingSessionId": DOCS}))
                .await
                .json(),
        );
        assert!(
            listed.contains(&CI.to_string()) && !listed.contains(&DOCS.to_string()),
            "{listed:?}"
        );
        let hits = call(
            &server,
            "search_sessions",
            json!({"query": "parser", "callingSessionId": DOCS}),
        )
        .await
        .json();
        assert!(
            hits["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h["sessionId"] == CI),
            "{hits}"
        );
        server.client.cancel().await.unwrap();
    });
}

#[test]
fn a_plugin_rebuilt_while_the_server_runs_answers_the_next_call() {
    let env = mcp_env();
    runtime().block_on(async {
        let server = start(&env, &[]).await;
        let before = call(&server, "list_sessions", json!({})).await.json();
        install(
            &libs().next_version,
            &env.plugins,
            "libdsh_session_search.so",
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if server
                .stderr
                .lock()
                .unwrap()
                .contains("reloaded dsh-session-search 0.1.0 → dsh-session-search 0.2.0-next")
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no reload logged: {}",
                server.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let after = call(&server, "list_sessions", json!({})).await.json();
        assert_eq!(after["sessions"], before["sessions"]);
        server.client.cancel().await.unwrap();
        // Nothing but the protocol went to stdout: the log is on stderr, timestamped.
        let log = server.stderr.lock().unwrap().clone();
        assert!(log.contains("serving sessions over MCP on stdio"), "{log}");
    });
}

/// Regression: the binary held stdout locked while a command ran, and the server writes the protocol
/// from its own threads, so the first answer would never come. Here the protocol is spoken by hand:
/// every line on stdout must be JSON-RPC, and SIGTERM must stop the server cleanly (exit status 0).
#[test]
fn stdout_carries_only_the_protocol_and_sigterm_stops_the_server() {
    use std::io::{BufRead, BufReader, Write};

    let env = mcp_env();
    let mut child = env
        .sample_host()
        .arg("mcp")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sample-host mcp starts");
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "by-hand", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_sessions", "arguments": {"query": "parser"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search_sessions", "arguments": {"query": 7}}}),
    ];
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();

    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut answers = std::collections::HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines_rx
            .recv_timeout(left)
            .expect("the server answers on stdout");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout holds a line that is not JSON-RPC ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message);
        }
    }
    assert_eq!(
        answers[&1]["result"]["serverInfo"]["name"],
        "dsh-session-search"
    );
    let hit: Value = serde_json::from_str(
        answers[&2]["result"]["content"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(hit["items"][0]["sessionId"], CI, "{hit}");
    assert_eq!(answers[&3]["result"]["isError"], true, "{}", answers[&3]);
    let text = answers[&3]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("HOST_INVALID_ARGUMENTS: search_sessions: invalid type"),
        "{text}"
    );

    // stdin stays open: only the signal ends the server.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(exit.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("signal received: stopping the MCP server"),
        "{stderr}"
    );
    assert!(stderr.contains("dropped at shutdown"), "{stderr}");
}
