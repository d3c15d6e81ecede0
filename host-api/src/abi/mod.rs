//! The stable-ABI contracts the host and a plugin meet through at run time (built with `abi_stable`).
//!
//! A plugin is a cdylib exporting a [`root::PluginRoot`] module. The host checks it (abi_stable's layout
//! check, then [`root::ABI_VERSION`] and [`crate::FOLD_VERSION`]) and calls its constructor with a JSON
//! config and a [`host::HostContext`]; it gets back the two services, [`query::SessionQuery`] and
//! [`reference::SessionReferenceResolver`], as `Send + Sync` trait objects.
//!
//! Rules every implementation keeps:
//! - only types from this module or JSON text cross the boundary (event payloads are JSON text);
//! - no panic crosses it: abi_stable's vtable shims abort the process on an unwinding panic, so a
//!   plugin must contain panics inside its own method bodies and return [`error::ErrorCode::PluginPanicked`];
//! - errors are the closed set [`error::ErrorCode`], each with a human-readable message.

pub mod error;
pub mod host;
pub mod query;
pub mod reference;
#[allow(non_camel_case_types)]
pub mod root;
pub mod types;
pub mod wire;

pub use error::{ErrorCode, PluginError};
pub use host::{HostContext, HostContextBox, LiveSession, LogLevel};
pub use query::{SessionQuery, SessionQueryBox};
pub use reference::{SessionReferenceResolver, SessionReferenceResolverBox};
pub use root::{PluginInstance, PluginRoot, PluginRoot_Ref, ABI_VERSION, ROOT_BASE_NAME};
pub use types::*;

/// A cancellation token passed with every long call. The plugin asks [`HostContext::is_cancelled`] with
/// it; `0` means the call cannot be cancelled.
pub type CancelToken = u64;
