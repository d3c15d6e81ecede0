//! `sample-host demo`: writes the demo corpus afresh, loads the plugin and tours what it answers.

use std::io::Write;

use host_api::abi::client::QueryMethod;
use host_api::abi::{Call, PluginError};
use host_api::log::write::WriteOptions;
use host_api::log::SessionHeader;
use serde_json::{json, Value};

use super::read::{self, Read};
use super::{print, start_host, CommandError, Options};
use crate::demo::{self, Script};
use crate::paths;
use crate::render::clip;

fn section(out: &mut dyn Write, title: &str) -> Result<(), CommandError> {
    print(out, format!("\n== {title} =="))
}

/// Runs the tour.
pub fn run(options: &Options, out: &mut dyn Write) -> Result<i32, CommandError> {
    let base = paths::default_demo_dir();
    let sessions = options
        .sessions
        .clone()
        .unwrap_or_else(|| base.join("sessions"));
    if sessions.exists() {
        if options.sessions.is_some() {
            return Err(CommandError::Usage(format!(
                "demo writes a fresh corpus; {} already exists (omit --sessions to use the demo folder)",
                sessions.display()
            )));
        }
        std::fs::remove_dir_all(&sessions)
            .map_err(CommandError::io(format!("clearing {}", sessions.display())))?;
    }
    let ids = demo::write_demo_corpus(&sessions)
        .map_err(|e| CommandError::Demo(format!("writing the demo corpus: {e}")))?;
    let options = Options {
        index: Some(
            options
                .index
                .clone()
                .unwrap_or_else(|| base.join("index.sqlite")),
        ),
        ..options.clone()
    };
    print(
        out,
        format!(
            "demo corpus: {} sessions written to {}",
            ids.len(),
            sessions.display()
        ),
    )?;
    let host = start_host(&options, sessions.clone())?;
    section(out, "plugins")?;
    super::plugins::print_status(&host, false, out)?;
    if host.serving().is_none() {
        return Ok(1);
    }

    // A live session of this host, persisted beside the others as it grows.
    let live_id = "demo-live";
    let header = SessionHeader::new(live_id, 1_785_100_000_000, Some(demo::DEMO_CWD.to_string()));
    host.shared()
        .live
        .create(header, Some((&sessions, WriteOptions::default())))
        .map_err(|e| CommandError::Demo(format!("creating the live session: {e}")))?;
    let mut script = Script::new("live", 1_785_100_000_000);
    script.begin_turn();
    script.user("Where did we leave the parser CI fix?");
    script.assistant("In demo-ci-fix: the off-by-one in Parser::close_array was fixed and a regression test added.");
    host.shared()
        .live
        .append(live_id, script.events.clone())
        .map_err(|e| CommandError::Demo(format!("appending to the live session: {e}")))?;
    print(
        out,
        format!(
            "\nlive session {live_id}: {} events appended (open turn), persisted at {}",
            script.events.len(),
            host.shared()
                .live
                .log_path(live_id)
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    )?;

    let plain = Options {
        json: false,
        ..options.clone()
    };
    let mut show = |title: &str, read: Read| -> Result<(), CommandError> {
        section(out, title)?;
        match read::run(&host, &read, &plain, out) {
            // The tour goes on past one failed read, saying what failed.
            Err(CommandError::Plugin(e)) => print(out, format!("error: {e}")),
            other => other.map(|_| ()),
        }
    };
    let ci = || demo::CI_SESSION.to_string();
    show(
        "sessions (live and on disk, merged; live wins)",
        Read::Sessions { problems: true },
    )?;
    show(
        &format!("events of {} with their surface labels", demo::CI_SESSION),
        Read::Events { id: ci() },
    )?;
    show(
        "what the model sees now (current surface)",
        Read::Surface { id: ci() },
    )?;
    show(
        "a shadowed event: the original question, compacted away",
        Read::Trace {
            id: ci(),
            seq: Some(3),
        },
    )?;
    show(
        "the event window around it",
        Read::Event {
            id: ci(),
            seq: 3,
            before: 1,
            after: 2,
        },
    )?;
    show(
        "lineage",
        Read::Trace {
            id: ci(),
            seq: None,
        },
    )?;
    show(
        "the live session, read through the plugin",
        Read::Events {
            id: live_id.to_string(),
        },
    )?;

    section(
        out,
        "what the host sends the model for the live session (same fold)",
    )?;
    for message in host
        .shared()
        .live
        .model_messages(live_id)
        .unwrap_or_default()
    {
        print(out, clip(&message.to_string(), 110))?;
    }

    section(out, "full-text search")?;
    let call = Call::new();
    let request = json!({"query": "close_array"});
    match host.query(|q| -> Result<Value, PluginError> {
        q.raw(QueryMethod::SearchSessions, &call, &request)
    }) {
        Ok(page) => print(out, page.to_string())?,
        Err(e) => print(out, format!("{e}"))?,
    }
    Ok(0)
}
