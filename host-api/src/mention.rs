//! Session mentions (spec §6.3): `dsh-session:` URIs and the `@[label](dsh-session:…)` mention text a user
//! types to cite another session. Host and plugin share this one implementation so they never disagree on
//! what a mention is.
//!
//! A URI is `dsh-session:` + base64url without padding of the UTF-8 bytes of the id's JSON string literal
//! (`JSON.stringify(id)`, quotes included). Decoding accepts only the canonical form: re-encoding the
//! decoded id must give back the URI byte for byte.
//!
//! Sessions read from other harnesses (`claude:<uuid>`, `codex:<uuid>`, see [`dsh_codec::source`]) also have a
//! readable URI, `dsh-session:claude:<uuid>`: the namespace, then base64url characters and `/`. DSH never
//! names such a session, so no DSH URI changes; [`encode_uri`] writes the readable form for them and
//! decoding accepts it as well as their base64url form.
//!
//! One deliberate difference from DSH: JavaScript strings may hold lone UTF-16 surrogates and Rust strings
//! cannot, so a URI whose JSON payload escapes a lone surrogate (`"\ud800"`) is refused here, where DSH
//! would accept it. No DSH id is such a string in practice (ids are UUIDs or paths).

use crate::abi::{ErrorCode, PluginError};
use dsh_codec::json::is_js_whitespace;

/// The URI scheme, colon included.
pub const SCHEME: &str = "dsh-session:";

/// A mention or URI that does not decode to a session id. Maps to `SESSION_REFERENCE_INVALID_REFERENCE`;
/// the message is DSH's, naming the URI as a JSON string literal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MentionError {
    /// `uri` is not a canonical `dsh-session:` URI. `offset` is the byte offset of the mention in the text
    /// that was parsed, when it came from [`parse_mentions`]; `reason` says which rule it broke.
    #[error("invalid session reference URI {}", json_string(uri))]
    InvalidUri {
        uri: String,
        offset: Option<usize>,
        reason: &'static str,
    },
}

impl MentionError {
    /// The error code the boundary reports for this error.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::SessionReferenceInvalidReference
    }
}

impl From<MentionError> for PluginError {
    fn from(e: MentionError) -> Self {
        PluginError::new(e.code(), e.to_string())
    }
}

/// One session a text cites, in appearance order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub session_id: String,
    /// The mention's unescaped label, or the session id for a bare URI.
    pub label: String,
}

/// A parsed text: every mention replaced by `@` + its label, and the references it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub text: String,
    pub references: Vec<Reference>,
}

/// `dsh-session:` + base64url (no padding) of `JSON.stringify(id)`; for another harness's session,
/// `dsh-session:` + the id itself when it is readable (see the module header).
pub fn encode_uri(id: &str) -> String {
    if readable_id(id) {
        return format!("{SCHEME}{id}");
    }
    base64_uri(id)
}

/// The namespace of another harness's session id at the start of `payload`, if any.
fn namespace_of(payload: &str) -> Option<&'static str> {
    dsh_codec::source::SourceKind::ALL
        .into_iter()
        .filter_map(dsh_codec::source::SourceKind::namespace)
        .find(|ns| payload.starts_with(ns))
}

/// A namespaced id whose URI can be the id itself: the namespace, then base64url characters and `/`.
fn readable_id(id: &str) -> bool {
    namespace_of(id).is_some_and(|ns| {
        let rest = &id[ns.len()..];
        !rest.is_empty() && rest.bytes().all(is_readable)
    })
}

fn is_readable(b: u8) -> bool {
    is_base64url(b) || b == b'/'
}

fn base64_uri(id: &str) -> String {
    let literal = json_string(id);
    let mut out = String::with_capacity(SCHEME.len() + literal.len().div_ceil(3) * 4);
    out.push_str(SCHEME);
    base64url_encode(literal.as_bytes(), &mut out);
    out
}

/// The session id a canonical URI names.
pub fn decode_uri(uri: &str) -> Result<String, MentionError> {
    decode_at(uri, None)
}

/// `@[` + label (default: the id) with every `\` and `]` escaped + `](` + URI + `)`.
pub fn format_mention(session_id: &str, label: Option<&str>) -> String {
    let label = label.unwrap_or(session_id);
    let mut out = String::with_capacity(label.len() + session_id.len() * 2 + 24);
    out.push_str("@[");
    for c in label.chars() {
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

/// Finds every mention in `text`, left to right: a Markdown mention `@[LABEL](dsh-session:…)` or a bare
/// `dsh-session:` URI made of base64url characters. Each is decoded (a malformed one fails the whole
/// text) and replaced by `@` + its label. Duplicates are kept. `dsh-session:` followed by nothing that
/// could be a payload is ordinary text.
pub fn parse_mentions(text: &str) -> Result<Parsed, MentionError> {
    let mut out = String::with_capacity(text.len());
    let mut references = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let found = if rest.starts_with("@[") {
            markdown_mention(text, i)?
        } else if rest.starts_with(SCHEME) {
            bare_uri(text, i)?
        } else {
            None
        };
        match found {
            Some((end, reference)) => {
                out.push_str(&text[copied..i]);
                out.push('@');
                out.push_str(&reference.label);
                references.push(reference);
                copied = end;
                i = end;
            }
            // Both alternatives start with an ASCII byte, so stepping one byte never lands a match
            // inside a character; it only has to stay on a boundary for the slicing above.
            None => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out.push_str(&text[copied..]);
    Ok(Parsed {
        text: out,
        references,
    })
}

/// Alternative (a) at `start` (which holds `@[`): the end of the match and its reference, `None` when the
/// text there is not shaped like a mention.
fn markdown_mention(text: &str, start: usize) -> Result<Option<(usize, Reference)>, MentionError> {
    let label_start = start + 2;
    let mut chars = text[label_start..].char_indices();
    // The label runs to the first `]` not escaped by `\`; an escape takes whatever character follows.
    let label_end = loop {
        match chars.next() {
            None => return Ok(None),
            Some((at, ']')) => break label_start + at,
            Some((_, '\\')) => {
                if chars.next().is_none() {
                    return Ok(None);
                }
            }
            Some(_) => {}
        }
    };
    let Some(after) = text[label_end..].strip_prefix("](") else {
        return Ok(None);
    };
    if !after.starts_with(SCHEME) {
        return Ok(None);
    }
    let uri_start = label_end + 2;
    let uri_len = after
        .find(|c: char| c == ')' || is_js_whitespace(c))
        .unwrap_or(after.len());
    if !after[uri_len..].starts_with(')') {
        return Ok(None);
    }
    let uri = &text[uri_start..uri_start + uri_len];
    let session_id = decode_at(uri, Some(start))?;
    let label = unescape_label(&text[label_start..label_end]);
    Ok(Some((
        uri_start + uri_len + 1,
        Reference { session_id, label },
    )))
}

/// Alternative (b) at `start` (which holds `dsh-session:`): one or more base64url characters make a bare
/// URI, which must then decode.
fn bare_uri(text: &str, start: usize) -> Result<Option<(usize, Reference)>, MentionError> {
    let payload_start = start + SCHEME.len();
    let namespace = namespace_of(&text[payload_start..]).map_or(0, str::len);
    let allowed = if namespace > 0 {
        is_readable
    } else {
        is_base64url
    };
    let payload_len = namespace
        + text.as_bytes()[payload_start + namespace..]
            .iter()
            .take_while(|&&b| allowed(b))
            .count();
    if payload_len == 0 {
        return Ok(None);
    }
    let end = payload_start + payload_len;
    let session_id = decode_at(&text[start..end], Some(start))?;
    Ok(Some((
        end,
        Reference {
            label: session_id.clone(),
            session_id,
        },
    )))
}

fn unescape_label(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

fn decode_at(uri: &str, offset: Option<usize>) -> Result<String, MentionError> {
    let fail = |reason| MentionError::InvalidUri {
        uri: uri.to_string(),
        offset,
        reason,
    };
    let payload = uri
        .strip_prefix(SCHEME)
        .ok_or_else(|| fail("it does not start with dsh-session:"))?;
    if namespace_of(payload).is_some() {
        return if readable_id(payload) {
            Ok(payload.to_string())
        } else {
            Err(fail("its session id is not a readable namespaced id"))
        };
    }
    if payload.is_empty() || !payload.bytes().all(is_base64url) {
        return Err(fail("its payload is not base64url"));
    }
    let bytes = base64url_decode(payload).ok_or_else(|| fail("its payload is not base64url"))?;
    let literal = String::from_utf8(bytes).map_err(|_| fail("its payload is not UTF-8"))?;
    let id = match serde_json::from_str::<serde_json::Value>(&literal) {
        Ok(serde_json::Value::String(id)) => id,
        Ok(_) => return Err(fail("its payload is not a JSON string")),
        Err(_) => return Err(fail("its payload is not JSON")),
    };
    if base64_uri(&id) != uri {
        return Err(fail("it is not in canonical form"));
    }
    Ok(id)
}

/// `JSON.stringify` of a string. serde_json escapes exactly what JavaScript does for a Rust string (`"`,
/// `\`, control characters as `\b \t \n \f \r` or lower-case `\u00xx`; everything else raw), so its
/// output is used as is.
fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn base64url_encode(bytes: &[u8], out: &mut String) {
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
}

/// Decodes unpadded base64url; `None` for a length no encoder produces. Leftover bits are ignored here:
/// the caller's canonical re-encoding check refuses them.
fn base64url_decode(payload: &str) -> Option<Vec<u8>> {
    let digits: Vec<u32> = payload
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' => Some(u32::from(b - b'A')),
            b'a'..=b'z' => Some(u32::from(b - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(b - b'0') + 52),
            b'-' => Some(62),
            b'_' => Some(63),
            _ => None,
        })
        .collect::<Option<_>>()?;
    if digits.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for group in digits.chunks(4) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | d << (18 - 6 * i));
        for i in 0..group.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(e: MentionError) -> &'static str {
        match e {
            MentionError::InvalidUri { reason, .. } => reason,
        }
    }

    #[test]
    fn encodes_the_json_literal_of_the_id() {
        assert_eq!(encode_uri("abc"), "dsh-session:ImFiYyI");
        assert_eq!(encode_uri(""), "dsh-session:IiI");
        // Control characters, quotes and non-ASCII go through JSON.stringify first.
        assert_eq!(
            base64url_decode(&encode_uri("a\"\n\u{1}界")[SCHEME.len()..]).unwrap(),
            "\"a\\\"\\n\\u0001界\"".as_bytes()
        );
    }

    #[test]
    fn base64url_round_trips_every_length() {
        for len in 0..10 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 97 + 250) as u8).collect();
            let mut s = String::new();
            base64url_encode(&bytes, &mut s);
            assert!(!s.contains('='));
            assert_eq!(base64url_decode(&s).unwrap(), bytes, "{s}");
        }
        assert_eq!(base64url_decode("A"), None);
    }

    #[test]
    fn decode_refuses_every_non_canonical_form() {
        assert_eq!(decode_uri("dsh-session:ImFiYyI").unwrap(), "abc");
        let cases = [
            ("session:ImFiYyI", "it does not start with dsh-session:"),
            ("dsh-session:", "its payload is not base64url"),
            ("dsh-session:ImFiYyI=", "its payload is not base64url"),
            ("dsh-session:ImFiYy+", "its payload is not base64url"),
            ("dsh-session:I", "its payload is not base64url"),
            // `"abc"` with non-zero leftover bits in the last digit.
            ("dsh-session:ImFiYyJ", "it is not in canonical form"),
            // `"\u0061"` decodes to "a" but "a" encodes differently.
            ("dsh-session:Ilx1MDA2MSI", "it is not in canonical form"),
            // `123`, a JSON number.
            ("dsh-session:MTIz", "its payload is not a JSON string"),
            // `"abc` unterminated.
            ("dsh-session:ImFiYw", "its payload is not JSON"),
            // 0xFF 0xFE: not UTF-8.
            ("dsh-session:__4", "its payload is not UTF-8"),
        ];
        for (uri, why) in cases {
            let e = decode_uri(uri).unwrap_err();
            assert_eq!(e.code(), ErrorCode::SessionReferenceInvalidReference);
            assert_eq!(
                e.to_string(),
                format!("invalid session reference URI {}", json_string(uri))
            );
            assert_eq!(reason(e), why, "{uri}");
        }
    }

    #[test]
    fn mention_error_becomes_an_invalid_reference_plugin_error() {
        let e: PluginError = decode_uri("dsh-session:x").unwrap_err().into();
        assert_eq!(e.code, ErrorCode::SessionReferenceInvalidReference);
        assert_eq!(
            e.message.as_str(),
            "invalid session reference URI \"dsh-session:x\""
        );
    }

    #[test]
    fn namespaced_ids_have_a_readable_uri_and_keep_their_base64_one() {
        let id = "claude:11111111-1111-4111-8111-111111111111/agent-a1";
        let uri = encode_uri(id);
        assert_eq!(uri, format!("dsh-session:{id}"));
        assert_eq!(decode_uri(&uri).unwrap(), id);
        assert_eq!(decode_uri(&base64_uri(id)).unwrap(), id);
        let parsed = parse_mentions(&format!("see {uri}. and @[x]({uri})")).unwrap();
        let ids: Vec<&str> = parsed
            .references
            .iter()
            .map(|r| r.session_id.as_str())
            .collect();
        assert_eq!(ids, [id, id]);
        assert_eq!(parsed.text, format!("see @{id}. and @x"));
        for bad in [
            "dsh-session:claude:",
            "dsh-session:codex:a b",
            "dsh-session:codex:x.y",
        ] {
            assert!(decode_uri(bad).is_err(), "{bad}");
        }
        // An id outside the namespaces keeps DSH's form only.
        assert!(encode_uri("plain-id").starts_with("dsh-session:InBsYW"));
        assert!(decode_uri("dsh-session:plain-id").is_err());
    }

    #[test]
    fn formats_with_escaped_label() {
        assert_eq!(format_mention("abc", None), "@[abc](dsh-session:ImFiYyI)");
        assert_eq!(
            format_mention("abc", Some(r"a]b\c[")),
            r"@[a\]b\\c[](dsh-session:ImFiYyI)"
        );
    }
}
