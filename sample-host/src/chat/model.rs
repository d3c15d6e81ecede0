//! The stand-in model: a deterministic reply, no network.
//!
//! It answers with what it was sent, so a transcript proves what the host did: how many messages the
//! request held, a fingerprint of its exact bytes, and how much of the previous request a provider's
//! prompt cache could have reused.

use crate::request::{CacheFigure, ModelRequest};

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
