//! The exact reads of spec §5 over the merged [`Corpus`]: listings, whole-session reads, labelled event
//! lists, the current surface, event windows, traces, filters and titles.
//!
//! Every read loads the session through the corpus (live wins; a persisted log as inspected, closers
//! included) and labels events only through `dsh_codec::surface`. Error codes follow spec §4.11: an
//! unknown id is `SESSION_NOT_FOUND`, a fold failure `INVALID_SURFACE` (message prefix
//! "invalid session surface: "), a tripped cancellation token `SESSION_QUERY_ABORTED` (DSH rejects with the
//! signal's reason, which has no code across this ABI). Messages name the session id, and the log's path
//! for a persisted session.
//!
//! Orderings are deterministic, not JavaScript's (DESIGN.md deviation 5): ids tie-break in byte order
//! (Rust `str` ordering), where DSH uses `localeCompare`.
//!
//! Submodules: `filters` (materialising and applying filters, the literal text scan), `lineage`
//! (`traceSession`), `titles` (the title fold and batch).

mod filters;
mod lineage;
mod titles;
// The search index folds titles as it indexes, so candidates never re-read every log.
pub(crate) use titles::{title_in, title_of, TITLE_EVENT};

#[cfg(test)]
mod tests;

use std::cmp::Ordering;

use dsh_codec::json::safe_uint;
use dsh_codec::log::Event;
use dsh_codec::surface::{Label, SurfaceFold};
use host_api::abi::*;
use serde_json::Value;

use crate::cancel::Cancel;
use crate::corpus::{Corpus, CorpusSession, LoadedSession, STOP_CHECK_EVERY};

/// The exact-read half of the session query service.
pub struct Reads {
    corpus: Corpus,
    read_window_max: u64,
}

impl Reads {
    pub fn new(corpus: Corpus, read_window_max: u64) -> Self {
        Self {
            corpus,
            read_window_max,
        }
    }

    /// The corpus the reads run over (the index reconciles against the same one).
    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// `listSessions`: every session, `createdAt` descending, then id ascending (byte order).
    pub fn list_sessions(&self, cancel: Cancel<'_>) -> Result<Vec<SessionRecord>, PluginError> {
        let sessions = self.corpus.list(cancel)?;
        // Sorted by position, then each session moved into its record: sorting the sessions
        // themselves moved 10,000 headers around a large root's listing several times over, and
        // records made from borrowed sessions copied every string of every header once more.
        let mut order: Vec<usize> = (0..sessions.len()).collect();
        order.sort_by(|&a, &b| newest_first(&sessions[a], &sessions[b]));
        let mut sessions: Vec<Option<CorpusSession>> = sessions.into_iter().map(Some).collect();
        Ok(order
            .into_iter()
            .filter_map(|i| sessions[i].take())
            .map(|s| SessionRecord {
                header: Header::from(s.header),
                live: s.live,
                persisted: s.persisted,
            })
            .collect())
    }

    /// `readSession`: the header and every event as JSON text (a persisted log as inspected: stored events
    /// with legacy shapes upgraded, then crash closers). The log must fold, as DSH's replay validation
    /// requires.
    pub fn read_session(&self, id: &str, cancel: Cancel<'_>) -> Result<SessionEvents, PluginError> {
        let session = self.corpus.load(id, cancel)?;
        fold_of(&session)?;
        let mut events = Vec::with_capacity(session.data.events().len());
        for (n, e) in session.data.events().iter().enumerate() {
            stop_point(cancel, n, "readSession")?;
            events.push(e.to_json_line());
        }
        Ok(SessionEvents {
            session: Header::from(session.header()),
            events,
        })
    }

    /// `filterSessions`: `listSessions` narrowed by `filters`, in the same order. Filters are checked
    /// before anything is read.
    pub fn filter_sessions(
        &self,
        filters: &[SessionFilter],
        cancel: Cancel<'_>,
    ) -> Result<Vec<SessionRecord>, PluginError> {
        filters::check_session_filters(filters)?;
        let records = self.list_sessions(cancel)?;
        Ok(records
            .into_iter()
            .filter(|r| filters::session_matches(filters, r))
            .collect())
    }

    /// `filterEvents`: the session's documents (events with non-empty text, spec §3) narrowed by the
    /// metadata clauses and the literal text scan. Ranges are checked before the session is loaded; a
    /// blank text clause is refused once it is (as in DSH, where it is raised when the scan starts).
    pub fn filter_events(
        &self,
        id: &str,
        filters: &[EventScanFilter],
        cancel: Cancel<'_>,
    ) -> Result<Vec<EventDocument>, PluginError> {
        filters::check_event_ranges(filters)?;
        let session = self.corpus.load(id, cancel)?;
        let fold = fold_of(&session)?;
        let matcher = filters::EventMatcher::new(filters, &session)?;
        let sid = session.header().id.clone();
        let mut out = Vec::new();
        for (n, event) in session.data.events().iter().enumerate() {
            stop_point(cancel, n, "filterEvents")?;
            let text = dsh_codec::text::event_text(event);
            if text.is_empty() {
                continue;
            }
            let surface = label_of(fold, event);
            if matcher.matches(event, surface, &text) {
                out.push(EventDocument {
                    session_id: sid.clone(),
                    seq: event.seq,
                    kind: event.kind.to_string(),
                    time: event.time,
                    surface,
                    text,
                });
            }
        }
        Ok(out)
    }

    /// `listEvents`: every raw event (chunks included) with its label, in seq order.
    pub fn list_events(
        &self,
        id: &str,
        cancel: Cancel<'_>,
    ) -> Result<Vec<EventRecord>, PluginError> {
        let session = self.corpus.load(id, cancel)?;
        let fold = fold_of(&session)?;
        let sid = session.header().id.clone();
        let mut records = Vec::with_capacity(session.data.events().len());
        for (n, e) in session.data.events().iter().enumerate() {
            stop_point(cancel, n, "listEvents")?;
            records.push(event_record(&sid, fold, e));
        }
        Ok(records)
    }

    /// `readSurface`: the current surface nodes' envelopes in surface (model) order, and the seq of the
    /// last raw event observed (`None` for an empty log).
    pub fn read_surface(
        &self,
        id: &str,
        cancel: Cancel<'_>,
    ) -> Result<SurfaceSnapshot, PluginError> {
        let session = self.corpus.load(id, cancel)?;
        let fold = fold_of(&session)?;
        let mut events = Vec::with_capacity(fold.nodes().len());
        for (n, &seq) in fold.nodes().iter().enumerate() {
            stop_point(cancel, n, "readSurface")?;
            events.extend(session.data.event(seq).map(|e| e.to_json_line()));
        }
        Ok(SurfaceSnapshot {
            session: Header::from(session.header()),
            captured_through_seq: session.data.events().last().map(|e| e.seq),
            events,
        })
    }

    /// `readEvent`: the event at `seq` and the raw events `before`/`after` it, clamped to the log. The
    /// window is validated before the session is loaded.
    pub fn read_event(
        &self,
        request: &ReadEventRequest,
        cancel: Cancel<'_>,
    ) -> Result<EventWindow, PluginError> {
        let id = request.session_id.as_str();
        let before = self.window_side(id, "before", request.before)?;
        let after = self.window_side(id, "after", request.after)?;
        let session = self.corpus.load(id, cancel)?;
        let target = event_at(&session, request.seq)?;
        let seq = target.seq;
        let last = session.data.events().last().map_or(seq, |e| e.seq);
        let start_seq = seq.saturating_sub(before);
        let end_seq = seq.saturating_add(after).min(last);
        let events = (start_seq..=end_seq)
            .filter_map(|s| session.data.event(s))
            .map(|e| e.to_json_line())
            .collect();
        Ok(EventWindow {
            session: Header::from(session.header()),
            target: target.to_json_line(),
            events,
            start_seq,
            end_seq,
        })
    }

    fn window_side(&self, id: &str, name: &str, value: i64) -> Result<u64, PluginError> {
        match u64::try_from(value) {
            Ok(v) if v <= self.read_window_max => Ok(v),
            _ => Err(PluginError::new(
                ErrorCode::SessionQueryInvalidWindow,
                format!(
                    "readEvent on session {id:?}: {name} must be an integer from 0 to {}; got {value}",
                    self.read_window_max
                ),
            )),
        }
    }

    /// `traceSession`: ancestors and descendants through `parentSession` (see the `lineage` module).
    pub fn trace_session(
        &self,
        id: &str,
        cancel: Cancel<'_>,
    ) -> Result<SessionLineage, PluginError> {
        let sessions = self.corpus.list(cancel)?;
        self.corpus.check_cancelled(cancel, "traceSession")?;
        lineage::trace(id, sessions)
    }

    /// `traceEvent`: what replaced the event, what it replaced, what it cites and what cites it. A missing
    /// event is reported before the log is folded.
    pub fn trace_event(
        &self,
        id: &str,
        seq: i64,
        cancel: Cancel<'_>,
    ) -> Result<EventTrace, PluginError> {
        let session = self.corpus.load(id, cancel)?;
        let target = event_at(&session, seq)?;
        let seq = target.seq;
        let fold = fold_of(&session)?;
        let sid = session.header().id.clone();
        let derived = session
            .data
            .events()
            .iter()
            .skip_while(|e| e.seq <= seq)
            .filter(|e| source_seqs(e).contains(&seq))
            .map(|e| e.seq)
            .collect();
        Ok(EventTrace {
            session: Header::from(session.header()),
            target: event_record(&sid, fold, target),
            replaced_by: fold.replaced_by(seq),
            replacement_chain: fold.replacement_chain(seq),
            replaced_event_seqs: fold
                .replacement(seq)
                .map(|r| r.shadowed.clone())
                .unwrap_or_default(),
            source_event_seqs: source_seqs(target),
            derived_event_seqs: derived,
        })
    }

    /// `readTitleSnapshots` (see the `titles` module).
    pub fn read_title_snapshots(
        &self,
        ids: &[String],
        cancel: Cancel<'_>,
    ) -> Result<Vec<TitleSnapshot>, PluginError> {
        titles::read_title_snapshots(&self.corpus, ids, cancel)
    }

    /// Sessions and logs the corpus could not read (DESIGN.md deviation 2).
    pub fn problems(&self) -> Vec<CorpusProblem> {
        self.corpus.problems()
    }
}

/// Every [`STOP_CHECK_EVERY`]-th item of a read's per-event loop: `Err(SESSION_QUERY_ABORTED)` when the
/// call should stop (the service turns it into the call's own deadline or cancellation code).
fn stop_point(cancel: Cancel<'_>, n: usize, what: &str) -> Result<(), PluginError> {
    if n.is_multiple_of(STOP_CHECK_EVERY) {
        cancel.check_with(ErrorCode::SessionQueryAborted, what)?;
    }
    Ok(())
}

/// The exact reads' order of sessions (also citation candidates' within a rank): `createdAt`
/// descending, then id ascending in byte order.
pub(crate) fn newest_first(a: &CorpusSession, b: &CorpusSession) -> Ordering {
    b.header
        .created_at
        .cmp(&a.header.created_at)
        .then_with(|| a.header.id.cmp(&b.header.id))
}

/// The session's fold, or `INVALID_SURFACE` naming the session and the offending seq.
fn fold_of(session: &LoadedSession) -> Result<&SurfaceFold, PluginError> {
    session.data.fold().map_err(|e| {
        PluginError::new(
            ErrorCode::SessionQueryInvalidSurface,
            format!("{e} ({}, event seq {})", session.describe(), e.seq),
        )
    })
}

fn label_of(fold: &SurfaceFold, event: &Event) -> Surface {
    // A folded log labels every one of its events; the fallback mirrors spec §2.2's "everything else".
    Surface::from(fold.label(event.seq).unwrap_or(Label::LogOnly))
}

fn event_record(session_id: &str, fold: &SurfaceFold, event: &Event) -> EventRecord {
    EventRecord {
        session_id: session_id.to_string(),
        seq: event.seq,
        kind: event.kind.as_str().into(),
        time: event.time,
        surface: label_of(fold, event),
    }
}

/// The event at index `seq` carrying that seq, or `EVENT_NOT_FOUND` (negative, beyond the end, or a log
/// whose event there has another seq).
fn event_at(session: &LoadedSession, seq: i64) -> Result<&Event, PluginError> {
    u64::try_from(seq)
        .ok()
        .and_then(|s| session.data.event(s))
        .ok_or_else(|| {
            PluginError::new(
                ErrorCode::SessionQueryEventNotFound,
                format!("{} has no event at seq {seq}", session.describe()),
            )
        })
}

/// The event's `sourceEventSeqs` as recorded, keeping its safe non-negative integers (the fold has
/// already refused anything else on a folded log); `[]` when absent.
fn source_seqs(event: &Event) -> Vec<u64> {
    match &event.source_event_seqs {
        Some(Value::Array(items)) => items.iter().filter_map(safe_uint).collect(),
        _ => Vec::new(),
    }
}
