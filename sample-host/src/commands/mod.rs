//! Running a parsed command line: the options every command shares, starting the plugin host, and the
//! typed error every command ends with (printed as text or as one JSON object by `main`).

pub mod calls;
pub mod chat;
pub mod demo;
pub mod errors;
pub mod ids;
pub mod plugins;
pub mod read;
pub mod search;
pub mod watch;

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_api::abi::{ErrorCode, PluginError};
use serde_json::{json, Value};

use crate::cli::{Cli, Command, USAGE_EXIT};
use crate::render::{bound_id_in, quote_id};
use crate::{paths, HostOptions, PluginHost, ShadowPlace, Shared};

/// The global options, as every command sees them.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub plugins: Option<PathBuf>,
    pub sessions: Option<PathBuf>,
    pub index: Option<PathBuf>,
    pub collection: Option<String>,
    pub claude_projects: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub no_default_sources: bool,
    pub verbose: bool,
    pub json: bool,
    pub color: crate::present::ColorChoice,
}

impl Options {
    pub fn from_cli(cli: &Cli) -> Self {
        Self {
            plugins: cli.plugins.clone(),
            sessions: cli.sessions.clone(),
            index: cli.index.clone(),
            collection: cli.collection.clone(),
            claude_projects: cli.claude_projects.clone(),
            codex_home: cli.codex_home.clone(),
            no_default_sources: cli.no_default_sources,
            verbose: cli.verbose,
            json: cli.json,
            color: cli.color,
        }
    }

    /// The other harnesses' folders the plugin reads: each flag, else (unless `--no-default-sources`)
    /// the harness's own folder under `$HOME` when it exists.
    pub fn source_dirs(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        let default = |explicit: &Option<PathBuf>, under_home: Option<PathBuf>| {
            explicit.clone().or_else(|| {
                (!self.no_default_sources)
                    .then_some(under_home)
                    .flatten()
                    .filter(|d| d.is_dir())
            })
        };
        (
            default(&self.claude_projects, paths::default_claude_projects()),
            default(&self.codex_home, paths::default_codex_home()),
        )
    }

    /// The plugin's JSON config for these options.
    pub fn plugin_config(&self, long_lived: bool) -> String {
        let index = self.index.clone().unwrap_or_else(paths::default_index_path);
        // Longer than the spec's default, so the host can fit the snippet to the terminal around its match.
        let path = host_api::abi::config::path_value;
        let mut config = json!({"snippetChars": SNIPPET_CHARS, "longLived": long_lived});
        // A team's server is named by URL, which the plugin tells from a path itself.
        match index.to_str().filter(|i| is_server_url(i)) {
            Some(url) => {
                config["index"] = url.into();
                if let Some(c) = &self.collection {
                    config["collection"] = c.as_str().into();
                }
            }
            None => config["indexPath"] = path(&index),
        }
        // `HostContext` lends the root as a string; a root whose name is not UTF-8 crosses as bytes here.
        let sessions = self.sessions_dir();
        if sessions.to_str().is_none() {
            config["sessionsRoot"] = path(&sessions);
        }
        let (claude, codex) = self.source_dirs();
        if let Some(dir) = claude {
            config["claudeProjects"] = path(&dir);
        }
        if let Some(dir) = codex {
            config["codexHome"] = path(&dir);
        }
        config.to_string()
    }

    /// How plain output looks on this stdout.
    pub fn style(&self) -> crate::present::Style {
        crate::present::Style::detect(self.color)
    }

    /// `--sessions`, or the default sessions root.
    pub fn sessions_dir(&self) -> PathBuf {
        self.sessions
            .clone()
            .unwrap_or_else(paths::default_sessions_dir)
    }
}

/// Whether `--index` names a PostgreSQL server (the plugin decides the same way).
fn is_server_url(index: &str) -> bool {
    index.starts_with("postgresql://") || index.starts_with("postgres://")
}

/// Why a command failed. Each has a stable code for `--json` and an exit status.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command line itself is wrong (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// The plugin (or the host on its behalf) answered with an error.
    #[error("{0}")]
    Plugin(PluginError),
    /// Reading or writing something the command needs.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Building the demo corpus or the demo's live session.
    #[error("{0}")]
    Demo(String),
    /// A session id prefix that more than one session starts with.
    #[error("{0}")]
    Ambiguous(String),
    /// The sessions folder given with `--sessions` does not exist.
    #[error("{0}")]
    NoSessionsFolder(String),
    /// `--model` and its options cannot be used (a bad URL, a missing API key variable).
    #[error("{0}")]
    Model(#[from] crate::openai::ModelError),
}

impl CommandError {
    /// The code `--json` prints.
    pub fn code(&self) -> String {
        match self {
            Self::Usage(_) => "USAGE".into(),
            // A code newer than this build still prints as the name the plugin sent.
            Self::Plugin(e) => e.code_name(),
            Self::Io { .. } => "IO".into(),
            Self::Demo(_) => "DEMO".into(),
            Self::Ambiguous(_) => "SESSION_ID_AMBIGUOUS".into(),
            Self::NoSessionsFolder(_) => "SESSIONS_FOLDER_NOT_FOUND".into(),
            Self::Model(e) => e.code().into(),
        }
    }

    /// What to do about it, when the cause says: one line for a person, the same in `--json`.
    pub fn fix(&self) -> Option<String> {
        match self {
            Self::Plugin(e) => errors::fix(e),
            Self::NoSessionsFolder(_) => Some(
                "pass --sessions DIR with an existing sessions folder (DSH layout), or leave it out for the default"
                    .into(),
            ),
            Self::Ambiguous(_) => Some("type more of the id".into()),
            _ => None,
        }
    }

    /// The text printed without `--json`: `CODE: message`, then the fix on its own line.
    pub fn plain(&self) -> String {
        let head = match self {
            Self::Plugin(e) => e.to_string(),
            Self::Usage(m) => m.clone(),
            other => format!("{}: {other}", other.code()),
        };
        match self.fix() {
            Some(fix) => format!(
                "{head}
  fix: {fix}"
            ),
            None => head,
        }
    }

    /// The process exit status for this error.
    pub fn exit_status(&self) -> i32 {
        match self {
            Self::Usage(_) => USAGE_EXIT,
            _ => 1,
        }
    }

    /// `{"error":{"code":…,"message":…}}`.
    pub fn to_json(&self) -> Value {
        let message = match self {
            Self::Plugin(e) => e.message.to_string(),
            other => other.to_string(),
        };
        let mut error = json!({"code": self.code(), "message": message});
        if let Some(fix) = self.fix() {
            error["fix"] = fix.into();
        }
        json!({ "error": error })
    }

    /// Whether this is stdout closed under us (`sample-host … | head`): not a failure of ours.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

/// Writing to stdout; a closed stdout surfaces as a broken-pipe [`CommandError::Io`].
pub fn out_err(source: std::io::Error) -> CommandError {
    CommandError::Io {
        what: "writing to stdout".into(),
        source,
    }
}

/// A session id given on the command line, as the plugin takes it. Ids are UTF-8 text, so one that is
/// not cannot name any session.
pub fn session_id(id: &OsStr) -> Result<String, CommandError> {
    id.to_str().map(str::to_string).ok_or_else(|| {
        CommandError::Plugin(PluginError::new(
            ErrorCode::SessionQuerySessionNotFound,
            format!(
                "session {} not found: session ids are UTF-8 text and this one is not",
                quote_id(&id.to_string_lossy())
            ),
        ))
    })
}

/// A plugin error about `id`, with the id cut short if the message quotes a huge one.
pub fn about_id(e: PluginError, id: &str) -> CommandError {
    let message = bound_id_in(e.message.as_str(), id);
    CommandError::Plugin(PluginError::new(e.code, message))
}

/// Runs a parsed command line; `Ok` carries the exit status (a command may succeed at printing and
/// still report a non-zero status, e.g. `plugins` with nothing serving).
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<i32, CommandError> {
    let options = Options::from_cli(&cli);
    let reads_sessions = !matches!(
        cli.command,
        Command::Inspect { .. }
            | Command::Demo { .. }
            | Command::Plugins
            | Command::Watch
            | Command::Chat { .. }
    );
    if reads_sessions {
        errors::check_sessions_dir(options.sessions.as_deref(), &paths::default_sessions_dir())?;
    }
    // One-shot commands: Ctrl-C cancels the call in flight, `--timeout` bounds the command. The
    // long-lived ones (chat, watch, mcp) handle signals themselves.
    let one_shot = reads_sessions && !matches!(cli.command, Command::Mcp { .. });
    calls::install(cli.timeout, one_shot);
    match cli.command {
        Command::Inspect { path } => {
            let stderr = std::io::stderr();
            crate::inspect::run(
                &path,
                options.json,
                out,
                &mut crate::logging::LossyWriter(stderr),
            )
            .map_err(out_err)
        }
        Command::Demo { model } => demo::run(&options, &model, out),
        Command::Plugins => {
            let host = start_host(&options, options.sessions_dir())?;
            plugins::print_status(&host, options.json, out)?;
            Ok(if host.serving().is_some() { 0 } else { 1 })
        }
        Command::Watch => watch::run(&options),
        Command::Sessions { problems } => {
            let host = start_host(&options, options.sessions_dir())?;
            read::run(&host, &read::Read::Sessions { problems }, &options, out)
        }
        Command::Events { id } => {
            let id = session_id(&id)?;
            let host = start_host(&options, options.sessions_dir())?;
            read::run(&host, &read::Read::Events { id }, &options, out)
        }
        Command::Surface { id } => {
            let id = session_id(&id)?;
            let host = start_host(&options, options.sessions_dir())?;
            read::run(&host, &read::Read::Surface { id }, &options, out)
        }
        Command::Event {
            id,
            seq,
            before,
            after,
        } => {
            let id = session_id(&id)?;
            let host = start_host(&options, options.sessions_dir())?;
            let read = read::Read::Event {
                id,
                seq,
                before,
                after,
            };
            read::run(&host, &read, &options, out)
        }
        Command::Search(args) => {
            let host = start_host(&options, options.sessions_dir())?;
            search::run(&host, &args, &options, out)
        }
        Command::Chat { session, model } => {
            let session = session.as_deref().map(session_id).transpose()?;
            chat::chat(&options, session, &model, out)
        }
        Command::Cite {
            into,
            message,
            model,
        } => {
            let into = session_id(&into)?;
            let message = message
                .into_string()
                .map_err(|_| CommandError::Usage("--message must be UTF-8 text".into()))?;
            chat::cite(&options, into, message, &model, out)
        }
        Command::Candidates {
            query,
            session,
            limit,
            page,
        } => {
            let session = session.as_deref().map(session_id).transpose()?;
            let page = crate::chat::commands::CandidatePage {
                page,
                per_page: limit,
            };
            chat::candidates(&options, query.unwrap_or_default(), session, page, out)
        }
        Command::Mcp { session } => {
            let session = session.as_deref().map(session_id).transpose()?;
            crate::mcp::run(&options, session)
        }
        Command::Diagnostics => {
            let host = start_host(&options, options.sessions_dir())?;
            search::diagnostics(&host, &options, out)
        }
        Command::Trace { id, seq } => {
            let id = session_id(&id)?;
            let host = start_host(&options, options.sessions_dir())?;
            read::run(&host, &read::Read::Trace { id, seq }, &options, out)
        }
    }
}

/// Snippet length the host asks the plugin for (code points).
const SNIPPET_CHARS: u64 = 240;

/// Loads the plugin folder for a one-shot command: its shadows live in memory, so it makes no folder
/// and can leave none behind; the plugin is told the host does not live long (`longLived: false`), so it
/// watches nothing and compares the root with its index by `stat`. A host with nothing serving is still returned (its calls answer
/// `PLUGIN_UNAVAILABLE`); why nothing serves goes to the log.
pub fn start_host(options: &Options, sessions: PathBuf) -> Result<Arc<PluginHost>, CommandError> {
    start_host_in(options, sessions, ShadowPlace::Memory, false)
}

/// Loads the plugin folder for a host that keeps running and reloads (`watch`, `chat`): its shadows
/// are files in a folder of its own (reflinks where the file system has them), which it removes on
/// every way out, and the start sweeps the folders of hosts that died without removing theirs; the
/// plugin watches the sessions root (`longLived: true`).
pub fn start_reloading_host(
    options: &Options,
    sessions: PathBuf,
) -> Result<Arc<PluginHost>, CommandError> {
    start_host_in(options, sessions, ShadowPlace::Folder(None), true)
}

pub(super) fn start_host_in(
    options: &Options,
    sessions: PathBuf,
    shadows: ShadowPlace,
    long_lived: bool,
) -> Result<Arc<PluginHost>, CommandError> {
    let (plugins_dir, only_file) = match &options.plugins {
        Some(dir) => (dir.clone(), None),
        None => paths::default_plugins_dir(),
    };
    let config = options.plugin_config(long_lived);
    let shared = Shared::new(Some(sessions), true);
    let mut host_options = HostOptions::new(plugins_dir, config);
    host_options.only_file = only_file;
    host_options.shadows = shadows;
    let host = PluginHost::start(host_options, shared).map_err(CommandError::io(
        "starting the plugin host (making its shadow folder)",
    ))?;
    // Each refusal was logged as it happened; this says what it adds up to. A plugin that failed to
    // start has its own cause, which every call reports.
    if host.serving().is_none() && !host.failed_to_start() {
        tracing::warn!(
            "no plugin loaded from {} — build it with `cargo build --release` (or pass --plugins DIR)",
            host.plugins_dir().display()
        );
    }
    Ok(host)
}

/// Writes `text` and a newline to `out`.
pub(crate) fn print(out: &mut dyn Write, text: impl AsRef<str>) -> Result<(), CommandError> {
    writeln!(out, "{}", text.as_ref()).map_err(out_err)
}

/// A path for messages.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_non_utf8_id_is_a_missing_session_not_a_panic() {
        let err = session_id(OsStr::from_bytes(b"ab\xffcd")).unwrap_err();
        assert_eq!(err.code(), "SESSION_QUERY_SESSION_NOT_FOUND");
        assert_eq!(err.exit_status(), 1);
        assert!(err.to_string().contains("ab\u{fffd}cd"), "{err}");
    }

    #[test]
    fn errors_render_as_one_json_object_with_their_code() {
        let usage = CommandError::Usage("bad".into());
        assert_eq!(usage.exit_status(), 2);
        assert_eq!(
            usage.to_json(),
            json!({"error": {"code": "USAGE", "message": "bad"}})
        );
        let plugin = CommandError::Plugin(PluginError::new(ErrorCode::PluginUnavailable, "none"));
        assert_eq!(plugin.to_json()["error"]["code"], "PLUGIN_UNAVAILABLE");
        assert_eq!(plugin.to_json()["error"]["message"], "none");
    }

    #[test]
    fn plugin_messages_about_a_huge_id_are_cut() {
        let id = "x".repeat(100_000);
        let e = PluginError::new(
            ErrorCode::SessionQuerySessionNotFound,
            format!("session {id} not found"),
        );
        let cut = about_id(e, &id);
        assert!(cut.to_string().len() < 300, "{}", cut.to_string().len());
        assert_eq!(cut.code(), "SESSION_QUERY_SESSION_NOT_FOUND");
    }

    #[test]
    fn a_closed_stdout_is_recognised() {
        let e = out_err(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(e.is_broken_pipe());
        assert!(!CommandError::Usage("x".into()).is_broken_pipe());
    }
}
