//! What the host lends a plugin: its live sessions, the sessions root, logging, and cancellation.
//!
//! A plugin copy has its own statics and its own std, so anything shared with the host (logs above all)
//! goes through this object, never through globals.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, ROption, RStr, RString, RVec},
    StableAbi,
};

use super::types::Header;
use super::CancelToken;

/// Severity of a message a plugin logs through the host.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

/// A live session as the host holds it: header and how many events it has now.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct LiveSession {
    pub header: Header,
    pub event_count: u64,
}

/// The host side of the boundary. Implemented by the host, called by the plugin from any thread.
#[sabi_trait]
pub trait HostContext: Send + Sync + 'static {
    /// Every live session, in no particular order.
    fn live_sessions(&self) -> RVec<LiveSession>;

    /// One live session, `None` when `id` is not live.
    fn live_session(&self, id: RStr<'_>) -> ROption<LiveSession>;

    /// The live session's events with seq ≥ `from_seq` as JSON envelopes in seq order; `None` when `id`
    /// is not live. Lets a plugin fetch only what is new since it last looked.
    fn live_events(&self, id: RStr<'_>, from_seq: u64) -> ROption<RVec<RString>>;

    /// The DSH-layout sessions root the host persists to, if any.
    fn sessions_root(&self) -> ROption<RString>;

    /// Log a message in the host's log.
    fn log(&self, level: LogLevel, message: RStr<'_>);

    /// Whether the host has tripped this call's cancellation token.
    #[sabi(last_prefix_field)]
    fn is_cancelled(&self, token: CancelToken) -> bool;
}

/// The owned, type-erased host context a plugin keeps.
pub type HostContextBox = HostContext_TO<RBox<()>>;
