//! The sample host as a chat tool: a REPL over one live session, a deterministic stand-in model,
//! citations of other sessions, search and compaction.
//!
//! - [`services`]: what the chat needs from the plugin, as JSON in the spec's shapes; [`plugin`]
//!   implements it over the loaded plugin, [`fake`] in-process for tests;
//! - [`mention`]: the one call into mention parsing;
//! - [`session`]: a chat session — the citation append flow and its cache figures;
//! - [`compact`]: `/compact`'s checkpoint; [`model`]: the stand-in model;
//! - [`transcript`]: the human view (a citation as one line);
//! - [`repl`]: the line editor, slash commands and the `chat` entry point;
//! - [`commands`]: the one-shot `cite` and `candidates` entry points.

pub mod commands;
pub mod compact;
pub mod fake;
pub mod labels;
pub mod mention;
pub mod model;
pub mod plugin;
pub mod repl;
pub mod services;
pub mod session;
pub mod transcript;

pub use services::Services;
pub use session::{ChatEnv, ChatError, ChatSession, Turn, TurnSink};
