//! The host's live sessions: in memory, folded as they grow, persisted with the log writer.
//!
//! An append is checked by the log's one append validator (`dsh_codec::log::append`: envelope, message
//! shapes, known types, seq and time, the surface fold) before it is written, so the host can never log
//! something a reader, its own model view or the plugin's labels would reject. Write first, then publish
//! in memory: a batch that fails to reach the disk is not visible to anyone, and a reader never waits
//! for a write (see [`LiveSessions`] for the locks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use dsh_codec::log::append::AppendValidator;
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::{Event, SessionHeader};
use dsh_codec::surface::{model_messages, SurfaceFold};
use serde_json::Value;

/// Why a live-session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("live session {0:?} already exists")]
    Exists(String),
    #[error("no live session {0:?}")]
    NotFound(String),
    /// The batch broke a log rule (named by the code) or could not be written; nothing was appended.
    #[error("live session {id:?}: {source}")]
    Log {
        id: String,
        source: dsh_codec::log::LogError,
    },
}

/// What readers of a live session see; replaced only once a batch is durable.
#[derive(Default)]
struct Published {
    events: Vec<Event>,
    /// The same events as JSON envelopes, what `HostContext::live_events` hands out.
    json: Vec<String>,
    fold: SurfaceFold,
}

struct LiveSession {
    header: SessionHeader,
    /// Changes whenever the session is anything but appended to (here: each creation), so a plugin's
    /// cache keyed by (id, epoch, event count) never splices two incarnations.
    epoch: u64,
    /// Serialises this session's appends; held across the write and fsync, and by nothing else.
    sink: Mutex<Sink>,
    published: RwLock<Published>,
}

/// Where a live session's appends go. Both check with the same validator; the log writer also writes.
enum Sink {
    Log(Box<LogWriter>),
    Memory(Box<AppendValidator>),
}

impl Sink {
    fn append(&mut self, batch: &[Event]) -> Result<SurfaceFold, dsh_codec::log::LogError> {
        match self {
            Sink::Log(writer) => {
                writer.append(batch)?;
                Ok(writer.validator().fold().clone())
            }
            Sink::Memory(validator) => {
                validator.append(batch)?;
                Ok(validator.fold().clone())
            }
        }
    }
}

/// Every live session of this host.
///
/// Locking, so that a plugin's `HostContext` callbacks never wait on a disk write: the map's lock is
/// held only to find or insert a session; each session has its own append lock (held across the
/// write and fsync) and its own published state (locked only to read it or to publish a durable
/// batch). No lock is held while the host calls into the plugin.
#[derive(Default)]
pub struct LiveSessions {
    sessions: RwLock<BTreeMap<String, Arc<LiveSession>>>,
    epochs: AtomicU64,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

impl LiveSessions {
    pub fn new() -> Self {
        Self::default()
    }

    fn session(&self, id: &str) -> Option<Arc<LiveSession>> {
        read(&self.sessions).get(id).cloned()
    }

    /// Starts a live session. With a sessions root it is persisted there (nothing on disk until the first
    /// append, per the writer's rules).
    pub fn create(
        &self,
        header: SessionHeader,
        persist_to: Option<(&Path, WriteOptions)>,
    ) -> Result<(), LiveError> {
        let id = header.id.clone();
        if read(&self.sessions).contains_key(&id) {
            return Err(LiveError::Exists(id));
        }
        let sink = match persist_to {
            Some((root, options)) => Sink::Log(Box::new(
                LogWriter::create(root, header.clone(), options).map_err(|source| {
                    LiveError::Log {
                        id: id.clone(),
                        source,
                    }
                })?,
            )),
            None => Sink::Memory(Box::new(AppendValidator::new(&header))),
        };
        let mut sessions = write(&self.sessions);
        if sessions.contains_key(&id) {
            return Err(LiveError::Exists(id));
        }
        let epoch = self.epochs.fetch_add(1, Ordering::Relaxed) + 1;
        sessions.insert(
            id,
            Arc::new(LiveSession {
                header,
                epoch,
                sink: Mutex::new(sink),
                published: RwLock::new(Published::default()),
            }),
        );
        Ok(())
    }

    /// Appends one durable batch: checked (all or nothing), written and fsynced under this session's
    /// append lock only, then published.
    pub fn append(&self, id: &str, batch: Vec<Event>) -> Result<(), LiveError> {
        let session = self
            .session(id)
            .ok_or_else(|| LiveError::NotFound(id.to_string()))?;
        let mut sink = session.sink.lock().unwrap_or_else(|p| p.into_inner());
        let fold = sink.append(&batch).map_err(|source| LiveError::Log {
            id: id.to_string(),
            source,
        })?;
        let json: Vec<String> = batch.iter().map(Event::to_json_line).collect();
        let mut published = write(&session.published);
        published.fold = fold;
        published.json.extend(json);
        published.events.extend(batch);
        Ok(())
    }

    /// The next seq of a live session.
    pub fn next_seq(&self, id: &str) -> Option<u64> {
        let session = self.session(id)?;
        let n = read(&session.published).events.len() as u64;
        Some(n)
    }

    /// Header, event count and epoch of every live session.
    pub fn list(&self) -> Vec<(SessionHeader, u64, u64)> {
        let sessions: Vec<Arc<LiveSession>> = read(&self.sessions).values().cloned().collect();
        sessions
            .iter()
            .map(|s| {
                let n = read(&s.published).events.len() as u64;
                (s.header.clone(), n, s.epoch)
            })
            .collect()
    }

    /// One live session's header, event count and epoch.
    pub fn get(&self, id: &str) -> Option<(SessionHeader, u64, u64)> {
        let s = self.session(id)?;
        let n = read(&s.published).events.len() as u64;
        Some((s.header.clone(), n, s.epoch))
    }

    /// JSON envelopes of the events with seq ≥ `from_seq`, when `id` is live at `epoch`.
    pub fn events_json(&self, id: &str, epoch: u64, from_seq: u64) -> Option<Vec<String>> {
        let s = self.session(id).filter(|s| s.epoch == epoch)?;
        let published = read(&s.published);
        let from = usize::try_from(from_seq)
            .unwrap_or(usize::MAX)
            .min(published.json.len());
        Some(published.json[from..].to_vec())
    }

    /// The live session's events and their fold, as published now.
    pub fn snapshot(&self, id: &str) -> Option<(SessionHeader, Vec<Event>, SurfaceFold)> {
        let s = self.session(id)?;
        let published = read(&s.published);
        Some((
            s.header.clone(),
            published.events.clone(),
            published.fold.clone(),
        ))
    }

    /// What the model sees now: the derived messages of the current surface.
    pub fn model_messages(&self, id: &str) -> Option<Vec<Value>> {
        let s = self.session(id)?;
        let published = read(&s.published);
        Some(model_messages(&published.fold, &published.events))
    }

    /// Makes a session persisted at `path` live, to be continued by [`LiveSessions::append`]: its log is
    /// read whole and folded, and later batches are appended to the same file. Refuses a log the writer
    /// will not extend (torn tail, lenient header, changed while read) and one the fold rejects.
    pub fn adopt(&self, path: &Path, options: WriteOptions) -> Result<SessionHeader, LiveError> {
        use dsh_codec::log::read::{read_log, ReadOptions};
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
            // Another writer (another host citing into the same session, say) appended between the
            // writer's look and ours: nothing was written, and the caller may try again.
            return Err(LiveError::Log {
                id,
                source: dsh_codec::log::LogError::new(
                    dsh_codec::log::LogErrorCode::ConcurrentWrite,
                    format!(
                        "another writer appended to this log while it was opened (it holds {stored} events, this writer saw {}); nothing was written",
                        writer.next_seq()
                    ),
                )
                .at_path(path),
            });
        }
        let fold = writer.validator().fold().clone();
        let mut sessions = write(&self.sessions);
        if sessions.contains_key(&id) {
            return Err(LiveError::Exists(id));
        }
        let header = log.header;
        let epoch = self.epochs.fetch_add(1, Ordering::Relaxed) + 1;
        sessions.insert(
            id,
            Arc::new(LiveSession {
                header: header.clone(),
                epoch,
                sink: Mutex::new(Sink::Log(Box::new(writer))),
                published: RwLock::new(Published {
                    json: log.events.iter().map(Event::to_json_line).collect(),
                    events: log.events,
                    fold,
                }),
            }),
        );
        Ok(header)
    }

    /// Where a live session is persisted, if it is.
    pub fn log_path(&self, id: &str) -> Option<PathBuf> {
        let s = self.session(id)?;
        let sink = s.sink.lock().unwrap_or_else(|p| p.into_inner());
        match &*sink {
            Sink::Log(writer) => Some(writer.path().to_path_buf()),
            Sink::Memory(_) => None,
        }
    }
}
