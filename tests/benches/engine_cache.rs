//! What a citation costs a real engine's prompt cache, measured by the engine (llama.cpp's
//! `llama-server` with the tiny test model, one slot, prompt caching on; see `tools/llama/build.sh`).
//!
//! A 20-turn scripted chat with two citations runs twice on the same server:
//! - **appended** (the host's own flow, through `ChatSession` and the real plugin): the context message
//!   and then the line go after all earlier history;
//! - **inserted before the history** (the baseline): the same lines and the same snapshots, but each
//!   snapshot put right after the system prompt, before all earlier history (earlier snapshots
//!   included), as a host that keeps "background" first would.
//!
//! Each variant runs on a fresh server and keeps its own replies, so each request meets exactly what
//! its own previous one left in the slot. Per request it prints prompt tokens, cached tokens, evaluated tokens and the engine's
//! prompt-eval time, then the totals and their ratio (baseline / appended).
//!
//! `cargo bench -p tests --bench engine_cache` (the first run builds the engine, a few minutes).

use sample_host::chat::mention;
use sample_host::chat::model::Model;
use sample_host::chat::plugin::PluginServices;
use sample_host::chat::{ChatEnv, ChatSession};
use sample_host::commands::{start_host, Options};
use sample_host::demo;
use sample_host::openai::{EngineFigures, ModelConfig, OpenAiClient};
use sample_host::request::{ChatMessage, SYSTEM_PROMPT};
use tests::engine::{engine, Server};
use tests::libs::{install, libs};

const TURNS: usize = 20;
const CITE_AT: [(usize, &str); 2] = [(6, demo::CI_SESSION), (13, demo::DOCS_SESSION)];
const REPLY_TOKENS: u32 = 12;

fn line(turn: usize) -> String {
    const TOPICS: [&str; 5] = [
        "the parser",
        "the fold",
        "the watch loop",
        "the release notes",
        "the tokenizer",
    ];
    let topic = TOPICS[turn % TOPICS.len()];
    match CITE_AT.iter().find(|(t, _)| *t == turn) {
        Some((_, id)) => format!(
            "Look at {} and tell me what it decided about {topic}.",
            mention::format(id, None)
        ),
        None => format!("Turn {turn}: what should change next in {topic}, and why?"),
    }
}

struct Row {
    figures: EngineFigures,
    cited: bool,
}

fn main() {
    let Some(engine) = engine() else { return };
    let server = Server::start(&engine, REPLY_TOKENS);
    let client = |url: &str| {
        OpenAiClient::new(&ModelConfig::new(url)).expect("the server's URL is a model URL")
    };

    // Appended: the host's own flow over the real plugin.
    let dir = tempfile::tempdir().expect("temporary folder");
    let sessions = dir.path().join("sessions");
    demo::write_demo_corpus(&sessions).expect("demo corpus");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugin folder");
    install(&libs().plugin, &plugins, "libdsh_session_search.so");
    let options = Options {
        plugins: Some(plugins),
        sessions: Some(sessions.clone()),
        index: Some(dir.path().join("index.sqlite")),
        ..Options::default()
    };
    let host = start_host(&options, sessions).expect("the plugin host starts");
    assert!(host.serving().is_some(), "the plugin did not load");
    let services = PluginServices::new(&host);
    let model = Model::OpenAi(client(&server.base_url()));
    let env = ChatEnv::new(host.shared(), &services).with_model(&model);
    let mut chat = ChatSession::open(env, Some("bench-chat")).expect("the chat opens");
    let mut appended = Vec::new();
    // What the baseline sends: the same lines and snapshots, each snapshot moved before the history.
    let mut script: Vec<(Option<ChatMessage>, ChatMessage)> = Vec::new();
    for turn in 0..TURNS {
        let done = chat.send(&line(turn)).expect("a turn of the appended chat");
        let n = done.chat.len();
        let user = done.chat[n - 1].clone();
        let context = (!done.citations.is_empty()).then(|| done.chat[n - 2].clone());
        appended.push(Row {
            figures: done.engine.expect("the engine's figures"),
            cited: context.is_some(),
        });
        script.push((context, user));
    }
    drop(chat);
    host.shutdown();
    drop(server);

    // Inserted before the history: a second conversation on a fresh server, with its own replies.
    let server = Server::start(&engine, REPLY_TOKENS);
    let baseline_client = client(&server.base_url());
    let mut messages = vec![ChatMessage::new("system", SYSTEM_PROMPT)];
    let mut inserted = Vec::new();
    for (context, user) in script {
        let cited = context.is_some();
        if let Some(context) = context {
            messages.insert(1, context);
        }
        messages.push(user);
        let done = baseline_client
            .complete(&messages, None, &mut |_| {})
            .expect("a turn of the baseline chat");
        messages.push(ChatMessage::new("assistant", done.text));
        inserted.push(Row {
            figures: done.engine.expect("the engine's figures"),
            cited,
        });
    }

    let v = |x: Option<u64>| x.unwrap_or(0);
    println!("engine_cache: {TURNS} turns, citations at turns {} and {}, llama-server, 1 slot, replies of {REPLY_TOKENS} tokens", CITE_AT[0].0 + 1, CITE_AT[1].0 + 1);
    println!(
        "{:>4}  {:>33}  |  {:>33}",
        "turn", "appended before the line", "inserted before the history"
    );
    println!(
        "{:>4}  {:>7} {:>7} {:>7} {:>9}  |  {:>7} {:>7} {:>7} {:>9}",
        "", "prompt", "cached", "eval", "eval ms", "prompt", "cached", "eval", "eval ms"
    );
    let mut totals = [(0u64, 0.0f64); 2];
    for (i, (a, b)) in appended.iter().zip(&inserted).enumerate() {
        let (fa, fb) = (&a.figures, &b.figures);
        println!(
            "{:>4}{} {:>7} {:>7} {:>7} {:>9.2}  |  {:>7} {:>7} {:>7} {:>9.2}",
            i + 1,
            if a.cited || b.cited { "*" } else { " " },
            v(fa.prompt_tokens),
            v(fa.cached_tokens),
            v(fa.evaluated_tokens),
            fa.prompt_ms.unwrap_or(0.0),
            v(fb.prompt_tokens),
            v(fb.cached_tokens),
            v(fb.evaluated_tokens),
            fb.prompt_ms.unwrap_or(0.0),
        );
        totals[0].0 += v(fa.evaluated_tokens);
        totals[0].1 += fa.prompt_ms.unwrap_or(0.0);
        totals[1].0 += v(fb.evaluated_tokens);
        totals[1].1 += fb.prompt_ms.unwrap_or(0.0);
    }
    println!("(* = a citation turn)");
    println!(
        "evaluated prompt tokens: appended {} vs inserted {} ({:.2}x); prompt-eval time: {:.1} ms vs {:.1} ms ({:.2}x)",
        totals[0].0,
        totals[1].0,
        totals[1].0 as f64 / totals[0].0.max(1) as f64,
        totals[0].1,
        totals[1].1,
        totals[1].1 / totals[0].1.max(f64::EPSILON),
    );
}
