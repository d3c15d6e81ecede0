//! The citation service's records as they cross the plugin boundary: JSON documents in the spec's own
//! camelCase shapes (spec §6.2, §6.5, §6.9).
//!
//! Unknown fields are ignored and optional fields default, so a host and a plugin built against different
//! minor versions still read each other. Fields whose types spec §6.5 validates itself (`limit`, each
//! reference) stay raw JSON, so a bad value is a `SESSION_REFERENCE_INVALID_REFERENCE` from the resolver
//! rather than a parse error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `listCandidates(agent, query, limit)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidatesRequest {
    /// The session that will cite; it is never its own candidate.
    pub agent_session_id: String,
    /// Filters by id, cwd and title (case-insensitive substring); empty keeps every session.
    #[serde(default)]
    pub query: String,
    /// A positive safe integer; absent means the plugin's `candidateLimit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Value>,
}

/// One session the agent session may cite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub session_id: String,
    /// The session's title, or its id when it has none.
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub created_at: i64,
    /// `@[label](dsh-session:…)`, ready to insert into the user's line.
    pub mention: String,
}

/// `prepare(agent, content, references)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareRequest {
    pub agent_session_id: String,
    /// The user's content blocks with mentions already rewritten; returned unchanged.
    pub content: Value,
    /// Each `{"sessionId": string, "label"?: string}`, in the order the mentions appeared.
    #[serde(default)]
    pub references: Vec<Value>,
}

impl PrepareRequest {
    /// A request citing `references` as [`crate::mention::parse_mentions`] found them.
    pub fn new(
        agent_session_id: impl Into<String>,
        content: Value,
        references: &[crate::mention::Reference],
    ) -> Self {
        Self {
            agent_session_id: agent_session_id.into(),
            content,
            references: references
                .iter()
                .map(|r| serde_json::json!({"sessionId": r.session_id, "label": r.label}))
                .collect(),
        }
    }
}

/// What `prepare` returns: the content, and when something was cited, the context message to append
/// right before the user's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prepared {
    pub content: Value,
    /// The context `user/message` event's `data` (spec §6.9), key order as DSH writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<Value>,
    /// Per cited source, in reference order: what a human transcript shows instead of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<CitedSource>>,
}

/// One cited source as a person sees it: `[cited: <label>, 12 messages, 3.1 KiB, 2 omitted]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CitedSource {
    pub session_id: String,
    pub label: String,
    /// Messages of the source kept in the snapshot.
    pub retained_messages: u64,
    /// Whole messages left out to fit the budget.
    #[serde(default)]
    pub omitted_messages: u64,
    /// Text bytes left out, whole messages and truncated middles together.
    #[serde(default)]
    pub omitted_bytes: u64,
    /// Bytes of this source's serialised snapshot in the prompt.
    pub bytes: u64,
}

impl CitedSource {
    /// `[cited: <label>, N messages, <size>]`, plus `, N omitted` when whole messages were left out.
    pub fn describe(&self) -> String {
        let plural = if self.retained_messages == 1 { "" } else { "s" };
        let mut out = format!(
            "[cited: {}, {} message{plural}, {}",
            self.label,
            self.retained_messages,
            human_bytes(self.bytes)
        );
        if self.omitted_messages > 0 {
            out.push_str(&format!(", {} omitted", self.omitted_messages));
        }
        out.push(']');
        out
    }
}

/// `512 B`, `3.1 KiB`, `10.0 MiB`: sizes as a person reads them.
pub fn human_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{:.1} MiB", b / (KIB * KIB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_spec_shapes_ignoring_unknown_fields() {
        let req: CandidatesRequest =
            serde_json::from_value(json!({"agentSessionId": "a", "future": 1})).unwrap();
        assert_eq!(req.query, "");
        assert_eq!(req.limit, None);
        let req: PrepareRequest = serde_json::from_value(
            json!({"agentSessionId": "a", "content": [], "references": [{"sessionId": 3}]}),
        )
        .unwrap();
        // A badly typed reference survives parsing, for the resolver to refuse with its own code.
        assert_eq!(req.references, vec![json!({"sessionId": 3})]);
        let prepared: Prepared = serde_json::from_value(json!({"content": []})).unwrap();
        assert_eq!(prepared.additional_context, None);
        assert_eq!(prepared.summary, None);
    }

    #[test]
    fn writes_camel_case_and_omits_absent_fields() {
        let c = Candidate {
            session_id: "s".into(),
            label: "l".into(),
            cwd: None,
            created_at: 5,
            mention: "@[l](dsh-session:InMi)".into(),
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"sessionId":"s","label":"l","createdAt":5,"mention":"@[l](dsh-session:InMi)"}"#
        );
        let req = PrepareRequest::new(
            "a",
            json!([]),
            &[crate::mention::Reference {
                session_id: "s".into(),
                label: "L".into(),
            }],
        );
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"agentSessionId":"a","content":[],"references":[{"sessionId":"s","label":"L"}]}"#
        );
    }

    #[test]
    fn describes_a_cited_source_for_a_transcript() {
        let mut s = CitedSource {
            session_id: "s".into(),
            label: "fix CI".into(),
            retained_messages: 12,
            omitted_messages: 2,
            omitted_bytes: 900,
            bytes: 3174,
        };
        assert_eq!(
            s.describe(),
            "[cited: fix CI, 12 messages, 3.1 KiB, 2 omitted]"
        );
        s.retained_messages = 1;
        s.omitted_messages = 0;
        s.bytes = 512;
        assert_eq!(s.describe(), "[cited: fix CI, 1 message, 512 B]");
        s.bytes = 10 * 1024 * 1024;
        assert_eq!(s.describe(), "[cited: fix CI, 1 message, 10.0 MiB]");
    }
}
