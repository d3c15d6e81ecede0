//! `readTitleSnapshots` (spec §5) and the title fold (spec §7.1).
//!
//! A session's title is its latest `session/title` event by log position; earlier ones do not matter,
//! even malformed ones. The folded title copies `title`, `messageSeqs` and `source` and adds the event's
//! seq and time. A `source.kind` outside `fallback | provider | user` makes the fold fail, which rejects
//! that one id; so does a title event whose fields do not have their documented types (DSH would carry
//! them along untyped; the ABI's `Title` cannot). Either is reported as `SESSION_QUERY_CORRUPT_SESSION`:
//! the log reads, but its content breaks the title contract.
//!
//! The batch: ids de-duplicated in first-occurrence order, each loaded and folded on its own, every
//! per-id failure (not found, unreadable, corrupt, conflict, fold) isolated in that entry. Only a
//! tripped cancellation token fails the whole batch.

use std::collections::HashSet;

use dsh_codec::json::safe_uint;
use dsh_codec::log::Event;
use host_api::abi::{ErrorCode, Header, PluginError, Title, TitleSnapshot};
use serde_json::Value;

use crate::cancel::Cancel;
use crate::corpus::{Corpus, LoadedSession};

pub(crate) const TITLE_EVENT: &str = "session/title";
const SOURCE_KINDS: [&str; 3] = ["fallback", "provider", "user"];

pub(super) fn read_title_snapshots(
    corpus: &Corpus,
    ids: &[String],
    cancel: Cancel<'_>,
) -> Result<Vec<TitleSnapshot>, PluginError> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for id in ids {
        if !seen.insert(id.as_str()) {
            continue;
        }
        corpus.check_cancelled(cancel, "readTitleSnapshots")?;
        // Cancellation is checked here, not inside the load, so that it fails the batch rather than
        // becoming one id's rejection.
        let result = corpus
            .load(id, Cancel::NEVER)
            .and_then(|session| title_of(&session).map(|title| (session, title)));
        out.push(match result {
            Ok((session, title)) => TitleSnapshot {
                session_id: id.clone(),
                session: Some(Header::from(session.header())),
                title,
                error: None,
            },
            Err(error) => TitleSnapshot {
                session_id: id.clone(),
                session: None,
                title: None,
                error: Some(error),
            },
        });
    }
    corpus.check_cancelled(cancel, "readTitleSnapshots")?;
    Ok(out)
}

/// The session's title (spec §7.1); `None` when it has no title event.
pub(crate) fn title_of(session: &LoadedSession) -> Result<Option<Title>, PluginError> {
    title_in(session.data.events().iter().map(|e| &**e), || {
        session.describe()
    })
}

/// [`title_of`] over a session's `events` in seq order; `describe` names the session in an error.
pub(crate) fn title_in<'e>(
    events: impl DoubleEndedIterator<Item = &'e Event>,
    describe: impl Fn() -> String,
) -> Result<Option<Title>, PluginError> {
    let Some(event) = events.rev().find(|e| e.kind == TITLE_EVENT) else {
        return Ok(None);
    };
    let bad = |why: String| {
        PluginError::new(
            ErrorCode::SessionQueryCorruptSession,
            format!(
                "{}: the session/title event at seq {} {why}",
                describe(),
                event.seq
            ),
        )
    };
    let data = &event.data;
    let title = match data.get("title") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(bad("has no text title".into())),
    };
    let message_seqs = match data.get("messageSeqs") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                safe_uint(v)
                    .ok_or_else(|| bad(format!("lists message seq {v}, not a safe integer ≥ 0")))
            })
            .collect::<Result<Vec<u64>, _>>()?,
        _ => return Err(bad("has no messageSeqs list".into())),
    };
    let source = data
        .get("source")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad("has no source object".into()))?;
    match source.get("kind").and_then(Value::as_str) {
        Some(kind) if SOURCE_KINDS.contains(&kind) => {}
        Some(kind) => return Err(bad(format!("has unknown title source kind {kind:?}"))),
        None => return Err(bad("has a source without a kind".into())),
    }
    Ok(Some(Title {
        title,
        message_seqs,
        source: source.to_string(),
        event_seq: event.seq,
        updated_at: event.time,
    }))
}
