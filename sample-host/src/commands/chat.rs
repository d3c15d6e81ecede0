//! `chat`, `cite` and `candidates`: the host as a chat tool over the loaded plugin. `chat` keeps
//! watching the plugin folder while it runs, so a rebuilt plugin answers the next call in the same
//! session.

use std::io::Write;

use super::{shown, start_host, start_long_lived_host, CommandError, Options};
use crate::chat::commands::{self as chat_commands, CiteOptions};
use crate::chat::plugin::PluginServices;
use crate::chat::repl::{self, ChatOptions};
use crate::chat::ChatEnv;
use crate::logging::LossyWriter;

/// `chat [--session ID]`.
pub fn chat(
    options: &Options,
    session: Option<String>,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let host = start_long_lived_host(options, options.sessions_dir())?;
    let _watcher =
        crate::watch::watch(&host, super::watch::DEBOUNCE).map_err(|e| CommandError::Io {
            what: format!("watching the plugin folder {}", shown(host.plugins_dir())),
            source: std::io::Error::other(e.to_string()),
        })?;
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services);
    let code = repl::run(env, &ChatOptions { session }, out);
    host.shutdown();
    Ok(code)
}

/// `cite --into ID --message TEXT`.
pub fn cite(
    options: &Options,
    into: String,
    message: String,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let host = start_host(options, options.sessions_dir())?;
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services);
    let cite = CiteOptions {
        into,
        message,
        json: options.json,
    };
    Ok(chat_commands::cite(
        env,
        &cite,
        out,
        &mut LossyWriter(std::io::stderr()),
    ))
}

/// `candidates [QUERY] [--session ID]`.
pub fn candidates(
    options: &Options,
    query: String,
    session: Option<String>,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let host = start_host(options, options.sessions_dir())?;
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services);
    Ok(chat_commands::candidates(
        env,
        session.as_deref().unwrap_or(""),
        &query,
        options.json,
        out,
        &mut LossyWriter(std::io::stderr()),
    ))
}
