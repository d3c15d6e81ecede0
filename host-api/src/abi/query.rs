//! `ctx.sessionQuery`: exact reads (spec §5) and search (spec §4) over the merged corpus.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, RResult, RStr, RString, RVec},
};

use super::error::PluginError;
use super::types::*;
use super::CancelToken;

/// The session query service. Implemented by the plugin; every method is synchronous and thread-safe.
#[sabi_trait]
pub trait SessionQuery: Send + Sync + 'static {
    /// `listSessions`: the whole corpus, newest first (createdAt descending, then id ascending).
    fn list_sessions(&self, cancel: CancelToken) -> RResult<RVec<SessionRecord>, PluginError>;

    /// `readSession`: header and every event.
    fn read_session(&self, session_id: RStr<'_>) -> RResult<SessionEvents, PluginError>;

    /// `filterSessions`: `listSessions` narrowed by the clauses (AND of clauses, OR within one).
    fn filter_sessions(
        &self,
        filters: RVec<SessionFilter>,
        cancel: CancelToken,
    ) -> RResult<RVec<SessionRecord>, PluginError>;

    /// `filterEvents`: the session's documents narrowed by metadata clauses and the literal text scan.
    fn filter_events(
        &self,
        session_id: RStr<'_>,
        filters: RVec<EventFilter>,
    ) -> RResult<RVec<EventDocument>, PluginError>;

    /// `listEvents`: every raw event's metadata and label, in seq order.
    fn list_events(&self, session_id: RStr<'_>) -> RResult<RVec<EventRecord>, PluginError>;

    /// `readSurface`: the current surface, in model order.
    fn read_surface(&self, session_id: RStr<'_>) -> RResult<SurfaceSnapshot, PluginError>;

    /// `readEvent`: one event and a raw window around it.
    fn read_event(
        &self,
        request: ReadEventRequest,
        cancel: CancelToken,
    ) -> RResult<EventWindow, PluginError>;

    /// `traceSession`: ancestors and descendants by `parentSession`.
    fn trace_session(
        &self,
        session_id: RStr<'_>,
        cancel: CancelToken,
    ) -> RResult<SessionLineage, PluginError>;

    /// `traceEvent`: what replaced an event, what it replaced, what it cites and what cites it.
    fn trace_event(
        &self,
        session_id: RStr<'_>,
        seq: i64,
        cancel: CancelToken,
    ) -> RResult<EventTrace, PluginError>;

    /// `readTitleSnapshots`: titles of many sessions, each fulfilled or rejected on its own.
    fn read_title_snapshots(
        &self,
        session_ids: RVec<RString>,
        cancel: CancelToken,
    ) -> RResult<RVec<TitleSnapshot>, PluginError>;

    /// `searchSessions`: full-text search across sessions, one best hit per session.
    fn search_sessions(
        &self,
        request: SearchSessionsRequest,
        cancel: CancelToken,
    ) -> RResult<SessionSearchPage, PluginError>;

    /// `searchEvents`: full-text search inside one session.
    fn search_events(
        &self,
        request: SearchEventsRequest,
        cancel: CancelToken,
    ) -> RResult<EventSearchPage, PluginError>;

    /// Sessions the corpus could not read at the last look (path, code, reason).
    #[sabi(last_prefix_field)]
    fn problems(&self) -> RVec<CorpusProblem>;
}

/// The owned, type-erased service the host holds.
pub type SessionQueryBox = SessionQuery_TO<RBox<()>>;
