//! A blocking client for OpenAI-compatible chat completions (`POST {base}/chat/completions`, streamed):
//! llama.cpp's server, vLLM, Ollama, hosted providers.
//!
//! The reply is streamed: each text delta is handed to the caller as it arrives, and the whole text is
//! returned only once the server has said it is complete (a `finish_reason`, or `[DONE]`), so a caller
//! that appends only what this returns never appends half a reply. With the reply come the engine's own
//! prompt-cache figures ([`EngineFigures`]): llama.cpp's `timings` (`cache_n`, `prompt_n`,
//! `prompt_ms`) where present, else the standard `usage.prompt_tokens_details.cached_tokens`.
//!
//! The API key is read once from the environment variable the user named and sent only as the
//! `Authorization` header; nothing here logs it or puts it in an error.

pub mod sse;

use std::fmt;
use std::io::{self, BufReader, Read};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use crate::request::ChatMessage;
use sse::SseReader;

/// How long to wait to connect, and for each read of a streamed reply (a stall, not the whole reply).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// What the command line says about the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// The OpenAI-style base URL, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// The model to ask for; the server's first listed model when absent.
    pub model_name: Option<String>,
    /// The environment variable holding the API key, if the server wants one.
    pub api_key_env: Option<String>,
    pub read_timeout: Duration,
}

impl ModelConfig {
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model_name: None,
            api_key_env: None,
            read_timeout: READ_TIMEOUT,
        }
    }
}

/// Why a completion failed. The message names the cause and the URL; it never holds the API key.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model URL {url:?} is not an http:// or https:// URL")]
    BadUrl { url: String },
    #[error("the API key variable {var} named by --api-key-env is not set (or empty)")]
    ApiKeyMissing { var: String },
    #[error("cannot reach the model at {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("the model at {url} did not answer within {secs} s ({during})")]
    Timeout {
        url: String,
        secs: u64,
        during: &'static str,
    },
    #[error("the model at {url} answered HTTP {status}: {message}")]
    Status {
        url: String,
        status: u16,
        message: String,
    },
    #[error("the model's reply from {url} was cut off: {why}")]
    CutOff { url: String, why: String },
    #[error("the model at {url} sent something that is not a chat completion: {why}")]
    BadReply { url: String, why: String },
}

impl ModelError {
    /// The code a user or a script sees.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::BadUrl { .. } => "HOST_MODEL_BAD_URL",
            ModelError::ApiKeyMissing { .. } => "HOST_MODEL_API_KEY_MISSING",
            ModelError::Unreachable { .. } => "HOST_MODEL_UNREACHABLE",
            ModelError::Timeout { .. } => "HOST_MODEL_TIMEOUT",
            ModelError::Status { .. } => "HOST_MODEL_HTTP_ERROR",
            ModelError::CutOff { .. } => "HOST_MODEL_REPLY_CUT_OFF",
            ModelError::BadReply { .. } => "HOST_MODEL_BAD_REPLY",
        }
    }
}

/// The engine's own account of a request's prompt. Each figure is what the server reported, absent when
/// it reported nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineFigures {
    /// Prompt tokens in all.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens taken from the engine's cache.
    pub cached_tokens: Option<u64>,
    /// Prompt tokens the engine evaluated anew.
    pub evaluated_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Time the engine spent evaluating the prompt, in milliseconds (llama.cpp's `timings.prompt_ms`).
    pub prompt_ms: Option<f64>,
}

impl EngineFigures {
    /// Reads the figures from a final chunk (or a whole non-streamed answer); `None` when it has none.
    pub fn from_chunk(chunk: &Value) -> Option<Self> {
        let u = |v: &Value| v.as_u64();
        let usage = chunk.get("usage").filter(|v| v.is_object());
        let timings = chunk.get("timings").filter(|v| v.is_object());
        if usage.is_none() && timings.is_none() {
            return None;
        }
        let mut f = EngineFigures::default();
        if let Some(usage) = usage {
            f.prompt_tokens = usage.get("prompt_tokens").and_then(u);
            f.completion_tokens = usage.get("completion_tokens").and_then(u);
            f.cached_tokens = usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(u);
        }
        if let Some(t) = timings {
            // llama.cpp's own counters: the tokens it took from the slot's cache and those it ran.
            if let (Some(cache_n), Some(prompt_n)) =
                (t.get("cache_n").and_then(u), t.get("prompt_n").and_then(u))
            {
                f.cached_tokens = Some(cache_n);
                f.evaluated_tokens = Some(prompt_n);
                f.prompt_tokens = Some(cache_n + prompt_n);
            }
            f.prompt_ms = t.get("prompt_ms").and_then(Value::as_f64);
            if f.completion_tokens.is_none() {
                f.completion_tokens = t.get("predicted_n").and_then(u);
            }
        }
        if f.evaluated_tokens.is_none() {
            f.evaluated_tokens = match (f.prompt_tokens, f.cached_tokens) {
                (Some(p), Some(c)) => Some(p.saturating_sub(c)),
                _ => None,
            };
        }
        Some(f)
    }

    /// The figures as JSON, with the names scripts read.
    pub fn to_json(&self) -> Value {
        json!({
            "promptTokens": self.prompt_tokens,
            "cachedTokens": self.cached_tokens,
            "evaluatedTokens": self.evaluated_tokens,
            "completionTokens": self.completion_tokens,
            "promptMs": self.prompt_ms,
        })
    }
}

/// A complete reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    /// The model that answered, as the server named it.
    pub model: String,
    pub finish_reason: String,
    /// `None` when the server reported no usage at all.
    pub engine: Option<EngineFigures>,
}

/// The API key, kept out of every `Debug` and `Display`.
#[derive(Clone)]
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct OpenAiClient {
    base: String,
    model_name: Option<String>,
    api_key: Option<Secret>,
    read_timeout: Duration,
    agent: ureq::Agent,
    /// The server's first listed model, asked once when no `--model-name` was given.
    listed_model: OnceLock<Option<String>>,
}

impl OpenAiClient {
    /// Checks the URL and reads the API key; connects to nothing yet.
    pub fn new(config: &ModelConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::BadUrl {
                url: config.base_url.clone(),
            });
        }
        let api_key = match &config.api_key_env {
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.is_empty() => Some(Secret(key)),
                _ => return Err(ModelError::ApiKeyMissing { var: var.clone() }),
            },
            None => None,
        };
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout_read(config.read_timeout)
            .timeout_write(config.read_timeout)
            .build();
        Ok(Self {
            base,
            model_name: config.model_name.clone(),
            api_key,
            read_timeout: config.read_timeout,
            agent,
            listed_model: OnceLock::new(),
        })
    }

    /// The completions URL.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base)
    }

    fn authorized(&self, request: ureq::Request) -> ureq::Request {
        match &self.api_key {
            Some(Secret(key)) => request.set("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }

    /// The model to name in requests: `--model-name`, else the first the server lists (`GET
    /// {base}/models`), else none (servers with one model need no name).
    fn model(&self) -> Option<String> {
        if let Some(name) = &self.model_name {
            return Some(name.clone());
        }
        self.listed_model
            .get_or_init(|| {
                let response = self
                    .authorized(self.agent.get(&format!("{}/models", self.base)))
                    .call()
                    .ok()?;
                let listing: Value = serde_json::from_reader(response.into_reader()).ok()?;
                listing
                    .pointer("/data/0/id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .clone()
    }

    /// Asks for a reply to `messages`, handing each text delta to `on_delta` as it arrives. Returns the
    /// whole reply only when the server said it is complete.
    pub fn complete(
        &self,
        messages: &[ChatMessage],
        max_tokens: Option<u32>,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<Completion, ModelError> {
        let url = self.url();
        let mut body = json!({
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(model) = self.model() {
            body["model"] = json!(model);
        }
        if let Some(n) = max_tokens {
            body["max_tokens"] = json!(n);
        }
        let request = self
            .authorized(self.agent.post(&url))
            .set("Content-Type", "application/json")
            .set("Accept", "text/event-stream");
        let response = match request.send_string(&body.to_string()) {
            Ok(r) => r,
            Err(ureq::Error::Status(status, response)) => {
                return Err(ModelError::Status {
                    url,
                    status,
                    message: server_message(response),
                })
            }
            Err(ureq::Error::Transport(t)) => return Err(self.transport(url, &t)),
        };
        let streamed = response
            .content_type()
            .eq_ignore_ascii_case("text/event-stream");
        let reader = BufReader::new(response.into_reader());
        if streamed {
            self.read_stream(url, reader, on_delta)
        } else {
            // A server that ignored `stream` answers with one JSON completion.
            self.read_whole(url, reader, on_delta)
        }
    }

    fn transport(&self, url: String, t: &ureq::Transport) -> ModelError {
        let why = t.to_string();
        let timed_out = std::error::Error::source(t)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .is_some_and(is_timeout);
        if timed_out || why.contains("timed out") {
            return ModelError::Timeout {
                url,
                secs: self.read_timeout.as_secs(),
                during: "connecting or sending the request",
            };
        }
        ModelError::Unreachable { url, why }
    }

    fn read_failed(&self, url: String, e: &io::Error) -> ModelError {
        if is_timeout(e) {
            ModelError::Timeout {
                url,
                secs: self.read_timeout.as_secs(),
                during: "waiting for the next part of the reply",
            }
        } else {
            ModelError::CutOff {
                url,
                why: e.to_string(),
            }
        }
    }

    fn read_stream(
        &self,
        url: String,
        reader: impl io::BufRead,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<Completion, ModelError> {
        let mut events = SseReader::new(reader);
        let mut text = String::new();
        let mut model = String::new();
        let mut finish: Option<String> = None;
        let mut engine = None;
        loop {
            let data = match events.next_data() {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => return Err(self.read_failed(url, &e)),
            };
            if data.trim() == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(&data).map_err(|e| {
                if finish.is_none() {
                    ModelError::CutOff {
                        url: url.clone(),
                        why: format!("an unreadable event ({e})"),
                    }
                } else {
                    ModelError::BadReply {
                        url: url.clone(),
                        why: format!("an unreadable event after the reply ended ({e})"),
                    }
                }
            })?;
            if let Some(err) = chunk.get("error") {
                return Err(ModelError::Status {
                    url,
                    status: err.get("code").and_then(Value::as_u64).unwrap_or(500) as u16,
                    message: error_text(err),
                });
            }
            if let Some(m) = chunk.get("model").and_then(Value::as_str) {
                model = m.to_string();
            }
            if let Some(choice) = chunk.pointer("/choices/0") {
                if let Some(delta) = choice.pointer("/delta/content").and_then(Value::as_str) {
                    if !delta.is_empty() {
                        on_delta(delta);
                        text.push_str(delta);
                    }
                }
                if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                    finish = Some(reason.to_string());
                }
            }
            if let Some(f) = EngineFigures::from_chunk(&chunk) {
                engine = Some(f);
            }
        }
        let Some(finish_reason) = finish else {
            return Err(ModelError::CutOff {
                url,
                why: format!(
                    "the stream ended after {} bytes of text without a finish reason",
                    text.len()
                ),
            });
        };
        Ok(Completion {
            text,
            model,
            finish_reason,
            engine,
        })
    }

    fn read_whole(
        &self,
        url: String,
        mut reader: impl Read,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<Completion, ModelError> {
        let mut body = String::new();
        if let Err(e) = reader.read_to_string(&mut body) {
            return Err(self.read_failed(url, &e));
        }
        let answer: Value = serde_json::from_str(&body).map_err(|e| ModelError::CutOff {
            url: url.clone(),
            why: format!("the answer is not complete JSON ({e})"),
        })?;
        let choice = answer
            .pointer("/choices/0")
            .ok_or_else(|| ModelError::BadReply {
                url: url.clone(),
                why: "no choices".into(),
            })?;
        let text = choice
            .pointer("/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| ModelError::BadReply {
                url: url.clone(),
                why: "no message content".into(),
            })?
            .to_string();
        on_delta(&text);
        Ok(Completion {
            text,
            model: answer["model"].as_str().unwrap_or_default().to_string(),
            finish_reason: choice["finish_reason"]
                .as_str()
                .unwrap_or("stop")
                .to_string(),
            engine: EngineFigures::from_chunk(&answer),
        })
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// The server's own words from an error answer: `error.message` of an OpenAI-style body, else the
/// body's first 300 characters.
fn server_message(response: ureq::Response) -> String {
    let mut body = String::new();
    let _ = response
        .into_reader()
        .take(64 * 1024)
        .read_to_string(&mut body);
    match serde_json::from_str::<Value>(&body) {
        Ok(v) if v.get("error").is_some() => error_text(&v["error"]),
        _ => {
            let body = body.trim();
            if body.is_empty() {
                "(no message)".into()
            } else {
                body.chars().take(300).collect()
            }
        }
    }
}

fn error_text(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        other => other
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| other.to_string(), str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_timings_give_cached_and_evaluated_tokens() {
        let chunk = json!({"choices": [], "usage": {"prompt_tokens": 1540, "completion_tokens": 8,
            "prompt_tokens_details": {"cached_tokens": 1514}},
            "timings": {"cache_n": 1514, "prompt_n": 26, "prompt_ms": 3.5, "predicted_n": 8}});
        let f = EngineFigures::from_chunk(&chunk).unwrap();
        assert_eq!(f.prompt_tokens, Some(1540));
        assert_eq!(f.cached_tokens, Some(1514));
        assert_eq!(f.evaluated_tokens, Some(26));
        assert_eq!(f.completion_tokens, Some(8));
        assert_eq!(f.prompt_ms, Some(3.5));
    }

    #[test]
    fn standard_usage_alone_is_enough() {
        let chunk = json!({"usage": {"prompt_tokens": 100, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 64}}});
        let f = EngineFigures::from_chunk(&chunk).unwrap();
        assert_eq!(
            (f.prompt_tokens, f.cached_tokens, f.evaluated_tokens),
            (Some(100), Some(64), Some(36))
        );
        assert_eq!(f.prompt_ms, None);
        assert!(EngineFigures::from_chunk(&json!({"choices": []})).is_none());
    }

    #[test]
    fn the_key_is_never_in_debug_output() {
        std::env::set_var("SAMPLE_HOST_TEST_KEY_DEBUG", "sk-very-secret");
        let mut config = ModelConfig::new("http://127.0.0.1:1/v1/");
        config.api_key_env = Some("SAMPLE_HOST_TEST_KEY_DEBUG".into());
        let client = OpenAiClient::new(&config).unwrap();
        assert!(!format!("{client:?}").contains("sk-very-secret"));
        assert_eq!(client.url(), "http://127.0.0.1:1/v1/chat/completions");
    }

    #[test]
    fn a_missing_key_variable_and_a_bad_url_are_refused_up_front() {
        let mut config = ModelConfig::new("http://127.0.0.1:1/v1");
        config.api_key_env = Some("SAMPLE_HOST_TEST_KEY_THAT_IS_NOT_SET".into());
        let e = OpenAiClient::new(&config).unwrap_err();
        assert_eq!(e.code(), "HOST_MODEL_API_KEY_MISSING");
        assert!(e
            .to_string()
            .contains("SAMPLE_HOST_TEST_KEY_THAT_IS_NOT_SET"));
        let e = OpenAiClient::new(&ModelConfig::new("127.0.0.1:8080/v1")).unwrap_err();
        assert_eq!(e.code(), "HOST_MODEL_BAD_URL");
    }
}
