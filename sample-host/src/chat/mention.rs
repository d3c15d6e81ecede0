//! The one place the chat parses and formats `@[label](dsh-session:…)` mentions (spec §6.3).
//!
//! Host and plugin must agree on one mention syntax, so this module only adapts
//! `host_api::mention` to the chat's error type: the chat reports every failure as a [`PluginError`]
//! with the spec's code, as the plugin's own refusals are reported.

use host_api::abi::{ErrorCode, PluginError};
use serde_json::{json, Value};

/// A user line with its mentions replaced by `@label`, and the references they named in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedLine {
    pub text: String,
    /// `{sessionId, label}` objects, as `prepare` takes them.
    pub references: Vec<Value>,
}

/// Parses the mentions of one user line. A malformed mention is `SESSION_REFERENCE_INVALID_REFERENCE`.
pub fn parse(line: &str) -> Result<ParsedLine, PluginError> {
    let parsed = interim::parse_mentions(line).map_err(|message| {
        PluginError::new(ErrorCode::SessionReferenceInvalidReference, message)
    })?;
    Ok(ParsedLine {
        text: parsed.text,
        references: parsed
            .references
            .into_iter()
            .map(|r| json!({"sessionId": r.session_id, "label": r.label}))
            .collect(),
    })
}

/// The mention a user types to cite `session_id`.
pub fn format(session_id: &str, label: Option<&str>) -> String {
    interim::format_mention(session_id, label)
}

/// Until `host_api::mention` lands in this branch: §6.3's grammar, enough for the chat. Removed when
/// the shared implementation is merged (the two calls above then name `host_api::mention`).
mod interim {
    const SCHEME: &str = "dsh-session:";
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub struct Reference {
        pub session_id: String,
        pub label: String,
    }

    pub struct Parsed {
        pub text: String,
        pub references: Vec<Reference>,
    }

    pub fn encode_uri(id: &str) -> String {
        let json = serde_json::Value::String(id.to_string()).to_string();
        let mut out = String::from(SCHEME);
        for chunk in json.as_bytes().chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        out
    }

    fn decode_uri(uri: &str) -> Result<String, String> {
        let invalid = || {
            format!(
                "invalid session reference URI {}",
                serde_json::Value::String(uri.to_string())
            )
        };
        let payload = uri.strip_prefix(SCHEME).ok_or_else(invalid)?;
        let mut bits = 0u32;
        let mut count = 0;
        let mut bytes = Vec::new();
        for c in payload.bytes() {
            let v = ALPHABET.iter().position(|&a| a == c).ok_or_else(invalid)?;
            bits = bits << 6 | v as u32;
            count += 6;
            if count >= 8 {
                count -= 8;
                bytes.push((bits >> count) as u8);
            }
        }
        let text = String::from_utf8(bytes).map_err(|_| invalid())?;
        let id = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::String(id)) => id,
            _ => return Err(invalid()),
        };
        // Only the canonical spelling is accepted.
        if encode_uri(&id) != uri {
            return Err(invalid());
        }
        Ok(id)
    }

    pub fn format_mention(session_id: &str, label: Option<&str>) -> String {
        let mut out = String::from("@[");
        for c in label.unwrap_or(session_id).chars() {
            if c == '\\' || c == ']' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push_str("](");
        out.push_str(&encode_uri(session_id));
        out.push(')');
        out
    }

    /// `@[label](uri)` at the start of `s`: (label, uri, matched length).
    fn markdown(s: &str) -> Option<(String, &str, usize)> {
        let rest = s.strip_prefix("@[")?;
        let mut label = String::new();
        let mut chars = rest.char_indices();
        let close = loop {
            match chars.next()? {
                (_, '\\') => label.push(chars.next()?.1),
                (i, ']') => break i,
                (_, c) => label.push(c),
            }
        };
        let after = rest[close..].strip_prefix("](")?;
        let body = after.strip_prefix(SCHEME)?;
        let end = body.find(|c: char| c.is_whitespace() || c == ')')?;
        if !body[end..].starts_with(')') {
            return None;
        }
        let uri = &after[..SCHEME.len() + end];
        Some((label, uri, 2 + close + 2 + uri.len() + 1))
    }

    /// A bare `dsh-session:` URI at the start of `s`.
    fn bare(s: &str) -> Option<&str> {
        let body = s.strip_prefix(SCHEME)?;
        let end = body
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(body.len());
        (end > 0).then(|| &s[..SCHEME.len() + end])
    }

    pub fn parse_mentions(text: &str) -> Result<Parsed, String> {
        let mut out = String::new();
        let mut references = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            if let Some((label, uri, len)) = markdown(rest) {
                let session_id = decode_uri(uri)?;
                out.push('@');
                out.push_str(&label);
                references.push(Reference { session_id, label });
                i += len;
            } else if let Some(uri) = bare(rest) {
                let session_id = decode_uri(uri)?;
                out.push('@');
                out.push_str(&session_id);
                references.push(Reference {
                    label: session_id.clone(),
                    session_id,
                });
                i += uri.len();
            } else {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
        Ok(Parsed {
            text: out,
            references,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_formatted_mention_parses_back_to_its_reference() {
        let line = format!("see {} please", format("demo-ci-fix", Some("CI [fix]")));
        let parsed = parse(&line).unwrap();
        assert_eq!(parsed.text, "see @CI [fix] please");
        assert_eq!(
            parsed.references,
            vec![json!({"sessionId": "demo-ci-fix", "label": "CI [fix]"})]
        );
    }

    #[test]
    fn a_malformed_mention_is_an_invalid_reference() {
        let err = parse("look at @[x](dsh-session:!!!)").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionReferenceInvalidReference);
    }

    #[test]
    fn a_line_without_mentions_is_unchanged() {
        let parsed = parse("plain words, dsh-session: and all").unwrap();
        assert_eq!(parsed.text, "plain words, dsh-session: and all");
        assert!(parsed.references.is_empty());
    }
}
