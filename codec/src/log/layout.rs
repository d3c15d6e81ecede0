//! Where session logs live in a sessions root (spec §1.1): the path encoding of cwds and ids, the revision
//! token of a transcript, and discovery (listing every session, finding one by id).
//!
//! Discovery follows DESIGN.md deviation 2: a broken session, a flat-layout artifact, a session directory
//! holding both transcripts, an identity mismatch or a duplicate id is reported as a problem naming its path,
//! and every other session still lists. A root holding raw and zstd sessions side by side is read whole.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::{clip_for_message, LogError, LogErrorCode};
use super::header::{HeaderDiagnostic, SessionHeader};
use super::read::{read_header, ReadOptions};
use super::Compression;

/// The project directory of a session whose header has no `cwd`.
pub const NO_CWD_DIR: &str = "_no-cwd";

/// Longest project slug kept before wrapping it in `--…--`, so a project dir name stays within the 255-byte
/// name limit of common filesystems.
const MAX_SLUG_LEN: usize = 251;

/// Both encodings, in the order discovery checks them.
const ENCODINGS: [Compression; 2] = [Compression::None, Compression::Zstd];

fn is_kept_unit(unit: u16) -> bool {
    matches!(unit, 0x30..=0x39 | 0x41..=0x5A | 0x61..=0x7A | 0x2E | 0x5F | 0x2D)
}

fn is_separator_unit(unit: u16) -> bool {
    matches!(unit, 0x2F | 0x5C | 0x3A)
}

fn push_escaped(out: &mut String, unit: u16) {
    // Writing to a String cannot fail.
    let _ = write!(out, "~{unit:04X}");
}

/// The project directory name of a cwd (`projectKey`, spec §1.1). Works on UTF-16 code units so that the
/// escapes match DSH's byte for byte (a character outside the BMP becomes two `~XXXX` escapes).
pub fn project_key(cwd: &str) -> Result<String, LogError> {
    if cwd.is_empty() {
        return Err(LogError::new(
            LogErrorCode::Layout,
            "cannot derive a project directory from an empty cwd",
        ));
    }
    let mut slug = String::with_capacity(cwd.len());
    let mut in_separator_run = false;
    for unit in cwd.encode_utf16() {
        if is_separator_unit(unit) {
            if !in_separator_run {
                slug.push('-');
            }
            in_separator_run = true;
            continue;
        }
        in_separator_run = false;
        if is_kept_unit(unit) {
            slug.push(char::from(unit as u8));
        } else {
            push_escaped(&mut slug, unit);
        }
    }
    let slug = slug.trim_start_matches('-');
    let slug = if slug.is_empty() { "root" } else { slug };
    // Everything is ASCII at this point, so a byte cut is a character cut.
    let slug = &slug[..slug.len().min(MAX_SLUG_LEN)];
    Ok(format!("--{slug}--"))
}

/// The project directory name for a header's cwd: `_no-cwd` when there is none, else [`project_key`].
pub fn project_dir_name(cwd: Option<&str>) -> Result<String, LogError> {
    match cwd {
        None => Ok(NO_CWD_DIR.to_string()),
        Some(cwd) => project_key(cwd),
    }
}

/// The longest file name, in bytes, the filesystems this runs on accept (Linux `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// The session directory name of an id (`encodeSegment`, spec §1.1). Injective: `~` is always escaped, so
/// no two ids share a directory, and `.`/`..` can never name the directory itself or its parent.
pub fn encode_segment(id: &str) -> Result<String, LogError> {
    match id {
        "" => Err(LogError::new(
            LogErrorCode::Layout,
            "a session id must not be empty",
        )),
        "." => Ok("~002E".to_string()),
        ".." => Ok("~002E~002E".to_string()),
        _ => {
            let mut out = String::with_capacity(id.len());
            for unit in id.encode_utf16() {
                if is_kept_unit(unit) {
                    out.push(char::from(unit as u8));
                } else {
                    push_escaped(&mut out, unit);
                }
            }
            Ok(out)
        }
    }
}

/// The session directory of a header: `<root>/<project dir>/<session dir>`.
pub fn session_dir(root: &Path, header: &SessionHeader) -> Result<PathBuf, LogError> {
    Ok(root
        .join(project_dir_name(header.cwd.as_deref())?)
        .join(encode_segment(&header.id)?))
}

/// The transcript path a header identifies in `root` for encoding `c` (spec §1.1 rule 6).
pub fn session_log_path(
    root: &Path,
    header: &SessionHeader,
    c: Compression,
) -> Result<PathBuf, LogError> {
    Ok(session_dir(root, header)?.join(c.transcript_name()))
}

/// The revision token of a transcript (spec §1.1): changes whenever the file is replaced, grows, or is
/// touched, so an index can skip a log whose token it has already seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revision {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl Revision {
    /// The revision of the file at `path` (following symlinks, as DSH's `stat` does).
    pub fn of(path: &Path) -> io::Result<Revision> {
        Ok(Self::from_metadata(&fs::metadata(path)?))
    }

    /// The revision described by already-fetched metadata.
    pub fn from_metadata(meta: &fs::Metadata) -> Revision {
        const NS: i128 = 1_000_000_000;
        Revision {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * NS + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * NS + i128::from(meta.ctime_nsec()),
        }
    }
}

impl Revision {
    /// The revision in a `stat` the caller made (the fields [`Revision::from_metadata`] reads).
    fn from_stat(stat: &libc::stat) -> Revision {
        const NS: i128 = 1_000_000_000;
        Revision {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime_ns: i128::from(stat.st_mtime) * NS + i128::from(stat.st_mtime_nsec),
            ctime_ns: i128::from(stat.st_ctime) * NS + i128::from(stat.st_ctime_nsec),
        }
    }

    /// Whether a file that had revision `before` and has this one now may have changed only by
    /// growing: the same file (device and inode) and longer. A replaced file, or one the same size or
    /// shorter whose times changed, was rewritten: it must be read whole. (Growth alone proves
    /// nothing about the bytes before; a reader resuming at a checkpoint still checks them.)
    pub fn may_only_have_grown_from(&self, before: &Revision) -> bool {
        self.dev == before.dev && self.ino == before.ino && self.size > before.size
    }
}

/// A revision token that does not parse (see [`Revision`]'s `Display`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a revision token (dev:ino:size:mtime_ns:ctime_ns): {0:?}")]
pub struct BadRevision(String);

impl std::str::FromStr for Revision {
    type Err = BadRevision;

    /// Parses what `Display` wrote.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadRevision(clip_for_message(s).to_string());
        let mut parts = s.split(':');
        let mut next = || parts.next().ok_or_else(bad);
        let (dev, ino, size, mtime, ctime) = (next()?, next()?, next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Revision {
            dev: dev.parse().map_err(|_| bad())?,
            ino: ino.parse().map_err(|_| bad())?,
            size: size.parse().map_err(|_| bad())?,
            mtime_ns: mtime.parse().map_err(|_| bad())?,
            ctime_ns: ctime.parse().map_err(|_| bad())?,
        })
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}:{}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns
        )
    }
}

/// One session found in a sessions root, known by its header alone (no events were read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedSession {
    pub header: SessionHeader,
    /// What the lenient header read accepted that strict v0 would refuse (DESIGN.md deviation 3).
    pub diagnostics: Vec<HeaderDiagnostic>,
    pub path: PathBuf,
    pub compression: Compression,
    /// Taken before the header was read, so any later change to the file shows as a new revision.
    pub revision: Revision,
}

/// Everything a listing found: the sessions that list, and one problem per path that could not be listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Sorted by path.
    pub sessions: Vec<ListedSession>,
    /// Each names the offending path and the rule it breaks.
    pub problems: Vec<LogError>,
}

/// A DSH-layout sessions root (spec §1.1), which may hold raw and zstd sessions side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsRoot {
    root: PathBuf,
}

/// How many threads `stat` a large root's sessions (the machines this runs on have a few cores; the
/// calls are independent lookups in the kernel's directory cache, so they scale with the cores).
const SCAN_THREADS: usize = 2;

/// From how many session dirs on a listing uses [`SCAN_THREADS`]: below it, starting a thread costs
/// about what it saves.
const PARALLEL_FROM: usize = 512;

/// From how many project folders a walk reads them on [`SCAN_THREADS`].
const PARALLEL_PROJECTS_FROM: usize = 8;

/// One entry of a listing's walk, in order: a problem found while reading the directories, or a
/// session dir's transcript as its `stat` found it (none, one, or that session's error).
enum WalkSlot {
    Problem(LogError),
    Session(Result<Option<Candidate>, LogError>),
}

/// A root walked: its directories read and its transcripts `stat`ed ([`SessionsRoot::walk`]), waiting
/// to be finished into a listing ([`SessionsRoot::list_walked`]).
pub struct Walk {
    root: PathBuf,
    /// `None`: the root is missing.
    slots: Option<Vec<WalkSlot>>,
}

impl fmt::Debug for Walk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Walk")
            .field("root", &self.root)
            .field("slots", &self.slots.as_ref().map(Vec::len))
            .finish()
    }
}

/// What a walk saw, as 32 bytes: equal digests mean the same root walked to the same directories, the
/// same transcripts with the same revisions and the same problems, in the same order (BLAKE3, so no
/// change to any of them passes as another). [`Walk::digest`].
pub type WalkDigest = [u8; 32];

/// Fields written one after another for a [`WalkDigest`], each length-prefixed (so no two different
/// sequences of fields write the same bytes), and hashed in one piece at the end: BLAKE3 over one
/// buffer hashes many chunks at once, where a call per field (a walk feeds hundreds of thousands)
/// was a tenth of a one-shot command's walk.
#[derive(Debug, Default)]
pub struct DigestFields(Vec<u8>);

impl DigestFields {
    pub fn new(domain: &[u8]) -> Self {
        Self::with_capacity(domain, 4096)
    }

    /// [`DigestFields::new`] for about `bytes` bytes of fields (no reallocation on the way).
    pub fn with_capacity(domain: &[u8], bytes: usize) -> Self {
        let mut fields = Self(Vec::with_capacity(bytes));
        fields.field(domain);
        fields
    }

    pub fn field(&mut self, bytes: &[u8]) {
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.0.extend_from_slice(bytes);
    }

    pub fn digest(&self) -> WalkDigest {
        *blake3::hash(&self.0).as_bytes()
    }
}

impl Walk {
    /// The digest of everything this walk saw: the root, every project folder's problems and session
    /// dirs in walk order, each transcript's path, encoding and revision. A listing finished from two
    /// walks with the same digest is the same listing (headers are taken by revision), so an index
    /// that stored the digest of the walk it was brought up to date from can tell, from a new walk
    /// alone, that nothing on disk changed since.
    ///
    /// `None` when the walk cannot vouch for a transcript: one that is not a regular file by `lstat`
    /// (a symbolic link, say) is listed by following it, and its target may change while the walk's
    /// `lstat` stays the same.
    pub fn digest(&self) -> Option<WalkDigest> {
        // About a path and a revision per slot.
        let size = self.slots.as_ref().map_or(0, |s| s.len() * 200);
        let mut fields = DigestFields::with_capacity(b"dsh-walk-1", size);
        let mut bytes = |b: &[u8]| fields.field(b);
        bytes(path_bytes(&self.root));
        let Some(slots) = &self.slots else {
            bytes(b"missing");
            return Some(fields.digest());
        };
        bytes(b"present");
        for slot in slots {
            match slot {
                WalkSlot::Problem(err) | WalkSlot::Session(Err(err)) => {
                    bytes(b"problem");
                    bytes(err.code.as_str().as_bytes());
                    bytes(err.path.as_deref().map(path_bytes).unwrap_or_default());
                    bytes(err.message.as_bytes());
                }
                WalkSlot::Session(Ok(None)) => bytes(b"empty"),
                WalkSlot::Session(Ok(Some(candidate))) => {
                    let revision = candidate.revision?;
                    bytes(b"transcript");
                    bytes(path_bytes(&candidate.path));
                    bytes(encoding_word(candidate.compression).as_bytes());
                    bytes(&revision.dev.to_le_bytes());
                    bytes(&revision.ino.to_le_bytes());
                    bytes(&revision.size.to_le_bytes());
                    bytes(&revision.mtime_ns.to_le_bytes());
                    bytes(&revision.ctime_ns.to_le_bytes());
                }
            }
        }
        Some(fields.digest())
    }
}

fn path_bytes(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes()
}

/// `work` over `items`, split in order over at most `threads` scoped threads when there are at
/// least [`PARALLEL_FROM`] items (the calling thread takes the first part); the results in order.
fn on_threads<I: Sync, O: Send>(
    items: &[I],
    threads: usize,
    work: impl Fn(&[I]) -> Vec<O> + Sync,
) -> Vec<O> {
    let threads = if items.len() >= PARALLEL_FROM {
        threads.max(1)
    } else {
        1
    };
    let chunk = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let mut parts = items.chunks(chunk);
        let first = parts.next().unwrap_or(&[]);
        let others: Vec<_> = parts.map(|part| scope.spawn(move || work(part))).collect();
        let mut outcomes = work(first);
        for other in others {
            match other.join() {
                Ok(more) => outcomes.extend(more),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        outcomes
    })
}

/// How many threads read `projects`' folders: one for a root of few projects, where a thread would cost
/// about what it saves.
fn project_threads(projects: &[PathBuf], threads: usize) -> usize {
    if projects.len() >= PARALLEL_PROJECTS_FROM {
        threads
    } else {
        1
    }
}

/// `work` on each of `items` over at most `threads` scoped threads, each taking the next item not yet
/// taken (items of very different costs, such as folders of very different sizes, still share the
/// threads evenly); the results in the items' order.
fn each_on_threads<I: Sync, O: Send>(
    items: &[I],
    threads: usize,
    work: impl Fn(&I) -> O + Sync,
) -> Vec<O> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, work(item)));
        }
    };
    let take = &take;
    let mut slots: Vec<Option<O>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads).map(|_| scope.spawn(take)).collect();
        let mut parts = vec![take()];
        for other in others {
            match other.join() {
                Ok(part) => parts.push(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        for (i, outcome) in parts.into_iter().flatten() {
            slots[i] = Some(outcome);
        }
    });
    // Every index below the length was taken exactly once.
    slots.into_iter().flatten().collect()
}

/// A session dir to look into: the index of its open project folder, and its path.
struct Job {
    folder: usize,
    path: PathBuf,
}

/// A transcript found on disk before its header is read.
#[derive(Clone)]
struct Candidate {
    path: PathBuf,
    compression: Compression,
    /// Its `lstat`, when that already is its revision (a regular file, not a symlink to one).
    revision: Option<Revision>,
}

/// What an earlier listing (or an index built from one) knows of transcripts, by path: a session whose
/// transcript still has the revision recorded there is listed from it without opening the file.
pub type KnownSessions = std::collections::HashMap<PathBuf, ListedSession>;

/// Where a listing looks up what is known of a transcript (see [`KnownSessions`]): a caller may keep
/// its last listing as it is and look paths up in it, rather than copy every session into a map.
/// Shared by the threads a large listing runs on.
pub trait Known: Sync {
    /// What is known of the transcript at `path`, if anything.
    fn known(&self, path: &Path) -> Option<&ListedSession>;
}

impl Known for KnownSessions {
    fn known(&self, path: &Path) -> Option<&ListedSession> {
        self.get(path)
    }
}

impl SessionsRoot {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lists every session in the root (spec §1.1 discovery rules 1–7, with DESIGN.md deviation 2).
    ///
    /// `Err` only when the root exists but is not a readable directory; a missing root lists nothing.
    pub fn list(&self) -> Result<Listing, LogError> {
        self.list_known(&KnownSessions::new())
    }

    /// [`SessionsRoot::list`], taking a session from `known` instead of reading its header when its
    /// transcript's revision (device, inode, size, mtime, ctime: one `stat`) is the one recorded there.
    /// A revision changes with any write, so the header is then the one read at that revision. An
    /// unchanged root is listed by reading directories and `stat`ing transcripts, no log opened.
    pub fn list_known(&self, known: &dyn Known) -> Result<Listing, LogError> {
        self.list_known_on(known, SCAN_THREADS)
    }

    /// [`SessionsRoot::list_known`] on at most `threads` threads.
    fn list_known_on(&self, known: &dyn Known, threads: usize) -> Result<Listing, LogError> {
        let walk = self.walk_on(threads)?;
        self.list_walked_on(walk, known, threads)
    }

    /// The first half of a listing: the root's directories read and every transcript `stat`ed, no log
    /// opened and nothing looked up yet. [`SessionsRoot::list_walked`] finishes it into the listing
    /// [`SessionsRoot::list_known`] would have made at the moment of the walk. So a caller can walk the
    /// root on one thread while it loads what it knows on another (a one-shot command over a large
    /// root spends about as long on each).
    pub fn walk(&self) -> Result<Walk, LogError> {
        self.walk_on(SCAN_THREADS)
    }

    /// [`SessionsRoot::walk`] on at most `threads` threads.
    fn walk_on(&self, threads: usize) -> Result<Walk, LogError> {
        let slots = self
            .project_dirs()?
            .map(|projects| self.walk_projects(&projects, threads));
        Ok(Walk {
            root: self.root.clone(),
            slots,
        })
    }

    /// Finishes a [`SessionsRoot::walk`] of this root into its listing, taking each session from
    /// `known` whose revision at the walk is the one recorded there, and reading the header of every
    /// other. A walk of another root lists nothing of it: it is walked again.
    pub fn list_walked(&self, walk: Walk, known: &dyn Known) -> Result<Listing, LogError> {
        if walk.root != self.root {
            return self.list_known(known);
        }
        self.list_walked_on(walk, known, SCAN_THREADS)
    }

    /// [`SessionsRoot::list_walked`] on at most `threads` threads.
    fn list_walked_on(
        &self,
        walk: Walk,
        known: &dyn Known,
        threads: usize,
    ) -> Result<Listing, LogError> {
        let mut listing = Listing::default();
        let Some(slots) = walk.slots else {
            return Ok(listing);
        };
        let mut found = Vec::new();
        self.finish_walk(slots, known, threads, &mut found, &mut listing.problems);
        listing.sessions.reserve(found.len());

        // `found` is in path order already (sorted projects, each one's entries sorted). Most ids are
        // unique: only the duplicated ones are grouped.
        let mut seen: HashMap<&str, usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(found.len(), Default::default());
        for session in &found {
            *seen.entry(session.header.id.as_str()).or_default() += 1;
        }
        let duplicated: HashSet<String> = seen
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(id, _)| id.to_string())
            .collect();
        let mut by_id: BTreeMap<String, Vec<ListedSession>> = BTreeMap::new();
        for session in found {
            if duplicated.contains(&session.header.id) {
                by_id
                    .entry(session.header.id.clone())
                    .or_default()
                    .push(session);
            } else {
                listing.sessions.push(session);
            }
        }
        for (id, sessions) in by_id {
            // Which copy is the real session cannot be known, so neither lists (rule 7).
            let paths: Vec<String> = sessions
                .iter()
                .map(|s| s.path.display().to_string())
                .collect();
            for (i, session) in sessions.iter().enumerate() {
                let others: Vec<&str> = paths
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, p)| p.as_str())
                    .collect();
                listing.problems.push(
                    LogError::new(
                        LogErrorCode::Layout,
                        format!(
                            "duplicate JSONL session id {:?}: also found at {}",
                            clip_for_message(&id),
                            others.join(", ")
                        ),
                    )
                    .at_path(&session.path),
                );
            }
        }
        // Still in path order: what the walk found, less the duplicated ids. (Sorting it again compared
        // 10,000 paths component by component for nothing.)
        debug_assert!(listing.sessions.is_sorted_by(|a, b| a.path <= b.path));
        Ok(listing)
    }

    /// Finds the session with this id (spec §1.1 rule 8), in either encoding. `Ok(None)` when no project
    /// holds it, including an id no session directory can be named after (empty, or encoded longer than a
    /// file name may be); `Err` when the lookup meets a layout error for this id, when the header fails,
    /// or when the header does not identify the path it was found at.
    pub fn find(&self, id: &str) -> Result<Option<ListedSession>, LogError> {
        // The writer refuses such ids, so no session can have one: asking the filesystem would only turn
        // "not found" into an error such as "File name too long".
        let Some(segment) = encode_segment(id).ok().filter(|s| s.len() <= NAME_MAX) else {
            return Ok(None);
        };
        let Some(projects) = self.project_dirs()? else {
            return Ok(None);
        };
        let mut matches = Vec::new();
        for project in projects {
            for c in ENCODINGS {
                let flat_name = format!("{segment}{}", flat_suffix(c));
                if flat_name.len() > NAME_MAX {
                    continue;
                }
                let flat = project.join(flat_name);
                if entry_kind(&flat)?.is_some_and(|ft| ft.is_file()) {
                    return Err(flat_artifact_error(&flat));
                }
            }
            let dir = project.join(&segment);
            if let Some(candidate) = transcript_in(&dir)? {
                matches.push(candidate);
            }
        }
        let candidate = match matches.len() {
            0 => return Ok(None),
            1 => matches.remove(0),
            _ => {
                let paths: Vec<String> = matches
                    .iter()
                    .map(|m| m.path.display().to_string())
                    .collect();
                return Err(LogError::new(
                    LogErrorCode::Layout,
                    format!(
                        "duplicate JSONL session id {:?}: found at {}",
                        clip_for_message(id),
                        paths.join(", ")
                    ),
                )
                .at_path(&matches[0].path));
            }
        };
        let session = self.read_candidate(candidate)?;
        if session.header.id != id {
            return Err(LogError::new(
                LogErrorCode::IdMismatch,
                format!(
                    "header id {:?} differs from the requested id {:?}",
                    clip_for_message(&session.header.id),
                    clip_for_message(id)
                ),
            )
            .at_path(&session.path));
        }
        self.check_identity(&session)?;
        Ok(Some(session))
    }

    /// The project directories directly under the root, sorted by name; `None` when the root is missing.
    fn project_dirs(&self) -> Result<Option<Vec<PathBuf>>, LogError> {
        let meta = match fs::metadata(&self.root) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(LogError::io(&self.root, &err)),
        };
        if !meta.is_dir() {
            return Err(LogError::new(
                LogErrorCode::Layout,
                "the sessions root is not a directory",
            )
            .at_path(&self.root));
        }
        let entries = sorted_entries(&self.root).map_err(|err| LogError::io(&self.root, &err))?;
        Ok(Some(
            entries
                .into_iter()
                .filter(|(_, ft)| ft.is_dir())
                .map(|(path, _)| path)
                .collect(),
        ))
    }

    /// Reads every project dir and `stat`s the transcripts of its session dirs: one slot per problem
    /// met reading the directories and per session dir, in the order a walk meets them. The `stat`s
    /// are split over `threads` threads when the root is large: on an unchanged root they are nearly
    /// all a one-shot command's work.
    fn walk_projects(&self, projects: &[PathBuf], threads: usize) -> Vec<WalkSlot> {
        // Transcripts are looked up relative to the open project folder: a listing `stat`s two per
        // session, and walking the whole path from the root for each was most of their cost.
        // The folders are read on [`SCAN_THREADS`] threads too: read one after another, they were a
        // fifth of a one-shot walk of a large root.
        let read = each_on_threads(projects, project_threads(projects, threads), |project| {
            (sorted_entries(project), fs::File::open(project).ok())
        });
        let mut folders: Vec<Option<fs::File>> = Vec::with_capacity(projects.len());
        let mut slots: Vec<WalkSlot> = Vec::new();
        let mut jobs: Vec<Job> = Vec::new();
        for (project, (entries, folder_file)) in projects.iter().zip(read) {
            let entries = match entries {
                Ok(entries) => entries,
                Err(err) => {
                    slots.push(WalkSlot::Problem(LogError::io(project, &err)));
                    continue;
                }
            };
            let folder = folders.len();
            folders.push(folder_file);
            slots.reserve(entries.len());
            jobs.reserve(entries.len());
            for (path, file_type) in entries {
                if file_type.is_file() {
                    if is_flat_artifact_name(&path) {
                        slots.push(WalkSlot::Problem(flat_artifact_error(&path)));
                    }
                    continue;
                }
                if file_type.is_dir() {
                    // Filled in below, once its transcripts are `stat`ed.
                    slots.push(WalkSlot::Session(Ok(None)));
                    jobs.push(Job { folder, path });
                }
            }
        }
        let stat = |jobs: &[Job]| -> Vec<Result<Option<Candidate>, LogError>> {
            jobs.iter()
                .map(
                    |job| match (folders[job.folder].as_ref(), job.path.file_name()) {
                        (Some(folder), Some(name)) => transcript_at(folder, name, &job.path),
                        _ => transcript_in(&job.path),
                    },
                )
                .collect()
        };
        let mut outcomes = on_threads(&jobs, threads, stat).into_iter();
        for slot in &mut slots {
            if let WalkSlot::Session(outcome) = slot {
                *outcome = outcomes.next().unwrap_or(Ok(None));
            }
        }
        slots
    }

    /// Collects the readable sessions of a walk, in path order; everything wrong with one becomes a
    /// problem, in the order the walk met it. Sessions not taken from `known` have their headers read,
    /// on `threads` threads when there are many.
    fn finish_walk(
        &self,
        slots: Vec<WalkSlot>,
        known: &dyn Known,
        threads: usize,
        found: &mut Vec<ListedSession>,
        problems: &mut Vec<LogError>,
    ) {
        // Sized up front: a large root's vectors of sessions grew by doubling, each step a copy into
        // freshly faulted pages, a visible share of a one-shot command.
        let mut candidates: Vec<Candidate> = Vec::with_capacity(slots.len());
        let mut order: Vec<Option<LogError>> = Vec::with_capacity(slots.len());
        for slot in slots {
            match slot {
                WalkSlot::Problem(err) | WalkSlot::Session(Err(err)) => order.push(Some(err)),
                WalkSlot::Session(Ok(Some(candidate))) => {
                    candidates.push(candidate);
                    order.push(None);
                }
                WalkSlot::Session(Ok(None)) => {}
            }
        }
        let finish = |candidates: &[Candidate]| -> Vec<Result<ListedSession, LogError>> {
            candidates
                .iter()
                .map(|candidate| self.finish_session(candidate, known))
                .collect()
        };
        let mut outcomes = on_threads(&candidates, threads, finish).into_iter();
        found.reserve(candidates.len());
        for problem in order {
            match problem {
                Some(err) => problems.push(err),
                None => match outcomes.next() {
                    Some(Ok(session)) => found.push(session),
                    Some(Err(err)) => problems.push(err),
                    None => {}
                },
            }
        }
    }

    /// The session of a transcript the walk found: the known one, or its header read and checked.
    fn finish_session(
        &self,
        candidate: &Candidate,
        known: &dyn Known,
    ) -> Result<ListedSession, LogError> {
        match self.known_or_read(candidate, known)? {
            // The known entry passed this check when it was listed: the same path and header
            // identify the same place (the check reads nothing else).
            (session, true) => Ok(session),
            (session, false) => {
                self.check_identity(&session)?;
                Ok(session)
            }
        }
    }

    /// The known session at the candidate's path when its revision is unchanged (`true`), else its
    /// header read (`false`).
    fn known_or_read(
        &self,
        candidate: &Candidate,
        known: &dyn Known,
    ) -> Result<(ListedSession, bool), LogError> {
        if let Some(k) = known.known(&candidate.path) {
            let revision = match candidate.revision {
                Some(r) => Some(r),
                None => Revision::of(&candidate.path).ok(),
            };
            if revision == Some(k.revision) && k.compression == candidate.compression {
                return Ok((k.clone(), true));
            }
        }
        Ok((self.read_candidate(candidate.clone())?, false))
    }

    /// Reads the header (leniently) and the revision of a transcript.
    fn read_candidate(&self, candidate: Candidate) -> Result<ListedSession, LogError> {
        let Candidate {
            path, compression, ..
        } = candidate;
        let revision = Revision::of(&path).map_err(|err| LogError::io(&path, &err))?;
        let (header, diagnostics, read_compression) =
            read_header(&path, &ReadOptions::default()).map_err(|err| err.at_path(&path))?;
        if read_compression != compression {
            return Err(LogError::new(
                LogErrorCode::Layout,
                format!(
                    "the transcript is named {} but its content is {}",
                    compression.transcript_name(),
                    encoding_word(read_compression)
                ),
            )
            .at_path(&path));
        }
        Ok(ListedSession {
            header,
            diagnostics,
            path,
            compression,
            revision,
        })
    }

    /// Rule 6: the header's id and cwd must identify the path the log was read from (or the same file, for
    /// case-insensitive filesystems).
    fn check_identity(&self, session: &ListedSession) -> Result<(), LogError> {
        let expected =
            session_log_path(&self.root, &session.header, session.compression).map_err(|err| {
                LogError::new(
                    LogErrorCode::Layout,
                    format!(
                        "header id {:?} cannot name a session directory: {}",
                        clip_for_message(&session.header.id),
                        err.message
                    ),
                )
                .at_path(&session.path)
            })?;
        if expected == session.path {
            return Ok(());
        }
        if let (Ok(a), Ok(b)) = (fs::canonicalize(&expected), fs::canonicalize(&session.path)) {
            if a == b {
                return Ok(());
            }
        }
        Err(LogError::new(
            LogErrorCode::Layout,
            format!(
                "header id {:?} and cwd {:?} identify {}, not this file",
                clip_for_message(&session.header.id),
                clip_for_message(session.header.cwd.as_deref().unwrap_or("(none)")),
                expected.display()
            ),
        )
        .at_path(&session.path))
    }
}

/// The transcript of a session dir, if it has one. Both transcripts in one dir is that session's error
/// (DESIGN.md deviation 3).
fn transcript_in(dir: &Path) -> Result<Option<Candidate>, LogError> {
    let mut present = Vec::new();
    for c in ENCODINGS {
        let path = dir.join(c.transcript_name());
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(LogError::io(&path, &err)),
        };
        let revision = meta
            .file_type()
            .is_file()
            .then(|| Revision::from_metadata(&meta));
        present.push(Candidate {
            path,
            compression: c,
            revision,
        });
    }
    one_transcript(present, dir)
}

/// [`transcript_in`] for the session dir `dir`, named `name` in the open project folder `folder`: the
/// same `lstat`s, relative to the folder (`fstatat`).
fn transcript_at(
    folder: &fs::File,
    name: &std::ffi::OsStr,
    dir: &Path,
) -> Result<Option<Candidate>, LogError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    // The relative path is written into a buffer on the stack, not made on the heap twice per session
    // (a walk of 10,000 sessions took about a tenth less CPU).
    let name = name.as_bytes();
    let mut buf = [0u8; NAME_MAX + 32];
    let mut found: Option<Candidate> = None;
    for c in ENCODINGS {
        let transcript = c.transcript_name().as_bytes();
        let len = name.len() + 1 + transcript.len();
        // A directory entry's name holds no NUL byte and fits a file name; anything else takes the
        // general path, which reports it.
        if len >= buf.len() || name.contains(&0) {
            return transcript_in(dir);
        }
        buf[..name.len()].copy_from_slice(name);
        buf[name.len()] = b'/';
        buf[name.len() + 1..len].copy_from_slice(transcript);
        buf[len] = 0;
        // SAFETY: `stat` is plain data the call fills in; the descriptor is open for the call.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated path (the byte at `len`, none before it) and a
        // `stat` to write into.
        let rc = unsafe {
            libc::fstatat(
                folder.as_raw_fd(),
                buf.as_ptr().cast(),
                &mut stat,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::NotFound {
                continue;
            }
            return Err(LogError::io(&dir.join(c.transcript_name()), &err));
        }
        let revision =
            (stat.st_mode & libc::S_IFMT == libc::S_IFREG).then(|| Revision::from_stat(&stat));
        // The path is made only for a transcript that is there (most sessions have one of the two).
        let candidate = Candidate {
            path: dir.join(c.transcript_name()),
            compression: c,
            revision,
        };
        match found.take() {
            None => found = Some(candidate),
            Some(first) => return one_transcript(vec![first, candidate], dir),
        }
    }
    Ok(found)
}

/// The one transcript found in `dir`, if any; both is that session's error.
fn one_transcript(mut present: Vec<Candidate>, dir: &Path) -> Result<Option<Candidate>, LogError> {
    match present.len() {
        0 => Ok(None),
        1 => Ok(present.pop()),
        _ => Err(LogError::new(
            LogErrorCode::Layout,
            format!(
                "the session directory holds both {} and {}",
                Compression::None.transcript_name(),
                Compression::Zstd.transcript_name()
            ),
        )
        .at_path(dir)),
    }
}

/// The type of a directory entry without following symlinks; `None` when nothing is there.
fn entry_kind(path: &Path) -> Result<Option<fs::FileType>, LogError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta.file_type())),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(LogError::io(path, &err)),
    }
}

/// A directory's entries with their types (symlinks not followed, like DSH's `readdir` dirents), sorted by
/// name so listings are deterministic.
fn sorted_entries(dir: &Path) -> io::Result<Vec<(PathBuf, fs::FileType)>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        entries.push((entry.file_name(), entry.path(), entry.file_type()?));
    }
    // By name: every entry has the same parent, so this is the paths' order, without comparing the
    // whole paths component by component (a large share of listing a big root).
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries
        .into_iter()
        .map(|(_, path, kind)| (path, kind))
        .collect())
}

fn flat_suffix(c: Compression) -> &'static str {
    match c {
        Compression::None => ".jsonl",
        Compression::Zstd => ".jsonl.zstd",
    }
}

fn is_flat_artifact_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|name| ENCODINGS.iter().any(|c| name.ends_with(flat_suffix(*c))))
}

fn flat_artifact_error(path: &Path) -> LogError {
    LogError::new(
        LogErrorCode::Layout,
        "a session log in the obsolete flat layout (a project dir holds session directories, not log files)",
    )
    .at_path(path)
}

fn encoding_word(c: Compression) -> &'static str {
    match c {
        Compression::None => "raw JSONL",
        Compression::Zstd => "Zstandard",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large root is listed on several threads: the listing (sessions, problems and their order)
    /// is the one a single thread makes, and a change anywhere in it, in either thread's share, is
    /// seen by the next listing that takes the rest from the one before.
    #[test]
    fn a_root_listed_on_two_threads_lists_what_one_thread_does_and_sees_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = SessionsRoot::new(dir.path());
        let write = |id: &str, cwd: &str, c: Compression| {
            let header = SessionHeader::new(id, 0, Some(cwd.into()));
            let path = session_log_path(dir.path(), &header, c).unwrap();
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            let line = format!("{}\n", header.to_json_line());
            match c {
                Compression::None => fs::write(&path, line).unwrap(),
                Compression::Zstd => {
                    fs::write(&path, zstd::encode_all(line.as_bytes(), 1).unwrap()).unwrap()
                }
            }
            path
        };
        let n = PARALLEL_FROM + 100;
        for i in 0..n {
            let c = if i % 4 == 0 {
                Compression::Zstd
            } else {
                Compression::None
            };
            write(&format!("s{i:04}"), &format!("/w/p{}", i % 3), c);
        }
        // Problems in both halves: a dir holding both transcripts, a flat artifact, an empty dir.
        write("s0010", "/w/p1", Compression::Zstd);
        write(
            &format!("s{:04}", n - 10),
            &format!("/w/p{}", (n - 10) % 3),
            Compression::Zstd,
        );
        fs::write(dir.path().join("--w-p0--/flat.jsonl"), "{}").unwrap();
        fs::create_dir_all(dir.path().join("--w-p2--/empty")).unwrap();
        let one = root.list_known_on(&KnownSessions::new(), 1).unwrap();
        let two = root.list_known_on(&KnownSessions::new(), 2).unwrap();
        assert_eq!(one, two);
        assert_eq!(two.sessions.len(), n - 2, "{:?}", two.problems.get(1));
        assert_eq!(two.problems.len(), 3, "{:?}", two.problems);

        // Taken from the listing before, except what changed: an append in the first share, a
        // replaced log and a new session in the last one, a session gone, a transcript name switch.
        let known: KnownSessions = two
            .sessions
            .iter()
            .map(|s| (s.path.clone(), s.clone()))
            .collect();
        let first = two.sessions[1].path.clone();
        let mut f = fs::OpenOptions::new().append(true).open(&first).unwrap();
        std::io::Write::write_all(&mut f, b"\n").unwrap();
        drop(f);
        let last = two.sessions[n - 4].path.clone();
        let tmp = last.with_extension("tmp");
        fs::copy(&last, &tmp).unwrap();
        fs::rename(&tmp, &last).unwrap();
        let gone = two.sessions[n / 2].path.clone();
        fs::remove_dir_all(gone.parent().unwrap()).unwrap();
        let new = write("zz-new", "/w/p0", Compression::None);
        let switched = two.sessions[n / 2 + 1].path.clone();
        assert_eq!(switched.file_name().unwrap(), "session.jsonl");
        let id = two.sessions[n / 2 + 1].header.id.clone();
        let cwd = two.sessions[n / 2 + 1].header.cwd.clone().unwrap();
        fs::remove_file(&switched).unwrap();
        let zstd_path = write(&id, &cwd, Compression::Zstd);

        let again = root.list_known_on(&known, 2).unwrap();
        assert_eq!(again, root.list_known_on(&KnownSessions::new(), 1).unwrap());
        let find = |p: &Path| again.sessions.iter().find(|s| s.path == p);
        assert_ne!(find(&first).unwrap().revision, known[&first].revision);
        assert_ne!(find(&last).unwrap().revision, known[&last].revision);
        assert!(find(&gone).is_none());
        assert!(find(&new).is_some());
        assert!(find(&switched).is_none());
        assert_eq!(find(&zstd_path).unwrap().compression, Compression::Zstd);
    }

    /// Project folders read on two threads (each taking the next folder) list what one thread does:
    /// the same sessions, the same problems in the same order, and a walk with the same digest.
    #[test]
    fn a_root_of_many_projects_read_on_two_threads_lists_what_one_thread_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = SessionsRoot::new(dir.path());
        let projects = PARALLEL_PROJECTS_FROM + 5;
        // Folders of very different sizes, so the threads' shares interleave unevenly.
        let sessions_in = |p: usize| 1 + (p * 7) % 11;
        for p in 0..projects {
            for i in 0..sessions_in(p) {
                let header = SessionHeader::new(format!("p{p}-s{i}"), 0, Some(format!("/w/p{p}")));
                let path = session_log_path(dir.path(), &header, Compression::None).unwrap();
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, format!("{}\n", header.to_json_line())).unwrap();
            }
            if p % 3 == 0 {
                let folder = session_log_path(
                    dir.path(),
                    &SessionHeader::new("x", 0, Some(format!("/w/p{p}"))),
                    Compression::None,
                )
                .unwrap();
                let folder = folder.parent().unwrap().parent().unwrap();
                fs::write(folder.join("flat.jsonl"), "{}").unwrap();
            }
        }
        let one = root.list_known_on(&KnownSessions::new(), 1).unwrap();
        let two = root.list_known_on(&KnownSessions::new(), 2).unwrap();
        assert_eq!(one, two);
        let flats = projects.div_ceil(3);
        assert_eq!(two.problems.len(), flats, "{:?}", two.problems);
        assert_eq!(
            two.sessions.len(),
            (0..projects).map(sessions_in).sum::<usize>()
        );
        assert_eq!(
            root.walk_on(1).unwrap().digest(),
            root.walk_on(2).unwrap().digest()
        );
    }

    /// The threads that take items one at a time hand back the results in the items' order, however
    /// long each item took.
    #[test]
    fn each_on_threads_keeps_the_items_order_whatever_each_costs() {
        let items: Vec<u64> = (0..40).collect();
        let out = each_on_threads(&items, 3, |&i| {
            std::thread::sleep(std::time::Duration::from_micros((i * 37) % 500));
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(each_on_threads(&[] as &[u64], 2, |&i| i).is_empty());
    }

    /// Sessions `s0`, `s1`, `s2` (a header line each) under `root`; their transcripts' paths.
    fn three_sessions(root: &Path) -> Vec<PathBuf> {
        (0..3)
            .map(|i| {
                let header = SessionHeader::new(format!("s{i}"), 0, Some("/w".into()));
                let path = session_log_path(root, &header, Compression::None).unwrap();
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, format!("{}\n", header.to_json_line())).unwrap();
                path
            })
            .collect()
    }

    /// A walk is the listing's `stat`s taken at the walk: finished later, it lists what a listing at
    /// the walk would have, problems included, even after a log changed since; a walk of another
    /// root is not taken for this one.
    #[test]
    fn a_walk_finished_later_lists_the_root_as_it_was_at_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = SessionsRoot::new(dir.path());
        let paths = three_sessions(dir.path());
        fs::write(dir.path().join("--w--/flat.jsonl"), "{}").unwrap();
        let before = root.list().unwrap();
        assert_eq!((before.sessions.len(), before.problems.len()), (3, 1));

        let walk = root.walk().unwrap();
        let mut f = fs::OpenOptions::new().append(true).open(&paths[0]).unwrap();
        std::io::Write::write_all(&mut f, b"\n").unwrap();
        drop(f);
        let known: KnownSessions = before
            .sessions
            .iter()
            .map(|s| (s.path.clone(), s.clone()))
            .collect();
        assert_eq!(root.list_walked(walk, &known).unwrap(), before);
        assert_ne!(root.list_known(&known).unwrap(), before, "the append shows");

        let other = tempfile::tempdir().unwrap();
        let walk = SessionsRoot::new(other.path()).walk().unwrap();
        assert_eq!(
            root.list_walked(walk, &known).unwrap(),
            root.list_known(&known).unwrap()
        );
        // A missing root walks to an empty listing, as it lists.
        let missing = SessionsRoot::new(dir.path().join("missing"));
        let walk = missing.walk().unwrap();
        assert_eq!(
            missing.list_walked(walk, &known).unwrap(),
            Listing::default()
        );
    }

    /// Two walks of an unchanged root have one digest; any change a listing could show (a transcript
    /// grown, touched, rewritten at the same size, replaced, added, removed, a second transcript
    /// beside one, a flat artifact) gives another, and a transcript the walk cannot vouch for (a
    /// symbolic link) gives none.
    #[test]
    fn a_walk_digest_changes_with_every_change_a_listing_could_show() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let root = SessionsRoot::new(dir.path());
        let paths = three_sessions(dir.path());
        let digest = || root.walk().unwrap().digest().expect("regular transcripts");
        let mut seen = vec![digest()];
        assert_eq!(
            digest(),
            seen[0],
            "an unchanged root walks to the same digest"
        );
        let changed = |what: &str, seen: &mut Vec<WalkDigest>| {
            let now = digest();
            assert!(!seen.contains(&now), "{what} changes the digest");
            seen.push(now);
        };

        let append = |path: &Path, bytes: &[u8]| {
            let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
            std::io::Write::write_all(&mut f, bytes).unwrap();
        };
        append(&paths[0], b"\n");
        changed("an append", &mut seen);
        let text = fs::read(&paths[1]).unwrap();
        let mtime = fs::metadata(&paths[1]).unwrap().modified().unwrap();
        let mut flipped = text.clone();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'}' { b' ' } else { b'}' };
        fs::write(&paths[1], &flipped).unwrap();
        fs::File::options()
            .write(true)
            .open(&paths[1])
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        changed("a same-size edit with the mtime put back", &mut seen);
        let replacement = paths[2].with_extension("new");
        fs::write(&replacement, fs::read(&paths[2]).unwrap()).unwrap();
        fs::rename(&replacement, &paths[2]).unwrap();
        changed("a rename over the transcript", &mut seen);
        let header = SessionHeader::new("s3", 0, Some("/w".into()));
        let added = session_log_path(dir.path(), &header, Compression::None).unwrap();
        fs::create_dir_all(added.parent().unwrap()).unwrap();
        fs::write(&added, format!("{}\n", header.to_json_line())).unwrap();
        changed("a new session", &mut seen);
        fs::write(added.with_file_name("session.jsonl.zstd"), b"").unwrap();
        changed("a second transcript beside one", &mut seen);
        fs::remove_dir_all(added.parent().unwrap()).unwrap();
        assert_eq!(
            digest(),
            seen[3],
            "the session removed: the root walks as before it was added"
        );
        seen.truncate(4);
        fs::write(dir.path().join("--w--/flat.jsonl"), "{}").unwrap();
        changed("a flat artifact", &mut seen);

        let linked = dir.path().join("--w--/s9");
        fs::create_dir_all(&linked).unwrap();
        symlink(&paths[0], linked.join("session.jsonl")).unwrap();
        assert_eq!(
            root.walk().unwrap().digest(),
            None,
            "a symlinked transcript"
        );

        let missing = SessionsRoot::new(dir.path().join("missing"));
        let empty = tempfile::tempdir().unwrap();
        assert_ne!(
            missing.walk().unwrap().digest(),
            SessionsRoot::new(empty.path()).walk().unwrap().digest(),
            "a missing root is not an empty one"
        );
    }

    #[test]
    fn project_key_escapes_each_surrogate_half_and_collapses_separator_runs() {
        assert_eq!(project_key("/x/😀").unwrap(), "--x-~D83D~DE00--");
        assert_eq!(project_key("//a\\:/b c").unwrap(), "--a-b~0020c--");
        // Only separators collapse; a literal `-` is kept, and leading ones are stripped.
        assert_eq!(project_key("/-a/-").unwrap(), "--a----");
        assert_eq!(project_key(":::").unwrap(), "--root--");
        assert_eq!(project_key("").unwrap_err().code, LogErrorCode::Layout);
    }

    #[test]
    fn project_key_keeps_at_most_251_slug_characters() {
        let long = format!("/{}", "a".repeat(300));
        let key = project_key(&long).unwrap();
        assert_eq!(key.len(), 251 + 4);
        assert_eq!(key, format!("--{}--", "a".repeat(251)));
        // The cut counts characters of the escaped slug, so it may split an escape.
        let key = project_key(&format!("/{}é", "a".repeat(249))).unwrap();
        assert_eq!(key, format!("--{}~0--", "a".repeat(249)));
    }

    #[test]
    fn segments_are_escaped_and_dot_names_never_name_a_parent() {
        assert_eq!(encode_segment("abc-1.2_3").unwrap(), "abc-1.2_3");
        assert_eq!(encode_segment(".").unwrap(), "~002E");
        assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
        assert_eq!(encode_segment("...").unwrap(), "...");
        assert_eq!(encode_segment("a/b~c").unwrap(), "a~002Fb~007Ec");
        assert_eq!(encode_segment("😀").unwrap(), "~D83D~DE00");
        assert_eq!(encode_segment("").unwrap_err().code, LogErrorCode::Layout);
        assert_eq!(project_dir_name(None).unwrap(), "_no-cwd");
    }

    #[test]
    fn session_log_path_joins_root_project_session_and_transcript() {
        let header = SessionHeader::new("s 1", 0, Some("/w/p".into()));
        let path = session_log_path(Path::new("/r"), &header, Compression::Zstd).unwrap();
        assert_eq!(path, Path::new("/r/--w-p--/s~00201/session.jsonl.zstd"));
        let header = SessionHeader::new("s", 0, None);
        let path = session_log_path(Path::new("/r"), &header, Compression::None).unwrap();
        assert_eq!(path, Path::new("/r/_no-cwd/s/session.jsonl"));
    }

    #[test]
    fn revision_displays_as_colon_separated_fields() {
        let r = Revision {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4_000_000_005,
            ctime_ns: -6,
        };
        assert_eq!(r.to_string(), "1:2:3:4000000005:-6");
        assert_eq!("1:2:3:4000000005:-6".parse::<Revision>(), Ok(r));
        for bad in ["", "1:2:3:4", "1:2:3:4:5:6", "1:x:3:4:5", "-1:2:3:4:5"] {
            assert!(bad.parse::<Revision>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_longer_file_with_the_same_identity_may_have_only_grown() {
        let before = Revision {
            dev: 1,
            ino: 2,
            size: 100,
            mtime_ns: 10,
            ctime_ns: 10,
        };
        let grown = Revision {
            size: 150,
            mtime_ns: 20,
            ctime_ns: 20,
            ..before
        };
        assert!(grown.may_only_have_grown_from(&before));
        // Another inode (`sed -i`, a rename over the log), another device, the same size with new
        // times (an edit in place, `cat new > log`), or shorter: rewritten.
        assert!(!Revision { ino: 3, ..grown }.may_only_have_grown_from(&before));
        assert!(!Revision { dev: 9, ..grown }.may_only_have_grown_from(&before));
        assert!(!Revision { size: 100, ..grown }.may_only_have_grown_from(&before));
        assert!(!Revision { size: 99, ..grown }.may_only_have_grown_from(&before));
    }
}
