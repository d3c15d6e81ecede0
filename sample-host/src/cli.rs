//! The command line's grammar: clap derive definitions, and parsing that turns every usage error into a
//! [`UsageError`] the caller can print as text or as one JSON object.
//!
//! Arguments are read as OS strings: a path may be any bytes, and a session id that is not UTF-8 is
//! refused later as a missing session, never by a panic while parsing.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::{Parser, Subcommand};

const DEFAULTS: &str = "\
defaults: --plugins: plugins/ beside the binary, else $XDG_CONFIG_HOME/dsh-session-search/plugins, else the
binary's folder (where cargo builds the plugin); --sessions: $XDG_DATA_HOME/dsh-session-search/sessions;
--index: $XDG_CACHE_HOME/dsh-session-search/index.sqlite; --claude-projects: $HOME/.claude/projects and
--codex-home: $HOME/.codex, each when it exists (--no-default-sources: neither). `--` ends the options (for
an id starting with -).";

/// `sample-host [OPTIONS] COMMAND [ARGS]`.
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "sample-host",
    version,
    about = "A sample agent host over the dsh-session-search plugin",
    after_help = DEFAULTS
)]
pub struct Cli {
    /// Folder of plugin libraries.
    #[arg(long, global = true, value_name = "DIR")]
    pub plugins: Option<PathBuf>,
    /// Sessions root (DSH layout).
    #[arg(long, global = true, value_name = "DIR")]
    pub sessions: Option<PathBuf>,
    /// The plugin's derived index file, or a team's PostgreSQL server as a `postgresql://` URL.
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub index: Option<PathBuf>,
    /// With a `postgresql://` index: the collection this host publishes into (default USER@HOST).
    #[arg(long, global = true, value_name = "NAME")]
    pub collection: Option<String>,
    /// Claude Code's projects folder, read read-only (sessions `claude:<uuid>`).
    #[arg(long, global = true, value_name = "DIR")]
    pub claude_projects: Option<PathBuf>,
    /// Codex's home folder (`sessions/`, `archived_sessions/`), read read-only (sessions `codex:<uuid>`).
    #[arg(long, global = true, value_name = "DIR")]
    pub codex_home: Option<PathBuf>,
    /// Do not read ~/.claude/projects or ~/.codex unless named by --claude-projects / --codex-home.
    #[arg(long, global = true)]
    pub no_default_sources: bool,
    /// Log debug lines to stderr (RUST_LOG, when set, decides instead).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// One JSON value on stdout; errors as {"error":{"code":…,"message":…}}.
    #[arg(long, global = true)]
    pub json: bool,
    /// Give up on the plugin's calls after this many seconds (PLUGIN_DEADLINE_EXCEEDED); what the
    /// index committed by then is kept.
    #[arg(long, global = true, value_name = "SECONDS", value_parser = crate::commands::calls::parse_timeout)]
    pub timeout: Option<std::time::Duration>,
    /// Colour in plain output: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    pub color: crate::present::ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Build a demo corpus, load the plugin and tour what it answers.
    Demo {
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Read and fold one session log file with the codec (no plugin).
    Inspect {
        /// A session log file (`session.jsonl` or `session.jsonl.zstd`).
        path: PathBuf,
    },
    /// Plugin libraries found, which one serves, refused ones and why (as this command loaded them).
    Plugins,
    /// Every session, live and on disk.
    Sessions {
        /// Also list the sessions left out because they could not be read.
        #[arg(long)]
        problems: bool,
    },
    /// Every event of a session with its surface label.
    Events {
        /// The session id (after `--` if it starts with `-`).
        #[arg(value_name = "ID")]
        id: OsString,
    },
    /// The current (model-visible) surface of a session.
    Surface {
        /// The session id (after `--` if it starts with `-`).
        #[arg(value_name = "ID")]
        id: OsString,
    },
    /// One event and a window around it.
    Event {
        /// The session id (after `--` if it starts with `-`).
        #[arg(value_name = "ID")]
        id: OsString,
        /// The event's seq.
        #[arg(value_name = "SEQ", allow_negative_numbers = true)]
        seq: i64,
        /// Events before SEQ to include.
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        before: i64,
        /// Events after SEQ to include.
        #[arg(
            long,
            value_name = "N",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        after: i64,
    },
    /// A session's lineage, or one event's replacement trace.
    Trace {
        /// The session id (after `--` if it starts with `-`).
        #[arg(value_name = "ID")]
        id: OsString,
        /// An event's seq: trace that event instead of the session's lineage.
        #[arg(value_name = "SEQ", allow_negative_numbers = true)]
        seq: Option<i64>,
    },
    /// Full-text search over every session, live and on disk (or inside one with --session).
    Search(SearchArgs),
    /// What the search index holds and every session it left out, with path, code and reason.
    Diagnostics,
    /// Chat over a live session with a deterministic stand-in model, or an OpenAI-compatible server
    /// (--model URL): cite other sessions inline with @[label](dsh-session:…), /search, /cite, /compact,
    /// /help. Hot-reloads the plugin while it runs.
    Chat {
        /// Continue this session (live, or on disk under the sessions root); a new one by default.
        #[arg(long, value_name = "ID")]
        session: Option<OsString>,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Cite sessions into another: prepare the snapshot and append it, then the line.
    Cite {
        /// The session the citation is appended to.
        #[arg(long, value_name = "ID")]
        into: OsString,
        /// The user's line, with at least one @[label](dsh-session:…) mention.
        #[arg(long, value_name = "TEXT")]
        message: OsString,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Sessions that can be cited, with the mention to paste.
    Candidates {
        /// Keep those whose id, cwd or title contains this.
        #[arg(value_name = "QUERY")]
        query: Option<String>,
        /// The citing session (it is never its own candidate; sessions of its cwd come first).
        #[arg(long, value_name = "ID")]
        session: Option<OsString>,
        /// Candidates per page.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u64,
        /// Which page (from 1).
        #[arg(long, value_name = "P", default_value_t = 1)]
        page: u64,
    },
    /// Keep running and hot-reload plugin libraries as they change.
    Watch,
    /// A team's PostgreSQL index (--index postgresql://…): who may read and publish each collection.
    /// The server enforces these rights itself (roles and row-level security); this only grants them.
    #[command(subcommand)]
    Team(TeamCommand),
    /// Serve the sessions to an agent over the Model Context Protocol on stdio (tools search_sessions,
    /// search_events, read_session, list_sessions, cite). Hot-reloads the plugin while it runs.
    Mcp {
        /// The agent's own session: left out of results, and never cited into itself.
        #[arg(long, value_name = "ID")]
        session: Option<OsString>,
    },
}

/// `team …`: administering a team's collections (the global `--index URL` names the server,
/// `--collection NAME` the collection).
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum TeamCommand {
    /// Let roles read (--reader) or publish into (--publisher) the collection named by --collection.
    Grant(TeamRoles),
    /// Take those rights back from roles.
    Revoke(TeamRoles),
    /// Every collection, with the roles that may read and publish it.
    Collections,
}

/// The roles a `team grant` / `team revoke` is about.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[group(required = true, multiple = true)]
pub struct TeamRoles {
    /// A role (PostgreSQL login or group) to read the collection (repeatable).
    #[arg(long, value_name = "ROLE")]
    pub reader: Vec<String>,
    /// A role to publish into the collection, and so read it too (repeatable).
    #[arg(long, value_name = "ROLE")]
    pub publisher: Vec<String>,
}

/// Where `chat`, `cite` and `demo` get replies: the stand-in model unless `--model` names a server.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ModelArgs {
    /// An OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1; the host appends
    /// /chat/completions): replies come from that server instead of the stand-in model.
    #[arg(long, value_name = "URL")]
    pub model: Option<String>,
    /// The model to ask for, where the server has several (default: the first it lists).
    #[arg(long, value_name = "NAME", requires = "model")]
    pub model_name: Option<String>,
    /// The environment variable holding the server's API key (sent as a bearer token; never logged or
    /// written to a session log).
    #[arg(long, value_name = "VAR", requires = "model")]
    pub api_key_env: Option<String>,
}

/// `search QUERY [filters]`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct SearchArgs {
    /// What to look for: a literal phrase (quotes, OR, NEAR, * are just text); CJK runs match inside
    /// sentences.
    #[arg(value_name = "QUERY")]
    pub query: OsString,
    /// Search inside this session only.
    #[arg(long, value_name = "ID")]
    pub session: Option<OsString>,
    /// Only these surface labels (comma-separated: current, shadowed, log-only); all by default.
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    pub surface: Vec<String>,
    /// Only events of these types (comma-separated or repeated), e.g. tool/result,assistant/message.
    #[arg(long = "type", value_name = "TYPES", value_delimiter = ',')]
    pub types: Vec<String>,
    /// Only sessions whose cwd is DIR (comma-separated or repeated; `.` and relative paths are made
    /// absolute).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub cwd: Vec<String>,
    /// Only sessions whose cwd is DIR or a folder below it (comma-separated or repeated).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub under: Vec<String>,
    /// Events containing every word of QUERY in any order (instead of the literal phrase).
    #[arg(long)]
    pub words: bool,
    /// Order of the hits: rank (spec §4.4's ranking, the default) or newest (the last time first).
    #[arg(long, value_name = "ORDER", default_value = "rank")]
    pub sort: SortOrder,
    /// Only events at or after TIME: epoch milliseconds, an ISO date or date-time
    /// (2026-11-01, 2026-11-01T09:30Z), or an age such as 90m, 36h, 7d.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Hits per page.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Continue from a page's next cursor.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Draw the indexing progress bar even under --json.
    #[arg(long)]
    pub progress: bool,
}

/// `search --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortOrder {
    /// Spec §4.4's ranking: most matches, then shorter, then newer.
    #[default]
    Rank,
    /// Newest matching event first.
    Newest,
}

/// What parsing ended with, other than a command to run.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Cli>),
    /// `--help` or `--version`: print this on stdout and exit 0.
    Info(String),
    Usage(UsageError),
}

/// A usage error: clap's rendered message, and whether `--json` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    pub message: String,
    pub json: bool,
}

/// Exit status of a usage error.
pub const USAGE_EXIT: i32 = 2;

/// Parses a full argument list (program name first).
pub fn parse<I, T>(args: I) -> Parsed
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    match Cli::try_parse_from(&args) {
        Ok(cli) => Parsed::Run(Box::new(cli)),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                Parsed::Info(e.render().to_string())
            }
            _ => {
                let json = wants_json(&args);
                let rendered = e.render().to_string();
                let message = if json {
                    bounded_lines(rendered.trim_end())
                } else {
                    rendered.trim_end().to_string()
                };
                Parsed::Usage(UsageError { message, json })
            }
        },
    }
}

/// clap quotes the offending argument whole; for a JSON error each line is cut to a few hundred
/// characters, so a huge argument cannot make a huge error.
fn bounded_lines(text: &str) -> String {
    const MAX: usize = 300;
    text.lines()
        .map(|line| {
            if line.chars().count() <= MAX {
                line.to_string()
            } else {
                let head: String = line.chars().take(MAX).collect();
                format!("{head}… ({} bytes)", line.len())
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `--json` is among the options, looked for by hand because clap gave up before setting it.
/// Anything after `--` is an operand, never the option.
pub fn wants_json(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| a.as_os_str() != OsStr::new("--"))
        .any(|a| a.as_os_str() == OsStr::new("--json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn run(args: &[&str]) -> Cli {
        match parse(std::iter::once("sample-host").chain(args.iter().copied())) {
            Parsed::Run(cli) => *cli,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn usage(args: &[&str]) -> UsageError {
        match parse(std::iter::once("sample-host").chain(args.iter().copied())) {
            Parsed::Usage(u) => u,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn global_options_are_accepted_before_and_after_the_subcommand() {
        let before = run(&["--json", "--sessions", "/s", "events", "x"]);
        let after = run(&["events", "x", "--sessions", "/s", "--json"]);
        assert_eq!(before, after);
        assert!(before.json);
        assert_eq!(before.sessions, Some(PathBuf::from("/s")));
        assert_eq!(
            before.command,
            Command::Events {
                id: OsString::from("x")
            }
        );
    }

    #[test]
    fn double_dash_lets_an_id_start_with_a_dash() {
        let cli = run(&["trace", "--json", "--", "-odd-id", "-3"]);
        assert_eq!(
            cli.command,
            Command::Trace {
                id: OsString::from("-odd-id"),
                seq: Some(-3)
            }
        );
        assert!(cli.json);
    }

    #[test]
    fn event_flags_take_integers() {
        let cli = run(&["event", "s", "3", "--before", "1", "--after", "2"]);
        assert_eq!(
            cli.command,
            Command::Event {
                id: OsString::from("s"),
                seq: 3,
                before: 1,
                after: 2
            }
        );
        let err = usage(&["event", "s", "three", "--json"]);
        assert!(err.json);
        assert!(err.message.contains("three"), "{}", err.message);
    }

    #[test]
    fn non_utf8_arguments_parse_without_panicking() {
        let bad = OsString::from_vec(vec![b'i', 0xff, b'd']);
        let args = vec![
            OsString::from("sample-host"),
            OsString::from("--plugins"),
            OsString::from_vec(vec![b'/', 0xfe]),
            OsString::from("events"),
            bad.clone(),
        ];
        match parse(args) {
            Parsed::Run(cli) => {
                assert_eq!(cli.command, Command::Events { id: bad });
                assert_eq!(
                    cli.plugins,
                    Some(PathBuf::from(OsString::from_vec(vec![b'/', 0xfe])))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn source_folders_are_global_options() {
        let cli = run(&[
            "search",
            "x",
            "--claude-projects",
            "/c",
            "--codex-home",
            "/x",
            "--no-default-sources",
        ]);
        assert_eq!(cli.claude_projects, Some(PathBuf::from("/c")));
        assert_eq!(cli.codex_home, Some(PathBuf::from("/x")));
        assert!(cli.no_default_sources);
        assert!(!run(&["sessions"]).no_default_sources);
    }

    #[test]
    fn usage_errors_know_whether_json_was_asked_for() {
        assert!(usage(&["--json", "nope"]).json);
        assert!(usage(&["sessions", "--bogus", "--json"]).json);
        assert!(!usage(&["sessions", "--bogus"]).json);
        assert!(!usage(&[]).json);
    }

    #[test]
    fn an_operand_named_json_after_double_dash_is_not_the_option() {
        let cli = run(&["events", "--", "--json"]);
        assert!(!cli.json);
        assert_eq!(
            cli.command,
            Command::Events {
                id: OsString::from("--json")
            }
        );
        assert!(!wants_json(&[
            "sample-host".into(),
            "x".into(),
            "--".into(),
            "--json".into()
        ]));
    }

    #[test]
    fn a_huge_unknown_argument_makes_a_bounded_json_message() {
        let huge = format!("--{}", "x".repeat(100_000));
        let err = usage(&["sessions", &huge, "--json"]);
        assert!(err.json);
        assert!(err.message.len() < 2_000, "{} bytes", err.message.len());
        assert!(err.message.contains("xxxx"), "{}", err.message);
    }

    #[test]
    fn mcp_takes_the_calling_session_and_the_global_options() {
        let cli = run(&["mcp", "--session", "me", "--sessions", "/s"]);
        assert_eq!(
            cli.command,
            Command::Mcp {
                session: Some(OsString::from("me"))
            }
        );
        assert_eq!(cli.sessions, Some(PathBuf::from("/s")));
        assert_eq!(run(&["mcp"]).command, Command::Mcp { session: None });
    }

    #[test]
    fn team_grant_takes_the_global_collection_and_at_least_one_role() {
        let cli = run(&[
            "--index",
            "postgresql://u@/db",
            "team",
            "grant",
            "--collection",
            "alice@laptop",
            "--reader",
            "carol",
            "--reader",
            "dave",
        ]);
        assert_eq!(cli.collection.as_deref(), Some("alice@laptop"));
        assert_eq!(
            cli.command,
            Command::Team(TeamCommand::Grant(TeamRoles {
                reader: vec!["carol".into(), "dave".into()],
                publisher: vec![],
            }))
        );
        let err = usage(&["team", "revoke", "--collection", "c", "--json"]);
        assert!(err.message.contains("--reader"), "{}", err.message);
        assert_eq!(
            run(&["team", "collections"]).command,
            Command::Team(TeamCommand::Collections)
        );
    }

    #[test]
    fn help_and_version_are_information_not_errors() {
        for flag in ["--help", "--version"] {
            match parse(["sample-host", flag]) {
                Parsed::Info(text) => assert!(text.contains("sample-host"), "{text}"),
                other => panic!("{flag}: {other:?}"),
            }
        }
    }
}
