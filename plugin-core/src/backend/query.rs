//! Spec §4's ranking, session clauses, paging and snippets over any [`IndexBackend`]: the backend only
//! finds the matches, so every backend answers a search alike.

use std::cmp::Ordering;
use std::collections::HashMap;

use dsh_codec::surface::Label;
use host_api::abi::{EventFilter, SessionFilter};

use super::lexer::Lexer;
use super::{BackendError, DocMatch, IndexBackend, MatchQuery, StoredSession};
use crate::index::store::{SessionRow, Source};
use crate::search::{rank, snippet};

/// One event hit (spec §4.6), with the collection its session was published into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventHit {
    pub session_id: String,
    pub collection: String,
    pub seq: u64,
    pub kind: String,
    pub time: i64,
    pub label: Label,
    pub snippet: String,
}

/// One session hit: the session and its best event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHit {
    pub session: StoredSession,
    pub best: EventHit,
}

/// A page: `has_more` iff a row past `limit` exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub has_more: bool,
}

/// A normalised search.
#[derive(Debug, Clone, Copy)]
pub struct Search<'a> {
    /// The normalised query phrases: one for spec §4's phrase, one per word for all-words.
    pub phrases: &'a [String],
    pub events: &'a [EventFilter],
    pub limit: u64,
    pub offset: u64,
    pub snippet_chars: usize,
    /// Contract 2.2's `order: "newest"`: the newest matching event first (time, then seq), sessions by
    /// their newest match, ties by session id (bytes); else spec §4.4's ranking.
    pub newest: bool,
}

/// An order of matches.
type Cmp = fn(&DocMatch, &DocMatch) -> Ordering;

/// Newer first: time, then seq.
fn newer(a: &DocMatch, b: &DocMatch) -> Ordering {
    b.time.cmp(&a.time).then(b.seq.cmp(&a.seq))
}

/// Sessions by their newest match: time, session id (bytes), seq.
fn newer_across(a: &DocMatch, b: &DocMatch) -> Ordering {
    b.time
        .cmp(&a.time)
        .then(a.session.as_bytes().cmp(b.session.as_bytes()))
        .then(b.seq.cmp(&a.seq))
}

/// Within a session: `match_count DESC, document_length ASC, time DESC, seq DESC`.
fn within(a: &DocMatch, b: &DocMatch) -> Ordering {
    b.spans
        .cmp(&a.spans)
        .then(a.len.cmp(&b.len))
        .then(b.time.cmp(&a.time))
        .then(b.seq.cmp(&a.seq))
}

/// Across sessions: as [`within`], with the session id (bytes) before the seq.
fn across(a: &DocMatch, b: &DocMatch) -> Ordering {
    b.spans
        .cmp(&a.spans)
        .then(a.len.cmp(&b.len))
        .then(b.time.cmp(&a.time))
        .then(a.session.as_bytes().cmp(b.session.as_bytes()))
        .then(b.seq.cmp(&a.seq))
}

/// The row the shared session clauses read: published sessions are persisted ones.
fn as_row(s: &StoredSession) -> SessionRow {
    SessionRow {
        sid: 0,
        source: Source::Persisted,
        header: s.header.clone(),
        path: None,
        stamp: s.stamp.clone(),
        event_count: s.event_count,
        title: s.title.clone(),
        generation: s.generation,
        visible: true,
        is_live: false,
        is_persisted: true,
    }
}

/// The phrases' tokens, or `None` when one is empty (only punctuation: zero hits, no error).
fn phrase_tokens(
    lexer: &Lexer,
    phrases: &[String],
) -> Result<Option<Vec<Vec<Vec<u8>>>>, BackendError> {
    let mut out = Vec::with_capacity(phrases.len());
    for p in phrases {
        let tokens = lexer.phrase(p)?;
        if tokens.is_empty() {
            return Ok(None);
        }
        out.push(tokens);
    }
    Ok((!out.is_empty()).then_some(out))
}

fn hits(
    backend: &mut dyn IndexBackend,
    lexer: &Lexer,
    phrases: &[Vec<Vec<u8>>],
    page: &[(DocMatch, String)],
    snippet_chars: usize,
) -> Result<Vec<EventHit>, BackendError> {
    let keys: Vec<(String, u64)> = page
        .iter()
        .map(|(m, _)| (m.session.clone(), m.seq))
        .collect();
    let bodies = backend.bodies(&keys)?;
    page.iter()
        .zip(bodies)
        .map(|((m, collection), body)| {
            let marked = lexer.marked(&body.text, &phrases[0])?;
            Ok(EventHit {
                session_id: m.session.clone(),
                collection: collection.clone(),
                seq: m.seq,
                kind: body.kind,
                time: m.time,
                label: body.label,
                snippet: snippet::make_snippet(&marked, snippet_chars),
            })
        })
        .collect()
}

fn window<T>(mut all: Vec<T>, limit: u64, offset: u64) -> (Vec<T>, bool) {
    let offset = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
    all.drain(..offset);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let has_more = all.len() > limit;
    all.truncate(limit);
    (all, has_more)
}

/// `searchSessions` over `backend`: each session's best document, sessions ranked (spec §4.4).
pub fn search_sessions(
    backend: &mut dyn IndexBackend,
    sessions: &[SessionFilter],
    s: &Search<'_>,
) -> Result<Page<SessionHit>, BackendError> {
    let lexer = Lexer::new()?;
    let Some(phrases) = phrase_tokens(&lexer, s.phrases)? else {
        return Ok(Page {
            items: Vec::new(),
            has_more: false,
        });
    };
    let stored: HashMap<String, StoredSession> = backend
        .sessions()?
        .into_iter()
        .filter(|x| rank::session_passes(&as_row(x), sessions))
        .map(|x| (x.header.id.clone(), x))
        .collect();
    let (pick, order): (Cmp, Cmp) = if s.newest {
        (newer, newer_across)
    } else {
        (within, across)
    };
    let mut best: HashMap<String, DocMatch> = HashMap::new();
    for m in backend.matches(&MatchQuery {
        phrases: &phrases,
        events: s.events,
        session: None,
    })? {
        if !stored.contains_key(&m.session) {
            continue;
        }
        match best.get(&m.session) {
            Some(b) if pick(&m, b) != Ordering::Less => {}
            _ => {
                best.insert(m.session.clone(), m);
            }
        }
    }
    let mut ranked: Vec<DocMatch> = best.into_values().collect();
    ranked.sort_by(order);
    let (page, has_more) = window(ranked, s.limit, s.offset);
    let page: Vec<(DocMatch, String)> = page
        .into_iter()
        .map(|m| {
            let c = stored[&m.session].collection.clone();
            (m, c)
        })
        .collect();
    let items = hits(backend, &lexer, &phrases, &page, s.snippet_chars)?
        .into_iter()
        .map(|best| SessionHit {
            session: stored[&best.session_id].clone(),
            best,
        })
        .collect();
    Ok(Page { items, has_more })
}

/// `searchEvents` over `backend`: the target's documents ranked (spec §4.4); `None` when the reader
/// sees no session `id`.
pub fn search_events(
    backend: &mut dyn IndexBackend,
    id: &str,
    s: &Search<'_>,
) -> Result<Option<(StoredSession, Page<EventHit>)>, BackendError> {
    let Some(target) = backend.sessions()?.into_iter().find(|x| x.header.id == id) else {
        return Ok(None);
    };
    let lexer = Lexer::new()?;
    let Some(phrases) = phrase_tokens(&lexer, s.phrases)? else {
        return Ok(Some((
            target,
            Page {
                items: Vec::new(),
                has_more: false,
            },
        )));
    };
    let mut all = backend.matches(&MatchQuery {
        phrases: &phrases,
        events: s.events,
        session: Some(id),
    })?;
    all.sort_by(if s.newest { newer } else { within });
    let (page, has_more) = window(all, s.limit, s.offset);
    let page: Vec<(DocMatch, String)> = page
        .into_iter()
        .map(|m| (m, target.collection.clone()))
        .collect();
    let items = hits(backend, &lexer, &phrases, &page, s.snippet_chars)?;
    Ok(Some((target, Page { items, has_more })))
}
