//! The host's live sessions: in memory, folded as they grow, persisted with the log writer.
//!
//! An append is checked by the one surface fold before it is written, so the host can never log
//! something its own model view (or the plugin's labels) would reject. Write first, then commit in
//! memory: a batch that fails to reach the disk is not visible to anyone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use host_api::log::write::{LogWriter, WriteOptions};
use host_api::log::{Event, SessionHeader};
use host_api::surface::{model_messages, SurfaceFold};
use serde_json::Value;

/// Why a live-session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("live session {0:?} already exists")]
    Exists(String),
    #[error("no live session {0:?}")]
    NotFound(String),
    #[error("live session {id:?}: batch rejected by the surface fold: {source}")]
    Fold {
        id: String,
        source: host_api::surface::FoldError,
    },
    #[error("live session {id:?}: {source}")]
    Log {
        id: String,
        source: host_api::log::LogError,
    },
    #[error(
        "live session {id:?}: event seq {got} does not continue the session (expected {expected})"
    )]
    Seq { id: String, expected: u64, got: u64 },
}

struct LiveSession {
    header: SessionHeader,
    events: Vec<Event>,
    /// The same events as JSON envelopes, what `HostContext::live_events` hands out.
    json: Vec<String>,
    fold: SurfaceFold,
    writer: Option<LogWriter>,
}

/// Every live session of this host.
#[derive(Default)]
pub struct LiveSessions {
    sessions: RwLock<BTreeMap<String, LiveSession>>,
}

impl LiveSessions {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a live session. With a sessions root it is persisted there (nothing on disk until the first
    /// append, per the writer's rules).
    pub fn create(
        &self,
        header: SessionHeader,
        persist_to: Option<(&Path, WriteOptions)>,
    ) -> Result<(), LiveError> {
        let id = header.id.clone();
        let writer = match persist_to {
            Some((root, options)) => Some(
                LogWriter::create(root, header.clone(), options).map_err(|source| {
                    LiveError::Log {
                        id: id.clone(),
                        source,
                    }
                })?,
            ),
            None => None,
        };
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        if sessions.contains_key(&id) {
            return Err(LiveError::Exists(id));
        }
        sessions.insert(
            id,
            LiveSession {
                header,
                events: Vec::new(),
                json: Vec::new(),
                fold: SurfaceFold::new(),
                writer,
            },
        );
        Ok(())
    }

    /// Appends one durable batch: folded first (all or nothing), then written, then made visible.
    pub fn append(&self, id: &str, batch: Vec<Event>) -> Result<(), LiveError> {
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        let session = sessions
            .get_mut(id)
            .ok_or_else(|| LiveError::NotFound(id.to_string()))?;
        let mut fold = session.fold.clone();
        for (expected, event) in (session.events.len() as u64..).zip(&batch) {
            if event.seq != expected {
                return Err(LiveError::Seq {
                    id: id.to_string(),
                    expected,
                    got: event.seq,
                });
            }
            fold.apply(event).map_err(|source| LiveError::Fold {
                id: id.to_string(),
                source,
            })?;
        }
        if let Some(writer) = &mut session.writer {
            writer.append(&batch).map_err(|source| LiveError::Log {
                id: id.to_string(),
                source,
            })?;
        }
        session.fold = fold;
        session.json.extend(batch.iter().map(Event::to_json_line));
        session.events.extend(batch);
        Ok(())
    }

    /// The next seq of a live session.
    pub fn next_seq(&self, id: &str) -> Option<u64> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        sessions.get(id).map(|s| s.events.len() as u64)
    }

    /// Headers and event counts of every live session.
    pub fn list(&self) -> Vec<(SessionHeader, u64)> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        sessions
            .values()
            .map(|s| (s.header.clone(), s.events.len() as u64))
            .collect()
    }

    /// One live session's header and event count.
    pub fn get(&self, id: &str) -> Option<(SessionHeader, u64)> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        sessions
            .get(id)
            .map(|s| (s.header.clone(), s.events.len() as u64))
    }

    /// JSON envelopes of the events with seq ≥ `from_seq`.
    pub fn events_json(&self, id: &str, from_seq: u64) -> Option<Vec<String>> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        let s = sessions.get(id)?;
        let from = usize::try_from(from_seq)
            .unwrap_or(usize::MAX)
            .min(s.json.len());
        Some(s.json[from..].to_vec())
    }

    /// What the model sees now: the derived messages of the current surface.
    pub fn model_messages(&self, id: &str) -> Option<Vec<Value>> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        let s = sessions.get(id)?;
        Some(model_messages(&s.fold, &s.events))
    }

    /// Makes a session persisted at `path` live, to be continued by [`LiveSessions::append`]: its log is
    /// read whole and folded, and later batches are appended to the same file. Refuses a log the writer
    /// will not extend (torn tail, lenient header, changed while read) and one the fold rejects.
    pub fn adopt(&self, path: &Path, options: WriteOptions) -> Result<SessionHeader, LiveError> {
        use host_api::log::read::{read_log, ReadOptions};
        let writer = LogWriter::open_append(path, options).map_err(|source| LiveError::Log {
            id: path.display().to_string(),
            source,
        })?;
        let id = writer.header().id.clone();
        let log = read_log(
            path,
            &ReadOptions {
                crash_closers: false,
                ..ReadOptions::default()
            },
        )
        .map_err(|source| LiveError::Log {
            id: id.clone(),
            source,
        })?;
        let stored = log.events.last().map_or(0, |e| e.seq + 1);
        if stored != writer.next_seq() {
            return Err(LiveError::Seq {
                id,
                expected: writer.next_seq(),
                got: stored,
            });
        }
        let fold = SurfaceFold::fold(&log.events).map_err(|source| LiveError::Fold {
            id: id.clone(),
            source,
        })?;
        let mut sessions = self.sessions.write().unwrap_or_else(|p| p.into_inner());
        if sessions.contains_key(&id) {
            return Err(LiveError::Exists(id));
        }
        let header = log.header;
        sessions.insert(
            id,
            LiveSession {
                header: header.clone(),
                json: log.events.iter().map(Event::to_json_line).collect(),
                events: log.events,
                fold,
                writer: Some(writer),
            },
        );
        Ok(header)
    }

    /// Where a live session is persisted, if it is.
    pub fn log_path(&self, id: &str) -> Option<PathBuf> {
        let sessions = self.sessions.read().unwrap_or_else(|p| p.into_inner());
        sessions
            .get(id)?
            .writer
            .as_ref()
            .map(|w| w.path().to_path_buf())
    }
}
