//! The merged corpus (spec §4.8): the host's live sessions plus the logs under the sessions root, as one
//! set of sessions keyed by id.
//!
//! - Live sessions come from [`HostContext`](host_api::abi::HostContext): header plus event envelopes as
//!   JSON text, read as they are (an open turn stays open; no crash closers).
//! - Persisted sessions come from [`SessionsRoot`]: headers from a listing, whole logs read leniently with
//!   crash closers (DSH's non-mutating `inspect()`), never written.
//! - Same id in both: the live session wins and its record says `live: true, persisted: true`. The two
//!   headers must be compatible ([`SessionHeader::compatible_with`]) or the listing fails with
//!   `SESSION_QUERY_SOURCE_CONFLICT`. An exact read of a live id never consults the sessions root, so a
//!   broken log on disk cannot break a live session.
//! - A broken log (DESIGN.md deviation 2) is left out and reported as a [`CorpusProblem`]; it never breaks
//!   the listing or reads of other sessions. An exact read *of* that session fails with
//!   `SESSION_QUERY_CORRUPT_SESSION` when the codec classes the failure [`ErrorClass::Corrupt`] and
//!   `SESSION_QUERY_PERSISTENCE_FAILED` otherwise (spec §1.7, §4.11).
//!
//! A listing takes each session whose transcript's revision is unchanged from the previous listing (or,
//! in a new process, from what the search index recorded: [`Corpus::seed_known`]) instead of reading its
//! header, so listing an unchanged root opens no log.
//!
//! With a team's index ([`RemoteSessions`]), sessions published from other machines join the corpus:
//! listed after the local ones (a local id wins), loaded only when neither live nor on disk here.
//!
//! Parsed sessions are kept in a bounded LRU (the `cache` module) keyed by path and revision (persisted) or id and
//! header (live), so repeated reads of an unchanged log do not re-read it. Every method is thread-safe;
//! locks guard only in-memory state and are never held across file reads or host calls.

mod cache;
#[cfg(test)]
pub(crate) mod testing;
mod walk;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use abi_stable::std_types::{RStr, RString};
use dsh_codec::log::append::AppendValidator;
use dsh_codec::log::layout::{
    DigestFields, Known, ListedSession, Revision, SessionsRoot, WalkDigest,
};
use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::log::{ErrorClass, Event, LogError, LogErrorCode, SessionHeader};
use dsh_codec::surface::{FoldError, SurfaceFold};
use host_api::abi::{CorpusProblem, ErrorCode, HostContextBox, LiveSession, LogLevel, PluginError};

use crate::cancel::Cancel;
use crate::sources::{SourceKind, SourceRoots, Sources};
use cache::{CacheKey, LogCache, Stamp};
use walk::{EarlyWalk, Walked};

/// Most sessions the cache keeps parsed at once.
const CACHE_MAX_SESSIONS: usize = 48;
/// Most events the cache keeps parsed at once, over all sessions (a few hundred MB at worst).
const CACHE_MAX_EVENTS: usize = 400_000;
/// How many events a log read parses between two looks at the call's stop condition: often enough that
/// a large log stops within milliseconds, rarely enough that the check (a clock read) costs nothing.
pub const STOP_CHECK_EVERY: usize = 512;

/// One parsed session: header, events in seq order, and its surface fold, computed on first use.
///
/// Events are individually reference-counted so that a live session that grew shares its old prefix with
/// the cached copy instead of deep-copying every payload.
#[derive(Debug)]
pub struct SessionData {
    header: SessionHeader,
    events: Vec<Arc<Event>>,
    fold: OnceLock<Result<SurfaceFold, FoldError>>,
}

impl SessionData {
    pub fn new(header: SessionHeader, events: Vec<Arc<Event>>) -> Self {
        Self {
            header,
            events,
            fold: OnceLock::new(),
        }
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Every event in log order; `events()[i].seq == i` for a valid log (the fold checks it).
    pub fn events(&self) -> &[Arc<Event>] {
        &self.events
    }

    /// The event at `seq`, if the log holds one there with that seq.
    pub fn event(&self, seq: u64) -> Option<&Event> {
        let event = self.events.get(usize::try_from(seq).ok()?)?;
        (event.seq == seq).then_some(event.as_ref())
    }

    /// The surface fold of the whole log (spec §2), folded once and then shared by every read.
    pub fn fold(&self) -> Result<&SurfaceFold, &FoldError> {
        self.fold
            .get_or_init(|| SurfaceFold::fold(self.events.iter().map(|e| e.as_ref())))
            .as_ref()
    }

    /// A session whose fold is already known (`None`: fold it on first use).
    fn with_fold(
        header: SessionHeader,
        events: Vec<Arc<Event>>,
        fold: Option<SurfaceFold>,
    ) -> Self {
        let data = Self::new(header, events);
        if let Some(fold) = fold {
            let _ = data.fold.set(Ok(fold));
        }
        data
    }

    /// A session extended by events appended after this one's last: shares the old events and, when the
    /// new fold is given or the old one is already known, continues it instead of refolding from the
    /// start.
    fn extended(
        &self,
        header: SessionHeader,
        more: Vec<Arc<Event>>,
        folded: Option<SurfaceFold>,
    ) -> Self {
        let mut events = Vec::with_capacity(self.events.len() + more.len());
        events.extend(self.events.iter().cloned());
        let fold = OnceLock::new();
        if let Some(folded) = folded {
            let _ = fold.set(Ok(folded));
        } else if let Some(Ok(old)) = self.fold.get() {
            let mut fold_state = old.clone();
            let result = more
                .iter()
                .try_for_each(|e| fold_state.apply(e).map(|_| ()));
            let _ = fold.set(result.map(|()| fold_state));
        }
        events.extend(more);
        Self {
            header,
            events,
            fold,
        }
    }
}

/// A session loaded for an exact read.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    pub data: Arc<SessionData>,
    /// Read from the host's memory rather than from a log.
    pub live: bool,
    /// The transcript it was read from, for a persisted session.
    pub path: Option<PathBuf>,
}

impl LoadedSession {
    pub fn header(&self) -> &SessionHeader {
        self.data.header()
    }

    /// `session "<id>"`, plus ` at <path>` for a persisted log: how error messages name the session.
    pub fn describe(&self) -> String {
        describe(&self.data.header().id, self.path.as_deref())
    }
}

/// How an error message names session `id` (at `path`, for a persisted log).
pub(crate) fn describe(id: &str, path: Option<&Path>) -> String {
    match path {
        Some(path) => format!("session {id:?} at {}", path.display()),
        None => format!("session {id:?}"),
    }
}

/// One session of a corpus listing: its header (the live one when live) and where it is available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSession {
    pub header: SessionHeader,
    pub live: bool,
    pub persisted: bool,
}

/// What the corpus could not read, by path: the last listing's problems and every failed log read.
#[derive(Default)]
struct Problems {
    /// `None` until the first listing.
    listing: Option<Vec<CorpusProblem>>,
    /// The other harnesses' last listing's problems.
    sources: Vec<CorpusProblem>,
    /// A listed log that failed to read, with the revision that failed.
    reads: BTreeMap<PathBuf, (Revision, CorpusProblem)>,
}

/// Sessions this machine does not hold but may read elsewhere (a team's server). Asked only for what
/// the local corpus lacks; an unreachable store fails the call (`SESSION_QUERY_INDEX_FAILED` naming it).
pub trait RemoteSessions: Send + Sync {
    /// Headers of the sessions the store lets this caller read that are not this machine's own.
    fn list(&self) -> Result<Vec<SessionHeader>, PluginError>;
    /// Session `id` with every event, when the store holds it and lets this caller read it.
    fn load(&self, id: &str) -> Result<Option<SessionData>, PluginError>;
}

/// The merged corpus.
pub struct Corpus {
    /// Sessions published from elsewhere, when the index is a team's.
    remote: Option<Arc<dyn RemoteSessions>>,
    host: Arc<HostContextBox>,
    root: Option<SessionsRoot>,
    /// Other harnesses' transcripts, read read-only beside the sessions root.
    sources: Sources,
    cache: Mutex<LogCache>,
    problems: Mutex<Problems>,
    /// The sessions the last listing found (or the index recorded), with their revisions.
    known: Mutex<KnownState>,
    /// How long a finished listing of the root answers for the next one (`None`: every listing looks).
    reuse: Option<Duration>,
    /// The last listing of the root, when it finished, and its problems.
    last: Mutex<Option<LastListing>>,
    /// A walk of the root started when the process began, for its first listing
    /// ([`Corpus::walk_early`]).
    early: Mutex<Option<EarlyWalk>>,
}

/// A listing of the root: when it finished, the sessions, the problems, the digest of its walk.
type LastListing = (
    Instant,
    Arc<Vec<ListedSession>>,
    Vec<CorpusProblem>,
    Option<WalkDigest>,
);

/// Loads what the search index recorded of each log ([`Corpus::seed_known_later`]).
pub type SeedLoader = Box<dyn FnOnce() -> Vec<ListedSession> + Send>;

/// The digest of a whole listing's walks: the sessions root's (`None` inside: the walk cannot vouch for
/// it) and the other harnesses' folders'. `None` when either cannot be vouched for.
fn corpus_digest(root: Option<Option<WalkDigest>>, sources: WalkDigest) -> Option<WalkDigest> {
    let mut fields = DigestFields::new(b"dsh-corpus-walk-1");
    match root {
        Some(digest) => fields.field(&digest?),
        None => fields.field(b"no root"),
    }
    fields.field(&sources);
    Some(fields.digest())
}

/// What the next listing of the root takes unchanged sessions from: this process's last listing, as it
/// is (shared with whoever holds it: copying 10,000 listed sessions into a map after every listing was
/// a large share of a one-shot command), else what the index recorded.
#[derive(Default)]
struct KnownState {
    last: Option<Arc<Vec<ListedSession>>>,
    /// Sorted by the path's bytes, looked up by binary search: a map of 10,000 entries, each path
    /// copied and hashed, was a tenth of a one-shot command's CPU, for lookups a listing makes once.
    seeded: Vec<ListedSession>,
    /// What the index recorded, not loaded yet: the first listing loads it (a search of an index
    /// that a walk of the root shows to be current never lists, so never loads it).
    pending: Option<SeedLoader>,
}

/// [`KnownState`] as a listing looks paths up in it.
struct KnownLookup<'a> {
    last: HashMap<&'a [u8], &'a ListedSession>,
    seeded: &'a [ListedSession],
}

fn path_bytes(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes()
}

impl<'a> KnownLookup<'a> {
    fn new(state: &'a KnownState) -> Self {
        let last = state
            .last
            .iter()
            .flat_map(|l| l.iter())
            .map(|s| (path_bytes(&s.path), s))
            .collect();
        Self {
            last,
            seeded: &state.seeded,
        }
    }
}

impl Known for KnownLookup<'_> {
    fn known(&self, path: &Path) -> Option<&ListedSession> {
        let key = path_bytes(path);
        // What this process listed is kept over what the index recorded.
        match self.last.get(key) {
            Some(s) => Some(*s),
            None => self
                .seeded
                .binary_search_by(|s| path_bytes(&s.path).cmp(key))
                .ok()
                .map(|i| &self.seeded[i]),
        }
    }
}

impl Corpus {
    pub fn new(host: Arc<HostContextBox>, sessions_root: Option<PathBuf>) -> Self {
        Self {
            remote: None,
            host,
            root: sessions_root.map(SessionsRoot::new),
            sources: Sources::new(SourceRoots::default()),
            cache: Mutex::new(LogCache::new(CACHE_MAX_SESSIONS, CACHE_MAX_EVENTS)),
            problems: Mutex::new(Problems::default()),
            known: Mutex::new(KnownState::default()),
            reuse: None,
            last: Mutex::new(None),
            early: Mutex::new(None),
        }
    }

    /// Sessions published elsewhere join this corpus (see [`RemoteSessions`]).
    pub fn with_remote(mut self, remote: Arc<dyn RemoteSessions>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// For a process that answers one command and exits: a listing of the root finished less than
    /// `window` ago answers for the next (a command's calls each list the root: `sessions` lists, then
    /// asks for the listing's problems; each look `stat`s every transcript). A long-lived host never
    /// sets this: it must see a change made between two calls.
    pub fn reuse_listings_for(mut self, window: Duration) -> Self {
        self.reuse = Some(window);
        self
    }

    /// For a process that reuses listings ([`Corpus::reuse_listings_for`]): walks the sessions root on
    /// a thread of its own from now on, for the first listing to finish (see the `walk` module). Call it
    /// before loading what [`Corpus::seed_known`] is given, so that the two overlap. Does nothing in a
    /// process that lists afresh every time, or without a sessions root.
    pub fn walk_early(&self) {
        if self.reuse.is_none() {
            return;
        }
        if let Some(root) = &self.root {
            *lock(&self.early) = EarlyWalk::start(root.clone());
        }
    }

    /// Sessions known from elsewhere (the search index: the header each log had at the revision it was
    /// indexed at), used by the next listing for every transcript whose revision is still that one.
    /// What an earlier listing of this process found is kept over them.
    pub fn seed_known(&self, sessions: impl IntoIterator<Item = ListedSession>) {
        let mut known = lock(&self.known);
        Self::seed(&mut known, sessions);
    }

    /// [`Corpus::seed_known`] with what `loader` returns, called when a listing first needs it (a
    /// process that never lists never loads the index's 10,000 header records).
    pub fn seed_known_later(&self, loader: SeedLoader) {
        lock(&self.known).pending = Some(loader);
    }

    fn seed(known: &mut KnownState, sessions: impl IntoIterator<Item = ListedSession>) {
        let seeded = &mut known.seeded;
        seeded.extend(sessions);
        // Stable, so of two records of one path the first given stays first and wins the dedup.
        seeded.sort_by(|a, b| path_bytes(&a.path).cmp(path_bytes(&b.path)));
        seeded.dedup_by(|later, first| path_bytes(&later.path) == path_bytes(&first.path));
    }

    /// The same corpus with other harnesses' transcripts beside the sessions root.
    pub fn with_sources(mut self, roots: SourceRoots) -> Self {
        self.sources = Sources::new(roots);
        self
    }

    /// The other harnesses' sources.
    pub fn sources(&self) -> &Sources {
        &self.sources
    }

    pub fn host(&self) -> &HostContextBox {
        &self.host
    }

    /// The host context, shared.
    pub fn host_arc(&self) -> Arc<HostContextBox> {
        self.host.clone()
    }

    pub fn sessions_root(&self) -> Option<&Path> {
        self.root.as_ref().map(SessionsRoot::root)
    }

    /// `Err(SESSION_QUERY_ABORTED)` when the call was cancelled.
    pub fn check_cancelled(&self, cancel: Cancel<'_>, what: &str) -> Result<(), PluginError> {
        cancel.check_with(ErrorCode::SessionQueryAborted, what)
    }

    /// Every live session as the host reports it now. A host that answers with something that does
    /// not parse is logged and read as having no live sessions, so disk sessions stay readable.
    pub fn live_sessions(&self) -> Vec<LiveSession> {
        let text = self.host.live_sessions();
        match serde_json::from_str(text.as_str()) {
            Ok(list) => list,
            Err(e) => {
                self.host.log(
                    LogLevel::Error,
                    RStr::from_str(&format!("the host's live-session list does not parse: {e}")),
                );
                Vec::new()
            }
        }
    }

    /// One live session as the host reports it now, `None` when it is not live.
    pub fn live_session(&self, id: &str) -> Result<Option<LiveSession>, PluginError> {
        let Some(text) = self.host.live_session(RStr::from_str(id)).into_option() else {
            return Ok(None);
        };
        serde_json::from_str(text.as_str()).map(Some).map_err(|e| {
            PluginError::new(
                ErrorCode::PluginBadMessage,
                format!(
                    "live session {:?}: the host's record does not parse: {e}",
                    clip(id)
                ),
            )
        })
    }

    /// Every session of the corpus, in no particular order. Persisted headers come from the listing (no
    /// log is parsed); a live session overrides the persisted one with the same id after a compatibility
    /// check. Logs the listing cannot read are left out and reported through [`Corpus::problems`].
    pub fn list(&self, cancel: Cancel<'_>) -> Result<Vec<CorpusSession>, PluginError> {
        self.check_cancelled(cancel, "listing sessions")?;
        // Keyed by ids borrowed from the headers held here and from the shared listing: each
        // session's header is copied once, into its answer (a listing of 10,000 sessions copied
        // every entry whole and every id again as a key, for `sessions` and `candidates` alike).
        let live: Vec<SessionHeader> = self
            .live_sessions()
            .iter()
            .map(|s| SessionHeader::from(&s.header))
            .collect();
        let mut by_id: HashMap<&str, CorpusSession> = HashMap::with_capacity(live.len());
        for header in &live {
            by_id.insert(
                header.id.as_str(),
                CorpusSession {
                    header: header.clone(),
                    live: true,
                    persisted: false,
                },
            );
        }
        self.check_cancelled(cancel, "listing sessions")?;
        let listed = self.list_persisted()?;
        by_id.reserve(listed.len());
        for entry in listed.iter() {
            match by_id.get_mut(entry.header.id.as_str()) {
                Some(live) => {
                    if !live.header.compatible_with(&entry.header) {
                        return Err(conflict(&live.header, entry));
                    }
                    live.persisted = true;
                }
                None => {
                    by_id.insert(
                        entry.header.id.as_str(),
                        CorpusSession {
                            header: entry.header.clone(),
                            live: false,
                            persisted: true,
                        },
                    );
                }
            }
        }
        let remote = match &self.remote {
            Some(source) => {
                self.check_cancelled(cancel, "listing sessions")?;
                source.list()?
            }
            None => Vec::new(),
        };
        for header in &remote {
            by_id
                .entry(header.id.as_str())
                .or_insert_with(|| CorpusSession {
                    header: header.clone(),
                    live: false,
                    persisted: true,
                });
        }
        Ok(by_id.into_values().collect())
    }

    /// The sessions the sessions root lists (empty without a root). Records the listing's problems.
    /// Fails (`PERSISTENCE_FAILED`) only when the root exists but cannot be read as a directory.
    /// Shared with the corpus's own record of the listing: copy it only to change it.
    pub fn list_persisted(&self) -> Result<Arc<Vec<ListedSession>>, PluginError> {
        Ok(self.list_persisted_digest()?.0)
    }

    /// [`Corpus::list_persisted`] with the digest of the walks it was listed from (the sessions root's
    /// and the other harnesses' folders'): a later [`Corpus::walk_digest`] equal to it means a listing
    /// now would be this one. `None` when a walk cannot vouch for what it saw.
    pub fn list_persisted_digest(
        &self,
    ) -> Result<(Arc<Vec<ListedSession>>, Option<WalkDigest>), PluginError> {
        let (mut listed, root) = self.list_dsh()?;
        let (sources, sources_digest) = self.list_sources_digest();
        if !sources.is_empty() {
            Arc::make_mut(&mut listed).extend(sources);
        }
        Ok((listed, corpus_digest(root, sources_digest)))
    }

    /// The digest a listing made now would have ([`Corpus::list_persisted_digest`]), from a walk of
    /// the root and the other harnesses' folders alone: directories read and transcripts `stat`ed, no
    /// log opened, nothing of the index loaded. In a process that reuses listings the root's walk is
    /// kept for the next listing (the early one, when still fresh, is the one taken). `None` when a
    /// walk cannot vouch for what it saw or the root cannot be walked (a listing then reports why).
    pub fn walk_digest(&self) -> Option<WalkDigest> {
        let root = match &self.root {
            None => None,
            Some(root) => Some(self.root_walk_digest(root)?),
        };
        corpus_digest(root, self.sources.walk_digest())
    }

    /// The digest of a walk of the root made now (or of the early walk, when still fresh; or of the
    /// walk of a listing that would be reused now).
    fn root_walk_digest(&self, root: &SessionsRoot) -> Option<Option<WalkDigest>> {
        if let Some(window) = self.reuse {
            if let Some((at, _, _, digest)) = &*lock(&self.last) {
                if at.elapsed() < window {
                    return Some(*digest);
                }
            }
        }
        let mut early = lock(&self.early);
        let fresh = self.reuse.unwrap_or_default();
        let walked = match early.take().and_then(|w| w.finish(fresh)) {
            Some(walked) => walked,
            None => Walked::now(root).ok()?,
        };
        let digest = walked.digest;
        if self.reuse.is_some() {
            *early = Some(EarlyWalk::Done(walked));
        }
        Some(digest)
    }

    /// The transcripts of the other harnesses' sources (empty when none is configured). Records the
    /// listing's problems.
    pub fn list_sources(&self) -> Vec<ListedSession> {
        self.list_sources_digest().0
    }

    /// [`Corpus::list_sources`] with the digest of the walk it was listed from.
    fn list_sources_digest(&self) -> (Vec<ListedSession>, WalkDigest) {
        if self.sources.is_empty() {
            return (Vec::new(), self.sources.walk_digest());
        }
        let (listing, digest) = self.sources.list_with_digest();
        let problems = listing
            .problems
            .iter()
            .map(|e| problem(e.path.as_deref().unwrap_or(Path::new("")), None, e))
            .collect();
        let mut state = lock(&self.problems);
        state.sources = problems;
        let paths: std::collections::HashSet<&Path> =
            listing.sessions.iter().map(|s| s.path.as_path()).collect();
        state.reads.retain(|path, _| {
            self.sources.kind_of(path).is_none() || paths.contains(path.as_path())
        });
        drop(state);
        (listing.sessions, digest)
    }

    /// The sessions the DSH sessions root lists (empty without a root), with the digest of the walk
    /// they were listed from (`None` outside: there is no root).
    #[allow(clippy::type_complexity)]
    fn list_dsh(
        &self,
    ) -> Result<(Arc<Vec<ListedSession>>, Option<Option<WalkDigest>>), PluginError> {
        let Some(root) = &self.root else {
            return Ok((Arc::default(), None));
        };
        let (sessions, digest) = self.list_root(root).map_err(|e| {
            PluginError::new(
                ErrorCode::SessionQueryPersistenceFailed,
                format!(
                    "cannot list the sessions root {}: {}",
                    root.root().display(),
                    log_error_text(&e)
                ),
            )
        })?;
        Ok((sessions, Some(digest)))
    }

    /// The sessions root's last listing, however old, without listing it again: where each session's
    /// log was, as a hint for lookups that check what they find (`None` before the first listing).
    pub fn last_listed(&self) -> Option<Arc<Vec<ListedSession>>> {
        lock(&self.last)
            .as_ref()
            .map(|(_, sessions, _, _)| sessions.clone())
    }

    /// For a process that reuses listings ([`Corpus::reuse_listings_for`]): the last listing of the
    /// root counts as just finished. Called when a call has answered, so the reuse window is the gap
    /// between one call's answer and the next call, not the time since the listing: `sessions` answers
    /// with 10,000 sessions and then asks for the problems of that look, and on a loaded machine
    /// encoding and printing the answer took longer than the window, so the root was listed twice.
    pub fn touch_listing(&self) {
        if self.reuse.is_none() {
            return;
        }
        if let Some((at, _, _, _)) = &mut *lock(&self.last) {
            *at = Instant::now();
        }
    }

    fn list_root(
        &self,
        root: &SessionsRoot,
    ) -> Result<(Arc<Vec<ListedSession>>, Option<WalkDigest>), LogError> {
        if let Some(window) = self.reuse {
            if let Some((at, sessions, problems, digest)) = &*lock(&self.last) {
                if at.elapsed() < window {
                    lock(&self.problems).listing = Some(problems.clone());
                    return Ok((sessions.clone(), *digest));
                }
            }
        }
        // Taken out, not held: the listing stats files (a concurrent listing meanwhile just reads headers).
        let mut known = std::mem::take(&mut *lock(&self.known));
        if let Some(loader) = known.pending.take() {
            // Loaded while the early walk (if any) runs on its own thread.
            if known.last.is_none() {
                Self::seed(&mut known, loader());
            }
        }
        let early = lock(&self.early)
            .take()
            .zip(self.reuse)
            .and_then(|(early, fresh)| early.finish(fresh));
        let walked = match early {
            Some(walked) => Ok(walked),
            None => Walked::now(root),
        };
        let listed = walked.and_then(|walked| {
            let listing = root.list_walked(walked.walk, &KnownLookup::new(&known))?;
            Ok((listing, walked.digest))
        });
        let (listing, digest) = match listed {
            Ok(listed) => listed,
            Err(e) => {
                *lock(&self.known) = known;
                return Err(e);
            }
        };
        if self.reuse.is_some() {
            // A process that answers one command and exits leaves the index's record (10,000
            // entries on a large root, each a header and a path) to the exit rather than freeing it
            // entry by entry, as the search engine leaves its rows.
            std::mem::forget(known);
        } else {
            drop(known);
        }
        let sessions = Arc::new(listing.sessions);
        // The listing supersedes what the index recorded: every log that lists is in it.
        *lock(&self.known) = KnownState {
            last: Some(sessions.clone()),
            seeded: Vec::new(),
            pending: None,
        };
        let problems: Vec<CorpusProblem> = listing
            .problems
            .iter()
            .map(|e| problem(root.root(), None, e))
            .collect();
        if self.reuse.is_some() {
            *lock(&self.last) = Some((Instant::now(), sessions.clone(), problems.clone(), digest));
        }
        let mut state = lock(&self.problems);
        state.listing = Some(problems);
        // A failed read of a log that no longer lists at that path is no longer news.
        let sources = &self.sources;
        state.reads.retain(|path, _| {
            sources.kind_of(path).is_some() || sessions.iter().any(|s| &s.path == path)
        });
        drop(state);
        Ok((sessions, digest))
    }

    /// Loads one session for an exact read: the live session when `id` is live (persistence is never
    /// consulted then), else the persisted log. `SESSION_NOT_FOUND` when neither has it.
    pub fn load(&self, id: &str, cancel: Cancel<'_>) -> Result<LoadedSession, PluginError> {
        let local = self.load_local(id, cancel);
        let Some(remote) = &self.remote else {
            return local;
        };
        match local {
            Err(e) if e.code == ErrorCode::SessionQuerySessionNotFound => {
                self.check_cancelled(cancel, "reading a session")?;
                match remote.load(id)? {
                    Some(data) => Ok(LoadedSession {
                        data: Arc::new(data),
                        live: false,
                        path: None,
                    }),
                    None => Err(e),
                }
            }
            other => other,
        }
    }

    /// [`Corpus::load`] from this machine only: live, then the sessions root.
    fn load_local(&self, id: &str, cancel: Cancel<'_>) -> Result<LoadedSession, PluginError> {
        self.check_cancelled(cancel, "reading a session")?;
        if let Some(loaded) = self.load_live(id)? {
            return Ok(loaded);
        }
        if SourceKind::of_id(id) != SourceKind::Dsh && !self.sources.is_empty() {
            if let Some(listed) = self.sources.find(id) {
                self.check_cancelled(cancel, "reading a session")?;
                let data = self.read_listed(&listed, cancel)?;
                return Ok(LoadedSession {
                    data,
                    live: false,
                    path: Some(listed.path),
                });
            }
        }
        let Some(root) = &self.root else {
            return Err(not_found(
                id,
                "it is not live and no sessions root is configured",
            ));
        };
        if id.is_empty() {
            return Err(not_found(id, "an empty id names no session"));
        }
        let listed = match root.find(id) {
            Ok(Some(listed)) => listed,
            Ok(None) => return Err(not_found(id, "it is neither live nor in the sessions root")),
            Err(e) => {
                if let Some(path) = &e.path {
                    self.record_read_problem(path, None, Some(id), &e);
                }
                return Err(read_failure(id, &e));
            }
        };
        let data = self.read_listed(&listed, cancel)?;
        // The session may have gone live while its log was read; live wins (spec §5 "Load").
        if let Some(loaded) = self.load_live(id)? {
            return Ok(loaded);
        }
        Ok(LoadedSession {
            data,
            live: false,
            path: Some(listed.path),
        })
    }

    /// The parsed log of a listed session, from the cache when its revision is unchanged. A failure is
    /// recorded as a problem of that path; a later successful read clears it. A read `cancel` stops is
    /// `SESSION_QUERY_ABORTED`, neither a problem of the log nor remembered.
    pub fn read_listed(
        &self,
        listed: &ListedSession,
        cancel: Cancel<'_>,
    ) -> Result<Arc<SessionData>, PluginError> {
        let key = CacheKey::Persisted(listed.path.clone());
        let stamp = Stamp::Revision(listed.revision);
        if let Some(data) = lock(&self.cache).get_exact(&key, &stamp) {
            return Ok(data);
        }
        let id = listed.header.id.as_str();
        if self.sources.kind_of(&listed.path).is_some() {
            return self.read_imported(listed, key, stamp);
        }
        let opts = ReadOptions {
            strict_header: false,
            expected_id: Some(id.to_string()),
            crash_closers: true,
            ..ReadOptions::default()
        };
        let (header, events) = match read_stoppable(&listed.path, &opts, cancel) {
            Ok(Some(log)) => log,
            Ok(None) => {
                return Err(PluginError::new(
                    ErrorCode::SessionQueryAborted,
                    format!(
                        "reading {} aborted: the call was cancelled",
                        describe(id, Some(&listed.path))
                    ),
                ))
            }
            Err(e) => {
                let e = e.at_path(&listed.path);
                self.record_read_problem(&listed.path, Some(listed.revision), Some(id), &e);
                return Err(read_failure(id, &e));
            }
        };
        if !header.compatible_with(&listed.header) {
            return Err(PluginError::new(
                ErrorCode::SessionQuerySourceConflict,
                format!(
                    "{}: the header read with the log differs from the listed header (the file changed while it was read)",
                    describe(id, Some(&listed.path))
                ),
            ));
        }
        self.folded_and_remembered(listed, key, stamp, SessionData::new(header, events))
    }

    /// A log just read, once it folds: its problem cleared, and cached under its revision.
    fn folded_and_remembered(
        &self,
        listed: &ListedSession,
        key: CacheKey,
        stamp: Stamp,
        data: SessionData,
    ) -> Result<Arc<SessionData>, PluginError> {
        let data = Arc::new(data);
        // DSH's inspect() ends by constructing a Session, which folds the surface (spec §1.7 step 7), so a
        // stored log that does not fold is corrupt, not merely an invalid surface.
        if let Err(fold_error) = data.fold() {
            let e = LogError::from(fold_error.clone()).at_path(&listed.path);
            let id = listed.header.id.as_str();
            self.record_read_problem(&listed.path, Some(listed.revision), Some(id), &e);
            return Err(read_failure(id, &e));
        }
        lock(&self.problems).reads.remove(&listed.path);
        // Only a log that did not change while it was read may be remembered under its revision.
        if Revision::of(&listed.path).ok() == Some(listed.revision) {
            lock(&self.cache).insert(key, stamp, data.clone());
        }
        Ok(data)
    }

    /// [`Corpus::read_listed`] for another harness's transcript: mapped by its importer, then folded
    /// like any log (a transcript the importer maps to something that does not fold is a bug, reported
    /// as that log's problem rather than a failed listing).
    fn read_imported(
        &self,
        listed: &ListedSession,
        key: CacheKey,
        stamp: Stamp,
    ) -> Result<Arc<SessionData>, PluginError> {
        let id = listed.header.id.as_str();
        let imported = match self.sources.read(listed) {
            Ok(imported) => imported,
            Err(e) => {
                self.record_read_problem(&listed.path, Some(listed.revision), Some(id), &e);
                return Err(read_failure(id, &e));
            }
        };
        let events = imported.events.into_iter().map(Arc::new).collect();
        let data = SessionData::new(imported.header, events);
        self.folded_and_remembered(listed, key, stamp, data)
    }

    /// The live session `id` as the host holds it now, or `None` when it is not live. Only what was
    /// appended since the cached copy is fetched and parsed.
    pub fn load_live(&self, id: &str) -> Result<Option<LoadedSession>, PluginError> {
        let Some(live) = self.live_session(id)? else {
            return Ok(None);
        };
        let header = SessionHeader::from(&live.header);
        let key = CacheKey::Live(id.to_string());
        // Keyed by epoch too: a session recreated with the same header must not be served the old
        // incarnation's prefix.
        let cached = match lock(&self.cache).get(&key) {
            Some((Stamp::Live(epoch, h), data))
                if epoch == live.epoch
                    && h == header
                    && data.events().len() as u64 <= live.event_count =>
            {
                Some(data)
            }
            _ => None,
        };
        if let Some(data) = &cached {
            if data.events().len() as u64 == live.event_count {
                return Ok(Some(LoadedSession {
                    data: data.clone(),
                    live: true,
                    path: None,
                }));
            }
        }
        let from = cached.as_ref().map_or(0, |d| d.events().len() as u64);
        let Some(texts) = self
            .host
            .live_events(RStr::from_str(id), live.epoch, from)
            .into_option()
        else {
            return Ok(None);
        };
        let data = parse_live_events(id, &header, cached.as_deref(), &texts)?;
        let data = Arc::new(data);
        lock(&self.cache).insert(key, Stamp::Live(live.epoch, header), data.clone());
        Ok(Some(LoadedSession {
            data,
            live: true,
            path: None,
        }))
    }

    /// Sessions and logs the corpus cannot read: a fresh listing's problems plus every listed log whose
    /// last read failed (re-read when its file changed since). Never fails: a sessions root that cannot be
    /// listed is itself reported.
    pub fn problems(&self) -> Vec<CorpusProblem> {
        let listed = self.list_sources();
        let mut dsh = Arc::default();
        if let Some(root) = &self.root {
            match self.list_root(root) {
                Ok((sessions, _)) => dsh = sessions,
                Err(e) => {
                    let mut out = vec![problem(root.root(), None, &e)];
                    out.extend(lock(&self.problems).sources.iter().cloned());
                    return out;
                }
            }
        }
        // Failed logs whose file changed since: read them again so a fixed log leaves the report.
        let stale: Vec<&ListedSession> = {
            let state = lock(&self.problems);
            listed
                .iter()
                .chain(dsh.iter())
                .filter(|s| {
                    state
                        .reads
                        .get(&s.path)
                        .is_some_and(|(rev, _)| *rev != s.revision)
                })
                .collect()
        };
        for session in stale {
            let _ = self.read_listed(session, Cancel::NEVER);
        }
        self.recorded_problems()
    }

    /// The problems recorded so far (the last listing's and failed log reads) without listing again:
    /// the search index reports them after its own listing, which already refreshed them.
    pub fn known_problems(&self) -> Vec<CorpusProblem> {
        self.recorded_problems()
    }

    fn recorded_problems(&self) -> Vec<CorpusProblem> {
        let state = lock(&self.problems);
        let mut out: Vec<CorpusProblem> = state.listing.clone().unwrap_or_default();
        out.extend(state.sources.iter().cloned());
        out.extend(state.reads.values().map(|(_, p)| p.clone()));
        out
    }

    /// Remembers that the log at `path` failed to read, and tells the host's log the first time this
    /// revision fails (a search or a listing may meet the same broken log many times).
    fn record_read_problem(
        &self,
        path: &Path,
        revision: Option<Revision>,
        id: Option<&str>,
        e: &LogError,
    ) {
        let Some(revision) = revision.or_else(|| Revision::of(path).ok()) else {
            return;
        };
        let root = self.sessions_root().unwrap_or(path);
        let entry = (revision, problem(root, id, e));
        let first_time = lock(&self.problems)
            .reads
            .insert(path.to_path_buf(), entry.clone())
            .is_none_or(|old| old != entry);
        if first_time {
            let message = format!(
                "session search leaves out the log at {}: {}",
                path.display(),
                log_error_text(e)
            );
            self.host.log(LogLevel::Warn, RStr::from_str(&message));
        }
    }
}

/// Parses and checks the host's JSON envelopes of a live session, expected to continue `base` (or start
/// the session when there is none), with the same append validator the writer uses: envelope, obsolete
/// vocabulary, message shapes, known types, request headers, the fold. A live event breaking one of those
/// would make the session unreadable once it is only on disk, so it is refused now, naming the rule
/// (`SESSION_QUERY_CORRUPT_SESSION`). A fold failure alone is left for the reads to report as an invalid
/// surface (spec §4.11), as they do for a log on disk: the rest is parsed with the envelope check only.
fn parse_live_events(
    id: &str,
    header: &SessionHeader,
    base: Option<&SessionData>,
    texts: &[RString],
) -> Result<SessionData, PluginError> {
    let from = base.map_or(0, |b| b.events().len() as u64);
    let mut validator = match base.map(SessionData::fold) {
        Some(Ok(fold)) => Some(AppendValidator::with_fold(header, fold.clone())),
        Some(Err(_)) => None,
        None => Some(AppendValidator::new(header)),
    };
    let mut more = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let seq = from + i as u64;
        let bad = |why: String| {
            PluginError::new(
                ErrorCode::SessionQueryCorruptSession,
                format!(
                    "live session {:?}: event #{seq} from the host is refused: {why}",
                    clip(id)
                ),
            )
        };
        if let Some(v) = validator.as_mut() {
            match v.check_json(text.as_str()) {
                Ok(event) => {
                    more.push(Arc::new(event));
                    continue;
                }
                Err(e) if e.code == LogErrorCode::InvalidSurface => validator = None,
                Err(e) => return Err(bad(log_error_text(&e))),
            }
        }
        let value = dsh_codec::json::parse_lossy(text.as_bytes())
            .map_err(|e| bad(format!("not JSON: {e}")))?;
        more.push(Arc::new(
            Event::from_value(value).map_err(|e| bad(log_error_text(&e)))?,
        ));
    }
    let fold = validator.map(|v| v.fold().clone());
    Ok(match base {
        Some(old) => old.extended(header.clone(), more, fold),
        None => SessionData::with_fold(header.clone(), more, fold),
    })
}

/// A log's header and events, as [`read_stoppable`] reads them.
type ReadLog = (SessionHeader, Vec<Arc<Event>>);

/// Reads a whole log (stored events, then crash closers, as `read_log` does) looking at `cancel` every
/// [`STOP_CHECK_EVERY`] events; `Ok(None)` when it said stop. A large log is most of an exact read's
/// time, so this is where a deadline or a Ctrl-C has to be noticed.
fn read_stoppable(
    path: &Path,
    opts: &ReadOptions,
    cancel: Cancel<'_>,
) -> Result<Option<ReadLog>, LogError> {
    let mut reader = LogReader::open(path, opts)?;
    let header = reader.header().clone();
    let mut events = Vec::new();
    for (n, event) in reader.by_ref().enumerate() {
        if n.is_multiple_of(STOP_CHECK_EVERY) && cancel.is_cancelled() {
            return Ok(None);
        }
        events.push(Arc::new(event?));
    }
    Ok(Some((header, events)))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded state is a cache and a report; a panic elsewhere cannot leave either inconsistent in a
    // way that matters, so a poisoned lock is taken over rather than propagated.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn not_found(id: &str, why: &str) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQuerySessionNotFound,
        format!("session {id:?} not found: {why}"),
    )
}

fn conflict(live: &SessionHeader, listed: &ListedSession) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQuerySourceConflict,
        format!(
            "live session {:?} and the persisted log at {} have incompatible headers (version, createdAt, cwd, parentSession, seedLength or delegationDepth differ)",
            live.id,
            listed.path.display()
        ),
    )
}

/// The query error for a persisted log that failed to read (spec §1.7, §4.11): only a logical
/// validation failure is `CORRUPT_SESSION`; physical failures and refusals are `PERSISTENCE_FAILED`.
pub fn read_failure(id: &str, e: &LogError) -> PluginError {
    let (code, what) = match e.class() {
        ErrorClass::Corrupt => (ErrorCode::SessionQueryCorruptSession, "is corrupt"),
        ErrorClass::Physical | ErrorClass::Unsupported => (
            ErrorCode::SessionQueryPersistenceFailed,
            "could not be read",
        ),
    };
    PluginError::new(
        code,
        format!(
            "stored {} {what}: {}",
            describe(id, e.path.as_deref()),
            log_error_text(e)
        ),
    )
}

/// A codec error without its path (callers name the path themselves): `line N: seq S: message [CODE]`.
fn log_error_text(e: &LogError) -> String {
    let mut out = String::new();
    if let Some(line) = e.line {
        out.push_str(&format!("line {line}: "));
    }
    if let Some(seq) = e.seq {
        out.push_str(&format!("seq {seq}: "));
    }
    out.push_str(&format!("{} [{}]", e.message, e.code));
    out
}

fn problem(root: &Path, id: Option<&str>, e: &LogError) -> CorpusProblem {
    let path = e.path.as_deref().unwrap_or(root);
    CorpusProblem {
        path: path.display().to_string(),
        session_id: id.map(String::from),
        code: e.code.as_str().into(),
        message: log_error_text(e),
    }
}

#[cfg(test)]
mod tests;

/// At most the first 100 characters of a caller-supplied id, for messages.
fn clip(id: &str) -> &str {
    match id.char_indices().nth(100) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}
