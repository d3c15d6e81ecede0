//! `ctx.sessionReferenceResolver`: cross-session citation candidates and frozen snapshots (spec §6).
//!
//! Like [`super::query`], JSON documents in and out behind a prefix-typed vtable;
//! [`super::client::ResolverClient`] is the typed face.

// `#[sabi_trait]` expands to impls inside a const block, which this lint flags; the code is abi_stable's.
#![allow(non_local_definitions)]

use abi_stable::{
    sabi_trait,
    std_types::{RBox, RResult, RStr, RString},
};

use super::call::CallRef;
use super::error::PluginError;

/// The citation service. Implemented by the plugin; synchronous and thread-safe.
#[sabi_trait]
pub trait SessionReferenceResolver: Send + Sync + 'static {
    /// `listCandidates`: `CandidatesRequest` → `[Candidate]`, best first.
    fn list_candidates(
        &self,
        call: CallRef<'_>,
        request: RStr<'_>,
    ) -> RResult<RString, PluginError>;

    /// `prepare`: `PrepareRequest` → `Prepared` (one warned, escaped, budgeted context message).
    #[sabi(last_prefix_field)]
    fn prepare(&self, call: CallRef<'_>, request: RStr<'_>) -> RResult<RString, PluginError>;
}

/// The owned, type-erased service the host holds.
pub type SessionReferenceResolverBox = SessionReferenceResolver_TO<RBox<()>>;
