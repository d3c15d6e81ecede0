//! `plugin-core`: the session-search plugin's implementation, independent of how it is packaged.
//!
//! The `plugin` cdylib exports it with [`export_plugin!`]; test fixture libraries export it with other
//! versions or injected faults. Code map, in data-flow order:
//! - [`export`] builds an instance behind the root module's constructor; [`config`] validates its JSON;
//! - [`service`] implements the `SessionQuery` / `SessionReferenceResolver` contracts, each method inside
//!   [`contain`] so no panic reaches the host;
//! - [`corpus`] merges the host's live sessions with the logs under the sessions root (live wins);
//! - [`reads`] answers the exact reads of spec §5 over that corpus, labelling with `dsh_codec::surface`;
//! - [`search`] answers `search_sessions` / `search_events` over [`index`], the derived SQLite file it
//!   keeps fresh.
//!
//! Invariants: events are labelled only by `dsh_codec::surface`; this crate never writes a session log;
//! anything shared with the host (logs, cancellation) goes through `HostContext`, never globals, because
//! every loaded copy of the plugin has its own statics.

pub mod backend;
pub mod cancel;
pub mod config;
pub mod contain;
pub mod corpus;
pub mod export;
pub mod index;
pub mod reads;
pub mod reference;
pub mod search;
pub mod service;
pub mod sources;

/// What [`export_plugin!`] expands to refers to; not for other use.
#[doc(hidden)]
pub mod __reexport {
    pub use dsh_codec::FOLD_VERSION;
    pub use host_api::abi::{
        ContractStamp, HostContextBox, PluginError, PluginInstanceBox, PluginRoot, PluginRoot_Ref,
    };
}
