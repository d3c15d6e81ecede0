//! `sample-host`: a small agent host that shows how to use the session-search plugin.
//!
//! It loads every plugin library in a folder ([`loader`] checks each one; [`manager`] keeps one serving
//! generation and swaps in new builds; [`watch`] notices them), owns live sessions ([`live`], folded with
//! `dsh_codec::surface` and persisted with `dsh_codec::log::write`) and lends them to the plugin through the
//! `HostContext` in [`context`]. The command line is here too ([`cli`] parses it, [`commands`] runs it,
//! [`logging`] is its log through `tracing`); `main.rs` only wires them up. The integration tests drive
//! the library directly.
//!
//! This crate never links the plugin: the two meet only through `host_api::abi` at run time.

pub mod chat;
pub mod cli;
pub mod commands;
pub mod context;
pub mod demo;
pub mod inspect;
pub mod layout_report;
pub mod live;
pub mod loader;
pub mod logging;
pub mod manager;
pub mod mcp;
pub mod openai;
pub mod paths;
pub mod present;
pub mod render;
pub mod replay;
pub mod request;
pub mod shadow;
pub mod signals;
pub mod watch;

pub use context::Shared;
pub use manager::{HostOptions, PluginHost, ShadowPlace, SlotState, SlotStatus};
