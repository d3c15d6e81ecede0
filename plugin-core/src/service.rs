//! The two contracts implemented over [`Reads`]: every method parses its JSON request, runs inside
//! [`contain`] (so a bug surfaces as `PLUGIN_PANICKED`, never as a crashed host), and answers a JSON
//! response.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RResult, RStr, RString},
};
use host_api::abi::wire::reference::{CandidatesRequest, PrepareRequest};
use host_api::abi::wire::search::{SessionEventSearchRequest, SessionSearchRequest};
use host_api::abi::{
    query::SessionQuery_TO, reference::SessionReferenceResolver_TO, root::PluginInstance_TO,
    CallRef, EmptyRequest, ErrorCode, FilterEventsRequest, FilterSessionsRequest, HostContextBox,
    LogLevel, PluginError, PluginInstance, PluginInstanceBox, ReadEventRequest, SessionQuery,
    SessionQueryBox, SessionReferenceResolver, SessionReferenceResolverBox, SessionRequest,
    TitleSnapshotsRequest, TraceEventRequest,
};
use serde::{de::DeserializeOwned, Serialize};

use crate::cancel::{call_stopped, Cancel};
use crate::config::Config;
use crate::contain::{contain, panic_message};
use crate::corpus::Corpus;
use crate::reads::Reads;
use crate::reference::{self, ExactTitles, Limits, TitleSource};
use crate::search::team::TeamSearch;
use crate::search::Search;
use crate::sources::SourceRoots;

/// A fault a test fixture library can build into its instances. Not reachable from config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Panic inside the named `SessionQuery` method.
    PanicIn(&'static str),
}

/// One plugin instance's state, shared by its two services. Dropping the last reference closes the index.
pub struct Service {
    reads: Reads,
    limits: Limits,
    fault: Option<Fault>,
    panic_on_drop: bool,
    /// The search index; `None` when the config names no index path.
    search: Option<Search>,
    /// The team's PostgreSQL index, when the config's `index` is a URL (then `search` is `None`).
    team: Option<Arc<TeamSearch>>,
    /// Config keys this build does not know (ignored; reported in diagnostics).
    unknown_config_keys: Vec<String>,
    /// Request fields this build ignored, as `method: path`, for diagnostics. Bounded, so a host
    /// sending a new field on every call cannot grow it.
    unknown_request_fields: Mutex<BTreeSet<String>>,
}

/// The most distinct ignored request fields one instance remembers.
const UNKNOWN_FIELDS_KEPT: usize = 64;

/// `root` made absolute against this process's folder, without resolving symbolic links or `..`
/// (`std::path::absolute`). The index keys every log by its path: a root named relatively, from
/// another folder or by another process, must name the same logs as its absolute spelling, or every
/// log would look moved and be read and indexed again (a minute at 1 GB), and two processes naming
/// one root two ways would undo each other's rows.
fn absolute(root: PathBuf) -> PathBuf {
    std::path::absolute(&root).unwrap_or(root)
}

impl Service {
    /// Builds an instance: the merged corpus, and the index when the config names one.
    pub fn open(
        config: Config,
        host: Arc<HostContextBox>,
        fault: Option<Fault>,
    ) -> Result<Self, PluginError> {
        Self::open_with(config, host, fault, false)
    }

    /// [`Service::open`], optionally with a panic injected into its drop (test fixtures only).
    pub fn open_with(
        config: Config,
        host: Arc<HostContextBox>,
        fault: Option<Fault>,
        panic_on_drop: bool,
    ) -> Result<Self, PluginError> {
        let sessions_root = config
            .sessions_root
            .clone()
            .or_else(|| {
                host.sessions_root()
                    .into_option()
                    .map(|s| s.to_string().into())
            })
            .map(absolute);
        let team = config
            .index
            .as_deref()
            .map(|url| Arc::new(TeamSearch::new(&config, url, sessions_root.clone())));
        let mut corpus = Corpus::new(host.clone(), sessions_root).with_sources(SourceRoots {
            claude_projects: config.claude_projects.clone().map(absolute),
            codex_home: config.codex_home.clone().map(absolute),
        });
        // Sessions other collections published are listed, read and cited like local ones.
        if let Some(team) = &team {
            corpus = corpus.with_remote(team.clone());
        }
        if !config.long_lived {
            corpus = corpus.reuse_listings_for(crate::search::refresh::ONE_SHOT_REUSE);
        }
        let index = match &config.index_path {
            Some(path) => {
                // The root is walked while the index loads what it recorded (see `Corpus::walk_early`).
                corpus.walk_early();
                Some(Search::open(&config, path, host)?)
            }
            None => None,
        };
        // A new process lists an unchanged root from what the index recorded, opening no log; it is
        // loaded only if the process lists the root at all.
        if let Some(loader) = index.as_ref().and_then(Search::seed_loader) {
            corpus.seed_known_later(loader);
        }
        if !config.unknown_keys.is_empty() {
            let message = format!(
                "plugin config: ignored keys this build does not know: {}",
                config.unknown_keys.join(", ")
            );
            corpus.host().log(LogLevel::Warn, RStr::from_str(&message));
        }
        Ok(Self {
            unknown_config_keys: config.unknown_keys.clone(),
            unknown_request_fields: Mutex::new(BTreeSet::new()),
            limits: Limits::from_config(&config),
            reads: Reads::new(corpus, config.read_window_max),
            fault,
            panic_on_drop,
            search: index,
            team,
        })
    }

    /// The ABI instance: both services share this state.
    pub fn into_instance(self) -> PluginInstanceBox {
        let host = self.reads.corpus().host_arc();
        PluginInstance_TO::from_value(Instance(Held::new(self, host)), TD_Opaque)
    }

    /// Parses the request, runs `body` with a cancellation handle for this call, serialises the answer.
    /// A request that does not parse is `bad_request` (the spec's own code where it has one).
    fn serve<Req: DeserializeOwned, Resp: Serialize>(
        &self,
        name: &'static str,
        call: CallRef<'_>,
        request: RStr<'_>,
        bad_request: ErrorCode,
        body: impl FnOnce(&Reads, Req, Cancel<'_>) -> Result<Resp, PluginError>,
    ) -> RResult<RString, PluginError> {
        contain(name, || {
            if self.fault == Some(Fault::PanicIn(name)) {
                panic!("injected test fault in {name}");
            }
            // Records are open: a field this build does not know is ignored and remembered.
            let mut ignored = Vec::new();
            let req: Req = serde_ignored::deserialize(
                &mut serde_json::Deserializer::from_str(request.as_str()),
                |path| ignored.push(format!("{name}: {path}")),
            )
            .map_err(|e| {
                PluginError::new(
                    bad_request,
                    format!("{name}: the request is not valid: {e}"),
                )
            })?;
            if !ignored.is_empty() {
                let mut seen = self
                    .unknown_request_fields
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                for field in ignored {
                    if seen.len() < UNKNOWN_FIELDS_KEPT {
                        seen.insert(field);
                    }
                }
            }
            let stopped = || call_stopped(&call);
            let response = body(&self.reads, req, Cancel::new(&stopped))
                .map_err(|e| stop_answer(name, &call, e))?;
            let encoded = serde_json::to_string(&response);
            self.reads.corpus().touch_listing();
            encoded.map(RString::from).map_err(|e| {
                PluginError::new(
                    ErrorCode::PluginBadMessage,
                    format!("{name}: the response could not be encoded: {e}"),
                )
            })
        })
    }
}

/// The methods whose cancellation has a code of the spec's own (`SESSION_QUERY_ABORTED` for the
/// searches, `SESSION_REFERENCE_CANCELLED` for citations); the exact reads answer the signal's own
/// reason, `PLUGIN_CANCELLED` (spec §4.11).
const SPEC_CANCEL_CODES: &[&str] = &[
    "search_sessions",
    "search_events",
    "list_candidates",
    "prepare",
];

/// What a call that stopped early answers. The loops below only ask "should I stop?", so they answer
/// with the cancellation code; here it becomes what actually stopped the call: a deadline that passed
/// (`PLUGIN_DEADLINE_EXCEEDED`, whatever the method) or the host's cancellation.
fn stop_answer(name: &str, call: &CallRef<'_>, error: PluginError) -> PluginError {
    let stopped = [
        ErrorCode::SessionQueryAborted,
        ErrorCode::SessionReferenceCancelled,
        ErrorCode::PluginCancelled,
    ]
    .contains(&error.code);
    if !stopped {
        return error;
    }
    if !call.is_cancelled() {
        if let Some(deadline) = call.deadline_unix_ms().into_option() {
            let now = host_api::abi::call::now_unix_ms();
            if now > deadline {
                return PluginError::new(
                    ErrorCode::PluginDeadlineExceeded,
                    format!(
                        "{name} stopped: the call passed its deadline {} ms ago",
                        now - deadline
                    ),
                );
            }
        }
    }
    if SPEC_CANCEL_CODES.contains(&name) {
        error
    } else {
        PluginError::new(
            ErrorCode::PluginCancelled,
            format!("{name} stopped: the host cancelled the call"),
        )
    }
}

/// The session a citation call acts for: the call context's calling session when the host names
/// one (it is what self-reference and authorization use), which a request may repeat but not
/// contradict; else the request's `agentSessionId`.
fn acting_session(caller: Option<&str>, requested: &mut String) -> Result<(), PluginError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    if requested.is_empty() {
        *requested = caller.to_string();
    } else if requested != caller {
        return Err(PluginError::new(
            ErrorCode::SessionReferenceInvalidReference,
            format!("agentSessionId {requested:?} is not the session making the call ({caller:?})"),
        ));
    }
    Ok(())
}

impl Service {
    /// The diagnostics report plus what this instance ignored: `unknownConfigKeys` and
    /// `unknownRequestFields` (`method: path`), both always present (empty when nothing was ignored).
    fn with_unknown_fields(
        &self,
        report: impl Serialize,
    ) -> Result<serde_json::Value, PluginError> {
        let mut value = serde_json::to_value(report).map_err(|e| {
            PluginError::new(
                ErrorCode::PluginBadMessage,
                format!("diagnostics: the report could not be encoded: {e}"),
            )
        })?;
        if let Some(object) = value.as_object_mut() {
            let fields: Vec<String> = self
                .unknown_request_fields
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned()
                .collect();
            object.insert(
                "unknownConfigKeys".into(),
                self.unknown_config_keys.clone().into(),
            );
            object.insert("unknownRequestFields".into(), fields.into());
        }
        Ok(value)
    }

    /// The search index, or `SEARCH_DISABLED` when the instance has none.
    fn search(&self) -> Result<&Search, PluginError> {
        self.search.as_ref().ok_or_else(|| {
            PluginError::new(
                ErrorCode::SessionQuerySearchDisabled,
                "search is disabled: the plugin was configured without an index path",
            )
        })
    }

    /// Brings the index up to date, telling the host how far it got (the host draws a bar when it
    /// takes long), then runs `body`.
    fn searching<T>(
        &self,
        cancel: Cancel<'_>,
        body: impl FnOnce(&Search, &dyn Fn() -> bool) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        let search = self.search()?;
        let corpus = self.reads.corpus();
        let cancelled = || cancel.is_cancelled();
        let progress = |done: u64, total: u64| {
            corpus
                .host()
                .report_progress(RStr::from_str("indexing sessions"), done, total)
        };
        // Failures here are not final: `body` refreshes again (a no-op when this one succeeded) and
        // reports a disabled index, a failed open or a cancellation with its own code, in the spec's order.
        // Another thread refreshing this instance is waited for a bounded time only: the call then
        // answers from the committed index.
        let _ = search.refresh_for_call(corpus, &cancelled, &progress);
        body(search, &cancelled)
    }
}

/// Citation candidates' labels from the search index's titles, so listing candidates never re-reads
/// every log; the exact reads answer when the instance has no index.
struct IndexTitles<'a>(&'a Service);

impl TitleSource for IndexTitles<'_> {
    fn titles(
        &self,
        ids: &[&str],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Option<String>>, PluginError> {
        let service = self.0;
        if let Some(team) = &service.team {
            return team.titles(ids);
        }
        let indexed = match &service.search {
            Some(search) => search.title_texts(service.reads.corpus(), cancelled, ids),
            None => return ExactTitles(&service.reads).titles(ids, cancelled),
        };
        match indexed {
            Ok(titles) => Ok(titles),
            // Cancelled: the whole listing stops. Any other index failure: fall back to the exact reads.
            Err(_) if cancelled() => Err(PluginError::new(
                ErrorCode::SessionReferenceCancelled,
                "listing citation candidates was cancelled",
            )),
            Err(_) => ExactTitles(&service.reads).titles(ids, cancelled),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.panic_on_drop {
            panic!("injected test fault while closing the instance");
        }
    }
}

/// The instance state as each service object holds it. The host drops these objects through
/// abi_stable's `extern "C"` vtable shims, where an unwinding panic aborts the host, so the last one
/// to go drops the service inside `catch_unwind` and reports a panic to the host's log instead.
#[derive(Clone)]
struct Held {
    service: Option<Arc<Service>>,
    host: Arc<HostContextBox>,
}

impl Held {
    fn new(service: Service, host: Arc<HostContextBox>) -> Self {
        Self {
            service: Some(Arc::new(service)),
            host,
        }
    }
}

impl std::ops::Deref for Held {
    type Target = Service;

    fn deref(&self) -> &Service {
        // Only `drop` takes the service out, so it is present whenever the object is in use.
        self.service.as_deref().expect("service present until drop")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(service) = self.service.take() else {
            return;
        };
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(service)));
        if let Err(payload) = dropped {
            let message = format!(
                "the plugin panicked while closing an instance (contained): {}",
                panic_message(&payload)
            );
            let _ = catch_unwind(AssertUnwindSafe(|| {
                self.host.log(LogLevel::Error, RStr::from_str(&message))
            }));
        }
    }
}

/// The plugin instance handed to the host.
struct Instance(Held);

impl PluginInstance for Instance {
    fn session_query(&self) -> SessionQueryBox {
        SessionQuery_TO::from_value(QueryService(self.0.clone()), TD_Opaque)
    }

    fn reference_resolver(&self) -> SessionReferenceResolverBox {
        SessionReferenceResolver_TO::from_value(ResolverService(self.0.clone()), TD_Opaque)
    }
}

/// `ctx.sessionQuery`.
struct QueryService(Held);

/// `ctx.sessionReferenceResolver`.
struct ResolverService(Held);

const BAD: ErrorCode = ErrorCode::PluginBadMessage;

/// Contract methods that parse their request as `$req` and answer through [`Service::serve`] under
/// their own name, with `$code` for a request that does not parse; `$svc` names the service for
/// bodies that need more than the reads.
macro_rules! served {
    ($svc:ident => $( fn $name:ident($code:expr, |$r:ident, $q:tt: $req:ty, $c:tt| $body:expr); )*) => {$(
        fn $name(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError> {
            #[allow(unused_variables)]
            let $svc: &Service = &self.0;
            $svc.serve(stringify!($name), call, request, $code, |$r, $q: $req, $c| $body)
        }
    )*};
}

impl SessionQuery for QueryService {
    served! { service =>
        fn list_sessions(BAD, |r, _: EmptyRequest, c| r.list_sessions(c));
        fn read_session(BAD, |r, q: SessionRequest, c| r.read_session(&q.session_id, c));
        fn filter_sessions(ErrorCode::SessionQueryInvalidFilter,
            |r, q: FilterSessionsRequest, c| r.filter_sessions(&q.filters, c));
        fn filter_events(ErrorCode::SessionQueryInvalidFilter,
            |r, q: FilterEventsRequest, c| r.filter_events(&q.session_id, &q.filters, c));
        fn list_events(BAD, |r, q: SessionRequest, c| r.list_events(&q.session_id, c));
        fn read_surface(BAD, |r, q: SessionRequest, c| r.read_surface(&q.session_id, c));
        fn read_event(ErrorCode::SessionQueryInvalidWindow,
            |r, q: ReadEventRequest, c| r.read_event(&q, c));
        fn trace_session(BAD, |r, q: SessionRequest, c| r.trace_session(&q.session_id, c));
        fn trace_event(ErrorCode::SessionQueryEventNotFound,
            |r, q: TraceEventRequest, c| r.trace_event(&q.session_id, q.seq, c));
        fn read_title_snapshots(BAD,
            |r, q: TitleSnapshotsRequest, c| r.read_title_snapshots(&q.session_ids, c));
        fn search_sessions(ErrorCode::SessionQueryInvalidQuery, |r, q: SessionSearchRequest, c| {
            match &service.team {
                Some(team) => team.search_sessions(r.corpus().host(), q),
                None => service.searching(c, |s, stop| s.search_sessions(r.corpus(), q, stop)),
            }
        });
        fn search_events(ErrorCode::SessionQueryInvalidQuery, |r, q: SessionEventSearchRequest, c| {
            match &service.team {
                Some(team) => team.search_events(r.corpus().host(), q),
                None => service.searching(c, |s, stop| s.search_events(r.corpus(), q, stop)),
            }
        });
        fn problems(BAD, |r, _: EmptyRequest, _| Ok(r.problems()));
        fn diagnostics(BAD, |r, _: EmptyRequest, c| {
            match &service.team {
                Some(team) => service.with_unknown_fields(team.diagnostics(r.corpus().host())?),
                None => service.with_unknown_fields(
                    service.searching(c, |s, stop| s.diagnostics(r.corpus(), stop))?,
                ),
            }
        });
    }
}

impl SessionReferenceResolver for ResolverService {
    fn list_candidates(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError> {
        let service = &*self.0;
        let limits = &service.limits;
        let caller = call.calling_session().into_option().map(|s| s.to_string());
        service.serve(
            "list_candidates",
            call,
            request,
            ErrorCode::SessionReferenceInvalidReference,
            |r, mut q: CandidatesRequest, c| {
                acting_session(caller.as_deref(), &mut q.agent_session_id)?;
                reference::list_candidates(r, &IndexTitles(service), &q, limits, &|| {
                    c.is_cancelled()
                })
            },
        )
    }

    fn prepare(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError> {
        let limits = &self.0.limits;
        let caller = call.calling_session().into_option().map(|s| s.to_string());
        self.0.serve(
            "prepare",
            call,
            request,
            ErrorCode::SessionReferenceInvalidReference,
            |r, mut q: PrepareRequest, c| {
                acting_session(caller.as_deref(), &mut q.agent_session_id)?;
                reference::prepare(r, &q, limits, &|| c.is_cancelled(), &reference::new_uuid)
            },
        )
    }
}
