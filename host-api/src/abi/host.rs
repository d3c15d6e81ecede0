//! What the host lends a plugin: its live sessions, the sessions root, logging and progress.
//!
//! A plugin copy has its own statics and its own std, so anything shared with the host (logs above all)
//! goes through this object, never through globals. Cancellation and deadlines are per call
//! ([`super::call::CallContext`]), not here.
//!
//! Re-entrancy: a plugin calls these methods while it serves a host call, on the host's thread or its
//! own. The host must therefore never hold, while it calls into the plugin, a lock that these methods
//! take (the sample host keeps one lock per live session and never holds the session map's lock across
//! a plugin call or an fsync).

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, ROption, RStr, RString, RVec},
    StableAbi,
};

/// Severity of a message a plugin logs through the host. Open like the error codes: a level this build
/// does not know is logged as `INFO`.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogLevel(pub u8);

#[allow(non_upper_case_globals)]
impl LogLevel {
    pub const Error: LogLevel = LogLevel(0);
    pub const Warn: LogLevel = LogLevel(1);
    pub const Info: LogLevel = LogLevel(2);
    pub const Debug: LogLevel = LogLevel(3);

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "ERROR",
            Self::Warn => "WARN",
            Self::Debug => "DEBUG",
            _ => "INFO",
        }
    }
}

impl std::fmt::Display for LogLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The host side of the boundary. Implemented by the host, called by the plugin from any thread.
#[sabi_trait]
pub trait HostContext: Send + Sync + 'static {
    /// Every live session, in no particular order: a JSON array of
    /// [`LiveSession`](super::types::LiveSession) records.
    fn live_sessions(&self) -> RString;

    /// One live session as a JSON [`LiveSession`](super::types::LiveSession); `None` when `id` is not
    /// live.
    fn live_session(&self, id: RStr<'_>) -> ROption<RString>;

    /// The live session's events with seq ≥ `from_seq`, as JSON envelopes in seq order; `None` when `id`
    /// is not live or no longer at `epoch` (it was recreated or rewritten: list it again). Lets a plugin
    /// fetch only what is new since it last looked, and never splice two incarnations of a session.
    fn live_events(&self, id: RStr<'_>, epoch: u64, from_seq: u64) -> ROption<RVec<RString>>;

    /// The DSH-layout sessions root the host persists to, if any.
    fn sessions_root(&self) -> ROption<RString>;

    /// Log a message in the host's log.
    #[sabi(last_prefix_field)]
    fn log(&self, level: LogLevel, message: RStr<'_>);

    /// Contract 2.1: progress of long work (`task` names it, e.g. "indexing sessions"), so the host can
    /// draw a progress bar. `total` 0 means unknown; `done == total` ends the task.
    fn report_progress(&self, task: RStr<'_>, done: u64, total: u64);
}

/// The owned, type-erased host context a plugin keeps.
pub type HostContextBox = HostContext_TO<RBox<()>>;

/// A host context with no live sessions: only a sessions root (if any), logs dropped. For tools,
/// benchmarks and tests that read sessions from disk alone.
#[derive(Debug, Clone, Default)]
pub struct DiskOnlyHost {
    pub sessions_root: Option<String>,
}

impl DiskOnlyHost {
    /// As a type-erased context to hand a plugin instance.
    pub fn boxed(self) -> HostContextBox {
        HostContext_TO::from_value(self, abi_stable::sabi_trait::TD_Opaque)
    }
}

impl HostContext for DiskOnlyHost {
    fn live_sessions(&self) -> RString {
        "[]".into()
    }

    fn live_session(&self, _id: RStr<'_>) -> ROption<RString> {
        ROption::RNone
    }

    fn live_events(&self, _id: RStr<'_>, _epoch: u64, _from_seq: u64) -> ROption<RVec<RString>> {
        ROption::RNone
    }

    fn sessions_root(&self) -> ROption<RString> {
        self.sessions_root.as_deref().map(RString::from).into()
    }

    fn log(&self, _level: LogLevel, _message: RStr<'_>) {}

    fn report_progress(&self, _task: RStr<'_>, _done: u64, _total: u64) {}
}
