//! The typed face of the services for a host: serialise the request record, call through the vtable,
//! parse the response record. It also keeps the contract's promise to older plugins: every method
//! passes one guard ([`available`]) that knows the minor which added it, so a method a plugin's minor
//! lacks is never called and answers `PLUGIN_METHOD_UNAVAILABLE` instead.

use std::sync::atomic::AtomicBool;

use abi_stable::std_types::{RResult, RStr, RString};
use serde::{de::DeserializeOwned, Serialize};

use super::call::{Call, CallRef};
use super::error::{ErrorCode, PluginError};
use super::query::SessionQueryBox;
use super::reference::SessionReferenceResolverBox;
use super::types::*;
use super::version::{ContractVersion, MINOR_DIAGNOSTICS, MINOR_SEARCH_MODES};

/// The one guard every method passes: `Ok` when a plugin of `contract` has `method`, which minor
/// `since_minor` added; otherwise the typed answer a host gives for it, never a call into a vtable
/// slot the plugin does not have (abi_stable would panic there).
pub fn available(
    contract: ContractVersion,
    method: &str,
    since_minor: u16,
) -> Result<(), PluginError> {
    if contract.has_minor(since_minor) {
        return Ok(());
    }
    Err(PluginError::new(
        ErrorCode::PluginMethodUnavailable,
        format!(
            "the serving plugin was built against contract {contract}, which has no {method} call \
             (it came with {}.{since_minor}); update the plugin",
            contract.major
        ),
    ))
}

/// The call as the plugin sees it: cancelled by the host's stop flag too, when there is one.
fn with_stop<T>(call: &Call, stop: Option<&AtomicBool>, f: impl FnOnce(CallRef<'_>) -> T) -> T {
    match stop {
        Some(stop) => f(call.within(stop).as_ref()),
        None => f(call.as_ref()),
    }
}

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
    stop: Option<&'a AtomicBool>,
}

macro_rules! query_methods {
    ($($(#[$doc:meta])* $name:ident($req:ty) -> $resp:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, call: &Call, request: &$req) -> Result<$resp, PluginError> {
                // Every one of these is in contract 2.0; the guard still runs, so a method appended
                // here later only needs its minor.
                available(self.contract, stringify!($name), 0)?;
                roundtrip(stringify!($name), request, |r| {
                    with_stop(call, self.stop, |c| self.service.$name(c, r))
                })
            }
        )*
    };
}

impl<'a> QueryClient<'a> {
    /// `contract` is the serving plugin's, as its stamp said.
    pub fn new(service: &'a SessionQueryBox, contract: ContractVersion) -> Self {
        Self {
            service,
            contract,
            stop: None,
        }
    }

    /// The same client, every call of which `stop` cancels too (the host sets it to end a plugin
    /// generation's calls in flight: a reload, shutdown).
    pub fn with_stop(mut self, stop: &'a AtomicBool) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The service object itself, past the guard: for tests that check what an older plugin's
    /// shorter vtable answers when a host calls it directly.
    #[doc(hidden)]
    pub fn service_for_tests(&self) -> &SessionQueryBox {
        self.service
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
        available(self.contract, name, method.since_minor())?;
        roundtrip(name, request, |r| {
            with_stop(call, self.stop, |c| match method {
                QueryMethod::SearchSessions => self.service.search_sessions(c, r),
                QueryMethod::SearchEvents => self.service.search_events(c, r),
                QueryMethod::Diagnostics => self.service.diagnostics(c, r),
            })
        })
    }
}

/// The query methods whose records live outside [`super::types`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryMethod {
    SearchSessions,
    SearchEvents,
    /// Contract 2.1. Asked of a 2.0 plugin, the client answers `PLUGIN_METHOD_UNAVAILABLE` itself.
    Diagnostics,
}

impl QueryMethod {
    /// The contract minor that added the method.
    pub fn since_minor(self) -> u16 {
        match self {
            Self::SearchSessions | Self::SearchEvents => 0,
            Self::Diagnostics => MINOR_DIAGNOSTICS,
        }
    }

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
    stop: Option<&'a AtomicBool>,
}

impl<'a> ResolverClient<'a> {
    pub fn new(service: &'a SessionReferenceResolverBox) -> Self {
        Self {
            service,
            stop: None,
        }
    }

    /// The same client, every call of which `stop` cancels too.
    pub fn with_stop(mut self, stop: &'a AtomicBool) -> Self {
        self.stop = Some(stop);
        self
    }

    /// `listCandidates`.
    pub fn list_candidates<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, PluginError> {
        roundtrip("list_candidates", request, |r| {
            with_stop(call, self.stop, |c| self.service.list_candidates(c, r))
        })
    }

    /// `prepare`.
    pub fn prepare<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        call: &Call,
        request: &Req,
    ) -> Result<Resp, PluginError> {
        roundtrip("prepare", request, |r| {
            with_stop(call, self.stop, |c| self.service.prepare(c, r))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_answers_method_unavailable_for_a_method_newer_than_the_plugin() {
        let v2_0 = ContractVersion { major: 2, minor: 0 };
        let err =
            available(v2_0, "diagnostics", QueryMethod::Diagnostics.since_minor()).unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginMethodUnavailable);
        assert!(
            err.message.contains("contract 2.0") && err.message.contains("2.1"),
            "{err}"
        );
        assert!(available(ContractVersion { major: 2, minor: 1 }, "diagnostics", 1).is_ok());
        assert!(available(
            v2_0,
            "search_events",
            QueryMethod::SearchEvents.since_minor()
        )
        .is_ok());
    }
}
