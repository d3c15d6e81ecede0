//! The read commands (`sessions`, `events`, `surface`, `event`, `trace`): each one call to the loaded
//! plugin, printed as a table or, with `--json`, as one JSON value.

use std::io::Write;

use host_api::abi::{
    CorpusProblem, EmptyRequest, PluginError, ReadEventRequest, SessionRequest, TraceEventRequest,
};
use serde_json::{json, Value};

use super::{print, CommandError, Options};
use crate::present::Style;
use crate::render::{self, clip, table};
use crate::PluginHost;

/// One read, its arguments already checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Sessions {
        problems: bool,
    },
    Events {
        id: String,
    },
    Surface {
        id: String,
    },
    Event {
        id: String,
        seq: i64,
        before: i64,
        after: i64,
    },
    Trace {
        id: String,
        seq: Option<i64>,
    },
}

impl Read {
    /// The same read of another session id (a prefix resolved to the whole id).
    fn with_id(&self, new: &str) -> Self {
        let mut read = self.clone();
        match &mut read {
            Self::Sessions { .. } => {}
            Self::Events { id }
            | Self::Surface { id }
            | Self::Event { id, .. }
            | Self::Trace { id, .. } => *id = new.to_string(),
        }
        read
    }

    fn id(&self) -> Option<&str> {
        match self {
            Self::Sessions { .. } => None,
            Self::Events { id }
            | Self::Surface { id }
            | Self::Event { id, .. }
            | Self::Trace { id, .. } => Some(id),
        }
    }
}

/// Runs one read and prints its answer; a plugin error is returned (its message cut if it quotes a
/// huge id).
pub fn run(
    host: &PluginHost,
    read: &Read,
    options: &Options,
    out: &mut dyn Write,
) -> Result<i32, CommandError> {
    let style = options.style();
    let text = match read.id() {
        // A unique prefix of an id is enough; a near miss gets "did you mean".
        Some(typed) => {
            super::ids::with_session(host, typed, |id| {
                answer(host, &read.with_id(id), options.json, &style)
            })?
            .1
        }
        None => answer(host, read, options.json, &style).map_err(CommandError::Plugin)?,
    };
    print(out, text.trim_end())?;
    Ok(0)
}

fn answer(
    host: &PluginHost,
    read: &Read,
    as_json: bool,
    style: &Style,
) -> Result<String, PluginError> {
    let call = super::calls::call();
    let session = |id: &str| SessionRequest {
        session_id: id.to_string(),
    };
    match read {
        Read::Sessions { problems } => {
            let list = host.query(|q| q.list_sessions(&call, &EmptyRequest {}))?;
            // Read after the listing: the problems of the look the listing just took.
            let mut skipped = host.query(|q| q.problems(&call, &EmptyRequest {}))?;
            if *problems {
                // The same sessions `diagnostics` counts: the index's view, which also holds the
                // live/disk conflicts the plain listing cannot see.
                if let Ok(report) = host.query(|q| {
                    q.raw::<_, Value>(
                        host_api::abi::client::QueryMethod::Diagnostics,
                        &call,
                        &EmptyRequest {},
                    )
                }) {
                    skipped = skipped_of(&report);
                }
            }
            Ok(sessions(&list, &skipped, *problems, as_json, style))
        }
        Read::Events { id } => {
            let id = id.as_str();
            host.query(|q| q.list_events(&call, &session(id)))
                .map(|events| {
                    if as_json {
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
                                    style.when(e.time),
                                ]
                            })
                            .collect();
                        table(&["SEQ", "TYPE", "SURFACE", "TIME"], &rows)
                    }
                })
        }
        Read::Surface { id } => {
            let id = id.as_str();
            host.query(|q| q.read_surface(&call, &session(id)))
                .map(|s| {
                    if as_json {
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
        Read::Event {
            id,
            seq,
            before,
            after,
        } => {
            let seq = *seq;
            let request = ReadEventRequest {
                session_id: id.as_str().into(),
                seq,
                before: *before,
                after: *after,
            };
            host.query(|q| q.read_event(&call, &request)).map(|w| {
                if as_json {
                    render::window(&w).to_string()
                } else {
                    events_table(&w.events, u64::try_from(seq).ok())
                }
            })
        }
        Read::Trace { id, seq } => {
            let id = id.as_str();
            match *seq {
                Some(seq) => {
                    host.query(|q| {
                        q.trace_event(
                            &call,
                            &TraceEventRequest {
                                session_id: id.to_string(),
                                seq,
                            },
                        )
                    }).map(|t| {
                        if as_json {
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
                        if as_json {
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
                                l.root.as_ref(),
                                l.unresolved_parent_id.as_ref(),
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
    }
}

/// The report's `skipped` entries as corpus problems.
fn skipped_of(report: &Value) -> Vec<CorpusProblem> {
    report["skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| CorpusProblem {
            path: s["path"].as_str().unwrap_or("").into(),
            session_id: s["id"].as_str().map(String::from),
            code: s["code"].as_str().unwrap_or("").into(),
            message: s["reason"].as_str().unwrap_or("").into(),
        })
        .collect()
}

/// `sessions --json`: `{"sessions": [...], "skipped": [...]}`, written from the records as they are
/// (see [`render::RecordJson`]).
fn sessions_json(list: &[host_api::abi::SessionRecord], skipped: &[CorpusProblem]) -> String {
    #[derive(serde::Serialize)]
    struct Answer<'a> {
        sessions: Vec<render::RecordJson<'a>>,
        skipped: Vec<Value>,
    }
    let answer = Answer {
        sessions: list.iter().map(render::RecordJson::of).collect(),
        skipped: skipped.iter().map(render::problem).collect(),
    };
    // Strings, numbers, booleans and maps keyed by names: writing them to a string cannot fail.
    serde_json::to_string(&answer).unwrap_or_default()
}

/// `sessions`: the table (or JSON object) of sessions, and what was left out; with `--problems`, only
/// what was left out (path, code, reason).
fn sessions(
    list: &[host_api::abi::SessionRecord],
    skipped: &[CorpusProblem],
    list_problems: bool,
    as_json: bool,
    style: &Style,
) -> String {
    if as_json {
        return sessions_json(list, skipped);
    }
    // Cells borrowed from the records where they are printed as they are, and the others (local
    // times, paths with `~`) written into one buffer: 10,000 rows of six copied strings each, and
    // then a vector and several strings per row, were a share of the command.
    let mut written = String::with_capacity(list.len() * 64);
    let mut ends = Vec::with_capacity(list.len());
    for r in list {
        style.write_when(&mut written, r.header.created_at);
        let when = written.len();
        if let Some(cwd) = &r.header.cwd {
            style.write_path(&mut written, cwd.as_str());
        }
        ends.push((when, written.len()));
    }
    let mut start = 0;
    let rows: Vec<[&str; 6]> = list
        .iter()
        .zip(&ends)
        .map(|(r, &(when, cwd))| {
            let h = &r.header;
            let source = match (r.live, r.persisted) {
                (true, true) => "live+disk",
                (true, false) => "live",
                _ => "disk",
            };
            let row = [
                h.id.as_str(),
                &written[start..when],
                render::source(h),
                source,
                if h.cwd.is_some() {
                    &written[when..cwd]
                } else {
                    "-"
                },
                h.parent_session.as_deref().unwrap_or("-"),
            ];
            start = cwd;
            row
        })
        .collect();
    if list_problems {
        if skipped.is_empty() {
            return "no session was left out: every log could be read".into();
        }
        let mut text = format!("{}:\n", left_out(skipped.len()));
        let rows: Vec<Vec<String>> = skipped
            .iter()
            .map(|p| {
                vec![
                    style.path(p.path.as_str()),
                    p.code.to_string(),
                    clip(
                        &crate::render::reason(p.code.as_str(), p.message.as_str()),
                        120,
                    ),
                ]
            })
            .collect();
        text.push_str(&table(&["PATH", "CODE", "REASON"], &rows));
        return text;
    }
    let mut text = table(
        &["ID", "CREATED", "SOURCE", "WHERE", "CWD", "PARENT"],
        &rows,
    );
    if skipped.is_empty() {
        return text;
    }
    {
        text.push_str(&format!(
            "\n{}; see which and why with `sessions --problems` (or `sessions --json`)\n",
            left_out(skipped.len())
        ));
    }
    text
}

fn left_out(n: usize) -> String {
    if n == 1 {
        "1 session was left out because it could not be read".into()
    } else {
        format!("{n} sessions were left out because they could not be read")
    }
}

/// Event envelopes as a SEQ / TYPE / CONTENT table; `mark` flags one seq with `>`.
fn events_table(events: &[String], mark: Option<u64>) -> String {
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| render::envelope(e))
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
    match dsh_codec::log::Event::from_value(event.clone()) {
        Ok(e) => {
            let text = dsh_codec::text::event_text(&e);
            if text.is_empty() {
                e.data.to_string()
            } else {
                text
            }
        }
        Err(_) => event.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(path: &str) -> CorpusProblem {
        CorpusProblem {
            path: path.into(),
            session_id: Some("broken".into()),
            code: "LOG_SEQ_GAP".into(),
            message: "expected seq 6, got 87".into(),
        }
    }

    #[test]
    fn the_plain_listing_counts_skipped_sessions_and_says_how_to_see_them() {
        let skipped: Vec<CorpusProblem> = vec![problem("/s/a.jsonl")];
        let style = Style::plain(100, 0);
        let text = sessions(&Vec::new(), &skipped, false, false, &style);
        assert!(
            text.contains("1 session was left out because it could not be read")
                && text.contains("sessions --problems"),
            "{text}"
        );
        assert!(!text.contains("/s/a.jsonl"), "{text}");
        let text = sessions(&Vec::new(), &skipped, true, false, &style);
        assert!(
            text.contains("/s/a.jsonl") && text.contains("LOG_SEQ_GAP"),
            "{text}"
        );
        assert!(
            !text.contains("ID "),
            "--problems prints only the problems: {text}"
        );
        let text = sessions(&Vec::new(), &Vec::new(), false, false, &style);
        assert!(!text.contains("left out"), "{text}");
    }

    #[test]
    fn the_json_listing_carries_the_skipped_sessions() {
        let skipped: Vec<CorpusProblem> = vec![problem("/s/a.jsonl")];
        let value: Value = serde_json::from_str(&sessions(
            &Vec::new(),
            &skipped,
            false,
            true,
            &Style::plain(100, 0),
        ))
        .unwrap();
        assert_eq!(value["sessions"], json!([]));
        assert_eq!(
            value["skipped"],
            json!([{"path": "/s/a.jsonl", "id": "broken", "code": "LOG_SEQ_GAP", "reason": "expected seq 6, got 87"}])
        );
    }
}
