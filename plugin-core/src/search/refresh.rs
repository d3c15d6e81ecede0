//! Bringing the index up to date before a search (DESIGN.md "Data flow: a search", deviation 6).
//!
//! Only what changed is read:
//! - live sessions are compared by (id, epoch, event count) with what the index holds; a session that
//!   only grew gets its new events' documents (fetched from the host from the last indexed seq), and a
//!   replacement among them relabels the older documents it shadowed with an UPDATE; anything else (a
//!   new epoch, a new header) re-reads the session whole;
//! - logs on disk are looked at only when the root's watch reported something: just the transcripts it
//!   named (their header and the layout's lookup for that id), or the whole root when it named a folder
//!   or too much, or when no watch runs; each is compared by its revision (device, inode, size, mtime,
//!   ctime); a log that grew is read from its checkpoint, any other change whole
//!   ([`read_ready`]), an unchanged broken log is not retried, and a log that left the listing
//!   leaves the index.
//!
//! Each session's change is one write step (`index::store`), and steps are committed in batches whose
//! size doubles from one session up to [`BATCH_STEPS`] / [`BATCH_BYTES`]: a cold build pays few commits
//! and FTS5 segment flushes, while a process killed part-way keeps at least about half of what it had
//! done. Whatever committed, rows' stamps describe exactly their documents; the next refresh re-observes
//! every source and repairs the rest before any search answers. All writes of one refresh carry the same
//! new generation. A cancelled refresh commits the steps it finished; any other failure rolls the open
//! batch back.
//!
//! A log's resume state (its fold and read checkpoint) is kept in memory for recent logs and stored with
//! its row, so a log that grows after a restart is still read from where it stopped.
//!
//! Broken logs, broken live sessions and live/disk pairs whose headers conflict are left out and reported
//! as [`Skipped`] (DESIGN.md deviation 2); the rest stays searchable.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_codec::log::checkpoint::ReadCheckpoint;
use dsh_codec::log::layout::{ListedSession, Revision, SessionsRoot};
use dsh_codec::log::read::Resumed;
use dsh_codec::log::read::{
    read_header, read_log_with_checkpoint, LogReader, ReadOptions, SessionLog,
};
use dsh_codec::log::{Compression, Event, LogError, LogErrorCode, SessionHeader};
use dsh_codec::surface::{Label, SurfaceFold};
use host_api::abi::wire::search::{HitHeader, Skipped};
use host_api::abi::{ErrorCode, LiveSession, PluginError};
use serde::{Deserialize, Serialize};

use crate::corpus::{Corpus, LoadedSession, SessionData};
use crate::index::failed;
use crate::index::store::{
    self, Doc, PackedDoc, Replacement, RowKey, SessionRow, Source, Visibility,
};
use crate::index::watch::{Pending, RootWatch};
use crate::index::Index;
use crate::reads::title_of;
use crate::sources::Sources;

/// The epoch of a live session: it changes on anything other than a pure append, so (id, epoch,
/// event count) says whether what is indexed is still a prefix of what the host holds.
fn live_epoch(session: &LiveSession) -> u64 {
    session.epoch
}

/// How often a long-lived engine lists the whole root by `stat` even though its watch reported
/// nothing: a watch cannot see writes through network and FUSE mounts or another bind mount of the
/// same files, and its queue can overflow unnoticed. A sweep opens only logs whose revision changed;
/// its cost is one `stat` per transcript and one directory read per session (measured in the search
/// benchmark: "no-change check, whole-root sweep").
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// How long a process that does not live long (`longLived: false`, no watch) takes the listing it made
/// as current: long enough that the refreshes of one command (a search refreshes before and while it
/// answers) list the root once, short enough that a later command in the same process lists again.
pub const ONE_SHOT_REUSE: Duration = Duration::from_millis(250);

/// How many logs were read whole and how many resumed from a checkpoint, since the index opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounts {
    pub whole: u64,
    pub resumed: u64,
    /// Full listings of the sessions root (each `stat`s every transcript; headers are read only for
    /// the ones whose revision is not known).
    pub listings: u64,
    /// Listings of the other harnesses' folders (a stat per transcript).
    pub source_listings: u64,
    /// Reads of logs that failed (the log is then reported and left out).
    pub failed: u64,
}

/// Where a grown log resumes: the fold of its stored events (crash closers excluded) and the checkpoint
/// after them. In memory only, for the most recently read logs: after a restart, or for a log read
/// long ago, a grown log is read whole once.
struct ResumeState {
    fold: SurfaceFold,
    checkpoint: ReadCheckpoint,
    used: u64,
}

/// Most folded events over all kept resume states (a fold holds a few bytes per event), and most states.
const RESUME_EVENTS: u64 = 2_000_000;
const RESUME_STATES: usize = 20_000;

/// The stored form of a resume state (borrowed, for writing).
#[derive(Serialize)]
struct StoredResumeRef<'a> {
    fold: &'a SurfaceFold,
    checkpoint: &'a ReadCheckpoint,
}

/// The stored form of a resume state.
#[derive(Deserialize)]
struct StoredResume {
    fold: SurfaceFold,
    checkpoint: ReadCheckpoint,
}

/// A resume state as stored with its row: zstd-compressed JSON (the fold's labels and node lists
/// compress well). `None` if it cannot be encoded; the log is then read whole when it grows.
fn encode_resume(fold: &SurfaceFold, checkpoint: &ReadCheckpoint) -> Option<Vec<u8>> {
    let json = serde_json::to_vec(&StoredResumeRef { fold, checkpoint }).ok()?;
    zstd::bulk::compress(&json, 1).ok()
}

/// Undoes [`encode_resume`]. A stored state that does not decode is ignored: the log is read whole,
/// which is always correct.
fn decode_resume(stored: &[u8]) -> Option<(SurfaceFold, ReadCheckpoint)> {
    let json = zstd::stream::decode_all(stored).ok()?;
    let state: StoredResume = serde_json::from_slice(&json).ok()?;
    Some((state.fold, state.checkpoint))
}

/// The most write steps, and about the most log bytes read, one batch of a refresh commits at once.
const BATCH_STEPS: u64 = 512;
const BATCH_BYTES: u64 = 64 << 20;

/// When a refresh commits: batches double in steps from one up to [`BATCH_STEPS`].
struct Batching {
    open: bool,
    steps: u64,
    bytes: u64,
    limit: u64,
}

impl Batching {
    fn new() -> Self {
        Self {
            open: false,
            steps: 0,
            bytes: 0,
            limit: 1,
        }
    }

    /// Opens a batch before a write step when none is open.
    fn before(&mut self, conn: &rusqlite::Connection) -> Result<(), PluginError> {
        if !self.open {
            store::begin_batch(conn).map_err(index_failed)?;
            self.open = true;
        }
        Ok(())
    }

    /// Counts a finished step (`bytes` read for it) and commits when the batch is full.
    fn after(&mut self, conn: &rusqlite::Connection, bytes: u64) -> Result<(), PluginError> {
        self.steps += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.steps >= self.limit || self.bytes >= BATCH_BYTES {
            self.commit(conn)?;
            self.limit = (self.limit * 2).min(BATCH_STEPS);
        }
        Ok(())
    }

    fn commit(&mut self, conn: &rusqlite::Connection) -> Result<(), PluginError> {
        if self.open {
            store::commit_batch(conn).map_err(index_failed)?;
        }
        self.open = false;
        self.steps = 0;
        self.bytes = 0;
        Ok(())
    }
}

/// Why a resumed read could not be written.
enum Failure {
    /// The log: reported and left out.
    Log(LogError),
    /// The index: the refresh fails.
    Plugin(PluginError),
}

/// The open index and what the search knows about it in memory.
pub(super) struct Engine {
    pub index: Index,
    /// Every row of `sessions`, mirrored.
    pub rows: HashMap<RowKey, SessionRow>,
    /// The cross-session generation: the one every row written by the last refresh carries.
    pub generation: u64,
    watch: Option<(Option<PathBuf>, RootWatch)>,
    /// One watch per other harness's folder: an unchanged folder is not listed again.
    source_watches: Vec<(PathBuf, RootWatch)>,
    listing: Option<Vec<ListedSession>>,
    /// Logs that failed to read, by path, with the stamp that failed (not retried until it changes) and
    /// the report.
    failed: HashMap<PathBuf, (String, Skipped)>,
    /// Where recently read logs resume when they grow.
    resume: HashMap<PathBuf, ResumeState>,
    /// A counter ordering `resume` entries by last use.
    clock: u64,
    /// Folded events over all `resume` entries.
    resume_events: u64,
    /// How many logs were read whole and how many resumed from a checkpoint.
    pub reads: ReadCounts,
    /// The committed state the rows mirror ([`store::version`]): another process that writes the index
    /// moves it, and [`Engine::resync`] then reloads.
    version: (u64, u64),
    /// Live sessions that failed, by id, with the stamp that failed and the report.
    live_failed: HashMap<String, (String, Skipped)>,
    pub skipped: Vec<Skipped>,
    /// Whether the host lives long (config `longLived`): only then is the root watched.
    long_lived: bool,
    /// The root the listing is of, when no watch records it.
    unwatched_root: Option<PathBuf>,
    /// When the last whole listing started (for the sweep).
    listed_at: Option<Instant>,
    /// When the last refresh that listed the whole root finished (for [`ONE_SHOT_REUSE`]).
    refreshed_at: Option<Instant>,
    /// [`SWEEP_EVERY`], shorter in tests.
    pub(super) sweep_every: Duration,
}

fn index_failed<E: std::fmt::Display + 'static>(what: E) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!(
            "session search index update failed: {}",
            crate::index::describe(&what)
        ),
    )
}

pub(super) fn aborted() -> PluginError {
    PluginError::new(ErrorCode::SessionQueryAborted, "session-search aborted")
}

/// The header columns a hit carries (spec §4.6: no `origin`).
pub fn hit_header(h: &SessionHeader) -> HitHeader {
    HitHeader {
        version: h.version,
        id: h.id.clone(),
        created_at: h.created_at,
        cwd: h.cwd.clone(),
        parent_session: h.parent_session.clone(),
        seed_length: h.seed_length,
        delegation_depth: h.delegation_depth,
        agent_preset: h.agent_preset.clone(),
        source: dsh_codec::source::SourceKind::of_id(&h.id)
            .as_str()
            .to_string(),
    }
}

/// The documents of `events` (spec §3), labelled by `fold`, packed.
fn docs<'a>(
    events: &'a [Arc<Event>],
    fold: &'a SurfaceFold,
) -> impl Iterator<Item = PackedDoc> + 'a {
    events.iter().filter_map(move |e| {
        let text = dsh_codec::text::event_text(e);
        (!text.is_empty()).then(|| {
            Doc {
                seq: e.seq,
                kind: &e.kind,
                time: e.time,
                label: fold.label(e.seq).unwrap_or(Label::LogOnly),
                text: text.into(),
            }
            .pack()
        })
    })
}

/// The session's folded title (spec §7.1) as stored: `{title, messageSeqs, source, eventSeq, updatedAt}`
/// or `{error}` when the title event breaks the title contract.
fn title_json(session: &LoadedSession) -> Option<String> {
    match title_of(session) {
        Ok(None) => None,
        Ok(Some(t)) => {
            let source: serde_json::Value =
                serde_json::from_str(t.source.as_str()).unwrap_or(serde_json::Value::Null);
            Some(
                serde_json::json!({
                    "title": t.title.as_str(),
                    "messageSeqs": t.message_seqs.as_slice(),
                    "source": source,
                    "eventSeq": t.event_seq,
                    "updatedAt": t.updated_at,
                })
                .to_string(),
            )
        }
        Err(e) => Some(serde_json::json!({"error": e.message.as_str()}).to_string()),
    }
}

fn skipped_of(p: &host_api::abi::CorpusProblem) -> Skipped {
    Skipped {
        id: p.session_id.clone(),
        path: Some(p.path.to_string()),
        code: p.code.to_string(),
        reason: p.message.to_string(),
    }
}

impl Engine {
    pub fn new(index: Index) -> Result<Self, PluginError> {
        let conn = index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let (generation, _) = store::state(conn).map_err(index_failed)?;
        let version = store::version(conn).map_err(index_failed)?;
        let rows = store::load_rows(conn)
            .map_err(index_failed)?
            .into_iter()
            .map(|row| (key_of(&row), row))
            .collect();
        // What earlier processes found broken, not read again until the file changes.
        let failed = failed::load(conn)
            .unwrap_or_default()
            .into_iter()
            .map(|(path, stamp, report)| (path, (stamp, report)))
            .collect();
        Ok(Self {
            index,
            rows,
            generation,
            watch: None,
            source_watches: Vec::new(),
            listing: None,
            failed,
            resume: HashMap::new(),
            clock: 0,
            resume_events: 0,
            reads: ReadCounts::default(),
            version,
            live_failed: HashMap::new(),
            skipped: Vec::new(),
            long_lived: true,
            unwatched_root: None,
            listed_at: None,
            refreshed_at: None,
            sweep_every: SWEEP_EVERY,
        })
    }

    /// Sets whether the host lives long (see [`Engine::long_lived`]'s field).
    pub fn long_lived(mut self, long_lived: bool) -> Self {
        self.long_lived = long_lived;
        self
    }

    /// Every log the index holds with the revision and header it was indexed at (see
    /// `store::listed_sessions`). A row whose stamp or header does not parse is left out: the listing
    /// then reads that log's header itself.
    pub fn known_listing(&self) -> Vec<ListedSession> {
        let Some(conn) = self.index.connection() else {
            return Vec::new();
        };
        let Ok(rows) = store::listed_sessions(conn) else {
            return Vec::new();
        };
        rows.into_iter()
            .filter_map(|(path, stamp, line)| {
                let revision = stamp.parse::<Revision>().ok()?;
                let (header, diagnostics) = SessionHeader::parse(line.as_bytes(), false).ok()?;
                let zstd = path
                    .file_name()
                    .is_some_and(|n| n == Compression::Zstd.transcript_name());
                Some(ListedSession {
                    header,
                    diagnostics,
                    path,
                    compression: if zstd {
                        Compression::Zstd
                    } else {
                        Compression::None
                    },
                    revision,
                })
            })
            .collect()
    }

    /// Drops what the watch reported so far without looking at it: a change the watch did not see
    /// (for tests of the sweep).
    #[cfg(test)]
    pub fn miss_pending_changes(&self) {
        if let Some((_, w)) = &self.watch {
            let _ = w.take();
        }
    }

    /// Whether a watch runs and has reported a change the next refresh will list (for tests that write
    /// logs and must know the watch saw it).
    #[cfg(test)]
    pub fn change_pending(&self) -> Option<bool> {
        let (_, watch) = self.watch.as_ref()?;
        watch.is_watching().then(|| watch.is_dirty())
    }

    pub fn is_watching(&self) -> bool {
        self.watch.as_ref().is_some_and(|(_, w)| w.is_watching())
    }

    /// Whether every other harness's folder is watched and one has reported a change (tests only).
    #[cfg(test)]
    pub fn source_change_pending(&self) -> Option<bool> {
        let all = !self.source_watches.is_empty()
            && self.source_watches.iter().all(|(_, w)| w.is_watching());
        all.then(|| self.source_watches.iter().any(|(_, w)| w.is_dirty()))
    }

    fn conn(&mut self) -> Result<&mut rusqlite::Connection, PluginError> {
        self.index
            .connection_mut()
            .ok_or_else(|| index_failed("index is closed"))
    }

    /// Brings the index up to date with `corpus`. On failure the in-memory mirror is reloaded from the
    /// database and the next refresh lists the root again, so nothing is assumed that was not committed.
    pub fn refresh(
        &mut self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(), PluginError> {
        let result = self.try_refresh(corpus, cancelled, progress);
        if result.is_err() {
            self.listed_at = None;
            self.refreshed_at = None;
            if let Some((_, w)) = &self.watch {
                w.mark_dirty();
            }
            for (_, w) in &self.source_watches {
                w.mark_dirty();
            }
            if let Some(conn) = self.index.connection() {
                if let (Ok(rows), Ok((generation, _))) =
                    (store::load_rows(conn), store::state(conn))
                {
                    self.rows = rows.into_iter().map(|row| (key_of(&row), row)).collect();
                    self.generation = generation;
                }
            }
        }
        if let Some(Ok(version)) = self.index.connection().map(store::version) {
            self.version = version;
        }
        result
    }

    /// Call with the writer role held, before [`Engine::refresh`]: when another process wrote the index
    /// since this engine last did, the rows are reloaded and what memory says about the sources
    /// (listing, resume states, failures) is dropped, so the refresh compares against what is committed.
    pub fn resync(&mut self) -> Result<(), PluginError> {
        let conn = self
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let version = store::version(conn).map_err(index_failed)?;
        if version == self.version {
            return Ok(());
        }
        self.rows = store::load_rows(conn)
            .map_err(index_failed)?
            .into_iter()
            .map(|row| (key_of(&row), row))
            .collect();
        self.generation = version.0;
        self.version = version;
        self.listing = None;
        self.resume.clear();
        self.resume_events = 0;
        self.failed.clear();
        self.live_failed.clear();
        Ok(())
    }

    fn try_refresh(
        &mut self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(), PluginError> {
        if cancelled() {
            return Err(aborted());
        }
        let root = corpus.sessions_root().map(Path::to_path_buf);
        if self.long_lived {
            // A root that did not exist (so could not be watched) is watched once it does.
            let rewatch = |(r, w): &(Option<PathBuf>, RootWatch)| {
                *r != root || (!w.is_watching() && root.as_deref().is_some_and(Path::is_dir))
            };
            if self.watch.as_ref().is_none_or(rewatch) {
                self.watch = Some((root.clone(), RootWatch::new(root.as_deref())));
                self.listing = None;
            }
        } else if self.unwatched_root != root {
            // A process that answers and exits sets up no watch (one inotify watch per folder of
            // the root, for a process about to exit, costs more than the stats it would save).
            self.unwatched_root = root.clone();
            self.listing = None;
        }
        let now = Instant::now();
        let age = self.listed_at.map(|t| now.saturating_duration_since(t));
        let pending = match &self.watch {
            Some((_, w)) if self.long_lived => {
                let reported = w.take();
                // The sweep: now and then everything, whatever the watch said.
                if age.is_none_or(|age| age >= self.sweep_every) {
                    Pending::Everything
                } else {
                    reported
                }
            }
            _ if !self.long_lived
                && self
                    .refreshed_at
                    .is_some_and(|t| now.saturating_duration_since(t) < ONE_SHOT_REUSE) =>
            {
                Pending::Nothing
            }
            _ => Pending::Everything,
        };
        let patched = match (&pending, &root) {
            (Pending::Nothing, _) => self.listing.is_some(),
            (Pending::Paths(paths), Some(root)) => self.patch_listing(corpus, root, paths),
            _ => false,
        };
        let sources_dirty = self.sources_changed(corpus);
        if sources_dirty && !corpus.sources().is_empty() {
            self.reads.source_listings += 1;
        }
        if !patched {
            self.listing = Some(corpus.list_persisted()?);
            self.reads.listings += 1;
            self.listed_at = Some(now);
        } else if sources_dirty {
            let fresh = corpus.list_sources();
            if let Some(listing) = self.listing.as_mut() {
                listing.retain(|l| corpus.sources().kind_of(&l.path).is_none());
                listing.extend(fresh);
            }
        }
        let result = self.compare_and_write(
            corpus,
            cancelled,
            progress,
            patched,
            sources_dirty,
            &pending,
        );
        if result.is_ok() && !patched {
            self.refreshed_at = Some(Instant::now());
        }
        result
    }

    /// The rest of a refresh, once the listing is current: what changed is compared and written.
    fn compare_and_write(
        &mut self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
        patched: bool,
        sources_dirty: bool,
        pending: &Pending,
    ) -> Result<(), PluginError> {
        let live: Vec<LiveSession> = corpus.live_sessions();
        if patched && *pending == Pending::Nothing && !sources_dirty && self.live_unchanged(&live) {
            // Nothing on disk was reported and every live session is as indexed: nothing to compare.
            return Ok(());
        }
        let listing = self.listing.clone().unwrap_or_default();
        let live_ids: HashSet<String> = live.iter().map(|s| s.header.id.to_string()).collect();

        // What changed.
        let mut persisted_work: Vec<&ListedSession> = Vec::new();
        let listed_paths: HashSet<&Path> = listing.iter().map(|l| l.path.as_path()).collect();
        for listed in &listing {
            if live_ids.contains(&listed.header.id) {
                continue; // hidden while live; indexed when the live session goes away
            }
            let stamp = listed.revision.to_string();
            let key = RowKey::Persisted(listed.path.clone());
            let unchanged = self.rows.get(&key).is_some_and(|r| r.stamp == stamp);
            let still_broken = self
                .failed
                .get(&listed.path)
                .is_some_and(|(s, _)| *s == stamp);
            if !unchanged && !still_broken {
                persisted_work.push(listed);
            }
        }
        let gone: Vec<PathBuf> = self
            .failed
            .keys()
            .filter(|p| !listed_paths.contains(p.as_path()))
            .cloned()
            .collect();
        for path in gone {
            self.forget_failure(&path);
        }
        let mut deletes: Vec<i64> = self
            .rows
            .iter()
            .filter(|(k, _)| match k {
                RowKey::Persisted(p) => !listed_paths.contains(p.as_path()),
                RowKey::Live(id) => !live_ids.contains(id),
            })
            .map(|(_, r)| r.sid)
            .collect();
        deletes.sort_unstable();
        let mut live_work: Vec<&LiveSession> = Vec::new();
        for s in &live {
            let id = s.header.id.to_string();
            let stamp = format!("{}:{}", live_epoch(s), s.event_count);
            let header = hit_header(&SessionHeader::from(&s.header));
            let unchanged = self
                .rows
                .get(&RowKey::Live(id.clone()))
                .is_some_and(|r| r.stamp == stamp && r.header == header);
            let still_broken = self
                .live_failed
                .get(&id)
                .is_some_and(|(st, _)| *st == stamp);
            if !unchanged && !still_broken {
                live_work.push(s);
            }
        }
        self.live_failed.retain(|id, _| live_ids.contains(id));

        let total = (deletes.len() + persisted_work.len() + live_work.len()) as u64;
        let generation = self.generation + 1;
        let mut wrote = false;
        let mut done = 0u64;
        progress(0, total);
        let mut batching = Batching::new();
        let outcome = (|| -> Result<(), PluginError> {
            for sid in &deletes {
                batching.before(self.conn()?)?;
                store::delete_session(self.conn()?, *sid, generation).map_err(index_failed)?;
                self.rows.retain(|_, r| r.sid != *sid);
                wrote = true;
                batching.after(self.conn()?, 0)?;
                done += 1;
                progress(done, total);
            }
            // Logs without a row are read whole: on a second thread, ahead of the writes (a bounded
            // queue keeps at most a few in memory); the others (resumes) here, in order.
            let new_logs: Vec<&ListedSession> = persisted_work
                .iter()
                .copied()
                .filter(|l| !self.rows.contains_key(&RowKey::Persisted(l.path.clone())))
                .collect();
            std::thread::scope(|scope| -> Result<(), PluginError> {
                // Reading is most of the work: the readers take turns over the logs, and the writer
                // takes their results in the same turns, so logs are written in listing order.
                let readers = if new_logs.len() > 1 { READERS } else { 0 };
                let mut queues = Vec::with_capacity(readers);
                for turn in 0..readers {
                    let (sender, reads) = std::sync::mpsc::sync_channel(PREFETCH);
                    let new_logs = &new_logs;
                    let sources = corpus.sources();
                    scope.spawn(move || prefetch(sources, new_logs, turn, readers, sender));
                    queues.push(reads);
                }
                let mut next_new = 0;
                for listed in &persisted_work {
                    if cancelled() {
                        return Err(aborted());
                    }
                    let prefetched = (new_logs.get(next_new) == Some(listed))
                        .then(|| {
                            let queue = queues.get(next_new % readers.max(1));
                            next_new += 1;
                            queue.and_then(|q| q.recv().ok())
                        })
                        .flatten();
                    batching.before(self.conn()?)?;
                    wrote |= self.index_log(corpus.sources(), listed, prefetched, generation)?;
                    batching.after(self.conn()?, listed.revision.size)?;
                    done += 1;
                    progress(done, total);
                }
                Ok(())
            })?;
            for s in &live_work {
                if cancelled() {
                    return Err(aborted());
                }
                batching.before(self.conn()?)?;
                wrote |= self.index_live(corpus, s, generation)?;
                batching.after(self.conn()?, 0)?;
                done += 1;
                progress(done, total);
            }
            batching.before(self.conn()?)?;
            wrote |= self.update_visibility(&listing, &live, generation)?;
            batching.commit(self.conn()?)
        })();
        let outcome = match outcome {
            // Every step before the cancellation check finished: keep them.
            Err(e) if e.code == ErrorCode::SessionQueryAborted => {
                self.conn().and_then(|c| batching.commit(c)).and(Err(e))
            }
            Err(e) => {
                // A step may have failed half-way: the batch goes. What memory says about it goes
                // too (the caller reloads the rows): resume states and failures are found again.
                if let Some(conn) = self.index.connection() {
                    let _ = store::rollback_batch(conn);
                }
                self.resume.clear();
                self.resume_events = 0;
                self.failed.clear();
                Err(e)
            }
            ok => ok,
        };
        if wrote {
            self.generation = generation;
        }
        outcome?;
        let mut skipped: Vec<Skipped> = corpus.known_problems().iter().map(skipped_of).collect();
        skipped.extend(self.failed.values().map(|(_, s)| s.clone()));
        skipped.extend(self.live_failed.values().map(|(_, s)| s.clone()));
        skipped.extend(conflicts(&listing, &live).into_iter().map(|(id, path)| Skipped {
            id: Some(id.clone()),
            path: Some(path.display().to_string()),
            code: ErrorCode::SessionQuerySourceConflict.as_str().into(),
            reason: format!(
                "live session {id:?} and its log on disk have incompatible headers (version, createdAt, cwd, parentSession, seedLength or delegationDepth differ); both are left out of search"
            ),
        }));
        skipped.sort();
        // A log the corpus's own reads also failed on is reported once.
        skipped.dedup_by(|a, b| a.path.is_some() && a.path == b.path && a.code == b.code);
        self.skipped = skipped;
        Ok(())
    }

    /// Whether anything under the other harnesses' folders may have changed since the last look (always,
    /// for a folder that cannot be watched); (re)watches each folder, once it exists.
    fn sources_changed(&mut self, corpus: &Corpus) -> bool {
        if !self.long_lived {
            // A process that answers and exits watches nothing: it lists the folders again (by stat),
            // except right after the refresh that listed them (the same command's second look).
            return self
                .refreshed_at
                .is_none_or(|t| t.elapsed() >= ONE_SHOT_REUSE);
        }
        let roots: Vec<PathBuf> = corpus
            .sources()
            .roots()
            .each()
            .into_iter()
            .map(|(_, p)| p.to_path_buf())
            .collect();
        let stale = self.source_watches.len() != roots.len()
            || self
                .source_watches
                .iter()
                .zip(&roots)
                .any(|((r, w), root)| r != root || (!w.is_watching() && root.is_dir()));
        if stale {
            self.source_watches = roots
                .into_iter()
                .map(|r| {
                    let w = RootWatch::new(Some(&r));
                    (r, w)
                })
                .collect();
        }
        // Every watch is taken, so none keeps an old change for later.
        let taken: Vec<bool> = self
            .source_watches
            .iter()
            .map(|(_, w)| w.take_dirty())
            .collect();
        taken.into_iter().any(|d| d)
    }

    /// Whether every live session is exactly as the index (or the record of its failure) has it, and no
    /// other session is live: O(live sessions), no I/O.
    fn live_unchanged(&self, live: &[LiveSession]) -> bool {
        let live_rows = self
            .rows
            .keys()
            .filter(|k| matches!(k, RowKey::Live(_)))
            .count();
        if live_rows + self.live_failed.len() != live.len() {
            return false;
        }
        live.iter().all(|s| {
            let id = s.header.id.as_str();
            let stamp = format!("{}:{}", live_epoch(s), s.event_count);
            match self.rows.get(&RowKey::Live(id.to_string())) {
                Some(row) => {
                    row.stamp == stamp && row.header == hit_header(&SessionHeader::from(&s.header))
                }
                None => self.live_failed.get(id).is_some_and(|(st, _)| *st == stamp),
            }
        })
    }

    /// Updates the cached listing for the transcripts the watch named, without listing the root: each
    /// one that exists is looked up by its header's id (the layout's own rules for that id), each one
    /// gone is dropped. `false` (list everything) for anything else: a folder, a path the corpus reports
    /// a problem for, a lookup that fails or finds the session elsewhere.
    fn patch_listing(&mut self, corpus: &Corpus, root: &Path, paths: &[PathBuf]) -> bool {
        let Some(listing) = self.listing.as_mut() else {
            return false;
        };
        let problems: HashSet<String> = corpus
            .known_problems()
            .iter()
            .map(|p| p.path.to_string())
            .collect();
        let sessions_root = SessionsRoot::new(root);
        let transcripts = [
            Compression::None.transcript_name(),
            Compression::Zstd.transcript_name(),
        ];
        for path in paths {
            if problems.contains(&path.display().to_string()) {
                return false;
            }
            let is_transcript = path
                .file_name()
                .is_some_and(|n| transcripts.iter().any(|t| n == *t));
            let meta = std::fs::symlink_metadata(path);
            if !is_transcript {
                // A writer's temporary file comes and goes; a folder changes what lists.
                match meta {
                    Ok(m) if m.is_file() => continue,
                    _ => return false,
                }
            }
            if meta.is_err() {
                listing.retain(|l| l.path != *path);
                continue;
            }
            let Ok((header, _, _)) = read_header(path, &ReadOptions::default()) else {
                return false;
            };
            match sessions_root.find(&header.id) {
                Ok(Some(found)) if found.path == *path => {
                    listing.retain(|l| l.path != *path);
                    listing.push(found);
                }
                _ => return false,
            }
        }
        listing.sort_by(|a, b| a.path.cmp(&b.path));
        true
    }

    /// Indexes one new or changed log; `Ok(true)` when the index was written. A log that only grew
    /// since it was last read (in this process) is read from its checkpoint: only the appended bytes
    /// are read, the fold goes on from where it stopped, and the crash closers the last read appended
    /// are replaced by what really followed. Anything else is read whole.
    ///
    /// `prefetched` is the whole read of a log that had no row, done ahead on another thread.
    fn index_log(
        &mut self,
        sources: &Sources,
        listed: &ListedSession,
        prefetched: Option<WholeRead>,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let key = RowKey::Persisted(listed.path.clone());
        let stamp = listed.revision.to_string();
        let old = self.rows.get(&key).cloned();
        let opts = read_options(listed);
        // A resume is tried only for the same file grown longer (its bytes before the checkpoint are
        // then proven unchanged by the reader): a replaced file, or one whose times changed at the
        // same size or shorter, is read whole.
        let may_resume = old.as_ref().is_some_and(|row| {
            row.stamp
                .parse::<Revision>()
                .is_ok_and(|before| listed.revision.may_only_have_grown_from(&before))
        });
        let state = match &old {
            Some(row) if may_resume => self.resume_state(row)?,
            Some(_) => {
                self.take_resume(&listed.path);
                None
            }
            None => None,
        };
        if let (Some(row), Some(state)) = (&old, state) {
            let resumed = match LogReader::resume(&listed.path, &state.checkpoint, &opts) {
                Ok(Resumed::Continue(reader)) => Some(reader.into_log_with_checkpoint()),
                Ok(Resumed::ReRead(_)) => None,
                Err(e) => Some(Err(e)),
            };
            match resumed {
                Some(Ok((log, checkpoint))) => {
                    let from = state.checkpoint.next_seq();
                    match self.append_log(
                        row,
                        state.fold,
                        from,
                        log,
                        checkpoint,
                        stamp.clone(),
                        listed,
                        generation,
                    ) {
                        Ok(()) => {
                            self.reads.resumed += 1;
                            return Ok(true);
                        }
                        Err(Failure::Log(e)) => {
                            return self.log_failed(
                                listed,
                                stamp,
                                old.map(|r| r.sid),
                                &e,
                                generation,
                            )
                        }
                        Err(Failure::Plugin(e)) => return Err(e),
                    }
                }
                Some(Err(e)) => {
                    return self.log_failed(
                        listed,
                        stamp,
                        old.map(|r| r.sid),
                        &e.at_path(&listed.path),
                        generation,
                    )
                }
                None => {}
            }
        }
        let read = match prefetched {
            Some(read) if old.is_none() => read,
            _ => read_ready(sources, listed, &opts),
        };
        let ready = match read {
            Ok(ready) => ready,
            Err(e) => return self.log_failed(listed, stamp, old.map(|r| r.sid), &e, generation),
        };
        let rows = Rows {
            header: ready.header,
            title: ready.title,
            count: ready.count,
            // Another harness's transcript has no checkpoint: its listing stats and reads it itself.
            listed: ready
                .resume_from
                .as_ref()
                .map(|(_, checkpoint)| checkpoint.header_line().to_owned()),
        };
        self.write_rows(
            key,
            rows,
            ready.docs,
            stamp,
            old.map(|r| r.sid),
            ready.resume.as_deref(),
            generation,
        )?;
        self.reads.whole += 1;
        self.forget_failure(&listed.path);
        if let Some((fold, checkpoint)) = ready.resume_from {
            self.remember_resume(&listed.path, fold, checkpoint);
        }
        Ok(true)
    }

    /// Writes what a resumed read of a grown log found.
    #[allow(clippy::too_many_arguments)]
    fn append_log(
        &mut self,
        row: &SessionRow,
        mut fold: SurfaceFold,
        from: u64,
        log: SessionLog,
        checkpoint: ReadCheckpoint,
        stamp: String,
        listed: &ListedSession,
        generation: u64,
    ) -> Result<(), Failure> {
        let fold_error = |e: dsh_codec::surface::FoldError| {
            Failure::Log(LogError::from(e).at_path(&listed.path))
        };
        let pre_closers = fold_to_checkpoint(&mut fold, &log, &checkpoint, true)
            .map_err(fold_error)?
            .unwrap_or_else(|| fold.clone());
        let header = log.header.clone();
        let events: Vec<Arc<Event>> = log.events.into_iter().map(Arc::new).collect();
        let relabel: Vec<(u64, Label)> = events
            .iter()
            .filter_map(|e| fold.replacement(e.seq))
            .flat_map(|r| r.shadowed.iter().copied())
            .filter(|&s| s < from)
            .map(|s| (s, fold.label(s).unwrap_or(Label::LogOnly)))
            .collect();
        let count = from + events.len() as u64;
        let title = events.iter().any(|e| e.kind == "session/title").then(|| {
            let data = Arc::new(SessionData::new(header, events.clone()));
            title_json(&LoadedSession {
                data,
                live: false,
                path: Some(listed.path.clone()),
            })
        });
        let resume = encode_resume(&pre_closers, &checkpoint);
        let ext = store::Extension {
            sid: row.sid,
            stamp: &stamp,
            event_count: count,
            title: title.clone(),
            relabel: &relabel,
            drop_from: Some(from),
            resume: resume.as_deref(),
        };
        let conn = self.conn().map_err(Failure::Plugin)?;
        store::extend_session(conn, &ext, docs(&events, &fold), generation)
            .map_err(|e| Failure::Plugin(index_failed(e)))?;
        if let Some(row) = self.rows.get_mut(&RowKey::Persisted(listed.path.clone())) {
            row.stamp = stamp;
            row.event_count = count;
            row.generation = generation;
            if let Some(title) = title {
                row.title = title;
            }
        }
        self.forget_failure(&listed.path);
        self.remember_resume(&listed.path, pre_closers, checkpoint);
        Ok(())
    }

    /// Keeps where `path` resumes, forgetting the least recently used entries past the bounds.
    fn remember_resume(&mut self, path: &Path, fold: SurfaceFold, checkpoint: ReadCheckpoint) {
        self.take_resume(path);
        self.clock += 1;
        self.resume_events += fold.folded();
        self.resume.insert(
            path.to_path_buf(),
            ResumeState {
                fold,
                checkpoint,
                used: self.clock,
            },
        );
        while self.resume.len() > RESUME_STATES || self.resume_events > RESUME_EVENTS {
            let Some(oldest) = self
                .resume
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            self.take_resume(&oldest);
        }
    }

    /// Where the log of `row` resumes: the state kept in memory, else the one stored with the row
    /// (after a restart, or once memory forgot it). `None`: read it whole.
    fn resume_state(&mut self, row: &SessionRow) -> Result<Option<ResumeState>, PluginError> {
        let Some(path) = &row.path else {
            return Ok(None);
        };
        if let Some(state) = self.take_resume(path) {
            return Ok(Some(state));
        }
        let stored = store::stored_resume(self.conn()?, row.sid).map_err(index_failed)?;
        Ok(stored
            .as_deref()
            .and_then(decode_resume)
            .map(|(fold, checkpoint)| ResumeState {
                fold,
                checkpoint,
                used: 0,
            }))
    }

    /// Forgets that the log at `path` failed, here and in the index.
    fn forget_failure(&mut self, path: &Path) {
        if self.failed.remove(path).is_some() {
            if let Some(conn) = self.index.connection() {
                failed::forget(conn, path);
            }
        }
    }

    fn take_resume(&mut self, path: &Path) -> Option<ResumeState> {
        let state = self.resume.remove(path)?;
        self.resume_events = self.resume_events.saturating_sub(state.fold.folded());
        Some(state)
    }

    /// Records a log that cannot be indexed (reported in `skipped` until its file changes) and drops
    /// what was indexed of it.
    fn log_failed(
        &mut self,
        listed: &ListedSession,
        stamp: String,
        old_sid: Option<i64>,
        e: &LogError,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let report = Skipped {
            id: Some(listed.header.id.clone()),
            path: Some(listed.path.display().to_string()),
            code: e.code.as_str().to_string(),
            reason: log_error_text(e),
        };
        self.reads.failed += 1;
        if let Some(conn) = self.index.connection() {
            failed::put(conn, &listed.path, &stamp, &report);
        }
        self.failed.insert(listed.path.clone(), (stamp, report));
        self.take_resume(&listed.path);
        if let Some(sid) = old_sid {
            store::delete_session(self.conn()?, sid, generation).map_err(index_failed)?;
            self.rows.remove(&RowKey::Persisted(listed.path.clone()));
            return Ok(true);
        }
        Ok(false)
    }

    /// Indexes one changed live session; `Ok(true)` when the index was written.
    fn index_live(
        &mut self,
        corpus: &Corpus,
        live: &LiveSession,
        generation: u64,
    ) -> Result<bool, PluginError> {
        let id = live.header.id.to_string();
        let key = RowKey::Live(id.clone());
        let old = self.rows.get(&key).cloned();
        let epoch = live_epoch(live);
        let fail = |this: &mut Self,
                    stamp: String,
                    code: ErrorCode,
                    reason: String|
         -> Result<bool, PluginError> {
            let skipped = Skipped {
                id: Some(id.clone()),
                path: None,
                code: code.as_str().into(),
                reason,
            };
            this.live_failed.insert(id.clone(), (stamp, skipped));
            if let Some(row) = &old {
                store::delete_session(this.conn()?, row.sid, generation).map_err(index_failed)?;
                this.rows.remove(&key);
                return Ok(true);
            }
            Ok(false)
        };
        let stamp_seen = format!("{epoch}:{}", live.event_count);
        let session = match corpus.load_live(&id) {
            Ok(Some(session)) => session,
            // Gone since the listing: the next refresh deletes its row.
            Ok(None) => return Ok(false),
            Err(e) => return fail(self, stamp_seen, e.code, e.message.to_string()),
        };
        let data = session.data.clone();
        let fold = match data.fold() {
            Ok(fold) => fold,
            Err(e) => {
                return fail(
                    self,
                    stamp_seen,
                    ErrorCode::SessionQueryInvalidSurface,
                    format!("invalid session surface: {e}"),
                )
            }
        };
        let count = data.events().len() as u64;
        let stamp = format!("{epoch}:{count}");
        let header = hit_header(data.header());
        self.live_failed.remove(&id);
        match old {
            Some(row)
                if row.header == header
                    && row.stamp.split(':').next() == Some(epoch.to_string().as_str())
                    && row.event_count <= count =>
            {
                let from = row.event_count;
                let new_events = &data.events()[from as usize..];
                let relabel: Vec<(u64, Label)> = new_events
                    .iter()
                    .filter_map(|e| fold.replacement(e.seq))
                    .flat_map(|r| r.shadowed.iter().copied())
                    .filter(|&s| s < from)
                    .map(|s| (s, fold.label(s).unwrap_or(Label::LogOnly)))
                    .collect();
                let title = new_events
                    .iter()
                    .any(|e| e.kind == "session/title")
                    .then(|| title_json(&session));
                let docs = docs(new_events, fold);
                let ext = store::Extension {
                    sid: row.sid,
                    stamp: &stamp,
                    event_count: count,
                    title: title.clone(),
                    relabel: &relabel,
                    drop_from: None,
                    resume: None,
                };
                store::extend_session(self.conn()?, &ext, docs, generation)
                    .map_err(index_failed)?;
                if let Some(row) = self.rows.get_mut(&key) {
                    row.stamp = stamp;
                    row.event_count = count;
                    row.generation = generation;
                    if let Some(title) = title {
                        row.title = title;
                    }
                }
                Ok(true)
            }
            old => {
                self.write_whole(key, &session, stamp, old.map(|r| r.sid), generation)?;
                Ok(true)
            }
        }
    }

    fn write_whole(
        &mut self,
        key: RowKey,
        session: &LoadedSession,
        stamp: String,
        old_sid: Option<i64>,
        generation: u64,
    ) -> Result<(), PluginError> {
        let data: &SessionData = &session.data;
        let fold = data
            .fold()
            .map_err(|e| index_failed(format!("{}: {e}", session.describe())))?;
        let rows = Rows {
            header: hit_header(data.header()),
            title: title_json(session),
            count: data.events().len() as u64,
            listed: None,
        };
        let docs = docs(data.events(), fold);
        self.write_rows(key, rows, docs, stamp, old_sid, None, generation)
    }

    /// Replaces (or creates) the row for `key` and its documents, and mirrors the row.
    #[allow(clippy::too_many_arguments)]
    fn write_rows(
        &mut self,
        key: RowKey,
        rows: Rows,
        docs: impl IntoIterator<Item = PackedDoc>,
        stamp: String,
        old_sid: Option<i64>,
        resume: Option<&[u8]>,
        generation: u64,
    ) -> Result<(), PluginError> {
        let Rows {
            header,
            title,
            count,
            listed,
        } = rows;
        let replacement = Replacement {
            key: &key,
            header: &header,
            stamp: &stamp,
            event_count: count,
            title: title.clone(),
            resume,
            listed: listed.as_deref(),
        };
        let sid = store::replace_session(self.conn()?, old_sid, &replacement, docs, generation)
            .map_err(index_failed)?;
        let (source, path) = match &key {
            RowKey::Live(_) => (Source::Live, None),
            RowKey::Persisted(p) => (Source::Persisted, Some(p.clone())),
        };
        self.rows.insert(
            key,
            SessionRow {
                sid,
                source,
                header,
                path,
                stamp,
                event_count: count,
                title,
                generation,
                visible: false,
                is_live: false,
                is_persisted: false,
            },
        );
        Ok(())
    }

    /// Recomputes every row's visibility: a live row is visible unless its disk copy conflicts; a disk row
    /// is visible unless its session is live or conflicts. Writes only rows that changed.
    fn update_visibility(
        &mut self,
        listing: &[ListedSession],
        live: &[LiveSession],
        generation: u64,
    ) -> Result<bool, PluginError> {
        let conflicted: HashSet<String> = conflicts(listing, live)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let live_ids: HashSet<String> = live.iter().map(|s| s.header.id.to_string()).collect();
        let listed_ids: HashSet<&str> = listing.iter().map(|l| l.header.id.as_str()).collect();
        let mut updates = Vec::new();
        for row in self.rows.values() {
            let id = row.header.id.as_str();
            let v = match row.source {
                Source::Live => Visibility {
                    visible: !conflicted.contains(id),
                    is_live: true,
                    is_persisted: listed_ids.contains(id),
                },
                Source::Persisted => Visibility {
                    visible: !live_ids.contains(id) && !conflicted.contains(id),
                    is_live: false,
                    is_persisted: true,
                },
            };
            if (row.visible, row.is_live, row.is_persisted)
                != (v.visible, v.is_live, v.is_persisted)
            {
                updates.push((row.sid, v));
            }
        }
        if updates.is_empty() {
            return Ok(false);
        }
        store::set_visibility(self.conn()?, &updates, generation).map_err(index_failed)?;
        for (sid, v) in updates {
            if let Some(row) = self.rows.values_mut().find(|r| r.sid == sid) {
                row.visible = v.visible;
                row.is_live = v.is_live;
                row.is_persisted = v.is_persisted;
            }
        }
        Ok(true)
    }
}

/// What a row of `sessions` holds besides its key, stamp and resume state.
struct Rows {
    header: HitHeader,
    title: Option<String>,
    count: u64,
    /// A log's header record (see `store::listed_sessions`).
    listed: Option<String>,
}

/// A log read whole with everything its write needs made ready: its packed documents, row, resume state
/// (stored), and the fold of its stored events with the checkpoint after them (kept in memory). Made
/// where the log is read, so the events themselves are freed there too.
struct ReadyLog {
    header: HitHeader,
    title: Option<String>,
    count: u64,
    docs: Vec<PackedDoc>,
    resume: Option<Vec<u8>>,
    /// Where a DSH log resumes: the fold of its stored events and the checkpoint after them. Another
    /// harness's transcript has none: it is read whole whenever it changes.
    resume_from: Option<(SurfaceFold, ReadCheckpoint)>,
}

/// What a whole read of a log gives.
type WholeRead = Result<ReadyLog, LogError>;

/// How a listed log is read: it must still be the session it was listed as.
fn read_options(listed: &ListedSession) -> ReadOptions {
    ReadOptions {
        expected_id: Some(listed.header.id.clone()),
        ..ReadOptions::default()
    }
}

/// Threads reading new logs while the refresh writes (the machine this was measured on had 2 cores:
/// the writer keeps one about a third busy).
const READERS: usize = 2;

/// Logs each reader reads ahead of the writer, at most: each is a whole session, ready, in memory.
const PREFETCH: usize = 2;

/// Reads whole, in order, every `step`-th of `logs` from the `first`, on the calling thread, making each
/// ready and handing it to `out`; stops when the receiver is gone (the refresh stopped).
fn prefetch(
    sources: &Sources,
    logs: &[&ListedSession],
    first: usize,
    step: usize,
    out: std::sync::mpsc::SyncSender<WholeRead>,
) {
    for listed in logs.iter().skip(first).step_by(step.max(1)) {
        if out
            .send(read_ready(sources, listed, &read_options(listed)))
            .is_err()
        {
            return;
        }
    }
}

/// Reads a log whole (DSH's `inspect()`: lenient header, crash closers) and makes it ready to write. The
/// fold runs once: over the stored events (where a later resume goes on), then on over the closers (a
/// log that does not fold is corrupt, as DSH's inspect() constructing a Session says).
fn read_ready(sources: &Sources, listed: &ListedSession, opts: &ReadOptions) -> WholeRead {
    let path = &listed.path;
    if sources.kind_of(path).is_some() {
        return read_imported(sources, listed);
    }
    let (log, checkpoint) = read_log_with_checkpoint(path, opts).map_err(|e| e.at_path(path))?;
    if !log.header.compatible_with(&listed.header) {
        return Err(LogError::new(
            LogErrorCode::IdMismatch,
            "the header read with the log differs from the listed header (the file changed while it was read)",
        )
        .at_path(path));
    }
    let fold_error = |e: dsh_codec::surface::FoldError| LogError::from(e).at_path(path);
    let mut fold = SurfaceFold::new();
    let pre_closers =
        fold_to_checkpoint(&mut fold, &log, &checkpoint, false).map_err(fold_error)?;
    let data = Arc::new(SessionData::new(
        log.header,
        log.events.into_iter().map(Arc::new).collect(),
    ));
    let docs = docs(data.events(), &fold).collect();
    let session = LoadedSession {
        data: data.clone(),
        live: false,
        path: Some(path.clone()),
    };
    let pre_closers = pre_closers.unwrap_or(fold);
    Ok(ReadyLog {
        header: hit_header(data.header()),
        title: title_json(&session),
        count: data.events().len() as u64,
        docs,
        resume: encode_resume(&pre_closers, &checkpoint),
        resume_from: Some((pre_closers, checkpoint)),
    })
}

/// [`read_ready`] for another harness's transcript: its importer's events, folded once.
fn read_imported(sources: &Sources, listed: &ListedSession) -> WholeRead {
    let path = &listed.path;
    let imported = sources.read(listed)?;
    let fold =
        SurfaceFold::fold(imported.events.iter()).map_err(|e| LogError::from(e).at_path(path))?;
    let data = Arc::new(SessionData::new(
        imported.header,
        imported.events.into_iter().map(Arc::new).collect(),
    ));
    let docs = docs(data.events(), &fold).collect();
    let session = LoadedSession {
        data: data.clone(),
        live: false,
        path: Some(path.clone()),
    };
    Ok(ReadyLog {
        header: hit_header(data.header()),
        title: title_json(&session),
        count: data.events().len() as u64,
        docs,
        resume: None,
        resume_from: None,
    })
}

/// Folds every event of `log` into `fold` and returns the fold as it was at `checkpoint` (where a
/// later resume goes on): before the first event the checkpoint does not cover, which is a crash
/// closer or an event salvaged from a torn zstd frame (the checkpoint stays at that frame's start, so
/// the frame, once complete, is read again from its first event). `None` when that is the end state
/// and `always` is false (the caller then keeps `fold` itself, sparing a copy).
fn fold_to_checkpoint(
    fold: &mut SurfaceFold,
    log: &SessionLog,
    checkpoint: &ReadCheckpoint,
    always: bool,
) -> Result<Option<SurfaceFold>, dsh_codec::surface::FoldError> {
    let covered = checkpoint.next_seq();
    let mut at_checkpoint = None;
    for (k, event) in log.events.iter().enumerate() {
        let uncovered = k >= log.stored().len() || event.seq >= covered;
        if uncovered && at_checkpoint.is_none() {
            at_checkpoint = Some(fold.clone());
        }
        fold.apply(event)?;
    }
    Ok(at_checkpoint.or_else(|| always.then(|| fold.clone())))
}

/// A codec error without its path (the report names the path): `line N: seq S: message`.
fn log_error_text(e: &LogError) -> String {
    let mut out = String::new();
    if let Some(line) = e.line {
        out.push_str(&format!("line {line}: "));
    }
    if let Some(seq) = e.seq {
        out.push_str(&format!("seq {seq}: "));
    }
    out.push_str(&e.message);
    out
}

/// Live/disk pairs whose headers conflict: (id, log path).
fn conflicts(listing: &[ListedSession], live: &[LiveSession]) -> Vec<(String, PathBuf)> {
    let live: HashMap<&str, SessionHeader> = live
        .iter()
        .map(|s| (s.header.id.as_str(), SessionHeader::from(&s.header)))
        .collect();
    listing
        .iter()
        .filter_map(|l| {
            let h = live.get(l.header.id.as_str())?;
            (!h.compatible_with(&l.header)).then(|| (l.header.id.clone(), l.path.clone()))
        })
        .collect()
}

pub(super) fn key_of(row: &SessionRow) -> RowKey {
    match (&row.source, &row.path) {
        (Source::Persisted, Some(p)) => RowKey::Persisted(p.clone()),
        _ => RowKey::Live(row.header.id.clone()),
    }
}
