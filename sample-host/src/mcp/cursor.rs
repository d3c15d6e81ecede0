//! The MCP tools' cursors: opaque text naming the tool that made it, a fingerprint of the arguments it
//! was made for, and where the next page starts.
//!
//! A page is cut to its byte budget wherever the budget runs out, which is rarely where the plugin's own
//! page ends, so a tool cursor carries the plugin's cursor (when there is one) and how many of that
//! page's items were already delivered. Nothing in it is trusted: the plugin checks its own cursor, the
//! fingerprint refuses a cursor used with other arguments, and the rest only says where to start.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use host_api::abi::ErrorCode;
use serde::{Deserialize, Serialize};

use super::ToolError;

/// Where a tool's next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "camelCase")]
pub enum Position {
    /// A search page: the plugin cursor that produced it (none for the first page), how many of its
    /// items are already delivered, and the search's `since` as resolved for the first page (an age
    /// such as `36h` must mean the same instant on every page).
    Search {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plugin: Option<String>,
        skip: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<i64>,
    },
    /// The session listing: continue after this session id.
    Sessions { after: String },
    /// Events of a read, in seq order: continue at this seq.
    Events { seq: u64 },
    /// The current surface: continue at this index, valid while the surface was captured through the
    /// same seq (a compaction since would shift the indexes).
    Surface {
        index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        through: Option<u64>,
    },
    /// A citation held by the server: its key and the byte offset of the next part.
    Cite { key: u64, offset: usize },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Wire {
    tool: String,
    args: String,
    #[serde(flatten)]
    at: Position,
}

/// Encodes a cursor for `tool` whose arguments had `fingerprint`.
pub fn encode(tool: &str, fingerprint: u64, at: Position) -> String {
    let wire = Wire {
        tool: tool.to_string(),
        args: format!("{fingerprint:016x}"),
        at,
    };
    let json = serde_json::to_vec(&wire).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a cursor given to `tool` with arguments of `fingerprint`.
pub fn decode(tool: &str, fingerprint: u64, text: &str) -> Result<Position, ToolError> {
    let invalid = |why: &str| {
        ToolError::new(
            ErrorCode::SessionQueryInvalidCursor,
            format!("cursor {}: {why}", crate::render::quote_id(text)),
        )
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|_| invalid("not a cursor this server made"))?;
    let wire: Wire =
        serde_json::from_slice(&bytes).map_err(|_| invalid("not a cursor this server made"))?;
    if wire.tool != tool {
        return Err(invalid(&format!(
            "made by {}, not {tool}: pass it to the tool that returned it",
            wire.tool
        )));
    }
    if wire.args != format!("{fingerprint:016x}") {
        return Err(invalid(
            "made for other arguments: repeat the call's arguments unchanged with the cursor",
        ));
    }
    Ok(wire.at)
}

/// FNV-1a (64-bit) of the arguments' canonical JSON: stable across runs and builds, unlike std's hasher.
pub fn fingerprint(canonical: &str) -> u64 {
    crate::request::fnv1a(canonical.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_for_its_tool_and_arguments() {
        let at = Position::Search {
            plugin: Some("p".into()),
            skip: 3,
            from: Some(-5),
        };
        let text = encode("search_sessions", 7, at.clone());
        assert_eq!(decode("search_sessions", 7, &text).unwrap(), at);
    }

    #[test]
    fn a_cursor_is_refused_by_another_tool_other_arguments_or_when_edited() {
        let text = encode("list_sessions", 7, Position::Sessions { after: "a".into() });
        let other_tool = decode("read_session", 7, &text).unwrap_err();
        assert_eq!(other_tool.code, "SESSION_QUERY_INVALID_CURSOR");
        assert!(other_tool.message.contains("list_sessions"), "{other_tool}");
        let other_args = decode("list_sessions", 8, &text).unwrap_err();
        assert!(
            other_args.message.contains("other arguments"),
            "{other_args}"
        );
        let garbage = decode("list_sessions", 7, "%%%").unwrap_err();
        assert_eq!(garbage.code, "SESSION_QUERY_INVALID_CURSOR");
        let mut edited = text.clone();
        edited.insert(3, 'x');
        assert!(decode("list_sessions", 7, &edited).is_err());
    }

    #[test]
    fn the_fingerprint_is_fnv1a() {
        // The published FNV-1a 64 test vector for "a".
        assert_eq!(fingerprint("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
