//! Finding the other harnesses' transcripts and reading them: a listing costs a `stat` per file plus,
//! for a file that changed since the last listing, its first records (the header); the headers of
//! unchanged files are remembered by revision.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dsh_codec::log::layout::{DigestFields, ListedSession, Revision, WalkDigest};
use dsh_codec::log::{Compression, LogError, LogErrorCode, SessionHeader};
use dsh_codec::source::SourceKind;

use super::lines::{read_prefix, read_records, Record};
use super::{claude, codex, Imported, SourceRoots};

/// Deepest folder a Codex walk descends (`sessions/YYYY/MM/DD/`).
const CODEX_DEPTH: usize = 4;

/// What one listing found: the sessions, and one problem per transcript that could not be listed.
#[derive(Debug, Default)]
pub struct SourceListing {
    pub sessions: Vec<ListedSession>,
    pub problems: Vec<LogError>,
}

/// One source's folder walked: what reading its folders met, and each transcript with its `stat`.
struct SourceFolder {
    kind: SourceKind,
    root: PathBuf,
    problems: Vec<LogError>,
    files: Vec<(PathBuf, Result<Revision, LogError>)>,
}

/// Every source's folder walked, in the order [`SourceRoots::each`] gives them.
struct SourceWalk(Vec<SourceFolder>);

impl SourceWalk {
    fn digest(&self) -> WalkDigest {
        let mut fields = DigestFields::new(b"dsh-source-walk-1");
        let mut bytes = |b: &[u8]| fields.field(b);
        let problem = |bytes: &mut dyn FnMut(&[u8]), e: &LogError| {
            bytes(b"problem");
            bytes(e.code.as_str().as_bytes());
            bytes(e.path.as_deref().map(path_bytes).unwrap_or_default());
            bytes(e.message.as_bytes());
        };
        for folder in &self.0 {
            bytes(folder.kind.as_str().as_bytes());
            bytes(path_bytes(&folder.root));
            for e in &folder.problems {
                problem(&mut bytes, e);
            }
            for (path, revision) in &folder.files {
                match revision {
                    Ok(r) => {
                        bytes(b"transcript");
                        bytes(path_bytes(path));
                        bytes(r.to_string().as_bytes());
                    }
                    Err(e) => problem(&mut bytes, e),
                }
            }
        }
        fields.digest()
    }
}

fn path_bytes(path: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes()
}

/// The configured sources and what their last listing learned.
#[derive(Debug)]
pub struct Sources {
    roots: SourceRoots,
    headers: Mutex<HashMap<PathBuf, (Revision, SessionHeader)>>,
}

impl Sources {
    pub fn new(roots: SourceRoots) -> Self {
        Self {
            roots,
            headers: Mutex::new(HashMap::new()),
        }
    }

    pub fn roots(&self) -> &SourceRoots {
        &self.roots
    }

    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Which source the transcript at `path` belongs to, `None` when it is under none of them.
    pub fn kind_of(&self, path: &Path) -> Option<SourceKind> {
        self.roots
            .each()
            .into_iter()
            .find(|(_, root)| path.starts_with(root))
            .map(|(kind, _)| kind)
    }

    /// Every transcript of every source, in path order per source. A folder that does not exist lists
    /// nothing; one that cannot be read, and each transcript whose start cannot be read, is a problem.
    pub fn list(&self) -> SourceListing {
        self.list_walked(self.walk())
    }

    /// [`Sources::list`] with the digest of the walk it was made from ([`Sources::walk_digest`]).
    pub fn list_with_digest(&self) -> (SourceListing, WalkDigest) {
        let walk = self.walk();
        let digest = walk.digest();
        (self.list_walked(walk), digest)
    }

    /// What a listing would see, as 32 bytes: the folders and every transcript's path and revision
    /// (a `stat` each, no file opened). Two listings from walks with one digest are the same listing,
    /// since a transcript's header is taken by its revision.
    pub fn walk_digest(&self) -> WalkDigest {
        self.walk().digest()
    }

    /// The folders read and every transcript `stat`ed.
    fn walk(&self) -> SourceWalk {
        let mut walked = Vec::new();
        for (kind, root) in self.roots.each() {
            let mut files = Vec::new();
            let mut problems = Vec::new();
            match kind {
                SourceKind::Claude => claude_files(root, &mut files, &mut problems),
                _ => {
                    for sub in ["sessions", "archived_sessions"] {
                        walk(
                            &root.join(sub),
                            CODEX_DEPTH,
                            &mut files,
                            &mut problems,
                            &|n| n.starts_with("rollout-") && n.ends_with(".jsonl"),
                        );
                    }
                }
            }
            let files = files
                .into_iter()
                .map(|path| {
                    let revision = Revision::of(&path).map_err(|e| LogError::io(&path, &e));
                    (path, revision)
                })
                .collect();
            walked.push(SourceFolder {
                kind,
                root: root.to_path_buf(),
                problems,
                files,
            });
        }
        SourceWalk(walked)
    }

    /// The listing of a walk: headers of unchanged transcripts from the last listing, the others' read.
    fn list_walked(&self, walk: SourceWalk) -> SourceListing {
        let mut out = SourceListing::default();
        let mut seen: HashSet<String> = HashSet::new();
        let mut known = self.headers.lock().unwrap_or_else(|p| p.into_inner());
        let mut keep: HashSet<PathBuf> = HashSet::new();
        for folder in walk.0 {
            let SourceFolder {
                kind,
                root,
                problems,
                files,
            } = folder;
            out.problems.extend(problems);
            for (path, revision) in files {
                let revision = match revision {
                    Ok(r) => r,
                    Err(e) => {
                        out.problems.push(e);
                        continue;
                    }
                };
                let header = match known.get(&path) {
                    Some((rev, h)) if *rev == revision => Ok(h.clone()),
                    _ => listing_header(kind, &root, &path),
                };
                let header = match header {
                    Ok(h) => h,
                    Err(e) => {
                        out.problems.push(e);
                        continue;
                    }
                };
                keep.insert(path.clone());
                known.insert(path.clone(), (revision, header.clone()));
                if !seen.insert(header.id.clone()) {
                    out.problems.push(
                        LogError::new(
                            LogErrorCode::Layout,
                            format!(
                                "session {:?} is listed twice; this copy is left out",
                                header.id
                            ),
                        )
                        .at_path(&path),
                    );
                    continue;
                }
                out.sessions.push(ListedSession {
                    header,
                    diagnostics: Vec::new(),
                    path,
                    compression: Compression::None,
                    revision,
                });
            }
        }
        known.retain(|p, _| keep.contains(p));
        out
    }

    /// The listed transcript of `id`, when a source has one.
    pub fn find(&self, id: &str) -> Option<ListedSession> {
        if SourceKind::of_id(id) == SourceKind::Dsh {
            return None;
        }
        self.list().sessions.into_iter().find(|s| s.header.id == id)
    }

    /// Reads and maps a listed transcript. It must still be the session it was listed as.
    pub fn read(&self, listed: &ListedSession) -> Result<Imported, LogError> {
        let path = &listed.path;
        let kind = self.kind_of(path).ok_or_else(|| {
            LogError::new(LogErrorCode::Layout, "not under a configured source").at_path(path)
        })?;
        let records = read_records(path)?;
        let imported = match kind {
            SourceKind::Claude => {
                let place = self.claude_place(path)?;
                claude::import(&place, &records)
            }
            _ => codex::import(&codex_id(path, &records)?, &records),
        };
        if !imported.header.compatible_with(&listed.header)
            || imported.header.id != listed.header.id
        {
            return Err(LogError::new(
                LogErrorCode::IdMismatch,
                "the transcript's start changed since it was listed",
            )
            .at_path(path));
        }
        Ok(imported)
    }

    fn claude_place(&self, path: &Path) -> Result<claude::Placement, LogError> {
        let root = self
            .roots
            .claude_projects
            .as_deref()
            .unwrap_or(Path::new(""));
        claude::placement(root, path).ok_or_else(|| {
            LogError::new(LogErrorCode::Layout, "not a Claude Code transcript path").at_path(path)
        })
    }
}

fn codex_id(path: &Path, records: &[Record]) -> Result<String, LogError> {
    codex::session_id(path, records).ok_or_else(|| {
        LogError::new(
            LogErrorCode::InvalidHeader,
            "a Codex rollout without a session_meta id or a uuid in its name",
        )
        .at_path(path)
    })
}

fn listing_header(kind: SourceKind, root: &Path, path: &Path) -> Result<SessionHeader, LogError> {
    match kind {
        SourceKind::Claude => {
            let place = claude::placement(root, path).ok_or_else(|| {
                LogError::new(LogErrorCode::Layout, "not a Claude Code transcript path")
                    .at_path(path)
            })?;
            let records = read_prefix(path, claude::HEADER_RECORDS)?;
            Ok(claude::header(&place, &records))
        }
        _ => {
            let records = read_prefix(path, codex::HEADER_RECORDS)?;
            Ok(codex::header(&codex_id(path, &records)?, &records))
        }
    }
}

/// `<projects>/<project>/<uuid>.jsonl` and `<projects>/<project>/<uuid>/subagents/agent-*.jsonl`.
fn claude_files(root: &Path, files: &mut Vec<PathBuf>, problems: &mut Vec<LogError>) {
    for project in dir_entries(root, problems) {
        if !project.is_dir() {
            continue;
        }
        for entry in dir_entries(&project, problems) {
            let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".jsonl") && !entry.is_dir() {
                files.push(entry);
            } else if entry.is_dir() {
                let subagents = entry.join("subagents");
                if subagents.is_dir() {
                    walk(&subagents, 0, files, problems, &|n| {
                        n.starts_with("agent-") && n.ends_with(".jsonl")
                    });
                }
            }
        }
    }
}

/// The files under `dir` (down to `depth` folders) whose name `wanted` accepts, in path order.
fn walk(
    dir: &Path,
    depth: usize,
    files: &mut Vec<PathBuf>,
    problems: &mut Vec<LogError>,
    wanted: &dyn Fn(&str) -> bool,
) {
    for entry in dir_entries(dir, problems) {
        let name = entry.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if entry.is_dir() {
            if depth > 0 {
                walk(&entry, depth - 1, files, problems, wanted);
            }
        } else if wanted(name) {
            // Anything by that name is listed: one that is not a regular file is reported by the read.
            files.push(entry);
        }
    }
}

/// The entries of `dir` sorted by path; none when it does not exist, a problem when it cannot be read.
fn dir_entries(dir: &Path, problems: &mut Vec<LogError>) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut out: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            out.sort();
            out
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            problems.push(LogError::io(dir, &e));
            Vec::new()
        }
    }
}
