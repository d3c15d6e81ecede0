//! `dsh-codec`: the DSH session log v0 and the one fold over it, shared by the agent host and the
//! session-search plugin.
//!
//! - [`log`]: the codec (raw and zstd, packed chunk rows, torn tails, legacy shapes), resumable reading,
//!   discovery in a sessions root, the append validator and the append-only writer;
//! - [`surface`]: the one surface fold that decides what the model sees and how every event is labelled;
//! - [`text`]: the searchable text of an event;
//! - [`json`]: JSON as DSH's JavaScript runtime reads it;
//! - [`source`]: which harness a session id comes from (its namespace).
//!
//! This crate changes often and carries no stable-ABI types: the plugin contract (`host-api`) is a
//! separate crate whose version abi_stable checks, so a codec release never refuses a built plugin.
//! What a host and a plugin must agree on here is the fold, and that is [`FOLD_VERSION`], which the
//! plugin's root module carries and the host compares.
//!
//! Invariant: only [`surface`] decides what is current, shadowed or log-only. Nothing here knows
//! SQLite, the plugin's index, the ABI, or how a host stores its live sessions.

pub mod build;
pub mod json;
pub mod log;
pub mod source;
pub mod surface;
pub mod text;

/// Version of the log format and surface fold this build implements. A plugin built against another fold
/// version would label events differently from the host, so the host refuses it.
pub const FOLD_VERSION: u32 = 1;
