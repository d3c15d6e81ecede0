//! `ctx.sessionReferenceResolver`: cross-session citation candidates and frozen snapshots (spec §6).

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, ROption, RResult, RStr, RVec},
};

use super::error::PluginError;
use super::types::{Candidate, PrepareRequest, Prepared};
use super::CancelToken;

/// The citation service. Implemented by the plugin; synchronous and thread-safe.
#[sabi_trait]
pub trait SessionReferenceResolver: Send + Sync + 'static {
    /// Sessions the agent session may cite, best first, filtered by `query` over id, cwd and title.
    fn list_candidates(
        &self,
        agent_session_id: RStr<'_>,
        query: RStr<'_>,
        limit: ROption<u64>,
        cancel: CancelToken,
    ) -> RResult<RVec<Candidate>, PluginError>;

    /// Snapshot the referenced sessions into one warned, escaped, budgeted context message.
    #[sabi(last_prefix_field)]
    fn prepare(
        &self,
        request: PrepareRequest,
        cancel: CancelToken,
    ) -> RResult<Prepared, PluginError>;
}

/// The owned, type-erased service the host holds.
pub type SessionReferenceResolverBox = SessionReferenceResolver_TO<RBox<()>>;
