//! The model the chat talks to: the stand-in (the default: deterministic, no network) or an
//! OpenAI-compatible server ([`crate::openai`]).
//!
//! The stand-in answers with what it was sent, so a transcript proves what the host did: how many
//! messages the request held, a fingerprint of its exact bytes, and how much of the previous request a
//! provider's prompt cache could have reused.

use crate::openai::{EngineFigures, ModelError, OpenAiClient};
use crate::request::{CacheFigure, ChatMessage, ModelRequest};

/// Where replies come from.
#[derive(Debug, Default)]
pub enum Model {
    #[default]
    StandIn,
    OpenAi(OpenAiClient),
}

/// The stand-in, for environments that name no model.
pub static STAND_IN: Model = Model::StandIn;

/// One complete reply and who gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub text: String,
    pub provider: String,
    pub model: String,
    /// The engine's prompt figures (`None` for the stand-in, or a server that reports no usage).
    pub engine: Option<EngineFigures>,
}

impl Model {
    /// The reply to one request. `chat` is the request as chat messages (what a server is sent),
    /// `request` and `cache` its canonical bytes and their figure (what the stand-in reports on),
    /// `last_user` the readable text of the user's latest line. Text arrives through `on_delta` as it
    /// is produced (the stand-in's all at once); the returned reply is complete.
    pub fn reply(
        &self,
        chat: &[ChatMessage],
        request: &ModelRequest,
        cache: &CacheFigure,
        last_user: &str,
        on_delta: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ModelError> {
        match self {
            Model::StandIn => {
                let text = reply(request, cache, last_user);
                on_delta(&text);
                Ok(ModelReply {
                    text,
                    provider: PROVIDER.into(),
                    model: MODEL.into(),
                    engine: None,
                })
            }
            Model::OpenAi(client) => {
                let done = client.complete(chat, None, on_delta)?;
                Ok(ModelReply {
                    text: done.text,
                    provider: OPENAI_PROVIDER.into(),
                    model: done.model,
                    engine: done.engine,
                })
            }
        }
    }

    /// Whether replies come from a real engine (whose figures are worth showing).
    pub fn is_engine(&self) -> bool {
        matches!(self, Model::OpenAi(_))
    }
}

/// The provider recorded in the assistant messages an OpenAI-compatible server produced.
pub const OPENAI_PROVIDER: &str = "openai-compatible";

/// Provider and model names recorded in the assistant messages it produces.
pub const PROVIDER: &str = "sample-host";
pub const MODEL: &str = "stand-in";

/// The reply to `request`; `last_user` is the readable text of the user's latest line.
pub fn reply(request: &ModelRequest, cache: &CacheFigure, last_user: &str) -> String {
    let quoted: String = last_user.chars().take(80).collect();
    let ellipsis = if last_user.chars().count() > 80 {
        "…"
    } else {
        ""
    };
    let verdict = if cache.kept() {
        "cache kept"
    } else {
        "cache rebuilt"
    };
    let messages = if request.messages == 1 {
        "1 message".to_string()
    } else {
        format!("{} messages", request.messages)
    };
    // A first request has no previous one: there is no prefix to speak of.
    let prefix = if cache.previous_request_bytes == 0 {
        "the first request of this session".to_string()
    } else {
        format!(
            "{} of the previous {} bytes were a shared prefix ({verdict})",
            cache.shared_prefix_bytes, cache.previous_request_bytes
        )
    };
    format!(
        "(stand-in model) I saw {messages} in {} bytes, request {}; {prefix}. You said: \"{quoted}{ellipsis}\"",
        request.bytes.len(),
        request.fingerprint(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_reply_depends_only_on_the_request_and_names_its_figures() {
        let request = ModelRequest::build("s", &[json!({"a": 1})], Some(0));
        let cache = CacheFigure {
            request_bytes: request.bytes.len(),
            previous_request_bytes: 10,
            shared_prefix_bytes: 10,
        };
        let a = reply(&request, &cache, "hello");
        assert_eq!(a, reply(&request, &cache, "hello"));
        assert!(a.contains("I saw 1 message in"));
        assert!(a.contains(&request.fingerprint()));
        assert!(a.contains("10 of the previous 10 bytes"));
        assert!(a.contains("cache kept"));
        let other = ModelRequest::build("s", &[json!({"a": 2})], Some(0));
        assert_ne!(a, reply(&other, &cache, "hello"));
    }

    #[test]
    fn a_long_line_is_quoted_clipped() {
        let request = ModelRequest::build("s", &[], None);
        let cache = CacheFigure {
            request_bytes: 0,
            previous_request_bytes: 0,
            shared_prefix_bytes: 0,
        };
        let text = reply(&request, &cache, &"x".repeat(200));
        assert!(text.contains(&format!("\"{}…\"", "x".repeat(80))));
        assert!(text.contains("the first request of this session"), "{text}");
    }
}
