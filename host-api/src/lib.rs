//! `host-api`: everything the agent host and the session-search plugin must agree on.
//!
//! Both sides link this crate; they never link each other. It holds:
//! - [`log`]: the DSH session log v0 codec (raw and zstd, packed chunk rows, torn tails, legacy shapes),
//!   discovery in a sessions root, and the append-only writer;
//! - [`surface`]: the one surface fold that decides what the model sees and how every event is labelled;
//! - [`text`]: the searchable text of an event;
//! - [`abi`]: the stable-ABI contracts the host and the plugin meet through at run time;
//! - [`json`]: JSON as DSH's JavaScript runtime reads it.
//!
//! Invariant: only [`surface`] decides what is current, shadowed or log-only. Nothing here knows SQLite,
//! the plugin's index, or how a host stores its live sessions.

pub mod abi;
pub mod json;
pub mod log;
pub mod mention;
pub mod source;
pub mod surface;
pub mod text;

/// Version of the log format and surface fold this build implements. A plugin built against another fold
/// version would label events differently from the host, so the host refuses it.
pub const FOLD_VERSION: u32 = 1;
