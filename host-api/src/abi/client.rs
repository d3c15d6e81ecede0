//! The typed face of the services for a host: serialise the request record, call through the vtable,
//! parse the response record. It also keeps the contract's promise to older plugins: a method a
//! plugin's minor lacks is never called; the client answers with that method's documented default.

use abi_stable::std_types::{RResult, RStr, RString};
use serde::{de::DeserializeOwned, Serialize};

use super::call::Call;
use super::error::{ErrorCode, PluginError};
use super::query::SessionQueryBox;
use super::reference::SessionReferenceResolverBox;
use super::types::*;
use super::version::{ContractVersion, MINOR_DIAGNOSTICS, MINOR_SEARCH_MODES};

/// Serialises `request`, makes the call, parses the response.
fn roundtrip<Req: Serialize, Resp: DeserializeOwned>(
    method: &str,
    request: &Req,
    call: impl FnOnce(RStr<'_>) -> RResult<RString, PluginError>,
) -> Result<Resp, PluginError> {
    let text = serde_json::to_string(request).map_err(|e| {
        PluginError::new(
            ErrorCode::PluginBadMessage,
            format!("{method}: the request could not be encoded: {e}"),
        )
    })?;
    let response = call(RStr::from_str(&text)).into_result()?;
    serde_json::from_str(response.as_str()).map_err(|e| {
        PluginError::new(
            ErrorCode::PluginBadMessage,
            format!("{method}: the plugin's response does not parse: {e}"),
        )
    })
}

/// Typed calls to a plugin's `SessionQuery`.
pub struct QueryClient<'a> {
    service: &'a SessionQueryBox,
    contract: ContractVersion,
}

macro_rules! query_methods {
    ($($(#[$doc:meta])* $name:ident($req:ty) -> $resp:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, call: &Call, request: &$req) -> Result<$resp, PluginError> {
                roundtrip(stringify!($name), request, |r| self.service.$name(call.as_ref(), r))
            }
        )*
    };
}

impl<'a> QueryClient<'a> {
    /// `contract` is the serving plugin's, as its stamp said.
    pub fn new(service: &'a SessionQueryBox, contract: ContractVersion) -> Self {
        Self { service, contract }
    }

    /// The serving plugin's contract version.
    pub fn contract(&self) -> ContractVersion {
        self.contract
    }

    /// Whether the plugin reads the search requests' `match` and `order` fields (contract 2.2). An
    /// older one ignores them and answers with the phrase semantics and spec order: a host asking for
    /// either must say so rather than present that answer as what it asked for.
    pub fn has_search_modes(&self) -> bool {
        self.contract.has_minor(MINOR_SEARCH_MODES)
    }

    query_methods! {
        /// `listSessions`.
        list_sessions(EmptyRequest) -> Vec<SessionRecord>;
        /// `readSession`.
        read_session(SessionRequest) -> SessionEvents;
        /// `filterSessions`.
        filter_sessions(FilterSessionsRequest) -> Vec<SessionRecord>;
        /// `filterEvents`.
        filter_events(FilterEventsRequest) -> Vec<EventDocument>;
        /// `listEvents`.
        list_events(SessionRequest) -> Vec<EventRecord>;
        /// `readSurface`.
        read_surface(SessionRequest) -> SurfaceSnapshot;
        /// `readEvent`.
        read_event(ReadEventRequest) -> EventWindow;
        /// `traceSession`.
        trace_session(SessionRequest) -> SessionLineage;
        /// `traceEvent`.
        trace_event(TraceEventRequest) -> EventTrace;
        /// `readTitleSnapshots`.
        read_title_snapshots(TitleSnapshotsRequest) -> Vec<TitleSnapshot>;
        /// Sessions the corpus could not read at the last look.
        problems(EmptyRequest) -> Vec<CorpusProblem>;
    }

    /// A request whose record type the caller brings (search, diagnostics): any serde shape.
    pub fn raw<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        method: QueryMethod,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, PluginError> {
        let name = method.name();
        if method == QueryMethod::Diagnostics && !self.contract.has_minor(MINOR_DIAGNOSTICS) {
            return Err(PluginError::new(
                ErrorCode::PluginNotImplemented,
                format!(
                    "the serving plugin was built against contract {}, which has no {name} call",
                    self.contract
                ),
            ));
        }
        roundtrip(name, request, |r| match method {
            QueryMethod::SearchSessions => self.service.search_sessions(call.as_ref(), r),
            QueryMethod::SearchEvents => self.service.search_events(call.as_ref(), r),
            QueryMethod::Diagnostics => self.service.diagnostics(call.as_ref(), r),
        })
    }
}

/// The query methods whose records live outside [`super::types`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMethod {
    SearchSessions,
    SearchEvents,
    /// Contract 2.1. Asked of a 2.0 plugin, the client answers `PLUGIN_NOT_IMPLEMENTED` itself.
    Diagnostics,
}

impl QueryMethod {
    pub fn name(self) -> &'static str {
        match self {
            Self::SearchSessions => "search_sessions",
            Self::SearchEvents => "search_events",
            Self::Diagnostics => "diagnostics",
        }
    }
}

/// Typed calls to a plugin's `SessionReferenceResolver`; the record types are the caller's.
pub struct ResolverClient<'a> {
    service: &'a SessionReferenceResolverBox,
}

impl<'a> ResolverClient<'a> {
    pub fn new(service: &'a SessionReferenceResolverBox) -> Self {
        Self { service }
    }

    /// `listCandidates`.
    pub fn list_candidates<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, PluginError> {
        roundtrip("list_candidates", request, |r| {
            self.service.list_candidates(call.as_ref(), r)
        })
    }

    /// `prepare`.
    pub fn prepare<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, PluginError> {
        roundtrip("prepare", request, |r| {
            self.service.prepare(call.as_ref(), r)
        })
    }
}
