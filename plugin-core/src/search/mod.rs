//! Session search (spec §4, DESIGN.md "Data flow: a search"): `search_sessions` across sessions,
//! `search_events` inside one, `diagnostics` and the indexed `titles`, as plain Rust entry points the
//! service wires to the ABI.
//!
//! Every call is serialised on one lock and runs: normalise the request (spec §4.2, first failure wins)
//! → bring the index up to date ([`refresh`]) → decode the cursor → check the predicate budgets → one
//! FTS5 query (or, for a phrase materialised in `index::hot` and no event clauses, a range scan of its
//! ranking keys that stops once the page is ranked; a scan matching many documents materialises its
//! phrase) → snippets for the page's hits only → a page with an opaque cursor and the `skipped` report.
//! A page therefore never mixes generations.
//!
//! Where this differs from the reference on purpose (DESIGN.md deviation 2): a session left out of search
//! is reported in every page's `skipped` instead of failing the search, and `search_events` on such a
//! session names why (`SESSION_QUERY_SOURCE_CONFLICT` for a conflicting live/disk pair,
//! `SESSION_QUERY_PERSISTENCE_FAILED` for an unreadable log) rather than `SESSION_QUERY_SESSION_NOT_FOUND`.
//!
//! A `Search` owns its index file (and its owner lock) for its whole life; nothing else in the process
//! may open the same index path.
//!
//! Module map: [`request`] (normalisation, budgets, fingerprints), [`refresh`] (incremental indexing),
//! [`sql`] (the statements), [`rank`] (session clauses and cross-session ranking), [`snippet`] (`makeSnippet`), [`cursor`] (MAC-protected cursors). The index
//! file itself is `crate::index`.

pub mod cursor;
mod newest;
pub mod rank;
pub mod refresh;
pub mod request;
pub mod snippet;
pub mod sql;

#[cfg(test)]
mod fresh_tests;
#[cfg(test)]
mod hot_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use host_api::abi::wire::search::{
    Diagnostics, HitHeader, SessionEventSearchHit, SessionEventSearchPage,
    SessionEventSearchRequest, SessionSearchHit, SessionSearchPage, SessionSearchRequest,
    SourceDiagnostic,
};
use host_api::abi::{ErrorCode, HostContextBox, PluginError};
use rusqlite::Connection;

use crate::config::{Config, OpenAt, LIMIT_CEILING};
use crate::corpus::Corpus;
use crate::index::store::{self, label_of, RowKey, SessionRow, Source};
use crate::index::tokens::Tokenizer;
use crate::index::{cjk, hot, Index};
use crate::sources::SourceKind;
use refresh::{aborted, Engine};

/// The search config keys (spec §4.9).
#[derive(Debug, Clone, Copy)]
struct Limits {
    default_limit: u64,
    max_limit: u64,
    snippet_chars: usize,
}

enum State {
    /// `openAt: never`.
    Disabled,
    /// `openAt: first-search`, not yet opened.
    Pending,
    Open(Box<Engine>),
    /// A failed open, remembered (spec §4.9: the readiness promise is memoised).
    Failed(PluginError),
}

/// One session's title as the index holds it (spec §7.1).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedTitle {
    pub header: HitHeader,
    pub live: bool,
    /// `{title, messageSeqs, source, eventSeq, updatedAt}`; `None` without a title event.
    pub title: Option<serde_json::Value>,
    /// Why the title event could not be folded (the candidate label then falls back to the id).
    pub error: Option<String>,
}

impl IndexedTitle {
    /// The title text, when there is a valid one.
    pub fn text(&self) -> Option<&str> {
        self.title.as_ref()?.get("title")?.as_str()
    }
}

/// The session search of one plugin instance.
pub struct Search {
    limits: Limits,
    index_path: PathBuf,
    host: Arc<HostContextBox>,
    state: Mutex<State>,
    /// `longLived` of the config: whether the engine watches the root.
    long_lived: bool,
}

fn no_progress(_: u64, _: u64) {}

fn index_failed(what: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!("session search index failed: {what}"),
    )
}

impl Search {
    /// Opens the index at `index_path` now (`openAt: startup`), on first search (`first-search`) or never.
    pub fn open(
        config: &Config,
        index_path: &Path,
        host: Arc<HostContextBox>,
    ) -> Result<Self, PluginError> {
        let limits = Limits {
            default_limit: config.default_limit,
            max_limit: config.max_limit.min(LIMIT_CEILING),
            snippet_chars: usize::try_from(config.snippet_chars).unwrap_or(usize::MAX),
        };
        let state = match config.open_at {
            OpenAt::Never => State::Disabled,
            OpenAt::FirstSearch => State::Pending,
            OpenAt::Startup => State::Open(Box::new(
                Engine::new(Index::open(index_path, host.clone())?)?.long_lived(config.long_lived),
            )),
        };
        Ok(Self {
            limits,
            index_path: index_path.to_path_buf(),
            host,
            state: Mutex::new(state),
            long_lived: config.long_lived,
        })
    }

    /// The logs the open index holds, each with the revision and header it was indexed at, for a
    /// listing that must not open unchanged logs ([`Corpus::seed_known`]). Empty when the index is
    /// not open yet.
    pub fn known_listing(&self) -> Vec<host_api::log::layout::ListedSession> {
        match &*self.lock() {
            State::Open(engine) => engine.known_listing(),
            _ => Vec::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside a search is contained by the service; the engine's state is re-derived from the
        // database by the next refresh, so a poisoned lock is taken over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The open engine, opening it first for `first-search`; `SEARCH_DISABLED` for `never`.
    fn engine<'a>(&self, state: &'a mut State) -> Result<&'a mut Engine, PluginError> {
        if let State::Pending = state {
            *state = match Index::open(&self.index_path, self.host.clone()).and_then(Engine::new) {
                Ok(engine) => State::Open(Box::new(engine.long_lived(self.long_lived))),
                Err(e) => State::Failed(e),
            };
        }
        match state {
            State::Open(engine) => Ok(engine),
            State::Failed(e) => Err(e.clone()),
            State::Disabled => Err(disabled()),
            State::Pending => Err(index_failed("index is not open")),
        }
    }

    fn check_enabled(&self, state: &State) -> Result<(), PluginError> {
        match state {
            State::Disabled => Err(disabled()),
            _ => Ok(()),
        }
    }

    /// Brings the index up to date, reporting `progress(done, total)` over the sessions to (re)index.
    /// Every search does this itself; a host calls it to draw a progress bar (e.g. the first build).
    pub fn refresh(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(), PluginError> {
        let mut state = self.lock();
        self.engine(&mut state)?
            .refresh(corpus, cancelled, progress)
    }

    /// `searchSessions` (spec §4): the best-matching event of each matching session, ranked.
    pub fn search_sessions(
        &self,
        corpus: &Corpus,
        req: SessionSearchRequest,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<SessionSearchPage, PluginError> {
        let mut state = self.lock();
        self.check_enabled(&state)?;
        let sessions = request::session_filters(req.session_filters.as_ref())?;
        let events = request::event_filters(req.event_filters.as_ref(), "eventFilters")?;
        let cursor = request::cursor(req.cursor.as_ref())?;
        let mode = request::mode(req.match_mode.as_ref(), req.order.as_ref())?;
        let query = request::query_in(&req.query, mode.matching)?;
        let limit = request::limit(
            req.limit.as_ref(),
            self.limits.default_limit,
            self.limits.max_limit,
        )?;
        let engine = self.engine(&mut state)?;
        engine.refresh(corpus, cancelled, &no_progress)?;
        let fingerprint = request::fingerprint_in(
            request::fingerprint("sessions", None, &query, &sessions, &events, limit),
            mode,
        );
        let generation = engine.generation.to_string();
        let offset = match &cursor {
            Some(c) => engine
                .cursors
                .decode(c, "sessions", &fingerprint, &generation)?,
            None => 0,
        };
        request::check_sessions_budget(&sessions, &events)?;
        if cancelled() {
            return Err(aborted());
        }
        // The rows a hit may come from, restricted to those `wanted` (sessions that matched).
        let rows = &engine.rows;
        let candidates = |wanted: &dyn Fn(i64) -> bool| -> HashMap<i64, &SessionRow> {
            rows.values()
                .filter(|r| wanted(r.sid) && r.visible && rank::session_passes(r, &sessions))
                .map(|r| (r.sid, r))
                .collect()
        };
        let sql = sql::matches_query(&query.phrase, &events);
        let conn = engine
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        // Enough of the ranking for this page and whether another follows.
        let need =
            usize::try_from(offset.saturating_add(limit).saturating_add(1)).unwrap_or(usize::MAX);
        // The materialised phrases hold spec §4.4's ranking of a phrase; other modes scan.
        let hot_id = if events.is_empty() && mode.is_spec() {
            hot::phrase_id(conn, &query.phrase).map_err(index_failed)?
        } else {
            None
        };
        let every_candidate;
        let ranked = match hot_id {
            Some(id) => {
                every_candidate = candidates(&|_| true);
                hot_ranked(conn, id, &every_candidate, need, cancelled)?
            }
            None if mode.order == request::Order::Newest => {
                let newest = newest::scan(conn, &sql, cancelled)?;
                let matched_candidates = candidates(&|sid| newest.contains_key(&sid));
                newest::ranked(newest, &matched_candidates)
            }
            None => {
                let (best, matched) = scan(conn, &sql, cancelled)?;
                if events.is_empty() && mode.is_spec() && matched >= hot::MIN_MATCHES {
                    hot::materialise(conn, &query.phrase, matched).map_err(index_failed)?;
                }
                let matched_candidates = candidates(&|sid| best.contains(sid));
                best.ranked(&matched_candidates)
            }
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(ranked.len());
        let page = &ranked[start..];
        let more = page.len() as u64 > limit;
        let page = &page[..page.len().min(limit as usize)];
        let mut hits = Vec::with_capacity(page.len());
        for (m, row) in page {
            let rowid = store::doc_rowid(m.sid, m.seq).ok_or_else(|| {
                index_failed(format!("document {}:{} has no rowid", m.sid, m.seq))
            })?;
            hits.push((doc_hit(conn, rowid)?, *row));
        }
        let snippets = snippets(
            conn,
            snippet_text(&query, mode),
            hits.iter().map(|(h, _)| h.rowid),
            self.limits.snippet_chars,
        )?;
        let items = hits
            .into_iter()
            .zip(snippets)
            .map(|((hit, row), snippet)| SessionSearchHit {
                best_match: hit.into_hit(&row.header.id, snippet),
                header: row.header.clone(),
                live: row.is_live,
                persisted: row.is_persisted,
            })
            .collect();
        Ok(SessionSearchPage {
            items,
            next_cursor: more.then(|| {
                engine
                    .cursors
                    .encode("sessions", &fingerprint, &generation, offset + limit)
            }),
            skipped: engine.skipped.clone(),
        })
    }

    /// `searchEvents` (spec §4): matching events of one session, ranked.
    pub fn search_events(
        &self,
        corpus: &Corpus,
        req: SessionEventSearchRequest,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<SessionEventSearchPage, PluginError> {
        let mut state = self.lock();
        self.check_enabled(&state)?;
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
        let limit = request::limit(
            req.limit.as_ref(),
            self.limits.default_limit,
            self.limits.max_limit,
        )?;
        let engine = self.engine(&mut state)?;
        engine.refresh(corpus, cancelled, &no_progress)?;
        let target = target(engine, session_id)?;
        let fingerprint = request::fingerprint_in(
            request::fingerprint("events", Some(session_id), &query, &[], &events, limit),
            mode,
        );
        let generation = format!("{}:{}", target.source.as_str(), target.generation);
        let offset = match &cursor {
            Some(c) => engine
                .cursors
                .decode(c, "events", &fingerprint, &generation)?,
            None => 0,
        };
        request::check_events_budget(&events)?;
        if cancelled() {
            return Err(aborted());
        }
        let sql = sql::events_query_in(
            &query.phrase,
            target.sid,
            &events,
            limit + 1,
            offset,
            mode.order,
        );
        let conn = engine
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let hot_id = if events.is_empty() && mode.is_spec() {
            hot::phrase_id(conn, &query.phrase).map_err(index_failed)?
        } else {
            None
        };
        let mut rows = match hot_id {
            Some(id) => hot_events(conn, id, target.sid, limit + 1, offset)?,
            None => run(conn, &sql, hit_columns)?,
        };
        let more = rows.len() as u64 > limit;
        rows.truncate(limit as usize);
        let snippets = snippets(
            conn,
            snippet_text(&query, mode),
            rows.iter().map(|h| h.rowid),
            self.limits.snippet_chars,
        )?;
        let items = rows
            .into_iter()
            .zip(snippets)
            .map(|(hit, snippet)| hit.into_hit(session_id, snippet))
            .collect();
        Ok(SessionEventSearchPage {
            session: target.header.clone(),
            items,
            next_cursor: more.then(|| {
                engine
                    .cursors
                    .encode("events", &fingerprint, &generation, offset + limit)
            }),
            skipped: engine.skipped.clone(),
        })
    }

    /// What is indexed and what was left out, after bringing the index up to date.
    pub fn diagnostics(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Diagnostics, PluginError> {
        let mut state = self.lock();
        let engine = self.engine(&mut state)?;
        engine.refresh(corpus, cancelled, &no_progress)?;
        let conn = engine
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let indexed_events = store::visible_doc_count(conn).map_err(index_failed)?;
        let mut ids: Vec<&str> = engine
            .rows
            .values()
            .filter(|r| r.visible)
            .map(|r| r.header.id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut folders: Vec<(SourceKind, std::path::PathBuf)> = corpus
            .sessions_root()
            .map(|r| (SourceKind::Dsh, r.to_path_buf()))
            .into_iter()
            .collect();
        folders.extend(
            corpus
                .sources()
                .roots()
                .each()
                .into_iter()
                .map(|(k, p)| (k, p.to_path_buf())),
        );
        let sources = folders
            .into_iter()
            .map(|(kind, path)| SourceDiagnostic {
                source: kind.as_str().to_string(),
                exists: path.is_dir(),
                path: path.display().to_string(),
                indexed_sessions: ids
                    .iter()
                    .filter(|id| SourceKind::of_id(id) == kind)
                    .count() as u64,
            })
            .collect();
        Ok(Diagnostics {
            sources,
            skipped: engine.skipped.clone(),
            indexed_sessions: ids.len() as u64,
            indexed_events,
            generation: engine.generation,
            index_path: self.index_path.display().to_string(),
            watching: engine.is_watching(),
            whole_reads: engine.reads.whole,
            resumed_reads: engine.reads.resumed,
        })
    }

    /// Every searchable session's title as indexed (spec §7.1), by session id: read from the index,
    /// never from the logs (citation candidates list every session).
    pub fn titles(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, IndexedTitle>, PluginError> {
        let mut state = self.lock();
        let engine = self.engine(&mut state)?;
        engine.refresh(corpus, cancelled, &no_progress)?;
        Ok(engine
            .rows
            .values()
            .filter(|r| r.visible)
            .map(|r| (r.header.id.clone(), indexed_title(r)))
            .collect())
    }
}

fn indexed_title(row: &SessionRow) -> IndexedTitle {
    let parsed: Option<serde_json::Value> = row
        .title
        .as_deref()
        .and_then(|t| serde_json::from_str(t).ok());
    let error = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| e.as_str())
        .map(String::from);
    IndexedTitle {
        header: row.header.clone(),
        live: row.source == Source::Live,
        title: if error.is_some() { None } else { parsed },
        error,
    }
}

fn disabled() -> PluginError {
    PluginError::new(
        ErrorCode::SessionQuerySearchDisabled,
        "session search is disabled (openAt: never)",
    )
}

/// The row `searchEvents` searches: the live row when the session is live, else its visible disk row.
fn target<'a>(engine: &'a Engine, id: &str) -> Result<&'a SessionRow, PluginError> {
    if let Some(row) = engine
        .rows
        .get(&RowKey::Live(id.to_string()))
        .filter(|r| r.visible)
    {
        return Ok(row);
    }
    if let Some(row) = engine
        .rows
        .values()
        .find(|r| r.visible && r.source == Source::Persisted && r.header.id == id)
    {
        return Ok(row);
    }
    if let Some(s) = engine.skipped.iter().find(|s| s.id.as_deref() == Some(id)) {
        let code = if s.code == ErrorCode::SessionQuerySourceConflict.as_str() {
            ErrorCode::SessionQuerySourceConflict
        } else {
            ErrorCode::SessionQueryPersistenceFailed
        };
        return Err(PluginError::new(
            code,
            format!("session {id:?} is left out of search: {}", s.reason),
        ));
    }
    Err(PluginError::new(
        ErrorCode::SessionQuerySessionNotFound,
        format!("session {id:?} not found: it is neither live nor in the sessions root"),
    ))
}

/// The hit columns of one result row.
struct HitRow {
    rowid: i64,
    seq: u64,
    kind: String,
    time: i64,
    surface: i64,
}

impl HitRow {
    fn into_hit(self, session_id: &str, snippet: String) -> SessionEventSearchHit {
        SessionEventSearchHit {
            session_id: session_id.to_string(),
            seq: self.seq,
            kind: self.kind,
            time: self.time,
            surface: label_of(self.surface).as_str().to_string(),
            snippet,
        }
    }
}

/// Sessions' best matches with their rows, in rank order.
type Ranked<'a> = Vec<(rank::Match, &'a SessionRow)>;

/// The first `need` sessions of the ranking from a materialised phrase's rows (`index::hot`); checks for
/// cancellation every few thousand rows.
fn hot_ranked<'a>(
    conn: &Connection,
    id: i64,
    candidates: &'a HashMap<i64, &'a SessionRow>,
    need: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Ranked<'a>, PluginError> {
    let mut prefix = rank::Prefix::new(candidates, need);
    let mut seen = 0u64;
    let mut stopped = false;
    hot::ranked(conn, id, |h| {
        seen += 1;
        if seen.is_multiple_of(4096) && cancelled() {
            stopped = true;
            return false;
        }
        prefix.offer(hot_match(h))
    })
    .map_err(index_failed)?;
    if stopped {
        return Err(aborted());
    }
    Ok(prefix.ranked())
}

/// A page (and one more) of session row `sid`'s matches from a materialised phrase's rows, ranked as
/// `sql::events_query` ranks them.
fn hot_events(
    conn: &Connection,
    id: i64,
    sid: i64,
    limit_plus_one: u64,
    offset: u64,
) -> Result<Vec<HitRow>, PluginError> {
    let (lo, hi) = store::rowid_range(sid);
    let mut hits = hot::in_range(conn, id, lo, hi).map_err(index_failed)?;
    // The rowid order within one session is the seq order.
    hits.sort_unstable_by(|a, b| {
        b.spans
            .cmp(&a.spans)
            .then(a.len.cmp(&b.len))
            .then(b.time.cmp(&a.time))
            .then(b.doc.cmp(&a.doc))
    });
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(hits.len());
    let end = start.saturating_add(usize::try_from(limit_plus_one).unwrap_or(usize::MAX));
    hits[start..end.min(hits.len())]
        .iter()
        .map(|h| doc_hit(conn, h.doc))
        .collect()
}

fn hot_match(h: hot::HotHit) -> rank::Match {
    rank::Match {
        sid: h.doc >> 32,
        seq: (h.doc as u64) & store::SEQ_MASK,
        time: h.time,
        len: h.len,
        spans: h.spans,
    }
}

/// Runs the cross-session scan, keeping each session's best match as rows stream by; checks for
/// cancellation every few thousand rows. Also returns how many documents matched.
fn scan(
    conn: &Connection,
    sql: &sql::Sql,
    cancelled: &dyn Fn() -> bool,
) -> Result<(rank::Best, u64), PluginError> {
    let mut stmt = conn.prepare_cached(&sql.text).map_err(index_failed)?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(sql.params.iter()))
        .map_err(index_failed)?;
    let mut best = rank::Best::new();
    let mut seen = 0u64;
    while let Some(r) = rows.next().map_err(index_failed)? {
        seen += 1;
        if seen.is_multiple_of(4096) && cancelled() {
            return Err(aborted());
        }
        best.offer(rank::Match {
            sid: r.get(0).map_err(index_failed)?,
            seq: r.get::<_, i64>(1).map_err(index_failed)? as u64,
            time: r.get(2).map_err(index_failed)?,
            len: r.get(3).map_err(index_failed)?,
            spans: r.get(4).map_err(index_failed)?,
        });
    }
    Ok((best, seen))
}

/// The text a snippet is centred on: the phrase, or for all-words the first word (every hit has it).
fn snippet_text(query: &request::Query, mode: request::Mode) -> &str {
    match mode.matching {
        request::Matching::Phrase => &query.text,
        request::Matching::AllWords => query.text.split(' ').next().unwrap_or(&query.text),
    }
}

/// The hit columns of document `rowid`.
fn doc_hit(conn: &Connection, rowid: i64) -> Result<HitRow, PluginError> {
    conn.query_row(
        "SELECT rowid, seq, type, time, surface FROM docs WHERE rowid = ?1",
        [rowid],
        hit_columns,
    )
    .map_err(index_failed)
}

fn hit_columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<HitRow> {
    Ok(HitRow {
        rowid: r.get(0)?,
        seq: r.get::<_, i64>(1)? as u64,
        kind: r.get(2)?,
        time: r.get(3)?,
        surface: r.get(4)?,
    })
}

fn run<T>(
    conn: &Connection,
    sql: &sql::Sql,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, PluginError> {
    let mut stmt = conn.prepare_cached(&sql.text).map_err(index_failed)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(sql.params.iter()), map)
        .map_err(index_failed)?;
    rows.collect::<Result<Vec<T>, _>>().map_err(index_failed)
}

/// Snippets for the page's documents, in order: each stored text is CJK-split as in the index, the
/// phrase's first match is found with the index's tokenizer (`index::tokens`) and marked where
/// `highlight()` would put its first marker, the separators are stripped and `makeSnippet` cuts it.
fn snippets(
    conn: &Connection,
    query_text: &str,
    rowids: impl Iterator<Item = i64>,
    max_chars: usize,
) -> Result<Vec<String>, PluginError> {
    let tokenizer = Tokenizer::new(conn, cjk::TOKENIZE).map_err(index_failed)?;
    let phrase = tokenizer
        .phrase_tokens(&cjk::split(query_text))
        .map_err(index_failed)?;
    let mut read = conn
        .prepare_cached("SELECT text, len FROM docs WHERE rowid = ?1")
        .map_err(index_failed)?;
    rowids
        .map(|rowid| {
            let (stored, len): (Vec<u8>, i64) = read
                .query_row([rowid], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| index_failed(format!("document {rowid}: {e}")))?;
            let text = store::unpack_text(&stored, len.max(0) as usize)
                .map_err(|e| index_failed(format!("document {rowid} does not unpack: {e}")))?;
            let split = cjk::split(&text);
            let marked = match tokenizer
                .first_match(&split, &phrase)
                .map_err(index_failed)?
            {
                Some(at) => {
                    let mut marked = String::with_capacity(split.len() + 3);
                    marked.push_str(&cjk::unsplit(&split[..at]));
                    marked.push(snippet::OPEN);
                    marked.push_str(&cjk::unsplit(&split[at..]));
                    marked
                }
                // Every hit matched the same phrase in the index; the plain text is a fallback only.
                None => text.clone(),
            };
            Ok(snippet::make_snippet(&marked, max_chars))
        })
        .collect()
}

#[cfg(test)]
mod sources_tests;
