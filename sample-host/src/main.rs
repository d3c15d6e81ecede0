//! The `sample-host` command line. Every read goes through the loaded plugin; `inspect` alone reads a log
//! with `host-api` directly.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use abi_stable::std_types::{RString, RVec};
use anyhow::{bail, Context, Result};
use host_api::abi::client::QueryMethod;
use host_api::abi::{
    Call, EmptyRequest, PluginError, ReadEventRequest, SessionRequest, TraceEventRequest,
};
use host_api::log::write::WriteOptions;
use host_api::log::SessionHeader;
use sample_host::demo::{self, Script};
use sample_host::render::{self, clip, table};
use sample_host::{paths, HostOptions, PluginHost, Shared, SlotState};
use serde_json::{json, Value};

const USAGE: &str = "\
usage: sample-host [--plugins DIR] [--sessions DIR] [--index PATH] [--verbose] COMMAND [ARGS] [--json]

commands:
  demo                      build a demo corpus, load the plugin and tour what it answers
  inspect PATH              read and fold one session log file with host-api (no plugin)
  plugins                   plugin libraries found, which one serves, refused ones and why
  sessions                  every session, live and on disk
  events ID                 every event of a session with its surface label
  surface ID                the current (model-visible) surface of a session
  event ID SEQ [--before N] [--after N]
                            one event and a window around it
  trace ID [SEQ]            a session's lineage, or one event's replacement trace
  watch                     keep running and hot-reload plugin libraries as they change

defaults: --plugins: plugins/ beside the binary, else $XDG_CONFIG_HOME/dsh-session-search/plugins, else the
binary's folder (where cargo builds the plugin); --sessions: $XDG_DATA_HOME/dsh-session-search/sessions;
--index: $XDG_CACHE_HOME/dsh-session-search/index.sqlite";

struct Args {
    plugins: Option<PathBuf>,
    sessions: Option<PathBuf>,
    index: Option<PathBuf>,
    verbose: bool,
    json: bool,
    before: i64,
    after: i64,
    positional: Vec<String>,
}

impl Args {
    /// `--sessions`, or the default sessions root.
    fn sessions_dir(&self) -> PathBuf {
        self.sessions
            .clone()
            .unwrap_or_else(paths::default_sessions_dir)
    }
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        plugins: None,
        sessions: None,
        index: None,
        verbose: false,
        json: false,
        before: 0,
        after: 0,
        positional: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--plugins" => args.plugins = Some(value("--plugins")?.into()),
            "--sessions" => args.sessions = Some(value("--sessions")?.into()),
            "--index" => args.index = Some(value("--index")?.into()),
            "--before" => {
                args.before = value("--before")?
                    .parse()
                    .context("--before takes an integer")?
            }
            "--after" => {
                args.after = value("--after")?
                    .parse()
                    .context("--after takes an integer")?
            }
            "--json" => args.json = true,
            "--verbose" | "-v" => args.verbose = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            flag if flag.starts_with("--") => bail!("unknown option {flag}\n\n{USAGE}"),
            _ => args.positional.push(arg),
        }
    }
    Ok(args)
}

fn main() {
    let code = match run() {
        Ok(code) => code,
        // `sample-host … | head`: the reader went away; that is not an error of ours.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            0
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    };
    std::process::exit(code);
}

fn run() -> Result<i32> {
    let args = parse_args()?;
    let Some(command) = args.positional.first().cloned() else {
        eprintln!("{USAGE}");
        return Ok(2);
    };
    let rest = &args.positional[1..];
    match command.as_str() {
        "inspect" => {
            let path = rest.first().context("inspect needs a PATH")?;
            let stdout = std::io::stdout();
            let stderr = std::io::stderr();
            Ok(sample_host::inspect::run(
                Path::new(path),
                args.json,
                &mut stdout.lock(),
                &mut stderr.lock(),
            )?)
        }
        "demo" => run_demo(&args),
        "plugins" => {
            let host = start_host(&args, args.sessions_dir())?;
            print_plugins(&host, args.json);
            Ok(if host.serving().is_some() { 0 } else { 1 })
        }
        "watch" => run_watch(&args),
        "sessions" | "events" | "surface" | "event" | "trace" => {
            let host = start_host(&args, args.sessions_dir())?;
            read_command(&host, &command, rest, &args)
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}

fn start_host(args: &Args, sessions: PathBuf) -> Result<Arc<PluginHost>> {
    let (plugins_dir, only_file) = match &args.plugins {
        Some(dir) => (dir.clone(), None),
        None => paths::default_plugins_dir(),
    };
    let index = args.index.clone().unwrap_or_else(paths::default_index_path);
    let config = json!({"indexPath": index}).to_string();
    let shared = Shared::new(Some(sessions), args.verbose);
    let mut options = HostOptions::new(plugins_dir, config);
    options.only_file = only_file;
    let host = PluginHost::start(options, shared).context("starting the plugin host")?;
    if host.serving().is_none() {
        for status in host.status() {
            if let SlotState::Refused { reason, .. } = &status.state {
                eprintln!("refused {}: {reason}", status.file.display());
            }
        }
        eprintln!(
            "no plugin loaded from {} — build it with `cargo build --release` (or pass --plugins DIR)",
            host.plugins_dir().display()
        );
    }
    Ok(host)
}

fn print_plugins(host: &PluginHost, as_json: bool) {
    let status = host.status();
    if as_json {
        let items: Vec<Value> = status
            .iter()
            .map(|s| {
                let mut v = match &s.state {
                    SlotState::Serving { generation, name, version } => json!({"state": "serving", "generation": generation, "name": name, "version": version}),
                    SlotState::Standby { name, version } => json!({"state": "standby", "name": name, "version": version}),
                    SlotState::Refused { code, reason } => json!({"state": "refused", "code": code, "reason": reason}),
                };
                v["file"] = s.file.display().to_string().into();
                if let Some(note) = &s.note {
                    v["note"] = note.clone().into();
                }
                v
            })
            .collect();
        println!(
            "{}",
            json!({"pluginsDir": host.plugins_dir().display().to_string(), "mappedLibraries": host.mapped_libraries(), "plugins": items})
        );
        return;
    }
    println!("plugin folder: {}", host.plugins_dir().display());
    let rows: Vec<Vec<String>> = status
        .iter()
        .map(|s| {
            let file = s
                .file
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (state, detail) = match &s.state {
                SlotState::Serving {
                    generation,
                    name,
                    version,
                } => (
                    format!("serving (generation {generation})"),
                    format!("{name} {version}"),
                ),
                SlotState::Standby { name, version } => {
                    ("standby".to_string(), format!("{name} {version}"))
                }
                SlotState::Refused { reason, .. } => ("refused".to_string(), reason.clone()),
            };
            let detail = match &s.note {
                Some(note) => format!("{detail}; {note}"),
                None => detail,
            };
            vec![file, state, detail]
        })
        .collect();
    print!("{}", table(&["LIBRARY", "STATE", "DETAIL"], &rows));
}

fn fail(e: &PluginError, as_json: bool) -> i32 {
    if as_json {
        println!("{}", render::error(e));
    } else {
        eprintln!("error: {e}");
    }
    1
}

fn read_command(host: &PluginHost, command: &str, rest: &[String], args: &Args) -> Result<i32> {
    let id = || {
        rest.first()
            .map(String::as_str)
            .context("this command needs a session ID")
    };
    let call = Call::new();
    let session = |id: &str| SessionRequest {
        session_id: id.to_string(),
    };
    let out = match command {
        "sessions" => host
            .query(|q| q.list_sessions(&call, &EmptyRequest {}))
            .map(|list| {
                if args.json {
                    json!(list.iter().map(render::record).collect::<Vec<_>>()).to_string()
                } else {
                    let rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|r| {
                            let h = &r.header;
                            let source = match (r.live, r.persisted) {
                                (true, true) => "live+disk",
                                (true, false) => "live",
                                _ => "disk",
                            };
                            vec![
                                h.id.to_string(),
                                h.created_at.to_string(),
                                source.to_string(),
                                h.cwd
                                    .as_ref()
                                    .map(|c| c.to_string())
                                    .unwrap_or_else(|| "-".into())
                                    .to_string(),
                                h.parent_session
                                    .as_ref()
                                    .map(|c| c.to_string())
                                    .unwrap_or_else(|| "-".into())
                                    .to_string(),
                            ]
                        })
                        .collect();
                    table(&["ID", "CREATED", "SOURCE", "CWD", "PARENT"], &rows)
                }
            }),
        "events" => {
            let id = id()?;
            host.query(|q| q.list_events(&call, &session(id)))
                .map(|events| {
                    if args.json {
                        json!(events.iter().map(render::event_record).collect::<Vec<_>>())
                            .to_string()
                    } else {
                        let rows: Vec<Vec<String>> = events
                            .iter()
                            .map(|e| {
                                vec![
                                    e.seq.to_string(),
                                    e.kind.to_string(),
                                    e.surface.as_str().to_string(),
                                    e.time.to_string(),
                                ]
                            })
                            .collect();
                        table(&["SEQ", "TYPE", "SURFACE", "TIME"], &rows)
                    }
                })
        }
        "surface" => {
            let id = id()?;
            host.query(|q| q.read_surface(&call, &session(id)))
                .map(|s| {
                    if args.json {
                        render::surface(&s).to_string()
                    } else {
                        format!(
                            "captured through seq {}\n{}",
                            s.captured_through_seq
                                .map(|n| n.to_string())
                                .unwrap_or_else(|| "-".into()),
                            events_table(&s.events, None)
                        )
                    }
                })
        }
        "event" => {
            let id = id()?;
            let seq: i64 = rest
                .get(1)
                .context("event needs ID SEQ")?
                .parse()
                .context("SEQ must be an integer")?;
            let request = ReadEventRequest {
                session_id: id.into(),
                seq,
                before: args.before,
                after: args.after,
            };
            host.query(|q| q.read_event(&call, &request)).map(|w| {
                if args.json {
                    render::window(&w).to_string()
                } else {
                    events_table(&w.events, u64::try_from(seq).ok())
                }
            })
        }
        "trace" => {
            let id = id()?;
            match rest.get(1) {
                Some(seq) => {
                    let seq: i64 = seq.parse().context("SEQ must be an integer")?;
                    host.query(|q| {
                        q.trace_event(
                            &call,
                            &TraceEventRequest {
                                session_id: id.to_string(),
                                seq,
                            },
                        )
                    }).map(|t| {
                        if args.json {
                            render::event_trace(&t).to_string()
                        } else {
                            format!(
                                "event {} ({}) is {}\n  replaced by:        {}\n  replacement chain:  {:?}\n  replaced (direct):  {:?}\n  cites (sources):    {:?}\n  cited by (derived): {:?}\n",
                                t.target.seq, t.target.kind, t.target.surface.as_str(),
                                t.replaced_by.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
                                t.replacement_chain.to_vec(), t.replaced_event_seqs.to_vec(), t.source_event_seqs.to_vec(), t.derived_event_seqs.to_vec()
                            )
                        }
                    })
                }
                None => host
                    .query(|q| q.trace_session(&call, &session(id)))
                    .map(|l| {
                        if args.json {
                            render::lineage(&l).to_string()
                        } else {
                            let mut s = format!(
                                "session {}\n  ancestors: {:?}\n",
                                l.target.header.id,
                                l.ancestors
                                    .iter()
                                    .map(|a| a.header.id.to_string())
                                    .collect::<Vec<_>>()
                            );
                            for d in l.descendants.iter() {
                                s.push_str(&format!(
                                    "  {}└ {}\n",
                                    "  ".repeat(d.depth.saturating_sub(1) as usize),
                                    d.session.header.id
                                ));
                            }
                            s.push_str(&match (
                                l.complete,
                                l.root.as_ref().into_option(),
                                l.unresolved_parent_id.as_ref().into_option(),
                            ) {
                                (true, Some(root), _) => format!("  root: {}\n", root.header.id),
                                (_, _, Some(missing)) => {
                                    format!("  incomplete: parent {missing} is not in the corpus\n")
                                }
                                _ => String::new(),
                            });
                            s
                        }
                    }),
            }
        }
        other => bail!("{other} is not a read command"),
    };
    match out {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{}", text.trim_end())?;
            Ok(0)
        }
        Err(e) => Ok(fail(&e, args.json)),
    }
}

/// Event envelopes as a SEQ / TYPE / CONTENT table; `mark` flags one seq with `>`.
fn events_table(events: &RVec<RString>, mark: Option<u64>) -> String {
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(render::envelope)
        .map(|e| {
            let flag = match mark {
                Some(m) if e["seq"].as_u64() == Some(m) => ">",
                Some(_) => " ",
                None => "",
            };
            vec![
                format!("{flag}{}", e["seq"]),
                e["type"].as_str().unwrap_or("").to_string(),
                clip(&summary(&e), 90),
            ]
        })
        .collect();
    table(&["SEQ", "TYPE", "CONTENT"], &rows)
}

/// A one-line summary of an event envelope for tables: its text if it has any, else its data.
fn summary(event: &Value) -> String {
    match host_api::log::Event::from_value(event.clone()) {
        Ok(e) => {
            let text = host_api::text::event_text(&e);
            if text.is_empty() {
                e.data.to_string()
            } else {
                text
            }
        }
        Err(_) => event.to_string(),
    }
}

fn run_watch(args: &Args) -> Result<i32> {
    let host = start_host(args, args.sessions_dir())?;
    let _watcher = sample_host::watch::watch(&host, Duration::from_millis(250))
        .context("watching the plugin folder")?;
    println!(
        "watching {} — rebuild the plugin to hot-reload it; Ctrl-C to stop",
        host.plugins_dir().display()
    );
    let mut last = None;
    loop {
        let now = host.serving();
        if now != last {
            match &now {
                Some((generation, name, version)) => {
                    println!("serving: {name} {version} (generation {generation})")
                }
                None => println!("serving: nothing"),
            }
            last = now;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn section(title: &str) {
    println!("\n== {title} ==");
}

fn run_demo(args: &Args) -> Result<i32> {
    let base = paths::default_demo_dir();
    let sessions = args
        .sessions
        .clone()
        .unwrap_or_else(|| base.join("sessions"));
    if sessions.exists() {
        if args.sessions.is_some() {
            bail!("demo writes a fresh corpus; {} already exists (omit --sessions to use the demo folder)", sessions.display());
        }
        std::fs::remove_dir_all(&sessions)
            .with_context(|| format!("clearing {}", sessions.display()))?;
    }
    let ids = demo::write_demo_corpus(&sessions).context("writing the demo corpus")?;
    let args = Args {
        index: Some(
            args.index
                .clone()
                .unwrap_or_else(|| base.join("index.sqlite")),
        ),
        ..clone_args(args)
    };
    println!(
        "demo corpus: {} sessions written to {}",
        ids.len(),
        sessions.display()
    );
    let host = start_host(&args, sessions.clone())?;
    section("plugins");
    print_plugins(&host, false);
    if host.serving().is_none() {
        return Ok(1);
    }

    // A live session of this host, persisted beside the others as it grows.
    let live_id = "demo-live";
    let header = SessionHeader::new(live_id, 1_785_100_000_000, Some(demo::DEMO_CWD.to_string()));
    host.shared()
        .live
        .create(header, Some((&sessions, WriteOptions::default())))
        .context("creating the live session")?;
    let mut script = Script::new("live", 1_785_100_000_000);
    script.begin_turn();
    script.user("Where did we leave the parser CI fix?");
    script.assistant("In demo-ci-fix: the off-by-one in Parser::close_array was fixed and a regression test added.");
    host.shared()
        .live
        .append(live_id, script.events.clone())
        .context("appending to the live session")?;
    println!(
        "\nlive session {live_id}: {} events appended (open turn), persisted at {}",
        script.events.len(),
        host.shared()
            .live
            .log_path(live_id)
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );

    let show = |title: &str, command: &str, rest: &[&str], extra: &Args| -> Result<()> {
        section(title);
        let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
        read_command(&host, command, &rest, extra)?;
        Ok(())
    };
    show(
        "sessions (live and on disk, merged; live wins)",
        "sessions",
        &[],
        &args,
    )?;
    show(
        &format!("events of {} with their surface labels", demo::CI_SESSION),
        "events",
        &[demo::CI_SESSION],
        &args,
    )?;
    show(
        "what the model sees now (current surface)",
        "surface",
        &[demo::CI_SESSION],
        &args,
    )?;
    show(
        "a shadowed event: the original question, compacted away",
        "trace",
        &[demo::CI_SESSION, "3"],
        &args,
    )?;
    show(
        "the event window around it",
        "event",
        &[demo::CI_SESSION, "3"],
        &Args {
            before: 1,
            after: 2,
            ..clone_args(&args)
        },
    )?;
    show("lineage", "trace", &[demo::CI_SESSION], &args)?;
    show(
        "the live session, read through the plugin",
        "events",
        &[live_id],
        &args,
    )?;

    section("what the host sends the model for the live session (same fold)");
    for message in host
        .shared()
        .live
        .model_messages(live_id)
        .unwrap_or_default()
    {
        println!("{}", clip(&message.to_string(), 110));
    }

    section("full-text search");
    let call = Call::new();
    let request = json!({"query": "close_array"});
    match host.query(|q| -> Result<Value, PluginError> {
        q.raw(QueryMethod::SearchSessions, &call, &request)
    }) {
        Ok(page) => println!("{page}"),
        Err(e) => println!("{e}"),
    }
    Ok(0)
}

fn clone_args(a: &Args) -> Args {
    Args {
        plugins: a.plugins.clone(),
        sessions: a.sessions.clone(),
        index: a.index.clone(),
        verbose: a.verbose,
        json: a.json,
        before: a.before,
        after: a.after,
        positional: a.positional.clone(),
    }
}
