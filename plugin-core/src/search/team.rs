//! Search over a team's PostgreSQL index (an index given as a `postgresql://` URL): before each search
//! what changed under the sessions root is published into this host's collection
//! ([`backend::publish`]: incremental, and in a long-lived host only on its watch's word), then
//! the search is answered by [`backend::query`] over every collection the server lets this role read,
//! in the same page and hit shape as the embedded index, each hit naming its collection.
//!
//! The rest of the read side goes through the same connection: as the corpus's [`RemoteSessions`],
//! the sessions other collections published join the listing, and an exact read or a citation of a
//! session that is not local answers from its published log (row-level security hides a collection the
//! role may not read, so its sessions are unknown, exactly as an id no one has); `diagnostics` reports
//! every readable collection with what its last publish left out; candidates' titles are the
//! published ones.
//!
//! Cursors are the embedded index's ([`Cursors`]), bound to the request and the server's generation (a
//! session page) or the target session's (an event page), so a publish in between makes them stale.
//! Their key is the server's own random secret (`dsh_meta`, made with the schema) with the collection,
//! so a cursor is tamper-evident, one from another server or database is refused as invalid, and
//! knowing the URL is not enough to forge one (a forged offset would reveal nothing anyway: row-level
//! security decides what any page may hold).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use abi_stable::std_types::RStr;
use dsh_codec::log::{Event, SessionHeader};
use host_api::abi::wire::search::{
    Diagnostics, SessionEventSearchHit, SessionEventSearchPage, SessionEventSearchRequest,
    SessionSearchHit, SessionSearchPage, SessionSearchRequest, Skipped,
};
use host_api::abi::{ErrorCode, EventFilter, HostContextBox, LogLevel, PluginError};

use super::cursor::Cursors;
use super::request::{self, Matching, Mode, Order};
use crate::backend::postgres::PostgresBackend;
use crate::backend::publish::{Published, Publisher};
use crate::backend::query::{self, EventHit};
use crate::backend::{BackendError, IndexBackend};
use crate::config::{Config, LIMIT_CEILING};
use crate::corpus::{RemoteSessions, SessionData};

/// The collection a host publishes into when the config names none: `<user>@<host>`.
pub fn default_collection() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "user".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{user}@{host}")
}

/// One instance's team search: a connection opened on first use and kept.
pub struct TeamSearch {
    url: String,
    collection: String,
    /// Publishes the sessions root (when there is one) into `collection`; taken only under `backend`'s lock.
    publisher: Mutex<Option<Publisher>>,
    default_limit: u64,
    max_limit: u64,
    snippet_chars: usize,
    backend: Mutex<Option<PostgresBackend>>,
}

impl TeamSearch {
    /// Nothing is connected yet: the first search connects (and reports an unreachable server).
    pub fn new(config: &Config, url: &str, root: Option<PathBuf>) -> Self {
        let collection = config.collection.clone().unwrap_or_else(default_collection);
        Self {
            url: url.to_string(),
            publisher: Mutex::new(root.map(|r| Publisher::new(r, &collection, config.long_lived))),
            collection,
            default_limit: config.default_limit,
            max_limit: config.max_limit.min(LIMIT_CEILING),
            snippet_chars: usize::try_from(config.snippet_chars).unwrap_or(usize::MAX),
            backend: Mutex::new(None),
        }
    }

    /// The search both methods run: this instance's snippet width, the request's phrases and page.
    fn search_of<'a>(
        &self,
        phrases: &'a [String],
        events: &'a [EventFilter],
        limit: u64,
        offset: u64,
        mode: Mode,
    ) -> query::Search<'a> {
        query::Search {
            phrases,
            events,
            limit,
            offset,
            snippet_chars: self.snippet_chars,
            newest: mode.order == Order::Newest,
        }
    }

    /// The collection this host publishes into.
    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// Cursors signed with the server's secret, for this collection.
    fn cursors(&self, backend: &PostgresBackend) -> Cursors {
        let mut key = b"dsh-team-cursor\0".to_vec();
        key.extend_from_slice(backend.cursor_secret());
        key.push(0);
        key.extend_from_slice(self.collection.as_bytes());
        Cursors::new(&key)
    }

    fn lock(&self) -> MutexGuard<'_, Option<PostgresBackend>> {
        // A panic mid-search is contained by the service; the connection is reopened if it broke.
        self.backend.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection, opened (and this host's collection created, where the role may) on first use.
    fn connected<'a>(
        &self,
        slot: &'a mut Option<PostgresBackend>,
        host: Option<&HostContextBox>,
    ) -> Result<&'a mut PostgresBackend, PluginError> {
        if slot.is_none() {
            let mut b = PostgresBackend::open(&self.url)?;
            // Creating the collection needs an administrator's rights; a publisher granted an existing
            // collection has none, and its publish says so if it may not write either.
            if let Err(e) = b.create_collection(&self.collection) {
                if let Some(host) = host {
                    host.log(
                        LogLevel::Debug,
                        RStr::from_str(&format!(
                            "collection {:?} was not created here: {e}",
                            self.collection
                        )),
                    );
                }
            }
            *slot = Some(b);
        }
        Ok(slot.as_mut().expect("just opened"))
    }

    /// The connection, publishing the sessions root into this host's collection first.
    fn published<'a>(
        &self,
        slot: &'a mut Option<PostgresBackend>,
        host: &HostContextBox,
    ) -> Result<(&'a mut PostgresBackend, Published), PluginError> {
        let backend = self.connected(slot, Some(host))?;
        let mut publisher = self.publisher.lock().unwrap_or_else(|p| p.into_inner());
        let listings = publisher.as_ref().map(Publisher::listings);
        let published = match publisher.as_mut() {
            Some(publisher) => publisher.publish(backend).map_err(|e| match e {
                BackendError::Failed { server, cause } if server == backend.server() => {
                    BackendError::Failed {
                        server,
                        cause: format!("publishing collection {:?}: {cause}", self.collection),
                    }
                }
                e => e,
            })?,
            None => Published::default(),
        };
        // What this publish left out is kept on the server for every reader's diagnostics, rewritten
        // only when it changed (a log fixed or deleted clears it). A role that may read but not
        // publish is not failed for it: its own publish reports what it could not write. A run that
        // did not list the root (a long-lived host whose watch saw nothing) has nothing new to say.
        if listings.is_some() && listings != publisher.as_ref().map(Publisher::listings) {
            let now = skipped(&published);
            let key = |s: &Skipped| (s.path.clone(), s.id.clone(), s.reason.clone());
            let mut recorded = backend.skipped_of(&self.collection)?;
            recorded.sort_by_key(key);
            let mut sorted = now.clone();
            sorted.sort_by_key(key);
            if sorted != recorded {
                if let Err(e) = backend.record_skipped(&self.collection, &now) {
                    host.log(
                        LogLevel::Debug,
                        RStr::from_str(&format!(
                            "what collection {:?} left out was not recorded: {e}",
                            self.collection
                        )),
                    );
                }
            }
        }
        Ok((backend, published))
    }

    /// `diagnostics`: after publishing, the embedded index's report shape for the server (sessions and
    /// documents this role may read, the generation, every collection's skipped logs, each reason
    /// naming its collection), plus `collection` (this host's) and `collections` (each readable one
    /// with its counts and skipped logs).
    pub fn diagnostics(&self, host: &HostContextBox) -> Result<serde_json::Value, PluginError> {
        let mut slot = self.lock();
        let result = (|| {
            let (backend, published) = self.published(&mut slot, host)?;
            let generation = backend.generation()?;
            let collections = backend.collections()?;
            let report = Diagnostics {
                skipped: collections
                    .iter()
                    .flat_map(|c| {
                        c.skipped.iter().map(|s| Skipped {
                            reason: format!("collection {:?}: {}", c.name, s.reason),
                            ..s.clone()
                        })
                    })
                    .collect(),
                indexed_sessions: collections.iter().map(|c| c.sessions).sum(),
                indexed_events: collections.iter().map(|c| c.documents).sum(),
                generation,
                index_path: backend.server(),
                watching: false,
                whole_reads: published.written as u64,
                resumed_reads: 0,
                sources: Vec::new(),
                index_notes: vec![format!(
                    "a team's PostgreSQL index: this host publishes into collection {:?} and reads {} collection(s)",
                    self.collection,
                    collections.len()
                )],
            };
            let mut value = serde_json::to_value(report).map_err(|e| {
                PluginError::new(
                    ErrorCode::PluginBadMessage,
                    format!("diagnostics: the report could not be encoded: {e}"),
                )
            })?;
            value["collection"] = self.collection.clone().into();
            value["collections"] = collections
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "name": c.name,
                        "sessions": c.sessions,
                        "events": c.documents,
                        "skipped": c.skipped,
                    })
                })
                .collect();
            Ok(value)
        })();
        forget_broken(&mut slot, &result);
        result
    }

    /// Each session's published title text (spec §7.1), for candidates' labels.
    pub fn titles(&self, ids: &[&str]) -> Result<Vec<Option<String>>, PluginError> {
        let mut slot = self.lock();
        let result = (|| {
            let backend = self.connected(&mut slot, None)?;
            let stored: std::collections::HashMap<String, Option<String>> = backend
                .sessions()?
                .into_iter()
                .map(|s| (s.header.id, s.title))
                .collect();
            Ok(ids
                .iter()
                .map(|id| {
                    let title = stored.get(*id)?.as_deref()?;
                    let value: serde_json::Value = serde_json::from_str(title).ok()?;
                    value.get("title")?.as_str().map(str::to_string)
                })
                .collect())
        })();
        forget_broken(&mut slot, &result);
        result
    }

    /// `searchSessions` over every collection this role may read.
    pub fn search_sessions(
        &self,
        host: &HostContextBox,
        req: SessionSearchRequest,
    ) -> Result<SessionSearchPage, PluginError> {
        let sessions = request::session_filters(req.session_filters.as_ref())?;
        let events = request::event_filters(req.event_filters.as_ref(), "eventFilters")?;
        let cursor = request::cursor(req.cursor.as_ref())?;
        let mode = request::mode(req.match_mode.as_ref(), req.order.as_ref())?;
        let query = request::query_in(&req.query, mode.matching)?;
        let limit = request::limit(req.limit.as_ref(), self.default_limit, self.max_limit)?;
        request::check_sessions_budget(&sessions, &events)?;
        let phrases = phrases(&query.text, mode)?;
        let fingerprint = request::fingerprint_in(
            request::fingerprint("sessions", None, &query, &sessions, &events, limit),
            mode,
        );
        let mut slot = self.lock();
        let result = (|| {
            let (backend, published) = self.published(&mut slot, host)?;
            let cursors = self.cursors(backend);
            let generation = backend.generation()?.to_string();
            let offset = match &cursor {
                Some(c) => cursors.decode(c, "sessions", &fingerprint, &generation)?,
                None => 0,
            };
            let page = query::search_sessions(
                backend,
                &sessions,
                &self.search_of(&phrases, &events, limit, offset, mode),
            )?;
            Ok(SessionSearchPage {
                items: page
                    .items
                    .into_iter()
                    .map(|h| SessionSearchHit {
                        header: h.session.header,
                        live: false,
                        persisted: true,
                        title: h.session.title,
                        collection: Some(h.session.collection),
                        best_match: wire_hit(h.best),
                    })
                    .collect(),
                next_cursor: page
                    .has_more
                    .then(|| cursors.encode("sessions", &fingerprint, &generation, offset + limit)),
                skipped: skipped(&published),
            })
        })();
        forget_broken(&mut slot, &result);
        result
    }

    /// `searchEvents` in one session of any collection this role may read.
    pub fn search_events(
        &self,
        host: &HostContextBox,
        req: SessionEventSearchRequest,
    ) -> Result<SessionEventSearchPage, PluginError> {
        let serde_json::Value::String(session_id) = &req.session_id else {
            return Err(PluginError::new(
                ErrorCode::SessionQueryInvalidFilter,
                "session id must be text",
            ));
        };
        let events = request::event_filters(req.filters.as_ref(), "filters")?;
        let cursor = request::cursor(req.cursor.as_ref())?;
        let mode = request::mode(req.match_mode.as_ref(), req.order.as_ref())?;
        let query = request::query_in(&req.query, mode.matching)?;
        let limit = request::limit(req.limit.as_ref(), self.default_limit, self.max_limit)?;
        request::check_events_budget(&events)?;
        let phrases = phrases(&query.text, mode)?;
        let fingerprint = request::fingerprint_in(
            request::fingerprint("events", Some(session_id), &query, &[], &events, limit),
            mode,
        );
        let mut slot = self.lock();
        let result = (|| {
            let (backend, published) = self.published(&mut slot, host)?;
            let cursors = self.cursors(backend);
            // The target's generation is only known after the read, so the cursor is checked against
            // the page's session; a stale one is refused before anything is shown.
            let offset_of = |generation: &str| match &cursor {
                Some(c) => cursors.decode(c, "events", &fingerprint, generation),
                None => Ok(0),
            };
            let target_generation = backend
                .sessions()?
                .into_iter()
                .find(|s| s.header.id == *session_id)
                .map(|s| format!("team:{}", s.generation))
                .ok_or_else(|| not_found(session_id, &backend.server()))?;
            let offset = offset_of(&target_generation)?;
            let (target, page) = query::search_events(
                backend,
                session_id,
                &self.search_of(&phrases, &events, limit, offset, mode),
            )?
            .ok_or_else(|| not_found(session_id, &backend.server()))?;
            Ok(SessionEventSearchPage {
                session: target.header,
                title: target.title,
                items: page.items.into_iter().map(wire_hit).collect(),
                next_cursor: page.has_more.then(|| {
                    cursors.encode("events", &fingerprint, &target_generation, offset + limit)
                }),
                skipped: skipped(&published),
            })
        })();
        forget_broken(&mut slot, &result);
        result
    }
}

/// A failed index call drops the connection, so the next search connects afresh.
fn forget_broken<T>(slot: &mut Option<PostgresBackend>, result: &Result<T, PluginError>) {
    if matches!(result, Err(e) if e.code == ErrorCode::SessionQueryIndexFailed) {
        *slot = None;
    }
}

/// The phrases [`query`] matches: the normalised text, or each of its words for all-words.
fn phrases(text: &str, mode: Mode) -> Result<Vec<String>, PluginError> {
    Ok(match mode.matching {
        Matching::Phrase => vec![text.to_string()],
        Matching::AllWords => text.split(' ').map(str::to_string).collect(),
    })
}

fn not_found(id: &str, server: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQuerySessionNotFound,
        format!("session {id:?} not found in any collection this role may read at {server}"),
    )
}

fn wire_hit(h: EventHit) -> SessionEventSearchHit {
    SessionEventSearchHit {
        session_id: h.session_id,
        seq: h.seq,
        kind: h.kind,
        time: h.time,
        surface: h.label.as_str().to_string(),
        snippet: h.snippet,
        collection: Some(h.collection),
    }
}

/// Logs under the root that could not be published, as the embedded index reports left-out logs.
fn skipped(p: &Published) -> Vec<Skipped> {
    let mut out: Vec<Skipped> = p
        .problems
        .iter()
        .map(|(path, why)| Skipped {
            id: None,
            path: Some(path.clone()),
            code: "SESSION_QUERY_INDEX_FAILED".into(),
            reason: format!("not published: {why}"),
        })
        .collect();
    out.extend(p.conflicts.iter().map(|id| Skipped {
        id: Some(id.clone()),
        path: None,
        code: "SESSION_QUERY_INDEX_FAILED".into(),
        reason: "not published: another collection already holds this session id".into(),
    }));
    out
}

/// The corpus's view of the server: sessions of the other collections this role may read. This host's
/// own collection is its sessions root, so its published copies are never listed or loaded from here
/// (one the root no longer holds is a removal the next publish makes).
impl RemoteSessions for TeamSearch {
    fn list(&self) -> Result<Vec<SessionHeader>, PluginError> {
        let mut slot = self.lock();
        let result = (|| {
            let backend = self.connected(&mut slot, None)?;
            let server = backend.server();
            backend
                .published_headers(&self.collection)?
                .into_iter()
                .map(|(collection, line)| header_of(&line, &collection, &server))
                .collect()
        })();
        forget_broken(&mut slot, &result);
        result
    }

    fn load(&self, id: &str) -> Result<Option<SessionData>, PluginError> {
        let mut slot = self.lock();
        let result = (|| {
            let backend = self.connected(&mut slot, None)?;
            let server = backend.server();
            let Some((collection, header, events)) = backend.published_log(id)? else {
                return Ok(None);
            };
            if collection == self.collection {
                return Ok(None);
            }
            let header = header_of(&header, &collection, &server)?;
            let events = events
                .iter()
                .enumerate()
                .map(|(n, line)| {
                    serde_json::from_str(line)
                        .map_err(|e| e.to_string())
                        .and_then(|v| Event::from_value(v).map_err(|e| e.to_string()))
                        .map(std::sync::Arc::new)
                        .map_err(|why| {
                            corrupt(
                                id,
                                &collection,
                                &server,
                                &format!("published event {n} does not read: {why}"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(SessionData::new(header, events)))
        })();
        forget_broken(&mut slot, &result);
        result
    }
}

fn header_of(line: &str, collection: &str, server: &str) -> Result<SessionHeader, PluginError> {
    SessionHeader::parse(line.as_bytes(), false)
        .map(|(h, _)| h)
        .map_err(|e| {
            corrupt(
                "?",
                collection,
                server,
                &format!("a published header does not read: {e}"),
            )
        })
}

fn corrupt(id: &str, collection: &str, server: &str, why: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryCorruptSession,
        format!("session {id:?} of collection {collection:?} at {server}: {why}"),
    )
}
