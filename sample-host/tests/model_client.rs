//! The OpenAI-compatible client and the chat over it, against a scripted HTTP server on 127.0.0.1: a
//! streamed reply with the engine's figures, the API key sent but never written, and every failure
//! (refused connection, an HTTP error with the server's message, a reply cut off, a timeout) reported
//! with its code while the session log stays byte-identical.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use sample_host::chat::mention;
use sample_host::chat::model::Model;
use sample_host::chat::{ChatEnv, ChatSession};
use sample_host::demo;
use sample_host::openai::{ModelConfig, OpenAiClient};
use serde_json::Value;

mod support;
use support::{fixture, Fixture};

/// One scripted answer: what the server writes after reading a request (then it closes).
#[derive(Clone)]
enum Answer {
    Raw(String),
    /// Reads the request and then says nothing for this long.
    Silent(Duration),
}

/// A server answering each connection with the next answer; the requests it read come back on the
/// channel (request line, headers and body).
fn serve(answers: Vec<Answer>) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for answer in answers {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            head.push_str(&String::from_utf8_lossy(&body));
            let _ = tx.send(head);
            match answer {
                Answer::Raw(text) => {
                    let _ = stream.write_all(text.as_bytes());
                }
                Answer::Silent(d) => thread::sleep(d),
            }
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), rx)
}

fn sse(events: &[&str]) -> String {
    let mut body = String::new();
    for e in events {
        body.push_str(&format!("data: {e}\n\n"));
    }
    format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{body}")
}

const DELTA_HEL: &str =
    r#"{"model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#;
const DELTA_LO: &str = r#"{"model":"tiny","choices":[{"index":0,"delta":{"content":"lo."}}]}"#;
const FINISH: &str =
    r#"{"model":"tiny","choices":[{"index":0,"finish_reason":"stop","delta":{}}]}"#;
const USAGE: &str = r#"{"model":"tiny","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":31}},"timings":{"cache_n":31,"prompt_n":9,"prompt_ms":1.25,"predicted_n":2}}"#;

fn complete_stream() -> Answer {
    Answer::Raw(sse(&[DELTA_HEL, DELTA_LO, FINISH, USAGE, "[DONE]"]))
}

fn client(url: &str, key_env: Option<&str>, read_timeout: Duration) -> OpenAiClient {
    let config = ModelConfig {
        model_name: Some("tiny".into()),
        api_key_env: key_env.map(str::to_string),
        read_timeout,
        ..ModelConfig::new(url)
    };
    OpenAiClient::new(&config).unwrap()
}

fn log_of(f: &Fixture, id: &str) -> PathBuf {
    f.shared
        .live
        .log_path(id)
        .unwrap_or_else(|| panic!("{id} is not persisted under {}", f.root.display()))
}

#[test]
fn a_streamed_reply_arrives_in_pieces_and_is_appended_whole_with_the_engines_figures() {
    std::env::set_var("SAMPLE_HOST_TEST_KEY_STREAM", "sk-stream-secret-1");
    let f = fixture();
    let (url, requests) = serve(vec![complete_stream(), complete_stream()]);
    let model = Model::OpenAi(client(
        &url,
        Some("SAMPLE_HOST_TEST_KEY_STREAM"),
        Duration::from_secs(10),
    ));
    let env = ChatEnv::new(&f.shared, &f.services).with_model(&model);
    let mut chat = ChatSession::open(env, Some("streamed")).unwrap();

    struct Pieces(Vec<String>);
    impl sample_host::chat::TurnSink for Pieces {
        fn delta(&mut self, text: &str) {
            self.0.push(text.to_string());
        }
    }
    let mut pieces = Pieces(Vec::new());
    let turn = chat.send_streaming("hello", &mut pieces).unwrap();
    assert_eq!(pieces.0, vec!["Hel", "lo."]);
    assert_eq!(turn.reply, "Hello.");
    let engine = turn.engine.expect("the engine's figures");
    assert_eq!(engine.cached_tokens, Some(31));
    assert_eq!(engine.evaluated_tokens, Some(9));
    assert_eq!(engine.prompt_tokens, Some(40));
    assert_eq!(engine.prompt_ms, Some(1.25));

    // The request: the rendered chat messages, streamed, with the key as a bearer token only.
    let request = requests.recv().unwrap();
    assert!(
        request.starts_with("POST /v1/chat/completions "),
        "{request}"
    );
    assert!(request.contains("Bearer sk-stream-secret-1"), "{request}");
    let body: Value =
        serde_json::from_str(&request[request.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["model"], "tiny");
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["role"], "user");
    assert_eq!(body["messages"][1]["content"], "hello");

    // The next request starts with exactly the previous messages and the reply.
    let second = chat.send("and then?").unwrap();
    assert_eq!(second.chat[..turn.chat.len()], turn.chat[..]);
    assert_eq!(second.chat[turn.chat.len()].content, "Hello.");
    assert_eq!(second.chat[turn.chat.len()].role, "assistant");

    let stored = dsh_codec::log::read::read_log(
        &log_of(&f, "streamed"),
        &dsh_codec::log::read::ReadOptions::default(),
    )
    .unwrap();
    let log: String = stored
        .events
        .iter()
        .map(|e| e.to_value().to_string())
        .collect();
    assert!(log.contains("\"Hello.\""));
    assert!(log.contains("openai-compatible"));
    assert!(
        !log.contains("sk-stream-secret-1"),
        "the API key reached the log"
    );
}

/// Sends one line that must fail with `code`, and checks the log did not change by a byte.
fn fails_leaving_the_log_alone(
    answer: Option<Answer>,
    read_timeout: Duration,
    code: &str,
) -> String {
    let f = fixture();
    // A session with one good turn first, so there is a log to compare.
    let (url, _requests) = serve(
        std::iter::once(complete_stream())
            .chain(answer.clone())
            .collect(),
    );
    let good = Model::OpenAi(client(&url, None, Duration::from_secs(10)));
    let env = ChatEnv::new(&f.shared, &f.services).with_model(&good);
    let mut chat = ChatSession::open(env, Some("target")).unwrap();
    chat.send("hello").unwrap();
    let path = log_of(&f, "target");
    let before = std::fs::read(&path).unwrap();
    let events_before = f.shared.live.next_seq("target").unwrap();

    // Without an answer, the failing turn goes to a port nothing listens on.
    let failing_url = if answer.is_some() {
        url
    } else {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}/v1")
    };
    let bad = Model::OpenAi(client(&failing_url, None, read_timeout));
    let env = ChatEnv::new(&f.shared, &f.services).with_model(&bad);
    let mut chat = ChatSession::open(env, Some("target")).unwrap();
    let line = format!(
        "{} what did it say?",
        mention::format(demo::CI_SESSION, None)
    );
    let e = chat.send(&line).unwrap_err();
    assert_eq!(e.code(), code, "{e}");
    assert!(
        e.message().contains("nothing was appended"),
        "{}",
        e.message()
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "the log changed");
    assert_eq!(f.shared.live.next_seq("target").unwrap(), events_before);
    e.message()
}

#[test]
fn a_refused_connection_is_reported_and_appends_nothing() {
    let message =
        fails_leaving_the_log_alone(None, Duration::from_secs(5), "HOST_MODEL_UNREACHABLE");
    assert!(
        message.contains("cannot reach the model at http://127.0.0.1:"),
        "{message}"
    );
}

#[test]
fn an_http_error_shows_the_servers_message_and_appends_nothing() {
    let body = r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#;
    let answer = Answer::Raw(format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let message = fails_leaving_the_log_alone(
        Some(answer),
        Duration::from_secs(5),
        "HOST_MODEL_HTTP_ERROR",
    );
    assert!(message.contains("HTTP 400"), "{message}");
    assert!(
        message.contains("exceeds the available context size"),
        "{message}"
    );
}

#[test]
fn a_reply_cut_off_mid_stream_appends_nothing() {
    // Two pieces of text, then the connection closes: no finish reason, no [DONE].
    let answer = Answer::Raw(sse(&[DELTA_HEL, DELTA_LO]));
    let message = fails_leaving_the_log_alone(
        Some(answer),
        Duration::from_secs(5),
        "HOST_MODEL_REPLY_CUT_OFF",
    );
    assert!(message.contains("without a finish reason"), "{message}");
}

#[test]
fn a_reply_cut_off_inside_an_event_appends_nothing() {
    let torn = format!(
        "{}data: {{\"choices\":[{{\"delta\":{{\"cont",
        &sse(&[DELTA_HEL])[..]
    );
    let message = fails_leaving_the_log_alone(
        Some(Answer::Raw(torn)),
        Duration::from_secs(5),
        "HOST_MODEL_REPLY_CUT_OFF",
    );
    assert!(message.contains("cut off"), "{message}");
}

#[test]
fn a_server_that_stops_answering_times_out_and_appends_nothing() {
    let message = fails_leaving_the_log_alone(
        Some(Answer::Silent(Duration::from_secs(5))),
        Duration::from_secs(1),
        "HOST_MODEL_TIMEOUT",
    );
    assert!(message.contains("did not answer within 1 s"), "{message}");
}

#[test]
fn an_error_event_in_the_stream_is_the_servers_error() {
    let (url, _r) = serve(vec![Answer::Raw(sse(&[
        DELTA_HEL,
        r#"{"error":{"code":500,"message":"slot unavailable"}}"#,
    ]))]);
    let c = client(&url, None, Duration::from_secs(5));
    let e = c
        .complete(
            &[sample_host::request::ChatMessage::new("user", "x")],
            None,
            &mut |_| {},
        )
        .unwrap_err();
    assert_eq!(e.code(), "HOST_MODEL_HTTP_ERROR");
    assert!(e.to_string().contains("slot unavailable"), "{e}");
}
