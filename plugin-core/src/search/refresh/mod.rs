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
use crate::index::checkpointer::{self, Checkpointer};
use crate::index::store::{
    self, Doc, PackedDoc, Replacement, RowKey, SessionRow, Source, Visibility,
};
use crate::index::watch::{Pending, RootWatch};
use crate::index::Index;
use crate::index::{failed, verified};
use crate::reads::{title_in, title_of};
use crate::sources::Sources;

mod batching;
mod listing;
mod readers;
mod record;
mod resume;
mod visibility;
mod write;

use batching::Batching;
use listing::conflicts;
pub use listing::{recorded_listing, ONE_SHOT_REUSE, SWEEP_EVERY};
use readers::*;
use resume::*;

/// The epoch of a live session: it changes on anything other than a pure append, so (id, epoch,
/// event count) says whether what is indexed is still a prefix of what the host holds.
fn live_epoch(session: &LiveSession) -> u64 {
    session.epoch
}

/// From how many logs to write a refresh checkpoints beside the writer (`index::checkpointer`): an
/// append or a few changed logs never reach SQLite's 1,000-page checkpoint, a cold build does dozens
/// of times.
const CHECKPOINT_BESIDE_FROM: usize = 64;

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

/// Why a resumed read could not be written.
enum Failure {
    /// The log: reported and left out.
    Log(LogError),
    /// The index: the refresh fails.
    Plugin(PluginError),
}

/// A copy of the session table, shared between the writer side and reader connections that read the
/// same committed state: a one-shot command read all 10,000 rows of a large root twice (once per side),
/// a large share of its time. Written copy-on-write: a write while a reader holds the same copy
/// copies it once, and the reader keeps the state it read.
#[derive(Debug, Clone, Default)]
pub struct SharedRows(Arc<RowMap>);

/// The rows by key, hashed with foldhash (seeded per process) rather than SipHash, as are the
/// comparison's maps of listed paths: keys of about 100 bytes, 10,000 of them on a large root, built
/// and probed by every full comparison.
pub type RowMap = HashMap<RowKey, SessionRow, foldhash::fast::RandomState>;

impl SharedRows {
    pub fn new(rows: RowMap) -> Self {
        Self(Arc::new(rows))
    }
}

impl std::ops::Deref for SharedRows {
    type Target = RowMap;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for SharedRows {
    fn deref_mut(&mut self) -> &mut Self::Target {
        Arc::make_mut(&mut self.0)
    }
}

impl FromIterator<(RowKey, SessionRow)> for SharedRows {
    fn from_iter<I: IntoIterator<Item = (RowKey, SessionRow)>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

/// The open index and what the search knows about it in memory.
pub(super) struct Engine {
    pub index: Index,
    /// Every row of `sessions`, mirrored, once loaded ([`Engine::ensure_rows`]): a process whose walk
    /// shows the index current ([`Engine::verify`]) never loads them.
    pub rows: SharedRows,
    rows_loaded: bool,
    /// The index was found current from a walk's digest alone ([`Engine::verify`]) at `refreshed_at`,
    /// with no listing made: within [`ONE_SHOT_REUSE`] that stands for a listing.
    pub(in crate::search) verified: bool,
    /// The digest of the walks [`Engine::listing`] was listed from, when they vouch for it.
    listing_digest: Option<dsh_codec::log::layout::WalkDigest>,
    /// The cross-session generation: the one every row written by the last refresh carries.
    pub generation: u64,
    watch: Option<(Option<PathBuf>, RootWatch)>,
    /// One watch per other harness's folder: an unchanged folder is not listed again.
    source_watches: Vec<(PathBuf, RootWatch)>,
    /// Shared with the refresh that compares it (a clone of 10,000 entries per refresh was a large
    /// share of a one-shot command); written copy-on-write.
    listing: Option<Arc<Vec<ListedSession>>>,
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
    /// What the last comparison saw, when it left every row matching the listing: a refresh whose
    /// listing was patched then compares only the patched paths. `None`: the next one compares all.
    compared: Option<Compared>,
    /// Comparisons that looked only at the patched paths (tests).
    pub(super) narrowed: u64,
    /// Every comparison looks at the whole listing (the reference side of the tests).
    #[cfg(test)]
    pub(super) compare_all_always: bool,
}

/// The live sessions a comparison saw (id → header) and the live/disk conflicts it found. While the
/// live sessions and their headers stay the same, which logs they hide and which conflict changes only
/// at the paths a patched listing changed.
#[derive(Debug, Clone, PartialEq)]
struct Compared {
    live: HashMap<String, HitHeader>,
    conflicts: Vec<(String, PathBuf)>,
}

impl Compared {
    fn live_of(live: &[LiveSession]) -> HashMap<String, HitHeader> {
        live.iter()
            .map(|s| {
                (
                    s.header.id.to_string(),
                    hit_header(&SessionHeader::from(&s.header)),
                )
            })
            .collect()
    }

    /// Whether `live` is the same sessions with the same headers (event counts may differ).
    fn same_live(&self, live: &[LiveSession]) -> bool {
        self.live.len() == live.len()
            && live.iter().all(|s| {
                self.live.get(s.header.id.as_str())
                    == Some(&hit_header(&SessionHeader::from(&s.header)))
            })
    }
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
    events: impl IntoIterator<Item = &'a Event> + 'a,
    fold: &'a SurfaceFold,
) -> impl Iterator<Item = PackedDoc> + 'a {
    events.into_iter().filter_map(move |e| {
        let text = dsh_codec::text::event_text(e);
        (!text.is_empty())
            .then(|| pack_doc(&e.into(), text, fold.label(e.seq).unwrap_or(Label::LogOnly)))
    })
}

/// The fold of every event, the title as stored, the resume state.
pub(crate) type PublishedState = (SurfaceFold, Option<String>, Option<Vec<u8>>);

/// What a publisher sends of a log read whole, as the embedded index stores it: the folded title (as
/// [`title_json`]) and, given the log's checkpoint, the resume state there, with the fold of every event.
pub(crate) fn published_state(
    log: &SessionLog,
    checkpoint: Option<&ReadCheckpoint>,
) -> Result<PublishedState, dsh_codec::surface::FoldError> {
    let mut fold = SurfaceFold::new();
    let resume = match checkpoint {
        Some(checkpoint) => {
            let pre_closers = readers::fold_to_checkpoint(&mut fold, log, checkpoint, false)?;
            resume::encode_resume(pre_closers.as_ref().unwrap_or(&fold), checkpoint)
        }
        None => {
            for event in &log.events {
                fold.apply(event)?;
            }
            None
        }
    };
    let title = title_json_of(title_in(log.events.iter(), || {
        crate::corpus::describe(&log.header.id, None)
    }));
    Ok((fold, title, resume))
}

/// The session's folded title (spec §7.1) as stored: `{title, messageSeqs, source, eventSeq, updatedAt}`
/// or `{error}` when the title event breaks the title contract.
fn title_json(session: &LoadedSession) -> Option<String> {
    title_json_of(title_of(session))
}

/// [`title_json`] of a title as folded.
fn title_json_of(title: Result<Option<host_api::abi::Title>, PluginError>) -> Option<String> {
    match title {
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
        // What earlier processes found broken, not read again until the file changes.
        let failed = failed::load(conn)
            .unwrap_or_default()
            .into_iter()
            .map(|(path, stamp, report)| (path, (stamp, report)))
            .collect();
        Ok(Self {
            index,
            rows: SharedRows::default(),
            rows_loaded: false,
            verified: false,
            listing_digest: None,
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
            compared: None,
            narrowed: 0,
            #[cfg(test)]
            compare_all_always: false,
        })
    }

    /// The rows, shared, when they are loaded and those of committed state `version` (a reader's
    /// transaction reads that state): a new reader connection then reads no row from the index.
    pub fn rows_at(&self, version: (u64, u64)) -> Option<SharedRows> {
        (self.rows_loaded && self.version == version).then(|| self.rows.clone())
    }

    /// Loads every session row, when not loaded yet, with the committed state they are of.
    fn ensure_rows(&mut self) -> Result<(), PluginError> {
        if self.rows_loaded {
            return Ok(());
        }
        let conn = self
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        // The state first: a commit between the two reads makes the rows newer than it, and the next
        // resync reads that commit's rows again (never the other way round, which would miss it).
        let (generation, _) = store::state(conn).map_err(index_failed)?;
        let version = store::version(conn).map_err(index_failed)?;
        let rows = store::load_rows(conn).map_err(index_failed)?;
        self.rows = rows.into_iter().map(|row| (key_of(&row), row)).collect();
        self.rows_loaded = true;
        self.generation = generation;
        self.version = version;
        Ok(())
    }

    /// Whether the index, as committed, is what a refresh would make of the disk now, known from a walk
    /// alone ([`crate::index::verified`]): the index holds the digest of the walks its last whole
    /// refresh listed from, no one has committed since, no session is live here (live sessions are
    /// compared by their rows), and a walk of the root and the other harnesses' folders now has that
    /// digest. Then what that refresh left out is what this one reports, and nothing else is loaded.
    fn verify(&mut self, corpus: &Corpus) -> Result<bool, PluginError> {
        let conn = self
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let Ok(Some(record)) = verified::load(conn) else {
            return Ok(false);
        };
        let version = store::version(conn).map_err(index_failed)?;
        if record.commits != version.1 || !corpus.live_sessions().is_empty() {
            return Ok(false);
        }
        if corpus.walk_digest() != Some(record.digest) {
            return Ok(false);
        }
        self.skipped = record.skipped;
        self.version = version;
        self.generation = version.0;
        Ok(true)
    }

    /// After a whole refresh that left the index matching its listing with no session live: records
    /// the digest of the walks that listing came from ([`crate::index::verified`]), unless the index
    /// already holds that record. Best effort: a failed write only means the next process compares.
    fn record_verified(&mut self) {
        let no_live = self.compared.as_ref().is_some_and(|c| c.live.is_empty());
        let Some(digest) = self.listing_digest.filter(|_| no_live) else {
            return;
        };
        if self.index.read_only().is_some() {
            return;
        }
        let Some(conn) = self.index.connection() else {
            return;
        };
        let Ok(version) = store::version(conn) else {
            return;
        };
        let current = verified::load(conn).ok().flatten();
        let same = current.is_some_and(|r| {
            r.commits == version.1 && r.digest == digest && r.skipped == self.skipped
        });
        if !same {
            let _ = verified::store(conn, &digest, &self.skipped);
        }
    }

    /// Sets whether the host lives long (see [`Engine::long_lived`]'s field).
    pub fn long_lived(mut self, long_lived: bool) -> Self {
        self.long_lived = long_lived;
        self
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
            self.compared = None;
            self.verified = false;
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
                    self.rows_loaded = true;
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
    /// since this engine last did, the rows it wrote are reloaded ([`catch_up`]) and what memory says
    /// about their sources is dropped (their resume states, failures, and the listing unless the watch
    /// keeps it current), so the refresh compares against what is committed.
    pub fn resync(&mut self) -> Result<(), PluginError> {
        let conn = self
            .index
            .connection()
            .ok_or_else(|| index_failed("index is closed"))?;
        let version = store::version(conn).map_err(index_failed)?;
        if version == self.version {
            return Ok(());
        }
        self.verified = false;
        if !self.rows_loaded {
            // Nothing in memory describes the rows: the next refresh that needs them loads them now.
            self.compared = None;
            self.generation = version.0;
            self.version = version;
            self.listing = None;
            self.resume.clear();
            self.resume_events = 0;
            self.failed.clear();
            self.live_failed.clear();
            return Ok(());
        }
        let caught = catch_up(conn, &mut self.rows, Some(self.version.1), version.1)
            .map_err(index_failed)?;
        // Rows another process wrote need not match this process's listing.
        self.compared = None;
        self.generation = version.0;
        self.version = version;
        match caught.touched {
            // Only the rows another process wrote: what memory says of their logs is dropped, the rest
            // (resume states, and the listing while the watch keeps it current) still holds.
            Some(touched) => {
                for key in touched {
                    if let RowKey::Persisted(path) = key {
                        self.take_resume(&path);
                    }
                }
                if !self.is_watching() {
                    self.listing = None;
                }
            }
            None => {
                self.listing = None;
                self.resume.clear();
                self.resume_events = 0;
            }
        }
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
                // Set up beside this refresh: until it is, every look lists everything.
                self.watch = Some((root.clone(), RootWatch::start(root.as_deref())));
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
        if !self.long_lived {
            match pending {
                // The same command's second look, right after the index was found current.
                Pending::Nothing if self.verified && corpus.live_sessions().is_empty() => {
                    return Ok(());
                }
                Pending::Everything if self.verify(corpus)? => {
                    self.verified = true;
                    self.refreshed_at = Some(Instant::now());
                    return Ok(());
                }
                _ => {}
            }
        }
        self.verified = false;
        self.ensure_rows()?;
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
            let (listing, digest) = corpus.list_persisted_digest()?;
            self.listing = Some(listing);
            self.listing_digest = digest;
            self.reads.listings += 1;
            self.listed_at = Some(now);
        } else if sources_dirty {
            self.listing_digest = None;
            let fresh = corpus.list_sources();
            if let Some(listing) = self.listing.as_mut().map(Arc::make_mut) {
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
            self.record_verified();
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
        // A patched listing differs from the one the last comparison matched only at the reported
        // paths; while the live sessions are the same, nothing else can have changed either.
        let narrow: Option<&[PathBuf]> = match pending {
            Pending::Paths(paths) if patched => Some(paths.as_slice()),
            Pending::Nothing if patched => Some(&[][..]),
            _ => None,
        }
        .filter(|_| {
            !sources_dirty
                && self.may_narrow()
                && self
                    .compared
                    .as_ref()
                    .is_some_and(|seen| seen.same_live(&live))
        });
        let (persisted_work, mut deletes) = match narrow {
            Some(paths) => {
                self.narrowed += 1;
                self.compare_paths(&listing, paths, &live_ids)
            }
            None => self.compare_all(&listing, &live_ids),
        };
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

        // The live/disk conflicts: those the last comparison found, bar the patched paths', and the
        // patched logs' own.
        let mut found: Vec<(String, PathBuf)> = match (narrow, &self.compared) {
            (Some(paths), Some(seen)) => {
                let patched: HashSet<&[u8]> = paths.iter().map(|p| path_bytes(p)).collect();
                let patched_logs: Vec<ListedSession> = listing
                    .iter()
                    .filter(|l| patched.contains(path_bytes(&l.path)))
                    .cloned()
                    .collect();
                seen.conflicts
                    .iter()
                    .filter(|(_, p)| !paths.contains(p))
                    .cloned()
                    .chain(conflicts(&patched_logs, &live))
                    .collect()
            }
            _ => conflicts(&listing, &live),
        };
        found.sort_by(|a, b| a.1.cmp(&b.1));
        // Visibility changes only at the patched paths and live rows while the conflicting ids stay.
        let ids =
            |c: &[(String, PathBuf)]| c.iter().map(|(id, _)| id.clone()).collect::<HashSet<_>>();
        let narrow_visibility = narrow.filter(|_| {
            self.compared
                .as_ref()
                .is_some_and(|seen| ids(&seen.conflicts) == ids(&found))
        });

        let total = (deletes.len() + persisted_work.len() + live_work.len()) as u64;
        let generation = self.generation + 1;
        let mut wrote = false;
        let mut done = 0u64;
        progress(0, total);
        let mut batching = Batching::new();
        // A large refresh's checkpoints run beside the writer instead of on it (see
        // `index::checkpointer`).
        let checkpointer = (persisted_work.len() >= CHECKPOINT_BESIDE_FROM)
            .then(|| {
                let conn = self.index.connection()?;
                Checkpointer::start(self.index.path(), conn)
            })
            .flatten();
        if checkpointer.is_some() {
            batching.restart_the_log();
        }
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
            // Logs that must be read whole (no row, or a file that did not only grow: replaced,
            // touched, edited in place) are read on reader threads ahead of the writes; the others
            // (resumes) here, in order.
            let new_logs: Vec<&ListedSession> = persisted_work
                .iter()
                .copied()
                .filter(|l| !self.may_resume(l))
                .collect();
            // Reading is most of the work: reader threads read the new logs ahead of the writer
            // (`readers::ReadAhead`), which takes them in listing order.
            let readers = if new_logs.len() > 1 { READERS } else { 0 };
            let ahead = ReadAhead::new(&new_logs, readers);
            std::thread::scope(|scope| -> Result<(), PluginError> {
                // The readers free buffers of several MiB many times a second: they go back to the
                // system at once while the readers run, which bounds a cold build's memory.
                let _purge = (readers > 0).then(dsh_alloc::purge_eagerly);
                // However the writes end, the readers stop (a reader waiting for room would wait on).
                let _stop = ahead.stop_when_dropped();
                for _ in 0..readers {
                    let sources = corpus.sources();
                    let ahead = &ahead;
                    scope.spawn(move || {
                        readers::yield_to_the_writer();
                        ahead.read(|listed| read_ready(sources, listed, &read_options(listed)))
                    });
                }
                let mut next_new = 0;
                for listed in &persisted_work {
                    if cancelled() {
                        return Err(aborted());
                    }
                    let prefetched = (readers > 0 && new_logs.get(next_new) == Some(listed))
                        .then(|| {
                            next_new += 1;
                            ahead.take()
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
            wrote |=
                self.update_visibility(&listing, &live, &found, narrow_visibility, generation)?;
            batching.commit(self.conn()?)
        })();
        if let (Some(checkpointer), Some(conn)) = (checkpointer, self.index.connection()) {
            checkpointer.finish(conn);
        }
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
        // A log a live session hides is not read (as a fresh index would not read it), so a failure
        // recorded before the session went live is not reported while it is.
        skipped.extend(
            self.failed
                .values()
                .filter(|(_, s)| s.id.as_ref().is_none_or(|id| !live_ids.contains(id)))
                .map(|(_, s)| s.clone()),
        );
        skipped.extend(self.live_failed.values().map(|(_, s)| s.clone()));
        skipped.extend(found.iter().map(|(id, path)| Skipped {
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
        self.compared = Some(Compared {
            live: Compared::live_of(&live),
            conflicts: found,
        });
        Ok(())
    }
}

impl Engine {
    /// Every listed log compared with its row, in one pass, by the path's bytes and the stamp's text,
    /// allocating nothing for an unchanged log (10,000 of them in a one-shot command over a large
    /// root): the logs to (re)index in listing order, and the rows to delete (logs gone, live sessions
    /// ended). Failures of logs no longer listed are forgotten.
    fn compare_all<'l>(
        &mut self,
        listing: &'l [ListedSession],
        live_ids: &HashSet<String>,
    ) -> (Vec<&'l ListedSession>, Vec<i64>) {
        let mut work: Vec<&ListedSession> = Vec::new();
        let listed_paths: HashSet<&[u8], foldhash::fast::RandomState> =
            listing.iter().map(|l| path_bytes(&l.path)).collect();
        let by_path: HashMap<&[u8], &SessionRow, foldhash::fast::RandomState> = self
            .rows
            .iter()
            .filter_map(|(k, r)| match k {
                RowKey::Persisted(p) => Some((path_bytes(p), r)),
                RowKey::Live(_) => None,
            })
            .collect();
        for listed in listing.iter() {
            if live_ids.contains(&listed.header.id) {
                continue; // hidden while live; indexed when the live session goes away
            }
            let unchanged = by_path
                .get(path_bytes(&listed.path))
                .is_some_and(|r| is_stamp_of(&r.stamp, &listed.revision));
            if !unchanged && !self.still_broken(listed) {
                work.push(listed);
            }
        }
        let deletes = self
            .rows
            .iter()
            .filter(|(k, _)| match k {
                RowKey::Persisted(p) => !listed_paths.contains(path_bytes(p)),
                RowKey::Live(id) => !live_ids.contains(id),
            })
            .map(|(_, r)| r.sid)
            .collect();
        let gone: Vec<PathBuf> = self
            .failed
            .keys()
            .filter(|p| !listed_paths.contains(path_bytes(p)))
            .cloned()
            .collect();
        for path in gone {
            self.forget_failure(&path);
        }
        (work, deletes)
    }

    /// [`Engine::compare_all`] for a listing that changed only at `paths` since a comparison that left
    /// every row matching it, with the same live sessions: only those paths are looked at. The same
    /// logs come out, in the same order.
    fn compare_paths<'l>(
        &mut self,
        listing: &'l [ListedSession],
        paths: &[PathBuf],
        live_ids: &HashSet<String>,
    ) -> (Vec<&'l ListedSession>, Vec<i64>) {
        let mut work: Vec<(usize, &ListedSession)> = Vec::new();
        let mut deletes = Vec::new();
        let mut seen: HashSet<&Path> = HashSet::new();
        for path in paths {
            if !seen.insert(path.as_path()) {
                continue;
            }
            let key = RowKey::Persisted(path.clone());
            match listing
                .iter()
                .position(|l| path_bytes(&l.path) == path_bytes(path))
            {
                Some(at) => {
                    let listed = &listing[at];
                    if live_ids.contains(&listed.header.id) {
                        continue;
                    }
                    let unchanged = self
                        .rows
                        .get(&key)
                        .is_some_and(|r| is_stamp_of(&r.stamp, &listed.revision));
                    if !unchanged && !self.still_broken(listed) {
                        work.push((at, listed));
                    }
                }
                None => {
                    if let Some(row) = self.rows.get(&key) {
                        deletes.push(row.sid);
                    }
                    self.forget_failure(path);
                }
            }
        }
        work.sort_unstable_by_key(|(at, _)| *at);
        (work.into_iter().map(|(_, l)| l).collect(), deletes)
    }

    #[cfg(test)]
    fn may_narrow(&self) -> bool {
        !self.compare_all_always
    }

    #[cfg(not(test))]
    fn may_narrow(&self) -> bool {
        true
    }

    /// Whether `listed` failed to read at the revision it lists with (not retried until it changes).
    fn still_broken(&self, listed: &ListedSession) -> bool {
        !self.failed.is_empty()
            && self
                .failed
                .get(&listed.path)
                .is_some_and(|(s, _)| is_stamp_of(s, &listed.revision))
    }
}

fn path_bytes(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes()
}

/// Whether `stamp` is `revision` as written ([`Revision`]'s `Display`: five decimal numbers joined by
/// colons), compared part by part, each number written on the stack with `itoa` rather than the whole
/// revision through `fmt` (called once per listed log, 10,000 times on a large root).
fn is_stamp_of(stamp: &str, revision: &Revision) -> bool {
    let mut parts = stamp.split(':');
    let mut digits = itoa::Buffer::new();
    let mut next_is = |part: &str| parts.next() == Some(part);
    next_is(digits.format(revision.dev))
        && next_is(digits.format(revision.ino))
        && next_is(digits.format(revision.size))
        && next_is(digits.format(revision.mtime_ns))
        && next_is(digits.format(revision.ctime_ns))
        && parts.next().is_none()
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.long_lived {
            // A process that answers one command and exits leaves its copies of the session rows and
            // of the listing (10,000 entries each on a large root, shared with the readers and the
            // corpus) to the exit: freeing them entry by entry was a tenth of such a command's time.
            // The index itself still closes below, as always.
            std::mem::forget(std::mem::take(&mut self.rows));
            std::mem::forget(self.listing.take());
        }
    }
}

pub(super) fn key_of(row: &SessionRow) -> RowKey {
    match (&row.source, &row.path) {
        (Source::Persisted, Some(p)) => RowKey::Persisted(p.clone()),
        _ => RowKey::Live(row.header.id.clone()),
    }
}

/// What [`catch_up`] did to a copy of the session rows.
#[derive(Debug)]
pub(super) struct CaughtUp {
    /// Rows read from the index.
    pub read: u64,
    /// The keys of the rows written or removed since the copy, or `None` when it was reloaded whole.
    pub touched: Option<Vec<RowKey>>,
}

/// Brings `rows`, a copy of the session table at commit `held` (`None`: no copy yet), to commit `now`,
/// the state `conn`'s transaction reads. Only the rows written since and the removals since are read:
/// reloading all of them on every commit made readers beside a writer spend their time reloading. The
/// copy is reloaded whole when it is older than the removals the index keeps, or newer than `now` (an
/// index built again from nothing counts its commits from zero).
pub(super) fn catch_up(
    conn: &rusqlite::Connection,
    rows: &mut SharedRows,
    held: Option<u64>,
    now: u64,
) -> rusqlite::Result<CaughtUp> {
    let changes = match held {
        Some(held) if held == now => {
            return Ok(CaughtUp {
                read: 0,
                touched: Some(Vec::new()),
            })
        }
        Some(held) if held < now => store::changes_since(conn, held)?,
        _ => None,
    };
    let Some(changes) = changes else {
        *rows = store::load_rows(conn)?
            .into_iter()
            .map(|row| (key_of(&row), row))
            .collect();
        return Ok(CaughtUp {
            read: rows.len() as u64,
            touched: None,
        });
    };
    let mut touched = Vec::new();
    if !changes.removed.is_empty() {
        let removed: HashSet<i64> = changes.removed.into_iter().collect();
        rows.retain(|key, row| {
            let gone = removed.contains(&row.sid);
            if gone {
                touched.push(key.clone());
            }
            !gone
        });
    }
    let read = changes.written.len() as u64;
    for row in changes.written {
        let key = key_of(&row);
        touched.push(key.clone());
        rows.insert(key, row);
    }
    Ok(CaughtUp {
        read,
        touched: Some(touched),
    })
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    /// The part-by-part comparison says what comparing with the written revision said, for negative
    /// and 128-bit times too, and a stamp written another way (a sign, a leading zero, a part more or
    /// less) is not the revision.
    #[test]
    fn a_stamp_is_the_revision_exactly_when_it_is_the_revision_as_written() {
        let revisions = [
            Revision {
                dev: 2049,
                ino: 1_234_567,
                size: 0,
                mtime_ns: 1_764_000_000_123_456_789,
                ctime_ns: 1_764_000_000_123_456_790,
            },
            Revision {
                dev: u64::MAX,
                ino: 0,
                size: u64::MAX,
                mtime_ns: i128::MIN,
                ctime_ns: -1,
            },
            Revision {
                dev: 1,
                ino: 2,
                size: 3,
                mtime_ns: i128::MAX,
                ctime_ns: 0,
            },
        ];
        for revision in &revisions {
            let written = revision.to_string();
            assert!(is_stamp_of(&written, revision), "{written}");
            for other in &revisions {
                assert_eq!(is_stamp_of(&other.to_string(), revision), other == revision);
            }
            for variant in [
                format!("+{written}"),
                format!("0{written}"),
                format!("{written}:0"),
                written.rsplit_once(':').unwrap().0.to_string(),
                written.replace(':', ";"),
                String::new(),
            ] {
                assert!(!is_stamp_of(&variant, revision), "{variant:?}");
            }
        }
    }
}
