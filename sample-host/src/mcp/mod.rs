//! `sample-host mcp`: the sessions served to an agent over the Model Context Protocol on stdio.
//!
//! A thin adapter: [`tools`] makes the same plugin calls as the command line and answers the same JSON,
//! bounded by a byte budget ([`budget`]) and continued with a cursor ([`cursor`]); [`server`] is the
//! rmcp glue (tool schemas from [`args`], tool errors). The plugin folder is watched as `chat` does,
//! so a rebuilt plugin answers the next call. stdout carries the protocol only: the log goes to stderr.

pub mod args;
pub mod budget;
pub mod cursor;
pub mod server;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use host_api::abi::{ErrorCode, PluginError};

use crate::commands::{shown, start_reloading_host, CommandError, Options};
use crate::render::bound_id_in;

/// A tool's failure, answered as an MCP tool error (`isError: true`) whose text is `CODE: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: String,
    pub message: String,
}

/// Arguments that do not fit the tool's input schema.
pub const INVALID_ARGUMENTS: &str = "HOST_INVALID_ARGUMENTS";

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: code.name(),
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: INVALID_ARGUMENTS.into(),
            message: message.into(),
        }
    }

    /// The plugin's error with the code name it sent (a code newer than this build prints as itself).
    pub fn plugin(e: PluginError) -> Self {
        Self {
            code: e.code_name(),
            message: e.message.to_string(),
        }
    }

    /// A plugin error about `id`, the id cut short if the message quotes a huge one.
    pub fn about(e: PluginError, id: &str) -> Self {
        Self {
            code: e.code_name(),
            message: bound_id_in(e.message.as_str(), id),
        }
    }
}

/// How long in-flight calls may take to finish once the client has gone.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Runs the server until the client closes stdin or a termination signal arrives.
pub fn run(options: &Options, calling_session: Option<String>) -> Result<i32, CommandError> {
    let stop = Arc::new(tokio::sync::Notify::new());
    let signals = crate::signals::listen()
        .map_err(CommandError::io("installing the Ctrl-C/SIGTERM handler"))?;
    let on_signal = stop.clone();
    std::thread::Builder::new()
        .name("mcp-signals".into())
        .spawn(move || {
            // The first signal stops the server cleanly; a second one while it drains ends the process.
            if signals.recv().is_ok() {
                on_signal.notify_one();
            }
            if signals.recv().is_ok() {
                std::process::exit(130);
            }
        })
        .map_err(CommandError::io("starting the signal thread"))?;

    let host = start_reloading_host(options, options.sessions_dir())?;
    let watcher = crate::watch::watch(&host, crate::commands::watch::DEBOUNCE).map_err(|e| {
        CommandError::Io {
            what: format!("watching the plugin folder {}", shown(host.plugins_dir())),
            source: std::io::Error::other(e.to_string()),
        }
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(CommandError::io("starting the MCP server's runtime"))?;
    tracing::info!(
        "serving sessions over MCP on stdio (plugins {}, sessions {}{})",
        shown(host.plugins_dir()),
        shown(&options.sessions_dir()),
        calling_session
            .as_deref()
            .map(|s| format!(", calling session {}", crate::render::quote_id(s)))
            .unwrap_or_default()
    );
    let tools = Arc::new(tools::Tools::new(host.clone(), calling_session));
    let served = runtime.block_on(server::serve(tools, stop));
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    drop(watcher);
    host.shutdown();
    host.remove_shadow_dir();
    match served {
        Ok(()) => {
            tracing::info!("MCP client gone; shut down");
            Ok(0)
        }
        Err(e) => Err(CommandError::Io {
            what: "serving MCP on stdio".into(),
            source: std::io::Error::other(e),
        }),
    }
}
