//! What each MCP tool does, synchronously, over the serving plugin generation: the same calls and the
//! same JSON shapes as the command line's `--json` output, cut to the call's byte budget and continued
//! with a cursor. Nothing is held between calls but citations already prepared (so a citation read in
//! parts is one frozen snapshot), so a plugin swapped in by the watch answers the next call.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use host_api::abi::client::QueryMethod;
use host_api::abi::wire::search::{SessionEventSearchRequest, SessionSearchRequest};
use host_api::abi::{
    Call, EmptyRequest, ErrorCode, EventFilter, PluginError, Range, ReadEventRequest,
    SessionFilter, SessionRequest, Surface,
};
use serde_json::{json, Map, Value};

use super::args::*;
use super::budget::{self, floor_char_boundary, insert_bounded, json_len, page};
use super::cursor::{self, Position};
use super::ToolError;
use crate::commands::search::{flatten, parse_time, titles};
use crate::present::{ColorChoice, Style};
use crate::render;
use crate::PluginHost;

/// The text contents of a successful tool result, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub parts: Vec<String>,
}

impl Answer {
    fn json(value: &Value) -> Self {
        Self {
            parts: vec![value.to_string()],
        }
    }
}

/// How many prepared citations the server keeps for their cursors.
const HELD_CITATIONS: usize = 16;

/// The tools over one plugin host.
pub struct Tools {
    host: Arc<PluginHost>,
    /// `mcp --session ID`: the calling session when a call names none.
    calling_session: Option<String>,
    citations: Mutex<VecDeque<(u64, Arc<Cited>)>>,
    next_key: AtomicU64,
}

/// A prepared citation: the context text and what it holds.
#[derive(Debug)]
struct Cited {
    text: String,
    sources: Value,
}

impl Tools {
    pub fn new(host: Arc<PluginHost>, calling_session: Option<String>) -> Self {
        // Keys differ between server runs, so a cursor kept across a restart finds nothing rather
        // than another citation.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            host,
            calling_session,
            citations: Mutex::new(VecDeque::new()),
            next_key: AtomicU64::new(seed),
        }
    }

    fn caller(&self, named: &Option<String>) -> Option<String> {
        named.clone().or_else(|| self.calling_session.clone())
    }

    pub fn search_sessions(
        &self,
        args: SearchSessionsArgs,
        call: Call,
    ) -> Result<Answer, ToolError> {
        const TOOL: &str = "search_sessions";
        let (budget, print) = paging(&args, budget::DEFAULT_MAX_BYTES)?;
        let search = Search::start(TOOL, print, budget, &args.cursor, &args.since)?;
        let sessions = args
            .cwd
            .as_ref()
            .map(|cwd| vec![SessionFilter::Cwd(cwd.iter().cloned().map(Some).collect())]);
        let request = SessionSearchRequest {
            query: args.query.clone().into(),
            session_filters: sessions.map(|f| json!(f)),
            event_filters: Some(json!(search.event_filters(&args.surface, &args.types))),
            limit: args.limit.map(Value::from),
            cursor: search.plugin.clone().map(Value::from),
            ..Default::default()
        };
        let page: Value = self
            .host
            .query(|q| q.raw(QueryMethod::SearchSessions, &call, &request))
            .map_err(ToolError::plugin)?;
        let caller = self.caller(&args.calling_session_id);
        let keep = |hit: &Value| caller.is_none() || hit["sessionId"].as_str() != caller.as_deref();
        search.page(&self.host, &page, QueryMethod::SearchSessions, &keep)
    }

    pub fn search_events(&self, args: SearchEventsArgs, call: Call) -> Result<Answer, ToolError> {
        const TOOL: &str = "search_events";
        let (budget, print) = paging(&args, budget::DEFAULT_MAX_BYTES)?;
        let search = Search::start(TOOL, print, budget, &args.cursor, &args.since)?;
        let request = SessionEventSearchRequest {
            session_id: args.session_id.clone().into(),
            query: args.query.clone().into(),
            filters: Some(json!(search.event_filters(&args.surface, &args.types))),
            limit: args.limit.map(Value::from),
            cursor: search.plugin.clone().map(Value::from),
            ..Default::default()
        };
        let page: Value = self
            .host
            .query(|q| q.raw(QueryMethod::SearchEvents, &call, &request))
            .map_err(|e| ToolError::about(e, &args.session_id))?;
        search.page(&self.host, &page, QueryMethod::SearchEvents, &|_| true)
    }

    pub fn list_sessions(&self, args: ListSessionsArgs, call: Call) -> Result<Answer, ToolError> {
        const TOOL: &str = "list_sessions";
        let (budget, print) = paging(&args, budget::DEFAULT_MAX_BYTES)?;
        let list = self
            .host
            .query(|q| q.list_sessions(&call, &EmptyRequest {}))
            .map_err(ToolError::plugin)?;
        // Read after the listing: the problems of the look the listing just took.
        let problems = self
            .host
            .query(|q| q.problems(&call, &EmptyRequest {}))
            .map_err(ToolError::plugin)?;
        let ids: Vec<String> = list.iter().map(|r| r.header.id.to_string()).collect();
        let start = match &args.cursor {
            None => 0,
            Some(text) => match cursor::decode(TOOL, print, text)? {
                Position::Sessions { after } => match ids.iter().position(|id| *id == after) {
                    Some(at) => at + 1,
                    None => {
                        return Err(ToolError::new(
                            ErrorCode::SessionQueryStaleCursor,
                            format!(
                                "session {} of the previous page is no longer listed; list again without the cursor",
                                render::quote_id(&after)
                            ),
                        ))
                    }
                },
                other => return Err(wrong_position(TOOL, &other)),
            },
        };
        let caller = self.caller(&args.calling_session_id);
        let keep = |record: &Value| {
            caller.is_none() || record["header"]["id"].as_str() != caller.as_deref()
        };
        let skipped: Vec<Value> = problems.iter().map(render::problem).collect();
        let mut frame = Map::new();
        frame.insert("sessions".into(), json!([]));
        frame.insert("nextCursor".into(), Value::Null);
        insert_bounded(&mut frame, "skipped", skipped, budget / 4);
        let items: Vec<Value> = list.iter().skip(start).map(render::record).collect();
        let cursor_at = |consumed: usize| {
            let last = &ids[start + consumed - 1];
            cursor::encode(
                TOOL,
                print,
                Position::Sessions {
                    after: last.clone(),
                },
            )
        };
        let worst = ids
            .iter()
            .skip(start)
            .map(|id| cursor::encode(TOOL, print, Position::Sessions { after: id.clone() }).len())
            .max();
        Ok(Answer::json(&page(
            frame, "sessions", items, budget, &keep, worst, &cursor_at, None,
        )))
    }

    pub fn read_session(&self, args: ReadSessionArgs, call: Call) -> Result<Answer, ToolError> {
        const TOOL: &str = "read_session";
        let (budget, print) = paging(&args, budget::DEFAULT_MAX_BYTES)?;
        let at = args
            .cursor
            .as_deref()
            .map(|c| cursor::decode(TOOL, print, c))
            .transpose()?;
        let id = args.session_id.as_str();
        let about = |e: PluginError| ToolError::about(e, id);
        let session = SessionRequest {
            session_id: id.to_string(),
        };
        if args.mode != ReadMode::Window
            && (args.seq.is_some() || args.before.is_some() || args.after.is_some())
        {
            return Err(ToolError::invalid(
                "seq, before and after belong to mode \"window\"; give mode \"window\" or leave them out",
            ));
        }
        match args.mode {
            ReadMode::Surface => {
                let surface = self
                    .host
                    .query(|q| q.read_surface(&call, &session))
                    .map_err(about)?;
                let through = surface.captured_through_seq;
                let start = match at {
                    None => 0,
                    Some(Position::Surface { index, through: was }) if was == through => index,
                    Some(Position::Surface { .. }) => {
                        return Err(ToolError::new(
                            ErrorCode::SessionQueryStaleCursor,
                            format!(
                                "the surface of session {} changed since this cursor was made; read it again without the cursor",
                                render::quote_id(id)
                            ),
                        ))
                    }
                    Some(other) => return Err(wrong_position(TOOL, &other)),
                };
                let mut frame = Map::new();
                frame.insert("session".into(), render::header(&surface.session));
                frame.insert("capturedThroughSeq".into(), json!(through));
                frame.insert("events".into(), json!([]));
                frame.insert("nextCursor".into(), Value::Null);
                let items: Vec<Value> = surface
                    .events
                    .iter()
                    .skip(start)
                    .map(|e| render::envelope(e))
                    .collect();
                let total = surface.events.len();
                let cursor_at = |consumed: usize| {
                    cursor::encode(
                        TOOL,
                        print,
                        Position::Surface {
                            index: start + consumed,
                            through,
                        },
                    )
                };
                let worst = cursor_at(total.saturating_sub(start)).len();
                Ok(events_answer(frame, items, budget, worst, &cursor_at))
            }
            ReadMode::Events => {
                let from = match at {
                    None => 0,
                    Some(Position::Events { seq }) => seq,
                    Some(other) => return Err(wrong_position(TOOL, &other)),
                };
                let records = self
                    .host
                    .query(|q| q.list_events(&call, &session))
                    .map_err(about)?;
                let events = self
                    .host
                    .query(|q| q.read_session(&call, &session))
                    .map_err(about)?;
                let texts: std::collections::HashMap<u64, String> = events
                    .events
                    .iter()
                    .filter_map(|e| dsh_codec::log::Event::from_value(render::envelope(e)).ok())
                    .map(|e| (e.seq, dsh_codec::text::event_text(&e)))
                    .collect();
                let items: Vec<Value> = records
                    .iter()
                    .filter(|r| r.seq >= from)
                    .map(|r| {
                        let mut item = render::event_record(r);
                        item["text"] = texts.get(&r.seq).map_or(Value::Null, |t| t.clone().into());
                        item
                    })
                    .collect();
                let mut frame = Map::new();
                frame.insert("session".into(), render::header(&events.session));
                frame.insert("events".into(), json!([]));
                frame.insert("nextCursor".into(), Value::Null);
                events_page(TOOL, print, frame, items, budget)
            }
            ReadMode::Window => {
                let Some(seq) = args.seq else {
                    return Err(ToolError::new(
                        ErrorCode::SessionQueryInvalidWindow,
                        "mode \"window\" needs seq: the event to read around (a search hit's seq)",
                    ));
                };
                let from = match at {
                    None => 0,
                    Some(Position::Events { seq }) => seq,
                    Some(other) => return Err(wrong_position(TOOL, &other)),
                };
                let request = ReadEventRequest {
                    session_id: id.into(),
                    seq,
                    before: args.before.unwrap_or(5),
                    after: args.after.unwrap_or(5),
                };
                let window = self
                    .host
                    .query(|q| q.read_event(&call, &request))
                    .map_err(about)?;
                let items: Vec<Value> = window
                    .events
                    .iter()
                    .map(|e| render::envelope(e))
                    .filter(|e| e["seq"].as_u64().is_none_or(|s| s >= from))
                    .collect();
                let mut frame = Map::new();
                frame.insert("session".into(), render::header(&window.session));
                frame.insert("targetSeq".into(), json!(seq));
                frame.insert("startSeq".into(), json!(window.start_seq));
                frame.insert("endSeq".into(), json!(window.end_seq));
                frame.insert("events".into(), json!([]));
                frame.insert("nextCursor".into(), Value::Null);
                events_page(TOOL, print, frame, items, budget)
            }
        }
    }

    pub fn cite(&self, args: CiteArgs, call: Call) -> Result<Answer, ToolError> {
        const TOOL: &str = "cite";
        let (budget, print) = paging(&args, budget::DEFAULT_CITE_MAX_BYTES)?;
        let (key, offset, cited) = match &args.cursor {
            Some(text) => match cursor::decode(TOOL, print, text)? {
                Position::Cite { key, offset } => {
                    let held = self.citations.lock().unwrap_or_else(|p| p.into_inner());
                    let Some((_, cited)) = held.iter().find(|(k, _)| *k == key) else {
                        return Err(ToolError::new(
                            ErrorCode::SessionQueryStaleCursor,
                            format!(
                                "this citation is no longer held by the server (it keeps the last {HELD_CITATIONS}); cite again without the cursor"
                            ),
                        ));
                    };
                    (key, offset, cited.clone())
                }
                other => return Err(wrong_position(TOOL, &other)),
            },
            None => {
                let cited = Arc::new(self.prepare(&args, call)?);
                let key = self.next_key.fetch_add(1, Ordering::Relaxed);
                let mut held = self.citations.lock().unwrap_or_else(|p| p.into_inner());
                held.push_back((key, cited.clone()));
                while held.len() > HELD_CITATIONS {
                    held.pop_front();
                }
                (key, 0, cited)
            }
        };
        let total = cited.text.len();
        if offset > total || !cited.text.is_char_boundary(offset) {
            return Err(ToolError::new(
                ErrorCode::SessionQueryInvalidCursor,
                "the cursor points outside this citation's text",
            ));
        }
        let meta = |end: usize, next: Option<String>| {
            json!({
                "sources": cited.sources,
                "bytes": total,
                "part": {"from": offset, "to": end},
                "nextCursor": next,
            })
        };
        let worst = cursor::encode(TOOL, print, Position::Cite { key, offset: total });
        let frame = json_len(&meta(total, Some(worst)));
        let room = budget.saturating_sub(frame);
        let mut end = floor_char_boundary(&cited.text, offset.saturating_add(room));
        if end == offset && offset < total {
            // Room for less than one character: give one anyway, so every part makes progress.
            end = (offset + 1..=total)
                .find(|&i| cited.text.is_char_boundary(i))
                .unwrap_or(total);
        }
        let next =
            (end < total).then(|| cursor::encode(TOOL, print, Position::Cite { key, offset: end }));
        Ok(Answer {
            parts: vec![
                cited.text[offset..end].to_string(),
                meta(end, next).to_string(),
            ],
        })
    }

    fn prepare(&self, args: &CiteArgs, call: Call) -> Result<Cited, ToolError> {
        if args.sessions.is_empty() {
            return Err(ToolError::new(
                ErrorCode::SessionReferenceInvalidReference,
                "sessions is empty: name one to three sessions to cite",
            ));
        }
        let caller = self.caller(&args.calling_session_id);
        let call = match &caller {
            Some(id) => call.on_behalf_of(id.clone()),
            None => call,
        };
        let request = json!({
            // No session has an empty id, so without a calling session nothing counts as citing itself.
            "agentSessionId": caller.clone().unwrap_or_default(),
            "content": [],
            "references": args.sessions.iter().map(|id| json!({"sessionId": id})).collect::<Vec<_>>(),
        });
        let prepared: Value = self
            .host
            .resolver(|r| r.prepare(&call, &request))
            .map_err(|e| match args.sessions.iter().max_by_key(|s| s.len()) {
                Some(longest) => ToolError::about(e, longest),
                None => ToolError::plugin(e),
            })?;
        let text = prepared
            .pointer("/additionalContext/content/0/text")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::PluginBadMessage,
                    "the plugin's prepare answer has no context text",
                )
            })?;
        Ok(Cited {
            text: text.to_string(),
            sources: prepared
                .get("summary")
                .cloned()
                .unwrap_or_else(|| json!([])),
        })
    }
}

/// `maxBytes`, checked, or `default`.
fn max_bytes(given: Option<u64>, default: usize) -> Result<usize, ToolError> {
    match given {
        None => Ok(default),
        Some(n) if (budget::MIN_MAX_BYTES as u64..=budget::MAX_MAX_BYTES as u64).contains(&n) => {
            Ok(n as usize)
        }
        Some(n) => Err(ToolError::invalid(format!(
            "maxBytes must be between {} and {}, not {n}",
            budget::MIN_MAX_BYTES,
            budget::MAX_MAX_BYTES
        ))),
    }
}

/// The answer budget (`maxBytes`, or `default`) and the fingerprint a cursor of this call is bound to.
fn paging(args: &impl Paged, default: usize) -> Result<(usize, u64), ToolError> {
    let unpaged = serde_json::to_string(&args.unpaged()).unwrap_or_default();
    Ok((
        max_bytes(args.max_bytes(), default)?,
        cursor::fingerprint(&unpaged),
    ))
}

fn wrong_position(tool: &str, at: &Position) -> ToolError {
    ToolError::new(
        ErrorCode::SessionQueryInvalidCursor,
        format!("this cursor does not continue {tool} ({at:?})"),
    )
}

/// Where a search continues: the plugin cursor, how many of its page's items are delivered, and the
/// resolved `since`.
fn search_position(
    tool: &str,
    print: u64,
    given: &Option<String>,
    since: &Option<String>,
) -> Result<(Option<String>, usize, Option<i64>), ToolError> {
    match given {
        Some(text) => match cursor::decode(tool, print, text)? {
            Position::Search { plugin, skip, from } => Ok((plugin, skip, from)),
            other => Err(wrong_position(tool, &other)),
        },
        None => {
            let from = since
                .as_deref()
                .map(|s| {
                    parse_time(s, host_api::abi::call::now_unix_ms()).map_err(|_| {
                        ToolError::new(
                            ErrorCode::SessionQueryInvalidFilter,
                            format!(
                                "since {s:?} is not a time: give epoch milliseconds, a date like 2026-11-01 or 2026-11-01T09:30Z, or an age like 36h or 7d"
                            ),
                        )
                    })
                })
                .transpose()?;
            Ok((None, 0, from))
        }
    }
}

/// Where one search tool call stands: its answer budget, its place in the plugin's pages (from the
/// cursor, or the start) and the `since` bound it keeps across pages. Both search tools go through it,
/// so they read cursors, build clauses and cut pages alike.
struct Search {
    tool: &'static str,
    print: u64,
    budget: usize,
    plugin: Option<String>,
    skip: usize,
    from: Option<i64>,
}

impl Search {
    fn start(
        tool: &'static str,
        print: u64,
        budget: usize,
        cursor: &Option<String>,
        since: &Option<String>,
    ) -> Result<Self, ToolError> {
        let (plugin, skip, from) = search_position(tool, print, cursor, since)?;
        Ok(Self {
            tool,
            print,
            budget,
            plugin,
            skip,
            from,
        })
    }

    /// The event clauses the arguments ask for, `since` as a time range.
    fn event_filters(
        &self,
        surface: &Option<Vec<Label>>,
        types: &Option<Vec<String>>,
    ) -> Vec<EventFilter> {
        let mut filters = Vec::new();
        if let Some(labels) = surface {
            let labels = labels.iter().filter_map(|l| Surface::parse(l.as_str()));
            filters.push(EventFilter::Surface(labels.collect()));
        }
        if let Some(types) = types {
            filters.push(EventFilter::Type(types.clone()));
        }
        if let Some(from) = self.from {
            filters.push(EventFilter::Time(Range {
                from: Some(from as f64),
                to: None,
            }));
        }
        filters
    }

    /// The plugin's page as the tool answers it, titles added, cut to the budget.
    fn page(
        &self,
        host: &PluginHost,
        plugin_page: &Value,
        method: QueryMethod,
        keep: &dyn Fn(&Value) -> bool,
    ) -> Result<Answer, ToolError> {
        let titles = titles(host, plugin_page, method);
        search_page(
            self.tool,
            self.print,
            plugin_page,
            &titles,
            method,
            self.plugin.clone(),
            self.skip,
            self.from,
            self.budget,
            keep,
        )
    }
}

/// A search page as the command line prints it (`flatten`), from item `skip` on, cut to `budget`.
#[allow(clippy::too_many_arguments)]
fn search_page(
    tool: &str,
    print: u64,
    plugin_page: &Value,
    titles: &HashMap<String, String>,
    method: QueryMethod,
    plugin: Option<String>,
    skip: usize,
    from: Option<i64>,
    budget: usize,
    keep: &dyn Fn(&Value) -> bool,
) -> Result<Answer, ToolError> {
    let flat = flatten(
        plugin_page,
        method,
        titles,
        &Style::detect(ColorChoice::Never),
    );
    let items: Vec<Value> = flat["items"]
        .as_array()
        .map(|a| a.iter().skip(skip).cloned().collect())
        .unwrap_or_default();
    let mut frame = Map::new();
    frame.insert("items".into(), json!([]));
    frame.insert("nextCursor".into(), Value::Null);
    if let Some(session) = flat.get("session") {
        frame.insert("session".into(), session.clone());
    }
    let skipped = flat["skipped"].as_array().cloned().unwrap_or_default();
    insert_bounded(&mut frame, "skipped", skipped, budget / 4);
    let within = |consumed: usize| {
        cursor::encode(
            tool,
            print,
            Position::Search {
                plugin: plugin.clone(),
                skip: skip + consumed,
                from,
            },
        )
    };
    let end = flat["nextCursor"].as_str().map(|next| {
        cursor::encode(
            tool,
            print,
            Position::Search {
                plugin: Some(next.to_string()),
                skip: 0,
                from,
            },
        )
    });
    let worst = Some(
        within(items.len())
            .len()
            .max(end.as_ref().map_or(0, String::len)),
    );
    Ok(Answer::json(&page(
        frame, "items", items, budget, keep, worst, &within, end,
    )))
}

/// A page of events in seq order, continued at the next seq.
fn events_page(
    tool: &str,
    print: u64,
    frame: Map<String, Value>,
    items: Vec<Value>,
    budget: usize,
) -> Result<Answer, ToolError> {
    let seqs: Vec<u64> = items
        .iter()
        .map(|e| e["seq"].as_u64().unwrap_or(0))
        .collect();
    let cursor_at = |consumed: usize| {
        let seq = seqs[consumed - 1].saturating_add(1);
        cursor::encode(tool, print, Position::Events { seq })
    };
    let worst = cursor::encode(tool, print, Position::Events { seq: u64::MAX }).len();
    Ok(events_answer(frame, items, budget, worst, &cursor_at))
}

/// Events, every one kept, cut to `budget` and continued by `cursor_at`; `worst` is the longest cursor
/// the answer may end with.
fn events_answer(
    frame: Map<String, Value>,
    items: Vec<Value>,
    budget: usize,
    worst: usize,
    cursor_at: &dyn Fn(usize) -> String,
) -> Answer {
    Answer::json(&page(
        frame,
        "events",
        items,
        budget,
        &|_| true,
        Some(worst),
        cursor_at,
        None,
    ))
}
