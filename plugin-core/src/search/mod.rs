//! Session search (spec §4, DESIGN.md "Data flow: a search"): `search_sessions` across sessions,
//! `search_events` inside one, `diagnostics` and the indexed `titles`, as plain Rust entry points the
//! service wires to the ABI.
//!
//! Every call runs: normalise the request (spec §4.2, first failure wins) → bring the index up to date
//! ([`refresh`], on the writer side; a call that finds another thread refreshing answers at once from
//! what is committed, see [`Search::prepare`]) → on a reader connection of its own, inside one read
//! transaction: decode the cursor → check the predicate budgets → rank the page: a range scan of a
//! phrase's stored ranking keys (`index::hot`) when they rank it, else for a phrase of several words
//! its tokens' lists as bounded candidates (`bounded`), both with event clauses checked per stored
//! row; else (no event clauses) the spans-first read, else one FTS5 scan → snippets for the page's
//! hits only → a page with an opaque cursor and the `skipped` report. A page therefore never mixes
//! committed states.
//!
//! Where this differs from the reference on purpose (DESIGN.md deviation 2): a session left out of search
//! is reported in every page's `skipped` instead of failing the search, and `search_events` on such a
//! session names why (`SESSION_QUERY_SOURCE_CONFLICT` for a conflicting live/disk pair,
//! `SESSION_QUERY_PERSISTENCE_FAILED` for an unreadable log) rather than `SESSION_QUERY_SESSION_NOT_FOUND`.
//!
//! Other processes may use the same index at the same time (the writer role is taken per update,
//! `index::lock`); inside one process only one plugin generation opens it (the host's drain-then-open).
//!
//! Module map: [`request`] (normalisation, budgets, fingerprints), [`refresh`] (incremental indexing),
//! [`sql`] (the statements), [`rank`] (session clauses and cross-session ranking), [`snippet`] (`makeSnippet`), [`cursor`] (MAC-protected cursors). The index
//! file itself is `crate::index`.

mod bounded;
mod candidates;
pub mod cursor;
mod newest;
pub mod rank;
pub mod refresh;
pub mod request;
pub mod snippet;
pub mod sql;
pub mod team;

#[cfg(test)]
mod bounded_tests;
#[cfg(test)]
mod fresh_tests;
#[cfg(test)]
mod health_tests;
#[cfg(test)]
mod hot_tests;
#[cfg(test)]
mod patched_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod verified_tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use abi_stable::std_types::RStr;
use host_api::abi::wire::search::Skipped;
use host_api::abi::LogLevel;

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
use crate::index::{self, cjk, common, hot, Index};
use crate::sources::SourceKind;
use cursor::Cursors;
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
    /// `openAt: first-search` not yet opened, or an open that may succeed when tried again (another
    /// process was creating the index).
    Pending,
    Open(Box<Engine>),
    /// A failed open, remembered (spec §4.9: the readiness promise is memoised).
    Failed(PluginError),
    /// The index was found damaged while in use: the next call deletes and rebuilds it.
    Damaged(String),
}

/// What the last refresh of this instance knew that the index does not hold, for readers.
#[derive(Default)]
struct Published {
    skipped: Vec<Skipped>,
    watching: bool,
    reads: refresh::ReadCounts,
    read_only: Option<String>,
    rebuilt: Option<String>,
    writer_busy: Option<String>,
}

/// A reader's own connection and its copy of the session rows at one committed state.
struct Reader {
    conn: Connection,
    cached: Option<Cached>,
}

struct Cached {
    version: (u64, u64),
    /// The session rows of `version`, once a call needed them all (a search for a rare term reads
    /// only its hits' rows: `candidates`).
    rows: std::cell::OnceCell<refresh::SharedRows>,
    cursors: Cursors,
}

/// One committed state of the index, as a search reads it: every statement of one call runs inside
/// one read transaction of `conn`, and `rows` is the session table of that same state, loaded when a
/// call first needs it whole ([`View::rows`]).
struct View<'a> {
    conn: &'a Connection,
    rows: &'a std::cell::OnceCell<refresh::SharedRows>,
    /// Counts the rows read from the index ([`Search::rows_read`]).
    rows_read: &'a AtomicU64,
    /// The cross-session generation cursors are bound to: the stored generation and the count of
    /// committed steps, so a page never continues a page of another committed state.
    generation: String,
    stored_generation: u64,
    cursors: &'a Cursors,
    published: &'a Published,
}

impl<'a> View<'a> {
    /// Every session row of this committed state, read from the index the first time a call asks.
    fn rows(&self) -> Result<&'a refresh::RowMap, PluginError> {
        if let Some(rows) = self.rows.get() {
            return Ok(rows);
        }
        let rows: refresh::SharedRows = store::load_rows(self.conn)
            .map_err(index_failed)?
            .into_iter()
            .map(|row| (refresh::key_of(&row), row))
            .collect();
        self.rows_read
            .fetch_add(rows.len() as u64, Ordering::Relaxed);
        Ok(self.rows.get_or_init(|| rows))
    }

    /// The rows when they are in memory already.
    fn loaded_rows(&self) -> Option<&'a refresh::RowMap> {
        self.rows.get().map(|rows| &**rows)
    }
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

/// How long a search waits for another thread's first refresh of this instance (nothing committed to
/// answer from yet) before answering from the index as it stands, and for another process's update
/// before the same.
const REFRESH_WAIT: Duration = Duration::from_millis(500);

/// Idle reader connections kept for later calls.
const IDLE_READERS: usize = 8;

/// How long a waiting call sleeps at most before it looks at the writer side again (a refresh that
/// ends wakes it at once; this bounds a missed wake-up).
const REFRESH_POLL: Duration = Duration::from_millis(10);

/// Refreshes of one instance, counted so that calls arriving while one runs share the next one
/// instead of each running its own after the other (see [`Search::prepare`]).
#[derive(Debug, Default)]
struct Refreshes {
    /// Refreshes begun so far; the number is the id of the latest.
    started: u64,
    /// The id of the latest refresh that ended (refreshes run one at a time, so ids end in order).
    ended: u64,
    /// How it failed, if it did: the error of every call that shared it.
    failure: Option<PluginError>,
}

impl Refreshes {
    /// What a call that arrived when `arrived` refreshes had begun learns from the latest refresh:
    /// `None` while none that began after it has ended, or when that one was cancelled (by its own
    /// caller: this call then refreshes itself).
    fn shared(&self, arrived: u64) -> Option<Result<(), PluginError>> {
        if self.ended <= arrived {
            return None;
        }
        match &self.failure {
            None => Some(Ok(())),
            Some(e) if e.code == ErrorCode::SessionQueryAborted => None,
            Some(e) => Some(Err(e.clone())),
        }
    }
}

/// The session search of one plugin instance.
///
/// Two sides: the writer (the [`Engine`] behind `state`, which brings the index up to date, holding the
/// index's writer role while it writes) and the readers (`readers`: one connection per concurrent call,
/// each reading one committed state). A refresh never blocks a reader: a call that finds another
/// thread refreshing answers from what is committed ([`Search::prepare`]).
pub struct Search {
    limits: Limits,
    index_path: PathBuf,
    host: Arc<HostContextBox>,
    // Readers close before the writer (fields drop in order): the last connection to close checkpoints
    // the WAL into the file and removes it, which a read-only connection cannot do.
    readers: Mutex<Vec<Reader>>,
    state: Mutex<State>,
    published: Mutex<Arc<Published>>,
    disabled: bool,
    /// Readers open the index without locks (a read-only index in a folder this process cannot write).
    immutable: AtomicBool,
    /// `longLived` of the config: whether the engine watches the root.
    long_lived: bool,
    /// Session rows reader connections read from the index so far (see [`Search::rows_read`]).
    rows_read: AtomicU64,
    refreshes: Mutex<Refreshes>,
    /// Signalled whenever a refresh ends.
    refreshed: Condvar,
    /// Whether a refresh of the open index has ended well: from then on the committed index answers a
    /// call that finds another thread refreshing (see [`Search::prepare`]).
    committed: AtomicBool,
    /// When this instance last refreshed with the writer role (see [`OWN_REFRESH_EVERY`]).
    own_refresh: Mutex<Option<Instant>>,
}

fn no_progress(_: u64, _: u64) {}

/// How often a call that waits for another process's writer role looks again.
const WRITER_POLL: Duration = Duration::from_millis(2);

/// How long a process goes at most without waiting for a refresh of its own while other processes keep
/// the writer role busy: what only it can see (its host's live sessions, a root another writer does
/// not watch) is indexed within about this, and one refresh, even then.
const OWN_REFRESH_EVERY: Duration = Duration::from_secs(1);

/// The index's writer role for a refresh; `None` when another process keeps it, and this call then
/// answers from the index as it stands. A role that is free is taken at once. A role held by another
/// process is its update under way: a process that refreshed itself within [`OWN_REFRESH_EVERY`]
/// answers at once from what is committed, as a thread beside another thread's refresh does. One
/// whose own last refresh is older (`overdue`) waits at most [`REFRESH_WAIT`]: until that process
/// commits (its update brought the index up to date as far as it could see, and the call answers from
/// there) or lets go of the role (which it then takes). Beside a stream of appends, waiting for the
/// role and then refreshing once more made every process take the writer role in turn, each search
/// queued behind the other processes' refreshes.
fn writer_role(engine: &Engine, overdue: bool) -> Result<Option<index::Writing>, PluginError> {
    if let Some(writing) = engine.index.writer(Duration::ZERO)? {
        return Ok(Some(writing));
    }
    if !engine.index.has_writer_lock() || !overdue {
        // This process only reads the index, or keeps up with it: nothing to wait for.
        return Ok(None);
    }
    let committed = || {
        engine
            .index
            .connection()
            .and_then(|c| store::version(c).ok())
    };
    let before = committed();
    let deadline = Instant::now() + REFRESH_WAIT;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        std::thread::sleep(WRITER_POLL.min(deadline - now));
        // The commit is looked at before the role: the other writer lets go of the role right after
        // it commits.
        if before.is_some() && committed() != before {
            return Ok(None);
        }
        if let Some(writing) = engine.index.writer(Duration::ZERO)? {
            return Ok(Some(writing));
        }
    }
}

/// A damage report for this call; the next one rebuilds.
fn rebuilt_next(e: PluginError) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!(
            "{}; the index is rebuilt from the session logs on the next call",
            e.message
        ),
    )
}

fn index_failed<E: std::fmt::Display + 'static>(what: E) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!("session search index failed: {}", index::describe(&what)),
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a search is contained by the service; the engine's state is re-derived from the
    // database by the next refresh, so a poisoned lock is taken over.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Search {
    /// Opens the index at `index_path` now (`openAt: startup`), on first search (`first-search`) or never.
    /// Never fails for the index's sake: a failed open is remembered and reported by every search, so
    /// the instance (and its exact reads) work without an index.
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
        let search = Self {
            limits,
            index_path: index_path.to_path_buf(),
            host,
            readers: Mutex::new(Vec::new()),
            state: Mutex::new(match config.open_at {
                OpenAt::Never => State::Disabled,
                _ => State::Pending,
            }),
            published: Mutex::new(Arc::default()),
            disabled: config.open_at == OpenAt::Never,
            immutable: AtomicBool::new(false),
            long_lived: config.long_lived,
            rows_read: AtomicU64::new(0),
            refreshes: Mutex::default(),
            refreshed: Condvar::new(),
            committed: AtomicBool::new(false),
            own_refresh: Mutex::new(None),
        };
        if config.open_at == OpenAt::Startup {
            let mut state = search.lock();
            if let Err(e) = search.engine(&mut state) {
                search.host.log(
                    LogLevel::Warn,
                    RStr::from_str(&format!(
                        "session search is unavailable until the index can be used: {}",
                        e.message
                    )),
                );
            }
        }
        Ok(search)
    }

    /// The logs the open index holds, each with the revision and header it was indexed at, for a
    /// listing that must not open unchanged logs ([`Corpus::seed_known`]). Empty when the index is
    /// not open yet.
    pub fn known_listing(&self) -> Vec<dsh_codec::log::layout::ListedSession> {
        self.seed_loader().map(|load| load()).unwrap_or_default()
    }

    /// Loads [`Search::known_listing`] when called, on a reader connection of its own (so a listing
    /// made inside this search's own refresh can call it): for [`Corpus::seed_known_later`], which
    /// calls it only when the corpus first lists the root. `None` when the index is not open.
    pub fn seed_loader(&self) -> Option<crate::corpus::SeedLoader> {
        if !matches!(&*self.lock(), State::Open(_)) {
            return None;
        }
        let path = self.index_path.clone();
        let immutable = self.immutable.load(Ordering::Relaxed);
        Some(Box::new(move || {
            refresh::recorded_listing(&path, immutable)
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The writer side, waiting at most `wait` for another thread's refresh; `None` when it is still
    /// busy then.
    fn lock_within(&self, wait: Duration) -> Option<MutexGuard<'_, State>> {
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            match self.state.try_lock() {
                Ok(guard) => return Some(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(10));
        }
    }

    /// The open engine, opening it first (for `first-search`, after a retryable failure, after damage,
    /// or when another process replaced the file); `SEARCH_DISABLED` for `never`.
    fn engine<'a>(&self, state: &'a mut State) -> Result<&'a mut Engine, PluginError> {
        let reopen = match state {
            State::Pending => Some(None),
            State::Damaged(why) => Some(Some(why.clone())),
            State::Open(engine) if !engine.index.is_current_file() => Some(None),
            _ => None,
        };
        if let Some(damaged) = reopen {
            // Every connection to the old file goes first (readers included).
            *state = State::Pending;
            self.committed.store(false, Ordering::Release);
            *lock(&self.own_refresh) = None;
            lock(&self.readers).clear();
            let mut damaged = damaged;
            *state = loop {
                let opened = Index::try_open(&self.index_path, self.host.clone(), damaged.clone());
                break match opened.map(Engine::new) {
                    Ok(Ok(engine)) => State::Open(Box::new(engine.long_lived(self.long_lived))),
                    // Damage the open itself did not read (the session rows): delete and build again.
                    Ok(Err(e)) if damaged.is_none() && index::is_damage_message(&e.message) => {
                        damaged = Some(format!("it is damaged ({})", e.message));
                        continue;
                    }
                    Ok(Err(e)) => State::Failed(e),
                    Err(failure) if failure.retry => return Err(failure.error),
                    Err(failure) => State::Failed(failure.error),
                };
            };
            if let State::Open(engine) = state {
                self.immutable
                    .store(engine.index.immutable(), Ordering::Relaxed);
                let mut published = lock(&self.published);
                *published = Arc::new(Published {
                    read_only: engine.index.read_only().map(String::from),
                    rebuilt: engine.index.rebuilt().map(String::from),
                    ..Default::default()
                });
            }
        }
        match state {
            State::Open(engine) => Ok(engine),
            State::Failed(e) => Err(e.clone()),
            State::Disabled => Err(disabled()),
            State::Pending | State::Damaged(_) => Err(index_failed("index is not open")),
        }
    }

    fn check_enabled(&self) -> Result<(), PluginError> {
        if self.disabled {
            return Err(disabled());
        }
        Ok(())
    }

    /// How many session rows this instance's reader connections have read from the index: each
    /// connection reads them all once, then only the rows later commits wrote.
    pub fn rows_read(&self) -> u64 {
        self.rows_read.load(Ordering::Relaxed)
    }

    /// Refreshes begun so far (tests of the shared refresh).
    #[cfg(test)]
    fn refreshes_started(&self) -> u64 {
        lock(&self.refreshes).started
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
        let outcome = self.refresh_counted(&mut state, corpus, cancelled, progress, true);
        drop(state);
        self.refreshed.notify_all();
        outcome
    }

    /// [`Search::refresh`] for a call that then answers: waits at most [`REFRESH_WAIT`] for another
    /// thread's refresh of this instance, and otherwise leaves the index as it stands (the call then
    /// answers from what is committed).
    pub fn refresh_for_call(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(), PluginError> {
        match self.lock_within(REFRESH_WAIT) {
            Some(mut state) => {
                let outcome = self.refresh_counted(&mut state, corpus, cancelled, progress, false);
                drop(state);
                self.refreshed.notify_all();
                outcome
            }
            None => Ok(()),
        }
    }

    /// [`Search::refresh_locked`], counted in [`Refreshes`] so that calls waiting meanwhile need not
    /// run another. The caller wakes them ([`Search::refreshed`]) once it let go of the writer side.
    fn refresh_counted(
        &self,
        state: &mut State,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
        insist: bool,
    ) -> Result<(), PluginError> {
        let id = {
            let mut refreshes = lock(&self.refreshes);
            refreshes.started += 1;
            refreshes.started
        };
        let outcome = self.refresh_locked(state, corpus, cancelled, progress, insist);
        if outcome.is_ok() {
            self.committed.store(true, Ordering::Release);
        }
        let mut refreshes = lock(&self.refreshes);
        refreshes.ended = id;
        refreshes.failure = outcome.as_ref().err().cloned();
        outcome
    }

    /// The refresh itself, with the writer side held: takes the index's writer role ([`writer_role`];
    /// `insist`: wait for a busy role even when this instance refreshed itself lately, as an explicit
    /// refresh does); without it, the index is used as it stands.
    fn refresh_locked(
        &self,
        state: &mut State,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        progress: &dyn Fn(u64, u64),
        insist: bool,
    ) -> Result<(), PluginError> {
        let engine = self.engine(state)?;
        let mut busy = None;
        let overdue =
            insist || lock(&self.own_refresh).is_none_or(|at| at.elapsed() >= OWN_REFRESH_EVERY);
        let outcome = match writer_role(engine, overdue) {
            Ok(Some(writing)) => {
                let outcome = engine
                    .resync()
                    .and_then(|()| engine.refresh(corpus, cancelled, progress));
                drop(writing);
                if outcome.is_ok() {
                    *lock(&self.own_refresh) = Some(Instant::now());
                }
                outcome
            }
            Ok(None) => {
                if engine.index.read_only().is_none() {
                    busy = Some(format!(
                        "another process (pid {}) is updating the index; answers come from the index as it stands",
                        engine.index.writer_pid()
                    ));
                }
                Ok(())
            }
            Err(e) => Err(e),
        };
        let published = Published {
            skipped: engine.skipped.clone(),
            watching: engine.is_watching(),
            reads: engine.reads,
            read_only: engine.index.read_only().map(String::from),
            rebuilt: engine.index.rebuilt().map(String::from),
            writer_busy: busy,
        };
        *lock(&self.published) = Arc::new(published);
        match outcome {
            Err(e) if index::is_damage_message(&e.message) => {
                *state = State::Damaged(e.message.to_string());
                Err(rebuilt_next(e))
            }
            other => other,
        }
    }

    /// Before a read: bring the index up to date, unless another thread of this instance is doing so
    /// right now. A call that finds the writer side free runs the refresh itself (or shares one that
    /// began after it arrived and has ended), so its answer holds every change made before it. A call
    /// that finds another thread refreshing answers at once from the committed index: that refresh
    /// never blocks readers of the committed state, and the changes it commits are in the next call's
    /// answer. Waiting for it instead (and for one more, to cover changes made while it ran) tied every
    /// search beside a steady writer to the refreshes' length: throughput collapsed and p99 reached
    /// seconds. Only before anything is committed to read (the index is being opened or first built)
    /// does a call wait, at most [`REFRESH_WAIT`]. Open failures and this call's own refresh failures
    /// are this call's error.
    fn prepare(&self, corpus: &Corpus, cancelled: &dyn Fn() -> bool) -> Result<(), PluginError> {
        let arrived = lock(&self.refreshes).started;
        let deadline = Instant::now() + REFRESH_WAIT;
        loop {
            let guard = match self.state.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(mut state) = guard {
                if let Some(shared) = lock(&self.refreshes).shared(arrived) {
                    // Another call's refresh began after this one arrived and has ended.
                    return shared;
                }
                let outcome =
                    self.refresh_counted(&mut state, corpus, cancelled, &no_progress, false);
                drop(state);
                self.refreshed.notify_all();
                return outcome;
            }
            if cancelled() {
                return Err(aborted());
            }
            if self.committed.load(Ordering::Acquire) {
                return Ok(());
            }
            let refreshes = lock(&self.refreshes);
            if let Some(shared) = refreshes.shared(arrived) {
                return shared;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            let seen = refreshes.ended;
            let _ = self.refreshed.wait_timeout_while(
                refreshes,
                (deadline - now).min(REFRESH_POLL),
                |r| r.ended == seen,
            );
        }
    }

    /// Runs `read` over one committed state of the index, on a reader connection of its own.
    fn read<T>(
        &self,
        read: impl FnOnce(&View<'_>) -> Result<T, PluginError>,
    ) -> Result<T, PluginError> {
        let reader = lock(&self.readers).pop();
        let mut reader = match reader {
            Some(r) => r,
            None => Reader {
                conn: index::open_reader(&self.index_path, self.immutable.load(Ordering::Relaxed))?,
                cached: None,
            },
        };
        let published = lock(&self.published).clone();
        let outcome = (|| {
            let conn = &reader.conn;
            conn.execute_batch("BEGIN").map_err(index_failed)?;
            let version = store::version(conn).map_err(index_failed)?;
            // A count of commits that went back is an index built again from nothing: new secret too.
            let held = reader.cached.take().filter(|c| c.version.1 <= version.1);
            // The writer side's copy when it is of this same state (a one-shot command's refresh just
            // compared it); else the rows are read from the index when a call first needs them all.
            let engine_rows = || match self.state.try_lock() {
                Ok(state) => match &*state {
                    State::Open(engine) => engine.rows_at(version),
                    _ => None,
                },
                Err(_) => None,
            };
            let cached = match held {
                Some(mut cached) => {
                    if cached.version != version {
                        if let Some(rows) = cached.rows.get_mut() {
                            let caught =
                                refresh::catch_up(conn, rows, Some(cached.version.1), version.1)
                                    .map_err(index_failed)?;
                            self.rows_read.fetch_add(caught.read, Ordering::Relaxed);
                        }
                        cached.version = version;
                    }
                    if cached.rows.get().is_none() {
                        if let Some(rows) = engine_rows() {
                            let _ = cached.rows.set(rows);
                        }
                    }
                    cached
                }
                None => {
                    let (_, secret) = store::state(conn).map_err(index_failed)?;
                    let rows = std::cell::OnceCell::new();
                    if let Some(shared) = engine_rows() {
                        let _ = rows.set(shared);
                    }
                    Cached {
                        version,
                        rows,
                        cursors: Cursors::new(&secret),
                    }
                }
            };
            let cached = reader.cached.insert(cached);
            let view = View {
                conn,
                rows: &cached.rows,
                rows_read: &self.rows_read,
                generation: format!("{}.{}", version.0, version.1),
                stored_generation: version.0,
                cursors: &cached.cursors,
                published: &published,
            };
            read(&view)
        })();
        if !reader.conn.is_autocommit() {
            let _ = reader.conn.execute_batch("ROLLBACK");
        }
        match &outcome {
            Err(e) if index::is_damage_message(&e.message) => {
                // The connection is dropped, and the next call rebuilds the index.
                let mut state = self.lock();
                if let State::Open(_) = &*state {
                    *state = State::Damaged(e.message.to_string());
                }
                return Err(rebuilt_next(e.clone()));
            }
            _ => {}
        }
        let mut idle = lock(&self.readers);
        if idle.len() < IDLE_READERS {
            idle.push(reader);
        }
        outcome
    }

    /// Hot phrases' upkeep after a search, when the writer side and the writer role are free right
    /// now (a later search does it otherwise): stores `phrase`'s best ranking keys when it matched
    /// `materialise` documents, and marks phrase `used` as just used (eviction is by last use).
    fn upkeep_hot(&self, phrase: &str, materialise: Option<u64>, used: Option<i64>) {
        let Ok(mut state) = self.state.try_lock() else {
            return;
        };
        let State::Open(engine) = &mut *state else {
            return;
        };
        let Ok(Some(_writing)) = engine.index.writer(Duration::ZERO) else {
            return;
        };
        let Some(conn) = engine.index.connection() else {
            return;
        };
        if let Some(id) = used {
            let _ = hot::touch(conn, id);
        }
        if let Some(matched) = materialise {
            if hot::phrase_id(conn, phrase).ok().flatten().is_none() {
                let _ = hot::materialise(conn, phrase, matched);
            }
        }
    }

    /// `searchSessions` (spec §4): the best-matching event of each matching session, ranked.
    pub fn search_sessions(
        &self,
        corpus: &Corpus,
        req: SessionSearchRequest,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<SessionSearchPage, PluginError> {
        self.check_enabled()?;
        let sessions = request::session_filters(req.session_filters.as_ref())?;
        let events = request::event_filters(req.event_filters.as_ref(), "eventFilters")?;
        let (cursor, mode, query, limit) =
            request::paging_of!(&req, self.limits.default_limit, self.limits.max_limit)?;
        self.prepare(corpus, cancelled)?;
        let fingerprint = request::fingerprint_in(
            request::fingerprint("sessions", None, &query, &sessions, &events, limit),
            mode,
        );
        let mut materialise = None;
        let mut used = None;
        let page = self.read(|view| {
            let generation = &view.generation;
            let offset = match &cursor {
                Some(c) => view
                    .cursors
                    .decode(c, "sessions", &fingerprint, generation)?,
                None => 0,
            };
            request::check_sessions_budget(&sessions, &events)?;
            if cancelled() {
                return Err(aborted());
            }
            // The rows a hit may come from: read as the ranking asks for them, unless every row is
            // in memory already (`candidates`).
            let arena = typed_arena::Arena::new();
            let every_candidate = candidates::CandidateRows::new(view, &sessions, &arena);
            let sql = sql::matches_query(&query.phrase, &events);
            let conn = view.conn;
            // Enough of the ranking for this page and whether another follows.
            let need = usize::try_from(offset.saturating_add(limit).saturating_add(1))
                .unwrap_or(usize::MAX);
            // The stored phrases and the spans-first read hold spec §4.4's ranking of a phrase; the other
            // modes scan.
            // Event clauses filter the stored rows one document at a time (`bounded::EventCheck`).
            let hot = if mode.is_spec() {
                stored_ranking(conn, &query)?
            } else {
                None
            };
            let mut event_check = bounded::EventCheck::new(conn, &events)?;
            // The stored rows answer when they rank the page before they run out (a phrase keeps only
            // its best rows); otherwise the scan does.
            let from_hot = match &hot {
                Some(stored) => {
                    if stored.by_use {
                        used = Some(stored.phrase.id);
                    }
                    hot_ranked(
                        conn,
                        stored.phrase,
                        &every_candidate,
                        &mut event_check,
                        need,
                        cancelled,
                    )?
                }
                None => None,
            };
            if from_hot.is_some() {
                took(Plan::Stored);
            }
            // A phrase of several words: one of its tokens' lists bounds its ranking (`bounded`).
            let from_hot = match (from_hot, mode.is_spec()) {
                (None, true) => match bounded::phrase_lists(conn, &query.text)? {
                    Some(lists) => {
                        let ranked = bounded::ranked(
                            conn,
                            &query.phrase,
                            &lists,
                            &every_candidate,
                            &mut event_check,
                            need,
                            cancelled,
                        )?;
                        if ranked.is_some() {
                            took(Plan::Bounded);
                        }
                        ranked
                    }
                    None => None,
                },
                (from_hot, _) => from_hot,
            };
            // Without event clauses, the spans-first read ranks the page from the match spans alone
            // and reads lengths and times only for the sessions that can reach it.
            let from_spans = match (&from_hot, events.is_empty() && mode.is_spec()) {
                (None, true) => {
                    let ranked =
                        spans_first(conn, &query.phrase, &every_candidate, need, cancelled)?;
                    if ranked.is_some() {
                        took(Plan::SpansFirst);
                    }
                    ranked
                }
                _ => None,
            };
            let ranked = match (from_hot, from_spans) {
                (Some(ranked), _) | (None, Some(ranked)) => ranked,
                (None, None) if mode.order == request::Order::Newest => {
                    took(Plan::Scan);
                    let newest = newest::scan(conn, &sql, cancelled)?;
                    newest::ranked(newest, &every_candidate)
                }
                (None, None) => {
                    took(Plan::Scan);
                    let (best, matched) = scan(conn, &sql, cancelled)?;
                    if events.is_empty()
                        && mode.is_spec()
                        && hot.is_none()
                        && matched >= hot::MIN_MATCHES
                    {
                        materialise = Some(matched);
                    }
                    best.ranked(&every_candidate)
                }
            };
            every_candidate.check()?;
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
                    title: title_text(row),
                    collection: None,
                })
                .collect();
            Ok(SessionSearchPage {
                items,
                next_cursor: more.then(|| {
                    view.cursors
                        .encode("sessions", &fingerprint, generation, offset + limit)
                }),
                skipped: view.published.skipped.clone(),
            })
        })?;
        if materialise.is_some() || used.is_some() {
            self.upkeep_hot(&query.phrase, materialise, used);
        }
        Ok(page)
    }

    /// `searchEvents` (spec §4): matching events of one session, ranked.
    pub fn search_events(
        &self,
        corpus: &Corpus,
        req: SessionEventSearchRequest,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<SessionEventSearchPage, PluginError> {
        self.check_enabled()?;
        let serde_json::Value::String(session_id) = &req.session_id else {
            return Err(PluginError::new(
                ErrorCode::SessionQueryInvalidFilter,
                "session id must be text",
            ));
        };
        let events = request::event_filters(req.filters.as_ref(), "filters")?;
        let (cursor, mode, query, limit) =
            request::paging_of!(&req, self.limits.default_limit, self.limits.max_limit)?;
        self.prepare(corpus, cancelled)?;
        self.read(|view| {
            let target = &target(view, session_id)?;
            let fingerprint = request::fingerprint_in(
                request::fingerprint("events", Some(session_id), &query, &[], &events, limit),
                mode,
            );
            let generation = format!("{}:{}", target.source.as_str(), target.generation);
            let offset = match &cursor {
                Some(c) => view
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
            let conn = view.conn;
            // Within one session the stored rows answer only when the phrase keeps every matching row.
            let hot = if events.is_empty() && mode.is_spec() {
                stored_ranking(conn, &query)?
                    .map(|s| s.phrase)
                    .filter(|p| p.floor.is_none())
            } else {
                None
            };
            let mut rows = match hot {
                Some(p) => hot_events(conn, p.id, target.sid, limit + 1, offset)?,
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
                title: title_text(target),
                items,
                next_cursor: more.then(|| {
                    view.cursors
                        .encode("events", &fingerprint, &generation, offset + limit)
                }),
                skipped: view.published.skipped.clone(),
            })
        })
    }

    /// Whether a long-lived engine's watch of the sessions root is no longer being set up (`None`
    /// without a watch or an open index). Until it is, every look lists the whole root; benchmarks
    /// that measure a search's own cost wait for it.
    pub fn watch_set_up(&self) -> Option<bool> {
        match &*self.lock() {
            State::Open(engine) => engine.watch_set_up(),
            _ => None,
        }
    }

    /// What is indexed and what was left out, after bringing the index up to date.
    pub fn diagnostics(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Diagnostics, PluginError> {
        self.prepare(corpus, cancelled)?;
        self.read(|view| {
            let indexed_events = store::visible_doc_count(view.conn).map_err(index_failed)?;
            // From the index, not the rows: diagnostics never needs them whole.
            let ids = store::visible_ids(view.conn).map_err(index_failed)?;
            let mut folders: Vec<(SourceKind, PathBuf)> = corpus
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
                        .filter(|id| SourceKind::of_id(id.as_str()) == kind)
                        .count() as u64,
                })
                .collect();
            let published = view.published;
            let mut index_notes = Vec::new();
            if let Some(why) = &published.rebuilt {
                index_notes.push(format!(
                    "rebuilt from the session logs when it opened: {why}"
                ));
            }
            if let Some(why) = &published.read_only {
                index_notes.push(format!(
                    "read-only: {why}; answers come from the index as it stands"
                ));
            }
            if let Some(busy) = &published.writer_busy {
                index_notes.push(busy.clone());
            }
            Ok(Diagnostics {
                sources,
                skipped: published.skipped.clone(),
                indexed_sessions: ids.len() as u64,
                indexed_events,
                generation: view.stored_generation,
                index_path: self.index_path.display().to_string(),
                watching: published.watching,
                whole_reads: published.reads.whole,
                resumed_reads: published.reads.resumed,
                index_notes,
            })
        })
    }

    /// Every searchable session's title as indexed (spec §7.1), by session id: read from the index,
    /// never from the logs (citation candidates list every session).
    pub fn titles(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, IndexedTitle>, PluginError> {
        self.prepare(corpus, cancelled)?;
        self.read(|view| {
            Ok(view
                .rows()?
                .values()
                .filter(|r| r.visible)
                .map(|r| (r.header.id.clone(), indexed_title(r)))
                .collect())
        })
    }
}

impl Search {
    /// The title text of each of `ids` as indexed, in the order given (`None`: no searchable session
    /// of that id, no title, or a title that cannot be read). Only the asked sessions' stored titles
    /// are parsed: citation candidates label one page, and parsing all 10,000 titles of a large root
    /// was most of that command's own work.
    pub fn title_texts(
        &self,
        corpus: &Corpus,
        cancelled: &dyn Fn() -> bool,
        ids: &[&str],
    ) -> Result<Vec<Option<String>>, PluginError> {
        self.prepare(corpus, cancelled)?;
        self.read(|view| {
            let wanted: HashSet<&str> = ids.iter().copied().collect();
            // An id has one visible row (a live session hides its log).
            let mut by_id: HashMap<&str, Option<String>> = HashMap::with_capacity(wanted.len());
            match view.loaded_rows() {
                Some(rows) => {
                    for row in rows.values() {
                        if let Some(id) = wanted.get(row.header.id.as_str()).filter(|_| row.visible)
                        {
                            by_id.insert(id, title_text(row));
                        }
                    }
                }
                None => {
                    // A page of candidates: each row looked up by its live id or by the path its
                    // log was last listed at, not every row scanned (a second pass over a large
                    // root's table, after the listing's). What the lookups miss, the scan finds.
                    if wanted.len() <= TITLE_LOOKUPS_UP_TO {
                        let listed = corpus.last_listed();
                        let paths: HashMap<&str, &Path> = listed
                            .iter()
                            .flat_map(|l| l.iter())
                            .filter(|s| wanted.contains(s.header.id.as_str()))
                            .map(|s| (s.header.id.as_str(), s.path.as_path()))
                            .collect();
                        for &id in &wanted {
                            let path = paths.get(id).map(|p| p.as_os_str().as_bytes());
                            if let Some(title) =
                                store::visible_title(view.conn, id, path).map_err(index_failed)?
                            {
                                by_id.insert(id, title.as_deref().and_then(title_text_of));
                            }
                        }
                    }
                    if by_id.len() < wanted.len() {
                        // The ids and titles alone, not every row whole.
                        for (id, title) in store::visible_titles(view.conn).map_err(index_failed)? {
                            if let Some(id) = wanted.get(id.as_str()) {
                                by_id.insert(id, title.as_deref().and_then(title_text_of));
                            }
                        }
                    }
                }
            }
            Ok(ids
                .iter()
                .map(|id| by_id.get(id).cloned().flatten())
                .collect())
        })
    }
}

/// Up to how many sessions' titles [`Search::title_texts`] looks up one by one (a page of candidates)
/// rather than scanning every row.
const TITLE_LOOKUPS_UP_TO: usize = 256;

/// The title text of a row's stored title, when it has a valid one.
fn title_text(row: &SessionRow) -> Option<String> {
    title_text_of(row.title.as_deref()?)
}

/// The title text of a stored title (see [`indexed_title`]), when it is a valid one.
fn title_text_of(stored: &str) -> Option<String> {
    let parsed: serde_json::Value = serde_json::from_str(stored).ok()?;
    if parsed.get("error").is_some_and(|e| e.is_string()) {
        return None;
    }
    parsed.get("title")?.as_str().map(str::to_string)
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

/// The row `searchEvents` searches: the live row when the session is live, else its visible disk row
/// (from the rows in memory, else read from the index by id).
fn target(view: &View<'_>, id: &str) -> Result<SessionRow, PluginError> {
    if let Some(rows) = view.loaded_rows() {
        if let Some(row) = rows
            .get(&RowKey::Live(id.to_string()))
            .filter(|r| r.visible)
        {
            return Ok(row.clone());
        }
        if let Some(row) = rows
            .values()
            .find(|r| r.visible && r.source == Source::Persisted && r.header.id == id)
        {
            return Ok(row.clone());
        }
    } else if let Some(row) = store::visible_rows_of(view.conn, id)
        .map_err(index_failed)?
        .into_iter()
        .next()
    {
        return Ok(row);
    }
    if let Some(s) = view
        .published
        .skipped
        .iter()
        .find(|s| s.id.as_deref() == Some(id))
    {
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
            collection: None,
        }
    }
}

/// Which read ranked a cross-session page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// A stored ranking: the token's list or the materialised phrase (`index::hot`).
    Stored,
    /// A token list of the phrase bounding its ranking (`bounded`).
    Bounded,
    /// The spans-first read.
    SpansFirst,
    /// One FTS5 scan ranking every match.
    Scan,
}

#[cfg(test)]
thread_local! {
    /// The plan of this thread's latest cross-session search, for tests that assert which read ran.
    static LAST_PLAN: std::cell::Cell<Option<Plan>> = const { std::cell::Cell::new(None) };
}

fn took(plan: Plan) {
    #[cfg(test)]
    LAST_PLAN.with(|p| p.set(Some(plan)));
    let _ = plan;
}

/// The plan of this thread's latest cross-session search.
#[cfg(test)]
fn last_plan() -> Option<Plan> {
    LAST_PLAN.with(|p| p.take())
}

/// Sessions' best matches with their rows, in rank order.
type Ranked<'a> = Vec<(rank::Match, &'a SessionRow)>;

/// Stored ranking keys of a phrase-mode query: its token's list when it is one token that has one
/// (`index::common`), else the phrase as a search materialised it (`index::hot`).
struct Stored {
    phrase: hot::Phrase,
    /// A materialised phrase, evicted by last use (a token list is kept by its frequency instead).
    by_use: bool,
}

fn stored_ranking(
    conn: &Connection,
    query: &request::Query,
) -> Result<Option<Stored>, PluginError> {
    let tokenizer = Tokenizer::new(conn, cjk::TOKENIZE).map_err(index_failed)?;
    let token = common::single_token(&tokenizer, &cjk::split(&query.text)).map_err(index_failed)?;
    if let Some(token) = token {
        if let Some(list) = hot::token_list(conn, &token).map_err(index_failed)? {
            return Ok(Some(Stored {
                phrase: list,
                by_use: false,
            }));
        }
    }
    // A pair list (`index::common`) is found by its phrase too: it is kept by frequency, not use.
    Ok(hot::phrase_by_use(conn, &query.phrase)
        .map_err(index_failed)?
        .map(|(phrase, by_use)| Stored { phrase, by_use }))
}

/// The first `need` sessions of the ranking from a materialised phrase's rows (`index::hot`), or `None`
/// when the rows run out before those are ranked and the phrase does not keep every row (the scan
/// answers then); checks for cancellation every few thousand rows.
fn hot_ranked<'a>(
    conn: &Connection,
    phrase: hot::Phrase,
    candidates: &'a dyn rank::Candidates<'a>,
    events: &mut bounded::EventCheck<'_>,
    need: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Ranked<'a>>, PluginError> {
    let mut prefix = rank::Prefix::new(candidates, need);
    let mut seen = 0u64;
    let mut stopped = None;
    let ran_out = hot::ranked(conn, phrase.id, |h| {
        seen += 1;
        if seen.is_multiple_of(4096) && cancelled() {
            stopped = Some(aborted());
            return false;
        }
        // Rows of documents the event clauses leave out are skipped, as the scan skips them.
        match events.passes(h.doc) {
            Ok(true) => prefix.offer(hot_match(h)),
            Ok(false) => true,
            Err(e) => {
                stopped = Some(e);
                false
            }
        }
    })
    .map_err(index_failed)?;
    if let Some(e) = stopped {
        return Err(e);
    }
    if ran_out && phrase.floor.is_some() {
        return Ok(None);
    }
    Ok(Some(prefix.ranked()))
}

/// How many sessions [`spans_first`] reads whole at most before the plain scan is cheaper.
const SPANS_FIRST_SESSIONS: usize = 256;

/// The first `need` sessions of the ranking (spec §4.4), exactly, without reading every match's length
/// and time: the ranking's first key is the match spans, which FTS5 gives without the documents table.
/// Pass one takes each candidate session's most spans over all its matches; the `need`-th largest of
/// those, `t`, bounds the page: a session whose most spans is below `t` ranks below at least `need`
/// sessions whatever its other keys. Pass two reads only the sessions at or above `t`, each a rowid
/// range of the FTS5 query, and ranks their best documents. `None` when more than
/// [`SPANS_FIRST_SESSIONS`] sessions tie at or above `t` (the plain scan answers then).
fn spans_first<'a>(
    conn: &Connection,
    phrase: &str,
    candidates: &'a dyn rank::Candidates<'a>,
    need: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Ranked<'a>>, PluginError> {
    let mut most: HashMap<i64, i64> = HashMap::new();
    {
        let mut stmt = conn
            .prepare_cached("SELECT rowid, dsh_spans(fts) FROM fts WHERE fts MATCH ?1")
            .map_err(index_failed)?;
        let mut rows = stmt.query([phrase]).map_err(index_failed)?;
        let mut seen = 0u64;
        while let Some(r) = rows.next().map_err(index_failed)? {
            seen += 1;
            if seen.is_multiple_of(4096) && cancelled() {
                return Err(aborted());
            }
            let rowid: i64 = r.get(0).map_err(index_failed)?;
            let spans: i64 = r.get(1).map_err(index_failed)?;
            let sid = rowid >> 32;
            if candidates.candidate(sid).is_none() {
                continue;
            }
            let m = most.entry(sid).or_insert(spans);
            *m = (*m).max(spans);
        }
    }
    let mut maxima: Vec<i64> = most.values().copied().collect();
    let t = if maxima.len() <= need {
        i64::MIN
    } else {
        let (_, nth, _) = maxima.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
        *nth
    };
    let reach: Vec<(i64, i64)> = most.into_iter().filter(|(_, m)| *m >= t).collect();
    if reach.len() > SPANS_FIRST_SESSIONS {
        return Ok(None);
    }
    let mut best = rank::Best::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT d.sid, d.seq, d.time, d.len, dsh_spans(fts)
             FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
             WHERE fts MATCH ?1 AND fts.rowid BETWEEN ?2 AND ?3",
        )
        .map_err(index_failed)?;
    for (sid, most) in reach {
        if cancelled() {
            return Err(aborted());
        }
        let (lo, hi) = store::rowid_range(sid);
        let mut rows = stmt
            .query(rusqlite::params![phrase, lo, hi])
            .map_err(index_failed)?;
        while let Some(r) = rows.next().map_err(index_failed)? {
            let m = rank::Match {
                sid: r.get(0).map_err(index_failed)?,
                seq: r.get::<_, i64>(1).map_err(index_failed)? as u64,
                time: r.get(2).map_err(index_failed)?,
                len: r.get(3).map_err(index_failed)?,
                spans: r.get(4).map_err(index_failed)?,
            };
            // Only a document with the session's most spans can be its best.
            if m.spans == most {
                best.offer(m);
            }
        }
    }
    Ok(Some(best.ranked(candidates)))
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
                .map_err(|e| {
                    index_failed(format!("document {rowid}: {}", index::sqlite_cause(&e)))
                })?;
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
