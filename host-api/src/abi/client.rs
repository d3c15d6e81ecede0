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
    roundtrip_with(method, request, call, |text| serde_json::from_str(text))
}

/// [`roundtrip`] with the response parsed by `parse`.
fn roundtrip_with<Req: Serialize, Resp>(
    method: &str,
    request: &Req,
    call: impl FnOnce(RStr<'_>) -> RResult<RString, PluginError>,
    parse: impl FnOnce(&str) -> serde_json::Result<Resp>,
) -> Result<Resp, PluginError> {
    let text = serde_json::to_string(request).map_err(|e| {
        PluginError::new(
            ErrorCode::PluginBadMessage,
            format!("{method}: the request could not be encoded: {e}"),
        )
    })?;
    let response = call(RStr::from_str(&text)).into_result()?;
    parse(response.as_str()).map_err(|e| {
        PluginError::new(
            ErrorCode::PluginBadMessage,
            format!("{method}: the plugin's response does not parse: {e}"),
        )
    })
}

/// About the fewest bytes of JSON a record of a list answer takes (a session record without its
/// optional fields is about 80): what [`parse_list`] reserves room for.
const LIST_ITEM_BYTES: usize = 64;

/// At most how many records [`parse_list`] reserves room for up front.
const LIST_RESERVE_MAX: usize = 1 << 20;

/// A list answer (a JSON array) parsed into a vector reserved up front from the text's length. A JSON
/// array tells its parser nothing of its length, so the vector grew by doubling: for 10,000 sessions,
/// a copy of every record made so far into freshly faulted memory at each step, a tenth of a
/// `sessions` command. The reservation errs large; what the records do not fill is address space
/// never touched.
fn parse_list<T: DeserializeOwned>(text: &str) -> serde_json::Result<Vec<T>> {
    use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
    use std::marker::PhantomData;

    struct Reserved<T>(usize, PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>> DeserializeSeed<'de> for Reserved<T> {
        type Value = Vec<T>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
            d.deserialize_seq(self)
        }
    }
    impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Reserved<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(self.0);
            while let Some(item) = seq.next_element()? {
                out.push(item);
            }
            Ok(out)
        }
    }
    let reserve = (text.len() / LIST_ITEM_BYTES).min(LIST_RESERVE_MAX);
    let mut de = serde_json::Deserializer::from_str(text);
    let list = Reserved(reserve, PhantomData).deserialize(&mut de)?;
    de.end()?;
    Ok(list)
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

/// [`query_methods`] for the methods that answer a list (`-> [Record]`), parsed by [`parse_list`].
macro_rules! list_query_methods {
    ($($(#[$doc:meta])* $name:ident($req:ty) -> [$item:ty];)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, call: &Call, request: &$req) -> Result<Vec<$item>, PluginError> {
                available(self.contract, stringify!($name), 0)?;
                roundtrip_with(
                    stringify!($name),
                    request,
                    |r| with_stop(call, self.stop, |c| self.service.$name(c, r)),
                    parse_list,
                )
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

    list_query_methods! {
        /// `listSessions`.
        list_sessions(EmptyRequest) -> [SessionRecord];
        /// `filterSessions`.
        filter_sessions(FilterSessionsRequest) -> [SessionRecord];
        /// `filterEvents`.
        filter_events(FilterEventsRequest) -> [EventDocument];
        /// `listEvents`.
        list_events(SessionRequest) -> [EventRecord];
    }

    query_methods! {
        /// `readSession`.
        read_session(SessionRequest) -> SessionEvents;
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

    /// A list parsed into its reserved vector is the list a plain parse makes, and what a plain parse
    /// refuses (not an array, a bad record, text after the array) it refuses too.
    #[test]
    fn a_list_parsed_into_a_reserved_vector_is_the_plain_parse() {
        let records: Vec<serde_json::Value> = (0..300)
            .map(|i| serde_json::json!({"header": {"version": 0, "id": format!("s{i}"), "createdAt": i}, "live": false, "persisted": true}))
            .collect();
        let text = serde_json::to_string(&records).unwrap();
        let parsed: Vec<SessionRecord> = parse_list(&text).unwrap();
        let plain: Vec<SessionRecord> = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, plain);
        assert_eq!(parsed.len(), 300);
        assert!(parsed.capacity() >= 300, "reserved up front");
        assert!(parse_list::<SessionRecord>("[]").unwrap().is_empty());
        assert!(parse_list::<SessionRecord>(" [ ] ").unwrap().is_empty());
        for bad in ["{}", "[1]", "[] []", "[", "", "null"] {
            assert!(parse_list::<SessionRecord>(bad).is_err(), "{bad:?}");
            assert!(
                serde_json::from_str::<Vec<SessionRecord>>(bad).is_err(),
                "{bad:?}"
            );
        }
    }
}
