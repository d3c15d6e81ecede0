//! `chat`, `cite` and `candidates`: the host as a chat tool over the loaded plugin. `chat` keeps
//! watching the plugin folder while it runs, so a rebuilt plugin answers the next call in the same
//! session.

use std::io::Write;

use super::{shown, start_host, start_reloading_host, CommandError, Options};
use crate::chat::commands::{self as chat_commands, CiteOptions};
use crate::chat::model::Model;
use crate::chat::plugin::{PluginServices, Running};
use crate::chat::repl::{self, ChatOptions};
use crate::chat::ChatEnv;
use crate::cli::ModelArgs;
use crate::logging::LossyWriter;
use crate::openai::{ModelConfig, OpenAiClient};

/// The model `--model` names, or the stand-in. Checked before anything starts, so a bad URL or a missing
/// key variable changes nothing.
pub fn model_from(args: &ModelArgs) -> Result<Model, CommandError> {
    let Some(url) = &args.model else {
        return Ok(Model::StandIn);
    };
    let config = ModelConfig {
        model_name: args.model_name.clone(),
        api_key_env: args.api_key_env.clone(),
        ..ModelConfig::new(url.clone())
    };
    Ok(Model::OpenAi(OpenAiClient::new(&config)?))
}

/// `chat [--session ID]`.
pub fn chat(
    options: &Options,
    session: Option<String>,
    model: &ModelArgs,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let model = model_from(model)?;
    let signals = crate::signals::listen()
        .map_err(CommandError::io("installing the Ctrl-C/SIGTERM handler"))?;
    let host = start_reloading_host(options, options.sessions_dir())?;
    let session = match session {
        Some(typed) => Some(existing_or_new(&host, typed)?),
        None => None,
    };
    let _watcher =
        crate::watch::watch(&host, super::watch::DEBOUNCE).map_err(|e| CommandError::Io {
            what: format!("watching the plugin folder {}", shown(host.plugins_dir())),
            source: std::io::Error::other(e.to_string()),
        })?;
    let (announce_tx, announcements) = std::sync::mpsc::channel::<String>();
    let announce_tx = std::sync::Mutex::new(announce_tx);
    host.set_announcer(Some(Box::new(move |line: &str| {
        let _ = announce_tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(line.to_string());
    })));
    let running = Running::default();
    handle_signals(signals, &host, running.clone());
    let services = PluginServices::with_running(&host, running);
    let env = ChatEnv::new(host.shared(), &services).with_model(&model);
    let chat = ChatOptions {
        session,
        json: options.json,
    };
    let code = repl::run_announcing(env, &chat, Some(announcements), out);
    host.set_announcer(None);
    host.shutdown();
    host.remove_shadow_dir();
    Ok(code)
}

/// Ctrl-C while a step runs cancels that step (the chat goes on); at the prompt the line editor reads
/// Ctrl-C itself. SIGTERM or SIGHUP ends the chat at once, but not before the shadow folder is removed
/// and the terminal is put back as it was.
fn handle_signals(
    signals: std::sync::mpsc::Receiver<crate::signals::Signal>,
    host: &std::sync::Arc<crate::PluginHost>,
    running: Running,
) {
    let terminal = SavedTerminal::now();
    let host = std::sync::Arc::downgrade(host);
    std::thread::spawn(move || {
        for signal in signals {
            match signal {
                crate::signals::Signal::Interrupt => {
                    running.cancel();
                }
                crate::signals::Signal::Terminate => {
                    running.cancel();
                    if let Some(host) = host.upgrade() {
                        host.remove_shadow_dir();
                    }
                    terminal.restore();
                    std::process::exit(143);
                }
            }
        }
    });
}

/// The terminal's settings when the chat started, to restore if a signal ends it inside the line
/// editor (which keeps the terminal in raw mode while it reads).
struct SavedTerminal(Option<libc::termios>);

impl SavedTerminal {
    fn now() -> Self {
        // SAFETY: tcgetattr writes a termios for a valid descriptor; on failure we keep nothing.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            Self((libc::tcgetattr(libc::STDIN_FILENO, &mut t) == 0).then_some(t))
        }
    }

    fn restore(&self) {
        if let Some(t) = &self.0 {
            // SAFETY: restoring settings read from the same descriptor.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, t);
            }
        }
    }
}

/// `chat --session ID`: an existing session's whole id, or a unique prefix of one; an id no session
/// has (nor starts with) names a new session; an ambiguous prefix is an error.
fn existing_or_new(host: &crate::PluginHost, typed: String) -> Result<String, CommandError> {
    use super::ids::{resolve, Resolved};
    let Ok(list) =
        host.query(|q| q.list_sessions(&super::calls::call(), &host_api::abi::EmptyRequest {}))
    else {
        return Ok(typed);
    };
    match resolve(&typed, list.iter().map(|r| r.header.id.as_str())) {
        Resolved::One(id) => Ok(id),
        Resolved::Missing(_) => Ok(typed),
        Resolved::Ambiguous(ids) => Err(CommandError::Ambiguous(format!(
            "session id prefix {} is ambiguous: {} sessions start with it ({}); type more of the id",
            crate::render::quote_id(&typed),
            ids.len(),
            ids.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// A session id as typed: the whole id, or a unique prefix of one (an ambiguous prefix is an error).
fn resolve_prefix(host: &crate::PluginHost, typed: String) -> Result<String, CommandError> {
    super::ids::with_session(host, &typed, |id| {
        host.query(|q| {
            q.read_surface(
                &super::calls::call(),
                &host_api::abi::SessionRequest {
                    session_id: id.to_string(),
                },
            )
        })
        .map(|_| ())
    })
    .map(|(id, ())| id)
}

/// `cite --into ID --message TEXT`.
pub fn cite(
    options: &Options,
    into: String,
    message: String,
    model: &ModelArgs,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let model = model_from(model)?;
    let host = start_host(options, options.sessions_dir())?;
    let into = resolve_prefix(&host, into)?;
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services).with_model(&model);
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
    page: chat_commands::CandidatePage,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let host = start_host(options, options.sessions_dir())?;
    let session = session.map(|s| resolve_prefix(&host, s)).transpose()?;
    let services = PluginServices::new(&host);
    let env = ChatEnv::new(host.shared(), &services);
    Ok(chat_commands::candidates_page(
        env,
        session.as_deref().unwrap_or(""),
        &query,
        page,
        options.json,
        out,
        &mut LossyWriter(std::io::stderr()),
    ))
}
