//! The prompt-cache claim measured by a real engine: llama.cpp's `llama-server` with a tiny model
//! (`tools/llama/build.sh`), one slot, prompt caching on. `sample-host chat --model URL` is driven
//! through a scripted session with a citation in the middle, lines piped in, and the engine's own
//! figures must say that every request after the first found the whole previous request, its prompt
//! and its reply, in the cache. The same binary against a closed port and a wrong path must fail with
//! its code and leave the log byte-identical.
//!
//! Skips (loudly) where the engine cannot be built, except under CI.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::Value;
use tests::engine::{engine, free_port, Server};
use tests::host::{demo_env, log_file, DemoEnv};

/// The engine's replies are capped at this many tokens (the tiny model never ends one by itself).
const REPLY_TOKENS: u32 = 12;
const KEY_VAR: &str = "DSH_ENGINE_TEST_API_KEY";
const KEY: &str = "sk-engine-test-do-not-log";

fn chat(env: &DemoEnv, model: &[&str], lines: &[String]) -> Output {
    let mut child = env
        .sample_host()
        .args(["--json", "chat", "--session", "engine-chat"])
        .args(model)
        .env(KEY_VAR, KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sample-host runs");
    {
        let mut stdin = child.stdin.take().unwrap();
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
    }
    child.wait_with_output().expect("sample-host finishes")
}

/// The JSON objects of a `chat --json` run, one per turn or error.
fn turns(out: &Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The session's log file (zstd or raw, as the host wrote it).
/// Every event of the log as one JSON text, to look for what was (or was not) written.
fn log_text(path: &Path) -> String {
    dsh_codec::log::read::read_log(path, &dsh_codec::log::read::ReadOptions::default())
        .unwrap()
        .events
        .iter()
        .map(|e| e.to_value().to_string() + "\n")
        .collect()
}

fn figure(turn: &Value, name: &str) -> u64 {
    turn["engine"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no engine.{name} in {turn}"))
}

#[test]
fn every_request_finds_the_whole_previous_request_in_the_engines_cache() {
    let Some(engine) = engine() else { return };
    let server = Server::start(&engine, REPLY_TOKENS);
    let env = demo_env();
    let url = server.base_url();
    let mention = sample_host::chat::mention::format(sample_host::demo::CI_SESSION, None);
    let lines = vec![
        "Hello, I'm back on the parser.".to_string(),
        "What did we decide about the tokenizer?".to_string(),
        format!("What was the stack in {mention}, and what fixed it?"),
        "And does that change the fold?".to_string(),
        "Thanks, that's what I needed.".to_string(),
    ];
    let out = chat(&env, &["--model", &url, "--api-key-env", KEY_VAR], &lines);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "chat failed: {stderr}\n{}",
        server.log()
    );
    let turns = turns(&out);
    assert_eq!(turns.len(), lines.len(), "{turns:#?}\n{stderr}");

    eprintln!("turn  prompt  cached  evaluated  reply  sharedPrefixBytes/previousRequestBytes");
    for (i, turn) in turns.iter().enumerate() {
        assert!(turn.get("error").is_none(), "turn {i}: {turn}");
        eprintln!(
            "{i:>4}  {:>6}  {:>6}  {:>9}  {:>5}  {}/{}",
            figure(turn, "promptTokens"),
            figure(turn, "cachedTokens"),
            figure(turn, "evaluatedTokens"),
            figure(turn, "completionTokens"),
            turn["sharedPrefixBytes"],
            turn["previousRequestBytes"]
        );
        // The host's own figure: the previous request is a byte prefix of this one.
        assert_eq!(
            turn["sharedPrefixBytes"], turn["previousRequestBytes"],
            "turn {i}: {turn}"
        );
    }
    for (i, pair) in turns.windows(2).enumerate() {
        let (before, after) = (&pair[0], &pair[1]);
        let previous = figure(before, "promptTokens") + figure(before, "completionTokens");
        // llama.cpp samples a reply's last token without running it through the model, so the slot
        // holds the previous prompt and every reply token but that last one.
        assert!(
            figure(after, "cachedTokens") + 1 >= previous,
            "turn {}: the engine took {} tokens from its cache, but the previous request held {} \
             ({} prompt + {} reply):\n{after}",
            i + 1,
            figure(after, "cachedTokens"),
            previous,
            figure(before, "promptTokens"),
            figure(before, "completionTokens"),
        );
        assert_eq!(
            figure(after, "cachedTokens") + figure(after, "evaluatedTokens"),
            figure(after, "promptTokens")
        );
    }
    let cited = &turns[2];
    assert_eq!(
        cited["citations"].as_array().map(Vec::len),
        Some(1),
        "{cited}"
    );
    // The snapshot is real work for the engine: it evaluated it, on top of the cached history.
    assert!(
        figure(cited, "evaluatedTokens") > 100,
        "the snapshot was not evaluated: {cited}"
    );
    assert!(
        cited["contrast"]["beforeHistorySharedPrefixBytes"].as_u64()
            < cited["previousRequestBytes"].as_u64(),
        "{cited}"
    );

    // The replies are in the log as the assistant's, and the key is nowhere.
    let log = log_text(&log_file(&env.sessions, "engine-chat"));
    for turn in &turns {
        let reply = serde_json::to_string(turn["reply"].as_str().unwrap()).unwrap();
        assert!(log.contains(&reply), "reply {reply} is not in the log");
    }
    assert!(log.contains("openai-compatible"));
    assert!(!log.contains(KEY), "the API key reached the session log");
    assert!(!stderr.contains(KEY), "the API key reached stderr");
}

#[test]
fn a_closed_port_and_a_wrong_path_fail_with_their_codes_and_leave_the_log_alone() {
    let Some(engine) = engine() else { return };
    let server = Server::start(&engine, REPLY_TOKENS);
    let env = demo_env();
    let url = server.base_url();
    let out = chat(&env, &["--model", &url], &["hello".to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = log_file(&env.sessions, "engine-chat");
    let before = std::fs::read(&path).unwrap();

    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    let wrong = format!("{url}/no-such-api");
    for (model, code) in [
        (closed.as_str(), "HOST_MODEL_UNREACHABLE"),
        (wrong.as_str(), "HOST_MODEL_HTTP_ERROR"),
    ] {
        let out = chat(&env, &["--model", model], &["one more line".to_string()]);
        let turns = turns(&out);
        assert_eq!(turns.len(), 1, "{turns:?}");
        assert_eq!(turns[0]["error"]["code"], code, "{}", turns[0]);
        let message = turns[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains(model), "{message}");
        assert!(message.contains("nothing was appended"), "{message}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{model}: the log changed"
        );
    }

    // A key variable that is not set is refused before anything starts.
    let out = chat(
        &env,
        &[
            "--model",
            &url,
            "--api-key-env",
            "DSH_ENGINE_TEST_NO_SUCH_VAR",
        ],
        &["hello".to_string()],
    );
    assert_eq!(out.status.code(), Some(1));
    let turns = turns(&out);
    assert_eq!(
        turns[0]["error"]["code"], "HOST_MODEL_API_KEY_MISSING",
        "{turns:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
