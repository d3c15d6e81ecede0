//! Search over a team's PostgreSQL index (an index given as a `postgresql://` URL): before each search
//! what changed under the sessions root is published into this host's collection
//! ([`backend::publish`]: incremental, and in a long-lived host only on its watch's word), then
//! the search is answered by [`backend::query`] over every collection the server lets this role read,
//! in the same page and hit shape as the embedded index, each hit naming its collection.
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
use host_api::abi::wire::search::{
    SessionEventSearchHit, SessionEventSearchPage, SessionEventSearchRequest, SessionSearchHit,
    SessionSearchPage, SessionSearchRequest, Skipped,
};
use host_api::abi::{ErrorCode, HostContextBox, LogLevel, PluginError};

use super::cursor::Cursors;
use super::request::{self, Matching, Mode, Order};
use crate::backend::postgres::PostgresBackend;
use crate::backend::publish::{Published, Publisher};
use crate::backend::query::{self, EventHit};
use crate::backend::{BackendError, IndexBackend};
use crate::config::{Config, LIMIT_CEILING};

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

fn unsupported(what: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryInvalidQuery,
        format!("{what} is not supported with a PostgreSQL index yet"),
    )
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

    /// The connection, publishing the sessions root into this host's collection first.
    fn published<'a>(
        &self,
        slot: &'a mut Option<PostgresBackend>,
        host: &HostContextBox,
    ) -> Result<(&'a mut PostgresBackend, Published), PluginError> {
        if slot.is_none() {
            let mut b = PostgresBackend::open(&self.url)?;
            // Creating the collection needs an administrator's rights; a publisher granted an existing
            // collection has none, and its publish below says so if it may not write either.
            if let Err(e) = b.create_collection(&self.collection) {
                host.log(
                    LogLevel::Debug,
                    RStr::from_str(&format!(
                        "collection {:?} was not created here: {e}",
                        self.collection
                    )),
                );
            }
            *slot = Some(b);
        }
        let backend = slot.as_mut().expect("just opened");
        let mut publisher = self.publisher.lock().unwrap_or_else(|p| p.into_inner());
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
        Ok((backend, published))
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
                &query::Search {
                    phrases: &phrases,
                    events: &events,
                    limit,
                    offset,
                    snippet_chars: self.snippet_chars,
                },
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
                &query::Search {
                    phrases: &phrases,
                    events: &events,
                    limit,
                    offset,
                    snippet_chars: self.snippet_chars,
                },
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
    if mode.order == Order::Newest {
        return Err(unsupported("order \"newest\""));
    }
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
