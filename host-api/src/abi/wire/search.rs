//! Search records as they cross the plugin boundary: JSON documents in the spec's own shapes (§4.1, §4.6),
//! camelCase, unknown fields ignored.
//!
//! Requests keep the fields the spec validates as raw JSON values, so that a wrongly-typed value becomes
//! the spec's own error (`SESSION_QUERY_INVALID_QUERY`, `…_INVALID_FILTER`, `…_INVALID_LIMIT`,
//! `…_INVALID_CURSOR`) when the plugin normalises the request, never a generic parse error of the whole
//! document. JSON has no `undefined`: an absent field and `null` both mean "omitted" for `limit`,
//! `cursor` and the filter lists. A validated request holds the same typed filter unions as the exact
//! reads ([`crate::abi::SessionFilter`], [`crate::abi::EventFilter`]), which a host may also serialise
//! into a request.
//!
//! Fields a later version may add to a response are `#[serde(default)]`, so an older reader keeps reading.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `SessionSearchRequest` (spec §4.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSearchRequest {
    /// Must be a string; anything else is `INVALID_QUERY`.
    #[serde(default)]
    pub query: Value,
    /// `SessionResultFilter[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_filters: Option<Value>,
    /// `SessionEventMetadataFilter[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_filters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Value>,
    /// Contract 2.2: `"phrase"` (absent: spec §4's literal phrase) or `"all-words"` (events containing
    /// every word of the query, in any order). A 2.1 plugin ignores it and answers the phrase.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_mode: Option<Value>,
    /// Contract 2.2: `"rank"` (absent: spec §4.4's ranking) or `"newest"` (each session's newest
    /// matching event, sessions newest first). A 2.1 plugin ignores it and answers in spec order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Value>,
}

/// `SessionEventSearchRequest` (spec §4.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEventSearchRequest {
    /// Must be a string; anything else is `INVALID_FILTER` (spec §4.2 step 0.5).
    #[serde(default)]
    pub session_id: Value,
    #[serde(default)]
    pub query: Value,
    /// `SessionEventMetadataFilter[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Value>,
    /// Contract 2.2: `"phrase"` (absent: spec §4's literal phrase) or `"all-words"` (events containing
    /// every word of the query, in any order). A 2.1 plugin ignores it and answers the phrase.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_mode: Option<Value>,
    /// Contract 2.2: `"rank"` (absent: spec §4.4's ranking) or `"newest"` (each session's newest
    /// matching event, sessions newest first). A 2.1 plugin ignores it and answers in spec order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Value>,
}

/// A session header as search hits carry it (spec §4.6): rebuilt from the index, `origin` never present,
/// absent fields omitted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HitHeader {
    pub version: i64,
    pub id: String,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_depth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
    /// Where the session comes from: `dsh`, `claude` or `codex` (`dsh_codec::source::SourceKind`, from the
    /// id's namespace).
    #[serde(default = "dsh_source")]
    pub source: String,
}

fn dsh_source() -> String {
    dsh_codec::source::SourceKind::Dsh.as_str().to_string()
}

/// `SessionEventSearchHit` (spec §4.6): one matching event with its provenance and snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEventSearchHit {
    pub session_id: String,
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub time: i64,
    /// `current`, `shadowed` or `log-only`.
    pub surface: String,
    pub snippet: String,
    /// The team collection the session was published into (absent from an embedded index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

/// `SessionSearchHit` (spec §4.6): one session and its best-matching event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSearchHit {
    pub header: HitHeader,
    pub live: bool,
    pub persisted: bool,
    pub best_match: SessionEventSearchHit,
    /// The session's title as indexed (contract 2.2; absent when it has none, or from an older
    /// plugin), so a host can show it without an exact read of the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The team collection the session was published into (absent from an embedded index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

/// A session or log left out of search (DESIGN.md deviation 2): unreadable, or its live and persisted
/// headers conflict. `code` is the log codec's code (e.g. `LOG_SEQ_GAP`) or a `SESSION_QUERY_*` code.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub code: String,
    pub reason: String,
}

/// `SessionSearchPage<SessionSearchHit>` plus what was left out of the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSearchPage {
    pub items: Vec<SessionSearchHit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// `SessionEventSearchPage` plus what was left out of the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEventSearchPage {
    pub session: HitHeader,
    /// The session's title as indexed (contract 2.2; absent when it has none, or from an older plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub items: Vec<SessionEventSearchHit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// The index's own report: what is indexed and what was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostics {
    pub skipped: Vec<Skipped>,
    /// Sessions searchable now (a live session and its disk copy count once).
    pub indexed_sessions: u64,
    /// Documents (events with text) searchable now.
    #[serde(default)]
    pub indexed_events: u64,
    /// The cross-session generation cursors are bound to.
    #[serde(default)]
    pub generation: u64,
    #[serde(default)]
    pub index_path: String,
    /// Whether a file-system watch keeps the index fresh (else every search re-checks the sessions root).
    #[serde(default)]
    pub watching: bool,
    /// Logs read whole since the index opened.
    #[serde(default)]
    pub whole_reads: u64,
    /// Logs that grew and were read from their checkpoint (only the appended bytes) since it opened.
    #[serde(default)]
    pub resumed_reads: u64,
    /// Every folder sessions are read from: the DSH sessions root and the other harnesses' folders.
    #[serde(default)]
    pub sources: Vec<SourceDiagnostic>,
    /// What happened to the index file itself, in words: rebuilt when it opened (damaged, truncated,
    /// another schema version) and why, read-only and why, another process updating it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_notes: Vec<String>,
}

/// One folder the corpus reads sessions from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceDiagnostic {
    /// `dsh`, `claude` or `codex`.
    pub source: String,
    pub path: String,
    /// Whether the folder exists now (a configured folder that does not is read as empty).
    pub exists: bool,
    /// Sessions of this source searchable now.
    pub indexed_sessions: u64,
}
