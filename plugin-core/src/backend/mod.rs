//! The index behind a trait: everything the search needs from a store of indexed sessions, so that the
//! same ranking, snippets and pages come out of the embedded SQLite file, a PostgreSQL server shared by a
//! team, or memory (for unit tests).
//!
//! A backend stores sessions (header, title, the revision it was indexed at, where a later read resumes,
//! a collection) with their documents (one event each: seq, type, time, label, text) and a generation
//! that changes with every committed batch, and answers one question: which documents match these
//! phrases under these event clauses, with how many highlight spans each (spec §4.4's `match_count`).
//! Ranking, session clauses, paging and snippets are [`query`]'s, shared by every backend, so a backend
//! can only differ in how fast it finds the matches, never in what a search answers. Lexemes come from
//! [`lexer`] (the SQLite index's own FTS5 tokenizer and CJK splitting), so a server never tokenises.
//!
//! Promises every backend keeps (checked by `tests/tests/backend_conformance.rs`):
//! - [`IndexBackend::apply`] is all or nothing: a batch is committed whole or not at all, and the
//!   generation moves only when a batch commits;
//! - a session id lives in one collection: a put of an id another collection holds is reported in
//!   [`Applied::conflicts`] and writes nothing for it;
//! - [`IndexBackend::matches`] returns exactly the documents in which every phrase occurs, with the
//!   merged span count FTS5's `highlight()` would mark.

pub mod lexer;
pub mod memory;
pub mod postgres;
pub mod publish;

pub mod query;
pub mod sqlite;

use dsh_codec::surface::Label;
use host_api::abi::wire::search::HitHeader;
use host_api::abi::{ErrorCode, PluginError};
use host_api::abi::{EventFilter, Range};

/// One document to store: an event with non-empty text (spec §3), as extracted (not yet sanitised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDoc {
    pub seq: u64,
    pub kind: String,
    pub time: i64,
    pub label: Label,
    pub text: String,
}

/// A whole session to (re)write: its previous documents are replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWrite {
    pub collection: String,
    pub header: HitHeader,
    /// What the source looked like when indexed (a log's revision).
    pub stamp: String,
    /// Where a later read resumes (opaque to the backend).
    pub checkpoint: Option<Vec<u8>>,
    /// The folded title as JSON (spec §7.1 shape).
    pub title: Option<String>,
    pub event_count: u64,
    pub docs: Vec<NewDoc>,
    /// The whole log, for readers on other machines (exact reads, citations); stores that sit beside
    /// the logs keep none.
    pub log: Option<PublishedLog>,
}

/// A log as a reader elsewhere gets it: the header and every event (crash closers included) as the
/// log's own JSON lines, so a reader's fold labels and orders them exactly as the publisher's did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedLog {
    pub header: String,
    pub events: Vec<String>,
}

/// One step of a batch.
// Steps are built once and moved into the batch: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put(SessionWrite),
    Remove { collection: String, id: String },
}

/// What a committed batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub generation: u64,
    /// Ids another collection already holds: nothing was written for them.
    pub conflicts: Vec<String>,
}

/// A stored session, as the reader may see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub collection: String,
    pub header: HitHeader,
    pub stamp: String,
    pub checkpoint: Option<Vec<u8>>,
    pub title: Option<String>,
    pub event_count: u64,
    /// The generation of the batch that wrote it (a within-session cursor's generation).
    pub generation: u64,
}

/// A matching document and what ranks it (spec §4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocMatch {
    pub session: String,
    pub seq: u64,
    pub time: i64,
    /// Code points of the sanitised text.
    pub len: i64,
    /// Merged highlight spans (`match_count`).
    pub spans: i64,
}

/// What a hit shows of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocBody {
    pub kind: String,
    pub label: Label,
    /// The sanitised text.
    pub text: String,
}

/// The question [`IndexBackend::matches`] answers.
#[derive(Debug, Clone, Copy)]
pub struct MatchQuery<'a> {
    /// Each phrase's folded tokens (from [`lexer::Lexer::phrase`]); a document matches when every phrase
    /// occurs in it. Never empty, and no phrase is empty (an empty phrase matches nothing: the caller
    /// answers that without asking).
    pub phrases: &'a [Vec<Vec<u8>>],
    pub events: &'a [EventFilter],
    /// Only this session's documents.
    pub session: Option<&'a str>,
}

/// Why a backend could not answer. Each names the store (`server`): a path or a server URL without
/// its password.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("the index at {server} failed: {cause}")]
    Failed { server: String, cause: String },
    #[error("the index at {server} is unreachable: {cause}")]
    Unreachable { server: String, cause: String },
    #[error("the database at {server} holds something else: {cause}; it was left untouched")]
    Foreign { server: String, cause: String },
}

impl BackendError {
    /// The plugin's error for it: always `SESSION_QUERY_INDEX_FAILED`, naming the store.
    pub fn into_plugin(self) -> PluginError {
        PluginError::new(ErrorCode::SessionQueryIndexFailed, self.to_string())
    }
}

impl From<BackendError> for PluginError {
    fn from(e: BackendError) -> Self {
        e.into_plugin()
    }
}

/// An index store. Not `Sync`: one caller at a time (a connection each).
pub trait IndexBackend {
    /// What failures name: a path, or a server URL without its password.
    fn server(&self) -> String;
    /// The current cross-session generation.
    fn generation(&mut self) -> Result<u64, BackendError>;
    /// Every session this caller may see.
    fn sessions(&mut self) -> Result<Vec<StoredSession>, BackendError>;
    /// The stamps of `collection`'s sessions (id → stamp): what a publish compares the root with.
    fn stamps(
        &mut self,
        collection: &str,
    ) -> Result<std::collections::HashMap<String, String>, BackendError> {
        Ok(self
            .sessions()?
            .into_iter()
            .filter(|s| s.collection == collection)
            .map(|s| (s.header.id, s.stamp))
            .collect())
    }
    /// Commits `batch` whole, or nothing of it.
    fn apply(&mut self, batch: Vec<Write>) -> Result<Applied, BackendError>;
    /// Every visible document in which each phrase occurs and that passes the event clauses.
    fn matches(&mut self, q: &MatchQuery<'_>) -> Result<Vec<DocMatch>, BackendError>;
    /// The bodies of `docs` (session id, seq), in order; a missing one is an error.
    fn bodies(&mut self, docs: &[(String, u64)]) -> Result<Vec<DocBody>, BackendError>;
}

/// Whether `value` is in the inclusive range, compared as `CAST(col AS INTEGER) >= ?` compares a
/// possibly fractional bound.
pub(crate) fn in_range(value: i64, r: &Range) -> bool {
    let v = value as f64;
    r.from.is_none_or(|f| v >= f) && r.to.is_none_or(|t| v <= t)
}

/// Whether a document passes every event clause (spec §4.3; an empty list matches nothing).
pub(crate) fn event_passes(
    seq: u64,
    kind: &str,
    time: i64,
    label: Label,
    filters: &[EventFilter],
) -> bool {
    filters.iter().all(|f| match f {
        EventFilter::Seq(r) => in_range(seq as i64, r),
        EventFilter::Time(r) => in_range(time, r),
        EventFilter::Type(values) => values.iter().any(|v| v == kind),
        EventFilter::Surface(values) => values.iter().any(|v| v.as_str() == label.as_str()),
    })
}
