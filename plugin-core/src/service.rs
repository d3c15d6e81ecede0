//! The two contracts implemented over [`Reads`]: every method runs inside [`contain`], so a bug surfaces
//! as `PLUGIN_PANICKED` and never as a crashed host.

use std::sync::{Arc, Mutex};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{ROption, RResult, RStr, RString, RVec},
};
use host_api::abi::{
    query::SessionQuery_TO, reference::SessionReferenceResolver_TO, CancelToken, Candidate,
    CorpusProblem, ErrorCode, EventDocument, EventFilter, EventRecord, EventSearchPage, EventTrace,
    EventWindow, HostContextBox, PluginError, PluginInstance, PrepareRequest, Prepared,
    ReadEventRequest, SearchEventsRequest, SearchSessionsRequest, SessionEvents, SessionFilter,
    SessionLineage, SessionQuery, SessionRecord, SessionReferenceResolver, SessionSearchPage,
    SurfaceSnapshot, TitleSnapshot,
};

use crate::config::Config;
use crate::contain::contain;
use crate::corpus::Corpus;
use crate::index::Index;
use crate::reads::Reads;

/// A fault a test fixture library can build into its instances. Not reachable from config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Panic inside the named `SessionQuery` method.
    PanicIn(&'static str),
}

/// One plugin instance's state, shared by its two services. Dropping the last reference closes the index.
pub struct Service {
    reads: Reads,
    fault: Option<Fault>,
    // Held only to keep the database open for the instance's lifetime; search (issue 4) will use it.
    _index: Mutex<Option<Index>>,
}

impl Service {
    /// Builds an instance: the merged corpus, and the index when the config names one.
    pub fn open(
        config: Config,
        host: Arc<HostContextBox>,
        fault: Option<Fault>,
    ) -> Result<Self, PluginError> {
        let sessions_root = config.sessions_root.clone().or_else(|| {
            host.sessions_root()
                .into_option()
                .map(|s| s.to_string().into())
        });
        let index = match &config.index_path {
            Some(path) => Some(Index::open(path, host.clone())?),
            None => None,
        };
        let corpus = Corpus::new(host, sessions_root);
        Ok(Self {
            reads: Reads::new(corpus, config.read_window_max),
            fault,
            _index: Mutex::new(index),
        })
    }

    /// The ABI instance: both services share this state.
    pub fn into_instance(self) -> PluginInstance {
        let shared = Arc::new(self);
        PluginInstance {
            query: SessionQuery_TO::from_value(QueryService(shared.clone()), TD_Opaque),
            resolver: SessionReferenceResolver_TO::from_value(ResolverService(shared), TD_Opaque),
        }
    }

    fn call<T>(
        &self,
        name: &'static str,
        body: impl FnOnce(&Reads) -> Result<T, PluginError>,
    ) -> RResult<T, PluginError> {
        contain(name, || {
            if self.fault == Some(Fault::PanicIn(name)) {
                panic!("injected test fault in {name}");
            }
            body(&self.reads)
        })
    }
}

fn not_implemented(what: &str, issue: u32) -> PluginError {
    PluginError::new(
        ErrorCode::PluginNotImplemented,
        format!("{what} is not implemented in this plugin build yet (tracked as issue {issue})"),
    )
}

/// `ctx.sessionQuery`.
struct QueryService(Arc<Service>);

/// `ctx.sessionReferenceResolver`.
struct ResolverService(Arc<Service>);

impl SessionQuery for QueryService {
    fn list_sessions(&self, cancel: CancelToken) -> RResult<RVec<SessionRecord>, PluginError> {
        self.0
            .call("list_sessions", |r| r.list_sessions(cancel).map(RVec::from))
    }

    fn read_session(&self, session_id: RStr<'_>) -> RResult<SessionEvents, PluginError> {
        self.0
            .call("read_session", |r| r.read_session(session_id.as_str()))
    }

    fn filter_sessions(
        &self,
        filters: RVec<SessionFilter>,
        cancel: CancelToken,
    ) -> RResult<RVec<SessionRecord>, PluginError> {
        self.0.call("filter_sessions", |r| {
            r.filter_sessions(&filters, cancel).map(RVec::from)
        })
    }

    fn filter_events(
        &self,
        session_id: RStr<'_>,
        filters: RVec<EventFilter>,
    ) -> RResult<RVec<EventDocument>, PluginError> {
        self.0.call("filter_events", |r| {
            r.filter_events(session_id.as_str(), &filters)
                .map(RVec::from)
        })
    }

    fn list_events(&self, session_id: RStr<'_>) -> RResult<RVec<EventRecord>, PluginError> {
        self.0.call("list_events", |r| {
            r.list_events(session_id.as_str()).map(RVec::from)
        })
    }

    fn read_surface(&self, session_id: RStr<'_>) -> RResult<SurfaceSnapshot, PluginError> {
        self.0
            .call("read_surface", |r| r.read_surface(session_id.as_str()))
    }

    fn read_event(
        &self,
        request: ReadEventRequest,
        cancel: CancelToken,
    ) -> RResult<EventWindow, PluginError> {
        self.0
            .call("read_event", |r| r.read_event(&request, cancel))
    }

    fn trace_session(
        &self,
        session_id: RStr<'_>,
        cancel: CancelToken,
    ) -> RResult<SessionLineage, PluginError> {
        self.0.call("trace_session", |r| {
            r.trace_session(session_id.as_str(), cancel)
        })
    }

    fn trace_event(
        &self,
        session_id: RStr<'_>,
        seq: i64,
        cancel: CancelToken,
    ) -> RResult<EventTrace, PluginError> {
        self.0.call("trace_event", |r| {
            r.trace_event(session_id.as_str(), seq, cancel)
        })
    }

    fn read_title_snapshots(
        &self,
        session_ids: RVec<RString>,
        cancel: CancelToken,
    ) -> RResult<RVec<TitleSnapshot>, PluginError> {
        self.0.call("read_title_snapshots", |r| {
            r.read_title_snapshots(&session_ids, cancel).map(RVec::from)
        })
    }

    fn search_sessions(
        &self,
        _request: SearchSessionsRequest,
        _cancel: CancelToken,
    ) -> RResult<SessionSearchPage, PluginError> {
        self.0.call("search_sessions", |_| {
            Err(not_implemented("search_sessions (full-text search)", 4))
        })
    }

    fn search_events(
        &self,
        _request: SearchEventsRequest,
        _cancel: CancelToken,
    ) -> RResult<EventSearchPage, PluginError> {
        self.0.call("search_events", |_| {
            Err(not_implemented("search_events (full-text search)", 4))
        })
    }

    fn problems(&self) -> RVec<CorpusProblem> {
        self.0
            .call("problems", |r| Ok(RVec::from(r.problems())))
            .unwrap_or_default()
    }
}

impl SessionReferenceResolver for ResolverService {
    fn list_candidates(
        &self,
        _agent_session_id: RStr<'_>,
        _query: RStr<'_>,
        _limit: ROption<u64>,
        _cancel: CancelToken,
    ) -> RResult<RVec<Candidate>, PluginError> {
        self.0.call("list_candidates", |_| {
            Err(not_implemented("list_candidates (citations)", 5))
        })
    }

    fn prepare(
        &self,
        _request: PrepareRequest,
        _cancel: CancelToken,
    ) -> RResult<Prepared, PluginError> {
        self.0.call("prepare", |_| {
            Err(not_implemented("prepare (citations)", 5))
        })
    }
}
