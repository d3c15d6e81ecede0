//! Publishing a sessions root into a backend's collection, incrementally: a log whose revision is the
//! one already stored is left alone, a changed or new one is read, folded and written whole, one that
//! is gone is removed; each batch is one [`IndexBackend::apply`], so a failure publishes nothing of the
//! sessions in that batch and the next run writes them again.
//!
//! A session is published with what a reader on another machine needs without the log: the folded
//! title, the resume checkpoint the embedded index would keep, and the whole log (header and events as
//! JSON lines) for exact reads and citations, all in the batch's one transaction.

use std::collections::HashMap;
use std::path::Path;

use dsh_codec::log::checkpoint::ReadCheckpoint;
use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_log_with_checkpoint, ReadOptions, SessionLog};
use dsh_codec::surface::Label;

use super::{BackendError, IndexBackend, NewDoc, PublishedLog, SessionWrite, Write};
use crate::search::refresh::{hit_header, published_state};

/// Sessions per transaction.
pub const BATCH: usize = 64;

/// What one publishing run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    pub written: usize,
    pub unchanged: usize,
    pub removed: usize,
    /// Ids another collection holds.
    pub conflicts: Vec<String>,
    /// Logs that could not be read or folded: (path, why).
    pub problems: Vec<(String, String)>,
}

/// The write for one read log: its documents (spec §3) labelled by the fold (spec §2.2), its title
/// and the whole log.
pub fn session_write(
    log: &SessionLog,
    collection: &str,
    stamp: &str,
) -> Result<SessionWrite, String> {
    session_write_at(log, None, collection, stamp)
}

/// [`session_write`] with the resume state at `checkpoint` (where the log was read up to).
pub fn session_write_at(
    log: &SessionLog,
    checkpoint: Option<&ReadCheckpoint>,
    collection: &str,
    stamp: &str,
) -> Result<SessionWrite, String> {
    let (fold, title, resume) = published_state(log, checkpoint).map_err(|e| e.to_string())?;
    let docs = log
        .events
        .iter()
        .filter_map(|e| {
            let text = dsh_codec::text::event_text(e);
            (!text.is_empty()).then(|| NewDoc {
                seq: e.seq,
                kind: e.kind.to_string(),
                time: e.time,
                label: fold.label(e.seq).unwrap_or(Label::LogOnly),
                text,
            })
        })
        .collect();
    Ok(SessionWrite {
        collection: collection.to_string(),
        header: hit_header(&log.header),
        stamp: stamp.to_string(),
        checkpoint: resume,
        title,
        event_count: log.events.len() as u64,
        docs,
        log: Some(PublishedLog {
            header: log.header.to_json_line(),
            events: log.events.iter().map(|e| e.to_json_line()).collect(),
        }),
    })
}

/// Brings `collection` in `backend` up to date with the logs under `root`.
pub fn publish_root(
    backend: &mut dyn IndexBackend,
    root: &Path,
    collection: &str,
) -> Result<Published, BackendError> {
    let listing = SessionsRoot::new(root)
        .list()
        .map_err(|e| BackendError::Failed {
            server: root.display().to_string(),
            cause: e.to_string(),
        })?;
    let stored: HashMap<String, String> = backend
        .sessions()?
        .into_iter()
        .filter(|s| s.collection == collection)
        .map(|s| (s.header.id, s.stamp))
        .collect();
    let mut out = Published::default();
    let mut batch = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for listed in &listing.sessions {
        let id = listed.header.id.clone();
        seen.insert(id.clone());
        let stamp = listed.revision.to_string();
        if stored.get(&id) == Some(&stamp) {
            out.unchanged += 1;
            continue;
        }
        let opts = ReadOptions {
            expected_id: Some(id.clone()),
            ..ReadOptions::default()
        };
        match read_log_with_checkpoint(&listed.path, &opts)
            .map_err(|e| e.to_string())
            .and_then(|(log, checkpoint)| {
                session_write_at(&log, Some(&checkpoint), collection, &stamp)
            }) {
            Ok(w) => batch.push(Write::Put(w)),
            Err(why) => out.problems.push((listed.path.display().to_string(), why)),
        }
        if batch.len() >= BATCH {
            flush(backend, &mut batch, &mut out)?;
        }
    }
    for id in stored.keys().filter(|id| !seen.contains(*id)) {
        batch.push(Write::Remove {
            collection: collection.to_string(),
            id: id.clone(),
        });
        out.removed += 1;
    }
    flush(backend, &mut batch, &mut out)?;
    Ok(out)
}

fn flush(
    backend: &mut dyn IndexBackend,
    batch: &mut Vec<Write>,
    out: &mut Published,
) -> Result<(), BackendError> {
    if batch.is_empty() {
        return Ok(());
    }
    let puts = batch.iter().filter(|w| matches!(w, Write::Put(_))).count();
    let applied = backend.apply(std::mem::take(batch))?;
    out.written += puts - applied.conflicts.len();
    out.conflicts.extend(applied.conflicts);
    Ok(())
}
