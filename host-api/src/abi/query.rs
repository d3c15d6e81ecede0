//! `ctx.sessionQuery`: exact reads (spec §5) and search (spec §4) over the merged corpus.
//!
//! Every method takes the per-call context and a JSON request document and returns a JSON response
//! document (the records in [`super::types`] and the search records); [`super::client::QueryClient`] is
//! the typed face of it. The vtable is a prefix type: a later minor appends methods after the last one.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, RResult, RStr, RString},
};

use super::call::CallRef;
use super::error::{ErrorCode, PluginError};

/// The session query service. Implemented by the plugin; every method is synchronous and thread-safe.
/// Requests and responses are named after the record types they carry.
#[sabi_trait]
pub trait SessionQuery: Send + Sync + 'static {
    /// `listSessions`: `{}` → `[SessionRecord]`, newest first (createdAt descending, then id).
    fn list_sessions(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `readSession`: `SessionRequest` → `SessionEvents`.
    fn read_session(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `filterSessions`: `FilterSessionsRequest` → `[SessionRecord]`.
    fn filter_sessions(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;

    /// `filterEvents`: `FilterEventsRequest` → `[EventDocument]`.
    fn filter_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `listEvents`: `SessionRequest` → `[EventRecord]`.
    fn list_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `readSurface`: `SessionRequest` → `SurfaceSnapshot`.
    fn read_surface(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `readEvent`: `ReadEventRequest` → `EventWindow`.
    fn read_event(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `traceSession`: `SessionRequest` → `SessionLineage`.
    fn trace_session(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `traceEvent`: `TraceEventRequest` → `EventTrace`.
    fn trace_event(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// `readTitleSnapshots`: `TitleSnapshotsRequest` → `[TitleSnapshot]`.
    fn read_title_snapshots(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;

    /// `searchSessions`: `SessionSearchRequest` → `SessionSearchPage`.
    fn search_sessions(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;

    /// `searchEvents`: `SessionEventSearchRequest` → `SessionEventSearchPage`.
    fn search_events(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// Sessions the corpus could not read at the last look: `{}` → `[CorpusProblem]`.
    #[sabi(last_prefix_field)]
    fn problems(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;

    /// Contract 2.1: the search index's view of the corpus: `{}` → `Diagnostics` (what is indexed,
    /// every session left out with path or id, code and reason).
    ///
    /// Every method after `last_prefix_field` has a default body: abi_stable calls it when the
    /// plugin's vtable predates the method, so even a host that bypasses the client's guard gets a
    /// typed answer, never a panic.
    fn diagnostics(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError> {
        let _ = (call, request);
        RResult::RErr(PluginError::new(
            ErrorCode::PluginMethodUnavailable,
            "the serving plugin predates contract 2.1, which added diagnostics",
        ))
    }
}

/// The owned, type-erased service the host holds.
pub type SessionQueryBox = SessionQuery_TO<RBox<()>>;
