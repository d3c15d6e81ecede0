//! The stable-ABI contracts the host and a plugin meet through at run time (built with `abi_stable`).
//!
//! A plugin is a cdylib exporting a [`root::PluginRoot`] module and a [`version::ContractStamp`]. The host
//! reads the stamp (contract major.minor, fold version), runs abi_stable's layout check, and calls the
//! constructor with a JSON config and a [`host::HostContext`]; it gets back a [`root::PluginInstance`]
//! whose two services, [`query::SessionQuery`] and [`reference::SessionReferenceResolver`], are
//! `Send + Sync` trait objects.
//!
//! How it evolves ([`version`] has the policy): modules and vtables are abi_stable prefix types that a
//! later minor extends at the end; records (requests, pages, live sessions) cross as JSON documents in
//! the spec's shapes ([`types`]) that a later minor extends with defaulted fields; error codes are open
//! integers that carry their names ([`error`]); every method takes a per-call context ([`call`]).
//!
//! Rules every implementation keeps:
//! - only types from this module or JSON text cross the boundary;
//! - no panic crosses it: abi_stable's vtable shims abort the process on an unwinding panic, so both
//!   sides contain panics inside their own method bodies (the plugin returns
//!   [`error::ErrorCode::PluginPanicked`]);
//! - errors carry a code and a human-readable message.

pub mod call;
pub mod client;
pub mod config;
pub mod error;
pub mod frozen;
pub mod host;
pub mod query;
pub mod reference;
#[allow(non_camel_case_types)]
pub mod root;
pub mod types;
pub mod version;
pub mod wire;

pub use call::{Call, CallContext, CallRef};
pub use client::{QueryClient, ResolverClient};
pub use error::{ErrorCode, PluginError};
pub use host::{HostContext, HostContextBox, LogLevel};
pub use query::{SessionQuery, SessionQueryBox};
pub use reference::{SessionReferenceResolver, SessionReferenceResolverBox};
pub use root::{PluginInstance, PluginInstanceBox, PluginRoot, PluginRoot_Ref, ROOT_BASE_NAME};
pub use types::*;
pub use version::{ContractStamp, ContractVersion, CONTRACT};
