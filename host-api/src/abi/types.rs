//! Request and response shapes of spec §4-§6 as `#[repr(C)]` stable-ABI structs.
//!
//! Field names follow the spec's camelCase names in snake_case. Event envelopes and message contents are
//! arbitrary JSON and cross as JSON text ([`RString`]); everything with a fixed shape is typed.

use abi_stable::{
    std_types::{ROption, RString, RVec},
    StableAbi,
};

use crate::log::SessionHeader;
use crate::surface::Label;

/// A session header (spec §1.3 `SessionHeader`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: i64,
    pub id: RString,
    pub created_at: i64,
    pub cwd: ROption<RString>,
    pub parent_session: ROption<RString>,
    pub seed_length: ROption<u64>,
    pub origin: ROption<RString>,
    pub delegation_depth: ROption<u64>,
    pub agent_preset: ROption<RString>,
}

fn ropt(s: &Option<String>) -> ROption<RString> {
    s.as_deref().map(RString::from).into()
}

fn opt(s: &ROption<RString>) -> Option<String> {
    s.as_ref().map(|s| s.to_string()).into_option()
}

impl From<&SessionHeader> for Header {
    fn from(h: &SessionHeader) -> Self {
        Self {
            version: h.version,
            id: h.id.as_str().into(),
            created_at: h.created_at,
            cwd: ropt(&h.cwd),
            parent_session: ropt(&h.parent_session),
            seed_length: h.seed_length.into(),
            origin: ropt(&h.origin),
            delegation_depth: h.delegation_depth.into(),
            agent_preset: ropt(&h.agent_preset),
        }
    }
}

impl From<&Header> for SessionHeader {
    fn from(h: &Header) -> Self {
        Self {
            version: h.version,
            id: h.id.to_string(),
            created_at: h.created_at,
            cwd: opt(&h.cwd),
            parent_session: opt(&h.parent_session),
            seed_length: h.seed_length.into_option(),
            origin: opt(&h.origin),
            delegation_depth: h.delegation_depth.into_option(),
            agent_preset: opt(&h.agent_preset),
        }
    }
}

/// The three-state label of an event (spec §2.2), decided only by `crate::surface`.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    Current,
    Shadowed,
    LogOnly,
}

impl Surface {
    pub fn as_str(self) -> &'static str {
        Label::from(self).as_str()
    }
}

impl From<Label> for Surface {
    fn from(l: Label) -> Self {
        match l {
            Label::Current => Self::Current,
            Label::Shadowed => Self::Shadowed,
            Label::LogOnly => Self::LogOnly,
        }
    }
}

impl From<Surface> for Label {
    fn from(s: Surface) -> Self {
        match s {
            Surface::Current => Self::Current,
            Surface::Shadowed => Self::Shadowed,
            Surface::LogOnly => Self::LogOnly,
        }
    }
}

/// Where a session is available (spec §4.1 `availability`).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Availability {
    Live,
    Persisted,
}

/// `SessionRecord`: a session in the merged corpus and where it came from.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub header: Header,
    pub live: bool,
    pub persisted: bool,
}

/// `SessionEventRecord`: one raw event's metadata and label.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub session_id: RString,
    pub seq: u64,
    pub kind: RString,
    pub time: i64,
    pub surface: Surface,
}

/// `SessionEventSearchDocument`: an event that yields searchable text (spec §3).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EventDocument {
    pub session_id: RString,
    pub seq: u64,
    pub kind: RString,
    pub time: i64,
    pub surface: Surface,
    pub text: RString,
}

/// An inclusive numeric range; either end may be open. Bounds are numbers as in the spec (fractional
/// bounds are allowed and compared after truncation); NaN and infinities are `INVALID_FILTER`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub from: ROption<f64>,
    pub to: ROption<f64>,
}

/// `SessionResultFilter` (spec §4.1).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub enum SessionFilter {
    Id(RVec<RString>),
    /// `None` matches a session without cwd.
    Cwd(RVec<ROption<RString>>),
    CreatedAt(Range),
    /// `None` matches a root session.
    Parent(RVec<ROption<RString>>),
    Availability(RVec<Availability>),
}

/// `SessionEventMetadataFilter`, plus the scan-only `text` clause of `filter_events` (spec §4.1, §5).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub enum EventFilter {
    Seq(Range),
    Time(Range),
    Type(RVec<RString>),
    Surface(RVec<Surface>),
    /// Literal, case-insensitive, whitespace-flexible substring; only `filter_events` accepts it.
    Text(RString),
}

/// `readSession`: the header and every event (for a persisted session: as inspected, closers included).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct SessionEvents {
    pub session: Header,
    /// Event envelopes as JSON text, in seq order.
    pub events: RVec<RString>,
}

/// `readSurface`: the current surface in model order.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct SurfaceSnapshot {
    pub session: Header,
    /// Seq of the last raw event observed; `None` for an empty log.
    pub captured_through_seq: ROption<u64>,
    /// Event envelopes of the current surface nodes, JSON text, in surface order.
    pub events: RVec<RString>,
}

/// `readEvent` request.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct ReadEventRequest {
    pub session_id: RString,
    /// Signed so that a negative seq reaches the plugin and gets `EVENT_NOT_FOUND`.
    pub seq: i64,
    pub before: i64,
    pub after: i64,
}

/// `readEvent` response: the target and a raw window around it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct EventWindow {
    pub session: Header,
    pub target: RString,
    pub events: RVec<RString>,
    pub start_seq: u64,
    pub end_seq: u64,
}

/// One descendant in a lineage, flattened in pre-order (children after their parent, siblings by
/// `createdAt` then id). `parent_id` names the node it hangs under; `depth` is 1 for direct children.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Descendant {
    pub session: SessionRecord,
    pub parent_id: RString,
    pub depth: u32,
}

/// `traceSession`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SessionLineage {
    pub target: SessionRecord,
    /// Immediate parent first.
    pub ancestors: RVec<SessionRecord>,
    pub descendants: RVec<Descendant>,
    pub complete: bool,
    /// Present when `complete`.
    pub root: ROption<SessionRecord>,
    /// Present when not `complete`: the first parent id missing from the corpus.
    pub unresolved_parent_id: ROption<RString>,
}

/// `traceEvent`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EventTrace {
    pub session: Header,
    pub target: EventRecord,
    pub replaced_by: ROption<u64>,
    pub replacement_chain: RVec<u64>,
    pub replaced_event_seqs: RVec<u64>,
    pub source_event_seqs: RVec<u64>,
    pub derived_event_seqs: RVec<u64>,
}

/// A folded `session/title` (spec §7.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Title {
    pub title: RString,
    pub message_seqs: RVec<u64>,
    /// The title's `source` object as JSON text.
    pub source: RString,
    pub event_seq: u64,
    pub updated_at: i64,
}

/// One entry of `readTitleSnapshots`: fulfilled with the header and title (if any), or rejected.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct TitleSnapshot {
    pub session_id: RString,
    pub session: ROption<Header>,
    pub title: ROption<Title>,
    /// Present when this id was rejected (not found, corrupt, conflict, fold error).
    pub error: ROption<super::PluginError>,
}

/// A session or log the corpus could not read; it is left out and everything else keeps working
/// (DESIGN.md deviation 2).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct CorpusProblem {
    pub path: RString,
    pub session_id: ROption<RString>,
    /// The log codec's code, e.g. `LOG_SEQ_GAP`.
    pub code: RString,
    pub message: RString,
}

/// `searchSessions` request (spec §4.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct SearchSessionsRequest {
    pub query: RString,
    pub session_filters: RVec<SessionFilter>,
    pub event_filters: RVec<EventFilter>,
    pub limit: ROption<u64>,
    pub cursor: ROption<RString>,
}

/// `searchEvents` request (spec §4.1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq)]
pub struct SearchEventsRequest {
    pub session_id: RString,
    pub query: RString,
    pub filters: RVec<EventFilter>,
    pub limit: ROption<u64>,
    pub cursor: ROption<RString>,
}

/// `SessionEventSearchHit`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EventHit {
    pub session_id: RString,
    pub seq: u64,
    pub kind: RString,
    pub time: i64,
    pub surface: Surface,
    pub snippet: RString,
}

/// `SessionSearchHit`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SessionHit {
    pub header: Header,
    pub live: bool,
    pub persisted: bool,
    pub best_match: EventHit,
}

/// A page of `searchSessions`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SessionSearchPage {
    pub items: RVec<SessionHit>,
    pub next_cursor: ROption<RString>,
    /// Sessions left out of this search because they could not be read.
    pub problems: RVec<CorpusProblem>,
}

/// A page of `searchEvents`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct EventSearchPage {
    pub session: Header,
    pub items: RVec<EventHit>,
    pub next_cursor: ROption<RString>,
    pub problems: RVec<CorpusProblem>,
}

/// A citation candidate (spec §6.2).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub session_id: RString,
    pub label: RString,
    pub cwd: ROption<RString>,
    pub created_at: i64,
    /// `@[label](dsh-session:…)`, ready to insert.
    pub mention: RString,
}

/// A reference to cite (spec §6.5 input).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ReferenceInput {
    pub session_id: RString,
    pub label: ROption<RString>,
}

/// `prepare` request: the citing session, the user's rewritten content (JSON array of content blocks),
/// and the references parsed from it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PrepareRequest {
    pub agent_session_id: RString,
    pub content: RString,
    pub references: RVec<ReferenceInput>,
}

/// `prepare` response: the content (JSON) and, when something was cited, the context message's `data`
/// (a `user/message` payload as JSON text) to append before the user's line.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub content: RString,
    pub additional_context: ROption<RString>,
}
